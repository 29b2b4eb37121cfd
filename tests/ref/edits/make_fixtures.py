"""PyTorch's numbers for experiments that edit an attention pattern, for tests/edits_test.sh.

Run from the repository root with Debian's python3-torch:

    /usr/bin/python3 tests/ref/edits/make_fixtures.py

Issue 39: an edit of a step the forward emits after what reads it (attention
`weights`, a LayerNorm's mean, std and y) was accepted and changed nothing. These
fixtures say what such an edit must give. The model is the shipped
assets/induction-2l.safetensors (a 2-layer pre-LN GPT over characters, learned
positions, exact GELU, final LayerNorm, head tied to the token table), rebuilt here
in float64 with an nn.Identity on each attention's softmax output: the hook point.
Each experiment is a forward hook on it returning the edited pattern, which the
weighted values then read, as an interpretability library edits it:

  plain:        no edit (the reference's check against `tscope run`)
  zero:         decoder.layers.1.self_attn.weights zeroed, every head
                (`--ablate decoder.layers.1.self_attn.weights`)
  mean:         decoder.layers.0.self_attn.weights replaced by its mean over the
                batch and the query positions, per head and key
                (`--ablate decoder.layers.0.self_attn.weights=mean`)
  patch:        the other text's run with query row POS of
                decoder.layers.1.self_attn.weights, every head, from the text's run
                (`--patch text.tstrace:decoder.layers.1.self_attn.weights@POS`)

Written (little-endian, C order): ids.npy and other_ids.npy (1, S) int64; and the
logits (1, S, V) float32 of each experiment: plain_logits.npy, zero_logits.npy,
mean_logits.npy (on ids), patch_logits.npy (on other_ids), other_plain_logits.npy
(other_ids, no edit); pos.txt holds POS. Byte-for-byte the same on each run.
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
# The two texts of tests/ref/experiments: 32 random letters written twice, and
# the same with four letters of the first copy changed. POS is in the second
# copy, where layer 1's induction heads look back at the first.
TEXTS = os.path.join(ROOT, "tests", "ref", "experiments", "texts.txt")
POS = 45


def read_model():
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
        w[k] = torch.from_numpy(np.frombuffer(data[a:b], "<f4").reshape(v["shape"]).astype(np.float64))
    return w, json.loads(meta["config"]), json.loads(meta["tokenizer"])["tokens"]


class GPT(torch.nn.Module):
    """tscope's GPT (src/model/model_forward.c, run() with arch decoder): x = E[ids] + P[:S];
    per layer x = x + attn(norm1(x)); x = x + ffn(norm2(x)); logits = norm(x) E^T."""

    def __init__(self, w, config):
        super().__init__()
        assert config["arch"] == "decoder" and config["norm"] == "pre" and config["pe"] == "learned"
        assert config["activation"] == "gelu" and config["final_norm"] and config["tie_embed"]
        assert not config["scale_embed"]
        self.w, self.D, self.H, self.eps = w, config["d_model"], config["heads"], config["eps"]
        self.L = config["layers"]
        # the hook points: each layer's attention weights (B, H, S, S), after the softmax
        self.weights = torch.nn.ModuleList(torch.nn.Identity() for _ in range(self.L))

    def norm(self, x, name):
        return torch.nn.functional.layer_norm(x, (self.D,), self.w[name + ".weight"], self.w[name + ".bias"],
                                              self.eps)

    def attention(self, i, x):
        w, p = self.w, f"decoder.layers.{i}.self_attn."
        B, S, D = x.shape
        H, hd = self.H, D // self.H
        qkv = x @ w[p + "in_proj_weight"].t() + w[p + "in_proj_bias"]  # PyTorch's order: all q, all k, all v
        q, k, v = (t.view(B, S, H, hd).transpose(1, 2) for t in qkv.split(D, dim=2))
        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
        causal = torch.triu(torch.ones(S, S, dtype=torch.bool), 1)
        weights = self.weights[i](torch.softmax(scores.masked_fill(causal, float("-inf")), dim=-1))
        values = weights @ v
        concat = values.transpose(1, 2).reshape(B, S, D)
        return concat @ w[p + "out_proj.weight"].t() + w[p + "out_proj.bias"]

    def forward(self, ids):
        w = self.w
        S = ids.shape[1]
        x = w["embed.src.weight"][ids] + w["embed.positions.weight"][:S]
        for i in range(self.L):
            p = f"decoder.layers.{i}."
            x = x + self.attention(i, self.norm(x, p + "norm1"))
            hidden = self.norm(x, p + "norm2") @ w[p + "linear1.weight"].t() + w[p + "linear1.bias"]
            x = x + torch.nn.functional.gelu(hidden) @ w[p + "linear2.weight"].t() + w[p + "linear2.bias"]
        return self.norm(x, "decoder.norm") @ w["embed.src.weight"].t()


def zero(module, inputs, out):
    return torch.zeros_like(out)


def mean(module, inputs, out):
    # tscope's mean ablation of a (B, H, Sq, Sk) step: the mean over the batch and the
    # positions (dim 2, the queries), every other index kept (experiment.c, pos_dim)
    return out.mean(dim=(0, 2), keepdim=True).expand_as(out).clone()


def patch_row(source, pos):
    def hook(module, inputs, out):
        out = out.clone()
        out[:, :, pos, :] = source[:, :, pos, :]  # @POS: the query position, dim 2
        return out
    return hook


def run(model, ids, hooks=()):
    handles = [model.weights[i].register_forward_hook(h) for i, h in hooks]
    kept = {}
    handles += [m.register_forward_hook(lambda m_, i_, o, i=i: kept.__setitem__(i, o))
                for i, m in enumerate(model.weights)]
    with torch.no_grad():
        logits = model(ids)
    for h in handles:
        h.remove()
    return logits, kept


def save(name, a):
    np.save(os.path.join(HERE, name + ".npy"), a)


def main():
    torch.set_num_threads(1)
    w, config, tokens = read_model()
    model = GPT(w, config).eval()
    with open(TEXTS) as f:
        text, other = (line.rstrip("\n") for line in f.readlines()[:2])
    assert len(text) == len(other)
    enc = lambda s: torch.tensor([[tokens.index(c) for c in s]], dtype=torch.int64)
    ids, other_ids = enc(text), enc(other)
    f32 = lambda t: t.numpy().astype("<f4")

    plain, kept = run(model, ids)
    save("ids", ids.numpy().astype("<i8"))
    save("other_ids", other_ids.numpy().astype("<i8"))
    save("plain_logits", f32(plain))
    save("other_plain_logits", f32(run(model, other_ids)[0]))
    zeroed = run(model, ids, [(1, zero)])[0]
    save("zero_logits", f32(zeroed))
    meaned = run(model, ids, [(0, mean)])[0]
    save("mean_logits", f32(meaned))
    patched = run(model, other_ids, [(1, patch_row(kept[1], POS))])[0]
    save("patch_logits", f32(patched))
    with open(os.path.join(HERE, "pos.txt"), "w") as f:
        f.write(f"{POS}\n")
    # each edit must matter, or the test proves nothing
    other_plain = run(model, other_ids)[0]
    for name, a, b in (("zero", zeroed, plain), ("mean", meaned, plain), ("patch", patched, other_plain)):
        print(f"{name}: largest change of a logit {float((a - b).abs().max()):.4f}")
        assert float((a - b).abs().max()) > 1e-2, name
    print(f"wrote ids, other_ids, plain, zero, mean, patch logits; {text!r} / {other!r}, POS {POS}")


if __name__ == "__main__":
    main()
