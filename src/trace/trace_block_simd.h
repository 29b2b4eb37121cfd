/* trace_block_simd: the statistics block kernel of trace_stats_<isa>.c
 * written once over the instruction set's vectors. Included by
 * trace_stats_avx512.c, trace_stats_avx2.c and trace_stats_neon.c after their
 * mapping header (simd_<isa>.h: vf, VW, V_LOAD, V_STORE, V_STREAM,
 * V_STREAM_FENCE, V_ALIGN, V_SET1, V_ADD,
 * V_SUB, V_FMA, V_MIN, V_MAX, V_ABS, V_COUNT_ZEROS, V_REDUCE_ADD/MIN/MAX,
 * V_LOAD_PART, V_STORE_PART). Everything here is static, compiled once per
 * instruction set. */
#ifndef TSCOPE_TRACE_BLOCK_SIMD_H
#define TSCOPE_TRACE_BLOCK_SIMD_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

/* A block whose float sums came out not finite (a NaN or an infinity in it,
 * the causal mask's -inf): the same sums again with each non-finite lane
 * counted and left out (the shift in the moments, 0 in |x|, +-inf in the
 * extremes), one vector at a time. Lanes past the end load as NaN and are
 * taken off the count. */
static void block_simd_nonfinite(trf_acc *acc, const float *x, int64_t n) {
    float shift0 = 0.0f;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(x[i])) {
            shift0 = x[i];
            break;
        }
    const vf shift = V_SET1(shift0), zero = V_SET1(0.0f), one = V_SET1(1.0f);
    const vf pinf = V_SET1(INFINITY), ninf = V_SET1(-INFINITY);
    vf s1 = zero, s2 = zero, sa = zero, mn = pinf, mx = ninf;
    uint64_t nan = 0, inf = 0, zeros = 0;
    for (int64_t i = 0; i < n; i += VW) {
        int left = n - i < VW ? (int)(n - i) : VW;
        vf a = left == VW ? V_LOAD(x + i) : V_LOAD_PART(x + i, left, NAN);
        nan += (uint64_t)(V_COUNT_NAN(a) - (VW - left));
        inf += (uint64_t)V_COUNT_INF(a);
        vf d = V_SUB(V_FINITE_OR(a, shift), shift);
        s1 = V_ADD(s1, d);
        s2 = V_FMA(d, d, s2);
        sa = V_ADD(sa, V_ABS(V_FINITE_OR(a, zero)));
        mn = V_MIN(mn, V_FINITE_OR(a, pinf));
        mx = V_MAX(mx, V_FINITE_OR(a, ninf));
        zeros += (uint64_t)V_COUNT_ZEROS(V_FINITE_OR(a, one));
    }
    trf_acc_add_counted(acc, x, n, nan, inf, (double)V_REDUCE_ADD(s1), (double)V_REDUCE_ADD(s2),
                        (double)V_REDUCE_ADD(sa), V_REDUCE_MIN(mn), V_REDUCE_MAX(mx), zeros, shift0);
}

/* Moments around a shift (the block's first element), |x|, extremes and
 * zeros of x[0, n), n <= TRF_BLOCK, in float lanes, two vectors a step so
 * that the sums do not wait on each other; trf_acc_add_block merges them in
 * double (and redoes a block whose sums are not finite carefully). With dst,
 * the values are copied there on the way, with streaming stores when dst is
 * aligned: they are for the disk, and the cache is worth more to the model. */
