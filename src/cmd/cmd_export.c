/* tscope export: a trace's kept values as a NumPy .npz archive, one array per
 * step named as the step (np.load(FILE)["encoder.layers.0.self_attn.weights"]). */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "tscope/io.h"
#include "tscope/trace.h"

static bool wanted(const ts_cli_list *only, const char *name) {
    if (only->count == 0) return true;
    for (int i = 0; i < only->count; i++)
        if (fnmatch(only->items[i], name, 0) == 0) return true;
    return false;
}

/* Names repeat in training traces: occurrence k > 0 of a name is exported
 * as "name@k". occ[i] = which occurrence step i is. */
static int *occurrences(const ts_trace *t) {
    int64_t n = ts_trace_count(t);
    int *occ = malloc(((size_t)n + 1) * sizeof *occ);
    if (!occ) return NULL;
    for (int64_t i = 0; i < n; i++) occ[i] = -1;
    for (int64_t i = 0; i < n; i++) {
        if (occ[i] >= 0) continue;
        int k = 0;
        for (int64_t j = i; j >= 0; j = ts_trace_find_next(t, j)) occ[j] = k++;
    }
    return occ;
}

static int export_npz(ts_trace *t, const char *out, const ts_cli_list *only) {
    ts_npz z;
    if (ts_npz_open(&z, out)) return ts_cli_error("export", "%s", ts_last_error());
    int64_t arrays = 0, without = 0;
    char name[1100];
    int *occ = occurrences(t);
    if (!occ) {
        ts_npz_abort(&z);
        return ts_cli_error("export", "out of memory");
    }
    for (int64_t i = 0; i < ts_trace_count(t); i++) {
        const ts_trace_step *s = ts_trace_step_at(t, i);
        if (!wanted(only, s->name)) continue;
        if (!s->has_values) {
            without++;
            continue;
        }
        ts_tensor view;
        ts_status st = ts_trace_tensor(t, i, &view);
        if (occ[i] > 0)
            snprintf(name, sizeof name, "%s@%d", s->name, occ[i]);
        else
            snprintf(name, sizeof name, "%s", s->name);
        if (!st) st = ts_npz_add(&z, name, &view);
        ts_trace_release_values(t, i); /* a gathered view is written: give it back */
        if (st) {
            fprintf(stderr, "tscope export: %s\n", ts_last_error());
            ts_npz_abort(&z);
            free(occ);
            return 1;
        }
        arrays++;
    }
    free(occ);
    if (arrays == 0) {
        ts_npz_abort(&z);
        fprintf(stderr, "tscope export: no %sstep keeps values (%lld without: traced at level shapes or stats?)\n",
                only->count ? "matching " : "", (long long)without);
        return 1;
    }
    if (ts_npz_close(&z)) {
        fprintf(stderr, "tscope export: %s\n", ts_last_error());
        return 1;
    }
    printf("export: %s: %lld arrays", out, (long long)arrays);
    if (without) printf(" (%lld steps skipped: no values kept)", (long long)without);
    printf("\n");
    return 0;
}

int ts_cmd_export(int argc, char **argv) {
    ts_cli_list only = {0};
    const char *npz = NULL;
    const ts_flag flags[] = {
        {"--npz", TS_FLAG_STRING, &npz, "FILE", "write a NumPy .npz archive, one array per step (required)", NULL, NULL,
         NULL},
        {"--only", TS_FLAG_LIST, &only, "GLOB", "only steps whose names match GLOB (repeatable)", NULL, NULL, NULL},
    };
    const ts_cli_spec spec = {
        .command = "export",
        .synopsis = "TRACE --npz FILE [--only GLOB]",
        .description = "Write the values a trace keeps as float32 arrays named by step, for np.load. Steps\n"
                       "traced without values are skipped; a name that repeats gets @1, @2, ...",
        .flags = flags,
        .n_flags = 2,
        .min_positional = 1,
        .max_positional = 1,
        .positional_meta = "TRACE",
    };
    const char *path = NULL;
    int n_pos = 0;
    int rc = ts_cli_parse(&spec, argc, argv, &path, &n_pos);
    if (rc >= 0) return rc;
    if (!npz) return ts_cli_error("export", "--npz FILE is required");
    ts_trace *t;
    if (ts_trace_open(path, &t)) return ts_cli_error("export", "%s", ts_last_error());
    if (ts_trace_verify(t, NULL)) {
        rc = ts_cli_error("export", "%s: %s", path, ts_last_error());
        ts_trace_close(t);
        return rc;
    }
    if (ts_trace_warning(t)[0]) fprintf(stderr, "tscope export: warning: %s\n", ts_trace_warning(t));
    rc = export_npz(t, npz, &only);
    ts_trace_close(t);
    return rc;
}
