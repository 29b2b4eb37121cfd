"""Five model codebases written by others, as tscope must read them (issue 42).

Run from the repository root with Debian's python3-torch:

    /usr/bin/python3 tests/ref/codebases/make_fixtures.py

Each codebase's model code is reproduced below as its authors wrote it (same classes, same
module and parameter names, same arithmetic), each under its licence notice. Only what
makes a fixture small is changed, and said where it is: positional buffers cut to 64
positions, and minGPT's older @autocast() decorators left off (they do nothing on a CPU).
Classes that two codebases both name (GPT, Block, ...) are bound to other Python names
here, and own_name gives each back its codebase's class name, which the bridge records.

Every model has 2 layers and 4 heads, d_model 16, a vocabulary of 12, and weights far from
their initialisation (matrices N(0, 0.3), biases N(0, 0.2), norm gains 1 + N(0, 0.2)): at
these magnitudes tanh-GELU and exact GELU differ by ~1e-3 in the logits, and the Annotated
Transformer's LayerNorm (unbiased std, eps added to the std) differs from the standard one
by several hundredths, so a wrong variant fails `--expect` at its default tolerance.

Written into one folder each:
- wlm/:        pytorch/examples' word_language_model TransformerModel (a subclass of
               nn.Transformer, seq-first): model.pt (state_dict), ids.npy (S, B),
               x.npy (its encoder's input, (B, S, D)), enc_out.npy (its encoder's output,
               (B, S, D)), bridge.tstrace (the bridge's recording of model(ids)).
- nanogpt/:    nanoGPT's model.py GPT: model.pt (a bare state_dict, as torch.save(model.
               state_dict()) writes it: no model_args), ids.npy (B, S), logits.npy (every
               position, model(ids, targets=ids)), bridge.tstrace (model(ids) as at
               inference: only the last position's logits).
- mingpt/:     minGPT's mingpt/model.py as it is today (transformer.wte/h/ln_f, c_attn,
               NewGELU: tanh): model.pt, ids.npy, logits.npy, bridge.tstrace.
- mingpt_old/: minGPT's older model.py (tok_emb, pos_emb [1, T, D], blocks.N.attn.key/
               query/value/proj, mlp.0/mlp.2 around nn.GELU, head): the same files, and
               renamed.pt (its names with "net." before them and "blocks" as "layers",
               for --names).
- annotated/:  the Annotated Transformer (harvardnlp, 2022 edition) make_model: model.pt,
               ids.npy (the source, (B, S), 1 first as its data_gen writes it), logits.npy
               (generator.proj of the decoder's output, (B, S - 1, V): the decoder reads
               the source shifted, tgt = src[:, :-1], as its Batch makes it and as tscope's
               encoder-decoders read --ids), bridge.tstrace.
- decoder/:    not a codebase: a GPT in PyTorch under the names `tscope shapes --params --arch
               decoder` prints, to load back as the decoder-only model it is: model.pt,
               ids.npy, logits.npy, names.txt.
"""
import copy
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import tscope_trace  # noqa: E402

torch.set_num_threads(1)
V, D, H, L, T = 12, 16, 4, 2, 16
B, S = 2, 8


def randomize(model, gen):
    """Trained-size weights: biases and gains away from 0 and 1, so a missing one shows."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or name.endswith("b_2"):
                p.copy_(torch.randn(p.shape, generator=gen) * 0.2)
            elif p.dim() == 1:
                p.copy_(1 + torch.randn(p.shape, generator=gen) * 0.2)
            else:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.3)


def save(folder, name, array, dtype):
    np.save(os.path.join(HERE, folder, name), np.ascontiguousarray(array).astype(dtype))


def folder(name):
    os.makedirs(os.path.join(HERE, name), exist_ok=True)
    return os.path.join(HERE, name)


def own_name(cls, name):
    """Give a class the name its codebase gives it. Two codebases here define classes of one
    name (GPT, Block, CausalSelfAttention, LayerNorm, PositionalEncoding), so this file binds
    them to other Python names; the bridge records type(model).__name__ as the trace's model
    and reads a leaf module's kind from its class name, so each class carries its own name."""
    cls.__name__ = cls.__qualname__ = name
    return cls


