/* render_plot: line plots. Positional encoding curves, training curves and
 * the per-token statistics of a LayerNorm are all lines over an x axis. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render_internal.h"

#define MAX_TICKS 24

static double series_x(const ts_render_series *s, int i) { return s->x ? s->x[i] : i; }
static double series_y(const ts_render_series *s, int i) { return s->y[(int64_t)i * (s->y_stride ? s->y_stride : 1)]; }

typedef struct axis {
    double lo, hi;
    bool log;
} axis;

/* A value on an axis as a fraction of its length (log axes take log10). */
static double axis_t(const axis *a, double v) {
    if (a->log) v = log10(v);
    return (v - a->lo) / (a->hi - a->lo);
}

static bool usable(double v, bool log) { return isfinite(v) && (!log || v > 0); }

static void data_range(const ts_render_series *s, int n, const ts_render_plot_opts *o, axis *x, axis *y) {
    x->lo = y->lo = INFINITY;
    x->hi = y->hi = -INFINITY;
    x->log = false;
    y->log = o->log_y;
    for (int k = 0; k < n; k++)
        for (int i = 0; i < s[k].n; i++) {
            double xv = series_x(&s[k], i), yv = series_y(&s[k], i);
            if (!isfinite(xv) || !usable(yv, y->log)) continue;
            if (y->log) yv = log10(yv);
            x->lo = fmin(x->lo, xv);
            x->hi = fmax(x->hi, xv);
            y->lo = fmin(y->lo, yv);
            y->hi = fmax(y->hi, yv);
        }
    if (o->ref_label && usable(o->ref_y, y->log)) { /* the level line stays in sight */
        double ry = y->log ? log10(o->ref_y) : o->ref_y;
        y->lo = fmin(y->lo, ry);
        y->hi = fmax(y->hi, ry);
    }
    if (!(x->lo <= x->hi)) x->lo = 0, x->hi = 1;
    if (!(y->lo <= y->hi)) y->lo = 0, y->hi = 1;
    if (x->lo == x->hi) x->lo -= 0.5, x->hi += 0.5;
    if (o->y_from_zero && !y->log) {
        y->lo = fmin(y->lo, 0);
        y->hi = fmax(y->hi, 0);
    }
    if (y->lo == y->hi) {
        double d = fabs(y->lo) > 0 ? fabs(y->lo) * 0.1 : 1;
        y->lo -= d;
        y->hi += d;
    }
    /* Air above and below, so a line along the range's edge (beta = 0)
     * is not hidden by the frame. */
    double span = y->hi - y->lo;
    y->lo -= span * 0.06;
    y->hi += span * 0.06;
    /* Markers on the first and last points would be cut in half by the frame. */
    if (o->markers) {
        double xspan = x->hi - x->lo;
        x->lo -= xspan * 0.03;
        x->hi += xspan * 0.03;
    }
}

/* Tick values of a log axis in decades: 1, 10, 100 (and 2, 5 between when
 * the range is short). Values are returned as plain numbers. */
static int log_ticks(const axis *a, double *ticks) {
    int n = 0;
    int d0 = (int)floor(a->lo), d1 = (int)ceil(a->hi);
    bool fine = d1 - d0 <= 3;
    for (int d = d0; d <= d1 && n < MAX_TICKS - 3; d++) {
        static const double mult[] = {1, 2, 5};
        for (int k = 0; k < (fine ? 3 : 1); k++) {
            double v = mult[k] * pow(10, d);
            double lv = log10(v);
            if (lv >= a->lo - 1e-9 && lv <= a->hi + 1e-9) ticks[n++] = v;
        }
    }
    return n;
}

static int axis_ticks(const axis *a, int max_n, double *ticks, double *step) {
    if (a->log) {
        *step = 0;
        return log_ticks(a, ticks);
    }
    return ts_render__ticks(a->lo, a->hi, max_n, ticks, step);
}

static void tick_text(char *buf, size_t size, const axis *a, double v, double step) {
    if (a->log)
        ts_render__fmt_short(buf, size, v);
    else
        ts_render__fmt(buf, size, v, step);
}

/* Whether the labels of ticks[0, n) fit side by side in width w, with room
 * between them. */
