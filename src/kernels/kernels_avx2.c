/* kernels_avx2: the AVX2 table: its gemm micro-kernel (gemm_avx2.c), the
 * row and element-wise kernels of kernels_simd.h over simd_avx2.h. */
#include "kernels_impl.h"
#include "core/simd_avx2.h"
#define V_REGS 16
#include "kernels_simd.h"

/* ---- dropout: the scalar path's hash (ts_mix64) in 4 lanes of 64 bits ---- */

/* The low 64 bits of a * b, from three 32 x 32 -> 64 products. */
static inline __m256i mul64(__m256i a, __m256i b) {
    __m256i lo = _mm256_mul_epu32(a, b);
    __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), b),
                                     _mm256_mul_epu32(a, _mm256_srli_epi64(b, 32)));
    return _mm256_add_epi64(lo, _mm256_slli_epi64(cross, 32));
}

static inline __m256i mix64(__m256i z) {
    z = _mm256_add_epi64(z, _mm256_set1_epi64x((long long)0x9E3779B97F4A7C15ull));
    z = mul64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 30)), _mm256_set1_epi64x((long long)0xBF58476D1CE4E5B9ull));
    z = mul64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 27)), _mm256_set1_epi64x((long long)0x94D049BB133111EBull));
    return _mm256_xor_si256(z, _mm256_srli_epi64(z, 31));
}

/* All ones in float lane j of 8 where element i + j is kept: 4 hashes at a
 * time (h >> 11 < 2^53 and threshold <= 2^53, so a signed compare is right),
 * then the two 64-bit masks narrowed to 32-bit lanes in order. */
static inline __m256 kept8(uint64_t key, int64_t i, uint64_t threshold) {
    const __m256i step = _mm256_setr_epi64x(0, 1, 2, 3), mul = _mm256_set1_epi64x((long long)0xD1B54A32D192ED03ull);
    const __m256i vkey = _mm256_set1_epi64x((long long)key), thr = _mm256_set1_epi64x((long long)threshold);
    __m256i i0 = _mm256_add_epi64(_mm256_set1_epi64x(i), step), i1 = _mm256_add_epi64(i0, _mm256_set1_epi64x(4));
    __m256i h0 = _mm256_srli_epi64(mix64(_mm256_xor_si256(vkey, mul64(i0, mul))), 11);
    __m256i h1 = _mm256_srli_epi64(mix64(_mm256_xor_si256(vkey, mul64(i1, mul))), 11);
    __m256 k0 = _mm256_castsi256_ps(_mm256_cmpgt_epi64(thr, h0)), k1 = _mm256_castsi256_ps(_mm256_cmpgt_epi64(thr, h1));
    __m256 dropped = _mm256_shuffle_ps(k0, k1, _MM_SHUFFLE(2, 0, 2, 0)); /* e0 e1 e4 e5 | e2 e3 e6 e7 */
    dropped = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(dropped), _MM_SHUFFLE(3, 1, 2, 0)));
    return _mm256_andnot_ps(dropped, _mm256_castsi256_ps(_mm256_set1_epi32(-1)));
}

void ts_kern_dropout_avx2(float *out, const float *in, int64_t n, int64_t i0, uint64_t key, uint64_t threshold,
                          float keep) {
    const __m256 vkeep = _mm256_set1_ps(keep);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_and_ps(kept8(key, i0 + i, threshold), _mm256_mul_ps(_mm256_loadu_ps(in + i), vkeep)));
    ts_kern_dropout_ref(out + i, in + i, n - i, i0 + i, key, threshold, keep);
}

void ts_kern_dropout_grad_avx2(float *din, const float *dout, int64_t n, int64_t i0, uint64_t key,
                               uint64_t threshold, float keep) {
    const __m256 vkeep = _mm256_set1_ps(keep);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 g = _mm256_and_ps(kept8(key, i0 + i, threshold), _mm256_mul_ps(_mm256_loadu_ps(dout + i), vkeep));
        _mm256_storeu_ps(din + i, _mm256_add_ps(_mm256_loadu_ps(din + i), g));
    }
    ts_kern_dropout_grad_ref(din + i, dout + i, n - i, i0 + i, key, threshold, keep);
}

const ts_kern_ops ts_kern_avx2_ops = {
    .isa = TS_ISA_AVX2,
    .mr = TS_KERN_AVX2_MR, .nr = TS_KERN_AVX2_NR,
    .kc_max = 512, .a_floats = 96 * 512, .b_floats = 1 << 20,
    .ukernel = ts_kern_ukernel_avx2,
    .pack_t = ts_kern_pack_t_avx2,
    .pack_n = ts_kern_pack_n_avx2,
    SIMD_KERNEL_ENTRIES,
    .pack_t_bf16 = ts_kern_pack_t_bf16_avx2,
    .dropout = ts_kern_dropout_avx2, .dropout_grad = ts_kern_dropout_grad_avx2,
    .fma_loop = ts_kern_fma_loop_avx2,
};
