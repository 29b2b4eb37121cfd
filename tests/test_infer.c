/* A checkpoint's model from its names, shapes and __metadata__
 * (src/io/model_infer.c, model_meta.c, model_load.c): each layout is
 * recognised and read to the right sizes, with the file's own tensor as the
 * evidence; settings come from tscope's config or flat keys, never guessed;
 * a wrapper's prefix is suggested; extra tensors are skipped only when asked
 * and listed; a missing tensor is named as the file should have named it;
 * bool masks and lengths are read as padding. The PyTorch fixtures are
 * tests/ref/ (make_fixtures.py). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ref_fixture.h"
#include "tscope/io.h"
#include "tscope/model.h"
#include "tscope/train.h"

static ts_status infer(const char *dir, const char *file, const char *prefix, ts_weights_info *w) {
    ts_safetensors f;
    assert_ok(ts_safetensors_open(&f, ref_fixture(dir, file)));
    ts_status st = ts_weights_infer(&f, prefix, w);
    ts_safetensors_close(&f);
    return st;
}

static void bare_encoder_sizes_and_what_is_missing(void **state) {
    (void)state;
    ts_weights_info w;
    assert_ok(infer("load_encoder", "weights.safetensors", NULL, &w));
    assert_string_equal(w.layout_name, "nn.TransformerEncoder");
    assert_int_equal(w.cfg.arch, TS_ARCH_ENCODER);
    assert_int_equal(w.cfg.d_model, 16);
    assert_int_equal(w.cfg.ffn, 32);
    assert_int_equal(w.cfg.layers, 2);
    assert_true(w.cfg.final_norm);
    assert_int_equal(w.cfg.head, TS_HEAD_NONE);
    assert_int_equal(w.cfg.input, TS_INPUT_EMBEDDED);
    assert_string_equal(w.why[TS_FACT_FFN], "layers.0.linear1.weight is [32, 16]");
    assert_string_equal(w.why[TS_FACT_LAYERS], "its last layer is layers.1");
    /* no metadata: what shapes cannot tell is nobody's but the user's */
    assert_int_equal(w.source[TS_SETTING_HEADS], TS_SOURCE_NONE);
    assert_int_equal(w.source[TS_SETTING_NORM], TS_SOURCE_NONE);
    assert_int_equal(w.source[TS_SETTING_ACTIVATION], TS_SOURCE_NONE);
    assert_int_equal(w.source[TS_SETTING_EPS], TS_SOURCE_DEFAULT);
    assert_int_equal(w.source[TS_SETTING_PE], TS_SOURCE_DEFAULT); /* vectors: nn.Transformer adds no positions */
    assert_int_equal(w.cfg.pe, TS_PE_NONE);
    /* names both ways */
    char name[256];
    assert_true(ts_weights_model_name(&w, "layers.1.norm2.bias", name, sizeof name));
    assert_string_equal(name, "encoder.layers.1.norm2.bias");
    assert_true(ts_weights_file_name(&w, "encoder.norm.weight", name, sizeof name));
    assert_string_equal(name, "norm.weight");
    assert_false(ts_weights_model_name(&w, "pos_encoder.pe", name, sizeof name));
}

static void bare_transformer_and_lone_attention(void **state) {
    (void)state;
    ts_weights_info w;
    assert_ok(infer("load_transformer", "weights.safetensors", NULL, &w));
    assert_string_equal(w.layout_name, "nn.Transformer");
    assert_int_equal(w.cfg.arch, TS_ARCH_ENCODER_DECODER);
    assert_int_equal(w.cfg.layers, 2);
    assert_int_equal(w.cfg.dec_layers, 2);
    assert_true(w.cfg.final_norm); /* nn.Transformer always has encoder.norm and decoder.norm */
    assert_int_equal(w.cfg.head, TS_HEAD_NONE);

    assert_ok(infer("mha", "weights.safetensors", NULL, &w));
    assert_string_equal(w.layout_name, "nn.MultiheadAttention");
    assert_int_equal(w.cfg.arch, TS_ARCH_ATTENTION);
    assert_int_equal(w.cfg.d_model, 16);
    assert_int_equal(w.cfg.heads, 4); /* the fixture's flat __metadata__ key */
    assert_int_equal(w.source[TS_SETTING_HEADS], TS_SOURCE_META);
    assert_int_equal(w.source[TS_SETTING_NORM], TS_SOURCE_UNUSED);

    /* a decoder layer alone reads a memory run cannot be given: refused, with the reason */
    assert_int_equal(infer("dec_layer_post_relu", "weights.safetensors", NULL, &w), TS_ERR_UNSUPPORTED);
    assert_non_null(strstr(ts_last_error(), "nn.TransformerDecoderLayer's state_dict"));
}

