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

typedef void (*ts_layernorm_row_fn)(float *out, float *mean, float *rstd, const float *in,
                                    const float *gamma, const float *beta, int cols, float eps);

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
    ts_small_m_fn small_m; /* gemm when M <= TS_KERN_SMALL_M, op(A) = A, op(B) = B^T */
    ts_softmax_row_fn softmax_row;
    ts_layernorm_row_fn layernorm_row;
    void (*add)(float *out, const float *a, const float *b, int64_t n);
    void (*scale)(float *out, const float *in, float s, int64_t n);
    void (*relu)(float *out, const float *in, int64_t n);
    void (*gelu)(float *out, const float *in, int64_t n);
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
void ts_kern_pack_t_avx512(float *dst, int w, const float *src, int64_t lds, int m, int kc);
void ts_kern_pack_n_avx512(float *dst, int w, const float *src, int64_t lds, int n, int kc);
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

/* Scalar pieces the SIMD paths reuse for edges and tails. */
float ts_kern_gelu1(float x);
void ts_kern_epilogue_row(float *c, int n, ts_epilogue epi, const float *bias);
void ts_kern_small_m_ref(int m, int n, int k, float alpha, const float *a, int64_t lda, const float *b,
                         int64_t ldb, float beta, float *c, int64_t ldc, ts_epilogue epi, const float *bias);
int ts_kern_softmax_row_ref(float *out, const float *in, int cols, int valid, const float *mask);
void ts_kern_layernorm_row_ref(float *out, float *mean, float *rstd, const float *in,
                               const float *gamma, const float *beta, int cols, float eps);
void ts_kern_add_ref(float *out, const float *a, const float *b, int64_t n);
void ts_kern_scale_ref(float *out, const float *in, float s, int64_t n);
void ts_kern_relu_ref(float *out, const float *in, int64_t n);
void ts_kern_gelu_ref(float *out, const float *in, int64_t n);

/* The optimised sgemm (gemm.c) on the given table; threads as configured. */
void ts_kern_gemm(const ts_kern_ops *ops, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
                  ts_epilogue epi, const float *bias);
void ts_kern_gemm_batched(const ts_kern_ops *ops, bool trans_a, bool trans_b, int M, int N, int K,
                          float alpha, const float *A, int lda, int64_t stride_a, const float *B,
                          int ldb, int64_t stride_b, float beta, float *C, int ldc, int64_t stride_c,
                          int batch);

#endif
