/* trace_stats_neon: the statistics kernels with 4 float lanes (ARM64 NEON,
 * part of the base instruction set, so built for every aarch64 target).
 * Same results as the scalar kernels up to the order of float additions; the
 * same histogram bins exactly. */
#include "trace_format.h"

#if defined(TRF_HAVE_NEON)
#include <arm_neon.h>
#include <math.h>

#include "core/simd_neon.h"
#include "trace_block_simd.h"

/* ---- histogram ----
 * The bit-sliced counters of trace_hist_tree.h (the scheme is there) on 4
 * lanes. NEON's bit select makes the carry of a full adder one instruction
 * (3 a full adder, against 5 on AVX2). */

typedef uint32x4_t vi;
#define VI_SET1(x) vdupq_n_u32((uint32_t)(x))
#define VI_AND(a, b) vandq_u32((a), (b))
#define VI_OR(a, b) vorrq_u32((a), (b))
#define VI_XOR(a, b) veorq_u32((a), (b))
#define VI_ANY(v) (vmaxvq_u32(v) != 0)
#define HIST_LEVELS 23 /* a (lane, bin) count is at most HIST_CHUNK / 4 = 2^22 */
#include "trace_hist_tree.h"

HIST_INLINE uint32x4_t csa(uint32x4_t *acc, uint32x4_t a, uint32x4_t b) {
    uint32x4_t u = veorq_u32(*acc, a);
    uint32x4_t carry = vbslq_u32(u, b, *acc); /* majority: b where acc and a differ, else acc */
    *acc = veorq_u32(u, b);
    return carry;
}

/* NEON's variable shift takes a signed count from the low byte and shifts
 * right when it is negative, so the bin is clamped below at -1 (f <= -1,
 * which sets no bit, as on x86); counts of 32 or more give 0 as there. */
HIST_INLINE planes onehot(float32x4_t v, const hist_consts *c) {
    float32x4_t f = vmulq_f32(vsubq_f32(v, c->lo), c->scale);
    int32x4_t b = vmaxq_s32(vcvtq_s32_f32(tsn_min(c->top, f)), vdupq_n_s32(-1));
    int32x4_t b_hi = veorq_s32(b, vreinterpretq_s32_u32(c->flip));
    return (planes){vshlq_u32(c->one, b), vshlq_u32(c->one, b_hi)};
}

HIST_INLINE void hist_prefetch(const float *x) { (void)x; }

/* Runs once a chunk: each set bit j of lane l of level k adds 2^k to bin j
 * (or 32 + j for the hi words). */
static uint64_t read_out(uint64_t *hist, const hist_state *s, int n) {
    uint64_t counts[TS_TRACE_HIST_BINS] = {0}, total = 0;
    for (int k = 0; k < n; k++) {
        uint32_t w[2][4];
        vst1q_u32(w[0], s->lv[k].lo);
        vst1q_u32(w[1], s->lv[k].hi);
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 4; l++)
                for (uint32_t x = w[h][l]; x; x &= x - 1) counts[32 * h + __builtin_ctz(x)] += (uint64_t)1 << k;
    }
    for (int j = 0; j < TS_TRACE_HIST_BINS; j++) {
        hist[j] += counts[j];
        total += counts[j];
    }
    return total;
}

const trf_stats_ops trf_stats_neon = {block_simd, hist_all, hist_finite_only, relu_simd};
#endif
