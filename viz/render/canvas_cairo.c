/* canvas_cairo: the canvas interface (render.h) painted with cairo, for the
 * live views in the `tscope live` window and its PNGs. Text goes through
 * pango in the renderers' font, as every text of viz/ does; an image is a
 * cairo image surface scaled up with nearest-neighbour filtering, as the
 * page's canvas draws it with smoothing off. */
#include <glib-object.h>
#include <pango/pangocairo.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/render.h"

static void set_colour(cairo_t *cr, ts_rgb c) { cairo_set_source_rgb(cr, c.r, c.g, c.b); }

static void cr_rect(void *ctx, double x, double y, double w, double h, ts_rgb c) {
    cairo_t *cr = ctx;
    set_colour(cr, c);
    cairo_rectangle(cr, x, y, w, h);
    cairo_fill(cr);
}

/* The path built so far, stroked in c at `width`. */
static void stroke(cairo_t *cr, ts_rgb c, double width) {
    set_colour(cr, c);
    cairo_set_line_width(cr, width);
    cairo_stroke(cr);
}

static void cr_frame(void *ctx, double x, double y, double w, double h, ts_rgb c, double width) {
    cairo_rectangle(ctx, x, y, w, h);
    stroke(ctx, c, width);
}

static void cr_line(void *ctx, double x0, double y0, double x1, double y1, ts_rgb c, double width) {
    cairo_move_to(ctx, x0, y0);
    cairo_line_to(ctx, x1, y1);
    stroke(ctx, c, width);
}

static void cr_text(void *ctx, double x, double y, double size, ts_canvas_align a, ts_rgb c, bool bold, const char *s) {
    cairo_t *cr = ctx;
    PangoLayout *lay = ts_render_text_layout(cr);
    PangoFontDescription *fd = pango_font_description_from_string("DejaVu Sans");
    pango_font_description_set_absolute_size(fd, size * PANGO_SCALE);
    if (bold) pango_font_description_set_weight(fd, PANGO_WEIGHT_BOLD);
    pango_layout_set_font_description(lay, fd);
    pango_layout_set_text(lay, s, -1); /* plain text: a token may be "<" or "&" */
    int w, h;
    pango_layout_get_size(lay, &w, &h);
    set_colour(cr, c);
    cairo_move_to(cr, x - 0.5 * (int)a * w / PANGO_SCALE, y - (double)h / PANGO_SCALE / 2);
    ts_render_show_layout(cr, lay);
    pango_font_description_free(fd);
    g_object_unref(lay);
}

/* The cells as a cairo image, scaled up without smoothing and clipped to its box. */
static void cr_image(void *ctx, double x, double y, double w, double h, int cols, int rows, const unsigned char *rgba) {
    cairo_t *cr = ctx;
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, cols, rows);
    if (cairo_surface_status(img)) { /* out of memory: the box stays empty */
        cairo_surface_destroy(img);
        return;
    }
    unsigned char *dst = cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            const unsigned char *s = rgba + ((size_t)r * cols + c) * 4;
            uint32_t xrgb = 0xFF000000u | (uint32_t)s[0] << 16 | (uint32_t)s[1] << 8 | s[2];
            memcpy(dst + (size_t)r * stride + (size_t)c * 4, &xrgb, 4);
        }
    cairo_surface_mark_dirty(img);
    cairo_save(cr);
    cairo_rectangle(cr, x, y, w, h);
    cairo_clip(cr);
    cairo_translate(cr, x, y);
    cairo_scale(cr, w / cols, h / rows);
    cairo_set_source_surface(cr, img, 0, 0);
    cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
    cairo_paint(cr);
    cairo_restore(cr);
    cairo_surface_destroy(img);
}

static void cr_clip(void *ctx, double x, double y, double w, double h) {
    cairo_t *cr = ctx;
    cairo_save(cr);
    cairo_rectangle(cr, x, y, w, h);
    cairo_clip(cr);
}

static void cr_unclip(void *ctx) { cairo_restore(ctx); }

static const ts_canvas_ops CAIRO_OPS = {cr_rect, cr_frame, cr_line, cr_text, cr_image, cr_clip, cr_unclip};

void ts_canvas_cairo(ts_canvas *c, cairo_t *cr) {
    c->ops = &CAIRO_OPS, c->ctx = cr;
    ts_canvas_begin(c);
}