static bool x_labels_fit(ts_render__pen *p, const axis *a, const double *ticks, int n, double step, double w,
                         const ts_render__font *font) {
    double total = 0, prev_w = 0;
    char buf[48];
    for (int i = 0; i < n; i++) {
        double lw;
        tick_text(buf, sizeof buf, a, ticks[i], step);
        ts_render__measure(p, buf, font, &lw, NULL);
        total += lw + 6;
        /* neighbours apart where they stand, not only on average ("100150" on a narrow plot) */
        if (i > 0 && (axis_t(a, ticks[i]) - axis_t(a, ticks[i - 1])) * w < (prev_w + lw) / 2 + 4) return false;
        prev_w = lw;
    }
    return total <= w;
}

/* Integer x positions named by the caller (tokens): ticks at those that fit. */
static int named_ticks(ts_render__pen *p, const ts_render_plot_opts *o, const axis *x, double plot_w,
                       const ts_render__font *f, double *ticks) {
    if (!o->x_tick_labels || o->n_x_tick_labels < 1) return -1;
    int lo = (int)ceil(x->lo), hi = (int)floor(x->hi);
    if (lo < 0) lo = 0;
    if (hi >= o->n_x_tick_labels) hi = o->n_x_tick_labels - 1;
    if (hi < lo || hi - lo > 60) return -1;
    double w_max = 0;
    for (int i = lo; i <= hi; i++) {
        double w;
        ts_render__measure(p, o->x_tick_labels[i] ? o->x_tick_labels[i] : "", f, &w, NULL);
        w_max = fmax(w_max, w);
    }
    double spacing = plot_w / (x->hi - x->lo);
    int k = ts_render__label_step(spacing, w_max + 8);
    while ((hi - lo) / k + 1 > MAX_TICKS) k++; /* every k-th label up to the last, never cut short */
    int n = 0;
    for (int i = lo; i <= hi && n < MAX_TICKS; i++)
        if (i % k == 0) ticks[n++] = i;
    return n;
}

/* Whether every x is a whole number (implicit x are indices). */
static bool integer_x(const ts_render_series *s, int n) {
    for (int k = 0; k < n; k++)
        for (int i = 0; s[k].x && i < s[k].n; i++)
            if (s[k].x[i] != floorf(s[k].x[i])) return false;
    return true;
}

static void legend_swatch(cairo_t *cr, double x, double y, ts_rgb c, bool dashed, bool points) {
    static const double dash[] = {5, 3};
    ts_render__set_rgb(cr, c);
    if (points) {
        for (int k = 0; k < 2; k++) {
            cairo_new_sub_path(cr);
            cairo_arc(cr, x + 5 + 12 * k, y, 3.6, 0, 2 * M_PI);
        }
        cairo_fill(cr);
        return;
    }
    cairo_set_line_width(cr, 2);
    cairo_set_dash(cr, dash, dashed ? 2 : 0, 0);
    cairo_move_to(cr, x, y);
    cairo_line_to(cr, x + 22, y);
    cairo_stroke(cr);
    cairo_set_dash(cr, NULL, 0, 0);
}

static double legend_width(ts_render__pen *p, const ts_render_series *s, int n, const ts_render__font *f) {
    double w_max = 0;
    for (int k = 0; k < n; k++) {
        double w;
        if (!s[k].label) continue;
        ts_render__measure(p, s[k].label, f, &w, NULL);
        w_max = fmax(w_max, w);
    }
    return w_max > 0 ? w_max + 22 + 6 + 14 : 0;
}

/* A legend too wide to sit beside a narrow plot goes above it, its entries
 * side by side on as many lines as they take: the height of those lines in
 * width w, drawn at (x, y) when draw. */
static double legend_above(ts_render__pen *p, const ts_render_series *s, int n, const ts_render__font *f, double x,
                           double y, double w, double label_h, bool draw) {
    /* an entry wider than the whole width wraps onto lines of its own */
    ts_render__font ef = *f;
    ef.max_w = fmax(w - 28, 40);
    ef.max_lines = 3;
    double at = 0, row_y = 0, row_h = 0;
    bool first = true;
    for (int k = 0; k < n; k++) {
        if (!s[k].label) continue;
        double tw, th;
        ts_render__measure(p, s[k].label, &ef, &tw, &th);
        th = fmax(th, label_h);
        double entry = 28 + tw + 14;
        if (first || (at > 0 && at + entry - 14 > w)) {
            if (!first) row_y += row_h + 4;
            first = false;
            at = 0;
            row_h = 0;
        }
        if (draw) {
            double ly = y + row_y + label_h / 2;
            legend_swatch(p->cr, x + at, ly, ts_render__palette(s[k].color >= 0 ? s[k].color : k), s[k].dashed,
                          s[k].points);
            ts_render__text(p, s[k].label, &ef, x + at + 28, y + row_y + th / 2, 0, 0.5, 0);
        }
        row_h = fmax(row_h, th);
        at += entry;
    }
    return first ? 0 : row_y + row_h + 4;
}

