/* lesson mode of the viewer: a window on a lesson's pages.
 *
 * The frame is the page `tscope lesson N --export` writes (lesson_export.c:
 * narration beside the view, one drawing path) above a status bar with the
 * step counter and the keys. The window and its loop are the viewer's
 * (tscope/viewer.h, "window"): the state is the step shown, changed only by events; a
 * frame is drawn when it changed; SDL_WaitEvent sleeps in between. Scripts
 * use the words of `tscope view --script` (ts_view_script_word): right, left, home, end,
 * space, q, shot:FILE, resize:W,H; other words are ignored here.
 */
#include <SDL.h>
#include <math.h>
#include <pango/pangocairo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/pages.h"
#include "tscope/viewer.h"

#define STATUS_H 34.0
#define DEFAULT_W 1280 /* fits a 1366 x 768 laptop screen with its panels */
#define DEFAULT_H 720

typedef struct lview {
    const ts_lessonrun *r;
    int step, n_steps;
    ts_lesson_page *page; /* of page_step, built when the step changes */
    int page_step;
    char error[600];      /* why the page could not be built or drawn */
    bool quit;
    ts_window win;
    /* a `live: true` step being edited: its setup's model answers as the text changes */
    ts_live *live;
    ts_model live_model;
    ts_lmtok live_tok;
    bool live_loaded;
    char live_text[256]; /* the setup's text, which the narration's numbers are about */
} lview;

bool ts_lesson_view_have_display(void) { return ts_window_have_display(); }

static ts_status no_display(const char *why) {
    return ts_fail(TS_ERR_UNSUPPORTED, "no display to open a window on (%s); write the pages as PNG instead: --export DIR",
                   why);
}

/* As viewer.c: say so when there is no display rather than show nothing. */
static ts_status open_window(lview *v, const ts_lesson_view_options *o) {
    char title[512];
    snprintf(title, sizeof title, "tscope lesson: %s", v->r->lesson->title);
    ts_window_spec spec = {.who = "lesson",
                           .title = title,
                           .width = o->width > 0 ? o->width : DEFAULT_W,
                           .height = o->height > 0 ? o->height : DEFAULT_H,
                           .min_width = 800,
                           .min_height = 500};
    bool nd;
    char why[512];
    ts_status s = ts_window_open(&v->win, &spec, &nd, why, sizeof why);
    return nd ? no_display(why) : s;
}

static void lview_free(lview *v) {
    ts_live_free(v->live);
    if (v->live_loaded) {
        ts_model_free(&v->live_model);
        ts_lmtok_free(&v->live_tok);
    }
    ts_lesson_page_free(v->page);
    ts_window_close(&v->win);
}

/* ---- the frame ---------------------------------------------------------------------- */

static void draw_status(lview *v, cairo_t *cr) {
    double y = v->win.h - STATUS_H;
    cairo_set_source_rgb(cr, 0.15, 0.17, 0.20);
    cairo_rectangle(cr, 0, y, v->win.w, STATUS_H);
    cairo_fill(cr);
    char buf[900];
    const ts_lesson_step *st = &v->r->lesson->steps[v->step];
    char *name = g_markup_escape_text(st->tensor, -1);
    snprintf(buf, sizeof buf, "<b>step %d / %d</b>   <span foreground=\"#a8b0bc\">%s</span>", v->step + 1, v->n_steps,
             name);
    g_free(name);
    ts_window_text(cr, buf, 14, false, 14, y + STATUS_H / 2, 0, 0.93, 0.94, 0.96, 0);
    if (v->error[0]) {
        char *esc = g_markup_escape_text(v->error, -1);
        snprintf(buf, sizeof buf, "%s", esc);
        g_free(esc);
        ts_window_text(cr, buf, 12.5, false, v->win.w * 0.5, y + STATUS_H / 2, 0.5, 1.0, 0.62, 0.2, 0);
    }
    const char *keys = st->live ? "<b>Enter: edit the text live</b>   \xe2\x86\x90 \xe2\x86\x92 step   q quit"
                                : "\xe2\x86\x90 \xe2\x86\x92 step   Home/End first/last   q quit";
    ts_window_text(cr, keys, 12.5, false, v->win.w - 14, y + STATUS_H / 2, 1, 0.66, 0.70, 0.76, 0);
}