# =============================================================================================
# pytorch/examples, word_language_model/model.py (TransformerModel and PositionalEncoding).
# BSD 3-Clause License. Copyright (c) 2017, All rights reserved (the pytorch/examples
# contributors). Redistribution and use in source and binary forms, with or without
# modification, are permitted provided that the conditions of the BSD 3-Clause licence are
# met: this notice, the list of conditions and the disclaimer are retained, and neither the
# name of the copyright holder nor its contributors are used to endorse derived products.
# THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS "AS IS" AND ANY EXPRESS
# OR IMPLIED WARRANTIES ARE DISCLAIMED.
# =============================================================================================

class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super(PositionalEncoding, self).__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0).transpose(0, 1)
        self.register_buffer('pe', pe)

    def forward(self, x):
        x = x + self.pe[:x.size(0), :]
        return self.dropout(x)


class TransformerModel(nn.Transformer):
    """Container module with an encoder, a recurrent or transformer module, and a decoder."""

    def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
        super(TransformerModel, self).__init__(d_model=ninp, nhead=nhead, dim_feedforward=nhid,
                                               num_encoder_layers=nlayers)
        self.model_type = 'Transformer'
        self.src_mask = None
        self.pos_encoder = PositionalEncoding(ninp, dropout)
        self.input_emb = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.decoder = nn.Linear(ninp, ntoken)
        self.init_weights()

    def _generate_square_subsequent_mask(self, sz):
        return torch.log(torch.tril(torch.ones(sz, sz)))

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.input_emb.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, src, has_mask=True):
        if has_mask:
            device = src.device
            if self.src_mask is None or self.src_mask.size(0) != len(src):
                mask = self._generate_square_subsequent_mask(len(src)).to(device)
                self.src_mask = mask
        else:
            self.src_mask = None
        src = self.input_emb(src) * math.sqrt(self.ninp)
        src = self.pos_encoder(src)
        output = self.encoder(src, mask=self.src_mask)
        output = self.decoder(output)
        return F.log_softmax(output, dim=-1)


def wlm_files():
    d = folder("wlm")
    gen = torch.Generator().manual_seed(420)
    torch.manual_seed(420)
    model = TransformerModel(ntoken=V, ninp=D, nhead=H, nhid=32, nlayers=L, dropout=0.0)
    model.pos_encoder.pe = model.pos_encoder.pe[:64].clone()  # the fixture's size: 64 positions
    randomize(model, gen)
    model.eval()
    torch.save(model.state_dict(), os.path.join(d, "model.pt"))
    ids = torch.randint(0, V, (S, B), generator=gen)  # (S, B): seq-first, as its batchify makes them
    save("wlm", "ids.npy", ids.numpy(), "<i8")
    with torch.no_grad():
        x = model.pos_encoder(model.input_emb(ids) * math.sqrt(model.ninp))
        enc = model.encoder(x, mask=model._generate_square_subsequent_mask(S))
    save("wlm", "x.npy", x.transpose(0, 1).numpy(), "<f4")
    save("wlm", "enc_out.npy", enc.transpose(0, 1).numpy(), "<f4")
    with torch.no_grad():
        tscope_trace.trace(model, os.path.join(d, "bridge.tstrace"), ids)


# =============================================================================================
# nanoGPT, model.py (Andrej Karpathy): LayerNorm, CausalSelfAttention, MLP, Block, GPT.
# MIT License. Copyright (c) 2022 Andrej Karpathy. Permission is hereby granted, free of
# charge, to any person obtaining a copy of this software and associated documentation files
# (the "Software"), to deal in the Software without restriction, including without limitation
# the rights to use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies
# of the Software, and to permit persons to whom the Software is furnished to do so, subject
# to the following conditions: The above copyright notice and this permission notice shall be
# included in all copies or substantial portions of the Software. THE SOFTWARE IS PROVIDED
# "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED.
# =============================================================================================

