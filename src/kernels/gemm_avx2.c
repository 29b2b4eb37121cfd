/* gemm_avx2: the AVX2+FMA micro-kernel and panel packing.
 *
 * A 6 x 16 tile of C lives in 12 ymm registers; each step of k loads two
 * vectors of the packed B panel and broadcasts 6 values of the packed A
 * panel: 12 FMAs on 8 loads. Partial tiles use an 8-wide loop when they can
 * and masked loads and stores at the edge.
 */
#include "kernels_impl.h"
#include "core/simd_avx2.h"

#define MR TS_KERN_AVX2_MR
#define NR TS_KERN_AVX2_NR

static inline __m256 epilogue(__m256 v, ts_epilogue epi, __m256 bias) {
    v = _mm256_add_ps(v, bias);
    if (epi == TS_EPI_BIAS_RELU) return _mm256_max_ps(_mm256_setzero_ps(), v); /* NaN comes through */
    if (epi == TS_EPI_BIAS_GELU) return ts256_gelu(v);
    return v;
}

/* Columns [8v, 8v+8) of a row that holds n: all of them, some (masked) or none. */
static inline __m256 load_cols(const float *p, int n, int v) {
    int k = n - 8 * v;
    return k >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, ts256_first(k > 0 ? k : 0));
}

static inline void store_cols(float *p, __m256 x, int n, int v) {
    int k = n - 8 * v;
    if (k >= 8)
        _mm256_storeu_ps(p, x);
    else if (k > 0)
        _mm256_maskstore_ps(p, ts256_first(k), x);
}

static inline __attribute__((always_inline)) void tile(const int NV, int kc, const float *pa, const float *pb,
                                                       float *c, int64_t ldc, int m, int n, float alpha,
                                                       float beta, ts_epilogue epi, const float *bias) {
    __m256 acc[MR][2];
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) {
        acc[i][0] = acc[i][1] = _mm256_setzero_ps();
        /* C is needed only after the k loop: start fetching it now. */
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
        if (NV == 2) _mm_prefetch((const char *)(c + i * ldc + 15), _MM_HINT_T0);
    }
    for (int p = 0; p < kc; p++, pa += MR, pb += NR) {
        __m256 b0 = _mm256_loadu_ps(pb), b1 = NV == 2 ? _mm256_loadu_ps(pb + 8) : b0;
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++) {
            __m256 a = _mm256_broadcast_ss(pa + i);
            acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
            if (NV == 2) acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
        }
    }
    const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
    __m256 bias0 = _mm256_setzero_ps(), bias1 = bias0;
    if (epi != TS_EPI_NONE) bias0 = load_cols(bias, n, 0), bias1 = NV == 2 ? load_cols(bias + 8, n, 1) : bias0;
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) {
        if (i >= m) break;
        float *cr = c + i * ldc;
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) {
            __m256 x = _mm256_mul_ps(va, acc[i][v]);
            if (beta != 0) x = _mm256_fmadd_ps(vb, load_cols(cr + 8 * v, n, v), x); /* else C may be NaN */
            if (epi != TS_EPI_NONE) x = epilogue(x, epi, v ? bias1 : bias0);
            store_cols(cr + 8 * v, x, n, v);
        }
    }
}

void ts_kern_ukernel_avx2(int kc, const float *pa, const float *pb, float *c, int64_t ldc, int m, int n,
                          float alpha, float beta, ts_epilogue epi, const float *bias) {
    if (n > 8)
        tile(2, kc, pa, pb, c, ldc, m, n, alpha, beta, epi, bias);
    else
        tile(1, kc, pa, pb, c, ldc, m, n, alpha, beta, epi, bias);
}

