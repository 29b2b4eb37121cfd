/* Kernels: every path this CPU has (scalar, avx2, avx512, neon; simd128 in
 * the WebAssembly build, run under Node by `make wasm-check`) against the
 * scalar reference, which itself is checked against double-precision sums.
 *
 * Tolerances: gemm results are compared relative to max(1, |want|) within
 * 1e-5 * sqrt(K) (float sums of K terms in a different order); softmax,
 * layernorm and the element-wise kernels within 2e-6 of a double computation.
 * Under AddressSanitizer (-O1), and under emulation (make cross-check builds
 * with TSCOPE_EMULATED), the large cases shrink so the run stays short.
 */
#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels_impl.h"
#include "check.h"
#include "tscope/kernels.h"

#if defined(__SANITIZE_ADDRESS__) || defined(TSCOPE_EMULATED)
#define SMALL 1
#else
#define SMALL 0
#endif

#define ELT_TOL 2e-6

static const ts_isa all_paths[] = {TS_ISA_SCALAR, TS_ISA_AVX2, TS_ISA_AVX512, TS_ISA_NEON, TS_ISA_WASM};
#define N_PATHS ((int)(sizeof all_paths / sizeof all_paths[0]))

/* Their tables, for tests that drive the gemm on one directly. */
static const ts_kern_ops *const all_tables[] = {
    &ts_kern_scalar_ops,
#if defined(TS_KERN_HAVE_X86)
    &ts_kern_avx2_ops, &ts_kern_avx512_ops,
#endif
#if defined(TS_KERN_HAVE_NEON)
    &ts_kern_neon_ops,
#endif
#if defined(TS_KERN_HAVE_WASM)
    &ts_kern_wasm_ops,
#endif
};
#define N_TABLES ((int)(sizeof all_tables / sizeof all_tables[0]))

/* Deterministic values in [-1, 1). */
static uint64_t rng_state;
static float rnd(void) {
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rng_state >> 40) * (1.0 / 8388608.0)) - 1.0f;
}
static void fill(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = rnd();
}

static float *alloc(int64_t n) {
    float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    assert_non_null(p);
    return p;
}

/* Force each available path in turn; returns false when isa is not on this machine. */
static bool use_path(ts_isa isa) {
    if (!ts_isa_supported(isa)) return false;
    assert_ok(ts_kernels_force(isa));
    assert_int_equal(ts_kernels_isa(), isa);
    return true;
}

static int setup(void **state) {
    (void)state;
    rng_state = 12345;
    return ts_kernels_init() == TS_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    ts_kernels_set_threads(0);
    return ts_kernels_init() == TS_OK ? 0 : -1;
}

static void fail_if_far(const float *got, const float *want, int64_t n, double tol, const char *what) {
    int64_t at;
    double worst = check_max_rel_diff(got, want, n, &at);
    if (worst <= tol) return;
    fail_msg("%s: element %lld is %.9g, want %.9g (rel diff %.3g > %.3g)", what, (long long)at,
             (double)got[at], (double)want[at], worst, tol);
}

/* ---- gemm ---------------------------------------------------------------- */

typedef struct gemm_case {
    int M, N, K;
} gemm_case;

static const gemm_case gemm_cases[] = {
    {1, 1, 1},    {3, 17, 63},   {17, 3, 129},   {63, 129, 17},  {129, 63, 3},  {1, 515, 17},
    {515, 1, 63}, {17, 63, 515}, {129, 129, 129}, {515, 129, 63}, {63, 515, 129}, {30, 200, 64},
    {2, 37, 300}, {4, 515, 33}, {5, 67, 45}, /* a few rows (A, B^T: streaming B), and one more */
};

/* One product on the current path and on the reference, with padded leading
 * dims when `pad`; the padding of C must come back untouched. */
static void check_gemm(const char *path, bool ta, bool tb, int M, int N, int K, float alpha, float beta,
                       ts_epilogue epi, int pad, const ts_kern_ops *ops) {
    int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + 2 * pad, ldc = N + 3 * pad;
    int64_t na = (int64_t)(ta ? K : M) * lda, nb = (int64_t)(tb ? N : K) * ldb, nc = (int64_t)M * ldc;
    float *A = alloc(na), *B = alloc(nb), *C = alloc(nc), *R = alloc(nc), *bias = alloc(N);
    fill(A, na);
    fill(B, nb);
    fill(bias, N);
    if (beta == 0) {
        for (int64_t i = 0; i < nc; i++) C[i] = NAN; /* beta == 0 must not read C */
    } else {
        fill(C, nc);
    }
    for (int i = 0; i < M; i++)
        for (int j = N; j < ldc; j++) C[(int64_t)i * ldc + j] = 1234.5f;
    memcpy(R, C, sizeof(float) * (size_t)nc);
    const float *bp = epi == TS_EPI_NONE ? NULL : bias;
    if (ops)
        ts_kern_gemm(ops, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, epi, bp);
    else
        ts_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, epi, bp);
    ts_gemm_ref(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, R, ldc, epi, bp);
    char what[160];
    snprintf(what, sizeof what, "gemm %s %c%c M=%d N=%d K=%d alpha=%g beta=%g epi=%d pad=%d%s", path,
             ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, beta, (int)epi, pad, ops ? " (its table)" : "");
    fail_if_far(C, R, nc, 1e-5 * sqrt(K > 0 ? K : 1), what);
    for (int i = 0; i < M; i++)
        for (int j = N; j < ldc; j++)
            if (C[(int64_t)i * ldc + j] != 1234.5f) fail_msg("%s: wrote past N in row %d", what, i);
    free(A), free(B), free(C), free(R), free(bias);
}

static void gemm_every_path_op_and_size(void **state) {
    (void)state;
    int n_cases = (int)(sizeof gemm_cases / sizeof gemm_cases[0]);
    for (int p = 0; p < N_PATHS; p++) {
        if (!use_path(all_paths[p])) continue;
        for (int c = 0; c < n_cases; c++) {
            const gemm_case *g = &gemm_cases[c];
            if (SMALL && (int64_t)g->M * g->N * g->K > 1000000) continue;
            for (int t = 0; t < 4; t++)
                check_gemm(ts_isa_name(all_paths[p]), t & 1, t & 2, g->M, g->N, g->K, 1.0f, 0.0f,
                           TS_EPI_NONE, c % 2 ? 0 : 3, NULL);
        }
    }
}

static void gemm_alpha_beta_and_epilogues(void **state) {
    (void)state;
    const float ab[][2] = {{1, 0}, {0.5f, 0}, {1, 1}, {-2, 0.25f}, {0, 1}};
    const ts_epilogue epis[] = {TS_EPI_NONE, TS_EPI_BIAS, TS_EPI_BIAS_RELU, TS_EPI_BIAS_GELU,
                                TS_EPI_BIAS_GELU_TANH, TS_EPI_BIAS_SILU};
    for (int p = 0; p < N_PATHS; p++) {
        if (!use_path(all_paths[p])) continue;
        for (int i = 0; i < 5; i++)
            for (int e = 0; e < 6; e++)
                for (int t = 0; t < 4; t++) {
                    check_gemm(ts_isa_name(all_paths[p]), t & 1, t & 2, 37, 45, 300, ab[i][0], ab[i][1],
                               epis[e], 1, NULL);
                    check_gemm(ts_isa_name(all_paths[p]), t & 1, t & 2, 3, 1, 17, ab[i][0], ab[i][1],
                               epis[e], 0, NULL);
                }
    }
}

/* The driver's blocking loops (several MC, KC and NC blocks) with tiny blocks. */
static void gemm_small_blocks_cover_every_loop(void **state) {
    (void)state;
    for (int i = 0; i < N_TABLES; i++) {
        if (!ts_isa_supported(all_tables[i]->isa)) continue;
        ts_kern_ops small = *all_tables[i];
        small.kc_max = 7, small.a_floats = 2 * small.mr * 7, small.b_floats = 2 * small.nr * 7;
        for (int t = 0; t < 4; t++) {
            check_gemm(ts_isa_name(small.isa), t & 1, t & 2, 5 * small.mr + 3, 5 * small.nr + 1, 30, 1.5f,
                       0.5f, TS_EPI_BIAS_GELU, 2, &small);
            check_gemm(ts_isa_name(small.isa), t & 1, t & 2, 2 * small.mr, 3 * small.nr, 14, 1, 0,
                       TS_EPI_BIAS_RELU, 0, &small);
            check_gemm(ts_isa_name(small.isa), t & 1, t & 2, 3 * small.mr + 1, 2 * small.nr + 5, 20, 1, 0,
                       TS_EPI_BIAS_GELU_TANH, 1, &small);
        }
    }
}

/* The table's few-rows kernel, counted: which products the driver sends there. */
static ts_small_m_fn real_small_m;
static atomic_int small_m_calls;

static void counting_small_m(int m, int n, int k, float alpha, const float *a, int64_t lda, const float *b,
                             int64_t ldb, float beta, float *c, int64_t ldc, ts_epilogue epi, const float *bias) {
    atomic_fetch_add(&small_m_calls, 1);
    real_small_m(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, epi, bias);
}

/* One product checked on `table` (check_gemm); whether it went to small_m. */
static bool took_small_m(const ts_kern_ops *table, bool ta, bool tb, int M, int N, int K, float alpha,
                         float beta, ts_epilogue epi, int pad) {
    ts_kern_ops spy = *table;
    real_small_m = table->small_m;
    spy.small_m = counting_small_m;
    atomic_store(&small_m_calls, 0);
    check_gemm(ts_isa_name(table->isa), ta, tb, M, N, K, alpha, beta, epi, pad, &spy);
    return atomic_load(&small_m_calls) > 0;
}

/* A few rows of A against B stored (N, K), a linear on one new token: every
 * table streams B (small_m) for M up to TS_KERN_SMALL_M, with N and K off
 * every vector width and the tails of its row groups, each alpha and beta
 * and epilogue; one row more, or another layout, goes the blocked way. */
