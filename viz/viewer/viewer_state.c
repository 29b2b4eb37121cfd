/* viewer_state: what the user is looking at, and how each key and mouse
 * event changes it. This is the "update" half of the viewer: it never draws,
 * and the drawing never comes here. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "viewer_internal.h"

/* ---- geometry --------------------------------------------------------------- */

void ts_view_geometry_of(ts_view_geometry *g, double w, double h, bool slider) {
    if (w < 320) w = 320;
    if (h < 240) h = 240;
    double list_w = fmin(fmax(w * 0.27, 250), 400);
    double slider_h = slider ? TS_VIEW__SLIDER_H : 0;
    double body_h = h - TS_VIEW__STATUS_H;
    g->list = (ts_render_rect){0, 0, list_w, body_h};
    g->centre = (ts_render_rect){list_w, 0, w - list_w, body_h - slider_h};
    g->slider = (ts_render_rect){list_w, body_h - slider_h, w - list_w, slider_h};
    g->status = (ts_render_rect){0, body_h, w, TS_VIEW__STATUS_H};
    g->row_h = TS_VIEW__ROW_H;
    int rows = (int)((body_h - TS_VIEW__LIST_HEAD) / g->row_h);
    g->list_rows = rows > 1 ? rows : 1;
}

static void geometry(const ts_view_state *st, const ts_view_steps *s, ts_view_geometry *g) {
    ts_view_geometry_of(g, st->width, st->height, s->n_snapshots > 1);
}

/* ---- small helpers ------------------------------------------------------------ */

static void say(ts_view_state *st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void say(ts_view_state *st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->message, sizeof st->message, fmt, ap);
    va_end(ap);
}

static void snapshot_range(const ts_view_steps *s, int k, int64_t *a, int64_t *b) {
    *a = s->snapshot_start[k];
    *b = s->snapshot_start[k + 1];
}

static const ts_view_entry *current_entry(const ts_view_state *st, const ts_view_steps *s) {
    return s->n ? &s->entry[st->current] : NULL;
}

/* Rebuild the list rows for the current step and scroll it into view, with a
 * row of context above and below when there is room. */
static void refresh_rows(ts_view_state *st, const ts_view_steps *s) {
    st->n_rows = s->n ? ts_view_rows(s, st->current, st->rows) : 0;
    ts_view_geometry g;
    geometry(st, s, &g);
    int at = 0;
    for (int i = 0; i < st->n_rows; i++)
        if (st->rows[i].kind == TS_VIEW_ROW_STEP && st->rows[i].step == st->current) at = i;
    int margin = g.list_rows > 6 ? 2 : 0;
    if (at - margin < st->list_top) st->list_top = at - margin;
    if (at + margin >= st->list_top + g.list_rows) st->list_top = at + margin - g.list_rows + 1;
    if (st->list_top > st->n_rows - g.list_rows) st->list_top = st->n_rows - g.list_rows;
    if (st->list_top < 0) st->list_top = 0;
}

static void reset_cells(ts_view_state *st) {
    memset(&st->cells, 0, sizeof st->cells);
    st->hover = false;
    st->dragging = false;
}

/* Show step i. Zoom and pan belong to one picture, so they go; head and
 * batch stay, so a learner can walk through the layers watching one head. */
static bool go_to(ts_view_state *st, const ts_view_steps *s, int64_t i) {
    if (i < 0 || i >= s->n || i == st->current) return false;
    st->current = i;
    st->message[0] = '\0';
    reset_cells(st);
    refresh_rows(st, s);
    return true;
}

/* ---- moving around ---------------------------------------------------------------- */

static bool step_by(ts_view_state *st, const ts_view_steps *s, int d) {
    int64_t a, b;
    snapshot_range(s, s->entry[st->current].snapshot, &a, &b);
    int64_t i = st->current + d;
    return i >= a && i < b && go_to(st, s, i);
}

static bool to_end(ts_view_state *st, const ts_view_steps *s, bool last) {
    int64_t a, b;
    snapshot_range(s, s->entry[st->current].snapshot, &a, &b);
    return go_to(st, s, last ? b - 1 : a);
}

/* The first step of the run of steps of the same module that holds i. */
static int64_t module_start(const ts_view_steps *s, int64_t i, int64_t a) {
    int m = s->entry[i].module;
    while (i > a && s->entry[i - 1].module == m) i--;
    return i;
}

