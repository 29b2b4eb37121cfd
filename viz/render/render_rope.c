/* render_rope: what RoPE does, from the model's numbers alone: how fast each
 * pair of a head's dims turns with the position (cos of its angle over
 * positions, fast pairs to slow, unturned dims flat), and why that makes
 * attention see distances: the same q and k turned to positions i and j
 * score the same for every (i, j) the same distance apart. The turning is
 * the forward's (src/model/model_forward.c, rope_table and rotate): angle =
 * p * theta^(-2i / r), pair i is dims (i, i + r/2) rotate-half, (2i, 2i + 1)
 * interleaved. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render_internal.h"

#define MAX_ROPE_CURVES 7
#define ROPE_SHIFT_MIN 8 /* the dotted score's positions are shifted by at least this much */

double ts_render_rope_frequency(const ts_render_rope_view *v, int pair) {
    return pow(v->theta, -2.0 * pair / v->rotary);
}

/* x (head_dim) turned to position p, as the forward turns q and k (p may
 * fall between positions, for smooth curves). */
static void turn(const ts_render_rope_view *v, const double *x, double p, double *out) {
    int half = v->rotary / 2;
    for (int d = 0; d < v->head_dim; d++) out[d] = x[d];
    for (int i = 0; i < half; i++) {
        int lo = v->interleaved ? 2 * i : i, hi = v->interleaved ? 2 * i + 1 : i + half;
        double a = p * ts_render_rope_frequency(v, i), c = cos(a), s = sin(a);
        out[lo] = x[lo] * c - x[hi] * s;
        out[hi] = x[hi] * c + x[lo] * s;
    }
}

static double score_at(const ts_render_rope_view *v, double i, double j) {
    int hd = v->head_dim;
    double *buf = calloc(3 * (size_t)hd, sizeof(double));
    if (!buf) return NAN;
    double *ones = buf, *q = buf + hd, *k = buf + 2 * hd;
    for (int d = 0; d < hd; d++) ones[d] = 1;
    turn(v, ones, i, q);
    turn(v, ones, j, k);
    double dot = 0;
    for (int d = 0; d < hd; d++) dot += q[d] * k[d];
    free(buf);
    return dot / hd;
}

double ts_render_rope_score(const ts_render_rope_view *v, int i, int j) { return score_at(v, i, j); }

#define SAMPLES 8 /* points a position along a curve: smooth waves, not zigzags */

/* The pairs drawn: every one when few, else the four fastest and two slow ones. */
static int chosen_pairs(int half, int *pairs) {
    if (half <= MAX_ROPE_CURVES - 1) {
        for (int i = 0; i < half; i++) pairs[i] = i;
        return half;
    }
    int want[6] = {0, 1, 2, 3, half / 2, half - 1}, n = 0;
    for (int k = 0; k < 6; k++)
        if (n == 0 || want[k] > pairs[n - 1]) pairs[n++] = want[k];
    return n;
}

/* "1", "0.316", "3.16e-3": a frequency in three figures. */
static void fmt3(char *buf, size_t size, double v) {
    if (v >= 1000) snprintf(buf, size, "%.0f", v);
    else if (v >= 0.01) snprintf(buf, size, "%.3g", v);
    else snprintf(buf, size, "%.2e", v);
    char *e = strstr(buf, "e-0");
    if (e) memmove(e + 2, e + 3, strlen(e + 3) + 1);
}

static ts_status check_view(const ts_render_rope_view *v) {
    if (!v || v->head_dim < 2 || v->rotary < 2 || v->rotary % 2 || v->rotary > v->head_dim || !(v->theta > 1) ||
        v->positions < 2)
        return ts_fail(TS_ERR_ARG, "render: a RoPE view needs head_dim, an even rotated width of 2..head_dim, "
                                   "theta above 1 and at least 2 positions");
    return TS_OK;
}

