/* The variants the lessons compare with the correct model (model_variants.c):
 * each one's numbers against a computation written here from the seed's code,
 * the correct model left unchanged beside it, and the same numbers with and
 * without a hook. Seed 001's printed tables and LayerNorm example are the
 * reference values where the seed printed some. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_impl.h" /* ts_model_layernorm_two_dims */
#include "check.h"
#include "model_fixture.h"
#include "tscope/kernels.h"
#include "tscope/model.h"

/* The most steps a test here records (capture_init, model_fixture.h). */
#define MAX_STEPS 1024

/* ---- configs and input --------------------------------------------------------------- */

/* Run cfg on x, recording (hook) or not; the output is copied to *out (numel floats). */
static void forward(const ts_model_config *c, const ts_model_input *in, capture *r, float **out, int64_t *numel,
                    int64_t *empty_rows) {
    ts_model m;
    assert_ok(ts_model_init(&m, c));
    ts_hook hook = {.fn = capture_record, .ctx = r};
    ts_tensor t;
    assert_ok(ts_model_forward(&m, in, r ? &hook : NULL, &t));
    *numel = ts_tensor_numel(&t);
    *out = malloc(sizeof(float) * (size_t)*numel);
    assert_non_null(*out);
    memcpy(*out, t.data, sizeof(float) * (size_t)*numel);
    if (empty_rows) *empty_rows = m.empty_rows;
    ts_model_free(&m);
}

static int setup(void **state) {
    (void)state;
    return ts_kernels_init() == TS_OK ? 0 : -1;
}

/* ---- names and parsing ------------------------------------------------------------------ */

static void variant_words_parse_and_print(void **state) {
    (void)state;
    unsigned bits = 0;
    assert_ok(ts_model_variant_parse("no-scale, seed000-reshape", &bits));
    assert_int_equal(bits, TS_VARIANT_NO_SCALE | TS_VARIANT_SEED000_RESHAPE);
    assert_ok(ts_model_variant_parse("  seed004-residual seed001-layernorm seed003-mask seed001-softmax,no-residual", &bits));
    assert_int_equal(bits, TS_VARIANT_ALL);
    char names[160];
    ts_model_variant_names(bits, names, sizeof names);
    assert_string_equal(names, "no-scale seed000-reshape seed001-layernorm seed004-residual seed003-mask seed001-softmax "
                               "no-residual");
    assert_int_equal(ts_model_variant_parse("no-scale noscale", &bits), TS_ERR_ARG);
    assert_non_null(strstr(ts_last_error(), "'noscale'"));
    ts_pe_variant pv;
    assert_ok(ts_model_pe_variant_parse("seed001-sin-only", &pv));
    assert_int_equal(pv, TS_PE_SEED001_SIN_ONLY);
    assert_int_equal(ts_model_pe_variant_parse("cosine", &pv), TS_ERR_ARG);
    ts_mask_kind mk;
    bool causal;
    assert_ok(ts_model_mask_parse("causal", &mk, &causal));
    assert_true(causal);
    assert_int_equal(mk, TS_MASK_PADDING);
    assert_ok(ts_model_mask_parse("padding-both", &mk, &causal));
    assert_false(causal);
    assert_int_equal(mk, TS_MASK_PADDING_BOTH);
    assert_string_equal(ts_model_mask_name(TS_MASK_NONE), "none");
    assert_int_equal(ts_model_mask_parse("both", &mk, &causal), TS_ERR_ARG);
}

static void variants_refuse_models_they_cannot_change(void **state) {
    (void)state;
    ts_model_config c;
    assert_ok(ts_model_config_preset(&c, "seed004"));
    c.pe_variant = TS_PE_SEED001_SIN_ONLY; /* learned positions have no formula */
    assert_int_equal(ts_model_config_check(&c), TS_ERR_ARG);
    assert_non_null(strstr(ts_last_error(), "--pe sinusoidal"));
    c.pe_variant = TS_PE_PAPER;
    c.variants = TS_VARIANT_SEED004_RESIDUAL;
    assert_ok(ts_model_config_check(&c));
    c.norm = TS_NORM_POST;
    assert_int_equal(ts_model_config_check(&c), TS_ERR_ARG);
    assert_ok(ts_model_config_preset(&c, "seed001"));
    c.variants = TS_VARIANT_SEED001_LAYERNORM; /* attention alone: no LayerNorm */
    assert_int_equal(ts_model_config_check(&c), TS_ERR_ARG);
    c.variants = TS_VARIANT_NO_SCALE | TS_VARIANT_SEED000_RESHAPE;
    assert_ok(ts_model_config_check(&c));
}

/* ---- positional encoding ------------------------------------------------------------------- */

