#!/usr/bin/env python3
"""Write the hostile inputs of tests/hostile_test.sh and print its cases.

    make_hostile.py OUT BASE_LM BASE_TRACE

OUT: an empty directory for the files. BASE_LM: a small checkpoint of
`tscope train --task lm` (with BASE_LM.state beside it); BASE_TRACE: a
trace of `tscope run --preset tiny`. The GPT-2 fixture is the committed
tests/ref/gpt/small. Each damage is one class of mistake a file can carry
(a header length past the end, a key given twice, a number that is not a
whole one, ...), applied to a good file, so that the good file's reader
meets it where it would meet it in the wild.

Each case is one line on stdout, tab-separated:
    NAME  WANT  ARG...
WANT is a piece of the one line the refusal must print on stderr. In the
arguments @H stands for OUT and @W for the case's own empty directory
(where an output would land: it must stay empty). Only the standard
library: the test needs no numpy or torch.
"""
import json
import os
import shutil
import struct
import sys

out, base_lm, base_trace = sys.argv[1], sys.argv[2], sys.argv[3]
gpt = os.path.abspath("tests/ref/gpt/small")
cases = []


def case(name, want, *args):
    cases.append((name, want) + tuple(str(a) for a in args))


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def read(path):
    with open(path, "rb") as f:
        return f.read()


# ---- safetensors ------------------------------------------------------------------

def st_split(b):
    n = struct.unpack("<Q", b[:8])[0]
    return b[8:8 + n], b[8 + n:]


def st_join(header, data):
    if isinstance(header, str):
        header = header.encode()
    return struct.pack("<Q", len(header)) + header + data


def pairs_json(pairs):
    """An object written from (key, value) pairs: keys may repeat."""
    return "{" + ",".join(json.dumps(k) + ":" + (v if isinstance(v, str) and v[:1] in "{[" and k != "" else json.dumps(v))
                          for k, v in pairs) + "}"


gpt_st = read(f"{gpt}/model.safetensors")
gpt_header, gpt_data = st_split(gpt_st)
gpt_h = json.loads(gpt_header)
names = [k for k in gpt_h if k != "__metadata__"]
first = names[0]  # wte.weight


def with_header(h, data=gpt_data):
    return st_join(json.dumps(h), data)


def edited(fn):
    h = json.loads(gpt_header)
    fn(h)
    return with_header(h)


def raw_entry(name, body):
    """The header with one entry's JSON text replaced by body (for repeats)."""
    parts = []
    for k, v in gpt_h.items():
        parts.append(json.dumps(k) + ":" + (body if k == name else json.dumps(v)))
    return st_join("{" + ",".join(parts) + "}", gpt_data)


