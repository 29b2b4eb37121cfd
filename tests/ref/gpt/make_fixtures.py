"""Fixtures of GPT-2's own checkpoint layout, for tests/gpt_test.sh.

Run from the repository root with Debian's python3-torch:

    /usr/bin/python3 tests/ref/gpt/make_fixtures.py

A small GPT-2 written here from the published architecture (Radford et al. 2019 and the
released code's layout): token and position tables wte, wpe; per block ln_1, attn.c_attn and
attn.c_proj, ln_2, mlp.c_fc and mlp.c_proj, where every linear map is a Conv1D whose weight is
stored (in, out); a causal mask held as the buffer attn.bias; scores scaled by 1/sqrt(d_head);
GELU's tanh form ("gelu_new"); LayerNorm eps 1e-5; a final ln_f; the head tied to wte. Random
weights (biases and norm gains away from 0 and 1, so a missing one shows), sizes small enough
to commit: 2 layers, width 32, 4 heads, FFN 128, a context of 16, and a byte-level vocabulary of
258 tokens (GPT-2's byte alphabet and two merges, "He" and "ll"), so "Hello" is three tokens
and every other piece its bytes.

Written:
- small/model.safetensors, small/config.json, small/encoder.json, small/vocab.bpe: the model as
  GPT-2's files come (with the attn.bias / attn.masked_bias buffers).
- prefixed/model.safetensors (+ config.json): the same under Hugging Face GPT2LMHeadModel's
  names, "transformer." before each and lm_head.weight (equal to wte: tied).
- ids.npy: TEXT's token ids (1, 11), int64, for `tscope run --ids`; ids_out_of_vocab.npy: an id
  the vocabulary lacks.
- grads.safetensors, grad_out.npy: autograd's gradients of sum(logits * grad_out) for the ids,
  under tscope's parameter names in nn.Linear's layout, for tests/test_grad_parity.c.
- reference.tstrace: PyTorch's intermediates for TEXT under tscope's step names (q, k, v,
  scores, weights, concat, each sublayer's output, each block's output, the final norm, the
  logits), written with python/tscope_trace.py's trace writer.
"""
import importlib.util
import json
import math
import os
import shutil
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import tscope_trace  # noqa: E402

# tests/ref/make_fixtures.py's safetensors writer, loaded by path: this file has the same name
_spec = importlib.util.spec_from_file_location("ref_fixtures", os.path.join(os.path.dirname(HERE), "make_fixtures.py"))
_ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ref)
save_safetensors = _ref.save_safetensors

torch.manual_seed(0)
L, D, H, F, P, V = 2, 32, 4, 128, 16, 258
TEXT = "Hello, GPT-2!"
# GPT-2's pre-tokenizer cuts TEXT here (letters, punctuation, a space with the letters after it)
PIECES = ["Hello", ",", " GPT", "-", "2", "!"]
MERGES = [("H", "e"), ("l", "l")]  # two merges: "Hello" is He + ll + o