static void pe_variants_give_seed001s_tables(void **state) {
    (void)state;
    float paper[60], sin_only[60], odd_exp[60];
    ts_model_pe_table(paper, 10, 6, TS_PE_PAPER);
    ts_model_pe_table(sin_only, 10, 6, TS_PE_SEED001_SIN_ONLY);
    ts_model_pe_table(odd_exp, 10, 6, TS_PE_SEED001_ODD_EXPONENT);
    /* Seed 001 prints these (D 6, positions 0-9): its first table, then its class. */
    const float sin_rows[3][6] = {{0, 0, 0, 0, 0, 0},
                                  {0.84147f, 0.21378f, 0.046399f, 0.0099998f, 0.0021544f, 0.00046416f},
                                  {0.41212f, 0.93298f, 0.40570f, 0.089879f, 0.019389f, 0.0041774f}};
    const float class_rows[3][6] = {{0, 1, 0, 1, 0, 1},
                                    {0.8415f, 0.9769f, 0.0464f, 0.9999f, 0.0022f, 1.0f},
                                    {0.4121f, -0.3599f, 0.4057f, 0.9960f, 0.0194f, 1.0f}};
    const int rows[3] = {0, 1, 9};
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < 6; j++) {
            assert_float_equal(sin_only[rows[k] * 6 + j], sin_rows[k][j], 1e-4);
            assert_float_equal(odd_exp[rows[k] * 6 + j], class_rows[k][j], 1e-4);
        }
    /* The even columns agree in all three; the paper's cos turns with its sin partner. */
    for (int p = 0; p < 10; p++)
        for (int i = 0; i < 3; i++) {
            assert_float_equal(sin_only[p * 6 + 2 * i], paper[p * 6 + 2 * i], 0);
            assert_float_equal(odd_exp[p * 6 + 2 * i], paper[p * 6 + 2 * i], 0);
            assert_float_equal(paper[p * 6 + 2 * i + 1], cos(p / pow(10000.0, 2.0 * i / 6)), 1e-6);
        }
}

static void model_traces_the_chosen_pe_table(void **state) {
    (void)state;
    ts_model_config c;
    assert_ok(ts_model_config_preset(&c, "tiny"));
    c.vocab = 8;
    c.d_model = 6;
    c.heads = 2;
    c.seq = c.tgt_seq = 10;
    int32_t src[10] = {4, 5, 6, 7, 0, 0, 0, 0, 0, 0}, tgt[10] = {1, 4, 5, 6, 7, 0, 0, 0, 0, 0};
    ts_model_input in = {.src_ids = src, .tgt_ids = tgt};
    const char *keep[] = {"embed.pe", "embed.tokens", "embed.out", NULL};
    for (int v = TS_PE_PAPER; v <= TS_PE_SEED001_ODD_EXPONENT; v++) {
        c.pe_variant = (ts_pe_variant)v;
        capture r;
        capture_init(&r, MAX_STEPS, keep);
        float *out;
        int64_t n;
        forward(&c, &in, &r, &out, &n, NULL);
        float want[60];
        ts_model_pe_table(want, 10, 6, (ts_pe_variant)v);
        assert_step_shape(&r, "embed.pe", 10, 6);
        assert_floats_close(capture_values(&r, "embed.pe"), want, 60, 0);
        /* and it is what gets added */
        const float *tok = capture_values(&r, "embed.tokens"), *sum = capture_values(&r, "embed.out");
        for (int i = 0; i < 60; i++) assert_float_equal(sum[i], tok[i] + want[i], 1e-6);
        free(out);
        capture_free(&r);
    }
}

/* ---- no-scale ------------------------------------------------------------------------------------ */

static void no_scale_softmaxes_the_raw_scores(void **state) {
    (void)state;
    ts_model_config c = fixture_encoder(2, 6, 16, 2, 1, 3);
    float *x = fixture_randn(2 * 6 * 16, 5);
    ts_model_input in = {.src_embedded = x};
    const char *keep[] = {"encoder.layers.0.self_attn.scores", "encoder.layers.0.self_attn.scaled",
                          "encoder.layers.0.self_attn.weights", NULL};
    capture ok, raw;
    capture_init(&ok, MAX_STEPS, keep);
    capture_init(&raw, MAX_STEPS, keep);
    float *out_ok, *out_raw, *out_fast;
    int64_t n;
    forward(&c, &in, &ok, &out_ok, &n, NULL);
    c.variants = TS_VARIANT_NO_SCALE;
    forward(&c, &in, &raw, &out_raw, &n, NULL);
    forward(&c, &in, NULL, &out_fast, &n, NULL);
    int64_t n_att = 2 * 2 * 6 * 6;
    const float *scores = capture_values(&raw, "encoder.layers.0.self_attn.scores");
    const float *scaled = capture_values(&raw, "encoder.layers.0.self_attn.scaled");
    const float *w = capture_values(&raw, "encoder.layers.0.self_attn.weights");
    assert_memory_equal(scores, capture_values(&ok, "encoder.layers.0.self_attn.scores"), sizeof(float) * n_att);
    assert_memory_equal(scaled, scores, sizeof(float) * n_att); /* `scaled` equals `scores` */
    const float *ok_scaled = capture_values(&ok, "encoder.layers.0.self_attn.scaled");
    for (int64_t i = 0; i < n_att; i++) assert_float_equal(ok_scaled[i], scores[i] / sqrtf(8.0f), 1e-6);
    for (int row = 0; row < 2 * 2 * 6; row++) { /* softmax of the unscaled row, in double */
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j < 6; j++) mx = fmax(mx, scores[row * 6 + j]);
        for (int j = 0; j < 6; j++) sum += exp(scores[row * 6 + j] - mx);
        for (int j = 0; j < 6; j++) assert_float_equal(w[row * 6 + j], exp(scores[row * 6 + j] - mx) / sum, 1e-6);
    }
    assert_floats_close(out_fast, out_raw, n, 1e-5); /* the fused path scales by 1 too */
    double diff = 0;
    for (int64_t i = 0; i < n; i++) diff = fmax(diff, fabs(out_raw[i] - out_ok[i]));
    assert_true(diff > 1e-3);
    free(out_ok), free(out_raw), free(out_fast), free(x);
    capture_free(&ok);
    capture_free(&raw);
}

