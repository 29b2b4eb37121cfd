/* PyTorch parity: the model, loaded with a module's state_dict from
 * tests/ref/<case>/weights.safetensors and fed the same inputs, gives the same
 * outputs within 1e-4 relative (absolute below 1). Each case's configuration
 * comes from the fixture's own __metadata__, so the fixtures and this test
 * cannot drift apart. On failure the largest difference is printed with its
 * position. tests/ref/README.md lists the cases; make_fixtures.py makes them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tscope/kernels.h"
#include "tscope/model.h"
#include "tscope/model_load.h"
#include "tscope/npy.h"
#include "tscope/safetensors.h"

#define TOL 1e-4
#define MAX_CHECKS 8

static const char *ref_dir(void) {
    const char *d = getenv("TSCOPE_REF_DIR");
    return d && d[0] ? d : "tests/ref";
}

static const char *fixture(const char *dir, const char *file) {
    static char buf[4][512];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, 512, "%s/%s/%s", ref_dir(), dir, file);
    return p;
}

static bool fixture_exists(const char *dir, const char *file) { return access(fixture(dir, file), R_OK) == 0; }

static void read_npy(ts_npy *out, const char *dir, const char *file) {
    assert_ok(ts_npy_read(out, fixture(dir, file)));
}

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
    read_npy(&c->want, r->dir, file);
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

/* ---- a fixture's configuration, from its __metadata__ --------------------- */

static const char *meta(const ts_safetensors *f, const char *key) {
    const char *v = ts_safetensors_meta(f, key);
    if (!v) {
        print_error("%s: __metadata__ has no %s\n", f->path, key);
        fail();
    }
    return v;
}

static bool meta_flag(const ts_safetensors *f, const char *key) {
    const char *v = ts_safetensors_meta(f, key);
    return v && strcmp(v, "True") == 0;
}

typedef struct parity_setup {
    ts_model_config cfg;
    const char *prefix;  /* what the state_dict's names sit under in our model */
    const char *src;     /* source input file */
} parity_setup;

static void setup_from_fixture(parity_setup *s, const char *dir) {
    ts_safetensors f;
    assert_ok(ts_safetensors_open(&f, fixture(dir, "weights.safetensors")));
    memset(s, 0, sizeof *s);
    ts_model_config *c = &s->cfg;
    const char *module = meta(&f, "module");
    c->d_model = atoi(meta(&f, "d_model"));
    c->heads = atoi(meta(&f, "heads"));
    c->eps = 1e-5f;
    c->embed_eps = 1e-12f; /* unused: no learned embeddings here */
    c->pe = TS_PE_NONE;
    c->head = TS_HEAD_NONE;
    c->input = TS_INPUT_EMBEDDED;
    c->seed = 1;
    s->src = "x.npy";
    if (strcmp(module, "nn.MultiheadAttention") == 0) {
        c->arch = TS_ARCH_ATTENTION;
        c->in_dim = c->d_model;
        c->ffn = 4 * c->d_model;
        c->causal = meta_flag(&f, "causal");
    } else {
        c->ffn = atoi(meta(&f, "ffn"));
        c->eps = (float)atof(meta(&f, "eps"));
        c->norm = strcmp(meta(&f, "norm"), "pre") == 0 ? TS_NORM_PRE : TS_NORM_POST;
        c->activation = strcmp(meta(&f, "activation"), "gelu") == 0 ? TS_ACT_GELU : TS_ACT_RELU;
        if (strcmp(module, "nn.TransformerEncoder") == 0) {
            c->arch = TS_ARCH_ENCODER;
            c->layers = atoi(meta(&f, "layers"));
            c->final_norm = meta_flag(&f, "final_norm");
        } else if (strcmp(module, "nn.TransformerDecoderLayer") == 0) {
            c->arch = TS_ARCH_ENCODER_DECODER;
            c->layers = 0;
            c->dec_layers = 1;
            s->prefix = "decoder.layers.0.";
            s->src = "memory.npy";
        } else if (strcmp(module, "nn.Transformer") == 0) {
            c->arch = TS_ARCH_ENCODER_DECODER;
            c->layers = atoi(meta(&f, "layers"));
            c->dec_layers = atoi(meta(&f, "dec_layers"));
            c->final_norm = true;
            s->src = "src.npy";
        } else {
            print_error("%s: unknown module %s\n", dir, module);
            fail();
        }
    }
    ts_safetensors_close(&f);
}

/* (B, S) float 0/1 padding mask -> uint8 pads, or NULL when the fixture has none. */
static uint8_t *read_pads(const char *dir, const char *file) {
    if (!fixture_exists(dir, file)) return NULL;
    ts_npy m;
    read_npy(&m, dir, file);
    uint8_t *pads = malloc((size_t)m.numel);
    assert_non_null(pads);
    for (int64_t i = 0; i < m.numel; i++) pads[i] = m.f32[i] != 0;
    ts_npy_free(&m);
    return pads;
}

/* ---- the cases ---------------------------------------------------------------- */