static void draw_series(cairo_t *cr, const ts_render_series *s, int k, const axis *x, const axis *y,
                        ts_render_rect plot, bool markers) {
    static const double dash[] = {6, 3.5};
    ts_rgb c = ts_render__palette(s->color >= 0 ? s->color : k);
    ts_render__set_rgb(cr, c);
    cairo_set_line_width(cr, 1.8);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    cairo_set_dash(cr, dash, s->dashed ? 2 : 0, 0);
    bool pen_down = false;
    for (int i = 0; i < s->n && !s->points; i++) {
        double xv = series_x(s, i), yv = series_y(s, i);
        if (!isfinite(xv) || !usable(yv, y->log)) {
            pen_down = false; /* a gap where the value is missing */
            continue;
        }
        double px = plot.x + axis_t(x, xv) * plot.w, py = plot.y + plot.h - axis_t(y, yv) * plot.h;
        if (pen_down)
            cairo_line_to(cr, px, py);
        else
            cairo_move_to(cr, px, py);
        pen_down = true;
    }
    cairo_stroke(cr);
    cairo_set_dash(cr, NULL, 0, 0);
    if (!markers && !s->points) return;
    for (int i = 0; i < s->n; i++) {
        double xv = series_x(s, i), yv = series_y(s, i);
        if (!isfinite(xv) || !usable(yv, y->log)) continue;
        double px = plot.x + axis_t(x, xv) * plot.w, py = plot.y + plot.h - axis_t(y, yv) * plot.h;
        cairo_new_sub_path(cr);
        cairo_arc(cr, px, py, s->points ? 3.6 : 2.6, 0, 2 * M_PI);
    }
    cairo_fill(cr);
}

/* A series' marked point: a line across the plot at its x, and a ring on it. */
static void draw_mark(cairo_t *cr, const ts_render_series *s, const axis *x, const axis *y, ts_render_rect plot) {
    if (!s->mark || s->mark_at < 0 || s->mark_at >= s->n) return;
    int64_t stride = s->y_stride ? s->y_stride : 1;
    double xv = s->x ? s->x[s->mark_at] : s->mark_at, yv = s->y[s->mark_at * stride];
    if (!isfinite(xv) || !isfinite(yv) || (y->log && yv <= 0)) return;
    double px = plot.x + axis_t(x, xv) * plot.w, py = plot.y + plot.h - axis_t(y, yv) * plot.h;
    cairo_save(cr);
    cairo_set_source_rgb(cr, 0.85, 0.2, 0.15);
    cairo_set_line_width(cr, 1.2);
    cairo_set_dash(cr, (const double[]){5, 3}, 2, 0);
    cairo_move_to(cr, round(px) + 0.5, plot.y);
    cairo_line_to(cr, round(px) + 0.5, plot.y + plot.h);
    cairo_stroke(cr);
    cairo_set_dash(cr, NULL, 0, 0);
    cairo_set_line_width(cr, 2);
    cairo_arc(cr, px, py, 5, 0, 2 * M_PI);
    cairo_stroke(cr);
    cairo_restore(cr);
}

/* A dashed line across the plot at height t (0..1 of the y axis), its name
 * above the line's left end. */
static void draw_level(ts_render__pen *p, const char *label, double t, ts_render_rect plot,
                       const ts_render__font *f) {
    cairo_t *cr = p->cr;
    double py = round(plot.y + plot.h - t * plot.h) + 0.5;
    static const double dash[] = {6, 4};
    cairo_save(cr);
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.22);
    cairo_set_line_width(cr, 1.5);
    cairo_set_dash(cr, dash, 2, 0);
    cairo_move_to(cr, plot.x, py);
    cairo_line_to(cr, plot.x + plot.w, py);
    cairo_stroke(cr);
    double w, h; /* on a white ground, so a curve through it does not hide it */
    ts_render__measure(p, label, f, &w, &h);
    cairo_set_source_rgba(cr, 1, 1, 1, 0.85);
    cairo_rectangle(cr, plot.x + 6, py - 4 - h, w + 6, h + 2);
    cairo_fill(cr);
    cairo_restore(cr);
    ts_render__text(p, label, f, plot.x + 9, py - 3, 0, 1, 0);
}

