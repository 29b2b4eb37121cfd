/* Gradient checks of every backward op in backward.h.
 *
 * For each op the test writes a double-precision reference forward, makes a
 * scalar L = sum(forward(inputs) * g) with a fixed random upstream gradient g,
 * and differentiates L numerically by central differences (h = 1e-5, in
 * double, so the numerical gradient is good to ~1e-9). The op's own float
 * backward must agree within a normalized error
 *     max_i |analytic_i - numeric_i| / max_i |numeric_i|  <=  1e-4
 * (float rounding of sums of a few dozen terms is ~1e-6). The forward is the
 * kernel the model's forward calls (ts_gemm, ts_layernorm, ts_gelu,
 * ts_dropout, ...), compared with the reference too (1e-5 relative). Sizes are small so the
 * test stays fast under ASan. Each check prints its largest error.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tscope/kernels.h"

#define TOL 1e-4
#define FWD_TOL 1e-5
#define H_FD 1e-5
#define MAX_IN 4

/* ---- random numbers -------------------------------------------------------- */

static uint64_t rng_state;

static double urand(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) * 0x1.0p-53;
}

static float *randf(int64_t n, double lo, double hi) {
    float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    assert_non_null(p);
    for (int64_t i = 0; i < n; i++) p[i] = (float)(lo + (hi - lo) * urand());
    return p;
}

static float *zerosf(int64_t n) {
    float *p = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    assert_non_null(p);
    return p;
}

/* ---- the harness ------------------------------------------------------------ */

/* One op under test: its inputs as doubles (perturbed in place by the check)
 * and the loss sum(reference_forward(inputs) * g). */
typedef struct fd_case {
    int n_in;
    double *in[MAX_IN];
    int64_t size[MAX_IN];
    const char *name[MAX_IN];
    double (*loss)(const struct fd_case *c);
    const float *g; /* upstream gradient of the output */
    int64_t n_out;
    void *ctx;      /* sizes etc. of the op */
    const char *op;
} fd_case;

