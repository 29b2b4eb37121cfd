/* Gradient parity with PyTorch autograd: for every model fixture in
 * tests/ref/ (MultiheadAttention with each mask, TransformerEncoder post/pre
 * x relu/gelu x final norm or not, with key padding, TransformerDecoderLayer,
 * Transformer), the trainer's backward of sum(out * grad_out) gives every
 * parameter's gradient (grads.safetensors, by state_dict name) and every
 * input's (grad_<input>.npy) within 1e-4: per element |got - want| /
 * max(1, |want|) as the forward parity test, and also relative to the
 * tensor's largest gradient. Today's parts (RMSNorm, RoPE, gated FFNs, shared
 * key/value heads: tests/ref/modern/) likewise. Plus: the LayerNorm fixture through the kernel,
 * cross-entropy with padding and label smoothing, and two AdamW steps against
 * torch.optim.AdamW. The largest difference of each case is printed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ref_fixture.h"
#include "tscope/kernels.h"
#include "tscope/model.h"
#include "tscope/io.h"
#include "tscope/train.h"

#define TOL 1e-4

/* Both measures; fail above TOL. Returns the per-element one. */
static double compare(const char *dir, const char *what, const float *got, const float *want, int64_t n) {
    int64_t at;
    double worst = check_max_rel_diff(got, want, n, &at);
    double scale = 0, diff = 0;
    for (int64_t i = 0; i < n; i++) {
        scale = fmax(scale, fabs(want[i]));
        diff = fmax(diff, fabs((double)got[i] - want[i]));
        if (isnan(got[i])) diff = INFINITY;
    }
    double norm = scale > 0 ? diff / scale : diff;
    if (worst > TOL || norm > TOL) {
        print_error("%s %s: rel diff %.3g, normalized %.3g > %.0e; element %lld: got %.9g, PyTorch %.9g\n", dir, what,
                    worst, norm, TOL, (long long)at, (double)got[at], (double)want[at]);
        fail();
    }
    return fmax(worst, norm);
}

static void compare_input_grad(const char *dir, const char *file, const float *got, double *worst) {
    assert_non_null(got);
    ts_npy want;
    ref_read_npy(&want, dir, file);
    *worst = fmax(*worst, compare(dir, file, got, want.f32, want.numel));
    ts_npy_free(&want);
}

/* Every parameter gradient in <dir>/grads.safetensors (by state_dict name,
 * found in the model under `prefix`) against the trainer's; prints and
 * returns the largest difference. */
static double compare_param_grads(const char *dir, const char *label, const ts_model *m, ts_train *tr,
                                  const char *prefix) {
    ts_safetensors g;
    assert_ok(ts_safetensors_open(&g, ref_fixture(dir, "grads.safetensors")));
    assert_int_equal(g.count, m->n_params);
    float *buf = malloc(sizeof(float) * (size_t)m->n_floats);
    assert_non_null(buf);
    const char *worst_name = "";
    double worst = 0;
    for (int k = 0; k < g.count; k++) {
        const char *key = g.entries[k].name;
        char full[TS_MODEL_NAME_MAX + 32];
        snprintf(full, sizeof full, "%s%s", prefix ? prefix : "", key);
        int i = ts_model_find_param(m, full);
        if (i < 0) {
            print_error("%s: grads.safetensors has %s, the model has no such parameter\n", dir, key);
            fail();
        }
        ts_tensor want;
        assert_ok(ts_safetensors_get(&g, key, &want));
        assert_int_equal(ts_tensor_numel(&want), m->params[i].numel);
        ts_train_export_grad(tr, i, buf);
        double e = compare(dir, key, buf, want.data, m->params[i].numel);
        if (e >= worst) worst = e, worst_name = key;
    }
    print_message("%-26s %d parameter gradients, largest diff %.2e (%s)\n", label, g.count, worst, worst_name);
    ts_safetensors_close(&g);
    free(buf);
    return worst;
}

/* ---- the model cases ---------------------------------------------------------------- */

