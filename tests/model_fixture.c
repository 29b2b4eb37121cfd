#include "model_fixture.h"

#include <stdio.h>
#include <stdlib.h>

ts_model_config fixture_encoder(int B, int S, int D, int H, int layers, uint64_t seed) {
    ts_model_config c;
    memset(&c, 0, sizeof c);
    c.arch = TS_ARCH_ENCODER;
    c.d_model = D;
    c.heads = H;
    c.ffn = 2 * D;
    c.layers = layers;
    c.seq = S;
    c.batch = B;
    c.eps = 1e-5f;
    c.embed_eps = 1e-5f;
    c.dropout = 0.1f;
    c.pe = TS_PE_NONE;
    c.input = TS_INPUT_EMBEDDED;
    c.head = TS_HEAD_NONE;
    c.seed = seed;
    return c;
}

float *fixture_randn(int64_t n, uint64_t seed) {
    float *x = malloc(sizeof(float) * (size_t)n);
    assert_non_null(x);
    ts_model_randn(x, n, seed);
    return x;
}

void capture_init(capture *c, int max, const char *const *keep) {
    memset(c, 0, sizeof *c);
    c->max = max;
    c->steps = calloc((size_t)max, sizeof *c->steps);
    assert_non_null(c->steps);
    for (; keep && *keep; keep++) c->keep[c->n_keep++] = *keep;
}

void capture_free(capture *c) {
    for (int i = 0; i < c->n; i++) free(c->steps[i].values);
    free(c->steps);
    memset(c, 0, sizeof *c);
}

ts_status capture_record(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag) {
    capture *c = ctx;
    assert_true(c->n < c->max);
    capture_step *s = &c->steps[c->n++];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->op = op;
    s->tag = tag;
    s->rank = t->rank;
    for (int d = 0; d < t->rank; d++) s->shape[d] = t->shape[d];
    for (int k = 0; k < c->n_keep; k++) {
        if (strcmp(c->keep[k], name) != 0 || !t->data) continue;
        int64_t n = ts_tensor_numel(t);
        s->values = malloc(sizeof(float) * (size_t)n);
        assert_non_null(s->values);
        ts_tensor dst;
        assert_ok(ts_tensor_view(&dst, s->values, t->rank, t->shape));
        assert_ok(ts_tensor_copy(&dst, t)); /* t may be a strided view */
    }
    return TS_OK;
}

const capture_step *capture_find(const capture *c, const char *name) {
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->steps[i].name, name) == 0) return &c->steps[i];
    return NULL;
}

int capture_index(const capture *c, const char *name) {
    const capture_step *s = capture_find(c, name);
    return s ? (int)(s - c->steps) : -1;
}

const float *capture_values(const capture *c, const char *name) {
    const capture_step *s = capture_find(c, name);
    if (!s || !s->values) fail_msg("no values for step %s", name);
    return s->values;
}
