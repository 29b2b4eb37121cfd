/* train_lm: tscope train --task lm, a language model of a text. Reads the
 * corpus, builds its tokenizer, hands the loop (src/train) a data source,
 * prints progress and a sample, and saves a checkpoint that reloads without
 * flags (config and tokenizer in its metadata). Ctrl-C stops after the step
 * under way; what was asked for is still saved. docs/training.md explains. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train_cmd.h"
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

/* The first Ctrl-C asks the loop to stop; the next one kills as usual. */
static void on_sigint(int sig) {
    stop_flag = 1;
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
        FILE *f = fopen(o->corpus, "rb");
        if (!f) return ts_fail(TS_ERR_IO, "cannot open --corpus %s", o->corpus);
        ts_status st = read_stream(f, o->corpus, text, len);
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
    ts_status st = model_flags_resolve(&copy, cfg, NULL);
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

/* ---- probes ------------------------------------------------------------------------- */

/* P probes of S ids: each --probe text (or Genesis 1:1-3), repeated to fill
 * the context and cut there; then a random string written twice. */
static ts_status make_probes(const train_opts *o, ts_lmtok *tok, int S, int vocab, uint64_t seed, int32_t **out,
                             int *P) {
    int n_text = o->no_text_probe ? 0 : o->probe.count ? o->probe.count : 1;
    *P = n_text + 1;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)*P * S);
    if (!ids) return ts_fail(TS_ERR_NOMEM, "out of memory");
    ts_status st = TS_OK;
    for (int p = 0; p < n_text && !st; p++) {
        const char *text = o->probe.count ? o->probe.items[p] : KJV_PROBE;
        ts_bpe_ids enc = {0};
        st = ts_lmtok_encode(tok, text, strlen(text), &enc);
        if (!st && enc.count == 0) st = ts_fail(TS_ERR_ARG, "--probe \"%s\" has no tokens", text);
        if (st && !o->probe.count) /* the default probe, on another corpus: its own start instead */
            st = ts_fail(TS_ERR_ARG, "the default probe (Genesis 1:1) does not fit this corpus's vocabulary: give "
                                     "--probe TEXT (%s)",
                         ts_last_error());
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
    /* --save-every */
    const train_opts *o;
    const ts_model *m;
    const char *const *meta;
    int n_meta;
    ts_status save_st;
} lm_progress;

static void format_eta(char *buf, size_t size, double s) {
    if (!(s >= 0) || s > 360000) s = 0;
    int x = (int)(s + 0.5);
    if (x >= 3600)
        snprintf(buf, size, "%d:%02d:%02d", x / 3600, x / 60 % 60, x % 60);
    else
        snprintf(buf, size, "%d:%02d", x / 60, x % 60);
}

