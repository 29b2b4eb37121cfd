/* tscope attribute: direct logit attribution. A pre-LN language model's
 * final stream is the sum of what each part wrote into it, so the logit of
 * a token at a position (or the difference of two tokens' logits) splits
 * into a share per part: the embedding, each head, each attention's bias,
 * each FFN, through the final norm's scale at that position. One position:
 * a table and a bar chart; every position (--position all, one forward
 * pass): a parts x positions table and heatmap. --npz and --json write the
 * shares as computed (docs/experiments.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "sweep_cli.h"
#include "tscope/render.h"

typedef struct attr_opts {
    const char *load, *text, *ids, *token, *answer, *wrong, *position, *output, *npz, *json;
    sweep_look look; /* --title, --caption, --projector */
} attr_opts;

typedef struct bars_job {
    ts_render_bars_view v;
} bars_job;

static ts_status draw(void *ctx, cairo_t *cr, double w, double h) {
    return ts_render_bars(cr, (ts_render_rect){0, 0, w, h}, &((bars_job *)ctx)->v);
}

/* --position: one position (first == last), or all (0 to S - 1); the last without it. */
static ts_status parse_position(const char *text, int S, int *first, int *last) {
    *first = *last = S - 1;
    if (!text) return TS_OK;
    if (strcmp(text, "all") == 0) {
        *first = 0;
        return TS_OK;
    }
    char *end;
    long p = strtol(text, &end, 10);
    if (end == text || *end) return ts_fail(TS_ERR_ARG, "--position %s: give a position (0 to %d) or all", text, S - 1);
    if (p < 0 || p >= S) return ts_fail(TS_ERR_ARG, "--position %ld: the text has positions 0 to %d", p, S - 1);
    *first = *last = (int)p;
    return TS_OK;
}

/* The target at every position: --token X, --answer X --wrong Y, or the
 * model's top guess (-1). */
static ts_status read_targets(const attr_opts *o, ts_lmtok *tok, int S, int32_t *answer, int32_t *wrong, bool *diff) {
    int a = -1, w = -1;
    *diff = false;
    if (o->token && o->answer)
        return ts_fail(TS_ERR_ARG, "--token X splits one token's logit, --answer X --wrong Y a difference: give one");
    if (o->wrong && !o->answer) return ts_fail(TS_ERR_ARG, "--wrong %s: give --answer X too", o->wrong);
    if (o->answer && !o->wrong)
        return ts_fail(TS_ERR_ARG, "--answer %s: give --wrong Y too (or --token X for one token's logit)", o->answer);
    if (o->token) TS_TRY(sweep_cli_one_token(tok, "--token", o->token, &a));
    if (o->answer) {
        TS_TRY(sweep_cli_one_token(tok, "--answer", o->answer, &a));
        TS_TRY(sweep_cli_one_token(tok, "--wrong", o->wrong, &w));
        if (a == w) return ts_fail(TS_ERR_ARG, "--answer %s and --wrong %s are the same token", o->answer, o->wrong);
        *diff = true;
    }
    for (int p = 0; p < S; p++) answer[p] = a, wrong[p] = w;
    return TS_OK;
}

/* "logit('i')", "logit('d') - logit('G')" of position p's targets. */
static void target_text(const ts_lmtok *tok, const ts_dla *d, int p, const char *minus, char *buf, size_t n) {
    char a[64], w[64];
    ts_lmtok_label(tok, d->answer[p], a, sizeof a);
    if (d->wrong[p] < 0) {
        snprintf(buf, n, "logit('%s')", a);
        return;
    }
    ts_lmtok_label(tok, d->wrong[p], w, sizeof w);
    snprintf(buf, n, "logit('%s') %s logit('%s')", a, minus, w);
}

/* The shares of rows first..last as numbers at full precision (float32 as
 * computed; the ids and positions as numbers; names in JSON only). */
