/* kernels: the arithmetic under the model, fast and checked.
 *
 * Every kernel has a scalar reference that is always compiled; ts_kernels_init
 * picks the fastest path the CPU supports (AVX-512, AVX2+FMA, NEON) unless
 * TSCOPE_KERNELS=scalar|avx2|avx512 forces one. Threads come from
 * TSCOPE_THREADS (default: all cores) or ts_kernels_set_threads.
 * Matrices are row-major; a leading dimension is the distance in floats
 * between the starts of two rows as stored.
 */
#ifndef TSCOPE_KERNELS_H
#define TSCOPE_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tscope/status.h"

typedef enum ts_isa { TS_ISA_SCALAR, TS_ISA_AVX2, TS_ISA_AVX512, TS_ISA_NEON, TS_ISA_COUNT } ts_isa;

/* Read TSCOPE_KERNELS and TSCOPE_THREADS and choose the path. Safe to call
 * more than once; an unknown or unsupported TSCOPE_KERNELS is an error. */
ts_status ts_kernels_init(void);
ts_isa ts_kernels_isa(void);
const char *ts_isa_name(ts_isa isa); /* "scalar", "avx2", "avx512", "neon" */
bool ts_isa_supported(ts_isa isa);   /* compiled in and supported by this CPU */
ts_status ts_kernels_force(ts_isa isa);
/* n <= 0: all cores; always 1 when built with NO_OMP=1. ts_kernels_init resets
 * the count from TSCOPE_THREADS, so a caller sets it after init. */
void ts_kernels_set_threads(int n);
int ts_kernels_threads(void);

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
} ts_epilogue;

/* C (M,N) = epilogue(alpha * op(A) (M,K) @ op(B) (K,N) + beta * C).
 * op(A) = A (M,K) stored with lda >= K, or A^T with A stored (K,M), lda >= M;
 * likewise B. bias (N) is used by the BIAS epilogues, else may be NULL.
 * beta == 0 means C is not read (it may hold NaN). */
void ts_gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A, int lda,
             const float *B, int ldb, float beta, float *C, int ldc, ts_epilogue epi, const float *bias);

/* `batch` independent products; matrix i starts at A + i*stride_a etc.
 * For attention: (B*H) x [(S,hd) @ (hd,S)] and [(S,S) @ (S,hd)]. */
void ts_gemm_batched(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                     int lda, int64_t stride_a, const float *B, int ldb, int64_t stride_b, float beta,
                     float *C, int ldc, int64_t stride_c, int batch);

/* The scalar reference of ts_gemm, always compiled, whatever path is chosen. */
void ts_gemm_ref(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc, ts_epilogue epi,
                 const float *bias);

/* Row softmax over `cols`, numerically stable. in and out (rows, cols) may be
 * the same buffer. mask (cols), if not NULL, is added to every row first
 * (0 or -inf for key padding). causal: row r may only see columns
 * c <= r + causal_offset, with r counted from the first row of this call (so
 * call once per (Sq, Sk) matrix when causal); hidden entries are exactly 0.
 * A row whose entries are all -inf becomes all zeros (not NaN); the number of
 * such rows is returned. */
int64_t ts_softmax_rows(float *out, const float *in, int64_t rows, int cols, const float *mask,
                        bool causal, int causal_offset);

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

/* out (cols, rows) = in (rows, cols)^T with leading dims. */
void ts_transpose2d(float *out, int ldo, const float *in, int ldi, int rows, int cols);

#endif
