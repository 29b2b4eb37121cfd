/* render_common: text, numbers, ticks, colour bars, histograms and the data
 * helpers every view shares. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render_internal.h"

const ts_rgb ts_render__ink = {0.13f, 0.13f, 0.15f};
const ts_rgb ts_render__muted = {0.40f, 0.40f, 0.44f};
const ts_rgb ts_render__faint = {0.89f, 0.89f, 0.91f};
const ts_rgb ts_render__paper = {1.0f, 1.0f, 1.0f};

static char font_family[128] = "DejaVu Sans";

void ts_render_set_font(const char *family) {
    snprintf(font_family, sizeof font_family, "%s", family && *family ? family : "DejaVu Sans");
}

const char *ts_render__family(void) { return font_family; }

static double font_scale = 1;

void ts_render_set_font_scale(double scale) { font_scale = scale >= 0.5 && scale <= 4 ? scale : 1; }

static double min_text = 0; /* device units; 0: no floor */

void ts_render_set_min_text(double size) { min_text = size > 0 && size <= 72 ? size : 0; }

double ts_render_min_text(void) { return min_text; }

double ts_render_font_scale(void) { return font_scale; }

void ts_render_release_fonts(void) {
    /* Not cairo_debug_reset_static_data(): it asserts that no font is alive,
     * and pango's font map can still be held, for a moment, by the thread
     * that loads fontconfig's configuration; under load the process then
     * aborted at exit (1 run in 30). What cairo keeps is reachable from its
     * statics, which leak checkers do not report. */
    pango_cairo_font_map_set_default(NULL);
}

void ts_render__set_rgb(cairo_t *cr, ts_rgb c) { cairo_set_source_rgb(cr, c.r, c.g, c.b); }

void ts_render_clear(cairo_t *cr, ts_render_rect area) {
    cairo_save(cr);
    ts_render__set_rgb(cr, ts_render__paper);
    cairo_rectangle(cr, area.x, area.y, area.w, area.h);
    cairo_fill(cr);
    cairo_restore(cr);
}

ts_rgb ts_render__palette(int i) {
    /* matplotlib's tab10: distinct hues that survive projection on a slide. */
    static const ts_rgb tab10[10] = {
        {0.122f, 0.467f, 0.706f}, {1.000f, 0.498f, 0.055f}, {0.173f, 0.627f, 0.173f},
        {0.839f, 0.153f, 0.157f}, {0.580f, 0.404f, 0.741f}, {0.549f, 0.337f, 0.294f},
        {0.890f, 0.467f, 0.761f}, {0.498f, 0.498f, 0.498f}, {0.737f, 0.741f, 0.133f},
        {0.090f, 0.745f, 0.812f},
    };
    if (i < 0) i = -i;
    return tab10[i % 10];
}

ts_render__font ts_render__font_of(double size, int style, ts_rgb color) {
    ts_render__font f = {size, style, color, 0, 0};
    return f;
}

/* ---- text ---------------------------------------------------------------- */

/* Unhinted outlines at fractional positions: text measures and looks the
 * same at any scale and on every surface (image, SVG, PDF), which golden
 * images and the SVG/PDF-against-PNG test rely on. */
static void set_font_options(PangoContext *pc) {
    cairo_font_options_t *fo = cairo_font_options_create();
    cairo_font_options_set_antialias(fo, CAIRO_ANTIALIAS_GRAY);
    cairo_font_options_set_hint_style(fo, CAIRO_HINT_STYLE_NONE);
    cairo_font_options_set_hint_metrics(fo, CAIRO_HINT_METRICS_OFF);
    pango_cairo_context_set_font_options(pc, fo);
    cairo_font_options_destroy(fo);
#if PANGO_VERSION_CHECK(1, 44, 0)
    pango_context_set_round_glyph_positions(pc, FALSE);
#endif
}

void ts_render__pen_init(ts_render__pen *p, cairo_t *cr) {
    p->cr = cr;
    p->pc = pango_cairo_create_context(cr);
    set_font_options(p->pc);
    p->layout = pango_layout_new(p->pc);
}

PangoLayout *ts_render_text_layout(cairo_t *cr) {
    PangoContext *pc = pango_cairo_create_context(cr);
    set_font_options(pc);
    PangoLayout *layout = pango_layout_new(pc);
    g_object_unref(pc); /* the layout keeps its context */
    return layout;
}

/* ---- the text probe --------------------------------------------------------- */

static ts_render_text_probe probe_fn;
static void *probe_ctx;

void ts_render_set_text_probe(ts_render_text_probe fn, void *ctx) {
    probe_fn = fn;
    probe_ctx = ctx;
}

void ts_render_get_text_probe(ts_render_text_probe *fn, void **ctx) {
    *fn = probe_fn;
    *ctx = probe_ctx;
}

/* What the probe sees of a layout about to be shown at the current point:
 * the smallest font any of its runs uses (markup can change sizes) and the
 * smallest logical line height, both in device pixels (user units times the
 * context's scale), from pango's own run and line extents. */