static void gradients_match_pytorch(void **state) {
    const char *dir = *state;
    ref_setup s;
    ref_setup_from_fixture(&s, dir);
    ref_inputs io;
    ref_inputs_read(&io, &s, dir);
    ts_npy gout;
    ref_read_npy(&gout, dir, "grad_out.npy");
    ts_model m;
    assert_ok(ts_model_init(&m, &s.cfg));
    assert_ok(ts_model_load_safetensors(&m, ref_fixture(dir, "weights.safetensors"), s.prefix));
    ts_train tr;
    assert_ok(ts_train_init(&tr, &m));

    ts_tensor out;
    assert_ok(ts_train_forward(&tr, &io.in, &out));
    ts_npy want_out;
    ref_read_npy(&want_out, dir, "out.npy");
    assert_int_equal(ts_tensor_numel(&out), want_out.numel);
    double worst = compare(dir, "out (training forward)", out.data, want_out.f32, want_out.numel);
    ts_npy_free(&want_out);
    assert_ok(ts_train_backward(&tr, gout.f32, NULL));

    /* every parameter of the file, by its state_dict name */
    double worst_param = compare_param_grads(dir, dir, &m, &tr, s.prefix);
    worst = fmax(worst, worst_param);
    double worst_in = 0;
    if (s.decoder_alone) {
        compare_input_grad(dir, "grad_memory.npy", tr.d_memory, &worst_in);
        compare_input_grad(dir, "grad_tgt.npy", tr.d_tgt, &worst_in);
    } else if (s.cfg.arch == TS_ARCH_ENCODER_DECODER) {
        compare_input_grad(dir, "grad_src.npy", tr.d_src, &worst_in);
        compare_input_grad(dir, "grad_tgt.npy", tr.d_tgt, &worst_in);
    } else {
        compare_input_grad(dir, "grad_x.npy", tr.d_src, &worst_in);
    }
    print_message("%-26s input gradients, largest diff %.2e\n", dir, worst_in);
    ref_inputs_free(&io);
    ts_npy_free(&gout);
    ts_train_free(&tr);
    ts_model_free(&m);
}

/* ---- LayerNorm, cross-entropy, AdamW ------------------------------------------------- */

static void layernorm_gradients_match_pytorch(void **state) {
    (void)state;
    const char *dir = "layernorm";
    ts_safetensors f, g;
    assert_ok(ts_safetensors_open(&f, ref_fixture(dir, "weights.safetensors")));
    assert_ok(ts_safetensors_open(&g, ref_fixture(dir, "grads.safetensors")));
    ts_tensor gamma, beta, want_dg, want_db;
    assert_ok(ts_safetensors_expect(&f, "weight", 1, (int64_t[]){16}, &gamma));
    assert_ok(ts_safetensors_expect(&f, "bias", 1, (int64_t[]){16}, &beta));
    assert_ok(ts_safetensors_expect(&g, "weight", 1, (int64_t[]){16}, &want_dg));
    assert_ok(ts_safetensors_expect(&g, "bias", 1, (int64_t[]){16}, &want_db));
    ts_npy x, gout, want_dx;
    ref_read_npy(&x, dir, "x.npy");
    ref_read_npy(&gout, dir, "grad_out.npy");
    ref_read_npy(&want_dx, dir, "grad_x.npy");
    int C = 16;
    int64_t N = x.numel / C;
    float *out = malloc(sizeof(float) * (size_t)x.numel), *dx = calloc((size_t)x.numel, sizeof(float));
    float mean[64], rstd[64], dg[16] = {0}, db[16] = {0};
    assert_true(N <= 64);
    ts_layernorm(out, mean, rstd, x.f32, gamma.data, beta.data, N, C, 1e-5f);
    ts_bwd_layernorm_backward(dx, dg, db, gout.f32, x.f32, gamma.data, mean, rstd, N, C);
    double w = compare(dir, "grad_x", dx, want_dx.f32, x.numel);
    w = fmax(w, compare(dir, "weight", dg, want_dg.data, C));
    w = fmax(w, compare(dir, "bias", db, want_db.data, C));
    print_message("layernorm: largest gradient diff %.2e\n", w);
    free(out);
    free(dx);
    ts_npy_free(&x);
    ts_npy_free(&gout);
    ts_npy_free(&want_dx);
    ts_safetensors_close(&f);
    ts_safetensors_close(&g);
}

