/* Trace files: statistics against a double-precision reference, the CRC
 * against zlib, round trips at every level, strided views, --only and
 * --keep-batch, the auto policy, lookups, a writer killed with SIGKILL, and
 * damaged files (every byte flipped, every length cut) that must give an
 * error or a correct partial read. Fuzzer finds in tests/fuzz/regressions are
 * replayed here. */
#include <dirent.h>
#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "trace/trace_format.h"
#include "check.h"
#include "tscope/kernels.h"
#include "tscope/trace.h"

static char dir[64];

static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/tscope-trace-XXXXXX");
    if (!mkdtemp(dir)) return -1;
    return 0;
}

static int teardown(void **state) {
    (void)state;
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char path[512];
        while ((e = readdir(d)))
            if (e->d_name[0] != '.') {
                snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
                unlink(path);
            }
        closedir(d);
    }
    rmdir(dir);
    return 0;
}

static const char *path_in(const char *name) {
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static uint64_t rng = 88172645463325252ull;
static float frand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static float *random_floats(int64_t n, float scale, float offset) {
    float *x = malloc((size_t)n * sizeof *x);
    assert_non_null(x);
    for (int64_t i = 0; i < n; i++) x[i] = frand() * scale + offset;
    return x;
}

static ts_tensor view_of(float *data, int rank, const int64_t *shape) {
    ts_tensor t;
    assert_ok(ts_tensor_view(&t, data, rank, shape));
    return t;
}

/* ---- CRC and statistics ---- */

static void crc_matches_zlib(void **state) {
    (void)state;
    enum { N = 70000 };
    unsigned char *b = malloc(N);
    assert_non_null(b);
    for (int i = 0; i < N; i++) b[i] = (unsigned char)(int)(frand() * 255); /* frand may be negative: wrap, as bytes do */
    for (size_t n = 0; n < 2100; n += 7)
        for (int off = 0; off < 3; off++)
            assert_int_equal(trf_crc32(0x1234u, b + off, n), (uint32_t)crc32(0x1234u, b + off, (uInt)n));
    assert_int_equal(trf_crc32(0, b, N), (uint32_t)crc32(0, b, N));
    uint32_t a = trf_crc32(0, b, 1000), c = trf_crc32(0, b + 1000, N - 1000);
    assert_int_equal(trf_crc32_combine(a, c, N - 1000), (uint32_t)crc32(0, b, N));
    free(b);
}

/* What the statistics must be, in double, element by element. */
static void reference_stats(ts_trace_stats *s, const float *x, int64_t n) {
    memset(s, 0, sizeof *s);
    double sum = 0, sum_abs = 0, lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(x[i])) {
            s->nan++;
        } else if (isinf(x[i])) {
            s->inf++;
        } else {
            s->finite++;
            sum += x[i];
            sum_abs += fabs(x[i]);
            lo = fmin(lo, x[i]);
            hi = fmax(hi, x[i]);
            s->zeros += x[i] == 0;
        }
    }
    if (!s->finite) return;
    s->mean = sum / (double)s->finite;
    double m2 = 0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(x[i])) m2 += (x[i] - s->mean) * (x[i] - s->mean);
    s->std = sqrt(m2 / (double)s->finite);
    s->mean_abs = sum_abs / (double)s->finite;
    s->min = lo;
    s->max = hi;
}

static void assert_stats_close(const ts_trace_stats *got, const ts_trace_stats *want) {
    assert_int_equal(got->finite, want->finite);
    assert_int_equal(got->nan, want->nan);
    assert_int_equal(got->inf, want->inf);
    assert_int_equal(got->zeros, want->zeros);
    assert_true(got->min == want->min);
    assert_true(got->max == want->max);
    double scale = fmax(1.0, fabs(want->mean) + want->std);
    assert_true(fabs(got->mean - want->mean) <= 1e-5 * scale);
    assert_true(fabs(got->std - want->std) <= 1e-5 * fmax(1e-30, want->std) + 1e-6 * scale);
    assert_true(fabs(got->mean_abs - want->mean_abs) <= 1e-5 * fmax(1.0, want->mean_abs));
    uint64_t total = 0;
    for (int b = 0; b < TS_TRACE_HIST_BINS; b++) total += got->hist[b];
    assert_int_equal(total, want->finite);
}

/* A traced step's statistics with its histogram, stored or left to the
 * reader (then only when the step keeps every value). */
static ts_trace_stats step_stats(ts_trace *t, int64_t i) {
    const ts_trace_step *s = ts_trace_step_at(t, i);
    assert_non_null(s);
    ts_trace_stats st = s->stats;
    if (s->hist_from_values) {
        assert_true(s->has_values && s->batch_index == -1);
        for (int b = 0; b < TS_TRACE_HIST_BINS; b++) assert_int_equal(s->stats.hist[b], 0);
    }
    assert_ok(ts_trace_histogram(t, i, st.hist));
    return st;
}

static void assert_step_stats(ts_trace *t, int64_t i, const ts_trace_stats *want) {
    ts_trace_stats got = step_stats(t, i);
    assert_stats_close(&got, want);
}

static void stats_match_reference_on_every_isa(void **state) {
    (void)state;
    const int64_t n = 100003;
    /* A large offset tests the shifted sums: std is tiny next to the mean. */
    float *x = random_floats(n, 0.001f, 1000.0f);
    float *y = random_floats(n, 3.0f, -0.5f);
    for (int64_t i = 0; i < n; i += 97) y[i] = 0.0f;
    y[5] = NAN;
    y[77777] = INFINITY;
    y[n - 1] = -INFINITY;
    const trf_stats_ops *isas[] = {&trf_stats_scalar,
#if defined(TRF_HAVE_X86)
                                   ts_isa_supported(TS_ISA_AVX2) ? &trf_stats_avx2 : NULL,
                                   ts_isa_supported(TS_ISA_AVX512) ? &trf_stats_avx512 : NULL,
#endif
#if defined(TRF_HAVE_NEON)
                                   &trf_stats_neon,
#endif
    };
    ts_trace_stats ref_x, ref_y;
    reference_stats(&ref_x, x, n);
    reference_stats(&ref_y, y, n);
    uint64_t first_hist[TS_TRACE_HIST_BINS];
    for (size_t k = 0; k < sizeof isas / sizeof isas[0]; k++) {
        if (!isas[k]) continue;
        const float *inputs[] = {x, y};
        const ts_trace_stats *refs[] = {&ref_x, &ref_y};
        for (int which = 0; which < 2; which++) {
            trf_acc acc;
            trf_acc_init(&acc);
            for (int64_t i = 0; i < n; i += TRF_BLOCK)
                isas[k]->block(&acc, inputs[which] + i, NULL, n - i < TRF_BLOCK ? n - i : TRF_BLOCK);
            ts_trace_stats s;
            trf_acc_finish(&acc, &s);
            /* Copying on the way (streamed to an aligned buffer, stored to
             * one that is not) gives the bytes and the same statistics. */
            float *copy = aligned_alloc(64, ((size_t)(n + 16) * sizeof(float) + 63) / 64 * 64);
            assert_non_null(copy);
            float *dst = copy + which; /* y: not 64-byte aligned */
            trf_acc copied;
            trf_acc_init(&copied);
            for (int64_t i = 0; i < n; i += TRF_BLOCK)
                isas[k]->block(&copied, inputs[which] + i, dst + i, n - i < TRF_BLOCK ? n - i : TRF_BLOCK);
            assert_memory_equal(dst, inputs[which], (size_t)n * sizeof(float));
            ts_trace_stats s_copied;
            trf_acc_finish(&copied, &s_copied);
            assert_memory_equal(&s_copied, &s, sizeof s);
            free(copy);
            trf_hist_plan plan;
            trf_hist_plan_init(&plan, &s);
            trf_hist_add(s.hist, inputs[which], n, &plan, isas[k]);
            assert_stats_close(&s, refs[which]);
            /* Every instruction set bins exactly alike. */
            if (which == 0) {
                if (k == 0) memcpy(first_hist, s.hist, sizeof first_hist);
                assert_memory_equal(first_hist, s.hist, sizeof first_hist);
            }
        }
    }
#if defined(TRF_HAVE_NEON)
    /* The trace follows the kernels' choice on ARM64 too (test_kernels checks that it is NEON). */
    if (ts_kernels_isa() == TS_ISA_NEON) assert_ptr_equal(trf_stats_current(), &trf_stats_neon);
#endif
    /* Hand-checked: 0..63 puts one element in each bin; constants go to bin 0. */
    float ramp[65];
    for (int i = 0; i < 65; i++) ramp[i] = (float)i;
    ts_trace_stats s;
    ts_trace_stats_compute(&s, ramp, 65);
    assert_int_equal(s.hist[0], 1);  /* bins of width 1 */
    assert_int_equal(s.hist[62], 1);
    assert_int_equal(s.hist[63], 2); /* 63 and 64: the last bin is closed */
    assert_true(s.mean == 32.0);
    for (int i = 0; i < 65; i++) ramp[i] = 7.0f;
    ts_trace_stats_compute(&s, ramp, 65);
    assert_int_equal(s.hist[0], 65);
    assert_true(s.std == 0.0 && s.min == 7.0 && s.max == 7.0);
    free(x);
    free(y);
}