static void flat_metadata_keys(void **state) {
    (void)state;
    ts_weights_info w;
    assert_ok(infer("enc_pre_gelu_norm", "weights.safetensors", NULL, &w));
    assert_int_equal(w.cfg.heads, 2);
    assert_int_equal(w.cfg.norm, TS_NORM_PRE);
    assert_int_equal(w.cfg.activation, TS_ACT_GELU);
    assert_int_equal(w.source[TS_SETTING_NORM], TS_SOURCE_META);
    assert_true(fabsf(w.cfg.eps - 1e-5f) < 1e-12f);
}

static void prefix_suggested_then_stripped(void **state) {
    (void)state;
    ts_weights_info w;
    assert_int_equal(infer("load_encoder", "prefixed.safetensors", NULL, &w), TS_ERR_ARG);
    assert_non_null(strstr(ts_last_error(), "add --load-prefix backbone."));
    assert_ok(infer("load_encoder", "prefixed.safetensors", "backbone.", &w));
    assert_string_equal(w.layout_name, "nn.TransformerEncoder");
    assert_int_equal(w.n_tensors, 28);
    assert_int_equal(w.n_mapped, 26);
    char name[256];
    assert_true(ts_weights_file_name(&w, "encoder.layers.0.linear1.weight", name, sizeof name));
    assert_string_equal(name, "backbone.layers.0.linear1.weight");
    assert_int_equal(infer("load_encoder", "weights.safetensors", "model.", &w), TS_ERR_ARG);
    assert_non_null(strstr(ts_last_error(), "no tensor name in"));
}

/* The model the inferred config builds loads the file; extras only when asked. */
static void load_with_extras_and_missing(void **state) {
    (void)state;
    ts_safetensors f;
    assert_ok(ts_safetensors_open(&f, ref_fixture("load_encoder", "prefixed.safetensors")));
    ts_weights_info w;
    assert_ok(ts_weights_infer(&f, "backbone.", &w));
    ts_model_config c = w.cfg;
    c.heads = 4, c.batch = 1, c.seq = 3;
    ts_model m;
    assert_ok(ts_model_init(&m, &c));
    ts_load_options o = {.info = &w, .into = NULL, .ignore_extra = false};
    ts_load_report r;
    assert_int_equal(ts_model_load_weights(&m, &f, &o, &r), TS_ERR_ARG);
    assert_non_null(strstr(ts_last_error(), "2 tensors have no place in this model (read as nn.TransformerEncoder's "
                                            "state_dict): classifier.weight, classifier.bias; --ignore-extra"));
    o.ignore_extra = true;
    assert_ok(ts_model_load_weights(&m, &f, &o, &r));
    assert_int_equal(r.loaded, 26);
    assert_int_equal(r.skipped, 2);
    assert_string_equal(r.skipped_names, "classifier.weight, classifier.bias");
    ts_model_free(&m);

    /* a model with a layer more than the file: the missing tensor under the file's name */
    c.layers = 3;
    assert_ok(ts_model_init(&m, &c));
    assert_int_equal(ts_model_load_weights(&m, &f, &o, &r), TS_ERR_ARG);
    assert_non_null(strstr(ts_last_error(), "has no tensor backbone.layers.2.self_attn.in_proj_weight"));
    ts_model_free(&m);
    ts_safetensors_close(&f);
}

