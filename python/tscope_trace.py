"""tscope_trace: record a PyTorch model's intermediate tensors into a .tstrace file.

The file is the one `tscope run --trace` writes (docs/trace-format.md, version 2), so
`tscope info`, `png`, `view`, `export` and `diff` work on anyone's model:

    import tscope_trace
    with tscope_trace.record(model, "mine.tstrace", source_tokens=["the", "cat"]):
        model(src, tgt)                     # any forward; every step is recorded

    tscope_trace.trace(model, "mine.tstrace", src, tgt)   # the same in one call

    $ tscope diff --common mine.tstrace tscope.tstrace      # compare with tscope's own run

Names. Steps are named as tscope names them wherever the module is one tscope knows:

- nn.TransformerEncoderLayer / nn.TransformerDecoderLayer (post-LN or norm_first): every
  step of the layer, `encoder.layers.{i}.self_attn.{qkv, qkv_heads, qkv_perm, q, k, v,
  scores, scaled, masked, weights, values, values_perm, concat, out}`, `norm1.{in, mean, std,
  y, gamma, beta, out}`, `ffn.{hidden, act, dropout, out}`, `norm2.*`, `out`; a decoder layer's
  `cross_attn.{q_proj, q_heads, q, kv, kv_heads, kv_perm, k, v, ...}` and `norm3.*`.
  These inner steps are not module outputs: the bridge computes them again from the layer's
  own weights and inputs, checks that its result equals the layer's real output (an error
  says so when it does not), and names every recomputed step in the metadata (`recomputed`).
- nn.TransformerEncoder / nn.TransformerDecoder / nn.Transformer: `input`, `decoder.input`,
  the layers under `encoder.layers.{i}` / `decoder.layers.{i}`, the final norms as
  `encoder.norm.*` / `decoder.norm.*`, `encoder.out`, `decoder.out`.
  Subclasses of these modules are recorded the same way unless they replace forward (as
  pytorch/examples' word_language_model TransformerModel does): then the modules it calls
  (its nn.TransformerEncoder) are. Seq-first modules (batch_first=False, PyTorch's default)
  are recorded transposed to tscope's (B, S, D), and the metadata says so (`seq_first`).
- Anything else: each leaf module's output under its module path (`blocks.0.attn.q_proj`),
  labelled by what the module is (a LayerNorm of one's own is `layernorm`); inside modules
  with their own attention code the tensor ops are watched (torch's function mode): a
  matmul giving (B, H, Sq, Sk) is `<module path>.scores`, its scaling `scaled`, a
  masked_fill of it `masked`, the softmax over keys `weights` (tagged as attention
  weights, so tscope draws it as attention), the matmul of the weights with v `values`.
  GPT-2-named models (nanoGPT's GPT, Hugging Face's) have their module paths renamed to
  tscope's (`transformer.h.0.ln_1` -> `decoder.layers.0.norm1.out`, `attn` -> `self_attn`,
  `mlp.c_fc` -> `ffn.hidden`, `lm_head` -> `logits`, a block's output
  `decoder.layers.0.out`), so `tscope diff --common` lines them up with tscope's run.
  Whatever the model hands over itself with `tscope_trace.step("weights", w, op="softmax",
  tag="attn_weights")` inside a module's forward is named `<module path>.weights` (a no-op
  when nothing is recording), as TransformerLens's hook points do.

Settings. What shapes cannot tell (heads, norm placement, activation, the masks in force,
batch and seq) goes into the metadata's `settings` as far as the bridge can see it, in
tscope run's words, and `tscope diff` compares them before any value.

qkv. tscope's fused projection `qkv` is stored per head: the columns of head h are its q, k
and v side by side (seed 000's layout, which its `qkv.reshape(B, S, H, 3 * hd)` needs).
PyTorch's in_proj gives all of q, then all of k, then all of v. The bridge stores `qkv` (and a
cross-attention's `kv`) in tscope's layout and says so in the metadata (`config.qkv_layout`:
`"per-head"`), as tscope's own traces do, so no reader takes one layout for the other.

Only numpy and torch are needed (run with Debian's python3-torch: /usr/bin/python3).
Attention weights are recorded as (B, H, Sq, Sk) with the tag tscope draws as attention.
PyTorch's fused inference fast path is avoided by recording with autograd on.
"""

import contextlib
import json
import math
import os
import re
import shutil
import struct
import sys
import zlib

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

# The file's layout and the op and tag numbers come from the C headers, through
# python/tscope_format.py (made by scripts/gen-trace-format-py.sh; tests/bridge_test.sh
# checks it is up to date): no offset is copied here by hand.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tscope_format as fmt  # noqa: E402

OPS, TAGS = fmt.OPS, fmt.TAGS
FORMAT_VERSION = fmt.VERSION
MAX_RANK = fmt.MAX_RANK


def _align(n):
    return (n + fmt.ALIGN - 1) // fmt.ALIGN * fmt.ALIGN


def _crc(data, crc=0):
    return zlib.crc32(data, crc) & 0xFFFFFFFF


def _put(buf, fields):
    """Little-endian fields into buf: (offset, struct code, value) each."""
    for offset, code, value in fields:
        struct.pack_into("<" + code, buf, offset, value)