/* Median over rows of the row's largest weight. */
static double median_row_max(const float *w, int rows, int cols) {
    float *mx = malloc(sizeof(float) * (size_t)rows);
    assert_non_null(mx);
    for (int r = 0; r < rows; r++) {
        mx[r] = 0;
        for (int j = 0; j < cols; j++) mx[r] = fmaxf(mx[r], w[(int64_t)r * cols + j]);
    }
    for (int i = 1; i < rows; i++) /* insertion sort: a few hundred rows */
        for (int k = i; k > 0 && mx[k - 1] > mx[k]; k--) {
            float t = mx[k];
            mx[k] = mx[k - 1];
            mx[k - 1] = t;
        }
    double m = mx[rows / 2];
    free(mx);
    return m;
}

static void no_scale_peaks_the_weights_at_dk_64(void **state) {
    (void)state;
    /* seed 000's head size (512 / 8 = 64) on random input, 100 positions */
    ts_model_config c = fixture_encoder(1, 100, 512, 8, 1, 3);
    c.ffn = 64;
    float *x = fixture_randn(100 * 512, 1);
    ts_model_input in = {.src_embedded = x};
    const char *keep[] = {"encoder.layers.0.self_attn.weights", NULL};
    capture ok, raw;
    capture_init(&ok, MAX_STEPS, keep);
    capture_init(&raw, MAX_STEPS, keep);
    float *o1, *o2;
    int64_t n;
    forward(&c, &in, &ok, &o1, &n, NULL);
    c.variants = TS_VARIANT_NO_SCALE;
    forward(&c, &in, &raw, &o2, &n, NULL);
    double m_ok = median_row_max(capture_values(&ok, "encoder.layers.0.self_attn.weights"), 8 * 100, 100);
    double m_raw = median_row_max(capture_values(&raw, "encoder.layers.0.self_attn.weights"), 8 * 100, 100);
    print_message("median largest weight of a row: %.4f scaled, %.4f unscaled (uniform 0.01)\n", m_ok, m_raw);
    assert_true(m_ok < 0.05);  /* close to uniform */
    assert_true(m_raw > 0.25); /* one key takes a large share */
    free(o1), free(o2), free(x);
    capture_free(&ok);
    capture_free(&raw);
}

/* ---- seed000-reshape ------------------------------------------------------------------------------ */

static void seed000_reshape_scrambles_heads_and_positions(void **state) {
    (void)state;
    int B = 2, S = 5, D = 8, H = 2, hd = 4;
    ts_model_config c = fixture_encoder(B, S, D, H, 1, 3);
    float *x = fixture_randn((int64_t)B * S * D, 8);
    ts_model_input in = {.src_embedded = x};
    const char *keep[] = {"encoder.layers.0.self_attn.values", "encoder.layers.0.self_attn.concat",
                          "encoder.layers.0.self_attn.out", NULL};
    capture ok, bug;
    capture_init(&ok, MAX_STEPS, keep);
    capture_init(&bug, MAX_STEPS, keep);
    float *o_ok, *o_bug, *o_fast;
    int64_t n;
    forward(&c, &in, &ok, &o_ok, &n, NULL);
    c.variants = TS_VARIANT_SEED000_RESHAPE;
    forward(&c, &in, &bug, &o_bug, &n, NULL);
    forward(&c, &in, NULL, &o_fast, &n, NULL);
    assert_null(capture_find(&bug, "encoder.layers.0.self_attn.values_perm")); /* the seed has no permute */
    assert_non_null(capture_find(&ok, "encoder.layers.0.self_attn.values_perm"));
    assert_step_shape(&bug, "encoder.layers.0.self_attn.concat", B, S, D);
    const float *v = capture_values(&bug, "encoder.layers.0.self_attn.values"); // (B, H, S, hd), contiguous copy
    assert_memory_equal(v, capture_values(&ok, "encoder.layers.0.self_attn.values"), sizeof(float) * (size_t)(B * S * D));
    /* the bug: concat is values' memory read as (B, S, D); correct: values permuted (B, S, H, hd) */
    const float *cb = capture_values(&bug, "encoder.layers.0.self_attn.concat");
    const float *co = capture_values(&ok, "encoder.layers.0.self_attn.concat");
    assert_memory_equal(cb, v, sizeof(float) * (size_t)(B * S * D));
    for (int b = 0; b < B; b++)
        for (int s = 0; s < S; s++)
            for (int h = 0; h < H; h++)
                for (int j = 0; j < hd; j++)
                    assert_float_equal(co[((b * S + s) * H + h) * hd + j], v[((b * H + h) * S + s) * hd + j], 0);
    /* row 1 of batch 0 starts with head 0's position 2 (numbers 8..11 of head 0's 5 x 4) */
    assert_float_equal(cb[1 * D + 0], v[(0 * S + 2) * hd + 0], 0);
    /* out_proj reads the scrambled rows */
    ts_model m;
    assert_ok(ts_model_init(&m, &c));
    ts_tensor wv, bv;
    assert_ok(ts_model_param(&m, "encoder.layers.0.self_attn.out_proj.weight", &wv));
    assert_ok(ts_model_param(&m, "encoder.layers.0.self_attn.out_proj.bias", &bv));
    const float *out = capture_values(&bug, "encoder.layers.0.self_attn.out");
    for (int r = 0; r < B * S; r++)
        for (int o = 0; o < D; o++) {
            double acc = bv.data[o];
            for (int i = 0; i < D; i++) acc += (double)cb[r * D + i] * wv.data[o * D + i];
            assert_float_equal(out[r * D + o], acc, 1e-5);
        }
    ts_model_free(&m);
    assert_floats_close(o_fast, o_bug, n, 1e-5); /* the same without a hook */
    double diff = 0;
    for (int64_t i = 0; i < n; i++) diff = fmax(diff, fabs(o_bug[i] - o_ok[i]));
    assert_true(diff > 1e-3);
    free(o_ok), free(o_bug), free(o_fast), free(x);
    capture_free(&ok);
    capture_free(&bug);
}

