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

#define PROBE_MAX 4     /* sequences in the probe batch a trace follows */
#define EXAMPLES 3      /* decoded examples printed at the end */
#define MAX_GROUPS 512  /* gradient-norm groups (layers) */

typedef struct train_opts {
    const char *task, *optimizer, *save;
    int steps, warmup, every, eval_every, patience, heldout;
    float lr, smoothing, weight_decay, clip;
    bool steps_seen, warmup_seen, lr_seen, wd_seen, every_seen, quiet;
    trace_cli trace;
    int argc;
    char **argv;
} train_opts;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- data ----------------------------------------------------------------- */

typedef struct task_data {
    ts_task_kind kind;
    int B, S, T, V;
    uint64_t seed;
    int32_t *src, *tgt, *labels; // (B, S), (B, T), (B, T): the current batch
    int n_held;                  // held-out batches
    int32_t *hsrc, *htgt, *hlab; // (n_held * B, ...)
} task_data;

static ts_status data_init(task_data *d, ts_task_kind kind, const ts_model_config *c, int heldout) {
    memset(d, 0, sizeof *d);
    d->kind = kind;
    d->B = c->batch, d->S = c->seq, d->T = c->tgt_seq, d->V = c->vocab;
    d->seed = c->seed;
    d->n_held = (heldout + d->B - 1) / d->B;
    size_t bs = (size_t)d->B * d->S, bt = (size_t)d->B * d->T, h = (size_t)d->n_held;
    d->src = malloc(sizeof(int32_t) * bs);
    d->tgt = malloc(sizeof(int32_t) * bt);
    d->labels = malloc(sizeof(int32_t) * bt);
    d->hsrc = malloc(sizeof(int32_t) * bs * h);
    d->htgt = malloc(sizeof(int32_t) * bt * h);
    d->hlab = malloc(sizeof(int32_t) * bt * h);
    if (!d->src || !d->tgt || !d->labels || !d->hsrc || !d->htgt || !d->hlab)
        return ts_fail(TS_ERR_NOMEM, "out of memory for the data");
    /* Held-out sequences come from their own stream: never trained on. */
    for (int i = 0; i < d->n_held; i++)
        ts_task_batch(kind, d->V, d->B, d->S, d->seed ^ 0x4E1DC0DEull, (uint64_t)i, d->hsrc + bs * i,
                      d->htgt + bt * i, d->hlab + bt * i);
    return TS_OK;
}

static void data_free(task_data *d) {
    free(d->src), free(d->tgt), free(d->labels), free(d->hsrc), free(d->htgt), free(d->hlab);
    memset(d, 0, sizeof *d);
}

/* Teacher-forced held-out loss with the inference forward (no dropout). */
static ts_status heldout_loss(ts_model *m, const task_data *d, double *loss) {
    bool was = m->training;
    ts_model_set_training(m, false);
    double sum = 0;
    ts_status st = TS_OK;
    for (int i = 0; i < d->n_held && !st; i++) {
        ts_model_input in = {.src_ids = d->hsrc + (size_t)i * d->B * d->S, .tgt_ids = d->htgt + (size_t)i * d->B * d->T};
        ts_tensor out;
        st = ts_model_forward(m, &in, NULL, &out);
        if (!st)
            sum += ts_bwd_cross_entropy_forward(out.data, d->hlab + (size_t)i * d->B * d->T, (int64_t)d->B * d->T, d->V,
                                                0, 0.0f, NULL);
    }
    ts_model_set_training(m, was);
    *loss = sum / d->n_held;
    return st;
}

/* ---- gradient norms per layer --------------------------------------------- */

/* "encoder.layers.3.linear1.weight" -> "encoder.layers.3"; "embed.norm.bias" -> "embed";
 * "decoder.embed.tokens.weight" -> "decoder.embed"; "generator.bias" -> "generator". */
static void group_of(const char *name, char *out, size_t size) {
    size_t layer = ts_name_layer_prefix(name);
    if (layer) {
        snprintf(out, size, "%.*s", (int)layer, name);
    } else if (strncmp(name, "decoder.embed.", 14) == 0) {
        snprintf(out, size, "decoder.embed");
    } else if (strncmp(name, "embed.", 6) == 0) {
        snprintf(out, size, "embed");
    } else {
        const char *dot = strrchr(name, '.');
        snprintf(out, size, "%.*s", dot ? (int)(dot - name) : (int)strlen(name), name);
    }
}