/* A causal `masked` step: the upper triangle -inf (half of every block),
 * some NaN and +inf, a zero row and ordinary values. Every instruction set's
 * statistics match the double reference and the careful scalar path, and
 * its histogram is exactly that of the finite values alone. */
static void masked_scores_stats_on_every_isa(void **state) {
    (void)state;
    const int S = 700;
    const int64_t n = (int64_t)S * S;
    float *x = random_floats(n, 2.0f, 0.25f), *finite = malloc(sizeof(float) * (size_t)n);
    assert_non_null(finite);
    for (int r = 0; r < S; r++)
        for (int c = r + 1; c < S; c++) x[(int64_t)r * S + c] = -INFINITY;
    for (int c = 0; c < S; c++) x[(int64_t)3 * S + c] = c <= 3 ? 0.0f : -INFINITY;
    x[10 * S + 2] = NAN, x[400 * S + 399] = INFINITY, x[n - 1] = NAN;
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(x[i])) finite[k++] = x[i];
    ts_trace_stats ref, careful;
    reference_stats(&ref, x, n);
    trf_acc acc;
    trf_acc_init(&acc);
    trf_acc_add_careful(&acc, x, n);
    trf_acc_finish(&acc, &careful);
    const trf_stats_ops *isas[] = {&trf_stats_scalar,
#if defined(TRF_HAVE_X86)
                                   ts_isa_supported(TS_ISA_AVX2) ? &trf_stats_avx2 : NULL,
                                   ts_isa_supported(TS_ISA_AVX512) ? &trf_stats_avx512 : NULL,
#endif
#if defined(TRF_HAVE_NEON)
                                   &trf_stats_neon,
#endif
    };
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        if (!isas[i]) continue;
        trf_acc_init(&acc);
        for (int64_t e = 0; e < n; e += TRF_BLOCK) isas[i]->block(&acc, x + e, NULL, n - e < TRF_BLOCK ? n - e : TRF_BLOCK);
        ts_trace_stats s;
        trf_acc_finish(&acc, &s);
        trf_hist_plan plan;
        trf_hist_plan_init(&plan, &s);
        assert_true(plan.fast && plan.nonfinite);
        trf_hist_add(s.hist, x, n, &plan, isas[i]);
        assert_stats_close(&s, &ref);
        memcpy(careful.hist, s.hist, sizeof s.hist);
        assert_stats_close(&s, &careful);
        uint64_t want[TS_TRACE_HIST_BINS] = {0};
        isas[i]->hist(want, finite, k, plan.lo, plan.scale);
        assert_memory_equal(want, s.hist, sizeof want);
    }
    printf("masked scores: %lld of %lld finite, statistics and histogram alike on every path\n", (long long)k,
           (long long)n);
    free(x), free(finite);
}

/* Every instruction set's hist kernel adds to hist exactly the counts of
 * trf_bin, the reference rule, and its hist_finite those of trf_bin over the
 * elements trf_binned_finite takes (NaN and infinities in no bin). */
static void assert_hist_like_trf_bin(const float *x, int64_t n, float lo, float scale) {
    uint64_t want[2][TS_TRACE_HIST_BINS]; /* [0] every element, [1] the finite */
    for (int b = 0; b < TS_TRACE_HIST_BINS; b++) want[0][b] = want[1][b] = 1000u * (uint64_t)b; /* kernels add */
    for (int64_t i = 0; i < n; i++) {
        want[0][trf_bin(x[i], lo, scale)]++;
        if (trf_binned_finite(x[i], lo, scale)) want[1][trf_bin(x[i], lo, scale)]++;
    }
    const trf_stats_ops *isas[] = {&trf_stats_scalar,
#if defined(TRF_HAVE_X86)
                                   ts_isa_supported(TS_ISA_AVX2) ? &trf_stats_avx2 : NULL,
                                   ts_isa_supported(TS_ISA_AVX512) ? &trf_stats_avx512 : NULL,
#endif
#if defined(TRF_HAVE_NEON)
                                   &trf_stats_neon,
#endif
    };
    for (size_t k = 0; k < sizeof isas / sizeof isas[0]; k++) {
        if (!isas[k] || !isas[k]->hist) continue;
        for (int finite = 0; finite < 2; finite++) {
            uint64_t got[TS_TRACE_HIST_BINS];
            for (int b = 0; b < TS_TRACE_HIST_BINS; b++) got[b] = 1000u * (uint64_t)b;
            (finite ? isas[k]->hist_finite : isas[k]->hist)(got, x, n, lo, scale);
            for (int b = 0; b < TS_TRACE_HIST_BINS; b++)
                if (got[b] != want[finite][b])
                    fail_msg("isa %zu, %s, n %lld: bin %d has %llu, trf_bin gives %llu", k,
                             finite ? "hist_finite" : "hist", (long long)n, b, (unsigned long long)got[b],
                             (unsigned long long)want[finite][b]);
        }
    }
}

/* The SIMD kernels count with bit-sliced counters flushed every 2^24 elements
 * and handle tails with masks, so: lengths around every vector, group and
 * block size, bin edges and values outside [lo, hi], and runs in one bin, up
 * to past the flush interval (which fills every counter to its top bit). */
static void hist_kernels_bin_like_trf_bin(void **state) {
    (void)state;
    const int64_t n = 100003;
    float *x = random_floats(n, 2.0f, 0.5f);
    float mn = x[0], mx = x[0];
    for (int64_t i = 0; i < n; i++) {
        mn = fminf(mn, x[i]);
        mx = fmaxf(mx, x[i]);
    }
    const int64_t lengths[] = {1,   7,   8,   9,   15,  16,   17,   31,   32,   33,   63,   64,  65,   127,
                               128, 129, 255, 256, 257, 511, 512, 513, 1023, 1024, 1025, 4096, 4099, n};
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++)
        assert_hist_like_trf_bin(x, lengths[i], mn, (float)TS_TRACE_HIST_BINS / (mx - mn));

    /* Edges, with lo and scale powers of two so that x = lo + f / scale is
     * exact: f below -1, in (-1, 0], at 0, around 32 (where the kernels'
     * halves meet), 63 and 64, and far above (up to float overflow). 23
     * values, so that each lands in every lane position. */
    const float lo = 0.5f, scale = 8.0f;
    const float fs[] = {-1e30f, -2.0f, -1.0f, -0.999f, -0.5f, -0.0f, 0.0f,  1e-7f,   0.5f,  1.0f,  31.0f, 31.999f,
                        32.0f,  32.5f, 33.0f, 62.999f, 63.0f, 63.5f, 64.0f, 64.001f, 100.0f, 1e9f, 1e30f};
    const int nf = (int)(sizeof fs / sizeof fs[0]);
    for (int64_t i = 0; i < n; i++) x[i] = lo + fs[i % nf] / scale;
    x[5] = 3e38f;  /* (x - lo) * scale overflows to +inf: bin 63 */
    x[6] = -3e38f; /* and to -inf: bin 0 */
    assert_hist_like_trf_bin(x, 2013, lo, scale);
    assert_hist_like_trf_bin(x, n, lo, scale);
    free(x);

    /* One bin, then past the flush interval; a few strays on the side. */
    const int64_t long_n = ((int64_t)1 << 24) + 1005;
    float *run = malloc((size_t)long_n * sizeof *run);
    assert_non_null(run);
    for (int64_t i = 0; i < long_n; i++) run[i] = lo + 37.5f / scale;
    assert_hist_like_trf_bin(run, 5000, lo, scale);
    run[3] = lo - 100.0f;
    run[long_n / 2] = lo + 63.0f / scale;
    run[long_n - 1] = lo;
    assert_hist_like_trf_bin(run, long_n, lo, scale);
    free(run);
}

/* hist and hist_finite (assert_hist_like_trf_bin) at every tail length and
 * lane position on NaN of both signs and any payload, +-inf, and the finite
 * values nearest them (FLT_MAX, denormals, +-0); then all NaN, all -inf,
 * all +inf, one finite element among -inf, and past the flush interval. */
