/* model_forward: every step of the forward pass, each handed to the hook.
 *
 * The model's steps are written here once and every pass runs them (run()):
 * inference and tracing (ts_model_forward), training keeping what the
 * backward reads (ts_model_forward_keep: each activation to its own buffer in
 * ts_kept instead of the shared ones below) and decoding new positions over
 * cached keys and values (ts_model_forward_cached, from model_decode.c).
 * Every step reaches the hook through emit_like: the one place to watch, or
 * change, what the model computes.
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
 * with a mask), values, weights. Values before weights because seed 000's
 * scaled_dot_product returns (values, attention) and prints them in that order;
 * the weights are still intact in their buffer when the hook sees them.
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

#include "model_impl.h"
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

/* ---- the pass's state and its helpers -------------------------------------- */

typedef struct fwd {
    ts_model *m;
    const ts_model_config *c;
    ts_model_acts *a;
    const ts_hook *hook;
    bool dry;   // shapes only: no data, nothing computed
    bool watch; // someone sees the steps: compute them one by one
    bool train; // the model is in training mode (dropout on)
    float p;    // dropout probability in effect (0 unless training)
    int B, D, H, hd;
    int S, T;    // positions of this pass: source (or the new ones when decoding), target
    int threads; // the kernels' thread count, for the loops here
    bool par;    // enough work per pass to be worth a parallel region
    double flops;
    ts_model_summary *sum;
    const float *row_mask; // (B, S) -inf at pad queries while the encoder runs with mask padding-both
    const float *mem_mask; // (B, S) the memory's padded keys for cross-attention, or NULL
    ts_kept *keep;         // training: where each activation the backward reads goes, or NULL
    ts_kv_cache *cache;    // decoding: keys and values of positions [0, pos0), or NULL
    int pos0;              // decoding: the first new position
} fwd;

/* A view of `data` (NULL in a dry run) with the given shape; row-major unless
 * strides are given. Built by hand so a dry run does no pointer arithmetic. */
static ts_tensor view(float *data, int rank, const int64_t *shape, const int64_t *stride) {
    ts_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.rank = rank;
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        t.shape[d] = shape[d];
        t.stride[d] = stride ? stride[d] : s;
        s *= shape[d];
    }
    return t;
}

static ts_tensor view3(const float *data, int64_t a, int64_t b, int64_t c) {
    return view((float *)data, 3, (int64_t[]){a, b, c}, NULL);
}

/* p + n, but NULL stays NULL (a dry run has no buffers). */
static float *at(float *p, int64_t n) { return p ? p + n : NULL; }
static const float *cat(const float *p, int64_t n) { return p ? p + n : NULL; }

/* "prefix.leaf", or leaf alone at the top. */
static void step_name(char *name, size_t size, const char *prefix, const char *leaf) {
    if (prefix && prefix[0])
        snprintf(name, size, "%s.%s", prefix, leaf);
    else
        snprintf(name, size, "%s", leaf);
}

/* ---- handing steps to the hook ----------------------------------------------------
 *
 * Every step of every pass (inference, training with kept activations,
 * decoding with a cache) reaches the hook through emit_like below: it is the
 * one place to watch or change what the model computes.
 *
 * What keeps tracing cheap lives here too, so the arithmetic below reads as
 * the model: a step can be handed over as
 *   - a view (reshape, permute, chunk: its tensor carries strides, no copy),
 *   - an alias (`alias`: the tensor was already traced under another name,
 *     a layer's out is its last norm's out),
 *   - "like" another step (`factor`: every value is that step's times factor,
 *     see ts_hook_like_fn),
 *   - offered ahead (emit_ahead: a hook may record it from what it holds, and
 *     the model may leave it unmade) or as a group (emit_group: two steps read
 *     from one memory at once).
 * A hook without derive_next or group declines the offers and sees every
 * step made and handed over one by one. */
static ts_status emit_like(fwd *f, const char *prefix, const char *leaf, ts_op op, const ts_tensor *t, ts_tag tag,
                           bool alias, const ts_tensor *of, float factor) {
    if (f->sum) {
        /* What keeping every value costs: views and like steps a trace
         * stores as views of values it keeps anyway cost nothing; nor do
         * parameters (a norm's gamma and beta: D floats each). */
        bool costs_nothing = alias || ts_op_is_view(op) || op == TS_OP_PARAM ||
                    (factor != 0.0f && ts_hook_exact_factor(factor));
        f->sum->steps++;
        if (!costs_nothing) f->sum->kept_bytes += sizeof(float) * (size_t)ts_tensor_numel(t);
    }
    if (!f->hook || (!f->hook->fn && !f->hook->edit)) return TS_OK;
    char name[2 * TS_MODEL_NAME_MAX];
    step_name(name, sizeof name, prefix, leaf);
    if (f->hook->edit && !f->dry) { /* an experiment may change the step before anything reads it */
        bool edited;
        TS_TRY(ts_hook_edit_step(f->hook, name, op, t, tag, &edited));
        if (edited) return ts_hook_call(f->hook, name, op, t, tag); /* no longer like any earlier step */
    }
    if (factor != 0.0f) return ts_hook_call_like(f->hook, name, op, t, tag, of, factor);
    return ts_hook_call(f->hook, name, op, t, tag);
}

static ts_status emit(fwd *f, const char *prefix, const char *leaf, ts_op op, const ts_tensor *t, ts_tag tag,
                      bool alias) {
    return emit_like(f, prefix, leaf, op, t, tag, alias, NULL, alias ? 1.0f : 0.0f);
}

/* Offer the hook a step that will be the previous one times factor before
 * making it: *done when the hook recorded it from what it holds, and the
 * model may leave it unmade (ts_hook_derive_fn). Never in a dry run, which
 * counts every step. */
static ts_status emit_ahead(fwd *f, const char *prefix, const char *leaf, ts_op op, const ts_tensor *t, ts_tag tag,
                            float factor, bool *done) {
    *done = false;
    if (f->dry || !f->hook || !f->hook->derive_next || ts_hook_edits(f->hook)) return TS_OK;
    char name[2 * TS_MODEL_NAME_MAX];
    step_name(name, sizeof name, prefix, leaf);
    return ts_hook_try_derive(f->hook, name, op, t, tag, factor, done);
}

/* Offer the hook steps (names: leaves under prefix) as one group:
 * *done when it recorded them (ts_hook_group_fn). Never in a dry run, which
 * counts every step. */
static ts_status emit_group(fwd *f, const char *prefix, const ts_hook_step *leaves, int n, bool *done) {
    *done = false;
    if (f->dry || f->sum || !f->hook || !f->hook->group || n > TS_HOOK_GROUP_MAX || ts_hook_edits(f->hook))
        return TS_OK;
    char names[TS_HOOK_GROUP_MAX][2 * TS_MODEL_NAME_MAX];
    ts_hook_step steps[TS_HOOK_GROUP_MAX];
    for (int i = 0; i < n; i++) {
        step_name(names[i], sizeof names[i], prefix, leaves[i].name);
        steps[i] = leaves[i];
        steps[i].name = names[i];
    }
    return ts_hook_try_group(f->hook, steps, n, done);
}

