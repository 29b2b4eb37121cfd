"""tscope from Python: tscope's own C library (libtscope.so) with TransformerLens's conventions.

    import tscope
    m = tscope.load("assets/induction-2l.safetensors")     # a checkpoint, or a preset: tscope.load("lm")
    ids = m.tokenize("the cat sat")
    logits = m(ids)                                         # (1, S, V), float32
    logits, cache = m.run_with_cache(ids, names="*.self_attn.weights")
    cache["decoder.layers.1.self_attn.weights"]             # (B, H, Sq, Sk)

    def zero_head(x, step):                                  # x: the step's own memory, writable
        x[:, 1] = 0                                          # head 1 of (B, H, S, hd)
    logits = m.run_with_hooks(ids, hooks=[("decoder.layers.1.self_attn.values", zero_head)])

    tscope.figure(cache, "decoder.layers.1.self_attn.weights", head=1)   # shows in Jupyter; .save("a.png")

Steps are named as every tscope command names them (`m.step_names()`, docs/model.md). A hook
runs through the model's edit callback (include/tscope/core.h): before anything reads the step,
so what it changes reaches every later step. docs/python.md is the tutorial.
"""
import ctypes
import fnmatch
import json
import os
import re
import shutil
import tempfile
import warnings
from collections.abc import Mapping
from ctypes import POINTER, c_char_p, c_float, c_int, c_int32, c_int64, c_void_p

import numpy as np

from . import _lib
from ._lib import TscopeError

__all__ = ["load", "Model", "Trace", "Cache", "Step", "Attribution", "figure", "TscopeError", "OPS", "TAGS"]

# core.h's tables, in order (append-only there too).
OPS = ["input", "embedding", "positional_encoding", "add", "linear", "reshape", "permute", "chunk", "matmul",
       "scale", "mask", "softmax", "concat", "mean", "std", "layernorm", "relu", "gelu", "dropout", "cross_entropy",
       "grad", "parameter", "metric"]
TAGS = ["plain", "attn_scores", "attn_weights", "posenc", "norm_stat", "norm_in", "norm_out", "heads", "logits",
        "scalar", "grad", "param", "head_scores", "per_position"]


def _b(s):
    return s.encode("utf-8") if isinstance(s, str) else s


class Step:
    """What a hook is told besides the values: the step's name, op and tag, and pos0, the
    position of its first row (cached decoding hands over the new positions only)."""
    __slots__ = ("name", "op", "tag", "pos0", "head")

    def __init__(self, name, op, tag, pos0, head=None):
        self.name, self.op, self.tag, self.pos0, self.head = name, op, tag, pos0, head

    def __repr__(self):
        h = f", head={self.head}" if self.head is not None else ""
        return f"Step({self.name!r}, op={self.op!r}, tag={self.tag!r}, pos0={self.pos0}{h})"


def _view(rank, shape, stride, data):
    """The step's memory as a numpy array, no copy: its shape and strides as the model laid it out."""
    shp = tuple(shape[i] for i in range(rank))
    st = tuple(stride[i] for i in range(rank))
    if any(n == 0 for n in shp):
        return np.zeros(shp, np.float32)
    span = 1 + sum((n - 1) * s for n, s in zip(shp, st))
    addr = ctypes.cast(data, c_void_p).value
    buf = (c_float * span).from_address(addr)
    return np.ndarray(shp, np.float32, buffer=buf, strides=tuple(4 * s for s in st))


_HEAD = re.compile(r"^(.*)\.head(\d+)$")


