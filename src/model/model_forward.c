/* model_forward: every step of the forward pass, each handed to the hook.
 *
 * The model's steps are written here once and every pass runs them (run()):
 * inference and tracing (ts_model_forward), training keeping what the
 * backward reads (ts_model_forward_keep: each activation to its own buffer in
 * ts_kept instead of the shared ones below) and decoding new positions over
 * cached keys and values (ts_model_forward_cached, from model_decode.c).
 * Each step is computed, handed to the hook, and only then read by the next,
 * so an experiment's edit of any step reaches every later one. Every step
 * reaches the hook through fwd_emit_like (model_pass.c, with the rest of a
 * pass's plumbing): the one place to watch, or change, what the model
 * computes. A block reads as its arithmetic (self_attn_layer).
 *
 * How it stays fast and small. Activations live in a few buffers carved once
 * (ts_model_acts): the stream x, a sublayer output tmp, the attention values
 * ctx, and one scratch area `big` that holds qkv and the (B, H, S, S) scores
 * during attention and the FFN hidden layer after. The scores become the
 * scaled scores, the masked scores and the weights in that one buffer; the
 * hook sees each stage before the next overwrites it. With no hook the stages
 * fuse (the scale goes into the GEMM's alpha, the mask into the softmax, the
 * activation into the GEMM's epilogue), and the numbers come out the same.
 *
 * Steps that are only a new view of a buffer (qkv_heads, qkv_perm, q/k/v,
 * values, values_perm, concat) cost nothing: their tensors carry strides.
 * `values` is (B, H, S, hd) as seed 000 prints it, but it is written straight
 * into (B, S, H, hd) order, so `values_perm` (the permute back) and `concat`
 * are views too. Seed 000 skips that permute and reshapes (B, H, S, hd) to
 * (B, S, D) directly, which mixes heads and positions; tscope traces the
 * permute as its own step, the one intended difference from seed 000's print.
 *
 * Trace order inside scaled dot-product attention: scores, scaled, masked (only
 * with a mask), weights, values: the order they are made in, so an edit of
 * the weights reaches the values (seed 000's scaled_dot_product returns
 * (values, attention) and prints values first; tscope keeps the order of
 * the arithmetic, the rule every step follows: made, handed over, then read).
 *
 * Dropout (training only) acts where the paper and seed 000 put it: on the sum
 * of embeddings and positions, on each sublayer's output before the residual
 * add, and inside the FFN after the activation (seed 000's "x after dropout",
 * traced as ffn.dropout in every mode so the step list does not depend on it).
 * Attention weights are not dropped: neither seed 000 nor the paper does.
 *
 * The seeds' mistakes (ts_variant, --pe-variant, --mask; model_variants.c)
 * each change one step and keep its name, so a lesson can compare runs.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_pass.h"
#include "tscope/kernels.h"

/* What seed 003's mask tensor holds where a key is hidden (variant seed003-mask). */
#define SEED003_FILL (-1e9f)

void ts_model_sinusoid(float *pe, int rows, int D) {
    for (int pos = 0; pos < rows; pos++)
        for (int i = 0; i < D; i += 2) {
            double angle = pos / pow(10000.0, (double)i / D);
            pe[(int64_t)pos * D + i] = (float)sin(angle);
            if (i + 1 < D) pe[(int64_t)pos * D + i + 1] = (float)cos(angle);
        }
}

/* ---- the elementwise steps ----------------------------------------------------------- */

/* out (rows, n_out) = in (rows, n_in) @ w^T (n_in -> n_out) + b, as nn.Linear;
 * w read as bf16 when the model keeps it so (--dtype bf16). Without b, the
 * plain bias epilogue is none; the activations' epilogues take no bias. */
static void linear(fwd *f, float *out, const float *in, int64_t rows, int n_in, int n_out, const float *w,
                   const float *b, int ld_in, ts_epilogue epi) {
    f->flops += 2.0 * (double)rows * n_in * n_out;
    if (f->dry) return;
    if (!b && epi != TS_EPI_BIAS_GELU_TANH && epi != TS_EPI_BIAS_SILU) epi = TS_EPI_NONE;
    const ts_bf16 *wh = ts_model_bf16_of(f->m, w);
    if (wh)
        ts_gemm_bf16((int)rows, n_out, n_in, 1.0f, in, ld_in, wh, n_in, 0.0f, out, n_out, epi, b);
    else
        ts_gemm(false, true, (int)rows, n_out, n_in, 1.0f, in, ld_in, w, n_in, 0.0f, out, n_out, epi, b);
}

/* The residual add, out = stream + sub; with the no-residual variant the
 * sublayer's output alone goes on. */
static void skip_add(fwd *f, float *out, const float *stream, const float *sub, int64_t n) {
    if (f->dry) return;
    if (!(f->c->variants & TS_VARIANT_NO_RESIDUAL)) ts_add(out, stream, sub, n);
    else if (out != sub) memcpy(out, sub, sizeof(float) * (size_t)n);
}

/* What skip_add made, for the trace: a sum, or the sublayer's dropout. */
static ts_op skip_op(const fwd *f) { return f->c->variants & TS_VARIANT_NO_RESIDUAL ? TS_OP_DROPOUT : TS_OP_ADD; }

/* The next dropout site's key. Two streams, each stable so that runs replay
 * bit for bit: a training forward (kept activations) draws from the stream
 * its caller set for that forward; a forward in training mode otherwise
 * (run --train-mode) from the model's running count of dropout calls. */
static uint64_t dropout_key(fwd *f) {
    if (f->keep) return ts_mix64(f->keep->stream + 0x9E37ull * ++f->keep->site);
    return ts_mix64(f->c->seed ^ ts_mix64(0xD0D0ull + f->m->dropout_calls++));
}

/* out = dropout(in) (out may be in), inverted, with a counter-based stream:
 * element i keeps its value when hash(key, i) >= p, the same on any number of
 * threads. Returns the key (what the backward needs), 0 when no site was
 * drawn: inference draws none; training draws one even at p = 0. */
static uint64_t dropout(fwd *f, float *out, const float *in, int64_t n) {
    if (!f->keep && f->p <= 0.0f) {
        if (!f->dry && out != in) memcpy(out, in, sizeof(float) * (size_t)n);
        return 0;
    }
    uint64_t key = dropout_key(f);
    if (!f->dry) ts_dropout(out, in, f->p, key, n);
    return key;
}

/* ---- LayerNorm ----------------------------------------------------------------- */

/* The steps inside a LayerNorm, made and handed over only when watched or edited. */
static const char *const NORM_INNER_STEPS[] = {"mean", "std", "y", NULL};

/* y (rows, D) = (in - mean) / std, a row's mean (none: 0) and std each: a norm's y
 * made again when an edit changed its statistics, so that y, and the out
 * made from y, follow the edit. */
static void normalize_rows(float *y, const float *in, const float *mean, const float *stdv, int64_t rows, int64_t D) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < D; j++) y[r * D + j] = (in[r * D + j] - (mean ? mean[r] : 0.0f)) / stdv[r];
}

/* out (rows, D) = gamma * y + beta: a norm's out made again from an edited y. */
static void affine_rows(float *out, const float *y, const float *gamma, const float *beta, int64_t rows, int64_t D) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < D; j++)
            out[r * D + j] = (gamma ? gamma[j] : 1.0f) * y[r * D + j] + (beta ? beta[j] : 0.0f);
}

/* Seed 001's LayerNorm over (batch, features), variant seed001-layernorm: the
 * steps of norm() below, with mean and std (1, S, 1), one per position, and
 * gamma, beta shown (B, D) as the seed shapes its parameters (model_variants.c). */
static ts_status norm_two_dims(fwd *f, const norm_step *n, const float *in, int S) {
    double flops0 = f->flops;
    int64_t B = f->B, D = f->D;
    ts_model_acts *a = f->a;
    const ts_norm_weights *w = n->w;
    ts_tensor t = view3(in, B, S, D);
    TS_TRY(fwd_emit(f, n->name, "in", n->in_op, &t, TS_TAG_NORM_IN, n->in_traced));
    bool watch = fwd_watches(f, n->name, NORM_INNER_STEPS);
    float *y = watch ? a->big : NULL; // a norm's input never lives in big
    if (!f->dry) ts_model_layernorm_two_dims(n->out, y, a->mean, a->std, in, w->gamma, w->beta, (int)B, S, (int)D, n->eps);
    if (watch) {
        int64_t edits = f->edits;
        t = view3(a->mean, 1, S, 1);
        TS_TRY(fwd_emit(f, n->name, "mean", TS_OP_MEAN, &t, TS_TAG_NORM_STAT, false));
        t = view3(a->std, 1, S, 1);
        TS_TRY(fwd_emit(f, n->name, "std", TS_OP_STD, &t, TS_TAG_NORM_STAT, false));
        if (f->edits != edits && !f->dry) /* y from the statistics as edited: one mean and std per position */
            for (int64_t b = 0; b < B; b++) normalize_rows(y + b * S * D, in + b * S * D, a->mean, a->std, S, D);
        t = view3(y, B, S, D);
        TS_TRY(fwd_emit(f, n->name, "y", TS_OP_LAYERNORM, &t, TS_TAG_PLAIN, false));
        if (f->edits != edits && !f->dry) affine_rows(n->out, y, w->gamma, w->beta, B * S, D);
        t = view(w->gamma, 2, (int64_t[]){B, D}, (int64_t[]){0, 1});
        TS_TRY(fwd_emit(f, n->name, "gamma", TS_OP_PARAM, &t, TS_TAG_PARAM, false));
        t = view(w->beta, 2, (int64_t[]){B, D}, (int64_t[]){0, 1});
        TS_TRY(fwd_emit(f, n->name, "beta", TS_OP_PARAM, &t, TS_TAG_PARAM, false));
    }
    t = view3(n->out, B, S, D);
    TS_TRY(fwd_emit(f, n->name, "out", TS_OP_LAYERNORM, &t, TS_TAG_NORM_OUT, false));
    return fwd_module_done(f, n->name, n->params, &t, flops0);
}

static bool identity_affine(const ts_norm_weights *w, int64_t D) {
    if (!w->gamma || !w->beta) return false;
    for (int64_t j = 0; j < D; j++)
        if (w->gamma[j] != 1.0f || w->beta[j] != 0.0f) return false;
    return true;
}

/* rms (rows) = sqrt(mean(x^2) + eps) over the last dim, summed in double. */
static void rms_rows(float *rms, const float *in, int64_t rows, int64_t D, float eps, const fwd *f) {
    (void)f; /* read by the OpenMP pragma only: a build without OpenMP (make fuzz, NO_OMP=1, wasm) has none */
    TS_MODEL_OMP(parallel for num_threads(f->threads) if(f->par) schedule(static))
    for (int64_t r = 0; r < rows; r++) {
        double sq = 0;
        for (int64_t j = 0; j < D; j++) sq += (double)in[r * D + j] * in[r * D + j];
        rms[r] = (float)sqrt(sq / (double)D + (double)eps);
    }
}

/* out (rows, D) = y * w, or y * (1 + w) with Gemma's RMSNorm. */
static void rms_scale(float *out, const float *y, const float *w, bool one_plus, int64_t rows, int64_t D) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < D; j++) out[r * D + j] = y[r * D + j] * (one_plus ? 1.0f + w[j] : w[j]);
}

/* RMSNorm (Llama, Mistral, Qwen2; Gemma's scales by 1 + w): no mean taken,
 * out = x / sqrt(mean(x^2) + eps) * w. Traces in, rms (B, S, 1), y = x / rms,
 * gamma (w), out; y and out follow an edit of rms or y. */