class LayerNorm(nn.Module):
    """ LayerNorm but with an optional bias. PyTorch doesn't support simply bias=False """

    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, input):
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):

    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        # key, query, value projections for all heads, but in a batch
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        # output projection
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        # regularization
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout
        # flash attention make GPU go brrrrr but support is only in PyTorch >= 2.0
        self.flash = hasattr(torch.nn.functional, 'scaled_dot_product_attention')
        if not self.flash:
            # causal mask to ensure that attention is only applied to the left in the input sequence
            self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                                 .view(1, 1, config.block_size, config.block_size))

    def forward(self, x):
        B, T, C = x.size()  # batch size, sequence length, embedding dimensionality (n_embd)

        # calculate query, key, values for all heads in batch and move head forward to be the batch dim
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)

        # causal self-attention; Self-attend: (B, nh, T, hs) x (B, nh, hs, T) -> (B, nh, T, T)
        if self.flash:
            # efficient attention using Flash Attention CUDA kernels
            y = torch.nn.functional.scaled_dot_product_attention(
                q, k, v, attn_mask=None, dropout_p=self.dropout if self.training else 0, is_causal=True)
        else:
            # manual implementation of attention
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble all head outputs side by side

        # output projection
        y = self.resid_dropout(self.c_proj(y))
        return y


class MLP(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        x = self.c_fc(x)
        x = self.gelu(x)
        x = self.c_proj(x)
        x = self.dropout(x)
        return x


class Block(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPTConfig:
    """nanoGPT's @dataclass GPTConfig, as a plain class (the fields and their meaning)."""

    def __init__(self, **kw):
        self.block_size, self.vocab_size, self.n_layer, self.n_head, self.n_embd = 1024, 50304, 12, 12, 768
        self.dropout, self.bias = 0.0, True
        for k, v in kw.items():
            setattr(self, k, v)


class GPT(nn.Module):

    def __init__(self, config):
        super().__init__()
        assert config.vocab_size is not None
        assert config.block_size is not None
        self.config = config

        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # https://paperswithcode.com/method/weight-tying

    def forward(self, idx, targets=None):
        device = idx.device
        b, t = idx.size()
        assert t <= self.config.block_size, f"Cannot forward sequence of length {t}, block size is only {self.config.block_size}"
        pos = torch.arange(0, t, dtype=torch.long, device=device)  # shape (t)

        # forward the GPT model itself
        tok_emb = self.transformer.wte(idx)  # token embeddings of shape (b, t, n_embd)
        pos_emb = self.transformer.wpe(pos)  # position embeddings of shape (t, n_embd)
        x = self.transformer.drop(tok_emb + pos_emb)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)

        if targets is not None:
            # if we are given some desired targets also calculate the loss
            logits = self.lm_head(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        else:
            # inference-time mini-optimization: only forward the lm_head on the very last position
            logits = self.lm_head(x[:, [-1], :])  # note: using list [-1] to preserve the time dim
            loss = None

        return logits, loss


def nanogpt_files():
    d = folder("nanogpt")
    gen = torch.Generator().manual_seed(421)
    torch.manual_seed(421)
    model = GPT(GPTConfig(n_layer=L, n_head=H, n_embd=D, block_size=T, vocab_size=V, dropout=0.0, bias=True))
    randomize(model, gen)
    model.eval()
    torch.save(model.state_dict(), os.path.join(d, "model.pt"))  # bare: no model_args to say the heads
    ids = torch.randint(0, V, (B, S), generator=gen)
    save("nanogpt", "ids.npy", ids.numpy(), "<i8")
    with torch.no_grad():
        logits, _ = model(ids, targets=ids)
        last, _ = model(ids)
    assert last.shape == (B, 1, V) and torch.allclose(last[:, 0], logits[:, -1], atol=1e-6)
    save("nanogpt", "logits.npy", logits.numpy(), "<f4")
    with torch.no_grad():  # as at inference: no targets, the last position's logits only
        tscope_trace.trace(model, os.path.join(d, "bridge.tstrace"), ids)


# =============================================================================================
# minGPT, mingpt/model.py (Andrej Karpathy): today's (NewGELU, c_attn, transformer.h) and an
# older one (separate key/query/value, tok_emb/pos_emb, blocks, head).
# MIT License. Copyright (c) Andrej Karpathy. Permission is hereby granted, free of charge,
# to any person obtaining a copy of this software and associated documentation files (the
# "Software"), to deal in the Software without restriction, including without limitation the
# rights to use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies of
# the Software, and to permit persons to whom the Software is furnished to do so, subject to
# the following conditions: The above copyright notice and this permission notice shall be
# included in all copies or substantial portions of the Software. THE SOFTWARE IS PROVIDED
# "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED.
# =============================================================================================

class NewGELU(nn.Module):
    """
    Implementation of the GELU activation function currently in Google BERT repo (identical to OpenAI GPT).
    Reference: Gaussian Error Linear Units (GELU) paper: https://arxiv.org/abs/1606.08415
    """
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class MinCausalSelfAttention(nn.Module):
    """minGPT's CausalSelfAttention (today's); own_name gives back its class name."""

    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        # key, query, value projections for all heads, but in a batch
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        # output projection
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        # regularization
        self.attn_dropout = nn.Dropout(config.attn_pdrop)
        self.resid_dropout = nn.Dropout(config.resid_pdrop)
        # causal mask to ensure that attention is only applied to the left in the input sequence
        self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                             .view(1, 1, config.block_size, config.block_size))
        self.n_head = config.n_head
        self.n_embd = config.n_embd

    def forward(self, x):
        B, T, C = x.size()  # batch size, sequence length, embedding dimensionality (n_embd)

        # calculate query, key, values for all heads in batch and move head forward to be the batch dim
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)

        # causal self-attention; Self-attend: (B, nh, T, hs) x (B, nh, hs, T) -> (B, nh, T, T)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble all head outputs side by side

        # output projection
        y = self.resid_dropout(self.c_proj(y))
        return y


