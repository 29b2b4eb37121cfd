/* viewer: the window. Owns the SDL window, renderer and texture, the cairo
 * image surface the frame is drawn into, and the loop:
 *
 *   init -> [wait for events -> update -> (changed?) draw -> upload] -> deinit
 *
 * Idle costs nothing: SDL_WaitEvent sleeps until something happens, and a
 * frame is drawn only when an update says the state changed. cairo's ARGB32
 * is SDL_PIXELFORMAT_ARGB8888 on a little-endian machine (both are 32-bit
 * words 0xAARRGGBB), so the pixels are uploaded as they are.
 *
 * HiDPI: the window has a size in points (what the mouse reports and the
 * layout uses) and a drawable size in pixels; the cairo context is scaled by
 * their ratio, so everything is drawn sharp at the same place.
 */
#include <SDL.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tscope/png.h"
#include "viewer_internal.h"

#define DEFAULT_W 1280
#define DEFAULT_H 800
#define MAX_SCRIPT_WORDS 4096

_Static_assert(CAIRO_FORMAT_ARGB32 == 0, "cairo's ARGB32 is format 0");

typedef struct viewer {
    ts_trace *trace;
    ts_view_steps steps;
    ts_view_state st;
    ts_view_frame frame;
    SDL_Window *window;
    SDL_Renderer *renderer;
    SDL_Texture *texture;
    cairo_surface_t *surface; /* drawable pixels */
    int pw, ph;               /* its size */
    double scale;             /* device pixels per user unit */
    const ts_view_options *opt;
    int64_t shown; /* the step the last frame showed */
    /* Draw times, for --verbose and the closing line. */
    int frames;
    double draw_ms_sum, draw_ms_max;
} viewer;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Resident memory in MB, from /proc/self/status: anonymous (what the viewer
 * allocated) and file-backed (pages of the mapped trace, which the kernel
 * can drop and read again). -1 where there is no /proc. */
static void resident_mb(double *anon, double *file) {
    *anon = *file = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return;
    char line[256];
    long kb;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "RssAnon: %ld", &kb) == 1) *anon = kb / 1024.0;
        if (sscanf(line, "RssFile: %ld", &kb) == 1) *file = kb / 1024.0;
    }
    fclose(f);
}

/* ---- init and deinit --------------------------------------------------------- */

static ts_status no_display(const char *path, const char *why) {
    return ts_fail(TS_VIEW_NO_DISPLAY,
                   "no display to open a window on (%s); draw a step into a PNG instead: tscope png %s --tensor NAME",
                   why, path);
}

static ts_status open_window(viewer *v, const char *path) {
    /* Without a display SDL would pick a driver that shows nothing; say so
     * instead. SDL_VIDEODRIVER set by hand (dummy, offscreen) is respected. */
    if (!getenv("SDL_VIDEODRIVER") && !getenv("DISPLAY") && !getenv("WAYLAND_DISPLAY"))
        return no_display(path, "DISPLAY and WAYLAND_DISPLAY are not set");
    /* Without WAYLAND_DISPLAY only X11 can work; trying Wayland as well
     * would only add libwayland's complaint to our one line. */
    if (!getenv("SDL_VIDEODRIVER") && !getenv("WAYLAND_DISPLAY")) SDL_SetHint(SDL_HINT_VIDEODRIVER, "x11");
    if (SDL_Init(SDL_INIT_VIDEO) != 0) return no_display(path, SDL_GetError());
    /* A DISPLAY with no server behind it makes SDL fall back to a driver
     * that shows nothing; the user would wait for a window that never
     * comes. */
    const char *driver = SDL_GetCurrentVideoDriver();
    if (!getenv("SDL_VIDEODRIVER") && driver &&
        (strcmp(driver, "offscreen") == 0 || strcmp(driver, "dummy") == 0 || strcmp(driver, "evdev") == 0)) {
        char why[256];
        const char *d = getenv("DISPLAY");
        snprintf(why, sizeof why, "no X or Wayland server answers%s%s", d ? " at DISPLAY=" : "", d ? d : "");
        return no_display(path, why);
    }
    char title[512];
    const char *base = strrchr(path, '/');
    snprintf(title, sizeof title, "tscope view: %s", base ? base + 1 : path);
    int w = v->opt->width > 0 ? v->opt->width : DEFAULT_W, h = v->opt->height > 0 ? v->opt->height : DEFAULT_H;
    v->window = SDL_CreateWindow(title, SDL_WINDOWPOS_CENTERED, SDL_WINDOWPOS_CENTERED, w, h,
                                 SDL_WINDOW_RESIZABLE | SDL_WINDOW_ALLOW_HIGHDPI);
    if (!v->window) return no_display(path, SDL_GetError());
    SDL_SetWindowMinimumSize(v->window, 640, 400);
    v->renderer = SDL_CreateRenderer(v->window, -1, SDL_RENDERER_ACCELERATED);
    if (!v->renderer) v->renderer = SDL_CreateRenderer(v->window, -1, SDL_RENDERER_SOFTWARE);
    if (!v->renderer) return ts_fail(TS_ERR_UNSUPPORTED, "view: no SDL renderer: %s", SDL_GetError());
    return TS_OK;
}

