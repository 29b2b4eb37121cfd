#!/usr/bin/env bash
# Your model as you wrote it (issue 42), from committed fixtures: five
# codebases' own model code (tests/ref/codebases/make_fixtures.py wrote them
# with Debian's python3-torch; this test needs neither) load with no
# conversion and match PyTorch's logits; each arithmetic choice is said with
# where it came from; --names renames a checkpoint and a file nothing places
# lists every name; the bridge's trace and tscope's agree under diff --common,
# and a wrong GELU form or LayerNorm formula is named as a settings difference.
. "$(dirname "$0")/lib.sh"
C=tests/ref/codebases

one_line() { [ "$(printf '%s\n' "$err" | grep -c .)" = 1 ] && ok || bad "$1: not one line: $err"; }

# ---- as they come: recognised by their names ----
M=$C/mingpt_old
expect 0 "older minGPT, --heads only" -- "$bin" run --load $M/model.pt --ids $M/ids.npy --heads 4 --expect $M/logits.npy
has "$out" "the output agrees within tol" "older minGPT equals PyTorch's"
has "$out" "names from minGPT's older code" "the codebase is said"
has "$out" "activation from minGPT's older code" "its exact GELU is said with its source"
has "$out" "heads from --heads" "the heads' source is said"
expect 2 "older minGPT without --heads" -- "$bin" run --load $M/model.pt --ids $M/ids.npy
one_line "older minGPT without --heads"
has "$err" "give --heads N" "the missing flag is asked for"
expect 1 "older minGPT, the tanh GELU" -- "$bin" run --load $M/model.pt --ids $M/ids.npy --heads 4 \
    --activation gelu-tanh --expect $M/logits.npy
has "$out" "activation from --activation" "an --activation over the code's is said"

A=$C/annotated
expect 0 "Annotated Transformer, --heads only" -- "$bin" run --load $A/model.pt --ids $A/ids.npy --heads 4 \
    --expect $A/logits.npy
has "$out" "the output agrees within tol" "the Annotated Transformer equals PyTorch's"
has "$out" "names recognised as the Annotated Transformer's code" "the codebase is said"
AT="the Annotated Transformer's code"
has "$out" "; heads from --heads, norm from $AT, activation from $AT, pe from $AT, eps from $AT, norm formula from $AT, mask fill from $AT, embeddings x sqrt(d_model) from $AT" \
    "each setting's source is in the settings line"
expect 0 "Annotated Transformer, --norm post over its code" -- "$bin" run --load $A/model.pt --ids $A/ids.npy --heads 4 \
    --norm post
has "$out" "heads from --heads, norm from --norm, activation from $AT" "the flag over the code's setting is named"
has "$out" "eps 1e-06, norm formula std+eps, embeddings x sqrt(d_model)" "the settings line declares the arithmetic"
expect 1 "Annotated Transformer, the standard LayerNorm" -- "$bin" run --load $A/model.pt --ids $A/ids.npy --heads 4 \
    --norm-formula standard --expect $A/logits.npy
expect 1 "Annotated Transformer, eps 1e-5" -- "$bin" run --load $A/model.pt --ids $A/ids.npy --heads 4 --eps 1e-5 \
    --expect $A/logits.npy --tol 1e-6
# its masked_fill(mask == 0, -1e9): implied by its code, said, a flag over it
has "$out" "mask fill -1e9" "its -1e9 mask fill is said"
expect 0 "Annotated Transformer, --mask-fill -inf" -- "$bin" run --load $A/model.pt --ids $A/ids.npy --heads 4 \
    --mask-fill -inf --expect $A/logits.npy
has "$out" "mask fill -inf" "--mask-fill -inf is said"
has "$out" "the output agrees within tol" "-inf and -1e9 agree where every row keeps a key (a causal mask)"
expect 1 "--mask-fill with a training pass" -- "$bin" run --load $A/model.pt --ids $A/ids.npy --heads 4 \
    --norm-formula standard --backward
one_line "--mask-fill with a training pass"
has "$err" "a finite mask fill (--mask-fill -1e9) has no backward pass yet" "a finite fill's backward is refused, by name"
expect 2 "Annotated Transformer without --heads" -- "$bin" run --load $A/model.pt --ids $A/ids.npy
one_line "Annotated Transformer without --heads"
has "$err" "--heads N" "the heads are asked for"
expect 2 "Annotated Transformer, --backward" -- "$bin" run --load $A/model.pt --ids $A/ids.npy --heads 4 --backward
one_line "Annotated Transformer, --backward"

