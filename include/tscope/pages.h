/* pages: a lesson's steps drawn, one page a step, to PNG or in a window.
 *
 * A page is one step: its narration (Markdown through pango) beside its view
 * (ts_scene_draw, the code `tscope png` and the viewer use, plus a comparison
 * and highlights), with the step counter. `tscope lesson N --export DIR`
 * writes one PNG per page (viz/pages/lesson_export.c); the lesson mode of the
 * viewer (viz/pages/lesson_view.c) shows the same pages in a window.
 *
 *     ts_lesson_page *pg; ts_lesson_page_build(&pg, &run, step) ... ts_lesson_page_draw(pg, cr, w, h)
 */
#ifndef TSCOPE_PAGES_H
#define TSCOPE_PAGES_H

#include <cairo.h>
#include <stdbool.h>

#include "tscope/core.h"
#include "tscope/lesson.h"
#include "tscope/render.h"

/* ---- drawing one step -------------------------------------------------------- */

typedef struct ts_lesson_page ts_lesson_page;

/* A good page size in points for a lesson (every page has the same size). */
#define TS_LESSON_PAGE_W 1560
#define TS_LESSON_PAGE_H 900

/* Gather what page `step` (0-based) shows. The view and its comparison are
 * built from the traces of r, which must stay open while the page lives. */
ts_status ts_lesson_page_build(ts_lesson_page **out, const ts_lessonrun *r, int step);
void ts_lesson_page_free(ts_lesson_page *p); /* NULL is fine */

/* Draw the page into (0, 0, w, h) of cr: the header (lesson title, step
 * counter), the narration on the left, the view on the right. A view that
 * cannot be drawn as asked is drawn as much as it can, with a note saying
 * what was left out. */
ts_status ts_lesson_page_draw(ts_lesson_page *p, cairo_t *cr, double w, double h);

/* The page's view alone (and its comparison), on paper, into (0, 0, w, h):
 * the figure of a step on the lessons' web pages (tscope site). */
ts_status ts_lesson_page_draw_figure(ts_lesson_page *p, cairo_t *cr, double w, double h);

/* A text alternative of the figure, from what its views draw: each view's
 * kind, step name, op and shape, and what the page could not show. */
void ts_lesson_page_caption(const ts_lesson_page *p, char *buf, size_t cap);

/* What the page could not draw as the step asked ("" when nothing): for
 * messages and tests. */
const char *ts_lesson_page_note(const ts_lesson_page *p);

/* Every text the page's view draws (cell values, tick labels, legends, the
 * line above a comparison), one per line, without the narration; *out is
 * malloc'd. Drawn at `scale` pixels per point, as an export would be (a
 * cell too small for a readable number at that scale prints none). For
 * checking the numbers a narration quotes. */
ts_status ts_lesson_page_view_text(ts_lesson_page *p, double scale, char **out);

/* Every figure the narration of page `step` (0-based) quotes (the
 * introduction too, on the first: every number but a name's, a row's or
 * column's index and a formula's whole constants; lessons/README.md, "Quoted
 * numbers") must be drawn on the page as it is drawn at one pixel a point
 * (a drawn 0.953 shows a quoted 0.95), or be excused by its
 * `unchecked:` key with a reason; every row and column the narration names
 * by index must carry that index as a label; each figure of its `caption:`
 * must be an `expect:` figure; an `unchecked:` figure the narration does not
 * quote is stale. Otherwise "FILE:LINE: step N quotes 0.36, which ...".
 * With a sink every problem goes to it (and TS_OK); with NULL the first is
 * returned. ts_lesson_export checks every page before it writes any. */
ts_status ts_lesson_page_check_quotes(const ts_lessonrun *r, int step, ts_lesson_sink *sink);

/* Write every page of the run as DIR/stepNN.png, .svg or .pdf (a figure,
 * render.h: TS_LESSON_PAGE_W x _H points; a PNG at `scale` pixels per point),
 * each written atomically. `written` (may be NULL) gets the count. DIR is
 * created when missing (with its parents). */
ts_status ts_lesson_export(const ts_lessonrun *r, const char *dir, ts_figure_format format, double scale,
                           int *written);

