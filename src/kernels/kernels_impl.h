/* kernels_impl: what the dispatcher (kernels.c), the gemm driver (gemm.c),
 * the scalar reference (kernels_ref.c) and the per-ISA files share. Private
 * to src/; the public surface is include/tscope/kernels.h.
 *
 * Each instruction set fills one ts_kern_ops table: a gemm micro-kernel with
 * its tile and cache-block sizes, and the row / element kernels. The
 * dispatcher owns threading and calls these on one thread's share of work.
 */
#ifndef TSCOPE_KERNELS_IMPL_H
#define TSCOPE_KERNELS_IMPL_H

#include "tscope/kernels.h"

/* One OpenMP pragma where threads help; nothing (and no warning) when the
 * build has threads off (make NO_OMP=1). */
#if defined(_OPENMP)
#define TS_PRAGMA_(x) _Pragma(#x)
#define TS_OMP(x) TS_PRAGMA_(omp x)
#else
#define TS_OMP(x)
#endif

/* acc (MR,NR) = sum over p < kc of pa[p*MR + i] * pb[p*NR + j] (packed panels),
 * then for the top-left (m, n) corner of the tile (m <= MR, n <= NR):
 * C = alpha*acc + beta*C (C is not read when beta == 0), then the epilogue
 * with bias (n) when epi != TS_EPI_NONE. Nothing outside the corner is touched. */
typedef void (*ts_ukernel_fn)(int kc, const float *pa, const float *pb, float *c, int64_t ldc, int m,
                              int n, float alpha, float beta, ts_epilogue epi, const float *bias);

/* The same, and step p < pf_lines of the k loop also prefetches the cache
 * line at pf + 64*p: the driver's prefetches of the next batched product,
 * spread among the FMAs. */
typedef void (*ts_ukernel_pf_fn)(int kc, const float *pa, const float *pb, float *c, int64_t ldc, int m,
                                 int n, float alpha, float beta, ts_epilogue epi, const float *bias,
                                 const char *pf, int pf_lines);

/* Transposing pack: dst[p*w + i] = src[i*lds + p] for i < m, p < kc, and 0
 * for m <= i < w. Turns row-major A rows, or B stored (N,K), into a panel.
 * May write up to 64 floats past dst + kc*w (the driver leaves room). */
typedef void (*ts_pack_t_fn)(float *dst, int w, const float *src, int64_t lds, int m, int kc);

/* Plain pack: dst[p*w + j] = src[p*lds + j] for j < n, p < kc, and 0 for
 * n <= j < w. Turns B stored (K,N), or A stored (K,M), into a panel. Same
 * room past the panel as ts_pack_t_fn. */
typedef void (*ts_pack_n_fn)(float *dst, int w, const float *src, int64_t lds, int n, int kc);

/* ts_pack_t_fn from bfloat16: dst[p*w + i] = src[i*lds + p] widened to
 * float32 (exactly), 0 for m <= i < w. Packs bf16 weights stored (N,K). */
typedef void (*ts_pack_t_bf16_fn)(float *dst, int w, const ts_bf16 *src, int64_t lds, int m, int kc);

/* out = softmax(in + mask) over the first `valid` of `cols` columns, the rest
 * 0. Returns 1 when every visible entry is -inf (the row is then all 0). */
typedef int (*ts_softmax_row_fn)(float *out, const float *in, int cols, int valid,
                                 const float *mask);

/* Few rows against B stored (N,K), as a linear on one new token: for i < m,
 * j < n, c[i*ldc + j] = alpha * dot(a row i, b row j) (k terms) + beta * c
 * (c is not read when beta == 0), then the epilogue with bias (n) when epi !=
 * TS_EPI_NONE. m <= TS_KERN_SMALL_M. Each row of b is read once for all m rows
 * of a: the product streams B, with no packing. Each entry is summed the same
 * way whatever n is, so threads' shares of the rows of b agree bitwise. */
