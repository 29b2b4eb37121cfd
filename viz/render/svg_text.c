/* svg_text: the text of an SVG figure as <text> elements.
 *
 * cairo's SVG surface writes text as glyph outlines (<symbol> and <use>):
 * it looks right but cannot be selected, searched or edited. So while a
 * figure is drawn into an SVG surface (figure.c opens a layer around the
 * drawing), every layout that ts_render_show_layout would show is recorded
 * here instead, from the layout pango made for the drawing: each run becomes
 * a <text> with its font, colour and the x where pango placed its first
 * glyph, so the SVG text starts where the PNG's glyphs start. The
 * layer is spliced into the SVG last, on top of the drawing, which is where
 * the views draw their text anyway. One drawing path: the views do not know
 * which surface is under them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render_internal.h"

/* The layer being recorded, for one surface on this thread. */
static _Thread_local cairo_surface_t *layer_surface;
static _Thread_local ts_text_buf *layer_buf;
static _Thread_local int layer_clips;
static _Thread_local bool layer_pixelated;

void ts_render__svg_layer_begin(cairo_surface_t *surface, ts_text_buf *buf, bool pixelated) {
    layer_surface = surface;
    layer_buf = buf;
    layer_clips = 0;
    layer_pixelated = pixelated;
}

void ts_render__svg_layer_end(void) {
    layer_surface = NULL;
    layer_buf = NULL;
}

static bool layer_active(cairo_t *cr) { return layer_buf && cairo_get_target(cr) == layer_surface; }

void ts_render_svg_add(cairo_t *cr, const char *svg) {
    if (layer_active(cr) && svg) ts_text_buf_str(layer_buf, svg);
}

bool ts_render_svg_recording(cairo_t *cr) { return layer_active(cr); }

bool ts_render__svg_pixelated(cairo_t *cr) { return layer_active(cr) && layer_pixelated; }

void ts_render_svg_escape(ts_text_buf *b, const char *s, size_t n) {
    for (size_t i = 0; i < n && s[i]; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '&': ts_text_buf_str(b, "&amp;"); break;
        case '<': ts_text_buf_str(b, "&lt;"); break;
        case '>': ts_text_buf_str(b, "&gt;"); break;
        case '"': ts_text_buf_str(b, "&quot;"); break;
        default:
            /* XML 1.0 allows no control characters but tab and newline. */
            if (c < 0x20 && c != '\t' && c != '\n') ts_text_buf_str(b, " ");
            else ts_text_buf_add(b, (const char *)&c, 1);
        }
    }
}

