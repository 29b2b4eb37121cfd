/* render_shapes: the steps of a module as a dataflow graph, each box with
 * its shape, the way the seeds print `qkv.size(): torch.Size([30, 200,
 * 1536])` after every line, but drawn along the data: the edges are each
 * step's inputs (ts_render_steps_link), steps on the same level stand side by
 * side, and a dim that differs from the step's first input is marked, so
 * reshapes and permutes show where the numbers move. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "render_internal.h"

#define CHANGED_COLOR "#d62728"
/* Length of the prefix (up to and including a '.') that all names share. */
static size_t common_prefix(const ts_render_step *steps, int n) {
    if (n < 1 || !steps[0].name) return 0;
    const char *first = steps[0].name;
    size_t len = strlen(first);
    for (int i = 1; i < n; i++) {
        size_t k = 0;
        while (k < len && steps[i].name && steps[i].name[k] == first[k]) k++;
        len = k;
    }
    if (n == 1 || len == strlen(first)) {
        /* Keep at least the last component as the box's name. */
        const char *dot = strrchr(first, '.');
        if (!dot) return 0;
        if ((size_t)(dot - first + 1) < len || n == 1) len = (size_t)(dot - first + 1);
    }
    while (len > 0 && first[len - 1] != '.') len--;
    return len;
}

/* "[30, <changed>8</changed>, 200, 64]" as pango markup. */
static void shape_markup(char *buf, size_t size, const ts_render_step *s, const ts_render_step *prev) {
    size_t at = 0;
    at += (size_t)snprintf(buf + at, size - at, "[");
    for (int d = 0; d < s->rank && at < size; d++) {
        bool changed = prev && (d >= prev->rank || prev->shape[d] != s->shape[d]);
        if (changed)
            at += (size_t)snprintf(buf + at, size - at, "<span foreground='" CHANGED_COLOR "' weight='bold'>%lld</span>",
                                   (long long)s->shape[d]);
        else
            at += (size_t)snprintf(buf + at, size - at, "%lld", (long long)s->shape[d]);
        if (d + 1 < s->rank && at < size) at += (size_t)snprintf(buf + at, size - at, ", ");
    }
    if (at < size) snprintf(buf + at, size - at, "]");
}


/* The step a step's shape is compared with: its first input, when that is a
 * drawn step on the data path. */
static const ts_render_step *first_input(const ts_render_step *steps, int i) {
    const ts_render_step *s = &steps[i];
    if (ts_render__is_param(s) || s->n_inputs < 1 || s->inputs[0] < 0 || s->inputs[0] >= i) return NULL;
    return ts_render__is_param(&steps[s->inputs[0]]) ? NULL : &steps[s->inputs[0]];
}

typedef struct box_fonts {
    ts_render__font name, op, shape;
} box_fonts;

static box_fonts fonts_at(double k) {
    box_fonts f = {
        ts_render__font_of(12.5 * k, TS_RENDER__BOLD, ts_render__ink),
        ts_render__font_of(11.5 * k, 0, ts_render__muted),
        ts_render__font_of(12.5 * k, TS_RENDER__MONO | TS_RENDER__MARKUP, ts_render__ink),
    };
    return f;
}

/* An arrow head at (x, y), pointing along the segment from (x0, y0). */
static void arrow_head(cairo_t *cr, double x0, double y0, double x, double y) {
    double a = atan2(y - y0, x - x0), len = 7, half = 0.45;
    cairo_move_to(cr, x, y);
    cairo_line_to(cr, x - len * cos(a - half), y - len * sin(a - half));
    cairo_line_to(cr, x - len * cos(a + half), y - len * sin(a + half));
    cairo_close_path(cr);
    cairo_fill(cr);
}

/* ---- layout ------------------------------------------------------------------- */

#define MAX_NODES 130 /* the steps, the module's input and the encoder's memory */
#define LANE 7.0      /* between edges that run beside the boxes */

typedef struct graph {
    int n;            /* steps; node n is the module's input, n + 1 the encoder's memory */
    bool outside, memory;
    int level[MAX_NODES], rows;
    int width[MAX_NODES];  /* boxes on each level */
    int slot[MAX_NODES];   /* place of a node on its level, from the left */
} graph;

