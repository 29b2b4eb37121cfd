/* optim: Adam, AdamW, clipping and the schedule (kernels.h, "optim"). */
#include "kernels_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void ts_optim_config_default(ts_optim_config *c, ts_optim_kind kind) {
    c->kind = kind;
    c->beta1 = 0.9f;
    c->beta2 = 0.999f;
    c->eps = 1e-8f;
    c->weight_decay = kind == TS_OPTIM_ADAMW ? 0.01f : 0.0f;
}

ts_status ts_optim_init(ts_optim *o, const ts_optim_config *c, int64_t n) {
    memset(o, 0, sizeof *o);
    if (!(c->beta1 >= 0 && c->beta1 < 1 && c->beta2 >= 0 && c->beta2 < 1))
        return ts_fail(TS_ERR_ARG, "optim: betas must be in [0, 1), got %g and %g", (double)c->beta1,
                       (double)c->beta2);
    if (!(c->eps > 0)) return ts_fail(TS_ERR_ARG, "optim: eps must be positive, got %g", (double)c->eps);
    if (!(c->weight_decay >= 0))
        return ts_fail(TS_ERR_ARG, "--weight-decay %g must not be negative", (double)c->weight_decay);
    o->cfg = *c;
    o->n = n;
    o->m = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    o->v = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    if (!o->m || !o->v) {
        ts_optim_free(o);
        return ts_fail(TS_ERR_NOMEM, "optim: cannot allocate %.1f MB of moments", 8.0 * (double)n / 1048576.0);
    }
    return TS_OK;
}

ts_status ts_optim_set_decay(ts_optim *o, const uint8_t *decay) {
    uint8_t *d = malloc((size_t)(o->n > 0 ? o->n : 1));
    if (!d) return ts_fail(TS_ERR_NOMEM, "optim: out of memory");
    memcpy(d, decay, (size_t)o->n);
    free(o->decay);
    o->decay = d;
    return TS_OK;
}

void ts_optim_free(ts_optim *o) {
    free(o->m);
    free(o->v);
    free(o->decay);
    memset(o, 0, sizeof *o);
}

/* Parameters [i0, i0 + len): the decay mask is constant over each tensor, so
 * the kernel runs once per run of equal mask bytes, with or without decay. */
static void adam_span(const ts_optim *o, float *params, const float *grads, int64_t i0, int64_t len,
                      const ts_kern_adam *with) {
    const ts_kern_ops *ops = ts_kern_ops_current();
    ts_kern_adam without = *with;
    without.wd = 0.0f;
    const uint8_t *dm = o->decay;
    for (int64_t a = i0, end = i0 + len; a < end;) {
        int64_t b = a + 1;
        if (dm)
            while (b < end && (dm[b] != 0) == (dm[a] != 0)) b++;
        else
            b = end;
        ops->adam(params + a, grads + a, o->m + a, o->v + a, b - a, !dm || dm[a] ? with : &without);
        a = b;
    }
}

void ts_optim_step(ts_optim *o, float *params, const float *grads, float lr) {
    const ts_optim_config *c = &o->cfg;
    o->steps++;
    /* Scalars as PyTorch computes them: in double, used as floats. */
    double bc1 = 1.0 - pow((double)c->beta1, (double)o->steps), bc2 = 1.0 - pow((double)c->beta2, (double)o->steps);
    ts_kern_adam a = {
        .b1 = c->beta1, .b2 = c->beta2, .eps = c->eps, .wd = c->weight_decay,
        .step_size = (float)((double)lr / bc1), .bc2_sqrt = (float)sqrt(bc2),
        .decay = (float)(1.0 - (double)lr * c->weight_decay), .adamw = c->kind == TS_OPTIM_ADAMW,
    };
    int64_t n = o->n;
    TS_KERN_SPLIT(n, adam_span(o, params, grads, i0, len, &a));
}

/* At most this many threads add up the norm: each writes its own slot. */
#define NORM_MAX_THREADS 256

double ts_optim_grad_norm(const float *grads, int64_t n) {
    const ts_kern_ops *ops = ts_kern_ops_current();
    double part[NORM_MAX_THREADS] = {0};
    int nth = ts_kern_threads_for(n, TS_KERN_ELTWISE_MIN);
    nth = nth < NORM_MAX_THREADS ? nth : NORM_MAX_THREADS;
    int64_t per = ((n + nth - 1) / nth + 15) / 16 * 16;
    (void)per;
    TS_OMP(parallel for num_threads(nth) schedule(static))
    for (int t = 0; t < nth; t++) {
        int64_t i0 = t * per, len = n - i0 < per ? n - i0 : per;
        if (len > 0) part[t] = ops->sum_squares(grads + i0, len);
    }
    double s = 0;
    for (int t = 0; t < nth; t++) s += part[t]; /* in thread order: the same sum every time */
    return sqrt(s);
}

double ts_optim_clip(float *grads, int64_t n, float max_norm) {
    double norm = ts_optim_grad_norm(grads, n);
    if (max_norm > 0 && norm > max_norm) {
        float coef = (float)(max_norm / (norm + 1e-6));
        ts_scale(grads, grads, coef, n);
    }
    return norm;
}

float ts_optim_lr(float peak, int warmup, int64_t t) {
    if (warmup <= 0) return peak;
    if (t < 1) t = 1;
    double w = warmup, s = (double)t;
    return (float)(peak * fmin(s / w, sqrt(w / s)));
}

float ts_optim_lr_cosine(float peak, float floor, int warmup, int64_t t, int64_t total) {
    if (t < 1) t = 1;
    if (warmup > 0 && t <= warmup) return (float)((double)peak * (double)t / warmup);
    if (t >= total) return floor;
    double x = (double)(t - warmup) / (double)(total - warmup);
    return (float)(floor + ((double)peak - floor) * 0.5 * (1.0 + cos(M_PI * x)));
}

float ts_optim_paper_peak(int d_model, int warmup) {
    return (float)(1.0 / sqrt((double)d_model) / sqrt((double)(warmup > 0 ? warmup : 1)));
}
