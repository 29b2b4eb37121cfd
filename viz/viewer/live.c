/* live: `tscope live`, the model answering as the text is typed.
 *
 * The state is the text (and a cursor), the last pass of the model over it
 * and the viewer's state (tscope/viewer.h, "state and events") on that
 * pass. Every change of the text reruns the model: the pass goes through the
 * trace writer, as `tscope run --trace` does, into one anonymous file this
 * process owns (ts_trace_writer_open_fd), and is read back into memory; the
 * centre of the frame is then drawn by ts_view_draw, the viewer's one
 * drawing path. Only what the view on screen draws keeps its values (the
 * writer's `only` globs); moving to another step reruns the pass for its.
 *
 * A causal model's pass reuses the earlier positions: every layer's keys and
 * values stay in a cache, only the tokens after the longest run the cache
 * already holds are decoded, and the step on screen is rebuilt from its kept
 * rows and the new ones (live_rows.c). A dry run at the text's length then
 * records every other step's shape. Steps a cache cannot rebuild, a norm's
 * view, the lens and an encoder-decoder get a full pass.
 *
 * This file is the session: its life cycle, the edits (keys, clicks, the
 * heads knocked out) and what the window asks of the state. The passes (the
 * model run over the text, incrementally with a cache) are live_pass.c's;
 * the frame, drawn from the state alone, live_draw.c's. Nothing here opens a
 * window: live_window.c does, and `tscope bench live` drives the same
 * functions into an image surface. An encoder-decoder's two fields are
 * live_seq2seq.c's; the state is in live_internal.h.
 *
 * Token ids come from the model's own tokenizer. A character tokenizer
 * refuses a character it has never seen: that character is marked in the
 * field and left out of the pass, so the rest still runs. Text longer than
 * the model's context slides a window: the model reads the last `capacity`
 * tokens, and the field shows where that window starts.
 */
#define _GNU_SOURCE /* memfd_create */
#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "live_internal.h"

#define FIELD_H 116.0     /* one field across the top (a language model's text, three lines) */
#define FIELDS_H 116.0    /* two (an encoder-decoder's source and target) */

double live_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- the text ------------------------------------------------------------- */

size_t live_char_len(const char *p, size_t left) {
    size_t n = (size_t)(g_utf8_next_char(p) - p);
    return n > left ? left : n;
}

ts_status live_field_insert(live_field *f, const char *s, size_t n) {
    if (f->len + n + 1 > f->cap) {
        size_t cap = (f->len + n + 1) * 2;
        char *grown = realloc(f->text, cap);
        if (!grown) return ts_fail(TS_ERR_NOMEM, "live: out of memory for the text");
        f->text = grown;
        f->cap = cap;
    }
    memmove(f->text + f->cursor + n, f->text + f->cursor, f->len - f->cursor);
    memcpy(f->text + f->cursor, s, n);
    f->len += n;
    f->cursor += n;
    f->text[f->len] = '\0';
    return TS_OK;
}

/* ---- life cycle ------------------------------------------------------------- */

/* An encoder-decoder over token ids with a vocabulary head (copy, reverse). */
static bool is_seq2seq(const ts_model_config *c) {
    return c->arch == TS_ARCH_ENCODER_DECODER && c->head == TS_HEAD_LM && c->input == TS_INPUT_TOKENS;
}

