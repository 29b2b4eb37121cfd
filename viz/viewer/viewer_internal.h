/* viewer_internal: what the viewer's files (viz/viewer/viewer*.c) share: where the
 * parts of the list and the slider lie, so that a click is mapped back with
 * the same numbers the drawing used. Names carry ts_view__ (two underscores). */
#ifndef TSCOPE_VIZ_VIEWER_INTERNAL_H
#define TSCOPE_VIZ_VIEWER_INTERNAL_H

#include "tscope/viewer.h"

#define TS_VIEW__ROW_H 21.0      /* a list row */
#define TS_VIEW__LIST_HEAD 30.0  /* the list's title line */
#define TS_VIEW__STATUS_H 50.0   /* two lines of status */
#define TS_VIEW__SLIDER_H 36.0
#define TS_VIEW__SLIDER_LABEL 150.0 /* "snapshot 12 / 40" left of the track */

/* The track of the snapshot slider inside g->slider. */
static inline ts_render_rect ts_view__slider_track(const ts_view_geometry *g) {
    ts_render_rect r = g->slider;
    double x0 = r.x + TS_VIEW__SLIDER_LABEL, x1 = r.x + r.w - 24;
    return (ts_render_rect){x0, r.y + r.h * 0.5 - 3, x1 > x0 ? x1 - x0 : 1, 6};
}

/* The snapshot of the slider at x, for n snapshots. */
static inline int ts_view__slider_pick(const ts_view_geometry *g, double x, int n) {
    ts_render_rect t = ts_view__slider_track(g);
    if (n <= 1) return 0;
    double f = (x - t.x) / t.w;
    int k = (int)(f * (n - 1) + 0.5);
    return k < 0 ? 0 : k >= n ? n - 1 : k;
}

/* The list row at y (counting from the first row shown), -1 when none. */
static inline int ts_view__list_row_at(const ts_view_geometry *g, double x, double y) {
    ts_render_rect l = g->list;
    double top = l.y + TS_VIEW__LIST_HEAD;
    if (x < l.x || x >= l.x + l.w || y < top || y >= l.y + l.h) return -1;
    int k = (int)((y - top) / g->row_h);
    return k < g->list_rows ? k : -1;
}

static inline bool ts_view__inside(ts_render_rect r, double x, double y) {
    return x >= r.x && y >= r.y && x < r.x + r.w && y < r.y + r.h;
}

#endif
