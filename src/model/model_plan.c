/* model_plan: where every activation of a pass lives, carved from one block
 * (llm.c's fill_in_activation_sizes, written once for the three passes):
 * inference's shared buffers (ts_model_acts), a decoding step's, and a
 * training forward's kept activations with the backward's scratch
 * (ts_backprop_bufs), laid out layer by layer as the forward's sublayers run
 * (model_forward.c). Each plan first counts (base NULL), then points. */
#include <string.h>

#include "model_impl.h"

/* The next `floats` of the block, rounded to the arena's alignment; NULL
 * (and nothing taken) for none. With base NULL only the cursor moves. */
static float *take(size_t *cursor, unsigned char *base, int64_t floats) {
    float *p = base ? (float *)(base + *cursor) : NULL;
    *cursor += ts_arena_round(sizeof(float) * (size_t)(floats > 0 ? floats : 0));
    return floats > 0 ? p : NULL;
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* ---- inference and decoding: buffers shared by every layer ---------------------- */

/* One self-attention's scratch for `rows` queries over `keys` keys (per
 * sequence): its projections (q, k, v: 3D, or with shared key/value heads
 * Q + 2 KVw), RoPE's rotated q and k, and the (H, rows, keys) scores. */
int64_t ts_model_qkv_floats(const ts_model_config *c) {
    int64_t Q = (int64_t)c->heads * ts_model_head_dim(c), KVw = (int64_t)ts_model_kv_heads(c) * ts_model_head_dim(c);
    return c->split_qkv ? Q + 2 * KVw : 3 * (int64_t)c->d_model;
}

int64_t ts_model_rot_floats(const ts_model_config *c) {
    if (c->pe != TS_PE_ROPE) return 0;
    return (int64_t)(c->heads + ts_model_kv_heads(c)) * ts_model_head_dim(c);
}

static int64_t attn_floats(const ts_model_config *c, int64_t rows, int64_t keys) {
    return rows * (ts_model_qkv_floats(c) + ts_model_rot_floats(c)) + c->heads * rows * keys;
}

/* The FFN's hidden layer: two of them side by side when gated (gate and up). */
static int64_t ffn_floats(const ts_model_config *c, int64_t rows) { return (c->gated_ffn ? 2 : 1) * rows * c->ffn; }

/* Attention values (Q = H * hd wide), or a (rows, D) buffer: the wider. */
static int64_t ctx_floats(const ts_model_config *c, int64_t rows) {
    return rows * max64(c->d_model, (int64_t)c->heads * ts_model_head_dim(c));
}

size_t ts_model_plan_acts(const ts_model *m, ts_model_acts *a, unsigned char *base) {
    const ts_model_config *c = &m->cfg;
    int64_t B = c->batch, S = m->S, T = m->T, L = m->L, D = c->d_model, H = c->heads;
    bool encdec = c->arch == TS_ARCH_ENCODER_DECODER;
    /* The scratch area at its widest: attention (projections + scores), the
     * FFN hidden layer, or a LayerNorm's staging (out and y side by side). */
    int64_t big = B * attn_floats(c, S, S);
    if (encdec) {
        big = max64(big, B * T * 3 * D + B * H * T * T);
        big = max64(big, B * T * D + B * S * 2 * D + B * H * T * S);
    }
    if (c->arch != TS_ARCH_ATTENTION) big = max64(big, B * ffn_floats(c, L));
    big = max64(big, 2 * B * L * D);
    memset(a, 0, sizeof *a);
    size_t cur = 0;
    a->x = take(&cur, base, B * S * D);
    a->y = take(&cur, base, encdec ? B * T * D : 0);
    a->tmp = take(&cur, base, B * L * D);
    a->ctx = take(&cur, base, B * ctx_floats(c, L));
    a->big = take(&cur, base, big);
    a->big_floats = (size_t)big;
    a->rope = take(&cur, base, (int64_t)L * ts_model_rotary_dims(c));
    a->mean = take(&cur, base, B * L);
    a->rstd = take(&cur, base, B * L);
    a->std = take(&cur, base, B * L);
    a->ids = take(&cur, base, c->input == TS_INPUT_TOKENS ? B * L : 0);
    a->types = take(&cur, base, c->type_vocab ? B * L : 0);
    a->pe = take(&cur, base, c->pe == TS_PE_SINUSOIDAL ? L * D : 0);
    a->src_mask = take(&cur, base, B * S);
    a->tgt_mask = take(&cur, base, encdec ? B * T : 0);
    a->mem_mask = take(&cur, base, encdec ? B * S : 0);
    a->pads = take(&cur, base, B * L);
    a->cls = take(&cur, base, c->head == TS_HEAD_CLS ? B * D : 0);
    int64_t logits = c->head == TS_HEAD_LM ? B * (encdec ? T : S) * c->vocab
                   : c->head == TS_HEAD_CLS ? B * c->n_labels : 0;
    a->logits = take(&cur, base, logits);
    return cur;
}

size_t ts_model_plan_decode_acts(const ts_model_config *c, int rows, int keys, ts_model_acts *a,
                                 unsigned char *base) {
    int64_t R = rows, K = keys, D = c->d_model;
    int64_t big = max64(max64(attn_floats(c, R, K), ffn_floats(c, R)), 2 * R * D);
    memset(a, 0, sizeof *a);
    size_t cur = 0;
    a->x = take(&cur, base, R * D);
    a->tmp = take(&cur, base, R * D);
    a->ctx = take(&cur, base, ctx_floats(c, R));
    a->big = take(&cur, base, big);
    a->big_floats = (size_t)big;
    a->rope = take(&cur, base, R * ts_model_rotary_dims(c));
    a->mean = take(&cur, base, R);
    a->rstd = take(&cur, base, R);
    a->std = take(&cur, base, R);
    a->ids = take(&cur, base, R);
    a->src_mask = take(&cur, base, R);
    a->pads = take(&cur, base, R);
    a->logits = take(&cur, base, R * c->vocab);
    return cur;
}

/* ---- training: each kept activation its own buffer, then the backward's scratch ---- */

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
    l->attn[0].q = take(cur, base, rows * ts_model_qkv_floats(c));
    l->attn[0].rot = take(cur, base, rows * ts_model_rot_floats(c));
    l->attn[0].att = take(cur, base, B * H * Sq * Sq);
    l->attn[0].ctx = take(cur, base, ctx_floats(c, rows));
    if (decoder) {
        l->attn[1].q = take(cur, base, rows * D);
        l->attn[1].kv = take(cur, base, B * Sk * 2 * D);
        l->attn[1].att = take(cur, base, B * H * Sq * Sk);
        l->attn[1].ctx = take(cur, base, rows * D);
    }
    l->ffn.hidden = take(cur, base, ffn_floats(c, rows)); /* gated: the gate's input, then up */
    l->ffn.act = take(cur, base, rows * F);
}

size_t ts_model_plan_backprop(const ts_model *m, ts_backprop_bufs *a, unsigned char *base) {
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
    a->gctx = take(&cur, base, ctx_floats(c, B * L));
    /* q, k and v's gradients (packed or apart), then with RoPE those of the rotated q and k */
    a->gqkv = take(&cur, base, max64(B * L * (ts_model_qkv_floats(c) + ts_model_rot_floats(c)),
                                     encdec ? B * T * D + B * S * 2 * D : 0));
    a->rope = take(&cur, base, L * ts_model_rotary_dims(c));
    a->gatt = take(&cur, base, B * H * max64(max64(S * S, T * T), T * S));
    a->gh1 = take(&cur, base, lone ? 0 : B * L * F);
    a->gh2 = take(&cur, base, lone ? 0 : B * L * F);
    a->gmem = take(&cur, base, B * S * D);
    a->gsrc = take(&cur, base, c->input == TS_INPUT_EMBEDDED ? B * S * din : 0);
    a->gtgt = take(&cur, base, encdec && c->input == TS_INPUT_EMBEDDED ? B * T * D : 0);
    a->gout = take(&cur, base, a->out_numel);
    return cur;
}