ts_status ts_live_new(ts_live **out, ts_model *m, ts_lmtok *tok, const ts_live_options *o) {
    *out = NULL;
    bool seq2seq = is_seq2seq(&m->cfg);
    if (!ts_model_is_lm(&m->cfg) && !seq2seq)
        return ts_fail(TS_ERR_UNSUPPORTED, "live: only a language model (one causal stack with a vocabulary head) or an "
                                           "encoder-decoder over tokens answers as you type");
    if (!seq2seq && !tok)
        return ts_fail(TS_ERR_ARG, "live: this model has no tokenizer to type with (`tscope run --ids` reads it by ids)");
    if (o && o->target && !seq2seq)
        return ts_fail(TS_ERR_ARG, "live: --target is the decoder's text of an encoder-decoder; this model has one stack");
    ts_live *l = calloc(1, sizeof *l);
    if (!l) return ts_fail(TS_ERR_NOMEM, "live: out of memory");
    l->m = m;
    l->tok = seq2seq ? NULL : tok;
    l->seq2seq = seq2seq;
    l->field_h = seq2seq ? FIELDS_H : FIELD_H;
    l->capacity = m->S;
    l->temperature = o && o->temperature > 0 ? o->temperature : 1.0f;
    l->top_k = o ? o->top_k : 0;
    l->w = o && o->width > 0 ? o->width : 1280;
    l->h = o && o->height > 0 ? o->height : 800;
    l->views_focus = -1;
    l->probs = malloc(sizeof *l->probs * (size_t)m->cfg.vocab);
    l->before = malloc(sizeof *l->before * (size_t)m->cfg.vocab);
    ts_experiment_init(&l->ex);
#ifdef __linux__
    l->fd = memfd_create("tscope-live", MFD_CLOEXEC);
#else
    l->fd = -1;
#endif
    if (l->fd < 0) { /* elsewhere an unlinked temporary file does the same */
        FILE *f = tmpfile();
        l->fd = f ? dup(fileno(f)) : -1;
        if (f) fclose(f);
    }
    ts_status st = l->probs && l->before ? TS_OK : ts_fail(TS_ERR_NOMEM, "live: out of memory");
    /* built for the longest window, before any pass shortens the model */
    l->can_cache = ts_model_can_cache(&m->cfg, NULL);
    if (!st && l->can_cache) st = ts_kv_cache_init(&l->kv, m);
    if (!st && l->can_cache) st = ts_kv_cache_init(&l->kv_plain, m);
    if (!st && l->fd < 0) st = ts_fail(TS_ERR_IO, "live: cannot make an anonymous file for the passes");
    if (!st && seq2seq) st = live_s2s_init(l);
    if (!st && o && o->target) {
        l->focus = LIVE_TARGET;
        st = live_field_insert(&l->field[LIVE_TARGET], o->target, strlen(o->target));
        l->focus = LIVE_SOURCE;
    }
    if (!st && o && o->text) st = ts_live_insert(l, o->text);
    if (!st && !(o && o->text)) st = ts_live_pass(l);
    if (st) {
        ts_live_free(l);
        return st;
    }
    *out = l;
    return TS_OK;
}

void ts_live_free(ts_live *l) {
    if (!l) return;
    live_clear_pass(l);
    ts_live_session_close(l->sess);
    ts_canvas_free(&l->canvas);
    if (l->offscreen) cairo_surface_destroy(l->offscreen);
    if (l->fd >= 0) close(l->fd);
    ts_experiment_free(&l->ex);
    ts_kv_cache_free(&l->kv);
    ts_kv_cache_free(&l->kv_plain);
    live_rows_reset(&l->view_rows, NULL);
    live_rows_reset(&l->logit_rows, NULL);
    free(l->cached);
    live_s2s_free(l);
    for (int i = 0; i < 2; i++) free(l->field[i].text), free(l->field[i].bad);
    free(l->ids), free(l->start), free(l->probs), free(l->before);
    free(l);
}

/* ---- edits ------------------------------------------------------------------ */

ts_status ts_live_insert(ts_live *l, const char *utf8) {
    size_t n = strlen(utf8);
    if (!g_utf8_validate(utf8, (gssize)n, NULL)) {
        snprintf(l->note, sizeof l->note, "pasted text is not valid UTF-8: refused");
        return TS_OK;
    }
    TS_TRY(live_field_insert(&l->field[l->focus], utf8, n));
    return ts_live_pass(l);
}

ts_status ts_live_backspace(ts_live *l) {
    live_field *f = &l->field[l->focus];
    if (f->cursor == 0) return TS_OK;
    const char *prev = g_utf8_find_prev_char(f->text, f->text + f->cursor);
    size_t at = prev ? (size_t)(prev - f->text) : 0, n = f->cursor - at;
    memmove(f->text + at, f->text + f->cursor, f->len - f->cursor + 1);
    f->len -= n;
    f->cursor = at;
    return ts_live_pass(l);
}

