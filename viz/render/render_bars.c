/* render_bars: signed values as horizontal bars about a zero line (render.h).
 * One row per value, its label on the left; the colour says the sign (red
 * raises, blue lowers, as the diverging map everywhere else), the number
 * sits at the bar's end. */
#include <math.h>
#include <stdio.h>

#include "render_internal.h"

#define ROW_H 22.0
#define LABEL_W 150.0
#define TOP 78.0

int ts_render_bars_height(int n) { return (int)(TOP + 40 + n * ROW_H + 40); }

ts_status ts_render_bars(cairo_t *cr, ts_render_rect area, const ts_render_bars_view *v) {
    if (!v || v->n <= 0 || !v->values) return ts_fail(TS_ERR_ARG, "render: no bars to draw");
    ts_render__pen p;
    ts_render__pen_init(&p, cr);
    ts_render_clear(cr, area);
    double pad = TS_RENDER__PAD;
    double y0 = area.y + ts_render__title(&p, area, v->title, v->subtitle) + 24;
    double a = 0;
    for (int i = 0; i < v->n; i++)
        if (isfinite(v->values[i])) a = fmax(a, fabs(v->values[i]));
    if (a == 0) a = 1;
    double x0 = area.x + pad + LABEL_W + 50, x1 = area.x + area.w - pad - 50;
    double zero = (x0 + x1) / 2, half = (x1 - x0) / 2;
    ts_render__font lab = ts_render__font_of(TS_RENDER__LABEL_SIZE, 0, ts_render__ink);
    ts_render__font num = ts_render__font_of(TS_RENDER__TICK_SIZE, TS_RENDER__MONO, ts_render__ink);
    ts_rgb pos = ts_cmap_eval(TS_CMAP_COOLWARM, 0.85), neg = ts_cmap_eval(TS_CMAP_COOLWARM, 0.15);
    for (int i = 0; i < v->n; i++) {
        double y = y0 + i * ROW_H, val = v->values[i];
        if (i % 2 == 0) {
            cairo_rectangle(cr, area.x + pad, y, area.w - 2 * pad, ROW_H);
            cairo_set_source_rgb(cr, 0.97, 0.97, 0.98);
            cairo_fill(cr);
        }
        if (v->labels && v->labels[i]) ts_render__text(&p, v->labels[i], &lab, x0 - 56, y + ROW_H / 2, 1, 0.5, 0);
        if (!isfinite(val)) continue;
        double w = val / a * half;
        ts_rgb c = val >= 0 ? pos : neg;
        cairo_rectangle(cr, val >= 0 ? zero : zero + w, y + 4, fabs(w), ROW_H - 8);
        cairo_set_source_rgb(cr, c.r, c.g, c.b);
        cairo_fill(cr);
        char buf[32];
        snprintf(buf, sizeof buf, "%+.2f", val);
        ts_render__text(&p, buf, &num, val >= 0 ? zero + w + 4 : zero + w - 4, y + ROW_H / 2, val >= 0 ? 0 : 1, 0.5, 0);
    }
    double y1 = y0 + v->n * ROW_H;
    cairo_set_source_rgb(cr, ts_render__muted.r, ts_render__muted.g, ts_render__muted.b);
    cairo_set_line_width(cr, 1);
    cairo_move_to(cr, zero, y0 - 4);
    cairo_line_to(cr, zero, y1 + 4);
    cairo_stroke(cr);
    ts_render__font ax = ts_render__font_of(TS_RENDER__LABEL_SIZE, TS_RENDER__ITALIC, ts_render__muted);
    if (v->value_axis) ts_render__text(&p, v->value_axis, &ax, zero, y1 + 12, 0.5, 0, 0);
    ts_render__pen_free(&p);
    cairo_status_t cs = cairo_status(cr);
    return cs == CAIRO_STATUS_SUCCESS ? TS_OK : ts_fail(TS_ERR_ARG, "render: cairo: %s", cairo_status_to_string(cs));
}
