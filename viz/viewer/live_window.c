/* live_window: the window of `tscope live`, and its scripts.
 *
 * The field has the keyboard: characters type, Backspace deletes, Left and
 * Right move the cursor, Tab appends the most likely next token. The viewer
 * gets what a text field has no use for: Up and Down walk the steps, PgUp and
 * PgDn the layers, Ctrl with a digit picks a head (Ctrl+0: all), the mouse
 * hovers and zooms the cells. A click on a bar of the panel appends its token.
 *
 * Scripts (--script, and `tscope bench live`) use the same actions, one word
 * each (ts_live_script_check lists them); `type:` takes the words after it
 * that are no script word as more text, so "type:And God sa tab" types
 * "And God sa" and then presses Tab.
 */
#include <SDL.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/viewer.h"

/* ---- script words ----------------------------------------------------------- */

static const char *const plain_words[] = {"tab", "backspace", "left", "right", "up", "down",
                                          "pgup", "pgdn", "home", "end", "esc", "lens", "views", "enter"};
static const char *const prefixed_words[] = {"type:", "head:", "pick:", "find:", "hover:", "click:", "shot:", "knock:", "focus:"};

static bool is_script_word(const char *w) {
    for (size_t i = 0; i < sizeof plain_words / sizeof plain_words[0]; i++)
        if (strcmp(w, plain_words[i]) == 0) return true;
    for (size_t i = 0; i < sizeof prefixed_words / sizeof prefixed_words[0]; i++)
        if (strncmp(w, prefixed_words[i], strlen(prefixed_words[i])) == 0) return true;
    return false;
}

typedef struct live_action {
    char *word; /* the script's word (owned) */
    char *text; /* type: the text to type, words after it joined (owned) */
} live_action;

typedef struct live_script {
    live_action *a;
    int n;
} live_script;

static void script_free(live_script *s) {
    for (int i = 0; i < s->n; i++) free(s->a[i].word), free(s->a[i].text);
    free(s->a);
    memset(s, 0, sizeof *s);
}

static ts_status bad_word(const char *w) {
    return ts_fail(TS_ERR_ARG,
                   "unknown word '%s' in the live script (type:TEXT tab backspace left right up down pgup pgdn "
                   "home end esc head:N|all pick:N knock:HEAD find:NAME hover:X,Y click:X,Y shot:FILE)",
                   w);
}

static bool number_word(const char *w, const char *prefix, int lo, int hi) {
    size_t n = strlen(prefix);
    int64_t v;
    return strncmp(w, prefix, n) == 0 && ts_text_int(w + n, lo, hi, &v);
}

/* A word of the script's vocabulary with a number it cannot take: say which numbers it takes. */
static ts_status bad_number(const char *w, const char *takes) {
    return ts_fail(TS_ERR_ARG, "'%.60s' in the live script: %s", w, takes);
}

static bool point_word(const char *w) {
    double x, y;
    int used = 0;
    const char *colon = strchr(w, ':');
    return colon && sscanf(colon + 1, "%lf,%lf%n", &x, &y, &used) == 2 && colon[1 + used] == '\0';
}

static ts_status check_action(const live_action *a) {
    const char *w = a->word;
    size_t bad;
    if (strncmp(w, "type:", 5) == 0 && a->text[0] && !ts_text_utf8_valid(a->text, strlen(a->text), &bad))
        return ts_fail(TS_ERR_ARG, "type: in the live script is not UTF-8 (byte 0x%02X at offset %zu)",
                       (unsigned char)a->text[bad], bad);
    if (strncmp(w, "type:", 5) == 0) return a->text[0] ? TS_OK : bad_word(w);
    if (strncmp(w, "head:", 5) == 0)
        return strcmp(w, "head:all") == 0 || number_word(w, "head:", 0, 8)
                   ? TS_OK
                   : bad_number(w, "head:N shows head N, 0 to 8 (the keys 1 to 9), or head:all");
    if (strncmp(w, "pick:", 5) == 0)
        return number_word(w, "pick:", 0, 9) ? TS_OK
                                             : bad_number(w, "pick:N appends the next-token panel's bar N, 0 to 9");
    if (strncmp(w, "hover:", 6) == 0 || strncmp(w, "click:", 6) == 0) return point_word(w) ? TS_OK : bad_word(w);
    if ((strncmp(w, "find:", 5) == 0 || strncmp(w, "shot:", 5) == 0) && !w[5]) return bad_word(w);
    if (strncmp(w, "knock:", 6) == 0 && !w[6]) return bad_word(w);
    if (strncmp(w, "focus:", 6) == 0) return strcmp(w + 6, "source") == 0 || strcmp(w + 6, "target") == 0 ? TS_OK : bad_word(w);
    return is_script_word(w) ? TS_OK : bad_word(w);
}