static bool module_by(ts_view_state *st, const ts_view_steps *s, int d) {
    int64_t a, b, i = st->current;
    snapshot_range(s, s->entry[i].snapshot, &a, &b);
    if (d > 0) {
        int m = s->entry[i].module;
        while (i < b && s->entry[i].module == m) i++;
        if (i >= b) return false;
        return go_to(st, s, i);
    }
    int64_t start = module_start(s, i, a);
    if (start < i) return go_to(st, s, start);
    return start > a && go_to(st, s, module_start(s, start - 1, a));
}

/* The step called `name` in [a, b), -1 when none. */
static int64_t find_in(const ts_view_steps *s, const char *name, size_t len, const char *rest, int64_t a,
                       int64_t b) {
    for (int64_t i = a; i < b; i++) {
        const char *n = s->entry[i].name;
        if (strncmp(n, name, len) == 0 && strcmp(n + len, rest) == 0) return i;
    }
    return -1;
}

/* Up/down a layer: the step with the same role in the neighbouring layer
 * (encoder.layers.0.self_attn.weights -> encoder.layers.1.self_attn.weights),
 * or the layer's first step when it has no such step. */
static bool layer_by(ts_view_state *st, const ts_view_steps *s, int d) {
    int64_t a, b, cur = st->current;
    snapshot_range(s, s->entry[cur].snapshot, &a, &b);
    int layer = s->entry[cur].layer;
    int64_t target_first = -1;
    int target = -1;
    if (layer >= 0) {
        target = layer + d;
    } else {
        /* Outside a layer: the nearest layer in that direction. */
        for (int64_t i = d > 0 ? cur + 1 : cur - 1; i >= a && i < b; i += d)
            if (s->entry[i].layer >= 0) {
                target = s->entry[i].layer;
                break;
            }
    }
    if (target < 0 || target >= s->n_layers) return false;
    for (int64_t i = a; i < b && target_first < 0; i++)
        if (s->entry[i].layer == target) target_first = i;
    if (target_first < 0) return false;
    if (layer >= 0) {
        const char *name = s->entry[cur].name;
        size_t lp = strlen(s->layer_name[layer]);
        const char *tl = s->layer_name[target];
        int64_t same = find_in(s, tl, strlen(tl), name + lp, a, b);
        if (same >= 0) return go_to(st, s, same);
    }
    return go_to(st, s, target_first);
}

/* The step named like the current one in snapshot k, or the one at the same
 * place in it. */
static bool snapshot_to(ts_view_state *st, const ts_view_steps *s, int k) {
    if (k < 0 || k >= s->n_snapshots) return false;
    int64_t cur = st->current, a, b;
    int now = s->entry[cur].snapshot;
    if (k == now) return false;
    snapshot_range(s, k, &a, &b);
    int64_t i = find_in(s, s->entry[cur].name, 0, "", a, b);
    if (i < 0) {
        i = a + (cur - s->snapshot_start[now]);
        if (i >= b) i = b - 1;
    }
    int head = st->head, batch = st->batch;
    bool moved = go_to(st, s, i);
    st->head = head;
    st->batch = batch;
    return moved;
}

static bool find_step(ts_view_state *st, const ts_view_steps *s, const char *text) {
    int64_t i = ts_view_find(s, text, st->current);
    if (i < 0) {
        say(st, "no step matches '%s'", text);
        return true;
    }
    if (i == st->current) {
        say(st, "'%s' is the step shown", text);
        return true;
    }
    go_to(st, s, i);
    return true;
}

/* ---- heads, batch, zoom ---------------------------------------------------------- */

static bool choose_head(ts_view_state *st, const ts_view_steps *s, int key) {
    const ts_view_entry *e = current_entry(st, s);
    int heads = ts_view_heads(e);
    if (key == 0) {
        if (st->head < 0) return false;
        st->head = -1;
        reset_cells(st);
        return true;
    }
    if (heads > 0 && key > heads) {
        say(st, "this step has %d heads: keys 1-%d", heads, heads);
        return true;
    }
    st->head = key - 1;
    reset_cells(st);
    if (heads == 0) say(st, "head %d will be shown on attention steps", key - 1);
    return true;
}

static bool batch_by(ts_view_state *st, const ts_view_steps *s, int d) {
    const ts_view_entry *e = current_entry(st, s);
    int n = ts_view_batches(e);
    if (n <= 1) {
        say(st, "this step has no batch dimension to step through");
        return true;
    }
    if (e->has_values && e->batch_index >= 0) {
        say(st, "only batch element %d was kept (re-run with --keep-batch I for another)", e->batch_index);
        return true;
    }
    st->batch = ((st->batch + d) % n + n) % n;
    reset_cells(st);
    return true;
}