static void cross_entropy_matches_pytorch(void **state) {
    (void)state;
    const char *dir = "cross_entropy";
    ts_npy logits, labels, loss, want;
    ref_read_npy(&logits, dir, "logits.npy");
    assert_ok(ts_npy_read_labels(&labels, ref_fixture(dir, "labels.npy")));
    ref_read_npy(&loss, dir, "loss.npy");
    ref_read_npy(&want, dir, "grad_logits.npy");
    int V = (int)logits.shape[2];
    int64_t N = labels.numel;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)N);
    for (int64_t i = 0; i < N; i++) ids[i] = (int32_t)labels.i64[i];
    int64_t valid;
    double got = ts_bwd_cross_entropy_forward(logits.f32, ids, N, V, 0, 0.1f, &valid);
    assert_int_equal(valid, N - 2);
    float gotf = (float)got;
    double e = compare(dir, "loss", &gotf, loss.f32, 1);
    float *d = calloc((size_t)logits.numel, sizeof(float));
    ts_bwd_cross_entropy_backward(d, 1.0f, logits.f32, ids, N, V, 0, 0.1f);
    e = fmax(e, compare(dir, "grad_logits", d, want.f32, want.numel));
    print_message("cross_entropy (ignore_index 0, label_smoothing 0.1): loss %.7f vs %.7f, largest diff %.2e\n", got,
                  (double)loss.f32[0], e);
    free(d);
    free(ids);
    ts_npy_free(&logits);
    ts_npy_free(&labels);
    ts_npy_free(&loss);
    ts_npy_free(&want);
}

static void adamw_matches_pytorch(void **state) {
    (void)state;
    const char *dir = "adamw";
    ts_safetensors p0;
    assert_ok(ts_safetensors_open(&p0, ref_fixture(dir, "params.safetensors")));
    int n = p0.count;
    int64_t total = 0;
    for (int k = 0; k < n; k++) {
        ts_tensor t;
        assert_ok(ts_safetensors_get(&p0, p0.entries[k].name, &t));
        total += ts_tensor_numel(&t);
    }
    float *params = malloc(sizeof(float) * (size_t)total), *grads = malloc(sizeof(float) * (size_t)total);
    int64_t off = 0;
    for (int k = 0; k < n; k++) {
        ts_tensor t;
        assert_ok(ts_safetensors_get(&p0, p0.entries[k].name, &t));
        memcpy(params + off, t.data, sizeof(float) * (size_t)ts_tensor_numel(&t));
        off += ts_tensor_numel(&t);
    }
    ts_optim_config oc;
    ts_optim_config_default(&oc, TS_OPTIM_ADAMW);
    oc.beta1 = (float)atof(ref_meta(&p0, "beta1"));
    oc.beta2 = (float)atof(ref_meta(&p0, "beta2"));
    oc.eps = (float)atof(ref_meta(&p0, "eps"));
    oc.weight_decay = (float)atof(ref_meta(&p0, "weight_decay"));
    float lr = (float)atof(ref_meta(&p0, "lr"));
    ts_optim opt;
    assert_ok(ts_optim_init(&opt, &oc, total));
    double worst = 0;
    for (int step = 1; step <= 2; step++) {
        char gname[32], aname[32];
        snprintf(gname, sizeof gname, "grads%d.safetensors", step);
        snprintf(aname, sizeof aname, "after%d.safetensors", step);
        ts_safetensors g, after;
        assert_ok(ts_safetensors_open(&g, ref_fixture(dir, gname)));
        assert_ok(ts_safetensors_open(&after, ref_fixture(dir, aname)));
        off = 0;
        for (int k = 0; k < n; k++) { /* the same names, in params' order */
            ts_tensor t;
            assert_ok(ts_safetensors_get(&g, p0.entries[k].name, &t));
            memcpy(grads + off, t.data, sizeof(float) * (size_t)ts_tensor_numel(&t));
            off += ts_tensor_numel(&t);
        }
        ts_optim_step(&opt, params, grads, lr);
        off = 0;
        for (int k = 0; k < n; k++) {
            ts_tensor t;
            assert_ok(ts_safetensors_get(&after, p0.entries[k].name, &t));
            int64_t m = ts_tensor_numel(&t);
            /* parameters move by ~lr per step: compare the moves at 1e-4 of lr too */
            for (int64_t i = 0; i < m; i++) worst = fmax(worst, fabs((double)params[off + i] - t.data[i]));
            compare(dir, aname, params + off, t.data, m);
            off += m;
        }
        ts_safetensors_close(&g);
        ts_safetensors_close(&after);
    }
    print_message("adamw: two steps, largest parameter diff %.2e (lr %g)\n", worst, (double)lr);
    assert_true(worst <= 1e-4 * lr);
    ts_optim_free(&opt);
    free(params);
    free(grads);
    ts_safetensors_close(&p0);
}

