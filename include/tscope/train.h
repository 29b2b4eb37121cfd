/* train: teaching the model. The toy tasks (copy, reverse, sort), the
 * backward pass through every step, AdamW steps and the training loop.
 */
#ifndef TSCOPE_TRAIN_H
#define TSCOPE_TRAIN_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tscope/core.h"
#include "tscope/io.h"
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

/* The decoder's input (T), the one convention training, `run --text` and the
 * lessons share: the start id 1 (`<bos>`), then the answer, so that position
 * t reads the answer's token t and is taught to write token t + 1.
 * - start_in_answer: the answer's first token holds the start's place (the
 *   tasks' data begins with 1; a sentence given to a model trained on a task
 *   stands its first word there): tgt = 1, answer[1 .. T-1].
 * - otherwise (a plain sentence): the answer shifted right, tgt = 1,
 *   answer[0 .. T-2]. */
void ts_task_decoder_input(const int32_t *answer, int T, bool start_in_answer, int32_t *tgt);

/* Greedy decoding with the inference forward: the decoder starts from the
 * start token (`<bos>`) and reads back its own argmax, one forward pass a
 * position. m is an encoder-decoder with a vocabulary head; in gives the
 * source (src_ids, src_pad; B, S) and its tgt fields are set here.
 *   tgt (B, T): what the decoder read: <bos>, then each argmax fed back.
 *   out (B, T) or NULL: each position's argmax (out[t] = tgt[t + 1]).
 *   eos_pad (B, T) or NULL: when given, a sequence stops at the <eos> it
 *   writes, which is never read: the positions from there on are padding
 *   (tgt <pad>, eos_pad 1, out unset); *padded (may be NULL) says whether any is.
 * Since the decoder is causal, one forward pass over the finished tgt gives
 * every position the logits it had when it was the newest (tests/test_decode.c). */
ts_status ts_task_greedy(ts_model *m, ts_model_input *in, int32_t *tgt, int32_t *out, uint8_t *eos_pad, bool *padded);

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

/* ---- the training loop (train_loop.c, train_record.c) ------------------------------
 *
 * One loop trains every kind of model tscope trains: the toy tasks and
 * language modelling differ only in where their batches come from, so the
 * loop reads them through a data source (ts_train_data) and the command line
 * keeps only its flags and its printing:
 *
 *     ts_train_data d;            // ts_task_data_source(&task, &d), ts_lm_data_source(...)
 *     ts_train_loop_opts o;       // ts_train_loop_opts_default(&o), then steps, lr, ...
 *     o.trace = &hook;            // optional: snapshots every o.every steps
 *     ts_train_loop(&tr, &opt, &d, &o, &result);
 *
 * Each step: batch `step` from the source, the learning rate of the schedule,
 * ts_train_step; every eval_every steps (and at the last) the held-out loss,
 * which early stopping (patience) watches; every `every` steps (and at step 0,
 * before any update, and at the last) a snapshot to the trace. A stop flag
 * (set by a signal handler) ends the run after the step under way.
 */

/* Where a run's data comes from. Pointers handed out stay valid until the
 * next call on the same source. */
typedef struct ts_train_data {
    void *ctx;
    /* The input and labels of training batch `step` (1, 2, ...), a pure
     * function of the step: a run can be replayed. */
    ts_status (*batch)(void *ctx, int64_t step, ts_model_input *in, const int32_t **labels);
    /* The mean held-out loss of model m, with the inference forward (no
     * dropout); m has the run's batch size. */
    ts_status (*heldout)(void *ctx, ts_model *m, double *loss);
    /* The fixed input a trace follows (its attention is recorded at every
     * snapshot), for a model of batch probe_batch. */
    ts_model_input probe;
    int probe_batch;
    /* More records at each snapshot (may be NULL), after the probe's
     * attention: m holds the current weights (the run's batch size). */
    ts_status (*record)(void *ctx, ts_model *m, const ts_hook *trace);
    int64_t tokens_per_step; /* for tokens/s */
} ts_train_data;

