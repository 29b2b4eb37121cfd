/* bench_model: one preset's forward pass timed with no hook and with the trace
 * writer at stats level (what `tscope run --trace F --level stats` pays). */
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

/* One forward; with trace_path, through a stats-level trace written there. */
static ts_status one_pass(ts_model *m, const ts_model_input *in, const char *trace_path, double *seconds) {
    double t0 = bench_now();
    ts_status st;
    if (!trace_path) {
        st = ts_model_forward(m, in, NULL, NULL);
    } else {
        ts_trace_options opt;
        ts_trace_options_default(&opt);
        opt.level = TS_TRACE_STATS;
        ts_trace_writer *w = NULL;
        st = ts_trace_writer_open(trace_path, NULL, &opt, &w);
        if (st) return st;
        ts_hook hook = ts_trace_writer_hook(w);
        st = ts_model_forward(m, in, &hook, NULL);
        if (st) {
            ts_trace_writer_abort(w);
            return st;
        }
        st = ts_trace_writer_close(w, NULL);
        unlink(trace_path);
    }
    *seconds = bench_now() - t0;
    return st;
}

/* Median seconds of reps passes after one warm-up. */
static ts_status timed(ts_model *m, const ts_model_input *in, const char *trace_path, int reps, double *median) {
    double *t = calloc((size_t)reps, sizeof *t), warm;
    if (!t) return ts_fail(TS_ERR_NOMEM, "bench: out of memory");
    ts_status st = one_pass(m, in, trace_path, &warm);
    for (int i = 0; i < reps && !st; i++) st = one_pass(m, in, trace_path, &t[i]);
    if (!st) {
        *median = bench_median(t, reps);
    }
    free(t);
    return st;
}

int bench_model_forward(int reps, const char *preset) {
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
    if (fd < 0 || ts_model_dry_run(&cfg, NULL, &sum) || ts_model_init(&m, &cfg)) {
        rc = ts_cli_error("bench", "%s", fd < 0 ? "cannot create a file in /tmp" : ts_last_error());
        if (fd >= 0) close(fd), unlink(trace_path);
        model_batch_free(&batch);
        return rc;
    }
    close(fd);
    double peak = ts_kernels_peak_gflops();
    char desc[256];
    model_config_describe(&cfg, desc, sizeof desc);
    printf("# %s\n", desc);
    printf("# %.1f GFLOP of matmuls per forward; kernels %s, %d threads, peak %.1f GFLOP/s; median of %d after a warm-up\n",
           sum.flops / 1e9, ts_isa_name(ts_kernels_isa()), ts_kernels_threads(), peak, reps);
    ts_model_input in = model_batch_input(&batch);
    double plain = 0, traced = 0;
    ts_status st = timed(&m, &in, NULL, reps, &plain);
    if (!st) {
        double gf = sum.flops / plain / 1e9;
        printf("forward, no hook           %8.1f ms  %7.1f GFLOP/s  %5.1f%% of peak\n", plain * 1e3, gf,
               100.0 * gf / peak);
        fflush(stdout);
        st = timed(&m, &in, trace_path, reps, &traced);
    }
    if (!st) {
        double gf = sum.flops / traced / 1e9;
        printf("forward, trace at stats    %8.1f ms  %7.1f GFLOP/s  %5.1f%% of peak  (tracing %+.1f%%)\n",
               traced * 1e3, gf, 100.0 * gf / peak, 100.0 * (traced / plain - 1.0));
    } else {
        rc = ts_cli_error("bench", "%s", ts_last_error());
    }
    unlink(trace_path);
    ts_model_summary_free(&sum);
    ts_model_free(&m);
    model_batch_free(&batch);
    return rc;
}
