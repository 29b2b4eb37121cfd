/* run_lm: a language model's checkpoint from the command line (lm_cli.h). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "experiment_cli.h"
#include "lm_cli.h"
#include "model_flags.h"
#include "run_expect.h"
#include "tscope/experiment.h"
#include "tscope/io.h"
#include "tscope/kernels.h"

/* A token's label: the tokenizer's, or the id itself when the checkpoint has none. */
static size_t label(const ts_lmtok *tok, int32_t id, char *buf, size_t cap) {
    if (tok->count == 0) return (size_t)snprintf(buf, cap, "%d", (int)id);
    if (id >= tok->count) return (size_t)snprintf(buf, cap, "<pad %d>", (int)id); /* a padded vocabulary's */
    return ts_lmtok_label(tok, id, buf, cap);
}

ts_status lm_cli_trace_open(const trace_cli *tc, const ts_model_config *cfg, const ts_lmtok *tok, const int32_t *ids,
                            int B, int S, int argc, char **argv, const char *edits_json, ts_trace_writer **out) {
    *out = NULL;
    ts_trace_options opt;
    ts_trace_options_default(&opt);
    ts_status st = tc->level ? ts_trace_level_parse(tc->level, &opt.level) : TS_OK;
    if (st) return st;
    for (int i = 0; i < tc->only.count; i++) opt.only[opt.n_only++] = tc->only.items[i];
    opt.keep_batch = tc->keep_batch_seen ? tc->keep_batch : -1;
    char *meta = NULL;
    st = ts_trace_metadata_lm(&meta, cfg, tok, ids, B, S, argc, argv);
    if (!st && tc->settings) st = ts_trace_metadata_add_json(&meta, "settings", tc->settings);
    if (!st && edits_json) st = ts_trace_metadata_add_json(&meta, "edits", edits_json);
    if (!st) st = ts_trace_writer_open(tc->path, meta, &opt, out);
    free(meta);
    return st;
}

/* Spaces that bring label to width terminal columns (%-Ns pads bytes, and a
 * label like "␣the" has more bytes than columns). */
static int pad_to(const char *label, int width) {
    int used = ts_text_columns(label);
    return used < width ? width - used : 0;
}

/* The most likely next token after row (V logits), its probability, and the
 * log-sum-exp of the row (p(v) = exp(row[v] - log Z)). */
static int32_t argmax_row(const float *row, int64_t V, double *p_best, double *log_z) {
    int32_t best = ts_model_argmax(row, (int)V);
    *log_z = ts_logsumexp(row, V);
    *p_best = exp((double)row[best] - *log_z);
    return best;
}

/* Each position's most likely next token, and how sure the model is; for a
 * masked LM (BERT), whose logits at a position score the token there, each
 * position's most likely token and the chance of the one that is there (a
 * [MASK] in the text shows what the model fills in). The columns as wide as
 * their longest label. One sequence: ids (S), logits (S, V). */
static void report(const ts_lmtok *tok, const int32_t *ids, const float *logits, int64_t S, int64_t V, bool masked) {
    const char *pred_head = masked ? "predicted (argmax)" : "next (argmax)";
    int w_token = 5, w_pred = (int)strlen(pred_head);
    char a[64], b[64];
    double p_best, log_z, loss = 0;
    for (int64_t i = 0; i < S; i++) {
        label(tok, ids[i], a, sizeof a);
        label(tok, argmax_row(logits + i * V, V, &p_best, &log_z), b, sizeof b);
        if (ts_text_columns(a) > w_token) w_token = ts_text_columns(a);
        if (ts_text_columns(b) > w_pred) w_pred = ts_text_columns(b);
    }
    printf("position  token%*s  %s%*s  p(argmax)  %s\n", w_token - 5, "", pred_head, w_pred - (int)strlen(pred_head), "",
           masked ? "p(token)" : "p(actual next)");
    for (int64_t i = 0; i < S; i++) {
        const float *row = logits + i * V;
        int32_t best = argmax_row(row, V, &p_best, &log_z);
        label(tok, ids[i], a, sizeof a);
        label(tok, best, b, sizeof b);
        printf("%8lld  %s%*s  %s%*s  %9.3f", (long long)i, a, pad_to(a, w_token), "", b, pad_to(b, w_pred), "", p_best);
        int64_t scored = masked ? i : i + 1; /* the position whose token this row's logits score */
        if (scored < S) {
            double p = exp((double)row[ids[scored]] - log_z);
            loss -= log(p);
            printf(masked ? "  %8.3f" : "  %14.3f", p);
        }
        printf("\n");
    }
    if (masked)
        printf("masked LM: each position scores the token there; -log p(token) %.4f nats/token over %lld positions\n",
               loss / (double)S, (long long)S);
    else if (S > 1)
        printf("loss on this text: %.4f nats/token over %lld predictions\n", loss / (S - 1), (long long)S - 1);
}

