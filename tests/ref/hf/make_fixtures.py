#!/usr/bin/python3
"""Hugging Face folders and float64 reference logits for `tscope run --load DIR` (issue 40).

Run from the repository root with Debian's python3-torch:

    /usr/bin/python3 tests/ref/hf/make_fixtures.py

`transformers` is not installable here, so each model_type's forward is written again
below, in float64 PyTorch, from Hugging Face's modeling files (the class each function
follows is named in its docstring; README.md gives the details). Every folder is what
`save_pretrained` writes: config.json (sorted keys, indent 2, as PretrainedConfig writes
it) and the weights under their real checkpoint names (model.safetensors, or sharded with
model.safetensors.index.json, or pytorch_model.bin), plus:

  ids.npy                 (B, S) int64 input ids (bert also token_type_ids.npy)
  logits.npy              (B, S, V) float32 of the float64 reference
  mistake_<what>.npy      the logits of one plausible mistake each; every one differs
                          from logits.npy by more than 1e-3 (max abs), asserted here
  llama/q_rot.npy         layer 0's queries after RoPE (B, H, S, head_dim)
  llama/weights.npy       layer 0's attention weights after the softmax (B, H, S, S)

bad/<case>/ holds folders the loader must refuse (README.md says with what), and
manifest.json lists every folder, what it must give and the margin of each mistake.

The weights are drawn in float64 from seeded generators, rounded to float32 (the
"master" weights; the bf16 and f16 copies round those again), and the reference reads
the rounded values back in float64. Byte-for-byte the same on each run.
"""
import collections
import io
import json
import math
import os
import shutil
import struct

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
B, S = 2, 12
TRANSFORMERS_VERSION = "4.44.2"   # what the config.json files say wrote them
MARGIN = 1e-3                     # every mistake must move some logit by more than this
# TAIL: exact (erf) and tanh GELU differ by at most 5e-4, and by ~2e-4 of the value for a
# centred input, so with N(0, 0.2) everywhere GPT-2's gelu_new read as exact GELU moves
# the logits by only 1.0e-3. In gpt2 and bert the FFN's first bias is N(-3, 0.2) and its
# output projection N(0, 1): the GELUs then work in their negative tail, where the two
# differ by 1-2% of the value (and where a coarse erf would show too).
TAIL_BIAS, TAIL_OUT_STD = -3.0, 1.0

torch.use_deterministic_algorithms(True)
torch.set_num_threads(1)
torch.set_default_dtype(torch.float64)


# ---- writing ---------------------------------------------------------------------------

# safetensors dtype name -> (numpy little-endian dtype, torch dtype)
ST = {"F64": ("<f8", torch.float64), "F32": ("<f4", torch.float32), "F16": ("<f2", torch.float16),
      "BF16": (None, torch.bfloat16), "I64": ("<i8", torch.int64), "U8": ("|u1", torch.uint8),
      "BOOL": ("|b1", torch.bool)}
TORCH_DTYPE_NAME = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}


def as_bytes(t, dtype):
    """A tensor's bytes as safetensors stores them (BF16: torch's round-to-nearest-even)."""
    if dtype == "BF16":
        return t.detach().to(torch.float32).to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes()
    return np.ascontiguousarray(t.detach().to(ST[dtype][1]).numpy().astype(ST[dtype][0])).tobytes()


def rounded(t, dtype):
    """The float64 values a float tensor has once stored as dtype (what a loader reads back)."""
    if not t.is_floating_point():
        return t
    return t.to(torch.float32).to(ST[dtype][1]).to(torch.float64)


def save_safetensors(path, tensors, dtypes):
    """safetensors by hand, laid out as the Rust library writes it: 8-byte little-endian
    header length, the JSON header ("__metadata__" {"format": "pt"} as save_pretrained
    writes it, then each tensor's dtype, shape and data_offsets), padded with spaces to a
    multiple of 8, then the data, tensors ordered by alignment (largest first) then name."""
    names = sorted(tensors, key=lambda n: (-ST_SIZE[dtypes[n]], n))
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for n in names:
        raw = as_bytes(tensors[n], dtypes[n])
        header[n] = {"dtype": dtypes[n], "shape": list(tensors[n].shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)
    return offset


ST_SIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "U8": 1, "BOOL": 1}


def load_safetensors(path):
    """The reader used to check what was written: name -> float64 (or integer) tensor."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    data, out = raw[8 + n:], {}
    for k, v in header.items():
        a, b = v["data_offsets"]
        if v["dtype"] == "BF16":
            bits = np.frombuffer(data[a:b], "<u2").astype(np.uint32) << 16
            arr = bits.view(np.float32).astype(np.float64)
        else:
            arr = np.frombuffer(data[a:b], ST[v["dtype"]][0])
            arr = arr.astype(np.float64) if arr.dtype.kind == "f" else arr.copy()
        out[k] = torch.from_numpy(arr.reshape(v["shape"]))
    return out


def write_config(folder, config):
    # PretrainedConfig.to_json_file: json.dumps(d, indent=2, sort_keys=True) + "\n"
    with open(os.path.join(folder, "config.json"), "w") as f:
        f.write(json.dumps(config, indent=2, sort_keys=True) + "\n")


def f32(t):
    return np.ascontiguousarray(t.detach().numpy().astype("<f4"))


def save_npy(folder, name, a):
    np.save(os.path.join(folder, name + ".npy"), a)


# ---- drawing weights -------------------------------------------------------------------

class Draw:
    """Seeded N(0, 0.2) weights, rounded to float32 as they are drawn."""

    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)

    def normal(self, *shape, mean=0.0, std=0.2):
        t = torch.randn(*shape, generator=self.g, dtype=torch.float64) * std + mean
        return t.to(torch.float32).to(torch.float64)

    def w(self, *shape):      # a weight or a bias
        return self.normal(*shape)

    def gain(self, n):        # a norm's weight, 1 + 0.2 N(0, 1)
        return self.normal(n, mean=1.0)

    def ids(self, vocab, shape=(B, S)):
        return torch.randint(0, vocab, shape, generator=self.g, dtype=torch.int64)


# ---- the blocks, in float64 ------------------------------------------------------------

def rms_norm(x, w, eps):
    """LlamaRMSNorm / MistralRMSNorm / Qwen2RMSNorm: w * x / sqrt(mean(x^2) + eps)."""
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def gemma_rms_norm(x, w, eps):
    """GemmaRMSNorm: x / sqrt(mean(x^2) + eps) * (1 + w); the stored weight is w."""
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)) * (1.0 + w)


def layer_norm(x, w, b, eps):
    return F.layer_norm(x, (x.shape[-1],), w, b, eps)


def norm_as_layernorm(x, w, eps):
    """Mistake: an RMSNorm computed as a LayerNorm (mean subtracted, no bias)."""
    return F.layer_norm(x, (x.shape[-1],), w, None, eps)


ACT = {
    "silu": F.silu,
    "gelu": F.gelu,                                           # ACT2FN["gelu"]: exact, erf
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),      # GPT-2's NewGELUActivation
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
}


def rope_freqs(S_, rot, theta):
    """(S, rot/2) angles pos * theta^(-2i/rot), i = 0 .. rot/2-1: inv_freq of
    LlamaRotaryEmbedding / GPTNeoXRotaryEmbedding, computed here in float64."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, rot, 2, dtype=torch.int64).to(torch.float64) / rot))
    return torch.arange(S_, dtype=torch.float64)[:, None] * inv_freq[None, :]


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rope(x, theta, rot=None, form="half"):
    """RoPE on the first `rot` dims of x (B, H, S, hd); the rest passes through.
    form "half" (Hugging Face, apply_rotary_pos_emb): dim j < rot/2 pairs with j + rot/2,
        angle of pair j = pos * theta^(-2j/rot); cos/sin = cat(freqs, freqs).
    form "interleaved" (Meta's original llama, GPT-J's rotate_every_two): dim 2j pairs
        with 2j + 1, same angle for pair j."""
    rot = x.shape[-1] if rot is None else rot
    xr, xp = x[..., :rot], x[..., rot:]
    freqs = rope_freqs(x.shape[-2], rot, theta)
    if form == "half":
        emb = torch.cat((freqs, freqs), dim=-1)
        out = xr * emb.cos() + rotate_half(xr) * emb.sin()
    else:
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        c, s = freqs.cos(), freqs.sin()
        out = torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)
    return torch.cat((out, xp), dim=-1)


