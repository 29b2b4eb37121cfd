/* train_lm: tscope train --task lm, a language model of a text. Reads the
 * flags into the run's settings, the corpus, its tokenizer and the probes a
 * trace follows; the run itself (resume, data, model, the loop, saving a
 * checkpoint that reloads without flags with its training state beside it,
 * the sample) is src/train's ts_lm_run (lm_run.c). Prints progress and the
 * results. Ctrl-C or SIGTERM stops after the step under way; the run is
 * saved and says how to go on. docs/training.md explains. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train_cmd.h"
#include "tscope/experiment.h"
#include "tscope/io.h"
#include "tscope/kernels.h"
#include "tscope/tokenizer.h"
#include "tscope/trace.h"
#include "tscope/train.h"

#define KJV_COMMAND "bible -f Gen1:1-Rev22:21"
#define KJV_NAME "the King James Bible (" KJV_COMMAND ")"
#define MAX_CORPUS ((size_t)1 << 30)
/* The first probe by default: the corpus's first lines, as `bible` prints them. */
#define KJV_PROBE                                                                                                     \
    "Ge1:1 In the beginning God created the heaven and the earth.\n"                                                   \
    "Ge1:2 And the earth was without form, and void; and darkness was upon the face of the deep. And the Spirit of God " \
    "moved upon the face of the waters.\n"                                                                              \
    "Ge1:3 And God said, Let there be light: and there was light.\n"

/* ---- Ctrl-C ------------------------------------------------------------------------- */

static volatile sig_atomic_t stop_flag;

/* The first Ctrl-C or SIGTERM asks the loop to stop (the run is then saved,
 * and no temporary file is left); the next one kills as usual. */
static void on_stop(int sig) {
    stop_flag = sig;
    signal(sig, SIG_DFL);
}

/* ---- the corpus ---------------------------------------------------------------------- */

