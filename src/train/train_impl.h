/* train_impl: the trainer's memory, shared by train.c (memory, forward, step)
 * and train_backward.c. Private to src/.
 *
 * Every buffer is carved from the trainer's one block as the model plans it
 * (ts_model_plan_backprop, model_plan.c: first counting, then pointing): the
 * activations the forward keeps and the backward's scratch (ts_backprop_bufs,
 * model_impl.h).
 */
#ifndef TSCOPE_TRAIN_IMPL_H
#define TSCOPE_TRAIN_IMPL_H

#include "model/model_impl.h"
#include "tscope/train.h"

/* The buffers of a forward that keeps its activations and of the backward
 * (model_impl.h), carved from the trainer's block. */
typedef ts_backprop_bufs tr_acts;

#endif
