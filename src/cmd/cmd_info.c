/* tscope info: one line a step of a trace, in an aligned table. Opening reads
 * the index and the step headers only, so a trace of gigabytes prints at once. */
#include <cjson/cJSON.h>
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "tscope/core.h"
#include "tscope/trace.h"

#define NAME_WIDTH_MAX 56

/* A trace written by another program (the PyTorch bridge) says so in its
 * metadata; a reader comparing it with tscope's own must know which steps the
 * writer recomputed from a module's weights rather than caught in flight. */
static void print_writer(const ts_trace *t) {
    cJSON *meta = cJSON_Parse(ts_trace_metadata(t));
    const char *writer = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, "writer"));
    if (writer) {
        const char *torch = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, "torch_version"));
        const cJSON *recomputed = cJSON_GetObjectItemCaseSensitive(meta, "recomputed");
        char w[200], v[100];
        printf("written by %s%s%s%s", ts_text_inert(w, sizeof w, writer), torch ? " (torch " : "",
               torch ? ts_text_inert(v, sizeof v, torch) : "", torch ? ")" : "");
        if (cJSON_IsArray(recomputed))
            printf("; %d steps recomputed from module weights and checked against the module's output",
                   cJSON_GetArraySize(recomputed));
        printf("\n");
        const cJSON *seq_first = cJSON_GetObjectItemCaseSensitive(meta, "seq_first");
        const char *note = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(seq_first, "note"));
        char shown[1024];
        if (note) printf("%s\n", ts_text_inert(shown, sizeof shown, note));
    }
    cJSON_Delete(meta);
}

static bool wanted(const ts_cli_list *only, const char *name) {
    if (only->count == 0) return true;
    for (int i = 0; i < only->count; i++)
        if (fnmatch(only->items[i], name, 0) == 0) return true;
    return false;
}

/* Rows of attention weights sum to 1, except a row whose every key was masked:
 * tscope gives it zeros (PyTorch: NaN). The statistics count them: rows - sum. */
static int64_t empty_rows(const ts_trace_step *s) {
    if (s->tag != TS_TAG_ATTN_WEIGHTS || !s->has_stats || s->stats.nan || s->rank < 1) return 0;
    int64_t cols = s->shape[s->rank - 1];
    if (cols <= 0) return 0;
    double missing = (double)(s->numel / cols) - s->stats.mean * (double)s->stats.finite;
    return missing >= 0.5 ? (int64_t)(missing + 0.5) : 0;
}

static void flags_text(char *buf, size_t size, const ts_trace_step *s) {
    if (empty_rows(s)) {
        snprintf(buf, size, "empty-rows:%lld", (long long)empty_rows(s));
        return;
    }
    if (!s->has_stats || (s->stats.nan == 0 && s->stats.inf == 0)) {
        snprintf(buf, size, "-");
        return;
    }
    if (s->stats.nan && s->stats.inf)
        snprintf(buf, size, "NaN:%llu Inf:%llu", (unsigned long long)s->stats.nan, (unsigned long long)s->stats.inf);
    else if (s->stats.nan)
        snprintf(buf, size, "NaN:%llu", (unsigned long long)s->stats.nan);
    else
        snprintf(buf, size, "Inf:%llu", (unsigned long long)s->stats.inf);
}

static void values_text(char *buf, size_t size, const ts_trace_step *s) {
    char view[64] = "", factor[24] = "";
    if (s->view_factor != 1.0f) snprintf(factor, sizeof factor, " x %g", (double)s->view_factor);
    if (s->view_of >= 0)
        snprintf(view, sizeof view, " (view of #%lld%s%s)", (long long)s->view_of, factor, s->view_relu ? ", relu" : "");
    if (!s->has_values)
        snprintf(buf, size, "-");
    else if (s->batch_index >= 0)
        snprintf(buf, size, "batch %d%s", s->batch_index, view);
    else
        snprintf(buf, size, "all%s", view);
}

static void op_text(char *buf, size_t size, ts_op op) {
    if ((unsigned)op < TS_OP_COUNT)
        snprintf(buf, size, "%s", ts_op_name(op));
    else
        snprintf(buf, size, "op%u", (unsigned)op);
}

