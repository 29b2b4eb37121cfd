/* tscope train: train an encoder-decoder on a toy task (copy, reverse, sort)
 * and report its held-out accuracy, optionally saving a checkpoint and a
 * training trace (loss, gradient norms per layer and attention snapshots on
 * a fixed probe batch, every K steps). docs/training.md explains the choices.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "model_flags.h"
#include "trace_cli.h"
#include "train_cmd.h"
#include "tscope/kernels.h"
#include "tscope/train.h"
#include "tscope/trace.h"

/* Defaults per task, used unless a flag says otherwise. A tiny model (d 16)
 * copies 10-token sequences of a 16-word vocabulary easily; reversing needs
 * every position to find its mirror, sorting needs to count: they get more
 * steps. See docs/training.md for the runs behind these numbers. */
typedef struct task_defaults {
    int vocab, seq, batch, steps, warmup;
    float lr;
} task_defaults;

static const task_defaults defaults[TS_TASK_COUNT] = {
    [TS_TASK_COPY] = {16, 10, 64, 1000, 100, 5e-3f},
    [TS_TASK_REVERSE] = {16, 10, 64, 1200, 100, 5e-3f},
    [TS_TASK_SORT] = {16, 10, 64, 2000, 100, 5e-3f},
};

#define EXAMPLES 3 /* decoded examples printed at the end */


/* ---- the trace's metadata ------------------------------------------------------ */

ts_status train_trace_settings(char **meta, const train_opts *o) {
    char json[128];
    snprintf(json, sizeof json, "{\"clip\":%.9g,\"label_smoothing\":%.9g}", (double)o->clip, (double)o->smoothing);
    return ts_trace_metadata_add_json(meta, "training", json);
}

/* The trace of a task run: every step kept with its values, the probe's ids
 * (its first sequence) as the axes' labels. */
static ts_status open_trace(const train_opts *o, const ts_model_config *cfg, const ts_task_data *d,
                            ts_trace_writer **w) {
    char ids[2][TS_TASK_MAX_SEQ][12];
    const char *src[TS_TASK_MAX_SEQ], *tgt[TS_TASK_MAX_SEQ];
    for (int i = 0; i < d->S; i++) snprintf(ids[0][i], sizeof ids[0][i], "%d", (int)d->hsrc[i]), src[i] = ids[0][i];
    for (int i = 0; i < d->T; i++) snprintf(ids[1][i], sizeof ids[1][i], "%d", (int)d->htgt[i]), tgt[i] = ids[1][i];
    char *config = trace_cli_config_json(cfg);
    char **line = calloc((size_t)o->argc + 1, sizeof *line);
    char *meta = NULL;
    ts_status st = TS_OK;
    if (!config || !line) {
        st = ts_fail(TS_ERR_NOMEM, "trace: no memory for the metadata");
    } else {
        line[0] = "tscope";
        for (int i = 0; i < o->argc; i++) line[i + 1] = o->argv[i];
        st = ts_trace_metadata_build(&meta, config, src, d->S, tgt, d->T, o->argc + 1, line);
    }
    if (!st) st = train_trace_settings(&meta, o);
    ts_trace_options opt;
    ts_trace_options_default(&opt);
    opt.level = TS_TRACE_VALUES;
    if (!st) st = ts_trace_writer_open(o->trace.path, meta, &opt, w);
    free(meta);
    free(line);
    free(config);
    return st;
}

/* ---- progress ------------------------------------------------------------------ */

void format_eta(char *buf, size_t size, double s) {
    if (!(s >= 0) || s > 360000) s = 0;
    int x = (int)(s + 0.5);
    if (x >= 3600)
        snprintf(buf, size, "%d:%02d:%02d", x / 3600, x / 60 % 60, x % 60);
    else
        snprintf(buf, size, "%d:%02d", x / 60, x % 60);
}

