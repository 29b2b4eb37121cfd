/* trace_stats_avx512: the statistics kernels with 16 float lanes. Built with
 * -mavx512f (the Makefile adds it for *_avx512.c); chosen at run time only on
 * CPUs that have it. Same results as the scalar kernels up to the order of
 * float additions; the same histogram bins exactly. */
#include "trace_format.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#include <math.h>

static void block_avx512(trf_acc *acc, const float *x, float *dst, int64_t n) {
    if (n <= 0) return;
    float shift0 = isfinite(x[0]) ? x[0] : 0.0f;
    const __m512 shift = _mm512_set1_ps(shift0);
    const __m512 zero = _mm512_setzero_ps();
    __m512 s1a = zero, s1b = zero, s2a = zero, s2b = zero, saa = zero, sab = zero;
    __m512 mn = _mm512_set1_ps(INFINITY), mx = _mm512_set1_ps(-INFINITY);
    uint64_t zeros = 0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
        if (dst) {
            _mm512_storeu_ps(dst + i, a);
            _mm512_storeu_ps(dst + i + 16, b);
        }
        __m512 da = _mm512_sub_ps(a, shift), db = _mm512_sub_ps(b, shift);
        s1a = _mm512_add_ps(s1a, da);
        s1b = _mm512_add_ps(s1b, db);
        s2a = _mm512_fmadd_ps(da, da, s2a);
        s2b = _mm512_fmadd_ps(db, db, s2b);
        saa = _mm512_add_ps(saa, _mm512_abs_ps(a));
        sab = _mm512_add_ps(sab, _mm512_abs_ps(b));
        mn = _mm512_min_ps(mn, _mm512_min_ps(a, b));
        mx = _mm512_max_ps(mx, _mm512_max_ps(a, b));
        zeros += (uint64_t)__builtin_popcount(_mm512_cmp_ps_mask(a, zero, _CMP_EQ_OQ)) +
                 (uint64_t)__builtin_popcount(_mm512_cmp_ps_mask(b, zero, _CMP_EQ_OQ));
    }
    for (; i < n; i += 16) {
        int64_t left = n - i;
        __mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
        __m512 a = _mm512_maskz_loadu_ps(m, x + i);
        if (dst) _mm512_mask_storeu_ps(dst + i, m, a);
        __m512 da = _mm512_maskz_sub_ps(m, a, shift);
        s1a = _mm512_add_ps(s1a, da);
        s2a = _mm512_fmadd_ps(da, da, s2a);
        saa = _mm512_add_ps(saa, _mm512_abs_ps(a));
        mn = _mm512_mask_min_ps(mn, m, mn, a);
        mx = _mm512_mask_max_ps(mx, m, mx, a);
        zeros += (uint64_t)__builtin_popcount(_mm512_mask_cmp_ps_mask(m, a, zero, _CMP_EQ_OQ));
    }
    double t1 = (double)_mm512_reduce_add_ps(_mm512_add_ps(s1a, s1b));
    double t2 = (double)_mm512_reduce_add_ps(_mm512_add_ps(s2a, s2b));
    double ta = (double)_mm512_reduce_add_ps(_mm512_add_ps(saa, sab));
    trf_acc_add_block(acc, dst ? dst : x, n, t1, t2, ta, _mm512_reduce_min_ps(mn), _mm512_reduce_max_ps(mx),
                      zeros, shift0);
}

/* Four tables, so that runs of equal bins (smooth data) do not wait on each
 * other; one table per lane measured slower. */
static void hist_avx512(uint64_t *hist, const float *x, int64_t n, float lo, float scale) {
    uint32_t h[4][TS_TRACE_HIST_BINS];
    const __m512 vlo = _mm512_set1_ps(lo), vscale = _mm512_set1_ps(scale);
    const __m512 zero = _mm512_setzero_ps(), top = _mm512_set1_ps((float)(TS_TRACE_HIST_BINS - 1));
    while (n > 0) {
        int64_t m = n < (1 << 24) ? n : (1 << 24);
        memset(h, 0, sizeof h);
        int64_t i = 0;
        int32_t bins[16];
        for (; i + 16 <= m; i += 16) {
            __m512 f = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), vlo), vscale);
            f = _mm512_min_ps(_mm512_max_ps(f, zero), top);
            _mm512_storeu_si512(bins, _mm512_cvttps_epi32(f));
            for (int k = 0; k < 16; k += 4) {
                h[0][bins[k]]++;
                h[1][bins[k + 1]]++;
                h[2][bins[k + 2]]++;
                h[3][bins[k + 3]]++;
            }
        }
        for (; i < m; i++) h[0][trf_bin(x[i], lo, scale)]++;
        for (int b = 0; b < TS_TRACE_HIST_BINS; b++) {
            uint64_t total = 0;
            for (int k = 0; k < 4; k++) total += h[k][b];
            hist[b] += total;
        }
        x += m;
        n -= m;
    }
}

const trf_stats_ops trf_stats_avx512 = {block_avx512, hist_avx512};

#elif defined(TRF_HAVE_X86)
/* A compiler without AVX-512: an empty table the dispatcher skips. */
const trf_stats_ops trf_stats_avx512 = {NULL, NULL};
#endif
