/* svg_tips: a heatmap's cells read under the mouse in an SVG figure.
 *
 * A tooltip element per cell made a 64 x 64 head 530 KB of SVG, and a
 * trace's pages hundreds of megabytes. Instead each panel's visible cells go
 * into the figure once, as compact data (one JSON object per figure, in a
 * <script type="application/json">): where the panel's cells are, the row
 * and column labels, and the values as whole numbers of the panel's last
 * shown decimal (four significant digits of its largest |value|, the
 * precision the tooltip prints), masked cells left empty. A small script in
 * the figure (TIP_SCRIPT) reads it: under the mouse it frames the cell and
 * shows "head · row R 'a' · column C 'b': value" beside it, in the
 * standalone SVG, in an <object> and inlined in a page alike. A panel of
 * more than TIP_MAX_CELLS cells (64 x 64), or a figure whose panels together
 * have more than TIP_MAX_FIGURE, says so in a <title> instead. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "render_internal.h"

#define TIP_MAX_CELLS (64 * 64)
#define TIP_MAX_FIGURE (64 * 64) /* every panel of a figure together: a grid of heads says so, one head has them */
#define TIP_DIGITS 4             /* significant digits of a panel's largest |value| the tooltip shows */

/* The hover, one copy in each figure that has cells to read: it finds the
 * <svg> it sits in (document.currentScript) and that figure's data. */
static const char TIP_SCRIPT[] =
    "<script><![CDATA[\n"
    "(function () {\n"
    "  'use strict';\n"
    "  var me = document.currentScript, svg = me && me.closest ? me.closest('svg') : null;\n"
    "  if (!svg) return;\n"
    "  var NS = 'http://www.w3.org/2000/svg', data = JSON.parse(svg.querySelector('script.ts-cells').textContent);\n"
    "  var box = svg.querySelector('g.cells'), tip = document.createElementNS(NS, 'g');\n"
    "  var frame = document.createElementNS(NS, 'rect'), back = document.createElementNS(NS, 'rect');\n"
    "  var text = document.createElementNS(NS, 'text');\n"
    "  frame.setAttribute('fill', 'none'); frame.setAttribute('stroke', '#000'); frame.setAttribute('stroke-width', '1.5');\n"
    "  back.setAttribute('fill', '#fffff0'); back.setAttribute('stroke', '#5f6068');\n"
    "  text.setAttribute('fill', '#212126'); text.setAttribute('font-family', 'DejaVu Sans, sans-serif');\n"
    "  tip.setAttribute('class', 'tip'); tip.setAttribute('pointer-events', 'none'); tip.style.display = 'none';\n"
    "  box.appendChild(frame); tip.appendChild(back); tip.appendChild(text); svg.appendChild(tip);\n"
    "  frame.setAttribute('pointer-events', 'none');\n"
    "  function label(what, i, labels) { var l = labels && labels[i]; return what + ' ' + i + (l ? ' \\u2018' + l + '\\u2019' : ''); }\n"
    "  function value(p, s) {\n"
    "    if (s === '') return 'masked';\n"
    "    if (s === 'n') return 'NaN';\n"
    "    if (s === 'i' || s === '-i') return (s === 'i' ? '' : '\\u2212') + '\\u221e';\n"
    "    var v = Number(s) / Math.pow(10, p.d);\n"
    "    return v.toFixed(Math.max(0, p.d));\n"
    "  }\n"
    "  function at(e, el) { var q = svg.createSVGPoint(); q.x = e.clientX; q.y = e.clientY; return q.matrixTransform(el.getScreenCTM().inverse()); }\n"
    "  // the text of the cell under (x, y) in the cells' units, or null\n"
    "  function read(p, x, y) {\n"
    "    var c = Math.floor((x - p.x) / p.cw), r = Math.floor((y - p.y) / p.ch);\n"
    "    if (!(r >= 0 && r < p.rows && c >= 0 && c < p.cols)) return null;\n"
    "    if (!p.vs) p.vs = p.v.split(',');\n"
    "    var row = p.r0 + r, col = p.c0 + c;\n"
    "    return { r: r, c: c, text: (p.head ? p.head + ' \\u00b7 ' : '') + label('row', row, p.rl) + ' \\u00b7 ' +\n"
    "             label('column', col, p.cl) + ': ' + value(p, p.vs[r * p.cols + c]) };\n"
    "  }\n"
    "  function hide() { tip.style.display = 'none'; frame.style.display = 'none'; }\n"
    "  svg.tsCellText = function (panel, row, col) {\n"
    "    var p = data.panels[panel];\n"
    "    return p ? read(p, p.x + (col - p.c0 + 0.5) * p.cw, p.y + (row - p.r0 + 0.5) * p.ch) : null;\n"
    "  };\n"
    "  svg.addEventListener('mouseleave', hide);\n"
    "  svg.addEventListener('mousemove', function (e) {\n"
    "    var u = at(e, box), hit = null, p = null;\n"
    "    for (var i = 0; i < data.panels.length && !hit; i++) { p = data.panels[i]; hit = read(p, u.x, u.y); }\n"
    "    if (!hit) return hide();\n"
    "    frame.setAttribute('x', p.x + hit.c * p.cw); frame.setAttribute('y', p.y + hit.r * p.ch);\n"
    "    frame.setAttribute('width', p.cw); frame.setAttribute('height', p.ch); frame.style.display = '';\n"
    "    // 13 screen pixels whatever the figure's scale\n"
    "    var k = 1 / (svg.getScreenCTM().a || 1), m = at(e, svg), vb = svg.viewBox.baseVal;\n"
    "    text.setAttribute('font-size', 13 * k); text.textContent = hit.text;\n"
    "    tip.style.display = '';\n"
    "    var w = text.getComputedTextLength() + 12 * k, h = 20 * k, x = m.x + 14 * k, y = m.y + 18 * k;\n"
    "    if (vb && vb.width && x + w > vb.x + vb.width) x = Math.max(vb.x, m.x - 14 * k - w);\n"
    "    if (vb && vb.height && y + h > vb.y + vb.height) y = m.y - 8 * k - h;\n"
    "    back.setAttribute('x', x); back.setAttribute('y', y); back.setAttribute('width', w); back.setAttribute('height', h);\n"
    "    text.setAttribute('x', x + 6 * k); text.setAttribute('y', y + 14.5 * k);\n"
    "    tip.setAttribute('data-text', hit.text);\n"
    "  });\n"
    "})();\n"
    "]]></script>\n";

