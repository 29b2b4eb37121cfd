/* model_backward: the backward pass of the whole model, beside its forward
 * (model_forward.c) as llm.c writes them: each block's backward reads what
 * that block's forward kept (ts_kept, filled by ts_model_forward_keep) and
 * runs its steps in reverse order.
 *
 * The stream's gradient moves between two buffers (g0, g1). Through one
 * residual sublayer, with gy the gradient at its output:
 *   post-LN  y = norm(r), r = x + drop(f(x)):
 *            gx = norm_bwd(gy)             (the residual branch: dr)
 *            gx += f_bwd(drop_bwd(gx))     (f's backward accumulates)
 *   pre-LN   y = x + drop(f(n)), n = norm(x):
 *            gx = gy                        (the residual branch)
 *            gx += norm_bwd(f_bwd(drop_bwd(gy)))
 * With the no-residual variant the residual branch is 0: gx starts at 0.
 * Cross-attention also adds into the memory's gradient (gmem), which the
 * encoder's backward starts from once every decoder layer has added its share.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_impl.h"
#include "tscope/kernels.h"

typedef struct bctx {
    const ts_model *m;
    ts_model_weights *gw; // the parameters' gradients, added into
    const ts_model_config *c;
    ts_backprop_bufs *a;
    const ts_hook *hook;
    int B, D, H, hd, F;
    float p;
} bctx;

static void zero(float *x, int64_t n) {
    if (x && n > 0) memset(x, 0, sizeof(float) * (size_t)n);
}

/* The gradient of step prefix.leaf, to the hook as grad.prefix.leaf. */
static ts_status emit(bctx *b, const char *prefix, const char *leaf, const float *data, int rank,
                      const int64_t *shape) {
    if (!b->hook || !b->hook->fn) return TS_OK;
    char name[2 * TS_MODEL_NAME_MAX];
    if (prefix && prefix[0])
        snprintf(name, sizeof name, "grad.%s.%s", prefix, leaf);
    else
        snprintf(name, sizeof name, "grad.%s", leaf);
    ts_tensor t;
    TS_TRY(ts_tensor_view(&t, (float *)data, rank, shape));
    return ts_hook_call(b->hook, name, TS_OP_GRAD, &t, TS_TAG_GRAD);
}

static ts_status emit3(bctx *b, const char *prefix, const char *leaf, const float *data, int64_t d0, int64_t d1,
                       int64_t d2) {
    return emit(b, prefix, leaf, data, 3, (int64_t[]){d0, d1, d2});
}

/* The other stream buffer. */
static float *other(bctx *b, const float *g) { return g == b->a->g0 ? b->a->g1 : b->a->g0; }

/* ---- the sublayers' functions ------------------------------------------------------ */

typedef enum sub_kind { SUB_SELF, SUB_CROSS, SUB_FFN } sub_kind;

typedef struct sub_args {
    sub_kind kind;
    const char *name;      // "encoder.layers.0.self_attn"
    const char *norm_name; // "encoder.layers.0.norm1"
    const ts_attn_weights *attn;
    ts_attn_weights *gattn;
    const ts_ffn_weights *ffn;
    ts_ffn_weights *gffn;
    const ts_norm_weights *norm;
    ts_norm_weights *gnorm;
    const ts_kept_attn *at;
    const ts_kept_ffn *ff;
    int S, Sk, din;
    const float *mem; // cross: (B, Sk, D)
} sub_args;

