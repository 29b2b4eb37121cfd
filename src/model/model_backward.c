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

/* Floats a thread clears or copies at a time; below a few chunks one thread
 * does it all (a parallel region costs more). The gradients are megabytes:
 * one thread alone leaves the other idle, and one core's stores fall short of
 * the memory's speed. */
#define FILL_CHUNK 16384

static void zero(float *x, int64_t n) {
    if (!x || n <= 0) return;
    int64_t chunks = (n + FILL_CHUNK - 1) / FILL_CHUNK;
    TS_MODEL_OMP(parallel for num_threads(ts_kernels_threads()) if(chunks >= 4) schedule(static))
    for (int64_t c = 0; c < chunks; c++) {
        int64_t i0 = c * FILL_CHUNK, len = n - i0 < FILL_CHUNK ? n - i0 : FILL_CHUNK;
        memset(x + i0, 0, sizeof(float) * (size_t)len);
    }
}

/* dst (n) = src (n), as zero() shares it out. */
static void copy(float *dst, const float *src, int64_t n) {
    if (n <= 0) return;
    int64_t chunks = (n + FILL_CHUNK - 1) / FILL_CHUNK;
    TS_MODEL_OMP(parallel for num_threads(ts_kernels_threads()) if(chunks >= 4) schedule(static))
    for (int64_t c = 0; c < chunks; c++) {
        int64_t i0 = c * FILL_CHUNK, len = n - i0 < FILL_CHUNK ? n - i0 : FILL_CHUNK;
        memcpy(dst + i0, src + i0, sizeof(float) * (size_t)len);
    }
}

/* The gradient through a dropout site (n), written to out rather than added:
 * the forward's own kernel applies the same mask and scale (the key makes it
 * again), which is zero-then-ts_bwd_dropout_backward in one pass. Without
 * dropout the gradient passes as it is: `in` itself when the caller may read
 * it there (may_alias), else a copy. */
static const float *dropout_bwd_to(const bctx *b, float *out, const float *in, uint64_t key, int64_t n,
                                   bool may_alias) {
    if (b->p > 0.0f) {
        ts_dropout(out, in, b->p, key, n);
        return out;
    }
    if (may_alias) return in;
    copy(out, in, n);
    return out;
}

/* ts_bwd_linear_backward with din written rather than added (the GEMM's beta
 * 0): zeroing din first and adding gives the same floats, at one more pass. */
static void linear_bwd_into(float *din, float *dw, float *db, const float *dout, const float *in, const float *w,
                            int64_t N, int I, int O) {
    if (N <= 0) return;
    ts_gemm(false, false, (int)N, I, O, 1.0f, dout, O, w, I, 0.0f, din, I, TS_EPI_NONE, NULL);
    ts_bwd_linear_backward(NULL, dw, db, dout, in, w, N, I, O);
}

/* The gradient of step prefix.leaf, to the hook as grad.prefix.leaf. */
/* Whether a hook watches the gradients: then every step is made as it is traced. */
static bool traced(const bctx *b) { return b->hook && b->hook->fn; }

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
    bool causal;      // self-attention under the causal rule
    const float *mem; // cross: (B, Sk, D)
} sub_args;

/* ---- today's parts: RMSNorm, RoPE, SiLU, shared key/value heads --------------------- */

/* Of out = x * rstd * g, g = w (Llama's RMSNorm) or 1 + w (Gemma's), with
 * n = x * rstd and G = dout * g: dx += rstd * (G - n * mean(G * n)) (no mean
 * taken, so no mean(G) term as in LayerNorm's); dw += sum over rows of dout * n. */
static void rms_norm_bwd(float *din, float *dw, const float *dout, const float *in, const float *w, bool one_plus,
                         const float *rstd, int64_t rows, int C) {
    TS_MODEL_OMP(parallel for num_threads(ts_kernels_threads()) if(rows * C >= 32768) schedule(static))
    for (int64_t r = 0; r < rows; r++) {
        const float *x = in + r * C, *dy = dout + r * C;
        float rs = rstd[r], dot = 0.0f;
        for (int j = 0; j < C; j++) dot += dy[j] * (one_plus ? 1.0f + w[j] : w[j]) * x[j] * rs;
        dot /= (float)C;
        float *dx = din + r * C;
        for (int j = 0; j < C; j++) dx[j] += rs * (dy[j] * (one_plus ? 1.0f + w[j] : w[j]) - x[j] * rs * dot);
    }
    if (!dw) return;
    for (int64_t r = 0; r < rows; r++) {
        const float *x = in + r * C, *dy = dout + r * C;
        for (int j = 0; j < C; j++) dw[j] += dy[j] * x[j] * rstd[r];
    }
}

