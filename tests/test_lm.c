/* Language modelling: the pieces of tscope train --task lm and generate.
 *
 * - Tokenizers: characters (UTF-8 aware, a missing character refused by
 *   name) and frequent words round-trip a text; their JSON brings them back.
 * - A model config survives JSON for every preset.
 * - Eigenvalues of matrices whose eigenvalues are known (companion matrices,
 *   rotations), the copying score's tool.
 * - Sampling: temperature 0 is the argmax, top-k keeps k, and draws follow
 *   the softmax (10000 draws within 3 standard deviations per token).
 * - The cosine schedule's ends and middle.
 * - The data source: the split covers the corpus, batches are a function of
 *   the step, repeated windows repeat.
 * - The loop: a small model on a short periodic text lowers its held-out
 *   loss by half in 60 steps; the stop flag ends a run after one step.
 * - The in-context measures: an untrained model scores near chance, and
 *   the shipped 2-layer model has an induction head (INDUCTION_MIN).
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tscope/experiment.h"
#include "tscope/io.h"
#include "tscope/kernels.h"
#include "tscope/model.h"
#include "tscope/tokenizer.h"
#include "tscope/train.h"

/* ---- tokenizers ---------------------------------------------------------- */

static void char_tokenizer_round_trips(void **state) {
    (void)state;
    const char *text = "And God said, Let there be light: caf\xc3\xa9 \xe2\x86\x92 light.\n";
    ts_lmtok t;
    assert_ok(ts_lmtok_build(&t, TS_LMTOK_CHAR, text, strlen(text), 0));
    /* distinct characters: ASCII ones in order, then é and → */
    assert_string_equal(t.piece[0], "\n");
    assert_string_equal(t.piece[t.count - 2], "\xc3\xa9");
    assert_string_equal(t.piece[t.count - 1], "\xe2\x86\x92");
    ts_bpe_ids ids = {0};
    assert_ok(ts_lmtok_encode(&t, text, strlen(text), &ids));
    assert_int_equal(ids.count, 48); /* characters, not bytes (51) */
    assert_int_equal(ts_lmtok_chars(&t, ids.ids, ids.count), 48);
    char *back;
    size_t len;
    assert_ok(ts_lmtok_decode(&t, ids.ids, ids.count, &back, &len));
    assert_string_equal(back, text);
    free(back);
    /* a character the vocabulary lacks is named, not replaced */
    ts_bpe_ids more = {0};
    assert_int_equal(ts_lmtok_encode(&t, "Zion", 4, &more), TS_ERR_ARG);
    assert_non_null(strstr(ts_last_error(), "'Z'"));
    ts_bpe_ids_free(&more);
    /* JSON and back: the same ids */
    char *json = ts_lmtok_to_json(&t);
    ts_lmtok u;
    assert_ok(ts_lmtok_from_json(&u, json));
    assert_int_equal(u.count, t.count);
    ts_bpe_ids again = {0};
    assert_ok(ts_lmtok_encode(&u, text, strlen(text), &again));
    assert_memory_equal(again.ids, ids.ids, sizeof(int32_t) * ids.count);
    char label[32];
    ts_lmtok_label(&u, ids.ids[3], label, sizeof label);
    assert_string_equal(label, "\xe2\x90\xa3"); /* the space after "And", shown as ␣ */
    free(json);
    ts_bpe_ids_free(&again);
    ts_bpe_ids_free(&ids);
    ts_lmtok_free(&u);
    ts_lmtok_free(&t);
    /* not UTF-8: refused with the offset */
    assert_int_equal(ts_lmtok_build(&t, TS_LMTOK_CHAR, "ab\xff", 3, 0), TS_ERR_FORMAT);
    assert_non_null(strstr(ts_last_error(), "offset 2"));
}

