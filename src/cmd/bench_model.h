/* bench_model: `tscope bench forward`, the whole model timed as a learner runs it. */
#ifndef TSCOPE_CMD_BENCH_MODEL_H
#define TSCOPE_CMD_BENCH_MODEL_H

#include "tscope/model.h"

/* Median of `reps` forward passes of `preset` (NULL: seed000) after a warm-up,
 * with no hook and with the trace writer at stats level: ms per forward,
 * GFLOP/s, % of the cores' peak, and what tracing costs. Returns the exit code. */
int bench_model_forward(int reps, const char *preset, ts_dtype dtype);

#endif
