#!/usr/bin/python3
"""Gradient fixtures of today's block parts (issue 41): RMSNorm (Llama's w and Gemma's 1 + w),
RoPE (rotate-half and interleaved, all or part of each head), gated FFNs (SwiGLU, GeGLU with
exact and tanh GELU), SiLU in a plain FFN, and grouped-query attention (query heads sharing
key/value heads, down to one), each in a small decoder-only model written here in float64
PyTorch under tscope's parameter names, for tests/test_grad_parity.c.

Run from the repository root with Debian's python3-torch:

    /usr/bin/python3 tests/ref/modern/make_fixtures.py

Each case directory holds:
  weights.safetensors  the parameters (float32) under tscope's names; __metadata__ has the
                       configuration, one key per ts_model_config field the case sets
  ids.npy              (B, S) int64 token ids
  out.npy              (B, S, V) float32 logits
  grad_out.npy         (B, S, V) float32, a fixed random upstream gradient
  grads.safetensors    d(sum(logits * grad_out)) / d(parameter), by the same names

The forward is the one tests/ref/hf/make_fixtures.py writes from Hugging Face's
modeling_llama.py (LlamaRMSNorm, apply_rotary_pos_emb's rotate_half, repeat_kv, LlamaMLP),
Gemma's (1 + w) norm and GPT-J's interleaved rotation: pre-norm blocks, a final norm, the
head tied to the token table, causal attention scaled by 1/sqrt(head_dim). Parameters are
drawn N(0, 0.2) (norm gains 1 + N(0, 0.2), Gemma's N(0, 0.2) around 0), so a missing bias
or gain shows. Byte for byte the same on each run.
"""
import importlib.util
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("ref_fixtures", os.path.join(os.path.dirname(HERE), "make_fixtures.py"))
_ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ref)
save_safetensors = _ref.save_safetensors

torch.use_deterministic_algorithms(True)
torch.set_num_threads(1)
torch.set_default_dtype(torch.float64)

B, S, V, L = 2, 7, 19, 2

# name -> the configuration; every key is written to __metadata__ and read by the C test
CASES = {
    # Llama: RMSNorm, RoPE (rotate-half), SwiGLU, 4 query heads over 2 key/value heads, no biases
    "llama_gqa": dict(d_model=32, heads=4, kv_heads=2, head_dim=8, ffn=48, norm_kind="rms", rope_style="half",
                      rotary_pct=1.0, rope_theta=10000.0, ffn_kind="swiglu", activation="silu", split_qkv=True,
                      qkv_bias=False, out_bias=False, ffn_bias=False),
    # Gemma's norm (1 + w), GeGLU with tanh GELU, RoPE interleaved on half of each head, heads 12 wide
    # (not d_model / heads), every bias present, one key/value head per query head
    "gemma_interleaved_partial": dict(d_model=32, heads=4, kv_heads=4, head_dim=12, ffn=40, norm_kind="rms-gemma",
                                      rope_style="interleaved", rotary_pct=0.5, rope_theta=500.0, ffn_kind="geglu",
                                      activation="gelu-tanh", split_qkv=True, qkv_bias=True, out_bias=True,
                                      ffn_bias=True),
    # one key/value head for all (multi-query), GeGLU with exact GELU, Llama's RMSNorm
    "mqa_geglu": dict(d_model=24, heads=3, kv_heads=1, head_dim=8, ffn=36, norm_kind="rms", rope_style="half",
                      rotary_pct=1.0, rope_theta=10000.0, ffn_kind="geglu", activation="gelu", split_qkv=True,
                      qkv_bias=True, out_bias=False, ffn_bias=False),
    # GPT-NeoX's packed q/k/v (in_proj) with RoPE on a quarter of each head, LayerNorm, a plain FFN with SiLU
    "packed_rope_silu": dict(d_model=32, heads=4, kv_heads=4, head_dim=8, ffn=64, norm_kind="layernorm",
                             rope_style="half", rotary_pct=0.25, rope_theta=10000.0, ffn_kind="mlp",
                             activation="silu", split_qkv=False, qkv_bias=True, out_bias=True, ffn_bias=True),
}
EPS = 1e-5


class Draw:
    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)

    def normal(self, *shape, mean=0.0):
        t = torch.randn(*shape, generator=self.g, dtype=torch.float64) * 0.2 + mean
        return t.to(torch.float32).to(torch.float64)  # what the float32 file holds


def make_weights(c, seed):
    d = Draw(seed)
    D, H, KV, hd, Fw = c["d_model"], c["heads"], c["kv_heads"], c["head_dim"], c["ffn"]
    gemma = c["norm_kind"] == "rms-gemma"
    w = {"embed.tokens.weight": d.normal(V, D)}

    def norm(name):
        w[name + ".weight"] = d.normal(D) if gemma else d.normal(D, mean=1.0)
        if c["norm_kind"] == "layernorm":
            w[name + ".bias"] = d.normal(D)

    def lin(name, out, inp, bias):
        w[name + ".weight"] = d.normal(out, inp)
        if bias:
            w[name + ".bias"] = d.normal(out)

    for i in range(L):
        p = f"decoder.layers.{i}."
        if c["split_qkv"]:
            lin(p + "self_attn.q_proj", H * hd, D, c["qkv_bias"])
            lin(p + "self_attn.k_proj", KV * hd, D, c["qkv_bias"])
            lin(p + "self_attn.v_proj", KV * hd, D, c["qkv_bias"])
        else:  # nn.MultiheadAttention's layout: rows q | k | v
            w[p + "self_attn.in_proj_weight"] = d.normal(3 * D, D)
            if c["qkv_bias"]:
                w[p + "self_attn.in_proj_bias"] = d.normal(3 * D)
        lin(p + "self_attn.out_proj", D, H * hd, c["out_bias"])
        if c["ffn_kind"] != "mlp":
            lin(p + "linear_gate", Fw, D, c["ffn_bias"])
        lin(p + "linear1", Fw, D, c["ffn_bias"])
        lin(p + "linear2", D, Fw, c["ffn_bias"])
        norm(p + "norm1")
        norm(p + "norm2")
    norm("decoder.norm")
    return w


