/* text_clips: what a figure could not draw whole (render.h, "text that could
 * not be drawn whole").
 *
 * Every text of viz/ is shown by ts_render_show_layout, which hands it here
 * while a figure is being recorded. A text is recorded when pango shortened
 * it with "…", when its ink overlaps the ink of a text drawn before it on the
 * same surface, or when part of it falls outside what the surface shows (a
 * clip region, the picture's edge). A figure with such text reads wrong
 * ("EDITED: head0 zeroed; hea…", a label over its value), so a command warns
 * about it, and under tests (TSCOPE_CLIPS=error) refuses to write it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render_internal.h"

/* The ink of a text drawn since recording began: its box's four corners in
 * device units (turned with the text), and the box around them. */
typedef struct ink_box {
    const void *surface;
    double cx[4], cy[4];
    double x0, y0, x1, y1;
    char text[64];
} ink_box;

enum { MAX_REPORTED = 6, REPORT_LEN = 160 };

static struct {
    bool on;
    ink_box *boxes;
    int n_boxes, cap_boxes;
    int n_clips;
    char report[MAX_REPORTED][REPORT_LEN];
} rec;

static ts_render_clip_policy policy = TS_RENDER_CLIPS_WARN;
static ts_render_clip_warn warn_fn;

void ts_render_set_clip_policy(ts_render_clip_policy p, ts_render_clip_warn warn) {
    policy = p;
    warn_fn = warn;
}

void ts_render_clips_begin(void) {
    rec.on = true;
    rec.n_boxes = 0;
    rec.n_clips = 0;
}

static void forget(void) {
    rec.on = false;
    free(rec.boxes);
    rec.boxes = NULL;
    rec.n_boxes = rec.cap_boxes = 0;
}

/* A text for a message: its first line, at most 40 bytes (whole UTF-8
 * characters), "…" when longer. */
static void excerpt(char *out, size_t cap, const char *text) {
    size_t n = strcspn(text, "\n");
    size_t keep = n < 40 ? n : 40;
    while (keep > 0 && keep < n && ((unsigned char)text[keep] & 0xC0) == 0x80) keep--;
    snprintf(out, cap, "%.*s%s", (int)keep, text, keep < n ? "\xe2\x80\xa6" : "");
}

static void record(const char *fmt, const char *a, const char *b) {
    if (rec.n_clips < MAX_REPORTED) snprintf(rec.report[rec.n_clips], REPORT_LEN, fmt, a, b);
    rec.n_clips++;
}

/* The ink of layout shown at cr's current point, in device units. */
static void ink_extents(cairo_t *cr, PangoLayout *layout, ink_box *b) {
    PangoRectangle ink;
    pango_layout_get_extents(layout, &ink, NULL);
    double cx = 0, cy = 0;
    if (cairo_has_current_point(cr)) cairo_get_current_point(cr, &cx, &cy);
    double l = cx + (double)ink.x / PANGO_SCALE, t = cy + (double)ink.y / PANGO_SCALE;
    double r = l + (double)ink.width / PANGO_SCALE, bt = t + (double)ink.height / PANGO_SCALE;
    double xs[4] = {l, r, r, l}, ys[4] = {t, t, bt, bt};
    b->x0 = b->y0 = INFINITY;
    b->x1 = b->y1 = -INFINITY;
    for (int i = 0; i < 4; i++) {
        cairo_user_to_device(cr, &xs[i], &ys[i]);
        b->cx[i] = xs[i], b->cy[i] = ys[i];
        b->x0 = fmin(b->x0, xs[i]), b->y0 = fmin(b->y0, ys[i]);
        b->x1 = fmax(b->x1, xs[i]), b->y1 = fmax(b->y1, ys[i]);
    }
}

/* How far a and b overlap along the normal of a's edge k (negative: apart). */
static double overlap_along(const ink_box *a, int k, const ink_box *b) {
    double ex = a->cx[(k + 1) % 4] - a->cx[k], ey = a->cy[(k + 1) % 4] - a->cy[k];
    double len = hypot(ex, ey);
    if (len == 0) return INFINITY; /* a flat box: this edge separates nothing */
    double nx = -ey / len, ny = ex / len;
    double amin = INFINITY, amax = -INFINITY, bmin = INFINITY, bmax = -INFINITY;
    for (int i = 0; i < 4; i++) {
        double pa = a->cx[i] * nx + a->cy[i] * ny, pb = b->cx[i] * nx + b->cy[i] * ny;
        amin = fmin(amin, pa), amax = fmax(amax, pa);
        bmin = fmin(bmin, pb), bmax = fmax(bmax, pb);
    }
    return fmin(amax, bmax) - fmax(amin, bmin);
}