/* Top: cos(angle) of the chosen pairs over positions. */
static void angle_curves(ts_render__pen *p, ts_render_rect r, const ts_render_rope_view *v) {
    int half = v->rotary / 2, pairs[MAX_ROPE_CURVES], n = chosen_pairs(half, pairs);
    int P = (v->positions - 1) * SAMPLES + 1;
    float *y = malloc(sizeof(float) * (size_t)(n + 2) * (size_t)P);
    if (!y) return;
    float *x = y + (int64_t)(n + 1) * P;
    for (int k = 0; k < P; k++) x[k] = (float)k / SAMPLES;
    ts_render_series s[MAX_ROPE_CURVES + 1];
    char labels[MAX_ROPE_CURVES + 1][96];
    for (int k = 0; k < n; k++) {
        int i = pairs[k], lo = v->interleaved ? 2 * i : i, hi = v->interleaved ? 2 * i + 1 : i + half;
        double f = ts_render_rope_frequency(v, i);
        for (int pos = 0; pos < P; pos++) y[(int64_t)k * P + pos] = (float)cos(x[pos] * f);
        char fs[32];
        fmt3(fs, sizeof fs, f);
        snprintf(labels[k], sizeof labels[k], "pair %d (dims %d, %d): %s rad/position", i, lo, hi, fs);
        s[k] = (ts_render_series){.label = labels[k], .x = x, .y = y + (int64_t)k * P, .n = P, .color = k};
    }
    if (v->rotary < v->head_dim) { /* the dims RoPE leaves alone: angle 0 at every position */
        for (int pos = 0; pos < P; pos++) y[(int64_t)n * P + pos] = 1;
        snprintf(labels[n], sizeof labels[n], "dims %d\xe2\x80\x93%d: not rotated", v->rotary, v->head_dim - 1);
        s[n] = (ts_render_series){.label = labels[n], .x = x, .y = y + (int64_t)n * P, .n = P, .color = 7, .dashed = true};
        n++;
    }
    double cap = ts_render__caption(p, r, "How far each pair has turned: cos(angle), angle = position \xc2\xb7 "
                                          "\xce\xb8^(\xe2\x88\x92" "2i/r)");
    ts_render_plot_opts o = {.x_label = "position", .y_label = "cos(angle)"};
    ts_render__plot_body(p, (ts_render_rect){r.x, r.y + cap, r.w, r.h - cap}, s, n, &o);
    free(y);
}

/* The shift of the dotted positions: a third of the way along, at least ROPE_SHIFT_MIN. */
static int rope_shift(const ts_render_rope_view *v) {
    int shift = v->positions / 3;
    return shift < ROPE_SHIFT_MIN ? ROPE_SHIFT_MIN : shift;
}

/* Bottom left: the score against the distance, the shifted positions dotted on it. */
static void score_curve(ts_render__pen *p, ts_render_rect r, const ts_render_rope_view *v) {
    int D = (v->positions - 1) * SAMPLES + 1, shift = rope_shift(v), every = v->positions > 24 ? 3 : 1;
    int nd = (v->positions + every - 1) / every;
    float *buf = malloc(sizeof(float) * (size_t)(2 * D + 2 * nd));
    if (!buf) return;
    float *line = buf, *x = buf + D, *dots = x + D, *dx = dots + nd;
    for (int d = 0; d < D; d++) {
        x[d] = (float)d / SAMPLES;
        line[d] = (float)score_at(v, x[d], 0);
    }
    for (int k = 0; k < nd; k++) {
        dx[k] = (float)(k * every);
        dots[k] = (float)ts_render_rope_score(v, shift + k * every, shift);
    }
    char dot_label[64];
    snprintf(dot_label, sizeof dot_label, "k at %d, q at %d + (i \xe2\x88\x92 j)", shift, shift);
    ts_render_series s[2] = {
        {.label = "k at 0, q at i \xe2\x88\x92 j", .x = x, .y = line, .n = D, .color = 0},
        {.label = dot_label, .x = dx, .y = dots, .n = nd, .color = 3, .points = true},
    };
    double cap = ts_render__caption(p, r, "The score of one q and one k, turned to positions i and j");
    ts_render_plot_opts o = {.x_label = "distance i \xe2\x88\x92 j", .y_label = "q\xc2\xb7k / head_dim",
                             .y_from_zero = true};
    ts_render__plot_body(p, (ts_render_rect){r.x, r.y + cap, r.w, r.h - cap}, s, 2, &o);
    free(buf);
}

/* A line of text at (x, y), wrapped as its font allows; returns its height. */
static double said(ts_render__pen *p, const char *text, const ts_render__font *f, double x, double y) {
    double h;
    ts_render__measure(p, text, f, NULL, &h);
    ts_render__text(p, text, f, x, y, 0, 0, 0);
    return h;
}

