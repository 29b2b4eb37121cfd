/* render_norm: what a LayerNorm does, in one picture. Each token's features
 * get mean 0 and std 1 (then gamma scales and beta shifts them): the per-token
 * lines show it, the histograms show the values' spread before and after. An
 * RMSNorm only divides each token by its root mean square (then scales): the
 * lines show the rms of its input, y and output, and the mean it keeps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render_internal.h"

/* A line of the summary at (x, y), wrapped as its font allows; returns the
 * height it took. */
static double summary_line(ts_render__pen *p, const char *text, const ts_render__font *f, double x, double y) {
    double h;
    ts_render__measure(p, text, f, NULL, &h);
    ts_render__text(p, text, f, x, y, 0, 0, 0);
    return h;
}

/* Population mean and std of each row of x (seq, dim). */
static void row_stats(const float *x, int seq, int dim, float *mean, float *std) {
    for (int s = 0; s < seq; s++) {
        const float *row = x + (int64_t)s * dim;
        double sum = 0;
        for (int d = 0; d < dim; d++) sum += row[d];
        double mu = sum / dim, var = 0;
        for (int d = 0; d < dim; d++) var += (row[d] - mu) * (row[d] - mu);
        mean[s] = (float)mu;
        std[s] = (float)sqrt(var / dim);
    }
}

static void stat_plot(ts_render__pen *p, ts_render_rect r, const char *caption, const float *before,
                      const float *after, int seq, const char *y_label, const char *const *tokens) {
    double cap = ts_render__caption(p, r, caption);
    ts_render_series s[2] = {
        {.label = "before", .y = before, .n = seq, .color = 0},
        {.label = "after", .y = after, .n = seq, .color = 1},
    };
    ts_render_plot_opts o = {.x_label = tokens ? "token" : "token position", .y_label = y_label,
                             .markers = seq <= 40, .y_from_zero = true, .x_tick_labels = tokens,
                             .n_x_tick_labels = tokens ? seq : 0};
    ts_render__plot_body(p, (ts_render_rect){r.x, r.y + cap, r.w, r.h - cap}, s, 2, &o);
}

static void summary_text(ts_render__pen *p, ts_render_rect r, const float *mean_in, const float *std_in,
                         const float *mean_out, const float *std_out, int seq, int dim) {
    double a[4] = {0, 0, 0, 0};
    for (int s = 0; s < seq; s++) {
        a[0] += fabs(mean_in[s]);
        a[1] += std_in[s];
        a[2] += fabs(mean_out[s]);
        a[3] += std_out[s];
    }
    for (int k = 0; k < 4; k++) a[k] /= seq;
    double y = r.y + ts_render__caption(p, r, "In numbers (averaged over tokens)");
    ts_render__font f = ts_render__font_of(TS_RENDER__LABEL_SIZE, TS_RENDER__MONO, ts_render__ink);
    ts_render__font mf = ts_render__font_of(TS_RENDER__LABEL_SIZE, 0, ts_render__muted);
    f.max_w = mf.max_w = r.w;
    mf.max_lines = 3; /* sentences wrap in a narrow column */
    double h;
    ts_render__measure(p, "Ag", &f, NULL, &h);
    char line[160];
    const char *rows[5];
    char b[4][120];
    snprintf(b[0], sizeof b[0], "          |mean|    std");
    snprintf(b[1], sizeof b[1], "before  %8.3f %8.3f", a[0], a[1]);
    snprintf(b[2], sizeof b[2], "after   %8.3f %8.3f", a[2], a[3]);
    double w;
    ts_render__font whole = f;
    whole.max_w = 0;
    ts_render__measure(p, b[1], &whole, &w, NULL);
    if (w > r.w) { /* a narrow column: the columns closer */
        snprintf(b[0], sizeof b[0], "       |mean|   std");
        snprintf(b[1], sizeof b[1], "before %6.3f %5.3f", a[0], a[1]);
        snprintf(b[2], sizeof b[2], "after  %6.3f %5.3f", a[2], a[3]);
    }
    snprintf(b[3], sizeof b[3], "over %d features per token, %d tokens", dim, seq);
    rows[0] = b[0];
    rows[1] = b[1];
    rows[2] = b[2];
    for (int k = 0; k < 3; k++) {
        ts_render__text(p, rows[k], &f, r.x, y, 0, 0, 0);
        y += h + 2;
    }
    y += 4;
    y += summary_line(p, b[3], &mf, r.x, y) + 8;
    snprintf(line, sizeof line, "y = \xce\xb3 \xc2\xb7 (x \xe2\x88\x92 mean) / \xe2\x88\x9a(var + \xce\xb5) + \xce\xb2");
    ts_render__font ff = f;
    ff.max_lines = 2; /* the formula breaks at a space in a narrow column */
    y += summary_line(p, line, &ff, r.x, y) + 4;
    summary_line(p, "mean and std over each token's own features", &mf, r.x, y);
}

