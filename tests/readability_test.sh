#!/usr/bin/env bash
# A readability floor: every text a view or a lesson page draws, at its
# default export size, is at least FLOOR pixels high (the font's size in
# device pixels, from pango's run extents through TSCOPE_TEXT_LOG: render.h's
# text probe). 9 px is about 7 points on a lesson page exported at its
# default 1.25 pixels per point, the smallest a slide or a page shown whole
# on a laptop screen still reads; the views' own labels are 10.5 points.
# The probe must be able to fail: a page drawn at a quarter of its size
# puts text below the floor.
. "$(dirname "$0")/lib.sh"
export TSCOPE_CACHE="$tmp/cache"
FLOOR=9

# smallest LOG: the smallest font in a text log, and the text drawn at it
smallest() { sort -n "$1" | head -1; }

# check LABEL LOG [FLOOR]: no text below the floor (FLOOR, else $FLOOR)
check() {
    local low floor=${3:-$FLOOR}
    low=$(smallest "$2")
    if [ -z "$low" ]; then
        bad "$1: no text logged (is TSCOPE_TEXT_LOG wired to this command?)"
        return
    fi
    awk -v f="${low%% *}" -v floor="$floor" 'BEGIN { exit !(f >= floor) }' && ok ||
        bad "$1: text at ${low%% *} px, below the floor of $floor px: '$(echo "$low" | cut -d' ' -f5-)'"
}

"$bin" run --preset tiny --trace "$tmp/tiny.tstrace" --level values >/dev/null 2>&1
"$bin" run --preset seed000 --trace "$tmp/s0.tstrace" --level values --only 'encoder.layers.0.*' --keep-batch 0 \
    >/dev/null 2>&1
views=(
    "tiny encoder.layers.0.self_attn.weights grid"
    "tiny encoder.layers.0.self_attn.weights heatmap"
    "tiny encoder.layers.0.self_attn.weights overview"
    "tiny embed.pe auto"
    "tiny embed.pe curves"
    "tiny encoder.layers.0.norm1.out stats"
    "tiny encoder.layers.0.self_attn shapes"
    "tiny encoder.layers.0.ffn.hidden heatmap"
    "tiny input auto"
    "tiny logits auto"
    "s0 encoder.layers.0.self_attn.weights heatmap"
    "s0 encoder.layers.0.self_attn.qkv auto"
    "s0 encoder.layers.0.norm1.out stats"
)
for v in "${views[@]}"; do
    read -r trace name view <<<"$v"
    rm -f "$tmp/log"
    TSCOPE_TEXT_LOG="$tmp/log" "$bin" png "$tmp/$trace.tstrace" --tensor "$name" --view "$view" -o "$tmp/v.png" \
        >/dev/null 2>&1 || { bad "png $trace $name --view $view failed"; continue; }
    check "png $trace $name --view $view" "$tmp/log"
done

for f in lessons/[0-9]*-*.md; do
    rm -f "$tmp/log"
    TSCOPE_TEXT_LOG="$tmp/log" "$bin" lesson "$f" --export "$tmp/pages" --quiet >/dev/null 2>&1 ||
        { bad "$f: export failed"; continue; }
    check "$(basename "$f" .md)" "$tmp/log"
done

# Figures for slides: --projector keeps every text at 18 pixels or more in a
# picture of at most 1920 x 1080; --font-scale scales every text; a title, a
# caption, highlights and the distribution view keep the floor at 1x.
"$bin" run --load assets/kjv-char.safetensors --text "In the beginning God created the heaven and the earth." \
    --trace "$tmp/kjv.tstrace" --level values >/dev/null 2>&1
slides=(
    "18 --tensor decoder.layers.0.self_attn.weights --head 3 --projector"
    "18 --tensor decoder.layers.0.self_attn.weights --projector"
    "18 --tensor probs --projector"
    "18 --tensor logits --projector"
    "18 --tensor decoder.layers.0.norm1.out --projector"
    "18 --tensor decoder.layers.0.self_attn.weights --head 1 --font-scale 2"
    "9 --tensor probs --top 20"
    "9 --tensor decoder.layers.0.self_attn.weights --head 3 --title Slide --caption Words --highlight 50-53,*"
)
for v in "${slides[@]}"; do
    read -r floor args <<<"$v"
    rm -f "$tmp/log"
    # shellcheck disable=SC2086 # the flags are words
    TSCOPE_TEXT_LOG="$tmp/log" "$bin" png "$tmp/kjv.tstrace" $args -o "$tmp/s.png" >/dev/null 2>&1 ||
        { bad "png $args failed"; continue; }
    check "png $args" "$tmp/log" "$floor"
    case $args in *--projector*)
        size=$(png_size "$tmp/s.png")
        [ "${size%x*}" -le 1920 ] && [ "${size#*x}" -le 1080 ] && ok || bad "png $args: $size is larger than 1920 x 1080" ;;
    esac
done

# A hand-out is read on paper: every text at 7 points or more (a PDF's units
# are points): the views' labels at 8 or more, a subscript in the narration
# (0.7 of its 10 to 11 points) the smallest, the size of a printed footnote.
rm -f "$tmp/log"
TSCOPE_TEXT_LOG="$tmp/log" "$bin" lesson 3 --export "$tmp/h.pdf" --format pdf --handout a4 --quiet >/dev/null 2>&1 ||
    bad "lesson 3 --handout a4 failed"
check "lesson 3 hand-out on A4, in points" "$tmp/log" 7

# the probe can fail: a page at a quarter of the default scale is below the floor
rm -f "$tmp/log"
TSCOPE_TEXT_LOG="$tmp/log" "$bin" lesson 1 --export "$tmp/small" --scale 0.3 --quiet >/dev/null 2>&1
low=$(smallest "$tmp/log")
awk -v f="${low%% *}" -v floor=$FLOOR 'BEGIN { exit !(f < floor) }' && ok || bad "a page at scale 0.3 passes the floor: the probe measures nothing"

finish
