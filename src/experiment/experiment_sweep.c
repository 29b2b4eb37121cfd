/* experiment_sweep: one edit at a time over every head and FFN (ablation)
 * or every layer and position (activation patching), each a forward pass
 * through the same edit callback as run's --ablate and --patch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/experiment.h"
#include "tscope/kernels.h"

void ts_experiment_token_loss(const float *logits, const int32_t *ids, int S, int V, double *loss) {
    loss[0] = NAN;
    for (int j = 1; j < S; j++) {
        const float *row = logits + (int64_t)(j - 1) * V;
        loss[j] = ts_logsumexp(row, V) - row[ids[j]];
    }
}

static double mean_loss(const double *loss, int first, int last) {
    double sum = 0;
    int n = 0;
    for (int j = first < 1 ? 1 : first; j <= last; j++, n++) sum += loss[j];
    return n ? sum / n : NAN;
}

/* One forward of m on ids with ex's edits (ex may be NULL); logits out. */
static ts_status forward(ts_model *m, const int32_t *ids, ts_experiment *ex, ts_tensor *logits) {
    ts_hook hook = {0};
    if (ex) ts_experiment_attach(ex, &hook);
    ts_model_input in = {.src_ids = ids};
    return ts_model_forward(m, &in, &hook, logits);
}

/* The stack the sweeps walk: the one a language model's head reads. */
static const char *stack_of(const ts_model_config *c) {
    return c->arch == TS_ARCH_ENCODER_DECODER ? "decoder" : ts_model_stack_name(c);
}

static ts_status sweep_model_ok(const ts_model *m) {
    const ts_model_config *c = &m->cfg;
    if (c->head != TS_HEAD_LM || c->input != TS_INPUT_TOKENS || c->arch == TS_ARCH_ENCODER_DECODER ||
        c->arch == TS_ARCH_ATTENTION)
        return ts_fail(TS_ERR_ARG, "the sweeps read one stack over tokens with a vocabulary head (a language model)");
    if (ts_model_is_masked_lm(c))
        return ts_fail(TS_ERR_ARG, "the sweeps score each next token; this is a masked language model (BERT), whose "
                                   "logits at a position score the token there: use run --ablate STEP --expect, or "
                                   "--trace and diff");
    if (c->batch != 1) return ts_fail(TS_ERR_ARG, "the sweeps read one sequence (batch 1), not %d", c->batch);
    return TS_OK;
}

ts_status ts_experiment_ablate_sweep(ts_model *m, const int32_t *ids, int first, int last, ts_edit_kind kind,
                                     ts_ablate_sweep *out) {
    memset(out, 0, sizeof *out);
    TS_TRY(sweep_model_ok(m));
    const ts_model_config *c = &m->cfg;
    int L = c->layers, H = c->heads, S = m->S, V = c->vocab;
    if (first < 1 || last >= S || first > last)
        return ts_fail(TS_ERR_ARG, "positions %d-%d: the text's tokens that have one before them are 1 to %d", first,
                       last, S - 1);
    out->layers = L, out->heads = H;
    out->delta = calloc((size_t)L * (H + 1), sizeof(float));
    out->delta_span = calloc((size_t)L * (H + 1), sizeof(float));
    double *loss = malloc(sizeof(double) * (size_t)S);
    if (!out->delta || !out->delta_span || !loss) {
        free(loss);
        ts_ablate_sweep_free(out);
        return ts_fail(TS_ERR_NOMEM, "out of memory for the sweep");
    }
    ts_tensor logits;
    ts_status st = forward(m, ids, NULL, &logits);
    if (!st) {
        ts_experiment_token_loss(logits.data, ids, S, V, loss);
        out->base = mean_loss(loss, 1, S - 1);
        out->base_span = mean_loss(loss, first, last);
    }
    for (int l = 0; l < L && !st; l++)
        for (int h = 0; h <= H && !st; h++) {
            char spec[128];
            if (h < H) snprintf(spec, sizeof spec, "%s.layers.%d.self_attn.head%d%s", stack_of(c), l, h,
                                kind == TS_EDIT_MEAN ? "=mean" : "");
            else snprintf(spec, sizeof spec, "%s.layers.%d.ffn.out%s", stack_of(c), l, kind == TS_EDIT_MEAN ? "=mean" : "");
            ts_experiment ex;
            ts_experiment_init(&ex);
            st = ts_experiment_add_ablate(&ex, spec);
            if (!st) st = forward(m, ids, &ex, &logits);
            if (!st && ex.edits[0].applied != 1)
                st = ts_fail(TS_ERR_ARG, "ablate: %s edited %lld steps, not one", spec, (long long)ex.edits[0].applied);
            ts_experiment_free(&ex);
            if (st) break;
            ts_experiment_token_loss(logits.data, ids, S, V, loss);
            out->delta[l * (H + 1) + h] = (float)(mean_loss(loss, 1, S - 1) - out->base);
            out->delta_span[l * (H + 1) + h] = (float)(mean_loss(loss, first, last) - out->base_span);
        }
    free(loss);
    if (st) ts_ablate_sweep_free(out);
    return st;
}

