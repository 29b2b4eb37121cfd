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

/* The ids of text (or of the file ids_path: one sequence) for load's model. */
static ts_status read_input(const char *load, const char *text, const char *ids_path, ts_lmtok *tok, ts_bpe_ids *ids) {
    ts_model_config cfg;
    int B = 1;
    ts_status st = ts_lm_checkpoint_read(load, NULL, &cfg, tok);
    if (!st && ts_model_is_masked_lm(&cfg))
        st = ts_fail(TS_ERR_ARG, "--load %s: the sweeps score each next token; this is a masked language model (BERT), "
                     "whose logits score the token at each position: use run --ablate STEP, --patch or --lens", load);
    if (!st && ids_path) st = ts_lm_read_ids(ids_path, cfg.vocab, ids, &B);
    else if (!st) st = ts_lmtok_encode(tok, text, strlen(text), ids);
    if (!st && B != 1) st = ts_fail(TS_ERR_ARG, "--ids %s holds %d sequences: the sweeps read one", ids_path, B);
    return st;
}

ts_status sweep_cli_open(const char *load, const char *text, const char *what, ts_model *m, ts_lmtok *tok,
                         ts_bpe_ids *ids) {
    return sweep_cli_open_input(load, text, NULL, what, m, tok, ids);
}

ts_status sweep_cli_open_input(const char *load, const char *text, const char *ids_path, const char *what, ts_model *m,
                               ts_lmtok *tok, ts_bpe_ids *ids) {
    memset(ids, 0, sizeof *ids);
    memset(tok, 0, sizeof *tok);
    memset(m, 0, sizeof *m);
    if (!load) return ts_fail(TS_ERR_ARG, "give --load W.safetensors, a language model (tscope train --task lm)");
    if (!ts_lm_checkpoint_is(load))
        return ts_fail(TS_ERR_ARG, "--load %s: the sweeps read a language model's checkpoint (tscope train --task lm)",
                       load);
    if (text && ids_path) return ts_fail(TS_ERR_ARG, "%s and --ids both give the input: choose one", what);
    if (!text && !ids_path) return ts_fail(TS_ERR_ARG, "give %s TEXT", what);
    ts_status st = ts_kernels_init();
    if (!st) st = read_input(load, text, ids_path, tok, ids);
    if (!st && ids->count < 2) st = ts_fail(TS_ERR_ARG, "%s has %d token%s: the sweeps need at least 2",
                                            ids_path ? "--ids" : what, (int)ids->count, ids->count == 1 ? "" : "s");
    ts_lmtok_free(tok);
    if (!st) st = ts_lm_checkpoint_open(load, NULL, 1, (int)ids->count, m, tok);
    if (st) ts_bpe_ids_free(ids);
    return st;
}

ts_status sweep_cli_one_token(ts_lmtok *tok, const char *flag, const char *text, int *out) {
    if (strncmp(text, "id:", 3) == 0) { /* an id, for a token no text spells alone */
        char *end;
        long id = strtol(text + 3, &end, 10);
        if (end == text + 3 || *end || id < 0 || (tok->count > 0 && id >= tok->count)) /* no tokenizer: the model checks */
            return ts_fail(TS_ERR_ARG, "%s %s: give id:N with N from 0 to %d (this tokenizer's ids)", flag, text,
                           (int)tok->count - 1);
        *out = (int)id;
        return TS_OK;
    }
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

ts_status sweep_cli_look_check(const sweep_look *look, bool figure) {
    if (!figure && (look->title || look->caption || look->projector))
        return ts_fail(TS_ERR_ARG, "--title, --caption and --projector set the figure, and none is drawn: add -o FIG.png");
    if (look->title && !look->title[0]) return ts_fail(TS_ERR_ARG, "--title needs some text");
    if (look->caption && !look->caption[0]) return ts_fail(TS_ERR_ARG, "--caption needs some text");
    return TS_OK;
}

const char *sweep_cli_file_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash && slash[1] ? slash + 1 : path;
}

static ts_status draw_heatmap(void *ctx, cairo_t *cr, double w, double h) {
    const sweep_figure *f = ctx;
    ts_render_matrix m = {.values = f->values, .rows = f->rows, .cols = f->cols, .row_labels = f->row_labels,
                          .col_labels = f->col_labels};
    float a = 0;
    for (int i = 0; i < f->rows * f->cols; i++)
        if (isfinite(f->values[i]) && fabsf(f->values[i]) > a) a = fabsf(f->values[i]);
    if (f->unit || a == 0) a = 1;
    const char *title = f->look && f->look->title ? f->look->title : f->title;
    ts_render_heatmap_opts o = {.title = title, .subtitle = f->subtitle, .row_axis = f->row_axis,
                                .col_axis = f->col_axis, .fixed_scale = true,
                                .scale = {.cmap = TS_CMAP_COOLWARM, .vmin = -a, .vmax = a},
                                .values = TS_RENDER_VALUES_ALWAYS, .stretch = true, .bar_label = f->bar_label};
    return ts_render_heatmap(cr, (ts_render_rect){0, 0, w, h}, &m, &o, NULL, NULL);
}

/* A figure with a teacher's look: what draw paints, above the caption's band. */
typedef struct look_job {
    const sweep_look *look;
    double caption_h;
    ts_figure_draw_fn draw;
    void *ctx;
} look_job;

static ts_status draw_look(void *ctx, cairo_t *cr, double w, double h) {
    const look_job *job = ctx;
    ts_status st = job->draw(job->ctx, cr, w, h - job->caption_h);
    if (!st && job->caption_h > 0)
        ts_render_caption_block(cr, (ts_render_rect){0, h - job->caption_h, w, job->caption_h}, job->look->caption, true);
    return st;
}

