#!/usr/bin/env bash
# The layering rule of docs/architecture.md: scripts/check-layers.sh passes on
# the tree and fails, naming the file, on each kind of forbidden arrow planted
# in a copy of it; and docs/architecture.md lists every source file, no more.
. "$(dirname "$0")/lib.sh"

# 1. the tree as it is
if out=$(scripts/check-layers.sh 2>&1); then ok; else bad "check-layers fails on the tree:"$'\n'"$out"; fi

# 2. one forbidden arrow at a time, in a fresh copy of the sources
plant() { # plant NAME FILE LINE EXPECTED-WORDS
    local name=$1 file=$2 line=$3 want=$4 copy=$tmp/$1
    mkdir -p "$copy"
    cp -r include src viz scripts "$copy/"
    mkdir -p "$(dirname "$copy/$file")"
    printf '%s\n' "$line" >>"$copy/$file"
    if out=$(scripts/check-layers.sh "$copy" 2>&1); then
        bad "$name: check-layers passed with '$line' in $file"
    elif ! grep -q -- "$want" <<<"$out"; then
        bad "$name: check-layers failed without saying '$want':"$'\n'"$out"
    else
        ok
    fi
}
plant kernels-to-model src/kernels/kernels.c '#include "tscope/model.h"' 'src/kernels/kernels.c (src/kernels, layer 1) includes tscope/model.h'
plant model-to-io src/model/model.c '#include "tscope/io.h"' 'src/model/model.c'
plant trace-to-render src/trace/trace_read.c '#include "tscope/render.h"' 'src/trace/trace_read.c'
plant same-layer src/lesson/lesson_run.c '#include "tscope/train.h"' 'only lower layers'
plant private-header-up src/core/tensor.c '#include "model/model_impl.h"' 'src/core/tensor.c'
plant public-header-up include/tscope/trace.h '#include "tscope/lesson.h"' 'include/tscope/trace.h'
plant cairo-in-src src/io/npy.c '#include <cairo.h>' 'src/ may not include cairo'
plant new-folder src/extra/thing.c '#include "tscope/core.h"' 'in no layer of the map'

# 3. docs/architecture.md names every file of src/ and viz/, and nothing that is gone
doc=docs/architecture.md
for f in src/*/*.[ch] viz/*/*.[ch]; do
    base=$(basename "$f")
    case $base in
        cmd_*.c) pat='`cmd_\*\.c`' ;;
        bench_*) pat='`bench_\*\.c`' ;;
        *) pat="\`$base\`" ;;
    esac
    if grep -q -- "$pat" "$doc"; then ok; else bad "$doc does not list $f"; fi
done
for name in $(grep -o '`[a-z0-9_]*\.[ch]`' "$doc" | tr -d '`' | sort -u); do
    if [ -n "$(ls src/*/"$name" viz/*/"$name" include/tscope/"$name" 2>/dev/null)" ]; then ok; else bad "$doc lists $name, which is not in src/ or viz/"; fi
done

finish
