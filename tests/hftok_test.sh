#!/usr/bin/env bash
# `tscope tokenize --tokenizer DIR` for the tokenizers of today's models, on
# the plain and the sanitized binary: each fixture tokenizer of
# tests/ref/tokenizers/ gives its reference's ids for all of text.txt (see the
# README there: @huggingface/tokenizers for tokenizer.json and WordPiece,
# python3-sentencepiece for tokenizer.model), with --special too, --decode
# gives the text back (byte-level BPE and SentencePiece), --show labels; then
# hostile tokenizer files, each refused with exit 2 and one line on stderr
# naming the problem, nothing on stdout, no sanitizer report. python3
# (standard library only) writes the hostile files.
. "$(dirname "$0")/lib.sh"

R=tests/ref/tokenizers
bins=("$bin")
asan=${TSCOPE_ASAN:-build-asan/tscope}
[ -x "$asan" ] && bins+=("$(abs "$asan")")
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# refuses BIN NAME MESSAGE-PART DIR: exit 2, nothing on stdout, one line naming the problem
refuses() {
    local b=$1 name=$2 part=$3 dir=$4
    echo "hello world" | "$b" tokenize --tokenizer "$dir" >"$tmp/out" 2>"$tmp/err"
    local rc=$? why=
    if [ $rc != 2 ]; then why="exit $rc, want 2"
    elif grep -qE 'Sanitizer|runtime error:' "$tmp/err"; then why="a sanitizer report"
    elif [ "$(grep -c '' "$tmp/err")" != 1 ]; then why="$(grep -c '' "$tmp/err") lines on stderr"
    elif ! grep -qF -- "$part" "$tmp/err"; then why="stderr does not say '$part'"
    elif [ -s "$tmp/out" ]; then why="wrote to stdout"
    fi
    if [ -z "$why" ]; then ok; else bad "$name: $why (stderr: $(head -c 400 "$tmp/err"))"; fi
    [ -n "${HOSTILE_SHOW:-}" ] && [ "$b" = "$bin" ] && printf '%-32s %s\n' "$name" "$(cat "$tmp/err")"
}

for b in "${bins[@]}"; do
    # 1. every fixture tokenizer against its reference: ids, with special tokens, back to text
    for d in gpt2 neox prefix llama3 bert-json bert-txt spm spm-strip; do
        ref=$R/$d
        [ "$d" = bert-txt ] && ref=$R/bert-json
        if "$b" tokenize --tokenizer "$R/$d" "$R/text.txt" >"$tmp/ids" 2>"$tmp/err" && cmp -s "$tmp/ids" "$ref/ids.txt"; then
            ok
        else
            bad "$d: ids differ from $ref/ids.txt ($(head -c 300 "$tmp/err"))"
        fi
        if [ -f "$ref/ids_special.txt" ]; then
            "$b" tokenize --special --tokenizer "$R/$d" "$R/text.txt" >"$tmp/sids" 2>&1
            if cmp -s "$tmp/sids" "$ref/ids_special.txt"; then ok; else bad "$d --special: ids differ from $ref/ids_special.txt"; fi
        fi
        case $d in gpt2 | llama3 | spm)
            "$b" tokenize --decode --tokenizer "$R/$d" "$tmp/ids" >"$tmp/back" 2>&1
            if cmp -s "$tmp/back" "$R/text.txt"; then ok; else bad "$d: --decode does not give text.txt back"; fi ;;
        spm-strip)
            "$b" tokenize --decode --tokenizer "$R/$d" "$tmp/ids" >"$tmp/back" 2>&1
            if cmp -s "$tmp/back" "$R/$d/decoded.txt"; then ok; else bad "$d: --decode is not sentencepiece's decoded.txt"; fi ;;
        esac
    done
done