/* A norm's backward, of the kind the model's norms are: dx += ..., the
 * parameters' gradients added into gw. in, and n's statistics, as the
 * forward left them (an RMSNorm keeps mean 0 and rstd 1 / rms). */
static void norm_bwd(const bctx *b, float *dx, ts_norm_weights *gw, const float *dy, const float *in,
                     const ts_norm_weights *w, const float *mean, const float *rstd, int64_t rows) {
    if (b->c->norm_kind == TS_NORMK_LAYER)
        ts_bwd_layernorm_backward(dx, gw->gamma, gw->beta, dy, in, w->gamma, mean, rstd, rows, b->D);
    else
        rms_norm_bwd(dx, gw->gamma, dy, in, w->gamma, b->c->norm_kind == TS_NORMK_RMS_GEMMA, rstd, rows, b->D);
}

/* din += dout * d/dx of silu(x) = x * s(x): s(x) * (1 + x * (1 - s(x))). */
static void silu_bwd(float *din, const float *dout, const float *in, int64_t n) {
    TS_MODEL_OMP(parallel for num_threads(ts_kernels_threads()) if(n >= 32768) schedule(static))
    for (int64_t i = 0; i < n; i++) {
        float x = in[i], sg = 1.0f / (1.0f + expf(-x));
        din[i] += dout[i] * sg * (1.0f + x * (1.0f - sg));
    }
}

/* The backward of the FFN's activation, whichever it is: din += dout * act'(in). */
static void activation_bwd(ts_activation act, float *din, const float *dout, const float *in, int64_t n) {
    switch (act) {
    case TS_ACT_GELU: ts_bwd_gelu_backward(din, dout, in, n); break;
    case TS_ACT_GELU_TANH: ts_bwd_gelu_tanh_backward(din, dout, in, n); break;
    case TS_ACT_SILU: silu_bwd(din, dout, in, n); break;
    case TS_ACT_RELU: ts_bwd_relu_backward(din, dout, in, n); break;
    }
}

/* RoPE turned pair (lo, hi) of each head by its position's angle:
 * y_lo = x_lo cos - x_hi sin, y_hi = x_hi cos + x_lo sin; the backward turns
 * the gradient back (the transpose of a rotation is the rotation by minus the
 * angle): dx_lo += dy_lo cos + dy_hi sin, dx_hi += dy_hi cos - dy_lo sin; the
 * dims past r passed through. dy: (B, S, heads * hd) as the forward wrote the
 * rotated copy; dx: where the projection's gradient lives. cosv, sinv: (S, r/2). */
static void rope_bwd(const bctx *b, ts_bwd_heads dx, const float *dy, int heads, int S, const float *cosv,
                     const float *sinv) {
    int hd = b->hd, r = ts_model_rotary_dims(b->c), half = r / 2;
    int64_t W = (int64_t)heads * hd;
    bool interleaved = b->c->rope_style == TS_ROPE_INTERLEAVED;
    TS_MODEL_OMP(parallel for num_threads(ts_kernels_threads()) if((int64_t)b->B * S * W >= 32768) schedule(static))
    for (int64_t bs = 0; bs < (int64_t)b->B * S; bs++) {
        int64_t bi = bs / S, p = bs % S;
        for (int h = 0; h < heads; h++) {
            const float *g = dy + bs * W + (int64_t)h * hd;
            float *out = dx.data + bi * dx.bstride + h * dx.hstride + p * dx.ld;
            for (int i = 0; i < half; i++) {
                int lo = interleaved ? 2 * i : i, hi = interleaved ? 2 * i + 1 : i + half;
                float c = cosv[p * half + i], sn = sinv[p * half + i];
                out[lo] += g[lo] * c + g[hi] * sn;
                out[hi] += g[hi] * c - g[lo] * sn;
            }
            for (int d = r; d < hd; d++) out[d] += g[d];
        }
    }
}

