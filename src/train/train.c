/* train: the trainer's memory and the forward pass that keeps activations.
 *
 * The forward follows model_forward.c step for step (same weights, same
 * storage order, same kernels: a trained model's inference gives the numbers
 * training saw), but keeps what train_backward.c needs instead of reusing
 * buffers, and calls no hook: training traces its probes through
 * ts_model_forward, whose steps carry the usual names.
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

static void plan_norm(tr_norm *n, size_t *cur, unsigned char *base, int64_t rows, int64_t D) {
    n->out = take(cur, base, rows * D);
    n->mean = take(cur, base, rows);
    n->rstd = take(cur, base, rows);
}

static void plan_embed(const ts_model_config *c, tr_embed *e, size_t *cur, unsigned char *base, int64_t B,
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
static void plan_layer(const ts_model_config *c, tr_layer *l, size_t *cur, unsigned char *base, int64_t B,
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
    tr_layer *enc = a->enc, *dec = a->dec;
    memset(a, 0, sizeof *a);
    a->enc = enc;
    a->dec = dec;
    if (lone) {
        a->lone.q = take(&cur, base, B * S * 3 * D);
        a->lone.att = take(&cur, base, B * H * S * S);
        a->lone.ctx = take(&cur, base, B * S * D);
        a->lone_out = take(&cur, base, B * S * D);
    } else {
        plan_embed(c, &a->src, &cur, base, B, S);
        for (int i = 0; i < c->layers; i++) plan_layer(c, &a->enc[i], &cur, base, B, S, S, false);
        if (c->final_norm) plan_norm(&a->enc_norm, &cur, base, B * S, D);
    }
    if (encdec) {
        plan_embed(c, &a->tgt, &cur, base, B, T);
        for (int i = 0; i < c->dec_layers; i++) plan_layer(c, &a->dec[i], &cur, base, B, T, S, true);
        if (c->final_norm) plan_norm(&a->dec_norm, &cur, base, B * T, D);
    }
    int64_t out_rows = B * (encdec ? T : S);
    if (c->head == TS_HEAD_CLS) {
        a->cls = take(&cur, base, B * D);
        a->gcls = take(&cur, base, B * D);
        a->out_numel = B * c->n_labels;
    } else {
        a->out_numel = out_rows * (c->head == TS_HEAD_LM ? c->vocab : D);
    }
    a->logits = take(&cur, base, c->head == TS_HEAD_NONE ? 0 : a->out_numel);
    a->src_mask = take(&cur, base, B * S);
    a->tgt_mask = take(&cur, base, encdec ? B * T : 0);
    a->mem_mask = take(&cur, base, encdec ? B * S : 0);
    a->fout = take(&cur, base, B * L * D);
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
    if (c->arch != TS_ARCH_ATTENTION && c->layers > 0) a->enc = calloc((size_t)c->layers, sizeof *a->enc);
    if (c->arch == TS_ARCH_ENCODER_DECODER) a->dec = calloc((size_t)c->dec_layers, sizeof *a->dec);
    size_t gbytes = (sizeof(float) * (size_t)m->n_floats + 63) / 64 * 64;
    tr->grads = gbytes ? aligned_alloc(64, gbytes) : NULL;
    tr->block_bytes = tr_plan(m, a, NULL);
    tr->block = aligned_alloc(64, (tr->block_bytes + 63) / 64 * 64);
    if ((c->arch != TS_ARCH_ATTENTION && c->layers > 0 && !a->enc) ||
        (c->arch == TS_ARCH_ENCODER_DECODER && !a->dec) || (gbytes && !tr->grads) || !tr->block) {
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
        free(a->enc);
        free(a->dec);
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

typedef struct fctx {
    ts_train *tr;
    const ts_model_config *c;
    tr_acts *a;
    int B, D, H, hd, F;
    float p;         // dropout probability in effect (0 when not training)
    uint64_t stream; // this forward's dropout stream
    uint64_t site;   // next dropout site
    const uint8_t *row_pad; // (B, S) padded queries to hide (--mask padding-both, encoder only)
} fctx;

static uint64_t next_key(fctx *f) { return ts_mix64(f->stream + 0x9E37ull * ++f->site); }

static void norm_fwd(fctx *f, tr_norm *n, const float *in, const ts_norm_weights *w, int64_t rows, float eps) {
    ts_bwd_layernorm_forward(n->out, n->mean, n->rstd, in, w->gamma, w->beta, rows, f->D, eps);
}

/* --mask padding-both: padded queries attend to nothing (weights and values 0),
 * as model_forward.c's row mask. Their gradients then vanish on their own. */
