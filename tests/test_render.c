/* Renderers and PNG export: golden images of small views, structural checks
 * that hold whatever the fonts (colour bar order, masked vs zero, every row
 * of a long sequence visible), hit testing, and PNG round trips.
 *
 * Golden images live in tests/golden/render/. A pixel differs when one of its
 * channels is off by more than GOLDEN_CHANNEL_TOL (of 255); a view fails when
 * more than GOLDEN_MAX_FRACTION of its pixels differ (text rasterised by
 * another pango or freetype moves a few edge pixels, a wrong view moves
 * thousands). On failure the actual, expected and a diff image are written to
 * $TSCOPE_TEST_OUT (default /tmp/tscope-golden). TSCOPE_UPDATE_GOLDEN=1
 * rewrites the goldens from the current code. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pango/pangocairo.h>

#include "check.h"
#include "tscope/pages.h"
#include "tscope/render.h"
#include "tscope/trace.h"
#include "render/render_internal.h"

#define GOLDEN_CHANNEL_TOL 32
#define GOLDEN_MAX_FRACTION 0.005

/* ---- helpers -------------------------------------------------------------- */

typedef struct canvas {
    cairo_surface_t *surface;
    cairo_t *cr;
    ts_render_rect area;
} canvas;

static canvas canvas_new(int w, int h) {
    canvas c;
    c.surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, w, h);
    c.cr = cairo_create(c.surface);
    c.area = (ts_render_rect){0, 0, w, h};
    return c;
}

static void canvas_free(canvas *c) {
    cairo_destroy(c->cr);
    cairo_surface_destroy(c->surface);
}

static uint32_t pixel(cairo_surface_t *s, int x, int y) {
    cairo_surface_flush(s);
    const unsigned char *d = cairo_image_surface_get_data(s);
    return ((const uint32_t *)(const void *)(d + (size_t)y * (size_t)cairo_image_surface_get_stride(s)))[x];
}

static ts_rgb rgb_of(uint32_t p) {
    return (ts_rgb){(float)((p >> 16) & 255) / 255, (float)((p >> 8) & 255) / 255, (float)(p & 255) / 255};
}

static void golden_dir(char *buf, size_t size) {
    /* Next to this file, whatever the working directory of the run. */
    const char *file = __FILE__;
    const char *slash = strrchr(file, '/');
    int dir_len = slash ? (int)(slash - file) : 1;
    snprintf(buf, size, "%.*s/golden/render", dir_len, slash ? file : ".");
}

static void mkdir_p(const char *path) {
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(tmp, 0777);
            *p = '/';
        }
    mkdir(tmp, 0777);
}

/* Write actual, expected and a diff (red where pixels differ). */
static void write_failure(const char *name, cairo_surface_t *actual, cairo_surface_t *expected) {
    const char *out = getenv("TSCOPE_TEST_OUT");
    if (!out || !*out) out = "/tmp/tscope-golden";
    mkdir_p(out);
    char path[512];
    snprintf(path, sizeof path, "%s/%s-actual.png", out, name);
    (void)ts_png_write(actual, path);
    print_error("  actual:   %s\n", path);
    if (!expected) return;
    snprintf(path, sizeof path, "%s/%s-expected.png", out, name);
    (void)ts_png_write(expected, path);
    print_error("  expected: %s\n", path);
    int w = cairo_image_surface_get_width(actual), h = cairo_image_surface_get_height(actual);
    if (w != cairo_image_surface_get_width(expected) || h != cairo_image_surface_get_height(expected)) return;
    cairo_surface_t *diff = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
    cairo_surface_flush(diff);
    unsigned char *d = cairo_image_surface_get_data(diff);
    int stride = cairo_image_surface_get_stride(diff);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint32_t a = pixel(actual, x, y), b = pixel(expected, x, y);
            uint32_t grey = (((a >> 8) & 255) + 3 * 255) / 4;
            ((uint32_t *)(void *)(d + (size_t)y * (size_t)stride))[x] =
                a == b ? (grey << 16 | grey << 8 | grey) : 0xFF0000u;
        }
    cairo_surface_mark_dirty(diff);
    snprintf(path, sizeof path, "%s/%s-diff.png", out, name);
    (void)ts_png_write(diff, path);
    print_error("  diff:     %s\n", path);
    cairo_surface_destroy(diff);
}

static void check_golden(cairo_surface_t *actual, const char *name) {
    char dir[400], path[512];
    golden_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/%s.png", dir, name);
    const char *update = getenv("TSCOPE_UPDATE_GOLDEN");
    if (update && strcmp(update, "1") == 0) {
        mkdir_p(dir);
        assert_ok(ts_png_write(actual, path));
        print_message("updated %s\n", path);
        return;
    }
    cairo_surface_t *expected = NULL;
    if (ts_png_read(path, &expected) != TS_OK) {
        print_error("%s: cannot read the golden image (%s); TSCOPE_UPDATE_GOLDEN=1 makes it\n", name,
                    ts_last_error());
        write_failure(name, actual, NULL);
        fail();
    }
    int w = cairo_image_surface_get_width(actual), h = cairo_image_surface_get_height(actual);
    if (w != cairo_image_surface_get_width(expected) || h != cairo_image_surface_get_height(expected)) {
        print_error("%s: image is %d x %d, golden is %d x %d\n", name, w, h,
                    cairo_image_surface_get_width(expected), cairo_image_surface_get_height(expected));
        write_failure(name, actual, expected);
        cairo_surface_destroy(expected);
        fail();
    }
    long differ = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint32_t a = pixel(actual, x, y), b = pixel(expected, x, y);
            for (int sh = 0; sh < 32; sh += 8) {
                int da = (int)((a >> sh) & 255) - (int)((b >> sh) & 255);
                if (abs(da) > GOLDEN_CHANNEL_TOL) {
                    differ++;
                    break;
                }
            }
        }
    double fraction = (double)differ / ((double)w * h);
    if (fraction > GOLDEN_MAX_FRACTION) {
        print_error("%s: %ld of %d pixels differ (%.2f%% > %.2f%%)\n", name, differ, w * h, 100 * fraction,
                    100 * GOLDEN_MAX_FRACTION);
        write_failure(name, actual, expected);
        cairo_surface_destroy(expected);
        fail();
    }
    cairo_surface_destroy(expected);
}

/* A fixed pseudo-random stream, so the goldens never change by chance. */
static uint32_t lcg_state;
static float lcg_unit(void) {
    lcg_state = lcg_state * 1664525u + 1013904223u;
    return (float)(lcg_state >> 8) / (float)(1u << 24);
}

static void softmax_rows(float *x, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        float *row = x + r * cols, mx = -INFINITY;
        for (int c = 0; c < cols; c++) mx = fmaxf(mx, row[c]);
        float sum = 0;
        for (int c = 0; c < cols; c++) sum += row[c] = isinf(row[c]) ? 0 : expf(row[c] - mx);
        for (int c = 0; c < cols; c++) row[c] /= sum;
    }
}

static const char *const tokens[4] = {"my", "name", "is", "goro"};

/* Attention of "my name is goro": weights (4, 4), and with a causal mask. */
static void attention(float *weights, float *scores_masked, unsigned char *mask) {
    lcg_state = 7;
    float scores[16];
    for (int i = 0; i < 16; i++) scores[i] = 3 * lcg_unit() - 1.5f;
    memcpy(weights, scores, sizeof scores);
    softmax_rows(weights, 4, 4);
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) scores_masked[r * 4 + c] = c > r ? -INFINITY : scores[r * 4 + c];
    ts_render_mask_from_scores(mask, scores_masked, 16);
}

/* ---- colour maps ------------------------------------------------------------- */

static void colormap_ends_match_the_tables(void **state) {
    (void)state;
    ts_rgb lo = ts_cmap_eval(TS_CMAP_VIRIDIS, 0), hi = ts_cmap_eval(TS_CMAP_VIRIDIS, 1);
    assert_float_equal(lo.r, 0.267004, 1e-6);
    assert_float_equal(lo.b, 0.329415, 1e-6);
    assert_float_equal(hi.r, 0.993248, 1e-6);
    assert_float_equal(hi.g, 0.906157, 1e-6);
    ts_rgb mid = ts_cmap_eval(TS_CMAP_COOLWARM, 0.5);
    assert_float_equal(mid.r, 0.865, 0.002);
    assert_float_equal(mid.g, 0.865, 0.002);
    /* Outside [0, 1] and NaN clamp to the ends. */
    ts_rgb under = ts_cmap_eval(TS_CMAP_COOLWARM, -3), nan_c = ts_cmap_eval(TS_CMAP_COOLWARM, NAN);
    assert_float_equal(under.b, 0.753683, 1e-6);
    assert_float_equal(nan_c.b, 0.753683, 1e-6);
    ts_cmap_id id;
    assert_true(ts_cmap_from_name("coolwarm", &id));
    assert_int_equal(id, TS_CMAP_COOLWARM);
    assert_false(ts_cmap_from_name("jet", &id));
}

