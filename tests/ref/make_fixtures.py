#!/usr/bin/python3
"""Write the PyTorch reference fixtures tscope's parity tests compare against.

Run from the repository root with Debian's python3-torch:

    /usr/bin/python3 tests/ref/make_fixtures.py

Each case gets a directory tests/ref/<case>/ with the module's state_dict as
weights.safetensors (keys exactly as PyTorch names them), its inputs and
outputs as float32 .npy, and for issue 6 the gradients of
loss = sum(out * grad_out) for a fixed random grad_out. README.md describes
every case. The output is deterministic: fixed seeds, dropout 0, eval mode, and
no torch.no_grad() (under no_grad PyTorch 1.13 takes a "fast path" for
TransformerEncoder that returns zeros at padded positions, which is not what
the slow, documented path computes).
"""

import copy
import json
import os
import shutil
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
D = 16    # d_model of every case
FFN = 32  # dim_feedforward
B = 2     # batch

torch.use_deterministic_algorithms(True)
torch.set_num_threads(1)


# ---- writing ---------------------------------------------------------------

def f32(t):
    return np.ascontiguousarray(t.detach().cpu().numpy().astype("<f4"))


ST_DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8"}


def as_dtype(t, dtype):
    """A tensor's bytes as safetensors stores them: F32, F16, F64, or BF16
    (the top 16 bits of float32, rounded to nearest even, as torch does)."""
    if dtype == "BF16":
        return t.detach().to(torch.bfloat16).view(torch.int16).numpy().astype("<i2")
    return np.ascontiguousarray(t.detach().cpu().numpy().astype(ST_DTYPES[dtype]))


