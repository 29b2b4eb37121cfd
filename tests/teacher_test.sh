#!/usr/bin/env bash
# What a teacher preparing a class needs (issue 33): run's probs step and the
# distribution view, figures for slides (title, caption, highlights, no blank
# bands), lessons of their own (found from where they stand, every problem in
# one --check, an unclosed block at its fence, hints in the lesson's keys), and
# a hand-out as one PDF.
. "$(dirname "$0")/lib.sh"
export TSCOPE_CACHE="$tmp/cache"
text="In the beginning God created the heaven and the earth."

# ---- run records probs: the softmax of the logits, at temperature 1 unless asked
"$bin" run --load assets/kjv-char.safetensors --text "$text" --trace "$tmp/kjv.tstrace" --level values \
    >"$tmp/run.txt" 2>&1 || bad "run with a trace failed"
"$bin" info "$tmp/kjv.tstrace" >"$tmp/info.txt" 2>&1
grep -Eq '^ *[0-9]+ +probs +softmax +\[1, 54, 73\]' "$tmp/info.txt" && ok || bad "no probs step (1, 54, 73) in the trace"
# the run's own table: p(argmax) at the last position; the figure must say the same
p_last=$(awk '$1 == 53 { print $4 }' "$tmp/run.txt")
[ -n "$p_last" ] && ok || bad "run printed no p(argmax) for position 53"
"$bin" run --load assets/kjv-char.safetensors --text "$text" --trace "$tmp/hot.tstrace" --level values \
    --temperature 3 >/dev/null 2>&1 || bad "run --temperature 3 failed"
max1=$(awk '$2 == "probs" { print $8 }' "$tmp/info.txt")
max3=$("$bin" info "$tmp/hot.tstrace" 2>/dev/null | awk '$2 == "probs" { print $8 }')
awk -v a="$max1" -v b="$max3" 'BEGIN { exit !(a > 0.9 && b < a) }' && ok ||
    bad "--temperature 3 should flatten the chances: largest $max1 at 1, $max3 at 3"
expect 2 "--temperature without a trace" -- "$bin" run --load assets/kjv-char.safetensors --text "$text" --temperature 2
case $err in *"add --trace"*) ok ;; *) bad "--temperature without --trace: $err" ;; esac
expect 2 "--temperature 0" -- "$bin" run --preset tiny --trace "$tmp/t0.tstrace" --temperature 0

# ---- the distribution view: the top tokens at one position as labelled bars
rm -f "$tmp/log"
TSCOPE_TEXT_LOG="$tmp/log" "$bin" png "$tmp/kjv.tstrace" --tensor probs -o "$tmp/dist.png" >"$tmp/o" 2>&1
grep -q "view dist" "$tmp/o" && ok || bad "probs is not drawn as a distribution by default: $(cat "$tmp/o")"
cut -d' ' -f5- "$tmp/log" | grep -qx "$p_last" && ok || bad "the bars do not show run's p(argmax) $p_last"
grep -q "logit " "$tmp/log" && ok || bad "the bars do not show the logits"
grep -q "the other 63 of 73 tokens" "$tmp/log" && ok || bad "the figure does not say what the other tokens share"
# from the logits too, the softmax taken at temperature 1: the same top chance
rm -f "$tmp/log"
TSCOPE_TEXT_LOG="$tmp/log" "$bin" png "$tmp/kjv.tstrace" --tensor logits --view dist --top 5 -o "$tmp/d2.png" \
    >/dev/null 2>&1 || bad "--view dist of the logits failed"
cut -d' ' -f5- "$tmp/log" | grep -qx "$p_last" && ok || bad "logits' softmax differs from the probs step"
# an earlier position marks the token the text has next ("e" after "In th")
rm -f "$tmp/log"
TSCOPE_TEXT_LOG="$tmp/log" "$bin" png "$tmp/kjv.tstrace" --tensor probs --position 4 -o "$tmp/d3.png" >/dev/null 2>&1
grep -q "comes next in the text (e," "$tmp/log" && ok || bad "position 4 does not mark the next token 'e'"
expect 2 "--position past the end" -- "$bin" png "$tmp/kjv.tstrace" --tensor probs --position 54 -o "$tmp/x.png"
case $err in *"54 positions"*) ok ;; *) bad "--position 54: $err" ;; esac
expect 2 "--top 0" -- "$bin" png "$tmp/kjv.tstrace" --tensor probs --top 0 -o "$tmp/x.png"
expect 2 "--position on a heatmap" -- "$bin" png "$tmp/kjv.tstrace" --tensor logits --position 3 -o "$tmp/x.png"
expect 2 "--view dist of attention" -- "$bin" png "$tmp/kjv.tstrace" --tensor decoder.layers.0.self_attn.weights \
    --view dist -o "$tmp/x.png"
