/* viewer_draw: one frame of the viewer, painted from the state alone.
 *
 * The frame is the step list on the left, the current step's view in the
 * centre (drawn by a ts_scene, the code `tscope png` uses), the
 * snapshot slider under it for training traces, the status bar at the
 * bottom and, on '?', the help overlay. Nothing here changes the state: what
 * the next update needs to know about the picture (where the cells landed)
 * goes to the ts_view_frame the caller passes.
 */
#include <math.h>
#include <pango/pangocairo.h>
#include <stdio.h>
#include <string.h>

#include "tscope/render.h"
#include "viewer_internal.h"

/* ---- colours and text --------------------------------------------------------- */

typedef struct rgb {
    double r, g, b;
} rgb;

static const rgb INK = {0.13, 0.14, 0.16};
static const rgb MUTED = {0.42, 0.45, 0.50};
static const rgb LIST_BG = {0.955, 0.96, 0.97};
static const rgb LAYER_BG = {0.905, 0.915, 0.935};
static const rgb CURRENT_BG = {0.84, 0.90, 0.99};
static const rgb ACCENT = {0.16, 0.42, 0.85};
static const rgb RULE = {0.80, 0.82, 0.86};
static const rgb STATUS_BG = {0.15, 0.17, 0.20};
static const rgb STATUS_INK = {0.93, 0.94, 0.96};
static const rgb STATUS_MUTED = {0.66, 0.70, 0.76};
static const rgb WARN = {1.0, 0.62, 0.20};

static void set_rgb(cairo_t *cr, rgb c) { cairo_set_source_rgb(cr, c.r, c.g, c.b); }

static void fill_rect(cairo_t *cr, double x, double y, double w, double h, rgb c) {
    set_rgb(cr, c);
    cairo_rectangle(cr, x, y, w, h);
    cairo_fill(cr);
}

enum { SANS = 0, BOLD = 1, MONO = 2 };

/* One pango layout and three fonts for the whole frame. */
typedef struct pen {
    cairo_t *cr;
    PangoLayout *layout;
    PangoFontDescription *font[3];
    /* Where text too long for its room is cut: the middle keeps the end of
     * a step's name; the status bar is cut at the end. */
    PangoEllipsizeMode cut;
} pen;

static void pen_init(pen *p, cairo_t *cr) {
    p->cr = cr;
    p->layout = ts_render_text_layout(cr);
    p->cut = PANGO_ELLIPSIZE_MIDDLE;
    const char *families[3] = {"DejaVu Sans", "DejaVu Sans", "DejaVu Sans Mono"};
    for (int i = 0; i < 3; i++) {
        p->font[i] = pango_font_description_from_string(families[i]);
        if (i == BOLD) pango_font_description_set_weight(p->font[i], PANGO_WEIGHT_BOLD);
    }
}

static void pen_free(pen *p) {
    for (int i = 0; i < 3; i++) pango_font_description_free(p->font[i]);
    g_object_unref(p->layout);
}

static void pen_set(pen *p, const char *text, int font, double size, double max_w) {
    pango_font_description_set_absolute_size(p->font[font], size * PANGO_SCALE);
    pango_layout_set_font_description(p->layout, p->font[font]);
    pango_layout_set_width(p->layout, max_w > 0 ? (int)(max_w * PANGO_SCALE) : -1);
    pango_layout_set_ellipsize(p->layout, max_w > 0 ? p->cut : PANGO_ELLIPSIZE_NONE);
    pango_layout_set_text(p->layout, text, -1);
}

static double text_width(pen *p, const char *text, int font, double size) {
    pen_set(p, text, font, size, 0);
    int w, h;
    pango_layout_get_size(p->layout, &w, &h);
    return (double)w / PANGO_SCALE;
}

/* Draw text with its left edge at x (right edge when right), vertically
 * centred on y, cut with an ellipsis beyond max_w (0: no limit). Returns the
 * width drawn. */
static double text_at(pen *p, const char *text, int font, double size, rgb c, double x, double y, double max_w,
                      bool right) {
    pen_set(p, text, font, size, max_w);
    int w, h;
    pango_layout_get_size(p->layout, &w, &h);
    double tw = (double)w / PANGO_SCALE, th = (double)h / PANGO_SCALE;
    set_rgb(p->cr, c);
    cairo_move_to(p->cr, right ? x - tw : x, y - th / 2);
    ts_render_show_layout(p->cr, p->layout);
    return tw;
}