void ts_render__plot_body(ts_render__pen *p, ts_render_rect r, const ts_render_series *s, int n,
                          const ts_render_plot_opts *o) {
    cairo_t *cr = p->cr;
    axis x, y;
    data_range(s, n, o, &x, &y);
    ts_render__font tf = ts_render__font_of(TS_RENDER__TICK_SIZE, 0, ts_render__ink);
    ts_render__font af = ts_render__font_of(TS_RENDER__LABEL_SIZE, TS_RENDER__ITALIC, ts_render__muted);
    ts_render__font lf = ts_render__font_of(TS_RENDER__LABEL_SIZE, 0, ts_render__ink);
    double tick_h, axis_h, label_h;
    ts_render__measure(p, "0", &tf, NULL, &tick_h);
    ts_render__measure(p, "Ag", &af, NULL, &axis_h);
    ts_render__measure(p, "Ag", &lf, NULL, &label_h);

    double legend_w = o->no_legend ? 0 : legend_width(p, s, n, &lf);
    if (legend_w > r.w * 0.4) { /* no room beside the plot: above it, whole */
        double top = legend_above(p, s, n, &lf, r.x, r.y, r.w, label_h, true);
        r.y += top + 4;
        r.h -= top + 4;
        legend_w = 0;
    }
    double bottom = tick_h + 8 + (o->x_label ? axis_h + 4 : 0);
    double plot_h = r.h - bottom - tick_h / 2;
    /* a y label longer than the plot is tall (a short plot on a printed page) reads level above it */
    const char *y_label = o->y_label;
    if (y_label) {
        double ylw;
        ts_render__measure(p, y_label, &af, &ylw, NULL);
        if (ylw > plot_h + bottom) {
            ts_render__font hf = af;
            hf.max_w = r.w;
            hf.max_lines = 2;
            double yh;
            ts_render__measure(p, y_label, &hf, NULL, &yh);
            ts_render__text(p, y_label, &hf, r.x, r.y, 0, 0, 0);
            r.y += yh + 4;
            r.h -= yh + 4;
            plot_h -= yh + 4;
            y_label = NULL;
        }
    }
    double yticks[MAX_TICKS], xticks[MAX_TICKS], ystep, xstep;
    int ny = axis_ticks(&y, (int)fmax(3, fmin(10, plot_h / 42)), yticks, &ystep);
    char buf[48];
    double ytick_w = 0;
    for (int i = 0; i < ny; i++) {
        double w;
        tick_text(buf, sizeof buf, &y, yticks[i], ystep);
        ts_render__measure(p, buf, &tf, &w, NULL);
        ytick_w = fmax(ytick_w, w);
    }
    double left = (y_label ? axis_h + 8 : 0) + ytick_w + 8;
    ts_render_rect plot = {r.x + left, r.y + tick_h / 2, r.w - left - legend_w - 6, plot_h};
    if (plot.w < 20 || plot.h < 20) return;
    int nx = named_ticks(p, o, &x, plot.w, &tf, xticks);
    bool named = nx >= 0;
    if (!named) {
        /* Fewer ticks while their labels would run into each other (a narrow
         * plot printed "0 50100150"). */
        for (int want = (int)fmax(4, fmin(12, plot.w / 55));; want--) {
            nx = axis_ticks(&x, want, xticks, &xstep);
            if (want <= 2 || x_labels_fit(p, &x, xticks, nx, xstep, plot.w, &tf)) break;
        }
    }
    if (!named && xstep < 1 && integer_x(s, n)) {
        /* Positions and steps are whole numbers: no tick at 0.5. */
        nx = 0;
        for (double v = ceil(x.lo); v <= x.hi && nx < MAX_TICKS; v += 1) xticks[nx++] = v;
        xstep = 1;
    }

    cairo_save(cr);
    ts_render__set_rgb(cr, ts_render__faint);
    cairo_set_line_width(cr, 1);
    for (int i = 0; i < ny; i++) {
        double py = round(plot.y + plot.h - axis_t(&y, yticks[i]) * plot.h) + 0.5;
        cairo_move_to(cr, plot.x, py);
        cairo_line_to(cr, plot.x + plot.w, py);
    }
    for (int i = 0; i < nx; i++) {
        double px = round(plot.x + axis_t(&x, xticks[i]) * plot.w) + 0.5;
        cairo_move_to(cr, px, plot.y);
        cairo_line_to(cr, px, plot.y + plot.h);
    }
    cairo_stroke(cr);
    /* Zero on a signed axis is where meaning changes: draw it darker. */
    if (!y.log && y.lo < 0 && y.hi > 0) {
        double py = round(plot.y + plot.h - axis_t(&y, 0) * plot.h) + 0.5;
        cairo_set_source_rgb(cr, 0.6, 0.6, 0.63);
        cairo_move_to(cr, plot.x, py);
        cairo_line_to(cr, plot.x + plot.w, py);
        cairo_stroke(cr);
    }
    cairo_rectangle(cr, plot.x, plot.y, plot.w, plot.h);
    cairo_clip(cr);
    for (int k = 0; k < n; k++) draw_series(cr, &s[k], k, &x, &y, plot, o->markers);
    for (int k = 0; k < n; k++) draw_mark(cr, &s[k], &x, &y, plot);
    cairo_restore(cr);
    if (o->ref_label && usable(o->ref_y, y.log)) draw_level(p, o->ref_label, axis_t(&y, o->ref_y), plot, &lf);

    cairo_set_source_rgb(cr, 0.35, 0.35, 0.38);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, round(plot.x) + 0.5, round(plot.y) + 0.5, round(plot.w), round(plot.h));
    cairo_stroke(cr);
    for (int i = 0; i < ny; i++) {
        double py = plot.y + plot.h - axis_t(&y, yticks[i]) * plot.h;
        tick_text(buf, sizeof buf, &y, yticks[i], ystep);
        ts_render__text(p, buf, &tf, plot.x - 5, py, 1, 0.5, 0);
    }
    for (int i = 0; i < nx; i++) {
        double px = plot.x + axis_t(&x, xticks[i]) * plot.w;
        if (named)
            snprintf(buf, sizeof buf, "%s", o->x_tick_labels[(int)xticks[i]] ? o->x_tick_labels[(int)xticks[i]] : "");
        else
            tick_text(buf, sizeof buf, &x, xticks[i], xstep);
        ts_render__text(p, buf, &tf, px, plot.y + plot.h + 4, 0.5, 0, 0);
    }
    if (o->x_label)
        ts_render__text(p, o->x_label, &af, plot.x + plot.w / 2, plot.y + plot.h + tick_h + 8, 0.5, 0, 0);
    if (y_label) ts_render__text(p, y_label, &af, r.x + axis_h / 2, plot.y + plot.h / 2, 0.5, 0.5, -M_PI / 2);

    if (legend_w > 0) {
        double lx = plot.x + plot.w + 14, ly = plot.y + 2;
        lf.max_w = legend_w - 22 - 6 - 14;
        for (int k = 0; k < n; k++) {
            if (!s[k].label) continue;
            if (ly + label_h > r.y + r.h) { /* no room left: said, not silently dropped */
                ts_render__clip_dropped(s[k].label);
                continue;
            }
            legend_swatch(cr, lx, ly + label_h / 2, ts_render__palette(s[k].color >= 0 ? s[k].color : k), s[k].dashed,
                          s[k].points);
            ts_render__text(p, s[k].label, &lf, lx + 28, ly + label_h / 2, 0, 0.5, 0);
            ly += label_h + 4;
        }
    }
}

