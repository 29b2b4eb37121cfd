/* gemm_avx512: the AVX-512 micro-kernel and panel packing.
 *
 * A 14 x 32 tile of C lives in 28 zmm registers; each step of k loads two
 * vectors of the packed B panel and broadcasts 14 values of the packed A
 * panel, so 28 FMAs run on 16 loads and both FMA pipes stay busy. A tile at
 * most 16 wide (the right edge of N = 200, say) runs a one-vector loop, one
 * at most 7 tall a half-height loop, and partial tiles are stored with masks:
 * no scratch tile, no scalar edges. The _pf variant also prefetches the next
 * batched product's lines for the driver, one per step of k.
 */
#include "kernels_impl.h"
#include "core/simd_avx512.h"

#define MR TS_KERN_AVX512_MR
#define NR TS_KERN_AVX512_NR

static inline __m512 epilogue(__m512 v, ts_epilogue epi, __m512 bias) {
    v = _mm512_add_ps(v, bias);
    if (epi == TS_EPI_BIAS_RELU) return _mm512_max_ps(_mm512_setzero_ps(), v); /* NaN comes through */
    if (epi == TS_EPI_BIAS_GELU) return ts512_gelu(v);
    return v;
}

/* The lanes of vector v (0 or 1) that hold columns < n. */
static inline __mmask16 lanes(int n, int v) {
    int k = n - 16 * v;
    return k >= 16 ? (__mmask16)0xffff : k <= 0 ? (__mmask16)0 : ts512_first(k);
}

/* MV rows (MR, or MR/2 for a short bottom edge) by NV vectors (1 or 2) of
 * columns; inlined for each pair so each has its own registers. Step
 * p < pf_lines also prefetches line p from pf: one at a time among the FMAs,
 * where a burst between calls would stall on the cache's miss buffers. */
static inline __attribute__((always_inline)) void tile(const int MV, const int NV, int kc, const float *pa,
                                                       const float *pb, float *c, int64_t ldc, int m, int n,
                                                       float alpha, float beta, ts_epilogue epi,
                                                       const float *bias, const char *pf, int pf_lines) {
    __m512 acc[MR][2];
#pragma GCC unroll 14
    for (int i = 0; i < MV; i++) {
        acc[i][0] = acc[i][1] = _mm512_setzero_ps();
        /* C is needed only after the k loop: start fetching it now. */
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
        if (NV == 2) _mm_prefetch((const char *)(c + i * ldc + 31), _MM_HINT_T0);
    }
    for (int p = 0; p < kc; p++, pa += MR, pb += NR) {
        __m512 b0 = _mm512_loadu_ps(pb), b1 = NV == 2 ? _mm512_loadu_ps(pb + 16) : b0;
        if (p < pf_lines) _mm_prefetch(pf + (int64_t)p * 64, _MM_HINT_T1);
#pragma GCC unroll 14
        for (int i = 0; i < MV; i++) {
            __m512 a = _mm512_set1_ps(pa[i]);
            acc[i][0] = _mm512_fmadd_ps(a, b0, acc[i][0]);
            if (NV == 2) acc[i][1] = _mm512_fmadd_ps(a, b1, acc[i][1]);
        }
    }
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    const __mmask16 k0 = lanes(n, 0), k1 = lanes(n, 1);
    __m512 bias0 = _mm512_setzero_ps(), bias1 = bias0;
    if (epi != TS_EPI_NONE) bias0 = _mm512_maskz_loadu_ps(k0, bias), bias1 = _mm512_maskz_loadu_ps(k1, bias + 16);
#pragma GCC unroll 14
    for (int i = 0; i < MV; i++) {
        if (i >= m) break;
        float *cr = c + i * ldc;
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) {
            __mmask16 k = v ? k1 : k0;
            __m512 x = alpha == 1.0f ? acc[i][v] : _mm512_mul_ps(va, acc[i][v]); /* 1*x is x: same bits */
            if (beta != 0) { /* else C is not read: it may hold NaN */
                __m512 cv = k == 0xffff ? _mm512_loadu_ps(cr + 16 * v) : _mm512_maskz_loadu_ps(k, cr + 16 * v);
                x = _mm512_fmadd_ps(vb, cv, x);
            }
            if (epi != TS_EPI_NONE) x = epilogue(x, epi, v ? bias1 : bias0);
            if (k == 0xffff)
                _mm512_storeu_ps(cr + 16 * v, x);
            else
                _mm512_mask_storeu_ps(cr + 16 * v, k, x);
        }
    }
}