/* ---- numbers --------------------------------------------------------------------- */

static void fmt_num(char *buf, size_t n, double v) {
    double a = fabs(v);
    if (v == 0)
        snprintf(buf, n, "0");
    else if (a >= 1e4 || a < 1e-3)
        snprintf(buf, n, "%.3g", v);
    else
        snprintf(buf, n, "%.4g", v);
}

static void fmt_shape(char *buf, size_t n, const ts_view_entry *e) {
    ts_shape_format(buf, n, e->rank, e->shape, TS_SHAPE_PLAIN);
}

/* "[30, 8, 200, 64]" -> "[30,8,200,64]" in place. */
static void compact_shape(char *buf) {
    char *w = buf;
    for (const char *r = buf; *r; r++)
        if (*r != ' ') *w++ = *r;
    *w = '\0';
}

/* ---- the list --------------------------------------------------------------------- */

static void draw_list_row(pen *p, const ts_view_state *st, const ts_view_steps *s, const ts_view_geometry *g,
                          const ts_view_row *row, double y) {
    cairo_t *cr = p->cr;
    ts_render_rect l = g->list;
    double h = g->row_h, mid = y + h / 2, x = l.x + 10, right = l.x + l.w - 12;
    const ts_view_entry *e = &s->entry[row->step];
    char buf[160];
    if (row->kind == TS_VIEW_ROW_LAYER) {
        fill_rect(cr, l.x, y + 1, l.w, h - 2, LAYER_BG);
        snprintf(buf, sizeof buf, "%d step%s", row->count, row->count == 1 ? "" : "s");
        double cw = text_at(p, buf, SANS, 11, MUTED, right, mid, 0, true);
        snprintf(buf, sizeof buf, "%s %s", row->open ? "\u25BE" : "\u25B8", s->layer_name[row->layer]);
        text_at(p, buf, BOLD, 12, INK, x, mid, right - cw - 10 - x, false);
        return;
    }
    if (row->kind == TS_VIEW_ROW_MODULE) {
        /* "self_attn", under the layer's header. */
        const char *m = s->module_name[row->module];
        size_t lp = strlen(s->layer_name[row->layer]);
        snprintf(buf, sizeof buf, "%d", row->count);
        double cw = text_at(p, buf, SANS, 10.5, MUTED, right, mid, 0, true);
        text_at(p, m + lp + (m[lp] == '.'), BOLD, 11.5, MUTED, x + 20, mid, right - cw - 10 - x - 20, false);
        fill_rect(cr, x + 20, y + h - 2, right - x - 20, 1, RULE);
        return;
    }
    bool current = row->step == st->current;
    if (current) {
        fill_rect(cr, l.x, y, l.w, h, CURRENT_BG);
        fill_rect(cr, l.x, y, 4, h, ACCENT);
    }
    snprintf(buf, sizeof buf, "%lld", (long long)row->step);
    text_at(p, buf, MONO, 11, MUTED, x + 38, mid, 0, true);
    const char *name = e->name;
    double nx = x + 46;
    /* Inside a layer (and a module) their headers say which; show the rest. */
    const char *prefix = row->module >= 0 ? s->module_name[row->module]
                         : row->layer >= 0 ? s->layer_name[row->layer]
                                           : NULL;
    if (prefix) {
        size_t lp = strlen(prefix);
        if (strncmp(name, prefix, lp) == 0 && name[lp] == '.') name += lp + 1;
        nx += row->module >= 0 ? 30 : 12;
    }
    int font = current ? BOLD : SANS;
    double name_w = text_width(p, name, font, 12);
    fmt_shape(buf, sizeof buf, e);
    /* The name matters more than the spaces in the shape. */
    if (name_w + text_width(p, buf, MONO, 11) + 10 > right - nx) compact_shape(buf);
    double sw = text_at(p, buf, MONO, 11, current ? INK : MUTED, right, mid, 0, true);
    rgb ink = e->has_values ? INK : MUTED;
    text_at(p, name, font, 12, ink, nx, mid, right - sw - 10 - nx, false);
}

