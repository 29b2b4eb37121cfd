/* live_views: the live views, laid out once through the canvas interface
 * (render.h) and painted by cairo in the `tscope live` window or replayed
 * from a display list on the live web page: every head's attention (the
 * knocked-out ones crossed), one head large with its tokens on both axes,
 * the logit lens (layers down, positions across, each cell the token it
 * predicts coloured by its probability) and the whole text's loss at each
 * position, before and after a knock-out. Plain data in, no cairo: `make
 * wasm` compiles this file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/render.h"

static const ts_rgb INK = {0.1f, 0.1f, 0.12f}, GREY = {0.45f, 0.45f, 0.5f}, KNOCK = {0.8f, 0.1f, 0.1f},
                    PAPER = {1, 1, 1}, FOCUS = {0.95f, 0.55f, 0.1f}, RULE = {0.82f, 0.84f, 0.87f};
#define MARGIN 12.0
#define TITLE 16.0 /* the size of a section's title */
#define LABEL 12.0 /* the smallest text: what a reader at 1280 x 800 reads without zooming */
#define GUTTER 72.0 /* room left of a grid for its row labels ("layer 1", "40 s") */
#define LOSS_TOP 8.0 /* nats at the bright end of the loss strip: one scale before and after */

/* n x n attention rows (stride cap) as cells in a square of side `side`:
 * viridis of the weight (through the map's lookup table, as the heatmaps'
 * images are filled), the masked future at the map's low end. */
static void attention_cells(ts_canvas *cv, const float *a, int n, int cap, double x, double y, double side) {
    static uint32_t lut[TS_CMAP_LUT_SIZE];
    if (!lut[0]) ts_cmap_lut(TS_CMAP_VIRIDIS, lut);
    unsigned char *rgba = malloc((size_t)n * (size_t)n * 4), *px = rgba;
    if (!rgba) return; /* out of memory: the square stays empty */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++, px += 4) {
            float w = j <= i ? a[(size_t)i * cap + j] : 0.0f;
            int at = w > 0 ? (w < 1 ? (int)lrintf(w * (TS_CMAP_LUT_SIZE - 1)) : TS_CMAP_LUT_SIZE - 1) : 0;
            uint32_t c = lut[at]; /* 0xFFRRGGBB */
            px[0] = (unsigned char)(c >> 16), px[1] = (unsigned char)(c >> 8), px[2] = (unsigned char)c, px[3] = 255;
        }
    ts_canvas_image(cv, x, y, side, side, n, n, rgba);
    free(rgba);
}

/* Every head, a row a layer, squares of `side`; returns the height used. Each head's square
 * is a hit region (layer * H + head) for clicks. */
static double head_grid(ts_canvas *cv, const ts_live_views *v, double top, double side) {
    ts_canvas_text(cv, MARGIN, top + TITLE / 2, TITLE, TS_CANVAS_LEFT, INK, true, "Every head (click: knock out, again: back)");
    double y = top + TITLE + 8;
    int focus = v->focus_layer * v->H + v->focus_head;
    for (int l = 0; l < v->L; l++) {
        for (int h = 0; h < v->H; h++) {
            int i = l * v->H + h;
            bool out = v->knocked && v->knocked[i];
            double x = MARGIN + h * (side + 10);
            char title[48];
            snprintf(title, sizeof title, "%d.%d%s", l, h, out ? " out" : "");
            ts_canvas_text(cv, x, y + LABEL / 2 + 1, LABEL, TS_CANVAS_LEFT, out ? KNOCK : INK, i == focus, title);
            double cy = y + LABEL + 4;
            ts_canvas_hit_region(cv, x, cy, side, side, i);
            if (v->n > 0) attention_cells(cv, v->attn + (size_t)i * v->cap * v->cap, v->n, v->cap, x, cy, side);
            else ts_canvas_frame(cv, x, cy, side, side, GREY, 1);
            if (out) {
                ts_canvas_line(cv, x, cy, x + side, cy + side, KNOCK, 2);
                ts_canvas_line(cv, x + side, cy, x, cy + side, KNOCK, 2);
            }
            if (i == focus) ts_canvas_frame(cv, x - 2, cy - 2, side + 4, side + 4, FOCUS, 2);
        }
        y += LABEL + 4 + side + 10;
    }
    return y - top;
}