void ts_ablate_sweep_free(ts_ablate_sweep *s) {
    free(s->delta);
    free(s->delta_span);
    memset(s, 0, sizeof *s);
}

/* ---- activation patching ---- */

typedef struct capture {
    ts_patch_sweep *sw;
    char (*steps)[64]; /* (rows) the step each row patches (a head's: its attention's values) */
    float *values;   /* (rows, S * D) */
    int64_t per_row; /* S * D: (1, S, D), or values (1, H, S, hd) */
} capture;

/* Keep the clean run's values at each patched step. */
static ts_status capture_step(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag) {
    (void)op, (void)tag;
    capture *c = ctx;
    for (int r = 0; r < c->sw->rows; r++) {
        if (strcmp(name, c->steps[r]) != 0 || ts_tensor_numel(t) != c->per_row) continue;
        ts_tensor dst = *t;
        dst.data = c->values + r * c->per_row;
        ts_tensor_row_major(&dst);
        ts_tensor_copy(&dst, t);
    }
    return TS_OK;
}

static double logit_diff(const ts_tensor *logits, int S, int V, int answer, int wrong) {
    const float *row = logits->data + (int64_t)(S - 1) * V;
    return (double)row[answer] - row[wrong];
}

const char *ts_patch_site_name(ts_patch_site s) {
    static const char *const names[] = {"resid", "attn", "ffn", "heads"};
    return (unsigned)s < 4 ? names[s] : "?";
}

ts_status ts_patch_site_parse(const char *word, ts_patch_site *out) {
    for (int s = 0; s < 4; s++)
        if (strcmp(word, ts_patch_site_name((ts_patch_site)s)) == 0) {
            *out = (ts_patch_site)s;
            return TS_OK;
        }
    return ts_fail(TS_ERR_ARG, "--site %s: the sites are resid (the residual stream), attn (each attention's out), "
                               "ffn (each FFN's out) and heads (each head's slice of values)", word);
}

ts_status ts_experiment_patch_sweep(ts_model *m, const int32_t *clean, const int32_t *corrupt, int answer, int wrong,
                                    ts_patch_sweep *out) {
    return ts_experiment_patch_sweep_at(m, clean, corrupt, answer, wrong, TS_PATCH_RESID, out);
}

