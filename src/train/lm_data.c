/* lm_data: language modelling as a data source of the training loop
 * (train.h, "language modelling as a data source"): a corpus split into a
 * training and a held-out stream, seeded windows, held-out loss. The
 * in-context measures a snapshot records come from the caller (o.measure:
 * src/experiment's lm_scores.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/train.h"

void ts_lm_data_opts_default(ts_lm_data_opts *o) {
    memset(o, 0, sizeof *o);
    o->batch = 32;
    o->ctx = 128;
    o->heldout = 256;
    o->heldout_every = 20;
    o->piece = 4096;
}

ts_status ts_lm_data_init(ts_lm_data *d, const int32_t *ids, int64_t n, const ts_lm_data_opts *o) {
    memset(d, 0, sizeof *d);
    d->o = *o;
    int B = o->batch, S = o->ctx;
    if (B < 1) return ts_fail(TS_ERR_ARG, "--batch %d: a step needs at least one window", B);
    if (S < 2) return ts_fail(TS_ERR_ARG, "--seq %d: a window needs at least 2 tokens, one to read and one to predict", S);
    if (o->vocab < 2) return ts_fail(TS_ERR_ARG, "train: a vocabulary of %d tokens has nothing to predict", o->vocab);
    if (o->heldout < 1) return ts_fail(TS_ERR_ARG, "--heldout %d must be at least 1", o->heldout);
    if (o->heldout_every < 2) return ts_fail(TS_ERR_ARG, "train: one piece in %d held out leaves none to train on", o->heldout_every);
    if (o->piece < 1) return ts_fail(TS_ERR_ARG, "train: pieces of %d tokens", o->piece);
    if (!(o->repeat_frac >= 0 && o->repeat_frac <= 1))
        return ts_fail(TS_ERR_ARG, "--repeat-frac %g must be between 0 and 1", (double)o->repeat_frac);
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= o->vocab)
            return ts_fail(TS_ERR_ARG, "train: token %d at %lld is outside the vocabulary [0, %d)", (int)ids[i],
                           (long long)i, o->vocab);
    d->train = malloc(sizeof(int32_t) * (size_t)(n + 1));
    d->held = malloc(sizeof(int32_t) * (size_t)(n + 1));
    if (!d->train || !d->held) {
        ts_lm_data_free(d);
        return ts_fail(TS_ERR_NOMEM, "train: out of memory for the corpus");
    }
    /* piece k is held out when k % every == every / 2: the first piece trains. A
     * short text gets shorter pieces, so that two are held out (each still a window). */
    int64_t piece = o->piece;
    if (n < 2 * (int64_t)o->heldout_every * piece) {
        piece = n / (2 * (int64_t)o->heldout_every);
        if (piece < S + 1) piece = S + 1;
    }
    for (int64_t at = 0, k = 0; at < n; at += piece, k++) {
        int64_t len = n - at < piece ? n - at : piece;
        bool held = k % o->heldout_every == o->heldout_every / 2;
        memcpy(held ? d->held + d->n_held : d->train + d->n_train, ids + at, sizeof(int32_t) * (size_t)len);
        *(held ? &d->n_held : &d->n_train) += len;
    }
    if (d->n_train < S + 1 || d->n_held < S + 1) {
        int64_t nt = d->n_train, nh = d->n_held;
        ts_lm_data_free(d);
        return ts_fail(TS_ERR_ARG,
                       "the text (%lld tokens) gives %lld to train on and %lld held out; each needs a "
                       "window of %d (--seq + 1): use a longer text or a shorter --seq",
                       (long long)n, (long long)nt, (long long)nh, S + 1);
    }
    d->n_windows = (o->heldout + B - 1) / B * B;
    size_t bs = (size_t)B * S, hs = (size_t)d->n_windows * S;
    d->x = malloc(sizeof(int32_t) * bs);
    d->y = malloc(sizeof(int32_t) * bs);
    d->hx = malloc(sizeof(int32_t) * hs);
    d->hy = malloc(sizeof(int32_t) * hs);
    if (!d->x || !d->y || !d->hx || !d->hy) {
        ts_lm_data_free(d);
        return ts_fail(TS_ERR_NOMEM, "train: out of memory for the batches");
    }
    /* held-out windows spread evenly (they overlap when the stream is short) */
    int64_t span = d->n_held - (S + 1);
    for (int i = 0; i < d->n_windows; i++) {
        int64_t at = d->n_windows > 1 ? span * i / (d->n_windows - 1) : 0;
        memcpy(d->hx + (size_t)i * S, d->held + at, sizeof(int32_t) * (size_t)S);
        memcpy(d->hy + (size_t)i * S, d->held + at + 1, sizeof(int32_t) * (size_t)S);
    }
    return TS_OK;
}

void ts_lm_data_free(ts_lm_data *d) {
    free(d->train), free(d->held), free(d->x), free(d->y), free(d->hx), free(d->hy), free(d->probe);
    memset(d, 0, sizeof *d);
}

