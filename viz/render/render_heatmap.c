/* render_heatmap: matrices as coloured cells. One head, all heads of a layer,
 * the layers x heads overview. The cells are one image surface scaled with
 * nearest-neighbour filtering, so 200 x 200 is one paint, not 40000 rectangles,
 * and every cell keeps hard edges. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render_internal.h"

#define MAX_CELL 90.0   /* larger cells only waste the slide */
#define VALUES_MAX 16   /* print values up to 16 x 16 */
#define VALUES_MAX_WINDOW 24 /* ... and in a block of a larger matrix up to 24 x 24 */
#define LABEL_ANGLE (-M_PI / 4) /* key labels read up and to the right */

static const uint32_t MASKED_PX = 0xFFEBEBEBu; /* under the hatching */
static const uint32_t NAN_PX = 0xFFFF00FFu;    /* magenta: nothing in either map */

/* ---- cells ---------------------------------------------------------------- */

static int value_pixel(const ts_render_matrix *m, const ts_render_scale *s, const uint32_t *lut, int r,
                       int c, uint32_t *px) {
    float v = ts_render__at(m, r, c);
    if (ts_render__masked(m, r, c, v)) {
        *px = MASKED_PX;
        return 1;
    }
    if (isnan(v)) {
        *px = NAN_PX;
        return 2;
    }
    double t = ts_render__scale_t(s, v);
    long i = lround(t * (TS_CMAP_LUT_SIZE - 1));
    if (t != t) i = 0;
    *px = lut[i < 0 ? 0 : i >= TS_CMAP_LUT_SIZE ? TS_CMAP_LUT_SIZE - 1 : i];
    return 0;
}

/* img with every pixel repeated kx times across and ky times down. */
static cairo_surface_t *blown_up(cairo_surface_t *img, int kx, int ky) {
    cairo_format_t f = cairo_image_surface_get_format(img);
    int w = cairo_image_surface_get_width(img), h = cairo_image_surface_get_height(img);
    int bpp = f == CAIRO_FORMAT_A8 ? 1 : 4;
    cairo_surface_t *big = cairo_image_surface_create(f, w * kx, h * ky);
    if (cairo_surface_status(big) != CAIRO_STATUS_SUCCESS) return big;
    cairo_surface_flush(img);
    cairo_surface_flush(big);
    const unsigned char *src = cairo_image_surface_get_data(img);
    unsigned char *dst = cairo_image_surface_get_data(big);
    int ss = cairo_image_surface_get_stride(img), ds = cairo_image_surface_get_stride(big);
    for (int y = 0; y < h * ky; y++) {
        const unsigned char *s = src + (size_t)(y / ky) * (size_t)ss;
        unsigned char *d = dst + (size_t)y * (size_t)ds;
        for (int x = 0; x < w * kx; x++) memcpy(d + (size_t)x * bpp, s + (size_t)(x / kx) * bpp, (size_t)bpp);
    }
    cairo_surface_mark_dirty(big);
    return big;
}

/* Paint `img` (cols x rows pixels) over the grid, one pixel per cell. */
static void paint_scaled(cairo_t *cr, cairo_surface_t *img, const ts_render_cells *c, bool as_mask) {
    /* SVG and PDF: the file holds the small image and the viewer scales it.
     * PDF keeps nearest-neighbour (cairo writes /Interpolate false), but
     * cairo's SVG has no way to say so and SVG renderers smooth an image they
     * enlarge, blurring 4 x 4 cells into a gradient. So a vector target gets
     * the image enlarged here, a cell a block of at least 12 pixels (at most
     * ~2400 pixels a side): smoothing then only softens a cell's edge. */
    /* An SVG for browsers (ts_figure_spec.svg_pixelated) says image-rendering: pixelated and needs none of
     * this for colours; a mask is enlarged still (browsers smooth a <mask>'s image), which costs little:
     * it is one bit a cell. */
    if (cairo_surface_get_type(cairo_get_target(cr)) != CAIRO_SURFACE_TYPE_IMAGE &&
        (as_mask || !ts_render__svg_pixelated(cr))) {
        int w = cairo_image_surface_get_width(img), h = cairo_image_surface_get_height(img);
        int kx = (int)fmin(ceil(fmax(c->cell_w, 1) * 4), fmax(1, floor(2400.0 / w)));
        int ky = (int)fmin(ceil(fmax(c->cell_h, 1) * 4), fmax(1, floor(2400.0 / h)));
        kx = kx < 12 && 12 * w <= 2400 ? 12 : kx;
        ky = ky < 12 && 12 * h <= 2400 ? 12 : ky;
        if (kx > 1 || ky > 1) {
            cairo_surface_t *big = blown_up(img, kx, ky);
            if (cairo_surface_status(big) == CAIRO_STATUS_SUCCESS) {
                ts_render_cells cc = *c;
                cc.cell_w /= kx;
                cc.cell_h /= ky;
                cairo_save(cr);
                cairo_rectangle(cr, c->grid.x, c->grid.y, c->grid.w, c->grid.h);
                cairo_clip(cr);
                cairo_translate(cr, c->grid.x, c->grid.y);
                cairo_scale(cr, cc.cell_w, cc.cell_h);
                cairo_pattern_t *pat = cairo_pattern_create_for_surface(big);
                cairo_pattern_set_filter(pat, CAIRO_FILTER_NEAREST);
                cairo_pattern_set_extend(pat, CAIRO_EXTEND_PAD);
                if (as_mask) {
                    cairo_mask(cr, pat);
                } else {
                    cairo_set_source(cr, pat);
                    cairo_paint(cr);
                }
                cairo_pattern_destroy(pat);
                cairo_restore(cr);
                cairo_surface_destroy(big);
                return;
            }
            cairo_surface_destroy(big);
        }
    }
    double px = ts_render__pixel(cr);
    /* Upscaling keeps hard cell edges; shrinking (thumbnails of long
     * sequences) averages instead, which aliases less than dropping rows. */
    cairo_filter_t filter = (c->cell_w >= px * 0.999 && c->cell_h >= px * 0.999) ? CAIRO_FILTER_NEAREST
                                                                                 : CAIRO_FILTER_GOOD;
    cairo_save(cr);
    cairo_rectangle(cr, c->grid.x, c->grid.y, c->grid.w, c->grid.h);
    cairo_clip(cr);
    cairo_translate(cr, c->grid.x, c->grid.y);
    cairo_scale(cr, c->cell_w, c->cell_h);
    cairo_pattern_t *pat = cairo_pattern_create_for_surface(img);
    cairo_pattern_set_filter(pat, filter);
    cairo_pattern_set_extend(pat, CAIRO_EXTEND_PAD);
    if (as_mask) {
        cairo_mask(cr, pat);
    } else {
        cairo_set_source(cr, pat);
        cairo_paint(cr);
    }
    cairo_pattern_destroy(pat);
    cairo_restore(cr);
}