static void progress_bar(int64_t step, int64_t steps, double loss, double tok_s, double eta) {
    char bar[31], e[16];
    int fill = steps ? (int)(30 * step / steps) : 30;
    for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
    bar[30] = '\0';
    format_eta(e, sizeof e, eta);
    printf("\r[%s] step %lld/%lld  loss %.4f  %.1fk tok/s  ETA %s ", bar, (long long)step, (long long)steps, loss,
           tok_s / 1000, e);
    fflush(stdout);
}

/* What the progress callback prints from: a bar on a terminal, else a line
 * every tenth of the run, each with the mean loss since the one before. */
typedef struct progress_state {
    bool tty, quiet;
    int64_t log_every;
    double last_draw, lsum;
    int ln;
} progress_state;

static void progress(void *ctx, const ts_train_progress *p) {
    progress_state *ps = ctx;
    ps->lsum += p->loss, ps->ln++;
    bool last = p->step == p->steps || p->stopping;
    if (ps->tty && (p->seconds - ps->last_draw > 0.1 || last)) {
        progress_bar(p->step, p->steps, ps->lsum / ps->ln, p->tokens_per_s, p->eta);
        ps->last_draw = p->seconds;
        ps->lsum = 0, ps->ln = 0;
    }
    if (!ps->tty && !ps->quiet && (p->step % ps->log_every == 0 || last)) {
        printf("step %lld/%lld  loss %.4f", (long long)p->step, (long long)p->steps, ps->lsum / ps->ln);
        if (!isnan(p->heldout)) printf("  held-out %.4f", p->heldout);
        printf("  lr %.2e  grad norm %.3f  %.1fk tok/s  %.1f s\n", (double)p->lr, p->grad_norm, p->tokens_per_s / 1000,
               p->seconds);
        fflush(stdout);
        ps->lsum = 0, ps->ln = 0;
    }
}

/* ---- the run ----------------------------------------------------------------------- */

static void print_ids(const char *label, const int32_t *x, int n) {
    printf("  %-10s", label);
    for (int i = 0; i < n; i++) printf(" %d", (int)x[i]);
    printf("\n");
}

static void print_examples(const ts_task_data *d, const int32_t *pred) {
    printf("held-out examples (greedy decoding; the decoder starts from 1):\n");
    for (int b = 0; b < EXAMPLES && b < d->B; b++) {
        const int32_t *lab = d->hlab + (size_t)b * d->T;
        bool ok = memcmp(pred + (size_t)b * d->T, lab, sizeof(int32_t) * (size_t)d->T) == 0;
        print_ids("source", d->hsrc + (size_t)b * d->S, d->S);
        print_ids("expected", lab, d->T);
        print_ids("predicted", pred + (size_t)b * d->T, d->T);
        printf("  %s\n", ok ? "(exact)" : "(differs)");
    }
}

static ts_status save_checkpoint(const train_opts *o, const ts_model *m, ts_task_kind kind, int64_t steps,
                                 const ts_task_score *score) {
    char steps_s[32], acc[64];
    snprintf(steps_s, sizeof steps_s, "%lld", (long long)steps);
    snprintf(acc, sizeof acc, "exact %.1f%%, per-token %.1f%%", 100.0 * score->seqs_right / (double)score->seqs,
             100.0 * score->tokens_right / (double)score->tokens);
    const char *meta[] = {"task", ts_task_name(kind), "steps", steps_s, "held_out_accuracy", acc};
    return ts_train_save(m, o->save, 3, meta); /* and format, config: ts_train_save writes them */
}

/* A small model's step is a few hundred microseconds of work in many small
 * pieces: a second thread saves little and, on a busy machine, every
 * hand-over waits for a descheduled thread (a tiny copy run took 37 s on 2
 * threads beside another job, 4 s on one). Below 2 GFLOP a step, one thread,
 * unless TSCOPE_THREADS says otherwise. */
static ts_status one_thread_when_small(const ts_model_config *cfg) {
    if (getenv("TSCOPE_THREADS")) return TS_OK;
    ts_model_summary sum;
    ts_status st = ts_model_dry_run(cfg, NULL, &sum);
    if (st) return st;
    if (3.0 * sum.flops < 2e9) ts_kernels_set_threads(1);
    ts_model_summary_free(&sum);
    return TS_OK;
}

