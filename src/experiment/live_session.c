/* live_session: the model answering a text as it is typed, kept for the
 * live views (experiment.h's ts_live_session): the web page's session in
 * WebAssembly (src/wasm) and `tscope live`'s views (viz/viewer) both run
 * it. A text is tokenized as `tscope live` does, and only the positions
 * after the longest prefix already in the cache of keys and values run
 * through the model's own decoding (ts_model_decode). Two caches, as in
 * live: the model with the heads knocked out (the experiment's ablations on
 * the hook) and the plain one, for "before". The hook of the first keeps,
 * for the new rows, every head's attention and each layer's lens reading;
 * each position's loss is read from both. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/io.h"
#include "tscope/kernels.h"
#include "tscope/experiment.h"
#include "tscope/tokenizer.h"

/* One model's state over the text: the model with the heads knocked out
 * (run[0], watched) or the plain one (run[1], for "before"). */
typedef struct live_run {
    ts_kv_cache kv;
    int32_t *ids;     /* (cap) the tokens the cache holds */
    int n;            /* how many */
    bool valid;       /* false: the cache holds nothing reusable */
    float *logits;    /* (cap, V) */
    float *attn;      /* (L, H, cap, cap) every head's attention rows (run[0] only) */
    int32_t *lens_id; /* (L, cap) the lens's most likely next token (run[0] only) */
    float *lens_p;    /* (L, cap) its probability */
} live_run;

struct ts_live_session {
    ts_model *m;         /* own_m, or the caller's */
    ts_lmtok *tok;
    ts_model own_m;      /* a checkpoint the session opened (owns) */
    ts_lmtok own_tok;
    bool owns, has_ex;
    int L, H, V, D, cap;
    int32_t *ids;        /* (cap) the tokens read now */
    int n, skipped;
    live_run run[2];
    char *knocked;       /* (L * H) 1: the head is out */
    int n_knocked;
    ts_experiment ex;    /* the knock-outs as ablations */
    int pos0;            /* the first position of the rows being decoded */
    float *stream, *normed; /* (kv rows, D) the lens's scratch */
    float *lens_logits;  /* (kv rows, V) */
    float *loss;         /* (cap) with the heads knocked out */
    float *loss_before;  /* (cap) with every head in place, while some are out */
    double *loss_d;      /* (cap) */
    float *probs, *before; /* (V) */
    char label[256];
};

/* ---- opening ---------------------------------------------------------------- */

static ts_status alloc_run(live_run *r, const ts_live_session *s) {
    TS_TRY(ts_kv_cache_init(&r->kv, s->m));
    size_t L = (size_t)s->L, cap = (size_t)r->kv.capacity;
    r->attn = calloc(L * (size_t)s->H * cap * cap, sizeof(float));
    r->lens_p = calloc(L * cap, sizeof(float));
    r->lens_id = calloc(L * cap, sizeof(int32_t));
    r->logits = calloc(cap * (size_t)s->V, sizeof(float));
    r->ids = calloc(cap, sizeof(int32_t));
    if (!r->attn || !r->lens_p || !r->lens_id || !r->logits || !r->ids)
        return ts_fail(TS_ERR_NOMEM, "live: out of memory for %zu positions", cap);
    return TS_OK;
}

static void free_run(live_run *r) {
    ts_kv_cache_free(&r->kv);
    free(r->attn), free(r->lens_p), free(r->lens_id), free(r->logits), free(r->ids);
}

