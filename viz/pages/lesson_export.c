/* lesson pages: one step of a lesson drawn as its narration beside its view.
 *
 * The view is a ts_scene (the code `tscope png` and the viewer use), drawn
 * once, or twice side by side for a comparison (another tensor, the same one
 * from another run, or from another record of a training trace), with the
 * step's highlights framed over the cells the scene laid out. The one view a
 * scene has no picture for, a glob over layers drawn as curves, is a plot of
 * each layer's statistics made with the same renderer (ts_render_plot).
 *
 * The narration is the step's Markdown as pango markup (ts_lesson_block_markup),
 * laid out block by block; when it does not fit, the text gets smaller until
 * it does. Export and the lesson mode of the viewer draw the same pages.
 */
#include <cairo-pdf.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pango/pangocairo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tscope/pages.h"
#include "tscope/render.h"

#define MAX_LAYERS 64
#define NAME_MAX_LEN 320

typedef struct rgb {
    double r, g, b;
} rgb;

static const rgb INK = {0.13, 0.14, 0.16};
static const rgb MUTED = {0.42, 0.45, 0.50};
static const rgb PAPER = {1, 1, 1};
static const rgb PANEL_BG = {0.965, 0.97, 0.978};
static const rgb RULE = {0.80, 0.82, 0.86};
static const rgb ACCENT = {0.16, 0.42, 0.85};
static const rgb CODE_BG = {0.91, 0.925, 0.945};
static const rgb MARK = {1.0, 0.70, 0.0};   /* highlight frames: amber ... */
static const rgb MARK_EDGE = {0.1, 0.1, 0.1}; /* ... on a dark edge, visible on any colour map */

static void set_rgb(cairo_t *cr, rgb c) { cairo_set_source_rgb(cr, c.r, c.g, c.b); }

static void fill_rect(cairo_t *cr, ts_render_rect r, rgb c) {
    set_rgb(cr, c);
    cairo_rectangle(cr, r.x, r.y, r.w, r.h);
    cairo_fill(cr);
}

/* ---- the page ------------------------------------------------------------------- */

/* One view: a scene, or the per-layer plot. */
typedef struct pane {
    ts_scene *sc;
    ts_trace *t;
    char name[NAME_MAX_LEN]; /* what the scene was asked for (the request points here) */
    char label[240];         /* above the view when it is one of two: which run or record */
    /* the per-layer plot */
    bool layer_plot;
    int n_layers;
    float x[MAX_LAYERS], y[5][MAX_LAYERS];
    char ticks[MAX_LAYERS][16];
    const char *tick_ptr[MAX_LAYERS];
    ts_render_series series[5];
    char title[NAME_MAX_LEN + 40], subtitle[320];
    /* `overlay: true` of two per-layer plots: the other run's curves joined to these,
     * mean and std of both above, min and max of both below */
    bool overlaid;
    ts_render_series both[8];
    char both_labels[8][128];
} pane;

struct ts_lesson_page {
    const ts_lessonrun *r;
    const ts_lesson_step *st;
    int step, n_steps;
    pane view[2];
    int n_views;
    bool narrow; /* drawn as the site's figure: a zoom's cells stretch for their numbers */
    bool intro_elsewhere; /* a hand-out printed the introduction on a page of its own */
    char axes[32];
    char note[600];
};

const char *ts_lesson_page_note(const ts_lesson_page *p) { return p->note; }

/* Add a clause to the page's "Not shown:" line (once). */
static void add_note(ts_lesson_page *p, const char *what) {
    if (strstr(p->note, what)) return;
    size_t at = strlen(p->note);
    snprintf(p->note + at, sizeof p->note - at, "%s%s", at ? "; " : "", what);
}

/* "encoder.layers.*.out" with layer L: "encoder.layers.L.out". False when
 * name has no "layers.*". */
static bool with_layer(char *buf, size_t cap, const char *name, int layer) {
    return strstr(name, "layers.*") && ts_name_with_layer(buf, cap, name, layer);
}

/* The value of the k-th record of a scalar name (k -1: the last), or NAN. */
static double record_value(ts_trace *t, const char *name, int k) {
    int64_t i = ts_trace_find(t, name);
    if (k < 0)
        for (int64_t next = i; next >= 0; next = ts_trace_find_next(t, next)) i = next;
    else
        for (int j = 0; j < k && i >= 0; j++) i = ts_trace_find_next(t, i);
    const float *v;
    if (i < 0 || ts_trace_values(t, i, &v) != TS_OK) return NAN;
    return v[0];
}

/* Which record of a training trace, in training steps ("after 150 training
 * steps"), from the train.step recorded beside it. */
static void record_label(char *buf, size_t cap, ts_trace *t, int record) {
    double step = record_value(t, "train.step", record);
    if (step == 0) snprintf(buf, cap, "before training (step 0)");
    else if (!isnan(step)) snprintf(buf, cap, "after %.0f training steps", step);
    else if (record < 0) snprintf(buf, cap, "last record");
    else snprintf(buf, cap, "record %d", record);
}

static bool setup_has(const ts_lesson_setup *s, const char *key) {
    for (int i = 0; i < s->n_keys; i++)
        if (strcmp(s->keys[i].key, key) == 0) return true;
    return false;
}

/* A setup in words, by what sets it apart from `other`: "run 'unscaled':
 * variant no-scale" (keys both give the same value are left out). */
static void run_label(char *buf, size_t cap, const ts_lesson *l, const char *name, const char *other) {
    int k = ts_lesson_find_setup(l, name), o = ts_lesson_find_setup(l, other);
    size_t at = (size_t)snprintf(buf, cap, k <= 0 ? "main run" : "run '%s'", name);
    if (k < 0) return;
    int shown = 0;
    /* every key the setup has: the main setup's, then its own others */
    for (int pass = 0; pass < 2; pass++) {
        const ts_lesson_setup *s = &l->setups[pass == 0 ? 0 : k];
        if (pass == 1 && k == 0) break;
        for (int i = 0; i < s->n_keys && at < cap; i++) {
            const char *key = s->keys[i].key;
            if (pass == 1 && setup_has(&l->setups[0], key)) continue;
            const char *mine = ts_lesson_setup_get(l, k, key), *theirs = o >= 0 ? ts_lesson_setup_get(l, o, key) : NULL;
            if (!mine || (theirs && strcmp(mine, theirs) == 0)) continue;
            at += (size_t)snprintf(buf + at, cap - at, "%s %s %s", shown++ ? "," : ":", key, mine);
        }
    }
}

static ts_render_view render_view(ts_lesson_view v) {
    ts_render_view out = TS_RENDER_VIEW_AUTO;
    ts_render_view_from_name(ts_lesson_view_name(v), &out);
    return out;
}

/* Curves of a glob over layers: each layer's mean, std, min and max, from
 * the statistics every step keeps. */
static ts_status build_layer_plot(pane *v, const char *glob) {
    static const char *const labels[4] = {"mean", "std", "min", "max"};
    int n = 0;
    for (; n < MAX_LAYERS; n++) {
        char name[NAME_MAX_LEN];
        with_layer(name, sizeof name, glob, n);
        int64_t i = ts_trace_find(v->t, name);
        if (i < 0) break;
        const ts_trace_step *s = ts_trace_step_at(v->t, i);
        if (!s->has_stats) return ts_fail(TS_ERR_ARG, "%s kept no statistics (level shapes)", name);
        v->x[n] = (float)n;
        v->y[0][n] = (float)s->stats.mean;
        v->y[1][n] = (float)s->stats.std;
        v->y[2][n] = (float)s->stats.min;
        v->y[3][n] = (float)s->stats.max;
        snprintf(v->ticks[n], sizeof v->ticks[n], "%d", n);
        v->tick_ptr[n] = v->ticks[n];
    }
    if (n == 0) return ts_fail(TS_ERR_ARG, "no step matches %s with layer 0", glob);
    v->n_layers = n;
    for (int k = 0; k < 4; k++)
        v->series[k] = (ts_render_series){.label = labels[k], .x = v->x, .y = v->y[k], .n = n, .color = k};
    v->layer_plot = true;
    snprintf(v->title, sizeof v->title, "%s: mean and std, layer by layer", glob);
    with_layer(v->name, sizeof v->name, glob, 0);
    int64_t i0 = ts_trace_find(v->t, v->name);
    char shape[TS_SHAPE_TEXT_MAX];
    const ts_trace_step *s0 = ts_trace_step_at(v->t, i0);
    ts_shape_format(shape, sizeof shape, s0->rank, s0->shape, TS_SHAPE_PLAIN);
    snprintf(v->subtitle, sizeof v->subtitle, "statistics of all %lld values of each layer's %s", (long long)s0->numel,
             shape);
    snprintf(v->name, sizeof v->name, "%s", glob);
    return TS_OK;
}

