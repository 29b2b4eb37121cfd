/* viewer: `tscope view`, a window that steps through a trace. Its state,
 * the keys and script words it understands, and the SDL window it paints.
 */
#ifndef TSCOPE_VIEWER_H
#define TSCOPE_VIEWER_H

#include <SDL.h>
#include <cairo.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tscope/core.h"
#include "tscope/model.h"
#include "tscope/render.h"
#include "tscope/tokenizer.h"
#include "tscope/trace.h"

/* viewer: `tscope view`, a window that walks through a trace step by step.
 *
 * The viewer is split the way raylib's examples and kilo are: a state
 * (ts_view_state) that only ts_view_update changes, one event at a time; a
 * draw (ts_view_draw) that reads the state and paints a whole frame into any
 * cairo_t, never changing the state; and a loop (ts_view_run) that owns the
 * SDL window, turns SDL events into ts_view_events, redraws only when an
 * update said something changed, and uploads cairo's pixels to an SDL
 * texture. Everything but the loop works without a window, so tests drive it
 * with events and look at the pixels of an image surface.
 *
 * The centre of the frame is the current step drawn by a ts_scene (render.h, "scene"),
 * the code `tscope png` uses: there is one drawing path.
 *
 * Steps are grouped as a tree: a layer ("encoder.layers.0") holds modules
 * ("encoder.layers.0.self_attn") that hold steps. The list on the left shows
 * the layer of the current step unfolded and the other layers folded to one
 * row each. A training trace records the same steps again for every snapshot;
 * a snapshot starts at each repetition of the trace's first step name, and
 * the list shows the steps of the current snapshot only.
 */

/* ---- input: keys, mouse and script words ----------------------------------
 * The vocabulary of events every tscope window understands, whether they come
 * from SDL (ts_window_key) or from a --script (ts_view_script_word). It sits
 * below both the window and the viewer's state (viz/viewer/input.c). */

typedef enum ts_view_key {
    TS_VIEW_KEY_NONE,
    TS_VIEW_KEY_LEFT,
    TS_VIEW_KEY_RIGHT,
    TS_VIEW_KEY_UP,
    TS_VIEW_KEY_DOWN,
    TS_VIEW_KEY_PGUP,
    TS_VIEW_KEY_PGDN,
    TS_VIEW_KEY_HOME,
    TS_VIEW_KEY_END,
    TS_VIEW_KEY_ENTER,
    TS_VIEW_KEY_ESCAPE,
    TS_VIEW_KEY_BACKSPACE,
    TS_VIEW_KEY_TAB,  /* a text field's completion (tscope live) */
    TS_VIEW_KEY_CHAR, /* a printable character: ts_view_event.ch */
} ts_view_key;

typedef enum ts_view_event_kind {
    TS_VIEW_EV_KEY,
    TS_VIEW_EV_FIND,    /* jump to the step found for `text` (script: find:NAME) */
    TS_VIEW_EV_MOTION,  /* the mouse moved to (x, y) */
    TS_VIEW_EV_PRESS,   /* left button down at (x, y) */
    TS_VIEW_EV_RELEASE, /* left button up */
    TS_VIEW_EV_WHEEL,   /* dy > 0: away from the user (zoom in) at (x, y) */
    TS_VIEW_EV_LEAVE,   /* the mouse left the window */
    TS_VIEW_EV_RESIZE,  /* the window is now x by y user units */
    TS_VIEW_EV_QUIT,
} ts_view_event_kind;

typedef struct ts_view_event {
    ts_view_event_kind kind;
    ts_view_key key;
    char ch;          /* TS_VIEW_KEY_CHAR */
    double x, y, dy;  /* user units (window coordinates, not device pixels) */
    const char *text; /* TS_VIEW_EV_FIND */
} ts_view_event;

/* The viewer's key for an SDL key; TS_VIEW_KEY_NONE for the others
 * (characters come as text input). */
ts_view_key ts_window_key(SDL_Keycode k);