ts_status ts_live_append_token(ts_live *l, int rank) {
    if (rank < 0 || rank >= l->n_top) return TS_OK;
    if (l->seq2seq) return live_s2s_append(l, l->top[rank]);
    char *piece = NULL;
    size_t n = 0;
    TS_TRY(ts_lmtok_decode(l->tok, &l->top[rank], 1, &piece, &n));
    l->focus = LIVE_SOURCE;
    l->field[LIVE_SOURCE].cursor = l->field[LIVE_SOURCE].len;
    char *z = realloc(piece, n + 1);
    ts_status st = z ? TS_OK : ts_fail(TS_ERR_NOMEM, "live: out of memory");
    if (!st) {
        z[n] = '\0';
        st = ts_live_insert(l, z);
    }
    free(z ? z : piece);
    return st;
}

void live_token_label(const ts_live *l, int32_t id, char *buf, size_t cap) {
    if (l->seq2seq) live_s2s_label(l, id, buf, cap);
    else ts_lmtok_label(l->tok, id, buf, cap);
}

int32_t live_best_token(const ts_live *l) {
    if (!l->n_top) return -1;
    int32_t best = 0;
    for (int v = 1; v < l->m->cfg.vocab; v++) best = l->probs[v] > l->probs[best] ? v : best;
    return best;
}

ts_status ts_live_tab(ts_live *l) {
    int32_t best = live_best_token(l);
    for (int i = 0; best >= 0 && i < l->n_top; i++)
        if (l->top[i] == best) return ts_live_append_token(l, i);
    return TS_OK;
}

int ts_live_best(const ts_live *l, float *p, char *label, size_t cap) {
    int32_t best = live_best_token(l);
    if (best < 0) return -1;
    if (p) *p = l->probs[best];
    if (label) live_token_label(l, best, label, cap);
    return best;
}

bool ts_live_cursor(ts_live *l, int direction) {
    live_field *f = &l->field[l->focus];
    size_t before = f->cursor;
    if (direction == -2) f->cursor = 0;
    else if (direction == 2) f->cursor = f->len;
    else if (direction < 0 && f->cursor > 0) {
        const char *prev = g_utf8_find_prev_char(f->text, f->text + f->cursor);
        f->cursor = prev ? (size_t)(prev - f->text) : 0;
    } else if (direction > 0 && f->cursor < f->len)
        f->cursor += live_char_len(f->text + f->cursor, f->len - f->cursor);
    return f->cursor != before;
}

bool ts_live_focus(ts_live *l, int field) {
    if (field < 0 || field > (l->seq2seq ? LIVE_TARGET : LIVE_SOURCE) || field == l->focus) return false;
    l->focus = field;
    return true;
}

int ts_live_fields(const ts_live *l) { return l->seq2seq ? 2 : 1; }

int ts_live_field_at(const ts_live *l, double x, double y) {
    (void)x;
    for (int i = 0; i <= (l->seq2seq ? LIVE_TARGET : LIVE_SOURCE); i++)
        if (y >= box_y(i) && y < box_y(i) + box_h(l)) return i;
    return -1;
}

/* Hand an event to the viewer's state (steps, heads, cells); a new step
 * reruns the pass for its values. Mouse positions are the window's. */
ts_status ts_live_view_event(ts_live *l, const ts_view_event *ev, bool *redraw) {
    *redraw = false;
    if (!l->have_state) return TS_OK;
    ts_view_event e = *ev;
    e.y -= l->field_h;
    *redraw = ts_view_update(&l->st, &l->steps, &l->frame, &e);
    if (l->st.quit) l->quit = true;
    const char *now = l->steps.entry[l->st.current].name;
    if (strcmp(now, l->valued) != 0) {
        TS_TRY(ts_live_pass(l));
        *redraw = true;
    }
    return TS_OK;
}

int ts_live_bar_at(const ts_live *l, double x, double y) {
    for (int i = 0; i < l->n_top; i++) {
        ts_render_rect bar = live_bar_rect(l, i);
        const ts_render_rect *r = &bar;
        if (x >= r->x && x < r->x + r->w && y >= r->y && y < r->y + r->h) return i;
    }
    return -1;
}

