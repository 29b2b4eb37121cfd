/* trace_crc: zlib's CRC-32, folded with carry-less multiplication.
 *
 * Every value of a trace goes through the CRC, gigabytes for a full run, and
 * zlib's table code manages about 7 GB/s; folding 64 bytes at a time with
 * PCLMULQDQ is several times faster and gives the identical result (the test
 * compares it with zlib's crc32 on many lengths). Without the instruction, or
 * off x86, zlib does it all.
 */
#include <zlib.h>

#include "trace_format.h"

uint32_t trf_crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
    return (uint32_t)crc32_combine(crc_a, crc_b, (z_off_t)len_b); /* z_off_t is 64 bits on LP64 */
}

static uint32_t zlib_crc(uint32_t crc, const unsigned char *p, size_t n) {
    while (n > 0) {
        uInt chunk = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = (uint32_t)crc32(crc, p, chunk);
        p += chunk;
        n -= chunk;
    }
    return crc;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* Folding constants for the reflected polynomial 0xEDB88320:
 * k(n) = reflect32(x^n mod P) << 1, n = 4*128 +- 32 to fold 64 bytes ahead,
 * n = 128 +- 32 to fold 16 bytes ahead. */
#define K_FOLD4_LO 0x154442bd4ull
#define K_FOLD4_HI 0x1c6e41596ull
#define K_FOLD1_LO 0x1751997d0ull
#define K_FOLD1_HI 0x0ccaa009eull

__attribute__((target("pclmul,sse4.1"))) static inline __m128i fold(__m128i x, __m128i k, __m128i next) {
    __m128i lo = _mm_clmulepi64_si128(x, k, 0x00);
    __m128i hi = _mm_clmulepi64_si128(x, k, 0x11);
    return _mm_xor_si128(_mm_xor_si128(lo, hi), next);
}

/* n >= 64. The initial state is folded into the first 4 bytes; what remains
 * after folding is 16 bytes whose plain CRC continues the original one. */
__attribute__((target("pclmul,sse4.1"))) static uint32_t crc_pclmul(uint32_t crc, const unsigned char *p,
                                                                  size_t n) {
    const __m128i k4 = _mm_set_epi64x((long long)K_FOLD4_HI, (long long)K_FOLD4_LO);
    const __m128i k1 = _mm_set_epi64x((long long)K_FOLD1_HI, (long long)K_FOLD1_LO);
    __m128i x0 = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i x1 = _mm_loadu_si128((const __m128i *)(const void *)(p + 16));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(const void *)(p + 32));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(const void *)(p + 48));
    x0 = _mm_xor_si128(x0, _mm_cvtsi32_si128((int)~crc));
    p += 64;
    n -= 64;
    while (n >= 64) {
        x0 = fold(x0, k4, _mm_loadu_si128((const __m128i *)(const void *)p));
        x1 = fold(x1, k4, _mm_loadu_si128((const __m128i *)(const void *)(p + 16)));
        x2 = fold(x2, k4, _mm_loadu_si128((const __m128i *)(const void *)(p + 32)));
        x3 = fold(x3, k4, _mm_loadu_si128((const __m128i *)(const void *)(p + 48)));
        p += 64;
        n -= 64;
    }
    x1 = fold(x0, k1, x1);
    x2 = fold(x1, k1, x2);
    x3 = fold(x2, k1, x3);
    while (n >= 16) {
        x3 = fold(x3, k1, _mm_loadu_si128((const __m128i *)(const void *)p));
        p += 16;
        n -= 16;
    }
    unsigned char rest[16];
    _mm_storeu_si128((__m128i *)(void *)rest, x3);
    crc = zlib_crc(0xffffffffu, rest, 16);
    return zlib_crc(crc, p, n);
}

/* The same folding 256 bytes at a time in four 512-bit registers (AVX-512
 * VPCLMULQDQ: four 128-bit lanes each), reduced to one 128-bit lane, then
 * finished like crc_pclmul. k(n) as above for n = 2048 +- 32 (256 bytes
 * ahead), 512 +- 32 (64 bytes), 384, 256 and 128 +- 32 (lanes to the last). */
#define K_FOLD16_LO 0x11542778aull
#define K_FOLD16_HI 0x1322d1430ull
#define K_LANE3_LO 0x03db1ecdcull
#define K_LANE3_HI 0x174359406ull
#define K_LANE2_LO 0x0f1da05aaull
#define K_LANE2_HI 0x15a546366ull