static ts_status script_parse(const char *script, live_script *out) {
    memset(out, 0, sizeof *out);
    if (!script) return TS_OK;
    char *copy = strdup(script);
    if (!copy) return ts_fail(TS_ERR_NOMEM, "live: out of memory");
    int cap = 0;
    ts_status st = TS_OK;
    char *save = NULL;
    char *w = strtok_r(copy, " \t\n", &save);
    while (w && !st) {
        if (out->n == cap) {
            cap = cap ? 2 * cap : 16;
            live_action *grown = realloc(out->a, sizeof *grown * (size_t)cap);
            if (!grown) {
                st = ts_fail(TS_ERR_NOMEM, "live: out of memory");
                break;
            }
            out->a = grown;
        }
        live_action *a = &out->a[out->n++];
        a->word = strdup(w);
        a->text = NULL;
        char *next = strtok_r(NULL, " \t\n", &save);
        if (a->word && strncmp(w, "type:", 5) == 0) {
            size_t len = strlen(w + 5), cap_t = len + 1;
            a->text = malloc(cap_t);
            if (a->text) memcpy(a->text, w + 5, cap_t);
            while (a->text && next && !is_script_word(next)) {
                size_t add = strlen(next);
                char *grown = realloc(a->text, len + add + 2);
                if (!grown) break;
                a->text = grown;
                a->text[len++] = ' ';
                memcpy(a->text + len, next, add + 1);
                len += add;
                next = strtok_r(NULL, " \t\n", &save);
            }
            if (!a->text) st = ts_fail(TS_ERR_NOMEM, "live: out of memory");
        }
        if (!st && !a->word) st = ts_fail(TS_ERR_NOMEM, "live: out of memory");
        if (!st) st = check_action(a);
        w = next;
    }
    free(copy);
    if (st) script_free(out);
    return st;
}

ts_status ts_live_script_check(const char *script) {
    live_script s;
    TS_TRY(script_parse(script, &s));
    script_free(&s);
    return TS_OK;
}

static ts_status view_key(ts_live *l, ts_view_key key, char ch, bool *redraw) {
    ts_view_event ev = {.kind = TS_VIEW_EV_KEY, .key = key, .ch = ch};
    return ts_live_view_event(l, &ev, redraw);
}

/* A press at (x, y): a bar appends its token; on the view, the viewer's click. */
static ts_status click_at(ts_live *l, double x, double y, bool *redraw) {
    int bar = ts_live_bar_at(l, x, y);
    if (bar >= 0) {
        *redraw = true;
        return ts_live_append_token(l, bar);
    }
    int field = ts_live_field_at(l, x, y);
    if (field >= 0) { /* a field takes the keys */
        *redraw = ts_live_focus(l, field);
        return TS_OK;
    }
    if (!ts_live_in_view(l, x, y)) return TS_OK;
    char spec[300];
    if (ts_live_head_at(l, x, y, spec, sizeof spec)) { /* a head of a grid: knocked out, or back */
        *redraw = true;
        return ts_live_knock(l, spec);
    }
    ts_view_event press = {.kind = TS_VIEW_EV_PRESS, .x = x, .y = y}, release = {.kind = TS_VIEW_EV_RELEASE, .x = x, .y = y};
    bool a = false, b = false;
    TS_TRY(ts_live_view_event(l, &press, &a));
    TS_TRY(ts_live_view_event(l, &release, &b));
    *redraw = a || b;
    return TS_OK;
}

