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

/* ---- histogram ----
 * Counted without scatter as in trace_stats_avx512.c (see the scheme there):
 * a vector of 8 bins becomes one-hot words lo = 1 << b (0 for b >= 32: AVX2
 * variable shifts by 32 or more give 0 too) and hi = 1 << (b ^ 32); the
 * (lane, bin) counts are kept bit-sliced and summed with carry-save adders in
 * a Harley-Seal tree (8 vectors to levels 0..2, 8 of those carries to levels
 * 3..5, the weight-64 carry rippling above). Without vpternlogd a full adder
 * is 5 logic ops instead of 2, but that still beats 8 table increments (0.19
 * against 0.33 ns per element on Zen 5). One 64-bit one-hot word per pair of
 * elements (one set of levels, fewer registers) measured slower. */

#define HIST_CHUNK (1 << 24) /* elements between flushes */
#define HIST_LEVELS 22       /* a (lane, bin) count is at most HIST_CHUNK / 8 = 2^21 */
#define HIST_SHORT 32        /* fewer elements are cheaper one by one than a flush */
#define HIST_FAST 6          /* levels the main loop keeps in locals */
#define HIST_INLINE static inline __attribute__((always_inline))

typedef struct planes {
    __m256i lo, hi; /* bins 0..31 and 32..63 */
} planes;

typedef struct hist_consts {
    __m256 lo, scale, top, below; /* below: a value that lands in no bin */
    __m256i one, flip;
} hist_consts;

typedef struct hist_state {
    planes lv[HIST_LEVELS]; /* lv[k]: bit k of every (lane, bin) count */
    int top;                /* levels [0, top) are in use */
} hist_state;

/* Full adder at every bit: *acc + a + b = (new *acc) + 2 * (returned carry). */
HIST_INLINE __m256i csa(__m256i *acc, __m256i a, __m256i b) {
    __m256i u = _mm256_xor_si256(*acc, a);
    __m256i carry = _mm256_or_si256(_mm256_and_si256(*acc, a), _mm256_and_si256(u, b));
    *acc = _mm256_xor_si256(u, b);
    return carry;
}

HIST_INLINE planes csa2(planes *acc, planes a, planes b) {
    return (planes){csa(&acc->lo, a.lo, b.lo), csa(&acc->hi, a.hi, b.hi)};
}

/* The bins of v as one-hot words, with trf_bin's float ops in its order; the
 * clamp at 0 is implicit, as in trace_stats_avx512.c: f <= -1 and NaN give a
 * negative b that sets no bit, and flush() puts those elements in bin 0. */
HIST_INLINE planes onehot(__m256 v, const hist_consts *c) {
    __m256 f = _mm256_mul_ps(_mm256_sub_ps(v, c->lo), c->scale);
    __m256i b = _mm256_cvttps_epi32(_mm256_min_ps(c->top, f)); /* NaN stays NaN */
    return (planes){_mm256_sllv_epi32(c->one, b), _mm256_sllv_epi32(c->one, _mm256_xor_si256(b, c->flip))};
}

/* Adds x[0, 16) to level 0; returns the weight-2 carries. */
HIST_INLINE planes add16(planes *l, const float *x, const hist_consts *c) {
    return csa2(&l[0], onehot(_mm256_loadu_ps(x), c), onehot(_mm256_loadu_ps(x + 8), c));
}

/* Adds x[0, 64) to levels 0..2; returns the weight-8 carries. */
HIST_INLINE planes add64(planes *l, const float *x, const hist_consts *c) {
    planes a = add16(l, x, c), b = add16(l, x + 16, c);
    planes fours = csa2(&l[1], a, b);
    a = add16(l, x + 32, c);
    b = add16(l, x + 48, c);
    return csa2(&l[2], fours, csa2(&l[1], a, b));
}

/* Adds x[0, 512) to levels 0..5; returns the weight-64 carries. */
HIST_INLINE planes add512(planes *l, const float *x, const hist_consts *c) {
    planes a = add64(l, x, c), b = add64(l, x + 64, c);
    planes p = csa2(&l[3], a, b);
    a = add64(l, x + 128, c);
    b = add64(l, x + 192, c);
    planes thirty_twos = csa2(&l[4], p, csa2(&l[3], a, b));
    a = add64(l, x + 256, c);
    b = add64(l, x + 320, c);
    p = csa2(&l[3], a, b);
    a = add64(l, x + 384, c);
    b = add64(l, x + 448, c);
    return csa2(&l[5], thirty_twos, csa2(&l[4], p, csa2(&l[3], a, b)));
}

