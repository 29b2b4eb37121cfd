/* png: cairo image surfaces to PNG files and back.
 *
 * Writing goes through stb_image_write (zlib does the deflate) into a
 * temporary file that is renamed into place, so a reader never sees half an
 * image. Open the output first, draw, then commit: a path that cannot be
 * written is reported before any drawing is done.
 */
#ifndef TSCOPE_PNG_H
#define TSCOPE_PNG_H

#include <cairo.h>
#include <stdint.h>

#include "tscope/outfile.h"
#include "tscope/status.h"

/* A PNG being written: the temporary file, created by ts_png_open. */
typedef struct ts_png_out {
    ts_outfile file;
} ts_png_out;

/* Create the temporary file next to path. Fails (TS_ERR_IO, naming path)
 * when the directory is missing or not writable, or path is a directory. */
ts_status ts_png_open(ts_png_out *out, const char *path);

/* Encode an ARGB32 or RGB24 image surface, write it and rename it into place.
 * Closes out whatever happens. */
ts_status ts_png_commit(ts_png_out *out, cairo_surface_t *surface);

/* Drop the temporary file; nothing appears at path. Safe after commit. */
void ts_png_abort(ts_png_out *out);

/* open + commit in one call. */
ts_status ts_png_write(cairo_surface_t *surface, const char *path);

/* Cairo's native-endian, premultiplied ARGB32 (or RGB24) pixels to straight
 * (non-premultiplied) RGBA bytes, width * height * 4 of them, rows packed. */
ts_status ts_png_to_rgba(cairo_surface_t *surface, uint8_t *rgba);

/* Read a PNG (any of the formats stb_image reads) into a new ARGB32 image
 * surface, premultiplied as cairo wants. The caller destroys it. */
ts_status ts_png_read(const char *path, cairo_surface_t **out);

#endif
