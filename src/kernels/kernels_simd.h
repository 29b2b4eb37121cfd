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

/* ---- attention's two products: ts_attn_scores_fn, ts_attn_values_fn ----------
 *
 * Tiles of ATT_R rows by two vectors, as the gemm micro-kernels: each entry a
 * chain of V_FMA from 0 in the order of k (the micro-kernels' sum, so the
 * same bits), with A broadcast straight from the queries or the weights, and
 * B from the panels ts_attn_causal packs once per head. ATT_R rows fill the
 * register file: 12 accumulators, two of B and one of A on 16 registers. */
#define ATT_R (V_REGS >= 32 ? 12 : 6)
#define ATT_PW (2 * VW)

/* Columns [0, n) of a two-vector row: x0, then x1 (n may be short of either). */
static inline void att_store2(float *p, vf x0, vf x1, int n) {
    if (n >= VW) V_STORE(p, x0);
    else V_STORE_PART(p, x0, n);
    if (n >= 2 * VW) V_STORE(p + VW, x1);
    else if (n > VW) V_STORE_PART(p + VW, x1, n - VW);
}

/* acc (ATT_R, 2 vectors) = a (m, [k0, k1)) @ b, b the panel's rows from k0
 * on, ATT_PW floats each: both products' inner loop. Rows past m repeat row
 * m - 1 (computed, never stored). */
static inline __attribute__((always_inline)) void att_tile_sums(vf acc[ATT_R][2], int m, const float *a,
                                                                int64_t lda, int k0, int k1, const float *b) {
    const float *ar[ATT_R];
#pragma GCC unroll 12
    for (int i = 0; i < ATT_R; i++) {
        acc[i][0] = acc[i][1] = V_SET1(0.0f);
        ar[i] = a + (i < m ? i : m - 1) * lda;
    }
    for (int k = k0; k < k1; k++, b += ATT_PW) {
        vf b0 = V_LOAD(b), b1 = V_LOAD(b + VW);
#pragma GCC unroll 12
        for (int i = 0; i < ATT_R; i++) {
            vf x = V_SET1(ar[i][k]);
            acc[i][0] = V_FMA(x, b0, acc[i][0]);
            acc[i][1] = V_FMA(x, b1, acc[i][1]);
        }
    }
}

/* s rows [0, m) (m <= ATT_R), columns [0, n) (n <= ATT_PW) of one key panel. */
static inline __attribute__((always_inline)) void att_scores_tile(int m, int n, int hd, float alpha,
                                                                  const float *q, int64_t ldq, const float *kt,
                                                                  float *s, int64_t lds) {
    vf acc[ATT_R][2];
    att_tile_sums(acc, m, q, ldq, 0, hd, kt);
    vf va = V_SET1(alpha);
    for (int i = 0; i < m; i++) att_store2(s + i * lds, V_MUL(va, acc[i][0]), V_MUL(va, acc[i][1]), n);
}

/* Panel by panel (one panel, hd x ATT_PW, stays in L1 while every tile of
 * rows reads it); a tile skips the panels its last row cannot see. */
static void simd_attn_scores(int m, int n, int hd, int first, float alpha, const float *q, int64_t ldq,
                             const float *kt, float *s, int64_t lds) {
    for (int j = 0; j < n; j += ATT_PW, kt += (int64_t)hd * ATT_PW)
        for (int i = 0; i < m; i += ATT_R) {
            int rows = m - i < ATT_R ? m - i : ATT_R;
            if (j >= first + i + rows - 1) continue; /* past every key these rows see */
            att_scores_tile(rows, n - j < ATT_PW ? n - j : ATT_PW, hd, alpha, q + i * ldq, ldq, kt, s + i * lds + j,
                            lds);
        }
}

/* o rows [0, m) (m <= ATT_R), columns [0, n) (n <= ATT_PW) of one value
 * panel, over k in [c0, c1): stored (add false) or added to o, as the
 * micro-kernel adds a later k block (beta 1: one rounding). */
