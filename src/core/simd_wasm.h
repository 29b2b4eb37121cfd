/* simd_wasm: the vector vocabulary of kernels_simd.h for WebAssembly's
 * SIMD128 (4 floats), plus exp and GELU, which the gemm epilogue uses too.
 * Include only from files named *_wasm.c (built by `make wasm` with
 * -msimd128; never natively).
 *
 * SIMD128 has no fused multiply-add (relaxed SIMD's is not in every
 * browser): V_FMA is a multiply then an add, two roundings, as the scalar
 * path compiled for wasm does it too.
 *
 * V_MAX and V_MIN keep x86's rule (b when either is NaN, b when equal, so
 * max(0, -0) is -0): f32x4.max would turn a NaN into NaN and pick +0 over
 * -0, and every path must give the scalar path's bits for ReLU and the
 * trace's extremes. The "pseudo" max of SIMD128 is that rule with its
 * operands swapped: pmax(b, a) = b < a ? a : b. */
#ifndef TSCOPE_SIMD_WASM_H
#define TSCOPE_SIMD_WASM_H

#include <string.h>
#include <wasm_simd128.h>

typedef v128_t vf;
#define VW 4
#define V_LOAD(p) wasm_v128_load(p)
#define V_STORE(p, v) wasm_v128_store((p), (v))
#define V_SET1(x) wasm_f32x4_splat(x)
#define V_ADD(a, b) wasm_f32x4_add((a), (b))
#define V_SUB(a, b) wasm_f32x4_sub((a), (b))
#define V_MUL(a, b) wasm_f32x4_mul((a), (b))
#define V_FMA(a, b, c) wasm_f32x4_add(wasm_f32x4_mul((a), (b)), (c)) /* a*b + c, rounded twice */
#define V_MAX(a, b) wasm_f32x4_pmax((b), (a))                        /* b when either is NaN */
#define V_MIN(a, b) wasm_f32x4_pmin((b), (a))                        /* b when either is NaN */
#define V_ABS(v) wasm_f32x4_abs(v)
/* No streaming store: a plain store (the fence has nothing to order). */
#define V_STREAM(p, v) wasm_v128_store((p), (v))
#define V_STREAM_FENCE() ((void)0)
#define V_ALIGN 16
#define V_COUNT_ZEROS(v) tsw_count_lanes(wasm_f32x4_eq((v), wasm_f32x4_splat(0.0f)))
#define V_REDUCE_ADD(v) tsw_reduce_add(v)
/* x where it is finite, fill where it is NaN or infinite; the counts of each */
#define V_FINITE_OR(x, fill) \
    wasm_v128_bitselect((x), (fill), wasm_f32x4_lt(wasm_f32x4_abs(x), wasm_f32x4_splat(__builtin_inff())))
#define V_COUNT_NAN(v) tsw_count_lanes(wasm_f32x4_ne((v), (v)))
#define V_COUNT_INF(v) tsw_count_lanes(wasm_f32x4_eq(wasm_f32x4_abs(v), wasm_f32x4_splat(__builtin_inff())))
#define V_REDUCE_MAX(v) tsw_reduce_max(v)
#define V_REDUCE_MIN(v) tsw_reduce_min(v)
#define V_EXP(v) tsw_exp(v)
#define V_GELU(v) tsw_gelu(v)
#define V_PHI(v) tsw_phi(v) /* the normal CDF, GELU's Phi */
#define V_DIV(a, b) wasm_f32x4_div((a), (b))
#define V_SQRT(v) wasm_f32x4_sqrt(v)
/* a where x > 0, else +0 (NaN x: 0) */
#define V_KEEP_GT0(x, a) wasm_v128_and(wasm_f32x4_gt((x), wasm_f32x4_splat(0.0f)), (a))
#define V_LOAD_PART(p, n, fill) tsw_load_part((p), (n), (fill))
#define V_STORE_PART(p, v, n) tsw_store_part((p), (v), (n))

/* Lanes of a comparison's mask that are set. */
static inline int tsw_count_lanes(v128_t m) { return __builtin_popcount(wasm_i32x4_bitmask(m)); }

/* The first n (< 4) floats at p, fill in the other lanes; reads nothing past p + n. */
static inline v128_t tsw_load_part(const float *p, int n, float fill) {
    float t[4] = {fill, fill, fill, fill};
    memcpy(t, p, sizeof(float) * (size_t)(n > 0 ? n : 0));
    return wasm_v128_load(t);
}

/* The first n (< 4) lanes of v to p; writes nothing past p + n. */
static inline void tsw_store_part(float *p, v128_t v, int n) {
    float t[4];
    wasm_v128_store(t, v);
    memcpy(p, t, sizeof(float) * (size_t)(n > 0 ? n : 0));
}

/* Halves, then pairs, as the x86 and NEON reductions do. */
static inline float tsw_reduce_add(v128_t v) {
    v = wasm_f32x4_add(v, wasm_i32x4_shuffle(v, v, 2, 3, 0, 1));
    v = wasm_f32x4_add(v, wasm_i32x4_shuffle(v, v, 1, 0, 3, 2));
    return wasm_f32x4_extract_lane(v, 0);
}

static inline float tsw_reduce_max(v128_t v) {
    v = V_MAX(v, wasm_i32x4_shuffle(v, v, 2, 3, 0, 1));
    v = V_MAX(v, wasm_i32x4_shuffle(v, v, 1, 0, 3, 2));
    return wasm_f32x4_extract_lane(v, 0);
}