static void hist_finite_skips_nonfinite_on_every_isa(void **state) {
    (void)state;
    uint32_t qnan_neg = 0xffc00000u, snan = 0x7f800001u, payload = 0x7fc12345u;
    float specials[9];
    memcpy(&specials[0], &qnan_neg, 4);
    memcpy(&specials[1], &snan, 4);
    memcpy(&specials[2], &payload, 4);
    specials[3] = INFINITY, specials[4] = -INFINITY, specials[5] = FLT_MAX, specials[6] = -FLT_MAX;
    specials[7] = 1e-45f, specials[8] = -0.0f;
    const int64_t n = 5000;
    float *x = random_floats(n, 1.0f, 0.0f);
    for (int64_t i = 0; i < n; i++)
        if (i % 3 != 0) x[i] = specials[(i * 7) % 9];
    const float lo = -1.5f, scale = 64.0f / 3.0f;
    int checked = 0;
    for (int64_t len = 0; len <= 70; len++)
        for (int64_t at = 0; at < 20; at += 3, checked++) assert_hist_like_trf_bin(x + at, len, lo, scale);
    const int64_t lengths[] = {1, 7, 8, 9, 31, 33, 64, 65, 513, 4099, n};
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) assert_hist_like_trf_bin(x, lengths[i], lo, scale);
    /* Nothing finite: nothing binned, at every length around the vectors. */
    const float none[] = {NAN, -INFINITY, INFINITY};
    for (int k = 0; k < 3; k++) {
        for (int64_t i = 0; i < n; i++) x[i] = none[k];
        for (int64_t len = 0; len <= 70; len++) assert_hist_like_trf_bin(x, len, lo, scale);
        assert_hist_like_trf_bin(x, n, lo, scale);
    }
    /* One finite element among -inf, at each place of a vector and a tail. */
    for (int64_t at = 0; at < 70; at++) {
        for (int64_t i = 0; i < 70; i++) x[i] = i == at ? 0.25f : -INFINITY;
        assert_hist_like_trf_bin(x, 70, lo, scale);
        assert_hist_like_trf_bin(x, at + 1, lo, scale);
    }
    free(x);
    /* Past the flush interval: a causal mask's -inf, rows of finite values. */
    const int64_t long_n = ((int64_t)1 << 24) + 1005;
    float *big = malloc((size_t)long_n * sizeof *big);
    assert_non_null(big);
    for (int64_t i = 0; i < long_n; i++)
        big[i] = (i % 1024) > (i / 1024) % 1024 ? -INFINITY : lo + (float)(i % 61) / scale;
    big[7] = NAN, big[long_n - 1] = INFINITY;
    assert_hist_like_trf_bin(big, long_n, lo, scale);
    free(big);
    printf("hist_finite: %d tails alike on every path\n", checked);
}

/* ---- writing and reading ---- */

typedef struct fixture_step {
    const char *name;
    ts_op op;
    ts_tag tag;
    int rank;
    int64_t shape[TS_MAX_RANK];
    float *data;
} fixture_step;

static const char *src_tokens[] = {"My", "name", "is", "Goro"};

static char *meta_json(void) {
    char *argv[] = {"tscope", "run", "--trace", "x"};
    char *meta = NULL;
    assert_ok(ts_trace_metadata_build(&meta, "{\"d_model\": 16, \"heads\": 2}", src_tokens, 4, src_tokens + 1, 3, 4,
                                      argv));
    return meta;
}

/* A key added to the metadata replaces one of that name; text that is not
 * JSON, or metadata that is not an object, is refused and leaves it as it was. */
static void metadata_takes_added_items(void **state) {
    (void)state;
    char *meta = meta_json();
    assert_ok(ts_trace_metadata_add_json(&meta, "training", "{\"clip\":1}"));
    assert_ok(ts_trace_metadata_add_json(&meta, "training", "{\"clip\":0.5,\"label_smoothing\":0.1}"));
    assert_non_null(strstr(meta, "\"training\":{\"clip\":0.5,\"label_smoothing\":0.1}"));
    assert_null(strstr(meta, "\"clip\":1"));
    assert_non_null(strstr(meta, "\"d_model\":16")); /* the rest kept */
    char *before = strdup(meta);
    assert_int_equal(ts_trace_metadata_add_json(&meta, "training", "{clip: 1"), TS_ERR_ARG);
    assert_string_equal(meta, before);
    char *array = strdup("[1, 2]");
    assert_int_equal(ts_trace_metadata_add_json(&array, "training", "{}"), TS_ERR_ARG);
    assert_string_equal(array, "[1, 2]");
    free(array);
    free(before);
    free(meta);
}

/* Each batch element's tokens, one list per side, read back as written. */
static void batch_tokens_round_trip_per_side(void **state) {
    (void)state;
    char *meta = meta_json();
    const char *src[] = {"my", "name", "is", "goro", "i", "am", "<pad>", "<pad>"};
    const char *tgt[] = {"<bos>", "my", "name", "is", "<bos>", "i", "am", "<pad>"};
    assert_ok(ts_trace_metadata_add_batch_tokens(&meta, TS_TRACE_SOURCE, src, 2, 4));
    assert_ok(ts_trace_metadata_add_batch_tokens(&meta, TS_TRACE_TARGET, tgt, 2, 4));
    const char *path = path_in("batch-tokens.tstrace");
    unlink(path);
    ts_trace_writer *w;
    assert_ok(ts_trace_writer_open(path, meta, NULL, &w));
    free(meta);
    assert_ok(ts_trace_writer_close(w, NULL));
    ts_trace *t;
    assert_ok(ts_trace_open(path, &t));
    for (int side = 0; side < 2; side++) {
        const char **want = side == TS_TRACE_SOURCE ? src : tgt;
        assert_int_equal(ts_trace_batch_token_count(t, side, 1), 4);
        assert_int_equal(ts_trace_batch_token_count(t, side, 2), 0);
        for (int i = 0; i < 8; i++) assert_string_equal(ts_trace_batch_token(t, side, i / 4, i % 4), want[i]);
        assert_null(ts_trace_batch_token(t, side, 1, 4));
    }
    ts_trace_close(t);
    unlink(path);
}

static void write_trace(const char *path, const ts_trace_options *opt, const fixture_step *steps, int n,
                        ts_trace_summary *summary) {
    char *meta = meta_json();
    unlink(path);
    ts_trace_writer *w;
    assert_ok(ts_trace_writer_open(path, meta, opt, &w));
    free(meta);
    ts_hook hook = ts_trace_writer_hook(w);
    for (int i = 0; i < n; i++) {
        ts_tensor t = view_of(steps[i].data, steps[i].rank, steps[i].shape);
        assert_ok(ts_hook_call(&hook, steps[i].name, steps[i].op, &t, steps[i].tag));
    }
    /* Nothing under the final name until close. */
    struct stat st;
    assert_int_equal(stat(path, &st), -1);
    assert_ok(ts_trace_writer_close(w, summary));
    assert_int_equal(stat(path, &st), 0);
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    assert_int_equal(stat(tmp, &st), -1);
}

enum { N_FIX = 7 };

static void make_fixture(fixture_step *f) {
    static float scalar_value = 2.5f;
    static float empty;
    fixture_step steps[N_FIX] = {
        {"input", TS_OP_INPUT, TS_TAG_PLAIN, 3, {3, 5, 8}, NULL},
        {"embed.pe", TS_OP_POSENC, TS_TAG_POSENC, 2, {5, 8}, NULL},
        {"encoder.layers.0.self_attn.weights", TS_OP_SOFTMAX, TS_TAG_ATTN_WEIGHTS, 4, {3, 2, 5, 5}, NULL},
        {"encoder.layers.0.norm1.mean", TS_OP_MEAN, TS_TAG_NORM_STAT, 3, {3, 5, 1}, NULL},
        {"encoder.layers.0.out", TS_OP_LAYERNORM, TS_TAG_NORM_OUT, 3, {3, 5, 8}, NULL},
        {"loss", TS_OP_CROSS_ENTROPY, TS_TAG_SCALAR, 0, {0}, &scalar_value},
        {"empty", TS_OP_RESHAPE, TS_TAG_PLAIN, 2, {3, 0}, &empty},
    };
    for (int i = 0; i < N_FIX; i++) {
        f[i] = steps[i];
        if (!f[i].data) {
            int64_t n = 1;
            for (int d = 0; d < f[i].rank; d++) n *= f[i].shape[d];
            f[i].data = random_floats(n, 2.0f, 0.25f);
        }
    }
    f[4].data[3] = NAN; /* counted, not averaged */
    f[4].data[4] = 0.0f;
}

static void free_fixture(fixture_step *f) {
    for (int i = 0; i < 5; i++) free(f[i].data);
}

static int64_t numel_of(const fixture_step *f) {
    int64_t n = 1;
    for (int d = 0; d < f->rank; d++) n *= f->shape[d];
    return n;
}

static void check_step_matches(ts_trace *t, int64_t i, const fixture_step *f, bool stats, bool values) {
    const ts_trace_step *s = ts_trace_step_at(t, i);
    assert_non_null(s);
    assert_int_equal(s->index, i);
    assert_string_equal(s->name, f->name);
    assert_int_equal(s->op, f->op);
    assert_int_equal(s->tag, f->tag);
    assert_int_equal(s->rank, f->rank);
    for (int d = 0; d < f->rank; d++) assert_int_equal(s->shape[d], f->shape[d]);
    int64_t n = numel_of(f);
    assert_int_equal(s->numel, n);
    assert_int_equal(s->has_stats, stats);
    if (stats) {
        ts_trace_stats ref;
        reference_stats(&ref, f->data, n);
        assert_step_stats(t, i, &ref);
    }
    assert_int_equal(s->has_values, values);
    const float *v;
    if (values) {
        assert_int_equal(s->values_count, n);
        assert_ok(ts_trace_values(t, i, &v));
        assert_int_equal((uintptr_t)v % 64, 0);
        if (n) assert_memory_equal(v, f->data, (size_t)n * sizeof(float));
    } else {
        assert_int_equal(ts_trace_values(t, i, &v), TS_ERR_ARG);
    }
}

