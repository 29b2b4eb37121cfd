#!/usr/bin/env bash
# Language models end to end, in seconds and with no corpus installed: a
# small `tscope train --task lm` on Genesis 1-2 (tests/lm/, public domain)
# lowers its loss, saves a checkpoint that `generate` and `run --load` use
# with no model flags, writes a trace whose scores draw; generate is the same
# for the same seed; Ctrl-C saves and exits cleanly; each bad input gets one
# line on stderr and exit 2. Runs ./tscope (or $TSCOPE).
. "$(dirname "$0")/lib.sh"

corpus=tests/lm/genesis-1-2.txt
small=(--corpus "$corpus" --layers 1 --d-model 32 --heads 2 --ffn 64 --seq 32 --batch 8 --heldout 16)

# 1. a short run: the held-out loss ends well below ln V, what guessing uniformly scores
#    (an untrained model scores about that), and the training loss falls
if "$bin" train --task lm "${small[@]}" --steps 120 --lr 1e-2 --warmup 10 --eval-every 20 --sample 40 \
    --save "$tmp/m.safetensors" --trace "$tmp/t.tstrace" --every 40 >"$tmp/train.out" 2>&1; then
    lm_loss_fell "the GPT at step 120" "$tmp/train.out"
    grep -q '^sample (temperature 0.8, 40 tokens' "$tmp/train.out" && ok || bad "no sample printed"
else
    bad "train --task lm: $(tail -n 3 "$tmp/train.out")"
fi

# 2. the trace: 4 snapshots (0, 40, 80, 120) of every score, drawn as lines
if "$bin" info "$tmp/t.tstrace" >"$tmp/info" 2>&1; then
    for name in lm.heldout_loss lm.repeat.loss lm.score.prev_token lm.score.induction lm.score.copying \
        decoder.layers.0.self_attn.weights; do
        n=$(grep -c " $name " "$tmp/info")
        [ "$n" = 4 ] && ok || bad "$name: $n records, want 4"
    done
    for name in lm.score.induction lm.repeat.loss lm.heldout_loss; do
        if "$bin" png "$tmp/t.tstrace" --tensor $name -o "$tmp/$name.png" >"$tmp/png.out" 2>&1 &&
            grep -q 'view curves' "$tmp/png.out"; then ok; else bad "png $name: $(cat "$tmp/png.out")"; fi
    done
    # the probes carry their own labels: batch 1 is the random string, not Genesis
    "$bin" png "$tmp/t.tstrace" --tensor decoder.layers.0.self_attn.weights --head 0 --batch 1 -o "$tmp/b1.png" \
        >/dev/null 2>&1 && ok || bad "png of the second probe"
else
    bad "info: $(cat "$tmp/info")"
fi

# 3. generate: no model flags; the same seed the same text, another seed another
g() { "$bin" generate --load "$tmp/m.safetensors" --prompt "And God" -n 40 --quiet "$@"; }
if g --seed 1 >"$tmp/g1" 2>"$tmp/gerr" && g --seed 1 >"$tmp/g2" 2>>"$tmp/gerr" && g --seed 2 >"$tmp/g3" 2>>"$tmp/gerr"; then
    cmp -s "$tmp/g1" "$tmp/g2" && ok || bad "generate --seed 1 twice differs"
    cmp -s "$tmp/g1" "$tmp/g3" && bad "generate --seed 1 and --seed 2 give the same text" || ok
    case $(cat "$tmp/g1") in "And God"*) ok ;; *) bad "the text does not start with the prompt: $(cat "$tmp/g1")" ;; esac
    [ "$(head -c 1000 "$tmp/g1" | wc -m)" -ge 47 ] && ok || bad "generate -n 40 wrote $(wc -m <"$tmp/g1") characters"
else
    bad "generate: $(cat "$tmp/gerr")"
fi
# temperature 0 is the argmax: the seed does not matter
if g --temperature 0 --seed 1 >"$tmp/t1" 2>/dev/null && g --temperature 0 --seed 9 >"$tmp/t2" 2>/dev/null; then
    cmp -s "$tmp/t1" "$tmp/t2" && ok || bad "--temperature 0 depends on the seed"
else
    bad "generate --temperature 0 failed"