# 2. --show and --decode read as a user would
show() { echo "$2" | "$bin" tokenize --tokenizer "$R/$1" $3 2>&1; }
want() { if [ "$2" = "$3" ]; then ok; else bad "$1: got '$2', want '$3'"; fi; }
# (the cut vocabularies lack some words: "God" is G od in the first 8000 of Llama 3's)
want "llama3 --show" "$(show llama3 "God's 2024 words" --show)" "G od 's ␣ 202 4 ␣words"
want "llama3 --show --special" "$(show llama3 "Hi<|eot_id|>" "--show --special")" "<|begin_of_text|> H i <|eot_id|>"
want "bert --show" "$(show bert-txt "Héllo, WORLD!" --show)" "hell ##o , world !"
want "bert --show --special" "$(show bert-txt "amen" "--show --special")" "[CLS] amen [SEP]"
want "bert --decode" "$(echo "2 612 607 17 3" | "$bin" tokenize --tokenizer "$R/bert-txt" --decode 2>&1)" "[CLS] in the. [SEP]"
want "spm --show" "$(show spm "In ☃" --show)" "␣In ␣ \\xE2 \\x98 \\x83"
want "spm --show --special" "$(show spm "Amen" "--show --special")" "<s> ␣Am en"
want "spm --decode" "$(echo "1 1044 262" | "$bin" tokenize --tokenizer "$R/spm" --decode 2>&1)" "In the"
# six spaces are an added token, matched before the pre-tokenizer sees them
want "neox added spaces" "$(show neox "a      b" --show)" "a ␣␣␣␣␣␣ b"

# 3. hostile tokenizer files
h=$tmp/h
mkdir -p "$h"
python3 - "$h" "$R" <<'PY'
import json, os, struct, sys
h, R = sys.argv[1], sys.argv[2]
base = json.load(open(os.path.join(R, "gpt2", "tokenizer.json"), encoding="utf-8"))
def put(name, obj=None, raw=None, fname="tokenizer.json"):
    os.makedirs(os.path.join(h, name), exist_ok=True)
    with open(os.path.join(h, name, fname), "wb") as f:
        f.write(raw if raw is not None else json.dumps(obj).encode())
def variant(name, **change):
    d = json.loads(json.dumps(base))
    for k, v in change.items():
        if k.startswith("model_"): d["model"][k[6:]] = v
        else: d[k] = v
    put(name, d)