static void probe_layout(cairo_t *cr, PangoLayout *layout) {
    const char *text = pango_layout_get_text(layout);
    if (!text || !*text) return;
    double font = INFINITY, line = INFINITY;
    PangoLayoutIter *it = pango_layout_get_iter(layout);
    do {
        PangoLayoutRun *run = pango_layout_iter_get_run_readonly(it);
        if (run && run->item && run->item->analysis.font && run->glyphs && run->glyphs->num_glyphs > 0) {
            PangoFontDescription *fd = pango_font_describe_with_absolute_size(run->item->analysis.font);
            font = fmin(font, (double)pango_font_description_get_size(fd) / PANGO_SCALE);
            pango_font_description_free(fd);
        }
    } while (pango_layout_iter_next_run(it));
    pango_layout_iter_free(it);
    it = pango_layout_get_iter(layout);
    do {
        PangoRectangle logical;
        pango_layout_iter_get_line_extents(it, NULL, &logical);
        if (logical.height > 0) line = fmin(line, (double)logical.height / PANGO_SCALE);
    } while (pango_layout_iter_next_line(it));
    pango_layout_iter_free(it);
    if (!isfinite(font)) return; /* nothing visible (all spaces) */
    cairo_matrix_t m;
    cairo_get_matrix(cr, &m);
    double k = sqrt(fabs(m.xx * m.yy - m.xy * m.yx));
    double ux = 0, uy = 0;
    if (cairo_has_current_point(cr)) cairo_get_current_point(cr, &ux, &uy);
    PangoRectangle ext;
    pango_layout_get_extents(layout, NULL, &ext);
    /* where the layout's box lands on the device: its corners through the matrix (a turned label too) */
    double x0 = INFINITY, y0 = INFINITY, x1 = -INFINITY, y1 = -INFINITY;
    for (int c = 0; c < 4; c++) {
        double x = ux + (c & 1 ? (double)ext.width / PANGO_SCALE : 0), y = uy + (c & 2 ? (double)ext.height / PANGO_SCALE : 0);
        cairo_user_to_device(cr, &x, &y);
        x0 = fmin(x0, x), y0 = fmin(y0, y), x1 = fmax(x1, x), y1 = fmax(y1, y);
    }
    ts_render_text_info info = {text, font * k, (isfinite(line) ? line : font) * k, x0, y0, x1 - x0, y1 - y0,
                                pango_layout_is_ellipsized(layout) != 0};
    probe_fn(probe_ctx, &info);
}

void ts_render_show_layout(cairo_t *cr, PangoLayout *layout) {
    if (probe_fn) probe_layout(cr, layout);
    ts_render__clips_see(cr, layout); /* shortened, overlapping or cut off: recorded */
    if (ts_render__svg_text(cr, layout)) return; /* an SVG figure: real text */
    pango_cairo_show_layout(cr, layout);
}

void ts_render__pen_free(ts_render__pen *p) {
    if (p->layout) g_object_unref(p->layout);
    if (p->pc) g_object_unref(p->pc);
    p->layout = NULL;
    p->pc = NULL;
}

static void set_text(ts_render__pen *p, const char *text, const ts_render__font *f) {
    PangoFontDescription *d = pango_font_description_new();
    pango_font_description_set_family(d, (f->style & TS_RENDER__MONO) ? "DejaVu Sans Mono" : font_family);
    pango_font_description_set_weight(d, (f->style & TS_RENDER__BOLD) ? PANGO_WEIGHT_BOLD : PANGO_WEIGHT_NORMAL);
    pango_font_description_set_style(d, (f->style & TS_RENDER__ITALIC) ? PANGO_STYLE_ITALIC : PANGO_STYLE_NORMAL);
    /* the floor is on the device: a view drawn shrunk keeps its text at least min_text there */
    double size = f->size * font_scale, px = min_text > 0 ? ts_render__pixel(p->cr) : 0;
    if (min_text > 0 && size < min_text * px) size = min_text * px;
    pango_font_description_set_absolute_size(d, size * PANGO_SCALE);
    pango_layout_set_font_description(p->layout, d);
    pango_font_description_free(d);
    if (f->max_w > 0) {
        pango_layout_set_width(p->layout, (int)(f->max_w * PANGO_SCALE));
        pango_layout_set_ellipsize(p->layout, PANGO_ELLIPSIZE_END);
        /* wrapped onto max_lines lines before anything is cut */
        pango_layout_set_wrap(p->layout, PANGO_WRAP_WORD_CHAR);
        pango_layout_set_height(p->layout, f->max_lines > 1 ? -f->max_lines : -1);
    } else {
        pango_layout_set_width(p->layout, -1);
        pango_layout_set_height(p->layout, -1);
        pango_layout_set_ellipsize(p->layout, PANGO_ELLIPSIZE_NONE);
    }
    if (f->style & TS_RENDER__MARKUP)
        pango_layout_set_markup(p->layout, text, -1);
    else {
        pango_layout_set_attributes(p->layout, NULL);
        pango_layout_set_text(p->layout, text, -1);
    }
}