static int utf8_len(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

/* A run's colour: a foreground attribute of the markup, else cairo's source. */
static void run_color(cairo_t *cr, PangoLayoutRun *run, double rgba[4]) {
    rgba[0] = rgba[1] = rgba[2] = 0;
    rgba[3] = 1;
    cairo_pattern_t *src = cairo_get_source(cr);
    if (cairo_pattern_get_type(src) == CAIRO_PATTERN_TYPE_SOLID)
        cairo_pattern_get_rgba(src, &rgba[0], &rgba[1], &rgba[2], &rgba[3]);
    for (GSList *l = run->item->analysis.extra_attrs; l; l = l->next) {
        PangoAttribute *a = l->data;
        if (a->klass->type == PANGO_ATTR_FOREGROUND) {
            PangoColor c = ((PangoAttrColor *)a)->color;
            rgba[0] = c.red / 65535.0, rgba[1] = c.green / 65535.0, rgba[2] = c.blue / 65535.0;
        } else if (a->klass->type == PANGO_ATTR_FOREGROUND_ALPHA) {
            rgba[3] *= ((PangoAttrInt *)a)->value / 65535.0;
        }
    }
}

/* The ellipsis pango puts in place of cut text: one cluster (every
 * log_cluster 0) standing for several characters. */
static bool is_ellipsis_run(PangoLayout *layout, PangoLayoutRun *run) {
    if (!pango_layout_is_ellipsized(layout) || run->item->num_chars < 2) return false;
    for (int i = 0; i < run->glyphs->num_glyphs; i++)
        if (run->glyphs->log_clusters[i] != 0) return false;
    return true;
}

/* One run as a <text>: characters and their x positions, in layout units
 * offset by (x0, y0) in cairo user space. */
static void emit_run(cairo_t *cr, PangoLayout *layout, PangoLayoutRun *run, double rx, double baseline, double x0,
                     double y0, const char *clip) {
    PangoGlyphString *gs = run->glyphs;
    if (!gs || gs->num_glyphs == 0) return;
    const char *text = pango_layout_get_text(layout);
    ts_text_buf chars = {0};
    double x_first = 0; /* where the run's first character starts */
    bool ellipsis = is_ellipsis_run(layout, run);
    double x = rx, y = 0;
    int visible = 0;
    for (int i = 0; i < gs->num_glyphs; i++) {
        PangoGlyphInfo *g = &gs->glyphs[i];
        double gx = x0 + (x + g->geometry.x_offset) / PANGO_SCALE;
        if (i == 0) y = y0 + (baseline - run->y_offset + g->geometry.y_offset) / PANGO_SCALE;
        double w = (double)g->geometry.width / PANGO_SCALE;
        x += g->geometry.width;
        if (ellipsis) {
            if (i == 0) {
                ts_text_buf_str(&chars, "\xe2\x80\xa6");
                x_first = gx;
                visible++;
            }
            continue;
        }
        if (i > 0 && gs->log_clusters[i] == gs->log_clusters[i - 1]) continue; /* same cluster */
        int start = run->item->offset + gs->log_clusters[i];
        int end = run->item->offset + run->item->length;
        for (int j = i + 1; j < gs->num_glyphs; j++)
            if (gs->log_clusters[j] != gs->log_clusters[i]) {
                end = run->item->offset + gs->log_clusters[j];
                break;
            }
        /* the cluster's width: this glyph and the others of its cluster */
        for (int j = i + 1; j < gs->num_glyphs && gs->log_clusters[j] == gs->log_clusters[i]; j++)
            w += (double)gs->glyphs[j].geometry.width / PANGO_SCALE;
        int n = 0;
        for (int b = start; b < end; b += utf8_len((unsigned char)text[b])) n++;
        int k = 0;
        for (int b = start; b < end && text[b]; k++) {
            int len = utf8_len((unsigned char)text[b]);
            if (text[b] == '\n' || text[b] == '\r') break;
            ts_render_svg_escape(&chars, text + b, (size_t)len);
            /* The run's start only: the browser advances each character with the
             * same font. Pango's glyph positions here are device units, which
             * under a scaled figure's transform spread the letters apart. */
            if (!visible) x_first = gx + w * k / (n > 0 ? n : 1);
            visible++;
            b += len;
        }
    }
    if (visible > 0 && !chars.oom) {
        PangoFontDescription *fd = pango_font_describe_with_absolute_size(run->item->analysis.font);
        const char *family = pango_font_description_get_family(fd);
        bool mono = family && strstr(family, "Mono");
        double size = (double)pango_font_description_get_size(fd) / PANGO_SCALE;
        int weight = pango_font_description_get_weight(fd);
        PangoStyle style = pango_font_description_get_style(fd);
        double rgba[4];
        run_color(cr, run, rgba);
        ts_text_buf *b = layer_buf;
        ts_text_buf_str(b, "<text");
        cairo_matrix_t m;
        cairo_get_matrix(cr, &m);
        /* a move alone goes into x and y: most texts carry no transform */
        bool moved = m.xx == 1 && m.yx == 0 && m.xy == 0 && m.yy == 1;
        if (!moved)
            ts_text_buf_printf(b, " transform=\"matrix(%.6g %.6g %.6g %.6g %.3f %.3f)\"", m.xx, m.yx, m.xy, m.yy,
                               m.x0, m.y0);
        if (clip) ts_text_buf_printf(b, " clip-path=\"url(#%s)\"", clip);
        ts_text_buf_printf(b, " x=\"%.2f\" y=\"%.2f\"", x_first + (moved ? m.x0 : 0),
                           y + (moved ? m.y0 : 0));
        /* the layer's <g> gives the default family and ink (figure.c): only others are written */
        char fam[160];
        snprintf(fam, sizeof fam, "%s, %s", family ? family : "DejaVu Sans", mono ? "monospace" : "sans-serif");
        if (strcmp(fam, TS_RENDER__SVG_FONT) != 0) {
            ts_text_buf_str(b, " font-family=\"");
            ts_render_svg_escape(b, fam, (size_t)-1);
            ts_text_buf_str(b, "\"");
        }
        /* pango describes a font by its size on the device; the <text> is in user units (its transform) */
        double k = sqrt(fabs(m.xx * m.yy - m.xy * m.yx));
        ts_text_buf_printf(b, " font-size=\"%.2f\"", k > 0 ? size / k : size);
        if (weight >= PANGO_WEIGHT_SEMIBOLD) ts_text_buf_printf(b, " font-weight=\"%d\"", weight >= 700 ? 700 : weight);
        if (style != PANGO_STYLE_NORMAL) ts_text_buf_str(b, " font-style=\"italic\"");
        char fill[8];
        snprintf(fill, sizeof fill, "#%02x%02x%02x", (int)lround(rgba[0] * 255) & 255, (int)lround(rgba[1] * 255) & 255,
                 (int)lround(rgba[2] * 255) & 255);
        if (strcmp(fill, TS_RENDER__SVG_INK) != 0) ts_text_buf_printf(b, " fill=\"%s\"", fill);
        if (rgba[3] < 1) ts_text_buf_printf(b, " fill-opacity=\"%.3f\"", rgba[3]);
        ts_text_buf_printf(b, ">%s</text>\n", chars.s);
        pango_font_description_free(fd);
    }
    free(chars.s);
}

bool ts_render__svg_text(cairo_t *cr, PangoLayout *layout) {
    if (!layer_active(cr)) return false;
    const char *text = pango_layout_get_text(layout);
    if (!text || !*text) return true;
    double x0 = 0, y0 = 0;
    if (cairo_has_current_point(cr)) cairo_get_current_point(cr, &x0, &y0);
    /* A clip the text does not fit in (a cell, a plot's frame) clips it in the SVG too. */
    char clip_id[32] = "", *clip = NULL;
    PangoRectangle ink;
    pango_layout_get_extents(layout, &ink, NULL);
    double cx1, cy1, cx2, cy2;
    cairo_clip_extents(cr, &cx1, &cy1, &cx2, &cy2);
    double tx1 = x0 + (double)ink.x / PANGO_SCALE, ty1 = y0 + (double)ink.y / PANGO_SCALE;
    double tx2 = tx1 + (double)ink.width / PANGO_SCALE, ty2 = ty1 + (double)ink.height / PANGO_SCALE;
    if (cx2 > cx1 && cy2 > cy1 && (tx1 < cx1 || ty1 < cy1 || tx2 > cx2 || ty2 > cy2)) {
        if (tx2 <= cx1 || tx1 >= cx2 || ty2 <= cy1 || ty1 >= cy2) return true; /* clipped away */
        snprintf(clip_id, sizeof clip_id, "tsclip%d", ++layer_clips);
        clip = clip_id;
        /* in the text's units: a move alone is in its x and y (emit_run), so in the clip's too */
        cairo_matrix_t m;
        cairo_get_matrix(cr, &m);
        bool moved = m.xx == 1 && m.yx == 0 && m.xy == 0 && m.yy == 1;
        ts_text_buf_printf(layer_buf,
                           "<clipPath id=\"%s\" clipPathUnits=\"userSpaceOnUse\"><rect x=\"%.2f\" y=\"%.2f\" "
                           "width=\"%.2f\" height=\"%.2f\"/></clipPath>\n",
                           clip, cx1 + (moved ? m.x0 : 0), cy1 + (moved ? m.y0 : 0), cx2 - cx1, cy2 - cy1);
    }
    PangoLayoutIter *it = pango_layout_get_iter(layout);
    do {
        PangoLayoutRun *run = pango_layout_iter_get_run_readonly(it);
        if (!run) continue;
        PangoRectangle logical;
        pango_layout_iter_get_run_extents(it, NULL, &logical);
        emit_run(cr, layout, run, logical.x, pango_layout_iter_get_baseline(it), x0, y0, clip);
    } while (pango_layout_iter_next_run(it));
    pango_layout_iter_free(it);
    return true;
}
