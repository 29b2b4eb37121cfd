#!/usr/bin/env bash
# `tscope lesson N --export DIR`: every lesson runs (into a fresh cache) and
# exports one PNG per step; each page has the page size and is not blank
# (its narration column and its view both have many colours). A second export
# reuses the cached traces and draws the same pages. A lesson with an error
# (an unknown step name, a flag the command refuses, a missing checkpoint, a
# step that cannot be drawn) fails with FILE:LINE: message and exit 1; no
# display without --export is exit 2 with a pointer to --export.
# Runs ./tscope (TSCOPE=path overrides).
. "$(dirname "$0")/lib.sh"
export TSCOPE_CACHE="$tmp/cache"
# every shipped page draws every text whole: a shortened title, a label over
# another or a line cut off fails its export (render.h, TSCOPE_CLIPS)
export TSCOPE_CLIPS=error

# Page size at --scale 1 and where its parts are (lesson_export.c: a 50-point
# header, the narration column 31% of the width within 360..560 points).
W=1560 H=900
col=$(awk -v w=$W 'BEGIN { x = w * 0.31; if (x < 360) x = 360; if (x > 560) x = 560; printf "%d", x }')
text_region="$((col - 40))x$((H - 90))+20+70"
view_region="$((W - col - 40))x$((H - 90))+$((col + 20))+70"

# colors FILE: distinct colours in the narration and in the view (sampled down: fast enough for
# every page of every lesson, and a blank region still has one colour)
colors() { echo "$(png_colors "$1" "$text_region" 4) $(png_colors "$1" "$view_region" 4)"; }

start=$(date +%s)
for f in lessons/[0-9]*-*.md; do
    name=$(basename "$f" .md)
    steps=$("$bin" lesson "$f" --check | sed -n 's/.*: ok, \([0-9]*\) steps.*/\1/p')
    out="$tmp/pages/$name"
    t0=$(date +%s.%N)
    if ! "$bin" lesson "$f" --export "$out" --scale 1 >"$tmp/out" 2>"$tmp/err"; then
        bad "$name: export failed: $(cat "$tmp/err")"
        continue
    fi
    t1=$(date +%s.%N)
    case $(cat "$tmp/out") in *"$steps pages in $out/"*) ok ;; *) bad "$name: export said: $(cat "$tmp/out")" ;; esac
    n=$(ls "$out"/step*.png 2>/dev/null | wc -l)
    [ "$n" = "$steps" ] && ok || bad "$name: $n pages for $steps steps"
    blank=0
    for png in "$out"/step*.png; do
        size=$(png_size "$png")
        [ "$size" = "${W}x${H}" ] || { bad "$png is $size, want ${W}x${H}"; continue; }
        read -r t v <<<"$(colors "$png")"
        if [ "$t" -lt 8 ] || [ "$v" -lt 16 ]; then
            bad "$png looks blank: $t colours in the narration, $v in the view"
            blank=1
        fi
    done
    [ $blank = 0 ] && ok
    printf '%-28s %2d pages  %5.1f s\n' "$name" "$n" "$(echo "$t1 - $t0" | bc)"
done
echo "all lessons exported in $(($(date +%s) - start)) s"

# The cache: a second export runs nothing and draws the same pages.
"$bin" lesson 4 --export "$tmp/again" --scale 1 >/dev/null 2>"$tmp/err" && ok || bad "second export of lesson 4 failed"
grep -q "running setup" "$tmp/err" && bad "second export ran a setup again: $(cat "$tmp/err")" || ok
same=1
for png in "$tmp/pages/04-masks"/step*.png; do cmp -s "$png" "$tmp/again/$(basename "$png")" || same=0; done
[ $same = 1 ] && ok || bad "the pages of a cached run differ from the first export"
ls "$TSCOPE_CACHE" | grep -q '^04-masks-main-[0-9a-f]\{16\}\.tstrace$' && ok || bad "no cached trace for lesson 4: $(ls "$TSCOPE_CACHE")"
ls "$TSCOPE_CACHE" | grep -q 'part\|\.log$' && bad "temporary files left in the cache: $(ls "$TSCOPE_CACHE")" || ok