class TraceFile:
    """A .tstrace written step by step. Records go to PATH.records.tmp as they come; close()
    writes the header and the metadata (which may name things known only at the end), the
    records, the index and the trailer to PATH.tmp, then renames it to PATH."""

    def __init__(self, path):
        self.path = path
        self.tmp = path + ".tmp"
        self.records_tmp = path + ".records.tmp"
        self.f = open(self.records_tmp, "wb")
        self.offsets, self.copies = [], []  # offsets from the first record
        self.pos = 0

    def step(self, name, op, tag, array):
        """One record keeping every value of `array` (float32, row-major)."""
        a = np.ascontiguousarray(np.asarray(array, dtype=np.float32))
        if a.ndim > MAX_RANK:
            raise ValueError(f"tscope_trace: {name} has rank {a.ndim}; a trace holds at most {MAX_RANK}")
        encoded = name.encode("utf-8")
        if not 1 <= len(encoded) <= 1024:
            raise ValueError(f"tscope_trace: step name '{name}' must be 1 to 1024 bytes")
        index = len(self.offsets)
        prefix_size = _align(fmt.P_NAME + len(encoded) + 1)
        values = a.astype("<f4").tobytes()
        values_area = _align(len(values))
        record_size = prefix_size + values_area + fmt.SUFFIX_SIZE
        prefix = bytearray(prefix_size)
        prefix[0:len(fmt.PREFIX_MAGIC)] = fmt.PREFIX_MAGIC
        content = fmt.CONTENT_STATS | fmt.CONTENT_VALUES | fmt.CONTENT_HIST_FROM_VALUES
        _put(prefix, [(fmt.P_PREFIX_SIZE, "I", prefix_size), (fmt.P_RECORD_SIZE, "Q", record_size),
                      (fmt.P_INDEX, "Q", index), (fmt.P_OP, "H", OPS.index(op)), (fmt.P_TAG, "H", TAGS.index(tag)),
                      (fmt.P_DTYPE, "B", fmt.DTYPE_F32), (fmt.P_RANK, "B", a.ndim), (fmt.P_CONTENT, "B", content),
                      (fmt.P_VIEW_SCALE, "b", 0), (fmt.P_BATCH, "i", -1), (fmt.P_NAME_LEN, "i", len(encoded)),
                      (fmt.P_VALUES_COUNT, "Q", a.size)])
        shape = list(a.shape) + [0] * (MAX_RANK - a.ndim)
        struct.pack_into(f"<{MAX_RANK}q", prefix, fmt.P_SHAPE, *shape)
        prefix[fmt.P_NAME:fmt.P_NAME + len(encoded)] = encoded
        suffix = bytearray(fmt.SUFFIX_SIZE)
        suffix[0:len(fmt.SUFFIX_MAGIC)] = fmt.SUFFIX_MAGIC
        _put(suffix, [(fmt.S_SUFFIX_SIZE, "I", fmt.SUFFIX_SIZE), (fmt.S_INDEX, "Q", index)])
        stats = _statistics(a)
        _put(suffix, zip([fmt.S_MIN, fmt.S_MAX, fmt.S_MEAN, fmt.S_STD, fmt.S_MEAN_ABS, fmt.S_FINITE, fmt.S_NAN,
                          fmt.S_INF, fmt.S_ZEROS], "dddddQQQQ", stats))
        # the histogram is left to the reader, which bins the values (content bit 3)
        _put(suffix, [(fmt.S_VALUES_CRC, "I", _crc(values))])
        record_crc = _crc(bytes(suffix[0:fmt.S_RECORD_CRC]), _crc(bytes(prefix)))
        _put(suffix, [(fmt.S_RECORD_CRC, "I", record_crc)])
        self.f.write(prefix)
        self.f.write(values)
        self.f.write(b"\0" * (values_area - len(values)))
        self.f.write(suffix)
        self.offsets.append(self.pos)
        self.copies.append(bytes(prefix) + bytes(suffix))
        self.pos += record_size

    def close(self, metadata):
        self.f.close()
        meta = dict(metadata)
        meta["format_version"] = FORMAT_VERSION
        meta.setdefault("tscope_version", "tscope_trace.py")
        meta["policy"] = {"level": "values", "only": [], "keep_batch": -1, "budget_bytes": 0,
                          "expected_bytes": 0}
        text = json.dumps(meta, ensure_ascii=False).encode("utf-8")
        start = _align(fmt.HEADER_SIZE + len(text))
        head = bytearray(fmt.HEADER_SIZE)
        head[0:len(fmt.MAGIC)] = fmt.MAGIC
        _put(head, [(fmt.H_VERSION, "I", FORMAT_VERSION), (fmt.H_HEADER_SIZE, "I", fmt.HEADER_SIZE),
                    (fmt.H_META_OFFSET, "Q", fmt.HEADER_SIZE), (fmt.H_META_SIZE, "Q", len(text)),
                    (fmt.H_RECORDS_OFFSET, "Q", start), (fmt.H_META_CRC, "I", _crc(text))])
        _put(head, [(fmt.H_CRC, "I", _crc(bytes(head[0:fmt.H_CRC])))])
        offsets = [start + o for o in self.offsets]
        index = bytearray(fmt.INDEX_HEAD)
        index[0:len(fmt.INDEX_MAGIC)] = fmt.INDEX_MAGIC
        _put(index, [(fmt.INDEX_HEAD - 8, "Q", len(offsets))])
        index += struct.pack(f"<{len(offsets)}Q", *offsets)
        for c in self.copies:
            index += c
        index_offset = start + self.pos
        trailer = bytearray(fmt.TRAILER_SIZE)
        trailer[0:len(fmt.TRAILER_MAGIC)] = fmt.TRAILER_MAGIC
        _put(trailer, [(fmt.T_INDEX_OFFSET, "Q", index_offset), (fmt.T_INDEX_SIZE, "Q", len(index)),
                       (fmt.T_STEP_COUNT, "Q", len(offsets)), (fmt.T_INDEX_CRC, "I", _crc(bytes(index)))])
        _put(trailer, [(fmt.T_CRC, "I", _crc(bytes(trailer[0:fmt.T_CRC])))])
        with open(self.tmp, "wb") as out, open(self.records_tmp, "rb") as records:
            out.write(head)
            out.write(text)
            out.write(b"\0" * (start - fmt.HEADER_SIZE - len(text)))
            shutil.copyfileobj(records, out, 1 << 22)
            out.write(index)
            out.write(b"\0" * (_align(len(index)) - len(index)))
            out.write(trailer)
        os.remove(self.records_tmp)
        os.replace(self.tmp, self.path)

    def abort(self):
        self.f.close()
        for p in (self.records_tmp, self.tmp):
            with contextlib.suppress(OSError):
                os.remove(p)


def _statistics(a):
    """min, max, mean, std (population), mean |x| over the finite values; finite, nan, inf, zeros."""
    x = a.astype(np.float64).ravel()
    finite = np.isfinite(x)
    f = x[finite]
    n_nan = int(np.isnan(x).sum())
    n_inf = int(np.isinf(x).sum())
    zeros = int((x == 0).sum())
    if f.size == 0:
        return 0.0, 0.0, 0.0, 0.0, 0.0, 0, n_nan, n_inf, zeros
    return (float(f.min()), float(f.max()), float(f.mean()), float(f.std()), float(np.abs(f).mean()),
            int(f.size), n_nan, n_inf, zeros)


# ---- recording --------------------------------------------------------------------------------

_active = []  # the recorders open now, innermost last


