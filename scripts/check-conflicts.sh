#!/usr/bin/env bash
# Fail, naming FILE:LINE, when a file git tracks holds a merge-conflict
# marker line (a merge of two branches that was committed unresolved).
#   scripts/check-conflicts.sh [DIR]   (default: the repository holding this script)
# Images are skipped: their bytes may hold anything.
set -uo pipefail
dir=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$dir" || exit 2
found=$(git grep -nI -E '^(<<<<<<< |>>>>>>> |=======$)' -- . ':!*.png' ':!*.svg' ':!*.pdf' 2>/dev/null)
if [ -n "$found" ]; then
    printf 'merge-conflict marker in a tracked file: %s\n' "$found" >&2
    exit 1
fi
exit 0
