/* gemm_wasm: the WebAssembly SIMD128 micro-kernel and panel packing.
 *
 * The design follows from what a browser's compiler makes of it: SIMD128's
 * 4-float vectors become SSE/AVX registers on an x86-64 machine (16, of
 * which V8 keeps a couple for itself) or NEON ones on ARM64; there is no
 * fused multiply-add, so each step of k is a multiply and an add.
 *
 *   tile        4 x 8 of C in 8 registers (4 rows, 2 vectors of 4 columns);
 *               2 registers hold 8 values of the packed B panel, 1 the
 *               broadcast value of A and 1 the product: 12, none spilled
 *               where the engine keeps 14 (a 6 x 8 tile needs 16).
 *   per k step  2 loads of B and 4 broadcast loads of A for 8 multiplies and
 *               8 adds.
 *
 * Tiles narrower than 8 run the vectors they need (1 or 2), tiles of 1 or 2
 * rows those rows only; columns past n in the last vector are stored
 * through a small buffer. The live page's
 * products are small (a keystroke adds one position), so the packing is as
 * much of the time as the tile: both are vectors.
 */
#include "kernels_impl.h"
#include "core/simd_wasm.h"

#define MR TS_KERN_WASM_MR
#define NR TS_KERN_WASM_NR
_Static_assert(MR == 4 && NR == 8, "the k loop below is written for a 4 x 8 tile");

static inline v128_t epilogue(v128_t v, ts_epilogue epi, v128_t bias) {
    v = wasm_f32x4_add(v, bias);
    if (epi == TS_EPI_BIAS_RELU) return V_MAX(wasm_f32x4_splat(0.0f), v); /* NaN and -0 come through */
    if (epi == TS_EPI_BIAS_GELU) return tsw_gelu(v);
    return v;
}

/* Columns [4v, 4v+4) of a row that holds n: all of them, or some (the rest 0). */
static inline v128_t load_cols(const float *p, int n, int v) {
    int k = n - 4 * v;
    return k >= 4 ? wasm_v128_load(p) : tsw_load_part(p, k, 0.0f);
}

static inline void store_cols(float *p, v128_t x, int n, int v) {
    int k = n - 4 * v;
    if (k >= 4)
        wasm_v128_store(p, x);
    else if (k > 0)
        tsw_store_part(p, x, k);
}

/* The first MI (1..4) rows of the tile: a product of one row (a decoding
 * step's attention over its values) does a quarter of the work, not the
 * whole tile's. Each row's sums are the same whatever MI is. */
static inline __attribute__((always_inline)) void tile(const int NV, const int MI, int kc, const float *pa,
                                                       const float *pb, float *c, int64_t ldc, int m, int n,
                                                       float alpha, float beta, ts_epilogue epi, const float *bias) {
    v128_t acc[MR][2];
#pragma GCC unroll 4
    for (int i = 0; i < MI; i++) acc[i][0] = acc[i][1] = wasm_f32x4_splat(0.0f);
    for (int p = 0; p < kc; p++, pa += MR, pb += NR) {
        v128_t b0 = wasm_v128_load(pb), b1 = NV == 2 ? wasm_v128_load(pb + 4) : b0;
#pragma GCC unroll 4
        for (int i = 0; i < MI; i++) {
            v128_t a = wasm_v128_load32_splat(pa + i);
            acc[i][0] = wasm_f32x4_add(acc[i][0], wasm_f32x4_mul(a, b0));
            if (NV == 2) acc[i][1] = wasm_f32x4_add(acc[i][1], wasm_f32x4_mul(a, b1));
        }
    }
    const v128_t va = wasm_f32x4_splat(alpha), vb = wasm_f32x4_splat(beta);
    v128_t bv[2] = {wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f)};
    if (epi != TS_EPI_NONE)
        for (int v = 0; v < NV; v++) bv[v] = n > 4 * v ? load_cols(bias + 4 * v, n, v) : bv[v];
#pragma GCC unroll 4
    for (int i = 0; i < MI; i++) {
        if (i >= m) break;
        float *cr = c + i * ldc;
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) {
            if (n <= 4 * v) break;
            v128_t x = alpha == 1.0f ? acc[i][v] : wasm_f32x4_mul(va, acc[i][v]); /* 1*x is x: same bits */
            if (beta != 0) /* else C may be NaN */
                x = wasm_f32x4_add(x, wasm_f32x4_mul(vb, load_cols(cr + 4 * v, n, v)));
            if (epi != TS_EPI_NONE) x = epilogue(x, epi, bv[v]);
            store_cols(cr + 4 * v, x, n, v);
        }
    }
}