class _Hooks:
    """The callback a pass hands to C: hooks by glob (edits), and globs to copy into a cache (watches)."""

    def __init__(self, hooks=(), watch=(), cache=None):
        self.hooks = []  # (glob, fn, head)
        for name, fn in hooks or ():
            if not callable(fn):
                raise TypeError(f"the hook on {name} is not callable")
            m = _HEAD.match(name)
            if m and "*" not in name.rsplit(".", 1)[-1]:
                # ATTN.headK: head K's slice of ATTN.values (B, S, hd)
                self.hooks.append((m.group(1) + ".values", fn, int(m.group(2))))
            else:
                self.hooks.append((name, fn, None))
        self.watch = list(watch or ())
        self.cache = cache
        self.error = None
        self.edit_globs = sorted({g for g, _, _ in self.hooks})
        self._keep = []
        self.fn = _lib.STEP_FN(self._call)

    def _call(self, ctx, name, op, tag, rank, shape, stride, data, editing, pos0):
        try:
            nm = name.decode("utf-8")
            x = _view(rank, shape, stride, data)
            if editing:
                for glob, fn, head in self.hooks:
                    if not fnmatch.fnmatchcase(nm, glob):
                        continue
                    y = x if head is None else x[:, head]
                    r = fn(y, Step(nm, OPS[op] if op < len(OPS) else str(op), TAGS[tag] if tag < len(TAGS) else str(tag),
                                   pos0, head))
                    if r is not None and r is not y:
                        r = np.asarray(r, dtype=np.float32)
                        if r.shape != y.shape:
                            raise ValueError(f"the hook on {nm} returned shape {r.shape}; the step is {y.shape}")
                        y[...] = r
            elif self.cache is not None:
                self.cache._put(nm, np.array(x, copy=True), OPS[op] if op < len(OPS) else "metric",
                                TAGS[tag] if tag < len(TAGS) else "plain", pos0)
            return 0
        except BaseException as e:  # noqa: BLE001 - carried back through C, raised after the pass
            if self.error is None:
                self.error = e
            return 1

    def pass_struct(self, trace=None, level=None, specs=()):
        p = _lib.Pass()
        eg = [_b(g) for g in self.edit_globs]
        wg = [_b(g) for g in self.watch]
        sp = [_b(s) for s in specs]
        arrs = [(c_char_p * max(1, len(a)))(*a) for a in (eg, wg, sp)]
        self._keep = arrs
        p.edit_globs, p.n_edit = arrs[0], len(eg)
        p.watch_globs, p.n_watch = arrs[1], len(wg)
        p.specs, p.n_specs = arrs[2], len(sp)
        p.fn = self.fn
        p.ctx = None
        p.trace_path = _b(os.fspath(trace)) if trace else None
        p.trace_level = _b(level) if level else None
        return p

    def raise_error(self):
        if self.error is not None:
            e, self.error = self.error, None
            raise e


class Cache(dict):
    """Step name -> numpy array (a copy of the step's values), in the order the model made them.
    cache.ops / cache.tags say what each step is; a figure is drawn from it like from a trace."""

    def __init__(self, model=None, ids=None):
        super().__init__()
        self.ops, self.tags = {}, {}
        self._model, self._ids = model, ids
        self._parts = {}

    def _put(self, name, x, op, tag, pos0):
        if self._ids is None and name in self:  # generation: the new positions, one call after another
            self._parts.setdefault(name, [self[name]]).append(x)
        self[name] = x
        self.ops[name], self.tags[name] = op, tag

    def _metadata(self):
        if self._model is None or self._ids is None:
            return None
        return self._model._metadata(self._ids)


def _edit_specs(ablate=None, patch=None, add=None, mean_from=None):
    specs = []
    for kind, v in (("ablate", ablate), ("patch", patch), ("add", add)):
        if v is None:
            continue
        for s in [v] if isinstance(v, str) else v:
            specs.append(f"{kind}={s}")
    if mean_from:
        specs.append(f"mean-from={os.fspath(mean_from)}")
    return specs