def attend(q, k, v, causal=True, kv_map="div", window=None, keep=None):
    """q (B, H, S, hd), k and v (B, KV, S, hd). kv_map "div": query head h reads kv head
    h // (H/KV) (repeat_kv, = repeat_interleave); "mod" (mistake): h % KV.
    softmax(q k^T / sqrt(hd) + mask) v, mask -inf above the diagonal (HF adds
    finfo.min: the same after the softmax); window W: key j seen from i iff i - W < j."""
    H, KV = q.shape[1], k.shape[1]
    if kv_map == "div":
        k, v = k.repeat_interleave(H // KV, dim=1), v.repeat_interleave(H // KV, dim=1)
    else:
        k, v = k.repeat(1, H // KV, 1, 1), v.repeat(1, H // KV, 1, 1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    n = q.shape[-2]
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    blocked = torch.zeros(n, n, dtype=torch.bool)
    if causal:
        blocked |= j > i
    if window is not None:
        blocked |= j <= i - window
    weights = torch.softmax(scores.masked_fill(blocked, float("-inf")), dim=-1)
    if keep is not None:
        keep["weights"] = weights
    return weights @ v


def heads(x, n, hd):
    """(B, S, n*hd) -> (B, n, S, hd)"""
    return x.view(x.shape[0], x.shape[1], n, hd).transpose(1, 2)


def merge(x):
    """(B, n, S, hd) -> (B, S, n*hd)"""
    return x.transpose(1, 2).reshape(x.shape[0], x.shape[2], -1)


def linear(x, w, name, bias=True):
    out = x @ w[name + ".weight"].t()
    if bias and name + ".bias" in w:
        out = out + w[name + ".bias"]
    return out


# ---- Llama, Mistral, Qwen2, Gemma ------------------------------------------------------

def llama_family(w, cfg, ids, mistake=None, keep=None):
    """LlamaForCausalLM (modeling_llama.py: LlamaModel.forward, LlamaDecoderLayer,
    LlamaAttention, LlamaMLP, LlamaRMSNorm), MistralForCausalLM and Qwen2ForCausalLM (the
    same with Qwen2's q/k/v biases) and GemmaForCausalLM (GemmaRMSNorm's (1 + w), the
    embeddings times sqrt(hidden_size), GeGLU with hidden_activation):
        x = embed_tokens[ids] (* sqrt(hidden) for gemma)
        per layer: x = x + o_proj(attn(rope(q), rope(k), v)) of input_layernorm(x)
                   x = x + down_proj(act(gate_proj(h)) * up_proj(h)), h = post_attention_layernorm(x)
        logits = lm_head(norm(x)), lm_head = embed_tokens when tied."""
    mt = cfg["model_type"]
    D, H = cfg["hidden_size"], cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or H
    hd = cfg.get("head_dim") or D // H
    eps, theta = cfg["rms_norm_eps"], cfg.get("rope_theta", 10000.0)
    if mistake == "rope_theta_default":
        theta = 10000.0
    if mt == "gemma":
        # GemmaMLP: hidden_activation, or gelu_pytorch_tanh when it is null; hidden_act is ignored
        act = ACT["gelu" if mistake == "gelu_erf" else (cfg.get("hidden_activation") or "gelu_pytorch_tanh")]
        norm = (lambda x, g: rms_norm(x, g, eps)) if mistake == "weight_not_1_plus" else \
            (lambda x, g: gemma_rms_norm(x, g, eps))
    else:
        act = ACT[cfg["hidden_act"]]
        norm = (lambda x, g: norm_as_layernorm(x, g, eps)) if mistake == "layernorm" else \
            (lambda x, g: rms_norm(x, g, eps))
    window = None
    if mistake == "sliding_window_applied":
        window = cfg["sliding_window"]
    form = "interleaved" if mistake == "interleaved" else "half"
    qkv_bias = mistake != "no_qkv_bias"

    x = w["model.embed_tokens.weight"][ids]
    if mt == "gemma" and mistake != "no_embed_scale":
        x = x * torch.tensor(D ** 0.5, dtype=x.dtype)  # GemmaModel's normalizer, in the hidden dtype
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = norm(x, w[p + "input_layernorm.weight"])
        q = heads(linear(h, w, p + "self_attn.q_proj", qkv_bias), H, hd)
        k = heads(linear(h, w, p + "self_attn.k_proj", qkv_bias), KV, hd)
        v = heads(linear(h, w, p + "self_attn.v_proj", qkv_bias), KV, hd)
        q, k = rope(q, theta, form=form), rope(k, theta, form=form)
        lk = keep if (keep is not None and i == 0) else None
        if lk is not None:
            lk["q_rot"] = q
        a = attend(q, k, v, kv_map="mod" if mistake == "kv_modulo" else "div", window=window, keep=lk)
        x = x + linear(merge(a), w, p + "self_attn.o_proj")
        h = norm(x, w[p + "post_attention_layernorm.weight"])
        x = x + linear(act(linear(h, w, p + "mlp.gate_proj")) * linear(h, w, p + "mlp.up_proj"),
                       w, p + "mlp.down_proj")
    x = norm(x, w["model.norm.weight"])
    head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else w["lm_head.weight"]
    return x @ head.t()


def llama_weights(d, cfg, qkv_bias=False, gemma=False):
    D, H, F_ = cfg["hidden_size"], cfg["num_attention_heads"], cfg["intermediate_size"]
    KV = cfg.get("num_key_value_heads") or H
    hd = cfg.get("head_dim") or D // H
    V = cfg["vocab_size"]
    gain = (lambda n: d.normal(n)) if gemma else d.gain   # gemma stores w of (1 + w): around 0
    w = collections.OrderedDict()
    w["model.embed_tokens.weight"] = d.w(V, D)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w[p + "self_attn.q_proj.weight"] = d.w(H * hd, D)
        if qkv_bias:
            w[p + "self_attn.q_proj.bias"] = d.w(H * hd)
        w[p + "self_attn.k_proj.weight"] = d.w(KV * hd, D)
        if qkv_bias:
            w[p + "self_attn.k_proj.bias"] = d.w(KV * hd)
        w[p + "self_attn.v_proj.weight"] = d.w(KV * hd, D)
        if qkv_bias:
            w[p + "self_attn.v_proj.bias"] = d.w(KV * hd)
        w[p + "self_attn.o_proj.weight"] = d.w(D, H * hd)
        w[p + "mlp.gate_proj.weight"] = d.w(F_, D)
        w[p + "mlp.up_proj.weight"] = d.w(F_, D)
        w[p + "mlp.down_proj.weight"] = d.w(D, F_)
        w[p + "input_layernorm.weight"] = gain(D)
        w[p + "post_attention_layernorm.weight"] = gain(D)
    w["model.norm.weight"] = gain(D)
    if not cfg.get("tie_word_embeddings"):
        w["lm_head.weight"] = d.w(V, D)
    return w


def meta_permute_inverse(wt, n_heads, dim1, dim2):
    """convert_llama_weights_to_hf.py's permute(w) = w.view(n, dim1/n/2, 2, dim2)
    .transpose(1, 2).reshape(dim1, dim2) takes Meta's q/k rows to HF's; this undoes it."""
    return wt.view(n_heads, 2, dim1 // n_heads // 2, dim2).transpose(1, 2).reshape(dim1, dim2)


# ---- GPT-2 -----------------------------------------------------------------------------

def gpt2(w, cfg, ids, mistake=None):
    """GPT2LMHeadModel (modeling_gpt2.py: GPT2Model, GPT2Block, GPT2Attention, GPT2MLP,
    Conv1D): pre-LN; Conv1D stores its weight as (in, out) and computes x @ W + b; c_attn's
    output splits into q | k | v, each then into heads; scores / sqrt(head_dim)
    (scale_attn_weights); activation_function gelu_new (tanh); ln_f; lm_head tied to wte."""
    D, H, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    hd = D // H
    act = ACT["gelu" if mistake == "gelu_erf" else cfg["activation_function"]]

    def conv1d(x, name, linear_layout=False):
        W = w[name + ".weight"]
        return x @ (W.t() if linear_layout else W) + w[name + ".bias"]

    x = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][: ids.shape[1]]
    for i in range(cfg["n_layer"]):
        p = f"transformer.h.{i}."
        h = layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        q, k, v = conv1d(h, p + "attn.c_attn").split(D, dim=-1)
        a = attend(heads(q, H, hd), heads(k, H, hd), heads(v, H, hd))
        x = x + conv1d(merge(a), p + "attn.c_proj", linear_layout=mistake == "conv1d_as_linear")
        h = layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        x = x + conv1d(act(conv1d(h, p + "mlp.c_fc")), p + "mlp.c_proj")
    x = layer_norm(x, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], eps)
    return x @ w["transformer.wte.weight"].t()


# ---- GPT-NeoX --------------------------------------------------------------------------

def gpt_neox(w, cfg, ids, mistake=None):
    """GPTNeoXForCausalLM (modeling_gpt_neox.py: GPTNeoXAttention._attn_projections_and_rope
    and ._attn, GPTNeoXLayer, GPTNeoXMLP, GPTNeoXRotaryEmbedding): query_key_value's output
    viewed as (B, S, H, 3*head_size), each head's q, k, v side by side; RoPE (rotate-half)
    on the first rotary_ndims = int(head_size * rotary_pct) dims of q and k, base
    rotary_emb_base; use_parallel_residual: x = x + attn(ln1(x)) + mlp(ln2(x));
    final_layer_norm; embed_out untied."""
    D, H, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["layer_norm_eps"]
    hd = D // H
    rot = hd if mistake == "full_rotary" else int(hd * cfg["rotary_pct"])
    parallel = cfg["use_parallel_residual"] and mistake != "sequential_residual"
    act = ACT[cfg["hidden_act"]]

    def attention(h, p):
        qkv = linear(h, w, p + "attention.query_key_value")
        if mistake == "qkv_blocks":   # split as [all q | all k | all v], as GPT-2 and Megatron-free code do
            q, k, v = (heads(t, H, hd) for t in qkv.split(D, dim=-1))
        else:
            qkv = qkv.view(qkv.shape[0], qkv.shape[1], H, 3 * hd)
            q, k, v = (qkv[..., j * hd:(j + 1) * hd].transpose(1, 2) for j in range(3))
        q, k = rope(q, cfg["rotary_emb_base"], rot), rope(k, cfg["rotary_emb_base"], rot)
        return linear(merge(attend(q, k, v)), w, p + "attention.dense")

    x = w["gpt_neox.embed_in.weight"][ids]
    for i in range(cfg["num_hidden_layers"]):
        p = f"gpt_neox.layers.{i}."
        ln1 = lambda t: layer_norm(t, w[p + "input_layernorm.weight"], w[p + "input_layernorm.bias"], eps)
        ln2 = lambda t: layer_norm(t, w[p + "post_attention_layernorm.weight"],
                                   w[p + "post_attention_layernorm.bias"], eps)
        mlp = lambda t: linear(act(linear(t, w, p + "mlp.dense_h_to_4h")), w, p + "mlp.dense_4h_to_h")
        a = attention(ln1(x), p)
        if parallel:
            x = x + a + mlp(ln2(x))
        else:
            x = x + a
            x = x + mlp(ln2(x))
    x = layer_norm(x, w["gpt_neox.final_layer_norm.weight"], w["gpt_neox.final_layer_norm.bias"], eps)
    return x @ w["embed_out.weight"].t()


# ---- BERT ------------------------------------------------------------------------------

def bert(w, cfg, ids, token_types, mistake=None):
    """BertForMaskedLM (modeling_bert.py: BertEmbeddings, BertSelfAttention, BertSelfOutput,
    BertIntermediate, BertOutput, BertLMPredictionHead, BertPredictionHeadTransform):
    x = LayerNorm(word[ids] + token_type[tt] + position[pos]); post-LN layers, no mask
    (every position sees every other); head: decoder(LayerNorm(act(dense(x)))) + bias,
    decoder tied to word_embeddings."""
    D, H, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["layer_norm_eps"]
    hd = D // H
    act = ACT["gelu_pytorch_tanh" if mistake == "gelu_tanh" else cfg["hidden_act"]]
    e = "bert.embeddings."
    x = w[e + "word_embeddings.weight"][ids] + w[e + "position_embeddings.weight"][: ids.shape[1]]
    if mistake != "no_token_types":
        x = x + w[e + "token_type_embeddings.weight"][token_types]
    x = layer_norm(x, w[e + "LayerNorm.weight"], w[e + "LayerNorm.bias"], eps)
    for i in range(cfg["num_hidden_layers"]):
        p = f"bert.encoder.layer.{i}."
        q, k, v = (heads(linear(x, w, p + "attention.self." + n), H, hd) for n in ("query", "key", "value"))
        a = linear(merge(attend(q, k, v, causal=mistake == "causal")), w, p + "attention.output.dense")
        x = layer_norm(a + x, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], eps)
        h = act(linear(x, w, p + "intermediate.dense"))
        x = layer_norm(linear(h, w, p + "output.dense") + x, w[p + "output.LayerNorm.weight"],
                       w[p + "output.LayerNorm.bias"], eps)
    t = "cls.predictions.transform."
    x = act(linear(x, w, t + "dense"))
    x = layer_norm(x, w[t + "LayerNorm.weight"], w[t + "LayerNorm.bias"], eps)
    return x @ w[e + "word_embeddings.weight"].t() + w["cls.predictions.bias"]