/* Half precision is converted on load: F16 and BF16 give the rounded values, F64 the float32 ones. */
static void half_precision_converted(void **state) {
    (void)state;
    const char *files[] = {"weights_f16.safetensors", "weights_bf16.safetensors", "weights_f64.safetensors"};
    ts_weights_info w;
    assert_ok(infer("load_encoder", "weights.safetensors", NULL, &w));
    ts_model_config c = w.cfg;
    c.heads = 4, c.batch = 1, c.seq = 3;
    ts_model ref, m;
    assert_ok(ts_model_init(&ref, &c));
    ts_safetensors f;
    assert_ok(ts_safetensors_open(&f, ref_fixture("load_encoder", "weights.safetensors")));
    ts_load_options o = {.info = &w};
    assert_ok(ts_model_load_weights(&ref, &f, &o, NULL));
    ts_safetensors_close(&f);
    const double tol[] = {1e-3, 1e-2, 0};
    for (int k = 0; k < 3; k++) {
        assert_ok(ts_model_init(&m, &c));
        assert_ok(ts_safetensors_open(&f, ref_fixture("load_encoder", files[k])));
        assert_ok(ts_model_load_weights(&m, &f, &o, NULL));
        double worst = 0; /* parameter by parameter: the block's padding between them is never written */
        for (int i = 0; i < m.n_params; i++) {
            const ts_model_param_info *p = &m.params[i];
            worst = fmax(worst, check_max_rel_diff(m.block + p->offset, ref.block + p->offset, p->numel, NULL));
        }
        print_message("%-28s largest rel diff from the F32 file %.3g\n", files[k], worst);
        assert_true(worst <= tol[k]);
        if (k < 2) assert_true(worst > 0); /* really rounded: not silently the F32 file */
        ts_safetensors_close(&f);
        ts_model_free(&m);
    }
    ts_model_free(&ref);
}

/* A file of one zeroed nn.MultiheadAttention (d_model 1) and the metadata
 * pairs given: enough for the reader to reach the metadata. */
static void write_one_attention(const char *path, int n_meta, const char *const *meta) {
    float x[48] = {0};
    ts_tensor t[4];
    assert_ok(ts_tensor_view(&t[0], x, 2, (int64_t[]){3, 16}));
    assert_ok(ts_tensor_view(&t[1], x, 1, (int64_t[]){3}));
    assert_ok(ts_tensor_view(&t[2], x, 2, (int64_t[]){1, 1}));
    assert_ok(ts_tensor_view(&t[3], x, 1, (int64_t[]){1}));
    const char *names[] = {"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"};
    assert_ok(ts_safetensors_write(path, 4, names, t, n_meta, meta));
}

/* tscope's checkpoints say their config: a loaded one needs no flag. */
static void saved_checkpoints_carry_their_config(void **state) {
    (void)state;
    ts_model_config c;
    assert_ok(ts_model_config_preset(&c, "tiny"));
    c.vocab = 12;
    c.norm = TS_NORM_PRE;
    c.activation = TS_ACT_GELU;
    c.heads = 4;
    c.tie_embed = true; /* one token table for both stacks and the logits, as the base preset */
    c.ln_std_eps = true; /* the arithmetic it declares comes back too: dropped, it would be computed */
    c.mask_fill = -1e9f; /* the standard way with no word said */
    ts_model m;
    assert_ok(ts_model_init(&m, &c));
    char path[] = "/tmp/tscope_infer_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    const char *meta[] = {"task", "copy", "format", "not this"};
    assert_ok(ts_train_save(&m, path, 2, meta));
    ts_safetensors f;
    assert_ok(ts_safetensors_open(&f, path));
    assert_string_equal(ts_safetensors_meta(&f, "format"), "tscope");
    assert_string_equal(ts_safetensors_meta(&f, "task"), "copy");
    ts_weights_info w;
    assert_ok(ts_weights_infer(&f, NULL, &w));
    assert_int_equal(w.cfg.heads, 4);
    assert_int_equal(w.cfg.norm, TS_NORM_PRE);
    assert_int_equal(w.cfg.activation, TS_ACT_GELU);
    assert_int_equal(w.cfg.pe, TS_PE_SINUSOIDAL);
    assert_true(w.cfg.scale_embed);
    assert_int_equal(w.cfg.vocab, 12);
    assert_int_equal(w.cfg.input, TS_INPUT_TOKENS);
    assert_int_equal(w.cfg.head, TS_HEAD_LM);
    assert_true(w.cfg.tie_embed);
    assert_true(w.cfg.ln_std_eps);
    assert_true(w.cfg.mask_fill == -1e9f);
    for (int s = 0; s < TS_SETTING_COUNT; s++) assert_int_equal(w.source[s], TS_SOURCE_META);
    /* and it loads back into the model the file describes, value for value */
    ts_model back;
    ts_model_config bc = w.cfg;
    bc.batch = 1, bc.seq = 4, bc.tgt_seq = 4;
    assert_ok(ts_model_init(&back, &bc));
    ts_load_options o = {.info = &w};
    assert_ok(ts_model_load_weights(&back, &f, &o, NULL));
    assert_int_equal(back.n_params, m.n_params);
    for (int i = 0; i < m.n_params; i++)
        assert_memory_equal(back.block + back.params[i].offset, m.block + m.params[i].offset,
                            sizeof(float) * (size_t)m.params[i].numel);
    ts_model_free(&back);
    ts_safetensors_close(&f);
    ts_model_free(&m);

    /* a value that does not parse is an error naming the key, never a guess */
    const char *bad[] = {"heads", "two"};
    write_one_attention(path, 1, bad);
    assert_ok(ts_safetensors_open(&f, path));
    assert_int_equal(ts_weights_infer(&f, NULL, &w), TS_ERR_FORMAT);
    assert_non_null(strstr(ts_last_error(), "__metadata__ heads is 'two', not a number of heads"));
    ts_safetensors_close(&f);
    unlink(path);
}