static ts_status finish(ts_render__pen *p, cairo_t *cr) {
    ts_render__pen_free(p);
    cairo_status_t cs = cairo_status(cr);
    if (cs != CAIRO_STATUS_SUCCESS) return ts_fail(TS_ERR_ARG, "render: cairo: %s", cairo_status_to_string(cs));
    return TS_OK;
}

static ts_status check_series(const ts_render_series *s, int n) {
    if (n < 1 || !s) return ts_fail(TS_ERR_ARG, "render: a plot needs at least one series");
    for (int k = 0; k < n; k++)
        if (!s[k].y || s[k].n < 1)
            return ts_fail(TS_ERR_ARG, "render: series %d (%s) has no values", k, s[k].label ? s[k].label : "?");
    return TS_OK;
}

/* The part of area below a title block. */
static ts_render_rect below(ts_render_rect area, double title_h) {
    double top = title_h > 0 ? title_h : TS_RENDER__PAD;
    return (ts_render_rect){area.x + TS_RENDER__PAD, area.y + top, area.w - 2 * TS_RENDER__PAD,
                            area.h - top - TS_RENDER__PAD};
}

ts_status ts_render_plot(cairo_t *cr, ts_render_rect area, const ts_render_series *s, int n,
                         const ts_render_plot_opts *opts) {
    ts_status st = check_series(s, n);
    if (st) return st;
    ts_render_plot_opts none = {0};
    const ts_render_plot_opts *o = opts ? opts : &none;
    ts_render__pen pen;
    ts_render__pen_init(&pen, cr);
    ts_render_clear(cr, area);
    double th = ts_render__title(&pen, area, o->title, o->subtitle);
    ts_render__plot_body(&pen, below(area, th), s, n, o);
    return finish(&pen, cr);
}

