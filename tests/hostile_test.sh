#!/usr/bin/env bash
# Hostile input to every reader, on the plain and the sanitized binary: GPT-2
# folders (model.safetensors, config.json, encoder.json, vocab.bpe), tscope's
# own checkpoints (the config and tokenizer in their metadata), the training
# state --resume reads, corpora, --ids / --input / mask .npy files, traces and
# lessons, each damaged one way (tests/hostile/make_hostile.py writes them and
# lists the cases). Every case must end with exit 1 or 2 and exactly one line
# on stderr that names the problem (the expected piece of it), nothing on
# stdout, no sanitizer report, and nothing written where the command was told
# to write. A class of damage that fails here is fixed in its reader, not in
# the case. The sanitized runs also build a character vocabulary of an
# ASCII-only corpus (the cases that fail after it), where UBSan once caught
# qsort handed a NULL list. python3 (standard library only) writes the files.
. "$(dirname "$0")/lib.sh"

command -v python3 >/dev/null || { echo "hostile_test: python3 is needed (scripts/deps.sh)"; bad "no python3"; finish; }
hostile=$tmp/hostile
mkdir -p "$hostile" "$tmp/base"
# the good files the damage starts from: a one-step language model (and its
# training state, and a trace of it) and a trace of the tiny model, made by the plain binary
printf 'the cat sat on the mat. %.0s' $(seq 200) >"$tmp/base/corpus.txt"
if ! "$bin" train --task lm --corpus "$tmp/base/corpus.txt" --layers 1 --d-model 8 --heads 2 --ffn 16 --seq 16 \
    --batch 2 --heldout 2 --steps 2 --sample 0 --quiet --save "$tmp/base/lm.safetensors" >"$tmp/base/out" 2>&1 ||
    ! "$bin" run --preset tiny --trace "$tmp/base/t.tstrace" >>"$tmp/base/out" 2>&1 ||
    ! "$bin" run --load "$tmp/base/lm.safetensors" --text "the cat" --trace "$tmp/base/lm.tstrace" --level values \
        >>"$tmp/base/out" 2>&1; then
    bad "the good files: $(tail -n 3 "$tmp/base/out")"
    finish
fi
# issue 47's other runs: the same run resumed to step 3 (a state of another step), and a run of
# another seed (a state of another model)
small=(--layers 1 --d-model 8 --heads 2 --ffn 16 --seq 16 --batch 2 --heldout 2 --sample 0 --quiet)
cp "$tmp/base/lm.safetensors" "$tmp/base/lm3.safetensors" && cp "$tmp/base/lm.safetensors.state" "$tmp/base/lm3.safetensors.state"
if ! "$bin" train --task lm --resume "$tmp/base/lm3.safetensors" --steps 3 --sample 0 --quiet >>"$tmp/base/out" 2>&1 ||
    ! "$bin" train --task lm --corpus "$tmp/base/corpus.txt" "${small[@]}" --steps 2 --seed 9 \
        --save "$tmp/base/seed9.safetensors" >>"$tmp/base/out" 2>&1; then
    bad "the other runs: $(tail -n 3 "$tmp/base/out")"
    finish
fi
if ! python3 tests/hostile/make_hostile.py "$hostile" "$tmp/base/lm.safetensors" "$tmp/base/t.tstrace" \
    >"$tmp/cases.tsv" 2>"$tmp/gen.err"; then
    bad "make_hostile.py: $(tail -n 3 "$tmp/gen.err")"
    finish
fi

bins=("$bin")
asan=${TSCOPE_ASAN:-build-asan/tscope}
[ -x "$asan" ] && bins+=("$(abs "$asan")")
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