class Recorder:
    """Records steps of one forward (or several) into a TraceFile."""

    def __init__(self, model, path, source_tokens=(), target_tokens=(), config=None, check_atol=1e-5):
        self.model = model
        self.file = TraceFile(path)
        config = dict(config or {}, qkv_layout="per-head", model=type(model).__name__)
        self.metadata = {
            "config": config, "source_tokens": list(source_tokens), "target_tokens": list(target_tokens),
            "command_line": "python: " + " ".join([os.path.basename(sys.argv[0] or "python")] + sys.argv[1:]),
            "writer": "python/tscope_trace.py", "torch_version": torch.__version__}
        self.recomputed = []
        self.check_atol = check_atol
        self.paths = {m: n for n, m in model.named_modules()}
        self.stack = []  # module paths whose forward is running
        self.handles, self.patched = [], []
        self.inside_known = 0
        # GPT-2-named models (nanoGPT, minGPT, Hugging Face's) and the Annotated Transformer get tscope's names
        self.renames = _family_names(self.paths.values())
        self.gpt_names = self.renames is _GPT_NAMES or self.renames is _MINGPT_OLD_NAMES
        self.settings = {}      # what shapes cannot tell, as far as seen (metadata "settings")
        self.masks = set()      # the masks in force
        self.seq_first = []     # the seq-first modules recorded transposed
        self.attn_state = {}    # per attention module call: ids of its scores, scaled, weights

    # -- naming
    def name(self, path, leaf):
        return f"{path}.{leaf}" if path else leaf

    def tscope_path(self, path):
        """A module path under tscope's name (the families tscope knows), else as it is."""
        return _renamed(path, self.renames) if self.renames else path

    def metadata_out(self):
        settings = dict(self.settings)
        if self.masks or settings:
            settings["masks"] = ", ".join(m for m in MASK_ORDER if m in self.masks) or "no mask"
        meta = dict(self.metadata, recomputed=self.recomputed)
        if settings:
            meta["settings"] = settings
        if self.seq_first:
            meta["seq_first"] = {"modules": self.seq_first,
                                 "note": "seq-first (S, B, D) tensors recorded transposed to tscope's (B, S, D)"}
        return meta

    def emit(self, name, op, tag, tensor, recomputed=False):
        self.file.step(name, op, tag, tensor.detach().float().cpu().numpy())
        if recomputed:
            self.recomputed.append(name)

    # -- hooks
    def install(self):
        for module, path in self.paths.items():
            # a subclass that replaces forward is recorded through the modules it calls
            if _standard(module, nn.Transformer):
                self._patch(module, self._transformer)
            elif _standard(module, nn.TransformerEncoder):
                self._patch(module, self._encoder)
            elif _standard(module, nn.TransformerDecoder):
                self._patch(module, self._decoder)
            elif _standard(module, nn.TransformerEncoderLayer) or _standard(module, nn.TransformerDecoderLayer):
                self._patch(module, self._layer)
            self.handles.append(module.register_forward_pre_hook(self._enter))
            self.handles.append(module.register_forward_hook(self._leave))

    def remove(self):
        for h in self.handles:
            h.remove()
        for module, original in self.patched:
            if original is None:
                del module.forward
            else:
                module.forward = original

    def _patch(self, module, recorder_fn):
        original = module.__dict__.get("forward")
        bound = module.forward

        def forward(*args, **kwargs):
            if self.inside_known:  # called by a module whose steps the bridge records itself
                return bound(*args, **kwargs)
            return recorder_fn(module, bound, *args, **kwargs)
        module.forward = forward
        self.patched.append((module, original))

    def _enter(self, module, args):
        path = self.paths.get(module, "")
        self.stack.append(path)
        self.attn_state[path] = {}
        if path == "" and self.gpt_names and not self.inside_known and args and torch.is_tensor(args[0]):
            self.emit("input", "input", "plain", args[0])  # the token ids, as tscope's first step
            self.settings.update(batch=int(args[0].shape[0]), seq=int(args[0].shape[-1]))

    def _leave(self, module, args, output):
        path = self.stack.pop() if self.stack else ""
        if self.inside_known or isinstance(output, tuple) or not torch.is_tensor(output):
            return
        if list(module.children()):
            # only leaves, but a block's output is its layer's output in tscope, a stack's its stack's
            name = self.tscope_path(path)
            if self.renames and re.fullmatch(r"(encoder|decoder)\.layers\.\d+", name):
                self.emit(name + ".out", "add", "plain", output)
            elif self.renames is _ANNOTATED_NAMES and name in ("encoder.out", "decoder.out"):
                self.emit(name, "layernorm", "norm_out", output)
            elif self.renames is _ANNOTATED_NAMES and name in ("embed.tokens", "decoder.embed.tokens"):
                self.emit(name, "embedding", "plain", output)
            return
        op = _op_of(module)
        if self.renames and op in ("gelu", "relu"):
            # what the module computes, not what its class is called (minGPT's NewGELU is the tanh form)
            self.settings["activation"] = _probe_activation(module) or op
        if op == "layernorm" and self.renames:
            self.settings["norm"] = "pre"  # GPT-2's blocks and the Annotated Transformer's sublayers normalise first
            formula, eps = _probe_layernorm(module)
            if formula:
                self.settings.update(norm_formula=formula, eps=eps)
                if args and torch.is_tensor(args[0]):
                    self._norm_steps(self.tscope_path(path), module, args[0], formula, eps)
        self.emit(self.tscope_path(path) or "output", op, "norm_out" if op == "layernorm" else "plain", output)

    def _norm_steps(self, name, module, x, formula, eps):
        """A LayerNorm's inner steps, as tscope traces them: in, mean, std (what divides), y, gamma, beta."""
        if not name.endswith(".out"):
            return
        base = name[: -len(".out")]
        with torch.no_grad():
            mean = x.mean(-1, keepdim=True)
            if formula == "std+eps":
                std = x.std(-1, keepdim=True) + eps
            else:
                std = torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps)
            y = (x - mean) / std
        gamma, beta = _norm_params(module)
        self.emit(base + ".in", "add", "norm_in", x)
        self.emit(base + ".mean", "mean", "norm_stat", mean)
        self.emit(base + ".std", "std", "norm_stat", std)
        self.emit(base + ".y", "layernorm", "plain", y)
        if gamma is not None:
            self.emit(base + ".gamma", "parameter", "param", gamma)
        if beta is not None:
            self.emit(base + ".beta", "parameter", "param", beta)

    # -- the tensor ops of a module with its own attention code
    def on_op(self, name, args, out):
        """Called for every torch function while recording: the attention steps of a module
        that computes attention itself are recorded under tscope's names."""
        if name == "relu" and self.renames is _ANNOTATED_NAMES and self.stack and not self.inside_known:
            self.settings["activation"] = "relu"  # written as x.relu() in its feed-forward
            return
        if self.inside_known or not self.stack or not torch.is_tensor(out) or out.dim() != 4:
            return
        path = self.stack[-1]
        st = self.attn_state.setdefault(path, {})
        first = args[0] if args and torch.is_tensor(args[0]) else None
        p = self.tscope_path(path)
        emitted = st.setdefault("emitted", set())

        def emit(leaf, op, tag, t):
            emitted.add(leaf)  # a tscope_trace.step of the same leaf in this call is then not repeated
            self.emit(self.name(p, leaf), op, tag, t)
        if name == "softmax":
            st["weights"] = id(out)
            emit("weights", "softmax", "attn_weights", torch.nan_to_num(out, nan=0.0))
            self.settings["heads"] = int(out.shape[1])
            self.settings.setdefault("batch", int(out.shape[0]))
            self.settings.setdefault("seq", int(out.shape[2]))
        elif name in ("matmul", "__matmul__", "bmm"):
            if first is not None and id(first) == st.get("weights"):
                emit("values", "matmul", "heads", out)
            elif "scores" not in st:
                st["scores"] = id(out)
                emit("scores", "matmul", "attn_scores", out)
        elif name in ("mul", "__mul__", "div", "__truediv__") and first is not None and id(first) == st.get("scores"):
            st["scaled"] = id(out)
            emit("scaled", "scale", "attn_scores", out)
        elif name == "masked_fill" and first is not None and id(first) in (st.get("scores"), st.get("scaled")):
            st["masked"] = id(out)
            emit("masked", "mask", "attn_scores", out)
            mask = args[1] if len(args) > 1 else None
            if len(args) > 2 and isinstance(args[2], (int, float)):
                self.settings["mask_fill"] = _fill_text(args[2])  # what the code writes: -inf, -1e9, ...
            if torch.is_tensor(mask) and _hides_nothing(mask):
                return  # an all-ones keep mask (masked where == 0) hides nothing: as no mask
            kind = _mask_kind(mask, out.shape)
            if p.startswith("decoder.") and kind == "causal" and self.renames is _ANNOTATED_NAMES:
                kind = "tgt causal"  # an encoder-decoder's causal mask is its target's, as tscope says
            self.masks.add(kind)

    # -- the modules tscope knows
    def _transformer(self, module, forward, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                     src_key_padding_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None):
        bf = self._batch_first(module.encoder.layers[0], self.paths.get(module) or "transformer")
        real_src, real_tgt = src, tgt
        if not bf:
            src, tgt = src.transpose(0, 1), tgt.transpose(0, 1)
        self._layer_settings(module.encoder.layers[0], src)
        self.settings["tgt_seq"] = int(tgt.shape[1])
        self._mask_settings(tgt_mask, "tgt causal", tgt_key_padding_mask, "tgt padding")
        self._mask_settings(src_mask, "src mask", src_key_padding_mask, "src padding")
        self._mask_settings(memory_mask, "memory mask", memory_key_padding_mask, "memory padding")
        self.inside_known += 1
        try:
            self.emit("input", "input", "plain", src)
            self.emit("decoder.input", "input", "plain", tgt)
            memory = self._run_stack("encoder", module.encoder.layers, module.encoder.norm, src,
                                     dict(src_mask=src_mask, src_key_padding_mask=src_key_padding_mask))
            out = self._run_stack("decoder", module.decoder.layers, module.decoder.norm, tgt,
                                  dict(tgt_mask=tgt_mask, memory_mask=memory_mask,
                                       tgt_key_padding_mask=tgt_key_padding_mask,
                                       memory_key_padding_mask=memory_key_padding_mask), memory=memory)
        finally:
            self.inside_known -= 1
        real = self._quietly(forward, real_src, real_tgt, src_mask=src_mask, tgt_mask=tgt_mask,
                             memory_mask=memory_mask, src_key_padding_mask=src_key_padding_mask,
                             tgt_key_padding_mask=tgt_key_padding_mask, memory_key_padding_mask=memory_key_padding_mask)
        self._check("the transformer's output", out, real if bf else real.transpose(0, 1))
        return real

    def _encoder(self, module, forward, src, mask=None, src_key_padding_mask=None, **kw):
        prefix = self.paths.get(module) or "encoder"
        real_src = src
        bf = self._batch_first(module.layers[0], prefix)
        if not bf:
            src = src.transpose(0, 1)
        self._layer_settings(module.layers[0], src)
        self._mask_settings(mask, "causal", src_key_padding_mask, "src padding")
        self.inside_known += 1
        try:
            self.emit(self.name(prefix, "input") if prefix != "encoder" else "input", "input", "plain", src)
            out = self._run_stack(prefix, module.layers, module.norm, src,
                                  dict(src_mask=mask, src_key_padding_mask=src_key_padding_mask))
        finally:
            self.inside_known -= 1
        real = self._quietly(forward, real_src, mask=mask, src_key_padding_mask=src_key_padding_mask, **kw)
        self._check(f"{prefix}'s output", out, real if bf else real.transpose(0, 1))
        return real

    def _decoder(self, module, forward, tgt, memory, tgt_mask=None, memory_mask=None,
                 tgt_key_padding_mask=None, memory_key_padding_mask=None, **kw):
        prefix = self.paths.get(module) or "decoder"
        real_tgt, real_memory = tgt, memory
        bf = self._batch_first(module.layers[0], prefix)
        if not bf:
            tgt, memory = tgt.transpose(0, 1), memory.transpose(0, 1)
        self._mask_settings(tgt_mask, "tgt causal", tgt_key_padding_mask, "tgt padding")
        self._mask_settings(memory_mask, "memory mask", memory_key_padding_mask, "memory padding")
        self.inside_known += 1
        try:
            self.emit(self.name(prefix, "input"), "input", "plain", tgt)
            out = self._run_stack(prefix, module.layers, module.norm, tgt,
                                  dict(tgt_mask=tgt_mask, memory_mask=memory_mask,
                                       tgt_key_padding_mask=tgt_key_padding_mask,
                                       memory_key_padding_mask=memory_key_padding_mask), memory=memory)
        finally:
            self.inside_known -= 1
        real = self._quietly(forward, real_tgt, real_memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                             tgt_key_padding_mask=tgt_key_padding_mask,
                             memory_key_padding_mask=memory_key_padding_mask, **kw)
        self._check(f"{prefix}'s output", out, real if bf else real.transpose(0, 1))
        return real

    def _layer(self, module, forward, *args, **kwargs):
        """A layer called on its own (not from a stack the bridge runs)."""
        real = self._quietly(forward, *args, **kwargs)
        path = self.paths.get(module, "layer")
        bf = self._batch_first(module, path)
        t = (lambda a: a) if bf else (lambda a: a.transpose(0, 1))
        self.inside_known += 1
        try:
            x = t(args[0])
            if isinstance(module, nn.TransformerEncoderLayer):
                out = self._encoder_layer(path, module, x, kwargs.get("src_mask"), kwargs.get("src_key_padding_mask"))
            else:
                memory = t(args[1] if len(args) > 1 else kwargs["memory"])
                out = self._decoder_layer(path, module, x, memory, kwargs)
        finally:
            self.inside_known -= 1
        self._check(f"{path}'s output", out, t(real))
        return real

    def _batch_first(self, layer, path):
        """Whether a layer takes (B, S, D); a seq-first one is recorded transposed, and noted."""
        bf = getattr(layer, "batch_first", None)
        if bf is None:
            bf = getattr(getattr(layer, "self_attn", None), "batch_first", True)
        if not bf and path not in self.seq_first:
            self.seq_first.append(path)
        return bool(bf)

    def _layer_settings(self, layer, x):
        """heads, norm, activation of a standard layer, and the batch-first input's sizes."""
        self.settings.update(heads=int(layer.self_attn.num_heads), norm="pre" if layer.norm_first else "post",
                             activation="gelu" if _activation(layer) is F.gelu else "relu",
                             eps=float(layer.norm1.eps), norm_formula="standard",
                             batch=int(x.shape[0]), seq=int(x.shape[1]))

    def _mask_settings(self, attn_mask, causal_word, key_padding_mask, padding_word):
        if attn_mask is not None or key_padding_mask is not None:
            self.settings["mask_fill"] = "-inf"  # PyTorch's attention (and the bridge's _additive_mask) hides so
        if attn_mask is not None and not _hides_nothing(attn_mask):
            n = attn_mask.shape[-1]
            self.masks.add(causal_word if _is_causal(attn_mask, attn_mask.shape[-2], n) else
                           causal_word.replace("causal", "mask"))
        if key_padding_mask is not None and not _hides_nothing(key_padding_mask):
            self.masks.add(padding_word)

    def _quietly(self, forward, *args, **kwargs):
        """The module's real forward, its leaves unrecorded (the bridge recorded its steps)."""
        self.inside_known += 1
        try:
            return forward(*args, **kwargs)
        finally:
            self.inside_known -= 1

    def _run_stack(self, prefix, layers, norm, x, masks, memory=None):
        for i, layer in enumerate(layers):
            path = f"{prefix}.layers.{i}"
            if memory is None:
                x = self._encoder_layer(path, layer, x, masks.get("src_mask"), masks.get("src_key_padding_mask"))
            else:
                x = self._decoder_layer(path, layer, x, memory, masks)
        if norm is not None:
            x = self._norm(f"{prefix}.norm", norm, x, "input")
        self.emit(f"{prefix}.out", "layernorm" if norm is not None else "add", "plain", x, recomputed=True)
        return x

    def _check(self, what, mine, real):
        if not torch.allclose(mine, real, atol=self.check_atol, rtol=1e-4):
            diff = (mine - real).abs().max().item()
            raise RuntimeError(f"tscope_trace: recomputing {what} differs from PyTorch's by {diff:.3g} "
                               "(the module is not the standard one the bridge assumes)")

    # -- the steps of a layer, as tscope's model takes them
    def _encoder_layer(self, p, layer, x, attn_mask, key_padding_mask):
        act = _activation(layer)
        if layer.norm_first:
            h = self._norm(f"{p}.norm1", layer.norm1, x, "input")
            a = self._attention(f"{p}.self_attn", layer.self_attn, h, h, attn_mask, key_padding_mask, fused="qkv")
            x = x + a
            h = self._norm(f"{p}.norm2", layer.norm2, x, "add")
            f = self._ffn(f"{p}.ffn", layer, h, act)
            x = x + f
            self.emit(f"{p}.out", "add", "plain", x, recomputed=True)
            return x
        a = self._attention(f"{p}.self_attn", layer.self_attn, x, x, attn_mask, key_padding_mask, fused="qkv")
        x = self._norm(f"{p}.norm1", layer.norm1, x + a, "add")
        f = self._ffn(f"{p}.ffn", layer, x, act)
        x = self._norm(f"{p}.norm2", layer.norm2, x + f, "add")
        self.emit(f"{p}.out", "layernorm", "plain", x, recomputed=True)
        return x

    def _decoder_layer(self, p, layer, x, memory, masks):
        act = _activation(layer)
        tm, tk = masks.get("tgt_mask"), masks.get("tgt_key_padding_mask")
        mm, mk = masks.get("memory_mask"), masks.get("memory_key_padding_mask")
        if layer.norm_first:
            h = self._norm(f"{p}.norm1", layer.norm1, x, "input")
            x = x + self._attention(f"{p}.self_attn", layer.self_attn, h, h, tm, tk, fused="qkv")
            h = self._norm(f"{p}.norm2", layer.norm2, x, "add")
            x = x + self._attention(f"{p}.cross_attn", layer.multihead_attn, h, memory, mm, mk, fused="kv")
            h = self._norm(f"{p}.norm3", layer.norm3, x, "add")
            x = x + self._ffn(f"{p}.ffn", layer, h, act)
            self.emit(f"{p}.out", "add", "plain", x, recomputed=True)
            return x
        x = self._norm(f"{p}.norm1", layer.norm1,
                       x + self._attention(f"{p}.self_attn", layer.self_attn, x, x, tm, tk, fused="qkv"), "add")
        x = self._norm(f"{p}.norm2", layer.norm2,
                       x + self._attention(f"{p}.cross_attn", layer.multihead_attn, x, memory, mm, mk, fused="kv"),
                       "add")
        x = self._norm(f"{p}.norm3", layer.norm3, x + self._ffn(f"{p}.ffn", layer, x, act), "add")
        self.emit(f"{p}.out", "layernorm", "plain", x, recomputed=True)
        return x

    def _norm(self, p, norm, x, in_op):
        e = lambda leaf, op, tag, t: self.emit(f"{p}.{leaf}", op, tag, t, recomputed=True)
        e("in", in_op, "norm_in", x)
        mean = x.mean(dim=-1, keepdim=True)
        std = torch.sqrt(((x - mean) ** 2).mean(dim=-1, keepdim=True) + norm.eps)
        y = (x - mean) / std
        e("mean", "mean", "norm_stat", mean)
        e("std", "std", "norm_stat", std)
        e("y", "layernorm", "plain", y)
        e("gamma", "parameter", "param", norm.weight)
        e("beta", "parameter", "param", norm.bias)
        out = norm(x)  # PyTorch's own kernel: what the model really passes on
        e("out", "layernorm", "norm_out", out)
        return out

    def _ffn(self, p, layer, x, act):
        e = lambda leaf, op, tag, t: self.emit(f"{p}.{leaf}", op, tag, t, recomputed=True)
        hidden = layer.linear1(x)
        e("hidden", "linear", "plain", hidden)
        a = act(hidden)
        e("act", "gelu" if act is F.gelu else "relu", "plain", a)
        d = layer.dropout(a)
        e("dropout", "dropout", "plain", d)
        out = layer.dropout2(layer.linear2(d)) if hasattr(layer, "dropout2") else layer.linear2(d)
        e("out", "linear", "plain", out)
        return out

    def _attention(self, p, mha, xq, xkv, attn_mask, key_padding_mask, fused):
        """nn.MultiheadAttention step by step on batch-first xq, xkv (the callers transpose a
        seq-first module's tensors); returns its output (as the layer adds it)."""
        e = lambda leaf, op, tag, t: self.emit(f"{p}.{leaf}", op, tag, t, recomputed=True)
        B, Sq, D = xq.shape
        Sk = xkv.shape[1]
        H = mha.num_heads
        hd = D // H
        w, b = mha.in_proj_weight, mha.in_proj_bias
        bias = (lambda lo, hi: b[lo:hi]) if b is not None else (lambda lo, hi: None)
        if fused == "qkv":
            qkv = F.linear(xq, w, b)                                       # (B, S, 3D): q | k | v
            qkv = qkv.view(B, Sq, 3, H, hd).transpose(2, 3).reshape(B, Sq, 3 * D)  # per head: q_h k_h v_h
            e("qkv", "linear", "plain", qkv)
            heads = qkv.view(B, Sq, H, 3 * hd)
            e("qkv_heads", "reshape", "plain", heads)
            perm = heads.permute(0, 2, 1, 3)
            e("qkv_perm", "permute", "heads", perm)
            q, k, v = perm.chunk(3, dim=-1)
        else:
            qp = F.linear(xq, w[:D], bias(0, D))
            e("q_proj", "linear", "plain", qp)
            qh = qp.view(B, Sq, H, hd)
            e("q_heads", "reshape", "plain", qh)
            q = qh.permute(0, 2, 1, 3)
            kv = F.linear(xkv, w[D:], bias(D, 3 * D))                      # (B, S, 2D): k | v
            kv = kv.view(B, Sk, 2, H, hd).transpose(2, 3).reshape(B, Sk, 2 * D)
            e("kv", "linear", "plain", kv)
            kvh = kv.view(B, Sk, H, 2 * hd)
            e("kv_heads", "reshape", "plain", kvh)
            kvp = kvh.permute(0, 2, 1, 3)
            e("kv_perm", "permute", "heads", kvp)
            k, v = kvp.chunk(2, dim=-1)
        e("q", "chunk" if fused == "qkv" else "permute", "heads", q)
        e("k", "chunk", "heads", k)
        e("v", "chunk", "heads", v)
        scores = q @ k.transpose(-1, -2)
        e("scores", "matmul", "attn_scores", scores)
        scaled = scores / math.sqrt(hd)
        e("scaled", "scale", "attn_scores", scaled)
        mask = _additive_mask(attn_mask, key_padding_mask, B, H, Sq, Sk, scaled.dtype)
        if mask is not None:
            scaled = scaled + mask
            e("masked", "mask", "attn_scores", scaled)
        weights = torch.softmax(scaled, dim=-1)
        weights = torch.nan_to_num(weights, nan=0.0)  # a row with nothing to attend to: all 0, as tscope
        e("weights", "softmax", "attn_weights", weights)
        values = weights @ v
        e("values", "matmul", "heads", values)
        vp = values.permute(0, 2, 1, 3)
        e("values_perm", "permute", "plain", vp)
        concat = vp.reshape(B, Sq, D)
        e("concat", "reshape", "plain", concat)
        out = mha.out_proj(concat)
        e("out", "linear", "plain", out)
        return out