static void gemm_few_rows_stream_b(void **state) {
    (void)state;
    const int Ns[] = {1, 3, 17, 32, 67, 515}, Ks[] = {1, 5, 33, 64, 300};
    const float ab[][2] = {{1, 0}, {0.5f, 0}, {1, 1}, {-2, 0.25f}, {0, 1}};
    const ts_epilogue epis[] = {TS_EPI_NONE, TS_EPI_BIAS, TS_EPI_BIAS_RELU, TS_EPI_BIAS_GELU,
                                TS_EPI_BIAS_GELU_TANH, TS_EPI_BIAS_SILU};
    ts_kernels_set_threads(1);
    for (int t = 0; t < N_TABLES; t++) {
        const ts_kern_ops *table = all_tables[t];
        if (!ts_isa_supported(table->isa)) continue;
        assert_non_null(table->small_m);
        int c = 0; /* walks every (alpha, beta) x epilogue pair as the sizes go by */
        for (int M = 1; M <= TS_KERN_SMALL_M; M++)
            for (size_t n = 0; n < sizeof Ns / sizeof Ns[0]; n++)
                for (size_t k = 0; k < sizeof Ks / sizeof Ks[0]; k++, c++)
                    if (!took_small_m(table, false, true, M, Ns[n], Ks[k], ab[c % 5][0], ab[c % 5][1],
                                      epis[c / 5 % 6], c % 3))
                        fail_msg("%s M=%d N=%d K=%d went the blocked way", ts_isa_name(table->isa), M, Ns[n], Ks[k]);
        /* The boundary, and the layouts the path does not take. */
        assert_false(took_small_m(table, false, true, TS_KERN_SMALL_M + 1, 67, 33, 1, 0, TS_EPI_BIAS, 1));
        assert_false(took_small_m(table, true, true, 1, 67, 33, 1, 0, TS_EPI_BIAS, 1));
        assert_false(took_small_m(table, false, false, 1, 67, 33, 1, 0, TS_EPI_BIAS, 1));
        /* Shares of B's rows on two threads (B large enough to be split). */
        ts_kernels_set_threads(2);
        assert_true(took_small_m(table, false, true, 3, 515, 300, -2, 0.25f, TS_EPI_BIAS_GELU, 2));
        ts_kernels_set_threads(1);
    }
    ts_kernels_set_threads(0);
}

/* The tanh GELU and SiLU epilogues equal the product then ts_gelu_tanh /
 * ts_silu bit for bit, with a bias and without (bias NULL), on the blocked
 * path and the few-rows one, at K == 0, on one thread and two. */
static void gemm_fused_activations_equal_unfused(void **state) {
    (void)state;
    const gemm_case sizes[] = {{3, 37, 70}, {37, 45, 300}, {130, 70, 129}, {5, 3, 0}};
    const ts_epilogue epis[] = {TS_EPI_BIAS_GELU_TANH, TS_EPI_BIAS_SILU};
    for (int p = 0; p < N_PATHS; p++) {
        if (!use_path(all_paths[p])) continue;
        for (int th = 1; th <= 2; th++) {
            ts_kernels_set_threads(th);
            for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
                int M = sizes[c].M, N = sizes[c].N, K = sizes[c].K;
                float *A = alloc((int64_t)M * K), *B = alloc((int64_t)N * K), *bias = alloc(N),
                      *C1 = alloc((int64_t)M * N), *C2 = alloc((int64_t)M * N);
                fill(A, (int64_t)M * K), fill(B, (int64_t)N * K), fill(bias, N);
                for (int e = 0; e < 2; e++)
                    for (int b = 0; b < 2; b++) {
                        const float *bp = b ? bias : NULL;
                        ts_gemm(false, true, M, N, K, 2.5f, A, K, B, K, 0, C1, N, epis[e], bp);
                        ts_gemm(false, true, M, N, K, 2.5f, A, K, B, K, 0, C2, N, bp ? TS_EPI_BIAS : TS_EPI_NONE, bp);
                        (epis[e] == TS_EPI_BIAS_SILU ? ts_silu : ts_gelu_tanh)(C2, C2, (int64_t)M * N);
                        if (memcmp(C1, C2, sizeof(float) * (size_t)M * N) != 0)
                            fail_msg("%s epi=%d bias=%d M=%d N=%d K=%d threads=%d: fused differs from unfused",
                                     ts_isa_name(all_paths[p]), (int)epis[e], b, M, N, K, th);
                    }
                free(A), free(B), free(bias), free(C1), free(C2);
            }
        }
    }
    ts_kernels_set_threads(0);
}

/* bf16 rounding: to nearest with ties to even, as torch's .to(torch.bfloat16). */
static void bf16_rounding_known_values(void **state) {
    (void)state;
    const struct { float x; ts_bf16 want; } cases[] = {
        {1.0f, 0x3f80},           {-0.0f, 0x8000},        {1.0f + 0x1p-8f, 0x3f80}, /* tie: to even */
        {1.0f + 0x3p-8f, 0x3f82}, /* tie: to even, up */  {1.0f + 0x1.8p-8f, 0x3f81}, /* above the tie */
        {FLT_MAX, 0x7f80},        {INFINITY, 0x7f80},      {-INFINITY, 0xff80},
        {0x1p-130f, 0x0008},      /* a denormal stays one */ {3.140625f, 0x4049},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ts_bf16 got = ts_f32_to_bf16(cases[i].x);
        if (got != cases[i].want) fail_msg("bf16 of %a: 0x%04x, want 0x%04x", (double)cases[i].x, got, cases[i].want);
        if (ts_bf16_to_f32(got) != cases[i].x && cases[i].x == ts_bf16_to_f32(cases[i].want))
            fail_msg("0x%04x widened is not %a", got, (double)cases[i].x);
    }
    float nan = ts_bf16_to_f32(ts_f32_to_bf16(NAN)), sig = ts_bf16_to_f32(ts_f32_to_bf16(-NAN));
    assert_true(nan != nan && sig != sig);
    /* ts_bf16_from_f32 rounds the float32 copy to what it stored. */
    float src[5] = {1.0f + 0x1.8p-8f, -2.5f, 0x1p-140f, 65504.1f, 1e30f};
    ts_bf16 h[5];
    ts_bf16_from_f32(h, src, 5, true);
    for (int i = 0; i < 5; i++) assert_true(src[i] == ts_bf16_to_f32(h[i]));
    float back[5];
    ts_bf16_to_f32_n(back, h, 5);
    assert_memory_equal(back, src, sizeof back);
}

/* One bf16 linear on `table`: equal bit for bit to the float32 product on
 * the widened weights (the same table), and near the double reference. */
static void check_gemm_bf16(const ts_kern_ops *table, int M, int N, int K, int pad, float beta, ts_epilogue epi) {
    int lda = K + pad, ldw = K + 2 * pad, ldc = N + pad;
    float *A = alloc((int64_t)M * lda), *Wf = alloc((int64_t)N * ldw), *bias = alloc(N), *C1 = alloc((int64_t)M * ldc),
          *C2 = alloc((int64_t)M * ldc), *R = alloc((int64_t)M * ldc);
    ts_bf16 *W = malloc(sizeof(ts_bf16) * (size_t)(N * ldw > 0 ? N * ldw : 1));
    assert_non_null(W);
    fill(A, (int64_t)M * lda), fill(Wf, (int64_t)N * ldw), fill(bias, N), fill(C1, (int64_t)M * ldc);
    ts_bf16_from_f32(W, Wf, (int64_t)N * ldw, true); /* Wf now holds W widened */
    memcpy(C2, C1, sizeof(float) * (size_t)M * ldc), memcpy(R, C1, sizeof(float) * (size_t)M * ldc);
    const float *bp = epi == TS_EPI_NONE ? NULL : bias;
    ts_kern_gemm_bf16(table, M, N, K, 0.75f, A, lda, W, ldw, beta, C1, ldc, epi, bp);
    ts_kern_ops blocked = *table; /* bf16 products always go the blocked way; so does this one */
    blocked.small_m = NULL;
    ts_kern_gemm(&blocked, false, true, M, N, K, 0.75f, A, lda, Wf, ldw, beta, C2, ldc, epi, bp);
    ts_gemm_bf16_ref(M, N, K, 0.75f, A, lda, W, ldw, beta, R, ldc, epi, bp);
    char what[160];
    snprintf(what, sizeof what, "gemm_bf16 %s M=%d N=%d K=%d pad=%d beta=%g epi=%d", ts_isa_name(table->isa), M, N, K,
             pad, beta, (int)epi);
    if (memcmp(C1, C2, sizeof(float) * (size_t)M * ldc) != 0) fail_msg("%s: differs from float32 on W widened", what);
    fail_if_far(C1, R, (int64_t)M * ldc, 1e-5 * sqrt(K > 0 ? K : 1), what);
    free(A), free(Wf), free(bias), free(C1), free(C2), free(R), free(W);
}

/* bf16 weights on every table this CPU runs: sizes off every panel width and
 * depth block (K not a multiple of 8 leaves a part block of the widening),
 * a few rows (which go the blocked way), every epilogue, tiny blocks that
 * take every loop of the driver, and two threads. */
static void gemm_bf16_every_path(void **state) {
    (void)state;
    const gemm_case sizes[] = {{1, 1, 1}, {3, 17, 63}, {4, 515, 33}, {17, 63, 515}, {130, 70, 129}, {37, 45, 7}, {6, 16, 8}};
    const ts_epilogue epis[] = {TS_EPI_NONE, TS_EPI_BIAS, TS_EPI_BIAS_RELU, TS_EPI_BIAS_GELU,
                                TS_EPI_BIAS_GELU_TANH, TS_EPI_BIAS_SILU};
    for (int t = 0; t < N_TABLES; t++) {
        if (!ts_isa_supported(all_tables[t]->isa)) continue;
        for (int th = 1; th <= 2; th++) {
            ts_kernels_set_threads(th);
            for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++)
                check_gemm_bf16(all_tables[t], sizes[c].M, sizes[c].N, sizes[c].K, (int)c % 3, c % 2 ? 0.5f : 0.0f,
                                epis[c % 6]);
        }
        ts_kernels_set_threads(1);
        ts_kern_ops small = *all_tables[t];
        small.kc_max = 7, small.a_floats = 2 * small.mr * 7, small.b_floats = 2 * small.nr * 7;
        check_gemm_bf16(&small, 5 * small.mr + 3, 5 * small.nr + 1, 30, 2, 0.5f, TS_EPI_BIAS_GELU);
        check_gemm_bf16(&small, 2, 3 * small.nr, 14, 0, 0, TS_EPI_BIAS_SILU);
        /* The public entry on the chosen path. */
        if (use_path(all_tables[t]->isa)) {
            float a[2] = {1, 2}, c[1];
            ts_bf16 w[2] = {ts_f32_to_bf16(3), ts_f32_to_bf16(-0.5f)};
            ts_gemm_bf16(1, 1, 2, 1, a, 2, w, 2, 0, c, 1, TS_EPI_NONE, NULL);
            assert_float_equal(c[0], 2.0f, 0);
        }
    }
    ts_kernels_set_threads(0);
}

static void gemm_empty_and_degenerate(void **state) {
    (void)state;
    for (int p = 0; p < N_PATHS; p++) {
        if (!use_path(all_paths[p])) continue;
        /* K == 0: C = epilogue(beta * C); M or N == 0: nothing at all. */
        check_gemm(ts_isa_name(all_paths[p]), false, false, 4, 5, 0, 1, 0.5f, TS_EPI_BIAS, 0, NULL);
        check_gemm(ts_isa_name(all_paths[p]), false, true, 4, 5, 0, 1, 0, TS_EPI_NONE, 1, NULL);
        float c = 7;
        ts_gemm(false, false, 0, 1, 3, 1, NULL, 3, NULL, 1, 0, &c, 1, TS_EPI_NONE, NULL);
        ts_gemm(false, false, 1, 0, 3, 1, NULL, 3, NULL, 1, 0, &c, 1, TS_EPI_NONE, NULL);
        assert_float_equal(c, 7, 0);
    }
}