static ts_status rms_norm(fwd *f, const norm_step *n, const float *in, int S) {
    double flops0 = f->flops;
    int64_t B = f->B, D = f->D, rows = B * S;
    ts_model_acts *a = f->a;
    const ts_norm_weights *w = n->w;
    ts_tensor t = view3(in, B, S, D);
    TS_TRY(fwd_emit(f, n->name, "in", n->in_op, &t, TS_TAG_NORM_IN, n->in_traced));
    float *y = at(a->big, rows * D); /* in may be out: y apart, out written last */
    if (!f->dry) rms_rows(a->std, in, rows, D, n->eps, f);
    t = view3(a->std, B, S, 1);
    TS_TRY(fwd_emit(f, n->name, "rms", TS_OP_RMS, &t, TS_TAG_NORM_STAT, false));
    if (!f->dry) normalize_rows(y, in, NULL, a->std, rows, D);
    ts_tensor ty = view3(y, B, S, D);
    TS_TRY(fwd_emit(f, n->name, "y", TS_OP_RMS, &ty, TS_TAG_PLAIN, false));
    t = view(w->gamma, 1, (int64_t[]){D}, NULL);
    TS_TRY(fwd_emit(f, n->name, "gamma", TS_OP_PARAM, &t, TS_TAG_PARAM, false));
    if (!f->dry) rms_scale(n->out, y, w->gamma, f->c->norm_kind == TS_NORMK_RMS_GEMMA, rows, D);
    /* what a backward or the norm view reads as LayerNorm's: mean 0, rstd 1 / rms */
    if (!f->dry)
        for (int64_t r = 0; r < rows; r++) n->mean[r] = 0.0f, n->rstd[r] = 1.0f / a->std[r];
    t = view3(n->out, B, S, D);
    TS_TRY(fwd_emit(f, n->name, "out", TS_OP_RMS, &t, TS_TAG_NORM_OUT, false));
    return fwd_module_done(f, n->name, n->params, &t, flops0);
}

/* mean (rows) and std (rows) = the unbiased std + eps, as torch's x.std() and
 * the Annotated Transformer's LayerNorm; summed in double. */
static void mean_std_plus_eps(float *mean, float *stdv, const float *in, int64_t rows, int64_t D, float eps) {
    for (int64_t r = 0; r < rows; r++) {
        double sum = 0, sq = 0;
        for (int64_t j = 0; j < D; j++) sum += in[r * D + j];
        double mu = sum / (double)D;
        for (int64_t j = 0; j < D; j++) sq += (in[r * D + j] - mu) * (in[r * D + j] - mu);
        mean[r] = (float)mu;
        stdv[r] = (float)(sqrt(sq / (double)(D > 1 ? D - 1 : 1)) + (double)eps);
    }
}

/* The Annotated Transformer's LayerNorm: out = gamma * (in - mean) / (std + eps)
 * + beta, std unbiased (divided by D - 1) and eps added to it, not to the
 * variance. Traces in, mean, std (B, S, 1: the std + eps that divides), y,
 * gamma, beta, out, each read only after the hook had it: y and out follow an
 * edit of mean, std or y. */
static ts_status norm_std_eps(fwd *f, const norm_step *n, const float *in, int S) {
    double flops0 = f->flops;
    int64_t B = f->B, D = f->D, rows = B * S;
    ts_model_acts *a = f->a;
    const ts_norm_weights *w = n->w;
    ts_tensor t = view3(in, B, S, D);
    TS_TRY(fwd_emit(f, n->name, "in", n->in_op, &t, TS_TAG_NORM_IN, n->in_traced));
    float *y = at(a->big, rows * D); /* in may be out: y apart, out written last */
    if (!f->dry) mean_std_plus_eps(n->mean, a->std, in, rows, D, n->eps);
    t = view3(n->mean, B, S, 1);
    TS_TRY(fwd_emit(f, n->name, "mean", TS_OP_MEAN, &t, TS_TAG_NORM_STAT, false));
    t = view3(a->std, B, S, 1);
    TS_TRY(fwd_emit(f, n->name, "std", TS_OP_STD, &t, TS_TAG_NORM_STAT, false));
    if (!f->dry) normalize_rows(y, in, n->mean, a->std, rows, D);
    t = view3(y, B, S, D);
    TS_TRY(fwd_emit(f, n->name, "y", TS_OP_LAYERNORM, &t, TS_TAG_PLAIN, false));
    t = view(w->gamma, 1, (int64_t[]){D}, NULL);
    TS_TRY(fwd_emit(f, n->name, "gamma", TS_OP_PARAM, &t, TS_TAG_PARAM, false));
    t = view(w->beta, 1, (int64_t[]){D}, NULL);
    TS_TRY(fwd_emit(f, n->name, "beta", TS_OP_PARAM, &t, TS_TAG_PARAM, false));
    if (!f->dry) affine_rows(n->out, y, w->gamma, w->beta, rows, D);
    /* what the norm view reads: the statistics that made y */
    if (!f->dry)
        for (int64_t r = 0; r < rows; r++) n->rstd[r] = 1.0f / a->std[r];
    t = view3(n->out, B, S, D);
    TS_TRY(fwd_emit(f, n->name, "out", TS_OP_LAYERNORM, &t, TS_TAG_NORM_OUT, false));
    return fwd_module_done(f, n->name, n->params, &t, flops0);
}

/* out = gamma * (in - mean) / std + beta over the last dim, std = sqrt(var + eps)
 * with the biased variance, as seed 000's LayerNormalization and nn.LayerNorm.
 * Traces in, mean, std (B, S, 1), y = (in - mean) / std, gamma, beta, out. */
static ts_status norm(fwd *f, const norm_step *n, const float *in, int S) {
    if (f->c->variants & TS_VARIANT_SEED001_LAYERNORM) return norm_two_dims(f, n, in, S);
    if (f->c->norm_kind != TS_NORMK_LAYER) return rms_norm(f, n, in, S);
    if (f->c->ln_std_eps) return norm_std_eps(f, n, in, S);
    double flops0 = f->flops;
    int64_t B = f->B, D = f->D, rows = B * S;
    ts_model_acts *a = f->a;
    const ts_norm_weights *w = n->w;
    float *out = n->out;
    ts_tensor tin = view3(in, B, S, D);
    TS_TRY(fwd_emit(f, n->name, "in", n->in_op, &tin, TS_TAG_NORM_IN, n->in_traced));
    /* In place goes through the scratch area: the kernel reads a row while it writes. */
    float *dst = in == out ? a->big : out;
    if (!f->dry) ts_layernorm(dst, n->mean, n->rstd, in, w->gamma, w->beta, rows, (int)D, n->eps);
    ts_tensor ty = view3(NULL, B, S, D);
    bool restated = false; // an edit of mean, std or y: out is made again from them
    bool watch = fwd_watches(f, n->name, NORM_INNER_STEPS);
    if (watch) {
        float *y = at(a->big, rows * D); // big holds >= 2 (B, L, D)
        if (!f->dry) {
            /* The kernel without gamma and beta: the same mean and rstd, so
             * the same y the normalised out was made from. */
            ts_layernorm(y, NULL, NULL, in, NULL, NULL, rows, (int)D, n->eps);
            for (int64_t r = 0; r < rows; r++) a->std[r] = 1.0f / n->rstd[r];
        }
        int64_t edits = f->edits;
        ts_tensor stat = view3(n->mean, B, S, 1);
        TS_TRY(fwd_emit(f, n->name, "mean", TS_OP_MEAN, &stat, TS_TAG_NORM_STAT, false));
        stat = view3(a->std, B, S, 1);
        TS_TRY(fwd_emit(f, n->name, "std", TS_OP_STD, &stat, TS_TAG_NORM_STAT, false));
        if (f->edits != edits && !f->dry) { /* the statistics as edited make y (in is still intact) */
            normalize_rows(y, in, n->mean, a->std, rows, D);
            for (int64_t r = 0; r < rows; r++) n->rstd[r] = 1.0f / a->std[r];
        }
        ty = view3(y, B, S, D);
        TS_TRY(fwd_emit(f, n->name, "y", TS_OP_LAYERNORM, &ty, TS_TAG_PLAIN, false));
        restated = f->edits != edits && !f->dry;
        ts_tensor g = view(w->gamma, 1, (int64_t[]){D}, NULL);
        TS_TRY(fwd_emit(f, n->name, "gamma", TS_OP_PARAM, &g, TS_TAG_PARAM, false));
        g = view(w->beta, 1, (int64_t[]){D}, NULL);
        TS_TRY(fwd_emit(f, n->name, "beta", TS_OP_PARAM, &g, TS_TAG_PARAM, false));
    }
    if (dst != out && !f->dry) memcpy(out, dst, sizeof(float) * (size_t)(rows * D));
    if (restated) affine_rows(out, ty.data, w->gamma, w->beta, rows, D);
    ts_tensor tout = view3(out, B, S, D);
    /* gamma 1 and beta 0 (a LayerNorm that has not learned yet) make out
     * y times one plus zero: y's values, which a hook need not read again. */
    if (watch && !f->dry && identity_affine(w, D))
        TS_TRY(fwd_emit_like(f, n->name, "out", TS_OP_LAYERNORM, &tout, TS_TAG_NORM_OUT, false, &ty, 1.0f));
    else
        TS_TRY(fwd_emit(f, n->name, "out", TS_OP_LAYERNORM, &tout, TS_TAG_NORM_OUT, false));
    return fwd_module_done(f, n->name, n->params, &tout, flops0);
}

/* ---- attention -------------------------------------------------------------------- */

/* (B, heads, S, hd) over where x lives: H query heads, or KV key/value heads. */
static ts_tensor heads_view(fwd *f, const heads_at *x, int heads, int S) {
    return view((float *)x->base, 4, (int64_t[]){f->B, heads, S, f->hd},
                (int64_t[]){x->bstride, x->hstride, x->ld, 1});
}

/* One scaled dot-product attention: Sq queries over Sk keys. Causal: query r
 * is position Sk - Sq + r (the new positions come last when decoding) and sees
 * the keys up to it. att (B, H, Sq, Sk) ends holding the weights, ctx
 * (B, Sq, H, hd) the values. */
typedef struct attn_job {
    const heads_at *q, *k, *v;
    int Sq, Sk, H, hd, D;  // D: a row of ctx (H * hd)
    int group;             // query heads per key/value head: head h reads k and v of head h / group
    float *att;            // (B, H, Sq, Sk)
    float *ctx;            // (B, Sq, H, hd)
    const float *key_mask; // (B, Sk) or NULL
    bool causal;
} attn_job;

static float *att_of(const attn_job *j, int64_t bh) { return j->att + bh * j->Sq * j->Sk; }

/* One row of the masked scores, not seed 003's: keys [0, keep) times scale
 * (1: already scaled), a padded key (km != 0) replaced by the fill as
 * masked_fill does, the rest the fill. Straight loops over the row (4 KB at
 * GPT-2's 1024 keys, in L1), vectorised by `omp simd` (-O2's cost model
 * leaves loops of unknown length scalar); the scale apart so that no fused
 * multiply-add could change a bit. */
static void mask_row(float *restrict row, int keep, int Sk, float scale, const float *restrict km, float fill) {
    if (scale != 1.0f) {
        TS_MODEL_OMP(simd)
        for (int c = 0; c < keep; c++) row[c] *= scale;
    }
    if (km) {
        TS_MODEL_OMP(simd)
        for (int c = 0; c < keep; c++) row[c] = km[c] != 0.0f ? fill : row[c];
    }
    TS_MODEL_OMP(simd)
    for (int c = keep; c < Sk; c++) row[c] = fill;
}

/* Key padding (B, Sk), the causal rule and hidden query rows (B, Sq), written
 * into the scores as the fill, masked_fill's way: -inf, or --mask-fill's
 * number (the Annotated Transformer's -1e9); seed 003's masks add -1e9
 * instead (its keys' -1e9 comes in key_mask, build_mask). scale != 1: the
 * scores are not scaled yet (the hook took the scaled step from them,
 * scale_step), and each row is scaled on the way, as ts_scale would; never
 * with seed 003, whose -1e9 is added to scaled scores. */