# export_fails CODE WANT FILE: exit code and exact stderr of exporting lesson FILE
export_fails() {
    local code=$1 want=$2 file=$3
    "$bin" lesson "$file" --export "$tmp/bad-out" >/dev/null 2>"$tmp/err"
    local rc=$? err
    err=$(cat "$tmp/err" | grep -v '^lesson: running')
    [ "$rc" = "$code" ] && ok || bad "$file: exit $rc, want $code ($err)"
    case $err in $want) ok ;; *) bad "$file: stderr '$err', want '$want'" ;; esac
}

head='# Broken\n\n```tscope setup\npreset: tiny\n```\n\n'
printf "$head"'```tscope step\ntensor: encoder.layers.0.self_attn.weigths\n```\n\nText.\n' >"$tmp/name.md"
export_fails 1 "$tmp/name.md:8: unknown step name 'encoder.layers.0.self_attn.weigths' in run 'main': did you mean 'encoder.layers.0.self_attn.weights'?" "$tmp/name.md"

printf "$head"'```tscope step\ntensor: input\ncompare-with: embed.tokenz\n```\n' >"$tmp/cmp.md"
export_fails 1 "$tmp/cmp.md:9: unknown step name 'embed.tokenz' in run 'main': did you mean 'embed.tokens'?" "$tmp/cmp.md"

printf '# Broken\n\n```tscope setup\npreset: tiny\nheads: 3\n```\n\n```tscope step\ntensor: input\n```\n' >"$tmp/flag.md"
export_fails 1 "$tmp/flag.md:5: setup 'main': tscope run: --heads 3 does not divide --d-model 16*" "$tmp/flag.md"

printf '# Broken\n\n```tscope setup\ncommand: train\ntask: copy\nsteps: 2\nlevel: values\n```\n\n```tscope step\ntensor: train.loss\n```\n' >"$tmp/train.md"
export_fails 1 "$tmp/train.md:7: setup 'main': tscope train: unknown flag --level; 'tscope train --help' lists the flags" "$tmp/train.md"

printf "$head"'```tscope setup trained\nload: nowhere.safetensors\n```\n\n```tscope step\ntensor: input\nrun: trained\n```\n' >"$tmp/load.md"
export_fails 1 "$tmp/load.md:8: setup 'trained': --load nowhere.safetensors: not found*" "$tmp/load.md"

printf "$head"'```tscope step\ntensor: embed.tokens\nview: grid\n```\n' >"$tmp/view.md"
export_fails 1 "$tmp/view.md:8: --view grid shows the heads of a (B, H, S, S) step; embed.tokens has rank 3" "$tmp/view.md"

# a lesson that cannot run: nothing is cached, nothing exported
ls "$TSCOPE_CACHE" | grep -q '^flag-\|^train-' && bad "a failed run left a trace in the cache" || ok
[ -e "$tmp/bad-out" ] && bad "a failed lesson still exported pages" || ok

# a planted clip: a title too long for the pages' header is shortened with "…"
long='# A title far too long for the header of its pages, which says so much about so many things that no page could hold it whole on one line\n\n```tscope setup\npreset: tiny\n```\n\n'
printf "$long"'```tscope step\ntensor: input\n```\n\nText.\n' >"$tmp/long.md"
export_fails 1 "$tmp/long.md:7: */step01.png: 1 text not drawn whole: shortened to fit: *A title far too long*" "$tmp/long.md"

# no display: say to use --export, exit 2; bad usage
env -u DISPLAY -u WAYLAND_DISPLAY -u SDL_VIDEODRIVER "$bin" lesson 1 >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" = 2 ] && ok || bad "lesson 1 without a display: exit $rc, want 2"
case $(cat "$tmp/err") in "tscope lesson: no display"*"tscope lesson 1 --export DIR"*) ok ;; *) bad "no-display message: $(cat "$tmp/err")" ;; esac
touch "$tmp/file"
"$bin" lesson 4 --export "$tmp/file" >/dev/null 2>"$tmp/err"
[ $? = 2 ] && ok || bad "export into a file: want exit 2 ($(cat "$tmp/err"))"
"$bin" lesson 4 --export "$tmp/x" --script right >/dev/null 2>&1
[ $? = 2 ] && ok || bad "--export with --script: want exit 2"

finish
