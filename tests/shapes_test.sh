#!/usr/bin/env bash
# `tscope shapes` against the goldens in tests/golden/: every preset's step
# list and table (tests/golden/PRESET.shapes), seed 000's printout contained in
# order in `--style torch` (tests/golden/seed000_torch_sizes.txt), `run
# --print-shapes` printing the same steps as the dry run, and the messages for
# configs that cannot work. After an intended change, refresh the goldens with
#   UPDATE_GOLDEN=1 bash tests/shapes_test.sh
# and read the diff before committing it. Runs ./tscope (or $TSCOPE).
. "$(dirname "$0")/lib.sh"

# 1. every preset against its golden, with a readable diff on change
for preset in tiny seed000 seed001 seed004 copy base; do
    golden=tests/golden/$preset.shapes
    if ! "$bin" shapes --preset "$preset" >"$tmp/$preset.shapes" 2>"$tmp/err"; then
        bad "shapes --preset $preset failed: $(cat "$tmp/err")"
        continue
    fi
    if [ "${UPDATE_GOLDEN:-}" = 1 ]; then
        cp "$tmp/$preset.shapes" "$golden"
        echo "updated $golden"
    fi
    if [ ! -f "$golden" ]; then
        bad "$golden is missing (UPDATE_GOLDEN=1 bash $0 writes it)"
    elif diff -u "$golden" "$tmp/$preset.shapes" >"$tmp/diff"; then
        ok
    else
        bad "shapes --preset $preset differs from $golden (- golden, + now):"
        head -n 40 "$tmp/diff" | sed 's/^/    /'
    fi
done

# 2. seed 000's torch.Size values, all of them, in order (a subsequence)
sizes() { grep -o 'torch\.Size(\[[0-9, ]*\])'; }
"$bin" shapes --preset seed000 --style torch >"$tmp/torch.txt" 2>&1
grep -v '^#' tests/golden/seed000_torch_sizes.txt | sizes >"$tmp/want"
sizes <"$tmp/torch.txt" >"$tmp/got"
want_n=$(wc -l <"$tmp/want")
missing=$(awk -v n="$want_n" '
    NR == FNR { want[NR] = $0; next }
    k < n && $0 == want[k + 1] { k++ }
    END { if (k < n) printf "size #%d of %d (layer %d): %s", k + 1, n, int(k / 28) + 1, want[k + 1] }
' "$tmp/want" "$tmp/got")
if [ "$want_n" = 140 ] && [ -z "$missing" ]; then
    ok
else
    bad "shapes --preset seed000 --style torch lacks seed 000's $missing (of $want_n)"
fi

# 3. the real run prints the same steps as the dry run
steps() { grep -E '^(-------|[a-z_]+\.size\(\): )'; }
if "$bin" run --preset tiny --print-shapes >"$tmp/run.txt" 2>"$tmp/err"; then
    steps <"$tmp/run.txt" >"$tmp/run.steps"
    steps <"$tmp/tiny.shapes" >"$tmp/dry.steps"
    if [ -s "$tmp/run.steps" ] && diff -u "$tmp/dry.steps" "$tmp/run.steps" >"$tmp/diff"; then ok; else
        bad "run --print-shapes and shapes list different steps:"
        head -n 20 "$tmp/diff" | sed 's/^/    /'
    fi
else
    bad "run --preset tiny --print-shapes failed: $(cat "$tmp/err")"
fi
"$bin" run --preset tiny --print-shapes=torch >"$tmp/run.txt" 2>&1
grep -q '^qkv.size(): torch.Size(\[1, 4, 48\])$' "$tmp/run.txt" && ok || bad "--print-shapes=torch prints no torch.Size"

# 4. configs that cannot work: one line, exit 2
expect_error() { # expect_error "WANTED TEXT" args...
    local want=$1; shift
    "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if [ "$rc" = 2 ] && grep -qF -- "$want" "$tmp/err" && [ "$(wc -l <"$tmp/err")" = 1 ]; then ok; else
        bad "$* -> exit $rc, stderr: $(cat "$tmp/err") (wanted: $want)"
    fi
}
expect_error "--heads 7 does not divide --d-model 512" shapes --preset seed000 --heads 7
expect_error "the reshape of qkv [30, 200, 1536] to [30, 200, 7, 219] fails" run --preset seed000 --heads 7 --d-model 512
expect_error "unknown preset 'gpt'; the presets are tiny, seed000, seed001, seed004, copy, base" shapes --preset gpt
expect_error "unknown preset 'gpt'" run --preset gpt
expect_error "--vocab 6 is too small for the text: it has 4 distinct words" run --vocab 6
expect_error "the text has 4 tokens, more than --seq 3" shapes --seq 3
expect_error "--dropout 1 must be at least 0 and below 1" run --dropout 1
expect_error "takes random vectors, not --text" shapes --preset seed001 --text hello

# 5. a padded batch masks the padded keys; the output says what the decoder read
if "$bin" run --text "My name is Goro" --text "Hello" --print-shapes >"$tmp/pad.txt" 2>"$tmp/err"; then
    grep -A12 -- '------- encoder.layers.0.self_attn -------' "$tmp/pad.txt" | grep -q '^masked.size(): \[2, 2, 4, 4\]$' \
        && ok || bad "a padded batch shows no encoder masked step"
else
    bad "run with two texts failed: $(cat "$tmp/err")"
fi

finish
