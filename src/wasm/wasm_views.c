/* wasm_views: the live page's views laid out in C as a display list
 * (rectangles, frames, lines, text, colours) that the page's painter only
 * replays on a canvas: every head's attention (the knocked-out ones
 * crossed), one head large with its tokens on both axes, the logit lens
 * (layers down, positions across, each cell the token it predicts coloured
 * by its probability) and each position's loss. Colours come from the
 * renderers' own colour maps (viz/render/colormap.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/render.h"
#include "wasm_impl.h"

/* ---- the display list ------------------------------------------------------- */

static struct {
    float *ops;
    int n, cap;
    char *text;
    size_t text_len, text_cap;
    unsigned char *pixels; /* RGBA rows of the images */
    size_t pix_len, pix_cap;
    bool failed; /* out of memory: the list is cut, and says so by being empty */
} dl;

static float *dl_op(tsw_dl_kind kind) {
    if (dl.failed) return NULL;
    if (dl.n == dl.cap) {
        int cap = dl.cap ? 2 * dl.cap : 1024;
        float *grown = realloc(dl.ops, sizeof(float) * TSW_DL_FLOATS * (size_t)cap);
        if (!grown) {
            dl.failed = true;
            return NULL;
        }
        dl.ops = grown, dl.cap = cap;
    }
    float *op = dl.ops + (size_t)dl.n++ * TSW_DL_FLOATS;
    memset(op, 0, sizeof(float) * TSW_DL_FLOATS);
    op[0] = (float)kind;
    return op;
}

static void dl_colour(float *op, ts_rgb c) { op[5] = c.r, op[6] = c.g, op[7] = c.b; }

static void dl_rect(double x, double y, double w, double h, ts_rgb c) {
    float *op = dl_op(TSW_DL_RECT);
    if (!op) return;
    op[1] = (float)x, op[2] = (float)y, op[3] = (float)w, op[4] = (float)h;
    dl_colour(op, c);
}

static void dl_frame(double x, double y, double w, double h, ts_rgb c, double width) {
    float *op = dl_op(TSW_DL_FRAME);
    if (!op) return;
    op[1] = (float)x, op[2] = (float)y, op[3] = (float)w, op[4] = (float)h, op[8] = (float)width;
    dl_colour(op, c);
}

static void dl_line(double x0, double y0, double x1, double y1, ts_rgb c, double width) {
    float *op = dl_op(TSW_DL_LINE);
    if (!op) return;
    op[1] = (float)x0, op[2] = (float)y0, op[3] = (float)x1, op[4] = (float)y1, op[8] = (float)width;
    dl_colour(op, c);
}

typedef enum { LEFT = 0, CENTRE = 1, RIGHT = 2 } align;

/* Text centred vertically on y, of `size` pixels; bold when strong. */
static void dl_text(double x, double y, double size, align a, ts_rgb c, bool strong, const char *s) {
    size_t n = strlen(s) + 1;
    if (dl.failed) return;
    if (dl.text_len + n > dl.text_cap) {
        size_t cap = dl.text_cap ? 2 * dl.text_cap : 4096;
        while (cap < dl.text_len + n) cap *= 2;
        char *grown = realloc(dl.text, cap);
        if (!grown) {
            dl.failed = true;
            return;
        }
        dl.text = grown, dl.text_cap = cap;
    }
    float *op = dl_op(TSW_DL_TEXT);
    if (!op) return;
    op[1] = (float)x, op[2] = (float)y, op[3] = (float)size, op[4] = (float)a, op[8] = strong;
    op[9] = (float)dl.text_len; /* exact: the text stays far below 2^24 bytes */
    dl_colour(op, c);
    memcpy(dl.text + dl.text_len, s, n);
    dl.text_len += n;
}

/* Room in dl.pixels for `bytes` more; NULL when out of memory. */
static unsigned char *dl_pixels(size_t bytes) {
    if (dl.pix_len + bytes > dl.pix_cap) {
        size_t cap = dl.pix_cap ? 2 * dl.pix_cap : 1u << 16;
        while (cap < dl.pix_len + bytes) cap *= 2;
        unsigned char *grown = realloc(dl.pixels, cap);
        if (!grown) {
            dl.failed = true;
            return NULL;
        }
        dl.pixels = grown, dl.pix_cap = cap;
    }
    unsigned char *p = dl.pixels + dl.pix_len;
    dl.pix_len += bytes;
    return p;
}

/* An image of cols x rows cells stretched over (x, y, w, h), its RGBA pixels
 * to fill: one pixel a cell, so a heatmap of n x n cells is one op, not n^2. */