static void word_tokenizer_round_trips(void **state) {
    (void)state;
    const char *text = "And God said, Let there be light: and there was light.\nAnd God saw the light.";
    ts_lmtok t;
    assert_ok(ts_lmtok_build(&t, TS_LMTOK_WORD, text, strlen(text), 1000));
    assert_string_equal(t.piece[0], "<unk>");
    ts_bpe_ids ids = {0};
    assert_ok(ts_lmtok_encode(&t, text, strlen(text), &ids));
    char *back;
    size_t len;
    assert_ok(ts_lmtok_decode(&t, ids.ids, ids.count, &back, &len));
    assert_string_equal(back, text);
    free(back);
    /* " light" (3 times) is among the first pieces; " said" once */
    int32_t light = -1;
    for (int32_t i = 0; i < t.count; i++)
        if (strcmp(t.piece[i], " light") == 0) light = i;
    assert_true(light >= 1 && light <= 3);
    ts_bpe_ids_free(&ids);
    ts_lmtok_free(&t);
    /* a vocabulary of 4: <unk> and the 3 most frequent; the rest is <unk> */
    assert_ok(ts_lmtok_build(&t, TS_LMTOK_WORD, text, strlen(text), 4));
    assert_int_equal(t.count, 4);
    assert_ok(ts_lmtok_encode(&t, " Zion", 5, &ids));
    assert_int_equal(ids.count, 1);
    assert_int_equal(ids.ids[0], 0);
    ts_bpe_ids_free(&ids);
    ts_lmtok_free(&t);
}

/* ---- config JSON ----------------------------------------------------------- */

static void config_survives_json(void **state) {
    (void)state;
    const char *presets[] = {"tiny", "seed000", "seed001", "seed004", "copy", "base", "lm", "gpt2"};
    for (size_t k = 0; k < sizeof presets / sizeof presets[0]; k++) {
        ts_model_config a, b;
        assert_ok(ts_model_config_preset(&a, presets[k]));
        a.text = NULL;
        if (a.vocab == 0) a.vocab = 9; /* tiny takes its text's */
        a.variants = TS_VARIANT_NO_SCALE;
        char *json = ts_model_config_to_json(&a);
        assert_non_null(json);
        assert_ok(ts_model_config_from_json(json, &b));
        free(json);
        assert_memory_equal(&a, &b, sizeof a);
    }
    /* BERT's parts (token types, the masked-LM head) on seed 004's encoder, as a bert folder builds it */
    ts_model_config a, b;
    assert_ok(ts_model_config_preset(&a, "seed004"));
    a.text = NULL;
    a.norm = TS_NORM_POST, a.activation = TS_ACT_GELU, a.head = TS_HEAD_LM, a.tie_embed = true;
    a.type_vocab = 2, a.mlm_head = true;
    char *bert = ts_model_config_to_json(&a);
    assert_non_null(bert);
    assert_non_null(strstr(bert, "\"type_vocab\":2,\"mlm_head\":true"));
    assert_ok(ts_model_config_from_json(bert, &b));
    free(bert);
    assert_memory_equal(&a, &b, sizeof a);
    /* ... and nowhere else: a GPT with token types, a classifier with the masked-LM transform */
    assert_ok(ts_model_config_preset(&b, "lm"));
    b.type_vocab = 2;
    assert_int_equal(ts_model_config_check(&b), TS_ERR_ARG);
    assert_non_null(strstr(ts_last_error(), "built for an encoder over tokens; this model is decoder over tokens"));
    a.head = TS_HEAD_CLS, a.tie_embed = false;
    assert_int_equal(ts_model_config_check(&a), TS_ERR_ARG);
    assert_non_null(strstr(ts_last_error(), "this model's head is cls"));
    /* a word this tscope does not know is refused, naming the field */
    ts_model_config c;
    assert_ok(ts_model_config_preset(&c, "lm"));
    char *json = ts_model_config_to_json(&c), *at = strstr(json, "\"arch\":\"decoder\"");
    assert_non_null(at);
    char edited[2048];
    snprintf(edited, sizeof edited, "%.*s\"arch\":\"rnn\"%s", (int)(at - json), json, at + strlen("\"arch\":\"decoder\""));
    free(json);
    assert_int_equal(ts_model_config_from_json(edited, &c), TS_ERR_FORMAT);
    assert_non_null(strstr(ts_last_error(), "\"arch\" is \"rnn\""));
    assert_int_equal(ts_model_config_from_json("{\"preset\": \"lm\"}", &c), TS_ERR_FORMAT);
    assert_non_null(strstr(ts_last_error(), "no \"arch\""));
}