static void apply_mask(fwd *f, const attn_job *j, const float *row_mask, float scale) {
    int64_t BH = (int64_t)f->B * f->H;
    int H = f->H, Sq = j->Sq, Sk = j->Sk, past = Sk - Sq;
    bool seed003 = f->c->variants & TS_VARIANT_SEED003_MASK;
    float fill = ts_model_mask_fill(f->c);
    TS_MODEL_OMP(parallel for num_threads(f->threads) if(f->par) schedule(static))
    for (int64_t bh = 0; bh < BH; bh++) {
        const float *km = j->key_mask ? j->key_mask + (bh / H) * Sk : NULL;
        const float *rm = row_mask ? row_mask + (bh / H) * Sq : NULL;
        for (int r = 0; r < Sq; r++) {
            float *row = att_of(j, bh) + (int64_t)r * Sk;
            bool hidden_row = rm && rm[r] != 0.0f;
            if (!seed003) {
                int keep = hidden_row ? 0 : j->causal && past + r + 1 < Sk ? past + r + 1 : Sk;
                mask_row(row, keep, Sk, scale, km, fill);
                continue;
            }
            if (hidden_row) {
                for (int c = 0; c < Sk; c++) row[c] = row[c] + SEED003_FILL;
                continue;
            }
            for (int c = 0; c < Sk; c++) {
                if (km && km[c] != 0.0f) row[c] = row[c] + km[c];
                if (j->causal && c > past + r) row[c] = row[c] + SEED003_FILL;
            }
        }
    }
}

/* One head's share: heads are independent, so a pass runs one (batch, head)
 * pair per iteration on each thread; the GEMMs inside run on that thread
 * alone (nested regions stay inactive). */
static void head_scores(const attn_job *j, int64_t bh, float alpha) {
    int64_t b = bh / j->H, h = bh % j->H, kvh = h / j->group;
    ts_gemm(false, true, j->Sq, j->Sk, j->hd, alpha, j->q->base + b * j->q->bstride + h * j->q->hstride, j->q->ld,
            j->k->base + b * j->k->bstride + kvh * j->k->hstride, j->k->ld, 0.0f, att_of(j, bh), j->Sk, TS_EPI_NONE,
            NULL);
}

/* Returns the rows that were masked entirely (now all 0). */
static int64_t head_softmax(const attn_job *j, int64_t bh, bool with_mask) {
    float *s = att_of(j, bh);
    const float *km = with_mask && j->key_mask ? j->key_mask + (bh / j->H) * j->Sk : NULL;
    return ts_softmax_rows(s, s, j->Sq, j->Sk, km, with_mask && j->causal, j->Sk - j->Sq);
}

/* values of head h go straight to columns h*hd.. of ctx: the permute back is free. */
static void head_values(const attn_job *j, int64_t bh) {
    int64_t b = bh / j->H, h = bh % j->H, kvh = h / j->group;
    ts_gemm(false, false, j->Sq, j->hd, j->Sk, 1.0f, att_of(j, bh), j->Sk,
            j->v->base + b * j->v->bstride + kvh * j->v->hstride, j->v->ld, 0.0f,
            j->ctx + b * j->Sq * j->D + h * j->hd, j->D, TS_EPI_NONE, NULL);
}

/* Query rows a causal head takes at a time: unwatched, each block computes
 * the scores, softmax and values of the keys it can see only; watched, the
 * values alone (attention_values). */
#define CAUSAL_BLOCK 64

/* The keys query rows [r0, r1) of a causal head can see: those of the last. */
static int causal_keys(const attn_job *j, int r1) {
    int past = j->Sk - j->Sq;
    return past + r1 < j->Sk ? past + r1 : j->Sk;
}

/* Values of rows [r0, r1) of one causal head from their weights, whose
 * columns past causal_keys are 0: summed over the others as the whole
 * product sums (ts_gemm_k_prefix), so the numbers are the full product's
 * (but a 0 * Inf or 0 * NaN left out gives no NaN). */
static void causal_values(const attn_job *j, int64_t bh, int r0, int r1) {
    int64_t b = bh / j->H, h = bh % j->H, kvh = h / j->group;
    ts_gemm_k_prefix(false, false, r1 - r0, j->hd, causal_keys(j, r1), j->Sk, 1.0f, att_of(j, bh) + (int64_t)r0 * j->Sk,
                     j->Sk, j->v->base + b * j->v->bstride + kvh * j->v->hstride, j->v->ld, 0.0f,
                     j->ctx + (b * j->Sq + r0) * j->D + h * j->hd, j->D);
}

/* Rows [r0, r1) of one causal head: scores over the first n keys (those the
 * block's last query sees; the softmax writes the rest of each row as 0),
 * and values summed over them as the whole product sums (ts_gemm_k_prefix),
 * so the numbers are the ones the full product of the staged path makes. */
static int64_t causal_block(const attn_job *j, int64_t bh, int r0, int r1, float scale) {
    int64_t b = bh / j->H, h = bh % j->H, kvh = h / j->group;
    int past = j->Sk - j->Sq, n = causal_keys(j, r1);
    float *s = att_of(j, bh) + (int64_t)r0 * j->Sk;
    const float *q = j->q->base + b * j->q->bstride + h * j->q->hstride + (int64_t)r0 * j->q->ld;
    ts_gemm(false, true, r1 - r0, n, j->hd, scale, q, j->q->ld, j->k->base + b * j->k->bstride + kvh * j->k->hstride,
            j->k->ld, 0.0f, s, j->Sk, TS_EPI_NONE, NULL);
    const float *km = j->key_mask ? j->key_mask + b * j->Sk : NULL;
    int64_t empty = ts_softmax_rows(s, s, r1 - r0, j->Sk, km, true, past + r0);
    causal_values(j, bh, r0, r1);
    return empty;
}

/* Blocks of a causal head. The scores' product of a block of at most 4 rows
 * would take the GEMM's few-rows path, which sums in another order, so a
 * short last block joins the one before it. */
static int causal_blocks(int Sq) {
    int n = (Sq + CAUSAL_BLOCK - 1) / CAUSAL_BLOCK;
    return n > 1 && Sq - (n - 1) * CAUSAL_BLOCK <= 4 ? n - 1 : n;
}

/* Rows [*r0, *r1) of block blk of a head's nb: the last takes what is left. */
static void causal_block_rows(const attn_job *j, int blk, int nb, int *r0, int *r1) {
    *r0 = blk * CAUSAL_BLOCK;
    *r1 = blk == nb - 1 ? j->Sq : *r0 + CAUSAL_BLOCK;
}

/* Blocks the attention kernel takes in one call, its keys packed once. */
#define KERNEL_BLOCKS 16

/* Blocks [b0, b1) of one causal head: by the attention kernel, which packs the
 * head's keys and values once for up to KERNEL_BLOCKS blocks (ts_attn_causal,
 * the same numbers), or by the GEMMs block by block where it declines. */
static int64_t causal_blocks_of_head(const attn_job *j, int64_t bh, int b0, int b1, float scale, bool keep_weights) {
    int64_t b = bh / j->H, h = bh % j->H, kvh = h / j->group, empty = 0;
    int nb = causal_blocks(j->Sq);
    ts_attn_head ah = {.Sq = j->Sq, .Sk = j->Sk, .hd = j->hd, .alpha = scale,
                       .q = j->q->base + b * j->q->bstride + h * j->q->hstride, .ldq = j->q->ld,
                       .k = j->k->base + b * j->k->bstride + kvh * j->k->hstride, .ldk = j->k->ld,
                       .v = j->v->base + b * j->v->bstride + kvh * j->v->hstride, .ldv = j->v->ld,
                       .key_mask = j->key_mask ? j->key_mask + b * j->Sk : NULL,
                       .att = keep_weights ? att_of(j, bh) : NULL, .ldatt = j->Sk, .ctx = j->ctx + b * j->Sq * j->D + h * j->hd,
                       .ldctx = j->D};
    for (int c0 = b0; c0 < b1; c0 += KERNEL_BLOCKS) {
        int c1 = c0 + KERNEL_BLOCKS < b1 ? c0 + KERNEL_BLOCKS : b1, ends[KERNEL_BLOCKS], r0, r1;
        for (int c = c0; c < c1; c++) causal_block_rows(j, c, nb, &r0, &ends[c - c0]);
        causal_block_rows(j, c0, nb, &r0, &r1);
        int64_t got = ts_attn_causal(&ah, r0, ends, c1 - c0);
        if (got >= 0) {
            empty += got;
            continue;
        }
        for (int c = c0; c < c1; c++) {
            causal_block_rows(j, c, nb, &r0, &r1);
            empty += causal_block(j, bh, r0, r1, scale);
        }
    }
    return empty;
}

/* A causal head's blocks: with enough heads to share out whole (or one
 * thread), each task is a head, whose keys and values are then packed once;
 * with fewer, a task is one block, every head's longest first. The weights
 * stay in att only for whoever reads them: training's backward (att is then
 * kept), or an edit (which may be handed the weights step); nobody else
 * reads att, so the kernel makes them in its scratch, in cache. */
static int64_t attention_causal(fwd *f, const attn_job *j, float scale) {
    int64_t BH = (int64_t)f->B * f->H, empty = 0;
    int nb = causal_blocks(j->Sq);
    bool whole_heads = !f->par || BH >= 2 * f->threads;
    bool keep_weights = f->keep || f->watch || ts_hook_edits(f->hook);
    int64_t tasks = whole_heads ? BH : BH * nb;
    TS_MODEL_OMP(parallel for num_threads(f->threads) if(f->par) schedule(dynamic, 1) reduction(+:empty))
    for (int64_t t = 0; t < tasks; t++) {
        int blk = whole_heads ? 0 : nb - 1 - (int)(t / BH);
        empty += causal_blocks_of_head(j, t % BH, blk, whole_heads ? nb : blk + 1, scale, keep_weights);
    }
    return empty;
}

/* Attention when nobody watches: each head start to finish while its scores
 * sit in cache, the scale in the GEMM's alpha and the mask in the softmax;
 * a causal head by blocks of queries, skipping the keys the mask hides. */
static int64_t attention_fused(fwd *f, const attn_job *j, float scale, bool masked) {
    int64_t BH = (int64_t)f->B * f->H, empty = 0;
    if (j->causal) return attention_causal(f, j, scale);
    TS_MODEL_OMP(parallel for num_threads(f->threads) if(f->par) schedule(dynamic, 1) reduction(+:empty))
    for (int64_t bh = 0; bh < BH; bh++) {
        head_scores(j, bh, scale);
        empty += head_softmax(j, bh, masked);
        head_values(j, bh);
    }
    return empty;
}

/* The scaled scores, or their offer: scaled scores a hook can record from
 * the scores (a trace writer's scaled view) are left unmade here (*later)
 * and scaled on the way in the next pass over them, instead of in a pass of
 * their own: the mask's (apply_mask), or with no mask attention_steps' last
 * pass, per head in cache. */
static ts_status scale_step(fwd *f, const char *prefix, const attn_job *j, ts_tensor *tatt, float scale, bool masked,
                            bool *later) {
    *later = false;
    /* seed 003 adds -1e9 to the scaled scores: they must be made first */
    if (!masked || !(f->c->variants & TS_VARIANT_SEED003_MASK))
        TS_TRY(fwd_offer_ahead(f, prefix, "scaled", TS_OP_SCALE, tatt, TS_TAG_ATTN_SCORES, scale, later));
    if (*later) return TS_OK;
    if (!f->dry) ts_scale(j->att, j->att, scale, (int64_t)f->B * f->H * j->Sq * j->Sk);
    return fwd_emit_like(f, prefix, "scaled", TS_OP_SCALE, tatt, TS_TAG_ATTN_SCORES, false, NULL, scale);
}

