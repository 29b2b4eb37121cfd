/* optim: Adam, AdamW, clipping and the schedule (kernels.h, "optim"). */
#include "tscope/kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


#if defined(_OPENMP)
#define OPTIM_PRAGMA_(x) _Pragma(#x)
#define OPTIM_OMP(x) OPTIM_PRAGMA_(omp x)
#else
#define OPTIM_OMP(x)
#endif

/* Below this many parameters one thread does the update. */
#define PAR_MIN 65536

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

void ts_optim_step(ts_optim *o, float *params, const float *grads, float lr) {
    const ts_optim_config *c = &o->cfg;
    o->steps++;
    /* Scalars as PyTorch computes them: in double, used as floats. */
    double bc1 = 1.0 - pow((double)c->beta1, (double)o->steps), bc2 = 1.0 - pow((double)c->beta2, (double)o->steps);
    float step_size = (float)((double)lr / bc1), bc2_sqrt = (float)sqrt(bc2);
    float b1 = c->beta1, b2 = c->beta2, eps = c->eps, wd = c->weight_decay;
    float decay = (float)(1.0 - (double)lr * wd);
    bool adamw = c->kind == TS_OPTIM_ADAMW;
    float *m = o->m, *v = o->v;
    const uint8_t *dm = o->decay;
    int64_t n = o->n;
    int nt = n >= PAR_MIN ? ts_kernels_threads() : 1;
    (void)nt;
    OPTIM_OMP(parallel for num_threads(nt) if(nt > 1) schedule(static))
    for (int64_t i = 0; i < n; i++) {
        float g = grads[i], p = params[i];
        if (wd != 0.0f && (!dm || dm[i])) {
            if (adamw)
                p *= decay;
            else
                g += wd * p;
        }
        m[i] = m[i] * b1 + g * (1.0f - b1);
        v[i] = v[i] * b2 + g * g * (1.0f - b2);
        float denom = sqrtf(v[i]) / bc2_sqrt + eps;
        params[i] = p - step_size * (m[i] / denom);
    }
}

double ts_optim_grad_norm(const float *grads, int64_t n) {
    double s = 0;
    int nt = n >= PAR_MIN ? ts_kernels_threads() : 1;
    (void)nt;
    OPTIM_OMP(parallel for num_threads(nt) if(nt > 1) schedule(static) reduction(+ : s))
    for (int64_t i = 0; i < n; i++) s += (double)grads[i] * grads[i];
    return sqrt(s);
}

double ts_optim_clip(float *grads, int64_t n, float max_norm) {
    double norm = ts_optim_grad_norm(grads, n);
    if (max_norm > 0 && norm > max_norm) {
        float coef = (float)(max_norm / (norm + 1e-6));
        for (int64_t i = 0; i < n; i++) grads[i] *= coef;
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
