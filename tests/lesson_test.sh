#!/usr/bin/env bash
# `tscope lesson`: --list shows every lesson, --check passes on each and fails
# with FILE:LINE on a broken one, lessons are found from any directory.
# Runs ./tscope (build it first; TSCOPE=path overrides).
. "$(dirname "$0")/lib.sh"
export TSCOPE_CACHE="$tmp/cache"

n_files=$(ls lessons/[0-9]*-*.md | wc -l)
expect 0 "--list" -- "$bin" lesson --list
[ "$(printf '%s\n' "$out" | wc -l)" = "$n_files" ] && ok || bad "--list shows $(printf '%s\n' "$out" | wc -l) lines for $n_files lessons"
[ "$n_files" -ge 11 ] && ok || bad "only $n_files lessons"
case $out in *"  3  attention "*"Scaled dot-product attention"*) ok ;; *) bad "--list misses lesson 3: $out" ;; esac

for f in lessons/[0-9]*-*.md; do
    # the runs are lesson_export_test's: here what needs none
    expect 0 "--check $f" -- "$bin" lesson "$f" --check --no-run
    case $out in "$f: ok, "[0-9]*" steps"*) ok ;; *) bad "--check $f printed: $out" ;; esac
done

# by number, name and stem, from another directory
(cd "$tmp" && "$bin" lesson 3 --check --no-run >/dev/null) && ok || bad "lesson 3 --check from another directory"
expect 0 "lesson by name" -- "$bin" lesson attention --check --no-run
expect 0 "lesson by stem" -- "$bin" lesson 03-attention --check --no-run
expect 0 "outline" -- "$bin" lesson 1 --print
case $out in *"step 1/"*"input"*) ok ;; *) bad "outline of lesson 1: $out" ;; esac

# a broken lesson: FILE:LINE: message, exit 1
printf '# Broken\n\n```tscope setup\npreset: tiny\n```\n\n```tscope step\ntensor: input\nview: heatmapp\n```\n' >"$tmp/broken.md"
expect 1 "broken lesson" -- "$bin" lesson "$tmp/broken.md" --check
[ "$err" = "$tmp/broken.md:9: unknown view 'heatmapp' (one of heatmap|grid|overview|curves|stats|shapes|lens|dist|rope|auto)" ] && ok ||
    bad "broken lesson message: $err"
printf '# Broken\n\n```tscope step\ntensor: input\n```\n' >"$tmp/early.md"
expect 1 "step before setup" -- "$bin" lesson "$tmp/early.md" --check
[ "$err" = "$tmp/early.md:3: a step block before the setup block (\`\`\`tscope setup comes first)" ] && ok ||
    bad "step-before-setup message: $err"

# bad usage: exit 2, one line
expect 2 "unknown lesson" -- "$bin" lesson 99 --check
case $err in "tscope lesson: no lesson '99' here, in ./lessons or in "*) ok ;; *) bad "unknown lesson message: $err" ;; esac
expect 2 "no lesson named" -- "$bin" lesson
expect 2 "--list with a lesson" -- "$bin" lesson 3 --list

# $TSCOPE_LESSONS moves the directory; --list fails (exit 1) when one lesson is broken
mkdir "$tmp/lessons"
cp lessons/01-shapes.md "$tmp/lessons/01-shapes.md"
cp "$tmp/broken.md" "$tmp/lessons/02-broken.md"
out=$(TSCOPE_LESSONS="$tmp/lessons" "$bin" lesson --list 2>"$tmp/err"); rc=$?
[ "$rc" = 1 ] && ok || bad "--list with a broken lesson: exit $rc, want 1"
case $(cat "$tmp/err") in "$tmp/lessons/02-broken.md:9: "*) ok ;; *) bad "--list error: $(cat "$tmp/err")" ;; esac
case $out in *"  1  shapes "*) ok ;; *) bad "TSCOPE_LESSONS not used: $out" ;; esac