static ts_status read_stream(FILE *f, const char *what, char **out, size_t *len) {
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    if (!buf) return ts_fail(TS_ERR_NOMEM, "out of memory reading %s", what);
    for (;;) {
        if (n == cap) {
            if (cap >= MAX_CORPUS) {
                free(buf);
                return ts_fail(TS_ERR_ARG, "%s is larger than %zu MB", what, MAX_CORPUS >> 20);
            }
            char *bigger = realloc(buf, cap *= 2);
            if (!bigger) {
                free(buf);
                return ts_fail(TS_ERR_NOMEM, "out of memory reading %s", what);
            }
            buf = bigger;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        free(buf);
        return ts_fail(TS_ERR_IO, "cannot read %s", what);
    }
    *out = buf, *len = n;
    return TS_OK;
}

/* The text to learn: --corpus FILE, or the Bible from `bible`. */
static ts_status read_corpus(const train_opts *o, char **text, size_t *len, char *name, size_t name_size) {
    if (o->corpus) {
        struct stat sb;
        if (stat(o->corpus, &sb) == 0 && !S_ISREG(sb.st_mode))
            return ts_fail(TS_ERR_IO, "--corpus %s is %s, not a text file", o->corpus,
                           S_ISDIR(sb.st_mode) ? "a folder" : "not a regular file");
        FILE *f = fopen(o->corpus, "rb");
        if (!f) return ts_fail(TS_ERR_IO, "cannot open --corpus %s: %s", o->corpus, strerror(errno));
        char what[4200];
        snprintf(what, sizeof what, "--corpus %s", o->corpus);
        ts_status st = read_stream(f, what, text, len);
        fclose(f);
        snprintf(name, name_size, "%s", o->corpus);
        return st;
    }
    FILE *p = popen(KJV_COMMAND " 2>/dev/null", "r");
    ts_status st = p ? read_stream(p, KJV_NAME, text, len) : ts_fail(TS_ERR_IO, "cannot run %s", KJV_COMMAND);
    int rc = p ? pclose(p) : -1;
    if (!st && (rc != 0 || *len < 1000000)) {
        free(*text);
        st = ts_fail(TS_ERR_ARG,
                     "no --corpus given and `%s` did not print the Bible: install Debian's bible-kjv "
                     "(scripts/deps.sh train) or give --corpus FILE",
                     KJV_COMMAND);
    }
    snprintf(name, name_size, "%s", KJV_NAME);
    return st;
}

/* ---- the model ---------------------------------------------------------------------- */

/* The preset (lm unless --preset), the model flags given, the tokenizer's
 * vocabulary. A preset's sentence is not used: the corpus makes the data. */
static ts_status resolve(const train_opts *o, const model_flags *mf, int vocab, ts_model_config *cfg) {
    model_flags copy = *mf;
    if (mf->seen[F_TEXT]) return ts_fail(TS_ERR_ARG, "--text is for tscope run; the language model reads --corpus");
    if (mf->seen[F_VOCAB]) {
        if (strcmp(o->tokenizer ? o->tokenizer : "char", "word") != 0)
            return ts_fail(TS_ERR_ARG, "--vocab is the word tokenizer's size; a %s vocabulary comes from the text",
                           o->tokenizer ? o->tokenizer : "char");
        copy.seen[F_VOCAB] = false; /* applied already */
    }
    int seq = mf->seen[F_SEQ] ? mf->seq : 0; /* the context: the position table follows it */
    copy.seen[F_SEQ] = false;
    if (!mf->preset) copy.preset = "lm";
    copy.seen[F_PRESET] = true; /* the preset given, or lm */
    model_given g = {.trains = true}; /* training: --dropout acts, no --train-mode needed */
    ts_status st = model_flags_resolve_given(&copy, &g, cfg, NULL);
    if (st) return st;
    cfg->input = TS_INPUT_TOKENS;
    cfg->head = TS_HEAD_LM;
    if (!ts_model_is_lm(cfg))
        return ts_fail(TS_ERR_ARG, "a language model is one causal stack: preset %s with these flags is not "
                                   "(use preset lm, or --dec-layers 0 --mask causal)",
                       cfg->preset[0] ? cfg->preset : "(none)");
    cfg->input = TS_INPUT_TOKENS;
    cfg->head = TS_HEAD_LM;
    cfg->text = NULL;
    cfg->vocab = vocab;
    if (seq) cfg->seq = seq;
    if (cfg->pe == TS_PE_LEARNED) cfg->max_pos = cfg->seq;
    return ts_model_config_check(cfg);
}

/* ---- probes ------------------------------------------------------------------------- */

/* The last message again after a prefix naming where its text came from
 * (the flag and its value, fmt with one %s). */
static ts_status named(ts_status st, const char *fmt, const char *arg) {
    char head[600];
    snprintf(head, sizeof head, fmt, arg);
    return ts_fail(st, "%s: %s", head, ts_last_error());
}

/* P probes of S ids: each --probe text (by default a held-out window of
 * --corpus, or Genesis 1:1-3 for the Bible), repeated to fill the context and
 * cut there; then a random string written twice. */
static ts_status make_probes(const train_opts *o, ts_lmtok *tok, const ts_lm_data *d, int S, int vocab,
                             uint64_t seed, int32_t **out, int *P) {
    int n_text = o->no_text_probe ? 0 : o->probe.count ? o->probe.count : 1;
    *P = n_text + 1;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)*P * S);
    if (!ids) return ts_fail(TS_ERR_NOMEM, "out of memory");
    ts_status st = TS_OK;
    for (int p = 0; p < n_text && !st; p++) {
        if (!o->probe.count && o->corpus) { /* the user's own text, never trained on */
            memcpy(ids + (int64_t)p * S, d->held, sizeof(int32_t) * (size_t)S);
            continue;
        }
        const char *text = o->probe.count ? o->probe.items[p] : KJV_PROBE;
        ts_bpe_ids enc = {0};
        st = ts_lmtok_encode(tok, text, strlen(text), &enc);
        if (!st && enc.count == 0) st = ts_fail(TS_ERR_ARG, "it has no tokens");
        if (st) st = named(st, o->probe.count ? "--probe \"%.200s\"" : "the default probe (%.20s...)", text);
        for (int i = 0; !st && i < S; i++) ids[(int64_t)p * S + i] = enc.ids[(size_t)i % enc.count];
        ts_bpe_ids_free(&enc);
    }
    if (!st) ts_lm_repeat_ids(ids + (int64_t)n_text * S, 1, S, vocab, seed ^ 0x1DC0ull);
    if (st) free(ids);
    else *out = ids;
    return st;
}

