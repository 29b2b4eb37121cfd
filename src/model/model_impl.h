/* model_impl: what model.c (parameters), model_forward.c (the steps),
 * model_plan.c (their buffers), model_decode.c and model_variants.c share. Private to src/model/ (and
 * src/train/, which runs the same forward keeping its activations and walks
 * them backward); the public surface is model.h. */
#ifndef TSCOPE_MODEL_IMPL_H
#define TSCOPE_MODEL_IMPL_H

#include "tscope/model.h"

#if defined(_OPENMP)
#define TS_MODEL_PRAGMA_(x) _Pragma(#x)
#define TS_MODEL_OMP(x) TS_MODEL_PRAGMA_(omp x)
#else
#define TS_MODEL_OMP(x)
#endif

/* The activation buffers of one forward pass, carved from the arena once.
 * L = max(S, T). Nothing else is allocated while the model runs. */
typedef struct ts_model_acts {
    float *x;        // (B, S, D) encoder stream, then the decoder's memory
    float *y;        // (B, T, D) decoder stream
    float *tmp;      // (B, L, D) a sublayer's output, then the residual sum
    float *ctx;      // (B, L, D) attention values in concat layout (B, L, H, hd)
    float *big;      // scratch: qkv + scores, q + kv + scores, or the FFN hidden
    size_t big_floats;
    float *mean;     // (B, L) LayerNorm statistics
    float *rstd;     // (B, L)
    float *std;      // (B, L) 1/rstd, for the trace
    float *ids;      // (B, L) token ids as floats, for the trace
    float *types;    // (B, L) token types as floats, for the trace (BERT), or NULL
    float *pe;       // (L, D) sinusoidal table, filled at init
    float *src_mask; // (B, S) 0 or -inf
    float *tgt_mask; // (B, T)
    float *mem_mask; // (B, S) cross-attention's keys, when the input sets them apart from src_mask
    float *pads;     // (B, L) a padding mask as 0/1, handed to the hook
    float *cls;      // (B, D) first token for the classifier
    float *logits;   // (B, L, V) or (B, n_labels)
    float *rope;     // (L, r) RoPE's cos then sin (r/2 each) at this pass's positions, or NULL
} ts_model_acts;

/* A self-attention's projections per query row: q, k and v (3D, or with
 * q, k and v apart H*hd + 2 KV*hd), and, with RoPE, their rotated q and k. */
int64_t ts_model_qkv_floats(const ts_model_config *c);
int64_t ts_model_rot_floats(const ts_model_config *c);

/* Lay out the buffers (model_plan.c); with base NULL only count. Returns the
 * bytes needed. */
size_t ts_model_plan_acts(const ts_model *m, ts_model_acts *a, unsigned char *base);

/* The same for a pass of `rows` new positions of batch 1 reading up to
 * `keys` cached keys (decoding with a cache): no target stream, no table of
 * sinusoids. */
size_t ts_model_plan_decode_acts(const ts_model_config *c, int rows, int keys, ts_model_acts *a,
                                 unsigned char *base);

/* ---- what a training forward keeps for the backward --------------------------
 *
 * ts_model_forward_keep runs the one forward (model_forward.c) with every
 * activation the backward reads written to these buffers instead of the
 * shared scratch; model_plan.c lays them out (ts_model_plan_backprop), src/train/
 * carves them from its block and walks them backward (train_backward.c). Per layer:
 *   each residual sublayer: the LayerNorm's out, mean, rstd and the residual
 *   sum `res` (post-LN: the norm's input; pre-LN: the sublayer's output);
 *   attention: the projections (qkv, or q and kv), the weights, the values;
 *   FFN: the hidden layer and the activation after dropout.
 * A sublayer's own output before the residual add is not kept: no backward
 * reads it, so it lives in one shared scratch buffer (fout). */
typedef struct ts_kept_norm {
    float *out;         // (B, S, D)
    float *mean, *rstd; // (B, S)
} ts_kept_norm;