#define CASE(dir) {"grad parity " dir, gradients_match_pytorch, NULL, NULL, (void *)(dir)}

/* A decoder-only model's training forward on a fixture's ids (B, S), its
 * logits against want_out (when given), then the backward of
 * sum(logits * grad_out) into tr's gradients. */
static void train_pass_on_ids(const char *dir, ts_model *m, ts_train *tr, const ts_npy *ids, const ts_npy *gout,
                              const ts_npy *want_out) {
    int32_t *src = malloc(sizeof(int32_t) * (size_t)ids->numel);
    assert_non_null(src);
    for (int64_t k = 0; k < ids->numel; k++) src[k] = (int32_t)ids->i64[k];
    assert_ok(ts_train_init(tr, m));
    ts_model_input in = {.src_ids = src};
    ts_tensor out;
    assert_ok(ts_train_forward(tr, &in, &out));
    assert_int_equal(ts_tensor_numel(&out), gout->numel);
    if (want_out) {
        double e = compare(dir, "logits (training forward)", out.data, want_out->f32, want_out->numel);
        print_message("%-26s logits, largest diff %.2e\n", dir, e);
    }
    assert_ok(ts_train_backward(tr, gout->f32, NULL));
    free(src);
}

/* GPT-2's layout (tests/ref/gpt/make_fixtures.py: a small GPT-2 written from the
 * published architecture): the file read as it comes, the training backward of
 * sum(logits * grad_out) on the fixture's ids, every parameter's gradient against
 * autograd's (Conv1D gradients transposed to nn.Linear's layout by the script). */
static void gpt2_gradients_match_pytorch(void **state) {
    (void)state;
    const char *dir = "gpt";
    char small[1100];
    snprintf(small, sizeof small, "%s", ref_fixture(dir, "small"));
    ts_model_config c;
    assert_ok(ts_gpt2_config(small, NULL, &c));
    ts_npy ids, gout;
    assert_ok(ts_npy_read_labels(&ids, ref_fixture(dir, "ids.npy")));
    ref_read_npy(&gout, dir, "grad_out.npy");
    c.batch = 1;
    c.seq = (int)ids.shape[1];
    ts_model m;
    assert_ok(ts_model_init(&m, &c));
    assert_ok(ts_gpt2_load(&m, small, NULL));
    ts_train tr;
    train_pass_on_ids(dir, &m, &tr, &ids, &gout, NULL);
    compare_param_grads(dir, "gpt2 layout", &m, &tr, NULL);
    ts_npy_free(&ids);
    ts_npy_free(&gout);
    ts_train_free(&tr);
    ts_model_free(&m);
}

/* Today's block parts (tests/ref/modern/make_fixtures.py): a small decoder-only
 * model per case, its configuration in the weights' __metadata__, the training
 * forward's logits and the backward of sum(logits * grad_out) against autograd's. */
