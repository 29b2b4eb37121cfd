/* train_impl: the trainer's memory, shared by train.c (plan, forward, step)
 * and train_backward.c. Private to src/.
 *
 * Every buffer is carved from the trainer's one block by tr_plan (first
 * counting, then pointing): the activations the forward keeps (ts_kept,
 * model_impl.h, which says what the backward reads) and the backward's
 * scratch.
 */
#ifndef TSCOPE_TRAIN_IMPL_H
#define TSCOPE_TRAIN_IMPL_H

#include "model/model_impl.h"
#include "tscope/train.h"

/* The forward's kept activations (model_impl.h) under the names the
 * backward reads them by. */
typedef ts_kept_norm tr_norm;
typedef ts_kept_attn tr_attn;
typedef ts_kept_ffn tr_ffn;
typedef ts_kept_sub tr_sub;
typedef ts_kept_layer tr_layer;
typedef ts_kept_embed tr_embed;

typedef struct tr_acts {
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
} tr_acts;

/* Lay out the block: with base NULL only count. Returns the bytes. The layer
 * arrays of a must already exist. */
size_t tr_plan(const ts_model *m, tr_acts *a, unsigned char *base);

#endif
