/* model_impl: what model.c (parameters), model_forward.c (the steps) and
 * model_variants.c share. Private to src/model/ (and train/, whose forward
 * mirrors it); the public surface is model.h. */
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
    float *pe;       // (L, D) sinusoidal table, filled at init
    float *src_mask; // (B, S) 0 or -inf
    float *tgt_mask; // (B, T)
    float *mem_mask; // (B, S) cross-attention's keys, when the input sets them apart from src_mask
    float *pads;     // (B, L) a padding mask as 0/1, handed to the hook
    float *cls;      // (B, D) first token for the classifier
    float *logits;   // (B, L, V) or (B, n_labels)
} ts_model_acts;

/* Lay out the buffers; with base NULL only count. Returns the bytes needed. */
size_t ts_model_plan_acts(const ts_model *m, ts_model_acts *a, unsigned char *base);

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