/* ---- seed001-layernorm -------------------------------------------------------------------------- */

static void seed001_layernorm_matches_the_seeds_example(void **state) {
    (void)state;
    /* seed 001: one sentence of 2 words, 3 features; (S, B, E) = (2, 1, 3) there, (1, 2, 3) here */
    const float in[6] = {0.2f, 0.1f, 0.3f, 0.5f, 0.1f, 0.1f};
    const float ones[3] = {1, 1, 1}, zeros[3] = {0, 0, 0};
    float out[6], y[6], mean[2], stdv[2];
    ts_model_layernorm_two_dims(out, y, mean, stdv, in, ones, zeros, 1, 2, 3, 1e-5f);
    const float want[6] = {0.0f, -1.2238f, 1.2238f, 1.4140f, -0.7070f, -0.7070f};
    for (int i = 0; i < 6; i++) assert_float_equal(out[i], want[i], 1e-4);
    assert_float_equal(stdv[0], 0.0817f, 1e-4);
    assert_float_equal(stdv[1], 0.1886f, 1e-4);
    assert_memory_equal(y, out, sizeof y);
}

static void seed001_layernorm_shares_statistics_across_the_batch(void **state) {
    (void)state;
    int B = 3, S = 4, D = 8;
    ts_model_config c = fixture_encoder(B, S, D, 2, 1, 3);
    c.variants = TS_VARIANT_SEED001_LAYERNORM;
    float *x = fixture_randn((int64_t)B * S * D, 21);
    for (int i = 0; i < B * S * D; i++) x[i] = x[i] * (1.0f + (float)(i % 5)) + 0.3f * (float)(i / (S * D));
    ts_model_input in = {.src_embedded = x};
    const char *keep[] = {"encoder.layers.0.norm1.in",    "encoder.layers.0.norm1.mean",
                          "encoder.layers.0.norm1.std",   "encoder.layers.0.norm1.y",
                          "encoder.layers.0.norm1.gamma", "encoder.layers.0.norm1.out", NULL};
    capture r;
    capture_init(&r, MAX_STEPS, keep);
    float *o, *o_fast;
    int64_t n;
    forward(&c, &in, &r, &o, &n, NULL);
    forward(&c, &in, NULL, &o_fast, &n, NULL);
    assert_floats_close(o_fast, o, n, 1e-5);
    assert_step_shape(&r, "encoder.layers.0.norm1.mean", 1, S, 1);
    assert_step_shape(&r, "encoder.layers.0.norm1.std", 1, S, 1);
    assert_step_shape(&r, "encoder.layers.0.norm1.gamma", B, D);
    assert_step_shape(&r, "encoder.layers.0.norm1.y", B, S, D);
    const float *nin = capture_values(&r, "encoder.layers.0.norm1.in"), *mean = capture_values(&r, "encoder.layers.0.norm1.mean");
    const float *sd = capture_values(&r, "encoder.layers.0.norm1.std"), *y = capture_values(&r, "encoder.layers.0.norm1.y");
    const float *out = capture_values(&r, "encoder.layers.0.norm1.out"), *g = capture_values(&r, "encoder.layers.0.norm1.gamma");
    for (int i = 0; i < B * D; i++) assert_float_equal(g[i], 1.0f, 0); /* ones, broadcast over the batch */
    for (int s = 0; s < S; s++) { /* as the seed: mean and var over dims (-1, -2) of (S, B, D) */
        double sum = 0, sq = 0;
        for (int b = 0; b < B; b++)
            for (int d = 0; d < D; d++) sum += nin[(b * S + s) * D + d];
        double mu = sum / (B * D);
        for (int b = 0; b < B; b++)
            for (int d = 0; d < D; d++) sq += pow(nin[(b * S + s) * D + d] - mu, 2);
        double std = sqrt(sq / (B * D) + 1e-5);
        assert_float_equal(mean[s], mu, 1e-5);
        assert_float_equal(sd[s], std, 1e-5);
        for (int b = 0; b < B; b++)
            for (int d = 0; d < D; d++) {
                int i = (b * S + s) * D + d;
                assert_float_equal(y[i], (nin[i] - mu) / std, 1e-5);
                assert_float_equal(out[i], y[i], 1e-6); /* gamma 1, beta 0 */
            }
    }
    /* a sentence's own mean is no longer 0: the offsets per sentence above show through */
    double m0 = 0;
    for (int d = 0; d < D; d++) m0 += y[d];
    assert_true(fabs(m0 / D) > 0.05);
    /* and changing sentence 2 changes sentence 0's output; the correct norm does not */
    float *x2 = malloc(sizeof(float) * (size_t)(B * S * D));
    assert_non_null(x2);
    memcpy(x2, x, sizeof(float) * (size_t)(B * S * D));
    for (int i = 2 * S * D; i < B * S * D; i++) x2[i] += 3.0f;
    ts_model_input in2 = {.src_embedded = x2};
    float *o2, *p1, *p2;
    forward(&c, &in2, NULL, &o2, &n, NULL);
    c.variants = 0;
    forward(&c, &in, NULL, &p1, &n, NULL);
    forward(&c, &in2, NULL, &p2, &n, NULL);
    double d_var = 0, d_ok = 0;
    for (int i = 0; i < S * D; i++) { /* not fmax: gcc 12 for aarch64 crashes vectorising that reduction */
        if (fabs(o[i] - o2[i]) > d_var) d_var = fabs(o[i] - o2[i]);
        if (fabs(p1[i] - p2[i]) > d_ok) d_ok = fabs(p1[i] - p2[i]);
    }
    assert_true(d_var > 1e-2);
    assert_float_equal(d_ok, 0.0, 0.0);
    free(o), free(o_fast), free(o2), free(p1), free(p2), free(x), free(x2);
    capture_free(&r);
}

