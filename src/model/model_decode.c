/* model_decode: one new token at a time through a causal stack, with a cache
 * of every layer's keys and values (model.h, "decoding with a cache").
 *
 * Generation appends a token and asks for the next one. A full forward pass
 * would recompute every earlier position each time, O(n^2) work for n tokens;
 * with the keys and values of the earlier positions kept, a step computes the
 * new position only: its q, k and v, attention over the cached keys, the
 * feed-forward, the head. The arithmetic is the forward pass's (model_forward.c)
 * for one row, so the logits agree with it to float rounding
 * (tests/test_decode.c checks every position). Nothing is traced: a trace
 * shows a full pass (tscope generate --trace records one at the end). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/kernels.h"
#include "tscope/model.h"

bool ts_model_can_cache(const ts_model_config *c, const char **why) {
    const char *no = NULL;
    bool one_stack = c->arch == TS_ARCH_DECODER || (c->arch == TS_ARCH_ENCODER && c->causal);
    if (!one_stack) no = "only a causal stack (a GPT) decodes one token at a time";
    else if (c->input != TS_INPUT_TOKENS || c->head != TS_HEAD_LM) no = "the model reads no tokens or has no vocabulary head";
    else if (c->pe == TS_PE_SINUSOIDAL) no = "sinusoidal positions are not cached yet";
    else if (c->variants) no = "a seed's variant changes the layer";
    if (why) *why = no;
    return no == NULL;
}

ts_status ts_kv_cache_init(ts_kv_cache *kv, const ts_model *m) {
    memset(kv, 0, sizeof *kv);
    const ts_model_config *c = &m->cfg;
    const char *why;
    if (!ts_model_can_cache(c, &why)) return ts_fail(TS_ERR_ARG, "decoding with a cache: %s", why);
    if (!m->block) return ts_fail(TS_ERR_ARG, "decoding with a cache: a shapes-only model has no weights");
    int D = c->d_model;
    kv->capacity = c->pe == TS_PE_LEARNED ? (c->max_pos ? c->max_pos : c->seq) : c->seq;
    size_t per_layer = (size_t)kv->capacity * (size_t)D;
    kv->k = malloc(sizeof(float) * per_layer * (size_t)c->layers);
    kv->v = malloc(sizeof(float) * per_layer * (size_t)c->layers);
    /* scratch: x, h (D); qkv (3D); ctx (D); scores (capacity); ffn hidden (F); logits (V) */
    size_t scratch = (size_t)(6 * D + kv->capacity + c->ffn + c->vocab);
    kv->scratch = malloc(sizeof(float) * scratch);
    if (!kv->k || !kv->v || !kv->scratch) {
        ts_kv_cache_free(kv);
        return ts_fail(TS_ERR_NOMEM, "decoding with a cache: out of memory for %d positions", kv->capacity);
    }
    return TS_OK;
}

void ts_kv_cache_free(ts_kv_cache *kv) {
    free(kv->k);
    free(kv->v);
    free(kv->scratch);
    memset(kv, 0, sizeof *kv);
}

/* out (D) = LayerNorm(in) with gamma, beta; out may be in. */
static void layer_norm(float *out, const float *in, const ts_norm_weights *w, int D, float eps) {
    double mean = 0, var = 0;
    for (int i = 0; i < D; i++) mean += in[i];
    mean /= D;
    for (int i = 0; i < D; i++) var += (in[i] - mean) * (in[i] - mean);
    float rstd = (float)(1.0 / sqrt(var / D + eps));
    for (int i = 0; i < D; i++) out[i] = (float)(in[i] - mean) * rstd * w->gamma[i] + w->beta[i];
}

/* out (n_out) = W (n_out, n_in) in + b: one row through a linear layer. */
static void linear_row(float *out, const float *in, const float *w, const float *b, int n_in, int n_out) {
    ts_gemm(false, true, 1, n_out, n_in, 1.0f, in, n_in, w, n_in, 0.0f, out, n_out, b ? TS_EPI_BIAS : TS_EPI_NONE, b);
}

static void activate(float *h, int n, ts_activation a) {
    if (a == TS_ACT_GELU) ts_gelu(h, h, n);
    else if (a == TS_ACT_GELU_TANH) ts_gelu_tanh(h, h, n);
    else ts_relu(h, h, n);
}

/* Self-attention of the new position `pos` in layer l: its k and v join the
 * cache, its q reads every cached position. in (D) is the sublayer's input,
 * out (D) the projected result. qkv is stored per head: head h's q, k and v
 * are columns [3h hd, 3h hd + hd), then k, then v (ts_param_layout). */
