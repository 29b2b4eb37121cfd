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

/* ---- histogram ----
 * Counted without scatter: tables of counters stall on runs of equal bins,
 * which smooth data is full of. A vector of 16 bins b (0..63) becomes two
 * vectors of one-hot words, lo = 1 << b (0 when b >= 32, since variable shifts
 * by 32 or more give 0) and hi = 1 << (b ^ 32) (0 when b < 32); the count of
 * bin j (or 32 + j) in lane l is the number of lo (or hi) words with bit j
 * set in lane l. Those counts are kept bit-sliced: level k, a pair of vectors
 * lo and hi, holds bit k of every (lane, bin) count. Words are added with
 * carry-save adders (one vpternlogd for the sum bits, one for the carries)
 * arranged as in the Harley-Seal popcount: 8 vectors fill levels 0..2 and
 * carry one word of weight 8; 8 of those fill levels 3..5 and carry one of
 * weight 64, which ripples into the levels above. At the end, and every
 * HIST_CHUNK elements so that no count outgrows the levels, the 16 lanes are
 * added together, still bit-sliced, and each bin's count is read from its bit
 * in every level. About 12 instructions per 16 elements, no memory traffic
 * but the input. */

#define HIST_CHUNK (1 << 24) /* elements between flushes */
#define HIST_LEVELS 21       /* a (lane, bin) count is at most HIST_CHUNK / 16 = 2^20 */
#define HIST_SHORT 32        /* fewer elements are cheaper one by one than a flush */
#define HIST_FAST 6          /* levels the main loop keeps in registers */
#define HIST_PREFETCH 4096   /* elements ahead (16 KB) */
/* The adder tree must be inlined whole so that the levels stay in registers. */
#define HIST_INLINE static inline __attribute__((always_inline))

typedef struct planes {
    __m512i lo, hi; /* bins 0..31 and 32..63 */
} planes;

typedef struct hist_consts {
    __m512 lo, scale, top, below; /* below: a value that lands in no bin */
    __m512i one, flip;
} hist_consts;

typedef struct hist_state {
    planes lv[HIST_LEVELS]; /* lv[k]: bit k of every (lane, bin) count */
    int top;                /* levels [0, top) are in use */
} hist_state;

/* Full adder at every bit: *acc + a + b = (new *acc) + 2 * (returned carry).
 * The carry is computed from the new *acc, so that each vpternlogd overwrites
 * an input that is dead (no register copies). */
HIST_INLINE __m512i csa(__m512i *acc, __m512i a, __m512i b) {
    *acc = _mm512_ternarylogic_epi32(*acc, a, b, 0x96); /* parity */
    /* majority of (old acc, a, b) = (a & b) | (~new acc & (a ^ b)) */
    return _mm512_ternarylogic_epi32(a, b, *acc, 0xd4);
}

HIST_INLINE planes csa2(planes *acc, planes a, planes b) {
    return (planes){csa(&acc->lo, a.lo, b.lo), csa(&acc->hi, a.hi, b.hi)};
}

/* The bins of v as one-hot words. (v - lo) * scale and the clamp at 63 are
 * trf_bin's float ops in its order (top first: min returns its second operand
 * when one is NaN, so a NaN stays NaN). The clamp at 0 costs nothing: f <= -1
 * and NaN truncate to a negative b, whose shifts are >= 32 and set no bit, so
 * exactly those elements go uncounted and flush() puts them in bin 0; f in
 * (-1, 0] truncates to 0 as it should. */
HIST_INLINE planes onehot(__m512 v, const hist_consts *c) {
    __m512 f = _mm512_mul_ps(_mm512_sub_ps(v, c->lo), c->scale);
    __m512i b = _mm512_cvttps_epi32(_mm512_min_ps(c->top, f));
    return (planes){_mm512_sllv_epi32(c->one, b), _mm512_sllv_epi32(c->one, _mm512_xor_si512(b, c->flip))};
}

/* Adds x[0, 32) to level 0; returns the weight-2 carries. */
HIST_INLINE planes add32(planes *l, const float *x, const hist_consts *c) {
    /* The hardware prefetcher alone leaves the loop waiting on memory at times
     * (0.15 against 0.11 ns per element on Zen 5 for inputs not in cache; the
     * AVX2 kernel, slower, did not gain). */
    uintptr_t ahead = (uintptr_t)(x + 16) + HIST_PREFETCH * sizeof(float); /* may pass the end: no pointer */
    _mm_prefetch((const char *)(ahead - 16 * sizeof(float)), _MM_HINT_T0);
    _mm_prefetch((const char *)ahead, _MM_HINT_T0);
    return csa2(&l[0], onehot(_mm512_loadu_ps(x), c), onehot(_mm512_loadu_ps(x + 16), c));
}