static void viridis_lut_rises_in_luminance(void **state) {
    (void)state;
    uint32_t lut[TS_CMAP_LUT_SIZE];
    ts_cmap_lut(TS_CMAP_VIRIDIS, lut);
    /* Rising, allowing for rounding to 8 bits between neighbours. */
    double prev = -1;
    for (int i = 0; i < TS_CMAP_LUT_SIZE; i++) {
        double l = ts_rgb_luminance(rgb_of(lut[i]));
        assert_true(l > prev - 0.001);
        prev = l;
    }
    assert_true(ts_rgb_luminance(rgb_of(lut[TS_CMAP_LUT_SIZE - 1])) > 10 * ts_rgb_luminance(rgb_of(lut[0])));
}

/* ---- helpers of the views ------------------------------------------------------ */

static void numbers_read_like_a_person_writes_them(void **state) {
    (void)state;
    char buf[32];
    ts_render__fmt(buf, sizeof buf, -0.25, 0.05);
    assert_string_equal(buf, "\xe2\x88\x92" "0.25");
    ts_render__fmt(buf, sizeof buf, -0.001, 0.1);
    assert_string_equal(buf, "0.0");
    ts_render__fmt(buf, sizeof buf, 0.0004, 0);
    assert_string_equal(buf, "4e-4");
    ts_render__fmt(buf, sizeof buf, -INFINITY, 0);
    assert_string_equal(buf, "\xe2\x88\x92\xe2\x88\x9e");
    ts_render__fmt_short(buf, sizeof buf, 1e6);
    assert_string_equal(buf, "1e6");
    ts_render__fmt_short(buf, sizeof buf, 0.5);
    assert_string_equal(buf, "0.5");
    double ticks[16], step;
    int n = ts_render__ticks(0, 1, 6, ticks, &step);
    assert_int_equal(n, 6);
    assert_float_equal(step, 0.2, 1e-12);
    assert_float_equal(ticks[5], 1.0, 1e-12);
    n = ts_render__ticks(-0.93, 0.93, 5, ticks, &step);
    assert_float_equal(step, 0.5, 1e-12);
    assert_float_equal(ticks[0], -0.5, 1e-12);
    assert_int_equal(n, 3);
    assert_int_equal(ts_render__label_step(3.0, 14), 5);
    assert_int_equal(ts_render__label_step(20.0, 14), 1);
}

static void auto_scale_follows_the_sign(void **state) {
    (void)state;
    float probs[4] = {0.1f, 0.2f, 0.3f, 0.4f}, signed_v[4] = {-2, 0.5f, 1, 0};
    ts_render_matrix a = {.values = probs, .rows = 2, .cols = 2}, b = {.values = signed_v, .rows = 2, .cols = 2};
    ts_render_scale s = ts_render_scale_auto(&a, 1);
    assert_int_equal(s.cmap, TS_CMAP_VIRIDIS);
    assert_float_equal(s.vmin, 0, 0);
    assert_float_equal(s.vmax, 0.4f, 0);
    s = ts_render_scale_auto(&b, 1);
    assert_int_equal(s.cmap, TS_CMAP_COOLWARM);
    assert_float_equal(s.vmin, -2, 0);
    assert_float_equal(s.vmax, 2, 0);
    /* -inf (a masked score) is not part of the range. */
    float masked[4] = {-INFINITY, 0.5f, 1, 2};
    ts_render_matrix c = {.values = masked, .rows = 2, .cols = 2};
    s = ts_render_scale_auto(&c, 1);
    assert_int_equal(s.cmap, TS_CMAP_VIRIDIS);
    assert_float_equal(s.vmax, 2, 0);
}

static void stats_and_histogram_count_everything(void **state) {
    (void)state;
    float v[8] = {0, 1, 2, 3, NAN, INFINITY, -INFINITY, 0};
    ts_trace_stats s;
    ts_trace_stats_compute(&s, v, 8);
    assert_int_equal(s.finite + s.nan + s.inf, 8);
    assert_int_equal(s.nan, 1);
    assert_int_equal(s.inf, 2);
    assert_int_equal(s.zeros, 2);
    assert_float_equal(s.mean, 1.2, 1e-12);
    assert_float_equal(s.min, 0, 0);
    assert_float_equal(s.max, 3, 0);
    ts_render_hist h;
    ts_render_hist_compute(&h, v, 8, 1, 3, 0, 0);
    assert_int_equal(h.n_bins, 3);
    assert_int_equal(h.counts[0], 2); /* 0, 0 */
    assert_int_equal(h.counts[1], 1); /* 1 */
    assert_int_equal(h.counts[2], 2); /* 2 and 3: the top edge goes in the last bin */
    unsigned char mask[8];
    ts_render_mask_from_scores(mask, v, 8);
    assert_int_equal(mask[6], 1);
    assert_int_equal(mask[5] + mask[4] + mask[0], 0);
}

static void views_by_name(void **state) {
    (void)state;
    ts_render_view v;
    assert_true(ts_render_view_from_name("overview", &v));
    assert_int_equal(v, TS_RENDER_VIEW_OVERVIEW);
    assert_string_equal(ts_render_view_name(TS_RENDER_VIEW_SHAPES), "shapes");
    assert_false(ts_render_view_from_name("pie", &v));
}

/* ---- structure --------------------------------------------------------------- */

static void colorbar_is_monotone_for_viridis(void **state) {
    (void)state;
    float w[16], sm[16];
    unsigned char mask[16];
    attention(w, sm, mask);
    canvas c = canvas_new(400, 320);
    ts_render_matrix m = {.values = w, .rows = 4, .cols = 4};
    ts_render_layout l;
    assert_ok(ts_render_heatmap(c.cr, c.area, &m, NULL, NULL, &l));
    assert_int_equal(l.scale.cmap, TS_CMAP_VIRIDIS);
    assert_true(l.colorbar.h > 50);
    /* Down the middle of the bar: luminance falls from vmax at the top. */
    int x = (int)(l.colorbar.x + 7);
    double prev = 2;
    int y0 = (int)ceil(l.colorbar.y) + 2, y1 = (int)(l.colorbar.y + l.colorbar.h) - 2;
    for (int y = y0; y < y1; y++) {
        double lum = ts_rgb_luminance(rgb_of(pixel(c.surface, x, y)));
        assert_true(lum <= prev + 0.002);
        prev = lum;
    }
    assert_true(ts_rgb_luminance(rgb_of(pixel(c.surface, x, y0))) > 0.6);
    assert_true(ts_rgb_luminance(rgb_of(pixel(c.surface, x, y1 - 1))) < 0.05);
    canvas_free(&c);
}

/* Mean colour and the spread of one channel over a rectangle. */
static void region(cairo_surface_t *s, ts_render_rect r, ts_rgb *mean, double *spread) {
    double sum[3] = {0, 0, 0}, lo = 1, hi = 0;
    int n = 0;
    for (int y = (int)ceil(r.y) + 1; y < (int)(r.y + r.h) - 1; y++)
        for (int x = (int)ceil(r.x) + 1; x < (int)(r.x + r.w) - 1; x++) {
            ts_rgb c = rgb_of(pixel(s, x, y));
            sum[0] += c.r;
            sum[1] += c.g;
            sum[2] += c.b;
            lo = fmin(lo, c.g);
            hi = fmax(hi, c.g);
            n++;
        }
    *mean = (ts_rgb){(float)(sum[0] / n), (float)(sum[1] / n), (float)(sum[2] / n)};
    *spread = hi - lo;
}

static void masked_cell_differs_from_a_zero(void **state) {
    (void)state;
    /* Row 0: a real zero, then a zero that is only there because of the mask. */
    float w[4] = {0, 0, 0.5f, 0.5f};
    unsigned char mask[4] = {0, 1, 0, 0};
    canvas c = canvas_new(360, 300);
    ts_render_matrix m = {.values = w, .rows = 2, .cols = 2, .mask = mask};
    ts_render_heatmap_opts o = {.values = TS_RENDER_VALUES_NEVER};
    ts_render_layout l;
    assert_ok(ts_render_heatmap(c.cr, c.area, &m, &o, NULL, &l));
    ts_render_rect zero, masked;
    assert_true(ts_render_cell_rect(&l, 0, 0, 0, &zero));
    assert_true(ts_render_cell_rect(&l, 0, 0, 1, &masked));
    ts_rgb mz, mm;
    double sz, smask;
    region(c.surface, zero, &mz, &sz);
    region(c.surface, masked, &mm, &smask);
    double dist = fabs(mz.r - mm.r) + fabs(mz.g - mm.g) + fabs(mz.b - mm.b);
    assert_true(dist > 0.5);  /* dark purple against light grey */
    assert_true(sz < 0.01);   /* a zero is one flat colour */
    assert_true(smask > 0.2); /* the mask is hatched */
    canvas_free(&c);
}