static void hide_pad_rows(fctx *f, tr_attn *at, const uint8_t *pad, int S) {
    int B = f->B, H = f->H, D = f->D;
    for (int b = 0; b < B; b++)
        for (int s = 0; s < S; s++) {
            if (!pad[(int64_t)b * S + s]) continue;
            for (int h = 0; h < H; h++) memset(at->att + (((int64_t)b * H + h) * S + s) * S, 0, sizeof(float) * (size_t)S);
            memset(at->ctx + ((int64_t)b * S + s) * D, 0, sizeof(float) * (size_t)D);
        }
}

/* Self-attention of x (B, S, din) into f->a->fout. */
static void self_attn_fwd(fctx *f, tr_attn *at, const ts_attn_weights *w, const float *x, int din, int S,
                          const float *mask, bool causal, float *out) {
    int B = f->B, D = f->D, hd = f->hd;
    ts_bwd_linear_forward(at->q, x, w->in_w, w->in_b, (int64_t)B * S, din, 3 * D);
    ts_bwd_heads q = {at->q, (int64_t)S * 3 * D, 3 * hd, 3 * D}, k = q, v = q;
    k.data += hd;
    v.data += 2 * hd;
    ts_bwd_heads o = {at->ctx, (int64_t)S * D, hd, D};
    ts_bwd_attention_forward(o, at->att, q, k, v, mask, causal, B, f->H, S, S, hd);
    if (f->row_pad) hide_pad_rows(f, at, f->row_pad, S);
    ts_bwd_linear_forward(out, at->ctx, w->out_w, w->out_b, (int64_t)B * S, D, D);
}

static void cross_attn_fwd(fctx *f, tr_attn *at, const ts_attn_weights *w, const float *x, int T, const float *mem,
                           int S, const float *mask, float *out) {
    int B = f->B, D = f->D, hd = f->hd;
    ts_bwd_linear_forward(at->q, x, w->in_w, w->in_b, (int64_t)B * T, D, D);
    ts_bwd_linear_forward(at->kv, mem, w->in_w + (int64_t)D * D, w->in_b + D, (int64_t)B * S, D, 2 * D);
    ts_bwd_heads q = {at->q, (int64_t)T * D, hd, D}, k = {at->kv, (int64_t)S * 2 * D, 2 * hd, 2 * D}, v = k;
    v.data += hd;
    ts_bwd_heads o = {at->ctx, (int64_t)T * D, hd, D};
    ts_bwd_attention_forward(o, at->att, q, k, v, mask, false, B, f->H, T, S, hd);
    ts_bwd_linear_forward(out, at->ctx, w->out_w, w->out_b, (int64_t)B * T, D, D);
}

static void ffn_fwd(fctx *f, tr_ffn *ff, uint64_t key, const ts_ffn_weights *w, const float *x, int S, float *out) {
    int64_t rows = (int64_t)f->B * S, n = rows * f->F;
    int D = f->D, F = f->F;
    if (f->c->activation != TS_ACT_RELU) {
        ts_gemm(false, true, (int)rows, F, D, 1.0f, x, D, w->w1, D, 0.0f, ff->hidden, F, TS_EPI_BIAS, w->b1);
        if (f->c->activation == TS_ACT_GELU)
            ts_bwd_gelu_forward(ff->act, ff->hidden, n);
        else
            ts_gelu_tanh(ff->act, ff->hidden, n);
        ts_bwd_dropout_forward(ff->act, ff->act, f->p, key, n);
    } else { /* relu(h) > 0 exactly where h > 0: the backward needs nothing else */
        ts_gemm(false, true, (int)rows, F, D, 1.0f, x, D, w->w1, D, 0.0f, ff->hidden, F, TS_EPI_BIAS_RELU, w->b1);
        ts_bwd_dropout_forward(ff->act, ff->hidden, f->p, key, n);
    }
    ts_bwd_linear_forward(out, ff->act, w->w2, w->b2, rows, F, D);
}

