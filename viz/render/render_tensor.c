/* render_tensor: any tensor. A 2-D slice as a heatmap, and beside it the
 * numbers a learner checks first: range, mean, std, zeros, NaN and Inf, and
 * the histogram, coloured like the heatmap so the two read together. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "render_internal.h"

static void stat_lines(ts_render__pen *p, ts_render_rect r, const ts_trace_stats *s, double *y) {
    ts_render__font kf = ts_render__font_of(TS_RENDER__LABEL_SIZE, 0, ts_render__muted);
    ts_render__font vf = ts_render__font_of(TS_RENDER__LABEL_SIZE, TS_RENDER__MONO, ts_render__ink);
    double h;
    ts_render__measure(p, "Ag", &vf, NULL, &h);
    char v[8][48];
    const char *keys[8] = {"min", "max", "mean", "std", "mean |x|", "zeros", "NaN", "\xc2\xb1Inf"};
    ts_render__fmt(v[0], sizeof v[0], s->min, 0);
    ts_render__fmt(v[1], sizeof v[1], s->max, 0);
    ts_render__fmt(v[2], sizeof v[2], s->mean, 0);
    ts_render__fmt(v[3], sizeof v[3], s->std, 0);
    ts_render__fmt(v[4], sizeof v[4], s->mean_abs, 0);
    /* with no finite value there is nothing to measure: a dash, not a 0 */
    for (int k = 0; k < 5 && s->finite == 0; k++) snprintf(v[k], sizeof v[k], "\xe2\x80\x94");
    uint64_t count = s->finite + s->nan + s->inf;
    double n = count > 0 ? (double)count : 1;
    snprintf(v[5], sizeof v[5], "%llu (%.1f%%)", (unsigned long long)s->zeros, 100.0 * (double)s->zeros / n);
    snprintf(v[6], sizeof v[6], "%llu", (unsigned long long)s->nan);
    snprintf(v[7], sizeof v[7], "%llu", (unsigned long long)s->inf);
    /* the values' column after the widest name at the font's size ("mean |x|"
     * at a projector's 1.75 is wider than the 76 points that fit it at 1) */
    double key_w = 0, w;
    for (int k = 0; k < 8; k++) {
        ts_render__measure(p, keys[k], &kf, &w, NULL);
        key_w = fmax(key_w, w);
    }
    double vx = r.x + fmax(76, key_w + 12);
    for (int k = 0; k < 8; k++) {
        bool alarm = (k == 6 && s->nan) || (k == 7 && s->inf);
        ts_render__font f = vf;
        if (alarm) f.color = (ts_rgb){0.80f, 0.10f, 0.10f};
        ts_render__text(p, keys[k], &kf, r.x, *y, 0, 0, 0);
        ts_render__text(p, v[k], &f, vx, *y, 0, 0, 0);
        *y += h + 3;
    }
}

ts_status ts_render_tensor(cairo_t *cr, ts_render_rect area, const ts_render_tensor_view *v,
                           const ts_render_state *st, ts_render_layout *layout) {
    if (!v) return ts_fail(TS_ERR_ARG, "render: no tensor view to draw");
    ts_render__pen pen;
    ts_render__pen_init(&pen, cr);
    ts_render_clear(cr, area);
    const double pad = TS_RENDER__PAD;
    double th = ts_render__title(&pen, area, v->title, v->subtitle);
    if (th <= 0) th = pad;
    ts_render__pen_free(&pen);

    /* A narrow, tall area (one of two panels on a page) puts the statistics
     * under the slice, so the slice gets the whole width. */
    bool stacked = area.w < 760 && area.h > area.w;
    double side_w = stacked ? 0 : fmin(fmax(area.w * 0.3, 230), 340), below_h = stacked ? 220 : 0;
    /* The heatmap adds its own top padding below our title. */
    ts_render_rect left = {area.x, area.y + th - 6, area.w - side_w, area.h - th + 6 - below_h};
    ts_render_heatmap_opts ho = {
        .row_axis = v->row_axis,
        .col_axis = v->col_axis,
        .fixed_scale = v->fixed_scale,
        .scale = v->scale,
        .stretch = true,
        .bar_label = v->bar_label,
    };
    ts_render_layout local;
    ts_render_layout *l = layout ? layout : &local;
    ts_status status = ts_render_heatmap(cr, left, &v->slice, &ho, st, l);
    if (status) return status;

    ts_render__pen_init(&pen, cr);
    ts_render_rect side = {area.x + area.w - side_w, area.y + th, side_w - pad, area.h - th - pad};
    ts_render_rect hist_at = {0, 0, 0, 0}; /* stacked: the histogram beside the statistics */
    if (stacked) {
        side = (ts_render_rect){area.x + pad, area.y + area.h - below_h, area.w * 0.42, below_h - pad};
        hist_at = (ts_render_rect){area.x + area.w * 0.46, side.y, area.w * 0.54 - pad, fmin(200, side.h)};
    }
    double y = side.y;
    ts_trace_stats computed;
    const ts_trace_stats *s = v->stats;
    if (!s) {
        /* Only the slice is at hand: say so. */
        ts_render_matrix m = v->slice;
        if ((m.row_stride == 0 || m.row_stride == m.cols) && (m.col_stride == 0 || m.col_stride == 1)) {
            ts_trace_stats_compute(&computed, m.values, (int64_t)m.rows * m.cols);
            s = &computed;
        }
    }
    if (s) {
        y += ts_render__caption(&pen, (ts_render_rect){side.x, y, side.w, 20},
                                v->stats ? "Statistics (whole tensor)" : "Statistics (this slice)");
        stat_lines(&pen, side, s, &y);
        y += 10;
    }
    ts_render_hist computed_hist;
    const ts_render_hist *h = v->hist;
    if (!h && s == &computed) {
        ts_render_hist_compute(&computed_hist, v->slice.values, (int64_t)v->slice.rows * v->slice.cols, 1,
                               TS_RENDER_HIST_BINS, 0, 0);
        h = &computed_hist;
    }
    if (h && h->n_bins > 0) {
        ts_render_rect r = stacked ? hist_at : (ts_render_rect){side.x, y, side.w, fmin(200, side.y + side.h - y)};
        /* the caption in two lines at most (ts_render__caption): the short one when the long does not fit */
        const char *cap = v->hist ? "Histogram (64 bins, whole tensor)" : "Histogram (this slice)";
        ts_render__font cf = ts_render__font_of(TS_RENDER__LABEL_SIZE + 1, TS_RENDER__BOLD, ts_render__ink);
        double cap_w;
        ts_render__measure(&pen, cap, &cf, &cap_w, NULL);
        if (cap_w > 1.7 * r.w) cap = v->hist ? "Histogram (64 bins)" : "Histogram";
        if (r.h > 60) ts_render__hist(&pen, r, h, &l->scale, NULL, cap);
    }
    ts_render__pen_free(&pen);
    cairo_status_t cs = cairo_status(cr);
    if (cs != CAIRO_STATUS_SUCCESS) return ts_fail(TS_ERR_ARG, "render: cairo: %s", cairo_status_to_string(cs));
    return TS_OK;
}