/* The trace: every snapshot's values; the axes labelled with each probe's tokens. */
static ts_status open_trace(const train_opts *o, const ts_model_config *cfg, const ts_lmtok *tok,
                            const int32_t *probe, int P, ts_trace_writer **w) {
    int S = cfg->seq;
    char *labels = malloc((size_t)P * S * 64);
    const char **lab = malloc(sizeof *lab * (size_t)P * S);
    char *config = ts_model_config_to_json(cfg), *tokjson = ts_lmtok_to_json(tok);
    char **line = calloc((size_t)o->argc + 1, sizeof *line);
    char *meta = NULL;
    ts_status st = labels && lab && config && tokjson && line ? TS_OK : ts_fail(TS_ERR_NOMEM, "trace: no memory");
    for (int i = 0; !st && i < P * S; i++) {
        ts_lmtok_label(tok, probe[i], labels + (size_t)i * 64, 64);
        lab[i] = labels + (size_t)i * 64;
    }
    if (!st) {
        line[0] = "tscope";
        for (int i = 0; i < o->argc; i++) line[i + 1] = o->argv[i];
        st = ts_trace_metadata_build(&meta, config, lab, S, NULL, 0, o->argc + 1, line);
    }
    if (!st) st = ts_trace_metadata_add_batch_tokens(&meta, TS_TRACE_SOURCE, lab, P, S);
    /* the tokenizer, so a reader can label a vocabulary axis */
    if (!st) st = ts_trace_metadata_add_json(&meta, "tokenizer", tokjson);
    if (!st) st = train_trace_settings(&meta, o);
    ts_trace_options opt;
    ts_trace_options_default(&opt);
    opt.level = TS_TRACE_VALUES;
    if (!st) st = ts_trace_writer_open(o->trace.path, meta, &opt, w);
    free(meta), free(line), free(config), free(tokjson), free(lab), free(labels);
    return st;
}

/* ---- progress ------------------------------------------------------------------------ */

typedef struct lm_progress {
    bool tty, quiet;
    int64_t log_every;
    double last_draw, lsum, heldout, bpc_factor;
    int ln;
} lm_progress;

static void progress(void *ctx, const ts_train_progress *p) {
    lm_progress *ps = ctx;
    ps->lsum += p->loss, ps->ln++;
    if (!isnan(p->heldout)) ps->heldout = p->heldout;
    bool last = p->step == p->steps || p->stopping;
    char eta[16], held[64] = "";
    format_eta(eta, sizeof eta, p->eta);
    if (!isnan(ps->heldout))
        snprintf(held, sizeof held, "  held-out %.4f (%.3f bits/char)", ps->heldout, ps->heldout * ps->bpc_factor);
    if (ps->tty && (p->seconds - ps->last_draw > 0.1 || last)) {
        char bar[31];
        int fill = p->steps ? (int)(30 * p->step / p->steps) : 30;
        for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
        bar[30] = '\0';
        printf("\r[%s] step %lld/%lld  loss %.4f%s  %.1fk tok/s  ETA %s ", bar, (long long)p->step,
               (long long)p->steps, ps->lsum / ps->ln, held, p->tokens_per_s / 1000, eta);
        fflush(stdout);
        ps->last_draw = p->seconds;
        ps->lsum = 0, ps->ln = 0;
    }
    if (!ps->tty && !ps->quiet && (p->step % ps->log_every == 0 || last)) {
        printf("step %lld/%lld  loss %.4f%s  lr %.2e  grad norm %.3f  %.1fk tok/s  %.1f s  ETA %s\n",
               (long long)p->step, (long long)p->steps, ps->lsum / ps->ln, isnan(p->heldout) ? "" : held,
               (double)p->lr, p->grad_norm, p->tokens_per_s / 1000, p->seconds, eta);
        fflush(stdout);
        ps->lsum = 0, ps->ln = 0;
    }
}