static float *head_of(const ts_bwd_heads *x, int64_t b, int64_t h) { return x->data + b * x->bstride + h * x->hstride; }

/* Grouped-query attention's backward, where query head h read key/value head
 * h / group: the kernels' three steps (kernels.h) with that map. Each thread
 * takes whole key/value heads, so the gradients the heads of a group add
 * into one dk or dv never race. 1. dweights = dout v^T, dv += weights^T dout. */
static void grouped_values_bwd(ts_bwd_heads dv, float *dweights, ts_bwd_heads dout, const float *weights,
                               ts_bwd_heads v, int B, int H, int KV, int S, int hd) {
    int group = H / KV;
    int64_t SS = (int64_t)S * S;
    TS_MODEL_OMP(parallel for num_threads(ts_kernels_threads()) if(B * KV > 1) schedule(static))
    for (int64_t bk = 0; bk < (int64_t)B * KV; bk++) {
        int64_t bi = bk / KV, kh = bk % KV;
        for (int j = 0; j < group; j++) {
            int64_t h = kh * group + j, bh = bi * H + h;
            const float *dO = head_of(&dout, bi, h);
            ts_gemm(false, true, S, S, hd, 1.0f, dO, dout.ld, head_of(&v, bi, kh), v.ld, 0.0f, dweights + bh * SS, S,
                    TS_EPI_NONE, NULL);
            ts_gemm(true, false, S, hd, S, 1.0f, weights + bh * SS, S, dO, dout.ld, 1.0f, head_of(&dv, bi, kh), dv.ld,
                    TS_EPI_NONE, NULL);
        }
    }
}

/* 3. dq += dscores k / sqrt(hd), dk += dscores^T q / sqrt(hd), k of head h / group. */
static void grouped_scores_bwd(ts_bwd_heads dq, ts_bwd_heads dk, const float *dscores, ts_bwd_heads q,
                               ts_bwd_heads k, int B, int H, int KV, int S, int hd) {
    int group = H / KV;
    int64_t SS = (int64_t)S * S;
    float scale = 1.0f / sqrtf((float)hd);
    TS_MODEL_OMP(parallel for num_threads(ts_kernels_threads()) if(B * KV > 1) schedule(static))
    for (int64_t bk = 0; bk < (int64_t)B * KV; bk++) {
        int64_t bi = bk / KV, kh = bk % KV;
        for (int j = 0; j < group; j++) {
            int64_t h = kh * group + j;
            const float *ds = dscores + (bi * H + h) * SS;
            ts_gemm(false, false, S, hd, S, scale, ds, S, head_of(&k, bi, kh), k.ld, 1.0f, head_of(&dq, bi, h),
                    dq.ld, TS_EPI_NONE, NULL);
            ts_gemm(true, false, S, hd, S, scale, ds, S, head_of(&q, bi, h), q.ld, 1.0f, head_of(&dk, bi, kh),
                    dk.ld, TS_EPI_NONE, NULL);
        }
    }
}

/* ---- attention ------------------------------------------------------------------------ */

/* Where a self-attention's q, k and v live, and their gradients: packed per
 * head [q_h k_h v_h] (B, S, 3D), or apart (Llama's q_proj | k_proj | v_proj,
 * (B, S, H*hd) then twice (B, S, KV*hd)). *n: the floats of the gradients. */
static void self_qkv_at(const bctx *b, const ts_kept_attn *at, int S, ts_bwd_heads *x, ts_bwd_heads *g, int64_t *n) {
    int hd = b->hd, H = b->H, KV = ts_model_kv_heads(b->c);
    int64_t rows = (int64_t)b->B * S, Q = (int64_t)H * hd, W = (int64_t)KV * hd, D3 = 3 * (int64_t)b->D;
    ts_backprop_bufs *a = b->a;
    if (b->c->split_qkv) {
        x[0] = (ts_bwd_heads){at->q, S * Q, hd, (int)Q};
        x[1] = (ts_bwd_heads){at->q + rows * Q, S * W, hd, (int)W};
        x[2] = (ts_bwd_heads){at->q + rows * (Q + W), S * W, hd, (int)W};
        g[0] = (ts_bwd_heads){a->gqkv, S * Q, hd, (int)Q};
        g[1] = (ts_bwd_heads){a->gqkv + rows * Q, S * W, hd, (int)W};
        g[2] = (ts_bwd_heads){a->gqkv + rows * (Q + W), S * W, hd, (int)W};
        *n = rows * (Q + 2 * W);
        return;
    }
    for (int i = 0; i < 3; i++) {
        x[i] = (ts_bwd_heads){at->q + i * hd, S * D3, 3 * hd, (int)D3};
        g[i] = (ts_bwd_heads){a->gqkv + i * hd, S * D3, 3 * hd, (int)D3};
    }
    *n = rows * D3;
}