/* Root mean square of each row of x (seq, dim). */
static void row_rms(const float *x, int seq, int dim, float *rms) {
    for (int s = 0; s < seq; s++) {
        const float *row = x + (int64_t)s * dim;
        double sq = 0;
        for (int d = 0; d < dim; d++) sq += (double)row[d] * row[d];
        rms[s] = (float)sqrt(sq / dim);
    }
}

static double average(const float *v, int n, bool absolute) {
    double a = 0;
    for (int k = 0; k < n; k++) a += absolute ? fabs(v[k]) : v[k];
    return a / n;
}

/* An RMSNorm's numbers and formula, under the histograms' right; std_in is
 * what a LayerNorm of the same input would divide by. */
static void rms_summary(ts_render__pen *p, ts_render_rect r, const ts_render_norm *d, const float *rms_y,
                        const float *rms_out, const float *mean_in, const float *mean_out, const float *std_in) {
    double y = r.y + ts_render__caption(p, r, "In numbers (averaged over tokens)");
    ts_render__font f = ts_render__font_of(TS_RENDER__LABEL_SIZE, TS_RENDER__MONO, ts_render__ink);
    ts_render__font mf = ts_render__font_of(TS_RENDER__LABEL_SIZE, 0, ts_render__muted);
    f.max_w = mf.max_w = r.w;
    mf.max_lines = 3; /* sentences wrap in a narrow column */
    double h;
    ts_render__measure(p, "Ag", &f, NULL, &h);
    char b[4][120];
    snprintf(b[0], sizeof b[0], "%-4s%6s %6s %6s", "", "rms", "|mean|", "std");
    snprintf(b[1], sizeof b[1], "%-4s%6.3f %6.3f %6.3f", "in", average(d->rms, d->seq, false),
             average(mean_in, d->seq, true), average(std_in, d->seq, false));
    snprintf(b[2], sizeof b[2], "%-4s%6.3f", "y", average(rms_y, d->seq, false));
    snprintf(b[3], sizeof b[3], "%-4s%6.3f %6.3f", "out", average(rms_out, d->seq, false), average(mean_out, d->seq, true));
    ts_render__font whole = f;
    whole.max_w = 0;
    double w;
    ts_render__measure(p, b[1], &whole, &w, NULL);
    if (w > r.w) { /* a narrow column: the columns closer */
        snprintf(b[0], sizeof b[0], "      rms|mean|   std");
        snprintf(b[1], sizeof b[1], "%-4s%5.3f %5.3f %5.3f", "in", average(d->rms, d->seq, false),
                 average(mean_in, d->seq, true), average(std_in, d->seq, false));
        snprintf(b[2], sizeof b[2], "%-4s%5.3f", "y", average(rms_y, d->seq, false));
        snprintf(b[3], sizeof b[3], "%-4s%5.3f %5.3f", "out", average(rms_out, d->seq, false),
                 average(mean_out, d->seq, true));
    }
    for (int k = 0; k < 4; k++) {
        if (k == 2 && !rms_y) continue;
        ts_render__text(p, b[k], &f, r.x, y, 0, 0, 0);
        y += h + 2;
    }
    y += 4;
    char line[160];
    snprintf(line, sizeof line, "over %d features per token, %d tokens", d->dim, d->seq);
    y += summary_line(p, line, &mf, r.x, y) + 8;
    ts_render__font ff = f;
    ff.max_lines = 2; /* the formula breaks at a space in a narrow column */
    y += summary_line(p, "rms = \xe2\x88\x9a(mean(x\xc2\xb2) + \xce\xb5),  y = x / rms", &ff, r.x, y) + 4;
    ts_render__text(p, d->one_plus ? "out = y \xc2\xb7 (1 + w)" : "out = y \xc2\xb7 \xce\xb3", &f, r.x, y, 0, 0, 0);
    y += h + 4;
    y += summary_line(p, "no mean taken away, no \xce\xb2: only the size is set", &mf, r.x, y) + 4;
    summary_line(p, "rms\xc2\xb2 = mean\xc2\xb2 + std\xc2\xb2: a LayerNorm divides by the std", &mf, r.x, y);
}

