"""PyTorch's numbers for the Python package's experiments (tests/python_test.sh) and the command
line's flags that make them (--patch ATTN.headK, --add, --mean-from, patch --site).

Run from the repository root with Debian's python3-torch:

    /usr/bin/python3 tests/ref/python/make_fixtures.py

The model is assets/induction-2l.safetensors rebuilt in float64 with hook points
(torch_gpt.py); TEXT and OTHER are tests/ref/experiments/texts.txt's two lines (32 letters
written twice; OTHER has four letters of the first copy changed). Each experiment is a forward
hook, as TransformerLens edits a step:

  pattern_patch  on OTHER, layer 1 head 1's attention pattern (weights[:, 1]) from TEXT's run
  head_patch     on OTHER, layer 1 head 1's output (values[:, 1], every position) from TEXT's run
                 (`--patch text.tstrace:decoder.layers.1.self_attn.head1`)
  head_patch_pos the same at position POS only (`...head1@POS`)
  steer          on TEXT, steer.npy (D) added to decoder.layers.0.out at every position
                 (`--add decoder.layers.0.out=steer.npy`)
  steer_pos      the same at position POS only (`--add decoder.layers.0.out@POS=steer.npy`)
  mean_ref       on TEXT, layer 1 head 1's values replaced by their mean over ref_ids's batch and
                 positions (`--ablate decoder.layers.1.self_attn.head1=mean --mean-from ref.tstrace`)

Direct logit attribution (`tscope attribute --position all`), on TEXT at every position: the
stream after the last layer is the embedding plus each head's values through its columns of
out_proj, each out_proj bias and each FFN's output; each part is centred, scaled by the final
norm's gamma / std at that position (std of the whole stream, as layer_norm divides) and read
along a direction u, and beta . u is the rest:

  dla_diff   u = W_U[ANSWER] - W_U[WRONG]   (`--answer d --wrong G`)
  dla_token  u = W_U[TOKEN]                  (`--token e`)
  dla_top    u = W_U[the top guess at each position] (no flag); dla_top_ids.npy the guesses

Activation patching (`tscope patch --site resid|attn|ffn|heads`), on PATCH_CLEAN and
PATCH_CORRUPT (18 letters and their first 17 again; the corrupted text has the 18th letter, the
answer the last position should copy, changed in the first copy): the wrong token is the corrupted
run's top guess at the last position, d(run) that position's logit(PATCH_ANSWER) - logit(wrong),
and each cell, one step at one position taken from the clean run into the corrupted one, is
(d(patched) - d(corrupted)) / (d(clean) - d(corrupted)). The rows are the steps tscope sweeps:

  patch_resid  embed.out, then each layer's out
  patch_attn   each layer's self_attn.out (what the attention adds, out_proj's bias with it)
  patch_ffn    each layer's ffn.out
  patch_heads  each layer's heads in turn, head K's slice of self_attn.values (`...headK@POS`)

Written (little-endian, C order): ids.npy, other_ids.npy (1, S) and ref_ids.npy (R, S) int64;
steer.npy (D) float32; NAME_logits.npy (1, S, V) float32 for each experiment and for plain (TEXT)
and other_plain (OTHER); dla_NAME.npy (S, 2 + L * (H + 2)) float64, the parts in tscope's order
(embedding; per layer each head, the attention's bias, the FFN; the rest), and dla_top_ids.npy (S)
int64; patch_SITE.npy (rows, positions) float64 for each site and patch_diffs.npy (2) float64,
d(clean) and d(corrupted); pos.txt holds POS, patch.txt the clean text, the corrupted one, the
answer and the wrong token, a line each. Byte-for-byte the same on each run.
"""
import os

import numpy as np
import torch

from torch_gpt import GPT, HERE, read_model, run, texts

POS = 45
R = 4
ANSWER, WRONG, TOKEN = "d", "G", "e"
PATCH_HALF = "qmKfwTzaRbnLpUchVd"
PATCH_CLEAN = PATCH_HALF + PATCH_HALF[:17]
PATCH_CORRUPT = PATCH_HALF[:17] + "G" + PATCH_HALF[:17]
PATCH_ANSWER = "d"


def save(name, a):
    np.save(os.path.join(HERE, name + ".npy"), a)


def replace_head(source, head, pos=None):
    def hook(module, inputs, out):
        out = out.clone()
        if pos is None:
            out[:, head] = source[:, head]
        else:
            out[:, head, pos] = source[:, head, pos]
        return out
    return hook


