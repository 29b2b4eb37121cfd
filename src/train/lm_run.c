/* lm_run: a language model's training run, as `tscope train --task lm`
 * drives it (train.h, "a language model's training run"): the run resumed
 * from its checkpoint and the training state beside it, the data, model and
 * optimizer built, the loop run (saving every save_every steps), the run
 * saved so that --resume goes on exactly where it was, a sample drawn from
 * what it learnt. The command line reads the flags, the corpus and the
 * tokenizer, and prints. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tscope/io.h"
#include "tscope/train.h"

/* The last message again after a prefix naming where its text came from
 * (the flag and its value, fmt with one %s). */
static ts_status named(ts_status st, const char *fmt, const char *arg) {
    char head[600];
    snprintf(head, sizeof head, fmt, arg);
    return ts_fail(st, "%s: %s", head, ts_last_error());
}

/* 1 for the matrices, 0 for biases and LayerNorm gains: what AdamW decays. */
static ts_status decay_matrices(ts_optim *opt, const ts_model *m) {
    uint8_t *mask = calloc((size_t)m->n_floats + 1, 1);
    if (!mask) return ts_fail(TS_ERR_NOMEM, "out of memory");
    for (int i = 0; i < m->n_params; i++)
        if (m->params[i].rank == 2) memset(mask + m->params[i].offset, 1, (size_t)m->params[i].numel);
    ts_status st = ts_optim_set_decay(opt, mask);
    free(mask);
    return st;
}

/* ---- saving and resuming ------------------------------------------------------------ */

/* FNV-1a over the ids: the same text through the same tokenizer, the same number. */
static void fingerprint(const int32_t *ids, size_t n, char *out, size_t size) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        for (int b = 0; b < 4; b++) h = (h ^ (((uint32_t)ids[i] >> (8 * b)) & 0xFF)) * 1099511628211ull;
    snprintf(out, size, "%016llx", (unsigned long long)h);
}

/* FNV-1a over the model's parameters, one by one (not the block's padding
 * between them): the weights a state was saved with. */
static void weights_digest(const ts_model *m, char *out, size_t size) {
    uint64_t h = 1469598103934665603ull;
    for (int p = 0; p < m->n_params; p++) {
        const unsigned char *b = (const unsigned char *)(m->block + m->params[p].offset);
        for (size_t i = 0; i < sizeof(float) * (size_t)m->params[p].numel; i++) h = (h ^ b[i]) * 1099511628211ull;
    }
    snprintf(out, size, "%016llx", (unsigned long long)h);
}