# ---- GPT-2 names: the layout says whose code ----
G=$C/mingpt
expect 0 "today's minGPT, --layout mingpt" -- "$bin" run --load $G/model.pt --ids $G/ids.npy --heads 4 --layout mingpt \
    --expect $G/logits.npy
has "$out" "the output agrees within tol" "today's minGPT equals PyTorch's"
has "$out" "activation gelu-tanh, masks: causal, layout mingpt" "NewGELU's tanh form is said"
has "$out" "activation from minGPT's code" "with its source"
expect 1 "today's minGPT read as nanoGPT (exact GELU)" -- "$bin" run --load $G/model.pt --ids $G/ids.npy --heads 4 \
    --layout nanogpt --expect $G/logits.npy
N=$C/nanogpt
expect 0 "bare nanoGPT state_dict, --layout nanogpt" -- "$bin" run --load $N/model.pt --ids $N/ids.npy --heads 4 \
    --layout nanogpt --expect $N/logits.npy
has "$out" "activation from nanoGPT's code, eps from nanoGPT's code" "nanoGPT's arithmetic is said"
expect 2 "bare nanoGPT state_dict, no --layout" -- "$bin" run --load $N/model.pt --ids $N/ids.npy --heads 4
one_line "bare nanoGPT state_dict, no --layout"
has "$err" "--layout hf|nanogpt|mingpt" "the layout is asked for"
expect 2 "bare nanoGPT state_dict, no --heads" -- "$bin" run --load $N/model.pt --ids $N/ids.npy --layout nanogpt
one_line "bare nanoGPT state_dict, no --heads"
expect 2 "--heads that does not divide" -- "$bin" run --load $N/model.pt --ids $N/ids.npy --layout nanogpt --heads 3
one_line "--heads that does not divide"
expect 2 "--heads against model_args" -- "$bin" run --load tests/ref/pt/nanogpt/ckpt.pt \
    --ids tests/ref/pt/nanogpt/ids.npy --heads 2
one_line "--heads against model_args"
has "$err" "disagrees with its model_args" "model_args wins, said"

expect 2 "--activation against config.json" -- "$bin" run --load tests/ref/gpt/small --ids tests/ref/gpt/ids.npy \
    --activation gelu
one_line "--activation against config.json"
has "$err" "disagrees with config.json" "config.json wins, said"
expect 2 "--heads for a checkpoint with its own config" -- "$bin" run --load assets/kjv-char.safetensors --text And \
    --heads 2
one_line "--heads for a checkpoint with its own config"

# ---- word_language_model: --mask is asked with the rest ----
W=$C/wlm
expect 2 "word_language_model with no flag" -- "$bin" run --load $W/model.pt --load-prefix encoder. --ignore-extra \
    --input $W/x.npy
one_line "word_language_model with no flag"
has "$err" "--heads N --norm post|pre --activation relu|gelu|gelu-tanh --mask causal|none" "every missing flag, --mask too"
WB="--load $W/model.pt --load-prefix encoder. --ignore-extra --input $W/x.npy --heads 4 --norm post"
WF="$WB --activation relu"
expect 0 "word_language_model encoder" -- "$bin" run $WF --mask causal --expect $W/enc_out.npy
has "$out" "the output agrees within tol" "the encoder equals PyTorch's"
has "$out" "; heads from --heads, norm from --norm, activation from --activation, pe default: none (as nn.Transformer: the caller embeds), eps default: 1e-05 (PyTorch's), norm formula default: standard, mask fill default: -inf" \
    "a bare state_dict's settings: each from its flag or said as a default"

# ---- --names ----
printf '# the older minGPT saved inside a wrapper\nnet\\.layers\\.(.*) -> blocks.\\1\nnet\\.(.*) -> \\1\n' >"$tmp/names.txt"
expect 0 "--names loads a renamed checkpoint" -- "$bin" run --load $M/renamed.pt --names "$tmp/names.txt" \
    --ids $M/ids.npy --heads 4 --expect $M/logits.npy
has "$out" "the output agrees within tol" "renamed weights equal PyTorch's"
printf 'net\\.(.*) -> model.\\1\n' >"$tmp/wrong.txt"
expect 2 "an unplaceable file" -- "$bin" run --load $M/renamed.pt --names "$tmp/wrong.txt" --ids $M/ids.npy --heads 4
one_line "an unplaceable file"
has "$err" "model.tok_emb.weight (nearest: embed.tokens.weight or wte.weight)" "an unplaced name beside the nearest"
# nearest by role, not spelling: a norm beside norms (ln1 is nearer linear1 in letters), nn.Sequential's 0 and 2
# beside the FFN's two linears, the attention's attn.proj beside its output projection, key beside the packed q/k/v
has "$err" "model.layers.0.ln1.weight (nearest: encoder.layers.0.norm1.weight or h.0.ln_1.weight)" "ln1 beside norm1"
has "$err" "model.layers.0.ln2.bias (nearest: encoder.layers.0.norm2.bias)" "ln2's bias beside norm2's"
has "$err" "model.layers.0.mlp.2.weight (nearest: encoder.layers.0.linear2.weight or h.0.mlp.c_proj.weight)" \
    "mlp.2 beside the FFN's second linear"
