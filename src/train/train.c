/* train: the trainer's memory, its forward and one optimizer step.
 *
 * The forward is the model's own (model_forward.c, ts_model_forward_keep):
 * the same steps as inference, writing what train_backward.c reads to the
 * buffers the model plans (ts_model_plan_backprop, model_plan.c) in the
 * trainer's block instead of the model's shared scratch, so a trained
 * model's inference gives the numbers training saw.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train_impl.h"
#include "tscope/kernels.h"
#include "tscope/io.h"

/* ---- init / free ---------------------------------------------------------------- */

ts_status ts_train_init(ts_train *tr, ts_model *m) {
    memset(tr, 0, sizeof *tr);
    if (m->dry || !m->block) return ts_fail(TS_ERR_ARG, "train: the model has no parameters (a shapes-only model)");
    const ts_model_config *c = &m->cfg;
    if (c->variants & ~(unsigned)TS_VARIANT_NO_RESIDUAL) { /* no-residual is rewiring, which backprop follows */
        char names[128];
        ts_model_variant_names(c->variants & ~(unsigned)TS_VARIANT_NO_RESIDUAL, names, sizeof names);
        return ts_fail(TS_ERR_UNSUPPORTED,
                       "train: backprop runs through the correct model (or no-residual) only; --variant %s is for "
                       "forward passes that show a seed's mistake",
                       names);
    }
    if (c->parallel_residual)
        return ts_fail(TS_ERR_UNSUPPORTED, "train: the backward runs through one residual after the other; GPT-NeoX's "
                                           "parallel residual runs forward (inference and experiments), not in "
                                           "training yet");
    if (ts_model_is_bert(c))
        return ts_fail(TS_ERR_UNSUPPORTED, "train: the backward has no token types or masked-LM head yet; BERT's parts "
                                           "run forward (inference and experiments), not in training");
    tr->m = m;
    tr_acts *a = calloc(1, sizeof *a);
    if (!a) return ts_fail(TS_ERR_NOMEM, "train: out of memory");
    tr->acts = a;
    if (c->arch != TS_ARCH_ATTENTION && c->layers > 0) a->k.enc = calloc((size_t)c->layers, sizeof *a->k.enc);
    if (c->arch == TS_ARCH_ENCODER_DECODER) a->k.dec = calloc((size_t)c->dec_layers, sizeof *a->k.dec);
    size_t gbytes = (sizeof(float) * (size_t)m->n_floats + 63) / 64 * 64;
    tr->grads = gbytes ? aligned_alloc(64, gbytes) : NULL;
    tr->block_bytes = ts_model_plan_backprop(m, a, NULL);
    tr->block = aligned_alloc(64, (tr->block_bytes + 63) / 64 * 64);
    if ((c->arch != TS_ARCH_ATTENTION && c->layers > 0 && !a->k.enc) ||
        (c->arch == TS_ARCH_ENCODER_DECODER && !a->k.dec) || (gbytes && !tr->grads) || !tr->block) {
        size_t mb = (tr->block_bytes + gbytes) >> 20;
        ts_train_free(tr);
        return ts_fail(TS_ERR_NOMEM, "train: cannot allocate %zu MB of activations and gradients", mb);
    }
    ts_model_plan_backprop(m, a, tr->block);
    ts_status st = ts_model_point(m, tr->grads, &tr->gw);
    if (st) {
        ts_train_free(tr);
        return st;
    }
    ts_train_zero_grad(tr);
    return TS_OK;
}

void ts_train_free(ts_train *tr) {
    tr_acts *a = tr->acts;
    if (a) {
        free(a->k.enc);
        free(a->k.dec);
        free(a);
    }
    ts_model_weights_free(&tr->gw);
    free(tr->grads);
    free(tr->block);
    memset(tr, 0, sizeof *tr);
}

size_t ts_train_bytes(const ts_train *tr) { return tr->block_bytes + sizeof(float) * (size_t)tr->m->n_floats; }

