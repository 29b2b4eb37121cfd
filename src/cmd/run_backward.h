/* run_backward: `tscope run ... --backward [--labels L.npy]`, one forward and
 * backward pass with every gradient handed to the run's hook. */
#ifndef TSCOPE_CMD_RUN_BACKWARD_H
#define TSCOPE_CMD_RUN_BACKWARD_H

#include "tscope/core.h"
#include "tscope/model.h"

/* The loss, by the model's head:
 *   vocabulary head: mean cross-entropy against integer labels (B, T) (0 =
 *     padding, not counted); without --labels, the ids the decoder should
 *     produce: the source itself (the copy task, as the tiny preset reads it);
 *   classifier: cross-entropy against labels (B);
 *   no head: sum(out * L) for a float L shaped like the output (the
 *     convention of tests/ref's grad_out.npy), so the gradients are PyTorch's
 *     out.backward(L).
 * Traced: `loss`, then grad.<activation> from the logits back to the input,
 * then grad.<parameter> for every parameter (PyTorch's layout). Prints one
 * line. Returns the exit code (2 for bad labels, 1 when a step fails). */
int run_backward(ts_model *m, const ts_model_input *in, const char *labels_path, const ts_hook *hook);

#endif