class Model:
    """A loaded model: runs again and again without reading its file again."""

    def __init__(self, handle, source):
        self._h = handle
        self.source = source
        self.config = json.loads(_lib.ts_capi_config(handle).decode())
        self._steps = {}
        self._types_warned = False

    def __del__(self):
        h, self._h = getattr(self, "_h", None), None
        if h:
            _lib.ts_capi_close(h)

    def __repr__(self):
        c = self.config
        return (f"tscope.Model({self.source!r}: {c['arch']}, d_model {c['d_model']}, {c['heads']} heads, "
                f"{c['layers']} layers, vocab {c['vocab']})")

    # ---- tokens ----
    @property
    def has_tokenizer(self):
        return bool(_lib.ts_capi_has_tokenizer(self._h))

    def tokenize(self, text):
        """text -> ids (int32, 1-D)."""
        b = _b(text)
        n = c_int64(0)
        cap = len(b) + 16
        out = np.empty(cap, np.int32)
        _lib.check(_lib.ts_capi_tokenize(self._h, b, out.ctypes.data_as(POINTER(c_int32)), cap, ctypes.byref(n)))
        if n.value > cap:
            out = np.empty(n.value, np.int32)
            _lib.check(_lib.ts_capi_tokenize(self._h, b, out.ctypes.data_as(POINTER(c_int32)), n.value,
                                             ctypes.byref(n)))
        return out[:n.value].copy()

    def decode(self, ids):
        """ids -> text."""
        a = np.ascontiguousarray(np.asarray(ids, dtype=np.int64).reshape(-1), dtype=np.int32)
        p = c_void_p()
        _lib.check(_lib.ts_capi_decode(self._h, a.ctypes.data_as(POINTER(c_int32)), a.size, ctypes.byref(p)))
        return _lib.take_string(p)

    def labels(self, ids):
        """A readable label per token ("␣God", "↵"), as tscope's figures name them."""
        buf = ctypes.create_string_buffer(64)
        out = []
        for i in np.asarray(ids).reshape(-1):
            _lib.check(_lib.ts_capi_token_label(self._h, int(i), buf, 64))
            out.append(buf.value.decode("utf-8", "replace"))
        return out

    def _ids(self, ids):
        if isinstance(ids, str):
            ids = self.tokenize(ids)
        a = np.asarray(ids)
        if a.ndim == 1:
            a = a[None, :]
        if a.ndim != 2:
            raise TscopeError(f"ids: give (S) or (B, S) token ids, not shape {a.shape}")
        if a.dtype.kind not in "iu":
            raise TscopeError(f"ids: give integer token ids, not {a.dtype}")
        return np.ascontiguousarray(a, dtype=np.int32)

    def _vectors(self, x, what):
        """A model over vectors reads (S, W) or (B, S, W) floats."""
        a = np.asarray(x)
        if a.ndim == 2:
            a = a[None]
        if a.ndim != 3:
            raise TscopeError(f"{what}: give (S, W) or (B, S, W) vectors, not shape {a.shape}")
        return np.ascontiguousarray(a, dtype=np.float32)

    # ---- steps ----
    def steps(self, batch=1, seq=None):
        """Every step of a pass: (name, op, tag, shape) rows (a shapes-only run, nothing computed)."""
        key = (batch, seq or 0)
        if key not in self._steps:
            p = c_void_p()
            _lib.check(_lib.ts_capi_steps(self._h, batch, seq or 0, ctypes.byref(p)))
            rows = []
            for line in _lib.take_string(p).splitlines():
                name, op, tag, shape = line.split("\t")
                rows.append((name, op, tag, tuple(json.loads(shape))))
            self._steps[key] = rows
        return self._steps[key]

    def step_names(self, glob=None, seq=None):
        names = [r[0] for r in self.steps(1, seq)]
        return [n for n in names if glob is None or fnmatch.fnmatchcase(n, glob)]

    # ---- passes ----
    def _token_types(self, tt, B, S):
        """BERT's token types as (B, S) int32, refused as `tscope run --token-types` refuses them. None
        on a model with token types runs all of them 0 (as Hugging Face does, right for one segment)
        but warns once with the command line's words: a pair of segments then gives other logits, and
        requiring the array would refuse every one-segment call that is right as it is."""
        K = self.config.get("type_vocab") or 0
        if tt is None:
            if K and not self._types_warned:
                self._types_warned = True
                warnings.warn(f"token types all 0, none given ({K} kinds): give token_types= for a pair of "
                              "segments", stacklevel=3)
            return None
        if not K:
            raise TscopeError("token_types: this model has no token type embeddings (BERT's segments)")
        t = np.asarray(tt)
        if t.dtype.kind not in "iu":
            raise TscopeError(f"token_types: give integer token types, not {t.dtype}")
        if not ((t.ndim == 2 and t.shape == (B, S)) or (t.ndim == 1 and B == 1 and t.shape == (S,))):
            raise TscopeError(f"token_types is {t.shape}; the ids are ({B}, {S}): one type for each id")
        bad = np.flatnonzero((t < 0) | (t >= K))
        if bad.size:
            i = int(bad[0])
            raise TscopeError(f"token_types: type {int(t.reshape(-1)[i])} at position {i} is not one of the "
                              f"model's {K} (0 to {K - 1})")
        return np.ascontiguousarray(t.reshape(B, S), dtype=np.int32)

    def run(self, ids, *, token_types=None, tgt=None, hooks=None, names=None, cache=None, trace=None, level=None,
            ablate=None, patch=None, add=None, mean_from=None):
        """One forward pass: the logits (B, S, V) (or the last stack's output). ids: token ids, or float
        vectors (B, S, W) for a model without a token table (tgt likewise). token_types: BERT's segments,
        integers (B, S) or (S) below the model's type_vocab (`tscope run --token-types`); left out on a
        model with token types they are all 0, with a warning once (see _token_types: right for one
        segment, as in Hugging Face, but not silent). hooks: [(NAME_OR_GLOB, fn)]
        edit steps; names: globs copied into `cache`; trace: a .tstrace written as `tscope run --trace`
        writes one; ablate/patch/add/mean_from: the command line's edits (docs/experiments.md)."""
        vectors = not isinstance(ids, str) and np.asarray(ids).dtype.kind == "f"
        a = self._vectors(ids, "x") if vectors else self._ids(ids)
        B, S = a.shape[:2]
        if vectors and token_types is not None:
            raise TscopeError("token_types: this model has no token type embeddings (BERT's segments)")
        types = None if vectors else self._token_types(token_types, B, S)
        t = None
        T = 0
        if tgt is not None:
            t = self._vectors(tgt, "tgt") if vectors else self._ids(tgt)
            T = t.shape[1]
        watch = [names] if isinstance(names, str) else list(names or ())
        if watch and cache is None:
            cache = Cache(self, None if vectors else a)
        h = _Hooks(hooks, watch, cache)
        p = h.pass_struct(trace, level, _edit_specs(ablate, patch, add, mean_from))
        V = self.config["vocab"] if self.config.get("head") == "lm" else max(self.config["d_model"],
                                                                             self.config.get("n_labels") or 0)
        cap = B * max(S, T) * V
        out = np.empty(cap, np.float32)
        n = c_int64(0)
        f32 = lambda v: v.ctypes.data_as(POINTER(c_float)) if v is not None else None
        if vectors:
            st = _lib.ts_capi_forward_vectors(self._h, f32(a), B, S, a.shape[2], f32(t), T, ctypes.byref(p), f32(out),
                                              cap, ctypes.byref(n))
        else:
            st = _lib.ts_capi_forward(self._h, a.ctypes.data_as(POINTER(c_int32)),
                                      types.ctypes.data_as(POINTER(c_int32)) if types is not None else None, B, S,
                                      t.ctypes.data_as(POINTER(c_int32)) if t is not None else None, T,
                                      ctypes.byref(p), f32(out), cap, ctypes.byref(n))
        h.raise_error()
        _lib.check(st)
        rows = T if t is not None else S
        out = out[:n.value]
        if self.config.get("head") == "cls":
            return out.reshape(B, -1)
        return out.reshape(B, rows, -1)

    __call__ = run

    def run_with_cache(self, ids, names="*", **kw):
        """(logits, cache): cache maps each step matching names (a glob or a list) to a copy of its values.
        token_types= and the other keywords as for run."""
        vectors = not isinstance(ids, str) and np.asarray(ids).dtype.kind == "f"
        a = self._vectors(ids, "x") if vectors else self._ids(ids)
        cache = Cache(self, None if vectors else a)
        logits = self.run(a, names=names, cache=cache, **kw)
        return logits, cache

    def run_with_hooks(self, ids, hooks=(), **kw):
        """The logits with hooks [(NAME_OR_GLOB, fn)]: fn(x, step) gets the step's values as a writable
        array before anything reads them; it edits in place or returns an array of x's shape.
        "ATTN.headK" hands over head K's slice of ATTN.values, (B, S, hd). token_types= and the other
        keywords as for run."""
        return self.run(ids, hooks=hooks, **kw)

    def generate(self, ids, n, *, hooks=None, temperature=1.0, top_k=0, seed=0, names=None, cache=None,
                 ablate=None, patch=None, add=None, mean_from=None, return_probs=False):
        """n new tokens after the prompt, the hooks and edits at every new token (cached decoding hands
        the new position's steps over: step.pos0 says which). A text in, a text out; ids in, ids out."""
        text = isinstance(ids, str)
        a = self._ids(ids)
        if a.shape[0] != 1:
            raise TscopeError("generate: one prompt at a time")
        S = a.shape[1]
        watch = [names] if isinstance(names, str) else list(names or ())
        if watch and cache is None:
            cache = Cache(self, None)
        h = _Hooks(hooks, watch, cache)
        p = h.pass_struct(None, None, _edit_specs(ablate, patch, add, mean_from))
        out = np.empty(S + n, np.int32)
        V = self.config["vocab"]
        probs = np.empty((max(n, 1), V), np.float32) if return_probs else None
        st = _lib.ts_capi_generate(self._h, a.ctypes.data_as(POINTER(c_int32)), S, n, float(temperature), int(top_k),
                                   int(seed) & (2 ** 64 - 1), ctypes.byref(p), out.ctypes.data_as(POINTER(c_int32)),
                                   probs.ctypes.data_as(POINTER(c_float)) if probs is not None else None)
        h.raise_error()
        _lib.check(st)
        res = self.decode(out) if text else out
        return (res, probs[:n]) if return_probs else res

    def _token(self, what, t):
        """One token: an id, or a text that is exactly one token."""
        if isinstance(t, (int, np.integer)):
            return int(t)
        ids = self.tokenize(t)
        if len(ids) != 1:
            raise TscopeError(f"{what} {t!r} is {len(ids)} tokens for this tokenizer; give one token")
        return int(ids[0])

    def _targets(self, what, t, S, none):
        """A token for every position: one token (text or id) for all, or a sequence of S of them."""
        if t is None:
            return np.full(S, none, np.int32)
        if isinstance(t, (str, int, np.integer)):
            return np.full(S, self._token(what, t), np.int32)
        a = np.asarray([self._token(what, x) for x in t], np.int32)
        if a.shape != (S,):
            raise TscopeError(f"{what}: give one token, or one for each of the {S} positions (not {len(a)})")
        return a

    def attribute(self, ids, answer=None, wrong=None):
        """Direct logit attribution at every position from one forward pass (`tscope attribute
        --position all`): the logit of `answer` (the model's top guess where None), or with `wrong`
        the difference logit(answer) - logit(wrong), split into each part's share through the final
        norm. answer, wrong: a token (text or id) for every position, or one per position."""
        a = self._ids(ids)
        if a.shape[0] != 1:
            raise TscopeError("attribute: one sequence at a time")
        S = a.shape[1]
        if wrong is not None and answer is None:
            raise TscopeError("attribute: wrong= needs answer= to subtract it from")
        ans, wr = self._targets("answer", answer, S, -1), self._targets("wrong", wrong, S, -1)
        c = self.config
        P = 2 + c["layers"] * (c["heads"] + 2)
        share = np.empty((S, P), np.float32)
        logit = np.empty(S, np.float32)
        ans_out, wr_out = np.empty(S, np.int32), np.empty(S, np.int32)
        names = c_void_p()
        i32 = lambda x: x.ctypes.data_as(POINTER(c_int32))
        _lib.check(_lib.ts_capi_attribute(self._h, i32(a), S, i32(ans), i32(wr) if wrong is not None else None,
                                          share.ctypes.data_as(POINTER(c_float)), share.size,
                                          logit.ctypes.data_as(POINTER(c_float)), i32(ans_out), i32(wr_out),
                                          ctypes.byref(names)))
        return Attribution(share, _lib.take_string(names).splitlines(), logit, ans_out, wr_out)

    def _metadata(self, ids):
        a = self._ids(ids)
        p = c_void_p()
        _lib.check(_lib.ts_capi_metadata(self._h, a.ctypes.data_as(POINTER(c_int32)), a.shape[0], a.shape[1],
                                         ctypes.byref(p)))
        return _lib.take_string(p)