static double *to_double(const float *x, int64_t n) {
    double *d = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    assert_non_null(d);
    for (int64_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

static void add_input(fd_case *c, const char *name, const float *x, int64_t n) {
    c->name[c->n_in] = name;
    c->size[c->n_in] = n;
    c->in[c->n_in++] = to_double(x, n);
}

static void free_case(fd_case *c) {
    for (int i = 0; i < c->n_in; i++) free(c->in[i]);
}

/* sum(out * g) for a reference output in double. */
static double dot_g(const fd_case *c, const double *out) {
    double s = 0;
    for (int64_t i = 0; i < c->n_out; i++) s += out[i] * c->g[i];
    return s;
}

/* Compare the analytic gradient of input k with central differences. */
static void check_input(fd_case *c, int k, const float *analytic) {
    double worst = 0, scale = 0;
    int64_t at = 0;
    double *num = malloc(sizeof(double) * (size_t)c->size[k]);
    assert_non_null(num);
    for (int64_t i = 0; i < c->size[k]; i++) {
        double keep = c->in[k][i];
        c->in[k][i] = keep + H_FD;
        double up = c->loss(c);
        c->in[k][i] = keep - H_FD;
        double down = c->loss(c);
        c->in[k][i] = keep;
        num[i] = (up - down) / (2 * H_FD);
        scale = fmax(scale, fabs(num[i]));
    }
    for (int64_t i = 0; i < c->size[k]; i++) {
        double e = fabs(analytic[i] - num[i]);
        if (e > worst || isnan(analytic[i])) worst = isnan(analytic[i]) ? INFINITY : e, at = i;
    }
    double err = scale > 0 ? worst / scale : worst;
    if (err > TOL || scale == 0) {
        print_error("%s: d/d%s element %lld: analytic %.9g, numeric %.9g (normalized error %.3g > %.0e%s)\n", c->op,
                    c->name[k], (long long)at, (double)analytic[at], num[at], err, TOL,
                    scale == 0 ? ", and the numeric gradient is all zero" : "");
        free(num);
        fail();
    }
    print_message("%-28s d/d%-8s normalized error %.2e (%lld elements)\n", c->op, c->name[k], err,
                  (long long)c->size[k]);
    free(num);
}

/* Our float forward against the double reference at the unperturbed inputs. */
static void check_forward(const char *op, const float *got, const double *want, int64_t n) {
    double worst = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs(got[i] - want[i]) / fmax(1.0, fabs(want[i]));
        if (e > worst || isnan(got[i])) worst = isnan(got[i]) ? INFINITY : e, at = i;
    }
    if (worst > FWD_TOL) {
        print_error("%s forward: element %lld is %.9g, reference %.9g\n", op, (long long)at, (double)got[at], want[at]);
        fail();
    }
}

/* ---- linear ----------------------------------------------------------------- */

typedef struct lin_ctx {
    int N, I, O;
} lin_ctx;

static void lin_ref(const fd_case *c, double *out) {
    const lin_ctx *s = c->ctx;
    const double *x = c->in[0], *w = c->in[1], *b = c->in[2];
    for (int n = 0; n < s->N; n++)
        for (int o = 0; o < s->O; o++) {
            double acc = b[o];
            for (int i = 0; i < s->I; i++) acc += x[n * s->I + i] * w[o * s->I + i];
            out[n * s->O + o] = acc;
        }
}

static double lin_loss(const fd_case *c) {
    double *out = malloc(sizeof(double) * (size_t)c->n_out);
    lin_ref(c, out);
    double l = dot_g(c, out);
    free(out);
    return l;
}

static void linear_gradients(void **state) {
    (void)state;
    rng_state = 1;
    lin_ctx s = {7, 5, 6};
    float *x = randf(s.N * s.I, -1, 1), *w = randf(s.O * s.I, -1, 1), *b = randf(s.O, -1, 1);
    float *g = randf(s.N * s.O, -1, 1), *out = zerosf(s.N * s.O);
    float *dx = zerosf(s.N * s.I), *dw = zerosf(s.O * s.I), *db = zerosf(s.O);
    fd_case c = {.loss = lin_loss, .g = g, .n_out = s.N * s.O, .ctx = &s, .op = "linear"};
    add_input(&c, "in", x, s.N * s.I);
    add_input(&c, "weight", w, s.O * s.I);
    add_input(&c, "bias", b, s.O);
    ts_gemm(false, true, s.N, s.O, s.I, 1.0f, x, s.I, w, s.I, 0.0f, out, s.O, TS_EPI_BIAS, b); /* the model's linear */
    double *ref = malloc(sizeof(double) * (size_t)c.n_out);
    lin_ref(&c, ref);
    check_forward("linear", out, ref, c.n_out);
    ts_bwd_linear_backward(dx, dw, db, g, x, w, s.N, s.I, s.O);
    check_input(&c, 0, dx);
    check_input(&c, 1, dw);
    check_input(&c, 2, db);
    /* Gradients accumulate: a second backward adds the same again. */
    float *dw2 = malloc(sizeof(float) * (size_t)(s.O * s.I));
    memcpy(dw2, dw, sizeof(float) * (size_t)(s.O * s.I));
    ts_bwd_linear_backward(NULL, dw, NULL, g, x, w, s.N, s.I, s.O);
    for (int i = 0; i < s.O * s.I; i++) dw2[i] *= 2;
    assert_floats_close(dw, dw2, s.O * s.I, 1e-6);
    free(dw2);
    free(ref);
    free_case(&c);
    free(x), free(w), free(b), free(g), free(out), free(dx), free(dw), free(db);
}

/* ---- LayerNorm --------------------------------------------------------------- */

typedef struct ln_ctx {
    int N, C;
    double eps;
} ln_ctx;

static void ln_ref(const fd_case *c, double *out) {
    const ln_ctx *s = c->ctx;
    const double *x = c->in[0], *gm = c->in[1], *bt = c->in[2];
    for (int r = 0; r < s->N; r++) {
        double m = 0, v = 0;
        for (int j = 0; j < s->C; j++) m += x[r * s->C + j];
        m /= s->C;
        for (int j = 0; j < s->C; j++) v += (x[r * s->C + j] - m) * (x[r * s->C + j] - m);
        v /= s->C;
        for (int j = 0; j < s->C; j++) out[r * s->C + j] = (x[r * s->C + j] - m) / sqrt(v + s->eps) * gm[j] + bt[j];
    }
}

static double ln_loss(const fd_case *c) {
    double *out = malloc(sizeof(double) * (size_t)c->n_out);
    ln_ref(c, out);
    double l = dot_g(c, out);
    free(out);
    return l;
}

static void layernorm_gradients(void **state) {
    (void)state;
    rng_state = 2;
    ln_ctx s = {6, 9, 1e-5};
    int64_t n = (int64_t)s.N * s.C;
    float *x = randf(n, -2, 3), *gm = randf(s.C, 0.5, 1.5), *bt = randf(s.C, -1, 1), *g = randf(n, -1, 1);
    float *out = zerosf(n), *mean = zerosf(s.N), *rstd = zerosf(s.N);
    float *dx = zerosf(n), *dgm = zerosf(s.C), *dbt = zerosf(s.C);
    fd_case c = {.loss = ln_loss, .g = g, .n_out = n, .ctx = &s, .op = "layernorm"};
    add_input(&c, "in", x, n);
    add_input(&c, "gamma", gm, s.C);
    add_input(&c, "beta", bt, s.C);
    ts_layernorm(out, mean, rstd, x, gm, bt, s.N, s.C, (float)s.eps);
    double *ref = malloc(sizeof(double) * (size_t)n);
    ln_ref(&c, ref);
    check_forward("layernorm", out, ref, n);
    ts_bwd_layernorm_backward(dx, dgm, dbt, g, x, gm, mean, rstd, s.N, s.C);
    check_input(&c, 0, dx);
    check_input(&c, 1, dgm);
    check_input(&c, 2, dbt);
    free(ref);
    free_case(&c);
    free(x), free(gm), free(bt), free(g), free(out), free(mean), free(rstd), free(dx), free(dgm), free(dbt);
}

/* ---- element-wise: ReLU, GELU, dropout, residual -------------------------------- */

typedef enum elt_kind { ELT_RELU, ELT_GELU, ELT_DROPOUT, ELT_RESIDUAL } elt_kind;

typedef struct elt_ctx {
    elt_kind kind;
    const float *mask; /* dropout: 0 or 1/(1-p) per element */
} elt_ctx;

static double elt_loss(const fd_case *c) {
    const elt_ctx *s = c->ctx;
    double l = 0;
    for (int64_t i = 0; i < c->n_out; i++) {
        double x = c->in[0][i], y = 0;
        switch (s->kind) {
        case ELT_RELU: y = x > 0 ? x : 0; break;
        case ELT_GELU: y = x * 0.5 * (1 + erf(x / sqrt(2.0))); break;
        case ELT_DROPOUT: y = x * s->mask[i]; break;
        case ELT_RESIDUAL: y = x + c->in[1][i]; break;
        }
        l += y * c->g[i];
    }
    return l;
}

static void elementwise_case(elt_kind kind, const char *op) {
    rng_state = 3 + (uint64_t)kind;
    int64_t n = 50;
    float *x = randf(n, -3, 3), *y = randf(n, -1, 1), *g = randf(n, -1, 1), *out = zerosf(n);
    float *dx = zerosf(n), *dy = zerosf(n), *mask = NULL;
    for (int64_t i = 0; i < n; i++) /* keep ReLU's kink out of reach of the differences */
        if (fabsf(x[i]) < 1e-2f) x[i] = 0.5f;
    elt_ctx s = {kind, NULL};
    fd_case c = {.loss = elt_loss, .g = g, .n_out = n, .ctx = &s, .op = op};
    add_input(&c, "in", x, n);
    if (kind == ELT_RESIDUAL) add_input(&c, "other", y, n);
    const float p = 0.3f;
    const uint64_t key = 12345;
    if (kind == ELT_DROPOUT) { /* the mask, read off the forward of ones */
        float *ones = malloc(sizeof(float) * (size_t)n);
        for (int64_t i = 0; i < n; i++) ones[i] = 1.0f;
        mask = zerosf(n);
        ts_dropout(mask, ones, p, key, n);
        int kept = 0;
        for (int64_t i = 0; i < n; i++) {
            assert_true(mask[i] == 0.0f || fabsf(mask[i] - 1.0f / 0.7f) < 1e-6f);
            kept += mask[i] != 0.0f;
        }
        assert_true(kept > 20 && kept < 50); /* ~70% kept */
        s.mask = mask;
        free(ones);
    }
    double *ref = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        double v = x[i];
        ref[i] = kind == ELT_RELU ? (v > 0 ? v : 0)
               : kind == ELT_GELU ? v * 0.5 * (1 + erf(v / sqrt(2.0)))
               : kind == ELT_DROPOUT ? v * mask[i]
                                     : v + y[i];
    }
    switch (kind) {
    case ELT_RELU:
        ts_relu(out, x, n);
        ts_bwd_relu_backward(dx, g, x, n);
        break;
    case ELT_GELU:
        ts_gelu(out, x, n);
        ts_bwd_gelu_backward(dx, g, x, n);
        break;
    case ELT_DROPOUT:
        ts_dropout(out, x, p, key, n);
        ts_bwd_dropout_backward(dx, g, p, key, n);
        break;
    case ELT_RESIDUAL:
        ts_add(out, x, y, n);
        ts_bwd_residual_backward(dx, dy, g, n);
        break;
    }
    check_forward(op, out, ref, n);
    check_input(&c, 0, dx);
    if (kind == ELT_RESIDUAL) check_input(&c, 1, dy);
    free(ref);
    free_case(&c);
    free(x), free(y), free(g), free(out), free(dx), free(dy), free(mask);
}