/* A cell's value with the same decimals in every cell, chosen from the size
 * of the scale: 0.25 for probabilities, 12.5 for tens, 1e-4 for tiny ones. A
 * value that would round to zero but is not zero reads "≈0". */
static void fmt_cell(char *buf, size_t size, float v, const ts_render_scale *s) {
    double amax = fmax(fabs(s->vmin), fabs(s->vmax));
    if (!isfinite(v) || v == 0 || amax >= 1000 || amax < 0.01) {
        ts_render__fmt(buf, size, v, 0);
        return;
    }
    double step = amax >= 100 ? 1 : amax >= 10 ? 0.1 : 0.01;
    if (fabs(v) < step / 2) {
        snprintf(buf, size, "\xe2\x89\x88" "0");
        return;
    }
    ts_render__fmt(buf, size, v, step);
}

static void draw_values(ts_render__pen *p, const ts_render_matrix *m, const ts_render_scale *s,
                        const ts_render_cells *c, const uint32_t *lut) {
    char buf[32];
    size_t longest = 1;
    /* The digits suit the values drawn: a zoomed-in block of a matrix whose
     * largest value elsewhere is 14 still prints its 4.47 with two decimals. */
    ts_render_scale digits = *s;
    if (c->rows < c->total_rows || c->cols < c->total_cols) {
        float amax = 0;
        for (int r = 0; r < c->rows; r++)
            for (int k = 0; k < c->cols; k++) {
                float v = ts_render__at(m, c->row0 + r, c->col0 + k);
                if (isfinite(v)) amax = fmaxf(amax, fabsf(v));
            }
        digits.vmin = -amax, digits.vmax = amax;
    }
    for (int r = 0; r < c->rows; r++)
        for (int k = 0; k < c->cols; k++) {
            float v = ts_render__at(m, c->row0 + r, c->col0 + k);
            fmt_cell(buf, sizeof buf, v, &digits);
            size_t len = 0; /* characters, not bytes: "\xe2\x88\x92" is one minus sign */
            for (const char *q = buf; *q; q++) len += ((unsigned char)*q & 0xC0) != 0x80;
            if (len > longest) longest = len;
        }
    /* One size for all cells, so the numbers read as a table. */
    double wide = c->cell_w / (0.62 * (double)longest + 0.9), size = fmin(c->cell_h * 0.36, wide);
    if (size > 14) size = 14;
    /* under a text floor (ts_render_set_min_text), a number the floor would hide may fill more of its cell */
    double floor_size = ts_render_min_text() * ts_render__pixel(p->cr);
    if (size < floor_size && floor_size <= fmin(c->cell_h * 0.7, wide)) size = floor_size;
    /* numbers under 9 device pixels cannot be read (tests/readability_test.sh):
     * a cell that small shows its colour only */
    if (size / ts_render__pixel(p->cr) < fmax(9.0, ts_render_min_text())) return;
    for (int r = 0; r < c->rows; r++)
        for (int k = 0; k < c->cols; k++) {
            int mr = c->row0 + r, mc = c->col0 + k;
            float v = ts_render__at(m, mr, mc);
            bool masked = ts_render__masked(m, mr, mc, v);
            if (masked && !isinf(v)) continue; /* a zero under the mask says nothing */
            uint32_t px;
            value_pixel(m, s, lut, mr, mc, &px);
            ts_rgb cell = {(float)((px >> 16) & 255) / 255, (float)((px >> 8) & 255) / 255,
                           (float)(px & 255) / 255};
            bool dark = ts_rgb_luminance(cell) < 0.33;
            ts_render__font f = ts_render__font_of(size, 0, dark ? (ts_rgb){1, 1, 1} : ts_render__ink);
            fmt_cell(buf, sizeof buf, v, &digits);
            ts_render__text(p, buf, &f, c->grid.x + (k + 0.5) * c->cell_w, c->grid.y + (r + 0.5) * c->cell_h,
                            0.5, 0.5, 0);
        }
}

/* The user coordinate of the centre of the device pixel that starts at v
 * (an x when horizontal, else a y). */
static double pixel_centre(cairo_t *cr, double v, bool horizontal) {
    double x = horizontal ? v : 0, y = horizontal ? 0 : v;
    cairo_user_to_device(cr, &x, &y);
    if (horizontal) x = floor(x + 1e-6) + 0.5;
    else y = floor(y + 1e-6) + 0.5;
    cairo_device_to_user(cr, &x, &y);
    return horizontal ? x : y;
}

