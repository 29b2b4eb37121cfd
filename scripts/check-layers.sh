#!/usr/bin/env bash
# Check the layering rule of docs/architecture.md from the #include lines:
# a file may include headers of its own folder and of folders in lower
# layers, never of a folder in its own layer or above. Public headers
# (include/tscope/X.h) belong to the folder they are the face of.
#   scripts/check-layers.sh [ROOT]     (ROOT: the repository, default .)
# Prints one line per forbidden arrow and exits 1 when there is any.
set -euo pipefail
root=${1:-.}
cd "$root"

# folder -> layer, lowest first. Folders of one layer may not include each other.
declare -A layer=(
    [src/core]=0
    [src/kernels]=1 [src/tokenizer]=1
    [src/model]=2
    [src/io]=3
    [src/trace]=4
    [src/train]=5 [src/lesson]=5 [src/experiment]=5
    [viz/render]=6
    [viz/viewer]=7
    [viz/pages]=8
    [src/cmd]=9 [src/capi]=9 [src/wasm]=9
)
# public header -> the folder it belongs to
declare -A header_home=(
    [core]=src/core [kernels]=src/kernels [tokenizer]=src/tokenizer [model]=src/model
    [io]=src/io [trace]=src/trace [train]=src/train [lesson]=src/lesson [experiment]=src/experiment
    [render]=viz/render [viewer]=viz/viewer [pages]=viz/pages [capi]=src/capi [wasm]=src/wasm
)

bad=0
complain() { echo "layers: $*"; bad=1; }

# home_of FILE: the folder FILE belongs to, in $home (empty when the rule
# does not cover it). Sets a variable rather than printing, so the loop below
# runs without a subshell per include.
home_of() {
    local f=$1 n
    home=
    case $f in
        include/tscope/*.h)
            n=${f#include/tscope/}; n=${n%.h}
            home=${header_home[$n]:-} ;;
        src/*/* | viz/*/*) home=${f%/*} ;;
    esac
}

# resolve FILE NAME: the file an include line names, seen from FILE, in
# $target (empty: a system header).
resolve() {
    local f=$1 name=$2
    target=
    if [ -e "${f%/*}/$name" ]; then target=${f%/*}/$name
    elif [ -e "include/$name" ]; then target=include/$name
    elif [ -e "src/$name" ]; then target=src/$name
    elif [ -e "viz/$name" ]; then target=viz/$name
    fi
}

for f in include/tscope/*.h src/*/*.[ch] viz/*/*.[ch]; do
    [ -e "$f" ] || continue
    home_of "$f"
    from=$home
    if [ -z "$from" ] || [ -z "${layer[$from]:-}" ]; then
        complain "$f: in no layer of the map (add its folder to scripts/check-layers.sh and docs/architecture.md)"
        continue
    fi
    while IFS= read -r line; do
        [[ $line =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*\"([^\"]*)\" ]] || continue
        name=${BASH_REMATCH[1]}
        resolve "$f" "$name"
        [ -n "$target" ] || continue
        home_of "$target"
        to=$home
        [ -n "$to" ] || { complain "$f includes $name, which is in no layer"; continue; }
        [ "$to" = "$from" ] && continue
        if [ "${layer[$to]}" -ge "${layer[$from]}" ]; then
            complain "$f ($from, layer ${layer[$from]}) includes $name ($to, layer ${layer[$to]}): only lower layers may be included"
        fi
    done <"$f"
done

# Computing code never sees the drawing libraries.
while IFS= read -r hit; do
    complain "$hit: src/ may not include cairo, pango or SDL (they are viz's)"
done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*<(cairo|pango|SDL)' src/*/*.[ch] \
             include/tscope/{core,kernels,tokenizer,model,io,trace,train,lesson}.h 2>/dev/null || true)

if [ $bad = 0 ]; then echo "layers: every include follows the layering rule"; fi
exit $bad