/* Self-attention's q, k, v backward from the gradient at the values (go):
 * through the weights, the softmax and the scores into the projections'
 * gradients, through RoPE when q and k were turned. */
static ts_status self_qkv_bwd(bctx *b, const sub_args *s, ts_bwd_heads go) {
    int B = b->B, H = b->H, hd = b->hd, S = s->S, KV = ts_model_kv_heads(b->c);
    int64_t rows = (int64_t)B * S, n;
    const ts_kept_attn *at = s->at;
    ts_backprop_bufs *a = b->a;
    ts_bwd_heads x[3], g[3];
    self_qkv_at(b, at, S, x, g, &n);
    bool rope = b->c->pe == TS_PE_ROPE;
    /* what the scores read: q and k, or their rotated copies (and gradients apart) */
    ts_bwd_heads qs = x[0], ks = x[1], gqs = g[0], gks = g[1];
    int64_t Q = (int64_t)H * hd, W = (int64_t)KV * hd;
    if (rope) {
        qs = (ts_bwd_heads){at->rot, S * Q, hd, (int)Q};
        ks = (ts_bwd_heads){at->rot + rows * Q, S * W, hd, (int)W};
        gqs = (ts_bwd_heads){a->gqkv + n, S * Q, hd, (int)Q};
        gks = (ts_bwd_heads){a->gqkv + n + rows * Q, S * W, hd, (int)W};
    }
    zero(a->gqkv, n + (rope ? rows * (Q + W) : 0));
    int64_t att_shape[4] = {B, H, S, S};
    if (!traced(b) && KV == H) { /* unwatched: head by head, a causal one skipping the hidden keys */
        if (s->causal) ts_bwd_attention_backward_causal(gqs, gks, g[2], a->gatt, go, at->att, qs, ks, x[2], B, H, S, S, hd);
        else ts_bwd_attention_backward(gqs, gks, g[2], a->gatt, go, at->att, qs, ks, x[2], B, H, S, S, hd);
    } else if (KV == H) ts_bwd_attention_backward_values(g[2], a->gatt, go, at->att, x[2], B, H, S, S, hd);
    else grouped_values_bwd(g[2], a->gatt, go, at->att, x[2], B, H, KV, S, hd);
    if (traced(b) || KV != H) {
        TS_TRY(emit(b, s->name, "weights", a->gatt, 4, att_shape));
        ts_bwd_softmax_backward(a->gatt, a->gatt, at->att, (int64_t)B * H * S, S);
        TS_TRY(emit(b, s->name, "scaled", a->gatt, 4, att_shape));
        if (KV == H) ts_bwd_attention_backward_scores(gqs, gks, a->gatt, qs, ks, B, H, S, S, hd);
        else grouped_scores_bwd(gqs, gks, a->gatt, qs, ks, B, H, KV, S, hd);
    }
    if (!rope) return TS_OK;
    TS_TRY(emit3(b, s->name, "q_rot", gqs.data, B, S, Q));
    TS_TRY(emit3(b, s->name, "k_rot", gks.data, B, S, W));
    ts_model_rope_table(a->rope, b->c, 0, S);
    int half = ts_model_rotary_dims(b->c) / 2;
    rope_bwd(b, g[0], gqs.data, H, S, a->rope, a->rope + (int64_t)S * half);
    rope_bwd(b, g[1], gks.data, KV, S, a->rope, a->rope + (int64_t)S * half);
    return TS_OK;
}

