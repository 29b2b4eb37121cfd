/* render: drawing trace data with cairo. Colour maps, the renderers (one
 * per kind of view, each drawing into any cairo_t), PNG files, and scenes:
 * the view a step calls for, built from a trace. The viewer, `tscope png`
 * and lesson pages all draw through here.
 */
#ifndef TSCOPE_RENDER_H
#define TSCOPE_RENDER_H

#include <cairo.h>
#include <stdbool.h>
#include <stdint.h>

#include "tscope/core.h"
#include "tscope/experiment.h"
#include "tscope/io.h"
#include "tscope/trace.h"

/* colormap: values to colours, from published tables.
 *
 * The tables are data (assets/colormaps/NAME.csv) that the build embeds: viridis
 * (sequential, for probabilities and other non-negative values) and Moreland's
 * coolwarm (diverging, centred on zero, for signed values). A colour is looked
 * up by t in [0, 1] with linear interpolation between the table's entries.
 */

typedef enum ts_cmap_id {
    TS_CMAP_VIRIDIS,  /* sequential: dark purple (low) to yellow (high) */
    TS_CMAP_COOLWARM, /* diverging: blue (negative), light grey (0), red (positive) */
    TS_CMAP_COUNT
} ts_cmap_id;

/* An sRGB colour, each channel in [0, 1]. */
typedef struct ts_rgb {
    float r, g, b;
} ts_rgb;

/* Entries in a lookup table made by ts_cmap_lut. */
#define TS_CMAP_LUT_SIZE 256

const char *ts_cmap_name(ts_cmap_id id); /* "viridis"; "?" when out of range */

/* The map called `name` ("viridis", "coolwarm"); false when there is none. */
bool ts_cmap_from_name(const char *name, ts_cmap_id *out);

/* The colour at t (clamped to [0, 1]; NaN gives the low end). */
ts_rgb ts_cmap_eval(ts_cmap_id id, double t);

/* TS_CMAP_LUT_SIZE opaque colours as cairo's ARGB32 words (0xFFRRGGBB), entry
 * i for t = i / (TS_CMAP_LUT_SIZE - 1): for filling images fast. */
void ts_cmap_lut(ts_cmap_id id, uint32_t *lut);

/* Relative luminance (WCAG / Rec. 709 on linearised sRGB), in [0, 1]. */
double ts_rgb_luminance(ts_rgb c);

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
    int col_group;                 /* optional: a separator every col_group columns (q | k | v, heads) */
    const char *const *col_group_labels; /* optional, cols / col_group entries: "q", "k", "v" */
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
/* ---- interaction ------------------------------------------------------ */

/* What the viewer controls. A zeroed struct (or NULL) shows everything and
 * highlights nothing. */
