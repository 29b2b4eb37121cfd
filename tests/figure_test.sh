#!/usr/bin/env bash
# Vector figures: `tscope png -o FILE.svg|.pdf` and `tscope lesson N --export
# DIR --format svg|pdf` draw with the renderers that make the PNG, through
# cairo's SVG and PDF surfaces. Each figure is rasterised back (rsvg-convert,
# pdftoppm; Debian's librsvg2-bin and poppler-utils, installed by deps.sh) and
# compared with the PNG of the same view at one pixel per point: few pixels
# may differ by more than a quarter of the range in some channel (text is
# antialiased by other code, and a cell edge at a fractional position lands
# on one side or the other). PDF text is text (pdftotext finds the step's
# name). The comparison must be able to fail: a figure of another view is
# far off. Bad requests are one line and exit 2.
# Runs ./tscope (TSCOPE=path overrides) and the tests' pngtool.
. "$(dirname "$0")/lib.sh"
export TSCOPE_CACHE="$tmp/cache"

TOL=64         # a pixel differs when a channel is off by more than this
SVG_MAX=2.0    # percent of pixels that may differ, rasterised SVG against PNG
PDF_MAX=4.0    # the same for PDF (poppler places glyphs on its own pixel grid)

"$bin" run --preset tiny --trace "$tmp/tiny.tstrace" --level values >/dev/null 2>&1 || { echo "cannot make a tiny trace"; echo "0 passed, 1 failed"; exit 1; }
t=$tmp/tiny.tstrace

# percent A B: the share of pixels of two same-size PNGs that differ by more than TOL
percent() {
    local size n
    size=$(png_size "$1")
    n=$("$pngtool" diff "$1" "$2" "$size+0+0" $TOL 2>/dev/null) || { echo 100; return; }
    echo "$n" "${size%x*}" "${size#*x}" | awk '{ printf "%.2f", 100 * $1 / ($2 * $3) }'
}

# rasterise FILE W H OUT: an SVG or PDF of W x H points as a PNG of W x H pixels
rasterise() {
    case $1 in
        *.svg) rsvg-convert -w "$2" -h "$3" "$1" -o "$4" ;;
        *.pdf) pdftoppm -png -r 72 -scale-to-x "$2" -scale-to-y "$3" -singlefile "$1" "${4%.png}" ;;
    esac
}

# same_picture LABEL PNG VECTOR: the vector file rasterises to the PNG within the tolerance
same_picture() {
    local label=$1 png=$2 vec=$3 size w h p max
    size=$(png_size "$png")
    w=${size%x*} h=${size#*x}
    rasterise "$vec" "$w" "$h" "$vec.png" 2>"$tmp/raster.err" || { bad "$label: cannot rasterise $vec: $(cat "$tmp/raster.err")"; return; }
    p=$(percent "$png" "$vec.png")
    case $vec in *.svg) max=$SVG_MAX ;; *) max=$PDF_MAX ;; esac
    echo "$label: ${vec##*.} differs from the PNG in $p% of pixels (at most $max%)"
    awk -v p="$p" -v m="$max" 'BEGIN { exit !(p <= m) }' && ok || bad "$label: ${vec##*.} differs in $p% of pixels (> $max%)"
}

# views of the tiny trace: one of each kind
views=(
    "encoder.layers.0.self_attn.weights grid"
    "decoder.layers.0.self_attn.weights heatmap --head 1"
    "encoder.layers.0.self_attn.weights overview"
    "embed.pe auto"
    "encoder.layers.0.norm1.out stats"
    "encoder.layers.0.self_attn shapes"
    "encoder.layers.0.ffn.hidden heatmap"
    "input auto"
)
for v in "${views[@]}"; do
    read -r name view extra <<<"$v"
    base="$tmp/$name.$view"
    for ext in png svg pdf; do
        # shellcheck disable=SC2086
        expect 0 "$name --view $view -o .$ext" -- "$bin" png "$t" --tensor "$name" --view "$view" $extra -o "$base.$ext"
    done
    same_picture "$name ($view)" "$base.png" "$base.svg"
    same_picture "$name ($view)" "$base.png" "$base.pdf"
done

