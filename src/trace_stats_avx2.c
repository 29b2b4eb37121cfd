/* trace_stats_avx2: the statistics kernels with 8 float lanes. Built with
 * -mavx2 -mfma (the Makefile adds them for *_avx2.c); chosen at run time only
 * on CPUs that have them. Same results as the scalar kernels up to the order
 * of float additions; the same histogram bins exactly. */
#include "trace_format.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#include <math.h>

static float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static void block_avx2(trf_acc *acc, const float *x, float *dst, int64_t n) {
    if (n <= 0) return;
    float shift0 = isfinite(x[0]) ? x[0] : 0.0f;
    const __m256 shift = _mm256_set1_ps(shift0);
    const __m256 zero = _mm256_setzero_ps();
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 s1a = zero, s1b = zero, s2a = zero, s2b = zero, saa = zero, sab = zero;
    __m256 mn = _mm256_set1_ps(INFINITY), mx = _mm256_set1_ps(-INFINITY);
    uint64_t zeros = 0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
        if (dst) {
            _mm256_storeu_ps(dst + i, a);
            _mm256_storeu_ps(dst + i + 8, b);
        }
        __m256 da = _mm256_sub_ps(a, shift), db = _mm256_sub_ps(b, shift);
        s1a = _mm256_add_ps(s1a, da);
        s1b = _mm256_add_ps(s1b, db);
        s2a = _mm256_fmadd_ps(da, da, s2a);
        s2b = _mm256_fmadd_ps(db, db, s2b);
        saa = _mm256_add_ps(saa, _mm256_and_ps(a, absmask));
        sab = _mm256_add_ps(sab, _mm256_and_ps(b, absmask));
        mn = _mm256_min_ps(mn, _mm256_min_ps(a, b));
        mx = _mm256_max_ps(mx, _mm256_max_ps(a, b));
        zeros += (uint64_t)__builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_cmp_ps(a, zero, _CMP_EQ_OQ))) +
                 (uint64_t)__builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_cmp_ps(b, zero, _CMP_EQ_OQ)));
    }
    float t1 = hsum(_mm256_add_ps(s1a, s1b)), t2 = hsum(_mm256_add_ps(s2a, s2b));
    float ta = hsum(_mm256_add_ps(saa, sab));
    float lanes[8], mnv = INFINITY, mxv = -INFINITY;
    _mm256_storeu_ps(lanes, mn);
    for (int l = 0; l < 8; l++) mnv = lanes[l] < mnv ? lanes[l] : mnv;
    _mm256_storeu_ps(lanes, mx);
    for (int l = 0; l < 8; l++) mxv = lanes[l] > mxv ? lanes[l] : mxv;
    for (; i < n; i++) {
        float v = x[i], d = v - shift0;
        if (dst) dst[i] = v;
        t1 += d;
        t2 += d * d;
        ta += fabsf(v);
        mnv = v < mnv ? v : mnv;
        mxv = v > mxv ? v : mxv;
        zeros += v == 0.0f;
    }
    trf_acc_add_block(acc, dst ? dst : x, n, t1, t2, ta, mnv, mxv, zeros, shift0);
}

/* Four tables, as in the AVX-512 kernel. */
static void hist_avx2(uint64_t *hist, const float *x, int64_t n, float lo, float scale) {
    uint32_t h[4][TS_TRACE_HIST_BINS];
    const __m256 vlo = _mm256_set1_ps(lo), vscale = _mm256_set1_ps(scale);
    const __m256 zero = _mm256_setzero_ps(), top = _mm256_set1_ps((float)(TS_TRACE_HIST_BINS - 1));
    while (n > 0) {
        int64_t m = n < (1 << 24) ? n : (1 << 24);
        memset(h, 0, sizeof h);
        int64_t i = 0;
        int32_t bins[8];
        for (; i + 8 <= m; i += 8) {
            __m256 f = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vlo), vscale);
            f = _mm256_min_ps(_mm256_max_ps(f, zero), top);
            _mm256_storeu_si256((__m256i *)(void *)bins, _mm256_cvttps_epi32(f));
            for (int k = 0; k < 8; k += 4) {
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

const trf_stats_ops trf_stats_avx2 = {block_avx2, hist_avx2};

#elif defined(TRF_HAVE_X86)
/* A compiler without AVX2: an empty table the dispatcher skips. */
const trf_stats_ops trf_stats_avx2 = {NULL, NULL};
#endif