static int64_t count_params(const ts_model *m, const char *prefix) {
    int64_t n = 0;
    size_t len = strlen(prefix);
    for (int i = 0; i < m->n_params; i++)
        if (strncmp(m->params[i].name, prefix, len) == 0) n += m->params[i].numel;
    return n;
}

/* Close a module for the shapes table: its output, its parameters (those whose
 * state_dict names start with param_prefix) and the matmul flops since flops0. */
static ts_status module_done(fwd *f, const char *name, const char *param_prefix, const ts_tensor *out,
                             double flops0) {
    ts_model_summary *s = f->sum;
    if (!s) return TS_OK;
    ts_model_module *grown = realloc(s->modules, sizeof *grown * (size_t)(s->count + 1));
    if (!grown) return ts_fail(TS_ERR_NOMEM, "model: out of memory for the module table");
    s->modules = grown;
    ts_model_module *mod = &s->modules[s->count++];
    memset(mod, 0, sizeof *mod);
    snprintf(mod->name, sizeof mod->name, "%s", name);
    mod->rank = out->rank;
    for (int d = 0; d < out->rank; d++) mod->shape[d] = out->shape[d];
    mod->params = param_prefix ? count_params(f->m, param_prefix) : 0;
    mod->flops = f->flops - flops0;
    return TS_OK;
}

/* ---- the elementwise steps ----------------------------------------------------------- */

