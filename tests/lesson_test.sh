#!/usr/bin/env bash
# `tscope lesson`: --list shows every lesson, --check passes on each and fails
# with FILE:LINE on a broken one, lessons are found from any directory.
# Runs ./tscope (build it first; TSCOPE=path overrides).
. "$(dirname "$0")/lib.sh"

n_files=$(ls lessons/[0-9]*-*.md | wc -l)
expect 0 "--list" -- "$bin" lesson --list
[ "$(printf '%s\n' "$out" | wc -l)" = "$n_files" ] && ok || bad "--list shows $(printf '%s\n' "$out" | wc -l) lines for $n_files lessons"
[ "$n_files" -ge 11 ] && ok || bad "only $n_files lessons"
case $out in *"  3  attention "*"Scaled dot-product attention"*) ok ;; *) bad "--list misses lesson 3: $out" ;; esac

for f in lessons/[0-9]*-*.md; do
    expect 0 "--check $f" -- "$bin" lesson "$f" --check
    case $out in "$f: ok, "[0-9]*" steps"*) ok ;; *) bad "--check $f printed: $out" ;; esac
done

# by number, name and stem, from another directory
(cd "$tmp" && "$bin" lesson 3 --check >/dev/null) && ok || bad "lesson 3 --check from another directory"
expect 0 "lesson by name" -- "$bin" lesson attention --check
expect 0 "lesson by stem" -- "$bin" lesson 03-attention --check
expect 0 "outline" -- "$bin" lesson 1 --print
case $out in *"step 1/"*"input"*) ok ;; *) bad "outline of lesson 1: $out" ;; esac

# a broken lesson: FILE:LINE: message, exit 1
printf '# Broken\n\n```tscope setup\npreset: tiny\n```\n\n```tscope step\ntensor: input\nview: heatmapp\n```\n' >"$tmp/broken.md"
expect 1 "broken lesson" -- "$bin" lesson "$tmp/broken.md" --check
[ "$err" = "$tmp/broken.md:9: unknown view 'heatmapp' (one of heatmap|grid|overview|curves|stats|shapes|auto)" ] && ok ||
    bad "broken lesson message: $err"
printf '# Broken\n\n```tscope step\ntensor: input\n```\n' >"$tmp/early.md"
expect 1 "step before setup" -- "$bin" lesson "$tmp/early.md" --check
[ "$err" = "$tmp/early.md:3: a step block before the setup block (\`\`\`tscope setup comes first)" ] && ok ||
    bad "step-before-setup message: $err"

# bad usage: exit 2, one line
expect 2 "unknown lesson" -- "$bin" lesson 99 --check
case $err in "tscope lesson: no lesson '99' in "*) ok ;; *) bad "unknown lesson message: $err" ;; esac
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

finish
