/* kernels: choosing the instruction set and the thread count, and the public
 * entry points that split work across threads and call the chosen table.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "core/platform.h"
#include "kernels_impl.h"

/* Element counts below which one thread does the whole job. */
#define ROWS_MIN_PER_THREAD 16384
#define TRANSPOSE_TILE 32
#define MAX_THREADS 256

static const ts_kern_ops *g_ops; /* NULL until the first init */
static int g_threads;            /* 0 until the first init */
static pthread_once_t g_lazy_once = PTHREAD_ONCE_INIT;

static const char *const isa_names[] = {
    [TS_ISA_SCALAR] = "scalar", [TS_ISA_AVX2] = "avx2", [TS_ISA_AVX512] = "avx512", [TS_ISA_NEON] = "neon",
    [TS_ISA_WASM] = "simd128",
};
_Static_assert(sizeof isa_names / sizeof isa_names[0] == TS_ISA_COUNT, "every isa needs a name");

/* Fastest first. */
static const ts_isa preference[] = {TS_ISA_AVX512, TS_ISA_NEON, TS_ISA_WASM, TS_ISA_AVX2, TS_ISA_SCALAR};

const char *ts_isa_name(ts_isa isa) {
    return (unsigned)isa < TS_ISA_COUNT ? isa_names[isa] : "unknown";
}

static const ts_kern_ops *ops_for(ts_isa isa) {
    switch (isa) {
    case TS_ISA_SCALAR: return &ts_kern_scalar_ops;
#if defined(TS_KERN_HAVE_X86)
    case TS_ISA_AVX2: return &ts_kern_avx2_ops;
    case TS_ISA_AVX512: return &ts_kern_avx512_ops;
#endif
#if defined(TS_KERN_HAVE_NEON)
    case TS_ISA_NEON: return &ts_kern_neon_ops;
#endif
#if defined(TS_KERN_HAVE_WASM)
    case TS_ISA_WASM: return &ts_kern_wasm_ops;
#endif
    default: return NULL;
    }
}