int ts_render__cells(ts_render__pen *p, const ts_render_matrix *m, const ts_render_scale *s,
                     const ts_render_cells *c, const ts_render__cell_opts *o) {
    cairo_t *cr = p->cr;
    if (c->rows <= 0 || c->cols <= 0) return 0;
    uint32_t lut[TS_CMAP_LUT_SIZE];
    ts_cmap_lut(s->cmap, lut);
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, c->cols, c->rows);
    cairo_surface_t *mask = NULL;
    if (cairo_surface_status(img) != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(img);
        return 0;
    }
    cairo_surface_flush(img);
    unsigned char *data = cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img);
    unsigned char *mdata = NULL;
    int mstride = 0, seen = 0;
    for (int r = 0; r < c->rows; r++) {
        uint32_t *row = (uint32_t *)(void *)(data + (size_t)r * (size_t)stride);
        for (int k = 0; k < c->cols; k++) {
            int kind = value_pixel(m, s, lut, c->row0 + r, c->col0 + k, &row[k]);
            seen |= kind;
            if (kind != 1) continue;
            if (!mask) {
                mask = cairo_image_surface_create(CAIRO_FORMAT_A8, c->cols, c->rows);
                cairo_surface_flush(mask);
                mdata = cairo_image_surface_get_data(mask);
                mstride = cairo_image_surface_get_stride(mask);
                if (mdata) memset(mdata, 0, (size_t)mstride * (size_t)c->rows);
            }
            if (mdata) mdata[(size_t)r * (size_t)mstride + (size_t)k] = 255;
        }
    }
    cairo_surface_mark_dirty(img);
    paint_scaled(cr, img, c, false);
    cairo_surface_destroy(img);

    if (mask && mdata) {
        /* Hatching through the mask: the stripes run on across neighbouring
         * masked cells, so the masked triangle of a causal mask reads as one
         * region. SVG and PDF get the masked cells as a clip path (runs of
         * cells per row): exact at any zoom, where SVG renderers place an
         * image mask each their own way. */
        cairo_surface_mark_dirty(mask);
        cairo_save(cr);
        if (cairo_surface_get_type(cairo_get_target(cr)) != CAIRO_SURFACE_TYPE_IMAGE) {
            for (int r = 0; r < c->rows; r++)
                for (int k = 0; k < c->cols;) {
                    if (!mdata[(size_t)r * (size_t)mstride + (size_t)k]) {
                        k++;
                        continue;
                    }
                    int k1 = k;
                    while (k1 < c->cols && mdata[(size_t)r * (size_t)mstride + (size_t)k1]) k1++;
                    cairo_rectangle(cr, c->grid.x + k * c->cell_w, c->grid.y + r * c->cell_h, (k1 - k) * c->cell_w,
                                    c->cell_h);
                    k = k1;
                }
            cairo_clip(cr);
            ts_render__hatch(cr, c->grid);
        } else {
            cairo_push_group(cr);
            ts_render__hatch(cr, c->grid);
            cairo_pop_group_to_source(cr);
            paint_scaled(cr, mask, c, true);
        }
        cairo_restore(cr);
    }
    if (mask) cairo_surface_destroy(mask);

    if (o->separators) {
        /* One device pixel wide, on a pixel's centre: a crisp line on any
         * surface, where a line between two pixels is two half-grey ones. */
        cairo_save(cr);
        cairo_set_source_rgb(cr, 1, 1, 1);
        double px = ts_render__pixel(cr);
        cairo_set_line_width(cr, px);
        for (int k = 1; k < c->cols; k++) {
            double x = pixel_centre(cr, c->grid.x + k * c->cell_w, true);
            cairo_move_to(cr, x, c->grid.y);
            cairo_line_to(cr, x, c->grid.y + c->grid.h);
        }
        for (int r = 1; r < c->rows; r++) {
            double y = pixel_centre(cr, c->grid.y + r * c->cell_h, false);
            cairo_move_to(cr, c->grid.x, y);
            cairo_line_to(cr, c->grid.x + c->grid.w, y);
        }
        cairo_stroke(cr);
        cairo_restore(cr);
    }
    if (o->values) draw_values(p, m, s, c, lut);

    cairo_save(cr);
    cairo_set_source_rgb(cr, 0.55, 0.55, 0.58);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, c->grid.x - 0.5, c->grid.y - 0.5, c->grid.w + 1, c->grid.h + 1);
    cairo_stroke(cr);
    if (o->highlight) {
        int r = o->hl_row - c->row0, k = o->hl_col - c->col0;
        if (r >= 0 && k >= 0 && r < c->rows && k < c->cols) {
            double x = c->grid.x + k * c->cell_w, y = c->grid.y + r * c->cell_h;
            cairo_set_source_rgb(cr, 0, 0, 0);
            cairo_set_line_width(cr, 2.5);
            cairo_rectangle(cr, x - 1.5, y - 1.5, c->cell_w + 3, c->cell_h + 3);
            cairo_stroke(cr);
            cairo_set_source_rgb(cr, 1, 1, 1);
            cairo_set_line_width(cr, 1);
            cairo_rectangle(cr, x - 0.25, y - 0.25, c->cell_w + 0.5, c->cell_h + 0.5);
            cairo_stroke(cr);
        }
    }
    cairo_restore(cr);
    return seen;
}

/* ---- labels ------------------------------------------------------------- */

/* The label of row/column i: the caller's, or its index. When only every
 * k-th is shown, a token gets its position in front ("40 dog"). */
static const char *label_of(const char *const *labels, int i, int k, char *buf, size_t size) {
    if (!labels) {
        snprintf(buf, size, "%d", i);
    } else if (k != 1) { /* thinned, or a zoomed-in block (k 0): where each token sits */
        snprintf(buf, size, "%d %s", i, labels[i] ? labels[i] : "");
    } else {
        return labels[i] ? labels[i] : "";
    }
    return buf;
}

/* Widest label (capped), measuring at most ~256 of them. */
static double widest_label(ts_render__pen *p, const char *const *labels, int n, const ts_render__font *f) {
    char buf[96];
    double w_max = 0;
    int step = n > 256 ? n / 256 + 1 : 1;
    for (int i = 0; i < n; i += step) {
        double w;
        /* Measure as if thinned when there are many: the index prefix counts. */
        ts_render__measure(p, label_of(labels, i, n > 24 ? 2 : 1, buf, sizeof buf), f, &w, NULL);
        w_max = fmax(w_max, w);
    }
    if (n > 1) {
        double w;
        ts_render__measure(p, label_of(labels, n - 1, n > 24 ? 2 : 1, buf, sizeof buf), f, &w, NULL);
        w_max = fmax(w_max, w);
    }
    return f->max_w > 0 ? fmin(w_max, f->max_w) : w_max;
}

/* Widest label of a window's block of `count` rows or columns from `first`,
 * as a window draws them: each with its position in front ("10 b"). */
static double widest_window_label(ts_render__pen *p, const char *const *labels, int first, int count,
                                  const ts_render__font *f) {
    char buf[96];
    double w_max = 0;
    for (int i = first; i < first + count && i < first + 256; i++) {
        double w;
        ts_render__measure(p, label_of(labels, i, 0, buf, sizeof buf), f, &w, NULL);
        w_max = fmax(w_max, w);
    }
    return f->max_w > 0 ? fmin(w_max, f->max_w) : w_max;
}

/* Whether index i of n gets its label when every k-th is shown: the
 * multiples of k and the last (the end of a sentence is what a teacher
 * points at), dropping a multiple too close to the last to fit. */
static bool labelled(int i, int n, int k) {
    if (k <= 1 || i == n - 1) return true;
    return i % k == 0 && n - 1 - i >= k;
}

/* "every 2nd", "every 5th": for the note that says labels were thinned. */
static void nth(char *buf, size_t size, int k) {
    const char *suffix = k % 100 >= 11 && k % 100 <= 13 ? "th" : k % 10 == 1 ? "st" : k % 10 == 2 ? "nd" : k % 10 == 3 ? "rd" : "th";
    snprintf(buf, size, "every %d%s", k, suffix);
}