fi
# traced: one pass over the whole text (7 + 20 tokens), then the distributions (1, 27, V)
if g -n 20 --trace "$tmp/g.tstrace" >/dev/null 2>"$tmp/gerr" && "$bin" info "$tmp/g.tstrace" >"$tmp/ginfo" 2>&1; then
    grep -q ' generate.probs .*\[1, 27, ' "$tmp/ginfo" && ok || bad "no generate.probs (1, 27, V): $(tail -n 3 "$tmp/ginfo")"
    grep -q ' logits .*\[1, 27, ' "$tmp/ginfo" && ok || bad "the pass is not over the 27 tokens: $(grep logits "$tmp/ginfo")"
else
    bad "generate --trace: $(cat "$tmp/gerr")"
fi

# 4. run --load reads a text through the checkpoint, labels from its tokenizer
if "$bin" run --load "$tmp/m.safetensors" --text "In the beginning" --trace "$tmp/r.tstrace" >"$tmp/run.out" 2>&1; then
    grep -q '^loss on this text: [0-9.]* nats/token over 15 predictions' "$tmp/run.out" && ok ||
        bad "run --load: $(tail -n 3 "$tmp/run.out")"
    "$bin" info "$tmp/r.tstrace" | grep -q '^source: I n ␣ t h e' && ok || bad "the trace's labels are not the text's characters"
else
    bad "run --load: $(tail -n 3 "$tmp/run.out")"
fi

# 5. Ctrl-C: the loop stops after the step under way, the checkpoint is written, exit 0
"$bin" train --task lm "${small[@]}" --steps 1000000 --save "$tmp/stop.safetensors" >"$tmp/stop.out" 2>&1 &
pid=$!
for _ in $(seq 50); do grep -q '^step ' "$tmp/stop.out" 2>/dev/null && break; sleep 0.1; done
kill -INT $pid
wait $pid
rc=$?
if [ $rc = 0 ] && grep -q 'stopped by Ctrl-C' "$tmp/stop.out" && [ -f "$tmp/stop.safetensors" ] &&
    "$bin" generate --load "$tmp/stop.safetensors" -n 5 --quiet >/dev/null 2>&1; then
    ok
else
    bad "Ctrl-C: exit $rc, $(tail -n 2 "$tmp/stop.out"); checkpoint: $(ls "$tmp"/stop* 2>&1)"
fi
ls "$tmp"/stop.safetensors.* 2>/dev/null | grep -qv '\.state$' && bad "a temporary checkpoint was left behind" || ok

# 5b. --resume: a run stopped by SIGTERM at whatever step, then resumed, ends with the same
#     weights, bit for bit, as the same run never stopped (dropout on: its stream resumes too)
data_bytes() { # the tensors' bytes of a safetensors file (its metadata says when it was made)
    python3 -c 'import struct,sys; b=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",b[:8])[0]; sys.stdout.buffer.write(b[8+n:])' "$1"
}
resume=("${small[@]}" --dropout 0.1 --steps 200 --eval-every 50 --sample 0)
"$bin" train --task lm "${resume[@]}" --save "$tmp/whole.safetensors" --quiet >"$tmp/whole.out" 2>&1 || bad "the whole run: $(tail -n 2 "$tmp/whole.out")"
"$bin" train --task lm "${resume[@]}" --save "$tmp/part.safetensors" >"$tmp/part.out" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q '^step ' "$tmp/part.out" 2>/dev/null && break; sleep 0.05; done
kill -TERM $pid
wait $pid
rc=$?
k=$(sed -n 's/.*stopped by SIGTERM at step \([0-9]*\) of 200$/\1/p' "$tmp/part.out")
if [ $rc = 0 ] && [ -n "$k" ] && grep -q "^to go on from step $k: tscope train --task lm --resume $tmp/part.safetensors$" "$tmp/part.out" &&
    [ -f "$tmp/part.safetensors.state" ]; then ok; else bad "SIGTERM: exit $rc; $(tail -n 3 "$tmp/part.out")"; fi
ls "$tmp"/part.safetensors.* 2>/dev/null | grep -qv '\.state$' && bad "SIGTERM left a temporary file" || ok
if "$bin" train --task lm --resume "$tmp/part.safetensors" --sample 0 --quiet >"$tmp/resumed.out" 2>&1; then
    grep -q "^# resuming $tmp/part.safetensors at step $k of 200" "$tmp/resumed.out" && ok || bad "no resuming line: $(head -n 5 "$tmp/resumed.out")"
    if cmp -s <(data_bytes "$tmp/whole.safetensors") <(data_bytes "$tmp/part.safetensors"); then
        ok
        echo "ok: stopped at step $k of 200 and resumed: the same weights, bit for bit, as the run never stopped"
    else
        bad "resumed from step $k: the weights differ from the run never stopped"
    fi
    # and its held-out loss is the whole run's
    [ "$(tail -n 1 "$tmp/resumed.out")" = "$(tail -n 1 "$tmp/whole.out")" ] && ok ||
        bad "held-out lines differ: $(tail -n 1 "$tmp/resumed.out") / $(tail -n 1 "$tmp/whole.out")"