/* Attention as the paper writes it, one step at a time, each handed to the
 * hook before the next reads it from att:
 *   scores  = q k^T                  (B, H, Sq, Sk)
 *   scaled  = scores / sqrt(hd)
 *   masked  = scaled + mask          (only with a mask)
 *   weights = softmax(masked)
 * Seed 001's unshifted softmax and seed 003's -1e9 change their step here.
 * att ends holding the weights; sdpa hands them over and then reads them. */
static ts_status attention_weights_steps(fwd *f, const char *prefix, const attn_job *j, float scale, bool masked,
                                         int64_t *empty) {
    int64_t BH = (int64_t)f->B * f->H;
    int Sq = j->Sq, Sk = j->Sk;
    bool unshifted = f->c->variants & TS_VARIANT_SEED001_SOFTMAX;
    ts_tensor tatt = view(j->att, 4, (int64_t[]){f->B, f->H, Sq, Sk}, NULL);
    if (!f->dry) {
        TS_MODEL_OMP(parallel for num_threads(f->threads) if(f->par) schedule(dynamic, 1))
        for (int64_t bh = 0; bh < BH; bh++) head_scores(j, bh, 1.0f);
    }
    TS_TRY(fwd_emit(f, prefix, "scores", TS_OP_MATMUL, &tatt, TS_TAG_ATTN_SCORES, false));
    bool scale_later;
    TS_TRY(scale_step(f, prefix, j, &tatt, scale, masked, &scale_later));
    if (masked) { /* the scale, when left till now, goes with the mask: one pass over the scores */
        if (!f->dry) apply_mask(f, j, f->row_mask, scale_later ? scale : 1.0f);
        scale_later = false;
        TS_TRY(fwd_emit(f, prefix, "masked", TS_OP_MASK, &tatt, TS_TAG_ATTN_SCORES, false));
    }
    if (f->dry) return TS_OK;
    int64_t hidden = 0; /* the mask is in the scores now */
    TS_MODEL_OMP(parallel for num_threads(f->threads) if(f->par) schedule(dynamic, 1) reduction(+:hidden))
    for (int64_t bh = 0; bh < BH; bh++) {
        if (scale_later) ts_scale(att_of(j, bh), att_of(j, bh), scale, (int64_t)Sq * Sk);
        if (unshifted) ts_model_softmax_unshifted(att_of(j, bh), Sq, Sk);
        else hidden += head_softmax(j, bh, false);
    }
    *empty = hidden;
    return TS_OK;
}

/* values = weights v for every head, from the weights as the hook left them.
 * Causal weights nobody could edit (a hook that watches only) and that the
 * plain softmax made are 0 past each query's keys: those the values skip, by
 * blocks of queries as the fused path does, with the same numbers. */
static void attention_values(fwd *f, const attn_job *j) {
    int64_t BH = (int64_t)f->B * f->H;
    /* a finite --mask-fill leaves weight on hidden keys in a row with nothing left to see */
    bool zeros_hidden = j->causal && !ts_hook_edits(f->hook) && f->c->mask_fill == 0.0f &&
                        !(f->c->variants & (TS_VARIANT_SEED003_MASK | TS_VARIANT_SEED001_SOFTMAX));
    if (zeros_hidden) {
        int nb = causal_blocks(j->Sq);
        TS_MODEL_OMP(parallel for num_threads(f->threads) if(f->par) schedule(dynamic, 1))
        for (int64_t t = 0; t < BH * nb; t++) {
            int blk = nb - 1 - (int)(t / BH); /* every head's longest blocks first */
            int r0 = blk * CAUSAL_BLOCK, r1 = blk == nb - 1 ? j->Sq : r0 + CAUSAL_BLOCK;
            causal_values(j, t % BH, r0, r1);
        }
        return;
    }
    TS_MODEL_OMP(parallel for num_threads(f->threads) if(f->par) schedule(dynamic, 1))
    for (int64_t bh = 0; bh < BH; bh++) head_values(j, bh);
}

/* values (B, H, Sq, hd) = softmax(q k^T / sqrt(hd) + mask) v, written into
 * ctx in (B, Sq, H, hd) order; att (B, H, Sq, Sk) ends holding the weights.
 * Step by step when someone watches or a seed's variant changes a stage
 * (attention_weights_steps, then the weights handed over, then the values
 * read from them: an edit of the weights reaches the values); fused
 * otherwise (attention_fused), with the same numbers. */
static ts_status sdpa(fwd *f, const char *prefix, const attn_job *j) {
    int B = f->B, H = f->H, hd = f->hd, D = f->Q, Sq = j->Sq, Sk = j->Sk; /* D: a row of the values, H * hd */
    float scale = ts_model_attn_scale(f->c, hd);
    int64_t empty = 0;
    f->flops += 2.0 * 2.0 * (double)B * H * Sq * Sk * hd;
    bool masked = j->key_mask || j->causal || f->row_mask;
    /* hidden rows, a finite --mask-fill, seed 003's -1e9 and seed 001's softmax go into the scores, as a
     * watcher sees them (the fused softmax knows only -inf) */
    static const char *const stages[] = {"scores", "scaled", "masked", "weights", NULL};
    bool finite_fill = masked && ((f->c->variants & TS_VARIANT_SEED003_MASK) || f->c->mask_fill != 0.0f);
    bool staged = fwd_watches(f, prefix, stages) || f->row_mask || finite_fill ||
                  (f->c->variants & TS_VARIANT_SEED001_SOFTMAX);
    ts_tensor tatt = view(j->att, 4, (int64_t[]){B, H, Sq, Sk}, NULL);
    if (staged) {
        TS_TRY(attention_weights_steps(f, prefix, j, scale, masked, &empty));
        TS_TRY(fwd_emit(f, prefix, "weights", TS_OP_SOFTMAX, &tatt, TS_TAG_ATTN_WEIGHTS, false));
        if (!f->dry) attention_values(f, j);
    } else {
        if (!f->dry) empty = attention_fused(f, j, scale, masked);
        TS_TRY(fwd_emit(f, prefix, "weights", TS_OP_SOFTMAX, &tatt, TS_TAG_ATTN_WEIGHTS, false));
    }
    f->m->empty_rows += empty;
    heads_at vals = {j->ctx, (int64_t)Sq * D, hd, D};
    ts_tensor tv = heads_view(f, &vals, H, Sq);
    TS_TRY(fwd_emit(f, prefix, "values", TS_OP_MATMUL, &tv, TS_TAG_HEADS, false));
    if (f->c->variants & TS_VARIANT_SEED000_RESHAPE) { /* no permute back; the q/k/v rows are spent */
        if (!f->dry) ts_model_unpermuted_concat(j->ctx, f->a->big, B, Sq, H, hd);
    } else {
        ts_tensor perm = view(j->ctx, 4, (int64_t[]){B, Sq, H, hd}, NULL);
        TS_TRY(fwd_emit(f, prefix, "values_perm", TS_OP_PERMUTE, &perm, TS_TAG_PLAIN, false));
    }
    ts_tensor concat = view3(j->ctx, B, Sq, D);
    return fwd_emit(f, prefix, "concat", TS_OP_RESHAPE, &concat, TS_TAG_PLAIN, false);
}

/* Self-attention's projection as seed 000 writes it: qkv (B, S, 3D) -> view
 * (B, S, H, 3hd) -> permute (B, H, S, 3hd) -> chunk into q, k, v (B, H, S, hd),
 * all views of one buffer (in_proj rows are stored per head: see model.c). */
static ts_status packed_projection(fwd *f, attn_step *s, const float *x, int S) {
    int64_t B = f->B, D = f->D, H = f->H, hd = f->hd;
    float *qkv = s->buf.q;
    linear(f, qkv, x, B * S, s->din, (int)(3 * D), s->w->in_w, s->w->in_b, s->din, TS_EPI_BIAS);
    ts_tensor t = view3(qkv, B, S, 3 * D);
    TS_TRY(fwd_emit(f, s->name, "qkv", TS_OP_LINEAR, &t, TS_TAG_PLAIN, false));
    t = view(qkv, 4, (int64_t[]){B, S, H, 3 * hd}, NULL);
    TS_TRY(fwd_emit(f, s->name, "qkv_heads", TS_OP_RESHAPE, &t, TS_TAG_PLAIN, false));
    t = view(qkv, 4, (int64_t[]){B, H, S, 3 * hd}, (int64_t[]){S * 3 * D, 3 * hd, 3 * D, 1});
    TS_TRY(fwd_emit(f, s->name, "qkv_perm", TS_OP_PERMUTE, &t, TS_TAG_HEADS, false));
    s->q = (heads_at){qkv, S * 3 * D, 3 * hd, (int)(3 * D)};
    s->k = s->v = s->q;
    s->k.base = cat(qkv, hd);
    s->v.base = cat(qkv, 2 * hd);
    t = heads_view(f, &s->q, (int)H, S);
    return fwd_emit(f, s->name, "q", TS_OP_CHUNK, &t, TS_TAG_HEADS, false);
}

/* One of today's projections apart: out (B, S, heads * hd) = x W^T + b, then
 * its heads (B, heads, S, hd) as a view. */
static ts_status head_projection(fwd *f, attn_step *s, const float *x, int S, const char *leaf, const char *heads_leaf,
                                 const float *w, const float *b, int heads, float *out, heads_at *at_heads) {
    int64_t B = f->B, W = (int64_t)heads * f->hd;
    linear(f, out, x, B * S, f->D, (int)W, w, b, f->D, TS_EPI_BIAS);
    ts_tensor t = view3(out, B, S, W);
    TS_TRY(fwd_emit(f, s->name, leaf, TS_OP_LINEAR, &t, TS_TAG_PLAIN, false));
    *at_heads = (heads_at){out, S * W, f->hd, (int)W};
    if (!heads_leaf) return TS_OK;
    t = heads_view(f, at_heads, heads, S);
    return fwd_emit(f, s->name, heads_leaf, TS_OP_PERMUTE, &t, TS_TAG_HEADS, false);
}

/* Llama's projection: q_proj (B, S, H*hd), k_proj and v_proj (B, S, KV*hd),
 * side by side in the scratch area, each seen as heads (q, k, v). */
static ts_status split_projection(fwd *f, attn_step *s, const float *x, int S) {
    int64_t rows = (int64_t)f->B * S;
    float *q = s->buf.q, *k = at(q, rows * f->Q), *v = at(k, rows * f->KV * f->hd);
    const ts_attn_weights *w = s->w;
    TS_TRY(head_projection(f, s, x, S, "q_proj", "q", w->q_w, w->q_b, f->H, q, &s->q));
    TS_TRY(head_projection(f, s, x, S, "k_proj", NULL, w->k_w, w->k_b, f->KV, k, &s->k));
    return head_projection(f, s, x, S, "v_proj", NULL, w->v_w, w->v_b, f->KV, v, &s->v);
}

/* RoPE over heads (B, heads, S, hd) at x: pair p of the first r dims of each
 * head turns by the angle of its position and frequency (the cos and sin of
 * this pass, a->rope); dims past r pass through. The rotated copy goes to dst
 * (B, S, heads * hd), which every later step reads. */
static void rotate(fwd *f, const heads_at *x, int heads, int S, float *dst) {
    int hd = f->hd, r = ts_model_rotary_dims(f->c), half = r / 2;
    int64_t W = (int64_t)heads * hd;
    bool interleaved = f->c->rope_style == TS_ROPE_INTERLEAVED;
    const float *cosv = f->a->rope, *sinv = f->a->rope + (int64_t)S * half;
    TS_MODEL_OMP(parallel for num_threads(f->threads) if(f->par) schedule(static))
    for (int64_t bs = 0; bs < (int64_t)f->B * S; bs++) {
        int64_t b = bs / S, p = bs % S;
        for (int h = 0; h < heads; h++) {
            const float *in = x->base + b * x->bstride + h * x->hstride + p * x->ld;
            float *out = dst + bs * W + (int64_t)h * hd;
            for (int i = 0; i < half; i++) {
                int lo = interleaved ? 2 * i : i, hi = interleaved ? 2 * i + 1 : i + half;
                float c = cosv[p * half + i], sn = sinv[p * half + i];
                out[lo] = in[lo] * c - in[hi] * sn;
                out[hi] = in[hi] * c + in[lo] * sn;
            }
            for (int d = r; d < hd; d++) out[d] = in[d];
        }
    }
}