static void long_sequence_shows_every_row(void **state) {
    (void)state;
    /* Rows alternate 0 and 1: every row boundary is a colour change, so a
     * row squeezed out of the picture would remove two of them. */
    enum { N = 200 };
    static float w[N * N];
    for (int r = 0; r < N; r++)
        for (int k = 0; k < N; k++) w[r * N + k] = (float)((r + k) % 2);
    canvas c = canvas_new(600, 600);
    ts_render_matrix m = {.values = w, .rows = N, .cols = N};
    ts_render_layout l;
    assert_ok(ts_render_heatmap(c.cr, c.area, &m, NULL, NULL, &l));
    const ts_render_cells *p = &l.panel[0];
    assert_int_equal(p->rows, N);
    assert_int_equal(p->cols, N);
    assert_true(p->cell_h >= 1 && p->cell_w >= 1);
    int changes_down = 0, changes_across = 0;
    int x = (int)(p->grid.x + p->grid.w / 2), y = (int)(p->grid.y + p->grid.h / 2);
    uint32_t prev = pixel(c.surface, x, (int)ceil(p->grid.y));
    for (int yy = (int)ceil(p->grid.y) + 1; yy < (int)(p->grid.y + p->grid.h); yy++) {
        uint32_t cur = pixel(c.surface, x, yy);
        changes_down += cur != prev;
        prev = cur;
    }
    prev = pixel(c.surface, (int)ceil(p->grid.x), y);
    for (int xx = (int)ceil(p->grid.x) + 1; xx < (int)(p->grid.x + p->grid.w); xx++) {
        uint32_t cur = pixel(c.surface, xx, y);
        changes_across += cur != prev;
        prev = cur;
    }
    assert_int_equal(changes_down, N - 1);
    assert_int_equal(changes_across, N - 1);
    canvas_free(&c);
}

/* A lens too wide for its area shows its last positions (where the text
 * ends): the last column's sure predictions (yellow) are on the canvas. */
static void narrow_lens_shows_the_last_positions(void **state) {
    (void)state;
    enum { L = 2, S = 60 };
    int top[L * S];
    float prob[L * S];
    for (int i = 0; i < L * S; i++) {
        top[i] = i % 3;
        prob[i] = i % S == S - 1 ? 1.0f : 0.0f;
    }
    ts_render_lens_view v = {.layers = L, .positions = S, .top = top, .prob = prob, .title = "lens", .subtitle = ""};
    int natural_w, natural_h;
    ts_render_lens_size(L, S, &natural_w, &natural_h);
    canvas c = canvas_new(600, natural_h);
    assert_true(600 < natural_w);
    assert_ok(ts_render_lens(c.cr, c.area, &v));
    ts_rgb yellow = ts_cmap_eval(TS_CMAP_VIRIDIS, 1.0);
    int found = 0;
    for (int y = 0; y < natural_h; y += 2)
        for (int x = 0; x < 600; x += 2) {
            ts_rgb p = rgb_of(pixel(c.surface, x, y));
            found += fabsf(p.r - yellow.r) < 0.02f && fabsf(p.g - yellow.g) < 0.02f && fabsf(p.b - yellow.b) < 0.02f;
        }
    assert_true(found > 20); /* the cells; the colour bar's top row alone is a few pixels */
    canvas_free(&c);
}

/* A masked LM's lens says what its cells are (the token at each position)
 * in its own caption; the grid, frames and all, is drawn the same. */
static void masked_lens_has_its_own_caption(void **state) {
    (void)state;
    enum { L = 2, S = 4 };
    int top[L * S] = {1, 2, 3, 4, 1, 2, 3, 4}, next[S] = {1, 0, 3, 0};
    float prob[L * S] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
    int w, h;
    ts_render_lens_size(L, S, &w, &h);
    uint32_t band[2], grid[2]; /* a hash of the caption's rows and of the rest */
    for (int k = 0; k < 2; k++) {
        ts_render_lens_view v = {.layers = L, .positions = S, .top = top, .prob = prob, .next = next,
                                 .masked = k == 1, .title = "lens", .subtitle = ""};
        canvas c = canvas_new(w, h);
        assert_ok(ts_render_lens(c.cr, c.area, &v));
        cairo_surface_flush(c.surface);
        band[k] = grid[k] = 2166136261u;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                uint32_t *acc = y >= 50 && y < 90 ? &band[k] : y >= 100 ? &grid[k] : NULL;
                if (acc) *acc = (*acc ^ pixel(c.surface, x, y)) * 16777619u;
            }
        canvas_free(&c);
    }
    assert_true(band[0] != band[1]);
    assert_true(grid[0] == grid[1]);
}

static void hit_test_finds_the_cell(void **state) {
    (void)state;
    float w[16], sm[16];
    unsigned char mask[16];
    attention(w, sm, mask);
    canvas c = canvas_new(400, 320);
    ts_render_matrix m = {.values = w, .rows = 4, .cols = 4, .row_labels = tokens, .col_labels = tokens};
    ts_render_state st = {.row0 = 1, .col0 = 2}; /* panned: rows 1..3, cols 2..3 */
    ts_render_layout l;
    assert_ok(ts_render_heatmap(c.cr, c.area, &m, NULL, &st, &l));
    assert_int_equal(l.panel[0].rows, 3);
    assert_int_equal(l.panel[0].cols, 2);
    ts_render_rect r;
    assert_true(ts_render_cell_rect(&l, 0, 2, 3, &r));
    int panel, row, col;
    assert_true(ts_render_hit(&l, r.x + r.w / 2, r.y + r.h / 2, &panel, &row, &col));
    assert_int_equal(panel, 0);
    assert_int_equal(row, 2);
    assert_int_equal(col, 3);
    assert_false(ts_render_hit(&l, 1, 1, &panel, &row, &col));
    assert_false(ts_render_cell_rect(&l, 0, 0, 0, &r)); /* panned out of view */

    /* Grids: the second panel. */
    ts_render_matrix two[2] = {m, m};
    assert_ok(ts_render_grid(c.cr, c.area, two, 2, NULL, NULL, &l));
    assert_int_equal(l.n_panels, 2);
    assert_true(ts_render_cell_rect(&l, 1, 3, 0, &r));
    assert_true(ts_render_hit(&l, r.x + 1, r.y + 1, &panel, &row, &col));
    assert_int_equal(panel, 1);
    assert_int_equal(row, 3);
    assert_int_equal(col, 0);
    canvas_free(&c);
}

static void bad_input_is_an_error(void **state) {
    (void)state;
    canvas c = canvas_new(100, 100);
    float v[6] = {0};
    ts_render_matrix empty = {.values = v, .rows = 0, .cols = 3};
    assert_int_equal(ts_render_heatmap(c.cr, c.area, &empty, NULL, NULL, NULL), TS_ERR_ARG);
    ts_render_matrix a = {.values = v, .rows = 2, .cols = 3}, b = {.values = v, .rows = 3, .cols = 2};
    ts_render_matrix pair[2] = {a, b};
    assert_int_equal(ts_render_grid(c.cr, c.area, pair, 2, NULL, NULL, NULL), TS_ERR_SHAPE);
    assert_non_null(strstr(ts_last_error(), "panel 1"));
    assert_int_equal(ts_render_grid(c.cr, c.area, pair, 0, NULL, NULL, NULL), TS_ERR_ARG);
    assert_int_equal(ts_render_shapes(c.cr, c.area, NULL, 0, NULL, NULL), TS_ERR_ARG);
    assert_int_equal(ts_render_layernorm(c.cr, c.area, NULL, NULL, NULL), TS_ERR_ARG);
    canvas_free(&c);
}

/* ---- PNG ----------------------------------------------------------------- */

static void png_unpremultiplies(void **state) {
    (void)state;
    cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 2, 1);
    cairo_surface_flush(s);
    uint32_t *d = (uint32_t *)(void *)cairo_image_surface_get_data(s);
    d[0] = 0x80804000u; /* alpha 128, premultiplied (128, 64, 0) = straight (255, 128, 0) */
    d[1] = 0x00000000u;
    cairo_surface_mark_dirty(s);
    uint8_t rgba[8];
    assert_ok(ts_png_to_rgba(s, rgba));
    assert_int_equal(rgba[0], 255);
    assert_int_equal(rgba[1], 128);
    assert_int_equal(rgba[2], 0);
    assert_int_equal(rgba[3], 128);
    assert_int_equal(rgba[7], 0);
    cairo_surface_destroy(s);
}

static void png_round_trip(void **state) {
    (void)state;
    char dir[] = "/tmp/tscope-png-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/out.png", dir);
    cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 37, 23);
    cairo_t *cr = cairo_create(s);
    cairo_set_source_rgba(cr, 0.2, 0.5, 0.9, 1);
    cairo_paint(cr);
    cairo_set_source_rgba(cr, 1, 0, 0, 0.5);
    cairo_rectangle(cr, 5, 5, 10, 10);
    cairo_set_operator(cr, CAIRO_OPERATOR_SOURCE);
    cairo_fill(cr);
    cairo_destroy(cr);
    assert_ok(ts_png_write(s, path));
    cairo_surface_t *back;
    assert_ok(ts_png_read(path, &back));
    assert_int_equal(cairo_image_surface_get_width(back), 37);
    assert_int_equal(cairo_image_surface_get_height(back), 23);
    for (int y = 0; y < 23; y++)
        for (int x = 0; x < 37; x++) {
            uint32_t a = pixel(s, x, y), b = pixel(back, x, y);
            for (int sh = 0; sh < 32; sh += 8)
                assert_true(abs((int)((a >> sh) & 255) - (int)((b >> sh) & 255)) <= 1);
        }
    /* rmdir succeeds only if no temporary file was left beside out.png. */
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
    cairo_surface_destroy(back);
    cairo_surface_destroy(s);
}