/* Every head's scores on 8 random sequences written twice, as the training
 * trace measures them; with the experiment's edits when xc gives any. */
static int print_scores(const char *load, const ts_load_options *lo, const experiment_cli *xc) {
    ts_model m;
    ts_lmtok tok;
    ts_model_config cfg;
    ts_experiment ex;
    ts_experiment_init(&ex);
    ts_status st = ts_lm_checkpoint_read(load, lo, &cfg, NULL);
    if (!st) st = ts_lm_checkpoint_open(load, lo, 8, cfg.seq, &m, &tok);
    if (st) return ts_cli_error("run", "%s", ts_last_error());
    if ((st = experiment_cli_build(xc, &m.cfg, &ex))) {
        ts_model_free(&m);
        ts_lmtok_free(&tok);
        return ts_cli_error("run", "%s", ts_last_error());
    }
    ts_hook edits = {0};
    ts_experiment_attach(&ex, &edits);
    int32_t *ids = malloc(sizeof(int32_t) * 8 * (size_t)cfg.seq);
    ts_lm_measures me;
    memset(&me, 0, sizeof me);
    if (!ids) st = ts_fail(TS_ERR_NOMEM, "out of memory");
    if (!st) ts_lm_repeat_ids(ids, 8, cfg.seq, cfg.vocab, 2024);
    if (!st) st = ts_lm_measure_edited(&m, ids, ex.n_edits ? &edits : NULL, &me);
    if (!st) {
        printf("# %s: each head on 8 random sequences of %d tokens written twice (docs/training.md)\n", load,
               cfg.seq / 2);
        for (int i = 0; i < ex.n_edits; i++)
            printf("# with %s %s\n", ex.edits[i].kind == TS_EDIT_MEAN ? "mean-ablated" : "zeroed", ex.edits[i].spec);
        printf("layer  head  previous-token  induction  copying\n");
        for (int l = 0; l < me.L; l++)
            for (int h = 0; h < me.H; h++)
                printf("%5d  %4d  %14.3f  %9.3f  %7.3f\n", l, h, me.prev_token[l * me.H + h], me.induction[l * me.H + h],
                       me.copying[l * me.H + h]);
        printf("uniform attention: previous-token %.3f, induction %.3f\n", me.chance_prev, me.chance_induction);
        printf("loss per token: %.3f in the first half, %.3f in the second (ln %d = %.3f)\n", me.loss_first,
               me.loss_second, cfg.vocab, log((double)cfg.vocab));
    }
    ts_lm_measures_free(&me);
    ts_experiment_free(&ex);
    free(ids);
    ts_model_free(&m);
    ts_lmtok_free(&tok);
    return st ? ts_cli_error("run", "%s", ts_last_error()) : 0;
}

