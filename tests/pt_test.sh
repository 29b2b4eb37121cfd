#!/usr/bin/env bash
# Checkpoints as they come (issue 30), from committed fixtures
# (tests/ref/pt/make_fixtures.py wrote them with Debian's python3-torch; this
# test needs neither): nanoGPT's ckpt.pt runs with no flag but the input and
# its logits equal PyTorch's (--expect), by --ids (a batch) or --text (its
# meta.pkl); compiled and bias-free checkpoints too; a layout shapes cannot
# tell is asked for, never guessed; --expect fails beyond --tol; a GPT-2 folder
# without tokenizer files reads ids; hostile .pt files are one line, exit 2.
. "$(dirname "$0")/lib.sh"
N=tests/ref/pt/nanogpt
G=tests/ref/gpt

one_line() { [ "$(printf '%s\n' "$err" | grep -c .)" = 1 ] && ok || bad "$1: not one line: $err"; }

# ---- nanoGPT as it comes ----
expect 0 "nanoGPT ckpt.pt, --ids (2, 12)" -- "$bin" run --load $N/ckpt.pt --ids $N/ids.npy --expect $N/logits.npy
has "$out" "B2 S12, d_model 16, 4 heads, ffn 64, 2 layers, pre-LN, gelu," "model_args and the shapes give the config"
has "$out" "layout: nanogpt (nn.Linear weights, (out, in))" "the layout is said"
has "$out" "sequence 1 of 2" "both sequences reported"
has "$out" "the output agrees within tol 0.0001" "logits equal PyTorch's"
expect 0 "nanoGPT ckpt.pt, --text with meta.pkl" -- "$bin" run --load $N/ckpt.pt --text "First Citizen:
We are" --expect $N/text_logits.npy
has "$out" "char tokenizer, 65 tokens" "meta.pkl's characters are the tokenizer"
has "$out" "the output agrees within tol" "--text logits equal PyTorch's"
expect 0 "the directory: ckpt.pt inside" -- "$bin" run --load $N --ids $N/ids.npy --expect $N/logits.npy
expect 0 "torch.compile's _orig_mod. prefix" -- "$bin" run --load $N/compiled.pt --ids $N/ids.npy --expect $N/logits.npy
has "$out" "the output agrees within tol" "compiled.pt equals PyTorch's"
expect 0 "bias=False" -- "$bin" run --load $N/nobias/ckpt.pt --ids $N/nobias/ids.npy --expect $N/nobias/logits.npy
has "$out" "no tokenizer (ids only), a vocabulary of 65" "no meta.pkl: ids only, said"
expect 2 "--text with no tokenizer" -- "$bin" run --load $N/nobias/ckpt.pt --text "hi"
one_line "--text with no tokenizer"
has "$err" "give the token ids as --ids" "the way out is named"
expect 0 "generate from nanoGPT" -- "$bin" generate --load $N/ckpt.pt --prompt "First" -n 6 --seed 1
case $out in First?????*) ok ;; *) bad "generate does not continue the prompt: $out" ;; esac
expect 2 "generate --layout hf on nanoGPT" -- "$bin" generate --load $N/ckpt.pt --prompt "First" --layout hf
one_line "generate --layout hf on nanoGPT"
expect 2 "generate with no tokenizer" -- "$bin" generate --load $N/nobias/ckpt.pt --prompt "First"
one_line "generate with no tokenizer"
expect 0 "--trace of a batch" -- "$bin" run --load $N/ckpt.pt --ids $N/ids.npy --trace "$tmp/n.tstrace"

# ---- --expect and --tol ----
expect 1 "--expect beyond --tol" -- "$bin" run --load $N/nobias/ckpt.pt --ids $N/nobias/ids.npy --expect $N/logits.npy
has "$err" "differs from $N/logits.npy beyond tol" "the difference is named"
has "$out" "largest |diff|" "the largest difference is printed"
expect 2 "--expect of another shape" -- "$bin" run --load $N/ckpt.pt --ids $N/ids.npy --expect $N/text_logits.npy
one_line "--expect of another shape"
expect 0 "--tol wide" -- "$bin" run --load $N/nobias/ckpt.pt --ids $N/nobias/ids.npy --expect $N/logits.npy --tol 100
expect 2 "--tol without --expect" -- "$bin" run --load $N/ckpt.pt --ids $N/ids.npy --tol 1
one_line "--tol without --expect"

