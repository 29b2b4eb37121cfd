/* The model: the steps it traces and their shapes, the masks, LayerNorm
 * placement, the permute back before concat (against a naive per-head loop
 * written from PyTorch's formulas), dropout, the tokenizer, the presets and
 * the messages a learner gets for a config that cannot work. PyTorch parity
 * itself is test_parity.c (fixtures from tests/ref/). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model_fixture.h"
#include "tscope/kernels.h"
#include "tscope/model.h"
#include "tscope/tokenizer.h"

/* The most steps a test here records (capture_init, model_fixture.h). */
#define MAX_STEPS 4096

/* ---- configs ------------------------------------------------------------------------ */

static ts_model_config small_encoder(void) { return fixture_encoder(2, 5, 8, 2, 2, 7); }

static ts_model_config tiny(void) {
    ts_model_config c;
    assert_ok(ts_model_config_preset(&c, "tiny"));
    c.vocab = 8; /* what "My name is Goro" needs: 4 words + 4 special tokens */
    return c;
}

static int setup(void **state) {
    (void)state;
    return ts_kernels_init() == TS_OK ? 0 : -1;
}

/* ---- shapes of every step ----------------------------------------------------------------- */

static void tiny_traces_every_step_with_its_shape(void **state) {
    (void)state;
    ts_model_config c = tiny();
    ts_model m;
    assert_ok(ts_model_init(&m, &c));
    int32_t src[4] = {4, 5, 6, 7}, tgt[4] = {TS_TOK_BOS, 4, 5, 6};
    ts_model_input in = {.src_ids = src, .tgt_ids = tgt};
    capture r;
    capture_init(&r, MAX_STEPS, NULL);
    ts_hook hook = {.fn = capture_record, .ctx = &r};
    ts_tensor out;
    assert_ok(ts_model_forward(&m, &in, &hook, &out));
    assert_shape(&out, 1, 4, 8);
    assert_string_equal(r.steps[0].name, "input");
    assert_step_shape(&r, "input", 1, 4);
    assert_step_shape(&r, "embed.tokens", 1, 4, 16);
    assert_step_shape(&r, "embed.pe", 4, 16);
    assert_int_equal(capture_find(&r, "embed.pe")->tag, TS_TAG_POSENC);
    assert_step_shape(&r, "embed.out", 1, 4, 16);
    const char *attn = "encoder.layers.1.self_attn";
    char name[160];
    struct { const char *leaf; int rank; int64_t shape[4]; } want[] = {
        {"qkv", 3, {1, 4, 48}},         {"qkv_heads", 4, {1, 4, 2, 24}}, {"qkv_perm", 4, {1, 2, 4, 24}},
        {"q", 4, {1, 2, 4, 8}},         {"k", 4, {1, 2, 4, 8}},          {"v", 4, {1, 2, 4, 8}},
        {"scores", 4, {1, 2, 4, 4}},    {"scaled", 4, {1, 2, 4, 4}},     {"weights", 4, {1, 2, 4, 4}},
        {"values", 4, {1, 2, 4, 8}},    {"values_perm", 4, {1, 4, 2, 8}}, {"concat", 3, {1, 4, 16}},
        {"out", 3, {1, 4, 16}},
    };
    int prev = -1;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        snprintf(name, sizeof name, "%s.%s", attn, want[i].leaf);
        const capture_step *s = capture_find(&r, name);
        if (!s) fail_msg("no step %s", name);
        assert_int_equal(s->rank, want[i].rank);
        for (int d = 0; d < s->rank; d++) assert_int_equal(s->shape[d], want[i].shape[d]);
        assert_true(capture_index(&r, name) > prev); /* in seed 000's order */
        prev = capture_index(&r, name);
    }
    assert_int_equal(capture_find(&r, "encoder.layers.0.self_attn.weights")->tag, TS_TAG_ATTN_WEIGHTS);
    /* no mask in the encoder without padding; the decoder's self-attention is causal */
    assert_null(capture_find(&r, "encoder.layers.0.self_attn.masked"));
    assert_step_shape(&r, "decoder.layers.0.self_attn.masked", 1, 2, 4, 4);
    assert_null(capture_find(&r, "decoder.layers.0.cross_attn.masked"));
    assert_step_shape(&r, "encoder.layers.0.norm1.mean", 1, 4, 1);
    assert_step_shape(&r, "encoder.layers.0.norm1.std", 1, 4, 1);
    assert_step_shape(&r, "encoder.layers.0.norm1.gamma", 16);
    assert_step_shape(&r, "encoder.layers.0.ffn.hidden", 1, 4, 32);
    assert_step_shape(&r, "encoder.layers.0.ffn.act", 1, 4, 32);
    assert_step_shape(&r, "encoder.layers.1.out", 1, 4, 16);
    assert_step_shape(&r, "encoder.out", 1, 4, 16);
    assert_step_shape(&r, "decoder.input", 1, 4);
    assert_step_shape(&r, "decoder.layers.1.cross_attn.q", 1, 2, 4, 8);
    assert_step_shape(&r, "decoder.layers.1.cross_attn.kv", 1, 4, 32);
    assert_step_shape(&r, "decoder.layers.1.cross_attn.kv_perm", 1, 2, 4, 16);
    assert_step_shape(&r, "decoder.layers.1.norm3.out", 1, 4, 16);
    assert_step_shape(&r, "decoder.out", 1, 4, 16);
    assert_step_shape(&r, "logits", 1, 4, 8);
    assert_string_equal(r.steps[r.n - 1].name, "logits");
    capture_free(&r);
    ts_model_free(&m);
}

/* The dry run (tscope shapes) must list exactly the steps the real run makes. */
static void dry_run_lists_the_same_steps(void **state) {
    (void)state;
    ts_model_config configs[3] = {tiny(), small_encoder(), small_encoder()};
    configs[2].norm = TS_NORM_PRE;
    configs[2].final_norm = true;
    configs[2].pe = TS_PE_LEARNED;
    configs[2].head = TS_HEAD_CLS;
    configs[2].n_labels = 3;
    for (int k = 0; k < 3; k++) {
        ts_model_config *c = &configs[k];
        capture real, dry;
        capture_init(&real, MAX_STEPS, NULL);
        capture_init(&dry, MAX_STEPS, NULL);
        ts_model m;
        assert_ok(ts_model_init(&m, c));
        int32_t src[4] = {4, 5, 6, 7}, tgt[4] = {1, 4, 5, 6};
        float *x = fixture_randn((int64_t)c->batch * c->seq * c->d_model, 3);
        ts_model_input in = {0};
        if (c->input == TS_INPUT_TOKENS) in.src_ids = src, in.tgt_ids = tgt;
        else in.src_embedded = x;
        ts_hook h1 = {.fn = capture_record, .ctx = &real}, h2 = {.fn = capture_record, .ctx = &dry};
        assert_ok(ts_model_forward(&m, &in, &h1, NULL));
        ts_model_summary sum;
        assert_ok(ts_model_dry_run(c, &h2, &sum));
        assert_int_equal(real.n, dry.n);
        assert_int_equal(sum.steps, dry.n);
        for (int i = 0; i < real.n; i++) {
            assert_string_equal(real.steps[i].name, dry.steps[i].name);
            assert_int_equal(real.steps[i].rank, dry.steps[i].rank);
            assert_memory_equal(real.steps[i].shape, dry.steps[i].shape, sizeof real.steps[i].shape);
        }
        assert_true(sum.arena_bytes == m.arena_bytes);
        ts_model_summary_free(&sum);
        ts_model_free(&m);
        free(x);
        capture_free(&real);
        capture_free(&dry);
    }
}

