"""Fixtures of torch.save files, for tests/pt_test.sh and tests/test_load_cli.c.

Run from the repository root with Debian's python3-torch:

    /usr/bin/python3 tests/ref/pt/make_fixtures.py

Written:
- encoder.pt: tests/ref/load_encoder's nn.TransformerEncoder weights saved with torch.save(sd),
  as most checkpoints in the wild are; encoder_views.pt: the same values, some tensors views into
  a larger storage (an offset, transposed strides, two tensors sharing one storage);
  encoder_bf16.pt, encoder_f16.pt: the weights in those dtypes (PyTorch's outputs for them are
  load_encoder's out_bf16.npy and out_f16.npy); x_seq_first.npy: load_encoder's x as (S, B, D);
  checkpoint.pt: a training checkpoint, the
  state_dict under "model_state_dict" beside an Adam optimizer's state, an epoch and a config.
- nanogpt/: a small GPT written here after nanoGPT's model.py (Karpathy, 2022): wte, wpe, blocks
  of LayerNorm (optional bias, eps 1e-5), causal self-attention with one nn.Linear c_attn (q, k,
  v) and c_proj, the causal mask held as the buffer attn.bias, an MLP of nn.Linear c_fc, exact
  GELU, c_proj; a final ln_f and lm_head tied to wte. Its ckpt.pt is the dict nanoGPT's train.py
  saves: model, optimizer (AdamW after one step), model_args, iter_num, best_val_loss, config.
  meta.pkl beside it is nanoGPT's character vocabulary (vocab_size, itos, stoi) of the 65
  characters of shakespeare_char. ids.npy: a batch (2, 12) of ids; logits.npy: the model's logits
  for them (B, S, V); text_logits.npy: the logits of TEXT; compiled.pt: the same checkpoint as
  torch.compile's wrapper names it ("_orig_mod." before each name); nobias/ckpt.pt: bias=False,
  with its ids and logits.
- nanogpt/bridge.tstrace: python/tscope_trace.py's recording of the nanoGPT model on ids.npy
  (with targets, so lm_head sees every position), its attention written out as nanoGPT does.
- wlm/: a TransformerModel written here after pytorch/examples' word_language_model (a subclass
  of nn.Transformer whose forward embeds ids (S, B), scales by sqrt(d), adds sinusoidal
  positions, runs self.encoder with a causal float mask log(tril) and a Linear decoder; seq-first
  as PyTorch's default): model.pt (its state_dict), ids.npy (S, B), x.npy (the encoder's input
  transposed to (B, S, D)), bridge.tstrace (the bridge's recording of model(ids)).
- hostile/*.pt: files tscope must refuse with one line (bad zips, pickles outside the subset,
  storages shorter than their tensors, ...), written byte by byte with the standard library.
"""
import collections
import importlib.util
import math
import os
import pickle
import shutil
import struct
import sys
import zipfile

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.dirname(HERE)


# tests/ref/make_fixtures.py's safetensors reader, loaded by path: this file has the same name
_spec = importlib.util.spec_from_file_location("ref_fixtures", os.path.join(REF, "make_fixtures.py"))
_ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ref)


def load_safetensors(path):
    return collections.OrderedDict((k, torch.from_numpy(v.copy())) for k, v in _ref.load_safetensors(path).items())


# ---- torch.save state_dicts of the load_encoder weights ----