/* The buffers of a session on s->m and s->tok. */
static ts_status init_session(ts_live_session *s, const char *what) {
    const ts_model_config *c = &s->m->cfg;
    const char *why;
    if (!ts_model_can_cache(c, &why)) return ts_fail(TS_ERR_ARG, "live: %s: %s", what, why);
    if (s->tok->count == 0) return ts_fail(TS_ERR_ARG, "live: %s has no tokenizer", what);
    s->L = c->layers, s->H = c->heads, s->V = c->vocab, s->D = c->d_model;
    for (int i = 0; i < 2; i++) TS_TRY(alloc_run(&s->run[i], s));
    s->cap = s->run[0].kv.capacity;
    int rows = s->run[0].kv.rows;
    s->ids = calloc((size_t)s->cap, sizeof(int32_t));
    s->loss = calloc((size_t)s->cap, sizeof(float));
    s->loss_before = calloc((size_t)s->cap, sizeof(float));
    s->probs = calloc((size_t)s->V, sizeof(float));
    s->before = calloc((size_t)s->V, sizeof(float));
    s->stream = calloc((size_t)rows * s->D, sizeof(float));
    s->normed = calloc((size_t)rows * s->D, sizeof(float));
    s->loss_d = calloc((size_t)s->cap, sizeof(double));
    s->lens_logits = calloc((size_t)rows * s->V, sizeof(float));
    s->knocked = calloc((size_t)s->L * s->H, 1);
    if (!s->ids || !s->loss || !s->loss_before || !s->probs || !s->before || !s->stream || !s->normed || !s->loss_d ||
        !s->lens_logits || !s->knocked)
        return ts_fail(TS_ERR_NOMEM, "live: out of memory");
    ts_experiment_init(&s->ex);
    s->has_ex = true;
    return TS_OK;
}

static ts_live_session *new_session(void) {
    ts_live_session *s = calloc(1, sizeof *s);
    if (!s) ts_fail(TS_ERR_NOMEM, "live: out of memory");
    return s;
}

ts_live_session *ts_live_session_open(const char *path) {
    ts_live_session *s = new_session();
    if (!s) return NULL;
    ts_status st = ts_kernels_init();
    if (!st) {
        ts_kernels_set_threads(1); /* the browser build has no threads */
        st = ts_lm_checkpoint_open(path, NULL, 1, 0, &s->own_m, &s->own_tok);
    }
    if (!st) {
        s->owns = true;
        s->m = &s->own_m, s->tok = &s->own_tok;
        st = init_session(s, path);
    }
    if (st) {
        ts_live_session_close(s);
        return NULL;
    }
    return s;
}

ts_live_session *ts_live_session_new(ts_model *m, ts_lmtok *tok) {
    ts_live_session *s = new_session();
    if (!s) return NULL;
    s->m = m, s->tok = tok;
    if (init_session(s, "this model")) {
        ts_live_session_close(s);
        return NULL;
    }
    return s;
}

void ts_live_session_close(ts_live_session *s) {
    if (!s) return;
    for (int i = 0; i < 2; i++) free_run(&s->run[i]);
    if (s->owns) {
        ts_model_free(&s->own_m);
        ts_lmtok_free(&s->own_tok);
    }
    if (s->has_ex) ts_experiment_free(&s->ex);
    free(s->ids), free(s->loss), free(s->loss_before), free(s->probs), free(s->before), free(s->stream), free(s->normed);
    free(s->lens_logits), free(s->loss_d), free(s->knocked);
    free(s);
}

int ts_live_session_layers(const ts_live_session *s) { return s->L; }
int ts_live_session_heads(const ts_live_session *s) { return s->H; }
int ts_live_session_vocab(const ts_live_session *s) { return s->V; }
int ts_live_session_capacity(const ts_live_session *s) { return s->cap; }
int ts_live_session_tokens(const ts_live_session *s) { return s->n; }
int ts_live_session_skipped(const ts_live_session *s) { return s->skipped; }

/* ---- the text --------------------------------------------------------------- */

/* Bytes of the UTF-8 character at p (1 for a stray byte). */
static size_t char_len(const unsigned char *p, size_t left) {
    size_t n = *p >= 0xf0 ? 4 : *p >= 0xe0 ? 3 : *p >= 0xc0 ? 2 : 1;
    return n <= left ? n : left;
}

/* ids of text into s->ids, the last `cap` kept. A character model encodes
 * each character alone, so an unknown one costs only itself (live_pass.c's
 * rule); another tokenizer encodes the whole text. */