static void draw_list(pen *p, const ts_view_state *st, const ts_view_steps *s, const ts_view_geometry *g) {
    /* A long name loses its start, never its middle: the layer number and the
     * step's own name are what tell two rows apart ("…layers.1.self_attn.weights"). */
    p->cut = PANGO_ELLIPSIZE_START;
    cairo_t *cr = p->cr;
    ts_render_rect l = g->list;
    fill_rect(cr, l.x, l.y, l.w, l.h, LIST_BG);
    fill_rect(cr, l.x + l.w - 1, l.y, 1, l.h, RULE);
    char buf[96];
    text_at(p, "Steps", BOLD, 14, INK, l.x + 10, l.y + TS_VIEW__LIST_HEAD / 2, 0, false);
    if (s->n_snapshots > 1)
        snprintf(buf, sizeof buf, "%lld in snapshot %d of %d",
                 (long long)(s->snapshot_start[s->entry[st->current].snapshot + 1] -
                             s->snapshot_start[s->entry[st->current].snapshot]),
                 s->entry[st->current].snapshot + 1, s->n_snapshots);
    else
        snprintf(buf, sizeof buf, "%lld in the trace", (long long)s->n);
    text_at(p, buf, SANS, 11, MUTED, l.x + l.w - 12, l.y + TS_VIEW__LIST_HEAD / 2, 0, true);
    fill_rect(cr, l.x, l.y + TS_VIEW__LIST_HEAD - 1, l.w - 1, 1, RULE);
    cairo_save(cr);
    cairo_rectangle(cr, l.x, l.y + TS_VIEW__LIST_HEAD, l.w - 1, l.h - TS_VIEW__LIST_HEAD);
    cairo_clip(cr);
    for (int k = 0; k < g->list_rows && st->list_top + k < st->n_rows; k++)
        draw_list_row(p, st, s, g, &st->rows[st->list_top + k], l.y + TS_VIEW__LIST_HEAD + k * g->row_h);
    cairo_restore(cr);
    /* Where the rows shown lie among all of them. */
    if (st->n_rows > g->list_rows) {
        double top = l.y + TS_VIEW__LIST_HEAD, span = l.h - TS_VIEW__LIST_HEAD;
        double y0 = top + span * st->list_top / st->n_rows, hh = span * g->list_rows / st->n_rows;
        fill_rect(cr, l.x + l.w - 6, y0, 4, hh, RULE);
    }
}

/* ---- the centre --------------------------------------------------------------------- */

/* The scene request for what the state shows: the step by name and record,
 * the head when one is open (attention and per-head steps only), the batch
 * element (the one kept, when the trace kept one). */
static ts_scene_request request_of(const ts_view_state *st, const ts_view_steps *s) {
    const ts_view_entry *e = &s->entry[st->current];
    ts_scene_request rq = ts_scene_request_default(e->name);
    rq.occurrence = e->occurrence;
    rq.mark_occurrence = true; /* a training curve shows where the current snapshot is */
    int heads = ts_view_heads(e);
    rq.head = st->head >= 0 && st->head < heads ? st->head : -1;
    int batches = ts_view_batches(e);
    rq.batch = batches > 0 && st->batch < batches ? st->batch : 0;
    if (e->has_values && e->batch_index >= 0) rq.batch = e->batch_index;
    return rq;
}

/* The scene of the current step. A step that kept no values cannot be
 * drawn: then the shapes of its module, with the reason in *why. */
static ts_scene *scene_of(const ts_view_state *st, const ts_view_steps *s, ts_trace *t, char *why, size_t n) {
    ts_scene_request rq = request_of(st, s);
    ts_scene *sc = NULL;
    why[0] = '\0';
    if (ts_scene_build(&sc, t, &rq) == TS_OK) return sc;
    snprintf(why, n, "%s", ts_last_error());
    rq.view = TS_RENDER_VIEW_SHAPES;
    if (ts_scene_build(&sc, t, &rq) == TS_OK) return sc;
    return NULL;
}

/* A strip across the top of r saying why the step is not drawn. */
static double draw_banner(pen *p, ts_render_rect r, const char *why) {
    cairo_t *cr = p->cr;
    pen_set(p, why, SANS, 12.5, r.w - 48);
    pango_layout_set_ellipsize(p->layout, PANGO_ELLIPSIZE_NONE);
    pango_layout_set_wrap(p->layout, PANGO_WRAP_WORD_CHAR);
    int w, h;
    pango_layout_get_size(p->layout, &w, &h);
    double bh = (double)h / PANGO_SCALE + 20;
    fill_rect(cr, r.x, r.y, r.w, bh, (rgb){1.0, 0.95, 0.85});
    fill_rect(cr, r.x, r.y + bh - 1, r.w, 1, WARN);
    set_rgb(cr, INK);
    cairo_move_to(cr, r.x + 24, r.y + 10);
    ts_render_show_layout(cr, p->layout);
    pango_layout_set_wrap(p->layout, PANGO_WRAP_WORD);
    return bh;
}