void ts_render__measure(ts_render__pen *p, const char *text, const ts_render__font *f, double *w,
                        double *h) {
    set_text(p, text, f);
    PangoRectangle logical;
    pango_layout_get_extents(p->layout, NULL, &logical);
    if (w) *w = (double)logical.width / PANGO_SCALE;
    if (h) *h = (double)logical.height / PANGO_SCALE;
}

void ts_render__text(ts_render__pen *p, const char *text, const ts_render__font *f, double x, double y,
                     double ax, double ay, double angle) {
    if (!text || !*text) return;
    double w, h;
    ts_render__measure(p, text, f, &w, &h);
    cairo_t *cr = p->cr;
    cairo_save(cr);
    cairo_translate(cr, x, y);
    if (angle != 0) cairo_rotate(cr, angle);
    cairo_move_to(cr, -ax * w, -ay * h);
    ts_render__set_rgb(cr, f->color);
    ts_render_show_layout(cr, p->layout);
    cairo_new_path(cr);
    cairo_restore(cr);
}

double ts_render__title(ts_render__pen *p, ts_render_rect area, const char *title, const char *subtitle) {
    if (!title && !subtitle) return 0;
    double y = area.y + TS_RENDER__PAD, h;
    double max_w = area.w - 2 * TS_RENDER__PAD;
    if (title) { /* a long title (an edited run's) wraps rather than lose its end, even in a narrow panel */
        ts_render__font f = ts_render__font_of(TS_RENDER__TITLE_SIZE, TS_RENDER__BOLD, ts_render__ink);
        f.max_w = max_w;
        f.max_lines = 6;
        ts_render__measure(p, title, &f, NULL, &h);
        ts_render__text(p, title, &f, area.x + TS_RENDER__PAD, y, 0, 0, 0);
        y += h + 2;
    }
    if (subtitle) {
        ts_render__font f = ts_render__font_of(TS_RENDER__SUBTITLE_SIZE, 0, ts_render__muted);
        f.max_w = max_w;
        f.max_lines = 3;
        ts_render__measure(p, subtitle, &f, NULL, &h);
        ts_render__text(p, subtitle, &f, area.x + TS_RENDER__PAD, y, 0, 0, 0);
        y += h;
    }
    return y + 8 - area.y;
}

/* ---- numbers ------------------------------------------------------------- */

/* Replace an ASCII '-' at the start with U+2212 (a minus as wide as a plus). */
static void real_minus(char *buf, size_t size) {
    size_t len = strlen(buf);
    if (len == 0 || buf[0] != '-' || len + 3 > size) return;
    memmove(buf + 3, buf + 1, len);
    memcpy(buf, "\xe2\x88\x92", 3);
}

/* "4e-04" -> "4e-4", "1.5e+05" -> "1.5e5": exponents as people write them. */
static void tidy_exponent(char *buf) {
    char *e = strchr(buf, 'e');
    if (!e) return;
    char *src = e + 1, *dst = e + 1;
    if (*src == '+') src++;
    else if (*src == '-') *dst++ = *src++;
    while (*src == '0' && src[1]) src++;
    memmove(dst, src, strlen(src) + 1);
}

void ts_render__fmt(char *buf, size_t size, double v, double step) {
    if (isnan(v)) {
        snprintf(buf, size, "NaN");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, size, v < 0 ? "\xe2\x88\x92\xe2\x88\x9e" : "\xe2\x88\x9e");
        return;
    }
    double a = fabs(v);
    if (a == 0) {
        snprintf(buf, size, "0");
        return;
    }
    int dec;
    if (step > 0) {
        double big = fmax(a, step);
        if (big >= 1e5 || step < 1e-4) {
            snprintf(buf, size, "%.2g", v);
            tidy_exponent(buf);
            real_minus(buf, size);
            return;
        }
        dec = (int)ceil(-log10(step) - 1e-9);
        if (dec < 0) dec = 0;
        if (dec > 6) dec = 6;
    } else {
        if (a >= 1e5 || a < 1e-3) {
            snprintf(buf, size, "%.0e", v);
            tidy_exponent(buf);
            real_minus(buf, size);
            return;
        }
        dec = a >= 100 ? 0 : a >= 10 ? 1 : a >= 0.01 ? 2 : 3;
    }
    snprintf(buf, size, "%.*f", dec, v);
    /* "-0.00": rounding ate the value; no sign on a zero. */
    if (buf[0] == '-' && strspn(buf + 1, "0.") == strlen(buf + 1)) memmove(buf, buf + 1, strlen(buf));
    real_minus(buf, size);
}

void ts_render__fmt_short(char *buf, size_t size, double v) {
    snprintf(buf, size, "%g", v);
    tidy_exponent(buf);
    real_minus(buf, size);
}

static int ticks_once(double lo, double hi, int max_n, double *ticks, double *step_out);

