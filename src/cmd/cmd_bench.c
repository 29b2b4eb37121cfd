/* tscope bench: measure tscope against its peers in the same run.
 *
 * A small table of cases (`tscope bench CASE`); each case prints one line per
 * measurement. Timings are the median of --reps runs after one warm-up run.
 * OpenBLAS is never linked into tscope: it is opened at run time with dlopen
 * and reported as "n/a" when it is not installed.
 */
#include <dlfcn.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "bench_model.h"
#include "bench_train.h"
#include "bench_time.h"
#include "tscope/kernels.h"

typedef struct bench_opts {
    int reps;    /* timed runs per measurement; the median is printed */
    int threads; /* kernel threads, 0 = all cores */
    const char *preset; /* forward: the model (NULL: seed000) */
    int busy;           /* processes that only spin beside the case, as a loaded machine's other work */
    const char *dtype;  /* forward: how the weight matrices are read, f32 or bf16 (NULL: f32) */
} bench_opts;

typedef struct bench_case {
    const char *name;
    int (*run)(const bench_opts *o); /* exit code */
    const char *summary;
} bench_case;

static float *alloc_random(int64_t n, uint64_t seed) {
    float *p = malloc(sizeof(float) * (size_t)n);
    if (!p) return NULL;
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        p[i] = (float)((seed >> 40) * (1.0 / 8388608.0)) - 1.0f;
    }
    return p;
}

/* ---- OpenBLAS, opened at run time ------------------------------------------ */

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };
typedef void (*cblas_sgemm_fn)(int order, int ta, int tb, int M, int N, int K, float alpha, const float *A,
                               int lda, const float *B, int ldb, float beta, float *C, int ldc);

typedef struct peer_blas {
    void *lib;
    cblas_sgemm_fn sgemm; /* NULL: not installed */
    const char *core;     /* the kernels OpenBLAS chose ("Haswell", "SkylakeX", ...) or NULL */
} peer_blas;

static peer_blas open_blas(int threads) {
    peer_blas b = {0};
    b.lib = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!b.lib) return b;
    b.sgemm = (cblas_sgemm_fn)(uintptr_t)dlsym(b.lib, "cblas_sgemm");
    void (*set_threads)(int) = (void (*)(int))(uintptr_t)dlsym(b.lib, "openblas_set_num_threads");
    if (set_threads) set_threads(threads); /* the same cores as tscope */
    char *(*corename)(void) = (char *(*)(void))(uintptr_t)dlsym(b.lib, "openblas_get_corename");
    if (corename) b.core = corename();
    return b;
}

static void close_blas(peer_blas *b) {
    if (b->lib) dlclose(b->lib);
    b->lib = NULL, b->sgemm = NULL;
}

/* ---- gemm ------------------------------------------------------------------ */

/* One product as the model runs it: `batch` products of op(A) (M,K) @ op(B) (K,N). */
typedef struct gemm_shape {
    const char *label;
    int M, K, N, batch;
    bool tb; /* B stored (N,K), as nn.Linear weights (out, in) and attention keys */
} gemm_shape;

static const gemm_shape gemm_shapes[] = {
    {"gemm 6000x512x1536 NT", 6000, 512, 1536, 1, true},  /* qkv projection */
    {"gemm 6000x512x2048 NT", 6000, 512, 2048, 1, true},  /* ffn up */
    {"gemm 6000x2048x512 NT", 6000, 2048, 512, 1, true},  /* ffn down */
    {"gemm 240x[200x64x200] NT", 200, 64, 200, 240, true}, /* scores = Q K^T per head */
    {"gemm 240x[200x200x64] NN", 200, 200, 64, 240, false}, /* weights @ V per head */
};

typedef struct gemm_bufs {
    float *A, *B, *C, *C_peer;
} gemm_bufs;

static void run_tscope(const gemm_shape *s, const gemm_bufs *b) {
    int ldb = s->tb ? s->K : s->N;
    if (s->batch == 1)
        ts_gemm(false, s->tb, s->M, s->N, s->K, 1.0f, b->A, s->K, b->B, ldb, 0.0f, b->C, s->N, TS_EPI_NONE, NULL);
    else
        ts_gemm_batched(false, s->tb, s->M, s->N, s->K, 1.0f, b->A, s->K, (int64_t)s->M * s->K, b->B, ldb,
                        (int64_t)s->K * s->N, 0.0f, b->C, s->N, (int64_t)s->M * s->N, s->batch);
}