static void viewer_free(viewer *v) {
    if (v->surface) cairo_surface_destroy(v->surface);
    if (v->texture) SDL_DestroyTexture(v->texture);
    if (v->renderer) SDL_DestroyRenderer(v->renderer);
    if (v->window) SDL_DestroyWindow(v->window);
    if (SDL_WasInit(SDL_INIT_VIDEO)) SDL_Quit();
    ts_view_state_free(&v->st);
    ts_view_steps_free(&v->steps);
    ts_trace_close(v->trace);
}

/* ---- drawing and showing --------------------------------------------------------- */

/* Make the surface and texture match the drawable size. */
static ts_status fit_surface(viewer *v) {
    int w, h, pw, ph;
    SDL_GetWindowSize(v->window, &w, &h);
    if (SDL_GetRendererOutputSize(v->renderer, &pw, &ph) != 0) SDL_GL_GetDrawableSize(v->window, &pw, &ph);
    if (pw <= 0 || ph <= 0) pw = w, ph = h;
    v->scale = w > 0 ? (double)pw / w : 1;
    if (v->surface && pw == v->pw && ph == v->ph) return TS_OK;
    if (v->surface) cairo_surface_destroy(v->surface);
    if (v->texture) SDL_DestroyTexture(v->texture);
    v->surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, pw, ph);
    v->texture = SDL_CreateTexture(v->renderer, SDL_PIXELFORMAT_ARGB8888, SDL_TEXTUREACCESS_STREAMING, pw, ph);
    v->pw = pw;
    v->ph = ph;
    if (cairo_surface_status(v->surface) != CAIRO_STATUS_SUCCESS || !v->texture)
        return ts_fail(TS_ERR_NOMEM, "view: no %d x %d frame: %s", pw, ph, SDL_GetError());
    return TS_OK;
}

/* The reader gathers a view step whose values are not in place (a permute)
 * into memory on first use. Once the viewer has moved on, give that memory
 * back: walking through a trace of gigabytes must not keep every step. */
static void release_gathered(viewer *v) {
    if (v->st.current == v->shown) return;
    int64_t n = ts_trace_count(v->trace);
    for (int64_t i = 0; i < n; i++)
        if (i != v->st.current && ts_trace_step_at(v->trace, i)->view_of >= 0) ts_trace_release_values(v->trace, i);
    v->shown = v->st.current;
}