static ts_status write_numbers(const attr_opts *o, const ts_dla *d, const ts_lmtok *tok, const int32_t *ids, int first,
                               int last) {
    int n = last - first + 1, P = d->parts;
    char (*names)[48] = calloc((size_t)P, sizeof *names), (*tokens)[64] = calloc((size_t)n * 2, sizeof *tokens);
    const char **pn = calloc((size_t)P, sizeof *pn), **tn = calloc((size_t)n * 2, sizeof *tn);
    double *num = calloc((size_t)n * 3, sizeof *num);
    ts_status st = names && tokens && pn && tn && num ? TS_OK : ts_fail(TS_ERR_NOMEM, "out of memory");
    for (int k = 0; !st && k < P; k++) ts_dla_part_name(d, k, names[k], sizeof names[k]), pn[k] = names[k];
    for (int i = 0; !st && i < n; i++) {
        int p = first + i;
        ts_lmtok_label(tok, ids[p], tokens[i], sizeof tokens[i]);
        target_text(tok, d, p, "-", tokens[n + i], sizeof tokens[n + i]);
        tn[i] = tokens[i], tn[n + i] = tokens[n + i];
        num[i] = p, num[n + i] = d->answer[p], num[2 * n + i] = d->wrong[p];
    }
    if (!st) {
        sweep_array arr[] = {
            {"shares", d->share + (int64_t)first * P, NULL, NULL, 2, {n, P}},
            {"logit", d->logit + first, NULL, NULL, 1, {n}},
            {"position", NULL, num, NULL, 1, {n}},
            {"answer", NULL, num + n, NULL, 1, {n}},
            {"wrong", NULL, num + 2 * n, NULL, 1, {n}},
            {"parts", NULL, NULL, pn, 1, {P}},
            {"tokens", NULL, NULL, tn, 1, {n}},
            {"targets", NULL, NULL, tn + n, 1, {n}},
        };
        int count = (int)(sizeof arr / sizeof arr[0]);
        if (o->npz) st = sweep_cli_write_npz(o->npz, arr, count);
        if (!st && o->json) st = sweep_cli_write_json(o->json, arr, count);
    }
    free(names), free(tokens), free(pn), free(tn), free(num);
    return st;
}

/* One position: a table of every part's share and a bar chart. */
static ts_status one_position(const attr_opts *o, const ts_dla *d, const ts_lmtok *tok, const int32_t *ids, int pos) {
    int P = d->parts;
    char (*labels)[48] = calloc((size_t)P, sizeof *labels);
    const char **lp = calloc((size_t)P, sizeof *lp);
    double *vals = calloc((size_t)P, sizeof *vals);
    if (!labels || !lp || !vals) {
        free(labels), free(lp), free(vals);
        return ts_fail(TS_ERR_NOMEM, "out of memory");
    }
    char target[160], at[64];
    target_text(tok, d, pos, "-", target, sizeof target);
    ts_lmtok_label(tok, ids[pos], at, sizeof at);
    char a[64];
    ts_lmtok_label(tok, d->answer[pos], a, sizeof a);
    if (d->wrong[pos] >= 0)
        printf("# %s: %s at position %d ('%s'), part by part through the final norm\n", o->load, target, pos, at);
    else
        printf("# %s: the logit of '%s' at position %d ('%s'), part by part through the final norm\n", o->load, a,
               pos, at);
    printf("%-22s  %9s\n", "part", "share");
    double sum = 0;
    const float *share = d->share + (int64_t)pos * P;
    for (int k = 0; k < P; k++) {
        ts_dla_part_name(d, k, labels[k], sizeof labels[k]);
        lp[k] = labels[k], vals[k] = share[k];
        sum += vals[k];
        printf("%-22s  %+9.3f\n", labels[k], vals[k]);
    }
    printf("sum %.4f; the model's %s %.4f\n", sum, d->wrong[pos] >= 0 ? "difference" : "logit", (double)d->logit[pos]);
    ts_status st = TS_OK;
    if ((o->npz || o->json) && !o->output) goto out; /* the numbers went to files: no figure unless asked */
    const char *path = o->output ? o->output : "attribute.png";
    char title[240], sub[300];
    target_text(tok, d, pos, "\xe2\x88\x92", target, sizeof target);
    snprintf(title, sizeof title, "direct logit attribution: %s at position %d", target, pos);
    snprintf(sub, sizeof sub, "each part's share through the final norm's scale; they add up to %.2f \xc2\xb7 %s",
             (double)d->logit[pos], sweep_cli_file_name(o->load));
    bars_job job = {{.labels = lp, .values = vals, .n = P, .title = o->look.title ? o->look.title : title,
                     .subtitle = sub, .value_axis = "share of the logit"}};
    if (!(st = sweep_cli_write_figure(path, title, &o->look, 760, ts_render_bars_height(P), draw, &job)))
        printf("wrote %s\n", path);
out:
    free(labels), free(lp), free(vals);
    return st;
}