typedef enum sub_kind { SUB_SELF, SUB_CROSS, SUB_FFN } sub_kind;

typedef struct sub_args {
    sub_kind kind;
    const ts_attn_weights *attn;
    const ts_ffn_weights *ffn;
    const ts_norm_weights *norm;
    tr_attn *at;
    int S;            // positions of the stream
    const float *mem; // cross: (B, Sk, D)
    int Sk;
    const float *mask;
    bool causal;
} sub_args;

static void sub_f(fctx *f, tr_layer *l, tr_sub *sub, const sub_args *s, const float *x, float *out) {
    switch (s->kind) {
    case SUB_SELF: self_attn_fwd(f, s->at, s->attn, x, f->D, s->S, s->mask, s->causal, out); break;
    case SUB_CROSS: cross_attn_fwd(f, s->at, s->attn, x, s->S, s->mem, s->Sk, s->mask, out); break;
    case SUB_FFN: ffn_fwd(f, &l->ffn, sub->key_inner, s->ffn, x, s->S, out); break;
    }
}

/* res = x + fo, or fo alone with the no-residual variant (encoder stacks only). */
static void skip_fwd(const fctx *f, float *res, const float *x, const float *fo, int64_t n) {
    if (f->c->variants & TS_VARIANT_NO_RESIDUAL) memcpy(res, fo, sizeof(float) * (size_t)n);
    else ts_bwd_residual_forward(res, x, fo, n);
}

/* post-LN: y = norm(x + drop(f(x))); pre-LN: y = x + drop(f(norm(x))) (no x
 * in either with the no-residual variant). Returns y. */
static const float *sublayer_fwd(fctx *f, tr_layer *l, tr_sub *sub, const sub_args *s, const float *x) {
    int64_t rows = (int64_t)f->B * s->S, n = rows * f->D;
    float *fo = f->a->fout;
    sub->key_inner = s->kind == SUB_FFN ? next_key(f) : 0;
    sub->key = next_key(f);
    if (f->c->norm == TS_NORM_POST) {
        sub_f(f, l, sub, s, x, fo);
        ts_bwd_dropout_forward(fo, fo, f->p, sub->key, n);
        skip_fwd(f, sub->res, x, fo, n);
        norm_fwd(f, &sub->norm, sub->res, s->norm, rows, f->c->eps);
        return sub->norm.out;
    }
    norm_fwd(f, &sub->norm, x, s->norm, rows, f->c->eps);
    sub_f(f, l, sub, s, sub->norm.out, fo);
    ts_bwd_dropout_forward(fo, fo, f->p, sub->key, n);
    skip_fwd(f, sub->res, x, fo, n);
    return sub->res;
}

/* The encoder's key mask: none with --mask none. */
static const float *enc_key_mask(const fctx *f) {
    return f->a->src_masked && f->c->mask != TS_MASK_NONE ? f->a->src_mask : NULL;
}

static const float *encoder_layer_fwd(fctx *f, tr_layer *l, const ts_enc_layer_weights *w, const float *x) {
    int S = f->tr->m->S;
    const float *mask = enc_key_mask(f);
    l->in = x;
    sub_args a = {SUB_SELF, &w->self_attn, NULL, &w->norm1, &l->attn[0], S, NULL, 0, mask, f->c->causal};
    x = sublayer_fwd(f, l, &l->sub[0], &a, x);
    sub_args b = {SUB_FFN, NULL, &w->ffn, &w->norm2, NULL, S, NULL, 0, NULL, false};
    return sublayer_fwd(f, l, &l->sub[1], &b, x);
}

static const float *decoder_layer_fwd(fctx *f, tr_layer *l, const ts_dec_layer_weights *w, const float *y,
                                      const float *mem) {
    int S = f->tr->m->S, T = f->tr->m->T;
    const float *tmask = f->a->tgt_masked ? f->a->tgt_mask : NULL, *smask = f->a->mem_masked ? f->a->mem_mask : NULL;
    l->in = y;
    sub_args a = {SUB_SELF, &w->self_attn, NULL, &w->norm1, &l->attn[0], T, NULL, 0, tmask, !f->c->tgt_not_causal};
    y = sublayer_fwd(f, l, &l->sub[0], &a, y);
    sub_args b = {SUB_CROSS, &w->cross_attn, NULL, &w->norm2, &l->attn[1], T, mem, S, smask, false};
    y = sublayer_fwd(f, l, &l->sub[1], &b, y);
    sub_args c = {SUB_FFN, NULL, &w->ffn, &w->norm3, NULL, T, NULL, 0, NULL, false};
    return sublayer_fwd(f, l, &l->sub[2], &c, y);
}

