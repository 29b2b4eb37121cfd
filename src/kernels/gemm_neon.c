/* gemm_neon: the ARM64 NEON micro-kernel and panel packing.
 *
 * The design follows from the register file: 32 registers of 4 floats, and
 * an FMA that takes one operand from a lane of another register (FMLA by
 * element), so A needs no broadcast loads.
 *
 *   tile        8 x 12 of C in 24 registers (8 rows, 3 vectors of 4 columns);
 *               2 registers hold 8 values of the packed A panel, 3 hold 12 of
 *               the packed B panel: 29 of 32, none spilled.
 *   per k step  5 loads of 16 bytes (2 of A, 3 of B) for 24 FMAs: 0.21 loads
 *               per FMA (AVX2's 6 x 16 needs 0.67, counting its broadcasts).
 *   on paper    an Apple M1 / M2 performance core issues 4 128-bit FMAs and
 *               3 loads a cycle, FMA latency 4: 24 FMAs take 6 cycles, 5 loads
 *               2, and 24 independent accumulators cover the 16 FMAs in
 *               flight; about 30 instructions a step fit an 8-wide front end
 *               in 6 cycles. So the k loop is bound by the FMA pipes alone
 *               (~100%); C's loads and stores once per 8 x 12 x kc tile and
 *               the packing (once per block, O(1/M + 1/N) of the work) leave
 *               an expected ~85-90% of peak on large products: ~90 GFLOP/s of
 *               an M1 core's 102 (4 x 4 x 2 flops x 3.2 GHz). Neoverse N1
 *               (2 FMA pipes, 2 loads a cycle) and V1/V2 (4 NEON FMA pipes)
 *               are also FMA-bound with this tile: the same ~85-90%.
 * A paper figure: nothing on this x86 machine can time an ARM core (the
 * cross-check runs it under emulation, for correctness only).
 *
 * Tiles narrower than 12 run a loop on the vectors they need (1, 2 or 3);
 * columns past n in the last vector are stored through a small buffer.
 */
#include "kernels_impl.h"
#include "core/simd_neon.h"

#define MR TS_KERN_NEON_MR
#define NR TS_KERN_NEON_NR
_Static_assert(MR == 8 && NR == 12, "the k loop below is written for an 8 x 12 tile");

static inline float32x4_t epilogue(float32x4_t v, ts_epilogue epi, float32x4_t bias) {
    v = vaddq_f32(v, bias);
    if (epi == TS_EPI_BIAS_RELU) return tsn_max(vdupq_n_f32(0.0f), v); /* NaN and -0 come through */
    if (epi == TS_EPI_BIAS_GELU) return tsn_gelu(v);
    return v;
}

/* Columns [4v, 4v+4) of a row that holds n: all of them, some (the rest 0) or none. */
static inline float32x4_t load_cols(const float *p, int n, int v) {
    int k = n - 4 * v;
    return k >= 4 ? vld1q_f32(p) : tsn_load_part(p, k, 0.0f);
}

static inline void store_cols(float *p, float32x4_t x, int n, int v) {
    int k = n - 4 * v;
    if (k >= 4)
        vst1q_f32(p, x);
    else if (k > 0)
        tsn_store_part(p, x, k);
}

/* One step of k for vector v of B: rows 0..3 take lanes of a0, rows 4..7 of a1. */
#define FMA_ROWS(v)                                                   \
    do {                                                              \
        acc[0][v] = vfmaq_laneq_f32(acc[0][v], b[v], a0, 0);          \
        acc[1][v] = vfmaq_laneq_f32(acc[1][v], b[v], a0, 1);          \
        acc[2][v] = vfmaq_laneq_f32(acc[2][v], b[v], a0, 2);          \
        acc[3][v] = vfmaq_laneq_f32(acc[3][v], b[v], a0, 3);          \
        acc[4][v] = vfmaq_laneq_f32(acc[4][v], b[v], a1, 0);          \
        acc[5][v] = vfmaq_laneq_f32(acc[5][v], b[v], a1, 1);          \
        acc[6][v] = vfmaq_laneq_f32(acc[6][v], b[v], a1, 2);          \
        acc[7][v] = vfmaq_laneq_f32(acc[7][v], b[v], a1, 3);          \
    } while (0)

static inline __attribute__((always_inline)) void tile(const int NV, int kc, const float *pa, const float *pb,
                                                       float *c, int64_t ldc, int m, int n, float alpha,
                                                       float beta, ts_epilogue epi, const float *bias) {
    float32x4_t acc[MR][3];
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
        acc[i][0] = acc[i][1] = acc[i][2] = vdupq_n_f32(0.0f);
        /* C is needed only after the k loop: start fetching it now. */
        __builtin_prefetch(c + i * ldc, 1, 3);
        if (NV == 3) __builtin_prefetch(c + i * ldc + 11, 1, 3);
    }
    for (int p = 0; p < kc; p++, pa += MR, pb += NR) {
        float32x4_t a0 = vld1q_f32(pa), a1 = vld1q_f32(pa + 4), b[3];
        b[0] = vld1q_f32(pb);
        b[1] = NV >= 2 ? vld1q_f32(pb + 4) : b[0];
        b[2] = NV == 3 ? vld1q_f32(pb + 8) : b[0];
        FMA_ROWS(0);
        if (NV >= 2) FMA_ROWS(1);
        if (NV == 3) FMA_ROWS(2);
    }
    const float32x4_t va = vdupq_n_f32(alpha), vb = vdupq_n_f32(beta);
    float32x4_t bv[3] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    if (epi != TS_EPI_NONE)
        for (int v = 0; v < NV; v++) bv[v] = n > 4 * v ? load_cols(bias + 4 * v, n, v) : bv[v];
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
        if (i >= m) break;
        float *cr = c + i * ldc;
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++) {
            if (n <= 4 * v) break;
            float32x4_t x = alpha == 1.0f ? acc[i][v] : vmulq_f32(va, acc[i][v]); /* 1*x is x: same bits */
            if (beta != 0) x = vfmaq_f32(x, vb, load_cols(cr + 4 * v, n, v)); /* else C may be NaN */
            if (epi != TS_EPI_NONE) x = epilogue(x, epi, bv[v]);
            store_cols(cr + 4 * v, x, n, v);
        }
    }
}