/* One word of a --script: left right up down pgup pgdn home end enter esc
 * backspace, a single character (0-9 b B e q ? / [ ] and any other),
 * find:NAME, and the mouse in window points: hover:X,Y (a move), click:X,Y
 * (a press; the caller adds the release), press:X,Y and release (a drag
 * between them), wheel:X,Y,DY; and resize:W,H (the window). `shot:FILE` is a
 * screenshot of the frame at that point: *shot gets FILE (pointing into
 * word) and the event is left as kind TS_VIEW_EV_KEY with key NONE.
 * TS_ERR_ARG (with a message naming the word) for an unknown word. */
ts_status ts_view_script_word(const char *word, ts_view_event *ev, const char **shot);

/* ---- the steps and their tree ------------------------------------------ */

/* What the viewer needs of one step (a copy of the trace's description). */
typedef struct ts_view_entry {
    const char *name; /* not owned: the trace's (or a test's) string */
    ts_op op;
    ts_tag tag;
    int rank;
    int64_t shape[TS_MAX_RANK];
    bool has_values;
    int batch_index; /* -1: every batch element kept; else the one kept */
    /* Filled by ts_view_steps_init: */
    int module;   /* index into module_name */
    int layer;    /* index into layer_name; -1 outside any layer */
    int snapshot; /* 0 for a trace of one run */
    int occurrence; /* how many earlier steps have the same name */
} ts_view_entry;

typedef struct ts_view_steps {
    ts_view_entry *entry; /* (n) */
    int64_t n;
    char **module_name;       /* (n_modules) "encoder.layers.0.self_attn"; "" for top-level steps */
    int n_modules;
    char **layer_name;        /* (n_layers) "encoder.layers.0", in order of appearance */
    int n_layers;
    int64_t *snapshot_start;  /* (n_snapshots + 1) first step of each snapshot, then n */
    int n_snapshots;
} ts_view_steps;

/* Copy n entries (names are not copied) and work out modules, layers and
 * snapshots. */
ts_status ts_view_steps_init(ts_view_steps *s, const ts_view_entry *entries, int64_t n);
/* The same from an open trace; names point into it (keep it open). */
ts_status ts_view_steps_from_trace(ts_view_steps *s, const ts_trace *t);
void ts_view_steps_free(ts_view_steps *s);

/* Heads of a step: dim 1 of a (B, H, S, S') attention or per-head tensor; 0
 * for other steps. */
int ts_view_heads(const ts_view_entry *e);
/* How many batch elements a step has (dim 0); 0 for steps without a batch
 * dim (positional encodings, parameters, scalars). */
int ts_view_batches(const ts_view_entry *e);

/* The step whose name contains `text` (or matches it as an fnmatch glob when
 * it has * ? or [), searching the current snapshot forward from after `from`
 * and wrapping; an exact name wins over a partial one. -1 when none. */
int64_t ts_view_find(const ts_view_steps *s, const char *text, int64_t from);

/* How many steps of the current snapshot `text` matches as ts_view_find
 * reads it (0 for an empty text): what `/` shows while it is typed. */
int ts_view_find_count(const ts_view_steps *s, const char *text, int64_t from);

/* One row of the list on the left. */
typedef enum ts_view_row_kind {
    TS_VIEW_ROW_STEP,   /* a step; indented when it is inside the open layer */
    TS_VIEW_ROW_LAYER,  /* a layer's header: folded (one row for all its steps) or open */
    TS_VIEW_ROW_MODULE, /* inside the open layer: a module's header (self_attn, norm1, ffn) */
} ts_view_row_kind;

typedef struct ts_view_row {
    ts_view_row_kind kind;
    int64_t step; /* STEP: the step; LAYER, MODULE: its first step in the snapshot */
    int layer;    /* the layer, -1 for a top-level step */
    int module;   /* the step's module; -1 when the row is not inside a module header */
    int count;    /* LAYER, MODULE: steps in it */
    bool open;    /* LAYER: unfolded */
} ts_view_row;

/* Room ts_view_rows needs. */
#define TS_VIEW_ROWS_MAX(s) (2 * (s)->n + (s)->n_layers + 1)

/* The rows for the snapshot of step `current`: the layer holding it open
 * (a header for each of its modules, then the module's steps), the other
 * layers folded. rows needs room for TS_VIEW_ROWS_MAX(s) entries. Returns
 * the count. */
int ts_view_rows(const ts_view_steps *s, int64_t current, ts_view_row *rows);