# PDF text is text; SVG is SVG in points
pdftotext "$tmp/encoder.layers.0.self_attn.weights.grid.pdf" - 2>/dev/null | grep -q "encoder.layers.0.self_attn.weights" && ok || bad "pdftotext finds no step name in the PDF"
head -c 400 "$tmp/embed.pe.auto.svg" | grep -q '<svg.*width="[0-9.]*pt"' && ok || bad "the SVG does not start with an <svg> in points"
# SVG text is text: every label, title and number a <text> element (no glyph
# outlines), tokens escaped, rotated labels turned by a transform, the step's
# name as the figure's <title>
svg_texts() { grep -o '<text [^>]*>[^<]*</text>' "$1" | sed 's/<text [^>]*>//; s/<\/text>//'; }
g=$tmp/decoder.layers.0.self_attn.weights.heatmap.svg
svg_texts "$g" | grep -qx "decoder.layers.0.self_attn.weights" && ok || bad "the heatmap's SVG has no <text> with the step's name"
svg_texts "$g" | grep -qx '&lt;bos&gt;' && ok || bad "the heatmap's SVG has no token label <bos> as text"
n=$(svg_texts "$g" | grep -cx '[0-9]\.[0-9][0-9]')
[ "$n" -ge 10 ] && ok || bad "the heatmap's SVG has $n cell values as text (at least 10 expected)"
grep -q '<title>decoder.layers.0.self_attn.weights</title>' "$g" && ok || bad "the heatmap's SVG has no <title>"
for f in "$tmp"/*.svg; do
    grep -q 'glyph' "$f" && bad "$(basename "$f"): glyph outlines in place of text"
    [ "$(grep -c '<text' "$f")" -ge 3 ] && ok || bad "$(basename "$f"): fewer than 3 <text> elements"
done
grep -q '<text transform="matrix([0-9.e-]* -1 1 ' "$tmp/embed.pe.auto.svg" && ok || bad "the PE figure's y-axis label is not turned text"

# the comparison can fail: a figure of another view is far from this PNG
p=$(percent "$tmp/embed.pe.auto.png" "$tmp/embed.pe.auto.png")
[ "$p" = 0.00 ] && ok || bad "a PNG differs from itself in $p% of pixels"
rasterise "$tmp/input.auto.svg" 1000 560 "$tmp/other.png"
size=$(png_size "$tmp/encoder.layers.0.ffn.hidden.heatmap.png")
rasterise "$tmp/input.auto.svg" "${size%x*}" "${size#*x}" "$tmp/other.png"
p=$(percent "$tmp/encoder.layers.0.ffn.hidden.heatmap.png" "$tmp/other.png")
awk -v p="$p" 'BEGIN { exit !(p > 4) }' && ok || bad "another view's SVG differs in only $p% of pixels: the comparison cannot fail"

# a lesson's pages in all three formats, at one pixel per point
for fmt in png svg pdf; do
    scale=()
    [ $fmt = png ] && scale=(--scale 1)
    expect 0 "lesson 4 --format $fmt" -- "$bin" lesson 4 --export "$tmp/l4-$fmt" --format $fmt "${scale[@]}" --quiet
    case $out in *"pages in $tmp/l4-$fmt/ (step01.$fmt"*) ok ;; *) bad "lesson 4 --format $fmt said: $out" ;; esac
done
for png in "$tmp/l4-png"/step0[1-3].png; do
    s=$(basename "$png" .png)
    same_picture "lesson 4 $s" "$png" "$tmp/l4-svg/$s.svg"
    same_picture "lesson 4 $s" "$png" "$tmp/l4-pdf/$s.pdf"
done
pdftotext "$tmp/l4-pdf/step01.pdf" - 2>/dev/null | grep -q "Masks" && ok || bad "pdftotext finds no lesson title in page 1"
svg_texts "$tmp/l4-svg/step01.svg" | grep -q "Masks" && ok || bad "no lesson title as <text> in page 1's SVG"

# every lesson in the two vector formats: one page a step, each a real file of its kind
for f in lessons/[0-9]*-*.md; do
    name=$(basename "$f" .md)
    steps=$("$bin" lesson "$f" --check --no-run | sed -n 's/.*: ok, \([0-9]*\) steps.*/\1/p')
    for fmt in svg pdf; do
        if ! "$bin" lesson "$f" --export "$tmp/all-$fmt/$name" --format $fmt --quiet >/dev/null 2>"$tmp/err"; then
            bad "$name: --format $fmt failed: $(cat "$tmp/err")"
            continue
        fi
        n=$(ls "$tmp/all-$fmt/$name"/step*.$fmt 2>/dev/null | wc -l)
        [ "$n" = "$steps" ] && ok || bad "$name: $n $fmt pages for $steps steps"
        first=$(ls "$tmp/all-$fmt/$name"/step*.$fmt 2>/dev/null | head -1)
        case $fmt in
            svg) head -c 400 "$first" | grep -q '<svg' && ok || bad "$name: $first is not SVG" ;;
            pdf) head -c 5 "$first" | grep -q '%PDF-' && ok || bad "$name: $first is not PDF" ;;
        esac
    done
done

# bad requests: one line, exit 2, nothing written
expect 2 "an unknown extension" -- "$bin" png "$t" --tensor input -o "$tmp/x.jpg"
case $err in *"x.jpg"*".png, .svg or .pdf"*) ok ;; *) bad "unknown extension: $err" ;; esac
expect 2 "--scale with an SVG" -- "$bin" png "$t" --tensor input -o "$tmp/x.svg" --scale 2
expect 2 "--format without --export" -- "$bin" lesson 4 --format svg
expect 2 "--scale with SVG pages" -- "$bin" lesson 4 --export "$tmp/x" --format svg --scale 2
expect 2 "an unknown format" -- "$bin" lesson 4 --export "$tmp/x" --format eps
expect 2 "an unwritable SVG" -- "$bin" png "$t" --tensor input -o /nonexistent-dir/x.svg
[ -e "$tmp/x.jpg" ] || [ -e "$tmp/x.svg" ] || [ -e "$tmp/x" ] && bad "a refused request wrote something" || ok
leftover=$(find "$tmp" -name '*.svg.*' -o -name '*.pdf.*' ! -name '*.png' | grep -v '\.png$' | wc -l)
[ "$leftover" = 0 ] && ok || bad "$leftover temporary files left"

finish
