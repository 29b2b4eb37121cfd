/* model_probs: the step `probs` after a language model's forward pass (model.h). */
#include <stdlib.h>

#include "model_impl.h"
#include "tscope/kernels.h"
#include "tscope/model.h"

/* probs (rows, V) from logits (rows, V), which may be the same memory:
 * rows on the threads, each vectorised (ts_softmax_vocab), or at
 * temperature 0 all of each row on its largest logit. */
static void softmax_rows(float *probs, const float *logits, int64_t rows, int64_t V, float temperature) {
    int threads = rows * V >= 65536 ? ts_kernels_threads() : 1;
    (void)threads;
    if (temperature > 0) {
        TS_MODEL_OMP(parallel for num_threads(threads) schedule(static))
        for (int64_t r = 0; r < rows; r++)
            ts_softmax_vocab(probs + r * V, logits + r * V, V, temperature, -INFINITY);
    } else {
        TS_MODEL_OMP(parallel for num_threads(threads) schedule(static))
        for (int64_t r = 0; r < rows; r++) ts_model_sample(logits + r * V, (int)V, temperature, 0, 0.5, probs + r * V);
    }
}

/* The step from probs, the softmax of logits (rank 3) in it. */
static ts_status probs_step(const ts_hook *hook, const ts_tensor *logits, float *probs, float temperature) {
    int64_t rows = logits->shape[0] * logits->shape[1], V = logits->shape[2];
    softmax_rows(probs, logits->data, rows, V, temperature);
    ts_tensor t;
    ts_tensor_view(&t, probs, 3, logits->shape);
    return ts_hook_call(hook, "probs", TS_OP_SOFTMAX, &t, TS_TAG_LOGITS);
}

ts_status ts_model_probs_step(const ts_hook *hook, const ts_tensor *logits, float temperature) {
    if (!hook->fn || logits->rank != 3) return TS_OK;
    float *probs = malloc(sizeof(float) * (size_t)ts_tensor_numel(logits));
    if (!probs) return ts_fail(TS_ERR_NOMEM, "out of memory for the probs step");
    ts_status st = probs_step(hook, logits, probs, temperature);
    free(probs);
    return st;
}

ts_status ts_model_probs_step_in_place(const ts_hook *hook, ts_tensor *logits, float temperature) {
    if (!hook->fn || logits->rank != 3) return TS_OK;
    return probs_step(hook, logits, logits->data, temperature);
}
