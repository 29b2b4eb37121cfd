#!/usr/bin/env bash
# `tscope lesson 1` in a real X server (scripts/run-tests.sh runs this under
# xvfb-run): the viewer's lesson mode steps through lesson 1 with --script,
# taking a screenshot at every step. Checks: each has the window's size; the
# pages and the step counter in the status bar change from one step to the
# next; left at the first step and right at the last change nothing; `end`
# and `home` jump; the view is a picture, not a blank; a bad script word is
# exit 2 before any window opens.
#   TSCOPE=path/to/tscope (default ./tscope)
. "$(dirname "$0")/lib.sh"
export TSCOPE_CACHE="$tmp/cache"
W=1200 H=760 STATUS=34

if [ -z "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
    echo "no display: run under xvfb-run (scripts/run-tests.sh does)"
    echo "0 passed, 1 failed"
    exit 1
fi

page="${W}x$((H - STATUS))+0+0"
counter="260x${STATUS}+0+$((H - STATUS))"
col=$(awk -v w=$W 'BEGIN { x = w * 0.31; if (x < 360) x = 360; if (x > 560) x = 560; printf "%d", x }')
view="$((W - col - 40))x$((H - STATUS - 90))+$((col + 20))+70"

# same REGION A B: the region is pixel-identical in two screenshots
same() { png_same "$2" "$3" "$1"; }

steps=$("$bin" lesson 1 --check --no-run | sed -n 's/.*: ok, \([0-9]*\) steps.*/\1/p')
script="left shot:$tmp/s1.png"
for i in $(seq 2 "$steps"); do script="$script right shot:$tmp/s$i.png"; done
script="$script right shot:$tmp/past.png home shot:$tmp/home.png end"
"$bin" lesson 1 --width $W --height $H --script "$script" --screenshot "$tmp/end.png" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" = 0 ] && ok || bad "lesson 1 in the viewer: exit $rc ($(cat "$tmp/err"))"

for i in $(seq 1 "$steps"); do
    f="$tmp/s$i.png"
    [ -s "$f" ] || { bad "no screenshot of step $i"; continue; }
    size=$(png_size "$f")
    [ "$size" = "${W}x${H}" ] && ok || bad "step $i screenshot is $size, want ${W}x${H}"
    n=$(png_colors "$f" "$view")
    [ "$n" -ge 16 ] && ok || bad "step $i: the view has $n colours: blank?"
    if [ "$i" -gt 1 ]; then
        same "$page" "$tmp/s$((i - 1)).png" "$f" && bad "steps $((i - 1)) and $i show the same page" || ok
        same "$counter" "$tmp/s$((i - 1)).png" "$f" && bad "the step counter did not change at step $i" || ok
    fi
done
same "$page" "$tmp/s$steps.png" "$tmp/past.png" && ok || bad "right at the last step changed the page"
same "$page" "$tmp/s1.png" "$tmp/home.png" && ok || bad "home did not go back to step 1"
same "$page" "$tmp/s$steps.png" "$tmp/end.png" && ok || bad "end did not go to the last step"
grep -q "screenshot $tmp/end.png" "$tmp/out" && ok || bad "no line for the final screenshot: $(cat "$tmp/out")"

# a bad script word: exit 2 at once, naming it
"$bin" lesson 1 --script "right sideways" --screenshot "$tmp/x.png" >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" = 2 ] && ok || bad "bad script word: exit $rc, want 2"
grep -q "sideways" "$tmp/err" && ok || bad "bad script word message: $(cat "$tmp/err")"
[ -e "$tmp/x.png" ] && bad "a bad script still wrote a screenshot" || ok

finish