static int node_of(const graph *g, int input) {
    return input == TS_RENDER_OUTSIDE ? g->n : input == TS_RENDER_MEMORY ? g->n + 1 : input;
}

static bool is_drawn(const graph *g, int node) {
    return node < g->n || (node == g->n && g->outside) || (node == g->n + 1 && g->memory);
}

/* Levels: one below the lowest input; a parameter sits on the level of the
 * other inputs of the step that reads it (gamma and beta beside y). */
static void place(graph *g, const ts_render_step *steps, int n) {
    memset(g, 0, sizeof *g);
    g->n = n < MAX_NODES - 2 ? n : MAX_NODES - 2;
    for (int i = 0; i < g->n; i++)
        for (int k = 0; k < steps[i].n_inputs; k++) {
            if (steps[i].inputs[k] == TS_RENDER_OUTSIDE) g->outside = true;
            if (steps[i].inputs[k] == TS_RENDER_MEMORY) g->memory = true;
        }
    int base = g->outside || g->memory ? 1 : 0;
    for (int i = 0; i < g->n; i++) {
        int lv = base;
        for (int k = 0; k < steps[i].n_inputs; k++) {
            int j = node_of(g, steps[i].inputs[k]);
            if (j >= g->n || (j >= 0 && j < i && !ts_render__is_param(&steps[j]))) lv = fmax(lv, g->level[j] + 1);
        }
        g->level[i] = lv;
    }
    for (int i = 0; i < g->n; i++) {
        if (!ts_render__is_param(&steps[i])) continue;
        g->level[i] = base;
        for (int c = i + 1; c < g->n; c++)
            for (int k = 0; k < steps[c].n_inputs; k++)
                if (steps[c].inputs[k] == i) {
                    g->level[i] = g->level[c] > base ? g->level[c] - 1 : base;
                    c = g->n;
                    break;
                }
    }
    /* the module's input and the memory first, on level 0, then the steps */
    for (int k = 0; k < g->n + 2; k++) {
        int node = k < 2 ? g->n + k : k - 2;
        if (!is_drawn(g, node)) continue;
        g->slot[node] = g->width[g->level[node]]++;
        if (g->level[node] + 1 > g->rows) g->rows = g->level[node] + 1;
    }
}

#define MAX_BANDS 8

typedef struct geometry {
    double box_h, gap_x, gap_y, band_gap, top;
    int rows_per_band, bands;
    double w[MAX_NODES];                       /* each box's width */
    double x[MAX_NODES], y[MAX_NODES];         /* each box's top left */
    double band_x[MAX_BANDS], band_w[MAX_BANDS];
} geometry;

/* Widths of the levels' rows, the bands' widths, and every box's place:
 * rows centred in their band, bands left to right from x0. Returns the
 * width of the whole block. */
static double lay_out(const graph *g, geometry *m, double x0) {
    double row_w[MAX_NODES] = {0};
    for (int node = 0; node < g->n + 2; node++)
        if (is_drawn(g, node)) row_w[g->level[node]] += m->w[node] + (row_w[g->level[node]] > 0 ? m->gap_x : 0);
    for (int b = 0; b < MAX_BANDS; b++) m->band_w[b] = 0;
    for (int lv = 0; lv < g->rows; lv++) {
        int b = lv / m->rows_per_band;
        if (b < MAX_BANDS && row_w[lv] > m->band_w[b]) m->band_w[b] = row_w[lv];
    }
    m->band_x[0] = x0;
    for (int b = 1; b < m->bands && b < MAX_BANDS; b++) m->band_x[b] = m->band_x[b - 1] + m->band_w[b - 1] + m->band_gap;
    /* boxes of a level left to right in slot order */
    double at[MAX_NODES] = {0};
    for (int slot = 0; slot < MAX_NODES; slot++) {
        bool any = false;
        for (int node = 0; node < g->n + 2; node++) {
            if (!is_drawn(g, node) || g->slot[node] != slot) continue;
            any = true;
            int lv = g->level[node], b = lv / m->rows_per_band;
            if (b >= MAX_BANDS) b = MAX_BANDS - 1;
            m->x[node] = m->band_x[b] + (m->band_w[b] - row_w[lv]) / 2 + at[lv];
            m->y[node] = m->top + (lv % m->rows_per_band) * (m->box_h + m->gap_y);
            at[lv] += m->w[node] + m->gap_x;
        }
        if (!any) break;
    }
    int last = m->bands < MAX_BANDS ? m->bands - 1 : MAX_BANDS - 1;
    return m->band_x[last] + m->band_w[last] - x0;
}