/* Apply one action; *shot: a screenshot is asked for here. */
static ts_status apply(ts_live *l, const live_action *a, bool *redraw, const char **shot) {
    const char *w = a->word;
    *redraw = true;
    *shot = NULL;
    if (strncmp(w, "type:", 5) == 0) return ts_live_insert(l, a->text);
    if (strncmp(w, "shot:", 5) == 0) {
        *shot = w + 5;
        *redraw = false;
        return TS_OK;
    }
    if (strcmp(w, "tab") == 0) return ts_live_tab(l);
    if (strcmp(w, "enter") == 0) return ts_live_insert(l, "\n"); /* a line break, seen in the field */
    if (strcmp(w, "lens") == 0) return ts_live_lens(l, !ts_live_lens_on(l));
    if (strcmp(w, "views") == 0) return ts_live_show_views(l, !ts_live_show_views_on(l));
    if (strncmp(w, "focus:", 6) == 0) {
        int field = strcmp(w + 6, "target") == 0;
        if (field >= ts_live_fields(l)) return ts_fail(TS_ERR_ARG, "live: %s: this model has one field, the text", w);
        *redraw = ts_live_focus(l, field);
        return TS_OK;
    }
    if (strncmp(w, "knock:", 6) == 0) return ts_live_knock(l, w + 6);
    int64_t num = 0; /* pick: and head: were checked by check_action */
    if (strncmp(w, "pick:", 5) == 0) return ts_live_append_token(l, ts_text_int(w + 5, 0, 9, &num) ? (int)num : -1);
    if (strcmp(w, "backspace") == 0) return ts_live_backspace(l);
    if (strcmp(w, "left") == 0 || strcmp(w, "right") == 0) {
        *redraw = ts_live_cursor(l, w[0] == 'l' ? -1 : 1);
        return TS_OK;
    }
    if (strcmp(w, "home") == 0 || strcmp(w, "end") == 0) {
        *redraw = ts_live_cursor(l, w[0] == 'h' ? -2 : 2);
        return TS_OK;
    }
    if (strcmp(w, "up") == 0) return view_key(l, TS_VIEW_KEY_LEFT, 0, redraw);
    if (strcmp(w, "down") == 0) return view_key(l, TS_VIEW_KEY_RIGHT, 0, redraw);
    if (strcmp(w, "pgup") == 0) return view_key(l, TS_VIEW_KEY_UP, 0, redraw);
    if (strcmp(w, "pgdn") == 0) return view_key(l, TS_VIEW_KEY_DOWN, 0, redraw);
    if (strncmp(w, "head:", 5) == 0)
        return view_key(l, TS_VIEW_KEY_CHAR,
                        strcmp(w + 5, "all") == 0 || !ts_text_int(w + 5, 0, 8, &num) ? '0' : (char)('1' + num), redraw);
    if (strcmp(w, "esc") == 0) {
        ts_live_request_quit(l);
        return TS_OK;
    }
    double x = 0, y = 0;
    if (strncmp(w, "find:", 5) == 0) {
        ts_view_event ev = {.kind = TS_VIEW_EV_FIND, .text = w + 5};
        return ts_live_view_event(l, &ev, redraw);
    }
    sscanf(strchr(w, ':') + 1, "%lf,%lf", &x, &y);
    if (strncmp(w, "click:", 6) == 0) return click_at(l, x, y, redraw);
    ts_view_event ev = {.kind = TS_VIEW_EV_MOTION, .x = x, .y = y};
    return ts_live_view_event(l, &ev, redraw);
}

/* ---- off-screen --------------------------------------------------------------- */

ts_status ts_live_replay(ts_live *l, const char *script,
                         void (*on_word)(void *ctx, const char *word, double pass_ms, double draw_ms), void *ctx,
                         int width, int height) {
    live_script s;
    TS_TRY(script_parse(script, &s));
    cairo_surface_t *surf = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, width, height);
    cairo_t *cr = cairo_create(surf);
    ts_status st = cairo_status(cr) ? ts_fail(TS_ERR_NOMEM, "live: no image surface") : TS_OK;
    if (!st) st = ts_live_draw(l, cr);
    for (int i = 0; i < s.n && !st && !ts_live_quit_wanted(l); i++) {
        bool redraw;
        const char *shot;
        double pass_before = ts_live_model_ms(l);
        st = apply(l, &s.a[i], &redraw, &shot);
        double pass_ms = ts_live_model_ms(l) != pass_before ? ts_live_model_ms(l) : 0;
        if (!st && redraw) st = ts_live_draw(l, cr);
        if (!st && shot) {
            cairo_surface_flush(surf);
            st = ts_png_write(surf, shot);
        }
        if (!st && on_word) on_word(ctx, s.a[i].word, pass_ms, redraw ? ts_live_draw_ms(l) : 0);
    }
    cairo_destroy(cr);
    cairo_surface_destroy(surf);
    script_free(&s);
    return st;
}

