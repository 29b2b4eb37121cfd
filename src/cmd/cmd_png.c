/* tscope png: one view of a trace as a PNG, SVG or PDF (by the output's
 * extension), with no display. A scene (render.h, "scene": the same data path
 * the viewer uses) picks the view by the step's tag or --view and gathers its
 * data from the trace; the renderers draw it into a cairo surface (an image
 * for PNG, cairo's SVG or PDF surface for the others: render.h, "figure").
 * The output is opened before anything is drawn, so a path that cannot be
 * written costs nothing. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "tscope/render.h"
#include "tscope/trace.h"

#define CMD "png"

/* What the flags asked for. Defaults are set in ts_cmd_png. */
typedef struct png_args {
    const char *trace_path;
    const char *tensor;
    const char *view;
    const char *out;
    const char *axes;
    int batch, layer, head, step;
    int width, height;
    float scale;
    bool layer_seen, head_seen, batch_seen, scale_seen;
    ts_figure_format format;
} png_args;

static int fail(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

static int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tscope %s: ", CMD);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

/* "encoder.layers.0.self_attn.weights.grid.png", ".head3" for one head. */
static void default_output(char *buf, size_t size, const png_args *a, const ts_scene *sc) {
    if (ts_scene_view(sc) == TS_RENDER_VIEW_HEATMAP && a->head_seen)
        snprintf(buf, size, "%s.head%d.%s.png", a->tensor, a->head, ts_scene_view_name(sc));
    else
        snprintf(buf, size, "%s.%s.png", a->tensor, ts_scene_view_name(sc));
}

typedef struct draw_job {
    ts_scene *sc;
    ts_render_layout *layout;
} draw_job;

static ts_status draw_scene(void *ctx, cairo_t *cr, double w, double h) {
    draw_job *job = ctx;
    return ts_scene_draw(job->sc, cr, (ts_render_rect){0, 0, w, h}, NULL, job->layout);
}

/* Cells never go below a pixel, so a wide tensor shows its first columns:
 * say how large a picture shows them all. */
static void note_partial(const ts_render_layout *l, int w, int h, float scale) {
    const ts_render_cells *c = l->n_panels > 0 ? &l->panel[0] : NULL;
    if (!c || (c->cols >= c->total_cols && c->rows >= c->total_rows)) return;
    printf("png: note: only rows 0..%d and columns 0..%d of %d x %d fit at one pixel a cell; "
           "--width %d --height %d shows them all\n",
           c->row0 + c->rows - 1, c->col0 + c->cols - 1, c->total_rows, c->total_cols,
           w + (int)ceil((c->total_cols - c->cols) / scale), h + (int)ceil((c->total_rows - c->rows) / scale));
}

/* Draw the scene at its size (or the one asked for) and write it. */
static int export(const png_args *a, ts_scene *sc) {
    int w, h;
    ts_scene_size(sc, &w, &h);
    if (a->width > 0) w = a->width;
    if (a->height > 0) h = a->height;
    char path[600];
    const char *out = a->out;
    if (!out) {
        default_output(path, sizeof path, a, sc);
        out = path;
    }
    ts_render_layout *layout = calloc(1, sizeof *layout);
    if (!layout) return fail("out of memory");
    draw_job job = {sc, layout};
    ts_figure_spec spec = {.format = a->format, .width = w, .height = h, .scale = a->scale,
                           .title = ts_scene_step(sc) ? ts_scene_step(sc)->name : a->tensor};
    ts_status st = ts_figure_write(out, &spec, draw_scene, &job);
    if (st == TS_OK) {
        if (a->format == TS_FIGURE_PNG)
            printf("png: wrote %s (%ld x %ld pixels, view %s)\n", out, lround(w * a->scale), lround(h * a->scale),
                   ts_scene_view_name(sc));
        else
            printf("png: wrote %s (%s, %d x %d points, view %s)\n", out, ts_figure_format_name(a->format), w, h,
                   ts_scene_view_name(sc));
        note_partial(layout, w, h, a->format == TS_FIGURE_PNG ? a->scale : 1);
    }
    free(layout);
    return st == TS_OK ? 0 : fail("%s", ts_last_error());
}

/* A flag the picture does not show is an error, not a silent no-op. -1: all used. */
static int unused(const png_args *a, const ts_scene *sc) {
    unsigned used = ts_scene_used(sc);
    const char *view = ts_scene_view_name(sc), *name = a->tensor;
    if (a->head_seen && !(used & TS_SCENE_USED_HEAD))
        return fail("--head %d: the %s view of %s shows no single head (one is drawn from an attention step's "
                    "(B, H, Sq, Sk), or dim 1 of a (B, H, ...) tensor)", a->head, view, name);
    if (a->batch_seen && !(used & TS_SCENE_USED_BATCH))
        return fail("--batch %d: the %s view of %s has no batch element to choose", a->batch, view, name);
    if (a->axes && !(used & TS_SCENE_USED_AXES))
        return fail("--axes %s picks the two dims of a tensor heatmap; the %s view of %s has its own", a->axes, view,
                    name);
    return -1;
}

int ts_cmd_png(int argc, char **argv) {
    /* -o is the one short flag people type without thinking: read it as --output. */
    char **args = malloc(sizeof *args * (size_t)(argc + 1));
    if (!args) return fail("out of memory");
    for (int i = 0; i < argc; i++) args[i] = strcmp(argv[i], "-o") == 0 && i > 0 ? "--output" : argv[i];
    args[argc] = NULL;

    png_args a = {.view = "auto", .batch = 0, .head = 0, .step = 0, .scale = 1};
    const ts_flag flags[] = {
        {"--tensor", TS_FLAG_STRING, &a.tensor, "NAME", "the step to draw, e.g. encoder.layers.0.self_attn.weights", NULL, NULL, NULL},
        {"--view", TS_FLAG_CHOICE, &a.view, "V",
         "auto|heatmap|grid|overview|curves|stats|shapes|lens; auto goes by the step's tag: attention -> grid "
         "(heatmap with --head), PE -> curves + heatmap, norm -> stats, lens.layers.N -> lens, else heatmap (auto)",
         "auto|heatmap|grid|overview|curves|stats|shapes|lens", NULL, NULL},
        {"--batch", TS_FLAG_INT, &a.batch, "I", "batch element (0)", NULL, NULL, &a.batch_seen},
        {"--layer", TS_FLAG_INT, &a.layer, "L", "the same step in layer L (replaces layers.N in the name)", NULL, NULL,
         &a.layer_seen},
        {"--head", TS_FLAG_INT, &a.head, "H", "one attention head (auto then draws a heatmap) (0)", NULL, NULL, &a.head_seen},
        {"--step", TS_FLAG_INT, &a.step, "K", "which record of the name, for traces that repeat names (0; -1: last)", NULL,
         NULL, NULL},
        {"--axes", TS_FLAG_STRING, &a.axes, "I,J", "the two dims a heatmap of any tensor shows (the last two)", NULL, NULL, NULL},
        {"--output", TS_FLAG_STRING, &a.out, "FILE",
         "the file to write, also -o FILE: .png, .svg or .pdf (vector, for slides and papers) (NAME.VIEW.png)", NULL,
         NULL, NULL},
        {"--width", TS_FLAG_INT, &a.width, "W", "width in points (chosen for the view)", NULL, NULL, NULL},
        {"--height", TS_FLAG_INT, &a.height, "H", "height in points (chosen for the view)", NULL, NULL, NULL},
        {"--scale", TS_FLAG_FLOAT, &a.scale, "S", "PNG pixels per point, 2 for slides on HiDPI screens (1)", NULL, NULL,
         &a.scale_seen},
    };
    const ts_cli_spec spec = {
        .command = CMD,
        .synopsis = "TRACE --tensor NAME [--view V] [--batch I] [--layer L] [--head H] [--step K] [-o FILE.png|svg|pdf]\n"
                    "       [--width W --height H --scale S]",
        .description = "Draw one step of a trace as PNG, SVG or PDF (the extension of -o picks), with no display:\n"
                       "attention heads and grids, the layers x heads overview, positional encoding curves,\n"
                       "LayerNorm statistics, any tensor as a heatmap with its statistics, or the data flow of\n"
                       "a module's steps. SVG and PDF are drawn by the same code as the PNG, in points.",
        .flags = flags,
        .n_flags = (int)(sizeof flags / sizeof flags[0]),
        .min_positional = 1,
        .max_positional = 1,
        .positional_meta = "TRACE",
    };
    const char *positional[1] = {NULL};
    int rc = ts_cli_parse(&spec, argc, args, positional, NULL);
    free(args);
    if (rc >= 0) return rc;
    a.trace_path = positional[0];
    if (!a.tensor) return fail("--tensor NAME is required (tscope info %s lists the names)", a.trace_path);
    if (a.width < 0 || a.height < 0 || a.width > 10000 || a.height > 10000)
        return fail("--width and --height are in points, 1..10000");
    if ((a.width > 0 && a.width < 64) || (a.height > 0 && a.height < 64))
        return fail("--width and --height must be at least 64 points");
    if (!(a.scale > 0) || a.scale > 8) return fail("--scale %g: use a number in (0, 8]", (double)a.scale);
    a.format = TS_FIGURE_PNG;
    if (a.out && !ts_figure_format_from_path(a.out, &a.format))
        return fail("%s: the output's extension picks the format: .png, .svg or .pdf", a.out);
    if (a.scale_seen && a.format != TS_FIGURE_PNG)
        return fail("--scale sets the pixels of a PNG; %s is in points and scales without loss",
                    a.format == TS_FIGURE_SVG ? "an SVG" : "a PDF");
    if (a.batch < 0) return fail("--batch %d: batch elements count from 0", a.batch);
    if (a.head_seen && a.head < 0) return fail("--head %d: heads count from 0", a.head);
    ts_render_view view;
    ts_render_view_from_name(a.view, &view);

    /* A path that cannot be written fails before the trace is even read. */
    if (a.out) {
        ts_png_out probe;
        if (ts_png_open(&probe, a.out) != TS_OK) return fail("%s", ts_last_error());
        ts_png_abort(&probe);
    }
    char renamed[300];
    const char *name = a.tensor;
    if (a.layer_seen) {
        if (!ts_name_with_layer(renamed, sizeof renamed, a.tensor, a.layer))
            return fail("--layer needs a name inside a layer ('\xe2\x80\xa6layers.N.\xe2\x80\xa6'), not %s", a.tensor);
        name = a.tensor = renamed;
    }

    ts_trace *t;
    if (ts_trace_open(a.trace_path, &t) != TS_OK) return fail("%s", ts_last_error());
    if (ts_trace_warning(t)[0]) fprintf(stderr, "tscope png: warning: %s\n", ts_trace_warning(t));
    ts_scene_request rq = ts_scene_request_default(name);
    rq.view = view;
    rq.batch = a.batch;
    rq.head = a.head_seen ? a.head : -1;
    rq.occurrence = a.step;
    rq.axes = a.axes;
    rq.trace_path = a.trace_path;
    ts_scene *sc;
    if (ts_scene_build(&sc, t, &rq) != TS_OK) {
        rc = fail("%s", ts_last_error());
    } else if ((rc = unused(&a, sc)) >= 0) {
        ts_scene_free(sc);
    } else {
        rc = export(&a, sc);
        ts_scene_free(sc);
    }
    ts_trace_close(t);
    ts_render_release_fonts(); /* a clean exit for leak checkers */
    return rc;
}
