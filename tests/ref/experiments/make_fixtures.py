"""Fixtures of tscope's experiments (ablations, patches, the logit lens) on the shipped
induction model, for tests/experiment_test.sh.

Run from the repository root with Debian's python3-torch:

    /usr/bin/python3 tests/ref/experiments/make_fixtures.py

The model is assets/induction-2l.safetensors (a 2-layer pre-LN GPT over characters, tscope's
own checkpoint), rebuilt here as a torch.nn.Module whose every edited step passes through an
nn.Identity: the hook points. Each experiment is a forward hook on one of them that returns the
edited tensor, the way interpretability libraries do it in Python:
  - zero:  heads 0 and 1 of layer 1 (their slices of `values`, (B, H, S, hd), before out_proj)
  - mean:  head 2 of layer 0 replaced by its mean over batch and positions, and layer 1's
           ffn.out by its own mean (a whole step)
  - patch: the corrupted text's run with position 27 of decoder.layers.0.out taken from the
           clean text's run
  - lens:  each layer's output through the final LayerNorm and the tied head, softmaxed
Each is written as a trace (python/tscope_trace.py) under tscope's step names, so
`tscope diff --common --tol 1e-4` compares tscope's run with it step by step.
"""
import importlib.util
import json
import math
import os
import random
import struct
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import tscope_trace  # noqa: E402

_spec = importlib.util.spec_from_file_location("ref_fixtures", os.path.join(os.path.dirname(HERE), "make_fixtures.py"))
_ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ref)

MODEL = os.path.join(ROOT, "assets", "induction-2l.safetensors")