def check_bert_layers(w, cfg, ids, tt):
    """An independent check of bert()'s encoder: PyTorch's own post-LN
    nn.TransformerEncoderLayer (gelu, eps 1e-12) with BERT's q/k/v stacked as in_proj."""
    D, H, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["layer_norm_eps"]
    e = "bert.embeddings."
    x = w[e + "word_embeddings.weight"][ids] + w[e + "position_embeddings.weight"][: ids.shape[1]] + \
        w[e + "token_type_embeddings.weight"][tt]
    x = layer_norm(x, w[e + "LayerNorm.weight"], w[e + "LayerNorm.bias"], eps)
    ours = x
    for i in range(cfg["num_hidden_layers"]):
        p = f"bert.encoder.layer.{i}."
        layer = torch.nn.TransformerEncoderLayer(D, H, cfg["intermediate_size"], dropout=0.0, activation="gelu",
                                                 layer_norm_eps=eps, batch_first=True).to(torch.float64).eval()
        sd = {"self_attn.in_proj_weight": torch.cat([w[p + f"attention.self.{n}.weight"] for n in ("query", "key", "value")]),
              "self_attn.in_proj_bias": torch.cat([w[p + f"attention.self.{n}.bias"] for n in ("query", "key", "value")]),
              "self_attn.out_proj.weight": w[p + "attention.output.dense.weight"],
              "self_attn.out_proj.bias": w[p + "attention.output.dense.bias"],
              "linear1.weight": w[p + "intermediate.dense.weight"], "linear1.bias": w[p + "intermediate.dense.bias"],
              "linear2.weight": w[p + "output.dense.weight"], "linear2.bias": w[p + "output.dense.bias"],
              "norm1.weight": w[p + "attention.output.LayerNorm.weight"],
              "norm1.bias": w[p + "attention.output.LayerNorm.bias"],
              "norm2.weight": w[p + "output.LayerNorm.weight"], "norm2.bias": w[p + "output.LayerNorm.bias"]}
        layer.load_state_dict(sd)
        x = layer(x).detach()
        # ours, step by step as bert() does it
        q, k, v = (heads(linear(ours, w, p + "attention.self." + n), H, D // H) for n in ("query", "key", "value"))
        a = linear(merge(attend(q, k, v, causal=False)), w, p + "attention.output.dense")
        ours = layer_norm(a + ours, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], eps)
        h = F.gelu(linear(ours, w, p + "intermediate.dense"))
        ours = layer_norm(linear(h, w, p + "output.dense") + ours, w[p + "output.LayerNorm.weight"],
                          w[p + "output.LayerNorm.bias"], eps)
    m = max_abs(ours, x)
    assert m < 1e-10, m
    print(f"  bert: its encoder agrees with nn.TransformerEncoderLayer (max |diff| {m:.1e})")


# ---- configs ---------------------------------------------------------------------------

def llama_config():
    return {"architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
            "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 64,
            "initializer_range": 0.02, "intermediate_size": 96, "max_position_embeddings": 256,
            "mlp_bias": False, "model_type": "llama", "num_attention_heads": 4, "num_hidden_layers": 2,
            "num_key_value_heads": 2, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": None,
            "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "float32",
            "transformers_version": TRANSFORMERS_VERSION, "use_cache": True, "vocab_size": 104}


def mistral_config():
    return {"architectures": ["MistralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1,
            "eos_token_id": 2, "head_dim": 16, "hidden_act": "silu", "hidden_size": 64,
            "initializer_range": 0.02, "intermediate_size": 96, "max_position_embeddings": 1024,
            "model_type": "mistral", "num_attention_heads": 4, "num_hidden_layers": 2,
            "num_key_value_heads": 2, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0,
            "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "float32",
            "transformers_version": TRANSFORMERS_VERSION, "use_cache": True, "vocab_size": 112}


def qwen2_config():
    return {"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 100,
            "eos_token_id": 101, "hidden_act": "silu", "hidden_size": 64, "initializer_range": 0.02,
            "intermediate_size": 96, "max_position_embeddings": 1024, "max_window_layers": 2,
            "model_type": "qwen2", "num_attention_heads": 4, "num_hidden_layers": 2,
            "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
            "sliding_window": 4, "tie_word_embeddings": True, "torch_dtype": "float32",
            "transformers_version": TRANSFORMERS_VERSION, "use_cache": True, "use_sliding_window": False,
            "vocab_size": 108}


def gemma_config():
    # as google/gemma-2b's file: hidden_act "gelu" is there and ignored (GemmaMLP reads hidden_activation)
    return {"architectures": ["GemmaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
            "bos_token_id": 2, "eos_token_id": 1, "head_dim": 32, "hidden_act": "gelu",
            "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 64, "initializer_range": 0.02,
            "intermediate_size": 96, "max_position_embeddings": 8192, "model_type": "gemma",
            "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 1, "pad_token_id": 0,
            "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 10000.0, "tie_word_embeddings": True,
            "torch_dtype": "float32", "transformers_version": TRANSFORMERS_VERSION, "use_cache": True,
            "vocab_size": 120}


def gpt_neox_config():
    # as EleutherAI/pythia-*'s files (no attention_bias key: it defaults to true)
    return {"architectures": ["GPTNeoXForCausalLM"], "bos_token_id": 0, "eos_token_id": 0,
            "hidden_act": "gelu", "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": 96,
            "layer_norm_eps": 1e-05, "max_position_embeddings": 32, "model_type": "gpt_neox",
            "num_attention_heads": 4, "num_hidden_layers": 2, "rotary_emb_base": 10000, "rotary_pct": 0.25,
            "tie_word_embeddings": False, "torch_dtype": "float32",
            "transformers_version": TRANSFORMERS_VERSION, "use_cache": True, "use_parallel_residual": True,
            "vocab_size": 100}


def gpt2_config():
    # as openai-community/gpt2's file (GPT-2's own key names), n_inner set (null means 4 * n_embd)
    return {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
            "bos_token_id": 95, "embd_pdrop": 0.1, "eos_token_id": 95, "initializer_range": 0.02,
            "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 32, "n_embd": 64, "n_head": 4,
            "n_inner": 96, "n_layer": 2, "n_positions": 32, "reorder_and_upcast_attn": False,
            "resid_pdrop": 0.1, "scale_attn_by_inverse_layer_idx": False, "scale_attn_weights": True,
            "summary_activation": None, "summary_first_dropout": 0.1, "summary_proj_to_labels": True,
            "summary_type": "cls_index", "summary_use_proj": True, "torch_dtype": "float32",
            "transformers_version": TRANSFORMERS_VERSION, "use_cache": True, "vocab_size": 100}


def bert_config():
    # as google-bert/bert-base-uncased's file
    return {"architectures": ["BertForMaskedLM"], "attention_probs_dropout_prob": 0.1,
            "classifier_dropout": None, "gradient_checkpointing": False, "hidden_act": "gelu",
            "hidden_dropout_prob": 0.1, "hidden_size": 64, "initializer_range": 0.02,
            "intermediate_size": 96, "layer_norm_eps": 1e-12, "max_position_embeddings": 32,
            "model_type": "bert", "num_attention_heads": 4, "num_hidden_layers": 2, "pad_token_id": 0,
            "position_embedding_type": "absolute", "torch_dtype": "float32",
            "transformers_version": TRANSFORMERS_VERSION, "type_vocab_size": 2, "use_cache": True,
            "vocab_size": 116}


# ---- the folders -----------------------------------------------------------------------

MANIFEST = collections.OrderedDict()


def folder(name):
    path = os.path.join(HERE, name)
    os.makedirs(path)
    return path


def check_mistakes(name, right, mistakes):
    """Save each mistake's logits; each must differ from the right ones by > MARGIN."""
    margins = collections.OrderedDict()
    for what, logits in mistakes.items():
        m, score = max_abs(logits, right), tol_score(logits, right)
        assert m > MARGIN and score > MARGIN, f"{name}: mistake {what} moves the logits by only {m:.2e} ({score:.2e})"
        margins[what] = {"max_abs": float(f"{m:.4g}"), "score": float(f"{score:.4g}")}
        print(f"  {name}: mistake_{what}: max |diff| {m:.4f}, max |diff| / max(1, |want|) {score:.4f}")
    return margins


def max_abs(a, b):
    return float((a - b).abs().max())


def tol_score(got, want):
    """What `tscope run --expect` compares with --tol: max |got - want| / max(1, |want|)."""
    return float(((got - want).abs() / want.abs().clamp(min=1.0)).max())


def write_model(name, cfg, weights, dtypes, ids, logits, mistakes=None, extra_buffers=None,
                storage="safetensors", shards=None, extra_npy=None, note=""):
    """One Hugging Face folder: config.json, the weights (with the buffers real files carry),
    ids.npy, logits.npy, mistake_*.npy; checks the weights read back as the reference used."""
    path = folder(name)
    write_config(path, cfg)
    tensors = collections.OrderedDict(weights)
    all_dtypes = {k: dtypes for k in weights}
    for k, (t, dt) in (extra_buffers or {}).items():
        tensors[k] = t
        all_dtypes[k] = dt
    files = []
    if storage == "safetensors" and shards is None:
        save_safetensors(os.path.join(path, "model.safetensors"), tensors, all_dtypes)
        files = ["model.safetensors"]
    elif storage == "safetensors":
        weight_map, total = {}, 0
        for si, names in enumerate(shards):
            fn = f"model-{si + 1:05d}-of-{len(shards):05d}.safetensors"
            total += save_safetensors(os.path.join(path, fn), {n: tensors[n] for n in names}, all_dtypes)
            weight_map.update({n: fn for n in names})
            files.append(fn)
        assert sorted(weight_map) == sorted(tensors), "every tensor in exactly one shard"
        with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
            f.write(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map},
                               indent=2, sort_keys=True) + "\n")
    else:
        sd = collections.OrderedDict((k, v.to(ST[all_dtypes[k]][1]).contiguous()) for k, v in tensors.items())
        buf = io.BytesIO()
        torch.save(sd, buf)
        with open(os.path.join(path, "pytorch_model.bin"), "wb") as f:
            f.write(buf.getvalue())
        files = ["pytorch_model.bin"]
    # read back: every weight is what the reference computed with
    back = {}
    for fn in files:
        if fn.endswith(".bin"):
            back.update({k: (v.to(torch.float64) if v.is_floating_point() else v)
                         for k, v in torch.load(os.path.join(path, fn)).items()})
        else:
            back.update(load_safetensors(os.path.join(path, fn)))
    assert sorted(back) == sorted(tensors), name
    for k, v in weights.items():
        assert torch.equal(back[k], v), f"{name}: {k} changed on the way"
    save_npy(path, "ids", ids.numpy().astype("<i8"))
    for k, a in (extra_npy or {}).items():
        save_npy(path, k, a)
    save_npy(path, "logits", f32(logits))
    margins = check_mistakes(name, logits, mistakes or {})
    for what, lg in (mistakes or {}).items():
        save_npy(path, "mistake_" + what, f32(lg))
    MANIFEST[name] = collections.OrderedDict(
        [("model_type", cfg["model_type"]), ("weights", files), ("dtype", cfg["torch_dtype"]),
         ("ids", "ids.npy"), ("expect", "logits.npy"), ("logits_shape", list(logits.shape)),
         ("mistakes", collections.OrderedDict((f"mistake_{k}.npy", v) for k, v in margins.items()))])
    if note:
        MANIFEST[name]["note"] = note
    return path


def rounded_all(w, dtype):
    return collections.OrderedDict((k, rounded(v, dtype)) for k, v in w.items())


def run_llama_family(cfg, w, ids, mistakes, keep=None):
    right = llama_family(w, cfg, ids, keep=keep)
    return right, collections.OrderedDict((m, llama_family(w, cfg, ids, mistake=m)) for m in mistakes)


def make_llama():
    cfg, d = llama_config(), Draw(4001)
    w = llama_weights(d, cfg)
    ids = d.ids(cfg["vocab_size"])
    keep = {}
    right, mistakes = run_llama_family(cfg, w, ids, ["interleaved", "layernorm"], keep)
    # The conventions, checked: Meta's original layout (q/k rows as convert_llama_weights_to_hf.py
    # found them) with interleaved RoPE gives exactly HF's rotate-half on HF's permuted rows.
    H, KV, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["hidden_size"]
    hd = D // H
    meta = collections.OrderedDict(w)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}.self_attn."
        meta[p + "q_proj.weight"] = meta_permute_inverse(w[p + "q_proj.weight"], H, H * hd, D)
        meta[p + "k_proj.weight"] = meta_permute_inverse(w[p + "k_proj.weight"], KV, KV * hd, D)
    meta_logits = llama_family(meta, cfg, ids, mistake="interleaved")
    assert float((meta_logits - right).abs().max()) < 1e-12, "Meta layout + interleaved != HF + rotate-half"
    print(f"  llama: Meta rows + interleaved RoPE == HF rows + rotate-half "
          f"(max |diff| {float((meta_logits - right).abs().max()):.1e})")
    write_model("llama", cfg, w, "F32", ids, right, mistakes,
                extra_npy={"q_rot": f32(keep["q_rot"]), "weights": f32(keep["weights"])})

    # the same model as a sharded bf16 folder, with the rotary buffers old conversions saved
    cfg16 = dict(cfg, torch_dtype="bfloat16")
    wb = rounded_all(w, "BF16")
    right16 = llama_family(wb, cfg16, ids)
    inv_freq = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    buffers = {f"model.layers.{i}.self_attn.rotary_emb.inv_freq": (inv_freq.to(torch.float64), "BF16")
               for i in range(cfg["num_hidden_layers"])}
    names = list(wb) + list(buffers)
    first = [n for n in names if n.startswith("model.embed_tokens") or n.startswith("model.layers.0.")]
    second = [n for n in names if n not in first]
    b16 = float((right16 - right).abs().max())
    print(f"  llama_bf16: its logits differ from the float32 folder's by {b16:.4f} (max abs)")
    write_model("llama_bf16", cfg16, wb, "BF16", ids, right16, extra_buffers=buffers, shards=[first, second],
                note=f"logits_bf16: from the bf16-rounded weights; {b16:.3g} from llama/logits.npy")
    MANIFEST["llama_bf16"]["differs_from_f32_logits_by"] = float(f"{b16:.4g}")