has "$err" "model.layers.0.attn.proj.weight (nearest: encoder.layers.0.self_attn.out_proj.weight or h.0.attn.c_proj.weight)" \
    "attn.proj beside the output projection"
has "$err" "model.layers.0.attn.key.weight (nearest: h.0.attn.c_attn.weight or encoder.layers.0.self_attn.in_proj_weight)" \
    "key beside the packed q, k, v"
has "$err" "and 19 more" "the rest counted"
has "$err" "the Annotated Transformer's" "every layout tscope reads is named"
has "$err" "--names MAP.txt" "the way out is named"
# hostile maps, on the sanitized tscope too when there is one
bins=("$bin")
asan=${TSCOPE_ASAN:-build-asan/tscope}
[ -x "$asan" ] && bins+=("$(abs "$asan")")
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
bad_map() { # WHAT TEXT PART: a --names file refused in one line naming PART
    local b
    printf '%b' "$2" >"$tmp/bad.txt"
    for b in "${bins[@]}"; do
        expect 2 "$1 ($b)" -- "$b" run --load $M/renamed.pt --names "$tmp/bad.txt" --ids $M/ids.npy --heads 4
        one_line "$1 ($b)"
        has "$err" "$3" "$1 ($b)"
    done
}
bad_map "no arrow" 'net\\.(.*) \\1\n' "no '->'"
bad_map "a bad regular expression" 'net\\.((.* -> \\1\n' "is not a regular expression"
bad_map "a group the pattern lacks" 'net\\.(.*) -> \\2\n' "uses \\\\2 but the pattern has 1 group"
bad_map "an empty map" '# nothing\n\n' "has no rule"
bad_map "a NUL byte" 'net\\.(.*) -> \\1\0\n' "NUL byte"
bad_map "two names made one" 'net\\..* -> wte.weight\n' "gives two tensors"
bad_map "#q alone" 'net\\.tok_emb\\.weight -> wte.weight#q\n' "no "
bad_map "# other than q, k, v" 'net\\.(.*) -> \\1#x\n' "#q, #k or #v"
bad_map "a line too long" "$(printf 'a%.0s' $(seq 2000)) -> b\n" "longer than"
bad_map "too many rules" "$(for i in $(seq 300); do printf 'a%d -> b\\n' "$i"; done)" "more than 256 rules"
for b in "${bins[@]}"; do
    expect 2 "--names missing ($b)" -- "$b" run --load $M/renamed.pt --names "$tmp/none.txt" --ids $M/ids.npy --heads 4
    one_line "--names missing ($b)"
    expect 2 "--names a folder ($b)" -- "$b" run --load $M/renamed.pt --names "$tmp" --ids $M/ids.npy --heads 4
    one_line "--names a folder ($b)"
    expect 2 "an unplaceable file ($b)" -- "$b" run --load $M/renamed.pt --names "$tmp/wrong.txt" --ids $M/ids.npy \
        --heads 4
    one_line "an unplaceable file ($b)"
done
expect 2 "--names without --load" -- "$bin" run --names "$tmp/names.txt"
one_line "--names without --load"

# ---- tscope shapes --params prints names that load back ----
py=${PYTHON:-/usr/bin/python3}
[ -x "$py" ] || py=$(command -v python3)
for arch in encoder encoder-decoder; do
    expect 0 "shapes --params ($arch)" -- "$bin" shapes --params --preset tiny --arch $arch
    printf '%s\n' "$out" >"$tmp/params.txt"
    # a safetensors file of every printed name and shape, small values (the standard library only)
    "$py" - "$tmp/params.txt" "$tmp/params.safetensors" <<'PY'
import json, re, struct, sys
header, data, at = {}, b"", 0
for line in open(sys.argv[1]):
    m = re.match(r"^([a-z_][a-z0-9_.]*(?:weight|bias))\s+\[([0-9, ]+)\]", line)
    if not m:
        continue
    shape = [int(x) for x in m.group(2).split(",")]
    n = 1
    for d in shape:
        n *= d
    header[m.group(1)] = {"dtype": "F32", "shape": shape, "data_offsets": [at, at + 4 * n]}
    data += struct.pack("<%df" % n, *[((i * 7919) % 13 - 6) * 0.01 for i in range(n)])
    at += 4 * n