static int train(const train_opts *o, ts_model_config *cfg) {
    ts_task_kind kind;
    if (ts_task_parse(o->task, &kind)) return ts_cli_error("train", "%s", ts_last_error());
    const task_defaults *td = &defaults[kind];
    ts_train_loop_opts lo;
    ts_train_loop_opts_default(&lo);
    lo.steps = o->steps_seen ? o->steps : td->steps;
    lo.warmup = o->warmup_seen ? o->warmup : td->warmup;
    lo.lr = o->lr_seen ? o->lr : td->lr;
    lo.smoothing = o->smoothing;
    lo.clip = o->clip;
    lo.eval_every = o->eval_every;
    lo.patience = o->patience;
    lo.every = o->every;
    lo.ignore_index = 0; /* padding */
    if (o->schedule && strcmp(o->schedule, "cosine") == 0) {
        lo.schedule = TS_LR_COSINE;
        lo.min_lr = o->min_lr_seen ? o->min_lr : lo.lr / 10;
    }
    if (o->every < 1) return ts_cli_error("train", "--every %d must be at least 1", o->every);
    if (o->heldout < 1) return ts_cli_error("train", "--heldout %d must be at least 1", o->heldout);
    if (o->trace.path == NULL && o->every_seen) return ts_cli_error("train", "--every needs --trace FILE");
    if (o->trace.level || o->trace.only.count || o->trace.keep_batch_seen)
        return ts_cli_error("train", "a training trace keeps its own selection: --level, --only and --keep-batch "
                                     "are for tscope run");

    if (o->min_lr_seen && lo.schedule != TS_LR_COSINE) return ts_cli_error("train", "--min-lr is for --schedule cosine");
    ts_optim_config oc;
    bool adamw = o->optimizer ? strcmp(o->optimizer, "adamw") == 0 : o->wd_seen;
    ts_optim_config_default(&oc, adamw ? TS_OPTIM_ADAMW : TS_OPTIM_ADAM);
    oc.beta2 = 0.98f; /* the paper's Adam: betas (0.9, 0.98), eps 1e-9 */
    oc.eps = 1e-9f;
    oc.weight_decay = o->wd_seen ? o->weight_decay : (adamw ? 0.01f : 0.0f);

    ts_task_data d;
    ts_train_data src;
    ts_model m;
    ts_train tr;
    ts_optim opt;
    ts_trace_writer *w = NULL;
    memset(&d, 0, sizeof d), memset(&m, 0, sizeof m), memset(&tr, 0, sizeof tr), memset(&opt, 0, sizeof opt);
    int rc = 0;
    ts_status st = ts_kernels_init();
    if (!st) st = ts_train_loop_opts_check(&lo); /* before any work: they name the flag */
    if (st) return ts_cli_error("train", "%s", ts_last_error());
    if (!st) st = one_thread_when_small(cfg);
    if (!st) st = ts_task_data_init(&d, kind, cfg, o->heldout);
    if (!st) st = ts_model_init(&m, cfg);
    if (!st) st = ts_train_init(&tr, &m);
    if (!st) st = ts_optim_init(&opt, &oc, m.n_floats);
    if (!st && o->trace.path) st = open_trace(o, cfg, &d, &w);
    if (st) {
        rc = ts_cli_error("train", "%s", ts_last_error());
        goto out;
    }
    ts_task_data_source(&d, &src);
    ts_hook hook = w ? ts_trace_writer_hook(w) : (ts_hook){0};
    lo.trace = w ? &hook : NULL;
    int64_t params = 0;
    for (int i = 0; i < m.n_params; i++) params += m.params[i].numel;
    char desc[TS_MODEL_DESCRIBE_MAX];
    ts_model_config_describe(cfg, desc, sizeof desc);
    printf("# %s\n", desc);
    printf("# task %s: %d sequences of %d ids (1, then %d from [1, %d)) per step; %lld parameters; %s lr %g, "
           "warm-up %d%s, clip %g, label smoothing %g, weight decay %g; %d thread%s\n",
           ts_task_name(kind), d.B, d.S, d.S - 1, d.V, (long long)params, adamw ? "AdamW" : "Adam", (double)lo.lr,
           lo.warmup, lo.schedule == TS_LR_COSINE ? " then a cosine" : lo.warmup ? " then 1/sqrt(step)" : " (constant)", (double)o->clip, (double)o->smoothing,
           (double)oc.weight_decay, ts_kernels_threads(), ts_kernels_threads() == 1 ? "" : "s");
    fflush(stdout);

    progress_state ps = {.tty = isatty(fileno(stdout)) && !o->quiet, .quiet = o->quiet,
                         .log_every = lo.steps >= 20 ? lo.steps / 10 : 1};
    lo.progress = progress;
    lo.progress_ctx = &ps;
    ts_train_loop_result r;
    st = ts_train_loop(&tr, &opt, &src, &lo, &r);
    if (ps.tty) printf("\n");
    if (st) {
        rc = ts_cli_error("train", "%s", ts_last_error());
        goto out;
    }
    int64_t done = r.steps;
    printf("trained %lld steps in %.1f s (%.1f ms/step, %.1fk tokens/s)", (long long)done, r.seconds,
           done ? 1e3 * r.seconds / done : 0.0,
           done ? done * (double)src.tokens_per_step / r.seconds / 1000 : 0.0);
    if (r.early_stop)
        printf("; early stop: no better held-out loss in %d evaluations, back to step %lld (held-out loss %.4g)",
               o->patience, (long long)r.best_step, r.best_loss);
    printf("\n");
    ts_task_score score;
    int32_t *first = malloc(sizeof(int32_t) * (size_t)d.B * d.T);
    st = first ? ts_task_data_evaluate(&d, &m, &score, first) : ts_fail(TS_ERR_NOMEM, "out of memory");
    if (!st) print_examples(&d, first);
    free(first);
    if (st) {
        rc = ts_cli_error("train", "%s", ts_last_error());
        goto out;
    }
    if (o->save) {
        if ((st = save_checkpoint(o, &m, kind, done, &score))) {
            rc = ts_cli_error("train", "%s", ts_last_error());
            goto out;
        }
        printf("saved %s (%lld parameters)\n", o->save, (long long)params);
    }
    if (w) {
        printf("trace: %d snapshots of loss, gradient norms and attention\n", r.records);
        rc = trace_cli_close(&o->trace, w, "train");
        w = NULL;
    }
    printf("held-out accuracy: exact %.1f%%, per-token %.1f%%\n", 100.0 * score.seqs_right / (double)score.seqs,
           100.0 * score.tokens_right / (double)score.tokens);
out:
    if (w) ts_trace_writer_abort(w);
    ts_optim_free(&opt);
    ts_train_free(&tr);
    ts_model_free(&m);
    ts_task_data_free(&d);
    return rc;
}