void ts_kern_ukernel_wasm(int kc, const float *pa, const float *pb, float *c, int64_t ldc, int m, int n,
                          float alpha, float beta, ts_epilogue epi, const float *bias) {
#define TILE_ROWS(MI)                                                        \
    do {                                                                     \
        if (n > 4)                                                           \
            tile(2, MI, kc, pa, pb, c, ldc, m, n, alpha, beta, epi, bias);   \
        else                                                                 \
            tile(1, MI, kc, pa, pb, c, ldc, m, n, alpha, beta, epi, bias);   \
    } while (0)
    switch (m) {
    case 1: TILE_ROWS(1); break;
    case 2: TILE_ROWS(2); break;
    default: TILE_ROWS(MR); break;
    }
#undef TILE_ROWS
}

/* r[0..3] = the transpose of r[0..3]. */
static inline void transpose4(v128_t r[4]) {
    v128_t t0 = wasm_i32x4_shuffle(r[0], r[1], 0, 4, 1, 5), t1 = wasm_i32x4_shuffle(r[0], r[1], 2, 6, 3, 7);
    v128_t t2 = wasm_i32x4_shuffle(r[2], r[3], 0, 4, 1, 5), t3 = wasm_i32x4_shuffle(r[2], r[3], 2, 6, 3, 7);
    r[0] = wasm_i64x2_shuffle(t0, t2, 0, 2);
    r[1] = wasm_i64x2_shuffle(t0, t2, 1, 3);
    r[2] = wasm_i64x2_shuffle(t1, t3, 0, 2);
    r[3] = wasm_i64x2_shuffle(t1, t3, 1, 3);
}

/* 4 x 4 blocks: 4 rows (along p) in, transposed in registers, 4 panel rows
 * out; the last kc % 4 columns one by one. Panels are 4 or 8 wide. */
void ts_kern_pack_t_wasm(float *dst, int w, const float *src, int64_t lds, int m, int kc) {
    for (int i0 = 0; i0 < w; i0 += 4) {
        int p = 0;
        for (; p + 4 <= kc; p += 4) {
            v128_t r[4];
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++)
                r[i] = i0 + i < m ? wasm_v128_load(src + (int64_t)(i0 + i) * lds + p) : wasm_f32x4_splat(0.0f);
            transpose4(r);
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) wasm_v128_store(dst + (int64_t)(p + q) * w + i0, r[q]);
        }
        for (; p < kc; p++)
            for (int i = 0; i < 4; i++)
                dst[(int64_t)p * w + i0 + i] = i0 + i < m ? src[(int64_t)(i0 + i) * lds + p] : 0.0f;
    }
}

/* Rows of up to 4 or 8 floats: the first n copied, zeros after. */
void ts_kern_pack_n_wasm(float *dst, int w, const float *src, int64_t lds, int n, int kc) {
    for (int p = 0; p < kc; p++, dst += w, src += lds)
        for (int v = 0; v < w / 4; v++)
            wasm_v128_store(dst + 4 * v, n >= 4 * v + 4 ? wasm_v128_load(src + 4 * v)
                                                         : tsw_load_part(src + 4 * v, n - 4 * v, 0.0f));
}

/* 8 independent multiply-add chains, as many as the micro-kernel keeps. */
double ts_kern_fma_loop_wasm(int64_t iters, float *sink) {
    v128_t a[8], b = wasm_f32x4_splat(1.0000001f), c = wasm_f32x4_splat(0.999999f);
    for (int i = 0; i < 8; i++) a[i] = wasm_f32x4_splat((float)i);
    for (int64_t n = 0; n < iters; n++) {
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) a[i] = wasm_f32x4_add(wasm_f32x4_mul(a[i], b), c);
    }
    float s = 0;
    for (int i = 0; i < 8; i++) s += tsw_reduce_add(a[i]);
    *sink = s; /* so the loop is not optimised away */
    return (double)iters * 8 * 4 * 2;
}
