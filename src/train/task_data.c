/* task_data: the toy tasks (copy, reverse, sort) as a data source of the
 * training loop (train.h, "the toy tasks as a data source"): seeded batches,
 * a held-out stream never trained on, its teacher-forced loss, and greedy
 * decoding scored against the answers. */
#include <stdlib.h>
#include <string.h>

#include "tscope/train.h"

#define PROBE_MAX 4 /* held-out sequences a trace follows */

ts_status ts_task_data_init(ts_task_data *d, ts_task_kind kind, const ts_model_config *c, int heldout) {
    memset(d, 0, sizeof *d);
    d->kind = kind;
    d->B = c->batch, d->S = c->seq, d->T = c->tgt_seq, d->V = c->vocab;
    d->seed = c->seed;
    d->n_held = (heldout + d->B - 1) / d->B;
    size_t bs = (size_t)d->B * d->S, bt = (size_t)d->B * d->T, h = (size_t)d->n_held;
    d->src = malloc(sizeof(int32_t) * bs);
    d->tgt = malloc(sizeof(int32_t) * bt);
    d->labels = malloc(sizeof(int32_t) * bt);
    d->hsrc = malloc(sizeof(int32_t) * bs * h);
    d->htgt = malloc(sizeof(int32_t) * bt * h);
    d->hlab = malloc(sizeof(int32_t) * bt * h);
    if (!d->src || !d->tgt || !d->labels || !d->hsrc || !d->htgt || !d->hlab) {
        ts_task_data_free(d);
        return ts_fail(TS_ERR_NOMEM, "out of memory for the data");
    }
    /* Held-out sequences come from their own stream: never trained on. */
    for (int i = 0; i < d->n_held; i++)
        ts_task_batch(kind, d->V, d->B, d->S, d->seed ^ 0x4E1DC0DEull, (uint64_t)i, d->hsrc + bs * i,
                      d->htgt + bt * i, d->hlab + bt * i);
    return TS_OK;
}

void ts_task_data_free(ts_task_data *d) {
    free(d->src), free(d->tgt), free(d->labels), free(d->hsrc), free(d->htgt), free(d->hlab);
    memset(d, 0, sizeof *d);
}

static ts_status task_batch(void *ctx, int64_t step, ts_model_input *in, const int32_t **labels) {
    ts_task_data *d = ctx;
    ts_task_batch(d->kind, d->V, d->B, d->S, d->seed, (uint64_t)step, d->src, d->tgt, d->labels);
    *in = (ts_model_input){.src_ids = d->src, .tgt_ids = d->tgt};
    *labels = d->labels;
    return TS_OK;
}

/* Teacher-forced held-out loss with the inference forward (no dropout). */
static ts_status task_heldout(void *ctx, ts_model *m, double *loss) {
    ts_task_data *d = ctx;
    bool was = m->training;
    ts_model_set_training(m, false);
    double sum = 0;
    ts_status st = TS_OK;
    for (int i = 0; i < d->n_held && !st; i++) {
        ts_model_input in = {.src_ids = d->hsrc + (size_t)i * d->B * d->S, .tgt_ids = d->htgt + (size_t)i * d->B * d->T};
        ts_tensor out;
        st = ts_model_forward(m, &in, NULL, &out);
        if (!st)
            sum += ts_bwd_cross_entropy_forward(out.data, d->hlab + (size_t)i * d->B * d->T, (int64_t)d->B * d->T, d->V,
                                                0, 0.0f, NULL);
    }
    ts_model_set_training(m, was);
    *loss = sum / d->n_held;
    return st;
}

void ts_task_data_source(ts_task_data *d, ts_train_data *out) {
    memset(out, 0, sizeof *out);
    out->ctx = d;
    out->batch = task_batch;
    out->heldout = task_heldout;
    /* the probe: the first held-out sequences */
    out->probe = (ts_model_input){.src_ids = d->hsrc, .tgt_ids = d->htgt};
    out->probe_batch = d->B < PROBE_MAX ? d->B : PROBE_MAX;
    out->tokens_per_step = (int64_t)d->B * (d->S + d->T);
}

ts_status ts_task_data_evaluate(ts_task_data *d, ts_model *m, ts_task_score *score, int32_t *first) {
    bool was = m->training;
    ts_model_set_training(m, false);
    memset(score, 0, sizeof *score);
    int32_t *pred = malloc(sizeof(int32_t) * (size_t)d->B * d->T);
    int32_t *tgt = malloc(sizeof(int32_t) * (size_t)d->B * d->T);
    ts_status st = pred && tgt ? TS_OK : ts_fail(TS_ERR_NOMEM, "out of memory");
    for (int i = 0; i < d->n_held && !st; i++) {
        const int32_t *src = d->hsrc + (size_t)i * d->B * d->S, *lab = d->hlab + (size_t)i * d->B * d->T;
        ts_model_input in = {.src_ids = src};
        if ((st = ts_task_greedy(m, &in, tgt, pred, NULL, NULL))) break;
        ts_task_score_add(score, pred, lab, d->B, d->T);
        if (first && i == 0) memcpy(first, pred, sizeof(int32_t) * (size_t)d->B * d->T);
    }
    free(pred), free(tgt);
    ts_model_set_training(m, was);
    return st;
}