static void round_trip_every_level(void **state) {
    (void)state;
    fixture_step f[N_FIX];
    make_fixture(f);
    ts_trace_level levels[] = {TS_TRACE_SHAPES, TS_TRACE_STATS, TS_TRACE_VALUES, TS_TRACE_AUTO};
    for (int l = 0; l < 4; l++) {
        ts_trace_options opt;
        ts_trace_options_default(&opt);
        opt.level = levels[l];
        const char *path = path_in("levels.tstrace");
        ts_trace_summary sum;
        write_trace(path, &opt, f, N_FIX, &sum);
        assert_int_equal(sum.steps, N_FIX);
        ts_trace *t;
        assert_ok(ts_trace_open(path, &t));
        assert_true(ts_trace_complete(t));
        assert_string_equal(ts_trace_warning(t), "");
        assert_int_equal(ts_trace_count(t), N_FIX);
        assert_int_equal(ts_trace_file_size(t), sum.file_bytes);
        bool stats = levels[l] != TS_TRACE_SHAPES, values = levels[l] >= TS_TRACE_VALUES;
        for (int i = 0; i < N_FIX; i++) check_step_matches(t, i, &f[i], stats, values);
        assert_int_equal(sum.steps_with_values, values ? N_FIX : 0);
        /* Metadata: what the caller gave, and what the writer adds. */
        assert_non_null(strstr(ts_trace_metadata(t), "\"d_model\":16"));
        assert_non_null(strstr(ts_trace_metadata(t), "\"tscope_version\""));
        assert_non_null(strstr(ts_trace_metadata(t), "\"command_line\":\"tscope run --trace x\""));
        assert_int_equal(ts_trace_token_count(t, TS_TRACE_SOURCE), 4);
        assert_int_equal(ts_trace_token_count(t, TS_TRACE_TARGET), 3);
        assert_string_equal(ts_trace_token(t, TS_TRACE_SOURCE, 3), "Goro");
        assert_string_equal(ts_trace_token(t, TS_TRACE_TARGET, 0), "name");
        assert_null(ts_trace_token(t, TS_TRACE_TARGET, 3));
        ts_trace_close(t);
    }
    free_fixture(f);
}

static void strided_views_are_gathered_row_major(void **state) {
    (void)state;
    ts_arena arena;
    assert_ok(ts_arena_init(&arena, (size_t)128 << 20));
    /* Small: (2, 3, 4) permuted; a slice; a transpose; q/k/v chunks as the
     * model makes them. Large: (30, 8, 200, 64) from a (30, 200, 1536) qkv,
     * 3 M elements, so the parallel path and slot edges are crossed. */
    int64_t big_shape[] = {30, 200, 1536};
    ts_tensor qkv;
    assert_ok(ts_tensor_alloc(&qkv, &arena, 3, big_shape));
    for (int64_t i = 0; i < ts_tensor_numel(&qkv); i++) qkv.data[i] = (float)(i % 100003) * 0.5f - 7.0f;
    ts_tensor r, p, parts[3];
    assert_ok(ts_tensor_reshape(&r, &qkv, 4, (int64_t[]){30, 200, 8, 192}));
    assert_ok(ts_tensor_permute(&p, &r, (int[]){0, 2, 1, 3}));
    int n_parts;
    assert_ok(ts_tensor_chunk(parts, &n_parts, &p, 3, -1));
    float *small = random_floats(24, 1.0f, 0.0f);
    ts_tensor base = view_of(small, 3, (int64_t[]){2, 3, 4}), perm, sl, tr;
    assert_ok(ts_tensor_permute(&perm, &base, (int[]){2, 0, 1}));
    assert_ok(ts_tensor_slice(&sl, &base, 2, 1, 2));
    assert_ok(ts_tensor_transpose(&tr, &base, 0, 2));
    const ts_tensor *views[] = {&perm, &sl, &tr, &parts[0], &parts[2], &p};
    const char *names[] = {"perm", "slice", "transpose", "q", "v", "qkv.heads"};
    const int nv = 6;

    const char *path = path_in("strided.tstrace");
    ts_trace_writer *w;
    ts_trace_options opt;
    ts_trace_options_default(&opt);
    opt.level = TS_TRACE_VALUES;
    opt.buffer_bytes = (size_t)8 << 20; /* two slots: the hook must wait for the disk */
    opt.threads = 3; /* the parallel passes, whatever the machine's load */
    assert_ok(ts_trace_writer_open(path, NULL, &opt, &w));
    for (int i = 0; i < nv; i++) assert_ok(ts_trace_writer_step(w, names[i], TS_OP_PERMUTE, views[i], TS_TAG_HEADS));
    assert_ok(ts_trace_writer_close(w, NULL));

    ts_trace *t;
    assert_ok(ts_trace_open(path, &t));
    assert_int_equal(ts_trace_count(t), nv);
    for (int i = 0; i < nv; i++) {
        ts_tensor c;
        size_t mark = ts_arena_mark(&arena);
        assert_ok(ts_tensor_contiguous(&c, views[i], &arena));
        const ts_trace_step *s = ts_trace_step_at(t, i);
        assert_int_equal(s->values_count, ts_tensor_numel(views[i]));
        const float *v;
        assert_ok(ts_trace_values(t, i, &v));
        assert_memory_equal(v, c.data, (size_t)s->values_count * sizeof(float));
        ts_trace_stats ref;
        reference_stats(&ref, c.data, s->values_count);
        ts_trace_stats got = step_stats(t, i);
        assert_stats_close(&got, &ref);
        /* The histogram of a view is the histogram of its copy. */
        ts_trace_stats direct;
        ts_trace_stats_compute(&direct, c.data, s->values_count);
        assert_memory_equal(direct.hist, got.hist, sizeof direct.hist);
        ts_tensor back;
        assert_ok(ts_trace_tensor(t, i, &back));
        assert_true(ts_tensor_same_shape(&back, views[i]));
        ts_arena_reset(&arena, mark);
    }
    ts_trace_close(t);
    free(small);
    ts_arena_free(&arena);
}

/* qkv (stored), then its reshape, permute and chunks as the model emits
 * them: recorded as views of qkv, read back as their own row-major values.
 * A step that computes something ends the chain: a later view of qkv is
 * stored in full. */
static void views_of_a_stored_step(void **state) {
    (void)state;
    for (int keep = -1; keep <= 1; keep += 2) {
        const int64_t B = 3, S = 5, H = 2, hd = 4, D = H * hd;
        float *data = random_floats(B * S * 3 * D, 1.0f, 0.0f);
        float *other = random_floats(B * S * D, 1.0f, 0.0f);
        ts_tensor qkv = view_of(data, 3, (int64_t[]){B, S, 3 * D}), heads, perm, parts[3], late;
        assert_ok(ts_tensor_reshape(&heads, &qkv, 4, (int64_t[]){B, S, H, 3 * hd}));
        assert_ok(ts_tensor_permute(&perm, &heads, (int[]){0, 2, 1, 3}));
        int n_parts;
        assert_ok(ts_tensor_chunk(parts, &n_parts, &perm, 3, -1));
        assert_ok(ts_tensor_transpose(&late, &parts[1], -1, -2));
        ts_tensor out = view_of(other, 3, (int64_t[]){B, S, D});
        const ts_tensor *views[] = {&qkv, &heads, &perm, &parts[0], &parts[1], &parts[2], &out, &late};
        const ts_op ops[] = {TS_OP_LINEAR, TS_OP_RESHAPE, TS_OP_PERMUTE, TS_OP_CHUNK,
                             TS_OP_CHUNK,  TS_OP_CHUNK,   TS_OP_LINEAR,  TS_OP_PERMUTE};
        const int64_t want_view_of[] = {-1, 0, 0, 0, 0, 0, -1, -1};
        const char *path = path_in("views.tstrace");
        ts_trace_options opt;
        ts_trace_options_default(&opt);
        opt.level = TS_TRACE_VALUES;
        opt.keep_batch = keep;
        ts_trace_writer *w;
        unlink(path);
        assert_ok(ts_trace_writer_open(path, NULL, &opt, &w));
        for (int i = 0; i < 8; i++) {
            char name[16];
            snprintf(name, sizeof name, "s%d", i);
            assert_ok(ts_trace_writer_step(w, name, ops[i], views[i], TS_TAG_HEADS));
        }
        ts_trace_summary sum;
        assert_ok(ts_trace_writer_close(w, &sum));
        ts_trace *t;
        assert_ok(ts_trace_open(path, &t));
        ts_arena arena;
        assert_ok(ts_arena_init(&arena, 1 << 16));
        for (int i = 0; i < 8; i++) {
            const ts_trace_step *st = ts_trace_step_at(t, i);
            assert_int_equal(st->view_of, want_view_of[i]);
            ts_tensor src = *views[i];
            if (keep >= 0) {
                assert_ok(ts_tensor_slice(&src, views[i], 0, keep, 1));
            }
            ts_tensor c;
            assert_ok(ts_tensor_contiguous(&c, &src, &arena));
            const float *v;
            assert_ok(ts_trace_values(t, i, &v));
            assert_int_equal(st->values_count, ts_tensor_numel(&src));
            assert_memory_equal(v, c.data, (size_t)st->values_count * sizeof(float));
            ts_trace_release_values(t, i);
            /* Statistics of the whole tensor, whatever is kept. */
            assert_ok(ts_tensor_contiguous(&c, views[i], &arena));
            ts_trace_stats ref;
            reference_stats(&ref, c.data, ts_tensor_numel(views[i]));
            assert_step_stats(t, i, &ref);
            ts_arena_reset(&arena, 0);
        }
        /* Only qkv, out and the late permute hold values of their own. */
        int64_t per = keep >= 0 ? 1 : B;
        assert_int_equal(sum.values_bytes, (uint64_t)(per * S * 3 * D + per * S * D + per * H * hd * S) * 4);
        ts_arena_free(&arena);
        ts_trace_close(t);
        free(data);
        free(other);
    }
}

