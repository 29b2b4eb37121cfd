// Reference ids of text.txt for every tokenizer.json of tests/ref/tokenizers/,
// from Hugging Face's own JavaScript implementation, @huggingface/tokenizers
// (npm, tested with 0.2.0): one line of space-separated ids per line of text,
// without special tokens (ids.txt) and, where a post-processor adds some, with
// them (ids_special.txt: encode's default, add_special_tokens = true).
//   NODE_PATH=/tmp/hfref/node_modules node tests/ref/tokenizers/make_ids.cjs
const fs = require("fs");
const path = require("path");
const { Tokenizer } = require("@huggingface/tokenizers");
const here = path.dirname(__filename);
const lines = fs.readFileSync(path.join(here, "text.txt"), "utf8").split("\n");
lines.pop(); // the file ends with '\n'
for (const dir of ["gpt2", "neox", "prefix", "llama3", "bert-json"]) {
    const json = JSON.parse(fs.readFileSync(path.join(here, dir, "tokenizer.json"), "utf8"));
    const tok = new Tokenizer(json, {});
    const plain = lines.map((l) => tok.encode(l, { add_special_tokens: false }).ids.join(" "));
    fs.writeFileSync(path.join(here, dir, "ids.txt"), plain.join("\n") + "\n");
    const special = lines.map((l) => tok.encode(l).ids.join(" "));
    if (special.some((s, i) => s !== plain[i]))
        fs.writeFileSync(path.join(here, dir, "ids_special.txt"), special.join("\n") + "\n");
    // every line's ids decode back to the line (the byte-level ones)
    let back = 0;
    lines.forEach((l, i) => { if (plain[i] && tok.decode(plain[i].split(" ").map(Number), { clean_up_tokenization_spaces: false }) === l) back++; });
    console.error(`${dir}: ${lines.length} lines, ${plain.reduce((n, s) => n + (s ? s.split(" ").length : 0), 0)} ids, ${back} decode back`);
}
