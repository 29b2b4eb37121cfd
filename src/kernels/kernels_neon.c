/* kernels_neon: the ARM64 NEON table: its gemm micro-kernel (gemm_neon.c),
 * the row and element-wise kernels of kernels_simd.h over simd_neon.h. */
#include "kernels_impl.h"
#include "core/simd_neon.h"
#define V_REGS 32
#include "kernels_simd.h"

/* Blocks for cores with 64-128 KB of L1 and 1 MB or more of L2: a packed B
 * panel (kc x 12) is 24 KB at kc = 512, an A panel 16 KB. */
const ts_kern_ops ts_kern_neon_ops = {
    .isa = TS_ISA_NEON,
    .mr = TS_KERN_NEON_MR, .nr = TS_KERN_NEON_NR,
    .kc_max = 512, .a_floats = 96 * 512, .b_floats = 1 << 20,
    .ukernel = ts_kern_ukernel_neon,
    .pack_t = ts_kern_pack_t_neon,
    .pack_n = ts_kern_pack_n_neon,
    .pack_t_bf16 = ts_kern_pack_t_bf16_neon,
    .small_m = simd_small_m,
    .softmax_row = simd_softmax_row,
    .layernorm_row = simd_layernorm_row,
    .add = simd_add, .scale = simd_scale, .relu = simd_relu, .gelu = simd_gelu,
    .gelu_tanh = simd_gelu_tanh, .silu = simd_silu, .mul = simd_mul,
    .relu_grad = simd_relu_grad, .gelu_grad = simd_gelu_grad, .gelu_tanh_grad = simd_gelu_tanh_grad,
    .adam = simd_adam, .sum_squares = simd_sum_squares,
    .dropout = ts_kern_dropout_ref, .dropout_grad = ts_kern_dropout_grad_ref, /* no 64-bit multiply in NEON */
    .max_finite = simd_max_finite, .exp_sum = simd_exp_sum,
    .fma_loop = ts_kern_fma_loop_neon,
};