/* Splitting the work across threads must not change a single bit. */
static void gemm_threads_agree_bitwise(void **state) {
    (void)state;
    int M = SMALL ? 70 : 300, N = SMALL ? 90 : 301, K = SMALL ? 100 : 257;
    for (int p = 0; p < N_PATHS; p++) {
        if (!use_path(all_paths[p])) continue;
        for (int t = 0; t < 4; t++) {
            bool ta = t & 1, tb = t & 2;
            float *A = alloc((int64_t)M * K), *B = alloc((int64_t)K * N), *C1 = alloc((int64_t)M * N),
                  *C2 = alloc((int64_t)M * N);
            fill(A, (int64_t)M * K);
            fill(B, (int64_t)K * N);
            ts_kernels_set_threads(1);
            ts_gemm(ta, tb, M, N, K, 1, A, ta ? M : K, B, tb ? K : N, 0, C1, N, TS_EPI_NONE, NULL);
            ts_kernels_set_threads(2);
            ts_gemm(ta, tb, M, N, K, 1, A, ta ? M : K, B, tb ? K : N, 0, C2, N, TS_EPI_NONE, NULL);
            assert_memory_equal(C1, C2, sizeof(float) * (size_t)M * N);
            /* Wide and short: the split goes by columns. */
            ts_kernels_set_threads(1);
            ts_gemm(ta, tb, 3, N, K, 1, A, ta ? M : K, B, tb ? K : N, 0, C1, N, TS_EPI_NONE, NULL);
            ts_kernels_set_threads(2);
            ts_gemm(ta, tb, 3, N, K, 1, A, ta ? M : K, B, tb ? K : N, 0, C2, N, TS_EPI_NONE, NULL);
            assert_memory_equal(C1, C2, sizeof(float) * 3 * (size_t)N);
            free(A), free(B), free(C1), free(C2);
        }
        ts_kernels_set_threads(0);
    }
}

/* One product on `table` at 1, 2 and 3 threads, equal bit for bit: the
 * strips the threads claim, and who packed the shared blocks, change no
 * entry. A NaN in A and an infinity in B ride along; with bf16, B is W
 * widened. Near the reference at 1 thread. */
static void check_strips_bitwise(const ts_kern_ops *table, bool ta, bool tb, bool bf16, int M, int N, int K) {
    int lda = (ta ? M : K) + 1, ldb = (tb ? K : N) + 2, ldc = N + 3;
    int64_t na = (int64_t)(ta ? K : M) * lda, nb = (int64_t)(tb ? N : K) * ldb, nc = (int64_t)M * ldc;
    float *A = alloc(na), *B = alloc(nb), *bias = alloc(N), *C0 = alloc(nc), *C = alloc(nc), *R = alloc(nc);
    ts_bf16 *W = malloc(sizeof(ts_bf16) * (size_t)nb);
    assert_non_null(W);
    fill(A, na), fill(B, nb), fill(bias, N), fill(C0, nc);
    A[na / 2] = NAN;
    B[nb / 3] = INFINITY;
    if (bf16) ts_bf16_from_f32(W, B, nb, true); /* B now holds W widened */
    memcpy(R, C0, sizeof(float) * (size_t)nc);
    char what[160];
    snprintf(what, sizeof what, "gemm strips %s %c%c%s M=%d N=%d K=%d", ts_isa_name(table->isa), ta ? 'T' : 'N',
             tb ? 'T' : 'N', bf16 ? " bf16" : "", M, N, K);
    float *first = alloc(nc);
    for (int threads = 1; threads <= 3; threads++) {
        ts_kernels_set_threads(threads);
        memcpy(C, C0, sizeof(float) * (size_t)nc);
        if (bf16)
            ts_kern_gemm_bf16(table, M, N, K, 0.75f, A, lda, W, ldb, 0.5f, C, ldc, TS_EPI_BIAS_GELU_TANH, bias);
        else
            ts_kern_gemm(table, ta, tb, M, N, K, 0.75f, A, lda, B, ldb, 0.5f, C, ldc, TS_EPI_BIAS_GELU_TANH, bias);
        if (threads == 1)
            memcpy(first, C, sizeof(float) * (size_t)nc);
        else if (memcmp(first, C, sizeof(float) * (size_t)nc) != 0)
            fail_msg("%s: %d threads differ from 1", what, threads);
    }
    ts_kernels_set_threads(0);
    ts_gemm_ref(ta, tb, M, N, K, 0.75f, A, lda, B, ldb, 0.5f, R, ldc, TS_EPI_BIAS_GELU_TANH, bias);
    for (int64_t i = 0; i < nc; i++) /* the NaN's row and the infinity's column: both NaN or equal */
        if (isnan(R[i]) != isnan(first[i]) || (isinf(R[i]) && R[i] != first[i])) fail_msg("%s: entry %lld", what, (long long)i);
    for (int64_t i = 0; i < nc; i++)
        if (!isfinite(R[i])) R[i] = first[i] = 0;
    fail_if_far(first, R, nc, 1e-5 * sqrt(K), what);
    free(A), free(B), free(bias), free(C0), free(C), free(R), free(W), free(first);
}

/* Strips of rows (tall C) and of columns (wide C), sizes off every tile,
 * panel and depth block, on every table and on tiny blocks that make
 * hundreds of shared blocks for the threads to race for. */
static void gemm_strips_agree_bitwise(void **state) {
    (void)state;
    const gemm_case sizes[] = {{301, 37, 517}, {35, 517, 301}, {129, 130, 257}, {7, 1025, 600}};
    const gemm_case tiny_sizes[] = {{151, 23, 300}, {19, 257, 300}};
    for (int i = 0; i < N_TABLES; i++) {
        if (!ts_isa_supported(all_tables[i]->isa)) continue;
        ts_kern_ops tiny = *all_tables[i];
        tiny.kc_max = 7, tiny.a_floats = 2 * tiny.mr * 7, tiny.b_floats = 2 * tiny.nr * 7;
        for (int t = 0; t < 5; t++) { /* t == 4: bf16 weights (A, W stored (N, K)) */
            bool ta = t == 4 ? false : t & 1, tb = t == 4 ? true : t & 2;
            for (int c = 0; c < (SMALL ? 2 : 4); c++)
                check_strips_bitwise(all_tables[i], ta, tb, t == 4, sizes[c].M, sizes[c].N, sizes[c].K);
            for (int c = 0; c < 2; c++)
                check_strips_bitwise(&tiny, ta, tb, t == 4, tiny_sizes[c].M, tiny_sizes[c].N, tiny_sizes[c].K);
        }
    }
}

/* The two attention products, as the model calls them, with gaps between matrices. */
static void gemm_batched_matches_each_product(void **state) {
    (void)state;
    const int batch = SMALL ? 3 : 9, S = 37, hd = 16;
    for (int p = 0; p < N_PATHS; p++) {
        if (!use_path(all_paths[p])) continue;
        for (int t = 0; t < 4; t++) {
            bool ta = t & 1, tb = t & 2;
            int M = S, N = (t % 2) ? S : hd, K = (t % 2) ? hd : S;
            int lda = (ta ? M : K) + 1, ldb = (tb ? K : N) + 2, ldc = N + 3;
            int64_t sa = (int64_t)(ta ? K : M) * lda + 5, sb = (int64_t)(tb ? N : K) * ldb + 7,
                    sc = (int64_t)M * ldc + 11;
            float *A = alloc(sa * batch), *B = alloc(sb * batch), *C = alloc(sc * batch),
                  *R = alloc(sc * batch);
            fill(A, sa * batch);
            fill(B, sb * batch);
            fill(C, sc * batch);
            memcpy(R, C, sizeof(float) * (size_t)(sc * batch));
            ts_gemm_batched(ta, tb, M, N, K, 0.125f, A, lda, sa, B, ldb, sb, 0.5f, C, ldc, sc, batch);
            for (int b = 0; b < batch; b++)
                ts_gemm_ref(ta, tb, M, N, K, 0.125f, A + b * sa, lda, B + b * sb, ldb, 0.5f, R + b * sc,
                            ldc, TS_EPI_NONE, NULL);
            char what[96];
            snprintf(what, sizeof what, "gemm_batched %s %c%c", ts_isa_name(all_paths[p]), ta ? 'T' : 'N',
                     tb ? 'T' : 'N');
            fail_if_far(C, R, sc * batch, 1e-5 * sqrt(K), what);
            /* A batch of one goes the other way (threads inside the product). */
            ts_gemm_batched(ta, tb, M, N, K, 1, A, lda, sa, B, ldb, sb, 0, C, ldc, sc, 1);
            ts_gemm_ref(ta, tb, M, N, K, 1, A, lda, B, ldb, 0, R, ldc, TS_EPI_NONE, NULL);
            fail_if_far(C, R, sc, 1e-5 * sqrt(K), what);
            free(A), free(B), free(C), free(R);
        }
    }
}

static void gemm_ref_matches_hand_values(void **state) {
    (void)state;
    /* [[1,2],[3,4]] @ [[5,6],[7,8]] = [[19,22],[43,50]]; then + bias [1,-100] and ReLU. */
    const float A[] = {1, 2, 3, 4}, B[] = {5, 6, 7, 8}, bias[] = {1, -100};
    float C[4];
    ts_gemm_ref(false, false, 2, 2, 2, 1, A, 2, B, 2, 0, C, 2, TS_EPI_NONE, NULL);
    assert_floats_close(C, ((const float[]){19, 22, 43, 50}), 4, 0);
    ts_gemm_ref(true, false, 2, 2, 2, 1, A, 2, B, 2, 0, C, 2, TS_EPI_BIAS_RELU, bias);
    assert_floats_close(C, ((const float[]){27, 0, 39, 0}), 4, 0);
    ts_gemm_ref(false, true, 2, 2, 2, 2, A, 2, B, 2, 0, C, 2, TS_EPI_NONE, NULL);
    assert_floats_close(C, ((const float[]){34, 46, 78, 106}), 4, 0);
}

/* ---- softmax ------------------------------------------------------------- */

static const int odd_cols[] = {1, 3, 17, 63, 129, 515};