/* ---- seed004-residual ----------------------------------------------------------------------------- */

static void seed004_residual_drops_the_attention(void **state) {
    (void)state;
    int B = 1, S = 5, D = 8;
    ts_model_config c = fixture_encoder(B, S, D, 2, 1, 3);
    c.norm = TS_NORM_PRE;
    c.variants = TS_VARIANT_SEED004_RESIDUAL;
    float *x = fixture_randn((int64_t)B * S * D, 4);
    ts_model_input in = {.src_embedded = x};
    const char *keep[] = {"encoder.layers.0.norm2.in", "encoder.layers.0.norm2.out", "encoder.layers.0.ffn.out",
                          "encoder.layers.0.out", NULL};
    capture r;
    capture_init(&r, MAX_STEPS, keep);
    float *o;
    int64_t n;
    forward(&c, &in, &r, &o, &n, NULL);
    assert_non_null(capture_find(&r, "encoder.layers.0.self_attn.weights")); /* computed, then dropped */
    const float *n2in = capture_values(&r, "encoder.layers.0.norm2.in"), *n2 = capture_values(&r, "encoder.layers.0.norm2.out");
    const float *ff = capture_values(&r, "encoder.layers.0.ffn.out"), *out = capture_values(&r, "encoder.layers.0.out");
    for (int i = 0; i < B * S * D; i++) {
        assert_float_equal(n2in[i], 2.0f * x[i], 1e-6); /* x + dropout(x), dropout off */
        assert_float_equal(out[i], n2[i] + ff[i], 1e-6); /* x = norm2(x); x = x + ffn(x) */
    }
    /* the attention's weights cannot change the result */
    ts_model m;
    assert_ok(ts_model_init(&m, &c));
    ts_tensor w;
    assert_ok(ts_model_param(&m, "encoder.layers.0.self_attn.out_proj.bias", &w));
    for (int i = 0; i < D; i++) w.data[i] += 5.0f;
    ts_tensor t;
    assert_ok(ts_model_forward(&m, &in, NULL, &t));
    assert_memory_equal(t.data, o, sizeof(float) * (size_t)n);
    ts_model_free(&m);
    free(o), free(x);
    capture_free(&r);
}

/* no-residual: each sublayer's output replaces the stream, post-LN and
 * pre-LN; refused where it would leave some layers with their skips. */