/* Every k-th label, so that labels `wide` pixels wide never overlap in cells
 * of `cell` pixels. A thinned label carries its position ("140 s"), so it is
 * measured with the digits of the last position n - 1 and a space in front. */
static int label_step(double cell, double wide, int n) {
    if (cell >= wide) return 1;
    int digits = 1;
    for (int m = n - 1; m >= 10; m /= 10) digits++;
    double numbered = wide + (digits + 1) * 0.62 * LABEL;
    int k = 2;
    while (k * cell < numbered) k++;
    return k;
}

/* Whether position i of n is labelled when every k-th is: the multiples of
 * k and the last (a teacher points at the end of the text), dropping a
 * multiple too close to the last (render_heatmap.c's rule). */
static bool labelled(int i, int n, int k) {
    if (k <= 1 || i == n - 1) return true;
    return i % k == 0 && n - 1 - i >= k;
}

/* Token i's label, with its position in front when labels are thinned. */
static const char *token_label(const ts_live_views *v, int i, int k, char *buf, size_t cap) {
    const char *t = v->token ? v->token(v->u, i) : "";
    if (k <= 1) return t;
    snprintf(buf, cap, "%d %s", i, t);
    return buf;
}

/* The tokens under a row of n cells `c` wide starting at x, thinned and numbered. */
static void token_axis(ts_canvas *cv, const ts_live_views *v, double x, double y, double c) {
    char buf[96];
    int k = label_step(c, LABEL * 1.1, v->n);
    for (int i = 0; i < v->n; i++)
        if (labelled(i, v->n, k))
            ts_canvas_text(cv, x + (i + 0.5) * c, y + LABEL / 2, LABEL, TS_CANVAS_CENTRE, GREY, false,
                           token_label(v, i, k, buf, sizeof buf));
}

/* One head large, its tokens down the side (queries) and along the top
 * (keys), in a block from `left` `room` pixels wide, its square at most
 * `most` pixels; returns the height used. */
static double big_head(ts_canvas *cv, const ts_live_views *v, double left, double top, double room, double most) {
    int l = v->focus_layer, h = v->focus_head;
    bool out = v->knocked && v->knocked[l * v->H + h];
    char title[64];
    snprintf(title, sizeof title, "Head %d.%d%s", l, h, out ? ": knocked out" : "");
    ts_canvas_text(cv, left, top + TITLE / 2, TITLE, TS_CANVAS_LEFT, out ? KNOCK : INK, true, title);
    ts_canvas_text(cv, left, top + TITLE + 4 + LABEL / 2, LABEL, TS_CANVAS_LEFT, GREY, false,
                   "row: a query, column: a key it reads");
    double head_h = TITLE + 4 + LABEL + 8;
    if (v->n == 0) return head_h;
    double side = room - GUTTER;
    if (side > most) side = most;
    if (side < 2 * v->n) side = 2 * v->n; /* two pixels a cell at least */
    double x = left + GUTTER, y = top + head_h + LABEL + 6, c = side / v->n;
    int k = label_step(c, LABEL * 1.1, v->n);
    char buf[96];
    for (int i = 0; i < v->n; i++) {
        if (!labelled(i, v->n, k)) continue;
        bool last = k > 1 && i == v->n - 1; /* a numbered last label ends at the square's edge, not past it */
        ts_canvas_text(cv, last ? x + side : x + (i + 0.5) * c, y - LABEL / 2 - 3, LABEL,
                       last ? TS_CANVAS_RIGHT : TS_CANVAS_CENTRE, GREY, false, token_label(v, i, k, buf, sizeof buf));
        ts_canvas_text(cv, x - 6, y + (i + 0.5) * c, LABEL, TS_CANVAS_RIGHT, GREY, false,
                       token_label(v, i, k, buf, sizeof buf)); /* again: a label may be overwritten by the next */
    }
    attention_cells(cv, v->attn + ((size_t)l * v->H + (size_t)h) * v->cap * v->cap, v->n, v->cap, x, y, side);
    return y + side + 10 - top;
}

/* Cells of a strip: n positions, `c` wide, at most 28. */
static double strip_cell(const ts_live_views *v, double width) {
    double c = (width - 2 * MARGIN - GUTTER) / v->n;
    return c > 28 ? 28 : c;
}

/* The lens: a row a layer, a column a position; each cell the token that
 * layer's stream predicts next, coloured by its probability. */
