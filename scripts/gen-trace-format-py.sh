#!/usr/bin/env bash
# Write python/tscope_format.py: the .tstrace layout (src/trace/trace_format.h)
# and the op and tag names (include/tscope/core.h) as the Python bridge
# (python/tscope_trace.py) reads them, so the bridge copies no offset by hand.
# The C compiler's preprocessor reads the headers: what it prints is what the
# C writer uses. tests/bridge_test.sh checks that the committed file is this
# script's output.  Usage: scripts/gen-trace-format-py.sh [OUT] (default
# python/tscope_format.py; - for stdout)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-python/tscope_format.py}
cc=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
{
    echo '#include <stdio.h>'
    echo '#include "tscope/core.h"'
    echo '#include "trace/trace_format.h"'
    echo 'int main(void) {'
    echo '    printf("\"\"\"The .tstrace layout and the op and tag names, as src/trace/trace_format.h and\n");'
    echo '    printf("include/tscope/core.h define them. Made by scripts/gen-trace-format-py.sh: do not edit.\"\"\"\n\n");'
    # every integer #define TRF_X of the layout, as X (not the statistics code's BLOCK and HAVE_X86)
    sed -n 's/^#define TRF_\([A-Z0-9_]*\) \([0-9][0-9xu]*\).*/\1/p' src/trace/trace_format.h | grep -v -E '^(BLOCK|HAVE_)' | while read -r n; do
        echo "    printf(\"$n = %llu\\n\", (unsigned long long)TRF_$n);"
    done
    # the magics, as bytes
    sed -n 's/^#define TRF_\([A-Z_]*MAGIC\) .*/\1/p' src/trace/trace_format.h | while read -r n; do
        echo "    printf(\"$n = b\\\"\"); for (const char *c = TRF_$n; *c; ++c) printf(\"\\\\x%02x\", (unsigned char)*c); printf(\"\\\"\\n\");"
    done
    echo '    printf("MAX_RANK = %d\n", TS_MAX_RANK);'
    echo '#define NAME(e, name) printf("    \"%s\",\n", name);'
    echo '    printf("\n# the op and tag numbers (append-only): their index in these lists\nOPS = [\n"); TS_OP_LIST(NAME) printf("]\n");'
    echo '    printf("TAGS = [\n"); TS_TAG_LIST(NAME) printf("]\n");'
    echo '    return 0;'
    echo '}'
} > "$tmp/gen.c"
"$cc" -std=c11 -Iinclude -Isrc -o "$tmp/gen" "$tmp/gen.c" -lm
if [ "$out" = - ]; then "$tmp/gen"; else "$tmp/gen" > "$out.tmp" && mv "$out.tmp" "$out"; fi