/* seed 000's printout, for one layer, is contained in order in tscope's steps,
 * but for values and attention, which seed 000 prints on one line in that
 * order: the model makes (and hands over) the attention first. The printed
 * torch-style trace puts them back in the seed's order (tests/shapes_test.sh). */
static void seed000_steps_cover_the_seed_printout(void **state) {
    (void)state;
    ts_model_config c;
    assert_ok(ts_model_config_preset(&c, "seed000"));
    capture r;
    capture_init(&r, MAX_STEPS, NULL);
    ts_hook hook = {.fn = capture_record, .ctx = &r};
    ts_model_summary sum;
    assert_ok(ts_model_dry_run(&c, &hook, &sum));
    /* 201 GFLOP, as ../shared/peers/torch_enc.py counts them */
    assert_true(fabs(sum.flops - 5.0 * (2.0 * 6000 * 512 * 1536 + 4.0 * 240 * 200 * 200 * 64 + 2.0 * 6000 * 512 * 512 +
                                        4.0 * 6000 * 512 * 2048)) < 1.0);
    assert_int_equal(sum.params, 5 * (512 * 1536 + 1536 + 512 * 512 + 512 + 2 * 512 * 2048 + 2048 + 512 + 4 * 512));
    /* x, qkv, qkv view, permute, q, k, v, scaled, attention, values, values, out,
     * mean, std, y, gamma, beta, out, linear1, relu, dropout, linear2, mean, std,
     * y, gamma, beta, out: seed 000's torch.Size values for one layer */
    static const int64_t seq[][4] = {
        {30, 200, 512}, {30, 200, 1536}, {30, 200, 8, 192}, {30, 8, 200, 192}, {30, 8, 200, 64},
        {30, 8, 200, 64}, {30, 8, 200, 64}, {30, 8, 200, 200}, {30, 8, 200, 200}, {30, 8, 200, 64},
        {30, 200, 512}, {30, 200, 512}, {30, 200, 1}, {30, 200, 1}, {30, 200, 512}, {512}, {512},
        {30, 200, 512}, {30, 200, 2048}, {30, 200, 2048}, {30, 200, 2048}, {30, 200, 512}, {30, 200, 1},
        {30, 200, 1}, {30, 200, 512}, {512}, {512}, {30, 200, 512}};
    int n_seq = (int)(sizeof seq / sizeof seq[0]), at = 0;
    for (int layer = 0; layer < 5; layer++)
        for (int k = 0; k < n_seq; k++) {
            int rank = seq[k][1] == 0 ? 1 : seq[k][3] ? 4 : 3;
            bool found = false;
            for (; at < r.n && !found; at++) {
                const capture_step *s = &r.steps[at];
                found = s->rank == rank;
                for (int d = 0; found && d < rank; d++) found = s->shape[d] == seq[k][d];
            }
            if (!found) fail_msg("layer %d: seed 000's size #%d not found in order", layer, k);
        }
    ts_model_summary_free(&sum);
    capture_free(&r);
}

/* ---- attention: masks, rows, heads ---------------------------------------------------- */

static void causal_rows_see_only_the_past(void **state) {
    (void)state;
    ts_model_config c = tiny();
    ts_model m;
    assert_ok(ts_model_init(&m, &c));
    int32_t src[4] = {4, 5, 6, 7}, tgt[4] = {1, 4, 5, 6};
    ts_model_input in = {.src_ids = src, .tgt_ids = tgt};
    capture r;
    capture_init(&r, MAX_STEPS, NULL);
    r.keep[r.n_keep++] = "decoder.layers.0.self_attn.weights";
    r.keep[r.n_keep++] = "decoder.layers.0.self_attn.masked";
    ts_hook hook = {.fn = capture_record, .ctx = &r};
    assert_ok(ts_model_forward(&m, &in, &hook, NULL));
    const float *w = capture_find(&r, "decoder.layers.0.self_attn.weights")->values;
    const float *masked = capture_find(&r, "decoder.layers.0.self_attn.masked")->values;
    for (int h = 0; h < 2; h++)
        for (int i = 0; i < 4; i++) {
            double sum = 0;
            for (int j = 0; j < 4; j++) {
                float v = w[(h * 4 + i) * 4 + j];
                if (j > i) {
                    assert_float_equal(v, 0.0f, 0.0f);
                    assert_true(isinf(masked[(h * 4 + i) * 4 + j]) && masked[(h * 4 + i) * 4 + j] < 0);
                } else {
                    assert_true(v > 0.0f);
                }
                sum += v;
            }
            assert_float_equal(sum, 1.0, 1e-6);
        }
    capture_free(&r);
    ts_model_free(&m);
}

static void key_padding_hides_padded_keys(void **state) {
    (void)state;
    ts_model_config c = small_encoder();
    ts_model m;
    assert_ok(ts_model_init(&m, &c));
    float *x = fixture_randn(2 * 5 * 8, 11);
    uint8_t pad[10] = {0, 0, 0, 1, 1, /* sequence 1: */ 0, 0, 0, 0, 0};
    ts_model_input in = {.src_embedded = x, .src_pad = pad};
    capture r;
    capture_init(&r, MAX_STEPS, NULL);
    r.keep[r.n_keep++] = "encoder.layers.0.self_attn.weights";
    ts_hook hook = {.fn = capture_record, .ctx = &r};
    ts_tensor out;
    assert_ok(ts_model_forward(&m, &in, &hook, &out));
    assert_non_null(capture_find(&r, "encoder.layers.0.self_attn.masked"));
    const float *w = capture_find(&r, "encoder.layers.0.self_attn.weights")->values; // (2, 2, 5, 5)
    for (int b = 0; b < 2; b++)
        for (int h = 0; h < 2; h++)
            for (int i = 0; i < 5; i++) {
                double sum = 0;
                for (int j = 0; j < 5; j++) {
                    float v = w[((b * 2 + h) * 5 + i) * 5 + j];
                    if (pad[b * 5 + j]) assert_float_equal(v, 0.0f, 0.0f);
                    sum += v;
                }
                assert_float_equal(sum, 1.0, 1e-6);
            }
    for (int64_t i = 0; i < ts_tensor_numel(&out); i++) assert_true(isfinite(out.data[i]));
    free(x);
    capture_free(&r);
    ts_model_free(&m);
}

/* Causal plus a padded first key: row 0 sees nothing. Its weights are zeros,
 * not NaN, and the output stays finite. */