/* Token ids or vectors -> the stack's input, as model_forward.c's embed(). */
static const float *embed_fwd(fctx *f, tr_embed *e, const ts_embed_weights *w, const int32_t *ids, const float *vecs,
                              int S) {
    const ts_model_config *c = f->c;
    int64_t B = f->B, D = f->D, n = B * S * D;
    e->used = true;
    e->vecs = ids ? NULL : vecs;
    e->key = 0;
    if (!ids && c->pe == TS_PE_NONE) return vecs; /* seed 000: the input is the embedding */
    if (ids) {
        memcpy(e->ids, ids, sizeof(int32_t) * (size_t)(B * S));
        ts_bwd_embedding_forward(e->sum, w->tokens, ids, B * S, (int)D, c->scale_embed ? sqrtf((float)D) : 1.0f);
    } else {
        memcpy(e->sum, vecs, sizeof(float) * (size_t)n);
    }
    if (c->pe == TS_PE_LEARNED)
        ts_bwd_posenc_forward(e->sum, e->sum, w->positions, (int)B, S, (int)D);
    else if (c->pe == TS_PE_SINUSOIDAL)
        ts_bwd_posenc_forward(e->sum, e->sum, ((ts_model_acts *)f->tr->m->acts)->pe, (int)B, S, (int)D);
    e->key = next_key(f);
    if (ts_model_embed_norm(c)) {
        norm_fwd(f, &e->norm, e->sum, &w->norm, B * S, c->embed_eps);
        ts_bwd_dropout_forward(e->out, e->norm.out, f->p, e->key, n);
    } else {
        ts_bwd_dropout_forward(e->out, e->sum, f->p, e->key, n);
    }
    return e->out;
}

static ts_status check_ids(const int32_t *ids, int64_t n, int vocab, const char *what) {
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            return ts_fail(TS_ERR_ARG, "train: %s id %d at position %lld is outside the vocabulary [0, %d)", what,
                           (int)ids[i], (long long)i, vocab);
    return TS_OK;
}

static ts_status check_input(const ts_model *m, const ts_model_input *in) {
    const ts_model_config *c = &m->cfg;
    bool encdec = c->arch == TS_ARCH_ENCODER_DECODER, tokens = c->input == TS_INPUT_TOKENS;
    if (!(encdec && in->memory)) {
        if (tokens && !in->src_ids) return ts_fail(TS_ERR_ARG, "train: the source needs token ids");
        if (!tokens && !in->src_embedded) return ts_fail(TS_ERR_ARG, "train: the source needs vectors");
        if (tokens) {
            ts_status st = check_ids(in->src_ids, (int64_t)c->batch * m->S, c->vocab, "source");
            if (st) return st;
        }
    }
    if (encdec) {
        if (tokens && !in->tgt_ids) return ts_fail(TS_ERR_ARG, "train: the decoder needs token ids");
        if (!tokens && !in->tgt_embedded) return ts_fail(TS_ERR_ARG, "train: the decoder needs vectors");
        if (tokens) return check_ids(in->tgt_ids, (int64_t)c->batch * m->T, c->vocab, "target");
    }
    return TS_OK;
}

static void build_mask(float *mask, const uint8_t *pad, int64_t n) {
    for (int64_t i = 0; i < n; i++) mask[i] = pad[i] ? -INFINITY : 0.0f;
}