static void json_str(ts_text_buf *b, const char *s) {
    ts_text_buf_str(b, "\"");
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') ts_text_buf_printf(b, "\\%c", c);
        else if (c == '<') ts_text_buf_str(b, "\\u003c"); /* never "</script>" nor "]]>" */
        else if (c == '>') ts_text_buf_str(b, "\\u003e");
        else if (c == '&') ts_text_buf_str(b, "\\u0026");
        else if (c < 0x20) ts_text_buf_printf(b, "\\u%04x", c);
        else ts_text_buf_add(b, (const char *)&c, 1);
    }
    ts_text_buf_str(b, "\"");
}

static void json_labels(ts_text_buf *b, const char *key, const char *const *labels, int from, int n) {
    if (!labels) return;
    ts_text_buf_printf(b, ",\"%s\":{", key);
    bool first = true;
    for (int i = from; i < from + n; i++) {
        if (!labels[i] || !labels[i][0]) continue;
        ts_text_buf_printf(b, "%s\"%d\":", first ? "" : ",", i);
        json_str(b, labels[i]);
        first = false;
    }
    ts_text_buf_str(b, "}");
}

static float value_at(const ts_render_matrix *m, int r, int c) {
    int64_t rs = m->row_stride ? m->row_stride : m->cols, cs = m->col_stride ? m->col_stride : 1;
    return m->values[(int64_t)r * rs + (int64_t)c * cs];
}

static bool masked_at(const ts_render_matrix *m, int r, int c, float v) {
    return (m->mask && m->mask[(int64_t)r * m->cols + c]) || (isinf(v) && v < 0);
}