else
    bad "--resume: $(tail -n 3 "$tmp/resumed.out")"
fi

# a SIGTERM as soon as the run has started, with a trace open: saved, closed, no temporary file
"$bin" train --task lm "${small[@]}" --steps 100000 --save "$tmp/early.safetensors" --trace "$tmp/early.tstrace" \
    >"$tmp/early.out" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q '^# corpus' "$tmp/early.out" 2>/dev/null && break; sleep 0.02; done
kill -TERM $pid
wait $pid
rc=$?
[ $rc = 0 ] && [ -f "$tmp/early.safetensors" ] && [ -f "$tmp/early.tstrace" ] && ok || bad "an early SIGTERM: exit $rc; $(tail -n 2 "$tmp/early.out")"
ls "$tmp"/early.* | grep -qvE "\.(safetensors|state|tstrace|out)$" && bad "an early SIGTERM left $(ls "$tmp"/early.*)" || ok

# 5c. a long run without --save saves to a name it says at the start (here stopped at once)
mkdir -p "$tmp/cwd"
corpus_abs=$(abs "$corpus")
(cd "$tmp/cwd" && exec "$bin" train --task lm --corpus "$corpus_abs" --layers 1 --d-model 32 --heads 2 --ffn 64 --seq 32 \
    --batch 8 --heldout 16 --steps 1000 >"$tmp/nosave.out" 2>&1) &
pid=$!
for _ in $(seq 100); do grep -q '^step ' "$tmp/nosave.out" 2>/dev/null && break; sleep 0.05; done
kill -INT $pid
wait $pid
grep -q '^# no --save given: a run of 1000 steps is saved to lm-genesis-1-2.safetensors when it ends or is stopped$' \
    "$tmp/nosave.out" && [ -f "$tmp/cwd/lm-genesis-1-2.safetensors" ] &&
    grep -q '^to go on from step [0-9]*: tscope train --task lm --resume lm-genesis-1-2.safetensors$' "$tmp/nosave.out" && ok ||
    bad "no default save: $(cat "$tmp/nosave.out" | head -n 4; ls "$tmp/cwd")"

# 5d. the header and the last line count the same held-out tokens
h1=$(sed -n 's/^# corpus .*, \([0-9]*\) held out (\([0-9]*\) windows of \([0-9]*\) measured)$/\1 \2 \3/p' "$tmp/train.out")
h2=$(sed -n 's/^held-out loss .*(char; \([0-9]*\) windows of \([0-9]*\) tokens from the \([0-9]*\) held out)$/\3 \1 \2/p' "$tmp/train.out")
[ -n "$h1" ] && [ "$h1" = "$h2" ] && ok || bad "held-out counts: header '$h1', last line '$h2'"

# 5e. a NaN's advice fits the run: with --clip 1 already, it does not suggest it
"$bin" train --task lm "${small[@]}" --steps 30 --warmup 0 --lr 1e30 --sample 0 --quiet >/dev/null 2>"$tmp/nan.err"
grep -q 'try a smaller --lr (it is 1e+30)$' "$tmp/nan.err" && ok || bad "NaN advice: $(cat "$tmp/nan.err")"
"$bin" train --task lm "${small[@]}" --steps 30 --warmup 0 --lr 1e30 --clip 0 --sample 0 --quiet >/dev/null 2>"$tmp/nan.err"
grep -q 'or --clip 1$' "$tmp/nan.err" && ok || bad "NaN advice without clipping: $(cat "$tmp/nan.err")"

# 5f. defaults follow the corpus: generate with no --prompt starts from the corpus's first
#     line (Genesis here; a lowercase corpus's model never meets "And God said")
"$bin" generate --load "$tmp/m.safetensors" -n 5 --quiet >"$tmp/gd" 2>"$tmp/gerr" && grep -q '^Ge1:1 In the beginning' "$tmp/gd" &&
    ok || bad "generate's default prompt: $(cat "$tmp/gd" "$tmp/gerr")"
