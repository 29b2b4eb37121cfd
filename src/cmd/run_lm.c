/* run_lm: a language model's checkpoint from the command line (lm_cli.h). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lm_cli.h"
#include "model_flags.h"
#include "tscope/kernels.h"
#include "tscope/train.h"

ts_status lm_cli_open(const char *path, int B, int S, ts_model *m, ts_lmtok *tok) {
    ts_model_config cfg;
    memset(m, 0, sizeof *m);
    ts_status st = ts_lm_checkpoint_read(path, &cfg, tok);
    if (st) return st;
    int most = cfg.pe == TS_PE_LEARNED ? (cfg.max_pos ? cfg.max_pos : cfg.seq) : 1 << 20;
    if (S > most) {
        ts_lmtok_free(tok);
        return ts_fail(TS_ERR_ARG, "%d tokens: %s learnt positions 0 to %d only", S, path, most - 1);
    }
    cfg.batch = B;
    cfg.seq = S;
    cfg.max_pos = cfg.pe == TS_PE_LEARNED ? most : 0;
    cfg.dropout = 0;
    st = ts_model_config_check(&cfg);
    if (!st) st = ts_model_init(m, &cfg);
    if (!st) st = ts_lm_checkpoint_load(m, path);
    if (st) {
        ts_model_free(m);
        ts_lmtok_free(tok);
    }
    return st;
}

ts_status lm_cli_trace_open(const trace_cli *tc, const ts_model_config *cfg, const ts_lmtok *tok, const int32_t *ids,
                            int B, int S, int argc, char **argv, ts_trace_writer **out) {
    *out = NULL;
    ts_trace_options opt;
    ts_trace_options_default(&opt);
    ts_status st = tc->level ? ts_trace_level_parse(tc->level, &opt.level) : TS_OK;
    if (st) return st;
    for (int i = 0; i < tc->only.count; i++) opt.only[opt.n_only++] = tc->only.items[i];
    opt.keep_batch = tc->keep_batch_seen ? tc->keep_batch : -1;
    char *labels = malloc((size_t)B * S * 64);
    const char **lab = malloc(sizeof *lab * (size_t)B * S);
    char *config = ts_model_config_to_json(cfg), *tokjson = ts_lmtok_to_json(tok);
    char **line = calloc((size_t)argc + 1, sizeof *line);
    char *meta = NULL;
    st = labels && lab && config && tokjson && line ? TS_OK : ts_fail(TS_ERR_NOMEM, "trace: no memory");
    for (int i = 0; !st && i < B * S; i++) {
        ts_lmtok_label(tok, ids[i], labels + (size_t)i * 64, 64);
        lab[i] = labels + (size_t)i * 64;
    }
    if (!st) {
        line[0] = "tscope";
        for (int i = 0; i < argc; i++) line[i + 1] = argv[i];
        st = ts_trace_metadata_build(&meta, config, lab, S, NULL, 0, argc + 1, line);
    }
    if (!st && B > 1) st = ts_trace_metadata_add_batch_tokens(&meta, TS_TRACE_SOURCE, lab, B, S);
    if (!st) { /* the tokenizer too: it names the logits' vocabulary axis */
        cJSON *root = cJSON_Parse(meta), *t = cJSON_Parse(tokjson);
        if (root && t) {
            cJSON_AddItemToObject(root, "tokenizer", t);
            char *again = cJSON_PrintUnformatted(root);
            if (again) free(meta), meta = again;
        } else {
            cJSON_Delete(t);
        }
        cJSON_Delete(root);
    }
    if (!st) st = ts_trace_writer_open(tc->path, meta, &opt, out);
    free(meta), free(line), free(config), free(tokjson), free(lab), free(labels);
    return st;
}

/* Spaces that bring label to width terminal columns (%-Ns pads bytes, and a
 * label like "␣the" has more bytes than columns). */
static int pad_to(const char *label, int width) {
    int used = ts_text_columns(label);
    return used < width ? width - used : 0;
}

