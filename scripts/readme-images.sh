#!/usr/bin/env bash
# Draw the pictures README.md shows into assets/readme/, from real runs:
# the tiny preset ("My name is Goro"), a 50-position PE and the full-size
# seed000 encoder. `make readme-images` runs this.
#   scripts/readme-images.sh [TSCOPE_BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-./tscope}
out=assets/readme
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"

"$bin" run --preset tiny --trace "$tmp/tiny.tstrace" --level values >/dev/null
"$bin" run --preset tiny --seq 50 --d-model 128 --trace "$tmp/pe.tstrace" --only embed.pe >/dev/null
"$bin" run --preset seed000 --trace "$tmp/seed000.tstrace" --keep-batch 0 \
    --only 'encoder.layers.0.norm1.*' --only 'encoder.layers.0.self_attn.weights' >/dev/null

"$bin" png "$tmp/tiny.tstrace" --tensor decoder.layers.0.self_attn.weights -o "$out/attention.png"
"$bin" png "$tmp/pe.tstrace" --tensor embed.pe -o "$out/posenc.png"
"$bin" png "$tmp/seed000.tstrace" --tensor encoder.layers.0.norm1.out -o "$out/layernorm.png"
"$bin" png "$tmp/seed000.tstrace" --tensor encoder.layers.0.self_attn --view shapes -o "$out/shapes.png"
# RoPE of a Llama folder (docs/model.md, "Today's blocks")
"$bin" run --load tests/ref/hf/llama --ids tests/ref/hf/llama/ids.npy --trace "$tmp/llama.tstrace" >/dev/null
"$bin" png "$tmp/llama.tstrace" --tensor decoder.layers.0.self_attn.q_rot -o "$out/rope.png"

# The tour: lesson pages exported by tscope itself (narration beside the view).
"$bin" lesson 3 --export "$tmp/lesson03" --cache "$tmp/cache" >/dev/null
"$bin" lesson 5 --export "$tmp/lesson05" --cache "$tmp/cache" >/dev/null
"$bin" lesson 10 --export "$tmp/lesson10" --cache "$tmp/cache" >/dev/null
cp "$tmp/lesson03/step04.png" "$out/tour-worked-row.png"
cp "$tmp/lesson05/step06.png" "$out/tour-reshape-bug.png"
cp "$tmp/lesson10/step04.png" "$out/tour-copy-diagonal.png"

# The lessons on the web: a page of `tscope site` as chromium shows it (scripts/deps.sh web).
scripts/deps.sh web
"$bin" site "$tmp/site" --lessons 3 --cache "$tmp/cache" --quiet
node tests/web/screenshot.js "$tmp/site/03-attention/step04.html" "$out/site-lesson.png" 1280 720