/* ---- eigenvalues ------------------------------------------------------------- */

static int by_re_im(const void *a, const void *b) {
    const double *x = a, *y = b;
    if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
    return (x[1] > y[1]) - (x[1] < y[1]);
}

static void eigenvalues_are_found(void **state) {
    (void)state;
    /* companion matrix of (x - 1)(x - 2)(x - 3)(x + 4) = x^4 - 2x^3 - 13x^2 + 38x - 24 */
    double c[16] = {2, 13, -38, 24, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0}, re[8], im[8], pairs[8][2];
    assert_ok(ts_eigvals(c, 4, re, im));
    for (int i = 0; i < 4; i++) pairs[i][0] = re[i], pairs[i][1] = im[i];
    qsort(pairs, 4, sizeof pairs[0], by_re_im);
    const double want[4] = {-4, 1, 2, 3};
    for (int i = 0; i < 4; i++) {
        assert_true(fabs(pairs[i][0] - want[i]) < 1e-9);
        assert_true(fabs(pairs[i][1]) < 1e-9);
    }
    /* a rotation by 90 degrees scaled by 2 beside a 5: 2i, -2i, 5 */
    double r[9] = {0, -2, 0, 2, 0, 0, 0, 0, 5};
    assert_ok(ts_eigvals(r, 3, re, im));
    for (int i = 0; i < 3; i++) pairs[i][0] = re[i], pairs[i][1] = im[i];
    qsort(pairs, 3, sizeof pairs[0], by_re_im);
    assert_true(fabs(pairs[0][0]) < 1e-12 && fabs(pairs[0][1] + 2) < 1e-12);
    assert_true(fabs(pairs[1][0]) < 1e-12 && fabs(pairs[1][1] - 2) < 1e-12);
    assert_true(fabs(pairs[2][0] - 5) < 1e-12);
    /* a 32 x 32 matrix: the eigenvalues add up to the trace, multiply to the determinant's sign... the trace */
    double *m = malloc(sizeof(double) * 32 * 32), tr = 0, sum = 0, e[32], f[32];
    for (int i = 0; i < 32 * 32; i++) m[i] = ts_u01(42, (uint64_t)i) - 0.5;
    for (int i = 0; i < 32; i++) tr += m[i * 33];
    assert_ok(ts_eigvals(m, 32, e, f));
    for (int i = 0; i < 32; i++) sum += e[i];
    assert_true(fabs(sum - tr) < 1e-9);
    free(m);
    double bad[1] = {NAN};
    assert_int_equal(ts_eigvals(bad, 1, re, im), TS_ERR_ARG);
}

/* ---- sampling and the schedule --------------------------------------------------- */

static void sampling_follows_the_softmax(void **state) {
    (void)state;
    float logits[5] = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f}, p[5];
    assert_int_equal(ts_model_sample(logits, 5, 0.0f, 0, 0.5, p), 1); /* argmax: the first of the two 3s */
    assert_true(p[1] == 1.0f && p[3] == 0.0f);
    /* top-k 1 keeps both tied logits; top-k 3 drops -1 and 1 */
    ts_model_sample(logits, 5, 1.0f, 3, 0.5, p);
    assert_true(p[0] == 0.0f && p[4] == 0.0f);
    assert_true(fabs(p[1] + p[2] + p[3] - 1.0) < 1e-6);
    /* draws at temperature 2 follow softmax(logits / 2) */
    double z = 0, want[5];
    for (int v = 0; v < 5; v++) z += exp(logits[v] / 2.0);
    for (int v = 0; v < 5; v++) want[v] = exp(logits[v] / 2.0) / z;
    int count[5] = {0}, N = 10000;
    for (int k = 0; k < N; k++) count[ts_model_sample(logits, 5, 2.0f, 0, ts_u01(7, (uint64_t)k), NULL)]++;
    for (int v = 0; v < 5; v++) {
        double sd = sqrt(N * want[v] * (1 - want[v]));
        if (fabs(count[v] - N * want[v]) > 3 * sd)
            fail_msg("token %d drawn %d times, the softmax says %.0f (sd %.0f)", v, count[v], N * want[v], sd);
    }
}

