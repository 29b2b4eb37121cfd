#!/usr/bin/env bash
# Run every test and end with one line: "N passed, N failed".
#   scripts/run-tests.sh BUILD_DIR ASAN_BUILD_DIR
# Unit tests (cmocka binaries in BUILD_DIR/tests) run twice: plain and built
# with sanitizers. Shell tests (tests/*_test.sh) print their own
# "N passed, N failed"; GUI tests (tests/gui_*_test.sh) run under Xvfb.
set -uo pipefail
build=${1:-build}
asan_build=${2:-build-asan}
passed=0 failed=0
failures=()
log_dir=$(mktemp -d)
trap 'rm -rf "$log_dir"' EXIT

# Add the counts found in a log: cmocka's "[  PASSED  ] N test(s)." and
# "[  FAILED  ] N test(s)", or our own "N passed, N failed" line.
count_log() {
    local label=$1 log=$2 rc=$3 secs=$4 p f
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
    f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
    if [ -z "$p$f" ]; then
        p=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed.*/\1/p' "$log" | tail -1)
        f=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed.*/\2/p' "$log" | tail -1)
    fi
    p=${p:-0} f=${f:-0}
    # A crash or a sanitizer report with no failure counted is still a failure.
    if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; fi
    passed=$((passed + p)) failed=$((failed + f))
    if [ "$f" != 0 ]; then
        failures+=("$label")
        echo "---- $label failed (exit $rc); its output:"
        tail -n 60 "$log"
        echo "----"
    fi
    printf '%-44s %4d passed, %d failed  %4d s\n' "$label" "$p" "$f" "$secs"
}

run_one() {
    local label=$1; shift
    local log="$log_dir/$(echo "$label" | tr '/ ' '__').log"
    local start=$SECONDS rc
    "$@" >"$log" 2>&1 </dev/null
    rc=$?
    count_log "$label" "$log" "$rc" $((SECONDS - start))
}

# Shell tests run the binary of the build being tested (the Makefile links it
# at ./tscope for the default build, BUILD/tscope otherwise).
if [ -z "${TSCOPE:-}" ]; then
    if [ "$build" = build ]; then TSCOPE=./tscope; else TSCOPE=$build/tscope; fi
fi
export TSCOPE
# ... and the PNG helper of that build (tests/tools/pngtool.c).
export PNGTOOL=${PNGTOOL:-$build/tests/tools/pngtool}
# The viewer's scripted leak check runs the sanitizer build of tscope.
if [ -z "${TSCOPE_ASAN:-}" ] && [ -x "$asan_build/tscope" ]; then export TSCOPE_ASAN=$asan_build/tscope; fi

# The same answers whatever the machine's locale and time zone.
export LC_ALL=C.UTF-8 TZ=UTC
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export CMOCKA_MESSAGE_OUTPUT=stdout

for t in "$build"/tests/test_*; do
    [ -x "$t" ] || continue
    run_one "unit $(basename "$t")" "$t"
done
for t in "$asan_build"/tests/test_*; do
    [ -x "$t" ] || continue
    run_one "asan $(basename "$t")" "$t"
done
for t in tests/*_test.sh; do
    [ -e "$t" ] || continue
    case $(basename "$t") in gui_*) continue ;; esac
    run_one "shell $(basename "$t")" bash "$t"
done
for t in tests/gui_*_test.sh; do
    [ -e "$t" ] || continue
    run_one "gui $(basename "$t")" xvfb-run -a -s "-screen 0 1280x800x24" bash "$t"
done

if [ ${#failures[@]} -gt 0 ]; then echo "failed: ${failures[*]}"; fi
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
