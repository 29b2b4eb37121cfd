/* backward: every op of the Transformer as a forward/backward pair.
 *
 * llm.c's habit: `X_forward(out, cache..., in, params..., sizes)` computes the
 * op and keeps what its backward needs; `X_backward(din, dparams..., dout,
 * cache..., sizes)` ACCUMULATES into din and the parameter gradients with +=,
 * so a tensor used twice (a residual stream, tied embeddings) just receives
 * two contributions. The caller zeroes gradients explicitly (ts_train_zero_grad
 * or memset). Any gradient pointer may be NULL: that gradient is not computed.
 * The forwards are thin wrappers over kernels.h where one exists (GEMM,
 * softmax, LayerNorm), so training computes exactly what inference computes.
 *
 * Every backward is checked against central finite differences of a
 * double-precision reference forward in tests/test_backward.c.
 */
#ifndef TSCOPE_BACKWARD_H
#define TSCOPE_BACKWARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- linear: out = in @ w^T + b, as nn.Linear ------------------------------ */

/* out (N, O), in (N, I), w (O, I), b (O) or NULL. */
void ts_bwd_linear_forward(float *out, const float *in, const float *w, const float *b, int64_t N, int I, int O);
/* din (N, I) += dout @ w; dw (O, I) += dout^T @ in; db (O) += sum over rows of dout. */
void ts_bwd_linear_backward(float *din, float *dw, float *db, const float *dout, const float *in, const float *w,
                            int64_t N, int I, int O);

/* ---- LayerNorm over the last dim ------------------------------------------------ */

/* out, in (N, C); mean, rstd (N) kept for the backward; gamma, beta (C). */
void ts_bwd_layernorm_forward(float *out, float *mean, float *rstd, const float *in, const float *gamma,
                              const float *beta, int64_t N, int C, float eps);
/* din (N, C), dgamma, dbeta (C) += ...; in, mean, rstd as the forward left them. */
void ts_bwd_layernorm_backward(float *din, float *dgamma, float *dbeta, const float *dout, const float *in,
                               const float *gamma, const float *mean, const float *rstd, int64_t N, int C);

/* ---- activations ------------------------------------------------------------------ */

void ts_bwd_relu_forward(float *out, const float *in, int64_t n);
/* din += dout where in > 0 (in: the activation's input). */
void ts_bwd_relu_backward(float *din, const float *dout, const float *in, int64_t n);
/* The exact GELU, x * Phi(x), as torch's default (not the tanh approximation). */
void ts_bwd_gelu_forward(float *out, const float *in, int64_t n);
/* din += dout * (Phi(x) + x * phi(x)). */
void ts_bwd_gelu_backward(float *din, const float *dout, const float *in, int64_t n);

/* ---- dropout ------------------------------------------------------------------------ */

/* Inverted dropout with a counter-based mask: element i is dropped when
 * hash(key, i) < p and scaled by 1/(1-p) otherwise. The mask is never stored:
 * the backward regenerates it from the same key. out may be in. */
void ts_bwd_dropout_forward(float *out, const float *in, float p, uint64_t key, int64_t n);
void ts_bwd_dropout_backward(float *din, const float *dout, float p, uint64_t key, int64_t n);

/* ---- residual add -------------------------------------------------------------------- */

void ts_bwd_residual_forward(float *out, const float *a, const float *b, int64_t n);
/* da += dout, db += dout. */
void ts_bwd_residual_backward(float *da, float *db, const float *dout, int64_t n);

/* ---- embeddings and learned positions ------------------------------------------------ */

/* out (N, D) = table[ids] * scale, table (V, D). */
void ts_bwd_embedding_forward(float *out, const float *table, const int32_t *ids, int64_t N, int D, float scale);
/* dtable[ids[i]] += dout[i] * scale: a scatter-add (ids repeat). */
void ts_bwd_embedding_backward(float *dtable, const float *dout, const int32_t *ids, int64_t N, int D, float scale);