def _fill_text(value):
    """A masked_fill's value in tscope run's words (ts_model_mask_fill_text): "-inf", "-1e9", as a float32."""
    v = struct.unpack("<f", struct.pack("<f", float(value)))[0]
    if math.isinf(v):
        return "-inf" if v < 0 else "inf"
    return re.sub(r"e\+?(-?)0*(\d)", r"e\1\2", "%g" % v)


def _additive_mask(attn_mask, key_padding_mask, B, H, Sq, Sk, dtype):
    """PyTorch's two masks as one additive (B, H, Sq, Sk) mask of 0 and -inf, or None."""
    if attn_mask is None and key_padding_mask is None:
        return None
    m = torch.zeros(B, H, Sq, Sk, dtype=dtype)
    if attn_mask is not None:
        am = attn_mask
        if am.dtype == torch.bool:
            am = torch.zeros(am.shape, dtype=dtype).masked_fill(am, float("-inf"))
        m = m + (am.view(1, 1, Sq, Sk) if am.dim() == 2 else am.view(B, H, Sq, Sk))
    if key_padding_mask is not None:
        kp = key_padding_mask
        if kp.dtype != torch.bool:
            kp = kp != 0
        m = m.masked_fill(kp.view(B, 1, 1, Sk), float("-inf"))
    return m