bool ts_live_in_view(const ts_live *l, double x, double y) { return y >= l->field_h && x < l->w - PANEL_W; }

void ts_live_resize(ts_live *l, double w, double h) {
    l->w = w;
    l->h = h;
    if (l->have_state) {
        ts_view_event ev = {.kind = TS_VIEW_EV_RESIZE, .x = w - PANEL_W, .y = h - l->field_h};
        ts_view_update(&l->st, &l->steps, &l->frame, &ev);
    }
}

bool ts_live_quit_wanted(const ts_live *l) { return l->quit; }
void ts_live_request_quit(ts_live *l) { l->quit = true; }
double ts_live_model_ms(const ts_live *l) { return l->model_ms; }
int ts_live_tokens(const ts_live *l) { return l->seq2seq ? (l->s2s.n_src > 1 ? l->s2s.n_src - 1 : 0) : l->n_all; }
int ts_live_reused(const ts_live *l) { return l->reused; }
const ts_trace *ts_live_trace(const ts_live *l) { return l->trace; }
double ts_live_draw_ms(const ts_live *l) { return l->draw_ms; }
const char *ts_live_text(const ts_live *l) { return l->field[LIVE_SOURCE].text ? l->field[LIVE_SOURCE].text : ""; }
const char *ts_live_target(const ts_live *l) { return l->field[LIVE_TARGET].text ? l->field[LIVE_TARGET].text : ""; }
const char *ts_live_note(const ts_live *l) { return l->note; }

int ts_live_top(const ts_live *l, int rank, float *p, char *label, size_t cap) {
    if (rank < 0 || rank >= l->n_top) return -1;
    if (p) *p = l->probs[l->top[rank]];
    if (label) live_token_label(l, l->top[rank], label, cap);
    return l->top[rank];
}

const char *ts_live_step(const ts_live *l) {
    return l->have_state ? l->steps.entry[l->st.current].name : l->valued;
}

/* ---- knocking heads out ---------------------------------------------------------- */

int live_knocked_index(const ts_live *l, const char *spec) {
    for (int i = 0; i < l->n_knocked; i++)
        if (strcmp(l->knocked[i], spec) == 0) return i;
    return -1;
}

/* The experiment of the heads knocked out and the lens, made again. */
static ts_status rebuild_experiment(ts_live *l) {
    l->knock_gen++;
    ts_experiment_free(&l->ex);
    ts_experiment_init(&l->ex);
    ts_status st = TS_OK;
    for (int i = 0; i < l->n_knocked && !st; i++) st = ts_experiment_add_ablate(&l->ex, l->knocked[i]);
    l->ex.lens = l->lens;
    if (!st && ts_experiment_active(&l->ex)) st = ts_experiment_check(&l->ex, &l->m->cfg);
    return st;
}

/* The step names a knock: word may mean, most likely first: "0.3" is layer 0's
 * head 3, "layers.0.self_attn.head3" the name the panel prints, either in the
 * decoder's stack (a GPT's) or the encoder's; anything else is a full name. */
static int knock_candidates(const char *word, char out[][NAME_MAX_LEN]) {
    int layer, head, used = 0;
    if (sscanf(word, "%d.%d%n", &layer, &head, &used) == 2 && used == (int)strlen(word) && layer >= 0 && head >= 0) {
        snprintf(out[0], NAME_MAX_LEN, "decoder.layers.%d.self_attn.head%d", layer, head);
        snprintf(out[1], NAME_MAX_LEN, "encoder.layers.%d.self_attn.head%d", layer, head);
        return 2;
    }
    if (strncmp(word, "layers.", 7) == 0) {
        snprintf(out[0], NAME_MAX_LEN, "decoder.%s", word);
        snprintf(out[1], NAME_MAX_LEN, "encoder.%s", word);
        return 2;
    }
    snprintf(out[0], NAME_MAX_LEN, "%s", word);
    return 1;
}