cases=0
for b in "${bins[@]}"; do
    label=$([ "$b" = "$bin" ] && echo plain || echo sanitized)
    while IFS=$'\t' read -r -a row; do
        name=${row[0]} want=${row[1]}
        work=$tmp/work
        rm -rf "$work" && mkdir -p "$work"
        args=()
        for a in "${row[@]:2}"; do a=${a//@W/$work}; args+=("${a//@H/$hostile}"); done
        (cd "$work" && "$b" "${args[@]}") >"$tmp/out" 2>"$tmp/err" </dev/null
        rc=$?
        cases=$((cases + 1))
        lines=$(grep -c '' "$tmp/err")
        why=
        if [ $rc != 1 ] && [ $rc != 2 ]; then why="exit $rc, want 1 or 2"
        elif grep -qE 'Sanitizer|runtime error:' "$tmp/err"; then why="a sanitizer report"
        elif [ "$lines" != 1 ]; then why="$lines lines on stderr, want 1"
        elif ! grep -qF -- "$want" "$tmp/err"; then why="stderr does not say '$want'"
        elif [ -s "$tmp/out" ]; then why="stdout is not empty: $(head -c 200 "$tmp/out")"
        elif [ -n "$(ls -A "$work")" ]; then why="wrote $(ls -A "$work" | tr '\n' ' ')"
        fi
        if [ -z "$why" ]; then ok; else bad "$label: $name: $why (stderr: $(head -c 400 "$tmp/err"))"; fi
        # HOSTILE_SHOW=1: every message, to read them as a user would
        [ -n "${HOSTILE_SHOW:-}" ] && [ "$b" = "$bin" ] && printf '%-60.60s %s\n' "$name" "$(head -c 300 "$tmp/err")"
    done <"$tmp/cases.tsv"
done
# what a resume saves resumes again, without --corpus (the documented use): the state names the
# corpus, and once held a pointer into metadata freed before it was copied (heap-use-after-free)
for b in "${bins[@]}"; do
    label=$([ "$b" = "$bin" ] && echo plain || echo sanitized)
    rm -rf "$tmp/again" && mkdir -p "$tmp/again"
    "$bin" train --task lm --corpus "$tmp/base/corpus.txt" "${small[@]}" --steps 2 --save "$tmp/again/lm.safetensors" \
        >"$tmp/again/out" 2>&1
    for steps in 4 6; do
        (cd "$tmp/again" && "$b" train --task lm --resume lm.safetensors --steps $steps --sample 0 --quiet) \
            >"$tmp/again/out" 2>"$tmp/again/err"
        rc=$?
        if [ $rc = 0 ] && ! grep -qE 'Sanitizer|runtime error:' "$tmp/again/err"; then ok
        else bad "$label: --resume without --corpus to step $steps: exit $rc: $(head -c 300 "$tmp/again/err")"; fi
    done
done
# text from a trace is inert on the terminal: a token or a name holding ESC is printed escaped
esc=$(printf '\033')
for b in "${bins[@]}"; do
    label=$([ "$b" = "$bin" ] && echo plain || echo sanitized)
    "$b" info "$hostile/tok-esc.tstrace" >"$tmp/out" 2>"$tmp/err"
    if [ $? = 0 ] && ! grep -q "$esc" "$tmp/out" && grep -qF 'is \x1B[2J' "$tmp/out"; then ok
    else bad "$label: info printed a token's ESC raw: $(head -c 300 "$tmp/out" | cat -v)"; fi
    "$b" png "$tmp/base/t.tstrace" --tensor "x${esc}[2J" -o "$tmp/x.png" >"$tmp/out" 2>"$tmp/err"
    if [ $? = 2 ] && ! grep -q "$esc" "$tmp/err" && grep -qF "'x\x1B[2J'" "$tmp/err"; then ok
    else bad "$label: png --tensor quoted an ESC raw: $(cat -v "$tmp/err")"; fi
done
# a setup's --text -h is the text "-h", not a request for help
printf '# H\n\n```tscope setup\npreset: tiny\ntext: -h\n```\n\n```tscope step\ntensor: input\n```\n\nText.\n' >"$tmp/h.md"
"$bin" lesson "$tmp/h.md" --export "$tmp/h-out" --quiet >"$tmp/out" 2>"$tmp/err" && [ -s "$tmp/h-out/step01.png" ] && ok ||
    bad "a setup of text -h: $(head -c 300 "$tmp/err")"
# a lesson's number is read from its file name by type: 4294967299-big.md is no lesson 3 (atoi wrapped it)
printf '# Big\n\n```tscope setup\npreset: tiny\n```\n\n```tscope step\ntensor: input\n```\n\nText.\n' >"$tmp/4294967299-big.md"
for b in "${bins[@]}"; do
    label=$([ "$b" = "$bin" ] && echo plain || echo sanitized)
    rm -rf "$tmp/site-big"
    # (the font stack keeps its caches at exit: tests/lsan.supp names it, as web_test does)
    LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0 "$b" site "$tmp/site-big" --lessons "$tmp/4294967299-big.md" \
        --quiet >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ $rc = 0 ] && [ -s "$tmp/site-big/index.html" ] && ! grep -rqE 'Lesson 3|"num">3<' "$tmp/site-big" &&
        ! grep -qE 'Sanitizer|runtime error:' "$tmp/err"; then ok
    else bad "$label: site of 4294967299-big.md: exit $rc, $(grep -rhoE 'Lesson 3|"num">3<' "$tmp/site-big" | head -1) $(head -c 300 "$tmp/err")"; fi
