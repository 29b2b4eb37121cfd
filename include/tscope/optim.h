/* optim: Adam and AdamW, gradient clipping, and the learning-rate schedule.
 *
 * The optimizers work on flat float arrays: a model's parameter block and
 * the trainer's gradient block of the same layout (train.h), so one call
 * updates every parameter. The arithmetic follows torch.optim.Adam / AdamW
 * (PyTorch 1.13, single-tensor path) operation for operation:
 *     AdamW: p *= 1 - lr * wd                     (decoupled weight decay)
 *     Adam:  g += wd * p                          (L2 penalty in the gradient)
 *     m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
 *     p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 * tests/test_grad_parity.c checks two AdamW steps against torch.optim.AdamW.
 */
#ifndef TSCOPE_OPTIM_H
#define TSCOPE_OPTIM_H

#include <stdint.h>

#include "tscope/status.h"

typedef enum ts_optim_kind { TS_OPTIM_ADAM, TS_OPTIM_ADAMW } ts_optim_kind;

typedef struct ts_optim_config {
    ts_optim_kind kind;
    float beta1, beta2, eps;
    float weight_decay;
} ts_optim_config;

/* PyTorch's defaults: betas (0.9, 0.999), eps 1e-8, weight decay 0 (Adam)
 * or 0.01 (AdamW). */
void ts_optim_config_default(ts_optim_config *c, ts_optim_kind kind);

typedef struct ts_optim {
    ts_optim_config cfg;
    int64_t n;     /* parameters */
    int64_t steps; /* steps taken (PyTorch's `step`) */
    float *m, *v;  /* (n) first and second moments, owned */
} ts_optim;

ts_status ts_optim_init(ts_optim *o, const ts_optim_config *c, int64_t n);
void ts_optim_free(ts_optim *o);

/* One update of params (n) from grads (n) at learning rate lr. grads is not
 * changed (Adam's L2 term is added on the fly). */
void ts_optim_step(ts_optim *o, float *params, const float *grads, float lr);

/* Global L2 norm of grads (n), in double. */
double ts_optim_grad_norm(const float *grads, int64_t n);

/* torch.nn.utils.clip_grad_norm_: when the norm exceeds max_norm, scale
 * grads by max_norm / (norm + 1e-6). Returns the norm before clipping.
 * max_norm <= 0 only measures. */
double ts_optim_clip(float *grads, int64_t n, float max_norm);

/* The learning rate at step t (counted from 1): with warmup > 0, linear
 * warm-up to `peak` over `warmup` steps, then peak * sqrt(warmup / t): the
 * paper's schedule d^-0.5 * min(t^-0.5, t * warmup^-1.5) scaled so its top
 * is `peak` (the paper's own peak is ts_optim_paper_peak). warmup 0:
 * constant. */
float ts_optim_lr(float peak, int warmup, int64_t t);

/* The paper's peak learning rate d_model^-0.5 * warmup^-0.5. */
float ts_optim_paper_peak(int d_model, int warmup);

#endif
