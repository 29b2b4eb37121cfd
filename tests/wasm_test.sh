#!/usr/bin/env bash
# The WebAssembly build (`make wasm`: build/wasm/tscope-wasm.js) equals native
# tscope: the induction model's next-token probabilities after a text, typed
# a character at a time through the wasm's cache, within 1e-5 of `tscope run`'s
# (tests/web/native-probs.sh), and again with a head of layer 1 knocked out
# (`run --ablate`). tests/web/wasm_test.js runs
# the wasm under Node. WASM_JS overrides where the build is.
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
finish
