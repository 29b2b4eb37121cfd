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
 * Nothing here opens a window: live_window.c does, and `tscope bench live`
 * drives the same functions into an image surface. An encoder-decoder's two
 * fields are live_seq2seq.c's; the state is in live_internal.h.
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
#include <pango/pangocairo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "live_internal.h"
#include "tscope/io.h"

#define FIELD_H 76.0      /* one field across the top (a language model's text) */
#define FIELDS_H 116.0    /* two (an encoder-decoder's source and target) */
#define PANEL_W 330.0     /* the next-token panel on the right */
#define BOX_H 34.0        /* a field's box */

/* The top of field i's box: clicks and drawing agree on it. */
static double box_y(int i) { return 8 + 40 * i; }

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- the text ------------------------------------------------------------- */

static size_t char_len(const char *p, size_t left) {
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

/* ---- one pass ------------------------------------------------------------- */

/* ids of the whole text, where each starts, and the characters left out. */
static ts_status tokenize(ts_live *l) {
    live_field *f = &l->field[LIVE_SOURCE];
    free(l->ids), free(l->start), free(f->bad);
    l->ids = NULL, l->start = NULL, l->n_all = 0, l->n_bad = 0;
    f->bad = calloc(f->len + 1, 1);
    if (!f->bad) return ts_fail(TS_ERR_NOMEM, "live: out of memory");
    ts_bpe_ids out = {0};
    size_t *start = NULL, n_start = 0, cap_start = 0;
    ts_status st = TS_OK;
    if (l->tok->kind == TS_LMTOK_CHAR) {
        /* One character, one token: encode each alone, so one unknown
         * character costs only itself. */
        for (size_t i = 0; i < f->len && !st;) {
            size_t n = char_len(f->text + i, f->len - i);
            size_t before = out.count;
            if (ts_lmtok_encode(l->tok, f->text + i, n, &out) != TS_OK || out.count != before + 1) {
                out.count = before;
                memset(f->bad + i, 1, n);
                l->n_bad++;
            } else {
                if (n_start + 2 > cap_start) {
                    cap_start = cap_start ? 2 * cap_start : 256;
                    size_t *grown = realloc(start, sizeof *start * cap_start);
                    if (!grown) st = ts_fail(TS_ERR_NOMEM, "live: out of memory");
                    else start = grown;
                }
                if (!st) start[n_start++] = i;
            }
            i += n;
        }
    } else {
        st = ts_lmtok_encode(l->tok, f->text, f->len, &out);
        start = calloc(out.count + 1, sizeof *start);
        if (!st && !start) st = ts_fail(TS_ERR_NOMEM, "live: out of memory");
        /* where each token starts: the bytes the tokens before it decode to */
        size_t at = 0;
        for (size_t i = 0; !st && i < out.count; i++) {
            start[i] = at < f->len ? at : f->len;
            char *piece = NULL;
            size_t plen = 0;
            if (ts_lmtok_decode(l->tok, &out.ids[i], 1, &piece, &plen) == TS_OK) at += plen;
            free(piece);
        }
        n_start = out.count;
    }
    if (st) {
        ts_bpe_ids_free(&out);
        free(start);
        return st;
    }
    if (!start) start = calloc(1, sizeof *start);
    if (!start) {
        ts_bpe_ids_free(&out);
        return ts_fail(TS_ERR_NOMEM, "live: out of memory");
    }
    start[n_start] = f->len;
    l->ids = out.ids; /* ownership moves here */
    l->n_all = (int)out.count;
    l->start = start;
    l->first = l->n_all > l->capacity ? l->n_all - l->capacity : 0;
    f->read_from = l->first > 0 ? start[l->first] : 0;
    f->read_to = f->len;
    return TS_OK;
}

static const char *default_step(const ts_live *l, char *buf, size_t n) {
    if (l->seq2seq) live_s2s_default_step(l, buf, n);
    else snprintf(buf, n, "%s.layers.0.self_attn.weights", ts_model_stack_name(&l->m->cfg));
    return buf;
}

/* The next token's distribution after the last position: softmax(logits / T)
 * over the top_k most likely (all when 0), and the TOP_N largest. */
static void distribution(const ts_live *l, const float *logits, int V, float *probs) {
    double T = l->temperature > 0 ? l->temperature : 1.0;
    float best = logits[0];
    for (int v = 1; v < V; v++) best = logits[v] > best ? logits[v] : best;
    /* top-k: the k-th largest logit is the floor */
    float floor_logit = -INFINITY;
    if (l->top_k > 0 && l->top_k < V) {
        float *sorted = malloc(sizeof *sorted * (size_t)V);
        if (sorted) {
            memcpy(sorted, logits, sizeof *sorted * (size_t)V);
            /* partial selection: k passes are fine for the vocabularies here */
            for (int i = 0; i < l->top_k; i++) {
                int m = i;
                for (int j = i + 1; j < V; j++) m = sorted[j] > sorted[m] ? j : m;
                float t = sorted[i];
                sorted[i] = sorted[m], sorted[m] = t;
            }
            floor_logit = sorted[l->top_k - 1];
            free(sorted);
        }
    }
    double z = 0;
    for (int v = 0; v < V; v++) {
        double p = logits[v] >= floor_logit ? exp(((double)logits[v] - best) / T) : 0.0;
        probs[v] = (float)p;
        z += p;
    }
    for (int v = 0; v < V; v++) probs[v] = (float)(probs[v] / z);
}

/* What orders the panel's rows: the probability, or with heads knocked out
 * the larger of before and after (what the knock-out took away shows too). */
static float rank_of(const ts_live *l, int v) {
    return l->n_knocked && l->before[v] > l->probs[v] ? l->before[v] : l->probs[v];
}

/* The distribution and its TOP_N largest. */
static void next_token(ts_live *l, const float *logits, int V) {
    distribution(l, logits, V, l->probs);
    /* one pass, keeping the TOP_N largest in order (ties: the lower id first) */
    l->n_top = 0;
    for (int v = 0; v < V; v++) {
        float r = rank_of(l, v);
        if (r <= 0 || (l->n_top == TOP_N && r <= rank_of(l, l->top[TOP_N - 1]))) continue;
        int at = l->n_top < TOP_N ? l->n_top++ : TOP_N - 1;
        while (at > 0 && rank_of(l, l->top[at - 1]) < r) {
            l->top[at] = l->top[at - 1];
            at--;
        }
        l->top[at] = v;
    }
}

/* The trace's metadata for a pass over a language model's ids (n), or an
 * encoder-decoder's two fields: the model, the tokens, the knock-outs. */
static ts_status pass_metadata(ts_live *l, const int32_t *ids, int n, char **meta) {
    char *line[] = {"live"};
    ts_model_config cfg = l->m->cfg;
    if (l->seq2seq) {
        TS_TRY(live_s2s_metadata(l, meta));
    } else {
        cfg.seq = n;
        TS_TRY(ts_trace_metadata_lm(meta, &cfg, l->tok, ids, 1, n, 1, line));
    }
    char *edits = l->n_knocked ? ts_experiment_to_json(&l->ex) : NULL;
    ts_status st = l->n_knocked && !edits ? ts_fail(TS_ERR_NOMEM, "live: out of memory") : TS_OK;
    if (!st && edits) st = ts_trace_metadata_add_json(meta, "edits", edits);
    free(edits);
    if (st) {
        free(*meta);
        *meta = NULL;
    }
    return st;
}

/* Whether the view of `want` is a LayerNorm's (its in, mean, std or out):
 * it draws the norm's in and out side by side, so it reads the values of
 * every step of the norm. */
static bool norm_view(const char *want, char *module, size_t cap) {
    const char *leaf = strrchr(want, '.');
    if (!leaf || leaf == want) return false;
    static const char *const leaves[] = {".in", ".mean", ".std", ".out"};
    bool norm_leaf = false;
    for (size_t i = 0; i < sizeof leaves / sizeof leaves[0]; i++) norm_leaf |= strcmp(leaf, leaves[i]) == 0;
    const char *parent = leaf - 1;
    while (parent > want && parent[-1] != '.') parent--;
    if (!norm_leaf || strncmp(parent, "norm", 4) != 0) return false;
    snprintf(module, cap, "%.*s.*", (int)(leaf - want), want);
    return true;
}

/* A writer into the anonymous file that keeps the values the view of `want`
 * draws (the panel reads the logits from the pass itself, not from the trace). */
static ts_status open_pass_writer(ts_live *l, const char *want, const int32_t *ids, int n, ts_trace_writer **w) {
    char *meta = NULL;
    TS_TRY(pass_metadata(l, ids, n, &meta));
    ts_trace_options opt;
    ts_trace_options_default(&opt);
    opt.level = TS_TRACE_VALUES;
    /* the lens view draws every layer's lens.layers.N at once, and frames
     * the token that comes next from the input's ids */
    bool lens = strncmp(want, "lens.layers.", 12) == 0;
    char norm[NAME_MAX_LEN + 2];
    opt.only[opt.n_only++] = lens ? "lens.layers.*" : norm_view(want, norm, sizeof norm) ? norm : want;
    if (lens) opt.only[opt.n_only++] = "input";
    opt.buffer_bytes = 8u << 20;
    ts_status st = ts_trace_writer_open_fd(l->fd, "the live pass", meta, &opt, w);
    free(meta);
    return st;
}

/* Run the model over the whole window of the text (or both fields of an
 * encoder-decoder) into the anonymous file, keeping the values of `want`.
 * *last: the position whose logits the panel shows. */
static ts_status write_pass(ts_live *l, const char *want, ts_tensor *logits, int *last) {
    int n = l->n_all - l->first;
    const int32_t *ids = l->ids + l->first;
    ts_model_input in = {.src_ids = ids};
    if (l->seq2seq) { /* built at the model's S and T: padding marks what is not read */
        in = live_s2s_input(l);
        *last = l->s2s.n_tgt - 1;
    } else {
        TS_TRY(ts_model_set_length(l->m, n));
        *last = n - 1;
    }
    ts_trace_writer *w = NULL;
    TS_TRY(open_pass_writer(l, want, ids, n, &w));
    ts_hook hook = ts_trace_writer_hook(w);
    ts_status st = TS_OK;
    if (l->n_knocked) {
        /* the distribution with every head in place, for the panel's "before" */
        ts_tensor plain;
        st = ts_model_forward(l->m, &in, NULL, &plain);
        if (!st) distribution(l, plain.data + (int64_t)*last * plain.shape[2], (int)plain.shape[2], l->before);
    }
    if (ts_experiment_active(&l->ex)) ts_experiment_attach(&l->ex, &hook);
    if (!st) st = ts_model_forward(l->m, &in, &hook, logits);
    if (!st) st = ts_experiment_lens_finish(&l->ex, l->m, &hook);
    if (st) {
        ts_trace_writer_abort(w);
        return st;
    }
    return ts_trace_writer_close(w, NULL);
}

/* ---- a pass that reuses the earlier positions ------------------------------- */

/* The hook of a cached pass: the new rows of the step on screen and of the logits. */
static ts_status take_rows(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag) {
    ts_live *l = ctx;
    if (strcmp(name, "logits") == 0) return live_rows_take(&l->logit_rows, op, tag, t, l->decode_end);
    if (strcmp(name, l->view_rows.name) == 0) return live_rows_take(&l->view_rows, op, tag, t, l->decode_end);
    return TS_OK;
}

/* What a full pass would record, from a dry run of the model at the
 * window's length: every step's name and shape, and for the step on screen
 * the rows kept (the writer takes their statistics). The other steps keep
 * their shapes only: a step gets its values when it comes on screen. */
typedef struct replay {
    ts_hook writer;
    const char *want;
    ts_tensor view;
} replay;

static ts_status replay_step(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag) {
    replay *r = ctx;
    const ts_tensor *kept = strcmp(name, r->want) == 0 ? &r->view : NULL;
    if (!kept) return ts_hook_call(&r->writer, name, op, t, tag);
    bool same = kept->rank == t->rank;
    for (int d = 0; same && d < t->rank; d++) same = kept->shape[d] == t->shape[d];
    if (!same) return ts_fail(TS_ERR_ARG, "live: the rows kept of %s do not have the shape of a full pass", name);
    return ts_hook_call(&r->writer, name, op, kept, tag);
}

static ts_status write_replay(ts_live *l, const char *want, const int32_t *ids, int n) {
    ts_trace_writer *w = NULL;
    TS_TRY(open_pass_writer(l, want, ids, n, &w));
    replay r = {.writer = ts_trace_writer_hook(w), .want = want};
    r.view = live_rows_tensor(strcmp(want, "logits") == 0 ? &l->logit_rows : &l->view_rows);
    ts_model_config cfg = l->m->cfg;
    cfg.seq = n;
    cfg.batch = 1;
    ts_hook hook = {.fn = replay_step, .ctx = &r};
    ts_status st = ts_model_dry_run(&cfg, &hook, NULL);
    if (st) {
        ts_trace_writer_abort(w);
        return st;
    }
    return ts_trace_writer_close(w, NULL);
}

/* Decode ids [keep, n) into the caches: the knocked-out model's, with the
 * hook taking the rows, and the plain one's for "before". */
static ts_status decode_from(ts_live *l, const int32_t *ids, int keep, int n) {
    ts_hook hook = {.fn = take_rows, .ctx = l};
    if (l->n_knocked) ts_experiment_attach(&l->ex, &hook);
    l->kv.len = l->kv_plain.len = keep;
    for (int at = keep; at < n;) {
        int step = n - at < l->kv.rows ? n - at : l->kv.rows;
        l->decode_end = at + step;
        const float *logits;
        TS_TRY(ts_model_decode(l->m, &l->kv, ids + at, step, &hook, &logits));
        if (l->n_knocked) {
            TS_TRY(ts_model_decode(l->m, &l->kv_plain, ids + at, step, NULL, &logits));
            if (at + step == n) distribution(l, logits + (int64_t)(step - 1) * l->m->cfg.vocab, l->m->cfg.vocab, l->before);
        }
        at += step;
    }
    return TS_OK;
}

/* Whether every edit acts on each position alone (a zeroed head): a mean
 * over the positions, or a patch from another run, changes with the text's
 * length, so a pass with one recomputes every position. */
static bool edits_per_position(const ts_experiment *ex) {
    for (int i = 0; i < ex->n_edits; i++)
        if (ex->edits[i].kind != TS_EDIT_ZERO) return false;
    return true;
}

/* The pass with a cache: only the positions after the longest run of tokens
 * the caches already hold are computed. *done false: this pass cannot use
 * the caches (the step on screen cannot be rebuilt from rows, no cache) and
 * a full pass must run; nothing the view reads has changed then. */
static ts_status cached_pass(ts_live *l, const char *want, bool *done) {
    *done = false;
    int n = l->n_all - l->first;
    const int32_t *ids = l->ids + l->first;
    /* the lens reads every layer at every position, a norm's view every step
     * of the norm, a mean ablation every position: full passes for them */
    char norm[NAME_MAX_LEN + 2];
    if (!l->can_cache || l->lens || !edits_per_position(&l->ex) || norm_view(want, norm, sizeof norm) ||
        n > l->kv.capacity || strcmp(want, l->no_rows_for) == 0)
        return TS_OK;
    int keep = 0;
    bool same_rows = strcmp(l->view_rows.name, want) == 0 || strcmp(want, "logits") == 0;
    if (l->cache_ok && l->cached_knock_gen == l->knock_gen && same_rows)
        while (keep < n && keep < l->n_cached && l->cached[keep] == ids[keep]) keep++;
    if (keep == n) keep = n - 1; /* the same text again: its last position is computed anew */
    if (strcmp(l->view_rows.name, want) != 0) live_rows_reset(&l->view_rows, want);
    if (!l->logit_rows.name[0]) live_rows_reset(&l->logit_rows, "logits");
    l->cache_ok = false; /* until the caches hold this pass */
    live_rows_begin(&l->view_rows, keep, n);
    live_rows_begin(&l->logit_rows, keep, n);
    ts_status st = decode_from(l, ids, keep, n);
    bool view_ok = strcmp(want, "logits") == 0 || live_rows_complete(&l->view_rows);
    if (st == TS_ERR_UNSUPPORTED || (!st && !view_ok)) { /* a full pass draws this step */
        snprintf(l->no_rows_for, sizeof l->no_rows_for, "%s", want);
        live_rows_reset(&l->view_rows, NULL);
        return TS_OK;
    }
    if (st) return st;
    if (!live_rows_complete(&l->logit_rows)) return ts_fail(TS_ERR_ARG, "live: the cached pass made no logits");
    TS_TRY(write_replay(l, want, ids, n));
    int32_t *grown = realloc(l->cached, sizeof *grown * (size_t)n);
    if (!grown) return ts_fail(TS_ERR_NOMEM, "live: out of memory");
    memcpy(grown, ids, sizeof *grown * (size_t)n);
    l->cached = grown;
    l->n_cached = n;
    l->cached_knock_gen = l->knock_gen;
    l->cache_ok = true;
    l->reused = keep;
    *done = true;
    return TS_OK;
}

/* Read the pass back from the anonymous file. */
static ts_status read_pass(ts_live *l, ts_trace **out) {
    struct stat sb;
    if (fstat(l->fd, &sb) != 0 || sb.st_size <= 0) return ts_fail(TS_ERR_IO, "live: the pass wrote nothing");
    void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, l->fd, 0);
    if (map == MAP_FAILED) return ts_fail(TS_ERR_IO, "live: cannot map the pass");
    ts_status st = ts_trace_open_memory(map, (size_t)sb.st_size, out);
    munmap(map, (size_t)sb.st_size);
    return st;
}