static void model_matches_pytorch(void **state) {
    const char *dir = *state;
    parity_setup s;
    setup_from_fixture(&s, dir);
    ts_npy src, tgt = {0}, memory = {0};
    bool decoder_alone = s.prefix != NULL;
    if (decoder_alone) {
        read_npy(&memory, dir, "memory.npy");
        s.cfg.batch = (int)memory.shape[0];
        s.cfg.seq = (int)memory.shape[1];
        read_npy(&tgt, dir, "tgt.npy");
        s.cfg.tgt_seq = (int)tgt.shape[1];
    } else {
        read_npy(&src, dir, s.src);
        s.cfg.batch = (int)src.shape[0];
        s.cfg.seq = (int)src.shape[1];
        if (s.cfg.arch == TS_ARCH_ENCODER_DECODER) {
            read_npy(&tgt, dir, "tgt.npy");
            s.cfg.tgt_seq = (int)tgt.shape[1];
        }
    }
    assert_ok(ts_model_config_check(&s.cfg));
    ts_model m;
    assert_ok(ts_model_init(&m, &s.cfg));
    assert_ok(ts_model_load_safetensors(&m, fixture(dir, "weights.safetensors"), s.prefix));

    ts_model_input in = {0};
    if (decoder_alone) in.memory = memory.f32;
    else in.src_embedded = src.f32;
    if (tgt.f32) in.tgt_embedded = tgt.f32;
    uint8_t *src_pad = read_pads(dir, "key_padding_mask.npy");
    if (!src_pad) src_pad = read_pads(dir, "src_key_padding_mask.npy");
    if (!src_pad) src_pad = read_pads(dir, "memory_key_padding_mask.npy");
    uint8_t *tgt_pad = read_pads(dir, "tgt_key_padding_mask.npy");
    in.src_pad = src_pad;
    in.tgt_pad = tgt_pad;

    recorder r = {.dir = dir};
    if (s.cfg.arch == TS_ARCH_ATTENTION) expect_step(&r, "self_attn.weights", "attn_weights.npy");
    static const char *const layer_steps[] = {"encoder.layers.0.out", "encoder.layers.1.out"};
    static const char *const layer_files[] = {"layers.0.out.npy", "layers.1.out.npy"};
    for (int i = 0; i < 2; i++)
        if (s.cfg.arch == TS_ARCH_ENCODER && i < s.cfg.layers && fixture_exists(dir, layer_files[i]))
            expect_step(&r, layer_steps[i], layer_files[i]);
    if (s.cfg.arch == TS_ARCH_ENCODER_DECODER && !decoder_alone) expect_step(&r, "encoder.out", "memory.npy");
    ts_hook hook = {record, &r};

    ts_tensor out;
    assert_ok(ts_model_forward(&m, &in, &hook, &out));
    ts_npy want;
    read_npy(&want, dir, "out.npy");
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
    free(src_pad);
    free(tgt_pad);
    if (!decoder_alone) ts_npy_free(&src);
    ts_npy_free(&tgt);
    ts_npy_free(&memory);
    ts_model_free(&m);
}

/* nn.LayerNorm against the kernel alone: the model has no LayerNorm-only arch. */
static void layernorm_matches_pytorch(void **state) {
    (void)state;
    const char *dir = "layernorm";
    ts_safetensors f;
    assert_ok(ts_safetensors_open(&f, fixture(dir, "weights.safetensors")));
    ts_tensor gamma, beta;
    assert_ok(ts_safetensors_expect(&f, "weight", 1, (int64_t[]){16}, &gamma));
    assert_ok(ts_safetensors_expect(&f, "bias", 1, (int64_t[]){16}, &beta));
    ts_npy x, want;
    read_npy(&x, dir, "x.npy");
    read_npy(&want, dir, "out.npy");
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
    const char *path = fixture("enc_post_relu_nonorm", "weights.safetensors");
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
    assert_non_null(strstr(ts_last_error(), "tensor layers.1.self_attn.in_proj_weight has no place in this model "
                                            "(the file has more encoder layers than --layers)"));
    ts_model_free(&m);

    /* A final norm the model does not have. */
    c.layers = 2;
    assert_ok(ts_model_init(&m, &c));
    assert_int_equal(ts_model_load_safetensors(&m, fixture("enc_post_relu_norm", "weights.safetensors"), NULL),
                     TS_ERR_ARG);
    assert_non_null(strstr(ts_last_error(), "tensor norm.weight has no place in this model (the file has a final "
                                            "LayerNorm: add --final-norm)"));
    ts_model_free(&m);
}

/* One test per fixture, named after it. */
#define CASE(dir) {"parity " dir, model_matches_pytorch, NULL, NULL, (void *)(dir)}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(layernorm_matches_pytorch),
        CASE("mha"),
        CASE("mha_kpm"),
        CASE("mha_causal"),
        CASE("mha_kpm_causal"),
        CASE("enc_post_relu_norm"),
        CASE("enc_post_relu_nonorm"),
        CASE("enc_post_gelu_norm"),
        CASE("enc_post_gelu_nonorm"),
        CASE("enc_pre_relu_norm"),
        CASE("enc_pre_relu_nonorm"),
        CASE("enc_pre_gelu_norm"),
        CASE("enc_pre_gelu_nonorm"),
        CASE("enc_post_relu_norm_kpm"),
        CASE("enc_pre_gelu_norm_kpm"),
        CASE("dec_layer_post_relu"),
        CASE("dec_layer_pre_gelu_kpm"),
        CASE("transformer_post_relu"),
        CASE("transformer_pre_gelu_kpm"),
        cmocka_unit_test(load_errors_name_the_tensor),
    };
    return cmocka_run_group_tests_name("parity", tests, NULL, NULL);
}
