#!/usr/bin/env bash
# Hugging Face folders as they come (src/io/hf_load.c): for each model_type
# in tests/ref/hf/ (float64 PyTorch references written from Hugging Face's
# modeling files by tests/ref/hf/make_fixtures.py; see its README), `run
# --load DIR --ids ids.npy --expect logits.npy` agrees within 1e-4, and every
# planted variant mistake of that folder (mistake_*.npy: rotate-half vs
# interleaved RoPE, RMSNorm vs LayerNorm, (1 + w) vs w, tanh vs erf GELU,
# partial vs full rotary, parallel vs sequential residual, ...) is caught.
# The storage variants (bf16 shards, f16, pytorch_model.bin) load too. The
# refused folders of tests/ref/hf/bad/ each give one line on stderr naming
# the problem, exit 2, on the plain and the sanitized binary.
. "$(dirname "$0")/lib.sh"
ref=tests/ref/hf

for d in gpt2 llama llama_bf16 mistral qwen2 qwen2_f16 gemma gpt_neox gpt_neox_bin; do
    expect 0 "$d agrees with its reference" -- "$bin" run --load "$ref/$d" --ids "$ref/$d/ids.npy" --expect "$ref/$d/logits.npy"
    has "$out$err" "agrees within tol 0.0001" "$d agrees"
    for m in "$ref/$d"/mistake_*.npy; do
        [ -e "$m" ] || continue
        expect 1 "$d: $(basename "$m") is caught" -- "$bin" run --load "$ref/$d" --ids "$ref/$d/ids.npy" --expect "$m"
        has "$err" "differs from $m beyond tol 0.0001" "$d $(basename "$m")"
    done
done

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
rm "$tmp/tok/vocab.txt"
expect 2 "--text without a tokenizer" -- "$bin" run --load "$tmp/tok" --text "In the beginning"
has "$err" "no tokenizer.json, tokenizer.model or vocab.txt beside it" "the files a folder's tokenizer is read from"

bins=("$bin")
asan=${TSCOPE_ASAN:-build-asan/tscope}
[ -x "$asan" ] && bins+=("$(abs "$asan")")
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
# refused CASE WORDS: one line naming the problem, exit 2, nothing on stdout
refused() {
    local case=$1 want=$2 b
    for b in "${bins[@]}"; do
        "$b" run --load "$ref/bad/$case" --ids "$ref/bad/$case/ids.npy" >"$tmp/out" 2>"$tmp/err" </dev/null
        local rc=$? lines
        lines=$(grep -c '' "$tmp/err")
        if [ $rc != 2 ]; then bad "$case ($b): exit $rc, want 2: $(head -c 300 "$tmp/err")"
        elif [ "$lines" != 1 ]; then bad "$case ($b): $lines lines on stderr: $(cat "$tmp/err")"
        elif ! grep -qF -- "$want" "$tmp/err"; then bad "$case ($b): stderr does not say '$want': $(cat "$tmp/err")"
        elif [ -s "$tmp/out" ]; then bad "$case ($b): wrote to stdout"
        else ok; fi
    done
}
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