#define VTARGET __attribute__((target("avx512f,avx512bw,vpclmulqdq,pclmul,sse4.1")))

VTARGET static inline __m512i fold512(__m512i x, __m512i k, __m512i next) {
    __m512i lo = _mm512_clmulepi64_epi128(x, k, 0x00);
    __m512i hi = _mm512_clmulepi64_epi128(x, k, 0x11);
    return _mm512_ternarylogic_epi64(lo, hi, next, 0x96); /* lo ^ hi ^ next */
}

VTARGET static inline __m128i fold128(__m128i x, uint64_t klo, uint64_t khi, __m128i next) {
    const __m128i k = _mm_set_epi64x((long long)khi, (long long)klo);
    __m128i lo = _mm_clmulepi64_si128(x, k, 0x00);
    __m128i hi = _mm_clmulepi64_si128(x, k, 0x11);
    return _mm_xor_si128(_mm_xor_si128(lo, hi), next);
}

/* n >= 256. */
VTARGET static uint32_t crc_vpclmul(uint32_t crc, const unsigned char *p, size_t n) {
    const __m512i k16 = _mm512_broadcast_i32x4(_mm_set_epi64x((long long)K_FOLD16_HI, (long long)K_FOLD16_LO));
    const __m512i k4 = _mm512_broadcast_i32x4(_mm_set_epi64x((long long)K_FOLD4_HI, (long long)K_FOLD4_LO));
    __m512i x0 = _mm512_loadu_si512(p), x1 = _mm512_loadu_si512(p + 64);
    __m512i x2 = _mm512_loadu_si512(p + 128), x3 = _mm512_loadu_si512(p + 192);
    x0 = _mm512_xor_si512(x0, _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)~crc)));
    p += 256;
    n -= 256;
    while (n >= 256) {
        x0 = fold512(x0, k16, _mm512_loadu_si512(p));
        x1 = fold512(x1, k16, _mm512_loadu_si512(p + 64));
        x2 = fold512(x2, k16, _mm512_loadu_si512(p + 128));
        x3 = fold512(x3, k16, _mm512_loadu_si512(p + 192));
        p += 256;
        n -= 256;
    }
    x1 = fold512(x0, k4, x1);
    x2 = fold512(x1, k4, x2);
    x3 = fold512(x2, k4, x3);
    while (n >= 64) {
        x3 = fold512(x3, k4, _mm512_loadu_si512(p));
        p += 64;
        n -= 64;
    }
    __m128i acc = _mm512_extracti32x4_epi32(x3, 3);
    acc = fold128(_mm512_extracti32x4_epi32(x3, 0), K_LANE3_LO, K_LANE3_HI, acc);
    acc = fold128(_mm512_extracti32x4_epi32(x3, 1), K_LANE2_LO, K_LANE2_HI, acc);
    acc = fold128(_mm512_extracti32x4_epi32(x3, 2), K_FOLD1_LO, K_FOLD1_HI, acc);
    while (n >= 16) {
        acc = fold128(acc, K_FOLD1_LO, K_FOLD1_HI, _mm_loadu_si128((const __m128i *)(const void *)p));
        p += 16;
        n -= 16;
    }
    unsigned char rest[16];
    _mm_storeu_si128((__m128i *)(void *)rest, acc);
    crc = zlib_crc(0xffffffffu, rest, 16);
    return zlib_crc(crc, p, n);
}

static int have_vpclmul(void) {
    static _Atomic int cached = -1; /* every thread computes the same */
    if (cached < 0) {
        __builtin_cpu_init();
        cached = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("pclmul");
    }
    return cached;
}

static int have_pclmul(void) {
    static _Atomic int cached = -1; /* every thread computes the same */
    if (cached < 0) {
        __builtin_cpu_init();
        cached = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    }
    return cached;
}

uint32_t trf_crc32(uint32_t crc, const void *data, size_t n) {
    if (n >= 1024 && have_vpclmul()) return crc_vpclmul(crc, data, n);
    if (n >= 256 && have_pclmul()) return crc_pclmul(crc, data, n);
    return zlib_crc(crc, data, n);
}

#else

uint32_t trf_crc32(uint32_t crc, const void *data, size_t n) { return zlib_crc(crc, data, n); }

#endif