static void softmax_rows_sum_to_one_and_match(void **state) {
    (void)state;
    for (int p = 0; p < N_PATHS; p++) {
        if (!use_path(all_paths[p])) continue;
        for (int ci = 0; ci < 6; ci++) {
            int cols = odd_cols[ci], rows = 7;
            int64_t n = (int64_t)rows * cols;
            float *x = alloc(n), *y = alloc(n), *want = alloc(n);
            fill(x, n);
            for (int64_t i = 0; i < n; i++) x[i] *= 30; /* wide range: needs the max shift */
            x[0] = 1000.0f; /* would overflow exp without it */
            assert_int_equal(ts_softmax_rows(y, x, rows, cols, NULL, false, 0), 0);
            for (int r = 0; r < rows; r++) {
                const float *xr = x + (int64_t)r * cols;
                double mx = -INFINITY, s = 0;
                for (int c = 0; c < cols; c++) mx = fmax(mx, xr[c]);
                for (int c = 0; c < cols; c++) s += exp(xr[c] - mx);
                double sum = 0;
                for (int c = 0; c < cols; c++) {
                    want[(int64_t)r * cols + c] = (float)(exp(xr[c] - mx) / s);
                    sum += y[(int64_t)r * cols + c];
                }
                if (fabs(sum - 1) > 1e-5) fail_msg("softmax %s cols=%d row %d sums to %.9g", ts_isa_name(all_paths[p]), cols, r, sum);
            }
            fail_if_far(y, want, n, ELT_TOL, "softmax");
            /* In place gives the same. */
            ts_softmax_rows(x, x, rows, cols, NULL, false, 0);
            assert_memory_equal(x, y, sizeof(float) * (size_t)n);
            free(x), free(y), free(want);
        }
    }
}

static void softmax_mask_causal_and_fully_masked(void **state) {
    (void)state;
    for (int p = 0; p < N_PATHS; p++) {
        if (!use_path(all_paths[p])) continue;
        for (int ci = 0; ci < 6; ci++) {
            int cols = odd_cols[ci], rows = 5;
            int64_t n = (int64_t)rows * cols;
            float *x = alloc(n), *y = alloc(n), *mask = alloc(cols), *ref = alloc(n);
            fill(x, n);
            for (int c = 0; c < cols; c++) mask[c] = (c % 3 == 1) ? -INFINITY : 0.0f;
            int64_t masked = ts_softmax_rows(y, x, rows, cols, mask, false, 0);
            assert_int_equal(masked, 0);
            for (int r = 0; r < rows; r++) {
                double sum = 0;
                for (int c = 0; c < cols; c++) {
                    float v = y[(int64_t)r * cols + c];
                    if (c % 3 == 1 && v != 0.0f) fail_msg("masked entry (%d,%d) is %g, not 0", r, c, v);
                    sum += v;
                }
                assert_true(fabs(sum - 1) < 1e-5);
            }
            for (int r = 0; r < rows; r++)
                ts_kern_softmax_row_ref(ref + (int64_t)r * cols, x + (int64_t)r * cols, cols, cols, mask);
            fail_if_far(y, ref, n, ELT_TOL, "softmax with mask");

            /* Causal with offset -1: row 0 sees nothing (all zero, counted), row r sees c < r. */
            masked = ts_softmax_rows(y, x, rows, cols, NULL, true, -1);
            assert_int_equal(masked, 1);
            for (int r = 0; r < rows; r++) {
                double sum = 0;
                for (int c = 0; c < cols; c++) {
                    float v = y[(int64_t)r * cols + c];
                    if (c >= r && v != 0.0f) fail_msg("causal entry (%d,%d) is %g, not 0", r, c, v);
                    assert_false(isnan(v));
                    sum += v;
                }
                if (r > 0) assert_true(fabs(sum - 1) < 1e-5);
            }

            /* A row that is -inf everywhere (padding) becomes zeros, never NaN. */
            for (int c = 0; c < cols; c++) x[cols + c] = -INFINITY;
            for (int c = 0; c < cols; c++) x[3 * cols + c] = c == cols - 1 ? 2.0f : -INFINITY;
            masked = ts_softmax_rows(y, x, rows, cols, NULL, false, 0);
            assert_int_equal(masked, 1);
            for (int c = 0; c < cols; c++) {
                assert_true(y[cols + c] == 0.0f);
                assert_true(y[3 * cols + c] == (c == cols - 1 ? 1.0f : 0.0f));
            }
            free(x), free(y), free(mask), free(ref);
        }
    }
}

/* Logits far from 0 on every instruction set: a row like [1000, 999] needs
 * the row's max taken off before exp (else inf / inf), a row like [-1000,
 * -999] too (else 0 / 0), and a row of one large value repeated is uniform.
 * Widths cover a lone vector tail, a vector and a tail, and several vectors
 * on every width (4, 8, 16 lanes). */
static void softmax_large_logits_every_path(void **state) {
    (void)state;
    static const int widths[] = {2, 3, 9, 17, 33};
    for (int p = 0; p < N_PATHS; p++) {
        if (!use_path(all_paths[p])) continue;
        for (int wi = 0; wi < 5; wi++) {
            int cols = widths[wi], rows = 3;
            float x[3 * 33], y[3 * 33], want[3 * 33];
            for (int c = 0; c < cols; c++) {
                x[c] = 1000.0f - (float)c;
                x[cols + c] = -1000.0f + (float)c;
                x[2 * cols + c] = 1000.0f;
            }
            for (int r = 0; r < rows; r++) {
                double mx = -INFINITY, z = 0;
                for (int c = 0; c < cols; c++) mx = fmax(mx, x[r * cols + c]);
                for (int c = 0; c < cols; c++) z += exp(x[r * cols + c] - mx);
                for (int c = 0; c < cols; c++) want[r * cols + c] = (float)(exp(x[r * cols + c] - mx) / z);
            }
            assert_int_equal(ts_softmax_rows(y, x, rows, cols, NULL, false, 0), 0);
            char what[64];
            snprintf(what, sizeof what, "softmax %s of large logits, %d columns", ts_isa_name(all_paths[p]), cols);
            fail_if_far(y, want, (int64_t)rows * cols, 1e-6, what);
            if (cols == 2 && fabsf(y[0] - 0.7310586f) > 1e-6f)
                fail_msg("%s: softmax([1000, 999])[0] is %.9g, want 0.7310586", what, (double)y[0]);
        }
    }
}

/* A NaN that reaches a softmax stays NaN on every path (PyTorch's softmax
 * gives NaN there too): never zeros counted as a row with nothing to see,
 * even in a causal row narrower than a vector, where a vector max can drop a
 * NaN lane. The hidden entries stay exactly 0. */
static void softmax_keeps_nan_visible(void **state) {
    (void)state;
    for (int p = 0; p < N_PATHS; p++) {
        if (!use_path(all_paths[p])) continue;
        for (int ci = 0; ci < 6; ci++) {
            int cols = odd_cols[ci], rows = cols < 9 ? cols : 9;
            int64_t n = (int64_t)rows * cols;
            float *x = alloc(n), *y = alloc(n);
            fill(x, n);
            for (int r = 0; r < rows; r++) x[(int64_t)r * cols] = NAN; /* every row sees column 0 */
            int64_t empty = ts_softmax_rows(y, x, rows, cols, NULL, true, 0);
            if (empty != 0)
                fail_msg("softmax %s cols=%d: %lld rows of NaN counted as rows with nothing to see",
                         ts_isa_name(all_paths[p]), cols, (long long)empty);
            for (int r = 0; r < rows; r++)
                for (int c = 0; c < cols; c++) {
                    float v = y[(int64_t)r * cols + c];
                    if (c <= r ? !isnan(v) : v != 0.0f)
                        fail_msg("softmax %s cols=%d: entry (%d,%d) is %g, want %s", ts_isa_name(all_paths[p]), cols, r,
                                 c, (double)v, c <= r ? "NaN" : "0 (hidden)");
                }
            free(x), free(y);
        }
    }
}

/* Many rows: the threaded split gives what one row at a time gives. */
static void softmax_many_rows_threaded(void **state) {
    (void)state;
    int rows = SMALL ? 100 : 2000, cols = 200;
    int64_t n = (int64_t)rows * cols;
    float *x = alloc(n), *y = alloc(n), *ref = alloc(n);
    fill(x, n);
    for (int p = 0; p < N_PATHS; p++) {
        if (!use_path(all_paths[p])) continue;
        assert_int_equal(ts_softmax_rows(y, x, rows, cols, NULL, true, 0), 0);
        for (int r = 0; r < rows; r++) {
            int valid = r + 1 < cols ? r + 1 : cols;
            ts_kern_softmax_row_ref(ref + (int64_t)r * cols, x + (int64_t)r * cols, cols, valid, NULL);
        }
        fail_if_far(y, ref, n, ELT_TOL, "softmax causal, many rows");
    }
    free(x), free(y), free(ref);
}

/* ---- layernorm ------------------------------------------------------------ */

static void layernorm_matches_double(void **state) {
    (void)state;
    const float eps = 1e-5f;
    for (int p = 0; p < N_PATHS; p++) {
        if (!use_path(all_paths[p])) continue;
        for (int ci = 0; ci < 6; ci++) {
            int cols = odd_cols[ci], rows = 6;
            int64_t n = (int64_t)rows * cols;
            float *x = alloc(n), *y = alloc(n), *want = alloc(n), *g = alloc(cols), *b = alloc(cols);
            float mean[6], rstd[6], want_mean[6], want_rstd[6];
            fill(x, n);
            fill(g, cols);
            fill(b, cols);
            for (int c = 0; c < cols; c++) x[2 * cols + c] = 1000.0f + x[2 * cols + c]; /* a big offset */
            for (int c = 0; c < cols; c++) x[4 * cols + c] = 3.0f;                      /* zero variance */
            for (int pass = 0; pass < 2; pass++) {
                const float *gp = pass ? g : NULL, *bp = pass ? b : NULL;
                ts_layernorm(y, mean, rstd, x, gp, bp, rows, cols, eps);
                for (int r = 0; r < rows; r++) {
                    const float *xr = x + (int64_t)r * cols;
                    double s = 0, ss = 0;
                    for (int c = 0; c < cols; c++) s += xr[c];
                    double mu = s / cols;
                    for (int c = 0; c < cols; c++) ss += (xr[c] - mu) * (xr[c] - mu);
                    double rs = 1 / sqrt(ss / cols + eps);
                    for (int c = 0; c < cols; c++)
                        want[(int64_t)r * cols + c] =
                            (float)((xr[c] - mu) * rs * (gp ? gp[c] : 1) + (bp ? bp[c] : 0));
                    want_mean[r] = (float)mu, want_rstd[r] = (float)rs;
                }
                /* The 1000-offset row loses input bits to float, not to the kernel: 1e-4 there. */
                fail_if_far(y, want, 2 * cols, 2e-5, "layernorm");
                fail_if_far(y + 3 * cols, want + 3 * cols, 3 * cols, 2e-5, "layernorm");
                fail_if_far(y + 2 * cols, want + 2 * cols, cols, 1e-3, "layernorm, offset row");
                fail_if_far(mean, want_mean, rows, 1e-6, "layernorm mean");
                for (int r = 0; r < rows; r++)
                    if (fabs(rstd[r] - want_rstd[r]) > 1e-5 * want_rstd[r])
                        fail_msg("layernorm %s rstd[%d] %.9g, want %.9g", ts_isa_name(all_paths[p]), r,
                                 rstd[r], want_rstd[r]);
            }
            ts_layernorm(y, NULL, NULL, x, g, b, rows, cols, eps); /* mean and rstd are optional */
            free(x), free(y), free(want), free(g), free(b);
        }
    }
}