/* Keep looking at the same step: its name in the new pass. */
/* Takes t, whatever happens. */
static ts_status adopt_pass(ts_live *l, ts_trace *t, const char *want) {
    ts_view_steps steps;
    ts_status st = ts_view_steps_from_trace(&steps, t);
    if (st) {
        ts_trace_close(t);
        return st;
    }
    /* what the user chose on this step survives the new pass */
    bool kept = l->have_state;
    int head = l->st.head, batch = l->st.batch;
    ts_render_state cells = l->st.cells;
    bool help = l->st.help;
    if (l->have_state) {
        ts_view_state_free(&l->st);
        l->have_state = false;
    }
    ts_view_steps_free(&l->steps);
    ts_trace_close(l->trace);
    l->trace = t;
    l->steps = steps;
    double vw = l->w - PANEL_W, vh = l->h - l->field_h;
    TS_TRY(ts_view_state_init(&l->st, &l->steps, vw, vh));
    l->have_state = true;
    int64_t at = ts_view_find(&l->steps, want, -1);
    if (at >= 0) {
        ts_view_event ev = {.kind = TS_VIEW_EV_FIND, .text = want};
        ts_view_update(&l->st, &l->steps, NULL, &ev);
        l->st.message[0] = '\0';
    }
    if (kept) {
        l->st.head = head;
        l->st.batch = batch;
        l->st.help = help;
        if (strcmp(want, l->valued) == 0) l->st.cells = cells; /* zoom and pan belong to the step */
    }
    snprintf(l->valued, sizeof l->valued, "%s", want);
    return TS_OK;
}

