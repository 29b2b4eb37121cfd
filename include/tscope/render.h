/* render: the pictures, drawn with cairo into any cairo_t.
 *
 * Every view is one function that draws plain data (pointers, sizes, labels;
 * no trace or model types) into a rectangle of a cairo context: the viewer
 * passes its window, `tscope png` an image surface, tests a small surface.
 * There is one drawing path. Units are cairo user units; with a scaled context
 * (HiDPI, `--scale 2`) everything gets sharper, nothing moves.
 *
 * Interaction (viewer) goes through ts_render_state: which cells are visible
 * (zoom and pan) and which cell is highlighted (hover). A view that has cells
 * fills a layout struct while it draws; the hit-test functions map a pixel
 * back to (panel, row, column) with that layout, so hover needs no redraw.
 *
 * Text goes through pango (fontconfig); the family is DejaVu Sans unless
 * ts_render_set_font changes it. All strings are UTF-8.
 */
#ifndef TSCOPE_RENDER_H
#define TSCOPE_RENDER_H

#include <cairo.h>
#include <stdbool.h>
#include <stdint.h>

#include "tscope/colormap.h"
#include "tscope/hook.h"
#include "tscope/status.h"
#include "tscope/tensor.h"

typedef struct ts_render_rect {
    double x, y, w, h;
} ts_render_rect;

/* ---- data ------------------------------------------------------------ */

/* A matrix to draw: element (r, c) is values[r * row_stride + c * col_stride].
 * Masked cells (attention a query may not see) are drawn hatched grey, never
 * as a colour of the scale; a value of -inf counts as masked too (that is what
 * the `masked` step holds), and NaN is drawn magenta. */
typedef struct ts_render_matrix {
    const float *values;
    int rows, cols;
    int64_t row_stride;            /* elements; 0: cols (contiguous rows) */
    int64_t col_stride;            /* elements; 0: 1 */
    const unsigned char *mask;     /* optional (rows, cols) contiguous: nonzero = masked */
    const char *const *row_labels; /* optional, rows entries: query tokens, positions */
    const char *const *col_labels; /* optional, cols entries: key tokens, dims */
} ts_render_matrix;

/* How values map to colours: t = (v - vmin) / (vmax - vmin) into cmap. */
typedef struct ts_render_scale {
    ts_cmap_id cmap;
    float vmin, vmax;
} ts_render_scale;

/* The scale that suits the finite values of n matrices: viridis from 0 to the
 * largest value when nothing is negative (probabilities, std), coolwarm
 * symmetric about zero (-a..a, a = largest |v|) for signed data. */
ts_render_scale ts_render_scale_auto(const ts_render_matrix *m, int n);

/* Mark mask[i] where scores[i] is -inf: how the `masked` step shows which
 * weights were forced to zero. n elements, contiguous. */
void ts_render_mask_from_scores(unsigned char *mask, const float *scores, int64_t n);

/* A histogram: counts[i] values fell in [lo + i*w, lo + (i+1)*w), w = (hi-lo)/n_bins. */
#define TS_RENDER_HIST_BINS 64
typedef struct ts_render_hist {
    int64_t counts[TS_RENDER_HIST_BINS];
    int n_bins; /* <= TS_RENDER_HIST_BINS */
    double lo, hi;
} ts_render_hist;

/* Bin the finite values (n of them, `stride` apart; 0 means 1) between their
 * own min and max, or [lo, hi] when lo < hi. */
void ts_render_hist_compute(ts_render_hist *h, const float *values, int64_t n, int64_t stride,
                            int n_bins, double lo, double hi);

/* Summary statistics of a tensor, as the trace stores them. */
typedef struct ts_render_stats {
    double min, max, mean, std, mean_abs; /* over finite values */
    int64_t count, n_nan, n_inf, n_zero;
} ts_render_stats;

void ts_render_stats_compute(ts_render_stats *s, const float *values, int64_t n);

/* ---- interaction ------------------------------------------------------ */

/* What the viewer controls. A zeroed struct (or NULL) shows everything and
 * highlights nothing. */
typedef struct ts_render_state {
    int row0, col0;   /* first visible cell (pan) */
    int rows, cols;   /* number of visible cells (zoom); 0: all that fit */
    bool highlight;   /* draw a frame around (hl_row, hl_col) of panel hl_panel */
    int hl_panel, hl_row, hl_col;
} ts_render_state;

/* Where one panel's cells landed. */
typedef struct ts_render_cells {
    ts_render_rect grid;      /* the visible cells, exactly */
    int row0, col0;           /* the first visible cell */
    int rows, cols;           /* how many are visible */
    int total_rows, total_cols;
    double cell_w, cell_h;    /* in user units */
} ts_render_cells;

