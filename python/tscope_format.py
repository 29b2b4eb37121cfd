"""The .tstrace layout and the op and tag names, as src/trace/trace_format.h and
include/tscope/core.h define them. Made by scripts/gen-trace-format-py.sh: do not edit."""

VERSION = 2
VERSION_OLDEST = 1
ALIGN = 64
HEADER_SIZE = 64
H_VERSION = 8
H_HEADER_SIZE = 12
H_META_OFFSET = 16
H_META_SIZE = 24
H_RECORDS_OFFSET = 32
H_META_CRC = 40
H_FLAGS = 44
H_CRC = 60
P_PREFIX_SIZE = 4
P_RECORD_SIZE = 8
P_INDEX = 16
P_OP = 24
P_TAG = 26
P_DTYPE = 28
P_RANK = 29
P_CONTENT = 30
P_VIEW_SCALE = 31
P_BATCH = 32
P_NAME_LEN = 36
P_VALUES_COUNT = 40
P_SHAPE = 48
P_VIEW_BASE = 96
P_VIEW_OFFSET = 104
P_VIEW_STRIDES = 112
P_NAME = 160
VIEW_SCALE_MAX = 64
NAME_MAX = 1024
DTYPE_NONE = 0
DTYPE_F32 = 1
CONTENT_STATS = 1
CONTENT_VALUES = 2
CONTENT_VIEW = 4
CONTENT_HIST_FROM_VALUES = 8
CONTENT_VIEW_RELU = 16
SUFFIX_SIZE = 640
S_SUFFIX_SIZE = 4
S_INDEX = 8
S_MIN = 16
S_MAX = 24
S_MEAN = 32
S_STD = 40
S_MEAN_ABS = 48
S_FINITE = 56
S_NAN = 64
S_INF = 72
S_ZEROS = 80
S_HIST = 88
S_VALUES_CRC = 600
S_RECORD_CRC = 636
INDEX_HEAD = 16
TRAILER_SIZE = 64
T_INDEX_OFFSET = 8
T_INDEX_SIZE = 16
T_STEP_COUNT = 24
T_INDEX_CRC = 32
T_CRC = 60
MAGIC = b"\x89\x54\x53\x54\x52\x41\x43\x45"
PREFIX_MAGIC = b"\x54\x53\x54\x50"
SUFFIX_MAGIC = b"\x54\x53\x53\x46"
INDEX_MAGIC = b"\x54\x53\x49\x58"
TRAILER_MAGIC = b"\x54\x53\x54\x52\x41\x49\x4c\x52"
MAX_RANK = 6

# the op and tag numbers (append-only): their index in these lists
OPS = [
    "input",
    "embedding",
    "positional_encoding",
    "add",
    "linear",
    "reshape",
    "permute",
    "chunk",
    "matmul",
    "scale",
    "mask",
    "softmax",
    "concat",
    "mean",
    "std",
    "layernorm",
    "relu",
    "gelu",
    "dropout",
    "cross_entropy",
    "grad",
    "parameter",
    "metric",
    "rotary",
    "rms",
    "silu",
    "multiply",
]
TAGS = [
    "plain",
    "attn_scores",
    "attn_weights",
    "posenc",
    "norm_stat",
    "norm_in",
    "norm_out",
    "heads",
    "logits",
    "scalar",
    "grad",
    "param",
    "head_scores",
    "per_position",
]