static void no_residual_replaces_the_stream(void **state) {
    (void)state;
    int B = 1, S = 5, D = 8;
    float *x = fixture_randn((int64_t)B * S * D, 4);
    ts_model_input in = {.src_embedded = x};
    for (int pre = 0; pre < 2; pre++) {
        ts_model_config c = fixture_encoder(B, S, D, 2, 1, 3);
        c.norm = pre ? TS_NORM_PRE : TS_NORM_POST;
        c.variants = TS_VARIANT_NO_RESIDUAL;
        const char *keep[] = {"encoder.layers.0.self_attn.out", "encoder.layers.0.norm1.in",
                              "encoder.layers.0.norm2.in", "encoder.layers.0.ffn.out",   "encoder.layers.0.out",
                              NULL};
        capture r;
        capture_init(&r, MAX_STEPS, keep);
        float *o;
        int64_t n;
        forward(&c, &in, &r, &o, &n, NULL);
        const float *att = capture_values(&r, "encoder.layers.0.self_attn.out");
        const float *after_att = capture_values(&r, pre ? "encoder.layers.0.norm2.in" : "encoder.layers.0.norm1.in");
        const float *ff = capture_values(&r, "encoder.layers.0.ffn.out"), *out = capture_values(&r, "encoder.layers.0.out");
        for (int i = 0; i < B * S * D; i++) assert_float_equal(after_att[i], att[i], 0); /* no x + */
        if (pre)
            for (int i = 0; i < B * S * D; i++) assert_float_equal(out[i], ff[i], 0);
        assert_int_equal(capture_find(&r, pre ? "encoder.layers.0.out" : "encoder.layers.0.norm1.in")->op,
                         TS_OP_DROPOUT); /* traced as what it is: no sum, so no skip in the dataflow graph */
        free(o);
        capture_free(&r);
    }
    free(x);
    ts_model_config c;
    assert_ok(ts_model_config_preset(&c, "tiny")); /* an encoder-decoder: its decoder layers keep their skips */
    c.vocab = 16, c.seq = c.tgt_seq = 4; /* the text decides them on the command line */
    c.variants = TS_VARIANT_NO_RESIDUAL;
    assert_int_equal(ts_model_config_check(&c), TS_ERR_ARG);
    assert_non_null(strstr(ts_last_error(), "--dec-layers 0"));
    c.dec_layers = 0, c.arch = TS_ARCH_ENCODER;
    assert_ok(ts_model_config_check(&c));
    c.norm = TS_NORM_PRE, c.variants |= TS_VARIANT_SEED004_RESIDUAL;
    assert_int_equal(ts_model_config_check(&c), TS_ERR_ARG);
}

/* ---- masks --------------------------------------------------------------------------------------------- */

static void padding_both_hides_pad_rows_with_zeros(void **state) {
    (void)state;
    int B = 2, S = 5, H = 2;
    ts_model_config c = fixture_encoder(B, S, 8, H, 2, 3);
    float *x = fixture_randn((int64_t)B * S * 8, 6);
    uint8_t pad[10] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1}; /* sentence 1: last two positions */
    ts_model_input in = {.src_embedded = x, .src_pad = pad};
    const char *keep[] = {"encoder.layers.0.self_attn.masked", "encoder.layers.0.self_attn.weights",
                          "encoder.layers.0.self_attn.values", NULL};
    capture keys, both;
    capture_init(&keys, MAX_STEPS, keep);
    capture_init(&both, MAX_STEPS, keep);
    float *o_keys, *o_both, *o_fast;
    int64_t n, empty_keys, empty_both, empty_fast;
    forward(&c, &in, &keys, &o_keys, &n, &empty_keys);
    c.mask = TS_MASK_PADDING_BOTH;
    forward(&c, &in, &both, &o_both, &n, &empty_both);
    forward(&c, &in, NULL, &o_fast, &n, &empty_fast);
    assert_int_equal(empty_keys, 0);
    assert_int_equal(empty_both, 2 * H * 2); /* 2 pad rows, each head, each of 2 layers */
    assert_int_equal(empty_fast, empty_both);
    assert_floats_close(o_fast, o_both, n, 1e-5);
    const float *mk = capture_values(&keys, "encoder.layers.0.self_attn.masked");
    const float *mb = capture_values(&both, "encoder.layers.0.self_attn.masked");
    const float *wk = capture_values(&keys, "encoder.layers.0.self_attn.weights");
    const float *wb = capture_values(&both, "encoder.layers.0.self_attn.weights");
    const float *vb = capture_values(&both, "encoder.layers.0.self_attn.values");
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int r = 0; r < S; r++) {
                int64_t row = ((b * H + h) * S + r) * S;
                bool hidden = pad[b * S + r];
                double sum = 0;
                for (int j = 0; j < S; j++) {
                    sum += wb[row + j];
                    if (pad[b * S + j]) assert_true(isinf(mk[row + j]) && mk[row + j] < 0); /* pad keys */
                    if (hidden) {
                        assert_true(isinf(mb[row + j]) && mb[row + j] < 0);
                        assert_float_equal(wb[row + j], 0.0f, 0);
                    } else {
                        assert_float_equal(mb[row + j], mk[row + j], 0);
                        assert_float_equal(wb[row + j], wk[row + j], 0);
                    }
                }
                assert_float_equal(sum, hidden ? 0.0 : 1.0, 1e-5);
                for (int j = 0; hidden && j < 4; j++) assert_float_equal(vb[((b * H + h) * S + r) * 4 + j], 0.0f, 0);
            }
    free(o_keys), free(o_both), free(o_fast), free(x);
    capture_free(&keys);
    capture_free(&both);
}

/* ---- seed003-mask ------------------------------------------------------------------------------- */

/* Seed 003's -1e9 in place of -inf: the same weights wherever a row keeps a
 * key (exp(-1e9 - max) is 0 in float32), uniform weights 1/S in a row masked
 * end to end (the scores there all round to -1e9), and the same outputs at
 * the real positions, which never read a pad. With a hook and without. */