/* OpenBLAS has no strided-batched sgemm in its cblas: one call per product. */
static void run_peer(const peer_blas *p, const gemm_shape *s, const gemm_bufs *b) {
    int ldb = s->tb ? s->K : s->N;
    for (int i = 0; i < s->batch; i++)
        p->sgemm(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, s->tb ? CBLAS_TRANS : CBLAS_NO_TRANS, s->M, s->N, s->K, 1.0f,
                 b->A + (int64_t)i * s->M * s->K, s->K, b->B + (int64_t)i * s->K * s->N, ldb, 0.0f,
                 b->C_peer + (int64_t)i * s->M * s->N, s->N);
}

static double max_abs_diff(const float *a, const float *b, int64_t n) {
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= worst)) worst = d;
    }
    return worst;
}

/* One measured product, printed once the peak is known. */
typedef struct gemm_result {
    double tscope, peer; /* GFLOP/s; peer 0 when OpenBLAS is absent */
    double diff;         /* max |tscope - openblas| over C */
} gemm_result;

static int bench_one_gemm(const bench_opts *o, const peer_blas *peer, const gemm_shape *s, gemm_result *res) {
    int64_t na = (int64_t)s->batch * s->M * s->K, nb = (int64_t)s->batch * s->K * s->N,
            nc = (int64_t)s->batch * s->M * s->N;
    gemm_bufs b = {alloc_random(na, 1), alloc_random(nb, 2), alloc_random(nc, 3), alloc_random(nc, 4)};
    double *t_ts = malloc(sizeof(double) * (size_t)o->reps), *t_peer = malloc(sizeof(double) * (size_t)o->reps);
    int rc = 0;
    if (!b.A || !b.B || !b.C || !b.C_peer || !t_ts || !t_peer) {
        fprintf(stderr, "tscope bench: out of memory for %s\n", s->label);
        rc = 1;
        goto done;
    }
    /* Warm-up first (page faults, packing buffers, threads), then the two
     * alternate, first one then the other leading, so a burst of load from
     * elsewhere on the machine lands on both. */
    for (int r = -1; r < o->reps; r++) {
        for (int turn = 0; turn < 2; turn++) {
            bool ours = (turn == 0) == (r % 2 == 0);
            if (!ours && !peer->sgemm) continue;
            double t0 = bench_now();
            if (ours)
                run_tscope(s, &b);
            else
                run_peer(peer, s, &b);
            if (r >= 0) (ours ? t_ts : t_peer)[r] = bench_now() - t0;
        }
    }
    double flops = 2.0 * s->M * s->N * (double)s->K * s->batch;
    res->tscope = flops / bench_median(t_ts, o->reps) * 1e-9;
    res->peer = peer->sgemm ? flops / bench_median(t_peer, o->reps) * 1e-9 : 0;
    res->diff = peer->sgemm ? max_abs_diff(b.C, b.C_peer, nc) : 0;
done:
    free(b.A), free(b.B), free(b.C), free(b.C_peer), free(t_ts), free(t_peer);
    return rc;
}

/* Bytes moved per second by a row kernel that reads and writes (rows, cols) once. */
typedef enum row_kernel { ROW_SOFTMAX, ROW_LAYERNORM } row_kernel;

static int bench_rows(const bench_opts *o, row_kernel k, int64_t rows, int cols) {
    int64_t n = rows * cols;
    float *x = alloc_random(n, 5), *y = alloc_random(n, 6), *g = alloc_random(cols, 7), *bb = alloc_random(cols, 8);
    float *mean = malloc(sizeof(float) * (size_t)rows), *rstd = malloc(sizeof(float) * (size_t)rows);
    double *t = malloc(sizeof(double) * (size_t)o->reps);
    int rc = 0;
    if (!x || !y || !g || !bb || !mean || !rstd || !t) {
        fprintf(stderr, "tscope bench: out of memory for the row kernels\n");
        rc = 1;
        goto done;
    }
    for (int r = -1; r < o->reps; r++) { /* r == -1: warm-up */
        double t0 = bench_now();
        if (k == ROW_SOFTMAX)
            ts_softmax_rows(y, x, rows, cols, NULL, false, 0);
        else
            ts_layernorm(y, mean, rstd, x, g, bb, rows, cols, 1e-5f);
        if (r >= 0) t[r] = bench_now() - t0;
    }
    double gbs = 2.0 * sizeof(float) * (double)n / bench_median(t, o->reps) * 1e-9;
    printf("%-9s %lldx%-14d tscope %6.1f GB/s  (read + write once)\n", k == ROW_SOFTMAX ? "softmax" : "layernorm",
           (long long)rows, cols, gbs);
done:
    free(x), free(y), free(g), free(bb), free(mean), free(rstd), free(t);
    return rc;
}