static void progress(void *ctx, const ts_train_progress *p) {
    lm_progress *ps = ctx;
    ps->lsum += p->loss, ps->ln++;
    if (!isnan(p->heldout)) ps->heldout = p->heldout;
    bool last = p->step == p->steps || p->stopping;
    if (ps->o->save_every > 0 && p->step % ps->o->save_every == 0 && !last && !ps->save_st)
        ps->save_st = ts_train_save(ps->m, ps->o->save, ps->n_meta, ps->meta);
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

/* n tokens after the prompt, at temperature 0.8, printed as text: a look at
 * what the model learnt. The model reads the last S tokens each time. */
static ts_status print_sample(const train_opts *o, int n_sample, const ts_model_config *cfg, const ts_model *trained, ts_lmtok *tok,
                              const ts_lm_data *d) {
    ts_model_config c = *cfg;
    c.batch = 1;
    ts_model m;
    ts_status st = ts_model_init(&m, &c);
    if (st) return st;
    memcpy(m.block, trained->block, sizeof(float) * (size_t)m.n_floats);
    const char *prompt = o->prompt ? o->prompt : "And God said";
    ts_bpe_ids ids = {0};
    st = ts_lmtok_encode(tok, prompt, strlen(prompt), &ids);
    if (st && !o->prompt) { /* another corpus: start from its held-out text */
        ts_bpe_ids_free(&ids);
        st = TS_OK;
        ids.ids = malloc(sizeof(int32_t) * 16);
        ids.cap = 16;
        if (!ids.ids) st = ts_fail(TS_ERR_NOMEM, "out of memory");
        for (int i = 0; !st && i < 16 && i < d->n_held; i++) ids.ids[ids.count++] = d->held[i];
    }
    int S = c.seq, V = c.vocab;
    int32_t *window = calloc((size_t)S, sizeof *window);
    size_t start = ids.count;
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
    char *text = NULL;
    size_t len = 0;
    if (!st) st = ts_lmtok_decode(tok, ids.ids, ids.count, &text, &len);
    if (!st) printf("sample (temperature 0.8, %d tokens after the %zu of the prompt):\n%s\n", n_sample, start, text);
    free(text);
    free(window);
    ts_bpe_ids_free(&ids);
    ts_model_free(&m);
    return st;
}

/* ---- the run -------------------------------------------------------------------------- */

int train_lm(const train_opts *o, const model_flags *mf) {
    const char *cmd = "train";
    if (o->trace.level || o->trace.only.count || o->trace.keep_batch_seen)
        return ts_cli_error(cmd, "a training trace keeps its own selection: --level, --only and --keep-batch are for "
                                 "tscope run");
    if (o->trace.path == NULL && o->every_seen) return ts_cli_error(cmd, "--every needs --trace FILE");
    if (o->save_every_seen && (o->save_every < 0 || !o->save))
        return ts_cli_error(cmd, "--save-every N needs N >= 0 and --save W.safetensors");
    if (o->sample_seen && o->sample < 0) return ts_cli_error(cmd, "--sample %d must not be negative", o->sample);
    if (o->no_text_probe && o->probe.count) return ts_cli_error(cmd, "--probe gives a text to follow; --no-text-probe says none");
    ts_lmtok_kind kind = TS_LMTOK_CHAR;
    if (o->tokenizer && ts_lmtok_kind_parse(o->tokenizer, &kind)) return ts_cli_error(cmd, "%s", ts_last_error());
    int word_vocab = mf->seen[F_VOCAB] ? mf->vocab : 0;
    if (kind == TS_LMTOK_WORD && !word_vocab) word_vocab = 4096;

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
    if (ts_train_loop_opts_check(&lo)) return ts_cli_error(cmd, "%s", ts_last_error());

    char *text = NULL, corpus_name[512];
    size_t len = 0;
    ts_lmtok tok;
    memset(&tok, 0, sizeof tok);
    ts_bpe_ids ids = {0};
    ts_model_config cfg;
    ts_lm_data d;
    memset(&d, 0, sizeof d);
    ts_model m;
    ts_train tr;
    ts_optim opt;
    memset(&m, 0, sizeof m), memset(&tr, 0, sizeof tr), memset(&opt, 0, sizeof opt);
    ts_trace_writer *w = NULL;
    int32_t *probe = NULL;
    int P = 0, rc = 0;
    ts_status st = ts_kernels_init();
    if (!st) st = read_corpus(o, &text, &len, corpus_name, sizeof corpus_name);
    if (!st) st = ts_lmtok_build(&tok, kind, text, len, word_vocab);
    if (!st) st = ts_lmtok_encode(&tok, text, len, &ids);
    if (!st) st = resolve(o, mf, tok.count, &cfg);
    ts_lm_data_opts dop;
    ts_lm_data_opts_default(&dop);
    dop.batch = cfg.batch, dop.ctx = cfg.seq, dop.vocab = cfg.vocab, dop.seed = cfg.seed, dop.heldout = o->heldout;
    dop.repeat_frac = o->repeat_frac;
    if (!st) st = ts_lm_data_init(&d, ids.ids, (int64_t)ids.count, &dop);
    if (!st) st = make_probes(o, &tok, cfg.seq, cfg.vocab, cfg.seed, &probe, &P);
    if (!st) st = ts_lm_data_set_probe(&d, probe, P);
    if (!st) st = ts_model_init(&m, &cfg);
    if (!st) st = ts_train_init(&tr, &m);
    ts_optim_config oc;
    ts_optim_config_default(&oc, TS_OPTIM_ADAMW);
    oc.beta2 = 0.99f; /* small models on small data, as nanoGPT's character models */
    oc.weight_decay = o->wd_seen ? o->weight_decay : 0.1f;
    if (o->optimizer && strcmp(o->optimizer, "adam") == 0) oc.kind = TS_OPTIM_ADAM, oc.weight_decay = o->wd_seen ? o->weight_decay : 0;
    if (!st) st = ts_optim_init(&opt, &oc, m.n_floats);
    if (!st && oc.kind == TS_OPTIM_ADAMW) st = decay_matrices(&opt, &m);
    if (!st && o->trace.path) st = open_trace(o, &cfg, &tok, probe, P, &w);
    if (st) {
        rc = ts_cli_error(cmd, "%s", ts_last_error());
        goto out;
    }
    free(text), text = NULL;

    /* characters per token on the held-out targets: bits/char = loss / ln 2 / that */
    double chars = (double)ts_lmtok_chars(&tok, d.hy, (size_t)d.n_windows * cfg.seq);
    double bpc_factor = chars > 0 ? (double)d.n_windows * cfg.seq / chars / log(2.0) : NAN;
    int64_t params = 0;
    for (int i = 0; i < m.n_params; i++) params += m.params[i].numel;
    char desc[256];
    model_config_describe(&cfg, desc, sizeof desc);
    printf("# %s\n", desc);
    printf("# corpus %s: %zu tokens (%s, vocabulary %d), %lld to train on, %lld held out (%d windows)\n", corpus_name,
           ids.count, ts_lmtok_kind_name(kind), (int)tok.count, (long long)d.n_train, (long long)d.n_held, d.n_windows);
    printf("# %lld parameters; %d windows of %d tokens a step%s; AdamW lr %g, warm-up %d then %s, weight decay %g, "
           "clip %g; %d thread%s\n",
           (long long)params, cfg.batch, cfg.seq,
           o->repeat_frac > 0 ? " (some repeated random sequences)" : "", (double)lo.lr, lo.warmup,
           lo.schedule == TS_LR_COSINE ? "a cosine" : "1/sqrt(step)", (double)oc.weight_decay, (double)lo.clip,
           ts_kernels_threads(), ts_kernels_threads() == 1 ? "" : "s");
    fflush(stdout);

    char *config = ts_model_config_to_json(&cfg), *tokjson = ts_lmtok_to_json(&tok);
    char steps_s[32] = "0", loss_s[32] = "", bpc_s[32] = "", seconds_s[32] = "";
    ts_text_buf line = {0}; /* the command that made it, to make it again */
    ts_text_buf_str(&line, "tscope");
    for (int i = 0; i < o->argc; i++) ts_text_buf_printf(&line, " %s", o->argv[i]);
    char *command = ts_text_buf_take(&line);
    const char *meta[] = {"format", "tscope", "task", "lm", "steps", steps_s, "heldout_loss", loss_s,
                          "heldout_bits_per_char", bpc_s, "corpus", corpus_name, "config", config ? config : "{}",
                          "tokenizer", tokjson ? tokjson : "{}", "command_line", command ? command : "",
                          "train_seconds", seconds_s};
    lm_progress ps = {.tty = isatty(fileno(stdout)) && !o->quiet, .quiet = o->quiet,
                      .log_every = lo.steps >= 20 ? lo.steps / 20 : 1, .heldout = NAN, .bpc_factor = bpc_factor,
                      .o = o, .m = &m, .meta = meta, .n_meta = (int)(sizeof meta / sizeof meta[0] / 2)};
    if (!config || !tokjson || !command) st = ts_fail(TS_ERR_NOMEM, "out of memory");
    ts_train_data src;
    ts_lm_data_source(&d, &src);
    ts_hook hook = w ? ts_trace_writer_hook(w) : (ts_hook){0};
    lo.trace = w ? &hook : NULL;
    lo.progress = progress;
    lo.progress_ctx = &ps;
    stop_flag = 0;
    void (*was)(int) = signal(SIGINT, on_sigint);
    ts_train_loop_result r;
    memset(&r, 0, sizeof r);
    if (!st) st = ts_train_loop(&tr, &opt, &src, &lo, &r);
    signal(SIGINT, was == SIG_ERR ? SIG_DFL : was);
    if (ps.tty) printf("\n");
    if (!st && ps.save_st) st = ps.save_st;
    if (st) {
        rc = ts_cli_error(cmd, "%s", ts_last_error());
        free(config), free(tokjson), free(command);
        goto out;
    }
    double heldout = r.last_heldout;
    if (isnan(heldout) && (st = ts_lm_data_heldout(&d, &m, &heldout))) {
        rc = ts_cli_error(cmd, "%s", ts_last_error());
        free(config), free(tokjson), free(command);
        goto out;
    }
    printf("trained %lld steps in %.1f s (%.1f ms/step, %.1fk tokens/s)%s\n", (long long)r.steps, r.seconds,
           r.steps ? 1e3 * r.seconds / r.steps : 0.0, r.steps ? r.steps * (double)src.tokens_per_step / r.seconds / 1000 : 0.0,
           r.interrupted ? "; stopped by Ctrl-C" : r.early_stop ? "; early stop: back to the best held-out loss" : "");
    snprintf(steps_s, sizeof steps_s, "%lld", (long long)r.steps);
    snprintf(loss_s, sizeof loss_s, "%.4f", heldout);
    snprintf(bpc_s, sizeof bpc_s, "%.4f", heldout * bpc_factor);
    snprintf(seconds_s, sizeof seconds_s, "%.0f", r.seconds);
    if (o->save) {
        if ((st = ts_train_save(&m, o->save, ps.n_meta, meta))) {
            rc = ts_cli_error(cmd, "%s", ts_last_error());
        } else {
            printf("saved %s (%lld parameters; config and tokenizer in its metadata)\n", o->save, (long long)params);
        }
    }
    free(config), free(tokjson), free(command);
    if (!rc && w) {
        printf("trace: %d snapshots of loss, head scores and attention\n", r.records);
        rc = trace_cli_close(&o->trace, w, cmd);
        w = NULL;
    }
    int sample = o->sample_seen ? o->sample : 300;
    if (!rc && sample > 0 && !r.interrupted && (st = print_sample(o, sample, &cfg, &m, &tok, &d)))
        rc = ts_cli_error(cmd, "%s", ts_last_error());
    if (!rc)
        printf("held-out loss %.4f nats/token, %.3f bits/char (%s, %lld tokens held out)\n", heldout,
               heldout * bpc_factor, ts_lmtok_kind_name(kind), (long long)d.n_windows * cfg.seq);
out:
    if (w) ts_trace_writer_abort(w);
    free(text);
    free(probe);
    ts_optim_free(&opt);
    ts_train_free(&tr);
    ts_model_free(&m);
    ts_lm_data_free(&d);
    ts_bpe_ids_free(&ids);
    ts_lmtok_free(&tok);
    return rc;
}