e = gpt_h[first]
lo, hi = e["data_offsets"]
safetensors_damage = [
    ("empty file", b"", "too short"),
    ("7 bytes", b"\x01\x00\x00\x00\x00\x00\x00", "too short"),
    ("header length 2^63", struct.pack("<Q", 1 << 63) + gpt_st[8:], "larger than the rest of the file"),
    ("header length 0", struct.pack("<Q", 0) + gpt_st[8:], "does not start with '{'"),
    ("header length past the end by 1", struct.pack("<Q", len(gpt_st) - 7) + gpt_st[8:], "larger than the rest"),
    ("truncated in the data", gpt_st[:-100], "run past the end"),
    ("truncated in the header", gpt_st[:8 + len(gpt_header) // 2], "larger than the rest"),
    ("bad JSON", st_join(gpt_header[:gpt_header.rfind(b"}")] + b"," + gpt_header[gpt_header.rfind(b"}") + 1:], gpt_data), "malformed"),
    ("header is an array", st_join("[]", gpt_data), "does not start with '{'"),
    ("header is an object of nothing but garbage", st_join("{x}", gpt_data), "malformed"),
    ("tensor named twice", raw_entry(first, json.dumps(e) + "," + json.dumps(first) + ":" + json.dumps(e)), "appears twice"),
    ("key twice in an entry", raw_entry(first, '{"dtype":"F32","dtype":"F16","shape":%s,"data_offsets":%s}'
                                        % (json.dumps(e["shape"]), json.dumps(e["data_offsets"]))), "appears twice"),
    ("offsets past the end", edited(lambda h: h[names[-1]].update(data_offsets=[h[names[-1]]["data_offsets"][0], 10**9])),
     "run past the end"),
    ("offsets overlap", edited(lambda h: h[names[1]].update(
        data_offsets=[h[names[1]]["data_offsets"][0] - 4, h[names[1]]["data_offsets"][1] - 4])), "overlaps"),
    ("a gap between tensors", edited(lambda h: h[first].update(data_offsets=[0, hi - 4], shape=[e["shape"][0] * e["shape"][1] - 1])),
     "belong to no tensor"),
    ("bytes after the last tensor", with_header(gpt_h, gpt_data + b"\0" * 16), "belong to no tensor"),
    ("unknown dtype", edited(lambda h: h[first].update(dtype="F99")), "unknown dtype"),
    ("dtype a number", edited(lambda h: h[first].update(dtype=5)), "dtype"),
    ("dtype of another size", edited(lambda h: h[first].update(dtype="F16")), "needs"),
    ("shape overflows", edited(lambda h: h[first].update(shape=[2**40, 2**40])), "too large"),
    ("shape negative", edited(lambda h: h[first].update(shape=[-1, 32])), "shape"),
    ("shape fractional", edited(lambda h: h[first].update(shape=[258.5, 32])), "shape"),
    ("shape a string", edited(lambda h: h[first].update(shape="258,32")), "shape"),
    ("three data_offsets", edited(lambda h: h[first].update(data_offsets=[lo, hi, hi])), "data_offsets"),
    ("fractional data_offsets", edited(lambda h: h[first].update(data_offsets=[lo, hi + 0.5])), "data_offsets"),
    ("negative data_offsets", edited(lambda h: h[first].update(data_offsets=[-4, hi])), "data_offsets"),
    ("offsets end before they begin", edited(lambda h: h[first].update(data_offsets=[hi, lo])), "end before they begin"),
    ("metadata value a number", edited(lambda h: h["__metadata__"].update(format=3)), "not a string"),
    ("metadata an array", edited(lambda h: h.update(__metadata__=["pt"])), "__metadata__"),
    ("an entry that is a number", edited(lambda h: h.update(extra=7)), "not an object"),
    ("an empty tensor name", edited(lambda h: h.update({"": {"dtype": "F32", "shape": [0], "data_offsets": [len(gpt_data), len(gpt_data)]}})),
     "empty name"),
    ("bytes after the JSON in the header", st_join(gpt_header + b"  }", gpt_data), "after the JSON header"),
    ("nested past cJSON's depth", st_join('{"a":' + "[" * 2000 + "]" * 2000 + "}", b""), "malformed"),
    ("random bytes", bytes((i * 97 + 13) % 256 for i in range(1024)), "larger than the rest"),
    ("a NUL inside the header", st_join(gpt_header[:40] + b"\0" + gpt_header[41:], gpt_data), "a NUL byte at byte 40"),
]

# the GPT-2 folder, and the same file named directly, and through generate
for i, (name, data, want) in enumerate(safetensors_damage):
    d = f"{out}/st{i:02d}"
    os.makedirs(d)
    for f in ("config.json", "encoder.json", "vocab.bpe"):
        shutil.copy(f"{gpt}/{f}", d)
    write(f"{d}/model.safetensors", data)
    case(f"GPT-2 folder, model.safetensors: {name}", want, "run", "--load", d, "--text", "Hello",
         "--trace", "@W/t.tstrace")
    case(f"generate --load folder: {name}", want, "generate", "--load", d, "-n", "2")
    case(f"run --load file: {name}", want, "run", "--load", f"{d}/model.safetensors", "--text", "Hello",
         "--trace", "@W/t.tstrace")

# ---- config.json -------------------------------------------------------------------
config_text = read(f"{gpt}/config.json").decode()
config = json.loads(config_text)


def cfg_with(**kw):
    c = dict(config)
    c.update(kw)
    return json.dumps(c)


def cfg_without(key):
    c = dict(config)
    del c[key]
    return json.dumps(c)


config_damage = [
    ("n_head fractional", cfg_with(n_head=4.5), '"n_head" is 4.5, not a whole number'),
    ("n_head a string", cfg_with(n_head="4"), '"n_head" is "4", not a whole number'),
    ("n_head negative", cfg_with(n_head=-4), '"n_head" is -4, outside'),
    ("n_head zero", cfg_with(n_head=0), '"n_head" is 0, outside'),
    ("n_head null", cfg_with(n_head=None), '"n_head" is null'),
    ("n_head true", cfg_with(n_head=True), '"n_head" is true'),
    ("n_head an array", cfg_with(n_head=[4]), '"n_head" is [4]'),
    ("n_head 1e300", cfg_with(n_head=1e300), '"n_head" is 1e+300, outside'),
    ("n_head 3 (does not divide 32)", cfg_with(n_head=3), '"n_head": 3 does not divide the width 32'),
    ("no n_head", cfg_without("n_head"), 'no "n_head"'),
    ("n_head twice", config_text.replace('"n_head": 4', '"n_head": 4, "n_head": 2'), '"n_head" appears twice'),
    ("a key twice deeper in", cfg_with(task_specific_params={"x": {}})[:-1].replace('"x": {}', '"x": {"a": 1, "a": 2}') + "}",
     '"a" appears twice'),
    ("layer_norm_epsilon a string", cfg_with(layer_norm_epsilon="0.5"), '"layer_norm_epsilon" is "0.5", not a number'),
    ("layer_norm_epsilon 0", cfg_with(layer_norm_epsilon=0), '"layer_norm_epsilon" is 0'),
    ("layer_norm_epsilon negative", cfg_with(layer_norm_epsilon=-1e-5), '"layer_norm_epsilon" is -1e-05'),
    ("layer_norm_epsilon 2", cfg_with(layer_norm_epsilon=2), '"layer_norm_epsilon" is 2'),
    ("layer_norm_epsilon null", cfg_with(layer_norm_epsilon=None), '"layer_norm_epsilon" is null'),
    ("activation_function a number", cfg_with(activation_function=5), '"activation_function" is 5, not a string'),
    ("activation_function unknown", cfg_with(activation_function="swish"), '"activation_function" is "swish"'),
    ("activation_function null", cfg_with(activation_function=None), '"activation_function" is null'),
    ("n_layer fractional", cfg_with(n_layer=1.5), '"n_layer" is 1.5, not a whole number'),
    ("n_layer disagrees", cfg_with(n_layer=3), '"n_layer": 3 but'),
    ("n_embd a string", cfg_with(n_embd="32"), '"n_embd" is "32"'),
    ("vocab_size fractional", cfg_with(vocab_size=258.5), '"vocab_size" is 258.5'),
    ("n_positions negative", cfg_with(n_positions=-16), '"n_positions" is -16'),
    ("n_inner disagrees", cfg_with(n_inner=64), '"n_inner": 64 but'),
    ("n_inner a string", cfg_with(n_inner="128"), '"n_inner" is "128"'),
    ("not JSON", "n_head = 4\n", "not valid JSON"),
    ("empty", "", "not valid JSON"),
    ("an array", "[4]", "a JSON object {...} was expected, not [4]"),
    ("a string", '"gpt2"', "a JSON object {...} was expected"),
    ("garbage after the object", config_text + " x", "more after the JSON value"),
    ("a NUL inside", config_text[:20] + "\0" + config_text[21:], "a NUL byte at byte 20"),
    ("2 MB", " " * (2 << 20) + config_text, "a config.json is a few hundred"),
    ("cut in half", config_text[: len(config_text) // 2], "not valid JSON"),
]
for i, (name, text, want) in enumerate(config_damage):
    d = f"{out}/cfg{i:02d}"
    os.makedirs(d)
    for f in ("model.safetensors", "encoder.json", "vocab.bpe"):
        shutil.copy(f"{gpt}/{f}", d)
    write(f"{d}/config.json", text)
    case(f"config.json: {name}", want, "run", "--load", d, "--text", "Hello", "--trace", "@W/t.tstrace")
# config.json that is a folder; a folder with no weights
d = f"{out}/cfgdir"
os.makedirs(f"{d}/config.json")
for f in ("model.safetensors", "encoder.json", "vocab.bpe"):
    shutil.copy(f"{gpt}/{f}", d)
case("config.json is a folder", "config.json is a folder, not a file", "run", "--load", d, "--text", "Hello")
os.makedirs(f"{out}/noweights")
shutil.copy(f"{gpt}/config.json", f"{out}/noweights")
case("a folder without model.safetensors", "model.safetensors", "run", "--load", f"{out}/noweights", "--text", "Hello")
case("generate on a folder without model.safetensors", "model.safetensors", "generate", "--load", f"{out}/noweights")

# ---- the BPE's files ----------------------------------------------------------------------
enc_text = read(f"{gpt}/encoder.json").decode()
enc = json.loads(enc_text)
first_tok = next(iter(enc))


def enc_with(fn):
    e2 = dict(enc)
    fn(e2)
    return json.dumps(e2)


encoder_damage = [
    ("not JSON", "{", "not valid JSON"),
    ("an array", "[]", "a JSON object {...} was expected"),
    ("a token twice", enc_text.replace(json.dumps(first_tok) + ":", json.dumps(first_tok) + ": 0, " + json.dumps(first_tok) + ":", 1),
     "appears twice"),
    ("an id fractional", enc_with(lambda e2: e2.update({first_tok: 1.5})), "has id 1.5"),
    ("an id a string", enc_with(lambda e2: e2.update({first_tok: "0"})), 'has id "0"'),
    ("an id negative", enc_with(lambda e2: e2.update({first_tok: -1})), "has id -1"),
    ("an id out of range", enc_with(lambda e2: e2.update({first_tok: 100000})), "has id 100000"),
    ("an id given twice", enc_with(lambda e2: e2.update({first_tok: 1})), "given twice"),
    ("too few tokens", json.dumps({"a": 0}), "a byte-level BPE has 256"),
    ("an empty token", enc_with(lambda e2: (e2.pop(first_tok), e2.update({"": 0}))), "is empty"),
    ("a token of no byte", enc_with(lambda e2: (e2.pop(first_tok), e2.update({"\u4e00": 0}))), "stands for no byte"),
    ("empty file", "", "not valid JSON"),
]
for i, (name, text, want) in enumerate(encoder_damage):
    d = f"{out}/enc{i:02d}"
    os.makedirs(d)
    for f in ("vocab.bpe",):
        shutil.copy(f"{gpt}/{f}", d)
    write(f"{d}/encoder.json", text)
    case(f"encoder.json: {name}", want, "tokenize", "--tokenizer", d, f"{out}/hello.txt")
write(f"{out}/hello.txt", "Hello\n")

bpe_text = read(f"{gpt}/vocab.bpe").decode()
bpe_lines = bpe_text.split("\n")
merge_at = next(i for i, l in enumerate(bpe_lines) if l and not l.startswith("#"))
bpe_damage = [
    ("a merge of one token", "\n".join(bpe_lines[:merge_at] + ["Ġ"] + bpe_lines[merge_at + 1:]), "vocab.bpe"),
    ("a merge of a token not in the vocabulary", "\n".join(bpe_lines[:merge_at] + ["Ġ qqqqqq"] + bpe_lines[merge_at + 1:]),
     "vocab.bpe"),
    ("binary", "\xff\xfe\x00\x01" * 10, "vocab.bpe"),
]
for i, (name, text, want) in enumerate(bpe_damage):
    d = f"{out}/bpe{i:02d}"
    os.makedirs(d)
    shutil.copy(f"{gpt}/encoder.json", d)
    write(f"{d}/vocab.bpe", text.encode("latin-1") if name == "binary" else text)
    case(f"vocab.bpe: {name}", want, "tokenize", "--tokenizer", d, f"{out}/hello.txt")
os.makedirs(f"{out}/nobpe")
shutil.copy(f"{gpt}/encoder.json", f"{out}/nobpe")
case("a tokenizer folder without vocab.bpe", "vocab.bpe", "tokenize", "--tokenizer", f"{out}/nobpe", f"{out}/hello.txt")
case("a tokenizer folder that is not there", "nothere", "tokenize", "--tokenizer", f"{out}/nothere", f"{out}/hello.txt")
# the same damage inside a GPT-2 folder: the model's vocabulary
d = f"{out}/gptenc"
os.makedirs(d)
for f in ("model.safetensors", "config.json", "vocab.bpe"):
    shutil.copy(f"{gpt}/{f}", d)
write(f"{d}/encoder.json", encoder_damage[3][1])
case("GPT-2 folder, encoder.json: an id fractional", "has id 1.5", "run", "--load", d, "--text", "Hello")

# ---- --mask-fill: what a hidden score is written as ----------------------------------------
for value in ("5", "0", "nan", "inf", "-1e39", "-1e9x", "-"):  # (an empty word would not survive the tab-separated list)
    case(f"--mask-fill '{value}'", "give -inf or a negative number", "run", "--mask-fill", value, "--trace", "@W/t.tstrace")
case("--mask-fill over seed 003's mask", "both say what a hidden score becomes", "run", "--mask-fill", "-1e9",
     "--variant", "seed003-mask", "--trace", "@W/t.tstrace")
case("--mask-fill with nothing hidden", "this model hides none", "run", "--arch", "encoder", "--mask-fill", "-1e9",
     "--trace", "@W/t.tstrace")
case("--mask-fill on a language model's checkpoint", "--mask-fill", "run", "--load", base_lm, "--text", "the cat",
     "--mask-fill", "-1e9", "--trace", "@W/t.tstrace")

# ---- tscope's own checkpoints: the config and tokenizer in the metadata ------------------
lm_st = read(base_lm)
lm_header, lm_data = st_split(lm_st)
lm_h = json.loads(lm_header)
lm_cfg = json.loads(lm_h["__metadata__"]["config"])
lm_cfg_text = lm_h["__metadata__"]["config"]
lm_tok = json.loads(lm_h["__metadata__"]["tokenizer"])


def lm_with(config=None, tokenizer=None, drop=None):
    h = json.loads(lm_header)
    m = h["__metadata__"]
    if config is not None:
        m["config"] = config
    if tokenizer is not None:
        m["tokenizer"] = tokenizer
    if drop:
        del m[drop]
    return with_header(h, lm_data)


def c_with(**kw):
    c = dict(lm_cfg)
    c.update(kw)
    return json.dumps(c)


def t_with(**kw):
    t = dict(lm_tok)
    t.update(kw)
    return json.dumps(t)


def c_without(key):
    c = dict(lm_cfg)
    del c[key]
    return json.dumps(c)


lm_damage = [
    ("config: heads fractional", lm_with(config=c_with(heads=1.5)), '"heads" is 1.5, not a whole number'),
    ("config: heads a string", lm_with(config=c_with(heads="2")), '"heads" is "2"'),
    ("config: d_model negative", lm_with(config=c_with(d_model=-8)), '"d_model" is -8'),
    ("config: a key twice", lm_with(config=lm_cfg_text.replace('"heads":', '"heads":1,"heads":', 1)), '"heads" appears twice'),
    ("config: not JSON", lm_with(config="{heads: 2}"), "not valid JSON"),
    ("config: an array", lm_with(config="[1]"), "a JSON object {...} was expected"),
    ("config: no layers", lm_with(config=c_without("layers")), 'no "layers"'),
    ("config: an unknown arch", lm_with(config=c_with(arch="rnn")), '"arch" is "rnn"'),
    ("config: arch a number", lm_with(config=c_with(arch=1)), '"arch" is 1, not a string'),
    ("config: seed fractional", lm_with(config=c_with(seed=0.5)), '"seed" is 0.5'),
    ("config: seed negative", lm_with(config=c_with(seed=-1)), '"seed" is -1'),
    ("config: eps a string", lm_with(config=c_with(eps="1e-5")), '"eps" is "1e-5", not a number'),
    ("config: final_norm 1", lm_with(config=c_with(final_norm=1)), '"final_norm" is 1, not true or false'),
    ("config: variant a number", lm_with(config=c_with(variant=5)), '"variant" is 5, not a string'),
    ("config: mask_fill positive", lm_with(config=c_with(mask_fill=5)), '"mask_fill" is 5, not a negative number'),
    ("config: mask_fill 0", lm_with(config=c_with(mask_fill=0)), '"mask_fill" is 0, not a negative number'),
    ("config: mask_fill beyond a float", lm_with(config=c_with(mask_fill=-1e300)), '"mask_fill" is -1e+300'),
    ("config: mask_fill a string", lm_with(config=c_with(mask_fill="-inf")), '"mask_fill" is "-inf", not a number'),
    ("config: variant unknown", lm_with(config=c_with(variant="no-such")), '"variant" is "no-such"'),
    ("config: vocab disagrees with the tokenizer", lm_with(config=c_with(vocab=lm_cfg["vocab"] + 1)), "tokens"),
    ("tokenizer: kind a number", lm_with(tokenizer=t_with(kind=3)), '"kind" is 3, not a string'),
    ("tokenizer: kind unknown", lm_with(tokenizer=t_with(kind="morse")), "unknown tokenizer 'morse'"),
    ("tokenizer: tokens not an array", lm_with(tokenizer=t_with(tokens="abc")), '"tokens"'),
    ("tokenizer: a token a number", lm_with(tokenizer=t_with(tokens=[1] + lm_tok["tokens"][1:])), "token 0"),
    ("tokenizer: a token of two characters", lm_with(tokenizer=t_with(tokens=["ab"] + lm_tok["tokens"][1:])), "not one character"),
    ("tokenizer: a token twice", lm_with(tokenizer=t_with(tokens=[lm_tok["tokens"][1]] + lm_tok["tokens"][1:])), "twice"),
    ("tokenizer: a key twice", lm_with(tokenizer=lm_h["__metadata__"]["tokenizer"].replace('"kind":', '"kind":"word","kind":', 1)),
     '"kind" appears twice'),
    ("tokenizer: bpe vocab fractional", lm_with(tokenizer=json.dumps({"kind": "bpe", "vocab": 50257.5})), '"vocab" is 50257.5'),
    ("tokenizer: not JSON", lm_with(tokenizer="tokens"), "not valid JSON"),
    ("no tokenizer", lm_with(drop="tokenizer"), 'no "tokenizer"'),
]
for i, (name, data, want) in enumerate(lm_damage):
    p = f"{out}/lm{i:02d}.safetensors"
    write(p, data)
    case(f"generate --load, {name}", want, "generate", "--load", p, "-n", "2")
    if i % 2 == 0:  # the same reader under run: every other one is enough
        case(f"run --load, {name}", want, "run", "--load", p, "--text", "the", "--trace", "@W/t.tstrace")

# ---- --resume: the training state beside a checkpoint ------------------------------------
state = read(base_lm + ".state")
s_header, s_data = st_split(state)
s_h = json.loads(s_header)


def state_with(**kw):
    h = json.loads(s_header)
    h["__metadata__"].update(kw)
    return with_header(h, s_data)


resume_damage = [
    ("no state beside it", None, "no training state"),
    ("state not safetensors", b"not a state file", "too short" if False else "header length"),
    ("state step not a number", state_with(step="ten"), '"step" is "ten"'),
    ("state step fractional", state_with(step="1.5"), '"step" is "1.5"'),
    ("state lr negative", state_with(lr="-1"), '"lr" is "-1"'),
    ("state optimizer unknown", state_with(optimizer="sgd"), '"optimizer" is not adam or adamw'),
    ("state of another model", with_header({"__metadata__": s_h["__metadata__"], "optim.m": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                                            "optim.v": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8),
     "the model has"),
    ("state of another format", state_with(format="pt"), "not a training state"),
    ("state key twice", st_join(s_header.replace(b'"step":', b'"step":"1","step":', 1), s_data), '"step" appears twice'),
    ("state run with --patience", state_with(patience="3"), "--patience 3"),
]
for i, (name, data, want) in enumerate(resume_damage):
    p = f"{out}/resume{i:02d}.safetensors"
    shutil.copy(base_lm, p)
    if data is not None:
        write(p + ".state", data)
    case(f"train --resume, {name}", want, "train", "--task", "lm", "--resume", p, "--corpus", f"{out}/corpus-ok.txt",
         "--steps", "5", "--save", "@W/x.safetensors")

# ---- corpora: train --task lm --corpus --------------------------------------------------
corpus_ok = "the cat sat on the mat. " * 200
write(f"{out}/corpus-ok.txt", corpus_ok)
corpora = [
    ("empty", b"", "the text is empty"),
    ("a NUL byte", b"abc\0def" * 100, "NUL byte at offset 3"),
    ("not UTF-8", b"ab\xffcd" * 100, "not UTF-8: byte 0xFF at offset 2"),
    ("an overlong UTF-8 form", b"ab\xc0\xafcd" * 100, "not UTF-8"),
    ("a UTF-16 surrogate", b"ab\xed\xa0\x80cd" * 100, "not UTF-8"),
    ("a lone continuation byte", b"\x80abc" * 100, "not UTF-8: byte 0x80 at offset 0"),
    ("a character cut at the end", ("ab" * 300).encode() + b"\xe2\x82", "not UTF-8"),
    ("one character", b"a", "one distinct character ('a')"),
    ("one character many times", b"a" * 5000, "one distinct character"),
    ("too short for a window", b"abcdefgh", "corpus09.txt: the text (8 tokens) gives"),
]
for i, (name, data, want) in enumerate(corpora):
    p = f"{out}/corpus{i:02d}.txt"
    write(p, data)
    case(f"--corpus {name}", want, "train", "--task", "lm", "--corpus", p, "--seq", "16", "--save", "@W/x.safetensors",
         "--trace", "@W/t.tstrace")
case("--corpus a folder", "is a folder, not a text file", "train", "--task", "lm", "--corpus", out, "--save", "@W/x.safetensors")
case("--corpus not there", "cannot open --corpus", "train", "--task", "lm", "--corpus", f"{out}/none.txt")
ok = f"{out}/corpus-ok.txt"
small = ["--corpus", ok, "--layers", "1", "--d-model", "8", "--heads", "2", "--ffn", "16", "--seq", "16", "--batch", "2",
         "--heldout", "2", "--save", "@W/x.safetensors"]
case("--prompt the corpus cannot spell", '--prompt "Zebra"', "train", "--task", "lm", *small, "--prompt", "Zebra")
case("--probe the corpus cannot spell", '--probe "Q?"', "train", "--task", "lm", *small, "--probe", "Q?", "--trace", "@W/t.tstrace")
case("--save into a folder that is not there", "the folder /nonexistent is not there", "train", "--task", "lm",
     *small[:-2], "--save", "/nonexistent/x.safetensors")
case("--save that is a folder", "is a folder", "train", "--task", "lm", *small[:-2], "--save", out)
case("--prompt with --sample 0", "--sample 0", "train", "--task", "lm", *small, "--prompt", "the", "--sample", "0")
case("--probe without --trace", "--probe chooses what the trace follows", "train", "--task", "lm", *small, "--probe", "the")
case("--patience that can never act", "--patience 5 needs more", "train", "--task", "lm", *small, "--steps", "100",
     "--eval-every", "50", "--patience", "5")
case("--resume with a model flag", "--d-model: a resumed run", "train", "--task", "lm", "--resume", base_lm, "--d-model", "16")
case("--resume with --lr", "--lr: a resumed run keeps", "train", "--task", "lm", "--resume", base_lm, "--lr", "1")
case("--resume with --trace", "--trace: a training trace follows one run", "train", "--task", "lm", "--resume", base_lm,
     "--trace", "@W/t.tstrace")
case("--resume past its steps", "the run has done", "train", "--task", "lm", "--resume", base_lm, "--corpus", ok,
     "--steps", "1", "--save", "@W/x.safetensors")
case("--resume on another corpus", "as many tokens, 4800, but not the same ones", "train", "--task", "lm", "--resume", base_lm, "--corpus",
     f"{out}/corpus-other.txt", "--steps", "5", "--save", "@W/x.safetensors")
write(f"{out}/corpus-other.txt", "the mat sat on the cat. " * 200)
case("--resume on a GPT-2 folder", "no training state", "train", "--task", "lm", "--resume", gpt, "--corpus", ok,
     "--save", "@W/x.safetensors")

# ---- .npy inputs: --ids, --input, masks -------------------------------------------------

def npy(descr, shape, data, fortran=False, magic=b"\x93NUMPY", version=b"\x01\x00", header=None):
    h = header if header is not None else "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (
        descr, "True" if fortran else "False", "(" + "".join(f"{s}, " for s in shape) + ")" if len(shape) != 1
        else f"({shape[0]},)")
    h = h.encode()
    pad = 64 - (len(magic) + 2 + 2 + len(h) + 1) % 64
    h = h + b" " * pad + b"\n"
    return magic + version + struct.pack("<H", len(h)) + h + data


ids_ok = struct.pack("<4i", 5, 6, 7, 8)
npy_damage = [
    ("empty file", b"", "npy"),
    ("bad magic", npy("<i4", (1, 4), ids_ok, magic=b"\x93NUMPX"), "npy"),
    ("version 9", npy("<i4", (1, 4), ids_ok, version=b"\x09\x00"), "version"),
    ("header cut", npy("<i4", (1, 4), ids_ok)[:20], "npy"),
    ("data cut", npy("<i4", (1, 4), ids_ok)[:-3], "bytes"),
    ("header not a dict", npy("<i4", (1, 4), ids_ok, header="[1, 2]"), "header"),
    ("fortran order", npy("<i4", (2, 2), ids_ok, fortran=True), "--ids: "),
    ("fractional ids", npy("<f4", (1, 4), struct.pack("<4f", 1.5, 2, 3, 4)), "element 0 is 1.5, not a whole number"),
    ("int16 ids", npy("<i2", (1, 4), struct.pack("<4h", 1, 2, 3, 4)), "dtype '<i2' is not supported"),
    ("three dimensions", npy("<i4", (1, 2, 2), ids_ok), "reads (B, S) ids, or one sequence"),
    ("shape and data disagree", npy("<i4", (1, 9), ids_ok), "bytes"),
    ("a negative id", npy("<i4", (1, 4), struct.pack("<4i", 5, -1, 7, 8)), "outside the vocabulary"),
    ("an id past the vocabulary", npy("<i4", (1, 4), struct.pack("<4i", 5, 9999, 7, 8)), "outside the vocabulary"),
    ("an int64 id past int32", npy("<i8", (1, 4), struct.pack("<4q", 5, 1 << 40, 7, 8)), "outside"),
    ("a shape that overflows", npy("<i4", (2**62, 2**62), ids_ok), "shape"),
    ("a negative shape", npy("<i4", (-1, 4), ids_ok), "expected a dimension"),
    ("big-endian", npy(">i4", (1, 4), ids_ok), "endian"),
]
for i, (name, data, want) in enumerate(npy_damage):
    p = f"{out}/ids{i:02d}.npy"
    write(p, data)
    case(f"--ids {name}", want, "run", "--load", gpt, "--ids", p, "--trace", "@W/t.tstrace")
case("--ids not there", "--ids: cannot open", "run", "--load", gpt, "--ids", f"{out}/none.npy")
case("--ids a folder", "regular file", "run", "--load", gpt, "--ids", out)

D = 512  # preset seed000's width
vec = struct.pack(f"<{4 * D}f", *([0.5] * (4 * D)))
write(f"{out}/input-ok.npy", npy("<f4", (1, 4, D), vec))
input_damage = [
    ("a width the model does not take", npy("<f4", (1, 2, 8), vec[:64]), "width 8"),
    ("two dimensions", npy("<f4", (4, D), vec), "(B, S, D)"),
    ("a NaN", npy("<f4", (1, 4, D), struct.pack("<f", float("nan")) + vec[4:]), "is nan; vectors are finite"),
    ("an infinity", npy("<f4", (1, 4, D), vec[:8] + struct.pack("<f", float("inf")) + vec[12:]), "inf"),
    ("data cut", npy("<f4", (1, 4, D), vec)[:-5], "bytes"),
]
for i, (name, data, want) in enumerate(input_damage):
    p = f"{out}/input{i:02d}.npy"
    write(p, data)
    case(f"--input {name}", want, "run", "--preset", "seed000", "--input", p, "--trace", "@W/t.tstrace")

mask_damage = [
    ("a shape of another text", npy("|b1", (1, 9), b"\0" * 9), "mask"),
    ("values that are not 0 or 1", npy("<f4", (1, 4), struct.pack("<4f", 0, 0.5, 0, 0)), "0"),
    ("three dimensions", npy("|b1", (1, 2, 2), b"\0" * 4), "mask"),
    ("lengths past the text", npy("<i4", (1,), struct.pack("<i", 99)), "length"),
    ("a negative length", npy("<i4", (1,), struct.pack("<i", -1)), "length"),
    ("truncated", npy("|b1", (1, 4), b"\0" * 4)[:-2], "bytes"),
]
for i, (name, data, want) in enumerate(mask_damage):
    p = f"{out}/mask{i:02d}.npy"
    write(p, data)
    case(f"--src-key-padding-mask {name}", want, "run", "--preset", "seed000", "--input", f"{out}/input-ok.npy",
         "--src-key-padding-mask", p, "--trace", "@W/t.tstrace")

# ---- traces ------------------------------------------------------------------------------
tr = read(base_trace)
trace_damage = [
    ("empty", b"", "trace"),
    ("16 random bytes", bytes(range(16)), "trace"),
    ("another file's magic", b"PK\x03\x04" + tr[4:], "trace"),
    ("cut after the header", tr[:64], "trace"),
    ("cut in the metadata", tr[:200], "trace"),
    ("a flipped byte in the metadata", tr[:100] + bytes([tr[100] ^ 0xFF]) + tr[101:], "CRC"),
    ("zeros", b"\0" * len(tr), "trace"),
]
for i, (name, data, want) in enumerate(trace_damage):
    p = f"{out}/trace{i:02d}.tstrace"
    write(p, data)
    case(f"info on a trace {name}", want, "info", p)
    case(f"png of a trace {name}", want, "png", p, "--tensor", "encoder.layers.0.self_attn.weights", "-o", "@W/x.png")
    if i % 2 == 0:
        case(f"export of a trace {name}", want, "export", p, "--npz", "@W/x.npz")
        case(f"diff with a trace {name}", want, "diff", base_trace, p)
case("info on a folder", "regular file", "info", out)
case("info on no file", "trace", "info", f"{out}/none.tstrace")

# ---- lessons ---------------------------------------------------------------------------
lessons = [
    ("empty", "", "lesson"),
    ("binary", "\x00\x01\x02\xff", "lesson"),
    ("a setup with an unknown key", "# T\n\n```tscope setup\nfrobnicate: 3\n```\n\n```tscope step\ntensor: input\n```\n",
     "frobnicate"),
    ("a step with no tensor", "# T\n\n```tscope setup\npreset: tiny\n```\n\n```tscope step\nview: heatmap\n```\n", "tensor"),
    ("a fence never closed", "# T\n\n```tscope setup\npreset: tiny\n", "```"),
    ("a step with an unknown view", "# T\n\n```tscope setup\npreset: tiny\n```\n\n```tscope step\ntensor: x\nview: pie\n```\n",
     "pie"),
    ("a key twice in a step",
     "# T\n\n```tscope setup\npreset: tiny\n```\n\n```tscope step\ntensor: a\ntensor: b\n```\n", "tensor"),
    ("a head that is not a number",
     "# T\n\n```tscope setup\npreset: tiny\n```\n\n```tscope step\ntensor: a\nhead: two\n```\n", "head"),
]
for i, (name, text, want) in enumerate(lessons):
    p = f"{out}/lesson{i:02d}.md"
    write(p, text.encode("latin-1"))
    case(f"lesson --check, {name}", want, "lesson", p, "--check")
case("lesson --check on no file", "none", "lesson", f"{out}/none.md", "--check")

# ---- issue 47: the readers and arguments added since the last round ------------------------
import pickletools
import struct as _st
import zipfile
import zlib

base_dir = os.path.dirname(base_lm)
# a training state that is not its checkpoint's: another step of the same run, another seed's run
for name, state_file, want in [
        ("a state saved at step 3 beside the checkpoint of step 2", f"{base_dir}/lm3.safetensors.state", "saved at step 3"),
        ("a state of another seed's run", f"{base_dir}/seed9.safetensors.state", "other model settings")]:
    p = f"{out}/other-{len(cases)}.safetensors"
    shutil.copy(base_lm, p)
    shutil.copy(state_file, p + ".state")
    case(f"train --resume, {name}", want, "train", "--task", "lm", "--resume", p, "--corpus", f"{out}/corpus-ok.txt",
         "--steps", "5", "--save", "@W/x.safetensors")


def state_moment(name, value):
    """The state with element 0 of optim.m or optim.v set to value."""
    h = json.loads(s_header)
    at = h[name]["data_offsets"][0]
    return with_header(h, s_data[:at] + _st.pack("<f", value) + s_data[at + 4:])


state47 = [
    ("state optimizer steps 999999999999", state_with(optim_steps="999999999999"), "has taken 999999999999 steps"),
    ("state moment NaN", state_moment("optim.m", float("nan")), "optim.m[0] is nan"),
    ("state second moment negative", state_moment("optim.v", -1.0), "optim.v[0] is -1"),
    ("state beta1 1", state_with(beta1="1"), '"beta1" 1'),
    ("state label smoothing 1.5", state_with(label_smoothing="1.5"), '"label_smoothing" is 1.5'),
]
for i, (name, data, want) in enumerate(state47):
    p = f"{out}/state47-{i:02d}.safetensors"
    shutil.copy(base_lm, p)
    write(p + ".state", data)
    case(f"train --resume, {name}", want, "train", "--task", "lm", "--resume", p, "--corpus", f"{out}/corpus-ok.txt",
         "--steps", "5", "--save", "@W/x.safetensors")

# nanoGPT's model_args, each value changed in the pickle of ckpt.pt
nano = os.path.abspath("tests/ref/pt/nanogpt")


def nano_with(key, value=None, rename=None):
    """ckpt.pt with model_args[key] set to the pickled opcodes `value`, or the key renamed."""
    z = zipfile.ZipFile(f"{nano}/ckpt.pt")
    members = [(i, z.read(i.filename)) for i in z.infolist()]
    pk_name = next(i.filename for i, _ in members if i.filename.endswith("data.pkl"))
    pkl = dict((i.filename, d) for i, d in members)[pk_name]
    ops = list(pickletools.genops(pkl))
    strings = ("BINUNICODE", "SHORT_BINUNICODE", "UNICODE")
    in_args = False
    for n, (op, arg, pos) in enumerate(ops):
        in_args = in_args or (op.name in strings and arg == "model_args")
        if in_args and op.name in strings and arg == key:
            if rename:
                at = pkl.index(key.encode(), pos)
                pkl = pkl[:at] + rename.encode() + pkl[at + len(key):]
            else:
                m = n + 1
                while ops[m][0].name in ("BINPUT", "LONG_BINPUT", "MEMOIZE"):
                    m += 1
                pkl = pkl[:ops[m][2]] + value + pkl[ops[m + 1][2]:]
            break
    else:
        raise SystemExit("nanoGPT's ckpt.pt has no model_args " + key)
    nano_with.n = getattr(nano_with, "n", 0) + 1
    buf = f"{out}/nano-{nano_with.n}.pt"
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as o:
        for i, d in members:
            o.writestr(i, pkl if i.filename == pk_name else d)
    return buf


def pk_long(i):
    return b"\x8a\x08" + i.to_bytes(8, "little", signed=True)


block = 16  # nanoGPT's fixture: block_size
for name, path, want in [
        ("n_head 2.9", nano_with("n_head", b"G" + _st.pack(">d", 2.9)), "n_head is 2.89"),
        ("n_head 2^32+2", nano_with("n_head", pk_long((1 << 32) + 2)), "n_head is 4294967298"),
        ("n_head -4", nano_with("n_head", pk_long(-4)), "n_head is -4"),
        ("n_head the string '4'", nano_with("n_head", b"X\x01\x00\x00\x004"), "n_head is '4'"),
        ("no n_head", nano_with("n_head", rename="n_hexd"), "model_args has no n_head"),
        ("n_embd 2^32+16", nano_with("n_embd", pk_long((1 << 32) + 16)), "n_embd is 4294967312"),
        ("block_size 2^32+16", nano_with("block_size", pk_long((1 << 32) + block)), "block_size is 42949673"),
]:
    case(f"nanoGPT model_args: {name}", want, "run", "--load", path, "--ids", f"{nano}/ids.npy", "--trace", "@W/t.tstrace")
d = f"{out}/nano-metadir"
os.makedirs(f"{d}/meta.pkl")
shutil.copy(f"{nano}/ckpt.pt", d)
case("nanoGPT: meta.pkl a folder", "meta.pkl is a folder", "run", "--load", f"{d}/ckpt.pt", "--text", "First",
     "--trace", "@W/t.tstrace")


def pk_str(s):
    b = s.encode()
    return b"X" + _st.pack("<I", len(b)) + b


def pk_tuple(items):
    return b"(" + b"".join(items) + b"t"


def pk_tensor():
    pid = pk_tuple([pk_str("storage"), b"ctorch\nFloatStorage\n", pk_str("0"), pk_str("cpu"), b"K\x06"])
    return (b"ctorch._utils\n_rebuild_tensor_v2\n" + pk_tuple([pid + b"Q", b"K\x00", pk_tuple([b"K\x02", b"K\x03"]),
            pk_tuple([b"K\x03", b"K\x01"]), b"\x89", b"ccollections\nOrderedDict\n)R"]) + b"R")


pkl = b"\x80\x02}(" + pk_str("w") + pk_tensor() + pk_str("step") + b"K\x05" + b"u."
with zipfile.ZipFile(f"{out}/not-a-tensor.pt", "w", zipfile.ZIP_STORED) as o:
    o.writestr("archive/data.pkl", pkl)
    o.writestr("archive/byteorder", b"little")
    o.writestr("archive/data/0", _st.pack("<6f", 1, 2, 3, 4, 5, 6))
case("torch.save: a state_dict entry that is not a tensor", "its entry step is not a tensor", "run", "--load",
     f"{out}/not-a-tensor.pt", "--input", os.path.abspath("tests/ref/load_encoder/x.npy"), "--heads", "4")

# JSON: a number past a double
d = f"{out}/cfg-1e400"
os.makedirs(d)
for f in ("model.safetensors", "encoder.json", "vocab.bpe"):
    shutil.copy(f"{gpt}/{f}", d)
write(f"{d}/config.json", config_text.replace('"n_head": 4', '"n_head": 1e400'))
case("config.json: n_head 1e400", '"n_head" is a number too large', "run", "--load", d, "--text", "Hello")

# traces: one flipped byte in a record's values, or in its header; tokens that are not UTF-8


def record_of(b, name):
    name = name.encode()
    at = 0
    while True:
        at = b.index(b"TSTP", at)
        n = _st.unpack_from("<I", b, at + 36)[0]
        if b[at + 160:at + 160 + n] == name and b[at + 160 + n] == 0:
            return at
        at += 4


weights = "encoder.layers.0.self_attn.weights"
at = record_of(tr, weights)
prefix = _st.unpack_from("<I", tr, at + 4)[0]
for name, flip in [("a flipped byte in a record's values", at + prefix + 5),
                   ("a flipped byte in a record's header", at + 48)]:
    b = bytearray(tr)
    b[flip] ^= 0x10
    p = f"{out}/flip-{len(cases)}.tstrace"
    write(p, bytes(b))
    want = f"step 12 '{weights}'"
    case(f"info: {name}", want, "info", p)
    case(f"png of another step: {name}", want, "png", p, "--tensor", "embed.out", "-o", "@W/x.png")
    case(f"png of the step: {name}", want, "png", p, "--tensor", weights, "-o", "@W/x.png")
    case(f"html: {name}", want, "html", p, "-o", "@W/page")
    case(f"diff: {name}", want, "diff", base_trace, p)
    case(f"export: {name}", want, "export", p, "--npz", "@W/x.npz")
meta_off, meta_size = _st.unpack_from("<QQ", tr, 16)
meta = tr[meta_off:meta_off + meta_size]


def with_meta(new):
    b = bytearray(tr)
    b[meta_off:meta_off + meta_size] = new
    _st.pack_into("<I", b, 40, zlib.crc32(new))
    _st.pack_into("<I", b, 60, zlib.crc32(bytes(b[:60])))
    return bytes(b)


write(f"{out}/tok-utf8.tstrace", with_meta(meta.replace(b'"goro"', b'"\xff\xfe\xfd\xfc"')))
write(f"{out}/tok-esc.tstrace", with_meta(meta.replace(b'"goro"', b'"\x1b[2J"')))
case("info: a token that is not UTF-8", "the metadata is not UTF-8", "info", f"{out}/tok-utf8.tstrace")
case("png: a token that is not UTF-8", "the metadata is not UTF-8", "png", f"{out}/tok-utf8.tstrace", "--tensor", weights,
     "-o", "@W/x.png")
write(f"{out}/cut.tstrace", tr[:len(tr) // 2])
case("--patch from a trace cut short", "is incomplete", "run", "--preset", "tiny", "--patch",
     f"{out}/cut.tstrace:decoder.layers.1.out", "--trace", "@W/t.tstrace")

# lessons: expect:, zoom:, unchecked:, title:, setup values


def lesson47(extra, setup=""):
    return ("# Expect\n\n```tscope setup\npreset: tiny\nlevel: values\n%s```\n\n```tscope step\n"
            "tensor: encoder.layers.0.self_attn.weights\nhead: 0\n%s\n```\n\nText.\n" % (setup, extra))


lesson47_cases = [
    ("expect rows offset 2^63-1", lesson47("expect: rows 0-1 mean offset 9223372036854775807 0.5"), "offset K"),
    ("expect rows head 2^31", lesson47("expect: rows head 2147483648 argmax offset 0 4"), "rows head H"),
    ("expect rows head 2^32", lesson47("expect: rows head 4294967296 argmax offset 0 4"), "rows head H"),
    ("expect ;;;", lesson47("expect: ;;;"), "item 1 is empty"),
    ("expect: a wrong item past 4095 bytes", lesson47("expect: " + "max 0.72; " * 420 + "mean 0.99"),
     "expect 'mean 0.99'"),
    ("expect rows max above nan", lesson47("expect: rows max above nan 1"), "a finite number"),
    ("zoom rows 900-1000 on a 4x4 matrix", lesson47("zoom: rows 900-1000"), "has rows 0-3 only"),
    ("zoom rows given twice", lesson47("zoom: rows 1-2 rows 0-1"), "rows given twice"),
    ("unchecked: because", lesson47("unchecked: because"), "does not start with the figure it excuses"),
    ("a 10 MB title", lesson47("title: " + "x" * (10 << 20)), "'title' is 10485760 bytes long"),
    ("a 2 MB setup value", lesson47("", "text: " + "my " * (700 << 10) + "\n"), "'text' is 21503"),
]
for i, (name, text, want) in enumerate(lesson47_cases):
    p = f"{out}/lesson47-{i:02d}.md"
    write(p, text)
    case(f"lesson --export, {name}", want, "lesson", p, "--export", "@W/out", "--quiet")
case("site with a lesson that fails", "offset K", "site", "@W/site", "--lessons", f"{out}/lesson47-00.md", "--quiet")

# live: its text and script words (refused before any window is asked for)
case("live --text not UTF-8", "--text is not UTF-8", "live", "--preset", "gpt2", "--text", "a\udcffb")
case("live --script pick:10", "0 to 9", "live", "--preset", "gpt2", "--script", "pick:10")
case("live --script head:9", "0 to 8", "live", "--preset", "gpt2", "--script", "head:9")

# ---- issue 47, item 3: numbers inside names, ranges and flags read by type, never wrapped ----------
# (each was read with atoi, strtol or sscanf %d: 2^32+1 became 1, " 5" became 5, "1-2x" became 1-2)


def with_tensor(src, dst, name, shape):
    """dst: the safetensors file src with one more float32 tensor of shape named name."""
    header, data = st_split(read(src))
    h = json.loads(header)
    end = max(v["data_offsets"][1] for k, v in h.items() if k != "__metadata__")
    n = 4
    for d in shape:
        n *= d
    h[name] = {"dtype": "F32", "shape": shape, "data_offsets": [end, end + n]}
    write(dst, st_join(json.dumps(h), data[:end] + b"\0" * n))


d = f"{out}/gpt-layer-wraps"
os.makedirs(d)
for f in ("config.json", "encoder.json", "vocab.bpe"):
    shutil.copy(f"{gpt}/{f}", d)
with_tensor(f"{gpt}/model.safetensors", f"{d}/model.safetensors", "h.4294967296.ln_1.weight", [gpt_h["h.0.ln_1.weight"]["shape"][0]])
case("GPT-2 folder: a tensor of layer 2^32 (read as layer 0)", "has no place in GPT-2's layout (2 layers: wte, wpe, h.N.ln_1, h.N.attn.c_attn, h.N.attn.c_proj, h.N.ln_2, h.N.mlp.c_fc, h.N.mlp.c_proj, ln_f, lm_head): h.4294967296.ln_1.weight", "run", "--load", d,
     "--text", "Hello", "--trace", "@W/t.tstrace")
llama = os.path.abspath("tests/ref/hf/llama")
d = f"{out}/llama-layer-wraps"
os.makedirs(d)
shutil.copy(f"{llama}/config.json", d)
llama_h = json.loads(st_split(read(f"{llama}/model.safetensors"))[0])
with_tensor(f"{llama}/model.safetensors", f"{d}/model.safetensors", "model.layers.4294967296.input_layernorm.weight",
            llama_h["model.layers.0.input_layernorm.weight"]["shape"])
case("HF llama folder: a tensor of layer 2^32 (read as layer 0)", "model.layers.4294967296.input_layernorm.weight is not a part",
     "run", "--load", d, "--ids", f"{llama}/ids.npy", "--trace", "@W/t.tstrace")
case("png --highlight row 2^32+1 (read as row 1)", "--highlight 4294967297,0: give ROW,COL", "png", base_trace, "--tensor",
     weights, "--head", "0", "--highlight", "4294967297,0", "-o", "@W/x.png")
case("png --axes 2^32+1,2 (read as 1,2)", "--axes expects two dims", "png", base_trace, "--tensor",
     "encoder.layers.0.self_attn.q", "--axes", "4294967297,2", "-o", "@W/x.png")
case("a whole-number flag with a space before it", "--seed expects a whole number, not ' 5'", "run", "--preset", "tiny",
     "--seed", " 5", "--trace", "@W/t.tstrace")
case("--patch STEP@ 2 (a space after '@')", "the position after '@' is not a number", "run", "--preset", "tiny", "--patch",
     f"{base_trace}:decoder.layers.1.out@ 2", "--trace", "@W/t.tstrace")
case("ablate --positions 1- 2", "--positions 1- 2: give A-B", "ablate", "--load", base_lm, "--text",
     "the cat sat", "--positions", "1- 2", "-o", "@W/x.png")
p = f"{out}/state-step-space.safetensors"
shutil.copy(base_lm, p)
write(p + ".state", state_with(step=" 2"))
case("train --resume, state step ' 2'", '"step" is " 2", not a whole number', "train", "--task", "lm", "--resume", p,
     "--corpus", f"{out}/corpus-ok.txt", "--steps", "5", "--save", "@W/x.safetensors")
for i, (name, text, want) in enumerate([
        ("expect mean 1-2x (read as mean 1-2)", lesson47("expect: mean 1-2x 0.5"), "'mean A-B' takes two whole numbers"),
        ("zoom rows 0-+1", lesson47("zoom: rows 0-+1"), "zoom rows: a range A-B of whole numbers")]):
    p = f"{out}/lesson47-int-{i:02d}.md"
    write(p, text)
    case(f"lesson --export, {name}", want, "lesson", p, "--export", "@W/out", "--quiet")



def with_shape(src, dst, name, shape):
    """dst: the safetensors file src with tensor name given shape and no data (a dim of 0)."""
    header, data = st_split(read(src))
    h, body, new = json.loads(header), b"", {}
    for k, v in h.items():
        if k != "__metadata__":
            piece = b"" if k == name else data[v["data_offsets"][0]:v["data_offsets"][1]]
            v = dict(v, shape=shape if k == name else v["shape"], data_offsets=[len(body), len(body) + len(piece)])
            body += piece
        new[k] = v
    write(dst, st_join(json.dumps(new), body))


# a weight of shape [0, 16] is there, with no rows: not "missing" (issue 47's message that pointed the wrong way)
enc = os.path.abspath("tests/ref/load_encoder")
for tensor, want in [("layers.0.self_attn.out_proj.weight", "out_proj.weight is [0, 16]: 0 is not a model width"),
                     ("layers.0.linear1.weight", "linear1.weight is [0, 16]: 0 is not a feed-forward width")]:
    p = f"{out}/zero-rows-{len(cases)}.safetensors"
    with_shape(f"{enc}/weights.safetensors", p, tensor, [0, 16])
    case(f"a [0, 16] {tensor}", want, "run", "--load", p, "--input", f"{enc}/x.npy", "--heads", "4", "--trace", "@W/t.tstrace")

# ---- issue 47, item 4: a damaged helper step: the picture that reads it says so ----------------------
# (the language model's trace: probs drawn with the logits beside them)
lm_trace = read(f"{base_dir}/lm.tstrace")
for src, helper, shown, extra in [
        (tr, "decoder.layers.0.self_attn.masked", "decoder.layers.0.self_attn.weights", ["--head", "0"]),
        (tr, "encoder.layers.0.norm1.gamma", "encoder.layers.0.norm1.out", []),  # the norm view
        (lm_trace, "logits", "probs", ["--view", "dist"])]:
    at = record_of(src, helper)
    b = bytearray(src)
    b[at + _st.unpack_from("<I", src, at + 4)[0] + 1] ^= 0x10
    p = f"{out}/flip-helper-{len(cases)}.tstrace"
    write(p, bytes(b))
    case(f"png of {shown}: its helper {helper} damaged", f"'{helper}'", "png", p, "--tensor", shown, *extra, "-o", "@W/x.png")
    case(f"html: a helper {helper} damaged", f"'{helper}'", "html", p, "-o", "@W/page")

sys.stdout = open(sys.stdout.fileno(), "w", encoding="utf-8", errors="surrogateescape", closefd=False)
for c in cases:
    print("\t".join(c))