done
# a NaN that reaches a softmax is shown, not hidden: zeroing an RMSNorm's rms divides by zero; the
# attention softmax once turned its NaN rows into zeros counted as rows with every key masked, and
# the probs step into zeros with no NaN flag. The run says which step first holds NaN or Inf, and
# the trace's statistics count them in the attention weights and in probs.
llama=tests/ref/hf/llama
for b in "${bins[@]}"; do
    label=$([ "$b" = "$bin" ] && echo plain || echo sanitized)
    "$b" run --load "$llama" --ids "$llama/ids.npy" --ablate decoder.layers.0.norm1.rms --trace "$tmp/nan.tstrace" \
        >"$tmp/out" 2>"$tmp/err"
    rc=$?
    "$b" info "$tmp/nan.tstrace" --only decoder.layers.0.self_attn.weights --only probs >"$tmp/info" 2>>"$tmp/err"
    if [ $rc = 0 ] && grep -q 'steps hold NaN or Inf, the first decoder.layers.0.norm1' "$tmp/out" &&
        ! grep -q 'every key masked' "$tmp/out" && [ "$(grep -c 'NaN:' "$tmp/info")" = 2 ] &&
        ! grep -qE 'Sanitizer|runtime error:' "$tmp/err"; then ok
    else bad "$label: a NaN reaching a softmax: exit $rc: $(grep -E 'NaN|masked' "$tmp/out") / $(cat "$tmp/info") $(head -c 300 "$tmp/err")"; fi
done
# NaN logits leave nothing to draw from: generate refuses at the first such token instead of
# writing the argmax of NaNs (once, a run of line breaks with exit 0)
for b in "${bins[@]}"; do
    label=$([ "$b" = "$bin" ] && echo plain || echo sanitized)
    for temp in 0.8 0; do
        "$b" generate --load assets/induction-2l.safetensors --prompt "And God" -n 5 --temperature $temp \
            --ablate decoder.layers.0.norm1.std >"$tmp/out" 2>"$tmp/err"
        rc=$?
        if [ $rc = 2 ] && [ ! -s "$tmp/out" ] && [ "$(grep -c '' "$tmp/err")" = 1 ] &&
            grep -q '^tscope generate: the logits for new token 1 hold NaN or +Inf, so no token can be drawn' "$tmp/err"; then ok
        else bad "$label: generate with NaN logits at temperature $temp: exit $rc: $(head -c 300 "$tmp/out") / $(head -c 300 "$tmp/err")"; fi
    done
done
echo "hostile inputs: $(grep -c '' "$tmp/cases.tsv") cases on ${#bins[@]} binaries ($cases runs)"
finish
