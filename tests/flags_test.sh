#!/usr/bin/env bash
# No flag is ever accepted and ignored: every pair of a flag and an input mode
# that cannot work is one line on stderr saying why and exit 2, never a
# number. One row per pair (issue 16), then the pairs that must work. Uses the
# fixtures of tests/ref (load_encoder, load_transformer: bare PyTorch
# state_dicts with no metadata; enc_pre_gelu_norm: one with metadata) and
# assets/tiny-copy.safetensors (tscope's own, with its config).
. "$(dirname "$0")/lib.sh"

E=tests/ref/load_encoder           # nn.TransformerEncoder, d 16, 4 heads, pre-LN, gelu, final norm; x (2, 6, 16)
X=tests/ref/load_transformer       # nn.Transformer, d 16, 2 heads, post-LN, relu; src (2, 7, 16), tgt (2, 6, 16)
M=tests/ref/enc_pre_gelu_norm      # nn.TransformerEncoder with heads 2, norm pre, activation gelu in __metadata__
A=assets/tiny-copy.safetensors     # tscope's tiny copy model: tokens, vocabulary 16, config in __metadata__
EF="--heads 4 --norm pre --activation gelu"
XF="--heads 2 --norm post --activation relu"
EIN="--load $E/weights.safetensors --input $E/x.npy $EF"
XIN="--load $X/weights.safetensors --input $X/src.npy --target $X/tgt.npy $XF"

# refuse "WHY" command...: exit 2, one line on stderr containing WHY, no output line
refuse() {
    local why=$1; shift
    "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$? lines
    lines=$(wc -l <"$tmp/err")
    if [ "$rc" != 2 ]; then
        bad "$* -> exit $rc, want 2 ($(head -c 200 "$tmp/err"))"
    elif [ "$lines" != 1 ]; then
        bad "$* -> $lines lines on stderr, want 1"
    elif ! grep -qF -- "$why" "$tmp/err"; then
        bad "$* -> '$(cat "$tmp/err")', want it to say '$why'"
    elif grep -q "^output" "$tmp/out"; then
        bad "$* -> printed an output despite the error"
    else
        ok
    fi
}

# works command...: exit 0
works() {
    "$bin" "$@" >"$tmp/out" 2>"$tmp/err" && ok || bad "$* -> exit $? ($(head -c 300 "$tmp/err"))"
}