/* Whether a window shows only part of the matrix: its labels then carry
 * their positions ("40 s"), so "row 40" in a text can be found. */
static bool windowed(const ts_render_cells *c) { return c->rows < c->total_rows || c->cols < c->total_cols; }

static int row_label_step(const ts_render_cells *c, double label_h) {
    return ts_render__label_step(c->cell_h, label_h * 1.05);
}

/* The row labels; returns k (every k-th shown). */
static int row_labels(ts_render__pen *p, const ts_render_matrix *m, const ts_render_cells *c,
                      const ts_render__font *f, double label_h, double x_right) {
    int k = row_label_step(c, label_h);
    char buf[96];
    cairo_t *cr = p->cr;
    for (int r = 0; r < c->rows; r++) {
        int i = c->row0 + r;
        if (!labelled(i, m->rows, k)) continue;
        double y = c->grid.y + (r + 0.5) * c->cell_h;
        ts_render__text(p, label_of(m->row_labels, i, k == 1 && windowed(c) ? 0 : k, buf, sizeof buf), f,
                        x_right - (k > 1 ? 5 : 3), y,
                        1, 0.5, 0);
        if (k > 1) {
            cairo_set_source_rgb(cr, 0.45, 0.45, 0.48);
            cairo_set_line_width(cr, 1);
            cairo_move_to(cr, c->grid.x - 3, y);
            cairo_line_to(cr, c->grid.x, y);
            cairo_stroke(cr);
        }
    }
    return k;
}

/* Column labels above the grid: level when the widest fits a cell (`flat_w`
 * > 0 is its width), otherwise turned to read upwards. */
static int col_label_step(const ts_render_cells *c, double label_h, double flat_w) {
    return flat_w > 0 ? ts_render__label_step(c->cell_w, flat_w + 6)
                      : ts_render__label_step(c->cell_w * sin(-LABEL_ANGLE), label_h * 1.05);
}

/* Returns k (every k-th shown). */
static int col_labels(ts_render__pen *p, const ts_render_matrix *m, const ts_render_cells *c,
                      const ts_render__font *f, double label_h, double y_bottom, double flat_w) {
    int k = col_label_step(c, label_h, flat_w);
    char buf[96];
    cairo_t *cr = p->cr;
    for (int j = 0; j < c->cols; j++) {
        int i = c->col0 + j;
        if (!labelled(i, m->cols, k)) continue;
        double x = c->grid.x + (j + 0.5) * c->cell_w;
        const char *text = label_of(m->col_labels, i, k == 1 && windowed(c) ? 0 : k, buf, sizeof buf);
        if (flat_w > 0)
            ts_render__text(p, text, f, x, y_bottom - (k > 1 ? 4 : 2), 0.5, 1, 0);
        else
            ts_render__text(p, text, f, x, y_bottom - (k > 1 ? 5 : 3), 0, 0.5, LABEL_ANGLE);
        if (k > 1) {
            cairo_set_source_rgb(cr, 0.45, 0.45, 0.48);
            cairo_set_line_width(cr, 1);
            cairo_move_to(cr, x, c->grid.y - 3);
            cairo_line_to(cr, x, c->grid.y);
            cairo_stroke(cr);
        }
    }
    return k;
}

/* An axis title that also says when its labels were thinned:
 * "query (every 2nd labelled: too small for all at this size)". */
static const char *axis_title(char *buf, size_t size, const char *axis, int k) {
    if (k <= 1) return axis;
    char every[32];
    nth(every, sizeof every, k);
    snprintf(buf, size, "%s \xc2\xb7 %s labelled, and the last", axis ? axis : "", every);
    return buf;
}

/* axis_title, shortened until it fits max_w in font f: "query · every 20th
 * labelled, and the last", "query · every 20th labelled", then "query". */
static const char *axis_title_fit(ts_render__pen *p, const ts_render__font *f, double max_w, char *buf, size_t size,
                                  const char *axis, int k) {
    ts_render__font whole = *f;
    whole.max_w = 0;
    double w;
    const char *t = axis_title(buf, size, axis, k);
    ts_render__measure(p, t, &whole, &w, NULL);
    if (k <= 1 || w <= max_w) return t;
    char every[32];
    nth(every, sizeof every, k);
    snprintf(buf, size, "%s \xc2\xb7 %s labelled", axis ? axis : "", every);
    ts_render__measure(p, buf, &whole, &w, NULL);
    return w <= max_w ? buf : axis;
}

/* Column groups (q | k | v, or heads): a line between groups, and each
 * group's name above it when the name fits its width. */
static void col_groups(ts_render__pen *p, const ts_render_matrix *m, const ts_render_cells *c,
                       const ts_render__font *f, double label_y) {
    if (m->col_group < 1 || m->col_group >= m->cols) return;
    cairo_t *cr = p->cr;
    int g0 = c->col0 / m->col_group, g1 = (c->col0 + c->cols - 1) / m->col_group;
    for (int g = g0; g <= g1; g++) {
        int a = g * m->col_group, b = a + m->col_group; /* columns [a, b) */
        int va = a > c->col0 ? a : c->col0, vb = b < c->col0 + c->cols ? b : c->col0 + c->cols;
        double x0 = c->grid.x + (va - c->col0) * c->cell_w, x1 = c->grid.x + (vb - c->col0) * c->cell_w;
        if (a > c->col0) { /* the line before the group */
            cairo_set_source_rgb(cr, 0.1, 0.1, 0.12);
            cairo_set_line_width(cr, 1.5);
            cairo_move_to(cr, x0, c->grid.y - 2);
            cairo_line_to(cr, x0, c->grid.y + c->grid.h + 2);
            cairo_stroke(cr);
        }
        const char *label = m->col_group_labels ? m->col_group_labels[g] : NULL;
        double w;
        if (!label) continue;
        ts_render__measure(p, label, f, &w, NULL);
        if (w + 4 <= x1 - x0) ts_render__text(p, label, f, (x0 + x1) / 2, label_y, 0.5, 0, 0);
    }
}

/* Vertical and horizontal room rotated column labels of width w need. */
static double col_label_height(double w, double h) { return w * sin(-LABEL_ANGLE) + h * cos(LABEL_ANGLE) + 6; }
static double col_label_overhang(double w, double h) { return w * cos(LABEL_ANGLE) + h * 0.5 * sin(-LABEL_ANGLE); }

