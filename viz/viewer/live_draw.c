/* live_draw: a live session's frame, painted from its state alone: the
 * fields across the top, the viewer's picture of the step on screen (with
 * the heads knocked out struck through), the next-token panel on the right.
 * The session (live.c) changes the state; nothing here does. */
#include <glib.h>
#include <math.h>
#include <pango/pangocairo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "live_internal.h"

/* Knocked-out heads of the grid on screen, struck through. */
static void strike_knocked(const ts_live *l, cairo_t *cr) {
    char module[NAME_MAX_LEN], spec[NAME_MAX_LEN + 16];
    if (!l->n_knocked || !live_head_grid_module(l, module, sizeof module)) return;
    for (int i = 0; i < l->frame.layout.n_panels; i++) {
        if (l->frame.panel_head[i] < 0) continue;
        snprintf(spec, sizeof spec, "%s.head%d", module, l->frame.panel_head[i]);
        if (live_knocked_index(l, spec) < 0) continue;
        ts_render_rect g = l->frame.layout.panel[i].grid;
        g.y += l->field_h;
        cairo_save(cr);
        cairo_set_source_rgba(cr, 1, 1, 1, 0.55);
        cairo_rectangle(cr, g.x, g.y, g.w, g.h);
        cairo_fill(cr);
        cairo_set_source_rgb(cr, 0.84, 0.15, 0.16);
        cairo_set_line_width(cr, 4);
        cairo_move_to(cr, g.x, g.y);
        cairo_line_to(cr, g.x + g.w, g.y + g.h);
        cairo_move_to(cr, g.x + g.w, g.y);
        cairo_line_to(cr, g.x, g.y + g.h);
        cairo_stroke(cr);
        cairo_restore(cr);
        ts_window_text(cr, "<b>knocked out</b>", 15, false, g.x + g.w / 2, g.y + g.h / 2, 0.5, 0.7, 0.1, 0.1, 0);
    }
}

/* ---- drawing ------------------------------------------------------------------ */

ts_render_rect live_bar_rect(const ts_live *l, int i) {
    double row_h = 30, cy = l->field_h + 66 + i * row_h + row_h / 2; /* as draw_panel places its rows */
    return (ts_render_rect){l->w - PANEL_W + 8, cy - row_h / 2, PANEL_W - 16, row_h};
}

/* A field's text as markup: what the model does not read grey, left-out
 * tokens red; a line break shows as "↵" before it breaks the line, a tab as
 * "⇥" in its place, so what Tab or Enter typed is seen. */
static const char RETURN_MARK[] = "\xe2\x86\xb5", TAB_MARK[] = "\xe2\x87\xa5"; /* ↵ ⇥ */

static char *field_markup(const live_field *f) {
    GString *s = g_string_new(NULL);
    for (size_t i = 0; i < f->len;) {
        size_t n = live_char_len(f->text + i, f->len - i);
        char *esc = f->text[i] == '\t' ? g_strdup(TAB_MARK) : g_markup_escape_text(f->text + i, (gssize)n);
        if (f->text[i] == '\n') g_string_append_printf(s, "<span foreground=\"#9aa3ad\">%s</span>", RETURN_MARK);
        if (f->bad && f->bad[i])
            g_string_append_printf(s, "<span foreground=\"#d62728\" underline=\"error\">%s</span>", esc);
        else if (i < f->read_from || i >= f->read_to)
            g_string_append_printf(s, "<span foreground=\"#9aa3ad\">%s</span>", esc);
        else
            g_string_append(s, esc);
        g_free(esc);
        i += n;
    }
    return g_string_free(s, FALSE);
}

/* Byte `at` of the field's text in the layout's text: each mark adds its bytes. */
static int shown_index(const live_field *f, size_t at) {
    size_t extra = 0;
    for (size_t i = 0; i < at && i < f->len; i++) {
        if (f->text[i] == '\n') extra += sizeof RETURN_MARK - 1;
        if (f->text[i] == '\t') extra += sizeof TAB_MARK - 2;
    }
    return (int)(at + extra);
}

/* One field's box at y, its label on the left; the cursor when it has the
 * keys. A language model's field wraps its text over three lines and
 * scrolls by lines; an encoder-decoder's one-line fields scroll sideways. */