static ts_status tokenize(ts_live_session *s, const char *text) {
    size_t len = strlen(text);
    ts_bpe_ids out = {0};
    s->skipped = 0;
    ts_status st = TS_OK;
    if (s->tok->kind == TS_LMTOK_CHAR) {
        for (size_t i = 0; i < len && !st;) {
            size_t n = char_len((const unsigned char *)text + i, len - i);
            size_t before = out.count;
            if (ts_lmtok_encode(s->tok, text + i, n, &out) != TS_OK || out.count != before + 1) {
                out.count = before;
                s->skipped++;
            }
            i += n;
        }
    } else {
        st = ts_lmtok_encode(s->tok, text, len, &out);
    }
    if (!st) {
        size_t first = out.count > (size_t)s->cap ? out.count - (size_t)s->cap : 0;
        s->n = (int)(out.count - first);
        memcpy(s->ids, out.ids + first, sizeof(int32_t) * (size_t)s->n);
    }
    ts_bpe_ids_free(&out);
    return st;
}

/* ---- a pass ----------------------------------------------------------------- */

/* Layer l's lens for rows x (rows, D) at positions pos0..: the stream through
 * the model's final norm and head (model_head.c, as the experiment's lens). */
static void lens_rows(ts_live_session *s, live_run *r, int l, const ts_tensor *t) {
    int64_t rows = t->shape[1], D = s->D, V = s->V;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t d = 0; d < D; d++) s->stream[i * D + d] = ((const float *)t->data)[i * t->stride[1] + d * t->stride[2]];
    ts_model_final_norm_rows(s->m, s->normed, NULL, NULL, s->stream, rows);
    ts_model_head_rows(s->m, s->lens_logits, s->normed, rows);
    for (int64_t i = 0; i < rows; i++) {
        float *p = s->lens_logits + i * V;
        ts_softmax_vocab(p, p, V, 1.0, -INFINITY);
        int32_t best = ts_model_argmax(p, (int)V);
        size_t at = (size_t)l * s->cap + (size_t)(s->pos0 + i);
        r->lens_id[at] = best;
        r->lens_p[at] = p[best];
    }
}

/* The new rows of one layer's attention weights (1, H, rows, keys). */
static void attention_rows(ts_live_session *s, live_run *r, int l, const ts_tensor *t) {
    const float *w = t->data;
    for (int64_t h = 0; h < t->shape[1]; h++)
        for (int64_t i = 0; i < t->shape[2]; i++) {
            float *dst = r->attn + (((size_t)l * s->H + (size_t)h) * s->cap + (size_t)(s->pos0 + i)) * s->cap;
            for (int64_t j = 0; j < t->shape[3]; j++)
                dst[j] = w[h * t->stride[1] + i * t->stride[2] + j * t->stride[3]];
        }
}

/* The hook of the pass on screen: what the views read, from the new rows. */
static ts_status watch(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag) {
    (void)op, (void)tag;
    ts_live_session *s = ctx;
    live_run *r = &s->run[0];
    const char *stack = ts_model_stack_name(&s->m->cfg);
    size_t n = strlen(stack);
    if (strncmp(name, stack, n) != 0 || strncmp(name + n, ".layers.", 8) != 0) return TS_OK;
    char *rest;
    long l = strtol(name + n + 8, &rest, 10);
    if (l < 0 || l >= s->L) return TS_OK;
    if (strcmp(rest, ".self_attn.weights") == 0 && t->rank == 4) attention_rows(s, r, (int)l, t);
    if (strcmp(rest, ".out") == 0 && t->rank == 3) lens_rows(s, r, (int)l, t);
    return TS_OK;
}

