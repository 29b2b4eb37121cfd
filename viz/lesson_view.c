/* lesson mode of the viewer: a window on a lesson's pages.
 *
 * The frame is the page `tscope lesson N --export` writes (lesson_export.c:
 * narration beside the view, one drawing path) above a status bar with the
 * step counter and the keys. The loop is the viewer's (viewer.c): the state
 * is the step shown, changed only by events; a frame is drawn when it
 * changed; SDL_WaitEvent sleeps in between. Scripts use the words of
 * `tscope view --script` (ts_view_script_word): right, left, home, end,
 * space, q, shot:FILE, resize:W,H; other words are ignored here.
 */
#include <SDL.h>
#include <math.h>
#include <pango/pangocairo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/lessonrun.h"
#include "tscope/png.h"
#include "tscope/viewer.h"

#define STATUS_H 34.0
#define DEFAULT_W 1400
#define DEFAULT_H 860

_Static_assert(CAIRO_FORMAT_ARGB32 == 0, "cairo's ARGB32 is format 0");

typedef struct lview {
    const ts_lessonrun *r;
    int step, n_steps;
    ts_lesson_page *page; /* of page_step, built when the step changes */
    int page_step;
    char error[600];      /* why the page could not be built or drawn */
    bool quit;
    SDL_Window *window;
    SDL_Renderer *renderer;
    SDL_Texture *texture;
    cairo_surface_t *surface;
    int pw, ph;
    double scale, w, h;
} lview;

bool ts_lesson_view_have_display(void) {
    return getenv("SDL_VIDEODRIVER") || getenv("DISPLAY") || getenv("WAYLAND_DISPLAY");
}

static ts_status no_display(const char *why) {
    return ts_fail(TS_ERR_UNSUPPORTED, "no display to open a window on (%s); write the pages as PNG instead: --export DIR",
                   why);
}

/* As viewer.c: say so when there is no display rather than show nothing. */
static ts_status open_window(lview *v, const ts_lesson_view_options *o) {
    if (!ts_lesson_view_have_display()) return no_display("DISPLAY and WAYLAND_DISPLAY are not set");
    if (!getenv("SDL_VIDEODRIVER") && !getenv("WAYLAND_DISPLAY")) SDL_SetHint(SDL_HINT_VIDEODRIVER, "x11");
    if (SDL_Init(SDL_INIT_VIDEO) != 0) return no_display(SDL_GetError());
    const char *driver = SDL_GetCurrentVideoDriver();
    if (!getenv("SDL_VIDEODRIVER") && driver &&
        (strcmp(driver, "offscreen") == 0 || strcmp(driver, "dummy") == 0 || strcmp(driver, "evdev") == 0))
        return no_display("no X or Wayland server answers");
    char title[512];
    snprintf(title, sizeof title, "tscope lesson: %s", v->r->lesson->title);
    int w = o->width > 0 ? o->width : DEFAULT_W, h = o->height > 0 ? o->height : DEFAULT_H;
    v->window = SDL_CreateWindow(title, SDL_WINDOWPOS_CENTERED, SDL_WINDOWPOS_CENTERED, w, h,
                                 SDL_WINDOW_RESIZABLE | SDL_WINDOW_ALLOW_HIGHDPI);
    if (!v->window) return no_display(SDL_GetError());
    SDL_SetWindowMinimumSize(v->window, 800, 500);
    v->renderer = SDL_CreateRenderer(v->window, -1, SDL_RENDERER_ACCELERATED);
    if (!v->renderer) v->renderer = SDL_CreateRenderer(v->window, -1, SDL_RENDERER_SOFTWARE);
    if (!v->renderer) return ts_fail(TS_ERR_UNSUPPORTED, "lesson: no SDL renderer: %s", SDL_GetError());
    return TS_OK;
}

static void lview_free(lview *v) {
    ts_lesson_page_free(v->page);
    if (v->surface) cairo_surface_destroy(v->surface);
    if (v->texture) SDL_DestroyTexture(v->texture);
    if (v->renderer) SDL_DestroyRenderer(v->renderer);
    if (v->window) SDL_DestroyWindow(v->window);
    if (SDL_WasInit(SDL_INIT_VIDEO)) SDL_Quit();
}