# expect: a figure the run gives passes; one it does not stops the export at its line
export TSCOPE_CACHE="$tmp/cache"
mk_expect() { # FILE EXPECT: a one-step lesson on tiny that quotes EXPECT
    printf '# Expect\n\n```tscope setup\npreset: tiny\nlevel: values\n```\n\n```tscope step\ntensor: encoder.layers.0.self_attn.weights\nhead: 0\nexpect: %s\n```\n\nText.\n' "$2" >"$1"
}
mk_expect "$tmp/good.md" "at 0,0,1,1 0.33; max 0.72; mean 0.25"
mk_expect "$tmp/wrong.md" "at 0,0,1,1 0.34"
mk_expect "$tmp/nonsense.md" "median 0.5"
"$bin" lesson "$tmp/good.md" --export "$tmp/good" --quiet >/dev/null 2>"$tmp/err" && ok ||
    bad "a lesson quoting the run's figures fails: $(cat "$tmp/err")"
"$bin" lesson "$tmp/wrong.md" --export "$tmp/wrong" --quiet >/dev/null 2>"$tmp/err"; rc=$?
[ "$rc" = 1 ] && ok || bad "a wrong figure: exit $rc, want 1"
case $(cat "$tmp/err") in "$tmp/wrong.md:11: expect 'at 0,0,1,1 0.34': the run gives 0.3266"*) ok ;;
    *) bad "a wrong figure's message: $(cat "$tmp/err")" ;; esac
[ ! -e "$tmp/wrong/step01.png" ] && ok || bad "a lesson with a wrong figure still wrote its page"
"$bin" lesson "$tmp/nonsense.md" --export "$tmp/nonsense" --quiet >/dev/null 2>"$tmp/err"; rc=$?
[ "$rc" = 1 ] && ok || bad "an unreadable expect: exit $rc, want 1"

# a figure of the comparison: `right` reads the panel drawn on the right
mk_right() { # FILE EXPECT [COMPARE]: weights beside scores, quoting EXPECT
    printf '# Right\n\n```tscope setup\npreset: tiny\nlevel: values\n```\n\n```tscope step\ntensor: encoder.layers.0.self_attn.weights\nhead: 0\n%sexpect: %s\n```\n\nText.\n' "$3" "$2" >"$1"
}
mk_right "$tmp/right.md" "at 0,0,1,1 0.33; right at 0,0,1,1 -2.05" "compare-with: encoder.layers.0.self_attn.scores
"
mk_right "$tmp/right_wrong.md" "right at 0,0,1,1 0.33" "compare-with: encoder.layers.0.self_attn.scores
"
mk_right "$tmp/right_alone.md" "right at 0,0,1,1 0.33" ""
"$bin" lesson "$tmp/right.md" --export "$tmp/right" --quiet >/dev/null 2>"$tmp/err" && ok ||
    bad "a lesson quoting its comparison's figure fails: $(cat "$tmp/err")"
"$bin" lesson "$tmp/right_wrong.md" --export "$tmp/rw" --quiet >/dev/null 2>"$tmp/err"; rc=$?
case "$rc $(cat "$tmp/err")" in *"1 $tmp/right_wrong.md:12: expect 'at 0,0,1,1 0.33': the run gives"*"encoder.layers.0.self_attn.scores"*) ok ;;
    *) bad "a wrong figure on the right: exit $rc: $(cat "$tmp/err")" ;; esac
"$bin" lesson "$tmp/right_alone.md" --export "$tmp/ra" --quiet >/dev/null 2>"$tmp/err"; rc=$?
case "$rc $(cat "$tmp/err")" in *"1 "*"'right' is the comparison, and the step has none"*) ok ;;
    *) bad "'right' with no comparison: exit $rc: $(cat "$tmp/err")" ;; esac

