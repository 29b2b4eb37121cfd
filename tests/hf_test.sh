#!/usr/bin/env bash
# Hugging Face folders as they come (src/io/hf_load.c): for each model_type
# in tests/ref/hf/ (float64 PyTorch references written from Hugging Face's
# modeling files by tests/ref/hf/make_fixtures.py; see its README), `run
# --load DIR --ids ids.npy --expect logits.npy` agrees within 1e-4, and every
# planted variant mistake of that folder (mistake_*.npy: rotate-half vs
# interleaved RoPE, RMSNorm vs LayerNorm, (1 + w) vs w, tanh vs erf GELU,
# partial vs full rotary, parallel vs sequential residual, ...) is caught.
# The storage variants (bf16 shards, f16, pytorch_model.bin) load too. BERT
# (bert/) reads its token types from --token-types, and bad ones, or a bert
# folder that contradicts itself, are refused like the rest. The
# refused folders of tests/ref/hf/bad/ each give one line on stderr naming
# the problem, exit 2, on the plain and the sanitized binary.
. "$(dirname "$0")/lib.sh"
ref=tests/ref/hf
# npy OUT DESCR SHAPE VALUES...: a .npy file (format 1.0) of those values, e.g. npy t.npy '<i8' 2,12 0 0 ...;
# npy OUT row IN K: row K of the 2-d array IN (as a 1-d array). Plain python3: no numpy needed.
npy() {
    python3 - "$@" <<'PY'
import struct, sys
def write(path, descr, shape, raw):
    shape_text = '(' + ''.join(f'{n}, ' for n in shape).rstrip(' ') + ')' if len(shape) > 1 else f'({shape[0]},)'
    head = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape_text)
    head += ' ' * (-(10 + len(head) + 1) % 64) + '\n'
    open(path, 'wb').write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(head)) + head.encode() + raw)
out, what = sys.argv[1], sys.argv[2]
if what == 'row':
    data = open(sys.argv[3], 'rb').read()
    n = struct.unpack('<H', data[8:10])[0]
    head = data[10:10 + n].decode()
    shape = [int(x) for x in head.split("'shape': (")[1].split(')')[0].split(',') if x.strip()]
    descr = head.split("'descr': '")[1].split("'")[0]
    size = int(descr[2:])
    k = int(sys.argv[4])
    body = data[10 + n:]
    write(out, descr, [shape[1]], body[k * shape[1] * size:(k + 1) * shape[1] * size])
else:
    shape = [int(x) for x in sys.argv[3].split(',')]
    code = {'<i8': '<q', '<f4': '<f'}[what]
    vals = [float(v) if what == '<f4' else int(v) for v in sys.argv[4:]]
    write(out, what, shape, b''.join(struct.pack(code, v) for v in vals))
PY
}
fill() { local n=$1 v=$2 i; for ((i = 0; i < n; i++)); do printf '%s ' "$v"; done; }

for d in gpt2 llama llama_bf16 mistral qwen2 qwen2_f16 gemma gpt_neox gpt_neox_bin; do
    expect 0 "$d agrees with its reference" -- "$bin" run --load "$ref/$d" --ids "$ref/$d/ids.npy" --expect "$ref/$d/logits.npy"
    has "$out$err" "agrees within tol 0.0001" "$d agrees"
    for m in "$ref/$d"/mistake_*.npy; do
        [ -e "$m" ] || continue
        expect 1 "$d: $(basename "$m") is caught" -- "$bin" run --load "$ref/$d" --ids "$ref/$d/ids.npy" --expect "$m"
        has "$err" "differs from $m beyond tol 0.0001" "$d $(basename "$m")"
    done
done