# ---- a layout shapes cannot tell is asked for ----
expect 2 "--layout hf on nanoGPT" -- "$bin" run --load $N/ckpt.pt --ids $N/ids.npy --layout hf
one_line "--layout hf on nanoGPT"
has "$err" "transformer.h.0.attn.c_attn.weight is [48, 16], nn.Linear's (out, in)" "the telling tensor is named"
expect 2 "--layout nanogpt on GPT-2's Conv1D" -- "$bin" run --load $G/small --ids $G/ids.npy --layout nanogpt
one_line "--layout nanogpt on GPT-2's Conv1D"
mkdir -p "$tmp/bare"
cp $G/small/model.safetensors "$tmp/bare/"
expect 2 "bare GPT-2-named safetensors" -- "$bin" run --load "$tmp/bare" --ids $G/ids.npy
one_line "bare GPT-2-named safetensors"
has "$err" "--layout hf|nanogpt" "--layout is asked for"
expect 2 "--layout on a file that is not GPT-2's" -- "$bin" run --load tests/ref/pt/encoder.pt --layout hf \
    --input tests/ref/load_encoder/x.npy --heads 4 --norm pre --activation gelu
one_line "--layout on a file that is not GPT-2's"

# ---- a GPT-2 folder with no tokenizer files: ids, any vocabulary ----
mkdir -p "$tmp/notok"
cp $G/small/model.safetensors $G/small/config.json "$tmp/notok/"
expect 0 "no tokenizer files, --ids" -- "$bin" run --load "$tmp/notok" --ids $G/ids.npy
has "$out" "no tokenizer (ids only), a vocabulary of 258" "ids only"

# ---- set-up mistakes shapes cannot reveal: printed, and named by diff before any value ----
E="--load tests/ref/pt/encoder.pt --norm pre --activation gelu --level values"
X=tests/ref/load_encoder
expect 0 "the right set-up" -- "$bin" run $E --heads 4 --input $X/x.npy --src-key-padding-mask $X/src_key_padding_mask.npy \
    --trace "$tmp/right.tstrace"
has "$out" "# settings: heads 4, norm pre, activation gelu, masks: src padding, batch 2, seq 6" "the settings are printed"
expect 0 "wrong --heads" -- "$bin" run $E --heads 2 --input $X/x.npy --src-key-padding-mask $X/src_key_padding_mask.npy \
    --trace "$tmp/heads.tstrace"
expect 1 "diff: heads" -- "$bin" diff "$tmp/right.tstrace" "$tmp/heads.tstrace"
has "$(printf '%s' "$out" | head -1)" "settings DIFFER: heads 4 vs 2" "diff names the heads first"
expect 0 "no padding mask" -- "$bin" run $E --heads 4 --input $X/x.npy --trace "$tmp/nopad.tstrace"
has "$out" "masks: no mask" "no mask is said"
expect 1 "diff: masks" -- "$bin" diff "$tmp/right.tstrace" "$tmp/nopad.tstrace"
has "$(printf '%s' "$out" | head -1)" "masks src padding vs no mask" "diff names the missing padding mask"
expect 0 "seq-first arrays given as batch-first" -- "$bin" run $E --heads 4 --input tests/ref/pt/x_seq_first.npy \
    --trace "$tmp/seqfirst.tstrace"
