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

finish