/* A level wider than the area, even with the text at its smallest: the boxes
 * that do not fit go to a level of their own just below it (every later level
 * moves down one), and so on until each row fits. A box still reads only
 * levels above it. Returns whether any level was split. */
static bool wrap_levels(graph *g, const geometry *m, double avail_w) {
    bool split = false;
    for (int lv = 0; lv < g->rows && g->rows < MAX_NODES; lv++) {
        double at = 0;
        int kept = 0, cut_slot = -1;
        for (int slot = 0; slot < g->width[lv]; slot++)
            for (int node = 0; node < g->n + 2; node++) {
                if (!is_drawn(g, node) || g->level[node] != lv || g->slot[node] != slot) continue;
                double w = m->w[node] + (kept > 0 ? m->gap_x : 0);
                if (kept > 0 && at + w > avail_w && cut_slot < 0) cut_slot = slot;
                if (cut_slot < 0) at += w, kept++;
            }
        if (cut_slot < 0) continue;
        for (int node = 0; node < g->n + 2; node++)
            if (is_drawn(g, node) && g->level[node] > lv) g->level[node]++;
        for (int r = g->rows; r > lv + 1; r--) g->width[r] = g->width[r - 1];
        g->rows++;
        g->width[lv + 1] = g->width[lv] - cut_slot;
        g->width[lv] = cut_slot;
        for (int node = 0; node < g->n + 2; node++)
            if (is_drawn(g, node) && g->level[node] == lv && g->slot[node] >= cut_slot) {
                g->level[node] = lv + 1;
                g->slot[node] -= cut_slot;
            }
        split = true;
    }
    return split;
}

static void rounded_box(cairo_t *cr, double x, double y, double w, double h, bool dashed) {
    cairo_new_sub_path(cr);
    cairo_arc(cr, x + w - 6, y + 6, 6, -M_PI / 2, 0);
    cairo_arc(cr, x + w - 6, y + h - 6, 6, 0, M_PI / 2);
    cairo_arc(cr, x + 6, y + h - 6, 6, M_PI / 2, M_PI);
    cairo_arc(cr, x + 6, y + 6, 6, M_PI, 1.5 * M_PI);
    cairo_close_path(cr);
    cairo_set_source_rgb(cr, dashed ? 1.0 : 0.955, dashed ? 1.0 : 0.965, dashed ? 1.0 : 0.985);
    cairo_fill_preserve(cr);
    cairo_set_source_rgb(cr, 0.60, 0.66, 0.78);
    cairo_set_line_width(cr, 1.2);
    if (dashed) cairo_set_dash(cr, (const double[]){4, 3}, 2, 0);
    cairo_stroke(cr);
    cairo_set_dash(cr, NULL, 0, 0);
}

/* One edge, from the bottom of box `from` to the top of box `to` (entering
 * at `entry`, a fraction of its width). Neighbouring levels of one band: a
 * straight line. Otherwise along the gaps: below the source's row, to a lane
 * right of its band, then (another band) over the top to a lane left of the
 * target's band, and in above the target's row. */
static void edge(cairo_t *cr, const graph *g, const geometry *m, int from, int to, double entry, int lane) {
    double sx = m->x[from] + m->w[from] / 2, sy = m->y[from] + m->box_h;
    double ex = m->x[to] + m->w[to] * entry, ey = m->y[to];
    int fb = g->level[from] / m->rows_per_band, tb = g->level[to] / m->rows_per_band;
    double below = sy + m->gap_y / 2 - 3 + (lane % 3) * 2, above = ey - m->gap_y / 2 + 3 - (lane % 3) * 2;
    if (fb == tb && g->level[to] == g->level[from] + 1) {
        cairo_move_to(cr, sx, sy);
        cairo_line_to(cr, ex, ey - 1);
        cairo_stroke(cr);
        arrow_head(cr, sx, sy, ex, ey);
        return;
    }
    double right = m->band_x[fb] + m->band_w[fb] + 10 + LANE * lane;
    cairo_move_to(cr, sx, sy);
    cairo_line_to(cr, sx, below);
    cairo_line_to(cr, right, below);
    if (fb == tb) {
        cairo_line_to(cr, right, above);
    } else {
        double over = m->top - 8 - 3 * lane;
        double left = m->band_x[tb] - 10 - LANE * lane;
        cairo_line_to(cr, right, over);
        cairo_line_to(cr, left, over);
        cairo_line_to(cr, left, above);
    }
    cairo_line_to(cr, ex, above);
    cairo_line_to(cr, ex, ey - 1);
    cairo_stroke(cr);
    arrow_head(cr, ex, above, ex, ey);
}