static unsigned char *dl_image(double x, double y, double w, double h, int cols, int rows) {
    if (dl.failed) return NULL;
    size_t at = dl.pix_len;
    unsigned char *px = dl_pixels((size_t)cols * rows * 4);
    float *op = px ? dl_op(TSW_DL_IMAGE) : NULL;
    if (!op) return NULL;
    op[1] = (float)x, op[2] = (float)y, op[3] = (float)w, op[4] = (float)h, op[5] = (float)cols, op[6] = (float)rows;
    op[9] = (float)at;
    return px;
}

const float *tsw_dl_ops(void) { return dl.ops; }
const unsigned char *tsw_dl_pixels(void) { return dl.pixels; }
int tsw_dl_count(void) { return dl.failed ? 0 : dl.n; }
const char *tsw_dl_text(void) { return dl.text; }

/* ---- the views ---------------------------------------------------------------- */

static const ts_rgb INK = {0.1f, 0.1f, 0.12f}, GREY = {0.45f, 0.45f, 0.5f}, KNOCK = {0.8f, 0.1f, 0.1f},
                    PAPER = {1, 1, 1}, FOCUS = {0.95f, 0.55f, 0.1f};
#define MARGIN 12.0
#define TITLE 16.0 /* the size of a section's title */
#define LABEL 12.0 /* the smallest text: what a reader at 1280 x 800 reads without zooming */

/* n x n attention rows (stride cap) as cells in a square of side `side`:
 * viridis of the weight (through the map's lookup table, as the heatmaps'
 * images are filled), the masked future at the map's low end. */
static void attention_cells(const float *a, int n, int cap, double x, double y, double side) {
    static uint32_t lut[TS_CMAP_LUT_SIZE];
    if (!lut[0]) ts_cmap_lut(TS_CMAP_VIRIDIS, lut);
    unsigned char *px = dl_image(x, y, side, side, n, n);
    for (int i = 0; px && i < n; i++)
        for (int j = 0; j < n; j++, px += 4) {
            float w = j <= i ? a[(size_t)i * cap + j] : 0.0f;
            int at = w > 0 ? (w < 1 ? (int)lrintf(w * (TS_CMAP_LUT_SIZE - 1)) : TS_CMAP_LUT_SIZE - 1) : 0;
            uint32_t c = lut[at]; /* 0xFFRRGGBB */
            px[0] = (unsigned char)(c >> 16), px[1] = (unsigned char)(c >> 8), px[2] = (unsigned char)c, px[3] = 255;
        }
}

/* Every head, a row a layer; returns the height used. The boxes are kept
 * for clicks (tsw_hit). */
static double head_grid(tsw_session *s, int focus, double top, double width) {
    dl_text(MARGIN, top + TITLE / 2, TITLE, LEFT, INK, true, "Every head (click one to knock it out, again to restore it)");
    double y = top + TITLE + 8;
    double side = (width - 2 * MARGIN - (s->H - 1) * 10.0) / s->H;
    if (side > 120) side = 120;
    for (int l = 0; l < s->L; l++) {
        for (int h = 0; h < s->H; h++) {
            int i = l * s->H + h;
            double x = MARGIN + h * (side + 10);
            char title[48];
            snprintf(title, sizeof title, "%d.%d%s", l, h, s->knocked[i] ? " out" : "");
            dl_text(x, y + LABEL / 2 + 1, LABEL, LEFT, s->knocked[i] ? KNOCK : INK, i == focus, title);
            double cy = y + LABEL + 4;
            s->heads[i] = (tsw_box){x, cy, side, side};
            if (s->n > 0) attention_cells(tsw_attention(s, l, h), s->n, s->cap, x, cy, side);
            else dl_frame(x, cy, side, side, GREY, 1);
            if (s->knocked[i]) {
                dl_line(x, cy, x + side, cy + side, KNOCK, 2);
                dl_line(x + side, cy, x, cy + side, KNOCK, 2);
            }
            if (i == focus) dl_frame(x - 2, cy - 2, side + 4, side + 4, FOCUS, 2);
        }
        y += LABEL + 4 + side + 10;
    }
    return y - top;
}

/* Every k-th label, so that labels of `size` never overlap in `cell` pixels. */
static int label_step(double cell, double size) {
    int k = 1;
    while (k * cell < size * 1.1) k++;
    return k;
}

/* One head large, its tokens down the side (queries) and along the top (keys). */
static double big_head(tsw_session *s, int l, int h, double top, double width) {
    char title[96];
    snprintf(title, sizeof title, "Head %d.%d: each row a position, what it attends to%s", l, h,
             s->knocked[l * s->H + h] ? " (knocked out: its output is zeroed)" : "");
    dl_text(MARGIN, top + TITLE / 2, TITLE, LEFT, INK, true, title);
    if (s->n == 0) return TITLE + 8;
    double gutter = 48, side = width - 2 * MARGIN - gutter;
    if (side > 480) side = 480;
    double x = MARGIN + gutter, y = top + TITLE + 8 + LABEL + 6, c = side / s->n;
    int k = label_step(c, LABEL);
    for (int i = 0; i < s->n; i += k) {
        const char *t = tsw_token_label(s, i);
        dl_text(x + (i + 0.5) * c, y - LABEL / 2 - 3, LABEL, CENTRE, GREY, false, t);
        dl_text(x - 6, y + (i + 0.5) * c, LABEL, RIGHT, GREY, false, tsw_token_label(s, i));
    }
    attention_cells(tsw_attention(s, l, h), s->n, s->cap, x, y, side);
    return y + side + 10 - top;
}

