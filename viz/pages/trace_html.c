/* trace_html: a trace as a web page (`tscope html TRACE -o DIR`).
 *
 * DIR/index.html is an explorer like the viewer's: the steps as a tree
 * folded by layer and module, a search box over their names, the figure and
 * statistics line of the step chosen, a batch and head choice where the
 * viewer has one, and a training trace's snapshots (the records of one name)
 * on a slider. The figures are SVG files, one per step, record, batch and
 * head, drawn by the code of `tscope png` (text as text, cell tooltips), in
 * DIR/s/; the page loads one when it is shown, so a large trace opens at
 * once. What the page knows of the steps is DIR/trace.js, a script (a
 * browser reads no JSON file from file://). Nothing comes from elsewhere. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pages/site_assets.h"
#include "tscope/pages.h"

#define MAX_BATCH_CHOICES 8 /* batch elements offered, when the trace keeps several */
#define MAX_HEAD_CHOICES 16

static void js_str(ts_text_buf *b, const char *s) {
    ts_text_buf_str(b, "\"");
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') ts_text_buf_printf(b, "\\%c", c);
        else if (c == '<') ts_text_buf_str(b, "\\u003c"); /* never "</script>" */
        else if (c < 0x20) ts_text_buf_printf(b, "\\u%04x", c);
        else ts_text_buf_add(b, (const char *)&c, 1);
    }
    ts_text_buf_str(b, "\"");
}

/* The figure of step id, record k, batch b, head h (-1: all): "3-0", "3-0-b1-h2". */
static void fig_name(char *buf, size_t cap, int id, int k, int b, int h) {
    int n = snprintf(buf, cap, "%d-%d", id, k);
    if (b > 0 && n > 0 && (size_t)n < cap) n += snprintf(buf + n, cap - (size_t)n, "-b%d", b);
    if (h >= 0 && n > 0 && (size_t)n < cap) snprintf(buf + n, cap - (size_t)n, "-h%d", h);
}

typedef struct draw_job {
    ts_scene *sc;
    double w, h;
} draw_job;

static ts_status draw_scene(void *ctx, cairo_t *cr, double w, double h) {
    draw_job *j = ctx;
    ts_render_layout *layout = calloc(1, sizeof *layout);
    if (!layout) return ts_fail(TS_ERR_NOMEM, "html: out of memory");
    ts_status st = ts_scene_draw(j->sc, cr, (ts_render_rect){0, 0, w, h}, NULL, layout);
    free(layout);
    return st;
}

/* One figure: DIR/s/FILE.svg. false (and the reason in why) when the step
 * cannot be drawn so; *used gets ts_scene_used. */
static bool write_figure(ts_trace *t, const char *dir, const char *file, const char *name, int occ, int batch,
                         int head, unsigned *used, char *why, size_t why_cap, ts_status *fatal) {
    ts_scene_request rq = ts_scene_request_default(name);
    rq.occurrence = occ;
    rq.mark_occurrence = true;
    rq.batch = batch;
    rq.head = head;
    ts_scene *sc;
    if (ts_scene_build(&sc, t, &rq) != TS_OK) {
        snprintf(why, why_cap, "%s", ts_last_error());
        return false;
    }
    if (used) *used = ts_scene_used(sc);
    int w, h;
    ts_scene_size(sc, &w, &h);
    char path[4096];
    snprintf(path, sizeof path, "%s/s/%s.svg", dir, file);
    draw_job j = {sc, w, h};
    ts_figure_spec spec = {.format = TS_FIGURE_SVG, .width = w, .height = h, .scale = 1, .title = name,
                           .svg_pixelated = true};
    ts_status st = ts_figure_write(path, &spec, draw_scene, &j);
    ts_scene_free(sc);
    if (st) *fatal = st;
    return st == TS_OK;
}

static void stats_line(ts_text_buf *b, const ts_trace_step *s) {
    char shape[160] = "";
    size_t m = 0;
    for (int d = 0; d < s->rank && m + 24 < sizeof shape; d++)
        m += (size_t)snprintf(shape + m, sizeof shape - m, "%s%lld", d ? ", " : "", (long long)s->shape[d]);
    char line[512];
    if (s->has_stats)
        snprintf(line, sizeof line, "%s \xc2\xb7 [%s] \xc2\xb7 min %.4g \xc2\xb7 max %.4g \xc2\xb7 mean %.4g \xc2\xb7 std %.4g%s",
                 ts_op_name(s->op), shape, s->stats.min, s->stats.max, s->stats.mean, s->stats.std,
                 s->stats.nan || s->stats.inf ? " \xc2\xb7 NaN or Inf present" : "");
    else
        snprintf(line, sizeof line, "%s \xc2\xb7 [%s] \xc2\xb7 no statistics recorded", ts_op_name(s->op), shape);
    js_str(b, line);
}