/* The name a scene is asked for: a trailing ".*" is the module; "layers.*"
 * takes the step's layer (0 when none); another glob its first match. */
static ts_status scene_name(pane *v, const ts_lesson_step *st, const char *name) {
    char buf[NAME_MAX_LEN];
    snprintf(buf, sizeof buf, "%s", name);
    size_t n = strlen(buf);
    if (n > 2 && strcmp(buf + n - 2, ".*") == 0) buf[n - 2] = '\0';
    char tmp[NAME_MAX_LEN];
    if (with_layer(tmp, sizeof tmp, buf, st->layer >= 0 ? st->layer : 0)) snprintf(buf, sizeof buf, "%s", tmp);
    if (strchr(buf, '*') || strchr(buf, '?')) {
        int64_t i = ts_trace_find_glob(v->t, buf, 0);
        if (i < 0) return ts_fail(TS_ERR_ARG, "no step matches '%s'", buf);
        snprintf(buf, sizeof buf, "%s", ts_trace_step_at(v->t, i)->name);
    }
    snprintf(v->name, sizeof v->name, "%s", buf);
    return TS_OK;
}

static ts_status build_pane(ts_lesson_page *p, pane *v, const char *run, const char *name, int record) {
    const ts_lesson_step *st = p->st;
    v->t = ts_lessonrun_trace(p->r, run);
    if (!v->t) return ts_fail(TS_ERR_ARG, "no trace for run '%s'", run);
    if (st->view == TS_LESSON_VIEW_CURVES && strstr(name, "layers.*")) return build_layer_plot(v, name);
    ts_status s = scene_name(v, st, name);
    if (s) return s;
    ts_scene_request rq = ts_scene_request_default(v->name);
    rq.view = render_view(st->view);
    rq.batch = st->batch >= 0 ? st->batch : 0;
    rq.head = st->head;
    rq.occurrence = record;
    rq.lesson_keys = true;
    rq.position = st->position;
    rq.top_k = st->top;
    rq.axes = st->n_axes == 2 ? p->axes : NULL;
    if (st->n_dims) {
        rq.dims = st->dims;
        rq.n_dims = st->n_dims;
    }
    return ts_scene_build(&v->sc, v->t, &rq);
}

/* One colour scale over both panels of a comparison (`colour-scale:
 * shared`), so that equal colours are equal values: the symmetric coolwarm
 * when either side is signed, else viridis from 0. */
static ts_status share_scale(ts_scene *a, ts_scene *b) {
    ts_render_scale sa, sb;
    if (!ts_scene_color_scale(a, &sa) || !ts_scene_color_scale(b, &sb))
        return ts_fail(TS_ERR_ARG, "colour-scale: shared needs two views drawn in colour (heatmaps, grids)");
    ts_render_scale both = {.cmap = TS_CMAP_VIRIDIS, .vmin = 0, .vmax = fmaxf(sa.vmax, sb.vmax)};
    if (sa.cmap != TS_CMAP_VIRIDIS || sb.cmap != TS_CMAP_VIRIDIS) {
        float m = fmaxf(fmaxf(fabsf(sa.vmin), fabsf(sa.vmax)), fmaxf(fabsf(sb.vmin), fabsf(sb.vmax)));
        both = (ts_render_scale){.cmap = TS_CMAP_COOLWARM, .vmin = -m, .vmax = m};
    }
    ts_scene_set_color_scale(a, both);
    ts_scene_set_color_scale(b, both);
    return TS_OK;
}

/* Two per-layer plots on one pair of axes each: a's and b's mean and std
 * above, min and max below; a solid, b dashed in the same colour, so a stat
 * keeps its colour and a run its line. b's values stay in b's pane. */
static ts_status overlay_layer_plots(pane *a, const pane *b, const char *la, const char *lb) {
    if (a->n_layers != b->n_layers)
        return ts_fail(TS_ERR_ARG, "overlay: the runs have %d and %d layers; one pair of axes needs the same", a->n_layers,
                       b->n_layers);
    for (int half = 0; half < 2; half++) /* mean, std above; min, max below */
        for (int side = 0; side < 2; side++)
            for (int j = 0; j < 2; j++) {
                int k = half * 2 + j, at = half * 4 + side * 2 + j;
                const pane *from = side ? b : a;
                a->both[at] = from->series[k];
                a->both[at].color = k;
                a->both[at].dashed = side == 1;
                snprintf(a->both_labels[at], sizeof a->both_labels[at], "%.20s, %.100s", from->series[k].label,
                         side ? lb : la);
                a->both[at].label = a->both_labels[at];
            }
    a->overlaid = true;
    return TS_OK;
}

/* `overlay: true`: the comparison's curves drawn into the step's own plot,
 * one pair of axes, each side named in the legend. The right pane stays
 * alive (its values are drawn) but is not drawn itself. */
static ts_status overlay(ts_lesson_page *p) {
    const ts_lesson_step *st = p->st;
    pane *a = &p->view[0], *b = &p->view[1];
    if (a->layer_plot != b->layer_plot)
        return ts_fail(TS_ERR_ARG, "overlay: a layer-by-layer plot and a single step's curves do not share axes");
    char la[sizeof a->label], lb[sizeof b->label];
    if (a->label[0] && b->label[0]) { /* what tells the two runs or records apart */
        snprintf(la, sizeof la, "%s", a->label);
        snprintf(lb, sizeof lb, "%s", b->label);
    } else {
        snprintf(la, sizeof la, "%s", st->tensor);
        snprintf(lb, sizeof lb, "%s", st->compare_with ? st->compare_with : st->tensor);
    }
    if (a->layer_plot) TS_TRY(overlay_layer_plots(a, b, la, lb));
    else TS_TRY(ts_scene_overlay(a->sc, b->sc, la, lb));
    a->label[0] = '\0';
    p->n_views = 1;
    return TS_OK;
}

void ts_lesson_page_free(ts_lesson_page *p) {
    if (!p) return;
    for (int i = 0; i < 2; i++) ts_scene_free(p->view[i].sc);
    free(p);
}

