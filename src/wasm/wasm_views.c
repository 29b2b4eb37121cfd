/* wasm_views: the live page's views. They are laid out by the same C as
 * `tscope live`'s (viz/render/live_views.c, through the canvas interface),
 * painted here into a display list that the page's script only replays on
 * an HTML canvas; the grid's hit regions answer the page's clicks. */
#include "wasm_impl.h"

int tsw_draw(tsw_session *s, int focus_layer, int focus_head, int width) {
    ts_live_views v = ts_live_views_of(s->ls, focus_layer, focus_head);
    ts_dl_canvas(&s->dl, &s->canvas);
    double h = ts_live_views_draw(&s->canvas, &v, width, 0);
    return ts_dl_count(&s->dl) && !s->canvas.failed ? (int)h : 0;
}

const float *tsw_dl_ops(const tsw_session *s) { return s->dl.ops; }
const unsigned char *tsw_dl_pixels(const tsw_session *s) { return s->dl.pixels; }
int tsw_dl_count(const tsw_session *s) { return ts_dl_count(&s->dl); }
const char *tsw_dl_text(const tsw_session *s) { return s->dl.text; }

int tsw_hit(const tsw_session *s, double x, double y) { return ts_canvas_hit_at(&s->canvas, x, y); }
