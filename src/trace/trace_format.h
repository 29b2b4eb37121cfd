/* trace_format: the byte layout of a .tstrace file, shared by the writer, the
 * reader and the statistics code. Private to src/; docs/trace-format.md is the
 * description for people, this is the one for the compiler. Every field is
 * little-endian and read with the helpers below, never as a raw struct.
 */
#ifndef TSCOPE_TRACE_FORMAT_H
#define TSCOPE_TRACE_FORMAT_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "tscope/trace.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "trace values are used in place as float32: tscope needs a little-endian host"
#endif

/* 2 added scaled views (prefix byte 31) and histograms left to the reader
 * (content bit 3); a version 1 file is a version 2 file that uses neither. */
#define TRF_VERSION 2
#define TRF_VERSION_OLDEST 1
#define TRF_ALIGN 64

/* File header: 64 bytes at offset 0. */
#define TRF_MAGIC "\x89TSTRACE"
#define TRF_HEADER_SIZE 64
#define TRF_H_VERSION 8
#define TRF_H_HEADER_SIZE 12
#define TRF_H_META_OFFSET 16
#define TRF_H_META_SIZE 24
#define TRF_H_RECORDS_OFFSET 32
#define TRF_H_META_CRC 40
#define TRF_H_FLAGS 44
#define TRF_H_CRC 60

/* Step record: prefix | values | suffix, each a multiple of 64 bytes. */
#define TRF_PREFIX_MAGIC "TSTP"
#define TRF_P_PREFIX_SIZE 4
#define TRF_P_RECORD_SIZE 8
#define TRF_P_INDEX 16
#define TRF_P_OP 24
#define TRF_P_TAG 26
#define TRF_P_DTYPE 28
#define TRF_P_RANK 29
#define TRF_P_CONTENT 30
#define TRF_P_VIEW_SCALE 31    /* views: i8, the values are the base's times 2^this */
#define TRF_P_BATCH 32
#define TRF_P_NAME_LEN 36
#define TRF_P_VALUES_COUNT 40
#define TRF_P_SHAPE 48
#define TRF_P_VIEW_BASE 96     /* views: the step whose values they index */
#define TRF_P_VIEW_OFFSET 104  /* views: first element, in the base's values */
#define TRF_P_VIEW_STRIDES 112 /* views: 6 x i64, in elements */
#define TRF_P_NAME 160
#define TRF_VIEW_SCALE_MAX 64 /* |view scale exponent| */
#define TRF_NAME_MAX 1024 /* longest name, bytes, without the NUL */

#define TRF_DTYPE_NONE 0
#define TRF_DTYPE_F32 1

#define TRF_CONTENT_STATS 1u  /* the suffix holds statistics */
#define TRF_CONTENT_VALUES 2u /* values follow the prefix */
#define TRF_CONTENT_VIEW 4u   /* with VALUES: the values are a strided view of an earlier step's */
#define TRF_CONTENT_HIST_FROM_VALUES 8u /* with STATS and every value: the histogram is left to the reader */
#define TRF_CONTENT_VIEW_RELU 16u       /* with VIEW: each value then goes through ReLU (v < 0 ? 0 : v) */

#define TRF_SUFFIX_MAGIC "TSSF"
#define TRF_SUFFIX_SIZE 640
#define TRF_S_SUFFIX_SIZE 4
#define TRF_S_INDEX 8
#define TRF_S_MIN 16
#define TRF_S_MAX 24
#define TRF_S_MEAN 32
#define TRF_S_STD 40
#define TRF_S_MEAN_ABS 48
#define TRF_S_FINITE 56
#define TRF_S_NAN 64
#define TRF_S_INF 72
#define TRF_S_ZEROS 80
#define TRF_S_HIST 88 /* 64 x u64 */
#define TRF_S_VALUES_CRC 600
#define TRF_S_RECORD_CRC 636 /* CRC of prefix then suffix[0, 636) */

/* Index: after the last record. Magic, reserved u32, count u64; count x u64
 * record offsets; then each record's prefix and suffix again, back to back. */
#define TRF_INDEX_MAGIC "TSIX"
#define TRF_INDEX_HEAD 16

/* Trailer: the last 64 bytes of a closed file. */
#define TRF_TRAILER_MAGIC "TSTRAILR"
#define TRF_TRAILER_SIZE 64
#define TRF_T_INDEX_OFFSET 8
#define TRF_T_INDEX_SIZE 16
#define TRF_T_STEP_COUNT 24
#define TRF_T_INDEX_CRC 32
#define TRF_T_CRC 60

static inline uint64_t trf_align(uint64_t n) { return (n + TRF_ALIGN - 1) & ~(uint64_t)(TRF_ALIGN - 1); }