ts_status ts_lesson_page_build(ts_lesson_page **out, const ts_lessonrun *r, int step) {
    *out = NULL;
    const ts_lesson *l = r->lesson;
    if (step < 0 || step >= l->n_steps) return ts_fail(TS_ERR_ARG, "lesson: no step %d (1..%d)", step + 1, l->n_steps);
    ts_lesson_page *p = calloc(1, sizeof *p);
    if (!p) return ts_fail(TS_ERR_NOMEM, "lesson: out of memory");
    const ts_lesson_step *st = &l->steps[step];
    p->r = r;
    p->st = st;
    p->step = step;
    p->n_steps = l->n_steps;
    if (st->n_axes == 2) snprintf(p->axes, sizeof p->axes, "%d,%d", st->axes[0], st->axes[1]);
    int record = st->train_step == TS_LESSON_UNSET ? 0 : st->train_step;
    ts_status s = build_pane(p, &p->view[0], st->run, st->tensor, record);
    const char *key = "tensor";
    p->n_views = 1;
    bool compare = st->compare_with || st->compare_run || st->compare_step != TS_LESSON_UNSET;
    if (!s && compare) {
        const char *run = st->compare_run ? st->compare_run : st->run;
        const char *name = st->compare_with ? st->compare_with : st->tensor;
        int rec = st->compare_step != TS_LESSON_UNSET ? st->compare_step : record;
        key = st->compare_with ? "compare-with" : st->compare_run ? "compare-run" : "compare-step";
        s = build_pane(p, &p->view[1], run, name, rec);
        p->n_views = 2;
        /* Say what differs between the two when the titles do not. */
        if (!s && st->compare_run && strcmp(st->compare_run, st->run) != 0) {
            run_label(p->view[0].label, sizeof p->view[0].label, l, st->run, st->compare_run);
            run_label(p->view[1].label, sizeof p->view[1].label, l, st->compare_run, st->run);
        }
        if (!s && st->shared_scale) s = share_scale(p->view[0].sc, p->view[1].sc);
        if (!s && st->compare_step != TS_LESSON_UNSET) {
            record_label(p->view[0].label, sizeof p->view[0].label, p->view[0].t, record);
            record_label(p->view[1].label, sizeof p->view[1].label, p->view[1].t, rec);
        }
        if (!s && st->overlay) s = overlay(p);
    }
    if (!s && !compare && st->train_step != TS_LESSON_UNSET) {
        record_label(p->view[0].label, sizeof p->view[0].label, p->view[0].t, record);
        /* a plot of several snapshots draws more than the one record `step:`
         * picks: that record is where the step's figures are read */
        if (ts_scene_view(p->view[0].sc) == TS_RENDER_VIEW_CURVES) {
            char one[sizeof p->view[0].label];
            memcpy(one, p->view[0].label, sizeof one);
            snprintf(p->view[0].label, sizeof p->view[0].label, "figures quoted: %.160s (the curves: the legend's steps)",
                     one);
        }
    }
    if (s) {
        s = ts_lesson_fail_at(l, ts_lesson_step_line(st, key), "%s", ts_last_error());
        ts_lesson_page_free(p);
        return s;
    }
    *out = p;
    return TS_OK;
}

/* ---- highlights --------------------------------------------------------------------- */

static void frame_rect(cairo_t *cr, ts_render_rect r, double lw) {
    cairo_rectangle(cr, r.x, r.y, r.w, r.h);
    set_rgb(cr, MARK_EDGE);
    cairo_set_line_width(cr, lw + 2);
    cairo_stroke_preserve(cr);
    set_rgb(cr, MARK);
    cairo_set_line_width(cr, lw);
    cairo_stroke(cr);
}

/* The union of two cell rectangles. */
static ts_render_rect span(ts_render_rect a, ts_render_rect b) {
    double x0 = fmin(a.x, b.x), y0 = fmin(a.y, b.y);
    double x1 = fmax(a.x + a.w, b.x + b.w), y1 = fmax(a.y + a.h, b.y + b.h);
    return (ts_render_rect){x0, y0, x1 - x0, y1 - y0};
}

/* Frame rows [r0, r1] x columns [c0, c1] of a panel (clipped to what is visible). */
static bool frame_block(cairo_t *cr, const ts_render_layout *lay, int panel, int r0, int r1, int c0, int c1) {
    const ts_render_cells *c = &lay->panel[panel];
    int vr0 = r0 > c->row0 ? r0 : c->row0, vr1 = r1 < c->row0 + c->rows - 1 ? r1 : c->row0 + c->rows - 1;
    int vc0 = c0 > c->col0 ? c0 : c->col0, vc1 = c1 < c->col0 + c->cols - 1 ? c1 : c->col0 + c->cols - 1;
    ts_render_rect a, b;
    if (vr0 > vr1 || vc0 > vc1) return false;
    if (!ts_render_cell_rect(lay, panel, vr0, vc0, &a) || !ts_render_cell_rect(lay, panel, vr1, vc1, &b)) return false;
    double lw = fmin(2.5, fmax(1.0, fmin(c->cell_w, c->cell_h) * 0.25));
    frame_rect(cr, span(a, b), lw);
    return true;
}

static float at(const ts_render_matrix *m, int r, int c) {
    int64_t rs = m->row_stride ? m->row_stride : m->cols, cs = m->col_stride ? m->col_stride : 1;
    return m->values[(int64_t)r * rs + (int64_t)c * cs];
}

/* Frame single cells chosen by pick(r) -> column (or -1), for every row. */
static void frame_cells(cairo_t *cr, const ts_render_layout *lay, int panel, const ts_render_matrix *m, int kind) {
    const ts_render_cells *c = &lay->panel[panel];
    for (int r = 0; r < c->total_rows; r++) {
        for (int col = 0; col < c->total_cols; col++) {
            bool hit = false;
            if (kind == TS_LESSON_MARK_DIAGONAL) {
                hit = col == r;
            } else if (kind == TS_LESSON_MARK_MASKED && m) {
                float v = at(m, r, col);
                hit = (m->mask && m->mask[(int64_t)r * m->cols + col]) || (isinf(v) && v < 0);
            } else if (kind == TS_LESSON_MARK_ARGMAX && m) {
                float v = at(m, r, col), best = -INFINITY;
                int arg = -1;
                for (int k = 0; k < m->cols; k++) {
                    float x = at(m, r, k);
                    bool masked = (m->mask && m->mask[(int64_t)r * m->cols + k]) || isnan(x);
                    if (!masked && x > best) best = x, arg = k;
                }
                hit = arg == col && !isnan(v);
            }
            if (hit) frame_block(cr, lay, panel, r, r, col, col);
        }
    }
}

/* The step's highlights over every panel of a view with cells. Returns
 * false when the view has no cells to frame. */
static bool draw_marks(cairo_t *cr, const ts_lesson_step *st, const pane *v, const ts_render_layout *lay) {
    if (!lay || lay->n_panels == 0) return false;
    for (int panel = 0; panel < lay->n_panels; panel++) {
        const ts_render_cells *c = &lay->panel[panel];
        const ts_render_matrix *m = v->sc ? ts_scene_matrix(v->sc, panel) : NULL;
        int R = c->total_rows - 1, C = c->total_cols - 1;
        for (int k = 0; k < st->n_marks; k++) {
            const ts_lesson_mark *mk = &st->marks[k];
            switch (mk->kind) {
            case TS_LESSON_MARK_ROW: frame_block(cr, lay, panel, mk->a, mk->a, 0, C); break;
            case TS_LESSON_MARK_COL:
            case TS_LESSON_MARK_DIM: frame_block(cr, lay, panel, 0, R, mk->a, mk->a); break;
            case TS_LESSON_MARK_CELL: frame_block(cr, lay, panel, mk->a, mk->a, mk->b, mk->b); break;
            case TS_LESSON_MARK_TOKEN:
                frame_block(cr, lay, panel, mk->a, mk->a, 0, C);
                frame_block(cr, lay, panel, 0, R, mk->a, mk->a);
                break;
            default: frame_cells(cr, lay, panel, m, mk->kind); break;
            }
        }
    }
    return true;
}

/* A framed token's label for the legend: its index and, when the view names
 * it, the token ("40 `s`"). */
static void mark_token(char *buf, size_t cap, const char *const *labels, int n, int i) {
    const char *tok = labels && i >= 0 && i < n ? labels[i] : NULL;
    if (tok && tok[0]) snprintf(buf, cap, "%d \u201c%s\u201d", i, tok);
    else snprintf(buf, cap, "%d", i);
}

/* A cell's value in the legend: three significant digits below 1 (0.421,
 * 0.0453), two decimals above (13.97), so a quoted 0.42, 0.045 or 13.97 can
 * be read off it. */
static void mark_value(char *buf, size_t cap, float v) {
    if (isnan(v)) snprintf(buf, cap, "NaN");
    else if (isinf(v)) snprintf(buf, cap, "%s\u221e", v < 0 ? "\u2212" : "");
    else if (fabsf(v) >= 100) snprintf(buf, cap, "%.1f", v);
    else if (fabsf(v) >= 1) snprintf(buf, cap, "%.2f", v); /* 13.97: a logit quoted to two decimals */
    else if (v != 0 && fabsf(v) < 0.001f) snprintf(buf, cap, "%.2e", v);
    else snprintf(buf, cap, "%#.3g", v); /* 0.700, not 0.7: a quoted 0.70 is read off it */
}

/* The legend of a pane's frames: each framed row, column and cell by its
 * index and token, a cell with its value ("framed: row 40 "s", column 9
 * "p": 0.421"), so an index the thinned labels skip, and a framed value, can
 * be read on the page. Empty when the step frames none of these or the
 * view has no single matrix. */
