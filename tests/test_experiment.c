/* Experiments (include/tscope/experiment.h): an edit changes what every later
 * step reads, the trace records the edited values (never what the writer saw
 * before at the same address: a view of an edited step, a step declared like
 * the one before), the mean ablation is the mean, and a run with an
 * experiment that edits nothing gives the same numbers as the fused path.
 * The PyTorch comparisons are tests/experiment_test.sh's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "model_fixture.h"
#include "tscope/experiment.h"
#include "tscope/kernels.h"
#include "tscope/model.h"
#include "tscope/trace.h"

#define MAX_STEPS 1024

static ts_model_config small(void) {
    ts_model_config c = fixture_encoder(2, 5, 8, 2, 1, 7);
    return c;
}

/* A forward of m on x with ex's edits (ex may be NULL) and, when path is
 * given, a trace of every value; the output copied to *out. */
static void forward(ts_model *m, const float *x, ts_experiment *ex, const char *path, float **out, int64_t *n) {
    ts_trace_writer *w = NULL;
    ts_hook hook = {0};
    if (path) {
        ts_trace_options opt;
        ts_trace_options_default(&opt);
        opt.level = TS_TRACE_VALUES;
        assert_ok(ts_trace_writer_open(path, NULL, &opt, &w));
        hook = ts_trace_writer_hook(w);
    }
    if (ex) ts_experiment_attach(ex, &hook);
    ts_model_input in = {.src_embedded = x};
    ts_tensor t;
    assert_ok(ts_model_forward(m, &in, &hook, &t));
    *n = ts_tensor_numel(&t);
    *out = malloc(sizeof(float) * (size_t)*n);
    memcpy(*out, t.data, sizeof(float) * (size_t)*n);
    if (w) assert_ok(ts_trace_writer_close(w, NULL));
}

static const float *values_of(ts_trace *t, const char *name, int64_t *n) {
    int64_t i = ts_trace_find(t, name);
    if (i < 0) fail_msg("no step %s", name);
    const float *v;
    assert_ok(ts_trace_values(t, i, &v));
    *n = ts_trace_step_at(t, i)->values_count;
    return v;
}

static int64_t zeros(const float *v, int64_t n) {
    int64_t z = 0;
    for (int64_t i = 0; i < n; i++) z += v[i] == 0.0f;
    return z;
}

/* concat is a view of values (a reshape), ffn.dropout at inference the very
 * memory of ffn.act (declared like it): the writer would store both as views
 * of what it recorded before. Edited, they must be recorded as edited, and
 * the steps before them as they were. */
static void test_trace_records_the_edit(void **state) {
    (void)state;
    ts_model_config c = small();
    ts_model m;
    assert_ok(ts_model_init(&m, &c));
    float *x = fixture_randn((int64_t)c.batch * c.seq * c.d_model, 3);
    ts_experiment ex;
    ts_experiment_init(&ex);
    assert_ok(ts_experiment_add_ablate(&ex, "encoder.layers.0.self_attn.concat"));
    assert_ok(ts_experiment_add_ablate(&ex, "encoder.layers.0.ffn.dropout"));
    assert_ok(ts_experiment_check(&ex, &c));
    char path[] = "/tmp/tscope-experiment-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    float *out;
    int64_t n;
    forward(&m, x, &ex, path, &out, &n);
    assert_int_equal(ex.edits[0].applied, 1);
    assert_int_equal(ex.edits[1].applied, 1);
    ts_trace *t;
    assert_ok(ts_trace_open(path, &t));
    int64_t k;
    const float *v = values_of(t, "encoder.layers.0.self_attn.values", &k);
    assert_true(zeros(v, k) < k / 2); /* recorded before the edit: the head outputs */
    v = values_of(t, "encoder.layers.0.self_attn.concat", &k);
    assert_int_equal(zeros(v, k), k);
    const ts_trace_step *s = ts_trace_step_at(t, ts_trace_find(t, "encoder.layers.0.self_attn.concat"));
    assert_true(s->stats.min == 0 && s->stats.max == 0 && s->stats.zeros == (uint64_t)k);
    /* with concat zero, out_proj gives its bias at every position */
    v = values_of(t, "encoder.layers.0.self_attn.out", &k);
    for (int64_t i = c.d_model; i < k; i++) assert_float_equal(v[i], v[i % c.d_model], 0);
    v = values_of(t, "encoder.layers.0.ffn.act", &k);
    assert_true(zeros(v, k) < k);
    v = values_of(t, "encoder.layers.0.ffn.dropout", &k);
    assert_int_equal(zeros(v, k), k);
    s = ts_trace_step_at(t, ts_trace_find(t, "encoder.layers.0.ffn.dropout"));
    assert_true(s->stats.max == 0 && s->view_of < 0);
    char edits[256];
    assert_int_equal(ts_trace_step_edits(t, "encoder.layers.0.ffn.dropout", edits, sizeof edits), 0); /* no metadata */
    ts_trace_close(t);
    unlink(path);
    free(out);
    free(x);
    ts_experiment_free(&ex);
    ts_model_free(&m);
}