ts_status ts_experiment_patch_sweep_at(ts_model *m, const int32_t *clean, const int32_t *corrupt, int answer, int wrong,
                                       ts_patch_site site, ts_patch_sweep *out) {
    memset(out, 0, sizeof *out);
    TS_TRY(sweep_model_ok(m));
    const ts_model_config *c = &m->cfg;
    int L = c->layers, H = c->heads, S = m->S, V = c->vocab, D = c->d_model;
    if (answer < 0 || answer >= V || wrong < 0 || wrong >= V || answer == wrong)
        return ts_fail(TS_ERR_ARG, "patch: the answer and the wrong token must be two tokens of the vocabulary");
    out->rows = site == TS_PATCH_RESID ? L + 1 : site == TS_PATCH_HEADS ? L * H : L;
    out->positions = S;
    out->names = calloc((size_t)out->rows, sizeof *out->names);
    out->restored = calloc((size_t)out->rows * S, sizeof(float));
    capture cap = {out, calloc((size_t)out->rows, sizeof *cap.steps), calloc((size_t)out->rows * S * D, sizeof(float)),
                   (int64_t)S * D};
    if (!out->names || !out->restored || !cap.values || !cap.steps) {
        free(cap.values), free(cap.steps);
        ts_patch_sweep_free(out);
        return ts_fail(TS_ERR_NOMEM, "out of memory for the sweep");
    }
    const char *stack = stack_of(c);
    for (int r = 0; r < out->rows; r++) {
        size_t n = sizeof out->names[0];
        if (site == TS_PATCH_RESID && r == 0) snprintf(out->names[r], n, "embed.out");
        else if (site == TS_PATCH_RESID) snprintf(out->names[r], n, "%s.layers.%d.out", stack, r - 1);
        else if (site == TS_PATCH_ATTN) snprintf(out->names[r], n, "%s.layers.%d.self_attn.out", stack, r);
        else if (site == TS_PATCH_FFN) snprintf(out->names[r], n, "%s.layers.%d.ffn.out", stack, r);
        else snprintf(out->names[r], n, "%s.layers.%d.self_attn.head%d", stack, r / H, r % H);
        if (site == TS_PATCH_HEADS) snprintf(cap.steps[r], n, "%s.layers.%d.self_attn.values", stack, r / H);
        else snprintf(cap.steps[r], n, "%s", out->names[r]);
    }
    ts_tensor logits;
    ts_hook keep = {.fn = capture_step, .ctx = &cap};
    ts_model_input in = {.src_ids = clean};
    ts_status st = ts_model_forward(m, &in, &keep, &logits);
    if (!st) out->clean_diff = logit_diff(&logits, S, V, answer, wrong);
    if (!st) st = forward(m, corrupt, NULL, &logits);
    if (!st) out->corrupt_diff = logit_diff(&logits, S, V, answer, wrong);
    double span = out->clean_diff - out->corrupt_diff;
    if (!st && fabs(span) < 1e-6)
        st = ts_fail(TS_ERR_ARG, "patch: the clean and the corrupted text give the same logit difference (%.4g): "
                                 "nothing to restore", out->clean_diff);
    for (int r = 0; r < out->rows && !st; r++)
        for (int p = 0; p < S && !st; p++) {
            ts_edit e;
            memset(&e, 0, sizeof e);
            e.kind = TS_EDIT_PATCH;
            snprintf(e.glob, sizeof e.glob, "%s", cap.steps[r]);
            e.pos = p;
            e.values = cap.values + r * cap.per_row;
            if (site == TS_PATCH_HEADS) {
                snprintf(e.heads, sizeof e.heads, "head%d", r % H);
                e.rank = 4;
                e.shape[0] = 1, e.shape[1] = H, e.shape[2] = S, e.shape[3] = D / H;
            } else {
                e.rank = 3;
                e.shape[0] = 1, e.shape[1] = S, e.shape[2] = D;
            }
            ts_experiment ex;
            ts_experiment_init(&ex);
            ex.edits = &e, ex.n_edits = 1, ex.cap = 1; /* borrowed: never freed */
            st = forward(m, corrupt, &ex, &logits);
            if (!st && e.applied != 1) st = ts_fail(TS_ERR_ARG, "patch: %s was not edited once", out->names[r]);
            if (!st) out->restored[r * S + p] = (float)((logit_diff(&logits, S, V, answer, wrong) - out->corrupt_diff) / span);
        }
    free(cap.values);
    free(cap.steps);
    if (st) ts_patch_sweep_free(out);
    return st;
}