/* An RMSNorm: each token divided by its root mean square, then scaled. */
static void draw_rms(ts_render__pen *pen, ts_render_rect cell[2][3], const ts_render_norm *d, const float *mean_in,
                     const float *mean_out, const float *std_in, float *rms_y, float *rms_out) {
    row_rms(d->out, d->seq, d->dim, rms_out);
    if (d->y) row_rms(d->y, d->seq, d->dim, rms_y);
    ts_render_series s[4];
    int n = 0;
    s[n++] = (ts_render_series){.label = "in (the step rms)", .y = d->rms, .n = d->seq, .color = 0};
    /* the same tokens' std: what a LayerNorm would divide by, the mean taken away first */
    s[n++] = (ts_render_series){.label = "std of in (LayerNorm's)", .y = std_in, .n = d->seq, .color = 0, .dashed = true};
    if (d->y) s[n++] = (ts_render_series){.label = "y = in / rms", .y = rms_y, .n = d->seq, .color = 4};
    s[n++] = (ts_render_series){.label = "out", .y = rms_out, .n = d->seq, .color = 1};
    ts_render_plot_opts o = {.x_label = d->tokens ? "token" : "token position", .y_label = "rms",
                             .markers = d->seq <= 40, .y_from_zero = true, .x_tick_labels = d->tokens,
                             .n_x_tick_labels = d->tokens ? d->seq : 0};
    ts_render_rect r = cell[0][0];
    double cap = ts_render__caption(pen, r, "RMS of each token");
    ts_render__plot_body(pen, (ts_render_rect){r.x, r.y + cap, r.w, r.h - cap}, s, n, &o);
    stat_plot(pen, cell[0][1], "Mean of each token (not taken away)", mean_in, mean_out, d->seq, "mean", d->tokens);
    r = cell[0][2];
    if (d->gamma) {
        float *scale = NULL;
        ts_render_series g[2];
        int ng = 0;
        if (d->one_plus && (scale = malloc(sizeof(float) * (size_t)d->dim))) {
            for (int k = 0; k < d->dim; k++) scale[k] = 1 + d->gamma[k];
            g[ng++] = (ts_render_series){.label = "1 + w", .y = scale, .n = d->dim, .color = 2};
            g[ng++] = (ts_render_series){.label = "w (stored)", .y = d->gamma, .n = d->dim, .color = 2, .dashed = true};
        } else {
            g[ng++] = (ts_render_series){.label = "\xce\xb3", .y = d->gamma, .n = d->dim, .color = 2};
        }
        cap = ts_render__caption(pen, r, d->one_plus ? "Learned scale 1 + w (no \xce\xb2)" : "Learned scale \xce\xb3 (no \xce\xb2)");
        ts_render_plot_opts go = {.x_label = "feature", .markers = d->dim <= 32, .y_from_zero = true};
        ts_render__plot_body(pen, (ts_render_rect){r.x, r.y + cap, r.w, r.h - cap}, g, ng, &go);
        free(scale);
    } else {
        cap = ts_render__caption(pen, r, "\xce\xb3");
        ts_render__font mf = ts_render__font_of(TS_RENDER__LABEL_SIZE, TS_RENDER__ITALIC, ts_render__muted);
        mf.max_w = r.w;
        ts_render__text(pen, "not in this trace", &mf, r.x, r.y + cap, 0, 0, 0);
    }
    rms_summary(pen, cell[1][2], d, d->y ? rms_y : NULL, rms_out, mean_in, mean_out, std_in);
}