int run_lm(const char *load, const ts_load_options *lo, const ts_cli_list *text, const char *ids_path,
           const char *types_path, ts_flag *flags, int n, const trace_cli *tc, const char *print_shapes, bool backward,
           bool scores, const char *expect, float tol, const experiment_cli *xc, int argc, char **argv) {
    /* what a language model's run uses; any other flag given is refused, never ignored */
    static const char *const used[] = {"--load", "--text", "--ids", "--scores", "--backward", "--print-shapes",
                                       "--trace", "--level", "--only", "--keep-batch", "--layout", "--expect",
                                       "--tol", "--ablate", "--patch", "--add", "--mean-from", "--lens",
                                       "--temperature", "--token-types", "--heads", "--activation", "--names", "--dtype", NULL};
    for (int i = 0; i < n; i++) {
        bool given = flags[i].seen ? *flags[i].seen : false;
        if (!flags[i].seen) { /* a flag without a seen slot: given when its value is set */
            if (flags[i].kind == TS_FLAG_BOOL) given = *(bool *)flags[i].value;
            else if (flags[i].kind == TS_FLAG_STRING || flags[i].kind == TS_FLAG_CHOICE ||
                     flags[i].kind == TS_FLAG_OPTIONAL)
                given = *(const char **)flags[i].value != NULL;
            else if (flags[i].kind == TS_FLAG_LIST)
                given = ((const ts_cli_list *)flags[i].value)->count > 0;
        }
        bool ok = false;
        for (int k = 0; used[k] && !ok; k++) ok = strcmp(flags[i].name, used[k]) == 0;
        if (given && !ok)
            return ts_cli_error("run", "%s: --load %s is read as a language model (a Hugging Face or GPT-2 folder, or "
                                       "a checkpoint of train --task lm), whose config and tokenizer come with it; give it only --text "
                                       "or --ids, --heads and --activation where its file does not say them (and the trace's flags)",
                                flags[i].name, load);
    }
    if ((lo->heads || lo->activation) && (ts_hf_is(load) || !ts_gpt2_is(load)))
        return ts_cli_error("run", "%s: %s brings its own config, which says it; the flag is for a GPT-2-named "
                            "state_dict that does not", lo->heads ? "--heads" : "--activation", load);
    if (backward) return ts_cli_error("run", "--backward is not for a language model's checkpoint yet");
    if (print_shapes)
        return ts_cli_error("run", "--print-shapes: a checkpoint's steps and shapes are listed by tscope info of a "
                                   "trace of it (--trace T.tstrace --level shapes)");
    /* checked before anything runs, so that no table is printed ahead of the refusal */
    if (scores && (xc->patch.count || xc->lens))
        return ts_cli_error("run", "--scores measures each head on 8 random sequences, where %s (which belongs to one "
                                   "text) has no place: run --scores in a command of its own",
                            xc->patch.count ? "--patch" : "--lens");
    if (scores && text->count == 0 && !ids_path && !tc->path) return print_scores(load, lo, xc);
    if (ids_path && text->count) return ts_cli_error("run", "--text and --ids both give the input: choose one");
    if (!ids_path && text->count != 1)
        return ts_cli_error("run", "give one --text (or --ids) to read through the language model %s", load);
    ts_lmtok tok;
    ts_model m;
    memset(&tok, 0, sizeof tok);
    memset(&m, 0, sizeof m);
    ts_bpe_ids ids = {0};
    ts_trace_writer *w = NULL;
    char *settings = NULL;
    ts_experiment ex;
    ts_experiment_init(&ex);
    char *edits_json = NULL;
    ts_status st = ts_kernels_init();
    int rc = 0;
    /* the tokenizer first, to know the length */
    ts_model_config cfg;
    int B = 1;
    if (!st) st = ts_lm_checkpoint_read(load, lo, &cfg, &tok);
    if (!st && ids_path) st = ts_lm_read_ids(ids_path, cfg.vocab, &ids, &B);
    if (!st && !ids_path && tok.count == 0)
        st = ts_fail(TS_ERR_ARG, "--text: %s has no tokenizer for its %d tokens (no %s beside it); give the token "
                     "ids as --ids IDS.npy", load, cfg.vocab, ts_lm_tokenizer_files(load));
    if (!st && !ids_path) st = ts_lmtok_encode(&tok, text->items[0], strlen(text->items[0]), &ids);
    if (!st && ids.count == 0) st = ts_fail(TS_ERR_ARG, "--text has no tokens");
    ts_lmtok_free(&tok);
    int S = (int)(ids.count / (size_t)B);
    int32_t *types = NULL; /* BERT's token types (B, S); NULL: every position type 0 */
    if (!st && types_path) st = ts_lm_read_token_types(types_path, cfg.type_vocab, B, S, &types);
    if (!st && scores && ts_model_is_masked_lm(&cfg))
        st = ts_fail(TS_ERR_ARG, "--scores measures heads by the next token's loss; %s is a masked language model "
                     "(BERT), whose logits score the token at each position", load);
    if (!st) st = ts_lm_checkpoint_open(load, lo, B, S, &m, &tok);
    if (!st) st = experiment_cli_build(xc, &m.cfg, &ex);
    if (!st && ex.n_edits && !(edits_json = ts_experiment_to_json(&ex))) st = ts_fail(TS_ERR_NOMEM, "out of memory");
    if (!st && (rc = trace_cli_check(tc, "run", 1)) >= 0) goto out;
    rc = 0;
    /* what shapes cannot tell, printed and kept in the trace */
    const char *layout = !st && ts_gpt2_is(load) ? ts_gpt2_layout_name(load, lo) : NULL;
    ts_model_input in = {.src_ids = ids.ids, .src_types = types};
    char settings_line[512];
    if (!st) settings = trace_cli_settings(&m.cfg, &in, layout, settings_line, sizeof settings_line);
    trace_cli tcs = *tc;
    tcs.settings = settings;
    if (!st && tc->path) st = lm_cli_trace_open(&tcs, &m.cfg, &tok, ids.ids, B, S, argc, argv, edits_json, &w);
    if (st) {
        rc = ts_cli_error("run", "%s", ts_last_error());
        goto out;
    }
    char desc[TS_MODEL_DESCRIBE_MAX];
    ts_model_config_describe(&m.cfg, desc, sizeof desc);
    printf("# %s\n", desc);
    if (tok.count == m.cfg.vocab)
        printf("# %s: %s tokenizer, %d tokens\n", load, ts_lmtok_kind_name(tok.kind), (int)tok.count);
    else if (tok.count)
        printf("# %s: %s tokenizer, %d tokens (the model's %d: ids from %d on are padding)\n", load,
               ts_lmtok_kind_name(tok.kind), (int)tok.count, m.cfg.vocab, (int)tok.count);
    else printf("# %s: no tokenizer (ids only), a vocabulary of %d\n", load, m.cfg.vocab);
    if (layout)
        printf("# layout: %s\n", strcmp(layout, "nanogpt") == 0  ? "nanogpt (nn.Linear weights, (out, in))"
                                 : strcmp(layout, "mingpt") == 0 ? "mingpt (nn.Linear weights, (out, in))"
                                                                 : "hf (Conv1D weights, (in, out), transposed)");
    char unused[160];
    if (ts_hf_unused(load, unused, sizeof unused)) printf("# %s: not used: %s\n", load, unused);
    char sources[400] = "";
    if (layout) ts_gpt2_sources(load, lo, sources, sizeof sources);
    else if (ts_hf_is(load)) snprintf(sources, sizeof sources, "every setting from its config.json");
    else snprintf(sources, sizeof sources, "every setting from its __metadata__ (tscope's config)");
    printf("# settings: %s%s%s\n", settings_line, sources[0] ? "; " : "", sources);
    ts_hook hook = w ? ts_trace_writer_hook(w) : (ts_hook){0};
    if (ts_experiment_active(&ex)) ts_experiment_attach(&ex, &hook);
    ts_tensor out;
    st = ts_model_forward(&m, &in, &hook, &out);
    if (!st) st = ts_experiment_lens_finish(&ex, &m, &hook);
    bool masked = ts_model_is_masked_lm(&m.cfg);
    if (!st && w && B == 1 && !masked) st = ts_lm_next_loss_step(&hook, ids.ids, &out); /* one text's losses */
    if (st) {
        rc = ts_cli_error("run", "%s", ts_last_error());
        trace_cli_close(tc, w, "run");
        w = NULL;
        goto out;
    }
    experiment_cli_report(&ex);
    for (int b = 0; b < B; b++) {
        if (B > 1) printf("%ssequence %d of %d\n", b ? "\n" : "", b, B);
        report(&tok, ids.ids + (size_t)b * S, out.data + (size_t)b * S * out.shape[2], S, out.shape[2], masked);
    }
    if (ex.lens) experiment_cli_print_lens(&ex, &tok, S, m.cfg.vocab, masked);
    st = ts_model_probs_step(&hook, &out, run_temperature);
    if (st) {
        rc = ts_cli_error("run", "%s", ts_last_error());
        trace_cli_close(tc, w, "run");
        w = NULL;
        goto out;
    }
    rc = expect ? run_expect(expect, tol, &out) : 0;
    int rc_trace = trace_cli_close(tc, w, "run");
    if (!rc) rc = rc_trace;
    w = NULL;
    if (!rc && scores) rc = print_scores(load, lo, xc);
out:
    if (w) ts_trace_writer_abort(w);
    free(types);
    free(settings);
    ts_experiment_free(&ex);
    free(edits_json);
    ts_model_free(&m);
    ts_lmtok_free(&tok);
    ts_bpe_ids_free(&ids);
    return rc;
}