/* The most likely next token after row (V logits), and its probability. */
static int32_t argmax_row(const float *row, int64_t V, double *p_best, double *z_out) {
    int32_t best = ts_model_argmax(row, (int)V);
    double z = 0;
    for (int64_t v = 0; v < V; v++) z += exp((double)row[v] - row[best]);
    *p_best = 1.0 / z, *z_out = z;
    return best;
}

/* Each position's most likely next token, and how sure the model is; the
 * columns as wide as their longest label. */
static void report(const ts_lmtok *tok, const int32_t *ids, const ts_tensor *logits) {
    int64_t S = logits->shape[1], V = logits->shape[2];
    int w_token = 5, w_next = 13;
    char a[64], b[64];
    double p_best, z, loss = 0;
    for (int64_t i = 0; i < S; i++) {
        ts_lmtok_label(tok, ids[i], a, sizeof a);
        ts_lmtok_label(tok, argmax_row(logits->data + i * V, V, &p_best, &z), b, sizeof b);
        if (ts_text_columns(a) > w_token) w_token = ts_text_columns(a);
        if (ts_text_columns(b) > w_next) w_next = ts_text_columns(b);
    }
    printf("position  token%*s  next (argmax)%*s  p(argmax)  p(actual next)\n", w_token - 5, "", w_next - 13, "");
    for (int64_t i = 0; i < S; i++) {
        const float *row = logits->data + i * V;
        int32_t best = argmax_row(row, V, &p_best, &z);
        ts_lmtok_label(tok, ids[i], a, sizeof a);
        ts_lmtok_label(tok, best, b, sizeof b);
        printf("%8lld  %s%*s  %s%*s  %9.3f", (long long)i, a, pad_to(a, w_token), "", b, pad_to(b, w_next), "", p_best);
        if (i + 1 < S) {
            double p = exp((double)row[ids[i + 1]] - row[best]) / z;
            loss -= log(p);
            printf("  %14.3f", p);
        }
        printf("\n");
    }
    if (S > 1) printf("loss on this text: %.4f nats/token over %lld predictions\n", loss / (S - 1), (long long)S - 1);
}