class MinBlock(nn.Module):
    """ an unassuming Transformer block (minGPT's Block, today's) """

    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = MinCausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = nn.ModuleDict(dict(
            c_fc=nn.Linear(config.n_embd, 4 * config.n_embd),
            c_proj=nn.Linear(4 * config.n_embd, config.n_embd),
            act=NewGELU(),
            dropout=nn.Dropout(config.resid_pdrop),
        ))
        m = self.mlp
        self.mlpf = lambda x: m.dropout(m.c_proj(m.act(m.c_fc(x))))  # MLP forward

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlpf(self.ln_2(x))
        return x


class MinGPTConfig:
    """minGPT's CfgNode from GPT.get_default_config(), with the sizes given."""

    def __init__(self, **kw):
        self.embd_pdrop = self.resid_pdrop = self.attn_pdrop = 0.1
        for k, v in kw.items():
            setattr(self, k, v)


class MinGPT(nn.Module):
    """ GPT Language Model (minGPT's GPT, today's) """

    def __init__(self, config):
        super().__init__()
        assert config.vocab_size is not None
        assert config.block_size is not None
        self.block_size = config.block_size
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.embd_pdrop),
            h=nn.ModuleList([MinBlock(config) for _ in range(config.n_layer)]),
            ln_f=nn.LayerNorm(config.n_embd),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)

    def forward(self, idx, targets=None):
        device = idx.device
        b, t = idx.size()
        assert t <= self.block_size, f"Cannot forward sequence of length {t}, block size is only {self.block_size}"
        pos = torch.arange(0, t, dtype=torch.long, device=device).unsqueeze(0)  # shape (1, t)

        # forward the GPT model itself
        tok_emb = self.transformer.wte(idx)  # token embeddings of shape (b, t, n_embd)
        pos_emb = self.transformer.wpe(pos)  # position embeddings of shape (1, t, n_embd)
        x = self.transformer.drop(tok_emb + pos_emb)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)

        # if we are given some desired targets also calculate the loss
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)

        return logits, loss