h = json.dumps(header).encode()
h += b" " * ((8 - len(h) % 8) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(h)) + h + data)
PY
    expect 0 "the names of shapes --params load back ($arch)" -- "$bin" run --load "$tmp/params.safetensors" --heads 2 \
        --norm post --activation relu --pe sinusoidal
    has "$out" "$([ $arch = encoder ] && echo "# encoder: B1 S4" || echo "# encoder-decoder: B1 S4 T4")" \
        "$arch: read as the model it was printed for, its token table found"
done

# a GPT under the names shapes --params prints for --arch decoder (PyTorch wrote it: make_fixtures.py) is read back
# as the decoder-only model it is, not as an encoder-decoder, and gives PyTorch's logits
D=$C/decoder
expect 0 "shapes --params of a decoder-only model" -- "$bin" shapes --params --arch decoder --vocab 12 --d-model 16 \
    --heads 4 --ffn 32 --layers 2 --seq 8
printf '%s\n' "$out" | sed -n 's/^\([a-z][a-z0-9_.]*\(weight\|bias\)\) *\(\[[0-9, ]*\]\).*/\1 \3/p' >"$tmp/dec-names.txt"
cmp -s "$tmp/dec-names.txt" $D/names.txt && ok || bad "shapes --params names the decoder's parameters as the state_dict does"
expect 0 "a decoder-only state_dict under those names" -- "$bin" run --load $D/model.pt --ids $D/ids.npy --heads 4 \
    --norm pre --activation gelu --expect $D/logits.npy
has "$out" "# decoder-only (GPT): B2 S8, d_model 16, 4 heads, ffn 32, 2 layers" "read as a decoder-only model"
has "$out" "the output agrees within tol" "its logits equal PyTorch's"
expect 0 "the same with --arch decoder" -- "$bin" run --load $D/model.pt --ids $D/ids.npy --heads 4 --norm pre \
    --activation gelu --arch decoder --expect $D/logits.npy
expect 2 "--arch encoder-decoder against it" -- "$bin" run --load $D/model.pt --ids $D/ids.npy --heads 4 --norm pre \
    --activation gelu --arch encoder-decoder
one_line "--arch encoder-decoder against it"
has "$err" "no cross-attention" "why it is decoder-only is said"

# ---- the bridge's trace and tscope's, step by step ----
bridge() { # NAME FLAGS...: tscope's trace of codebase NAME against its bridge.tstrace, exit 0
    local name=$1
    shift
    expect 0 "$name traced by tscope" -- "$bin" run "$@" --trace "$tmp/$name.tstrace" --level values
    expect 0 "diff --common $name" -- "$bin" diff --common --tol 1e-4 $C/$name/bridge.tstrace "$tmp/$name.tstrace"
    has "$(printf '%s' "$out" | head -1)" "settings: the same" "$name: the bridge sees the same settings"
    has "$out" "no step differs beyond tol 0.0001" "$name: every shared step equal"
}
wrong() { # NAME SETTING FLAGS...: a wrong arithmetic choice named as a settings difference, exit 1
    local name=$1 setting=$2
    shift 2
    expect 0 "$name, wrongly" -- "$bin" run "$@" --trace "$tmp/$name-wrong.tstrace" --level values
    expect 1 "diff --common $name, wrongly" -- "$bin" diff --common $C/$name/bridge.tstrace "$tmp/$name-wrong.tstrace"
    has "$(printf '%s' "$out" | head -1)" "settings DIFFER: $setting" "$name: the wrong setting is named"
}
NF="--load $N/model.pt --ids $N/ids.npy --heads 4 --layout nanogpt"
bridge nanogpt $NF
has "$out" "logits" "nanoGPT: the logits are compared"
printf '%s\n' "$out" | grep -q " logits .* ok (last position)$" && ok || bad "nanoGPT: the last position is compared, and said"
for step in decoder.layers.0.norm1.mean decoder.layers.0.norm1.std decoder.layers.1.norm2.y; do
    printf '%s\n' "$out" | grep -q " $step .* ok$" && ok || bad "nanoGPT: $step (a LayerNorm's inner step) not compared"