static void fully_masked_row_gives_zeros(void **state) {
    (void)state;
    ts_model_config c = small_encoder();
    c.causal = true;
    ts_model m;
    assert_ok(ts_model_init(&m, &c));
    float *x = fixture_randn(2 * 5 * 8, 12);
    uint8_t pad[10] = {1, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    ts_model_input in = {.src_embedded = x, .src_pad = pad};
    for (int watched = 0; watched < 2; watched++) {
        capture r;
        capture_init(&r, MAX_STEPS, NULL);
        r.keep[r.n_keep++] = "encoder.layers.0.self_attn.weights";
        ts_hook hook = {.fn = capture_record, .ctx = &r};
        ts_tensor out;
        assert_ok(ts_model_forward(&m, &in, watched ? &hook : NULL, &out));
        for (int64_t i = 0; i < ts_tensor_numel(&out); i++) assert_true(isfinite(out.data[i]));
        if (watched) {
            const float *w = capture_find(&r, "encoder.layers.0.self_attn.weights")->values;
            for (int h = 0; h < 2; h++)
                for (int j = 0; j < 5; j++) assert_float_equal(w[(h * 5 + 0) * 5 + j], 0.0f, 0.0f);
            assert_float_equal(w[(0 * 5 + 1) * 5 + 1], 1.0f, 1e-6f); /* row 1 sees key 1 only */
        }
        capture_free(&r);
    }
    free(x);
    ts_model_free(&m);
}

/* ---- a naive reference, written from PyTorch's formulas ----------------------------- */

/* A parameter in PyTorch's layout (a fresh copy). */
static float *torch_param(const ts_model *m, const char *name) {
    int i = ts_model_find_param(m, name);
    if (i < 0) fail_msg("no parameter %s", name);
    float *p = malloc(sizeof(float) * (size_t)m->params[i].numel);
    assert_non_null(p);
    ts_model_export_param(m, i, p);
    return p;
}

static void ref_linear(double *out, const double *in, int rows, int nin, int nout, const float *w, const float *b) {
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < nout; o++) {
            double s = b ? b[o] : 0;
            for (int i = 0; i < nin; i++) s += in[r * nin + i] * w[o * nin + i];
            out[r * nout + o] = s;
        }
}

static void ref_layernorm(double *x, int rows, int D, const float *g, const float *b, double eps) {
    for (int r = 0; r < rows; r++) {
        double mean = 0, var = 0;
        for (int j = 0; j < D; j++) mean += x[r * D + j];
        mean /= D;
        for (int j = 0; j < D; j++) var += (x[r * D + j] - mean) * (x[r * D + j] - mean);
        var /= D;
        for (int j = 0; j < D; j++) x[r * D + j] = g[j] * (x[r * D + j] - mean) / sqrt(var + eps) + b[j];
    }
}

/* nn.MultiheadAttention: q, k, v = x W^T split by [Wq; Wk; Wv]; head h uses
 * columns h*hd..; each head's values go back to columns h*hd.. before out_proj. */
static void ref_mha(double *out, const double *x, int B, int S, int D, int H, const ts_model *m, const char *prefix,
                    const uint8_t *pad, bool causal) {
    char name[128];
    snprintf(name, sizeof name, "%s.in_proj_weight", prefix);
    float *in_w = torch_param(m, name);
    snprintf(name, sizeof name, "%s.in_proj_bias", prefix);
    float *in_b = torch_param(m, name);
    snprintf(name, sizeof name, "%s.out_proj.weight", prefix);
    float *out_w = torch_param(m, name);
    snprintf(name, sizeof name, "%s.out_proj.bias", prefix);
    float *out_b = torch_param(m, name);
    int hd = D / H;
    double *qkv = malloc(sizeof(double) * (size_t)B * S * 3 * D), *ctx = calloc((size_t)B * S * D, sizeof(double));
    double *p = malloc(sizeof(double) * (size_t)S);
    ref_linear(qkv, x, B * S, D, 3 * D, in_w, in_b);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < S; i++) {
                double mx = -INFINITY;
                for (int j = 0; j < S; j++) {
                    bool hidden = (causal && j > i) || (pad && pad[b * S + j]);
                    double s = 0;
                    for (int d = 0; d < hd; d++)
                        s += qkv[(b * S + i) * 3 * D + h * hd + d] * qkv[(b * S + j) * 3 * D + D + h * hd + d];
                    p[j] = hidden ? -INFINITY : s / sqrt((double)hd);
                    if (p[j] > mx) mx = p[j];
                }
                double z = 0;
                for (int j = 0; j < S; j++) z += p[j] = isinf(mx) ? 0 : exp(p[j] - mx);
                for (int j = 0; j < S; j++)
                    for (int d = 0; d < hd; d++)
                        ctx[(b * S + i) * D + h * hd + d] +=
                            (z > 0 ? p[j] / z : 0) * qkv[(b * S + j) * 3 * D + 2 * D + h * hd + d];
            }
    ref_linear(out, ctx, B * S, D, D, out_w, out_b);
    free(qkv), free(ctx), free(p), free(in_w), free(in_b), free(out_w), free(out_b);
}

static void ref_ffn(double *out, const double *x, int rows, int D, int F, const ts_model *m, int layer) {
    char name[128];
    float *w[4];
    const char *leaf[4] = {"linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias"};
    for (int k = 0; k < 4; k++) {
        snprintf(name, sizeof name, "encoder.layers.%d.%s", layer, leaf[k]);
        w[k] = torch_param(m, name);
    }
    double *h = malloc(sizeof(double) * (size_t)rows * F);
    ref_linear(h, x, rows, D, F, w[0], w[1]);
    for (int i = 0; i < rows * F; i++) h[i] = h[i] > 0 ? h[i] : 0;
    ref_linear(out, h, rows, F, D, w[2], w[3]);
    free(h);
    for (int k = 0; k < 4; k++) free(w[k]);
}

static void ref_norm(double *x, int rows, int D, const ts_model *m, const char *prefix, double eps) {
    char name[128];
    snprintf(name, sizeof name, "%s.weight", prefix);
    float *g = torch_param(m, name);
    snprintf(name, sizeof name, "%s.bias", prefix);
    float *b = torch_param(m, name);
    ref_layernorm(x, rows, D, g, b, eps);
    free(g), free(b);
}

/* nn.TransformerEncoder, post-LN or norm_first, ReLU, no dropout. */
static void ref_encoder(double *x, const ts_model *m, const uint8_t *pad) {
    const ts_model_config *c = &m->cfg;
    int B = c->batch, S = c->seq, D = c->d_model, n = B * S * D;
    double *t = malloc(sizeof(double) * (size_t)n), *u = malloc(sizeof(double) * (size_t)n);
    char p[128];
    for (int l = 0; l < c->layers; l++) {
        snprintf(p, sizeof p, "encoder.layers.%d.self_attn", l);
        char n1[128], n2[128];
        snprintf(n1, sizeof n1, "encoder.layers.%d.norm1", l);
        snprintf(n2, sizeof n2, "encoder.layers.%d.norm2", l);
        if (c->norm == TS_NORM_POST) {
            ref_mha(t, x, B, S, D, c->heads, m, p, pad, c->causal);
            for (int i = 0; i < n; i++) x[i] += t[i];
            ref_norm(x, B * S, D, m, n1, c->eps);
            ref_ffn(t, x, B * S, D, c->ffn, m, l);
            for (int i = 0; i < n; i++) x[i] += t[i];
            ref_norm(x, B * S, D, m, n2, c->eps);
        } else {
            memcpy(u, x, sizeof(double) * (size_t)n);
            ref_norm(u, B * S, D, m, n1, c->eps);
            ref_mha(t, u, B, S, D, c->heads, m, p, pad, c->causal);
            for (int i = 0; i < n; i++) x[i] += t[i];
            memcpy(u, x, sizeof(double) * (size_t)n);
            ref_norm(u, B * S, D, m, n2, c->eps);
            ref_ffn(t, u, B * S, D, c->ffn, m, l);
            for (int i = 0; i < n; i++) x[i] += t[i];
        }
    }
    if (c->final_norm) ref_norm(x, B * S, D, m, "encoder.norm", c->eps);
    free(t), free(u);
}