/* Floats a thread clears at a time. The gradients of the copy preset are
 * 180 MB: on one thread their clearing leaves the other idle. */
#define ZERO_CHUNK 65536

void ts_train_zero_grad(ts_train *tr) {
    if (!tr->grads) return;
    float *g = tr->grads;
    int64_t n = tr->m->n_floats, chunks = (n + ZERO_CHUNK - 1) / ZERO_CHUNK;
    TS_MODEL_OMP(parallel for num_threads(ts_kernels_threads()) if(chunks >= 4) schedule(static))
    for (int64_t c = 0; c < chunks; c++) {
        int64_t i0 = c * ZERO_CHUNK, len = n - i0 < ZERO_CHUNK ? n - i0 : ZERO_CHUNK;
        memset(g + i0, 0, sizeof(float) * (size_t)len);
    }
}

float *ts_train_output_grad(ts_train *tr) {
    tr_acts *a = tr->acts;
    memset(a->gout, 0, sizeof(float) * (size_t)a->out_numel);
    return a->gout;
}

double ts_train_grad_sumsq(const ts_train *tr, const char *prefix) {
    const ts_model *m = tr->m;
    size_t len = prefix ? strlen(prefix) : 0;
    double s = 0;
    for (int i = 0; i < m->n_params; i++) {
        const ts_model_param_info *p = &m->params[i];
        if (len && strncmp(p->name, prefix, len) != 0) continue;
        const float *g = tr->grads + p->offset;
        for (int64_t j = 0; j < p->numel; j++) s += (double)g[j] * g[j];
    }
    return s;
}

void ts_train_export_grad(ts_train *tr, int i, float *dst) {
    /* The model's exchange code reorders in_proj rows from its block; point it
     * at the gradients for the call (same size table, same layout). */
    float *params = tr->m->block;
    tr->m->block = tr->grads;
    ts_model_export_param(tr->m, i, dst);
    tr->m->block = params;
}

/* ---- the forward ------------------------------------------------------------------ */

/* What training needs beyond the forward's own checks (ids in the
 * vocabulary, masks): ids for a model of tokens, whose table the backward
 * updates, and the decoder's input. */
static ts_status check_input(const ts_model *m, const ts_model_input *in) {
    const ts_model_config *c = &m->cfg;
    bool encdec = c->arch == TS_ARCH_ENCODER_DECODER, tokens = c->input == TS_INPUT_TOKENS;
    if (!(encdec && in->memory)) {
        if (tokens && !in->src_ids) return ts_fail(TS_ERR_ARG, "train: the source needs token ids");
        if (!tokens && !in->src_embedded) return ts_fail(TS_ERR_ARG, "train: the source needs vectors");
    }
    if (encdec) {
        if (tokens && !in->tgt_ids) return ts_fail(TS_ERR_ARG, "train: the decoder needs token ids");
        if (!tokens && !in->tgt_embedded) return ts_fail(TS_ERR_ARG, "train: the decoder needs vectors");
    }
    return TS_OK;
}

/* The model's one forward (model_forward.c), keeping what the backward reads;
 * each forward draws its dropout from a stream of its own. */
ts_status ts_train_forward(ts_train *tr, const ts_model_input *in, ts_tensor *out) {
    ts_model *m = tr->m;
    tr_acts *a = tr->acts;
    TS_TRY(check_input(m, in));
    a->k.stream = ts_mix64(m->cfg.seed ^ ts_mix64(0x7A41ull + tr->forwards++));
    tr->have_forward = true;
    return ts_model_forward_keep(m, in, NULL, &a->k, out);
}

/* ---- one step, and checkpoints ------------------------------------------------------ */