# ---- run: its own flags against the input modes --------------------------------
refuse "--target feeds the decoder; give --input" run --target $X/tgt.npy
refuse "--load-prefix is about the weights file" run --load-prefix model.
refuse "--arch decoder disagrees with" run $EIN --arch decoder
works run $EIN --arch encoder
refuse "--ignore-extra is about the weights file" run --ignore-extra
refuse "--src-key-padding-mask marks padded positions of --input vectors" run --src-key-padding-mask $E/src_key_padding_mask.npy
refuse "--src-key-padding-mask marks padded positions of --input vectors" run --text "a b c" --src-key-padding-mask $E/src_key_padding_mask.npy
refuse "--tgt-key-padding-mask is for the decoder; give --target" run $EIN --tgt-key-padding-mask $X/tgt_key_padding_mask.npy
refuse "--memory-key-padding-mask is for the decoder; give --target" run $EIN --memory-key-padding-mask $X/memory_key_padding_mask.npy
refuse "--tgt-mask none is the decoder's self-attention mask; this model has no decoder" run $EIN --tgt-mask none
refuse "--tgt-mask causal is the decoder's self-attention mask; this model has no decoder" run --preset seed000 --tgt-mask causal
refuse "--greedy decodes token ids at inference; --input vectors have no words" run $XIN --greedy
refuse "--greedy decodes token ids at inference; --backward trains against given labels" run --greedy --backward
refuse "--greedy needs the causal decoder" run --greedy --tgt-mask none
refuse "--greedy decodes with an encoder-decoder that writes words (a vocabulary head); this model is not an encoder-decoder" run --preset seed000 --greedy
refuse "--greedy decodes at inference; --train-mode's dropout" run --greedy --train-mode
refuse "--greedy: --load assets/kjv-char.safetensors is read as a language model" run --load assets/kjv-char.safetensors --text "And" --greedy
works run --load $A --preset tiny --text "go the cat" --greedy
refuse "--text and --input both give the encoder's input" run --input $E/x.npy --dec-layers 0 --text "a b"
refuse "--seq 9 disagrees with $E/x.npy: it holds sequences of length 6" run --input $E/x.npy --dec-layers 0 --seq 9
refuse "--batch 3 disagrees with $E/x.npy: it holds batch 2" run --input $E/x.npy --dec-layers 0 --batch 3
refuse "holds vectors of width 16; the model reads width 32: --d-model 32" run --input $E/x.npy --dec-layers 0 --d-model 32
refuse "this encoder-decoder also needs --target" run --input $E/x.npy
refuse "--target $E/x.npy feeds a decoder; this model has none" run --input $E/x.npy --target $E/x.npy --dec-layers 0
refuse "--mask padding is about padded positions, and none are marked: give --src-key-padding-mask" run --input $E/x.npy --dec-layers 0 --mask padding
refuse "--mask padding-both is about padded positions, and none are marked" run --input $E/x.npy --dec-layers 0 --mask padding-both
refuse "--mask none attends to padded keys, but --src-key-padding-mask marks some" run --input $E/x.npy --dec-layers 0 --mask none --src-key-padding-mask $E/src_key_padding_mask.npy
refuse "--mask padding-both is about padded positions and this input has none" run --text "a b c" --mask padding-both
refuse "--mask none is about padded positions and this input has none" run --preset seed000 --seq 8 --batch 2 --mask none
# --scores with an edit of one text: refused before anything runs (nothing printed ahead of the line)
refuse "--scores measures each head on 8 random sequences, where --lens" run --load assets/induction-2l.safetensors --text abcab --lens --scores
if [ -s "$tmp/out" ]; then bad "run --lens --scores printed $(wc -l <"$tmp/out") lines before refusing"; else ok; fi
# a bare state_dict's missing-flags message asks for --mask: none is the answer "no mask", and it runs
works run --load $E/weights.safetensors --input $E/x.npy --heads 4 --norm pre --activation gelu --mask none --expect $E/out.npy
refuse "--vocab 10 sizes the token table and the vocabulary head; this model reads vectors" run --input $E/x.npy --dec-layers 0 --vocab 10
refuse "--dropout 0.2 acts only in training: add --train-mode" run --dropout 0.2
refuse "--dropout 0.2 acts only in training" run --input $E/x.npy --dec-layers 0 --dropout 0.2
refuse "--seed 3 picks random parameters, random input and dropout" run $EIN --seed 3
refuse "--seed 3 picks random parameters" run --load $A --seed 3
refuse "qkv [2, 6, 48] to [2, 6, 3, 16]" run --input $E/x.npy --dec-layers 0 --heads 3
refuse "--labels is the backward pass's target; add --backward" run --labels $E/x.npy
refuse "--backward runs through the correct model (or --variant no-residual) only; --variant no-scale" run --input $E/x.npy --dec-layers 0 --backward --labels $E/x.npy --variant no-scale
refuse "--variant no-residual takes the skips out of an encoder's (or a GPT's) layers: it needs --dec-layers 0" run --variant no-residual
refuse "--variant no-residual and seed004-residual rewire the same block" run --preset seed004 --variant no-residual,seed004-residual
works run --dec-layers 0 --head lm --variant no-residual --backward
refuse "--print-shapes takes =torch or nothing" run --print-shapes=yaml
refuse "--level, --only and --keep-batch need --trace FILE" run --level values
refuse "--keep-batch 5 is not a batch element" run --trace "$tmp/k.tstrace" --keep-batch 5
refuse "--only chooses which steps keep values; --level stats keeps none" run --trace "$tmp/k.tstrace" --level stats --only '*'
refuse "--pe-variant seed001-sin-only changes the sinusoidal table, but this model has no positions" run --preset seed000 --seq 4 --batch 1 --pe-variant seed001-sin-only
refuse "--src-key-padding-mask $X/tgt_key_padding_mask.npy has shape [2, 6]; the model reads (B, S) = (2, 7)" run $XIN --src-key-padding-mask $X/tgt_key_padding_mask.npy
# a (2, 6) uint8 mask holding a 2: written by hand as NumPy would (header padded to 64-byte blocks)
npy_u8() { # FILE DICT BYTES...
    local file=$1 dict=$2; shift 2
    local total=$(( (10 + ${#dict} + 1 + 63) / 64 * 64 ))
    local pad=$((total - 10 - ${#dict} - 1))
    { printf '\x93NUMPY\x01\x00'; printf "\\x$(printf %02x $((${#dict} + pad + 1)))\\x00"
      printf '%s%*s\n' "$dict" "$pad" ""; for b in "$@"; do printf "\\x$(printf %02x "$b")"; done; } >"$file"
}
npy_u8 "$tmp/two.npy" "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 6), }" 0 0 0 0 0 0 0 0 0 2 1 1
refuse "element [1, 3] is 2; a padding mask holds True/1 (padding) or False/0" run $EIN --src-key-padding-mask "$tmp/two.npy"
npy_u8 "$tmp/ok.npy" "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 6), }" 0 0 0 0 0 0 0 0 0 1 1 1
# the attention-alone model (seed001) has no feed-forward layer, LayerNorm or head
for flag in "--ffn 8" "--layers 3" "--norm pre" "--activation gelu" "--eps 1e-6" "--final-norm" "--head lm"; do
    refuse "${flag%% *}: the attention-alone model (seed001) has no" run --preset seed001 $flag
done
refuse "preset seed001 (attention alone) takes random vectors, not --text" run --preset seed001 --text hi

# ---- run --load: every size and setting the weights decide ------------------------
refuse "--d-model 32 disagrees with $E/weights.safetensors: it has d_model 16 (layers.0.self_attn.out_proj.weight is [16, 16])" run $EIN --d-model 32
refuse "--ffn 64 disagrees with $E/weights.safetensors: it has ffn 32 (layers.0.linear1.weight is [32, 16])" run $EIN --ffn 64
refuse "--layers 3 disagrees with $E/weights.safetensors: it has 2 encoder layers (its last layer is layers.1)" run $EIN --layers 3
refuse "--dec-layers 2 disagrees with $E/weights.safetensors: it has 0 decoder layers" run $EIN --dec-layers 2
refuse "--dec-layers 0 disagrees with $X/weights.safetensors: it has 2 decoder layers" run $XIN --dec-layers 0
refuse "--final-norm disagrees with $A: it has no final LayerNorm" run --load $A --final-norm
refuse "--vocab 20 disagrees with $A: it has a vocabulary of 16 (embed.src.weight is [16, 16])" run --load $A --vocab 20
refuse "--head none disagrees with $A: it has a vocabulary head (lm) (generator.weight is [16, 16])" run --load $A --head none
refuse "--head lm disagrees with $E/weights.safetensors: it has no output head" run $EIN --head lm
refuse "--heads 4 disagrees with the weights: $M/weights.safetensors's __metadata__ says heads 2" run --load $M/weights.safetensors --input $E/x.npy --heads 4
refuse "--norm post disagrees with the weights: $M/weights.safetensors's __metadata__ says norm pre" run --load $M/weights.safetensors --input $E/x.npy --norm post
refuse "--activation relu disagrees with the weights: $M/weights.safetensors's __metadata__ says activation gelu" run --load $M/weights.safetensors --input $E/x.npy --activation relu
refuse "--eps 1e-06 disagrees with the weights: $M/weights.safetensors's __metadata__ says eps 1e-05" run --load $M/weights.safetensors --input $E/x.npy --eps 1e-6
refuse "--pe none disagrees with the weights: $A's __metadata__ says pe sinusoidal" run --load $A --pe none
refuse "--pe learned: $E/weights.safetensors has no learned position table" run $EIN --pe learned
refuse "--heads 3 does not divide d_model 16 of $E/weights.safetensors" run --load $E/weights.safetensors --input $E/x.npy --heads 3 --norm pre --activation gelu
refuse "preset copy has d_model 512, but $A has d_model 16" run --load $A --preset copy
refuse "preset seed000 is encoder; $A holds encoder-decoder" run --load $A --preset seed000
refuse "does not say the model's heads, norm placement, activation, masks (tensor shapes cannot, and it has no __metadata__): give --heads N --norm post|pre --activation relu|gelu|gelu-tanh --mask causal|none" run --load $E/weights.safetensors --input $E/x.npy
refuse "does not say the model's activation" run --load $X/weights.safetensors --input $X/src.npy --target $X/tgt.npy --heads 2 --norm post
refuse "$E/prefixed.safetensors: no tensor name reads as a layout tscope knows" run --load $E/prefixed.safetensors --input $E/x.npy $EF
refuse "add --load-prefix backbone. (and --ignore-extra for the others)" run --load $E/prefixed.safetensors --input $E/x.npy $EF
refuse "2 tensors have no place in this model (read as nn.TransformerEncoder's state_dict): classifier.weight, classifier.bias; --ignore-extra skips them" run --load $E/prefixed.safetensors --load-prefix backbone. --input $E/x.npy $EF
refuse "tensor pos_encoder.pe has no place in this model (read as nn.TransformerEncoder's state_dict); --ignore-extra skips it" run --load $E/extra.safetensors --input $E/x.npy $EF
refuse "--load-prefix 'model.': no tensor name in $E/weights.safetensors starts with it" run $EIN --load-prefix model.
refuse "has no token table, so no words to look up: it reads vectors; give --input X.npy (B, S, 16) instead of --text" run --load $E/weights.safetensors $EF --text "a b"
refuse "$A reads token ids (it has a token table), not vectors: give --text instead of --input" run --load $A --input $E/x.npy
refuse "its names are those of an nn.TransformerDecoderLayer's state_dict" run --load tests/ref/dec_layer_post_relu/weights.safetensors --input $E/x.npy
refuse "no tensor name reads as a layout tscope knows" run --load tests/ref/adamw/params.safetensors
refuse "--norm: tests/ref/mha/weights.safetensors holds a lone attention" run --load tests/ref/mha/weights.safetensors --input $E/x.npy --norm pre
refuse "vocabulary of 16 ids is too small for the text" run --load $A --text "a b c d e f g h i j k l m n"

# ---- the other commands -----------------------------------------------------------
refuse "--seed changes values, and shapes computes none" shapes --seed 3
refuse "--eps changes values, and shapes computes none" shapes --eps 1e-6
refuse "--style prints the steps' shapes; --params lists the parameters instead" shapes --params --style torch
refuse "--dropout 0.2 acts only in training" shapes --dropout 0.2
refuse "--text: the task makes the data" train --task copy --text "a b"
refuse "--train-mode: tscope train always trains with dropout on" train --task copy --train-mode
refuse "--head: a task's model always has its vocabulary head" train --task copy --head none
refuse "--mask padding is about padded positions; a task's sequences have none" train --task copy --mask padding
refuse "--preset picks the model of forward and train; gemm measures the kernels alone" bench gemm --preset tiny
refuse "--busy -1: expected 0 to 64" bench forward --preset tiny --busy -1
# The kernel threads' wait (kernels.h): tscope sets a short spin when the user set none, and keeps the user's.
wait_of() { env "$@" "$bin" bench forward --preset tiny --reps 1 --busy 1 2>&1 | grep -o "idle threads wait as [^;]*"; }
has "$(wait_of -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT)" "wait as GOMP_SPINCOUNT=10000" "bench: the short spin set by tscope"
has "$(wait_of -u GOMP_SPINCOUNT OMP_WAIT_POLICY=passive)" "wait as OMP_WAIT_POLICY=passive" "bench: the user's wait kept"
refuse "--check and --print are two answers" lesson 1 --check --print
refuse "--scale sets the exported pages' pixels per point: add --export DIR" lesson 1 --scale 2
refuse "--export writes the pages without a window" lesson 1 --export "$tmp/l" --step 2
refuse "--list takes no lesson and no other flag" lesson --list --quiet
refuse "--print does not run the lesson" lesson 1 --print --cache "$tmp/c"
refuse "--no-run goes with --check" lesson 1 --no-run
refuse "unknown flag --hedas (did you mean --heads?)" run --hedas 2

"$bin" run --trace "$tmp/t.tstrace" --level values >/dev/null 2>&1 || bad "tiny run for png"
refuse "--head 1: the posenc view of embed.pe shows no single head" png "$tmp/t.tstrace" --tensor embed.pe --head 1 -o "$tmp/p.png"
refuse "--batch 0: the posenc view of embed.pe has no batch element to choose" png "$tmp/t.tstrace" --tensor embed.pe --batch 0 -o "$tmp/p.png"
refuse "--axes 0,1 picks the two dims of a tensor heatmap; the grid view" png "$tmp/t.tstrace" --tensor encoder.layers.0.self_attn.weights --axes 0,1 -o "$tmp/p.png"
refuse "--head 1: the overview view" png "$tmp/t.tstrace" --tensor encoder.layers.0.self_attn.weights --view overview --head 1 -o "$tmp/p.png"
refuse "--head 0: the stats view of encoder.layers.0.norm1.out shows no single head" png "$tmp/t.tstrace" --tensor encoder.layers.0.norm1.out --view stats --head 0 -o "$tmp/p.png"

# ---- the same flags where they work -----------------------------------------------
works run $EIN
works run $EIN --src-key-padding-mask $E/src_key_padding_mask.npy --mask padding
works run $EIN --src-key-padding-mask $E/src_lengths.npy --mask padding-both
works run $EIN --mask causal
works run $EIN --src-key-padding-mask "$tmp/ok.npy"                 # uint8 0/1
works run $EIN --pe sinusoidal --eps 1e-6
works run $EIN --train-mode --dropout 0.2 --seed 3
works run --load $E/weights.safetensors $EF --seed 3                 # random vectors: the seed picks them
works run --load $E/prefixed.safetensors --load-prefix backbone. --ignore-extra --input $E/x.npy $EF
works run --load $E/weights_f16.safetensors --input $E/x.npy $EF
works run $XIN --tgt-mask none --src-key-padding-mask $X/src_key_padding_mask.npy
works run $XIN --backward --labels $X/tgt.npy
works run --load $M/weights.safetensors --input $E/x.npy             # everything from the weights and metadata
works run --load $A --preset tiny --vocab 16 --text "go the cat"
works run --load tests/ref/mha/weights.safetensors --input $E/x.npy --heads 4
works run --input $E/x.npy --dec-layers 0 --vocab 10 --head lm
works run --text "a b c" --text "a b" --mask padding-both
works run --text "a b c" --tgt-mask none
works shapes --params --preset copy
works train --task copy --steps 2 --heldout 4 --mask causal --dropout 0.2 --quiet

finish
