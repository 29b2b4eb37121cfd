/* trace_hist_tree: the histogram kernel of trace_stats_<isa>.c written once
 * over the instruction set's vectors: the counting scheme, the tree of adders,
 * the tail and the loop over chunks. Included by trace_stats_avx512.c and
 * trace_stats_avx2.c after their mapping header (simd_<isa>.h: vf, VW,
 * V_LOAD, V_SET1, V_LOAD_PART, V_FINITE_OR) and these, for vectors of VW 32-bit integers:
 *   vi                  the type
 *   VI_SET1(x)          every lane x
 *   VI_AND, VI_OR, VI_XOR (a, b)
 *   VI_ANY(v)           nonzero when a bit of v is set (v is read twice)
 *   HIST_LEVELS         bits of a (lane, bin) count, HIST_CHUNK / VW at most
 * Where the sets differ they define, after including it, the functions
 * declared below the types (csa, onehot, hist_prefetch, read_out). Everything
 * here is static, compiled once per instruction set.
 *
 * Counted without scatter: tables of counters stall on runs of equal bins,
 * which smooth data is full of. A vector of VW bins b (0..63) becomes two
 * vectors of one-hot words, lo = 1 << b (0 when b >= 32, since variable shifts
 * by 32 or more give 0 on AVX2 as on AVX-512) and hi = 1 << (b ^ 32) (0 when
 * b < 32); the count of bin j (or 32 + j) in lane l is the number of lo (or
 * hi) words with bit j set in lane l. Those counts are kept bit-sliced: level
 * k, a pair of vectors lo and hi, holds bit k of every (lane, bin) count.
 * Words are added with carry-save adders arranged as in the Harley-Seal
 * popcount: 8 vectors fill levels 0..2 and carry one word of weight 8; 8 of
 * those fill levels 3..5 and carry one of weight 64, which ripples into the
 * levels above. At the end, and every HIST_CHUNK elements so that no count
 * outgrows the levels, the VW lanes are added together, still bit-sliced, and
 * each bin's count is read from its bit in every level. No memory traffic but
 * the input. */
#ifndef TSCOPE_TRACE_HIST_TREE_H
#define TSCOPE_TRACE_HIST_TREE_H

#include <math.h>
#include <string.h>

#define HIST_CHUNK (1 << 24) /* elements between flushes */
#define HIST_SHORT 32        /* fewer elements are cheaper one by one than a flush */
#define HIST_FAST 6          /* levels the main loop keeps in registers */
#define HIST_BLOCK (64 * VW) /* elements of one pass down the tree, to level 5 */
/* The adder tree must be inlined whole so that the levels stay in registers. */
#define HIST_INLINE static inline __attribute__((always_inline))

_Static_assert(HIST_CHUNK / VW < (1 << HIST_LEVELS), "a (lane, bin) count outgrows the levels");

typedef struct planes {
    vi lo, hi; /* bins 0..31 and 32..63 */
} planes;

typedef struct hist_consts {
    vf lo, scale, top, ninf;
    vi one, flip;
    bool finite; /* bin the finite elements only (hist_finite) */
} hist_consts;

typedef struct hist_state {
    planes lv[HIST_LEVELS]; /* lv[k]: bit k of every (lane, bin) count */
    int top;                /* levels [0, top) are in use */
} hist_state;

/* Full adder at every bit: *acc + a + b = (new *acc) + 2 * (returned carry). */
HIST_INLINE vi csa(vi *acc, vi a, vi b);

/* The bins of v as one-hot words. (v - lo) * scale and the clamp at 63 are
 * trf_bin's float ops in its order (top first: min returns its second operand
 * when one is NaN, so a NaN stays NaN). The clamp at 0 costs nothing: f <= -1
 * and NaN truncate to a negative b, whose shifts are >= 32 and set no bit, so
 * exactly those elements go uncounted and flush() puts them in bin 0; f in
 * (-1, 0] truncates to 0 as it should. */
HIST_INLINE planes onehot(vf v, const hist_consts *c);

/* Asks for the input ahead of x[0, 2 VW), or nothing where that did not pay. */
HIST_INLINE void hist_prefetch(const float *x);

/* Adds to hist the counts held in levels [0, n) of s, the lanes added
 * together; returns their sum (at most HIST_CHUNK). */
static uint64_t read_out(uint64_t *hist, const hist_state *s, int n);

HIST_INLINE planes csa2(planes *acc, planes a, planes b) {
    return (planes){csa(&acc->lo, a.lo, b.lo), csa(&acc->hi, a.hi, b.hi)};
}

/* The vector at x, of which x[0, in) are input: lanes past the end read as
 * -inf, which lands in no bin. The main loop's in is a constant >= VW. */
HIST_INLINE vf load_in(const float *x, int64_t in) {
    if (in >= VW) return V_LOAD(x);
    return in > 0 ? V_LOAD_PART(x, (int)in, -INFINITY) : V_SET1(-INFINITY);
}

/* v as binned: for hist_finite, a NaN or an infinity becomes -inf, which
 * lands in no bin (as the lanes past the end, and as a finite value a bin or
 * more below lo, see onehot()): what trf_binned_finite says. */
HIST_INLINE vf binnable(vf v, const hist_consts *c) { return c->finite ? V_FINITE_OR(v, c->ninf) : v; }

/* Adds the 2 vectors at x (input up to x + in) to level 0; returns the
 * weight-2 carries. */