/* ---- the frame ------------------------------------------------------------ */

/* Where the parts of a frame go for a window of w x h user units. */
typedef struct ts_view_geometry {
    ts_render_rect list;   /* the step list */
    ts_render_rect centre; /* the current step's view */
    ts_render_rect slider; /* the snapshot slider; zero height without snapshots */
    ts_render_rect status; /* the status bar */
    double row_h;          /* height of a list row */
    int list_rows;         /* rows that fit in the list */
} ts_view_geometry;

void ts_view_geometry_of(ts_view_geometry *g, double w, double h, bool slider);

/* ---- state and events ------------------------------------------------------ */

typedef enum ts_view_mode {
    TS_VIEW_MODE_BROWSE,
    TS_VIEW_MODE_FIND, /* typing a name after '/' */
} ts_view_mode;

#define TS_VIEW_FIND_MAX 128
#define TS_VIEW_MESSAGE_MAX 512

/* What the user is looking at. Only ts_view_update changes it. */
typedef struct ts_view_state {
    int64_t current; /* the step shown */
    int head;        /* -1: all heads of an attention step; else one head */
    int batch;       /* batch element (dim 0) */
    ts_render_state cells; /* zoom and pan of a heatmap; the hovered cell */
    bool hover;            /* the mouse is over a cell: cells.hl_* say which */
    double width, height;  /* the window in user units */
    int list_top;          /* first list row shown */
    bool help;             /* the help overlay is up */
    ts_view_mode mode;
    char find[TS_VIEW_FIND_MAX]; /* what is typed after '/' */
    char message[TS_VIEW_MESSAGE_MAX]; /* the last action's result, shown in the status bar */
    bool quit;
    bool export_wanted; /* 'e': the loop exports, then calls ts_view_exported */
    bool dragging;      /* panning with the left button held */
    bool slider_drag;   /* moving the snapshot slider */
    double drag_x, drag_y; /* where the drag started, and the pan then: */
    int drag_row0, drag_col0;
    ts_view_row *rows; /* (n_rows) the list, kept in step with `current` */
    int n_rows;
} ts_view_state;

/* What the last draw left for the next update: where the cells landed, so the
 * mouse can be mapped to a cell. A zeroed struct means nothing drawn yet. */
typedef struct ts_view_frame {
    ts_render_layout layout; /* of the centre view */
    int panel_head[TS_RENDER_MAX_PANELS]; /* head shown in each panel, -1 unknown */
    bool drawn;
    double draw_ms; /* how long the frame took */
} ts_view_frame;

/* Start at step 0 of a w x h window. */
ts_status ts_view_state_init(ts_view_state *st, const ts_view_steps *s, double w, double h);
void ts_view_state_free(ts_view_state *st);

/* Apply one event. frame is what the last draw left (NULL: nothing drawn).
 * Returns true when the frame must be redrawn. */
bool ts_view_update(ts_view_state *st, const ts_view_steps *s, const ts_view_frame *frame,
                    const ts_view_event *ev);

/* After the loop exported the view (export_wanted): clear the request and
 * say where it went, or what failed. */
void ts_view_exported(ts_view_state *st, const char *path, ts_status status);

/* ---- drawing ------------------------------------------------------------------ */

/* Paint a whole frame of st into cr (w x h user units, as st->width and
 * st->height): list, centre view, slider, status bar, help overlay. Reads
 * st and the trace; writes only `out`. */
ts_status ts_view_draw(cairo_t *cr, const ts_view_state *st, const ts_view_steps *s, ts_trace *t,
                       ts_view_frame *out);

/* Draw the centre view alone into a PNG of w x h user units at `scale`
 * device pixels per unit (what 'e' writes). */
ts_status ts_view_export_png(const ts_view_state *st, const ts_view_steps *s, ts_trace *t, double w,
                             double h, double scale, const char *path);

/* ---- the window ------------------------------------------------------------------ */

typedef struct ts_view_options {
    int width, height;      /* window size in user units (default 1280 x 800) */
    const char *script;     /* keys to replay first, NULL for none */
    const char *screenshot; /* write the final frame here and exit */
    const char *export_dir; /* where 'e' writes (default ".") */
    bool verbose;           /* log each frame's draw time on stderr */
} ts_view_options;