static void attend(const ts_model *m, ts_kv_cache *kv, int l, const float *in, float *out, float *qkv, float *scores,
                   float *ctx) {
    const ts_model_config *c = &m->cfg;
    const ts_attn_weights *w = &m->w.enc[l].self_attn;
    int D = c->d_model, H = c->heads, hd = D / H, pos = kv->len;
    linear_row(qkv, in, w->in_w, w->in_b, D, 3 * D);
    float *K = kv->k + ((size_t)l * kv->capacity) * D, *V = kv->v + ((size_t)l * kv->capacity) * D;
    for (int h = 0; h < H; h++) {
        memcpy(K + (size_t)pos * D + h * hd, qkv + h * 3 * hd + hd, sizeof(float) * hd);
        memcpy(V + (size_t)pos * D + h * hd, qkv + h * 3 * hd + 2 * hd, sizeof(float) * hd);
    }
    float scale = 1.0f / sqrtf((float)hd);
    for (int h = 0; h < H; h++) {
        const float *q = qkv + h * 3 * hd;
        float top = -INFINITY;
        for (int j = 0; j <= pos; j++) {
            const float *k = K + (size_t)j * D + h * hd;
            float s = 0;
            for (int i = 0; i < hd; i++) s += q[i] * k[i];
            scores[j] = s * scale;
            if (scores[j] > top) top = scores[j];
        }
        double sum = 0;
        for (int j = 0; j <= pos; j++) sum += (scores[j] = expf(scores[j] - top));
        float *o = ctx + h * hd;
        memset(o, 0, sizeof(float) * hd);
        for (int j = 0; j <= pos; j++) {
            float p = (float)(scores[j] / sum);
            const float *v = V + (size_t)j * D + h * hd;
            for (int i = 0; i < hd; i++) o[i] += p * v[i];
        }
    }
    linear_row(out, ctx, w->out_w, w->out_b, D, D);
}

ts_status ts_model_decode_step(const ts_model *m, ts_kv_cache *kv, int32_t id, const float **logits) {
    const ts_model_config *c = &m->cfg;
    int D = c->d_model, F = c->ffn, V = c->vocab;
    if (kv->len >= kv->capacity)
        return ts_fail(TS_ERR_ARG, "decoding with a cache: the model has positions 0 to %d only", kv->capacity - 1);
    if (id < 0 || id >= V) return ts_fail(TS_ERR_ARG, "decoding: token id %d is outside the vocabulary of %d", id, V);
    float *x = kv->scratch, *h = x + D, *qkv = h + D, *ctx = qkv + 3 * D, *scores = ctx + D;
    float *hidden = scores + kv->capacity, *out = hidden + F;
    /* the embedding: token row (scaled when the model scales it), plus its position */
    float s = c->scale_embed ? sqrtf((float)D) : 1.0f;
    const float *e = m->w.embed.tokens + (size_t)id * D;
    for (int i = 0; i < D; i++) x[i] = e[i] * s;
    if (c->pe == TS_PE_LEARNED) {
        const float *p = m->w.embed.positions + (size_t)kv->len * D;
        for (int i = 0; i < D; i++) x[i] += p[i];
    }
    if (ts_model_embed_norm(c)) layer_norm(x, x, &m->w.embed.norm, D, c->embed_eps);
    for (int l = 0; l < c->layers; l++) {
        const ts_enc_layer_weights *w = &m->w.enc[l];
        bool pre = c->norm == TS_NORM_PRE;
        /* pre-LN: x + attn(norm1(x)), x + ffn(norm2(x)); post-LN: norm1(x + attn(x)), norm2(x + ffn(x)) */
        if (pre) layer_norm(h, x, &w->norm1, D, c->eps);
        attend(m, kv, l, pre ? h : x, h, qkv, scores, ctx);
        for (int i = 0; i < D; i++) x[i] += h[i];
        if (!pre) layer_norm(x, x, &w->norm1, D, c->eps);
        if (pre) layer_norm(h, x, &w->norm2, D, c->eps);
        linear_row(hidden, pre ? h : x, w->ffn.w1, w->ffn.b1, D, F);
        activate(hidden, F, c->activation);
        linear_row(h, hidden, w->ffn.w2, w->ffn.b2, F, D);
        for (int i = 0; i < D; i++) x[i] += h[i];
        if (!pre) layer_norm(x, x, &w->norm2, D, c->eps);
    }
    if (c->final_norm) layer_norm(x, x, &m->w.enc_norm, D, c->eps);
    linear_row(out, x, m->w.head_w, m->w.head_b, D, V);
    kv->len++;
    *logits = out;
    return TS_OK;
}
