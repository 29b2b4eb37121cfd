# lib.sh: what every shell test shares. Source it first, from bash:
#     . "$(dirname "$0")/lib.sh"
# It moves to the top of the repository and sets:
#   bin      the tscope under test, an absolute path ($TSCOPE, default ./tscope)
#   pngtool  the PNG helper of the tests, an absolute path ($PNGTOOL, default
#            build/tests/tools/pngtool: `make tests` builds it)
#   tmp      a fresh directory, removed when the test exits
# and the functions below. A test ends with `finish`, which prints the closing
# line "N passed, N failed" and exits non-zero when anything failed.
set -u
cd "$(dirname "${BASH_SOURCE[1]}")/.." || exit 2

abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
bin=$(abs "${TSCOPE:-./tscope}")
pngtool=$(abs "${PNGTOOL:-build/tests/tools/pngtool}")
passed=0 failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*"; }
# has TEXT PART WHAT: TEXT holds PART (a passed check), or a failure naming WHAT
has() { case $1 in *"$2"*) ok ;; *) bad "$3: no '$2' in: $(printf '%s' "$1" | head -c 600)" ;; esac; }

# expect CODE WHAT -- COMMAND...: the command exits with CODE. Leaves its
# standard output in $out, its standard error in $err and its code in $rc.
expect() {
    local want=$1 what=$2
    shift 3
    out=$("$@" 2>"$tmp/expect.err")
    rc=$?
    err=$(cat "$tmp/expect.err")
    if [ "$rc" = "$want" ]; then ok; else bad "$what: exit $rc, want $want (stderr: $err)"; fi
}

# refuses NAME MESSAGE-PART CMD...: the command exits 2 with one line on stderr
# naming the problem (MESSAGE-PART).
refuses() {
    local name=$1 part=$2
    shift 2
    "$@" >"$tmp/refuses.out" 2>"$tmp/refuses.err" </dev/null
    local rc=$?
    if [ $rc != 2 ]; then
        bad "$name: exit $rc, want 2 (stderr: $(head -c 300 "$tmp/refuses.err"))"
    elif ! grep -q -- "$part" "$tmp/refuses.err"; then
        bad "$name: stderr does not say '$part': $(cat "$tmp/refuses.err")"
    elif [ "$(grep -c '' "$tmp/refuses.err")" != 1 ]; then
        bad "$name: more than one line on stderr: $(cat "$tmp/refuses.err")"
    else
        ok
    fi
}

# lm_loss_fell NAME OUT: a `tscope train --task lm` log OUT whose held-out loss (the last line)
# ends below 0.7 ln V, V its vocabulary (guessing uniformly scores ln V), and whose
# training loss fell by a fifth from its first progress line to its last.
lm_loss_fell() {
    local name=$1 out=$2 V first lastl last
    V=$(sed -n 's/^# corpus .*vocabulary \([0-9]*\)).*/\1/p' "$out")
    first=$(grep -m1 '^step ' "$out" | sed 's/.*  loss \([0-9.]*\).*/\1/')
    lastl=$(grep '^step ' "$out" | tail -n 1 | sed 's/.*  loss \([0-9.]*\).*/\1/')
    last=$(tail -n 1 "$out" | sed -n 's/^held-out loss \([0-9.]*\) nats\/token.*/\1/p')
    if [ -n "$V" ] && [ -n "$last" ] && awk -v v="$V" -v b="$last" 'BEGIN { exit !(b < 0.7 * log(v)) }' &&
        awk -v a="$first" -v b="$lastl" 'BEGIN { exit !(b < 0.8 * a) }'; then
        ok
        echo "ok: $name: training loss $first -> $lastl; held-out $last, ln $V = $(awk -v v="$V" 'BEGIN { print log(v) }')"
    else
        bad "$name: the loss did not fall: training $first -> $lastl, held-out $last (vocabulary $V)"
        tail -n 8 "$out"
    fi
}

# PNGs, through tests/tools/pngtool (no ImageMagick). A region is WxH+X+Y.
png_size() { "$pngtool" size "$1" 2>/dev/null; }                 # FILE -> "WxH"
png_colors() { "$pngtool" colors "$@" 2>/dev/null || echo 0; }   # FILE REGION [STEP] -> distinct colours
png_differ() { "$pngtool" diff "$1" "$2" "$3" 2>/dev/null; }     # A B REGION -> differing pixels
png_same() { [ "$(png_differ "$1" "$2" "$3")" = 0 ]; }           # A B REGION: pixel-identical there

# The LD_PRELOAD a sanitizer build of tscope ($1) runs a window with: Mesa's
# GL driver is loaded and unloaded inside SDL; kept loaded (after the
# sanitizer runtime, which must come first), LSan can name its frames instead
# of reporting an <unknown module> (tests/lsan.supp). clang links its runtime
# into the binary (it comes first by itself); gcc's is a library, preloaded.
asan_preload() {
    local preload="" asan_rt="" lib
    ldd "$1" 2>/dev/null | grep -q libasan && asan_rt=$(gcc -print-file-name=libasan.so 2>/dev/null)
    for lib in /usr/lib/*/dri/swrast_dri.so; do
        if [ -e "$lib" ] && [ -z "$asan_rt" ]; then preload="$lib"; fi
        if [ -e "$lib" ] && [ -e "$asan_rt" ]; then preload="$asan_rt $lib"; fi
    done
    echo "$preload"
}

finish() {
    echo "$passed passed, $failed failed"
    [ "$failed" = 0 ]
    exit
}