ts_status ts_train_step(ts_train *tr, ts_optim *opt, const ts_model_input *in, const int32_t *labels,
                        const ts_train_step_opts *o, ts_train_step_result *r) {
    const ts_model_config *c = &tr->m->cfg;
    if (c->head == TS_HEAD_NONE) return ts_fail(TS_ERR_ARG, "train: a training step needs a model with a head");
    int classes = c->head == TS_HEAD_LM ? c->vocab : c->n_labels;
    ts_tensor out;
    ts_status st = ts_train_forward(tr, in, &out);
    if (st) return st;
    int64_t rows = ts_tensor_numel(&out) / classes;
    for (int64_t i = 0; i < rows; i++)
        if (labels[i] != o->ignore_index && (labels[i] < 0 || labels[i] >= classes))
            return ts_fail(TS_ERR_ARG, "train: label %d at position %lld is outside [0, %d)", (int)labels[i],
                           (long long)i, classes);
    memset(r, 0, sizeof *r);
    r->loss = ts_bwd_cross_entropy_forward(out.data, labels, rows, classes, o->ignore_index, o->smoothing, &r->counted);
    ts_train_zero_grad(tr);
    ts_bwd_cross_entropy_backward(ts_train_output_grad(tr), 1.0f, out.data, labels, rows, classes, o->ignore_index,
                                  o->smoothing);
    if ((st = ts_train_backward(tr, NULL, NULL))) return st;
    r->grad_norm = ts_optim_clip(tr->grads, tr->m->n_floats, o->clip);
    ts_optim_step(opt, tr->m->block, tr->grads, o->lr);
    return TS_OK;
}

/* The checkpoint's name for a parameter (see ts_train_save). */
static const char *saved_name(const char *name) {
    if (strcmp(name, "embed.tokens.weight") == 0) return "embed.src.weight";
    if (strcmp(name, "decoder.embed.tokens.weight") == 0) return "embed.tgt.weight";
    return name;
}

ts_status ts_train_save(const ts_model *m, const char *path, int n_meta, const char *const *meta) {
    if (!m->block) return ts_fail(TS_ERR_ARG, "train: a shapes-only model has no parameters to save");
    float *data = malloc(sizeof(float) * (size_t)(m->n_floats > 0 ? m->n_floats : 1));
    const char **names = calloc((size_t)m->n_params + 1, sizeof *names);
    ts_tensor *views = calloc((size_t)m->n_params + 1, sizeof *views);
    ts_status st = data && names && views ? TS_OK : ts_fail(TS_ERR_NOMEM, "train: out of memory saving %s", path);
    for (int i = 0; !st && i < m->n_params; i++) {
        const ts_model_param_info *p = &m->params[i];
        ts_model_export_param(m, i, data + p->offset);
        names[i] = saved_name(p->name);
        st = ts_tensor_view(&views[i], data + p->offset, p->rank, p->shape);
    }
    /* Every checkpoint says what it is: tscope's config, so that run --load
     * needs no flag for what the tensor shapes cannot tell. The caller's
     * pairs follow (theirs for "format" and "config" are replaced). */
    char *config = st ? NULL : ts_model_config_json(&m->cfg);
    const char **all = st ? NULL : calloc((size_t)(2 * n_meta + 4), sizeof *all);
    if (!st && (!config || !all)) st = ts_fail(TS_ERR_NOMEM, "train: out of memory saving %s", path);
    int n_all = 0;
    if (!st) {
        all[0] = "format", all[1] = "tscope", all[2] = "config", all[3] = config;
        n_all = 2;
        for (int i = 0; i < n_meta; i++) {
            if (strcmp(meta[2 * i], "format") == 0 || strcmp(meta[2 * i], "config") == 0) continue;
            all[2 * n_all] = meta[2 * i], all[2 * n_all + 1] = meta[2 * i + 1];
            n_all++;
        }
    }
    if (!st) st = ts_safetensors_write(path, m->n_params, names, views, n_all, all);
    free(config);
    free(all);
    free(data);
    free(names);
    free(views);
    return st;
}