/* A writer into path at `level`, keeping batch element `keep` (-1: all),
 * with two threads for its passes whatever the machine; its hook. */
static ts_hook writer_at(const char *path, int level, int keep, ts_trace_writer **w) {
    ts_trace_options opt;
    ts_trace_options_default(&opt);
    opt.level = (ts_trace_level)level;
    opt.keep_batch = keep;
    opt.threads = 2;
    assert_ok(ts_trace_writer_open(path, NULL, &opt, w));
    return ts_trace_writer_hook(*w);
}

static float *copy_floats(const float *x, int64_t n) {
    float *c = malloc((size_t)n * sizeof *c);
    assert_non_null(c);
    memcpy(c, x, (size_t)n * sizeof *c);
    return c;
}

/* Steps the model declares to be the step before times a factor
 * (ts_hook_call_like). With a power of two on the same memory the writer
 * derives the statistics and records the values as a view (scaled when the
 * factor is not 1); otherwise the step is traced as any other. Either way
 * every figure must be what reading the values gives. Asked ahead
 * (ts_hook_try_derive, memory still holding the step before), the writer
 * records the scaled step without reading it, and refuses a factor it
 * cannot derive, so the model makes that step and calls again. */
static void like_steps_match_their_values(void **state) {
    (void)state;
    enum { N_LIKE = 5 };
    const int64_t shape[4] = {3, 4, 50, 50}, n = 3 * 4 * 50 * 50, per_batch = n / 3;
    const char *names[N_LIKE] = {"scores", "scaled", "dropout", "odd", "elsewhere"};
    for (int c = 0; c < 6; c++) {
        int level = c < 2 ? TS_TRACE_STATS : TS_TRACE_VALUES, keep = c >= 4 ? 1 : -1;
        bool ahead = c % 2;
        float *x = random_floats(n, 4.0f, -1.0f), *other = random_floats(n, 1.0f, 0.0f);
        float *seen[N_LIKE];
        ts_tensor t = view_of(x, 4, shape), u = view_of(other, 4, shape);
        const char *path = path_in("like.tstrace");
        ts_trace_writer *w;
        ts_hook hook = writer_at(path, level, keep, &w);
        assert_ok(ts_hook_call(&hook, names[0], TS_OP_MATMUL, &t, TS_TAG_ATTN_SCORES));
        seen[0] = copy_floats(x, n);
        bool done = false;
        if (ahead) {
            assert_ok(ts_hook_try_derive(&hook, names[1], TS_OP_SCALE, &t, TS_TAG_ATTN_SCORES, 0.125f, &done));
            assert_true(done);
        }
        for (int64_t i = 0; i < n; i++) x[i] *= 0.125f;
        if (!done) assert_ok(ts_hook_call_like(&hook, names[1], TS_OP_SCALE, &t, TS_TAG_ATTN_SCORES, NULL, 0.125f));
        seen[1] = copy_floats(x, n);
        assert_ok(ts_hook_call_like(&hook, names[2], TS_OP_DROPOUT, &t, TS_TAG_PLAIN, NULL, 1.0f));
        seen[2] = copy_floats(x, n);
        if (ahead) {
            assert_ok(ts_hook_try_derive(&hook, names[3], TS_OP_SCALE, &t, TS_TAG_PLAIN, 0.3f, &done));
            assert_false(done);
        }
        for (int64_t i = 0; i < n; i++) x[i] *= 0.3f;
        assert_ok(ts_hook_call_like(&hook, names[3], TS_OP_SCALE, &t, TS_TAG_PLAIN, NULL, 0.3f));
        seen[3] = copy_floats(x, n);
        assert_ok(ts_hook_call_like(&hook, names[4], TS_OP_DROPOUT, &u, TS_TAG_PLAIN, NULL, 1.0f));
        seen[4] = copy_floats(other, n);
        assert_ok(ts_trace_writer_close(w, NULL));

        ts_trace *tr;
        assert_ok(ts_trace_open(path, &tr));
        assert_int_equal(ts_trace_count(tr), N_LIKE);
        for (int i = 0; i < N_LIKE; i++) {
            const ts_trace_step *s = ts_trace_step_at(tr, i);
            assert_string_equal(s->name, names[i]);
            ts_trace_stats want;
            ts_trace_stats_compute(&want, seen[i], n);
            ts_trace_stats got = step_stats(tr, i);
            assert_stats_close(&got, &want);
            assert_memory_equal(got.hist, want.hist, sizeof want.hist);
            /* Values of the whole tensor leave the histogram to the reader. */
            assert_int_equal(s->hist_from_values, level == TS_TRACE_VALUES && keep < 0);
            if (level != TS_TRACE_VALUES) continue;
            /* scaled views scores x 0.125, and so does the dropout like it
             * (a view of a view is the view it is of). */
            assert_int_equal(s->view_of, i == 1 || i == 2 ? 0 : -1);
            assert_true(s->view_factor == (i == 1 || i == 2 ? 0.125f : 1.0f));
            const float *v;
            assert_ok(ts_trace_values(tr, i, &v));
            int64_t from = keep >= 0 ? keep * per_batch : 0, count = keep >= 0 ? per_batch : n;
            assert_int_equal(s->values_count, count);
            assert_memory_equal(v, seen[i] + from, (size_t)count * sizeof(float));
        }
        ts_trace_close(tr);
        for (int i = 0; i < N_LIKE; i++) free(seen[i]);
        free(x);
        free(other);
    }
}


/* A LayerNorm's out with gamma 1 and beta 0 is its y, three steps back and
 * in other memory: named by y's tensor, it becomes a view of y. A tensor
 * that no recent step had names nothing, and the step is traced as any. */
static void like_an_earlier_step_by_its_tensor(void **state) {
    (void)state;
    const int64_t shape[3] = {2, 5, 8}, n = 2 * 5 * 8;
    float *y = random_floats(n, 2.0f, 0.0f), *out = copy_floats(y, n), *gamma = random_floats(8, 1.0f, 1.0f);
    float *stranger = random_floats(n, 1.0f, 0.0f);
    ts_tensor ty = view_of(y, 3, shape), tout = view_of(out, 3, shape), tg = view_of(gamma, 1, (int64_t[]){8});
    ts_tensor ts = view_of(stranger, 3, shape);
    for (int level = TS_TRACE_STATS; level <= TS_TRACE_VALUES; level++) {
        const char *path = path_in("like-of.tstrace");
        ts_trace_writer *w;
        ts_hook hook = writer_at(path, level, -1, &w);
        assert_ok(ts_hook_call(&hook, "norm.y", TS_OP_LAYERNORM, &ty, TS_TAG_PLAIN));
        assert_ok(ts_hook_call(&hook, "norm.gamma", TS_OP_PARAM, &tg, TS_TAG_PARAM));
        assert_ok(ts_hook_call(&hook, "norm.beta", TS_OP_PARAM, &tg, TS_TAG_PARAM));
        assert_ok(ts_hook_call_like(&hook, "norm.out", TS_OP_LAYERNORM, &tout, TS_TAG_NORM_OUT, &ty, 1.0f));
        assert_ok(ts_hook_call_like(&hook, "other.out", TS_OP_LAYERNORM, &tout, TS_TAG_NORM_OUT, &ts, 1.0f));
        assert_ok(ts_trace_writer_close(w, NULL));
        ts_trace *tr;
        assert_ok(ts_trace_open(path, &tr));
        ts_trace_stats want;
        ts_trace_stats_compute(&want, y, n);
        for (int64_t i = 3; i <= 4; i++) {
            ts_trace_stats got = step_stats(tr, i);
            assert_stats_close(&got, &want);
            assert_memory_equal(got.hist, want.hist, sizeof want.hist);
            const ts_trace_step *st = ts_trace_step_at(tr, i);
            if (level != TS_TRACE_VALUES) continue;
            assert_int_equal(st->view_of, i == 3 ? 0 : -1);
            const float *v;
            assert_ok(ts_trace_values(tr, i, &v));
            assert_memory_equal(v, y, (size_t)n * sizeof(float));
        }
        ts_trace_close(tr);
    }
    free(y);
    free(out);
    free(gamma);
    free(stranger);
}

/* A ReLU made in place and declared like its input becomes a view of the
 * input through ReLU: the reader redoes the model's ReLU to the bit (-0 and
 * NaN pass, negatives become 0), and so does a dropout like the ReLU. The
 * statistics are read from the ReLU's output, not derived. */