typedef struct groups {
    int n;
    char name[MAX_GROUPS][TS_MODEL_NAME_MAX];
    int *of_param; // (n_params) group of each parameter
} groups;

static ts_status groups_init(groups *g, const ts_model *m) {
    g->n = 0;
    g->of_param = malloc(sizeof(int) * (size_t)(m->n_params + 1));
    if (!g->of_param) return ts_fail(TS_ERR_NOMEM, "out of memory");
    for (int i = 0; i < m->n_params; i++) {
        char name[TS_MODEL_NAME_MAX];
        group_of(m->params[i].name, name, sizeof name);
        int k = 0;
        while (k < g->n && strcmp(g->name[k], name) != 0) k++;
        if (k == g->n && g->n < MAX_GROUPS) snprintf(g->name[g->n++], sizeof g->name[0], "%s", name);
        g->of_param[i] = k < g->n ? k : g->n - 1;
    }
    return TS_OK;
}

/* ---- the trace -------------------------------------------------------------- */

typedef struct tracer {
    ts_trace_writer *w;
    ts_hook hook;
    ts_model probe;      // a copy of the model at probe batch size
    int P;               // probe sequences
    int32_t *psrc, *ptgt;
    int records;
} tracer;

/* Only the attention weights of a probe forward go to the trace. */
static ts_status weights_only(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag) {
    tracer *tr = ctx;
    size_t n = strlen(name);
    if (tag != TS_TAG_ATTN_WEIGHTS || n < 8 || strcmp(name + n - 8, ".weights") != 0) return TS_OK;
    return ts_hook_call(&tr->hook, name, op, t, tag);
}

static ts_status scalar(tracer *t, const char *name, ts_op op, double v) {
    float x = (float)v;
    ts_tensor s;
    ts_tensor_view(&s, &x, 1, (int64_t[]){1});
    return ts_hook_call(&t->hook, name, op, &s, TS_TAG_SCALAR);
}

static ts_status tracer_open(tracer *t, const train_opts *o, const ts_model_config *cfg, const task_data *d) {
    memset(t, 0, sizeof *t);
    ts_model_config pc = *cfg;
    t->P = d->B < PROBE_MAX ? d->B : PROBE_MAX;
    pc.batch = t->P;
    ts_status st = ts_model_init(&t->probe, &pc);
    if (st) return st;
    /* the probe batch: the first held-out sequences */
    t->psrc = d->hsrc;
    t->ptgt = d->htgt;
    char ids[2][TS_TASK_MAX_SEQ][12];
    const char *src[TS_TASK_MAX_SEQ], *tgt[TS_TASK_MAX_SEQ];
    for (int i = 0; i < d->S; i++) snprintf(ids[0][i], sizeof ids[0][i], "%d", (int)d->hsrc[i]), src[i] = ids[0][i];
    for (int i = 0; i < d->T; i++) snprintf(ids[1][i], sizeof ids[1][i], "%d", (int)d->htgt[i]), tgt[i] = ids[1][i];
    char *config = trace_cli_config_json(cfg);
    char **line = calloc((size_t)o->argc + 1, sizeof *line);
    char *meta = NULL;
    if (!config || !line) {
        st = ts_fail(TS_ERR_NOMEM, "trace: no memory for the metadata");
    } else {
        line[0] = "tscope";
        for (int i = 0; i < o->argc; i++) line[i + 1] = o->argv[i];
        st = ts_trace_metadata_build(&meta, config, src, d->S, tgt, d->T, o->argc + 1, line);
    }
    ts_trace_options opt;
    ts_trace_options_default(&opt);
    opt.level = TS_TRACE_VALUES;
    if (!st) st = ts_trace_writer_open(o->trace.path, meta, &opt, &t->w);
    free(meta);
    free(line);
    free(config);
    if (st) {
        ts_model_free(&t->probe);
        return st;
    }
    t->hook = ts_trace_writer_hook(t->w);
    return TS_OK;
}

/* One snapshot: step, loss, learning rate, gradient norms, the probe's attention.
 * norm: the global gradient norm before clipping (the gradients in tr may be
 * clipped since: the layers' norms are scaled back by the same factor). */
