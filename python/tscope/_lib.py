"""The C library under the package: libtscope.so (`make python`), loaded with ctypes.

Found at $TSCOPE_LIB, else in the build directory of the checkout this package sits in
(python/tscope/../../build/libtscope.so). Every entry point is declared here once.
"""
import ctypes
import os
from ctypes import (CFUNCTYPE, POINTER, c_char_p, c_float, c_int, c_int32, c_int64, c_uint64, c_void_p)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


class TscopeError(Exception):
    """A failure inside tscope, with its one-line message (ts_last_error)."""


def _find():
    path = os.environ.get("TSCOPE_LIB")
    if path:
        return path
    return os.path.join(ROOT, "build", "libtscope.so")


def _load():
    path = _find()
    if not os.path.exists(path):
        raise TscopeError(f"{path} does not exist: build it with `make python` at the top of the checkout "
                          "(or set TSCOPE_LIB to a libtscope.so)")
    return ctypes.CDLL(path)


lib = _load()

# int fn(ctx, name, op, tag, rank, shape, stride, data, editing, pos0)
STEP_FN = CFUNCTYPE(c_int, c_void_p, c_char_p, c_int, c_int, c_int, POINTER(c_int64), POINTER(c_int64),
                    POINTER(c_float), c_int, c_int)


class Pass(ctypes.Structure):
    _fields_ = [
        ("edit_globs", POINTER(c_char_p)), ("n_edit", c_int),
        ("watch_globs", POINTER(c_char_p)), ("n_watch", c_int),
        ("fn", STEP_FN), ("ctx", c_void_p),
        ("trace_path", c_char_p), ("trace_level", c_char_p),
        ("specs", POINTER(c_char_p)), ("n_specs", c_int),
    ]


def _decl(name, res, *args):
    f = getattr(lib, name)
    f.restype = res
    f.argtypes = list(args)
    return f


S = c_int  # a ts_status
ts_capi_error = _decl("ts_capi_error", c_char_p)
ts_capi_free = _decl("ts_capi_free", None, c_void_p)
ts_capi_open = _decl("ts_capi_open", S, c_char_p, c_char_p, POINTER(c_void_p))
ts_capi_open_config = _decl("ts_capi_open_config", S, c_char_p, POINTER(c_void_p))
ts_capi_open_weights = _decl("ts_capi_open_weights", S, c_char_p, c_char_p, POINTER(c_char_p), c_int,
                             POINTER(c_void_p))
ts_capi_close = _decl("ts_capi_close", None, c_void_p)
ts_capi_preset_json = _decl("ts_capi_preset_json", S, c_char_p, POINTER(c_void_p))
ts_capi_config = _decl("ts_capi_config", c_char_p, c_void_p)
ts_capi_has_tokenizer = _decl("ts_capi_has_tokenizer", c_int, c_void_p)
ts_capi_tokenize = _decl("ts_capi_tokenize", S, c_void_p, c_char_p, POINTER(c_int32), c_int64, POINTER(c_int64))
ts_capi_decode = _decl("ts_capi_decode", S, c_void_p, POINTER(c_int32), c_int64, POINTER(c_void_p))
ts_capi_token_label = _decl("ts_capi_token_label", S, c_void_p, c_int32, ctypes.c_char_p, c_int64)
ts_capi_steps = _decl("ts_capi_steps", S, c_void_p, c_int, c_int, POINTER(c_void_p))
ts_capi_forward = _decl("ts_capi_forward", S, c_void_p, POINTER(c_int32), POINTER(c_int32), c_int, c_int, POINTER(c_int32), c_int,
                        POINTER(Pass), POINTER(c_float), c_int64, POINTER(c_int64))
ts_capi_forward_vectors = _decl("ts_capi_forward_vectors", S, c_void_p, POINTER(c_float), c_int, c_int, c_int,
                                POINTER(c_float), c_int, POINTER(Pass), POINTER(c_float), c_int64, POINTER(c_int64))
ts_capi_generate = _decl("ts_capi_generate", S, c_void_p, POINTER(c_int32), c_int, c_int, c_float, c_int, c_uint64,
                         POINTER(Pass), POINTER(c_int32), POINTER(c_float))
ts_capi_metadata = _decl("ts_capi_metadata", S, c_void_p, POINTER(c_int32), c_int, c_int, POINTER(c_void_p))
ts_capi_attribute = _decl("ts_capi_attribute", S, c_void_p, POINTER(c_int32), c_int, POINTER(c_int32), POINTER(c_int32),
                          POINTER(c_float), c_int64, POINTER(c_float), POINTER(c_int32), POINTER(c_int32),
                          POINTER(c_void_p))
ts_capi_trace_open = _decl("ts_capi_trace_open", S, c_char_p, POINTER(c_void_p))
ts_capi_trace_close = _decl("ts_capi_trace_close", None, c_void_p)
ts_capi_trace_count = _decl("ts_capi_trace_count", c_int64, c_void_p)
ts_capi_trace_step = _decl("ts_capi_trace_step", S, c_void_p, c_int64, POINTER(c_char_p), POINTER(c_int),
                           POINTER(c_int), POINTER(c_int), POINTER(c_int64), POINTER(c_int64), POINTER(c_int),
                           POINTER(c_int))
ts_capi_trace_values = _decl("ts_capi_trace_values", S, c_void_p, c_int64, POINTER(POINTER(c_float)))
ts_capi_trace_metadata = _decl("ts_capi_trace_metadata", c_char_p, c_void_p)
ts_capi_writer_open = _decl("ts_capi_writer_open", S, c_char_p, c_char_p, POINTER(c_void_p))
ts_capi_writer_step = _decl("ts_capi_writer_step", S, c_void_p, c_char_p, c_int, c_int, c_int, POINTER(c_int64),
                            POINTER(c_float))
ts_capi_writer_close = _decl("ts_capi_writer_close", S, c_void_p, c_int)
ts_capi_figure = _decl("ts_capi_figure", S, c_char_p, c_char_p, c_int, c_int, c_char_p, c_char_p, c_char_p)


def check(status):
    """Raise TscopeError with tscope's sentence when a call failed."""
    if status:
        raise TscopeError(ts_capi_error().decode("utf-8", "replace"))


def take_string(p):
    """A malloc'd C string as str, freed."""
    try:
        return ctypes.string_at(p.value).decode("utf-8", "replace")
    finally:
        ts_capi_free(p)