typedef enum ts_lr_schedule {
    TS_LR_INV_SQRT, /* linear warm-up, then peak * sqrt(warmup / step): the paper's */
    TS_LR_COSINE,   /* linear warm-up, then a cosine from peak down to min_lr at the last step */
} ts_lr_schedule;

/* What the loop tells its caller after every step (for a progress bar). */
typedef struct ts_train_progress {
    int64_t step, steps;   /* this step (1..), of how many */
    double loss;           /* this step's training loss */
    double heldout;        /* the held-out loss when it was measured at this step, else NaN */
    float lr;              /* this step's learning rate */
    double grad_norm;      /* before clipping */
    double seconds;        /* since the loop started */
    double tokens_per_s;   /* training tokens per second so far */
    double eta;            /* seconds left at this pace */
    bool stopping;         /* the run ends here early: patience ran out, or the stop flag */
} ts_train_progress;

typedef struct ts_train_loop_opts {
    int64_t steps;
    float lr;              /* peak learning rate */
    float min_lr;          /* TS_LR_COSINE's floor */
    int warmup;            /* linear warm-up steps; 0: none (TS_LR_INV_SQRT: a constant lr) */
    ts_lr_schedule schedule;
    float smoothing, clip; /* as ts_train_step_opts */
    int ignore_index;
    int eval_every;        /* held-out loss every N steps, and at the last */
    int patience;          /* > 0: stop after this many evaluations without a 1% better held-out
                              loss, and go back to the best weights */
    const ts_hook *trace;  /* NULL: no trace; else a snapshot every `every` steps */
    int every;
    const volatile sig_atomic_t *stop; /* may be NULL; nonzero: stop after the step under way */
    int64_t first_step;    /* a resumed run: the steps already done; the loop starts after them
                              (the model, optimizer and trainer hold their state) */
    void (*progress)(void *ctx, const ts_train_progress *p); /* may be NULL */
    void *progress_ctx;
} ts_train_loop_opts;

/* Defaults: 1000 steps at 5e-3 with 100 warm-up steps (the paper's
 * schedule), clip 1, held-out loss every 100 steps, snapshots every 10. */
void ts_train_loop_opts_default(ts_train_loop_opts *o);

/* Whether o makes sense, with a sentence naming the flag (--steps, --lr, ...). */
ts_status ts_train_loop_opts_check(const ts_train_loop_opts *o);

/* The learning rate of step t (1..) under o's schedule. */
float ts_train_loop_lr(const ts_train_loop_opts *o, int64_t t);

typedef struct ts_train_loop_result {
    int64_t steps;         /* steps done */
    double seconds;        /* wall time of the loop */
    bool early_stop;       /* patience ran out: the model is back at best_step */
    bool interrupted;      /* the stop flag ended the run */
    int64_t best_step;     /* the best held-out loss seen, and its step */
    double best_loss;
    double last_heldout;   /* the last held-out loss measured (NaN if none) */
    int records;           /* snapshots written to the trace */
} ts_train_loop_result;

/* Train tr's model with opt on d as o says. The model's batch size is the
 * source's; training mode (dropout) is set for the run. */
ts_status ts_train_loop(ts_train *tr, ts_optim *opt, ts_train_data *d, const ts_train_loop_opts *o,
                        ts_train_loop_result *r);

/* ---- the toy tasks as a data source (task_data.c) --------------------------------- */

typedef struct ts_task_data {
    ts_task_kind kind;
    int B, S, T, V;
    uint64_t seed;
    int32_t *src, *tgt, *labels; // (B, S), (B, T), (B, T): the current batch
    int n_held;                  // held-out batches of B sequences
    int32_t *hsrc, *htgt, *hlab; // (n_held * B, S), (n_held * B, T), (n_held * B, T)
} ts_task_data;

/* Data for a model config c (batch, seq, tgt_seq, vocab, seed) and at least
 * `heldout` held-out sequences (whole batches), from a stream of their own. */