/* Every head's scores on 8 random sequences written twice, as the training trace measures them. */
static int print_scores(const char *load) {
    ts_model m;
    ts_lmtok tok;
    ts_model_config cfg;
    ts_status st = ts_lm_checkpoint_read(load, &cfg, NULL);
    if (!st) st = lm_cli_open(load, 8, cfg.seq, &m, &tok);
    if (st) return ts_cli_error("run", "%s", ts_last_error());
    int32_t *ids = malloc(sizeof(int32_t) * 8 * (size_t)cfg.seq);
    ts_lm_measures me;
    memset(&me, 0, sizeof me);
    if (!ids) st = ts_fail(TS_ERR_NOMEM, "out of memory");
    if (!st) ts_lm_repeat_ids(ids, 8, cfg.seq, cfg.vocab, 2024);
    if (!st) st = ts_lm_measure(&m, ids, &me);
    if (!st) {
        printf("# %s: each head on 8 random sequences of %d tokens written twice (docs/training.md)\n", load,
               cfg.seq / 2);
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
    free(ids);
    ts_model_free(&m);
    ts_lmtok_free(&tok);
    return st ? ts_cli_error("run", "%s", ts_last_error()) : 0;
}

/* --ids: one sequence of ids (1, S) the vocabulary has. */
static ts_status read_ids(const char *path, int vocab, ts_bpe_ids *ids) {
    ts_npy x = {0};
    ts_status st = ts_npy_read_labels(&x, path);
    if (st) st = ts_fail(st, "--ids: %s", ts_last_error()); /* the flag, before the reader's message */
    if (!st && !(x.rank == 2 && x.shape[0] == 1) && !(x.rank == 1))
        st = ts_fail(TS_ERR_SHAPE, "--ids %s: a language model's checkpoint reads one sequence, (1, S) or (S)", path);
    if (!st && x.numel == 0) st = ts_fail(TS_ERR_ARG, "--ids %s holds no ids", path);
    if (!st && !(ids->ids = malloc(sizeof(int32_t) * (size_t)x.numel))) st = ts_fail(TS_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; !st && i < x.numel; i++) {
        if (x.i64[i] < 0 || x.i64[i] >= vocab)
            st = ts_fail(TS_ERR_ARG, "--ids %s: id %lld at position %lld is outside the vocabulary of %d", path,
                         (long long)x.i64[i], (long long)i, vocab);
        else
            ids->ids[i] = (int32_t)x.i64[i];
    }
    if (!st) ids->count = ids->cap = (size_t)x.numel;
    ts_npy_free(&x);
    return st;
}

int run_lm(const char *load, const ts_cli_list *text, const char *ids_path, ts_flag *flags, int n, const trace_cli *tc,
           const char *print_shapes, bool backward, bool scores, int argc, char **argv) {
    /* what a language model's run uses; any other flag given is refused, never ignored */
    static const char *const used[] = {"--load", "--text", "--ids", "--scores", "--backward", "--print-shapes",
                                       "--trace", "--level", "--only", "--keep-batch", NULL};
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
            return ts_cli_error("run", "%s: --load %s is read as a language model (a GPT-2 folder, or a checkpoint of "
                                       "train --task lm), whose config and tokenizer come with it; give it only --text "
                                       "or --ids (and the trace's flags)",
                                flags[i].name, load);
    }
    if (backward) return ts_cli_error("run", "--backward is not for a language model's checkpoint yet");
    if (print_shapes) return ts_cli_error("run", "--print-shapes: use tscope shapes --preset lm");
    if (scores && text->count == 0 && !ids_path && !tc->path) return print_scores(load);
    if (ids_path && text->count) return ts_cli_error("run", "--text and --ids both give the input: choose one");
    if (!ids_path && text->count != 1)
        return ts_cli_error("run", "give one --text (or --ids) to read through the language model %s", load);
    ts_lmtok tok;
    ts_model m;
    memset(&tok, 0, sizeof tok);
    memset(&m, 0, sizeof m);
    ts_bpe_ids ids = {0};
    ts_trace_writer *w = NULL;
    ts_status st = ts_kernels_init();
    int rc = 0;
    /* the tokenizer first, to know the length */
    if (!st) st = ts_lm_checkpoint_read(load, NULL, &tok);
    if (!st && ids_path) st = read_ids(ids_path, (int)tok.count, &ids);
    if (!st && !ids_path) st = ts_lmtok_encode(&tok, text->items[0], strlen(text->items[0]), &ids);
    if (!st && ids.count == 0) st = ts_fail(TS_ERR_ARG, "--text has no tokens");
    ts_lmtok_free(&tok);
    if (!st) st = lm_cli_open(load, 1, (int)ids.count, &m, &tok);
    if (!st && (rc = trace_cli_check(tc, "run", 1)) >= 0) goto out;
    rc = 0;
    if (!st && tc->path) st = lm_cli_trace_open(tc, &m.cfg, &tok, ids.ids, 1, (int)ids.count, argc, argv, &w);
    if (st) {
        rc = ts_cli_error("run", "%s", ts_last_error());
        goto out;
    }
    char desc[256];
    model_config_describe(&m.cfg, desc, sizeof desc);
    printf("# %s\n# %s: %s tokenizer, %d tokens\n", desc, load, ts_lmtok_kind_name(tok.kind), (int)tok.count);
    ts_hook hook = w ? ts_trace_writer_hook(w) : (ts_hook){0};
    ts_model_input in = {.src_ids = ids.ids};
    ts_tensor out;
    st = ts_model_forward(&m, &in, &hook, &out);
    if (st) {
        rc = ts_cli_error("run", "%s", ts_last_error());
        trace_cli_close(tc, w, "run");
        w = NULL;
        goto out;
    }
    report(&tok, ids.ids, &out);
    rc = trace_cli_close(tc, w, "run");
    w = NULL;
    if (!rc && scores) rc = print_scores(load);
out:
    if (w) ts_trace_writer_abort(w);
    ts_model_free(&m);
    ts_lmtok_free(&tok);
    ts_bpe_ids_free(&ids);
    return rc;
}