static inline __attribute__((always_inline)) void att_values_tile(int m, int n, int c0, int c1, bool add,
                                                                  const float *p, int64_t ldp, const float *vp,
                                                                  float *o, int64_t ldo) {
    vf acc[ATT_R][2];
    att_tile_sums(acc, m, p, ldp, c0, c1, vp + (int64_t)c0 * ATT_PW);
    for (int i = 0; i < m; i++) {
        float *row = o + i * ldo;
        vf x0 = acc[i][0], x1 = acc[i][1];
        if (add) {
            x0 = V_ADD(n >= VW ? V_LOAD(row) : V_LOAD_PART(row, n, 0.0f), x0);
            if (n > VW) x1 = V_ADD(n >= 2 * VW ? V_LOAD(row + VW) : V_LOAD_PART(row + VW, n - VW, 0.0f), x1);
        }
        att_store2(row, x0, x1, n);
    }
}

/* k blocks, then panels of values (kc x ATT_PW in L1), then tiles of rows. */
static void simd_attn_values(int m, int n, int kc, int hd, const float *p, int64_t ldp, const float *vp,
                             int64_t vrows, float *o, int64_t ldo) {
    for (int c0 = 0; c0 < n; c0 += kc) {
        int c1 = c0 + kc < n ? c0 + kc : n;
        for (int j = 0; j < hd; j += ATT_PW)
            for (int i = 0; i < m; i += ATT_R)
                att_values_tile(m - i < ATT_R ? m - i : ATT_R, hd - j < ATT_PW ? hd - j : ATT_PW, c0, c1, c0 > 0,
                                p + i * ldp, ldp, vp + (int64_t)(j / ATT_PW) * vrows * ATT_PW, o + i * ldo + j,
                                ldo);
    }
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
SIMD_ELTWISE(simd_mul, (float *out, const float *a, const float *b, int64_t n),
             vf x = LOAD_N(a); vf y = LOAD_N(b), V_MUL(x, y))
SIMD_ELTWISE(simd_scale, (float *out, const float *in, float s, int64_t n), vf x = LOAD_N(in),
             V_MUL(V_SET1(s), x))
/* max(0, x) with x second: a NaN comes through, as in torch. */
SIMD_ELTWISE(simd_relu, (float *out, const float *in, int64_t n), vf x = LOAD_N(in),
             V_MAX(V_SET1(0.0f), x))
SIMD_ELTWISE(simd_gelu, (float *out, const float *in, int64_t n), vf x = LOAD_N(in), V_GELU(x))

/* ---- the tanh GELU, SiLU and the activations' backward --------------------------
 *
 * Both tanh and the logistic function come from one exponential that cannot
 * overflow: with e = exp(-|z|) and r = 1 / (1 + e),
 *     sigmoid(z) = r (z > 0) or e r (z <= 0),   sigmoid(z) sigmoid(-z) = e r^2.
 * GELU's tanh form is x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3), since
 * 0.5 (1 + tanh u) = sigmoid(2u). Where the scalar reference gives NaN
 * (x = -inf: -inf * 0) these give NaN too, and 0 where it gives 0. */

typedef struct sigmoid_parts {
    vf e, r, s; /* exp(-|z|), 1 / (1 + e), sigmoid(z) */
} sigmoid_parts;

static inline sigmoid_parts sigmoid_of(vf z) {
    sigmoid_parts p;
    p.e = V_EXP(V_MUL(V_SET1(-1.0f), V_ABS(z)));
    p.r = V_DIV(V_SET1(1.0f), V_ADD(V_SET1(1.0f), p.e));
    vf er = V_MUL(p.e, p.r);
    p.s = V_ADD(er, V_KEEP_GT0(z, V_SUB(p.r, er))); /* z > 0: e r + (r - e r) = r */
    return p;
}

/* 2u = 2 sqrt(2/pi) (x + 0.044715 x^3) */
static inline vf gelu_tanh_2u(vf x) {
    vf inner = V_FMA(V_MUL(V_SET1(0.044715f), V_MUL(x, x)), x, x);
    return V_MUL(V_SET1(2.0f * 0.7978845608028654f), inner);
}

SIMD_ELTWISE(simd_gelu_tanh, (float *out, const float *in, int64_t n), vf x = LOAD_N(in),
             V_MUL(x, sigmoid_of(gelu_tanh_2u(x)).s))
SIMD_ELTWISE(simd_silu, (float *out, const float *in, int64_t n), vf x = LOAD_N(in), V_MUL(x, sigmoid_of(x).s))

/* din[i] += GRAD over [0, n): full vectors, then one masked vector. */
#define SIMD_GRAD(name, GRAD)                                                                  \
    static void name(float *din, const float *dout, const float *in, int64_t n) {             \
        int64_t i = 0;                                                                         \
        for (; i + VW <= n; i += VW) {                                                         \
            vf x = V_LOAD(in + i), dy = V_LOAD(dout + i);                                      \
            V_STORE(din + i, V_ADD(V_LOAD(din + i), GRAD));                                    \
        }                                                                                      \
        if (i < n) {                                                                           \
            int part = (int)(n - i);                                                           \
            vf x = V_LOAD_PART(in + i, part, 0.0f), dy = V_LOAD_PART(dout + i, part, 0.0f);    \
            V_STORE_PART(din + i, V_ADD(V_LOAD_PART(din + i, part, 0.0f), GRAD), part);        \
        }                                                                                      \
    }

/* dout where x > 0 (0 added elsewhere: a NaN dout there stays out, as in the reference). */
SIMD_GRAD(simd_relu_grad, V_KEEP_GT0(x, dy))

/* Phi(x) + x phi(x), phi(x) = e^(-x^2/2) / sqrt(2 pi). */
static inline vf gelu_slope(vf x) {
    vf pdf = V_MUL(V_SET1(0.39894228040143268f), V_EXP(V_MUL(V_SET1(-0.5f), V_MUL(x, x))));
    return V_ADD(V_PHI(x), V_MUL(x, pdf));
}
SIMD_GRAD(simd_gelu_grad, V_MUL(dy, gelu_slope(x)))

/* d/dx x sigmoid(2u) = s + 2 x s (1 - s) u', u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2),
 * and s (1 - s) = e r^2 with no cancellation. */
static inline vf gelu_tanh_slope(vf x) {
    sigmoid_parts p = sigmoid_of(gelu_tanh_2u(x));
    vf du = V_MUL(V_SET1(0.7978845608028654f), V_FMA(V_SET1(3.0f * 0.044715f), V_MUL(x, x), V_SET1(1.0f)));
    vf s_1ms = V_MUL(p.e, V_MUL(p.r, p.r));
    return V_ADD(p.s, V_MUL(V_MUL(V_MUL(V_SET1(2.0f), x), s_1ms), du));
}
SIMD_GRAD(simd_gelu_tanh_grad, V_MUL(dy, gelu_tanh_slope(x)))

/* ---- the vocabulary softmax ------------------------------------------------------ */

/* V_MAX(x, m) keeps m where x is NaN; x * 0 is NaN exactly where x is NaN or
 * infinite, so one sum of those tells whether the row is all finite. */
static float simd_max_finite(const float *x, int64_t n) {
    vf top = V_SET1(-INFINITY), bad = V_SET1(0.0f), zero = V_SET1(0.0f);
    int64_t i = 0;
    for (; i + VW <= n; i += VW) {
        vf a = V_LOAD(x + i);
        top = V_MAX(a, top);
        bad = V_ADD(bad, V_MUL(a, zero));
    }
    if (i < n) {
        top = V_MAX(V_LOAD_PART(x + i, (int)(n - i), -INFINITY), top);
        bad = V_ADD(bad, V_MUL(V_LOAD_PART(x + i, (int)(n - i), 0.0f), zero));
    }
    return V_REDUCE_ADD(bad) == 0.0f ? V_REDUCE_MAX(top) : NAN;
}

#define EXP_SUM_BLOCK 4096

static double simd_exp_sum(float *probs, const float *x, int64_t n, float top, float t) {
    const vf vtop = V_SET1(top), vt = V_SET1(t);
    double z = 0;
    for (int64_t b = 0; b < n; b += EXP_SUM_BLOCK) {
        int64_t end = n - b < EXP_SUM_BLOCK ? n : b + EXP_SUM_BLOCK, i = b;
        vf s = V_SET1(0.0f);
        for (; i + VW <= end; i += VW) {
            vf e = V_EXP(V_DIV(V_SUB(V_LOAD(x + i), vtop), vt));
            if (probs) V_STORE(probs + i, e);
            s = V_ADD(s, e);
        }
        if (i < end) { /* lanes past the end: -inf, e^-inf = 0 */
            int part = (int)(end - i);
            vf e = V_EXP(V_DIV(V_SUB(V_LOAD_PART(x + i, part, -INFINITY), vtop), vt));
            if (probs) V_STORE_PART(probs + i, e, part);
            s = V_ADD(s, e);
        }
        z += (double)V_REDUCE_ADD(s);
    }
    return z;
}

/* ---- cross-entropy's gradient ------------------------------------------------------
 *
 * lse in two floats, hi + lo, so x - lse loses nothing to lse's rounding:
 * x - hi is exact where x is near lse (where e^(x - lse) is large) and
 * rounds at its own size elsewhere. Lanes past n are never stored. */
static void simd_xent_grad(float *d, const float *x, int64_t n, double lse, double scale, double off) {
    const float hi = (float)lse;
    const vf vhi = V_SET1(hi), vlo = V_SET1((float)(lse - (double)hi));
    const vf vscale = V_SET1((float)scale), voff = V_SET1((float)off);
    int64_t i = 0;
    for (; i + VW <= n; i += VW) {
        vf p = V_EXP(V_SUB(V_SUB(V_LOAD(x + i), vhi), vlo));
        V_STORE(d + i, V_ADD(V_LOAD(d + i), V_MUL(vscale, V_SUB(p, voff))));
    }
    if (i < n) {
        int part = (int)(n - i);
        vf p = V_EXP(V_SUB(V_SUB(V_LOAD_PART(x + i, part, 0.0f), vhi), vlo));
        V_STORE_PART(d + i, V_ADD(V_LOAD_PART(d + i, part, 0.0f), V_MUL(vscale, V_SUB(p, voff))), part);
    }
}

/* ---- Adam and the gradient's norm -------------------------------------------------- */

/* The reference's operations in its order (no FMA), so every path updates
 * the parameters to the same bits. */
static inline void adam_vec(float *params, const float *grads, float *m, float *v, int64_t i, int part,
                            const ts_kern_adam *a) {
    vf g = part == VW ? V_LOAD(grads + i) : V_LOAD_PART(grads + i, part, 0.0f);
    vf p = part == VW ? V_LOAD(params + i) : V_LOAD_PART(params + i, part, 0.0f);
    vf mv = part == VW ? V_LOAD(m + i) : V_LOAD_PART(m + i, part, 0.0f);
    vf vv = part == VW ? V_LOAD(v + i) : V_LOAD_PART(v + i, part, 0.0f);
    if (a->wd != 0.0f) {
        if (a->adamw)
            p = V_MUL(p, V_SET1(a->decay));
        else
            g = V_ADD(g, V_MUL(V_SET1(a->wd), p));
    }
    mv = V_ADD(V_MUL(mv, V_SET1(a->b1)), V_MUL(g, V_SET1(1.0f - a->b1)));
    vv = V_ADD(V_MUL(vv, V_SET1(a->b2)), V_MUL(V_MUL(g, g), V_SET1(1.0f - a->b2)));
    vf denom = V_ADD(V_DIV(V_SQRT(vv), V_SET1(a->bc2_sqrt)), V_SET1(a->eps));
    p = V_SUB(p, V_MUL(V_SET1(a->step_size), V_DIV(mv, denom)));
    if (part == VW) {
        V_STORE(m + i, mv), V_STORE(v + i, vv), V_STORE(params + i, p);
    } else {
        V_STORE_PART(m + i, mv, part), V_STORE_PART(v + i, vv, part), V_STORE_PART(params + i, p, part);
    }
}

static void simd_adam(float *params, const float *grads, float *m, float *v, int64_t n, const ts_kern_adam *a) {
    int64_t i = 0;
    for (; i + VW <= n; i += VW) adam_vec(params, grads, m, v, i, VW, a);
    if (i < n) adam_vec(params, grads, m, v, i, (int)(n - i), a);
}

/* The softmax's backward on one row (ts_softmax_grad_row_fn): the dot in
 * lanes (a tail loaded with 0s adds nothing), then ds = w * (dw - dot). A NaN
 * or an infinity in dw reaches the dot and the row, as in the reference. */
static void simd_softmax_grad_row(float *ds, const float *dw, const float *w, int valid, int cols) {
    vf acc = V_SET1(0.0f);
    int j = 0;
    for (; j + VW <= valid; j += VW) acc = V_FMA(V_LOAD(dw + j), V_LOAD(w + j), acc);
    if (j < valid) acc = V_FMA(V_LOAD_PART(dw + j, valid - j, 0.0f), V_LOAD_PART(w + j, valid - j, 0.0f), acc);
    vf dot = V_SET1(V_REDUCE_ADD(acc));
    for (j = 0; j + VW <= valid; j += VW) V_STORE(ds + j, V_MUL(V_LOAD(w + j), V_SUB(V_LOAD(dw + j), dot)));
    if (j < valid) {
        int part = valid - j;
        V_STORE_PART(ds + j, V_MUL(V_LOAD_PART(w + j, part, 0.0f), V_SUB(V_LOAD_PART(dw + j, part, 0.0f), dot)), part);
    }
    if (valid < cols) memset(ds + valid, 0, sizeof(float) * (size_t)(cols - valid));
}

/* LayerNorm's backward on one row (ts_layernorm_grad_row_fn): the two means
 * in lanes (a tail loaded with 0s adds nothing), then the update. */
static void simd_layernorm_grad_row(float *dx, const float *dy, const float *x, const float *gamma, float mu, float rs,
                                    int C) {
    vf vmu = V_SET1(mu), vrs = V_SET1(rs), one = V_SET1(1.0f), a1 = V_SET1(0.0f), a2 = V_SET1(0.0f);
    for (int j = 0; j < C; j += VW) {
        int part = C - j < VW ? C - j : VW;
        vf g = V_MUL(V_LOAD_PART(dy + j, part, 0.0f), gamma ? V_LOAD_PART(gamma + j, part, 0.0f) : one);
        a1 = V_ADD(a1, g);
        a2 = V_FMA(g, V_MUL(V_SUB(V_LOAD_PART(x + j, part, 0.0f), vmu), vrs), a2);
    }
    vf s1 = V_SET1(V_REDUCE_ADD(a1) / (float)C), s2 = V_SET1(V_REDUCE_ADD(a2) / (float)C);
    int j = 0;
    for (; j + VW <= C; j += VW) {
        vf n = V_MUL(V_SUB(V_LOAD(x + j), vmu), vrs), g = V_MUL(V_LOAD(dy + j), gamma ? V_LOAD(gamma + j) : one);
        V_STORE(dx + j, V_FMA(vrs, V_SUB(V_SUB(g, s1), V_MUL(n, s2)), V_LOAD(dx + j)));
    }
    if (j < C) {
        int part = C - j;
        vf n = V_MUL(V_SUB(V_LOAD_PART(x + j, part, 0.0f), vmu), vrs);
        vf g = V_MUL(V_LOAD_PART(dy + j, part, 0.0f), gamma ? V_LOAD_PART(gamma + j, part, 0.0f) : one);
        V_STORE_PART(dx + j, V_FMA(vrs, V_SUB(V_SUB(g, s1), V_MUL(n, s2)), V_LOAD_PART(dx + j, part, 0.0f)), part);
    }
}

/* Its parameters' share of one row (ts_layernorm_grad_params_fn). */
static void simd_layernorm_grad_params(float *dgamma, float *dbeta, const float *dy, const float *x, float mu, float rs,
                                       int64_t n) {
    vf vmu = V_SET1(mu), vrs = V_SET1(rs);
    int64_t j = 0;
    for (; j + VW <= n; j += VW) {
        vf d = V_LOAD(dy + j);
        if (dgamma) V_STORE(dgamma + j, V_ADD(V_LOAD(dgamma + j), V_MUL(V_MUL(d, V_SUB(V_LOAD(x + j), vmu)), vrs)));
        if (dbeta) V_STORE(dbeta + j, V_ADD(V_LOAD(dbeta + j), d));
    }
    ts_kern_layernorm_grad_params_ref(dgamma ? dgamma + j : NULL, dbeta ? dbeta + j : NULL, dy + j, x + j, mu, rs, n - j);
}

/* Blocks short enough that float sums of squares lose nothing a norm shows
 * (relative error ~1e-7 * log2 of the block), added up in double. */
#define SUMSQ_BLOCK 4096

static double simd_sum_squares(const float *x, int64_t n) {
    double total = 0;
    for (int64_t b = 0; b < n; b += SUMSQ_BLOCK) {
        int64_t len = n - b < SUMSQ_BLOCK ? n - b : SUMSQ_BLOCK, i = 0;
        const float *xb = x + b;
        vf s0 = V_SET1(0.0f), s1 = V_SET1(0.0f);
        for (; i + 2 * VW <= len; i += 2 * VW) {
            vf a = V_LOAD(xb + i), c = V_LOAD(xb + i + VW);
            s0 = V_FMA(a, a, s0);
            s1 = V_FMA(c, c, s1);
        }
        for (; i < len; i += VW) {
            vf a = len - i >= VW ? V_LOAD(xb + i) : V_LOAD_PART(xb + i, (int)(len - i), 0.0f);
            s0 = V_FMA(a, a, s0);
        }
        double block = (double)V_REDUCE_ADD(V_ADD(s0, s1));
        /* A square past float's range (or a NaN): the block again in double, as the reference. */
        total += isfinite(block) ? block : ts_kern_sum_squares_ref(xb, len);
    }
    return total;
}

/* The table entries every instruction set fills from this file, for its
 * ts_kern_ops initializer; the set's own gemm, dropout and peak probe go
 * beside them. */
#define SIMD_KERNEL_ENTRIES                                                                                     \
    .small_m = simd_small_m, .softmax_row = simd_softmax_row, .layernorm_row = simd_layernorm_row,               \
    .softmax_grad_row = simd_softmax_grad_row, .layernorm_grad_row = simd_layernorm_grad_row,                   \
    .layernorm_grad_params = simd_layernorm_grad_params,                                                         \
    .attn_scores = simd_attn_scores, .attn_values = simd_attn_values, .attn_pw = ATT_PW,                         \
    .add = simd_add, .scale = simd_scale, .relu = simd_relu, .gelu = simd_gelu, .gelu_tanh = simd_gelu_tanh,     \
    .silu = simd_silu, .mul = simd_mul, .relu_grad = simd_relu_grad, .gelu_grad = simd_gelu_grad,                \
    .gelu_tanh_grad = simd_gelu_tanh_grad, .adam = simd_adam, .sum_squares = simd_sum_squares,                   \
    .xent_grad = simd_xent_grad, .max_finite = simd_max_finite, .exp_sum = simd_exp_sum

#endif
