/* kernels_simd: the row and element-wise kernels written once over the vector
 * vocabulary of a mapping header (simd_avx512.h, simd_avx2.h): vf, VW, V_LOAD,
 * V_FMA, V_EXP, ... Included by kernels_<isa>.c after its mapping header, so
 * every function here is static and compiled once per instruction set.
 * Each kernel is a vector loop and a masked tail. The including file also
 * says how many vector registers the set has (V_REGS).
 */
#ifndef TSCOPE_KERNELS_SIMD_H
#define TSCOPE_KERNELS_SIMD_H

#include <math.h>
#include <stdbool.h>
#include <string.h>

#ifndef V_REGS
#error "define V_REGS, the vector registers of the instruction set, before including kernels_simd.h"
#endif

/* in + mask over [c, c+n), -inf in lanes past n. */
static inline vf masked_in(const float *in, const float *mask, int c, int n) {
    vf x = n >= VW ? V_LOAD(in + c) : V_LOAD_PART(in + c, n, -INFINITY);
    if (mask) x = V_ADD(x, n >= VW ? V_LOAD(mask + c) : V_LOAD_PART(mask + c, n, 0.0f));
    return x;
}

/* Whether an entry the row sees is NaN. The vector max may drop a NaN lane
 * (max(NaN, -inf) gives -inf), and a row of NaN must never pass for a row
 * with nothing to see: its NaN is what the trace has to show. */
static bool row_sees_nan(const float *in, const float *mask, int valid) {
    for (int c = 0; c < valid; c++)
        if (isnan(in[c] + (mask ? mask[c] : 0.0f))) return true;
    return false;
}

static int simd_softmax_row(float *out, const float *in, int cols, int valid, const float *mask) {
    vf vmax = V_SET1(-INFINITY);
    for (int c = 0; c < valid; c += VW) vmax = V_MAX(vmax, masked_in(in, mask, c, valid - c));
    float mx = V_REDUCE_MAX(vmax);
    if (mx == -INFINITY) { /* nothing visible: zeros, not 0/0; a NaN seen: NaN, as the scalar path */
        bool nan = row_sees_nan(in, mask, valid);
        memset(out, 0, sizeof(float) * (size_t)cols);
        for (int c = 0; nan && c < valid; c++) out[c] = NAN;
        return !nan;
    }
    vf vsum = V_SET1(0.0f), vmx = V_SET1(mx);
    for (int c = 0; c < valid; c += VW) {
        vf e = V_EXP(V_SUB(masked_in(in, mask, c, valid - c), vmx)); /* -inf lanes give 0 */
        vsum = V_ADD(vsum, e);
        if (valid - c >= VW)
            V_STORE(out + c, e);
        else
            V_STORE_PART(out + c, e, valid - c);
    }
    float inv = 1.0f / V_REDUCE_ADD(vsum);
    vf vinv = V_SET1(inv);
    int c = 0;
    for (; c + VW <= valid; c += VW) V_STORE(out + c, V_MUL(V_LOAD(out + c), vinv));
    for (; c < valid; c++) out[c] *= inv;
    if (valid < cols) memset(out + valid, 0, sizeof(float) * (size_t)(cols - valid));
    return 0;
}

static void simd_layernorm_row(float *out, float *mean, float *rstd, const float *in, const float *gamma,
                               const float *beta, int cols, float eps) {
    vf vs = V_SET1(0.0f);
    int c = 0;
    for (; c + VW <= cols; c += VW) vs = V_ADD(vs, V_LOAD(in + c));
    if (c < cols) vs = V_ADD(vs, V_LOAD_PART(in + c, cols - c, 0.0f));
    float mu = V_REDUCE_ADD(vs) / (float)cols;
    /* Two passes: the variance of (x - mean), so a large common offset does not cancel. */
    vf vmu = V_SET1(mu), vss = V_SET1(0.0f);
    for (c = 0; c + VW <= cols; c += VW) {
        vf d = V_SUB(V_LOAD(in + c), vmu);
        vss = V_FMA(d, d, vss);
    }
    float ss = V_REDUCE_ADD(vss);
    for (; c < cols; c++) ss += (in[c] - mu) * (in[c] - mu);
    float r = 1.0f / sqrtf(ss / (float)cols + eps);
    vf vr = V_SET1(r);
    for (c = 0; c + VW <= cols; c += VW) {
        vf y = V_MUL(V_SUB(V_LOAD(in + c), vmu), vr);
        if (gamma) y = V_MUL(y, V_LOAD(gamma + c));
        if (beta) y = V_ADD(y, V_LOAD(beta + c));
        V_STORE(out + c, y);
    }
    for (; c < cols; c++) {
        float y = (in[c] - mu) * r;
        if (gamma) y *= gamma[c];
        if (beta) y += beta[c];
        out[c] = y;
    }
    if (mean) *mean = mu;
    if (rstd) *rstd = r;
}