static void png_unwritable_path_fails_before_drawing(void **state) {
    (void)state;
    ts_png_out out;
    assert_int_equal(ts_png_open(&out, "/nonexistent-dir/x/y.png"), TS_ERR_IO);
    assert_non_null(strstr(ts_last_error(), "/nonexistent-dir/x/y.png"));
    assert_int_equal(ts_png_open(&out, "/tmp"), TS_ERR_IO);
    assert_non_null(strstr(ts_last_error(), "directory"));
    cairo_surface_t *back;
    assert_int_equal(ts_png_read("/nonexistent-dir/none.png", &back), TS_ERR_IO);
}

/* ---- golden images --------------------------------------------------------- */

static void golden_attention_heatmap(void **state) {
    (void)state;
    float w[16], sm[16];
    unsigned char mask[16];
    attention(w, sm, mask);
    canvas c = canvas_new(420, 340);
    ts_render_matrix m = {.values = w, .rows = 4, .cols = 4, .row_labels = tokens, .col_labels = tokens};
    ts_render_heatmap_opts o = {.title = "encoder.layers.0.self_attn.weights", .subtitle = "head 0 \xc2\xb7 [1, 2, 4, 4]",
                                .row_axis = "query", .col_axis = "key"};
    ts_render_state st = {.highlight = true, .hl_row = 2, .hl_col = 1};
    assert_ok(ts_render_heatmap(c.cr, c.area, &m, &o, &st, NULL));
    check_golden(c.surface, "heatmap_attention");
    canvas_free(&c);
}

static void golden_causal_mask(void **state) {
    (void)state;
    float w[16], sm[16];
    unsigned char mask[16];
    attention(w, sm, mask);
    softmax_rows(sm, 4, 4); /* weights with the mask applied */
    canvas c = canvas_new(420, 340);
    ts_render_matrix m = {.values = sm, .rows = 4, .cols = 4, .mask = mask, .row_labels = tokens, .col_labels = tokens};
    ts_render_heatmap_opts o = {.title = "decoder.layers.0.self_attn.weights", .row_axis = "query", .col_axis = "key"};
    assert_ok(ts_render_heatmap(c.cr, c.area, &m, &o, NULL, NULL));
    check_golden(c.surface, "heatmap_causal");
    canvas_free(&c);
}

static void golden_head_grid(void **state) {
    (void)state;
    float w[2][16], sm[16];
    unsigned char mask[16];
    attention(w[0], sm, mask);
    for (int i = 0; i < 16; i++) w[1][i] = w[0][15 - i];
    canvas c = canvas_new(560, 300);
    ts_render_matrix m[2] = {
        {.values = w[0], .rows = 4, .cols = 4, .row_labels = tokens, .col_labels = tokens},
        {.values = w[1], .rows = 4, .cols = 4, .row_labels = tokens, .col_labels = tokens},
    };
    const char *titles[2] = {"head 0", "head 1"};
    ts_render_grid_opts o = {.title = "layer 0, all heads", .panel_titles = titles};
    assert_ok(ts_render_grid(c.cr, c.area, m, 2, &o, NULL, NULL));
    check_golden(c.surface, "grid_heads");
    canvas_free(&c);
}

static void golden_pe_curves(void **state) {
    (void)state;
    float pe[10 * 6];
    for (int p = 0; p < 10; p++)
        for (int i = 0; i < 3; i++) {
            double f = pow(10000.0, -2.0 * i / 6);
            pe[p * 6 + 2 * i] = (float)sin(p * f);
            pe[p * 6 + 2 * i + 1] = (float)cos(p * f);
        }
    canvas c = canvas_new(480, 300);
    int dims[4] = {0, 1, 2, 3};
    assert_ok(ts_render_pe_curves(c.cr, c.area, pe, 10, 6, dims, 4, "embed.pe", NULL));
    check_golden(c.surface, "pe_curves");
    canvas_free(&c);
}

static void golden_layernorm(void **state) {
    (void)state;
    enum { S = 4, D = 8 };
    float in[S * D], out[S * D], g[D], b[D];
    lcg_state = 11;
    for (int s = 0; s < S; s++)
        for (int d = 0; d < D; d++) in[s * D + d] = (float)s - 1.5f + (1 + s) * (lcg_unit() - 0.5f);
    for (int d = 0; d < D; d++) g[d] = 1 + 0.1f * (float)(d % 3), b[d] = 0.05f * (float)(d % 2);
    for (int s = 0; s < S; s++) {
        double mu = 0, var = 0;
        for (int d = 0; d < D; d++) mu += in[s * D + d] / D;
        for (int d = 0; d < D; d++) var += (in[s * D + d] - mu) * (in[s * D + d] - mu) / D;
        for (int d = 0; d < D; d++) out[s * D + d] = (float)(g[d] * (in[s * D + d] - mu) / sqrt(var + 1e-5) + b[d]);
    }
    ts_render_norm nd = {.in = in, .out = out, .seq = S, .dim = D, .gamma = g, .beta = b, .tokens = tokens};
    canvas c = canvas_new(900, 520);
    assert_ok(ts_render_layernorm(c.cr, c.area, &nd, "encoder.layers.0.norm1", NULL));
    check_golden(c.surface, "layernorm");
    canvas_free(&c);
}

static void golden_shapes(void **state) {
    (void)state;
    ts_render_step st[] = {
        {.name = "encoder.layers.0.self_attn.qkv", .op = "linear", .rank = 3, .shape = {1, 4, 48}},
        {.name = "encoder.layers.0.self_attn.qkv_heads", .op = "reshape", .rank = 4, .shape = {1, 4, 2, 24}},
        {.name = "encoder.layers.0.self_attn.qkv_perm", .op = "permute", .rank = 4, .shape = {1, 2, 4, 24}},
        {.name = "encoder.layers.0.self_attn.q", .op = "chunk", .rank = 4, .shape = {1, 2, 4, 8}},
        {.name = "encoder.layers.0.self_attn.k", .op = "chunk", .rank = 4, .shape = {1, 2, 4, 8}},
        {.name = "encoder.layers.0.self_attn.v", .op = "chunk", .rank = 4, .shape = {1, 2, 4, 8}},
        {.name = "encoder.layers.0.self_attn.scores", .op = "matmul", .rank = 4, .shape = {1, 2, 4, 4}},
        {.name = "encoder.layers.0.self_attn.weights", .op = "softmax", .rank = 4, .shape = {1, 2, 4, 4}},
        {.name = "encoder.layers.0.self_attn.values", .op = "matmul", .rank = 4, .shape = {1, 2, 4, 8}},
        {.name = "encoder.layers.0.self_attn.concat", .op = "reshape", .rank = 3, .shape = {1, 4, 16}},
    };
    ts_render_steps_link(st, 10, NULL);
    canvas c = canvas_new(640, 640);
    assert_ok(ts_render_shapes(c.cr, c.area, st, 10, NULL, NULL));
    check_golden(c.surface, "shapes");
    canvas_free(&c);
}