typedef struct ts_render_state {
    int row0, col0;   /* first visible cell (pan) */
    int rows, cols;   /* number of visible cells (zoom); 0: all that fit */
    bool stretch;     /* a zoom's cells may be wider than tall (up to 1:4) for the numbers in them */
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
    const char *bar_label; /* what a colour means, along the colour bar ("attention weight"); NULL: "value" */
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
    int group;                          /* optional, >= 2: panels come in groups of this many (the query heads
                                         * that share a key/value head), each framed in a colour of its own
                                         * under a band naming it; rows then hold whole groups */
    const char *const *group_labels;    /* n / group entries: "kv 0 \xc2\xb7 heads 0, 1" */
    bool fixed_scale;                   /* otherwise one auto scale for all panels */
    ts_render_scale scale;
    const char *bar_label;              /* what a colour means, along the colour bar; NULL: "value" */
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
    bool mark;      /* mark point mark_at: a line across the plot there (the viewer's snapshot) */
    int mark_at;
    bool points;    /* dots only, no line (points that should fall on another series' line) */
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
    const char *ref_label; /* optional: a dashed level line at y = ref_y, named (a clip threshold) */
    double ref_y;
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

/* One LayerNorm or RMSNorm, for one batch element. */
typedef struct ts_render_norm {
    const float *in;  /* (seq, dim) what the norm receives */
    const float *out; /* (seq, dim) what it gives */
    int seq, dim;
    const float *gamma, *beta;     /* optional (dim); an RMSNorm has no beta */
    const char *const *tokens;     /* optional (seq) */
    const float *rms;              /* (seq): an RMSNorm's step rms, sqrt(mean(x^2) + eps); NULL: a LayerNorm */
    const float *y;                /* optional (seq, dim): an RMSNorm's x / rms */
    bool one_plus;                 /* Gemma's RMSNorm: gamma holds w, the scale is 1 + w */
} ts_render_norm;

/* A LayerNorm: per-token mean and std before and after, histograms of values
 * before and after, and gamma and beta when given. An RMSNorm (rms given):
 * per-token rms of x, y and out, the mean it leaves alone, the scale
 * (gamma, or 1 + w), the histograms. */
ts_status ts_render_layernorm(cairo_t *cr, ts_render_rect area, const ts_render_norm *d,
                              const char *title, const char *subtitle);

/* RoPE, from the model's numbers alone: each pair of a head's first `rotary`
 * dims turns by angle = position * theta^(-2i / rotary) (pair i: dims i and
 * i + rotary/2 in the rotate-half style, 2i and 2i + 1 interleaved); the
 * other head_dim - rotary dims do not turn. Drawn: cos(angle) of a few pairs
 * over positions (fast pairs first, the unturned dims flat), and the score
 * q.k of one q and one k (every dim 1) turned to positions i and j, against
 * i - j, with the same score from positions shifted by `shift` dotted on
 * it: it depends on the distance only. */
typedef struct ts_render_rope_view {
    int head_dim, rotary;  /* rotary even, 2..head_dim */
    double theta;
    bool interleaved;
    int positions;         /* the curves' positions 0..positions-1 (>= 2) */
    int seq;               /* the trace's positions, said in the caption; 0: none */
    const char *title, *subtitle;
    const char *check;     /* optional: a line on how the trace's own rotation agrees with the formula */
} ts_render_rope_view;

ts_status ts_render_rope(cairo_t *cr, ts_render_rect area, const ts_render_rope_view *v);
/* The score the view draws: q = k = every dim 1, q turned to position i, k
 * to j, their dot product over head_dim (1 at i = j). */
double ts_render_rope_score(const ts_render_rope_view *v, int i, int j);
/* The angle per position of pair p (theta^(-2p / rotary)). */
double ts_render_rope_frequency(const ts_render_rope_view *v, int pair);

/* Token ids (one sequence) as categories: each position a plain box with the
 * id in it and its token under it; no colour scale, no statistics. */
typedef struct ts_render_ids_view {
    const float *ids;           /* (n) as a trace stores them */
    const char *const *tokens;  /* optional (n) */
    int n;
    const char *title, *subtitle;
} ts_render_ids_view;

ts_status ts_render_ids(cairo_t *cr, ts_render_rect area, const ts_render_ids_view *v);
/* The height in points that n ids take at this width. */
int ts_render_ids_height(int n, double width);

/* The logit lens (tscope run --lens): positions across, layers down; each
 * cell the token the layer's stream would predict next, coloured by its
 * probability (viridis, 0 to 1). A cell framed in red predicted the token
 * that does come next (a masked LM's: the token at that position). */
typedef struct ts_render_lens_view {
    int layers, positions;
    const int *top;             /* (layers, positions) the most likely next token */
    const float *prob;          /* (layers, positions) its probability */
    const char *const *vocab;   /* labels of the vocabulary, or NULL (ids then) */
    const char *const *tokens;  /* (positions) the input's tokens, or NULL */
    const int *next;            /* (positions) the token that comes next (masked: the one there), -1 unknown; or NULL */
    bool masked;                /* a masked LM (BERT): each layer read through the masked-LM head, each cell
                                   the token at its own position, not the next one */
    const char *title, *subtitle;
} ts_render_lens_view;

ts_status ts_render_lens(cairo_t *cr, ts_render_rect area, const ts_render_lens_view *v);
/* A good size in points for a lens of this many layers and positions. */
void ts_render_lens_size(int layers, int positions, int *width, int *height);

/* Signed values as horizontal bars, one labelled row each, around a zero
 * line: positive red to the right, negative blue to the left, the value at
 * each bar's end (direct logit attribution: each part's share of a logit). */
typedef struct ts_render_bars_view {
    const char *const *labels; /* (n) */
    const double *values;      /* (n) */
    int n;
    const char *title, *subtitle, *value_axis;
} ts_render_bars_view;

ts_status ts_render_bars(cairo_t *cr, ts_render_rect area, const ts_render_bars_view *v);
/* A good height in points for n bars. */
int ts_render_bars_height(int n);

/* Any tensor: a 2-D slice as a heatmap beside a statistics panel and a
 * histogram (both of the whole tensor when given, of the slice otherwise). */
typedef struct ts_render_tensor_view {
    ts_render_matrix slice;
    const char *title;
    const char *subtitle; /* shape, op, which slice */
    const char *row_axis, *col_axis;
    const ts_trace_stats *stats; /* optional (ts_trace_stats_compute) */
    const ts_render_hist *hist;   /* optional */
    bool fixed_scale;
    const char *bar_label; /* what a colour means, along the colour bar; NULL: "value" */
    ts_render_scale scale;
} ts_render_tensor_view;

ts_status ts_render_tensor(cairo_t *cr, ts_render_rect area, const ts_render_tensor_view *v,
                           const ts_render_state *st, ts_render_layout *layout);

/* One position's next-token distribution: the top_k most likely tokens as
 * horizontal bars, largest on top, each with its label, its probability and
 * (when given) its logit; what the others share said under the bars. */
#define TS_RENDER_DIST_MAX 40
typedef struct ts_render_dist_view {
    const float *probs;        /* (n) sums to 1 */
    const float *logits;       /* optional (n) */
    const char *const *labels; /* optional (n): the vocabulary */
    int n;
    int top_k;  /* 1..TS_RENDER_DIST_MAX; 0: 10 */
    int actual; /* the token the text has next, drawn in another colour; -1: none */
    const char *title, *subtitle;
} ts_render_dist_view;

ts_status ts_render_dist(cairo_t *cr, ts_render_rect area, const ts_render_dist_view *v);
/* The height in points k bars take at the current font scale. */
int ts_render_dist_height(int k);

/* A step of a module, for the shape flow. */
#define TS_RENDER_MAX_INPUTS 4
#define TS_RENDER_OUTSIDE (-1) /* an input from outside the steps drawn: the module's input */
#define TS_RENDER_MEMORY (-2)  /* the encoder's output, which a cross-attention's keys and values read */

typedef struct ts_render_step {
    const char *name; /* full trace name */
    const char *op;   /* "linear" */
    int rank;
    int64_t shape[TS_MAX_RANK];
    int inputs[TS_RENDER_MAX_INPUTS]; /* the steps it reads: indices before it, or TS_RENDER_OUTSIDE */
    int n_inputs;                     /* 0: a source (a parameter) */
} ts_render_step;

/* What the names alone do not say about how a layer is wired. */
typedef struct ts_render_wiring {
    bool pre_norm;         /* the model normalizes before each sublayer */
    bool seed004_residual; /* seed 004's block (variant seed004-residual): x + dropout(x), the attention
                            * unread; the FFN's skip starts at norm2's out */
} ts_render_wiring;

/* Fill each step's inputs from the names tscope's model gives its steps:
 * q, k, v from one tensor, scores from q and k, values from the weights and
 * v, a LayerNorm's y from in, mean and std, a residual add from its sublayer
 * and the stream it skipped. A name no rule knows reads the step before it. */
void ts_render_steps_link(ts_render_step *steps, int n, const ts_render_wiring *w);

/* The steps as a dataflow graph, drawn downwards: each step a box with its
 * op and shape ([30, 200, 1536]), an arrow from each of its inputs, steps
 * that read the same level side by side (q, k, v), and long edges (v to
 * values, a residual skip) routed beside the boxes. A dim that differs from
 * the step's first input is marked in red. Names are shown without the
 * prefix they all share, which becomes the title when title is NULL. */
ts_status ts_render_shapes(cairo_t *cr, ts_render_rect area, const ts_render_step *steps, int n,
                           const char *title, const char *subtitle);

/* A size in points that suits the flow of these (linked) steps. */
void ts_render_shapes_size(const ts_render_step *steps, int n, int *width, int *height);

/* Training: loss over steps above per-layer gradient norms over steps;
 * clip > 0 draws the threshold the run clipped the total norm at. */
ts_status ts_render_training(cairo_t *cr, ts_render_rect area, const ts_render_series *loss,
                             const ts_render_series *grad_norms, int n_grad, double clip, const char *title,
                             const char *subtitle);

/* ---- choosing a view ---------------------------------------------------- */

#define TS_RENDER_VIEW_LIST(X)        \
    X(TS_RENDER_VIEW_AUTO, "auto")     \
    X(TS_RENDER_VIEW_HEATMAP, "heatmap") \
    X(TS_RENDER_VIEW_GRID, "grid")     \
    X(TS_RENDER_VIEW_OVERVIEW, "overview") \
    X(TS_RENDER_VIEW_CURVES, "curves") \
    X(TS_RENDER_VIEW_STATS, "stats")   \
    X(TS_RENDER_VIEW_SHAPES, "shapes") \
    X(TS_RENDER_VIEW_LENS, "lens")     \
    X(TS_RENDER_VIEW_DIST, "dist")     \
    X(TS_RENDER_VIEW_ROPE, "rope")

#define TS_RENDER_VIEW_ENTRY(e, name) e,
typedef enum ts_render_view { TS_RENDER_VIEW_LIST(TS_RENDER_VIEW_ENTRY) TS_RENDER_VIEW_COUNT } ts_render_view;
#undef TS_RENDER_VIEW_ENTRY

const char *ts_render_view_name(ts_render_view v);
bool ts_render_view_from_name(const char *name, ts_render_view *out);

/* ---- setup ------------------------------------------------------------ */

/* The font family for all text ("DejaVu Sans" by default); NULL resets. */
void ts_render_set_font(const char *family);

/* Every text drawn `scale` times its size (1 by default; 0.5 to 4): for
 * figures shown on a projector, where labels must stay large at the export
 * size. Views lay out around the measured text, so cells shrink, not text. */
void ts_render_set_font_scale(double scale);
double ts_render_font_scale(void);

/* Every text at least `size` device units high (0, the default: no floor),
 * whatever scale a view is drawn at: the site's figures, shown at one CSS
 * pixel a point, keep their smallest text readable on screen. A cell too
 * small for its number at this size shows its colour only. */
void ts_render_set_min_text(double size);
double ts_render_min_text(void);

/* A caption under a figure: text wrapped to area's width below a thin
 * rule; returns the height it takes; draws only when `draw`. */
double ts_render_caption_block(cairo_t *cr, ts_render_rect area, const char *text, bool draw);

/* One bold line at the top left of area (a panel's name: which run it
 * shows), shortened with "…" when it must be (a clip, recorded); returns
 * the height it takes. */
double ts_render_caption_line(cairo_t *cr, ts_render_rect area, const char *text);

/* One end of a highlight range as the command line and the Python figure
 * take it: "4", "2-6", "*" (every one), len bytes at s, into out (first,
 * last); false when it is none of these. */
bool ts_render_parse_range(const char *s, size_t len, int out[2]);

/* Frame the cells rows row0..row1, columns col0..col1 (inclusive) in every
 * panel of a drawn layout, in red with a white edge, outside the cells. An
 * error when the view drew no cells or the range is not the matrix's.
 * row1 or col1 of 1 << 30 or more: to the last. */
ts_status ts_render_frame_cells(cairo_t *cr, const ts_render_layout *l, int row0, int row1, int col0, int col1);

/* Fill area with the background colour (views do this themselves). */
void ts_render_clear(cairo_t *cr, ts_render_rect area);

/* Text outside the renderers (lesson pages, the viewer's list and status
 * bar) goes through these two, so every text of viz/ is drawn alike and can
 * be measured. ts_render_text_layout: a pango layout for cr with the
 * renderers' font options (unhinted outlines, fractional positions), so text
 * measures the same on an image, SVG or PDF surface; unref it when done.
 * ts_render_show_layout: show it at cr's current point (pango_cairo_show_layout,
 * seen by the text probe below). */
typedef struct _PangoLayout PangoLayout;
PangoLayout *ts_render_text_layout(cairo_t *cr);
void ts_render_show_layout(cairo_t *cr, PangoLayout *layout);

/* The text probe: a function told about every text viz/ draws, with its size
 * in device pixels, for the readability test (tests/readability_test.sh) and
 * `TSCOPE_TEXT_LOG=FILE`. font_px: the smallest font size of its runs;
 * line_px: its smallest logical line height (pango's line extents); x, y:
 * where it starts, in device pixels. One probe for the process; NULL: none. */
typedef struct ts_render_text_info {
    const char *text;
    double font_px, line_px;
    double x, y;
    double w, h;     /* its logical box on the device: x, y its top left (a turned label's box turned too) */
    bool ellipsized; /* cut short with "…" to fit a width */
} ts_render_text_info;
typedef void (*ts_render_text_probe)(void *ctx, const ts_render_text_info *t);
void ts_render_set_text_probe(ts_render_text_probe fn, void *ctx);
/* The probe set now (to put it back after borrowing it). */
void ts_render_get_text_probe(ts_render_text_probe *fn, void **ctx);

/* ---- text that could not be drawn whole ---------------------------------- */

/* While a figure is recorded (ts_figure_write records each figure it draws,
 * a hand-out each page), every text viz/ shows is checked: one pango had to
 * shorten with "…", one whose ink overlaps the ink of a text drawn before it
 * on the same surface, one partly outside what the surface shows (a clip, the
 * picture's edge) is recorded. The policy says what a figure with such text
 * does: by default it is written and `warn` (may be NULL) hears of it; with
 * TS_RENDER_CLIPS_FAIL it is refused with an error naming the texts (the
 * command line's TSCOPE_CLIPS=error, which the tests set). */
typedef enum ts_render_clip_policy {
    TS_RENDER_CLIPS_WARN,
    TS_RENDER_CLIPS_FAIL,
} ts_render_clip_policy;
typedef void (*ts_render_clip_warn)(const char *what, int n, const char *desc);
void ts_render_set_clip_policy(ts_render_clip_policy p, ts_render_clip_warn warn);

/* Start recording (forgetting any earlier record). */
void ts_render_clips_begin(void);
/* Stop recording; the number of texts recorded, and a description of the
 * first few ("shortened to fit: \"EDITED: head0 …\"") into desc (may be NULL). */
int ts_render_clips_end(char *desc, size_t cap);
/* Stop recording and apply the policy to what was recorded, naming `what`
 * (the file): TS_OK, after a warning when there was any; an error under
 * TS_RENDER_CLIPS_FAIL. */
ts_status ts_render_clips_check(const char *what);

/* Drop pango's default font map (and the fonts it holds), so a leak checker
 * sees a clean exit. Call once, last, after all drawing (a later drawing
 * call loads the fonts again). */
void ts_render_release_fonts(void);

/* png: cairo image surfaces to PNG files and back.
 *
 * Writing goes through stb_image_write (zlib does the deflate) into a
 * temporary file that is renamed into place, so a reader never sees half an
 * image. Open the output first, draw, then commit: a path that cannot be
 * written is reported before any drawing is done.
 */

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

/* figure: a picture written to a file as PNG, SVG or PDF.
 *
 * The caller's draw function paints into a cairo context of width x height
 * points; the format only picks the surface under it: an image surface of
 * `scale` pixels per point (PNG), or cairo's SVG or PDF surface (sizes in
 * points). So a vector figure is drawn by the same code as the PNG, never by
 * a second path. Text in a PDF is text (embedded font subsets, selectable and
 * searchable). Text in an SVG is text too: every layout the views show is
 * written as a <text> element (font, size, colour, each character's x as
 * pango placed it) in place of cairo's glyph outlines, so labels, titles and
 * numbers can be selected, searched and edited (viz/render/svg_text.c).
 * The file is written under a temporary name and renamed into place.
 */

typedef enum ts_figure_format {
    TS_FIGURE_PNG,
    TS_FIGURE_SVG,
    TS_FIGURE_PDF,
    TS_FIGURE_FORMAT_COUNT
} ts_figure_format;

const char *ts_figure_format_name(ts_figure_format f); /* "png", "svg", "pdf" */
bool ts_figure_format_from_name(const char *name, ts_figure_format *out);
/* The format named by a path's extension (.png, .svg, .pdf, any case). */
bool ts_figure_format_from_path(const char *path, ts_figure_format *out);

typedef struct ts_figure_spec {
    ts_figure_format format;
    double width, height; /* points */
    double scale;         /* PNG: pixels per point, in (0, 8]; unused by SVG and PDF */
    const char *title;    /* PDF metadata, the SVG's <title>; may be NULL */
    const char *desc;     /* SVG only: a <desc>, the figure's text alternative; may be NULL */
    bool svg_pixelated;   /* SVG for browsers: cell images kept at one pixel a cell, shown with
                           * image-rendering: pixelated (other SVG readers may blur them; without this
                           * they are enlarged in the file, which any reader shows sharp) */
} ts_figure_spec;

/* While a figure is drawn into an SVG: add raw SVG markup (tooltips: a
 * <rect> with a <title> over a cell) to the layer written on top of the
 * drawing, in cr's user units at scale 1; nothing for other surfaces.
 * ts_render_svg_recording says whether cr is such an SVG. */
void ts_render_svg_add(cairo_t *cr, const char *svg);
bool ts_render_svg_recording(cairo_t *cr);
/* s (n bytes at most, or up to its NUL) escaped for XML text and attributes. */
void ts_render_svg_escape(ts_text_buf *b, const char *s, size_t n);

/* Paint the figure into (0, 0, w, h) of cr. */
typedef ts_status (*ts_figure_draw_fn)(void *ctx, cairo_t *cr, double w, double h);

/* Open path (failing before any drawing when it cannot be written), draw,
 * and write it in the spec's format. Nothing appears at path on failure. */
ts_status ts_figure_write(const char *path, const ts_figure_spec *spec, ts_figure_draw_fn draw, void *ctx);

/* scene: one step of a trace, made ready to draw.
 *
 * The glue between the trace reader and the renderers, shared by `tscope png`
 * and the viewer so both show the same picture of the same step: a scene
 * picks the view (by the step's tag, or the one asked for), gathers what it
 * needs from the trace (the batch element, a head, the causal mask from the
 * `masked` step beside attention weights, token labels from the metadata,
 * LayerNorm input/output/gamma/beta, a module's steps for the shape flow) and
 * draws it with ts_render_* into any cairo_t. Values are used in place in
 * the trace's map: the trace must stay open while the scene lives.
 *
 *     ts_scene_request rq = ts_scene_request_default("encoder.layers.0.self_attn.weights");
 *     ts_scene *sc;
 *     if (ts_scene_build(&sc, trace, &rq)) -> ts_last_error() says what is wrong, for a person
 *     ts_scene_size(sc, &w, &h);                   // a good size in points
 *     ts_scene_draw(sc, cr, area, state, &layout);  // any number of times
 *     ts_scene_free(sc);
 */

typedef struct ts_scene ts_scene;

typedef struct ts_scene_request {
    const char *name;       /* a step's name, or a module prefix ("encoder.layers.0.self_attn") */
    ts_render_view view;    /* TS_RENDER_VIEW_AUTO: chosen by the step's tag */
    int batch;              /* batch element (0) */
    int head;               /* one attention head; -1: all (auto then draws the grid) */
    int occurrence;         /* which record of the name, for traces that repeat names (0; -1: last) */
    bool mark_occurrence;   /* curves over records mark that record (the viewer's current snapshot) */
    const char *axes;       /* "I,J": the two dims a tensor heatmap shows; NULL: the last two */
    const char *trace_path; /* only for messages; may be NULL */
    const int *dims;        /* PE curves: the dims to draw (NULL: a choice of the renderer) */
    int n_dims;             /* up to 16 */
    int position;           /* the distribution view: which position (-1: the last) */
    int top_k;              /* the distribution view: how many tokens (0: 10) */
    bool lesson_keys;       /* hints in a lesson's setup keys (level:, only:), not run's flags */
} ts_scene_request;

ts_scene_request ts_scene_request_default(const char *name);

/* Gather the data of one view of one step. Bad requests are TS_ERR_ARG with a
 * sentence that says what to do: an unknown name lists the nearest names; a
 * step whose values were not kept says which --level/--only to re-run with. */
ts_status ts_scene_build(ts_scene **out, ts_trace *t, const ts_scene_request *rq);

void ts_scene_free(ts_scene *s); /* NULL is fine */

/* A size in points (user units at scale 1) that suits the scene's data. */
void ts_scene_size(const ts_scene *s, int *width, int *height);

/* The view it ended up as, and a short name for files and messages
 * ("grid", "heatmap", ...; "posenc" for PE curves above the PE heatmap). */
ts_render_view ts_scene_view(const ts_scene *s);
const char *ts_scene_view_name(const ts_scene *s);

/* Draw into area of cr. st (may be NULL) and layout (may be NULL) as in
 * render.h: views without cells leave layout->n_panels at 0. */
ts_status ts_scene_draw(ts_scene *s, cairo_t *cr, ts_render_rect area, const ts_render_state *st,
                        ts_render_layout *layout);

/* The step drawn (NULL for a module's shape flow). */
const ts_trace_step *ts_scene_step(const ts_scene *s);

/* Which parts of the request the picture shows, so a caller can refuse a
 * flag that would change nothing (`png --head` on a LayerNorm's statistics):
 * the batch element (the step has a batch dim), the head (one head drawn, or
 * dim 1 fixed at it), the axes (a tensor heatmap's two dims). */
enum {
    TS_SCENE_USED_BATCH = 1u,
    TS_SCENE_USED_HEAD = 2u,
    TS_SCENE_USED_AXES = 4u,
    TS_SCENE_USED_POSITION = 8u,
    TS_SCENE_USED_DIMS = 16u, /* the request's dims (PE curves) */
};

/* Replace the title a scene draws (a slide's own words); NULL or "" keeps it. */
void ts_scene_set_title(ts_scene *s, const char *title);
unsigned ts_scene_used(const ts_scene *s);

/* The matrix panel `panel` of the layout shows (values, strides, token
 * labels), so a viewer can name the cell under the mouse and its exact
 * value; NULL for views whose panels are not matrices of the scene. */
const ts_render_matrix *ts_scene_matrix(const ts_scene *s, int panel);

/* The colour scale the scene's cells are drawn with; false for views without
 * one (curves, statistics, shapes, ids). Setting one draws every panel with
 * it: two scenes compared side by side can share a scale, so that equal
 * colours mean equal values. */
bool ts_scene_color_scale(const ts_scene *s, ts_render_scale *out);
void ts_scene_set_color_scale(ts_scene *s, ts_render_scale scale);

/* Draw b's curves into a's plot, so two runs share one pair of axes: each
 * side's curves are named after it (label_a, label_b) in a legend. Both must
 * be curves (a plot, or a training picture, whose loss is kept); b's values
 * are used in place, so b must live as long as a is drawn. */
ts_status ts_scene_overlay(ts_scene *a, const ts_scene *b, const char *label_a, const char *label_b);

/* ---- canvas: one layout, two ways to paint it ---------------------------
 * The live views (every head, one head large, the lens, the loss strip) are
 * laid out once, in C, through this small interface, and painted either by
 * cairo (the `tscope live` window and its PNGs) or into a display list that
 * the live web page replays on an HTML canvas (src/wasm). The display-list
 * backend and the views need nothing of cairo, so `make wasm` compiles them.
 * Units are pixels; colours sRGB in [0, 1]. */

typedef enum ts_canvas_align { TS_CANVAS_LEFT = 0, TS_CANVAS_CENTRE = 1, TS_CANVAS_RIGHT = 2 } ts_canvas_align;

/* What a backend paints. Text is centred vertically on y, `size` pixels,
 * anchored at x by align. An image is cols x rows RGBA cells stretched over
 * (x, y, w, h) without smoothing (copied: rgba may go after). clip narrows painting to a rectangle until
 * unclip (one level). */
typedef struct ts_canvas_ops {
    void (*rect)(void *ctx, double x, double y, double w, double h, ts_rgb c);
    void (*frame)(void *ctx, double x, double y, double w, double h, ts_rgb c, double width);
    void (*line)(void *ctx, double x0, double y0, double x1, double y1, ts_rgb c, double width);
    void (*text)(void *ctx, double x, double y, double size, ts_canvas_align a, ts_rgb c, bool bold, const char *s);
    void (*image)(void *ctx, double x, double y, double w, double h, int cols, int rows, const unsigned char *rgba);
    void (*clip)(void *ctx, double x, double y, double w, double h);
    void (*unclip)(void *ctx);
} ts_canvas_ops;

/* A region of the last layout a click may land in, and what it means (the
 * views' own numbering: a head is layer * heads + head). */
typedef struct ts_canvas_hit {
    double x, y, w, h;
    int id;
} ts_canvas_hit;

typedef struct ts_canvas {
    const ts_canvas_ops *ops;
    void *ctx;
    ts_canvas_hit *hits; /* (cap_hits) the hit regions laid out since ts_canvas_begin */
    int n_hits, cap_hits;
    bool failed;         /* out of memory for a hit region: hits are incomplete */
} ts_canvas;

/* A new layout on c: its hit regions forgotten. */
void ts_canvas_begin(ts_canvas *c);
void ts_canvas_free(ts_canvas *c); /* the hit regions; not the backend */
void ts_canvas_rect(ts_canvas *c, double x, double y, double w, double h, ts_rgb col);
void ts_canvas_frame(ts_canvas *c, double x, double y, double w, double h, ts_rgb col, double width);
void ts_canvas_line(ts_canvas *c, double x0, double y0, double x1, double y1, ts_rgb col, double width);
void ts_canvas_text(ts_canvas *c, double x, double y, double size, ts_canvas_align a, ts_rgb col, bool bold, const char *s);
/* cols x rows RGBA cells (rgba, rows of cols * 4 bytes) stretched over (x, y, w, h). */
void ts_canvas_image(ts_canvas *c, double x, double y, double w, double h, int cols, int rows, const unsigned char *rgba);
void ts_canvas_clip(ts_canvas *c, double x, double y, double w, double h);
void ts_canvas_unclip(ts_canvas *c);
void ts_canvas_hit_region(ts_canvas *c, double x, double y, double w, double h, int id);
/* The id of the last region laid out under (x, y), or -1. */
int ts_canvas_hit_at(const ts_canvas *c, double x, double y);

/* The display list (canvas_dl.c): ops of TS_DL_FLOATS floats each, in the
 * order they are painted, colours as r, g, b in [0, 1]:
 *   RECT   kind x y w h r g b          a filled rectangle
 *   FRAME  kind x y w h r g b width    a rectangle's outline
 *   LINE   kind x0 y0 x1 y1 r g b width
 *   TEXT   kind x y size align r g b bold at: the NUL-terminated UTF-8 at
 *          text + at, centred vertically on y; align 0 left, 1 centre, 2 right
 *   IMAGE  kind x y w h cols rows - - at: cols x rows RGBA pixels at
 *          pixels + at, each a cell, stretched over w x h without smoothing
 *   CLIP   kind x y w h                painting kept inside, until UNCLIP
 *   UNCLIP kind */
enum { TS_DL_FLOATS = 10 };
typedef enum ts_dl_kind {
    TS_DL_RECT = 1, TS_DL_FRAME, TS_DL_LINE, TS_DL_TEXT, TS_DL_IMAGE, TS_DL_CLIP, TS_DL_UNCLIP
} ts_dl_kind;
typedef struct ts_dl {
    float *ops; /* (cap, TS_DL_FLOATS) */
    int n, cap;
    char *text;
    size_t text_len, text_cap;
    unsigned char *pixels; /* the images' RGBA rows */
    size_t pix_len, pix_cap;
    bool failed; /* out of memory: the list is cut, and ts_dl_count says 0 */
} ts_dl;
/* c paints into d (emptied first). */
void ts_dl_canvas(ts_dl *d, ts_canvas *c);
int ts_dl_count(const ts_dl *d);
void ts_dl_free(ts_dl *d);

/* A cairo context as a canvas (canvas_cairo.c): text through pango in the
 * renderers' font, images as cairo image surfaces. cr must outlive c's use. */
void ts_canvas_cairo(ts_canvas *c, cairo_t *cr);

/* ---- the live views (live_views.c), laid out once through a canvas ---- */

/* What the views draw, plain data: the model's (L, H) heads over n tokens. */
typedef struct ts_live_views {
    int L, H;            /* layers, heads a layer */
    int n, cap;          /* tokens read; the row stride of attn and the lens */
    const float *attn;   /* (L, H, cap, cap) every head's attention rows */
    const char *knocked; /* (L * H) 1: the head is knocked out */
    int n_knocked;
    const int32_t *lens_id; /* (L, cap) each layer's most likely next token after each position */
    const float *lens_p;    /* (L, cap) its probability */
    const float *loss;      /* (n) -log p(token | before), NaN at 0; with the knock-outs */
    const float *loss_before; /* (n) the same with every head in place, while some are out; else NULL */
    /* labels: the i-th token read, a vocabulary id (the returned text may be
     * overwritten by the next call) */
    const char *(*token)(void *u, int i);
    const char *(*vocab)(void *u, int32_t id);
    void *u;
    int focus_layer, focus_head; /* the head drawn large */
} ts_live_views;

/* The views of a live session (experiment.h) now, head (focus_layer,
 * focus_head) large (out of range: the last layer's first head). */
ts_live_views ts_live_views_of(ts_live_session *s, int focus_layer, int focus_head);

/* Lay out the views in a column `width` pixels wide from the top of c, the
 * large head shrunk to fit `height` when it is above 0 (a window; the page
 * scrolls, and passes 0); returns the height used. Each head of the grid is a hit region with id
 * layer * H + head. */
double ts_live_views_draw(ts_canvas *c, const ts_live_views *v, double width, double height);

/* The whole text's mean loss (positions 1..n-1, NaN skipped); NaN when none. */
double ts_live_views_mean_loss(const float *loss, int n);

#endif