static void check_against_reference(ts_model_config c, const uint8_t *pad) {
    ts_model m;
    assert_ok(ts_model_init(&m, &c));
    int n = c.batch * c.seq * c.d_model;
    float *x = fixture_randn(n, 21);
    double *want = malloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < n; i++) want[i] = x[i];
    ref_encoder(want, &m, pad);
    ts_model_input in = {.src_embedded = x, .src_pad = pad};
    float *want_f = malloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < n; i++) want_f[i] = (float)want[i];
    for (int watched = 0; watched < 2; watched++) {
        capture r;
        capture_init(&r, MAX_STEPS, NULL);
        ts_hook hook = {.fn = capture_record, .ctx = &r};
        ts_tensor out;
        assert_ok(ts_model_forward(&m, &in, watched ? &hook : NULL, &out));
        assert_floats_close(out.data, want_f, n, 1e-4);
        capture_free(&r);
    }
    free(x), free(want), free(want_f);
    ts_model_free(&m);
}

static void post_ln_encoder_matches_naive_loops(void **state) {
    (void)state;
    ts_model_config c = small_encoder();
    c.d_model = 12, c.heads = 3, c.seq = 6;
    check_against_reference(c, NULL);
    uint8_t pad[12] = {0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0};
    check_against_reference(c, pad);
    c.causal = true;
    check_against_reference(c, pad);
}

static void pre_ln_encoder_matches_naive_loops(void **state) {
    (void)state;
    ts_model_config c = small_encoder();
    c.d_model = 12, c.heads = 4, c.seq = 6, c.norm = TS_NORM_PRE, c.final_norm = true;
    check_against_reference(c, NULL);
}

/* seed 000 reshapes values (B, H, S, hd) straight to (B, S, D); tscope
 * permutes to (B, S, H, hd) first. Check concat against the per-head values:
 * concat[b, s, h*hd + d] == values[b, h, s, d]. */
static void concat_is_values_permuted_back(void **state) {
    (void)state;
    ts_model_config c = small_encoder();
    c.layers = 1;
    ts_model m;
    assert_ok(ts_model_init(&m, &c));
    float *x = fixture_randn(2 * 5 * 8, 5);
    ts_model_input in = {.src_embedded = x};
    capture r;
    capture_init(&r, MAX_STEPS, NULL);
    r.keep[r.n_keep++] = "encoder.layers.0.self_attn.values";
    r.keep[r.n_keep++] = "encoder.layers.0.self_attn.concat";
    ts_hook hook = {.fn = capture_record, .ctx = &r};
    assert_ok(ts_model_forward(&m, &in, &hook, NULL));
    const float *values = capture_find(&r, "encoder.layers.0.self_attn.values")->values; // (2, 2, 5, 4)
    const float *concat = capture_find(&r, "encoder.layers.0.self_attn.concat")->values; // (2, 5, 8)
    bool seed_would_differ = false;
    for (int b = 0; b < 2; b++)
        for (int h = 0; h < 2; h++)
            for (int s = 0; s < 5; s++)
                for (int d = 0; d < 4; d++) {
                    float v = values[((b * 2 + h) * 5 + s) * 4 + d];
                    assert_float_equal(concat[(b * 5 + s) * 8 + h * 4 + d], v, 0.0f);
                    /* the seed's reshape puts this value elsewhere */
                    int flat = ((h * 5 + s) * 4 + d);
                    if (concat[b * 40 + flat] != v) seed_would_differ = true;
                }
    assert_true(seed_would_differ);
    free(x);
    capture_free(&r);
    ts_model_free(&m);
}

/* With no hook the stages fuse (scale in the GEMM, mask in the softmax,
 * activation in the epilogue); the numbers must not change. */
static void hook_does_not_change_the_numbers(void **state) {
    (void)state;
    ts_model_config c = tiny();
    c.norm = TS_NORM_PRE;
    c.activation = TS_ACT_GELU;
    ts_model m;
    assert_ok(ts_model_init(&m, &c));
    int32_t src[4] = {4, 5, 6, 7}, tgt[4] = {1, 4, 5, 6};
    ts_model_input in = {.src_ids = src, .tgt_ids = tgt};
    ts_tensor out;
    assert_ok(ts_model_forward(&m, &in, NULL, &out));
    float plain[32];
    memcpy(plain, out.data, sizeof plain);
    capture r;
    capture_init(&r, MAX_STEPS, NULL);
    ts_hook hook = {.fn = capture_record, .ctx = &r};
    assert_ok(ts_model_forward(&m, &in, &hook, &out));
    assert_floats_close(out.data, plain, 32, 1e-6);
    capture_free(&r);
    ts_model_free(&m);
}

/* Causal attention unwatched skips the keys each block of 64 queries cannot
 * see (model_forward.c, causal_block); watched, it computes every step in
 * full. Both must give the same bits: lengths with a short last block, one
 * that joins the block before it, and more keys than a GEMM K block (512 on
 * AVX2), with and without key padding, on every instruction set. */
static void causal_blocks_give_the_staged_numbers(void **state) {
    (void)state;
    const int seqs[] = {5, 64, 68, 150, 600};
    const ts_isa isas[] = {TS_ISA_SCALAR, TS_ISA_AVX2, TS_ISA_AVX512, TS_ISA_NEON};
    int compared = 0;
    for (int ii = 0; ii < 4; ii++) {
        if (!ts_isa_supported(isas[ii])) continue;
        assert_ok(ts_kernels_force(isas[ii]));
        for (int si = 0; si < 5; si++) {
            ts_model_config c = fixture_encoder(2, seqs[si], 16, 2, 1, 31);
            c.causal = true;
            ts_model m;
            assert_ok(ts_model_init(&m, &c));
            int64_t n = (int64_t)c.batch * c.seq * c.d_model;
            float *x = fixture_randn(n, 32), *plain = malloc(sizeof(float) * (size_t)n);
            uint8_t *pad = calloc((size_t)(c.batch * c.seq), 1);
            assert_non_null(plain), assert_non_null(pad);
            pad[c.seq - 1] = 1, pad[c.seq + 1] = 1; /* a padded key in each batch row */
            for (int padded = 0; padded < 2; padded++) {
                ts_model_input in = {.src_embedded = x, .src_pad = padded ? pad : NULL};
                ts_tensor out;
                assert_ok(ts_model_forward(&m, &in, NULL, &out));
                memcpy(plain, out.data, sizeof(float) * (size_t)n);
                capture r;
                capture_init(&r, MAX_STEPS, NULL);
                ts_hook hook = {.fn = capture_record, .ctx = &r};
                assert_ok(ts_model_forward(&m, &in, &hook, &out));
                for (int64_t i = 0; i < n; i++)
                    if (memcmp(&out.data[i], &plain[i], sizeof(float)) != 0)
                        fail_msg("%s seq %d padded %d: element %lld unwatched %.9g, watched %.9g",
                                 ts_isa_name(isas[ii]), seqs[si], padded, (long long)i, plain[i], out.data[i]);
                capture_free(&r);
                compared++;
            }
            free(x), free(plain), free(pad);
            ts_model_free(&m);
        }
    }
    assert_ok(ts_kernels_init());
    printf("causal blocks: %d runs equal to the bit\n", compared);
    assert_true(compared >= 10);
}