/* The edges of the shape flow are each step's real inputs, by tscope's names. */
static void shape_flow_links_the_real_inputs(void **state) {
    (void)state;
    enum { QKV, HEADS, PERM, Q, K, V, SCORES, WEIGHTS, VALUES, OUT, IN1, MEAN, STD, Y, GAMMA, BETA, NOUT, N };
    static const char *const names[N] = {
        "self_attn.qkv", "self_attn.qkv_heads", "self_attn.qkv_perm", "self_attn.q", "self_attn.k",
        "self_attn.v", "self_attn.scores", "self_attn.weights", "self_attn.values", "self_attn.out",
        "norm1.in", "norm1.mean", "norm1.std", "norm1.y", "norm1.gamma", "norm1.beta", "norm1.out"};
    ts_render_step st[N];
    memset(st, 0, sizeof st);
    for (int i = 0; i < N; i++) {
        st[i].name = names[i];
        st[i].op = i == IN1 ? "add" : i == GAMMA || i == BETA ? "parameter" : "x";
    }
    ts_render_steps_link(st, N, NULL);
#define INPUTS(i, n, a, b, c)                                                                                          \
    do {                                                                                                               \
        assert_int_equal(st[i].n_inputs, n);                                                                           \
        if (n > 0) assert_int_equal(st[i].inputs[0], a);                                                               \
        if (n > 1) assert_int_equal(st[i].inputs[1], b);                                                               \
        if (n > 2) assert_int_equal(st[i].inputs[2], c);                                                               \
    } while (0)
    INPUTS(QKV, 1, TS_RENDER_OUTSIDE, 0, 0);
    INPUTS(Q, 1, PERM, 0, 0);
    INPUTS(V, 1, PERM, 0, 0);
    INPUTS(SCORES, 2, Q, K, 0);
    INPUTS(WEIGHTS, 1, SCORES, 0, 0);
    INPUTS(VALUES, 2, WEIGHTS, V, 0);
    INPUTS(OUT, 1, VALUES, 0, 0);          /* no concat here: the step before */
    INPUTS(IN1, 2, OUT, TS_RENDER_OUTSIDE, 0); /* post-LN: the sublayer and the stream it read */
    INPUTS(MEAN, 1, IN1, 0, 0);
    INPUTS(Y, 3, IN1, MEAN, STD);
    INPUTS(GAMMA, 0, 0, 0, 0);
    INPUTS(NOUT, 3, Y, GAMMA, BETA);
    /* pre-LN: a residual add skips to the norm's input, not its output */
    static const char *const pre[] = {"norm1.in", "norm1.y", "norm1.out", "self_attn.qkv", "self_attn.out",
                                      "norm2.in"};
    ts_render_step p[6];
    memset(p, 0, sizeof p);
    for (int i = 0; i < 6; i++) {
        p[i].name = pre[i];
        p[i].op = i == 0 ? "input" : i == 5 ? "add" : "x";
    }
    ts_render_steps_link(p, 6, &(ts_render_wiring){.pre_norm = true});
    assert_int_equal(p[3].inputs[0], 2);
    assert_int_equal(p[5].n_inputs, 2);
    assert_int_equal(p[5].inputs[0], 4);
    assert_int_equal(p[5].inputs[1], 0);
    /* seed 004's block: norm2.in = x + dropout(x) reads the stream alone, and
     * the FFN's sum skips from norm2's out */
    static const char *const s4[] = {"norm1.in", "norm1.y",  "norm1.out", "self_attn.qkv", "self_attn.out",
                                     "norm2.in", "norm2.y",  "norm2.out", "ffn.hidden",    "ffn.out",
                                     "out"};
    ts_render_step q[11];
    memset(q, 0, sizeof q);
    for (int i = 0; i < 11; i++) {
        q[i].name = s4[i];
        q[i].op = i == 0 ? "input" : i == 5 || i == 10 ? "add" : "x";
    }
    ts_render_steps_link(q, 11, &(ts_render_wiring){.pre_norm = true, .seed004_residual = true});
    assert_int_equal(q[5].n_inputs, 1);
    assert_int_equal(q[5].inputs[0], 0);
    assert_int_equal(q[10].n_inputs, 2);
    assert_int_equal(q[10].inputs[0], 9);
    assert_int_equal(q[10].inputs[1], 7);
    for (int i = 5; i < 11; i++) /* the attention's output is read by nothing */
        for (int k = 0; k < q[i].n_inputs; k++) assert_int_not_equal(q[i].inputs[k], 4);
    /* and the drawing frames it in red; wired as plain pre-LN, nothing is framed */
    int framed[2];
    for (int seed004 = 0; seed004 < 2; seed004++) {
        ts_render_steps_link(q, 11, &(ts_render_wiring){.pre_norm = true, .seed004_residual = seed004});
        canvas c = canvas_new(700, 900);
        assert_ok(ts_render_shapes(c.cr, c.area, q, 11, "layer", "subtitle"));
        framed[seed004] = 0;
        for (int y = 0; y < 900; y++)
            for (int x = 0; x < 700; x++) framed[seed004] += (pixel(c.surface, x, y) & 0xffffff) == 0xd62728;
        canvas_free(&c);
    }
    assert_int_equal(framed[0], 0);
    assert_true(framed[1] > 200); /* a 2.5-point frame around one box */
    /* a cross-attention's keys and values read the encoder's memory */
    ts_render_step kv[1] = {{.name = "cross_attn.kv", .op = "linear"}};
    ts_render_steps_link(kv, 1, NULL);
    assert_int_equal(kv[0].inputs[0], TS_RENDER_MEMORY);
#undef INPUTS
}

static void golden_tensor(void **state) {
    (void)state;
    float v[4 * 12];
    lcg_state = 3;
    for (int i = 0; i < 48; i++) v[i] = 4 * lcg_unit() - 2;
    v[5] = NAN;
    ts_render_tensor_view tv = {.slice = {.values = v, .rows = 4, .cols = 12, .row_labels = tokens},
                                .title = "encoder.layers.0.ffn.out", .subtitle = "[1, 4, 12]",
                                .row_axis = "token", .col_axis = "feature"};
    canvas c = canvas_new(820, 340);
    assert_ok(ts_render_tensor(c.cr, c.area, &tv, NULL, NULL));
    check_golden(c.surface, "tensor");
    canvas_free(&c);
}

static void golden_training(void **state) {
    (void)state;
    float loss[30], g[2][30];
    for (int i = 0; i < 30; i++) {
        loss[i] = 4.0f * expf(-i / 8.0f) + 0.1f;
        g[0][i] = 1.0f / (1 + i * 0.2f);
        g[1][i] = 2.0f / (1 + i * 0.1f);
    }
    ts_render_series ls = {.label = "loss", .y = loss, .n = 30, .color = 0};
    ts_render_series gs[2] = {{.label = "layer 0", .y = g[0], .n = 30, .color = 0},
                              {.label = "layer 1", .y = g[1], .n = 30, .color = 1}};
    canvas c = canvas_new(560, 420);
    assert_ok(ts_render_training(c.cr, c.area, &ls, gs, 2, 0, "copy task", NULL));
    check_golden(c.surface, "training");
    canvas_free(&c);
}

/* ---- scenes: from a trace to a picture ------------------------------------ */

/* A trace of one causal attention (B=1, H=2, 4 x 4): scores with -inf above
 * the diagonal as `masked`, then `weights`; level `level`. */
static void write_attention_trace_padded(const char *path, ts_trace_level level, bool pad_last);

static void write_attention_trace(const char *path, ts_trace_level level) {
    write_attention_trace_padded(path, level, false);
}

/* The same; with pad_last the run's tgt_key_padding_mask (1, 4) marks the
 * last position as padding, traced first as tscope run traces it. */
static void write_attention_trace_padded(const char *path, ts_trace_level level, bool pad_last) {
    float masked[2 * 16], weights[2 * 16];
    float w[16], sm[16];
    unsigned char mask[16];
    attention(w, sm, mask);
    for (int h = 0; h < 2; h++) {
        memcpy(masked + 16 * h, sm, sizeof sm);
        memcpy(weights + 16 * h, sm, sizeof sm);
    }
    softmax_rows(weights, 8, 4);
    ts_trace_options opt;
    ts_trace_options_default(&opt);
    opt.level = level;
    char *meta = NULL;
    const char *tgt[4] = {"<bos>", "my", "name", "is"};
    assert_ok(ts_trace_metadata_build(&meta, NULL, tokens, 4, tgt, 4, 0, NULL));
    ts_trace_writer *wr;
    assert_ok(ts_trace_writer_open(path, meta, &opt, &wr));
    free(meta);
    ts_tensor t;
    float pads[4] = {0, 0, 0, 1};
    assert_ok(ts_tensor_view(&t, pads, 2, (int64_t[]){1, 4}));
    if (pad_last) assert_ok(ts_trace_writer_step(wr, "tgt_key_padding_mask", TS_OP_MASK, &t, TS_TAG_PLAIN));
    assert_ok(ts_tensor_view(&t, masked, 4, (int64_t[]){1, 2, 4, 4}));
    assert_ok(ts_trace_writer_step(wr, "decoder.layers.0.self_attn.masked", TS_OP_MASK, &t, TS_TAG_ATTN_SCORES));
    assert_ok(ts_tensor_view(&t, weights, 4, (int64_t[]){1, 2, 4, 4}));
    assert_ok(ts_trace_writer_step(wr, "decoder.layers.0.self_attn.weights", TS_OP_SOFTMAX, &t, TS_TAG_ATTN_WEIGHTS));
    assert_ok(ts_trace_writer_close(wr, NULL));
}

/* Rows of the canvas where more than half the pixels are the level line's
 * colour: the dashed line drawn across the plot, and nothing else. */
static int level_line_rows(canvas *c, int w, int h) {
    int rows = 0;
    for (int y = 0; y < h; y++) {
        int on = 0;
        for (int x = 0; x < w; x++) on += (pixel(c->surface, x, y) & 0xffffff) == 0x333338;
        rows += on > w / 2 * 0.5;
    }
    return rows;
}

/* A clip threshold above every point still shows, as one dashed row. */
static void plot_draws_its_level_line(void **state) {
    (void)state;
    const float y[] = {0.2f, 0.5f, 0.3f, 0.6f, 0.4f};
    ts_render_series s = {.label = "norm", .y = y, .n = 5, .color = 0};
    int w = 640, h = 360, rows[2];
    for (int with = 0; with < 2; with++) {
        canvas c = canvas_new(w, h);
        ts_render_plot_opts o = {.title = "train.grad_norm", .no_legend = true};
        if (with) o.ref_label = "clipped above 1", o.ref_y = 1;
        assert_ok(ts_render_plot(c.cr, c.area, &s, 1, &o));
        rows[with] = level_line_rows(&c, w, h);
        canvas_free(&c);
    }
    assert_int_equal(rows[0], 0);
    assert_int_equal(rows[1], 1);
    /* the training picture draws its run's clip under the gradient norms */
    const float loss[] = {3, 2, 1.5f, 1, 0.8f};
    ts_render_series ls = {.label = "loss", .y = loss, .n = 5, .color = 0};
    for (int with = 0; with < 2; with++) {
        canvas c = canvas_new(w, 2 * h);
        assert_ok(ts_render_training(c.cr, c.area, &ls, &s, 1, with ? 1.0 : 0.0, "training", NULL));
        rows[with] = level_line_rows(&c, w, 2 * h);
        canvas_free(&c);
    }
    assert_int_equal(rows[0], 0);
    assert_int_equal(rows[1], 1);
}

