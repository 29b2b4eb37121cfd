#!/usr/bin/env bash
# Run every libFuzzer target built in BUILD/fuzz for SECONDS each; end with one
# line "N passed, N failed" (a target passes when it runs out its time with no
# finding).
#   scripts/fuzz.sh BUILD_DIR [SECONDS]
# For a target tests/fuzz/NAME.c: tests/fuzz/NAME.dict is its dictionary when
# present; tests/fuzz/NAME.seeds lists globs (one a line, from the top of the
# tree) of files that seed its corpus. The corpus grows in a temporary
# directory; a finding is kept in BUILD/fuzz/findings/.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-fuzz}
seconds=${2:-60}
passed=0 failed=0
findings=$build/fuzz/findings
mkdir -p "$findings"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for bin in "$build"/fuzz/fuzz_*; do
    [ -x "$bin" ] && [ -f "$bin" ] || continue
    name=$(basename "$bin")
    corpus=$work/$name
    mkdir -p "$corpus"
    if [ -f "tests/fuzz/$name.seeds" ]; then
        while read -r glob; do
            case $glob in ''|'#'*) continue ;; esac
            for f in $glob; do [ -f "$f" ] && cp "$f" "$corpus/"; done
        done <"tests/fuzz/$name.seeds"
    fi
    args=(-max_total_time="$seconds" -artifact_prefix="$findings/$name-" -print_final_stats=1)
    [ -f "tests/fuzz/$name.dict" ] && args+=(-dict="tests/fuzz/$name.dict")
    log=$work/$name.log
    if "$bin" "${args[@]}" "$corpus" >"$log" 2>&1; then
        passed=$((passed + 1))
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
        printf '%-36s ok: %s runs in %ss, no finding\n' "$name" "${runs:-?}" "$seconds"
    else
        failed=$((failed + 1))
        echo "---- $name found a problem; the input is in $findings/; its log:"
        tail -n 40 "$log"
        echo "----"
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