class OldCausalSelfAttention(nn.Module):
    """
    A vanilla multi-head masked self-attention layer with a projection at the end.
    (minGPT's older CausalSelfAttention; own_name gives back its class name.)
    """

    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        # key, query, value projections for all heads
        self.key = nn.Linear(config.n_embd, config.n_embd)
        self.query = nn.Linear(config.n_embd, config.n_embd)
        self.value = nn.Linear(config.n_embd, config.n_embd)
        # regularization
        self.attn_drop = nn.Dropout(config.attn_pdrop)
        self.resid_drop = nn.Dropout(config.resid_pdrop)
        # output projection
        self.proj = nn.Linear(config.n_embd, config.n_embd)
        # causal mask to ensure that attention is only applied to the left in the input sequence
        self.register_buffer("mask", torch.tril(torch.ones(config.block_size, config.block_size))
                             .view(1, 1, config.block_size, config.block_size))
        self.n_head = config.n_head

    def forward(self, x, layer_past=None):
        B, T, C = x.size()

        # calculate query, key, values for all heads in batch and move head forward to be the batch dim
        k = self.key(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = self.query(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = self.value(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)

        # causal self-attention; Self-attend: (B, nh, T, hs) x (B, nh, hs, T) -> (B, nh, T, T)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float('-inf'))
        att = F.softmax(att, dim=-1)
        att = self.attn_drop(att)
        y = att @ v  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble all head outputs side by side

        # output projection
        y = self.resid_drop(self.proj(y))
        return y


class OldBlock(nn.Module):
    """ an unassuming Transformer block (minGPT's older Block) """

    def __init__(self, config):
        super().__init__()
        self.ln1 = nn.LayerNorm(config.n_embd)
        self.ln2 = nn.LayerNorm(config.n_embd)
        self.attn = OldCausalSelfAttention(config)
        self.mlp = nn.Sequential(
            nn.Linear(config.n_embd, 4 * config.n_embd),
            nn.GELU(),
            nn.Linear(4 * config.n_embd, config.n_embd),
            nn.Dropout(config.resid_pdrop),
        )

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return x


class OldGPT(nn.Module):
    """  the full GPT language model, with a context size of block_size (minGPT's older GPT) """

    def __init__(self, config):
        super().__init__()

        # input embedding stem
        self.tok_emb = nn.Embedding(config.vocab_size, config.n_embd)
        self.pos_emb = nn.Parameter(torch.zeros(1, config.block_size, config.n_embd))
        self.drop = nn.Dropout(config.embd_pdrop)
        # transformer
        self.blocks = nn.Sequential(*[OldBlock(config) for _ in range(config.n_layer)])
        # decoder head
        self.ln_f = nn.LayerNorm(config.n_embd)
        self.head = nn.Linear(config.n_embd, config.vocab_size, bias=False)

        self.block_size = config.block_size

    def forward(self, idx, targets=None):
        b, t = idx.size()
        assert t <= self.block_size, "Cannot forward, model block size is exhausted."

        # forward the GPT model
        token_embeddings = self.tok_emb(idx)  # each index maps to a (learnable) vector
        position_embeddings = self.pos_emb[:, :t, :]  # each position maps to a (learnable) vector
        x = self.drop(token_embeddings + position_embeddings)
        x = self.blocks(x)
        x = self.ln_f(x)
        logits = self.head(x)

        # if we are given some desired targets also calculate the loss
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

        return logits, loss


for _cls, _name in ((MinCausalSelfAttention, "CausalSelfAttention"), (MinBlock, "Block"), (MinGPT, "GPT"),
                    (OldCausalSelfAttention, "CausalSelfAttention"), (OldBlock, "Block"), (OldGPT, "GPT")):
    own_name(_cls, _name)


def gpt_fixture(name, model, seed):
    d = folder(name)
    gen = torch.Generator().manual_seed(seed)
    randomize(model, gen)
    model.eval()
    torch.save(model.state_dict(), os.path.join(d, "model.pt"))
    ids = torch.randint(0, V, (B, S), generator=gen)
    save(name, "ids.npy", ids.numpy(), "<i8")
    with torch.no_grad():
        logits, _ = model(ids)
    save(name, "logits.npy", logits.numpy(), "<f4")
    with torch.no_grad():
        tscope_trace.trace(model, os.path.join(d, "bridge.tstrace"), ids)
    return model


def mingpt_files():
    torch.manual_seed(422)
    config = MinGPTConfig(n_layer=L, n_head=H, n_embd=D, vocab_size=V, block_size=T)
    gpt_fixture("mingpt", MinGPT(config), 422)
    torch.manual_seed(423)
    old = gpt_fixture("mingpt_old", OldGPT(config), 423)
    # the same weights under other names, for a --names file (tests/codebases_test.sh)
    renamed = {"net." + k.replace("blocks.", "layers."): v for k, v in old.state_dict().items()}
    torch.save(renamed, os.path.join(HERE, "mingpt_old", "renamed.pt"))


# =============================================================================================
# The Annotated Transformer (harvardnlp/annotated-transformer, the 2022 edition by Austin
# Huang, Suraj Subramanian, Jonathan Sum, Khalid Almubarak and Stella Biderman, after Sasha
# Rush's 2018 original): make_model and the modules it builds.
# MIT License. Copyright (c) 2018 Alexander Rush. Permission is hereby granted, free of
# charge, to any person obtaining a copy of this software and associated documentation files
# (the "Software"), to deal in the Software without restriction, including without limitation
# the rights to use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies
# of the Software, and to permit persons to whom the Software is furnished to do so, subject
# to the following conditions: The above copyright notice and this permission notice shall be
# included in all copies or substantial portions of the Software. THE SOFTWARE IS PROVIDED
# "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED.
# =============================================================================================

class EncoderDecoder(nn.Module):
    """
    A standard Encoder-Decoder architecture. Base for this and many
    other models.
    """

    def __init__(self, encoder, decoder, src_embed, tgt_embed, generator):
        super(EncoderDecoder, self).__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.src_embed = src_embed
        self.tgt_embed = tgt_embed
        self.generator = generator

    def forward(self, src, tgt, src_mask, tgt_mask):
        "Take in and process masked src and target sequences."
        return self.decode(self.encode(src, src_mask), src_mask, tgt, tgt_mask)

    def encode(self, src, src_mask):
        return self.encoder(self.src_embed(src), src_mask)

    def decode(self, memory, src_mask, tgt, tgt_mask):
        return self.decoder(self.tgt_embed(tgt), memory, src_mask, tgt_mask)


class Generator(nn.Module):
    "Define standard linear + softmax generation step."

    def __init__(self, d_model, vocab):
        super(Generator, self).__init__()
        self.proj = nn.Linear(d_model, vocab)

    def forward(self, x):
        return F.log_softmax(self.proj(x), dim=-1)


def clones(module, N):
    "Produce N identical layers."
    return nn.ModuleList([copy.deepcopy(module) for _ in range(N)])


class Encoder(nn.Module):
    "Core encoder is a stack of N layers"

    def __init__(self, layer, N):
        super(Encoder, self).__init__()
        self.layers = clones(layer, N)
        self.norm = AnnotatedLayerNorm(layer.size)

    def forward(self, x, mask):
        "Pass the input (and mask) through each layer in turn."
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)


class AnnotatedLayerNorm(nn.Module):
    "Construct a layernorm module (See citation for details). (Its LayerNorm; own_name gives it that name.)"

    def __init__(self, features, eps=1e-6):
        super(AnnotatedLayerNorm, self).__init__()
        self.a_2 = nn.Parameter(torch.ones(features))
        self.b_2 = nn.Parameter(torch.zeros(features))
        self.eps = eps

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        std = x.std(-1, keepdim=True)
        return self.a_2 * (x - mean) / (std + self.eps) + self.b_2


class SublayerConnection(nn.Module):
    """
    A residual connection followed by a layer norm.
    Note for code simplicity the norm is first as opposed to last.
    """

    def __init__(self, size, dropout):
        super(SublayerConnection, self).__init__()
        self.norm = AnnotatedLayerNorm(size)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, sublayer):
        "Apply residual connection to any sublayer with the same size."
        return x + self.dropout(sublayer(self.norm(x)))