typedef struct ts_kept_attn {
    float *q;   // self: qkv (B, Sq, 3D), per head [q_h k_h v_h]; cross: q_proj (B, Sq, D)
    float *kv;  // cross: (B, Sk, 2D), per head [k_h v_h]; NULL for self-attention
    float *att; // (B, H, Sq, Sk) weights
    float *ctx; // (B, Sq, D) values, heads side by side (concat layout)
    float *rot; // RoPE: q and k rotated, (B, Sq, H*hd) then (B, Sq, KV*hd); NULL otherwise
} ts_kept_attn;

typedef struct ts_kept_ffn {
    float *hidden; // (B, S, F) linear1's output (ReLU: already through the ReLU);
                   // gated: (2, B, S, F) the gate's input, then up
    float *act;    // (B, S, F) after activation (gated: times up) and dropout: linear2's input
} ts_kept_ffn;

typedef struct ts_kept_sub {
    ts_kept_norm norm;
    float *res;         // (B, S, D)
    uint64_t key;       // dropout on the sublayer's output
    uint64_t key_inner; // FFN: dropout after the activation
} ts_kept_sub;

typedef struct ts_kept_layer {
    const float *in;      // (B, S, D) the layer's input, kept elsewhere
    ts_kept_sub sub[3];   // encoder: attention, FFN; decoder: self, cross, FFN
    ts_kept_attn attn[2]; // self, cross
    ts_kept_ffn ffn;
} ts_kept_layer;

typedef struct ts_kept_embed {
    int32_t *ids;      // (B, S) a copy of the ids, or NULL for vectors
    const float *vecs; // (B, S, D) the given vectors, or NULL
    float *sum;        // (B, S, D) tokens (+ positions): the norm's input when learned
    ts_kept_norm norm; // learned positions only
    float *out;        // (B, S, D) the stack's input (may be vecs itself)
    uint64_t key;
    bool used;         // this forward went through it
} ts_kept_embed;

typedef struct ts_kept {
    ts_kept_embed src, tgt;
    ts_kept_layer *enc, *dec;        // (layers), (dec_layers)
    ts_kept_norm enc_norm, dec_norm; // final norms
    const float *enc_out;            // (B, S, D) the memory
    const float *dec_out;            // (B, T, D)
    const float *enc_top, *dec_top;  // the stacks' outputs before their final norms
    float dropout;                   // the probability this forward used
    bool memory_given;
    float *cls;                      // (B, D) first token after dropout (TS_HEAD_CLS)
    uint64_t cls_key;
    float *logits;                   // (B, T or S, V) or (B, n_labels)
    ts_kept_attn lone;               // TS_ARCH_ATTENTION
    float *lone_out;                 // (B, S, D)
    float *fout;                     // (B, L, D) scratch: a sublayer's output
    uint64_t stream;                 // this forward's dropout stream (the caller sets it)
    uint64_t site;                   // dropout sites drawn so far
} ts_kept;

/* What a training step needs beside the parameters: the activations the
 * forward keeps and the backward's scratch; src/train/ carves them. */
typedef struct ts_backprop_bufs {
    ts_kept k;        // what the forward (ts_model_forward_keep) keeps
    /* backward scratch */
    float *g0, *g1;   // (B, L, D) the stream's gradient, ping-pong
    float *gsub;      // (B, L, D) at a sublayer's output
    float *gn;        // (B, L, D) at a pre-LN norm's output
    float *gctx;      // (B, L, D)
    float *gqkv;      // max(B L 3D, B T D + B S 2D)
    float *gatt;      // (B, H, Sq, Sk), the largest
    float *gh1, *gh2; // (B, L, F)
    float *gmem;      // (B, S, D)
    float *gsrc;      // (B, S, in_dim) vector input
    float *gtgt;      // (B, T, D)
    float *gout;      // like the output
    int64_t out_numel;
    float *gcls;      // (B, D)
    float *rope;      // (L, r) RoPE's cos then sin, made again by the backward
} ts_backprop_bufs;

/* Lay out a's buffers for m (batch and lengths as m was built) beside the
 * forward's own plan (model_plan.c); with base NULL only count. Returns the
 * bytes. The layer arrays a->k.enc and a->k.dec must already exist. */
size_t ts_model_plan_backprop(const ts_model *m, ts_backprop_bufs *a, unsigned char *base);

