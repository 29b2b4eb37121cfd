#!/usr/bin/env bash
# `tscope train` end to end: the commands of assets/README.md still reach
# their accuracy (copy 100% exact on held-out sequences, reverse and sort at
# least 95%), the checkpoints they write load into `tscope run --load` (and so
# do the committed ones), a training trace holds its snapshots, `run
# --backward` traces gradients, and bad flags get one line and exit 2.
# About 30 s on 2 idle cores. Runs ./tscope (or $TSCOPE).
. "$(dirname "$0")/lib.sh"

# The exact-sequence accuracy from the last line, e.g. "100.0".
exact_of() { tail -n 1 "$1" | sed -n 's/^held-out accuracy: exact \([0-9.]*\)%, per-token [0-9.]*%$/\1/p'; }

# train NAME MIN_EXACT ARGS...: run, check the last line and the accuracy.
train() {
    local name=$1 min=$2
    shift 2
    local start=$SECONDS
    if ! "$bin" train "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"; then
        bad "train $*: exit $? ($(head -c 300 "$tmp/$name.err"))"
        return
    fi
    local exact
    exact=$(exact_of "$tmp/$name.out")
    if [ -z "$exact" ]; then
        bad "train $*: the last line is not the accuracy: $(tail -n 1 "$tmp/$name.out")"
    elif awk -v e="$exact" -v m="$min" 'BEGIN { exit !(e + 0 >= m + 0) }'; then
        ok
        echo "ok: $name: exact $exact% (>= $min%) in $((SECONDS - start)) s"
    else
        bad "train $*: exact $exact% < $min%"
        tail -n 12 "$tmp/$name.out" | sed 's/^/    /'
    fi
}

# 1. the commands of assets/README.md (checkpoints to a temporary directory)
train copy 100 --task copy --preset tiny --save "$tmp/tiny-copy.safetensors"
train reverse 95 --task reverse --preset tiny --save "$tmp/tiny-reverse.safetensors"
train sort 95 --task sort --preset tiny --quiet

# 2. the checkpoints load and trace a trained model, and so do the committed ones
for ck in "$tmp/tiny-copy.safetensors" assets/tiny-copy.safetensors assets/tiny-reverse.safetensors; do
    if [ ! -f "$ck" ]; then
        bad "$ck is missing"
        continue
    fi
    if "$bin" run --preset tiny --vocab 16 --load "$ck" --trace "$tmp/run.tstrace" >"$tmp/run.out" 2>&1 &&
        "$bin" info "$tmp/run.tstrace" --only 'decoder.layers.1.cross_attn.weights' >"$tmp/info.out" 2>&1 &&
        grep -q 'cross_attn.weights' "$tmp/info.out"; then
        ok
    else
        bad "run --load $ck: $(tail -n 3 "$tmp/run.out")"
    fi
done

# 3. a training trace: 200 steps every 10 = 21 snapshots (step 0 included)
if "$bin" train --task copy --steps 200 --trace "$tmp/train.tstrace" --every 10 --quiet >"$tmp/t.out" 2>&1 &&
    "$bin" info "$tmp/train.tstrace" >"$tmp/t.info" 2>&1; then
    n_loss=$(grep -c ' train\.loss ' "$tmp/t.info")
    n_attn=$(grep -c ' decoder\.layers\.0\.cross_attn\.weights ' "$tmp/t.info")
    n_norm=$(grep -c ' train\.grad_norm\.encoder\.layers\.0 ' "$tmp/t.info")
    if [ "$n_loss" = 21 ] && [ "$n_attn" = 21 ] && [ "$n_norm" = 21 ]; then
        ok
    else
        bad "training trace: $n_loss train.loss, $n_attn cross-attention, $n_norm grad-norm records (want 21 each)"
    fi
    # the metadata (plain JSON in the header) keeps the clip threshold the grad-norm curve draws
    if grep -aq '"training":{"clip":1,"label_smoothing":0}' "$tmp/train.tstrace"; then ok
    else bad "training trace: its metadata lacks the run's clip threshold"; fi
else
    bad "train --trace: $(tail -n 3 "$tmp/t.out") $(tail -n 3 "$tmp/t.info" 2>/dev/null)"
fi

# 4. one forward and backward, every gradient traced
if "$bin" run --backward --trace "$tmp/bwd.tstrace" >"$tmp/b.out" 2>&1 &&
    "$bin" info "$tmp/bwd.tstrace" >"$tmp/b.info" 2>&1; then
    missing=""
    for name in loss grad.logits grad.decoder.layers.1.cross_attn.weights grad.encoder.layers.0.norm1.in \
        grad.embed.out grad.generator.weight grad.embed.tokens.weight grad.encoder.layers.0.self_attn.in_proj_weight; do
        grep -q " $name " "$tmp/b.info" || missing="$missing $name"
    done
    if [ -z "$missing" ]; then ok; else bad "run --backward: the trace lacks$missing"; fi
