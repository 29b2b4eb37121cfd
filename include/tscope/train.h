/* train: teaching the model. The toy tasks (copy, reverse, sort), the
 * backward pass through every step, AdamW steps and the training loop.
 */
#ifndef TSCOPE_TRAIN_H
#define TSCOPE_TRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tscope/core.h"
#include "tscope/kernels.h"
#include "tscope/model.h"

/* task: toy sequence-to-sequence tasks with data from a seeded RNG, greedy
 * decoding, and accuracy.
 *
 * Every task follows seed 004's copy data: a source of S ids whose first is 1
 * (the start token) and whose other S-1 are drawn uniformly from [1, vocab)
 * (so 1 can appear inside too, as in the seed); 0 is padding and never drawn.
 * The answer y has S ids too, y[0] = 1, and the decoder reads y[:-1] and is
 * taught y[1:] (the target shifted by one):
 *   copy     y = the source                       (seed 004)
 *   reverse  y = 1, then the source's S-1 ids in reverse order
 *   sort     y = 1, then the source's S-1 ids in ascending order
 * Batch i of a stream is a pure function of (task, vocab, B, S, seed, i):
 * training and held-out data are two streams (different seeds).
 */

/* Longest source the tasks make. */
#define TS_TASK_MAX_SEQ 1024

typedef enum ts_task_kind { TS_TASK_COPY, TS_TASK_REVERSE, TS_TASK_SORT, TS_TASK_COUNT } ts_task_kind;

const char *ts_task_name(ts_task_kind kind); /* "copy", "reverse", "sort" */
/* "copy" | "reverse" | "sort"; TS_ERR_ARG naming the tasks otherwise. */
ts_status ts_task_parse(const char *name, ts_task_kind *out);

/* Batch `index` (S <= TS_TASK_MAX_SEQ): src (B, S), tgt (B, S-1) the decoder's input, labels
 * (B, S-1) what it should predict. */
void ts_task_batch(ts_task_kind kind, int vocab, int B, int S, uint64_t seed, uint64_t index, int32_t *src,
                   int32_t *tgt, int32_t *labels);

/* The full answer y (S) for one source (S). */
void ts_task_answer(ts_task_kind kind, const int32_t *src, int S, int32_t *y);

/* Greedy decoding with the inference forward: the decoder starts from the
 * start token and feeds back its argmax, one position per forward.
 * m must be an encoder-decoder with an LM head whose batch and lengths match
 * src (B, S) and out (B, T = S-1); out gets the predicted y[1:]. */
ts_status ts_task_greedy(ts_model *m, const int32_t *src, int32_t *out);

typedef struct ts_task_score {
    int64_t seqs, seqs_right;     /* sequences, those predicted exactly */
    int64_t tokens, tokens_right; /* positions, those predicted right */
} ts_task_score;

/* Add a batch's predictions (B, T) against its labels (B, T). */
void ts_task_score_add(ts_task_score *s, const int32_t *pred, const int32_t *labels, int B, int T);

/* train: the model's forward pass that keeps what backprop needs, and the
 * backward pass through every step.
 *
 * ts_model (model.h) owns the parameters and runs inference with a handful of
 * reused buffers. Training needs more: every layer's inputs, LayerNorm
 * statistics, attention weights and FFN hidden layers, kept until the
 * backward pass. A ts_train sits beside a model and owns
 *   - a gradient block laid out exactly like the parameter block (the same
 *     size table, so `gw` has the same named pointers as the model's `w`),
 *   - one block of activations and backward scratch, sized once from a size
 *     table and carved into named pointers (llm.c's habit): nothing is
 *     allocated inside forward or backward.
 * It computes with the model's own weights, in the model's storage order
 * (in_proj rows per head, see model.c); gradients are exchanged in PyTorch's
 * order with ts_train_export_grad.
 *
 * One step:
 *     ts_train_forward(&tr, &in, &logits);          // dropout when m->training
 *     loss = ts_bwd_cross_entropy_forward(...);     // kernels.h, "backward"
 *     ts_train_zero_grad(&tr);
 *     float *d = ts_train_output_grad(&tr);         // zeroed, shaped like logits
 *     ts_bwd_cross_entropy_backward(d, 1, ...);
 *     ts_train_backward(&tr, NULL);                 // or a hook: grad.<activation>
 *     ... optimizer on m->block with tr.grads (kernels.h, "optim")
 *
 * Dropout masks come from a counter-based stream keyed by the config's seed
 * and the number of forwards so far, so a run is reproducible on any thread
 * count and the backward regenerates each mask instead of storing it.
 */