# the masks in force, in tscope run's words and order (trace_cli_settings)
MASK_ORDER = ["causal", "tgt causal", "mask", "src mask", "tgt mask", "src padding", "tgt padding", "memory mask",
              "memory padding"]

# GPT-2's module names (nanoGPT's GPT, Hugging Face's GPT2LMHeadModel) as tscope names its steps
_GPT_NAMES = [
    (r"(transformer\.)?wte", "embed.tokens"),
    (r"(transformer\.)?wpe", "embed.pe"),
    (r"(transformer\.)?drop", "embed.out"),  # dropout of wte + wpe: the sum (identity at inference)
    (r"(transformer\.)?h\.(\d+)", r"decoder.layers.\2"),
    (r"(transformer\.)?h\.(\d+)\.ln_1", r"decoder.layers.\2.norm1.out"),
    (r"(transformer\.)?h\.(\d+)\.ln_2", r"decoder.layers.\2.norm2.out"),
    (r"(transformer\.)?h\.(\d+)\.attn", r"decoder.layers.\2.self_attn"),
    (r"(transformer\.)?h\.(\d+)\.attn\.c_attn", r"decoder.layers.\2.self_attn.c_attn"),
    (r"(transformer\.)?h\.(\d+)\.attn\.c_proj", r"decoder.layers.\2.self_attn.out"),
    (r"(transformer\.)?h\.(\d+)\.attn\.(\w+)", r"decoder.layers.\2.self_attn.\3"),
    (r"(transformer\.)?h\.(\d+)\.mlp\.c_fc", r"decoder.layers.\2.ffn.hidden"),
    (r"(transformer\.)?h\.(\d+)\.mlp\.(gelu|act)", r"decoder.layers.\2.ffn.act"),
    (r"(transformer\.)?h\.(\d+)\.mlp\.c_proj", r"decoder.layers.\2.ffn.out"),
    (r"(transformer\.)?h\.(\d+)\.mlp\.dropout", r"decoder.layers.\2.ffn.resid_dropout"),  # after c_proj
    (r"(transformer\.)?ln_f", "decoder.norm.out"),
    (r"lm_head", "logits"),
]