static ts_status attn_bwd(bctx *b, const sub_args *s, const float *fin, float *gfin, const float *gout) {
    int B = b->B, D = b->D, H = b->H, hd = b->hd, S = s->S;
    int64_t rows = (int64_t)B * S;
    const ts_kept_attn *at = s->at;
    ts_backprop_bufs *a = b->a;
    bool cross = s->kind == SUB_CROSS;
    int Sk = cross ? s->Sk : S;
    zero(a->gctx, rows * D);
    ts_bwd_linear_backward(a->gctx, s->gattn->out_w, s->gattn->out_b, gout, at->ctx, s->attn->out_w, rows, D, D);
    TS_TRY(emit3(b, s->name, "concat", a->gctx, B, S, D));
    ts_bwd_heads q, k, v, gq, gk, gv, go = {a->gctx, (int64_t)S * D, hd, D};
    float *gkv = a->gqkv + rows * D;
    if (cross) {
        q = (ts_bwd_heads){at->q, (int64_t)S * D, hd, D};
        k = (ts_bwd_heads){at->kv, (int64_t)Sk * 2 * D, 2 * hd, 2 * D};
        gq = (ts_bwd_heads){a->gqkv, q.bstride, q.hstride, q.ld};
        gk = (ts_bwd_heads){gkv, k.bstride, k.hstride, k.ld};
        v = k, gv = gk;
        v.data += hd, gv.data += hd;
        zero(a->gqkv, rows * D + (int64_t)B * Sk * 2 * D);
    } else {
        q = (ts_bwd_heads){at->q, (int64_t)S * 3 * D, 3 * hd, 3 * D};
        gq = (ts_bwd_heads){a->gqkv, q.bstride, q.hstride, q.ld};
        k = v = q, gk = gv = gq;
        k.data += hd, gk.data += hd;
        v.data += 2 * hd, gv.data += 2 * hd;
        zero(a->gqkv, rows * 3 * D);
    }
    int64_t att_shape[4] = {B, H, S, Sk};
    ts_bwd_attention_backward_values(gv, a->gatt, go, at->att, v, B, H, S, Sk, hd);
    TS_TRY(emit(b, s->name, "weights", a->gatt, 4, att_shape));
    ts_bwd_softmax_backward(a->gatt, a->gatt, at->att, (int64_t)B * H * S, Sk);
    TS_TRY(emit(b, s->name, "scaled", a->gatt, 4, att_shape));
    ts_bwd_attention_backward_scores(gq, gk, a->gatt, q, k, B, H, S, Sk, hd);
    if (!cross) {
        TS_TRY(emit3(b, s->name, "qkv", a->gqkv, B, S, 3 * D));
        ts_bwd_linear_backward(gfin, s->gattn->in_w, s->gattn->in_b, a->gqkv, fin, s->attn->in_w, rows, s->din,
                               3 * D);
        return TS_OK;
    }
    TS_TRY(emit3(b, s->name, "q_proj", a->gqkv, B, S, D));
    TS_TRY(emit3(b, s->name, "kv", gkv, B, Sk, 2 * D));
    ts_bwd_linear_backward(gfin, s->gattn->in_w, s->gattn->in_b, a->gqkv, fin, s->attn->in_w, rows, D, D);
    int64_t off = (int64_t)D * D;
    ts_bwd_linear_backward(a->gmem, s->gattn->in_w + off, s->gattn->in_b + D, gkv, s->mem, s->attn->in_w + off,
                           (int64_t)B * Sk, D, 2 * D);
    return TS_OK;
}

static ts_status ffn_bwd(bctx *b, const sub_args *s, uint64_t key, const float *fin, float *gfin, const float *gout) {
    int64_t rows = (int64_t)b->B * s->S, n = rows * b->F;
    ts_backprop_bufs *a = b->a;
    const ts_kept_ffn *ff = s->ff;
    zero(a->gh1, n);
    ts_bwd_linear_backward(a->gh1, s->gffn->w2, s->gffn->b2, gout, ff->act, s->ffn->w2, rows, b->F, b->D);
    TS_TRY(emit3(b, s->name, "dropout", a->gh1, b->B, s->S, b->F));
    zero(a->gh2, n);
    ts_bwd_dropout_backward(a->gh2, a->gh1, b->p, key, n);
    TS_TRY(emit3(b, s->name, "act", a->gh2, b->B, s->S, b->F));
    zero(a->gh1, n);
    if (b->c->activation == TS_ACT_GELU)
        ts_bwd_gelu_backward(a->gh1, a->gh2, ff->hidden, n);
    else if (b->c->activation == TS_ACT_GELU_TANH)
        ts_bwd_gelu_tanh_backward(a->gh1, a->gh2, ff->hidden, n);
    else
        ts_bwd_relu_backward(a->gh1, a->gh2, ff->hidden, n);
    TS_TRY(emit3(b, s->name, "hidden", a->gh1, b->B, s->S, b->F));
    ts_bwd_linear_backward(gfin, s->gffn->w1, s->gffn->b1, a->gh1, fin, s->ffn->w1, rows, b->D, b->F);
    return TS_OK;
}

