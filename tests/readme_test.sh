#!/usr/bin/env bash
# README.md's lesson counts are the lessons' (scripts/readme-counts.sh): the
# current README passes, and one with a count typed wrong, or a lesson added
# without its row, fails naming it.
. "$(dirname "$0")/lib.sh"

out=$(scripts/readme-counts.sh --check 2>&1) && ok || bad "README.md is stale: $out"

# a copy of the tree's README and lessons, made stale
mkdir -p "$tmp/t/scripts" "$tmp/t/lessons"
cp scripts/readme-counts.sh "$tmp/t/scripts/"
cp lessons/[0-9]*-*.md "$tmp/t/lessons/"
sed 's/<!-- count:steps -->[0-9]*</<!-- count:steps -->7</' README.md >"$tmp/t/README.md"
out=$("$tmp/t/scripts/readme-counts.sh" --check 2>&1) && bad "a wrong step count passes" ||
    has "$out" "README.md says steps is '7'" "a wrong step count"
cp README.md "$tmp/t/README.md"
cp lessons/01-shapes.md "$tmp/t/lessons/99-more.md"
out=$("$tmp/t/scripts/readme-counts.sh" --check 2>&1) && bad "a lesson more passes" || {
    has "$out" "README.md says lessons is" "a lesson more"
    has "$out" "table of lessons has" "a lesson more, no row"
}
# rewriting mends the counts (the table's row is the writer's)
"$tmp/t/scripts/readme-counts.sh" >/dev/null 2>&1
out=$("$tmp/t/scripts/readme-counts.sh" --check 2>&1)
case $out in *"says"*) bad "rewriting left a stale count: $out" ;; *) ok ;; esac
finish