[ ! -e "$tmp/x.png" ] && ok || bad "a refused figure left a file"

# ---- figures for slides
w=decoder.layers.0.self_attn.weights
rm -f "$tmp/log"
TSCOPE_TEXT_LOG="$tmp/log" "$bin" png "$tmp/kjv.tstrace" --tensor $w --head 3 --title "Head 3 looks back" \
    --caption "Each row: one character reading the ones before it." -o "$tmp/h.png" >/dev/null 2>&1 ||
    bad "png --title --caption failed"
grep -q " Head 3 looks back$" "$tmp/log" && ok || bad "the title is not drawn"
grep -q "one character reading" "$tmp/log" && ok || bad "the caption is not drawn"
grep -q "^[0-9.]* [0-9.]* [0-9.]* [0-9.]* $w" "$tmp/log" && ok || bad "the step's name no longer shows under a title"
# every row labelled where it fits; when thinned, the axis says so, and the last row keeps its label
grep -q " 53 \.$" "$tmp/log" && ok || bad "the last row (53, '.') has no label"
grep -q "labelled, and the last" "$tmp/log" && ok || bad "thinned labels are not said"
# chances run from 0 to 1: the colour bar of a softmax has its 1.0 tick, even when no cell reaches it
rm -f "$tmp/log"
TSCOPE_TEXT_LOG="$tmp/log" "$bin" png "$tmp/kjv.tstrace" --tensor probs --view heatmap -o "$tmp/ph.png" >/dev/null 2>&1
grep -q " 1\.0$" "$tmp/log" && ok || bad "the probabilities' colour bar has no 1.0 tick"
# --highlight frames cells in red; a wrong range names the matrix's
"$bin" png "$tmp/kjv.tstrace" --tensor $w --head 3 --highlight 40-45,38-45 -o "$tmp/hl.png" >/dev/null 2>&1
"$bin" png "$tmp/kjv.tstrace" --tensor $w --head 3 -o "$tmp/plain.png" >/dev/null 2>&1
size=$(png_size "$tmp/hl.png")
png_same "$tmp/hl.png" "$tmp/plain.png" "$size+0+0" && bad "--highlight changed nothing" || ok
expect 2 "--highlight outside" -- "$bin" png "$tmp/kjv.tstrace" --tensor $w --head 3 --highlight 60,1 -o "$tmp/x.png"
case $err in *"rows 0..53"*) ok ;; *) bad "--highlight 60,1: $err" ;; esac
expect 2 "--highlight syntax" -- "$bin" png "$tmp/kjv.tstrace" --tensor $w --highlight 3 -o "$tmp/x.png"
expect 2 "--highlight on bars" -- "$bin" png "$tmp/kjv.tstrace" --tensor probs --highlight 1,1 -o "$tmp/x.png"
expect 2 "--font-scale 9" -- "$bin" png "$tmp/kjv.tstrace" --tensor $w --font-scale 9 -o "$tmp/x.png"
expect 2 "--projector --scale" -- "$bin" png "$tmp/kjv.tstrace" --tensor $w --projector --scale 2 -o "$tmp/x.png"
[ ! -e "$tmp/x.png" ] && ok || bad "a refused figure left a file"
# no blank band under the heads of a layer: the bottom rows of the picture are not all paper
"$bin" png "$tmp/kjv.tstrace" --tensor $w -o "$tmp/grid.png" >/dev/null 2>&1
size=$(png_size "$tmp/grid.png")
gw=${size%x*} gh=${size#*x}
[ "$(png_colors "$tmp/grid.png" "${gw}x40+0+$((gh - 40))")" -gt 1 ] && ok || bad "the grid ends in a blank band ($size)"

# ---- lessons of their own, in a copy of the repository
mkdir -p "$tmp/copy/lessons" "$tmp/copy/assets"
cp assets/tiny-copy.safetensors "$tmp/copy/assets/mine.safetensors"
cat >"$tmp/copy/lessons/90-own.md" <<'EOF'
# My own lesson

```tscope setup
load: assets/mine.safetensors
text: a b c
level: values
```

```tscope step
tensor: encoder.layers.0.self_attn.weights
```

The weights.
EOF
(cd "$tmp/copy" && "$bin" lesson 90 --check) >"$tmp/o" 2>&1 && grep -q "^lessons/90-own.md: ok" "$tmp/o" && ok ||
    bad "lesson 90 is not found in the copy's lessons/: $(cat "$tmp/o")"
(cd "$tmp/copy" && "$bin" lesson --list) 2>/dev/null | grep -q "90  own" && ok || bad "--list does not show the copy's lessons"
# its load: is the copy's file (there is no assets/mine.safetensors anywhere else)
(cd "$tmp/copy" && "$bin" lesson 90 --export out --quiet) >"$tmp/o" 2>&1 && [ -f "$tmp/copy/out/step01.png" ] && ok ||
    bad "the copy's lesson does not run from the copy: $(cat "$tmp/o")"
# from another folder, by its path: load: resolves beside the lesson's folder
(cd "$tmp" && "$bin" lesson copy/lessons/90-own.md --export out2 --quiet) >"$tmp/o" 2>&1 && ok ||
    bad "the lesson by path from elsewhere: $(cat "$tmp/o")"

# --check: three planted problems, one run, each at FILE:LINE
cat >"$tmp/three.md" <<'EOF'
# Three mistakes

```tscope setup
preset: tiny
levle: values
```

```tscope step
tensor: encoder.layers.0.self_attn.weights
view: heatmapp
```

Text.

```tscope step
tensor: embed.pe
head: many
```

More text.
EOF
expect 1 "--check with three problems" -- "$bin" lesson "$tmp/three.md" --check
for want in "three.md:5: unknown key 'levle'" "three.md:10: unknown view 'heatmapp'" "three.md:17: 'head' expects"; do
    case $err in *"$want"*) ok ;; *) bad "--check does not list '$want': $err" ;; esac