/* One panel's visible cells as data: geometry, labels, values. */
static void panel_data(ts_text_buf *b, const ts_render_cells *c, const ts_render_matrix *mat, const char *head) {
    int rows = c->rows, cols = c->cols;
    if (c->row0 + rows > mat->rows) rows = mat->rows - c->row0;
    if (c->col0 + cols > mat->cols) cols = mat->cols - c->col0;
    /* the decimals: TIP_DIGITS significant digits of the largest finite |value| shown */
    double amax = 0;
    for (int r = 0; r < rows; r++)
        for (int k = 0; k < cols; k++) {
            float v = value_at(mat, c->row0 + r, c->col0 + k);
            if (isfinite(v) && !masked_at(mat, c->row0 + r, c->col0 + k, v) && fabs(v) > amax) amax = fabs(v);
        }
    int d = amax > 0 ? TIP_DIGITS - 1 - (int)floor(log10(amax)) : TIP_DIGITS - 1;
    if (d > 12) d = 12;
    if (d < -12) d = -12;
    double unit = pow(10, d);
    ts_text_buf_printf(b, "{\"x\":%.3f,\"y\":%.3f,\"cw\":%.4f,\"ch\":%.4f,\"r0\":%d,\"c0\":%d,\"rows\":%d,\"cols\":%d,\"d\":%d",
                       c->grid.x, c->grid.y, c->cell_w, c->cell_h, c->row0, c->col0, rows, cols, d);
    if (head) {
        ts_text_buf_str(b, ",\"head\":");
        json_str(b, head);
    }
    json_labels(b, "rl", mat->row_labels, c->row0, rows);
    json_labels(b, "cl", mat->col_labels, c->col0, cols);
    ts_text_buf_str(b, ",\"v\":\"");
    for (int r = 0; r < rows; r++)
        for (int k = 0; k < cols; k++) {
            int row = c->row0 + r, col = c->col0 + k;
            float v = value_at(mat, row, col);
            if (r || k) ts_text_buf_str(b, ",");
            if (masked_at(mat, row, col, v)) continue; /* empty: masked */
            if (isnan(v)) ts_text_buf_str(b, "n");
            else if (isinf(v)) ts_text_buf_str(b, v > 0 ? "i" : "-i");
            else ts_text_buf_printf(b, "%.0f", round((double)v * unit) + 0.0); /* + 0.0: never "-0" */
        }
    ts_text_buf_str(b, "\"}");
}

void ts_render__svg_tips(cairo_t *cr, const ts_render_layout *l, const ts_render_matrix *const *m,
                         const char *const *panel_titles) {
    if (!ts_render_svg_recording(cr) || !l) return;
    ts_text_buf b = {0}, data = {0};
    cairo_matrix_t t;
    cairo_get_matrix(cr, &t);
    ts_text_buf_printf(&b, "<g class=\"cells\" fill=\"#000\" fill-opacity=\"0\" transform=\"matrix(%.6g %.6g %.6g %.6g %.3f %.3f)\">\n",
                       t.xx, t.yx, t.xy, t.yy, t.x0, t.y0);
    long total = 0;
    for (int p = 0; p < l->n_panels; p++) total += (long)l->panel[p].rows * l->panel[p].cols;
    int n_data = 0;
    for (int p = 0; p < l->n_panels; p++) {
        const ts_render_cells *c = &l->panel[p];
        const ts_render_matrix *mat = m[p];
        if (!mat || c->rows <= 0 || c->cols <= 0 || c->row0 >= mat->rows || c->col0 >= mat->cols) continue;
        const char *head = panel_titles && panel_titles[p] ? panel_titles[p] : NULL;
        if ((long)c->rows * c->cols > TIP_MAX_CELLS || total > TIP_MAX_FIGURE) {
            ts_text_buf_printf(&b, "<rect class=\"panel\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\"><title>",
                               c->grid.x, c->grid.y, c->grid.w, c->grid.h);
            if (head) {
                ts_render_svg_escape(&b, head, (size_t)-1);
                ts_text_buf_str(&b, ": ");
            }
            if (total > TIP_MAX_FIGURE && (long)c->rows * c->cols <= TIP_MAX_CELLS)
                ts_text_buf_printf(&b, "%d panels of %d x %d cells, too many to read each under the mouse (one "
                                       "panel of up to 64 x 64 has them: pick one head); tscope view shows every "
                                       "cell's value</title></rect>\n",
                                   l->n_panels, c->total_rows, c->total_cols);
            else
                ts_text_buf_printf(&b, "%d x %d cells, too many to read each under the mouse (up to 64 x 64 can "
                                       "be); tscope view shows every cell's value</title></rect>\n",
                                   c->total_rows, c->total_cols);
            continue;
        }
        /* the panel catches the mouse; the script reads its cells from the data */
        ts_text_buf_printf(&b, "<rect class=\"panel data\" data-panel=\"%d\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\"/>\n",
                           n_data, c->grid.x, c->grid.y, c->grid.w, c->grid.h);
        ts_text_buf_str(&data, n_data ? ",\n" : "");
        panel_data(&data, c, mat, head);
        n_data++;
    }
    ts_text_buf_str(&b, "</g>\n");
    if (n_data) {
        ts_text_buf_str(&b, "<script type=\"application/json\" class=\"ts-cells\">{\"panels\":[");
        if (data.s) ts_text_buf_str(&b, data.s);
        ts_text_buf_str(&b, "]}</script>\n");
        ts_text_buf_str(&b, TIP_SCRIPT);
    }
    if (!b.oom && !data.oom) ts_render_svg_add(cr, b.s);
    free(b.s);
    free(data.s);
}
