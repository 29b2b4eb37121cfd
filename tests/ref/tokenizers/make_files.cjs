// The tokenizer files of tests/ref/tokenizers/, built from real vocabularies
// and cut small (the reference, make_ids.cjs, runs on the same cut files, so
// it stays a valid reference):
//   gpt2/       tokenizer.json as Hugging Face publishes GPT-2's, from
//               assets/gpt2 (encoder.json, vocab.bpe) cut to the first 5000 ids
//   neox/       the GPT-NeoX (Pythia) layout: NFC normalizer, ByteLevel, added
//               tokens <|endoftext|> <|padding|> and runs of 2..24 spaces
//               (normalized, not special), over the same cut vocabulary
//   prefix/     ByteLevel with add_prefix_space, merges as [a, b] pairs
//   llama3/     Llama 3's layout: Split with its pattern, ByteLevel without
//               regex, ignore_merges, merges as pairs, a BOS template; the
//               vocabulary and merges of llama3-tokenizer-js (MIT) cut to the
//               first 8000 ids
//   bert-txt/   vocab.txt of a WordPiece vocabulary built here from the KJV
//   bert-json/  the same as a BERT tokenizer.json (BertNormalizer, ...)
// Run from the repository root (node, and for llama3 the npm package):
//   NODE_PATH=/tmp/hfref/node_modules node tests/ref/tokenizers/make_files.cjs /tmp/kjv.txt
const fs = require("fs");
const path = require("path");
const here = path.dirname(__filename);
const kjvPath = process.argv[2];

function write(dir, name, obj) {
    fs.mkdirSync(path.join(here, dir), { recursive: true });
    fs.writeFileSync(path.join(here, dir, name), typeof obj === "string" ? obj : JSON.stringify(obj) + "\n");
}

// ---- GPT-2, cut ----
const N2 = 5000;
const enc = JSON.parse(fs.readFileSync("assets/gpt2/encoder.json", "utf8"));
const vocab2 = {};
for (const [t, id] of Object.entries(enc)) if (id < N2) vocab2[t] = id;
const merges2 = [];
for (const line of fs.readFileSync("assets/gpt2/vocab.bpe", "utf8").split("\n").slice(1)) {
    if (!line) continue;
    const [a, b] = line.split(" ");
    if (Object.hasOwn(vocab2, a) && Object.hasOwn(vocab2, b) && Object.hasOwn(vocab2, a + b)) merges2.push(line);
}
const byteLevel = (prefix) => ({ type: "ByteLevel", add_prefix_space: prefix, trim_offsets: true, use_regex: true });
const bpeModel = (vocab, merges, extra) => Object.assign({ type: "BPE", dropout: null, unk_token: null,
    continuing_subword_prefix: "", end_of_word_suffix: "", fuse_unk: false, byte_fallback: false,
    ignore_merges: false, vocab, merges }, extra || {});
const added = (id, content, special, normalized) => ({ id, content, single_word: false, lstrip: false,
    rstrip: false, normalized, special });

write("gpt2", "tokenizer.json", {
    version: "1.0", truncation: null, padding: null,
    added_tokens: [added(N2, "<|endoftext|>", true, false)],
    normalizer: null, pre_tokenizer: byteLevel(false), post_processor: byteLevel(true),
    decoder: byteLevel(true), model: bpeModel(vocab2, merges2),
});

const neoxAdded = [added(N2, "<|endoftext|>", true, false), added(N2 + 1, "<|padding|>", true, false)];
for (let n = 24; n >= 2; n--) neoxAdded.push(added(N2 + 2 + 24 - n, " ".repeat(n), false, true));
write("neox", "tokenizer.json", {
    version: "1.0", truncation: null, padding: null, added_tokens: neoxAdded,
    normalizer: { type: "NFC" }, pre_tokenizer: byteLevel(false),
    post_processor: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true },
    decoder: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true },
    model: bpeModel(vocab2, merges2),
});

write("prefix", "tokenizer.json", {
    version: "1.0", truncation: null, padding: null,
    added_tokens: [added(N2, "<|endoftext|>", true, false)],
    normalizer: null, pre_tokenizer: byteLevel(true), post_processor: byteLevel(true),
    decoder: byteLevel(true), model: bpeModel(vocab2, merges2.map((m) => m.split(" "))),
});