/* ---- element-wise and transpose ------------------------------------------ */

static const int64_t elt_sizes[] = {1, 3, 17, 63, 129, 515, 300007};

static void eltwise_match_double(void **state) {
    (void)state;
    for (int p = 0; p < N_PATHS; p++) {
        if (!use_path(all_paths[p])) continue;
        for (int si = 0; si < 7; si++) {
            int64_t n = elt_sizes[si];
            if (SMALL && n > 100000) n = 4099;
            float *a = alloc(n), *b = alloc(n), *y = alloc(n), *want = alloc(n);
            fill(a, n);
            fill(b, n);
            for (int64_t i = 0; i < n; i++) a[i] *= 8; /* gelu over [-8, 8] */
            ts_add(y, a, b, n);
            for (int64_t i = 0; i < n; i++) want[i] = a[i] + b[i];
            fail_if_far(y, want, n, 0, "add");
            ts_mul(y, a, b, n);
            for (int64_t i = 0; i < n; i++) want[i] = a[i] * b[i];
            fail_if_far(y, want, n, 0, "mul");
            ts_scale(y, a, -0.125f, n);
            for (int64_t i = 0; i < n; i++) want[i] = -0.125f * a[i];
            fail_if_far(y, want, n, 0, "scale");
            ts_relu(y, a, n);
            for (int64_t i = 0; i < n; i++) want[i] = a[i] > 0 ? a[i] : 0.0f;
            fail_if_far(y, want, n, 0, "relu");
            ts_gelu(y, a, n);
            for (int64_t i = 0; i < n; i++) want[i] = (float)(0.5 * a[i] * erfc(-a[i] / sqrt(2.0)));
            fail_if_far(y, want, n, ELT_TOL, "gelu");
            /* Far out in the left tail gelu is tiny, not 0 and not NaN: relative accuracy there. */
            for (int64_t i = 0; i < n; i++)
                if (a[i] < -3 && fabs(y[i] - want[i]) > 1e-5 * fabs(want[i]) + 1e-37)
                    fail_msg("gelu %s (%.9g) = %.9g, want %.9g", ts_isa_name(all_paths[p]), a[i], y[i], want[i]);
            ts_add(a, a, b, n); /* in place */
            free(a), free(b), free(y), free(want);
        }
    }
}

static void gelu_known_values_and_specials(void **state) {
    (void)state;
    /* 0.5 x erfc(-x / sqrt 2), from math.erfc in double; gelu(-inf) is NaN, as in torch. */
    const float x[] = {-6, -3, -1, -0.5f, 0, 0.5f, 1, 3, 10, INFINITY, -INFINITY};
    const float want[] = {-5.91952587e-09f, -0.00404969409f, -0.158655254f, -0.154268769f, 0,
                          0.345731231f,     0.841344746f,    2.99595031f,   10,            INFINITY, NAN};
    float y[11];
    for (int p = 0; p < N_PATHS; p++) {
        if (!use_path(all_paths[p])) continue;
        ts_gelu(y, x, 11);
        for (int i = 0; i < 11; i++)
            if (!(fabs(y[i] - want[i]) <= 1e-6 * fabs(want[i])) && !(y[i] == want[i]) &&
                !(isnan(y[i]) && isnan(want[i])))
                fail_msg("gelu %s (%g) = %.9g, want %.9g", ts_isa_name(all_paths[p]), x[i], y[i], want[i]);
        float nan_in = NAN, out;
        ts_gelu(&out, &nan_in, 1);
        assert_true(isnan(out));
        ts_relu(&out, &nan_in, 1);
        assert_true(isnan(out)); /* a NaN stays visible, as in torch */
    }
}

/* ---- activations forward and backward, Adam, the gradient's norm ------------
 *
 * Every path against the scalar reference (kernels_ref.c) on lengths around
 * the vector widths (tails), ordinary values over [-8, 8] and the edges:
 * NaN, +-inf, +-0, denormals, large magnitudes up to +-FLT_MAX. Where the
 * reference gives NaN the path must too; elsewhere the bound is stated per
 * kernel, relative to max(1, |reference|). */

static const float edge_values[] = {NAN,    INFINITY, -INFINITY, 0.0f,   -0.0f,  1e-30f,  -1e-30f, 1e-40f,
                                    -1e-40f, 0.5f,    -0.5f,     3.0f,   -3.0f,  5.5f,    -5.5f,   10.0f,
                                    -10.0f, 20.0f,    -20.0f,    100.0f, -100.0f, 1e10f,  -1e10f,  1e20f,
                                    -1e20f, FLT_MAX,  -FLT_MAX};
#define N_EDGES ((int)(sizeof edge_values / sizeof edge_values[0]))

static const int64_t act_sizes[] = {1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 129, 515, 300007};
#define N_ACT_SIZES ((int)(sizeof act_sizes / sizeof act_sizes[0]))

/* Ordinary values over [-8, 8], the edges spread through and the last ones
 * in the tail. */
static void fill_with_edges(float *x, int64_t n) {
    fill(x, n);
    for (int64_t i = 0; i < n; i++) x[i] *= 8;
    for (int e = 0; e < N_EDGES && e < n; e++) x[(e * 7919) % n] = edge_values[e];
    if (n > 2) x[n - 1] = edge_values[(n * 3) % N_EDGES], x[n - 2] = -INFINITY;
}

/* Largest |got - want| / max(1, |want|); a NaN on one side only counts as infinite. */
static double worst_diff(const float *got, const float *want, int64_t n, int64_t *at) {
    double worst = 0;
    *at = 0;
    for (int64_t i = 0; i < n; i++) {
        double d;
        if (isnan(got[i]) || isnan(want[i]))
            d = isnan(got[i]) && isnan(want[i]) ? 0 : INFINITY;
        else if (got[i] == want[i])
            d = 0;
        else
            d = fabs((double)got[i] - want[i]) / fmax(1.0, fabs((double)want[i]));
        if (d > worst) worst = d, *at = i;
    }
    return worst;
}

typedef void (*act_fn)(float *out, const float *in, int64_t n);
typedef void (*bwd_fn)(float *din, const float *dout, const float *in, int64_t n);

/* A forward kernel (fwd, fwd_ref) or a backward one (bwd, bwd_ref: they
 * accumulate, so din starts with values that must stay) on every path and
 * length, against its scalar reference. */
typedef struct elt_kernel {
    const char *name;
    act_fn fwd, fwd_ref;
    bwd_fn bwd;
    ts_grad_fn bwd_ref;
    double tol;
} elt_kernel;

static void check_elt_kernel(const elt_kernel *k) {
    double worst_all = 0;
    for (int p = 0; p < N_PATHS; p++) {
        if (!use_path(all_paths[p])) continue;
        for (int si = 0; si < N_ACT_SIZES; si++) {
            int64_t n = act_sizes[si], at;
            if (SMALL && n > 100000) n = 4099;
            float *x = alloc(n), *dout = alloc(n), *got = alloc(n), *want = alloc(n);
            fill_with_edges(x, n);
            fill(dout, n);
            fill(got, n);
            memcpy(want, got, sizeof(float) * (size_t)n);
            if (k->fwd) {
                k->fwd(got, x, n);
                k->fwd_ref(want, x, n);
            } else {
                k->bwd(got, dout, x, n);
                k->bwd_ref(want, dout, x, n);
            }
            double w = worst_diff(got, want, n, &at);
            if (w > k->tol)
                fail_msg("%s %s n %lld: x %.9g gives %.9g, the reference %.9g (diff %.3g > %.3g)", k->name,
                         ts_isa_name(all_paths[p]), (long long)n, x[at], got[at], want[at], w, k->tol);
            worst_all = fmax(worst_all, w);
            free(x), free(dout), free(got), free(want);
        }
    }
    printf("%s: largest difference from the scalar reference %.3g (bound %.3g)\n", k->name, worst_all, k->tol);
}

static void activations_match_reference_at_the_edges(void **state) {
    (void)state;
    const elt_kernel ks[] = {
        {"gelu_tanh", ts_gelu_tanh, ts_kern_gelu_tanh_ref, NULL, NULL, 1e-6},
        {"silu", ts_silu, ts_kern_silu_ref, NULL, NULL, 1e-6},
    };
    for (int i = 0; i < 2; i++) check_elt_kernel(&ks[i]);
}

static void gradients_match_reference_at_the_edges(void **state) {
    (void)state;
    const elt_kernel ks[] = {
        {"relu backward", NULL, NULL, ts_bwd_relu_backward, ts_kern_relu_grad_ref, 0},
        {"gelu backward", NULL, NULL, ts_bwd_gelu_backward, ts_kern_gelu_grad_ref, 2e-6},
        {"gelu_tanh backward", NULL, NULL, ts_bwd_gelu_tanh_backward, ts_kern_gelu_tanh_grad_ref, 2e-6},
    };
    for (int i = 0; i < 3; i++) check_elt_kernel(&ks[i]);
}

/* The softmax's backward row on every table against the scalar reference:
 * rows of 1 to 130 around the vector widths, every count of visible entries
 * (0, 1, a tail, all), an edge value (NaN, inf, huge) in dw, and ds == dw
 * (in place, as the model runs it). Past `valid` exactly 0; a NaN where the
 * reference has one; elsewhere within 1e-5 of max(1, |reference|) (the dot
 * is summed in lanes). */
static void softmax_backward_row_every_path(void **state) {
    (void)state;
    const int cols_list[] = {1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 130};
    double worst_all = 0;
    for (int t = 0; t < N_TABLES; t++) {
        const ts_kern_ops *ops = all_tables[t];
        if (!ts_isa_supported(ops->isa)) continue;
        for (size_t ci = 0; ci < sizeof cols_list / sizeof cols_list[0]; ci++) {
            int cols = cols_list[ci];
            const int valids[] = {0, 1, cols / 2, cols - 1, cols};
            for (int vi = 0; vi < 5; vi++)
                for (int e = -1; e < N_EDGES; e += 4) {
                    int valid = valids[vi];
                    float *w = alloc(cols), *dw = alloc(cols), *got = alloc(cols), *want = alloc(cols);
                    fill(dw, cols);
                    float sum = 0;
                    for (int j = 0; j < cols; j++) sum += w[j] = j < valid ? 0.5f + 0.5f * rnd() : 0.0f;
                    for (int j = 0; j < valid; j++) w[j] /= sum;
                    if (e >= 0 && valid > 0) dw[(e * 7) % valid] = edge_values[e];
                    for (int j = 0; j < cols; j++) got[j] = 5.0f; /* stale: all of it must be written */
                    ts_kern_softmax_grad_row_ref(want, dw, w, valid, cols);
                    memcpy(got, dw, sizeof(float) * (size_t)cols);
                    ops->softmax_grad_row(got, got, w, valid, cols);
                    for (int j = valid; j < cols; j++) assert_true(got[j] == 0.0f);
                    int64_t at;
                    double d = worst_diff(got, want, cols, &at);
                    if (d > 1e-5)
                        fail_msg("softmax backward %s cols %d valid %d: ds[%lld] %.9g, the reference %.9g (diff %.3g)",
                                 ts_isa_name(ops->isa), cols, valid, (long long)at, got[at], want[at], d);
                    worst_all = fmax(worst_all, d);
                    free(w), free(dw), free(got), free(want);
                }
        }
    }
    printf("softmax backward row: largest difference from the scalar reference %.3g (bound 1e-5)\n", worst_all);
}