/* A hook that takes every scaled step offered ahead (as a trace writer
 * does for a factor it can derive), so the model leaves the scaling to the
 * mask's pass over the scores. */
static ts_status take_ahead(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag, float factor,
                            bool *done) {
    (void)ctx, (void)name, (void)op, (void)t, (void)tag, (void)factor;
    *done = true;
    return TS_OK;
}

static ts_status edit_nothing(void *ctx, const char *name, ts_op op, ts_tensor *t, ts_tag tag, bool *edited) {
    (void)ctx, (void)name, (void)op, (void)t, (void)tag;
    *edited = false;
    return TS_OK;
}

/* The masked scores, the weights and the output made with the scale taken
 * in the mask's pass (a hook that derives the scaled step) are those of the
 * scale's own pass then the mask (a hook that does not), bit for bit; and a
 * watched causal head's values, which skip the keys each block of queries
 * cannot see, are those of the full product (made when an edit could have
 * changed the weights). Causal with and without padded keys, padded keys
 * alone, padded query rows too, 150 positions (blocks of 64, 64 and 22), a
 * scale that is not a power of two (head width 8), on every instruction set. */
static void scale_in_the_mask_pass_gives_the_same_steps(void **state) {
    (void)state;
    const ts_isa isas[] = {TS_ISA_SCALAR, TS_ISA_AVX2, TS_ISA_AVX512, TS_ISA_NEON};
    const char *keep[] = {"encoder.layers.0.self_attn.masked", "encoder.layers.0.self_attn.weights",
                          "encoder.layers.1.self_attn.masked", NULL};
    int compared = 0;
    for (int ii = 0; ii < 4; ii++) {
        if (!ts_isa_supported(isas[ii])) continue;
        assert_ok(ts_kernels_force(isas[ii]));
        for (int kind = 0; kind < 4; kind++) {
            ts_model_config c = fixture_encoder(2, 150, 16, 2, 2, 41);
            c.causal = kind < 2;
            c.mask = kind == 3 ? TS_MASK_PADDING_BOTH : TS_MASK_PADDING;
            ts_model m;
            assert_ok(ts_model_init(&m, &c));
            int64_t n = (int64_t)c.batch * c.seq * c.d_model;
            float *x = fixture_randn(n, 43), *plain = malloc(sizeof(float) * (size_t)n);
            uint8_t pad[2 * 150] = {0};
            assert_non_null(plain);
            pad[149] = pad[150 + 100] = pad[150 + 133] = 1;
            ts_model_input in = {.src_embedded = x, .src_pad = kind == 0 ? NULL : pad};
            capture made, taken, full;
            capture_init(&made, MAX_STEPS, keep);
            capture_init(&taken, MAX_STEPS, keep);
            capture_init(&full, MAX_STEPS, NULL);
            ts_hook h_made = {.fn = capture_record, .ctx = &made};
            ts_hook h_taken = {.fn = capture_record, .ctx = &taken, .derive_next = take_ahead};
            ts_hook h_full = {.fn = capture_record, .ctx = &full, .edit = edit_nothing};
            ts_tensor out;
            assert_ok(ts_model_forward(&m, &in, &h_full, &out));
            memcpy(plain, out.data, sizeof(float) * (size_t)n);
            assert_ok(ts_model_forward(&m, &in, &h_made, &out));
            assert_memory_equal(out.data, plain, sizeof(float) * (size_t)n);
            assert_ok(ts_model_forward(&m, &in, &h_taken, &out));
            assert_memory_equal(out.data, plain, sizeof(float) * (size_t)n);
            assert_non_null(capture_find(&made, "encoder.layers.0.self_attn.scaled"));
            assert_null(capture_find(&taken, "encoder.layers.0.self_attn.scaled")); /* taken ahead */
            int64_t att = (int64_t)c.batch * c.heads * c.seq * c.seq;
            for (int k = 0; keep[k]; k++) {
                const float *a = capture_values(&made, keep[k]), *b = capture_values(&taken, keep[k]);
                assert_non_null(a), assert_non_null(b);
                for (int64_t i = 0; i < att; i++)
                    if (memcmp(&a[i], &b[i], sizeof(float)) != 0)
                        fail_msg("%s kind %d %s[%lld]: %.9g scaled apart, %.9g with the mask", ts_isa_name(isas[ii]),
                                 kind, keep[k], (long long)i, a[i], b[i]);
            }
            capture_free(&made), capture_free(&taken), capture_free(&full);
            free(x), free(plain);
            ts_model_free(&m);
            compared++;
        }
    }
    assert_ok(ts_kernels_init());
    printf("scale in the mask pass: %d models equal to the bit\n", compared);
    assert_true(compared >= 4);
}

/* One forward of m over ids, unwatched and watched: the outputs (n) equal to the bit. */
static void unwatched_equals_watched(ts_model *m, const int32_t *ids, int64_t n, const char *what) {
    ts_model_input in = {.src_ids = ids};
    ts_tensor out;
    float *plain = malloc(sizeof(float) * (size_t)n);
    assert_non_null(plain);
    assert_ok(ts_model_forward(m, &in, NULL, &out));
    memcpy(plain, out.data, sizeof(float) * (size_t)n);
    capture r;
    capture_init(&r, MAX_STEPS, NULL);
    ts_hook hook = {.fn = capture_record, .ctx = &r};
    assert_ok(ts_model_forward(m, &in, &hook, &out));
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&out.data[i], &plain[i], sizeof(float)) != 0)
            fail_msg("%s: element %lld unwatched %.9g, watched %.9g", what, (long long)i, plain[i], out.data[i]);
    capture_free(&r);
    free(plain);
}

/* Unwatched, the FFN's activation runs in its first GEMM's epilogue (tanh
 * GELU and SiLU on each stored tile, a gated FFN's gate too, with or
 * without biases); watched, it runs after, step by step. The same bits on
 * every instruction set, and with the weights read as bf16. (An ungated
 * exact GELU's epilogue is the micro-kernels' own, which rounds apart from
 * ts_gelu in the last bit: hook_does_not_change_the_numbers holds it to 1e-6.) */