/* Whether the inks of a and b overlap by more than `slack` in every
 * direction that could part them (their edges' normals: turned labels
 * whose boxes are side by side do not overlap, though the boxes around
 * them would). */
static bool inks_overlap(const ink_box *a, const ink_box *b, double slack) {
    if (fmin(a->x1, b->x1) - fmax(a->x0, b->x0) <= slack || fmin(a->y1, b->y1) - fmax(a->y0, b->y0) <= slack)
        return false;
    for (int k = 0; k < 2; k++) /* a box has two directions of edges */
        if (overlap_along(a, k, b) <= slack || overlap_along(b, k, a) <= slack) return false;
    return true;
}

/* What the surface shows of cr now, in device units. */
static void shown_extents(cairo_t *cr, double *x0, double *y0, double *x1, double *y1) {
    cairo_save(cr);
    cairo_identity_matrix(cr);
    cairo_clip_extents(cr, x0, y0, x1, y1);
    cairo_restore(cr);
}

static void keep_box(const ink_box *b) {
    if (rec.n_boxes == rec.cap_boxes) {
        int cap = rec.cap_boxes ? 2 * rec.cap_boxes : 256;
        ink_box *nb = realloc(rec.boxes, sizeof *nb * (size_t)cap);
        if (!nb) return; /* overlaps with later text go unseen; nothing is drawn wrong */
        rec.boxes = nb;
        rec.cap_boxes = cap;
    }
    rec.boxes[rec.n_boxes++] = *b;
}

void ts_render__clips_see(cairo_t *cr, PangoLayout *layout) {
    if (!rec.on) return;
    const char *text = pango_layout_get_text(layout);
    if (!text || strspn(text, " \n\t") == strlen(text)) return;
    char what[64];
    excerpt(what, sizeof what, text);
    if (pango_layout_is_ellipsized(layout)) record("shortened to fit: \"%s\"%s", what, "");
    ink_box b = {.surface = cairo_get_target(cr)};
    ink_extents(cr, layout, &b);
    snprintf(b.text, sizeof b.text, "%s", what);
    if (!(b.x1 > b.x0 && b.y1 > b.y0)) return; /* no ink */
    /* a pixel of slack: antialiased edges of neighbours touch */
    double px = 1.0, sx0, sy0, sx1, sy1;
    shown_extents(cr, &sx0, &sy0, &sx1, &sy1);
    if (b.x0 < sx0 - px || b.y0 < sy0 - px || b.x1 > sx1 + px || b.y1 > sy1 + px)
        record("cut off at the edge of its area: \"%s\"%s", what, "");
    for (int i = 0; i < rec.n_boxes; i++) {
        const ink_box *o = &rec.boxes[i];
        if (o->surface != b.surface) continue;
        if (inks_overlap(o, &b, px)) {
            record("\"%s\" drawn over \"%s\"", what, o->text);
            break;
        }
    }
    keep_box(&b);
}

void ts_render__clip_dropped(const char *text) {
    if (!rec.on || !text) return;
    char what[64];
    excerpt(what, sizeof what, text);
    record("left out for want of room: \"%s\"%s", what, "");
}

int ts_render_clips_end(char *desc, size_t cap) {
    int n = rec.n_clips;
    if (desc && cap) {
        desc[0] = 0;
        size_t len = 0;
        for (int i = 0; i < n && i < MAX_REPORTED; i++) {
            int k = snprintf(desc + len, cap - len, "%s%s", i ? "; " : "", rec.report[i]);
            if (k < 0 || (size_t)k >= cap - len) break;
            len += (size_t)k;
        }
        if (n > MAX_REPORTED && len + 32 < cap) snprintf(desc + len, cap - len, "; and %d more", n - MAX_REPORTED);
    }
    forget();
    return n;
}

ts_status ts_render_clips_check(const char *what) {
    char desc[1200];
    int n = ts_render_clips_end(desc, sizeof desc);
    if (n == 0) return TS_OK;
    if (policy == TS_RENDER_CLIPS_FAIL)
        return ts_fail(TS_ERR_ARG, "%s: %d text%s not drawn whole: %s", what, n, n == 1 ? "" : "s", desc);
    if (warn_fn) warn_fn(what, n, desc);
    return TS_OK;
}
