/* train_backward: the trainer's entry to the model's backward pass
 * (model_backward.c) and the parameter gradients handed to a hook. */
#include <stdio.h>
#include <stdlib.h>

#include "train_impl.h"

ts_status ts_train_backward(ts_train *tr, const float *dout, const ts_hook *hook) {
    if (!tr->have_forward) return ts_fail(TS_ERR_ARG, "train: backward needs a forward first");
    tr_acts *a = tr->acts;
    ts_input_grads d;
    tr->d_src = tr->d_tgt = tr->d_memory = NULL;
    TS_TRY(ts_model_backward(tr->m, a, &tr->gw, dout ? dout : a->gout, hook, &d));
    tr->d_src = d.src;
    tr->d_tgt = d.tgt;
    tr->d_memory = d.memory;
    return TS_OK;
}

ts_status ts_train_trace_param_grads(ts_train *tr, const ts_hook *hook) {
    if (!hook || !hook->fn) return TS_OK;
    const ts_model *m = tr->m;
    int64_t most = 0;
    for (int i = 0; i < m->n_params; i++) most = m->params[i].numel > most ? m->params[i].numel : most;
    float *buf = malloc(sizeof(float) * (size_t)(most > 0 ? most : 1));
    if (!buf) return ts_fail(TS_ERR_NOMEM, "train: out of memory for a gradient");
    ts_status st = TS_OK;
    for (int i = 0; i < m->n_params && !st; i++) {
        const ts_model_param_info *p = &m->params[i];
        ts_train_export_grad(tr, i, buf);
        char name[TS_MODEL_NAME_MAX + 8];
        snprintf(name, sizeof name, "grad.%s", p->name);
        ts_tensor t;
        st = ts_tensor_view(&t, buf, p->rank, p->shape);
        if (!st) st = ts_hook_call(hook, name, TS_OP_GRAD, &t, TS_TAG_GRAD);
    }
    free(buf);
    return st;
}
