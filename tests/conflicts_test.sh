#!/usr/bin/env bash
# No tracked file holds a merge-conflict marker: the check passes on the tree
# and fails, naming the file and line, on each marker planted in a copy.
. "$(dirname "$0")/lib.sh"

if out=$(scripts/check-conflicts.sh 2>&1); then ok; else bad "a conflict marker is in the tree:"$'\n'"$out"; fi

# plant NAME TEXT: a copy of the repository with TEXT appended to README.md
plant() {
    local name=$1 text=$2 copy=$tmp/$1
    git clone -q . "$copy" 2>/dev/null || { bad "$name: cannot clone the tree"; return; }
    printf '%s\n' "$text" >>"$copy/README.md"
    if out=$(scripts/check-conflicts.sh "$copy" 2>&1); then
        bad "$name: the check passed with '$text' in README.md"
    elif ! grep -q 'README.md:[0-9]' <<<"$out"; then
        bad "$name: the check failed without naming README.md and its line:"$'\n'"$out"
    else
        ok
    fi
}
plant ours '<<<<<<< HEAD'
plant middle '======='
plant theirs '>>>>>>> i27'
# a line of equals signs that is longer (a Markdown underline) is no marker
copy=$tmp/underline
git clone -q . "$copy" 2>/dev/null
printf 'Title\n=========\n' >>"$copy/README.md"
if out=$(scripts/check-conflicts.sh "$copy" 2>&1); then ok; else bad "an underline was taken for a marker: $out"; fi
finish
