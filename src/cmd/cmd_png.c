/* tscope png: one view of a trace as a PNG, SVG or PDF (by the output's
 * extension), with no display. A scene (render.h, "scene": the same data path
 * the viewer uses) picks the view by the step's tag or --view and gathers its
 * data from the trace; the renderers draw it into a cairo surface (an image
 * for PNG, cairo's SVG or PDF surface for the others: render.h, "figure").
 * The output is opened before anything is drawn, so a path that cannot be
 * written costs nothing. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
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
    int position, top; /* the distribution view */
    bool position_seen, top_seen;
    const char *title, *caption;
    ts_cli_list highlight;      /* "R,C" or "R0-R1,C0-C1", each a frame */
    int hl[TS_CLI_LIST_MAX][4]; /* row0, row1, col0, col1 */
    float font_scale;
    bool font_scale_seen, projector;
    const char *compare;   /* --compare B.tstrace: the same step of another run */
    const char *dims_text; /* --dims "0,1,6,7" */
    int dims[16], n_dims;
} png_args;

static int fail(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

static int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ts_cli_verror(CMD, fmt, ap);
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
    const png_args *a;
    double caption_h; /* the caption's band at the bottom */
    ts_scene *right;  /* --compare's run beside it (NULL: none), each under its label */
    const char *label[2];
} draw_job;

#define COMPARE_LABEL_H 30.0 /* the line naming each run above its half */

/* --compare: the two runs side by side, each half under a line naming its run. */
static ts_status draw_pair(draw_job *job, cairo_t *cr, double w, double h) {
    ts_render_clear(cr, (ts_render_rect){0, 0, w, h});
    for (int k = 0; k < 2; k++) {
        ts_render_rect half = {k * w / 2, 0, w / 2, h};
        ts_render_caption_line(cr, (ts_render_rect){half.x + 14, 8, half.w - 28, COMPARE_LABEL_H - 8}, job->label[k]);
        half.y += COMPARE_LABEL_H;
        half.h -= COMPARE_LABEL_H;
        TS_TRY(ts_scene_draw(k ? job->right : job->sc, cr, half, NULL, k ? NULL : job->layout));
    }
    return TS_OK;
}

static ts_status draw_scene(void *ctx, cairo_t *cr, double w, double h) {
    draw_job *job = ctx;
    const png_args *a = job->a;
    ts_status st = job->right ? draw_pair(job, cr, w, h - job->caption_h)
                              : ts_scene_draw(job->sc, cr, (ts_render_rect){0, 0, w, h - job->caption_h}, NULL, job->layout);
    for (int i = 0; !st && i < a->highlight.count; i++)
        st = ts_render_frame_cells(cr, job->layout, a->hl[i][0], a->hl[i][1], a->hl[i][2], a->hl[i][3]);
    if (!st && job->caption_h > 0) {
        ts_render_rect band = {0, h - job->caption_h, w, job->caption_h};
        ts_render_clear(cr, band);
        ts_render_caption_block(cr, band, a->caption, true);
    }
    return st;
}

/* The box of what a drawing inks (not the white paper), in points. */
static bool ink_box(ts_scene *sc, int w, int h, int box[4]) {
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
    cairo_t *cr = cairo_create(img);
    ts_status st = ts_scene_draw(sc, cr, (ts_render_rect){0, 0, w, h}, NULL, NULL);
    cairo_destroy(cr);
    cairo_surface_flush(img);
    const unsigned char *data = cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img);
    box[0] = w, box[1] = h, box[2] = -1, box[3] = -1;
    for (int y = 0; !st && y < h; y++) {
        const uint32_t *row = (const uint32_t *)(const void *)(data + (size_t)y * (size_t)stride);
        for (int x = 0; x < w; x++)
            if ((row[x] & 0xFFFFFFu) != 0xFFFFFFu) {
                if (x < box[0]) box[0] = x;
                if (x > box[2]) box[2] = x;
                if (y < box[1]) box[1] = y;
                if (y > box[3]) box[3] = y;
            }
    }
    cairo_surface_destroy(img);
    return !st && box[2] >= 0;
}

/* No blank bands: a view laid out in a size its data does not fill (cells
 * square, panels in a row) leaves paper around the block it centres. Draw,
 * measure the ink, take the empty margins off beyond the usual padding, and
 * again, until what is left is the picture. Only for sizes tscope chose. */