def save_safetensors(path, tensors, metadata, dtype="F32"):
    """safetensors by hand (the package may be missing): 8-byte LE header
    length, JSON header padded with spaces to 8 bytes, then the raw data.
    metadata None writes no __metadata__, as a bare state_dict saved with
    safetensors.torch.save_file(sd, path) has none."""
    header = {} if metadata is None else {"__metadata__": {k: str(v) for k, v in metadata.items()}}
    blobs, offset = [], 0
    for name, t in tensors.items():
        a = as_dtype(t, dtype)
        header[name] = {"dtype": dtype, "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        blobs.append(a.tobytes())
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def load_safetensors(path):
    """The reader used to check what was written."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    data = raw[8 + n:]
    return {k: np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]], "<f4").reshape(v["shape"])
            for k, v in header.items()}


class Case:
    def __init__(self, name):
        self.name = name
        self.dir = os.path.join(HERE, name)
        os.makedirs(self.dir, exist_ok=True)

    def npy(self, name, t):
        np.save(os.path.join(self.dir, name + ".npy"), f32(t) if torch.is_tensor(t) else t)

    def weights(self, mod, **metadata):
        sd = mod.state_dict()
        path = os.path.join(self.dir, "weights.safetensors")
        save_safetensors(path, sd, metadata)
        back = load_safetensors(path)
        assert list(back) == list(sd), "safetensors keys changed on the way"
        for k, v in sd.items():
            assert np.array_equal(back[k], f32(v)), k

    def grads(self, module, loss_inputs):
        """Gradients of sum(out * grad_out) for every parameter and input."""
        module.zero_grad()
        out, grad_out, inputs = loss_inputs
        (out * grad_out).sum().backward()
        self.npy("grad_out", grad_out)
        save_safetensors(os.path.join(self.dir, "grads.safetensors"),
                         {k: p.grad for k, p in module.named_parameters()}, {"loss": "sum(out * grad_out)"})
        for name, x in inputs.items():
            self.npy("grad_" + name, x.grad)


# ---- inputs, masks, parameters -------------------------------------------------

def randomize(module, gen):
    """PyTorch starts biases at 0 and LayerNorm at 1 and 0: a test against
    those would not notice a missing bias. Give every parameter a value."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))


def inputs(gen, *shapes):
    return [torch.randn(s, generator=gen).requires_grad_(True) for s in shapes]


def pad_mask(lengths, S):
    """(B, S) bool, True = padding (ignored), as PyTorch's key_padding_mask."""
    return torch.tensor([[j >= n for j in range(S)] for n in lengths])


def causal(S):
    """(S, S) float: 0 on and below the diagonal, -inf above."""
    return nn.Transformer.generate_square_subsequent_mask(S)


def mask_npy(m):
    """Masks as float32 .npy: key padding 1.0 = padded; attn masks additive."""
    return m.float() if m.dtype == torch.bool else m


# ---- cases ---------------------------------------------------------------------

def case_layernorm():
    c, gen = Case("layernorm"), torch.Generator().manual_seed(100)
    ln = nn.LayerNorm(D, eps=1e-5)
    randomize(ln, gen)
    (x,) = inputs(gen, (B, 5, D))
    with torch.no_grad():
        x.mul_(3).add_(1)  # a mean and scale far from 0 and 1
    out = ln(x)
    c.weights(ln, module="nn.LayerNorm", d_model=D, eps=1e-5)
    c.npy("x", x)
    c.npy("out", out)
    c.grads(ln, (out, torch.randn(out.shape, generator=gen), {"x": x}))


def case_mha(name, kpm, attn_mask, seed):
    c, gen = Case(name), torch.Generator().manual_seed(seed)
    S, H = 5, 4
    torch.manual_seed(seed)
    mha = nn.MultiheadAttention(D, H, dropout=0.0, batch_first=True)
    randomize(mha, gen)
    mha.eval()
    (x,) = inputs(gen, (B, S, D))
    kp = pad_mask([5, 3], S) if kpm else None
    am = causal(S) if attn_mask else None
    out, w = mha(x, x, x, key_padding_mask=kp, attn_mask=am, need_weights=True, average_attn_weights=False)
    c.weights(mha, module="nn.MultiheadAttention", d_model=D, heads=H, batch_first=True,
              self_attention=True, key_padding_mask=kpm, causal=attn_mask)
    c.npy("x", x)
    if kp is not None:
        c.npy("key_padding_mask", mask_npy(kp))
    if am is not None:
        c.npy("attn_mask", am)
    c.npy("out", out)
    c.npy("attn_weights", w)  # (B, H, S, S), per head
    c.grads(mha, (out, torch.randn(out.shape, generator=gen), {"x": x}))


def run_encoder(enc, x, kp):
    """The stack's output and each layer's, as TransformerEncoder computes them."""
    per_layer, h = [], x
    for layer in enc.layers:
        h = layer(h, src_key_padding_mask=kp)
        per_layer.append(h)
    if enc.norm is not None:
        h = enc.norm(h)
    return h, per_layer


def case_encoder(norm_first, activation, final_norm, kpm, seed):
    name = "enc_%s_%s_%s%s" % ("pre" if norm_first else "post", activation,
                               "norm" if final_norm else "nonorm", "_kpm" if kpm else "")
    c, gen = Case(name), torch.Generator().manual_seed(seed)
    S, H, L = 6, 2, 2
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(D, H, FFN, dropout=0.0, activation=activation, batch_first=True,
                                       norm_first=norm_first)
    enc = nn.TransformerEncoder(layer, L, norm=nn.LayerNorm(D) if final_norm else None,
                                enable_nested_tensor=False)
    randomize(enc, gen)
    enc.eval()
    (x,) = inputs(gen, (B, S, D))
    kp = pad_mask([6, 4], S) if kpm else None
    out = enc(x, src_key_padding_mask=kp)
    check, per_layer = run_encoder(enc, x, kp)
    assert torch.allclose(out, check, atol=1e-6), "the layers do not add up to the stack"
    c.weights(enc, module="nn.TransformerEncoder", d_model=D, heads=H, ffn=FFN, layers=L,
              norm="pre" if norm_first else "post", activation=activation, final_norm=final_norm,
              eps=1e-5, batch_first=True, key_padding_mask=kpm)
    c.npy("x", x)
    if kp is not None:
        c.npy("key_padding_mask", mask_npy(kp))
    for i, h in enumerate(per_layer):
        c.npy("layers.%d.out" % i, h)
    c.npy("out", out)
    c.grads(enc, (out, torch.randn(out.shape, generator=gen), {"x": x}))


def case_encoder_no_residual(norm_first, activation, seed):
    """tscope's no-residual variant: each sublayer's output replaces the stream
    (post-LN x = norm(f(x)), pre-LN x = f(norm(x))), written with the
    submodules of an nn.TransformerEncoder so the state_dict names are its."""
    name = "enc_%s_%s_nores" % ("pre" if norm_first else "post", activation)
    c, gen = Case(name), torch.Generator().manual_seed(seed)
    S, H, L = 6, 2, 3
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(D, H, FFN, dropout=0.0, activation=activation, batch_first=True,
                                       norm_first=norm_first)
    enc = nn.TransformerEncoder(layer, L, enable_nested_tensor=False)
    randomize(enc, gen)
    enc.eval()
    act = F.relu if activation == "relu" else F.gelu
    (x,) = inputs(gen, (B, S, D))
    h = x
    for lay in enc.layers:
        attn = lambda t: lay.self_attn(t, t, t, need_weights=False)[0]  # noqa: E731
        ffn = lambda t: lay.linear2(act(lay.linear1(t)))  # noqa: E731
        if norm_first:
            h = ffn(lay.norm2(attn(lay.norm1(h))))
        else:
            h = lay.norm2(ffn(lay.norm1(attn(h))))
    out = h
    c.weights(enc, module="nn.TransformerEncoder", d_model=D, heads=H, ffn=FFN, layers=L,
              norm="pre" if norm_first else "post", activation=activation, final_norm=False,
              eps=1e-5, batch_first=True, key_padding_mask=False, variant="no-residual")
    c.npy("x", x)
    c.npy("out", out)
    c.grads(enc, (out, torch.randn(out.shape, generator=gen), {"x": x}))


def case_decoder_layer(name, norm_first, activation, masks, seed):
    c, gen = Case(name), torch.Generator().manual_seed(seed)
    T, S, H = 6, 7, 4
    torch.manual_seed(seed)
    dec = nn.TransformerDecoderLayer(D, H, FFN, dropout=0.0, activation=activation, batch_first=True,
                                     norm_first=norm_first)
    randomize(dec, gen)
    dec.eval()
    tgt, memory = inputs(gen, (B, T, D), (B, S, D))
    tm = causal(T)
    tkp = pad_mask([6, 5], T) if masks else None
    mkp = pad_mask([7, 4], S) if masks else None
    out = dec(tgt, memory, tgt_mask=tm, tgt_key_padding_mask=tkp, memory_key_padding_mask=mkp)
    c.weights(dec, module="nn.TransformerDecoderLayer", d_model=D, heads=H, ffn=FFN,
              norm="pre" if norm_first else "post", activation=activation, eps=1e-5, batch_first=True,
              tgt_mask="causal", key_padding_masks=masks)
    c.npy("tgt", tgt)
    c.npy("memory", memory)
    c.npy("tgt_mask", tm)
    if masks:
        c.npy("tgt_key_padding_mask", mask_npy(tkp))
        c.npy("memory_key_padding_mask", mask_npy(mkp))
    c.npy("out", out)
    c.grads(dec, (out, torch.randn(out.shape, generator=gen), {"tgt": tgt, "memory": memory}))


def case_transformer(name, norm_first, activation, masks, seed):
    c, gen = Case(name), torch.Generator().manual_seed(seed)
    S, T, H, L = 7, 6, 2, 2
    torch.manual_seed(seed)
    model = nn.Transformer(D, H, L, L, FFN, dropout=0.0, activation=activation, batch_first=True,
                           norm_first=norm_first)
    randomize(model, gen)
    model.eval()
    src, tgt = inputs(gen, (B, S, D), (B, T, D))
    tm = causal(T)
    skp = pad_mask([7, 5], S) if masks else None
    tkp = pad_mask([6, 4], T) if masks else None
    memory = model.encoder(src, src_key_padding_mask=skp)
    out = model(src, tgt, tgt_mask=tm, src_key_padding_mask=skp, tgt_key_padding_mask=tkp,
                memory_key_padding_mask=skp)
    c.weights(model, module="nn.Transformer", d_model=D, heads=H, ffn=FFN, layers=L, dec_layers=L,
              norm="pre" if norm_first else "post", activation=activation, final_norm=True, eps=1e-5,
              batch_first=True, tgt_mask="causal", key_padding_masks=masks)
    c.npy("src", src)
    c.npy("tgt", tgt)
    c.npy("tgt_mask", tm)
    if masks:
        c.npy("src_key_padding_mask", mask_npy(skp))
        c.npy("tgt_key_padding_mask", mask_npy(tkp))
    c.npy("memory", memory)
    c.npy("out", out)
    c.grads(model, (out, torch.randn(out.shape, generator=gen), {"src": src, "tgt": tgt}))


def case_cross_entropy():
    """Loss and logits gradient for issue 6: padding ignored, label smoothing."""
    c, gen = Case("cross_entropy"), torch.Generator().manual_seed(700)
    V, T, pad = 11, 5, 0
    logits = (2 * torch.randn((B, T, V), generator=gen)).requires_grad_(True)
    labels = torch.randint(1, V, (B, T), generator=gen)
    labels[1, 3:] = pad
    loss = nn.functional.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), ignore_index=pad,
                                       label_smoothing=0.1)
    loss.backward()
    c.npy("logits", logits)
    np.save(os.path.join(c.dir, "labels.npy"), labels.numpy().astype("<i8"))
    c.npy("loss", loss.reshape(1))
    c.npy("grad_logits", logits.grad)