void ts_kern_ukernel_neon(int kc, const float *pa, const float *pb, float *c, int64_t ldc, int m, int n,
                          float alpha, float beta, ts_epilogue epi, const float *bias) {
    if (n > 8)
        tile(3, kc, pa, pb, c, ldc, m, n, alpha, beta, epi, bias);
    else if (n > 4)
        tile(2, kc, pa, pb, c, ldc, m, n, alpha, beta, epi, bias);
    else
        tile(1, kc, pa, pb, c, ldc, m, n, alpha, beta, epi, bias);
}

/* r[0..3] = the transpose of r[0..3]. */
static inline void transpose4(float32x4_t r[4]) {
    float32x4_t t0 = vtrn1q_f32(r[0], r[1]), t1 = vtrn2q_f32(r[0], r[1]);
    float32x4_t t2 = vtrn1q_f32(r[2], r[3]), t3 = vtrn2q_f32(r[2], r[3]);
    float64x2_t d0 = vreinterpretq_f64_f32(t0), d1 = vreinterpretq_f64_f32(t1);
    float64x2_t d2 = vreinterpretq_f64_f32(t2), d3 = vreinterpretq_f64_f32(t3);
    r[0] = vreinterpretq_f32_f64(vtrn1q_f64(d0, d2));
    r[1] = vreinterpretq_f32_f64(vtrn1q_f64(d1, d3));
    r[2] = vreinterpretq_f32_f64(vtrn2q_f64(d0, d2));
    r[3] = vreinterpretq_f32_f64(vtrn2q_f64(d1, d3));
}

/* 4 x 4 blocks: 4 rows (along p) in, transposed in registers, 4 panel rows
 * out; the last kc % 4 columns one by one. Panels are 8 or 12 wide. */
void ts_kern_pack_t_neon(float *dst, int w, const float *src, int64_t lds, int m, int kc) {
    for (int i0 = 0; i0 < w; i0 += 4) {
        int p = 0;
        for (; p + 4 <= kc; p += 4) {
            float32x4_t r[4];
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++)
                r[i] = i0 + i < m ? vld1q_f32(src + (int64_t)(i0 + i) * lds + p) : vdupq_n_f32(0.0f);
            transpose4(r);
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) vst1q_f32(dst + (int64_t)(p + q) * w + i0, r[q]);
        }
        for (; p < kc; p++)
            for (int i = 0; i < 4; i++)
                dst[(int64_t)p * w + i0 + i] = i0 + i < m ? src[(int64_t)(i0 + i) * lds + p] : 0.0f;
    }
}

/* 4 bf16 widened to float32: each moved to the top 16 bits of its lane. */
static inline float32x4_t widen4(const ts_bf16 *p) { return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16)); }

/* ts_kern_pack_t_neon from bf16 weights, widened as loaded. */
void ts_kern_pack_t_bf16_neon(float *dst, int w, const ts_bf16 *src, int64_t lds, int m, int kc) {
    for (int i0 = 0; i0 < w; i0 += 4) {
        int p = 0;
        for (; p + 4 <= kc; p += 4) {
            float32x4_t r[4];
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++) r[i] = i0 + i < m ? widen4(src + (int64_t)(i0 + i) * lds + p) : vdupq_n_f32(0.0f);
            transpose4(r);
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) vst1q_f32(dst + (int64_t)(p + q) * w + i0, r[q]);
        }
        for (; p < kc; p++)
            for (int i = 0; i < 4; i++)
                dst[(int64_t)p * w + i0 + i] = i0 + i < m ? ts_bf16_to_f32(src[(int64_t)(i0 + i) * lds + p]) : 0.0f;
    }
}

/* Rows of up to 8 or 12 floats: the first n copied, zeros after. */
void ts_kern_pack_n_neon(float *dst, int w, const float *src, int64_t lds, int n, int kc) {
    for (int p = 0; p < kc; p++, dst += w, src += lds)
        for (int v = 0; v < w / 4; v++) vst1q_f32(dst + 4 * v, n >= 4 * v + 4 ? vld1q_f32(src + 4 * v)
                                                               : tsn_load_part(src + 4 * v, n - 4 * v, 0.0f));
}

/* 24 independent FMA chains, as many as the micro-kernel keeps: enough for
 * 4 pipes of latency 4 (Apple M-series, Neoverse V1). */
double ts_kern_fma_loop_neon(int64_t iters, float *sink) {
    float32x4_t a[24], b = vdupq_n_f32(1.0000001f), c = vdupq_n_f32(0.999999f);
    for (int i = 0; i < 24; i++) a[i] = vdupq_n_f32((float)i);
    for (int64_t n = 0; n < iters; n++) {
#pragma GCC unroll 24
        for (int i = 0; i < 24; i++) a[i] = vfmaq_f32(c, a[i], b);
    }
    float s = 0;
    for (int i = 0; i < 24; i++) s += vaddvq_f32(a[i]);
    *sink = s; /* so the loop is not optimised away */
    return (double)iters * 24 * 4 * 2;
}