static inline void trf_put16(unsigned char *p, uint16_t v) {
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}
static inline void trf_put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline void trf_put64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline void trf_putf64(unsigned char *p, double d) {
    uint64_t v;
    memcpy(&v, &d, sizeof v);
    trf_put64(p, v);
}
static inline uint16_t trf_get16(const unsigned char *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t trf_get32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t trf_get64(const unsigned char *p) {
    return (uint64_t)trf_get32(p) | (uint64_t)trf_get32(p + 4) << 32;
}
static inline double trf_getf64(const unsigned char *p) {
    uint64_t v = trf_get64(p);
    double d;
    memcpy(&d, &v, sizeof d);
    return d;
}

/* zlib's CRC-32 (same polynomial and result as crc32() from zlib), faster on
 * CPUs with carry-less multiply. trace_crc.c. */
uint32_t trf_crc32(uint32_t crc, const void *data, size_t n);
/* The CRC of A then B from crc(A), crc(B) and B's length (zlib's crc32_combine). */
uint32_t trf_crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

/* ---- statistics (trace_stats.c and the per-ISA files) ---- */

/* Partial statistics of a run of elements, combined in order with Chan's
 * formula so that many pieces give the same result as one. */
typedef struct trf_acc {
    double n;    /* finite elements */
    double mean; /* of the finite elements */
    double m2;   /* sum of squared deviations from mean */
    double sum_abs;
    float min, max;
    uint64_t nan, inf, zeros;
} trf_acc;

void trf_acc_init(trf_acc *a);
void trf_acc_merge(trf_acc *into, const trf_acc *from);
/* Fill the public struct's moments and counts (not the histogram). */
void trf_acc_finish(const trf_acc *a, ts_trace_stats *out);

/* The kernels one instruction set provides. */
typedef struct trf_stats_ops {
    /* Add x[0, n) to acc; copy them to dst too when dst is not NULL.
     * n <= TRF_BLOCK. */
    void (*block)(trf_acc *acc, const float *x, float *dst, int64_t n);
    /* hist[bin] += count of x[i] with bin = (int)((x - lo) * scale) clamped to
     * [0, 63] (trf_bin): NaN and -inf land in bin 0, +inf in bin 63. */
    void (*hist)(uint64_t *hist, const float *x, int64_t n, float lo, float scale);
    /* The same for the x[i] trf_binned_finite takes: NaN and infinities in
     * no bin (nor values a bin or more below lo, which a plan never has). */
    void (*hist_finite)(uint64_t *hist, const float *x, int64_t n, float lo, float scale);
    /* dst[i] = x[i] through the model's ReLU (x < 0 ? 0 : x: -0 and NaN
     * stay); dst may be x. */
    void (*relu)(float *dst, const float *x, int64_t n);
} trf_stats_ops;

#define TRF_BLOCK 4096

extern const trf_stats_ops trf_stats_scalar;
#if defined(__x86_64__)
#define TRF_HAVE_X86 1
extern const trf_stats_ops trf_stats_avx2;
extern const trf_stats_ops trf_stats_avx512;
#endif
#if defined(__aarch64__)
#define TRF_HAVE_NEON 1
extern const trf_stats_ops trf_stats_neon;
#endif
/* The kernels for the instruction set the kernels module chose. */
const trf_stats_ops *trf_stats_current(void);

/* The part of a block that is the same for every instruction set: called
 * with the block's lane sums around `shift`; falls back to the careful scalar
 * path when something was not finite. */
void trf_acc_add_block(trf_acc *acc, const float *x, int64_t n, double s1, double s2, double sabs,
                       float mn, float mx, uint64_t zeros, float shift);
/* The same for a block of n with nan NaN and inf infinities left out of the
 * sums (the vector kernels' second try at a block with them); a block whose
 * finite values still overflow float goes to the careful path. */
void trf_acc_add_counted(trf_acc *acc, const float *x, int64_t n, uint64_t nan, uint64_t inf, double s1,
                         double s2, double sabs, float mn, float mx, uint64_t zeros, float shift);
/* Careful scalar statistics of x[0, n) (NaN, Inf, overflow). */
void trf_acc_add_careful(trf_acc *acc, const float *x, int64_t n);

/* How a step's histogram is binned, once its min and max are known. */
typedef struct trf_hist_plan {
    float lo, hi, scale;
    bool fast;      /* the range of the finite elements scales in float */
    bool nonfinite; /* some elements are NaN or infinite: the kernel that leaves them out */
} trf_hist_plan;

void trf_hist_plan_init(trf_hist_plan *plan, const ts_trace_stats *s);
/* Add the finite elements of x[0, n) to hist: the kernel when plan->fast
 * (hist_finite when plan->nonfinite), else a careful loop. */
void trf_hist_add(uint64_t *hist, const float *x, int64_t n, const trf_hist_plan *plan,
                  const trf_stats_ops *ops);

/* Whether hist_finite bins x: finite, and not a bin or more below lo (where
 * the vector kernels' bin index goes negative): every finite x when lo is
 * the smallest of them, as in every plan. */
static inline bool trf_binned_finite(float x, float lo, float scale) {
    return isfinite(x) && (x - lo) * scale > -1.0f;
}

/* The bin of a finite x, exactly as every kernel computes it. */
static inline int trf_bin(float x, float lo, float scale) {
    float f = (x - lo) * scale;
    if (!(f > 0.0f)) return 0;
    if (f >= (float)(TS_TRACE_HIST_BINS - 1)) return TS_TRACE_HIST_BINS - 1;
    return (int)f;
}

#endif