#define TS_RENDER_MAX_PANELS 128

/* Filled by the views that draw cells: one entry per panel (a heatmap has
 * one, a head grid one per head). */
typedef struct ts_render_layout {
    int n_panels;
    ts_render_cells panel[TS_RENDER_MAX_PANELS];
    ts_render_rect colorbar; /* zero size when there is none */
    ts_render_scale scale;   /* the colours used */
} ts_render_layout;

/* The cell under (x, y), in user units of the context drawn into: true and
 * (panel, row, col) set when there is one. Rows and columns are matrix
 * indices (pan already added). */
bool ts_render_hit(const ts_render_layout *l, double x, double y, int *panel, int *row, int *col);

/* The rectangle of cell (row, col) of a panel; false when it is not visible. */
bool ts_render_cell_rect(const ts_render_layout *l, int panel, int row, int col, ts_render_rect *out);

/* ---- views ------------------------------------------------------------ */

/* When to print each value in its cell. */
typedef enum ts_render_values {
    TS_RENDER_VALUES_AUTO,   /* when the matrix is at most 16 x 16 and cells are large enough */
    TS_RENDER_VALUES_NEVER,
    TS_RENDER_VALUES_ALWAYS, /* whenever the cells are large enough for the text */
} ts_render_values;

typedef struct ts_render_heatmap_opts {
    const char *title;    /* first line, bold: the step's name */
    const char *subtitle; /* second line: layer, head, shape, batch */
    const char *row_axis; /* "query", "position"; NULL: none */
    const char *col_axis; /* "key", "dimension"; NULL: none */
    bool fixed_scale;     /* use `scale`; otherwise ts_render_scale_auto */
    ts_render_scale scale;
    ts_render_values values;
    bool stretch;    /* cells may be non-square (up to 1:4) to fill the area */
    bool no_colorbar;
} ts_render_heatmap_opts;

/* One matrix: an attention head, a PE table, a 2-D slice of any tensor. */
ts_status ts_render_heatmap(cairo_t *cr, ts_render_rect area, const ts_render_matrix *m,
                            const ts_render_heatmap_opts *o, const ts_render_state *st,
                            ts_render_layout *layout);

typedef struct ts_render_grid_opts {
    const char *title, *subtitle;
    int grid_rows, grid_cols;           /* panels per row/column; 0: chosen to fit */
    const char *const *panel_titles;    /* optional, one per panel: "head 3" */
    const char *const *row_headers;     /* optional, grid_rows entries: "layer 2" */
    const char *const *col_headers;     /* optional, grid_cols entries: "head 0" */
    bool fixed_scale;                   /* otherwise one auto scale for all panels */
    ts_render_scale scale;
} ts_render_grid_opts;

/* Several matrices with one colour scale: all heads of a layer, or (with row
 * and column headers) the layers x heads overview. Panel i is at grid row
 * i / grid_cols, column i % grid_cols. */
ts_status ts_render_grid(cairo_t *cr, ts_render_rect area, const ts_render_matrix *m, int n,
                         const ts_render_grid_opts *o, const ts_render_state *st,
                         ts_render_layout *layout);

/* A line of a plot. y[i * y_stride] for i < n; x[i] when x is given, i otherwise. */
typedef struct ts_render_series {
    const char *label;
    const float *x; /* optional (n) */
    const float *y;
    int64_t y_stride; /* 0: 1 */
    int n;
    int color;   /* index into the palette; -1: the series' own index */
    bool dashed; /* e.g. the cos partner of a sin curve */
} ts_render_series;

typedef struct ts_render_plot_opts {
    const char *title, *subtitle;
    const char *x_label, *y_label;
    bool log_y;     /* positive values only; others are skipped */
    bool markers;   /* a dot at every point (short series) */
    bool no_legend;
    bool y_from_zero; /* include 0 in the y range */
    const char *const *x_tick_labels; /* optional: names of x = 0, 1, ... (tokens), n_x_tick_labels of them */
    int n_x_tick_labels;
} ts_render_plot_opts;

/* Lines over a shared x axis, with ticks, grid and a legend. */
ts_status ts_render_plot(cairo_t *cr, ts_render_rect area, const ts_render_series *s, int n,
                         const ts_render_plot_opts *o);

/* Positional encoding curves: the columns `dims` of pe (positions, d_model),
 * contiguous, over positions; an even dim 2i is sin, 2i+1 its cos partner
 * (same colour, dashed). n_dims <= 16. */
