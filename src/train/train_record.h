/* train_record: the snapshots a training trace holds, for the loop
 * (train_loop.c) alone. Each snapshot, in this order:
 *   train.step, train.loss (mean since the last snapshot), train.lr,
 *   train.grad_norm (global, before clipping), train.grad_norm.<layer>,
 *   the attention weights of the source's probe (every layer and head),
 *   then whatever the source records itself (ts_train_data.record).
 */
#ifndef TSCOPE_TRAIN_RECORD_H
#define TSCOPE_TRAIN_RECORD_H

#include "tscope/train.h"

typedef struct tr_recorder {
    ts_hook hook;       /* the trace's */
    ts_model probe;     /* a copy of the model at the probe's batch size */
    ts_model_input in;  /* the probe */
    int n_groups;       /* gradient-norm groups (layers) */
    char (*group)[TS_MODEL_NAME_MAX]; /* (n_groups) their names */
    int *of_param;      /* (n_params) each parameter's group */
    int records;
} tr_recorder;

ts_status tr_recorder_init(tr_recorder *r, const ts_model *m, const ts_train_data *d, const ts_hook *trace);
void tr_recorder_free(tr_recorder *r);

/* One snapshot. loss: the training loss to show; norm: the global gradient
 * norm before clipping (the gradients in tr may be clipped since: the layers'
 * norms are scaled back by the same factor). */
ts_status tr_recorder_snapshot(tr_recorder *r, ts_train *tr, ts_train_data *d, int64_t step, double loss, float lr,
                               double norm);

#endif