#define TS_KERN_SMALL_M 4
typedef void (*ts_small_m_fn)(int m, int n, int k, float alpha, const float *a, int64_t lda, const float *b,
                              int64_t ldb, float beta, float *c, int64_t ldc, ts_epilogue epi,
                              const float *bias);

/* Attention's two products on one thread, each entry summed as the gemm
 * micro-kernel sums it (a chain of multiply-adds from 0 in the order of k,
 * then times alpha), so they equal ts_gemm's blocked path bit for bit; the
 * queries and the weights are read where they lie, only keys and values are
 * packed (once per head, ts_attn_causal) into panels of attn_pw columns.
 *
 * Scores: s (m, n) = alpha * q (m, hd) @ k^T, k packed as kt: panel p holds
 * keys [p*pw, p*pw + pw), element (d, j) at kt[(p*hd + d)*pw + j]. Row i needs
 * only its first first + i keys (the causal rule): panels past the last of a
 * tile's rows are skipped, and the columns left unwritten are never read. */
typedef void (*ts_attn_scores_fn)(int m, int n, int hd, int first, float alpha, const float *q, int64_t ldq,
                                  const float *kt, float *s, int64_t lds);

/* Values: o (m, hd) = p (m, n) @ v, summed over k blocks [c0, c0 + kc) each
 * added to what the blocks before it left (the first stored); v packed as
 * vp: panel q holds columns [q*pw, q*pw + pw), element (c, j) at
 * vp[(q*vrows + c)*pw + j]. */
typedef void (*ts_attn_values_fn)(int m, int n, int kc, int hd, const float *p, int64_t ldp, const float *vp,
                                  int64_t vrows, float *o, int64_t ldo);

typedef void (*ts_layernorm_row_fn)(float *out, float *mean, float *rstd, const float *in,
                                    const float *gamma, const float *beta, int cols, float eps);

/* The softmax's backward on one row: ds = w * (dw - sum_j dw_j w_j) over the
 * first `valid` of `cols` entries (the others, weight 0 under a mask, get 0).
 * ds may be dw. */
typedef void (*ts_softmax_grad_row_fn)(float *ds, const float *dw, const float *w, int valid, int cols);

/* LayerNorm's backward on one row of C, whose forward had mean mu and 1/std
 * rs: with n = (x - mu) * rs and g = dy * gamma (gamma NULL: 1),
 * dx += rs * (g - mean(g) - n * mean(g * n)). */
typedef void (*ts_layernorm_grad_row_fn)(float *dx, const float *dy, const float *x, const float *gamma, float mu,
                                         float rs, int C);
/* Its parameters' share of one row, over n columns: dgamma += dy * (x - mu) * rs,
 * dbeta += dy (either may be NULL). */
typedef void (*ts_layernorm_grad_params_fn)(float *dgamma, float *dbeta, const float *dy, const float *x, float mu,
                                            float rs, int64_t n);

/* din (n) += dout (n) * f'(in) (n): an activation's backward. */
typedef void (*ts_grad_fn)(float *din, const float *dout, const float *in, int64_t n);

/* One Adam/AdamW update of n parameters that all decay alike (wd is 0 where
 * none does), with the step's scalars as ts_optim_step computes them. */
typedef struct ts_kern_adam {
    float b1, b2, eps, wd;
    float step_size; /* lr / (1 - b1^t) */
    float bc2_sqrt;  /* sqrt(1 - b2^t) */
    float decay;     /* AdamW's 1 - lr * wd */
    bool adamw;
} ts_kern_adam;
/* Inverted dropout of elements [i0, i0 + n) of a tensor: element i is
 * dropped when (hash(key, i) >> 11) < threshold (ts_u01(key, i) < p, as
 * integers: threshold = ceil(p * 2^53)), else scaled by keep.
 * Forward: out = in * keep or 0. Backward: din += dout * keep where kept. */
typedef void (*ts_dropout_fn)(float *out, const float *in, int64_t n, int64_t i0, uint64_t key, uint64_t threshold,
                              float keep);
