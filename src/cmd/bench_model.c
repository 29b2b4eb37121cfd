/* bench_model: one preset's forward pass timed with no hook and with the trace
 * writer at shapes and stats levels (what `tscope run --trace F --level stats`
 * pays). */
#include "bench_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_time.h"
#include "commands.h"
#include "model_flags.h"
#include "tscope/kernels.h"
#include "tscope/trace.h"

/* One forward; with trace_path, through a trace at `level` written there,
 * and *in_hook the part of it spent in the writer's hook. */
static ts_status one_pass(ts_model *m, const ts_model_input *in, const char *trace_path, ts_trace_level level,
                          double *seconds, double *in_hook) {
    double t0 = bench_now();
    *in_hook = 0;
    ts_status st;
    if (!trace_path) {
        st = ts_model_forward(m, in, NULL, NULL);
    } else {
        ts_trace_options opt;
        ts_trace_options_default(&opt);
        opt.level = level;
        ts_trace_writer *w = NULL;
        st = ts_trace_writer_open(trace_path, NULL, &opt, &w);
        if (st) return st;
        ts_hook hook = ts_trace_writer_hook(w);
        st = ts_model_forward(m, in, &hook, NULL);
        if (st) {
            ts_trace_writer_abort(w);
            return st;
        }
        ts_trace_summary sum;
        st = ts_trace_writer_close(w, &sum);
        *in_hook = sum.hook_seconds;
        unlink(trace_path);
    }
    *seconds = bench_now() - t0;
    return st;
}

/* The configurations timed: no hook, then the trace writer at shapes level
 * (what watching alone costs: the model no longer fuses steps a hook must
 * see) and at stats level (plus the statistics). */
typedef struct bench_case {
    const char *label;
    bool traced;
    ts_trace_level level;
} bench_case;

static const bench_case cases[] = {
    {"forward, no hook", false, TS_TRACE_SHAPES},
    {"forward, trace at shapes", true, TS_TRACE_SHAPES},
    {"forward, trace at stats", true, TS_TRACE_STATS},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

/* Median seconds of each case over reps rounds after a warm-up one, and of
 * the time in the hook. A round runs every case once, so a burst of other
 * work on the machine lands on all of them alike rather than on whichever
 * case was being timed. */
static ts_status timed_rounds(ts_model *m, const ts_model_input *in, const char *trace_path, int reps,
                              double median[N_CASES], double hook_median[N_CASES]) {
    double *t = calloc((size_t)(2 * N_CASES * reps), sizeof *t), warm, warm_hook;
    if (!t) return ts_fail(TS_ERR_NOMEM, "bench: out of memory");
    double *hook = t + N_CASES * reps;
    ts_status st = TS_OK;
    for (int r = -1; r < reps && !st; r++)
        for (int c = 0; c < N_CASES && !st; c++)
            st = one_pass(m, in, cases[c].traced ? trace_path : NULL, cases[c].level, r < 0 ? &warm : &t[c * reps + r],
                          r < 0 ? &warm_hook : &hook[c * reps + r]);
    for (int c = 0; c < N_CASES && !st; c++) {
        median[c] = bench_median(&t[c * reps], reps);
        hook_median[c] = bench_median(&hook[c * reps], reps);
    }
    free(t);
    return st;
}

/* One line of the table; against > 0 adds what it costs over that time, and
 * how much of the forward the hook took (less noisy than the difference of
 * two medians, but blind to what watching costs the model). */
static void print_row(const char *label, double seconds, double against, double in_hook, double flops, double peak) {
    double gf = flops / seconds / 1e9;
    printf("%-28s %8.1f ms  %7.1f GFLOP/s  %5.1f%% of peak", label, seconds * 1e3, gf, 100.0 * gf / peak);
    if (against > 0) printf("  (tracing %+.1f%%; in the hook %.1f ms)", 100.0 * (seconds / against - 1.0), in_hook * 1e3);
    printf("\n");
    fflush(stdout);
}

int bench_model_forward(int reps, const char *preset, ts_dtype dtype) {
    model_flags mf;
    ts_flag rows[MODEL_FLAGS_COUNT];
    model_flags_table(rows, 0, &mf);
    mf.preset = preset ? preset : "seed000";
    mf.seen[0] = true; /* the --preset row */
    ts_model_config cfg;
    model_batch batch;
    if (model_flags_resolve(&mf, &cfg, &batch)) return ts_cli_error("bench", "%s", ts_last_error());
    ts_model_summary sum;
    ts_model m;
    memset(&m, 0, sizeof m);
    int rc = 0;
    char trace_path[] = "/tmp/tscope-bench-XXXXXX";
    int fd = mkstemp(trace_path);
    if (fd < 0 || ts_model_dry_run(&cfg, NULL, &sum) || ts_model_init(&m, &cfg) || ts_model_set_dtype(&m, dtype)) {
        rc = ts_cli_error("bench", "%s", fd < 0 ? "cannot create a file in /tmp" : ts_last_error());
        if (fd >= 0) close(fd), unlink(trace_path);
        model_batch_free(&batch);
        return rc;
    }
    close(fd);
    /* The peak is probed before and after the runs and the higher kept: a
     * probe that meets other work on the machine reads low. */
    double peak = ts_kernels_peak_gflops();
    ts_model_input in = model_batch_input(&batch);
    double median[N_CASES], hook_median[N_CASES];
    ts_status st = timed_rounds(&m, &in, trace_path, reps, median, hook_median);
    if (!st) {
        double after = ts_kernels_peak_gflops();
        if (after > peak) peak = after;
        char desc[TS_MODEL_DESCRIBE_MAX];
        ts_model_config_describe(&cfg, desc, sizeof desc);
        printf("# %s; weight matrices %s\n", desc, ts_model_dtype_name(dtype));
        printf("# %.1f GFLOP of matmuls per forward; kernels %s, %d threads, peak %.1f GFLOP/s; medians of %d rounds "
               "(each case once a round) after a warm-up round\n",
               sum.flops / 1e9, ts_isa_name(ts_kernels_isa()), ts_kernels_threads(), peak, reps);
        for (int c = 0; c < N_CASES; c++)
            print_row(cases[c].label, median[c], c > 0 ? median[0] : 0, hook_median[c], sum.flops, peak);
        if (strcmp(cfg.preset, "gpt2") == 0) /* the yardstick: the same model in PyTorch */
            printf("# peer: /usr/bin/python3 tests/ref/gpt/torch_gpt2_bench.py --threads %d (GPT-2 small in PyTorch, "
                   "OpenBLAS); ratio = tscope's untraced forward / the peer's, same session\n",
                   ts_kernels_threads());
    }
    if (st) rc = ts_cli_error("bench", "%s", ts_last_error());
    unlink(trace_path);
    ts_model_summary_free(&sum);
    ts_model_free(&m);
    model_batch_free(&batch);
    return rc;
}
