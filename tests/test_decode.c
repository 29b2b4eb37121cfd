/* Decoding with a key/value cache (model_decode.c) against the full forward
 * pass: for a GPT (decoder, GELU's tanh form, tied head), a causal encoder
 * with the embedding LayerNorm (the first language models' layout) and a
 * post-LN ReLU stack, the logits of every position, one token at a time, equal
 * ts_model_forward's row for that position. And what the cache cannot do is
 * refused: past the positions, a model with a decoder, sinusoidal positions.
 * Also greedy decoding of an encoder-decoder, one forward pass a position. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tscope/kernels.h"
#include "tscope/model.h"
#include "tscope/train.h"

#define S 12

static ts_model_config gpt(void) {
    ts_model_config c = {.arch = TS_ARCH_DECODER, .d_model = 16, .heads = 4, .ffn = 40, .layers = 3, .vocab = 23,
                         .seq = S, .batch = 1, .max_pos = S, .eps = 1e-5f, .embed_eps = 1e-5f, .norm = TS_NORM_PRE,
                         .pe = TS_PE_LEARNED, .final_norm = true, .activation = TS_ACT_GELU_TANH,
                         .head = TS_HEAD_LM, .input = TS_INPUT_TOKENS, .causal = true, .tie_embed = true, .seed = 3};
    return c;
}

/* Every position's logits, step by step, against one forward pass. */
static void check_against_forward(const ts_model_config *cfg) {
    ts_model m;
    assert_ok(ts_model_init(&m, cfg));
    int32_t ids[S];
    for (int i = 0; i < S; i++) ids[i] = (i * 7 + 2) % cfg->vocab;
    ts_model_input in = {.src_ids = ids};
    ts_tensor full;
    assert_ok(ts_model_forward(&m, &in, NULL, &full));
    int V = cfg->vocab;
    float *want = malloc(sizeof(float) * S * V);
    memcpy(want, full.data, sizeof(float) * S * V);
    ts_kv_cache kv;
    assert_ok(ts_kv_cache_init(&kv, &m));
    for (int t = 0; t < S; t++) {
        const float *got;
        assert_ok(ts_model_decode_step(&m, &kv, ids[t], &got));
        assert_floats_close(got, want + (size_t)t * V, V, 1e-4);
    }
    assert_int_equal(kv.len, S);
    /* the positions are used up: one more step is refused */
    const float *got;
    assert_int_equal(ts_model_decode_step(&m, &kv, 0, &got), TS_ERR_ARG);
    ts_kv_cache_free(&kv);
    /* a range of new positions at once, over what is cached: 5, then 4, then 3 */
    assert_ok(ts_kv_cache_init(&kv, &m));
    for (int t = 0, n = 5; t < S; t += n, n--) {
        assert_ok(ts_model_decode(&m, &kv, ids + t, n, NULL, &got));
        assert_floats_close(got, want + (size_t)t * V, (size_t)n * V, 1e-4);
    }
    assert_int_equal(kv.len, S);
    ts_kv_cache_free(&kv);
    free(want);
    ts_model_free(&m);
}

/* A hook sees a cached pass's steps as in a full pass: the new positions'
 * queries against every cached key. */
typedef struct seen {
    int steps;
    int64_t weights_shape[4];
} seen;

static ts_status note(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag) {
    (void)op, (void)tag;
    seen *s = ctx;
    s->steps++;
    if (strcmp(name, "decoder.layers.2.self_attn.weights") == 0)
        for (int d = 0; d < 4; d++) s->weights_shape[d] = t->shape[d];
    return TS_OK;
}

static void a_hook_sees_the_cached_steps(void **state) {
    (void)state;
    ts_model_config c = gpt();
    ts_model m;
    assert_ok(ts_model_init(&m, &c));
    int32_t ids[S] = {1, 2, 3, 4, 5, 6};
    ts_kv_cache kv;
    assert_ok(ts_kv_cache_init(&kv, &m));
    const float *got;
    assert_ok(ts_model_decode(&m, &kv, ids, 4, NULL, &got));
    seen s = {0};
    ts_hook hook = {.fn = note, .ctx = &s};
    assert_ok(ts_model_decode(&m, &kv, ids + 4, 2, &hook, &got));
    assert_true(s.steps > 50);
    assert_int_equal(s.weights_shape[0], 1);
    assert_int_equal(s.weights_shape[1], c.heads);
    assert_int_equal(s.weights_shape[2], 2); /* the new positions */
    assert_int_equal(s.weights_shape[3], 6); /* every key so far */
    ts_kv_cache_free(&kv);
    ts_model_free(&m);
}

static void gpt_matches_the_forward_pass(void **state) {
    (void)state;
    ts_model_config c = gpt();
    check_against_forward(&c);
}

static void causal_encoder_with_embedding_norm(void **state) {
    (void)state;
    ts_model_config c = gpt();
    c.arch = TS_ARCH_ENCODER; /* what train --task lm made before --arch decoder */
    c.tie_embed = false;
    c.activation = TS_ACT_GELU;
    check_against_forward(&c);
}

static void post_ln_relu(void **state) {
    (void)state;
    ts_model_config c = gpt();
    c.norm = TS_NORM_POST;
    c.final_norm = false;
    c.activation = TS_ACT_RELU;
    check_against_forward(&c);
}