bool ts_isa_supported(ts_isa isa) {
    if (!ops_for(isa)) return false;
#if defined(TS_KERN_HAVE_X86)
    __builtin_cpu_init();
    if (isa == TS_ISA_AVX2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (isa == TS_ISA_AVX512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("fma");
#endif
    /* Compiled in is enough for NEON (ARM64 has it everywhere) and SIMD128 (a
     * browser without it refuses the whole module before anything runs). */
    return isa == TS_ISA_SCALAR || isa == TS_ISA_NEON || isa == TS_ISA_WASM;
}

static ts_isa best_isa(void) {
    for (size_t i = 0; i < sizeof preference / sizeof preference[0]; i++)
        if (ts_isa_supported(preference[i])) return preference[i];
    return TS_ISA_SCALAR;
}

static int all_cores(void) {
#if defined(_OPENMP)
    return omp_get_num_procs();
#else
    return ts_platform_cpus();
#endif
}

void ts_kernels_set_threads(int n) {
    if (n <= 0) n = all_cores();
    g_threads = n < MAX_THREADS ? n : MAX_THREADS;
}

bool ts_kernels_wait_env(const char **name, const char **value) {
    *name = TS_KERNELS_WAIT_VAR, *value = TS_KERNELS_WAIT;
#if defined(_OPENMP)
    return !getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT");
#else
    return false;
#endif
}

const char *ts_kernels_wait_policy(void) {
#if defined(_OPENMP)
    static char buf[128];
    const char *spin = getenv("GOMP_SPINCOUNT"), *policy = getenv("OMP_WAIT_POLICY");
    if (!spin && !policy) return "the OpenMP runtime's default";
    snprintf(buf, sizeof buf, "%s%.40s%s%s%.40s", policy ? "OMP_WAIT_POLICY=" : "", policy ? policy : "",
             policy && spin ? " " : "", spin ? "GOMP_SPINCOUNT=" : "", spin ? spin : "");
    return buf;
#else
    return "POSIX threads";
#endif
}

static ts_status isa_from_env(ts_isa *isa) {
    const char *k = getenv("TSCOPE_KERNELS");
    *isa = best_isa();
    if (!k || !*k) return TS_OK;
    for (int i = 0; i < TS_ISA_COUNT; i++) {
        if (strcmp(k, isa_names[i]) != 0) continue;
        if (!ts_isa_supported((ts_isa)i))
            return ts_fail(TS_ERR_UNSUPPORTED, "TSCOPE_KERNELS=%s: this CPU or build has no %s path", k, k);
        *isa = (ts_isa)i;
        return TS_OK;
    }
    return ts_fail(TS_ERR_ARG, "TSCOPE_KERNELS=%s: expected scalar, avx2, avx512, neon or simd128", k);
}

static ts_status threads_from_env(int *threads) {
    const char *t = getenv("TSCOPE_THREADS");
    *threads = 0;
    if (!t || !*t) return TS_OK;
    char *end;
    errno = 0;
    long n = strtol(t, &end, 10);
    if (errno || *end || n < 1 || n > MAX_THREADS)
        return ts_fail(TS_ERR_ARG, "TSCOPE_THREADS=%s: expected a whole number from 1 to %d", t, MAX_THREADS);
    *threads = (int)n;
    return TS_OK;
}

ts_status ts_kernels_init(void) {
    ts_isa isa;
    int threads;
    ts_status st = isa_from_env(&isa);
    if (st == TS_OK) st = threads_from_env(&threads);
    if (st != TS_OK) return st;
    ts_kernels_set_threads(threads);
    g_ops = ops_for(isa);
    return TS_OK;
}

/* A kernel called before ts_kernels_init still works: it initialises here and
 * says on stderr if the environment asked for something impossible. */
static void lazy_init(void) {
    if (g_ops && g_threads > 0) return;
    if (ts_kernels_init() == TS_OK) return;
    fprintf(stderr, "kernels: %s; using %s\n", ts_last_error(), ts_isa_name(best_isa()));
    if (g_threads <= 0) ts_kernels_set_threads(0);
    if (!g_ops) g_ops = ops_for(best_isa());
}

const ts_kern_ops *ts_kern_ops_current(void) {
    if (!g_ops) pthread_once(&g_lazy_once, lazy_init);
    return g_ops;
}

ts_isa ts_kernels_isa(void) { return ts_kern_ops_current()->isa; }

int ts_kernels_threads(void) {
    if (g_threads <= 0) pthread_once(&g_lazy_once, lazy_init);
    return g_threads;
}

#if !defined(_OPENMP)
static _Thread_local bool tl_in_team; /* this thread runs a share of ts_kern_parallel */
#endif

int ts_kern_threads_here(void) {
#if defined(_OPENMP)
    if (omp_in_parallel()) return 1; /* called from the caller's own threads: stay on this one */
#else
    if (tl_in_team) return 1;
#endif
    return ts_kernels_threads();
}

#if defined(_OPENMP)
void ts_kern_parallel(int n, ts_kern_task_fn fn, void *ctx) {
    if (n <= 1) {
        fn(ctx, 0, 1);
        return;
    }
#pragma omp parallel num_threads(n)
    fn(ctx, omp_get_thread_num(), omp_get_num_threads());
}
#else
/* A team of POSIX threads started on first use and kept (each keeps its
 * packing buffer, as OpenMP's do): workers wait for a new generation, run
 * share t of it, and the last one done wakes the caller. One team at a time;
 * a second caller meanwhile runs every share itself. */
static struct team {
    pthread_mutex_t busy, mu;
    pthread_cond_t go, done;
    int workers;       /* started, numbered 1.. */
    unsigned long gen; /* bumped for each job */
    ts_kern_task_fn fn;
    void *ctx;
    int n, pending;
} g_team = {.busy = PTHREAD_MUTEX_INITIALIZER, .mu = PTHREAD_MUTEX_INITIALIZER,
            .go = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};

static void *team_worker(void *arg) {
    const int t = (int)(intptr_t)arg;
    unsigned long seen = 0;
    tl_in_team = true;
    pthread_mutex_lock(&g_team.mu);
    for (;;) {
        while (g_team.gen == seen) pthread_cond_wait(&g_team.go, &g_team.mu);
        seen = g_team.gen;
        if (t >= g_team.n) continue; /* not in this job */
        ts_kern_task_fn fn = g_team.fn;
        void *ctx = g_team.ctx;
        int n = g_team.n;
        pthread_mutex_unlock(&g_team.mu);
        fn(ctx, t, n);
        pthread_mutex_lock(&g_team.mu);
        if (--g_team.pending == 0) pthread_cond_signal(&g_team.done);
    }
    return NULL;
}

void ts_kern_parallel(int n, ts_kern_task_fn fn, void *ctx) {
    n = n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : n;
    if (n == 1 || pthread_mutex_trylock(&g_team.busy) != 0) {
        for (int t = 0; t < n; t++) fn(ctx, t, n);
        return;
    }
    pthread_mutex_lock(&g_team.mu);
    while (g_team.workers < n - 1) {
        pthread_t id;
        if (pthread_create(&id, NULL, team_worker, (void *)(intptr_t)(g_team.workers + 1)) != 0) break;
        pthread_detach(id);
        g_team.workers++;
    }
    int team_n = g_team.workers + 1 < n ? g_team.workers + 1 : n;
    g_team.fn = fn, g_team.ctx = ctx, g_team.n = team_n, g_team.pending = team_n - 1;
    g_team.gen++;
    pthread_cond_broadcast(&g_team.go);
    pthread_mutex_unlock(&g_team.mu);
    tl_in_team = true;
    fn(ctx, 0, team_n);
    tl_in_team = false;
    pthread_mutex_lock(&g_team.mu);
    while (g_team.pending > 0) pthread_cond_wait(&g_team.done, &g_team.mu);
    pthread_mutex_unlock(&g_team.mu);
    pthread_mutex_unlock(&g_team.busy);
}
#endif

ts_status ts_kernels_force(ts_isa isa) {
    if (!ts_isa_supported(isa))
        return ts_fail(TS_ERR_UNSUPPORTED, "kernels: the %s path is not available on this CPU or build",
                       ts_isa_name(isa));
    ts_kern_ops_current(); /* so a later lazy init cannot undo the choice */
    g_ops = ops_for(isa);
    return TS_OK;
}

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct peak_job {
    const ts_kern_ops *ops;
    int64_t iters;
    double flops[MAX_THREADS];
} peak_job;

static void peak_task(void *ctx, int t, int n) {
    (void)n;
    peak_job *j = ctx;
    float sink;
    j->flops[t] = j->ops->fma_loop(j->iters, &sink);
}

double ts_kernels_peak_gflops(void) {
    peak_job job = {.ops = ts_kern_ops_current()};
    int nth = ts_kernels_threads();
    double best = 0;
    for (int rep = -1; rep < 5; rep++) { /* rep -1 wakes the threads and the clocks up */
        memset(job.flops, 0, sizeof job.flops);
        job.iters = rep < 0 ? 2000000 : 4000000;
        double flops = 0, t0 = now_seconds();
        ts_kern_parallel(nth, peak_task, &job);
        double dt = now_seconds() - t0;
        for (int t = 0; t < nth; t++) flops += job.flops[t];
        double rate = flops / dt;
        if (rep >= 0 && rate > best) best = rate;
    }
    return best * 1e-9;
}

int ts_kern_threads_for(int64_t work, int64_t min_each) {
    int n = ts_kern_threads_here();
    int64_t most = work / min_each;
    return most < 1 ? 1 : (most < n ? (int)most : n);
}

void ts_gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A, int lda,
             const float *B, int ldb, float beta, float *C, int ldc, ts_epilogue epi, const float *bias) {
    ts_kern_gemm(ts_kern_ops_current(), trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
                 epi, bias);
}

void ts_gemm_bf16(int M, int N, int K, float alpha, const float *A, int lda, const ts_bf16 *W, int ldw,
                  float beta, float *C, int ldc, ts_epilogue epi, const float *bias) {
    ts_kern_gemm_bf16(ts_kern_ops_current(), M, N, K, alpha, A, lda, W, ldw, beta, C, ldc, epi, bias);
}

/* Narrowing and widening run on every kernel thread: a big model's weights
 * are gigabytes, and these passes are what loading them costs. */
static void narrow_span(ts_bf16 *dst, float *src, int64_t n, bool round_src) {
    for (int64_t i = 0; i < n; i++) {
        dst[i] = ts_f32_to_bf16(src[i]);
        if (round_src) src[i] = ts_bf16_to_f32(dst[i]);
    }
}

void ts_bf16_from_f32(ts_bf16 *dst, float *src, int64_t n, bool round_src) {
    TS_KERN_SPLIT(n, narrow_span(dst + i0, src + i0, len, round_src));
}

static void widen_span(float *dst, const ts_bf16 *src, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = ts_bf16_to_f32(src[i]);
}

void ts_bf16_to_f32_n(float *dst, const ts_bf16 *src, int64_t n) { TS_KERN_SPLIT(n, widen_span(dst + i0, src + i0, len)); }

void ts_gemm_k_prefix(bool trans_a, bool trans_b, int M, int N, int K, int k_whole, float alpha, const float *A,
                      int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    ts_kern_gemm_prefix(ts_kern_ops_current(), trans_a, trans_b, M, N, K, k_whole, alpha, A, lda, B, ldb, beta, C,
                        ldc, TS_EPI_NONE, NULL);
}

void ts_gemm_batched(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                     int lda, int64_t stride_a, const float *B, int ldb, int64_t stride_b, float beta,
                     float *C, int ldc, int64_t stride_c, int batch) {
    ts_kern_gemm_batched(ts_kern_ops_current(), trans_a, trans_b, M, N, K, alpha, A, lda, stride_a, B,
                         ldb, stride_b, beta, C, ldc, stride_c, batch);
}

/* On the calling thread: rows are what callers share out (the probs step,
 * the loss). A floor (top-k) or a non-finite logit goes the reference's way. */
double ts_softmax_vocab(float *probs, const float *logits, int64_t n, double temperature, float floor) {
    const ts_kern_ops *ops = ts_kern_ops_current();
    float top = floor == -INFINITY && n > 0 ? ops->max_finite(logits, n) : NAN;
    if (!isfinite(top)) return ts_kern_softmax_vocab_ref(probs, logits, n, temperature, floor);
    double z = ops->exp_sum(probs, logits, n, top, (float)temperature);
    if (probs) ops->scale(probs, probs, (float)(1.0 / z), n);
    return log(z) + (double)top / temperature;
}

double ts_logsumexp(const float *x, int64_t n) { return ts_softmax_vocab(NULL, x, n, 1.0, -INFINITY); }

int64_t ts_softmax_rows(float *out, const float *in, int64_t rows, int cols, const float *mask,
                        bool causal, int causal_offset) {
    const ts_kern_ops *ops = ts_kern_ops_current();
    int nth = ts_kern_threads_for(rows * cols, ROWS_MIN_PER_THREAD);
    int64_t all_masked = 0;
    (void)nth;
    TS_OMP(parallel for num_threads(nth) schedule(dynamic, TS_KERN_ROW_CHUNK(rows, nth)) reduction(+ : all_masked))
    for (int64_t r = 0; r < rows; r++) {
        int64_t valid = causal ? r + causal_offset + 1 : cols;
        valid = valid < 0 ? 0 : (valid > cols ? cols : valid);
        all_masked += ops->softmax_row(out + r * cols, in + r * cols, cols, (int)valid, mask);
    }
    return all_masked;
}

void ts_layernorm(float *out, float *mean, float *rstd, const float *in, const float *gamma,
                  const float *beta, int64_t rows, int cols, float eps) {
    const ts_kern_ops *ops = ts_kern_ops_current();
    int nth = ts_kern_threads_for(rows * cols, ROWS_MIN_PER_THREAD);
    (void)nth;
    TS_OMP(parallel for num_threads(nth) schedule(dynamic, TS_KERN_ROW_CHUNK(rows, nth)))
    for (int64_t r = 0; r < rows; r++)
        ops->layernorm_row(out + r * cols, mean ? mean + r : NULL, rstd ? rstd + r : NULL, in + r * cols,
                           gamma, beta, cols, eps);
}

void ts_add(float *out, const float *a, const float *b, int64_t n) {
    const ts_kern_ops *ops = ts_kern_ops_current();
    TS_KERN_SPLIT(n, ops->add(out + i0, a + i0, b + i0, len));
}

void ts_scale(float *out, const float *in, float s, int64_t n) {
    const ts_kern_ops *ops = ts_kern_ops_current();
    TS_KERN_SPLIT(n, ops->scale(out + i0, in + i0, s, len));
}

void ts_relu(float *out, const float *in, int64_t n) {
    const ts_kern_ops *ops = ts_kern_ops_current();
    TS_KERN_SPLIT(n, ops->relu(out + i0, in + i0, len));
}

void ts_gelu(float *out, const float *in, int64_t n) {
    const ts_kern_ops *ops = ts_kern_ops_current();
    TS_KERN_SPLIT(n, ops->gelu(out + i0, in + i0, len));
}

void ts_gelu_tanh(float *out, const float *in, int64_t n) {
    const ts_kern_ops *ops = ts_kern_ops_current();
    TS_KERN_SPLIT(n, ops->gelu_tanh(out + i0, in + i0, len));
}

void ts_silu(float *out, const float *in, int64_t n) {
    const ts_kern_ops *ops = ts_kern_ops_current();
    TS_KERN_SPLIT(n, ops->silu(out + i0, in + i0, len));
}

void ts_mul(float *out, const float *a, const float *b, int64_t n) {
    const ts_kern_ops *ops = ts_kern_ops_current();
    TS_KERN_SPLIT(n, ops->mul(out + i0, a + i0, b + i0, len));
}

void ts_transpose2d(float *out, int ldo, const float *in, int ldi, int rows, int cols) {
    int nth = ts_kern_threads_for((int64_t)rows * cols, TS_KERN_ELTWISE_MIN);
    (void)nth;
    TS_OMP(parallel for num_threads(nth) schedule(dynamic, 1))
    for (int r0 = 0; r0 < rows; r0 += TRANSPOSE_TILE) {
        int r1 = r0 + TRANSPOSE_TILE < rows ? r0 + TRANSPOSE_TILE : rows;
        for (int c0 = 0; c0 < cols; c0 += TRANSPOSE_TILE) {
            int c1 = c0 + TRANSPOSE_TILE < cols ? c0 + TRANSPOSE_TILE : cols;
            for (int r = r0; r < r1; r++)
                for (int c = c0; c < c1; c++) out[(int64_t)c * ldo + r] = in[(int64_t)r * ldi + c];
        }
    }
}
