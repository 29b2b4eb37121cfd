"""tscope's induction GPT (assets/induction-2l.safetensors) in PyTorch with hook points, for the
Python package's fixtures (make_fixtures.py) and its speed peer (bench_sweep.py).

The arithmetic is tests/ref/edits/make_fixtures.py's GPT (src/model/model_forward.c, run() with
arch decoder), in float64 or float32, with an nn.Identity at each point tscope names a step:
  embed       embed.out                             (B, S, D), the tokens' rows plus the positions'
  weights[i]  decoder.layers.{i}.self_attn.weights  (B, H, Sq, Sk), after the softmax
  values[i]   decoder.layers.{i}.self_attn.values   (B, H, S, hd), each head's weighted values
  attn_out[i] decoder.layers.{i}.self_attn.out      (B, S, D), what the attention adds to the stream
  ffn_out[i]  decoder.layers.{i}.ffn.out            (B, S, D)
  out[i]      decoder.layers.{i}.out                (B, S, D), the residual stream after the layer
A forward hook on one of them returning a tensor replaces the step, as TransformerLens edits one.
"""
import json
import math
import os
import struct

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
MODEL = os.path.join(ROOT, "assets", "induction-2l.safetensors")
TEXTS = os.path.join(ROOT, "tests", "ref", "experiments", "texts.txt")


def read_model(dtype=np.float64):
    with open(MODEL, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__")
    data = raw[8 + n:]
    w = {}
    for k, v in header.items():
        assert v["dtype"] == "F32", k
        a, b = v["data_offsets"]
        w[k] = torch.from_numpy(np.frombuffer(data[a:b], "<f4").reshape(v["shape"]).astype(dtype))
    return w, json.loads(meta["config"]), json.loads(meta["tokenizer"])["tokens"]


class GPT(torch.nn.Module):
    def __init__(self, w, config):
        super().__init__()
        assert config["arch"] == "decoder" and config["norm"] == "pre" and config["pe"] == "learned"
        assert config["activation"] == "gelu" and config["final_norm"] and config["tie_embed"]
        self.w, self.D, self.H, self.eps = w, config["d_model"], config["heads"], config["eps"]
        self.L = config["layers"]
        ident = lambda: torch.nn.ModuleList(torch.nn.Identity() for _ in range(self.L))
        self.weights, self.values, self.ffn_out, self.out = ident(), ident(), ident(), ident()
        self.attn_out, self.embed = ident(), torch.nn.Identity()

    def norm(self, x, name):
        return torch.nn.functional.layer_norm(x, (self.D,), self.w[name + ".weight"], self.w[name + ".bias"],
                                              self.eps)

    def attention(self, i, x):
        w, p = self.w, f"decoder.layers.{i}.self_attn."
        B, S, D = x.shape
        H, hd = self.H, D // self.H
        qkv = x @ w[p + "in_proj_weight"].t() + w[p + "in_proj_bias"]
        q, k, v = (t.view(B, S, H, hd).transpose(1, 2) for t in qkv.split(D, dim=2))
        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
        causal = torch.triu(torch.ones(S, S, dtype=torch.bool), 1)
        weights = self.weights[i](torch.softmax(scores.masked_fill(causal, float("-inf")), dim=-1))
        values = self.values[i](weights @ v)
        concat = values.transpose(1, 2).reshape(B, S, D)
        return self.attn_out[i](concat @ w[p + "out_proj.weight"].t() + w[p + "out_proj.bias"])

    def forward(self, ids):
        w = self.w
        S = ids.shape[1]
        x = self.embed(w["embed.src.weight"][ids] + w["embed.positions.weight"][:S])
        for i in range(self.L):
            p = f"decoder.layers.{i}."
            x = x + self.attention(i, self.norm(x, p + "norm1"))
            hidden = self.norm(x, p + "norm2") @ w[p + "linear1.weight"].t() + w[p + "linear1.bias"]
            x = x + self.ffn_out[i](torch.nn.functional.gelu(hidden) @ w[p + "linear2.weight"].t()
                                    + w[p + "linear2.bias"])
            x = self.out[i](x)
        return self.norm(x, "decoder.norm") @ w["embed.src.weight"].t()


def texts():
    with open(TEXTS) as f:
        return [line.rstrip("\n") for line in f.readlines()[:2]]


def run(model, ids, hooks=(), keep=()):
    """logits with hooks [(module, fn)] and the outputs of the modules in keep."""
    handles = [mod.register_forward_hook(fn) for mod, fn in hooks]
    kept = {}
    handles += [mod.register_forward_hook(lambda m_, i_, o, k=k: kept.__setitem__(k, o.clone()))
                for k, mod in keep]
    with torch.no_grad():
        logits = model(ids)
    for h in handles:
        h.remove()
    return logits, kept