/* The status bar while a step is live: whose numbers the narration quotes. */
static void draw_live_status(lview *v, cairo_t *cr) {
    double y = v->win.h - STATUS_H;
    cairo_set_source_rgb(cr, 0.12, 0.25, 0.42);
    cairo_rectangle(cr, 0, y, v->win.w, STATUS_H);
    cairo_fill(cr);
    char *orig = g_markup_escape_text(v->live_text, -1);
    char buf[700];
    snprintf(buf, sizeof buf, "<b>live</b>: edit the text and watch the step recompute; the narration's numbers are for \u201c%s\u201d",
             orig);
    g_free(orig);
    ts_window_text(cr, buf, 13.5, false, 14, y + STATUS_H / 2, 0, 0.95, 0.96, 0.98, 0);
    ts_window_text(cr, "Esc: back to the lesson", 12.5, false, v->win.w - 14, y + STATUS_H / 2, 1, 0.8, 0.86, 0.94, 0);
}

static ts_status draw(void *ctx) {
    lview *v = ctx;
    ts_status s = ts_window_fit(&v->win, "lesson");
    if (s) return s;
    if (v->live) {
        ts_live_resize(v->live, v->win.w, v->win.h - STATUS_H);
        cairo_t *cr = ts_window_cairo(&v->win);
        s = ts_live_draw(v->live, cr);
        draw_live_status(v, cr);
        cairo_destroy(cr);
        cairo_surface_flush(v->win.surface);
        return s;
    }
    if (!v->page || v->page_step != v->step) {
        ts_lesson_page_free(v->page);
        v->page = NULL;
        v->error[0] = '\0';
        if (ts_lesson_page_build(&v->page, v->r, v->step) != TS_OK)
            snprintf(v->error, sizeof v->error, "%s", ts_last_error());
        v->page_step = v->step;
    }
    cairo_t *cr = ts_window_cairo(&v->win);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    if (v->page && ts_lesson_page_draw(v->page, cr, v->win.w, v->win.h - STATUS_H) != TS_OK)
        snprintf(v->error, sizeof v->error, "%s", ts_last_error());
    draw_status(v, cr);
    cairo_destroy(cr);
    cairo_surface_flush(v->win.surface);
    return TS_OK;
}

/* ---- events ---------------------------------------------------------------------------- */

/* Open the live session of the current step: its setup's model and text,
 * on the step's tensor and head. A failure is said in the status bar. */
static void enter_live(lview *v) {
    const ts_lesson *lesson = v->r->lesson;
    const ts_lesson_step *st = &lesson->steps[v->step];
    int setup = ts_lesson_find_setup(lesson, st->run);
    const char *load = ts_lesson_setup_get(lesson, setup, "load"), *txt = ts_lesson_setup_get(lesson, setup, "text");
    char path[4096];
    ts_status s = ts_lesson_resolve(lesson, load, path, sizeof path);
    if (!s && !v->live_loaded) {
        s = ts_lm_checkpoint_open(path, NULL, 1, 0, &v->live_model, &v->live_tok);
        v->live_loaded = s == TS_OK;
    }
    ts_live_options o = {.width = (int)v->win.w, .height = (int)(v->win.h - STATUS_H), .text = txt};
    if (!s) s = ts_live_new(&v->live, &v->live_model, &v->live_tok, &o);
    bool redraw;
    ts_view_event find = {.kind = TS_VIEW_EV_FIND, .text = st->tensor};
    if (!s) s = ts_live_view_event(v->live, &find, &redraw);
    ts_view_event head = {.kind = TS_VIEW_EV_KEY, .key = TS_VIEW_KEY_CHAR, .ch = (char)('1' + st->head)};
    if (!s && st->head >= 0 && st->head < 9) s = ts_live_view_event(v->live, &head, &redraw);
    if (s) {
        snprintf(v->error, sizeof v->error, "live: %s", ts_last_error());
        ts_live_free(v->live);
        v->live = NULL;
        return;
    }
    snprintf(v->live_text, sizeof v->live_text, "%s", txt);
}

static void leave_live(lview *v) {
    ts_live_free(v->live);
    v->live = NULL;
}

static bool said(lview *v, ts_status s) {
    if (s) snprintf(v->error, sizeof v->error, "live: %s", ts_last_error());
    return true;
}

/* A key while the step is live: the text field and the steps. */
static bool live_key(lview *v, ts_view_key k, char ch) {
    bool redraw = false;
    switch (k) {
    case TS_VIEW_KEY_ESCAPE: leave_live(v); return true;
    case TS_VIEW_KEY_CHAR: {
        char one[2] = {ch, 0};
        return said(v, ts_live_insert(v->live, one));
    }
    case TS_VIEW_KEY_BACKSPACE: return said(v, ts_live_backspace(v->live));
    case TS_VIEW_KEY_TAB: return said(v, ts_live_tab(v->live));
    case TS_VIEW_KEY_LEFT: return ts_live_cursor(v->live, -1);
    case TS_VIEW_KEY_RIGHT: return ts_live_cursor(v->live, 1);
    case TS_VIEW_KEY_HOME: return ts_live_cursor(v->live, -2);
    case TS_VIEW_KEY_END: return ts_live_cursor(v->live, 2);
    case TS_VIEW_KEY_UP:
    case TS_VIEW_KEY_DOWN: {
        ts_view_event ev = {.kind = TS_VIEW_EV_KEY, .key = k == TS_VIEW_KEY_UP ? TS_VIEW_KEY_LEFT : TS_VIEW_KEY_RIGHT};
        return said(v, ts_live_view_event(v->live, &ev, &redraw)) && redraw;
    }
    default: return false;
    }
}