def _strip(path):
    """A module path without torch.compile's wrapper prefix."""
    return path[len("_orig_mod."):] if path.startswith("_orig_mod.") else path


# minGPT's older model.py: tok_emb, pos_emb (a parameter), blocks of ln1, attn (key, query, value,
# proj), ln2, mlp (Sequential: 0 Linear, 1 GELU, 2 Linear, 3 Dropout); ln_f, head
_MINGPT_OLD_NAMES = [
    (r"tok_emb", "embed.tokens"),
    (r"drop", "embed.out"),  # dropout of tok_emb + pos_emb: the sum (identity at inference)
    (r"blocks\.(\d+)", r"decoder.layers.\1"),
    (r"blocks\.(\d+)\.ln1", r"decoder.layers.\1.norm1.out"),
    (r"blocks\.(\d+)\.ln2", r"decoder.layers.\1.norm2.out"),
    (r"blocks\.(\d+)\.attn", r"decoder.layers.\1.self_attn"),
    (r"blocks\.(\d+)\.attn\.(key|query|value)", r"decoder.layers.\1.self_attn.\2"),
    (r"blocks\.(\d+)\.attn\.proj", r"decoder.layers.\1.self_attn.out"),
    (r"blocks\.(\d+)\.attn\.(\w+)", r"decoder.layers.\1.self_attn.\2"),
    (r"blocks\.(\d+)\.mlp\.0", r"decoder.layers.\1.ffn.hidden"),
    (r"blocks\.(\d+)\.mlp\.1", r"decoder.layers.\1.ffn.act"),
    (r"blocks\.(\d+)\.mlp\.2", r"decoder.layers.\1.ffn.out"),
    (r"blocks\.(\d+)\.mlp\.3", r"decoder.layers.\1.ffn.resid_dropout"),
    (r"ln_f", "decoder.norm.out"),
    (r"head", "logits"),
]