static ts_status fit_surface(lview *v) {
    int w, h, pw, ph;
    SDL_GetWindowSize(v->window, &w, &h);
    if (SDL_GetRendererOutputSize(v->renderer, &pw, &ph) != 0) SDL_GL_GetDrawableSize(v->window, &pw, &ph);
    if (pw <= 0 || ph <= 0) pw = w, ph = h;
    v->scale = w > 0 ? (double)pw / w : 1;
    v->w = w;
    v->h = h;
    if (v->surface && pw == v->pw && ph == v->ph) return TS_OK;
    if (v->surface) cairo_surface_destroy(v->surface);
    if (v->texture) SDL_DestroyTexture(v->texture);
    v->surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, pw, ph);
    v->texture = SDL_CreateTexture(v->renderer, SDL_PIXELFORMAT_ARGB8888, SDL_TEXTUREACCESS_STREAMING, pw, ph);
    v->pw = pw;
    v->ph = ph;
    if (cairo_surface_status(v->surface) != CAIRO_STATUS_SUCCESS || !v->texture)
        return ts_fail(TS_ERR_NOMEM, "lesson: no %d x %d frame: %s", pw, ph, SDL_GetError());
    return TS_OK;
}

/* ---- the frame ---------------------------------------------------------------------- */

static void text(cairo_t *cr, const char *markup, double size, bool bold, double x, double y, double align,
                 double r, double g, double b) {
    PangoLayout *lay = pango_cairo_create_layout(cr);
    PangoFontDescription *fd = pango_font_description_from_string("DejaVu Sans");
    pango_font_description_set_absolute_size(fd, size * PANGO_SCALE);
    if (bold) pango_font_description_set_weight(fd, PANGO_WEIGHT_BOLD);
    pango_layout_set_font_description(lay, fd);
    pango_layout_set_markup(lay, markup, -1);
    int w, h;
    pango_layout_get_size(lay, &w, &h);
    cairo_set_source_rgb(cr, r, g, b);
    cairo_move_to(cr, x - align * w / PANGO_SCALE, y - (double)h / PANGO_SCALE / 2);
    pango_cairo_show_layout(cr, lay);
    pango_font_description_free(fd);
    g_object_unref(lay);
}

static void draw_status(lview *v, cairo_t *cr) {
    double y = v->h - STATUS_H;
    cairo_set_source_rgb(cr, 0.15, 0.17, 0.20);
    cairo_rectangle(cr, 0, y, v->w, STATUS_H);
    cairo_fill(cr);
    char buf[900];
    const ts_lesson_step *st = &v->r->lesson->steps[v->step];
    char *name = g_markup_escape_text(st->tensor, -1);
    snprintf(buf, sizeof buf, "<b>step %d / %d</b>   <span foreground=\"#a8b0bc\">%s</span>", v->step + 1, v->n_steps,
             name);
    g_free(name);
    text(cr, buf, 14, false, 14, y + STATUS_H / 2, 0, 0.93, 0.94, 0.96);
    if (v->error[0]) {
        char *esc = g_markup_escape_text(v->error, -1);
        snprintf(buf, sizeof buf, "%s", esc);
        g_free(esc);
        text(cr, buf, 12.5, false, v->w * 0.5, y + STATUS_H / 2, 0.5, 1.0, 0.62, 0.2);
    }
    text(cr, "\xe2\x86\x90 \xe2\x86\x92 step   Home/End first/last   q quit", 12.5, false, v->w - 14, y + STATUS_H / 2, 1,
         0.66, 0.70, 0.76);
}

static ts_status draw(lview *v) {
    ts_status s = fit_surface(v);
    if (s) return s;
    if (!v->page || v->page_step != v->step) {
        ts_lesson_page_free(v->page);
        v->page = NULL;
        v->error[0] = '\0';
        if (ts_lesson_page_build(&v->page, v->r, v->step) != TS_OK)
            snprintf(v->error, sizeof v->error, "%s", ts_last_error());
        v->page_step = v->step;
    }
    cairo_t *cr = cairo_create(v->surface);
    cairo_scale(cr, v->scale, v->scale);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    if (v->page && ts_lesson_page_draw(v->page, cr, v->w, v->h - STATUS_H) != TS_OK)
        snprintf(v->error, sizeof v->error, "%s", ts_last_error());
    draw_status(v, cr);
    cairo_destroy(cr);
    cairo_surface_flush(v->surface);
    return TS_OK;
}

static void present(lview *v) {
    if (!v->surface || !v->texture) return;
    SDL_UpdateTexture(v->texture, NULL, cairo_image_surface_get_data(v->surface),
                      cairo_image_surface_get_stride(v->surface));
    SDL_RenderClear(v->renderer);
    SDL_RenderCopy(v->renderer, v->texture, NULL, NULL);
    SDL_RenderPresent(v->renderer);
}

static ts_status screenshot(lview *v, const char *path) {
    ts_status s = draw(v);
    if (s) return s;
    present(v);
    s = ts_png_write(v->surface, path);
    if (s == TS_OK) {
        printf("tscope lesson: screenshot %s\n", path);
        fflush(stdout);
    }
    return s;
}

/* ---- events ---------------------------------------------------------------------------- */