/* Zoom the cells of every panel by `factor` (> 1: closer) keeping cell
 * (row, col) of the panel where it is. */
static bool zoom(ts_view_state *st, const ts_view_frame *f, int panel, double row, double col, double factor) {
    if (!f || !f->drawn || panel < 0 || panel >= f->layout.n_panels) return false;
    const ts_render_cells *c = &f->layout.panel[panel];
    if (c->rows <= 0 || c->cols <= 0) return false;
    int tr = c->total_rows, tc = c->total_cols;
    int nr = (int)lround(c->rows / factor), nc = (int)lround(c->cols / factor);
    int min_r = tr < 4 ? tr : 4, min_c = tc < 4 ? tc : 4;
    nr = nr < min_r ? min_r : nr > tr ? tr : nr;
    nc = nc < min_c ? min_c : nc > tc ? tc : nc;
    if (nr == c->rows && nc == c->cols) return false;
    if (nr >= tr && nc >= tc) {
        st->cells.rows = st->cells.cols = st->cells.row0 = st->cells.col0 = 0;
        return true;
    }
    double fr = (row - c->row0 + 0.5) / c->rows, fc = (col - c->col0 + 0.5) / c->cols;
    int r0 = (int)lround(row + 0.5 - fr * nr), c0 = (int)lround(col + 0.5 - fc * nc);
    st->cells.rows = nr;
    st->cells.cols = nc;
    st->cells.row0 = r0 < 0 ? 0 : r0 > tr - nr ? tr - nr : r0;
    st->cells.col0 = c0 < 0 ? 0 : c0 > tc - nc ? tc - nc : c0;
    return true;
}

static bool zoom_centre(ts_view_state *st, const ts_view_frame *f, double factor) {
    if (!f || !f->drawn || f->layout.n_panels < 1) return false;
    const ts_render_cells *c = &f->layout.panel[0];
    return zoom(st, f, 0, c->row0 + c->rows * 0.5 - 0.5, c->col0 + c->cols * 0.5 - 0.5, factor);
}

/* ---- keys ----------------------------------------------------------------------------- */

static bool find_key(ts_view_state *st, const ts_view_steps *s, const ts_view_event *ev) {
    size_t len = strlen(st->find);
    switch (ev->key) {
    case TS_VIEW_KEY_CHAR:
        if (len + 1 < sizeof st->find && (unsigned char)ev->ch >= 32) {
            st->find[len] = ev->ch;
            st->find[len + 1] = '\0';
        }
        return true;
    case TS_VIEW_KEY_BACKSPACE:
        if (len) st->find[len - 1] = '\0';
        return true;
    case TS_VIEW_KEY_ENTER:
        st->mode = TS_VIEW_MODE_BROWSE;
        if (!st->find[0]) return true;
        return find_step(st, s, st->find);
    case TS_VIEW_KEY_ESCAPE:
        st->mode = TS_VIEW_MODE_BROWSE;
        st->find[0] = '\0';
        return true;
    default: return false;
    }
}

static bool char_key(ts_view_state *st, const ts_view_steps *s, const ts_view_frame *f, char ch) {
    if (ch >= '0' && ch <= '9') return choose_head(st, s, ch - '0');
    switch (ch) {
    case 'b': return batch_by(st, s, 1);
    case 'B': return batch_by(st, s, -1);
    case '/':
        st->mode = TS_VIEW_MODE_FIND;
        st->find[0] = '\0';
        return true;
    case 'e': st->export_wanted = true; return true;
    case '?': st->help = !st->help; return true;
    case 'q': st->quit = true; return true;
    case '[': return snapshot_to(st, s, s->entry[st->current].snapshot - 1);
    case ']': return snapshot_to(st, s, s->entry[st->current].snapshot + 1);
    /* ten at a time, and never past either end: snapshot 121 is twelve presses away */
    case '{': return snapshot_to(st, s, s->entry[st->current].snapshot > 10 ? s->entry[st->current].snapshot - 10 : 0);
    case '}': return snapshot_to(st, s, s->entry[st->current].snapshot + 10 < s->n_snapshots
                                            ? s->entry[st->current].snapshot + 10 : s->n_snapshots - 1);
    case '+':
    case '=': return zoom_centre(st, f, 1.5);
    case '-': return zoom_centre(st, f, 1 / 1.5);
    case 'z':
        if (!st->cells.rows && !st->cells.cols) return false;
        reset_cells(st);
        return true;
    default: return false;
    }
}