/* The same over the model's config as JSON (its seed included): the run's model. */
static void config_digest(const ts_model_config *c, char *out, size_t size) {
    char *json = ts_model_config_to_json(c);
    uint64_t h = 1469598103934665603ull;
    for (const char *p = json ? json : ""; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    free(json);
    snprintf(out, size, "%016llx", (unsigned long long)h);
}

/* The weights at `step`, then the training state beside them (PATH.state). */
ts_status ts_lm_run_save(ts_lm_run *r, int64_t step) {
    const ts_train_loop_opts *lo = &r->lo;
    const ts_optim_config *oc = &r->opt.cfg;
    char v[24][40];
    int k = 0;
#define PUT(fmt, x) snprintf(v[k++], sizeof v[0], fmt, x)
    PUT("%lld", (long long)step);
    PUT("%lld", (long long)lo->steps);
    PUT("%.9g", (double)lo->lr);
    PUT("%.9g", (double)lo->min_lr);
    PUT("%d", lo->warmup);
    PUT("%s", lo->schedule == TS_LR_COSINE ? "cosine" : "inv-sqrt");
    PUT("%.9g", (double)lo->clip);
    PUT("%.9g", (double)lo->smoothing);
    PUT("%d", lo->eval_every);
    PUT("%s", oc->kind == TS_OPTIM_ADAMW ? "adamw" : "adam");
    PUT("%.9g", (double)oc->beta1);
    PUT("%.9g", (double)oc->beta2);
    PUT("%.9g", (double)oc->eps);
    PUT("%.9g", (double)oc->weight_decay);
    PUT("%llu", (unsigned long long)r->tr.forwards);
    PUT("%d", r->dop.heldout);
    PUT("%.9g", (double)r->dop.repeat_frac);
    PUT("%lld", (long long)r->corpus_tokens);
    PUT("%d", lo->patience);
#undef PUT
    char wd[24], cd[24];
    weights_digest(&r->m, wd, sizeof wd);
    config_digest(&r->cfg, cd, sizeof cd);
    const char *meta[] = {"format", "tscope-train-state", "step", v[0], "steps", v[1], "lr", v[2], "min_lr", v[3],
                          "warmup", v[4], "schedule", v[5], "clip", v[6], "label_smoothing", v[7],
                          "eval_every", v[8], "optimizer", v[9], "beta1", v[10], "beta2", v[11], "eps", v[12],
                          "weight_decay", v[13], "forwards", v[14], "heldout", v[15], "repeat_frac", v[16],
                          "corpus_tokens", v[17], "patience", v[18], "corpus", r->corpus,
                          "corpus_hash", r->corpus_hash, "weights_digest", wd, "config_digest", cd};
    /* the checkpoint's own "steps" says the step it holds, at a periodic save too */
    const char **cm = malloc(sizeof *cm * (size_t)(2 * r->n_meta + 2));
    if (!cm) return ts_fail(TS_ERR_NOMEM, "out of memory saving %s", r->save);
    int n_cm = 0;
    for (int i = 0; i < r->n_meta; i++) {
        cm[2 * n_cm] = r->meta[2 * i];
        cm[2 * n_cm + 1] = strcmp(r->meta[2 * i], "steps") == 0 ? v[0] : r->meta[2 * i + 1];
        n_cm++;
    }
    ts_status st = ts_train_save(&r->m, r->save, n_cm, cm);
    free(cm);
    TS_TRY(st);
    char state[4096 + 8];
    snprintf(state, sizeof state, "%s.state", r->save);
    return ts_optim_state_save(state, &r->opt, (int)(sizeof meta / sizeof meta[0]) / 2, meta);
}

/* A value of the state file: a whole number, or a float as written. */
static ts_status state_int(const ts_safetensors *f, const char *key, int64_t lo, int64_t hi, int64_t *out) {
    const char *v = ts_safetensors_meta(f, key);
    int64_t x;
    if (!ts_text_int(v, lo, hi, &x))
        return ts_fail(TS_ERR_FORMAT, "%s: \"%s\" is %s%.40s%s, not a whole number from %lld to %lld", f->path, key,
                       v ? "\"" : "", v ? v : "missing", v ? "\"" : "", (long long)lo, (long long)hi);
    *out = x;
    return TS_OK;
}

static ts_status state_float(const ts_safetensors *f, const char *key, float *out) {
    const char *v = ts_safetensors_meta(f, key);
    char *end = NULL;
    float x = v ? strtof(v, &end) : 0;
    if (!v || end == v || *end || !isfinite(x) || x < 0)
        return ts_fail(TS_ERR_FORMAT, "%s: \"%s\" is %s%.40s%s, not a number of 0 or more", f->path, key,
                       v ? "\"" : "", v ? v : "missing", v ? "\"" : "");
    *out = x;
    return TS_OK;
}

/* The loop's, the optimizer's and the data's settings of the run to resume,
 * from its state file f. */
static ts_status read_state(const ts_safetensors *f, ts_train_loop_opts *lo, ts_optim_config *oc,
                            ts_lm_data_opts *dop, int64_t *forwards, int64_t *corpus_tokens) {
    const char *format = ts_safetensors_meta(f, "format");
    if (!format || strcmp(format, "tscope-train-state") != 0)
        return ts_fail(TS_ERR_FORMAT, "%s: no \"format\": \"tscope-train-state\" in its metadata: not a training "
                                      "state written by tscope train --task lm", f->path);
    int64_t x;
    TS_TRY(state_int(f, "step", 1, INT64_MAX / 2, &lo->first_step));
    TS_TRY(state_int(f, "steps", 1, INT64_MAX / 2, &lo->steps));
    TS_TRY(state_float(f, "lr", &lo->lr));
    TS_TRY(state_float(f, "min_lr", &lo->min_lr));
    TS_TRY(state_int(f, "warmup", 0, INT32_MAX, &x));
    lo->warmup = (int)x;
    const char *sched = ts_safetensors_meta(f, "schedule"), *optim = ts_safetensors_meta(f, "optimizer");
    if (!sched || (strcmp(sched, "cosine") != 0 && strcmp(sched, "inv-sqrt") != 0))
        return ts_fail(TS_ERR_FORMAT, "%s: \"schedule\" is not cosine or inv-sqrt", f->path);
    lo->schedule = strcmp(sched, "cosine") == 0 ? TS_LR_COSINE : TS_LR_INV_SQRT;
    TS_TRY(state_float(f, "clip", &lo->clip));
    TS_TRY(state_float(f, "label_smoothing", &lo->smoothing));
    if (!(lo->smoothing < 1))
        return ts_fail(TS_ERR_FORMAT, "%s: \"label_smoothing\" is %g, not below 1: the state is damaged", f->path,
                       (double)lo->smoothing);
    TS_TRY(state_int(f, "eval_every", 1, INT32_MAX, &x));
    lo->eval_every = (int)x;
    if (!optim || (strcmp(optim, "adam") != 0 && strcmp(optim, "adamw") != 0))
        return ts_fail(TS_ERR_FORMAT, "%s: \"optimizer\" is not adam or adamw", f->path);
    ts_optim_config_default(oc, strcmp(optim, "adamw") == 0 ? TS_OPTIM_ADAMW : TS_OPTIM_ADAM);
    TS_TRY(state_float(f, "beta1", &oc->beta1));
    TS_TRY(state_float(f, "beta2", &oc->beta2));
    TS_TRY(state_float(f, "eps", &oc->eps));
    TS_TRY(state_float(f, "weight_decay", &oc->weight_decay));
    if (!(oc->beta1 < 1) || !(oc->beta2 < 1) || !(oc->eps > 0))
        return ts_fail(TS_ERR_FORMAT, "%s: \"beta1\" %g, \"beta2\" %g, \"eps\" %g: betas are below 1 and eps above 0; "
                                      "the state is damaged", f->path, (double)oc->beta1, (double)oc->beta2, (double)oc->eps);
    TS_TRY(state_int(f, "forwards", 0, INT64_MAX, forwards));
    TS_TRY(state_int(f, "heldout", 1, INT32_MAX, &x));
    dop->heldout = (int)x;
    TS_TRY(state_float(f, "repeat_frac", &dop->repeat_frac));
    TS_TRY(state_int(f, "corpus_tokens", 1, INT64_MAX, corpus_tokens));
    TS_TRY(state_int(f, "patience", 0, INT32_MAX, &x));
    if (x > 0) /* early stopping's memory (the best weights so far) is not in the state */
        return ts_fail(TS_ERR_UNSUPPORTED, "%s: the run used --patience %lld, whose best weights are not saved: it "
                                           "cannot be resumed exactly", f->path, (long long)x);
    return TS_OK;
}

/* ---- the run ---------------------------------------------------------------------------- */

ts_status ts_lm_run_resume(ts_lm_run *r, const char *resume, ts_lmtok *tok) {
    char path[4096 + 8];
    snprintf(path, sizeof path, "%s.state", resume);
    r->resume = resume;
    ts_status st = ts_lm_checkpoint_read(resume, NULL, &r->cfg, tok);
    if (st) {
        st = named(st, "--resume %s", resume);
    } else if (access(path, F_OK) != 0) {
        st = ts_fail(TS_ERR_ARG, "--resume %s: no training state %s beside it (tscope train --task lm --save "
                                 "writes one): without the optimizer's state the run cannot go on as it was",
                     resume, path);
    } else {
        st = ts_safetensors_open(&r->state, path);
        r->state_open = !st;
    }
    if (!st) st = read_state(&r->state, &r->lo, &r->oc, &r->dop, &r->forwards, &r->corpus_tokens);
    return st;
}

const char *ts_lm_run_resumed_corpus(const ts_lm_run *r) {
    return r->state_open ? ts_safetensors_meta(&r->state, "corpus") : NULL;
}

ts_status ts_lm_run_corpus(ts_lm_run *r, const int32_t *ids, size_t n, const char *path, const char *name) {
    fingerprint(ids, n, r->corpus_hash, sizeof r->corpus_hash);
    if (r->resume) {
        const char *want = ts_safetensors_meta(&r->state, "corpus_hash");
        char how[96];
        if ((int64_t)n != r->corpus_tokens)
            snprintf(how, sizeof how, "%zu tokens; it learnt from %lld", n, (long long)r->corpus_tokens);
        else
            snprintf(how, sizeof how, "as many tokens, %zu, but not the same ones", n);
        if (!want || strcmp(want, r->corpus_hash) != 0 || (int64_t)n != r->corpus_tokens)
            return ts_fail(TS_ERR_ARG, "%s%s is not the text the run of --resume %s was trained on (%s): give the same "
                                       "--corpus", path ? "--corpus " : "", name, r->resume, how);
    }
    r->corpus_tokens = (int64_t)n;
    snprintf(r->corpus, sizeof r->corpus, "%s", path ? path : "");
    return TS_OK;
}

ts_status ts_lm_run_data(ts_lm_run *r, const int32_t *ids, size_t n) {
    r->dop.batch = r->cfg.batch, r->dop.ctx = r->cfg.seq, r->dop.vocab = r->cfg.vocab, r->dop.seed = r->cfg.seed;
    return ts_lm_data_init(&r->d, ids, (int64_t)n, &r->dop);
}

/* The step a checkpoint's metadata says it holds, as words for a message. */
static void checkpoint_step(const char *path, char *out, size_t size) {
    ts_safetensors f;
    int64_t k;
    snprintf(out, size, "an unknown step");
    if (ts_safetensors_open(&f, path)) return;
    if (ts_text_int(ts_safetensors_meta(&f, "steps"), 0, INT64_MAX, &k)) snprintf(out, size, "step %lld", (long long)k);
    ts_safetensors_close(&f);
}

/* A resumed state belongs to its checkpoint: saved with these weights, this
 * model (its seed included), and its optimizer at the state's step. */
static ts_status belongs(ts_lm_run *r) {
    const ts_safetensors *f = &r->state;
    const char *want_w = ts_safetensors_meta(f, "weights_digest"), *want_c = ts_safetensors_meta(f, "config_digest");
    char wd[24], cd[24], ck[40];
    weights_digest(&r->m, wd, sizeof wd);
    config_digest(&r->cfg, cd, sizeof cd);
    if (!want_w || !want_c)
        return ts_fail(TS_ERR_FORMAT, "%s: no \"weights_digest\" or \"config_digest\": a state written before "
                                      "tscope tied states to their checkpoints, or not one; it cannot be matched to %s",
                       f->path, r->resume);
    if (strcmp(want_w, wd) != 0 || strcmp(want_c, cd) != 0) {
        checkpoint_step(r->resume, ck, sizeof ck);
        return ts_fail(TS_ERR_ARG, "--resume %s: its training state %s was saved at step %lld with other %s than the "
                                   "checkpoint's (%s): give a checkpoint and the state saved with it",
                       r->resume, f->path, (long long)r->lo.first_step,
                       strcmp(want_c, cd) != 0 ? "model settings" : "weights", ck);
    }
    if (r->opt.steps != r->lo.first_step)
        return ts_fail(TS_ERR_FORMAT, "%s: the optimizer has taken %lld steps but the run is at step %lld: the state "
                                      "is damaged", f->path, (long long)r->opt.steps, (long long)r->lo.first_step);
    return TS_OK;
}

ts_status ts_lm_run_model(ts_lm_run *r) {
    ts_status st = ts_model_init(&r->m, &r->cfg);
    if (!st && r->resume && (st = ts_lm_checkpoint_load(&r->m, r->resume, NULL))) st = named(st, "--resume %s", r->resume);
    if (!st) st = ts_train_init(&r->tr, &r->m);
    if (!st) r->tr.forwards = (uint64_t)r->forwards;
    if (!st) st = ts_optim_init(&r->opt, &r->oc, r->m.n_floats);
    if (!st && r->oc.kind == TS_OPTIM_ADAMW) st = decay_matrices(&r->opt, &r->m);
    if (!st && r->resume) st = ts_optim_state_load(&r->state, &r->opt);
    if (!st && r->resume) st = belongs(r);
    return st;
}

void ts_lm_run_close_state(ts_lm_run *r) {
    if (r->state_open) ts_safetensors_close(&r->state);
    r->state_open = false;
}

/* The loop's progress, after a save every save_every steps (not at the last:
 * the caller saves the end). */
static void run_progress(void *ctx, const ts_train_progress *p) {
    ts_lm_run *r = ctx;
    bool last = p->step == p->steps || p->stopping;
    if (r->save_every > 0 && p->step % r->save_every == 0 && !last && !r->save_st)
        r->save_st = ts_lm_run_save(r, p->step);
    if (r->progress) r->progress(r->progress_ctx, p);
}

ts_status ts_lm_run_train(ts_lm_run *r, const ts_hook *trace, ts_train_loop_result *out) {
    ts_train_data src;
    ts_lm_data_source(&r->d, &src);
    r->tokens_per_step = src.tokens_per_step;
    r->lo.trace = trace;
    r->lo.progress = run_progress;
    r->lo.progress_ctx = r;
    memset(out, 0, sizeof *out);
    ts_status st = ts_train_loop(&r->tr, &r->opt, &src, &r->lo, out);
    return !st && r->save_st ? r->save_st : st;
}

ts_status ts_lm_run_sample(const ts_lm_run *r, const ts_lmtok *tok, const ts_bpe_ids *prompt, int n_sample, char **out,
                           size_t *out_len) {
    ts_model_config c = r->cfg;
    c.batch = 1;
    ts_model m;
    ts_status st = ts_model_init(&m, &c);
    if (st) return st;
    memcpy(m.block, r->m.block, sizeof(float) * (size_t)m.n_floats);
    ts_bpe_ids ids = {0};
    if (!(ids.ids = malloc(sizeof(int32_t) * (prompt->count + 1)))) st = ts_fail(TS_ERR_NOMEM, "out of memory");
    else memcpy(ids.ids, prompt->ids, sizeof(int32_t) * prompt->count), ids.count = ids.cap = prompt->count;
    int S = c.seq, V = c.vocab;
    int32_t *window = calloc((size_t)S, sizeof *window);
    for (int k = 0; !st && k < n_sample; k++) {
        size_t n = ids.count, from = n > (size_t)S ? n - (size_t)S : 0;
        memset(window, 0, sizeof(int32_t) * (size_t)S);
        memcpy(window, ids.ids + from, sizeof(int32_t) * (n - from));
        ts_model_input in = {.src_ids = window};
        ts_tensor logits;
        if ((st = ts_model_forward(&m, &in, NULL, &logits))) break;
        /* causal: the positions after the text change nothing before them */
        const float *row = logits.data + (int64_t)(n - from - 1) * V;
        int32_t next = ts_model_sample(row, V, 0.8f, 0, ts_u01(ts_mix64(c.seed ^ 0x5A3Eull), (uint64_t)k), NULL);
        if (next < 0) {
            st = ts_fail(TS_ERR_ARG, "the sample's logits hold NaN or +Inf after training");
            break;
        }
        if (ids.count == ids.cap) {
            size_t cap = ids.cap ? 2 * ids.cap : 64;
            int32_t *p = realloc(ids.ids, sizeof(int32_t) * cap);
            if (!p) {
                st = ts_fail(TS_ERR_NOMEM, "out of memory");
                break;
            }
            ids.ids = p, ids.cap = cap;
        }
        ids.ids[ids.count++] = next;
    }
    if (!st) st = ts_lmtok_decode(tok, ids.ids, ids.count, out, out_len);
    free(window);
    ts_bpe_ids_free(&ids);
    ts_model_free(&m);
    return st;
}

void ts_lm_run_free(ts_lm_run *r) {
    ts_lm_run_close_state(r);
    ts_optim_free(&r->opt);
    ts_train_free(&r->tr);
    ts_model_free(&r->m);
    ts_lm_data_free(&r->d);
}