/* out (rows, n_out) = in (rows, n_in) @ w^T (n_in -> n_out) + b, as nn.Linear. */
static void linear(fwd *f, float *out, const float *in, int64_t rows, int n_in, int n_out, const float *w,
                   const float *b, int ld_in, ts_epilogue epi) {
    f->flops += 2.0 * (double)rows * n_in * n_out;
    if (f->dry) return;
    ts_gemm(false, true, (int)rows, n_out, n_in, 1.0f, in, ld_in, w, n_in, 0.0f, out, n_out, b ? epi : TS_EPI_NONE, b);
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

/* One LayerNorm: its names, weights and where it writes. `in_op`: the op that
 * made its input; `in_traced`: the input was traced already (a pre-LN
 * block's input), so `in` is handed over as an alias. */
typedef struct norm_step {
    const char *name;         // "encoder.layers.0.norm1"
    const char *params;       // "encoder.layers.0.norm1."
    const ts_norm_weights *w;
    float eps;
    ts_op in_op;
    bool in_traced;
    float *out, *mean, *rstd; // (B, S, D), (B, S), (B, S); out may be in
} norm_step;

/* Seed 001's LayerNorm over (batch, features), variant seed001-layernorm: the
 * steps of norm() below, with mean and std (1, S, 1), one per position, and
 * gamma, beta shown (B, D) as the seed shapes its parameters (model_variants.c). */
static ts_status norm_two_dims(fwd *f, const norm_step *n, const float *in, int S) {
    double flops0 = f->flops;
    int64_t B = f->B, D = f->D;
    ts_model_acts *a = f->a;
    const ts_norm_weights *w = n->w;
    ts_tensor t = view3(in, B, S, D);
    TS_TRY(emit(f, n->name, "in", n->in_op, &t, TS_TAG_NORM_IN, n->in_traced));
    float *y = f->watch ? a->big : NULL; // a norm's input never lives in big
    if (!f->dry) ts_model_layernorm_two_dims(n->out, y, a->mean, a->std, in, w->gamma, w->beta, (int)B, S, (int)D, n->eps);
    if (f->watch) {
        t = view3(a->mean, 1, S, 1);
        TS_TRY(emit(f, n->name, "mean", TS_OP_MEAN, &t, TS_TAG_NORM_STAT, false));
        t = view3(a->std, 1, S, 1);
        TS_TRY(emit(f, n->name, "std", TS_OP_STD, &t, TS_TAG_NORM_STAT, false));
        t = view3(y, B, S, D);
        TS_TRY(emit(f, n->name, "y", TS_OP_LAYERNORM, &t, TS_TAG_PLAIN, false));
        t = view(w->gamma, 2, (int64_t[]){B, D}, (int64_t[]){0, 1});
        TS_TRY(emit(f, n->name, "gamma", TS_OP_PARAM, &t, TS_TAG_PARAM, false));
        t = view(w->beta, 2, (int64_t[]){B, D}, (int64_t[]){0, 1});
        TS_TRY(emit(f, n->name, "beta", TS_OP_PARAM, &t, TS_TAG_PARAM, false));
    }
    t = view3(n->out, B, S, D);
    TS_TRY(emit(f, n->name, "out", TS_OP_LAYERNORM, &t, TS_TAG_NORM_OUT, false));
    return module_done(f, n->name, n->params, &t, flops0);
}

static bool identity_affine(const ts_norm_weights *w, int64_t D) {
    if (!w->gamma || !w->beta) return false;
    for (int64_t j = 0; j < D; j++)
        if (w->gamma[j] != 1.0f || w->beta[j] != 0.0f) return false;
    return true;
}

/* out = gamma * (in - mean) / std + beta over the last dim, std = sqrt(var + eps)
 * with the biased variance, as seed 000's LayerNormalization and nn.LayerNorm.
 * Traces in, mean, std (B, S, 1), y = (in - mean) / std, gamma, beta, out. */
static ts_status norm(fwd *f, const norm_step *n, const float *in, int S) {
    if (f->c->variants & TS_VARIANT_SEED001_LAYERNORM) return norm_two_dims(f, n, in, S);
    double flops0 = f->flops;
    int64_t B = f->B, D = f->D, rows = B * S;
    ts_model_acts *a = f->a;
    const ts_norm_weights *w = n->w;
    float *out = n->out;
    ts_tensor tin = view3(in, B, S, D);
    TS_TRY(emit(f, n->name, "in", n->in_op, &tin, TS_TAG_NORM_IN, n->in_traced));
    /* In place goes through the scratch area: the kernel reads a row while it writes. */
    float *dst = in == out ? a->big : out;
    if (!f->dry) ts_layernorm(dst, n->mean, n->rstd, in, w->gamma, w->beta, rows, (int)D, n->eps);
    ts_tensor ty = view3(NULL, B, S, D);
    if (f->watch) {
        float *y = at(a->big, rows * D); // big holds >= 2 (B, L, D)
        if (!f->dry) {
            /* The kernel without gamma and beta: the same mean and rstd, so
             * the same y the normalised out was made from. */
            ts_layernorm(y, NULL, NULL, in, NULL, NULL, rows, (int)D, n->eps);
            for (int64_t r = 0; r < rows; r++) a->std[r] = 1.0f / n->rstd[r];
        }
        ts_tensor stat = view3(n->mean, B, S, 1);
        TS_TRY(emit(f, n->name, "mean", TS_OP_MEAN, &stat, TS_TAG_NORM_STAT, false));
        stat = view3(a->std, B, S, 1);
        TS_TRY(emit(f, n->name, "std", TS_OP_STD, &stat, TS_TAG_NORM_STAT, false));
        ty = view3(y, B, S, D);
        TS_TRY(emit(f, n->name, "y", TS_OP_LAYERNORM, &ty, TS_TAG_PLAIN, false));
        ts_tensor g = view(w->gamma, 1, (int64_t[]){D}, NULL);
        TS_TRY(emit(f, n->name, "gamma", TS_OP_PARAM, &g, TS_TAG_PARAM, false));
        g = view(w->beta, 1, (int64_t[]){D}, NULL);
        TS_TRY(emit(f, n->name, "beta", TS_OP_PARAM, &g, TS_TAG_PARAM, false));
    }
    if (dst != out && !f->dry) memcpy(out, dst, sizeof(float) * (size_t)(rows * D));
    ts_tensor tout = view3(out, B, S, D);
    /* gamma 1 and beta 0 (a LayerNorm that has not learned yet) make out
     * y times one plus zero: y's values, which a hook need not read again. */
    if (f->watch && !f->dry && identity_affine(w, D))
        TS_TRY(emit_like(f, n->name, "out", TS_OP_LAYERNORM, &tout, TS_TAG_NORM_OUT, false, &ty, 1.0f));
    else
        TS_TRY(emit(f, n->name, "out", TS_OP_LAYERNORM, &tout, TS_TAG_NORM_OUT, false));
    return module_done(f, n->name, n->params, &tout, flops0);
}

/* ---- attention -------------------------------------------------------------------- */

/* Where one of q, k, v lives: element (b, h, s, j) at
 * base + b*bstride + h*hstride + s*ld + j. */
typedef struct heads_at {
    const float *base;
    int64_t bstride, hstride;
    int ld;
} heads_at;

static ts_tensor heads_view(fwd *f, const heads_at *x, int S) {
    return view((float *)x->base, 4, (int64_t[]){f->B, f->H, S, f->hd},
                (int64_t[]){x->bstride, x->hstride, x->ld, 1});
}

/* One scaled dot-product attention: Sq queries over Sk keys. Causal: query r
 * is position Sk - Sq + r (the new positions come last when decoding) and sees
 * the keys up to it. att (B, H, Sq, Sk) ends holding the weights, ctx
 * (B, Sq, H, hd) the values. */
typedef struct attn_job {
    const heads_at *q, *k, *v;
    int Sq, Sk, H, hd, D;
    float *att;            // (B, H, Sq, Sk)
    float *ctx;            // (B, Sq, H, hd)
    const float *key_mask; // (B, Sk) or NULL
    bool causal;
} attn_job;

static float *att_of(const attn_job *j, int64_t bh) { return j->att + bh * j->Sq * j->Sk; }

/* Key padding (B, Sk), the causal rule and hidden query rows (B, Sq), written
 * into the scores as -inf; seed 003's masks add -1e9 instead (its keys' -1e9
 * comes in key_mask, build_mask). */
static void apply_mask(fwd *f, const attn_job *j, const float *row_mask) {
    int64_t BH = (int64_t)f->B * f->H;
    int H = f->H, Sq = j->Sq, Sk = j->Sk, past = Sk - Sq;
    bool seed003 = f->c->variants & TS_VARIANT_SEED003_MASK;
    TS_MODEL_OMP(parallel for num_threads(f->threads) if(f->par) schedule(static))
    for (int64_t bh = 0; bh < BH; bh++) {
        const float *km = j->key_mask ? j->key_mask + (bh / H) * Sk : NULL;
        const float *rm = row_mask ? row_mask + (bh / H) * Sq : NULL;
        for (int r = 0; r < Sq; r++) {
            float *row = att_of(j, bh) + (int64_t)r * Sk;
            if (rm && rm[r] != 0.0f) {
                for (int c = 0; c < Sk; c++) row[c] = seed003 ? row[c] + SEED003_FILL : -INFINITY;
                continue;
            }
            for (int c = 0; c < Sk; c++) {
                if (km) row[c] += km[c];
                if (j->causal && c > past + r) row[c] = seed003 ? row[c] + SEED003_FILL : -INFINITY;
            }
        }
    }
}

/* One head's share: heads are independent, so a pass runs one (batch, head)
 * pair per iteration on each thread; the GEMMs inside run on that thread
 * alone (nested regions stay inactive). */
static void head_scores(const attn_job *j, int64_t bh, float alpha) {
    int64_t b = bh / j->H, h = bh % j->H;
    ts_gemm(false, true, j->Sq, j->Sk, j->hd, alpha, j->q->base + b * j->q->bstride + h * j->q->hstride, j->q->ld,
            j->k->base + b * j->k->bstride + h * j->k->hstride, j->k->ld, 0.0f, att_of(j, bh), j->Sk, TS_EPI_NONE,
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
    int64_t b = bh / j->H, h = bh % j->H;
    ts_gemm(false, false, j->Sq, j->hd, j->Sk, 1.0f, att_of(j, bh), j->Sk,
            j->v->base + b * j->v->bstride + h * j->v->hstride, j->v->ld, 0.0f,
            j->ctx + b * j->Sq * j->D + h * j->hd, j->D, TS_EPI_NONE, NULL);
}

/* Attention when nobody watches: each head start to finish while its scores
 * sit in cache, the scale in the GEMM's alpha and the mask in the softmax. */
static int64_t attention_fused(fwd *f, const attn_job *j, float scale, bool masked) {
    int64_t BH = (int64_t)f->B * f->H, empty = 0;
    TS_MODEL_OMP(parallel for num_threads(f->threads) if(f->par) schedule(dynamic, 1) reduction(+:empty))
    for (int64_t bh = 0; bh < BH; bh++) {
        head_scores(j, bh, scale);
        empty += head_softmax(j, bh, masked);
        head_values(j, bh);
    }
    return empty;
}

/* The scaled scores, or their offer: with no mask to add, scaled scores a
 * hook can record from the scores (a trace writer's scaled view) are left
 * unmade here (*later) and scaled per head in attention_steps' last pass,
 * in cache, instead of in a pass of their own over all of them. */
static ts_status scale_step(fwd *f, const char *prefix, const attn_job *j, ts_tensor *tatt, float scale, bool masked,
                            bool *later) {
    *later = false;
    if (!masked) TS_TRY(emit_ahead(f, prefix, "scaled", TS_OP_SCALE, tatt, TS_TAG_ATTN_SCORES, scale, later));
    if (*later) return TS_OK;
    if (!f->dry) ts_scale(j->att, j->att, scale, (int64_t)f->B * f->H * j->Sq * j->Sk);
    return emit_like(f, prefix, "scaled", TS_OP_SCALE, tatt, TS_TAG_ATTN_SCORES, false, NULL, scale);
}

/* Attention as the paper writes it, one step at a time, each handed to the
 * hook before the next overwrites it in att:
 *   scores  = q k^T                  (B, H, Sq, Sk)
 *   scaled  = scores / sqrt(hd)
 *   masked  = scaled + mask          (only with a mask)
 *   weights = softmax(masked), values = weights v
 * Seed 001's unshifted softmax and seed 003's -1e9 change their step here. */
static ts_status attention_steps(fwd *f, const char *prefix, const attn_job *j, float scale, bool masked,
                                 int64_t *empty) {
    int64_t BH = (int64_t)f->B * f->H;
    int Sq = j->Sq, Sk = j->Sk;
    bool unshifted = f->c->variants & TS_VARIANT_SEED001_SOFTMAX;
    ts_tensor tatt = view(j->att, 4, (int64_t[]){f->B, f->H, Sq, Sk}, NULL);
    if (!f->dry) {
        TS_MODEL_OMP(parallel for num_threads(f->threads) if(f->par) schedule(dynamic, 1))
        for (int64_t bh = 0; bh < BH; bh++) head_scores(j, bh, 1.0f);
    }
    TS_TRY(emit(f, prefix, "scores", TS_OP_MATMUL, &tatt, TS_TAG_ATTN_SCORES, false));
    bool scale_later;
    TS_TRY(scale_step(f, prefix, j, &tatt, scale, masked, &scale_later));
    if (masked) {
        if (!f->dry) apply_mask(f, j, f->row_mask);
        TS_TRY(emit(f, prefix, "masked", TS_OP_MASK, &tatt, TS_TAG_ATTN_SCORES, false));
    }
    if (f->dry) return TS_OK;
    int64_t hidden = 0; /* the mask is in the scores now */
    TS_MODEL_OMP(parallel for num_threads(f->threads) if(f->par) schedule(dynamic, 1) reduction(+:hidden))
    for (int64_t bh = 0; bh < BH; bh++) {
        if (scale_later) ts_scale(att_of(j, bh), att_of(j, bh), scale, (int64_t)Sq * Sk);
        if (unshifted) ts_model_softmax_unshifted(att_of(j, bh), Sq, Sk);
        else hidden += head_softmax(j, bh, false);
        head_values(j, bh);
    }
    *empty = hidden;
    return TS_OK;
}

/* values (B, H, Sq, hd) = softmax(q k^T / sqrt(hd) + mask) v, written into
 * ctx in (B, Sq, H, hd) order; att (B, H, Sq, Sk) ends holding the weights.
 * Step by step when someone watches or a seed's variant changes a stage
 * (attention_steps); fused otherwise (attention_fused), with the same
 * numbers. */
static ts_status sdpa(fwd *f, const char *prefix, const attn_job *j) {
    int B = f->B, H = f->H, hd = f->hd, D = f->D, Sq = j->Sq, Sk = j->Sk;
    float scale = ts_model_attn_scale(f->c, hd);
    int64_t empty = 0;
    f->flops += 2.0 * 2.0 * (double)B * H * Sq * Sk * hd;
    bool masked = j->key_mask || j->causal || f->row_mask;
    /* hidden rows, seed 003's -1e9 and seed 001's softmax go into the scores, as a watcher sees them */
    bool staged = f->watch || f->row_mask || (masked && (f->c->variants & TS_VARIANT_SEED003_MASK)) ||
                  (f->c->variants & TS_VARIANT_SEED001_SOFTMAX);
    if (staged) TS_TRY(attention_steps(f, prefix, j, scale, masked, &empty));
    else if (!f->dry) empty = attention_fused(f, j, scale, masked);
    f->m->empty_rows += empty;
    ts_tensor tatt = view(j->att, 4, (int64_t[]){B, H, Sq, Sk}, NULL);
    heads_at vals = {j->ctx, (int64_t)Sq * D, hd, D};
    ts_tensor tv = heads_view(f, &vals, Sq);
    TS_TRY(emit(f, prefix, "weights", TS_OP_SOFTMAX, &tatt, TS_TAG_ATTN_WEIGHTS, false));
    TS_TRY(emit(f, prefix, "values", TS_OP_MATMUL, &tv, TS_TAG_HEADS, false));
    if (f->c->variants & TS_VARIANT_SEED000_RESHAPE) { /* no permute back; the q/k/v rows are spent */
        if (!f->dry) ts_model_unpermuted_concat(j->ctx, f->a->big, B, Sq, H, hd);
    } else {
        ts_tensor perm = view(j->ctx, 4, (int64_t[]){B, Sq, H, hd}, NULL);
        TS_TRY(emit(f, prefix, "values_perm", TS_OP_PERMUTE, &perm, TS_TAG_PLAIN, false));
    }
    ts_tensor concat = view3(j->ctx, B, Sq, D);
    return emit(f, prefix, "concat", TS_OP_RESHAPE, &concat, TS_TAG_PLAIN, false);
}

/* One attention sublayer: its names, weights, mask and buffers. */
typedef struct attn_step {
    const char *name;           // "encoder.layers.0.self_attn"
    const char *params;         // "encoder.layers.0.self_attn." (cross: "...multihead_attn.")
    const ts_attn_weights *w;
    const float *key_mask;      // (B, Sk) 0 or -inf, or NULL
    bool causal;
    int din;                    // the input's width (D, or a lone attention's in_dim)
    const float *mem;           // cross-attention: the memory (B, Sk, D)
    int Sk;                     // cross-attention: the memory's positions
    ts_kept_attn buf;           // where the projections, weights and values go
    float *cache_k, *cache_v;   // decoding: this layer's cached keys and values (capacity, D), or NULL
} attn_step;

/* Both attentions end alike once q is traced: k and v as views of their
 * projection, the attention itself, then the output projection (B, Sq, D). */
static ts_status attend_and_project(fwd *f, const attn_step *s, const heads_at *q, const heads_at *k,
                                    const heads_at *v, int Sq, int Sk, float *out, double flops0) {
    int64_t B = f->B, D = f->D;
    ts_tensor t = heads_view(f, k, Sk);
    TS_TRY(emit(f, s->name, "k", TS_OP_CHUNK, &t, TS_TAG_HEADS, false));
    t = heads_view(f, v, Sk);
    TS_TRY(emit(f, s->name, "v", TS_OP_CHUNK, &t, TS_TAG_HEADS, false));
    attn_job j = {q, k, v, Sq, Sk, f->H, f->hd, f->D, s->buf.att, s->buf.ctx, s->key_mask, s->causal};
    TS_TRY(sdpa(f, s->name, &j));
    linear(f, out, s->buf.ctx, B * Sq, (int)D, (int)D, s->w->out_w, s->w->out_b, (int)D, TS_EPI_BIAS);
    t = view3(out, B, Sq, D);
    TS_TRY(emit(f, s->name, "out", TS_OP_LINEAR, &t, TS_TAG_PLAIN, false));
    return module_done(f, s->name, s->params, &t, flops0);
}

/* Decoding: the new positions' keys and values join the cache (rows pos0..,
 * head h at columns h*hd.., as the values are laid out); k and v then read
 * every cached position. */
static void cache_append(fwd *f, const attn_step *s, const heads_at *k, const heads_at *v, int S, heads_at *ck,
                         heads_at *cv) {
    int D = f->D, hd = f->hd;
    for (int r = 0; r < S; r++)
        for (int h = 0; h < f->H; h++) {
            memcpy(s->cache_k + (int64_t)(f->pos0 + r) * D + h * hd, k->base + h * k->hstride + (int64_t)r * k->ld,
                   sizeof(float) * (size_t)hd);
            memcpy(s->cache_v + (int64_t)(f->pos0 + r) * D + h * hd, v->base + h * v->hstride + (int64_t)r * v->ld,
                   sizeof(float) * (size_t)hd);
        }
    *ck = (heads_at){s->cache_k, 0, hd, D};
    *cv = (heads_at){s->cache_v, 0, hd, D};
}

/* Self-attention as seed 000 writes it: qkv (B, S, 3D) -> view (B, S, H, 3hd)
 * -> permute (B, H, S, 3hd) -> chunk into q, k, v (B, H, S, hd), all views of
 * one buffer (in_proj rows are stored per head: see model.c). */
static ts_status self_attention(fwd *f, const attn_step *s, const float *x, int S, float *out) {
    double flops0 = f->flops;
    int64_t B = f->B, D = f->D, H = f->H, hd = f->hd;
    float *qkv = s->buf.q;
    linear(f, qkv, x, B * S, s->din, (int)(3 * D), s->w->in_w, s->w->in_b, s->din, TS_EPI_BIAS);
    ts_tensor t = view3(qkv, B, S, 3 * D);
    TS_TRY(emit(f, s->name, "qkv", TS_OP_LINEAR, &t, TS_TAG_PLAIN, false));
    t = view(qkv, 4, (int64_t[]){B, S, H, 3 * hd}, NULL);
    TS_TRY(emit(f, s->name, "qkv_heads", TS_OP_RESHAPE, &t, TS_TAG_PLAIN, false));
    heads_at q = {qkv, S * 3 * D, 3 * hd, (int)(3 * D)};
    t = view(qkv, 4, (int64_t[]){B, H, S, 3 * hd}, (int64_t[]){S * 3 * D, 3 * hd, 3 * D, 1});
    TS_TRY(emit(f, s->name, "qkv_perm", TS_OP_PERMUTE, &t, TS_TAG_HEADS, false));
    heads_at k = q, v = q;
    k.base = cat(qkv, hd);
    v.base = cat(qkv, 2 * hd);
    t = heads_view(f, &q, S);
    TS_TRY(emit(f, s->name, "q", TS_OP_CHUNK, &t, TS_TAG_HEADS, false));
    int Sk = S;
    if (s->cache_k) {
        if (!f->dry) cache_append(f, s, &k, &v, S, &k, &v);
        Sk = f->pos0 + S;
    }
    return attend_and_project(f, s, &q, &k, &v, S, Sk, out, flops0);
}

/* Cross-attention: q from the decoder (B, T, D), k and v from the memory
 * (B, S, D). q_proj (B, T, D) -> q_heads (B, T, H, hd) -> q (B, H, T, hd);
 * kv (B, S, 2D) -> kv_heads (B, S, H, 2hd) -> kv_perm (B, H, S, 2hd) -> k, v. */
static ts_status cross_attention(fwd *f, const attn_step *s, const float *x, int T, float *out) {
    double flops0 = f->flops;
    int64_t B = f->B, D = f->D, H = f->H, hd = f->hd, S = s->Sk;
    const ts_attn_weights *w = s->w;
    float *qp = s->buf.q, *kv = s->buf.kv;
    linear(f, qp, x, B * T, (int)D, (int)D, w->in_w, w->in_b, (int)D, TS_EPI_BIAS);
    ts_tensor t = view3(qp, B, T, D);
    TS_TRY(emit(f, s->name, "q_proj", TS_OP_LINEAR, &t, TS_TAG_PLAIN, false));
    t = view(qp, 4, (int64_t[]){B, T, H, hd}, NULL);
    TS_TRY(emit(f, s->name, "q_heads", TS_OP_RESHAPE, &t, TS_TAG_PLAIN, false));
    heads_at q = {qp, T * D, hd, (int)D};
    t = heads_view(f, &q, T);
    TS_TRY(emit(f, s->name, "q", TS_OP_PERMUTE, &t, TS_TAG_HEADS, false));
    linear(f, kv, s->mem, B * S, (int)D, (int)(2 * D), cat(w->in_w, D * D), cat(w->in_b, D), (int)D, TS_EPI_BIAS);
    t = view3(kv, B, S, 2 * D);
    TS_TRY(emit(f, s->name, "kv", TS_OP_LINEAR, &t, TS_TAG_PLAIN, false));
    t = view(kv, 4, (int64_t[]){B, S, H, 2 * hd}, NULL);
    TS_TRY(emit(f, s->name, "kv_heads", TS_OP_RESHAPE, &t, TS_TAG_PLAIN, false));
    t = view(kv, 4, (int64_t[]){B, H, S, 2 * hd}, (int64_t[]){S * 2 * D, 2 * hd, 2 * D, 1});
    TS_TRY(emit(f, s->name, "kv_perm", TS_OP_PERMUTE, &t, TS_TAG_HEADS, false));
    heads_at k = {kv, S * 2 * D, 2 * hd, (int)(2 * D)}, v = k;
    v.base = cat(kv, hd);
    return attend_and_project(f, s, &q, &k, &v, T, (int)S, out, flops0);
}

/* The buffers of an attention when nothing is kept: q, k, v and the scores
 * in the scratch area, the values in ctx. */
static ts_kept_attn scratch_attn(const fwd *f, bool cross, int Sq, int Sk) {
    int64_t B = f->B, D = f->D;
    ts_kept_attn b = {f->a->big, NULL, NULL, f->a->ctx};
    if (cross) {
        b.kv = at(b.q, B * Sq * D);
        b.att = at(b.kv, B * Sk * 2 * D);
    } else {
        b.att = at(b.q, B * Sq * 3 * D);
    }
    return b;
}

/* ---- feed-forward ------------------------------------------------------------------ */

/* out = linear2(dropout(act(linear1(x)))); traces hidden, act, dropout, out.
 * hidden and act are one buffer unless the backward keeps GELU's input
 * (kept: act apart). Returns the inner dropout's key. */
static ts_status ffn(fwd *f, const char *prefix, const char *params, const ts_ffn_weights *w, const float *x, int S,
                     ts_kept_ffn buf, float *out, uint64_t *key) {
    double flops0 = f->flops;
    int64_t B = f->B, D = f->D, F = f->c->ffn, n = B * S * F;
    ts_activation act = f->c->activation;
    bool gelu = act != TS_ACT_RELU;
    void (*activate)(float *, const float *, int64_t) =
        act == TS_ACT_GELU ? ts_gelu : act == TS_ACT_GELU_TANH ? ts_gelu_tanh : ts_relu;
    float *hidden = buf.hidden, *acted = buf.act;
    /* the GEMM applies ReLU and exact GELU as it stores, unless someone
     * watches the hidden layer or the backward reads GELU's input;
     * GELU's tanh form always runs after it */
    bool unfused = f->watch || (gelu && acted != hidden);
    ts_epilogue fused = act == TS_ACT_GELU ? TS_EPI_BIAS_GELU : act == TS_ACT_RELU ? TS_EPI_BIAS_RELU : TS_EPI_BIAS;
    linear(f, hidden, x, B * S, (int)D, (int)F, w->w1, w->b1, (int)D, unfused ? TS_EPI_BIAS : fused);
    const float *made = hidden; // the activation's output so far
    ts_tensor t = view3(hidden, B, S, F);
    if (f->watch) {
        /* hidden and its ReLU at once, before the ReLU is made: a trace writer
         * then reads hidden's memory once for the statistics of both. */
        const ts_hook_step pair[] = {{"hidden", TS_OP_LINEAR, &t, TS_TAG_PLAIN, false},
                                     {"act", TS_OP_RELU, &t, TS_TAG_PLAIN, true}};
        bool paired = false;
        if (!gelu && acted == hidden) TS_TRY(emit_group(f, prefix, pair, 2, &paired));
        if (!paired) TS_TRY(emit(f, prefix, "hidden", TS_OP_LINEAR, &t, TS_TAG_PLAIN, false));
        if (!f->dry) activate(acted, hidden, n);
        made = acted;
        t = view3(acted, B, S, F);
        /* ReLU's output is its input through ReLU, which a trace can store as
         * a view of the input's values; GELU's a reader could not redo to the bit. */
        if (!paired)
            TS_TRY(emit_like(f, prefix, "act", gelu ? TS_OP_GELU : TS_OP_RELU, &t, TS_TAG_PLAIN, false, NULL,
                             gelu ? 0.0f : 1.0f));
    } else if (act == TS_ACT_GELU_TANH || unfused) {
        if (!f->dry) activate(acted, hidden, n);
        made = acted;
    }
    *key = dropout(f, acted, made, n);
    t = view3(acted, B, S, F);
    TS_TRY(emit(f, prefix, "dropout", TS_OP_DROPOUT, &t, TS_TAG_PLAIN, !f->train));
    linear(f, out, acted, B * S, (int)F, (int)D, w->w2, w->b2, (int)F, TS_EPI_BIAS);
    t = view3(out, B, S, D);
    TS_TRY(emit(f, prefix, "out", TS_OP_LINEAR, &t, TS_TAG_PLAIN, false));
    return module_done(f, prefix, params, &t, flops0);
}

/* ---- layers ------------------------------------------------------------------------ */

typedef enum sub_kind { SUB_SELF_ATTN, SUB_CROSS_ATTN, SUB_FFN } sub_kind;

/* One residual sublayer: the function it wraps and its LayerNorm (whose
 * buffers sublayer() fills in). */
typedef struct sub_step {
    sub_kind kind;
    attn_step attn;                    // SUB_SELF_ATTN, SUB_CROSS_ATTN
    const char *ffn_name, *ffn_params; // SUB_FFN: "encoder.layers.0.ffn", "encoder.layers.0.linear"
    const ts_ffn_weights *ffn;
    ts_kept_ffn ffn_buf;
    norm_step norm;
} sub_step;

static ts_status sub_compute(fwd *f, const sub_step *s, const float *x, int S, float *out, uint64_t *key_inner) {
    *key_inner = 0;
    switch (s->kind) {
    case SUB_SELF_ATTN: return self_attention(f, &s->attn, x, S, out);
    case SUB_CROSS_ATTN: return cross_attention(f, &s->attn, x, S, out);
    case SUB_FFN: return ffn(f, s->ffn_name, s->ffn_params, s->ffn, x, S, s->ffn_buf, out, key_inner);
    }
    return TS_OK;
}

/* post-LN (seed 000, the paper): y = norm(x + dropout(sub(x)))
 * pre-LN (seed 004, norm_first):  y = x + dropout(sub(norm(x)))
 * (no x in either with the no-residual variant). *y: out, or with kept
 * activations the sublayer's own buffer. */
static ts_status sublayer(fwd *f, sub_step *s, ts_kept_sub *kept, const float *x, int S, float *out,
                          const float **y) {
    int64_t n = (int64_t)f->B * S * f->D;
    bool post = f->c->norm == TS_NORM_POST;
    ts_model_acts *a = f->a;
    float *fo = kept ? f->keep->fout : a->tmp;
    float *res = kept ? kept->res : post ? a->tmp : out;
    s->norm.out = kept ? kept->norm.out : post ? out : a->tmp;
    s->norm.mean = kept ? kept->norm.mean : a->mean;
    s->norm.rstd = kept ? kept->norm.rstd : a->rstd;
    uint64_t key_inner, key;
    if (post) {
        TS_TRY(sub_compute(f, s, x, S, fo, &key_inner));
        key = dropout(f, fo, fo, n);
        skip_add(f, res, x, fo, n);
        TS_TRY(norm(f, &s->norm, res, S));
        *y = s->norm.out;
    } else {
        TS_TRY(norm(f, &s->norm, x, S));
        TS_TRY(sub_compute(f, s, s->norm.out, S, fo, &key_inner));
        key = dropout(f, fo, fo, n);
        skip_add(f, res, x, fo, n);
        *y = res;
    }
    if (kept) {
        kept->key = key;
        kept->key_inner = key_inner;
    }
    return TS_OK;
}

/* A layer: its sublayers one after the other, in -> *y (out, or kept). */
static ts_status layer(fwd *f, const char *name, sub_step *subs, int n, ts_kept_layer *kept, const float *in, int S,
                       float *out, const float **y) {
    bool pre = f->c->norm == TS_NORM_PRE;
    if (kept) kept->in = in;
    const float *x = in;
    for (int k = 0; k < n; k++) {
        /* pre-LN's first norm reads the layer's input, traced already */
        subs[k].norm.in_op = pre && k == 0 ? TS_OP_INPUT : skip_op(f);
        subs[k].norm.in_traced = pre && k == 0;
        TS_TRY(sublayer(f, &subs[k], kept ? &kept->sub[k] : NULL, x, S, out, &x));
    }
    ts_tensor t = view3(x, f->B, S, f->D);
    *y = x;
    if (!pre) return emit(f, name, "out", TS_OP_LAYERNORM, &t, TS_TAG_PLAIN, true);
    return emit(f, name, "out", skip_op(f), &t, TS_TAG_PLAIN, false);
}

void ts_layer_names_of(ts_layer_names *nm, const char *stack, int i) {
    snprintf(nm->p, sizeof nm->p, "%s.layers.%d", stack, i);
    snprintf(nm->self, sizeof nm->self, "%s.layers.%d.self_attn", stack, i);
    snprintf(nm->self_p, sizeof nm->self_p, "%s.layers.%d.self_attn.", stack, i);
    snprintf(nm->cross, sizeof nm->cross, "%s.layers.%d.cross_attn", stack, i);
    snprintf(nm->cross_p, sizeof nm->cross_p, "%s.layers.%d.multihead_attn.", stack, i);
    snprintf(nm->ffn, sizeof nm->ffn, "%s.layers.%d.ffn", stack, i);
    snprintf(nm->lin, sizeof nm->lin, "%s.layers.%d.linear", stack, i);
    for (int k = 0; k < 3; k++) {
        snprintf(nm->norm[k], sizeof nm->norm[k], "%s.layers.%d.norm%d", stack, i, k + 1);
        snprintf(nm->norm_p[k], sizeof nm->norm_p[k], "%s.layers.%d.norm%d.", stack, i, k + 1);
    }
}

static norm_step layer_norm_step(const fwd *f, const ts_layer_names *nm, int k, const ts_norm_weights *w) {
    norm_step n = {nm->norm[k], nm->norm_p[k], w, f->c->eps, TS_OP_ADD, false, NULL, NULL, NULL};
    return n;
}

static sub_step ffn_sub(fwd *f, const ts_layer_names *nm, const ts_ffn_weights *w, ts_kept_layer *kept) {
    sub_step s = {.kind = SUB_FFN, .ffn_name = nm->ffn, .ffn_params = nm->lin, .ffn = w};
    if (kept) s.ffn_buf = kept->ffn;
    else s.ffn_buf = (ts_kept_ffn){f->a->big, f->a->big};
    return s;
}

/* The key padding of the encoder's self-attention: none with --mask none
 * (cross-attention still hides the source's pads). */
static const float *enc_key_mask(const fwd *f) { return f->c->mask == TS_MASK_NONE ? NULL : f->a->src_mask; }

/* Seed 004's TransformerEncoderBlock as written (variant seed004-residual):
 * h = norm1(x); attn(h) is computed and dropped; x = x + dropout(x);
 * x = norm2(x); x = x + ffn(x); x = dropout(x). Same step names as pre-LN.
 * Inference only (training runs the correct model). */
static ts_status self_attn_layer_seed004(fwd *f, const ts_layer_names *nm, const ts_enc_layer_weights *w,
                                         const float *in, float *out) {
    int S = f->S;
    int64_t n = (int64_t)f->B * S * f->D;
    ts_model_acts *a = f->a;
    float *tmp = a->tmp;
    norm_step n1 = layer_norm_step(f, nm, 0, &w->norm1), n2 = layer_norm_step(f, nm, 1, &w->norm2);
    n1.in_op = TS_OP_INPUT, n1.in_traced = true;
    n1.out = tmp, n1.mean = a->mean, n1.rstd = a->rstd;
    n2.out = out, n2.mean = a->mean, n2.rstd = a->rstd;
    attn_step at = {nm->self, nm->self_p, &w->self_attn, enc_key_mask(f), f->c->causal, f->D, NULL, 0,
                    scratch_attn(f, false, S, S), NULL, NULL};
    TS_TRY(norm(f, &n1, in, S));
    TS_TRY(self_attention(f, &at, tmp, S, tmp));
    if (!f->dry) memcpy(tmp, in, sizeof(float) * (size_t)n); // the attention output is overwritten unused
    dropout(f, tmp, tmp, n);
    if (!f->dry) ts_add(out, in, tmp, n);
    TS_TRY(norm(f, &n2, out, S));
    sub_step ff = ffn_sub(f, nm, &w->ffn, NULL);
    uint64_t key;
    TS_TRY(ffn(f, ff.ffn_name, ff.ffn_params, ff.ffn, out, S, ff.ffn_buf, tmp, &key));
    if (!f->dry) ts_add(out, out, tmp, n);
    dropout(f, out, out, n);
    ts_tensor t = view3(out, f->B, S, f->D);
    return emit(f, nm->p, "out", TS_OP_ADD, &t, TS_TAG_PLAIN, false);
}

/* Layer i of a self-attention stack (an encoder's, or a GPT's decoder.layers):
 * self-attention and FFN, in -> *y (out may be in). */
static ts_status self_attn_layer(fwd *f, int i, const ts_enc_layer_weights *w, const float *in, float *out,
                                 const float **y) {
    ts_layer_names nm;
    ts_layer_names_of(&nm, ts_model_stack_name(f->c), i);
    int S = f->S;
    if (f->c->norm == TS_NORM_PRE && (f->c->variants & TS_VARIANT_SEED004_RESIDUAL)) {
        *y = out;
        return self_attn_layer_seed004(f, &nm, w, in, out);
    }
    ts_kept_layer *kept = f->keep ? &f->keep->enc[i] : NULL;
    int Sk = f->cache ? f->pos0 + S : S;
    sub_step s[2];
    s[0] = (sub_step){.kind = SUB_SELF_ATTN,
                      .attn = {nm.self, nm.self_p, &w->self_attn, enc_key_mask(f), f->c->causal, f->D, NULL, 0,
                               kept ? kept->attn[0] : scratch_attn(f, false, S, Sk), NULL, NULL},
                      .norm = layer_norm_step(f, &nm, 0, &w->norm1)};
    if (f->cache) {
        size_t at_layer = (size_t)i * (size_t)f->cache->capacity * (size_t)f->D;
        s[0].attn.cache_k = f->cache->k + at_layer;
        s[0].attn.cache_v = f->cache->v + at_layer;
    }
    s[1] = ffn_sub(f, &nm, &w->ffn, kept);
    s[1].norm = layer_norm_step(f, &nm, 1, &w->norm2);
    return layer(f, nm.p, s, 2, kept, in, S, out, y);
}

/* Layer i of the encoder-decoder's decoder: masked self-attention,
 * cross-attention over the memory, FFN. */
static ts_status cross_attn_layer(fwd *f, int i, const ts_dec_layer_weights *w, const float *in, const float *mem,
                                  float *out, const float **y) {
    ts_layer_names nm;
    ts_layer_names_of(&nm, "decoder", i);
    int T = f->T, S = f->S;
    ts_kept_layer *kept = f->keep ? &f->keep->dec[i] : NULL;
    sub_step s[3];
    s[0] = (sub_step){.kind = SUB_SELF_ATTN,
                      .attn = {nm.self, nm.self_p, &w->self_attn, f->a->tgt_mask, !f->c->tgt_not_causal, f->D, NULL,
                               0, kept ? kept->attn[0] : scratch_attn(f, false, T, T), NULL, NULL},
                      .norm = layer_norm_step(f, &nm, 0, &w->norm1)};
    s[1] = (sub_step){.kind = SUB_CROSS_ATTN,
                      .attn = {nm.cross, nm.cross_p, &w->cross_attn, f->mem_mask, false, f->D, mem, S,
                               kept ? kept->attn[1] : scratch_attn(f, true, T, S), NULL, NULL},
                      .norm = layer_norm_step(f, &nm, 1, &w->norm2)};
    s[2] = ffn_sub(f, &nm, &w->ffn, kept);
    s[2].norm = layer_norm_step(f, &nm, 2, &w->norm3);
    return layer(f, nm.p, s, 3, kept, in, T, out, y);
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
} embed_step;

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
    TS_TRY(emit(f, NULL, e->input_name, TS_OP_INPUT, &t, TS_TAG_PLAIN, false));
    if (!e->tokens && c->pe == TS_PE_NONE) { // seed 000: the input is the embedding
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
        TS_TRY(emit(f, e->name, "tokens", TS_OP_EMBED, &t, TS_TAG_PLAIN, false));
    } else if (!f->dry) {
        memcpy(sum, e->vecs, sizeof(float) * (size_t)(B * S * D));
    }
    if (c->pe != TS_PE_NONE) {
        const float *pe = cat(learned ? e->w->positions : a->pe, (int64_t)f->pos0 * D);
        t = view((float *)pe, 2, (int64_t[]){S, D}, NULL);
        TS_TRY(emit(f, e->name, "pe", learned ? TS_OP_EMBED : TS_OP_POSENC, &t, TS_TAG_POSENC, false));
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
    TS_TRY(emit(f, e->name, "out", c->pe == TS_PE_NONE ? TS_OP_EMBED : TS_OP_ADD, &t, TS_TAG_PLAIN,
                (normed || c->pe == TS_PE_NONE) && !f->train));
    *res = out;
    return module_done(f, e->name, params, &t, flops0);
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

static ts_status head(fwd *f, const float *x, int S, ts_tensor *out) {
    const ts_model_config *c = f->c;
    ts_model_acts *a = f->a;
    ts_model_weights *w = &f->m->w;
    int64_t B = f->B, D = f->D;
    double flops0 = f->flops;
    float *logits = f->keep ? f->keep->logits : a->logits;
    if (c->head == TS_HEAD_LM) {
        linear(f, logits, x, B * S, (int)D, c->vocab, w->head_w, w->head_b, (int)D, TS_EPI_BIAS);
        *out = view3(logits, B, S, c->vocab);
        TS_TRY(emit(f, NULL, "logits", TS_OP_LINEAR, out, TS_TAG_LOGITS, false));
        /* tied: the table is counted once, under embed */
        return module_done(f, "generator", "generator.", out, flops0);
    }
    /* seed 004: encoder(x)[:, 0, :], dropout, classifier */
    float *cls = f->keep ? f->keep->cls : a->cls;
    if (!f->dry)
        for (int64_t b = 0; b < B; b++) memcpy(cls + b * D, x + b * S * D, sizeof(float) * (size_t)D);
    ts_tensor t = view(cls, 2, (int64_t[]){B, D}, NULL);
    TS_TRY(emit(f, NULL, "cls", TS_OP_CHUNK, &t, TS_TAG_PLAIN, false));
    uint64_t key = dropout(f, cls, cls, B * D);
    if (f->keep) f->keep->cls_key = key;
    linear(f, logits, cls, B, (int)D, c->n_labels, w->head_w, w->head_b, (int)D, TS_EPI_BIAS);
    *out = view(logits, 2, (int64_t[]){B, c->n_labels}, NULL);
    TS_TRY(emit(f, NULL, "logits", TS_OP_LINEAR, out, TS_TAG_LOGITS, false));
    return module_done(f, "classifier", "classifier.", out, flops0);
}

/* What made a stack's last output: a LayerNorm, unless pre-LN ends on a residual add. */
static ts_op stack_op(const ts_model_config *c) {
    if (c->final_norm || c->norm == TS_NORM_POST) return TS_OP_LAYERNORM;
    return c->variants & TS_VARIANT_NO_RESIDUAL ? TS_OP_DROPOUT : TS_OP_ADD;
}

static ts_status check_ids(const int32_t *ids, int64_t n, int vocab, const char *what) {
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            return ts_fail(TS_ERR_ARG, "%s id %d at position %lld is outside the vocabulary [0, %d)", what,
                           (int)ids[i], (long long)i, vocab);
    return TS_OK;
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
    return emit(f, NULL, name, TS_OP_MASK, &t, TS_TAG_PLAIN, false);
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
                        keep ? &keep->src : NULL};
        st = embed(f, &e, &x);
        attn_step at = {"self_attn", "self_attn.", &m->w.attn, enc_key_mask(f), c->causal, din, NULL, 0,
                        keep ? keep->lone : scratch_attn(f, false, S, S), NULL, NULL};
        float *o = keep ? keep->lone_out : a->x;
        if (!st) st = self_attention(f, &at, x, S, o);
        *out = view3(o, f->B, S, f->D);
        goto done;
    }
    const float *mem = in->memory;
    if (!(encdec && mem)) {
        bool tokens = c->input == TS_INPUT_TOKENS && !in->src_embedded;
        embed_step e = {"embed", "input", &m->w.embed, tokens, in->src_ids, in->src_embedded, S, a->x,
                        keep ? &keep->src : NULL};
        st = embed(f, &e, &x);
        for (int i = 0; !st && i < c->layers; i++) st = self_attn_layer(f, i, &m->w.enc[i], x, a->x, &x);
        const char *stack = ts_model_stack_name(c);
        char stack_out[16];
        snprintf(stack_out, sizeof stack_out, "%s.out", stack);
        if (keep) keep->enc_top = x;
        if (!st) st = final_norm(f, stack, &m->w.enc_norm, &x, a->x, S, keep ? &keep->enc_norm : NULL);
        ts_tensor t = view3(x, f->B, S, f->D);
        if (!st) st = emit(f, NULL, stack_out, stack_op(c), &t, TS_TAG_PLAIN, true);
        mem = x;
        *out = t;
    }
    if (keep) keep->enc_out = mem;
    if (!st && encdec) {
        f->row_mask = NULL;
        const float *y = NULL;
        bool tokens = c->input == TS_INPUT_TOKENS && !in->tgt_embedded;
        embed_step e = {"decoder.embed", "decoder.input", &m->w.dec_embed, tokens, in->tgt_ids, in->tgt_embedded,
                        T, a->y, keep ? &keep->tgt : NULL};
        st = embed(f, &e, &y);
        for (int i = 0; !st && i < c->dec_layers; i++) st = cross_attn_layer(f, i, &m->w.dec[i], y, mem, a->y, &y);
        if (keep) keep->dec_top = y;
        if (!st) st = final_norm(f, "decoder", &m->w.dec_norm, &y, a->y, T, keep ? &keep->dec_norm : NULL);
        if (keep) keep->dec_out = y;
        ts_tensor t = view3(y, f->B, T, f->D);
        if (!st) st = emit(f, NULL, "decoder.out", stack_op(c), &t, TS_TAG_PLAIN, true);
        x = y;
        *out = t;
    }
    if (!st && c->head != TS_HEAD_NONE) st = head(f, x, encdec ? T : S, out);
done:
    a->src_mask = (float *)saved_src;
    a->tgt_mask = (float *)saved_tgt;
    return st;
}

static void fwd_setup(fwd *f, ts_model *m, ts_model_acts *a, const ts_hook *hook) {
    memset(f, 0, sizeof *f);
    f->m = m;
    f->c = &m->cfg;
    f->a = a;
    f->hook = hook;
    f->dry = m->dry;
    f->watch = m->dry || (hook && (hook->fn || hook->edit)); /* an edit needs every step made where it can act */
    f->train = m->training;
    f->p = m->training ? m->cfg.dropout : 0.0f;
    f->B = m->cfg.batch;
    f->S = m->S;
    f->T = m->T;
    f->D = m->cfg.d_model;
    f->H = m->cfg.heads;
    f->hd = f->D / f->H;
    f->threads = ts_kernels_threads();
    /* A parallel region costs microseconds (much more on a busy machine);
     * below ~64K elements a step is cheaper on one thread. */
    f->par = f->threads > 1 && (int64_t)f->B * m->L * f->D >= (1 << 16);
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