static ts_status f_bwd(bctx *b, const sub_args *s, const ts_kept_sub *sub, const float *fin, float *gfin,
                       const float *gout) {
    return s->kind == SUB_FFN ? ffn_bwd(b, s, sub->key_inner, fin, gfin, gout) : attn_bwd(b, s, fin, gfin, gout);
}

/* gy at the sublayer's output -> gx (overwritten) at its input x. */
static ts_status sub_bwd(bctx *b, const sub_args *s, const ts_kept_sub *sub, const float *x, const float *gy, float *gx) {
    int64_t rows = (int64_t)b->B * s->S, n = rows * b->D;
    ts_backprop_bufs *a = b->a;
    const ts_norm_weights *w = s->norm;
    ts_norm_weights *gw = s->gnorm;
    bool skip = !(b->c->variants & TS_VARIANT_NO_RESIDUAL); /* without it only f's path reaches x */
    if (b->c->norm == TS_NORM_POST) {
        zero(gx, n);
        ts_bwd_layernorm_backward(gx, gw->gamma, gw->beta, gy, sub->res, w->gamma, sub->norm.mean, sub->norm.rstd,
                                  rows, b->D);
        TS_TRY(emit3(b, s->norm_name, "in", gx, b->B, s->S, b->D));
        zero(a->gsub, n);
        ts_bwd_dropout_backward(a->gsub, gx, b->p, sub->key, n);
        TS_TRY(emit3(b, s->name, "out", a->gsub, b->B, s->S, b->D));
        if (!skip) zero(gx, n);
        return f_bwd(b, s, sub, x, gx, a->gsub);
    }
    if (skip) memcpy(gx, gy, sizeof(float) * (size_t)n);
    else zero(gx, n);
    zero(a->gsub, n);
    ts_bwd_dropout_backward(a->gsub, gy, b->p, sub->key, n);
    TS_TRY(emit3(b, s->name, "out", a->gsub, b->B, s->S, b->D));
    zero(a->gn, n);
    TS_TRY(f_bwd(b, s, sub, sub->norm.out, a->gn, a->gsub));
    TS_TRY(emit3(b, s->norm_name, "out", a->gn, b->B, s->S, b->D));
    ts_bwd_layernorm_backward(gx, gw->gamma, gw->beta, a->gn, x, w->gamma, sub->norm.mean, sub->norm.rstd, rows,
                              b->D);
    return TS_OK;
}

/* What sublayer k of a layer read: the layer's input, or sublayer k-1's output. */
static const float *sub_input(const bctx *b, const ts_kept_layer *l, int k) {
    if (k == 0) return l->in;
    return b->c->norm == TS_NORM_POST ? l->sub[k - 1].norm.out : l->sub[k - 1].res;
}