static void seed003_mask_adds_minus_1e9(void **state) {
    (void)state;
    int B = 2, S = 5, H = 2, D = 8;
    ts_model_config c = fixture_encoder(B, S, D, H, 2, 3);
    c.mask = TS_MASK_PADDING_BOTH;
    float *x = fixture_randn((int64_t)B * S * D, 6);
    uint8_t pad[10] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1}; /* sentence 1: last two positions */
    ts_model_input in = {.src_embedded = x, .src_pad = pad};
    const char *keep[] = {"encoder.layers.0.self_attn.masked", "encoder.layers.0.self_attn.weights", NULL};
    capture inf, e9;
    capture_init(&inf, MAX_STEPS, keep);
    capture_init(&e9, MAX_STEPS, keep);
    float *o_inf, *o_e9, *o_fast;
    int64_t n, empty_inf, empty_e9, empty_fast;
    forward(&c, &in, &inf, &o_inf, &n, &empty_inf);
    c.variants = TS_VARIANT_SEED003_MASK;
    forward(&c, &in, &e9, &o_e9, &n, &empty_e9);
    forward(&c, &in, NULL, &o_fast, &n, &empty_fast);
    assert_int_equal(empty_inf, 2 * H * 2);
    assert_int_equal(empty_e9, 0); /* no row is left with nothing: -1e9 is a number */
    assert_int_equal(empty_fast, 0);
    assert_floats_close(o_fast, o_e9, n, 1e-6);
    const float *me = capture_values(&e9, "encoder.layers.0.self_attn.masked");
    const float *wi = capture_values(&inf, "encoder.layers.0.self_attn.weights");
    const float *we = capture_values(&e9, "encoder.layers.0.self_attn.weights");
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int r = 0; r < S; r++) {
                int64_t row = ((b * H + h) * S + r) * S;
                bool hidden = pad[b * S + r];
                for (int j = 0; j < S; j++) {
                    bool masked = hidden || pad[b * S + j];
                    assert_true(isfinite(me[row + j]));
                    if (masked) assert_float_equal(me[row + j], -1e9f, 0);
                    assert_float_equal(we[row + j], hidden ? 1.0f / S : wi[row + j], 1e-7);
                }
            }
    for (int b = 0; b < B; b++) /* the real positions' outputs, every feature */
        for (int r = 0; r < S; r++)
            if (!pad[b * S + r]) assert_floats_close(o_e9 + (b * S + r) * D, o_inf + (b * S + r) * D, D, 1e-6);
    free(o_inf), free(o_e9), free(o_fast), free(x);
    capture_free(&inf);
    capture_free(&e9);
}

/* ---- seed001-softmax ----------------------------------------------------------------------------- */

/* Seed 001's exp(x) / sum(exp(x)): the correct weights while the scores are
 * small; in a row whose largest score passes log(FLT_MAX) ~ 88.72 the sum is
 * inf, so those scores' weights are NaN (inf / inf) and the others 0. Checked
 * against the scores the same run traced. */
static void seed001_softmax_overflows_past_88(void **state) {
    (void)state;
    int S = 6, D = 8;
    ts_model_config c = fixture_encoder(1, S, D, 1, 1, 3);
    c.variants = TS_VARIANT_NO_SCALE;
    const char *keep[] = {"encoder.layers.0.self_attn.scores", "encoder.layers.0.self_attn.weights", NULL};
    for (int big = 0; big < 2; big++) {
        float *x = fixture_randn((int64_t)S * D, 7);
        for (int i = 0; i < S * D; i++) x[i] *= big ? 40.0f : 0.5f; /* scores grow with the input's square */
        ts_model_input in = {.src_embedded = x};
        capture ok, seed;
        capture_init(&ok, MAX_STEPS, keep);
        capture_init(&seed, MAX_STEPS, keep);
        float *o_ok, *o_seed;
        int64_t n;
        c.variants = TS_VARIANT_NO_SCALE;
        forward(&c, &in, &ok, &o_ok, &n, NULL);
        c.variants = TS_VARIANT_NO_SCALE | TS_VARIANT_SEED001_SOFTMAX;
        forward(&c, &in, &seed, &o_seed, &n, NULL);
        const float *sc = capture_values(&seed, "encoder.layers.0.self_attn.scores");
        const float *wo = capture_values(&ok, "encoder.layers.0.self_attn.weights");
        const float *ws = capture_values(&seed, "encoder.layers.0.self_attn.weights");
        int nan_rows = 0;
        for (int r = 0; r < S; r++) {
            float top = -INFINITY;
            for (int j = 0; j < S; j++) top = fmaxf(top, sc[r * S + j]);
            bool overflows = top > logf(FLT_MAX);
            nan_rows += overflows;
            for (int j = 0; j < S; j++) {
                if (!overflows) assert_float_equal(ws[r * S + j], wo[r * S + j], 1e-6);
                else if (sc[r * S + j] > logf(FLT_MAX)) assert_true(isnan(ws[r * S + j])); /* inf / inf */
                else assert_float_equal(ws[r * S + j], 0.0f, 0);                        /* x / inf */
                assert_false(isnan(wo[r * S + j])); /* the max-subtracted softmax never is */
            }
        }
        if (big) assert_true(nan_rows > 0);
        else assert_int_equal(nan_rows, 0);
        free(o_ok), free(o_seed), free(x);
        capture_free(&ok);
        capture_free(&seed);
    }
}

