/* train: the trainer's memory, its forward and one optimizer step.
 *
 * The forward is the model's own (model_forward.c, ts_model_forward_keep):
 * the same steps as inference, writing what train_backward.c reads to the
 * buffers planned here instead of the model's shared scratch, so a trained
 * model's inference gives the numbers training saw.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train_impl.h"
#include "tscope/kernels.h"
#include "tscope/io.h"

/* ---- the plan ------------------------------------------------------------------- */

static float *take(size_t *cursor, unsigned char *base, int64_t floats) {
    float *p = base ? (float *)(base + *cursor) : NULL;
    *cursor += ts_arena_round(sizeof(float) * (size_t)(floats > 0 ? floats : 0));
    return floats > 0 ? p : NULL;
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

static void plan_norm(ts_kept_norm *n, size_t *cur, unsigned char *base, int64_t rows, int64_t D) {
    n->out = take(cur, base, rows * D);
    n->mean = take(cur, base, rows);
    n->rstd = take(cur, base, rows);
}

static void plan_embed(const ts_model_config *c, ts_kept_embed *e, size_t *cur, unsigned char *base, int64_t B,
                       int64_t S) {
    int64_t D = c->d_model;
    bool tokens = c->input == TS_INPUT_TOKENS;
    memset(e, 0, sizeof *e);
    e->ids = tokens ? (int32_t *)take(cur, base, B * S) : NULL;
    e->sum = take(cur, base, B * S * D);
    if (ts_model_embed_norm(c)) plan_norm(&e->norm, cur, base, B * S, D);
    /* Vectors with no positions go in as they are (no copy). */
    e->out = take(cur, base, tokens || c->pe != TS_PE_NONE ? B * S * D : 0);
}

/* One layer over Sq positions; cross-attention reads Sk memory positions. */
static void plan_layer(const ts_model_config *c, ts_kept_layer *l, size_t *cur, unsigned char *base, int64_t B,
                       int64_t Sq, int64_t Sk, bool decoder) {
    int64_t D = c->d_model, H = c->heads, F = c->ffn, rows = B * Sq;
    int n_sub = decoder ? 3 : 2;
    memset(l, 0, sizeof *l);
    for (int k = 0; k < n_sub; k++) {
        plan_norm(&l->sub[k].norm, cur, base, rows, D);
        l->sub[k].res = take(cur, base, rows * D);
    }
    l->attn[0].q = take(cur, base, rows * 3 * D);
    l->attn[0].att = take(cur, base, B * H * Sq * Sq);
    l->attn[0].ctx = take(cur, base, rows * D);
    if (decoder) {
        l->attn[1].q = take(cur, base, rows * D);
        l->attn[1].kv = take(cur, base, B * Sk * 2 * D);
        l->attn[1].att = take(cur, base, B * H * Sq * Sk);
        l->attn[1].ctx = take(cur, base, rows * D);
    }
    l->ffn.hidden = take(cur, base, rows * F);
    l->ffn.act = take(cur, base, rows * F);
}

size_t tr_plan(const ts_model *m, tr_acts *a, unsigned char *base) {
    const ts_model_config *c = &m->cfg;
    int64_t B = c->batch, S = m->S, T = m->T, L = m->L, D = c->d_model, H = c->heads, F = c->ffn;
    int64_t din = c->in_dim ? c->in_dim : D;
    bool encdec = c->arch == TS_ARCH_ENCODER_DECODER, lone = c->arch == TS_ARCH_ATTENTION;
    size_t cur = 0;
    ts_kept_layer *enc = a->k.enc, *dec = a->k.dec;
    memset(a, 0, sizeof *a);
    a->k.enc = enc;
    a->k.dec = dec;
    if (lone) {
        a->k.lone.q = take(&cur, base, B * S * 3 * D);
        a->k.lone.att = take(&cur, base, B * H * S * S);
        a->k.lone.ctx = take(&cur, base, B * S * D);
        a->k.lone_out = take(&cur, base, B * S * D);
    } else {
        plan_embed(c, &a->k.src, &cur, base, B, S);
        for (int i = 0; i < c->layers; i++) plan_layer(c, &a->k.enc[i], &cur, base, B, S, S, false);
        if (c->final_norm) plan_norm(&a->k.enc_norm, &cur, base, B * S, D);
    }
    if (encdec) {
        plan_embed(c, &a->k.tgt, &cur, base, B, T);
        for (int i = 0; i < c->dec_layers; i++) plan_layer(c, &a->k.dec[i], &cur, base, B, T, S, true);
        if (c->final_norm) plan_norm(&a->k.dec_norm, &cur, base, B * T, D);
    }
    int64_t out_rows = B * (encdec ? T : S);
    if (c->head == TS_HEAD_CLS) {
        a->k.cls = take(&cur, base, B * D);
        a->gcls = take(&cur, base, B * D);
        a->out_numel = B * c->n_labels;
    } else {
        a->out_numel = out_rows * (c->head == TS_HEAD_LM ? c->vocab : D);
    }
    a->k.logits = take(&cur, base, c->head == TS_HEAD_NONE ? 0 : a->out_numel);
    a->k.fout = take(&cur, base, B * L * D);
    a->g0 = take(&cur, base, B * L * D);
    a->g1 = take(&cur, base, B * L * D);
    a->gsub = take(&cur, base, B * L * max64(D, din));
    a->gn = take(&cur, base, B * L * D);
    a->gctx = take(&cur, base, B * L * D);
    a->gqkv = take(&cur, base, max64(B * L * 3 * D, encdec ? B * T * D + B * S * 2 * D : 0));
    a->gatt = take(&cur, base, B * H * max64(max64(S * S, T * T), T * S));
    a->gh1 = take(&cur, base, lone ? 0 : B * L * F);
    a->gh2 = take(&cur, base, lone ? 0 : B * L * F);
    a->gmem = take(&cur, base, B * S * D);
    a->gsrc = take(&cur, base, c->input == TS_INPUT_EMBEDDED ? B * S * din : 0);
    a->gtgt = take(&cur, base, encdec && c->input == TS_INPUT_EMBEDDED ? B * T * D : 0);
    a->gout = take(&cur, base, a->out_numel);
    return cur;
}

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
    tr->m = m;
    tr_acts *a = calloc(1, sizeof *a);
    if (!a) return ts_fail(TS_ERR_NOMEM, "train: out of memory");
    tr->acts = a;
    if (c->arch != TS_ARCH_ATTENTION && c->layers > 0) a->k.enc = calloc((size_t)c->layers, sizeof *a->k.enc);
    if (c->arch == TS_ARCH_ENCODER_DECODER) a->k.dec = calloc((size_t)c->dec_layers, sizeof *a->k.dec);
    size_t gbytes = (sizeof(float) * (size_t)m->n_floats + 63) / 64 * 64;
    tr->grads = gbytes ? aligned_alloc(64, gbytes) : NULL;
    tr->block_bytes = tr_plan(m, a, NULL);
    tr->block = aligned_alloc(64, (tr->block_bytes + 63) / 64 * 64);
    if ((c->arch != TS_ARCH_ATTENTION && c->layers > 0 && !a->k.enc) ||
        (c->arch == TS_ARCH_ENCODER_DECODER && !a->k.dec) || (gbytes && !tr->grads) || !tr->block) {
        size_t mb = (tr->block_bytes + gbytes) >> 20;
        ts_train_free(tr);
        return ts_fail(TS_ERR_NOMEM, "train: cannot allocate %zu MB of activations and gradients", mb);
    }
    tr_plan(m, a, tr->block);
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

void ts_train_zero_grad(ts_train *tr) {
    if (tr->grads) memset(tr->grads, 0, sizeof(float) * (size_t)tr->m->n_floats);
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