/* ---- flags --------------------------------------------------------------------------- */

/* The model flags a task decides unless given: their rows' `seen` slots. */
typedef struct task_sized {
    bool *seen;
    int *value;
    bool was_seen;
} task_sized;

static void find_sized(ts_flag *flags, int n, const char *name, task_sized *out) {
    memset(out, 0, sizeof *out);
    for (int i = 0; i < n; i++)
        if (strcmp(flags[i].name, name) == 0) {
            out->seen = flags[i].seen;
            out->value = flags[i].value;
            out->was_seen = out->seen && *out->seen;
        }
}

/* Preset and model flags, then the task's sizes. The preset's sentence (if
 * any) is not used: the task makes the data. */
static ts_status resolve(const model_flags *mf, ts_flag *flags, int n, const task_defaults *td, ts_model_config *cfg) {
    task_sized vocab, seq, batch;
    find_sized(flags, n, "--vocab", &vocab);
    find_sized(flags, n, "--seq", &seq);
    find_sized(flags, n, "--batch", &batch);
    /* resolve without them: a preset's text would check them against itself */
    model_flags copy = *mf;
    bool *slots[3] = {vocab.seen, seq.seen, batch.seen};
    for (int k = 0; k < 3; k++)
        if (slots[k]) copy.seen[slots[k] - mf->seen] = false;
    /* model flags a task has no use for */
    if (mf->seen[F_TEXT]) return ts_fail(TS_ERR_ARG, "--text: the task makes the data (random ids), not a sentence");
    if (mf->seen[F_TRAIN_MODE])
        return ts_fail(TS_ERR_ARG, "--train-mode: tscope train always trains with dropout on (and evaluates without)");
    if (mf->seen[F_HEAD]) return ts_fail(TS_ERR_ARG, "--head: a task's model always has its vocabulary head");
    if (mf->seen[F_MASK] && strcmp(mf->mask, "causal") != 0)
        return ts_fail(TS_ERR_ARG, "--mask %s is about padded positions; a task's sequences have none (--mask causal "
                                   "is the one that changes training)", mf->mask);
    model_given g = {.trains = true};
    ts_status st = model_flags_resolve_given(&copy, &g, cfg, NULL);
    if (st) return st;
    if (cfg->arch != TS_ARCH_ENCODER_DECODER)
        return ts_fail(TS_ERR_ARG, "training tasks need an encoder-decoder; preset %s with these flags has no decoder",
                       cfg->preset[0] ? cfg->preset : "(none)");
    /* A preset made for random ids (copy: seed 004's sizes) keeps its own
     * sizes; one built around a sentence (tiny) takes the task's. */
    bool own = cfg->text == NULL && cfg->input == TS_INPUT_TOKENS && cfg->vocab > 0;
    cfg->input = TS_INPUT_TOKENS;
    cfg->head = TS_HEAD_LM;
    cfg->text = NULL;
    cfg->vocab = vocab.was_seen ? *vocab.value : own ? cfg->vocab : td->vocab;
    cfg->seq = seq.was_seen ? *seq.value : own ? cfg->seq : td->seq;
    cfg->batch = batch.was_seen ? *batch.value : own ? cfg->batch : td->batch;
    if (cfg->vocab < TS_MODEL_MIN_VOCAB)
        return ts_fail(TS_ERR_ARG, "--vocab %d is too small: a task's ids are 0 (padding), 1 (start) and the words; "
                                   "use at least %d", cfg->vocab, TS_MODEL_MIN_VOCAB);
    if (cfg->seq < 2 || cfg->seq > TS_TASK_MAX_SEQ)
        return ts_fail(TS_ERR_ARG, "--seq %d must be 2 to %d: the start id and at least one to predict", cfg->seq,
                       TS_TASK_MAX_SEQ);
    cfg->tgt_seq = cfg->seq - 1;
    if (cfg->pe == TS_PE_LEARNED && cfg->max_pos && cfg->max_pos < cfg->seq) cfg->max_pos = cfg->seq;
    return ts_model_config_check(cfg);
}