static ts_status tracer_record(tracer *t, ts_train *tr, const groups *g, int64_t step, double loss, float lr,
                               double norm) {
    ts_model *m = tr->m;
    double now_norm = sqrt(ts_train_grad_sumsq(tr, NULL)), unclip = now_norm > 0 ? norm / now_norm : 1.0;
    ts_status st = scalar(t, "train.step", TS_OP_METRIC, (double)step);
    if (!st) st = scalar(t, "train.loss", TS_OP_CROSS_ENTROPY, loss);
    if (!st) st = scalar(t, "train.lr", TS_OP_METRIC, lr);
    if (!st) st = scalar(t, "train.grad_norm", TS_OP_GRAD, norm);
    double sums[MAX_GROUPS] = {0};
    for (int i = 0; i < m->n_params; i++) {
        const ts_model_param_info *p = &m->params[i];
        const float *x = tr->grads + p->offset;
        double s = 0;
        for (int64_t j = 0; j < p->numel; j++) s += (double)x[j] * x[j];
        sums[g->of_param[i]] += s;
    }
    char name[TS_MODEL_NAME_MAX + 32];
    for (int k = 0; k < g->n && !st; k++) {
        snprintf(name, sizeof name, "train.grad_norm.%s", g->name[k]);
        st = scalar(t, name, TS_OP_GRAD, sqrt(sums[k]) * unclip);
    }
    if (st) return st;
    memcpy(t->probe.block, m->block, sizeof(float) * (size_t)m->n_floats);
    ts_model_input in = {.src_ids = t->psrc, .tgt_ids = t->ptgt};
    ts_hook filter = {.fn = weights_only, .ctx = t};
    st = ts_model_forward(&t->probe, &in, &filter, NULL);
    t->records++;
    return st;
}

/* ---- progress ------------------------------------------------------------------ */