ts_status ts_lm_data_set_probe(ts_lm_data *d, const int32_t *ids, int P) {
    int S = d->o.ctx;
    for (int64_t i = 0; i < (int64_t)P * S; i++)
        if (ids[i] < 0 || ids[i] >= d->o.vocab)
            return ts_fail(TS_ERR_ARG, "train: probe token %d is outside the vocabulary [0, %d)", (int)ids[i], d->o.vocab);
    int32_t *p = malloc(sizeof(int32_t) * (size_t)P * S);
    if (!p) return ts_fail(TS_ERR_NOMEM, "train: out of memory");
    memcpy(p, ids, sizeof(int32_t) * (size_t)P * S);
    free(d->probe);
    d->probe = p;
    d->probe_batch = P;
    return TS_OK;
}

/* A window of S + 1 tokens: a random sequence of period p repeated. */
static void repeated_window(int32_t *w, int S, int V, uint64_t key) {
    int lo = S / 8 > 1 ? S / 8 : 1, hi = S / 2 > lo ? S / 2 : lo;
    int p = lo + (int)(ts_u01(key, 0) * (hi - lo + 1));
    for (int i = 0; i <= S; i++) w[i] = i < p ? (int32_t)(ts_u01(key, 1 + (uint64_t)i) * V) : w[i - p];
}

static ts_status lm_batch(void *ctx, int64_t step, ts_model_input *in, const int32_t **labels) {
    ts_lm_data *d = ctx;
    int B = d->o.batch, S = d->o.ctx;
    uint64_t key = ts_mix64(d->o.seed ^ ts_mix64(0x1A5Cull + (uint64_t)step));
    int32_t *w = malloc(sizeof(int32_t) * (size_t)(S + 1));
    if (!w) return ts_fail(TS_ERR_NOMEM, "train: out of memory");
    for (int b = 0; b < B; b++) {
        const int32_t *src;
        if (d->o.repeat_frac > 0 && ts_u01(key, 2 * (uint64_t)b) < d->o.repeat_frac) {
            repeated_window(w, S, d->o.vocab, ts_mix64(key + 0x51ull * (uint64_t)(b + 1)));
            src = w;
        } else {
            int64_t at = (int64_t)(ts_u01(key, 2 * (uint64_t)b + 1) * (double)(d->n_train - S));
            src = d->train + at;
        }
        memcpy(d->x + (size_t)b * S, src, sizeof(int32_t) * (size_t)S);
        memcpy(d->y + (size_t)b * S, src + 1, sizeof(int32_t) * (size_t)S);
    }
    free(w);
    *in = (ts_model_input){.src_ids = d->x};
    *labels = d->y;
    return TS_OK;
}

ts_status ts_lm_data_heldout(ts_lm_data *d, ts_model *m, double *loss) {
    int B = d->o.batch, S = d->o.ctx;
    if (m->cfg.batch != B || m->S != S)
        return ts_fail(TS_ERR_ARG, "train: held-out windows are %d x %d; the model takes %d x %d", B, S, m->cfg.batch,
                       m->S);
    bool was = m->training;
    ts_model_set_training(m, false);
    double sum = 0;
    ts_status st = TS_OK;
    for (int i = 0; i < d->n_windows / B && !st; i++) {
        ts_model_input in = {.src_ids = d->hx + (size_t)i * B * S};
        ts_tensor out;
        st = ts_model_forward(m, &in, NULL, &out);
        if (!st)
            sum += ts_bwd_cross_entropy_forward(out.data, d->hy + (size_t)i * B * S, (int64_t)B * S, m->cfg.vocab, -1,
                                                0.0f, NULL);
    }
    ts_model_set_training(m, was);
    *loss = sum / (d->n_windows / B);
    return st;
}

static ts_status lm_heldout(void *ctx, ts_model *m, double *loss) { return ts_lm_data_heldout(ctx, m, loss); }

static ts_status lm_record(void *ctx, ts_model *m, const ts_hook *trace) {
    ts_lm_data *d = ctx;
    double loss;
    ts_status st = ts_lm_data_heldout(d, m, &loss);
    if (!st) {
        float x = (float)loss;
        ts_tensor t;
        ts_tensor_view(&t, &x, 1, (int64_t[]){1});
        st = ts_hook_call(trace, "lm.heldout_loss", TS_OP_METRIC, &t, TS_TAG_SCALAR);
    }
    if (!st && d->o.measure) st = d->o.measure(d->o.measure_ctx, m, trace);
    return st;
}

void ts_lm_data_source(ts_lm_data *d, ts_train_data *out) {
    memset(out, 0, sizeof *out);
    out->ctx = d;
    out->batch = lm_batch;
    out->heldout = lm_heldout;
    out->record = lm_record;
    out->probe = (ts_model_input){.src_ids = d->probe};
    out->probe_batch = d->probe_batch;
    out->tokens_per_step = (int64_t)d->o.batch * d->o.ctx;
}
