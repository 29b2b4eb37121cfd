/* kernels_wasm: the WebAssembly SIMD128 table: its gemm micro-kernel
 * (gemm_wasm.c), the row and element-wise kernels of kernels_simd.h over
 * simd_wasm.h. Built only by `make wasm` (-msimd128), where it is the path
 * kernels.c prefers; the scalar reference stays selectable beside it. */
#include "kernels_impl.h"
#include "core/simd_wasm.h"
/* A browser's compiler maps the vectors to the machine's registers: 16 on x86-64. */
#define V_REGS 16
#include "kernels_simd.h"

/* ---- dropout: the scalar path's hash (ts_mix64) in 2 lanes of 64 bits ----
 * SIMD128 multiplies 64-bit lanes (keeping the low 64 bits), as the scalar
 * hash does: the same mask, two elements a multiply. */

static inline v128_t mix64(v128_t z) {
    z = wasm_i64x2_add(z, wasm_i64x2_splat((int64_t)0x9E3779B97F4A7C15ull));
    z = wasm_i64x2_mul(wasm_v128_xor(z, wasm_u64x2_shr(z, 30)), wasm_i64x2_splat((int64_t)0xBF58476D1CE4E5B9ull));
    z = wasm_i64x2_mul(wasm_v128_xor(z, wasm_u64x2_shr(z, 27)), wasm_i64x2_splat((int64_t)0x94D049BB133111EBull));
    return wasm_v128_xor(z, wasm_u64x2_shr(z, 31));
}

/* All ones in the 64-bit lane of index i where it is dropped: h >> 11 < 2^53
 * and threshold <= 2^53, so a signed compare is right. */
static inline v128_t dropped2(v128_t key, v128_t i, v128_t threshold) {
    v128_t z = mix64(wasm_v128_xor(key, wasm_i64x2_mul(i, wasm_i64x2_splat((int64_t)0xD1B54A32D192ED03ull))));
    return wasm_i64x2_lt(wasm_u64x2_shr(z, 11), threshold);
}

/* All ones in float lane j of 4 where element i + j is kept. */
static inline v128_t kept4(v128_t key, int64_t i, v128_t threshold) {
    v128_t i0 = wasm_i64x2_make(i, i + 1), i1 = wasm_i64x2_make(i + 2, i + 3);
    v128_t d = wasm_i32x4_shuffle(dropped2(key, i0, threshold), dropped2(key, i1, threshold), 0, 2, 4, 6);
    return wasm_v128_not(d);
}

static void dropout_wasm(float *out, const float *in, int64_t n, int64_t i0, uint64_t key, uint64_t threshold,
                         float keep) {
    const v128_t vkey = wasm_i64x2_splat((int64_t)key), vthr = wasm_i64x2_splat((int64_t)threshold);
    const v128_t vkeep = wasm_f32x4_splat(keep);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        wasm_v128_store(out + i, wasm_v128_and(kept4(vkey, i0 + i, vthr), wasm_f32x4_mul(wasm_v128_load(in + i), vkeep)));
    ts_kern_dropout_ref(out + i, in + i, n - i, i0 + i, key, threshold, keep);
}

static void dropout_grad_wasm(float *din, const float *dout, int64_t n, int64_t i0, uint64_t key,
                              uint64_t threshold, float keep) {
    const v128_t vkey = wasm_i64x2_splat((int64_t)key), vthr = wasm_i64x2_splat((int64_t)threshold);
    const v128_t vkeep = wasm_f32x4_splat(keep);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        v128_t g = wasm_v128_and(kept4(vkey, i0 + i, vthr), wasm_f32x4_mul(wasm_v128_load(dout + i), vkeep));
        wasm_v128_store(din + i, wasm_f32x4_add(wasm_v128_load(din + i), g));
    }
    ts_kern_dropout_grad_ref(din + i, dout + i, n - i, i0 + i, key, threshold, keep);
}

/* Blocks for the browser's one thread: a B panel (kc x 8) is 8 KB at kc =
 * 256, an A block of 64 rows 64 KB; the live page's products fit whole. */
const ts_kern_ops ts_kern_wasm_ops = {
    .isa = TS_ISA_WASM,
    .mr = TS_KERN_WASM_MR, .nr = TS_KERN_WASM_NR,
    .kc_max = 256, .a_floats = 64 * 256, .b_floats = 256 * 1024,
    .ukernel = ts_kern_ukernel_wasm,
    .pack_t = ts_kern_pack_t_wasm,
    .pack_t_bf16 = ts_kern_pack_t_bf16_scalar, /* the page runs float32 weights; bf16 widened as the scalar path does */
    .pack_n = ts_kern_pack_n_wasm,
    SIMD_KERNEL_ENTRIES,
    .dropout = dropout_wasm, .dropout_grad = dropout_grad_wasm,
    .fma_loop = ts_kern_fma_loop_wasm,
};