/* *g: the gradient at the layer's output in, at its input out. */
static ts_status self_attn_layer_bwd(bctx *b, int i, const float **g) {
    ts_kept_layer *l = &b->a->k.enc[i];
    const ts_self_attn_layer_weights *w = &b->m->w.layers[i];
    ts_self_attn_layer_weights *gw = &b->gw->layers[i];
    ts_layer_names nm;
    ts_layer_names_of(&nm, ts_model_stack_name(b->c), i);
    int S = b->m->S;
    TS_TRY(emit3(b, nm.p, "out", *g, b->B, S, b->D));
    sub_args s1 = {.kind = SUB_FFN, .name = nm.ffn, .norm_name = nm.norm[1], .ffn = &w->ffn, .gffn = &gw->ffn,
                   .norm = &w->norm2, .gnorm = &gw->norm2, .ff = &l->ffn, .S = S};
    float *gx = other(b, *g);
    TS_TRY(sub_bwd(b, &s1, &l->sub[1], sub_input(b, l, 1), *g, gx));
    *g = gx;
    sub_args s0 = {.kind = SUB_SELF, .name = nm.self, .norm_name = nm.norm[0], .attn = &w->self_attn, .gattn = &gw->self_attn,
                   .norm = &w->norm1, .gnorm = &gw->norm1, .at = &l->attn[0], .S = S, .din = b->D};
    gx = other(b, *g);
    TS_TRY(sub_bwd(b, &s0, &l->sub[0], sub_input(b, l, 0), *g, gx));
    *g = gx;
    return TS_OK;
}

static ts_status cross_attn_layer_bwd(bctx *b, int i, const float **g) {
    ts_kept_layer *l = &b->a->k.dec[i];
    const ts_cross_attn_layer_weights *w = &b->m->w.cross_layers[i];
    ts_cross_attn_layer_weights *gw = &b->gw->cross_layers[i];
    ts_layer_names nm;
    ts_layer_names_of(&nm, "decoder", i);
    int T = b->m->T;
    TS_TRY(emit3(b, nm.p, "out", *g, b->B, T, b->D));
    sub_args s[3] = {
        {.kind = SUB_SELF, .name = nm.self, .norm_name = nm.norm[0], .attn = &w->self_attn, .gattn = &gw->self_attn,
         .norm = &w->norm1, .gnorm = &gw->norm1, .at = &l->attn[0], .S = T, .din = b->D},
        {.kind = SUB_CROSS, .name = nm.cross, .norm_name = nm.norm[1], .attn = &w->cross_attn, .gattn = &gw->cross_attn,
         .norm = &w->norm2, .gnorm = &gw->norm2, .at = &l->attn[1], .S = T, .Sk = b->m->S, .din = b->D,
         .mem = b->a->k.enc_out},
        {.kind = SUB_FFN, .name = nm.ffn, .norm_name = nm.norm[2], .ffn = &w->ffn, .gffn = &gw->ffn, .norm = &w->norm3,
         .gnorm = &gw->norm3, .ff = &l->ffn, .S = T},
    };
    for (int k = 2; k >= 0; k--) {
        float *gx = other(b, *g);
        TS_TRY(sub_bwd(b, &s[k], &l->sub[k], sub_input(b, l, k), *g, gx));
        *g = gx;
    }
    return TS_OK;
}

/* ---- embeddings, final norms, heads ----------------------------------------------------- */