def encoder_files():
    sd = load_safetensors(os.path.join(REF, "load_encoder", "weights.safetensors"))
    torch.save(sd, os.path.join(HERE, "encoder.pt"))
    views = collections.OrderedDict()
    for k, v in sd.items():
        views[k] = v
    # an offset: the tensor starts 5 elements into a larger storage
    w = sd["layers.0.linear1.weight"]
    big = torch.cat([torch.full((5,), 7.0), w.flatten(), torch.full((3,), 9.0)])
    views["layers.0.linear1.weight"] = big[5:5 + w.numel()].view(w.shape)
    # transposed strides: (out, in) stored as the transpose of an (in, out) block
    w = sd["layers.1.linear2.weight"]
    views["layers.1.linear2.weight"] = w.t().contiguous().t()
    assert not views["layers.1.linear2.weight"].is_contiguous()
    # two tensors in one storage: both norms' weights side by side
    a, b = sd["layers.0.norm1.weight"], sd["layers.0.norm2.weight"]
    both = torch.cat([a, b])
    views["layers.0.norm1.weight"], views["layers.0.norm2.weight"] = both[:a.numel()], both[a.numel():]
    for k in sd:
        assert torch.equal(views[k], sd[k]), k
    torch.save(views, os.path.join(HERE, "encoder_views.pt"))
    # load_encoder's input as a seq-first module takes it, (S, B, D): a set-up mistake when given as (B, S, D)
    x = np.load(os.path.join(REF, "load_encoder", "x.npy"))
    np.save(os.path.join(HERE, "x_seq_first.npy"), np.ascontiguousarray(x.transpose(1, 0, 2)))
    torch.save(collections.OrderedDict((k, v.to(torch.bfloat16)) for k, v in sd.items()),
               os.path.join(HERE, "encoder_bf16.pt"))
    torch.save(collections.OrderedDict((k, v.to(torch.float16)) for k, v in sd.items()),
               os.path.join(HERE, "encoder_f16.pt"))
    # a training checkpoint as the PyTorch tutorials save one
    params = [nn.Parameter(v.clone()) for v in sd.values()]
    opt = torch.optim.Adam(params, lr=1e-3)
    sum((p * p).sum() for p in params).backward()
    opt.step()
    torch.save({"epoch": 3, "model_state_dict": sd, "optimizer_state_dict": opt.state_dict(),
                "loss": torch.tensor(0.25), "config": {"d_model": 16, "nhead": 4, "norm_first": True}},
               os.path.join(HERE, "checkpoint.pt"))


# ---- nanoGPT ----

