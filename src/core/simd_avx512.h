/* simd_avx512: the vector vocabulary of kernels_simd.h for AVX-512 (16 floats),
 * plus exp and GELU, which the gemm epilogue uses too. Include only from
 * files built with -mavx512f (named *_avx512.c). */
#ifndef TSCOPE_SIMD_AVX512_H
#define TSCOPE_SIMD_AVX512_H

#include <immintrin.h>

typedef __m512 vf;
#define VW 16
#define V_LOAD(p) _mm512_loadu_ps(p)
#define V_STORE(p, v) _mm512_storeu_ps((p), (v))
#define V_SET1(x) _mm512_set1_ps(x)
#define V_ADD(a, b) _mm512_add_ps((a), (b))
#define V_SUB(a, b) _mm512_sub_ps((a), (b))
#define V_MUL(a, b) _mm512_mul_ps((a), (b))
#define V_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c)) /* a*b + c */
#define V_MAX(a, b) _mm512_max_ps((a), (b))           /* b when either is NaN */
#define V_MIN(a, b) _mm512_min_ps((a), (b))           /* b when either is NaN */
#define V_ABS(v) _mm512_abs_ps(v)
#define V_STREAM(p, v) _mm512_stream_ps((p), (v))     /* p aligned to V_ALIGN bytes */
#define V_ALIGN 64
#define V_STREAM_FENCE() _mm_sfence() /* streamed stores are ordered before later ones */
#define V_COUNT_ZEROS(v) __builtin_popcount(_mm512_cmp_ps_mask((v), _mm512_setzero_ps(), _CMP_EQ_OQ))
#define V_REDUCE_ADD(v) _mm512_reduce_add_ps(v)
/* x where it is finite, fill where it is NaN or infinite; the counts of each */
#define V_FINITE_OR(x, fill) \
    _mm512_mask_mov_ps((fill), _mm512_cmp_ps_mask(_mm512_abs_ps(x), _mm512_set1_ps(__builtin_inff()), _CMP_LT_OQ), (x))
#define V_COUNT_NAN(v) __builtin_popcount(_mm512_cmp_ps_mask((v), (v), _CMP_UNORD_Q))
#define V_COUNT_INF(v) __builtin_popcount(_mm512_cmp_ps_mask(_mm512_abs_ps(v), _mm512_set1_ps(__builtin_inff()), _CMP_EQ_OQ))
#define V_REDUCE_MAX(v) _mm512_reduce_max_ps(v)
#define V_REDUCE_MIN(v) _mm512_reduce_min_ps(v)
#define V_EXP(v) ts512_exp(v)
#define V_GELU(v) ts512_gelu(v)
#define V_PHI(v) ts512_phi(v) /* the normal CDF, GELU's Phi */
#define V_DIV(a, b) _mm512_div_ps((a), (b))
#define V_SQRT(v) _mm512_sqrt_ps(v)
/* a where x > 0, else +0 (NaN x: 0) */
#define V_KEEP_GT0(x, a) _mm512_maskz_mov_ps(_mm512_cmp_ps_mask((x), _mm512_setzero_ps(), _CMP_GT_OQ), (a))
#define V_LOAD_PART(p, n, fill) _mm512_mask_loadu_ps(_mm512_set1_ps(fill), ts512_first(n), (p))
#define V_STORE_PART(p, v, n) _mm512_mask_storeu_ps((p), ts512_first(n), (v))

/* The first n (< 16) lanes. */
static inline __mmask16 ts512_first(int n) { return (__mmask16)((1u << n) - 1u); }

/* e^x to about 2 ulp: x = n ln2 + r, |r| <= ln2/2, a degree-6 polynomial for
 * e^r, then scale by 2^n. Below ln(FLT_MIN) the result is exactly 0 (so a
 * -inf mask gives 0, not a denormal); NaN stays NaN. */
static inline __m512 ts512_exp(__m512 x) {
    const __m512 lo = _mm512_set1_ps(-87.33654f);
    __mmask16 keep = _mm512_cmp_ps_mask(x, lo, _CMP_NLT_UQ);
    __m512 xc = _mm512_max_ps(lo, _mm512_min_ps(_mm512_set1_ps(88.0f), x));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_maskz_mov_ps(keep, _mm512_scalef_ps(p, n));
}

/* Phi(x), GELU's x Phi(x), from erfc(|x|/sqrt2) = t exp(-z^2 + P(t)),
 * t = 1/(1 + z/2) (Numerical Recipes' erfcc, relative error < 1.2e-7 for all
 * z), so the left tail keeps its digits instead of cancelling in 1 + erf. */
static inline __m512 ts512_phi(__m512 x) {
    const __m512 one = _mm512_set1_ps(1.0f), half = _mm512_set1_ps(0.5f);
    __m512 z = _mm512_mul_ps(_mm512_abs_ps(x), _mm512_set1_ps(0.70710678118654752f));
    __m512 t = _mm512_div_ps(one, _mm512_fmadd_ps(half, z, one));
    __m512 p = _mm512_set1_ps(0.17087277f);
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.82215223f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.48851587f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.13520398f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.27886807f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.18628806f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.09678418f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.37409196f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.00002368f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.26551223f));
    __m512 half_erfc = _mm512_mul_ps(_mm512_mul_ps(half, t), ts512_exp(_mm512_fnmadd_ps(z, z, p)));
    __mmask16 pos = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ);
    return _mm512_mask_sub_ps(half_erfc, pos, one, half_erfc);
}

static inline __m512 ts512_gelu(__m512 x) { return _mm512_mul_ps(x, ts512_phi(x)); }

#endif
