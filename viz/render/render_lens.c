/* render_lens: the logit lens as the grid people know it (render.h). Rows are
 * layers, top to bottom as the stream flows; columns are positions, the
 * input's token above each. A cell holds the token that layer would predict
 * next (a masked LM's: the token at that position) and its probability, and its colour is that probability on one fixed
 * scale (0 to 1), so layers compare at a glance. */
#include <math.h>
#include <stdio.h>

#include "render_internal.h"

#define CELL_W 34.0
#define CELL_H 40.0
#define LEFT 70.0   /* "layer 12" */
#define HEAD 46.0   /* position number and input token above the columns */
#define BAR_W 14.0
#define RIGHT 120.0 /* the colour bar and its label */

void ts_render_lens_size(int layers, int positions, int *width, int *height) {
    *width = (int)fmax(600, 2 * TS_RENDER__PAD + LEFT + positions * CELL_W + RIGHT);
    *height = (int)(102 + HEAD + fmax(layers * CELL_H, 120) + 40);
}

/* Text that reads on a viridis fill: dark on the light half, white on the dark. */
static ts_rgb text_on(ts_rgb fill) {
    double lum = 0.2126 * fill.r + 0.7152 * fill.g + 0.0722 * fill.b;
    return lum > 0.45 ? (ts_rgb){0.08f, 0.08f, 0.10f} : (ts_rgb){1, 1, 1};
}

static void color_bar(ts_render__pen *p, double x, double y, double h) {
    cairo_t *cr = p->cr;
    for (int i = 0; i < 64; i++) {
        ts_rgb c = ts_cmap_eval(TS_CMAP_VIRIDIS, 1.0 - (i + 0.5) / 64);
        cairo_rectangle(cr, x, y + i * h / 64, BAR_W, h / 64 + 0.5);
        cairo_set_source_rgb(cr, c.r, c.g, c.b);
        cairo_fill(cr);
    }
    ts_render__font f = ts_render__font_of(TS_RENDER__TICK_SIZE, 0, ts_render__muted);
    for (int k = 0; k <= 4; k++) {
        char buf[16];
        snprintf(buf, sizeof buf, "%.2g", k / 4.0);
        ts_render__text(p, buf, &f, x + BAR_W + 4, y + h - k * h / 4, 0, 0.5, 0);
    }
    ts_render__text(p, "probability", &f, x + BAR_W + 34, y + h / 2, 0.5, 0.5, -M_PI / 2);
}