/* Why ts_view_run could not open a window: no display to show it on. The
 * message from ts_last_error says so in one line. */
#define TS_VIEW_NO_DISPLAY TS_ERR_UNSUPPORTED

/* Open the trace and a window and run until the user quits (or, with a
 * screenshot, until the script is done). */
ts_status ts_view_run(const char *trace_path, const ts_view_options *opt);

/* window: what the SDL windows of tscope (the viewer, viz/viewer/viewer.c, and the
 * lesson mode, viz/pages/lesson_view.c) share: the window, renderer and texture,
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

/* Pango markup in DejaVu Sans at size points, its left edge at x minus
 * align times its width (0 left, 0.5 centred, 1 right), centred on y; cut
 * at the start with an ellipsis past max_w when max_w > 0. For the frames
 * of windows: status bars, fields, panels. */
void ts_window_text(cairo_t *cr, const char *markup, double size, bool bold, double x, double y, double align,
                    double r, double g, double b, double max_w);

/* Upload the surface and show it. */
void ts_window_present(ts_window *w);

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

/* ---- live: the model answering as the text is typed (viz/viewer/live.c) ----
 * `tscope live`: a text field, the viewer on the model's pass over that text,
 * and the next token's distribution. Every edit reruns the model in memory;
 * the view keeps the step (and head) it was showing. The functions below
 * work without a window (tests and `tscope bench live` draw into an image
 * surface); ts_live_run opens one. */

typedef struct ts_live ts_live;

typedef struct ts_live_options {
    int width, height;      /* points (default 1280 x 800) */
    const char *text;       /* the text (an encoder-decoder's source) to start with, or NULL */
    const char *target;     /* an encoder-decoder's target to start with (after <bos>), or NULL */
    float temperature;      /* of the distribution panel (default 1) */
    int top_k;              /* 0: every token */
    const char *script;     /* live script words (ts_live_script), or NULL */
    const char *screenshot; /* write the last frame here and exit */
    bool verbose;           /* each pass's and frame's time on stderr */
} ts_live_options;

/* A live session on m (a language model built for its longest context; the
 * session changes its length) and tok; both stay the caller's. An
 * encoder-decoder over tokens (copy, reverse) has no tokenizer (tok NULL):
 * its fields' words are numbered as `tscope run --text` numbers them, the
 * source's first, and it has two fields, the source and the decoder's
 * target, which Tab grows one greedy step at a time. */
ts_status ts_live_new(ts_live **out, ts_model *m, ts_lmtok *tok, const ts_live_options *o);
void ts_live_free(ts_live *l);

/* Edits, each followed by a pass. Insert at the cursor (invalid UTF-8 is
 * refused with a note, not an error); delete the character before it;
 * append the token of the panel's rank-th bar (the bars are ordered by
 * probability; with heads knocked out, by the larger of before and after). */
ts_status ts_live_insert(ts_live *l, const char *utf8);
ts_status ts_live_backspace(ts_live *l);
ts_status ts_live_append_token(ts_live *l, int rank);
/* Tab: append the most likely next token (with any heads knocked out). */
ts_status ts_live_tab(ts_live *l);
/* That token: its id (-1 before any pass), probability and label. */
int ts_live_best(const ts_live *l, float *p, char *label, size_t cap);
/* Move the cursor a character (-1, +1) or to the start or end (-2, +2);
 * true when it moved. */
bool ts_live_cursor(ts_live *l, int direction);
/* Run the model again on the text as it is. */
ts_status ts_live_pass(ts_live *l);

/* Knock a head out (an ablation spec, experiment.h: "decoder.layers.1.self_attn.head0"),
 * or bring it back when it is out; the pass reruns with the others. */
ts_status ts_live_knock(ts_live *l, const char *spec);
/* The head of the grid on screen at window point (x, y), as a spec. */
bool ts_live_head_at(const ts_live *l, double x, double y, char *spec, size_t cap);
int ts_live_knocked(const ts_live *l); /* heads out */
/* The logit lens on or off: each layer's stream read through the final norm
 * and the head, drawn as layers x positions of predicted tokens (the
 * experiments' --lens). While it is on, every pass is a full one. */