/* The value of a one-number step at record k (train.step), or NAN. */
static double scalar_at(ts_trace *t, int64_t i) {
    const ts_trace_step *s = ts_trace_step_at(t, i);
    const float *v;
    if (!s || s->numel != 1 || !s->has_values || ts_trace_values(t, i, &v) != TS_OK) return NAN;
    return v[0];
}

ts_status ts_trace_html_write(ts_trace *t, const char *trace_path, const char *dir, int *figures) {
    if (figures) *figures = 0;
    char sub[4096];
    if (!dir[0]) return ts_fail(TS_ERR_ARG, "an empty folder name");
    ts_status damaged = ts_trace_verify(t, NULL); /* never a page with a damaged step's figure left out */
    if (damaged) return damaged;
    if (snprintf(sub, sizeof sub, "%s/s", dir) >= (int)sizeof sub - 64) return ts_fail(TS_ERR_ARG, "path too long: %s", dir);
    ts_status made = ts_mkdir_p(sub);
    if (made) return made;

    int64_t n = ts_trace_count(t);
    /* names in order of their first record; each name's records */
    int64_t *first = calloc((size_t)(n > 0 ? n : 1), sizeof *first);
    int *n_rec = calloc((size_t)(n > 0 ? n : 1), sizeof *n_rec);
    if (!first || !n_rec) {
        free(first);
        free(n_rec);
        return ts_fail(TS_ERR_NOMEM, "html: out of memory");
    }
    int n_names = 0, snapshots = 1;
    for (int64_t i = 0; i < n; i++) {
        const ts_trace_step *s = ts_trace_step_at(t, i);
        if (ts_trace_find(t, s->name) != i) continue; /* not the first record of its name */
        first[n_names] = i;
        int k = 0;
        for (int64_t j = i; j >= 0; j = ts_trace_find_next(t, j)) k++;
        n_rec[n_names++] = k;
        if (k > snapshots) snapshots = k;
    }

    ts_text_buf js = {0};
    ts_status fatal = TS_OK;
    int written = 0;
    ts_text_buf_str(&js, "// what tscope html knows of the trace's steps; the page reads it (trace.js)\nwindow.TSCOPE_TRACE = {\n  \"trace\": ");
    const char *base = strrchr(trace_path, '/');
    js_str(&js, base ? base + 1 : trace_path);
    ts_text_buf_printf(&js, ",\n  \"snapshots\": %d,\n  \"snapshotLabels\": [", snapshots);
    /* a training trace names its snapshots by train.step */
    int64_t ts = ts_trace_find(t, "train.step");
    for (int k = 0; k < snapshots; k++) {
        double v = NAN;
        int64_t j = ts;
        for (int q = 0; j >= 0 && q < k; q++) j = ts_trace_find_next(t, j);
        if (j >= 0) v = scalar_at(t, j);
        char label[64];
        if (isfinite(v)) snprintf(label, sizeof label, "training step %.0f", v);
        else snprintf(label, sizeof label, "record %d", k);
        if (k) ts_text_buf_str(&js, ", ");
        js_str(&js, label);
    }
    ts_text_buf_str(&js, "],\n  \"steps\": [\n");
    for (int id = 0; id < n_names && !fatal; id++) {
        const ts_trace_step *s0 = ts_trace_step_at(t, first[id]);
        int batches = 1, heads = 0;
        if (s0->has_values && s0->batch_index < 0 && s0->rank >= 2 && s0->shape[0] > 1)
            batches = s0->shape[0] < MAX_BATCH_CHOICES ? (int)s0->shape[0] : MAX_BATCH_CHOICES;
        ts_text_buf_str(&js, "    {\"name\": ");
        js_str(&js, s0->name);
        ts_text_buf_str(&js, ", \"records\": [");
        int64_t i = first[id];
        for (int k = 0; k < n_rec[id] && !fatal; k++, i = ts_trace_find_next(t, i)) {
            const ts_trace_step *s = ts_trace_step_at(t, i);
            char file[64], why[512] = "";
            unsigned used = 0;
            fig_name(file, sizeof file, id, k, 0, -1);
            bool drawn = write_figure(t, dir, file, s0->name, k, 0, -1, &used, why, sizeof why, &fatal);
            written += drawn;
            if (k == 0 && drawn) {
                /* heads, where the picture has them: a head-0 figure says whether --head applies */
                char f2[64], w2[16];
                unsigned used0 = 0;
                fig_name(f2, sizeof f2, id, 0, 0, 0);
                if (s0->rank == 4 && s0->shape[1] > 1 && s0->shape[1] <= MAX_HEAD_CHOICES &&
                    write_figure(t, dir, f2, s0->name, 0, 0, 0, &used0, w2, sizeof w2, &fatal) &&
                    (used0 & TS_SCENE_USED_HEAD))
                    heads = (int)s0->shape[1], written++;
                if (!(used & TS_SCENE_USED_BATCH)) batches = 1;
            }
            for (int b = 0; drawn && b < batches && !fatal; b++)
                for (int h = -1; h < heads && !fatal; h++) {
                    if ((b == 0 && h == -1) || (k == 0 && b == 0 && h == 0)) continue;
                    char f3[64], w3[16];
                    fig_name(f3, sizeof f3, id, k, b, h);
                    written += write_figure(t, dir, f3, s0->name, k, b, h, NULL, w3, sizeof w3, &fatal);
                }
            ts_text_buf_str(&js, k ? ", {" : "{");
            ts_text_buf_str(&js, "\"stats\": ");
            stats_line(&js, s);
            if (!drawn) {
                ts_text_buf_str(&js, ", \"none\": ");
                js_str(&js, why);
            }
            ts_text_buf_str(&js, "}");
        }
        ts_text_buf_printf(&js, "], \"batches\": %d, \"heads\": %d}%s\n", batches, heads, id + 1 < n_names ? "," : "");
    }
    ts_text_buf_str(&js, "  ]\n};\n");
    free(first);
    free(n_rec);
    if (fatal) {
        free(js.s);
        return fatal;
    }
    if (js.oom) return ts_fail(TS_ERR_NOMEM, "html: out of memory");

    char path[4096];
    snprintf(path, sizeof path, "%s/trace.js", dir);
    ts_status st = ts_pages__write_file(path, js.s, js.len);
    free(js.s);
    snprintf(path, sizeof path, "%s/style.css", dir);
    if (!st) st = ts_pages__write_file(path, ts_site_css, strlen(ts_site_css));
    snprintf(path, sizeof path, "%s/explorer.js", dir);
    if (!st) st = ts_pages__write_file(path, ts_explorer_js, strlen(ts_explorer_js));
    ts_text_buf h = {0};
    ts_text_buf_str(&h, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>");
    ts_render_svg_escape(&h, base ? base + 1 : trace_path, (size_t)-1);
    ts_text_buf_str(&h, " \xc2\xb7 tscope</title>\n<link rel=\"stylesheet\" href=\"style.css\">\n</head>\n<body class=\"explorer\">\n"
                        "<header>\n<h1>");
    ts_render_svg_escape(&h, base ? base + 1 : trace_path, (size_t)-1);
    ts_text_buf_str(&h, "</h1>\n<label>find a step <input id=\"search\" type=\"search\" placeholder=\"name, part of one, or a glob\" "
                        "autocomplete=\"off\"></label>\n<span id=\"found\"></span>\n</header>\n<main class=\"explorer\">\n"
                        "<nav id=\"tree\" aria-label=\"steps\"></nav>\n<section id=\"view\">\n<div class=\"controls\">\n"
                        "<label id=\"batch-box\">batch <select id=\"batch\"></select></label>\n"
                        "<label id=\"head-box\">head <select id=\"head\"></select></label>\n"
                        "<label id=\"snap-box\">snapshot <input id=\"snap\" type=\"range\" min=\"0\" value=\"0\"> "
                        "<output id=\"snap-label\"></output></label>\n</div>\n<h2 id=\"step-name\"></h2>\n"
                        "<p id=\"stats\" class=\"stats\"></p>\n<div id=\"figure\"></div>\n"
                        "<p class=\"keys\">\xe2\x86\x91 \xe2\x86\x93 previous and next step \xc2\xb7 [ ] previous and next snapshot "
                        "\xc2\xb7 / find</p>\n</section>\n</main>\n<script src=\"trace.js\"></script>\n"
                        "<script src=\"explorer.js\"></script>\n</body>\n</html>\n");
    snprintf(path, sizeof path, "%s/index.html", dir);
    if (!st) st = h.oom ? ts_fail(TS_ERR_NOMEM, "html: out of memory") : ts_pages__write_file(path, h.s, h.len);
    free(h.s);
    if (!st && figures) *figures = written;
    return st;
}