# the Annotated Transformer's make_model: src_embed/tgt_embed (Embeddings' lut, PositionalEncoding's
# dropout of the sum), layers of sublayer.K.norm, self_attn/src_attn.linears.0..3, feed_forward.w_1/w_2
_ANNOTATED_NAMES = [
    (r"src_embed\.0", "embed.tokens"),  # Embeddings: lut(x) * sqrt(d_model), as tscope's embed.tokens
    (r"tgt_embed\.0", "decoder.embed.tokens"),
    (r"src_embed\.0\.lut", "embed.lookup"),
    (r"tgt_embed\.0\.lut", "decoder.embed.lookup"),
    (r"src_embed\.1\.dropout", "embed.out"),
    (r"tgt_embed\.1\.dropout", "decoder.embed.out"),
    (r"(encoder|decoder)", r"\1.out"),
    (r"(encoder|decoder)\.norm", r"\1.norm.out"),
    (r"(encoder|decoder)\.layers\.(\d+)\.sublayer\.0\.norm", r"\1.layers.\2.norm1.out"),
    (r"(encoder|decoder)\.layers\.(\d+)\.sublayer\.1\.norm", r"\1.layers.\2.norm2.out"),
    (r"decoder\.layers\.(\d+)\.sublayer\.2\.norm", r"decoder.layers.\1.norm3.out"),
    (r"(encoder|decoder)\.layers\.(\d+)\.sublayer\.(\d)\.dropout", r"\1.layers.\2.residual\3_dropout"),
    (r"(encoder|decoder)\.layers\.(\d+)\.self_attn\.linears\.([0-2])", r"\1.layers.\2.self_attn.proj\3"),
    (r"(encoder|decoder)\.layers\.(\d+)\.self_attn\.linears\.3", r"\1.layers.\2.self_attn.out"),
    (r"decoder\.layers\.(\d+)\.src_attn\.linears\.([0-2])", r"decoder.layers.\1.cross_attn.proj\2"),
    (r"decoder\.layers\.(\d+)\.src_attn\.linears\.3", r"decoder.layers.\1.cross_attn.out"),
    (r"decoder\.layers\.(\d+)\.src_attn\.dropout", r"decoder.layers.\1.cross_attn.attn_dropout"),
    (r"decoder\.layers\.(\d+)\.src_attn", r"decoder.layers.\1.cross_attn"),
    (r"(encoder|decoder)\.layers\.(\d+)\.self_attn\.dropout", r"\1.layers.\2.self_attn.attn_dropout"),
    (r"(encoder|decoder)\.layers\.(\d+)\.feed_forward\.w_1", r"\1.layers.\2.ffn.hidden"),
    (r"(encoder|decoder)\.layers\.(\d+)\.feed_forward\.dropout", r"\1.layers.\2.ffn.act"),  # relu's, at inference
    (r"(encoder|decoder)\.layers\.(\d+)\.feed_forward\.w_2", r"\1.layers.\2.ffn.out"),
    (r"generator\.proj", "logits"),
]


def _family_names(paths):
    """The renaming table of the model family whose module paths these are, or None."""
    paths = [_strip(p) for p in paths]
    if any(p.startswith(("transformer.h.0", "h.0")) for p in paths):
        return _GPT_NAMES
    if "tok_emb" in paths and "blocks.0.attn.key" in paths:
        return _MINGPT_OLD_NAMES
    if "src_embed.0.lut" in paths and "encoder.layers.0.sublayer.0.norm" in paths:
        return _ANNOTATED_NAMES
    return None


def _renamed(path, table):
    path = _strip(path)
    for pattern, name in table:
        if re.fullmatch(pattern, path):
            return re.sub(pattern, name, path)
    return path


def _probe_activation(module):
    """Which activation a module computes, from its values on a probe: "gelu" (the exact, erf
    form), "gelu-tanh" (the tanh approximation) or "relu"; None when none of them. Its forward
    is called directly, so no hook records the probe."""
    x = torch.linspace(-4.0, 4.0, 41)
    try:
        with torch.no_grad():
            y = module.forward(x).double()
    except Exception:  # noqa: BLE001 - a module that takes no plain tensor is not an activation
        return None
    x = x.double()
    forms = {"gelu": 0.5 * x * (1 + torch.erf(x / math.sqrt(2.0))),
             "gelu-tanh": 0.5 * x * (1 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3))),
             "relu": torch.clamp(x, min=0)}
    best = min(forms, key=lambda w: float((y - forms[w]).abs().max()))
    return best if float((y - forms[best]).abs().max()) < 1e-5 else None


def _norm_params(module):
    """A norm module's gain and shift (nn.LayerNorm's weight/bias, the Annotated Transformer's a_2/b_2)."""
    def one_d(names):
        for n in names:
            t = getattr(module, n, None)
            if torch.is_tensor(t) and t.dim() == 1:
                return t
        return None
    return one_d(("weight", "a_2", "gamma", "scale")), one_d(("bias", "b_2", "beta"))