has "$err" "batch 6 > sequence 2: if it is seq-first (S, B, D)" "the seq-first warning"
expect 1 "diff: batch and seq" -- "$bin" diff "$tmp/nopad.tstrace" "$tmp/seqfirst.tstrace"
has "$(printf '%s' "$out" | head -1)" "batch 2 vs 6; seq 6 vs 2" "diff names the swapped axes"
T=tests/ref/load_transformer
TF="--load $T/weights.safetensors --input $T/src.npy --target $T/tgt.npy --heads 2 --norm post --activation relu --level values"
expect 0 "causal decoder" -- "$bin" run $TF --trace "$tmp/causal.tstrace"
has "$out" "masks: tgt causal" "the causal mask is said"
expect 0 "forgotten causal mask" -- "$bin" run $TF --tgt-mask none --trace "$tmp/nocausal.tstrace"
expect 1 "diff: causal" -- "$bin" diff "$tmp/causal.tstrace" "$tmp/nocausal.tstrace"
has "$(printf '%s' "$out" | head -1)" "masks tgt causal vs no mask" "diff names the forgotten causal mask"
expect 0 "same settings" -- "$bin" diff "$tmp/causal.tstrace" "$tmp/causal.tstrace"
has "$(printf '%s' "$out" | head -1)" "settings: the same (heads 2, norm post" "equal settings are said"

# ---- the bridge on real model code: diff --common lines it up with tscope's trace ----
expect 0 "nanoGPT traced by tscope" -- "$bin" run --load $N/ckpt.pt --ids $N/ids.npy --trace "$tmp/nano.tstrace" \
    --level values
expect 0 "diff --common nanoGPT" -- "$bin" diff --common --tol 1e-4 $N/bridge.tstrace "$tmp/nano.tstrace"
has "$(printf '%s' "$out" | head -1)" "settings: the same (heads 4, norm pre, activation gelu, masks causal" \
    "nanoGPT: the bridge sees the same settings"
has "$out" "no step differs beyond tol 0.0001" "nanoGPT: every shared step equal"
# the bridge of today (re-recorded by tests/ref/pt/make_fixtures.py) records nanoGPT's LayerNorm inner steps as tscope does
for step in decoder.layers.0.self_attn.scores decoder.layers.0.self_attn.masked decoder.layers.1.self_attn.weights \
    decoder.layers.1.self_attn.values decoder.layers.1.out decoder.norm.out logits decoder.layers.0.norm1.mean \
    decoder.layers.0.norm1.std decoder.layers.1.norm2.y; do
    printf '%s\n' "$out" | grep -q " $step .* ok$" && ok || bad "nanoGPT: $step not compared equal"
done
expect 0 "info on nanoGPT's bridge trace" -- "$bin" info $N/bridge.tstrace
printf '%s\n' "$out" | grep -Eq "decoder\.layers\.0\.norm1\.out +layernorm" && ok ||
    bad "nanoGPT's own LayerNorm is labelled layernorm"
expect 0 "png of the bridge's attention" -- "$bin" png $N/bridge.tstrace --tensor decoder.layers.0.self_attn.weights \
    -o "$tmp/attn.png"
has "$out" "view grid" "nanoGPT's softmax is drawn as attention"
W=tests/ref/pt/wlm
expect 0 "word_language_model traced by tscope" -- "$bin" run --load $W/model.pt --load-prefix encoder. --ignore-extra \
    --input $W/x.npy --heads 4 --norm post --activation relu --mask causal --trace "$tmp/wlm.tstrace" --level values
expect 0 "diff --common word_language_model" -- "$bin" diff --common --tol 1e-4 $W/bridge.tstrace "$tmp/wlm.tstrace"
has "$out" "no step differs beyond tol 0.0001" "word_language_model: every shared step equal"
has "$out" "only in B: 0 steps" "word_language_model: the bridge records every step of tscope's encoder"
expect 0 "info on the seq-first bridge trace" -- "$bin" info $W/bridge.tstrace
has "$out" "seq-first (S, B, D) tensors recorded transposed" "the transposition is said"

# ---- torch.save files behind --load, and hostile ones ----
expect 0 "torch.save state_dict" -- "$bin" run --load tests/ref/pt/checkpoint.pt --input tests/ref/load_encoder/x.npy \
    --heads 4 --norm pre --activation gelu --expect tests/ref/load_encoder/out.npy
has "$out" "the output agrees within tol" "a training checkpoint's state_dict equals PyTorch's"
n=0
for f in tests/ref/pt/hostile/*.pt; do
    expect 2 "$f" -- "$bin" run --load "$f" --input tests/ref/load_encoder/x.npy --heads 4 --norm pre --activation gelu
    one_line "$f"
    n=$((n + 1))
done
[ $n -ge 20 ] && ok || bad "only $n hostile files"
finish