ts_status ts_live_lens(ts_live *l, bool on);
bool ts_live_lens_on(const ts_live *l);
/* The live views in place of the step on screen (Ctrl+G, the script word
 * `views`): every head, one head large, the lens and the loss strip before
 * and after a knock-out, laid out by the same C as the web page's live page
 * (render.h's ts_live_views_draw). A causal language model only. */
ts_status ts_live_show_views(ts_live *l, bool on);
bool ts_live_show_views_on(const ts_live *l);
/* With heads out: the token whose next-token probability moved most, its
 * probability before and after (its id; -1 with none out). */
int ts_live_change(const ts_live *l, float *before, float *after, char *label, size_t cap);

/* A viewer event (keys, mouse in window points): steps, heads, cells. A new
 * step reruns the pass for its values. *redraw: the frame changed. */
ts_status ts_live_view_event(ts_live *l, const ts_view_event *ev, bool *redraw);
/* The bar of the distribution panel at (x, y), or -1; whether (x, y) is on the view. */
int ts_live_bar_at(const ts_live *l, double x, double y);
bool ts_live_in_view(const ts_live *l, double x, double y);
void ts_live_resize(ts_live *l, double w, double h);

/* Paint the whole frame (w x h as given at ts_live_new or ts_live_resize). */
ts_status ts_live_draw(ts_live *l, cairo_t *cr);
/* The same into an image surface of the session's own, as a window would:
 * what `tscope bench live` times. */
ts_status ts_live_draw_offscreen(ts_live *l);

/* What the session shows: the text, the status note, the step on screen,
 * the rank-th next token (its id; -1 past the last) with its probability
 * and label, the last pass's and frame's milliseconds. */
const char *ts_live_text(const ts_live *l);
const char *ts_live_target(const ts_live *l); /* "" but for an encoder-decoder */
/* The field that takes the keys: 0 the text (the source), 1 the target; false when it was already so or there is none. */
bool ts_live_focus(ts_live *l, int field);
int ts_live_fields(const ts_live *l); /* 1, or 2 for an encoder-decoder */
/* The field at a window point, or -1. */
int ts_live_field_at(const ts_live *l, double x, double y);
const char *ts_live_note(const ts_live *l);
const char *ts_live_step(const ts_live *l);
int ts_live_top(const ts_live *l, int rank, float *p, char *label, size_t cap);
double ts_live_model_ms(const ts_live *l);
int ts_live_tokens(const ts_live *l); /* tokens of the text (all, not only the model's window); an encoder-decoder's source words read */
/* Positions the last pass took from the cache instead of computing them
 * (appending to a causal model's text computes the new ones only). */
int ts_live_reused(const ts_live *l);
/* The last pass as a trace: the step on screen and the logits keep their values. */
const ts_trace *ts_live_trace(const ts_live *l);
double ts_live_draw_ms(const ts_live *l);
bool ts_live_quit_wanted(const ts_live *l);
void ts_live_request_quit(ts_live *l);

/* One word of a live script, applied: type:TEXT (words after it that are
 * not script words continue the text, after a space), tab, backspace,
 * left right (cursor), up down (step), pgup pgdn (layer), home end (cursor),
 * head:N (one head; head:all), pick:N (append the N-th bar's token),
 * find:NAME, hover:X,Y, click:X,Y, esc. ts_live_script_check checks a whole
 * script before a window opens; shot:FILE words are left to the caller. */
ts_status ts_live_script_check(const char *script);

/* One SDL event in a live window (keys, text, mouse, the window's size);
 * true when the frame must be drawn again. Esc asks to quit. */
bool ts_live_handle(ts_live *l, const SDL_Event *e);

/* Open a window on the session and run until the user quits (or, with a
 * screenshot, until the script is done). No display: TS_VIEW_NO_DISPLAY. */
ts_status ts_live_run(ts_live *l, const ts_live_options *opt);

/* Replay a script off-screen (no window), drawing after every word into an
 * image surface of the session's size; per word, the pass and the frame's
 * milliseconds go to on_word (may be NULL). shot:FILE writes a PNG. */
ts_status ts_live_replay(ts_live *l, const char *script,
                         void (*on_word)(void *ctx, const char *word, double pass_ms, double draw_ms), void *ctx,
                         int width, int height);

#endif
