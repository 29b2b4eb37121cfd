#!/usr/bin/env bash
# `tscope view` in a real X server (scripts/run-tests.sh runs this under
# xvfb-run). For a tiny trace and a seed000 trace it replays a script through
# every step of the first encoder layer, taking a screenshot at each, and
# checks that the screenshots exist, have the window's size, differ from one
# step to the next, and that the attention view's region is a picture, not a
# blank. It also checks 'e' (export), a bad script word, and the one line
# `tscope view` prints without a display.
#
#   TSCOPE=path/to/tscope (default ./tscope)
#   TSCOPE_ASAN=path/to/tscope built with -fsanitize=address (optional): a
#     scripted session must report no leak (third-party frames in
#     tests/lsan.supp are ignored).
. "$(dirname "$0")/lib.sh"
W=1100 H=700

if [ -z "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
    echo "no display: run under xvfb-run (scripts/run-tests.sh does)"
    echo "0 passed, 1 failed"
    exit 1
fi

# Region of the centre view in a W x H screenshot: right of the step list,
# above the status bar (see ts_view_geometry_of: list 27% of the width, at
# least 250 and at most 400 points; status bar 50 points).
list_w=$(awk -v w=$W 'BEGIN { x = w * 0.27; if (x < 250) x = 250; if (x > 400) x = 400; printf "%d", x }')
centre="$((W - list_w - 20))x$((H - 50 - 20))+$((list_w + 10))+10"

# colors FILE: distinct colours in the centre region.
colors() { png_colors "$1" "$centre"; }
# same_centre A B: the centre regions of two screenshots are pixel-identical.
same_centre() { png_same "$1" "$2" "$centre"; }

# walk NAME TRACE: screenshots through every step of encoder layer 0.
walk() {
    local name=$1 trace=$2 dir="$tmp/$1"
    mkdir -p "$dir"
    local first last
    first=$("$bin" info "$trace" | awk '$2 ~ /^encoder\.layers\.0\./ { print $1; exit }')
    last=$("$bin" info "$trace" | awk '$2 ~ /^encoder\.layers\.0\./ { n = $1 } END { print n }')
    if [ -z "$first" ] || [ -z "$last" ]; then
        bad "$name: no encoder.layers.0 steps in $trace"
        return
    fi
    local first_name script i
    first_name=$("$bin" info "$trace" | awk -v i="$first" '$1 == i { print $2 }')
    script="find:$first_name"
    for ((i = first; i <= last; i++)); do
        [ "$i" -gt "$first" ] && script+=" right"
        script+=" shot:$dir/$(printf %04d "$i").png"
    done
    local out rc
    out=$("$bin" view "$trace" --width $W --height $H --script "$script" --screenshot "$dir/final.png" 2>&1)
    rc=$?
    [ "$rc" = 0 ] && ok || bad "$name: tscope view exit $rc: $out"
    local n_want=$((last - first + 1)) n_got
    n_got=$(ls "$dir"/[0-9]*.png 2>/dev/null | wc -l)
    [ "$n_got" = "$n_want" ] && ok || bad "$name: $n_got screenshots, want $n_want"
    [ -s "$dir/final.png" ] && ok || bad "$name: no final screenshot"
    local size
    size=$(png_size "$dir/$(printf %04d "$first").png")
    # Xvfb has no HiDPI: one pixel per point.
    [ "$size" = "${W}x${H}" ] && ok || bad "$name: screenshot is $size, want ${W}x${H}"

    # Every step's frame differs from the one before (the list and status
    # bar move on), and most centre views differ too.
    local prev="" same_frames=0 same_views=0 f
    for f in "$dir"/[0-9]*.png; do
        if [ -n "$prev" ]; then
            cmp -s "$prev" "$f" && same_frames=$((same_frames + 1))
            same_centre "$prev" "$f" && same_views=$((same_views + 1))
        fi
        prev=$f
    done
    # The comparison itself must be able to say "same".
    same_centre "$prev" "$prev" && ok || bad "$name: comparing screenshots does not work (tests/tools/pngtool diff)"
    [ "$same_frames" = 0 ] && ok || bad "$name: $same_frames steps look exactly like the step before"
    echo "$name: $n_want steps of layer 0; $same_views centre views repeat the one before"
    [ "$same_views" -le $((n_want / 3)) ] && ok || bad "$name: $same_views of $n_want centre views repeat the one before"

    # The attention weights: the centre is a picture with many colours.
    local w
    w=$("$bin" info "$trace" | awk '$2 == "encoder.layers.0.self_attn.weights" { print $1 }')
    if [ -n "$w" ] && [ -f "$dir/$(printf %04d "$w").png" ]; then
        local c
        c=$(colors "$dir/$(printf %04d "$w").png")
        [ "$c" -gt 40 ] && ok || bad "$name: attention view has only $c colours (blank?)"
        # Its colours are not those of a blank centre (a step whose view failed).
        local plain
        plain=$(colors "$dir/$(printf %04d "$first").png")
        [ "$plain" -gt 10 ] && ok || bad "$name: first step's view has only $plain colours"
    else
        bad "$name: no screenshot of encoder.layers.0.self_attn.weights"
    fi
}

# ---- traces ----
if "$bin" run --preset tiny --trace "$tmp/tiny.tstrace" >"$tmp/run.log" 2>&1; then ok; else
    bad "tscope run --preset tiny failed: $(tail -3 "$tmp/run.log")"
fi
# seed000 at full size, values of layer 0 for batch element 0 only: what a
# learner opens first, kept small.
if "$bin" run --preset seed000 --trace "$tmp/seed000.tstrace" --level values --only 'encoder.layers.0.*' \
    --keep-batch 0 >"$tmp/run.log" 2>&1; then ok; else
    bad "tscope run --preset seed000 failed: $(tail -3 "$tmp/run.log")"
fi

[ -f "$tmp/tiny.tstrace" ] && walk tiny "$tmp/tiny.tstrace"
[ -f "$tmp/seed000.tstrace" ] && walk seed000 "$tmp/seed000.tstrace"
# A trace written by the PyTorch bridge (python/tscope_trace.py) for an
# nn.Transformer: the viewer walks it as it walks tscope's own.
walk bridge tests/ref/bridge/transformer/bridge.tstrace

# ---- one head, the help overlay, export ----
t="$tmp/tiny.tstrace"
if [ -f "$t" ]; then
    mkdir -p "$tmp/exp"
    out=$("$bin" view "$t" --script "find:encoder.layers.0.self_attn.weights shot:$tmp/grid.png 2 e" \
        --export-dir "$tmp/exp" --screenshot "$tmp/head.png" 2>&1)
    rc=$?
    [ "$rc" = 0 ] && ok || bad "export: exit $rc: $out"
    exported=$(ls "$tmp/exp"/*.png 2>/dev/null | head -1)
    [ -n "$exported" ] && ok || bad "e wrote no PNG into --export-dir"
    case $out in *"exported $tmp/exp/"*".png"*) ok ;; *) bad "e does not say where it wrote: $out" ;; esac
    [ -f "$tmp/grid.png" ] && [ -f "$tmp/head.png" ] && ! same_centre "$tmp/grid.png" "$tmp/head.png" && ok ||
        bad "key 2 does not change the attention view"
    "$bin" view "$t" --script "?" --screenshot "$tmp/help.png" >/dev/null 2>&1
    "$bin" view "$t" --screenshot "$tmp/nohelp.png" >/dev/null 2>&1
    [ -f "$tmp/help.png" ] && ! cmp -s "$tmp/help.png" "$tmp/nohelp.png" && ok || bad "? shows no help overlay"

    # ---- the interactive loop: waits for the user, quits on SIGTERM ----
    "$bin" view "$t" --verbose 2>"$tmp/idle.log" &
    pid=$!
    sleep 2
    if kill -0 "$pid" 2>/dev/null; then ok; else bad "tscope view without --screenshot did not wait for the user"; fi
    kill -TERM "$pid" 2>/dev/null
    wait "$pid"
    rc=$?
    [ "$rc" = 0 ] && ok || bad "SIGTERM (a window close) should end tscope view with 0, got $rc"
    # Redrawn only on change: a few frames in two idle seconds, not dozens.
    frames=$(grep -c "drawn in" "$tmp/idle.log")
    [ "$frames" -le 5 ] && ok || bad "an idle window drew $frames frames in 2 s"

    # ---- bad input ----
    err=$("$bin" view "$t" --script "right sideways" --screenshot "$tmp/x.png" 2>&1 >/dev/null)
    rc=$?
    [ "$rc" = 2 ] && ok || bad "bad script word: exit $rc, want 2"
    case $err in *"sideways"*) ok ;; *) bad "bad script word not named: $err" ;; esac
    err=$("$bin" view "$tmp/missing.tstrace" 2>&1 >/dev/null)
    rc=$?
    [ "$rc" = 2 ] && [ "$(printf '%s\n' "$err" | wc -l)" = 1 ] && ok || bad "missing trace: exit $rc: $err"
    err=$(env -u DISPLAY -u WAYLAND_DISPLAY -u SDL_VIDEODRIVER "$bin" view "$t" 2>&1 >/dev/null)
    rc=$?
    [ "$rc" = 2 ] && ok || bad "no display: exit $rc, want 2"
    [ "$(printf '%s\n' "$err" | wc -l)" = 1 ] && ok || bad "no display: more than one line: $err"
    case $err in *"tscope png"*) ok ;; *) bad "no display: does not suggest tscope png: $err" ;; esac
    # A DISPLAY with no server behind it: the same, not a window nobody sees.
    err=$(DISPLAY=:9876 timeout 30 env -u WAYLAND_DISPLAY -u SDL_VIDEODRIVER "$bin" view "$t" 2>&1 >/dev/null)
    rc=$?
    [ "$rc" = 2 ] && [ "$(printf '%s\n' "$err" | wc -l)" = 1 ] && ok || bad "dead DISPLAY: exit $rc: $err"

    # ---- leaks (with a sanitizer build of tscope) ----
    if [ -n "${TSCOPE_ASAN:-}" ]; then
        out=$(LD_PRELOAD="$(asan_preload "$TSCOPE_ASAN")" LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0" \
            ASAN_OPTIONS=detect_leaks=1 "$TSCOPE_ASAN" view "$t" \
            --script "right right 2 b e 0 hover:700,300 wheel:600,250,3 press:600,250 hover:650,300 release down pgdn pgup up left / w e i g h t s enter ? ? + - z find:embed.pe end home" \
            --export-dir "$tmp/exp" --screenshot "$tmp/asan.png" 2>&1)
        rc=$?
        [ "$rc" = 0 ] && ok || bad "sanitizer session: exit $rc: $(printf '%s\n' "$out" | grep -m3 -E 'ERROR|SUMMARY|#[0-9]')"
    fi
fi

finish