static void draw_centre(pen *p, const ts_view_state *st, const ts_view_steps *s, ts_scene *sc,
                        const char *why, const ts_view_geometry *g, ts_view_frame *out) {
    cairo_t *cr = p->cr;
    ts_render_rect c = g->centre;
    for (int i = 0; i < TS_RENDER_MAX_PANELS; i++) out->panel_head[i] = -1;
    cairo_save(cr);
    cairo_rectangle(cr, c.x, c.y, c.w, c.h);
    cairo_clip(cr);
    fill_rect(cr, c.x, c.y, c.w, c.h, (rgb){1, 1, 1});
    if (why[0]) {
        double bh = draw_banner(p, c, why);
        c.y += bh;
        c.h -= bh;
    }
    ts_status status = sc ? ts_scene_draw(sc, cr, c, &st->cells, &out->layout) : TS_ERR_ARG;
    cairo_restore(cr);
    if (status != TS_OK) {
        memset(&out->layout, 0, sizeof out->layout);
        if (!why[0]) draw_banner(p, g->centre, ts_last_error());
        return;
    }
    /* A grid of all heads: panel i is head i, and a click opens it. */
    const ts_render_matrix *m0 = ts_scene_matrix(sc, 0);
    if (m0 && ts_scene_view(sc) == TS_RENDER_VIEW_GRID && ts_view_heads(&s->entry[st->current]) > 0)
        for (int i = 0; i < out->layout.n_panels; i++) out->panel_head[i] = i;
}

/* ---- the slider ------------------------------------------------------------------------ */

/* The value of `train.step` in snapshot k (docs/training.md), NaN when the
 * trace has none. */
static double training_step(const ts_view_steps *s, ts_trace *t, int k) {
    for (int64_t i = s->snapshot_start[k]; i < s->snapshot_start[k + 1]; i++) {
        if (strcmp(s->entry[i].name, "train.step") != 0) continue;
        const float *v;
        const ts_trace_step *ts = ts_trace_step_at(t, i);
        if (ts && ts->values_count == 1 && ts_trace_values(t, i, &v) == TS_OK) return v[0];
        break;
    }
    return NAN;
}

static void draw_slider(pen *p, const ts_view_state *st, const ts_view_steps *s, ts_trace *t,
                        const ts_view_geometry *g) {
    if (s->n_snapshots <= 1) return;
    cairo_t *cr = p->cr;
    ts_render_rect r = g->slider;
    fill_rect(cr, r.x, r.y, r.w, r.h, LIST_BG);
    fill_rect(cr, r.x, r.y, r.w, 1, RULE);
    int k = s->entry[st->current].snapshot, n = s->n_snapshots;
    char buf[64];
    snprintf(buf, sizeof buf, "snapshot %d / %d", k + 1, n);
    /* A training trace says which step each snapshot was taken at. */
    double step = training_step(s, t, k);
    bool has_step = !isnan(step);
    text_at(p, buf, BOLD, 12, INK, r.x + 12, r.y + r.h / 2 - (has_step ? 7 : 0), TS_VIEW__SLIDER_LABEL - 20, false);
    if (has_step) {
        snprintf(buf, sizeof buf, "training step %.0f", step);
        text_at(p, buf, SANS, 10.5, MUTED, r.x + 12, r.y + r.h / 2 + 8, TS_VIEW__SLIDER_LABEL - 20, false);
    }
    ts_render_rect tr = ts_view__slider_track(g);
    fill_rect(cr, tr.x, tr.y, tr.w, tr.h, RULE);
    double kx = tr.x + tr.w * k / (n - 1);
    fill_rect(cr, tr.x, tr.y, kx - tr.x, tr.h, ACCENT);
    if (n <= 60)
        for (int i = 0; i < n; i++) fill_rect(cr, tr.x + tr.w * i / (n - 1) - 0.5, tr.y + tr.h + 2, 1, 4, MUTED);
    set_rgb(cr, ACCENT);
    cairo_arc(cr, kx, tr.y + tr.h / 2, 8, 0, 2 * M_PI);
    cairo_fill(cr);
}