static void relu_like_its_input_is_a_relu_view(void **state) {
    (void)state;
    const int64_t shape[3] = {2, 6, 40}, n = 2 * 6 * 40;
    float *x = random_floats(n, 4.0f, -2.0f);
    x[3] = -0.0f;
    x[7] = 0.0f;
    x[11] = NAN;
    ts_tensor t = view_of(x, 3, shape);
    for (int level = TS_TRACE_STATS; level <= TS_TRACE_VALUES; level++) {
        float *in = copy_floats(x, n);
        const char *path = path_in("relu.tstrace");
        ts_trace_writer *w;
        ts_hook hook = writer_at(path, level, -1, &w);
        assert_ok(ts_hook_call(&hook, "ffn.hidden", TS_OP_LINEAR, &t, TS_TAG_PLAIN));
        ts_relu(x, x, n);
        assert_ok(ts_hook_call_like(&hook, "ffn.act", TS_OP_RELU, &t, TS_TAG_PLAIN, NULL, 1.0f));
        assert_ok(ts_hook_call_like(&hook, "ffn.dropout", TS_OP_DROPOUT, &t, TS_TAG_PLAIN, NULL, 1.0f));
        assert_ok(ts_trace_writer_close(w, NULL));
        ts_trace *tr;
        assert_ok(ts_trace_open(path, &tr));
        for (int64_t i = 0; i < 3; i++) {
            const float *want = i == 0 ? in : x;
            ts_trace_stats ref;
            ts_trace_stats_compute(&ref, want, n);
            ts_trace_stats got = step_stats(tr, i);
            assert_stats_close(&got, &ref);
            assert_memory_equal(got.hist, ref.hist, sizeof ref.hist);
            if (level != TS_TRACE_VALUES) continue;
            const ts_trace_step *s = ts_trace_step_at(tr, i);
            assert_int_equal(s->view_of, i == 0 ? -1 : 0);
            assert_int_equal(s->view_relu, i > 0);
            const float *v;
            assert_ok(ts_trace_values(tr, i, &v));
            assert_memory_equal(v, want, (size_t)n * sizeof(float)); /* bit for bit, NaN and -0 too */
        }
        ts_trace_close(tr);
        memcpy(x, in, (size_t)n * sizeof *x);
        free(in);
    }
    free(x);
}

/* hidden and its ReLU offered as a group before the ReLU is made (as the
 * FFN does): a writer at shapes or stats level takes both, the ReLU's
 * statistics from hidden's memory; one keeping values declines, and the
 * model hands them over one by one. Large enough for both threads. */
static void relu_grouped_with_its_input(void **state) {
    (void)state;
    const int64_t shape[3] = {3, 250, 300}, n = 3 * 250 * 300;
    float *x = random_floats(n, 4.0f, -2.0f), *other = random_floats(n, 1.0f, 0.0f);
    x[3] = -0.0f;
    x[7] = 0.0f;
    x[n - 11] = NAN;
    x[n / 2] = INFINITY;
    ts_tensor t = view_of(x, 3, shape), stranger = view_of(other, 3, shape);
    for (int level = TS_TRACE_SHAPES; level <= TS_TRACE_VALUES; level++) {
        float *in = copy_floats(x, n);
        const char *path = path_in("relu-group.tstrace");
        ts_trace_writer *w;
        ts_hook hook = writer_at(path, level, -1, &w);
        /* A ReLU of other memory is no ReLU of the step before: declined. */
        ts_hook_step wrong[] = {{"ffn.hidden", TS_OP_LINEAR, &t, TS_TAG_PLAIN, false},
                                {"ffn.act", TS_OP_RELU, &stranger, TS_TAG_PLAIN, true}};
        bool done;
        assert_ok(ts_hook_try_group(&hook, wrong, 2, &done));
        assert_false(done && level == TS_TRACE_STATS);
        if (done) { /* at shapes level nothing is read: any pair is taken */
            assert_ok(ts_trace_writer_close(w, NULL));
            w = NULL;
            hook = writer_at(path, level, -1, &w);
        }
        ts_hook_step pair[] = {{"ffn.hidden", TS_OP_LINEAR, &t, TS_TAG_PLAIN, false},
                               {"ffn.act", TS_OP_RELU, &t, TS_TAG_PLAIN, true}};
        assert_ok(ts_hook_try_group(&hook, pair, 2, &done));
        assert_int_equal(done, level != TS_TRACE_VALUES);
        if (!done) assert_ok(ts_hook_call(&hook, "ffn.hidden", TS_OP_LINEAR, &t, TS_TAG_PLAIN));
        ts_relu(x, x, n);
        if (!done) assert_ok(ts_hook_call_like(&hook, "ffn.act", TS_OP_RELU, &t, TS_TAG_PLAIN, NULL, 1.0f));
        assert_ok(ts_trace_writer_close(w, NULL));
        ts_trace *tr;
        assert_ok(ts_trace_open(path, &tr));
        assert_int_equal(ts_trace_count(tr), 2);
        for (int64_t i = 0; i < 2; i++) {
            const ts_trace_step *s = ts_trace_step_at(tr, i);
            assert_string_equal(s->name, i == 0 ? "ffn.hidden" : "ffn.act");
            assert_int_equal(s->op, i == 0 ? TS_OP_LINEAR : TS_OP_RELU);
            assert_int_equal(s->has_stats, level != TS_TRACE_SHAPES);
            if (level == TS_TRACE_SHAPES) continue;
            ts_trace_stats ref;
            ts_trace_stats_compute(&ref, i == 0 ? in : x, n);
            ts_trace_stats got = step_stats(tr, i);
            assert_stats_close(&got, &ref);
            assert_memory_equal(got.hist, ref.hist, sizeof ref.hist);
        }
        ts_trace_close(tr);
        memcpy(x, in, (size_t)n * sizeof *x);
        free(in);
    }
    free(x);
    free(other);
}

static void only_and_keep_batch(void **state) {
    (void)state;
    fixture_step f[N_FIX];
    make_fixture(f);
    ts_trace_options opt;
    ts_trace_options_default(&opt);
    opt.level = TS_TRACE_VALUES;
    opt.only[0] = "*.weights";
    opt.only[1] = "input";
    opt.n_only = 2;
    opt.keep_batch = 1;
    const char *path = path_in("only.tstrace");
    ts_trace_summary sum;
    write_trace(path, &opt, f, N_FIX, &sum);
    assert_non_null(strstr(sum.policy, "batch element 1"));
    ts_trace *t;
    assert_ok(ts_trace_open(path, &t));
    for (int i = 0; i < N_FIX; i++) {
        const ts_trace_step *s = ts_trace_step_at(t, i);
        bool want = i == 0 || i == 2;
        assert_int_equal(s->has_values, want);
        assert_true(s->has_stats);
        /* Statistics always cover the whole tensor. */
        ts_trace_stats ref;
        reference_stats(&ref, f[i].data, numel_of(&f[i]));
        assert_step_stats(t, i, &ref);
        if (!want) continue;
        int64_t per = numel_of(&f[i]) / f[i].shape[0];
        assert_int_equal(s->batch_index, 1);
        assert_int_equal(s->values_shape[0], 1);
        assert_int_equal(s->values_shape[1], f[i].shape[1]);
        assert_int_equal(s->values_count, per);
        const float *v;
        assert_ok(ts_trace_values(t, i, &v));
        assert_memory_equal(v, f[i].data + per, (size_t)per * sizeof(float));
    }
    ts_trace_close(t);
    free_fixture(f);
}

static void auto_policy_follows_the_budget(void **state) {
    (void)state;
    fixture_step f[N_FIX];
    make_fixture(f);
    /* Values of steps 0, 1, 2: 480, 160, 600 bytes: a 700-byte budget runs
     * out at step 2. */
    ts_trace_options opt;
    ts_trace_options_default(&opt);
    opt.budget = 700;
    const char *path = path_in("auto.tstrace");
    ts_trace_summary sum;
    write_trace(path, &opt, f, N_FIX, &sum);
    assert_non_null(strstr(sum.policy, "until step 2"));
    ts_trace *t;
    assert_ok(ts_trace_open(path, &t));
    assert_true(ts_trace_step_at(t, 0)->has_values);
    assert_true(ts_trace_step_at(t, 1)->has_values);
    const ts_trace_step *w = ts_trace_step_at(t, 2); /* attention weights, batch 0 only */
    assert_true(w->has_values);
    assert_int_equal(w->batch_index, 0);
    assert_int_equal(w->values_count, 2 * 5 * 5);
    assert_true(ts_trace_step_at(t, 3)->has_values);  /* norm mean */
    assert_false(ts_trace_step_at(t, 4)->has_values); /* layer out: stats only */
    assert_true(ts_trace_step_at(t, 4)->has_stats);
    ts_trace_close(t);

    /* Known up front to be too large: reduced from the first step. */
    opt.expected_bytes = 1 << 30;
    write_trace(path, &opt, f, N_FIX, &sum);
    assert_non_null(strstr(sum.policy, "more than the"));
    assert_ok(ts_trace_open(path, &t));
    assert_false(ts_trace_step_at(t, 0)->has_values);
    assert_true(ts_trace_step_at(t, 1)->has_values);  /* PE: no batch dim, all of it */
    assert_int_equal(ts_trace_step_at(t, 1)->batch_index, -1);
    assert_true(ts_trace_step_at(t, 2)->has_values);
    ts_trace_close(t);

    /* Known to fit: everything. */
    opt.expected_bytes = 1000;
    opt.budget = 0; /* the default */
    write_trace(path, &opt, f, N_FIX, &sum);
    assert_int_equal(sum.steps_with_values, N_FIX);
    free_fixture(f);
}