static void scene_picks_the_view_and_finds_the_mask(void **state) {
    (void)state;
    char dir[] = "/tmp/tscope-scene-XXXXXX", path[96];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/attn.tstrace", dir);
    write_attention_trace(path, TS_TRACE_VALUES);
    ts_trace *t;
    assert_ok(ts_trace_open(path, &t));

    /* auto on attention weights: every head */
    ts_scene_request rq = ts_scene_request_default("decoder.layers.0.self_attn.weights");
    ts_scene *sc;
    assert_ok(ts_scene_build(&sc, t, &rq));
    assert_int_equal(ts_scene_view(sc), TS_RENDER_VIEW_GRID);
    assert_string_equal(ts_scene_step(sc)->name, "decoder.layers.0.self_attn.weights");
    canvas c = canvas_new(600, 360);
    ts_render_layout l;
    assert_ok(ts_scene_draw(sc, c.cr, c.area, NULL, &l));
    assert_int_equal(l.n_panels, 2);
    ts_scene_free(sc);

    /* one head: a heatmap whose cells above the diagonal are hatched */
    rq.head = 1;
    assert_ok(ts_scene_build(&sc, t, &rq));
    assert_int_equal(ts_scene_view(sc), TS_RENDER_VIEW_HEATMAP);
    assert_ok(ts_scene_draw(sc, c.cr, c.area, NULL, &l));
    ts_render_rect above, below;
    assert_true(ts_render_cell_rect(&l, 0, 0, 3, &above));
    assert_true(ts_render_cell_rect(&l, 0, 3, 0, &below));
    ts_rgb ma, mb;
    double sa, sb;
    region(c.surface, above, &ma, &sa);
    region(c.surface, below, &mb, &sb);
    assert_true(sa > 0.2); /* hatched: the mask came from the `masked` step */
    ts_scene_free(sc);

    /* a typo: the nearest names */
    rq = ts_scene_request_default("decoder.layers.0.self_attn.weight");
    assert_int_equal(ts_scene_build(&sc, t, &rq), TS_ERR_ARG);
    assert_null(sc);
    assert_non_null(strstr(ts_last_error(), "nearest: decoder.layers.0.self_attn.weights"));
    /* a view that does not fit the step */
    rq = ts_scene_request_default("decoder.layers.0.self_attn.weights");
    rq.head = 5;
    assert_int_equal(ts_scene_build(&sc, t, &rq), TS_ERR_ARG);
    assert_non_null(strstr(ts_last_error(), "2 heads"));
    rq = ts_scene_request_default("decoder.layers.0.self_attn");
    rq.view = TS_RENDER_VIEW_SHAPES;
    assert_ok(ts_scene_build(&sc, t, &rq));
    assert_string_equal(ts_scene_view_name(sc), "shapes");
    assert_ok(ts_scene_draw(sc, c.cr, c.area, NULL, NULL));
    ts_scene_free(sc);

    canvas_free(&c);
    ts_trace_close(t);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
}

/* The library behind png and html, not only the commands, refuses a trace
 * whose helper step is damaged: attention weights are never drawn without
 * the mask they read from a `masked` step whose values fail their CRC, and
 * no page is written with that figure missing (issue 47). */
static void scene_and_page_name_a_damaged_helper_step(void **state) {
    (void)state;
    char dir[] = "/tmp/tscope-scene-XXXXXX", path[96], page[120];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/attn.tstrace", dir);
    snprintf(page, sizeof page, "%s/page", dir);
    write_attention_trace(path, TS_TRACE_VALUES);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static unsigned char bytes[1 << 16];
    size_t n = fread(bytes, 1, sizeof bytes, f);
    fclose(f);
    assert_true(n > 0 && n < sizeof bytes);
    /* the masked step's first values (head 0 of its own record: the weights are softmaxed) */
    float w[16], sm[16];
    unsigned char mask[16];
    attention(w, sm, mask);
    size_t at = 0;
    while (at + sizeof sm <= n && memcmp(bytes + at, sm, sizeof sm) != 0) at++;
    assert_true(at + sizeof sm <= n);
    bytes[at + 1] ^= 0x10;
    ts_trace *t;
    assert_ok(ts_trace_open_memory(bytes, n, &t));
    ts_scene_request rq = ts_scene_request_default("decoder.layers.0.self_attn.weights");
    rq.head = 1;
    ts_scene *sc;
    assert_int_equal(ts_scene_build(&sc, t, &rq), TS_ERR_FORMAT);
    assert_null(sc);
    assert_non_null(strstr(ts_last_error(), "step 0 'decoder.layers.0.self_attn.masked'"));
    int figures = -1;
    assert_int_equal(ts_trace_html_write(t, path, page, &figures), TS_ERR_FORMAT);
    assert_non_null(strstr(ts_last_error(), "'decoder.layers.0.self_attn.masked'"));
    assert_int_equal(figures, 0);
    struct stat sb;
    assert_int_not_equal(stat(page, &sb), 0); /* nothing written */
    ts_trace_close(t);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
}

/* PyTorch computes the rows of padded queries and leaves them unspecified:
 * a picture draws them as padding (hatched), not as data. */
static void scene_draws_padded_query_rows_as_padding(void **state) {
    (void)state;
    char dir[] = "/tmp/tscope-scene-XXXXXX", path[96];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/pad.tstrace", dir);
    canvas c = canvas_new(600, 360);
    for (int pad = 0; pad < 2; pad++) {
        write_attention_trace_padded(path, TS_TRACE_VALUES, pad);
        ts_trace *t;
        assert_ok(ts_trace_open(path, &t));
        ts_scene_request rq = ts_scene_request_default("decoder.layers.0.self_attn.weights");
        rq.head = 0;
        ts_scene *sc;
        assert_ok(ts_scene_build(&sc, t, &rq));
        assert_int_equal(ts_scene_used(sc), TS_SCENE_USED_BATCH | TS_SCENE_USED_HEAD);
        ts_render_layout l;
        assert_ok(ts_scene_draw(sc, c.cr, c.area, NULL, &l));
        const ts_render_matrix *m = ts_scene_matrix(sc, 0);
        assert_non_null(m);
        /* row 2 (a word) is data up to the diagonal; row 3 (the pad) all masked, with the step */
        assert_non_null(m->mask);
        assert_false(m->mask[2 * 4 + 0]);
        assert_true(m->mask[2 * 4 + 3]);
        for (int col = 0; col < 4; col++) assert_int_equal(m->mask[3 * 4 + col], pad);
        ts_render_rect padded;
        assert_true(ts_render_cell_rect(&l, 0, 3, 0, &padded)); /* not masked by the causal rule */
        ts_rgb mp;
        double sp;
        region(c.surface, padded, &mp, &sp);
        if (pad) assert_true(sp > 0.2 && mp.g > 0.6); /* hatched over light grey: padding */
        ts_scene_free(sc);
        ts_trace_close(t);
        assert_int_equal(unlink(path), 0);
    }
    canvas_free(&c);
    assert_int_equal(rmdir(dir), 0);
}

static void scene_without_values_says_how_to_rerun(void **state) {
    (void)state;
    char dir[] = "/tmp/tscope-scene-XXXXXX", path[96];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/stats.tstrace", dir);
    write_attention_trace(path, TS_TRACE_STATS);
    ts_trace *t;
    assert_ok(ts_trace_open(path, &t));
    ts_scene_request rq = ts_scene_request_default("decoder.layers.0.self_attn.weights");
    ts_scene *sc;
    assert_int_equal(ts_scene_build(&sc, t, &rq), TS_ERR_ARG);
    assert_non_null(strstr(ts_last_error(), "--level values --only 'decoder.layers.0.self_attn.weights'"));
    /* shapes need no values */
    rq.view = TS_RENDER_VIEW_SHAPES;
    assert_ok(ts_scene_build(&sc, t, &rq));
    ts_scene_free(sc);
    ts_trace_close(t);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
}

/* ---- what a figure could not draw whole --------------------------------------- */

/* Show text at (x, y) turned by angle, as the renderers do, through the one
 * place every text of viz/ goes. */
static void show_at(cairo_t *cr, const char *text, double x, double y, double angle) {
    PangoLayout *lay = ts_render_text_layout(cr);
    pango_layout_set_text(lay, text, -1);
    cairo_save(cr);
    cairo_translate(cr, x, y);
    cairo_rotate(cr, angle);
    cairo_move_to(cr, 0, 0);
    ts_render_show_layout(cr, lay);
    cairo_restore(cr);
    g_object_unref(lay);
}