typedef void (*ts_adam_fn)(float *params, const float *grads, float *m, float *v, int64_t n,
                           const ts_kern_adam *a);
/* Cross-entropy's gradient on one row of n logits x whose log-sum-exp is lse
 * (finite), every entry as if it were not the label's:
 * d[v] += scale * (e^(x[v] - lse) - off). The caller mends the label's entry. */
typedef void (*ts_xent_grad_fn)(float *d, const float *x, int64_t n, double lse, double scale, double off);

typedef struct ts_kern_ops {
    ts_isa isa;
    int mr, nr; /* micro-tile of C */
    /* Cache blocking: K is cut into blocks of at most kc_max; the packed
     * (MC, KC) block of A holds about a_floats (it stays in L2) and the packed
     * (KC, NC) block of B about b_floats (L3); MC and NC follow from KC. */
    int kc_max, a_floats, b_floats;
    ts_ukernel_fn ukernel;
    ts_ukernel_pf_fn ukernel_pf; /* NULL: the driver prefetches between calls */
    ts_pack_t_fn pack_t;
    ts_pack_n_fn pack_n;
    ts_pack_t_bf16_fn pack_t_bf16;
    ts_small_m_fn small_m; /* gemm when M <= TS_KERN_SMALL_M, op(A) = A, op(B) = B^T */
    ts_softmax_row_fn softmax_row;
    ts_attn_scores_fn attn_scores;
    ts_attn_values_fn attn_values;
    int attn_pw; /* the attention panels' width */
    ts_layernorm_row_fn layernorm_row;
    ts_softmax_grad_row_fn softmax_grad_row;
    ts_layernorm_grad_row_fn layernorm_grad_row;
    ts_layernorm_grad_params_fn layernorm_grad_params;
    void (*add)(float *out, const float *a, const float *b, int64_t n);
    void (*scale)(float *out, const float *in, float s, int64_t n);
    void (*relu)(float *out, const float *in, int64_t n);
    void (*gelu)(float *out, const float *in, int64_t n);
    void (*gelu_tanh)(float *out, const float *in, int64_t n);
    void (*mul)(float *out, const float *a, const float *b, int64_t n);
    void (*silu)(float *out, const float *in, int64_t n);
    ts_grad_fn relu_grad, gelu_grad, gelu_tanh_grad;
    ts_adam_fn adam;
    ts_dropout_fn dropout, dropout_grad;
    ts_xent_grad_fn xent_grad;
    /* sum of x^2 over n, as a double; exact to float rounding of blocks, and
     * a block that overflows float is summed again in double. */
    double (*sum_squares)(const float *x, int64_t n);
    /* The vocabulary softmax's passes (ts_softmax_vocab): the max of x, or
     * NaN when x holds a NaN or an infinity (the reference then does the
     * row); and probs (may be NULL) = e^((x - top) / t), whose sum comes back
     * in double, added up by blocks of float lanes. */
    float (*max_finite)(const float *x, int64_t n);
    double (*exp_sum)(float *probs, const float *x, int64_t n, float top, float t);
    /* Independent FMA chains for `iters` steps; returns the flops done (peak
     * probe). The chains' sum goes to *sink so they cannot be optimised away. */
    double (*fma_loop)(int64_t iters, float *sink);
} ts_kern_ops;

extern const ts_kern_ops ts_kern_scalar_ops;
#if defined(__x86_64__) || defined(_M_X64)
#define TS_KERN_HAVE_X86 1
extern const ts_kern_ops ts_kern_avx2_ops;
extern const ts_kern_ops ts_kern_avx512_ops;
#define TS_KERN_AVX2_MR 6
#define TS_KERN_AVX2_NR 16
#define TS_KERN_AVX512_MR 14
#define TS_KERN_AVX512_NR 32
double ts_kern_fma_loop_avx2(int64_t iters, float *sink);
double ts_kern_fma_loop_avx512(int64_t iters, float *sink);
void ts_kern_ukernel_avx2(int kc, const float *pa, const float *pb, float *c, int64_t ldc, int m, int n,
                          float alpha, float beta, ts_epilogue epi, const float *bias);
