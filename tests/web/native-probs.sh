#!/usr/bin/env bash
# Native `tscope run`'s next-token probabilities after a text's last position
# (its trace's `probs`, exported to .npz and read with numpy), with every head
# and with one head knocked out (--ablate), for the WebAssembly build's tests
# and the live page's benchmark to compare with:
#   tests/web/native-probs.sh TSCOPE MODEL TEXT LAYER HEAD OUT.json
# OUT.json: {"text", "layer", "head", "plain": [V floats], "knocked": [V floats]}.
# A failing step says which on stderr and exits 1.
set -euo pipefail
bin=$1 model=$2 text=$3 layer=$4 head=$5 json=$6
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for name in plain knocked; do
    flags=()
    [ $name = knocked ] && flags=(--ablate "decoder.layers.$layer.self_attn.head$head")
    "$bin" run --load "$model" --text "$text" --trace "$tmp/$name.tstrace" --only probs "${flags[@]}" >/dev/null ||
        { echo "native-probs: tscope run ($name) failed" >&2; exit 1; }
    "$bin" export "$tmp/$name.tstrace" --npz "$tmp/$name.npz" >/dev/null ||
        { echo "native-probs: tscope export ($name) failed" >&2; exit 1; }
done
/usr/bin/python3 - "$tmp" "$text" "$layer" "$head" >"$json.tmp" <<'PY'
import json, sys
import numpy as np
tmp, text, layer, head = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
last = lambda name: [float(x) for x in np.load(f"{tmp}/{name}.npz")["probs"][0, -1, :]]
json.dump({"text": text, "layer": layer, "head": head, "plain": last("plain"), "knocked": last("knocked")}, sys.stdout)
PY
mv "$json.tmp" "$json"