/* q_rot and k_rot: q and k turned by RoPE, handed over, and read from then on. */
static ts_status rotary(fwd *f, attn_step *s, int S) {
    int64_t rows = (int64_t)f->B * S;
    float *qr = s->buf.rot, *kr = at(qr, rows * f->Q);
    if (!f->dry) rotate(f, &s->q, f->H, S, qr);
    s->q = (heads_at){qr, S * (int64_t)f->Q, f->hd, f->Q};
    ts_tensor t = heads_view(f, &s->q, f->H, S);
    TS_TRY(fwd_emit(f, s->name, "q_rot", TS_OP_ROPE, &t, TS_TAG_HEADS, false));
    int kw = f->KV * f->hd;
    if (!f->dry) rotate(f, &s->k, f->KV, S, kr);
    s->k = (heads_at){kr, S * (int64_t)kw, f->hd, kw};
    t = heads_view(f, &s->k, f->KV, S);
    return fwd_emit(f, s->name, "k_rot", TS_OP_ROPE, &t, TS_TAG_HEADS, false);
}

/* A self-attention's q, k and v: packed (seed 000, GPT-2, GPT-NeoX) or apart
 * (Llama), turned by RoPE when the model's positions are rotations.
 * Decoding appends the new k and v to the cache and reads every cached one. */
static ts_status qkv_projection(fwd *f, attn_step *s, const float *x, int S) {
    s->flops0 = f->flops;
    TS_TRY(f->c->split_qkv ? split_projection(f, s, x, S) : packed_projection(f, s, x, S));
    if (f->c->pe == TS_PE_ROPE) TS_TRY(rotary(f, s, S));
    s->Sq = s->Sk = S;
    if (s->cache_k) {
        if (!f->dry) fwd_cache_append(f, s, S, &s->k, &s->v);
        s->Sk = f->pos0 + S;
    }
    return TS_OK;
}

/* Cross-attention's projections: q from the decoder (B, T, D), k and v from
 * the memory (B, S, D). q_proj (B, T, D) -> q_heads (B, T, H, hd) -> q
 * (B, H, T, hd); kv (B, S, 2D) -> kv_heads (B, S, H, 2hd) -> kv_perm
 * (B, H, S, 2hd) -> k, v. */
static ts_status cross_projections(fwd *f, attn_step *s, const float *x, int T) {
    int64_t B = f->B, D = f->D, H = f->H, hd = f->hd, S = s->Sk;
    const ts_attn_weights *w = s->w;
    float *qp = s->buf.q, *kv = s->buf.kv;
    s->flops0 = f->flops;
    linear(f, qp, x, B * T, (int)D, (int)D, w->in_w, w->in_b, (int)D, TS_EPI_BIAS);
    ts_tensor t = view3(qp, B, T, D);
    TS_TRY(fwd_emit(f, s->name, "q_proj", TS_OP_LINEAR, &t, TS_TAG_PLAIN, false));
    t = view(qp, 4, (int64_t[]){B, T, H, hd}, NULL);
    TS_TRY(fwd_emit(f, s->name, "q_heads", TS_OP_RESHAPE, &t, TS_TAG_PLAIN, false));
    s->q = (heads_at){qp, T * D, hd, (int)D};
    t = heads_view(f, &s->q, (int)H, T);
    TS_TRY(fwd_emit(f, s->name, "q", TS_OP_PERMUTE, &t, TS_TAG_HEADS, false));
    linear(f, kv, s->mem, B * S, (int)D, (int)(2 * D), cat(w->in_w, D * D), cat(w->in_b, D), (int)D, TS_EPI_BIAS);
    t = view3(kv, B, S, 2 * D);
    TS_TRY(fwd_emit(f, s->name, "kv", TS_OP_LINEAR, &t, TS_TAG_PLAIN, false));
    t = view(kv, 4, (int64_t[]){B, S, H, 2 * hd}, NULL);
    TS_TRY(fwd_emit(f, s->name, "kv_heads", TS_OP_RESHAPE, &t, TS_TAG_PLAIN, false));
    t = view(kv, 4, (int64_t[]){B, H, S, 2 * hd}, (int64_t[]){S * 2 * D, 2 * hd, 2 * D, 1});
    TS_TRY(fwd_emit(f, s->name, "kv_perm", TS_OP_PERMUTE, &t, TS_TAG_HEADS, false));
    s->k = (heads_at){kv, S * 2 * D, 2 * hd, (int)(2 * D)};
    s->v = s->k;
    s->v.base = cat(kv, hd);
    s->Sq = T;
    return TS_OK;
}

/* Attention over the projected heads: k and v handed over as views of their
 * projection (or the cache), then softmax(q k^T / sqrt(hd) + mask) v. */
static ts_status attention(fwd *f, attn_step *s) {
    int kv = s->mem ? f->H : f->KV; /* cross-attention's memory has every head */
    ts_tensor t = heads_view(f, &s->k, kv, s->Sk);
    TS_TRY(fwd_emit(f, s->name, "k", TS_OP_CHUNK, &t, TS_TAG_HEADS, false));
    t = heads_view(f, &s->v, kv, s->Sk);
    TS_TRY(fwd_emit(f, s->name, "v", TS_OP_CHUNK, &t, TS_TAG_HEADS, false));
    attn_job j = {&s->q, &s->k, &s->v, s->Sq, s->Sk, f->H, f->hd, f->Q, f->H / kv, s->buf.att, s->buf.ctx,
                  s->key_mask, s->causal};
    return sdpa(f, s->name, &j);
}

/* out (B, Sq, D) = values (B, Sq, H*hd) W_o^T + b_o: the attention module's output. */
static ts_status out_projection(fwd *f, const attn_step *s, float *out) {
    int64_t B = f->B, D = f->D;
    linear(f, out, s->buf.ctx, B * s->Sq, f->Q, (int)D, s->w->out_w, s->w->out_b, f->Q, TS_EPI_BIAS);
    ts_tensor t = view3(out, B, s->Sq, D);
    TS_TRY(fwd_emit(f, s->name, "out", TS_OP_LINEAR, &t, TS_TAG_PLAIN, false));
    return fwd_module_done(f, s->name, s->params, &t, s->flops0);
}

/* A whole self-attention: projection, attention, output projection. */
static ts_status self_attention(fwd *f, attn_step *s, const float *x, int S, float *out) {
    TS_TRY(qkv_projection(f, s, x, S));
    TS_TRY(attention(f, s));
    return out_projection(f, s, out);
}

/* ---- feed-forward ------------------------------------------------------------------ */

/* out = linear2(dropout(act(linear1(x)))); traces hidden, act, dropout, out.
 * hidden and act are one buffer unless the backward keeps GELU's input
 * (kept: act apart). Returns the inner dropout's key. */
typedef void (*activation_fn)(float *out, const float *in, int64_t n);

static activation_fn activation_of(ts_activation act) {
    switch (act) {
    case TS_ACT_GELU: return ts_gelu;
    case TS_ACT_GELU_TANH: return ts_gelu_tanh;
    case TS_ACT_SILU: return ts_silu;
    case TS_ACT_RELU: break;
    }
    return ts_relu;
}

/* The GEMM epilogue that applies `act` as the product is stored, bias or
 * not; TS_EPI_NONE when none can (the ReLU and exact GELU epilogues of the
 * micro-kernels need a bias). Fused or not, the numbers are the same. */
static ts_epilogue fused_epilogue(ts_activation act, bool bias) {
    switch (act) {
    case TS_ACT_GELU_TANH: return TS_EPI_BIAS_GELU_TANH;
    case TS_ACT_SILU: return TS_EPI_BIAS_SILU;
    case TS_ACT_GELU: return bias ? TS_EPI_BIAS_GELU : TS_EPI_NONE;
    case TS_ACT_RELU: break;
    }
    return bias ? TS_EPI_BIAS_RELU : TS_EPI_NONE;
}

static ts_op activation_op(ts_activation act) {
    return act == TS_ACT_RELU ? TS_OP_RELU : act == TS_ACT_SILU ? TS_OP_SILU : TS_OP_GELU;
}

/* A gated FFN (SwiGLU with silu, GeGLU with gelu): out = down(act(gate(x)) * up(x)),
 * where gate and up are (B, S, F) side by side in the scratch area. Traces
 * gate, act, up, gated (act * up), dropout, out, each read only after it is
 * handed over. act, then the gated product, go to a buffer of their own when
 * training keeps one (the backward reads the gate's input and up); inference
 * writes them over the gate. */
static ts_status gated_ffn(fwd *f, const ffn_step *s, const float *x, int S, float *out) {
    const char *prefix = s->name;
    const ts_ffn_weights *w = s->w;
    double flops0 = f->flops;
    int64_t B = f->B, D = f->D, F = f->c->ffn, n = B * S * F;
    float *gate = s->buf.hidden, *up = at(gate, n);
    float *acted = s->buf.act != s->buf.hidden ? s->buf.act : gate;
    /* the gate's activation in its GEMM's epilogue, unless someone watches
     * the gate or its activation, or the backward keeps the gate apart */
    static const char *const inner[] = {"gate", "act", NULL};
    ts_epilogue fused = fused_epilogue(f->c->activation, w->bg != NULL);
    /* (exact GELU's epilogue in the micro-kernels rounds apart from ts_gelu in the last bit: not fused here) */
    if (fwd_watches(f, prefix, inner) || acted != gate || fused == TS_EPI_BIAS_GELU) fused = TS_EPI_NONE;
    linear(f, gate, x, B * S, (int)D, (int)F, w->wg, w->bg, (int)D, fused ? fused : TS_EPI_BIAS);
    ts_tensor t = view3(gate, B, S, F);
    TS_TRY(fwd_emit(f, prefix, "gate", TS_OP_LINEAR, &t, TS_TAG_PLAIN, false));
    if (!f->dry && !fused) activation_of(f->c->activation)(acted, gate, n);
    ts_tensor ta = view3(acted, B, S, F);
    TS_TRY(fwd_emit(f, prefix, "act", activation_op(f->c->activation), &ta, TS_TAG_PLAIN, false));
    linear(f, up, x, B * S, (int)D, (int)F, w->w1, w->b1, (int)D, TS_EPI_BIAS);
    t = view3(up, B, S, F);
    TS_TRY(fwd_emit(f, prefix, "up", TS_OP_LINEAR, &t, TS_TAG_PLAIN, false));
    if (!f->dry) ts_mul(acted, acted, up, n);
    TS_TRY(fwd_emit(f, prefix, "gated", TS_OP_MUL, &ta, TS_TAG_PLAIN, false));
    *s->key = dropout(f, acted, acted, n);
    TS_TRY(fwd_emit(f, prefix, "dropout", TS_OP_DROPOUT, &ta, TS_TAG_PLAIN, !f->train));
    linear(f, out, acted, B * S, (int)F, (int)D, w->w2, w->b2, (int)F, TS_EPI_BIAS);
    t = view3(out, B, S, D);
    TS_TRY(fwd_emit(f, prefix, "out", TS_OP_LINEAR, &t, TS_TAG_PLAIN, false));
    return fwd_module_done(f, prefix, s->params, &t, flops0);
}