static void block_simd(trf_acc *acc, const float *x, float *dst, int64_t n) {
    if (n <= 0) return;
    /* A block that starts or ends with a NaN or an infinity (the rows of
     * causal masked scores end with -inf) would have its sums come out not
     * finite, as any such element makes |x|'s: straight to the kernel that
     * leaves them out, which the sums would send it to anyway. */
    if (!dst && (!isfinite(x[0]) || !isfinite(x[n - 1]))) {
        block_simd_nonfinite(acc, x, n);
        return;
    }
    float shift0 = isfinite(x[0]) ? x[0] : 0.0f;
    const vf shift = V_SET1(shift0), zero = V_SET1(0.0f);
    vf s1a = zero, s1b = zero, s2a = zero, s2b = zero, saa = zero, sab = zero;
    vf mn = V_SET1(INFINITY), mx = V_SET1(-INFINITY);
    uint64_t zeros = 0;
    bool stream = dst && ((uintptr_t)dst & (V_ALIGN - 1)) == 0;
    int64_t i = 0;
    for (; i + 2 * VW <= n; i += 2 * VW) {
        vf a = V_LOAD(x + i), b = V_LOAD(x + i + VW);
        if (stream) {
            V_STREAM(dst + i, a);
            V_STREAM(dst + i + VW, b);
        } else if (dst) {
            V_STORE(dst + i, a);
            V_STORE(dst + i + VW, b);
        }
        vf da = V_SUB(a, shift), db = V_SUB(b, shift);
        s1a = V_ADD(s1a, da);
        s1b = V_ADD(s1b, db);
        s2a = V_FMA(da, da, s2a);
        s2b = V_FMA(db, db, s2b);
        saa = V_ADD(saa, V_ABS(a));
        sab = V_ADD(sab, V_ABS(b));
        mn = V_MIN(mn, V_MIN(a, b));
        mx = V_MAX(mx, V_MAX(a, b));
        zeros += (uint64_t)V_COUNT_ZEROS(a) + (uint64_t)V_COUNT_ZEROS(b);
    }
    if (stream) V_STREAM_FENCE(); /* streamed stores are seen by the writer thread before the slot is handed over */
    /* The rest a vector at a time, lanes past the end loaded as what changes
     * nothing: the shift for the moments, 0 for |x| (then not counted as
     * zeros), +-Inf for the extremes. */
    for (; i < n; i += VW) {
        int left = n - i < VW ? (int)(n - i) : VW;
        vf a0 = V_LOAD_PART(x + i, left, 0.0f);
        vf d = V_SUB(V_LOAD_PART(x + i, left, shift0), shift);
        if (dst) V_STORE_PART(dst + i, a0, left);
        s1a = V_ADD(s1a, d);
        s2a = V_FMA(d, d, s2a);
        saa = V_ADD(saa, V_ABS(a0));
        mn = V_MIN(mn, V_LOAD_PART(x + i, left, INFINITY));
        mx = V_MAX(mx, V_LOAD_PART(x + i, left, -INFINITY));
        zeros += (uint64_t)(V_COUNT_ZEROS(a0) - (VW - left));
    }
    double t1 = (double)V_REDUCE_ADD(V_ADD(s1a, s1b));
    double t2 = (double)V_REDUCE_ADD(V_ADD(s2a, s2b));
    double ta = (double)V_REDUCE_ADD(V_ADD(saa, sab));
    if (!isfinite(t1) || !isfinite(t2) || !isfinite(ta)) {
        block_simd_nonfinite(acc, dst ? dst : x, n);
        return;
    }
    trf_acc_add_block(acc, dst ? dst : x, n, t1, t2, ta, V_REDUCE_MIN(mn), V_REDUCE_MAX(mx), zeros, shift0);
}

/* The model's ReLU (its kernel's max(0, x), which keeps -0 and NaN), for
 * the statistics of an activation taken from its input. */
static void relu_simd(float *dst, const float *x, int64_t n) {
    const vf zero = V_SET1(0.0f);
    int64_t i = 0;
    for (; i + VW <= n; i += VW) V_STORE(dst + i, V_MAX(zero, V_LOAD(x + i)));
    if (i < n) V_STORE_PART(dst + i, V_MAX(zero, V_LOAD_PART(x + i, (int)(n - i), 0.0f)), (int)(n - i));
}

#endif