/* Bottom right: the numbers, in words. */
static void rope_text(ts_render__pen *p, ts_render_rect r, const ts_render_rope_view *v) {
    double y = r.y + ts_render__caption(p, r, "In numbers");
    ts_render__font f = ts_render__font_of(TS_RENDER__LABEL_SIZE, 0, ts_render__ink);
    ts_render__font mf = ts_render__font_of(TS_RENDER__LABEL_SIZE, TS_RENDER__ITALIC, ts_render__muted);
    f.max_w = mf.max_w = r.w;
    f.max_lines = mf.max_lines = 2; /* a line wraps once in a narrow column (the site's larger text) */
    double h;
    ts_render__measure(p, "Ag", &f, NULL, &h);
    char line[8][160];
    int n = 0, half = v->rotary / 2;
    if (v->rotary == v->head_dim)
        snprintf(line[n++], sizeof line[0], "rotated: all %d dims of a head, %d pairs", v->head_dim, half);
    else
        snprintf(line[n++], sizeof line[0], "rotated: %d of %d dims (%d pairs); dims %d\xe2\x80\x93%d as they are",
                 v->rotary, v->head_dim, half, v->rotary, v->head_dim - 1);
    if (v->interleaved)
        snprintf(line[n++], sizeof line[0], "pairs interleaved: dims 2i and 2i + 1");
    else
        snprintf(line[n++], sizeof line[0], "pairs rotate-half: dim i with dim i + %d", half);
    snprintf(line[n++], sizeof line[0], "\xce\xb8 = %g: pair i turns \xce\xb8^(\xe2\x88\x92" "2i/%d) rad a position",
             v->theta, v->rotary);
    char slow[32];
    fmt3(slow, sizeof slow, 2 * M_PI / ts_render_rope_frequency(v, half - 1));
    snprintf(line[n++], sizeof line[0], "pair 0: a turn every 6.28 positions; pair %d: every %s", half - 1, slow);
    if (v->seq > 0 && v->seq < v->positions)
        snprintf(line[n++], sizeof line[0], "drawn over positions 0\xe2\x80\x93%d; this trace has 0\xe2\x80\x93%d",
                 v->positions - 1, v->seq - 1);
    for (int k = 0; k < n; k++) {
        y += said(p, line[k], &f, r.x, y) + 3;
    }
    y += 8;
    int shift = rope_shift(v), i = v->positions > 8 ? 5 : 1, j = i > 2 ? 2 : 0;
    double a = ts_render_rope_score(v, i, j), b = ts_render_rope_score(v, i + shift, j + shift);
    ts_render__font bf = f;
    bf.style = TS_RENDER__BOLD;
    y += said(p, "Same distance, same score", &bf, r.x, y) + 3;
    snprintf(line[0], sizeof line[0], "(i, j) = (%d, %d): %.4f", i, j, a);
    snprintf(line[1], sizeof line[1], "(i, j) = (%d, %d): %.4f", i + shift, j + shift, b);
    for (int k = 0; k < 2; k++) {
        ts_render__font mono = ts_render__font_of(TS_RENDER__LABEL_SIZE, TS_RENDER__MONO, ts_render__ink);
        mono.max_w = r.w;
        y += said(p, line[k], &mono, r.x, y) + 3;
    }
    y += said(p, "q at i and k at j: their turns cancel to i \xe2\x88\x92 j", &mf, r.x, y) + 3;
    y += said(p, "(q = k = every dim 1: each pair lined up at i = j)", &mf, r.x, y) + 3;
    if (v->rotary < v->head_dim) { /* the unturned dims add the same at every distance */
        snprintf(line[0], sizeof line[0], "the %d unrotated dims give %.3g at every distance", v->head_dim - v->rotary,
                 (double)(v->head_dim - v->rotary) / v->head_dim);
        y += said(p, line[0], &mf, r.x, y) + 3;
    }
    y += 8;
    if (v->check && v->check[0]) { /* one line a row, split at '\n' */
        const char *c = v->check;
        while (*c) {
            const char *end = strchr(c, '\n');
            int len = end ? (int)(end - c) : (int)strlen(c);
            snprintf(line[0], sizeof line[0], "%.*s", len, c);
            y += said(p, line[0], c == v->check ? &bf : &f, r.x, y) + 3;
            c += len + (end ? 1 : 0);
        }
    }
}

ts_status ts_render_rope(cairo_t *cr, ts_render_rect area, const ts_render_rope_view *v) {
    ts_status st = check_view(v);
    if (st) return st;
    ts_render__pen pen;
    ts_render__pen_init(&pen, cr);
    ts_render_clear(cr, area);
    double th = ts_render__title(&pen, area, v->title, v->subtitle);
    const double pad = TS_RENDER__PAD, gap = 26;
    ts_render_rect body = {area.x + pad, area.y + (th > 0 ? th : pad), area.w - 2 * pad, 0};
    body.h = area.y + area.h - pad - body.y;
    double top_h = floor((body.h - gap) * 0.48);
    angle_curves(&pen, (ts_render_rect){body.x, body.y, body.w, top_h}, v);
    double text_w = fmin(400, body.w * 0.4), y1 = body.y + top_h + gap, h1 = body.y + body.h - y1;
    score_curve(&pen, (ts_render_rect){body.x, y1, body.w - text_w - gap, h1}, v);
    rope_text(&pen, (ts_render_rect){body.x + body.w - text_w, y1, text_w, h1}, v);
    ts_render__pen_free(&pen);
    cairo_status_t cs = cairo_status(cr);
    if (cs != CAIRO_STATUS_SUCCESS) return ts_fail(TS_ERR_ARG, "render: cairo: %s", cairo_status_to_string(cs));
    return TS_OK;
}
