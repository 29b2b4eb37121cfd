#!/usr/bin/env bash
# The trace's performance acceptance (issue 5): `tscope run --preset seed000`
# with and without `--trace FILE --level values`, alternated N times in the
# same session, and PyTorch's hooks + torch.save on the same model when a peer
# script is given. Prints each pair, then the medians and their ratio.
#   scripts/bench-trace.sh [TSCOPE] [N] [DIR] [PEER.py]
# DIR (default /tmp) must be on a real disk: the trace is about 2 GB.
set -u
bin=${1:-./tscope}
n=${2:-5}
dir=${3:-/tmp}
peer=${4:-}
trace=$dir/bench-trace.$$.tstrace
trap 'rm -f "$trace" "$trace.tmp"' EXIT

seconds() { /usr/bin/time -f %e "$@" 2>&1 >/dev/null | tail -1; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

plain=() traced=()
for i in $(seq "$n"); do
    # The last trace goes first, and its blocks are freed before either run:
    # freeing 2 GB is the file system's work, not the writer's.
    rm -f "$trace"
    sync
    p=$(seconds "$bin" run --preset seed000)
    t=$(seconds "$bin" run --preset seed000 --trace "$trace" --level values)
    plain+=("$p") traced+=("$t")
    printf 'run %d: untraced %s s, traced %s s (load %s)\n' "$i" "$p" "$t" "$(cut -d' ' -f1 /proc/loadavg)"
done
size=$(stat -c %s "$trace" 2>/dev/null || echo 0)
mp=$(printf '%s\n' "${plain[@]}" | median)
mt=$(printf '%s\n' "${traced[@]}" | median)
echo "median: untraced $mp s, traced $mt s, ratio $(awk -v a="$mt" -v b="$mp" 'BEGIN {printf "%.2f", a / b}')," \
     "trace $(awk -v s="$size" 'BEGIN {printf "%.2f GB", s / 2^30}')"
if [ -n "$peer" ]; then
    echo "PyTorch hooks + torch.save ($peer):"
    TRACE_OUT=$dir/bench-trace.$$.pt /usr/bin/python3 "$peer"
    rm -f "$dir/bench-trace.$$.pt"
fi