static ts_status draw(viewer *v) {
    ts_status s = fit_surface(v);
    if (s != TS_OK) return s;
    release_gathered(v);
    cairo_t *cr = cairo_create(v->surface);
    cairo_scale(cr, v->scale, v->scale);
    double t0 = now_ms();
    s = ts_view_draw(cr, &v->st, &v->steps, v->trace, &v->frame);
    cairo_destroy(cr);
    cairo_surface_flush(v->surface);
    double ms = now_ms() - t0;
    v->frame.draw_ms = ms;
    v->frames++;
    v->draw_ms_sum += ms;
    if (ms > v->draw_ms_max) v->draw_ms_max = ms;
    if (v->opt->verbose) {
        double anon, file;
        resident_mb(&anon, &file);
        fprintf(stderr, "view: frame %d: step %lld drawn in %.2f ms (%d x %d px); resident %.1f MB anon, %.1f MB trace pages\n",
                v->frames, (long long)v->st.current, ms, v->pw, v->ph, anon, file);
    }
    return s;
}

static void present(viewer *v) {
    if (!v->surface || !v->texture) return;
    SDL_UpdateTexture(v->texture, NULL, cairo_image_surface_get_data(v->surface),
                      cairo_image_surface_get_stride(v->surface));
    SDL_RenderClear(v->renderer);
    SDL_RenderCopy(v->renderer, v->texture, NULL, NULL);
    SDL_RenderPresent(v->renderer);
}

/* ---- export and screenshots ---------------------------------------------------------- */

/* A file name a shell leaves alone: the step's name with anything but
 * letters, digits, '.', '-' and '_' turned into '_'. */
static void export_path(const viewer *v, char *buf, size_t n) {
    const ts_view_entry *e = &v->steps.entry[v->st.current];
    char name[160];
    size_t k = 0;
    for (const char *p = e->name; *p && k + 1 < sizeof name; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                  c == '-' || c == '_';
        name[k++] = ok ? c : '_';
    }
    name[k] = '\0';
    char extra[48] = "";
    int heads = ts_view_heads(e), batches = ts_view_batches(e);
    int m = 0;
    if (batches > 1) m += snprintf(extra + m, sizeof extra - (size_t)m, "-b%d", v->st.batch < batches ? v->st.batch : 0);
    if (heads > 0 && v->st.head >= 0 && v->st.head < heads)
        snprintf(extra + m, sizeof extra - (size_t)m, "-h%d", v->st.head);
    const char *dir = v->opt->export_dir && v->opt->export_dir[0] ? v->opt->export_dir : ".";
    snprintf(buf, n, "%s/step%04lld-%s%s.png", dir, (long long)v->st.current, name, extra);
}

static void export_view(viewer *v) {
    char path[1024];
    export_path(v, path, sizeof path);
    ts_view_geometry g;
    ts_view_geometry_of(&g, v->st.width, v->st.height, v->steps.n_snapshots > 1);
    /* At least 2x, so a figure made from a small window is still sharp. */
    double scale = v->scale > 2 ? v->scale : 2;
    ts_status s = ts_view_export_png(&v->st, &v->steps, v->trace, g.centre.w, g.centre.h, scale, path);
    ts_view_exported(&v->st, path, s);
    if (s == TS_OK) {
        printf("tscope view: exported %s\n", path);
        fflush(stdout);
    } else {
        fprintf(stderr, "tscope view: %s\n", ts_last_error());
    }
}

static ts_status screenshot(viewer *v, const char *path) {
    ts_status s = draw(v);
    if (s != TS_OK) return s;
    present(v);
    s = ts_png_write(v->surface, path);
    if (s == TS_OK) {
        printf("tscope view: screenshot %s\n", path);
        fflush(stdout);
    }
    return s;
}

/* ---- events ------------------------------------------------------------------------------ */

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
    case SDLK_RETURN:
    case SDLK_KP_ENTER: return TS_VIEW_KEY_ENTER;
    case SDLK_ESCAPE: return TS_VIEW_KEY_ESCAPE;
    case SDLK_BACKSPACE: return TS_VIEW_KEY_BACKSPACE;
    default: return TS_VIEW_KEY_NONE;
    }
}