static void trim_blank(ts_scene *sc, int *w, int *h, bool fixed_w, bool fixed_h) {
    const int keep = 16; /* points of paper kept around the ink */
    for (int pass = 0; pass < 6; pass++) {
        int box[4];
        if (!ink_box(sc, *w, *h, box)) return;
        int spare_w = fixed_w ? 0 : box[0] - keep + (*w - 1 - box[2]) - keep;
        int spare_h = fixed_h ? 0 : *h - 1 - box[3] - keep;
        if (spare_w < 6 && spare_h < 6) return;
        if (spare_w >= 6) *w -= spare_w;
        if (spare_h >= 6) *h -= spare_h;
        if (*w < 64) *w = 64;
        if (*h < 64) *h = 64;
    }
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

/* Draw the scene (and --compare's beside it) at its size (or the one asked
 * for) and write it. */
static int export(const png_args *a, ts_scene *sc, ts_scene *right, const char *const label[2]) {
    int w, h;
    ts_scene_size(sc, &w, &h);
    if (right) {
        int w2, h2;
        ts_scene_size(right, &w2, &h2);
        w += w2;
        h = (h > h2 ? h : h2) + (int)COMPARE_LABEL_H;
    }
    if (a->projector) { /* a 1920 x 1080 slide: the view's shape, as large as fits */
        double k = fmin(1920.0 / w, 1080.0 / h);
        w = (int)floor(w * k);
        h = (int)floor(h * k);
    }
    if (a->width > 0) w = a->width;
    if (a->height > 0) h = a->height;
    if (!right) trim_blank(sc, &w, &h, a->width > 0, a->height > 0);
    char path[600];
    const char *out = a->out;
    if (!out) {
        default_output(path, sizeof path, a, sc);
        out = path;
    }
    ts_render_layout *layout = calloc(1, sizeof *layout);
    if (!layout) return fail("out of memory");
    draw_job job = {sc, layout, a, 0, right, {label ? label[0] : NULL, label ? label[1] : NULL}};
    if (a->caption) {
        cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 8, 8);
        cairo_t *cr = cairo_create(img);
        job.caption_h = ceil(ts_render_caption_block(cr, (ts_render_rect){0, 0, w, 0}, a->caption, false));
        cairo_destroy(cr);
        cairo_surface_destroy(img);
        h += (int)job.caption_h;
    }
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

/* A run in words for a legend: its file's name and what was edited in it
 * ("b.tstrace: head0 zeroed; head1 zeroed"), or that nothing was. */
static void run_label(char *buf, size_t cap, const char *path, const ts_trace *t) {
    const char *slash = strrchr(path, '/');
    char edits[200];
    int n = snprintf(buf, cap, "%s: ", slash ? slash + 1 : path);
    if (n < 0 || (size_t)n >= cap) return;
    if (ts_trace_step_edits(t, NULL, edits, sizeof edits) > 0) snprintf(buf + n, cap - (size_t)n, "%s", edits);
    else snprintf(buf + n, cap - (size_t)n, "as computed, no edit");
}

/* --compare B: the same step of B, drawn into the figure of a: curves on
 * a's axes, or a heatmap beside a's on the colour scale both share. */
static int export_compared(const png_args *a, ts_scene *sc, ts_trace *ta, const ts_scene_request *rq) {
    if (a->highlight.count) return fail("--highlight frames the cells of one view; with --compare draw each run alone");
    ts_trace *tb;
    if (ts_trace_open(a->compare, &tb) != TS_OK) return fail("--compare %s: %s", a->compare, ts_last_error());
    int rc = ts_trace_verify(tb, NULL) ? fail("--compare %s: %s", a->compare, ts_last_error()) : -1;
    ts_scene_request rb = *rq;
    rb.trace_path = a->compare;
    ts_scene *right = NULL;
    if (rc < 0 && ts_scene_build(&right, tb, &rb) != TS_OK) rc = fail("--compare %s: %s", a->compare, ts_last_error());
    char la[300], lb[300];
    run_label(la, sizeof la, a->trace_path, ta);
    run_label(lb, sizeof lb, a->compare, tb);
    const char *labels[2] = {la, lb};
    ts_render_scale sa, sb;
    if (rc >= 0) {
    } else if (ts_scene_overlay(sc, right, la, lb) == TS_OK) {
        rc = export(a, sc, NULL, NULL); /* one pair of axes */
    } else if (ts_scene_color_scale(sc, &sa) && ts_scene_color_scale(right, &sb)) {
        /* one colour scale: the larger range of the two, about 0 when either is signed */
        ts_render_scale both = {.cmap = sa.cmap, .vmin = fminf(sa.vmin, sb.vmin), .vmax = fmaxf(sa.vmax, sb.vmax)};
        if (sa.cmap != sb.cmap || both.vmin < 0) {
            float m = fmaxf(fabsf(both.vmin), fabsf(both.vmax));
            both = (ts_render_scale){.cmap = TS_CMAP_COOLWARM, .vmin = -m, .vmax = m};
        }
        ts_scene_set_color_scale(sc, both);
        ts_scene_set_color_scale(right, both);
        rc = export(a, sc, right, labels);
    } else {
        rc = fail("--compare: the %s view of %s is neither curves nor a coloured map; draw each run alone",
                  ts_scene_view_name(sc), a->tensor);
    }
    ts_scene_free(right);
    ts_trace_close(tb);
    return rc;
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
    if ((a->position_seen || a->top_seen) && !(used & TS_SCENE_USED_POSITION))
        return fail("%s picks what the distribution view (--view dist) draws; the %s view of %s does not",
                    a->position_seen ? "--position" : "--top", view, name);
    if (a->n_dims && !(used & TS_SCENE_USED_DIMS))
        return fail("--dims %s picks the curves of a positional encoding (--view curves or auto); the %s view of %s "
                    "draws none", a->dims_text, view, name);
    if (a->axes && !(used & TS_SCENE_USED_AXES))
        return fail("--axes %s picks the two dims of a tensor heatmap; the %s view of %s has its own", a->axes, view,
                    name);
    return -1;
}

/* "0,1,6,7" into a->dims; -1: parsed. */
static int parse_dims(png_args *a) {
    const char *p = a->dims_text;
    a->n_dims = 0;
    while (*p) {
        char *end;
        long d = strtol(p, &end, 10);
        if (end == p || d < 0 || d > 1000000 || (*end && *end != ','))
            return fail("--dims %s: give dims as whole numbers from 0, separated by commas (0,1,6,7)", a->dims_text);
        if (a->n_dims == 16) return fail("--dims %s: 16 dims at most (8 sin/cos pairs)", a->dims_text);
        a->dims[a->n_dims++] = (int)d;
        p = *end ? end + 1 : end;
    }
    return a->n_dims ? -1 : fail("--dims needs at least one dim");
}

/* "R,C" or "R0-R1,C0-C1" into row0, row1, col0, col1; -1: parsed. */
static int parse_highlight(const char *text, int hl[4]) {
    const char *comma = strchr(text, ',');
    if (!comma || !ts_render_parse_range(text, (size_t)(comma - text), hl) || !ts_render_parse_range(comma + 1, strlen(comma + 1), hl + 2))
        return fail("--highlight %s: give ROW,COL, or ranges like 3-5,0-2 (* for all), counting from 0", text);
    return -1;
}

int ts_cmd_png(int argc, char **argv) {
    /* -o is the one short flag people type without thinking: read it as --output. */
    char **args = malloc(sizeof *args * (size_t)(argc + 1));
    if (!args) return fail("out of memory");
    for (int i = 0; i < argc; i++) args[i] = strcmp(argv[i], "-o") == 0 && i > 0 ? "--output" : argv[i];
    args[argc] = NULL;

    png_args a = {.view = "auto", .batch = 0, .head = 0, .step = 0, .scale = 1, .position = -1, .font_scale = 1};
    const ts_flag flags[] = {
        {"--tensor", TS_FLAG_STRING, &a.tensor, "NAME", "the step to draw, e.g. encoder.layers.0.self_attn.weights", NULL, NULL, NULL},
        {"--view", TS_FLAG_CHOICE, &a.view, "V",
         "auto|heatmap|grid|overview|curves|stats|shapes|lens|dist|rope; auto goes by the step's tag: attention -> "
         "grid (heatmap with --head), PE -> curves + heatmap, norm -> stats, lens.layers.N -> lens, probs -> dist, "
         "q_rot, k_rot -> rope, else heatmap (auto)",
         "auto|heatmap|grid|overview|curves|stats|shapes|lens|dist|rope", NULL, NULL},
        {"--batch", TS_FLAG_INT, &a.batch, "I", "batch element (0)", NULL, NULL, &a.batch_seen},
        {"--layer", TS_FLAG_INT, &a.layer, "L", "the same step in layer L (replaces layers.N in the name)", NULL, NULL,
         &a.layer_seen},
        {"--head", TS_FLAG_INT, &a.head, "H", "one attention head (auto then draws a heatmap) (0)", NULL, NULL, &a.head_seen},
        {"--step", TS_FLAG_INT, &a.step, "K", "which record of the name, for traces that repeat names (0; -1: last)", NULL,
         NULL, NULL},
        {"--axes", TS_FLAG_STRING, &a.axes, "I,J", "the two dims a heatmap of any tensor shows (the last two)", NULL, NULL, NULL},
        {"--position", TS_FLAG_INT, &a.position, "P",
         "the distribution view: the position whose next token is drawn (-1: the last)", NULL, NULL, &a.position_seen},
        {"--top", TS_FLAG_INT, &a.top, "K", "the distribution view: how many tokens, most likely first (10)", NULL, NULL,
         &a.top_seen},
        {"--title", TS_FLAG_STRING, &a.title, "TEXT", "the figure's title, in your words (the step's name moves under it)",
         NULL, NULL, NULL},
        {"--caption", TS_FLAG_STRING, &a.caption, "TEXT", "a caption under the figure, wrapped to its width", NULL, NULL,
         NULL},
        {"--compare", TS_FLAG_STRING, &a.compare, "B.tstrace",
         "the same step of another run (an edited one): curves on one pair of axes, heatmaps side by side on one "
         "colour scale, each run named by its edits", NULL, NULL, NULL},
        {"--dims", TS_FLAG_STRING, &a.dims_text, "D,D,...",
         "positional encoding: the dims whose curves are drawn, up to 16 (a choice across the frequencies)", NULL,
         NULL, NULL},
        {"--highlight", TS_FLAG_LIST, &a.highlight, "R,C",
         "frame cells: ROW,COL or ranges R0-R1,C0-C1 (a * for every row or column); repeatable", NULL, NULL, NULL},
        {"--font-scale", TS_FLAG_FLOAT, &a.font_scale, "F", "every text F times its size, 0.5 to 4 (1)", NULL, NULL,
         &a.font_scale_seen},
        {"--projector", TS_FLAG_BOOL, &a.projector, NULL,
         "a slide: at most 1920 x 1080 and every label at least 18 pixels (font scale 1.75 unless given)", NULL, NULL,
         NULL},
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
                    "       [--width W --height H --scale S] [--title T] [--caption C] [--highlight R,C]...\n"
                    "       [--font-scale F | --projector] [--position P --top K] [--dims D,D,...] [--compare B.tstrace]",
        .description = "Draw one step of a trace as PNG, SVG or PDF (the extension of -o picks), with no display:\n"
                       "attention heads and grids, the layers x heads overview, positional encoding curves,\n"
                       "RoPE's turning, LayerNorm and RMSNorm statistics, any tensor as a heatmap with its\n"
                       "statistics, or the data flow of a module's steps. SVG and PDF are drawn by the same code as the PNG, in points.",
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
    if (a.top_seen && (a.top < 1 || a.top > TS_RENDER_DIST_MAX))
        return fail("--top %d: draw 1 to %d tokens", a.top, TS_RENDER_DIST_MAX);
    if (a.font_scale_seen && !(a.font_scale >= 0.5f && a.font_scale <= 4))
        return fail("--font-scale %g: use a number from 0.5 to 4", (double)a.font_scale);
    if (a.projector && a.scale_seen)
        return fail("--projector sets the size in pixels (scale 1); leave out --scale, or use --width/--height");
    if (a.projector && !a.font_scale_seen) a.font_scale = 1.75f; /* 10.5-point ticks at 18.4 pixels */
    if (a.title && !a.title[0]) return fail("--title needs some text");
    if (a.caption && !a.caption[0]) return fail("--caption needs some text");
    for (int i = 0; i < a.highlight.count; i++)
        if ((rc = parse_highlight(a.highlight.items[i], a.hl[i])) >= 0) return rc;
    if (a.dims_text && (rc = parse_dims(&a)) >= 0) return rc;
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
    if (ts_trace_verify(t, NULL)) { /* never a picture drawn around a damaged step */
        rc = fail("%s: %s", a.trace_path, ts_last_error());
        ts_trace_close(t);
        return rc;
    }
    if (ts_trace_warning(t)[0]) fprintf(stderr, "tscope png: warning: %s\n", ts_trace_warning(t));
    ts_scene_request rq = ts_scene_request_default(name);
    rq.view = view;
    rq.batch = a.batch;
    rq.head = a.head_seen ? a.head : -1;
    rq.occurrence = a.step;
    rq.axes = a.axes;
    rq.trace_path = a.trace_path;
    if (a.position_seen) rq.position = a.position;
    if (a.top_seen) rq.top_k = a.top;
    rq.dims = a.n_dims ? a.dims : NULL;
    rq.n_dims = a.n_dims;
    ts_render_set_font_scale(a.font_scale);
    ts_scene *sc;
    if (ts_scene_build(&sc, t, &rq) != TS_OK) {
        rc = fail("%s", ts_last_error());
    } else if ((rc = unused(&a, sc)) >= 0) {
        ts_scene_free(sc);
    } else {
        ts_scene_set_title(sc, a.title);
        rc = a.compare ? export_compared(&a, sc, t, &rq) : export(&a, sc, NULL, NULL);
        ts_scene_free(sc);
    }
    ts_trace_close(t);
    ts_render_release_fonts(); /* a clean exit for leak checkers */
    return rc;
}
