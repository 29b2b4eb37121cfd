/* trace_stats_avx512: the statistics kernels with 16 float lanes. Built with
 * -mavx512f (the Makefile adds it for *_avx512.c); chosen at run time only on
 * CPUs that have it. Same results as the scalar kernels up to the order of
 * float additions; the same histogram bins exactly. */
#include "trace_format.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#include <math.h>

#include "core/simd_avx512.h"
#include "trace_block_simd.h"

/* ---- histogram ----
 * The bit-sliced counters of trace_hist_tree.h (the scheme is there) on 16
 * lanes: a full adder is two vpternlogd, about 12 instructions per 16
 * elements. */

typedef __m512i vi;
#define VI_SET1(x) _mm512_set1_epi32(x)
#define VI_AND(a, b) _mm512_and_si512((a), (b))
#define VI_OR(a, b) _mm512_or_si512((a), (b))
#define VI_XOR(a, b) _mm512_xor_si512((a), (b))
#define VI_ANY(v) _mm512_test_epi32_mask((v), (v))
#define HIST_LEVELS 21     /* a (lane, bin) count is at most HIST_CHUNK / 16 = 2^20 */
#define HIST_PREFETCH 4096 /* elements ahead (16 KB) */
#include "trace_hist_tree.h"

/* The carry is computed from the new *acc, so that each vpternlogd overwrites
 * an input that is dead (no register copies). */
HIST_INLINE __m512i csa(__m512i *acc, __m512i a, __m512i b) {
    *acc = _mm512_ternarylogic_epi32(*acc, a, b, 0x96); /* parity */
    /* majority of (old acc, a, b) = (a & b) | (~new acc & (a ^ b)) */
    return _mm512_ternarylogic_epi32(a, b, *acc, 0xd4);
}

HIST_INLINE planes onehot(__m512 v, const hist_consts *c) {
    __m512 f = _mm512_mul_ps(_mm512_sub_ps(v, c->lo), c->scale);
    __m512i b = _mm512_cvttps_epi32(_mm512_min_ps(c->top, f));
    return (planes){_mm512_sllv_epi32(c->one, b), _mm512_sllv_epi32(c->one, _mm512_xor_si512(b, c->flip))};
}

/* The hardware prefetcher alone leaves the loop waiting on memory at times
 * (0.15 against 0.11 ns per element on Zen 5 for inputs not in cache; the
 * AVX2 kernel, slower, did not gain). Past the end of the input it only asks
 * for lines nobody reads: a hint, which cannot fault. */
HIST_INLINE void hist_prefetch(const float *x) {
    uintptr_t ahead = (uintptr_t)(x + 16) + HIST_PREFETCH * sizeof(float); /* may pass the end: no pointer */
    _mm_prefetch((const char *)(ahead - 16 * sizeof(float)), _MM_HINT_T0);
    _mm_prefetch((const char *)ahead, _MM_HINT_T0);
}

/* The 16 lanes are added together still bit-sliced, in 4 halving steps
 * (carry-save, one level at a time so that everything stays in registers),
 * and bit j of each level of the sum is moved to bit k of bin j's count. */
static uint64_t read_out(uint64_t *hist, const hist_state *s, int n) {
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
    return (uint32_t)_mm512_reduce_add_epi32(total);
}

const trf_stats_ops trf_stats_avx512 = {block_simd, hist_all, hist_finite_only, relu_simd};

#elif defined(TRF_HAVE_X86)
/* A compiler without AVX-512: an empty table the dispatcher skips. */
const trf_stats_ops trf_stats_avx512 = {NULL, NULL, NULL, NULL};
#endif