static void modern_config(const char *dir, int B, int S, ts_model_config *c) {
    ts_safetensors f;
    assert_ok(ts_safetensors_open(&f, ref_fixture(dir, "weights.safetensors")));
    assert_ok(ts_model_config_preset(c, "lm"));
    c->d_model = atoi(ref_meta(&f, "d_model"));
    c->heads = atoi(ref_meta(&f, "heads"));
    c->kv_heads = atoi(ref_meta(&f, "kv_heads"));
    c->head_dim = atoi(ref_meta(&f, "head_dim"));
    c->ffn = atoi(ref_meta(&f, "ffn"));
    c->layers = atoi(ref_meta(&f, "layers"));
    c->vocab = atoi(ref_meta(&f, "vocab"));
    c->eps = (float)atof(ref_meta(&f, "eps"));
    c->batch = B, c->seq = S, c->max_pos = 0, c->dropout = 0.0f;
    c->pe = TS_PE_ROPE;
    c->rotary_pct = (float)atof(ref_meta(&f, "rotary_pct"));
    c->rope_theta = (float)atof(ref_meta(&f, "rope_theta"));
    assert_ok(ts_model_norm_kind_parse(ref_meta(&f, "norm_kind"), "norm_kind", &c->norm_kind));
    assert_ok(ts_model_rope_style_parse(ref_meta(&f, "rope_style"), "rope_style", &c->rope_style));
    assert_ok(ts_model_activation_parse(ref_meta(&f, "activation"), "activation", &c->activation));
    c->gated_ffn = strcmp(ref_meta(&f, "ffn_kind"), "mlp") != 0;
    c->split_qkv = ref_meta_flag(&f, "split_qkv");
    c->no_qkv_bias = !ref_meta_flag(&f, "qkv_bias");
    c->no_out_bias = !ref_meta_flag(&f, "out_bias");
    c->no_ffn_bias = !ref_meta_flag(&f, "ffn_bias");
    ts_safetensors_close(&f);
    assert_ok(ts_model_config_check(c));
}

static void modern_gradients_match_pytorch(void **state) {
    const char *dir = *state;
    ts_npy ids, gout, want_out;
    assert_ok(ts_npy_read_labels(&ids, ref_fixture(dir, "ids.npy")));
    ref_read_npy(&gout, dir, "grad_out.npy");
    ref_read_npy(&want_out, dir, "out.npy");
    ts_model_config c;
    modern_config(dir, (int)ids.shape[0], (int)ids.shape[1], &c);
    ts_model m;
    assert_ok(ts_model_init(&m, &c));
    assert_ok(ts_model_load_safetensors(&m, ref_fixture(dir, "weights.safetensors"), NULL));
    ts_train tr;
    train_pass_on_ids(dir, &m, &tr, &ids, &gout, &want_out);
    compare_param_grads(dir, dir, &m, &tr, NULL);
    ts_npy_free(&ids);
    ts_npy_free(&gout);
    ts_npy_free(&want_out);
    ts_train_free(&tr);
    ts_model_free(&m);
}

#define MODERN_CASE(dir) {"grad parity " dir, modern_gradients_match_pytorch, NULL, NULL, (void *)(dir)}

static int setup(void **state) {
    (void)state;
    return ts_kernels_init() == TS_OK ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(layernorm_gradients_match_pytorch),
        REF_MODEL_CASES(CASE),
        cmocka_unit_test(cross_entropy_matches_pytorch),
        cmocka_unit_test(adamw_matches_pytorch),
        cmocka_unit_test(gpt2_gradients_match_pytorch),
        MODERN_CASE("modern/llama_gqa"),
        MODERN_CASE("modern/gemma_interleaved_partial"),
        MODERN_CASE("modern/mqa_geglu"),
        MODERN_CASE("modern/packed_rope_silu"),
    };
    return cmocka_run_group_tests_name("grad_parity", tests, setup, NULL);
}
