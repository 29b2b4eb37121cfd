/* text_log: how the drawing commands report their text.
 *
 * TSCOPE_CLIPS=error makes a figure with a text it could not draw whole
 * (shortened, overlapping another, cut off: render.h) an error; the tests set
 * it. Otherwise such a figure is written with a warning on stderr.
 *
 * TSCOPE_TEXT_LOG=FILE makes the drawing commands append one line
 * per text they draw (render.h, "text probe"): its font size and line height
 * in device pixels, where it starts, and the text. tests/readability_test.sh
 * reads it to check that no view or lesson page draws text too small to read.
 *
 *     12.50 14.55 1023.4 88.0 head 0
 */
#include "text_log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/render.h"

static FILE *log_file;

static void log_text(void *ctx, const ts_render_text_info *t) {
    FILE *f = ctx;
    fprintf(f, "%.2f %.2f %.1f %.1f ", t->font_px, t->line_px, t->x, t->y);
    for (const char *c = t->text; *c; c++) fputc(*c == '\n' || *c == '\t' ? ' ' : *c, f);
    fputc('\n', f);
}

static void warn_clips(const char *what, int n, const char *desc) {
    fprintf(stderr, "tscope: warning: %s: %d text%s not drawn whole: %s\n", what, n, n == 1 ? "" : "s", desc);
}

void ts_text_log_begin(void) {
    const char *clips = getenv("TSCOPE_CLIPS");
    ts_render_set_clip_policy(clips && strcmp(clips, "error") == 0 ? TS_RENDER_CLIPS_FAIL : TS_RENDER_CLIPS_WARN,
                              warn_clips);
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