static void relu_gradients(void **state) {
    (void)state;
    elementwise_case(ELT_RELU, "relu");
}
static void gelu_gradients(void **state) {
    (void)state;
    elementwise_case(ELT_GELU, "gelu (exact erf)");
}
static void dropout_gradients(void **state) {
    (void)state;
    elementwise_case(ELT_DROPOUT, "dropout p=0.3");
}
static void residual_gradients(void **state) {
    (void)state;
    elementwise_case(ELT_RESIDUAL, "residual add");
}

/* ---- embeddings and positions ------------------------------------------------------ */

typedef struct emb_ctx {
    const int32_t *ids;
    int N, V, D, B, S;
    double scale;
} emb_ctx;

/* out[b, s] = table[ids[b, s]] * scale + pos[s] */
static double emb_loss(const fd_case *c) {
    const emb_ctx *s = c->ctx;
    double l = 0;
    for (int i = 0; i < s->N; i++)
        for (int j = 0; j < s->D; j++)
            l += (c->in[0][s->ids[i] * s->D + j] * s->scale + c->in[1][(i % s->S) * s->D + j]) * c->g[i * s->D + j];
    return l;
}

static void embedding_gradients(void **state) {
    (void)state;
    rng_state = 9;
    emb_ctx s = {NULL, 12, 5, 4, 3, 4, 1.7};
    int32_t ids[12] = {1, 3, 3, 0, 4, 1, 1, 1, 2, 0, 3, 3}; /* repeats: the scatter must add */
    s.ids = ids;
    float *table = randf(s.V * s.D, -1, 1), *pos = randf(s.S * s.D, -1, 1), *g = randf(s.N * s.D, -1, 1);
    float *tok = zerosf(s.N * s.D), *out = zerosf(s.N * s.D), *dtable = zerosf(s.V * s.D), *dpos = zerosf(s.S * s.D);
    float *dtok = zerosf(s.N * s.D);
    fd_case c = {.loss = emb_loss, .g = g, .n_out = s.N * s.D, .ctx = &s, .op = "embedding + positions"};
    add_input(&c, "table", table, s.V * s.D);
    add_input(&c, "pos", pos, s.S * s.D);
    /* the model's embed step: rows of the table scaled, then positions added */
    for (int i = 0; i < s.N; i++) ts_scale(tok + i * s.D, table + ids[i] * s.D, (float)s.scale, s.D);
    for (int b = 0; b < s.B; b++) ts_add(out + b * s.S * s.D, tok + b * s.S * s.D, pos, (int64_t)s.S * s.D);
    double *ref = malloc(sizeof(double) * (size_t)(s.N * s.D));
    for (int i = 0; i < s.N; i++)
        for (int j = 0; j < s.D; j++) ref[i * s.D + j] = table[ids[i] * s.D + j] * s.scale + pos[(i % s.S) * s.D + j];
    check_forward("embedding", out, ref, s.N * s.D);
    ts_bwd_posenc_backward(dtok, dpos, g, s.B, s.S, s.D);
    ts_bwd_embedding_backward(dtable, dtok, ids, s.N, s.D, (float)s.scale);
    check_input(&c, 0, dtable);
    check_input(&c, 1, dpos);
    free(ref);
    free_case(&c);
    free(table), free(pos), free(g), free(tok), free(out), free(dtable), free(dpos), free(dtok);
}