int ts_render__ticks(double lo, double hi, int max_n, double *ticks, double *step_out) {
    /* An axis with one labelled tick says nothing about its scale: ask for
     * finer steps until there are two (at most 12 ticks). */
    int n = ticks_once(lo, hi, max_n, ticks, step_out);
    for (int more = max_n + 1; n < 2 && more <= 12 && hi > lo; more++) n = ticks_once(lo, hi, more, ticks, step_out);
    return n;
}

static int ticks_once(double lo, double hi, int max_n, double *ticks, double *step_out) {
    if (max_n < 2) max_n = 2;
    if (!(hi > lo) || !isfinite(lo) || !isfinite(hi)) {
        ticks[0] = isfinite(lo) ? lo : 0;
        *step_out = 0;
        return 1;
    }
    /* The finest 1-2-5 step that gives at most max_n ticks. */
    double mag = pow(10, floor(log10((hi - lo) / max_n)));
    static const double nice[] = {1, 2, 5, 10, 20, 50, 100};
    double step = 100 * mag;
    for (size_t k = 0; k < sizeof nice / sizeof nice[0]; k++) {
        double st = nice[k] * mag;
        double count = floor(hi / st + 1e-9) - ceil(lo / st - 1e-9) + 1;
        if (count <= max_n) {
            step = st;
            break;
        }
    }
    double first = ceil(lo / step - 1e-9) * step;
    int n = 0;
    for (int i = 0; n < max_n + 1; i++) {
        double v = first + i * step;
        if (v > hi + step * 1e-9) break;
        ticks[n++] = fabs(v) < step * 1e-9 ? 0 : v;
    }
    *step_out = step;
    return n;
}

double ts_render__pixel(cairo_t *cr) {
    double dx = 1, dy = 0;
    cairo_user_to_device_distance(cr, &dx, &dy);
    double len = hypot(dx, dy);
    return len > 0 ? 1.0 / len : 1.0;
}

double ts_render__snap(cairo_t *cr, double len) {
    double px = ts_render__pixel(cr);
    double n = floor(len / px + 1e-6);
    return (n < 1 ? 1 : n) * px;
}

int ts_render__label_step(double spacing, double need) {
    /* every 2nd, 3rd or 4th before every 5th: as many labels as fit */
    static const int base[] = {1, 2, 3, 4, 5, 10, 20, 25, 50};
    if (!(spacing > 0)) return 1 << 30;
    for (long mult = 1; mult < 100000000L; mult *= 100)
        for (size_t i = 0; i < sizeof base / sizeof base[0]; i++)
            if ((double)(base[i] * mult) * spacing >= need) return (int)(base[i] * mult);
    return 1 << 30;
}

/* ---- scales, statistics, histograms --------------------------------------- */

double ts_render__scale_t(const ts_render_scale *s, double v) {
    double span = (double)s->vmax - (double)s->vmin;
    if (!(span > 0)) return 0.5;
    return (v - s->vmin) / span;
}

ts_render_scale ts_render_scale_auto(const ts_render_matrix *m, int n) {
    double lo = INFINITY, hi = -INFINITY;
    for (int k = 0; k < n; k++)
        for (int r = 0; r < m[k].rows; r++)
            for (int c = 0; c < m[k].cols; c++) {
                float v = ts_render__at(&m[k], r, c);
                if (!isfinite(v) || ts_render__masked(&m[k], r, c, v)) continue;
                if (v < lo) lo = v;
                if (v > hi) hi = v;
            }
    ts_render_scale s;
    if (!(lo <= hi)) {
        s.cmap = TS_CMAP_VIRIDIS;
        s.vmin = 0;
        s.vmax = 1;
    } else if (lo >= 0) {
        s.cmap = TS_CMAP_VIRIDIS;
        s.vmin = 0;
        s.vmax = hi > 0 ? (float)hi : 1;
    } else {
        double a = fmax(-lo, hi);
        s.cmap = TS_CMAP_COOLWARM;
        s.vmin = (float)-a;
        s.vmax = (float)a;
    }
    return s;
}

void ts_render_mask_from_scores(unsigned char *mask, const float *scores, int64_t n) {
    for (int64_t i = 0; i < n; i++) mask[i] = isinf(scores[i]) && scores[i] < 0;
}

void ts_render_hist_compute(ts_render_hist *h, const float *values, int64_t n, int64_t stride,
                            int n_bins, double lo, double hi) {
    memset(h, 0, sizeof *h);
    if (n_bins < 1 || n_bins > TS_RENDER_HIST_BINS) n_bins = TS_RENDER_HIST_BINS;
    if (stride == 0) stride = 1;
    if (!(lo < hi)) {
        lo = INFINITY;
        hi = -INFINITY;
        for (int64_t i = 0; i < n; i++) {
            float v = values[i * stride];
            if (!isfinite(v)) continue;
            if (v < lo) lo = v;
            if (v > hi) hi = v;
        }
        if (!(lo <= hi)) lo = 0, hi = 1;
        if (lo == hi) lo -= 0.5, hi += 0.5;
    }
    h->n_bins = n_bins;
    h->lo = lo;
    h->hi = hi;
    double scale = n_bins / (hi - lo);
    for (int64_t i = 0; i < n; i++) {
        float v = values[i * stride];
        if (!isfinite(v) || v < lo || v > hi) continue;
        int b = (int)((v - lo) * scale);
        if (b >= n_bins) b = n_bins - 1;
        h->counts[b]++;
    }
}