/* Run r over s->ids from the first position its cache does not hold. */
static ts_status run_from_cache(ts_live_session *s, live_run *r, const ts_hook *hook) {
    int keep = 0;
    if (r->valid)
        while (keep < s->n && keep < r->n && r->ids[keep] == s->ids[keep]) keep++;
    r->kv.len = keep;
    r->n = keep;
    for (int at = keep; at < s->n;) {
        int step = s->n - at < r->kv.rows ? s->n - at : r->kv.rows;
        s->pos0 = at;
        s->ex.pos0 = at;
        const float *logits;
        ts_status st = ts_model_decode(s->m, &r->kv, s->ids + at, step, hook, &logits);
        if (st) {
            r->valid = false;
            return st;
        }
        memcpy(r->logits + (size_t)at * s->V, logits, sizeof(float) * (size_t)step * s->V);
        memcpy(r->ids + at, s->ids + at, sizeof(int32_t) * (size_t)step);
        at += step;
        r->n = at;
    }
    r->valid = true;
    return TS_OK;
}

/* Each position's loss over r's logits into out (n). */
static void token_loss(ts_live_session *s, const live_run *r, float *out) {
    if (s->n > 0) ts_experiment_token_loss(r->logits, s->ids, s->n, s->V, s->loss_d);
    for (int i = 0; i < s->n; i++) out[i] = (float)s->loss_d[i];
}

/* The pass on screen (heads knocked out, watched) and, while some are out,
 * the plain one; then each position's loss. */
static ts_status pass(ts_live_session *s) {
    ts_hook hook = {.fn = watch, .ctx = s};
    if (s->n_knocked) ts_experiment_attach(&s->ex, &hook);
    TS_TRY(run_from_cache(s, &s->run[0], &hook));
    if (s->n_knocked) TS_TRY(run_from_cache(s, &s->run[1], NULL));
    token_loss(s, &s->run[0], s->loss);
    if (s->n_knocked) token_loss(s, &s->run[1], s->loss_before);
    return TS_OK;
}

int ts_live_session_set_text(ts_live_session *s, const char *text) {
    TS_TRY(tokenize(s, text));
    return pass(s);
}

ts_status ts_live_session_set_ids(ts_live_session *s, const int32_t *ids, int n) {
    if (n < 0) n = 0;
    int first = n > s->cap ? n - s->cap : 0;
    for (int i = first; i < n; i++)
        if (ids[i] < 0 || ids[i] >= s->V) return ts_fail(TS_ERR_ARG, "live: token id %d is outside the vocabulary (%d)", ids[i], s->V);
    s->n = n - first, s->skipped = 0;
    memcpy(s->ids, ids + first, sizeof(int32_t) * (size_t)s->n);
    return pass(s);
}

/* ---- knock-outs ------------------------------------------------------------- */

/* The experiment of the heads out now, checked against the model. */
static ts_status rebuild_experiment(ts_live_session *s) {
    ts_experiment_free(&s->ex);
    ts_experiment_init(&s->ex);
    const char *stack = ts_model_stack_name(&s->m->cfg);
    for (int i = 0; i < s->L * s->H; i++) {
        if (!s->knocked[i]) continue;
        char spec[96];
        snprintf(spec, sizeof spec, "%s.layers.%d.self_attn.head%d", stack, i / s->H, i % s->H);
        TS_TRY(ts_experiment_add_ablate(&s->ex, spec));
    }
    return s->n_knocked ? ts_experiment_check(&s->ex, &s->m->cfg) : TS_OK;
}

ts_status ts_live_session_set_knocked(ts_live_session *s, const char *knocked) {
    if (memcmp(s->knocked, knocked, (size_t)s->L * s->H) == 0) return TS_OK;
    s->n_knocked = 0;
    for (int i = 0; i < s->L * s->H; i++) s->n_knocked += (s->knocked[i] = knocked[i] != 0);
    s->run[0].valid = false; /* its keys and values were made with the other heads */
    TS_TRY(rebuild_experiment(s));
    return pass(s);
}

int ts_live_session_knock(ts_live_session *s, int layer, int head) {
    if (layer < 0 || layer >= s->L || head < 0 || head >= s->H)
        return -(int)ts_fail(TS_ERR_ARG, "live: no head %d of layer %d (%d layers of %d heads)", head, layer,
                             s->L, s->H);
    char *k = &s->knocked[layer * s->H + head];
    *k = !*k;
    s->n_knocked += *k ? 1 : -1;
    s->run[0].valid = false; /* its keys and values were made with the other heads */
    ts_status st = rebuild_experiment(s);
    if (!st) st = pass(s);
    return st ? -(int)st : *k;
}

