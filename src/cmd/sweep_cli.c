/* sweep_cli: the sweeps' shared command-line parts (sweep_cli.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lm_cli.h"
#include "sweep_cli.h"
#include "tscope/io.h"
#include "tscope/kernels.h"
#include "tscope/render.h"

ts_status sweep_cli_open(const char *load, const char *text, const char *what, ts_model *m, ts_lmtok *tok,
                         ts_bpe_ids *ids) {
    memset(ids, 0, sizeof *ids);
    memset(tok, 0, sizeof *tok);
    memset(m, 0, sizeof *m);
    if (!load) return ts_fail(TS_ERR_ARG, "give --load W.safetensors, a language model (tscope train --task lm)");
    if (!ts_lm_checkpoint_is(load))
        return ts_fail(TS_ERR_ARG, "--load %s: the sweeps read a language model's checkpoint (tscope train --task lm)",
                       load);
    if (!text) return ts_fail(TS_ERR_ARG, "give %s TEXT", what);
    ts_status st = ts_kernels_init();
    if (!st) st = ts_lm_checkpoint_read(load, NULL, NULL, tok);
    if (!st) st = ts_lmtok_encode(tok, text, strlen(text), ids);
    if (!st && ids->count < 2) st = ts_fail(TS_ERR_ARG, "%s has %d token%s: the sweeps need at least 2", what,
                                            (int)ids->count, ids->count == 1 ? "" : "s");
    ts_lmtok_free(tok);
    if (!st) st = ts_lm_checkpoint_open(load, NULL, 1, (int)ids->count, m, tok);
    if (st) ts_bpe_ids_free(ids);
    return st;
}

ts_status sweep_cli_one_token(ts_lmtok *tok, const char *flag, const char *text, int *out) {
    ts_bpe_ids ids = {0};
    ts_status st = ts_lmtok_encode(tok, text, strlen(text), &ids);
    if (!st && ids.count != 1)
        st = ts_fail(TS_ERR_ARG, "%s '%s' is %d tokens for this tokenizer; give one token", flag, text, (int)ids.count);
    if (!st) *out = ids.ids[0];
    ts_bpe_ids_free(&ids);
    return st;
}

int sweep_cli_parse(const ts_cli_spec *spec, int argc, char **argv) {
    char **args = malloc(sizeof *args * (size_t)(argc + 1));
    if (!args) return ts_cli_error(spec->command, "out of memory");
    for (int i = 0; i < argc; i++) args[i] = strcmp(argv[i], "-o") == 0 && i > 0 ? "--output" : argv[i];
    args[argc] = NULL;
    int rc = ts_cli_parse(spec, argc, args, NULL, NULL); /* the flags keep argv's strings, not args */
    free(args);
    return rc;
}

ts_status sweep_cli_check_output(const char *path) {
    ts_figure_format f;
    if (!ts_figure_format_from_path(path, &f))
        return ts_fail(TS_ERR_ARG, "-o %s: the figure is .png, .svg or .pdf", path);
    return TS_OK;
}

static ts_status draw(void *ctx, cairo_t *cr, double w, double h) {
    const sweep_figure *f = ctx;
    ts_render_matrix m = {.values = f->values, .rows = f->rows, .cols = f->cols, .row_labels = f->row_labels,
                          .col_labels = f->col_labels};
    float a = 0;
    for (int i = 0; i < f->rows * f->cols; i++)
        if (isfinite(f->values[i]) && fabsf(f->values[i]) > a) a = fabsf(f->values[i]);
    if (f->unit || a == 0) a = 1;
    ts_render_heatmap_opts o = {.title = f->title, .subtitle = f->subtitle, .row_axis = f->row_axis,
                                .col_axis = f->col_axis, .fixed_scale = true,
                                .scale = {.cmap = TS_CMAP_COOLWARM, .vmin = -a, .vmax = a},
                                .values = TS_RENDER_VALUES_ALWAYS, .stretch = true};
    return ts_render_heatmap(cr, (ts_render_rect){0, 0, w, h}, &m, &o, NULL, NULL);
}

ts_status sweep_cli_figure(const sweep_figure *f) {
    ts_figure_spec spec = {.width = fmax(760, 160 + 58.0 * f->cols), .height = fmax(300, 170 + 44.0 * f->rows),
                           .scale = 1, .title = f->title};
    if (!ts_figure_format_from_path(f->path, &spec.format))
        return ts_fail(TS_ERR_ARG, "-o %s: the figure is .png, .svg or .pdf", f->path);
    return ts_figure_write(f->path, &spec, draw, (void *)f);
}
