/* kernels_avx2: the AVX2 table: its gemm micro-kernel (gemm_avx2.c), the
 * row and element-wise kernels of kernels_simd.h over simd_avx2.h. */
#include "kernels_impl.h"
#include "core/simd_avx2.h"
#define V_REGS 16
#include "kernels_simd.h"

const ts_kern_ops ts_kern_avx2_ops = {
    .isa = TS_ISA_AVX2,
    .mr = TS_KERN_AVX2_MR, .nr = TS_KERN_AVX2_NR,
    .kc_max = 512, .a_floats = 96 * 512, .b_floats = 1 << 20,
    .ukernel = ts_kern_ukernel_avx2,
    .pack_t = ts_kern_pack_t_avx2,
    .pack_n = ts_kern_pack_n_avx2,
    .small_m = simd_small_m,
    .softmax_row = simd_softmax_row,
    .layernorm_row = simd_layernorm_row,
    .add = simd_add, .scale = simd_scale, .relu = simd_relu, .gelu = simd_gelu,
    .fma_loop = ts_kern_fma_loop_avx2,
};