/* The projections' backward: gfin += their gradients times their weights. */
static ts_status self_proj_bwd(bctx *b, const sub_args *s, const float *fin, float *gfin) {
    int B = b->B, S = s->S, hd = b->hd;
    int64_t rows = (int64_t)B * S, Q = (int64_t)b->H * hd, W = (int64_t)ts_model_kv_heads(b->c) * hd;
    const ts_attn_weights *w = s->attn;
    ts_attn_weights *gw = s->gattn;
    float *gq = b->a->gqkv, *gk = gq + rows * Q, *gv = gk + rows * W;
    if (!b->c->split_qkv) {
        TS_TRY(emit3(b, s->name, "qkv", gq, B, S, 3 * b->D));
        ts_bwd_linear_backward(gfin, gw->in_w, gw->in_b, gq, fin, w->in_w, rows, s->din, 3 * b->D);
        return TS_OK;
    }
    TS_TRY(emit3(b, s->name, "q_proj", gq, B, S, Q));
    TS_TRY(emit3(b, s->name, "k_proj", gk, B, S, W));
    TS_TRY(emit3(b, s->name, "v_proj", gv, B, S, W));
    ts_bwd_linear_backward(gfin, gw->q_w, gw->q_b, gq, fin, w->q_w, rows, b->D, (int)Q);
    ts_bwd_linear_backward(gfin, gw->k_w, gw->k_b, gk, fin, w->k_w, rows, b->D, (int)W);
    ts_bwd_linear_backward(gfin, gw->v_w, gw->v_b, gv, fin, w->v_w, rows, b->D, (int)W);
    return TS_OK;
}

/* Cross-attention's q (from the stream) and k, v (from the memory) backward. */
static ts_status cross_qkv_bwd(bctx *b, const sub_args *s, ts_bwd_heads go, const float *fin, float *gfin) {
    int B = b->B, D = b->D, H = b->H, hd = b->hd, S = s->S, Sk = s->Sk;
    int64_t rows = (int64_t)B * S;
    const ts_kept_attn *at = s->at;
    ts_backprop_bufs *a = b->a;
    float *gkv = a->gqkv + rows * D;
    ts_bwd_heads q = {at->q, (int64_t)S * D, hd, D}, k = {at->kv, (int64_t)Sk * 2 * D, 2 * hd, 2 * D};
    ts_bwd_heads gq = {a->gqkv, q.bstride, q.hstride, q.ld}, gk = {gkv, k.bstride, k.hstride, k.ld};
    ts_bwd_heads v = k, gv = gk;
    v.data += hd, gv.data += hd;
    zero(a->gqkv, rows * D + (int64_t)B * Sk * 2 * D);
    int64_t att_shape[4] = {B, H, S, Sk};
    if (!traced(b)) { /* unwatched: head by head */
        ts_bwd_attention_backward(gq, gk, gv, a->gatt, go, at->att, q, k, v, B, H, S, Sk, hd);
    } else {
        ts_bwd_attention_backward_values(gv, a->gatt, go, at->att, v, B, H, S, Sk, hd);
        TS_TRY(emit(b, s->name, "weights", a->gatt, 4, att_shape));
        ts_bwd_softmax_backward(a->gatt, a->gatt, at->att, (int64_t)B * H * S, Sk);
        TS_TRY(emit(b, s->name, "scaled", a->gatt, 4, att_shape));
        ts_bwd_attention_backward_scores(gq, gk, a->gatt, q, k, B, H, S, Sk, hd);
    }
    TS_TRY(emit3(b, s->name, "q_proj", a->gqkv, B, S, D));
    TS_TRY(emit3(b, s->name, "kv", gkv, B, Sk, 2 * D));
    ts_bwd_linear_backward(gfin, s->gattn->in_w, s->gattn->in_b, a->gqkv, fin, s->attn->in_w, rows, D, D);
    int64_t off = (int64_t)D * D;
    ts_bwd_linear_backward(a->gmem, s->gattn->in_w + off, s->gattn->in_b + D, gkv, s->mem, s->attn->in_w + off,
                           (int64_t)B * Sk, D, 2 * D);
    return TS_OK;
}

