/* window: the SDL window, its cairo frame and its loop (tscope/viewer.h, "window"). */
#include "tscope/viewer.h"

#include <pango/pangocairo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/render.h"

_Static_assert(CAIRO_FORMAT_ARGB32 == 0, "cairo's ARGB32 is format 0");

bool ts_window_have_display(void) {
    return getenv("SDL_VIDEODRIVER") || getenv("DISPLAY") || getenv("WAYLAND_DISPLAY");
}

static ts_status no_display(bool *flag, char *why, size_t n, const char *reason) {
    *flag = true;
    snprintf(why, n, "%s", reason);
    return TS_ERR_UNSUPPORTED;
}

/* A DISPLAY with no server behind it makes SDL fall back to a driver that
 * shows nothing; the user would wait for a window that never comes.
 * SDL_VIDEODRIVER set by hand (dummy, offscreen) is respected. */
static bool silent_driver(void) {
    const char *driver = SDL_GetCurrentVideoDriver();
    return !getenv("SDL_VIDEODRIVER") && driver &&
           (strcmp(driver, "offscreen") == 0 || strcmp(driver, "dummy") == 0 || strcmp(driver, "evdev") == 0);
}

ts_status ts_window_open(ts_window *w, const ts_window_spec *spec, bool *nd, char *why, size_t why_n) {
    *nd = false;
    /* Without a display SDL would pick a driver that shows nothing; say so instead. */
    if (!ts_window_have_display()) return no_display(nd, why, why_n, "DISPLAY and WAYLAND_DISPLAY are not set");
    /* Without WAYLAND_DISPLAY only X11 can work; trying Wayland as well
     * would only add libwayland's complaint to our one line. */
    if (!getenv("SDL_VIDEODRIVER") && !getenv("WAYLAND_DISPLAY")) SDL_SetHint(SDL_HINT_VIDEODRIVER, "x11");
    if (SDL_Init(SDL_INIT_VIDEO) != 0) return no_display(nd, why, why_n, SDL_GetError());
    if (silent_driver()) {
        char reason[256];
        const char *d = spec->name_display ? getenv("DISPLAY") : NULL;
        snprintf(reason, sizeof reason, "no X or Wayland server answers%s%s", d ? " at DISPLAY=" : "", d ? d : "");
        return no_display(nd, why, why_n, reason);
    }
    w->window = SDL_CreateWindow(spec->title, SDL_WINDOWPOS_CENTERED, SDL_WINDOWPOS_CENTERED, spec->width,
                                 spec->height, SDL_WINDOW_RESIZABLE | SDL_WINDOW_ALLOW_HIGHDPI);
    if (!w->window) return no_display(nd, why, why_n, SDL_GetError());
    SDL_SetWindowMinimumSize(w->window, spec->min_width, spec->min_height);
    w->renderer = SDL_CreateRenderer(w->window, -1, SDL_RENDERER_ACCELERATED);
    if (!w->renderer) w->renderer = SDL_CreateRenderer(w->window, -1, SDL_RENDERER_SOFTWARE);
    if (!w->renderer) return ts_fail(TS_ERR_UNSUPPORTED, "%s: no SDL renderer: %s", spec->who, SDL_GetError());
    return TS_OK;
}

void ts_window_close(ts_window *w) {
    if (w->surface) cairo_surface_destroy(w->surface);
    if (w->texture) SDL_DestroyTexture(w->texture);
    if (w->renderer) SDL_DestroyRenderer(w->renderer);
    if (w->window) SDL_DestroyWindow(w->window);
    if (SDL_WasInit(SDL_INIT_VIDEO)) SDL_Quit();
    memset(w, 0, sizeof *w);
}

ts_status ts_window_fit(ts_window *w, const char *who) {
    int ww, wh, pw, ph;
    SDL_GetWindowSize(w->window, &ww, &wh);
    if (SDL_GetRendererOutputSize(w->renderer, &pw, &ph) != 0) SDL_GL_GetDrawableSize(w->window, &pw, &ph);
    if (pw <= 0 || ph <= 0) pw = ww, ph = wh;
    w->scale = ww > 0 ? (double)pw / ww : 1;
    w->w = ww;
    w->h = wh;
    if (w->surface && pw == w->pw && ph == w->ph) return TS_OK;
    if (w->surface) cairo_surface_destroy(w->surface);
    if (w->texture) SDL_DestroyTexture(w->texture);
    w->surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, pw, ph);
    w->texture = SDL_CreateTexture(w->renderer, SDL_PIXELFORMAT_ARGB8888, SDL_TEXTUREACCESS_STREAMING, pw, ph);
    w->pw = pw;
    w->ph = ph;
    if (cairo_surface_status(w->surface) != CAIRO_STATUS_SUCCESS || !w->texture)
        return ts_fail(TS_ERR_NOMEM, "%s: no %d x %d frame: %s", who, pw, ph, SDL_GetError());
    return TS_OK;
}

cairo_t *ts_window_cairo(ts_window *w) {
    cairo_t *cr = cairo_create(w->surface);
    cairo_scale(cr, w->scale, w->scale);
    return cr;
}