/* ---- few rows of A against B stored (N, K): ts_small_m_fn -------------------
 *
 * Memory-bound: each float of B feeds m FMAs, so the loop must only keep
 * loads of B in flight. R rows of B at once, each against the m rows of A:
 * m*R independent accumulators hide the FMA latency, and R streams of B keep
 * the prefetchers busy. R is what fits the register file beside R vectors of
 * B and one of A (AVX2's 16: 3 rows of B when m is 3 or 4). */
#define SMALL_M_GROUP(m) ((V_REGS - 1) / ((m) + 1) < 4 ? (V_REGS - 1) / ((m) + 1) : 4)

/* Floats of B fetched ahead of the loads, on each of the R streams: 1 KB.
 * Measured on AVX2 and AVX-512 (medians of 5 runs on a busy machine): 10-20%
 * more bandwidth at m = 2..4 than the hardware prefetchers alone, the same at
 * m = 1. Past the end of B it fetches nothing harmful: a prefetch does not
 * fault. */
#define SMALL_M_PF 256

/* dots[i][r] = dot(a row i, b row r) for i < m, r < R over k: one vector
 * accumulator per entry, summed along k and then across its lanes, the same
 * whatever the group size. */
static inline __attribute__((always_inline)) void small_m_group(const int m, const int R, int k, const float *a,
                                                                int64_t lda, const float *b, int64_t ldb,
                                                                float dots[TS_KERN_SMALL_M][4]) {
    vf acc[TS_KERN_SMALL_M][4];
#pragma GCC unroll 4
    for (int i = 0; i < m; i++)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) acc[i][r] = V_SET1(0.0f);
    int p = 0;
    for (; p + VW <= k; p += VW) {
        vf bv[4];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) bv[r] = V_LOAD(b + r * ldb + p);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) __builtin_prefetch(b + r * ldb + p + SMALL_M_PF, 0, 0);
#pragma GCC unroll 4
        for (int i = 0; i < m; i++) {
            vf av = V_LOAD(a + i * lda + p);
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) acc[i][r] = V_FMA(av, bv[r], acc[i][r]);
        }
    }
    if (p < k) { /* the tail: lanes past k are 0 in both */
        vf bv[4];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) bv[r] = V_LOAD_PART(b + r * ldb + p, k - p, 0.0f);
#pragma GCC unroll 4
        for (int i = 0; i < m; i++) {
            vf av = V_LOAD_PART(a + i * lda + p, k - p, 0.0f);
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) acc[i][r] = V_FMA(av, bv[r], acc[i][r]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < m; i++)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) dots[i][r] = V_REDUCE_ADD(acc[i][r]);
}

/* c[i][j..j+R) = alpha * dots + beta * c (c not read when beta == 0). */
static inline void small_m_store(int m, int R, float dots[TS_KERN_SMALL_M][4], float *c, int64_t ldc,
                                 int j, float alpha, float beta) {
    for (int i = 0; i < m; i++) {
        float *crow = c + i * ldc + j;
        for (int r = 0; r < R; r++) crow[r] = beta != 0 ? alpha * dots[i][r] + beta * crow[r] : alpha * dots[i][r];
    }
}