/* ---- the status bar ----------------------------------------------------------------------- */

static const char *KEY_HELP =
    "\u2190\u2192 step  PgUp/PgDn module  \u2191\u2193 layer  1-9 head  0 all  b/B batch  / find  e export  ? help  q quit";

/* The text of the hovered cell: "query 2 'is' → key 1 'name' = 0.4312". */
static bool hover_text(const ts_view_state *st, const ts_view_steps *s, const ts_scene *sc, char *buf, size_t n) {
    if (!st->hover || !sc) return false;
    const ts_render_matrix *m = ts_scene_matrix(sc, st->cells.hl_panel);
    int r = st->cells.hl_row, c = st->cells.hl_col;
    if (!m || r < 0 || c < 0 || r >= m->rows || c >= m->cols) return false;
    int64_t rs = m->row_stride ? m->row_stride : m->cols, cs = m->col_stride ? m->col_stride : 1;
    float v = m->values[(int64_t)r * rs + (int64_t)c * cs];
    bool masked = (m->mask && m->mask[(int64_t)r * m->cols + c]) || (isinf(v) && v < 0);
    bool attention = ts_view_heads(&s->entry[st->current]) > 0 && m->rows > 0;
    const char *ra = attention ? "query" : "row", *ca = attention ? "key" : "column";
    char head[32] = "", rl[96] = "", cl[96] = "", val[48];
    int panel_head = st->head >= 0 ? st->head : st->cells.hl_panel;
    if (attention) snprintf(head, sizeof head, "head %d   ", panel_head);
    if (m->row_labels && m->row_labels[r]) snprintf(rl, sizeof rl, " '%s'", m->row_labels[r]);
    if (m->col_labels && m->col_labels[c]) snprintf(cl, sizeof cl, " '%s'", m->col_labels[c]);
    if (masked)
        snprintf(val, sizeof val, "masked (%.6g)", (double)v);
    else
        snprintf(val, sizeof val, "%.6g", (double)v);
    snprintf(buf, n, "%s%s %d%s  \u2192  %s %d%s   =  %s", head, ra, r, rl, ca, c, cl, val);
    return true;
}