static void draw_one_field(const ts_live *l, cairo_t *cr, const live_field *f, const char *label, double y, bool focused) {
    double x0 = 80, box_w = l->w - x0 - 14, bh = box_h(l);
    bool wrap = !l->seq2seq;
    ts_window_text(cr, label, 13, false, 14, y + 16, 0, 0.35, 0.38, 0.42, 0);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_rectangle(cr, x0, y, box_w, bh);
    cairo_fill_preserve(cr);
    if (focused) cairo_set_source_rgb(cr, 0.1, 0.35, 0.8);
    else cairo_set_source_rgb(cr, 0.55, 0.6, 0.68);
    cairo_set_line_width(cr, focused && l->seq2seq ? 2 : 1);
    cairo_stroke(cr);
    /* the text, scrolled so the cursor stays in the box */
    PangoLayout *lay = ts_render_text_layout(cr);
    PangoFontDescription *fd = pango_font_description_from_string("DejaVu Sans Mono");
    pango_font_description_set_absolute_size(fd, 17 * PANGO_SCALE);
    pango_layout_set_font_description(lay, fd);
    if (wrap) {
        pango_layout_set_width(lay, (int)((box_w - 16) * PANGO_SCALE));
        pango_layout_set_wrap(lay, PANGO_WRAP_CHAR);
    }
    char *markup = field_markup(f);
    pango_layout_set_markup(lay, markup, -1);
    g_free(markup);
    PangoRectangle cur, edge;
    pango_layout_index_to_pos(lay, shown_index(f, f->cursor), &cur);
    double cx = cur.x / (double)PANGO_SCALE, cy = cur.y / (double)PANGO_SCALE, ch = cur.height / (double)PANGO_SCALE;
    double shift = !wrap && cx > box_w - 24 ? cx - (box_w - 24) : 0;
    /* the cursor's line kept in the box, scrolled by whole lines so none is cut in half */
    int fit = ch > 0 ? (int)((bh - 8) / ch) : 1, line = ch > 0 ? (int)lround(cy / ch) : 0;
    double rise = wrap && line >= fit ? (line - fit + 1) * ch : 0;
    cairo_save(cr);
    cairo_rectangle(cr, x0 + 1, y + 1, box_w - 2, bh - 2);
    cairo_clip(cr);
    cairo_set_source_rgb(cr, 0.1, 0.12, 0.15);
    cairo_move_to(cr, x0 + 8 - shift, y + 5 - rise);
    ts_render_show_layout(cr, lay);
    if (focused) { /* the cursor */
        cairo_set_source_rgb(cr, 0.1, 0.35, 0.8);
        if (wrap) cairo_rectangle(cr, x0 + 8 + cx, y + 5 - rise + cy, 2, ch);
        else cairo_rectangle(cr, x0 + 8 - shift + cx, y + 4, 2, BOX_H - 8);
        cairo_fill(cr);
    }
    /* where what the model reads starts (a slid window) or ends (a full encoder) */
    size_t marks[2] = {f->read_from, f->read_to};
    for (int k = 0; k < 2; k++) {
        if (k == 0 ? marks[0] == 0 : marks[1] >= f->len) continue;
        pango_layout_index_to_pos(lay, shown_index(f, marks[k]), &edge);
        double wx = x0 + 8 - shift + edge.x / (double)PANGO_SCALE;
        cairo_set_source_rgb(cr, 1.0, 0.5, 0.05);
        if (wrap) cairo_rectangle(cr, wx - 2, y + 5 - rise + edge.y / (double)PANGO_SCALE, 3, edge.height / (double)PANGO_SCALE);
        else cairo_rectangle(cr, wx - 2, y + 1, 3, BOX_H - 2);
        cairo_fill(cr);
    }
    cairo_restore(cr);
    pango_font_description_free(fd);
    g_object_unref(lay);
}

/* What the model reads, for the status line. */
static void reading(const ts_live *l, char *buf, size_t cap) {
    if (l->seq2seq) {
        int S = l->m->cfg.seq, T = l->m->T;
        snprintf(buf, cap, "the encoder reads &lt;bos&gt; and %d of %d words; the decoder &lt;bos&gt; and %d of %d",
                 l->s2s.n_src > 0 ? l->s2s.n_src - 1 : 0, S - 1, l->s2s.n_tgt > 0 ? l->s2s.n_tgt - 1 : 0, T - 1);
        return;
    }
    int n_tok = l->n_all - l->first;
    snprintf(buf, cap, "%d token%s to the model (of %d it can read)", n_tok, n_tok == 1 ? "" : "s", l->capacity);
}