done
[ "$(grep -c '\.md:[0-9]*: ' <<<"$err")" = 3 ] && ok || bad "--check should list exactly 3 problems: $err"

# --check against the run: a misspelled step name, a wrong expect: figure and a
# malformed expect: item, all three in one run, each at its FILE:LINE
cat >"$tmp/ran.md" <<'EOF'
# Three more mistakes

```tscope setup
preset: tiny
level: values
```

```tscope step
tensor: encoder.layers.0.self_attn.weigths
```

Text.

```tscope step
tensor: encoder.layers.0.self_attn.weights
expect: max 0.01
```

More text.

```tscope step
tensor: embed.pe
expect: maxx 0.5
```

The end.
EOF
expect 1 "--check with a wrong name, value and item" -- "$bin" lesson "$tmp/ran.md" --check --quiet
for want in "ran.md:9: unknown step name 'encoder.layers.0.self_attn.weigths'" "did you mean 'encoder.layers.0.self_attn.weights'" \
    "ran.md:16: expect 'max 0.01': the run gives" "ran.md:23: expect 'maxx 0.5'"; do
    case $err in *"$want"*) ok ;; *) bad "--check does not list '$want': $err" ;; esac
done
[ "$(grep -c '\.md:[0-9]*: ' <<<"$err")" = 3 ] && ok || bad "--check should list exactly 3 problems: $err"
case $err in *"ran.md: 3 problems"*) ok ;; *) bad "--check does not count its problems: $err" ;; esac
# --no-run: only the malformed item
expect 1 "--check --no-run" -- "$bin" lesson "$tmp/ran.md" --check --no-run
[ "$(grep -c '\.md:[0-9]*: ' <<<"$err")" = 1 ] && ok || bad "--check --no-run should list only the malformed item: $err"
# mended, it passes
sed -i 's/weigths/weights/; s/max 0.01/max 1/; s/maxx 0.5/max 1/' "$tmp/ran.md"
expect 0 "--check of the mended lesson" -- "$bin" lesson "$tmp/ran.md" --check --quiet

# an unclosed block in the middle: reported at its fence, not at the narration it swallowed
cat >"$tmp/open.md" <<'EOF'
# Unclosed

```tscope setup
preset: tiny
```