static inline float tsw_reduce_min(v128_t v) {
    v = V_MIN(v, wasm_i32x4_shuffle(v, v, 2, 3, 0, 1));
    v = V_MIN(v, wasm_i32x4_shuffle(v, v, 1, 0, 3, 2));
    return wasm_f32x4_extract_lane(v, 0);
}

/* e^x as tsn_exp: x = n ln2 + r, a degree-6 polynomial, 2^n built in the
 * exponent bits; below ln(FLT_MIN) exactly 0; NaN stays NaN. */
static inline v128_t tsw_exp(v128_t x) {
    const v128_t lo = wasm_f32x4_splat(-87.33654f);
    v128_t keep = wasm_v128_not(wasm_f32x4_lt(x, lo)); /* not below lo: NaN is kept */
    v128_t xc = V_MAX(lo, V_MIN(wasm_f32x4_splat(88.0f), x));
    v128_t n = wasm_f32x4_nearest(wasm_f32x4_mul(xc, wasm_f32x4_splat(1.44269504088896341f)));
    /* n * 0.693359375 is exact (9 bits times a whole number under 2^8). */
    v128_t r = wasm_f32x4_sub(xc, wasm_f32x4_mul(n, wasm_f32x4_splat(0.693359375f)));
    r = wasm_f32x4_sub(r, wasm_f32x4_mul(n, wasm_f32x4_splat(-2.12194440e-4f)));
    v128_t p = wasm_f32x4_splat(1.9875691500e-4f);
    p = V_FMA(p, r, wasm_f32x4_splat(1.3981999507e-3f));
    p = V_FMA(p, r, wasm_f32x4_splat(8.3334519073e-3f));
    p = V_FMA(p, r, wasm_f32x4_splat(4.1665795894e-2f));
    p = V_FMA(p, r, wasm_f32x4_splat(1.6666665459e-1f));
    p = V_FMA(p, r, wasm_f32x4_splat(5.0000001201e-1f));
    p = V_FMA(p, wasm_f32x4_mul(r, r), wasm_f32x4_add(r, wasm_f32x4_splat(1.0f)));
    v128_t e = wasm_i32x4_shl(wasm_i32x4_add(wasm_i32x4_trunc_sat_f32x4(n), wasm_i32x4_splat(127)), 23);
    v128_t y = wasm_f32x4_mul(p, e);
    return wasm_v128_and(keep, y); /* NaN: y is NaN there */
}

/* Phi(x) as tsn_phi (erfc form, relative error ~1e-7 in both tails). */
static inline v128_t tsw_phi(v128_t x) {
    const v128_t one = wasm_f32x4_splat(1.0f), half = wasm_f32x4_splat(0.5f);
    v128_t z = wasm_f32x4_mul(wasm_f32x4_abs(x), wasm_f32x4_splat(0.70710678118654752f));
    v128_t t = wasm_f32x4_div(one, V_FMA(half, z, one));
    v128_t p = wasm_f32x4_splat(0.17087277f);
    p = V_FMA(p, t, wasm_f32x4_splat(-0.82215223f));
    p = V_FMA(p, t, wasm_f32x4_splat(1.48851587f));
    p = V_FMA(p, t, wasm_f32x4_splat(-1.13520398f));
    p = V_FMA(p, t, wasm_f32x4_splat(0.27886807f));
    p = V_FMA(p, t, wasm_f32x4_splat(-0.18628806f));
    p = V_FMA(p, t, wasm_f32x4_splat(0.09678418f));
    p = V_FMA(p, t, wasm_f32x4_splat(0.37409196f));
    p = V_FMA(p, t, wasm_f32x4_splat(1.00002368f));
    p = V_FMA(p, t, wasm_f32x4_splat(-1.26551223f));
    /* e^(p - z^2) with z^2 = x^2 / 2 from x itself, not from z rounded (which
     * costs 2.6e-6 relative at x = -6 where there is no fused multiply-add to
     * hide it): x = xh + xl with xh's 12 leading bits, so xh^2 / 2 is exact
     * and e^(-xh^2 / 2) carries only exp's own error; the rest,
     * p - xl (xh + x) / 2, is of order 1. |x| stops at 20 (e^-200 is 0 in
     * float), so an infinity splits into finite parts; a NaN stays NaN. */
    v128_t xa = V_MIN(wasm_f32x4_splat(20.0f), wasm_f32x4_abs(x)), xh = wasm_v128_and(xa, wasm_i32x4_splat((int32_t)0xFFFFF000u));
    v128_t xl = wasm_f32x4_sub(xa, xh);
    v128_t rest = wasm_f32x4_sub(p, wasm_f32x4_mul(wasm_f32x4_mul(half, xl), wasm_f32x4_add(xh, xa)));
    v128_t e = wasm_f32x4_mul(tsw_exp(wasm_f32x4_mul(wasm_f32x4_splat(-0.5f), wasm_f32x4_mul(xh, xh))), tsw_exp(rest));
    v128_t half_erfc = wasm_f32x4_mul(wasm_f32x4_mul(half, t), e);
    v128_t pos = wasm_f32x4_ge(x, wasm_f32x4_splat(0.0f));
    return wasm_v128_bitselect(wasm_f32x4_sub(one, half_erfc), half_erfc, pos);
}

static inline v128_t tsw_gelu(v128_t x) { return wasm_f32x4_mul(x, tsw_phi(x)); }

#endif
