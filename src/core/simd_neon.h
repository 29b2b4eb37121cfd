/* simd_neon: the vector vocabulary of kernels_simd.h for ARM64's Advanced
 * SIMD (NEON, 4 floats), plus exp and GELU, which the gemm epilogue uses too.
 * Include only from files named *_neon.c (built for aarch64, where NEON is
 * part of the base instruction set).
 *
 * V_MAX and V_MIN keep x86's rule (b when either is NaN, b when equal, so
 * max(0, -0) is -0): NEON's fmax would turn a NaN or a -0 into something
 * else, and every path must give the scalar path's bits for ReLU and the
 * trace's extremes. */
#ifndef TSCOPE_SIMD_NEON_H
#define TSCOPE_SIMD_NEON_H

#include <arm_neon.h>
#include <string.h>

typedef float32x4_t vf;
#define VW 4
#define V_LOAD(p) vld1q_f32(p)
#define V_STORE(p, v) vst1q_f32((p), (v))
#define V_SET1(x) vdupq_n_f32(x)
#define V_ADD(a, b) vaddq_f32((a), (b))
#define V_SUB(a, b) vsubq_f32((a), (b))
#define V_MUL(a, b) vmulq_f32((a), (b))
#define V_FMA(a, b, c) vfmaq_f32((c), (a), (b)) /* a*b + c */
#define V_MAX(a, b) tsn_max((a), (b))           /* b when either is NaN */
#define V_MIN(a, b) tsn_min((a), (b))           /* b when either is NaN */
#define V_ABS(v) vabsq_f32(v)
/* No streaming-store intrinsic: a plain store (the fence has nothing to order). */
#define V_STREAM(p, v) vst1q_f32((p), (v))
#define V_STREAM_FENCE() ((void)0)
#define V_ALIGN 16
#define V_COUNT_ZEROS(v) ((int)vaddvq_u32(vshrq_n_u32(vceqzq_f32(v), 31)))
#define V_REDUCE_ADD(v) vaddvq_f32(v)
/* x where it is finite, fill where it is NaN or infinite; the counts of each */
#define V_FINITE_OR(x, fill) vbslq_f32(vcltq_f32(vabsq_f32(x), vdupq_n_f32(__builtin_inff())), (x), (fill))
#define V_COUNT_NAN(v) ((int)vaddvq_u32(vshrq_n_u32(vmvnq_u32(vceqq_f32((v), (v))), 31)))
#define V_COUNT_INF(v) ((int)vaddvq_u32(vshrq_n_u32(vceqq_f32(vabsq_f32(v), vdupq_n_f32(__builtin_inff())), 31)))
#define V_REDUCE_MAX(v) tsn_reduce_max(v)
#define V_REDUCE_MIN(v) tsn_reduce_min(v)
#define V_EXP(v) tsn_exp(v)
#define V_GELU(v) tsn_gelu(v)
#define V_PHI(v) tsn_phi(v) /* the normal CDF, GELU's Phi */
#define V_DIV(a, b) vdivq_f32((a), (b))
#define V_SQRT(v) vsqrtq_f32(v)
/* a where x > 0, else +0 (NaN x: 0) */
#define V_KEEP_GT0(x, a) vreinterpretq_f32_u32(vandq_u32(vcgtq_f32((x), vdupq_n_f32(0.0f)), vreinterpretq_u32_f32(a)))
#define V_LOAD_PART(p, n, fill) tsn_load_part((p), (n), (fill))
#define V_STORE_PART(p, v, n) tsn_store_part((p), (v), (n))

static inline float32x4_t tsn_max(float32x4_t a, float32x4_t b) { return vbslq_f32(vcgtq_f32(a, b), a, b); }
static inline float32x4_t tsn_min(float32x4_t a, float32x4_t b) { return vbslq_f32(vcltq_f32(a, b), a, b); }