static void print_table(const ts_trace *t, const ts_cli_list *only) {
    int64_t n = ts_trace_count(t);
    int name_w = 4, shape_w = 5, index_w = 1, op_w = 2;
    for (int64_t i = 0; i < n; i++) {
        const ts_trace_step *s = ts_trace_step_at(t, i);
        if (!wanted(only, s->name)) continue;
        int len = (int)strlen(s->name);
        if (len > name_w) name_w = len > NAME_WIDTH_MAX ? NAME_WIDTH_MAX : len;
        char shape[TS_SHAPE_TEXT_MAX];
        ts_shape_format(shape, sizeof shape, s->rank, s->shape, TS_SHAPE_PLAIN);
        if ((int)strlen(shape) > shape_w) shape_w = (int)strlen(shape);
        char op[32];
        op_text(op, sizeof op, s->op);
        if ((int)strlen(op) > op_w) op_w = (int)strlen(op);
        int digits = snprintf(NULL, 0, "%lld", (long long)i);
        if (digits > index_w) index_w = digits;
    }
    bool any_empty = false;
    printf("%*s  %-*s  %-*s  %-*s  %11s %11s %11s %11s  %-9s %s\n", index_w, "#", name_w, "name", op_w, "op", shape_w,
           "shape", "min", "max", "mean", "std", "nan/inf", "values");
    for (int64_t i = 0; i < n; i++) {
        const ts_trace_step *s = ts_trace_step_at(t, i);
        if (!wanted(only, s->name)) continue;
        char shape[TS_SHAPE_TEXT_MAX], op[32], flags[64], values[96], name[NAME_WIDTH_MAX + 1];
        ts_shape_format(shape, sizeof shape, s->rank, s->shape, TS_SHAPE_PLAIN);
        op_text(op, sizeof op, s->op);
        flags_text(flags, sizeof flags, s);
        values_text(values, sizeof values, s);
        char inert[4 * 1024 + 8]; /* a name from the file, made inert for the terminal */
        ts_text_inert(inert, sizeof inert, s->name);
        size_t len = strlen(inert);
        if (len > NAME_WIDTH_MAX) /* keep the end: it says which part of the layer */
            snprintf(name, sizeof name, "...%s", inert + len - (NAME_WIDTH_MAX - 3));
        else
            memcpy(name, inert, len + 1);
        printf("%*lld  %-*s  %-*s  %-*s  ", index_w, (long long)i, name_w, name, op_w, op, shape_w, shape);
        if (s->has_stats && s->stats.finite > 0)
            printf("%11.4g %11.4g %11.4g %11.4g", s->stats.min, s->stats.max, s->stats.mean, s->stats.std);
        else
            printf("%11s %11s %11s %11s", "-", "-", "-", "-");
        char edits[256];
        bool edited = ts_trace_step_edits(t, s->name, edits, sizeof edits) > 0;
        printf("  %-9s %s%s%s%s\n", flags, values, edited ? "  [edited: " : "",
               edited ? ts_text_inert(inert, sizeof inert, edits) : "", edited ? "]" : "");
        any_empty = any_empty || empty_rows(s);
    }
    if (any_empty)
        printf("empty-rows: attention rows whose keys were all masked; tscope gives them weights 0 (PyTorch: NaN)\n");
}

int ts_cmd_info(int argc, char **argv) {
    ts_cli_list only = {0};
    const ts_flag flags[] = {
        {"--only", TS_FLAG_LIST, &only, "GLOB", "only steps whose names match GLOB, e.g. '*.weights' (repeatable)",
         NULL, NULL, NULL},
    };
    const ts_cli_spec spec = {
        .command = "info",
        .synopsis = "TRACE [--only GLOB]",
        .description = "One line a step: index, name, op, shape, min/max/mean/std, NaN/Inf counts, and which\n"
                       "values the trace keeps. A trace whose run was killed (TRACE.tmp) is read up to its\n"
                       "last complete step.",
        .flags = flags,
        .n_flags = 1,
        .min_positional = 1,
        .max_positional = 1,
        .positional_meta = "TRACE",
    };
    const char *path = NULL;
    int n_pos = 0;
    int rc = ts_cli_parse(&spec, argc, argv, &path, &n_pos);
    if (rc >= 0) return rc;
    ts_trace *t;
    if (ts_trace_open(path, &t)) return ts_cli_error("info", "%s", ts_last_error());
    if (ts_trace_verify(t, NULL)) { /* which records are damaged, before any table that would hide it */
        rc = ts_cli_error("info", "%s: %s", path, ts_last_error());
        ts_trace_close(t);
        return rc;
    }
    if (ts_trace_warning(t)[0]) fprintf(stderr, "tscope info: warning: %s\n", ts_trace_warning(t));
    char size[32];
    ts_text_bytes(size, sizeof size, ts_trace_file_size(t));
    printf("%s: %lld steps, %s%s\n", path, (long long)ts_trace_count(t), size,
           ts_trace_complete(t) ? "" : " (incomplete: the run did not finish)");
    print_writer(t);
    char edits[1024];
    char shown[4096];
    if (ts_trace_step_edits(t, NULL, edits, sizeof edits)) printf("edited run: %s\n", ts_text_inert(shown, sizeof shown, edits));
    int n_src = ts_trace_token_count(t, TS_TRACE_SOURCE);
    if (n_src > 0) {
        printf("source:");
        char tok[256];
        for (int i = 0; i < n_src; i++) printf(" %s", ts_text_inert(tok, sizeof tok, ts_trace_token(t, TS_TRACE_SOURCE, i)));
        printf("\n");
    }
    print_table(t, &only);
    ts_trace_close(t);
    return 0;
}