/* The gradients ts_model_backward leaves at the model's inputs, or NULL
 * where there are none (token ids, a memory that was not given). */
typedef struct ts_input_grads {
    float *src;    // (B, S, in_dim) given vectors
    float *tgt;    // (B, T, D) the decoder's vectors
    float *memory; // (B, S, D) the memory cross-attention read
} ts_input_grads;

/* The backward pass (model_backward.c): from gtop, the gradient at the
 * model's output (its logits, or the last stack's output without a head),
 * back through the steps the last ts_model_forward_keep into a->k ran, adding
 * every parameter's gradient into gw (zeroed by the caller). hook (may be
 * NULL) sees each activation's gradient as grad.<step>. */
ts_status ts_model_backward(const ts_model *m, ts_backprop_bufs *a, ts_model_weights *gw, const float *gtop,
                            const ts_hook *hook, ts_input_grads *d);

/* The forward pass of ts_model_forward, keeping every activation the backward
 * reads in `keep` (dropout with probability m->training ? dropout : 0, keys
 * drawn from keep->stream). hook may be NULL; *out is the model's output. */
ts_status ts_model_forward_keep(ts_model *m, const ts_model_input *in, const ts_hook *hook, ts_kept *keep,
                                ts_tensor *out);

/* The step names of layer i of a stack ("encoder", "decoder") and its
 * parameters' state_dict prefixes, for the forward and the backward. */
typedef struct ts_layer_names {
    char p[64];                   // "decoder.layers.0"
    char self[80], self_p[80];    // "....self_attn", "....self_attn."
    char cross[80], cross_p[80];  // "....cross_attn", "....multihead_attn."
    char ffn[80], lin[80];        // "....ffn", "....linear"
    char norm[3][80], norm_p[3][80]; // "....norm1", "....norm1."
} ts_layer_names;
void ts_layer_names_of(ts_layer_names *nm, const char *stack, int i);

/* Decoding: the n new positions ids (batch 1) from kv->len on, over the
 * keys and values cached before them, with a's buffers
 * (ts_model_plan_decode_acts); appends theirs to kv (the caller advances
 * kv->len). model_decode.c owns the cache. */
ts_status ts_model_forward_cached(ts_model *m, ts_kv_cache *kv, ts_model_acts *a, const int32_t *ids, int n,
                                  const ts_hook *hook, ts_tensor *out);

/* RoPE's angles at positions pos0 .. pos0 + S - 1 (model_forward.c): table
 * (S, r/2) of cos, then (S, r/2) of sin, for the r rotated dims of a head. */
void ts_model_rope_table(float *table, const ts_model_config *c, int pos0, int S);

/* ---- variants: the computations model_forward.c calls (model_variants.c) ---- */

/* 1/sqrt(hd), or 1 with TS_VARIANT_NO_SCALE. */
float ts_model_attn_scale(const ts_model_config *c, int hd);

/* Seed 000's reshape without the permute back: ctx (B, S, H, hd), as the
 * model writes the values, is rewritten in place so that each batch element's
 * memory reads as the values (H, S, hd) flattened, which is what reshaping
 * (B, H, S, hd) straight to (B, S, D) shows. scratch holds B*S*H*hd floats. */
void ts_model_unpermuted_concat(float *ctx, float *scratch, int B, int S, int H, int hd);

/* Seed 001's LayerNorm over the last two dims of (S, B, D), on our (B, S, D):
 * mean and std (S) per position over all B*D values (biased variance, std =
 * sqrt(var + eps)); y (B, S, D) = (in - mean) / std, or NULL; out = gamma[d] *
 * that + beta[d] (out may be in; y may not). */
void ts_model_layernorm_two_dims(float *out, float *y, float *mean, float *stdv, const float *in,
                                 const float *gamma, const float *beta, int B, int S, int D, float eps);

/* Seed 001's numpy softmax, in place over rows of n: exp(x) / sum(exp(x)),
 * nothing subtracted first. In a row with a score above ~88.7 exp overflows
 * to inf and so does the sum: that score's weight is NaN (inf / inf), the
 * others 0, as in the seed; a row whose every exp underflows is 0 / 0. */
void ts_model_softmax_unshifted(float *x, int64_t rows, int n);

#endif