static ts_status ffn(fwd *f, const ffn_step *s, const float *x, int S, float *out) {
    if (f->c->gated_ffn) return gated_ffn(f, s, x, S, out);
    const char *prefix = s->name;
    const ts_ffn_weights *w = s->w;
    ts_kept_ffn buf = s->buf;
    double flops0 = f->flops;
    int64_t B = f->B, D = f->D, F = f->c->ffn, n = B * S * F;
    ts_activation act = f->c->activation;
    bool gelu = act != TS_ACT_RELU; /* (or silu: no ReLU's shortcuts) */
    activation_fn activate = activation_of(act);
    float *hidden = buf.hidden, *acted = buf.act;
    /* the GEMM applies the activation as it stores (with its bias), unless
     * someone watches the hidden layer or the backward reads GELU's input */
    static const char *const inner[] = {"hidden", "act", NULL};
    bool watch = fwd_watches(f, prefix, inner);
    ts_epilogue fused = fused_epilogue(act, w->b1 != NULL);
    bool unfused = watch || (gelu && acted != hidden) || !fused;
    linear(f, hidden, x, B * S, (int)D, (int)F, w->w1, w->b1, (int)D, unfused ? TS_EPI_BIAS : fused);
    const float *made = hidden; // the activation's output so far
    ts_tensor t = view3(hidden, B, S, F);
    if (watch) {
        /* hidden and its ReLU at once, before the ReLU is made: a trace writer
         * then reads hidden's memory once for the statistics of both. */
        const ts_hook_step pair[] = {{"hidden", TS_OP_LINEAR, &t, TS_TAG_PLAIN, false},
                                     {"act", TS_OP_RELU, &t, TS_TAG_PLAIN, true}};
        bool paired = false;
        if (!gelu && acted == hidden) TS_TRY(fwd_offer_group(f, prefix, pair, 2, &paired));
        if (!paired) TS_TRY(fwd_emit(f, prefix, "hidden", TS_OP_LINEAR, &t, TS_TAG_PLAIN, false));
        if (!f->dry) activate(acted, hidden, n);
        made = acted;
        t = view3(acted, B, S, F);
        /* ReLU's output is its input through ReLU, which a trace can store as
         * a view of the input's values; GELU's a reader could not redo to the bit. */
        if (!paired)
            TS_TRY(fwd_emit_like(f, prefix, "act", activation_op(act), &t, TS_TAG_PLAIN, false, NULL,
                             gelu ? 0.0f : 1.0f));
    } else if (unfused) {
        if (!f->dry) activate(acted, hidden, n);
        made = acted;
    }
    *s->key = dropout(f, acted, made, n);
    t = view3(acted, B, S, F);
    TS_TRY(fwd_emit(f, prefix, "dropout", TS_OP_DROPOUT, &t, TS_TAG_PLAIN, !f->train));
    linear(f, out, acted, B * S, (int)F, (int)D, w->w2, w->b2, (int)F, TS_EPI_BIAS);
    t = view3(out, B, S, D);
    TS_TRY(fwd_emit(f, prefix, "out", TS_OP_LINEAR, &t, TS_TAG_PLAIN, false));
    return fwd_module_done(f, prefix, s->params, &t, flops0);
}

/* ---- layers ------------------------------------------------------------------------ */

/* The norm before sublayer k: pre-LN (seed 004, GPT) normalises the stream
 * the sublayer reads; post-LN (seed 000, the paper) reads the stream as it
 * is, its norm comes after the residual (residual_after). */
static ts_status norm_before(fwd *f, residual_step *r, const float *x, int S, const float **h) {
    *h = x;
    if (f->c->norm == TS_NORM_POST) return TS_OK;
    TS_TRY(norm(f, &r->norm, x, S));
    *h = r->norm.out;
    return TS_OK;
}

/* The stream after a sublayer: x + dropout(sub) (sub alone with the
 * no-residual variant), and in post-LN the norm of that sum. */
static ts_status residual_after(fwd *f, residual_step *r, const float *x, int S, const float **y) {
    int64_t n = (int64_t)f->B * S * f->D;
    uint64_t key = dropout(f, r->sub, r->sub, n);
    skip_add(f, r->sum, x, r->sub, n);
    if (r->kept) r->kept->key = key, r->kept->key_inner = r->key_inner;
    *y = r->sum;
    if (f->c->norm == TS_NORM_PRE) return TS_OK;
    TS_TRY(norm(f, &r->norm, r->sum, S));
    *y = r->norm.out;
    return TS_OK;
}

/* GPT-NeoX's parallel residual: x + dropout(attn) + dropout(ffn), both
 * sublayers having read the same x. */
static void parallel_sum(fwd *f, residual_step *r, const float *x, int S, const float **y) {
    int64_t n = (int64_t)f->B * S * f->D;
    dropout(f, r[0].sub, r[0].sub, n);
    dropout(f, r[1].sub, r[1].sub, n);
    if (!f->dry) {
        ts_add(r[1].sum, x, r[0].sub, n);
        ts_add(r[1].sum, r[1].sum, r[1].sub, n);
    }
    *y = r[1].sum;
}

/* The layer's output, handed over as its own step: in post-LN it is the
 * last norm's out under another name. */
static ts_status layer_out(fwd *f, const block *b, const float *x, const float **y) {
    ts_tensor t = view3(x, f->B, b->S, f->D);
    *y = x;
    if (f->c->norm == TS_NORM_POST) return fwd_emit(f, b->nm.p, "out", TS_OP_LAYERNORM, &t, TS_TAG_PLAIN, true);
    return fwd_emit(f, b->nm.p, "out", skip_op(f), &t, TS_TAG_PLAIN, false);
}

/* Seed 004's TransformerEncoderBlock as written (variant seed004-residual):
 * h = norm1(x); attn(h) is computed and dropped; x = x + dropout(x);
 * x = norm2(x); x = x + ffn(x); x = dropout(x). Same step names as pre-LN.
 * Inference only (training runs the correct model). */
static ts_status self_attn_layer_seed004(fwd *f, int i, const ts_self_attn_layer_weights *w, const float *in, float *out) {
    int S = f->S;
    int64_t n = (int64_t)f->B * S * f->D;
    float *tmp = f->a->tmp;
    block b;
    fwd_self_attn_block(f, &b, i, w, in, out);
    b.res[1].norm.out = out;
    TS_TRY(norm(f, &b.res[0].norm, in, S));
    TS_TRY(self_attention(f, &b.attn[0], tmp, S, tmp));
    if (!f->dry) memcpy(tmp, in, sizeof(float) * (size_t)n); // the attention output is overwritten unused
    dropout(f, tmp, tmp, n);
    if (!f->dry) ts_add(out, in, tmp, n);
    TS_TRY(norm(f, &b.res[1].norm, out, S));
    TS_TRY(ffn(f, &b.ffn, out, S, tmp));
    if (!f->dry) ts_add(out, out, tmp, n);
    dropout(f, out, out, n);
    ts_tensor t = view3(out, f->B, S, f->D);
    return fwd_emit(f, b.nm.p, "out", TS_OP_ADD, &t, TS_TAG_PLAIN, false);
}

/* Layer i of a self-attention stack (an encoder's, or a GPT's decoder.layers),
 * in -> *y (the stream in out, or kept), with dropout on each sublayer's output:
 *   pre-LN:  x = x + attn(norm1(x));  x = x + ffn(norm2(x))
 *   post-LN: x = norm1(x + attn(x));  x = norm2(x + ffn(x))
 * fwd_self_attn_block (model_pass.c) says where each value goes. */
static ts_status self_attn_layer(fwd *f, int i, const ts_self_attn_layer_weights *w, const float *in, float *out,
                                 const float **y) {
    if (f->c->norm == TS_NORM_PRE && (f->c->variants & TS_VARIANT_SEED004_RESIDUAL)) {
        *y = out;
        return self_attn_layer_seed004(f, i, w, in, out);
    }
    block b;
    fwd_self_attn_block(f, &b, i, w, in, out);
    residual_step *r = b.res;
    int S = b.S;
    const float *x = in, *h;
    if (f->c->parallel_residual) {                // GPT-NeoX: both sublayers read x
        TS_TRY(norm_before(f, &r[0], x, S, &h));  // h = norm1(x)
        TS_TRY(qkv_projection(f, &b.attn[0], h, S));
        TS_TRY(attention(f, &b.attn[0]));
        TS_TRY(out_projection(f, &b.attn[0], r[0].sub)); // a = attn(h)
        TS_TRY(norm_before(f, &r[1], x, S, &h));  // h = norm2(x)
        TS_TRY(ffn(f, &b.ffn, h, S, r[1].sub));   // m = ffn(h)
        parallel_sum(f, r, x, S, &x);             // x = x + a + m
        return layer_out(f, &b, x, y);
    }
    TS_TRY(norm_before(f, &r[0], x, S, &h));      // h = norm1(x)             (pre-LN)
    TS_TRY(qkv_projection(f, &b.attn[0], h, S));  // q, k, v = h W_qkv + b
    TS_TRY(attention(f, &b.attn[0]));             // softmax(q k^T / sqrt(hd) + mask) v
    TS_TRY(out_projection(f, &b.attn[0], r[0].sub)); // a = values W_o + b
    TS_TRY(residual_after(f, &r[0], x, S, &x));   // x = x + a                (post-LN: norm1)
    TS_TRY(norm_before(f, &r[1], x, S, &h));      // h = norm2(x)             (pre-LN)
    TS_TRY(ffn(f, &b.ffn, h, S, r[1].sub));       // m = W2 act(W1 h + b1) + b2
    TS_TRY(residual_after(f, &r[1], x, S, &x));   // x = x + m                (post-LN: norm2)
    return layer_out(f, &b, x, y);
}

/* Layer i of the encoder-decoder's decoder: masked self-attention,
 * cross-attention over the memory (B, S, D), FFN; in -> *y as above. */
static ts_status cross_attn_layer(fwd *f, int i, const ts_cross_attn_layer_weights *w, const float *in, const float *mem,
                                  float *out, const float **y) {
    block b;
    fwd_cross_attn_block(f, &b, i, w, mem, in, out);
    residual_step *r = b.res;
    int T = b.S;
    const float *x = in, *h;
    TS_TRY(norm_before(f, &r[0], x, T, &h));      // h = norm1(x)             (pre-LN)
    TS_TRY(qkv_projection(f, &b.attn[0], h, T));  // q, k, v = h W_qkv + b
    TS_TRY(attention(f, &b.attn[0]));             // causal self-attention
    TS_TRY(out_projection(f, &b.attn[0], r[0].sub)); // a = values W_o + b
    TS_TRY(residual_after(f, &r[0], x, T, &x));   // x = x + a                (post-LN: norm1)
    TS_TRY(norm_before(f, &r[1], x, T, &h));      // h = norm2(x)             (pre-LN)
    TS_TRY(cross_projections(f, &b.attn[1], h, T)); // q = h W_q + b; k, v = memory W_kv + b
    TS_TRY(attention(f, &b.attn[1]));             // attention over the memory
    TS_TRY(out_projection(f, &b.attn[1], r[1].sub)); // c = values W_o + b
    TS_TRY(residual_after(f, &r[1], x, T, &x));   // x = x + c                (post-LN: norm2)
    TS_TRY(norm_before(f, &r[2], x, T, &h));      // h = norm3(x)             (pre-LN)
    TS_TRY(ffn(f, &b.ffn, h, T, r[2].sub));       // m = W2 act(W1 h + b1) + b2
    TS_TRY(residual_after(f, &r[2], x, T, &x));   // x = x + m                (post-LN: norm3)
    return layer_out(f, &b, x, y);
}

/* ---- embeddings -------------------------------------------------------------------- */

typedef struct embed_step {
    const char *name;       // "embed", "decoder.embed"
    const char *input_name; // "input", "decoder.input"
    const ts_embed_weights *w;
    bool tokens;
    const int32_t *ids;     // (B, S) when tokens
    const float *vecs;      // (B, S, D) otherwise
    int S;
    float *dst;             // the stream (B, S, D)
    ts_kept_embed *kept;    // training, or NULL
    const int32_t *types;   // (B, S) token types (BERT's token_type_ids), or NULL: all 0
} embed_step;

/* BERT's token types: the ids (B, S) handed over as `token_type_ids` (an
 * input, as `input` is), then their rows of the type table added to the
 * token embeddings in sum (B, S, D) as the step embed.token_types, made in
 * scratch (ctx, unused until the first attention), handed over, then read. */