/* Round a point to the device pixel grid, so cell edges fall on pixels. */
static void snap_point(cairo_t *cr, double *x, double *y) {
    cairo_user_to_device(cr, x, y);
    *x = round(*x);
    *y = round(*y);
    cairo_device_to_user(cr, x, y);
}

/* Cell size for n cells in `avail`: at least a pixel, and whole pixels (every
 * cell the same size) unless rounding down would waste more than 15% of the
 * room; then cells differ by a pixel, as imshow's nearest interpolation does. */
static double fit_cell(cairo_t *cr, double avail, int n) {
    double px = ts_render__pixel(cr);
    double cell = avail / n, most = MAX_CELL * ts_render_font_scale(); /* larger text, larger cells (a slide's) */
    if (cell > most) cell = most;
    if (cell < px) return px;
    double whole = floor(cell / px + 1e-9) * px;
    return whole >= cell * 0.85 ? whole : cell;
}

static ts_status check_matrix(const ts_render_matrix *m) {
    if (!m || !m->values) return ts_fail(TS_ERR_ARG, "render: no matrix values to draw");
    if (m->rows <= 0 || m->cols <= 0)
        return ts_fail(TS_ERR_ARG, "render: a %d x %d matrix has nothing to draw", m->rows, m->cols);
    return TS_OK;
}

static ts_status cairo_result(cairo_t *cr) {
    cairo_status_t cs = cairo_status(cr);
    if (cs != CAIRO_STATUS_SUCCESS) return ts_fail(TS_ERR_ARG, "render: cairo: %s", cairo_status_to_string(cs));
    return TS_OK;
}

/* ---- one matrix ------------------------------------------------------------ */

/* The part of the matrix a viewer state asks for. */
static void window_of(const ts_render_matrix *m, const ts_render_state *st, ts_render_cells *c) {
    memset(c, 0, sizeof *c);
    c->total_rows = m->rows;
    c->total_cols = m->cols;
    c->row0 = st ? st->row0 : 0;
    c->col0 = st ? st->col0 : 0;
    if (c->row0 < 0 || c->row0 >= m->rows) c->row0 = 0;
    if (c->col0 < 0 || c->col0 >= m->cols) c->col0 = 0;
    c->rows = m->rows - c->row0;
    c->cols = m->cols - c->col0;
    if (st && st->rows > 0 && st->rows < c->rows) c->rows = st->rows;
    if (st && st->cols > 0 && st->cols < c->cols) c->cols = st->cols;
}