/* ---- attention ------------------------------------------------------------------------ */

/* q, k, v as column slices of fused buffers, as the model keeps them:
 * q in (B, Sq, H*hd) and k, v interleaved per head in (B, Sk, H*2*hd). */
typedef struct attn_ctx {
    int B, H, Sq, Sk, hd;
    const float *key_mask; /* (B, Sk) 0/-inf or NULL */
    bool causal;
} attn_ctx;

static int64_t q_at(const attn_ctx *s, int b, int h, int i, int j) {
    return ((int64_t)b * s->Sq + i) * s->H * s->hd + h * s->hd + j;
}
static int64_t kv_at(const attn_ctx *s, int b, int h, int i, int j, int which) {
    return ((int64_t)b * s->Sk + i) * s->H * 2 * s->hd + h * 2 * s->hd + which * s->hd + j;
}

/* out (B, Sq, H, hd) in double. */
static void attn_ref(const attn_ctx *s, const double *q, const double *kv, double *out, double *weights) {
    double scale = 1.0 / sqrt((double)s->hd);
    double *row = malloc(sizeof(double) * (size_t)s->Sk);
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < s->H; h++)
            for (int i = 0; i < s->Sq; i++) {
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j < s->Sk; j++) {
                    double d = 0;
                    for (int e = 0; e < s->hd; e++) d += q[q_at(s, b, h, i, e)] * kv[kv_at(s, b, h, j, e, 0)];
                    d *= scale;
                    if (s->key_mask) d += s->key_mask[b * s->Sk + j];
                    if (s->causal && j > i) d = -INFINITY;
                    row[j] = d;
                    if (d > mx) mx = d;
                }
                for (int j = 0; j < s->Sk; j++) sum += row[j] = isinf(row[j]) ? 0 : exp(row[j] - mx);
                for (int j = 0; j < s->Sk; j++) row[j] /= sum;
                if (weights)
                    for (int j = 0; j < s->Sk; j++)
                        weights[(((int64_t)b * s->H + h) * s->Sq + i) * s->Sk + j] = row[j];
                for (int e = 0; e < s->hd; e++) {
                    double acc = 0;
                    for (int j = 0; j < s->Sk; j++) acc += row[j] * kv[kv_at(s, b, h, j, e, 1)];
                    out[q_at(s, b, h, i, e)] = acc;
                }
            }
    free(row);
}

