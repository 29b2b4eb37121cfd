/* train_record: a training trace's snapshots (train_record.h). */
#include "train_record.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- gradient norms per layer --------------------------------------------- */

/* "encoder.layers.3.linear1.weight" -> "encoder.layers.3"; "embed.norm.bias" -> "embed";
 * "decoder.embed.tokens.weight" -> "decoder.embed"; "generator.bias" -> "generator". */
static void group_of(const char *name, char *out, size_t size) {
    size_t layer = ts_name_layer_prefix(name);
    if (layer) {
        snprintf(out, size, "%.*s", (int)layer, name);
    } else if (strncmp(name, "decoder.embed.", 14) == 0) {
        snprintf(out, size, "decoder.embed");
    } else if (strncmp(name, "embed.", 6) == 0) {
        snprintf(out, size, "embed");
    } else {
        const char *dot = strrchr(name, '.');
        snprintf(out, size, "%.*s", dot ? (int)(dot - name) : (int)strlen(name), name);
    }
}

static ts_status groups_init(tr_recorder *r, const ts_model *m) {
    r->n_groups = 0;
    r->of_param = malloc(sizeof(int) * (size_t)(m->n_params + 1));
    r->group = malloc(sizeof *r->group * (size_t)(m->n_params + 1));
    if (!r->of_param || !r->group) return ts_fail(TS_ERR_NOMEM, "out of memory");
    for (int i = 0; i < m->n_params; i++) {
        char name[TS_MODEL_NAME_MAX];
        group_of(m->params[i].name, name, sizeof name);
        int k = 0;
        while (k < r->n_groups && strcmp(r->group[k], name) != 0) k++;
        if (k == r->n_groups) snprintf(r->group[r->n_groups++], sizeof r->group[0], "%s", name);
        r->of_param[i] = k;
    }
    return TS_OK;
}

/* ---- the recorder ------------------------------------------------------------ */

ts_status tr_recorder_init(tr_recorder *r, const ts_model *m, const ts_train_data *d, const ts_hook *trace) {
    memset(r, 0, sizeof *r);
    r->hook = *trace;
    r->in = d->probe;
    ts_model_config pc = m->cfg;
    pc.batch = d->probe_batch;
    ts_status st = groups_init(r, m);
    if (!st) st = ts_model_init(&r->probe, &pc);
    if (st) tr_recorder_free(r);
    return st;
}

void tr_recorder_free(tr_recorder *r) {
    ts_model_free(&r->probe);
    free(r->of_param);
    free(r->group);
    memset(r, 0, sizeof *r);
}

/* Only the attention weights of a probe forward go to the trace. */
static ts_status weights_only(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag) {
    tr_recorder *r = ctx;
    size_t n = strlen(name);
    if (tag != TS_TAG_ATTN_WEIGHTS || n < 8 || strcmp(name + n - 8, ".weights") != 0) return TS_OK;
    return ts_hook_call(&r->hook, name, op, t, tag);
}

static ts_status scalar(tr_recorder *r, const char *name, ts_op op, double v) {
    float x = (float)v;
    ts_tensor s;
    ts_tensor_view(&s, &x, 1, (int64_t[]){1});
    return ts_hook_call(&r->hook, name, op, &s, TS_TAG_SCALAR);
}

ts_status tr_recorder_snapshot(tr_recorder *r, ts_train *tr, ts_train_data *d, int64_t step, double loss, float lr,
                               double norm) {
    ts_model *m = tr->m;
    double now_norm = sqrt(ts_train_grad_sumsq(tr, NULL)), unclip = now_norm > 0 ? norm / now_norm : 1.0;
    ts_status st = scalar(r, "train.step", TS_OP_METRIC, (double)step);
    if (!st) st = scalar(r, "train.loss", TS_OP_CROSS_ENTROPY, loss);
    if (!st) st = scalar(r, "train.lr", TS_OP_METRIC, lr);
    if (!st) st = scalar(r, "train.grad_norm", TS_OP_GRAD, norm);
    double *sums = calloc((size_t)r->n_groups + 1, sizeof *sums);
    if (!st && !sums) st = ts_fail(TS_ERR_NOMEM, "out of memory");
    for (int i = 0; !st && i < m->n_params; i++) {
        const ts_model_param_info *p = &m->params[i];
        const float *x = tr->grads + p->offset;
        double s = 0;
        for (int64_t j = 0; j < p->numel; j++) s += (double)x[j] * x[j];
        sums[r->of_param[i]] += s;
    }
    char name[TS_MODEL_NAME_MAX + 32];
    for (int k = 0; k < r->n_groups && !st; k++) {
        snprintf(name, sizeof name, "train.grad_norm.%s", r->group[k]);
        st = scalar(r, name, TS_OP_GRAD, sqrt(sums[k]) * unclip);
    }
    free(sums);
    if (st) return st;
    memcpy(r->probe.block, m->block, sizeof(float) * (size_t)m->n_floats);
    ts_hook filter = {.fn = weights_only, .ctx = r};
    st = ts_model_forward(&r->probe, &r->in, &filter, NULL);
    if (!st && d->record) st = d->record(d->ctx, m, &r->hook);
    r->records++;
    return st;
}