/* The recorder sees a label over another, a label past the picture's edge
 * and a shortened one, and not turned labels side by side (whose boxes
 * would overlap) nor text on another surface. */
static void clipped_text_is_recorded(void **state) {
    (void)state;
    canvas c = canvas_new(300, 120);
    char desc[600];
    ts_render_clips_begin();
    show_at(c.cr, "mean |x|", 20, 20, 0);
    show_at(c.cr, "0.25", 40, 22, 0); /* over it */
    assert_int_equal(ts_render_clips_end(desc, sizeof desc), 1);
    assert_non_null(strstr(desc, "\"0.25\" drawn over \"mean |x|\""));

    ts_render_clips_begin();
    show_at(c.cr, "a label past the edge", 250, 60, 0);
    assert_int_equal(ts_render_clips_end(desc, sizeof desc), 1);
    assert_non_null(strstr(desc, "cut off at the edge of its area"));

    ts_render_clips_begin(); /* column labels at 45 degrees, 22 points apart: their inks are apart */
    for (int i = 0; i < 8; i++) show_at(c.cr, "12 a", 40 + 22 * i, 100, -M_PI / 4);
    assert_int_equal(ts_render_clips_end(desc, sizeof desc), 0);

    ts_render_clips_begin();
    PangoLayout *lay = ts_render_text_layout(c.cr);
    pango_layout_set_text(lay, "a title far too long for its place", -1);
    pango_layout_set_width(lay, 60 * PANGO_SCALE);
    pango_layout_set_ellipsize(lay, PANGO_ELLIPSIZE_END);
    cairo_move_to(c.cr, 10, 10);
    ts_render_show_layout(c.cr, lay);
    g_object_unref(lay);
    assert_int_equal(ts_render_clips_end(desc, sizeof desc), 1);
    assert_non_null(strstr(desc, "shortened to fit: \"a title far too long"));

    canvas other = canvas_new(300, 120); /* the same place on another figure */
    ts_render_clips_begin();
    show_at(c.cr, "mean |x|", 20, 20, 0);
    show_at(other.cr, "mean |x|", 20, 20, 0);
    assert_int_equal(ts_render_clips_end(NULL, 0), 0);
    show_at(c.cr, "mean |x|", 20, 20, 0); /* not recording: nothing */
    show_at(c.cr, "mean |x|", 20, 20, 0);
    ts_render_clips_begin();
    assert_int_equal(ts_render_clips_end(NULL, 0), 0);
    canvas_free(&other);
    canvas_free(&c);
}

/* ---- today's blocks: RoPE, RMSNorm, shared key/value heads ----------------- */

/* Every text a drawing shows, with where it lands and whether it was cut. */
typedef struct text_seen {
    char text[600][160];
    int n;
    int cut, outside;
    double w, h;
} text_seen;

static void see_text(void *ctx, const ts_render_text_info *t) {
    text_seen *s = ctx;
    if (s->n < 600) snprintf(s->text[s->n++], sizeof s->text[0], "%s", t->text);
    if (t->ellipsized) {
        s->cut++;
        fprintf(stderr, "cut short: '%s'\n", t->text);
    }
    if (t->x < -0.5 || t->y < -0.5 || t->x + t->w > s->w + 0.5 || t->y + t->h > s->h + 0.5) {
        s->outside++;
        fprintf(stderr, "outside the picture: '%s' at %.0f, %.0f (%.0f x %.0f)\n", t->text, t->x, t->y, t->w, t->h);
    }
}

static bool saw(const text_seen *s, const char *part) {
    for (int i = 0; i < s->n; i++)
        if (strstr(s->text[i], part)) return true;
    return false;
}

/* The text of the first line that holds `part`, or "". */
static const char *line_with(const text_seen *s, const char *part) {
    for (int i = 0; i < s->n; i++)
        if (strstr(s->text[i], part)) return s->text[i];
    return "";
}

/* Draw a scene at its own size with the probe on; every text whole and inside. */
static void draw_seen(ts_scene *sc, text_seen *seen) {
    int w, h;
    ts_scene_size(sc, &w, &h);
    memset(seen, 0, sizeof *seen);
    seen->w = w;
    seen->h = h;
    canvas c = canvas_new(w, h);
    ts_render_set_text_probe(see_text, seen);
    assert_ok(ts_scene_draw(sc, c.cr, c.area, NULL, NULL));
    ts_render_set_text_probe(NULL, NULL);
    canvas_free(&c);
    assert_int_equal(seen->cut, 0);
    assert_int_equal(seen->outside, 0);
}

/* The numbers the RoPE view draws are the forward's: pair i turns by
 * theta^(-2i / r) with r the rotated dims (not head_dim), and the score of
 * turned vectors depends on i - j only. */
static void rope_view_turns_as_the_forward(void **state) {
    (void)state;
    ts_render_rope_view full = {.head_dim = 16, .rotary = 16, .theta = 10000, .positions = 48};
    ts_render_rope_view part = {.head_dim = 16, .rotary = 4, .theta = 10000, .positions = 48};
    assert_true(fabs(ts_render_rope_frequency(&full, 1) - pow(10000, -2.0 / 16)) < 1e-12);
    assert_true(fabs(ts_render_rope_frequency(&part, 1) - 0.01) < 1e-12); /* GPT-NeoX's r = 4: 10000^(-2/4) */
    for (int il = 0; il < 2; il++) {
        full.interleaved = part.interleaved = il;
        assert_true(fabs(ts_render_rope_score(&full, 0, 0) - 1) < 1e-12);
        for (int d = 0; d < 30; d += 7)
            for (int k = 1; k < 40; k += 13) {
                assert_true(fabs(ts_render_rope_score(&full, d, 0) - ts_render_rope_score(&full, d + k, k)) < 1e-9);
                /* the 12 unturned dims give 12/16 at every distance; the 2 pairs add 2 cos each, over 16 */
                double want = (12 + 2 * cos(d) + 2 * cos(0.01 * d)) / 16;
                assert_true(fabs(ts_render_rope_score(&part, d + k, k) - want) < 1e-9);
            }
    }
    /* drawn: the pairs' frequencies and the flat unturned dims, nothing cut short */
    static text_seen seen;
    seen = (text_seen){.w = 1200, .h = 860};
    part.title = "q_rot";
    part.interleaved = false;
    canvas c = canvas_new(1200, 860);
    ts_render_set_text_probe(see_text, &seen);
    assert_ok(ts_render_rope(c.cr, c.area, &part));
    ts_render_set_text_probe(NULL, NULL);
    canvas_free(&c);
    assert_int_equal(seen.cut + seen.outside, 0);
    assert_true(saw(&seen, "pair 0 (dims 0, 2): 1 rad/position"));
    assert_true(saw(&seen, "pair 1 (dims 1, 3): 0.01 rad/position"));
    assert_true(saw(&seen, "dims 4\xe2\x80\x93" "15: not rotated"));
    part.rotary = 5; /* half a pair */
    c = canvas_new(300, 300);
    assert_int_equal(ts_render_rope(c.cr, c.area, &part), TS_ERR_ARG);
    canvas_free(&c);
}

/* A small model of today's blocks traced by hand: 4 query heads reading 2
 * key/value heads, RoPE on 4 of 16 dims (rotate-half; `interleaved_q_rot`
 * writes q_rot turned the other way, a trace the config does not describe),
 * an RMSNorm. */
