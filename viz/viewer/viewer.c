/* viewer: the window. Owns the trace, the state and a ts_window (the SDL
 * window and the cairo image surface the frame is drawn into), and runs:
 *
 *   init -> [wait for events -> update -> (changed?) draw -> upload] -> deinit
 *
 * Idle costs nothing: SDL_WaitEvent sleeps until something happens, and a
 * frame is drawn only when an update says the state changed. The window
 * itself, its HiDPI scale and the loop are tscope/viewer.h's "window", shared with
 * the lesson mode (lesson_view.c).
 */
#include <SDL.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tscope/viewer.h"
#include "viewer_internal.h"

#define DEFAULT_W 1280
#define DEFAULT_H 800
#define MAX_SCRIPT_WORDS 4096

typedef struct viewer {
    ts_trace *trace;
    ts_view_steps steps;
    ts_view_state st;
    ts_view_frame frame;
    ts_window win;
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
    char title[512];
    const char *base = strrchr(path, '/');
    snprintf(title, sizeof title, "tscope view: %s", base ? base + 1 : path);
    ts_window_spec spec = {.who = "view",
                           .title = title,
                           .width = v->opt->width > 0 ? v->opt->width : DEFAULT_W,
                           .height = v->opt->height > 0 ? v->opt->height : DEFAULT_H,
                           .min_width = 640,
                           .min_height = 400,
                           .name_display = true};
    bool nd;
    char why[512];
    ts_status s = ts_window_open(&v->win, &spec, &nd, why, sizeof why);
    return nd ? no_display(path, why) : s;
}

static void viewer_free(viewer *v) {
    ts_window_close(&v->win);
    ts_view_state_free(&v->st);
    ts_view_steps_free(&v->steps);
    ts_trace_close(v->trace);
}

/* ---- drawing and showing --------------------------------------------------------- */

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

static ts_status draw(void *ctx) {
    viewer *v = ctx;
    ts_status s = ts_window_fit(&v->win, "view");
    if (s != TS_OK) return s;
    release_gathered(v);
    cairo_t *cr = ts_window_cairo(&v->win);
    double t0 = now_ms();
    s = ts_view_draw(cr, &v->st, &v->steps, v->trace, &v->frame);
    cairo_destroy(cr);
    cairo_surface_flush(v->win.surface);
    double ms = now_ms() - t0;
    v->frame.draw_ms = ms;
    v->frames++;
    v->draw_ms_sum += ms;
    if (ms > v->draw_ms_max) v->draw_ms_max = ms;
    if (v->opt->verbose) {
        double anon, file;
        resident_mb(&anon, &file);
        fprintf(stderr, "view: frame %d: step %lld drawn in %.2f ms (%d x %d px); resident %.1f MB anon, %.1f MB trace pages\n",
                v->frames, (long long)v->st.current, ms, v->win.pw, v->win.ph, anon, file);
    }
    return s;
}

/* ---- export ---------------------------------------------------------- */

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
    double scale = v->win.scale > 2 ? v->win.scale : 2;
    ts_status s = ts_view_export_png(&v->st, &v->steps, v->trace, g.centre.w, g.centre.h, scale, path);
    ts_view_exported(&v->st, path, s);
    if (s == TS_OK) {
        printf("tscope view: exported %s\n", path);
        fflush(stdout);
    } else {
        fprintf(stderr, "tscope view: %s\n", ts_last_error());
    }
}

/* ---- events ------------------------------------------------------------------------------ */

/* Apply one SDL event; returns true when the frame must be drawn again. */
static bool handle(void *ctx, const SDL_Event *e) {
    viewer *v = ctx;
    ts_view_event ev = {0};
    switch (e->type) {
    case SDL_QUIT: ev.kind = TS_VIEW_EV_QUIT; break;
    case SDL_KEYDOWN:
        ev.kind = TS_VIEW_EV_KEY;
        ev.key = ts_window_key(e->key.keysym.sym);
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
            SDL_GetWindowSize(v->win.window, &w, &h);
            ev = (ts_view_event){.kind = TS_VIEW_EV_RESIZE, .x = w, .y = h};
            break;
        }
        case SDL_WINDOWEVENT_LEAVE: ev.kind = TS_VIEW_EV_LEAVE; break;
        case SDL_WINDOWEVENT_EXPOSED: ts_window_present(&v->win); return false;
        default: return false;
        }
        break;
    default: return false;
    }
    return ts_view_update(&v->st, &v->steps, &v->frame, &ev);
}

/* ---- scripts and the loop ----------------------------------------------------------------- */

static bool quit_wanted(const void *ctx) { return ((const viewer *)ctx)->st.quit; }

static bool script_update(void *ctx, const char *word, const ts_view_event *ev) {
    viewer *v = ctx;
    bool changed = ts_view_update(&v->st, &v->steps, &v->frame, ev);
    if (ev->kind == TS_VIEW_EV_PRESS && strncmp(word, "click:", 6) == 0) {
        /* A click is a press and a release. */
        ts_view_event up = {.kind = TS_VIEW_EV_RELEASE, .x = ev->x, .y = ev->y};
        changed |= ts_view_update(&v->st, &v->steps, &v->frame, &up);
    }
    if (changed && v->st.export_wanted) export_view(v);
    return changed;
}

static bool export_if_wanted(void *ctx) {
    viewer *v = ctx;
    if (!v->st.export_wanted) return false;
    export_view(v);
    return true;
}

static ts_window_client client(viewer *v) {
    return (ts_window_client){.ctx = v,
                              .who = "view",
                              .draw = draw,
                              .handle = handle,
                              .after_events = export_if_wanted,
                              .update = script_update,
                              .quit = quit_wanted};
}

ts_status ts_view_run(const char *trace_path, const ts_view_options *opt) {
    viewer v;
    memset(&v, 0, sizeof v);
    v.opt = opt;
    v.shown = -1;
    ts_status s = ts_window_check_script(opt->script, "view", MAX_SCRIPT_WORDS);
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
        SDL_GetWindowSize(v.win.window, &w, &h);
        s = ts_view_state_init(&v.st, &v.steps, w, h);
    }
    if (s == TS_OK && ts_trace_warning(v.trace)[0])
        snprintf(v.st.message, sizeof v.st.message, "%s", ts_trace_warning(v.trace));
    ts_window_client c = client(&v);
    if (s == TS_OK && opt->script) s = ts_window_replay(&v.win, &c, opt->script);
    if (s == TS_OK && opt->screenshot)
        s = ts_window_screenshot(&v.win, &c, opt->screenshot);
    else if (s == TS_OK)
        s = ts_window_loop(&v.win, &c);
    if (opt->verbose && v.frames)
        fprintf(stderr, "view: %d frames, draw time mean %.2f ms, max %.2f ms\n", v.frames,
                v.draw_ms_sum / v.frames, v.draw_ms_max);
    viewer_free(&v);
    return s;
}