def add_vector(vec, pos=None):
    def hook(module, inputs, out):
        out = out.clone()
        if pos is None:
            out += vec
        else:
            out[:, pos] += vec
        return out
    return hook


def replace_position(source, pos):
    def hook(module, inputs, out):
        out = out.clone()
        out[:, pos] = source[:, pos]
        return out
    return hook


def head_mean(mean, head):
    def hook(module, inputs, out):
        out = out.clone()
        out[:, head] = mean
        return out
    return hook


def attribution(model, ids, directions):
    """Each part's share of the logit along directions (S, D) at every position: (S, parts)."""
    L, H, D, w = model.L, model.H, model.D, model.w
    hd = D // H
    keep = [(f"v{i}", model.values[i]) for i in range(L)] + [(f"f{i}", model.ffn_out[i]) for i in range(L)]
    _, kept = run(model, ids, keep=keep + [("x", model.out[L - 1])])
    S = ids.shape[1]
    x = kept["x"][0]
    std = torch.sqrt(x.var(-1, unbiased=False) + model.eps)  # (S), as layer_norm divides
    gamma, beta = w["decoder.norm.weight"], w["decoder.norm.bias"]

    def share(part):  # (S, D) -> (S)
        centred = part - part.mean(-1, keepdim=True)
        return (centred * gamma / std[:, None] * directions).sum(-1)

    cols = [share(w["embed.src.weight"][ids[0]] + w["embed.positions.weight"][:S])]
    for i in range(L):
        p = f"decoder.layers.{i}.self_attn.out_proj."
        v = kept[f"v{i}"][0]  # (H, S, hd)
        for h in range(H):
            cols.append(share(v[h] @ w[p + "weight"][:, h * hd:(h + 1) * hd].t()))
        cols.append(share(w[p + "bias"].expand(S, D)))
        cols.append(share(kept[f"f{i}"][0]))
    cols.append(directions @ beta)  # the head is the tied token table, with no bias
    return torch.stack(cols, 1)


def attributions(model, ids, tokens, logits):
    """dla_diff, dla_token, dla_top (and the top guesses), each row checked against the logits."""
    table = model.w["embed.src.weight"]
    S = ids.shape[1]
    a, b, t = (tokens.index(c) for c in (ANSWER, WRONG, TOKEN))
    top = logits[0].argmax(-1)
    runner_up = logits[0].topk(2, dim=-1).values
    assert float((runner_up[:, 0] - runner_up[:, 1]).min()) > 1e-3, "a near tie: the top guess is not clear"
    out = {
        "diff": (attribution(model, ids, (table[a] - table[b]).expand(S, -1)), logits[0, :, a] - logits[0, :, b]),
        "token": (attribution(model, ids, table[t].expand(S, -1)), logits[0, :, t]),
        "top": (attribution(model, ids, table[top]), logits[0].gather(1, top[:, None])[:, 0]),
    }
    for name, (shares, want) in out.items():
        d = float((shares.sum(1) - want).abs().max())
        print(f"dla_{name}: the shares add up to the logit within {d:.1e}")
        assert d < 1e-9, name
    return {name: shares for name, (shares, _) in out.items()}, top


def patch_sweeps(model, clean_ids, corrupt_ids, answer):
    """tscope patch's table for each site: {site: (rows, S)}, [d(clean), d(corrupted)], the wrong token."""
    L, H, S = model.L, model.H, clean_ids.shape[1]
    steps = {"resid": [model.embed, *model.out], "attn": list(model.attn_out), "ffn": list(model.ffn_out)}
    keep = [(f"{site}{r}", mod) for site, mods in steps.items() for r, mod in enumerate(mods)]
    clean, kept = run(model, clean_ids, keep=keep + [(f"v{i}", model.values[i]) for i in range(L)])
    corrupt = run(model, corrupt_ids)[0]
    best = corrupt[0, -1].topk(2)
    wrong = int(best.indices[0])
    assert wrong != answer and float(best.values[0] - best.values[1]) > 1e-3, "the corrupted guess is not clear"
    diff = lambda logits: logits[0, -1, answer] - logits[0, -1, wrong]
    d_clean, d_corrupt = diff(clean), diff(corrupt)

    def share(hook):  # the corrupted run with one hook: the share of the clean difference it restores
        return (diff(run(model, corrupt_ids, [hook])[0]) - d_corrupt) / (d_clean - d_corrupt)

    out = {site: torch.stack([torch.stack([share((mod, replace_position(kept[f"{site}{r}"], p)))
                                           for p in range(S)])
                              for r, mod in enumerate(mods)])
           for site, mods in steps.items()}
    out["heads"] = torch.stack([torch.stack([share((model.values[i], replace_head(kept[f"v{i}"], h, p)))
                                             for p in range(S)])
                                for i in range(L) for h in range(H)])
    # the changed letter's embedding taken back is the clean run itself; so is the last stream at the end
    changed = int((clean_ids[0] != corrupt_ids[0]).nonzero()[0])
    assert abs(float(out["resid"][0, changed]) - 1) < 1e-9 and abs(float(out["resid"][L, S - 1]) - 1) < 1e-9
    return out, torch.stack([d_clean, d_corrupt]), wrong