static void mark_legend(char *buf, size_t cap, const ts_lesson_step *st, const pane *v) {
    buf[0] = '\0';
    const ts_render_matrix *m = v->sc && !v->layer_plot ? ts_scene_matrix(v->sc, 0) : NULL;
    if (!m) return;
    size_t n = 0;
    for (int k = 0; k < st->n_marks && n + 1 < cap; k++) {
        const ts_lesson_mark *mk = &st->marks[k];
        char a[96], b[96], val[32];
        int w = 0;
        const char *sep = n ? "; " : "framed: ";
        switch (mk->kind) {
        case TS_LESSON_MARK_ROW:
            mark_token(a, sizeof a, m->row_labels, m->rows, mk->a);
            w = snprintf(buf + n, cap - n, "%srow %s", sep, a);
            break;
        case TS_LESSON_MARK_COL:
        case TS_LESSON_MARK_DIM:
            mark_token(a, sizeof a, m->col_labels, m->cols, mk->a);
            w = snprintf(buf + n, cap - n, "%scolumn %s", sep, a);
            break;
        case TS_LESSON_MARK_TOKEN:
            mark_token(a, sizeof a, m->row_labels, m->rows, mk->a);
            w = snprintf(buf + n, cap - n, "%srow and column %s", sep, a);
            break;
        case TS_LESSON_MARK_CELL:
            if (mk->a >= m->rows || mk->b >= m->cols) break;
            mark_token(a, sizeof a, m->row_labels, m->rows, mk->a);
            mark_token(b, sizeof b, m->col_labels, m->cols, mk->b);
            mark_value(val, sizeof val, at(m, mk->a, mk->b));
            w = snprintf(buf + n, cap - n, "%srow %s, column %s: %s", sep, a, b, val);
            break;
        default: break;
        }
        if (w < 0) break;
        n += (size_t)w < cap - n ? (size_t)w : cap - n - 1;
    }
}

/* ---- drawing the view ---------------------------------------------------------------- */

/* A layout of markup in DejaVu Sans: max_w > 0 bounds its width, where it
 * wraps (wrap) or is shortened with "…"; the font description is the caller's to free. */
static PangoLayout *pen_layout(cairo_t *cr, const char *markup, double size, bool bold, double max_w, bool wrap,
                               PangoFontDescription **fd) {
    PangoLayout *lay = ts_render_text_layout(cr);
    *fd = pango_font_description_from_string("DejaVu Sans");
    pango_font_description_set_absolute_size(*fd, size * PANGO_SCALE);
    if (bold) pango_font_description_set_weight(*fd, PANGO_WEIGHT_BOLD);
    pango_layout_set_font_description(lay, *fd);
    if (max_w > 0) {
        pango_layout_set_width(lay, (int)(max_w * PANGO_SCALE));
        if (wrap) pango_layout_set_wrap(lay, PANGO_WRAP_WORD_CHAR);
        else pango_layout_set_ellipsize(lay, PANGO_ELLIPSIZE_END);
    }
    pango_layout_set_markup(lay, markup, -1);
    return lay;
}

/* One line of markup at (x, y), aligned by `align` (0 left, 1 right), cut
 * short with "…" beyond max_w (> 0; such a cut is recorded as a clip);
 * returns its height. */
static double pen_text(cairo_t *cr, const char *markup, double size, bool bold, rgb c, double x, double y,
                       double max_w, double align) {
    PangoFontDescription *fd;
    PangoLayout *lay = pen_layout(cr, markup, size, bold, max_w, false, &fd);
    int w, h;
    pango_layout_get_size(lay, &w, &h);
    set_rgb(cr, c);
    cairo_move_to(cr, x - align * (double)w / PANGO_SCALE, y);
    ts_render_show_layout(cr, lay);
    pango_font_description_free(fd);
    g_object_unref(lay);
    return (double)h / PANGO_SCALE;
}

/* Markup wrapped to width max_w at (x, y), whole, on as many lines as it
 * takes; returns its height. */
static double pen_wrapped(cairo_t *cr, const char *markup, double size, bool bold, rgb c, double x, double y,
                          double max_w) {
    PangoFontDescription *fd;
    PangoLayout *lay = pen_layout(cr, markup, size, bold, max_w, true, &fd);
    int h;
    pango_layout_get_size(lay, NULL, &h);
    set_rgb(cr, c);
    cairo_move_to(cr, x, y);
    ts_render_show_layout(cr, lay);
    pango_font_description_free(fd);
    g_object_unref(lay);
    return (double)h / PANGO_SCALE;
}

/* Draw one view into r, shrunk (down to PANE_MIN_SCALE) when r is smaller
 * than the size the view asks for, so its text keeps its proportions. The
 * floor keeps the views' smallest text (about 9 points) readable on the page:
 * at 0.8 and the default 1.25 pixels per point it stays above 9 pixels
 * (tests/readability_test.sh); below it the view lays itself out tighter. */
#define PANE_MIN_SCALE 0.8
static ts_status draw_pane(cairo_t *cr, const ts_lesson_page *p, const pane *v, ts_render_rect r, bool *marked) {
    if (v->label[0]) {
        char *esc = g_markup_escape_text(v->label, -1);
        double h = pen_wrapped(cr, esc, 14, true, ACCENT, r.x + 4, r.y, r.w - 8); /* the whole edit, wrapped */
        g_free(esc);
        r.y += h + 4;
        r.h -= h + 4;
    }
    /* the frames' legend: a line under the view, where it covers no cell */
    char legend[512];
    mark_legend(legend, sizeof legend, p->st, v);
    if (legend[0]) {
        char *esc = g_markup_escape_text(legend, -1);
        PangoFontDescription *fd;
        PangoLayout *lay = pen_layout(cr, esc, 12, false, r.w - 8, true, &fd);
        int lh;
        pango_layout_get_size(lay, NULL, &lh);
        pango_font_description_free(fd);
        g_object_unref(lay);
        double h = (double)lh / PANGO_SCALE;
        pen_wrapped(cr, esc, 12, false, INK, r.x + 4, r.y + r.h - h, r.w - 8);
        g_free(esc);
        r.h -= h + 6;
    }
    int pw = 1000, ph = 560;
    if (v->sc) ts_scene_size(v->sc, &pw, &ph);
    double s = fmin(1.0, fmin(r.w / pw, r.h / ph));
    if (s < PANE_MIN_SCALE) s = PANE_MIN_SCALE;
    ts_render_rect area = {0, 0, r.w / s, r.h / s};
    cairo_save(cr);
    cairo_rectangle(cr, r.x, r.y, r.w, r.h);
    cairo_clip(cr);
    cairo_translate(cr, r.x, r.y);
    cairo_scale(cr, s, s);
    ts_status st;
    if (v->layer_plot) {
        /* mean and std above, min and max below: each pair on its own scale */
        ts_render_rect top = area, bottom = area;
        top.h = floor(area.h * 0.56);
        bottom.y = top.y + top.h;
        bottom.h = area.h - top.h;
        ts_render_plot_opts o = {.title = v->title, .subtitle = v->subtitle, .x_label = "layer",
                                 .markers = true, .x_tick_labels = v->tick_ptr, .n_x_tick_labels = v->n_layers};
        const ts_render_series *s_top = v->overlaid ? v->both : v->series;
        int per_plot = v->overlaid ? 4 : 2;
        st = ts_render_plot(cr, top, s_top, per_plot, &o);
        o.title = "min and max";
        o.subtitle = NULL;
        if (!st) st = ts_render_plot(cr, bottom, s_top + per_plot, per_plot, &o);
    } else {
        ts_render_layout layout;
        /* `zoom`: the scene draws only that block of cells (its values in them when it is
         * small enough), and the highlight frames land on them as the layout says. */
        const ts_lesson_step *ls = p->st;
        ts_render_state zs = {.row0 = ls->zoom[0], .col0 = ls->zoom[2],
                              .rows = ls->zoom[1] >= 0 ? ls->zoom[1] - ls->zoom[0] + 1 : 0,
                              .cols = ls->zoom[3] >= 0 ? ls->zoom[3] - ls->zoom[2] + 1 : 0, .stretch = p->narrow};
        st = ts_scene_draw(v->sc, cr, area, ls->zoomed ? &zs : NULL, &layout);
        if (!st && p->st->n_marks) *marked |= draw_marks(cr, p->st, v, &layout);
    }
    cairo_restore(cr);
    return st;
}

