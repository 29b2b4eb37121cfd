/* kernels_simd: the row and element-wise kernels written once over the vector
 * vocabulary of a mapping header (simd_avx512.h, simd_avx2.h): vf, VW, V_LOAD,
 * V_FMA, V_EXP, ... Included by kernels_<isa>.c after its mapping header, so
 * every function here is static and compiled once per instruction set.
 * Each kernel is a vector loop and a masked tail.
 */
#ifndef TSCOPE_KERNELS_SIMD_H
#define TSCOPE_KERNELS_SIMD_H

#include <math.h>
#include <string.h>

/* in + mask over [c, c+n), -inf in lanes past n. */
static inline vf masked_in(const float *in, const float *mask, int c, int n) {
    vf x = n >= VW ? V_LOAD(in + c) : V_LOAD_PART(in + c, n, -INFINITY);
    if (mask) x = V_ADD(x, n >= VW ? V_LOAD(mask + c) : V_LOAD_PART(mask + c, n, 0.0f));
    return x;
}

static int simd_softmax_row(float *out, const float *in, int cols, int valid, const float *mask) {
    vf vmax = V_SET1(-INFINITY);
    for (int c = 0; c < valid; c += VW) vmax = V_MAX(vmax, masked_in(in, mask, c, valid - c));
    float mx = V_REDUCE_MAX(vmax);
    if (mx == -INFINITY) { /* nothing visible: zeros, not 0/0 */
        memset(out, 0, sizeof(float) * (size_t)cols);
        return 1;
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
