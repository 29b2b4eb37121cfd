/* kernels_avx512: the AVX512 table: its gemm micro-kernel (gemm_avx512.c), the
 * row and element-wise kernels of kernels_simd.h over simd_avx512.h. */
#include "kernels_impl.h"
#include "core/simd_avx512.h"
#define V_REGS 32
#include "kernels_simd.h"

const ts_kern_ops ts_kern_avx512_ops = {
    .isa = TS_ISA_AVX512,
    .mr = TS_KERN_AVX512_MR, .nr = TS_KERN_AVX512_NR,
    .kc_max = 2048, .a_floats = 224 * 512, .b_floats = 1 << 20,
    .ukernel = ts_kern_ukernel_avx512,
    .ukernel_pf = ts_kern_ukernel_pf_avx512,
    .pack_t = ts_kern_pack_t_avx512,
    .pack_n = ts_kern_pack_n_avx512,
    SIMD_KERNEL_ENTRIES,
    .pack_t_bf16 = ts_kern_pack_t_bf16_avx2, /* the widening is a shift; AVX2's 8 x 8 blocks fill 32-wide panels too */
    .dropout = ts_kern_dropout_avx2, .dropout_grad = ts_kern_dropout_grad_avx2,
    .fma_loop = ts_kern_fma_loop_avx512,
};
