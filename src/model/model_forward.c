/* model_forward: every step of the forward pass, each handed to the hook.
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

/* ---- the activation plan --------------------------------------------------- */

static float *take(size_t *cursor, unsigned char *base, int64_t floats) {
    float *p = base ? (float *)(base + *cursor) : NULL;
    *cursor += ts_arena_round(sizeof(float) * (size_t)(floats > 0 ? floats : 0));
    return floats > 0 ? p : NULL;
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

size_t ts_model_plan_acts(const ts_model *m, ts_model_acts *a, unsigned char *base) {
    const ts_model_config *c = &m->cfg;
    int64_t B = c->batch, S = m->S, T = m->T, L = m->L, D = c->d_model, H = c->heads, F = c->ffn;
    bool encdec = c->arch == TS_ARCH_ENCODER_DECODER;
    /* The scratch area at its widest: attention (projections + scores), the
     * FFN hidden layer, or a LayerNorm's staging (out and y side by side). */
    int64_t big = B * S * 3 * D + B * H * S * S;
    if (encdec) {
        big = max64(big, B * T * 3 * D + B * H * T * T);
        big = max64(big, B * T * D + B * S * 2 * D + B * H * T * S);
    }
    if (c->arch != TS_ARCH_ATTENTION) big = max64(big, B * L * F);
    big = max64(big, 2 * B * L * D);
    memset(a, 0, sizeof *a);
    size_t cur = 0;
    a->x = take(&cur, base, B * S * D);
    a->y = take(&cur, base, encdec ? B * T * D : 0);
    a->tmp = take(&cur, base, B * L * D);
    a->ctx = take(&cur, base, B * L * D);
    a->big = take(&cur, base, big);
    a->big_floats = (size_t)big;
    a->mean = take(&cur, base, B * L);
    a->rstd = take(&cur, base, B * L);
    a->std = take(&cur, base, B * L);
    a->ids = take(&cur, base, c->input == TS_INPUT_TOKENS ? B * L : 0);
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
    bool train;
    int B, D, H, hd;
    int threads; // the kernels' thread count, for the loops here
    bool par;    // enough work per pass to be worth a parallel region
    double flops;
    ts_model_summary *sum;
    const float *row_mask; // (B, S) -inf at pad queries while the encoder runs with mask padding-both
    const float *mem_mask; // (B, S) the memory's padded keys for cross-attention, or NULL
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

static ts_tensor view3(float *data, int64_t a, int64_t b, int64_t c) {
    return view(data, 3, (int64_t[]){a, b, c}, NULL);
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

/* Hand one step to the hook. `alias`: the tensor was already traced under
 * another name (a layer's out is its last norm's out), so it costs no memory.
 * `factor` != 0: every value is that of the step whose tensor was `of` (NULL:
 * the previous step) times factor (see ts_hook_like_fn); an alias is the
 * previous step's times 1 when it is the same memory, which the hook checks. */
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

/* out (rows, n_out) = in (rows, n_in) @ w^T (n_in -> n_out) + b, as nn.Linear. */
static void linear(fwd *f, float *out, const float *in, int64_t rows, int n_in, int n_out, const float *w,
                   const float *b, int ld_in, ts_epilogue epi) {
    f->flops += 2.0 * (double)rows * n_in * n_out;
    if (f->dry) return;
    ts_gemm(false, true, (int)rows, n_out, n_in, 1.0f, in, ld_in, w, n_in, 0.0f, out, n_out, b ? epi : TS_EPI_NONE, b);
}

static void add(fwd *f, float *out, const float *a, const float *b, int64_t n) {
    if (!f->dry) ts_add(out, a, b, n);
}

/* The residual add of an encoder (or GPT) layer, out = stream + sub; with
 * the no-residual variant the sublayer's output alone goes on. */
static void skip_add(fwd *f, float *out, const float *stream, const float *sub, int64_t n) {
    if (!(f->c->variants & TS_VARIANT_NO_RESIDUAL)) add(f, out, stream, sub, n);
    else if (!f->dry && out != sub) memcpy(out, sub, sizeof(float) * (size_t)n);
}

/* What skip_add made, for the trace: a sum, or the sublayer's dropout. */
static ts_op skip_op(const fwd *f) { return f->c->variants & TS_VARIANT_NO_RESIDUAL ? TS_OP_DROPOUT : TS_OP_ADD; }

/* Inverted dropout with a counter-based stream: element i of call k keeps its
 * value when hash(seed, k, i) >= p, the same on any number of threads. */
static void dropout(fwd *f, float *x, int64_t n) {
    if (!f->train || f->c->dropout <= 0.0f) return;
    uint64_t key = ts_mix64(f->c->seed ^ ts_mix64(0xD0D0ull + f->m->dropout_calls++));
    if (f->dry) return;
    double p = f->c->dropout;
    float keep = (float)(1.0 / (1.0 - p));
    TS_MODEL_OMP(parallel for num_threads(f->threads) if(f->par) schedule(static))
    for (int64_t i = 0; i < n; i++) x[i] = ts_u01(key, (uint64_t)i) < p ? 0.0f : x[i] * keep;
}

/* ---- LayerNorm ----------------------------------------------------------------- */

/* Seed 001's LayerNorm over (batch, features), variant seed001-layernorm: the
 * steps of norm() below, with mean and std (1, S, 1), one per position, and
 * gamma, beta shown (B, D) as the seed shapes its parameters (model_variants.c). */
static ts_status norm_two_dims(fwd *f, const char *prefix, const char *param_prefix, const float *in, float *out,
                               int S, const ts_norm_weights *w, float eps, ts_op in_op, bool in_alias) {
    double flops0 = f->flops;
    int64_t B = f->B, D = f->D;
    ts_model_acts *a = f->a;
    ts_tensor t = view3((float *)in, B, S, D);
    TS_TRY(emit(f, prefix, "in", in_op, &t, TS_TAG_NORM_IN, in_alias));
    float *y = f->watch ? a->big : NULL; // a norm's input never lives in big
    if (!f->dry) ts_model_layernorm_two_dims(out, y, a->mean, a->std, in, w->gamma, w->beta, (int)B, S, (int)D, eps);
    if (f->watch) {
        t = view3(a->mean, 1, S, 1);
        TS_TRY(emit(f, prefix, "mean", TS_OP_MEAN, &t, TS_TAG_NORM_STAT, false));
        t = view3(a->std, 1, S, 1);
        TS_TRY(emit(f, prefix, "std", TS_OP_STD, &t, TS_TAG_NORM_STAT, false));
        t = view3(y, B, S, D);
        TS_TRY(emit(f, prefix, "y", TS_OP_LAYERNORM, &t, TS_TAG_PLAIN, false));
        t = view(w->gamma, 2, (int64_t[]){B, D}, (int64_t[]){0, 1});
        TS_TRY(emit(f, prefix, "gamma", TS_OP_PARAM, &t, TS_TAG_PARAM, false));
        t = view(w->beta, 2, (int64_t[]){B, D}, (int64_t[]){0, 1});
        TS_TRY(emit(f, prefix, "beta", TS_OP_PARAM, &t, TS_TAG_PARAM, false));
    }
    t = view3(out, B, S, D);
    TS_TRY(emit(f, prefix, "out", TS_OP_LAYERNORM, &t, TS_TAG_NORM_OUT, false));
    return module_done(f, prefix, param_prefix, &t, flops0);
}

static bool identity_affine(const ts_norm_weights *w, int64_t D) {
    if (!w->gamma || !w->beta) return false;
    for (int64_t j = 0; j < D; j++)
        if (w->gamma[j] != 1.0f || w->beta[j] != 0.0f) return false;
    return true;
}

/* out = gamma * (in - mean) / std + beta over the last dim, std = sqrt(var + eps)
 * with the biased variance, as seed 000's LayerNormalization and nn.LayerNorm.
 * Traces in, mean, std (B, S, 1), y = (in - mean) / std, gamma, beta, out.
 * `in_alias`: `in` was traced already (a pre-LN block's input). out may be in. */
static ts_status norm(fwd *f, const char *prefix, const char *param_prefix, const float *in, float *out, int S,
                      const ts_norm_weights *w, float eps, ts_op in_op, bool in_alias) {
    if (f->c->variants & TS_VARIANT_SEED001_LAYERNORM)
        return norm_two_dims(f, prefix, param_prefix, in, out, S, w, eps, in_op, in_alias);
    double flops0 = f->flops;
    int64_t B = f->B, D = f->D, rows = B * S;
    ts_model_acts *a = f->a;
    ts_tensor tin = view3((float *)in, B, S, D);
    TS_TRY(emit(f, prefix, "in", in_op, &tin, TS_TAG_NORM_IN, in_alias));
    /* In place goes through the scratch area: the kernel reads a row while it writes. */
    float *dst = in == out ? a->big : out;
    if (!f->dry) ts_layernorm(dst, a->mean, a->rstd, in, w->gamma, w->beta, rows, (int)D, eps);
    ts_tensor ty = view3(NULL, B, S, D);
    if (f->watch) {
        float *y = at(a->big, rows * D); // big holds >= 2 (B, L, D)
        if (!f->dry) {
            /* The kernel without gamma and beta: the same mean and rstd, so
             * the same y the normalised out was made from. */
            ts_layernorm(y, NULL, NULL, in, NULL, NULL, rows, (int)D, eps);
            for (int64_t r = 0; r < rows; r++) a->std[r] = 1.0f / a->rstd[r];
        }
        ts_tensor stat = view3(a->mean, B, S, 1);
        TS_TRY(emit(f, prefix, "mean", TS_OP_MEAN, &stat, TS_TAG_NORM_STAT, false));
        stat = view3(a->std, B, S, 1);
        TS_TRY(emit(f, prefix, "std", TS_OP_STD, &stat, TS_TAG_NORM_STAT, false));
        ty = view3(y, B, S, D);
        TS_TRY(emit(f, prefix, "y", TS_OP_LAYERNORM, &ty, TS_TAG_PLAIN, false));
        ts_tensor g = view(w->gamma, 1, (int64_t[]){D}, NULL);
        TS_TRY(emit(f, prefix, "gamma", TS_OP_PARAM, &g, TS_TAG_PARAM, false));
        g = view(w->beta, 1, (int64_t[]){D}, NULL);
        TS_TRY(emit(f, prefix, "beta", TS_OP_PARAM, &g, TS_TAG_PARAM, false));
    }
    if (dst != out && !f->dry) memcpy(out, dst, sizeof(float) * (size_t)(rows * D));
    ts_tensor tout = view3(out, B, S, D);
    /* gamma 1 and beta 0 (a LayerNorm that has not learned yet) make out
     * y times one plus zero: y's values, which a hook need not read again. */
    if (f->watch && !f->dry && identity_affine(w, D))
        TS_TRY(emit_like(f, prefix, "out", TS_OP_LAYERNORM, &tout, TS_TAG_NORM_OUT, false, &ty, 1.0f));
    else
        TS_TRY(emit(f, prefix, "out", TS_OP_LAYERNORM, &tout, TS_TAG_NORM_OUT, false));
    return module_done(f, prefix, param_prefix, &tout, flops0);
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

/* Key padding (B, Sk), the causal rule and hidden query rows (B, Sq), written
 * into the scores as -inf; seed 003's masks add -1e9 instead (its keys' -1e9
 * comes in key_mask, build_mask). */
static void apply_mask(fwd *f, float *att, int Sq, int Sk, const float *key_mask, bool causal,
                       const float *row_mask) {
    int64_t BH = (int64_t)f->B * f->H;
    int H = f->H;
    bool seed003 = f->c->variants & TS_VARIANT_SEED003_MASK;
    TS_MODEL_OMP(parallel for num_threads(f->threads) if(f->par) schedule(static))
    for (int64_t bh = 0; bh < BH; bh++) {
        const float *km = key_mask ? key_mask + (bh / H) * Sk : NULL;
        const float *rm = row_mask ? row_mask + (bh / H) * Sq : NULL;
        for (int r = 0; r < Sq; r++) {
            float *row = att + (bh * Sq + r) * Sk;
            if (rm && rm[r] != 0.0f) {
                for (int c = 0; c < Sk; c++) row[c] = seed003 ? row[c] + SEED003_FILL : -INFINITY;
                continue;
            }
            for (int c = 0; c < Sk; c++) {
                if (km) row[c] += km[c];
                if (causal && c > r) row[c] = seed003 ? row[c] + SEED003_FILL : -INFINITY;
            }
        }
    }
}

/* One head's share of scaled dot-product attention. Heads are independent,
 * so the pass runs one (batch, head) pair per iteration on each thread; the
 * GEMMs inside run on that thread alone (nested regions stay inactive). */
typedef struct attn_job {
    const heads_at *q, *k, *v;
    int Sq, Sk, H, hd, D;
    float *att;            // (B, H, Sq, Sk)
    float *ctx;            // (B, Sq, H, hd)
    const float *key_mask; // (B, Sk) or NULL
    bool causal;
} attn_job;

static float *att_of(const attn_job *j, int64_t bh) { return j->att + bh * j->Sq * j->Sk; }

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
    return ts_softmax_rows(s, s, j->Sq, j->Sk, km, with_mask && j->causal, 0);
}

/* values of head h go straight to columns h*hd.. of ctx: the permute back is free. */
static void head_values(const attn_job *j, int64_t bh) {
    int64_t b = bh / j->H, h = bh % j->H;
    ts_gemm(false, false, j->Sq, j->hd, j->Sk, 1.0f, att_of(j, bh), j->Sk,
            j->v->base + b * j->v->bstride + h * j->v->hstride, j->v->ld, 0.0f,
            j->ctx + b * j->Sq * j->D + h * j->hd, j->D, TS_EPI_NONE, NULL);
}

/* values (B, H, Sq, hd) = softmax(q k^T / sqrt(hd) + mask) v, written into
 * ctx in (B, Sq, H, hd) order; att (B, H, Sq, Sk) ends holding the weights. */
static ts_status sdpa(fwd *f, const char *prefix, const heads_at *q, const heads_at *k, const heads_at *v,
                      int Sq, int Sk, float *att, const float *key_mask, bool causal) {
    int B = f->B, H = f->H, hd = f->hd, D = f->D;
    ts_model_acts *a = f->a;
    float scale = ts_model_attn_scale(f->c, hd);
    int64_t n_att = (int64_t)B * H * Sq * Sk, BH = (int64_t)B * H, empty = 0;
    f->flops += 2.0 * 2.0 * (double)B * H * Sq * Sk * hd;
    attn_job j = {q, k, v, Sq, Sk, H, hd, D, att, a->ctx, key_mask, causal};
    ts_tensor tatt = view(att, 4, (int64_t[]){B, H, Sq, Sk}, NULL);
    const float *row_mask = f->row_mask;
    bool masked = key_mask || causal || row_mask;
    bool unshifted = f->c->variants & TS_VARIANT_SEED001_SOFTMAX;
    /* hidden rows, seed 003's -1e9 and seed 001's softmax go into the scores, as a watcher sees them */
    bool staged = f->watch || row_mask || (masked && (f->c->variants & TS_VARIANT_SEED003_MASK)) || unshifted;
    if (f->dry) {
        /* shapes only */
    } else if (!staged) { /* nobody looks: each head start to finish while its scores sit in cache */
        TS_MODEL_OMP(parallel for num_threads(f->threads) if(f->par) schedule(dynamic, 1) reduction(+:empty))
        for (int64_t bh = 0; bh < BH; bh++) {
            head_scores(&j, bh, scale);
            empty += head_softmax(&j, bh, masked);
            head_values(&j, bh);
        }
    } else {
        TS_MODEL_OMP(parallel for num_threads(f->threads) if(f->par) schedule(dynamic, 1))
        for (int64_t bh = 0; bh < BH; bh++) head_scores(&j, bh, 1.0f);
    }
    if (staged) {
        TS_TRY(emit(f, prefix, "scores", TS_OP_MATMUL, &tatt, TS_TAG_ATTN_SCORES, false));
        /* With no mask to add to them, scaled scores a hook can record from
         * the scores (a trace writer's scaled view) are scaled per head below,
         * in cache, instead of in a pass of their own over all of them. */
        bool scale_later = false;
        if (!masked) TS_TRY(emit_ahead(f, prefix, "scaled", TS_OP_SCALE, &tatt, TS_TAG_ATTN_SCORES, scale, &scale_later));
        if (!scale_later) {
            if (!f->dry) ts_scale(att, att, scale, n_att);
            TS_TRY(emit_like(f, prefix, "scaled", TS_OP_SCALE, &tatt, TS_TAG_ATTN_SCORES, false, NULL, scale));
        }
        if (masked) {
            if (!f->dry) apply_mask(f, att, Sq, Sk, key_mask, causal, row_mask);
            TS_TRY(emit(f, prefix, "masked", TS_OP_MASK, &tatt, TS_TAG_ATTN_SCORES, false));
        }
        if (!f->dry) { /* the mask is in the scores now */
            TS_MODEL_OMP(parallel for num_threads(f->threads) if(f->par) schedule(dynamic, 1) reduction(+:empty))
            for (int64_t bh = 0; bh < BH; bh++) {
                if (scale_later) ts_scale(att_of(&j, bh), att_of(&j, bh), scale, (int64_t)Sq * Sk);
                if (unshifted) ts_model_softmax_unshifted(att_of(&j, bh), Sq, Sk);
                else empty += head_softmax(&j, bh, false);
                head_values(&j, bh);
            }
        }
    }
    f->m->empty_rows += empty;
    heads_at vals = {a->ctx, (int64_t)Sq * D, hd, D};
    ts_tensor tv = heads_view(f, &vals, Sq);
    TS_TRY(emit(f, prefix, "weights", TS_OP_SOFTMAX, &tatt, TS_TAG_ATTN_WEIGHTS, false));
    TS_TRY(emit(f, prefix, "values", TS_OP_MATMUL, &tv, TS_TAG_HEADS, false));
    if (f->c->variants & TS_VARIANT_SEED000_RESHAPE) { /* no permute back; the q/k/v rows are spent */
        if (!f->dry) ts_model_unpermuted_concat(a->ctx, a->big, B, Sq, H, hd);
    } else {
        ts_tensor perm = view(a->ctx, 4, (int64_t[]){B, Sq, H, hd}, NULL);
        TS_TRY(emit(f, prefix, "values_perm", TS_OP_PERMUTE, &perm, TS_TAG_PLAIN, false));
    }
    ts_tensor concat = view3(a->ctx, B, Sq, D);
    return emit(f, prefix, "concat", TS_OP_RESHAPE, &concat, TS_TAG_PLAIN, false);
}

/* Both attentions end alike once q is traced: k and v as views of their
 * projection, the attention itself, then the output projection (B, Sq, D). */
static ts_status attend_and_project(fwd *f, const char *prefix, const char *param_prefix, const ts_attn_weights *w,
                                    const heads_at *q, const heads_at *k, const heads_at *v, int Sq, int Sk,
                                    float *att, const float *key_mask, bool causal, float *out, double flops0) {
    int64_t B = f->B, D = f->D;
    ts_tensor t = heads_view(f, k, Sk);
    TS_TRY(emit(f, prefix, "k", TS_OP_CHUNK, &t, TS_TAG_HEADS, false));
    t = heads_view(f, v, Sk);
    TS_TRY(emit(f, prefix, "v", TS_OP_CHUNK, &t, TS_TAG_HEADS, false));
    TS_TRY(sdpa(f, prefix, q, k, v, Sq, Sk, att, key_mask, causal));
    linear(f, out, f->a->ctx, B * Sq, (int)D, (int)D, w->out_w, w->out_b, (int)D, TS_EPI_BIAS);
    t = view3(out, B, Sq, D);
    TS_TRY(emit(f, prefix, "out", TS_OP_LINEAR, &t, TS_TAG_PLAIN, false));
    return module_done(f, prefix, param_prefix, &t, flops0);
}

/* Self-attention as seed 000 writes it: qkv (B, S, 3D) -> view (B, S, H, 3hd)
 * -> permute (B, H, S, 3hd) -> chunk into q, k, v (B, H, S, hd), all views of
 * one buffer (in_proj rows are stored per head: see model.c). */
static ts_status self_attention(fwd *f, const char *prefix, const char *param_prefix, const ts_attn_weights *w,
                                const float *x, int din, int S, const float *key_mask, bool causal, float *out) {
    double flops0 = f->flops;
    int64_t B = f->B, D = f->D, H = f->H, hd = f->hd;
    float *qkv = f->a->big, *att = at(f->a->big, B * S * 3 * D);
    linear(f, qkv, x, B * S, din, (int)(3 * D), w->in_w, w->in_b, din, TS_EPI_BIAS);
    ts_tensor t = view3(qkv, B, S, 3 * D);
    TS_TRY(emit(f, prefix, "qkv", TS_OP_LINEAR, &t, TS_TAG_PLAIN, false));
    t = view(qkv, 4, (int64_t[]){B, S, H, 3 * hd}, NULL);
    TS_TRY(emit(f, prefix, "qkv_heads", TS_OP_RESHAPE, &t, TS_TAG_PLAIN, false));
    heads_at q = {qkv, S * 3 * D, 3 * hd, (int)(3 * D)};
    t = view(qkv, 4, (int64_t[]){B, H, S, 3 * hd}, (int64_t[]){S * 3 * D, 3 * hd, 3 * D, 1});
    TS_TRY(emit(f, prefix, "qkv_perm", TS_OP_PERMUTE, &t, TS_TAG_HEADS, false));
    heads_at k = q, v = q;
    k.base = cat(qkv, hd);
    v.base = cat(qkv, 2 * hd);
    t = heads_view(f, &q, S);
    TS_TRY(emit(f, prefix, "q", TS_OP_CHUNK, &t, TS_TAG_HEADS, false));
    return attend_and_project(f, prefix, param_prefix, w, &q, &k, &v, S, S, att, key_mask, causal, out, flops0);
}

/* Cross-attention: q from the decoder (B, T, D), k and v from the memory
 * (B, S, D). q_proj (B, T, D) -> q_heads (B, T, H, hd) -> q (B, H, T, hd);
 * kv (B, S, 2D) -> kv_heads (B, S, H, 2hd) -> kv_perm (B, H, S, 2hd) -> k, v. */
static ts_status cross_attention(fwd *f, const char *prefix, const char *param_prefix, const ts_attn_weights *w,
                                 const float *x, int T, const float *mem, int S, const float *key_mask, float *out) {
    double flops0 = f->flops;
    int64_t B = f->B, D = f->D, H = f->H, hd = f->hd;
    float *qp = f->a->big, *kv = at(f->a->big, B * T * D), *att = at(kv, B * S * 2 * D);
    linear(f, qp, x, B * T, (int)D, (int)D, w->in_w, w->in_b, (int)D, TS_EPI_BIAS);
    ts_tensor t = view3(qp, B, T, D);
    TS_TRY(emit(f, prefix, "q_proj", TS_OP_LINEAR, &t, TS_TAG_PLAIN, false));
    t = view(qp, 4, (int64_t[]){B, T, H, hd}, NULL);
    TS_TRY(emit(f, prefix, "q_heads", TS_OP_RESHAPE, &t, TS_TAG_PLAIN, false));
    heads_at q = {qp, T * D, hd, (int)D};
    t = heads_view(f, &q, T);
    TS_TRY(emit(f, prefix, "q", TS_OP_PERMUTE, &t, TS_TAG_HEADS, false));
    linear(f, kv, mem, B * S, (int)D, (int)(2 * D), cat(w->in_w, D * D), cat(w->in_b, D), (int)D, TS_EPI_BIAS);
    t = view3(kv, B, S, 2 * D);
    TS_TRY(emit(f, prefix, "kv", TS_OP_LINEAR, &t, TS_TAG_PLAIN, false));
    t = view(kv, 4, (int64_t[]){B, S, H, 2 * hd}, NULL);
    TS_TRY(emit(f, prefix, "kv_heads", TS_OP_RESHAPE, &t, TS_TAG_PLAIN, false));
    t = view(kv, 4, (int64_t[]){B, H, S, 2 * hd}, (int64_t[]){S * 2 * D, 2 * hd, 2 * D, 1});
    TS_TRY(emit(f, prefix, "kv_perm", TS_OP_PERMUTE, &t, TS_TAG_HEADS, false));
    heads_at k = {kv, S * 2 * D, 2 * hd, (int)(2 * D)}, v = k;
    v.base = cat(kv, hd);
    return attend_and_project(f, prefix, param_prefix, w, &q, &k, &v, T, S, att, key_mask, false, out, flops0);
}

/* ---- feed-forward ------------------------------------------------------------------ */

/* out = linear2(dropout(act(linear1(x)))); traces hidden, act, dropout, out. */
static ts_status ffn(fwd *f, const char *prefix, const char *param_prefix, const ts_ffn_weights *w,
                     const float *x, int S, float *out) {
    double flops0 = f->flops;
    int64_t B = f->B, D = f->D, F = f->c->ffn, n = B * S * F;
    ts_activation act = f->c->activation;
    bool gelu = act != TS_ACT_RELU;
    void (*activate)(float *, const float *, int64_t) =
        act == TS_ACT_GELU ? ts_gelu : act == TS_ACT_GELU_TANH ? ts_gelu_tanh : ts_relu;
    float *hidden = f->a->big;
    /* the GEMM applies ReLU and exact GELU as it stores; GELU's tanh form runs after it */
    ts_epilogue fused = act == TS_ACT_GELU ? TS_EPI_BIAS_GELU : act == TS_ACT_RELU ? TS_EPI_BIAS_RELU : TS_EPI_BIAS;
    linear(f, hidden, x, B * S, (int)D, (int)F, w->w1, w->b1, (int)D, f->watch ? TS_EPI_BIAS : fused);
    if (!f->watch && !f->dry && act == TS_ACT_GELU_TANH) ts_gelu_tanh(hidden, hidden, n);
    ts_tensor t = view3(hidden, B, S, F);
    if (f->watch) {
        /* hidden and its ReLU at once, before the ReLU is made: a trace writer
         * then reads hidden's memory once for the statistics of both. */
        const ts_hook_step pair[] = {{"hidden", TS_OP_LINEAR, &t, TS_TAG_PLAIN, false},
                                     {"act", TS_OP_RELU, &t, TS_TAG_PLAIN, true}};
        bool paired = false;
        if (!gelu) TS_TRY(emit_group(f, prefix, pair, 2, &paired));
        if (!paired) TS_TRY(emit(f, prefix, "hidden", TS_OP_LINEAR, &t, TS_TAG_PLAIN, false));
        if (!f->dry) activate(hidden, hidden, n);
        /* ReLU's output is its input through ReLU, which a trace can store as
         * a view of the input's values; GELU's a reader could not redo to the bit. */
        if (!paired)
            TS_TRY(emit_like(f, prefix, "act", gelu ? TS_OP_GELU : TS_OP_RELU, &t, TS_TAG_PLAIN, false, NULL,
                          gelu ? 0.0f : 1.0f));
    }
    dropout(f, hidden, n);
    TS_TRY(emit(f, prefix, "dropout", TS_OP_DROPOUT, &t, TS_TAG_PLAIN, !f->train));
    linear(f, out, hidden, B * S, (int)F, (int)D, w->w2, w->b2, (int)F, TS_EPI_BIAS);
    t = view3(out, B, S, D);
    TS_TRY(emit(f, prefix, "out", TS_OP_LINEAR, &t, TS_TAG_PLAIN, false));
    return module_done(f, prefix, param_prefix, &t, flops0);
}

/* ---- layers ------------------------------------------------------------------------ */

/* The key padding of the encoder's self-attention: none with --mask none
 * (cross-attention still hides the source's pads). */
static const float *enc_key_mask(const fwd *f) { return f->c->mask == TS_MASK_NONE ? NULL : f->a->src_mask; }

/* The trace names of encoder layer i's parts: its prefix, the sublayers' and
 * their parameters' (state_dict) prefixes. */
typedef struct enc_names {
    char p[64], attn[64], attnp[64], n1[64], n1p[64], n2[64], n2p[64], ff[64], lin[64];
} enc_names;

static void enc_names_of(enc_names *nm, const char *stack, int i) {
    snprintf(nm->p, sizeof nm->p, "%s.layers.%d", stack, i);
    snprintf(nm->attn, sizeof nm->attn, "%s.layers.%d.self_attn", stack, i);
    snprintf(nm->attnp, sizeof nm->attnp, "%s.layers.%d.self_attn.", stack, i);
    snprintf(nm->n1, sizeof nm->n1, "%s.layers.%d.norm1", stack, i);
    snprintf(nm->n1p, sizeof nm->n1p, "%s.layers.%d.norm1.", stack, i);
    snprintf(nm->n2, sizeof nm->n2, "%s.layers.%d.norm2", stack, i);
    snprintf(nm->n2p, sizeof nm->n2p, "%s.layers.%d.norm2.", stack, i);
    snprintf(nm->ff, sizeof nm->ff, "%s.layers.%d.ffn", stack, i);
    snprintf(nm->lin, sizeof nm->lin, "%s.layers.%d.linear", stack, i);
}

/* Seed 004's TransformerEncoderBlock as written (variant seed004-residual):
 * h = norm1(x); attn(h) is computed and dropped; x = x + dropout(x);
 * x = norm2(x); x = x + ffn(x); x = dropout(x). Same step names as pre-LN. */
static ts_status encoder_layer_seed004(fwd *f, const enc_names *nm, const ts_enc_layer_weights *w, const float *in,
                                       float *out) {
    const ts_model_config *c = f->c;
    int S = f->m->S, D = f->D;
    int64_t n = (int64_t)f->B * S * D;
    float *tmp = f->a->tmp;
    TS_TRY(norm(f, nm->n1, nm->n1p, in, tmp, S, &w->norm1, c->eps, TS_OP_INPUT, true));
    TS_TRY(self_attention(f, nm->attn, nm->attnp, &w->self_attn, tmp, D, S, enc_key_mask(f), c->causal, tmp));
    if (!f->dry) memcpy(tmp, in, sizeof(float) * (size_t)n); // the attention output is overwritten unused
    dropout(f, tmp, n);
    add(f, out, in, tmp, n);
    TS_TRY(norm(f, nm->n2, nm->n2p, out, out, S, &w->norm2, c->eps, TS_OP_ADD, false));
    TS_TRY(ffn(f, nm->ff, nm->lin, &w->ffn, out, S, tmp));
    add(f, out, out, tmp, n);
    dropout(f, out, n);
    ts_tensor t = view3(out, f->B, S, D);
    return emit(f, nm->p, "out", TS_OP_ADD, &t, TS_TAG_PLAIN, false);
}

/* One encoder layer, in -> out (out may be in).
 * post-LN (seed 000, the paper): x = norm1(x + attn(x)); x = norm2(x + ffn(x))
 * pre-LN (seed 004, norm_first):  x = x + attn(norm1(x)); x = x + ffn(norm2(x)) */
static ts_status encoder_layer(fwd *f, int i, const ts_enc_layer_weights *w, const float *in, float *out) {
    enc_names nm;
    enc_names_of(&nm, ts_model_stack_name(f->c), i);
    int S = f->m->S, D = f->D;
    int64_t n = (int64_t)f->B * S * D;
    float *tmp = f->a->tmp;
    const float *mask = enc_key_mask(f);
    const ts_model_config *c = f->c;
    ts_tensor t;
    if (c->norm == TS_NORM_POST) {
        TS_TRY(self_attention(f, nm.attn, nm.attnp, &w->self_attn, in, D, S, mask, c->causal, tmp));
        dropout(f, tmp, n);
        skip_add(f, tmp, in, tmp, n);
        TS_TRY(norm(f, nm.n1, nm.n1p, tmp, out, S, &w->norm1, c->eps, skip_op(f), false));
        TS_TRY(ffn(f, nm.ff, nm.lin, &w->ffn, out, S, tmp));
        dropout(f, tmp, n);
        skip_add(f, tmp, out, tmp, n);
        TS_TRY(norm(f, nm.n2, nm.n2p, tmp, out, S, &w->norm2, c->eps, skip_op(f), false));
        t = view3(out, f->B, S, D);
        return emit(f, nm.p, "out", TS_OP_LAYERNORM, &t, TS_TAG_PLAIN, true);
    }
    if (c->variants & TS_VARIANT_SEED004_RESIDUAL) return encoder_layer_seed004(f, &nm, w, in, out);
    TS_TRY(norm(f, nm.n1, nm.n1p, in, tmp, S, &w->norm1, c->eps, TS_OP_INPUT, true));
    TS_TRY(self_attention(f, nm.attn, nm.attnp, &w->self_attn, tmp, D, S, mask, c->causal, tmp));
    dropout(f, tmp, n);
    skip_add(f, out, in, tmp, n);
    TS_TRY(norm(f, nm.n2, nm.n2p, out, tmp, S, &w->norm2, c->eps, skip_op(f), false));
    TS_TRY(ffn(f, nm.ff, nm.lin, &w->ffn, tmp, S, tmp));
    dropout(f, tmp, n);
    skip_add(f, out, out, tmp, n);
    t = view3(out, f->B, S, D);
    return emit(f, nm.p, "out", skip_op(f), &t, TS_TAG_PLAIN, false);
}

/* One decoder layer: masked self-attention, cross-attention over the memory,
 * FFN, with norm1..3 after (post-LN) or before (pre-LN) each. */
static ts_status decoder_layer(fwd *f, int i, const ts_dec_layer_weights *w, const float *in, const float *mem,
                               float *out) {
    char p[64], sa[64], ca[64], sap[64], cap[64], ff[64], lin[64], nn[3][64], np[3][64];
    snprintf(p, sizeof p, "decoder.layers.%d", i);
    snprintf(sa, sizeof sa, "decoder.layers.%d.self_attn", i);
    snprintf(ca, sizeof ca, "decoder.layers.%d.cross_attn", i);
    snprintf(sap, sizeof sap, "decoder.layers.%d.self_attn.", i);
    snprintf(cap, sizeof cap, "decoder.layers.%d.multihead_attn.", i);
    snprintf(ff, sizeof ff, "decoder.layers.%d.ffn", i);
    snprintf(lin, sizeof lin, "decoder.layers.%d.linear", i);
    for (int k = 0; k < 3; k++) {
        snprintf(nn[k], sizeof nn[k], "decoder.layers.%d.norm%d", i, k + 1);
        snprintf(np[k], sizeof np[k], "decoder.layers.%d.norm%d.", i, k + 1);
    }
    const ts_norm_weights *norms[3] = {&w->norm1, &w->norm2, &w->norm3};
    int T = f->m->T, S = f->m->S, D = f->D;
    int64_t n = (int64_t)f->B * T * D;
    float *tmp = f->a->tmp;
    const float *tmask = f->a->tgt_mask, *smask = f->mem_mask;
    bool causal = !f->c->tgt_not_causal;
    float eps = f->c->eps;
    ts_tensor t;
    if (f->c->norm == TS_NORM_POST) {
        TS_TRY(self_attention(f, sa, sap, &w->self_attn, in, D, T, tmask, causal, tmp));
        dropout(f, tmp, n);
        add(f, tmp, tmp, in, n);
        TS_TRY(norm(f, nn[0], np[0], tmp, out, T, norms[0], eps, TS_OP_ADD, false));
        TS_TRY(cross_attention(f, ca, cap, &w->cross_attn, out, T, mem, S, smask, tmp));
        dropout(f, tmp, n);
        add(f, tmp, tmp, out, n);
        TS_TRY(norm(f, nn[1], np[1], tmp, out, T, norms[1], eps, TS_OP_ADD, false));
        TS_TRY(ffn(f, ff, lin, &w->ffn, out, T, tmp));
        dropout(f, tmp, n);
        add(f, tmp, tmp, out, n);
        TS_TRY(norm(f, nn[2], np[2], tmp, out, T, norms[2], eps, TS_OP_ADD, false));
        t = view3(out, f->B, T, D);
        return emit(f, p, "out", TS_OP_LAYERNORM, &t, TS_TAG_PLAIN, true);
    }
    TS_TRY(norm(f, nn[0], np[0], in, tmp, T, norms[0], eps, TS_OP_INPUT, true));
    TS_TRY(self_attention(f, sa, sap, &w->self_attn, tmp, D, T, tmask, causal, tmp));
    dropout(f, tmp, n);
    add(f, out, in, tmp, n);
    TS_TRY(norm(f, nn[1], np[1], out, tmp, T, norms[1], eps, TS_OP_ADD, false));
    TS_TRY(cross_attention(f, ca, cap, &w->cross_attn, tmp, T, mem, S, smask, tmp));
    dropout(f, tmp, n);
    add(f, out, out, tmp, n);
    TS_TRY(norm(f, nn[2], np[2], out, tmp, T, norms[2], eps, TS_OP_ADD, false));
    TS_TRY(ffn(f, ff, lin, &w->ffn, tmp, T, tmp));
    dropout(f, tmp, n);
    add(f, out, out, tmp, n);
    t = view3(out, f->B, T, D);
    return emit(f, p, "out", TS_OP_ADD, &t, TS_TAG_PLAIN, false);
}

/* ---- embeddings -------------------------------------------------------------------- */

/* Token ids or given vectors -> the stream `dst` (B, S, D). Returns in *res
 * where the result is: dst, or the caller's vectors when nothing is added.
 * Traces `input`, then embed.tokens (E[id], times sqrt(D) when scaled),
 * embed.pe (S, D), and embed.out; learned positions go through embed.norm
 * (but a GPT's). */
static ts_status embed(fwd *f, const char *pfx, const char *input_name, const ts_embed_weights *w, bool tokens,
                       const int32_t *ids, const float *vecs, int S, float *dst, const float **res) {
    const ts_model_config *c = f->c;
    int64_t B = f->B, D = f->D;
    ts_model_acts *a = f->a;
    double flops0 = f->flops;
    char param_prefix[TS_MODEL_NAME_MAX];
    snprintf(param_prefix, sizeof param_prefix, "%s.", pfx);
    ts_tensor t;
    if (tokens) {
        if (!f->dry)
            for (int64_t i = 0; i < B * S; i++) a->ids[i] = (float)ids[i];
        t = view(a->ids, 2, (int64_t[]){B, S}, NULL);
    } else {
        t = view3((float *)vecs, B, S, c->arch == TS_ARCH_ATTENTION && c->in_dim ? c->in_dim : D);
    }
    TS_TRY(emit(f, NULL, input_name, TS_OP_INPUT, &t, TS_TAG_PLAIN, false));
    if (!tokens && c->pe == TS_PE_NONE) { // seed 000: the input is the embedding
        *res = vecs;
        return TS_OK;
    }
    bool learned = c->pe == TS_PE_LEARNED, normed = ts_model_embed_norm(c);
    float *sum = normed ? a->tmp : dst;
    if (tokens) {
        float s = c->scale_embed ? sqrtf((float)D) : 1.0f;
        if (!f->dry) {
            const float *table = w->tokens;
            TS_MODEL_OMP(parallel for num_threads(f->threads) if(f->par) schedule(static))
            for (int64_t i = 0; i < B * S; i++)
                for (int64_t j = 0; j < D; j++) sum[i * D + j] = table[(int64_t)ids[i] * D + j] * s;
        }
        t = view3(sum, B, S, D);
        TS_TRY(emit(f, pfx, "tokens", TS_OP_EMBED, &t, TS_TAG_PLAIN, false));
    } else if (!f->dry) {
        memcpy(sum, vecs, sizeof(float) * (size_t)(B * S * D));
    }
    const float *pe = learned ? w->positions : a->pe;
    if (c->pe != TS_PE_NONE) {
        t = view((float *)pe, 2, (int64_t[]){S, D}, NULL);
        TS_TRY(emit(f, pfx, "pe", learned ? TS_OP_EMBED : TS_OP_POSENC, &t, TS_TAG_POSENC, false));
        if (!f->dry) {
            TS_MODEL_OMP(parallel for num_threads(f->threads) if(f->par) schedule(static))
            for (int64_t i = 0; i < B * S; i++)
                for (int64_t j = 0; j < D; j++) sum[i * D + j] += pe[(i % S) * D + j];
        }
    }
    if (normed) {
        char np[TS_MODEL_NAME_MAX], npp[TS_MODEL_NAME_MAX + 1];
        snprintf(np, sizeof np, "%s.norm", pfx);
        snprintf(npp, sizeof npp, "%s.", np);
        TS_TRY(norm(f, np, npp, sum, dst, S, &w->norm, c->embed_eps, TS_OP_ADD, false));
    }
    dropout(f, dst, B * S * D);
    t = view3(dst, B, S, D);
    /* Without dropout, embed.out is the norm's out (BERT's learned positions) or the tokens (no positions). */
    TS_TRY(emit(f, pfx, "out", c->pe == TS_PE_NONE ? TS_OP_EMBED : TS_OP_ADD, &t, TS_TAG_PLAIN,
             (normed || c->pe == TS_PE_NONE) && !f->train));
    *res = dst;
    return module_done(f, pfx, param_prefix, &t, flops0);
}

/* ---- the stacks and heads ---------------------------------------------------------- */

/* The stack's closing LayerNorm (nn.TransformerEncoder's `norm`), *x -> buf. */
static ts_status final_norm(fwd *f, const char *stack, const ts_norm_weights *w, const float **x, float *buf, int S) {
    if (!f->c->final_norm) return TS_OK;
    char n[TS_MODEL_NAME_MAX], np[TS_MODEL_NAME_MAX + 1];
    snprintf(n, sizeof n, "%s.norm", stack);
    snprintf(np, sizeof np, "%s.", n);
    TS_TRY(norm(f, n, np, *x, buf, S, w, f->c->eps, TS_OP_INPUT, true));
    *x = buf;
    return TS_OK;
}

static ts_status head(fwd *f, const float *x, int S, ts_tensor *out) {
    const ts_model_config *c = f->c;
    ts_model_acts *a = f->a;
    ts_model_weights *w = &f->m->w;
    int64_t B = f->B, D = f->D;
    double flops0 = f->flops;
    if (c->head == TS_HEAD_LM) {
        linear(f, a->logits, x, B * S, (int)D, c->vocab, w->head_w, w->head_b, (int)D, TS_EPI_BIAS);
        *out = view3(a->logits, B, S, c->vocab);
        TS_TRY(emit(f, NULL, "logits", TS_OP_LINEAR, out, TS_TAG_LOGITS, false));
        /* tied: the table is counted once, under embed */
        return module_done(f, "generator", "generator.", out, flops0);
    }
    /* seed 004: encoder(x)[:, 0, :], dropout, classifier */
    if (!f->dry)
        for (int64_t b = 0; b < B; b++) memcpy(a->cls + b * D, x + b * S * D, sizeof(float) * (size_t)D);
    ts_tensor t = view(a->cls, 2, (int64_t[]){B, D}, NULL);
    TS_TRY(emit(f, NULL, "cls", TS_OP_CHUNK, &t, TS_TAG_PLAIN, false));
    dropout(f, a->cls, B * D);
    linear(f, a->logits, a->cls, B, (int)D, c->n_labels, w->head_w, w->head_b, (int)D, TS_EPI_BIAS);
    *out = view(a->logits, 2, (int64_t[]){B, c->n_labels}, NULL);
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

static ts_status check_input(const ts_model *m, const ts_model_input *in) {
    const ts_model_config *c = &m->cfg;
    bool encdec = c->arch == TS_ARCH_ENCODER_DECODER;
    if (!m->dry && !(encdec && in->memory)) {
        if (c->input == TS_INPUT_TOKENS && !in->src_ids && !in->src_embedded)
            return ts_fail(TS_ERR_ARG, "model: the source needs token ids");
        if (c->input == TS_INPUT_EMBEDDED && !in->src_embedded)
            return ts_fail(TS_ERR_ARG, "model: the source needs vectors (B, S, %d)",
                           c->in_dim ? c->in_dim : c->d_model);
        if (in->src_ids) TS_TRY(check_ids(in->src_ids, (int64_t)c->batch * m->S, c->vocab, "source"));
    }
    if (!m->dry && encdec) {
        if (!in->tgt_ids && !in->tgt_embedded) return ts_fail(TS_ERR_ARG, "model: the decoder needs its input");
        if (in->tgt_ids && c->input != TS_INPUT_TOKENS)
            return ts_fail(TS_ERR_ARG, "model: this model's decoder reads vectors, not ids");
        if (in->tgt_ids) TS_TRY(check_ids(in->tgt_ids, (int64_t)c->batch * m->T, c->vocab, "target"));
    }
    if (!encdec && (in->tgt_pad || in->mem_pad_set))
        return ts_fail(TS_ERR_ARG, "model: a %s padding mask needs a decoder; this model has none",
                       in->tgt_pad ? "target" : "memory");
    return TS_OK;
}

static ts_status run(fwd *f, const ts_model_input *in, ts_tensor *out) {
    ts_model *m = f->m;
    const ts_model_config *c = f->c;
    ts_model_acts *a = f->a;
    int S = m->S, T = m->T;
    ts_model_input none;
    memset(&none, 0, sizeof none);
    if (!in) in = &none;
    TS_TRY(check_input(m, in));
    bool encdec = c->arch == TS_ARCH_ENCODER_DECODER;
    const uint8_t *mem_pad = encdec ? (in->mem_pad_set ? in->mem_pad : in->src_pad) : NULL;
    if (!f->dry) {
        float fill = c->variants & TS_VARIANT_SEED003_MASK ? SEED003_FILL : -INFINITY;
        build_mask(a->src_mask, in->src_pad, (int64_t)f->B * S, fill);
        if (a->tgt_mask) build_mask(a->tgt_mask, in->tgt_pad, (int64_t)f->B * T, fill);
        if (a->mem_mask) build_mask(a->mem_mask, mem_pad, (int64_t)f->B * S, fill);
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
        st = embed(f, "embed", "input", &m->w.embed, false, NULL, in->src_embedded, S, a->x, &x);
        if (!st)
            st = self_attention(f, "self_attn", "self_attn.", &m->w.attn, x, din, S, enc_key_mask(f), c->causal, a->x);
        *out = view3(a->x, f->B, S, f->D);
        goto done;
    }
    const float *mem = in->memory;
    if (!(c->arch == TS_ARCH_ENCODER_DECODER && mem)) {
        bool tokens = c->input == TS_INPUT_TOKENS && !in->src_embedded;
        st = embed(f, "embed", "input", &m->w.embed, tokens, in->src_ids, in->src_embedded, S, a->x, &x);
        for (int i = 0; !st && i < c->layers; i++) {
            st = encoder_layer(f, i, &m->w.enc[i], x, a->x);
            x = a->x;
        }
        const char *stack = ts_model_stack_name(c);
        char stack_out[16];
        snprintf(stack_out, sizeof stack_out, "%s.out", stack);
        if (!st) st = final_norm(f, stack, &m->w.enc_norm, &x, a->x, S);
        ts_tensor t = view3((float *)x, f->B, S, f->D);
        if (!st) st = emit(f, NULL, stack_out, stack_op(c), &t, TS_TAG_PLAIN, true);
        mem = x;
        *out = t;
    }
    if (!st && c->arch == TS_ARCH_ENCODER_DECODER) {
        f->row_mask = NULL;
        const float *y = NULL;
        bool tokens = c->input == TS_INPUT_TOKENS && !in->tgt_embedded;
        st = embed(f, "decoder.embed", "decoder.input", &m->w.dec_embed, tokens, in->tgt_ids, in->tgt_embedded,
                   T, a->y, &y);
        for (int i = 0; !st && i < c->dec_layers; i++) {
            st = decoder_layer(f, i, &m->w.dec[i], y, mem, a->y);
            y = a->y;
        }
        if (!st) st = final_norm(f, "decoder", &m->w.dec_norm, &y, a->y, T);
        ts_tensor t = view3((float *)y, f->B, T, f->D);
        if (!st) st = emit(f, NULL, "decoder.out", stack_op(c), &t, TS_TAG_PLAIN, true);
        x = y;
        *out = t;
    }
    if (!st && c->head != TS_HEAD_NONE) st = head(f, x, c->arch == TS_ARCH_ENCODER_DECODER ? T : S, out);
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
    f->B = m->cfg.batch;
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