/* Apply one SDL event; returns true when the frame must be drawn again. */
static bool handle(viewer *v, const SDL_Event *e) {
    ts_view_event ev = {0};
    switch (e->type) {
    case SDL_QUIT: ev.kind = TS_VIEW_EV_QUIT; break;
    case SDL_KEYDOWN:
        ev.kind = TS_VIEW_EV_KEY;
        ev.key = key_of(e->key.keysym.sym);
        if (ev.key == TS_VIEW_KEY_NONE) return false; /* characters come as text */
        break;
    case SDL_TEXTINPUT: {
        /* Printable ASCII only: step names are ASCII. */
        bool redraw = false;
        for (const char *c = e->text.text; *c; c++) {
            if ((unsigned char)*c < 32 || (unsigned char)*c > 126) continue;
            ts_view_event ch = {.kind = TS_VIEW_EV_KEY, .key = TS_VIEW_KEY_CHAR, .ch = *c};
            redraw |= ts_view_update(&v->st, &v->steps, &v->frame, &ch);
        }
        return redraw;
    }
    case SDL_MOUSEMOTION:
        ev = (ts_view_event){.kind = TS_VIEW_EV_MOTION, .x = e->motion.x, .y = e->motion.y};
        break;
    case SDL_MOUSEBUTTONDOWN:
    case SDL_MOUSEBUTTONUP:
        if (e->button.button != SDL_BUTTON_LEFT) return false;
        ev = (ts_view_event){.kind = e->type == SDL_MOUSEBUTTONDOWN ? TS_VIEW_EV_PRESS : TS_VIEW_EV_RELEASE,
                             .x = e->button.x, .y = e->button.y};
        break;
    case SDL_MOUSEWHEEL: {
        int mx, my;
        SDL_GetMouseState(&mx, &my);
        double dy = e->wheel.y * (e->wheel.direction == SDL_MOUSEWHEEL_FLIPPED ? -1 : 1);
        ev = (ts_view_event){.kind = TS_VIEW_EV_WHEEL, .x = mx, .y = my, .dy = dy};
        break;
    }
    case SDL_WINDOWEVENT:
        switch (e->window.event) {
        case SDL_WINDOWEVENT_SIZE_CHANGED: {
            int w, h;
            SDL_GetWindowSize(v->window, &w, &h);
            ev = (ts_view_event){.kind = TS_VIEW_EV_RESIZE, .x = w, .y = h};
            break;
        }
        case SDL_WINDOWEVENT_LEAVE: ev.kind = TS_VIEW_EV_LEAVE; break;
        case SDL_WINDOWEVENT_EXPOSED: present(v); return false;
        default: return false;
        }
        break;
    default: return false;
    }
    return ts_view_update(&v->st, &v->steps, &v->frame, &ev);
}

/* ---- scripts ------------------------------------------------------------------------------- */

/* Check every word before the window opens, so a typo fails at once. */
static ts_status check_script(const char *script) {
    if (!script) return TS_OK;
    char *copy = strdup(script);
    if (!copy) return ts_fail(TS_ERR_NOMEM, "view: out of memory");
    ts_status s = TS_OK;
    int n = 0;
    for (char *save = NULL, *w = strtok_r(copy, " \t\n", &save); w && s == TS_OK; w = strtok_r(NULL, " \t\n", &save)) {
        ts_view_event ev;
        const char *shot;
        s = ts_view_script_word(w, &ev, &shot);
        if (++n > MAX_SCRIPT_WORDS) s = ts_fail(TS_ERR_ARG, "the script has more than %d words", MAX_SCRIPT_WORDS);
    }
    free(copy);
    return s;
}

/* Replay the script as if typed, drawing after every change (so the mouse
 * keys such as + find the cells where they are) and pumping SDL's queue (so
 * the window stays responsive). */