static ts_status knock_step(ts_live *l, const char *spec);
static bool spec_head(const ts_live *l, const char *spec, int *layer, int *head);

/* Whether the model has a step of that name to knock out: what the
 * experiment's check says of an ablation of it alone. */
static bool model_has_head(const ts_live *l, const char *name) {
    ts_experiment ex;
    ts_experiment_init(&ex);
    bool ok = ts_experiment_add_ablate(&ex, name) == TS_OK && ts_experiment_check(&ex, &l->m->cfg) == TS_OK;
    ts_experiment_free(&ex);
    return ok;
}

ts_status ts_live_knock(ts_live *l, const char *word) {
    char names[2][NAME_MAX_LEN];
    int n = knock_candidates(word, names);
    for (int i = 0; i < n; i++) /* a head already out comes back, by any of its names */
        if (live_knocked_index(l, names[i]) >= 0) return knock_step(l, names[i]);
    for (int i = 0; i < n; i++) {
        if (!model_has_head(l, names[i])) continue;
        return knock_step(l, names[i]);
    }
    return ts_fail(TS_ERR_ARG, "knock:%s: this model has no such head; give L.H (0.3 is layer 0's head 3), the name "
                               "the panel prints (layers.0.self_attn.head3) or a full step name", word);
}

/* Knock the head of step spec out, or back in when it is out. */
static ts_status knock_step(ts_live *l, const char *spec) {
    int at = live_knocked_index(l, spec);
    if (at >= 0) { /* a second click restores it */
        memmove(l->knocked[at], l->knocked[at + 1], sizeof l->knocked[0] * (size_t)(l->n_knocked - at - 1));
        l->n_knocked--;
    } else {
        if (l->n_knocked == TS_LIVE_KNOCK_MAX) return ts_fail(TS_ERR_ARG, "live: at most %d heads knocked out", TS_LIVE_KNOCK_MAX);
        if (strlen(spec) >= sizeof l->knocked[0]) return ts_fail(TS_ERR_ARG, "live: '%s' is too long a step name", spec);
        snprintf(l->knocked[l->n_knocked++], sizeof l->knocked[0], "%s", spec);
    }
    ts_status st = rebuild_experiment(l);
    if (st) { /* a spec the model has no step for: undo it, keep the rest */
        char why[512];
        snprintf(why, sizeof why, "%s", ts_last_error());
        if (at < 0) l->n_knocked--;
        rebuild_experiment(l);
        return ts_fail(TS_ERR_ARG, "%s", why);
    }
    int layer, head; /* the views draw the head clicked large, as the page does */
    if (spec_head(l, spec, &layer, &head)) l->views_focus = layer * l->m->cfg.heads + head;
    return ts_live_pass(l);
}

ts_status ts_live_lens(ts_live *l, bool on) {
    if (on == l->lens) return TS_OK;
    l->lens = on;
    ts_status st = rebuild_experiment(l);
    if (st) {
        l->lens = false;
        rebuild_experiment(l);
        return st;
    }
    if (on) { /* the lens comes on screen; the step before comes back after */
        snprintf(l->before_lens, sizeof l->before_lens, "%s", ts_live_step(l));
        snprintf(l->valued, sizeof l->valued, "lens.layers.0");
    } else if (strncmp(ts_live_step(l), "lens.layers.", 12) == 0) {
        snprintf(l->valued, sizeof l->valued, "%s", l->before_lens);
    }
    if (l->have_state) ts_view_state_free(&l->st); /* so the pass opens on l->valued */
    l->have_state = false;
    return ts_live_pass(l);
}

bool ts_live_lens_on(const ts_live *l) { return l->lens; }

ts_status ts_live_show_views(ts_live *l, bool on) {
    if (on == l->views) return TS_OK;
    if (on && (l->seq2seq || !l->can_cache))
        return ts_fail(TS_ERR_UNSUPPORTED, "live: the views (every head, the lens, the loss strip) follow a causal language "
                                           "model with a cache; this model is not one");
    /* made once, the first time: its caches are sized by the model's config, not by a pass */
    if (on && !l->sess && !(l->sess = ts_live_session_new(l->m, l->tok))) return TS_ERR_ARG;
    l->views = on;
    return on ? live_views_follow(l) : TS_OK;
}

