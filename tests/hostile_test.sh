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
# training state) and a trace of the tiny model, made by the plain binary
printf 'the cat sat on the mat. %.0s' $(seq 200) >"$tmp/base/corpus.txt"
if ! "$bin" train --task lm --corpus "$tmp/base/corpus.txt" --layers 1 --d-model 8 --heads 2 --ffn 16 --seq 16 \
    --batch 2 --heldout 2 --steps 2 --sample 0 --quiet --save "$tmp/base/lm.safetensors" >"$tmp/base/out" 2>&1 ||
    ! "$bin" run --preset tiny --trace "$tmp/base/t.tstrace" >>"$tmp/base/out" 2>&1; then
    bad "the good files: $(tail -n 3 "$tmp/base/out")"
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
echo "hostile inputs: $(grep -c '' "$tmp/cases.tsv") cases on ${#bins[@]} binaries ($cases runs)"
finish