/* The argmax as the one-sweep loop it replaced defines it (the first index
 * whose logit is greater than every one before), on every length through
 * the 8 lanes and the tail, with the largest at each place, ties, NaN,
 * infinities and signed zeros. */
static int32_t argmax_reference(const float *x, int V) {
    int32_t arg = 0;
    for (int v = 1; v < V; v++)
        if (x[v] > x[arg]) arg = v;
    return arg;
}

static void argmax_matches_its_definition(void **state) {
    (void)state;
    enum { N = 40 };
    float x[N];
    for (int V = 1; V <= N; V++)
        for (int at = 0; at < V; at++) {
            for (int v = 0; v < V; v++) x[v] = (float)((v * 7) % 5) - 2.0f; /* values in [-2, 2], ties */
            x[at] = 10.0f;
            assert_int_equal(ts_model_argmax(x, V), argmax_reference(x, V));
            x[V - 1] = 10.0f; /* a tie with the last: the first wins */
            assert_int_equal(ts_model_argmax(x, V), argmax_reference(x, V));
            x[at] = NAN; /* NaN skipped, or at 0: 0 */
            assert_int_equal(ts_model_argmax(x, V), argmax_reference(x, V));
            x[at] = INFINITY;
            assert_int_equal(ts_model_argmax(x, V), argmax_reference(x, V));
            for (int v = 0; v < V; v++) x[v] = v == at ? NAN : -INFINITY; /* all -inf, one NaN */
            assert_int_equal(ts_model_argmax(x, V), argmax_reference(x, V));
            for (int v = 0; v < V; v++) x[v] = NAN;
            assert_int_equal(ts_model_argmax(x, V), 0);
            for (int v = 0; v < V; v++) x[v] = v % 3 ? 0.0f : -0.0f; /* -0 == +0: the first zero */
            x[at] = -1.0f;
            assert_int_equal(ts_model_argmax(x, V), argmax_reference(x, V));
        }
}

/* The probs step written over the logits hands the hook the same values as
 * the one with its own buffer: rows with NaN, +-inf and ties, at temperature
 * 1, 0.5 and 0 (greedy). */
typedef struct probs_capture {
    float *values;
    int64_t n;
    int calls;
} probs_capture;

static ts_status capture_probs(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag) {
    (void)op, (void)tag;
    probs_capture *c = ctx;
    assert_string_equal(name, "probs");
    assert_int_equal(ts_tensor_numel(t), c->n);
    memcpy(c->values, t->data, sizeof(float) * (size_t)c->n);
    c->calls++;
    return TS_OK;
}

static void probs_in_place_match_the_copy(void **state) {
    (void)state;
    enum { B = 2, S = 3, V = 37 };
    const int64_t n = (int64_t)B * S * V;
    float logits[B * S * V], work[B * S * V], want[B * S * V], got[B * S * V];
    for (int64_t i = 0; i < n; i++) logits[i] = (float)((i * 13) % 29) * 0.25f - 3.0f;
    logits[1 * V + 5] = NAN;               /* a NaN row */
    logits[2 * V + 0] = -INFINITY;         /* a token never drawn */
    logits[3 * V + 36] = INFINITY;         /* +inf: no distribution */
    logits[4 * V + 7] = logits[4 * V + 9] = 50.0f; /* a tie on top */
    const float temps[] = {1.0f, 0.5f, 0.0f};
    for (int k = 0; k < 3; k++) {
        int64_t shape[3] = {B, S, V};
        ts_tensor t;
        probs_capture c = {want, n, 0};
        ts_hook hook = {.fn = capture_probs, .ctx = &c};
        ts_tensor_view(&t, logits, 3, shape);
        assert_int_equal(ts_model_probs_step(&hook, &t, temps[k]), TS_OK);
        memcpy(work, logits, sizeof work);
        c.values = got;
        ts_tensor_view(&t, work, 3, shape);
        assert_int_equal(ts_model_probs_step_in_place(&hook, &t, temps[k]), TS_OK);
        assert_int_equal(c.calls, 2);
        assert_memory_equal(want, got, sizeof want); /* NaN too: the same bits */
        assert_memory_equal(work, got, sizeof got);  /* and they are where the logits were */
    }
}