static ts_status run_script(viewer *v, const char *script) {
    char *copy = strdup(script);
    if (!copy) return ts_fail(TS_ERR_NOMEM, "view: out of memory");
    ts_status s = TS_OK;
    for (char *save = NULL, *w = strtok_r(copy, " \t\n", &save); w && s == TS_OK && !v->st.quit;
         w = strtok_r(NULL, " \t\n", &save)) {
        ts_view_event ev;
        const char *shot;
        s = ts_view_script_word(w, &ev, &shot);
        if (s != TS_OK) break;
        if (shot) {
            s = screenshot(v, shot);
            continue;
        }
        if (ev.kind == TS_VIEW_EV_RESIZE) {
            /* Resize the real window; the state then takes the size SDL
             * reports, as after a user's drag. */
            int ww, wh;
            SDL_SetWindowSize(v->window, (int)ev.x, (int)ev.y);
            SDL_PumpEvents();
            SDL_GetWindowSize(v->window, &ww, &wh);
            ev.x = ww;
            ev.y = wh;
        }
        bool changed = ts_view_update(&v->st, &v->steps, &v->frame, &ev);
        if (ev.kind == TS_VIEW_EV_PRESS && strncmp(w, "click:", 6) == 0) {
            /* A click is a press and a release. */
            ts_view_event up = {.kind = TS_VIEW_EV_RELEASE, .x = ev.x, .y = ev.y};
            changed |= ts_view_update(&v->st, &v->steps, &v->frame, &up);
        }
        if (changed) {
            if (v->st.export_wanted) export_view(v);
            s = draw(v);
            present(v);
        }
        SDL_PumpEvents();
    }
    free(copy);
    return s;
}

/* ---- the loop --------------------------------------------------------------------------------- */

static ts_status loop(viewer *v) {
    bool dirty = true;
    while (!v->st.quit) {
        if (dirty) {
            ts_status s = draw(v);
            if (s != TS_OK) return s;
            present(v);
            dirty = false;
        }
        SDL_Event e;
        if (!SDL_WaitEvent(&e)) return ts_fail(TS_ERR_IO, "view: waiting for events: %s", SDL_GetError());
        dirty |= handle(v, &e);
        /* Take everything queued before drawing: a fast mouse makes many
         * motion events, and only the last position matters. */
        while (SDL_PollEvent(&e)) dirty |= handle(v, &e);
        if (v->st.export_wanted) {
            export_view(v);
            dirty = true;
        }
    }
    return TS_OK;
}

ts_status ts_view_run(const char *trace_path, const ts_view_options *opt) {
    viewer v;
    memset(&v, 0, sizeof v);
    v.opt = opt;
    v.shown = -1;
    ts_status s = check_script(opt->script);
    if (s != TS_OK) return s;
    if (opt->export_dir && opt->export_dir[0]) {
        struct stat sb;
        if (stat(opt->export_dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
            return ts_fail(TS_ERR_IO, "the export directory %s does not exist", opt->export_dir);
    }
    s = ts_trace_open(trace_path, &v.trace);
    if (s == TS_OK) s = ts_view_steps_from_trace(&v.steps, v.trace);
    if (s == TS_OK && v.steps.n == 0) s = ts_fail(TS_ERR_FORMAT, "%s holds no steps", trace_path);
    if (s == TS_OK) s = open_window(&v, trace_path);
    if (s == TS_OK) {
        int w, h;
        SDL_GetWindowSize(v.window, &w, &h);
        s = ts_view_state_init(&v.st, &v.steps, w, h);
    }
    if (s == TS_OK && ts_trace_warning(v.trace)[0])
        snprintf(v.st.message, sizeof v.st.message, "%s", ts_trace_warning(v.trace));
    if (s == TS_OK && opt->script) s = run_script(&v, opt->script);
    if (s == TS_OK && opt->screenshot)
        s = screenshot(&v, opt->screenshot);
    else if (s == TS_OK)
        s = loop(&v);
    if (opt->verbose && v.frames)
        fprintf(stderr, "view: %d frames, draw time mean %.2f ms, max %.2f ms\n", v.frames,
                v.draw_ms_sum / v.frames, v.draw_ms_max);
    viewer_free(&v);
    return s;
}