class Attribution:
    """What Model.attribute returns: shares (positions, parts) float32, each part's share of the
    logit (or difference) at each position; parts, the parts' names ("embedding", "layer 1 head 1",
    "layer 1 attn bias", "layer 1 FFN", ..., "norm beta, head bias"); logit (positions), the
    model's own logit (or difference), which each row adds up to; answer and wrong (positions), the
    tokens used (wrong -1 where none)."""

    def __init__(self, shares, parts, logit, answer, wrong):
        self.shares, self.parts, self.logit, self.answer, self.wrong = shares, parts, logit, answer, wrong

    def __getitem__(self, part):
        """One part's share at every position: attr["layer 1 head 1"]."""
        if part not in self.parts:
            raise KeyError(f"no part {part!r} (they are {', '.join(self.parts)})")
        return self.shares[:, self.parts.index(part)]

    def __repr__(self):
        return f"tscope.Attribution({self.shares.shape[0]} positions x {len(self.parts)} parts)"


def load(path_or_preset, layout=None, **flags):
    """A model: a checkpoint (`tscope train --task lm`'s .safetensors, GPT-2's or nanoGPT's files: what
    `tscope run --load` reads without flags); a bare state_dict (nn.Transformer's or its parts') with
    the settings its file leaves open, as `run --load W --heads 4 --norm pre` takes them (heads=4,
    norm="pre", activation="gelu", pe=, eps=, pe_variant=, and mask="causal" or "none" for an encoder); or a preset (`lm`, `tiny`, `seed000`, ...)
    whose config the flags change (d_model=64, heads=4, layers=2, seed=1, ...: the names of m.config)."""
    h = c_void_p()
    path = os.fspath(path_or_preset)
    if os.path.exists(path):
        kv = [_b(f"{k.replace('-', '_')}={v}") for k, v in flags.items()]
        arr = (c_char_p * max(1, len(kv)))(*kv)
        _lib.check(_lib.ts_capi_open_weights(_b(path), _b(layout) if layout else None, arr, len(kv),
                                             ctypes.byref(h)))
        return Model(h, path)
    p = c_void_p()
    _lib.check(_lib.ts_capi_preset_json(_b(path), ctypes.byref(p)))
    cfg = json.loads(_lib.take_string(p))
    for k, v in flags.items():
        key = k.replace("-", "_")
        if key not in cfg:
            raise TscopeError(f"{k}: not a setting of a model config (they are {', '.join(sorted(cfg))})")
        cfg[key] = v
    _lib.check(_lib.ts_capi_open_config(_b(json.dumps(cfg)), ctypes.byref(h)))
    return Model(h, path)