static ts_status embed_bwd(bctx *b, const ts_kept_embed *e, const ts_embed_weights *w, ts_embed_weights *gw,
                           const char *pfx, const char *input_name, float *gvec, int S, const float *gy) {
    const ts_model_config *c = b->c;
    int64_t B = b->B, D = b->D, n = B * S * D;
    ts_backprop_bufs *a = b->a;
    TS_TRY(emit3(b, pfx, "out", gy, B, S, D));
    if (!e->ids && c->pe == TS_PE_NONE) {
        ts_bwd_residual_backward(gvec, NULL, gy, n);
        return emit3(b, NULL, input_name, gvec, B, S, D);
    }
    zero(a->gsub, n);
    ts_bwd_dropout_backward(a->gsub, gy, b->p, e->key, n);
    const float *gsum = a->gsub;
    if (ts_model_embed_norm(c)) {
        zero(a->gn, n);
        ts_bwd_layernorm_backward(a->gn, gw->norm.gamma, gw->norm.beta, a->gsub, e->sum, w->norm.gamma, e->norm.mean,
                                  e->norm.rstd, B * S, (int)D);
        char np[TS_MODEL_NAME_MAX];
        snprintf(np, sizeof np, "%s.norm", pfx);
        TS_TRY(emit3(b, np, "in", a->gn, B, S, D));
        ts_bwd_posenc_backward(NULL, gw->positions, a->gn, (int)B, S, (int)D);
        gsum = a->gn;
    } else if (c->pe == TS_PE_LEARNED) {
        ts_bwd_posenc_backward(NULL, gw->positions, a->gsub, (int)B, S, (int)D);
    }
    if (e->ids) {
        ts_bwd_embedding_backward(gw->tokens, gsum, e->ids, B * S, (int)D, c->scale_embed ? sqrtf((float)D) : 1.0f);
        return TS_OK;
    }
    ts_bwd_residual_backward(gvec, NULL, gsum, n);
    return emit3(b, NULL, input_name, gvec, B, S, D);
}

/* The closing LayerNorm of a stack: *g at its output -> at its input `top`. */
static ts_status final_norm_bwd(bctx *b, const char *stack, const ts_kept_norm *n, const ts_norm_weights *w,
                                ts_norm_weights *gw, const float *top, int S, const float **g) {
    if (!b->c->final_norm) return TS_OK;
    int64_t rows = (int64_t)b->B * S;
    float *gx = other(b, *g);
    zero(gx, rows * b->D);
    ts_bwd_layernorm_backward(gx, gw->gamma, gw->beta, *g, top, w->gamma, n->mean, n->rstd, rows, b->D);
    char name[TS_MODEL_NAME_MAX];
    snprintf(name, sizeof name, "%s.norm", stack);
    TS_TRY(emit3(b, name, "in", gx, b->B, S, b->D));
    *g = gx;
    return TS_OK;
}

/* The head's backward: the gradient at the last stack's output x (B, S, D), in g0. */
static ts_status head_bwd(bctx *b, const float *gtop, const float *x, int S, const float **g) {
    const ts_model_config *c = b->c;
    const ts_model_weights *w = &b->m->w;
    ts_model_weights *gw = b->gw;
    ts_backprop_bufs *a = b->a;
    int64_t B = b->B, D = b->D;
    if (c->head == TS_HEAD_NONE) {
        *g = gtop;
        return TS_OK;
    }
    zero(a->g0, B * S * D);
    if (c->head == TS_HEAD_LM) {
        TS_TRY(emit3(b, NULL, "logits", gtop, B, S, c->vocab));
        ts_bwd_linear_backward(a->g0, gw->head_w, gw->head_b, gtop, x, w->head_w, B * S, (int)D, c->vocab);
    } else {
        TS_TRY(emit(b, NULL, "logits", gtop, 2, (int64_t[]){B, c->n_labels}));
        zero(a->gcls, B * D);
        ts_bwd_linear_backward(a->gcls, gw->head_w, gw->head_b, gtop, a->k.cls, w->head_w, B, (int)D, c->n_labels);
        TS_TRY(emit(b, NULL, "cls", a->gcls, 2, (int64_t[]){B, D}));
        zero(a->gsub, B * D);
        ts_bwd_dropout_backward(a->gsub, a->gcls, b->p, a->k.cls_key, B * D);
        for (int64_t i = 0; i < B; i++)
            for (int64_t j = 0; j < D; j++) a->g0[i * S * D + j] += a->gsub[i * D + j];
    }
    *g = a->g0;
    return TS_OK;
}

