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
    const ts_model_config *c;
    const char *stack;
    int pos;
    double *embed;   /* (D) */
    double *values;  /* (L, H, hd) */
    double *ffn;     /* (L, D) */
    float *final;    /* (2 D) the stream after the last layer, then its final norm */
} dla_keep;

/* Row pos of batch element 0 of a (1, S, D) or (1, H, S, hd) step into dst. */
static void keep_row(const ts_tensor *t, int pos, double *dst) {
    if (t->rank == 3)
        for (int64_t j = 0; j < t->shape[2]; j++) dst[j] = t->data[pos * t->stride[1] + j * t->stride[2]];
    else
        for (int64_t h = 0; h < t->shape[1]; h++)
            for (int64_t j = 0; j < t->shape[3]; j++)
                dst[h * t->shape[3] + j] = t->data[h * t->stride[1] + pos * t->stride[2] + j * t->stride[3]];
}

static ts_status dla_step(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag) {
    (void)op, (void)tag;
    dla_keep *k = ctx;
    int L = k->c->layers, D = k->c->d_model;
    if (strcmp(name, "embed.out") == 0) return keep_row(t, k->pos, k->embed), TS_OK;
    const char *end;
    int l = ts_name_stack_layer(name, k->stack, &end);
    if (l < 0 || l >= L) return TS_OK;
    if (strcmp(end, ".self_attn.values") == 0) keep_row(t, k->pos, k->values + l * D);
    else if (strcmp(end, ".ffn.out") == 0) keep_row(t, k->pos, k->ffn + l * D);
    else if (strcmp(end, ".out") == 0 && l == L - 1)
        for (int64_t j = 0; j < t->shape[2]; j++) k->final[j] = t->data[k->pos * t->stride[1] + j * t->stride[2]];
    return TS_OK;
}

/* gamma * (v - mean(v)) / std . u */
static double through_norm(const double *v, const float *gamma, double std, const float *u, int D) {
    double mean = 0, s = 0;
    for (int j = 0; j < D; j++) mean += v[j];
    mean /= D;
    for (int j = 0; j < D; j++) s += (double)(gamma ? gamma[j] : 1.0f) * (v[j] - mean) / std * u[j];
    return s;
}

ts_status ts_experiment_dla(ts_model *m, const int32_t *ids, int pos, int token, ts_dla *out) {
    memset(out, 0, sizeof *out);
    TS_TRY(sweep_model_ok(m));
    const ts_model_config *c = &m->cfg;
    if (c->norm != TS_NORM_PRE || (c->variants & TS_VARIANT_NO_RESIDUAL))
        return ts_fail(TS_ERR_ARG, "direct logit attribution needs a pre-LN model, whose stream is the sum of what "
                                   "each part adds; this one normalises the stream inside each layer");
    int L = c->layers, H = c->heads, D = c->d_model, S = m->S, V = c->vocab, hd = D / H;
    if (pos < 0 || pos >= S) return ts_fail(TS_ERR_ARG, "position %d: the text has positions 0 to %d", pos, S - 1);
    if (token < 0 || token >= V) return ts_fail(TS_ERR_ARG, "token %d is not in the vocabulary of %d", token, V);
    dla_keep k = {c, stack_of(c), pos, calloc((size_t)D, sizeof(double)), calloc((size_t)L * D, sizeof(double)),
                  calloc((size_t)L * D, sizeof(double)), calloc((size_t)(2 * D), sizeof(float))};
    out->layers = L, out->heads = H;
    out->head = calloc((size_t)L * H, sizeof(double));
    out->attn_bias = calloc((size_t)L, sizeof(double));
    out->ffn = calloc((size_t)L, sizeof(double));
    double *part = malloc(sizeof(double) * (size_t)D);
    ts_status st = k.embed && k.values && k.ffn && k.final && out->head && out->attn_bias && out->ffn && part
                       ? TS_OK : ts_fail(TS_ERR_NOMEM, "out of memory for the attribution");
    ts_tensor logits;
    ts_hook hook = {.fn = dla_step, .ctx = &k};
    ts_model_input in = {.src_ids = ids};
    if (!st) st = ts_model_forward(m, &in, &hook, &logits);
    if (!st) {
        const ts_model_weights *w = &m->w;
        const ts_norm_weights *nw = ts_model_final_norm_weights(m); /* a single stack's closing norm, or NULL */
        const float *u = w->head_w + (int64_t)token * D;
        float rstd; /* the final norm's, as the forward normalised this position */
        ts_model_final_norm_rows(m, k.final + D, NULL, &rstd, k.final, 1);
        double std = 1.0 / rstd;
        const float *gamma = nw ? nw->gamma : NULL;
        out->embed = through_norm(k.embed, gamma, std, u, D);
        for (int l = 0; l < L; l++) {
            const ts_attn_weights *a = &w->layers[l].self_attn;
            for (int h = 0; h < H; h++) { /* head h through its columns of out_proj: (D, D) as PyTorch stores it */
                const double *v = k.values + (int64_t)l * D + h * hd;
                for (int j = 0; j < D; j++) {
                    double s = 0;
                    for (int q = 0; q < hd; q++) s += v[q] * a->out_w[(int64_t)j * D + h * hd + q];
                    part[j] = s;
                }
                out->head[l * H + h] = through_norm(part, gamma, std, u, D);
            }
            for (int j = 0; j < D; j++) part[j] = a->out_b ? a->out_b[j] : 0;
            out->attn_bias[l] = through_norm(part, gamma, std, u, D);
            out->ffn[l] = through_norm(k.ffn + (int64_t)l * D, gamma, std, u, D);
        }
        double rest = w->head_b ? w->head_b[token] : 0;
        for (int j = 0; nw && j < D; j++) rest += (double)nw->beta[j] * u[j];
        out->rest = rest;
        out->logit = logits.data[(int64_t)pos * V + token];
    }
    free(k.embed), free(k.values), free(k.ffn), free(k.final), free(part);
    if (st) ts_dla_free(out);
    return st;
}

void ts_dla_free(ts_dla *d) {
    free(d->head);
    free(d->attn_bias);
    free(d->ffn);
    memset(d, 0, sizeof *d);
}
