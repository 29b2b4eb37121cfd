/* window: what the SDL windows of tscope (the viewer, viz/viewer.c, and the
 * lesson mode, viz/lesson_view.c) share: the window, renderer and texture,
 * the cairo image surface a frame is drawn into, HiDPI scale, the check for
 * a display, the wait-for-events loop, script replay and screenshots.
 *
 * Each user keeps its own state and its own update (events change state)
 * and draw (reads state only); this module only owns the window around them.
 *
 * cairo's ARGB32 is SDL_PIXELFORMAT_ARGB8888 on a little-endian machine
 * (both are 32-bit words 0xAARRGGBB), so the pixels are uploaded as they are.
 *
 * HiDPI: the window has a size in points (what the mouse reports and the
 * layout uses) and a drawable size in pixels; a context from
 * ts_window_cairo is scaled by their ratio, so everything is drawn sharp at
 * the same place.
 */
#ifndef TSCOPE_WINDOW_H
#define TSCOPE_WINDOW_H

#include <SDL.h>
#include <cairo.h>
#include <stdbool.h>
#include <stddef.h>

#include "tscope/status.h"
#include "tscope/viewer.h"

typedef struct ts_window {
    SDL_Window *window;
    SDL_Renderer *renderer;
    SDL_Texture *texture;
    cairo_surface_t *surface; /* drawable pixels */
    int pw, ph;               /* its size */
    double scale;             /* device pixels per user unit */
    double w, h;              /* the window's size in points */
} ts_window;

typedef struct ts_window_spec {
    const char *who;   /* "view", "lesson": the prefix of messages */
    const char *title;
    int width, height; /* points */
    int min_width, min_height;
    bool name_display; /* say which DISPLAY did not answer */
} ts_window_spec;

/* True when a display may be there: SDL_VIDEODRIVER, DISPLAY or
 * WAYLAND_DISPLAY is set. */
bool ts_window_have_display(void);

/* Open the window. When there is no display to show it on, returns
 * TS_ERR_UNSUPPORTED with *no_display set and the reason in why (the caller
 * says what to do instead); other failures set a message. */
ts_status ts_window_open(ts_window *w, const ts_window_spec *spec, bool *no_display, char *why, size_t why_n);

/* Closes what is open and shuts SDL's video down; w may be half open. */
void ts_window_close(ts_window *w);

/* Match the surface and texture to the drawable size; updates scale, w, h. */
ts_status ts_window_fit(ts_window *w, const char *who);

/* A context on the surface, scaled to points. Destroy it, then call
 * ts_window_present (which flushes the surface). */
cairo_t *ts_window_cairo(ts_window *w);

/* Upload the surface and show it. */
void ts_window_present(ts_window *w);

/* The viewer's key for an SDL key; TS_VIEW_KEY_NONE for the others
 * (characters come as text input). */
ts_view_key ts_window_key(SDL_Keycode k);

/* What the loop, the script replay and screenshots call back. */
typedef struct ts_window_client {
    void *ctx;
    const char *who;                                   /* "view", "lesson": the prefix of messages */
    ts_status (*draw)(void *ctx);                      /* the frame into the surface */
    bool (*handle)(void *ctx, const SDL_Event *e);     /* true: draw again */
    bool (*after_events)(void *ctx);                   /* NULL, or true: draw again */
    /* A script's event (a resize already done to the window, with the size
     * SDL reports); word is the script word. True: draw again. */
    bool (*update)(void *ctx, const char *word, const ts_view_event *ev);
    bool (*quit)(const void *ctx);
} ts_window_client;

/* Draw, show, and write the frame as PNG; prints "tscope WHO: screenshot PATH". */
ts_status ts_window_screenshot(ts_window *w, const ts_window_client *c, const char *path);

/* Draw, present, then sleep in SDL_WaitEvent until an event changes the
 * state; until c->quit. Idle costs nothing. */
ts_status ts_window_loop(ts_window *w, const ts_window_client *c);

/* Check every word of a `tscope view --script` script (NULL is none), so a
 * typo fails before the window opens. max_words > 0 fails a longer one. */
ts_status ts_window_check_script(const char *script, const char *who, int max_words);

/* Replay the script as if typed, drawing after every change (so the mouse
 * keys such as + find the cells where they are) and pumping SDL's queue (so
 * the window stays responsive); shot:FILE writes a screenshot. */
ts_status ts_window_replay(ts_window *w, const ts_window_client *c, const char *script);

#endif