/* A NaN logit makes the distribution NaN (PyTorch's softmax does the same),
 * never a distribution that drops it: the `probs` step must show it. */
static void a_nan_logit_is_not_dropped(void **state) {
    (void)state;
    float logits[4] = {1.0f, NAN, 2.0f, 0.5f}, p[4];
    double log_z = ts_softmax_vocab(p, logits, 4, 1.0, -INFINITY);
    assert_true(isnan(log_z));
    for (int v = 0; v < 4; v++) assert_true(isnan(p[v]));
    ts_model_sample(logits, 4, 1.0f, 0, 0.5, p);
    for (int v = 0; v < 4; v++) assert_true(isnan(p[v]));
    assert_true(isnan(ts_logsumexp(logits, 4)));
    /* finite logits are untouched by the rule */
    float fine[2] = {1000.0f, 999.0f};
    ts_softmax_vocab(p, fine, 2, 1.0, -INFINITY);
    assert_true(fabsf(p[0] - 0.7310586f) < 1e-6f);
}

static void cosine_schedule(void **state) {
    (void)state;
    assert_true(fabsf(ts_optim_lr_cosine(1e-3f, 1e-4f, 10, 1, 110) - 1e-4f) < 1e-9f);   /* warm-up: 1/10 */
    assert_true(fabsf(ts_optim_lr_cosine(1e-3f, 1e-4f, 10, 10, 110) - 1e-3f) < 1e-9f);  /* the peak */
    assert_true(fabsf(ts_optim_lr_cosine(1e-3f, 1e-4f, 10, 60, 110) - 5.5e-4f) < 1e-8f); /* half way: the middle */
    assert_true(fabsf(ts_optim_lr_cosine(1e-3f, 1e-4f, 10, 110, 110) - 1e-4f) < 1e-9f); /* the floor */
}

/* ---- the data source and the loop ---------------------------------------------------- */

/* A text of period 7 over 5 ids, with a little noise: easy to predict. */
static int32_t *periodic_text(int64_t n) {
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n);
    const int32_t pattern[7] = {0, 1, 2, 3, 1, 4, 2};
    for (int64_t i = 0; i < n; i++) ids[i] = ts_u01(3, (uint64_t)i) < 0.05 ? 4 : pattern[i % 7];
    return ids;
}

static void data_source_split_and_batches(void **state) {
    (void)state;
    int64_t n = 20000;
    int32_t *ids = periodic_text(n);
    ts_lm_data_opts o;
    ts_lm_data_opts_default(&o);
    o.batch = 4, o.ctx = 16, o.vocab = 5, o.heldout = 10, o.piece = 500, o.repeat_frac = 0.5f;
    ts_lm_data d;
    assert_ok(ts_lm_data_init(&d, ids, n, &o));
    assert_int_equal(d.n_train + d.n_held, n);
    assert_int_equal(d.n_held, 2 * 500); /* pieces 10 and 30 of 40 */
    assert_int_equal(d.n_windows, 12);   /* whole batches */
    ts_train_data src;
    ts_lm_data_source(&d, &src);
    ts_model_input in;
    const int32_t *labels;
    int32_t first[64];
    assert_ok(src.batch(src.ctx, 5, &in, &labels));
    memcpy(first, in.src_ids, sizeof first);
    for (int i = 0; i < 4 * 15; i++) assert_int_equal(in.src_ids[(i / 15) * 16 + i % 15 + 1], labels[(i / 15) * 16 + i % 15]);
    assert_ok(src.batch(src.ctx, 6, &in, &labels));
    assert_ok(src.batch(src.ctx, 5, &in, &labels));
    assert_memory_equal(first, in.src_ids, sizeof first); /* step 5 again: the same batch */
    /* every window is text from the training stream (repeat_frac 0.5: or a repeated sequence) */
    int repeated = 0;
    for (int64_t step = 1; step <= 20; step++) {
        assert_ok(src.batch(src.ctx, step, &in, &labels));
        for (int b = 0; b < 4; b++) {
            const int32_t *x = in.src_ids + b * 16;
            bool text = false;
            for (int64_t at = 0; at + 16 <= d.n_train && !text; at++) text = memcmp(d.train + at, x, 16 * 4) == 0;
            if (text) continue;
            int period = 0; /* a random sequence of period 2..8 written again and again */
            for (int p = 2; p <= 8 && !period; p++) {
                bool periodic = true;
                for (int i = p; i < 16; i++) periodic &= x[i] == x[i - p];
                if (periodic) period = p;
            }
            if (!period) fail_msg("step %lld window %d is neither text nor a repeated sequence", (long long)step, b);
            repeated++;
        }
    }
    print_message("%d of 80 windows were repeated random sequences\n", repeated);
    assert_true(repeated >= 25 && repeated <= 55);
    ts_lm_data_free(&d);
    free(ids);
}