static bool browse_key(ts_view_state *st, const ts_view_steps *s, const ts_view_frame *f, const ts_view_event *ev) {
    switch (ev->key) {
    case TS_VIEW_KEY_LEFT: return step_by(st, s, -1);
    case TS_VIEW_KEY_RIGHT: return step_by(st, s, 1);
    case TS_VIEW_KEY_UP: return layer_by(st, s, -1);
    case TS_VIEW_KEY_DOWN: return layer_by(st, s, 1);
    case TS_VIEW_KEY_PGUP: return module_by(st, s, -1);
    case TS_VIEW_KEY_PGDN: return module_by(st, s, 1);
    case TS_VIEW_KEY_HOME: return to_end(st, s, false);
    case TS_VIEW_KEY_END: return to_end(st, s, true);
    case TS_VIEW_KEY_ESCAPE: st->quit = true; return true;
    case TS_VIEW_KEY_CHAR: return char_key(st, s, f, ev->ch);
    default: return false;
    }
}

static bool key(ts_view_state *st, const ts_view_steps *s, const ts_view_frame *f, const ts_view_event *ev) {
    if (st->mode == TS_VIEW_MODE_FIND) return find_key(st, s, ev);
    if (st->help) {
        /* The overlay goes with any key; Esc and ? only close it. */
        bool closing = ev->key == TS_VIEW_KEY_ESCAPE || (ev->key == TS_VIEW_KEY_CHAR && ev->ch == '?');
        st->help = false;
        if (closing) return true;
        browse_key(st, s, f, ev);
        return true;
    }
    return browse_key(st, s, f, ev);
}

/* ---- mouse ----------------------------------------------------------------------------- */

static bool hover(ts_view_state *st, const ts_view_frame *f, double x, double y) {
    int p, r, c;
    bool hit = f && f->drawn && ts_render_hit(&f->layout, x, y, &p, &r, &c);
    if (!hit) {
        bool was = st->hover;
        st->hover = st->cells.highlight = false;
        return was;
    }
    if (st->hover && st->cells.hl_panel == p && st->cells.hl_row == r && st->cells.hl_col == c) return false;
    st->hover = st->cells.highlight = true;
    st->cells.hl_panel = p;
    st->cells.hl_row = r;
    st->cells.hl_col = c;
    return true;
}

/* Drag: move the visible window of cells with the mouse. Works whenever
 * not every cell is shown, zoomed in or not (a 200 x 2048 slice shows the
 * columns that fit at one pixel a cell). */
static bool pan(ts_view_state *st, const ts_view_frame *f, double x, double y) {
    if (!f || !f->drawn || f->layout.n_panels < 1) return false;
    const ts_render_cells *c = &f->layout.panel[0];
    if (c->cell_w <= 0 || c->cell_h <= 0) return false;
    if (c->rows >= c->total_rows && c->cols >= c->total_cols) return false;
    int r0 = st->drag_row0 - (int)lround((y - st->drag_y) / c->cell_h);
    int c0 = st->drag_col0 - (int)lround((x - st->drag_x) / c->cell_w);
    int max_r = c->total_rows - c->rows, max_c = c->total_cols - c->cols;
    r0 = r0 < 0 ? 0 : r0 > max_r ? max_r : r0;
    c0 = c0 < 0 ? 0 : c0 > max_c ? max_c : c0;
    if (r0 == st->cells.row0 && c0 == st->cells.col0) return false;
    st->cells.row0 = r0;
    st->cells.col0 = c0;
    /* Hold the window's size: the renderer then shows the same number of
     * cells from the new first one. */
    st->cells.rows = c->rows;
    st->cells.cols = c->cols;
    st->hover = st->cells.highlight = false;
    return true;
}

static bool press(ts_view_state *st, const ts_view_steps *s, const ts_view_frame *f, double x, double y) {
    ts_view_geometry g;
    geometry(st, s, &g);
    if (st->help) {
        st->help = false;
        return true;
    }
    int k = ts_view__list_row_at(&g, x, y);
    if (k >= 0) {
        int i = st->list_top + k;
        return i < st->n_rows && go_to(st, s, st->rows[i].step);
    }
    if (s->n_snapshots > 1 && ts_view__inside(g.slider, x, y)) {
        st->slider_drag = true;
        return snapshot_to(st, s, ts_view__slider_pick(&g, x, s->n_snapshots));
    }
    int p, r, c;
    if (!f || !f->drawn || !ts_render_hit(&f->layout, x, y, &p, &r, &c)) return false;
    /* A click on a thumbnail of the head grid opens that head. */
    if (st->head < 0 && f->layout.n_panels > 1 && f->panel_head[p] >= 0) {
        st->head = f->panel_head[p];
        reset_cells(st);
        return true;
    }
    st->dragging = true;
    st->drag_x = x;
    st->drag_y = y;
    st->drag_row0 = st->cells.row0;
    st->drag_col0 = st->cells.col0;
    return false;
}