def bytes_to_unicode():
    """GPT-2's map from bytes to printable characters (its encoder.py's)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return bs, [chr(c) for c in cs]


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def make_weights(gen):
    def rnd(*shape, scale=0.2):
        return (scale * torch.randn(*shape, generator=gen)).float()

    w = {"wte.weight": rnd(V, D, scale=0.5), "wpe.weight": rnd(P, D, scale=0.3)}
    for i in range(L):
        h = f"h.{i}."
        w[h + "ln_1.weight"] = 1 + rnd(D)
        w[h + "ln_1.bias"] = rnd(D)
        w[h + "attn.c_attn.weight"] = rnd(D, 3 * D)  # Conv1D: (in, out)
        w[h + "attn.c_attn.bias"] = rnd(3 * D)
        w[h + "attn.c_proj.weight"] = rnd(D, D)
        w[h + "attn.c_proj.bias"] = rnd(D)
        w[h + "ln_2.weight"] = 1 + rnd(D)
        w[h + "ln_2.bias"] = rnd(D)
        w[h + "mlp.c_fc.weight"] = rnd(D, F)
        w[h + "mlp.c_fc.bias"] = rnd(F)
        w[h + "mlp.c_proj.weight"] = rnd(F, D)
        w[h + "mlp.c_proj.bias"] = rnd(D)
        w[h + "attn.bias"] = torch.tril(torch.ones(P, P)).view(1, 1, P, P)
        w[h + "attn.masked_bias"] = torch.tensor(-1e4)
    w["ln_f.weight"] = 1 + rnd(D)
    w["ln_f.bias"] = rnd(D)
    return w


def forward(w, ids, step):
    """GPT-2's forward as published, handing each intermediate to step(name, op, tag, tensor)."""
    B, S = ids.shape
    hd = D // H
    step("input", "input", "plain", ids.float())
    tok = w["wte.weight"][ids]
    pos = w["wpe.weight"][:S]
    step("embed.tokens", "embedding", "plain", tok)
    step("embed.pe", "embedding", "posenc", pos)
    x = tok + pos
    step("embed.out", "add", "plain", x)
    for i in range(L):
        h, p = f"h.{i}.", f"decoder.layers.{i}."
        a = torch.nn.functional.layer_norm(x, (D,), w[h + "ln_1.weight"], w[h + "ln_1.bias"], 1e-5)
        step(p + "norm1.out", "layernorm", "plain", a)
        qkv = a @ w[h + "attn.c_attn.weight"] + w[h + "attn.c_attn.bias"]  # Conv1D: x @ W + b
        q, k, v = qkv.split(D, dim=2)
        q, k, v = (t.view(B, S, H, hd).transpose(1, 2) for t in (q, k, v))
        step(p + "self_attn.q", "chunk", "heads", q)
        step(p + "self_attn.k", "chunk", "heads", k)
        step(p + "self_attn.v", "chunk", "heads", v)
        scores = q @ k.transpose(-2, -1)
        step(p + "self_attn.scores", "matmul", "attn_scores", scores)
        scaled = scores / math.sqrt(hd)
        step(p + "self_attn.scaled", "scale", "attn_scores", scaled)
        mask = w[h + "attn.bias"][:, :, :S, :S]
        weights = torch.softmax(scaled.masked_fill(mask == 0, float("-inf")), dim=-1)
        step(p + "self_attn.weights", "softmax", "attn_weights", weights)
        values = weights @ v
        step(p + "self_attn.values", "matmul", "heads", values)
        concat = values.transpose(1, 2).reshape(B, S, D)
        step(p + "self_attn.concat", "reshape", "plain", concat)
        attn_out = concat @ w[h + "attn.c_proj.weight"] + w[h + "attn.c_proj.bias"]
        step(p + "self_attn.out", "linear", "plain", attn_out)
        x = x + attn_out
        step(p + "norm2.in", "add", "plain", x)
        m = torch.nn.functional.layer_norm(x, (D,), w[h + "ln_2.weight"], w[h + "ln_2.bias"], 1e-5)
        step(p + "norm2.out", "layernorm", "plain", m)
        hidden = m @ w[h + "mlp.c_fc.weight"] + w[h + "mlp.c_fc.bias"]
        step(p + "ffn.hidden", "linear", "plain", hidden)
        act = gelu_new(hidden)
        step(p + "ffn.act", "gelu", "plain", act)
        ffn_out = act @ w[h + "mlp.c_proj.weight"] + w[h + "mlp.c_proj.bias"]
        step(p + "ffn.out", "linear", "plain", ffn_out)
        x = x + ffn_out
        step(p + "out", "add", "plain", x)
    x = torch.nn.functional.layer_norm(x, (D,), w["ln_f.weight"], w["ln_f.bias"], 1e-5)
    step("decoder.norm.out", "layernorm", "plain", x)
    step("decoder.out", "layernorm", "plain", x)
    logits = x @ w["wte.weight"].t()  # the head tied to wte, no bias
    step("logits", "linear", "plain", logits)
    return logits


def write_dir(d, tensors, vocab, merges):
    os.makedirs(d, exist_ok=True)
    save_safetensors(os.path.join(d, "model.safetensors"), tensors, {"format": "pt"})
    config = {"model_type": "gpt2", "n_layer": L, "n_embd": D, "n_head": H, "n_inner": F, "n_positions": P,
              "vocab_size": V, "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new"}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    if vocab:
        with open(os.path.join(d, "encoder.json"), "w") as f:
            json.dump(vocab, f, ensure_ascii=False)
        with open(os.path.join(d, "vocab.bpe"), "w") as f:
            f.write(merges)


