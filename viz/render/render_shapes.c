/* render_shapes: the steps of a module as a flow of boxes, each with its
 * shape, the way the seeds print `qkv.size(): torch.Size([30, 200, 1536])`
 * after every line, but drawn: a dim that changed from the step before is
 * marked, so reshapes and permutes show where the numbers move. */
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

static bool is_param(const ts_render_step *s) { return s->op && strcmp(s->op, "parameter") == 0; }

/* The step whose shape step i is compared with: the previous one on the
 * data path. Parameters (gamma, beta) sit beside the path, so they are
 * neither marked nor compared with. */
static const ts_render_step *flow_before(const ts_render_step *steps, int i) {
    if (is_param(&steps[i])) return NULL;
    for (int k = i - 1; k >= 0; k--)
        if (!is_param(&steps[k])) return &steps[k];
    return NULL;
}

typedef struct box_fonts {
    ts_render__font name, op, shape;
} box_fonts;

static box_fonts fonts_at(double k) {
    box_fonts f = {
        ts_render__font_of(12.5 * k, TS_RENDER__BOLD, ts_render__ink),
        ts_render__font_of(10.5 * k, 0, ts_render__muted),
        ts_render__font_of(12.5 * k, TS_RENDER__MONO | TS_RENDER__MARKUP, ts_render__ink),
    };
    return f;
}

static void arrow_head(cairo_t *cr, double x, double y) {
    cairo_move_to(cr, x, y);
    cairo_line_to(cr, x - 4, y - 6);
    cairo_line_to(cr, x + 4, y - 6);
    cairo_close_path(cr);
    cairo_fill(cr);
}

ts_status ts_render_shapes(cairo_t *cr, ts_render_rect area, const ts_render_step *steps, int n,
                           const char *title, const char *subtitle) {
    if (!steps || n < 1) return ts_fail(TS_ERR_ARG, "render: no steps to draw");
    size_t prefix = common_prefix(steps, n);
    char title_buf[160];
    if (!title) {
        snprintf(title_buf, sizeof title_buf, "%.*s", prefix > 0 ? (int)prefix - 1 : 0, steps[0].name);
        title = prefix > 0 ? title_buf : "Shapes";
    }
    char sub_buf[200];
    if (!subtitle) {
        snprintf(sub_buf, sizeof sub_buf, "%d steps in order; red: a dim that changed from the step before", n);
        subtitle = sub_buf;
    }
    ts_render__pen pen;
    ts_render__pen_init(&pen, cr);
    ts_render_clear(cr, area);
    const double pad = TS_RENDER__PAD, gap_y = 18, gap_x = 44;
    double top = area.y + ts_render__title(&pen, area, title, subtitle);
    double avail_w = area.w - 2 * pad, avail_h = area.y + area.h - pad - top;

    /* Shrink the text (to 70%) when the boxes do not fit the area. */
    box_fonts f = fonts_at(1);
    double box_w = 0, box_h = 0, name_h = 0, op_h = 0;
    int per_col = 1, cols = 1;
    char markup[512];
    for (double k = 1.0; k >= 0.69; k -= 0.1) {
        f = fonts_at(k);
        double name_w = 0, shape_w = 0;
        for (int i = 0; i < n; i++) {
            double w, w2;
            ts_render__measure(&pen, steps[i].name + prefix, &f.name, &w, &name_h);
            ts_render__measure(&pen, steps[i].op ? steps[i].op : "", &f.op, &w2, &op_h);
            name_w = fmax(name_w, fmax(w, w2));
            shape_markup(markup, sizeof markup, &steps[i], NULL);
            ts_render__measure(&pen, markup, &f.shape, &w, NULL);
            shape_w = fmax(shape_w, w);
        }
        box_w = 12 + name_w + 26 + shape_w + 12;
        box_h = name_h + op_h + 12;
        per_col = (int)((avail_h + gap_y) / (box_h + gap_y));
        if (per_col < 1) per_col = 1;
        cols = (n + per_col - 1) / per_col;
        if (cols * box_w + (cols - 1) * gap_x <= avail_w) break;
    }
    /* Room above the boxes for the connectors between columns. */
    if (cols > 1) {
        top += 10;
        avail_h -= 10;
        per_col = (int)((avail_h + gap_y) / (box_h + gap_y));
        if (per_col < 1) per_col = 1;
        cols = (n + per_col - 1) / per_col;
    }
    /* Balance the columns so the last is not a stub. */
    per_col = (n + cols - 1) / cols;
    double block_w = cols * box_w + (cols - 1) * gap_x;
    double x0 = area.x + pad + fmax(0, (avail_w - block_w) / 2);

    for (int i = 0; i < n; i++) {
        int c = i / per_col, r = i % per_col;
        double x = x0 + c * (box_w + gap_x), y = top + r * (box_h + gap_y);
        cairo_new_sub_path(cr);
        cairo_arc(cr, x + box_w - 6, y + 6, 6, -M_PI / 2, 0);
        cairo_arc(cr, x + box_w - 6, y + box_h - 6, 6, 0, M_PI / 2);
        cairo_arc(cr, x + 6, y + box_h - 6, 6, M_PI / 2, M_PI);
        cairo_arc(cr, x + 6, y + 6, 6, M_PI, 1.5 * M_PI);
        cairo_close_path(cr);
        cairo_set_source_rgb(cr, 0.955, 0.965, 0.985);
        cairo_fill_preserve(cr);
        cairo_set_source_rgb(cr, 0.60, 0.66, 0.78);
        cairo_set_line_width(cr, 1.2);
        cairo_stroke(cr);
        ts_render__text(&pen, steps[i].name + prefix, &f.name, x + 12, y + 6, 0, 0, 0);
        ts_render__text(&pen, steps[i].op ? steps[i].op : "", &f.op, x + 12, y + 6 + name_h, 0, 0, 0);
        shape_markup(markup, sizeof markup, &steps[i], flow_before(steps, i));
        ts_render__text(&pen, markup, &f.shape, x + box_w - 12, y + box_h / 2, 1, 0.5, 0);

        if (i + 1 == n) continue;
        cairo_set_source_rgb(cr, 0.45, 0.47, 0.55);
        cairo_set_line_width(cr, 1.4);
        double cx = x + box_w / 2;
        if (r + 1 < per_col) {
            cairo_move_to(cr, cx, y + box_h);
            cairo_line_to(cr, cx, y + box_h + gap_y - 2);
            cairo_stroke(cr);
            arrow_head(cr, cx, y + box_h + gap_y);
        } else {
            /* To the top of the next column, through the gap between them. */
            double mid = x + box_w + gap_x / 2, nx = cx + box_w + gap_x;
            cairo_move_to(cr, cx, y + box_h);
            cairo_line_to(cr, cx, y + box_h + 8);
            cairo_line_to(cr, mid, y + box_h + 8);
            cairo_line_to(cr, mid, top - 8);
            cairo_line_to(cr, nx, top - 8);
            cairo_line_to(cr, nx, top - 2);
            cairo_stroke(cr);
            arrow_head(cr, nx, top);
        }
    }
    ts_render__pen_free(&pen);
    cairo_status_t cs = cairo_status(cr);
    if (cs != CAIRO_STATUS_SUCCESS) return ts_fail(TS_ERR_ARG, "render: cairo: %s", cairo_status_to_string(cs));
    return TS_OK;
}