static ts_status attn_bwd(bctx *b, const sub_args *s, const float *fin, float *gfin, const float *gout) {
    int B = b->B, D = b->D, S = s->S, Q = b->H * b->hd; /* Q: the values' width, H * hd */
    int64_t rows = (int64_t)B * S;
    ts_backprop_bufs *a = b->a;
    linear_bwd_into(a->gctx, s->gattn->out_w, s->gattn->out_b, gout, s->at->ctx, s->attn->out_w, rows, Q, D);
    TS_TRY(emit3(b, s->name, "concat", a->gctx, B, S, Q));
    ts_bwd_heads go = {a->gctx, (int64_t)S * Q, b->hd, Q};
    if (s->kind == SUB_CROSS) return cross_qkv_bwd(b, s, go, fin, gfin);
    TS_TRY(self_qkv_bwd(b, s, go));
    return self_proj_bwd(b, s, fin, gfin);
}

/* ---- feed-forward ----------------------------------------------------------------------- */

/* The FFN's way down, out = linear2(dropout(h)): the gradient at h into
 * *gh (gh2, or gh1 itself when there is no dropout and may_alias), handed
 * over as the step `leaf` that made h (act, or a gated FFN's gated). */
static ts_status down_bwd(bctx *b, const sub_args *s, uint64_t key, const float *gout, const char *leaf,
                          bool may_alias, const float **gh) {
    int64_t rows = (int64_t)b->B * s->S, n = rows * b->F;
    ts_backprop_bufs *a = b->a;
    linear_bwd_into(a->gh1, s->gffn->w2, s->gffn->b2, gout, s->ff->act, s->ffn->w2, rows, b->F, b->D);
    TS_TRY(emit3(b, s->name, "dropout", a->gh1, b->B, s->S, b->F));
    *gh = dropout_bwd_to(b, a->gh2, a->gh1, key, n, may_alias);
    return emit3(b, s->name, leaf, *gh, b->B, s->S, b->F);
}

/* A gated FFN's backward, out = down(drop(act(g) * u)), g = gate(x), u = up(x):
 * d(act(g) * u) from down and the dropout, then du = that * act(g) (act(g)
 * made again from the kept g) and dact = that * u, through act into dg. */
static ts_status gated_ffn_bwd(bctx *b, const sub_args *s, uint64_t key, const float *fin, float *gfin,
                               const float *gout) {
    int64_t rows = (int64_t)b->B * s->S, n = rows * b->F;
    ts_backprop_bufs *a = b->a;
    const ts_kept_ffn *ff = s->ff;
    const float *gate = ff->hidden, *up = ff->hidden + n, *gh;
    TS_TRY(down_bwd(b, s, key, gout, "gated", false, &gh)); /* gh is gh2 */
    ts_activation act = b->c->activation;
    if (act == TS_ACT_SILU) ts_silu(a->gh1, gate, n);
    else if (act == TS_ACT_GELU_TANH) ts_gelu_tanh(a->gh1, gate, n);
    else ts_gelu(a->gh1, gate, n);
    ts_mul(a->gh1, a->gh1, a->gh2, n); /* du */
    ts_mul(a->gh2, a->gh2, up, n);     /* dact */
    TS_TRY(emit3(b, s->name, "up", a->gh1, b->B, s->S, b->F));
    TS_TRY(emit3(b, s->name, "act", a->gh2, b->B, s->S, b->F));
    ts_bwd_linear_backward(gfin, s->gffn->w1, s->gffn->b1, a->gh1, fin, s->ffn->w1, rows, b->D, b->F);
    zero(a->gh1, n);
    activation_bwd(act, a->gh1, a->gh2, gate, n);
    TS_TRY(emit3(b, s->name, "gate", a->gh1, b->B, s->S, b->F));
    ts_bwd_linear_backward(gfin, s->gffn->wg, s->gffn->bg, a->gh1, fin, s->ffn->wg, rows, b->D, b->F);
    return TS_OK;
}