/* ---- positional encoding ------------------------------------------------ */

#define MAX_PE_DIMS 16

/* sin/cos curves of the chosen dims; each sin and its cos share a colour. */
static int pe_series(ts_render_series *s, char (*labels)[48], const float *pe, int positions, int d_model,
                     const int *dims, int n_dims) {
    int pairs[MAX_PE_DIMS], n_pairs = 0, n = 0;
    for (int k = 0; k < n_dims && n < MAX_PE_DIMS; k++) {
        int d = dims[k];
        if (d < 0 || d >= d_model) continue;
        int pair = d / 2, color = -1;
        for (int q = 0; q < n_pairs; q++)
            if (pairs[q] == pair) color = q;
        if (color < 0) {
            color = n_pairs;
            pairs[n_pairs++] = pair;
        }
        snprintf(labels[n], sizeof labels[n], "dim %d \xc2\xb7 %s", d, d % 2 ? "cos" : "sin");
        s[n] = (ts_render_series){.label = labels[n], .y = pe + d, .y_stride = d_model, .n = positions,
                                  .color = color, .dashed = d % 2 == 1};
        n++;
    }
    return n;
}

/* Pairs whose wavelengths differ a lot: i = 0, d/16, d/8 (periods 2 pi,
 * about 20 and about 63 positions for the paper's 10000). */
static int default_dims(int d_model, int *dims) {
    if (d_model <= 6) {
        for (int d = 0; d < d_model; d++) dims[d] = d;
        return d_model;
    }
    int pick[3] = {0, d_model / 16 > 1 ? d_model / 16 : 1, d_model / 8 > 2 ? d_model / 8 : 2};
    int n = 0;
    for (int k = 0; k < 3; k++) {
        int d = 2 * pick[k];
        if (k > 0 && d <= dims[n - 2]) d = dims[n - 2] + 2;
        if (d + 1 >= d_model) break;
        dims[n++] = d;
        dims[n++] = d + 1;
    }
    return n;
}

static void pe_body(ts_render__pen *p, ts_render_rect r, const float *pe, int positions, int d_model,
                    const int *dims, int n_dims) {
    ts_render_series s[MAX_PE_DIMS];
    char labels[MAX_PE_DIMS][48];
    int n = pe_series(s, labels, pe, positions, d_model, dims, n_dims);
    ts_render_plot_opts o = {.x_label = "position", .y_label = "value", .markers = positions <= 24};
    if (n > 0) ts_render__plot_body(p, r, s, n, &o);
}

static ts_status check_pe(const float *pe, int positions, int d_model) {
    if (!pe || positions < 1 || d_model < 1)
        return ts_fail(TS_ERR_ARG, "render: a positional encoding needs values, positions and d_model");
    return TS_OK;
}

ts_status ts_render_pe_curves(cairo_t *cr, ts_render_rect area, const float *pe, int positions,
                              int d_model, const int *dims, int n_dims, const char *title,
                              const char *subtitle) {
    ts_status st = check_pe(pe, positions, d_model);
    if (st) return st;
    int fallback[MAX_PE_DIMS];
    if (!dims || n_dims <= 0) {
        n_dims = default_dims(d_model, fallback);
        dims = fallback;
    }
    ts_render__pen pen;
    ts_render__pen_init(&pen, cr);
    ts_render_clear(cr, area);
    double th = ts_render__title(&pen, area, title, subtitle);
    pe_body(&pen, below(area, th), pe, positions, d_model, dims, n_dims);
    return finish(&pen, cr);
}