def make_mistral():
    cfg, d = mistral_config(), Draw(4002)
    w = llama_weights(d, cfg)
    ids = d.ids(cfg["vocab_size"])
    right, mistakes = run_llama_family(cfg, w, ids, ["kv_modulo", "rope_theta_default"])
    write_model("mistral", cfg, w, "F32", ids, right, mistakes)


def make_qwen2():
    cfg, d = qwen2_config(), Draw(4003)
    w = llama_weights(d, cfg, qkv_bias=True)
    ids = d.ids(cfg["vocab_size"])
    right, mistakes = run_llama_family(cfg, w, ids, ["no_qkv_bias", "sliding_window_applied"])
    write_model("qwen2", cfg, w, "F32", ids, right, mistakes)
    cfg16 = dict(cfg, torch_dtype="float16")
    wh = rounded_all(w, "F16")
    right16 = llama_family(wh, cfg16, ids)
    h16 = float((right16 - right).abs().max())
    print(f"  qwen2_f16: its logits differ from the float32 folder's by {h16:.4f} (max abs)")
    write_model("qwen2_f16", cfg16, wh, "F16", ids, right16,
                note=f"from the f16-rounded weights; {h16:.3g} from qwen2/logits.npy")
    MANIFEST["qwen2_f16"]["differs_from_f32_logits_by"] = float(f"{h16:.4g}")


