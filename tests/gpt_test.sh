#!/usr/bin/env bash
# The decoder-only GPT and GPT-2's own checkpoint layout, end to end, from
# committed fixtures (tests/ref/gpt/make_fixtures.py wrote them with Debian's
# python3-torch from the published GPT-2 architecture; this test needs neither
# torch nor numpy): tscope on the GPT-2 files equals PyTorch's every step
# within 1e-4, with or without Hugging Face's "transformer." prefix; the gpt2
# preset has GPT-2 small's 124,439,808 parameters; what cannot work is one
# line and exit 2.
. "$(dirname "$0")/lib.sh"
ref=tests/ref/gpt
text="Hello, GPT-2!"

# one_line: a refusal is one line on stderr and nothing on stdout
one_line() { [ "$(printf '%s\n' "$err" | grep -c .)" = 1 ] && [ -z "$out" ] && ok || bad "$1: not one line: $err / $out"; }

# ---- the preset: GPT-2 small's sizes ----
expect 0 "shapes --preset gpt2" -- "$bin" shapes --preset gpt2
has "$out" "parameters: 124,439,808" "gpt2 has GPT-2 small's parameter count (tied head, no head bias)"
has "$out" "decoder-only (GPT): B1 S1024, d_model 768, 12 heads, ffn 3072, 12 layers, pre-LN, gelu-tanh" \
    "gpt2's first line"
has "$out" "decoder.layers.11.ffn" "the per-module table names the last block"
expect 0 "shapes --preset gpt2 --params" -- "$bin" shapes --preset gpt2 --params
printf '%s\n' "$out" | grep -Eq '^decoder\.layers\.0\.self_attn\.in_proj_weight +\[2304, 768\]' && ok ||
    bad "--params lists c_attn's place as (2304, 768)"
case $out in *generator.bias*) bad "a GPT's head has a bias" ;; *) ok ;; esac

# ---- GPT-2's files, as they come ----
for w in $ref/small $ref/prefixed/model.safetensors; do
    expect 0 "run --load $w" -- "$bin" run --load "$w" --text "$text" --trace "$tmp/t.tstrace" --level values
    has "$out" "gelu-tanh, learned positions, final norms, vocabulary logits (tied)" "$w: the config read"
    has "$out" "bpe tokenizer, 258 tokens" "$w: the vocabulary beside the weights"
    expect 0 "diff --common $w" -- "$bin" diff --common --tol 1e-4 $ref/reference.tstrace "$tmp/t.tstrace"
    has "$out" "no step differs beyond tol 0.0001 (39 steps compared)" "$w: every step equals PyTorch's"
    has "$out" "only in A: 0 steps" "$w: tscope has every step PyTorch's reference has"
done
# the same ids given as --ids: the same run, every step equal to PyTorch's
expect 0 "run --ids" -- "$bin" run --load $ref/small --ids $ref/ids.npy --trace "$tmp/ids.tstrace" --level values
expect 0 "diff --common --ids" -- "$bin" diff --common --tol 1e-4 $ref/reference.tstrace "$tmp/ids.tstrace"
has "$out" "no step differs beyond tol 0.0001 (39 steps compared)" "--ids: every step equals PyTorch's"
expect 2 "--ids outside the vocabulary" -- "$bin" run --load $ref/small --ids $ref/ids_out_of_vocab.npy
one_line "--ids outside the vocabulary"
has "$err" "outside the vocabulary of 258" "the bad id is named"
expect 2 "--ids and --text" -- "$bin" run --load $ref/small --ids $ref/ids.npy --text "$text"
one_line "--ids and --text"
# any model with a token table: tiny reads ids; the attention-alone model has none to read them with
expect 0 "run --preset tiny --ids" -- "$bin" run --preset tiny --ids $ref/ids.npy
has "$out" "B1 S11" "--ids decide batch and length"
expect 2 "--ids to seed001" -- "$bin" run --preset seed001 --ids $ref/ids.npy
one_line "--ids to seed001"
expect 2 "--ids with --seq that disagrees" -- "$bin" run --preset tiny --ids $ref/ids.npy --seq 4
one_line "--ids with --seq that disagrees"