def main():
    gen = torch.Generator().manual_seed(17)
    w = make_weights(gen)
    bs, cs = bytes_to_unicode()
    vocab = {cs[i]: i for i in range(256)}  # id i is byte bs[i]
    for a, b in MERGES:
        vocab[a + b] = len(vocab)
    merges = "#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in MERGES)
    uni = dict(zip(bs, cs))
    write_dir(os.path.join(HERE, "small"), w, vocab, merges)
    hf = {"transformer." + k: v for k, v in w.items()}
    hf["lm_head.weight"] = w["wte.weight"].clone()
    write_dir(os.path.join(HERE, "prefixed"), hf, vocab, merges)

    assert "".join(PIECES) == TEXT
    ids = []
    for piece in PIECES:
        symbols = [uni[b] for b in piece.encode("utf-8")]
        for a, b in MERGES:  # in rank order: each merge joins every adjacent pair it names
            i, joined = 0, []
            while i < len(symbols):
                if i + 1 < len(symbols) and symbols[i] == a and symbols[i + 1] == b:
                    joined.append(a + b)
                    i += 2
                else:
                    joined.append(symbols[i])
                    i += 1
            symbols = joined
        ids += [vocab[t] for t in symbols]
    ids = torch.tensor([ids])
    np.save(os.path.join(HERE, "ids.npy"), ids.numpy().astype(np.int64))  # the same text as ids, for run --ids
    np.save(os.path.join(HERE, "ids_out_of_vocab.npy"), np.array([[5, V]], dtype=np.int32))
    path = os.path.join(HERE, "reference.tstrace")
    out = tscope_trace.TraceFile(path)
    with torch.no_grad():
        forward(w, ids, lambda name, op, tag, t: out.step(name, op, tag, t.detach().numpy()))
    out.close({"config": {"model": "GPT-2 (tests/ref/gpt/make_fixtures.py)"}, "source_tokens": [],
               "target_tokens": [], "command_line": "python: tests/ref/gpt/make_fixtures.py",
               "writer": "tests/ref/gpt/make_fixtures.py", "text": TEXT})
    write_gradients(w, ids)
    print(f"wrote small/, prefixed/, reference.tstrace, grads.safetensors ({ids.shape[1]} tokens of {TEXT!r})")


def write_gradients(w, ids):
    """The gradients of sum(logits * grad_out) by autograd, under tscope's parameter names in
    PyTorch's nn.Linear layout (a Conv1D weight's gradient transposed), for test_grad_parity."""
    buffers = (".attn.bias", ".attn.masked_bias")  # the causal mask, not parameters (c_attn.bias is one)
    params = {k: v.clone().requires_grad_(True) for k, v in w.items() if not k.endswith(buffers)}
    full = dict(w)
    full.update(params)
    logits = forward(full, ids, lambda *a: None)
    grad_out = torch.randn(logits.shape, generator=torch.Generator().manual_seed(5))
    (logits * grad_out).sum().backward()
    np.save(os.path.join(HERE, "grad_out.npy"), grad_out.numpy().astype(np.float32))
    names = {"wte.weight": "embed.tokens.weight", "wpe.weight": "embed.positions.weight",
             "ln_f.weight": "decoder.norm.weight", "ln_f.bias": "decoder.norm.bias"}
    leaves = {"ln_1": "norm1", "ln_2": "norm2", "attn.c_attn.weight": "self_attn.in_proj_weight",
              "attn.c_attn.bias": "self_attn.in_proj_bias", "attn.c_proj.weight": "self_attn.out_proj.weight",
              "attn.c_proj.bias": "self_attn.out_proj.bias", "mlp.c_fc.weight": "linear1.weight",
              "mlp.c_fc.bias": "linear1.bias", "mlp.c_proj.weight": "linear2.weight", "mlp.c_proj.bias": "linear2.bias"}
    grads = {}
    for k, v in params.items():
        g = v.grad
        if k in names:
            grads[names[k]] = g
            continue
        i, rest = k[2:].split(".", 1)
        for a, b in leaves.items():
            if rest.startswith(a):
                rest = b + rest[len(a):]
                break
        if g.dim() == 2:
            g = g.t()  # Conv1D (in, out) -> nn.Linear (out, in)
        grads[f"decoder.layers.{i}.{rest}"] = g
    save_safetensors(os.path.join(HERE, "grads.safetensors"), {k: v.contiguous() for k, v in grads.items()}, None)


if __name__ == "__main__":
    main()