typedef struct ts_train {
    ts_model *m;           /* not owned; must outlive the trainer */
    float *grads;          /* (m->n_floats) parameter gradients, owned */
    ts_model_weights gw;   /* named pointers into grads */
    unsigned char *block;  /* activations and backward scratch, owned */
    size_t block_bytes;
    void *acts;            /* the carved pointers (private, src/train_impl.h) */
    uint64_t forwards;     /* forwards run so far: the dropout stream's counter */
    bool have_forward;     /* a forward ran since the last backward could use it */
    /* Gradients of the inputs given as vectors, after a backward (NULL when
     * the input was token ids or absent): */
    float *d_src;          /* (B, S, in_dim) */
    float *d_tgt;          /* (B, T, D) */
    float *d_memory;       /* (B, S, D): the encoder's output, or the given memory */
} ts_train;

/* Size and allocate everything for model m (its config fixes every size). */
ts_status ts_train_init(ts_train *tr, ts_model *m);
void ts_train_free(ts_train *tr);

/* Bytes of activations and scratch the trainer holds, for reports. */
size_t ts_train_bytes(const ts_train *tr);

/* The forward pass, keeping activations. `out` becomes a view of the result
 * (logits, or the last stack's output), valid until the next forward. Vector
 * inputs (src_embedded, tgt_embedded, memory) are read again by the backward:
 * keep them unchanged until then. Dropout applies when m->training. */
ts_status ts_train_forward(ts_train *tr, const ts_model_input *in, ts_tensor *out);

/* Every parameter gradient to 0. */
void ts_train_zero_grad(ts_train *tr);

/* A zeroed buffer shaped like the forward's output, for the caller to fill
 * with d(loss)/d(out) before ts_train_backward. */
float *ts_train_output_grad(ts_train *tr);

/* Backpropagate the output gradient (from ts_train_output_grad, or `dout`
 * when not NULL) through the last forward, adding into the parameter
 * gradients. The hook (may be NULL) sees the gradient of each activation as it
 * is computed, named grad.<step name> (grad.logits, grad.decoder.layers.1.
 * cross_attn.weights, grad.embed.out, ...), op TS_OP_GRAD, tag TS_TAG_GRAD. */
ts_status ts_train_backward(ts_train *tr, const float *dout, const ts_hook *hook);

/* Hand every parameter gradient to the hook as grad.<parameter name>, in
 * PyTorch's layout (in_proj rows reordered back), op TS_OP_GRAD. */
ts_status ts_train_trace_param_grads(ts_train *tr, const ts_hook *hook);

/* Gradient of parameter i (the model's size table) in PyTorch's layout,
 * numel floats into dst. */
void ts_train_export_grad(ts_train *tr, int i, float *dst);

/* Sum of squared gradients over the parameters whose names start with
 * `prefix` ("" or NULL: all), for gradient norms per layer. */
double ts_train_grad_sumsq(const ts_train *tr, const char *prefix);

/* ---- one optimization step of a language-model head ---------------------------- */

typedef struct ts_train_step_opts {
    float lr;           /* this step's learning rate */
    float smoothing;    /* label smoothing of the cross-entropy */
    float clip;         /* clip the global gradient norm to this; <= 0: no clipping */
    int ignore_index;   /* labels equal to it are not counted (padding, 0) */
} ts_train_step_opts;

typedef struct ts_train_step_result {
    double loss;        /* mean cross-entropy over the counted labels */
    double grad_norm;   /* global gradient norm before clipping */
    int64_t counted;    /* labels counted */
} ts_train_step_result;

/* forward, cross-entropy against labels (the output's rows), zero_grad,
 * backward, clipping, optimizer step: one training step. */
ts_status ts_train_step(ts_train *tr, ts_optim *opt, const ts_model_input *in, const int32_t *labels,
                        const ts_train_step_opts *o, ts_train_step_result *r);

/* Write the model's parameters to a safetensors file atomically, in
 * PyTorch's layout and names, except the token tables, saved as
 * embed.src.weight and embed.tgt.weight (names ts_model_find_param also
 * accepts). __metadata__ always holds "format": "tscope" and "config": the
 * model's config as JSON (ts_model_config_json), so that tscope run --load
 * reads heads, norm placement, activation and positions back; meta: n_meta
 * more key/value pairs. */
ts_status ts_train_save(const ts_model *m, const char *path, int n_meta, const char *const *meta);

#endif
