// The peer of `tscope tokenize --time`: the reference (gpt-3-encoder 1.1.4)
// encoding a file line by line, timed the same way (loading apart from
// encoding). Writes the ids, one line per input line, to OUT for comparison.
//   NODE_PATH=/tmp/bpe-ref/node_modules node tests/ref/bpe/bench_peer.js FILE OUT
'use strict';
const fs = require('fs');
const [file, out] = process.argv.slice(2);
if (!file || !out) {
  console.error('usage: node bench_peer.js FILE OUT');
  process.exit(2);
}
let t = process.hrtime.bigint();
const ref = require('gpt-3-encoder');
const load = Number(process.hrtime.bigint() - t) / 1e9;
const data = fs.readFileSync(file);
const lines = data.toString('utf8').split('\n');
if (lines.length && lines[lines.length - 1] === '') lines.pop(); // a final '\n' ends the last line
t = process.hrtime.bigint();
const ids = lines.map((l) => ref.encode(l));
const secs = Number(process.hrtime.bigint() - t) / 1e9;
fs.writeFileSync(out, ids.map((x) => x.join(' ')).join('\n') + (ids.length ? '\n' : ''));
const tokens = ids.reduce((n, x) => n + x.length, 0);
console.error(`reference: load ${load.toFixed(3)} s; encode ${(data.length / 1e6).toFixed(2)} MB in ` +
  `${secs.toFixed(3)} s (${(data.length / 1e6 / secs).toFixed(1)} MB/s), ${tokens} tokens`);