void ts_patch_sweep_free(ts_patch_sweep *s) {
    free(s->names);
    free(s->restored);
    memset(s, 0, sizeof *s);
}

/* ---- direct logit attribution ---- */

typedef struct dla_keep {
    const char *stack;
    int L, S, D, HD;  /* HD: heads * head width, the output projection's input */
    double *embed;    /* (S, D) embed.out */
    double *values;   /* (L, S, HD) each layer's heads' values side by side, as the projection reads them */
    double *ffn;      /* (L, S, D) each layer's ffn.out */
    float *final;     /* (S, D) the stream after the last layer */
    int kept;         /* steps kept, to check that none was missed */
} dla_keep;

/* Batch element 0 of a (1, S, W) step, or of a (1, H, S, hd) one with its
 * heads side by side (W = H * hd), into dst (S, W). */
static void keep_rows(const ts_tensor *t, double *dst, int S, int W) {
    if (t->rank == 3) {
        for (int p = 0; p < S; p++)
            for (int j = 0; j < W; j++) dst[(int64_t)p * W + j] = t->data[p * t->stride[1] + j * t->stride[2]];
        return;
    }
    int64_t hd = t->shape[3];
    for (int64_t h = 0; h < t->shape[1]; h++)
        for (int p = 0; p < S; p++)
            for (int64_t q = 0; q < hd; q++)
                dst[(int64_t)p * W + h * hd + q] = t->data[h * t->stride[1] + p * t->stride[2] + q * t->stride[3]];
}

static bool dla_shape(const ts_tensor *t, int S, int W) {
    if (t->rank == 3) return t->shape[0] == 1 && t->shape[1] == S && t->shape[2] == W;
    return t->rank == 4 && t->shape[0] == 1 && t->shape[2] == S && t->shape[1] * t->shape[3] == W;
}

static ts_status dla_step(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag) {
    (void)op, (void)tag;
    dla_keep *k = ctx;
    double *dst = NULL;
    int width = k->D;
    const char *end;
    int l = ts_name_stack_layer(name, k->stack, &end);
    if (strcmp(name, "embed.out") == 0) dst = k->embed;
    else if (l < 0 || l >= k->L) return TS_OK;
    else if (strcmp(end, ".self_attn.values") == 0) dst = k->values + (int64_t)l * k->S * k->HD, width = k->HD;
    else if (strcmp(end, ".ffn.out") == 0) dst = k->ffn + (int64_t)l * k->S * k->D;
    else if (strcmp(end, ".out") == 0 && l == k->L - 1) {
        if (!dla_shape(t, k->S, k->D)) return ts_fail(TS_ERR_SHAPE, "attribution: %s is not (1, %d, %d)", name, k->S, k->D);
        for (int p = 0; p < k->S; p++)
            for (int j = 0; j < k->D; j++) k->final[(int64_t)p * k->D + j] = t->data[p * t->stride[1] + j * t->stride[2]];
        k->kept++;
        return TS_OK;
    } else return TS_OK;
    if (!dla_shape(t, k->S, width)) return ts_fail(TS_ERR_SHAPE, "attribution: %s has an unexpected shape", name);
    keep_rows(t, dst, k->S, width);
    k->kept++;
    return TS_OK;
}

/* One target's direction through the final norm and every layer's output
 * projection. A share is (1/std) sum_j part_j gamma_j (u_j - ...) once the
 * norm's mean is folded into the direction: w = gamma*u - mean(gamma*u)
 * (no centring without a final norm); a head's share is then its values
 * against r = out_w^T w (HD), read once per layer. */
typedef struct dla_dir {
    double *w;     /* (D) */
    double *r;     /* (L, HD) */
    double *bias;  /* (L) each output projection's bias . w */
    double rest;   /* beta . u + the head's biases */
} dla_dir;