```tscope step
tensor: embed.pe

The *L* of the layer.

## Next

```tscope step
tensor: embed.pe
```
EOF
expect 1 "an unclosed block" -- "$bin" lesson "$tmp/open.md" --check
case $err in *"open.md:7: unclosed"*"line 10"*) ok ;; *) bad "unclosed block not at its fence: $err" ;; esac
sed -i '9,10d' "$tmp/open.md" # now the ## heading is the first thing inside
expect 1 "a heading inside an unclosed block" -- "$bin" lesson "$tmp/open.md" --check
case $err in *"open.md:7: unclosed"*"heading"*) ok ;; *) bad "a heading swallowed: $err" ;; esac

# a step without values: the hint is in the lesson's keys, with no cache file in it
cat >"$tmp/stats.md" <<'EOF'
# Statistics only

```tscope setup
preset: tiny
level: stats
```

```tscope step
tensor: encoder.layers.0.self_attn.weights
```

Text.
EOF
expect 1 "a step without values" -- "$bin" lesson "$tmp/stats.md" --export "$tmp/st" --quiet
case $err in *"'level: values'"*"'only: "*) ok ;; *) bad "the hint is not in the lesson's keys: $err" ;; esac
case $err in *part.tstrace* | *--level*) bad "the hint names run's flags or a cache file: $err" ;; *) ok ;; esac

# ---- a hand-out: ONE PDF, a page a step, narration and figure on each
TSCOPE_CLIPS=error expect 0 "lesson 3 --handout a4" -- "$bin" lesson 3 --export "$tmp/ho" --format pdf --handout a4 --quiet
pdf="$tmp/ho/03-attention-handout.pdf"
steps=$("$bin" lesson 3 --print 2>/dev/null | grep -c '^step ')
# a long introduction has a page of its own, before the steps' (below)
intro=0
pdftotext -f 1 -l 1 "$pdf" - 2>/dev/null | grep -q "^introduction$" && intro=1
[ "$(pdfinfo "$pdf" 2>/dev/null | awk '/^Pages:/ { print $2 }')" = "$((steps + intro))" ] && ok ||
    bad "the hand-out is not one PDF of $steps pages (and $intro of introduction)"
pdfinfo "$pdf" 2>/dev/null | grep -Eq '^Page size: +595.* x 841.* pts \(A4\)' && ok || bad "the hand-out is not A4"
[ "$(find "$tmp/ho" -type f | wc -l)" = 1 ] && ok || bad "the hand-out wrote more than one file"
pdftotext -f $((2 + intro)) -l $((2 + intro)) "$pdf" - 2>/dev/null | grep -q "step 2 / $steps" && ok ||
    bad "page $((2 + intro)) is not step 2"
pdftotext -f 1 -l 1 "$pdf" - 2>/dev/null | grep -q "Scaled dot-product attention" && ok || bad "page 1 has no title"
pdftoppm -png -r 40 -f $((2 + intro)) -l $((2 + intro)) -singlefile "$pdf" "$tmp/page2" 2>/dev/null
size=$(png_size "$tmp/page2.png")
[ "$(png_colors "$tmp/page2.png" "${size%x*}x$((${size#*x} / 3))+0+$((${size#*x} / 6))" 4)" -gt 20 ] && ok ||
    bad "page 2 of the hand-out has no figure in its upper half"
# the hand-out's pages: the title whole (wrapped, never "…"), the lesson's
# file name and not its path in the footer, the introduction above the
# figure, and the page filled (ink in its bottom fifth)
pdftotext -f 1 -l 1 "$pdf" - 2>/dev/null >"$tmp/p1.txt"
grep -q "$PWD\|/lessons/" "$tmp/p1.txt" && bad "the hand-out prints the lesson's path: $(grep "$PWD\|/lessons/" "$tmp/p1.txt")" || ok
grep -q "03-attention.md" "$tmp/p1.txt" && ok || bad "the hand-out's footer does not name the lesson's file"
pdftoppm -png -r 40 -f $((3 + intro)) -l $((3 + intro)) -singlefile "$pdf" "$tmp/page3" 2>/dev/null
size=$(png_size "$tmp/page3.png")
h=${size#*x}
[ "$(png_colors "$tmp/page3.png" "${size%x*}x$((h / 5))+0+$((h * 3 / 4 - h / 10))" 4)" -gt 3 ] && ok ||
    bad "page 3 of the hand-out leaves its bottom quarter empty"
cat >"$tmp/longtitle.md" <<'EOF'
# A lesson whose title is long enough that the header of a hand-out cannot hold it on one line of its width

The introduction comes first.

```tscope setup
preset: tiny
level: values
```

```tscope step
tensor: encoder.layers.0.self_attn.weights
head: 0
```

The narration.
EOF
TSCOPE_CLIPS=error expect 0 "a long title in a hand-out" -- "$bin" lesson "$tmp/longtitle.md" --export "$tmp/lt.pdf" --format pdf --handout a4 --quiet
pdftotext "$tmp/lt.pdf" - 2>/dev/null | tr '\n' ' ' | grep -q "cannot hold it on one line of its width" && ok ||
    bad "the hand-out cuts its title: $(pdftotext "$tmp/lt.pdf" - 2>/dev/null | head -3)"
pdftotext -layout "$tmp/lt.pdf" - 2>/dev/null >"$tmp/lt.txt"
a=$(grep -n "The introduction comes first" "$tmp/lt.txt" | cut -d: -f1)
b=$(grep -n "The narration" "$tmp/lt.txt" | cut -d: -f1)
c=$(grep -n "query" "$tmp/lt.txt" | head -1 | cut -d: -f1)
[ -n "$a" ] && [ -n "$b" ] && [ -n "$c" ] && [ "$a" -lt "$c" ] && [ "$c" -lt "$b" ] && ok ||
    bad "the introduction ($a) is not above the figure ($c) and the narration ($b) under it"
# every view kind on an A4 hand-out's page, each text whole (render.h,
# TSCOPE_CLIPS): the page is narrower than a screen, and a module's shapes of
# 32 steps, bands of levels side by side, were cut at its right edge. The
# tiny preset keeps this to about a second; exporting the shipped lessons
# takes 2 to 60 s each, too slow to run them all here.
cat >"$tmp/kinds.md" <<'EOF'
# One page of each view kind

```tscope setup
preset: tiny
level: values
```

```tscope setup unscaled
variant: no-scale
```

```tscope step
tensor: encoder.layers.0.*
view: shapes
```

A whole layer: 32 steps.

```tscope step
tensor: encoder.layers.0.self_attn.*
view: shapes
```

Its attention: 13 steps.

```tscope step
tensor: encoder.layers.0.self_attn.weights
head: 0
compare-run: unscaled
```

Two heatmaps side by side.

```tscope step
tensor: encoder.layers.0.self_attn.weights
view: grid
```

Every head.

```tscope step
tensor: embed.pe
view: curves
```

Curves.

```tscope step
tensor: encoder.out
view: stats
```

Statistics.
EOF
TSCOPE_CLIPS=error expect 0 "every view kind on A4, whole" -- "$bin" lesson "$tmp/kinds.md" --export "$tmp/kinds.pdf" --format pdf --handout a4 --quiet
# an introduction too long to leave the first view half the page (lesson
# 18's loss plot came out 25 points tall): a page of its own before the steps
{
    echo "# A long introduction"
    echo
    for i in $(seq 1 14); do echo "Sentence $i of an introduction that goes on, and on, so that a teacher has much to read before the first figure of the lesson."; done
    printf '\n```tscope setup\npreset: tiny\nlevel: values\n```\n\n```tscope step\ntensor: encoder.layers.0.self_attn.weights\nhead: 0\n```\n\n'
    for i in $(seq 1 10); do echo "Sentence $i of a narration that is long as well, as lesson 18's first page is, under its figure."; done
} >"$tmp/longintro.md"
TSCOPE_CLIPS=error expect 0 "a long introduction in a hand-out" -- "$bin" lesson "$tmp/longintro.md" --export "$tmp/li.pdf" --format pdf --handout a4
case $out in *"(a4, 2 pages)"*) ok ;; *) bad "the hand-out does not say its 2 pages: $out" ;; esac
[ "$(pdfinfo "$tmp/li.pdf" 2>/dev/null | awk '/^Pages:/ { print $2 }')" = 2 ] && ok || bad "a long introduction has no page of its own"
pdftotext -f 1 -l 1 "$tmp/li.pdf" - 2>/dev/null | grep -q "Sentence 14 of an introduction" && ok || bad "page 1 is not the introduction"
pdftotext -f 2 -l 2 "$tmp/li.pdf" - 2>/dev/null | grep -q "Sentence 1 of an introduction" && bad "page 2 repeats the introduction" || ok
expect 0 "--handout slides to a file" -- "$bin" lesson 3 --export "$tmp/s.pdf" --format pdf --handout slides --quiet
pdfinfo "$tmp/s.pdf" 2>/dev/null | grep -Eq '^Page size: +960 x 540' && ok || bad "slides are not 960 x 540"
expect 2 "--handout without pdf" -- "$bin" lesson 3 --export "$tmp/x" --handout a4
expect 2 "--handout letterr" -- "$bin" lesson 3 --export "$tmp/x.pdf" --format pdf --handout letterr

finish
