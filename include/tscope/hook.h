/* hook: the one place the model talks to the outside world.
 *
 * The model calls ts_hook_call(hook, name, op, tensor, tag) after every step it
 * computes. What happens then is the hook's business: write a trace, print
 * shapes, compare against a golden list, or nothing. The op table and the tags
 * are shared by the model, the trace format and the viewer, so a number on
 * disk means the same thing everywhere.
 */
#ifndef TSCOPE_HOOK_H
#define TSCOPE_HOOK_H

#include <math.h>
#include <stdbool.h>

#include "tscope/status.h"
#include "tscope/tensor.h"

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
    X(TS_OP_METRIC, "metric")

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
    X(TS_TAG_PARAM, "param")         /* a parameter */

#define TS_TAG_ENUM_ENTRY(e, name) e,
typedef enum ts_tag { TS_TAG_LIST(TS_TAG_ENUM_ENTRY) TS_TAG_COUNT } ts_tag;
#undef TS_TAG_ENUM_ENTRY

const char *ts_op_name(ts_op op);   /* "softmax"; "?" when out of range */
const char *ts_tag_name(ts_tag tag); /* "attn_weights"; "?" when out of range */

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

typedef struct ts_hook {
    ts_hook_fn fn; /* NULL: no hook, nothing is called */
    void *ctx;
    ts_hook_like_fn like_previous; /* optional */
    ts_hook_derive_fn derive_next; /* optional */
    ts_hook_group_fn group;        /* optional */
} ts_hook;

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