static void clear_pass(ts_live *l) {
    if (l->have_state) ts_view_state_free(&l->st);
    l->have_state = false;
    ts_view_steps_free(&l->steps);
    memset(&l->steps, 0, sizeof l->steps);
    ts_trace_close(l->trace);
    l->trace = NULL;
    l->n_top = 0;
}

static void describe_left_out(ts_live *l) {
    const live_field *f = &l->field[LIVE_SOURCE];
    l->note[0] = '\0';
    if (l->n_bad) {
        size_t i = 0;
        while (i < f->len && !f->bad[i]) i++;
        size_t n = i < f->len ? char_len(f->text + i, f->len - i) : 0;
        snprintf(l->note, sizeof l->note, "%d character%s the model's vocabulary lacks (first: '%.*s') left out, marked red",
                 l->n_bad, l->n_bad == 1 ? "" : "s", (int)n, f->text + i);
    } else if (l->first > 0) {
        snprintf(l->note, sizeof l->note, "longer than the model's %d positions: it reads the last %d tokens (after the orange mark)",
                 l->capacity, l->capacity);
    }
}

/* The step to keep values for: the one on screen, or the default. */
static const char *wanted_step(const ts_live *l, char *buf, size_t n) {
    if (l->have_state && l->st.current >= 0 && l->st.current < l->steps.n) {
        snprintf(buf, n, "%s", l->steps.entry[l->st.current].name);
        return buf;
    }
    if (l->valued[0]) {
        snprintf(buf, n, "%s", l->valued);
        return buf;
    }
    return default_step(l, buf, n);
}