ts_status ts_render_pe_curves(cairo_t *cr, ts_render_rect area, const float *pe, int positions,
                              int d_model, const int *dims, int n_dims, const char *title,
                              const char *subtitle);

/* The whole PE picture: curves of a few dims above the position x dimension
 * heatmap. dims NULL: 0, 1, 2, 3 and a pair from the middle. */
ts_status ts_render_posenc(cairo_t *cr, ts_render_rect area, const float *pe, int positions,
                           int d_model, const int *dims, int n_dims, const char *title,
                           const char *subtitle, ts_render_layout *layout);

/* One LayerNorm, for one batch element. */
typedef struct ts_render_norm {
    const float *in;  /* (seq, dim) what the norm receives */
    const float *out; /* (seq, dim) what it gives */
    int seq, dim;
    const float *gamma, *beta;     /* optional (dim) */
    const char *const *tokens;     /* optional (seq) */
} ts_render_norm;

/* Per-token mean and std before and after, histograms of values before and
 * after, and gamma and beta when given. */
ts_status ts_render_layernorm(cairo_t *cr, ts_render_rect area, const ts_render_norm *d,
                              const char *title, const char *subtitle);

/* Any tensor: a 2-D slice as a heatmap beside a statistics panel and a
 * histogram (both of the whole tensor when given, of the slice otherwise). */
typedef struct ts_render_tensor_view {
    ts_render_matrix slice;
    const char *title;
    const char *subtitle; /* shape, op, which slice */
    const char *row_axis, *col_axis;
    const ts_render_stats *stats; /* optional */
    const ts_render_hist *hist;   /* optional */
    bool fixed_scale;
    ts_render_scale scale;
} ts_render_tensor_view;

ts_status ts_render_tensor(cairo_t *cr, ts_render_rect area, const ts_render_tensor_view *v,
                           const ts_render_state *st, ts_render_layout *layout);

/* A step of a module, for the shape flow. */
typedef struct ts_render_step {
    const char *name; /* full trace name */
    const char *op;   /* "linear" */
    int rank;
    int64_t shape[TS_MAX_RANK];
} ts_render_step;

/* The steps as boxes in order, each with its op and shape ([30, 200, 1536]),
 * the dims that changed from the step before on the data path marked in red
 * (steps whose op is "parameter" sit beside the path). Names are shown
 * without the prefix they all share, which becomes the title when title is
 * NULL. */
ts_status ts_render_shapes(cairo_t *cr, ts_render_rect area, const ts_render_step *steps, int n,
                           const char *title, const char *subtitle);

/* Training: loss over steps above per-layer gradient norms over steps. */
ts_status ts_render_training(cairo_t *cr, ts_render_rect area, const ts_render_series *loss,
                             const ts_render_series *grad_norms, int n_grad, const char *title,
                             const char *subtitle);

/* ---- choosing a view ---------------------------------------------------- */

#define TS_RENDER_VIEW_LIST(X)        \
    X(TS_RENDER_VIEW_AUTO, "auto")     \
    X(TS_RENDER_VIEW_HEATMAP, "heatmap") \
    X(TS_RENDER_VIEW_GRID, "grid")     \
    X(TS_RENDER_VIEW_OVERVIEW, "overview") \
    X(TS_RENDER_VIEW_CURVES, "curves") \
    X(TS_RENDER_VIEW_STATS, "stats")   \
    X(TS_RENDER_VIEW_SHAPES, "shapes")

#define TS_RENDER_VIEW_ENTRY(e, name) e,
typedef enum ts_render_view { TS_RENDER_VIEW_LIST(TS_RENDER_VIEW_ENTRY) TS_RENDER_VIEW_COUNT } ts_render_view;
#undef TS_RENDER_VIEW_ENTRY

const char *ts_render_view_name(ts_render_view v);
bool ts_render_view_from_name(const char *name, ts_render_view *out);

/* The view a step with this tag is best seen in: attention -> grid (all heads
 * of a layer), posenc -> curves, norm tags -> stats, scalars -> curves,
 * anything else -> heatmap (the any-tensor view). */
ts_render_view ts_render_view_for_tag(ts_tag tag);

/* ---- setup ------------------------------------------------------------ */

/* The font family for all text ("DejaVu Sans" by default); NULL resets. */
void ts_render_set_font(const char *family);

/* Fill area with the background colour (views do this themselves). */
void ts_render_clear(cairo_t *cr, ts_render_rect area);

/* Drop the fonts pango and cairo keep for the whole process, so a leak
 * checker sees a clean exit. Call once, last, after all drawing (a later
 * drawing call loads the fonts again). */
void ts_render_release_fonts(void);

#endif