/* A small encoder's forward on seeded input, unedited and with one edit,
 * each keeping the values of one step: a before, b after the edit. */
typedef struct edited_run {
    ts_model_config c;
    ts_model m;
    float *x;
    const char *keep[2];
    capture before, after;
    ts_experiment ex;
    const float *a, *b;
} edited_run;

static void edited_run_init(edited_run *r, const char *edit, const char *step, uint64_t seed) {
    r->c = small();
    assert_ok(ts_model_init(&r->m, &r->c));
    r->x = fixture_randn((int64_t)r->c.batch * r->c.seq * r->c.d_model, seed);
    r->keep[0] = step, r->keep[1] = NULL;
    capture_init(&r->before, MAX_STEPS, r->keep);
    capture_init(&r->after, MAX_STEPS, r->keep);
    ts_model_input in = {.src_embedded = r->x};
    ts_tensor t;
    ts_hook hook = {.fn = capture_record, .ctx = &r->before};
    assert_ok(ts_model_forward(&r->m, &in, &hook, &t));
    ts_experiment_init(&r->ex);
    assert_ok(ts_experiment_add_ablate(&r->ex, edit));
    assert_ok(ts_experiment_check(&r->ex, &r->c));
    hook = (ts_hook){.fn = capture_record, .ctx = &r->after};
    ts_experiment_attach(&r->ex, &hook);
    assert_ok(ts_model_forward(&r->m, &in, &hook, &t));
    r->a = capture_values(&r->before, step);
    r->b = capture_values(&r->after, step);
    assert_non_null(r->a);
    assert_non_null(r->b);
}

static void edited_run_free(edited_run *r) {
    capture_free(&r->before);
    capture_free(&r->after);
    ts_experiment_free(&r->ex);
    free(r->x);
    ts_model_free(&r->m);
}

/* =mean on one head: every value of the slice becomes its mean over the
 * batch and the positions, per dim; the other head is untouched. */
static void test_mean_ablation(void **state) {
    (void)state;
    edited_run r;
    edited_run_init(&r, "encoder.layers.0.self_attn.head1=mean", "encoder.layers.0.self_attn.values", 4);
    const float *a = r.a, *b = r.b;
    int B = r.c.batch, H = r.c.heads, S = r.c.seq, hd = r.c.d_model / r.c.heads;
    for (int d = 0; d < hd; d++) {
        double mean = 0;
        for (int bb = 0; bb < B; bb++)
            for (int s = 0; s < S; s++) mean += a[((bb * H + 1) * S + s) * hd + d];
        mean /= B * S;
        for (int bb = 0; bb < B; bb++)
            for (int s = 0; s < S; s++) {
                assert_float_equal(b[((bb * H + 1) * S + s) * hd + d], mean, 1e-6);
                assert_float_equal(b[((bb * H + 0) * S + s) * hd + d], a[((bb * H + 0) * S + s) * hd + d], 0);
            }
    }
    edited_run_free(&r);
}

/* =mean on a whole (B, S, D) step: every position of every sequence holds
 * one and the same vector, the step's mean over the batch and the positions
 * per dim (a mean over the batch alone, or over the positions alone, would
 * leave the positions different). */