# a layers.* name: its plot draws every layer; expect: reads the step's layer (0 when none)
mk_layers() { # FILE EXTRA: tiny's per-layer plot of encoder.layers.*.out, with EXTRA step keys
    printf '# Layers\n\n```tscope setup\npreset: tiny\n```\n\n```tscope setup other\nseed: 1\n```\n\n```tscope step\ntensor: encoder.layers.*.out\nview: curves\n%s```\n\nText.\n' "$2" >"$1"
}
mk_layers "$tmp/lay0.md" "expect: min -2.25
"
mk_layers "$tmp/lay1.md" "layer: 1
expect: min -2.11
"
mk_layers "$tmp/lay1_wrong.md" "layer: 1
expect: min -2.25
"
mk_layers "$tmp/lay_over.md" "compare-run: other
overlay: true
"
expect 0 "expect: on a layers.* name reads layer 0" -- "$bin" lesson "$tmp/lay0.md" --export "$tmp/lay0" --quiet
expect 0 "expect: on a layers.* name reads the step's layer" -- "$bin" lesson "$tmp/lay1.md" --export "$tmp/lay1" --quiet
expect 1 "expect: a figure of another layer" -- "$bin" lesson "$tmp/lay1_wrong.md" --export "$tmp/lay1w" --quiet
case $err in *"encoder.layers.1.out"*) ok ;; *) bad "a wrong layer's figure does not name the layer read: $err" ;; esac
expect 0 "overlay: two runs' per-layer plots" -- "$bin" lesson "$tmp/lay_over.md" --export "$tmp/lay_over" --quiet
[ -s "$tmp/lay_over/step01.png" ] && ok || bad "the overlaid per-layer plot wrote no page"

# expect: on curves, ranges and rows, read from the shipped training trace (nothing runs). Each kind
# passes when true; a planted wrong one of each kind stops the export at its line, naming what the run gives.
mk_curve() { # FILE TENSOR EXTRA EXPECT
    printf '# Curves\n\n```tscope setup\ntrace: %s/assets/induction-2l.tstrace\n```\n\n```tscope step\ntensor: %s\n%sexpect: %s\n```\n\nText.\n' "$PWD" "$2" "$3" "$4" >"$1"
}
ps='lm.score.prev_token'
attn='decoder.layers.1.self_attn.weights'
mk_curve "$tmp/curves.md" $ps "" "curve 0,2 at step 1000 0.34; curve 0,2 max 0.36 at step 2100; curve 0,3 min 0.0185 at step 2800; curve 0,2 crosses 0.2 at step 600; curve 1,* above curve lm.chance.prev_token from 200 to 200; curve 0,0 above 0.18 from 1000 to 3000; curve 1,* below 0.06 from 1100 to 3000; curve 0,1 below curve 0,2 from 200 to 3000"
expect 0 "expect: true sentences about curves" -- "$bin" lesson "$tmp/curves.md" --export "$tmp/curves" --quiet
mk_curve "$tmp/rows.md" $attn "head: 1
step: -1
" "rows 32-63 argmax offset -31 32; rows 32-63 mean offset -31 0.81; rows 0-31 argmax offset 0 25"
expect 0 "expect: true counts over rows" -- "$bin" lesson "$tmp/rows.md" --export "$tmp/rows" --quiet
planted() { # NAME TENSOR EXTRA EXPECT WANT: a wrong sentence of one kind stops the export; stderr has WANT
    mk_curve "$tmp/p_$1.md" "$2" "$3" "$4"
    "$bin" lesson "$tmp/p_$1.md" --export "$tmp/p_$1" --quiet >/dev/null 2>"$tmp/err"; local rc=$?
    [ "$rc" = 1 ] && ok || bad "planted $1: exit $rc, want 1 ($(cat "$tmp/err"))"
    case $(cat "$tmp/err") in "$tmp/p_$1.md:"*": expect '$4': $5"*) ok ;; *) bad "planted $1: $(cat "$tmp/err")" ;; esac
    [ ! -e "$tmp/p_$1/step01.png" ] && ok || bad "planted $1: the page was written"
}
planted value $ps "" "curve 0,2 at step 1000 0.36" "the run gives 0.340"
planted max $ps "" "curve 0,2 max 0.36 at step 1200" "the run's max is 0.362"
planted crossing $ps "" "curve 0,2 crosses 0.2 at step 500" "the run first crosses 0.2 at step 600"
planted range $ps "" "curve 1,* below curve lm.chance.prev_token from 200 to 700" "at step 200 the run gives 0.06757"
planted count $attn "head: 1
step: -1
" "rows 0-31 argmax offset 0 32" "the run has 25 such rows"
planted mean $attn "head: 1
step: -1
" "rows 32-63 mean offset -31 0.7" "the run gives 0.81"
planted maxrows $attn "head: 1
step: -1
" "rows 32-63 max above 0.3 31" "the run has 32 such rows of 32"
planted usage $ps "" "curve 0,2 peaks 0.3" "a curve item is"