void ts_kern_ukernel_avx512(int kc, const float *pa, const float *pb, float *c, int64_t ldc, int m,
                            int n, float alpha, float beta, ts_epilogue epi, const float *bias);
void ts_kern_ukernel_pf_avx512(int kc, const float *pa, const float *pb, float *c, int64_t ldc, int m,
                               int n, float alpha, float beta, ts_epilogue epi, const float *bias,
                               const char *pf, int pf_lines);
void ts_kern_pack_t_avx2(float *dst, int w, const float *src, int64_t lds, int m, int kc);
void ts_kern_pack_n_avx2(float *dst, int w, const float *src, int64_t lds, int n, int kc);
void ts_kern_pack_t_bf16_avx2(float *dst, int w, const ts_bf16 *src, int64_t lds, int m, int kc);
void ts_kern_pack_t_avx512(float *dst, int w, const float *src, int64_t lds, int m, int kc);
void ts_kern_pack_n_avx512(float *dst, int w, const float *src, int64_t lds, int n, int kc);
/* The hash in 4 lanes of 64 bits (AVX2; the AVX-512 table uses them too). */
void ts_kern_dropout_avx2(float *out, const float *in, int64_t n, int64_t i0, uint64_t key, uint64_t threshold,
                          float keep);
void ts_kern_dropout_grad_avx2(float *din, const float *dout, int64_t n, int64_t i0, uint64_t key,
                               uint64_t threshold, float keep);
#endif
#if defined(__aarch64__) || defined(_M_ARM64)
/* NEON is part of every ARM64 core's base instruction set. */
#define TS_KERN_HAVE_NEON 1
extern const ts_kern_ops ts_kern_neon_ops;
#define TS_KERN_NEON_MR 8
#define TS_KERN_NEON_NR 12
double ts_kern_fma_loop_neon(int64_t iters, float *sink);
void ts_kern_ukernel_neon(int kc, const float *pa, const float *pb, float *c, int64_t ldc, int m, int n,
                          float alpha, float beta, ts_epilogue epi, const float *bias);
void ts_kern_pack_t_neon(float *dst, int w, const float *src, int64_t lds, int m, int kc);
void ts_kern_pack_n_neon(float *dst, int w, const float *src, int64_t lds, int n, int kc);
void ts_kern_pack_t_bf16_neon(float *dst, int w, const ts_bf16 *src, int64_t lds, int m, int kc);
#endif
#if defined(__wasm_simd128__)
/* WebAssembly's SIMD128, chosen when `make wasm` compiles with -msimd128: a
 * browser that runs the page at all runs it (Chrome 91, Firefox 89, Safari 16.4). */
#define TS_KERN_HAVE_WASM 1
extern const ts_kern_ops ts_kern_wasm_ops;
#define TS_KERN_WASM_MR 4
#define TS_KERN_WASM_NR 8
double ts_kern_fma_loop_wasm(int64_t iters, float *sink);
void ts_kern_ukernel_wasm(int kc, const float *pa, const float *pb, float *c, int64_t ldc, int m, int n,
                          float alpha, float beta, ts_epilogue epi, const float *bias);
void ts_kern_pack_t_wasm(float *dst, int w, const float *src, int64_t lds, int m, int kc);
void ts_kern_pack_n_wasm(float *dst, int w, const float *src, int64_t lds, int n, int kc);
#endif

/* The table in use (initialises on first call). */
const ts_kern_ops *ts_kern_ops_current(void);

/* Threads a kernel may start from here: 1 inside the caller's own parallel
 * region (its threads already share the work), else ts_kernels_threads(). */
int ts_kern_threads_here(void);