def read_model():
    tensors = _ref.load_safetensors(MODEL)
    with open(MODEL, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        meta = json.loads(f.read(n))["__metadata__"]
    config = json.loads(meta["config"])
    tokens = json.loads(meta["tokenizer"])["tokens"]
    return {k: torch.from_numpy(v.copy()) for k, v in tensors.items()}, config, tokens


class Attention(torch.nn.Module):
    def __init__(self, w, p, D, H):
        super().__init__()
        self.w, self.p, self.D, self.H = w, p, D, H
        self.values = torch.nn.Identity()  # (B, H, S, hd): each head's output before out_proj
        self.out = torch.nn.Identity()

    def forward(self, x):
        B, S, D = x.shape
        H, hd, w, p = self.H, D // self.H, self.w, self.p
        qkv = x @ w[p + "in_proj_weight"].t() + w[p + "in_proj_bias"]
        q, k, v = (t.view(B, S, H, hd).transpose(1, 2) for t in qkv.split(D, dim=2))
        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
        causal = torch.triu(torch.ones(S, S, dtype=torch.bool), 1)
        weights = torch.softmax(scores.masked_fill(causal, float("-inf")), dim=-1)
        values = self.values(weights @ v)
        concat = values.transpose(1, 2).reshape(B, S, D)
        return self.out(concat @ w[p + "out_proj.weight"].t() + w[p + "out_proj.bias"])


class Block(torch.nn.Module):
    def __init__(self, w, i, D, H, eps):
        super().__init__()
        self.w, self.p, self.D, self.eps = w, f"decoder.layers.{i}.", D, eps
        self.self_attn = Attention(w, self.p + "self_attn.", D, H)
        self.ffn_out = torch.nn.Identity()
        self.out = torch.nn.Identity()

    def norm(self, x, name):
        return torch.nn.functional.layer_norm(x, (self.D,), self.w[self.p + name + ".weight"],
                                              self.w[self.p + name + ".bias"], self.eps)

    def forward(self, x):
        w, p = self.w, self.p
        x = x + self.self_attn(self.norm(x, "norm1"))
        hidden = self.norm(x, "norm2") @ w[p + "linear1.weight"].t() + w[p + "linear1.bias"]
        ffn = torch.nn.functional.gelu(hidden) @ w[p + "linear2.weight"].t() + w[p + "linear2.bias"]
        return self.out(x + self.ffn_out(ffn))


class GPT(torch.nn.Module):
    def __init__(self, w, config):
        super().__init__()
        self.w, self.D, self.eps = w, config["d_model"], config["eps"]
        self.layers = torch.nn.ModuleList(Block(w, i, self.D, config["heads"], self.eps)
                                          for i in range(config["layers"]))

    def unembed(self, x):
        """The final LayerNorm and the head (tied to the token table, no bias)."""
        x = torch.nn.functional.layer_norm(x, (self.D,), self.w["decoder.norm.weight"], self.w["decoder.norm.bias"],
                                           self.eps)
        return x @ self.w["embed.src.weight"].t()

    def forward(self, ids):
        S = ids.shape[1]
        x = self.w["embed.src.weight"][ids] + self.w["embed.positions.weight"][:S]
        for layer in self.layers:
            x = layer(x)
        return self.unembed(x)


def zero_heads(heads):
    def hook(module, inputs, out):
        out = out.clone()
        out[:, heads] = 0
        return out
    return hook


def mean_heads(heads):
    def hook(module, inputs, out):  # (B, H, S, hd): mean over batch and positions, per head and dim
        out = out.clone()
        out[:, heads] = out[:, heads].mean(dim=(0, 2), keepdim=True).expand_as(out[:, heads])
        return out
    return hook


def mean_step(module, inputs, out):  # (B, S, D): mean over batch and positions, per dim
    return out.mean(dim=(0, 1), keepdim=True).expand_as(out).clone()


def patch_position(source, pos):
    def hook(module, inputs, out):
        out = out.clone()
        out[:, pos] = source[:, pos]
        return out
    return hook


def run(model, ids, path, text, note, lens=False):
    """One forward with whatever hooks are on, recorded under tscope's names."""
    kept = {}
    handles = []
    for i, layer in enumerate(model.layers):
        p = f"decoder.layers.{i}."
        for name, mod in ((p + "self_attn.values", layer.self_attn.values), (p + "ffn.out", layer.ffn_out),
                          (p + "out", layer.out)):
            handles.append(mod.register_forward_hook(lambda m, i_, o, name=name: kept.__setitem__(name, o)))
    with torch.no_grad():
        logits = model(ids)
        lens_p = [torch.softmax(model.unembed(kept[f"decoder.layers.{i}.out"]), dim=-1)
                  for i in range(len(model.layers))]
    for h in handles:
        h.remove()
    out = tscope_trace.TraceFile(path)
    for i in range(len(model.layers)):
        p = f"decoder.layers.{i}."
        out.step(p + "self_attn.values", "matmul", "heads", kept[p + "self_attn.values"].numpy())
        out.step(p + "ffn.out", "linear", "plain", kept[p + "ffn.out"].numpy())
        out.step(p + "out", "add", "plain", kept[p + "out"].numpy())
    out.step("logits", "linear", "logits", logits.numpy())
    for i, p in enumerate(lens_p if lens else []):
        out.step(f"lens.layers.{i}", "softmax", "logits", p.numpy())
    meta = {"config": {"model": "assets/induction-2l.safetensors in PyTorch (tests/ref/experiments)"},
            "source_tokens": [], "target_tokens": [], "command_line": "python: tests/ref/experiments/make_fixtures.py",
            "writer": "tests/ref/experiments/make_fixtures.py", "text": text, "experiment": note}
    out.close(meta)
    return kept, logits


def main():
    torch.manual_seed(0)
    w, config, tokens = read_model()
    model = GPT(w, config).eval()
    letters = [t for t in tokens if len(t) == 1 and t.isalpha()]
    rng = random.Random(28)
    half = "".join(rng.choice(letters) for _ in range(32))
    clean = half + half
    corrupt_half = list(half)
    for i in (3, 11, 20, 27):  # a few letters changed in the first copy (position 27 among them)
        corrupt_half[i] = letters[(letters.index(half[i]) + 7) % len(letters)]
    corrupt = "".join(corrupt_half) + half
    enc = lambda s: torch.tensor([[tokens.index(c) for c in s]])
    ids, bad = enc(clean), enc(corrupt)

    kept, _ = run(model, ids, os.path.join(HERE, "plain.tstrace"), clean, "none", lens=True)
    l1 = model.layers[1].self_attn.values
    h = l1.register_forward_hook(zero_heads([0, 1]))
    run(model, ids, os.path.join(HERE, "zero.tstrace"), clean, "decoder.layers.1.self_attn.head0, head1 zeroed")
    h.remove()
    hs = [model.layers[0].self_attn.values.register_forward_hook(mean_heads([2])),
          model.layers[1].ffn_out.register_forward_hook(mean_step)]
    run(model, ids, os.path.join(HERE, "mean.tstrace"), clean,
        "decoder.layers.0.self_attn.head2=mean, decoder.layers.1.ffn.out=mean")
    for h in hs:
        h.remove()
    h = model.layers[0].out.register_forward_hook(patch_position(kept["decoder.layers.0.out"], 27))
    run(model, bad, os.path.join(HERE, "patch.tstrace"), corrupt, "decoder.layers.0.out@27 from the clean run")
    h.remove()
    with open(os.path.join(HERE, "texts.txt"), "w") as f:
        f.write(clean + "\n" + corrupt + "\n")
    print(f"wrote plain, zero, mean, patch .tstrace; clean {clean!r}, corrupt {corrupt!r}")


if __name__ == "__main__":
    main()