/* The attention the model computes, from the kernels it calls: per (batch,
 * head) the scaled scores (ts_gemm), their masked softmax (ts_softmax_rows),
 * the weighted values (ts_gemm); weights (B, H, Sq, Sk) kept for the backward. */
static void attention_forward(ts_bwd_heads out, float *weights, ts_bwd_heads q, ts_bwd_heads k, ts_bwd_heads v,
                              const attn_ctx *s) {
    float scale = 1.0f / sqrtf((float)s->hd);
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < s->H; h++) {
            float *w = weights + ((int64_t)b * s->H + h) * s->Sq * s->Sk;
            const float *qh = q.data + b * q.bstride + h * q.hstride, *kh = k.data + b * k.bstride + h * k.hstride;
            const float *vh = v.data + b * v.bstride + h * v.hstride;
            ts_gemm(false, true, s->Sq, s->Sk, s->hd, scale, qh, q.ld, kh, k.ld, 0.0f, w, s->Sk, TS_EPI_NONE, NULL);
            ts_softmax_rows(w, w, s->Sq, s->Sk, s->key_mask ? s->key_mask + b * s->Sk : NULL, s->causal, 0);
            ts_gemm(false, false, s->Sq, s->hd, s->Sk, 1.0f, w, s->Sk, vh, v.ld, 0.0f,
                    out.data + b * out.bstride + h * out.hstride, out.ld, TS_EPI_NONE, NULL);
        }
}

static double attn_loss(const fd_case *c) {
    double *out = malloc(sizeof(double) * (size_t)c->n_out);
    attn_ref(c->ctx, c->in[0], c->in[1], out, NULL);
    double l = dot_g(c, out);
    free(out);
    return l;
}

