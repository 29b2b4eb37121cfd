/* model_probs: the step `probs` after a language model's forward pass (model.h). */
#include <stdlib.h>

#include "model_impl.h"
#include "tscope/kernels.h"
#include "tscope/model.h"

ts_status ts_model_probs_step(const ts_hook *hook, const ts_tensor *logits, float temperature) {
    if (!hook->fn || logits->rank != 3) return TS_OK;
    int64_t rows = logits->shape[0] * logits->shape[1], V = logits->shape[2];
    float *probs = malloc(sizeof(float) * (size_t)(rows * V));
    if (!probs) return ts_fail(TS_ERR_NOMEM, "out of memory for the probs step");
    if (temperature > 0) { /* rows in parallel, each vectorised (ts_softmax_vocab) */
        int threads = rows * V >= 65536 ? ts_kernels_threads() : 1;
        (void)threads;
        TS_MODEL_OMP(parallel for num_threads(threads) schedule(static))
        for (int64_t r = 0; r < rows; r++)
            ts_softmax_vocab(probs + r * V, logits->data + r * V, V, temperature, -INFINITY);
    } else { /* greedy: all of each row on its largest logit */
        for (int64_t r = 0; r < rows; r++)
            ts_model_sample(logits->data + r * V, (int)V, temperature, 0, 0.5, probs + r * V);
    }
    ts_tensor t;
    ts_tensor_view(&t, probs, 3, logits->shape);
    ts_status st = ts_hook_call(hook, "probs", TS_OP_SOFTMAX, &t, TS_TAG_LOGITS);
    free(probs);
    return st;
}