/* ---- layouts and hit testing ---------------------------------------------- */

bool ts_render_hit(const ts_render_layout *l, double x, double y, int *panel, int *row, int *col) {
    for (int i = 0; i < l->n_panels; i++) {
        const ts_render_cells *c = &l->panel[i];
        if (x < c->grid.x || y < c->grid.y || x >= c->grid.x + c->grid.w || y >= c->grid.y + c->grid.h)
            continue;
        int cc = (int)((x - c->grid.x) / c->cell_w), rr = (int)((y - c->grid.y) / c->cell_h);
        if (cc >= c->cols) cc = c->cols - 1;
        if (rr >= c->rows) rr = c->rows - 1;
        if (panel) *panel = i;
        if (row) *row = c->row0 + rr;
        if (col) *col = c->col0 + cc;
        return true;
    }
    return false;
}

bool ts_render_cell_rect(const ts_render_layout *l, int panel, int row, int col, ts_render_rect *out) {
    if (panel < 0 || panel >= l->n_panels) return false;
    const ts_render_cells *c = &l->panel[panel];
    int rr = row - c->row0, cc = col - c->col0;
    if (rr < 0 || cc < 0 || rr >= c->rows || cc >= c->cols) return false;
    out->x = c->grid.x + cc * c->cell_w;
    out->y = c->grid.y + rr * c->cell_h;
    out->w = c->cell_w;
    out->h = c->cell_h;
    return true;
}

/* ---- view names ------------------------------------------------------------ */

#define TS_RENDER_VIEW_NAME(e, name) name,
static const char *const view_names[] = {TS_RENDER_VIEW_LIST(TS_RENDER_VIEW_NAME)};
#undef TS_RENDER_VIEW_NAME
_Static_assert(sizeof view_names / sizeof view_names[0] == TS_RENDER_VIEW_COUNT, "one name per view");

const char *ts_render_view_name(ts_render_view v) {
    return (unsigned)v < TS_RENDER_VIEW_COUNT ? view_names[v] : "?";
}

bool ts_render_view_from_name(const char *name, ts_render_view *out) {
    for (int i = 0; i < TS_RENDER_VIEW_COUNT; i++)
        if (strcmp(view_names[i], name) == 0) {
            *out = (ts_render_view)i;
            return true;
        }
    return false;
}

/* ---- colour bar, hatching, histogram ------------------------------------- */

#define BAR_W 14.0

void ts_render__hatch(cairo_t *cr, ts_render_rect r) {
    cairo_save(cr);
    cairo_rectangle(cr, r.x, r.y, r.w, r.h);
    cairo_clip(cr);
    cairo_set_source_rgb(cr, 0.92, 0.92, 0.92);
    cairo_paint(cr);
    cairo_set_source_rgb(cr, 0.60, 0.60, 0.62);
    cairo_set_line_width(cr, 1.2);
    for (double d = -r.h; d < r.w + r.h; d += 5.0) {
        cairo_move_to(cr, r.x + d, r.y + r.h);
        cairo_line_to(cr, r.x + d + r.h, r.y);
    }
    cairo_stroke(cr);
    cairo_restore(cr);
}

static int colorbar_ticks(const ts_render_scale *s, double bar_h, double *ticks, double *step) {
    int max_n = (int)(bar_h / 38);
    if (max_n < 2) max_n = 2;
    if (max_n > 11) max_n = 11;
    return ts_render__ticks(s->vmin, s->vmax, max_n, ticks, step);
}

/* The colour bar's words: what a colour means. */
static const char *bar_words(const char *label) { return label && label[0] ? label : "value"; }

double ts_render__colorbar_width(ts_render__pen *p, const ts_render_scale *s, const char *label) {
    double ticks[16], step, wmax = 0;
    int n = ts_render__ticks(s->vmin, s->vmax, 11, ticks, &step);
    ts_render__font f = ts_render__font_of(TS_RENDER__TICK_SIZE, 0, ts_render__ink);
    char buf[48];
    for (int i = 0; i < n; i++) {
        double w;
        ts_render__fmt(buf, sizeof buf, ticks[i], step);
        ts_render__measure(p, buf, &f, &w, NULL);
        wmax = fmax(wmax, w);
    }
    double masked_w, label_h;
    ts_render__measure(p, "masked", &f, &masked_w, NULL);
    ts_render__font lf = ts_render__font_of(TS_RENDER__TICK_SIZE, TS_RENDER__ITALIC, ts_render__muted);
    ts_render__measure(p, bar_words(label), &lf, NULL, &label_h);
    return BAR_W + 6 + fmax(wmax, masked_w) + 6 + label_h;
}