/* fn(ctx, t, n) for every t < n, on n threads at once (the caller's is one of
 * them): an OpenMP team where the build has OpenMP, POSIX threads where it
 * has not (make NO_OMP=1, or Apple's clang). n may come out smaller under
 * OpenMP; fn is handed the n in force. */
typedef void (*ts_kern_task_fn)(void *ctx, int t, int n);
void ts_kern_parallel(int n, ts_kern_task_fn fn, void *ctx);

/* The portable C micro-kernel of the scalar path (gemm.c), MR x NR. */
#define TS_KERN_SCALAR_MR 4
#define TS_KERN_SCALAR_NR 16
double ts_kern_fma_loop_scalar(int64_t iters, float *sink);
void ts_kern_ukernel_scalar(int kc, const float *pa, const float *pb, float *c, int64_t ldc, int m,
                            int n, float alpha, float beta, ts_epilogue epi, const float *bias);
void ts_kern_pack_t_scalar(float *dst, int w, const float *src, int64_t lds, int m, int kc);
void ts_kern_pack_n_scalar(float *dst, int w, const float *src, int64_t lds, int n, int kc);
void ts_kern_pack_t_bf16_scalar(float *dst, int w, const ts_bf16 *src, int64_t lds, int m, int kc);

/* Scalar pieces the SIMD paths reuse for edges and tails. */
float ts_kern_gelu1(float x);
void ts_kern_epilogue_row(float *c, int n, ts_epilogue epi, const float *bias);
void ts_kern_small_m_ref(int m, int n, int k, float alpha, const float *a, int64_t lda, const float *b,
                         int64_t ldb, float beta, float *c, int64_t ldc, ts_epilogue epi, const float *bias);
int ts_kern_softmax_row_ref(float *out, const float *in, int cols, int valid, const float *mask);
void ts_kern_softmax_grad_row_ref(float *ds, const float *dw, const float *w, int valid, int cols);
void ts_kern_layernorm_grad_row_ref(float *dx, const float *dy, const float *x, const float *gamma, float mu, float rs,
                                    int C);
void ts_kern_layernorm_grad_params_ref(float *dgamma, float *dbeta, const float *dy, const float *x, float mu, float rs,
                                       int64_t n);
void ts_kern_attn_scores_ref(int m, int n, int hd, int first, float alpha, const float *q, int64_t ldq,
                             const float *kt, float *s, int64_t lds);
void ts_kern_attn_values_ref(int m, int n, int kc, int hd, const float *p, int64_t ldp, const float *vp,
                             int64_t vrows, float *o, int64_t ldo);
/* The scalar path's attention panels: as wide as its micro-tile. */
#define TS_KERN_SCALAR_ATTN_PW 8
void ts_kern_layernorm_row_ref(float *out, float *mean, float *rstd, const float *in,
                               const float *gamma, const float *beta, int cols, float eps);
void ts_kern_add_ref(float *out, const float *a, const float *b, int64_t n);
void ts_kern_scale_ref(float *out, const float *in, float s, int64_t n);
void ts_kern_relu_ref(float *out, const float *in, int64_t n);
void ts_kern_gelu_ref(float *out, const float *in, int64_t n);
void ts_kern_gelu_tanh_ref(float *out, const float *in, int64_t n);
void ts_kern_mul_ref(float *out, const float *a, const float *b, int64_t n);
void ts_kern_silu_ref(float *out, const float *in, int64_t n);
void ts_kern_relu_grad_ref(float *din, const float *dout, const float *in, int64_t n);
void ts_kern_gelu_grad_ref(float *din, const float *dout, const float *in, int64_t n);
void ts_kern_gelu_tanh_grad_ref(float *din, const float *dout, const float *in, int64_t n);
void ts_kern_adam_ref(float *params, const float *grads, float *m, float *v, int64_t n, const ts_kern_adam *a);
double ts_kern_sum_squares_ref(const float *x, int64_t n);
void ts_kern_dropout_ref(float *out, const float *in, int64_t n, int64_t i0, uint64_t key, uint64_t threshold,
                         float keep);