static void lookups_by_index_name_and_glob(void **state) {
    (void)state;
    float x[4] = {1, 2, 3, 4};
    const char *path = path_in("names.tstrace");
    ts_trace_writer *w;
    assert_ok(ts_trace_writer_open(path, "{\"config\": {\"preset\": \"tiny\"}}", NULL, &w));
    ts_tensor t = view_of(x, 1, (int64_t[]){4});
    const char *names[] = {"a.loss", "b.weights", "a.loss", "c.weights", "a.loss"};
    for (int i = 0; i < 5; i++) assert_ok(ts_trace_writer_step(w, names[i], TS_OP_METRIC, &t, TS_TAG_SCALAR));
    assert_ok(ts_trace_writer_close(w, NULL));
    ts_trace *tr;
    assert_ok(ts_trace_open(path, &tr));
    assert_int_equal(ts_trace_find(tr, "a.loss"), 0);
    assert_int_equal(ts_trace_find_next(tr, 0), 2);
    assert_int_equal(ts_trace_find_next(tr, 2), 4);
    assert_int_equal(ts_trace_find_next(tr, 4), -1);
    assert_int_equal(ts_trace_find(tr, "c.weights"), 3);
    assert_int_equal(ts_trace_find(tr, "nope"), -1);
    assert_int_equal(ts_trace_find_glob(tr, "*.weights", 0), 1);
    assert_int_equal(ts_trace_find_glob(tr, "*.weights", 2), 3);
    assert_int_equal(ts_trace_find_glob(tr, "*.weights", 4), -1);
    assert_null(ts_trace_step_at(tr, 5));
    assert_null(ts_trace_step_at(tr, -1));
    assert_int_equal(ts_trace_token_count(tr, TS_TRACE_SOURCE), 0);
    assert_non_null(strstr(ts_trace_metadata(tr), "\"preset\":\"tiny\""));
    ts_trace_close(tr);
    assert_int_equal(ts_trace_open(path_in("missing.tstrace"), &tr), TS_ERR_IO);
}

static void bad_arguments_are_errors(void **state) {
    (void)state;
    ts_trace_writer *w;
    assert_int_equal(ts_trace_writer_open(path_in("x.tstrace"), "[1, 2]", NULL, &w), TS_ERR_ARG);
    assert_non_null(strstr(ts_last_error(), "JSON object"));
    assert_int_equal(ts_trace_writer_open("/nonexistent-dir/x.tstrace", NULL, NULL, &w), TS_ERR_IO);
    assert_non_null(strstr(ts_last_error(), "/nonexistent-dir/x.tstrace.tmp"));
    ts_trace_level level;
    assert_int_equal(ts_trace_level_parse("everything", &level), TS_ERR_ARG);
    assert_ok(ts_trace_level_parse("stats", &level));
    assert_int_equal(level, TS_TRACE_STATS);
    /* A bad step makes the hook fail; abort leaves nothing behind. */
    assert_ok(ts_trace_writer_open(path_in("y.tstrace"), NULL, NULL, &w));
    float x = 1;
    ts_tensor t = view_of(&x, 0, (int64_t[]){1});
    assert_int_equal(ts_trace_writer_step(w, "", TS_OP_ADD, &t, TS_TAG_PLAIN), TS_ERR_ARG);
    assert_int_equal(ts_trace_writer_step(w, "ok", TS_OP_ADD, &t, TS_TAG_PLAIN), TS_ERR_ARG); /* sticky */
    ts_trace_writer_abort(w);
    struct stat st;
    assert_int_equal(stat(path_in("y.tstrace.tmp"), &st), -1);
    assert_int_equal(stat(path_in("y.tstrace"), &st), -1);
    ts_trace *tr;
    assert_int_equal(ts_trace_open_memory("hello", 5, &tr), TS_ERR_FORMAT);
    assert_int_equal(ts_trace_open_memory("", 0, &tr), TS_ERR_FORMAT);
}

/* ---- a writer killed mid-run ---- */

/* Step i holds i*1000 + k: the reader can check any step it recovers. */
static void fill_step(float *x, int64_t n, int i) {
    for (int64_t k = 0; k < n; k++) x[k] = (float)i * 1000.0f + (float)k;
}

static void check_recovered(ts_trace *t, int64_t n_elems) {
    float *want = malloc((size_t)n_elems * sizeof *want);
    assert_non_null(want);
    for (int64_t i = 0; i < ts_trace_count(t); i++) {
        const ts_trace_step *s = ts_trace_step_at(t, i);
        char name[32];
        snprintf(name, sizeof name, "step.%lld", (long long)i);
        assert_string_equal(s->name, name);
        const float *v;
        assert_ok(ts_trace_values(t, i, &v));
        fill_step(want, n_elems, (int)i);
        assert_memory_equal(v, want, (size_t)n_elems * sizeof(float));
    }
    free(want);
}

/* The child writes steps forever; with `flush`, it reports over the pipe how
 * many are surely on disk. */
static void child_writes(const char *path, int fd, bool flush, int64_t n_elems) {
    ts_trace_options opt;
    ts_trace_options_default(&opt);
    opt.level = TS_TRACE_VALUES;
    ts_trace_writer *w;
    if (ts_trace_writer_open(path, NULL, &opt, &w)) _exit(3);
    float *x = malloc((size_t)n_elems * sizeof *x);
    for (int i = 0;; i++) {
        fill_step(x, n_elems, i);
        ts_tensor t = view_of(x, 1, &n_elems);
        char name[32];
        snprintf(name, sizeof name, "step.%d", i);
        if (ts_trace_writer_step(w, name, TS_OP_ADD, &t, TS_TAG_PLAIN)) _exit(4);
        if (flush && i % 5 == 4) {
            if (ts_trace_writer_flush(w)) _exit(5);
            int done = i + 1;
            if (write(fd, &done, sizeof done) != sizeof done) _exit(6);
        }
        if (!flush && i == 20 && write(fd, &i, sizeof i) != sizeof i) _exit(6);
    }
}

static void killed_writer_keeps_complete_steps(void **state) {
    (void)state;
    for (int variant = 0; variant < 2; variant++) {
        bool flush = variant == 0;
        int64_t n_elems = flush ? 1000 : 30000; /* small: one thread, no OpenMP in the child */
        const char *path = path_in(flush ? "killed.tstrace" : "killed2.tstrace");
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            child_writes(path, fds[1], flush, n_elems);
            _exit(0);
        }
        close(fds[1]);
        int done = 0, got;
        while (done < (flush ? 60 : 1) && read(fds[0], &got, sizeof got) == sizeof got) done = got;
        if (!flush) {
            /* Without flushes, what is on disk is what the writer's I/O thread
             * got to: wait (at most 10 s, on a loaded machine) until it holds
             * more than one step's values, then kill. A fixed sleep made the
             * test depend on the machine's load. */
            char tmp_path[300];
            snprintf(tmp_path, sizeof tmp_path, "%s.tmp", path);
            struct stat grown;
            for (int k = 0; k < 1000; k++) {
                if (stat(tmp_path, &grown) == 0 && grown.st_size > 2 * n_elems * (int64_t)sizeof(float)) break;
                usleep(10000);
            }
        }
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        close(fds[0]);
        assert_true(WIFSIGNALED(status));
        struct stat st;
        assert_int_equal(stat(path, &st), -1); /* never renamed */
        char tmp[300];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        ts_trace *t;
        assert_ok(ts_trace_open(tmp, &t));
        assert_false(ts_trace_complete(t));
        assert_non_null(strstr(ts_trace_warning(t), "read by scanning"));
        if (flush) assert_true(ts_trace_count(t) >= done);
        check_recovered(t, n_elems);
        ts_trace_close(t);
        /* Opening PATH explains that only PATH.tmp is there. */
        assert_int_equal(ts_trace_open(path, &t), TS_ERR_IO);
        assert_non_null(strstr(ts_last_error(), ".tmp"));
    }
}

/* ---- damaged files ---- */

static unsigned char *read_all(const char *path, size_t *size) {
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    *size = (size_t)ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *b = malloc(*size);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, *size, fp), *size);
    fclose(fp);
    return b;
}

/* Every step t has must be the original's step of the same index, and its
 * values either fail their CRC or are the original's. */
static void assert_correct_prefix(ts_trace *t, ts_trace *orig) {
    assert_true(ts_trace_count(t) <= ts_trace_count(orig));
    for (int64_t i = 0; i < ts_trace_count(t); i++) {
        const ts_trace_step *a = ts_trace_step_at(t, i), *b = ts_trace_step_at(orig, i);
        assert_string_equal(a->name, b->name);
        assert_int_equal(a->op, b->op);
        assert_int_equal(a->tag, b->tag);
        assert_int_equal(a->rank, b->rank);
        assert_memory_equal(a->shape, b->shape, sizeof a->shape);
        assert_int_equal(a->has_stats, b->has_stats);
        assert_memory_equal(&a->stats, &b->stats, sizeof a->stats);
        assert_int_equal(a->has_values, b->has_values);
        assert_int_equal(a->values_count, b->values_count);
        if (!a->has_values) continue;
        const float *va, *vb;
        assert_ok(ts_trace_values(orig, i, &vb));
        ts_status s = ts_trace_values(t, i, &va);
        if (s == TS_OK)
            assert_memory_equal(va, vb, (size_t)a->values_count * sizeof(float));
        else
            assert_int_equal(s, TS_ERR_FORMAT);
    }
}