static void test_mean_ablation_of_a_whole_step(void **state) {
    (void)state;
    edited_run r;
    edited_run_init(&r, "encoder.layers.0.ffn.out=mean", "encoder.layers.0.ffn.out", 6);
    int rows = r.c.batch * r.c.seq, D = r.c.d_model;
    assert_true(r.c.batch > 1 && r.c.seq > 1);
    for (int d = 0; d < D; d++) {
        double mean = 0;
        for (int k = 0; k < rows; k++) mean += r.a[k * D + d];
        mean /= rows;
        for (int k = 0; k < rows; k++) {
            if (r.b[k * D + d] != r.b[d]) fail_msg("position %d of the ablated step differs from position 0 in dim %d", k, d);
            assert_float_equal(r.b[k * D + d], mean, 1e-6);
        }
    }
    edited_run_free(&r);
}

/* An experiment that edits nothing (the lens only watches) runs the staged
 * path; its output is the fused path's. */
static void test_no_edit_same_numbers(void **state) {
    (void)state;
    ts_model_config c = small();
    ts_model m;
    assert_ok(ts_model_init(&m, &c));
    float *x = fixture_randn((int64_t)c.batch * c.seq * c.d_model, 5);
    ts_experiment ex;
    ts_experiment_init(&ex);
    assert_ok(ts_experiment_check(&ex, &c));
    float *plain, *watched;
    int64_t n1, n2;
    forward(&m, x, NULL, NULL, &plain, &n1);
    forward(&m, x, &ex, NULL, &watched, &n2);
    assert_int_equal(n1, n2);
    assert_floats_close(watched, plain, n1, 1e-6);
    free(plain);
    free(watched);
    free(x);
    ts_experiment_free(&ex);
    ts_model_free(&m);
}

/* A Llama-style language model whose 4 query heads share 2 key/value heads. */
static ts_model_config grouped(void) {
    ts_model_config c = {.arch = TS_ARCH_DECODER, .d_model = 16, .heads = 4, .kv_heads = 2, .ffn = 24, .layers = 1,
                         .vocab = 11, .seq = 6, .batch = 2, .max_pos = 6, .eps = 1e-5f, .embed_eps = 1e-5f, .norm = TS_NORM_PRE,
                         .norm_kind = TS_NORMK_RMS, .pe = TS_PE_ROPE, .split_qkv = true, .gated_ffn = true,
                         .activation = TS_ACT_SILU, .final_norm = true, .head = TS_HEAD_LM,
                         .input = TS_INPUT_TOKENS, .causal = true, .seed = 7};
    return c;
}

/* One forward of a grouped model with one ablation, keeping `values` and
 * the output. */
static void grouped_forward(const char *edit, capture *cap, float **out, int64_t *n) {
    ts_model_config c = grouped();
    ts_model m;
    assert_ok(ts_model_init(&m, &c));
    int32_t ids[12];
    ts_model_random_ids(ids, c.batch * c.seq, 0, c.vocab, 8);
    ts_hook hook = {.fn = capture_record, .ctx = cap};
    ts_experiment ex;
    ts_experiment_init(&ex);
    if (edit) {
        assert_ok(ts_experiment_add_ablate(&ex, edit));
        assert_ok(ts_experiment_check(&ex, &c));
        ts_experiment_attach(&ex, &hook);
    }
    ts_model_input in = {.src_ids = ids};
    ts_tensor t;
    assert_ok(ts_model_forward(&m, &in, &hook, &t));
    if (edit) assert_int_equal(ex.edits[0].applied, 1);
    *n = ts_tensor_numel(&t);
    *out = malloc(sizeof(float) * (size_t)*n);
    memcpy(*out, t.data, sizeof(float) * (size_t)*n);
    ts_experiment_free(&ex);
    ts_model_free(&m);
}

/* ATTN.kvheadK zeroes key/value head K's slice of ATTN.v: the two query
 * heads of its group (2 and 3 for K = 1) output exactly 0, the others what
 * they did; the run is the one that zeroes those query heads' outputs. */