/* ---- sampling ------------------------------------------------------------------------ */

/* n tokens after the prompt (its ids, checked before training), at
 * temperature 0.8, printed as text: a look at what the model learnt. */
static ts_status print_sample(int n_sample, const ts_lm_run *run, ts_lmtok *tok, const ts_bpe_ids *prompt) {
    char *text = NULL;
    size_t len = 0;
    ts_status st = ts_lm_run_sample(run, tok, prompt, n_sample, &text, &len);
    if (!st) printf("sample (temperature 0.8, %d tokens after the %zu of the prompt):\n%s\n", n_sample, prompt->count, text);
    free(text);
    return st;
}

/* ---- resuming ------------------------------------------------------------------------ */

/* Flags a resumed run cannot take: its model and settings are the saved run's. */
static int resume_refuses(const train_opts *o, const model_flags *mf) {
    const char *cmd = "train";
    ts_flag rows[MODEL_FLAGS_COUNT];
    model_flags names; /* a table only for its rows' names, in model_flags' order */
    model_flags_table(rows, 0, &names);
    for (int i = 0; i < MODEL_FLAGS_COUNT; i++)
        if (mf->seen[i])
            return ts_cli_error(cmd, "%s: a resumed run's model is the one --resume %s saved", rows[i].name, o->resume);
    const struct {
        const char *flag;
        bool seen;
    } kept[] = {{"--lr", o->lr_seen},           {"--warmup", o->warmup_seen},     {"--schedule", o->schedule_seen},
                {"--min-lr", o->min_lr_seen},   {"--clip", o->clip_seen},         {"--label-smoothing", o->smoothing_seen},
                {"--weight-decay", o->wd_seen}, {"--optimizer", o->optimizer_seen}, {"--eval-every", o->eval_every_seen},
                {"--heldout", o->heldout_seen}, {"--repeat-frac", o->repeat_frac_seen}, {"--tokenizer", o->tokenizer_seen},
                {"--patience", o->patience_seen}};
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
        if (kept[i].seen)
            return ts_cli_error(cmd, "%s: a resumed run keeps the settings of the run --resume %s saved (they are in "
                                     "%s.state)", kept[i].flag, o->resume, o->resume);
    if (o->trace.path)
        return ts_cli_error(cmd, "--trace: a training trace follows one run from step 0; a resumed run cannot add to "
                                 "it (trace a run from the start)");
    return -1;
}

/* ---- the run -------------------------------------------------------------------------- */

/* The sample's default start: the corpus's first non-empty line, cut to 48
 * bytes at a character's edge; the Bible's "And God said". */
static void default_prompt(const train_opts *o, const char *text, size_t len, char *out, size_t size) {
    if (!o->corpus) {
        snprintf(out, size, "And God said");
        return;
    }
    size_t at = 0;
    while (at < len && (text[at] == '\n' || text[at] == '\r')) at++;
    size_t end = at;
    while (end < len && text[end] != '\n' && text[end] != '\r' && end - at < 48) end++;
    while (end > at && end < len && ((unsigned char)text[end] & 0xC0) == 0x80) end--; /* not inside a character */
    snprintf(out, size, "%.*s", (int)(end - at), text + at);
}

/* A name of our own when --save is not given on a long run: never an existing file. */
static void default_save(const train_opts *o, char *out, size_t size) {
    const char *base = o->corpus ? strrchr(o->corpus, '/') : NULL;
    base = o->corpus ? (base ? base + 1 : o->corpus) : "kjv";
    int stem = (int)strcspn(base, ".");
    if (stem == 0 || stem > 40) stem = stem ? 40 : 0;
    struct stat sb;
    for (int i = 1; i < 1000; i++) {
        if (i == 1)
            snprintf(out, size, "lm-%.*s.safetensors", stem ? stem : 6, stem ? base : "corpus");
        else
            snprintf(out, size, "lm-%.*s-%d.safetensors", stem ? stem : 6, stem ? base : "corpus", i);
        if (stat(out, &sb) != 0) return;
    }
}

#define LONG_RUN 1000 /* steps: below this, forgetting --save loses little */