static ts_status add_token_types(fwd *f, const embed_step *e, float *sum) {
    int64_t B = f->B, D = f->D, S = e->S;
    ts_model_acts *a = f->a;
    float *rows = a->ctx;
    if (!f->dry)
        for (int64_t i = 0; i < B * S; i++) a->types[i] = e->types ? (float)e->types[i] : 0.0f;
    ts_tensor t = view(a->types, 2, (int64_t[]){B, S}, NULL);
    TS_TRY(fwd_emit(f, NULL, "token_type_ids", TS_OP_INPUT, &t, TS_TAG_PLAIN, false));
    if (!f->dry) {
        const float *table = e->w->types;
        TS_MODEL_OMP(parallel for num_threads(f->threads) if(f->par) schedule(static))
        for (int64_t i = 0; i < B * S; i++) {
            int64_t type = e->types ? e->types[i] : 0;
            memcpy(rows + i * D, table + type * D, sizeof(float) * (size_t)D);
        }
    }
    t = view3(rows, B, S, D);
    TS_TRY(fwd_emit(f, e->name, "token_types", TS_OP_EMBED, &t, TS_TAG_PLAIN, false));
    if (!f->dry) ts_add(sum, sum, rows, B * S * D);
    return TS_OK;
}

/* Token ids or given vectors -> the stream. *res is where the result is: dst
 * (or the kept buffer), or the caller's vectors when nothing is added.
 * Traces `input`, then embed.tokens (E[id], times sqrt(D) when scaled),
 * embed.pe (S, D), and embed.out; learned positions go through embed.norm
 * (but a GPT's). Decoding adds the positions from pos0 on. */
static ts_status embed(fwd *f, const embed_step *e, const float **res) {
    const ts_model_config *c = f->c;
    int64_t B = f->B, D = f->D, S = e->S;
    ts_model_acts *a = f->a;
    ts_kept_embed *k = e->kept;
    double flops0 = f->flops;
    char params[TS_MODEL_NAME_MAX];
    snprintf(params, sizeof params, "%s.", e->name);
    if (k) {
        k->used = true;
        k->vecs = e->tokens ? NULL : e->vecs;
        k->key = 0;
    }
    ts_tensor t;
    if (e->tokens) {
        if (!f->dry)
            for (int64_t i = 0; i < B * S; i++) a->ids[i] = (float)e->ids[i];
        if (k && !f->dry) memcpy(k->ids, e->ids, sizeof(int32_t) * (size_t)(B * S));
        t = view(a->ids, 2, (int64_t[]){B, S}, NULL);
    } else {
        t = view3(e->vecs, B, S, c->arch == TS_ARCH_ATTENTION && c->in_dim ? c->in_dim : D);
    }
    TS_TRY(fwd_emit(f, NULL, e->input_name, TS_OP_INPUT, &t, TS_TAG_PLAIN, false));
    bool added = c->pe == TS_PE_SINUSOIDAL || c->pe == TS_PE_LEARNED; /* RoPE turns q and k instead */
    if (!e->tokens && !added) { // seed 000: the input is the embedding
        *res = e->vecs;
        return TS_OK;
    }
    bool learned = c->pe == TS_PE_LEARNED, normed = ts_model_embed_norm(c);
    float *out = k ? k->out : e->dst;
    float *sum = k ? k->sum : normed ? a->tmp : out;
    if (e->tokens) {
        float s = c->scale_embed ? sqrtf((float)D) : 1.0f;
        if (!f->dry) {
            const float *table = e->w->tokens;
            const int32_t *ids = e->ids;
            TS_MODEL_OMP(parallel for num_threads(f->threads) if(f->par) schedule(static))
            for (int64_t i = 0; i < B * S; i++)
                for (int64_t j = 0; j < D; j++) sum[i * D + j] = table[(int64_t)ids[i] * D + j] * s;
        }
        t = view3(sum, B, S, D);
        TS_TRY(fwd_emit(f, e->name, "tokens", TS_OP_EMBED, &t, TS_TAG_PLAIN, false));
        if (c->type_vocab) TS_TRY(add_token_types(f, e, sum)); /* (an encoder's one embedding: check_bert) */
    } else if (!f->dry) {
        memcpy(sum, e->vecs, sizeof(float) * (size_t)(B * S * D));
    }
    if (added) {
        const float *pe = cat(learned ? e->w->positions : a->pe, (int64_t)f->pos0 * D);
        if (ts_hook_edits(f->hook) && !f->dry) { /* an edit changes this pass's positions, not the model's table */
            memcpy(a->big, pe, sizeof(float) * (size_t)(S * D));
            pe = a->big;
        }
        t = view((float *)pe, 2, (int64_t[]){S, D}, NULL);
        TS_TRY(fwd_emit(f, e->name, "pe", learned ? TS_OP_EMBED : TS_OP_POSENC, &t, TS_TAG_POSENC, false));
        if (!f->dry) {
            TS_MODEL_OMP(parallel for num_threads(f->threads) if(f->par) schedule(static))
            for (int64_t i = 0; i < B * S; i++)
                for (int64_t j = 0; j < D; j++) sum[i * D + j] += pe[(i % S) * D + j];
        }
    }
    const float *made = sum;
    if (normed) {
        char np[TS_MODEL_NAME_MAX], npp[TS_MODEL_NAME_MAX + 1];
        snprintf(np, sizeof np, "%s.norm", e->name);
        snprintf(npp, sizeof npp, "%s.", np);
        norm_step n = {np,  npp, &e->w->norm, c->embed_eps, TS_OP_ADD, false, k ? k->norm.out : out,
                       k ? k->norm.mean : a->mean, k ? k->norm.rstd : a->rstd};
        TS_TRY(norm(f, &n, sum, (int)S));
        made = n.out;
    }
    uint64_t key = dropout(f, out, made, B * S * D);
    if (k) k->key = key;
    t = view3(out, B, S, D);
    /* Without dropout, embed.out is the norm's out (BERT's learned positions) or the tokens (no positions). */
    TS_TRY(fwd_emit(f, e->name, "out", added ? TS_OP_ADD : TS_OP_EMBED, &t, TS_TAG_PLAIN,
                (normed || !added) && !f->train));
    *res = out;
    return fwd_module_done(f, e->name, params, &t, flops0);
}

/* ---- the stacks and heads ---------------------------------------------------------- */

/* The stack's closing LayerNorm (nn.TransformerEncoder's `norm`), *x -> buf
 * (or the kept norm). */
static ts_status final_norm(fwd *f, const char *stack, const ts_norm_weights *w, const float **x, float *buf, int S,
                            ts_kept_norm *kept) {
    if (!f->c->final_norm) return TS_OK;
    char n[TS_MODEL_NAME_MAX], np[TS_MODEL_NAME_MAX + 1];
    snprintf(n, sizeof n, "%s.norm", stack);
    snprintf(np, sizeof np, "%s.", n);
    norm_step ns = {n,  np, w, f->c->eps, TS_OP_INPUT, true, kept ? kept->out : buf, kept ? kept->mean : f->a->mean,
                    kept ? kept->rstd : f->a->rstd};
    TS_TRY(norm(f, &ns, *x, S));
    *x = ns.out;
    return TS_OK;
}

/* BERT's masked-LM transform (BertPredictionHeadTransform) between the
 * encoder and the decoder: h = LayerNorm(act(x W^T + b)), traced as
 * mlm.dense, mlm.act and mlm.norm.*, each read only after it is handed
 * over; *x then points at h. The stream x is in a->x (or a kept buffer), so
 * tmp and ctx are free. */
static ts_status mlm_transform(fwd *f, const float **x, int S) {
    const ts_model_config *c = f->c;
    ts_model_acts *a = f->a;
    const ts_model_weights *w = &f->m->w;
    int64_t B = f->B, D = f->D;
    double flops0 = f->flops;
    float *h = a->tmp;
    linear(f, h, *x, B * S, (int)D, (int)D, w->mlm_w, w->mlm_b, (int)D, TS_EPI_BIAS);
    ts_tensor t = view3(h, B, S, D);
    TS_TRY(fwd_emit(f, "mlm", "dense", TS_OP_LINEAR, &t, TS_TAG_PLAIN, false));
    if (!f->dry) activation_of(c->activation)(h, h, B * S * D);
    TS_TRY(fwd_emit(f, "mlm", "act", activation_op(c->activation), &t, TS_TAG_PLAIN, false));
    norm_step n = {"mlm.norm", "mlm.norm.", &w->mlm_norm, c->eps, activation_op(c->activation), true, a->ctx,
                   a->mean, a->rstd};
    TS_TRY(norm(f, &n, h, S));
    *x = n.out;
    t = view3(n.out, B, S, D);
    return fwd_module_done(f, "mlm", "mlm.", &t, flops0);
}

static ts_status head(fwd *f, const float *x, int S, ts_tensor *out) {
    const ts_model_config *c = f->c;
    ts_model_acts *a = f->a;
    ts_model_weights *w = &f->m->w;
    int64_t B = f->B, D = f->D;
    float *logits = f->keep ? f->keep->logits : a->logits;
    if (c->head == TS_HEAD_LM && c->mlm_head) TS_TRY(mlm_transform(f, &x, S));
    double flops0 = f->flops;
    if (c->head == TS_HEAD_LM) {
        linear(f, logits, x, B * S, (int)D, c->vocab, w->head_w, w->head_b, (int)D, TS_EPI_BIAS);
        *out = view3(logits, B, S, c->vocab);
        TS_TRY(fwd_emit(f, NULL, "logits", TS_OP_LINEAR, out, TS_TAG_LOGITS, false));
        /* tied: the table is counted once, under embed */
        return fwd_module_done(f, "generator", "generator.", out, flops0);
    }
    /* seed 004: encoder(x)[:, 0, :], dropout, classifier */
    float *cls = f->keep ? f->keep->cls : a->cls;
    if (!f->dry)
        for (int64_t b = 0; b < B; b++) memcpy(cls + b * D, x + b * S * D, sizeof(float) * (size_t)D);
    ts_tensor t = view(cls, 2, (int64_t[]){B, D}, NULL);
    TS_TRY(fwd_emit(f, NULL, "cls", TS_OP_CHUNK, &t, TS_TAG_PLAIN, false));
    uint64_t key = dropout(f, cls, cls, B * D);
    if (f->keep) f->keep->cls_key = key;
    linear(f, logits, cls, B, (int)D, c->n_labels, w->head_w, w->head_b, (int)D, TS_EPI_BIAS);
    *out = view(logits, 2, (int64_t[]){B, c->n_labels}, NULL);
    TS_TRY(fwd_emit(f, NULL, "logits", TS_OP_LINEAR, out, TS_TAG_LOGITS, false));
    return fwd_module_done(f, "classifier", "classifier.", out, flops0);
}

/* What made a stack's last output: a LayerNorm, unless pre-LN ends on a residual add. */
static ts_op stack_op(const ts_model_config *c) {
    if (c->final_norm || c->norm == TS_NORM_POST) return c->norm_kind == TS_NORMK_LAYER ? TS_OP_LAYERNORM : TS_OP_RMS;
    return c->variants & TS_VARIANT_NO_RESIDUAL ? TS_OP_DROPOUT : TS_OP_ADD;
}

static ts_status check_ids(const int32_t *ids, int64_t n, int vocab, const char *what) {
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            return ts_fail(TS_ERR_ARG, "%s id %d at position %lld is outside the vocabulary [0, %d)", what,
                           (int)ids[i], (long long)i, vocab);
    return TS_OK;
}

/* RoPE's angles at positions pos0 .. pos0 + S - 1: table (S, r/2) of cos,
 * then (S, r/2) of sin, angle = p * theta^(-2i / r) for pair i of the r
 * rotated dims (computed in double, as a reference would). */