static void head_fwd(fctx *f, const float *x, int S, ts_tensor *out) {
    const ts_model_config *c = f->c;
    const ts_model_weights *w = &f->tr->m->w;
    tr_acts *a = f->a;
    int64_t B = f->B, D = f->D;
    if (c->head == TS_HEAD_LM) {
        ts_bwd_linear_forward(a->logits, x, w->head_w, w->head_b, B * S, (int)D, c->vocab);
        ts_tensor_view(out, a->logits, 3, (int64_t[]){B, S, c->vocab});
    } else {
        for (int64_t b = 0; b < B; b++) memcpy(a->cls + b * D, x + b * S * D, sizeof(float) * (size_t)D);
        a->cls_key = next_key(f);
        ts_bwd_dropout_forward(a->cls, a->cls, f->p, a->cls_key, B * D);
        ts_bwd_linear_forward(a->logits, a->cls, w->head_w, w->head_b, B, (int)D, c->n_labels);
        ts_tensor_view(out, a->logits, 2, (int64_t[]){B, c->n_labels});
    }
}

ts_status ts_train_forward(ts_train *tr, const ts_model_input *in, ts_tensor *out) {
    ts_model *m = tr->m;
    const ts_model_config *c = &m->cfg;
    tr_acts *a = tr->acts;
    ts_status st = check_input(m, in);
    if (st) return st;
    fctx f = {tr, c, a, c->batch, c->d_model, c->heads, c->d_model / c->heads, c->ffn, 0, 0, 0, NULL};
    f.p = m->training ? c->dropout : 0.0f;
    a->dropout = f.p;
    f.stream = ts_mix64(c->seed ^ ts_mix64(0x7A41ull + tr->forwards++));
    int64_t B = c->batch;
    int S = m->S, T = m->T, D = c->d_model;
    a->src.used = a->tgt.used = false;
    a->src_masked = in->src_pad != NULL;
    a->tgt_masked = in->tgt_pad != NULL && a->tgt_mask;
    if (a->src_masked) build_mask(a->src_mask, in->src_pad, B * S);
    if (a->tgt_masked) build_mask(a->tgt_mask, in->tgt_pad, B * T);
    const uint8_t *mem_pad = in->mem_pad_set ? in->mem_pad : in->src_pad;
    a->mem_masked = mem_pad != NULL && a->mem_mask;
    if (a->mem_masked) build_mask(a->mem_mask, mem_pad, B * S);
    ts_tensor dummy;
    if (!out) out = &dummy;
    tr->have_forward = true;
    if (c->arch == TS_ARCH_ATTENTION) {
        int din = c->in_dim ? c->in_dim : D;
        a->src.vecs = in->src_embedded;
        a->src.used = true;
        f.row_pad = c->mask == TS_MASK_PADDING_BOTH ? in->src_pad : NULL;
        self_attn_fwd(&f, &a->lone, &m->w.attn, in->src_embedded, din, S, enc_key_mask(&f), c->causal, a->lone_out);
        return ts_tensor_view(out, a->lone_out, 3, (int64_t[]){B, S, D});
    }
    bool encdec = c->arch == TS_ARCH_ENCODER_DECODER;
    a->memory_given = encdec && in->memory;
    const float *x = in->memory;
    if (!a->memory_given) {
        x = embed_fwd(&f, &a->src, &m->w.embed, in->src_ids, in->src_embedded, S);
        f.row_pad = c->mask == TS_MASK_PADDING_BOTH ? in->src_pad : NULL;
        for (int i = 0; i < c->layers; i++) x = encoder_layer_fwd(&f, &a->enc[i], &m->w.enc[i], x);
        f.row_pad = NULL;
        a->enc_top = x;
        if (c->final_norm) {
            norm_fwd(&f, &a->enc_norm, x, &m->w.enc_norm, B * S, c->eps);
            x = a->enc_norm.out;
        }
    }
    a->enc_out = x;
    int out_len = S;
    if (encdec) {
        const float *y = embed_fwd(&f, &a->tgt, &m->w.dec_embed, in->tgt_ids, in->tgt_embedded, T);
        for (int i = 0; i < c->dec_layers; i++) y = decoder_layer_fwd(&f, &a->dec[i], &m->w.dec[i], y, x);
        a->dec_top = y;
        if (c->final_norm) {
            norm_fwd(&f, &a->dec_norm, y, &m->w.dec_norm, B * T, c->eps);
            y = a->dec_norm.out;
        }
        a->dec_out = y;
        x = y;
        out_len = T;
    }
    if (c->head == TS_HEAD_NONE) return ts_tensor_view(out, (float *)x, 3, (int64_t[]){B, out_len, D});
    head_fwd(&f, x, out_len, out);
    return TS_OK;
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