/* LayerNorm's backward row and its parameters' share on every table against
 * the scalar references: widths around the vector widths, with and without
 * gamma, a NaN, an infinity or a zero in dy (the row's means carry it as the
 * reference's do). The parameters' share is the same arithmetic lane by lane:
 * bit for bit. The row's means are summed in lanes: within 1e-5 of
 * max(1, |reference|). dx starts with values that must stay (it adds). */
static void layernorm_backward_every_path(void **state) {
    (void)state;
    const int widths[] = {1, 3, 7, 8, 9, 16, 17, 33, 130, 515};
    const float specials[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f};
    double worst_all = 0;
    for (int t = 0; t < N_TABLES; t++) {
        const ts_kern_ops *ops = all_tables[t];
        if (!ts_isa_supported(ops->isa)) continue;
        for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++)
            for (int e = -1; e < 6; e++)
                for (int with_gamma = 0; with_gamma < 2; with_gamma++) {
                    int C = widths[wi];
                    float *dy = alloc(C), *x = alloc(C), *gamma = alloc(C), *got = alloc(C), *want = alloc(C);
                    float *gg = alloc(C), *gb = alloc(C), *wg = alloc(C), *wb = alloc(C);
                    fill(dy, C), fill(x, C), fill(gamma, C), fill(got, C), fill(gg, C), fill(gb, C);
                    if (e >= 0) dy[(e * 5) % C] = specials[e];
                    memcpy(want, got, sizeof(float) * (size_t)C);
                    memcpy(wg, gg, sizeof(float) * (size_t)C), memcpy(wb, gb, sizeof(float) * (size_t)C);
                    const float *gm = with_gamma ? gamma : NULL;
                    float mu = 0.1f, rs = 1.7f;
                    ops->layernorm_grad_row(got, dy, x, gm, mu, rs, C);
                    ts_kern_layernorm_grad_row_ref(want, dy, x, gm, mu, rs, C);
                    ops->layernorm_grad_params(gg, with_gamma ? gb : NULL, dy, x, mu, rs, C);
                    ts_kern_layernorm_grad_params_ref(wg, with_gamma ? wb : NULL, dy, x, mu, rs, C);
                    int64_t at;
                    double d = worst_diff(got, want, C, &at);
                    if (d > 1e-5)
                        fail_msg("layernorm backward %s C %d: dx[%lld] %.9g, the reference %.9g (diff %.3g)",
                                 ts_isa_name(ops->isa), C, (long long)at, got[at], want[at], d);
                    if (worst_diff(gg, wg, C, &at) != 0 || worst_diff(gb, wb, C, &at) != 0)
                        fail_msg("layernorm backward's parameters %s C %d differ from the reference at %lld",
                                 ts_isa_name(ops->isa), C, (long long)at);
                    worst_all = fmax(worst_all, d);
                    free(dy), free(x), free(gamma), free(got), free(want), free(gg), free(gb), free(wg), free(wb);
                }
    }
    printf("layernorm backward row: largest difference from the scalar reference %.3g (bound 1e-5)\n", worst_all);
}

/* Known values of the tanh form, from Python's math.tanh in double. The
 * scalar reference cancels in 1 + tanh(u) in the left tail (1e-5 relative
 * at x = -3): it is held to 1e-6 of max(1, |want|); the vector paths, which
 * compute x sigmoid(2u), to 1e-6 relative (absolute 1e-9 below 1e-3). */
static void gelu_tanh_known_values(void **state) {
    (void)state;
    const float x[] = {-6, -3, -1, 0, 0.5f, 1, 3, 10, INFINITY, -INFINITY};
    const double want[] = {-8.43964897967453e-11, -0.0036373920817729943, -0.15880800939172324, 0, 0.34571400982514394,
                           0.8411919906082768, 2.996362607918227, 10, INFINITY, NAN};
    float y[10];
    for (int p = 0; p < N_PATHS; p++) {
        if (!use_path(all_paths[p])) continue;
        ts_gelu_tanh(y, x, 10);
        double floor = all_paths[p] == TS_ISA_SCALAR ? 1.0 : 1e-3;
        for (int i = 0; i < 10; i++)
            if (!(fabs(y[i] - want[i]) <= 1e-6 * fmax(fabs(want[i]), floor)) && !(y[i] == want[i]) &&
                !(isnan(y[i]) && isnan(want[i])))
                fail_msg("gelu_tanh %s (%g) = %.9g, want %.9g", ts_isa_name(all_paths[p]), x[i], y[i], want[i]);
    }
}

/* Every path's Adam and AdamW update the parameters and moments to the
 * scalar path's bits, with a decay mask in runs (as per tensor) and large
 * and non-finite gradients. */
static void adam_every_path_same_bits(void **state) {
    (void)state;
    int64_t n = SMALL ? 40003 : 1000003;
    float *grads = alloc(n), *p0 = alloc(n), *want_p = alloc(n), *want_m = alloc(n), *want_v = alloc(n);
    uint8_t *decay = malloc((size_t)n);
    assert_non_null(decay);
    fill(p0, n);
    fill_with_edges(grads, n);
    grads[0] = NAN, grads[1] = 1e30f;
    for (int64_t i = 0; i < n; i++) decay[i] = (i / 1000) % 3 != 0;
    for (int kind = 0; kind < 2; kind++) {
        for (int p = 0; p < N_PATHS; p++) {
            if (!use_path(all_paths[p])) continue;
            ts_optim_config c;
            ts_optim_config_default(&c, kind ? TS_OPTIM_ADAMW : TS_OPTIM_ADAM);
            c.weight_decay = 0.05f;
            ts_optim o;
            assert_ok(ts_optim_init(&o, &c, n));
            assert_ok(ts_optim_set_decay(&o, decay));
            float *params = alloc(n);
            memcpy(params, p0, sizeof(float) * (size_t)n);
            for (int step = 0; step < 3; step++) ts_optim_step(&o, params, grads, 1e-3f);
            if (all_paths[p] == TS_ISA_SCALAR) {
                memcpy(want_p, params, sizeof(float) * (size_t)n);
                memcpy(want_m, o.m, sizeof(float) * (size_t)n);
                memcpy(want_v, o.v, sizeof(float) * (size_t)n);
            } else {
                for (int64_t i = 0; i < n; i++) {
                    bool same = memcmp(&params[i], &want_p[i], 4) == 0 && memcmp(&o.m[i], &want_m[i], 4) == 0 &&
                                memcmp(&o.v[i], &want_v[i], 4) == 0;
                    bool both_nan = isnan(params[i]) && isnan(want_p[i]);
                    if (!same && !both_nan)
                        fail_msg("%s %s: parameter %lld is %.9g (m %.9g, v %.9g), the scalar path's %.9g (m %.9g, v %.9g)",
                                 kind ? "adamw" : "adam", ts_isa_name(all_paths[p]), (long long)i, params[i], o.m[i],
                                 o.v[i], want_p[i], want_m[i], want_v[i]);
                }
            }
            free(params);
            ts_optim_free(&o);
        }
    }
    free(grads), free(p0), free(want_p), free(want_m), free(want_v), free(decay);
}

/* The norm against a double sum: ordinary values, a square past float's
 * range (1e20^2), and NaN or inf anywhere. */
static void grad_norm_every_path(void **state) {
    (void)state;
    int64_t n = SMALL ? 40003 : 1000003;
    float *g = alloc(n);
    for (int p = 0; p < N_PATHS; p++) {
        if (!use_path(all_paths[p])) continue;
        for (int variant = 0; variant < 4; variant++) {
            fill(g, n);
            if (variant == 1) g[n / 2] = 1e20f;
            if (variant == 2) g[n - 1] = NAN;
            if (variant == 3) g[3] = -INFINITY;
            double want = 0;
            for (int64_t i = 0; i < n; i++) want += (double)g[i] * g[i];
            want = sqrt(want);
            double got = ts_optim_grad_norm(g, n);
            if (variant == 2) {
                assert_true(isnan(got));
            } else if (variant == 3) {
                assert_true(isinf(got));
            } else if (!(fabs(got - want) <= 1e-6 * want)) {
                fail_msg("grad norm %s variant %d: %.12g, want %.12g", ts_isa_name(all_paths[p]), variant, got, want);
            }
        }
        assert_true(ts_optim_grad_norm(g, 0) == 0);
    }
    free(g);
}

/* Dropout on every path drops exactly the elements ts_u01(key, i) < p
 * drops (the mask as it always was), forward and backward, over lengths with
 * tails and chunks shared by threads; kept elements are scaled by 1/(1-p). */
static void dropout_every_path_same_mask(void **state) {
    (void)state;
    const float ps[] = {0.1f, 0.5f, 1e-6f, 0.999f, 1.0f};
    const uint64_t keys[] = {0, 12345, 0xFFFFFFFFFFFFFFFFull};
    const int64_t sizes[] = {1, 7, 9, 31, 300007};
    for (int p = 0; p < N_PATHS; p++) {
        if (!use_path(all_paths[p])) continue;
        for (int si = 0; si < 5; si++) {
            int64_t n = SMALL && sizes[si] > 100000 ? 4099 : sizes[si];
            float *x = alloc(n), *y = alloc(n), *din = alloc(n), *din0 = alloc(n);
            fill(x, n);
            fill(din0, n);
            for (int pi = 0; pi < 5; pi++)
                for (int ki = 0; ki < 3; ki++) {
                    float keep = (float)(1.0 / (1.0 - (double)ps[pi]));
                    ts_dropout(y, x, ps[pi], keys[ki], n);
                    memcpy(din, din0, sizeof(float) * (size_t)n);
                    ts_bwd_dropout_backward(din, x, ps[pi], keys[ki], n);
                    for (int64_t i = 0; i < n; i++) {
                        bool drop = ts_u01(keys[ki], (uint64_t)i) < ps[pi];
                        float want = drop ? 0.0f : x[i] * keep, want_d = drop ? din0[i] : din0[i] + x[i] * keep;
                        if (memcmp(&y[i], &want, 4) != 0 || memcmp(&din[i], &want_d, 4) != 0)
                            fail_msg("dropout %s p %g key %llu n %lld: element %lld is %.9g (grad %.9g), want %.9g (%.9g)",
                                     ts_isa_name(all_paths[p]), (double)ps[pi], (unsigned long long)keys[ki],
                                     (long long)n, (long long)i, y[i], din[i], want, want_d);
                    }
                }
            free(x), free(y), free(din), free(din0);
        }
    }
}