static void attention_case(int Sq, int Sk, bool key_padding, bool causal, const char *op) {
    rng_state = 20 + (uint64_t)(key_padding * 2 + causal);
    attn_ctx s = {2, 3, Sq, Sk, 4, NULL, causal};
    int D = s.H * s.hd;
    int64_t nq = (int64_t)s.B * Sq * D, nkv = (int64_t)s.B * Sk * 2 * D;
    float *q = randf(nq, -1.5, 1.5), *kv = randf(nkv, -1.5, 1.5), *g = randf(nq, -1, 1);
    float *out = zerosf(nq), *w = zerosf((int64_t)s.B * s.H * Sq * Sk), *dw = zerosf((int64_t)s.B * s.H * Sq * Sk);
    float *dq = zerosf(nq), *dkv = zerosf(nkv);
    float mask[2 * 16];
    if (key_padding) { /* batch 1: its last two keys are padding */
        for (int b = 0; b < s.B; b++)
            for (int j = 0; j < Sk; j++) mask[b * Sk + j] = b == 1 && j >= Sk - 2 ? -INFINITY : 0.0f;
        s.key_mask = mask;
    }
    fd_case c = {.loss = attn_loss, .g = g, .n_out = nq, .ctx = &s, .op = op};
    add_input(&c, "q", q, nq);
    add_input(&c, "kv", kv, nkv);
    ts_bwd_heads hq = {q, (int64_t)Sq * D, s.hd, D}, hk = {kv, (int64_t)Sk * 2 * D, 2 * s.hd, 2 * D};
    ts_bwd_heads hv = hk, ho = {out, (int64_t)Sq * D, s.hd, D};
    hv.data = kv + s.hd;
    attention_forward(ho, w, hq, hk, hv, &s);
    double *ref = malloc(sizeof(double) * (size_t)nq), *wref = malloc(sizeof(double) * (size_t)(s.B * s.H * Sq * Sk));
    attn_ref(&s, c.in[0], c.in[1], ref, wref);
    check_forward(op, out, ref, nq);
    check_forward(op, w, wref, (int64_t)s.B * s.H * Sq * Sk);
    ts_bwd_heads dhq = {dq, hq.bstride, hq.hstride, hq.ld}, dhk = {dkv, hk.bstride, hk.hstride, hk.ld};
    ts_bwd_heads dhv = dhk, dho = {g, ho.bstride, ho.hstride, ho.ld};
    dhv.data = dkv + s.hd;
    ts_bwd_attention_backward(dhq, dhk, dhv, dw, dho, w, hq, hk, hv, s.B, s.H, Sq, Sk, s.hd);
    check_input(&c, 0, dq);
    check_input(&c, 1, dkv);
    /* A masked key gets no gradient at all. */
    if (key_padding)
        for (int j = Sk - 2; j < Sk; j++)
            for (int e = 0; e < 2 * D; e++) assert_true(dkv[(int64_t)(1 * Sk + j) * 2 * D + e] == 0.0f);
    free(ref), free(wref);
    free_case(&c);
    free(q), free(kv), free(g), free(out), free(w), free(dw), free(dq), free(dkv);
}

static void attention_gradients(void **state) {
    (void)state;
    attention_case(5, 5, false, false, "attention");
}
static void attention_key_padding_gradients(void **state) {
    (void)state;
    attention_case(5, 5, true, false, "attention, key padding");
}
static void attention_causal_gradients(void **state) {
    (void)state;
    attention_case(5, 5, false, true, "attention, causal");
}
static void attention_both_masks_gradients(void **state) {
    (void)state;
    attention_case(6, 6, true, true, "attention, causal + padding");
}
static void cross_attention_gradients(void **state) {
    (void)state;
    attention_case(4, 7, true, false, "cross-attention Sq4 Sk7");
}

/* ---- attention, head by head and causal -------------------------------------------------- */

/* The head-by-head backward (ts_bwd_attention_backward) and the causal one,
 * which skips the hidden keys by blocks, against the three steps the tracer
 * sees, on causal weights made by the forward's kernels: the same floats bit
 * for bit with finite values, at sizes around the blocks (64 rows; a last
 * block of at most 4 joining the one before), Sq < Sk (past keys), one row,
 * odd head sizes. out[0..2] get dq, dk and dv, out[3] the scores' gradient. */
