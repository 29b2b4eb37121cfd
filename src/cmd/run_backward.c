/* run_backward: the loss from --labels, one backward, gradients to the hook. */
#include "run_backward.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/kernels.h"
#include "cli.h"
#include "tscope/io.h"
#include "tscope/train.h"

/* Integer labels for rows x classes logits: from the file, or the copy target. */
static ts_status lm_labels(const ts_model *m, const ts_model_input *in, const char *path, int64_t rows,
                           int32_t *labels) {
    const ts_model_config *c = &m->cfg;
    int classes = c->head == TS_HEAD_LM ? c->vocab : c->n_labels;
    if (!path) {
        if (c->head != TS_HEAD_LM || !in->src_ids)
            return ts_fail(TS_ERR_ARG, "--backward needs --labels L.npy for this model (%s)",
                           c->head == TS_HEAD_CLS ? "one class id per sequence" : "the target ids");
        /* The decoder reads the source shifted right; it should produce the source. */
        int S = m->S, T = (int)(rows / c->batch), shift = S - T;
        for (int b = 0; b < c->batch; b++)
            for (int t = 0; t < T; t++) {
                int s = t + shift;
                labels[(int64_t)b * T + t] = in->src_pad && in->src_pad[(int64_t)b * S + s] ? 0 : in->src_ids[(int64_t)b * S + s];
            }
        return TS_OK;
    }
    ts_npy npy;
    ts_status st = ts_npy_read_labels(&npy, path);
    if (st) return st;
    if (npy.numel != rows) {
        char shape[TS_SHAPE_TEXT_MAX];
        ts_shape_format(shape, sizeof shape, npy.rank, npy.shape, TS_SHAPE_PLAIN);
        st = ts_fail(TS_ERR_SHAPE, "--labels %s has shape %s (%lld ids); the model predicts %lld positions (%s)", path,
                     shape, (long long)npy.numel, (long long)rows,
                     c->head == TS_HEAD_CLS ? "one per sequence" : "batch x target length");
    }
    for (int64_t i = 0; !st && i < rows; i++) {
        int64_t v = npy.i64[i];
        if (v < 0 || v >= classes)
            st = ts_fail(TS_ERR_ARG, "--labels %s: id %lld at position %lld is outside [0, %d)", path, (long long)v,
                         (long long)i, classes);
        else
            labels[i] = (int32_t)v;
    }
    ts_npy_free(&npy);
    return st;
}

int run_backward(ts_model *m, const ts_model_input *in, const char *labels_path, const ts_hook *hook) {
    const ts_model_config *c = &m->cfg;
    ts_train tr;
    ts_status st = ts_train_init(&tr, m);
    if (st) return ts_cli_error("run", "%s", ts_last_error());
    ts_tensor out;
    int rc = 0;
    int32_t *labels = NULL;
    ts_npy grad = {0};
    double loss = 0;
    st = ts_train_forward(&tr, in, &out);
    int64_t n = st ? 0 : ts_tensor_numel(&out);
    float *d = st ? NULL : ts_train_output_grad(&tr);
    if (!st && c->head != TS_HEAD_NONE) {
        int classes = c->head == TS_HEAD_LM ? c->vocab : c->n_labels;
        int64_t rows = n / classes;
        labels = malloc(sizeof(int32_t) * (size_t)rows);
        st = labels ? lm_labels(m, in, labels_path, rows, labels) : ts_fail(TS_ERR_NOMEM, "out of memory");
        if (st) {
            rc = 2;
        } else {
            int ignore = c->head == TS_HEAD_LM ? 0 : -1;
            loss = ts_bwd_cross_entropy_forward(out.data, labels, rows, classes, ignore, 0.0f, NULL);
            ts_bwd_cross_entropy_backward(d, 1.0f, out.data, labels, rows, classes, ignore, 0.0f);
        }
    } else if (!st) {
        if (!labels_path) {
            st = ts_fail(TS_ERR_ARG, "--backward on a model with no head needs --labels L.npy: the gradient of the "
                                     "loss with respect to the output (loss = sum(out * L))");
            rc = 2;
        } else if (!(st = ts_npy_read(&grad, labels_path)) && grad.numel != n) {
            st = ts_fail(TS_ERR_SHAPE, "--labels %s has %lld values; the output has %lld", labels_path,
                         (long long)grad.numel, (long long)n);
            rc = 2;
        } else if (!st) {
            for (int64_t i = 0; i < n; i++) loss += (double)out.data[i] * grad.f32[i];
            memcpy(d, grad.f32, sizeof(float) * (size_t)n);
        } else {
            rc = 2;
        }
    }
    if (!st) {
        float x = (float)loss;
        ts_tensor t;
        ts_tensor_view(&t, &x, 1, (int64_t[]){1});
        st = ts_hook_call(hook, "loss", c->head == TS_HEAD_NONE ? TS_OP_METRIC : TS_OP_CROSS_ENTROPY, &t, TS_TAG_SCALAR);
    }
    if (!st) st = ts_train_backward(&tr, NULL, hook);
    if (!st) st = ts_train_trace_param_grads(&tr, hook);
    if (st) {
        if (!rc) rc = 1;
        ts_cli_error("run", "%s", ts_last_error());
    } else {
        printf("backward: loss %.6g (%s); gradient norm %.6g over %d parameter tensors\n", loss,
               c->head == TS_HEAD_NONE ? "sum(out * labels)" : "mean cross-entropy", sqrt(ts_train_grad_sumsq(&tr, NULL)),
               m->n_params);
    }
    free(labels);
    ts_npy_free(&grad);
    ts_train_free(&tr);
    return rc;
}