ts_status ts_render_posenc(cairo_t *cr, ts_render_rect area, const float *pe, int positions,
                           int d_model, const int *dims, int n_dims, const char *title,
                           const char *subtitle, ts_render_layout *layout) {
    ts_status st = check_pe(pe, positions, d_model);
    if (st) return st;
    int fallback[MAX_PE_DIMS];
    if (!dims || n_dims <= 0) {
        n_dims = default_dims(d_model, fallback);
        dims = fallback;
    }
    ts_render__pen pen;
    ts_render__pen_init(&pen, cr);
    ts_render_clear(cr, area);
    double th = ts_render__title(&pen, area, title, subtitle);
    ts_render_rect body = below(area, th);
    ts_render_rect top = {body.x, body.y, body.w, floor(body.h * 0.46)};
    double cap = ts_render__caption(&pen, top, "Chosen dimensions over positions (each sin and its cos share a colour)");
    pe_body(&pen, (ts_render_rect){top.x, top.y + cap, top.w, top.h - cap}, pe, positions, d_model, dims, n_dims);
    ts_render__pen_free(&pen);

    ts_render_rect bottom = {area.x, top.y + top.h + 6, area.w, area.y + area.h - (top.y + top.h + 6)};
    ts_render_matrix m = {.values = pe, .rows = positions, .cols = d_model};
    ts_render_heatmap_opts ho = {
        .subtitle = "Every dimension at every position: value as colour",
        .row_axis = "position",
        .col_axis = "dimension (even: sin, odd: cos)",
        .fixed_scale = true,
        .scale = {TS_CMAP_COOLWARM, -1, 1},
        .stretch = true,
    };
    return ts_render_heatmap(cr, bottom, &m, &ho, NULL, layout);
}

/* ---- training ---------------------------------------------------------- */

/* Log scale when the values span more than a factor of 30. */
static bool wants_log(const ts_render_series *s, int n) {
    double lo = INFINITY, hi = 0;
    for (int k = 0; k < n; k++)
        for (int i = 0; i < s[k].n; i++) {
            double v = series_y(&s[k], i);
            if (!isfinite(v)) continue;
            if (v <= 0) return false;
            lo = fmin(lo, v);
            hi = fmax(hi, v);
        }
    return hi > 0 && lo < INFINITY && hi / lo > 30;
}

ts_status ts_render_training(cairo_t *cr, ts_render_rect area, const ts_render_series *loss,
                             const ts_render_series *grad_norms, int n_grad, double clip, const char *title,
                             const char *subtitle) {
    ts_status st = check_series(loss, 1);
    if (st) return st;
    if (n_grad > 0 && (st = check_series(grad_norms, n_grad))) return st;
    ts_render__pen pen;
    ts_render__pen_init(&pen, cr);
    ts_render_clear(cr, area);
    double th = ts_render__title(&pen, area, title, subtitle);
    ts_render_rect body = below(area, th);
    double h1 = n_grad > 0 ? floor(body.h * 0.48) : body.h;
    ts_render_rect r1 = {body.x, body.y, body.w, h1};
    bool log1 = wants_log(loss, 1);
    double cap = ts_render__caption(&pen, r1, log1 ? "Loss (log scale)" : "Loss");
    ts_render_plot_opts o1 = {.x_label = "training step", .y_label = "loss", .log_y = log1,
                              .markers = loss->n <= 30, .no_legend = true};
    ts_render__plot_body(&pen, (ts_render_rect){r1.x, r1.y + cap, r1.w, r1.h - cap}, loss, 1, &o1);
    if (n_grad > 0) {
        ts_render_rect r2 = {body.x, body.y + h1 + 12, body.w, body.h - h1 - 12};
        bool log2 = wants_log(grad_norms, n_grad);
        cap = ts_render__caption(&pen, r2, log2 ? "Gradient norm per layer (log scale)" : "Gradient norm per layer");
        ts_render_plot_opts o2 = {.x_label = "training step", .y_label = "\xe2\x80\x96grad\xe2\x80\x96",
                                  .log_y = log2, .markers = grad_norms[0].n <= 30};
        char clip_label[64]; /* the threshold is the total norm's (train.grad_norm), not a layer's */
        snprintf(clip_label, sizeof clip_label, "clip: the total norm above %g is scaled down", clip);
        if (clip > 0) o2.ref_label = clip_label, o2.ref_y = clip;
        ts_render__plot_body(&pen, (ts_render_rect){r2.x, r2.y + cap, r2.w, r2.h - cap}, grad_norms, n_grad, &o2);
    }
    return finish(&pen, cr);
}