static void draw_field(const ts_live *l, cairo_t *cr) {
    cairo_set_source_rgb(cr, 0.96, 0.97, 0.98);
    cairo_rectangle(cr, 0, 0, l->w, l->field_h);
    cairo_fill(cr);
    if (l->seq2seq) {
        draw_one_field(l, cr, &l->field[LIVE_SOURCE], "<b>source</b>", box_y(LIVE_SOURCE), l->focus == LIVE_SOURCE);
        draw_one_field(l, cr, &l->field[LIVE_TARGET], "<b>target</b>", box_y(LIVE_TARGET), l->focus == LIVE_TARGET);
    } else {
        draw_one_field(l, cr, &l->field[LIVE_SOURCE], "<b>text</b>", box_y(LIVE_SOURCE), true);
    }
    char line[800], what[200];
    reading(l, what, sizeof what);
    char *note = g_markup_escape_text(l->note, -1);
    snprintf(line, sizeof line, "%s%s%s%s", what, l->note[0] ? "   <span foreground=\"#c0580a\">" : "", note,
             l->note[0] ? "</span>" : "");
    g_free(note);
    double y = l->field_h - 18;
    ts_window_text(cr, line, 12.5, false, 80, y, 0, 0.35, 0.38, 0.42, l->w - 80 - 300);
    snprintf(line, sizeof line, "pass %.1f ms · frame %.1f ms", l->model_ms, l->draw_ms);
    ts_window_text(cr, line, 12, false, l->w - 14, y, 1, 0.5, 0.54, 0.6, 0);
}

static void draw_panel(const ts_live *l, cairo_t *cr) {
    double x0 = l->w - PANEL_W, y = l->field_h;
    cairo_set_source_rgb(cr, 0.985, 0.985, 0.99);
    cairo_rectangle(cr, x0, y, PANEL_W, l->h - y);
    cairo_fill(cr);
    cairo_set_source_rgb(cr, 0.82, 0.84, 0.87);
    cairo_rectangle(cr, x0, y, 1, l->h - y);
    cairo_fill(cr);
    ts_window_text(cr, "<b>next token</b>", 15, false, x0 + 16, y + 22, 0, 0.12, 0.14, 0.18, 0);
    char buf[600];
    if (l->top_k > 0) snprintf(buf, sizeof buf, "temperature %.2g · top-k %d", l->temperature, l->top_k);
    else snprintf(buf, sizeof buf, "temperature %.2g · every token", l->temperature);
    ts_window_text(cr, buf, 12, false, x0 + 16, y + 44, 0, 0.4, 0.44, 0.5, 0);
    double row_h = 30, label_w = 78, bar_x = x0 + 16 + label_w, bar_w = PANEL_W - label_w - 80;
    y += 66;
    if (l->n_top == 0)
        ts_window_text(cr, l->seq2seq ? "type a source sentence" : "type a few characters", 13, false, x0 + 16, y + 10,
                       0, 0.45, 0.48, 0.52, 0);
    bool knocked = l->n_knocked > 0;
    if (knocked) bar_w -= 34; /* room for "0.982→0.000" */
    for (int i = 0; i < l->n_top; i++) {
        char label[64];
        float p = l->probs[l->top[i]];
        live_token_label(l, l->top[i], label, sizeof label);
        char *esc = g_markup_escape_text(label, -1);
        snprintf(buf, sizeof buf, "%s", esc);
        g_free(esc);
        double cy = y + i * row_h + row_h / 2;
        ts_window_text(cr, buf, 15, l->top[i] == live_best_token(l), bar_x - 10, cy, 1, 0.1, 0.12, 0.15, label_w - 4);
        cairo_set_source_rgb(cr, 0.9, 0.91, 0.93);
        cairo_rectangle(cr, bar_x, cy - 9, bar_w, 18);
        cairo_fill(cr);
        if (knocked) { /* before (grey, above) and after (blue, below), side by side */
            cairo_set_source_rgb(cr, 0.62, 0.64, 0.68);
            cairo_rectangle(cr, bar_x, cy - 9, bar_w * l->before[l->top[i]], 8);
            cairo_fill(cr);
            cairo_set_source_rgb(cr, 0.13, 0.4, 0.75);
            cairo_rectangle(cr, bar_x, cy + 1, bar_w * p, 8);
            cairo_fill(cr);
            snprintf(buf, sizeof buf, "%.3f\xe2\x86\x92%.3f", l->before[l->top[i]], p);
            ts_window_text(cr, buf, 11, false, x0 + PANEL_W - 8, cy, 1, 0.2, 0.22, 0.26, 0);
        } else {
            cairo_set_source_rgb(cr, i == 0 ? 0.13 : 0.3, i == 0 ? 0.4 : 0.55, i == 0 ? 0.75 : 0.85);
            cairo_rectangle(cr, bar_x, cy - 9, bar_w * p, 18);
            cairo_fill(cr);
            snprintf(buf, sizeof buf, "%.3f", p);
            ts_window_text(cr, buf, 13, false, bar_x + bar_w + 8, cy, 0, 0.2, 0.22, 0.26, 0);
        }
    }
    y += TOP_N * row_h + 16;
    if (knocked) {
        char label[64], line[400];
        float b = 0, a = 0;
        int n = 0;
        for (int i = 0; i < l->n_knocked; i++)
            n += snprintf(line + n, sizeof line - (size_t)n, "%s%s", i ? ", " : "", strstr(l->knocked[i], "layers.") ? strstr(l->knocked[i], "layers.") : l->knocked[i]);
        ts_window_text(cr, "<b>knocked out</b> (grey before, blue after)", 12.5, false, x0 + 16, y, 0, 0.7, 0.1, 0.1, 0);
        char *esc = g_markup_escape_text(line, -1);
        ts_window_text(cr, esc, 11.5, false, x0 + 16, y + 18, 0, 0.35, 0.38, 0.42, PANEL_W - 28);
        g_free(esc);
        if (ts_live_change(l, &b, &a, label, sizeof label) >= 0) {
            char *lab = g_markup_escape_text(label, -1);
            snprintf(line, sizeof line, "largest change: <b>%s</b> %.3f \xe2\x86\x92 %.3f (%+.3f)", lab, b, a, a - b);
            g_free(lab);
            ts_window_text(cr, line, 12.5, false, x0 + 16, y + 38, 0, 0.1, 0.12, 0.15, 0);
        }
        y += 58;
    }
    const char *keys = l->seq2seq ? "Tab: one greedy step (the top word to the target)\nclick a bar: append that word\n"
                                    "click a field: type in it\n"
                                  : "Tab: append the top token\nclick a bar: append that token\n";
    snprintf(buf, sizeof buf, "%sclick a head of a grid: knock it out (again: back)\n"
             "\xe2\x86\x90 \xe2\x86\x92 cursor · \xe2\x86\x91 \xe2\x86\x93 step · PgUp/PgDn layer\nCtrl+1..9: one head · Ctrl+0: all heads\nCtrl+L: logit lens (again: back)\nCtrl+G: every head, lens, loss strip · Esc quit",
             keys);
    ts_window_text(cr, buf, 12, false, x0 + 16, y + 40, 0, 0.4, 0.44, 0.5, 0);
}

