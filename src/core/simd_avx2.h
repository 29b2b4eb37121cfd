/* simd_avx2: the vector vocabulary of kernels_simd.h for AVX2+FMA (8 floats),
 * plus exp and GELU, which the gemm epilogue uses too. Include only from
 * files built with -mavx2 -mfma (named *_avx2.c). */
#ifndef TSCOPE_SIMD_AVX2_H
#define TSCOPE_SIMD_AVX2_H

#include <immintrin.h>

typedef __m256 vf;
#define VW 8
#define V_LOAD(p) _mm256_loadu_ps(p)
#define V_STORE(p, v) _mm256_storeu_ps((p), (v))
#define V_SET1(x) _mm256_set1_ps(x)
#define V_ADD(a, b) _mm256_add_ps((a), (b))
#define V_SUB(a, b) _mm256_sub_ps((a), (b))
#define V_MUL(a, b) _mm256_mul_ps((a), (b))
#define V_FMA(a, b, c) _mm256_fmadd_ps((a), (b), (c)) /* a*b + c */
#define V_MAX(a, b) _mm256_max_ps((a), (b))           /* b when either is NaN */
#define V_MIN(a, b) _mm256_min_ps((a), (b))           /* b when either is NaN */
#define V_ABS(v) _mm256_and_ps((v), _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)))
#define V_STREAM(p, v) _mm256_stream_ps((p), (v))     /* p aligned to V_ALIGN bytes */
#define V_ALIGN 32
#define V_STREAM_FENCE() _mm_sfence() /* streamed stores are ordered before later ones */
#define V_COUNT_ZEROS(v) __builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_cmp_ps((v), _mm256_setzero_ps(), _CMP_EQ_OQ)))
#define V_REDUCE_ADD(v) ts256_reduce_add(v)
/* x where it is finite, fill where it is NaN or infinite; the counts of each */
#define V_FINITE_OR(x, fill) \
    _mm256_blendv_ps((fill), (x), _mm256_cmp_ps(V_ABS(x), _mm256_set1_ps(__builtin_inff()), _CMP_LT_OQ))
#define V_COUNT_NAN(v) __builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_cmp_ps((v), (v), _CMP_UNORD_Q)))
#define V_COUNT_INF(v) \
    __builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_cmp_ps(V_ABS(v), _mm256_set1_ps(__builtin_inff()), _CMP_EQ_OQ)))
#define V_REDUCE_MAX(v) ts256_reduce_max(v)
#define V_REDUCE_MIN(v) ts256_reduce_min(v)
#define V_EXP(v) ts256_exp(v)
#define V_GELU(v) ts256_gelu(v)
#define V_PHI(v) ts256_phi(v) /* the normal CDF, GELU's Phi */
#define V_DIV(a, b) _mm256_div_ps((a), (b))
#define V_SQRT(v) _mm256_sqrt_ps(v)
/* a where x > 0, else +0 (NaN x: 0) */
#define V_KEEP_GT0(x, a) _mm256_and_ps(_mm256_cmp_ps((x), _mm256_setzero_ps(), _CMP_GT_OQ), (a))
#define V_LOAD_PART(p, n, fill) ts256_load_part((p), (n), (fill))
#define V_STORE_PART(p, v, n) _mm256_maskstore_ps((p), ts256_first(n), (v))

/* All ones in the first n (< 8) lanes. */
static inline __m256i ts256_first(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static inline __m256 ts256_load_part(const float *p, int n, float fill) {
    __m256i m = ts256_first(n);
    return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}

static inline float ts256_reduce_add(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float ts256_reduce_min(__m256 v) {
    __m128 s = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_min_ps(s, _mm_movehl_ps(s, s));
    s = _mm_min_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float ts256_reduce_max(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* e^x as ts512_exp: x = n ln2 + r, a degree-6 polynomial, 2^n built in the
 * exponent bits; below ln(FLT_MIN) exactly 0; NaN stays NaN. */
static inline __m256 ts256_exp(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.33654f);
    __m256 keep = _mm256_cmp_ps(x, lo, _CMP_NLT_UQ);
    __m256 xc = _mm256_max_ps(lo, _mm256_min_ps(_mm256_set1_ps(88.0f), x));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    return _mm256_and_ps(keep, y); /* a NaN x keeps its lane (unordered) and y is NaN there */
}

/* Phi(x) as ts512_phi (erfc form, relative error ~1e-7 in both tails). */
static inline __m256 ts256_phi(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f);
    __m256 ax = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
    __m256 z = _mm256_mul_ps(ax, _mm256_set1_ps(0.70710678118654752f));
    __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(half, z, one));
    __m256 p = _mm256_set1_ps(0.17087277f);
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.82215223f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.48851587f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.13520398f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.27886807f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.18628806f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.09678418f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.37409196f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.00002368f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.26551223f));
    __m256 half_erfc = _mm256_mul_ps(_mm256_mul_ps(half, t), ts256_exp(_mm256_fnmadd_ps(z, z, p)));
    __m256 pos = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ);
    return _mm256_blendv_ps(half_erfc, _mm256_sub_ps(one, half_erfc), pos);
}

static inline __m256 ts256_gelu(__m256 x) { return _mm256_mul_ps(x, ts256_phi(x)); }

#endif
