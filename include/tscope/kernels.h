/* kernels: the numeric work, forward and backward, and the optimizer's
 * update; SIMD paths chosen at run time, each with a scalar reference.
 * Nothing here knows about the model, files or windows.
 */
#ifndef TSCOPE_KERNELS_H
#define TSCOPE_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tscope/core.h"

/* kernels: the arithmetic under the model, fast and checked.
 *
 * Every kernel has a scalar reference that is always compiled; ts_kernels_init
 * picks the fastest path the CPU supports (AVX-512, AVX2+FMA, NEON; SIMD128
 * in the WebAssembly build) unless TSCOPE_KERNELS=scalar|avx2|avx512|neon
 * forces one. Threads come from
 * TSCOPE_THREADS (default: all cores) or ts_kernels_set_threads.
 * Matrices are row-major; a leading dimension is the distance in floats
 * between the starts of two rows as stored.
 */

/* TS_ISA_WASM is WebAssembly's SIMD128, in `make wasm`'s build only. */
typedef enum ts_isa { TS_ISA_SCALAR, TS_ISA_AVX2, TS_ISA_AVX512, TS_ISA_NEON, TS_ISA_WASM, TS_ISA_COUNT } ts_isa;

/* Read TSCOPE_KERNELS and TSCOPE_THREADS and choose the path. Safe to call
 * more than once; an unknown or unsupported TSCOPE_KERNELS is an error. */
ts_status ts_kernels_init(void);
ts_isa ts_kernels_isa(void);
const char *ts_isa_name(ts_isa isa); /* "scalar", "avx2", "avx512", "neon", "simd128" */
bool ts_isa_supported(ts_isa isa);   /* compiled in and supported by this CPU */
ts_status ts_kernels_force(ts_isa isa);
/* n <= 0: all cores; always 1 when built with NO_OMP=1. ts_kernels_init resets
 * the count from TSCOPE_THREADS, so a caller sets it after init. */
void ts_kernels_set_threads(int n);
int ts_kernels_threads(void);

/* How idle kernel threads wait. OpenMP's threads spin for a while by
 * default, which on a busy machine takes the core their own team's late
 * thread needs: 2 threads then run slower than 1. A short spin before
 * sleeping (TS_KERNELS_WAIT, given to GNU OpenMP as GOMP_SPINCOUNT) keeps 2
 * threads ahead. OpenMP reads its environment once, as the program loads, so
 * a program sets it by starting itself again: ts_kernels_wait_env names the
 * variable and value to set, or returns false when the user set
 * OMP_WAIT_POLICY or GOMP_SPINCOUNT, or the build has no OpenMP (the POSIX
 * team sleeps on a condition variable). */
#define TS_KERNELS_WAIT_VAR "GOMP_SPINCOUNT"
#define TS_KERNELS_WAIT "10000"
bool ts_kernels_wait_env(const char **name, const char **value);
/* The wait in force, for benchmark headers: "GOMP_SPINCOUNT=10000",
 * "OMP_WAIT_POLICY=active", "the OpenMP runtime's default" or "POSIX threads". */
const char *ts_kernels_wait_policy(void);

/* The fp32 FMA peak of the chosen path on all kernel threads, in GFLOP/s:
 * the best of a few short loops of independent FMAs (about 0.1 s in all).
 * The yardstick of `tscope bench`. */
double ts_kernels_peak_gflops(void);

/* What to do to each element of C after the product. */
typedef enum ts_epilogue {
    TS_EPI_NONE,      /* C = alpha*op(A)op(B) + beta*C */
    TS_EPI_BIAS,      /* ... + bias[j] */
    TS_EPI_BIAS_RELU, /* relu(... + bias[j]) */
    TS_EPI_BIAS_GELU, /* gelu(... + bias[j]), the exact erf form as torch's default */
    /* These two take bias NULL for none (a Llama's gate has no bias). The
     * activation runs on each tile of C right after the micro-kernel stores
     * it (still in L1), with the very kernel ts_gelu_tanh / ts_silu run: the
     * numbers equal the unfused product-then-activation bit for bit. */
    TS_EPI_BIAS_GELU_TANH, /* gelu_tanh(... + bias[j]) */
    TS_EPI_BIAS_SILU,      /* silu(... + bias[j]) */
    TS_EPI_COUNT
} ts_epilogue;