static ts_status self_attn_stack_bwd(bctx *b, const float *g) {
    const ts_model *m = b->m;
    ts_backprop_bufs *a = b->a;
    int S = m->S;
    const char *stack = ts_model_stack_name(b->c);
    char stack_out[16];
    snprintf(stack_out, sizeof stack_out, "%s.out", stack);
    TS_TRY(emit3(b, NULL, stack_out, g, b->B, S, b->D));
    TS_TRY(final_norm_bwd(b, stack, &a->k.enc_norm, &m->w.norm, &b->gw->norm, a->k.enc_top, S, &g));
    for (int i = b->c->layers - 1; i >= 0; i--) TS_TRY(self_attn_layer_bwd(b, i, &g));
    return embed_bwd(b, &a->k.src, &m->w.embed, &b->gw->embed, "embed", "input", a->gsrc, S, g);
}

static ts_status lone_bwd(bctx *b, const float *gtop) {
    const ts_model *m = b->m;
    int din = b->c->in_dim ? b->c->in_dim : b->D;
    sub_args s = {.kind = SUB_SELF, .name = "self_attn", .attn = &m->w.attn, .gattn = &b->gw->attn,
                  .at = &b->a->k.lone, .S = m->S, .din = din};
    TS_TRY(emit3(b, "self_attn", "out", gtop, b->B, m->S, b->D));
    TS_TRY(attn_bwd(b, &s, b->a->k.src.vecs, b->a->gsrc, gtop));
    return emit3(b, NULL, "input", b->a->gsrc, b->B, m->S, din);
}

ts_status ts_model_backward(const ts_model *m, ts_backprop_bufs *a, ts_model_weights *gw, const float *gtop,
                            const ts_hook *hook, ts_input_grads *d) {
    if (m->cfg.ln_std_eps) /* its gradient is not LayerNorm's: refused, never a wrong one */
        return ts_fail(TS_ERR_UNSUPPORTED, "backward: the LayerNorm with eps added to the unbiased std (the Annotated "
                       "Transformer's) has no backward pass yet");
    const ts_model_config *c = &m->cfg;
    bctx b = {m, gw, c, a, hook, c->batch, c->d_model, c->heads, c->d_model / c->heads, c->ffn, a->k.dropout};
    int64_t B = c->batch, D = c->d_model;
    int S = m->S, T = m->T;
    zero(a->gmem, B * S * D);
    zero(a->gsrc, B * S * (c->in_dim ? c->in_dim : D));
    zero(a->gtgt, B * T * D);
    memset(d, 0, sizeof *d);
    if (c->arch == TS_ARCH_ATTENTION) {
        TS_TRY(lone_bwd(&b, gtop));
        d->src = a->gsrc;
        return TS_OK;
    }
    const float *g;
    if (c->arch == TS_ARCH_ENCODER_DECODER) {
        TS_TRY(head_bwd(&b, gtop, a->k.dec_out, T, &g));
        TS_TRY(emit3(&b, NULL, "decoder.out", g, B, T, D));
        TS_TRY(final_norm_bwd(&b, "decoder", &a->k.dec_norm, &m->w.cross_norm, &gw->cross_norm, a->k.dec_top, T, &g));
        for (int i = c->dec_layers - 1; i >= 0; i--) TS_TRY(cross_attn_layer_bwd(&b, i, &g));
        TS_TRY(embed_bwd(&b, &a->k.tgt, &m->w.dec_embed, &gw->dec_embed, "decoder.embed", "decoder.input", a->gtgt, T,
                         g));
        d->tgt = a->k.tgt.ids ? NULL : a->gtgt;
        d->memory = a->gmem;
        if (!a->k.memory_given) TS_TRY(self_attn_stack_bwd(&b, a->gmem));
    } else {
        TS_TRY(head_bwd(&b, gtop, a->k.enc_out, S, &g));
        TS_TRY(self_attn_stack_bwd(&b, g));
    }
    if (a->k.src.used && !a->k.src.ids) d->src = a->gsrc;
    return TS_OK;
}