ts_status ts_task_data_init(ts_task_data *d, ts_task_kind kind, const ts_model_config *c, int heldout);
void ts_task_data_free(ts_task_data *d);

/* The loop's face of d: teacher-forced held-out loss, the first held-out
 * sequences as the probe (up to 4). */
void ts_task_data_source(ts_task_data *d, ts_train_data *out);

/* Greedy decoding of every held-out batch, scored against the answers.
 * first (may be NULL): the predictions of the first held-out batch (B, T). */
ts_status ts_task_data_evaluate(ts_task_data *d, ts_model *m, ts_task_score *score, int32_t *first);

/* ---- language modelling as a data source (lm_data.c) ------------------------------
 *
 * A corpus as token ids, cut into pieces of `piece` tokens: one piece in
 * `heldout_every` is held out (so both parts cover the whole book), the rest
 * are joined into the training stream (a text shorter than
 * 2 * heldout_every pieces gets pieces of n / (2 * heldout_every) tokens, at
 * least ctx + 1, so two are held out). Training batch k is B windows of
 * ctx + 1 tokens at positions drawn from a seeded stream (input: the first
 * ctx, labels: the last ctx). With repeat_frac > 0, that fraction of the
 * windows is instead a random sequence of period p (p uniform in
 * [ctx/8, ctx/2], tokens uniform over the vocabulary) repeated to fill the
 * window: text where only copying from earlier in the context helps, which
 * makes induction heads form sooner (docs/training.md). Held out: `heldout`
 * windows spread evenly over the held-out stream, evaluated in whole
 * batches; the loss is the mean over every position of every window. */
typedef struct ts_lm_data_opts {
    int batch, ctx;     /* B, S: the model's batch and context */
    int vocab;          /* V: ids are in [0, V) */
    uint64_t seed;
    int heldout;        /* held-out windows (256) */
    int heldout_every;  /* one piece in N is held out (20) */
    int piece;          /* tokens a piece (4096) */
    float repeat_frac;  /* windows made of a repeated random sequence (0) */
    /* More records at each snapshot, after the held-out loss (NULL: none):
     * the in-context measures live in src/experiment (ts_lm_snapshot_measure,
     * with a ts_lm_snapshot_scores as measure_ctx). */
    ts_status (*measure)(void *ctx, const ts_model *m, const ts_hook *trace);
    void *measure_ctx;
} ts_lm_data_opts;

void ts_lm_data_opts_default(ts_lm_data_opts *o);

typedef struct ts_lm_data {
    ts_lm_data_opts o;
    int32_t *train;   /* (n_train) the training stream */
    int64_t n_train;
    int32_t *held;    /* (n_held) the held-out stream */
    int64_t n_held;
    int n_windows;    /* held-out windows, a whole number of batches */
    int32_t *hx, *hy; /* (n_windows, S) their inputs and labels */
    int32_t *x, *y;   /* (B, S) the current batch */
    int32_t *probe;   /* (probe_batch, S) what a trace follows (ts_lm_data_set_probe) */
    int probe_batch;
} ts_lm_data;

/* Split ids[0..n) (copied) as o says. Needs at least one training window
 * and one held-out window of ctx + 1 tokens. */
ts_status ts_lm_data_init(ts_lm_data *d, const int32_t *ids, int64_t n, const ts_lm_data_opts *o);
void ts_lm_data_free(ts_lm_data *d);

/* The sequences a trace follows: P sequences of ctx ids each (copied). */
ts_status ts_lm_data_set_probe(ts_lm_data *d, const int32_t *ids, int P);

/* The loop's face of d. At each snapshot it also records the held-out loss
 * (lm.heldout_loss), then whatever o.measure records (the in-context
 * measures: lm.repeat.loss, lm.score.prev_token, lm.score.induction,
 * lm.score.copying). */
void ts_lm_data_source(ts_lm_data *d, ts_train_data *out);