static void format_eta(char *buf, size_t size, double s) {
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

/* ---- the run ----------------------------------------------------------------------- */

/* Loss and gradients of the first training batch, with no update: what the
 * untrained model's trace record shows. */
static ts_status measure(ts_train *tr, task_data *d, const ts_train_step_opts *so, double *loss) {
    ts_task_batch(d->kind, d->V, d->B, d->S, d->seed, 1, d->src, d->tgt, d->labels);
    ts_model_input in = {.src_ids = d->src, .tgt_ids = d->tgt};
    ts_tensor out;
    ts_status st = ts_train_forward(tr, &in, &out);
    if (st) return st;
    int64_t rows = (int64_t)d->B * d->T;
    *loss = ts_bwd_cross_entropy_forward(out.data, d->labels, rows, d->V, 0, so->smoothing, NULL);
    ts_train_zero_grad(tr);
    ts_bwd_cross_entropy_backward(ts_train_output_grad(tr), 1.0f, out.data, d->labels, rows, d->V, 0, so->smoothing);
    return ts_train_backward(tr, NULL, NULL);
}

static void print_ids(const char *label, const int32_t *x, int n) {
    printf("  %-10s", label);
    for (int i = 0; i < n; i++) printf(" %d", (int)x[i]);
    printf("\n");
}

/* Greedy decoding of every held-out batch; prints a few examples. */
static ts_status evaluate(ts_model *m, const task_data *d, ts_task_score *score, bool examples) {
    bool was = m->training;
    ts_model_set_training(m, false);
    memset(score, 0, sizeof *score);
    int32_t *pred = malloc(sizeof(int32_t) * (size_t)d->B * d->T);
    ts_status st = pred ? TS_OK : ts_fail(TS_ERR_NOMEM, "out of memory");
    for (int i = 0; i < d->n_held && !st; i++) {
        const int32_t *src = d->hsrc + (size_t)i * d->B * d->S, *lab = d->hlab + (size_t)i * d->B * d->T;
        st = ts_task_greedy(m, src, pred);
        if (st) break;
        ts_task_score_add(score, pred, lab, d->B, d->T);
        if (examples && i == 0) {
            printf("held-out examples (greedy decoding; the decoder starts from 1):\n");
            for (int b = 0; b < EXAMPLES && b < d->B; b++) {
                bool ok = memcmp(pred + (size_t)b * d->T, lab + (size_t)b * d->T, sizeof(int32_t) * (size_t)d->T) == 0;
                print_ids("source", src + (size_t)b * d->S, d->S);
                print_ids("expected", lab + (size_t)b * d->T, d->T);
                print_ids(ok ? "predicted" : "predicted", pred + (size_t)b * d->T, d->T);
                printf("  %s\n", ok ? "(exact)" : "(differs)");
            }
        }
    }
    free(pred);
    ts_model_set_training(m, was);
    return st;
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
    int steps = o->steps_seen ? o->steps : td->steps, warmup = o->warmup_seen ? o->warmup : td->warmup;
    float lr = o->lr_seen ? o->lr : td->lr;
    if (steps < 0) return ts_cli_error("train", "--steps %d must not be negative", steps);
    if (warmup < 0) return ts_cli_error("train", "--warmup %d must not be negative", warmup);
    if (!(lr > 0)) return ts_cli_error("train", "--lr %g must be positive", (double)lr);
    if (!(o->smoothing >= 0 && o->smoothing < 1))
        return ts_cli_error("train", "--label-smoothing %g must be at least 0 and below 1", (double)o->smoothing);
    if (o->every < 1) return ts_cli_error("train", "--every %d must be at least 1", o->every);
    if (o->eval_every < 1) return ts_cli_error("train", "--eval-every %d must be at least 1", o->eval_every);
    if (o->heldout < 1) return ts_cli_error("train", "--heldout %d must be at least 1", o->heldout);
    if (o->trace.path == NULL && o->every_seen) return ts_cli_error("train", "--every needs --trace FILE");
    if (o->trace.level || o->trace.only.count || o->trace.keep_batch_seen)
        return ts_cli_error("train", "a training trace keeps its own selection: --level, --only and --keep-batch "
                                     "are for tscope run");

    ts_optim_config oc;
    bool adamw = o->optimizer ? strcmp(o->optimizer, "adamw") == 0 : o->wd_seen;
    ts_optim_config_default(&oc, adamw ? TS_OPTIM_ADAMW : TS_OPTIM_ADAM);
    oc.beta2 = 0.98f; /* the paper's Adam: betas (0.9, 0.98), eps 1e-9 */
    oc.eps = 1e-9f;
    oc.weight_decay = o->wd_seen ? o->weight_decay : (adamw ? 0.01f : 0.0f);

    task_data d;
    memset(&d, 0, sizeof d);
    ts_model m;
    ts_train tr;
    ts_optim opt;
    tracer tc;
    groups *g = calloc(1, sizeof *g);
    memset(&m, 0, sizeof m), memset(&tr, 0, sizeof tr), memset(&opt, 0, sizeof opt), memset(&tc, 0, sizeof tc);
    float *best = NULL;
    int rc = 0;
    ts_status st = g ? ts_kernels_init() : ts_fail(TS_ERR_NOMEM, "out of memory");
    if (!st) st = one_thread_when_small(cfg);
    if (!st) st = data_init(&d, kind, cfg, o->heldout);
    if (!st) st = ts_model_init(&m, cfg);
    if (!st) st = ts_train_init(&tr, &m);
    if (!st) st = ts_optim_init(&opt, &oc, m.n_floats);
    if (!st) st = groups_init(g, &m);
    if (!st && o->patience > 0 && !(best = malloc(sizeof(float) * (size_t)m.n_floats)))
        st = ts_fail(TS_ERR_NOMEM, "out of memory for the best weights");
    if (!st && o->trace.path) st = tracer_open(&tc, o, cfg, &d);
    if (st) {
        rc = ts_cli_error("train", "%s", ts_last_error());
        goto out;
    }
    ts_model_set_training(&m, true);
    int64_t params = 0;
    for (int i = 0; i < m.n_params; i++) params += m.params[i].numel;
    char desc[256];
    model_config_describe(cfg, desc, sizeof desc);
    printf("# %s\n", desc);
    printf("# task %s: %d sequences of %d ids (1, then %d from [1, %d)) per step; %lld parameters; %s lr %g, "
           "warm-up %d%s, clip %g, label smoothing %g, weight decay %g; %d thread%s\n",
           ts_task_name(kind), d.B, d.S, d.S - 1, d.V, (long long)params, adamw ? "AdamW" : "Adam", (double)lr,
           warmup, warmup ? " then 1/sqrt(step)" : " (constant)", (double)o->clip, (double)o->smoothing,
           (double)oc.weight_decay, ts_kernels_threads(), ts_kernels_threads() == 1 ? "" : "s");
    fflush(stdout);

    bool tty = isatty(fileno(stdout)) && !o->quiet;
    int log_every = steps >= 20 ? steps / 10 : 1;
    ts_train_step_opts so = {lr, o->smoothing, o->clip, 0};
    ts_train_step_result r = {0};
    double t0 = now(), last_draw = 0, best_loss = INFINITY;
    double tsum = 0, lsum = 0; /* losses since the last trace record, since the last progress line */
    int tn = 0, ln = 0, since_best = 0;
    int64_t best_step = 0, done = 0;
    bool stopped = false;
    if (tc.w) { /* the untrained model: loss, gradients and attention before any step */
        double l0 = 0;
        st = measure(&tr, &d, &so, &l0);
        if (!st) st = tracer_record(&tc, &tr, g, 0, l0, 0.0f, sqrt(ts_train_grad_sumsq(&tr, NULL)));
    }
    for (int64_t step = 1; step <= steps && !st && !stopped; step++) {
        ts_task_batch(kind, d.V, d.B, d.S, d.seed, (uint64_t)step, d.src, d.tgt, d.labels);
        ts_model_input in = {.src_ids = d.src, .tgt_ids = d.tgt};
        so.lr = ts_optim_lr(lr, warmup, step);
        st = ts_train_step(&tr, &opt, &in, d.labels, &so, &r);
        if (st) break;
        done = step;
        if (!isfinite(r.loss)) {
            st = ts_fail(TS_ERR_ARG, "the loss became %g at step %lld: try a smaller --lr or --clip 1", r.loss,
                         (long long)step);
            break;
        }
        tsum += r.loss, tn++, lsum += r.loss, ln++;
        if (tc.w && (step % o->every == 0 || step == steps)) {
            st = tracer_record(&tc, &tr, g, step, tsum / tn, so.lr, r.grad_norm);
            tsum = 0, tn = 0;
            if (st) break;
        }
        double el = now() - t0, tok_s = (double)step * d.B * (d.S + d.T) / el, eta = el / step * (steps - step);
        bool eval = step % o->eval_every == 0 || step == steps;
        double hl = NAN;
        if (eval) {
            if ((st = heldout_loss(&m, &d, &hl))) break;
            if (hl < best_loss * 0.99) {
                best_loss = hl, best_step = step, since_best = 0;
                if (best) memcpy(best, m.block, sizeof(float) * (size_t)m.n_floats);
            } else if (o->patience > 0 && ++since_best >= o->patience) {
                stopped = true;
            }
        }
        if (tty && (el - last_draw > 0.1 || step == steps || stopped)) {
            progress_bar(step, steps, lsum / ln, tok_s, eta);
            last_draw = el;
            lsum = 0, ln = 0;
        }
        if (!tty && !o->quiet && (step % log_every == 0 || step == steps || stopped)) {
            printf("step %lld/%lld  loss %.4f", (long long)step, (long long)steps, lsum / ln);
            if (eval) printf("  held-out %.4f", hl);
            printf("  lr %.2e  grad norm %.3f  %.1fk tok/s  %.1f s\n", (double)so.lr, r.grad_norm, tok_s / 1000, el);
            fflush(stdout);
            lsum = 0, ln = 0;
        }
    }
    if (tty) printf("\n");
    if (st) {
        rc = ts_cli_error("train", "%s", ts_last_error());
        goto out;
    }
    double elapsed = now() - t0;
    printf("trained %lld steps in %.1f s (%.1f ms/step, %.1fk tokens/s)", (long long)done, elapsed,
           done ? 1e3 * elapsed / done : 0.0, done ? done * (double)d.B * (d.S + d.T) / elapsed / 1000 : 0.0);
    if (stopped)
        printf("; early stop: no better held-out loss in %d evaluations, back to step %lld (held-out loss %.4g)",
               o->patience, (long long)best_step, best_loss);
    printf("\n");
    if (stopped && best) memcpy(m.block, best, sizeof(float) * (size_t)m.n_floats);
    ts_task_score score;
    if ((st = evaluate(&m, &d, &score, true))) {
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
    if (tc.w) {
        printf("trace: %d snapshots of loss, gradient norms and attention\n", tc.records);
        rc = trace_cli_close(&o->trace, tc.w, "train");
        tc.w = NULL;
    }
    printf("held-out accuracy: exact %.1f%%, per-token %.1f%%\n", 100.0 * score.seqs_right / (double)score.seqs,
           100.0 * score.tokens_right / (double)score.tokens);
out:
    if (tc.w) ts_trace_writer_abort(tc.w);
    ts_model_free(&tc.probe);
    free(best);
    if (g) free(g->of_param);
    free(g);
    ts_optim_free(&opt);
    ts_train_free(&tr);
    ts_model_free(&m);
    data_free(&d);
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
    ts_flag flags[MODEL_FLAGS_COUNT + 20];
    int n = model_flags_table(flags, 0, &mf);
    memset(&o.trace, 0, sizeof o.trace);
    o.trace.keep_batch = -1;
    const ts_flag rows[] = {
        {"--task", TS_FLAG_CHOICE, &o.task, NULL, "what to learn (required); sizes and steps follow the task",
         "copy|reverse|sort", NULL, NULL},
        {"--steps", TS_FLAG_INT, &o.steps, "N", "optimizer steps (copy 1000, reverse 1200, sort 2000)", NULL, NULL,
         &o.steps_seen},
        {"--lr", TS_FLAG_FLOAT, &o.lr, "X", "peak learning rate (5e-3)", NULL, NULL, &o.lr_seen},
        {"--warmup", TS_FLAG_INT, &o.warmup, "N",
         "linear warm-up steps, then lr * sqrt(N / step), the paper's schedule; 0 = constant lr (100)", NULL, NULL,
         &o.warmup_seen},
        {"--label-smoothing", TS_FLAG_FLOAT, &o.smoothing, "X", "label smoothing of the cross-entropy (0; the paper: 0.1)",
         NULL, NULL, NULL},
        {"--weight-decay", TS_FLAG_FLOAT, &o.weight_decay, "X", "AdamW's decoupled weight decay (0; with AdamW 0.01)",
         NULL, NULL, &o.wd_seen},
        {"--optimizer", TS_FLAG_CHOICE, &o.optimizer, NULL,
         "Adam (the paper's betas 0.9, 0.98, eps 1e-9) or AdamW (default: adamw when --weight-decay is given)",
         "adam|adamw", NULL, NULL},
        {"--clip", TS_FLAG_FLOAT, &o.clip, "X", "clip the global gradient norm to X; 0 = no clipping (1)", NULL, NULL,
         NULL},
        {"--eval-every", TS_FLAG_INT, &o.eval_every, "N", "held-out loss every N steps (100)", NULL, NULL, NULL},
        {"--patience", TS_FLAG_INT, &o.patience, "N",
         "early stopping: stop after N held-out evaluations without a 1% better loss and keep the best weights "
         "(0 = off)",
         NULL, NULL, NULL},
        {"--heldout", TS_FLAG_INT, &o.heldout, "N", "held-out sequences, never trained on (256)", NULL, NULL, NULL},
        {"--save", TS_FLAG_STRING, &o.save, "W.safetensors",
         "write the trained weights (PyTorch names; written to a temporary file, then renamed)", NULL, NULL, NULL},
        {"--trace", TS_FLAG_STRING, &o.trace.path, "FILE",
         "a training trace: train.loss, train.grad_norm.<layer>, attention weights of 4 held-out sequences", NULL,
         NULL, NULL},
        {"--every", TS_FLAG_INT, &o.every, "K", "trace a snapshot every K steps (10), and at steps 0 and the last",
         NULL, NULL, &o.every_seen},
        {"--quiet", TS_FLAG_BOOL, &o.quiet, NULL, "no progress lines", NULL, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) flags[n++] = rows[i];
    const ts_cli_spec spec = {
        .command = "train",
        .synopsis = "--task copy|reverse|sort [--preset P | model flags] [--steps N] [--lr X] [--warmup N] "
                    "[--label-smoothing X] [--weight-decay X] [--clip X] [--save W.safetensors] [--trace FILE --every K]",
        .description =
            "Train an encoder-decoder on a toy task with data from a seeded RNG (seed 004's copy task: ids\n"
            "starting with 1, the decoder reads the answer shifted by one), then decode held-out sequences\n"
            "greedily. The last line is the held-out accuracy. The preset (tiny by default) gives the model;\n"
            "the task gives vocabulary 16, 10 ids per sequence and batch 64 unless --vocab, --seq, --batch say\n"
            "(preset copy keeps seed 004's: vocabulary 100, 10 ids, batch 64).",
        .flags = flags,
        .n_flags = n,
    };
    int rc = ts_cli_parse(&spec, argc, argv, NULL, NULL);
    if (rc >= 0) return rc;
    if (!o.task) return ts_cli_error("train", "--task is required: copy, reverse or sort");
    ts_task_kind kind;
    if (ts_task_parse(o.task, &kind)) return ts_cli_error("train", "%s", ts_last_error());
    ts_model_config cfg;
    if (resolve(&mf, flags, n, &defaults[kind], &cfg)) return ts_cli_error("train", "%s", ts_last_error());
    return train(&o, &cfg);
}