void ts_window_present(ts_window *w) {
    if (!w->surface || !w->texture) return;
    cairo_surface_flush(w->surface);
    SDL_UpdateTexture(w->texture, NULL, cairo_image_surface_get_data(w->surface),
                      cairo_image_surface_get_stride(w->surface));
    SDL_RenderClear(w->renderer);
    SDL_RenderCopy(w->renderer, w->texture, NULL, NULL);
    SDL_RenderPresent(w->renderer);
}

ts_status ts_window_screenshot(ts_window *w, const ts_window_client *c, const char *path) {
    ts_status s = c->draw(c->ctx);
    if (s != TS_OK) return s;
    ts_window_present(w);
    s = ts_png_write(w->surface, path);
    if (s == TS_OK) {
        printf("tscope %s: screenshot %s\n", c->who, path);
        fflush(stdout);
    }
    return s;
}

ts_status ts_window_loop(ts_window *w, const ts_window_client *c) {
    bool dirty = true;
    while (!c->quit(c->ctx)) {
        if (dirty) {
            ts_status s = c->draw(c->ctx);
            if (s != TS_OK) return s;
            ts_window_present(w);
            dirty = false;
        }
        SDL_Event e;
        if (!SDL_WaitEvent(&e)) return ts_fail(TS_ERR_IO, "%s: waiting for events: %s", c->who, SDL_GetError());
        dirty |= c->handle(c->ctx, &e);
        /* Take everything queued before drawing: a fast mouse makes many
         * motion events, and only the last position matters. */
        while (SDL_PollEvent(&e)) dirty |= c->handle(c->ctx, &e);
        if (c->after_events) dirty |= c->after_events(c->ctx);
    }
    return TS_OK;
}

/* Call fn on each word of script until it fails or quit (may be NULL) says so. */
static ts_status each_word(const char *script, const char *who, int max_words,
                           ts_status (*fn)(void *ctx, const char *word), bool (*quit)(const void *ctx), void *ctx) {
    char *copy = strdup(script);
    if (!copy) return ts_fail(TS_ERR_NOMEM, "%s: out of memory", who);
    ts_status s = TS_OK;
    int n = 0;
    for (char *save = NULL, *w = strtok_r(copy, " \t\n", &save); w && s == TS_OK && !(quit && quit(ctx));
         w = strtok_r(NULL, " \t\n", &save)) {
        s = fn(ctx, w);
        if (max_words > 0 && ++n > max_words)
            s = ts_fail(TS_ERR_ARG, "the script has more than %d words", max_words);
    }
    free(copy);
    return s;
}

static ts_status check_word(void *ctx, const char *word) {
    (void)ctx;
    ts_view_event ev;
    const char *shot;
    return ts_view_script_word(word, &ev, &shot);
}

ts_status ts_window_check_script(const char *script, const char *who, int max_words) {
    if (!script) return TS_OK;
    return each_word(script, who, max_words, check_word, NULL, NULL);
}

typedef struct replay {
    ts_window *w;
    const ts_window_client *c;
} replay;

static bool replay_quit(const void *ctx) {
    const replay *r = ctx;
    return r->c->quit(r->c->ctx);
}

static ts_status replay_word(void *ctx, const char *word) {
    const replay *r = ctx;
    ts_view_event ev;
    const char *shot;
    ts_status s = ts_view_script_word(word, &ev, &shot);
    if (s != TS_OK) return s;
    if (shot) return ts_window_screenshot(r->w, r->c, shot);
    if (ev.kind == TS_VIEW_EV_RESIZE) {
        /* Resize the real window; the state then takes the size SDL
         * reports, as after a user's drag. */
        int ww, wh;
        SDL_SetWindowSize(r->w->window, (int)ev.x, (int)ev.y);
        SDL_PumpEvents();
        SDL_GetWindowSize(r->w->window, &ww, &wh);
        ev.x = ww;
        ev.y = wh;
    }
    if (r->c->update(r->c->ctx, word, &ev)) {
        s = r->c->draw(r->c->ctx);
        ts_window_present(r->w);
    }
    SDL_PumpEvents();
    return s;
}

ts_status ts_window_replay(ts_window *w, const ts_window_client *c, const char *script) {
    replay r = {w, c};
    return each_word(script, c->who, 0, replay_word, replay_quit, &r);
}

void ts_window_text(cairo_t *cr, const char *markup, double size, bool bold, double x, double y, double align,
                    double r, double g, double b, double max_w) {
    PangoLayout *lay = ts_render_text_layout(cr);
    PangoFontDescription *fd = pango_font_description_from_string("DejaVu Sans");
    pango_font_description_set_absolute_size(fd, size * PANGO_SCALE);
    if (bold) pango_font_description_set_weight(fd, PANGO_WEIGHT_BOLD);
    pango_layout_set_font_description(lay, fd);
    pango_layout_set_markup(lay, markup, -1);
    if (max_w > 0) {
        pango_layout_set_width(lay, (int)(max_w * PANGO_SCALE));
        pango_layout_set_ellipsize(lay, PANGO_ELLIPSIZE_START);
    }
    int w, h;
    pango_layout_get_size(lay, &w, &h);
    cairo_set_source_rgb(cr, r, g, b);
    cairo_move_to(cr, x - align * w / PANGO_SCALE, y - (double)h / PANGO_SCALE / 2);
    ts_render_show_layout(cr, lay);
    pango_font_description_free(fd);
    g_object_unref(lay);
}