def make_gemma():
    cfg, d = gemma_config(), Draw(4004)
    w = llama_weights(d, cfg, gemma=True)
    ids = d.ids(cfg["vocab_size"])
    right, mistakes = run_llama_family(cfg, w, ids, ["weight_not_1_plus", "no_embed_scale", "gelu_erf"])
    write_model("gemma", cfg, w, "F32", ids, right, mistakes)


def make_gpt_neox():
    cfg, d = gpt_neox_config(), Draw(4005)
    D, F_, V, P = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"], cfg["max_position_embeddings"]
    H = cfg["num_attention_heads"]
    rot = int(D // H * cfg["rotary_pct"])
    w = collections.OrderedDict()
    w["gpt_neox.embed_in.weight"] = d.w(V, D)
    buffers = {}
    for i in range(cfg["num_hidden_layers"]):
        p = f"gpt_neox.layers.{i}."
        w[p + "input_layernorm.weight"], w[p + "input_layernorm.bias"] = d.gain(D), d.w(D)
        w[p + "post_attention_layernorm.weight"], w[p + "post_attention_layernorm.bias"] = d.gain(D), d.w(D)
        w[p + "attention.query_key_value.weight"], w[p + "attention.query_key_value.bias"] = d.w(3 * D, D), d.w(3 * D)
        w[p + "attention.dense.weight"], w[p + "attention.dense.bias"] = d.w(D, D), d.w(D)
        w[p + "mlp.dense_h_to_4h.weight"], w[p + "mlp.dense_h_to_4h.bias"] = d.w(F_, D), d.w(F_)
        w[p + "mlp.dense_4h_to_h.weight"], w[p + "mlp.dense_4h_to_h.bias"] = d.w(D, F_), d.w(D)
        # the buffers Pythia's files carry: the causal mask, masked_bias, the rotary inv_freq
        buffers[p + "attention.bias"] = (torch.tril(torch.ones(P, P, dtype=torch.bool)).view(1, 1, P, P), "BOOL")
        buffers[p + "attention.masked_bias"] = (torch.tensor(-1e9), "F32")
        buffers[p + "attention.rotary_emb.inv_freq"] = (
            (1.0 / (cfg["rotary_emb_base"] ** (torch.arange(0, rot, 2).float() / rot))).to(torch.float64), "F32")
    w["gpt_neox.final_layer_norm.weight"], w["gpt_neox.final_layer_norm.bias"] = d.gain(D), d.w(D)
    w["embed_out.weight"] = d.w(V, D)
    ids = d.ids(V)
    right = gpt_neox(w, cfg, ids)
    mistakes = collections.OrderedDict((m, gpt_neox(w, cfg, ids, m))
                                       for m in ("sequential_residual", "full_rotary", "qkv_blocks"))
    write_model("gpt_neox", cfg, w, "F32", ids, right, mistakes, extra_buffers=buffers)
    # as Pythia's files: pytorch_model.bin (torch.save of the state_dict, zip format) in float16
    cfg16 = dict(cfg, torch_dtype="float16")
    wh = rounded_all(w, "F16")
    right16 = gpt_neox(wh, cfg16, ids)
    h16 = max_abs(right16, right)
    print(f"  gpt_neox_bin: its logits differ from the float32 folder's by {h16:.4f} (max abs)")
    write_model("gpt_neox_bin", cfg16, wh, "F16", ids, right16, extra_buffers=buffers, storage="bin",
                note=f"gpt_neox's weights rounded to float16, as pytorch_model.bin; {h16:.3g} from gpt_neox/logits.npy")
    MANIFEST["gpt_neox_bin"]["differs_from_f32_logits_by"] = float(f"{h16:.4g}")


def gpt2_weights(d, cfg):
    D, F_, V, P = cfg["n_embd"], cfg["n_inner"], cfg["vocab_size"], cfg["n_positions"]
    w = collections.OrderedDict()
    w["transformer.wte.weight"], w["transformer.wpe.weight"] = d.w(V, D), d.w(P, D)
    buffers = {}
    for i in range(cfg["n_layer"]):
        p = f"transformer.h.{i}."
        w[p + "ln_1.weight"], w[p + "ln_1.bias"] = d.gain(D), d.w(D)
        w[p + "attn.c_attn.weight"], w[p + "attn.c_attn.bias"] = d.w(D, 3 * D), d.w(3 * D)   # Conv1D: (in, out)
        w[p + "attn.c_proj.weight"], w[p + "attn.c_proj.bias"] = d.w(D, D), d.w(D)
        w[p + "ln_2.weight"], w[p + "ln_2.bias"] = d.gain(D), d.w(D)
        # GELU's negative tail (see TAIL): c_fc's bias N(-3, 0.2), c_proj N(0, 1)
        w[p + "mlp.c_fc.weight"], w[p + "mlp.c_fc.bias"] = d.w(D, F_), d.normal(F_, mean=TAIL_BIAS)
        w[p + "mlp.c_proj.weight"], w[p + "mlp.c_proj.bias"] = d.normal(F_, D, std=TAIL_OUT_STD), d.w(D)
        # what openai-community/gpt2's files carry: the causal mask (uint8 in old saves) and masked_bias
        buffers[p + "attn.bias"] = (torch.tril(torch.ones(P, P, dtype=torch.uint8)).view(1, 1, P, P), "U8")
        buffers[p + "attn.masked_bias"] = (torch.tensor(-1e4), "F32")
    w["transformer.ln_f.weight"], w["transformer.ln_f.bias"] = d.gain(D), d.w(D)
    return w, buffers


def make_gpt2():
    cfg, d = gpt2_config(), Draw(4006)
    w, buffers = gpt2_weights(d, cfg)
    ids = d.ids(cfg["vocab_size"])
    right = gpt2(w, cfg, ids)
    mistakes = collections.OrderedDict((m, gpt2(w, cfg, ids, m)) for m in ("gelu_erf", "conv1d_as_linear"))
    write_model("gpt2", cfg, w, "F32", ids, right, mistakes, extra_buffers=buffers)


def make_bert():
    cfg, d = bert_config(), Draw(4007)
    D, F_, V, P = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"], cfg["max_position_embeddings"]
    w = collections.OrderedDict()
    e = "bert.embeddings."
    w[e + "word_embeddings.weight"], w[e + "position_embeddings.weight"] = d.w(V, D), d.w(P, D)
    w[e + "token_type_embeddings.weight"] = d.w(cfg["type_vocab_size"], D)
    w[e + "LayerNorm.weight"], w[e + "LayerNorm.bias"] = d.gain(D), d.w(D)
    for i in range(cfg["num_hidden_layers"]):
        p = f"bert.encoder.layer.{i}."
        for n in ("query", "key", "value"):
            w[p + f"attention.self.{n}.weight"], w[p + f"attention.self.{n}.bias"] = d.w(D, D), d.w(D)
        w[p + "attention.output.dense.weight"], w[p + "attention.output.dense.bias"] = d.w(D, D), d.w(D)
        w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"] = d.gain(D), d.w(D)
        # GELU's negative tail (see TAIL): intermediate's bias N(-3, 0.2), output.dense N(0, 1)
        w[p + "intermediate.dense.weight"], w[p + "intermediate.dense.bias"] = d.w(F_, D), d.normal(F_, mean=TAIL_BIAS)
        w[p + "output.dense.weight"], w[p + "output.dense.bias"] = d.normal(D, F_, std=TAIL_OUT_STD), d.w(D)
        w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"] = d.gain(D), d.w(D)
    # BertForPreTraining's parts bert-base-uncased's file carries and BertForMaskedLM does not use
    w["bert.pooler.dense.weight"], w["bert.pooler.dense.bias"] = d.w(D, D), d.w(D)
    w["cls.predictions.bias"] = d.w(V)
    t = "cls.predictions.transform."
    w[t + "dense.weight"], w[t + "dense.bias"] = d.w(D, D), d.w(D)
    w[t + "LayerNorm.weight"], w[t + "LayerNorm.bias"] = d.gain(D), d.w(D)
    w["cls.seq_relationship.weight"], w["cls.seq_relationship.bias"] = d.w(2, D), d.w(2)
    # cls.predictions.decoder.weight/.bias are tied (word_embeddings, cls.predictions.bias):
    # save_pretrained leaves them out of model.safetensors
    buffers = {e + "position_ids": (torch.arange(P, dtype=torch.int64).view(1, P), "I64")}
    ids = d.ids(V)
    tt = torch.cat([torch.zeros(B, S // 2, dtype=torch.int64), torch.ones(B, S - S // 2, dtype=torch.int64)], 1)
    right = bert(w, cfg, ids, tt)
    check_bert_layers(w, cfg, ids, tt)
    mistakes = collections.OrderedDict((m, bert(w, cfg, ids, tt, m)) for m in ("no_token_types", "causal", "gelu_tanh"))
    write_model("bert", cfg, w, "F32", ids, right, mistakes, extra_buffers=buffers,
                extra_npy={"token_type_ids": tt.numpy().astype("<i8")})
    MANIFEST["bert"]["token_type_ids"] = "token_type_ids.npy"


# ---- hostile folders -------------------------------------------------------------------

BAD = collections.OrderedDict()


def bad(case, says):
    path = os.path.join(HERE, "bad", case)
    os.makedirs(path)
    BAD[case] = says
    return path


def make_bad():
    """Small llama-shaped folders (hidden 32, 4 heads, 2 kv heads, 1 layer, FFN 32, vocab 16,
    tied) the loader must refuse."""
    base = dict(llama_config(), hidden_size=32, num_hidden_layers=1, intermediate_size=32, vocab_size=16,
                tie_word_embeddings=True)
    d = Draw(4100)
    w = llama_weights(d, base)
    ids = d.ids(base["vocab_size"])
    f32s = {k: "F32" for k in w}

    def plain(case, cfg, says):
        path = bad(case, says)
        write_config(path, cfg)
        save_safetensors(os.path.join(path, "model.safetensors"), w, f32s)
        save_npy(path, "ids", ids.numpy().astype("<i8"))

    plain("config_contradicts_weights", dict(base, hidden_size=64),
          "`hidden_size` 64 in config.json against `model.embed_tokens.weight` [16, 32] "
          "(any tensor of the wrong shape: name it, its shape and the shape the config implies)")
    plain("unsupported_model_type", dict(base, model_type="mamba", architectures=["MambaForCausalLM"]),
          "unsupported model_type \"mamba\" (and the list of supported ones)")
    plain("rope_scaling_linear", dict(base, rope_scaling={"factor": 2.0, "type": "linear"}),
          "unsupported config key `rope_scaling` ({\"type\": \"linear\", \"factor\": 2.0}): "
          "positions would be divided by 2; never computed as plain RoPE")
    plain("rope_scaling_llama3", dict(base, rope_scaling={"factor": 32.0, "high_freq_factor": 4.0,
                                                          "low_freq_factor": 1.0,
                                                          "original_max_position_embeddings": 8192,
                                                          "rope_type": "llama3"}, rope_theta=500000.0),
          "unsupported `rope_scaling` rope_type \"llama3\" (as Llama 3.1/3.2 files have it: it "
          "rescales the low frequencies' inv_freq, so even short inputs differ from plain RoPE)")
    plain("sliding_window_mistral", dict(mistral_config(), hidden_size=32, head_dim=8, num_hidden_layers=1,
                                         intermediate_size=32, vocab_size=16, tie_word_embeddings=True,
                                         sliding_window=4),
          "unsupported `sliding_window` 4 (mistral): the 12-token ids.npy is longer than the window "
          "(refusing any non-null sliding_window is also right; qwen2/ has one that is off)")

    # sharded: two shards named in the index, one of them missing
    names = list(w)
    first = [n for n in names if not n.startswith("model.layers.0.mlp") and n != "model.norm.weight"]
    second = [n for n in names if n not in first]

    def sharded(case, cfg, files_kept, index_extra=None, says=""):
        path = bad(case, says)
        write_config(path, cfg)
        wm, total = {}, 0
        for si, part in enumerate((first, second)):
            fn = f"model-{si + 1:05d}-of-00002.safetensors"
            wm.update({n: fn for n in part})
            target = os.path.join(path, fn) if si in files_kept else os.path.join(HERE, "bad", ".scratch")
            total += save_safetensors(target, {n: w[n] for n in part}, f32s)
        for n, fn in (index_extra or {}).items():
            wm[n] = fn
        with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
            f.write(json.dumps({"metadata": {"total_size": total}, "weight_map": wm}, indent=2, sort_keys=True) + "\n")
        save_npy(path, "ids", ids.numpy().astype("<i8"))

    sharded("missing_shard", base, files_kept={0},
            says="missing shard `model-00002-of-00002.safetensors` named by model.safetensors.index.json "
                 "(for `model.layers.0.mlp.down_proj.weight` and others)")
    sharded("index_names_missing_file", base, files_kept={0, 1},
            index_extra={"model.layers.0.self_attn.q_proj.weight": "model-00003-of-00002.safetensors"},
            says="model.safetensors.index.json names `model-00003-of-00002.safetensors` "
                 "(for `model.layers.0.self_attn.q_proj.weight`), which is not in the folder")
    os.remove(os.path.join(HERE, "bad", ".scratch"))


# ---- main ------------------------------------------------------------------------------

def main():
    for entry in os.listdir(HERE):
        if os.path.isdir(os.path.join(HERE, entry)):
            shutil.rmtree(os.path.join(HERE, entry))
    for make in (make_gpt2, make_llama, make_mistral, make_qwen2, make_gemma, make_gpt_neox, make_bert):
        make()
    make_bad()
    with open(os.path.join(HERE, "manifest.json"), "w") as f:
        f.write(json.dumps({"folders": MANIFEST, "bad": BAD}, indent=2) + "\n")
    with open(os.path.join(HERE, "bad", "README.md"), "w") as f:
        f.write("# Folders the loader must refuse\n\nEach: one line on stderr naming the problem, exit 2; "
                "never a forward computed some other way.\n\n")
        for case, says in BAD.items():
            f.write(f"- `{case}/`: {says}\n")
    total = sum(os.path.getsize(os.path.join(r, fn)) for r, _, fs in os.walk(HERE) for fn in fs)
    print(f"wrote {len(MANIFEST)} folders and {len(BAD)} hostile ones; tests/ref/hf holds {total / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