/* Whether a checkpoint can be written at path, asked before the training it
 * would otherwise find out after: its folder exists and takes new files. */
static ts_status check_writable(const char *flag, const char *path) {
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return ts_fail(TS_ERR_IO, "%s %s: the folder %s is not there", flag, path, dir);
    if (access(dir, W_OK) != 0) return ts_fail(TS_ERR_IO, "%s %s: cannot write in %s: %s", flag, path, dir, strerror(errno));
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return ts_fail(TS_ERR_IO, "%s %s is a folder", flag, path);
    return TS_OK;
}

/* The run's settings from the flags: the loop's, the optimizer's and the
 * data's (a resumed run reads them from its state instead). -1 when they
 * hold, else the exit code. */
static int run_settings(const train_opts *o, ts_lm_run *run) {
    const char *cmd = "train";
    ts_train_loop_opts lo;
    ts_train_loop_opts_default(&lo);
    lo.steps = o->steps_seen ? o->steps : 3000;
    lo.lr = o->lr_seen ? o->lr : 3e-3f;
    lo.warmup = o->warmup_seen ? o->warmup : 100;
    lo.schedule = o->schedule && strcmp(o->schedule, "inv-sqrt") == 0 ? TS_LR_INV_SQRT : TS_LR_COSINE;
    lo.min_lr = o->min_lr_seen ? o->min_lr : lo.lr / 10;
    if (o->min_lr_seen && lo.schedule != TS_LR_COSINE) return ts_cli_error(cmd, "--min-lr is for --schedule cosine");
    lo.smoothing = o->smoothing;
    lo.clip = o->clip;
    lo.eval_every = o->eval_every_seen ? o->eval_every : 250;
    lo.patience = o->patience;
    lo.every = o->every_seen ? o->every : 100;
    lo.ignore_index = -1; /* every id is a real token */
    lo.stop = &stop_flag;
    ts_optim_config oc;
    ts_optim_config_default(&oc, TS_OPTIM_ADAMW);
    oc.beta2 = 0.99f; /* small models on small data, as nanoGPT's character models */
    oc.weight_decay = o->wd_seen ? o->weight_decay : 0.1f;
    if (o->optimizer && strcmp(o->optimizer, "adam") == 0) oc.kind = TS_OPTIM_ADAM, oc.weight_decay = o->wd_seen ? o->weight_decay : 0;
    ts_lm_data_opts dop;
    ts_lm_data_opts_default(&dop);
    dop.heldout = o->heldout, dop.repeat_frac = o->repeat_frac;
    if (!o->resume && ts_train_loop_opts_check(&lo)) return ts_cli_error(cmd, "%s", ts_last_error());
    run->lo = lo, run->oc = oc, run->dop = dop;
    return -1;
}