ts_status ts_live_pass(ts_live *l) {
    double t0 = now_ms();
    char want[NAME_MAX_LEN];
    wanted_step(l, want, sizeof want);
    if (l->seq2seq) {
        TS_TRY(live_s2s_tokenize(l));
    } else {
        TS_TRY(tokenize(l));
        describe_left_out(l);
    }
    if (l->seq2seq ? l->s2s.n_src <= 1 : l->n_all == l->first) {
        clear_pass(l);
        snprintf(l->valued, sizeof l->valued, "%s", want);
        l->model_ms = now_ms() - t0;
        return TS_OK;
    }
    bool cached = false;
    TS_TRY(cached_pass(l, want, &cached));
    int V = l->m->cfg.vocab;
    if (cached) {
        next_token(l, l->logit_rows.data + (int64_t)(l->logit_rows.positions - 1) * V, V);
    } else {
        ts_tensor logits;
        int last;
        l->reused = 0;
        TS_TRY(write_pass(l, want, &logits, &last));
        next_token(l, logits.data + (int64_t)last * V, V);
    }
    ts_trace *t = NULL;
    TS_TRY(read_pass(l, &t));
    ts_status st = adopt_pass(l, t, want);
    l->model_ms = now_ms() - t0;
    return st;
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
    clear_pass(l);
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

/* A token's label in the panel and the readouts. */
static void token_label(const ts_live *l, int32_t id, char *buf, size_t cap) {
    if (l->seq2seq) live_s2s_label(l, id, buf, cap);
    else ts_lmtok_label(l->tok, id, buf, cap);
}

/* The model's most likely next token now (with any knock-outs), -1 before any pass. */
static int32_t best_token(const ts_live *l) {
    if (!l->n_top) return -1;
    int32_t best = 0;
    for (int v = 1; v < l->m->cfg.vocab; v++) best = l->probs[v] > l->probs[best] ? v : best;
    return best;
}

ts_status ts_live_tab(ts_live *l) {
    int32_t best = best_token(l);
    for (int i = 0; best >= 0 && i < l->n_top; i++)
        if (l->top[i] == best) return ts_live_append_token(l, i);
    return TS_OK;
}

int ts_live_best(const ts_live *l, float *p, char *label, size_t cap) {
    int32_t best = best_token(l);
    if (best < 0) return -1;
    if (p) *p = l->probs[best];
    if (label) token_label(l, best, label, cap);
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
        f->cursor += char_len(f->text + f->cursor, f->len - f->cursor);
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
        if (y >= box_y(i) && y < box_y(i) + BOX_H) return i;
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
        const ts_render_rect *r = &l->bar_at[i];
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
    if (label) token_label(l, l->top[rank], label, cap);
    return l->top[rank];
}

const char *ts_live_step(const ts_live *l) {
    return l->have_state ? l->steps.entry[l->st.current].name : l->valued;
}

/* ---- knocking heads out ---------------------------------------------------------- */

static int knocked_index(const ts_live *l, const char *spec) {
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

ts_status ts_live_knock(ts_live *l, const char *spec) {
    int at = knocked_index(l, spec);
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

/* The attention module of the step on screen ("decoder.layers.1.self_attn"),
 * when it is drawn as a grid of all its heads; NULL otherwise. */
static const char *head_grid_module(const ts_live *l, char *buf, size_t cap) {
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
    if (!head_grid_module(l, module, sizeof module)) return false;
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
    if (label) token_label(l, v, label, cap);
    return v;
}

/* Knocked-out heads of the grid on screen, struck through. */
static void strike_knocked(ts_live *l, cairo_t *cr) {
    char module[NAME_MAX_LEN], spec[NAME_MAX_LEN + 16];
    if (!l->n_knocked || !head_grid_module(l, module, sizeof module)) return;
    for (int i = 0; i < l->frame.layout.n_panels; i++) {
        if (l->frame.panel_head[i] < 0) continue;
        snprintf(spec, sizeof spec, "%s.head%d", module, l->frame.panel_head[i]);
        if (knocked_index(l, spec) < 0) continue;
        ts_render_rect g = l->frame.layout.panel[i].grid;
        g.y += l->field_h;
        cairo_save(cr);
        cairo_set_source_rgba(cr, 1, 1, 1, 0.55);
        cairo_rectangle(cr, g.x, g.y, g.w, g.h);
        cairo_fill(cr);
        cairo_set_source_rgb(cr, 0.84, 0.15, 0.16);
        cairo_set_line_width(cr, 4);
        cairo_move_to(cr, g.x, g.y);
        cairo_line_to(cr, g.x + g.w, g.y + g.h);
        cairo_move_to(cr, g.x + g.w, g.y);
        cairo_line_to(cr, g.x, g.y + g.h);
        cairo_stroke(cr);
        cairo_restore(cr);
        ts_window_text(cr, "<b>knocked out</b>", 15, false, g.x + g.w / 2, g.y + g.h / 2, 0.5, 0.7, 0.1, 0.1, 0);
    }
}

/* ---- drawing ------------------------------------------------------------------ */

/* A field's text as markup: what the model does not read grey, left-out tokens red. */
static char *field_markup(const live_field *f) {
    GString *s = g_string_new(NULL);
    for (size_t i = 0; i < f->len;) {
        size_t n = char_len(f->text + i, f->len - i);
        char *esc = g_markup_escape_text(f->text + i, (gssize)n);
        if (f->bad && f->bad[i])
            g_string_append_printf(s, "<span foreground=\"#d62728\" underline=\"error\">%s</span>", esc);
        else if (i < f->read_from || i >= f->read_to)
            g_string_append_printf(s, "<span foreground=\"#9aa3ad\">%s</span>", esc);
        else
            g_string_append(s, esc);
        g_free(esc);
        i += n;
    }
    return g_string_free(s, FALSE);
}

/* One field's box at y, its label on the left; the cursor when it has the keys. */
static void draw_one_field(ts_live *l, cairo_t *cr, const live_field *f, const char *label, double y, bool focused) {
    double x0 = 80, box_w = l->w - x0 - 14;
    ts_window_text(cr, label, 13, false, 14, y + 16, 0, 0.35, 0.38, 0.42, 0);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_rectangle(cr, x0, y, box_w, BOX_H);
    cairo_fill_preserve(cr);
    if (focused) cairo_set_source_rgb(cr, 0.1, 0.35, 0.8);
    else cairo_set_source_rgb(cr, 0.55, 0.6, 0.68);
    cairo_set_line_width(cr, focused && l->seq2seq ? 2 : 1);
    cairo_stroke(cr);
    /* the text, scrolled so the cursor stays in the box */
    PangoLayout *lay = ts_render_text_layout(cr);
    PangoFontDescription *fd = pango_font_description_from_string("DejaVu Sans Mono");
    pango_font_description_set_absolute_size(fd, 17 * PANGO_SCALE);
    pango_layout_set_font_description(lay, fd);
    char *markup = field_markup(f);
    pango_layout_set_markup(lay, markup, -1);
    g_free(markup);
    PangoRectangle cur, edge;
    pango_layout_index_to_pos(lay, (int)f->cursor, &cur);
    double cx = cur.x / (double)PANGO_SCALE, shift = cx > box_w - 24 ? cx - (box_w - 24) : 0;
    cairo_save(cr);
    cairo_rectangle(cr, x0 + 1, y + 1, box_w - 2, BOX_H - 2);
    cairo_clip(cr);
    cairo_set_source_rgb(cr, 0.1, 0.12, 0.15);
    cairo_move_to(cr, x0 + 8 - shift, y + 5);
    ts_render_show_layout(cr, lay);
    if (focused) { /* the cursor */
        cairo_set_source_rgb(cr, 0.1, 0.35, 0.8);
        cairo_rectangle(cr, x0 + 8 - shift + cx, y + 4, 2, BOX_H - 8);
        cairo_fill(cr);
    }
    /* where what the model reads starts (a slid window) or ends (a full encoder) */
    size_t marks[2] = {f->read_from, f->read_to};
    for (int k = 0; k < 2; k++) {
        if (k == 0 ? marks[0] == 0 : marks[1] >= f->len) continue;
        pango_layout_index_to_pos(lay, (int)marks[k], &edge);
        double wx = x0 + 8 - shift + edge.x / (double)PANGO_SCALE;
        cairo_set_source_rgb(cr, 1.0, 0.5, 0.05);
        cairo_rectangle(cr, wx - 2, y + 1, 3, BOX_H - 2);
        cairo_fill(cr);
    }
    cairo_restore(cr);
    pango_font_description_free(fd);
    g_object_unref(lay);
}

/* What the model reads, for the status line. */
static void reading(const ts_live *l, char *buf, size_t cap) {
    if (l->seq2seq) {
        int S = l->m->cfg.seq, T = l->m->T;
        snprintf(buf, cap, "the encoder reads &lt;bos&gt; and %d of %d words; the decoder &lt;bos&gt; and %d of %d",
                 l->s2s.n_src > 0 ? l->s2s.n_src - 1 : 0, S - 1, l->s2s.n_tgt > 0 ? l->s2s.n_tgt - 1 : 0, T - 1);
        return;
    }
    int n_tok = l->n_all - l->first;
    snprintf(buf, cap, "%d token%s to the model (of %d it can read)", n_tok, n_tok == 1 ? "" : "s", l->capacity);
}

static void draw_field(ts_live *l, cairo_t *cr) {
    cairo_set_source_rgb(cr, 0.96, 0.97, 0.98);
    cairo_rectangle(cr, 0, 0, l->w, l->field_h);
    cairo_fill(cr);
    if (l->seq2seq) {
        draw_one_field(l, cr, &l->field[LIVE_SOURCE], "<b>source</b>", box_y(LIVE_SOURCE), l->focus == LIVE_SOURCE);
        draw_one_field(l, cr, &l->field[LIVE_TARGET], "<b>target</b>", box_y(LIVE_TARGET), l->focus == LIVE_TARGET);
    } else {
        draw_one_field(l, cr, &l->field[LIVE_SOURCE], "<b>text</b>", box_y(LIVE_SOURCE), true);
    }
    char line[800], what[200];
    reading(l, what, sizeof what);
    char *note = g_markup_escape_text(l->note, -1);
    snprintf(line, sizeof line, "%s%s%s%s", what, l->note[0] ? "   <span foreground=\"#c0580a\">" : "", note,
             l->note[0] ? "</span>" : "");
    g_free(note);
    double y = l->field_h - 18;
    ts_window_text(cr, line, 12.5, false, 80, y, 0, 0.35, 0.38, 0.42, l->w - 80 - 300);
    snprintf(line, sizeof line, "pass %.1f ms · frame %.1f ms", l->model_ms, l->draw_ms);
    ts_window_text(cr, line, 12, false, l->w - 14, y, 1, 0.5, 0.54, 0.6, 0);
}

static void draw_panel(ts_live *l, cairo_t *cr) {
    double x0 = l->w - PANEL_W, y = l->field_h;
    cairo_set_source_rgb(cr, 0.985, 0.985, 0.99);
    cairo_rectangle(cr, x0, y, PANEL_W, l->h - y);
    cairo_fill(cr);
    cairo_set_source_rgb(cr, 0.82, 0.84, 0.87);
    cairo_rectangle(cr, x0, y, 1, l->h - y);
    cairo_fill(cr);
    ts_window_text(cr, "<b>next token</b>", 15, false, x0 + 16, y + 22, 0, 0.12, 0.14, 0.18, 0);
    char buf[600];
    if (l->top_k > 0) snprintf(buf, sizeof buf, "temperature %.2g · top-k %d", l->temperature, l->top_k);
    else snprintf(buf, sizeof buf, "temperature %.2g · every token", l->temperature);
    ts_window_text(cr, buf, 12, false, x0 + 16, y + 44, 0, 0.4, 0.44, 0.5, 0);
    double row_h = 30, label_w = 78, bar_x = x0 + 16 + label_w, bar_w = PANEL_W - label_w - 80;
    y += 66;
    if (l->n_top == 0)
        ts_window_text(cr, l->seq2seq ? "type a source sentence" : "type a few characters", 13, false, x0 + 16, y + 10,
                       0, 0.45, 0.48, 0.52, 0);
    bool knocked = l->n_knocked > 0;
    if (knocked) bar_w -= 14; /* room for "0.94→0.00" */
    for (int i = 0; i < l->n_top; i++) {
        char label[64];
        float p = l->probs[l->top[i]];
        token_label(l, l->top[i], label, sizeof label);
        char *esc = g_markup_escape_text(label, -1);
        snprintf(buf, sizeof buf, "%s", esc);
        g_free(esc);
        double cy = y + i * row_h + row_h / 2;
        ts_window_text(cr, buf, 15, l->top[i] == best_token(l), bar_x - 10, cy, 1, 0.1, 0.12, 0.15, label_w - 4);
        cairo_set_source_rgb(cr, 0.9, 0.91, 0.93);
        cairo_rectangle(cr, bar_x, cy - 9, bar_w, 18);
        cairo_fill(cr);
        if (knocked) { /* before (grey, above) and after (blue, below), side by side */
            cairo_set_source_rgb(cr, 0.62, 0.64, 0.68);
            cairo_rectangle(cr, bar_x, cy - 9, bar_w * l->before[l->top[i]], 8);
            cairo_fill(cr);
            cairo_set_source_rgb(cr, 0.13, 0.4, 0.75);
            cairo_rectangle(cr, bar_x, cy + 1, bar_w * p, 8);
            cairo_fill(cr);
            snprintf(buf, sizeof buf, "%.2f\xe2\x86\x92%.2f", l->before[l->top[i]], p);
            ts_window_text(cr, buf, 11, false, x0 + PANEL_W - 8, cy, 1, 0.2, 0.22, 0.26, 0);
        } else {
            cairo_set_source_rgb(cr, i == 0 ? 0.13 : 0.3, i == 0 ? 0.4 : 0.55, i == 0 ? 0.75 : 0.85);
            cairo_rectangle(cr, bar_x, cy - 9, bar_w * p, 18);
            cairo_fill(cr);
            snprintf(buf, sizeof buf, "%.3f", p);
            ts_window_text(cr, buf, 13, false, bar_x + bar_w + 8, cy, 0, 0.2, 0.22, 0.26, 0);
        }
        l->bar_at[i] = (ts_render_rect){x0 + 8, cy - row_h / 2, PANEL_W - 16, row_h};
    }
    y += TOP_N * row_h + 16;
    if (knocked) {
        char label[64], line[400];
        float b = 0, a = 0;
        int n = 0;
        for (int i = 0; i < l->n_knocked; i++)
            n += snprintf(line + n, sizeof line - (size_t)n, "%s%s", i ? ", " : "", strstr(l->knocked[i], "layers.") ? strstr(l->knocked[i], "layers.") : l->knocked[i]);
        ts_window_text(cr, "<b>knocked out</b> (grey before, blue after)", 12.5, false, x0 + 16, y, 0, 0.7, 0.1, 0.1, 0);
        char *esc = g_markup_escape_text(line, -1);
        ts_window_text(cr, esc, 11.5, false, x0 + 16, y + 18, 0, 0.35, 0.38, 0.42, PANEL_W - 28);
        g_free(esc);
        if (ts_live_change(l, &b, &a, label, sizeof label) >= 0) {
            char *lab = g_markup_escape_text(label, -1);
            snprintf(line, sizeof line, "largest change: <b>%s</b> %.3f \xe2\x86\x92 %.3f (%+.3f)", lab, b, a, a - b);
            g_free(lab);
            ts_window_text(cr, line, 12.5, false, x0 + 16, y + 38, 0, 0.1, 0.12, 0.15, 0);
        }
        y += 58;
    }
    const char *keys = l->seq2seq ? "Tab: one greedy step (the top word to the target)\nclick a bar: append that word\n"
                                    "click a field: type in it\n"
                                  : "Tab: append the top token\nclick a bar: append that token\n";
    snprintf(buf, sizeof buf, "%sclick a head of a grid: knock it out (again: back)\n"
             "\xe2\x86\x90 \xe2\x86\x92 cursor · \xe2\x86\x91 \xe2\x86\x93 step · PgUp/PgDn layer\nCtrl+1..9: one head · Ctrl+0: all heads\nCtrl+L: logit lens (again: back) · Esc quit",
             keys);
    ts_window_text(cr, buf, 12, false, x0 + 16, y + 40, 0, 0.4, 0.44, 0.5, 0);
}

ts_status ts_live_draw(ts_live *l, cairo_t *cr) {
    double t0 = now_ms();
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    ts_status st = TS_OK;
    if (l->have_state) {
        cairo_save(cr);
        cairo_translate(cr, 0, l->field_h);
        cairo_rectangle(cr, 0, 0, l->w - PANEL_W, l->h - l->field_h);
        cairo_clip(cr);
        l->st.width = l->w - PANEL_W;
        l->st.height = l->h - l->field_h;
        st = ts_view_draw(cr, &l->st, &l->steps, l->trace, &l->frame);
        cairo_restore(cr);
    } else {
        ts_window_text(cr, "Type a sentence: every step of the model is drawn here as you type.", 16, false,
             (l->w - PANEL_W) / 2, l->field_h + (l->h - l->field_h) / 2, 0.5, 0.4, 0.44, 0.5, 0);
    }
    strike_knocked(l, cr);
    draw_panel(l, cr);
    draw_field(l, cr);
    l->draw_ms = now_ms() - t0;
    return st;
}

ts_status ts_live_draw_offscreen(ts_live *l) {
    if (!l->offscreen) {
        l->offscreen = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, (int)l->w, (int)l->h);
        if (cairo_surface_status(l->offscreen)) {
            cairo_surface_destroy(l->offscreen);
            l->offscreen = NULL;
            return ts_fail(TS_ERR_NOMEM, "live: no memory for a %.0f x %.0f frame", l->w, l->h);
        }
    }
    cairo_t *cr = cairo_create(l->offscreen);
    ts_status st = ts_live_draw(l, cr);
    cairo_destroy(cr);
    cairo_surface_flush(l->offscreen);
    return st;
}