static void mask_none_attends_to_pads(void **state) {
    (void)state;
    ts_model_config c = fixture_encoder(1, 4, 8, 2, 1, 3);
    c.mask = TS_MASK_NONE;
    float *x = fixture_randn(4 * 8, 2);
    uint8_t pad[4] = {0, 0, 0, 1};
    ts_model_input in = {.src_embedded = x, .src_pad = pad}, no_pad = {.src_embedded = x};
    const char *keep[] = {"encoder.layers.0.self_attn.weights", NULL};
    capture r;
    capture_init(&r, MAX_STEPS, keep);
    float *o, *o_plain;
    int64_t n;
    forward(&c, &in, &r, &o, &n, NULL);
    assert_null(capture_find(&r, "encoder.layers.0.self_attn.masked"));
    const float *w = capture_values(&r, "encoder.layers.0.self_attn.weights");
    for (int row = 0; row < 2 * 4; row++) assert_true(w[row * 4 + 3] > 0.0f); /* the pad's column */
    forward(&c, &no_pad, NULL, &o_plain, &n, NULL);
    assert_memory_equal(o, o_plain, sizeof(float) * (size_t)n); /* as if nothing were padding */
    free(o), free(o_plain), free(x);
    capture_free(&r);
}

/* ---- train mode ---------------------------------------------------------------------------------------- */

static void train_mode_drops_and_rescales_seeded(void **state) {
    (void)state;
    ts_model_config c = fixture_encoder(2, 6, 16, 2, 1, 3);
    c.train_mode = true;
    c.dropout = 0.25f;
    float *x = fixture_randn(2 * 6 * 16, 9);
    ts_model_input in = {.src_embedded = x};
    const char *keep[] = {"encoder.layers.0.ffn.act", "encoder.layers.0.ffn.dropout", NULL};
    capture r1, r2, ev;
    capture_init(&r1, MAX_STEPS, keep);
    capture_init(&r2, MAX_STEPS, keep);
    capture_init(&ev, MAX_STEPS, keep);
    float *o1, *o2, *o3;
    int64_t n;
    forward(&c, &in, &r1, &o1, &n, NULL);
    forward(&c, &in, &r2, &o2, &n, NULL); /* a fresh model, the same seed: the same masks */
    c.train_mode = false;
    forward(&c, &in, &ev, &o3, &n, NULL);
    assert_memory_equal(o1, o2, sizeof(float) * (size_t)n);
    const float *act = capture_values(&r1, "encoder.layers.0.ffn.act");
    const float *drop = capture_values(&r1, "encoder.layers.0.ffn.dropout");
    int64_t cells = 2 * 6 * 32, dropped = 0, live = 0;
    for (int64_t i = 0; i < cells; i++) {
        if (act[i] == 0.0f) continue;
        live++;
        if (drop[i] == 0.0f)
            dropped++;
        else
            assert_float_equal(drop[i], act[i] / 0.75f, 1e-6); /* survivors scaled by 1/(1-p) */
    }
    print_message("dropped %lld of %lld non-zero activations at p = 0.25\n", (long long)dropped, (long long)live);
    assert_true(dropped > live / 8 && dropped < live * 3 / 8);
    assert_memory_equal(capture_values(&ev, "encoder.layers.0.ffn.dropout"), capture_values(&ev, "encoder.layers.0.ffn.act"),
                        sizeof(float) * (size_t)cells); /* inference: identity */
    double diff = 0;
    for (int64_t i = 0; i < n; i++) diff = fmax(diff, fabs(o1[i] - o3[i]));
    assert_true(diff > 1e-3);
    ts_model m;
    assert_ok(ts_model_init(&m, &c));
    assert_false(m.training);
    ts_model_free(&m);
    free(o1), free(o2), free(o3), free(x);
    capture_free(&r1);
    capture_free(&r2);
    capture_free(&ev);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(variant_words_parse_and_print),
        cmocka_unit_test(variants_refuse_models_they_cannot_change),
        cmocka_unit_test(pe_variants_give_seed001s_tables),
        cmocka_unit_test(model_traces_the_chosen_pe_table),
        cmocka_unit_test(no_scale_softmaxes_the_raw_scores),
        cmocka_unit_test(no_scale_peaks_the_weights_at_dk_64),
        cmocka_unit_test(seed000_reshape_scrambles_heads_and_positions),
        cmocka_unit_test(seed001_layernorm_matches_the_seeds_example),
        cmocka_unit_test(seed001_layernorm_shares_statistics_across_the_batch),
        cmocka_unit_test(seed004_residual_drops_the_attention),
        cmocka_unit_test(no_residual_replaces_the_stream),
        cmocka_unit_test(padding_both_hides_pad_rows_with_zeros),
        cmocka_unit_test(seed003_mask_adds_minus_1e9),
        cmocka_unit_test(seed001_softmax_overflows_past_88),
        cmocka_unit_test(mask_none_attends_to_pads),
        cmocka_unit_test(train_mode_drops_and_rescales_seeded),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