# the trace's token labels are the BPE's pieces
expect 0 "info on the GPT-2 trace" -- "$bin" info "$tmp/t.tstrace"
has "$out" "source: He ll o" "the trace labels positions with BPE tokens"

# a change PyTorch would see, tscope sees: --tol 0 finds float rounding, a
# wrong activation a real divergence
expect 1 "diff --tol 0" -- "$bin" diff --common --tol 0 $ref/reference.tstrace "$tmp/t.tstrace"

# generation continues the text
expect 0 "generate" -- "$bin" generate --load $ref/small --prompt "Hello" -n 4 --seed 3
has "$err" "4 tokens after a prompt of 3 (bpe)" "generate reports what it did"
case $out in Hello*) ok ;; *) bad "generate does not continue the prompt: $out" ;; esac

# ---- what cannot work: one line, exit 2 ----
mkdir -p "$tmp/noconfig" "$tmp/wrongconfig"
cp $ref/small/model.safetensors $ref/small/encoder.json $ref/small/vocab.bpe "$tmp/noconfig/"
expect 2 "no config.json" -- "$bin" run --load "$tmp/noconfig" --text "$text"
one_line "no config.json"
has "$err" "config.json" "the missing config.json is named"
cp $ref/small/* "$tmp/wrongconfig/"
sed 's/"n_embd": 32/"n_embd": 64/' $ref/small/config.json >"$tmp/wrongconfig/config.json"
expect 2 "config.json disagrees" -- "$bin" run --load "$tmp/wrongconfig" --text "$text"
one_line "config.json disagrees"
has "$err" "\"n_embd\": 64 but" "the disagreement names both values"
# a whole number written 4.0 is still a whole number (Python's json reads it as 4.0; so does tscope)
mkdir -p "$tmp/floatheads"
cp $ref/small/* "$tmp/floatheads/"
sed 's/"n_head": 4/"n_head": 4.0/' $ref/small/config.json >"$tmp/floatheads/config.json"
expect 0 "n_head 4.0" -- "$bin" run --load "$tmp/floatheads" --text "$text"
has "$out" "4 heads" "n_head 4.0 is 4 heads"
# a folder whose model.safetensors is broken says what is wrong with it, not that the folder is not a file
mkdir -p "$tmp/broken"
cp $ref/small/* "$tmp/broken/"
head -c 1000 $ref/small/model.safetensors >"$tmp/broken/model.safetensors"
expect 2 "a folder with a truncated model.safetensors" -- "$bin" run --load "$tmp/broken" --text "$text"
one_line "a folder with a truncated model.safetensors"
has "$err" "broken/model.safetensors: header length" "the safetensors reader's own message"
expect 2 "a text longer than the context" -- "$bin" run --load $ref/small --text "$text$text"
one_line "a text longer than the context"

# ---- --arch decoder from flags ----
expect 0 "run --arch decoder" -- "$bin" run --arch decoder --text "the cat sat on the mat" --trace "$tmp/d.tstrace"
has "$out" "decoder-only (GPT)" "--arch decoder builds a GPT"
expect 0 "info of a GPT trace" -- "$bin" info "$tmp/d.tstrace" --only 'decoder.layers.0.self_attn.weights'
has "$out" "decoder.layers.0.self_attn.weights" "a GPT's steps are named decoder.*"
expect 2 "--arch decoder --dec-layers 2" -- "$bin" run --arch decoder --dec-layers 2
one_line "--arch decoder --dec-layers 2"
expect 2 "--arch decoder --mask none" -- "$bin" run --arch decoder --mask none
one_line "--arch decoder --mask none"
has "$err" "is causal" "a GPT without its causal mask is refused"
expect 2 "--activation gelu-tanh is a choice" -- "$bin" run --activation tanh
one_line "--activation tanh"

finish
