/* lm_scores: the in-context measures of a language model (experiment.h,
 * "in-context measures") and the snapshot records made of them (lm_scores.h). */
#include "lm_scores.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/kernels.h"

void ts_lm_repeat_ids(int32_t *ids, int R, int S, int vocab, uint64_t seed) {
    int n = S / 2;
    for (int r = 0; r < R; r++) {
        uint64_t key = ts_mix64(seed ^ ts_mix64(0x5E9EA7ull + (uint64_t)r));
        int32_t *x = ids + (int64_t)r * S;
        for (int i = 0; i < S; i++) x[i] = i < n ? (int32_t)(ts_u01(key, (uint64_t)i) * vocab) : x[i - n];
    }
}

void ts_lm_measures_free(ts_lm_measures *m) {
    free(m->prev_token), free(m->induction), free(m->copying), free(m->pos_loss);
    memset(m, 0, sizeof *m);
}

/* ---- attention scores, from the forward's hook ------------------------------------ */

typedef struct attn_ctx {
    ts_lm_measures *out;
    int R, n;
} attn_ctx;

/* Each self-attention's weights (B, H, S, S) as they pass: add this layer's
 * scores. Cross-attention (a decoder reading an encoder) is not a causal
 * head over the same positions: skipped. */
static ts_status attn_hook(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag) {
    (void)op;
    attn_ctx *a = ctx;
    ts_lm_measures *o = a->out;
    size_t len = strlen(name);
    if (tag != TS_TAG_ATTN_WEIGHTS || len < 8 || strcmp(name + len - 8, ".weights") != 0 || strstr(name, "cross_attn"))
        return TS_OK;
    int l = ts_name_layer(name);
    if (l < 0 || l >= o->L || t->rank != 4 || t->shape[1] != o->H || t->shape[2] != o->S || t->shape[3] != o->S)
        return TS_OK;
    int S = o->S, n = a->n;
    for (int h = 0; h < o->H; h++) {
        double prev = 0, ind = 0;
        for (int b = 0; b < a->R; b++) {
            const float *w = t->data + b * t->stride[0] + h * t->stride[1];
            for (int i = 1; i < S; i++) prev += w[i * t->stride[2] + (i - 1) * t->stride[3]];
            for (int i = n; i < S; i++) ind += w[i * t->stride[2] + (i - n + 1) * t->stride[3]];
        }
        o->prev_token[l * o->H + h] = (float)(prev / ((double)a->R * (S - 1)));
        o->induction[l * o->H + h] = (float)(ind / ((double)a->R * (S - n)));
    }
    return TS_OK;
}

/* ---- copying: the OV circuit's eigenvalues ----------------------------------------------- */

ts_status ts_lm_copying(const ts_model *m, float *out) {
    const ts_model_config *c = &m->cfg;
    if (!ts_model_is_lm(c) || !m->w.embed.tokens)
        return ts_fail(TS_ERR_ARG, "copying score: needs a decoder-only stack over tokens with a vocabulary head");
    int D = c->d_model, H = c->heads, hd = ts_model_head_dim(c), Q = H * hd, V = c->vocab;
    int group = H / ts_model_kv_heads(c); /* query heads per key/value head */
    double one = c->norm_kind == TS_NORMK_RMS_GEMMA ? 1.0 : 0.0; /* Gemma's norms scale by 1 + w */
    const float *E = m->w.embed.tokens, *U = m->w.head_w;
    double *P = calloc((size_t)D * D, sizeof *P), *T = malloc(sizeof(double) * (size_t)hd * D),
           *N = malloc(sizeof(double) * (size_t)hd * hd), *re = malloc(sizeof(double) * (size_t)hd),
           *im = malloc(sizeof(double) * (size_t)hd);
    ts_status st = P && T && N && re && im ? TS_OK : ts_fail(TS_ERR_NOMEM, "copying score: out of memory");
    /* P = E^T U (D, D): a token's embedding to each vocabulary logit, summed */
    for (int v = 0; !st && v < V; v++)
        for (int a = 0; a < D; a++) {
            double e = E[(int64_t)v * D + a];
            const float *u = U + (int64_t)v * D;
            for (int b = 0; b < D; b++) P[(int64_t)a * D + b] += e * u[b];
        }
    for (int l = 0; !st && l < c->layers; l++) {
        const ts_self_attn_layer_weights *w = &m->w.layers[l];
        const float *g1 = c->norm == TS_NORM_PRE ? w->norm1.gamma : NULL;
        const float *gf = c->final_norm ? m->w.norm.gamma : NULL;
        for (int h = 0; !st && h < H; h++) {
            /* W_V^h: stored rows h*3hd + 2hd + j (model.c, TS_LAYOUT_QKV_HEADS), or with q, k
             * and v apart rows (h / group)*hd + j of v_proj: the key/value head h reads */
            const float *wv = c->split_qkv ? w->self_attn.v_w + (int64_t)(h / group) * hd * D
                                           : w->self_attn.in_w + ((int64_t)h * 3 * hd + 2 * hd) * D;
            /* T = W_V^h g1 P gf (hd, D) */
            for (int j = 0; j < hd; j++)
                for (int b = 0; b < D; b++) {
                    double s = 0;
                    for (int a = 0; a < D; a++)
                        s += wv[(int64_t)j * D + a] * (g1 ? one + g1[a] : 1.0) * P[(int64_t)a * D + b];
                    T[(int64_t)j * D + b] = s * (gf ? one + gf[b] : 1.0);
                }
            /* N = T W_O^h (hd, hd): W_O's (D, H*hd) columns h*hd .. */
            const float *wo = w->self_attn.out_w;
            for (int j = 0; j < hd; j++)
                for (int k = 0; k < hd; k++) {
                    double s = 0;
                    for (int b = 0; b < D; b++) s += T[(int64_t)j * D + b] * wo[(int64_t)b * Q + h * hd + k];
                    N[(int64_t)j * hd + k] = s;
                }
            st = ts_eigvals(N, hd, re, im);
            double sum = 0, mag = 0;
            for (int j = 0; !st && j < hd; j++) sum += re[j], mag += hypot(re[j], im[j]);
            if (!st) out[l * H + h] = mag > 0 ? (float)(sum / mag) : 0.0f;
        }
    }
    free(P), free(T), free(N), free(re), free(im);
    return st;
}

