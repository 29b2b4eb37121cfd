/* train_loop: the training loop every task shares (train.h, "the training
 * loop"): batches from a data source, the schedule, steps, held-out loss and
 * early stopping, trace snapshots, the stop flag. It prints nothing: the
 * caller's progress callback sees every step. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "train_record.h"
#include "tscope/train.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void ts_train_loop_opts_default(ts_train_loop_opts *o) {
    memset(o, 0, sizeof *o);
    o->steps = 1000;
    o->lr = 5e-3f;
    o->warmup = 100;
    o->schedule = TS_LR_INV_SQRT;
    o->clip = 1.0f;
    o->eval_every = 100;
    o->every = 10;
}

float ts_train_loop_lr(const ts_train_loop_opts *o, int64_t t) {
    if (o->schedule == TS_LR_COSINE) return ts_optim_lr_cosine(o->lr, o->min_lr, o->warmup, t, o->steps);
    return ts_optim_lr(o->lr, o->warmup, t);
}

/* Loss and gradients of the first training batch, with no update: what the
 * untrained model's snapshot shows. */
static ts_status measure(ts_train *tr, ts_train_data *d, const ts_train_loop_opts *o, double *loss) {
    const ts_model_config *c = &tr->m->cfg;
    ts_model_input in;
    const int32_t *labels;
    ts_status st = d->batch(d->ctx, 1, &in, &labels);
    ts_tensor out;
    if (!st) st = ts_train_forward(tr, &in, &out);
    if (st) return st;
    int classes = c->head == TS_HEAD_LM ? c->vocab : c->n_labels;
    int64_t rows = ts_tensor_numel(&out) / classes;
    *loss = ts_bwd_cross_entropy_forward(out.data, labels, rows, classes, o->ignore_index, o->smoothing, NULL);
    ts_train_zero_grad(tr);
    ts_bwd_cross_entropy_backward(ts_train_output_grad(tr), 1.0f, out.data, labels, rows, classes, o->ignore_index,
                                  o->smoothing);
    return ts_train_backward(tr, NULL, NULL);
}

ts_status ts_train_loop_opts_check(const ts_train_loop_opts *o) {
    if (o->steps < 0) return ts_fail(TS_ERR_ARG, "--steps %lld must not be negative", (long long)o->steps);
    if (o->warmup < 0) return ts_fail(TS_ERR_ARG, "--warmup %d must not be negative", o->warmup);
    if (!(o->lr > 0)) return ts_fail(TS_ERR_ARG, "--lr %g must be positive", (double)o->lr);
    if (!(o->min_lr >= 0 && o->min_lr <= o->lr))
        return ts_fail(TS_ERR_ARG, "--min-lr %g must be at least 0 and at most --lr %g", (double)o->min_lr,
                       (double)o->lr);
    if (!(o->smoothing >= 0 && o->smoothing < 1))
        return ts_fail(TS_ERR_ARG, "--label-smoothing %g must be at least 0 and below 1", (double)o->smoothing);
    if (o->eval_every < 1) return ts_fail(TS_ERR_ARG, "--eval-every %d must be at least 1", o->eval_every);
    if (o->trace && o->every < 1) return ts_fail(TS_ERR_ARG, "--every %d must be at least 1", o->every);
    if (o->patience < 0) return ts_fail(TS_ERR_ARG, "--patience %d must be 0 (off) or more", o->patience);
    if (o->first_step < 0 || (o->steps > 0 && o->first_step >= o->steps))
        return ts_fail(TS_ERR_ARG, "--steps %lld: the run has done %lld already", (long long)o->steps,
                       (long long)o->first_step);
    /* early stopping counts held-out evaluations: too few, and it could never act */
    int64_t left = o->steps - o->first_step;
    int64_t evals = left / o->eval_every + (left % o->eval_every != 0);
    if (o->patience > 0 && evals <= o->patience)
        return ts_fail(TS_ERR_ARG, "--patience %d needs more than %d held-out evaluations, but --steps %lld with "
                                   "--eval-every %d makes %lld: it could never stop the run",
                       o->patience, o->patience, (long long)o->steps, o->eval_every, (long long)evals);
    return TS_OK;
}