def normalize(c, x, w, name):
    g = w[name + ".weight"]
    if c["norm_kind"] == "layernorm":
        return F.layer_norm(x, (x.shape[-1],), g, w[name + ".bias"], EPS)
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS)  # LlamaRMSNorm
    return y * (1.0 + g) if c["norm_kind"] == "rms-gemma" else y * g


def rope(c, x):
    """x (B, n, S, hd): the first r dims of each head turned, pair i by pos * theta^(-2i/r)."""
    hd = x.shape[-1]
    r = int(hd * c["rotary_pct"])
    inv = 1.0 / (c["rope_theta"] ** (torch.arange(0, r, 2, dtype=torch.int64).to(torch.float64) / r))
    ang = torch.arange(x.shape[-2], dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = ang.cos(), ang.sin()
    xr, xp = x[..., :r], x[..., r:]
    if c["rope_style"] == "half":  # apply_rotary_pos_emb: x * cos + rotate_half(x) * sin
        x1, x2 = xr[..., : r // 2], xr[..., r // 2:]
        out = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
    else:  # GPT-J / Meta's llama: pairs (2i, 2i + 1)
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)
    return torch.cat((out, xp), dim=-1)


def linear(x, w, name):
    out = x @ w[name + ".weight"].t()
    return out + w[name + ".bias"] if name + ".bias" in w else out


ACT = {"silu": F.silu, "gelu": F.gelu, "gelu-tanh": lambda x: F.gelu(x, approximate="tanh")}


def forward(c, w, ids):
    D, H, KV, hd = c["d_model"], c["heads"], c["kv_heads"], c["head_dim"]
    act = ACT[c["activation"]]
    x = w["embed.tokens.weight"][ids]
    causal = torch.triu(torch.ones(S, S, dtype=torch.bool), 1)
    for i in range(L):
        p = f"decoder.layers.{i}."
        h = normalize(c, x, w, p + "norm1")
        if c["split_qkv"]:
            q, k, v = (linear(h, w, p + "self_attn." + n) for n in ("q_proj", "k_proj", "v_proj"))
        else:
            qkv = h @ w[p + "self_attn.in_proj_weight"].t()
            if p + "self_attn.in_proj_bias" in w:
                qkv = qkv + w[p + "self_attn.in_proj_bias"]
            q, k, v = qkv.split(D, dim=-1)
        q = q.view(B, S, H, hd).transpose(1, 2)
        k = k.view(B, S, KV, hd).transpose(1, 2)
        v = v.view(B, S, KV, hd).transpose(1, 2)
        q, k = rope(c, q), rope(c, k)
        k, v = k.repeat_interleave(H // KV, dim=1), v.repeat_interleave(H // KV, dim=1)  # repeat_kv
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        weights = torch.softmax(scores.masked_fill(causal, float("-inf")), dim=-1)
        ctx = (weights @ v).transpose(1, 2).reshape(B, S, H * hd)
        x = x + linear(ctx, w, p + "self_attn.out_proj")
        h = normalize(c, x, w, p + "norm2")
        if c["ffn_kind"] == "mlp":
            hidden = act(linear(h, w, p + "linear1"))
        else:
            hidden = act(linear(h, w, p + "linear_gate")) * linear(h, w, p + "linear1")
        x = x + linear(hidden, w, p + "linear2")
    x = normalize(c, x, w, "decoder.norm")
    return x @ w["embed.tokens.weight"].t()


def f32(t):
    return np.ascontiguousarray(t.detach().numpy().astype("<f4"))


def make_case(name, c, seed):
    out_dir = os.path.join(HERE, name)
    os.makedirs(out_dir, exist_ok=True)
    w = make_weights(c, seed)
    for t in w.values():
        t.requires_grad_(True)
    g = torch.Generator().manual_seed(seed + 100)
    ids = torch.randint(0, V, (B, S), generator=g, dtype=torch.int64)
    grad_out = (torch.randn(B, S, V, generator=g, dtype=torch.float64)).to(torch.float32).to(torch.float64)
    logits = forward(c, w, ids)
    (logits * grad_out).sum().backward()
    meta = dict(c, vocab=V, layers=L, eps=EPS)
    save_safetensors(os.path.join(out_dir, "weights.safetensors"), {k: t.detach() for k, t in w.items()}, meta)
    save_safetensors(os.path.join(out_dir, "grads.safetensors"), {k: t.grad for k, t in w.items()}, meta)
    np.save(os.path.join(out_dir, "ids.npy"), ids.numpy().astype("<i8"))
    np.save(os.path.join(out_dir, "out.npy"), f32(logits))
    np.save(os.path.join(out_dir, "grad_out.npy"), f32(grad_out))


def main():
    for seed, (name, c) in enumerate(CASES.items()):
        make_case(name, c, 41 + seed)
        print("wrote", os.path.join(HERE, name))


if __name__ == "__main__":
    main()
