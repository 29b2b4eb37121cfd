#!/usr/bin/env bash
# Edits of an attention pattern against PyTorch (issue 39): on the shipped
# induction model, `run --ablate` and `run --patch` of a layer's attention
# `weights` give the logits PyTorch gives when a forward hook edits the
# softmax's output before the weighted values read it
# (tests/ref/edits/make_fixtures.py; its .npy files are committed, so this
# test needs no torch). Before issue 39's fix the edit was accepted, the
# trace marked the step edited, and the logits were the unedited ones:
# each edited case also checks that the logits moved away from those.
. "$(dirname "$0")/lib.sh"
ref=tests/ref/edits
model=assets/induction-2l.safetensors
pos=$(cat $ref/pos.txt)

# agrees WHAT FIXTURE -- RUN ARGS...: the run's logits equal PyTorch's within 1e-4
agrees() {
    local what=$1 want=$2
    shift 3
    expect 0 "$what equals PyTorch ($want)" -- "$bin" run --load $model "$@" --expect "$want" --tol 1e-4
    [ "$rc" != 0 ] || has "$out" "expect: the output agrees within tol" "$what equals PyTorch ($want)"
}
# differs WHAT FIXTURE -- RUN ARGS...: the run's logits are not those of FIXTURE (the unedited run)
differs() {
    local what=$1 want=$2
    shift 3
    "$bin" run --load $model "$@" --expect "$want" --tol 1e-4 >"$tmp/differs.out" 2>&1
    case $(cat "$tmp/differs.out") in
        *"expect: the output agrees within tol"*) bad "$what: the logits are the unedited run's: the edit changed nothing" ;;
        *) ok ;;
    esac
}

# ---- the reference is the model: no edit, PyTorch's logits ----
agrees "unedited" $ref/plain_logits.npy -- --ids $ref/ids.npy
agrees "unedited, the other text" $ref/other_plain_logits.npy -- --ids $ref/other_ids.npy

# ---- layer 1's attention pattern zeroed, every head ----
# values = weights v, so zeroing the weights is zeroing the values, an edit
# tscope honoured before issue 39: the fixture is checked by it, today
agrees "zeroed values (the fixture's check)" $ref/zero_logits.npy -- --ids $ref/ids.npy \
    --ablate decoder.layers.1.self_attn.values
differs "zeroed weights" $ref/plain_logits.npy -- --ids $ref/ids.npy --ablate decoder.layers.1.self_attn.weights
agrees "zeroed weights" $ref/zero_logits.npy -- --ids $ref/ids.npy --ablate decoder.layers.1.self_attn.weights
has "$out" "# edit decoder.layers.1.self_attn.weights: zeroed, 1 step" "the edit is reported"

# ---- layer 0's attention pattern replaced by its mean over the queries ----
differs "mean weights" $ref/plain_logits.npy -- --ids $ref/ids.npy --ablate decoder.layers.0.self_attn.weights=mean
agrees "mean weights" $ref/mean_logits.npy -- --ids $ref/ids.npy --ablate decoder.layers.0.self_attn.weights=mean

# ---- one query row of layer 1's pattern patched from the other text's run ----
expect 0 "trace the text" -- "$bin" run --load $model --ids $ref/ids.npy --trace "$tmp/text.tstrace" --level values
differs "patched row" $ref/other_plain_logits.npy -- --ids $ref/other_ids.npy \
    --patch "$tmp/text.tstrace:decoder.layers.1.self_attn.weights@$pos"
agrees "patched row" $ref/patch_logits.npy -- --ids $ref/other_ids.npy \
    --patch "$tmp/text.tstrace:decoder.layers.1.self_attn.weights@$pos"

# ---- the trace of an edited run holds what the model read ----
# the zeroed pattern is all zeros in the trace, and the step after it (values)
# is zero too: values = weights v
expect 0 "trace zeroed" -- "$bin" run --load $model --ids $ref/ids.npy \
    --ablate decoder.layers.1.self_attn.weights --trace "$tmp/zero.tstrace" --level values
expect 0 "info zeroed" -- "$bin" info "$tmp/zero.tstrace" --only 'decoder.layers.1.self_attn.*'
# min and max, the two columns after the shape
minmax=$(printf '%s\n' "$out" | grep -E ' decoder\.layers\.1\.self_attn\.values ' | sed 's/.*\] *//' | awk '{ print $1, $2 }')
[ "$minmax" = "0 0" ] && ok || bad "values = weights v after the weights were zeroed: min and max $minmax, want 0 0"

finish