static ts_status check_source(const ts_train_data *d, const ts_train_loop_opts *o) {
    if (!d->batch || !d->heldout) return ts_fail(TS_ERR_ARG, "train: the data source has no batches");
    if (o->trace && d->probe_batch < 1) return ts_fail(TS_ERR_ARG, "train: the data source has no probe to trace");
    return TS_OK;
}

ts_status ts_train_loop(ts_train *tr, ts_optim *opt, ts_train_data *d, const ts_train_loop_opts *o,
                        ts_train_loop_result *r) {
    memset(r, 0, sizeof *r);
    r->best_loss = INFINITY;
    r->last_heldout = NAN;
    ts_status st = ts_train_loop_opts_check(o);
    if (!st) st = check_source(d, o);
    if (st) return st;
    ts_model *m = tr->m;
    tr_recorder rec;
    memset(&rec, 0, sizeof rec);
    float *best = NULL;
    if (o->patience > 0 && !(best = malloc(sizeof(float) * (size_t)m->n_floats)))
        return ts_fail(TS_ERR_NOMEM, "out of memory for the best weights");
    if (o->trace && (st = tr_recorder_init(&rec, m, d, o->trace))) {
        free(best);
        return st;
    }
    ts_model_set_training(m, true);
    ts_train_step_opts so = {o->lr, o->smoothing, o->clip, o->ignore_index};
    ts_train_step_result sr = {0};
    double t0 = now(), tsum = 0; /* losses since the last snapshot */
    int tn = 0, since_best = 0;
    bool stopping = false;
    if (o->trace && o->first_step == 0) { /* the untrained model: loss, gradients and attention before any step */
        double l0 = 0;
        st = measure(tr, d, o, &l0);
        if (!st) st = tr_recorder_snapshot(&rec, tr, d, 0, l0, 0.0f, sqrt(ts_train_grad_sumsq(tr, NULL)));
    }
    for (int64_t step = o->first_step + 1; step <= o->steps && !st && !stopping; step++) {
        ts_model_input in;
        const int32_t *labels;
        if ((st = d->batch(d->ctx, step, &in, &labels))) break;
        so.lr = ts_train_loop_lr(o, step);
        if ((st = ts_train_step(tr, opt, &in, labels, &so, &sr))) break;
        r->steps = step;
        if (!isfinite(sr.loss)) {
            bool clipped = o->clip > 0 && o->clip <= 1;
            st = ts_fail(TS_ERR_ARG, "the loss became %g at step %lld: try a smaller --lr (it is %g)%s", sr.loss,
                         (long long)step, (double)o->lr, clipped ? "" : " or --clip 1");
            break;
        }
        tsum += sr.loss, tn++;
        bool interrupted = o->stop && *o->stop;
        bool last = step == o->steps || interrupted;
        if (o->trace && (step % o->every == 0 || last)) {
            st = tr_recorder_snapshot(&rec, tr, d, step, tsum / tn, so.lr, sr.grad_norm);
            tsum = 0, tn = 0;
            if (st) break;
        }
        double el = now() - t0;
        int64_t done = step - o->first_step; /* in this session */
        ts_train_progress p = {step, o->steps, sr.loss, NAN, so.lr, sr.grad_norm, el,
                               (double)done * (double)d->tokens_per_step / el, el / done * (o->steps - step), false};
        if (step % o->eval_every == 0 || last) {
            if ((st = d->heldout(d->ctx, m, &p.heldout))) break;
            r->last_heldout = p.heldout;
            if (p.heldout < r->best_loss * 0.99) {
                r->best_loss = p.heldout, r->best_step = step, since_best = 0;
                if (best) memcpy(best, m->block, sizeof(float) * (size_t)m->n_floats);
            } else if (o->patience > 0 && ++since_best >= o->patience) {
                stopping = r->early_stop = true;
            }
        }
        if (interrupted) stopping = r->interrupted = true;
        p.stopping = stopping;
        if (o->progress) o->progress(o->progress_ctx, &p);
    }
    r->seconds = now() - t0;
    r->records = rec.records;
    if (!st && r->early_stop && best) memcpy(m->block, best, sizeof(float) * (size_t)m->n_floats);
    tr_recorder_free(&rec);
    free(best);
    return st;
}
