/* input: the events a tscope window understands, from SDL's keys and from
 * the words of a --script, in one vocabulary (tscope/viewer.h, "input"). The
 * window and the viewer's state both build on it; it knows neither. */
#include <SDL.h>
#include <stdio.h>
#include <string.h>

#include "tscope/viewer.h"

ts_view_key ts_window_key(SDL_Keycode k) {
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
    case SDLK_TAB: return TS_VIEW_KEY_TAB;
    default: return TS_VIEW_KEY_NONE;
    }
}

static const struct {
    const char *word;
    ts_view_key key;
} named_keys[] = {
    {"left", TS_VIEW_KEY_LEFT},   {"right", TS_VIEW_KEY_RIGHT},   {"up", TS_VIEW_KEY_UP},
    {"down", TS_VIEW_KEY_DOWN},   {"pgup", TS_VIEW_KEY_PGUP},     {"pgdn", TS_VIEW_KEY_PGDN},
    {"home", TS_VIEW_KEY_HOME},   {"end", TS_VIEW_KEY_END},       {"enter", TS_VIEW_KEY_ENTER},
    {"esc", TS_VIEW_KEY_ESCAPE},  {"backspace", TS_VIEW_KEY_BACKSPACE}, {"tab", TS_VIEW_KEY_TAB},
};

ts_status ts_view_script_word(const char *word, ts_view_event *ev, const char **shot) {
    memset(ev, 0, sizeof *ev);
    ev->kind = TS_VIEW_EV_KEY;
    *shot = NULL;
    if (strncmp(word, "find:", 5) == 0 && word[5]) {
        ev->kind = TS_VIEW_EV_FIND;
        ev->text = word + 5;
        return TS_OK;
    }
    if (strncmp(word, "shot:", 5) == 0 && word[5]) {
        *shot = word + 5;
        return TS_OK;
    }
    /* The mouse, in window points: hover:X,Y click:X,Y wheel:X,Y,DY. */
    static const struct {
        const char *prefix;
        ts_view_event_kind kind;
        int n;
    } mouse[] = {{"hover:", TS_VIEW_EV_MOTION, 2}, {"click:", TS_VIEW_EV_PRESS, 2}, {"press:", TS_VIEW_EV_PRESS, 2},
                 {"wheel:", TS_VIEW_EV_WHEEL, 3}, {"resize:", TS_VIEW_EV_RESIZE, 2}};
    if (strcmp(word, "release") == 0) {
        ev->kind = TS_VIEW_EV_RELEASE;
        return TS_OK;
    }
    for (size_t i = 0; i < sizeof mouse / sizeof mouse[0]; i++) {
        size_t len = strlen(mouse[i].prefix);
        if (strncmp(word, mouse[i].prefix, len) != 0) continue;
        double v[3] = {0, 0, 0};
        int used = 0;
        int got = sscanf(word + len, "%lf,%lf%n,%lf%n", &v[0], &v[1], &used, &v[2], &used);
        if (got != mouse[i].n || word[len + (size_t)used] != '\0')
            return ts_fail(TS_ERR_ARG, "bad mouse word '%s' in the script (hover:X,Y click:X,Y press:X,Y wheel:X,Y,DY resize:W,H)", word);
        if (mouse[i].kind == TS_VIEW_EV_RESIZE && (v[0] < 320 || v[1] < 240 || v[0] > 16384 || v[1] > 16384))
            return ts_fail(TS_ERR_ARG, "'%s': a window from 320 x 240 to 16384 x 16384", word);
        ev->kind = mouse[i].kind;
        ev->x = v[0];
        ev->y = v[1];
        ev->dy = v[2];
        return TS_OK;
    }
    for (size_t i = 0; i < sizeof named_keys / sizeof named_keys[0]; i++)
        if (strcmp(word, named_keys[i].word) == 0) {
            ev->key = named_keys[i].key;
            return TS_OK;
        }
    if (word[0] && !word[1] && (unsigned char)word[0] > 32 && (unsigned char)word[0] < 127) {
        ev->key = TS_VIEW_KEY_CHAR;
        ev->ch = word[0];
        return TS_OK;
    }
    return ts_fail(TS_ERR_ARG,
                   "unknown key '%s' in the script (keys: left right up down pgup pgdn home end enter esc "
                   "backspace tab, one character such as 3 b B e ? [ ], find:NAME, shot:FILE, hover:X,Y, click:X,Y, "
                   "press:X,Y, release, wheel:X,Y,DY, resize:W,H)",
                   word);
}