/* Steps on the data path whose result no later step reads (seed 004's
 * attention output), the module's last step aside: it is what the module
 * gives. Gradients run backwards through names made for the forward pass,
 * so a module of them gets no marks. Returns how many. */
static int find_unread(const ts_render_step *steps, int n, bool *unread) {
    int last = -1, count = 0;
    bool gradients = strncmp(steps[0].name, "grad.", 5) == 0;
    for (int i = 0; i < n; i++) {
        unread[i] = !gradients && !ts_render__is_param(&steps[i]);
        if (unread[i]) last = i;
    }
    for (int i = 0; i < n; i++)
        for (int k = 0; k < steps[i].n_inputs; k++)
            if (steps[i].inputs[k] >= 0 && steps[i].inputs[k] < n) unread[steps[i].inputs[k]] = false;
    if (last >= 0) unread[last] = false;
    for (int i = 0; i < n; i++) count += unread[i];
    return count;
}

/* Edges from one band to the next run over the top of the bands (edge()),
 * up to OVER above the first row: with more than one band that room is kept
 * free under the subtitle, so the lines do not cross its words. */
#define OVER 24.0

/* How many bands of how many levels fit avail_h; false when more than
 * MAX_BANDS would be needed. The bands are balanced so the last is not a
 * stub. */
static bool band_rows(const graph *g, geometry *m, double avail_h) {
    for (int pass = 0; pass < 2; pass++) {
        double h = avail_h - (pass == 1 ? OVER : 0);
        m->rows_per_band = (int)((h + m->gap_y) / (m->box_h + m->gap_y));
        if (m->rows_per_band < 1) m->rows_per_band = 1;
        m->bands = (g->rows + m->rows_per_band - 1) / m->rows_per_band;
        if (m->bands == 1) break;
    }
    if (m->bands > MAX_BANDS) return false;
    m->rows_per_band = (g->rows + m->bands - 1) / m->bands;
    return true;
}