/* Two views beside each other: the step's own on the left, the comparison on
 * the right (the narration says "left" and "right"). */
/* Two views side by side, or one above the other when `stack` (a narrow
 * figure whose zoomed cells need the whole width for their numbers). */
static ts_status draw_views_stacked(cairo_t *cr, ts_lesson_page *p, ts_render_rect r, bool stack) {
    bool marked = false;
    ts_status st = TS_OK;
    /* the step's caption: a band under the views, in the figure (its figures are expect:'s) */
    const char *caption = ts_lesson_step_value(p->st, "caption");
    if (caption) {
        double ch = ceil(ts_render_caption_block(cr, (ts_render_rect){r.x, 0, r.w, 0}, caption, false));
        ts_render_caption_block(cr, (ts_render_rect){r.x, r.y + r.h - ch, r.w, ch}, caption, true);
        r.h -= ch + 6;
    }
    if (p->n_views == 1) {
        st = draw_pane(cr, p, &p->view[0], r, &marked);
    } else if (stack) {
        double gap = 18;
        ts_render_rect a = r, b = r;
        a.h = b.h = (r.h - gap) / 2;
        b.y = r.y + a.h + gap;
        st = draw_pane(cr, p, &p->view[0], a, &marked);
        if (!st) st = draw_pane(cr, p, &p->view[1], b, &marked);
        set_rgb(cr, RULE);
        cairo_set_line_width(cr, 1);
        cairo_move_to(cr, r.x + 8, b.y - gap / 2);
        cairo_line_to(cr, r.x + r.w - 8, b.y - gap / 2);
        cairo_stroke(cr);
    } else {
        double gap = 18;
        ts_render_rect a = r, b = r;
        a.w = b.w = (r.w - gap) / 2;
        b.x = r.x + a.w + gap;
        st = draw_pane(cr, p, &p->view[0], a, &marked);
        if (!st) st = draw_pane(cr, p, &p->view[1], b, &marked);
        set_rgb(cr, RULE);
        cairo_set_line_width(cr, 1);
        cairo_move_to(cr, b.x - gap / 2, r.y + 8);
        cairo_line_to(cr, b.x - gap / 2, r.y + r.h - 8);
        cairo_stroke(cr);
    }
    if (p->st->n_marks && !marked) add_note(p, "the highlight is not drawn: this view has no cells to frame");
    const ts_trace_step *s0 = p->view[0].sc ? ts_scene_step(p->view[0].sc) : NULL;
    if (p->st->n_dims && (!s0 || s0->tag != TS_TAG_POSENC || s0->op != TS_OP_POSENC)) add_note(p, "dims choose positional-encoding curves only");
    return st;
}

static ts_status draw_views(cairo_t *cr, ts_lesson_page *p, ts_render_rect r) { return draw_views_stacked(cr, p, r, false); }

/* ---- narration ------------------------------------------------------------------------ */

/* ts_lesson_block_markup with inline code on a light background, so `qkv`
 * stands out from the words around it. */
static char *block_markup(const ts_lesson_block *b) {
    char *m = NULL;
    if (ts_lesson_block_markup(b, &m) != TS_OK) return NULL;
    if (b->kind == TS_LESSON_CODE_BLOCK) return m;
    static const char open[] = "<tt>", close[] = "</tt>";
    static const char span_open[] = "<span font_family=\"DejaVu Sans Mono\" background=\"#e8ecf1\">",
                      span_close[] = "</span>";
    size_t n = 0;
    for (const char *s = strstr(m, open); s; s = strstr(s + 1, open)) n++;
    if (n == 0) return m;
    char *out = malloc(strlen(m) + n * (sizeof span_open + sizeof span_close) + 1);
    if (!out) return m;
    char *w = out;
    for (const char *s = m; *s;) {
        if (strncmp(s, open, 4) == 0) {
            w += sprintf(w, "%s", span_open);
            s += 4;
        } else if (strncmp(s, close, 5) == 0) {
            w += sprintf(w, "%s", span_close);
            s += 5;
        } else {
            *w++ = *s++;
        }
    }
    *w = '\0';
    free(m);
    return out;
}

typedef struct prose {
    cairo_t *cr;
    PangoLayout *lay;
    PangoFontDescription *sans, *mono;
    double size; /* body text size */
    bool draw;   /* false: measure only */
} prose;

static void prose_init(prose *pr, cairo_t *cr, double size, bool draw) {
    pr->cr = cr;
    pr->lay = ts_render_text_layout(cr);
    pr->sans = pango_font_description_from_string("DejaVu Sans");
    pr->mono = pango_font_description_from_string("DejaVu Sans Mono");
    pr->size = size;
    pr->draw = draw;
    pango_layout_set_wrap(pr->lay, PANGO_WRAP_WORD_CHAR);
}

static void prose_free(prose *pr) {
    pango_font_description_free(pr->sans);
    pango_font_description_free(pr->mono);
    g_object_unref(pr->lay);
}

/* Lay out markup in width w at (x, y); returns its height. */
static double prose_text(prose *pr, const char *markup, bool mono, bool bold, double size, double x, double y,
                         double w, PangoAlignment align, rgb c) {
    PangoFontDescription *fd = mono ? pr->mono : pr->sans;
    pango_font_description_set_absolute_size(fd, size * PANGO_SCALE);
    pango_font_description_set_weight(fd, bold ? PANGO_WEIGHT_BOLD : PANGO_WEIGHT_NORMAL);
    pango_layout_set_font_description(pr->lay, fd);
    pango_layout_set_width(pr->lay, (int)(w * PANGO_SCALE));
    pango_layout_set_alignment(pr->lay, align);
    pango_layout_set_spacing(pr->lay, (int)(size * 0.22 * PANGO_SCALE));
    pango_layout_set_markup(pr->lay, markup, -1);
    int lw, lh;
    pango_layout_get_size(pr->lay, &lw, &lh);
    if (pr->draw) {
        set_rgb(pr->cr, c);
        cairo_move_to(pr->cr, x, y);
        ts_render_show_layout(pr->cr, pr->lay);
    }
    return (double)lh / PANGO_SCALE;
}

/* One block at y in column [x, x + w); returns the height it took, with the
 * space after it. */
static double prose_block(prose *pr, const ts_lesson_block *b, double x, double y, double w) {
    double size = pr->size, gap = size * 0.7;
    double indent = size * 1.4 * (b->depth > 0 ? b->depth - 1 : 0) + size * 1.2 * b->quote;
    double h = 0;
    if (b->kind == TS_LESSON_RULE) {
        if (pr->draw) {
            set_rgb(pr->cr, RULE);
            cairo_set_line_width(pr->cr, 1);
            cairo_move_to(pr->cr, x, y + gap / 2);
            cairo_line_to(pr->cr, x + w, y + gap / 2);
            cairo_stroke(pr->cr);
        }
        return gap;
    }
    char *m = block_markup(b);
    if (!m) return 0;
    double tx = x + indent, tw = w - indent;
    switch (b->kind) {
    case TS_LESSON_HEADING: {
        double hs = size * (b->level <= 1 ? 1.45 : b->level == 2 ? 1.25 : 1.1);
        h = prose_text(pr, m, false, true, hs, tx, y + size * 0.2, tw, PANGO_ALIGN_LEFT, INK) + size * 0.2;
        break;
    }
    case TS_LESSON_ITEM: {
        char *marker = g_markup_escape_text(b->marker, -1);
        double mw = size * 1.4;
        prose_text(pr, marker, false, false, size, tx, y, mw, PANGO_ALIGN_LEFT, MUTED);
        g_free(marker);
        h = prose_text(pr, m, false, false, size, tx + mw, y, tw - mw, PANGO_ALIGN_LEFT, INK);
        gap = size * 0.35;
        break;
    }
    case TS_LESSON_CODE_BLOCK: {
        double pad = size * 0.5;
        bool draw = pr->draw;
        pr->draw = false;
        h = prose_text(pr, m, true, false, size * 0.88, tx + pad, y + pad, tw - 2 * pad, PANGO_ALIGN_LEFT, INK);
        pr->draw = draw;
        if (draw) fill_rect(pr->cr, (ts_render_rect){tx, y, tw, h + 2 * pad}, CODE_BG);
        prose_text(pr, m, true, false, size * 0.88, tx + pad, y + pad, tw - 2 * pad, PANGO_ALIGN_LEFT, INK);
        h += 2 * pad;
        break;
    }
    case TS_LESSON_FORMULA:
        h = prose_text(pr, m, false, false, size * 1.08, tx, y + size * 0.15, tw, PANGO_ALIGN_CENTER, INK) + size * 0.3;
        break;
    default: h = prose_text(pr, m, false, false, size, tx, y, tw, PANGO_ALIGN_LEFT, INK); break;
    }
    free(m);
    if (b->quote && pr->draw) {
        set_rgb(pr->cr, RULE);
        cairo_rectangle(pr->cr, x + indent - size * 0.9, y, 3, h);
        cairo_fill(pr->cr);
    }
    return h + gap;
}

