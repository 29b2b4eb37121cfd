/* figure: one picture written to a file as PNG, SVG or PDF. The caller's
 * draw function paints into a cairo context; the format only decides which
 * cairo surface is under it (an image surface, cairo's SVG surface or its PDF
 * surface), so a vector figure is drawn by exactly the code that draws the
 * PNG. Output goes to a temporary file renamed into place (ts_outfile). */
#include <stdlib.h>

#include "render_internal.h"

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

static const char *const format_names[TS_FIGURE_FORMAT_COUNT] = {"png", "svg", "pdf"};

const char *ts_figure_format_name(ts_figure_format f) {
    return (unsigned)f < TS_FIGURE_FORMAT_COUNT ? format_names[f] : "?";
}

bool ts_figure_format_from_name(const char *name, ts_figure_format *out) {
    for (int i = 0; name && i < TS_FIGURE_FORMAT_COUNT; i++)
        if (strcasecmp(name, format_names[i]) == 0) {
            *out = (ts_figure_format)i;
            return true;
        }
    return false;
}

bool ts_figure_format_from_path(const char *path, ts_figure_format *out) {
    const char *dot = path ? strrchr(path, '.') : NULL;
    const char *slash = path ? strrchr(path, '/') : NULL;
    if (!dot || (slash && dot < slash)) return false;
    return ts_figure_format_from_name(dot + 1, out);
}

/* cairo's stream callback: errors stay in the outfile and surface at commit;
 * cairo is told too, so it stops writing. */