/* The first n (< 4) floats at p, fill in the other lanes; reads nothing past p + n. */
static inline float32x4_t tsn_load_part(const float *p, int n, float fill) {
    float t[4] = {fill, fill, fill, fill};
    memcpy(t, p, sizeof(float) * (size_t)(n > 0 ? n : 0));
    return vld1q_f32(t);
}

/* The first n (< 4) lanes of v to p; writes nothing past p + n. */
static inline void tsn_store_part(float *p, float32x4_t v, int n) {
    float t[4];
    vst1q_f32(t, v);
    memcpy(p, t, sizeof(float) * (size_t)(n > 0 ? n : 0));
}

/* Halves, then pairs, with V_MAX's rule, as the x86 reductions do. */
static inline float tsn_reduce_max(float32x4_t v) {
    v = tsn_max(v, vextq_f32(v, v, 2));
    v = tsn_max(v, vextq_f32(v, v, 1));
    return vgetq_lane_f32(v, 0);
}

static inline float tsn_reduce_min(float32x4_t v) {
    v = tsn_min(v, vextq_f32(v, v, 2));
    v = tsn_min(v, vextq_f32(v, v, 1));
    return vgetq_lane_f32(v, 0);
}

/* e^x as ts512_exp: x = n ln2 + r, a degree-6 polynomial, 2^n built in the
 * exponent bits; below ln(FLT_MIN) exactly 0; NaN stays NaN. */
static inline float32x4_t tsn_exp(float32x4_t x) {
    const float32x4_t lo = vdupq_n_f32(-87.33654f);
    uint32x4_t keep = vmvnq_u32(vcltq_f32(x, lo)); /* not below lo: NaN is kept */
    float32x4_t xc = tsn_max(lo, tsn_min(vdupq_n_f32(88.0f), x));
    float32x4_t n = vrndnq_f32(vmulq_f32(xc, vdupq_n_f32(1.44269504088896341f)));
    float32x4_t r = vfmsq_f32(xc, n, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
    float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
    p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
    p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
    p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, vmulq_f32(r, r));
    int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    float32x4_t y = vmulq_f32(p, vreinterpretq_f32_s32(e));
    return vreinterpretq_f32_u32(vandq_u32(keep, vreinterpretq_u32_f32(y))); /* NaN: y is NaN there */
}

/* Phi(x) as ts512_phi (erfc form, relative error ~1e-7 in both tails). */
static inline float32x4_t tsn_phi(float32x4_t x) {
    const float32x4_t one = vdupq_n_f32(1.0f), half = vdupq_n_f32(0.5f);
    float32x4_t z = vmulq_f32(vabsq_f32(x), vdupq_n_f32(0.70710678118654752f));
    float32x4_t t = vdivq_f32(one, vfmaq_f32(one, half, z));
    float32x4_t p = vdupq_n_f32(0.17087277f);
    p = vfmaq_f32(vdupq_n_f32(-0.82215223f), p, t);
    p = vfmaq_f32(vdupq_n_f32(1.48851587f), p, t);
    p = vfmaq_f32(vdupq_n_f32(-1.13520398f), p, t);
    p = vfmaq_f32(vdupq_n_f32(0.27886807f), p, t);
    p = vfmaq_f32(vdupq_n_f32(-0.18628806f), p, t);
    p = vfmaq_f32(vdupq_n_f32(0.09678418f), p, t);
    p = vfmaq_f32(vdupq_n_f32(0.37409196f), p, t);
    p = vfmaq_f32(vdupq_n_f32(1.00002368f), p, t);
    p = vfmaq_f32(vdupq_n_f32(-1.26551223f), p, t);
    float32x4_t half_erfc = vmulq_f32(vmulq_f32(half, t), tsn_exp(vfmsq_f32(p, z, z)));
    uint32x4_t pos = vcgeq_f32(x, vdupq_n_f32(0.0f));
    return vbslq_f32(pos, vsubq_f32(one, half_erfc), half_erfc);
}

static inline float32x4_t tsn_gelu(float32x4_t x) { return vmulq_f32(x, tsn_phi(x)); }

#endif