static void fused_ffn_activations_give_the_watched_numbers(void **state) {
    (void)state;
    const ts_isa isas[] = {TS_ISA_SCALAR, TS_ISA_AVX2, TS_ISA_AVX512, TS_ISA_NEON};
    const struct { ts_activation act; bool gated, no_bias; } kinds[] = {
        {TS_ACT_GELU_TANH, false, false}, {TS_ACT_SILU, false, true}, {TS_ACT_SILU, true, true},
        {TS_ACT_GELU, true, false},       {TS_ACT_GELU_TANH, true, true}, {TS_ACT_RELU, false, false},
    };
    int compared = 0;
    for (int ii = 0; ii < 4; ii++) {
        if (!ts_isa_supported(isas[ii])) continue;
        assert_ok(ts_kernels_force(isas[ii]));
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
            for (int dt = 0; dt < 2; dt++) {
                ts_model_config c; /* a small decoder-only language model */
                assert_ok(ts_model_config_preset(&c, "lm"));
                c.batch = 2, c.seq = 37, c.d_model = 32, c.heads = 2, c.ffn = 80, c.layers = 2, c.vocab = 50;
                c.activation = kinds[k].act, c.gated_ffn = kinds[k].gated, c.no_ffn_bias = kinds[k].no_bias;
                ts_model m;
                assert_ok(ts_model_init(&m, &c));
                assert_ok(ts_model_set_dtype(&m, dt ? TS_DTYPE_BF16 : TS_DTYPE_F32));
                int64_t n = (int64_t)c.batch * c.seq * c.vocab;
                int32_t x[2 * 37];
                for (int i = 0; i < 2 * 37; i++) x[i] = (i * 7 + 3) % c.vocab;
                char what[96];
                snprintf(what, sizeof what, "%s %s%s%s %s", ts_isa_name(isas[ii]), ts_model_activation_name(c.activation),
                         c.gated_ffn ? " gated" : "", c.no_ffn_bias ? " no bias" : "", dt ? "bf16" : "f32");
                unwatched_equals_watched(&m, x, n, what);
                ts_model_free(&m);
                compared++;
            }
    }
    assert_ok(ts_kernels_init());
    printf("fused FFN activations: %d models equal to the bit\n", compared);
    assert_true(compared >= 12);
}

/* --dtype bf16: the linears read the rounded matrices as bf16 (ts_gemm_bf16)
 * and compute what float32 GEMMs compute on the same rounded weights. */
static void bf16_weights_compute_the_rounded_model(void **state) {
    (void)state;
    ts_model_config c = fixture_encoder(2, 37, 16, 2, 1, 50);
    ts_model m;
    assert_ok(ts_model_init(&m, &c));
    float *before = malloc(sizeof(float) * (size_t)m.n_floats);
    assert_non_null(before);
    memcpy(before, m.block, sizeof(float) * (size_t)m.n_floats);
    assert_null(ts_model_bf16_of(&m, m.w.layers[0].ffn.w1));
    assert_ok(ts_model_set_dtype(&m, TS_DTYPE_BF16));
    assert_int_equal(m.cfg.dtype, TS_DTYPE_BF16);
    const ts_bf16 *h = ts_model_bf16_of(&m, m.w.layers[0].ffn.w1);
    assert_non_null(h);
    int changed = 0;
    for (int i = 0; i < m.n_params; i++) {
        const ts_model_param_info *p = &m.params[i];
        for (int64_t j = 0; j < p->numel; j++) {
            float now = m.block[p->offset + j], was = before[p->offset + j];
            if (p->rank == 2) {
                if (now != ts_bf16_to_f32(ts_f32_to_bf16(was))) fail_msg("%s[%lld] not rounded", p->name, (long long)j);
                if (ts_bf16_to_f32(m.bf16[p->offset + j]) != now) fail_msg("%s[%lld]: bf16 copy differs", p->name, (long long)j);
                changed += now != was;
            } else if (memcmp(&now, &was, sizeof now) != 0) {
                fail_msg("%s (a vector) was rounded", p->name);
            }
        }
    }
    assert_true(changed > 0);
    int64_t n = (int64_t)c.batch * c.seq * c.d_model;
    float *x = fixture_randn(n, 51), *bf = malloc(sizeof(float) * (size_t)n);
    assert_non_null(bf);
    ts_model_input in = {.src_embedded = x};
    ts_tensor out;
    assert_ok(ts_model_forward(&m, &in, NULL, &out));
    memcpy(bf, out.data, sizeof(float) * (size_t)n);
    assert_ok(ts_model_set_dtype(&m, TS_DTYPE_F32)); /* the copy dropped, the rounded floats kept */
    assert_null(m.bf16);
    assert_ok(ts_model_forward(&m, &in, NULL, &out));
    assert_memory_equal(out.data, bf, sizeof(float) * (size_t)n);
    free(x), free(bf), free(before);
    ts_model_free(&m);
}

static ts_status stop_at_weights(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag) {
    (void)op, (void)t, (void)tag;
    int *calls = ctx;
    (*calls)++;
    return strstr(name, "weights") ? ts_fail(TS_ERR_IO, "disk full") : TS_OK;
}

static void hook_error_stops_the_pass(void **state) {
    (void)state;
    ts_model_config c = small_encoder();
    ts_model m;
    assert_ok(ts_model_init(&m, &c));
    float *x = fixture_randn(2 * 5 * 8, 5);
    ts_model_input in = {.src_embedded = x};
    int calls = 0;
    ts_hook hook = {.fn = stop_at_weights, .ctx = &calls};
    assert_int_equal(ts_model_forward(&m, &in, &hook, NULL), TS_ERR_IO);
    assert_string_equal(ts_last_error(), "disk full");
    assert_true(calls > 5 && calls < 20);
    free(x);
    ts_model_free(&m);
}

/* ---- parameters ------------------------------------------------------------------------- */

static void in_proj_round_trips_in_torch_order(void **state) {
    (void)state;
    ts_model_config c = tiny();
    ts_model m;
    assert_ok(ts_model_init(&m, &c));
    const char *names[] = {"encoder.layers.0.self_attn.in_proj_weight", "decoder.layers.1.multihead_attn.in_proj_weight",
                           "decoder.layers.1.multihead_attn.in_proj_bias"};
    for (int k = 0; k < 3; k++) {
        int i = ts_model_find_param(&m, names[k]);
        assert_true(i >= 0);
        int64_t n = m.params[i].numel;
        float *src = malloc(sizeof(float) * (size_t)n), *back = malloc(sizeof(float) * (size_t)n);
        for (int64_t j = 0; j < n; j++) src[j] = (float)j;
        ts_tensor t;
        assert_ok(ts_tensor_view(&t, src, m.params[i].rank, m.params[i].shape));
        assert_ok(ts_model_load_param(&m, names[k], &t));
        ts_model_export_param(&m, i, back);
        assert_memory_equal(src, back, sizeof(float) * (size_t)n);
        free(src), free(back);
    }
    /* stored per head: torch's k rows of head 1 (rows D + hd..) sit at rows 1*3hd + hd.. */
    ts_tensor w;
    assert_ok(ts_model_param(&m, names[0], &w));
    assert_shape(&w, 48, 16);
    assert_int_equal(ts_model_load_param(&m, names[0], &(ts_tensor){0}), TS_ERR_SHAPE);
    /* nn.TransformerEncoder / nn.MultiheadAttention names are found too */
    assert_true(ts_model_find_param(&m, "layers.0.linear1.weight") >= 0);
    assert_true(ts_model_find_param(&m, "encoder.layers.0.norm2.bias") >= 0);
    assert_int_equal(ts_model_find_param(&m, "layers.9.linear1.weight"), -1);
    ts_model_free(&m);
}

static void load_param_names_tensor_and_shapes(void **state) {
    (void)state;
    ts_model_config c = tiny();
    ts_model m;
    assert_ok(ts_model_init(&m, &c));
    float buf[32] = {0};
    ts_tensor t;
    assert_ok(ts_tensor_view(&t, buf, 1, (int64_t[]){32}));
    assert_int_equal(ts_model_load_param(&m, "encoder.layers.0.norm1.weight", &t), TS_ERR_SHAPE);
    assert_string_equal(ts_last_error(), "tensor encoder.layers.0.norm1.weight has shape [32], the model needs [16]");
    assert_int_equal(ts_model_load_param(&m, "encoder.layers.0.norm9.weight", &t), TS_ERR_ARG);
    assert_non_null(strstr(ts_last_error(), "no parameter named encoder.layers.0.norm9.weight; it has embed.tokens.weight"));
    ts_model_free(&m);
}