/* ---- every measure ---------------------------------------------------------------------- */

ts_status ts_lm_measure(ts_model *m, const int32_t *ids, ts_lm_measures *out) {
    return ts_lm_measure_edited(m, ids, NULL, out);
}

ts_status ts_lm_measure_edited(ts_model *m, const int32_t *ids, const ts_hook *edits, ts_lm_measures *out) {
    const ts_model_config *c = &m->cfg;
    memset(out, 0, sizeof *out);
    if (!ts_model_is_lm(c))
        return ts_fail(TS_ERR_ARG, "in-context measures need a causal stack over tokens with a vocabulary head");
    int L = c->layers, H = c->heads, S = m->S, R = c->batch, V = c->vocab, n = S / 2;
    if (S < 4) return ts_fail(TS_ERR_ARG, "in-context measures need a context of at least 4, not %d", S);
    out->L = L, out->H = H, out->S = S;
    out->prev_token = calloc((size_t)L * H, sizeof(float));
    out->induction = calloc((size_t)L * H, sizeof(float));
    out->copying = calloc((size_t)L * H, sizeof(float));
    out->pos_loss = calloc((size_t)S, sizeof(float));
    if (!out->prev_token || !out->induction || !out->copying || !out->pos_loss) {
        ts_lm_measures_free(out);
        return ts_fail(TS_ERR_NOMEM, "out of memory");
    }
    bool was = m->training;
    ts_model_set_training(m, false);
    attn_ctx a = {out, R, n};
    ts_hook hook = {.fn = attn_hook, .ctx = &a};
    if (edits) hook.edit = edits->edit, hook.touches = edits->touches, hook.edit_ctx = edits->edit_ctx; /* an edited model */
    ts_tensor logits;
    ts_model_input in = {.src_ids = ids};
    ts_status st = ts_model_forward(m, &in, &hook, &logits);
    ts_model_set_training(m, was);
    /* the loss at each position, as ts_bwd_cross_entropy_forward counts it */
    for (int i = 0; !st && i < S - 1; i++) {
        double sum = 0;
        for (int r = 0; r < R; r++) {
            const float *row = logits.data + ((int64_t)r * S + i) * V;
            sum += ts_logsumexp(row, V) - row[ids[(int64_t)r * S + i + 1]];
        }
        out->pos_loss[i] = (float)(sum / R);
    }
    for (int i = 0; i < n - 1; i++) out->loss_first += out->pos_loss[i] / (n - 1);
    for (int i = n; i < S - 1; i++) out->loss_second += out->pos_loss[i] / (S - 1 - n);
    for (int i = 1; i < S; i++) out->chance_prev += 1.0 / (i + 1) / (S - 1);
    for (int i = n; i < S; i++) out->chance_induction += 1.0 / (i + 1) / (S - n);
    if (!st) st = ts_lm_copying(m, out->copying);
    if (st) ts_lm_measures_free(out);
    return st;
}

/* ---- the snapshot's records ------------------------------------------------------------- */

