"""Fixtures of the PyTorch bridge (python/tscope_trace.py), for tests/bridge_test.sh.

Run from the repository root with Debian's python3-torch:

    /usr/bin/python3 tests/ref/bridge/make_fixtures.py

Two models, random weights (biases and LayerNorm gains are not PyTorch's 0 and 1, so a
missing one shows), recorded by the bridge into bridge.tstrace:

- transformer/: an nn.Transformer (d_model 16, 2 heads, ffn 32, 2+2 layers, post-LN, ReLU,
  batch_first, eval), with a causal target mask and key padding masks for the source and the
  memory. weights.safetensors is its state_dict as PyTorch names it (no tscope metadata: the
  test gives the flags that cannot be read from the shapes); weights_perturbed.safetensors
  has one weight of decoder layer 1's cross-attention changed by 1e-3, which tscope diff must
  find.
- custom/: an encoder of two post-LN layers whose attention is a module of its own, with
  separate q, k and v projections (seed 002's way), handing its inner steps to the bridge
  with tscope_trace.step(). weights.safetensors is its state_dict; tscope.safetensors holds
  the same numbers under nn.TransformerEncoder's names (q, k and v stacked into in_proj), so
  tscope can run the same model and the two traces can be compared.

The inputs are .npy files (float32; masks as float32 1.0 = padding, PyTorch's True).
"""
import os
import sys

import numpy as np
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(HERE))
import tscope_trace  # noqa: E402
from make_fixtures import f32, randomize, save_safetensors, pad_mask, causal  # noqa: E402

torch.use_deterministic_algorithms(True)
torch.set_num_threads(1)
D, H, FFN, B = 16, 2, 32, 2


def out_dir(name):
    d = os.path.join(HERE, name)
    os.makedirs(d, exist_ok=True)
    return d


def npy(d, name, t):
    np.save(os.path.join(d, name + ".npy"), f32(t))


def case_transformer():
    d = out_dir("transformer")
    gen = torch.Generator().manual_seed(11)
    torch.manual_seed(11)
    model = nn.Transformer(D, H, 2, 2, FFN, dropout=0.0, batch_first=True)
    randomize(model, gen)
    model.eval()
    S, T = 6, 5
    src, tgt = torch.randn(B, S, D, generator=gen), torch.randn(B, T, D, generator=gen)
    skp = pad_mask([6, 4], S)
    tm = causal(T)
    tscope_trace.trace(model, os.path.join(d, "bridge.tstrace"), src, tgt, tgt_mask=tm,
                       src_key_padding_mask=skp, memory_key_padding_mask=skp)
    sd = model.state_dict()
    save_safetensors(os.path.join(d, "weights.safetensors"), sd, {})
    bad = {k: v.clone() for k, v in sd.items()}
    bad["decoder.layers.1.multihead_attn.out_proj.weight"][3, 5] += 1e-3
    save_safetensors(os.path.join(d, "weights_perturbed.safetensors"), bad, {})
    npy(d, "src", src)
    npy(d, "tgt", tgt)
    npy(d, "src_key_padding_mask", skp.float())


class SeparateQKVAttention(nn.Module):
    """Multi-head self-attention written out, with one projection each for q, k and v."""

    def __init__(self):
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj = nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, D)
        self.out_proj = nn.Linear(D, D)

    def forward(self, x, pad):
        b, s, _ = x.shape
        hd = D // H
        split = lambda t: t.view(b, s, H, hd).transpose(1, 2)          # (B, H, S, hd)
        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        tscope_trace.step("q", q, op="permute", tag="heads")
        tscope_trace.step("k", k, op="permute", tag="heads")
        tscope_trace.step("v", v, op="permute", tag="heads")
        scores = q @ k.transpose(-1, -2)
        tscope_trace.step("scores", scores, op="matmul", tag="attn_scores")
        scaled = scores / hd ** 0.5
        tscope_trace.step("scaled", scaled, op="scale", tag="attn_scores")
        masked = scaled.masked_fill(pad.view(b, 1, 1, s), float("-inf"))
        tscope_trace.step("masked", masked, op="mask", tag="attn_scores")
        w = torch.softmax(masked, dim=-1)
        tscope_trace.step("weights", w, op="softmax", tag="attn_weights")
        values = w @ v
        tscope_trace.step("values", values, op="matmul", tag="heads")
        concat = values.transpose(1, 2).reshape(b, s, D)
        tscope_trace.step("concat", concat, op="reshape")
        out = self.out_proj(concat)
        tscope_trace.step("out", out, op="linear")
        return out


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn = SeparateQKVAttention()
        self.linear1, self.linear2 = nn.Linear(D, FFN), nn.Linear(FFN, D)
        self.norm1, self.norm2 = nn.LayerNorm(D), nn.LayerNorm(D)

    def forward(self, x, pad):
        x = self.norm1(x + self.self_attn(x, pad))
        x = self.norm2(x + self.linear2(torch.relu(self.linear1(x))))
        tscope_trace.step("out", x, op="layernorm")
        return x


class CustomEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Module()
        self.encoder.layers = nn.ModuleList([Layer(), Layer()])

    def forward(self, x, pad):
        tscope_trace.step("input", x, op="input")
        for layer in self.encoder.layers:
            x = layer(x, pad)
        return x


def case_custom():
    d = out_dir("custom")
    gen = torch.Generator().manual_seed(12)
    torch.manual_seed(12)
    model = CustomEncoder()
    randomize(model, gen)
    model.eval()
    S = 6
    x = torch.randn(B, S, D, generator=gen)
    pad = pad_mask([6, 5], S)
    tscope_trace.trace(model, os.path.join(d, "bridge.tstrace"), x, pad)
    sd = model.state_dict()
    save_safetensors(os.path.join(d, "weights.safetensors"), sd, {})
    # The same numbers as nn.TransformerEncoder names them: q, k, v stacked into in_proj.
    tsd = {}
    for i in range(2):
        p = f"encoder.layers.{i}."
        a = p + "self_attn."
        tsd[a + "in_proj_weight"] = torch.cat([sd[a + n + "_proj.weight"] for n in "qkv"])
        tsd[a + "in_proj_bias"] = torch.cat([sd[a + n + "_proj.bias"] for n in "qkv"])
        tsd[a + "out_proj.weight"], tsd[a + "out_proj.bias"] = sd[a + "out_proj.weight"], sd[a + "out_proj.bias"]
        for n in ("linear1", "linear2", "norm1", "norm2"):
            tsd[p + n + ".weight"], tsd[p + n + ".bias"] = sd[p + n + ".weight"], sd[p + n + ".bias"]
    check = nn.TransformerEncoder(nn.TransformerEncoderLayer(D, H, FFN, dropout=0.0, batch_first=True), 2,
                                  enable_nested_tensor=False)
    check.load_state_dict({k[len("encoder."):]: v for k, v in tsd.items()})
    check.eval()
    with torch.enable_grad():
        ref = check(x, src_key_padding_mask=pad)
    mine = model(x, pad)
    assert torch.allclose(ref, mine, atol=1e-6), "the custom encoder is not nn.TransformerEncoder's math"
    save_safetensors(os.path.join(d, "tscope.safetensors"), tsd, {})
    npy(d, "input", x)
    npy(d, "src_key_padding_mask", pad.float())


if __name__ == "__main__":
    case_transformer()
    case_custom()
    print("wrote", ", ".join(sorted(os.listdir(HERE))))