static void swatch_row(ts_render__pen *p, double x, double y, const char *label, int kind) {
    cairo_t *cr = p->cr;
    ts_render_rect sw = {x, y, BAR_W, 12};
    if (kind == 1) {
        ts_render__hatch(cr, sw);
    } else {
        cairo_set_source_rgb(cr, 1.0, 0.0, 1.0);
        cairo_rectangle(cr, sw.x, sw.y, sw.w, sw.h);
        cairo_fill(cr);
    }
    cairo_set_source_rgb(cr, 0.35, 0.35, 0.38);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, sw.x + 0.5, sw.y + 0.5, sw.w - 1, sw.h - 1);
    cairo_stroke(cr);
    ts_render__font f = ts_render__font_of(TS_RENDER__TICK_SIZE, 0, ts_render__ink);
    ts_render__text(p, label, &f, x + BAR_W + 6, y + 6, 0, 0.5, 0);
}

void ts_render__colorbar(ts_render__pen *p, ts_render_rect r, const ts_render_scale *s, int seen, const char *label) {
    cairo_t *cr = p->cr;
    double row = 18 * fmax(1, font_scale); /* a legend row: a swatch and its word */
    double legend_h = ((seen & 1) ? row : 0) + ((seen & 2) ? row : 0);
    double bar_h = r.h - legend_h - (legend_h > 0 ? 6 : 0);
    if (bar_h < 20) bar_h = fmax(r.h, 20), legend_h = 0;

    /* The gradient: one column of 256 colours, top = vmax. */
    uint32_t lut[TS_CMAP_LUT_SIZE];
    ts_cmap_lut(s->cmap, lut);
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, TS_CMAP_LUT_SIZE);
    unsigned char *data = cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img);
    cairo_surface_flush(img);
    for (int i = 0; i < TS_CMAP_LUT_SIZE; i++)
        *(uint32_t *)(void *)(data + (size_t)i * (size_t)stride) = lut[TS_CMAP_LUT_SIZE - 1 - i];
    cairo_surface_mark_dirty(img);
    cairo_save(cr);
    cairo_rectangle(cr, r.x, r.y, BAR_W, bar_h);
    cairo_clip(cr);
    cairo_translate(cr, r.x, r.y);
    cairo_scale(cr, BAR_W, bar_h / TS_CMAP_LUT_SIZE);
    cairo_set_source_surface(cr, img, 0, 0);
    cairo_pattern_set_extend(cairo_get_source(cr), CAIRO_EXTEND_PAD);
    cairo_paint(cr);
    cairo_restore(cr);
    cairo_surface_destroy(img);

    cairo_set_source_rgb(cr, 0.35, 0.35, 0.38);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, r.x + 0.5, r.y + 0.5, BAR_W - 1, bar_h - 1);
    cairo_stroke(cr);

    double ticks[16], step, tick_w = 0;
    int n = colorbar_ticks(s, bar_h, ticks, &step);
    ts_render__font f = ts_render__font_of(TS_RENDER__TICK_SIZE, 0, ts_render__ink);
    char buf[48];
    for (int i = 0; i < n; i++) {
        double w;
        ts_render__fmt(buf, sizeof buf, ticks[i], step);
        ts_render__measure(p, buf, &f, &w, NULL);
        tick_w = fmax(tick_w, w);
    }
    for (int i = 0; i < n; i++) {
        double t = ts_render__scale_t(s, ticks[i]);
        double y = r.y + bar_h - t * bar_h;
        cairo_set_source_rgb(cr, 0.35, 0.35, 0.38);
        cairo_move_to(cr, r.x + BAR_W, y);
        cairo_line_to(cr, r.x + BAR_W + 4, y);
        cairo_stroke(cr);
        ts_render__fmt(buf, sizeof buf, ticks[i], step);
        ts_render__text(p, buf, &f, r.x + BAR_W + 6, y, 0, 0.5, 0);
    }
    /* what the colours mean, turned along the right edge beside the tick labels */
    ts_render__font lf = ts_render__font_of(TS_RENDER__TICK_SIZE, TS_RENDER__ITALIC, ts_render__muted);
    lf.max_w = bar_h;
    double label_h;
    ts_render__measure(p, bar_words(label), &lf, NULL, &label_h);
    ts_render__text(p, bar_words(label), &lf, fmin(r.x + r.w, r.x + BAR_W + 6 + tick_w + 6 + label_h) - label_h / 2,
                    r.y + bar_h / 2, 0.5, 0.5, -M_PI / 2);
    double y = r.y + bar_h + 4 + row / 2 - 6; /* the swatch's centre half a row below the bar's "0" */
    if (seen & 1) {
        swatch_row(p, r.x, y, "masked", 1);
        y += row;
    }
    if (seen & 2) swatch_row(p, r.x, y, "NaN", 2);
}

double ts_render__caption(ts_render__pen *p, ts_render_rect r, const char *text) {
    if (!text) return 0;
    ts_render__font f = ts_render__font_of(TS_RENDER__LABEL_SIZE + 1, TS_RENDER__BOLD, ts_render__ink);
    f.max_w = r.w;
    f.max_lines = 2; /* a narrow panel's caption wraps once before it is cut */
    double h;
    ts_render__measure(p, text, &f, NULL, &h);
    ts_render__text(p, text, &f, r.x, r.y, 0, 0, 0);
    return h + 4;
}