static void dla_direction(const ts_model *m, int answer, int wrong, const dla_keep *k, dla_dir *d) {
    const ts_model_weights *w = &m->w;
    const ts_norm_weights *nw = ts_model_final_norm_weights(m); /* a single stack's closing norm, or NULL */
    int D = k->D, HD = k->HD;
    const float *ua = w->head_w + (int64_t)answer * D, *uw = wrong >= 0 ? w->head_w + (int64_t)wrong * D : NULL;
    double mean = 0, rest = 0;
    for (int j = 0; j < D; j++) {
        double u = (double)ua[j] - (uw ? uw[j] : 0.0);
        if (nw && nw->beta) rest += (double)nw->beta[j] * u;
        d->w[j] = nw ? (double)nw->gamma[j] * u : u;
        mean += d->w[j];
    }
    mean /= D;
    for (int j = 0; nw && j < D; j++) d->w[j] -= mean;
    if (w->head_b) rest += (double)w->head_b[answer] - (wrong >= 0 ? (double)w->head_b[wrong] : 0.0);
    d->rest = rest;
    for (int l = 0; l < k->L; l++) {
        const ts_attn_weights *a = &w->layers[l].self_attn; /* out_w (D, HD) as PyTorch stores it */
        double *r = d->r + (int64_t)l * HD, b = 0;
        for (int i = 0; i < HD; i++) r[i] = 0;
        for (int j = 0; j < D; j++) {
            const float *row = a->out_w + (int64_t)j * HD;
            for (int i = 0; i < HD; i++) r[i] += (double)row[i] * d->w[j];
            if (a->out_b) b += (double)a->out_b[j] * d->w[j];
        }
        d->bias[l] = b;
    }
}

