/* svg_tips: a heatmap's cells as tooltips in an SVG figure.
 *
 * Over each visible cell of a panel an invisible <rect> carries a <title>:
 * row and column (with their tokens when the matrix has labels) and the
 * exact value, so a browser shows what the viewer's hover shows. A panel
 * of more than TIP_MAX_CELLS cells (64 x 64) gets one title saying that it
 * has too many for a tooltip each, which keeps a large figure light. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "render_internal.h"

#define TIP_MAX_CELLS (64 * 64)
#define TIP_MAX_FIGURE (64 * 64) /* every panel of a figure together: a grid of heads says so, one head has them */

static void label(ts_text_buf *b, const char *what, int i, const char *const *labels) {
    ts_text_buf_printf(b, "%s %d", what, i);
    if (labels && labels[i] && labels[i][0]) {
        ts_text_buf_str(b, " \xe2\x80\x98");
        ts_render_svg_escape(b, labels[i], (size_t)-1);
        ts_text_buf_str(b, "\xe2\x80\x99");
    }
}

static float value_at(const ts_render_matrix *m, int r, int c) {
    int64_t rs = m->row_stride ? m->row_stride : m->cols, cs = m->col_stride ? m->col_stride : 1;
    return m->values[(int64_t)r * rs + (int64_t)c * cs];
}

void ts_render__svg_tips(cairo_t *cr, const ts_render_layout *l, const ts_render_matrix *const *m,
                         const char *const *panel_titles) {
    if (!ts_render_svg_recording(cr) || !l) return;
    ts_text_buf b = {0};
    cairo_matrix_t t;
    cairo_get_matrix(cr, &t);
    ts_text_buf_printf(&b, "<g class=\"cells\" fill=\"#000\" fill-opacity=\"0\" transform=\"matrix(%.6g %.6g %.6g %.6g %.3f %.3f)\">\n",
                       t.xx, t.yx, t.xy, t.yy, t.x0, t.y0);
    long total = 0;
    for (int p = 0; p < l->n_panels; p++) total += (long)l->panel[p].rows * l->panel[p].cols;
    for (int p = 0; p < l->n_panels; p++) {
        const ts_render_cells *c = &l->panel[p];
        const ts_render_matrix *mat = m[p];
        if (!mat || c->rows <= 0 || c->cols <= 0) continue;
        const char *head = panel_titles && panel_titles[p] ? panel_titles[p] : NULL;
        if ((long)c->rows * c->cols > TIP_MAX_CELLS || total > TIP_MAX_FIGURE) {
            ts_text_buf_printf(&b, "<rect class=\"panel\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\"><title>",
                               c->grid.x, c->grid.y, c->grid.w, c->grid.h);
            if (head) {
                ts_render_svg_escape(&b, head, (size_t)-1);
                ts_text_buf_str(&b, ": ");
            }
            if (total > TIP_MAX_FIGURE && (long)c->rows * c->cols <= TIP_MAX_CELLS)
                ts_text_buf_printf(&b, "%d panels of %d x %d cells, too many for a tooltip each (one panel of up "
                                       "to 64 x 64 has them: pick one head); tscope view shows every cell's value"
                                       "</title></rect>\n",
                                   l->n_panels, c->total_rows, c->total_cols);
            else
                ts_text_buf_printf(&b, "%d x %d cells, too many for a tooltip each (up to 64 x 64 have one); "
                                       "tscope view shows every cell's value</title></rect>\n",
                                   c->total_rows, c->total_cols);
            continue;
        }
        for (int r = 0; r < c->rows; r++)
            for (int k = 0; k < c->cols; k++) {
                int row = c->row0 + r, col = c->col0 + k;
                if (row >= mat->rows || col >= mat->cols) continue;
                ts_text_buf_printf(&b, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\"><title>",
                                   c->grid.x + k * c->cell_w, c->grid.y + r * c->cell_h, c->cell_w, c->cell_h);
                if (head) {
                    ts_render_svg_escape(&b, head, (size_t)-1);
                    ts_text_buf_str(&b, " \xc2\xb7 ");
                }
                label(&b, "row", row, mat->row_labels);
                ts_text_buf_str(&b, " \xc2\xb7 ");
                label(&b, "column", col, mat->col_labels);
                float v = value_at(mat, row, col);
                bool masked = (mat->mask && mat->mask[(int64_t)row * mat->cols + col]) || (isinf(v) && v < 0);
                if (masked) ts_text_buf_str(&b, ": masked");
                else if (isnan(v)) ts_text_buf_str(&b, ": NaN");
                else ts_text_buf_printf(&b, ": %.6g", (double)v);
                ts_text_buf_str(&b, "</title></rect>\n");
            }
    }
    ts_text_buf_str(&b, "</g>\n");
    if (!b.oom) ts_render_svg_add(cr, b.s);
    free(b.s);
}