class EncoderLayer(nn.Module):
    "Encoder is made up of self-attn and feed forward (defined below)"

    def __init__(self, size, self_attn, feed_forward, dropout):
        super(EncoderLayer, self).__init__()
        self.self_attn = self_attn
        self.feed_forward = feed_forward
        self.sublayer = clones(SublayerConnection(size, dropout), 2)
        self.size = size

    def forward(self, x, mask):
        "Follow Figure 1 (left) for connections."
        x = self.sublayer[0](x, lambda x: self.self_attn(x, x, x, mask))
        return self.sublayer[1](x, self.feed_forward)


class Decoder(nn.Module):
    "Generic N layer decoder with masking."

    def __init__(self, layer, N):
        super(Decoder, self).__init__()
        self.layers = clones(layer, N)
        self.norm = AnnotatedLayerNorm(layer.size)

    def forward(self, x, memory, src_mask, tgt_mask):
        for layer in self.layers:
            x = layer(x, memory, src_mask, tgt_mask)
        return self.norm(x)


class DecoderLayer(nn.Module):
    "Decoder is made of self-attn, src-attn, and feed forward (defined below)"

    def __init__(self, size, self_attn, src_attn, feed_forward, dropout):
        super(DecoderLayer, self).__init__()
        self.size = size
        self.self_attn = self_attn
        self.src_attn = src_attn
        self.feed_forward = feed_forward
        self.sublayer = clones(SublayerConnection(size, dropout), 3)

    def forward(self, x, memory, src_mask, tgt_mask):
        "Follow Figure 1 (right) for connections."
        m = memory
        x = self.sublayer[0](x, lambda x: self.self_attn(x, x, x, tgt_mask))
        x = self.sublayer[1](x, lambda x: self.src_attn(x, m, m, src_mask))
        return self.sublayer[2](x, self.feed_forward)