/* Every position: a parts x positions table and heatmap. */
static ts_status all_positions(const attr_opts *o, const ts_dla *d, const ts_lmtok *tok, const int32_t *ids,
                               bool diff) {
    int S = d->positions, P = d->parts;
    char (*rows)[48] = calloc((size_t)P, sizeof *rows), (*cols)[24] = calloc((size_t)S, sizeof *cols);
    const char **rl = calloc((size_t)P, sizeof *rl), **cl = calloc((size_t)S, sizeof *cl);
    float *cells = calloc((size_t)P * S, sizeof *cells); /* (parts, positions): the shares turned */
    ts_status st = rows && cols && rl && cl && cells ? TS_OK : ts_fail(TS_ERR_NOMEM, "out of memory");
    if (st) goto out;
    char target[160];
    target_text(tok, d, S - 1, "-", target, sizeof target);
    printf("# %s: %d tokens; at each position, the %s split part by part through the final norm\n", o->load, S,
           diff || o->token ? target : "logit of the model's top guess");
    printf("%-22s", "part \\ position");
    for (int p = 0; p < S; p++) {
        ts_lmtok_label(tok, ids[p], cols[p], sizeof cols[p]);
        cl[p] = cols[p];
        printf(" %6s", cols[p]);
    }
    printf("\n");
    for (int k = 0; k < P; k++) {
        ts_dla_part_name(d, k, rows[k], sizeof rows[k]);
        rl[k] = rows[k];
        printf("%-22s", rows[k]);
        for (int p = 0; p < S; p++) {
            cells[(int64_t)k * S + p] = d->share[(int64_t)p * P + k];
            printf(" %6.2f", cells[(int64_t)k * S + p]);
        }
        printf("\n");
    }
    printf("%-22s", diff ? "the model's difference" : "the model's logit");
    for (int p = 0; p < S; p++) printf(" %6.2f", (double)d->logit[p]);
    printf("\n");
    if ((o->npz || o->json) && !o->output) goto out;
    const char *path = o->output ? o->output : "attribute.png";
    char title[240], sub[300];
    target_text(tok, d, S - 1, "\xe2\x88\x92", target, sizeof target);
    snprintf(title, sizeof title, "direct logit attribution at every position: %s",
             diff || o->token ? target : "the top guess's logit");
    snprintf(sub, sizeof sub, "each part's share through the final norm's scale at that position; a column adds up "
                              "to the logit \xc2\xb7 %s", sweep_cli_file_name(o->load));
    sweep_figure f = {.path = path, .title = title, .subtitle = sub, .row_axis = "part", .col_axis = "position",
                      .values = cells, .rows = P, .cols = S, .row_labels = rl, .col_labels = cl,
                      .bar_label = "share of the logit", .look = &o->look};
    if (!(st = sweep_cli_figure(&f))) printf("wrote %s\n", path);
out:
    free(rows), free(cols), free(rl), free(cl), free(cells);
    return st;
}

