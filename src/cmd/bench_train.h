/* bench_train: `tscope bench train`, one training step of a preset timed. */
#ifndef TSCOPE_CMD_BENCH_TRAIN_H
#define TSCOPE_CMD_BENCH_TRAIN_H

/* Median of `reps` training steps of `preset` (NULL: copy, seed 004's copy
 * task: 6+6 layers, d 512, ffn 2048, vocab 100, batch 64 x 10) after one
 * warm-up step: forward, backward, clipping and the Adam update, each phase
 * timed, with the step's GFLOP/s. Returns the exit code. */
int bench_model_train(int reps, const char *preset);

#endif