ts_status ts_render_heatmap(cairo_t *cr, ts_render_rect area, const ts_render_matrix *m,
                            const ts_render_heatmap_opts *opts, const ts_render_state *st,
                            ts_render_layout *layout) {
    ts_status status = check_matrix(m);
    if (status) return status;
    ts_render_heatmap_opts none = {0};
    const ts_render_heatmap_opts *o = opts ? opts : &none;
    ts_render__pen pen;
    ts_render__pen_init(&pen, cr);
    ts_render_clear(cr, area);
    ts_render_scale scale = o->fixed_scale ? o->scale : ts_render_scale_auto(m, 1);
    const double pad = TS_RENDER__PAD, px = ts_render__pixel(cr);

    double top = area.y + ts_render__title(&pen, area, o->title, o->subtitle);
    if (!o->title && !o->subtitle) top += pad;
    ts_render__font lf = ts_render__font_of(TS_RENDER__LABEL_SIZE, 0, ts_render__ink);
    lf.max_w = 150;
    ts_render__font af = ts_render__font_of(TS_RENDER__LABEL_SIZE + 0.5, TS_RENDER__ITALIC, ts_render__muted);
    double label_h, axis_h;
    ts_render__measure(&pen, "Ag", &lf, NULL, &label_h);
    ts_render__measure(&pen, "Ag", &af, NULL, &axis_h);

    ts_render_cells c;
    window_of(m, st, &c);
    double row_w = widest_label(&pen, m->row_labels, m->rows, &lf);
    double col_w = widest_label(&pen, m->col_labels, m->cols, &lf);
    double left = (o->row_axis ? axis_h + 8 : 0) + row_w + 8;
    double axis_top = o->col_axis ? axis_h + 4 : 0;
    double group_h = m->col_group > 0 && m->col_group_labels ? label_h + 4 : 0; /* "q  k  v" above the columns */
    double bar_w = o->no_colorbar ? 0 : 22 + ts_render__colorbar_width(&pen, &scale, o->bar_label);
    int want_rows = c.rows, want_cols = c.cols;

    /* Size the cells for turned column labels; when the widest label then
     * fits in a cell, lay them flat and size again (cells only grow). */
    double top_h = 0, right = 0, avail_h = 0, flat_w = 0;
    bool partial = false, noted = false;
    /* Two passes (turned labels, then flat when they fit); two more when the
     * labels turn out thinned, to lay out again with a line for the note. */
    for (int pass = 0; pass < 2 || (pass < 4 && noted); pass++) {
        if (pass == 2) noted = true, flat_w = 0;
        top_h = axis_top + group_h + (flat_w > 0 ? label_h + 6 : col_label_height(col_w, label_h));
        right = flat_w > 0 ? bar_w : fmax(bar_w, col_label_overhang(col_w, label_h));
        double avail_w = area.w - 2 * pad - left - right;
        avail_h = area.y + area.h - pad - top - top_h;
        c.rows = want_rows;
        c.cols = want_cols;
        partial = c.cols * px > avail_w || c.rows * px > avail_h;
        if (partial || noted || (want_rows < m->rows || want_cols < m->cols)) avail_h -= label_h + 6;
        /* Never below one pixel a cell: show fewer cells, and say so. */
        if (avail_w < px) avail_w = px;
        if (avail_h < px) avail_h = px;
        if (c.cols * px > avail_w) c.cols = (int)(avail_w / px);
        if (c.rows * px > avail_h) c.rows = (int)(avail_h / px);
        if (c.cols < 1) c.cols = 1;
        if (c.rows < 1) c.rows = 1;
        double cw = avail_w / c.cols, ch = avail_h / c.rows;
        if (o->stretch || (st && st->stretch && st->rows > 0)) {
            /* Up to 1:4, and rows at least a label tall: a few tokens over
             * hundreds of one-pixel features read as rows, not a thin band. */
            cw = fmin(cw, 4 * ch);
            ch = fmin(ch, fmax(4 * cw, label_h * 1.3 + 1));
        } else {
            cw = ch = fmin(cw, ch);
        }
        c.cell_w = fit_cell(cr, cw * c.cols, c.cols);
        c.cell_h = fit_cell(cr, ch * c.rows, c.rows);
        if (!(o->stretch || (st && st->stretch && st->rows > 0))) c.cell_w = c.cell_h = fmin(c.cell_w, c.cell_h);
        /* Index labels (no names given) read best level, thinned. */
        if (flat_w > 0 || (m->col_labels && col_w + 6 > c.cell_w)) {
            if (pass < 2) pass = 1; /* the two passes are done; a third only for the note */
            if (noted) break;
            continue;
        }
        flat_w = col_w;
    }
    c.grid.w = c.cols * c.cell_w;
    c.grid.h = c.rows * c.cell_h;

    /* Centre the block (labels, cells, colour bar) in what is left. */
    double block_w = left + c.grid.w + right;
    double x0 = area.x + pad + fmax(0, (area.w - 2 * pad - block_w) / 2);
    c.grid.x = x0 + left;
    c.grid.y = top + top_h + fmax(0, (avail_h - c.grid.h) / 2);
    snap_point(cr, &c.grid.x, &c.grid.y);

    /* a zoomed-in block of a large matrix is small too: its values fit (a
     * block a little wider than a whole small matrix, since a page asked for it) */
    int most = windowed(&c) ? VALUES_MAX_WINDOW : VALUES_MAX;
    bool small = c.rows <= most && c.cols <= most;
    ts_render__cell_opts co = {
        .values = o->values == TS_RENDER_VALUES_ALWAYS || (o->values == TS_RENDER_VALUES_AUTO && small),
        .separators = c.cell_w >= 20 && c.cell_h >= 20,
        .highlight = st && st->highlight && st->hl_panel == 0,
        .hl_row = st ? st->hl_row : -1,
        .hl_col = st ? st->hl_col : -1,
    };
    int seen = ts_render__cells(&pen, m, &scale, &c, &co);
    int kr = row_labels(&pen, m, &c, &lf, label_h, c.grid.x);
    int kc = col_labels(&pen, m, &c, &lf, label_h, c.grid.y, flat_w);
    ts_render__font gf = ts_render__font_of(TS_RENDER__LABEL_SIZE, TS_RENDER__BOLD, ts_render__ink);
    col_groups(&pen, m, &c, &gf, c.grid.y - top_h + axis_top);
    char axis_buf[160];
    if (o->row_axis) {
        ts_render__font raf = af;
        /* along the rows, and past them into the free height of the area on both
         * sides: a grid of a few rows (a short answer's queries) is shorter than
         * "query (decoder)", and a title cut to "query (de…" names nothing */
        double mid = c.grid.y + c.grid.h / 2;
        /* (not above the column labels: the column-axis title runs left over them) */
        double half = fmin(mid - (c.grid.y - top_h + axis_top), area.y + area.h - pad - mid);
        raf.max_w = fmax(c.grid.h, 2 * half);
        /* left of the labels as drawn: thinned, a few short ones gain their index ("6 w"), wider than measured */
        double drawn_w = 0;
        for (int r = 0; r < c.rows; r++) {
            int i = c.row0 + r;
            if (!labelled(i, m->rows, kr)) continue;
            double w;
            ts_render__measure(&pen, label_of(m->row_labels, i, kr == 1 && windowed(&c) ? 0 : kr, axis_buf, sizeof axis_buf),
                               &lf, &w, NULL);
            drawn_w = fmax(drawn_w, w);
        }
        double title_x = fmin(x0 + axis_h / 2, c.grid.x - (kr > 1 ? 5 : 3) - drawn_w - 8 - axis_h / 2);
        ts_render__text(&pen, axis_title_fit(&pen, &raf, raf.max_w, axis_buf, sizeof axis_buf, o->row_axis, kr), &raf,
                        title_x, c.grid.y + c.grid.h / 2, 0.5, 0.5, -M_PI / 2);
    }
    if (o->col_axis) {
        ts_render__font caf = af;
        /* over the columns and the colour bar, and past them into the area's free
         * width on both sides: "next token (the vocabulary)" over a narrow grid */
        double mid = c.grid.x + c.grid.w / 2;
        double half = fmin(mid - (area.x + pad), area.x + area.w - pad - mid);
        caf.max_w = fmax(c.grid.w + right, 2 * half);
        ts_render__text(&pen, axis_title_fit(&pen, &caf, caf.max_w, axis_buf, sizeof axis_buf, o->col_axis, kc), &caf,
                        c.grid.x + c.grid.w / 2,
                        c.grid.y - top_h, 0.5, 0, 0);
    }

    ts_render_rect bar = {0, 0, 0, 0};
    if (!o->no_colorbar) {
        double h = fmax(c.grid.h, fmin(180, area.y + area.h - pad - c.grid.y));
        bar = (ts_render_rect){c.grid.x + c.grid.w + 22, c.grid.y, bar_w - 22, h};
        ts_render__colorbar(&pen, bar, &scale, seen, o->bar_label);
    }
    /* Say what is not drawn: a window of the matrix (thinned token labels
     * are said in the axis titles). */
    char note[320] = "";
    if (partial || windowed(&c))
        snprintf(note, sizeof note, "showing rows %d\xe2\x80\x93%d of %d, columns %d\xe2\x80\x93%d of %d%s",
                               c.row0, c.row0 + c.rows - 1, m->rows, c.col0, c.col0 + c.cols - 1, m->cols,
                               partial ? " (one pixel a cell)" : "");
    if (note[0]) {
        /* one line under the cells: shorter when the long one does not fit */
        ts_render__font nf = ts_render__font_of(TS_RENDER__TICK_SIZE, TS_RENDER__ITALIC, ts_render__muted);
        double room = area.x + area.w - pad - c.grid.x, w;
        ts_render__measure(&pen, note, &nf, &w, NULL);
        if (w > room) {
            snprintf(note, sizeof note, "rows %d\xe2\x80\x93%d of %d, columns %d\xe2\x80\x93%d of %d", c.row0,
                     c.row0 + c.rows - 1, m->rows, c.col0, c.col0 + c.cols - 1, m->cols);
            ts_render__measure(&pen, note, &nf, &w, NULL);
        }
        if (w > room)
            snprintf(note, sizeof note, "rows %d\xe2\x80\x93%d, cols %d\xe2\x80\x93%d", c.row0, c.row0 + c.rows - 1,
                     c.col0, c.col0 + c.cols - 1);
        nf.max_w = room;
        ts_render__text(&pen, note, &nf, c.grid.x, c.grid.y + c.grid.h + 4, 0, 0, 0);
    }
    if (layout) {
        memset(layout, 0, sizeof *layout);
        layout->n_panels = 1;
        layout->panel[0] = c;
        layout->colorbar = bar;
        layout->scale = scale;
    }
    ts_render__pen_free(&pen);
    return cairo_result(cr);
}

