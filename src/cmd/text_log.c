/* text_log: TSCOPE_TEXT_LOG=FILE makes the drawing commands append one line
 * per text they draw (render.h, "text probe"): its font size and line height
 * in device pixels, where it starts, and the text. tests/readability_test.sh
 * reads it to check that no view or lesson page draws text too small to read.
 *
 *     12.50 14.55 1023.4 88.0 head 0
 */
#include "text_log.h"

#include <stdio.h>
#include <stdlib.h>

#include "tscope/render.h"

static FILE *log_file;

static void log_text(void *ctx, const ts_render_text_info *t) {
    FILE *f = ctx;
    fprintf(f, "%.2f %.2f %.1f %.1f ", t->font_px, t->line_px, t->x, t->y);
    for (const char *c = t->text; *c; c++) fputc(*c == '\n' || *c == '\t' ? ' ' : *c, f);
    fputc('\n', f);
}

void ts_text_log_begin(void) {
    const char *path = getenv("TSCOPE_TEXT_LOG");
    if (!path || !*path) return;
    log_file = fopen(path, "a");
    if (!log_file) {
        fprintf(stderr, "tscope: cannot append to TSCOPE_TEXT_LOG=%s; no text log\n", path);
        return;
    }
    ts_render_set_text_probe(log_text, log_file);
}

void ts_text_log_end(void) {
    if (!log_file) return;
    ts_render_set_text_probe(NULL, NULL);
    fclose(log_file);
    log_file = NULL;
}