/* ---- the window --------------------------------------------------------------- */

typedef struct lwin {
    ts_live *l;
    ts_window win;
    const ts_live_options *opt;
    int frames;
} lwin;

static ts_status draw(void *ctx) {
    lwin *v = ctx;
    TS_TRY(ts_window_fit(&v->win, "live"));
    ts_live_resize(v->l, v->win.w, v->win.h);
    cairo_t *cr = ts_window_cairo(&v->win);
    ts_status st = ts_live_draw(v->l, cr);
    cairo_destroy(cr);
    cairo_surface_flush(v->win.surface);
    if (v->opt->verbose)
        fprintf(stderr, "live: frame %d: pass %.2f ms, drawn in %.2f ms\n", ++v->frames, ts_live_model_ms(v->l),
                ts_live_draw_ms(v->l));
    return st;
}

/* A failed pass must not close the window: it is said on stderr. */
static bool said(ts_status st) {
    if (st) fprintf(stderr, "tscope live: %s\n", ts_last_error());
    return true;
}

static bool handle(void *ctx, const SDL_Event *e) {
    lwin *v = ctx;
    if (e->type == SDL_WINDOWEVENT && e->window.event == SDL_WINDOWEVENT_EXPOSED) {
        ts_window_present(&v->win);
        return false;
    }
    return ts_live_handle(v->l, e);
}

bool ts_live_handle(ts_live *l, const SDL_Event *e) {
    bool redraw = false;
    switch (e->type) {
    case SDL_QUIT: ts_live_request_quit(l); return false;
    case SDL_TEXTINPUT: return said(ts_live_insert(l, e->text.text));
    case SDL_KEYDOWN: {
        SDL_Keycode k = e->key.keysym.sym;
        bool ctrl = (e->key.keysym.mod & KMOD_CTRL) != 0;
        if (ctrl && k >= SDLK_0 && k <= SDLK_9) return said(view_key(l, TS_VIEW_KEY_CHAR, (char)('0' + (k - SDLK_0)), &redraw)) && redraw;
        if (ctrl && k == SDLK_l) return said(ts_live_lens(l, !ts_live_lens_on(l)));
        if (ctrl && k == SDLK_g) return said(ts_live_show_views(l, !ts_live_show_views_on(l)));
        if (ctrl && k == SDLK_v) {
            char *clip = SDL_GetClipboardText();
            ts_status st = clip && clip[0] ? ts_live_insert(l, clip) : TS_OK;
            SDL_free(clip);
            return said(st);
        }
        switch (k) {
        case SDLK_TAB: return said(ts_live_tab(l));
        case SDLK_RETURN:
        case SDLK_KP_ENTER: return said(ts_live_insert(l, "\n"));
        case SDLK_BACKSPACE: return said(ts_live_backspace(l));
        case SDLK_LEFT: return ts_live_cursor(l, -1);
        case SDLK_RIGHT: return ts_live_cursor(l, 1);
        case SDLK_HOME: return ts_live_cursor(l, -2);
        case SDLK_END: return ts_live_cursor(l, 2);
        case SDLK_UP: return said(view_key(l, TS_VIEW_KEY_LEFT, 0, &redraw)) && redraw;
        case SDLK_DOWN: return said(view_key(l, TS_VIEW_KEY_RIGHT, 0, &redraw)) && redraw;
        case SDLK_PAGEUP: return said(view_key(l, TS_VIEW_KEY_UP, 0, &redraw)) && redraw;
        case SDLK_PAGEDOWN: return said(view_key(l, TS_VIEW_KEY_DOWN, 0, &redraw)) && redraw;
        case SDLK_ESCAPE: ts_live_request_quit(l); return false;
        default: return false;
        }
    }
    case SDL_MOUSEMOTION: {
        ts_view_event ev = {.kind = TS_VIEW_EV_MOTION, .x = e->motion.x, .y = e->motion.y};
        if (!ts_live_in_view(l, ev.x, ev.y)) ev.kind = TS_VIEW_EV_LEAVE;
        return said(ts_live_view_event(l, &ev, &redraw)) && redraw;
    }
    case SDL_MOUSEBUTTONDOWN:
        if (e->button.button != SDL_BUTTON_LEFT) return false;
        return said(click_at(l, e->button.x, e->button.y, &redraw)) && redraw;
    case SDL_MOUSEWHEEL: {
        int mx, my;
        SDL_GetMouseState(&mx, &my);
        if (!ts_live_in_view(l, mx, my)) return false;
        ts_view_event ev = {.kind = TS_VIEW_EV_WHEEL, .x = mx, .y = my, .dy = e->wheel.y};
        return said(ts_live_view_event(l, &ev, &redraw)) && redraw;
    }
    case SDL_WINDOWEVENT: return e->window.event == SDL_WINDOWEVENT_SIZE_CHANGED;
    default: return false;
    }
}