/* The cross-entropy's gradient on every path against the scalar path's (all
 * in double): rows around the vector widths, logits over [-30, 30] with a
 * -inf, label smoothing on and off, an ignored row, a label on a tail lane;
 * dlogits starts with values that must stay. Entries within 1e-6 of
 * max(1, |reference|); a row with +inf or NaN takes the reference's way and
 * gives its bits. */
static void cross_entropy_backward_every_path(void **state) {
    (void)state;
    const int Vs[] = {1, 3, 7, 9, 17, 100, 4099, 50257};
    const float smooths[] = {0.0f, 0.1f};
    enum { N = 5, IGNORE = -100 };
    double worst = 0;
    for (int vi = 0; vi < 8; vi++) {
        int V = SMALL && Vs[vi] > 5000 ? 5003 : Vs[vi];
        int64_t n = (int64_t)N * V;
        float *x = alloc(n), *d0 = alloc(n), *want = alloc(n), *got = alloc(n);
        fill(x, n);
        fill(d0, n);
        for (int64_t i = 0; i < n; i++) x[i] *= 30;
        x[V / 2] = -INFINITY;                   /* row 0: a logit that can never win */
        x[2 * V + V - 1] = INFINITY;            /* row 2: the reference's way */
        x[3 * V + V / 3] = NAN;                 /* row 3: the same */
        int32_t labels[N] = {0, V - 1, V / 2, 1 % V, IGNORE};
        for (int si = 0; si < 2; si++) {
            assert_ok(ts_kernels_force(TS_ISA_SCALAR));
            memcpy(want, d0, sizeof(float) * (size_t)n);
            ts_bwd_cross_entropy_backward(want, 1.5f, x, labels, N, V, IGNORE, smooths[si]);
            for (int p = 0; p < N_PATHS; p++) {
                if (!use_path(all_paths[p])) continue;
                memcpy(got, d0, sizeof(float) * (size_t)n);
                ts_bwd_cross_entropy_backward(got, 1.5f, x, labels, N, V, IGNORE, smooths[si]);
                for (int r = 0; r < N; r++) {
                    const float *g = got + (int64_t)r * V, *w = want + (int64_t)r * V;
                    if (r >= 2) { /* non-finite rows and the ignored one: the reference's bits */
                        if (memcmp(g, w, sizeof(float) * (size_t)V) != 0)
                            fail_msg("cross-entropy backward %s V %d smoothing %g: row %d is not the reference's bits",
                                     ts_isa_name(all_paths[p]), V, (double)smooths[si], r);
                        continue;
                    }
                    int64_t at;
                    double diff = worst_diff(g, w, V, &at);
                    worst = fmax(worst, diff);
                    if (diff > 1e-6)
                        fail_msg("cross-entropy backward %s V %d smoothing %g: row %d entry %lld is %.9g, the "
                                 "reference %.9g (logit %.9g)", ts_isa_name(all_paths[p]), V, (double)smooths[si], r,
                                 (long long)at, g[at], w[at], x[(int64_t)r * V + at]);
                }
            }
        }
        free(x), free(d0), free(want), free(got);
    }
    printf("cross-entropy backward: largest difference from the scalar reference %.3g (bound 1e-06)\n", worst);
}

/* The vocabulary softmax on every path against the all-double reference:
 * log Z within 1e-6 (relative to max(1, |log Z|)), each probability within
 * 1e-5 of itself plus 1e-9; rows with a NaN or an infinity, or a floor, take
 * the reference's own way and give its bits. */
static void softmax_vocab_every_path(void **state) {
    (void)state;
    const int64_t sizes[] = {1, 7, 9, 100, 4099, 50257};
    const double temps[] = {1.0, 0.7, 2.5};
    double worst_lse = 0, worst_p = 0;
    for (int p = 0; p < N_PATHS; p++) {
        if (!use_path(all_paths[p])) continue;
        for (int si = 0; si < 6; si++)
            for (int ti = 0; ti < 3; ti++)
                for (int variant = 0; variant < 4; variant++) {
                    int64_t n = sizes[si];
                    float *x = alloc(n), *got = alloc(n), *want = alloc(n);
                    fill(x, n);
                    for (int64_t i = 0; i < n; i++) x[i] *= 20; /* logits over [-20, 20] */
                    if (variant == 1) x[n / 2] = NAN;
                    if (variant == 2) x[n - 1] = -INFINITY;
                    float floor = variant == 3 ? 0.0f : -INFINITY;
                    double lse = ts_softmax_vocab(got, x, n, temps[ti], floor);
                    double lse_ref = ts_kern_softmax_vocab_ref(want, x, n, temps[ti], floor);
                    double lse1 = ts_logsumexp(x, n), lse1_ref = ts_softmax_vocab(NULL, x, n, 1.0, -INFINITY);
                    assert_true(memcmp(&lse1, &lse1_ref, sizeof lse1) == 0);
                    if (variant > 0) { /* (a row of one NaN: log Z is -inf, nothing is kept) */
                        if (memcmp(got, want, sizeof(float) * (size_t)n) != 0 || memcmp(&lse, &lse_ref, sizeof lse) != 0)
                            fail_msg("softmax_vocab %s variant %d n %lld: not the reference's bits",
                                     ts_isa_name(all_paths[p]), variant, (long long)n);
                    } else {
                        double d = fabs(lse - lse_ref) / fmax(1.0, fabs(lse_ref));
                        worst_lse = fmax(worst_lse, d);
                        if (d > 1e-6)
                            fail_msg("softmax_vocab %s n %lld T %g: log Z %.12g, reference %.12g",
                                     ts_isa_name(all_paths[p]), (long long)n, temps[ti], lse, lse_ref);
                        for (int64_t i = 0; i < n; i++) {
                            double e = fabs((double)got[i] - want[i]);
                            worst_p = fmax(worst_p, e / (want[i] + 1e-9));
                            if (e > 1e-5 * want[i] + 1e-9)
                                fail_msg("softmax_vocab %s n %lld T %g: p[%lld] = %.9g, reference %.9g",
                                         ts_isa_name(all_paths[p]), (long long)n, temps[ti], (long long)i, got[i],
                                         want[i]);
                        }
                    }
                    free(x), free(got), free(want);
                }
    }
    printf("softmax_vocab: largest log Z difference %.3g, probability %.3g (relative)\n", worst_lse, worst_p);
}

/* The first K of k_whole terms, blocked as the whole product: the same bits
 * as the whole product over zeros, past the K blocks of every path. */
static void gemm_k_prefix_equals_whole_product(void **state) {
    (void)state;
    const int wholes[] = {100, 700, 1100, 2500};
    for (int p = 0; p < N_PATHS; p++) {
        if (!use_path(all_paths[p])) continue;
        for (int wi = 0; wi < 4; wi++) {
            int kw = wholes[wi], M = 37, N = 29;
            const int ks[] = {1, 63, kw / 2 + 3, kw - 1, kw};
            for (int ki = 0; ki < 5; ki++) {
                int K = ks[ki];
                float *A = alloc((int64_t)M * kw), *B = alloc((int64_t)kw * N), *want = alloc(M * N), *got = alloc(M * N);
                fill(A, (int64_t)M * kw);
                fill(B, (int64_t)kw * N);
                for (int i = 0; i < M; i++)
                    for (int k = K; k < kw; k++) A[(int64_t)i * kw + k] = 0.0f;
                ts_gemm(false, false, M, N, kw, 1.0f, A, kw, B, N, 0.0f, want, N, TS_EPI_NONE, NULL);
                ts_gemm_k_prefix(false, false, M, N, K, kw, 1.0f, A, kw, B, N, 0.0f, got, N);
                if (memcmp(got, want, sizeof(float) * (size_t)(M * N)) != 0)
                    fail_msg("gemm_k_prefix %s K %d of %d: differs from the whole product", ts_isa_name(all_paths[p]),
                             K, kw);
                free(A), free(B), free(want), free(got);
            }
        }
    }
}

/* One causal head the gemm way (the model's causal_block): per block, the
 * scores' ts_gemm over the keys the block's last row sees, ts_softmax_rows,
 * the values' ts_gemm_k_prefix over those keys with k_whole Sk. */
static int64_t causal_head_by_gemm(const ts_attn_head *h, int r0, const int *ends, int nb) {
    int past = h->Sk - h->Sq;
    int64_t empty = 0;
    for (int b = 0, a = r0; b < nb; a = ends[b++]) {
        int e = ends[b], n = past + e < h->Sk ? past + e : h->Sk;
        float *s = h->att + a * h->ldatt;
        ts_gemm(false, true, e - a, n, h->hd, h->alpha, h->q + a * h->ldq, (int)h->ldq, h->k, (int)h->ldk, 0.0f, s,
                (int)h->ldatt, TS_EPI_NONE, NULL);
        empty += ts_softmax_rows(s, s, e - a, h->Sk, h->key_mask, true, past + a);
        ts_gemm_k_prefix(false, false, e - a, h->hd, n, h->Sk, 1.0f, s, (int)h->ldatt, h->v, (int)h->ldv, 0.0f,
                         h->ctx + a * h->ldctx, (int)h->ldctx);
    }
    return empty;
}

/* ts_attn_causal makes the gemm path's weights and values bit for bit on every
 * path: heads of odd widths, more keys than queries (decoding's past), more
 * keys than a K block (512 on AVX2), short and long blocks, padded keys, a
 * row with nothing to see, Inf and NaN in the values (0 * Inf inside the
 * block's keys is NaN both ways), the weights kept or made in scratch; and it
 * declines a block of 4 rows or fewer, which the gemm sums in another order. */