// ---- Llama 3, cut ----
const { llama3Tokenizer: l3 } = require("llama3-tokenizer-js/bundle/commonjs-llama3-tokenizer-with-baked-data.cjs");
const N3 = 8000;
const vocab3 = {};
for (let id = 0; id < N3; id++) vocab3[l3.vocabById[id]] = id;
const merges3 = [...l3.merges.entries()].sort((x, y) => x[1] - y[1]).map(([k]) => {
    const i = k.indexOf(" ", k[0] === " " ? 1 : 0); // tokens hold no space: byte-level
    return [k.slice(0, i), k.slice(i + 1)];
}).filter(([a, b]) => Object.hasOwn(vocab3, a) && Object.hasOwn(vocab3, b) && Object.hasOwn(vocab3, a + b)); // not `in`: "constructor" is in every object
const specials3 = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"];
const pattern3 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
write("llama3", "tokenizer.json", {
    version: "1.0", truncation: null, padding: null,
    added_tokens: specials3.map((c, i) => added(N3 + i, c, true, false)),
    normalizer: null,
    pre_tokenizer: { type: "Sequence", pretokenizers: [
        { type: "Split", pattern: { Regex: pattern3 }, behavior: "Isolated", invert: false },
        { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false }] },
    post_processor: { type: "Sequence", processors: [
        { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
        { type: "TemplateProcessing",
          single: [{ SpecialToken: { id: "<|begin_of_text|>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
          pair: [{ SpecialToken: { id: "<|begin_of_text|>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } },
                 { SpecialToken: { id: "<|begin_of_text|>", type_id: 1 } }, { Sequence: { id: "B", type_id: 1 } }],
          special_tokens: { "<|begin_of_text|>": { id: "<|begin_of_text|>", ids: [N3], tokens: ["<|begin_of_text|>"] } } }] },
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: bpeModel(vocab3, merges3, { ignore_merges: true }),
});

// ---- a WordPiece vocabulary from the KJV and the test lines ----
// [PAD] [UNK] [CLS] [SEP] [MASK] as in bert-base-uncased, then every character
// seen (lower-cased, accents stripped) alone and as ##c, the 1500 most frequent
// words, and the 600 most frequent word endings of 2 to 5 characters as ##end.
const special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];
const norm = (s) => s.toLowerCase().normalize("NFD").replace(/\p{Mn}/gu, "");
const kjv = fs.readFileSync(kjvPath, "utf8").split("\n").map((l) => l.slice(l.indexOf(" ") + 1)).join("\n");
const lines = fs.readFileSync(path.join(here, "text.txt"), "utf8");
const words = norm(kjv).match(/[\p{L}\p{N}]+/gu);
const chars = new Set([...norm(kjv + lines)].filter((c) => /[\p{L}\p{N}\p{P}\p{S}]/u.test(c)));
chars.delete("\u3131"); // one character left out on purpose: words with it are [UNK]
const count = (xs) => { const m = new Map(); for (const x of xs) m.set(x, (m.get(x) || 0) + 1); return m; };
const top = (m, n) => [...m.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, n).map((e) => e[0]);
const ends = [];
for (const w of words) for (let k = 2; k <= 5 && k < w.length; k++) ends.push(w.slice(w.length - k));
const wp = [...special];
const seen = new Set(wp);
const add = (t) => { if (!seen.has(t)) { seen.add(t); wp.push(t); } };
for (const c of [...chars].sort()) add(c);
for (const c of [...chars].sort()) add("##" + c);
for (const w of top(count(words), 1500)) add(w);
for (const e of top(count(ends), 600)) add("##" + e);
write("bert-txt", "vocab.txt", wp.join("\n") + "\n");
const wpVocab = {};
wp.forEach((t, i) => (wpVocab[t] = i));
write("bert-json", "tokenizer.json", {
    version: "1.0", truncation: null, padding: null,
    added_tokens: special.map((c, i) => added(i, c, true, false)),
    normalizer: { type: "BertNormalizer", clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true },
    pre_tokenizer: { type: "BertPreTokenizer" },
    post_processor: { type: "TemplateProcessing",
        single: [{ SpecialToken: { id: "[CLS]", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }, { SpecialToken: { id: "[SEP]", type_id: 0 } }],
        pair: [{ SpecialToken: { id: "[CLS]", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }, { SpecialToken: { id: "[SEP]", type_id: 0 } },
               { Sequence: { id: "B", type_id: 1 } }, { SpecialToken: { id: "[SEP]", type_id: 1 } }],
        special_tokens: { "[CLS]": { id: "[CLS]", ids: [2], tokens: ["[CLS]"] }, "[SEP]": { id: "[SEP]", ids: [3], tokens: ["[SEP]"] } } },
    decoder: { type: "WordPiece", prefix: "##", cleanup: true },
    model: { type: "WordPiece", unk_token: "[UNK]", continuing_subword_prefix: "##", max_input_chars_per_word: 100, vocab: wpVocab },
});
console.error(`gpt2: ${Object.keys(vocab2).length} tokens, ${merges2.length} merges; llama3: ${N3} tokens, ${merges3.length} merges; wordpiece: ${wp.length} tokens`);