ts_status ts_render_layernorm(cairo_t *cr, ts_render_rect area, const ts_render_norm *d,
                              const char *title, const char *subtitle) {
    if (!d || !d->in || !d->out || d->seq < 1 || d->dim < 1)
        return ts_fail(TS_ERR_ARG, "render: a LayerNorm view needs its input and output (seq, dim)");
    float *buf = malloc(sizeof(float) * 6 * (size_t)d->seq);
    if (!buf) return ts_fail(TS_ERR_NOMEM, "render: no memory for %d tokens' statistics", d->seq);
    float *mean_in = buf, *std_in = buf + d->seq, *mean_out = buf + 2 * d->seq, *std_out = buf + 3 * d->seq;
    float *rms_y = buf + 4 * d->seq, *rms_out = buf + 5 * d->seq; /* an RMSNorm's */
    row_stats(d->in, d->seq, d->dim, mean_in, std_in);
    row_stats(d->out, d->seq, d->dim, mean_out, std_out);
    int64_t n = (int64_t)d->seq * d->dim;

    ts_render__pen pen;
    ts_render__pen_init(&pen, cr);
    ts_render_clear(cr, area);
    double th = ts_render__title(&pen, area, title, subtitle);
    const double pad = TS_RENDER__PAD, gap = 26;
    ts_render_rect body = {area.x + pad, area.y + (th > 0 ? th : pad), area.w - 2 * pad, 0};
    body.h = area.y + area.h - pad - body.y;
    double cw = (body.w - 2 * gap) / 3, rh = (body.h - gap) / 2;
    ts_render_rect cell[2][3];
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 3; c++)
            cell[r][c] = (ts_render_rect){body.x + c * (cw + gap), body.y + r * (rh + gap), cw, rh};
    /* A column too narrow for the table of numbers (a view beside another, at
     * the site's text floor): two columns and three rows, the lines per token
     * on top, the histograms in the middle, γ and β beside the numbers below. */
    double table_w;
    ts_render__font tf = ts_render__font_of(TS_RENDER__LABEL_SIZE, TS_RENDER__MONO, ts_render__ink);
    ts_render__measure(&pen, "before     0.040    0.999", &tf, &table_w, NULL);
    if (cw < table_w) {
        cw = (body.w - gap) / 2;
        rh = (body.h - 2 * gap) / 3;
        static const int at[2][3][2] = {{{0, 0}, {0, 1}, {2, 0}}, {{1, 0}, {1, 1}, {2, 1}}};
        for (int r = 0; r < 2; r++)
            for (int c = 0; c < 3; c++)
                cell[r][c] = (ts_render_rect){body.x + at[r][c][1] * (cw + gap), body.y + at[r][c][0] * (rh + gap), cw, rh};
    }

    if (!d->rms) {
        stat_plot(&pen, cell[0][0], "Mean of each token", mean_in, mean_out, d->seq, "mean", d->tokens);
        stat_plot(&pen, cell[0][1], "Std of each token", std_in, std_out, d->seq, "std", d->tokens);
    } else {
        draw_rms(&pen, cell, d, mean_in, mean_out, std_in, rms_y, rms_out);
    }

    /* Before and after on one x range, so the squeeze is visible. */
    ts_render_hist hin, hout;
    ts_render_hist_compute(&hin, d->in, n, 1, TS_RENDER_HIST_BINS, 0, 0);
    ts_render_hist_compute(&hout, d->out, n, 1, TS_RENDER_HIST_BINS, 0, 0);
    double lo = fmin(hin.lo, hout.lo), hi = fmax(hin.hi, hout.hi);
    ts_render_hist_compute(&hin, d->in, n, 1, TS_RENDER_HIST_BINS, lo, hi);
    ts_render_hist_compute(&hout, d->out, n, 1, TS_RENDER_HIST_BINS, lo, hi);
    ts_rgb c0 = ts_render__palette(0), c1 = ts_render__palette(1);
    ts_render__hist(&pen, cell[1][0], &hin, NULL, &c0, "Values before the norm");
    ts_render__hist(&pen, cell[1][1], &hout, NULL, &c1, "Values after the norm");

    if (d->rms) {
        /* drawn by draw_rms */
    } else if (d->gamma && d->beta) {
        double cap = ts_render__caption(&pen, cell[0][2], "Learned \xce\xb3 (scale) and \xce\xb2 (shift)");
        ts_render_series s[2] = {
            {.label = "\xce\xb3", .y = d->gamma, .n = d->dim, .color = 2},
            {.label = "\xce\xb2", .y = d->beta, .n = d->dim, .color = 4},
        };
        ts_render_plot_opts o = {.x_label = "feature", .markers = d->dim <= 32, .y_from_zero = true};
        ts_render_rect r = cell[0][2];
        ts_render__plot_body(&pen, (ts_render_rect){r.x, r.y + cap, r.w, r.h - cap}, s, 2, &o);
    } else {
        double cap = ts_render__caption(&pen, cell[0][2], "\xce\xb3 and \xce\xb2");
        ts_render__font mf = ts_render__font_of(TS_RENDER__LABEL_SIZE, TS_RENDER__ITALIC, ts_render__muted);
        mf.max_w = cw;
        ts_render__text(&pen, "not in this trace", &mf, cell[0][2].x, cell[0][2].y + cap, 0, 0, 0);
    }
    if (!d->rms) summary_text(&pen, cell[1][2], mean_in, std_in, mean_out, std_out, d->seq, d->dim);

    free(buf);
    ts_render__pen_free(&pen);
    cairo_status_t cs = cairo_status(cr);
    if (cs != CAIRO_STATUS_SUCCESS) return ts_fail(TS_ERR_ARG, "render: cairo: %s", cairo_status_to_string(cs));
    return TS_OK;
}
