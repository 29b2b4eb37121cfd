/* png: cairo image surfaces written to PNG files (stb_image_write) and read back. */
#include "tscope/render.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

/* stb_image_write does the PNG framing; zlib's deflate replaces stb's own,
 * which is several times slower and makes larger files. Level 3 gives files
 * about 15% larger than level 6 in half the time. */
static unsigned char *png_deflate(unsigned char *data, int data_len, int *out_len, int quality);
#define STBIW_ZLIB_COMPRESS png_deflate

/* The stb headers are third-party code written to other warning settings;
 * their implementations are compiled here, static, with those warnings off. */
/* Unused static stb functions are reported at the end of the file, so this one
 * stays off for the whole file. */
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#pragma GCC diagnostic ignored "-Wtype-limits"
#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#include <stb_image.h>
#pragma GCC diagnostic pop

static unsigned char *png_deflate(unsigned char *data, int data_len, int *out_len, int quality) {
    (void)quality;
    uLongf n = compressBound((uLong)data_len);
    unsigned char *out = malloc(n);
    if (!out) return NULL;
    if (compress2(out, &n, data, (uLong)data_len, 3) != Z_OK) {
        free(out);
        return NULL;
    }
    *out_len = (int)n;
    return out;
}

ts_status ts_png_open(ts_png_out *out, const char *path) {
    memset(out, 0, sizeof *out);
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return ts_fail(TS_ERR_IO, "cannot write %s: it is a directory", path);
    return ts_outfile_open(&out->file, path);
}

void ts_png_abort(ts_png_out *out) { ts_outfile_abort(&out->file); }

ts_status ts_png_to_rgba(cairo_surface_t *surface, uint8_t *rgba) {
    if (cairo_surface_get_type(surface) != CAIRO_SURFACE_TYPE_IMAGE)
        return ts_fail(TS_ERR_ARG, "png: only image surfaces can be exported");
    cairo_format_t format = cairo_image_surface_get_format(surface);
    if (format != CAIRO_FORMAT_ARGB32 && format != CAIRO_FORMAT_RGB24)
        return ts_fail(TS_ERR_UNSUPPORTED, "png: image format %d is not ARGB32 or RGB24", (int)format);
    cairo_surface_flush(surface);
    int w = cairo_image_surface_get_width(surface), h = cairo_image_surface_get_height(surface);
    int stride = cairo_image_surface_get_stride(surface);
    const unsigned char *base = cairo_image_surface_get_data(surface);
    if (!base) return ts_fail(TS_ERR_ARG, "png: the surface has no pixels (finished or in error)");
    bool opaque = format == CAIRO_FORMAT_RGB24;
    for (int y = 0; y < h; y++) {
        const uint32_t *row = (const uint32_t *)(const void *)(base + (size_t)y * (size_t)stride);
        uint8_t *o = rgba + (size_t)y * (size_t)w * 4;
        for (int x = 0; x < w; x++, o += 4) {
            uint32_t p = row[x];
            uint32_t a = opaque ? 255 : p >> 24;
            uint32_t r = (p >> 16) & 255, g = (p >> 8) & 255, b = p & 255;
            if (a != 255 && a != 0) {
                /* Undo premultiplication, rounding to nearest. */
                r = (r * 255 + a / 2) / a;
                g = (g * 255 + a / 2) / a;
                b = (b * 255 + a / 2) / a;
            }
            o[0] = (uint8_t)(r > 255 ? 255 : r);
            o[1] = (uint8_t)(g > 255 ? 255 : g);
            o[2] = (uint8_t)(b > 255 ? 255 : b);
            o[3] = (uint8_t)a;
        }
    }
    return TS_OK;
}

static void write_to_outfile(void *ctx, void *data, int size) {
    /* Errors are sticky in the outfile and surface at commit. */
    (void)ts_outfile_write(ctx, data, (size_t)size);
}

ts_status ts_png_commit(ts_png_out *out, cairo_surface_t *surface) {
    if (cairo_surface_status(surface) != CAIRO_STATUS_SUCCESS) {
        ts_png_abort(out);
        return ts_fail(TS_ERR_ARG, "png: drawing failed: %s",
                       cairo_status_to_string(cairo_surface_status(surface)));
    }
    int w = cairo_image_surface_get_width(surface), h = cairo_image_surface_get_height(surface);
    if (w <= 0 || h <= 0) {
        ts_png_abort(out);
        return ts_fail(TS_ERR_ARG, "png: the image is empty (%d x %d)", w, h);
    }
    uint8_t *rgba = malloc((size_t)w * (size_t)h * 4);
    if (!rgba) {
        ts_png_abort(out);
        return ts_fail(TS_ERR_NOMEM, "png: no memory for a %d x %d image", w, h);
    }
    ts_status st = ts_png_to_rgba(surface, rgba);
    if (st == TS_OK && !stbi_write_png_to_func(write_to_outfile, &out->file, w, h, 4, rgba, w * 4))
        st = ts_fail(TS_ERR_NOMEM, "png: encoding a %d x %d image failed", w, h);
    free(rgba);
    if (st != TS_OK) {
        ts_png_abort(out);
        return st;
    }
    return ts_outfile_commit(&out->file);
}

ts_status ts_png_write(cairo_surface_t *surface, const char *path) {
    ts_png_out out;
    ts_status st = ts_png_open(&out, path);
    if (st) return st;
    return ts_png_commit(&out, surface);
}

ts_status ts_png_read(const char *path, cairo_surface_t **out) {
    *out = NULL;
    int w, h, comp;
    errno = 0;
    unsigned char *rgba = stbi_load(path, &w, &h, &comp, 4);
    if (!rgba) {
        if (errno == ENOENT) return ts_fail(TS_ERR_IO, "cannot open %s: %s", path, strerror(errno));
        return ts_fail(TS_ERR_FORMAT, "%s: not a PNG tscope can read (%s)", path, stbi_failure_reason());
    }
    cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, w, h);
    if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS) {
        stbi_image_free(rgba);
        cairo_surface_destroy(s);
        return ts_fail(TS_ERR_NOMEM, "%s: no memory for a %d x %d image", path, w, h);
    }
    cairo_surface_flush(s);
    unsigned char *base = cairo_image_surface_get_data(s);
    int stride = cairo_image_surface_get_stride(s);
    for (int y = 0; y < h; y++) {
        uint32_t *row = (uint32_t *)(void *)(base + (size_t)y * (size_t)stride);
        const unsigned char *p = rgba + (size_t)y * (size_t)w * 4;
        for (int x = 0; x < w; x++, p += 4) {
            uint32_t a = p[3];
            uint32_t r = (p[0] * a + 127) / 255, g = (p[1] * a + 127) / 255, b = (p[2] * a + 127) / 255;
            row[x] = a << 24 | r << 16 | g << 8 | b;
        }
    }
    cairo_surface_mark_dirty(s);
    stbi_image_free(rgba);
    *out = s;
    return TS_OK;
}