HIST_INLINE planes add2v(planes *l, const float *x, int64_t in, const hist_consts *c) {
    hist_prefetch(x);
    return csa2(&l[0], onehot(binnable(load_in(x, in), c), c), onehot(binnable(load_in(x + VW, in - VW), c), c));
}

/* Adds the 8 vectors at x (input up to x + in) to levels 0..2; returns the
 * weight-8 carries. */
HIST_INLINE planes add8v(planes *l, const float *x, int64_t in, const hist_consts *c) {
    planes a = add2v(l, x, in, c), b = add2v(l, x + 2 * VW, in - 2 * VW, c);
    planes fours = csa2(&l[1], a, b);
    a = add2v(l, x + 4 * VW, in - 4 * VW, c);
    b = add2v(l, x + 6 * VW, in - 6 * VW, c);
    return csa2(&l[2], fours, csa2(&l[1], a, b));
}

/* Adds x[0, HIST_BLOCK) to levels 0..5; returns the weight-64 carries. */
HIST_INLINE planes add64v(planes *l, const float *x, const hist_consts *c) {
    const int64_t g = 8 * VW; /* a group of 8 vectors, all input */
    planes a = add8v(l, x, g, c), b = add8v(l, x + g, g, c);
    planes p = csa2(&l[3], a, b);
    a = add8v(l, x + 2 * g, g, c);
    b = add8v(l, x + 3 * g, g, c);
    planes thirty_twos = csa2(&l[4], p, csa2(&l[3], a, b));
    a = add8v(l, x + 4 * g, g, c);
    b = add8v(l, x + 5 * g, g, c);
    p = csa2(&l[3], a, b);
    a = add8v(l, x + 6 * g, g, c);
    b = add8v(l, x + 7 * g, g, c);
    return csa2(&l[5], thirty_twos, csa2(&l[4], p, csa2(&l[3], a, b)));
}

/* Adds carry (weight 2^k) to the levels from k up, with half adders; most
 * carries die within a level or two. */
HIST_INLINE void ripple(hist_state *s, int k, planes carry) {
    for (;;) {
        vi any = VI_OR(carry.lo, carry.hi);
        if (!VI_ANY(any)) return;
        if (k == s->top) {
            s->lv[s->top++] = carry;
            return;
        }
        planes *l = &s->lv[k];
        planes next = {VI_AND(l->lo, carry.lo), VI_AND(l->hi, carry.hi)};
        l->lo = VI_XOR(l->lo, carry.lo);
        l->hi = VI_XOR(l->hi, carry.hi);
        carry = next;
        k++;
    }
}

/* The last x[0, left) of a chunk, left < HIST_BLOCK, in groups of 8 vectors.
 * Out of line: it runs once a chunk, and inlined, its unrolled partial loads
 * cost the AVX2 main loop registers (more spills, 3% slower out of cache). */
__attribute__((noinline)) static void add_tail(hist_state *s, const float *x, int64_t left, const hist_consts *c) {
    for (int64_t g = 0; g < left; g += 8 * VW) ripple(s, 3, add8v(s->lv, x + g, left - g, c));
}

/* Adds the counts held in s, of `elements` elements, to hist; with finite,
 * those no bin counted were the NaN and infinities, and stay out. */
static void flush(uint64_t *hist, const hist_state *s, int64_t elements, bool finite) {
    /* A (lane, bin) count is at most the number of vectors: the levels past
     * its bit length are empty, which makes short inputs cheap. */
    int n = s->top, bits = 64 - __builtin_clzll((uint64_t)(elements + VW - 1) / VW);
    if (n > bits) n = bits;
    uint64_t counted = read_out(hist, s, n);
    if (!finite) hist[0] += (uint64_t)elements - counted; /* those below bin 0, see onehot() */
}

/* The hist kernel of trf_stats_ops, or with finite its hist_finite; inlined
 * into each so that `finite` is a constant in the main loop. */
HIST_INLINE void hist_bitsliced(uint64_t *hist, const float *x, int64_t n, float lo, float scale, bool finite) {
    if (n < HIST_SHORT) {
        for (int64_t i = 0; i < n; i++)
            if (!finite || trf_binned_finite(x[i], lo, scale)) hist[trf_bin(x[i], lo, scale)]++;
        return;
    }
    const hist_consts c = {V_SET1(lo),         V_SET1(scale), V_SET1((float)(TS_TRACE_HIST_BINS - 1)),
                           V_SET1(-INFINITY), VI_SET1(1),    VI_SET1(32),
                           finite};
    hist_state s;
    while (n > 0) {
        int64_t m = n < HIST_CHUNK ? n : HIST_CHUNK, i = 0;
        /* The low levels live in registers here; ripple never reads them. */
        planes l[HIST_FAST];
        for (int k = 0; k < HIST_FAST; k++) l[k] = (planes){VI_SET1(0), VI_SET1(0)};
        s.top = HIST_FAST;
        for (; i + HIST_BLOCK <= m; i += HIST_BLOCK) ripple(&s, HIST_FAST, add64v(l, x + i, &c));
        memcpy(s.lv, l, sizeof l);
        if (i < m) add_tail(&s, x + i, m - i, &c);
        flush(hist, &s, m, finite);
        x += m;
        n -= m;
    }
}

static void hist_all(uint64_t *hist, const float *x, int64_t n, float lo, float scale) {
    hist_bitsliced(hist, x, n, lo, scale, false);
}

static void hist_finite_only(uint64_t *hist, const float *x, int64_t n, float lo, float scale) {
    hist_bitsliced(hist, x, n, lo, scale, true);
}

#endif
