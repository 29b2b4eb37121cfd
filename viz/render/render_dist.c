/* render_dist: what a model predicts at one position, as a teacher draws it
 * on a slide: the k most likely tokens, one horizontal bar each, longest on
 * top, each labelled with its token, its probability and its logit. The
 * probability axis starts at 0 (a bar's length is its chance), and what the
 * other tokens share is said in words under the bars, so nothing is hidden. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render_internal.h"

#define ROW_MIN 26.0 /* a bar's row at font scale 1 */

/* A token's label on a bar: the visible blanks of a character vocabulary
 * said in words too, for a class that has not met them; the word first and
 * the glyph beside its bar, where a monospaced "␣ " left a wide gap between
 * the glyph and its word. */
static const char *bar_label(const ts_render_dist_view *v, int i, char *buf, size_t size) {
    const char *t = v->labels && v->labels[i] ? v->labels[i] : NULL;
    if (!t) snprintf(buf, size, "%d", i);
    else if (strcmp(t, "\xe2\x86\xb5") == 0) snprintf(buf, size, "new line %s", t);
    else if (strcmp(t, "\xe2\x90\xa3") == 0) snprintf(buf, size, "space %s", t);
    else snprintf(buf, size, "%s", t);
    return buf;
}

/* The indices of the k largest probabilities, largest first (ties: lower id). */
static double prob(const float *p, int i) { return isfinite(p[i]) ? p[i] : -1; }

static int top_indices(const float *p, int n, int k, int *out) {
    int m = 0;
    for (int i = 0; i < n; i++) {
        double v = prob(p, i);
        if (m == k && !(v > prob(p, out[k - 1]))) continue;
        int at = m < k ? m++ : k - 1;
        while (at > 0 && v > prob(p, out[at - 1])) {
            out[at] = out[at - 1];
            at--;
        }
        out[at] = i;
    }
    return m;
}

int ts_render_dist_height(int k) {
    double f = ts_render_font_scale();
    return (int)ceil(k * ROW_MIN * f + 2 * TS_RENDER__PAD + 150 * f);
}

