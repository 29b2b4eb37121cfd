/* PyTorch parity: the model, loaded with a module's state_dict from
 * tests/ref/<case>/weights.safetensors and fed the same inputs, gives the same
 * outputs within 1e-4 relative (absolute below 1). Each case's configuration
 * comes from the fixture's own __metadata__, so the fixtures and this test
 * cannot drift apart. On failure the largest difference is printed with its
 * position. tests/ref/README.md lists the cases; make_fixtures.py makes them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ref_fixture.h"
#include "tscope/kernels.h"
#include "tscope/model.h"
#include "tscope/io.h"

#define TOL 1e-4
#define MAX_CHECKS 8

/* Compare, print the worst element with its multi-index, fail above TOL. */
static void compare(const char *dir, const char *what, const float *got, const ts_npy *want) {
    int64_t at;
    double worst = check_max_rel_diff(got, want->f32, want->numel, &at);
    char idx[96] = "";
    int64_t coord[TS_MAX_RANK], rest = at;
    for (int d = want->rank - 1; d >= 0; d--) {
        coord[d] = rest % want->shape[d];
        rest /= want->shape[d];
    }
    for (int d = 0, n = 0; d < want->rank && n < (int)sizeof idx; d++)
        n += snprintf(idx + n, sizeof idx - (size_t)n, "%s%lld", d ? ", " : "", (long long)coord[d]);
    if (worst <= TOL) {
        print_message("%s %s: largest rel diff %.3g\n", dir, what, worst);
        return;
    }
    print_error("%s %s: largest rel diff %.3g > %.0e at [%s]: got %.9g, PyTorch %.9g\n", dir, what, worst, TOL,
                idx, (double)got[at], (double)want->f32[at]);
    fail();
}

/* ---- the hook: keep copies of the steps a fixture has values for ---------- */

typedef struct check {
    const char *trace_name; /* e.g. "encoder.layers.0.out" */
    const char *file;       /* e.g. "layers.0.out.npy" */
    ts_npy want;
    float *got;             /* (want.numel) */
    bool seen;
} check;

typedef struct recorder {
    check checks[MAX_CHECKS];
    int count;
    const char *dir;
} recorder;

static void expect_step(recorder *r, const char *trace_name, const char *file) {
    check *c = &r->checks[r->count++];
    c->trace_name = trace_name;
    c->file = file;
    ref_read_npy(&c->want, r->dir, file);
    c->got = calloc((size_t)c->want.numel, sizeof(float));
    assert_non_null(c->got);
}

static ts_status record(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag) {
    (void)op, (void)tag;
    recorder *r = ctx;
    for (int i = 0; i < r->count; i++) {
        check *c = &r->checks[i];
        if (strcmp(name, c->trace_name) != 0) continue;
        ts_tensor dst;
        ts_status st = ts_tensor_view(&dst, c->got, c->want.rank, c->want.shape);
        if (!st && !ts_tensor_same_shape(&dst, t)) {
            char a[TS_SHAPE_TEXT_MAX], b[TS_SHAPE_TEXT_MAX];
            return ts_fail(TS_ERR_SHAPE, "parity: step %s has shape %s, PyTorch's %s has %s", name,
                           ts_tensor_shape_str(a, sizeof a, t, TS_SHAPE_PLAIN), c->file,
                           ts_tensor_shape_str(b, sizeof b, &dst, TS_SHAPE_PLAIN));
        }
        if (!st) st = ts_tensor_copy(&dst, t);
        c->seen = true;
        return st;
    }
    return TS_OK;
}

static void check_steps(recorder *r) {
    for (int i = 0; i < r->count; i++) {
        check *c = &r->checks[i];
        if (!c->seen) {
            print_error("%s: the model never traced %s (compared with %s)\n", r->dir, c->trace_name, c->file);
            fail();
        }
        compare(r->dir, c->trace_name, c->got, &c->want);
    }
}

static void free_recorder(recorder *r) {
    for (int i = 0; i < r->count; i++) {
        ts_npy_free(&r->checks[i].want);
        free(r->checks[i].got);
    }
}

/* ---- the cases ---------------------------------------------------------------- */

static void model_matches_pytorch(void **state) {
    const char *dir = *state;
    ref_setup s;
    ref_setup_from_fixture(&s, dir);
    ref_inputs io;
    ref_inputs_read(&io, &s, dir);
    assert_ok(ts_model_config_check(&s.cfg));
    ts_model m;
    assert_ok(ts_model_init(&m, &s.cfg));
    assert_ok(ts_model_load_safetensors(&m, ref_fixture(dir, "weights.safetensors"), s.prefix));

    recorder r = {.dir = dir};
    if (s.cfg.arch == TS_ARCH_ATTENTION) expect_step(&r, "self_attn.weights", "attn_weights.npy");
    static const char *const layer_steps[] = {"encoder.layers.0.out", "encoder.layers.1.out"};
    static const char *const layer_files[] = {"layers.0.out.npy", "layers.1.out.npy"};
    for (int i = 0; i < 2; i++)
        if (s.cfg.arch == TS_ARCH_ENCODER && i < s.cfg.layers && ref_fixture_exists(dir, layer_files[i]))
            expect_step(&r, layer_steps[i], layer_files[i]);
    if (s.cfg.arch == TS_ARCH_ENCODER_DECODER && !s.decoder_alone) expect_step(&r, "encoder.out", "memory.npy");
    ts_hook hook = {.fn = record, .ctx = &r};

    ts_tensor out;
    assert_ok(ts_model_forward(&m, &io.in, &hook, &out));
    ts_npy want;
    ref_read_npy(&want, dir, "out.npy");
    ts_tensor want_t;
    assert_ok(ts_npy_tensor(&want, &want_t));
    assert_true(ts_tensor_same_shape(&out, &want_t));
    float *got = malloc((size_t)want.numel * sizeof(float));
    assert_non_null(got);
    ts_tensor got_t;
    assert_ok(ts_tensor_view(&got_t, got, want.rank, want.shape));
    assert_ok(ts_tensor_copy(&got_t, &out));
    compare(dir, "out", got, &want);
    check_steps(&r);

    free(got);
    ts_npy_free(&want);
    free_recorder(&r);
    ref_inputs_free(&io);
    ts_model_free(&m);
}