/* The blocks of a narration from `first` on; returns the height. */
static double prose_narration(prose *pr, const ts_lesson_narration *n, int first, double x, double y, double w) {
    double y0 = y;
    for (int b = first; b < n->n_blocks; b++) y += prose_block(pr, &n->blocks[b], x, y, w);
    return y - y0;
}

/* Whether the step's narration opens with the heading that is its title. */
static bool titled_by_heading(const ts_lesson_step *st) {
    for (int i = 0; i < st->n_keys; i++)
        if (strcmp(st->keys[i].key, "title") == 0) return false;
    return st->narration.n_blocks > 0 && st->narration.blocks[0].kind == TS_LESSON_HEADING;
}

/* The lesson's introduction, on its first page, with a rule under it;
 * returns the height (0 on other pages). */
static double prose_intro(prose *pr, const ts_lesson_page *p, double x, double y, double w) {
    const ts_lesson *l = p->r->lesson;
    if (p->step != 0 || !l->intro.n_blocks || p->intro_elsewhere) return 0;
    double h = prose_narration(pr, &l->intro, 0, x, y, w);
    if (pr->draw) {
        set_rgb(pr->cr, RULE);
        cairo_set_line_width(pr->cr, 1);
        cairo_move_to(pr->cr, x, y + h);
        cairo_line_to(pr->cr, x + w, y + h);
        cairo_stroke(pr->cr);
    }
    return h + pr->size * 0.8;
}

/* The step's title and narration; returns the height. */
static double prose_step(prose *pr, const ts_lesson_page *p, double x, double y, double w) {
    const ts_lesson_step *st = p->st;
    double y0 = y;
    /* A heading that opens the narration is drawn as the title with its
     * markup ($√d_k$ stays a formula); a `title:` key as plain text. */
    if (st->title[0] && !titled_by_heading(st)) {
        char *t = g_markup_escape_text(st->title, -1);
        y += prose_text(pr, t, false, true, pr->size * 1.25, x, y, w, PANGO_ALIGN_LEFT, INK) + pr->size * 0.9;
        g_free(t);
    }
    y += prose_narration(pr, &st->narration, 0, x, y, w);
    return y - y0;
}

/* The introduction on the first page, then the step's title and narration. */
static double prose_page(prose *pr, const ts_lesson_page *p, double x, double y, double w) {
    double h = prose_intro(pr, p, x, y, w);
    return h + prose_step(pr, p, x, y + h, w);
}

/* ---- the page ------------------------------------------------------------------------------- */

#define HEADER_H 50.0

static void draw_header(cairo_t *cr, const ts_lesson_page *p, double w) {
    const ts_lesson *l = p->r->lesson;
    fill_rect(cr, (ts_render_rect){0, 0, w, HEADER_H}, PANEL_BG);
    set_rgb(cr, RULE);
    cairo_rectangle(cr, 0, HEADER_H - 1, w, 1);
    cairo_fill(cr);
    char counter[64];
    snprintf(counter, sizeof counter, "step %d / %d", p->step + 1, p->n_steps);
    double cw = 170;
    pen_text(cr, counter, 17, true, ACCENT, w - 22, 14, 0, 1);
    char *title = g_markup_escape_text(l->title, -1);
    char buf[600];
    int num = ts_lesson_number(l->path);
    if (num > 0) snprintf(buf, sizeof buf, "<span foreground=\"#6b7280\">Lesson %d</span>   %s", num, title);
    else snprintf(buf, sizeof buf, "%s", title);
    g_free(title);
    pen_text(cr, buf, 18, true, INK, 22, 13, w - 44 - cw, 0);
}

ts_status ts_lesson_page_draw(ts_lesson_page *p, cairo_t *cr, double w, double h) {
    cairo_save(cr);
    fill_rect(cr, (ts_render_rect){0, 0, w, h}, PAPER);
    draw_header(cr, p, w);
    double col_w = fmin(560, fmax(360, w * 0.31));
    ts_render_rect text = {0, HEADER_H, col_w, h - HEADER_H};
    fill_rect(cr, text, PANEL_BG);
    set_rgb(cr, RULE);
    cairo_rectangle(cr, col_w - 1, HEADER_H, 1, h - HEADER_H);
    cairo_fill(cr);
    /* The largest text size at which the narration fits its column. */
    double pad = 24, size = 16;
    for (; size > 10.5; size -= 0.5) {
        prose pr;
        prose_init(&pr, cr, size, false);
        double need = prose_page(&pr, p, pad, HEADER_H + pad, col_w - 2 * pad);
        prose_free(&pr);
        if (need <= h - HEADER_H - 2 * pad) break;
    }
    cairo_save(cr);
    cairo_rectangle(cr, text.x, text.y, text.w, text.h);
    cairo_clip(cr);
    prose pr;
    prose_init(&pr, cr, size, true);
    prose_page(&pr, p, pad, HEADER_H + pad, col_w - 2 * pad);
    prose_free(&pr);
    cairo_restore(cr);
    /* The view, with a line under it for what it could not show. */
    ts_render_rect view = {col_w + 16, HEADER_H + 12, w - col_w - 32, h - HEADER_H - 24};
    double note_h = 22;
    ts_render_rect inner = view;
    inner.h -= note_h;
    ts_status st = draw_views(cr, p, inner);
    if (st) {
        cairo_restore(cr);
        return st;
    }
    if (p->note[0]) {
        char buf[700];
        char *esc = g_markup_escape_text(p->note, -1);
        snprintf(buf, sizeof buf, "<i>Not shown: %s</i>", esc);
        g_free(esc);
        pen_text(cr, buf, 12, false, MUTED, view.x + 4, view.y + view.h - note_h + 4, view.w - 8, 0);
    }
    cairo_restore(cr);
    return cairo_status(cr) == CAIRO_STATUS_SUCCESS
               ? TS_OK
               : ts_fail(TS_ERR_NOMEM, "lesson: drawing failed: %s", cairo_status_to_string(cairo_status(cr)));
}

/* What the view draws, for ts_lesson_page_check_quotes: the views drawn into a
 * recording surface with a probe that keeps their text (the probe set before,
 * a text log, is put back and sees none of it). */
static void keep_text(void *ctx, const ts_render_text_info *t) {
    ts_text_buf *b = ctx;
    ts_text_buf_str(b, t->text);
    ts_text_buf_str(b, "\n");
}