printf 'the cat sat on the mat. %.0s' $(seq 100) >"$tmp/lower.txt"
if "$bin" train --task lm --corpus "$tmp/lower.txt" --layers 1 --d-model 16 --heads 2 --ffn 32 --seq 16 --batch 4 --heldout 4 \
    --steps 3 --sample 10 --save "$tmp/lower.safetensors" --trace "$tmp/lower.tstrace" --every 3 >"$tmp/lower.out" 2>&1; then
    grep -q 'tokens after the 48 of the prompt' "$tmp/lower.out" && grep -q '^the cat sat on the mat' "$tmp/lower.out" && ok ||
        bad "the sample does not start from the corpus: $(tail -n 3 "$tmp/lower.out")"
    "$bin" generate --load "$tmp/lower.safetensors" -n 3 --quiet >"$tmp/lg" 2>&1 && grep -q '^the cat sat' "$tmp/lg" && ok ||
        bad "generate on a lowercase model: $(cat "$tmp/lg")"
else
    bad "train on a lowercase corpus: $(tail -n 3 "$tmp/lower.out")"
fi
# the trace follows the corpus's own held-out text, not Genesis
"$bin" info "$tmp/lower.tstrace" 2>&1 | grep '^source:' | grep -q '[tcsm] [ahe]' && ok ||
    bad "the trace's probe is not the corpus's text: $("$bin" info "$tmp/lower.tstrace" 2>&1 | grep '^source:' | head -c 200)"
# generate -n N shows where it is (a line each tenth when stderr is not a terminal)
"$bin" generate --load "$tmp/lower.safetensors" -n 1000 >/dev/null 2>"$tmp/gp"
[ "$(grep -c '^# [0-9]*/1000 tokens$' "$tmp/gp")" = 10 ] && ok || bad "generate -n 1000 progress: $(head -n 3 "$tmp/gp")"

# 6. bad input: one line, exit 2
printf 'ab\377cd' >"$tmp/bad.txt"
refuses "not UTF-8" "not UTF-8: byte 0xFF at offset 2" "$bin" train --task lm --corpus "$tmp/bad.txt"
refuses "no corpus file" "cannot open --corpus" "$bin" train --task lm --corpus "$tmp/none.txt"
refuses "--text" "--text is for tscope run" "$bin" train --task lm "${small[@]}" --text hi
refuses "--vocab with char" "--vocab is the word tokenizer's size" "$bin" train --task lm "${small[@]}" --vocab 50
refuses "--corpus with copy" "--corpus is for --task lm" "$bin" train --task copy --corpus "$corpus"
refuses "short corpus" "use a longer text or a shorter --seq" "$bin" train --task lm --corpus "$corpus" --seq 4000 \
    --layers 1 --d-model 32 --heads 2 --ffn 64 --batch 2
refuses "generate, no --load" "--load W.safetensors is required" "$bin" generate
refuses "generate a copy model" "is not a language model" "$bin" generate --load assets/tiny-copy.safetensors
refuses "unknown character" "is not in the model's vocabulary" "$bin" generate --load "$tmp/m.safetensors" --prompt "Zzz~"
refuses "negative -n" "-n -1 must not be negative" "$bin" generate --load "$tmp/m.safetensors" -n -1
refuses "model flags with an LM checkpoint" "--d-model: --load" \
    "$bin" run --load "$tmp/m.safetensors" --text hi --d-model 64
refuses "trace too long" "--trace shows the text in one pass" \
    "$bin" generate --load "$tmp/m.safetensors" -n 100 --trace "$tmp/x.tstrace"

# a language model's checkpoint brings its own config: every other run flag is refused, never ignored
for f in "--input tests/ref/load_encoder/x.npy" "--tgt-mask none" "--load-prefix x." "--ignore-extra" \
    "--heads 2" "--src-key-padding-mask tests/ref/load_encoder/src_key_padding_mask.npy"; do
    # shellcheck disable=SC2086
    "$bin" run --load assets/kjv-char.safetensors --text "And" $f >"$tmp/o" 2>"$tmp/e"
    [ $? = 2 ] && [ ! -s "$tmp/o" ] && [ "$(grep -c . "$tmp/e")" = 1 ] && ok || bad "run --load kjv-char $f: not refused in one line"
done

finish