/* C (M,N) = epilogue(alpha * op(A) (M,K) @ op(B) (K,N) + beta * C).
 * op(A) = A (M,K) stored with lda >= K, or A^T with A stored (K,M), lda >= M;
 * likewise B. bias (N) is used by the BIAS epilogues, else may be NULL.
 * beta == 0 means C is not read (it may hold NaN). */
void ts_gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A, int lda,
             const float *B, int ldb, float beta, float *C, int ldc, ts_epilogue epi, const float *bias);

/* ts_gemm over the first K of k_whole terms of each sum (k_whole >= K), added
 * up in the blocks the k_whole-long product uses: when the other terms are
 * zero (op(A)'s columns K.. of causal attention's weights), C equals that
 * whole product's bit for bit, except that a term 0 * Inf or 0 * NaN left
 * out gives no NaN. */
void ts_gemm_k_prefix(bool trans_a, bool trans_b, int M, int N, int K, int k_whole, float alpha, const float *A,
                      int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* One head of causal attention: query r (of Sq) is position Sk - Sq + r and
 * sees keys [0, Sk - Sq + r] (and not the padded ones of key_mask). */
typedef struct ts_attn_head {
    int Sq, Sk, hd;
    float alpha;                  // the scores' scale
    const float *q, *k, *v;       // (Sq, hd), (Sk, hd), (Sk, hd): rows ldq, ldk, ldv apart
    int64_t ldq, ldk, ldv;
    const float *key_mask;        // (Sk) 0 or -inf added to each row's scores, or NULL
    float *att;                   // (Sq, Sk) rows ldatt apart: the weights, or NULL: not kept (made in scratch)
    int64_t ldatt;
    float *ctx;                   // (Sq, hd) rows ldctx apart: the values
    int64_t ldctx;
} ts_attn_head;

/* Query rows [r0, ends[nb - 1]) of a causal head on the calling thread, by
 * blocks [r0, ends[0]), [ends[0], ends[1]), ...: each block's scores over
 * the keys its last row sees, the softmax (the rest of each row of att 0),
 * and its values over those keys, with the numbers of the gemm path (the
 * scores' ts_gemm, ts_softmax_rows, the values' ts_gemm_k_prefix with
 * k_whole Sk) bit for bit. Keys and values are packed once for all blocks.
 * Returns the rows with nothing to see, or -1 when it did nothing (a block
 * of TS_KERN_SMALL_M rows or fewer, a head wider than the gemm's K block,
 * no memory for the panels): then the gemm path must do it. */
int64_t ts_attn_causal(const ts_attn_head *h, int r0, const int *ends, int nb);

/* `batch` independent products; matrix i starts at A + i*stride_a etc.
 * For attention: (B*H) x [(S,hd) @ (hd,S)] and [(S,S) @ (S,hd)]. */
void ts_gemm_batched(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                     int lda, int64_t stride_a, const float *B, int ldb, int64_t stride_b, float beta,
                     float *C, int ldc, int64_t stride_c, int batch);

/* bfloat16: the top 16 bits of a float32, as big models' weights are stored.
 * Widening is exact; narrowing rounds to nearest even (a NaN stays a NaN). */
typedef uint16_t ts_bf16;
static inline float ts_bf16_to_f32(ts_bf16 h) {
    union { uint32_t u; float f; } v = {.u = (uint32_t)h << 16};
    return v.f;
}
ts_bf16 ts_f32_to_bf16(float x);
/* dst (n) = src (n) narrowed; the widened values back into src when
 * `round_src`, so the float32 copy holds exactly what the bf16 one does. */
void ts_bf16_from_f32(ts_bf16 *dst, float *src, int64_t n, bool round_src);
/* dst (n) = src (n) widened, on the kernel threads. */
void ts_bf16_to_f32_n(float *dst, const ts_bf16 *src, int64_t n);

/* A linear with bfloat16 weights: C (M,N) = epilogue(alpha * A (M,K) @ W^T +
 * beta * C), W (N,K) stored as bf16 with ldw >= K (nn.Linear's weight).
 * W's entries are widened to float32 as the GEMM packs them and summed in
 * float32: the result equals ts_gemm(false, true, ...) on W widened, bit for
 * bit, on every path (the packed panels are the same floats), except for a
 * few rows (M <= 4), which ts_gemm streams in another order of sums and
 * this always packs (the same within float rounding). */
void ts_gemm_bf16(int M, int N, int K, float alpha, const float *A, int lda, const ts_bf16 *W, int ldw,
                  float beta, float *C, int ldc, ts_epilogue epi, const float *bias);

/* The scalar reference of ts_gemm, always compiled, whatever path is chosen. */
void ts_gemm_ref(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc, ts_epilogue epi,
                 const float *bias);
/* ts_gemm_bf16's reference: W widened one entry at a time, sums in double. */
void ts_gemm_bf16_ref(int M, int N, int K, float alpha, const float *A, int lda, const ts_bf16 *W, int ldw,
                      float beta, float *C, int ldc, ts_epilogue epi, const float *bias);

/* Row softmax over `cols`, numerically stable. in and out (rows, cols) may be
 * the same buffer. mask (cols), if not NULL, is added to every row first
 * (0 or -inf for key padding). causal: row r may only see columns
 * c <= r + causal_offset, with r counted from the first row of this call (so
 * call once per (Sq, Sk) matrix when causal); hidden entries are exactly 0.
 * A row whose entries are all -inf becomes all zeros (not NaN); the number of
 * such rows is returned. */
int64_t ts_softmax_rows(float *out, const float *in, int64_t rows, int cols, const float *mask,
                        bool causal, int causal_offset);

/* One distribution over a vocabulary: probs (n) = softmax(logits /
 * temperature) over the entries >= floor (the others get exactly 0;
 * -INFINITY keeps every entry). Returns log Z, the log-sum-exp of the kept
 * logits / temperature, so -log p(v) = log Z - logits[v] / T. probs may be
 * NULL when only log Z is wanted. temperature > 0. Sampling, the lens, the
 * losses and every view of a next-token distribution use it. On the calling
 * thread, vectorised: exponentials in float summed by blocks in double
 * (within 1e-6 relative of the all-double reference); a row with a floor, a
 * NaN or an infinity is done all in double, where a NaN entry gets 0. */
double ts_softmax_vocab(float *probs, const float *logits, int64_t n, double temperature, float floor);

/* log(sum(exp(x))) over n entries, max-shifted, in double precision
 * (ts_softmax_vocab at temperature 1 without the probabilities). */
double ts_logsumexp(const float *x, int64_t n);

/* LayerNorm over the last dim: out = gamma * (x - mean) * rstd + beta, with
 * rstd = 1 / sqrt(var + eps) and the biased variance as PyTorch uses.
 * in, out (rows, cols); mean, rstd (rows), may be NULL; gamma, beta (cols),
 * may be NULL for 1 and 0. */
void ts_layernorm(float *out, float *mean, float *rstd, const float *in, const float *gamma,
                  const float *beta, int64_t rows, int cols, float eps);

void ts_add(float *out, const float *a, const float *b, int64_t n); /* out = a + b */
void ts_scale(float *out, const float *in, float s, int64_t n);      /* out = s * in */
void ts_relu(float *out, const float *in, int64_t n);
void ts_gelu(float *out, const float *in, int64_t n); /* exact: x * Phi(x) */
/* GELU's tanh form (PyTorch's approximate='tanh', GPT-2's gelu_new):
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
void ts_gelu_tanh(float *out, const float *in, int64_t n);
void ts_silu(float *out, const float *in, int64_t n); /* x * sigmoid(x) (SwiGLU's gate) */
void ts_mul(float *out, const float *a, const float *b, int64_t n); /* out = a * b, elementwise */

/* out (cols, rows) = in (rows, cols)^T with leading dims. */
void ts_transpose2d(float *out, int ldo, const float *in, int ldi, int rows, int cols);

/* backward: the gradient of every op of the Transformer.
 *
 * Each op's forward is the one inference runs (ts_gemm, ts_layernorm,
 * ts_gelu, ts_softmax_rows, ... above, called by the model's one forward
 * pass), so training computes exactly what inference computes; only
 * dropout, which inference never runs, and the loss have their forward here.
 * `X_backward(din, dparams..., dout, cache..., sizes)` reads what the forward
 * kept and ACCUMULATES into din and the parameter gradients with +=,
 * so a tensor used twice (a residual stream, tied embeddings) just receives
 * two contributions. The caller zeroes gradients explicitly (ts_train_zero_grad
 * or memset). Any gradient pointer may be NULL: that gradient is not computed.
 *
 * Every backward is checked against central finite differences of a
 * double-precision reference forward in tests/test_backward.c.
 */

/* ---- linear: out = in @ w^T + b, as nn.Linear ------------------------------ */

/* din (N, I) += dout @ w; dw (O, I) += dout^T @ in; db (O) += sum over rows of dout. */
void ts_bwd_linear_backward(float *din, float *dw, float *db, const float *dout, const float *in, const float *w,
                            int64_t N, int I, int O);

/* ---- LayerNorm over the last dim ------------------------------------------------ */

/* din (N, C), dgamma, dbeta (C) += ...; in, mean, rstd as the forward left them. */
void ts_bwd_layernorm_backward(float *din, float *dgamma, float *dbeta, const float *dout, const float *in,
                               const float *gamma, const float *mean, const float *rstd, int64_t N, int C);

/* ---- activations ------------------------------------------------------------------ */

/* din += dout where in > 0 (in: the activation's input). */
void ts_bwd_relu_backward(float *din, const float *dout, const float *in, int64_t n);
/* din += dout * (Phi(x) + x * phi(x)). */
void ts_bwd_gelu_backward(float *din, const float *dout, const float *in, int64_t n);
/* din += dout * d/dx of ts_gelu_tanh. */
void ts_bwd_gelu_tanh_backward(float *din, const float *dout, const float *in, int64_t n);

/* ---- dropout ------------------------------------------------------------------------ */

/* Inverted dropout with a counter-based mask: element i is dropped when
 * hash(key, i) < p and scaled by 1/(1-p) otherwise. The mask is never stored:
 * the backward regenerates it from the same key. out may be in. */
void ts_dropout(float *out, const float *in, float p, uint64_t key, int64_t n);
void ts_bwd_dropout_backward(float *din, const float *dout, float p, uint64_t key, int64_t n);

/* ---- residual add -------------------------------------------------------------------- */

/* da += dout, db += dout. */
void ts_bwd_residual_backward(float *da, float *db, const float *dout, int64_t n);

/* ---- embeddings and learned positions ------------------------------------------------ */

/* Of out (N, D) = table[ids] * scale, table (V, D), the model's token
 * embedding: dtable[ids[i]] += dout[i] * scale, a scatter-add (ids repeat). */
void ts_bwd_embedding_backward(float *dtable, const float *dout, const int32_t *ids, int64_t N, int D, float scale);

/* Of out (B, S, D) = in + pos[s] (learned positions): din += dout;
 * dpos[s] += sum over the batch of dout[b, s]. */
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

/* Of weights (B, H, Sq, Sk) = softmax(q k^T / sqrt(hd) + masks) and out
 * (B, H, Sq, hd) = weights v, as the model's attention computes them (ts_gemm,
 * ts_softmax_rows). The whole backward: dq, dk, dv += ...; dweights (B, H, Sq, Sk) is scratch
 * that ends holding the gradient of the pre-softmax scores. Head by head, each
 * start to finish while its (Sq, Sk) scratch is in cache. Masked positions
 * need no mask here: their weights are 0, so their gradients are too. */
void ts_bwd_attention_backward(ts_bwd_heads dq, ts_bwd_heads dk, ts_bwd_heads dv, float *dweights,
                               ts_bwd_heads dout, const float *weights, ts_bwd_heads q, ts_bwd_heads k,
                               ts_bwd_heads v, int B, int H, int Sq, int Sk, int hd);
/* The same for a causal head, where query i sees keys j <= Sk - Sq + i only
 * (the weights past that are 0, as the causal mask leaves them): each block of
 * queries' products cover the keys it sees, and each block of keys' the
 * queries that see them, so about half the work is skipped. dscores (B, H,
 * Sq, Sk) ends holding the gradient of the scores, 0 where a key is hidden. */
void ts_bwd_attention_backward_causal(ts_bwd_heads dq, ts_bwd_heads dk, ts_bwd_heads dv, float *dscores,
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

/* optim: Adam and AdamW, gradient clipping, and the learning-rate schedule.
 *
 * The optimizers work on flat float arrays: a model's parameter block and
 * the trainer's gradient block of the same layout (train.h), so one call
 * updates every parameter. The arithmetic follows torch.optim.Adam / AdamW
 * (PyTorch 1.13, single-tensor path) operation for operation:
 *     AdamW: p *= 1 - lr * wd                     (decoupled weight decay)
 *     Adam:  g += wd * p                          (L2 penalty in the gradient)
 *     m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
 *     p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 * tests/test_grad_parity.c checks two AdamW steps against torch.optim.AdamW.
 */

typedef enum ts_optim_kind { TS_OPTIM_ADAM, TS_OPTIM_ADAMW } ts_optim_kind;

typedef struct ts_optim_config {
    ts_optim_kind kind;
    float beta1, beta2, eps;
    float weight_decay;
} ts_optim_config;

/* PyTorch's defaults: betas (0.9, 0.999), eps 1e-8, weight decay 0 (Adam)
 * or 0.01 (AdamW). */
void ts_optim_config_default(ts_optim_config *c, ts_optim_kind kind);

typedef struct ts_optim {
    ts_optim_config cfg;
    int64_t n;     /* parameters */
    int64_t steps; /* steps taken (PyTorch's `step`) */
    float *m, *v;  /* (n) first and second moments, owned */
    uint8_t *decay; /* (n) 1 where weight decay applies, owned; NULL: everywhere */
} ts_optim;

ts_status ts_optim_init(ts_optim *o, const ts_optim_config *c, int64_t n);
void ts_optim_free(ts_optim *o);

/* Weight decay only where decay[i] is 1 (copied): GPT-2 and nanoGPT decay
 * the matrices and leave biases and LayerNorm gains alone. */
ts_status ts_optim_set_decay(ts_optim *o, const uint8_t *decay);

/* One update of params (n) from grads (n) at learning rate lr. grads is not
 * changed (Adam's L2 term is added on the fly). */
void ts_optim_step(ts_optim *o, float *params, const float *grads, float lr);

/* Global L2 norm of grads (n), in double. */
double ts_optim_grad_norm(const float *grads, int64_t n);

/* torch.nn.utils.clip_grad_norm_: when the norm exceeds max_norm, scale
 * grads by max_norm / (norm + 1e-6). Returns the norm before clipping.
 * max_norm <= 0 only measures. */
double ts_optim_clip(float *grads, int64_t n, float max_norm);

/* The learning rate at step t (counted from 1): with warmup > 0, linear
 * warm-up to `peak` over `warmup` steps, then peak * sqrt(warmup / t): the
 * paper's schedule d^-0.5 * min(t^-0.5, t * warmup^-1.5) scaled so its top
 * is `peak` (the paper's own peak is ts_optim_paper_peak). warmup 0:
 * constant. */
float ts_optim_lr(float peak, int warmup, int64_t t);

/* Warm-up then cosine decay, as GPT-2/3 and nanoGPT train: linear from
 * peak/warmup to peak over steps 1..warmup, then
 * floor + (peak - floor) * (1 + cos(pi * (t - warmup) / (total - warmup))) / 2,
 * reaching floor at t = total (and staying there after). */
float ts_optim_lr_cosine(float peak, float floor, int warmup, int64_t t, int64_t total);

/* The paper's peak learning rate d_model^-0.5 * warmup^-0.5. */
float ts_optim_paper_peak(int d_model, int warmup);

/* eig: the eigenvalues of a small real n x n matrix m (row-major, double),
 * by Hessenberg reduction and Francis double-shift QR (EISPACK's elmhes and
 * hqr). re[i] + i*im[i], n of them, in no particular order; a complex pair
 * comes as two entries. For the copying score of an attention head
 * (n = the head's width); O(n^3). */
ts_status ts_eigvals(const double *m, int n, double *re, double *im);

#endif