ts_status ts_render_shapes(cairo_t *cr, ts_render_rect area, const ts_render_step *steps, int n,
                           const char *title, const char *subtitle) {
    if (!steps || n < 1) return ts_fail(TS_ERR_ARG, "render: no steps to draw");
    if (n > MAX_NODES - 2) return ts_fail(TS_ERR_ARG, "render: %d steps are too many for one flow (%d)", n, MAX_NODES - 2);
    /* A step on the data path that names no input reads the one before it. */
    ts_render_step linked[MAX_NODES];
    memcpy(linked, steps, sizeof *steps * (size_t)n);
    for (int i = 0; i < n; i++)
        if (!ts_render__is_param(&linked[i]) && linked[i].n_inputs == 0)
            linked[i].inputs[linked[i].n_inputs++] = ts_render__step_before(linked, i);
    steps = linked;
    size_t prefix = common_prefix(steps, n);
    char title_buf[160];
    if (!title) {
        snprintf(title_buf, sizeof title_buf, "%.*s", prefix > 0 ? (int)prefix - 1 : 0, steps[0].name);
        title = prefix > 0 ? title_buf : "Shapes";
    }
    bool unread[MAX_NODES];
    int n_unread = find_unread(steps, n, unread);
    char sub_buf[260];
    if (!subtitle) {
        snprintf(sub_buf, sizeof sub_buf, "%d steps, arrows from their inputs; red: a dim unlike the first input's%s", n,
                 n_unread ? "; a red frame: a result no later step reads" : "");
        subtitle = sub_buf;
    }
    graph g;
    place(&g, steps, n);
    ts_render__pen pen;
    ts_render__pen_init(&pen, cr);
    ts_render_clear(cr, area);
    const double pad = TS_RENDER__PAD;
    geometry m = {.gap_x = 16, .gap_y = 22};
    m.top = area.y + ts_render__title(&pen, area, title, subtitle) + 12;
    double avail_w = area.w - 2 * pad - 10 - LANE * 6, avail_h = area.y + area.h - pad - m.top;

    /* Shrink the text (to 80%) until the bands of levels fit the area. Boxes
     * on the data path share one width; a parameter or the module's input is
     * as wide as its own text. When even then the bands stand wider than the
     * area (a module of 32 steps on a hand-out's A4 width, whose height
     * allows few levels a band), the whole graph is drawn smaller, down to
     * half its size, rather than cut at the area's right edge. */
    box_fonts f = fonts_at(1);
    double name_h = 0, op_h = 0, block_w = 0, fit = 1;
    char markup[512];
    const double full_w = avail_w, full_h = avail_h;
    for (fit = 1; fit >= 0.49; fit -= 0.05) {
        place(&g, steps, n);
        avail_w = full_w / fit;
        avail_h = full_h / fit;
        for (double k = 1.0; k >= 0.79; k -= 0.05) {
            f = fonts_at(k);
            double path_w = 0, shape_h = 0;
            for (int node = 0; node < g.n + 2; node++) {
                if (!is_drawn(&g, node)) continue;
                const char *name = node < n ? steps[node].name + prefix : node == n ? "input" : "memory";
                const char *op = node < n ? (steps[node].op ? steps[node].op : "") : "the encoder's output";
                if (node == n) op = "what the module reads";
                double w, w_op, w_shape = 0;
                ts_render__measure(&pen, name, &f.name, &w, &name_h);
                ts_render__measure(&pen, op, &f.op, &w_op, &op_h);
                if (node < n) {
                    shape_markup(markup, sizeof markup, &steps[node], NULL);
                    ts_render__measure(&pen, markup, &f.shape, &w_shape, &shape_h);
                }
                m.w[node] = 20 + fmax(w, w_op + (w_shape > 0 ? 14 + w_shape : 0));
                if (node < n && !ts_render__is_param(&steps[node])) path_w = fmax(path_w, m.w[node]);
            }
            for (int node = 0; node < n; node++)
                if (!ts_render__is_param(&steps[node])) m.w[node] = path_w;
            m.box_h = name_h + fmax(op_h, shape_h) + 10;
            m.gap_y = 22 * k;
            m.band_gap = 30 + LANE * 6;
            if (!band_rows(&g, &m, avail_h)) continue;
            block_w = lay_out(&g, &m, 0);
            if (block_w <= avail_w) break;
        }
        /* only a level wider than the whole area is wrapped: many bands side by side are the height's to fix */
        double widest = 0;
        for (int lv = 0; lv < g.rows; lv++) {
            double row = 0;
            for (int node = 0; node < g.n + 2; node++)
                if (is_drawn(&g, node) && g.level[node] == lv) row += m.w[node] + (row > 0 ? m.gap_x : 0);
            widest = fmax(widest, row);
        }
        if (widest > (area.w - 2 * pad) / fit && wrap_levels(&g, &m, avail_w)) {
            if (!band_rows(&g, &m, avail_h)) {
                m.bands = MAX_BANDS;
                m.rows_per_band = (g.rows + m.bands - 1) / m.bands;
            }
            block_w = lay_out(&g, &m, 0);
        }
        /* Bands side by side too wide: a level wider than a band's share of
         * the width goes onto two (q, k and v one under another), before the
         * graph is drawn smaller. */
        /* the block may use the edges' lanes on its right, as it always has: only text
         * past the area's edge is cut */
        double room = (area.w - 2 * pad) / fit;
        if (block_w > room + 0.5 && m.bands > 1) {
            double share = (avail_w - (m.bands - 1) * m.band_gap) / m.bands;
            if (share > 0 && wrap_levels(&g, &m, share)) {
                if (!band_rows(&g, &m, avail_h)) {
                    m.bands = MAX_BANDS;
                    m.rows_per_band = (g.rows + m.bands - 1) / m.bands;
                }
                block_w = lay_out(&g, &m, 0);
            }
        }
        double over = m.bands > 1 ? OVER : 0;
        bool tall = m.rows_per_band * (m.box_h + m.gap_y) - m.gap_y > avail_h - over + 0.5;
        if (block_w <= room + 0.5 && !tall) break;
        if (fit - 0.05 < 0.49) break; /* the smallest: drawn as it is, its cut text reported (render.h) */
    }
    /* the graph in its own coordinates, drawn at `fit` below the title */
    double graph_top = m.top + (m.bands > 1 ? OVER * fit : 0);
    m.top = 0;
    lay_out(&g, &m, fmax(0, (avail_w - block_w) / 2));
    cairo_save(cr);
    cairo_translate(cr, area.x + pad, graph_top);
    cairo_scale(cr, fit, fit);

    /* Edges first, under the boxes. */
    cairo_set_source_rgb(cr, 0.45, 0.47, 0.55);
    cairo_set_line_width(cr, 1.4);
    /* Long edges of one source share a lane (they part only near their
     * targets); sources take lanes in turn, per band. */
    int lanes_used[8] = {0}, lane_of[MAX_NODES];
    for (int i = 0; i < MAX_NODES; i++) lane_of[i] = -1;
    for (int i = 0; i < g.n; i++)
        for (int k = 0; k < steps[i].n_inputs; k++) {
            int j = node_of(&g, steps[i].inputs[k]);
            if (j < 0 || !is_drawn(&g, j) || (j < g.n && j >= i)) continue;
            int band = g.level[j] / m.rows_per_band;
            bool long_edge = g.level[i] != g.level[j] + 1 || band != g.level[i] / m.rows_per_band;
            if (long_edge && lane_of[j] < 0) lane_of[j] = lanes_used[band & 7]++ % 6;
            edge(cr, &g, &m, j, i, (k + 1.0) / (steps[i].n_inputs + 1.0), long_edge ? lane_of[j] : 0);
        }
    /* Boxes. */
    for (int node = 0; node < g.n + 2; node++) {
        if (!is_drawn(&g, node)) continue;
        double x = m.x[node], y = m.y[node], w = m.w[node];
        bool outside = node >= g.n;
        rounded_box(cr, x, y, w, m.box_h, outside);
        if (!outside && unread[node]) { /* computed, and thrown away */
            cairo_save(cr);
            cairo_set_source_rgb(cr, 0xd6 / 255.0, 0x27 / 255.0, 0x28 / 255.0); /* CHANGED_COLOR */
            cairo_set_line_width(cr, 2.5);
            cairo_new_path(cr);
            cairo_rectangle(cr, x - 2, y - 2, w + 4, m.box_h + 4);
            cairo_stroke(cr);
            cairo_restore(cr);
        }
        if (outside) {
            ts_render__text(&pen, node == g.n ? "input" : "memory", &f.name, x + 10, y + 5, 0, 0, 0);
            ts_render__text(&pen, node == g.n ? "what the module reads" : "the encoder's output", &f.op, x + 10,
                            y + 5 + name_h, 0, 0, 0);
            continue;
        }
        double line2 = y + 5 + name_h + (m.box_h - 10 - name_h) / 2; /* middle of the second line */
        ts_render__text(&pen, steps[node].name + prefix, &f.name, x + 10, y + 5, 0, 0, 0);
        ts_render__text(&pen, steps[node].op ? steps[node].op : "", &f.op, x + 10, line2, 0, 0.5, 0);
        shape_markup(markup, sizeof markup, &steps[node], first_input(steps, node));
        ts_render__text(&pen, markup, &f.shape, x + w - 10, line2, 1, 0.5, 0);
    }
    cairo_restore(cr);
    ts_render__pen_free(&pen);
    cairo_status_t cs = cairo_status(cr);
    if (cs != CAIRO_STATUS_SUCCESS) return ts_fail(TS_ERR_ARG, "render: cairo: %s", cairo_status_to_string(cs));
    return TS_OK;
}

void ts_render_shapes_size(const ts_render_step *steps, int n, int *width, int *height) {
    graph g;
    place(&g, steps, n);
    int cols = 1;
    for (int lv = 0; lv < g.rows; lv++) cols = g.width[lv] > cols ? g.width[lv] : cols;
    int per_band = g.rows < 16 ? g.rows : 16, bands = (g.rows + per_band - 1) / per_band;
    per_band = (g.rows + bands - 1) / bands;
    *width = (int)fmax(720, bands * (cols * 210 + (cols - 1) * 16) + (bands - 1) * 72 + 120);
    *height = per_band * 64 + 140;
}