static double lens_grid(ts_canvas *cv, const ts_live_views *v, double top, double width) {
    ts_canvas_text(cv, MARGIN, top + TITLE / 2, TITLE, TS_CANVAS_LEFT, INK, true,
                   "Logit lens: the next token each layer would say (bright: sure of it)");
    if (v->n == 0) return TITLE + 8;
    double c = strip_cell(v, width), x = MARGIN + GUTTER, y = top + TITLE + 8, rh = 22;
    for (int l = 0; l < v->L; l++) {
        char name[32];
        snprintf(name, sizeof name, "layer %d", l);
        ts_canvas_text(cv, x - 6, y + (l + 0.5) * rh, LABEL, TS_CANVAS_RIGHT, GREY, false, name);
        for (int i = 0; i < v->n; i++) {
            size_t at = (size_t)l * v->cap + (size_t)i;
            ts_rgb bg = ts_cmap_eval(TS_CMAP_VIRIDIS, v->lens_p[at]);
            ts_canvas_rect(cv, x + i * c, y + l * rh, c - 1, rh - 1, bg);
            if (c >= LABEL && v->vocab)
                ts_canvas_text(cv, x + (i + 0.5) * c, y + (l + 0.5) * rh, LABEL, TS_CANVAS_CENTRE,
                               ts_rgb_luminance(bg) > 0.4 ? INK : PAPER, false, v->vocab(v->u, v->lens_id[at]));
        }
    }
    token_axis(cv, v, x, y + v->L * rh + 4, c);
    return v->L * rh + 4 + LABEL + 10 + TITLE + 8;
}

double ts_live_views_mean_loss(const float *loss, int n) {
    double sum = 0;
    int count = 0;
    for (int i = 1; loss && i < n; i++)
        if (!isnan(loss[i])) sum += loss[i], count++;
    return count ? sum / count : NAN;
}

/* One row of the strip: each position's loss as a cell on one scale, its
 * value in the cell when the cell is wide enough to read it. */
static void loss_row(ts_canvas *cv, const ts_live_views *v, const float *loss, const char *name, double x, double y,
                     double c, double rh) {
    ts_canvas_text(cv, x - 6, y + rh / 2, LABEL, TS_CANVAS_RIGHT, GREY, false, name);
    for (int i = 0; i < v->n; i++) {
        ts_rgb bg = isnan(loss[i]) ? PAPER : ts_cmap_eval(TS_CMAP_VIRIDIS, loss[i] / LOSS_TOP);
        ts_canvas_rect(cv, x + i * c, y, c - 1, rh - 1, bg);
        if (isnan(loss[i]) || c < 26) continue;
        char num[16];
        snprintf(num, sizeof num, "%.1f", loss[i]);
        ts_canvas_text(cv, x + (i + 0.5) * c, y + rh / 2, LABEL, TS_CANVAS_CENTRE,
                       ts_rgb_luminance(bg) > 0.4 ? INK : PAPER, false, num);
    }
    ts_canvas_frame(cv, x, y, v->n * c - 1, rh - 1, GREY, 1);
}

/* The whole text's loss at each position, -log p(token | before): with the
 * heads knocked out and, while some are, with every head in place above it
 * (what lesson 18 measures), and the mean of each in the title. */
static double loss_strip(ts_canvas *cv, const ts_live_views *v, double top, double width) {
    char title[200];
    double after = ts_live_views_mean_loss(v->loss, v->n);
    bool both = v->loss_before && v->n_knocked > 0;
    if (v->n < 2)
        snprintf(title, sizeof title, "Loss at each position: how surprised the model was by each token");
    else if (both)
        snprintf(title, sizeof title, "Loss at each position: whole text %.3f before, %.3f after the knock-out (nats a token)",
                 ts_live_views_mean_loss(v->loss_before, v->n), after);
    else
        snprintf(title, sizeof title, "Loss at each position: whole text %.3f nats a token (bright: surprised)", after);
    ts_canvas_text(cv, MARGIN, top + TITLE / 2, TITLE, TS_CANVAS_LEFT, INK, true, title);
    if (v->n == 0) return TITLE + 8;
    double c = strip_cell(v, width), x = MARGIN + GUTTER, y = top + TITLE + 8, rh = 22;
    if (both) {
        loss_row(cv, v, v->loss_before, "before", x, y, c, rh);
        y += rh + 2;
    }
    loss_row(cv, v, v->loss, both ? "after" : "loss", x, y, c, rh);
    y += rh + 4;
    token_axis(cv, v, x, y, c);
    y += LABEL + 6;
    char scale[96];
    snprintf(scale, sizeof scale, "one scale for both rows: dark 0, bright %.0f nats or more", LOSS_TOP);
    ts_canvas_text(cv, x, y + LABEL / 2, LABEL, TS_CANVAS_LEFT, GREY, false, scale);
    return y + LABEL + 8 - top;
}