/* Apply one key; true when the step changed (or the window must redraw). */
static bool key(lview *v, ts_view_key k, char ch) {
    if (v->live) return live_key(v, k, ch);
    if (k == TS_VIEW_KEY_ENTER && v->r->lesson->steps[v->step].live) {
        enter_live(v);
        return true;
    }
    int before = v->step;
    switch (k) {
    case TS_VIEW_KEY_RIGHT:
    case TS_VIEW_KEY_PGDN:
    case TS_VIEW_KEY_DOWN: v->step++; break;
    case TS_VIEW_KEY_LEFT:
    case TS_VIEW_KEY_PGUP:
    case TS_VIEW_KEY_UP:
    case TS_VIEW_KEY_BACKSPACE: v->step--; break;
    case TS_VIEW_KEY_HOME: v->step = 0; break;
    case TS_VIEW_KEY_END: v->step = v->n_steps - 1; break;
    case TS_VIEW_KEY_ESCAPE: v->quit = true; break;
    case TS_VIEW_KEY_CHAR:
        if (ch == ' ' || ch == 'n') v->step++;
        else if (ch == 'p' || ch == 'b') v->step--;
        else if (ch == 'q') v->quit = true;
        break;
    default: break;
    }
    if (v->step < 0) v->step = 0;
    if (v->step >= v->n_steps) v->step = v->n_steps - 1;
    return v->step != before;
}

static bool handle(void *ctx, const SDL_Event *e) {
    lview *v = ctx;
    if (v->live && e->type == SDL_KEYDOWN && e->key.keysym.sym == SDLK_ESCAPE) {
        leave_live(v);
        return true;
    }
    if (v->live && e->type != SDL_QUIT && !(e->type == SDL_WINDOWEVENT && e->window.event == SDL_WINDOWEVENT_EXPOSED))
        return ts_live_handle(v->live, e);
    switch (e->type) {
    case SDL_QUIT: v->quit = true; return false;
    case SDL_KEYDOWN: {
        ts_view_key k = ts_window_key(e->key.keysym.sym);
        return k != TS_VIEW_KEY_NONE && key(v, k, 0);
    }
    case SDL_TEXTINPUT: {
        bool changed = false;
        for (const char *c = e->text.text; *c; c++) changed |= key(v, TS_VIEW_KEY_CHAR, *c);
        return changed;
    }
    case SDL_WINDOWEVENT:
        if (e->window.event == SDL_WINDOWEVENT_SIZE_CHANGED) return true;
        if (e->window.event == SDL_WINDOWEVENT_EXPOSED) ts_window_present(&v->win);
        return false;
    default: return false;
    }
}

static bool quit_wanted(const void *ctx) { return ((const lview *)ctx)->quit; }

static bool script_update(void *ctx, const char *word, const ts_view_event *ev) {
    (void)word;
    lview *v = ctx;
    if (ev->kind == TS_VIEW_EV_KEY) return key(v, ev->key, ev->ch);
    if (ev->kind == TS_VIEW_EV_QUIT) v->quit = true;
    return ev->kind == TS_VIEW_EV_RESIZE;
}

static ts_window_client client(lview *v) {
    return (ts_window_client){
        .ctx = v, .who = "lesson", .draw = draw, .handle = handle, .update = script_update, .quit = quit_wanted};
}

ts_status ts_lesson_view_run(const ts_lessonrun *r, const ts_lesson_view_options *opt) {
    lview v;
    memset(&v, 0, sizeof v);
    v.r = r;
    v.n_steps = r->lesson->n_steps;
    v.page_step = -1;
    v.step = opt->first_step > 0 && opt->first_step < v.n_steps ? opt->first_step : 0;
    ts_status s = ts_window_check_script(opt->script, "lesson", 0);
    if (!s) s = open_window(&v, opt);
    ts_window_client c = client(&v);
    if (!s && opt->script) s = ts_window_replay(&v.win, &c, opt->script);
    if (!s && opt->screenshot) s = ts_window_screenshot(&v.win, &c, opt->screenshot);
    else if (!s) s = ts_window_loop(&v.win, &c);
    lview_free(&v);
    return s;
}
