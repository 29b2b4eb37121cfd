/* model_pass: what one forward pass carries besides its arithmetic.
 *
 * model_forward.c writes the model's steps as arithmetic: each step is
 * computed, handed to the hook, and only then read by the next. Everything
 * else a pass needs lives behind this small interface (model_pass.c):
 *   - the pass's context (fwd): the model, its buffers, the hook, and the
 *     mode (a dry run counts shapes only; training keeps activations for the
 *     backward; decoding reads and appends a key/value cache);
 *   - handing a step to the hook (fwd_emit and its cheaper forms), the one
 *     place an experiment's edit changes a step, and the shapes table;
 *   - where each value of a block goes (fwd_block_at): its own kept buffer
 *     when training, the shared scratch otherwise, the cache when decoding.
 * Private to src/model/. */
#ifndef TSCOPE_MODEL_PASS_H
#define TSCOPE_MODEL_PASS_H

#include <string.h>

#include "model_impl.h"

/* ---- the pass ------------------------------------------------------------------ */

typedef struct fwd {
    ts_model *m;
    const ts_model_config *c;
    ts_model_acts *a;
    const ts_hook *hook;
    bool dry;   // shapes only: no data, nothing computed
    bool watch; // someone sees every step (a dry run, a hook that records): compute them one by one
    bool train; // the model is in training mode (dropout on)
    float p;    // dropout probability in effect (0 unless training)
    int B, D, H, hd;
    int KV;      // key/value heads (H, or fewer shared by groups of query heads)
    int Q;       // H * hd: the width of q and of the attention values
    int S, T;    // positions of this pass: source (or the new ones when decoding), target
    int threads; // the kernels' thread count, for the loops here
    bool par;    // enough work per pass to be worth a parallel region
    double flops;
    ts_model_summary *sum;
    const float *row_mask; // (B, S) -inf at pad queries while the encoder runs with mask padding-both
    const float *mem_mask; // (B, S) the memory's padded keys for cross-attention, or NULL
    ts_kept *keep;         // training: where each activation the backward reads goes, or NULL
    ts_kv_cache *cache;    // decoding: keys and values of positions [0, pos0), or NULL
    int pos0;              // decoding: the first new position
    int64_t edits;         // steps the hook's edit has changed so far: what follows reads them
} fwd;

void fwd_setup(fwd *f, ts_model *m, ts_model_acts *a, const ts_hook *hook);

/* Whether the steps prefix.leaf (leaves: a NULL-ended list) must be made one
 * by one: someone watches every step, or an edit may change one of them. */
bool fwd_watches(const fwd *f, const char *prefix, const char *const *leaves);

/* A view of `data` (NULL in a dry run) with the given shape; row-major unless
 * strides are given. Built by hand so a dry run does no pointer arithmetic. */
static inline ts_tensor view(float *data, int rank, const int64_t *shape, const int64_t *stride) {
    ts_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.rank = rank;
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        t.shape[d] = shape[d];
        t.stride[d] = stride ? stride[d] : s;
        s *= shape[d];
    }
    return t;
}

static inline ts_tensor view3(const float *data, int64_t a, int64_t b, int64_t c) {
    return view((float *)data, 3, (int64_t[]){a, b, c}, NULL);
}

/* p + n, but NULL stays NULL (a dry run has no buffers). */
static inline float *at(float *p, int64_t n) { return p ? p + n : NULL; }
static inline const float *cat(const float *p, int64_t n) { return p ? p + n : NULL; }

/* ---- handing steps to the hook (model_pass.c) --------------------------------------
 *
 * Every step of every pass reaches the hook through fwd_emit_like: it names
 * the step (prefix.leaf), lets an experiment's edit change it first (and
 * counts f->edits, so a step made from others knows to make itself again),
 * and calls the hook. A step can be handed over as
 *   - a view (reshape, permute, chunk: its tensor carries strides, no copy),
 *   - an alias (`alias`: the tensor was already traced under another name),
 *   - "like" another step (`factor`: every value is that step's times factor,
 *     see ts_hook_like_fn),
 *   - offered ahead (fwd_offer_ahead: a hook may record it from what it holds,
 *     and the model may leave it unmade) or as a group (fwd_offer_group: two
 *     steps read from one memory at once).
 * A hook without derive_next or group declines the offers and sees every
 * step made and handed over one by one; an editing hook is offered neither. */
ts_status fwd_emit_like(fwd *f, const char *prefix, const char *leaf, ts_op op, const ts_tensor *t, ts_tag tag,
                        bool alias, const ts_tensor *of, float factor);
ts_status fwd_emit(fwd *f, const char *prefix, const char *leaf, ts_op op, const ts_tensor *t, ts_tag tag,
                   bool alias);
