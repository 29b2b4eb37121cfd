#!/usr/bin/env bash
# Run the unit tests of a cross build (make cross-check) under qemu-user and
# end with one line: "N passed, N failed".
#   scripts/cross-check.sh BUILD_DIR [TRIPLET]
# TRIPLET (aarch64-linux-gnu) names the sysroot the emulator loads libraries
# from. The tests run on the NEON path (TSCOPE_KERNELS=neon); test_kernels
# fails if that is not the path in use, and any "kernels: ... using" line (the
# lazy fallback's message) counts as a failure of the test that printed it.
set -uo pipefail
build=${1:?usage: scripts/cross-check.sh BUILD_DIR [TRIPLET]}
triplet=${2:-aarch64-linux-gnu}
arch=${triplet%%-*}
qemu=$(command -v "qemu-$arch-static" || command -v "qemu-$arch" || true)
if [ -z "$qemu" ]; then
    echo "cross-check: no qemu-$arch-static or qemu-$arch on PATH (scripts/deps.sh cross installs it)" >&2
    exit 2
fi
# Libraries from the cross toolchain's sysroot first (libgomp), then the
# multiarch ones (zlib, cJSON, md4c, cmocka) where dpkg put them.
export QEMU_LD_PREFIX=/usr/$triplet
export LD_LIBRARY_PATH=/usr/$triplet/lib:/usr/lib/$triplet:/lib/$triplet
export TSCOPE_KERNELS=neon
export LC_ALL=C.UTF-8 TZ=UTC CMOCKA_MESSAGE_OUTPUT=stdout
passed=0 failed=0 start_all=$SECONDS
failures=()
log=$(mktemp)
trap 'rm -f "$log"' EXIT
shopt -s nullglob
tests=("$build"/tests/test_*)
[ ${#tests[@]} -gt 0 ] || { echo "cross-check: no test binaries in $build/tests" >&2; exit 2; }
for t in "${tests[@]}"; do
    [ -x "$t" ] && [ ! -d "$t" ] || continue
    name=$(basename "$t") start=$SECONDS
    "$qemu" "$t" >"$log" 2>&1 </dev/null
    rc=$?
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
    f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
    p=${p:-0} f=${f:-0}
    if grep -q '^kernels: .*; using' "$log"; then
        echo "cross-check: $name fell back from TSCOPE_KERNELS=neon:"
        grep '^kernels: ' "$log"
        f=$((f + 1))
    fi
    if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; fi
    if [ "$f" != 0 ]; then
        failures+=("$name")
        echo "---- $name failed (exit $rc); its output:"
        tail -n 60 "$log"
        echo "----"
    fi
    passed=$((passed + p)) failed=$((failed + f))
    printf '%-44s %4d passed, %d failed  %4d s\n' "$arch $name" "$p" "$f" $((SECONDS - start))
done
echo "cross-check: $arch under $(basename "$qemu"), $((SECONDS - start_all)) s"
if [ ${#failures[@]} -gt 0 ]; then echo "failed: ${failures[*]}"; fi
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