# hostile expect: items and zoom: values: one clear error at the line, no crash, on the sanitized
# binary too when the build has one (TSCOPE_ASAN, set by scripts/run-tests.sh)
long=$(printf 'curve 0,2 at step %0300d 0.3' 0)
bins="$bin"
[ -n "${TSCOPE_ASAN:-}" ] && [ -x "$TSCOPE_ASAN" ] && bins="$bins $TSCOPE_ASAN"
n_hostile=0
for item in "curve" "curve 0,2 at step" "curve ,,, at step 0 1" "curve 0,* max 1 at step 0" "curve 0,2,3 at step 0 1" \
    "curve 99999999999999999999,0 at step 0 1" "curve -1,0 at step 0 1" "curve 0,2 crosses x at step 0" \
    "curve 0,2 above curve 1,* from 0 to 100" "curve nosuch.name at step 0 1" "curve train.step at step 0 5" \
    "rows 5-" "rows -3-4 argmax offset 0 1" "rows 0-99999 mean offset 0 1" "rows head 99 argmax offset 0 1" \
    "rows max above x 3" "of" "of x" "of lm.score.prev_token" "mean 5-2 1" "right max 1" "$long"; do
    mk_curve "$tmp/hostile.md" $ps "" "$item"
    for b in $bins; do
        ASAN_OPTIONS=detect_leaks=1 "$b" lesson "$tmp/hostile.md" --export "$tmp/hostile" --quiet >/dev/null 2>"$tmp/err"; rc=$?
        case "$rc $(head -c 300 "$tmp/err")" in
            "1 $tmp/hostile.md:9: expect '"*) grep -q Sanitizer "$tmp/err" && bad "expect: '$item' ($b): $(cat "$tmp/err")" || n_hostile=$((n_hostile + 1)) ;;
            *) bad "expect: '$item' ($b): exit $rc: $(head -c 300 "$tmp/err")" ;;
        esac
    done
done
[ "$n_hostile" -gt 0 ] && ok || bad "no hostile expect: item was refused"
for z in "rows 1-2 cols" "rows 99999999999-1" "cols 3" "rows a-b" "diagonal" "rows 1-2 rows 3-4 cols 1-2"; do
    mk_curve "$tmp/hostile_zoom.md" $attn "zoom: $z
" "max 1"
    for b in $bins; do
        ASAN_OPTIONS=detect_leaks=1 "$b" lesson "$tmp/hostile_zoom.md" --check >/dev/null 2>"$tmp/err"; rc=$?
        case "$rc $(cat "$tmp/err")" in "1 $tmp/hostile_zoom.md:9: "*"zoom"*) ok ;; *) bad "zoom: '$z' ($b): exit $rc: $(cat "$tmp/err")" ;; esac
    done
done

