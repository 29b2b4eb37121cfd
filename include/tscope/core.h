/* core: what every subsystem stands on. Errors (a status and a sentence),
 * the arena, tensors (views with shapes and strides), small text helpers, the
 * version, and the hook through which the model shows its steps.
 */
#ifndef TSCOPE_CORE_H
#define TSCOPE_CORE_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* status: how every library call reports failure.
 *
 * A call returns a ts_status; on failure it also leaves a sentence for a human
 * in a thread-local buffer (ts_last_error). Only the CLI turns that into an exit.
 */

typedef enum ts_status {
    TS_OK = 0,
    TS_ERR_ARG,         /* a bad argument or flag value */
    TS_ERR_SHAPE,       /* shapes that cannot work together */
    TS_ERR_IO,          /* a file could not be opened, read or written */
    TS_ERR_FORMAT,      /* a file is not what it claims to be */
    TS_ERR_NOMEM,       /* an allocation or an arena ran out */
    TS_ERR_UNSUPPORTED, /* valid, but not something tscope does */
    TS_STATUS_COUNT
} ts_status;

/* Set the message for the current thread and return s, so a caller can write
 * `return ts_fail(TS_ERR_SHAPE, "cannot reshape %s", ...)`. */
ts_status ts_fail(ts_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The message of the last failure on this thread ("" when there was none). */
const char *ts_last_error(void);

/* Forget the last message. */
void ts_clear_error(void);

/* A short name for a status: "shape error", "i/o error", ... */
const char *ts_status_str(ts_status s);

/* A first failure kept so that later calls can replay it: writers whose
 * caller checks once, at the end. */
typedef struct ts_sticky {
    ts_status status; /* TS_OK while all is well */
    char message[512];
} ts_sticky;

/* Keep this failure unless one is kept already; returns the kept one, with
 * its message as the last error. */
ts_status ts_sticky_fail(ts_sticky *e, ts_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* TS_OK, or the kept failure again. */
ts_status ts_sticky_replay(const ts_sticky *e);

/* Return the status of expr from the calling function when it failed. */
#define TS_TRY(expr)                      \
    do {                                  \
        ts_status ts_try_ = (expr);       \
        if (ts_try_ != TS_OK) return ts_try_; \
    } while (0)

/* arena: one block of memory carved into 64-byte aligned pieces.
 *
 * Activations for a whole forward pass come from one arena sized up front, so
 * nothing is malloc'd inside forward or backward. ts_arena_mark/ts_arena_reset
 * give stack-like scratch space; the peak tells how large the block must be.
 */

#define TS_ARENA_ALIGN 64

typedef struct ts_arena {
    unsigned char *base; /* the block (owned) */
    size_t capacity;     /* bytes in the block */
    size_t used;         /* bytes handed out so far */
    size_t peak;         /* largest `used` seen */
} ts_arena;

ts_status ts_arena_init(ts_arena *arena, size_t capacity);
void ts_arena_free(ts_arena *arena);

/* `bytes` of memory aligned to TS_ARENA_ALIGN, or NULL with an error message
 * that says how much was asked for and how much was left. */
void *ts_arena_alloc(ts_arena *arena, size_t bytes);

/* Bytes an allocation of `bytes` takes once rounded up to the alignment:
 * sum this over a size table to size an arena exactly. */
size_t ts_arena_round(size_t bytes);

size_t ts_arena_mark(const ts_arena *arena);
void ts_arena_reset(ts_arena *arena, size_t mark);

/* tensor: float32 views with a shape and strides, the way PyTorch sees them.
 *
 * A ts_tensor never owns its data: it is a view (pointer, shape, strides) over
 * memory that an arena, a checkpoint or a caller owns. Reshape, permute,
 * transpose, slice and chunk make new views without copying, exactly when
 * PyTorch's .view() would; ts_tensor_contiguous copies when a view cannot do.
 * Dims may be given negative, counted from the end as in Python (-1 = last).
 */

#define TS_MAX_RANK 6

typedef struct ts_tensor {
    float *data;                 /* first element of the view */
    int rank;                    /* 0..TS_MAX_RANK */
    int64_t shape[TS_MAX_RANK];  /* sizes, outermost first */
    int64_t stride[TS_MAX_RANK]; /* in elements, not bytes */
} ts_tensor;

/* How shapes are printed: [30, 200, 512] or torch.Size([30, 200, 512]). */
typedef enum ts_shape_style { TS_SHAPE_PLAIN, TS_SHAPE_TORCH } ts_shape_style;

/* Longest text ts_shape_format can produce, with its terminator. */
#define TS_SHAPE_TEXT_MAX 160

/* Give t the row-major (contiguous) strides of its shape. */
void ts_tensor_row_major(ts_tensor *t);

/* A contiguous (row-major) view of `data` with the given shape. */
ts_status ts_tensor_view(ts_tensor *out, float *data, int rank, const int64_t *shape);

/* Allocate a contiguous tensor of this shape from an arena (64-byte aligned). */
ts_status ts_tensor_alloc(ts_tensor *out, ts_arena *arena, int rank, const int64_t *shape);

int64_t ts_tensor_numel(const ts_tensor *t);
bool ts_tensor_is_contiguous(const ts_tensor *t);

/* Hand t's elements to fn in row-major order, in runs of consecutive
 * floats: all at once when t is contiguous, else each innermost row
 * gathered into a buffer, a few thousand floats at a time. The first
 * non-OK status fn returns stops the walk and is returned. */
typedef ts_status (*ts_tensor_run_fn)(void *ctx, const float *run, int64_t n);
ts_status ts_tensor_each_run(const ts_tensor *t, ts_tensor_run_fn fn, void *ctx);
bool ts_tensor_same_shape(const ts_tensor *a, const ts_tensor *b);

/* Element at a multi-index (rank entries); for tests and tools, not hot loops. */
float ts_tensor_get(const ts_tensor *t, const int64_t *index);

/* A view with a new shape. One entry may be -1 (inferred). Works whenever
 * PyTorch's .view() would: always for contiguous tensors, and for strided ones
 * when the dims being merged or split are laid out contiguously together. */
ts_status ts_tensor_reshape(ts_tensor *out, const ts_tensor *in, int rank, const int64_t *shape);

/* out.shape[i] = in.shape[perm[i]]: a view, no copy. */
ts_status ts_tensor_permute(ts_tensor *out, const ts_tensor *in, const int *perm);

/* Swap two dims: a view, no copy. */
ts_status ts_tensor_transpose(ts_tensor *out, const ts_tensor *in, int dim0, int dim1);

/* Elements [start, start + length) along dim: a view, no copy. */
ts_status ts_tensor_slice(ts_tensor *out, const ts_tensor *in, int dim, int64_t start, int64_t length);

/* Split dim into n_chunks pieces as torch.chunk does: each ceil(size / n) long,
 * the last one shorter. Writes *n_out views into out[] (at most n_chunks). */
ts_status ts_tensor_chunk(ts_tensor *out, int *n_out, const ts_tensor *in, int n_chunks, int dim);

/* Copy src's elements, in row-major order of src's shape, into dst (which must
 * have the same shape; dst may be strided too). */
ts_status ts_tensor_copy(ts_tensor *dst, const ts_tensor *src);

/* A contiguous tensor with in's values: in itself when already contiguous,
 * otherwise a copy allocated from the arena. */
ts_status ts_tensor_contiguous(ts_tensor *out, const ts_tensor *in, ts_arena *arena);

/* Write "[30, 200, 512]" or "torch.Size([30, 200, 512])" into buf; returns buf. */
char *ts_shape_format(char *buf, size_t size, int rank, const int64_t *shape, ts_shape_style style);

/* Same for a tensor's shape. */
char *ts_tensor_shape_str(char *buf, size_t size, const ts_tensor *t, ts_shape_style style);

/* text: small string helpers that several modules print with.
 *
 * Kept here once so every "did you mean" and every file size reads the same
 * wherever it appears (trace writer, info, png, lessons).
 */

/* Levenshtein distance between a and b; a large number when either is longer
 * than 255 bytes (names that long are never a typo of each other). */
int ts_text_edit_distance(const char *a, const char *b);

/* Whether the len bytes of word are one of the '|'-separated choices
 * ("post|pre"). */
bool ts_text_in_choices(const char *choices, const char *word, size_t len);

/* Characters of UTF-8 text as a terminal lays them out: one column a
 * character, whatever its byte count ("␣the" is 4, though 6 bytes). */
int ts_text_columns(const char *s);

/* A whole number written in decimal (an optional sign, digits, nothing
 * else: no spaces, no fraction, no exponent) in [lo, hi]: true with *out set,
 * false (and *out untouched) for anything else, out-of-range included. Every
 * integer read from a file, a lesson or a flag goes through it, or through
 * ts_json_int: never atoi, never a cast that wraps. */
bool ts_text_int(const char *s, int64_t lo, int64_t hi, int64_t *out);

/* The same at the start of s, for numbers inside other text ("layers.12.ln",
 * "3-7"): an optional '-' and digits; returns the text after them with *out
 * set, or NULL when s does not start with one or it is outside [lo, hi]. */
const char *ts_text_int_prefix(const char *s, int64_t lo, int64_t hi, int64_t *out);

/* "A-B" of whole numbers with 0 <= A <= B <= hi (or "A" alone, read as A-A,
 * when single is true): true with *a and *b set; false for anything else. */
bool ts_text_range(const char *s, int64_t hi, bool single, int64_t *a, int64_t *b);

/* Whether the n bytes of s are well-formed UTF-8 (no overlong forms, no
 * surrogates, nothing past U+10FFFF); *bad (when not NULL) gets the offset of
 * the first byte that is not. */
bool ts_text_utf8_valid(const char *s, size_t n, size_t *bad);

/* s made inert for a terminal, into buf (cut to fit, with "..."): control
 * characters (C0, DEL, C1) written as \xHH, a backslash as \\, and bytes
 * that are not UTF-8 as \xHH; the rest as it is. Returns buf. Text read
 * from a file (a trace's names and tokens) is printed through it. */
char *ts_text_inert(char *buf, size_t size, const char *s);

/* "1.50 GB", "12.3 MB", "4.0 KB" into buf; returns buf. */
char *ts_text_bytes(char *buf, size_t size, uint64_t n);

/* A string that grows as text is added (start from {0}). s is
 * NUL-terminated once anything was added. Out of memory, it stops growing
 * and says so in oom; ts_text_buf_take then gives NULL. */
typedef struct ts_text_buf {
    char *s;
    size_t len, cap;
    bool oom;
} ts_text_buf;

void ts_text_buf_add(ts_text_buf *b, const char *s, size_t n);
void ts_text_buf_str(ts_text_buf *b, const char *s);
void ts_text_buf_printf(ts_text_buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* The string ("" when nothing was added, NULL when out of memory), the
 * caller's to free; b is empty again. */
char *ts_text_buf_take(ts_text_buf *b);

/* json: every JSON file tscope reads, read by type (src/core/json.c). A
 * reader parses with ts_json_parse, which refuses what Python's json would
 * read differently (a key given twice: Python keeps the last, cJSON the
 * first) and anything but an object; then takes each value through a typed
 * getter, which refuses a value of the wrong type instead of coercing it.
 * Every message starts with `what` (the file, or the file and the part of
 * it) and quotes the key and the value found: `config.json: "n_head" is 8.5,
 * not a whole number`. An absent key is TS_OK with *out untouched unless
 * required. */
struct cJSON;
ts_status ts_json_parse(const char *text, size_t len, const char *what, struct cJSON **out);
/* A key given twice in o or in any object below it: an error naming it. */
ts_status ts_json_check_unique(const struct cJSON *o, const char *what);
bool ts_json_has(const struct cJSON *o, const char *key);
/* A whole number in [lo, hi] (1.0 is one, 1.5 is not). */
ts_status ts_json_int(const struct cJSON *o, const char *key, const char *what, bool required, int64_t lo,
                      int64_t hi, int64_t *out);
ts_status ts_json_number(const struct cJSON *o, const char *key, const char *what, bool required, double *out);
ts_status ts_json_string(const struct cJSON *o, const char *key, const char *what, bool required,
                         const char **out);
ts_status ts_json_bool(const struct cJSON *o, const char *key, const char *what, bool required, bool *out);
/* The value as the file spells it, cut to fit buf with "...": for messages. */
char *ts_json_quote(const struct cJSON *v, char *buf, size_t size);

/* version: tscope's version, written into every trace it makes. */

#define TSCOPE_VERSION "0.1.0"

/* names: the layer in a step's or parameter's name, parsed in one place.
 * A layer is the component "layers" followed by a component of digits
 * ("encoder.layers.3.self_attn.q"); lessons write "*" in place of the digits
 * for every layer at once ("encoder.layers.*.out"). (src/core/names.c) */

/* The layer number in name, or -1 when it is in no layer (or has "*"). */
int ts_name_layer(const char *name);

/* Length of the layer part of name, up to and including its number
 * ("encoder.layers.3" of "encoder.layers.3.self_attn.q"); 0 when none. */
size_t ts_name_layer_prefix(const char *name);

/* name with its layer's number (or "*") replaced by `layer`, into buf; false
 * when name is in no layer or buf is too small. */
bool ts_name_with_layer(char *buf, size_t size, const char *name, int layer);

/* The layer of a step of `stack` ("decoder"): N when name is
 * "<stack>.layers.N" or starts with "<stack>.layers.N.", with *rest (may be
 * NULL) at what follows N ("" or ".ffn.out"); -1 for any other name. */
int ts_name_stack_layer(const char *name, const char *stack, const char **rest);

/* rng: random numbers that do not depend on the thread count. A number is a
 * pure function of a key and a counter, so dropout masks, task data and
 * initial weights come out the same whichever thread draws them. */

/* A well-mixed 64-bit hash (splitmix64's finaliser). */
static inline uint64_t ts_mix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1) from a key and a counter: the same on any thread count. */
static inline double ts_u01(uint64_t key, uint64_t i) {
    return (double)(ts_mix64(key ^ (i * 0xD1B54A32D192ED03ull)) >> 11) * 0x1.0p-53;
}

/* hook: the one place the model talks to the outside world.
 *
 * The model calls ts_hook_call(hook, name, op, tensor, tag) after every step it
 * computes. What happens then is the hook's business: write a trace, print
 * shapes, compare against a golden list, or nothing. The op table and the tags
 * are shared by the model, the trace format and the viewer, so a number on
 * disk means the same thing everywhere.
 */

/* X(ENUM, "name"): every op a traced step can come from. Append only: the
 * numbers are stored in trace files. */
#define TS_OP_LIST(X)                          \
    X(TS_OP_INPUT, "input")                    \
    X(TS_OP_EMBED, "embedding")                \
    X(TS_OP_POSENC, "positional_encoding")     \
    X(TS_OP_ADD, "add")                        \
    X(TS_OP_LINEAR, "linear")                  \
    X(TS_OP_RESHAPE, "reshape")                \
    X(TS_OP_PERMUTE, "permute")                \
    X(TS_OP_CHUNK, "chunk")                    \
    X(TS_OP_MATMUL, "matmul")                  \
    X(TS_OP_SCALE, "scale")                    \
    X(TS_OP_MASK, "mask")                      \
    X(TS_OP_SOFTMAX, "softmax")                \
    X(TS_OP_CONCAT, "concat")                  \
    X(TS_OP_MEAN, "mean")                      \
    X(TS_OP_STD, "std")                        \
    X(TS_OP_LAYERNORM, "layernorm")            \
    X(TS_OP_RELU, "relu")                      \
    X(TS_OP_GELU, "gelu")                      \
    X(TS_OP_DROPOUT, "dropout")                \
    X(TS_OP_CROSS_ENTROPY, "cross_entropy")    \
    X(TS_OP_GRAD, "grad")                      \
    X(TS_OP_PARAM, "parameter")                \
    X(TS_OP_METRIC, "metric")                  \
    X(TS_OP_ROPE, "rotary")                    \
    X(TS_OP_RMS, "rms")                        \
    X(TS_OP_SILU, "silu")                      \
    X(TS_OP_MUL, "multiply")

#define TS_OP_ENUM_ENTRY(e, name) e,
typedef enum ts_op { TS_OP_LIST(TS_OP_ENUM_ENTRY) TS_OP_COUNT } ts_op;
#undef TS_OP_ENUM_ENTRY

/* What a step's values mean, so a viewer can choose how to draw it without
 * parsing names. Append only, like the ops. */
#define TS_TAG_LIST(X)                                   \
    X(TS_TAG_PLAIN, "plain")         /* any activation */ \
    X(TS_TAG_ATTN_SCORES, "attn_scores") /* (B,H,Sq,Sk) before softmax */ \
    X(TS_TAG_ATTN_WEIGHTS, "attn_weights") /* (B,H,Sq,Sk) rows sum to 1 */ \
    X(TS_TAG_POSENC, "posenc")       /* (S,D) positional encoding */ \
    X(TS_TAG_NORM_STAT, "norm_stat") /* (B,S,1) mean or std of a norm */ \
    X(TS_TAG_NORM_IN, "norm_in")     /* what a LayerNorm receives */ \
    X(TS_TAG_NORM_OUT, "norm_out")   /* what a LayerNorm gives */ \
    X(TS_TAG_HEADS, "heads")         /* (B,H,S,hd) per-head tensors */ \
    X(TS_TAG_LOGITS, "logits")       /* (B,S,V) */ \
    X(TS_TAG_SCALAR, "scalar")       /* loss, norms, learning rate */ \
    X(TS_TAG_GRAD, "grad")           /* a gradient */ \
    X(TS_TAG_PARAM, "param")         /* a parameter */ \
    X(TS_TAG_HEAD_SCORES, "head_scores") /* (L, H) one number per attention head */ \
    X(TS_TAG_PER_POSITION, "per_position") /* (S) one number per position of a sequence */

#define TS_TAG_ENUM_ENTRY(e, name) e,
typedef enum ts_tag { TS_TAG_LIST(TS_TAG_ENUM_ENTRY) TS_TAG_COUNT } ts_tag;
#undef TS_TAG_ENUM_ENTRY

const char *ts_op_name(ts_op op);   /* "softmax"; "?" when out of range */

/* Whether a step of this op shows an earlier step's values rearranged, not
 * computed: the model and a trace writer then need no new memory for it. */
static inline bool ts_op_is_view(ts_op op) {
    return op == TS_OP_RESHAPE || op == TS_OP_PERMUTE || op == TS_OP_CHUNK;
}
const char *ts_tag_name(ts_tag tag); /* "attn_weights"; "?" when out of range */

/* Whether a step of this tag may have a batch dim first: not a positional
 * encoding, a parameter, a scalar, per-head scores or a per-position curve. */
static inline bool ts_tag_batched(ts_tag tag) {
    return tag != TS_TAG_POSENC && tag != TS_TAG_PARAM && tag != TS_TAG_SCALAR && tag != TS_TAG_HEAD_SCORES &&
           tag != TS_TAG_PER_POSITION;
}

/* Called after each step. A non-OK return stops the forward pass and the
 * model returns that status (for example a trace writer whose disk is full). */
typedef ts_status (*ts_hook_fn)(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag);

/* Called instead of fn, when set, for a step whose every value is the value
 * at the same index in an earlier step, times `factor`: the step whose
 * tensor was `of`, or with of NULL the step handed to the hook just before
 * (then in the same memory, which a hook checks). Factor 1: an eval-mode
 * dropout, a layer's out that is its last norm's out, a LayerNorm's out
 * when gamma is 1 and beta 0 (of: its y); 1/sqrt(hd): the scaled scores.
 * With op TS_OP_RELU the values then go through ReLU (an activation made in
 * place from the step before).
 * A trace writer then derives the statistics instead of reading every
 * element again, and stores the values as a view of that step's. */
typedef ts_status (*ts_hook_like_fn)(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag,
                                     const ts_tensor *of, float factor);

/* Asked, when set, before the model makes a step that will be the previous
 * step times `factor` (ts_hook_like_fn with of NULL), while t's memory still holds the
 * previous step's values. A hook that can record the step from what it
 * already holds, without reading t (a trace writer deriving the statistics
 * and storing the values as a scaled view), does so and sets *done; the
 * model then need not make the step at all. Otherwise it records nothing,
 * and the model makes the step and calls like_previous as usual. */
typedef ts_status (*ts_hook_derive_fn)(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag,
                                       float factor, bool *done);

/* One step of a group (ts_hook_group_fn). relu: the step is the one before
 * it through ReLU, as ts_hook_like_fn with op TS_OP_RELU, factor 1 and of
 * NULL, but not made yet: its memory still holds the step before. */
typedef struct ts_hook_step {
    const char *name;
    ts_op op;
    const ts_tensor *t;
    ts_tag tag;
    bool relu;
} ts_hook_step;

#define TS_HOOK_GROUP_MAX 8

/* Asked, when set, with up to TS_HOOK_GROUP_MAX steps the model would
 * otherwise hand over one by one, in order, whose values are all in memory
 * now or (a relu step) follow from it: the FFN's hidden layer and its ReLU.
 * A hook that records them all (a trace writer reading hidden's memory once
 * for the statistics of both) sets *done, and the model hands none of them
 * over; it makes the ReLU afterwards. Otherwise the hook records nothing. */
typedef ts_status (*ts_hook_group_fn)(void *ctx, const ts_hook_step *steps, int n, bool *done);

/* Called, when set, with a step's memory before anyone sees the step: an
 * experiment's chance to change its values (zero a head, patch in another
 * run's values) so that every later step reads the edited ones. Sets *edited
 * when it changed any value. Never called for parameters or the input. The
 * model runs step by step when an edit is set (no fused shortcut skips a
 * step), and the cost of an unset edit is one test per step. */
typedef ts_status (*ts_hook_edit_fn)(void *ctx, const char *name, ts_op op, ts_tensor *t, ts_tag tag, bool *edited);

/* Asked, when set, whether the edit may change the step named so (with
 * edit_ctx): the model makes steps one by one (no fused shortcut) exactly
 * where it answers yes, and runs fused elsewhere. Unset: every step is made
 * one by one while an edit is set. */
typedef bool (*ts_hook_touches_fn)(void *ctx, const char *name);

/* Told, when set, that t's memory was just changed outside the step that
 * made it (an edit): a hook that remembers what it saw by memory address (a
 * trace writer's statistics and views) forgets it, so the edited step and
 * every later one are recorded as they are, never as they were. */
typedef void (*ts_hook_overwritten_fn)(void *ctx, const ts_tensor *t);

typedef struct ts_hook {
    ts_hook_fn fn; /* NULL: no hook, nothing is called */
    void *ctx;
    ts_hook_like_fn like_previous; /* optional */
    ts_hook_derive_fn derive_next; /* optional */
    ts_hook_group_fn group;        /* optional */
    ts_hook_overwritten_fn overwritten; /* optional: with ctx */
    ts_hook_edit_fn edit;          /* optional: experiments (include/tscope/experiment.h) */
    ts_hook_touches_fn touches;    /* optional: with edit_ctx */
    void *edit_ctx;
} ts_hook;

/* Whether the hook edits steps: then the model computes every step where a
 * hook can see it, and offers none ahead or in a group. */
static inline bool ts_hook_edits(const ts_hook *hook) { return hook && hook->edit; }

/* Whether the hook's edit may change the step named so (ts_hook_touches_fn). */
static inline bool ts_hook_edit_touches(const ts_hook *hook, const char *name) {
    return hook && hook->edit && (!hook->touches || hook->touches(hook->edit_ctx, name));
}

/* Whether an edit of a step so handed over can reach what follows: never a
 * parameter, the input, or the padding a forward is given, handed over as
 * 0/1 for a reader (op mask, plain tag: the attention masks are made from
 * the padding itself). Experiments refuse edits of the others up front. */
static inline bool ts_hook_step_editable(ts_op op, ts_tag tag) {
    return op != TS_OP_PARAM && op != TS_OP_INPUT && !(op == TS_OP_MASK && tag == TS_TAG_PLAIN);
}

/* Let the hook's edit change the step (ts_hook_edit_fn); when it did, the
 * recording side is told first (ts_hook_overwritten_fn), and the step must
 * then be handed over as a plain step, never as like an earlier one. */
static inline ts_status ts_hook_edit_step(const ts_hook *hook, const char *name, ts_op op, const ts_tensor *t,
                                          ts_tag tag, bool *edited) {
    *edited = false;
    if (!hook || !hook->edit || !t->data || !ts_hook_step_editable(op, tag)) return TS_OK;
    ts_tensor w = *t;
    ts_status st = hook->edit(hook->edit_ctx, name, op, &w, tag, edited);
    if (!st && *edited && hook->fn && hook->overwritten) hook->overwritten(hook->ctx, t);
    return st;
}

/* Whether multiplying by factor keeps every float as it was but for scale (a
 * positive power of two): then a like step's statistics follow from the
 * earlier step's and a trace stores it as a view (unless factor is so far
 * from 1 that the format's exponent cannot hold it). */
static inline bool ts_hook_exact_factor(float factor) {
    int e;
    return factor > 0 && isfinite(factor) && frexpf(factor, &e) == 0.5f;
}

/* Call the hook if there is one; TS_OK otherwise. */
static inline ts_status ts_hook_call(const ts_hook *hook, const char *name, ts_op op,
                                     const ts_tensor *t, ts_tag tag) {
    if (!hook || !hook->fn) return TS_OK;
    return hook->fn(hook->ctx, name, op, t, tag);
}

/* Before making a step that will be the previous one times factor: *done
 * when the hook recorded it without needing it made (ts_hook_derive_fn). */
static inline ts_status ts_hook_try_derive(const ts_hook *hook, const char *name, ts_op op, const ts_tensor *t,
                                           ts_tag tag, float factor, bool *done) {
    *done = false;
    if (!hook || !hook->fn || !hook->derive_next) return TS_OK;
    return hook->derive_next(hook->ctx, name, op, t, tag, factor, done);
}

/* Offer the hook a group of steps at once: *done when it recorded them all
 * (ts_hook_group_fn). */
static inline ts_status ts_hook_try_group(const ts_hook *hook, const ts_hook_step *steps, int n, bool *done) {
    *done = false;
    if (!hook || !hook->fn || !hook->group || n > TS_HOOK_GROUP_MAX) return TS_OK;
    return hook->group(hook->ctx, steps, n, done);
}

/* A step the model knows to be an earlier one times factor (see
 * ts_hook_like_fn): through like_previous when the hook has it. */
static inline ts_status ts_hook_call_like(const ts_hook *hook, const char *name, ts_op op,
                                          const ts_tensor *t, ts_tag tag, const ts_tensor *of, float factor) {
    if (!hook || !hook->fn) return TS_OK;
    if (hook->like_previous) return hook->like_previous(hook->ctx, name, op, t, tag, of, factor);
    return hook->fn(hook->ctx, name, op, t, tag);
}

#endif