static inline __attribute__((always_inline)) void small_m_rows(const int m, int n, int k, float alpha,
                                                               const float *a, int64_t lda, const float *b,
                                                               int64_t ldb, float beta, float *c, int64_t ldc) {
    const int R = SMALL_M_GROUP(m);
    float dots[TS_KERN_SMALL_M][4];
    int j = 0;
    for (; j + R <= n; j += R) {
        small_m_group(m, R, k, a, lda, b + j * ldb, ldb, dots);
        small_m_store(m, R, dots, c, ldc, j, alpha, beta);
    }
    for (; j < n; j++) {
        small_m_group(m, 1, k, a, lda, b + j * ldb, ldb, dots);
        small_m_store(m, 1, dots, c, ldc, j, alpha, beta);
    }
}

/* The epilogue on a row of n, as the gemm micro-kernels apply it. */
static void simd_epilogue_row(float *c, int n, ts_epilogue epi, const float *bias) {
    if (epi == TS_EPI_NONE) return;
    for (int j = 0; j < n; j += VW) {
        int part = n - j < VW ? n - j : VW;
        vf x = part == VW ? V_LOAD(c + j) : V_LOAD_PART(c + j, part, 0.0f);
        x = V_ADD(x, part == VW ? V_LOAD(bias + j) : V_LOAD_PART(bias + j, part, 0.0f));
        if (epi == TS_EPI_BIAS_RELU) x = V_MAX(V_SET1(0.0f), x); /* NaN comes through */
        if (epi == TS_EPI_BIAS_GELU) x = V_GELU(x);
        if (part == VW)
            V_STORE(c + j, x);
        else
            V_STORE_PART(c + j, x, part);
    }
}

static void simd_small_m(int m, int n, int k, float alpha, const float *a, int64_t lda, const float *b,
                         int64_t ldb, float beta, float *c, int64_t ldc, ts_epilogue epi, const float *bias) {
    _Static_assert(TS_KERN_SMALL_M == 4, "small_m_rows is instantiated for m = 1..4");
    switch (m) {
    case 1: small_m_rows(1, n, k, alpha, a, lda, b, ldb, beta, c, ldc); break;
    case 2: small_m_rows(2, n, k, alpha, a, lda, b, ldb, beta, c, ldc); break;
    case 3: small_m_rows(3, n, k, alpha, a, lda, b, ldb, beta, c, ldc); break;
    case 4: small_m_rows(4, n, k, alpha, a, lda, b, ldb, beta, c, ldc); break;
    default: /* not a few rows: the driver never asks, but the answer is still right */
        ts_gemm_ref(false, true, m, n, k, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc, epi, bias);
        return;
    }
    for (int i = 0; i < m; i++) simd_epilogue_row(c + i * ldc, n, epi, bias);
}

/* out[i] = OP over [0, n): full vectors, then one masked vector. */
#define SIMD_ELTWISE(name, params, LOADS, EXPR)                                    \
    static void name params {                                                      \
        int64_t i = 0;                                                             \
        for (; i + VW <= n; i += VW) {                                             \
            int part = VW;                                                         \
            (void)part;                                                            \
            LOADS;                                                                 \
            V_STORE(out + i, EXPR);                                                \
        }                                                                          \
        if (i < n) {                                                               \
            int part = (int)(n - i);                                               \
            LOADS;                                                                 \
            V_STORE_PART(out + i, EXPR, part);                                     \
        }                                                                          \
    }

#define LOAD_N(p) (part == VW ? V_LOAD((p) + i) : V_LOAD_PART((p) + i, part, 0.0f))

SIMD_ELTWISE(simd_add, (float *out, const float *a, const float *b, int64_t n),
             vf x = LOAD_N(a); vf y = LOAD_N(b), V_ADD(x, y))
SIMD_ELTWISE(simd_scale, (float *out, const float *in, float s, int64_t n), vf x = LOAD_N(in),
             V_MUL(V_SET1(s), x))
/* max(0, x) with x second: a NaN comes through, as in torch. */
SIMD_ELTWISE(simd_relu, (float *out, const float *in, int64_t n), vf x = LOAD_N(in),
             V_MAX(V_SET1(0.0f), x))
SIMD_ELTWISE(simd_gelu, (float *out, const float *in, int64_t n), vf x = LOAD_N(in), V_GELU(x))

#endif
