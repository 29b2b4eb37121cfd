/* render_internal: what the view files (viz/render/render_*.c) share and nobody else
 * uses: text through pango, number formatting, ticks, panel furniture (titles,
 * colour bars, axes) and drawing a matrix's cells. Names carry ts_render__
 * (two underscores): library-internal. */
#ifndef TSCOPE_VIZ_RENDER_INTERNAL_H
#define TSCOPE_VIZ_RENDER_INTERNAL_H

#include <math.h>
#include <pango/pangocairo.h>
#include <stddef.h>

#include "tscope/render.h"

/* Sizes in user units, chosen for a 1x export to be readable on a slide. */
#define TS_RENDER__PAD 14.0
#define TS_RENDER__TITLE_SIZE 17.0
#define TS_RENDER__SUBTITLE_SIZE 12.5
#define TS_RENDER__LABEL_SIZE 11.5
#define TS_RENDER__TICK_SIZE 10.5

/* Text styles (flags). */
enum {
    TS_RENDER__BOLD = 1,
    TS_RENDER__MONO = 2,
    TS_RENDER__MARKUP = 4, /* the text is pango markup */
    TS_RENDER__ITALIC = 8,
};

typedef struct ts_render__font {
    double size; /* user units */
    int style;   /* TS_RENDER__* flags */
    ts_rgb color;
    double max_w;  /* > 0: ellipsize beyond this width */
    int max_lines; /* with max_w: wrap onto up to this many lines first (0: one line) */
} ts_render__font;

/* One pango context and layout reused for all text of one drawing call. */
typedef struct ts_render__pen {
    cairo_t *cr;
    PangoContext *pc;
    PangoLayout *layout;
} ts_render__pen;

void ts_render__pen_init(ts_render__pen *p, cairo_t *cr);
void ts_render__pen_free(ts_render__pen *p);

/* Logical width and height of text in font f. */
void ts_render__measure(ts_render__pen *p, const char *text, const ts_render__font *f, double *w,
                        double *h);

/* Draw text with its anchor (ax, ay) at (x, y): ax 0 left, 0.5 centre, 1
 * right of the text; ay likewise from its top to its bottom. angle in radians
 * turns the text about that anchor (negative: reads upwards). */
void ts_render__text(ts_render__pen *p, const char *text, const ts_render__font *f, double x, double y,
                     double ax, double ay, double angle);

/* The SVG text layer (svg_text.c): while it is open for an SVG surface,
 * ts_render_show_layout records layouts shown on that surface as <text>
 * elements into buf instead of drawing their glyphs (figure.c opens it). */
void ts_render__svg_layer_begin(cairo_surface_t *surface, ts_text_buf *buf, bool pixelated);
/* Whether cr draws into an open layer whose SVG says image-rendering: pixelated. */
bool ts_render__svg_pixelated(cairo_t *cr);
void ts_render__svg_layer_end(void);
/* The text layer's defaults, on its <g>: a <text> writes its family and fill only when they differ. */
#define TS_RENDER__SVG_FONT "DejaVu Sans, sans-serif"
#define TS_RENDER__SVG_INK "#212126"
/* Record layout as <text> when cr draws into the open layer's surface;
 * false (nothing done) otherwise. */
bool ts_render__svg_text(cairo_t *cr, PangoLayout *layout);

/* An SVG figure's cell tooltips (svg_tips.c): for each panel of l, m[panel]
 * its matrix (NULL: none), panel_titles (may be NULL) its name ("head 3").
 * Nothing unless cr draws into an SVG figure. */
void ts_render__svg_tips(cairo_t *cr, const ts_render_layout *l, const ts_render_matrix *const *m,
                         const char *const *panel_titles);

/* While clips are recorded (text_clips.c): note whether layout, about to be
 * shown at cr's current point, was shortened, overlaps a text shown before
 * it, or falls partly outside what cr shows. */
void ts_render__clips_see(cairo_t *cr, PangoLayout *layout);
/* While clips are recorded: a text a view left out for want of room. */
void ts_render__clip_dropped(const char *text);

/* Fonts used everywhere. */
ts_render__font ts_render__font_of(double size, int style, ts_rgb color);
extern const ts_rgb ts_render__ink;   /* body text */
extern const ts_rgb ts_render__muted; /* secondary text */
extern const ts_rgb ts_render__faint; /* grid lines */
extern const ts_rgb ts_render__paper; /* background */

/* A colour of the categorical palette (matplotlib's tab10), i taken mod 10. */
ts_rgb ts_render__palette(int i);

