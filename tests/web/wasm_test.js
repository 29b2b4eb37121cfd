// wasm_test: tscope's WebAssembly build (`make wasm`) under Node, against
// native `tscope run`. Loads a checkpoint's bytes through the wasm, runs a
// text, and compares the next-token probabilities after its last character
// (the ten most likely, and every one within TOL) with the native run's, as
// tests/wasm_test.sh exported them; then the same with a head knocked out.
//   node --no-experimental-fetch tests/web/wasm_test.js WASM_JS MODEL TEXT REF.json
// REF.json: {"plain": [V floats], "knocked": [V floats], "layer": L, "head": H}
'use strict';
const fs = require('fs');
const { performance } = require('perf_hooks');

const TOL = 1e-5;
const [wasmJs, modelPath, text, refPath] = process.argv.slice(2);
let passed = 0, failed = 0;
const check = (cond, msg) => { if (cond) passed++; else { failed++; console.log('FAIL: ' + msg); } };

// The largest difference between the wasm's probabilities and the reference,
// and whether the ten most likely tokens come in the same order.
function compare(what, got, want) {
  check(got.length === want.length, `${what}: ${got.length} probabilities, native has ${want.length}`);
  let worst = 0;
  for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]));
  const top = a => [...a.keys()].sort((x, y) => a[y] - a[x] || x - y).slice(0, 10);
  const gotTop = top(got), wantTop = top(want);
  console.log(`${what}: largest difference from native run ${worst.toExponential(2)} (tolerance ${TOL}); ` +
              `top 10 ${wantTop.map(i => want[i].toFixed(3)).join(' ')}`);
  check(worst <= TOL, `${what}: probabilities differ from native run by ${worst}`);
  check(gotTop.join() === wantTop.join(), `${what}: top 10 ${gotTop} but native ${wantTop}`);
  return worst;
}

async function main() {
  const ref = JSON.parse(fs.readFileSync(refPath, 'utf8'));
  const M = await require(require('path').resolve(wasmJs))();
  const call = (name, ret, types, args) => M.ccall(name, ret, types, args);
  M.FS.writeFile('/model.safetensors', fs.readFileSync(modelPath));
  const s = call('tsw_open', 'number', ['string'], ['/model.safetensors']);
  if (!s) { console.log('FAIL: tsw_open: ' + call('tsw_error', 'string', [], [])); console.log('0 passed, 1 failed'); process.exit(1); }
  const V = call('tsw_vocab', 'number', ['number'], [s]);
  const probs = before => {
    const p = call('tsw_next_probs', 'number', ['number', 'number', 'number'], [s, 1.0, before]);
    return Array.from(M.HEAPF32.subarray(p / 4, p / 4 + V));
  };

  // typed one character at a time, as the page does: every pass reuses the cache
  let t0 = performance.now();
  for (let i = 1; i <= text.length; i++)
    check(call('tsw_set_text', 'number', ['number', 'string'], [s, text.slice(0, i)]) === 0,
          'tsw_set_text: ' + call('tsw_error', 'string', [], []));
  const ms = (performance.now() - t0) / text.length;
  console.log(`wasm under node: ${text.length} keystrokes, ${ms.toFixed(2)} ms each on average`);
  check(call('tsw_tokens', 'number', ['number'], [s]) === text.length, 'the text is not read character by character');
  compare('typed', probs(0), ref.plain);

  // the whole text at once gives the same numbers (the cache changes nothing)
  check(call('tsw_set_text', 'number', ['number', 'string'], [s, '']) === 0, 'clearing the text');
  check(call('tsw_set_text', 'number', ['number', 'string'], [s, text]) === 0, 'the whole text at once');
  compare('at once', probs(0), ref.plain);

  // a head knocked out: the native run's --ablate, and "before" is the plain run
  const out = call('tsw_knock', 'number', ['number', 'number', 'number'], [s, ref.layer, ref.head]);
  check(out === 1, `tsw_knock ${ref.layer}.${ref.head} returned ${out}: ` + call('tsw_error', 'string', [], []));
  compare(`head ${ref.layer}.${ref.head} knocked out`, probs(0), ref.knocked);
  compare('before the knock-out', probs(1), ref.plain);
  // the comparison can fail: the knocked-out probabilities are not the plain ones
  let moved = 0;
  for (let i = 0; i < V; i++) moved = Math.max(moved, Math.abs(ref.knocked[i] - ref.plain[i]));
  check(moved > 100 * TOL, `knocking out ${ref.layer}.${ref.head} moved no probability (${moved}): the test cannot fail`);
  check(call('tsw_knock', 'number', ['number', 'number', 'number'], [s, ref.layer, ref.head]) === 0, 'restoring the head');
  compare('restored', probs(0), ref.plain);

  // a bad request is one sentence, not a crash
  check(call('tsw_knock', 'number', ['number', 'number', 'number'], [s, 99, 0]) < 0, 'knocking out a head that is not there');
  check(/no head/.test(call('tsw_error', 'string', [], [])), 'no sentence for a head that is not there');
  M.FS.writeFile('/junk.safetensors', new Uint8Array([1, 2, 3]));
  check(call('tsw_open', 'number', ['string'], ['/junk.safetensors']) === 0, 'a file that is not a checkpoint opened');
  console.log('refused: ' + call('tsw_error', 'string', [], []));
  call('tsw_close', null, ['number'], [s]);
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}
main().catch(e => { console.log('FAIL: ' + (e.stack || e)); console.log(`${passed} passed, ${failed + 1} failed`); process.exit(1); });