ts_status ts_render_lens(cairo_t *cr, ts_render_rect area, const ts_render_lens_view *v) {
    if (!v || v->layers <= 0 || v->positions <= 0 || !v->top || !v->prob)
        return ts_fail(TS_ERR_ARG, "render: no lens to draw");
    ts_render__pen p;
    ts_render__pen_init(&p, cr);
    ts_render_clear(cr, area);
    double pad = TS_RENDER__PAD;
    double y0 = area.y + ts_render__title(&p, area, v->title, v->subtitle) + 6;
    ts_render__font note = ts_render__font_of(TS_RENDER__LABEL_SIZE, 0, ts_render__muted);
    /* the two notes wrap in a narrow area (a printed page's column); each extra line moves the grid down */
    note.max_w = area.w - 2 * pad;
    note.max_lines = 3;
    const char *said[2] = {"each cell: the next token that layer's stream predicts through the final norm and the head",
                           "framed in red: it is the token that does come next"};
    if (v->masked) { /* BERT: the masked-LM head scores the token at each position itself */
        said[0] = "each cell: the token at that position as that layer's stream predicts it through the masked-LM head";
        said[1] = "framed in red: it is the token that is there in the input";
    }
    double line_h, h0, h1, extra = 0;
    ts_render__measure(&p, "Ag", &note, NULL, &line_h);
    ts_render__measure(&p, said[0], &note, NULL, &h0);
    ts_render__measure(&p, said[1], &note, NULL, &h1);
    extra += h0 - line_h;
    ts_render__text(&p, said[0], &note, area.x + pad, y0, 0, 0, 0);
    ts_render__text(&p, said[1], &note, area.x + pad, y0 + 16 + extra, 0, 0, 0);
    extra += h1 - line_h;
    y0 += extra;
    double gx = area.x + pad + LEFT, gy = y0 + 38 + HEAD;
    /* cells fill the area they are given (a lesson's page), within reason; an
     * area too narrow for every position shows the last ones, where the text
     * ends and the next token is predicted */
    double room = area.x + area.w - pad - RIGHT - gx;
    int first = 0, shown = v->positions;
    if (room < v->positions * CELL_W * 0.6) {
        shown = (int)fmax(1, floor(room / (CELL_W * 0.6)));
        first = v->positions - shown;
        char buf[120];
        snprintf(buf, sizeof buf, "the last %d of %d positions fit here: %d to %d", shown, v->positions, first,
                 v->positions - 1);
        ts_render__text(&p, buf, &note, area.x + pad, y0 + 32, 0, 0, 0);
        gy += 14;
    }
    double cw = fmin(CELL_W * 2, fmax(CELL_W * 0.6, room / shown));
    double ch = fmin(CELL_H * 1.6, fmax(CELL_H * 0.6, (area.y + area.h - 30 - gy) / v->layers));
    ts_render__font pos_f = ts_render__font_of(TS_RENDER__TICK_SIZE - 1, 0, ts_render__muted);
    ts_render__font in_f = ts_render__font_of(TS_RENDER__LABEL_SIZE, TS_RENDER__MONO, ts_render__ink);
    in_f.max_w = cw - 2;
    for (int s = first; s < v->positions; s++) {
        double cx = gx + (s - first + 0.5) * cw;
        char buf[16];
        snprintf(buf, sizeof buf, "%d", s);
        if (shown <= 40 || s % 5 == 0) ts_render__text(&p, buf, &pos_f, cx, gy - HEAD + 4, 0.5, 0, 0);
        if (v->tokens && v->tokens[s]) ts_render__text(&p, v->tokens[s], &in_f, cx, gy - 6, 0.5, 1, 0);
    }
    ts_render__font row_f = ts_render__font_of(TS_RENDER__LABEL_SIZE, 0, ts_render__ink);
    ts_render__font axis_f = ts_render__font_of(TS_RENDER__LABEL_SIZE, TS_RENDER__ITALIC, ts_render__muted);
    ts_render__text(&p, "input", &axis_f, gx - 8, gy - 6, 1, 1, 0);
    for (int l = 0; l < v->layers; l++) {
        double cy = gy + l * ch;
        char buf[24];
        snprintf(buf, sizeof buf, "layer %d", l);
        ts_render__text(&p, buf, &row_f, gx - 8, cy + ch / 2, 1, 0.5, 0);
        for (int s = first; s < v->positions; s++) {
            int k = l * v->positions + s;
            double pr = v->prob[k], cx = gx + (s - first) * cw;
            ts_rgb fill = ts_cmap_eval(TS_CMAP_VIRIDIS, isfinite(pr) ? fmin(fmax(pr, 0), 1) : 0);
            cairo_rectangle(cr, cx, cy, cw, ch);
            cairo_set_source_rgb(cr, fill.r, fill.g, fill.b);
            cairo_fill(cr);
            char label[64];
            if (v->vocab && v->vocab[v->top[k]]) snprintf(label, sizeof label, "%s", v->vocab[v->top[k]]);
            else snprintf(label, sizeof label, "%d", v->top[k]);
            ts_render__font tf = ts_render__font_of(TS_RENDER__LABEL_SIZE + 1, TS_RENDER__MONO | TS_RENDER__BOLD,
                                                    text_on(fill));
            tf.max_w = cw - 3;
            ts_render__text(&p, label, &tf, cx + cw / 2, cy + ch * 0.38, 0.5, 0.5, 0);
            ts_render__font pf = ts_render__font_of(TS_RENDER__TICK_SIZE - 2, 0, text_on(fill));
            snprintf(buf, sizeof buf, "%.2f", pr);
            ts_render__text(&p, buf, &pf, cx + cw / 2, cy + ch * 0.78, 0.5, 0.5, 0);
            if (v->next && v->next[s] >= 0 && v->next[s] == v->top[k]) {
                cairo_rectangle(cr, cx + 1.5, cy + 1.5, cw - 3, ch - 3);
                cairo_set_source_rgb(cr, 0.86, 0.12, 0.10);
                cairo_set_line_width(cr, 2.5);
                cairo_stroke(cr);
            }
        }
    }
    /* thin separators between cells, so neighbours of one colour stay apart */
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_set_line_width(cr, 0.6);
    for (int s = 1; s < shown; s++) {
        cairo_move_to(cr, gx + s * cw, gy);
        cairo_line_to(cr, gx + s * cw, gy + v->layers * ch);
    }
    for (int l = 1; l < v->layers; l++) {
        cairo_move_to(cr, gx, gy + l * ch);
        cairo_line_to(cr, gx + shown * cw, gy + l * ch);
    }
    cairo_stroke(cr);
    color_bar(&p, gx + shown * cw + 18, gy, fmax(v->layers * ch, 120));
    ts_render__pen_free(&p);
    cairo_status_t cs = cairo_status(cr);
    return cs == CAIRO_STATUS_SUCCESS ? TS_OK : ts_fail(TS_ERR_ARG, "render: cairo: %s", cairo_status_to_string(cs));
}