/* Adds x[0, 128) to levels 0..2; returns the weight-8 carries. */
HIST_INLINE planes add128(planes *l, const float *x, const hist_consts *c) {
    planes a = add32(l, x, c), b = add32(l, x + 32, c);
    planes fours = csa2(&l[1], a, b);
    a = add32(l, x + 64, c);
    b = add32(l, x + 96, c);
    return csa2(&l[2], fours, csa2(&l[1], a, b));
}

/* Adds x[0, 1024) to levels 0..5; returns the weight-64 carries. */
HIST_INLINE planes add1024(planes *l, const float *x, const hist_consts *c) {
    planes a = add128(l, x, c), b = add128(l, x + 128, c);
    planes p = csa2(&l[3], a, b);
    a = add128(l, x + 256, c);
    b = add128(l, x + 384, c);
    planes thirty_twos = csa2(&l[4], p, csa2(&l[3], a, b));
    a = add128(l, x + 512, c);
    b = add128(l, x + 640, c);
    p = csa2(&l[3], a, b);
    a = add128(l, x + 768, c);
    b = add128(l, x + 896, c);
    return csa2(&l[5], thirty_twos, csa2(&l[4], p, csa2(&l[3], a, b)));
}

/* Adds carry (weight 2^k) to the levels from k up, with half adders; most
 * carries die within a level or two. */
HIST_INLINE void ripple(hist_state *s, int k, planes carry) {
    for (;;) {
        __m512i any = _mm512_or_si512(carry.lo, carry.hi);
        if (!_mm512_test_epi32_mask(any, any)) return;
        if (k == s->top) {
            s->lv[s->top++] = carry;
            return;
        }
        planes *l = &s->lv[k];
        planes next = {_mm512_and_si512(l->lo, carry.lo), _mm512_and_si512(l->hi, carry.hi)};
        l->lo = _mm512_xor_si512(l->lo, carry.lo);
        l->hi = _mm512_xor_si512(l->hi, carry.hi);
        carry = next;
        k++;
    }
}

/* The last x[0, left) of a chunk, left < 1024: groups of 8 vectors, the
 * lanes past the end loaded as `below` so that they set no bit. */
static void add_tail(hist_state *s, const float *x, int64_t left, const hist_consts *c) {
    for (int64_t g = 0; g < left; g += 128) {
        planes w[8];
        for (int v = 0; v < 8; v++) {
            int64_t in = left - g - 16 * v;
            __mmask16 m = in >= 16 ? (__mmask16)0xffff : in > 0 ? (__mmask16)((1u << in) - 1) : 0;
            w[v] = onehot(_mm512_mask_loadu_ps(c->below, m, x + g + 16 * v), c);
        }
        planes *l = s->lv;
        planes a = csa2(&l[0], w[0], w[1]), b = csa2(&l[0], w[2], w[3]);
        planes fours = csa2(&l[1], a, b);
        a = csa2(&l[0], w[4], w[5]);
        b = csa2(&l[0], w[6], w[7]);
        ripple(s, 3, csa2(&l[2], fours, csa2(&l[1], a, b)));
    }
}

/* Adds the counts held in s, of `elements` elements, to hist. The 16 lanes are
 * added together still bit-sliced, in 4 halving steps (carry-save, one level
 * at a time so that everything stays in registers), and bit j of each level
 * of the sum is moved to bit k of bin j's count. */