/* ---- several matrices ------------------------------------------------------ */

/* Grid shape that gives the largest cells for n panels of rows x cols. */
static void choose_grid(int n, int rows, int cols, double w, double h, double gap, double title_h, int group, int *gr,
                        int *gc) {
    double best = -1;
    *gr = 1;
    *gc = n;
    for (int c = 1; c <= n; c++) {
        if (group > 1 && c % group != 0 && group % c != 0) continue; /* a row holds whole groups, or a group whole rows */
        int r = (n + c - 1) / c;
        double cell = fmin((w - (c - 1) * gap) / ((double)c * cols), (h - r * title_h - (r - 1) * gap) / ((double)r * rows));
        if (cell > best * 1.0001) {
            best = cell;
            *gr = r;
            *gc = c;
        }
    }
}

ts_status ts_render_grid(cairo_t *cr, ts_render_rect area, const ts_render_matrix *m, int n,
                         const ts_render_grid_opts *opts, const ts_render_state *st,
                         ts_render_layout *layout) {
    if (n < 1 || n > TS_RENDER_MAX_PANELS)
        return ts_fail(TS_ERR_ARG, "render: a grid holds 1 to %d panels, not %d", TS_RENDER_MAX_PANELS, n);
    for (int i = 0; i < n; i++) {
        ts_status status = check_matrix(&m[i]);
        if (status) return status;
        if (m[i].rows != m[0].rows || m[i].cols != m[0].cols)
            return ts_fail(TS_ERR_SHAPE, "render: grid panel %d is %d x %d, panel 0 is %d x %d", i, m[i].rows,
                           m[i].cols, m[0].rows, m[0].cols);
    }
    ts_render_grid_opts none = {0};
    const ts_render_grid_opts *o = opts ? opts : &none;
    ts_render__pen pen;
    ts_render__pen_init(&pen, cr);
    ts_render_clear(cr, area);
    ts_render_scale scale = o->fixed_scale ? o->scale : ts_render_scale_auto(m, n);
    const double pad = TS_RENDER__PAD, gap = 16;
    /* A state's window (a lesson's zoom) shows the same block of every panel. */
    ts_render_cells win;
    window_of(&m[0], st, &win);
    const int rows = win.rows, cols = win.cols;
    const bool zoomed = rows < m[0].rows || cols < m[0].cols;

    double top = area.y + ts_render__title(&pen, area, o->title, o->subtitle);
    if (!o->title && !o->subtitle) top += pad;
    ts_render__font lf = ts_render__font_of(TS_RENDER__LABEL_SIZE, 0, ts_render__ink);
    lf.max_w = 120;
    ts_render__font hf = ts_render__font_of(TS_RENDER__LABEL_SIZE + 0.5, TS_RENDER__BOLD, ts_render__ink);
    double label_h;
    ts_render__measure(&pen, "Ag", &lf, NULL, &label_h);
    double title_h = o->panel_titles ? label_h + 4 : 0;

    int gr = o->grid_rows, gc = o->grid_cols;
    if (gr > 0 && gc <= 0) gc = (n + gr - 1) / gr;
    if (gc > 0 && gr <= 0) gr = (n + gc - 1) / gc;
    double header_w = 0, header_h = o->col_headers ? label_h + 6 : 0;
    double bar_w = 26 + ts_render__colorbar_width(&pen, &scale, o->bar_label);
    double avail_w = area.w - 2 * pad - bar_w;
    double avail_h = area.y + area.h - pad - top - header_h - (zoomed ? label_h + 6 : 0);
    int group = o->group > 1 && o->group_labels && n % o->group == 0 ? o->group : 0;
    double band_h = group ? label_h + 8 : 0; /* the band naming a group, above its panels' titles */
    title_h += band_h;
    if (gr <= 0 || gc <= 0) choose_grid(n, rows, cols, avail_w, avail_h, gap, title_h, group, &gr, &gc);
    if (o->row_headers)
        for (int r = 0; r < gr; r++) {
            double w;
            if (!o->row_headers[r]) continue;
            ts_render__measure(&pen, o->row_headers[r], &hf, &w, NULL);
            header_w = fmax(header_w, w + 10);
        }
    avail_w -= header_w;

    /* Token labels on the outer panels when cells are large enough to read:
     * rows left of the first column, columns between the first row's titles
     * and its cells (level when they fit a cell, turned otherwise). */
    double cell = fmin((avail_w - (gc - 1) * gap) / ((double)gc * cols),
                       (avail_h - gr * title_h - (gr - 1) * gap) / ((double)gr * rows));
    /* Small cells: labels thinned (every k-th, and the last), each with its
     * index, so a long text's rows can still be found and named. */
    bool labels = cell >= 13 || cell * fmin(rows, cols) >= 150;
    double row_w = 0, col_h = 0, flat_w = 0;
    if (labels) {
        /* a zoom's labels carry their positions ("10 b"): measured as drawn, or level
         * column labels wider than a cell run into each other */
        row_w = (zoomed ? widest_window_label(&pen, m[0].row_labels, win.row0, rows, &lf)
                        : widest_label(&pen, m[0].row_labels, rows, &lf)) + 8;
        double col_w = zoomed ? widest_window_label(&pen, m[0].col_labels, win.col0, cols, &lf)
                              : widest_label(&pen, m[0].col_labels, cols, &lf);
        for (int pass = 0; pass < 2; pass++) {
            col_h = flat_w > 0 ? label_h + 6 : col_label_height(col_w, label_h);
            cell = fmin((avail_w - row_w - (gc - 1) * gap) / ((double)gc * cols),
                        (avail_h - col_h - gr * title_h - (gr - 1) * gap) / ((double)gr * rows));
            if (flat_w > 0 || (m[0].col_labels && col_w + 6 > fmin(cell, MAX_CELL))) break;
            flat_w = col_w;
        }
    }
    /* Labels that will be thinned out need a line under the panels that says so. */
    bool thinned = labels && (cell < label_h * 1.05 || (flat_w <= 0 && cell * sin(-LABEL_ANGLE) < label_h * 1.05));
    if (thinned)
        cell = fmin(cell, (avail_h - label_h - 6 - col_h - gr * title_h - (gr - 1) * gap) / ((double)gr * rows));
    /* Thumbnails may go below a pixel a cell: they are averaged, not dropped. */
    double px = ts_render__pixel(cr);
    if (cell >= px) cell = fit_cell(cr, cell, 1);
    if (cell <= 0) cell = px;
    double pw = cell * cols, ph = cell * rows;

    double block_w = header_w + row_w + gc * pw + (gc - 1) * gap + bar_w;
    double x0 = area.x + pad + fmax(0, (area.w - 2 * pad - block_w) / 2) + header_w + row_w;
    double y0 = top + header_h + title_h + col_h; /* the first row's cells */
    int most = zoomed ? VALUES_MAX_WINDOW : VALUES_MAX;
    bool small = rows <= most && cols <= most;
    int seen = 0, kr = 1, kc = 1;
    if (layout) {
        memset(layout, 0, sizeof *layout);
        layout->n_panels = n;
        layout->scale = scale;
    }
    for (int i = 0; i < n; i++) {
        int gi = i / gc, gj = i % gc;
        ts_render_cells c;
        window_of(&m[i], st, &c);
        c.cell_w = c.cell_h = cell;
        c.grid = (ts_render_rect){x0 + gj * (pw + gap), y0 + gi * (ph + title_h + gap), pw, ph};
        snap_point(cr, &c.grid.x, &c.grid.y);
        ts_render__cell_opts co = {
            .values = small && cell >= 24,
            .separators = cell >= 20,
            .highlight = st && st->highlight && st->hl_panel == i,
            .hl_row = st ? st->hl_row : -1,
            .hl_col = st ? st->hl_col : -1,
        };
        seen |= ts_render__cells(&pen, &m[i], &scale, &c, &co);
        double above = gi == 0 ? col_h : 0; /* the first row has its labels under the title */
        if (o->panel_titles && o->panel_titles[i]) {
            ts_render__font tf = ts_render__font_of(TS_RENDER__LABEL_SIZE, TS_RENDER__BOLD, ts_render__ink);
            tf.max_w = pw;
            ts_render__text(&pen, o->panel_titles[i], &tf, c.grid.x, c.grid.y - above - 3, 0, 1, 0);
        }
        if (labels && gj == 0) kr = row_labels(&pen, &m[i], &c, &lf, label_h, c.grid.x);
        if (labels && gi == 0) kc = col_labels(&pen, &m[i], &c, &lf, label_h, c.grid.y, flat_w);
        if (o->row_headers && gj == 0 && gi < gr && o->row_headers[gi])
            ts_render__text(&pen, o->row_headers[gi], &hf, c.grid.x - row_w - 8, c.grid.y + ph / 2, 1, 0.5, 0);
        if (o->col_headers && gi == 0 && gj < gc && o->col_headers[gj])
            ts_render__text(&pen, o->col_headers[gj], &hf, c.grid.x + pw / 2, top, 0.5, 0, 0);
        if (layout) layout->panel[i] = c;
        /* A group's band: over the run of its panels in this row, in its colour, named once a row. */
        bool first = group && (gj == 0 || (i - 1) / group != i / group);
        if (first) {
            int last = i;
            while (last + 1 < n && (last + 1) / group == i / group && (last + 1) / gc == gi) last++;
            double bx = c.grid.x, bw = (last - i) * (pw + gap) + pw, by = c.grid.y - above - title_h;
            ts_rgb col = ts_render__palette(i / group);
            cairo_save(cr);
            cairo_set_source_rgba(cr, col.r, col.g, col.b, 0.16);
            cairo_rectangle(cr, bx, by, bw, band_h - 3);
            cairo_fill(cr);
            ts_render__set_rgb(cr, col);
            cairo_rectangle(cr, bx, by, bw, 2.5); /* a rule on top of the band */
            cairo_rectangle(cr, bx, c.grid.y + ph + 3, bw, 2.5); /* and under the group's cells */
            cairo_fill(cr);
            cairo_restore(cr);
            ts_render__font gf = ts_render__font_of(TS_RENDER__LABEL_SIZE, TS_RENDER__BOLD, ts_render__ink);
            gf.max_w = bw - 10;
            ts_render__text(&pen, o->group_labels[i / group], &gf, bx + 5, by + 2.5 + (band_h - 5.5) / 2, 0, 0.5, 0);
        }
    }
    double grid_h = gr * ph + (gr - 1) * (gap + title_h), thinned_h = 0;
    if (kr > 1 || kc > 1) { /* say that labels were thinned, as a heatmap's axis titles do */
        char note[160], a[32], b[32];
        nth(a, sizeof a, kr);
        nth(b, sizeof b, kc);
        if (kr == kc) snprintf(note, sizeof note, "%s row and column labelled, and the last", a);
        else snprintf(note, sizeof note, "rows: %s labelled, columns: %s, and the last of each", kr > 1 ? a : "every one",
                      kc > 1 ? b : "every one");
        ts_render__font nf = ts_render__font_of(TS_RENDER__TICK_SIZE, TS_RENDER__ITALIC, ts_render__muted);
        nf.max_w = gc * pw + (gc - 1) * gap; /* under the panels, wrapped: the colour bar is to their right */
        nf.max_lines = 3;
        ts_render__measure(&pen, note, &nf, NULL, &thinned_h);
        ts_render__text(&pen, note, &nf, x0, y0 + grid_h + 4, 0, 0, 0);
        thinned_h += 2;
    }
    double note_y = y0 + grid_h + 4 + thinned_h; /* the next line */
    double bar_h = fmin(fmax(grid_h, 160), area.y + area.h - pad - y0);
    ts_render_rect bar = {x0 + gc * pw + (gc - 1) * gap + 26, y0, bar_w - 26, bar_h};
    ts_render__colorbar(&pen, bar, &scale, seen, o->bar_label);
    if (layout) layout->colorbar = bar;
    if (zoomed) {
        char note[160];
        snprintf(note, sizeof note, "each panel shows rows %d\xe2\x80\x93%d of %d, columns %d\xe2\x80\x93%d of %d",
                 win.row0, win.row0 + rows - 1, m[0].rows, win.col0, win.col0 + cols - 1, m[0].cols);
        ts_render__font nf = ts_render__font_of(TS_RENDER__TICK_SIZE, TS_RENDER__ITALIC, ts_render__muted);
        ts_render__text(&pen, note, &nf, x0, note_y, 0, 0, 0);
    }
    ts_render__pen_free(&pen);
    return cairo_result(cr);
}