/* out (B, S, D) = in + pos[s], pos (>= S, D): learned positions (or a fixed table). */
void ts_bwd_posenc_forward(float *out, const float *in, const float *pos, int B, int S, int D);
/* din += dout; dpos[s] += sum over the batch of dout[b, s]. */
void ts_bwd_posenc_backward(float *din, float *dpos, const float *dout, int B, int S, int D);

/* ---- scaled dot-product attention ------------------------------------------------------ */

/* Where per-head (S, hd) matrices live inside a larger buffer: element
 * (b, h, s, j) is at data[b*bstride + h*hstride + s*ld + j]. q, k and v are
 * usually column slices of one fused projection (no copies). */
typedef struct ts_bwd_heads {
    float *data;
    int64_t bstride, hstride;
    int ld;
} ts_bwd_heads;

/* weights (B, H, Sq, Sk) = softmax(q k^T / sqrt(hd) + key_mask + causal);
 * out (B, H, Sq, hd) = weights v. key_mask (B, Sk): 0 or -inf, may be NULL;
 * causal: query i sees keys j <= i. A query with every key masked gets all-zero
 * weights (not NaN). */
void ts_bwd_attention_forward(ts_bwd_heads out, float *weights, ts_bwd_heads q, ts_bwd_heads k, ts_bwd_heads v,
                              const float *key_mask, bool causal, int B, int H, int Sq, int Sk, int hd);
/* The whole backward: dq, dk, dv += ...; dweights (B, H, Sq, Sk) is scratch
 * that ends holding the gradient of the pre-softmax scores. Masked positions
 * need no mask here: their weights are 0, so their gradients are too. */
void ts_bwd_attention_backward(ts_bwd_heads dq, ts_bwd_heads dk, ts_bwd_heads dv, float *dweights,
                               ts_bwd_heads dout, const float *weights, ts_bwd_heads q, ts_bwd_heads k,
                               ts_bwd_heads v, int B, int H, int Sq, int Sk, int hd);
/* The same in three steps, so a tracer can see the gradient of the weights:
 * 1. dweights = dout v^T (written, not accumulated), dv += weights^T dout; */
void ts_bwd_attention_backward_values(ts_bwd_heads dv, float *dweights, ts_bwd_heads dout, const float *weights,
                                      ts_bwd_heads v, int B, int H, int Sq, int Sk, int hd);
/* 2. softmax: dscores = w * (dw - sum_j dw_j w_j) per row (rows, cols); may run
 *    in place (dscores == dweights), so it writes rather than accumulates; */
void ts_bwd_softmax_backward(float *dscores, const float *dweights, const float *weights, int64_t rows, int cols);
/* 3. dq += dscores k / sqrt(hd), dk += dscores^T q / sqrt(hd). */
void ts_bwd_attention_backward_scores(ts_bwd_heads dq, ts_bwd_heads dk, const float *dscores, ts_bwd_heads q,
                                      ts_bwd_heads k, int B, int H, int Sq, int Sk, int hd);

/* ---- cross-entropy, as torch.nn.CrossEntropyLoss(ignore_index, label_smoothing) ---- */

/* Mean over the rows whose label is not ignore_index of
 * -sum_v q_v log softmax(logits)_v, q = (1 - smoothing) onehot(label) + smoothing / V.
 * logits (N, V), labels (N). *n_valid (may be NULL) gets the rows counted.
 * Returns 0 when every row is ignored. */
double ts_bwd_cross_entropy_forward(const float *logits, const int32_t *labels, int64_t N, int V, int ignore_index,
                                    float smoothing, int64_t *n_valid);
/* dlogits (N, V) += dloss * (softmax(logits) - q) / n_valid on counted rows. */
void ts_bwd_cross_entropy_backward(float *dlogits, float dloss, const float *logits, const int32_t *labels,
                                   int64_t N, int V, int ignore_index, float smoothing);

#endif