class Trace(Mapping):
    """A .tstrace file as a mapping: step name -> numpy array of its kept values (read-only, in place in
    the file's map: no copy). trace.steps lists (name, op, tag, shape, kept); trace.metadata is a dict."""

    def __init__(self, path):
        self.path = os.fspath(path)
        h = c_void_p()
        _lib.check(_lib.ts_capi_trace_open(_b(self.path), ctypes.byref(h)))
        self._h = h
        self._index = {}
        self.steps = []
        name = c_char_p()
        op, tag, rank, bi, kept = c_int(), c_int(), c_int(), c_int(), c_int()
        shape, vshape = (c_int64 * 6)(), (c_int64 * 6)()
        for i in range(_lib.ts_capi_trace_count(h)):
            _lib.check(_lib.ts_capi_trace_step(h, i, ctypes.byref(name), ctypes.byref(op), ctypes.byref(tag),
                                               ctypes.byref(rank), shape, vshape, ctypes.byref(bi), ctypes.byref(kept)))
            nm = name.value.decode("utf-8", "replace")
            r = rank.value
            info = (nm, OPS[op.value] if op.value < len(OPS) else str(op.value),
                    TAGS[tag.value] if tag.value < len(TAGS) else str(tag.value), tuple(shape[:r]), bool(kept.value),
                    tuple(vshape[:r]), bi.value)
            self.steps.append(info)
            self._index.setdefault(nm, i)
        self.metadata = json.loads(_lib.ts_capi_trace_metadata(h).decode("utf-8", "replace"))

    def __del__(self):
        h, self._h = getattr(self, "_h", None), None
        if h:
            _lib.ts_capi_trace_close(h)

    def __len__(self):
        return len(self._index)

    def __iter__(self):
        return iter(self._index)

    def __contains__(self, name):
        return name in self._index

    def values(self, name, occurrence=0):
        """The values of the occurrence-th record of name (training traces repeat names)."""
        idx = [i for i, s in enumerate(self.steps) if s[0] == name]
        if not idx:
            near = sorted(self._index, key=lambda n: _distance(n, name))[:3]
            raise KeyError(f"{self.path} has no step {name} (nearest: {', '.join(near)})")
        i = idx[occurrence]
        nm, op, tag, shape, kept, vshape, bi = self.steps[i]
        if not kept:
            raise TscopeError(f"{self.path}: {name} keeps no values (record it with level values)")
        ptr = POINTER(c_float)()
        _lib.check(_lib.ts_capi_trace_values(self._h, i, ctypes.byref(ptr)))
        n = int(np.prod(vshape)) if vshape else 1
        if n == 0:
            return np.zeros(vshape, np.float32)
        buf = (c_float * n).from_address(ctypes.cast(ptr, c_void_p).value)
        buf._owner = self  # the map lives while the array does
        a = np.frombuffer(buf, np.float32).reshape(vshape)
        a.flags.writeable = False
        return a

    def __getitem__(self, name):
        return self.values(name)

    def tokens(self):
        return list(self.metadata.get("source_tokens") or [])