double ts_render_caption_line(cairo_t *cr, ts_render_rect area, const char *text) {
    ts_render__pen p;
    ts_render__pen_init(&p, cr);
    double h = ts_render__caption(&p, area, text);
    ts_render__pen_free(&p);
    return h;
}

void ts_render__hist(ts_render__pen *p, ts_render_rect r, const ts_render_hist *h,
                     const ts_render_scale *s, const ts_rgb *color, const char *caption) {
    cairo_t *cr = p->cr;
    ts_render__font tf = ts_render__font_of(TS_RENDER__TICK_SIZE, 0, ts_render__muted);
    double cap_h = ts_render__caption(p, r, caption), tick_h;
    ts_render__measure(p, "0", &tf, NULL, &tick_h);
    ts_render_rect plot = {r.x + 4, r.y + cap_h + tick_h + 2, r.w - 8, r.h - cap_h - 2 * tick_h - 10};
    if (plot.h < 10 || plot.w < 10 || h->n_bins < 1) return;

    int64_t peak = 0, total = 0;
    for (int i = 0; i < h->n_bins; i++) {
        if (h->counts[i] > peak) peak = h->counts[i];
        total += h->counts[i];
    }
    char buf[64];
    snprintf(buf, sizeof buf, "%lld values, tallest bin %lld", (long long)total, (long long)peak);
    ts_render__font nf = tf;
    nf.max_w = plot.w + 4;
    double w;
    ts_render__measure(p, buf, &tf, &w, NULL);
    if (w > nf.max_w) snprintf(buf, sizeof buf, "%lld values", (long long)total); /* the tallest bin's count is the extra */
    ts_render__text(p, buf, &nf, plot.x, r.y + cap_h, 0, 0, 0);

    cairo_save(cr);
    ts_render__set_rgb(cr, (ts_rgb){0.975f, 0.975f, 0.98f});
    cairo_rectangle(cr, plot.x, plot.y, plot.w, plot.h);
    cairo_fill(cr);
    double bw = plot.w / h->n_bins;
    for (int i = 0; i < h->n_bins && peak > 0; i++) {
        if (!h->counts[i]) continue;
        /* A bin with a few values still shows: at least one pixel high. */
        double bh = fmax((double)h->counts[i] / (double)peak * plot.h, ts_render__pixel(cr));
        if (s) {
            double centre = h->lo + (i + 0.5) * (h->hi - h->lo) / h->n_bins;
            ts_render__set_rgb(cr, ts_cmap_eval(s->cmap, ts_render__scale_t(s, centre)));
        } else {
            ts_render__set_rgb(cr, color ? *color : ts_render__palette(0));
        }
        cairo_rectangle(cr, plot.x + i * bw, plot.y + plot.h - bh, fmax(bw - 0.5, 0.5), bh);
        cairo_fill(cr);
    }
    /* Zero, when it is inside the range: where signed data is centred. */
    if (h->lo < 0 && h->hi > 0) {
        double x0 = plot.x + (0 - h->lo) / (h->hi - h->lo) * plot.w;
        static const double dash[] = {3, 3};
        cairo_set_dash(cr, dash, 2, 0);
        cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
        cairo_set_line_width(cr, 1);
        cairo_move_to(cr, x0, plot.y);
        cairo_line_to(cr, x0, plot.y + plot.h);
        cairo_stroke(cr);
        cairo_set_dash(cr, NULL, 0, 0);
    }
    cairo_set_source_rgb(cr, 0.35, 0.35, 0.38);
    cairo_set_line_width(cr, 1);
    cairo_move_to(cr, plot.x, plot.y + plot.h + 0.5);
    cairo_line_to(cr, plot.x + plot.w, plot.y + plot.h + 0.5);
    cairo_stroke(cr);
    cairo_restore(cr);

    /* fewer ticks until their labels stand apart (large text on a narrow histogram) */
    double ticks[16], step;
    int n = 0;
    for (int max_n = plot.w > 240 ? 6 : 4; max_n >= 2; max_n--) {
        n = ts_render__ticks(h->lo, h->hi, max_n, ticks, &step);
        double widest = 0, tw;
        for (int i = 0; i < n; i++) {
            ts_render__fmt(buf, sizeof buf, ticks[i], step);
            ts_render__measure(p, buf, &tf, &tw, NULL);
            widest = fmax(widest, tw);
        }
        if (n < 2 || !(h->hi > h->lo) || step / (h->hi - h->lo) * plot.w >= widest + 4) break;
    }
    for (int i = 0; i < n; i++) {
        double x = plot.x + (ticks[i] - h->lo) / (h->hi - h->lo) * plot.w;
        cairo_set_source_rgb(cr, 0.35, 0.35, 0.38);
        cairo_move_to(cr, x, plot.y + plot.h);
        cairo_line_to(cr, x, plot.y + plot.h + 4);
        cairo_stroke(cr);
        ts_render__fmt(buf, sizeof buf, ticks[i], step);
        ts_render__text(p, buf, &tf, x, plot.y + plot.h + 5, 0.5, 0, 0);
    }
}