/* The mean held-out loss (nats per token) of m (batch B, context S). */
ts_status ts_lm_data_heldout(ts_lm_data *d, ts_model *m, double *loss);

/* ---- a language model's training run (lm_run.c) -----------------------------------
 *
 * What `tscope train --task lm` runs, the flags, the corpus, the tokenizer
 * and the printing left to the command line:
 *
 *     ts_lm_run r = {0};              // lo, oc, dop: the settings (or ts_lm_run_resume's)
 *     ts_lm_run_resume(&r, path, &tok);    // optional: a saved run and its PATH.state
 *     ts_lm_run_corpus(&r, ids, n, ...);   // the corpus's tokens (a resumed run: the same ones)
 *     ts_lm_run_data(&r, ids, n);          // r.cfg set: the data source
 *     ts_lm_run_model(&r);                 // model, trainer, optimizer (a resumed run: its state)
 *     ts_lm_run_train(&r, trace, &result); // the loop, saving every save_every steps
 *     ts_lm_run_save(&r, result.steps);    // the weights, and the state --resume reads
 *     ts_lm_run_free(&r);
 */
typedef struct ts_lm_run {
    ts_train_loop_opts lo;  /* the loop's settings */
    ts_optim_config oc;     /* the optimizer's */
    ts_lm_data_opts dop;    /* the data's (batch, ctx, vocab and seed come from cfg) */
    ts_model_config cfg;    /* the model: the caller's, or the resumed checkpoint's */
    const char *save;       /* where ts_lm_run_save writes (and PATH.state beside) */
    int64_t save_every;     /* > 0: a save every N steps during the loop */
    const char *const *meta; /* the checkpoint's metadata pairs */
    int n_meta;
    /* the loop's progress, after any save (may be NULL) */
    void (*progress)(void *ctx, const ts_train_progress *p);
    void *progress_ctx;
    /* what the run holds */
    ts_lm_data d;
    ts_model m;
    ts_train tr;
    ts_optim opt;
    int64_t tokens_per_step;
    const char *resume;     /* the checkpoint resumed, or NULL */
    ts_safetensors state;   /* its training state, open until ts_lm_run_close_state */
    bool state_open;
    int64_t forwards, corpus_tokens;
    char corpus[4096];      /* the corpus's path ("" the Bible's), for the state */
    char corpus_hash[32];   /* its tokens, fingerprinted */
    ts_status save_st;      /* the first failed save during the loop */
} ts_lm_run;

/* The run saved at resume (weights, config and tokenizer into cfg and tok,
 * the loop's, the optimizer's and the data's settings from PATH.state). */
ts_status ts_lm_run_resume(ts_lm_run *r, const char *resume, ts_lmtok *tok);
/* The corpus path the resumed state names (NULL, "": none, the Bible). */
const char *ts_lm_run_resumed_corpus(const ts_lm_run *r);
/* The corpus's tokens (n), its path (NULL: the Bible) and its name for
 * messages: a resumed run refuses a text it was not trained on. */
ts_status ts_lm_run_corpus(ts_lm_run *r, const int32_t *ids, size_t n, const char *path, const char *name);
ts_status ts_lm_run_data(ts_lm_run *r, const int32_t *ids, size_t n);
ts_status ts_lm_run_model(ts_lm_run *r);
void ts_lm_run_close_state(ts_lm_run *r); /* the resumed state file, once read */
ts_status ts_lm_run_train(ts_lm_run *r, const ts_hook *trace, ts_train_loop_result *out);
/* The weights at `step` into r->save, then the training state beside them (PATH.state). */
ts_status ts_lm_run_save(ts_lm_run *r, int64_t step);
/* n_sample tokens after the prompt at temperature 0.8 (the model reads the
 * last S tokens each time), decoded with the prompt into *out (free it). */
ts_status ts_lm_run_sample(const ts_lm_run *r, const ts_lmtok *tok, const ts_bpe_ids *prompt, int n_sample, char **out,
                           size_t *out_len);
void ts_lm_run_free(ts_lm_run *r);


#endif