def _distance(a, b):
    import difflib
    return -difflib.SequenceMatcher(None, a, b).ratio()


# ---- figures ----

class Figure:
    """A figure of one step, drawn by tscope's renderer (the one `tscope png` draws with). Shows itself
    in Jupyter (_repr_png_, _repr_svg_); .save(path) writes .png, .svg or .pdf."""

    def __init__(self, trace_path, step, head, batch, title, highlight, owned_dir=None):
        self._trace, self.step, self.head, self.batch = trace_path, step, head, batch
        self.title, self.highlight = title, highlight
        self._dir = owned_dir
        self._png = self._svg = None

    def __del__(self):
        d = getattr(self, "_dir", None)
        if d:
            shutil.rmtree(d, ignore_errors=True)

    def save(self, path):
        path = os.fspath(path)
        _lib.check(_lib.ts_capi_figure(_b(self._trace), _b(self.step), -1 if self.head is None else int(self.head),
                                       int(self.batch), _b(self.title) if self.title else None,
                                       _b(self.highlight) if self.highlight else None, _b(path)))
        return path

    def _bytes(self, ext):
        d = tempfile.mkdtemp(prefix="tscope-fig-")
        try:
            with open(self.save(os.path.join(d, "figure." + ext)), "rb") as f:
                return f.read()
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def _repr_png_(self):
        if self._png is None:
            self._png = self._bytes("png")
        return self._png

    def _repr_svg_(self):
        if self._svg is None:
            self._svg = self._bytes("svg").decode("utf-8")
        return self._svg