done
wrong nanogpt "activation gelu vs gelu-tanh" $NF --activation gelu-tanh
GF="--load $G/model.pt --ids $G/ids.npy --heads 4 --layout mingpt"
bridge mingpt $GF
printf '%s\n' "$out" | grep -q " embed.pe .* ok$" && ok || bad "minGPT: wpe's [1, S, D] compared with [S, D]"
wrong mingpt "activation gelu-tanh vs gelu" $GF --activation gelu
MF="--load $M/model.pt --ids $M/ids.npy --heads 4"
bridge mingpt_old $MF
printf '%s\n' "$out" | grep -q " decoder.layers.1.self_attn.weights .* ok$" && ok ||
    bad "older minGPT: its attention is compared"
wrong mingpt_old "activation gelu vs gelu-tanh" $MF --activation gelu-tanh
AF="--load $A/model.pt --ids $A/ids.npy --heads 4"
bridge annotated $AF
for step in encoder.layers.0.norm1.std decoder.layers.1.cross_attn.weights decoder.norm.out; do
    printf '%s\n' "$out" | grep -q " $step .* ok$" && ok || bad "Annotated Transformer: $step not compared"
done
wrong annotated "norm_formula std+eps vs standard" $AF --norm-formula standard
# the mask fill: -1e9 and -inf hide alike in a row that keeps a key; -1 does not
expect 0 "Annotated Transformer, -inf fill, traced" -- "$bin" run $AF --mask-fill -inf --trace "$tmp/fill.tstrace" \
    --level values
expect 0 "diff --common, -1e9 vs -inf" -- "$bin" diff --common --tol 1e-4 $C/annotated/bridge.tstrace "$tmp/fill.tstrace"
has "$(printf '%s' "$out" | head -1)" "mask_fill -1e9 ~ -inf (hide alike)" "-1e9 and -inf: the same in effect, said"
wrong annotated "mask_fill -1e9 vs -1" $AF --mask-fill -1
# a row with every key hidden (a padded query under --mask padding-both): -1e9 weighs its keys alike, -inf gives 0
for fill in -1e9 -inf; do
    expect 0 "every key hidden, fill $fill" -- "$bin" run --arch encoder --text "my name is goro" --text "hi" \
        --mask padding-both --mask-fill $fill --trace "$tmp/rows$fill.tstrace" --level values
    expect 0 "info, fill $fill" -- "$bin" info "$tmp/rows$fill.tstrace" --only 'encoder.layers.0.self_attn.weights'
    printf '%s\n' "$out" >"$tmp/rows$fill.txt"
done
# 2 texts x 2 heads x 4 queries, 4 keys: every row sums to 1 (mean 0.25) under -1e9; under -inf 6 of the 16
# rows ("hi" is one token: 3 padded queries, 2 heads) are 0 (mean 10/16 x 0.25)
grep -q "weights .* 0\.25 " "$tmp/rows-1e9.txt" && ok || bad "-1e9: the hidden rows are uniform: $(cat "$tmp/rows-1e9.txt")"
grep -q "weights .* 0\.1562 " "$tmp/rows-inf.txt" && ok || bad "-inf: the hidden rows are 0: $(cat "$tmp/rows-inf.txt")"
expect 1 "diff, rows all hidden" -- "$bin" diff --common "$tmp/rows-1e9.tstrace" "$tmp/rows-inf.tstrace"
has "$out" "first divergence: step 14 'encoder.layers.0.self_attn.weights'" "the weights of the hidden rows are named"
for bad_fill in 5 0 abc nan -1e39 inf; do
    expect 2 "--mask-fill $bad_fill" -- "$bin" run --mask-fill $bad_fill
    one_line "--mask-fill $bad_fill"
    has "$err" "give -inf or a negative number" "--mask-fill $bad_fill refused"
done
expect 2 "--mask-fill with nothing hidden" -- "$bin" run --arch encoder --mask-fill -1e9
one_line "--mask-fill with nothing hidden"
has "$err" "this model hides none" "a fill with nothing to fill is refused"
expect 2 "--mask-fill with seed 003's mask" -- "$bin" run --mask-fill -1e9 --variant seed003-mask
one_line "--mask-fill with seed 003's mask"
expect 2 "--mask-fill, training" -- "$bin" train --task copy --steps 1 --mask-fill -1e9
has "$err" "no backward pass yet" "training with a finite fill is refused"
expect 0 "--mask-fill kept in a checkpoint's config" -- "$bin" run --mask-fill -1e9 --trace "$tmp/cfg.tstrace"
grep -aq '"mask_fill":-1000000000' "$tmp/cfg.tstrace" && ok || bad "the trace's config records the fill"
grep -aq '"mask_fill":"-1e9"' "$tmp/cfg.tstrace" && ok || bad "the trace's settings record the fill"
bridge wlm $WF --mask causal
wrong wlm "activation relu vs gelu" $WB --mask causal --activation gelu
finish