static bool quit_wanted(const void *ctx) { return ts_live_quit_wanted(((const lwin *)ctx)->l); }

static ts_window_client client(lwin *v) {
    return (ts_window_client){.ctx = v, .who = "live", .draw = draw, .handle = handle, .quit = quit_wanted};
}

static ts_status replay_in_window(lwin *v, const char *script) {
    live_script s;
    TS_TRY(script_parse(script, &s));
    ts_window_client c = client(v);
    ts_status st = TS_OK;
    for (int i = 0; i < s.n && !st && !ts_live_quit_wanted(v->l); i++) {
        bool redraw;
        const char *shot;
        st = apply(v->l, &s.a[i], &redraw, &shot);
        if (!st && shot) st = ts_window_screenshot(&v->win, &c, shot);
        else if (!st && redraw) {
            st = draw(v);
            ts_window_present(&v->win);
        }
        SDL_PumpEvents();
    }
    script_free(&s);
    return st;
}

ts_status ts_live_run(ts_live *l, const ts_live_options *opt) {
    TS_TRY(ts_live_script_check(opt->script));
    lwin v;
    memset(&v, 0, sizeof v);
    v.l = l;
    v.opt = opt;
    ts_window_spec spec = {.who = "live",
                           .title = "tscope live",
                           .width = opt->width > 0 ? opt->width : 1280,
                           .height = opt->height > 0 ? opt->height : 800,
                           .min_width = 900,
                           .min_height = 500};
    bool nd;
    char why[512];
    ts_status st = ts_window_open(&v.win, &spec, &nd, why, sizeof why);
    if (nd)
        return ts_fail(TS_VIEW_NO_DISPLAY,
                       "no display to open a window on (%s); without one, `tscope run --load MODEL --text TEXT "
                       "--trace FILE` records a pass and `tscope png FILE --tensor NAME` draws it",
                       why);
    if (st) return st;
    SDL_StartTextInput();
    ts_window_client c = client(&v);
    if (opt->script) st = replay_in_window(&v, opt->script);
    if (!st && opt->script) { /* what the script left, for whoever ran it */
        char label[64] = "";
        float p = 0;
        ts_live_best(l, &p, label, sizeof label);
        if (ts_live_fields(l) == 2)
            printf("tscope live: source \"%s\"; target \"%s\"; step %s; next token \"%s\" %.3f\n", ts_live_text(l),
                   ts_live_target(l), ts_live_step(l), label, p);
        else
            printf("tscope live: text \"%s\"; step %s; next token \"%s\" %.3f\n", ts_live_text(l), ts_live_step(l), label, p);
        if (ts_live_note(l)[0]) printf("tscope live: %s\n", ts_live_note(l));
        float b, a;
        if (ts_live_change(l, &b, &a, label, sizeof label) >= 0)
            printf("tscope live: %d head%s knocked out; largest change \"%s\" %.3f -> %.3f\n", ts_live_knocked(l),
                   ts_live_knocked(l) == 1 ? "" : "s", label, b, a);
        fflush(stdout);
    }
    if (!st && opt->screenshot) st = ts_window_screenshot(&v.win, &c, opt->screenshot);
    else if (!st) st = ts_window_loop(&v.win, &c);
    ts_window_close(&v.win);
    return st;
}