/* Adds carry (weight 2^k) to the levels from k up, with half adders; most
 * carries die within a level or two. */
HIST_INLINE void ripple(hist_state *s, int k, planes carry) {
    for (;;) {
        __m256i any = _mm256_or_si256(carry.lo, carry.hi);
        if (_mm256_testz_si256(any, any)) return;
        if (k == s->top) {
            s->lv[s->top++] = carry;
            return;
        }
        planes *l = &s->lv[k];
        planes next = {_mm256_and_si256(l->lo, carry.lo), _mm256_and_si256(l->hi, carry.hi)};
        l->lo = _mm256_xor_si256(l->lo, carry.lo);
        l->hi = _mm256_xor_si256(l->hi, carry.hi);
        carry = next;
        k++;
    }
}

/* The last x[0, left) of a chunk, left < 512: groups of 8 vectors, the lanes
 * past the end loaded as `below` so that they set no bit. */
static void add_tail(hist_state *s, const float *x, int64_t left, const hist_consts *c) {
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int64_t g = 0; g < left; g += 64) {
        planes w[8];
        for (int v = 0; v < 8; v++) {
            int64_t in = left - g - 8 * v;
            __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(in < 8 ? (int)in : 8), iota);
            __m256 val = _mm256_maskload_ps(x + g + 8 * v, m);
            w[v] = onehot(_mm256_blendv_ps(c->below, val, _mm256_castsi256_ps(m)), c);
        }
        planes *l = s->lv;
        planes a = csa2(&l[0], w[0], w[1]), b = csa2(&l[0], w[2], w[3]);
        planes fours = csa2(&l[1], a, b);
        a = csa2(&l[0], w[4], w[5]);
        b = csa2(&l[0], w[6], w[7]);
        ripple(s, 3, csa2(&l[2], fours, csa2(&l[1], a, b)));
    }
}

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

/* Adds the counts held in s, of `elements` elements, to hist. */
static void flush(uint64_t *hist, const hist_state *s, int64_t elements) {
    /* A (lane, bin) count is at most the number of vectors: the levels past
     * its bit length are empty, which makes short inputs cheap. */
    int n = s->top, bits = 64 - __builtin_clzll((uint64_t)(elements + 7) / 8);
    if (n > bits) n = bits;
    /* The 8 lanes added together still bit-sliced, in 3 halving steps
     * (carry-save, one level at a time so that the carries stay in registers). */
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
    uint64_t counted = read_counts(hist, p, n + 3, 0) + read_counts(hist + 32, p, n + 3, 4);
    hist[0] += (uint64_t)elements - counted; /* those below bin 0, see onehot() */
}

static void hist_avx2(uint64_t *hist, const float *x, int64_t n, float lo, float scale) {
    const hist_consts c = {_mm256_set1_ps(lo),
                           _mm256_set1_ps(scale),
                           _mm256_set1_ps((float)(TS_TRACE_HIST_BINS - 1)),
                           _mm256_set1_ps(-INFINITY),
                           _mm256_set1_epi32(1),
                           _mm256_set1_epi32(32)};
    const __m256i zero = _mm256_setzero_si256();
    hist_state s;
    if (n < HIST_SHORT) {
        for (int64_t i = 0; i < n; i++) hist[trf_bin(x[i], lo, scale)]++;
        return;
    }
    while (n > 0) {
        int64_t m = n < HIST_CHUNK ? n : HIST_CHUNK, i = 0;
        /* The low levels live in locals here; ripple never reads them. */
        planes l[HIST_FAST];
        for (int k = 0; k < HIST_FAST; k++) l[k] = (planes){zero, zero};
        s.top = HIST_FAST;
        for (; i + 512 <= m; i += 512) ripple(&s, HIST_FAST, add512(l, x + i, &c));
        memcpy(s.lv, l, sizeof l);
        if (i < m) add_tail(&s, x + i, m - i, &c);
        flush(hist, &s, m);
        x += m;
        n -= m;
    }
}

const trf_stats_ops trf_stats_avx2 = {block_avx2, hist_avx2};

#elif defined(TRF_HAVE_X86)
/* A compiler without AVX2: an empty table the dispatcher skips. */
const trf_stats_ops trf_stats_avx2 = {NULL, NULL};
#endif