/* Apply one key; true when the step changed (or the window must redraw). */
static bool key(lview *v, ts_view_key k, char ch) {
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

static ts_view_key key_of(SDL_Keycode k) {
    switch (k) {
    case SDLK_LEFT: return TS_VIEW_KEY_LEFT;
    case SDLK_RIGHT: return TS_VIEW_KEY_RIGHT;
    case SDLK_UP: return TS_VIEW_KEY_UP;
    case SDLK_DOWN: return TS_VIEW_KEY_DOWN;
    case SDLK_PAGEUP: return TS_VIEW_KEY_PGUP;
    case SDLK_PAGEDOWN: return TS_VIEW_KEY_PGDN;
    case SDLK_HOME: return TS_VIEW_KEY_HOME;
    case SDLK_END: return TS_VIEW_KEY_END;
    case SDLK_ESCAPE: return TS_VIEW_KEY_ESCAPE;
    case SDLK_BACKSPACE: return TS_VIEW_KEY_BACKSPACE;
    default: return TS_VIEW_KEY_NONE;
    }
}

static bool handle(lview *v, const SDL_Event *e) {
    switch (e->type) {
    case SDL_QUIT: v->quit = true; return false;
    case SDL_KEYDOWN: {
        ts_view_key k = key_of(e->key.keysym.sym);
        return k != TS_VIEW_KEY_NONE && key(v, k, 0);
    }
    case SDL_TEXTINPUT: {
        bool changed = false;
        for (const char *c = e->text.text; *c; c++) changed |= key(v, TS_VIEW_KEY_CHAR, *c);
        return changed;
    }
    case SDL_WINDOWEVENT:
        if (e->window.event == SDL_WINDOWEVENT_SIZE_CHANGED) return true;
        if (e->window.event == SDL_WINDOWEVENT_EXPOSED) present(v);
        return false;
    default: return false;
    }
}

/* Check every word first, so a typo fails before the window opens. */
static ts_status check_script(const char *script) {
    if (!script) return TS_OK;
    char *copy = strdup(script);
    if (!copy) return ts_fail(TS_ERR_NOMEM, "lesson: out of memory");
    ts_status s = TS_OK;
    for (char *save = NULL, *w = strtok_r(copy, " \t\n", &save); w && !s; w = strtok_r(NULL, " \t\n", &save)) {
        ts_view_event ev;
        const char *shot;
        s = ts_view_script_word(w, &ev, &shot);
    }
    free(copy);
    return s;
}

static ts_status run_script(lview *v, const char *script) {
    char *copy = strdup(script);
    if (!copy) return ts_fail(TS_ERR_NOMEM, "lesson: out of memory");
    ts_status s = TS_OK;
    for (char *save = NULL, *w = strtok_r(copy, " \t\n", &save); w && !s && !v->quit;
         w = strtok_r(NULL, " \t\n", &save)) {
        ts_view_event ev;
        const char *shot;
        if ((s = ts_view_script_word(w, &ev, &shot))) break;
        if (shot) {
            s = screenshot(v, shot);
            continue;
        }
        bool changed = false;
        if (ev.kind == TS_VIEW_EV_KEY) changed = key(v, ev.key, ev.ch);
        else if (ev.kind == TS_VIEW_EV_QUIT) v->quit = true;
        else if (ev.kind == TS_VIEW_EV_RESIZE) {
            SDL_SetWindowSize(v->window, (int)ev.x, (int)ev.y);
            SDL_PumpEvents();
            changed = true;
        }
        if (changed) {
            s = draw(v);
            present(v);
        }
        SDL_PumpEvents();
    }
    free(copy);
    return s;
}

static ts_status loop(lview *v) {
    bool dirty = true;
    while (!v->quit) {
        if (dirty) {
            ts_status s = draw(v);
            if (s) return s;
            present(v);
            dirty = false;
        }
        SDL_Event e;
        if (!SDL_WaitEvent(&e)) return ts_fail(TS_ERR_IO, "lesson: waiting for events: %s", SDL_GetError());
        dirty |= handle(v, &e);
        while (SDL_PollEvent(&e)) dirty |= handle(v, &e);
    }
    return TS_OK;
}

ts_status ts_lesson_view_run(const ts_lessonrun *r, const ts_lesson_view_options *opt) {
    lview v;
    memset(&v, 0, sizeof v);
    v.r = r;
    v.n_steps = r->lesson->n_steps;
    v.page_step = -1;
    v.step = opt->first_step > 0 && opt->first_step < v.n_steps ? opt->first_step : 0;
    ts_status s = check_script(opt->script);
    if (!s) s = open_window(&v, opt);
    if (!s && opt->script) s = run_script(&v, opt->script);
    if (!s && opt->screenshot) s = screenshot(&v, opt->screenshot);
    else if (!s) s = loop(&v);
    lview_free(&v);
    return s;
}