static void test_kv_head_ablation(void **state) {
    (void)state;
    const char *keep[] = {"decoder.layers.0.self_attn.values", NULL};
    capture plain, kv, q;
    capture_init(&plain, MAX_STEPS, keep);
    capture_init(&kv, MAX_STEPS, keep);
    capture_init(&q, MAX_STEPS, keep);
    float *o_plain, *o_kv, *o_q;
    int64_t n1, n2, n3;
    grouped_forward(NULL, &plain, &o_plain, &n1);
    grouped_forward("decoder.layers.0.self_attn.kvhead1", &kv, &o_kv, &n2);
    grouped_forward("decoder.layers.0.self_attn.head[23]", &q, &o_q, &n3);
    const float *a = capture_values(&plain, keep[0]), *b = capture_values(&kv, keep[0]);
    assert_non_null(a);
    assert_non_null(b);
    ts_model_config c = grouped();
    int B = c.batch, H = c.heads, S = c.seq, hd = c.d_model / c.heads, lost = 0;
    for (int bb = 0; bb < B; bb++)
        for (int h = 0; h < H; h++)
            for (int k = 0; k < S * hd; k++) {
                int64_t i = ((int64_t)(bb * H + h) * S) * hd + k;
                if (h >= 2) lost += b[i] == 0.0f && a[i] != 0.0f;
                else if (b[i] != a[i]) fail_msg("head %d of kv head 0's group changed at %lld", h, (long long)i);
                if (h >= 2 && b[i] != 0.0f) fail_msg("head %d reads the knocked-out kv head yet gives %g", h, b[i]);
            }
    assert_true(lost > B * 2 * S * hd / 2); /* the heads had outputs to lose */
    assert_int_equal(n1, n2);
    assert_int_equal(n2, n3);
    assert_floats_close(o_kv, o_q, n2, 0);
    double moved = 0;
    for (int64_t i = 0; i < n1; i++) moved = fmax(moved, fabs(o_kv[i] - o_plain[i]));
    assert_true(moved > 1e-3);
    free(o_plain), free(o_kv), free(o_q);
    capture_free(&plain), capture_free(&kv), capture_free(&q);
    ts_experiment ex;
    ts_experiment_init(&ex);
    assert_ok(ts_experiment_add_ablate(&ex, "decoder.layers.0.self_attn.kvhead2"));
    assert_int_equal(ts_experiment_check(&ex, &c), TS_ERR_ARG);
    assert_non_null(strstr(ts_last_error(), "key/value heads kvhead0 to kvhead1"));
    ts_experiment_free(&ex);
}

/* What cannot work is refused before any run, with a sentence. */
static void test_refusals(void **state) {
    (void)state;
    ts_model_config c = small();
    static const char *const bad[] = {"encoder.layers.3.self_attn.head0", "encoder.layers.0.self_attn.head5",
                                      "encoder.layers.0.norm1.gamma", "nothing.here", "encoder.layers.0.out=half",
                                      "=mean"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ts_experiment ex;
        ts_experiment_init(&ex);
        ts_status st = ts_experiment_add_ablate(&ex, bad[i]);
        if (!st) st = ts_experiment_check(&ex, &c);
        if (st == TS_OK) fail_msg("%s was accepted", bad[i]);
        assert_true(strlen(ts_last_error()) > 10);
        ts_experiment_free(&ex);
    }
    ts_experiment ex;
    ts_experiment_init(&ex);
    assert_int_not_equal(ts_experiment_add_patch(&ex, "/nonexistent.tstrace:encoder.out"), TS_OK);
    assert_int_not_equal(ts_experiment_add_patch(&ex, "no-colon"), TS_OK);
    assert_int_equal(ex.n_edits, 0);
    ex.lens = true;
    assert_int_not_equal(ts_experiment_check(&ex, &c), TS_OK); /* no vocabulary head */
    ts_experiment_free(&ex);
}

int main(void) {
    assert_ok(ts_kernels_init());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_records_the_edit),
        cmocka_unit_test(test_mean_ablation),
        cmocka_unit_test(test_mean_ablation_of_a_whole_step),
        cmocka_unit_test(test_no_edit_same_numbers),
        cmocka_unit_test(test_kv_head_ablation),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
