#!/usr/bin/env python3
"""Write a Hugging Face folder of Llama 3.2 1B's shape with random bf16 weights,
in two shards named by model.safetensors.index.json, as such folders come:
what `make bench` times tscope loading (scripts/bench-hf-load.sh).

    /usr/bin/python3 scripts/make-hf-folder.py DIR

Needs only numpy. The weights are N(0, 0.02) rounded to bf16; the config is
Llama 3.2 1B's without rope_scaling (which tscope refuses)."""
import json
import os
import struct
import sys

import numpy as np

H, KV, D, F, L, V = 32, 8, 2048, 8192, 16, 128256
HD = D // H


def tensors():
    yield "model.embed_tokens.weight", (V, D)
    for i in range(L):
        p = f"model.layers.{i}."
        yield p + "input_layernorm.weight", (D,)
        yield p + "self_attn.q_proj.weight", (H * HD, D)
        yield p + "self_attn.k_proj.weight", (KV * HD, D)
        yield p + "self_attn.v_proj.weight", (KV * HD, D)
        yield p + "self_attn.o_proj.weight", (D, H * HD)
        yield p + "post_attention_layernorm.weight", (D,)
        yield p + "mlp.gate_proj.weight", (F, D)
        yield p + "mlp.up_proj.weight", (F, D)
        yield p + "mlp.down_proj.weight", (D, F)
    yield "model.norm.weight", (D,)


def bf16(shape, rng):
    x = rng.standard_normal(shape, dtype=np.float32) * 0.02
    if len(shape) == 1:
        x += 1.0
    return (x.view(np.uint32) >> 16).astype(np.uint16)  # truncated to bf16


def write_shard(path, items, rng):
    header, offset = {}, 0
    for name, shape in items:
        n = int(np.prod(shape)) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for name, shape in items:
            f.write(bf16(shape, rng).tobytes())
    os.replace(path + ".tmp", path)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(0)
    items = list(tensors())
    half = len(items) // 2
    shards = {"model-00001-of-00002.safetensors": items[:half], "model-00002-of-00002.safetensors": items[half:]}
    weight_map = {}
    for file, part in shards.items():
        write_shard(os.path.join(out, file), part, rng)
        weight_map.update({name: file for name, _ in part})
    index = {"metadata": {"total_size": sum(int(np.prod(s)) * 2 for _, s in items)}, "weight_map": weight_map}
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": D,
              "intermediate_size": F, "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": KV,
              "head_dim": HD, "hidden_act": "silu", "max_position_embeddings": 131072, "rms_norm_eps": 1e-5,
              "rope_theta": 500000.0, "rope_scaling": None, "tie_word_embeddings": True, "vocab_size": V,
              "attention_bias": False, "mlp_bias": False, "torch_dtype": "bfloat16", "bos_token_id": 128000,
              "eos_token_id": 128001}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)


if __name__ == "__main__":
    main()