# a number the narration quotes must be drawn on the page, or excused by unchecked: with a reason
mk_quote() { # FILE KEYS TEXT: the tiny model's 4 x 4 weights (values in the cells) beside TEXT
    printf '# Quotes\n\n```tscope setup\npreset: tiny\nlevel: values\n```\n\n```tscope step\ntensor: encoder.layers.0.self_attn.weights\nhead: 0\n%s```\n\n%s\n' "$2" "$3" >"$1"
}
mk_quote "$tmp/q_drawn.md" "" "Row 1 gives 0.33 to its second key."
mk_quote "$tmp/q_missing.md" "" "Row 1 gives 0.33 to its second key, and 0.77 to nothing drawn."
mk_quote "$tmp/q_expect.md" "expect: std 0.16
" "The weights spread with a std of 0.16."
mk_quote "$tmp/q_caption.md" "expect: std 0.16
caption: The weights' std: 0.16.
" "The weights spread with a std of 0.16."
mk_quote "$tmp/q_caption_typed.md" "expect: std 0.16
caption: The weights' std: 0.17.
" "The weights spread widely."
mk_quote "$tmp/q_unchecked.md" "unchecked: 0.25 arithmetic, 1/4
" "Even attention over four keys is 1/4 = 0.25."
mk_quote "$tmp/q_no_reason.md" "unchecked: 0.25
" "Even attention over four keys is 1/4 = 0.25."
mk_quote "$tmp/q_stale.md" "unchecked: 0.5 arithmetic, 1/2
" "Even attention over four keys is 1/4."
mk_quote "$tmp/q_code.md" "" "The code writes \`1.0 / 4.0\`."
mk_quote "$tmp/q_count.md" "" "The largest weight of 3 of the 4 rows is on the diagonal."
mk_quote "$tmp/q_names.md" "" "Row 1 of layer 0, heads 0 and 1, seed 001, page 2 of lesson 13, \`layers.0\`: names, not quotes; \$1/(t + 1)\$ a formula."
mk_quote "$tmp/q_whole.md" "" "The model is 2 layers of width 64, traced every 100 steps."
mk_quote "$tmp/q_step.md" "" "Row 1 gives 0.33 at step 1100."
mk_quote "$tmp/q_whole_ok.md" "unchecked: 64 a setting: the width of the preset; 100 a setting: the trace's interval
" "The model is 2 layers of width 64, traced every 100 steps."
mk_quote "$tmp/q_total.md" "expect: rows argmax offset 0 2
" "The diagonal is the heaviest cell of 2 of the 3 rows."
mk_quote "$tmp/q_row.md" "" "Row 7 is not in a 4 x 4 matrix."
mk_quote "$tmp/q_round.md" "" "Row 1 gives 0.3 to its second key."
mk_quote "$tmp/q_precise.md" "" "Row 1 gives 0.3333 to its second key."
expect 0 "a quoted number drawn in a cell" -- "$bin" lesson "$tmp/q_drawn.md" --export "$tmp/q_drawn" --quiet
expect 1 "a quoted number the page does not draw" -- "$bin" lesson "$tmp/q_missing.md" --export "$tmp/q_missing" --quiet
[ "$err" = "$tmp/q_missing.md:13: step 1 quotes 0.77, which its page does not draw (show it: a zoom:, a highlight:, a caption: with an expect: item; or list it in unchecked: with the reason)" ] && ok ||
    bad "a quoted number not drawn: $err"