def case_adamw():
    """Two AdamW steps (issue 6): bias correction differs between steps 1 and 2."""
    c, gen = Case("adamw"), torch.Generator().manual_seed(800)
    params = {"a.weight": torch.randn((4, 3), generator=gen), "a.bias": torch.randn((4,), generator=gen),
              "b.weight": torch.randn((5,), generator=gen)}
    ps = {k: nn.Parameter(v.clone()) for k, v in params.items()}
    cfg = dict(lr=1e-2, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.01)
    opt = torch.optim.AdamW(ps.values(), **cfg)
    meta = {"lr": cfg["lr"], "beta1": 0.9, "beta2": 0.98, "eps": cfg["eps"], "weight_decay": 0.01}
    save_safetensors(os.path.join(c.dir, "params.safetensors"), ps, meta)
    for step in (1, 2):
        grads = {k: torch.randn(p.shape, generator=gen) for k, p in ps.items()}
        for k, p in ps.items():
            p.grad = grads[k].clone()
        opt.step()
        save_safetensors(os.path.join(c.dir, "grads%d.safetensors" % step), grads, meta)
        save_safetensors(os.path.join(c.dir, "after%d.safetensors" % step), ps, meta)


# ---- loading from the command line (issue 16) ----------------------------------------

def bool_npy(c, name, m):
    """A mask as numpy saves a torch bool tensor: dtype |b1, True = padding."""
    np.save(os.path.join(c.dir, name + ".npy"), m.numpy().astype(bool))