/* ---- figure furniture for slides ------------------------------------------ */

double ts_render_caption_block(cairo_t *cr, ts_render_rect area, const char *text, bool draw) {
    if (!text || !*text) return 0;
    ts_render__pen p;
    ts_render__pen_init(&p, cr);
    ts_render__font f = ts_render__font_of(TS_RENDER__SUBTITLE_SIZE + 1, 0, ts_render__ink);
    set_text(&p, text, &f);
    double w = area.w - 2 * TS_RENDER__PAD;
    pango_layout_set_width(p.layout, (int)(fmax(w, 40) * PANGO_SCALE));
    pango_layout_set_wrap(p.layout, PANGO_WRAP_WORD_CHAR);
    PangoRectangle logical;
    pango_layout_get_extents(p.layout, NULL, &logical);
    double h = (double)logical.height / PANGO_SCALE;
    if (draw) {
        cairo_save(cr);
        ts_render__set_rgb(cr, ts_render__faint);
        cairo_set_line_width(cr, 1);
        cairo_move_to(cr, area.x + TS_RENDER__PAD, round(area.y) + 0.5);
        cairo_line_to(cr, area.x + area.w - TS_RENDER__PAD, round(area.y) + 0.5);
        cairo_stroke(cr);
        cairo_move_to(cr, area.x + TS_RENDER__PAD, area.y + TS_RENDER__PAD * 0.6);
        ts_render__set_rgb(cr, ts_render__ink);
        ts_render_show_layout(cr, p.layout);
        cairo_new_path(cr);
        cairo_restore(cr);
    }
    ts_render__pen_free(&p);
    return h + TS_RENDER__PAD * 1.6;
}

ts_status ts_render_frame_cells(cairo_t *cr, const ts_render_layout *l, int row0, int row1, int col0, int col1) {
    if (!l || l->n_panels < 1)
        return ts_fail(TS_ERR_ARG, "--highlight frames cells; this view draws none (heatmaps and head grids do)");
    const ts_render_cells *c0 = &l->panel[0];
    if (row1 >= 1 << 30) row1 = c0->total_rows - 1; /* `*`: to the last */
    if (col1 >= 1 << 30) col1 = c0->total_cols - 1;
    if (row0 < 0 || col0 < 0 || row1 < row0 || col1 < col0 || row1 >= c0->total_rows || col1 >= c0->total_cols)
        return ts_fail(TS_ERR_ARG, "--highlight %d-%d,%d-%d: the cells are rows 0..%d and columns 0..%d", row0, row1, col0,
                       col1, c0->total_rows - 1, c0->total_cols - 1);
    double lw = fmax(2.5, ts_render__pixel(cr) * 3);
    for (int i = 0; i < l->n_panels; i++) {
        const ts_render_cells *c = &l->panel[i];
        /* the visible part of the range */
        int r0 = row0 > c->row0 ? row0 : c->row0, r1 = row1 < c->row0 + c->rows - 1 ? row1 : c->row0 + c->rows - 1;
        int k0 = col0 > c->col0 ? col0 : c->col0, k1 = col1 < c->col0 + c->cols - 1 ? col1 : c->col0 + c->cols - 1;
        if (r0 > r1 || k0 > k1) continue;
        double x = c->grid.x + (k0 - c->col0) * c->cell_w, y = c->grid.y + (r0 - c->row0) * c->cell_h;
        double w = (k1 - k0 + 1) * c->cell_w, h = (r1 - r0 + 1) * c->cell_h;
        cairo_save(cr);
        cairo_set_line_width(cr, lw);
        cairo_rectangle(cr, x - lw / 2, y - lw / 2, w + lw, h + lw); /* outside the cells: their colours stay seen */
        cairo_set_source_rgb(cr, 1, 1, 1);
        cairo_set_line_width(cr, lw + 2);
        cairo_stroke_preserve(cr);
        cairo_set_line_width(cr, lw);
        cairo_set_source_rgb(cr, 0.84, 0.15, 0.16);
        cairo_stroke(cr);
        cairo_restore(cr);
    }
    return TS_OK;
}

/* One end of a highlight: "4", "2-6", "*" (every one) of len bytes at s into
 * out[0..1] (first, last); false when it is none of these. */
bool ts_render_parse_range(const char *s, size_t len, int out[2]) {
    char buf[32];
    if (len == 0 || len >= sizeof buf) return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (strcmp(buf, "*") == 0) {
        out[0] = 0, out[1] = 1 << 30;
        return true;
    }
    int64_t a, b; /* read by type: a number past an int is refused, not wrapped */
    if (!ts_text_range(buf, 1 << 30, true, &a, &b)) return false;
    out[0] = (int)a, out[1] = (int)b;
    return true;
}