ts_status ts_render_dist(cairo_t *cr, ts_render_rect area, const ts_render_dist_view *v) {
    if (!v || !v->probs || v->n < 1) return ts_fail(TS_ERR_ARG, "render: no distribution to draw");
    int k = v->top_k > 0 ? v->top_k : 10;
    if (k > v->n) k = v->n;
    if (k > TS_RENDER_DIST_MAX) k = TS_RENDER_DIST_MAX;
    int idx[TS_RENDER_DIST_MAX];
    k = top_indices(v->probs, v->n, k, idx);

    ts_render__pen p;
    ts_render__pen_init(&p, cr);
    ts_render_clear(cr, area);
    const double pad = TS_RENDER__PAD;
    double top = area.y + ts_render__title(&p, area, v->title, v->subtitle) + 6;

    ts_render__font lab = ts_render__font_of(TS_RENDER__SUBTITLE_SIZE + 1.5, TS_RENDER__MONO, ts_render__ink);
    ts_render__font val = ts_render__font_of(TS_RENDER__LABEL_SIZE, 0, ts_render__ink);
    ts_render__font mut = ts_render__font_of(TS_RENDER__LABEL_SIZE, 0, ts_render__muted);
    ts_render__font tick = ts_render__font_of(TS_RENDER__TICK_SIZE, 0, ts_render__ink);
    ts_render__font axis = ts_render__font_of(TS_RENDER__LABEL_SIZE + 0.5, TS_RENDER__ITALIC, ts_render__muted);
    lab.max_w = 220;

    /* Column widths: token labels, then the bars, then "0.956  logit 13.46". */
    double lab_w = 0, val_w = 0, h, w;
    char buf[96], lg[48];
    for (int r = 0; r < k; r++) {
        const char *t = bar_label(v, idx[r], buf, sizeof buf);
        ts_render__measure(&p, t, &lab, &w, &h);
        lab_w = fmax(lab_w, w);
    }
    ts_render__measure(&p, "0.000", &val, &w, &h);
    double row_h = fmax(ROW_MIN * ts_render_font_scale(), h * 1.6);
    val_w = w;
    if (v->logits) {
        ts_render__measure(&p, "logit \xe2\x88\x92" "00.00", &mut, &w, NULL);
        val_w += 14 + w;
    }
    double tick_h;
    ts_render__measure(&p, "0", &tick, NULL, &tick_h);
    double axis_h;
    ts_render__measure(&p, "Ag", &axis, NULL, &axis_h);
    double note_h = h * 1.5 * (v->actual >= 0 ? 2 : 1);

    double x_bar = area.x + pad + lab_w + 12;
    double bar_max = area.x + area.w - pad - val_w - 12 - x_bar;
    if (bar_max < 40) bar_max = 40;
    double avail = area.y + area.h - pad - top - (tick_h + 8 + axis_h + 8) - note_h;
    if (k * row_h > avail && avail > 0) row_h = avail / k;
    else if (k > 0 && avail / k > row_h) row_h = fmin(avail / k, h * 2.6); /* a tall page: bars to fill it */

    /* The axis: 0 to the largest probability shown, on nice ticks. */
    double pmax = k > 0 && isfinite(v->probs[idx[0]]) ? v->probs[idx[0]] : 1;
    double ticks[16], step;
    int nt = ts_render__ticks(0, pmax > 0 ? pmax : 1, (int)fmax(2, fmin(8, bar_max / 90)), ticks, &step);
    double hi = nt > 0 ? fmax(pmax, ticks[nt - 1]) : pmax;
    if (nt > 0 && ticks[nt - 1] < pmax * 0.999) hi = ticks[nt - 1] + step; /* a tick past the longest bar */
    if (!(hi > 0)) hi = 1;
    double y_bottom = top + k * row_h;

    cairo_set_line_width(cr, 1);
    for (int i = 0; i <= nt; i++) { /* faint grid lines; the last at hi */
        double t = i < nt ? ticks[i] : hi;
        if (i == nt && nt > 0 && fabs(ticks[nt - 1] - hi) < step * 0.01) break;
        double x = x_bar + t / hi * bar_max;
        ts_render__set_rgb(cr, ts_render__faint);
        cairo_move_to(cr, round(x) + 0.5, top);
        cairo_line_to(cr, round(x) + 0.5, y_bottom);
        cairo_stroke(cr);
        ts_render__fmt(buf, sizeof buf, t, step);
        ts_render__text(&p, buf, &tick, x, y_bottom + 6, 0.5, 0, 0);
    }
    ts_render__text(&p, "probability", &axis, x_bar + bar_max / 2, y_bottom + 10 + tick_h, 0.5, 0, 0);

    double shown = 0;
    for (int r = 0; r < k; r++) {
        int i = idx[r];
        double pv = isfinite(v->probs[i]) ? v->probs[i] : 0;
        shown += pv;
        double y = top + r * row_h, bh = row_h * 0.72;
        ts_rgb c = i == v->actual ? ts_render__palette(1) : ts_render__palette(0);
        cairo_rectangle(cr, x_bar, y + (row_h - bh) / 2, fmax(pv / hi * bar_max, 1), bh);
        ts_render__set_rgb(cr, c);
        cairo_fill(cr);
        const char *t = bar_label(v, i, buf, sizeof buf);
        ts_render__font lf = lab;
        if (i == v->actual) lf.style |= TS_RENDER__BOLD;
        ts_render__text(&p, t, &lf, x_bar - 8, y + row_h / 2, 1, 0.5, 0);
        char pb[48];
        ts_render__fmt(pb, sizeof pb, pv, pv >= 0.01 ? 0.001 : 0);
        double vx = x_bar + pv / hi * bar_max + 8;
        ts_render__text(&p, pb, &val, vx, y + row_h / 2, 0, 0.5, 0);
        if (v->logits) {
            ts_render__measure(&p, pb, &val, &w, NULL);
            char num[32];
            ts_render__fmt(num, sizeof num, v->logits[i], 0.01);
            snprintf(lg, sizeof lg, "logit %s", num);
            ts_render__text(&p, lg, &mut, vx + w + 14, y + row_h / 2, 0, 0.5, 0);
        }
    }
    /* The bars' baseline. */
    ts_render__set_rgb(cr, ts_render__muted);
    cairo_move_to(cr, round(x_bar) + 0.5, top);
    cairo_line_to(cr, round(x_bar) + 0.5, y_bottom);
    cairo_stroke(cr);

    double y = y_bottom + 14 + tick_h + axis_h;
    char note[200];
    int rest = v->n - k;
    if (rest > 0) {
        char pr[32];
        double left = fmax(0, 1 - shown);
        ts_render__fmt(pr, sizeof pr, left, left >= 0.01 ? 0.001 : 0);
        snprintf(note, sizeof note, "the other %d of %d tokens share %s", rest, v->n, pr);
    } else {
        snprintf(note, sizeof note, "all %d tokens shown", v->n);
    }
    ts_render__text(&p, note, &mut, area.x + pad, y, 0, 0, 0);
    if (v->actual >= 0) {
        ts_render__measure(&p, note, &mut, NULL, &h);
        const char *t = v->labels && v->labels[v->actual] ? v->labels[v->actual] : "";
        bool in_top = false;
        for (int r = 0; r < k; r++) in_top |= idx[r] == v->actual;
        char pr[32];
        ts_render__fmt(pr, sizeof pr, v->probs[v->actual], v->probs[v->actual] >= 0.01 ? 0.001 : 0);
        if (in_top)
            snprintf(note, sizeof note, "orange: the token that comes next in the text (%s, p = %s)", t, pr);
        else
            snprintf(note, sizeof note, "the token that comes next in the text, %s, is not among these: p = %s", t, pr);
        ts_render__font nf = mut;
        if (in_top) nf.color = ts_render__palette(1);
        ts_render__text(&p, note, &nf, area.x + pad, y + h * 1.3, 0, 0, 0);
    }
    ts_render__pen_free(&p);
    cairo_status_t cs = cairo_status(cr);
    return cs == CAIRO_STATUS_SUCCESS ? TS_OK : ts_fail(TS_ERR_ARG, "render: cairo: %s", cairo_status_to_string(cs));
}