/* A hand-out: every step of the run in ONE PDF, a page each, the view and its
 * narration together, sized to be read on paper (labels at least 8 points).
 * A4 and letter are portrait, the view above the narration; slides are 16:9,
 * the narration beside the view. Written atomically. */
typedef enum ts_lesson_handout {
    TS_LESSON_HANDOUT_A4,
    TS_LESSON_HANDOUT_LETTER,
    TS_LESSON_HANDOUT_SLIDES,
} ts_lesson_handout;

bool ts_lesson_handout_from_name(const char *name, ts_lesson_handout *out); /* "a4", "letter", "slides" */
/* One PDF, a page a step (and on portrait paper a page before them for a long
 * introduction); *pages, when not NULL, gets how many pages it wrote. */
ts_status ts_lesson_handout_write(const ts_lessonrun *r, const char *path, ts_lesson_handout paper, int *pages);
/* ---- the lessons as a web site (viz/pages/site.c) ---------------------------------- */

/* A static site: DIR/index.html (each lesson's title, first sentence and a
 * thumbnail), DIR/NN-name/stepKK.html (narration as HTML, math as MathML,
 * the figure as inline SVG with real text and cell tooltips), stepKK.svg,
 * thumb.png, and the shared style.css and site.js. Relative links only.
 *
 *     ts_site *s; ts_site_open(&s, dir); ts_site_add_lesson(s, &run) ...; ts_site_close(s);
 */
typedef struct ts_site ts_site;

/* Create DIR (with parents) and write the shared files. */
ts_status ts_site_open(ts_site **out, const char *dir);
/* The site's own title (the index's heading, every page's link home) and
 * footer, as plain text (escaped); NULL keeps tscope's. Before the lessons. */
ts_status ts_site_set_words(ts_site *s, const char *title, const char *footer);
/* Write every page of a lesson whose setups have run. */
ts_status ts_site_add_lesson(ts_site *s, const ts_lessonrun *r);
/* Write the index of the lessons added, and free s. */
ts_status ts_site_close(ts_site *s);
/* Free s without writing the index (after a failure). */
void ts_site_abort(ts_site *s);
/* Where the site takes the live page's WebAssembly build from ($TSCOPE_WASM,
 * else this tree's build/wasm/tscope-wasm.js, `make wasm`), and whether it is
 * there: without it live.html only says how to make it (viz/pages/site_live.c). */
const char *ts_site_live_wasm(void);
bool ts_site_live_available(void);

/* ---- a trace as a web page (viz/pages/trace_html.c) ---------------------------------- */

/* Write DIR/index.html, an explorer of trace t (opened from trace_path): the
 * steps as a tree folded by layer and module, a search box, the chosen step's
 * figure and statistics, batch and head choices where the view has them, a
 * training trace's snapshots on a slider. Figures are SVG files in DIR/s/,
 * one per step, record, batch and head, loaded by the page when shown.
 * `figures` (may be NULL) gets how many were written. */
ts_status ts_trace_html_write(ts_trace *t, const char *trace_path, const char *dir, int *figures);

/* ---- the window ------------------------------------------------------------------ */

typedef struct ts_lesson_view_options {
    int width, height;      /* window size in points (default TS_LESSON_PAGE_W x _H + status bar) */
    const char *script;     /* keys to replay first (as `tscope view --script`), NULL for none */
    const char *screenshot; /* write the final frame here and exit */
    int first_step;         /* 0-based step to open at */
} ts_lesson_view_options;

/* Whether a window could open: DISPLAY, WAYLAND_DISPLAY or SDL_VIDEODRIVER is
 * set. (Opening may still fail; ts_lesson_view_run then says why.) */
bool ts_lesson_view_have_display(void);

/* Open a window on the run's pages: right/left (space, page down/up) move
 * through the steps, home/end jump, q or escape quits. The step counter is in
 * the status bar. TS_ERR_UNSUPPORTED when there is no display. */
ts_status ts_lesson_view_run(const ts_lessonrun *r, const ts_lesson_view_options *opt);

#endif