static void flush(uint64_t *hist, const hist_state *s, int64_t elements) {
    /* A (lane, bin) count is at most the number of vectors: the levels past
     * its bit length are empty, which makes short inputs cheap. */
    int n = s->top, bits = 64 - __builtin_clzll((uint64_t)(elements + 15) / 16);
    if (n > bits) n = bits;
    const __m512i zero = _mm512_setzero_si512(), lane8 = _mm512_set1_epi32(8);
    __m512i carry[4] = {zero, zero, zero, zero}; /* of each halving step */
    __m512i t[4] = {zero, zero, zero, zero};     /* counts of bins 0..15, 16..31, 32..47, 48..63 */
    __m512i bit = _mm512_set1_epi32(1);         /* 1 << k */
    /* rotating bin j's bit right by j - k puts it at bit k */
    __m512i rot = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512i rot16 = _mm512_add_epi32(rot, _mm512_set1_epi32(16));
    for (int k = 0; k < n + 4; k++) {
        /* 16 lanes to 8: lanes 0..7 of lo and of hi side by side, plus lanes 8..15. */
        __m512i a = zero, b = zero;
        if (k < n) {
            a = _mm512_shuffle_i64x2(s->lv[k].lo, s->lv[k].hi, 0x44);
            b = _mm512_shuffle_i64x2(s->lv[k].lo, s->lv[k].hi, 0xee);
        }
        carry[0] = csa(&a, b, carry[0]);
        /* Then within each half: 128-bit blocks, 64-bit pairs, 32-bit words. */
        carry[1] = csa(&a, _mm512_shuffle_i64x2(a, a, 0xb1), carry[1]);
        carry[2] = csa(&a, _mm512_shuffle_epi32(a, _MM_PERM_BADC), carry[2]);
        carry[3] = csa(&a, _mm512_shuffle_epi32(a, _MM_PERM_CDAB), carry[3]);
        /* Lane 0 of a is now bit k of the totals of bins 0..31, lane 8 of 32..63. */
        __m512i wlo = _mm512_permutexvar_epi32(zero, a), whi = _mm512_permutexvar_epi32(lane8, a);
        t[0] = _mm512_ternarylogic_epi32(t[0], _mm512_rorv_epi32(wlo, rot), bit, 0xf8); /* t | (r & bit) */
        t[1] = _mm512_ternarylogic_epi32(t[1], _mm512_rorv_epi32(wlo, rot16), bit, 0xf8);
        t[2] = _mm512_ternarylogic_epi32(t[2], _mm512_rorv_epi32(whi, rot), bit, 0xf8);
        t[3] = _mm512_ternarylogic_epi32(t[3], _mm512_rorv_epi32(whi, rot16), bit, 0xf8);
        bit = _mm512_add_epi32(bit, bit);
        rot = _mm512_sub_epi32(rot, _mm512_set1_epi32(1));
        rot16 = _mm512_sub_epi32(rot16, _mm512_set1_epi32(1));
    }
    __m512i total = zero; /* at most HIST_CHUNK */
    for (int i = 0; i < 4; i++) {
        uint64_t *h = hist + 16 * i;
        __m512i lo = _mm512_cvtepu32_epi64(_mm512_castsi512_si256(t[i]));
        __m512i hi = _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(t[i], 1));
        _mm512_storeu_si512(h, _mm512_add_epi64(_mm512_loadu_si512(h), lo));
        _mm512_storeu_si512(h + 8, _mm512_add_epi64(_mm512_loadu_si512(h + 8), hi));
        total = _mm512_add_epi32(total, t[i]);
    }
    uint64_t counted = (uint32_t)_mm512_reduce_add_epi32(total);
    hist[0] += (uint64_t)elements - counted; /* those below bin 0, see onehot() */
}

static void hist_avx512(uint64_t *hist, const float *x, int64_t n, float lo, float scale) {
    const hist_consts c = {_mm512_set1_ps(lo),
                           _mm512_set1_ps(scale),
                           _mm512_set1_ps((float)(TS_TRACE_HIST_BINS - 1)),
                           _mm512_set1_ps(-INFINITY),
                           _mm512_set1_epi32(1),
                           _mm512_set1_epi32(32)};
    const __m512i zero = _mm512_setzero_si512();
    hist_state s;
    if (n < HIST_SHORT) {
        for (int64_t i = 0; i < n; i++) hist[trf_bin(x[i], lo, scale)]++;
        return;
    }
    while (n > 0) {
        int64_t m = n < HIST_CHUNK ? n : HIST_CHUNK, i = 0;
        /* The low levels live in registers here; ripple never reads them. */
        planes l[HIST_FAST];
        for (int k = 0; k < HIST_FAST; k++) l[k] = (planes){zero, zero};
        s.top = HIST_FAST;
        for (; i + 1024 <= m; i += 1024) ripple(&s, HIST_FAST, add1024(l, x + i, &c));
        memcpy(s.lv, l, sizeof l);
        if (i < m) add_tail(&s, x + i, m - i, &c);
        flush(hist, &s, m);
        x += m;
        n -= m;
    }
}

const trf_stats_ops trf_stats_avx512 = {block_avx512, hist_avx512};

#elif defined(TRF_HAVE_X86)
/* A compiler without AVX-512: an empty table the dispatcher skips. */
const trf_stats_ops trf_stats_avx512 = {NULL, NULL};
#endif