void ts_render__set_rgb(cairo_t *cr, ts_rgb c);

/* The font family in use. */
const char *ts_render__family(void);

/* Title (bold) and subtitle (muted) at the top of area; returns the height
 * they take, 0 when both are NULL. */
double ts_render__title(ts_render__pen *p, ts_render_rect area, const char *title, const char *subtitle);

/* "0.25", "-1.3e+04", with a real minus sign; decimals chosen from `step`
 * (the spacing of neighbouring values to tell apart), or from v when 0. */
void ts_render__fmt(char *buf, size_t size, double v, double step);

/* Shortest form: "0.1", "1", "2e-5", with a real minus sign. */
void ts_render__fmt_short(char *buf, size_t size, double v);

/* Up to max_n "nice" tick values (1, 2, 5 x 10^k apart) inside [lo, hi].
 * Returns the count; *step gets the spacing. */
int ts_render__ticks(double lo, double hi, int max_n, double *ticks, double *step);

/* User units per device pixel (1 at scale 1, 0.5 at --scale 2). */
double ts_render__pixel(cairo_t *cr);

/* Snap a length to whole device pixels (at least one). */
double ts_render__snap(cairo_t *cr, double len);

/* Map a value to t in [0, 1] for a scale; NaN stays NaN. */
double ts_render__scale_t(const ts_render_scale *s, double v);

/* Element (r, c) of a matrix. */
static inline float ts_render__at(const ts_render_matrix *m, int r, int c) {
    int64_t rs = m->row_stride ? m->row_stride : m->cols, cs = m->col_stride ? m->col_stride : 1;
    return m->values[(int64_t)r * rs + (int64_t)c * cs];
}

/* Masked: by the mask, or -inf in the values. */
static inline int ts_render__masked(const ts_render_matrix *m, int r, int c, float v) {
    return (m->mask && m->mask[(int64_t)r * m->cols + c]) || (isinf(v) && v < 0);
}

/* How to draw the cells of a panel. */
typedef struct ts_render__cell_opts {
    bool values;      /* print each value in its cell (when it fits) */
    bool separators;  /* thin lines between cells (large cells) */
    bool highlight;
    int hl_row, hl_col; /* matrix indices */
} ts_render__cell_opts;

/* Draw the visible window c of matrix m into c->grid. Returns flags of what
 * was seen: 1 masked cells, 2 NaN cells. */
int ts_render__cells(ts_render__pen *p, const ts_render_matrix *m, const ts_render_scale *s,
                     const ts_render_cells *c, const ts_render__cell_opts *o);

/* A vertical colour bar in r (the bar itself is r.x .. r.x + 14), tick labels
 * to its right, what a colour means (label; NULL: "value") turned along r's
 * right edge, and legend swatches for masked / NaN cells below it when
 * `seen` says there were some. */
void ts_render__colorbar(ts_render__pen *p, ts_render_rect r, const ts_render_scale *s, int seen, const char *label);

/* Width the colour bar with its labels needs. */
double ts_render__colorbar_width(ts_render__pen *p, const ts_render_scale *s, const char *label);

/* The hatching used for masked cells, painted over a rectangle. */
void ts_render__hatch(cairo_t *cr, ts_render_rect r);

/* A histogram in r: bars coloured by the scale when s is given (the same
 * colours as the heatmap beside it), in `color` otherwise (NULL: palette 0). */
void ts_render__hist(ts_render__pen *p, ts_render_rect r, const ts_render_hist *h,
                     const ts_render_scale *s, const ts_rgb *color, const char *caption);

/* The axes, lines and legend of a plot in r (no title): what ts_render_plot
 * draws below its title, for views made of several plots. */
void ts_render__plot_body(ts_render__pen *p, ts_render_rect r, const ts_render_series *s, int n,
                          const ts_render_plot_opts *o);

/* A bold caption at the top left of r; returns the height it takes. */
double ts_render__caption(ts_render__pen *p, ts_render_rect r, const char *text);

/* Which labels to show so they do not overlap: every k-th, k from 1, 2, 3,
 * 4, 5, 10, 20, 25, 50, ... so that k * spacing >= need. */
int ts_render__label_step(double spacing, double need);

/* Shape flows (dataflow.c): a parameter (gamma, beta) sits beside the data
 * path; the step before step i on that path, or TS_RENDER_OUTSIDE. */
bool ts_render__is_param(const ts_render_step *s);
int ts_render__step_before(const ts_render_step *steps, int i);

#endif