static void parameters_carve_one_block_by_table(void **state) {
    (void)state;
    ts_model_config c;
    assert_ok(ts_model_config_preset(&c, "base"));
    ts_model m;
    assert_ok(ts_model_init_dry(&m, &c));
    assert_null(m.block);
    int64_t total = 0;
    for (int i = 0; i < m.n_params; i++) {
        total += m.params[i].numel;
        assert_int_equal(m.params[i].offset % 16, 0);
        if (i) assert_true(m.params[i].offset >= m.params[i - 1].offset + (size_t)m.params[i - 1].numel);
    }
    /* the paper's base model: ~63M parameters with the shared 37000-word table */
    assert_true(total > 60000000 && total < 66000000);
    assert_int_equal(ts_model_find_param(&m, "generator.weight"), -1); /* tied */
    ts_model_free(&m);
}

/* ---- dropout, embeddings ------------------------------------------------------------------ */

static void dropout_only_when_training(void **state) {
    (void)state;
    ts_model_config c = small_encoder();
    c.dropout = 0.5f;
    ts_model m;
    assert_ok(ts_model_init(&m, &c));
    float *x = fixture_randn(80, 9);
    ts_model_input in = {.src_embedded = x};
    ts_tensor out;
    float eval1[80], eval2[80], train1[80];
    assert_ok(ts_model_forward(&m, &in, NULL, &out));
    memcpy(eval1, out.data, sizeof eval1);
    ts_model_set_training(&m, true);
    assert_ok(ts_model_forward(&m, &in, NULL, &out));
    memcpy(train1, out.data, sizeof train1);
    ts_model_set_training(&m, false);
    assert_ok(ts_model_forward(&m, &in, NULL, &out));
    memcpy(eval2, out.data, sizeof eval2);
    assert_memory_equal(eval1, eval2, sizeof eval1);
    assert_memory_not_equal(eval1, train1, sizeof eval1);
    free(x);
    ts_model_free(&m);
}

static void sinusoid_is_the_papers_formula(void **state) {
    (void)state;
    float pe[10 * 6];
    ts_model_sinusoid(pe, 10, 6);
    for (int pos = 0; pos < 10; pos++)
        for (int i = 0; i < 3; i++) {
            double angle = pos / pow(10000.0, 2.0 * i / 6);
            assert_float_equal(pe[pos * 6 + 2 * i], sin(angle), 1e-6);
            assert_float_equal(pe[pos * 6 + 2 * i + 1], cos(angle), 1e-6);
        }
    /* seed 001's class prints 0.9769 at (1, 1): its cos uses the exponent (2i+1)/d */
    assert_float_equal(pe[1 * 6 + 1], 0.5403f, 1e-4);
}

static void learned_embeddings_go_through_a_norm(void **state) {
    (void)state;
    ts_model_config c;
    assert_ok(ts_model_config_preset(&c, "seed004"));
    capture r;
    capture_init(&r, MAX_STEPS, NULL);
    ts_hook hook = {.fn = capture_record, .ctx = &r};
    assert_ok(ts_model_dry_run(&c, &hook, NULL));
    assert_step_shape(&r, "embed.tokens", 1, 9, 768);
    assert_step_shape(&r, "embed.pe", 9, 768);
    assert_step_shape(&r, "embed.norm.std", 1, 9, 1);
    assert_step_shape(&r, "embed.out", 1, 9, 768);
    assert_step_shape(&r, "encoder.layers.11.out", 1, 9, 768);
    assert_step_shape(&r, "cls", 1, 768);
    assert_step_shape(&r, "logits", 1, 3);
    /* pre-LN: a layer normalizes its input before attending */
    assert_true(capture_index(&r, "encoder.layers.0.norm1.out") < capture_index(&r, "encoder.layers.0.self_attn.qkv"));
    capture_free(&r);
}

static void seed001_projects_1024_to_3x512(void **state) {
    (void)state;
    ts_model_config c;
    assert_ok(ts_model_config_preset(&c, "seed001"));
    capture r;
    capture_init(&r, MAX_STEPS, NULL);
    ts_hook hook = {.fn = capture_record, .ctx = &r};
    ts_model_summary sum;
    assert_ok(ts_model_dry_run(&c, &hook, &sum));
    assert_step_shape(&r, "input", 30, 10, 1024);
    assert_step_shape(&r, "self_attn.qkv", 30, 10, 1536);
    assert_step_shape(&r, "self_attn.q", 30, 8, 10, 64);
    assert_step_shape(&r, "self_attn.weights", 30, 8, 10, 10);
    assert_step_shape(&r, "self_attn.out", 30, 10, 512);
    assert_int_equal(sum.params, 1536 * 1024 + 1536 + 512 * 512 + 512);
    ts_model_summary_free(&sum);
    capture_free(&r);
}

/* ---- configs a learner gets wrong ----------------------------------------------------------- */

static void heads_that_do_not_divide_explain_the_reshape(void **state) {
    (void)state;
    ts_model_config c;
    assert_ok(ts_model_config_preset(&c, "seed000"));
    c.heads = 7;
    assert_int_equal(ts_model_config_check(&c), TS_ERR_SHAPE);
    const char *msg = ts_last_error();
    assert_non_null(strstr(msg, "--heads 7 does not divide --d-model 512"));
    assert_non_null(strstr(msg, "[30, 200, 1536] to [30, 200, 7, 219]"));
    assert_non_null(strstr(msg, "try --heads 8"));
    ts_model m;
    assert_int_equal(ts_model_init(&m, &c), TS_ERR_SHAPE);
}

static void bad_configs_are_refused(void **state) {
    (void)state;
    ts_model_config c;
    assert_int_equal(ts_model_config_preset(&c, "gpt5"), TS_ERR_ARG);
    assert_string_equal(ts_last_error(), "unknown preset 'gpt5'; the presets are tiny, seed000, seed001, seed004, copy, base, lm, gpt2, llama-1b");
    c = small_encoder();
    c.layers = 0;
    assert_int_equal(ts_model_config_check(&c), TS_ERR_ARG);
    assert_non_null(strstr(ts_last_error(), "--layers 0 is too small"));
    c = small_encoder();
    c.dropout = 1.0f;
    assert_int_equal(ts_model_config_check(&c), TS_ERR_ARG);
    c = small_encoder();
    c.eps = 0;
    assert_int_equal(ts_model_config_check(&c), TS_ERR_ARG);
    c = small_encoder();
    c.heads = 9;
    assert_int_equal(ts_model_config_check(&c), TS_ERR_ARG);
    assert_non_null(strstr(ts_last_error(), "more than --d-model 8"));
    c = tiny();
    c.vocab = 3;
    assert_int_equal(ts_model_config_check(&c), TS_ERR_ARG);
    c = small_encoder();
    c.pe = TS_PE_LEARNED;
    c.max_pos = 3;
    assert_int_equal(ts_model_config_check(&c), TS_ERR_ARG);
    assert_non_null(strstr(ts_last_error(), "3 rows but the sequence has 5 tokens"));
    c = small_encoder();
    c.batch = 1 << 20, c.seq = 1 << 20;
    assert_int_equal(ts_model_config_check(&c), TS_ERR_ARG);
    /* ids outside the vocabulary */
    c = tiny();
    ts_model m;
    assert_ok(ts_model_init(&m, &c));
    int32_t src[4] = {4, 5, 99, 7}, tgt[4] = {1, 4, 5, 6};
    ts_model_input in = {.src_ids = src, .tgt_ids = tgt};
    assert_int_equal(ts_model_forward(&m, &in, NULL, NULL), TS_ERR_ARG);
    assert_non_null(strstr(ts_last_error(), "id 99 at position 2 is outside the vocabulary [0, 8)"));
    ts_model_free(&m);
}