def with_weights_as(module, dtype):
    """The module with every parameter rounded to dtype and back (the values a
    half-precision checkpoint holds), for the outputs that file must give."""
    rounded = {"F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64}[dtype]
    copy = {k: v.detach().to(rounded).to(torch.float32) for k, v in module.state_dict().items()}
    module.load_state_dict(copy)
    return module


def case_load_encoder(seed):
    """A bare nn.TransformerEncoder saved as a state_dict with no metadata: tscope
    run --load reads every size from it and needs --heads, --norm, --activation.
    Also the same weights under a wrapper's prefix with extra tensors, with one
    extra key, and as F16, BF16 and F64 files."""
    c, gen = Case("load_encoder"), torch.Generator().manual_seed(seed)
    S, H, L = 6, 4, 2
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(D, H, FFN, dropout=0.0, activation="gelu", batch_first=True,
                                       norm_first=True)
    enc = nn.TransformerEncoder(layer, L, norm=nn.LayerNorm(D), enable_nested_tensor=False)
    randomize(enc, gen)
    enc.eval()
    (x,) = inputs(gen, (B, S, D))
    kp = pad_mask([6, 3], S)
    sd = enc.state_dict()
    save_safetensors(os.path.join(c.dir, "weights.safetensors"), sd, None)
    c.npy("x", x)
    bool_npy(c, "src_key_padding_mask", kp)
    np.save(os.path.join(c.dir, "src_lengths.npy"), np.array([6, 3], dtype="<i8"))
    c.npy("out", enc(x))
    c.npy("out_src_kpm", enc(x, src_key_padding_mask=kp))

    class Wrapper(nn.Module):  # a model that holds the encoder, as real checkpoints do
        def __init__(self):
            super().__init__()
            self.backbone = enc
            self.classifier = nn.Linear(D, 3)

    wrapped = Wrapper()
    save_safetensors(os.path.join(c.dir, "prefixed.safetensors"), wrapped.state_dict(), {"format": "pt"})
    extra = dict(sd)
    extra["pos_encoder.pe"] = torch.randn((1, 32, D), generator=gen)  # a buffer the model has no place for
    save_safetensors(os.path.join(c.dir, "extra.safetensors"), extra, None)
    for dtype in ("F16", "BF16", "F64"):
        save_safetensors(os.path.join(c.dir, "weights_%s.safetensors" % dtype.lower()), sd, None, dtype)
    for dtype in ("F16", "BF16"):  # F64 holds the float32 values exactly: out.npy
        rounded = copy.deepcopy(enc)
        with_weights_as(rounded, dtype)
        c.npy("out_%s" % dtype.lower(), rounded(x, src_key_padding_mask=kp))


def case_load_transformer(seed):
    """A bare nn.Transformer with no metadata, and every mask of its forward:
    each output is one mask kind alone (with the causal tgt_mask, as
    nn.Transformer is used), then all together, then no tgt_mask at all."""
    c, gen = Case("load_transformer"), torch.Generator().manual_seed(seed)
    S, T, H, L = 7, 6, 2, 2
    torch.manual_seed(seed)
    model = nn.Transformer(D, H, L, L, FFN, dropout=0.0, activation="relu", batch_first=True, norm_first=False)
    randomize(model, gen)
    model.eval()
    src, tgt = inputs(gen, (B, S, D), (B, T, D))
    tm = causal(T)
    skp = pad_mask([7, 5], S)
    tkp = pad_mask([6, 4], T)
    mkp = pad_mask([6, 3], S)  # not the source's: nn.Transformer takes them apart
    save_safetensors(os.path.join(c.dir, "weights.safetensors"), model.state_dict(), None)
    c.npy("src", src)
    c.npy("tgt", tgt)
    bool_npy(c, "src_key_padding_mask", skp)
    bool_npy(c, "tgt_key_padding_mask", tkp)
    bool_npy(c, "memory_key_padding_mask", mkp)
    outs = {
        "out": dict(tgt_mask=tm),
        "out_src_kpm": dict(tgt_mask=tm, src_key_padding_mask=skp),
        "out_tgt_kpm": dict(tgt_mask=tm, tgt_key_padding_mask=tkp),
        "out_mem_kpm": dict(tgt_mask=tm, memory_key_padding_mask=mkp),
        "out_all": dict(tgt_mask=tm, src_key_padding_mask=skp, tgt_key_padding_mask=tkp,
                        memory_key_padding_mask=mkp),
        "out_no_tgt_mask": dict(),
    }
    for name, kw in outs.items():
        c.npy(name, model(src, tgt, **kw))
    c.npy("memory_src_kpm", model.encoder(src, src_key_padding_mask=skp))


def main():
    keep = {"bpe", "bridge", "gpt", "experiments", "edits", "hf", "modern"}  # cases with their own generators (tests/ref/bpe, bridge, gpt, ...)
    for entry in os.listdir(HERE):  # rebuild from nothing so no stale case survives
        path = os.path.join(HERE, entry)
        if os.path.isdir(path) and not entry.startswith((".", "__")) and entry not in keep:
            shutil.rmtree(path)
    case_layernorm()
    case_mha("mha", False, False, 200)
    case_mha("mha_kpm", True, False, 201)
    case_mha("mha_causal", False, True, 202)
    case_mha("mha_kpm_causal", True, True, 203)
    seed = 300
    for norm_first in (False, True):
        for activation in ("relu", "gelu"):
            for final_norm in (True, False):
                case_encoder(norm_first, activation, final_norm, False, seed)
                seed += 1
    case_encoder(False, "relu", True, True, 310)
    case_encoder(True, "gelu", True, True, 311)
    case_encoder_no_residual(False, "relu", 320)
    case_encoder_no_residual(True, "gelu", 321)
    case_decoder_layer("dec_layer_post_relu", False, "relu", False, 400)
    case_decoder_layer("dec_layer_pre_gelu_kpm", True, "gelu", True, 401)
    case_transformer("transformer_post_relu", False, "relu", False, 500)
    case_transformer("transformer_pre_gelu_kpm", True, "gelu", True, 501)
    case_cross_entropy()
    case_adamw()
    case_load_encoder(900)
    case_load_transformer(901)
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(HERE) for f in fs
                if not f.endswith((".py", ".md")) and "/bpe" not in d and "/bridge" not in d and "/gpt" not in d
                and "/experiments" not in d and "/edits" not in d and "/hf" not in d and "/modern" not in d)
    print("fixtures written to %s: %d bytes" % (HERE, total))
    return 0


if __name__ == "__main__":
    sys.exit(main())