def subsequent_mask(size):
    "Mask out subsequent positions."
    attn_shape = (1, size, size)
    subsequent_mask = torch.triu(torch.ones(attn_shape), diagonal=1).type(torch.uint8)
    return subsequent_mask == 0


def attention(query, key, value, mask=None, dropout=None):
    "Compute 'Scaled Dot Product Attention'"
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, value), p_attn


class MultiHeadedAttention(nn.Module):
    def __init__(self, h, d_model, dropout=0.1):
        "Take in model size and number of heads."
        super(MultiHeadedAttention, self).__init__()
        assert d_model % h == 0
        # We assume d_v always equals d_k
        self.d_k = d_model // h
        self.h = h
        self.linears = clones(nn.Linear(d_model, d_model), 4)
        self.attn = None
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query, key, value, mask=None):
        "Implements Figure 2"
        if mask is not None:
            # Same mask applied to all h heads.
            mask = mask.unsqueeze(1)
        nbatches = query.size(0)

        # 1) Do all the linear projections in batch from d_model => h x d_k
        query, key, value = [
            lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
            for lin, x in zip(self.linears, (query, key, value))
        ]

        # 2) Apply attention on all the projected vectors in batch.
        x, self.attn = attention(query, key, value, mask=mask, dropout=self.dropout)

        # 3) "Concat" using a view and apply a final linear.
        x = (x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k))
        del query
        del key
        del value
        return self.linears[-1](x)


class PositionwiseFeedForward(nn.Module):
    "Implements FFN equation."

    def __init__(self, d_model, d_ff, dropout=0.1):
        super(PositionwiseFeedForward, self).__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.w_2(self.dropout(self.w_1(x).relu()))


class Embeddings(nn.Module):
    def __init__(self, d_model, vocab):
        super(Embeddings, self).__init__()
        self.lut = nn.Embedding(vocab, d_model)
        self.d_model = d_model

    def forward(self, x):
        return self.lut(x) * math.sqrt(self.d_model)


class AnnotatedPositionalEncoding(nn.Module):
    "Implement the PE function. (Its PositionalEncoding; own_name gives it that name.)"

    def __init__(self, d_model, dropout, max_len=5000):
        super(AnnotatedPositionalEncoding, self).__init__()
        self.dropout = nn.Dropout(p=dropout)

        # Compute the positional encodings once in log space.
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + self.pe[:, : x.size(1)].requires_grad_(False)
        return self.dropout(x)


def make_model(src_vocab, tgt_vocab, N=6, d_model=512, d_ff=2048, h=8, dropout=0.1):
    "Helper: Construct a model from hyperparameters."
    c = copy.deepcopy
    attn = MultiHeadedAttention(h, d_model)
    ff = PositionwiseFeedForward(d_model, d_ff, dropout)
    position = AnnotatedPositionalEncoding(d_model, dropout)
    model = EncoderDecoder(
        Encoder(EncoderLayer(d_model, c(attn), c(ff), dropout), N),
        Decoder(DecoderLayer(d_model, c(attn), c(attn), c(ff), dropout), N),
        nn.Sequential(Embeddings(d_model, src_vocab), c(position)),
        nn.Sequential(Embeddings(d_model, tgt_vocab), c(position)),
        Generator(d_model, tgt_vocab),
    )

    # This was important from their code.
    # Initialize parameters with Glorot / fan_avg.
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    return model