static void write_modern_trace(const char *path, bool interleaved_q_rot) {
    enum { H = 4, KV = 2, S = 4, HD = 16, D = 64, R = 4 };
    static float q[H * S * HD], qr[H * S * HD], v[KV * S * HD], w[H * S * S], in[S * D], rms[S], y[S * D], g[D], out[S * D];
    lcg_state = 7;
    for (int k = 0; k < H * S * HD; k++) q[k] = lcg_unit() * 2 - 1;
    for (int k = 0; k < KV * S * HD; k++) v[k] = lcg_unit() * 2 - 1;
    for (int h = 0; h < H; h++)
        for (int p = 0; p < S; p++) {
            const float *a = q + (h * S + p) * HD;
            float *b = qr + (h * S + p) * HD;
            memcpy(b, a, sizeof(float) * HD);
            for (int i = 0; i < R / 2; i++) {
                int lo = interleaved_q_rot ? 2 * i : i, hi = interleaved_q_rot ? 2 * i + 1 : i + R / 2;
                double ang = p * pow(10000, -2.0 * i / R);
                b[lo] = (float)(a[lo] * cos(ang) - a[hi] * sin(ang));
                b[hi] = (float)(a[hi] * cos(ang) + a[lo] * sin(ang));
            }
        }
    for (int k = 0; k < H * S * S; k++) w[k] = lcg_unit();
    softmax_rows(w, H * S, S);
    for (int k = 0; k < S * D; k++) in[k] = (lcg_unit() * 2 - 1) * 3;
    for (int d = 0; d < D; d++) g[d] = 0.5f + lcg_unit();
    for (int p = 0; p < S; p++) {
        double sq = 0;
        for (int d = 0; d < D; d++) sq += in[p * D + d] * in[p * D + d];
        rms[p] = (float)sqrt(sq / D + 1e-5);
        for (int d = 0; d < D; d++) y[p * D + d] = in[p * D + d] / rms[p], out[p * D + d] = y[p * D + d] * g[d];
    }
    const char *config = "{\"heads\": 4, \"d_model\": 64, \"kv_heads\": 2, \"head_dim\": 16, \"pe\": \"rope\", "
                         "\"rope_style\": \"half\", \"rotary_pct\": 0.25, \"rope_theta\": 10000, \"norm_kind\": \"rms\"}";
    ts_trace_options opt;
    ts_trace_options_default(&opt);
    opt.level = TS_TRACE_VALUES;
    char *meta = NULL;
    assert_ok(ts_trace_metadata_build(&meta, config, tokens, 4, NULL, 0, 0, NULL));
    ts_trace_writer *wr;
    assert_ok(ts_trace_writer_open(path, meta, &opt, &wr));
    free(meta);
    ts_tensor t;
    const char *n = "decoder.layers.0.";
    char name[96];
#define STEP(leaf, op, tag, data, rank, ...)                                             \
    do {                                                                                 \
        assert_ok(ts_tensor_view(&t, data, rank, (int64_t[]){__VA_ARGS__}));            \
        snprintf(name, sizeof name, "%s%s", n, leaf);                                    \
        assert_ok(ts_trace_writer_step(wr, name, op, &t, tag));                           \
    } while (0)
    STEP("norm1.in", TS_OP_INPUT, TS_TAG_NORM_IN, in, 3, 1, S, D);
    STEP("norm1.rms", TS_OP_RMS, TS_TAG_NORM_STAT, rms, 3, 1, S, 1);
    STEP("norm1.y", TS_OP_RMS, TS_TAG_PLAIN, y, 3, 1, S, D);
    STEP("norm1.gamma", TS_OP_PARAM, TS_TAG_PARAM, g, 1, D);
    STEP("norm1.out", TS_OP_RMS, TS_TAG_NORM_OUT, out, 3, 1, S, D);
    STEP("self_attn.q", TS_OP_PERMUTE, TS_TAG_HEADS, q, 4, 1, H, S, HD);
    STEP("self_attn.q_rot", TS_OP_ROPE, TS_TAG_HEADS, qr, 4, 1, H, S, HD);
    STEP("self_attn.v", TS_OP_CHUNK, TS_TAG_HEADS, v, 4, 1, KV, S, HD);
    STEP("self_attn.weights", TS_OP_SOFTMAX, TS_TAG_ATTN_WEIGHTS, w, 4, 1, H, S, S);
#undef STEP
    assert_ok(ts_trace_writer_close(wr, NULL));
}

static void scene_draws_todays_blocks(void **state) {
    (void)state;
    char dir[] = "/tmp/tscope-scene-XXXXXX", path[96];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/modern.tstrace", dir);
    for (int planted = 0; planted < 2; planted++) {
        write_modern_trace(path, planted);
        ts_trace *t;
        assert_ok(ts_trace_open(path, &t));
        ts_scene *sc;
        static text_seen seen;
        /* q_rot: the RoPE view, from the config, checked against the trace's own turning */
        ts_scene_request rq = ts_scene_request_default("decoder.layers.0.self_attn.q_rot");
        assert_ok(ts_scene_build(&sc, t, &rq));
        assert_string_equal(ts_scene_view_name(sc), "rope");
        draw_seen(sc, &seen);
        assert_true(saw(&seen, "pair 1 (dims 1, 3): 0.01 rad/position"));
        assert_true(saw(&seen, "dims 4\xe2\x80\x93" "15: not rotated"));
        assert_true(saw(&seen, planted ? "Not this trace's turning" : "Checked on this trace"));
        assert_false(saw(&seen, planted ? "Checked on this trace" : "Not this trace's turning"));
        /* the same distance gives the same score, as printed */
        const char *a = line_with(&seen, "(i, j) = (5, 2)"), *b = line_with(&seen, "(i, j) = (21, 18)");
        assert_true(a[0] && b[0]);
        assert_string_equal(strrchr(a, ':'), strrchr(b, ':'));
        ts_scene_free(sc);
        /* --view rope on another step of the same model */
        rq = ts_scene_request_default("decoder.layers.0.self_attn.q");
        rq.view = TS_RENDER_VIEW_ROPE;
        assert_ok(ts_scene_build(&sc, t, &rq));
        ts_scene_free(sc);
        if (planted) {
            ts_trace_close(t);
            continue;
        }
        /* the norm: RMS statistics, no beta */
        rq = ts_scene_request_default("decoder.layers.0.norm1.out");
        assert_ok(ts_scene_build(&sc, t, &rq));
        assert_string_equal(ts_scene_view_name(sc), "stats");
        draw_seen(sc, &seen);
        assert_true(saw(&seen, "RMSNorm over d_model = 64"));
        assert_true(saw(&seen, "RMS of each token"));
        assert_true(saw(&seen, "std of in (LayerNorm's)")); /* the same tokens without their mean */
        assert_true(saw(&seen, "a LayerNorm divides by the std"));
        assert_true(saw(&seen, "Learned scale \xce\xb3 (no \xce\xb2)"));
        assert_false(saw(&seen, "Std of each token"));
        ts_scene_free(sc);
        /* every head, grouped by the key/value head it reads */
        rq = ts_scene_request_default("decoder.layers.0.self_attn.weights");
        assert_ok(ts_scene_build(&sc, t, &rq));
        draw_seen(sc, &seen);
        assert_true(saw(&seen, "kv 0 \xc2\xb7 heads 0, 1"));
        assert_true(saw(&seen, "kv 1 \xc2\xb7 heads 2, 3"));
        ts_scene_free(sc);
        rq.head = 3;
        assert_ok(ts_scene_build(&sc, t, &rq));
        draw_seen(sc, &seen);
        assert_true(saw(&seen, "head 3 of 4 (reads kv head 1)"));
        ts_scene_free(sc);
        /* a key/value head says who reads it */
        rq = ts_scene_request_default("decoder.layers.0.self_attn.v");
        rq.head = 1;
        assert_ok(ts_scene_build(&sc, t, &rq));
        draw_seen(sc, &seen);
        assert_true(saw(&seen, "kv head 1 of 2, read by query heads 2 and 3"));
        ts_scene_free(sc);
        /* every key/value head: each panel names the query heads that read it */
        rq = ts_scene_request_default("decoder.layers.0.self_attn.v");
        rq.view = TS_RENDER_VIEW_GRID;
        assert_ok(ts_scene_build(&sc, t, &rq));
        draw_seen(sc, &seen);
        assert_true(saw(&seen, "all 2 key/value heads of layer 0"));
        assert_true(saw(&seen, "kv 1 \xc2\xb7 heads 2, 3"));
        assert_false(saw(&seen, "head 1"));
        ts_scene_free(sc);
        ts_trace_close(t);
    }
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(colormap_ends_match_the_tables),
        cmocka_unit_test(viridis_lut_rises_in_luminance),
        cmocka_unit_test(numbers_read_like_a_person_writes_them),
        cmocka_unit_test(auto_scale_follows_the_sign),
        cmocka_unit_test(stats_and_histogram_count_everything),
        cmocka_unit_test(views_by_name),
        cmocka_unit_test(colorbar_is_monotone_for_viridis),
        cmocka_unit_test(masked_cell_differs_from_a_zero),
        cmocka_unit_test(scene_draws_padded_query_rows_as_padding),
        cmocka_unit_test(long_sequence_shows_every_row),
        cmocka_unit_test(narrow_lens_shows_the_last_positions),
        cmocka_unit_test(masked_lens_has_its_own_caption),
        cmocka_unit_test(hit_test_finds_the_cell),
        cmocka_unit_test(bad_input_is_an_error),
        cmocka_unit_test(png_unpremultiplies),
        cmocka_unit_test(png_round_trip),
        cmocka_unit_test(png_unwritable_path_fails_before_drawing),
        cmocka_unit_test(golden_attention_heatmap),
        cmocka_unit_test(golden_causal_mask),
        cmocka_unit_test(golden_head_grid),
        cmocka_unit_test(golden_pe_curves),
        cmocka_unit_test(golden_layernorm),
        cmocka_unit_test(golden_shapes),
        cmocka_unit_test(golden_tensor),
        cmocka_unit_test(golden_training),
        cmocka_unit_test(shape_flow_links_the_real_inputs),
        cmocka_unit_test(plot_draws_its_level_line),
        cmocka_unit_test(scene_picks_the_view_and_finds_the_mask),
        cmocka_unit_test(scene_and_page_name_a_damaged_helper_step),
        cmocka_unit_test(scene_without_values_says_how_to_rerun),
        cmocka_unit_test(rope_view_turns_as_the_forward),
        cmocka_unit_test(scene_draws_todays_blocks),
        cmocka_unit_test(clipped_text_is_recorded),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    ts_render_release_fonts();
    return failed;
}