void ts_kern_dropout_grad_ref(float *din, const float *dout, int64_t n, int64_t i0, uint64_t key,
                              uint64_t threshold, float keep);
void ts_kern_xent_grad_ref(float *d, const float *x, int64_t n, double lse, double scale, double off);
float ts_kern_max_finite_ref(const float *x, int64_t n);
double ts_kern_exp_sum_ref(float *probs, const float *x, int64_t n, float top, float t);
/* ts_softmax_vocab all in double, one entry at a time: the reference, and
 * the path of a row with a floor or a non-finite logit. */
double ts_kern_softmax_vocab_ref(float *probs, const float *logits, int64_t n, double temperature, float floor);

/* Element counts below which one thread does the whole job. */
#define TS_KERN_ELTWISE_MIN 65536

/* Threads worth starting for `work` elements, `min_each` at least per thread
 * (1 inside the caller's own parallel region). */
int ts_kern_threads_for(int64_t work, int64_t min_each);

/* Pieces of a parallel loop per thread, handed out as threads come free: a
 * thread slowed by other work on the machine takes fewer instead of holding
 * the others back (a fixed share each made 2 threads slower than 1 beside a
 * busy process). */
#define TS_KERN_CHUNKS 8

/* Rows a parallel loop over `rows` hands out at a time (OpenMP's dynamic chunk). */
#define TS_KERN_ROW_CHUNK(rows, nth) ((rows) / ((int64_t)(nth) * TS_KERN_CHUNKS) > 1 ? (int)((rows) / ((int64_t)(nth) * TS_KERN_CHUNKS)) : 1)

/* Element-wise work over n in TS_KERN_CHUNKS chunks per thread (whole cache
 * lines), handed out as threads come free: CALL runs with i0 and len in scope. */
#define TS_KERN_SPLIT(n, CALL)                                                        \
    do {                                                                              \
        int nth_ = ts_kern_threads_for((n), TS_KERN_ELTWISE_MIN);                     \
        int chunks_ = nth_ > 1 ? nth_ * TS_KERN_CHUNKS : 1;                           \
        int64_t per_ = (((n) + chunks_ - 1) / chunks_ + 15) / 16 * 16;                \
        (void)per_;                                                                   \
        TS_OMP(parallel for num_threads(nth_) schedule(dynamic, 1))                   \
        for (int t_ = 0; t_ < chunks_; t_++) {                                        \
            int64_t i0 = t_ * per_, len = (n)-i0 < per_ ? (n)-i0 : per_;              \
            if (len > 0) CALL;                                                        \
        }                                                                             \
    } while (0)

/* The optimised sgemm (gemm.c) on the given table; threads as configured. */
void ts_kern_gemm(const ts_kern_ops *ops, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
                  ts_epilogue epi, const float *bias);
/* The same over the first K of k_whole terms (k_whole <= K: the whole sum),
 * in the K blocks the k_whole-long sum uses (ts_gemm_k_prefix). */
void ts_kern_gemm_prefix(const ts_kern_ops *ops, bool trans_a, bool trans_b, int M, int N, int K, int k_whole,
                         float alpha, const float *A, int lda, const float *B, int ldb, float beta, float *C,
                         int ldc, ts_epilogue epi, const float *bias);
/* ts_gemm_bf16 on the given table. */
void ts_kern_gemm_bf16(const ts_kern_ops *ops, int M, int N, int K, float alpha, const float *A, int lda,
                       const ts_bf16 *W, int ldw, float beta, float *C, int ldc, ts_epilogue epi,
                       const float *bias);
void ts_kern_gemm_batched(const ts_kern_ops *ops, bool trans_a, bool trans_b, int M, int N, int K,
                          float alpha, const float *A, int lda, int64_t stride_a, const float *B,
                          int ldb, int64_t stride_b, float beta, float *C, int ldc, int64_t stride_c,
                          int batch);

#endif