/* The lens: a row a layer, a column a position; each cell the token that
 * layer's stream predicts next, coloured by its probability. */
static double lens_grid(tsw_session *s, double top, double width) {
    dl_text(MARGIN, top + TITLE / 2, TITLE, LEFT, INK, true, "Logit lens: the next token each layer would say");
    if (s->n == 0) return TITLE + 8;
    double gutter = 64, c = (width - 2 * MARGIN - gutter) / s->n;
    if (c > 28) c = 28;
    double x = MARGIN + gutter, y = top + TITLE + 8, rh = 22;
    const int32_t *ids = tsw_lens_ids(s);
    const float *p = tsw_lens_probs(s);
    for (int l = 0; l < s->L; l++) {
        char name[32];
        snprintf(name, sizeof name, "layer %d", l);
        dl_text(x - 6, y + (l + 0.5) * rh, LABEL, RIGHT, GREY, false, name);
        for (int i = 0; i < s->n; i++) {
            size_t at = (size_t)l * s->cap + (size_t)i;
            ts_rgb bg = ts_cmap_eval(TS_CMAP_VIRIDIS, p[at]);
            dl_rect(x + i * c, y + l * rh, c - 1, rh - 1, bg);
            if (c >= LABEL)
                dl_text(x + (i + 0.5) * c, y + (l + 0.5) * rh, LABEL, CENTRE, ts_rgb_luminance(bg) > 0.4 ? INK : PAPER,
                        false, tsw_vocab_label(s, ids[at]));
        }
    }
    y += s->L * rh + 4;
    int k = label_step(c, LABEL);
    for (int i = 0; i < s->n; i += k) dl_text(x + (i + 0.5) * c, y + LABEL / 2, LABEL, CENTRE, GREY, false, tsw_token_label(s, i));
    return y + LABEL + 10 - top;
}

/* Each position's loss, -log p(token | before), as a strip of cells. */
static double loss_strip(tsw_session *s, double top, double width) {
    dl_text(MARGIN, top + TITLE / 2, TITLE, LEFT, INK, true, "Loss at each position: how surprised the model was (bright: very)");
    if (s->n == 0) return TITLE + 8;
    double gutter = 64, c = (width - 2 * MARGIN - gutter) / s->n;
    if (c > 28) c = 28;
    double x = MARGIN + gutter, y = top + TITLE + 8, rh = 22;
    dl_text(x - 6, y + rh / 2, LABEL, RIGHT, GREY, false, "loss");
    const float *loss = tsw_loss(s);
    for (int i = 0; i < s->n; i++) {
        ts_rgb bg = isnan(loss[i]) ? PAPER : ts_cmap_eval(TS_CMAP_VIRIDIS, loss[i] / 5.0);
        dl_rect(x + i * c, y, c - 1, rh - 1, bg);
        if (c >= LABEL) dl_text(x + (i + 0.5) * c, y + rh / 2, LABEL, CENTRE, ts_rgb_luminance(bg) > 0.4 ? INK : PAPER, false, tsw_token_label(s, i));
    }
    dl_frame(x, y, s->n * c - 1, rh - 1, GREY, 1);
    return rh + TITLE + 18;
}

int tsw_draw(tsw_session *s, int focus_layer, int focus_head, int width) {
    dl.n = 0, dl.text_len = 0, dl.pix_len = 0, dl.failed = false;
    if (!s->heads && !(s->heads = calloc((size_t)s->L * s->H, sizeof *s->heads))) return 0;
    if (focus_layer < 0 || focus_layer >= s->L) focus_layer = s->L - 1;
    if (focus_head < 0 || focus_head >= s->H) focus_head = 0;
    double y = MARGIN;
    y += head_grid(s, focus_layer * s->H + focus_head, y, width) + 8;
    y += big_head(s, focus_layer, focus_head, y, width) + 8;
    y += lens_grid(s, y, width) + 8;
    y += loss_strip(s, y, width);
    return (int)ceil(y);
}

int tsw_hit(const tsw_session *s, double x, double y) {
    for (int i = 0; s->heads && i < s->L * s->H; i++) {
        const tsw_box *b = &s->heads[i];
        if (x >= b->x && x < b->x + b->w && y >= b->y && y < b->y + b->h) return i;
    }
    return -1;
}