/* nn.LayerNorm against the kernel alone: the model has no LayerNorm-only arch. */
static void layernorm_matches_pytorch(void **state) {
    (void)state;
    const char *dir = "layernorm";
    ts_safetensors f;
    assert_ok(ts_safetensors_open(&f, ref_fixture(dir, "weights.safetensors")));
    ts_tensor gamma, beta;
    assert_ok(ts_safetensors_expect(&f, "weight", 1, (int64_t[]){16}, &gamma));
    assert_ok(ts_safetensors_expect(&f, "bias", 1, (int64_t[]){16}, &beta));
    ts_npy x, want;
    ref_read_npy(&x, dir, "x.npy");
    ref_read_npy(&want, dir, "out.npy");
    float *got = malloc((size_t)x.numel * sizeof(float));
    assert_non_null(got);
    int cols = (int)x.shape[x.rank - 1];
    assert_ok(ts_kernels_init());
    ts_layernorm(got, NULL, NULL, x.f32, gamma.data, beta.data, x.numel / cols, cols,
                 (float)atof(ts_safetensors_meta(&f, "eps")));
    compare(dir, "out", got, &want);
    free(got);
    ts_npy_free(&x);
    ts_npy_free(&want);
    ts_safetensors_close(&f);
}

/* The messages a learner sees when a checkpoint does not fit the model. */
static void load_errors_name_the_tensor(void **state) {
    (void)state;
    const char *path = ref_fixture("enc_post_relu_nonorm", "weights.safetensors");
    ts_model_config c = {.arch = TS_ARCH_ENCODER, .d_model = 32, .heads = 2, .ffn = 32, .layers = 2,
                         .batch = 1, .seq = 4, .eps = 1e-5f, .embed_eps = 1e-12f, .pe = TS_PE_NONE, .input = TS_INPUT_EMBEDDED,
                         .seed = 1};
    ts_model m;
    assert_ok(ts_model_init(&m, &c));
    assert_int_equal(ts_model_load_safetensors(&m, path, NULL), TS_ERR_SHAPE);
    char want[700];
    snprintf(want, sizeof want,
             "tensor layers.0.self_attn.in_proj_weight has shape [48, 16] in %s, the model needs [96, 32]", path);
    assert_string_equal(ts_last_error(), want);
    ts_model_free(&m);

    /* A final norm the file does not have: the message lists the file's tensors. */
    c.d_model = 16;
    c.final_norm = true;
    assert_ok(ts_model_init(&m, &c));
    assert_int_equal(ts_model_load_safetensors(&m, path, NULL), TS_ERR_ARG);
    assert_non_null(strstr(ts_last_error(), "has no tensor encoder.norm.weight"));
    assert_non_null(strstr(ts_last_error(), "it has 24: layers.0.self_attn.in_proj_weight, "));
    ts_model_free(&m);

    /* A tensor the model has no place for. */
    c.final_norm = false;
    c.layers = 1;
    assert_ok(ts_model_init(&m, &c));
    assert_int_equal(ts_model_load_safetensors(&m, path, NULL), TS_ERR_ARG);
    assert_non_null(strstr(ts_last_error(), "12 tensors have no place in this model (the file has more encoder "
                                            "layers than --layers): layers.1.self_attn.in_proj_weight, "));
    assert_non_null(strstr(ts_last_error(), "; --ignore-extra skips them"));
    ts_model_free(&m);

    /* A final norm the model does not have. */
    c.layers = 2;
    assert_ok(ts_model_init(&m, &c));
    assert_int_equal(ts_model_load_safetensors(&m, ref_fixture("enc_post_relu_norm", "weights.safetensors"), NULL),
                     TS_ERR_ARG);
    assert_non_null(strstr(ts_last_error(), "2 tensors have no place in this model (the file has a final "
                                            "LayerNorm: add --final-norm): norm.weight, norm.bias"));
    ts_model_free(&m);
}

/* One test per fixture, named after it. */
#define CASE(dir) {"parity " dir, model_matches_pytorch, NULL, NULL, (void *)(dir)}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(layernorm_matches_pytorch),
        REF_MODEL_CASES(CASE),
        cmocka_unit_test(load_errors_name_the_tensor),
    };
    return cmocka_run_group_tests_name("parity", tests, NULL, NULL);
}
