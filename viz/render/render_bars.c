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
    ts_render__font lab = ts_render__font_of(TS_RENDER__LABEL_SIZE, 0, ts_render__ink);
    ts_render__font num = ts_render__font_of(TS_RENDER__TICK_SIZE, TS_RENDER__MONO, ts_render__ink);
    /* the labels' column as wide as its widest label, and room for a number
     * each side of the bars, at the font's size (a projector's 1.75 too) */
    double lab_w = 0, num_w, tw;
    for (int i = 0; i < v->n; i++)
        if (v->labels && v->labels[i]) {
            ts_render__measure(&p, v->labels[i], &lab, &tw, NULL);
            lab_w = fmax(lab_w, tw);
        }
    ts_render__measure(&p, "\xe2\x88\x92" "00.00", &num, &num_w, NULL);
    double lab_right = area.x + pad + fmax(lab_w, LABEL_W * ts_render_font_scale() * 0.5);
    double x0 = lab_right + 12 + num_w, x1 = area.x + area.w - pad - num_w - 8;
    double zero = (x0 + x1) / 2, half = (x1 - x0) / 2;
    /* rows at the font's size, fewer points each when the picture is shorter (a slide) */
    double fs = ts_render_font_scale();
    double row_h = fmin(ROW_H * fs, (area.y + area.h - y0 - 36 * fs) / v->n);
    ts_rgb pos = ts_cmap_eval(TS_CMAP_COOLWARM, 0.85), neg = ts_cmap_eval(TS_CMAP_COOLWARM, 0.15);
    for (int i = 0; i < v->n; i++) {
        double y = y0 + i * row_h, val = v->values[i];
        if (i % 2 == 0) {
            cairo_rectangle(cr, area.x + pad, y, area.w - 2 * pad, row_h);
            cairo_set_source_rgb(cr, 0.97, 0.97, 0.98);
            cairo_fill(cr);
        }
        if (v->labels && v->labels[i]) ts_render__text(&p, v->labels[i], &lab, lab_right, y + row_h / 2, 1, 0.5, 0);
        if (!isfinite(val)) continue;
        double w = val / a * half;
        ts_rgb c = val >= 0 ? pos : neg;
        cairo_rectangle(cr, val >= 0 ? zero : zero + w, y + 4, fabs(w), row_h - 8);
        cairo_set_source_rgb(cr, c.r, c.g, c.b);
        cairo_fill(cr);
        char buf[32];
        snprintf(buf, sizeof buf, "%+.2f", val);
        ts_render__text(&p, buf, &num, val >= 0 ? zero + w + 4 : zero + w - 4, y + row_h / 2, val >= 0 ? 0 : 1, 0.5, 0);
    }
    double y1 = y0 + v->n * row_h;
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