int ts_live_session_knocked(const ts_live_session *s, int layer, int head) {
    return layer >= 0 && layer < s->L && head >= 0 && head < s->H && s->knocked[layer * s->H + head];
}

int ts_live_session_n_knocked(const ts_live_session *s) { return s->n_knocked; }

/* ---- what the page reads ---------------------------------------------------- */

const float *ts_live_session_next_probs(ts_live_session *s, float t, int before) {
    if (s->n == 0) return NULL;
    const live_run *r = &s->run[before && s->n_knocked ? 1 : 0];
    float *out = before ? s->before : s->probs;
    ts_softmax_vocab(out, r->logits + (size_t)(s->n - 1) * s->V, s->V, t > 0 ? t : 1.0, -INFINITY);
    return out;
}

/* What orders the bars: the larger of after (p) and before (b). */
static float rank_of(const float *p, const float *b, int32_t v) { return b[v] > p[v] ? b[v] : p[v]; }

int ts_live_session_top(ts_live_session *s, float t, int k, int32_t *ids) {
    if (s->n == 0 || k <= 0) return 0;
    const float *p = ts_live_session_next_probs(s, t, 0), *b = ts_live_session_next_probs(s, t, 1);
    int n = 0; /* ids[0..n) in order, the largest first; ties: the lower id first */
    for (int32_t v = 0; v < s->V; v++) {
        float r = rank_of(p, b, v);
        if (n == k && r <= rank_of(p, b, ids[k - 1])) continue;
        int at = n < k ? n++ : k - 1;
        while (at > 0 && rank_of(p, b, ids[at - 1]) < r) {
            ids[at] = ids[at - 1];
            at--;
        }
        ids[at] = v;
    }
    return n;
}

int32_t ts_live_session_sample(ts_live_session *s, float t, double u) {
    if (s->n == 0) return -1;
    return ts_model_sample(s->run[0].logits + (size_t)(s->n - 1) * s->V, s->V, t, 0, u, NULL);
}

const char *ts_live_session_token_label(ts_live_session *s, int i) {
    s->label[0] = 0;
    if (i >= 0 && i < s->n) ts_lmtok_label(s->tok, s->ids[i], s->label, sizeof s->label);
    return s->label;
}

const char *ts_live_session_vocab_label(ts_live_session *s, int32_t id) {
    s->label[0] = 0;
    if (id >= 0 && id < s->V) ts_lmtok_label(s->tok, id, s->label, sizeof s->label);
    return s->label;
}

const char *ts_live_session_piece(ts_live_session *s, int32_t id) {
    s->label[0] = 0;
    char *text = NULL;
    size_t len = 0;
    if (id >= 0 && id < s->V && ts_lmtok_decode(s->tok, &id, 1, &text, &len) == TS_OK)
        snprintf(s->label, sizeof s->label, "%s", text);
    free(text);
    return s->label;
}

const float *ts_live_session_attention(const ts_live_session *s, int layer, int head) {
    if (layer < 0 || layer >= s->L || head < 0 || head >= s->H) return NULL;
    return s->run[0].attn + ((size_t)layer * s->H + (size_t)head) * s->cap * s->cap;
}

const float *ts_live_session_attention_all(const ts_live_session *s) { return s->run[0].attn; }
const char *ts_live_session_knocked_all(const ts_live_session *s) { return s->knocked; }

const int32_t *ts_live_session_lens_ids(const ts_live_session *s) { return s->run[0].lens_id; }
const float *ts_live_session_lens_probs(const ts_live_session *s) { return s->run[0].lens_p; }
const float *ts_live_session_loss(const ts_live_session *s) { return s->loss; }
const float *ts_live_session_loss_before(const ts_live_session *s) { return s->n_knocked ? s->loss_before : s->loss; }