bool ts_live_show_views_on(const ts_live *l) { return l->views; }

/* Layer and head of a knocked-out spec of this model's stack, or false. */
static bool spec_head(const ts_live *l, const char *spec, int *layer, int *head) {
    const char *stack = ts_model_stack_name(&l->m->cfg);
    size_t n = strlen(stack);
    int used = 0;
    if (strncmp(spec, stack, n) != 0 || sscanf(spec + n, ".layers.%d.self_attn.head%d%n", layer, head, &used) != 2 ||
        spec[n + (size_t)used] != '\0')
        return false;
    return *layer >= 0 && *layer < l->m->cfg.layers && *head >= 0 && *head < l->m->cfg.heads;
}

ts_status live_views_follow(ts_live *l) {
    if (!l->views || !l->sess) return TS_OK;
    int L = l->m->cfg.layers, H = l->m->cfg.heads;
    char *out = calloc((size_t)L * H, 1);
    if (!out) return ts_fail(TS_ERR_NOMEM, "live: out of memory");
    for (int i = 0; i < l->n_knocked; i++) {
        int layer, head;
        if (spec_head(l, l->knocked[i], &layer, &head)) out[layer * H + head] = 1;
    }
    /* the knock-outs first: a new set throws the cache away, and the text then runs once */
    ts_status st = ts_live_session_set_knocked(l->sess, out);
    free(out);
    TS_TRY(st);
    return ts_live_session_set_ids(l->sess, l->ids ? l->ids + l->first : NULL, l->n_all - l->first);
}

const char *live_head_grid_module(const ts_live *l, char *buf, size_t cap) {
    if (!l->have_state || l->st.head >= 0 || !l->frame.drawn) return NULL;
    const ts_view_entry *e = &l->steps.entry[l->st.current];
    if (ts_view_heads(e) <= 0 || l->frame.panel_head[0] < 0) return NULL;
    const char *attn = strstr(e->name, ".self_attn.");
    if (!attn) attn = strstr(e->name, ".cross_attn.");
    if (!attn) return NULL;
    size_t n = (size_t)(strchr(attn + 1, '.') - e->name);
    if (n + 1 > cap) return NULL;
    memcpy(buf, e->name, n);
    buf[n] = '\0';
    return buf;
}

bool ts_live_head_at(const ts_live *l, double x, double y, char *spec, size_t cap) {
    char module[NAME_MAX_LEN];
    if (l->views) { /* a head of the views' grid, by the hit regions of their last layout */
        int hit = x < l->w - PANEL_W ? ts_canvas_hit_at(&l->canvas, x, y - l->field_h) : -1;
        if (hit < 0) return false;
        int H = l->m->cfg.heads;
        snprintf(spec, cap, "%s.layers.%d.self_attn.head%d", ts_model_stack_name(&l->m->cfg), hit / H, hit % H);
        return true;
    }
    if (!live_head_grid_module(l, module, sizeof module)) return false;
    int panel, row, col;
    if (!ts_render_hit(&l->frame.layout, x, y - l->field_h, &panel, &row, &col) || l->frame.panel_head[panel] < 0)
        return false;
    snprintf(spec, cap, "%s.head%d", module, l->frame.panel_head[panel]);
    return true;
}

int ts_live_knocked(const ts_live *l) { return l->n_knocked; }

/* The largest change a knock-out made to the next token's probabilities. */
static int32_t largest_change(const ts_live *l) {
    int32_t best = -1;
    float most = -1;
    for (int v = 0; v < l->m->cfg.vocab; v++) {
        float d = fabsf(l->probs[v] - l->before[v]);
        if (d > most) most = d, best = v;
    }
    return best;
}

int ts_live_change(const ts_live *l, float *before, float *after, char *label, size_t cap) {
    if (!l->n_knocked || !l->n_top) return -1;
    int32_t v = largest_change(l);
    if (before) *before = l->before[v];
    if (after) *after = l->probs[v];
    if (label) live_token_label(l, v, label, cap);
    return v;
}
