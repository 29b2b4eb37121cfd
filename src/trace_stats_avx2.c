/* trace_stats_avx2: the statistics kernels with 8 float lanes. Built with
 * -mavx2 -mfma (the Makefile adds them for *_avx2.c); chosen at run time only
 * on CPUs that have them. Same results as the scalar kernels up to the order
 * of float additions; the same histogram bins exactly. */
#include "trace_format.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#include <math.h>

#include "simd_avx2.h"

static void block_avx2(trf_acc *acc, const float *x, float *dst, int64_t n) {
    if (n <= 0) return;
    float shift0 = isfinite(x[0]) ? x[0] : 0.0f;
    const __m256 shift = _mm256_set1_ps(shift0);
    const __m256 zero = _mm256_setzero_ps();
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 s1a = zero, s1b = zero, s2a = zero, s2b = zero, saa = zero, sab = zero;
    __m256 mn = _mm256_set1_ps(INFINITY), mx = _mm256_set1_ps(-INFINITY);
    uint64_t zeros = 0;
    bool stream = dst && ((uintptr_t)dst & 31) == 0; /* as in block_avx512 */
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
        if (stream) {
            _mm256_stream_ps(dst + i, a);
            _mm256_stream_ps(dst + i + 8, b);
        } else if (dst) {
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
    if (stream) _mm_sfence();
    float t1 = V_REDUCE_ADD(_mm256_add_ps(s1a, s1b)), t2 = V_REDUCE_ADD(_mm256_add_ps(s2a, s2b));
    float ta = V_REDUCE_ADD(_mm256_add_ps(saa, sab));
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

const trf_stats_ops trf_stats_avx2 = {block_avx2, hist_bitsliced};

#elif defined(TRF_HAVE_X86)
/* A compiler without AVX2: an empty table the dispatcher skips. */
const trf_stats_ops trf_stats_avx2 = {NULL, NULL};
#endif