/* Today's blocks: RMSNorm, RoPE (at the cached positions' own angles),
 * shared key/value heads in the cache, SwiGLU; then Gemma's and GPT-NeoX's. */
static void llama_blocks(void **state) {
    (void)state;
    ts_model_config c = gpt();
    c.pe = TS_PE_ROPE, c.norm_kind = TS_NORMK_RMS, c.split_qkv = true, c.kv_heads = 1, c.gated_ffn = true;
    c.activation = TS_ACT_SILU, c.no_qkv_bias = c.no_out_bias = c.no_ffn_bias = true, c.tie_embed = false;
    c.rope_theta = 500000;
    check_against_forward(&c);
    c.rope_style = TS_ROPE_INTERLEAVED, c.norm_kind = TS_NORMK_RMS_GEMMA, c.head_dim = 6, c.scale_embed = true;
    c.activation = TS_ACT_GELU_TANH, c.tie_embed = true;
    check_against_forward(&c);
    c = gpt();
    c.pe = TS_PE_ROPE, c.rotary_pct = 0.5f, c.parallel_residual = true, c.activation = TS_ACT_GELU;
    check_against_forward(&c);
}

static void what_cannot_be_cached_is_refused(void **state) {
    (void)state;
    ts_model_config c = gpt();
    c.pe = TS_PE_SINUSOIDAL;
    const char *why = NULL;
    assert_false(ts_model_can_cache(&c, &why));
    assert_non_null(strstr(why, "sinusoidal"));
    ts_model_config e;
    assert_ok(ts_model_config_preset(&e, "tiny"));
    assert_false(ts_model_can_cache(&e, &why));
    assert_non_null(strstr(why, "causal stack"));
    ts_model m;
    c = gpt();
    assert_ok(ts_model_init(&m, &c));
    ts_kv_cache kv;
    assert_ok(ts_kv_cache_init(&kv, &m));
    const float *got;
    assert_int_equal(ts_model_decode_step(&m, &kv, c.vocab, &got), TS_ERR_ARG); /* an id outside the vocabulary */
    ts_kv_cache_free(&kv);
    ts_model_free(&m);
}

/* Greedy decoding of an encoder-decoder (ts_task_greedy): one forward pass
 * over what it wrote gives each position the argmax it wrote (the next
 * position's input), which is why `run --greedy` traces that one pass; a
 * sequence that writes <eos> stops there and the rest is padding. Small
 * vocabularies make untrained models write <eos> soon; the seeds are
 * searched until one does, so the stopping rule is exercised. */
static void greedy_decoding_is_one_causal_pass(void **state) {
    (void)state;
    enum { B = 4, SRC = 7 };
    bool saw_eos = false;
    for (uint64_t seed = 0; seed < 20 && !saw_eos; seed++) {
        ts_model_config c;
        assert_ok(ts_model_config_preset(&c, "tiny"));
        c.vocab = 6, c.batch = B, c.seq = SRC, c.tgt_seq = SRC, c.seed = seed;
        ts_model m;
        assert_ok(ts_model_init(&m, &c));
        int32_t src[B * SRC], tgt[B * SRC], out[B * SRC];
        uint8_t pad[B * SRC];
        for (int i = 0; i < B * SRC; i++) src[i] = 1 + (int32_t)((i * 5 + seed) % 5);
        ts_model_input in = {.src_ids = src};
        bool padded;
        assert_ok(ts_task_greedy(&m, &in, tgt, out, pad, &padded));
        ts_tensor logits;
        assert_ok(ts_model_forward(&m, &in, NULL, &logits)); /* in now reads tgt, with pad */
        for (int b = 0; b < B; b++) {
            assert_int_equal(tgt[b * SRC], 1);
            for (int t = 0; t < SRC; t++) {
                if (pad[b * SRC + t]) {
                    assert_int_equal(tgt[b * SRC + t], 0);
                    saw_eos = true;
                    continue;
                }
                const float *row = logits.data + ((int64_t)b * SRC + t) * c.vocab;
                int best = 0;
                for (int v = 1; v < c.vocab; v++)
                    if (row[v] > row[best]) best = v;
                assert_int_equal(best, out[b * SRC + t]);
                if (t + 1 < SRC && !pad[b * SRC + t + 1]) assert_int_equal(best, tgt[b * SRC + t + 1]);
                if (t + 1 < SRC && pad[b * SRC + t + 1]) assert_int_equal(best, 2); /* <eos> came before */
            }
        }
        ts_model_free(&m);
    }
    assert_true(saw_eos);
}

static int setup(void **state) {
    (void)state;
    return ts_kernels_init() == TS_OK ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gpt_matches_the_forward_pass),
        cmocka_unit_test(a_hook_sees_the_cached_steps),
        cmocka_unit_test(causal_encoder_with_embedding_norm),
        cmocka_unit_test(post_ln_relu),
        cmocka_unit_test(llama_blocks),
        cmocka_unit_test(what_cannot_be_cached_is_refused),
        cmocka_unit_test(greedy_decoding_is_one_causal_pass),
    };
    return cmocka_run_group_tests_name("decode", tests, setup, NULL);
}