struct tr_lm_scores {
    ts_model model; /* the run's model at TR_LM_REPEATS sequences */
    int32_t *ids;   /* (TR_LM_REPEATS, S) */
};

ts_status tr_lm_scores_new(const ts_model *m, tr_lm_scores **out, uint64_t seed) {
    tr_lm_scores *s = calloc(1, sizeof *s);
    if (!s) return ts_fail(TS_ERR_NOMEM, "out of memory");
    ts_model_config c = m->cfg;
    c.batch = TR_LM_REPEATS;
    s->ids = malloc(sizeof(int32_t) * TR_LM_REPEATS * (size_t)m->S);
    ts_status st = s->ids ? ts_model_init(&s->model, &c) : ts_fail(TS_ERR_NOMEM, "out of memory");
    if (st) {
        free(s->ids);
        free(s);
        return st;
    }
    ts_lm_repeat_ids(s->ids, TR_LM_REPEATS, m->S, c.vocab, seed ^ 0x1DC0ull);
    *out = s;
    return TS_OK;
}

void tr_lm_scores_free(tr_lm_scores *s) {
    if (!s) return;
    ts_model_free(&s->model);
    free(s->ids);
    free(s);
}

ts_status tr_lm_record_scalar(const ts_hook *trace, const char *name, double v) {
    float x = (float)v;
    ts_tensor t;
    ts_tensor_view(&t, &x, 1, (int64_t[]){1});
    return ts_hook_call(trace, name, TS_OP_METRIC, &t, TS_TAG_SCALAR);
}

static ts_status record(const ts_hook *trace, const char *name, float *x, int rank, const int64_t *shape,
                        ts_tag tag) {
    ts_tensor t;
    ts_status st = ts_tensor_view(&t, x, rank, shape);
    return st ? st : ts_hook_call(trace, name, TS_OP_METRIC, &t, tag);
}

ts_status tr_lm_scores_record(tr_lm_scores *s, const ts_model *m, const ts_hook *trace) {
    memcpy(s->model.block, m->block, sizeof(float) * (size_t)m->n_floats);
    ts_lm_measures me;
    ts_status st = ts_lm_measure(&s->model, s->ids, &me);
    if (st) return st;
    int64_t lh[2] = {me.L, me.H}, pos[1] = {me.S - 1};
    st = record(trace, "lm.repeat.loss", me.pos_loss, 1, pos, TS_TAG_PER_POSITION);
    if (!st) st = record(trace, "lm.score.prev_token", me.prev_token, 2, lh, TS_TAG_HEAD_SCORES);
    if (!st) st = record(trace, "lm.score.induction", me.induction, 2, lh, TS_TAG_HEAD_SCORES);
    if (!st) st = record(trace, "lm.score.copying", me.copying, 2, lh, TS_TAG_HEAD_SCORES);
    /* what uniform causal attention scores: the line the heads are measured against */
    if (!st) st = tr_lm_record_scalar(trace, "lm.chance.prev_token", me.chance_prev);
    if (!st) st = tr_lm_record_scalar(trace, "lm.chance.induction", me.chance_induction);
    ts_lm_measures_free(&me);
    return st;
}

ts_status ts_lm_snapshot_measure(void *ctx, const ts_model *m, const ts_hook *trace) {
    ts_lm_snapshot_scores *s = ctx;
    ts_status st = TS_OK;
    if (!s->scores) st = tr_lm_scores_new(m, (tr_lm_scores **)&s->scores, s->seed);
    if (!st) st = tr_lm_scores_record(s->scores, m, trace);
    return st;
}

void ts_lm_snapshot_scores_free(ts_lm_snapshot_scores *s) {
    tr_lm_scores_free(s->scores);
    s->scores = NULL;
}

ts_status ts_lm_next_loss_step(const ts_hook *hook, const int32_t *ids, const ts_tensor *logits) {
    int S = (int)logits->shape[1], V = (int)logits->shape[2];
    if (S < 2) return TS_OK;
    double *loss = malloc(sizeof(double) * (size_t)S);
    float *v = malloc(sizeof(float) * (size_t)S);
    if (!loss || !v) {
        free(loss), free(v);
        return ts_fail(TS_ERR_NOMEM, "out of memory");
    }
    ts_experiment_token_loss(logits->data, ids, S, V, loss);
    for (int i = 0; i + 1 < S; i++) v[i] = (float)loss[i + 1];
    ts_tensor t = {.data = v, .rank = 1, .shape = {S - 1}, .stride = {1}};
    ts_status st = ts_hook_call(hook, "loss.next", TS_OP_METRIC, &t, TS_TAG_PER_POSITION);
    free(loss), free(v);
    return st;
}