static ts_model_config lm_config(int vocab) {
    ts_model_config c;
    ts_model_config_preset(&c, "lm");
    c.d_model = 32, c.heads = 2, c.ffn = 64, c.layers = 2, c.vocab = vocab, c.seq = 16, c.max_pos = 16, c.batch = 8;
    return c;
}

static void loop_lowers_the_loss(void **state) {
    (void)state;
    int64_t n = 20000;
    int32_t *ids = periodic_text(n);
    ts_model_config c = lm_config(5);
    ts_lm_data_opts o;
    ts_lm_data_opts_default(&o);
    o.batch = c.batch, o.ctx = c.seq, o.vocab = 5, o.heldout = 16, o.piece = 500;
    ts_lm_data d;
    assert_ok(ts_lm_data_init(&d, ids, n, &o));
    ts_model m;
    ts_train tr;
    ts_optim opt;
    ts_optim_config oc;
    ts_optim_config_default(&oc, TS_OPTIM_ADAMW);
    assert_ok(ts_model_init(&m, &c));
    assert_ok(ts_train_init(&tr, &m));
    assert_ok(ts_optim_init(&opt, &oc, m.n_floats));
    double before;
    assert_ok(ts_lm_data_heldout(&d, &m, &before));
    ts_train_data src;
    ts_lm_data_source(&d, &src);
    ts_train_loop_opts lo;
    ts_train_loop_opts_default(&lo);
    lo.steps = 60, lo.lr = 1e-2f, lo.warmup = 5, lo.schedule = TS_LR_COSINE, lo.min_lr = 1e-3f, lo.eval_every = 60;
    lo.ignore_index = -1;
    ts_train_loop_result r;
    assert_ok(ts_train_loop(&tr, &opt, &src, &lo, &r));
    assert_int_equal(r.steps, 60);
    print_message("periodic text, 60 steps: held-out loss %.3f -> %.3f\n", before, r.last_heldout);
    assert_true(r.last_heldout < 0.5 * before);
    /* the stop flag: one step, then out */
    volatile sig_atomic_t stop = 1;
    lo.stop = &stop;
    assert_ok(ts_train_loop(&tr, &opt, &src, &lo, &r));
    assert_int_equal(r.steps, 1);
    assert_true(r.interrupted);
    ts_optim_free(&opt);
    ts_train_free(&tr);
    ts_model_free(&m);
    ts_lm_data_free(&d);
    free(ids);
}

/* ---- in-context measures ----------------------------------------------------------------- */

static void untrained_model_scores_near_chance(void **state) {
    (void)state;
    ts_model_config c = lm_config(20);
    c.batch = 8;
    ts_model m;
    assert_ok(ts_model_init(&m, &c));
    int32_t ids[8 * 16];
    ts_lm_repeat_ids(ids, 8, 16, 20, 1);
    for (int r = 0; r < 8; r++) assert_memory_equal(ids + r * 16, ids + r * 16 + 8, 8 * sizeof(int32_t));
    ts_lm_measures me;
    assert_ok(ts_lm_measure(&m, ids, &me));
    assert_int_equal(me.L, 2);
    assert_int_equal(me.H, 2);
    /* uniform causal attention: prev 1/(i+1) over i in [1, 16), induction over [8, 16) */
    double prev = 0, ind = 0;
    for (int i = 1; i < 16; i++) prev += 1.0 / (i + 1) / 15;
    for (int i = 8; i < 16; i++) ind += 1.0 / (i + 1) / 8;
    assert_true(fabs(me.chance_prev - prev) < 1e-12 && fabs(me.chance_induction - ind) < 1e-12);
    for (int k = 0; k < 4; k++) {
        assert_true(me.prev_token[k] < 2 * prev);
        assert_true(me.induction[k] < 2 * ind);
        assert_true(me.copying[k] >= -1.0f && me.copying[k] <= 1.0f);
    }
    /* an untrained model cannot use the repeat: its loss is no better in the second half */
    assert_true(me.loss_second > 0.8 * me.loss_first);
    ts_lm_measures_free(&me);
    ts_model_free(&m);
}