ts_status ts_lesson_page_view_text(ts_lesson_page *p, double scale, char **out) {
    *out = NULL;
    ts_text_buf b = {0};
    cairo_surface_t *s = cairo_recording_surface_create(CAIRO_CONTENT_COLOR, NULL);
    cairo_t *cr = cairo_create(s);
    cairo_scale(cr, scale, scale); /* small text is left out below 9 device pixels: draw at the page's scale */
    ts_render_text_probe fn;
    void *ctx;
    ts_render_get_text_probe(&fn, &ctx);
    ts_render_set_text_probe(keep_text, &b);
    char saved[sizeof p->note];
    memcpy(saved, p->note, sizeof saved);
    double w = TS_LESSON_PAGE_W, col_w = fmin(560, fmax(360, w * 0.31));
    ts_render_rect view = {col_w + 16, HEADER_H + 12, w - col_w - 32, TS_LESSON_PAGE_H - HEADER_H - 24 - 22};
    ts_status st = draw_views(cr, p, view);
    memcpy(p->note, saved, sizeof saved);
    ts_render_set_text_probe(fn, ctx);
    cairo_destroy(cr);
    cairo_surface_destroy(s);
    if (!st && b.oom) st = ts_fail(TS_ERR_NOMEM, "lesson: out of memory");
    if (st) {
        free(b.s);
        return st;
    }
    *out = ts_text_buf_take(&b);
    return *out ? TS_OK : ts_fail(TS_ERR_NOMEM, "lesson: out of memory");
}

/* ---- export ------------------------------------------------------------------------------------ */

static ts_status draw_page(void *ctx, cairo_t *cr, double w, double h) {
    return ts_lesson_page_draw(ctx, cr, w, h);
}

static ts_status write_page(const ts_lessonrun *r, int step, const char *path, ts_figure_format format, double scale) {
    ts_lesson_page *p;
    ts_status st = ts_lesson_page_build(&p, r, step);
    if (st) return st;
    char title[400];
    snprintf(title, sizeof title, "%s, step %d", r->lesson->title, step + 1);
    ts_figure_spec spec = {.format = format, .width = TS_LESSON_PAGE_W, .height = TS_LESSON_PAGE_H, .scale = scale,
                           .title = title};
    st = ts_figure_write(path, &spec, draw_page, p);
    if (st && step >= 0) {
        /* a drawing failure is the step's: say where it is */
        const char *msg = ts_last_error();
        if (!strstr(msg, ".md:")) {
            char copy[1024];
            snprintf(copy, sizeof copy, "%s", msg);
            st = ts_lesson_fail_at(r->lesson, r->lesson->steps[step].line, "%s", copy);
        }
    }
    ts_lesson_page_free(p);
    return st;
}

ts_status ts_lesson_export(const ts_lessonrun *r, const char *dir, ts_figure_format format, double scale,
                           int *written) {
    if (written) *written = 0;
    if (!(scale > 0 && scale <= 8)) return ts_fail(TS_ERR_ARG, "lesson: scale %g must be in (0, 8]", scale);
    /* Every page first, so a lesson with a step that cannot be drawn writes
     * nothing at all. */
    for (int i = 0; i < r->lesson->n_steps; i++) {
        ts_lesson_page *p;
        ts_status st = ts_lesson_page_build(&p, r, i);
        if (st) return st;
        ts_lesson_page_free(p);
        TS_TRY(ts_lesson_page_check_quotes(r, i, NULL)); /* a quoted number the page does not show */
    }
    TS_TRY(ts_mkdir_p(dir)); /* `--export out/lesson-01` works in a fresh tree */
    for (int i = 0; i < r->lesson->n_steps; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/step%02d.%s", dir, i + 1, ts_figure_format_name(format));
        ts_status st = write_page(r, i, path, format, scale);
        if (st) return st;
        if (written) (*written)++;
    }
    return TS_OK;
}

/* ---- hand-outs ------------------------------------------------------------------------------- */

/* A hand-out page: the lesson's title and the step counter on a line, the
 * view, and the narration at a size read on paper (11 points, down to 10
 * when a step says much). Views are drawn as on a lesson page, at least 0.8
 * of their size (draw_pane), so their smallest labels stay above 8 points on
 * the printed sheet. Portrait paper: the view above the narration; slides:
 * the narration beside it, as on screen. */
static ts_status draw_handout_page(cairo_t *cr, ts_lesson_page *p, double w, double h, bool slides, bool intro_only,
                                   int page, int pages) {
    const double m = 36;
    fill_rect(cr, (ts_render_rect){0, 0, w, h}, PAPER);
    const ts_lesson *l = p->r->lesson;
    char *title = g_markup_escape_text(l->title, -1);
    char buf[640], counter[64];
    int num = ts_lesson_number(l->path);
    if (num > 0) snprintf(buf, sizeof buf, "<span foreground=\"#6b7280\">Lesson %d</span>   %s", num, title);
    else snprintf(buf, sizeof buf, "%s", title);
    g_free(title);
    if (intro_only) snprintf(counter, sizeof counter, "introduction");
    else snprintf(counter, sizeof counter, "step %d / %d", p->step + 1, p->n_steps);
    pen_text(cr, counter, 11, true, ACCENT, w - m, m - 6, 0, 1);
    /* the whole title, on as many lines as it takes */
    double th = pen_wrapped(cr, buf, 13, true, INK, m, m - 8, w - 2 * m - 90);
    double top = m - 8 + th + 6;
    set_rgb(cr, RULE);
    cairo_rectangle(cr, m, top, w - 2 * m, 0.75);
    cairo_fill(cr);
    top += 10;
    /* the lesson's file name, not where it sits on one machine */
    const char *base = strrchr(l->path, '/');
    snprintf(buf, sizeof buf, "%s \xc2\xb7 page %d of %d", base ? base + 1 : l->path, page, pages);
    char *foot = g_markup_escape_text(buf, -1);
    pen_text(cr, foot, 8, false, MUTED, m, h - m + 10, w - 2 * m, 0);
    g_free(foot);
    double bottom = h - m;
    if (intro_only) {
        prose pr;
        prose_init(&pr, cr, 11, true);
        prose_intro(&pr, p, m, top, w - 2 * m);
        prose_free(&pr);
        return cairo_status(cr) == CAIRO_STATUS_SUCCESS
                   ? TS_OK
                   : ts_fail(TS_ERR_NOMEM, "lesson: drawing failed: %s", cairo_status_to_string(cairo_status(cr)));
    }

    /* Portrait: the introduction (first page), the view, then the step's
     * narration, at 11 points down to 10; the view takes the height the text
     * leaves (the page is filled), at least 40% of it: below that the text
     * is cut, and said to be. Slides: the text in a column beside the view. */
    ts_render_rect fig, text;
    double size = 11, intro_h = 0, gap = 14;
    if (slides) {
        bool fits = false;
        for (int k = 0; k < 3 && !fits; k++) {
            double col = (w - 2 * m) * (0.34 + 0.06 * k);
            text = (ts_render_rect){m, top, col, bottom - top};
            fig = (ts_render_rect){m + col + 18, top, w - 2 * m - col - 18, bottom - top};
            for (size = 11; size >= 10 && !fits; size -= 0.5) {
                prose pr;
                prose_init(&pr, cr, size, false);
                fits = prose_page(&pr, p, text.x, text.y, text.w) <= text.h;
                prose_free(&pr);
            }
            size += 0.5;
        }
    } else {
        double avail = bottom - top, step_h = 0;
        for (size = 11; size >= 10; size -= 0.5) {
            prose pr;
            prose_init(&pr, cr, size, false);
            intro_h = prose_intro(&pr, p, m, top, w - 2 * m);
            step_h = prose_step(&pr, p, m, top, w - 2 * m);
            prose_free(&pr);
            if (avail - intro_h - step_h - gap >= 0.4 * avail) break;
        }
        if (size < 10) size = 10;
        double fh = fmax(floor(avail - intro_h - step_h - gap), floor(0.4 * avail));
        fig = (ts_render_rect){m, top + intro_h, w - 2 * m, fh};
        text = (ts_render_rect){m, fig.y + fh + gap, w - 2 * m, bottom - fig.y - fh - gap};
    }
    ts_render_rect inner = fig;
    inner.h -= 16;
    /* a view's smallest text (8.4 units in a histogram's ticks) at 0.8 of its size
     * would print under 7 points: a quarter larger keeps it above 8 */
    double fs = ts_render_font_scale();
    ts_render_set_font_scale(fs * 1.25);
    ts_status st = draw_views(cr, p, inner);
    ts_render_set_font_scale(fs);
    if (st) return st;
    if (p->note[0]) {
        char *esc = g_markup_escape_text(p->note, -1);
        snprintf(buf, sizeof buf, "<i>Not shown: %s</i>", esc);
        g_free(esc);
        pen_text(cr, buf, 8.5, false, MUTED, fig.x, fig.y + fig.h - 13, fig.w, 0);
    }
    prose pr;
    prose_init(&pr, cr, size, true);
    if (!slides) prose_intro(&pr, p, m, top, w - 2 * m); /* above the view, in the height measured for it */
    cairo_save(cr);
    cairo_rectangle(cr, text.x, text.y, text.w, text.h);
    cairo_clip(cr);
    if (slides) prose_page(&pr, p, text.x, text.y, text.w);
    else prose_step(&pr, p, text.x, text.y, text.w);
    cairo_restore(cr);
    prose_free(&pr);
    return cairo_status(cr) == CAIRO_STATUS_SUCCESS
               ? TS_OK
               : ts_fail(TS_ERR_NOMEM, "lesson: drawing failed: %s", cairo_status_to_string(cairo_status(cr)));
}