ts_status ts_live_draw(ts_live *l, cairo_t *cr) {
    double t0 = live_now_ms();
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    ts_status st = TS_OK;
    if (l->views) { /* the web page's views, through the canvas's cairo backend */
        cairo_save(cr);
        cairo_translate(cr, 0, l->field_h);
        cairo_rectangle(cr, 0, 0, l->w - PANEL_W, l->h - l->field_h);
        cairo_clip(cr);
        int H = l->m->cfg.heads;
        ts_live_views v = ts_live_views_of(l->sess, l->views_focus < 0 ? -1 : l->views_focus / H,
                                           l->views_focus < 0 ? 0 : l->views_focus % H);
        ts_canvas_cairo(&l->canvas, cr);
        ts_live_views_draw(&l->canvas, &v, l->w - PANEL_W, l->h - l->field_h);
        cairo_restore(cr);
    } else if (l->have_state) {
        cairo_save(cr);
        cairo_translate(cr, 0, l->field_h);
        cairo_rectangle(cr, 0, 0, l->w - PANEL_W, l->h - l->field_h);
        cairo_clip(cr);
        st = ts_view_draw(cr, &l->st, &l->steps, l->trace, &l->frame);
        cairo_restore(cr);
    } else {
        ts_window_text(cr, "Type a sentence: every step of the model is drawn here as you type.", 16, false,
             (l->w - PANEL_W) / 2, l->field_h + (l->h - l->field_h) / 2, 0.5, 0.4, 0.44, 0.5, 0);
    }
    if (!l->views) strike_knocked(l, cr);
    draw_panel(l, cr);
    draw_field(l, cr);
    l->draw_ms = live_now_ms() - t0;
    return st;
}

ts_status ts_live_draw_offscreen(ts_live *l) {
    if (!l->offscreen) {
        l->offscreen = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, (int)l->w, (int)l->h);
        if (cairo_surface_status(l->offscreen)) {
            cairo_surface_destroy(l->offscreen);
            l->offscreen = NULL;
            return ts_fail(TS_ERR_NOMEM, "live: no memory for a %.0f x %.0f frame", l->w, l->h);
        }
    }
    cairo_t *cr = cairo_create(l->offscreen);
    ts_status st = ts_live_draw(l, cr);
    cairo_destroy(cr);
    cairo_surface_flush(l->offscreen);
    return st;
}