/* The shipped 2-layer model (assets/induction-2l.safetensors, assets/README.md):
 * at least one head scores above INDUCTION_MIN on 8 random sequences written
 * twice, and its loss in the second half is below a quarter of the first's;
 * the same config untrained (its initial weights) has no head above twice
 * chance. */
#define INDUCTION_MIN 0.4

static void shipped_model_has_an_induction_head(void **state) {
    (void)state;
    const char *dir = getenv("TSCOPE_ASSETS") ? getenv("TSCOPE_ASSETS") : "assets";
    char path[1024];
    snprintf(path, sizeof path, "%s/induction-2l.safetensors", dir);
    ts_model_config c;
    ts_lmtok tok;
    assert_ok(ts_lm_checkpoint_read(path, NULL, &c, &tok));
    ts_lmtok_free(&tok);
    c.batch = 8;
    ts_model trained, fresh;
    assert_ok(ts_model_init(&trained, &c));
    assert_ok(ts_model_load_safetensors(&trained, path, NULL));
    assert_ok(ts_model_init(&fresh, &c));
    int S = trained.S;
    int32_t *ids = malloc(sizeof(int32_t) * 8 * (size_t)S);
    ts_lm_repeat_ids(ids, 8, S, c.vocab, 2024);
    ts_lm_measures a, b;
    assert_ok(ts_lm_measure(&trained, ids, &a));
    assert_ok(ts_lm_measure(&fresh, ids, &b));
    int best = 0, best_fresh = 0;
    for (int k = 1; k < a.L * a.H; k++) {
        if (a.induction[k] > a.induction[best]) best = k;
        if (b.induction[k] > b.induction[best_fresh]) best_fresh = k;
    }
    print_message("induction score: trained layer %d head %d %.3f; untrained best %.3f; chance %.3f; loss halves "
                  "%.2f -> %.2f\n",
                  best / a.H, best % a.H, (double)a.induction[best], (double)b.induction[best_fresh], a.chance_induction,
                  a.loss_first, a.loss_second);
    assert_true(a.induction[best] > INDUCTION_MIN);
    assert_true(b.induction[best_fresh] < 2 * b.chance_induction);
    assert_true(a.loss_second < 0.25 * a.loss_first);
    ts_lm_measures_free(&a);
    ts_lm_measures_free(&b);
    free(ids);
    ts_model_free(&trained);
    ts_model_free(&fresh);
}

static int setup(void **state) {
    (void)state;
    return ts_kernels_init() == TS_OK ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(char_tokenizer_round_trips),
        cmocka_unit_test(word_tokenizer_round_trips),
        cmocka_unit_test(config_survives_json),
        cmocka_unit_test(eigenvalues_are_found),
        cmocka_unit_test(sampling_follows_the_softmax),
        cmocka_unit_test(argmax_matches_its_definition),
        cmocka_unit_test(probs_in_place_match_the_copy),
        cmocka_unit_test(a_nan_logit_is_not_dropped),
        cmocka_unit_test(cosine_schedule),
        cmocka_unit_test(data_source_split_and_batches),
        cmocka_unit_test(loop_lowers_the_loss),
        cmocka_unit_test(untrained_model_scores_near_chance),
        cmocka_unit_test(shipped_model_has_an_induction_head),
    };
    return cmocka_run_group_tests_name("lm", tests, setup, NULL);
}