def _highlight_text(highlight):
    if highlight is None:
        return None
    if isinstance(highlight, str):
        return highlight
    if len(highlight) == 2 and all(isinstance(v, (int, np.integer)) for v in highlight):
        highlight = [highlight]
    return ";".join(f"{r},{c}" for r, c in highlight)


def figure(source, step, head=None, title=None, highlight=None, batch=0):
    """A figure of `step` from a Trace, a trace's path, or a Cache (run_with_cache's): attention
    weights as a heatmap of one head (head=K) or a grid of every head, any other step by its tag, as
    `tscope png` draws it. highlight: (row, col), a list of them, or "R0-R1,C0-C1" frames."""
    hl = _highlight_text(highlight)
    if isinstance(source, Trace):
        return Figure(source.path, step, head, batch, title, hl)
    if isinstance(source, (str, os.PathLike)):
        return Figure(os.fspath(source), step, head, batch, title, hl)
    if isinstance(source, Mapping):
        if step not in source:
            raise KeyError(f"the cache has no step {step} (run_with_cache(..., names=...) chooses them)")
        d = tempfile.mkdtemp(prefix="tscope-fig-")
        path = os.path.join(d, "cache.tstrace")
        meta = source._metadata() if isinstance(source, Cache) else None
        w = c_void_p()
        _lib.check(_lib.ts_capi_writer_open(_b(path), _b(meta) if meta else None, ctypes.byref(w)))
        ok = False
        try:
            a = np.ascontiguousarray(source[step], dtype=np.float32)
            op = OPS.index(source.ops.get(step, "metric")) if isinstance(source, Cache) else OPS.index("metric")
            tag = TAGS.index(source.tags.get(step, "plain")) if isinstance(source, Cache) else 0
            if not isinstance(source, Cache) and a.ndim == 4 and step.endswith(".weights"):
                tag = TAGS.index("attn_weights")
            shape = (c_int64 * 6)(*a.shape)
            _lib.check(_lib.ts_capi_writer_step(w, _b(step), op, tag, a.ndim, shape,
                                                a.ctypes.data_as(POINTER(c_float))))
            ok = True
        finally:
            _lib.check(_lib.ts_capi_writer_close(w, 1 if ok else 0))
        return Figure(path, step, head, batch, title, hl, owned_dir=d)
    raise TypeError("figure: give a Trace, a trace's path, or a cache from run_with_cache")