static void attn_three_ways(int B, int H, int Sq, int Sk, int hd, float **out) {
    int D = H * hd;
    int64_t nq = (int64_t)B * Sq * D, nkv = (int64_t)B * Sk * D, nw = (int64_t)B * H * Sq * Sk;
    float *q = randf(nq, -1.5, 1.5), *k = randf(nkv, -1.5, 1.5), *v = randf(nkv, -1, 1), *g = randf(nq, -1, 1);
    float *w = zerosf(nw);
    ts_bwd_heads hq = {q, (int64_t)Sq * D, hd, D}, hk = {k, (int64_t)Sk * D, hd, D}, hv = {v, (int64_t)Sk * D, hd, D};
    ts_bwd_heads ho = {g, (int64_t)Sq * D, hd, D};
    float scale = 1.0f / sqrtf((float)hd);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            float *wh = w + ((int64_t)b * H + h) * Sq * Sk;
            ts_gemm(false, true, Sq, Sk, hd, scale, q + b * hq.bstride + h * hd, D, k + b * hk.bstride + h * hd, D,
                    0.0f, wh, Sk, TS_EPI_NONE, NULL);
            ts_softmax_rows(wh, wh, Sq, Sk, NULL, true, Sk - Sq);
        }
    for (int way = 0; way < 3; way++) {
        float *dq = zerosf(nq), *dk = zerosf(nkv), *dv = zerosf(nkv), *ds = zerosf(nw);
        for (int64_t i = 0; i < nw; i++) ds[i] = 7.0f; /* stale scratch: every entry must be written */
        ts_bwd_heads gq = {dq, hq.bstride, hd, D}, gk = {dk, hk.bstride, hd, D}, gv = {dv, hv.bstride, hd, D};
        if (way == 0) {
            ts_bwd_attention_backward_values(gv, ds, ho, w, hv, B, H, Sq, Sk, hd);
            ts_bwd_softmax_backward(ds, ds, w, (int64_t)B * H * Sq, Sk);
            ts_bwd_attention_backward_scores(gq, gk, ds, hq, hk, B, H, Sq, Sk, hd);
        } else if (way == 1) {
            ts_bwd_attention_backward(gq, gk, gv, ds, ho, w, hq, hk, hv, B, H, Sq, Sk, hd);
        } else {
            ts_bwd_attention_backward_causal(gq, gk, gv, ds, ho, w, hq, hk, hv, B, H, Sq, Sk, hd);
        }
        float *got[4] = {dq, dk, dv, ds};
        int64_t len[4] = {nq, nkv, nkv, nw};
        for (int t = 0; t < 4; t++) {
            if (way == 0) {
                out[t] = got[t];
                continue;
            }
            int64_t bad = -1;
            for (int64_t i = 0; i < len[t] && bad < 0; i++)
                if (memcmp(&got[t][i], &out[t][i], sizeof(float)) != 0 && !(got[t][i] == 0 && out[t][i] == 0)) bad = i;
            if (bad >= 0)
                fail_msg("attention %s, B%d H%d Sq%d Sk%d hd%d: %s[%lld] = %.9g, the three steps give %.9g",
                         way == 1 ? "head by head" : "causal", B, H, Sq, Sk, hd, (const char *[]){"dq", "dk", "dv", "ds"}[t],
                         (long long)bad, (double)got[t][bad], (double)out[t][bad]);
            free(got[t]);
        }
    }
    free(q), free(k), free(v), free(g), free(w);
}

static void attention_causal_blocks_match_three_steps(void **state) {
    (void)state;
    rng_state = 77;
    const int sizes[][5] = {/* B, H, Sq, Sk, hd */
                            {2, 3, 1, 1, 4},    {1, 2, 5, 5, 3},    {2, 2, 64, 64, 8},  {1, 2, 67, 67, 5},
                            {1, 1, 69, 69, 16}, {2, 1, 130, 130, 7}, {1, 2, 70, 75, 9}, {1, 1, 3, 140, 4},
                            {1, 1, 200, 200, 33}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const int *z = sizes[i];
        float *out[4];
        attn_three_ways(z[0], z[1], z[2], z[3], z[4], out);
        for (int t = 0; t < 4; t++) free(out[t]);
    }
}

/* A NaN in the gradient at row r of the output reaches what row r touches:
 * its own query's gradient and the keys and values it sees; the causal
 * backward keeps the keys it cannot see finite (their true gradient), where
 * the whole product's 0 * NaN would spread it to every key (the values'
 * gradient still gets it within the block of keys the row's block reads). */