/* The height the caption takes at width w (0 when none). */
static double caption_height(const sweep_look *look, double w) {
    if (!look || !look->caption) return 0;
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 8, 8);
    cairo_t *cr = cairo_create(img);
    double h = ceil(ts_render_caption_block(cr, (ts_render_rect){0, 0, w, 0}, look->caption, false));
    cairo_destroy(cr);
    cairo_surface_destroy(img);
    return h;
}

ts_status sweep_cli_write_figure(const char *path, const char *title, const sweep_look *look, double w, double h,
                                 ts_figure_draw_fn draw, void *ctx) {
    bool projector = look && look->projector;
    double font = projector ? 1.75 : 1;
    ts_figure_spec spec = {.width = w * font, .height = h * font, .scale = 1,
                           .title = look && look->title ? look->title : title};
    if (!ts_figure_format_from_path(path, &spec.format))
        return ts_fail(TS_ERR_ARG, "-o %s: the figure is .png, .svg or .pdf", path);
    double saved = ts_render_font_scale();
    ts_render_set_font_scale(font);
    look_job job = {look, caption_height(look, spec.width), draw, ctx};
    spec.height += job.caption_h;
    if (projector) { /* a slide: as large as fits 1920 x 1080, text at 1.75 */
        double k = fmin(1920.0 / spec.width, 1080.0 / spec.height);
        spec.width = floor(spec.width * k);
        spec.height = floor(spec.height * k);
        job.caption_h = caption_height(look, spec.width);
    }
    ts_status st = ts_figure_write(path, &spec, draw_look, &job);
    ts_render_set_font_scale(saved);
    return st;
}

ts_status sweep_cli_figure(const sweep_figure *f) {
    /* cells sized for their printed values */
    return sweep_cli_write_figure(f->path, f->title, f->look, fmax(760, 160 + 58.0 * f->cols),
                                  fmax(300, 170 + 44.0 * f->rows), draw_heatmap, (void *)f);
}

ts_status sweep_cli_write_npz(const char *path, const sweep_array *a, int n) {
    ts_npz z;
    TS_TRY(ts_npz_open(&z, path));
    ts_status st = TS_OK;
    for (int i = 0; !st && i < n; i++) {
        if (a[i].s) continue;
        int64_t count = a[i].rank == 0 ? 1 : a[i].rank == 1 ? a[i].shape[0] : a[i].shape[0] * a[i].shape[1];
        float *tmp = NULL, *data;
        if (a[i].f) {
            memcpy(&data, &a[i].f, sizeof data); /* ts_npz_add only reads */
        } else {
            tmp = malloc(sizeof(float) * (size_t)(count ? count : 1));
            if (!tmp) {
                st = ts_fail(TS_ERR_NOMEM, "out of memory");
                break;
            }
            for (int64_t j = 0; j < count; j++) tmp[j] = (float)a[i].d[j];
            data = tmp;
        }
        ts_tensor t;
        int64_t one = 1;
        st = ts_tensor_view(&t, data, a[i].rank ? a[i].rank : 1, a[i].rank ? a[i].shape : &one);
        if (!st && a[i].rank == 0) t.rank = 0;
        if (!st) st = ts_npz_add(&z, a[i].name, &t);
        free(tmp);
    }
    if (st) {
        ts_npz_abort(&z);
        return st;
    }
    return ts_npz_close(&z);
}

static void json_string(ts_text_buf *b, const char *s) {
    ts_text_buf_str(b, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') ts_text_buf_printf(b, "\\%c", c);
        else if (c < 0x20) ts_text_buf_printf(b, "\\u%04x", c);
        else ts_text_buf_add(b, s, 1);
    }
    ts_text_buf_str(b, "\"");
}

static void json_number(ts_text_buf *b, const sweep_array *a, int64_t j) {
    double v = a->f ? (double)a->f[j] : a->d[j];
    if (!isfinite(v)) ts_text_buf_str(b, "null");
    else if (a->f) ts_text_buf_printf(b, "%.9g", v);
    else ts_text_buf_printf(b, "%.17g", v);
}

ts_status sweep_cli_write_json(const char *path, const sweep_array *a, int n) {
    ts_text_buf b = {0};
    ts_text_buf_str(&b, "{");
    for (int i = 0; i < n; i++) {
        ts_text_buf_str(&b, i ? ",\n  " : "\n  ");
        json_string(&b, a[i].name);
        ts_text_buf_str(&b, ": ");
        if (a[i].rank == 0) {
            json_number(&b, &a[i], 0);
            continue;
        }
        int64_t rows = a[i].rank == 2 ? a[i].shape[0] : 1, cols = a[i].rank == 2 ? a[i].shape[1] : a[i].shape[0];
        if (a[i].rank == 2) ts_text_buf_str(&b, "[");
        for (int64_t r = 0; r < rows; r++) {
            ts_text_buf_str(&b, r ? ",\n    [" : "[");
            for (int64_t c = 0; c < cols; c++) {
                if (c) ts_text_buf_str(&b, ", ");
                if (a[i].s) json_string(&b, a[i].s[r * cols + c]);
                else json_number(&b, &a[i], r * cols + c);
            }
            ts_text_buf_str(&b, "]");
        }
        if (a[i].rank == 2) ts_text_buf_str(&b, "]");
    }
    ts_text_buf_str(&b, "\n}\n");
    char *text = ts_text_buf_take(&b);
    if (!text) return ts_fail(TS_ERR_NOMEM, "out of memory");
    ts_outfile o;
    ts_status st = ts_outfile_open(&o, path);
    if (!st) st = ts_outfile_write(&o, text, strlen(text));
    if (!st) st = ts_outfile_commit(&o);
    else ts_outfile_abort(&o);
    free(text);
    return st;
}
