/* live_pass: a live session's passes: the text tokenized, the model run
 * over it through the trace writer into the session's anonymous file and
 * read back, the next token's distribution. A causal model's pass reuses the
 * earlier positions: the keys and values of every layer stay in a cache,
 * only the new tokens are decoded, and the step on screen is rebuilt from
 * its kept rows (live_rows.c) before a dry run records every other step's
 * shape. The session (live.c) calls ts_live_pass after every edit. */
#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "live_internal.h"
#include "tscope/io.h"
#include "tscope/kernels.h"

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
            size_t n = live_char_len(f->text + i, f->len - i);
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
    ts_softmax_vocab(probs, logits, V, T, floor_logit);
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

void live_clear_pass(ts_live *l) {
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
        size_t n = i < f->len ? live_char_len(f->text + i, f->len - i) : 0;
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
    double t0 = live_now_ms();
    char want[NAME_MAX_LEN];
    wanted_step(l, want, sizeof want);
    if (l->seq2seq) {
        TS_TRY(live_s2s_tokenize(l));
    } else {
        TS_TRY(tokenize(l));
        describe_left_out(l);
    }
    if (l->seq2seq ? l->s2s.n_src <= 1 : l->n_all == l->first) {
        live_clear_pass(l);
        snprintf(l->valued, sizeof l->valued, "%s", want);
        ts_status st = live_views_follow(l);
        l->model_ms = live_now_ms() - t0;
        return st;
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
    if (!st) st = live_views_follow(l);
    l->model_ms = live_now_ms() - t0;
    return st;
}