static int bench_gemm(const bench_opts *o) {
    double peak = ts_kernels_peak_gflops(); /* before OpenBLAS starts its threads */
    peer_blas peer = open_blas(ts_kernels_threads());
    printf("# tscope kernels: %s, %d threads; median of %d runs after a warm-up\n", ts_isa_name(ts_kernels_isa()),
           ts_kernels_threads(), o->reps);
    printf("# M x K x N: A (M,K) @ op(B); NT = B stored (N,K) as nn.Linear weights, NN = B stored (K,N)\n");
    if (!peer.sgemm) {
        printf("# openblas: libopenblas.so.0 not found, peer figures n/a\n");
    } else {
        const char *forced = getenv("OPENBLAS_CORETYPE");
        printf("# openblas: libopenblas.so.0, %s kernels%s%s%s, %d threads\n", peer.core ? peer.core : "unknown",
               forced ? " (OPENBLAS_CORETYPE=" : "", forced ? forced : "", forced ? ")" : "", ts_kernels_threads());
    }
    /* The peak is probed before each product and the best probe kept: a probe
     * that other work on the machine slowed down would flatter every ratio. */
    enum { N_SHAPES = sizeof gemm_shapes / sizeof gemm_shapes[0] };
    gemm_result res[N_SHAPES] = {{0}};
    int rc = 0;
    for (int i = 0; i < N_SHAPES; i++) {
        if (i > 0) peak = fmax(peak, ts_kernels_peak_gflops());
        rc |= bench_one_gemm(o, &peer, &gemm_shapes[i], &res[i]);
    }
    peak = fmax(peak, ts_kernels_peak_gflops());
    printf("peak %.1f GFLOP/s (fp32 FMA, %s, %d threads, best of %d probes)\n", peak, ts_isa_name(ts_kernels_isa()),
           ts_kernels_threads(), N_SHAPES + 1);
    for (int i = 0; i < N_SHAPES; i++) {
        const gemm_shape *s = &gemm_shapes[i];
        printf("%-26s tscope %6.1f GFLOP/s  ", s->label, res[i].tscope);
        if (peer.sgemm) {
            printf("openblas %6.1f GFLOP/s  ratio %.2f", res[i].peer, res[i].tscope / res[i].peer);
            /* The two answers must agree, or the race means nothing. */
            if (res[i].diff > 1e-3 * sqrt(s->K)) {
                printf("  RESULTS DIFFER (max |diff| %.3g)", res[i].diff);
                rc = 1;
            }
        } else {
            printf("openblas    n/a              ");
        }
        printf("  (%.0f%% of peak)\n", 100.0 * res[i].tscope / peak);
    }
    rc |= bench_rows(o, ROW_SOFTMAX, 240 * 200, 200);
    rc |= bench_rows(o, ROW_LAYERNORM, 6000, 512);
    close_blas(&peer);
    return rc;
}

/* ---- a loaded machine ------------------------------------------------------------ */

#define MAX_BUSY 64

/* n processes that spin until killed: the other work of a student's laptop,
 * so that a case shows what threads do on a machine that is not quiet. */
static int start_busy(int n, pid_t *pids) {
    pid_t parent = getpid();
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] < 0) return i;
        if (pids[i] == 0) {
#if defined(__linux__)
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive an interrupted bench */
#endif
            if (getppid() != parent) _exit(0); /* the bench ended before the line above took effect */
            volatile unsigned long spin = 0;
            for (;;) spin++;
        }
    }
    return n;
}

static void stop_busy(int n, const pid_t *pids) {
    for (int i = 0; i < n; i++) kill(pids[i], SIGKILL);
    for (int i = 0; i < n; i++) waitpid(pids[i], NULL, 0);
}

/* ---- the command --------------------------------------------------------------- */

static int bench_forward(const bench_opts *o) {
    ts_dtype dtype = TS_DTYPE_F32;
    if (o->dtype && ts_model_dtype_parse(o->dtype, "--dtype", &dtype)) return ts_cli_error("bench", "%s", ts_last_error());
    return bench_model_forward(o->reps, o->preset, dtype);
}
static int bench_train(const bench_opts *o) { return bench_model_train(o->reps < 3 ? o->reps : 3, o->preset); }
static int bench_live_case(const bench_opts *o) { return bench_live(o->threads); }

