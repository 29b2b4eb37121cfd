/* model_fixture: what test_model.c and test_variants.c both need: a small
 * encoder config, random input, and a hook that records every step a model
 * traces (name, op, tag, shape) and copies the values of the steps asked for. */
#ifndef TSCOPE_TESTS_MODEL_FIXTURE_H
#define TSCOPE_TESTS_MODEL_FIXTURE_H

#include <string.h>

#include "check.h"
#include "tscope/core.h"
#include "tscope/model.h"

/* An encoder on embedded input (no positional encoding, no head), ffn 2*D,
 * dropout 0.1, eps 1e-5. */
ts_model_config fixture_encoder(int B, int S, int D, int H, int layers, uint64_t seed);
/* n floats from ts_model_randn (owned). */
float *fixture_randn(int64_t n, uint64_t seed);

#define CAPTURE_KEEP_MAX 12

typedef struct capture_step {
    char name[160];
    ts_op op;
    ts_tag tag;
    int rank;
    int64_t shape[TS_MAX_RANK];
    float *values; /* a copy, for the steps asked for */
} capture_step;

typedef struct capture {
    capture_step *steps; /* (max) */
    int n, max;
    const char *keep[CAPTURE_KEEP_MAX]; /* names whose values are copied */
    int n_keep;
} capture;

/* Room for max steps (a test fails on more); keep is a NULL-terminated list
 * of step names to copy values of, or NULL. */
void capture_init(capture *c, int max, const char *const *keep);
void capture_free(capture *c);

/* The ts_hook function; its context is a capture. */
ts_status capture_record(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag);

const capture_step *capture_find(const capture *c, const char *name);
/* The step's position in trace order, or -1. */
int capture_index(const capture *c, const char *name);
/* The copied values of a kept step; fails the test when there are none. */
const float *capture_values(const capture *c, const char *name);

#define assert_step_shape(c, name, ...)                                \
    do {                                                               \
        const capture_step *s_ = capture_find((c), (name));            \
        if (!s_) fail_msg("no step named %s", (name));                 \
        ts_tensor t_ = {.rank = s_->rank};                             \
        memcpy(t_.shape, s_->shape, sizeof t_.shape);                  \
        assert_shape(&t_, __VA_ARGS__);                                \
    } while (0)

#endif