variant("wordlevel", model={"type": "WordLevel", "vocab": {"a": 0, "[UNK]": 1}, "unk_token": "[UNK]"})
variant("unigram", model={"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0.0], ["a", -1.0]]})
variant("metaspace", pre_tokenizer={"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always"})
variant("split_pattern", pre_tokenizer={"type": "Split", "pattern": {"Regex": "\\w+|[^\\w\\s]+"}, "behavior": "Isolated", "invert": False})
variant("split_merged", pre_tokenizer={"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "MergedWithPrevious", "invert": False}]})
variant("nfkc", normalizer={"type": "NFKC"})
variant("post", post_processor={"type": "Strange"})
variant("decoder", decoder={"type": "Metaspace"})
variant("dropout", model_dropout=0.1)
variant("merge_missing", model_merges=["\u0120 zzzqqq"] + base["model"]["merges"])
variant("merge_bad", model_merges=[["a"]])
variant("hole", added_tokens=[{"id": 5005, "content": "<x>", "special": True}])
variant("hole2", added_tokens=[{"id": 10, "content": "<x>", "special": True}, {"id": 5001, "content": "<y>", "special": True}])
variant("not_bytes", model_vocab=dict(base["model"]["vocab"], **{"\u2581the": 4999}))
variant("no_byte", model_vocab={("!\u00e9zq" if k == "!" else k): v for k, v in base["model"]["vocab"].items()})
variant("single_word", added_tokens=[{"id": 5000, "content": "<x>", "single_word": True}])
variant("template", post_processor={"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<nope>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {}})
put("notjson", raw=b'{"model": {"type": "BPE", ')
put("twice", raw=b'{"model": {"type": "BPE"}, "model": {"type": "BPE"}}')
put("deep", raw=b'{"model": ' + b'[' * 5000 + b']' * 5000 + b'}')
put("array", raw=b'[1, 2, 3]')

def varint(n):
    out = b""
    while True:
        b = n & 0x7F; n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n: return out
def field(num, wire, payload):
    if wire == 2: return varint(num << 3 | 2) + varint(len(payload)) + payload
    return varint(num << 3 | wire) + payload
def piece(s, score, typ):
    return field(1, 2, field(1, 2, s.encode()) + field(2, 5, struct.pack("<f", score)) + field(3, 0, varint(typ)))
pieces = piece("<unk>", 0, 2) + piece("<s>", 0, 3) + piece("\u2581a", -1, 1) + piece("a", -2, 1) + piece("\u2581", -3, 1)
trainer = lambda t, extra=b"": field(2, 2, field(3, 0, varint(t)) + extra)
put("spm_unigram", raw=pieces + trainer(1), fname="tokenizer.model")
put("spm_word", raw=pieces + trainer(3), fname="tokenizer.model")
put("spm_nfkc", raw=pieces + trainer(2) + field(3, 2, field(1, 2, b"nmt_nfkc") + field(2, 2, b"\x01\x02\x03")), fname="tokenizer.model")
put("spm_nobytes", raw=pieces + trainer(2, field(35, 0, varint(1))), fname="tokenizer.model")
put("spm_nounk", raw=piece("a", -2, 1) + trainer(2), fname="tokenizer.model")
put("spm_dup", raw=pieces + piece("a", -5, 1) + trainer(2), fname="tokenizer.model")
put("spm_badtype", raw=piece("a", -2, 9) + trainer(2), fname="tokenizer.model")
put("spm_badbyte", raw=pieces + piece("<0xZZ>", 0, 6) + trainer(2), fname="tokenizer.model")
put("spm_huge_len", raw=varint(1 << 3 | 2) + varint(1 << 40) + b"abc", fname="tokenizer.model")
put("spm_long_varint", raw=b"\x08" + b"\xff" * 12, fname="tokenizer.model")
put("spm_group", raw=varint(1 << 3 | 3) + b"\x00", fname="tokenizer.model")
put("spm_empty", raw=b"", fname="tokenizer.model")
put("spm_garbage", raw=bytes(range(256)) * 4, fname="tokenizer.model")
put("spm_notutf8", raw=field(1, 2, field(1, 2, b"\xff\xfe")) + trainer(2), fname="tokenizer.model")
model = open(os.path.join(R, "spm", "tokenizer.model"), "rb").read()
put("spm_truncated", raw=model[: len(model) // 2 + 1], fname="tokenizer.model")
put("vocab_dup", raw=b"[PAD]\n[UNK]\nthe\n##s\nthe\n", fname="vocab.txt")
put("vocab_nounk", raw=b"[PAD]\n[CLS]\nthe\n", fname="vocab.txt")
put("vocab_empty_line", raw=b"[UNK]\n\nthe\n", fname="vocab.txt")
put("vocab_empty", raw=b"", fname="vocab.txt")
put("vocab_nul", raw=b"[UNK]\nt\x00he\n", fname="vocab.txt")
os.makedirs(os.path.join(h, "empty"), exist_ok=True)
PY
for b in "${bins[@]}"; do
    refuses "$b" "WordLevel model" 'model type "WordLevel" is not supported' "$h/wordlevel"
    refuses "$b" "Unigram model" 'model type "Unigram" is not supported' "$h/unigram"
    refuses "$b" "Metaspace pre-tokenizer" 'pre-tokenizer "Metaspace" is not supported' "$h/metaspace"
    # every error line is made inert, so the pattern's backslashes come out doubled
    refuses "$b" "unknown Split pattern" 'the Split pattern "\\w+|[^\\w\\s]+" is not one tscope knows' "$h/split_pattern"
    refuses "$b" "Split MergedWithPrevious" 'Split behavior "MergedWithPrevious" is not supported' "$h/split_merged"
    refuses "$b" "NFKC normalizer" 'normalizer "NFKC" is not supported' "$h/nfkc"
    refuses "$b" "unknown post-processor" 'post-processor "Strange" is not supported' "$h/post"
    refuses "$b" "Metaspace decoder" 'decoder "Metaspace" is not supported' "$h/decoder"
    refuses "$b" "BPE dropout" 'BPE dropout 0.1 is not supported' "$h/dropout"
    refuses "$b" "merge of an unknown token" 'merge 1 joins "Ġ" and "zzzqqq", but the second is not in the vocabulary' "$h/merge_missing"
    refuses "$b" "malformed merge" 'merge 1 is ["a"], not "a b"' "$h/merge_bad"
    refuses "$b" "ids past the tokens" 'ids go up to 5005, but only 5001 tokens are given' "$h/hole"
    refuses "$b" "an id with no token" 'no token has id 5000 (ids must run 0..5001)' "$h/hole2"
    refuses "$b" "not byte-level" 'has a character that stands for no byte' "$h/not_bytes"
    refuses "$b" "a byte missing" 'no token for the byte 0x21' "$h/no_byte"
    refuses "$b" "single_word" '"single_word": true is not supported' "$h/single_word"
    refuses "$b" "template's unknown token" 'special token "<nope>" has no "ids"' "$h/template"
    refuses "$b" "not JSON" 'not valid JSON' "$h/notjson"
    refuses "$b" "a key twice" '"model" appears twice' "$h/twice"
    refuses "$b" "deep nesting" 'not valid JSON' "$h/deep"
    refuses "$b" "an array" 'tokenizer.json' "$h/array"
    refuses "$b" "SentencePiece Unigram" 'a SentencePiece Unigram model is not supported' "$h/spm_unigram"
    refuses "$b" "SentencePiece Word" 'a SentencePiece Word model is not supported' "$h/spm_word"
    refuses "$b" "SentencePiece nmt_nfkc" 'normalizer "nmt_nfkc" (a precompiled character map) is not supported' "$h/spm_nfkc"
    refuses "$b" "byte_fallback, no bytes" 'byte_fallback is on but there is no piece <0x00>' "$h/spm_nobytes"
    refuses "$b" "no <unk>" 'no unknown piece' "$h/spm_nounk"
    refuses "$b" "a piece twice" 'piece 5 "a" is there twice' "$h/spm_dup"
    refuses "$b" "a piece's type" 'a piece has an unknown type' "$h/spm_badtype"
    refuses "$b" "a bad byte piece" 'not <0xXX>' "$h/spm_badbyte"
    refuses "$b" "a length past the end" 'malformed protobuf' "$h/spm_huge_len"
    refuses "$b" "a varint too long" 'malformed protobuf' "$h/spm_long_varint"
    refuses "$b" "a protobuf group" 'malformed protobuf' "$h/spm_group"
    refuses "$b" "an empty model" 'no pieces' "$h/spm_empty"
    refuses "$b" "garbage protobuf" 'tokenizer.model: ' "$h/spm_garbage"
    refuses "$b" "a piece not UTF-8" 'a piece is not UTF-8 text' "$h/spm_notutf8"
    refuses "$b" "truncated protobuf" 'malformed protobuf' "$h/spm_truncated"
    refuses "$b" "vocab.txt duplicate" 'line 5: "the" is there twice' "$h/vocab_dup"
    refuses "$b" "vocab.txt without [UNK]" 'no [UNK] line' "$h/vocab_nounk"
    refuses "$b" "vocab.txt empty line" 'line 2 is empty' "$h/vocab_empty_line"
    refuses "$b" "vocab.txt empty" 'empty; a vocabulary has a token a line' "$h/vocab_empty"
    refuses "$b" "vocab.txt NUL" 'holds a NUL byte' "$h/vocab_nul"
    refuses "$b" "an empty directory" 'no tokenizer there (tokenizer.json, tokenizer.model, vocab.txt' "$h/empty"
    refuses "$b" "no such directory" 'no such directory' "$h/nowhere"
done
finish