class LayerNorm(nn.Module):
    """nanoGPT's LayerNorm: the bias optional (nn.LayerNorm had no bias=False then)."""

    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, input):
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    """q, k, v from one nn.Linear; attention written out (nanoGPT's path without flash attention)."""

    def __init__(self, config):
        super().__init__()
        assert config["n_embd"] % config["n_head"] == 0
        self.c_attn = nn.Linear(config["n_embd"], 3 * config["n_embd"], bias=config["bias"])
        self.c_proj = nn.Linear(config["n_embd"], config["n_embd"], bias=config["bias"])
        self.attn_dropout = nn.Dropout(config["dropout"])
        self.resid_dropout = nn.Dropout(config["dropout"])
        self.n_head = config["n_head"]
        self.n_embd = config["n_embd"]
        T = config["block_size"]
        self.register_buffer("bias", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config["n_embd"], 4 * config["n_embd"], bias=config["bias"])
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config["n_embd"], config["n_embd"], bias=config["bias"])
        self.dropout = nn.Dropout(config["dropout"])

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = LayerNorm(config["n_embd"], bias=config["bias"])
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config["n_embd"], bias=config["bias"])
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config["vocab_size"], config["n_embd"]),
            wpe=nn.Embedding(config["block_size"], config["n_embd"]),
            drop=nn.Dropout(config["dropout"]),
            h=nn.ModuleList([Block(config) for _ in range(config["n_layer"])]),
            ln_f=LayerNorm(config["n_embd"], bias=config["bias"]),
        ))
        self.lm_head = nn.Linear(config["n_embd"], config["vocab_size"], bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying

    def forward(self, idx, targets=None):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        if targets is not None:
            logits = self.lm_head(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        else:
            logits = self.lm_head(x[:, [-1], :])  # nanoGPT's inference: the last position only
            loss = None
        return logits, loss


CHARS = "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"  # shakespeare_char's 65
TEXT = "First Citizen:\nWe are"


def randomize(model, gen):
    """Weights away from nanoGPT's init (biases and gains away from 0 and 1, so a missing one shows)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.copy_(torch.randn(p.shape, generator=gen) * 0.2)
            elif p.dim() == 1:
                p.copy_(1 + torch.randn(p.shape, generator=gen) * 0.2)
            else:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.3)


def nanogpt(dirname, bias, seed):
    d = os.path.join(HERE, dirname)
    os.makedirs(d, exist_ok=True)
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model_args = dict(n_layer=2, n_head=4, n_embd=16, block_size=24, bias=bias, vocab_size=len(CHARS), dropout=0.0)
    model = GPT(model_args)
    randomize(model, gen)
    # one step of training, so that the checkpoint carries AdamW's state as train.py's does
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95))
    x = torch.randint(0, len(CHARS), (2, 8), generator=gen)
    _, loss = model(x, targets=x)
    loss.backward()
    opt.step()
    opt.zero_grad()
    model.eval()
    config = dict(out_dir=dirname, eval_interval=250, batch_size=2, block_size=24, learning_rate=1e-4,
                  dataset="shakespeare_char", compile=False, dtype="float32")
    checkpoint = {"model": model.state_dict(), "optimizer": opt.state_dict(), "model_args": model_args,
                  "iter_num": 1, "best_val_loss": loss.detach(), "config": config}
    torch.save(checkpoint, os.path.join(d, "ckpt.pt"))
    ids = torch.randint(0, len(CHARS), (2, 12), generator=gen)
    np.save(os.path.join(d, "ids.npy"), ids.numpy().astype("<i8"))
    with torch.no_grad():
        logits, _ = model(ids, targets=ids)
        last, _ = model(ids)
        assert torch.allclose(last[:, 0], logits[:, -1], atol=1e-6)
    np.save(os.path.join(d, "logits.npy"), logits.numpy().astype("<f4"))
    return model, checkpoint


def nanogpt_files():
    model, checkpoint = nanogpt("nanogpt", True, 30)
    d = os.path.join(HERE, "nanogpt")
    stoi = {ch: i for i, ch in enumerate(CHARS)}
    itos = {i: ch for i, ch in enumerate(CHARS)}
    with open(os.path.join(d, "meta.pkl"), "wb") as f:  # as data/shakespeare_char/prepare.py writes it
        pickle.dump({"vocab_size": len(CHARS), "itos": itos, "stoi": stoi}, f)
    ids = torch.tensor([[stoi[c] for c in TEXT]])
    with torch.no_grad():
        logits, _ = model(ids, targets=ids)
    np.save(os.path.join(d, "text_logits.npy"), logits.numpy().astype("<f4"))
    compiled = dict(checkpoint)
    compiled["model"] = collections.OrderedDict(("_orig_mod." + k, v) for k, v in checkpoint["model"].items())
    torch.save(compiled, os.path.join(d, "compiled.pt"))
    nanogpt("nanogpt/nobias", False, 31)
    sys.path.insert(0, os.path.join(os.path.dirname(REF), "..", "python"))
    import tscope_trace
    ids = torch.from_numpy(np.load(os.path.join(d, "ids.npy")))
    with torch.no_grad():
        tscope_trace.trace(model, os.path.join(d, "bridge.tstrace"), ids, targets=ids)


# ---- word_language_model ----

class PositionalEncoding(nn.Module):
    """Sinusoidal positions added to seq-first (S, B, D) embeddings, as word_language_model adds them."""

    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0).transpose(0, 1))  # (max_len, 1, D)

    def forward(self, x):
        return self.dropout(x + self.pe[:x.size(0), :])


class TransformerModel(nn.Transformer):
    """A subclass of nn.Transformer that replaces forward: embedding, positions, its encoder
    under a causal mask, a Linear decoder, log_softmax."""

    def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5, max_len=5000):
        super().__init__(d_model=ninp, nhead=nhead, dim_feedforward=nhid, num_encoder_layers=nlayers)
        self.model_type = "Transformer"
        self.src_mask = None
        self.pos_encoder = PositionalEncoding(ninp, dropout, max_len)  # max_len: only to keep the fixture small
        self.input_emb = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.decoder = nn.Linear(ninp, ntoken)

    def _generate_square_subsequent_mask(self, sz):
        return torch.log(torch.tril(torch.ones(sz, sz)))

    def forward(self, src, has_mask=True):
        if has_mask:
            if self.src_mask is None or self.src_mask.size(0) != len(src):
                self.src_mask = self._generate_square_subsequent_mask(len(src))
        else:
            self.src_mask = None
        src = self.input_emb(src) * math.sqrt(self.ninp)
        src = self.pos_encoder(src)
        output = self.encoder(src, mask=self.src_mask)
        output = self.decoder(output)
        return F.log_softmax(output, dim=-1)


def wlm_files():
    d = os.path.join(HERE, "wlm")
    os.makedirs(d, exist_ok=True)
    gen = torch.Generator().manual_seed(40)
    torch.manual_seed(40)
    model = TransformerModel(ntoken=40, ninp=16, nhead=4, nhid=32, nlayers=2, dropout=0.0, max_len=64)
    randomize(model, gen)
    model.eval()
    torch.save(model.state_dict(), os.path.join(d, "model.pt"))
    ids = torch.randint(0, 40, (10, 3), generator=gen)  # (S, B): seq-first, as its batchify makes them
    np.save(os.path.join(d, "ids.npy"), ids.numpy().astype("<i8"))
    with torch.no_grad():
        x = model.pos_encoder(model.input_emb(ids) * math.sqrt(model.ninp))
    np.save(os.path.join(d, "x.npy"), x.transpose(0, 1).contiguous().numpy().astype("<f4"))
    sys.path.insert(0, os.path.join(os.path.dirname(REF), "..", "python"))
    import tscope_trace
    with torch.no_grad():
        tscope_trace.trace(model, os.path.join(d, "bridge.tstrace"), ids)


# ---- hostile files ----

def pk_str(s):
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def pk_int(i):
    if 0 <= i < 256:
        return b"K" + bytes([i])
    if -(1 << 31) <= i < (1 << 31):
        return b"J" + struct.pack("<i", i)
    return b"\x8a\x08" + struct.pack("<q", i)  # LONG1


def pk_tuple(items):
    return b"(" + b"".join(items) + b"t"


def pk_tensor(key="0", numel=6, offset=0, size=(2, 3), stride=(3, 1), storage="FloatStorage"):
    pid = pk_tuple([pk_str("storage"), b"ctorch\n" + storage.encode() + b"\n", pk_str(key), pk_str("cpu"),
                    pk_int(numel)])
    return (b"ctorch._utils\n_rebuild_tensor_v2\n" +
            pk_tuple([pid + b"Q", pk_int(offset), pk_tuple([pk_int(s) for s in size]),
                      pk_tuple([pk_int(s) for s in stride]), b"\x89",
                      b"ccollections\nOrderedDict\n)R"]) + b"R")


def pk_dict(pairs):
    return b"}(" + b"".join(k + v for k, v in pairs) + b"u"


def pk_file(body):
    return b"\x80\x02" + body + b"."


GOOD_PICKLE = pk_file(pk_dict([(pk_str("w"), pk_tensor())]))
GOOD_DATA = struct.pack("<6f", 1, 2, 3, 4, 5, 6)


def archive(path, members, compress=None):
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as z:
        for name, data in members:
            z.writestr(zipfile.ZipInfo(name), data, compress_type=compress(name) if compress else None)


def pt(path, pkl=GOOD_PICKLE, data=GOOD_DATA, extra=(), prefix="archive/", compress=None):
    members = [(prefix + "data.pkl", pkl), (prefix + "byteorder", b"little")]
    if data is not None:
        members.append((prefix + "data/0", data))
    archive(path, members + list(extra), compress)


def hostile_files():
    d = os.path.join(HERE, "hostile")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    p = lambda name: os.path.join(d, name + ".pt")
    pt(os.path.join(HERE, "tiny.pt"))  # the well-formed file every hostile one is a change of
    good = open(os.path.join(HERE, "tiny.pt"), "rb").read()
    open(p("truncated_zip"), "wb").write(good[:len(good) // 2])
    open(p("zip_magic_only"), "wb").write(b"PK\x03\x04" + b"\x00" * 60)
    archive(p("no_data_pkl"), [("archive/other.txt", b"hi")])
    archive(p("two_data_pkl"), [("a/data.pkl", GOOD_PICKLE), ("b/data.pkl", GOOD_PICKLE)])
    pt(p("compressed"), compress=lambda name: zipfile.ZIP_DEFLATED)
    flipped = bytearray(good)
    at = flipped.find(GOOD_DATA)
    flipped[at] ^= 0xFF
    open(p("crc_mismatch"), "wb").write(bytes(flipped))
    pt(p("opcode_inst"), pk_file(b"(ios\nsystem\n."))
    pt(p("code_in_state_dict"), pk_file(pk_dict([(pk_str("w"), b"cos\nsystem\n" + pk_tuple([pk_str("ls")]) + b"R")])))
    pt(p("pickled_module"), pk_file(b"c__main__\nGPT\n)\x81}b"))
    pt(p("pickle_no_stop"), GOOD_PICKLE[:-1])
    pt(p("pickle_cut"), GOOD_PICKLE[:len(GOOD_PICKLE) // 2])
    pt(p("storage_missing"), data=None)
    pt(p("storage_short"), data=GOOD_DATA[:12])
    pt(p("tensor_past_storage"), pk_file(pk_dict([(pk_str("w"), pk_tensor(size=(3, 3), stride=(3, 1)))])))
    pt(p("offset_past_storage"), pk_file(pk_dict([(pk_str("w"), pk_tensor(offset=4))])))
    pt(p("negative_stride"), pk_file(pk_dict([(pk_str("w"), pk_tensor(stride=(-3, 1)))])))
    pt(p("huge_sizes"), pk_file(pk_dict([(pk_str("w"), pk_tensor(size=(1 << 30, 1 << 30), stride=(1 << 30, 1)))])))
    pt(p("rank_7"), pk_file(pk_dict([(pk_str("w"), pk_tensor(size=(1,) * 7, stride=(1,) * 7))])))
    pt(p("complex_storage"), pk_file(pk_dict([(pk_str("w"), pk_tensor(storage="ComplexFloatStorage"))])))
    pt(p("memo_unset"), pk_file(b"h\x07"))
    pt(p("memo_huge"), pk_file(b"}r\xff\xff\xff\xff"))
    pt(p("stack_empty"), pk_file(b"R"))
    pt(p("setitems_no_mark"), pk_file(b"}" + pk_str("a") + pk_int(1) + b"u"))
    pt(p("long_too_wide"), pk_file(b"\x8a\x09" + b"\x01" * 9))
    pt(p("string_past_end"), pk_file(b"X\xff\xff\xff\x7f"))
    pt(p("top_is_list"), pk_file(b"]"))
    pt(p("no_tensors"), pk_file(pk_dict([(pk_str("a"), pk_int(1))])))
    pt(p("bad_persistent_id"), pk_file(pk_dict([(pk_str("w"), pk_tuple([pk_str("storage")]) + b"Q")])))
    pt(p("storage_key_path"), pk_file(pk_dict([(pk_str("w"), pk_tensor(key="../x"))])))
    archive(p("big_endian"), [("archive/data.pkl", GOOD_PICKLE), ("archive/byteorder", b"big"),
                              ("archive/data/0", GOOD_DATA)])
    pt(p("duplicate_name"), pk_file(pk_dict([(pk_str("w"), pk_tensor()), (pk_str("w"), pk_tensor())])))
    pt(p("int_key"), pk_file(pk_dict([(pk_int(3), pk_tensor())])))
    pt(p("storage_numel_lies"), pk_file(pk_dict([(pk_str("w"), pk_tensor(numel=1 << 40))])))
    # one 4 KiB storage named 2000 times through the memo: 8 MB of copies from a 30 KB file
    many = b"".join(pk_str("w%d" % i) + (pk_tensor(numel=1024, size=(1024,), stride=(1,)) + b"q\x01" if i == 0
                                         else b"h\x01") for i in range(2000))
    pt(p("storage_named_repeatedly"), pk_file(b"}(" + many + b"u"), data=b"\0" * 4096)
    with open(p("legacy_pickle"), "wb") as f:  # torch.save's format before PyTorch 1.6
        f.write(b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19.")
    names = sorted(os.listdir(d))
    print("hostile files:", len(names))


if __name__ == "__main__":
    encoder_files()
    nanogpt_files()
    wlm_files()
    hostile_files()
    total = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(HERE) for f in fs)
    print("tests/ref/pt: %d bytes" % total)