ts_status fwd_offer_ahead(fwd *f, const char *prefix, const char *leaf, ts_op op, const ts_tensor *t, ts_tag tag,
                          float factor, bool *done);
ts_status fwd_offer_group(fwd *f, const char *prefix, const ts_hook_step *leaves, int n, bool *done);

/* Close a module for the shapes table: its output, its parameters (those whose
 * state_dict names start with param_prefix) and the matmul flops since flops0. */
ts_status fwd_module_done(fwd *f, const char *name, const char *param_prefix, const ts_tensor *out, double flops0);

/* ---- the steps' descriptors: names, weights, and where the values go ------------- */

/* One LayerNorm. `in_op`: the op that made its input; `in_traced`: the input
 * was traced already (a pre-LN block's input), so it is handed over as an alias. */
typedef struct norm_step {
    const char *name;         // "encoder.layers.0.norm1"
    const char *params;       // "encoder.layers.0.norm1."
    const ts_norm_weights *w;
    float eps;
    ts_op in_op;
    bool in_traced;
    float *out, *mean, *rstd; // (B, S, D), (B, S), (B, S); out may be in
} norm_step;

/* Where one of q, k, v lives: element (b, h, s, j) at
 * base + b*bstride + h*hstride + s*ld + j. */
typedef struct heads_at {
    const float *base;
    int64_t bstride, hstride;
    int ld;
} heads_at;

/* One attention sublayer: its names, weights, mask and buffers, and (filled
 * by its projections) where its q, k and v are. */
typedef struct attn_step {
    const char *name;           // "encoder.layers.0.self_attn"
    const char *params;         // "encoder.layers.0.self_attn." (cross: "...multihead_attn.")
    const ts_attn_weights *w;
    const float *key_mask;      // (B, Sk) 0 or -inf, or NULL
    bool causal;
    int din;                    // the input's width (D, or a lone attention's in_dim)
    const float *mem;           // cross-attention: the memory (B, Sk, D)
    int Sk;                     // cross-attention: the memory's positions
    ts_kept_attn buf;           // where the projections, weights and values go
    float *cache_k, *cache_v;   // decoding: this layer's cached keys and values (capacity, D), or NULL
    /* set by the projections, read by attention() and the output projection */
    heads_at q, k, v;
    int Sq;                     // query positions (Sk: key positions, after the cache)
    double flops0;              // the module's flops before it began
} attn_step;

/* One feed-forward sublayer. */
typedef struct ffn_step {
    const char *name;    // "encoder.layers.0.ffn"
    const char *params;  // "encoder.layers.0.linear"
    const ts_ffn_weights *w;
    ts_kept_ffn buf;     // hidden and act: one buffer unless the backward keeps GELU's input
    uint64_t *key;       // where the inner dropout's key goes
} ffn_step;

/* The residual around sublayer k: its norm (before the sublayer in pre-LN,
 * after the sum in post-LN), the sublayer's output, the sum, and what the
 * backward keeps of it. */
typedef struct residual_step {
    norm_step norm;
    float *sub;          // (B, S, D) the sublayer's output before dropout and the add
    float *sum;          // (B, S, D) x + dropout(sub)
    ts_kept_sub *kept;   // training, or NULL
    uint64_t key_inner;  // the FFN's inner dropout key, when it has one
} residual_step;

/* One layer of a stack: names and every step's place. */
typedef struct block {
    ts_layer_names nm;
    int S;                   // the stream's positions
    residual_step res[3];    // encoder: attention, FFN; decoder: self, cross, FFN
    attn_step attn[2];       // self, cross
    ffn_step ffn;
    ts_kept_layer *kept;     // training, or NULL
} block;

/* Layer i of a self-attention stack (an encoder's, or a GPT's decoder.layers)
 * writing its output to `out`: names, buffers, masks and the cache. */
void fwd_self_attn_block(fwd *f, block *b, int i, const ts_self_attn_layer_weights *w, const float *in, float *out);

/* Layer i of the encoder-decoder's decoder, over the memory mem (B, S, D). */
void fwd_cross_attn_block(fwd *f, block *b, int i, const ts_cross_attn_layer_weights *w, const float *mem, const float *in,
                          float *out);

/* The buffers of an attention when nothing is kept: q, k, v and the scores
 * in the scratch area, the values in ctx. */
ts_kept_attn fwd_scratch_attn(const fwd *f, bool cross, int Sq, int Sk);

/* The key padding of the encoder's self-attention: none with --mask none
 * (cross-attention still hides the source's pads). */
const float *fwd_enc_key_mask(const fwd *f);

/* Decoding: the new positions' keys and values (k, v: S rows) join the
 * cache at pos0..; *ck and *cv then read every cached position. */
void fwd_cache_append(fwd *f, const attn_step *s, int S, heads_at *ck, heads_at *cv);

#endif