static int run(const attr_opts *o) {
    ts_status st = o->output ? sweep_cli_check_output(o->output) : TS_OK;
    if (!st) st = sweep_cli_look_check(&o->look, o->output || !(o->npz || o->json));
    if (st) return ts_cli_error("attribute", "%s", ts_last_error());
    ts_model m;
    ts_lmtok tok;
    ts_bpe_ids ids;
    if ((st = sweep_cli_open_input(o->load, o->text, o->ids, "--text", &m, &tok, &ids)))
        return ts_cli_error("attribute", "%s", ts_last_error());
    int S = (int)ids.count, first, last;
    bool diff;
    ts_dla d = {0};
    int32_t *answer = calloc((size_t)S, sizeof *answer), *wrong = calloc((size_t)S, sizeof *wrong);
    if (!answer || !wrong) st = ts_fail(TS_ERR_NOMEM, "out of memory");
    if (!st) st = parse_position(o->position, S, &first, &last);
    if (!st) st = read_targets(o, &tok, S, answer, wrong, &diff);
    if (!st) st = ts_experiment_dla(&m, ids.ids, answer, wrong, &d);
    if (!st && (o->npz || o->json)) st = write_numbers(o, &d, &tok, ids.ids, first, last);
    if (!st) st = first == last ? one_position(o, &d, &tok, ids.ids, first) : all_positions(o, &d, &tok, ids.ids, diff);
    int rc = st ? ts_cli_error("attribute", "%s", ts_last_error()) : 0;
    free(answer), free(wrong);
    ts_dla_free(&d);
    ts_model_free(&m);
    ts_lmtok_free(&tok);
    ts_bpe_ids_free(&ids);
    return rc;
}

int ts_cmd_attribute(int argc, char **argv) {
    attr_opts o = {0};
    const ts_flag flags[] = {
        {"--load", TS_FLAG_STRING, &o.load, "W.safetensors", "a pre-LN language model's checkpoint", NULL, NULL, NULL},
        {"--text", TS_FLAG_STRING, &o.text, "T", "the text", NULL, NULL, NULL},
        {"--ids", TS_FLAG_STRING, &o.ids, "IDS.npy", "token ids (S) or (1, S) instead of the text (a checkpoint "
         "without a tokenizer)", NULL, NULL, NULL},
        {"--token", TS_FLAG_STRING, &o.token, "X",
         "the token whose logit is split, as text or id:N (the model's top guess at each position)", NULL, NULL, NULL},
        {"--answer", TS_FLAG_STRING, &o.answer, "X", "split logit(X) - logit(Y) instead, with --wrong Y (text or id:N)",
         NULL, NULL, NULL},
        {"--wrong", TS_FLAG_STRING, &o.wrong, "Y", "the token whose logit --answer's is compared with", NULL, NULL,
         NULL},
        {"--position", TS_FLAG_STRING, &o.position, "P|all",
         "the position whose next-token logit is split, or all of them from one forward pass (the last)", NULL, NULL,
         NULL},
        {"--output", TS_FLAG_STRING, &o.output, "FILE",
         "the figure, also -o: .png, .svg or .pdf (attribute.png, unless --npz or --json is given)", NULL, NULL, NULL},
        {"--npz", TS_FLAG_STRING, &o.npz, "FILE",
         "also the numbers at full precision: shares (positions, parts), logit, position, answer, wrong", NULL, NULL,
         NULL},
        {"--json", TS_FLAG_STRING, &o.json, "FILE", "the same as JSON, with the parts', tokens' and targets' names",
         NULL, NULL, NULL},
        SWEEP_LOOK_FLAGS(o.look),
    };
    const ts_cli_spec spec = {
        .command = "attribute",
        .synopsis = "--load W.safetensors (--text T | --ids IDS.npy) [--token X | --answer X --wrong Y] [--position P|all]\n"
                    "       [-o FIG.png|svg|pdf] [--title T] [--caption C] [--projector] [--npz FILE] [--json FILE]",
        .description = "Direct logit attribution: split the logit of a token at a position (or the difference\n"
                       "logit(X) - logit(Y)) into what each head, each FFN and the embedding wrote into the\n"
                       "stream, each through the final norm's scale there. The shares add up to the logit.\n"
                       "One position: a table and a bar chart; --position all: every position from one\n"
                       "forward pass, a parts x positions heatmap (docs/experiments.md).",
        .flags = flags,
        .n_flags = (int)(sizeof flags / sizeof flags[0]),
    };
    int rc = sweep_cli_parse(&spec, argc, argv);
    if (rc >= 0) return rc;
    return run(&o);
}