def _probe_layernorm(module):
    """Which LayerNorm formula a module computes, and its eps, from its values on a probe:
    ("standard", eps) for (x - mean) / sqrt(var + eps), ("std+eps", eps) for the Annotated
    Transformer's (x - mean) / (unbiased std + eps); (None, None) when neither fits. Rows of
    variances from 1 down to 1e-12 make every eps and both formulas tell apart."""
    gamma, beta = _norm_params(module)
    if gamma is None:
        return None, None
    D = gamma.shape[0]
    g = torch.Generator().manual_seed(7)
    z = torch.randn(1, D, generator=g, dtype=torch.float64)
    z = (z - z.mean()) / z.std(unbiased=False)
    scales = torch.tensor([1.0, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 1e-5, 1e-6], dtype=torch.float64).view(-1, 1)
    x = scales * z  # mean 0: float32 keeps the small rows' deviations exact
    try:
        with torch.no_grad():
            y = module.forward(x.to(gamma.dtype)).double()
    except Exception:  # noqa: BLE001 - not a norm over the last dim
        return None, None
    xd = x.to(gamma.dtype).double()
    gd, bd = gamma.detach().double(), (beta.detach().double() if beta is not None else 0.0)
    mean = xd.mean(-1, keepdim=True)
    eps_attr = getattr(module, "eps", None) or getattr(module, "variance_epsilon", None)
    candidates = ([float(eps_attr)] if isinstance(eps_attr, (int, float)) else []) + \
        [1e-5, 1e-6, 1e-12, 1e-8, 1e-7, 1e-9, 1e-10, 1e-4, 1e-3]
    best, best_err = (None, None), float("inf")
    for formula in ("standard", "std+eps"):
        for eps in candidates:
            if formula == "standard":
                div = torch.sqrt(xd.var(-1, unbiased=False, keepdim=True) + eps)
            else:
                div = xd.std(-1, keepdim=True) + eps
            want = gd * (xd - mean) / div + bd
            err = float(((y - want).abs() / (want.abs() + 1e-3)).max())
            if err < best_err:
                best, best_err = (formula, eps), err
    return best if best_err < 1e-2 else (None, None)  # float32's rounding; a wrong eps or formula is off by far more


def _standard(module, cls):
    """module is a cls whose forward is cls's own (a subclass may replace it)."""
    return isinstance(module, cls) and type(module).forward is cls.forward


def _hides_nothing(mask):
    """A mask that hides no key (all False, or all 0 added): as good as none."""
    m = mask.detach()
    return not bool(m.any()) if m.dtype == torch.bool else bool((m == 0).all())


def _mask_kind(mask, shape):
    """A masked_fill's mask over (B, H, Sq, Sk) scores in tscope run's words: "causal" (the
    keys after each query), "src padding" (keys per batch element, the same for every query),
    or "mask"."""
    if not torch.is_tensor(mask):
        return "mask"
    if _is_causal(mask, shape[-2], shape[-1]):
        return "causal"
    m = mask
    while m.dim() < 4:
        m = m.unsqueeze(0)
    if m.dim() == 4 and m.shape[1] == 1 and m.shape[2] == 1 and m.shape[3] == shape[-1]:
        return "src padding"
    return "mask"


def _is_causal(mask, sq, sk):
    """Whether a mask (bool: True = hidden or kept, float: -inf = hidden) hides exactly the keys
    after each query: the causal mask, written either way."""
    m = mask.detach()
    while m.dim() > 2 and (m.shape[0] == 1 or bool((m == m[:1]).all())):
        m = m[0]  # one mask for every batch element and head (the Annotated Transformer's (B, 1, T, T))
    if m.dim() != 2:
        return False
    m = m[-sq:, :sk] if m.shape[0] >= sq and m.shape[1] >= sk else m
    if m.shape != (sq, sk):
        return False
    upper = torch.ones(sq, sk, dtype=torch.bool).triu(1)
    if m.dtype == torch.bool:
        return bool(torch.equal(m, upper) or torch.equal(m, ~upper))
    hidden = torch.isinf(m) & (m < 0)
    kept = m == 0
    if bool(torch.equal(hidden, upper) and torch.equal(kept, ~upper)):
        return True
    return bool(torch.equal(m == 0, upper) and torch.equal(m == 1, ~upper))  # a tril buffer of 1s, compared with 0


class _OpWatcher(TorchFunctionMode):
    """Hands every torch function's result to the recorder (Recorder.on_op)."""

    def __init__(self, recorder):
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", "")
        if name in ("softmax", "matmul", "__matmul__", "bmm", "mul", "__mul__", "div", "__truediv__", "masked_fill",
                    "relu"):
            self.recorder.on_op(name, args, out)
        return out


def _activation(layer):
    act = layer.activation
    if act is F.relu or isinstance(act, nn.ReLU):
        return F.relu
    if act is F.gelu or isinstance(act, nn.GELU):
        return F.gelu
    raise ValueError(f"tscope_trace: activation {act} is neither relu nor gelu")


def _op_of(module):
    """What a leaf module is, by its class, or by its class's name for a model's own (nanoGPT's
    LayerNorm with an optional bias is a layernorm, not a linear)."""
    for kind, op in ((nn.Linear, "linear"), (nn.LayerNorm, "layernorm"), (nn.ReLU, "relu"), (nn.GELU, "gelu"),
                     (nn.Dropout, "dropout"), (nn.Embedding, "embedding"), (nn.Softmax, "softmax")):
        if isinstance(module, kind):
            return op
    name = type(module).__name__.lower()
    for word, op in (("norm", "layernorm"), ("gelu", "gelu"), ("relu", "relu"), ("dropout", "dropout"),
                     ("embedding", "embedding"), ("softmax", "softmax"), ("linear", "linear"), ("conv1d", "linear")):
        if word in name:
            return op
    return "linear" if hasattr(module, "weight") else "add"


def step(leaf, tensor, op="add", tag="plain"):
    """Hand a tensor to the recorder from inside a module's forward: it is recorded as
    `<module path>.<leaf>`. Does nothing when nothing is recording."""
    if not _active:
        return
    r = _active[-1]
    if op not in OPS:
        raise ValueError(f"tscope_trace.step: op '{op}' is not one of {', '.join(OPS)}")
    if tag not in TAGS:
        raise ValueError(f"tscope_trace.step: tag '{tag}' is not one of {', '.join(TAGS)}")
    path = r.stack[-1] if r.stack else ""
    if leaf in r.attn_state.get(path, {}).get("emitted", ()):
        return  # the recorder saw this op itself and recorded it under the same name
    r.emit(r.name(r.tscope_path(path), leaf), op, tag, tensor)


@contextlib.contextmanager
def record(model, path, source_tokens=(), target_tokens=(), config=None):
    """Record every forward of `model` inside the block into the trace at `path` (written
    as path.tmp, renamed when the block ends; removed if it raises)."""
    r = Recorder(model, path, source_tokens, target_tokens, config)
    r.install()
    _active.append(r)
    ok = False
    try:
        with torch.enable_grad(), _OpWatcher(r):  # no fused fast path: the layers run the documented way
            yield r
        ok = True
    finally:
        _active.pop()
        r.remove()
        if ok:
            r.file.close(r.metadata_out())
        else:
            r.file.abort()


def trace(model, path, *inputs, **kwargs):
    """Run model(*inputs) once and record it; returns the model's output."""
    tokens = {k: kwargs.pop(k) for k in ("source_tokens", "target_tokens", "config") if k in kwargs}
    with record(model, path, **tokens):
        return model(*inputs, **kwargs)