static void attention_causal_nan_stays_in_its_row(void **state) {
    (void)state;
    rng_state = 78;
    int B = 1, H = 1, Sq = 80, Sk = 80, hd = 8, r = 10;
    int64_t nq = (int64_t)Sq * hd, nw = (int64_t)Sq * Sk;
    float *q = randf(nq, -1, 1), *k = randf(nq, -1, 1), *v = randf(nq, -1, 1), *g = randf(nq, -1, 1);
    float *w = zerosf(nw), *dq = zerosf(nq), *dk = zerosf(nq), *dv = zerosf(nq), *ds = zerosf(nw);
    g[r * hd + 3] = NAN;
    ts_gemm(false, true, Sq, Sk, hd, 1.0f / sqrtf((float)hd), q, hd, k, hd, 0.0f, w, Sk, TS_EPI_NONE, NULL);
    ts_softmax_rows(w, w, Sq, Sk, NULL, true, 0);
    ts_bwd_heads hq = {q, nq, hd, hd}, hk = {k, nq, hd, hd}, hv = {v, nq, hd, hd}, ho = {g, nq, hd, hd};
    ts_bwd_heads gq = {dq, nq, hd, hd}, gk = {dk, nq, hd, hd}, gv = {dv, nq, hd, hd};
    ts_bwd_attention_backward_causal(gq, gk, gv, ds, ho, w, hq, hk, hv, B, H, Sq, Sk, hd);
    for (int i = 0; i < Sq; i++) {
        bool row_nan = false, key_nan = false;
        for (int e = 0; e < hd; e++) row_nan |= isnan(dq[i * hd + e]), key_nan |= isnan(dk[i * hd + e]);
        assert_true(row_nan == (i == r));
        assert_true(key_nan == (i <= r));
        /* dv sums weights times the gradient: 0 * NaN within row r's block of
         * keys (the first 64) is NaN as in the whole product; past it, left out */
        if (i <= r) assert_true(isnan(dv[i * hd + 3]));
        if (i >= 64) assert_false(isnan(dv[i * hd + 3]));
    }
    for (int j = r + 1; j < Sk; j++) assert_true(ds[r * Sk + j] == 0.0f); /* hidden: no gradient */
    free(q), free(k), free(v), free(g), free(w), free(dq), free(dk), free(dv), free(ds);
}

/* ---- cross-entropy ------------------------------------------------------------------------ */

typedef struct ce_ctx {
    const int32_t *labels;
    int N, V, ignore;
    double smoothing;
} ce_ctx;

static double ce_ref(const ce_ctx *s, const double *x) {
    double total = 0;
    int n = 0;
    for (int i = 0; i < s->N; i++) {
        if (s->labels[i] == s->ignore) continue;
        double mx = -INFINITY, sum = 0;
        for (int v = 0; v < s->V; v++) mx = fmax(mx, x[i * s->V + v]);
        for (int v = 0; v < s->V; v++) sum += exp(x[i * s->V + v] - mx);
        double lse = mx + log(sum), l = 0;
        for (int v = 0; v < s->V; v++) {
            double q = s->smoothing / s->V + (v == s->labels[i] ? 1 - s->smoothing : 0);
            l -= q * (x[i * s->V + v] - lse);
        }
        total += l;
        n++;
    }
    return total / n;
}

static double ce_loss(const fd_case *c) { return ce_ref(c->ctx, c->in[0]); }

static void cross_entropy_gradients(void **state) {
    (void)state;
    rng_state = 31;
    int32_t labels[8] = {3, 0, 5, 1, 0, 2, 6, 4}; /* 0 = padding, ignored */
    ce_ctx s = {labels, 8, 7, 0, 0.1};
    int64_t n = (int64_t)s.N * s.V;
    float *x = randf(n, -3, 3), *dx = zerosf(n);
    fd_case c = {.loss = ce_loss, .n_out = 1, .ctx = &s, .op = "cross-entropy"};
    add_input(&c, "logits", x, n);
    int64_t valid = 0;
    double got = ts_bwd_cross_entropy_forward(x, labels, s.N, s.V, s.ignore, (float)s.smoothing, &valid);
    assert_int_equal(valid, 6);
    assert_true(fabs(got - ce_ref(&s, c.in[0])) < 1e-6);
    ts_bwd_cross_entropy_backward(dx, 1.0f, x, labels, s.N, s.V, s.ignore, (float)s.smoothing);
    check_input(&c, 0, dx);
    for (int v = 0; v < s.V; v++) assert_true(dx[1 * s.V + v] == 0.0f); /* ignored rows: no gradient */
    free_case(&c);
    free(x), free(dx);
}

static int setup(void **state) {
    (void)state;
    return ts_kernels_init() == TS_OK ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(linear_gradients),
        cmocka_unit_test(layernorm_gradients),
        cmocka_unit_test(relu_gradients),
        cmocka_unit_test(gelu_gradients),
        cmocka_unit_test(dropout_gradients),
        cmocka_unit_test(residual_gradients),
        cmocka_unit_test(embedding_gradients),
        cmocka_unit_test(attention_gradients),
        cmocka_unit_test(attention_key_padding_gradients),
        cmocka_unit_test(attention_causal_gradients),
        cmocka_unit_test(attention_both_masks_gradients),
        cmocka_unit_test(cross_attention_gradients),
        cmocka_unit_test(attention_causal_blocks_match_three_steps),
        cmocka_unit_test(attention_causal_nan_stays_in_its_row),
        cmocka_unit_test(cross_entropy_gradients),
    };
    return cmocka_run_group_tests_name("backward", tests, setup, NULL);
}