static bool wheel(ts_view_state *st, const ts_view_steps *s, const ts_view_frame *f, const ts_view_event *ev) {
    ts_view_geometry g;
    geometry(st, s, &g);
    if (ts_view__inside(g.list, ev->x, ev->y)) {
        int top = st->list_top - (int)lround(ev->dy * 3);
        int max = st->n_rows - g.list_rows;
        top = top > max ? max : top;
        top = top < 0 ? 0 : top;
        if (top == st->list_top) return false;
        st->list_top = top;
        return true;
    }
    int p, r, c;
    if (!f || !f->drawn || !ts_render_hit(&f->layout, ev->x, ev->y, &p, &r, &c)) return false;
    bool changed = zoom(st, f, p, r, c, pow(1.25, ev->dy));
    /* The cells moved under the mouse: the hovered one is stale. */
    if (changed) st->hover = st->cells.highlight = false;
    return changed;
}

/* ---- the update ---------------------------------------------------------------------- */

ts_status ts_view_state_init(ts_view_state *st, const ts_view_steps *s, double w, double h) {
    memset(st, 0, sizeof *st);
    st->head = -1;
    st->width = w;
    st->height = h;
    st->rows = malloc((size_t)TS_VIEW_ROWS_MAX(s) * sizeof *st->rows);
    if (!st->rows) return ts_fail(TS_ERR_NOMEM, "view: out of memory for the step list");
    /* A training trace opens on its loss, the picture a learner wants first
     * (its first step, train.step, is a straight line). */
    for (int64_t i = 0; i < s->n; i++)
        if (strcmp(s->entry[i].name, "train.loss") == 0) {
            st->current = i;
            break;
        }
    refresh_rows(st, s);
    return TS_OK;
}

void ts_view_state_free(ts_view_state *st) {
    free(st->rows);
    st->rows = NULL;
    st->n_rows = 0;
}

bool ts_view_update(ts_view_state *st, const ts_view_steps *s, const ts_view_frame *frame,
                    const ts_view_event *ev) {
    if (s->n == 0) {
        if (ev->kind == TS_VIEW_EV_QUIT ||
            (ev->kind == TS_VIEW_EV_KEY && (ev->key == TS_VIEW_KEY_ESCAPE || ev->ch == 'q')))
            st->quit = true;
        return ev->kind == TS_VIEW_EV_RESIZE;
    }
    switch (ev->kind) {
    case TS_VIEW_EV_KEY: return key(st, s, frame, ev);
    case TS_VIEW_EV_FIND: return ev->text && find_step(st, s, ev->text);
    case TS_VIEW_EV_MOTION:
        if (st->slider_drag) {
            ts_view_geometry g;
            geometry(st, s, &g);
            return snapshot_to(st, s, ts_view__slider_pick(&g, ev->x, s->n_snapshots));
        }
        if (st->dragging) return pan(st, frame, ev->x, ev->y);
        return hover(st, frame, ev->x, ev->y);
    case TS_VIEW_EV_PRESS: return press(st, s, frame, ev->x, ev->y);
    case TS_VIEW_EV_RELEASE:
        st->dragging = st->slider_drag = false;
        return false;
    case TS_VIEW_EV_WHEEL: return wheel(st, s, frame, ev);
    case TS_VIEW_EV_LEAVE: {
        bool was = st->hover;
        st->hover = st->cells.highlight = false;
        return was;
    }
    case TS_VIEW_EV_RESIZE:
        st->width = ev->x;
        st->height = ev->y;
        refresh_rows(st, s);
        return true;
    case TS_VIEW_EV_QUIT: st->quit = true; return true;
    }
    return false;
}

void ts_view_exported(ts_view_state *st, const char *path, ts_status status) {
    st->export_wanted = false;
    if (status == TS_OK)
        say(st, "exported the view to %s", path);
    else
        say(st, "export failed: %s", ts_last_error());
}
