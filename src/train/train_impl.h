/* train_impl: the activations a training forward keeps, shared by train.c
 * (plan and forward) and train_backward.c. Private to src/.
 *
 * Every buffer is carved from the trainer's one block by tr_plan (first
 * counting, then pointing). Per layer, what the backward reads:
 *   each residual sublayer: the LayerNorm's out, mean, rstd and the residual
 *   sum `res` (post-LN: the norm's input; pre-LN: the sublayer's output);
 *   attention: the projections (qkv, or q and kv), the weights, the values;
 *   FFN: the hidden layer and the activation after dropout.
 * A sublayer's own output before the residual add is not kept: no backward
 * reads it, so it lives in one shared scratch buffer (fout).
 */
#ifndef TSCOPE_TRAIN_IMPL_H
#define TSCOPE_TRAIN_IMPL_H

#include "model/model_impl.h"
#include "tscope/train.h"

typedef struct tr_norm {
    float *out;        // (B, S, D)
    float *mean, *rstd; // (B, S)
} tr_norm;

typedef struct tr_attn {
    float *q;   // self: qkv (B, Sq, 3D), per head [q_h k_h v_h]; cross: q_proj (B, Sq, D)
    float *kv;  // cross: (B, Sk, 2D), per head [k_h v_h]; NULL for self-attention
    float *att; // (B, H, Sq, Sk) weights
    float *ctx; // (B, Sq, D) values, heads side by side (concat layout)
} tr_attn;

typedef struct tr_ffn {
    float *hidden; // (B, S, F) linear1's output (ReLU: already through the ReLU)
    float *act;    // (B, S, F) after activation and dropout: linear2's input
} tr_ffn;

typedef struct tr_sub {
    tr_norm norm;
    float *res;         // (B, S, D)
    uint64_t key;       // dropout on the sublayer's output
    uint64_t key_inner; // FFN: dropout after the activation
} tr_sub;

typedef struct tr_layer {
    const float *in; // (B, S, D) the layer's input, kept elsewhere
    tr_sub sub[3];   // encoder: attention, FFN; decoder: self, cross, FFN
    tr_attn attn[2]; // self, cross
    tr_ffn ffn;
} tr_layer;

typedef struct tr_embed {
    int32_t *ids;      // (B, S) a copy of the ids, or NULL for vectors
    const float *vecs; // (B, S, D) the given vectors, or NULL
    float *sum;        // (B, S, D) tokens (+ positions): the norm's input when learned
    tr_norm norm;      // learned positions only
    float *out;        // (B, S, D) the stack's input (may be vecs itself)
    uint64_t key;
    bool used;         // this forward went through it
} tr_embed;

typedef struct tr_acts {
    tr_embed src, tgt;
    tr_layer *enc, *dec;          // (layers), (dec_layers)
    tr_norm enc_norm, dec_norm;   // final norms
    const float *enc_out;         // (B, S, D) the memory
    const float *dec_out;         // (B, T, D)
    const float *enc_top, *dec_top; // the stacks' outputs before their final norms
    float dropout;                // the probability the last forward used
    bool memory_given;
    float *cls;                   // (B, D) first token after dropout (TS_HEAD_CLS)
    uint64_t cls_key;
    float *logits;                // (B, T or S, V) or (B, n_labels)
    float *src_mask, *tgt_mask;   // (B, S), (B, T): 0 or -inf
    float *mem_mask;              // (B, S) cross-attention's keys (ts_model_input's mem_pad)
    bool src_masked, tgt_masked, mem_masked;
    tr_attn lone;                 // TS_ARCH_ATTENTION
    float *lone_out;              // (B, S, D)
    float *fout;                  // (B, L, D) scratch: a sublayer's output
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