void ts_model_rope_table(float *table, const ts_model_config *c, int pos0, int S) {
    int r = ts_model_rotary_dims(c), half = r / 2;
    double theta = ts_model_rope_theta(c);
    for (int p = 0; p < S; p++)
        for (int i = 0; i < half; i++) {
            double angle = (double)(pos0 + p) * pow(theta, -2.0 * i / r);
            table[(int64_t)p * half + i] = (float)cos(angle);
            table[(int64_t)S * half + (int64_t)p * half + i] = (float)sin(angle);
        }
}

/* An additive key mask: -inf at pads, or seed 003's -1e9. */
static void build_mask(float *mask, const uint8_t *pad, int64_t n, float fill) {
    for (int64_t i = 0; i < n; i++) mask[i] = pad && pad[i] ? fill : 0.0f;
}

/* A padding mask the input gives, handed to the hook as 0/1 (B, S) before the
 * steps it shapes, so a reader knows which rows are padding (PyTorch leaves
 * the output at padded queries unspecified; the viewer draws them as pads). */
static ts_status emit_pads(fwd *f, const char *name, const uint8_t *pad, int S) {
    if (!pad) return TS_OK;
    int64_t n = (int64_t)f->B * S;
    float *p = f->a->pads;
    if (!f->dry)
        for (int64_t i = 0; i < n; i++) p[i] = pad[i] ? 1.0f : 0.0f;
    ts_tensor t = view(p, 2, (int64_t[]){f->B, S}, NULL);
    return fwd_emit(f, NULL, name, TS_OP_MASK, &t, TS_TAG_PLAIN, false);
}

static ts_status check_input(const fwd *f, const ts_model_input *in) {
    const ts_model *m = f->m;
    const ts_model_config *c = &m->cfg;
    bool encdec = c->arch == TS_ARCH_ENCODER_DECODER;
    if (!m->dry && !(encdec && in->memory)) {
        if (c->input == TS_INPUT_TOKENS && !in->src_ids && !in->src_embedded)
            return ts_fail(TS_ERR_ARG, "model: the source needs token ids");
        if (c->input == TS_INPUT_EMBEDDED && !in->src_embedded)
            return ts_fail(TS_ERR_ARG, "model: the source needs vectors (B, S, %d)",
                           c->in_dim ? c->in_dim : c->d_model);
        if (in->src_ids) TS_TRY(check_ids(in->src_ids, (int64_t)f->B * f->S, c->vocab, "source"));
    }
    if (!m->dry && in->src_types) {
        if (!c->type_vocab)
            return ts_fail(TS_ERR_ARG, "model: token types given, but this model has no token type embeddings");
        for (int64_t i = 0; i < (int64_t)f->B * f->S; i++)
            if (in->src_types[i] < 0 || in->src_types[i] >= c->type_vocab)
                return ts_fail(TS_ERR_ARG, "token type %d at position %lld is not one of the model's %d (0 to %d)",
                               (int)in->src_types[i], (long long)i, c->type_vocab, c->type_vocab - 1);
    }
    if (!m->dry && encdec) {
        if (!in->tgt_ids && !in->tgt_embedded) return ts_fail(TS_ERR_ARG, "model: the decoder needs its input");
        if (in->tgt_ids && c->input != TS_INPUT_TOKENS)
            return ts_fail(TS_ERR_ARG, "model: this model's decoder reads vectors, not ids");
        if (in->tgt_ids) TS_TRY(check_ids(in->tgt_ids, (int64_t)f->B * f->T, c->vocab, "target"));
    }
    if (!encdec && (in->tgt_pad || in->mem_pad_set))
        return ts_fail(TS_ERR_ARG, "model: a %s padding mask needs a decoder; this model has none",
                       in->tgt_pad ? "target" : "memory");
    return TS_OK;
}

/* The forward pass: embeddings, the stacks, the head. Every path runs it:
 * inference and tracing (ts_model_forward), training keeping what the
 * backward reads (f->keep, ts_model_forward_keep) and decoding new positions
 * over cached keys and values (f->cache, ts_model_decode). */
static ts_status run(fwd *f, const ts_model_input *in, ts_tensor *out) {
    ts_model *m = f->m;
    const ts_model_config *c = f->c;
    ts_model_acts *a = f->a;
    ts_kept *keep = f->keep;
    int S = f->S, T = f->T;
    ts_model_input none;
    memset(&none, 0, sizeof none);
    if (!in) in = &none;
    TS_TRY(check_input(f, in));
    bool encdec = c->arch == TS_ARCH_ENCODER_DECODER;
    const uint8_t *mem_pad = encdec ? (in->mem_pad_set ? in->mem_pad : in->src_pad) : NULL;
    if (!f->dry) {
        float fill = c->variants & TS_VARIANT_SEED003_MASK ? SEED003_FILL : -INFINITY;
        build_mask(a->src_mask, in->src_pad, (int64_t)f->B * S, fill);
        if (a->tgt_mask) build_mask(a->tgt_mask, in->tgt_pad, (int64_t)f->B * T, fill);
        if (a->mem_mask) build_mask(a->mem_mask, mem_pad, (int64_t)f->B * S, fill);
        if (c->pe == TS_PE_ROPE) ts_model_rope_table(a->rope, c, f->pos0, S);
    }
    if (keep) {
        keep->dropout = f->p;
        keep->site = 0;
        keep->src.used = keep->tgt.used = false;
        keep->memory_given = encdec && in->memory;
    }
    /* Masks only where a position is padding: without pads, attention is unmasked. */
    const float *saved_src = a->src_mask, *saved_tgt = a->tgt_mask;
    if (!in->src_pad) a->src_mask = NULL;
    if (!in->tgt_pad) a->tgt_mask = NULL;
    f->mem_mask = mem_pad ? a->mem_mask : NULL;
    f->row_mask = c->mask == TS_MASK_PADDING_BOTH ? a->src_mask : NULL; // the encoder's pad queries
    ts_status st = emit_pads(f, "src_key_padding_mask", in->src_pad, S);
    if (!st && encdec) st = emit_pads(f, "tgt_key_padding_mask", in->tgt_pad, T);
    if (!st && encdec && in->mem_pad_set) st = emit_pads(f, "memory_key_padding_mask", in->mem_pad, S);
    if (st) goto done;
    const float *x = NULL;
    if (c->arch == TS_ARCH_ATTENTION) {
        int din = c->in_dim ? c->in_dim : f->D;
        embed_step e = {"embed", "input", &m->w.embed, false, NULL, in->src_embedded, S, a->x,
                        keep ? &keep->src : NULL, NULL};
        st = embed(f, &e, &x);
        attn_step at = {.name = "self_attn", .params = "self_attn.", .w = &m->w.attn, .key_mask = fwd_enc_key_mask(f),
                        .causal = c->causal, .din = din, .buf = keep ? keep->lone : fwd_scratch_attn(f, false, S, S)};
        float *o = keep ? keep->lone_out : a->x;
        if (!st) st = self_attention(f, &at, x, S, o);
        *out = view3(o, f->B, S, f->D);
        goto done;
    }
    const float *mem = in->memory;
    if (!(encdec && mem)) {
        bool tokens = c->input == TS_INPUT_TOKENS && !in->src_embedded;
        embed_step e = {"embed", "input", &m->w.embed, tokens, in->src_ids, in->src_embedded, S, a->x,
                        keep ? &keep->src : NULL, in->src_types};
        st = embed(f, &e, &x);
        for (int i = 0; !st && i < c->layers; i++) st = self_attn_layer(f, i, &m->w.layers[i], x, a->x, &x);
        const char *stack = ts_model_stack_name(c);
        char stack_out[16];
        snprintf(stack_out, sizeof stack_out, "%s.out", stack);
        if (keep) keep->enc_top = x;
        if (!st) st = final_norm(f, stack, &m->w.norm, &x, a->x, S, keep ? &keep->enc_norm : NULL);
        ts_tensor t = view3(x, f->B, S, f->D);
        if (!st) st = fwd_emit(f, NULL, stack_out, stack_op(c), &t, TS_TAG_PLAIN, true);
        mem = x;
        *out = t;
    }
    if (keep) keep->enc_out = mem;
    if (!st && encdec) {
        f->row_mask = NULL;
        const float *y = NULL;
        bool tokens = c->input == TS_INPUT_TOKENS && !in->tgt_embedded;
        embed_step e = {"decoder.embed", "decoder.input", &m->w.dec_embed, tokens, in->tgt_ids, in->tgt_embedded,
                        T, a->y, keep ? &keep->tgt : NULL, NULL};
        st = embed(f, &e, &y);
        for (int i = 0; !st && i < c->dec_layers; i++) st = cross_attn_layer(f, i, &m->w.cross_layers[i], y, mem, a->y, &y);
        if (keep) keep->dec_top = y;
        if (!st) st = final_norm(f, "decoder", &m->w.cross_norm, &y, a->y, T, keep ? &keep->dec_norm : NULL);
        if (keep) keep->dec_out = y;
        ts_tensor t = view3(y, f->B, T, f->D);
        if (!st) st = fwd_emit(f, NULL, "decoder.out", stack_op(c), &t, TS_TAG_PLAIN, true);
        x = y;
        *out = t;
    }
    if (!st && c->head != TS_HEAD_NONE) st = head(f, x, encdec ? T : S, out);
done:
    a->src_mask = (float *)saved_src;
    a->tgt_mask = (float *)saved_tgt;
    return st;
}

ts_status ts_model_forward(ts_model *m, const ts_model_input *in, const ts_hook *hook, ts_tensor *out) {
    if (m->dry) return ts_fail(TS_ERR_ARG, "model: a shapes-only model cannot run; use ts_model_dry_run");
    fwd f;
    fwd_setup(&f, m, m->acts, hook);
    m->empty_rows = 0;
    ts_tensor dummy;
    return run(&f, in, out ? out : &dummy);
}

ts_status ts_model_forward_keep(ts_model *m, const ts_model_input *in, const ts_hook *hook, ts_kept *keep,
                                ts_tensor *out) {
    if (m->dry) return ts_fail(TS_ERR_ARG, "model: a shapes-only model cannot run; use ts_model_dry_run");
    fwd f;
    fwd_setup(&f, m, m->acts, hook);
    f.keep = keep;
    m->empty_rows = 0;
    ts_tensor dummy;
    return run(&f, in, out ? out : &dummy);
}

ts_status ts_model_forward_cached(ts_model *m, ts_kv_cache *kv, ts_model_acts *a, const int32_t *ids, int n,
                                  const ts_hook *hook, ts_tensor *out) {
    fwd f;
    fwd_setup(&f, m, a, hook);
    f.cache = kv;
    f.pos0 = kv->len;
    f.B = 1;
    f.S = n;
    f.T = 0;
    f.par = f.threads > 1 && (int64_t)n * f.D >= (1 << 16);
    ts_model_input in;
    memset(&in, 0, sizeof in);
    in.src_ids = ids;
    m->empty_rows = 0;
    return run(&f, &in, out);
}

ts_status ts_model_dry_run(const ts_model_config *cfg, const ts_hook *hook, ts_model_summary *sum) {
    ts_model m;
    TS_TRY(ts_model_init_dry(&m, cfg));
    ts_model_acts a;
    ts_model_plan_acts(&m, &a, NULL);
    if (sum) {
        memset(sum, 0, sizeof *sum);
        for (int i = 0; i < m.n_params; i++) sum->params += m.params[i].numel;
        sum->param_bytes = sizeof(float) * (size_t)m.n_floats;
        sum->arena_bytes = m.arena_bytes;
    }
    fwd f;
    fwd_setup(&f, &m, &a, hook);
    f.sum = sum;
    ts_tensor out;
    ts_status st = run(&f, NULL, &out);
    if (sum) sum->flops = f.flops;
    ts_model_free(&m);
    if (st && sum) ts_model_summary_free(sum);
    return st;
}

void ts_model_summary_free(ts_model_summary *sum) {
    free(sum->modules);
    memset(sum, 0, sizeof *sum);
}