int ts_cmd_train(int argc, char **argv) {
    model_flags mf;
    train_opts o = {0};
    o.every = 10;
    o.eval_every = 100;
    o.heldout = 256;
    o.clip = 1.0f;
    o.argc = argc;
    o.argv = argv;
    ts_flag flags[MODEL_FLAGS_COUNT + 40];
    int n = model_flags_table(flags, 0, &mf);
    memset(&o.trace, 0, sizeof o.trace);
    o.trace.keep_batch = -1;
    const ts_flag rows[] = {
        {"--task", TS_FLAG_CHOICE, &o.task, NULL,
         "what to learn (required): a toy task, or lm, a language model of a text; sizes and steps follow the task",
         "copy|reverse|sort|lm", NULL, NULL},
        {"--steps", TS_FLAG_INT, &o.steps, "N", "optimizer steps (copy 1000, reverse 1200, sort 2000)", NULL, NULL,
         &o.steps_seen},
        {"--lr", TS_FLAG_FLOAT, &o.lr, "X", "peak learning rate (5e-3)", NULL, NULL, &o.lr_seen},
        {"--warmup", TS_FLAG_INT, &o.warmup, "N",
         "linear warm-up steps, then lr * sqrt(N / step), the paper's schedule; 0 = constant lr (100)", NULL, NULL,
         &o.warmup_seen},
        {"--label-smoothing", TS_FLAG_FLOAT, &o.smoothing, "X", "label smoothing of the cross-entropy (0; the paper: 0.1)",
         NULL, NULL, &o.smoothing_seen},
        {"--weight-decay", TS_FLAG_FLOAT, &o.weight_decay, "X", "AdamW's decoupled weight decay (0; with AdamW 0.01)",
         NULL, NULL, &o.wd_seen},
        {"--optimizer", TS_FLAG_CHOICE, &o.optimizer, NULL,
         "Adam (the paper's betas 0.9, 0.98, eps 1e-9) or AdamW (default: adamw when --weight-decay is given)",
         "adam|adamw", NULL, &o.optimizer_seen},
        {"--clip", TS_FLAG_FLOAT, &o.clip, "X", "clip the global gradient norm to X; 0 = no clipping (1)", NULL, NULL,
         &o.clip_seen},
        {"--eval-every", TS_FLAG_INT, &o.eval_every, "N", "held-out loss every N steps (100; lm 250)", NULL, NULL,
         &o.eval_every_seen},
        {"--patience", TS_FLAG_INT, &o.patience, "N",
         "early stopping: stop after N held-out evaluations without a 1% better loss and keep the best weights "
         "(0 = off)",
         NULL, NULL, &o.patience_seen},
        {"--heldout", TS_FLAG_INT, &o.heldout, "N", "held-out sequences, never trained on (256)", NULL, NULL,
         &o.heldout_seen},
        {"--save", TS_FLAG_STRING, &o.save, "W.safetensors",
         "write the trained weights (PyTorch names; written to a temporary file, then renamed); lm: and the "
         "training state beside them, W.safetensors.state, for --resume (lm runs of 1000 steps or more save to "
         "a default name, said at the start, when --save is not given)",
         NULL, NULL, NULL},
        {"--trace", TS_FLAG_STRING, &o.trace.path, "FILE",
         "a training trace: train.loss, train.grad_norm.<layer>, attention weights of 4 held-out sequences", NULL,
         NULL, NULL},
        {"--every", TS_FLAG_INT, &o.every, "K", "trace a snapshot every K steps (10), and at steps 0 and the last",
         NULL, NULL, &o.every_seen},
        {"--quiet", TS_FLAG_BOOL, &o.quiet, NULL, "no progress lines", NULL, NULL, NULL},
        /* --task lm */
        {"--corpus", TS_FLAG_STRING, &o.corpus, "FILE",
         "lm: the text to learn, any UTF-8 file (default: the King James Bible, `bible -f Gen1:1-Rev22:21` of "
         "Debian's bible-kjv)",
         NULL, NULL, &o.corpus_seen},
        {"--tokenizer", TS_FLAG_CHOICE, &o.tokenizer, NULL,
         "lm: characters, frequent words (--vocab of them) or GPT-2's BPE (char)", "char|word|bpe", NULL,
         &o.tokenizer_seen},
        {"--schedule", TS_FLAG_CHOICE, &o.schedule, NULL,
         "learning rate after the warm-up: the paper's 1/sqrt(step), or a cosine down to --min-lr (tasks: inv-sqrt; "
         "lm: cosine)",
         "inv-sqrt|cosine", NULL, &o.schedule_seen},
        {"--min-lr", TS_FLAG_FLOAT, &o.min_lr, "X", "where --schedule cosine ends (lr / 10)", NULL, NULL, &o.min_lr_seen},
        {"--repeat-frac", TS_FLAG_FLOAT, &o.repeat_frac, "X",
         "lm: this share of the training windows is a random sequence repeated, to grow induction heads (0)", NULL,
         NULL, &o.repeat_frac_seen},
        {"--probe", TS_FLAG_LIST, &o.probe, "TEXT",
         "lm: a text the trace follows (repeatable; repeated to fill the context; default: a held-out window of "
         "the corpus, for the Bible Genesis 1:1-3, and a random string written twice)",
         NULL, NULL, &o.probe_seen},
        {"--no-text-probe", TS_FLAG_BOOL, &o.no_text_probe, NULL,
         "lm: the trace follows only the random string written twice (a smaller trace)", NULL, NULL, NULL},
        {"--save-every", TS_FLAG_INT, &o.save_every, "N", "lm: also save the checkpoint every N steps (0: at the end)",
         NULL, NULL, &o.save_every_seen},
        {"--sample", TS_FLAG_INT, &o.sample, "N", "lm: print N sampled tokens at the end (300)", NULL, NULL,
         &o.sample_seen},
        {"--prompt", TS_FLAG_STRING, &o.prompt, "S",
         "lm: the sample's start (the corpus's first line; the Bible: \"And God said\"); checked before training",
         NULL, NULL, &o.prompt_seen},
        {"--resume", TS_FLAG_STRING, &o.resume, "W.safetensors",
         "lm: go on with a run saved by --save (or stopped by Ctrl-C): its weights, optimizer state, step, schedule "
         "and data, as if it had not stopped; saves back to it unless --save; --steps may raise the total",
         NULL, NULL, &o.resume_seen},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) flags[n++] = rows[i];
    const ts_cli_spec spec = {
        .command = "train",
        .synopsis = "--task copy|reverse|sort|lm [--preset P | model flags] [--steps N] [--lr X] [--warmup N] "
                    "[--label-smoothing X] [--weight-decay X] [--clip X] [--save W.safetensors] [--trace FILE --every K] "
                    "[--corpus FILE --tokenizer char|word|bpe]",
        .description =
            "Train an encoder-decoder on a toy task with data from a seeded RNG (seed 004's copy task: ids\n"
            "starting with 1, the decoder reads the answer shifted by one), then decode held-out sequences\n"
            "greedily. The last line is the held-out accuracy. The preset (tiny by default) gives the model;\n"
            "the task gives vocabulary 16, 10 ids per sequence and batch 64 unless --vocab, --seq, --batch say\n"
            "(preset copy keeps seed 004's: vocabulary 100, 10 ids, batch 64).\n"
            "\n"
            "--task lm trains a language model on a text (--corpus, by default the King James Bible) to\n"
            "predict each next token: preset lm (a causal stack of 4 layers of width 128, a context of 128\n"
            "characters) unless model flags say otherwise, AdamW with warm-up and a cosine, 5% of the text\n"
            "held out. Ctrl-C or SIGTERM stops it cleanly: the checkpoint (--save), its training state and the\n"
            "trace are written, and --resume goes on from there. The last line is the held-out loss and bits\n"
            "per character. docs/training.md explains the measures.",
        .flags = flags,
        .n_flags = n,
    };
    int rc = ts_cli_parse(&spec, argc, argv, NULL, NULL);
    if (rc >= 0) return rc;
    if (!o.task) return ts_cli_error("train", "--task is required: copy, reverse, sort or lm");
    if (strcmp(o.task, "lm") == 0) return train_lm(&o, &mf);
    const struct {
        const char *flag;
        bool seen;
    } lm_only[] = {{"--corpus", o.corpus_seen},         {"--tokenizer", o.tokenizer_seen},
                   {"--repeat-frac", o.repeat_frac_seen},
                   {"--probe", o.probe_seen},           {"--save-every", o.save_every_seen},
                   {"--sample", o.sample_seen},         {"--prompt", o.prompt_seen},
                   {"--no-text-probe", o.no_text_probe}, {"--resume", o.resume_seen}};
    for (size_t i = 0; i < sizeof lm_only / sizeof lm_only[0]; i++)
        if (lm_only[i].seen) return ts_cli_error("train", "%s is for --task lm", lm_only[i].flag);
    ts_task_kind kind;
    if (ts_task_parse(o.task, &kind)) return ts_cli_error("train", "%s", ts_last_error());
    ts_model_config cfg;
    if (resolve(&mf, flags, n, &defaults[kind], &cfg)) return ts_cli_error("train", "%s", ts_last_error());
    return train(&o, &cfg);
}
