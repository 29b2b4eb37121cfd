/* kernels_neon: the ARM64 NEON table: its gemm micro-kernel (gemm_neon.c),
 * the row and element-wise kernels of kernels_simd.h over simd_neon.h. */
#include "kernels_impl.h"
#include "core/simd_neon.h"
#define V_REGS 32
#include "kernels_simd.h"

/* ---- dropout: the scalar path's hash (ts_mix64) in 2 lanes of 64 bits ----
 *
 * NEON multiplies 32 x 32 -> 64 bits (UMULL), not 64 x 64: the low 64 bits of
 * a * b are lo(a) lo(b) + ((hi(a) lo(b) + lo(a) hi(b)) << 32), as AVX2's
 * mul64 makes them. Every multiplier is a constant, so its halves are split once. */
typedef struct mul64_const {
    uint32x2_t lo, hi;
} mul64_const;

static inline mul64_const mul64_split(uint64_t b) {
    return (mul64_const){vdup_n_u32((uint32_t)b), vdup_n_u32((uint32_t)(b >> 32))};
}

static inline uint64x2_t mul64(uint64x2_t a, mul64_const b) {
    uint32x2_t alo = vmovn_u64(a), ahi = vshrn_n_u64(a, 32);
    uint64x2_t cross = vmlal_u32(vmull_u32(ahi, b.lo), alo, b.hi);
    return vmlal_u32(vshlq_n_u64(cross, 32), alo, b.lo);
}

static inline uint64x2_t xor_shift(uint64x2_t z, int s) {
    switch (s) { /* the shift must be a constant */
    case 30: return veorq_u64(z, vshrq_n_u64(z, 30));
    case 27: return veorq_u64(z, vshrq_n_u64(z, 27));
    default: return veorq_u64(z, vshrq_n_u64(z, 31));
    }
}

typedef struct hash_consts {
    mul64_const index, m1, m2;
    uint64x2_t key, golden, threshold;
} hash_consts;

static hash_consts hash_consts_for(uint64_t key, uint64_t threshold) {
    return (hash_consts){.index = mul64_split(0xD1B54A32D192ED03ull), .m1 = mul64_split(0xBF58476D1CE4E5B9ull),
                         .m2 = mul64_split(0x94D049BB133111EBull), .key = vdupq_n_u64(key),
                         .golden = vdupq_n_u64(0x9E3779B97F4A7C15ull), .threshold = vdupq_n_u64(threshold)};
}

/* All ones in the 64-bit lane of index i where it is dropped. */
static inline uint64x2_t dropped2(const hash_consts *h, uint64x2_t i) {
    uint64x2_t z = vaddq_u64(veorq_u64(h->key, mul64(i, h->index)), h->golden);
    z = mul64(xor_shift(z, 30), h->m1);
    z = mul64(xor_shift(z, 27), h->m2);
    z = xor_shift(z, 31);
    return vcltq_u64(vshrq_n_u64(z, 11), h->threshold);
}

/* All ones in float lane j of 4 where element i + j is kept. */
static inline uint32x4_t kept4(const hash_consts *h, int64_t i) {
    const uint64x2_t i0 = vaddq_u64(vdupq_n_u64((uint64_t)i), vcombine_u64(vcreate_u64(0), vcreate_u64(1)));
    uint32x2_t d0 = vmovn_u64(dropped2(h, i0)), d1 = vmovn_u64(dropped2(h, vaddq_u64(i0, vdupq_n_u64(2))));
    return vmvnq_u32(vcombine_u32(d0, d1));
}

static void dropout_neon(float *out, const float *in, int64_t n, int64_t i0, uint64_t key, uint64_t threshold,
                         float keep) {
    const hash_consts h = hash_consts_for(key, threshold);
    const float32x4_t vkeep = vdupq_n_f32(keep);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        uint32x4_t y = vreinterpretq_u32_f32(vmulq_f32(vld1q_f32(in + i), vkeep));
        vst1q_f32(out + i, vreinterpretq_f32_u32(vandq_u32(kept4(&h, i0 + i), y)));
    }
    ts_kern_dropout_ref(out + i, in + i, n - i, i0 + i, key, threshold, keep);
}

static void dropout_grad_neon(float *din, const float *dout, int64_t n, int64_t i0, uint64_t key,
                              uint64_t threshold, float keep) {
    const hash_consts h = hash_consts_for(key, threshold);
    const float32x4_t vkeep = vdupq_n_f32(keep);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        uint32x4_t g = vreinterpretq_u32_f32(vmulq_f32(vld1q_f32(dout + i), vkeep));
        float32x4_t add = vreinterpretq_f32_u32(vandq_u32(kept4(&h, i0 + i), g));
        vst1q_f32(din + i, vaddq_f32(vld1q_f32(din + i), add));
    }
    ts_kern_dropout_grad_ref(din + i, dout + i, n - i, i0 + i, key, threshold, keep);
}

/* Blocks for cores with 64-128 KB of L1 and 1 MB or more of L2: a packed B
 * panel (kc x 12) is 24 KB at kc = 512, an A panel 16 KB. */
const ts_kern_ops ts_kern_neon_ops = {
    .isa = TS_ISA_NEON,
    .mr = TS_KERN_NEON_MR, .nr = TS_KERN_NEON_NR,
    .kc_max = 512, .a_floats = 96 * 512, .b_floats = 1 << 20,
    .ukernel = ts_kern_ukernel_neon,
    .pack_t = ts_kern_pack_t_neon,
    .pack_n = ts_kern_pack_n_neon,
    SIMD_KERNEL_ENTRIES,
    .dropout = dropout_neon, .dropout_grad = dropout_grad_neon,
    .pack_t_bf16 = ts_kern_pack_t_bf16_neon,
    .fma_loop = ts_kern_fma_loop_neon,
};
