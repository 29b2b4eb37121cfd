#!/usr/bin/env bash
# The WebAssembly build (`make wasm`: build/wasm/tscope-wasm.js) equals native
# tscope: the induction model's next-token probabilities after a text, typed
# a character at a time through the wasm's cache, within 1e-5 of `tscope run`'s
# (tests/web/native-probs.sh), and again with a head of layer 1 knocked out
# (`run --ablate`). tests/web/wasm_test.js runs
# the wasm under Node. WASM_JS overrides where the build is. Then the kernels'
# unit tests built for wasm (build/wasm/tests/test_kernels.js, `make
# wasm-check`; WASM_KERNELS_JS overrides): the SIMD128 path against the scalar
# reference, each cmocka test counted.
. "$(dirname "$0")/lib.sh"
wasm=${WASM_JS:-build/wasm/tscope-wasm.js}
model=assets/induction-2l.safetensors
text='vQxjZkWmBpYfHgTqLzNcJdRsKwohFbGyvQxjZkWm'
layer=1 head=0

if [ ! -f "$wasm" ] || ! command -v node >/dev/null; then
    echo "FAIL: no $wasm or no node: run scripts/deps.sh web, then make wasm"
    echo "0 passed, 1 failed"
    exit 1
fi

tests/web/native-probs.sh "$bin" "$model" "$text" $layer $head "$tmp/ref.json" && ok || bad "no native probabilities"

node --no-experimental-fetch tests/web/wasm_test.js "$wasm" "$model" "$text" "$tmp/ref.json" >"$tmp/node.log" 2>&1
rc=$?
grep -v '^[0-9]* passed, [0-9]* failed$' "$tmp/node.log"
p=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$tmp/node.log" | tail -1)
f=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$tmp/node.log" | tail -1)
passed=$((passed + ${p:-0})) failed=$((failed + ${f:-0}))
[ "$rc" = 0 ] || [ "${f:-0}" != 0 ] || bad "wasm_test.js exited $rc"
[ -n "$p" ] || bad "wasm_test.js printed no count"

kernels=${WASM_KERNELS_JS:-build/wasm/tests/test_kernels.js}
if [ -f "$kernels" ]; then
    CMOCKA_MESSAGE_OUTPUT=stdout node --no-experimental-fetch "$kernels" >"$tmp/kernels.log" 2>&1
    rc=$?
    # (cmocka's own totals left out: the runner would read them as this script's count)
    grep -v '^\[ RUN \|^\[       OK \]\|^\[  PASSED  \] [0-9]\|^\[  FAILED  \] [0-9]* test' "$tmp/kernels.log"
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$tmp/kernels.log" | tail -1)
    f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$tmp/kernels.log" | tail -1)
    passed=$((passed + ${p:-0})) failed=$((failed + ${f:-0}))
    grep -q '^\[       OK \] simd128_is_there_exactly_in_wasm' "$tmp/kernels.log" && ok ||
        bad "test_kernels.js did not run on the SIMD128 path"
    [ "$rc" = 0 ] || [ "${f:-0}" != 0 ] || bad "test_kernels.js exited $rc"
    [ -n "$p" ] || bad "test_kernels.js printed no count"
else
    bad "no $kernels: make wasm-check builds it"
fi
finish