# --dtype bf16 (the weight matrices read as bf16 by ts_gemm_bf16, float32 sums):
# - a bf16 folder keeps its values, so it still agrees with its float64 reference within 1e-4;
# - a float32 folder's matrices are rounded: --expect reports how far that moves the logits
#   (beyond 1e-4 with these N(0, 0.2) weights), and the run equals, to the last printed digit,
#   a float32 run of the same folder rounded to bf16 by Python (round to nearest, ties to even,
#   every rank-2 tensor) and read as a bf16 folder;
# - the settings line and the trace say bf16, and diff names the difference.
expect 0 "llama_bf16 read as bf16" -- "$bin" run --load "$ref/llama_bf16" --ids "$ref/llama_bf16/ids.npy" --dtype bf16 --expect "$ref/llama_bf16/logits.npy"
has "$out" "agrees within tol 0.0001" "a bf16 folder read as bf16 agrees"
has "$out" "weights bf16 (matrices rounded to nearest even, float32 sums)" "the settings line says bf16"
expect 1 "llama rounded to bf16" -- "$bin" run --load "$ref/llama" --ids "$ref/llama/ids.npy" --dtype bf16 --expect "$ref/llama/logits.npy"
has "$err" "differs from $ref/llama/logits.npy beyond tol 0.0001" "rounding to bf16 is reported by --expect"
rounded_line=$(printf '%s' "$out" | grep '^expect ')
mkdir -p "$tmp/llama_rounded"
cp "$ref/llama/config.json" "$tmp/llama_rounded/"
python3 - "$ref/llama/model.safetensors" "$tmp/llama_rounded/model.safetensors" <<'PY'
import json, struct, sys
data = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', data[:8])[0]
head = json.loads(data[8:8 + n]); body = data[8 + n:]
out_head, out_body = {}, b''
for name, v in head.items():
    if name == '__metadata__':
        out_head[name] = v
        continue
    raw = body[v['data_offsets'][0]:v['data_offsets'][1]]
    if len(v['shape']) == 2:  # a matrix: rounded to bf16, ties to even
        words = struct.unpack('<%dI' % (len(raw) // 4), raw)
        raw = b''.join(struct.pack('<H', ((u + 0x7fff + ((u >> 16) & 1)) >> 16) & 0xffff) for u in words)
        v = dict(v, dtype='BF16')
    out_body += b'\0' * (-len(out_body) % 4)
    out_head[name] = dict(v, data_offsets=[len(out_body), len(out_body) + len(raw)])
    out_body += raw
h = json.dumps(out_head).encode(); h += b' ' * (-len(h) % 8)
open(sys.argv[2], 'wb').write(struct.pack('<Q', len(h)) + h + out_body)
PY
expect 1 "llama rounded by Python, read as float32" -- "$bin" run --load "$tmp/llama_rounded" --ids "$ref/llama/ids.npy" --expect "$ref/llama/logits.npy"
python_line=$(printf '%s' "$out" | grep '^expect ')
[ -n "$rounded_line" ] && [ "$python_line" = "$rounded_line" ] && ok ||
    bad "--dtype bf16 computes the model rounded to bf16: '$rounded_line' vs '$python_line'"
expect 0 "llama traced as bf16" -- "$bin" run --load "$ref/llama" --ids "$ref/llama/ids.npy" --dtype bf16 --trace "$tmp/bf16.tstrace"
expect 0 "llama traced as f32" -- "$bin" run --load "$ref/llama" --ids "$ref/llama/ids.npy" --trace "$tmp/f32.tstrace"
expect 1 "diff of f32 and bf16 runs" -- "$bin" diff "$tmp/f32.tstrace" "$tmp/bf16.tstrace"
has "$out" "weights f32 vs bf16" "diff names the weights' dtype"
expect 2 "an unknown --dtype" -- "$bin" run --load "$ref/llama" --ids "$ref/llama/ids.npy" --dtype f16
has "$err" "f16" "an unknown --dtype is named"
expect 2 "--dtype on bench gemm" -- "$bin" bench gemm --dtype bf16
has "$err" "--dtype is how forward reads its weights" "bench refuses --dtype where nothing reads it"

# BERT (bert/: BertForMaskedLM's names, token types 0 for positions 0-5 and 1 for 6-11): agrees with
# its reference given its token types, and each planted mistake is caught:
#   mistake_no_token_types  the token type embeddings left out of the sum (a GPT-style embedding)
#   mistake_causal          a causal mask, as a decoder would have: BERT's positions see both ways
#   mistake_gelu_tanh       GELU's tanh form where hidden_act "gelu" is the exact (erf) one, in the
#                           FFN and in the masked-LM head's transform
d=bert
expect 0 "bert agrees with its reference" -- "$bin" run --load "$ref/$d" --ids "$ref/$d/ids.npy" --token-types "$ref/$d/token_type_ids.npy" --expect "$ref/$d/logits.npy"
has "$out$err" "agrees within tol 0.0001" "bert agrees"
has "$out" "token types given (2 kinds), head masked-LM (dense, activation, LayerNorm, decoder), eps 1e-12, embeddings' eps 1e-12" "bert's settings"
has "$out" "masked LM: each position scores the token there" "bert's report: the token at each position, not the next"
has "$out" "not used: the pooler (pooler.dense) and the next-sentence head (cls.seq_relationship)" "bert's unused parts named"
for m in no_token_types causal gelu_tanh; do
    expect 1 "bert: mistake_$m is caught" -- "$bin" run --load "$ref/$d" --ids "$ref/$d/ids.npy" --token-types "$ref/$d/token_type_ids.npy" --expect "$ref/$d/mistake_$m.npy"
    has "$err" "differs from $ref/$d/mistake_$m.npy beyond tol 0.0001" "bert mistake_$m"
done
# without --token-types every position is type 0: said in the settings line, and not the reference's logits
expect 1 "bert without its token types" -- "$bin" run --load "$ref/$d" --ids "$ref/$d/ids.npy" --expect "$ref/$d/logits.npy"
has "$out" "token types all 0, none given (2 kinds)" "the settings line says the token types are all 0"
npy "$tmp/zeros.npy" '<i8' 2,12 $(fill 24 0)
expect 0 "bert with all-0 token types" -- "$bin" run --load "$ref/$d" --ids "$ref/$d/ids.npy" --token-types "$tmp/zeros.npy"
zeros_table=$(printf '%s\n' "$out" | grep -v '^#')
expect 0 "bert without token types" -- "$bin" run --load "$ref/$d" --ids "$ref/$d/ids.npy"
[ "$zeros_table" = "$(printf '%s\n' "$out" | grep -v '^#')" ] && ok || bad "all-0 --token-types and none give different predictions"
# the masked LM's own steps are traced and the settings reach the trace, where diff compares them
expect 0 "bert traced" -- "$bin" run --load "$ref/$d" --ids "$ref/$d/ids.npy" --token-types "$ref/$d/token_type_ids.npy" --trace "$tmp/bert.tstrace"
expect 0 "bert's trace" -- "$bin" info "$tmp/bert.tstrace"
for step in token_type_ids embed.token_types embed.norm.out encoder.layers.1.norm2.out mlm.dense mlm.act mlm.norm.out logits; do
    has "$out" " $step " "bert's step $step"
done
expect 0 "bert traced without token types" -- "$bin" run --load "$ref/$d" --ids "$ref/$d/ids.npy" --trace "$tmp/bert0.tstrace"
expect 1 "diff of bert with and without token types" -- "$bin" diff "$tmp/bert.tstrace" "$tmp/bert0.tstrace"
has "$out" "settings DIFFER: token_types" "diff names the token types setting"
# experiments: a head knocked out changes the logits; the lens reads each layer through the masked-LM head
expect 1 "bert with a head ablated" -- "$bin" run --load "$ref/$d" --ids "$ref/$d/ids.npy" --token-types "$ref/$d/token_type_ids.npy" --ablate encoder.layers.1.self_attn.head2 --expect "$ref/$d/logits.npy"
has "$out" "encoder.layers.1.self_attn.head2" "the ablation is reported"
has "$err" "differs from $ref/$d/logits.npy" "an ablated head changes bert's logits"
npy "$tmp/one_ids.npy" row "$ref/$d/ids.npy" 0
npy "$tmp/one_types.npy" row "$ref/$d/token_type_ids.npy" 0
expect 0 "bert's lens" -- "$bin" run --load "$ref/$d" --ids "$tmp/one_ids.npy" --token-types "$tmp/one_types.npy" --lens
has "$out" "through the masked-LM head): most likely token at each position" "bert's lens in its own words"
has "$out" "layer 1:" "bert's lens has both layers"
# the lens's last layer is the model's own output: its argmax at each position is the report's
# (bert through its masked-LM head; llama and gemma through their final RMSNorm, Gemma's 1 + w)
lens_is_output() {
    local what=$1 last pred
    last=$(printf '%s\n' "$out" | sed -n 's/^layer 1://p' | sed 's/id //g' | tr ' ' '\n' | sed -n 's/(.*//p' | tr '\n' ' ')
    pred=$(printf '%s\n' "$out" | awk '/^position/{on=1; next} /^(masked LM|loss on)/{on=0} on{print $3}' | tr '\n' ' ')
    [ -n "$last" ] && [ "$last" = "$pred" ] && ok || bad "$what's lens at its last layer ($last) is not the model's argmax ($pred)"
}
lens_is_output bert
# its figure says so: each cell the token at its position through the masked-LM head, framed where it is the input's
expect 0 "bert's lens traced" -- "$bin" run --load "$ref/bert" --ids "$tmp/one_ids.npy" --token-types "$tmp/one_types.npy" --lens --trace "$tmp/bert_lens.tstrace"
expect 0 "bert's lens as SVG" -- "$bin" png "$tmp/bert_lens.tstrace" --tensor lens.layers.0 -o "$tmp/bert_lens.svg"
has "$(cat "$tmp/bert_lens.svg" 2>/dev/null)" "the token at that position as that layer" "bert's lens figure: the token at each position"
has "$(cat "$tmp/bert_lens.svg" 2>/dev/null)" "the token that is there in the input" "bert's lens figure: what the red frame means"
for d in llama gemma; do
    npy "$tmp/one_ids.npy" row "$ref/$d/ids.npy" 0
    expect 0 "$d's lens" -- "$bin" run --load "$ref/$d" --ids "$tmp/one_ids.npy" --lens
    lens_is_output "$d"
done
d=bert
# the attention of a bert head as a figure
expect 0 "bert's attention as PNG" -- "$bin" png "$tmp/bert.tstrace" --tensor encoder.layers.0.self_attn.weights --head 1 -o "$tmp/bert_attn.png"
[ -s "$tmp/bert_attn.png" ] && ok || bad "no PNG of bert's attention"
# what a masked LM does not do: write text, or score heads by the next token
expect 2 "generate with bert" -- "$bin" generate --load "$ref/$d" --prompt "x" -n 2
has "$err" "masked language model (BERT)" "generate refused"
has "$err" "run --load $ref/$d --ids IDS.npy (it has no tokenizer) shows what it predicts" "generate suggests --ids where there is no tokenizer"
expect 2 "the ablation sweep with bert" -- "$bin" ablate --load "$ref/$d" --text "x"
has "$err" "masked language model (BERT)" "ablate's sweep refused"
expect 2 "--scores with bert" -- "$bin" run --load "$ref/$d" --ids "$ref/$d/ids.npy" --scores
has "$err" "masked language model (BERT)" "--scores refused"

# every block choice is in the settings line, where diff compares it
expect 0 "the settings line" -- "$bin" run --load "$ref/gpt_neox" --ids "$ref/gpt_neox/ids.npy"
has "$out" "norm kind layernorm (eps 1e-05), rope pairs half, 4 of 16 dims, theta 10000, kv heads 4, head dim 16, ffn plain, residual parallel" "gpt_neox settings"
expect 0 "the settings line" -- "$bin" run --load "$ref/gemma" --ids "$ref/gemma/ids.npy"
has "$out" "norm kind rms-gemma" "gemma settings"
has "$out" "kv heads 1, head dim 32, ffn geglu, residual sequential, embeddings x sqrt(d_model)" "gemma settings"
has "$out" "1 key/value head, head dim 32, gated ffn (geglu)" "gemma's whole description, uncut"
expect 2 "--layout on a Hugging Face folder" -- "$bin" run --load "$ref/llama" --ids "$ref/llama/ids.npy" --layout hf
has "$err" "--layout is for GPT-2's and nanoGPT's files" "--layout refused"

# a folder's own tokenizer reads --text (here BERT's vocab.txt of 13 words beside llama's weights)
mkdir -p "$tmp/tok"
cp "$ref/llama/config.json" "$ref/llama/model.safetensors" "$tmp/tok/"
printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\nin\nthe\nbeginning\ngod\ncreated\nheaven\nand\nearth\n.\n' >"$tmp/tok/vocab.txt"
expect 0 "--text through the folder's tokenizer" -- "$bin" run --load "$tmp/tok" --text "In the beginning God created the heaven and the earth."
has "$out" "hf tokenizer, 13 tokens" "the folder's tokenizer"
has "$out" "       2  beginning" "the text's words, lower-cased as BERT's tokenizer does"
# ... and BERT's own: a text's token types are all 0 (one segment), as the settings line says
mkdir -p "$tmp/berttok"
cp "$ref/bert/config.json" "$ref/bert/model.safetensors" "$tmp/tok/vocab.txt" "$tmp/berttok/"
expect 0 "bert reads --text through its vocab.txt" -- "$bin" run --load "$tmp/berttok" --text "In the beginning God created the heaven and the earth."
has "$out" "       2  beginning" "bert's text through WordPiece"
has "$out" "token types all 0, none given (2 kinds)" "a text's token types"
has "$out" "predicted (argmax)" "bert's report on a text"
rm "$tmp/tok/vocab.txt"
expect 2 "--text without a tokenizer" -- "$bin" run --load "$tmp/tok" --text "In the beginning"
has "$err" "no tokenizer.json, tokenizer.model or vocab.txt beside it" "the files a folder's tokenizer is read from"

bins=("$bin")
asan=${TSCOPE_ASAN:-build-asan/tscope}
[ -x "$asan" ] && bins+=("$(abs "$asan")")
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
# refused_at DIR IDS WORDS: the folder DIR read with IDS gives one line naming the problem, exit 2, nothing on stdout
refused_at() {
    local dir=$1 ids=$2 want=$3 case b
    case=$(basename "$dir")
    for b in "${bins[@]}"; do
        "$b" run --load "$dir" --ids "$ids" >"$tmp/out" 2>"$tmp/err" </dev/null
        local rc=$? lines
        lines=$(grep -c '' "$tmp/err")
        if [ $rc != 2 ]; then bad "$case ($b): exit $rc, want 2: $(head -c 300 "$tmp/err")"
        elif [ "$lines" != 1 ]; then bad "$case ($b): $lines lines on stderr: $(cat "$tmp/err")"
        elif ! grep -qF -- "$want" "$tmp/err"; then bad "$case ($b): stderr does not say '$want': $(cat "$tmp/err")"
        elif [ -s "$tmp/out" ]; then bad "$case ($b): wrote to stdout"
        else ok; fi
    done
}
# refused CASE WORDS: the folder tests/ref/hf/bad/CASE with its own ids
refused() { refused_at "$ref/bad/$1" "$ref/bad/$1/ids.npy" "$2"; }
refused config_contradicts_weights "tensor embed.tokens.weight has shape [16, 32], the model needs [16, 64]"
refused missing_shard "model-00002-of-00002.safetensors is not there (a shard is missing)"
refused index_names_missing_file "names model-00003-of-00002.safetensors"
refused unsupported_model_type 'model_type "mamba" is not one tscope reads'
refused rope_scaling_linear '"rope_scaling" is set'
refused rope_scaling_llama3 '"rope_scaling" is set'
mkdir -p "$tmp/window" && cp "$ref/bad/sliding_window_mistral/config.json" "$tmp/window/" && cp "$ref/mistral/ids.npy" "$tmp/window/"
for b in "${bins[@]}"; do
    expect 2 "a sliding window in effect ($b)" -- "$b" run --load "$tmp/window" --ids "$tmp/window/ids.npy"
    has "$err" '"sliding_window" is 4' "sliding window"
done
# BERT's inputs and folders: bad token types, a config that contradicts its weights, a missing part
one_line() { [ "$(printf '%s\n' "$err" | grep -c '')" = 1 ] && ok || bad "$1: not one line on stderr: $err"; }
npy "$tmp/tt_shape.npy" '<i8' 2,11 $(fill 22 0)
npy "$tmp/tt_big.npy" '<i8' 2,12 $(fill 24 2)
npy "$tmp/tt_neg.npy" '<i8' 2,12 $(fill 24 -1)
npy "$tmp/tt_float.npy" '<f4' 2,12 $(fill 24 0.5)
# tt_refused LOAD IDS TYPES WANT: run --load LOAD --ids IDS --token-types TYPES says WANT in one line, exit 2,
# on the plain and the sanitized binary
tt_refused() {
    local load=$1 ids=$2 types=$3 want=$4 b
    for b in "${bins[@]}"; do
        expect 2 "--token-types $(basename "$types") ($b)" -- "$b" run --load "$load" --ids "$ids" --token-types "$types"
        has "$err" "$want" "--token-types $(basename "$types") with $(basename "$load")"
        one_line "--token-types $(basename "$types") with $(basename "$load")"
    done
}
B="$ref/bert"
tt_refused "$B" "$B/ids.npy" "$tmp/tt_shape.npy" "--token-types $tmp/tt_shape.npy is [2, 11]; the ids are (2, 12): one type for each id"
tt_refused "$B" "$B/ids.npy" "$tmp/tt_big.npy" "type 2 at position 0 is not one of the model's 2 (0 to 1)"
tt_refused "$B" "$B/ids.npy" "$tmp/tt_neg.npy" "type -1 at position 0"
tt_refused "$B" "$B/ids.npy" "$tmp/tt_float.npy" "--token-types"         # fractional types
tt_refused "$B" "$B/ids.npy" "$B/config.json" "--token-types"            # not an array at all
tt_refused "$ref/llama" "$ref/llama/ids.npy" "$B/token_type_ids.npy" "this model has no token type embeddings"
for b in "${bins[@]}"; do
    expect 2 "token types without a folder ($b)" -- "$b" run --token-types "$B/token_type_ids.npy"
    has "$err" "token types are read by a model that has them" "token types without --load"
    one_line "token types without --load"
done
# bert folders that must be refused, made from bert/ (CASE: what changes; the line that must be said)
mkbert() {
    local case=$1 cfgpy=$2 dropname=${3:-}
    mkdir -p "$tmp/$case"
    python3 - "$ref/bert" "$tmp/$case" "$cfgpy" "$dropname" <<'PY'
import json, struct, sys
src, dst, change, drop = sys.argv[1:5]
cfg = json.load(open(src + '/config.json'))
exec(change)
open(dst + '/config.json', 'w').write(json.dumps(cfg, indent=2, sort_keys=True) + '\n')
data = open(src + '/model.safetensors', 'rb').read()
n = struct.unpack('<Q', data[:8])[0]
head = json.loads(data[8:8 + n]); body = data[8 + n:]
if drop:
    del head[drop]
# the data packed again without the dropped tensor's bytes
out, at = b'', 0
for k, v in head.items():
    if k == '__metadata__':
        continue
    a, b = v['data_offsets']
    out += body[a:b]
    v['data_offsets'] = [at, at + b - a]
    at += b - a
h = json.dumps(head).encode(); h += b' ' * (-len(h) % 8)
open(dst + '/model.safetensors', 'wb').write(struct.pack('<Q', len(h)) + h + out)
PY
}
mkbert bert_types3 "cfg['type_vocab_size'] = 3"
mkbert bert_hidden "cfg['hidden_size'] = 128"
mkbert bert_relative "cfg['position_embedding_type'] = 'relative_key'"
mkbert bert_decoder "cfg['is_decoder'] = True"
mkbert bert_no_key "" bert.encoder.layer.1.attention.self.key.weight
mkbert bert_no_head "" cls.predictions.transform.dense.weight
bert_refused() { refused_at "$tmp/$1" "$ref/bert/ids.npy" "$2"; }
bert_refused bert_types3 "tensor embed.token_types.weight has shape [2, 64], the model needs [3, 64]"
bert_refused bert_hidden "tensor embed.norm.bias has shape [64], the model needs [128]"
bert_refused bert_relative '"position_embedding_type" is "relative_key"'
bert_refused bert_decoder '"is_decoder" is set'
bert_refused bert_no_key "not its key rows"
bert_refused bert_no_head "no tensor of the files gives mlm.dense.weight"

# a tensor no part of the model takes is named, not dropped
mkdir -p "$tmp/extra"
cp "$ref/llama/config.json" "$tmp/extra/"
python3 - "$ref/llama/model.safetensors" "$tmp/extra/model.safetensors" <<'PY'
import json, struct, sys
data = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', data[:8])[0]
head = json.loads(data[8:8 + n]); body = data[8 + n:]
end = max(v['data_offsets'][1] for k, v in head.items() if k != '__metadata__')
head['model.layers.0.self_attn.extra_gate.weight'] = {'dtype': 'F32', 'shape': [4], 'data_offsets': [end, end + 16]}
h = json.dumps(head).encode(); h += b' ' * (-len(h) % 8)
open(sys.argv[2], 'wb').write(struct.pack('<Q', len(h)) + h + body[:end] + b'\0' * 16)
PY
expect 2 "an unknown tensor" -- "$bin" run --load "$tmp/extra" --ids "$ref/llama/ids.npy"
has "$err" "model.layers.0.self_attn.extra_gate.weight is not a part of a llama model" "unknown tensor"
finish