/* A checkpoint's arithmetic quirk that does not parse is refused, naming
 * the key: never dropped for the standard arithmetic. */
static void bad_quirks_in_a_checkpoint_are_refused(void **state) {
    (void)state;
    char path[] = "/tmp/tscope_infer_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    ts_safetensors f;
    ts_weights_info w;
    const char *bad[] = {"format", "tscope", "config", "{\"mask_fill\": 3}"};
    write_one_attention(path, 2, bad);
    assert_ok(ts_safetensors_open(&f, path));
    assert_int_equal(ts_weights_infer(&f, NULL, &w), TS_ERR_FORMAT);
    assert_non_null(strstr(ts_last_error(), "\"mask_fill\" is 3, not a negative number"));
    ts_safetensors_close(&f);
    unlink(path);
}

static void padding_masks_as_bools_or_lengths(void **state) {
    (void)state;
    uint8_t *a, *b;
    assert_ok(ts_model_read_pad_mask(ref_fixture("load_encoder", "src_key_padding_mask.npy"), "--m", 2, 6, &a));
    assert_ok(ts_model_read_pad_mask(ref_fixture("load_encoder", "src_lengths.npy"), "--m", 2, 6, &b));
    const uint8_t want[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1};
    assert_memory_equal(a, want, 12);
    assert_memory_equal(b, want, 12);
    free(a);
    free(b);
    assert_int_equal(ts_model_read_pad_mask(ref_fixture("load_encoder", "src_key_padding_mask.npy"), "--m", 2, 5, &a),
                     TS_ERR_SHAPE);
    assert_non_null(strstr(ts_last_error(), "has shape [2, 6]; the model reads (B, S) = (2, 5)"));
    assert_int_equal(ts_model_read_pad_mask(ref_fixture("load_encoder", "src_lengths.npy"), "--m", 2, 5, &a),
                     TS_ERR_ARG);
    assert_non_null(strstr(ts_last_error(), "length 6 of sequence 0 is not a whole number in 0..5"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bare_encoder_sizes_and_what_is_missing),
        cmocka_unit_test(bare_transformer_and_lone_attention),
        cmocka_unit_test(flat_metadata_keys),
        cmocka_unit_test(prefix_suggested_then_stripped),
        cmocka_unit_test(load_with_extras_and_missing),
        cmocka_unit_test(half_precision_converted),
        cmocka_unit_test(saved_checkpoints_carry_their_config),
        cmocka_unit_test(bad_quirks_in_a_checkpoint_are_refused),
        cmocka_unit_test(padding_masks_as_bools_or_lengths),
    };
    return cmocka_run_group_tests_name("infer", tests, NULL, NULL);
}