/* Whether the introduction goes on a page of its own: when, above the first
 * step's view and under it that step's narration, it would leave the view
 * less than half the page's height (the page's text at 11 points, the size
 * draw_handout_page keeps while the view gets 40% of the page). */
#define HANDOUT_FIGURE_MIN 0.5
static bool handout_intro_alone(cairo_t *cr, const ts_lesson_page *p, double w, double h) {
    const double m = 36, header = 40; /* the margins; the title's line and its rule, about */
    if (!p->r->lesson->intro.n_blocks) return false;
    double avail = h - 2 * m - header;
    prose pr;
    prose_init(&pr, cr, 11, false);
    double intro_h = prose_intro(&pr, p, m, 0, w - 2 * m), step_h = prose_step(&pr, p, m, 0, w - 2 * m);
    prose_free(&pr);
    return avail - intro_h - step_h - 14 < HANDOUT_FIGURE_MIN * avail;
}

static cairo_status_t handout_write(void *closure, const unsigned char *data, unsigned int length) {
    return ts_outfile_write(closure, data, length) == TS_OK ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

bool ts_lesson_handout_from_name(const char *name, ts_lesson_handout *out) {
    static const char *const names[] = {"a4", "letter", "slides"};
    for (int i = 0; name && i < 3; i++)
        if (strcmp(name, names[i]) == 0) {
            *out = (ts_lesson_handout)i;
            return true;
        }
    return false;
}

ts_status ts_lesson_handout_write(const ts_lessonrun *r, const char *path, ts_lesson_handout paper, int *pages_out) {
    /* points: ISO A4 and US letter, portrait; slides 16:9 */
    static const double sizes[3][2] = {{595.276, 841.89}, {612, 792}, {960, 540}};
    if ((unsigned)paper > TS_LESSON_HANDOUT_SLIDES) return ts_fail(TS_ERR_ARG, "lesson: unknown hand-out paper");
    double w = sizes[paper][0], h = sizes[paper][1];
    int n = r->lesson->n_steps;
    /* Every page built first, so a step that cannot be drawn writes nothing. */
    for (int i = 0; i < n; i++) {
        ts_lesson_page *p;
        ts_status st = ts_lesson_page_build(&p, r, i);
        if (st) return st;
        ts_lesson_page_free(p);
    }
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return ts_fail(TS_ERR_IO, "cannot write %s: it is a directory", path);
    ts_outfile file;
    ts_status st = ts_outfile_open(&file, path);
    if (st) return st;
    cairo_surface_t *surf = cairo_pdf_surface_create_for_stream(handout_write, &file, w, h);
    cairo_pdf_surface_set_metadata(surf, CAIRO_PDF_METADATA_CREATOR, "tscope");
    cairo_pdf_surface_set_metadata(surf, CAIRO_PDF_METADATA_TITLE, r->lesson->title);
    cairo_t *cr = cairo_create(surf);
    bool slides = paper == TS_LESSON_HANDOUT_SLIDES;
    /* A long introduction on the first page of portrait paper leaves the first
     * figure too little height (lesson 18's loss plot came out 25 points tall
     * under its legend and caption): it then gets a page of its own. */
    int intro_pages = 0;
    if (!slides) {
        ts_lesson_page *p;
        st = ts_lesson_page_build(&p, r, 0);
        if (st) {
            cairo_destroy(cr);
            cairo_surface_destroy(surf);
            ts_outfile_abort(&file);
            return st;
        }
        intro_pages = handout_intro_alone(cr, p, w, h) ? 1 : 0;
        ts_lesson_page_free(p);
    }
    int pages = n + intro_pages;
    for (int i = -intro_pages; i < n && !st; i++) {
        ts_lesson_page *p;
        st = ts_lesson_page_build(&p, r, i < 0 ? 0 : i);
        if (!st) {
            char what[4200];
            snprintf(what, sizeof what, "%s, page %d", path, i + 1 + intro_pages);
            p->intro_elsewhere = intro_pages > 0 && i >= 0;
            ts_render_clips_begin();
            st = draw_handout_page(cr, p, w, h, slides, i < 0, i + 1 + intro_pages, pages);
            if (!st) st = ts_render_clips_check(what); /* a cut title or label: a warning, or under tests an error */
            else ts_render_clips_end(NULL, 0);
        }
        if (st && !strstr(ts_last_error(), ".md:")) {
            char copy[1024];
            snprintf(copy, sizeof copy, "%s", ts_last_error());
            st = ts_lesson_fail_at(r->lesson, r->lesson->steps[i < 0 ? 0 : i].line, "%s", copy);
        }
        ts_lesson_page_free(p);
        if (!st) cairo_show_page(cr);
    }
    cairo_destroy(cr);
    cairo_surface_finish(surf);
    cairo_status_t cs = cairo_surface_status(surf);
    cairo_surface_destroy(surf);
    if (!st && cs != CAIRO_STATUS_SUCCESS) st = ts_fail(TS_ERR_IO, "cannot write %s: %s", path, cairo_status_to_string(cs));
    if (st) {
        ts_outfile_abort(&file);
        return st;
    }
    if (pages_out) *pages_out = pages;
    return ts_outfile_commit(&file);
}

/* ---- the figure alone (tscope site) ------------------------------------------------------------ */

ts_status ts_lesson_page_draw_figure(ts_lesson_page *p, cairo_t *cr, double w, double h) {
    cairo_save(cr);
    fill_rect(cr, (ts_render_rect){0, 0, w, h}, PAPER);
    /* the site's figure is narrow: a zoom's two tables of numbers go one above the other, their cells stretched */
    p->narrow = true;
    ts_status st = draw_views_stacked(cr, p, (ts_render_rect){8, 8, w - 16, h - 16}, p->st->zoomed);
    p->narrow = false;
    cairo_restore(cr);
    if (st) return st;
    return cairo_status(cr) == CAIRO_STATUS_SUCCESS
               ? TS_OK
               : ts_fail(TS_ERR_NOMEM, "lesson: drawing failed: %s", cairo_status_to_string(cairo_status(cr)));
}

void ts_lesson_page_caption(const ts_lesson_page *p, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < p->n_views && n + 1 < cap; i++) {
        const pane *v = &p->view[i];
        const ts_trace_step *s = v->sc ? ts_scene_step(v->sc) : NULL;
        int k;
        if (s) {
            char shape[128] = "";
            size_t m = 0;
            for (int d = 0; d < s->rank && m + 24 < sizeof shape; d++)
                m += (size_t)snprintf(shape + m, sizeof shape - m, "%s%lld", d ? ", " : "", (long long)s->shape[d]);
            k = snprintf(buf + n, cap - n, "%s%s%s%s: %s (%s, shape [%s])", i ? "; beside it, " : "",
                         v->label[0] ? v->label : "", v->label[0] ? ", " : "", ts_scene_view_name(v->sc), s->name,
                         ts_op_name(s->op), shape);
        } else {
            k = snprintf(buf + n, cap - n, "%s%s: %s", i ? "; beside it, " : "",
                         v->layer_plot ? "statistics layer by layer" : ts_scene_view_name(v->sc),
                         v->layer_plot ? v->title : v->name);
        }
        if (k < 0) break;
        n += (size_t)k < cap - n ? (size_t)k : cap - n - 1;
    }
    if (p->note[0] && n + 1 < cap) snprintf(buf + n, cap - n, ". Not shown: %s", p->note);
}