static inline __attribute__((always_inline)) void dispatch(int kc, const float *pa, const float *pb, float *c,
                                                           int64_t ldc, int m, int n, float alpha, float beta,
                                                           ts_epilogue epi, const float *bias, const char *pf,
                                                           int pf_lines) {
#define TILE(MV, NV) tile(MV, NV, kc, pa, pb, c, ldc, m, n, alpha, beta, epi, bias, pf, pf_lines)
    if (m > MR / 2) {
        if (n > 16)
            TILE(MR, 2);
        else
            TILE(MR, 1);
    } else {
        if (n > 16)
            TILE(MR / 2, 2);
        else
            TILE(MR / 2, 1);
    }
#undef TILE
}

/* No prefetching here (pf_lines 0 is a constant): the large products' loop
 * stays the plain one. */
void ts_kern_ukernel_avx512(int kc, const float *pa, const float *pb, float *c, int64_t ldc, int m,
                            int n, float alpha, float beta, ts_epilogue epi, const float *bias) {
    dispatch(kc, pa, pb, c, ldc, m, n, alpha, beta, epi, bias, NULL, 0);
}

void ts_kern_ukernel_pf_avx512(int kc, const float *pa, const float *pb, float *c, int64_t ldc, int m,
                               int n, float alpha, float beta, ts_epilogue epi, const float *bias,
                               const char *pf, int pf_lines) {
    dispatch(kc, pa, pb, c, ldc, m, n, alpha, beta, epi, bias, pf, pf_lines);
}

/* r[0..15] = the transpose of r[0..15] (rows become columns). */
static inline void transpose16(__m512 r[16]) {
    __m512 t[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
#pragma GCC unroll 16
    for (int h = 0; h < 16; h += 8)
#pragma GCC unroll 16
        for (int i = 0; i < 4; i++) {
            t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0x88);
            t[h + i + 4] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0xdd);
        }
#pragma GCC unroll 16
    for (int i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    }
}

/* 16 x 16 blocks: load 16 rows (along p), transpose in registers, store 16
 * panel rows. Masked loads and stores are slow on AMD when they miss the
 * cache, so only a short tail of p uses them; a 14-wide panel is written with
 * full 16-lane stores in increasing p, each overwriting the previous row's
 * 2-float spill (the last one spills past the panel, into the driver's slack). */
void ts_kern_pack_t_avx512(float *dst, int w, const float *src, int64_t lds, int m, int kc) {
    for (int i0 = 0; i0 < w; i0 += 16) {
        for (int p0 = 0; p0 < kc; p0 += 16) {
            int np = kc - p0 < 16 ? kc - p0 : 16;
            __mmask16 in_lanes = np == 16 ? (__mmask16)0xffff : ts512_first(np);
            __m512 r[16];
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++) {
                const float *row = src + (int64_t)(i0 + i) * lds + p0;
                r[i] = i0 + i >= m ? _mm512_setzero_ps()
                                   : (np == 16 ? _mm512_loadu_ps(row) : _mm512_maskz_loadu_ps(in_lanes, row));
            }
            transpose16(r);
#pragma GCC unroll 16
            for (int p = 0; p < 16; p++)
                if (p < np) _mm512_storeu_ps(dst + (int64_t)(p0 + p) * w + i0, r[p]);
        }
    }
}

/* Rows of up to 16 or 32 floats: masked loads (zeros past n), full stores; a
 * 14-wide panel spills 2 floats into the next row, written after it. */
void ts_kern_pack_n_avx512(float *dst, int w, const float *src, int64_t lds, int n, int kc) {
    const __mmask16 k0 = n >= 16 ? (__mmask16)0xffff : ts512_first(n),
                    k1 = n >= 32 ? (__mmask16)0xffff : n > 16 ? ts512_first(n - 16) : 0;
    if (w > 16) {
        for (int p = 0; p < kc; p++, dst += w, src += lds) {
            _mm512_storeu_ps(dst, k0 == 0xffff ? _mm512_loadu_ps(src) : _mm512_maskz_loadu_ps(k0, src));
            _mm512_storeu_ps(dst + 16, k1 == 0xffff ? _mm512_loadu_ps(src + 16) : _mm512_maskz_loadu_ps(k1, src + 16));
        }
    } else {
        for (int p = 0; p < kc; p++, dst += w, src += lds)
            _mm512_storeu_ps(dst, k0 == 0xffff ? _mm512_loadu_ps(src) : _mm512_maskz_loadu_ps(k0, src));
    }
}

/* 12 independent FMA chains: enough to cover the FMA latency on both pipes. */
double ts_kern_fma_loop_avx512(int64_t iters, float *sink) {
    __m512 a[12], b = _mm512_set1_ps(1.0000001f), c = _mm512_set1_ps(0.999999f);
    for (int i = 0; i < 12; i++) a[i] = _mm512_set1_ps((float)i);
    for (int64_t n = 0; n < iters; n++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = _mm512_fmadd_ps(a[i], b, c);
    }
    float s = 0;
    for (int i = 0; i < 12; i++) s += _mm512_reduce_add_ps(a[i]);
    *sink = s; /* so the loop is not optimised away */
    return (double)iters * 12 * 16 * 2;
}