/* r[0..7] = the transpose of r[0..7]. */
static inline void transpose8(__m256 r[8]) {
    __m256 t[8], s[8];
#pragma GCC unroll 16
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 8; i += 4) {
        s[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        s[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        s[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        s[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
#pragma GCC unroll 16
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x20);
        r[i + 4] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x31);
    }
}

/* 8 x 8 blocks: load 8 rows (along p), transpose in registers, store 8 panel
 * rows. A panel narrower than 8 (w = 6) is written with full 8-lane stores in
 * increasing p, each overwriting the previous row's spill; the last one spills
 * 2 floats past the panel, which the driver leaves room for. */
void ts_kern_pack_t_avx2(float *dst, int w, const float *src, int64_t lds, int m, int kc) {
    for (int i0 = 0; i0 < w; i0 += 8) {
        for (int p0 = 0; p0 < kc; p0 += 8) {
            int np = kc - p0 < 8 ? kc - p0 : 8;
            __m256i in_lanes = ts256_first(np < 8 ? np : 8);
            __m256 r[8];
#pragma GCC unroll 16
            for (int i = 0; i < 8; i++) {
                const float *row = src + (int64_t)(i0 + i) * lds + p0;
                r[i] = i0 + i >= m ? _mm256_setzero_ps()
                                   : (np == 8 ? _mm256_loadu_ps(row) : _mm256_maskload_ps(row, in_lanes));
            }
            transpose8(r);
#pragma GCC unroll 16
            for (int p = 0; p < 8; p++)
                if (p < np) _mm256_storeu_ps(dst + (int64_t)(p0 + p) * w + i0, r[p]);
        }
    }
}

/* 8 bf16 of a row widened to float32: the 16 bits moved to the top of each lane. */
static inline __m256 widen8(const ts_bf16 *p, int np) {
    __m128i h;
    if (np == 8) {
        h = _mm_loadu_si128((const __m128i *)p);
    } else { /* the row's last few: no 16-bit masked load in AVX2 */
        ts_bf16 part[8] = {0};
        for (int k = 0; k < np; k++) part[k] = p[k];
        h = _mm_loadu_si128((const __m128i *)part);
    }
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* ts_kern_pack_t_avx2 from bf16 weights: each 8 x 8 block widened as it is
 * loaded, then transposed in registers. w is a multiple of 8 here (B's panels). */
void ts_kern_pack_t_bf16_avx2(float *dst, int w, const ts_bf16 *src, int64_t lds, int m, int kc) {
    for (int i0 = 0; i0 < w; i0 += 8) {
        for (int p0 = 0; p0 < kc; p0 += 8) {
            int np = kc - p0 < 8 ? kc - p0 : 8;
            __m256 r[8];
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++)
                r[i] = i0 + i >= m ? _mm256_setzero_ps() : widen8(src + (int64_t)(i0 + i) * lds + p0, np);
            transpose8(r);
#pragma GCC unroll 8
            for (int p = 0; p < 8; p++)
                if (p < np) _mm256_storeu_ps(dst + (int64_t)(p0 + p) * w + i0, r[p]);
        }
    }
}

/* Rows of up to 8 or 16 floats: loads of the first n (zeros after), full
 * stores; a 6-wide panel spills 2 floats into the next row, written after it. */
void ts_kern_pack_n_avx2(float *dst, int w, const float *src, int64_t lds, int n, int kc) {
    for (int p = 0; p < kc; p++, dst += w, src += lds) {
        _mm256_storeu_ps(dst, n >= 8 ? _mm256_loadu_ps(src) : ts256_load_part(src, n, 0.0f));
        if (w > 8) _mm256_storeu_ps(dst + 8, n >= 16 ? _mm256_loadu_ps(src + 8) : ts256_load_part(src + 8, n > 8 ? n - 8 : 0, 0.0f));
    }
}

/* 12 independent FMA chains: enough to cover the FMA latency on both pipes. */
double ts_kern_fma_loop_avx2(int64_t iters, float *sink) {
    __m256 a[12], b = _mm256_set1_ps(1.0000001f), c = _mm256_set1_ps(0.999999f);
    for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps((float)i);
    for (int64_t n = 0; n < iters; n++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], b, c);
    }
    float s = 0;
    for (int i = 0; i < 12; i++) s += ts256_reduce_add(a[i]);
    *sink = s; /* so the loop is not optimised away */
    return (double)iters * 12 * 8 * 2;
}