else
    bad "run --backward: $(tail -n 3 "$tmp/b.out")"
fi

# 5. bad input: one line on stderr, exit 2
expect_2() {
    "$bin" "$@" >"$tmp/bad.out" 2>"$tmp/bad.err"
    local rc=$?
    if [ "$rc" = 2 ] && [ "$(wc -l <"$tmp/bad.err")" -ge 1 ] && grep -q "$1" "$tmp/bad.err"; then
        ok
    else
        bad "tscope $* exited $rc (want 2): $(head -n 2 "$tmp/bad.err")"
    fi
}
expect_2 train --task bogus
expect_2 train --steps 10
expect_2 train --task copy --steps -1
expect_2 train --task copy --lr 0
expect_2 train --task copy --vocab 3
expect_2 train --task copy --every 5
expect_2 train --task copy --heads 3
expect_2 run --backward --labels /nonexistent.npy

# The decoder reads a sentence as training fed the copy model (ts_task_decoder_input):
# the first word stands where the start id stood, so the model copies the rest.
out=$("$bin" run --preset tiny --vocab 16 --text "go the cat sat on a mat and it was" \
    --load assets/tiny-copy.safetensors 2>&1)
case $out in *"decoder reads: <bos> the cat sat on a mat and it was"*) ok ;; *) bad "copy model's decoder input: $out" ;; esac
case $out in *"predicted (loaded weights, argmax of the logits): the cat sat on a mat and it was"*) ok ;;
    *) bad "the copy model does not copy lesson 9's sentence: $out" ;; esac
# Greedy decoding: nobody gives the reverse model its answer; it writes one word a
# pass and reads it back, and the trace's decoder input is what it wrote.
out=$("$bin" run --preset tiny --vocab 16 --text "go the cat sat on a mat and it was" \
    --load assets/tiny-reverse.safetensors --greedy --trace "$tmp/greedy.tstrace" 2>&1)
case $out in *"decoder reads: <bos> was it and mat a on sat cat the"*) ok ;; *) bad "greedy reverse: $out" ;; esac
case $out in *"decoded greedily (each word fed back as the next input): was it and mat a on sat cat the"*) ok ;;
    *) bad "the reverse model does not reverse lesson 17's sentence: $out" ;; esac
case $out in *"no <eos> within the decoder's 10 positions"*) ok ;; *) bad "greedy reverse: no word on <eos>: $out" ;; esac
# (that one traced pass is the decoding: tests/test_decode.c checks each row's argmax)
"$bin" info "$tmp/greedy.tstrace" | grep -q " decoder.input .*\[1, 10\]" && ok || bad "greedy: no decoder.input in the trace"
# Ids in, ids out: a source given as --ids has no words to print.
{ # (1, 10) int64 in .npy 1.0: magic, header length 118 (so the data starts at byte 128), the header, the ids
    printf '\x93NUMPY\x01\x00\x76\x00'
    printf '%-117s\n' "{'descr': '<i8', 'fortran_order': False, 'shape': (1, 10), }"
    for id in 1 5 6 7 8 9 10 11 12 13; do printf "\\x$(printf %02x $id)\\x00\\x00\\x00\\x00\\x00\\x00\\x00"; done
} >"$tmp/ids.npy"
out=$("$bin" run --preset tiny --vocab 16 --load assets/tiny-reverse.safetensors --ids "$tmp/ids.npy" --greedy 2>&1)
case $out in *"decoded greedily (each id fed back as the next input): 13 12 11 10 9 8 7 6"*"would write 5 next"*) ok ;;
    *) bad "greedy from --ids: $out" ;; esac
# An untrained model stops at the <eos> it writes; the positions after it are padding.
out=$("$bin" run --preset tiny --vocab 16 --text "go the cat sat on a mat and it was" --greedy 2>&1)
case $out in *"decoded greedily (each word fed back as the next input): a sat a <eos>"*) ok ;;
    *) bad "greedy untrained: $out" ;; esac
case $out in *"(stopped at <eos>: positions 4 to 9 are padding)"*) ok ;; *) bad "greedy untrained: no padding after <eos>: $out" ;; esac

# A plain sentence to an untrained model is shifted right behind <bos>.
out=$("$bin" run --preset tiny 2>&1)
case $out in *"decoder reads: <bos> my name is"*) ok ;; *) bad "tiny's decoder input: $out" ;; esac

finish
