#!/usr/bin/env bash
# The PyTorch bridge's traces against tscope's own, from committed fixtures
# (tests/ref/bridge/make_fixtures.py wrote them with Debian's python3-torch;
# this test needs neither torch nor numpy). For an nn.Transformer with masks
# and for a model with a custom attention module: tscope runs the same
# weights, and `tscope diff --common` finds every shared step equal within
# 1e-5; one weight changed by 1e-3 is found, at the step it first touches.
# The other commands read the bridge's traces as they read tscope's.
. "$(dirname "$0")/lib.sh"
ref=tests/ref/bridge

# compared OUT: the number of steps diff compared.
compared() { printf '%s\n' "$1" | sed -n 's/.*(\([0-9]*\) steps compared).*/\1/p'; }

# run_transformer WEIGHTS TRACE: tscope on the nn.Transformer fixture, with
# the flags its state_dict cannot tell (heads, norm, activation) and PyTorch's
# masks as the fixture script passed them.
t=$ref/transformer
run_transformer() {
    expect 0 "run $1" -- "$bin" run --load "$1" --input $t/src.npy --target $t/tgt.npy \
        --src-key-padding-mask $t/src_key_padding_mask.npy --memory-key-padding-mask $t/src_key_padding_mask.npy \
        --tgt-mask causal --heads 2 --norm post --activation relu --trace "$2" --level values
}

# ---- nn.Transformer: every shared step equal ----
run_transformer $t/weights.safetensors "$tmp/t.tstrace"
expect 0 "diff --common nn.Transformer" -- "$bin" diff --common --tol 1e-5 $t/bridge.tstrace "$tmp/t.tstrace"
has "$out" "no step differs beyond tol 1e-05" "nn.Transformer: shared steps equal"
has "$out" "only in A: 0 steps" "nn.Transformer: the bridge records no step tscope lacks"
n=$(compared "$out")
[ "${n:-0}" -ge 190 ] && ok || bad "nn.Transformer: only ${n:-0} steps compared, want >= 190"
for step in encoder.layers.0.self_attn.weights encoder.layers.1.norm2.out decoder.layers.0.cross_attn.weights \
    decoder.layers.1.ffn.out decoder.out; do
    printf '%s\n' "$out" | grep -q " $step .* ok$" && ok || bad "nn.Transformer: $step not compared equal"
done

# Without --common, the steps only tscope has (its masks) are differences.
expect 1 "diff without --common" -- "$bin" diff $t/bridge.tstrace "$tmp/t.tstrace"

# ---- one weight off by 1e-3: found, and where it first acts ----
run_transformer $t/weights_perturbed.safetensors "$tmp/p.tstrace"
expect 1 "diff --common perturbed" -- "$bin" diff --common --tol 1e-5 $t/bridge.tstrace "$tmp/p.tstrace"
has "$out" "first divergence: step" "perturbed: a first divergence"
has "$out" "'decoder.layers.1.cross_attn." "perturbed: found in decoder layer 1's cross-attention"
# The same pair passes with a tolerance above the change's effect.
expect 0 "diff --common --tol 0.1 perturbed" -- "$bin" diff --common --tol 0.1 $t/bridge.tstrace "$tmp/p.tstrace"

# ---- a custom attention module: its steps under tscope's names compare ----
c=$ref/custom
expect 0 "run custom" -- "$bin" run --load $c/tscope.safetensors --input $c/input.npy \
    --src-key-padding-mask $c/src_key_padding_mask.npy --heads 2 --norm post --activation relu \
    --trace "$tmp/c.tstrace" --level values
expect 0 "diff --common custom" -- "$bin" diff --common --tol 1e-5 $c/bridge.tstrace "$tmp/c.tstrace"
has "$out" "no step differs beyond tol 1e-05" "custom: shared steps equal"
has "$out" "self_attn.q_proj" "custom: the module's own steps are listed as only in the bridge"
n=$(compared "$out")
[ "${n:-0}" -ge 20 ] && ok || bad "custom: only ${n:-0} steps compared, want >= 20"
printf '%s\n' "$out" | grep -q " encoder.layers.1.self_attn.weights .* ok$" && ok ||
    bad "custom: the custom module's attention weights not compared equal"

# ---- the bridge's traces in info, png, export ----
for f in $t/bridge.tstrace $c/bridge.tstrace; do
    expect 0 "info $f" -- "$bin" info "$f"
    has "$out" "encoder.layers.0.self_attn.weights" "info $f lists the attention weights"
done
expect 0 "info shows the writer" -- "$bin" info $t/bridge.tstrace
has "$out" "written by python/tscope_trace.py" "info names the bridge as the writer"
has "$out" "steps recomputed from module weights" "info says the bridge recomputed steps"
expect 0 "info of tscope's own trace" -- "$bin" info "$tmp/t.tstrace"
case $out in *"written by"*) bad "info names a writer for tscope's own trace" ;; *) ok ;; esac
expect 0 "png on a bridge trace" -- "$bin" png $t/bridge.tstrace --tensor decoder.layers.0.cross_attn.weights \
    -o "$tmp/cross.png"
[ "$(png_colors "$tmp/cross.png" "$(png_size "$tmp/cross.png" | sed 's/$/+0+0/')")" -gt 40 ] && ok ||
    bad "png of the bridge's cross-attention looks blank"
expect 0 "export a bridge trace" -- "$bin" export $t/bridge.tstrace --npz "$tmp/b.npz"
[ -s "$tmp/b.npz" ] && ok || bad "export wrote no npz"

# ---- the bridge's copy of the format is the C headers' ----
# python/tscope_format.py (the offsets, magics, op and tag names tscope_trace.py
# writes with) is what scripts/gen-trace-format-py.sh makes from the headers now.
if scripts/gen-trace-format-py.sh "$tmp/format.py" 2>"$tmp/gen.err"; then
    cmp -s "$tmp/format.py" python/tscope_format.py && ok ||
        bad "python/tscope_format.py is out of date: run scripts/gen-trace-format-py.sh"
else
    bad "scripts/gen-trace-format-py.sh failed: $(head -c 400 "$tmp/gen.err")"
fi
grep -q -E '(pack_into|unpack_from)\([^,]*, *[a-z]+, *[0-9]' python/tscope_trace.py &&
    bad "tscope_trace.py packs a field at a number, not at a name of tscope_format" || ok

finish