static double dot(const double *a, const double *b, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* Row p of the shares: one direction read against position p's parts. */
static void dla_row(const dla_keep *k, const dla_dir *d, int p, double inv_std, int H, float *share) {
    int D = k->D, HD = k->HD, hd = HD / H, n = 0;
    share[n++] = (float)(inv_std * dot(k->embed + (int64_t)p * D, d->w, D));
    for (int l = 0; l < k->L; l++) {
        const double *v = k->values + ((int64_t)l * k->S + p) * HD, *r = d->r + (int64_t)l * HD;
        for (int h = 0; h < H; h++) share[n++] = (float)(inv_std * dot(v + h * hd, r + h * hd, hd));
        share[n++] = (float)(inv_std * d->bias[l]);
        share[n++] = (float)(inv_std * dot(k->ffn + ((int64_t)l * k->S + p) * D, d->w, D));
    }
    share[n] = (float)d->rest;
}

static ts_status dla_model_ok(const ts_model *m) {
    TS_TRY(sweep_model_ok(m));
    const ts_model_config *c = &m->cfg;
    if (c->norm != TS_NORM_PRE || (c->variants & TS_VARIANT_NO_RESIDUAL))
        return ts_fail(TS_ERR_ARG, "direct logit attribution needs a pre-LN model, whose stream is the sum of what "
                                   "each part adds; this one normalises the stream inside each layer");
    if (c->norm_kind != TS_NORMK_LAYER)
        return ts_fail(TS_ERR_UNSUPPORTED, "direct logit attribution reads the final norm as a LayerNorm; this "
                                           "model's is %s", ts_model_norm_kind_name(c->norm_kind));
    return TS_OK;
}

static ts_status dla_targets_ok(const int32_t *answer, const int32_t *wrong, int S, int V) {
    for (int p = 0; p < S; p++) {
        int a = answer[p], w = wrong ? wrong[p] : -1;
        if (a < -1 || a >= V) return ts_fail(TS_ERR_ARG, "position %d: token %d is not in the vocabulary of %d", p, a, V);
        if (w < -1 || w >= V) return ts_fail(TS_ERR_ARG, "position %d: token %d is not in the vocabulary of %d", p, w, V);
        if (w >= 0 && a < 0)
            return ts_fail(TS_ERR_ARG, "position %d: a wrong token needs an answer to subtract it from", p);
        if (w >= 0 && a == w)
            return ts_fail(TS_ERR_ARG, "position %d: the answer and the wrong token are both %d: their difference "
                                       "is 0", p, a);
    }
    return TS_OK;
}

ts_status ts_experiment_dla(ts_model *m, const int32_t *ids, const int32_t *answer, const int32_t *wrong,
                            ts_dla *out) {
    memset(out, 0, sizeof *out);
    TS_TRY(dla_model_ok(m));
    const ts_model_config *c = &m->cfg;
    int L = c->layers, H = c->heads, D = c->d_model, S = m->S, V = c->vocab, HD = H * ts_model_head_dim(c);
    TS_TRY(dla_targets_ok(answer, wrong, S, V));
    int P = 2 + L * (H + 2);
    dla_keep k = {stack_of(c), L, S, D, HD, calloc((size_t)S * D, sizeof(double)),
                  calloc((size_t)L * S * HD, sizeof(double)), calloc((size_t)L * S * D, sizeof(double)),
                  calloc((size_t)S * D, sizeof(float)), 0};
    dla_dir dir = {calloc((size_t)D, sizeof(double)), calloc((size_t)L * HD, sizeof(double)),
                   calloc((size_t)L, sizeof(double)), 0};
    float *normed = calloc((size_t)S * D, sizeof(float)), *rstd = calloc((size_t)S, sizeof(float));
    *out = (ts_dla){L, H, S, P, calloc((size_t)S * P, sizeof(float)), calloc((size_t)S, sizeof(float)),
                    calloc((size_t)S, sizeof(int32_t)), calloc((size_t)S, sizeof(int32_t))};
    ts_status st = k.embed && k.values && k.ffn && k.final && dir.w && dir.r && dir.bias && normed && rstd &&
                           out->share && out->logit && out->answer && out->wrong
                       ? TS_OK : ts_fail(TS_ERR_NOMEM, "out of memory for the attribution");
    ts_tensor logits;
    ts_hook hook = {.fn = dla_step, .ctx = &k};
    ts_model_input in = {.src_ids = ids};
    if (!st) st = ts_model_forward(m, &in, &hook, &logits);
    if (!st && k.kept != 2 + 2 * L) st = ts_fail(TS_ERR_ARG, "attribution: the forward handed over %d of the %d steps "
                                                             "it reads", k.kept, 2 + 2 * L);
    if (!st) ts_model_final_norm_rows(m, normed, NULL, rstd, k.final, S); /* the std the forward divided by */
    for (int p = 0; !st && p < S; p++) {
        const float *row = logits.data + (int64_t)p * V;
        int a = answer[p] >= 0 ? answer[p] : ts_model_argmax(row, V), w = wrong ? wrong[p] : -1;
        if (p == 0 || a != out->answer[p - 1] || w != out->wrong[p - 1]) dla_direction(m, a, w, &k, &dir);
        out->answer[p] = a, out->wrong[p] = w;
        out->logit[p] = w >= 0 ? row[a] - row[w] : row[a];
        dla_row(&k, &dir, p, rstd[p], H, out->share + (int64_t)p * P);
    }
    free(k.embed), free(k.values), free(k.ffn), free(k.final);
    free(dir.w), free(dir.r), free(dir.bias), free(normed), free(rstd);
    if (st) ts_dla_free(out);
    return st;
}

void ts_dla_part_name(const ts_dla *d, int k, char *buf, size_t size) {
    int per = d->heads + 2;
    if (k == 0) snprintf(buf, size, "embedding");
    else if (k >= d->parts - 1) snprintf(buf, size, "norm beta, head bias");
    else if ((k - 1) % per < d->heads) snprintf(buf, size, "layer %d head %d", (k - 1) / per, (k - 1) % per);
    else if ((k - 1) % per == d->heads) snprintf(buf, size, "layer %d attn bias", (k - 1) / per);
    else snprintf(buf, size, "layer %d FFN", (k - 1) / per);
}

void ts_dla_free(ts_dla *d) {
    free(d->share);
    free(d->logit);
    free(d->answer);
    free(d->wrong);
    memset(d, 0, sizeof *d);
}
