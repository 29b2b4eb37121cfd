/* canvas: the small drawing interface the live views are laid out through
 * (render.h), its hit regions, and the display-list backend the live web
 * page replays. Nothing here calls cairo: `make wasm` compiles this file with
 * the views (live_views.c); canvas_cairo.c is the other backend. */
#include <stdlib.h>
#include <string.h>

#include "tscope/render.h"

/* ---- the interface ---------------------------------------------------------- */

void ts_canvas_begin(ts_canvas *c) { c->n_hits = 0, c->failed = false; }

void ts_canvas_free(ts_canvas *c) {
    free(c->hits);
    c->hits = NULL, c->n_hits = c->cap_hits = 0;
}

void ts_canvas_rect(ts_canvas *c, double x, double y, double w, double h, ts_rgb col) { c->ops->rect(c->ctx, x, y, w, h, col); }

void ts_canvas_frame(ts_canvas *c, double x, double y, double w, double h, ts_rgb col, double width) {
    c->ops->frame(c->ctx, x, y, w, h, col, width);
}

void ts_canvas_line(ts_canvas *c, double x0, double y0, double x1, double y1, ts_rgb col, double width) {
    c->ops->line(c->ctx, x0, y0, x1, y1, col, width);
}

void ts_canvas_text(ts_canvas *c, double x, double y, double size, ts_canvas_align a, ts_rgb col, bool bold, const char *s) {
    if (s && s[0]) c->ops->text(c->ctx, x, y, size, a, col, bold, s);
}

void ts_canvas_image(ts_canvas *c, double x, double y, double w, double h, int cols, int rows, const unsigned char *rgba) {
    if (cols > 0 && rows > 0 && rgba) c->ops->image(c->ctx, x, y, w, h, cols, rows, rgba);
}

void ts_canvas_clip(ts_canvas *c, double x, double y, double w, double h) { c->ops->clip(c->ctx, x, y, w, h); }
void ts_canvas_unclip(ts_canvas *c) { c->ops->unclip(c->ctx); }

void ts_canvas_hit_region(ts_canvas *c, double x, double y, double w, double h, int id) {
    if (c->n_hits == c->cap_hits) {
        int cap = c->cap_hits ? 2 * c->cap_hits : 64;
        ts_canvas_hit *grown = realloc(c->hits, sizeof *grown * (size_t)cap);
        if (!grown) {
            c->failed = true;
            return;
        }
        c->hits = grown, c->cap_hits = cap;
    }
    c->hits[c->n_hits++] = (ts_canvas_hit){x, y, w, h, id};
}

int ts_canvas_hit_at(const ts_canvas *c, double x, double y) {
    for (int i = c->n_hits - 1; i >= 0; i--) { /* the last laid out is on top */
        const ts_canvas_hit *b = &c->hits[i];
        if (x >= b->x && x < b->x + b->w && y >= b->y && y < b->y + b->h) return b->id;
    }
    return -1;
}

/* ---- the display list --------------------------------------------------------- */

/* Room for `more` bytes in a growing block; false (and d->failed) when out of memory. */
static bool grow(ts_dl *d, void **block, size_t *cap, size_t len, size_t more, size_t first) {
    if (len + more <= *cap) return true;
    size_t want = *cap ? 2 * *cap : first;
    while (want < len + more) want *= 2;
    void *grown = realloc(*block, want);
    if (!grown) {
        d->failed = true;
        return false;
    }
    *block = grown, *cap = want;
    return true;
}

static float *dl_op(ts_dl *d, ts_dl_kind kind) {
    if (d->failed) return NULL;
    size_t cap = (size_t)d->cap * sizeof(float) * TS_DL_FLOATS;
    if (!grow(d, (void **)&d->ops, &cap, (size_t)d->n * sizeof(float) * TS_DL_FLOATS, sizeof(float) * TS_DL_FLOATS,
              sizeof(float) * TS_DL_FLOATS * 1024))
        return NULL;
    d->cap = (int)(cap / (sizeof(float) * TS_DL_FLOATS));
    float *op = d->ops + (size_t)d->n++ * TS_DL_FLOATS;
    memset(op, 0, sizeof(float) * TS_DL_FLOATS);
    op[0] = (float)kind;
    return op;
}

/* An op with its box (or its two ends) and colour. */
static float *dl_box(ts_dl *d, ts_dl_kind kind, double x, double y, double w, double h, ts_rgb c) {
    float *op = dl_op(d, kind);
    if (!op) return NULL;
    op[1] = (float)x, op[2] = (float)y, op[3] = (float)w, op[4] = (float)h;
    op[5] = c.r, op[6] = c.g, op[7] = c.b;
    return op;
}

static void dl_rect(void *ctx, double x, double y, double w, double h, ts_rgb c) { dl_box(ctx, TS_DL_RECT, x, y, w, h, c); }

static void dl_frame(void *ctx, double x, double y, double w, double h, ts_rgb c, double width) {
    float *op = dl_box(ctx, TS_DL_FRAME, x, y, w, h, c);
    if (op) op[8] = (float)width;
}

static void dl_line(void *ctx, double x0, double y0, double x1, double y1, ts_rgb c, double width) {
    float *op = dl_box(ctx, TS_DL_LINE, x0, y0, x1, y1, c);
    if (op) op[8] = (float)width;
}

static void dl_text(void *ctx, double x, double y, double size, ts_canvas_align a, ts_rgb c, bool bold, const char *s) {
    ts_dl *d = ctx;
    size_t n = strlen(s) + 1;
    if (d->failed || !grow(d, (void **)&d->text, &d->text_cap, d->text_len, n, 4096)) return;
    float *op = dl_box(d, TS_DL_TEXT, x, y, size, (double)a, c);
    if (!op) return;
    op[8] = bold;
    op[9] = (float)d->text_len; /* exact: the text stays far below 2^24 bytes */
    memcpy(d->text + d->text_len, s, n);
    d->text_len += n;
}

static void dl_image(void *ctx, double x, double y, double w, double h, int cols, int rows, const unsigned char *rgba) {
    ts_dl *d = ctx;
    size_t bytes = (size_t)cols * (size_t)rows * 4;
    if (d->failed || !grow(d, (void **)&d->pixels, &d->pix_cap, d->pix_len, bytes, 1u << 16)) return;
    float *op = dl_box(d, TS_DL_IMAGE, x, y, w, h, (ts_rgb){0, 0, 0});
    if (!op) return;
    op[5] = (float)cols, op[6] = (float)rows, op[9] = (float)d->pix_len;
    memcpy(d->pixels + d->pix_len, rgba, bytes);
    d->pix_len += bytes;
}

static void dl_clip(void *ctx, double x, double y, double w, double h) { dl_box(ctx, TS_DL_CLIP, x, y, w, h, (ts_rgb){0, 0, 0}); }
static void dl_unclip(void *ctx) { dl_op(ctx, TS_DL_UNCLIP); }

static const ts_canvas_ops DL_OPS = {dl_rect, dl_frame, dl_line, dl_text, dl_image, dl_clip, dl_unclip};

void ts_dl_canvas(ts_dl *d, ts_canvas *c) {
    d->n = 0, d->text_len = 0, d->pix_len = 0, d->failed = false;
    c->ops = &DL_OPS, c->ctx = d;
    ts_canvas_begin(c);
}

int ts_dl_count(const ts_dl *d) { return d->failed ? 0 : d->n; }

void ts_dl_free(ts_dl *d) {
    free(d->ops), free(d->text), free(d->pixels);
    memset(d, 0, sizeof *d);
}