static void damaged_files_give_errors_or_correct_prefixes(void **state) {
    (void)state;
    fixture_step f[N_FIX];
    make_fixture(f);
    ts_trace_options opt;
    ts_trace_options_default(&opt);
    opt.level = TS_TRACE_VALUES;
    opt.only[0] = "*.weights";
    opt.only[1] = "input";
    opt.only[2] = "qkv*";
    opt.n_only = 3;
    const char *path = path_in("damage.tstrace");
    char *meta = meta_json();
    unlink(path);
    ts_trace_writer *w;
    assert_ok(ts_trace_writer_open(path, meta, &opt, &w));
    free(meta);
    for (int i = 0; i < N_FIX; i++) {
        ts_tensor t = view_of(f[i].data, f[i].rank, f[i].shape);
        assert_ok(ts_trace_writer_step(w, f[i].name, f[i].op, &t, f[i].tag));
    }
    /* and a stored step with views of it */
    float *qkv_data = random_floats(2 * 3 * 12, 1.0f, 0.0f);
    ts_tensor qkv = view_of(qkv_data, 3, (int64_t[]){2, 3, 12}), heads, perm, parts[3];
    assert_ok(ts_tensor_reshape(&heads, &qkv, 4, (int64_t[]){2, 3, 2, 6}));
    assert_ok(ts_tensor_permute(&perm, &heads, (int[]){0, 2, 1, 3}));
    int n_parts;
    assert_ok(ts_tensor_chunk(parts, &n_parts, &perm, 3, -1));
    assert_ok(ts_trace_writer_step(w, "qkv", TS_OP_LINEAR, &qkv, TS_TAG_PLAIN));
    assert_ok(ts_trace_writer_step(w, "qkv_heads", TS_OP_RESHAPE, &heads, TS_TAG_PLAIN));
    assert_ok(ts_trace_writer_step(w, "qkv_perm", TS_OP_PERMUTE, &perm, TS_TAG_HEADS));
    assert_ok(ts_trace_writer_step(w, "qkv_k", TS_OP_CHUNK, &parts[1], TS_TAG_HEADS));
    assert_ok(ts_trace_writer_close(w, NULL));
    free(qkv_data);
    size_t size;
    unsigned char *orig_bytes = read_all(path, &size);
    ts_trace *orig;
    assert_ok(ts_trace_open_memory(orig_bytes, size, &orig));
    unsigned char *b = malloc(size);
    assert_non_null(b);
    int errors = 0, partial = 0, whole = 0;

    /* Every cut: an error before the first record, else exactly the records
     * that lie wholly before the cut. */
    for (size_t cut = 0; cut < size; cut++) {
        ts_trace *t;
        ts_status s = ts_trace_open_memory(orig_bytes, cut, &t);
        if (s != TS_OK) {
            assert_true(cut < ts_trace_step_at(orig, 0)->file_offset);
            assert_true(ts_last_error()[0] != '\0');
            errors++;
            continue;
        }
        int64_t want = 0;
        while (want < ts_trace_count(orig)) {
            const ts_trace_step *o = ts_trace_step_at(orig, want);
            if (o->file_offset + o->record_bytes > cut) break;
            want++;
        }
        assert_int_equal(ts_trace_count(t), want);
        assert_false(ts_trace_complete(t));
        assert_correct_prefix(t, orig);
        partial++;
        ts_trace_close(t);
    }
    /* Every byte flipped, two ways. */
    for (size_t at = 0; at < size; at++) {
        for (int k = 0; k < 2; k++) {
            memcpy(b, orig_bytes, size);
            b[at] ^= k ? 0xff : 0x10;
            ts_trace *t;
            if (ts_trace_open_memory(b, size, &t) != TS_OK) {
                assert_true(ts_last_error()[0] != '\0');
                errors++;
                continue;
            }
            assert_correct_prefix(t, orig);
            if (ts_trace_count(t) == ts_trace_count(orig))
                whole++;
            else
                partial++;
            ts_trace_close(t);
        }
    }
    print_message("damage: %zu bytes, %d errors, %d partial reads, %d whole reads\n", size, errors, partial, whole);
    assert_true(errors > 0 && partial > 0 && whole > 0);
    ts_trace_close(orig);
    free(b);
    free(orig_bytes);
    free_fixture(f);
}

/* A CRC failure in the middle of a file without trailer stops the scan
 * there, and the warning names the step. */
static void crc_failure_names_the_step(void **state) {
    (void)state;
    fixture_step f[N_FIX];
    make_fixture(f);
    ts_trace_options opt;
    ts_trace_options_default(&opt);
    opt.level = TS_TRACE_VALUES;
    const char *path = path_in("crc.tstrace");
    write_trace(path, &opt, f, N_FIX, NULL);
    size_t size;
    unsigned char *b = read_all(path, &size);
    ts_trace *orig;
    assert_ok(ts_trace_open_memory(b, size, &orig));
    const ts_trace_step *s3 = ts_trace_step_at(orig, 3);
    size_t at = (size_t)(s3->file_offset + s3->record_bytes - TRF_SUFFIX_SIZE + 20); /* its mean */
    ts_trace_close(orig);
    b[at] ^= 1;
    b[size - 1] ^= 1; /* and no trailer */
    ts_trace *t;
    assert_ok(ts_trace_open_memory(b, size, &t));
    assert_int_equal(ts_trace_count(t), 3);
    assert_non_null(strstr(ts_trace_warning(t), "step 3 'encoder.layers.0.norm1.mean' fails its CRC"));
    ts_trace_close(t);
    free(b);
    free_fixture(f);
}

/* ---- fuzzer finds ---- */

static int replay_dir(const char *sub, const char *prefix) {
    char base[512];
    snprintf(base, sizeof base, "%s", __FILE__);
    char *slash = strrchr(base, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(base, sizeof base, ".");
    char path[1024];
    snprintf(path, sizeof path, "%s/fuzz/%s", base, sub);
    DIR *d = opendir(path);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
        char file[1536];
        snprintf(file, sizeof file, "%s/%s", path, e->d_name);
        size_t size;
        unsigned char *bytes = read_all(file, &size);
        ts_trace *t;
        if (ts_trace_open_memory(bytes, size, &t) == TS_OK) {
            for (int64_t i = 0; i < ts_trace_count(t); i++) {
                const ts_trace_step *s = ts_trace_step_at(t, i);
                const float *v;
                /* Touch the first and last value: the sanitizer checks they are in bounds. */
                if (s->has_values && s->values_count > 0 && ts_trace_values(t, i, &v) == TS_OK) {
                    volatile float sink = v[0] + v[s->values_count - 1];
                    (void)sink;
                }
                assert_true(ts_trace_find(t, ts_trace_step_at(t, i)->name) <= i);
            }
            ts_trace_close(t);
        } else {
            assert_true(ts_last_error()[0] != '\0');
        }
        free(bytes);
        n++;
    }
    closedir(d);
    return n;
}

static void fuzz_finds_are_replayed(void **state) {
    (void)state;
    int n = replay_dir("regressions", "trace") + replay_dir("corpus/trace", "");
    assert_true(n >= 4); /* the corpus is there */
    print_message("replayed %d fuzz inputs\n", n);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(crc_matches_zlib),
        cmocka_unit_test(stats_match_reference_on_every_isa),
        cmocka_unit_test(masked_scores_stats_on_every_isa),
        cmocka_unit_test(hist_kernels_bin_like_trf_bin),
        cmocka_unit_test(hist_finite_skips_nonfinite_on_every_isa),
        cmocka_unit_test(metadata_takes_added_items),
        cmocka_unit_test(batch_tokens_round_trip_per_side),
        cmocka_unit_test(round_trip_every_level),
        cmocka_unit_test(strided_views_are_gathered_row_major),
        cmocka_unit_test(views_of_a_stored_step),
        cmocka_unit_test(like_steps_match_their_values),
        cmocka_unit_test(like_an_earlier_step_by_its_tensor),
        cmocka_unit_test(relu_like_its_input_is_a_relu_view),
        cmocka_unit_test(relu_grouped_with_its_input),
        cmocka_unit_test(only_and_keep_batch),
        cmocka_unit_test(auto_policy_follows_the_budget),
        cmocka_unit_test(lookups_by_index_name_and_glob),
        cmocka_unit_test(bad_arguments_are_errors),
        cmocka_unit_test(killed_writer_keeps_complete_steps),
        cmocka_unit_test(damaged_files_give_errors_or_correct_prefixes),
        cmocka_unit_test(crc_failure_names_the_step),
        cmocka_unit_test(fuzz_finds_are_replayed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