static cairo_status_t to_outfile(void *closure, const unsigned char *data, unsigned int length) {
    return ts_outfile_write(closure, data, length) == TS_OK ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

/* An SVG is first written to memory: its text layer is spliced in at the end. */
static cairo_status_t to_buf(void *closure, const unsigned char *data, unsigned int length) {
    ts_text_buf *b = closure;
    ts_text_buf_add(b, (const char *)data, length);
    return b->oom ? CAIRO_STATUS_NO_MEMORY : CAIRO_STATUS_SUCCESS;
}

/* ---- cairo's paths, shorter ----------------------------------------------------------------
 * cairo writes every stroke property of every path and six decimals of each
 * coordinate: a trace's pages of ticks and curves were mostly that. Inside
 * each <path> tag numbers keep two decimals (a hundredth of a point), the
 * properties equal to SVG's defaults are left out, and cairo's miter limit
 * (10, not SVG's 4) is said once, on the <svg>, whose paths inherit it. */

static const char *const svg_default_props[] = {
    "stroke-linecap:butt;", "stroke-linejoin:miter;", "stroke-opacity:1;", "stroke-miterlimit:10;",
    "fill-opacity:1;",      "fill-rule:nonzero;",     "stroke-width:1;",
};

/* One tag [s, e) with its numbers shortened, into out. */
static void short_numbers(ts_text_buf *out, const char *s, const char *e) {
    while (s < e) {
        bool starts = (*s >= '0' && *s <= '9') && !(out->len && (isalnum((unsigned char)out->s[out->len - 1]) ||
                                                                  out->s[out->len - 1] == '#' || out->s[out->len - 1] == '_'));
        if (!starts) {
            ts_text_buf_add(out, s++, 1);
            continue;
        }
        const char *q = s;
        while (q < e && ((*q >= '0' && *q <= '9') || *q == '.')) q++;
        char num[64], buf[64];
        size_t n = (size_t)(q - s) < sizeof num - 1 ? (size_t)(q - s) : sizeof num - 1;
        memcpy(num, s, n);
        num[n] = '\0';
        snprintf(buf, sizeof buf, "%.2f", strtod(num, NULL));
        size_t k = strlen(buf);
        while (k && buf[k - 1] == '0') k--;
        if (k && buf[k - 1] == '.') k--;
        ts_text_buf_add(out, buf, k);
        s = q;
    }
}

/* cairo's SVG body [s, e) with its paths shortened, into out. */
static void compact_paths(ts_text_buf *out, const char *s, const char *e) {
    for (;;) {
        const char *tag = s;
        while (tag < e && !(e - tag > 5 && memcmp(tag, "<path", 5) == 0 && (tag[5] == ' ' || tag[5] == '/'))) tag++;
        ts_text_buf_add(out, s, (size_t)(tag - s));
        if (tag >= e) return;
        const char *end = memchr(tag, '>', (size_t)(e - tag));
        end = end ? end + 1 : e;
        size_t from = out->len;
        short_numbers(out, tag, end);
        if (out->oom) return;
        /* the defaults, out of the tag just written (out->s[from..]) */
        for (size_t d = 0; d < sizeof svg_default_props / sizeof svg_default_props[0]; d++) {
            size_t dl = strlen(svg_default_props[d]);
            char *hit;
            while (out->len - from >= dl && (hit = strstr(out->s + from, svg_default_props[d]))) {
                memmove(hit, hit + dl, out->len - (size_t)(hit + dl - out->s) + 1);
                out->len -= dl;
            }
        }
        s = end;
    }
}

/* cairo's SVG with a <title> and <desc> after its opening tag and the text
 * layer before its closing one, written to file. */
static ts_status write_svg(ts_outfile *file, const ts_text_buf *svg, const ts_text_buf *layer,
                           const ts_figure_spec *spec) {
    const char *s = svg->s ? svg->s : "";
    const char *open = strstr(s, "<svg");
    const char *open_end = open ? strchr(open, '>') : NULL;
    const char *close = NULL;
    for (const char *p = s; (p = strstr(p, "</svg>")); p++) close = p;
    if (!open_end || !close || close < open_end) return ts_fail(TS_ERR_IO, "figure: cairo wrote no <svg> element");
    ts_text_buf head = {0};
    if (spec->title) {
        ts_text_buf_str(&head, "\n<title>");
        ts_render_svg_escape(&head, spec->title, (size_t)-1);
        ts_text_buf_str(&head, "</title>");
    }
    if (spec->desc) {
        ts_text_buf_str(&head, "\n<desc>");
        ts_render_svg_escape(&head, spec->desc, (size_t)-1);
        ts_text_buf_str(&head, "</desc>");
    }
    if (head.oom) {
        free(head.s);
        return ts_fail(TS_ERR_NOMEM, "figure: no memory for the SVG's title");
    }
    /* For browsers, cells are images of one pixel a cell: enlarged, they stay blocks. */
    ts_status st = ts_outfile_write(file, s, (size_t)(open_end - s));
    const char *crisp = spec->svg_pixelated ? " stroke-miterlimit=\"10\" style=\"image-rendering:pixelated\">"
                                            : " stroke-miterlimit=\"10\">";
    if (!st) st = ts_outfile_write(file, crisp, strlen(crisp));
    if (!st && head.len) st = ts_outfile_write(file, head.s, head.len);
    ts_text_buf body = {0};
    compact_paths(&body, open_end + 1, close);
    if (!st && body.oom) st = ts_fail(TS_ERR_NOMEM, "figure: no memory for the SVG");
    if (!st && body.len) st = ts_outfile_write(file, body.s, body.len);
    free(body.s);
    static const char text_open[] = "<g class=\"text\" xml:space=\"preserve\" text-rendering=\"geometricPrecision\" "
                                    "font-family=\"" TS_RENDER__SVG_FONT "\" fill=\"" TS_RENDER__SVG_INK "\">\n";
    if (!st && layer->len) st = ts_outfile_write(file, text_open, strlen(text_open));
    if (!st && layer->len) st = ts_outfile_write(file, layer->s, layer->len);
    if (!st && layer->len) st = ts_outfile_write(file, "</g>\n", 5);
    if (!st) st = ts_outfile_write(file, close, strlen(close));
    free(head.s);
    return st;
}

static cairo_surface_t *make_surface(const ts_figure_spec *spec, ts_outfile *file, ts_text_buf *svg) {
    switch (spec->format) {
    case TS_FIGURE_PNG:
        return cairo_image_surface_create(CAIRO_FORMAT_ARGB32, (int)lround(spec->width * spec->scale),
                                          (int)lround(spec->height * spec->scale));
    case TS_FIGURE_SVG: return cairo_svg_surface_create_for_stream(to_buf, svg, spec->width, spec->height);
    case TS_FIGURE_PDF: {
        cairo_surface_t *s = cairo_pdf_surface_create_for_stream(to_outfile, file, spec->width, spec->height);
        cairo_pdf_surface_set_metadata(s, CAIRO_PDF_METADATA_CREATOR, "tscope");
        if (spec->title) cairo_pdf_surface_set_metadata(s, CAIRO_PDF_METADATA_TITLE, spec->title);
        return s;
    }
    case TS_FIGURE_FORMAT_COUNT: break;
    }
    return NULL;
}

ts_status ts_figure_write(const char *path, const ts_figure_spec *spec, ts_figure_draw_fn draw, void *ctx) {
    if ((unsigned)spec->format >= TS_FIGURE_FORMAT_COUNT) return ts_fail(TS_ERR_ARG, "figure: unknown format");
    if (!(spec->width >= 1 && spec->height >= 1)) return ts_fail(TS_ERR_ARG, "figure: %g x %g points is empty", spec->width, spec->height);
    if (spec->format == TS_FIGURE_PNG && !(spec->scale > 0 && spec->scale <= 8))
        return ts_fail(TS_ERR_ARG, "figure: scale %g must be in (0, 8]", spec->scale);
    if (spec->format == TS_FIGURE_PNG && spec->width * spec->scale * spec->height * spec->scale > 200e6)
        return ts_fail(TS_ERR_ARG, "%.0f x %.0f pixels is too large an image", spec->width * spec->scale,
                       spec->height * spec->scale);
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return ts_fail(TS_ERR_IO, "cannot write %s: it is a directory", path);
    ts_outfile file;
    ts_status st = ts_outfile_open(&file, path);
    if (st) return st;
    ts_text_buf svg = {0}, layer = {0};
    cairo_surface_t *surf = make_surface(spec, &file, &svg);
    if (!surf || cairo_surface_status(surf) != CAIRO_STATUS_SUCCESS) {
        if (surf) cairo_surface_destroy(surf);
        free(svg.s);
        ts_outfile_abort(&file);
        return ts_fail(TS_ERR_NOMEM, "figure: cannot make a %g x %g %s surface", spec->width, spec->height,
                       ts_figure_format_name(spec->format));
    }
    cairo_t *cr = cairo_create(surf);
    /* A PNG has `scale` pixels per point; SVG and PDF are in points. */
    if (spec->format == TS_FIGURE_PNG) cairo_scale(cr, spec->scale, spec->scale);
    if (spec->format == TS_FIGURE_SVG) ts_render__svg_layer_begin(surf, &layer, spec->svg_pixelated);
    ts_render_clips_begin();
    st = draw(ctx, cr, spec->width, spec->height);
    ts_render__svg_layer_end();
    if (st == TS_OK) st = ts_render_clips_check(path); /* a cut label: a warning, or under tests an error */
    else ts_render_clips_end(NULL, 0);
    if (st == TS_OK && layer.oom) st = ts_fail(TS_ERR_NOMEM, "figure: no memory for the SVG's text");
    cairo_status_t cs = cairo_status(cr);
    cairo_destroy(cr);
    if (st == TS_OK && cs != CAIRO_STATUS_SUCCESS)
        st = ts_fail(TS_ERR_ARG, "figure: drawing failed: %s", cairo_status_to_string(cs));
    if (spec->format == TS_FIGURE_PNG) {
        if (st != TS_OK) {
            cairo_surface_destroy(surf);
            ts_outfile_abort(&file);
            return st;
        }
        cairo_surface_flush(surf);
        ts_png_out png = {file};
        st = ts_png_commit(&png, surf); /* commits (or aborts) the file */
        cairo_surface_destroy(surf);
        return st;
    }
    /* SVG and PDF are written as the surface finishes. */
    cairo_surface_finish(surf);
    cs = cairo_surface_status(surf);
    cairo_surface_destroy(surf);
    if (st == TS_OK && cs != CAIRO_STATUS_SUCCESS)
        st = ts_fail(TS_ERR_IO, "cannot write %s: %s", path, cairo_status_to_string(cs));
    if (st == TS_OK && spec->format == TS_FIGURE_SVG) st = write_svg(&file, &svg, &layer, spec);
    free(svg.s);
    free(layer.s);
    if (st != TS_OK) {
        ts_outfile_abort(&file);
        return st;
    }
    return ts_outfile_commit(&file);
}