static ts_status ffn_bwd(bctx *b, const sub_args *s, uint64_t key, const float *fin, float *gfin, const float *gout) {
    if (b->c->gated_ffn) return gated_ffn_bwd(b, s, key, fin, gfin, gout);
    int64_t rows = (int64_t)b->B * s->S, n = rows * b->F;
    ts_backprop_bufs *a = b->a;
    const ts_kept_ffn *ff = s->ff;
    const float *gact;
    TS_TRY(down_bwd(b, s, key, gout, "act", true, &gact));
    float *gh = gact == a->gh1 ? a->gh2 : a->gh1; /* the one gact is not in */
    zero(gh, n);
    activation_bwd(b->c->activation, gh, gact, ff->hidden, n);
    TS_TRY(emit3(b, s->name, "hidden", gh, b->B, s->S, b->F));
    ts_bwd_linear_backward(gfin, s->gffn->w1, s->gffn->b1, gh, fin, s->ffn->w1, rows, b->D, b->F);
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
        norm_bwd(b, gx, gw, gy, sub->res, w, sub->norm.mean, sub->norm.rstd, rows);
        TS_TRY(emit3(b, s->norm_name, "in", gx, b->B, s->S, b->D));
        const float *gf = dropout_bwd_to(b, a->gsub, gx, sub->key, n, false); /* gx is added into next */
        TS_TRY(emit3(b, s->name, "out", gf, b->B, s->S, b->D));
        if (!skip) zero(gx, n);
        return f_bwd(b, s, sub, x, gx, gf);
    }
    if (skip) copy(gx, gy, n);
    else zero(gx, n);
    const float *gf = dropout_bwd_to(b, a->gsub, gy, sub->key, n, true); /* gy stays as it is till the end */
    TS_TRY(emit3(b, s->name, "out", gf, b->B, s->S, b->D));
    zero(a->gn, n);
    TS_TRY(f_bwd(b, s, sub, sub->norm.out, a->gn, gf));
    TS_TRY(emit3(b, s->norm_name, "out", a->gn, b->B, s->S, b->D));
    norm_bwd(b, gx, gw, a->gn, x, w, sub->norm.mean, sub->norm.rstd, rows);
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
                   .norm = &w->norm1, .gnorm = &gw->norm1, .at = &l->attn[0], .S = S, .din = b->D,
                   .causal = b->c->causal};
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
         .norm = &w->norm1, .gnorm = &gw->norm1, .at = &l->attn[0], .S = T, .din = b->D,
         .causal = !b->c->tgt_not_causal},
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
    const float *gsum = dropout_bwd_to(b, a->gsub, gy, e->key, n, true);
    if (ts_model_embed_norm(c)) {
        zero(a->gn, n);
        norm_bwd(b, a->gn, &gw->norm, gsum, e->sum, &w->norm, e->norm.mean, e->norm.rstd, B * S);
        char np[TS_MODEL_NAME_MAX];
        snprintf(np, sizeof np, "%s.norm", pfx);
        TS_TRY(emit3(b, np, "in", a->gn, B, S, D));
        ts_bwd_posenc_backward(NULL, gw->positions, a->gn, (int)B, S, (int)D);
        gsum = a->gn;
    } else if (c->pe == TS_PE_LEARNED) {
        ts_bwd_posenc_backward(NULL, gw->positions, gsum, (int)B, S, (int)D);
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
    norm_bwd(b, gx, gw, *g, top, w, n->mean, n->rstd, rows);
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
                  .at = &b->a->k.lone, .S = m->S, .din = din, .causal = b->c->causal};
    TS_TRY(emit3(b, "self_attn", "out", gtop, b->B, m->S, b->D));
    TS_TRY(attn_bwd(b, &s, b->a->k.src.vecs, b->a->gsrc, gtop));
    return emit3(b, NULL, "input", b->a->gsrc, b->B, m->S, din);
}

ts_status ts_model_backward(const ts_model *m, ts_backprop_bufs *a, ts_model_weights *gw, const float *gtop,
                            const ts_hook *hook, ts_input_grads *d) {
    if (m->cfg.ln_std_eps) /* its gradient is not LayerNorm's: refused, never a wrong one */
        return ts_fail(TS_ERR_UNSUPPORTED, "backward: the LayerNorm with eps added to the unbiased std (the Annotated "
                       "Transformer's) has no backward pass yet");
    if (m->cfg.mask_fill != 0.0f) { /* masked_fill's gradient is 0 at a hidden score; softmax's is not, on a row all hidden */
        char fill[48];
        return ts_fail(TS_ERR_UNSUPPORTED, "backward: a finite mask fill (--mask-fill %s) has no backward pass yet; "
                       "train with -inf, whose weights are the same wherever a row keeps a key",
                       ts_model_mask_fill_text(fill, sizeof fill, &m->cfg));
    }
    const ts_model_config *c = &m->cfg;
    bctx b = {m, gw, c, a, hook, c->batch, c->d_model, c->heads, ts_model_head_dim(c), c->ffn, a->k.dropout};
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