own_name(AnnotatedLayerNorm, "LayerNorm")
own_name(AnnotatedPositionalEncoding, "PositionalEncoding")


def annotated_files():
    d = folder("annotated")
    gen = torch.Generator().manual_seed(424)
    torch.manual_seed(424)
    model = make_model(V, V, N=L, d_model=D, d_ff=32, h=H)
    for emb in (model.src_embed, model.tgt_embed):
        emb[1].pe = emb[1].pe[:, :64].clone()  # the fixture's size: 64 positions
    randomize(model, gen)
    model.eval()
    torch.save(model.state_dict(), os.path.join(d, "model.pt"))
    # its data_gen: ids from 1 (0 is its padding), the first one 1; its Batch: the decoder
    # reads tgt = src[:, :-1] under subsequent_mask, the source mask hides no pad
    src = torch.randint(1, V, (B, S), generator=gen)
    src[:, 0] = 1
    tgt = src[:, :-1]
    src_mask = (src != 0).unsqueeze(-2)
    tgt_mask = (tgt != 0).unsqueeze(-2) & subsequent_mask(tgt.size(-1)).type_as(src_mask.data)
    save("annotated", "ids.npy", src.numpy(), "<i8")
    with torch.no_grad():
        out = model(src, tgt, src_mask, tgt_mask)
        logits = model.generator.proj(out)
    save("annotated", "logits.npy", logits.numpy(), "<f4")
    with torch.no_grad():
        tscope_trace.trace(model, os.path.join(d, "bridge.tstrace"), src, tgt, src_mask, tgt_mask)


# =============================================================================================
# Not a codebase: a GPT written in PyTorch under the names `tscope shapes --params --arch
# decoder` prints (issue 42: those names must load back as the decoder-only model they are).
# Pre-LN blocks of nn.MultiheadAttention (in_proj, causal) and linear1/gelu/linear2, learned
# positions, a final LayerNorm, logits read from the token table.
# =============================================================================================

class ParamsGPTBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(D, H, batch_first=True)
        self.linear1, self.linear2 = nn.Linear(D, 32), nn.Linear(32, D)
        self.norm1, self.norm2 = nn.LayerNorm(D), nn.LayerNorm(D)

    def forward(self, x, mask):
        h = self.norm1(x)
        x = x + self.self_attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.linear2(F.gelu(self.linear1(self.norm2(x))))


class ParamsGPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Module()
        self.embed.tokens, self.embed.positions = nn.Embedding(V, D), nn.Embedding(S, D)
        self.decoder = nn.Module()
        self.decoder.layers = nn.ModuleList(ParamsGPTBlock() for _ in range(L))
        self.decoder.norm = nn.LayerNorm(D)

    def forward(self, ids):
        T_ = ids.shape[1]
        x = self.embed.tokens(ids) + self.embed.positions(torch.arange(T_))
        mask = torch.triu(torch.full((T_, T_), float("-inf")), 1)
        for layer in self.decoder.layers:
            x = layer(x, mask)
        return self.decoder.norm(x) @ self.embed.tokens.weight.T


def params_decoder_files():
    """decoder/: model.pt (the state_dict), ids.npy (B, S), logits.npy (B, S, V), names.txt (each
    name and shape, as shapes --params prints them)."""
    d = folder("decoder")
    gen = torch.Generator().manual_seed(425)
    torch.manual_seed(425)
    model = ParamsGPT()
    randomize(model, gen)
    model.eval()
    torch.save(model.state_dict(), os.path.join(d, "model.pt"))
    with open(os.path.join(d, "names.txt"), "w") as f:
        for name, t in model.state_dict().items():
            f.write("%s [%s]\n" % (name, ", ".join(str(n) for n in t.shape)))
    ids = torch.randint(0, V, (B, S), generator=gen)
    save("decoder", "ids.npy", ids.numpy(), "<i8")
    with torch.no_grad():
        save("decoder", "logits.npy", model(ids).numpy(), "<f4")


if __name__ == "__main__":
    which = sys.argv[1:] or ["wlm", "nanogpt", "mingpt", "annotated", "params_decoder"]
    for w in which:
        globals()[w + "_files"]()
    print("wrote", ", ".join(which), "under", HERE)