static void every_preset_is_valid(void **state) {
    (void)state;
    const char *names[] = {"tiny", "seed000", "seed001", "seed004", "copy", "base"};
    for (int i = 0; i < 6; i++) {
        ts_model_config c;
        assert_ok(ts_model_config_preset(&c, names[i]));
        if (c.vocab == 0) c.vocab = 8;
        assert_ok(ts_model_config_check(&c));
        assert_ok(ts_model_dry_run(&c, NULL, NULL));
    }
}

/* ---- tokenizer --------------------------------------------------------------------------------- */

static void tokenizer_splits_words_and_punctuation(void **state) {
    (void)state;
    ts_tokenizer tok;
    assert_ok(ts_tokenizer_init(&tok));
    assert_ok(ts_tokenizer_add_text(&tok, "My name is Goro. My NAME, again!"));
    /* 4 special tokens, then my name is goro . , again ! */
    assert_int_equal(tok.count, 4 + 8);
    assert_string_equal(ts_tokenizer_word(&tok, TS_TOK_PAD), "<pad>");
    assert_string_equal(ts_tokenizer_word(&tok, 4), "my");
    assert_string_equal(ts_tokenizer_word(&tok, 7), "goro");
    assert_string_equal(ts_tokenizer_word(&tok, 8), ".");
    int32_t ids[16];
    int n = 0;
    assert_ok(ts_tokenizer_encode(&tok, "my  Name is\tgoro.", ids, 16, &n));
    assert_int_equal(n, 5);
    int32_t want[5] = {4, 5, 6, 7, 8};
    assert_memory_equal(ids, want, sizeof want);
    assert_ok(ts_tokenizer_encode(&tok, "hello goro", ids, 1, &n));
    assert_int_equal(n, 2); /* counted past max */
    assert_int_equal(ids[0], TS_TOK_UNK);
    assert_int_equal(ts_tokenizer_id(&tok, "again"), 10);
    assert_string_equal(ts_tokenizer_word(&tok, 999), "<unk>");
    ts_tokenizer_free(&tok);
}

/* ---- the closing norm and the head, row by row (model_head.c) ---------------------------- */

typedef struct last_layer {
    const char *name;
    float *x; /* (B, S, D) */
} last_layer;

static ts_status keep_last_layer(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag) {
    (void)op, (void)tag;
    last_layer *k = ctx;
    if (strcmp(name, k->name) == 0) memcpy(k->x, t->data, sizeof(float) * (size_t)ts_tensor_numel(t));
    return TS_OK;
}

/* The lens's and the attribution's way to the logits (the last layer's
 * stream through ts_model_final_norm_rows and ts_model_head_rows) is the
 * forward's, with and without a closing norm. */
static void final_norm_and_head_rows_give_the_forwards_logits(void **state) {
    (void)state;
    for (int with_norm = 0; with_norm < 2; with_norm++) {
        ts_model_config c;
        assert_ok(ts_model_config_preset(&c, "lm"));
        c.d_model = 32, c.heads = 2, c.ffn = 64, c.layers = 2, c.seq = 6, c.max_pos = 6, c.batch = 2;
        c.final_norm = with_norm;
        ts_model m;
        assert_ok(ts_model_init(&m, &c));
        int64_t rows = (int64_t)c.batch * c.seq, D = c.d_model, V = c.vocab;
        int32_t ids[12];
        for (int i = 0; i < 12; i++) ids[i] = (i * 7 + 3) % c.vocab;
        float *x = malloc(sizeof(float) * (size_t)(2 * rows * D)), *logits = malloc(sizeof(float) * (size_t)(rows * V));
        float *mean = malloc(sizeof(float) * (size_t)rows), *rstd = malloc(sizeof(float) * (size_t)rows);
        last_layer k = {"decoder.layers.1.out", x};
        ts_hook hook = {.fn = keep_last_layer, .ctx = &k};
        ts_model_input in = {.src_ids = ids};
        ts_tensor out;
        assert_ok(ts_model_forward(&m, &in, &hook, &out));
        assert_int_equal(ts_model_final_norm_weights(&m) != NULL, with_norm);
        ts_model_final_norm_rows(&m, x + rows * D, mean, rstd, x, rows);
        if (!with_norm) {
            assert_floats_close(x + rows * D, x, rows * D, 0);
            assert_true(mean[0] == 0.0f && rstd[rows - 1] == 1.0f);
        }
        ts_model_head_rows(&m, logits, x + rows * D, rows);
        assert_floats_close(logits, out.data, rows * V, 1e-5);
        free(x), free(logits), free(mean), free(rstd);
        ts_model_free(&m);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(final_norm_and_head_rows_give_the_forwards_logits),
        cmocka_unit_test(tiny_traces_every_step_with_its_shape),
        cmocka_unit_test(dry_run_lists_the_same_steps),
        cmocka_unit_test(seed000_steps_cover_the_seed_printout),
        cmocka_unit_test(causal_rows_see_only_the_past),
        cmocka_unit_test(key_padding_hides_padded_keys),
        cmocka_unit_test(fully_masked_row_gives_zeros),
        cmocka_unit_test(post_ln_encoder_matches_naive_loops),
        cmocka_unit_test(pre_ln_encoder_matches_naive_loops),
        cmocka_unit_test(concat_is_values_permuted_back),
        cmocka_unit_test(hook_does_not_change_the_numbers),
        cmocka_unit_test(causal_blocks_give_the_staged_numbers),
        cmocka_unit_test(scale_in_the_mask_pass_gives_the_same_steps),
        cmocka_unit_test(hook_error_stops_the_pass),
        cmocka_unit_test(in_proj_round_trips_in_torch_order),
        cmocka_unit_test(load_param_names_tensor_and_shapes),
        cmocka_unit_test(parameters_carve_one_block_by_table),
        cmocka_unit_test(dropout_only_when_training),
        cmocka_unit_test(sinusoid_is_the_papers_formula),
        cmocka_unit_test(learned_embeddings_go_through_a_norm),
        cmocka_unit_test(seed001_projects_1024_to_3x512),
        cmocka_unit_test(heads_that_do_not_divide_explain_the_reshape),
        cmocka_unit_test(bad_configs_are_refused),
        cmocka_unit_test(fused_ffn_activations_give_the_watched_numbers),
        cmocka_unit_test(bf16_weights_compute_the_rounded_model),
        cmocka_unit_test(every_preset_is_valid),
        cmocka_unit_test(tokenizer_splits_words_and_punctuation),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