/* The side of a head of the grid in a column `width` wide. */
static double grid_side(const ts_live_views *v, double width) {
    double side = (width - 2 * MARGIN - (v->H - 1) * 10.0) / v->H;
    return side > 120 ? 120 : side;
}

/* The large head's block above its square, and the lens and loss strip
 * below: what a window's height keeps from the square. */
#define HEAD_ABOVE (TITLE + 4 + LABEL + 8 + LABEL + 6 + 10)
static double strips_height(const ts_live_views *v) {
    double lens = TITLE + 8 + v->L * 22 + 4 + LABEL + 10 + 8;
    double loss = TITLE + 8 + 2 * 24 + 4 + LABEL + 6 + LABEL + 8;
    return lens + loss;
}

double ts_live_views_draw(ts_canvas *cv, const ts_live_views *v, double width, double height) {
    ts_canvas_begin(cv);
    double y = MARGIN, side = grid_side(v, width * 0.6);
    double grid_w = MARGIN + v->H * (side + 10), room = width - grid_w - MARGIN;
    double most = 480;
    if (room >= GUTTER + 200) { /* the large head beside the grid */
        double avail = height - MARGIN - 8 - strips_height(v); /* a window's room above the strips */
        if (height > 0 && (avail - TITLE - 8) / v->L - (LABEL + 14) < side) {
            side = (avail - TITLE - 8) / v->L - (LABEL + 14); /* every layer's row of heads fits */
            if (side < 24) side = 24;
        }
        if (height > 0 && avail - HEAD_ABOVE < most) most = avail - HEAD_ABOVE;
        double grid_h = head_grid(cv, v, y, side);
        double head_h = big_head(cv, v, grid_w + 10, y, room - 10, most);
        y += (grid_h > head_h ? grid_h : head_h) + 8;
    } else { /* a narrow column: the large head under it */
        side = grid_side(v, width);
        y += head_grid(cv, v, y, side) + 8;
        if (height > 0 && height - y - HEAD_ABOVE - strips_height(v) - 8 < most)
            most = height - y - HEAD_ABOVE - strips_height(v) - 8;
        y += big_head(cv, v, MARGIN, y, width - 2 * MARGIN, most) + 8;
    }
    ts_canvas_line(cv, MARGIN, y - 4, width - MARGIN, y - 4, RULE, 1);
    y += lens_grid(cv, v, y, width) + 8;
    y += loss_strip(cv, v, y, width);
    return ceil(y);
}

/* ---- a live session's views ---- */

static const char *token_of(void *u, int i) { return ts_live_session_token_label(u, i); }
static const char *vocab_of(void *u, int32_t id) { return ts_live_session_vocab_label(u, id); }

ts_live_views ts_live_views_of(ts_live_session *s, int focus_layer, int focus_head) {
    int L = ts_live_session_layers(s), H = ts_live_session_heads(s), out = ts_live_session_n_knocked(s);
    if (focus_layer < 0 || focus_layer >= L) focus_layer = L - 1;
    if (focus_head < 0 || focus_head >= H) focus_head = 0;
    return (ts_live_views){
        .L = L, .H = H, .n = ts_live_session_tokens(s), .cap = ts_live_session_capacity(s),
        .attn = ts_live_session_attention_all(s), .knocked = ts_live_session_knocked_all(s), .n_knocked = out,
        .lens_id = ts_live_session_lens_ids(s), .lens_p = ts_live_session_lens_probs(s),
        .loss = ts_live_session_loss(s), .loss_before = out ? ts_live_session_loss_before(s) : NULL,
        .token = token_of, .vocab = vocab_of, .u = s,
        .focus_layer = focus_layer, .focus_head = focus_head,
    };
}