[ ! -e "$tmp/q_missing/step01.png" ] && ok || bad "a page quoting a number it does not draw was written"
expect 1 "a quoted number checked by expect: but not drawn" -- "$bin" lesson "$tmp/q_expect.md" --export "$tmp/q_expect" --quiet
case $err in *"q_expect.md:14: step 1 quotes 0.16, which its page does not draw"*) ok ;; *) bad "expect: is not drawing: $err" ;; esac
expect 0 "a quoted number drawn by a caption: that expect: checks" -- "$bin" lesson "$tmp/q_caption.md" --export "$tmp/q_caption" --quiet
expect 1 "a caption: figure no expect: item gives" -- "$bin" lesson "$tmp/q_caption_typed.md" --export "$tmp/q_caption_typed" --quiet
case $err in *"q_caption_typed.md:12: caption: 0.17 is none of the step's expect: figures"*) ok ;; *) bad "a typed caption figure: $err" ;; esac
expect 0 "a quoted number listed in unchecked: with a reason" -- "$bin" lesson "$tmp/q_unchecked.md" --export "$tmp/q_unchecked" --quiet
expect 1 "an unchecked: figure without a reason" -- "$bin" lesson "$tmp/q_no_reason.md" --check --no-run
case $err in *"q_no_reason.md:11: 'unchecked' 0.25 gives no reason"*) ok ;; *) bad "unchecked: without a reason: $err" ;; esac
expect 1 "an unchecked: figure the narration does not quote" -- "$bin" lesson "$tmp/q_stale.md" --export "$tmp/q_stale" --quiet
case $err in *"q_stale.md:11: unchecked: 0.5 is not quoted by the step's narration"*) ok ;; *) bad "a stale unchecked: $err" ;; esac
expect 0 "numbers in inline code are not quotes" -- "$bin" lesson "$tmp/q_code.md" --export "$tmp/q_code" --quiet
expect 1 "a count 'N of M' is a quote" -- "$bin" lesson "$tmp/q_count.md" --export "$tmp/q_count" --quiet
case $err in *"step 1 quotes 3 (a count), which its page does not draw"*) ok ;; *) bad "a count: $err" ;; esac
expect 0 "layer, head, seed, page and lesson numbers are names; a formula's constants are not quotes" -- "$bin" lesson "$tmp/q_names.md" --export "$tmp/q_names" --quiet
# whole numbers that are quantities are quotes: sizes, steps, counts and their totals
expect 1 "sizes and a step interval are quotes" -- "$bin" lesson "$tmp/q_whole.md" --check --quiet
case $err in *"step 1 quotes 64, which"*"step 1 quotes 100, which"*"2 problems"*) ok ;; *) bad "whole numbers: $err" ;; esac
expect 1 "a training step is a quote" -- "$bin" lesson "$tmp/q_step.md" --check --quiet
case $err in *"step 1 quotes 1100, which"*) ok ;; *) bad "a step: $err" ;; esac
expect 0 "whole numbers excused by unchecked: with a reason" -- "$bin" lesson "$tmp/q_whole_ok.md" --check --quiet
expect 1 "a count's total is checked against the rows its expect: item counts" -- "$bin" lesson "$tmp/q_total.md" --check --quiet
case $err in *"step 1 says 2 of 3, but its expect: item 'rows argmax offset 0 2' counts 2 of 4 rows"*) ok ;; *) bad "a count's total: $err" ;; esac
expect 1 "a row named by an index the page does not label" -- "$bin" lesson "$tmp/q_row.md" --export "$tmp/q_row" --quiet
case $err in *"q_row.md:13: step 1 names row 7, which its page does not label with its index"*) ok ;; *) bad "an unlabelled row: $err" ;; esac
expect 0 "a quoted 0.3 is read off a drawn 0.33 (it rounds to it)" -- "$bin" lesson "$tmp/q_round.md" --export "$tmp/q_round" --quiet
expect 1 "a quoted 0.3333 is not read off a drawn 0.33 (fewer decimals)" -- "$bin" lesson "$tmp/q_precise.md" --export "$tmp/q_precise" --quiet
# lesson --check runs the same check, every problem at once
expect 1 "lesson --check lists every quote not drawn" -- "$bin" lesson "$tmp/q_missing.md" --check --quiet
case $err in *"q_missing.md:13: step 1 quotes 0.77, which its page does not draw"*"1 problem"*) ok ;; *) bad "--check and quotes: $err" ;; esac

