/* trace_stats_avx2: the statistics kernels with 8 float lanes. Built with
 * -mavx2 -mfma (the Makefile adds them for *_avx2.c); chosen at run time only
 * on CPUs that have them. Same results as the scalar kernels up to the order
 * of float additions; the same histogram bins exactly. */
#include "trace_format.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#include <math.h>

#include "core/simd_avx2.h"
#include "trace_block_simd.h"

/* ---- histogram ----
 * The bit-sliced counters of trace_hist_tree.h (the scheme is there) on 8
 * lanes. Without vpternlogd a full adder is 5 logic ops instead of 2, but that
 * still beats 8 table increments (0.19 against 0.33 ns per element on Zen 5).
 * One 64-bit one-hot word per pair of elements (one set of levels, fewer
 * registers) measured slower. */

typedef __m256i vi;
#define VI_SET1(x) _mm256_set1_epi32(x)
#define VI_AND(a, b) _mm256_and_si256((a), (b))
#define VI_OR(a, b) _mm256_or_si256((a), (b))
#define VI_XOR(a, b) _mm256_xor_si256((a), (b))
#define VI_ANY(v) (!_mm256_testz_si256((v), (v)))
#define HIST_LEVELS 22 /* a (lane, bin) count is at most HIST_CHUNK / 8 = 2^21 */
#include "trace_hist_tree.h"

HIST_INLINE __m256i csa(__m256i *acc, __m256i a, __m256i b) {
    __m256i u = _mm256_xor_si256(*acc, a);
    __m256i carry = _mm256_or_si256(_mm256_and_si256(*acc, a), _mm256_and_si256(u, b));
    *acc = _mm256_xor_si256(u, b);
    return carry;
}

HIST_INLINE planes onehot(__m256 v, const hist_consts *c) {
    __m256 f = _mm256_mul_ps(_mm256_sub_ps(v, c->lo), c->scale);
    __m256i b = _mm256_cvttps_epi32(_mm256_min_ps(c->top, f));
    return (planes){_mm256_sllv_epi32(c->one, b), _mm256_sllv_epi32(c->one, _mm256_xor_si256(b, c->flip))};
}

/* The hardware prefetcher is enough at this speed: prefetching as the
 * AVX-512 kernel does did not gain. */
HIST_INLINE void hist_prefetch(const float *x) { (void)x; }

/* Adds to hist[0, 32) the counts whose bit k is bit j of lane `lane` of p[k]
 * (for bin j), gathered highest level first; returns their sum. */
static uint64_t read_counts(uint64_t *hist, const __m256i *p, int n, int lane) {
    const __m256i one = _mm256_set1_epi32(1), at = _mm256_set1_epi32(lane);
    const __m256i j0 = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), j8 = _mm256_add_epi32(j0, _mm256_set1_epi32(8));
    const __m256i j16 = _mm256_add_epi32(j8, _mm256_set1_epi32(8)), j24 = _mm256_add_epi32(j16, _mm256_set1_epi32(8));
    __m256i t[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int k = n - 1; k >= 0; k--) {
        __m256i w = _mm256_permutevar8x32_epi32(p[k], at);
        /* t = 2 t + bit */
        t[0] = _mm256_or_si256(_mm256_slli_epi32(t[0], 1), _mm256_and_si256(_mm256_srlv_epi32(w, j0), one));
        t[1] = _mm256_or_si256(_mm256_slli_epi32(t[1], 1), _mm256_and_si256(_mm256_srlv_epi32(w, j8), one));
        t[2] = _mm256_or_si256(_mm256_slli_epi32(t[2], 1), _mm256_and_si256(_mm256_srlv_epi32(w, j16), one));
        t[3] = _mm256_or_si256(_mm256_slli_epi32(t[3], 1), _mm256_and_si256(_mm256_srlv_epi32(w, j24), one));
    }
    __m256i total = _mm256_setzero_si256(); /* at most HIST_CHUNK */
    for (int i = 0; i < 4; i++) {
        uint64_t *h = hist + 8 * i;
        __m256i a = _mm256_cvtepu32_epi64(_mm256_castsi256_si128(t[i]));
        __m256i b = _mm256_cvtepu32_epi64(_mm256_extracti128_si256(t[i], 1));
        _mm256_storeu_si256((__m256i *)(void *)h, _mm256_add_epi64(_mm256_loadu_si256((const __m256i *)(void *)h), a));
        _mm256_storeu_si256((__m256i *)(void *)(h + 4),
                            _mm256_add_epi64(_mm256_loadu_si256((const __m256i *)(void *)(h + 4)), b));
        total = _mm256_add_epi32(total, t[i]);
    }
    __m128i sum = _mm_add_epi32(_mm256_castsi256_si128(total), _mm256_extracti128_si256(total, 1));
    sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, 0x4e));
    sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, 0xb1));
    return (uint32_t)_mm_cvtsi128_si32(sum);
}

/* The 8 lanes are added together still bit-sliced, in 3 halving steps
 * (carry-save, one level at a time so that the carries stay in registers),
 * then read_counts gathers each bin's bits. */
static uint64_t read_out(uint64_t *hist, const hist_state *s, int n) {
    const __m256i zero = _mm256_setzero_si256();
    __m256i p[HIST_LEVELS + 3], carry[3] = {zero, zero, zero};
    for (int k = 0; k < n + 3; k++) {
        /* 8 lanes to 4: lanes 0..3 of lo and of hi side by side, plus lanes 4..7. */
        __m256i a = zero, b = zero;
        if (k < n) {
            a = _mm256_permute2x128_si256(s->lv[k].lo, s->lv[k].hi, 0x20);
            b = _mm256_permute2x128_si256(s->lv[k].lo, s->lv[k].hi, 0x31);
        }
        carry[0] = csa(&a, b, carry[0]);
        /* Then within each half: 64-bit pairs, 32-bit words. */
        carry[1] = csa(&a, _mm256_shuffle_epi32(a, 0x4e), carry[1]);
        carry[2] = csa(&a, _mm256_shuffle_epi32(a, 0xb1), carry[2]);
        p[k] = a;
    }
    /* Lane 0 of p[k] now holds bit k of the totals of bins 0..31, lane 4 of
     * bins 32..63. */
    return read_counts(hist, p, n + 3, 0) + read_counts(hist + 32, p, n + 3, 4);
}

const trf_stats_ops trf_stats_avx2 = {block_simd, hist_all, hist_finite_only, relu_simd};

#elif defined(TRF_HAVE_X86)
/* A compiler without AVX2: an empty table the dispatcher skips. */
const trf_stats_ops trf_stats_avx2 = {NULL, NULL, NULL, NULL};
#endif