def main():
    torch.set_num_threads(1)
    w, config, tokens = read_model()
    model = GPT(w, config).eval()
    text, other = texts()
    enc = lambda s: torch.tensor([[tokens.index(c) for c in s]], dtype=torch.int64)
    ids, other_ids = enc(text), enc(other)
    S, D, V = ids.shape[1], config["d_model"], config["vocab"]
    rng = np.random.default_rng(43)
    ref_ids = torch.from_numpy(rng.integers(0, V, size=(R, S)).astype(np.int64))
    steer = (rng.standard_normal(D) * 2.0).astype("<f4")
    f32 = lambda t: t.numpy().astype("<f4")

    plain, kept = run(model, ids, keep=[("w1", model.weights[1]), ("v1", model.values[1])])
    other_plain = run(model, other_ids)[0]
    _, ref = run(model, ref_ids, keep=[("v1", model.values[1])])
    out = {
        "plain": plain,
        "other_plain": other_plain,
        "pattern_patch": run(model, other_ids, [(model.weights[1], replace_head(kept["w1"], 1))])[0],
        "head_patch": run(model, other_ids, [(model.values[1], replace_head(kept["v1"], 1))])[0],
        "head_patch_pos": run(model, other_ids, [(model.values[1], replace_head(kept["v1"], 1, POS))])[0],
        "steer": run(model, ids, [(model.out[0], add_vector(torch.from_numpy(steer.astype(np.float64))))])[0],
        "steer_pos": run(model, ids, [(model.out[0], add_vector(torch.from_numpy(steer.astype(np.float64)),
                                                                 POS))])[0],
        # tscope's mean ablation of (B, H, S, hd): the mean over the batch and the positions (dims 0, 2)
        "mean_ref": run(model, ids, [(model.values[1], head_mean(ref["v1"][:, 1].mean(dim=(0, 1)), 1))])[0],
    }
    save("ids", ids.numpy().astype("<i8"))
    save("other_ids", other_ids.numpy().astype("<i8"))
    save("ref_ids", ref_ids.numpy().astype("<i8"))
    save("steer", steer)
    for name, a in out.items():
        save(name + "_logits", f32(a))
    dla, top = attributions(model, ids, tokens, plain)
    for name, shares in dla.items():
        save("dla_" + name, shares.numpy().astype("<f8"))
    save("dla_top_ids", top.numpy().astype("<i8"))
    with open(os.path.join(HERE, "pos.txt"), "w") as f:
        f.write(f"{POS}\n")
    sweeps, diffs, wrong = patch_sweeps(model, enc(PATCH_CLEAN), enc(PATCH_CORRUPT), tokens.index(PATCH_ANSWER))
    for site, restored in sweeps.items():
        save("patch_" + site, restored.numpy().astype("<f8"))
        print(f"patch_{site}: {tuple(restored.shape)}, the largest share restored {float(restored.max()):.4f}")
        assert float(restored.abs().max()) > 0.1, site
    save("patch_diffs", diffs.numpy().astype("<f8"))
    with open(os.path.join(HERE, "patch.txt"), "w") as f:
        f.write(f"{PATCH_CLEAN}\n{PATCH_CORRUPT}\n{PATCH_ANSWER}\n{tokens[wrong]}\n")
    for name in ("pattern_patch", "head_patch", "head_patch_pos"):
        d = float((out[name] - other_plain).abs().max())
        print(f"{name}: largest change of a logit {d:.4f}")
        assert d > 1e-2, name
    for name in ("steer", "steer_pos", "mean_ref"):
        d = float((out[name] - plain).abs().max())
        print(f"{name}: largest change of a logit {d:.4f}")
        assert d > 1e-2, name


if __name__ == "__main__":
    main()