static void attention_kernel_equals_the_gemm_path(void **state) {
    (void)state;
    const struct { int Sq, Sk, hd, block; } cases[] = {
        {5, 5, 4, 5}, {37, 37, 12, 16}, {70, 90, 20, 33}, {130, 130, 64, 64}, {600, 600, 64, 64}, {67, 700, 40, 64},
    };
    int compared = 0;
    for (int p = 0; p < N_PATHS; p++) {
        if (!use_path(all_paths[p])) continue;
        for (int ci = 0; ci < (int)(sizeof cases / sizeof cases[0]); ci++) {
            int Sq = cases[ci].Sq, Sk = cases[ci].Sk, hd = cases[ci].hd, ld = 3 * hd + 5;
            float *q = alloc((int64_t)Sq * ld), *kv = alloc((int64_t)Sk * ld), *mask = alloc(Sk);
            float *att = alloc((int64_t)Sq * Sk), *att2 = alloc((int64_t)Sq * Sk);
            float *ctx = alloc((int64_t)Sq * hd), *ctx2 = alloc((int64_t)Sq * hd);
            fill(q, (int64_t)Sq * ld);
            fill(kv, (int64_t)Sk * ld);
            for (int c = 0; c < Sk; c++) mask[c] = c % 7 == 3 || c == 0 ? -INFINITY : 0.0f; /* key 0 hidden: row 0 sees nothing */
            kv[(int64_t)(Sk - 1) * ld + hd] = INFINITY, kv[(int64_t)(Sk / 2) * ld + hd + 1] = NAN; /* in v */
            q[(int64_t)(Sq - 1) * ld + 1] = NAN;
            int ends[64], nb = 0;
            for (int r = cases[ci].block; r < Sq; r += cases[ci].block) ends[nb++] = r;
            if (nb && Sq - ends[nb - 1] <= 4) nb--; /* a short last block joins the one before */
            ends[nb++] = Sq;
            for (int variant = 0; variant < 4; variant++) {
                bool masked = variant & 1, kept = variant & 2;
                ts_attn_head h = {.Sq = Sq, .Sk = Sk, .hd = hd, .alpha = 0.125f, .q = q, .ldq = ld, .k = kv,
                                  .ldk = ld, .v = kv + hd, .ldv = ld, .key_mask = masked ? mask : NULL, .att = att,
                                  .ldatt = Sk, .ctx = ctx, .ldctx = hd};
                int64_t want = causal_head_by_gemm(&h, 0, ends, nb);
                h.att = kept ? att2 : NULL, h.ctx = ctx2;
                int64_t got = ts_attn_causal(&h, 0, ends, nb);
                if (Sq <= 4) {
                    assert_int_equal(got, -1);
                    continue;
                }
                if (got != want)
                    fail_msg("attention %s Sq %d Sk %d: %lld empty rows, the gemm path %lld", ts_isa_name(all_paths[p]),
                             Sq, Sk, (long long)got, (long long)want);
                if (memcmp(ctx2, ctx, sizeof(float) * (size_t)(Sq * hd)) != 0 ||
                    (kept && memcmp(att2, att, sizeof(float) * (size_t)(Sq * Sk)) != 0))
                    fail_msg("attention %s Sq %d Sk %d hd %d mask %d kept %d: differs from the gemm path",
                             ts_isa_name(all_paths[p]), Sq, Sk, hd, masked, kept);
                compared++;
            }
            free(q), free(kv), free(mask), free(att), free(att2), free(ctx), free(ctx2);
        }
        int four[1] = {4};
        float x[64] = {0}, out[64];
        ts_attn_head tiny = {.Sq = 4, .Sk = 4, .hd = 4, .alpha = 1.0f, .q = x, .ldq = 4, .k = x, .ldk = 4, .v = x,
                             .ldv = 4, .att = out, .ldatt = 4, .ctx = out + 16, .ldctx = 4};
        assert_int_equal(ts_attn_causal(&tiny, 0, four, 1), -1);
    }
    printf("attention kernel: %d heads equal to the gemm path's bits\n", compared);
}

static void transpose_odd_sizes(void **state) {
    (void)state;
    const int dims[] = {1, 3, 17, 63, 129, 515};
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++) {
            int rows = dims[i], cols = dims[j], ldi = cols + 2, ldo = rows + 1;
            float *in = alloc((int64_t)rows * ldi), *out = alloc((int64_t)cols * ldo);
            fill(in, (int64_t)rows * ldi);
            for (int64_t k = 0; k < (int64_t)cols * ldo; k++) out[k] = -7;
            ts_transpose2d(out, ldo, in, ldi, rows, cols);
            for (int r = 0; r < rows; r++)
                for (int c = 0; c < cols; c++)
                    if (out[(int64_t)c * ldo + r] != in[(int64_t)r * ldi + c])
                        fail_msg("transpose %dx%d: (%d,%d) wrong", rows, cols, r, c);
            for (int c = 0; c < cols; c++) assert_float_equal(out[(int64_t)c * ldo + rows], -7, 0);
            free(in), free(out);
        }
}

/* ---- dispatch ---------------------------------------------------------------- */

static void init_reads_environment(void **state) {
    (void)state;
    assert_string_equal(ts_isa_name(TS_ISA_AVX512), "avx512");
    assert_true(ts_isa_supported(TS_ISA_SCALAR));
    setenv("TSCOPE_KERNELS", "scalar", 1);
    setenv("TSCOPE_THREADS", "1", 1);
    assert_ok(ts_kernels_init());
    assert_int_equal(ts_kernels_isa(), TS_ISA_SCALAR);
    assert_int_equal(ts_kernels_threads(), 1);

    setenv("TSCOPE_KERNELS", "avx9000", 1);
    assert_int_equal(ts_kernels_init(), TS_ERR_ARG);
    assert_non_null(strstr(ts_last_error(), "TSCOPE_KERNELS=avx9000"));
    for (int i = 0; i < TS_ISA_COUNT; i++) {
        if (ts_isa_supported((ts_isa)i)) continue;
        setenv("TSCOPE_KERNELS", ts_isa_name((ts_isa)i), 1);
        assert_int_equal(ts_kernels_init(), TS_ERR_UNSUPPORTED);
        assert_int_equal(ts_kernels_force((ts_isa)i), TS_ERR_UNSUPPORTED);
    }
    unsetenv("TSCOPE_KERNELS");
    setenv("TSCOPE_THREADS", "two", 1);
    assert_int_equal(ts_kernels_init(), TS_ERR_ARG);
    setenv("TSCOPE_THREADS", "0", 1);
    assert_int_equal(ts_kernels_init(), TS_ERR_ARG);
    unsetenv("TSCOPE_THREADS");
    assert_ok(ts_kernels_init());
    assert_true(ts_kernels_threads() >= 1);
    assert_true(ts_isa_supported(ts_kernels_isa()));
    assert_true(ts_kernels_peak_gflops() > 0);
    ts_kernels_set_threads(3); /* OpenMP's threads, or POSIX threads without it */
    assert_int_equal(ts_kernels_threads(), 3);
    ts_kernels_set_threads(0);
}

/* On ARM64 the NEON path is compiled in, chosen by default and by
 * TSCOPE_KERNELS=neon, and nowhere else is it claimed: a build that lost
 * its NEON files would otherwise pass every test on the scalar path. */
static void neon_is_there_exactly_on_arm64(void **state) {
    (void)state;
    setenv("TSCOPE_KERNELS", "neon", 1);
#if defined(__aarch64__)
    assert_true(ts_isa_supported(TS_ISA_NEON));
    assert_ok(ts_kernels_init());
    assert_int_equal(ts_kernels_isa(), TS_ISA_NEON);
    assert_int_equal(ts_kern_ops_current()->isa, TS_ISA_NEON);
    assert_int_equal(ts_kern_ops_current()->mr, TS_KERN_NEON_MR);
    unsetenv("TSCOPE_KERNELS");
    assert_ok(ts_kernels_init());
    assert_int_equal(ts_kernels_isa(), TS_ISA_NEON); /* the default */
#else
    assert_false(ts_isa_supported(TS_ISA_NEON));
    assert_int_equal(ts_kernels_init(), TS_ERR_UNSUPPORTED);
    assert_non_null(strstr(ts_last_error(), "TSCOPE_KERNELS=neon"));
    unsetenv("TSCOPE_KERNELS");
    assert_ok(ts_kernels_init());
#endif
}

/* In the WebAssembly build the SIMD128 path is compiled in and chosen by
 * default; natively it is never claimed (the same guard as NEON's). */
static void simd128_is_there_exactly_in_wasm(void **state) {
    (void)state;
    assert_string_equal(ts_isa_name(TS_ISA_WASM), "simd128");
    setenv("TSCOPE_KERNELS", "simd128", 1);
#if defined(__wasm_simd128__)
    assert_true(ts_isa_supported(TS_ISA_WASM));
    assert_ok(ts_kernels_init());
    assert_int_equal(ts_kern_ops_current()->isa, TS_ISA_WASM);
    assert_int_equal(ts_kern_ops_current()->mr, TS_KERN_WASM_MR);
    unsetenv("TSCOPE_KERNELS");
    assert_ok(ts_kernels_init());
    assert_int_equal(ts_kernels_isa(), TS_ISA_WASM); /* the default */
#else
    assert_false(ts_isa_supported(TS_ISA_WASM));
    assert_int_equal(ts_kernels_init(), TS_ERR_UNSUPPORTED);
    assert_non_null(strstr(ts_last_error(), "TSCOPE_KERNELS=simd128"));
    unsetenv("TSCOPE_KERNELS");
    assert_ok(ts_kernels_init());
#endif
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(init_reads_environment),
        cmocka_unit_test(neon_is_there_exactly_on_arm64),
        cmocka_unit_test(simd128_is_there_exactly_in_wasm),
        cmocka_unit_test(gemm_ref_matches_hand_values),
        cmocka_unit_test(gemm_every_path_op_and_size),
        cmocka_unit_test(gemm_alpha_beta_and_epilogues),
        cmocka_unit_test(gemm_small_blocks_cover_every_loop),
        cmocka_unit_test(gemm_few_rows_stream_b),
        cmocka_unit_test(gemm_empty_and_degenerate),
        cmocka_unit_test(gemm_fused_activations_equal_unfused),
        cmocka_unit_test(bf16_rounding_known_values),
        cmocka_unit_test(gemm_bf16_every_path),
        cmocka_unit_test(gemm_threads_agree_bitwise),
        cmocka_unit_test(gemm_strips_agree_bitwise),
        cmocka_unit_test(gemm_batched_matches_each_product),
        cmocka_unit_test(softmax_rows_sum_to_one_and_match),
        cmocka_unit_test(softmax_mask_causal_and_fully_masked),
        cmocka_unit_test(softmax_many_rows_threaded),
        cmocka_unit_test(softmax_large_logits_every_path),
        cmocka_unit_test(softmax_keeps_nan_visible),
        cmocka_unit_test(softmax_backward_row_every_path),
        cmocka_unit_test(layernorm_backward_every_path),
        cmocka_unit_test(attention_kernel_equals_the_gemm_path),
        cmocka_unit_test(layernorm_matches_double),
        cmocka_unit_test(eltwise_match_double),
        cmocka_unit_test(gelu_known_values_and_specials),
        cmocka_unit_test(activations_match_reference_at_the_edges),
        cmocka_unit_test(gradients_match_reference_at_the_edges),
        cmocka_unit_test(gelu_tanh_known_values),
        cmocka_unit_test(adam_every_path_same_bits),
        cmocka_unit_test(grad_norm_every_path),
        cmocka_unit_test(gemm_k_prefix_equals_whole_product),
        cmocka_unit_test(softmax_vocab_every_path),
        cmocka_unit_test(dropout_every_path_same_mask),
        cmocka_unit_test(cross_entropy_backward_every_path),
        cmocka_unit_test(transpose_odd_sizes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