static void draw_status(pen *p, const ts_view_state *st, const ts_view_steps *s, ts_trace *t,
                        const ts_scene *sc, const ts_view_geometry *g) {
    cairo_t *cr = p->cr;
    ts_render_rect r = g->status;
    fill_rect(cr, r.x, r.y, r.w, r.h, STATUS_BG);
    double y1 = r.y + r.h * 0.28, y2 = r.y + r.h * 0.74, x = r.x + 12, right = r.x + r.w - 12;
    char buf[600], shape[TS_SHAPE_TEXT_MAX];
    const ts_trace_step *ts = ts_trace_step_at(t, st->current);
    if (!ts) return;
    const ts_view_entry *e = &s->entry[st->current];
    p->cut = PANGO_ELLIPSIZE_END;

    /* Line 1: which step, what it is, its numbers; warnings on the right. */
    double warn_w = 0;
    if (ts->has_stats && ts->op == TS_OP_MASK && !ts->stats.nan && ts->stats.inf) {
        /* a mask's −∞ are what it is for: counted, not flagged */
        snprintf(buf, sizeof buf, "%llu masked (\u2212\u221E)", (unsigned long long)ts->stats.inf);
        warn_w = text_at(p, buf, 0, 12, STATUS_MUTED, right, y1, 0, true) + 16;
    } else if (ts->has_stats && (ts->stats.nan || ts->stats.inf)) {
        snprintf(buf, sizeof buf, "\u26A0 %llu NaN, %llu Inf", (unsigned long long)ts->stats.nan,
                 (unsigned long long)ts->stats.inf);
        warn_w = text_at(p, buf, BOLD, 12, WARN, right, y1, 0, true) + 16;
    }
    snprintf(buf, sizeof buf, "#%lld", (long long)st->current);
    x += text_at(p, buf, MONO, 12, STATUS_MUTED, x, y1, 0, false) + 8;
    p->cut = PANGO_ELLIPSIZE_MIDDLE;
    x += text_at(p, ts->name, BOLD, 12.5, STATUS_INK, x, y1, fmax(120, (right - warn_w - x) * 0.45), false) + 12;
    p->cut = PANGO_ELLIPSIZE_END;
    ts_shape_format(shape, sizeof shape, ts->rank, ts->shape, TS_SHAPE_PLAIN);
    int n = snprintf(buf, sizeof buf, "%s  %s", ts_op_name(ts->op), shape);
    int heads = ts_view_heads(e), batches = ts_view_batches(e);
    if (heads > 0)
        n += snprintf(buf + n, sizeof buf - (size_t)n, "  %s",
                      st->head >= 0 && st->head < heads ? "" : "all heads");
    if (heads > 0 && st->head >= 0 && st->head < heads)
        n += snprintf(buf + n, sizeof buf - (size_t)n, "head %d of %d", st->head, heads);
    if (batches > 1 && ts->batch_index < 0)
        n += snprintf(buf + n, sizeof buf - (size_t)n, "  batch %d of %d", st->batch < batches ? st->batch : 0, batches);
    else if (ts->batch_index >= 0 && ts->has_values)
        n += snprintf(buf + n, sizeof buf - (size_t)n, "  batch %d (the one kept)", ts->batch_index);
    if (ts->has_stats) {
        char a[24], b[24], c[24], d[24];
        fmt_num(a, sizeof a, ts->stats.min);
        fmt_num(b, sizeof b, ts->stats.max);
        fmt_num(c, sizeof c, ts->stats.mean);
        fmt_num(d, sizeof d, ts->stats.std);
        snprintf(buf + n, sizeof buf - (size_t)n, "   min %s  max %s  mean %s  std %s", a, b, c, d);
    }
    text_at(p, buf, SANS, 12, STATUS_INK, x, y1, right - warn_w - x, false);

    /* Line 2: what is being typed, the hovered cell or the last message; the
     * keys on the right. */
    x = r.x + 12;
    double help_w = text_width(p, KEY_HELP, SANS, 11);
    bool show_help = help_w < r.w * 0.55;
    if (show_help) text_at(p, KEY_HELP, SANS, 11, STATUS_MUTED, right, y2, 0, true);
    double room = (show_help ? right - help_w - 20 : right) - x;
    if (st->mode == TS_VIEW_MODE_FIND) {
        /* what Enter would do, as the name is typed */
        int matches = ts_view_find_count(s, st->find, st->current);
        int64_t next = ts_view_find(s, st->find, st->current);
        if (!st->find[0])
            snprintf(buf, sizeof buf, "find: \u258F   type part of a name or a glob (Enter: go to it, Esc: cancel)");
        else if (matches == 0)
            snprintf(buf, sizeof buf, "find: %s\u258F   no step matches   (Esc: cancel)", st->find);
        else
            snprintf(buf, sizeof buf, "find: %s\u258F   %d match%s, Enter: %s   (Esc: cancel)", st->find, matches,
                     matches == 1 ? "" : "es", next >= 0 ? s->entry[next].name : "");
        text_at(p, buf, BOLD, 12, st->find[0] && matches == 0 ? WARN : (rgb){1, 1, 1}, x, y2, room, false);
    } else if (hover_text(st, s, sc, buf, sizeof buf)) {
        text_at(p, buf, MONO, 12, (rgb){1, 1, 1}, x, y2, room, false);
    } else if (st->message[0]) {
        text_at(p, st->message, SANS, 12, WARN, x, y2, room, false);
    } else if (!show_help) {
        text_at(p, "? for help", SANS, 11, STATUS_MUTED, x, y2, room, false);
    } else if (!ts->has_values) {
        text_at(p, "values not kept for this step", SANS, 11, STATUS_MUTED, x, y2, room, false);
    } else if (sc && ts_scene_matrix(sc, 0)) {
        text_at(p, "hover a cell for its value \u00B7 wheel: zoom \u00B7 drag: pan", SANS, 11, STATUS_MUTED, x, y2,
                room, false);
    }
    p->cut = PANGO_ELLIPSIZE_MIDDLE;
}

/* ---- help ------------------------------------------------------------------------------------ */

static const char *const HELP[][2] = {
    {"\u2190 / \u2192", "previous / next step"},
    {"PgUp / PgDn", "previous / next module (self_attn, norm1, ffn, ...)"},
    {"\u2191 / \u2193", "the same step in the layer above / below"},
    {"Home / End", "first / last step"},
    {"1 \u2026 9", "open head 0 \u2026 8 of an attention step"},
    {"0", "all heads side by side"},
    {"b / B", "next / previous batch element"},
    {"/", "find a step by name (part of it, or a glob), Enter to go"},
    {"[ / ]", "previous / next snapshot of a training trace"},
    {"{ / }", "ten snapshots back / on; click or drag the slider to go anywhere"},
    {"+ / - / z", "zoom in / out / reset"},
    {"e", "export the view to a PNG file"},
    {"?", "this help"},
    {"q / Esc", "quit"},
    {"mouse", "hover: row, column and exact value; click a head to open it;"},
    {"", "wheel: zoom; drag: pan; click a row of the list to go there"},
};

