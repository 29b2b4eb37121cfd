/* render_ids: token ids as what they are, labels. A row of boxes, one per
 * position: the position above, the id in the box, the token it names below.
 * One plain fill for every box: a colour scale, a mean or a histogram would
 * say that id 13 is more than id 4, and it is not. Long sequences wrap onto
 * more rows. */
#include <math.h>
#include <stdio.h>

#include "render_internal.h"

#define BOX_W 58.0 /* wide enough for a five-digit id and a short token */
#define BOX_H 40.0
#define GAP 6.0
#define ROW_H (BOX_H + 54.0) /* the position above, the token below */

ts_status ts_render_ids(cairo_t *cr, ts_render_rect area, const ts_render_ids_view *v) {
    if (!v || v->n < 0) return ts_fail(TS_ERR_ARG, "render: no ids to draw");
    ts_render__pen p;
    ts_render__pen_init(&p, cr);
    ts_render_clear(cr, area);
    double pad = TS_RENDER__PAD;
    double y = area.y + ts_render__title(&p, area, v->title, v->subtitle) + 8;
    ts_render__font note = ts_render__font_of(TS_RENDER__LABEL_SIZE, 0, ts_render__muted);
    /* one line where it fits, two in a narrow area (a view beside another at the site's text floor) */
    const char *said = "token ids are names of vocabulary entries, not quantities: one colour for all";
    note.max_w = area.w - 2 * pad;
    note.max_lines = 2;
    double note_w, note_h;
    ts_render__measure(&p, said, &note, &note_w, &note_h);
    ts_render__text(&p, said, &note, area.x + pad, y, 0, 0, 0);
    y += fmax(30, note_h + 12);
    int per_row = (int)fmax(1, floor((area.w - 2 * pad + GAP) / (BOX_W + GAP)));
    ts_render__font pos_f = ts_render__font_of(TS_RENDER__TICK_SIZE, 0, ts_render__muted);
    ts_render__font id_f = ts_render__font_of(TS_RENDER__SUBTITLE_SIZE + 2, TS_RENDER__MONO, ts_render__ink);
    ts_render__font tok_f = ts_render__font_of(TS_RENDER__LABEL_SIZE, 0, ts_render__ink);
    ts_rgb fill = {0.93f, 0.95f, 0.98f}, edge = {0.55f, 0.60f, 0.70f};
    for (int i = 0; i < v->n; i++) {
        int row = i / per_row, col = i % per_row;
        double x = area.x + pad + col * (BOX_W + GAP), top = y + row * ROW_H + 18;
        if (top + BOX_H > area.y + area.h) break; /* the rest would fall off the page */
        char buf[32];
        snprintf(buf, sizeof buf, "%d", i);
        ts_render__text(&p, buf, &pos_f, x + BOX_W / 2, top - 4, 0.5, 1, 0);
        cairo_rectangle(cr, x, top, BOX_W, BOX_H);
        cairo_set_source_rgb(cr, fill.r, fill.g, fill.b);
        cairo_fill_preserve(cr);
        cairo_set_source_rgb(cr, edge.r, edge.g, edge.b);
        cairo_set_line_width(cr, 1);
        cairo_stroke(cr);
        snprintf(buf, sizeof buf, "%.0f", (double)v->ids[i]);
        ts_render__text(&p, buf, &id_f, x + BOX_W / 2, top + BOX_H / 2, 0.5, 0.5, 0);
        if (v->tokens && v->tokens[i]) {
            ts_render__font f = tok_f;
            f.max_w = BOX_W + GAP - 2;
            ts_render__text(&p, v->tokens[i], &f, x + BOX_W / 2, top + BOX_H + 6, 0.5, 0, 0);
        }
    }
    ts_render__pen_free(&p);
    cairo_status_t cs = cairo_status(cr);
    return cs == CAIRO_STATUS_SUCCESS ? TS_OK : ts_fail(TS_ERR_ARG, "render: cairo: %s", cairo_status_to_string(cs));
}

int ts_render_ids_height(int n, double width) {
    int per_row = (int)fmax(1, floor((width - 2 * TS_RENDER__PAD + GAP) / (BOX_W + GAP)));
    int rows = (n + per_row - 1) / per_row;
    return (int)(110 + rows * ROW_H + 20);
}