int train_lm(const train_opts *o, const model_flags *mf) {
    const char *cmd = "train";
    if (o->trace.level || o->trace.only.count || o->trace.keep_batch_seen)
        return ts_cli_error(cmd, "a training trace keeps its own selection: --level, --only and --keep-batch are for "
                                 "tscope run");
    if (o->trace.path == NULL && o->every_seen) return ts_cli_error(cmd, "--every needs --trace FILE");
    if (o->save_every_seen && (o->save_every < 0 || !(o->save || o->resume)))
        return ts_cli_error(cmd, "--save-every N needs N >= 0 and --save W.safetensors");
    if (o->sample_seen && o->sample < 0) return ts_cli_error(cmd, "--sample %d must not be negative", o->sample);
    if (o->sample_seen && o->sample == 0 && o->prompt_seen)
        return ts_cli_error(cmd, "--prompt starts the sample, and --sample 0 asks for none");
    if (o->no_text_probe && o->probe.count) return ts_cli_error(cmd, "--probe gives a text to follow; --no-text-probe says none");
    if (!o->trace.path && (o->probe_seen || o->no_text_probe))
        return ts_cli_error(cmd, "%s chooses what the trace follows: give --trace FILE too",
                            o->probe_seen ? "--probe" : "--no-text-probe");
    if (o->resume) {
        int rc = resume_refuses(o, mf);
        if (rc >= 0) return rc;
    }
    ts_lmtok_kind kind = TS_LMTOK_CHAR;
    if (o->tokenizer && ts_lmtok_kind_parse(o->tokenizer, &kind)) return ts_cli_error(cmd, "%s", ts_last_error());
    int word_vocab = mf->seen[F_VOCAB] ? mf->vocab : 0;
    if (kind == TS_LMTOK_WORD && !word_vocab) word_vocab = 4096;
    ts_lm_run run;
    memset(&run, 0, sizeof run);
    int rc = run_settings(o, &run);
    if (rc >= 0) return rc;
    rc = 0;

    char *text = NULL, corpus_name[4200] = "";
    size_t len = 0;
    ts_lmtok tok;
    memset(&tok, 0, sizeof tok);
    ts_bpe_ids ids = {0}, prompt = {0};
    ts_lm_snapshot_scores scores = {0}; /* the in-context measures of each snapshot */
    ts_trace_writer *w = NULL;
    int32_t *probe = NULL;
    int P = 0;
    char prompt_text[64] = "", default_name[160] = "";
    /* from here on a signal only asks to stop: a trace opened below is then
     * closed or removed, never left as a temporary file */
    stop_flag = 0;
    void (*was_int)(int) = signal(SIGINT, on_stop), (*was_term)(int) = signal(SIGTERM, on_stop);
    const char *save = o->save ? o->save : o->resume;
    train_opts mine = *o; /* a resumed run reads the corpus the state names unless --corpus says */
    ts_status st = ts_kernels_init();
    if (!st && save) st = check_writable(o->save ? "--save" : "--resume", save);
    if (!st && o->resume) {
        st = ts_lm_run_resume(&run, o->resume, &tok);
        const char *c = ts_lm_run_resumed_corpus(&run);
        if (!st && !o->corpus && c && c[0]) mine.corpus = c;
        if (!st && o->steps_seen) run.lo.steps = o->steps;
        if (!st) st = ts_train_loop_opts_check(&run.lo);
        kind = tok.kind;
    }
    if (!st && !(st = read_corpus(&mine, &text, &len, corpus_name, sizeof corpus_name))) {
        if (!o->resume) st = ts_lmtok_build(&tok, kind, text, len, word_vocab);
        if (!st) st = ts_lmtok_encode(&tok, text, len, &ids);
        if (st) st = named(st, mine.corpus ? "--corpus %s" : "%s", corpus_name); /* the text's fault: say which */
    }
    if (!st && !o->resume && tok.count < 2) {
        char one[64];
        ts_lmtok_label(&tok, 0, one, sizeof one);
        st = ts_fail(TS_ERR_ARG, "%s%s has one distinct %s ('%s'): a model of it has nothing to predict",
                     mine.corpus ? "--corpus " : "", corpus_name, kind == TS_LMTOK_CHAR ? "character" : "token", one);
    }
    /* the sample's start: checked now, not after the training it would waste */
    if (!st) {
        const char *pt = o->prompt;
        if (!pt) {
            default_prompt(&mine, text, len, prompt_text, sizeof prompt_text);
            pt = prompt_text;
        } else {
            snprintf(prompt_text, sizeof prompt_text, "%.63s", pt);
        }
        st = ts_lmtok_encode(&tok, pt, strlen(pt), &prompt);
        if (!st && prompt.count == 0) st = ts_fail(TS_ERR_ARG, "it has no tokens: give some text to continue");
        if (st) st = named(st, o->prompt ? "--prompt \"%.200s\"" : "the default prompt \"%.200s\"", pt);
    }
    if (!st) st = ts_lm_run_corpus(&run, ids.ids, ids.count, mine.corpus, corpus_name);
    if (!st && !o->resume) st = resolve(o, mf, tok.count, &run.cfg);
    scores.seed = run.cfg.seed;
    run.dop.measure = ts_lm_snapshot_measure, run.dop.measure_ctx = &scores;
    if (!st && (st = ts_lm_run_data(&run, ids.ids, ids.count)) &&
        strncmp(ts_last_error(), "the text (", 10) == 0) /* too short: say which text */
        st = named(st, mine.corpus ? "--corpus %s" : "%s", corpus_name);
    const ts_model_config *cfg = &run.cfg;
    if (!st && o->trace.path) st = make_probes(o, &tok, &run.d, cfg->seq, cfg->vocab, cfg->seed, &probe, &P);
    if (!st && probe) st = ts_lm_data_set_probe(&run.d, probe, P);
    if (!st) st = ts_lm_run_model(&run);
    if (!st && o->trace.path) st = open_trace(o, cfg, &tok, probe, P, &w);
    ts_lm_run_close_state(&run);
    if (st) {
        rc = ts_cli_error(cmd, "%s", ts_last_error());
        goto out;
    }
    free(text), text = NULL;
    if (!save && run.lo.steps >= LONG_RUN) { /* a long run is not lost for a forgotten flag */
        default_save(o, default_name, sizeof default_name);
        save = default_name;
        if ((st = check_writable("the default save", save))) {
            rc = ts_cli_error(cmd, "%s (give --save FILE)", ts_last_error());
            goto out;
        }
    }

    const ts_train_loop_opts *lo = &run.lo;
    const ts_lm_data *d = &run.d;
    /* characters per token on the held-out targets: bits/char = loss / ln 2 / that */
    double chars = (double)ts_lmtok_chars(&tok, d->hy, (size_t)d->n_windows * cfg->seq);
    double bpc_factor = chars > 0 ? (double)d->n_windows * cfg->seq / chars / log(2.0) : NAN;
    int64_t params = 0;
    for (int i = 0; i < run.m.n_params; i++) params += run.m.params[i].numel;
    char desc[TS_MODEL_DESCRIBE_MAX];
    ts_model_config_describe(cfg, desc, sizeof desc);
    printf("# %s\n", desc);
    printf("# corpus %s: %zu tokens (%s, vocabulary %d), %lld to train on, %lld held out (%d windows of %d measured)\n",
           corpus_name, ids.count, ts_lmtok_kind_name(kind), (int)tok.count, (long long)d->n_train, (long long)d->n_held,
           d->n_windows, cfg->seq);
    printf("# %lld parameters; %d windows of %d tokens a step%s; %s lr %g, warm-up %d then %s, weight decay %g, "
           "clip %g; %d thread%s\n",
           (long long)params, cfg->batch, cfg->seq, run.dop.repeat_frac > 0 ? " (some repeated random sequences)" : "",
           run.oc.kind == TS_OPTIM_ADAMW ? "AdamW" : "Adam", (double)lo->lr, lo->warmup,
           lo->schedule == TS_LR_COSINE ? "a cosine" : "1/sqrt(step)", (double)run.oc.weight_decay, (double)lo->clip,
           ts_kernels_threads(), ts_kernels_threads() == 1 ? "" : "s");
    if (o->resume)
        printf("# resuming %s at step %lld of %lld (its optimizer state, schedule and data position)\n", o->resume,
               (long long)lo->first_step, (long long)lo->steps);
    if (default_name[0])
        printf("# no --save given: a run of %lld steps is saved to %s when it ends or is stopped\n",
               (long long)lo->steps, default_name);
    fflush(stdout);

    char *config = ts_model_config_to_json(cfg), *tokjson = ts_lmtok_to_json(&tok);
    char steps_s[32] = "0", loss_s[32] = "", bpc_s[32] = "", seconds_s[32] = "";
    ts_text_buf line = {0}; /* the command that made it, to make it again */
    ts_text_buf_str(&line, "tscope");
    for (int i = 0; i < o->argc; i++) ts_text_buf_printf(&line, " %s", o->argv[i]);
    char *command = ts_text_buf_take(&line);
    const char *meta[] = {"format", "tscope", "task", "lm", "steps", steps_s, "heldout_loss", loss_s,
                          "heldout_bits_per_char", bpc_s, "corpus", corpus_name, "config", config ? config : "{}",
                          "tokenizer", tokjson ? tokjson : "{}", "command_line", command ? command : "",
                          "train_seconds", seconds_s, "prompt", prompt_text};
    run.save = save, run.save_every = o->save_every;
    run.meta = meta, run.n_meta = (int)(sizeof meta / sizeof meta[0] / 2);
    lm_progress ps = {.tty = isatty(fileno(stdout)) && !o->quiet, .quiet = o->quiet,
                      .log_every = lo->steps >= 20 ? lo->steps / 20 : 1, .heldout = NAN, .bpc_factor = bpc_factor};
    run.progress = progress, run.progress_ctx = &ps;
    if (!config || !tokjson || !command) st = ts_fail(TS_ERR_NOMEM, "out of memory");
    ts_hook hook = w ? ts_trace_writer_hook(w) : (ts_hook){0};
    ts_train_loop_result r;
    memset(&r, 0, sizeof r);
    if (!st) st = ts_lm_run_train(&run, w ? &hook : NULL, &r);
    int64_t done = r.steps > lo->first_step ? r.steps - lo->first_step : 0; /* in this session */
    if (ps.tty) printf("\n");
    if (st) {
        rc = ts_cli_error(cmd, "%s", ts_last_error());
        goto restore;
    }
    double heldout = r.last_heldout;
    if (isnan(heldout) && (st = ts_lm_data_heldout(&run.d, &run.m, &heldout))) {
        rc = ts_cli_error(cmd, "%s", ts_last_error());
        goto restore;
    }
    const char *by = stop_flag == SIGTERM ? "SIGTERM" : "Ctrl-C";
    printf("trained %lld steps in %.1f s (%.1f ms/step, %.1fk tokens/s)", (long long)done, r.seconds,
           done ? 1e3 * r.seconds / done : 0.0, done ? done * (double)run.tokens_per_step / r.seconds / 1000 : 0.0);
    if (r.interrupted)
        printf("; stopped by %s at step %lld of %lld", by, (long long)r.steps, (long long)lo->steps);
    else if (r.early_stop)
        printf("; early stop: back to the best held-out loss");
    printf("\n");
    snprintf(steps_s, sizeof steps_s, "%lld", (long long)r.steps);
    snprintf(loss_s, sizeof loss_s, "%.4f", heldout);
    snprintf(bpc_s, sizeof bpc_s, "%.4f", heldout * bpc_factor);
    snprintf(seconds_s, sizeof seconds_s, "%.0f", r.seconds);
    if (save) {
        if ((st = ts_lm_run_save(&run, r.steps))) {
            rc = ts_cli_error(cmd, "%s", ts_last_error());
        } else {
            printf("saved %s (%lld parameters; config and tokenizer in its metadata) and its training state %s.state\n",
                   save, (long long)params, save);
            if (r.interrupted || r.steps < lo->steps)
                printf("to go on from step %lld: tscope train --task lm --resume %s\n", (long long)r.steps, save);
        }
    } else if (r.interrupted) {
        printf("nothing saved (no --save): this run cannot be resumed\n");
    }
    if (!rc && w) {
        printf("trace: %d snapshots of loss, head scores and attention\n", r.records);
        rc = trace_cli_close(&o->trace, w, cmd);
        w = NULL;
    }
    int sample = o->sample_seen ? o->sample : 300;
    if (!rc && sample > 0 && !r.interrupted && (st = print_sample(sample, &run, &tok, &prompt)))
        rc = ts_cli_error(cmd, "%s", ts_last_error());
    if (!rc)
        printf("held-out loss %.4f nats/token, %.3f bits/char (%s; %d windows of %d tokens from the %lld held out)\n",
               heldout, heldout * bpc_factor, ts_lmtok_kind_name(kind), d->n_windows, cfg->seq, (long long)d->n_held);
restore:
    free(config), free(tokjson), free(command);
out:
    if (w) ts_trace_writer_abort(w);
    signal(SIGINT, was_int == SIG_ERR ? SIG_DFL : was_int);
    signal(SIGTERM, was_term == SIG_ERR ? SIG_DFL : was_term);
    free(text);
    free(probe);
    ts_lm_run_free(&run);
    ts_lm_snapshot_scores_free(&scores);
    ts_bpe_ids_free(&ids);
    ts_bpe_ids_free(&prompt);
    ts_lmtok_free(&tok);
    return rc;
}