static void draw_help(pen *p, const ts_view_state *st) {
    cairo_t *cr = p->cr;
    int n = (int)(sizeof HELP / sizeof HELP[0]);
    double line = 24, w = fmin(640, st->width - 40), h = 70 + n * line;
    double x = (st->width - w) / 2, y = fmax(10, (st->height - h) / 2);
    cairo_set_source_rgba(cr, 0, 0, 0, 0.35);
    cairo_paint(cr);
    fill_rect(cr, x, y, w, h, (rgb){1, 1, 1});
    fill_rect(cr, x, y, w, 4, ACCENT);
    text_at(p, "tscope view: keys", BOLD, 16, INK, x + 24, y + 30, 0, false);
    for (int i = 0; i < n; i++) {
        double ly = y + 62 + i * line;
        text_at(p, HELP[i][0], BOLD, 12.5, INK, x + 24, ly, 0, false);
        text_at(p, HELP[i][1], SANS, 12.5, INK, x + 150, ly, w - 174, false);
    }
}

/* ---- the frame ----------------------------------------------------------------------------------- */

ts_status ts_view_draw(cairo_t *cr, const ts_view_state *st, const ts_view_steps *s, ts_trace *t,
                       ts_view_frame *out) {
    memset(out, 0, sizeof *out);
    ts_view_geometry g;
    ts_view_geometry_of(&g, st->width, st->height, s->n_snapshots > 1);
    pen p;
    pen_init(&p, cr);
    cairo_save(cr);
    set_rgb(cr, (rgb){1, 1, 1});
    cairo_paint(cr);
    if (s->n == 0) {
        text_at(&p, "This trace has no steps.", BOLD, 16, INK, 24, st->height / 2, 0, false);
    } else {
        /* One scene for the frame: the centre draws it, the status bar
         * reads the hovered value from it. */
        char why[1024];
        ts_scene *sc = scene_of(st, s, t, why, sizeof why);
        draw_centre(&p, st, s, sc, why, &g, out);
        draw_list(&p, st, s, &g);
        p.cut = PANGO_ELLIPSIZE_MIDDLE;
        draw_slider(&p, st, s, t, &g);
        draw_status(&p, st, s, t, sc, &g);
        if (st->help) draw_help(&p, st);
        ts_scene_free(sc);
    }
    cairo_restore(cr);
    pen_free(&p);
    out->drawn = true;
    return cairo_status(cr) == CAIRO_STATUS_SUCCESS
               ? TS_OK
               : ts_fail(TS_ERR_NOMEM, "view: drawing failed: %s", cairo_status_to_string(cairo_status(cr)));
}

ts_status ts_view_export_png(const ts_view_state *st, const ts_view_steps *s, ts_trace *t, double w, double h,
                             double scale, const char *path) {
    ts_scene_request rq = request_of(st, s);
    ts_scene *sc;
    ts_status status = ts_scene_build(&sc, t, &rq);
    if (status != TS_OK) return status;
    ts_png_out png;
    status = ts_png_open(&png, path);
    if (status != TS_OK) {
        ts_scene_free(sc);
        return status;
    }
    int pw = (int)lround(w * scale), ph = (int)lround(h * scale);
    cairo_surface_t *surf = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, pw, ph);
    cairo_t *cr = cairo_create(surf);
    cairo_scale(cr, scale, scale);
    /* Zoom and pan stay: the file shows what is on the screen. The hovered
     * cell's frame does not belong in a figure. */
    ts_render_state cells = st->cells;
    cells.highlight = false;
    ts_render_layout layout;
    status = ts_scene_draw(sc, cr, (ts_render_rect){0, 0, w, h}, &cells, &layout);
    cairo_destroy(cr);
    if (status == TS_OK)
        status = ts_png_commit(&png, surf);
    else
        ts_png_abort(&png);
    cairo_surface_destroy(surf);
    ts_scene_free(sc);
    return status;
}