/* New cases (forward, train) go here. */
static const bench_case bench_cases[] = {
    {"gemm", bench_gemm, "sgemm on the model's shapes against OpenBLAS; softmax and layernorm bandwidth"},
    {"forward", bench_forward, "one forward pass of --preset (seed000), no hook and traced at stats level"},
    {"train", bench_train, "one training step of --preset (copy): forward, backward, Adam; median of 3"},
    {"live", bench_live_case, "tscope live typed by a script, off-screen: each keystroke's pass and frame"},
};
#define N_BENCH_CASES ((int)(sizeof bench_cases / sizeof bench_cases[0]))

int ts_cmd_bench(int argc, char **argv) {
    bench_opts o = {.reps = 7, .threads = 0};
    const ts_flag flags[] = {
        {"--reps", TS_FLAG_INT, &o.reps, "N", "timed runs per measurement, the median is shown (default 7)", NULL,
         NULL, NULL},
        {"--threads", TS_FLAG_INT, &o.threads, "N", "kernel threads (default: TSCOPE_THREADS, else all cores)",
         NULL, NULL, NULL},
        {"--preset", TS_FLAG_STRING, &o.preset, "P", "the model of `forward` (default seed000)", NULL, NULL, NULL},
        {"--busy", TS_FLAG_INT, &o.busy, "N", "processes that only spin while the case runs: a loaded machine (default 0)",
         NULL, NULL, NULL},
        {"--dtype", TS_FLAG_CHOICE, &o.dtype, NULL,
         "forward's weight matrices: f32 (the default) or bf16 (rounded, read as bf16 by the GEMMs)", "f32|bf16", NULL,
         NULL},
    };
    char cases_help[1024] = "CASE is one of:";
    for (int i = 0; i < N_BENCH_CASES; i++) {
        size_t len = strlen(cases_help);
        snprintf(cases_help + len, sizeof cases_help - len, "\n  %-8s %s", bench_cases[i].name, bench_cases[i].summary);
    }
    const ts_cli_spec spec = {
        .command = "bench",
        .synopsis = "CASE [--reps N] [--threads N] [--preset P] [--busy N] [--dtype f32|bf16]",
        .description = cases_help,
        .flags = flags,
        .n_flags = (int)(sizeof flags / sizeof flags[0]),
        .min_positional = 1,
        .max_positional = 1,
        .positional_meta = "CASE",
    };
    const char *pos[1];
    int n_pos = 0;
    int rc = ts_cli_parse(&spec, argc, argv, pos, &n_pos);
    if (rc >= 0) return rc;
    if (o.reps < 1 || o.reps > 1000) return ts_cli_error("bench", "--reps %d: expected 1 to 1000", o.reps);
    if (o.threads < 0) return ts_cli_error("bench", "--threads %d: expected 0 (all cores) or more", o.threads);
    if (o.busy < 0 || o.busy > MAX_BUSY) return ts_cli_error("bench", "--busy %d: expected 0 to %d", o.busy, MAX_BUSY);
    const bench_case *c = NULL;
    for (int i = 0; i < N_BENCH_CASES; i++)
        if (strcmp(bench_cases[i].name, pos[0]) == 0) c = &bench_cases[i];
    if (!c) {
        char names[256] = "";
        for (int i = 0; i < N_BENCH_CASES; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", bench_cases[i].name);
        return ts_cli_error("bench", "unknown case '%s' (expected %s)", pos[0], names);
    }
    if (o.preset && (strcmp(c->name, "gemm") == 0 || strcmp(c->name, "live") == 0))
        return ts_cli_error("bench", "--preset picks the model of forward and train; gemm measures the kernels alone");
    if (o.dtype && strcmp(c->name, "forward") != 0)
        return ts_cli_error("bench", "--dtype is how forward reads its weights; %s runs in float32", c->name);
    if (ts_kernels_init() != TS_OK) return ts_cli_error("bench", "%s", ts_last_error());
    if (o.threads > 0) ts_kernels_set_threads(o.threads);
    printf("# kernel threads: %d; idle threads wait as %s; %d busy process%s beside the case\n", ts_kernels_threads(),
           ts_kernels_wait_policy(), o.busy, o.busy == 1 ? "" : "es");
    fflush(stdout); /* before fork: the children must not print it again */
    pid_t pids[MAX_BUSY];
    int started = start_busy(o.busy, pids);
    if (started < o.busy) {
        stop_busy(started, pids);
        return ts_cli_error("bench", "--busy %d: could not start the busy processes", o.busy);
    }
    rc = c->run(&o);
    stop_busy(started, pids);
    return rc;
}