# zoom: a block of a large matrix, drawn with its values; a bad range is an error at its line
mk_curve "$tmp/zoom.md" $attn "head: 1
step: -1
zoom: rows 34-46 cols 0-15
" "at 0,1,40,9 0.42"
expect 0 "zoom: a block of cells" -- "$bin" lesson "$tmp/zoom.md" --export "$tmp/zoom" --quiet
# a zoomed grid of heads prints the block's values: quoting one needs no expect: (the quote check reads the page)
printf '# G\n\n```tscope setup\ntrace: %s/assets/induction-2l.tstrace\n```\n\n```tscope step\ntensor: %s\nview: grid\nstep: -1\n%s```\n\nHead 1 gives row 40 column 9 0.42.\n' "$PWD" $attn "zoom: rows 37-43 cols 4-12
" >"$tmp/zoom_grid.md"
expect 0 "zoom: a grid prints the block's values" -- "$bin" lesson "$tmp/zoom_grid.md" --export "$tmp/zoom_grid" --quiet
sed '/^zoom:/d' "$tmp/zoom_grid.md" >"$tmp/nozoom_grid.md"
expect 1 "the whole grid does not print row 40's values" -- "$bin" lesson "$tmp/nozoom_grid.md" --export "$tmp/nozoom_grid" --quiet
mk_curve "$tmp/zoom_bad.md" $attn "zoom: rows 46-34
" "max 1"
expect 1 "zoom: a backwards range" -- "$bin" lesson "$tmp/zoom_bad.md" --check
case $err in *"zoom_bad.md:9: zoom rows: a range A-B of whole numbers, A <= B, not '46-34'"*) ok ;; *) bad "zoom backwards: $err" ;; esac

# without: and colour-scale: are checked when the lesson is parsed
mk_lesson() { # FILE BODY: a lesson on tiny with BODY after the main setup
    printf '# L\n\n```tscope setup\npreset: tiny\ntext: a b\n```\n\n%s\n\nText.\n' "$2" >"$1"
}
step='```tscope step
tensor: input
```'
mk_lesson "$tmp/w_ok.md" "$(printf '```tscope setup other\nwithout: text\nseed: 3\n```\n\n%s' "$step")"
mk_lesson "$tmp/w_both.md" "$(printf '```tscope setup other\nwithout: text\ntext: c d\n```\n\n%s' "$step")"
mk_lesson "$tmp/w_bad.md" "$(printf '```tscope setup other\nwithout: command\n```\n\n%s' "$step")"
mk_lesson "$tmp/cs_alone.md" "$(printf '```tscope step\ntensor: input\ncolour-scale: shared\n```')"
expect 0 "without: in a named setup" -- "$bin" lesson "$tmp/w_ok.md" --check
expect 1 "a key both given and left out" -- "$bin" lesson "$tmp/w_both.md" --check
expect 1 "without: command" -- "$bin" lesson "$tmp/w_bad.md" --check
mk_lesson "$tmp/ov_alone.md" "$(printf '```tscope step\ntensor: input\noverlay: true\n```')"
mk_lesson "$tmp/ov_heat.md" "$(printf '```tscope step\ntensor: encoder.layers.0.self_attn.weights\ncompare-with: encoder.layers.0.self_attn.scores\noverlay: true\n```')"
expect 1 "colour-scale: shared with one panel" -- "$bin" lesson "$tmp/cs_alone.md" --check
expect 1 "overlay: true with one panel" -- "$bin" lesson "$tmp/ov_alone.md" --check
"$bin" lesson "$tmp/ov_heat.md" --export "$tmp/ovh" --quiet >/dev/null 2>"$tmp/err"; rc=$?
case "$rc $(cat "$tmp/err")" in *"1 "*"overlay: both sides must be drawn as curves"*) ok ;;
    *) bad "overlay of two heatmaps: exit $rc: $(cat "$tmp/err")" ;; esac
"$bin" lesson "$tmp/w_both.md" --check 2>&1 | grep -q "'text' is both given and left out" && ok ||
    bad "a key both given and left out: $("$bin" lesson "$tmp/w_both.md" --check 2>&1)"

finish
