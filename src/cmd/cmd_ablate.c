/* tscope ablate: knock out every head, then every FFN, of a language model
 * one at a time, and see what each costs the loss on a text (and on a span
 * of its tokens): a table and a layers x heads heatmap (docs/experiments.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "lm_cli.h"
#include "sweep_cli.h"

typedef struct ablate_opts {
    const char *load, *text, *positions, *output, *trace, *npz, *json;
    bool mean;
    sweep_look look; /* --title, --caption, --projector */
    int argc; /* the command line, for the trace's metadata */
    char **argv;
} ablate_opts;

/* "A-B" (or "A") into first..last. */
static ts_status parse_span(const char *text, int S, int *first, int *last) {
    *first = 1, *last = S - 1;
    if (!text) return TS_OK;
    int64_t a, b;
    if (!ts_text_range(text, S - 1, true, &a, &b) || a < 1)
        return ts_fail(TS_ERR_ARG, "--positions %s: give A-B with 1 <= A <= B <= %d (the text's tokens, each "
                                   "predicted from the ones before)", text, S - 1);
    *first = (int)a, *last = (int)b;
    return TS_OK;
}

static void print_table(const ts_ablate_sweep *s, bool span) {
    printf("layer  knocked out  loss change  %s\n", span ? "on the span" : "");
    for (int l = 0; l < s->layers; l++)
        for (int h = 0; h <= s->heads; h++) {
            int k = l * (s->heads + 1) + h;
            char what[24];
            if (h < s->heads) snprintf(what, sizeof what, "head %d", h);
            else snprintf(what, sizeof what, "ffn");
            printf("%5d  %-11s  %+11.3f", l, what, s->delta[k]);
            if (span) printf("  %+11.3f", s->delta_span[k]);
            printf("\n");
        }
}

/* The sweep as a trace (--trace): ablate.loss_change (layers, heads + 1),
 * the FFN last, and with --positions ablate.loss_change_span, for a lesson
 * to draw and quote. */
static ts_status write_trace(const ablate_opts *o, const ts_model *m, const ts_lmtok *tok, const ts_bpe_ids *ids,
                             const ts_ablate_sweep *sw) {
    trace_cli tc = {.path = o->trace, .level = "values"};
    ts_trace_writer *w;
    TS_TRY(lm_cli_trace_open(&tc, &m->cfg, tok, ids->ids, 1, (int)ids->count, o->argc, o->argv, NULL, &w));
    ts_tensor t = {.data = sw->delta, .rank = 2, .shape = {sw->layers, sw->heads + 1},
                   .stride = {sw->heads + 1, 1}};
    ts_status st = ts_trace_writer_step(w, "ablate.loss_change", TS_OP_METRIC, &t, TS_TAG_HEAD_SCORES);
    t.data = sw->delta_span;
    if (!st && o->positions) st = ts_trace_writer_step(w, "ablate.loss_change_span", TS_OP_METRIC, &t, TS_TAG_HEAD_SCORES);
    if (st) {
        ts_trace_writer_abort(w);
        return st;
    }
    return trace_cli_close(&tc, w, "ablate") ? ts_fail(TS_ERR_IO, "%s", ts_last_error()) : TS_OK;
}

static int run(const ablate_opts *o) {
    ts_status st = o->output ? sweep_cli_check_output(o->output) : TS_OK;
    if (!st) st = sweep_cli_look_check(&o->look, o->output || !(o->trace || o->npz || o->json));
    ts_model m;
    ts_lmtok tok;
    ts_bpe_ids ids;
    if (st) return ts_cli_error("ablate", "%s", ts_last_error());
    if ((st = sweep_cli_open(o->load, o->text, "--text", &m, &tok, &ids))) return ts_cli_error("ablate", "%s", ts_last_error());
    int S = (int)ids.count, first, last;
    ts_ablate_sweep sw = {0};
    st = parse_span(o->positions, S, &first, &last);
    int rc = 0;
    if (!st) st = ts_experiment_ablate_sweep(&m, ids.ids, first, last, o->mean ? TS_EDIT_MEAN : TS_EDIT_ZERO, &sw);
    if (st) {
        rc = ts_cli_error("ablate", "%s", ts_last_error());
        goto out;
    }
    bool span = o->positions != NULL;
    printf("# %s: %d tokens; each head (its slice of values) and each FFN (its out) %s, one at a time\n", o->load, S,
           o->mean ? "replaced by its mean over the positions" : "zeroed");
    printf("loss %.3f nats/token over tokens 1-%d", sw.base, S - 1);
    if (span) printf(", %.3f over tokens %d-%d (the span)", sw.base_span, first, last);
    printf("\n");
    print_table(&sw, span);
    if (o->trace && (st = write_trace(o, &m, &tok, &ids, &sw))) {
        rc = ts_cli_error("ablate", "%s", ts_last_error());
        goto out;
    }
    if (o->npz || o->json) {
        int64_t shape[2] = {sw.layers, sw.heads + 1};
        sweep_array arr[] = {
            {"loss_change", sw.delta, NULL, NULL, 2, {shape[0], shape[1]}},
            {"loss_change_span", sw.delta_span, NULL, NULL, 2, {shape[0], shape[1]}},
            {"base", NULL, &sw.base, NULL, 0, {0}},
            {"base_span", NULL, &sw.base_span, NULL, 0, {0}},
            {"span", NULL, (double[]){first, last}, NULL, 1, {2}},
        };
        int n = (int)(sizeof arr / sizeof arr[0]);
        if (o->npz && (st = sweep_cli_write_npz(o->npz, arr, n))) rc = ts_cli_error("ablate", "%s", ts_last_error());
        if (!rc && o->json && (st = sweep_cli_write_json(o->json, arr, n)))
            rc = ts_cli_error("ablate", "%s", ts_last_error());
        if (rc) goto out;
    }
    /* the figure when asked for, or when the numbers go nowhere else */
    if ((o->trace || o->npz || o->json) && !o->output) goto out;
    const char *path = o->output ? o->output : "ablate.png";
    int L = sw.layers, H = sw.heads;
    char rows[16][24], cols[65][24], title[160], sub[300];
    const char *rl[16], *cl[65];
    if (L > 16 || H + 1 > 65) {
        printf("(no figure: more than 16 layers or 64 heads)\n");
        goto out;
    }
    for (int l = 0; l < L; l++) snprintf(rows[l], sizeof rows[l], "layer %d", l), rl[l] = rows[l];
    for (int h = 0; h <= H; h++) {
        if (h < H) snprintf(cols[h], sizeof cols[h], "head %d", h);
        else snprintf(cols[h], sizeof cols[h], "FFN");
        cl[h] = cols[h];
    }
    snprintf(title, sizeof title, "change in loss with one head or FFN %s", o->mean ? "mean-ablated" : "knocked out");
    if (span)
        snprintf(sub, sizeof sub, "nats/token on tokens %d-%d (%.3f unedited) \xc2\xb7 %s \xc2\xb7 red: it mattered",
                 first, last, sw.base_span, sweep_cli_file_name(o->load));
    else
        snprintf(sub, sizeof sub, "nats/token on the whole text (%.3f unedited) \xc2\xb7 %s \xc2\xb7 red: it mattered",
                 sw.base, sweep_cli_file_name(o->load));
    sweep_figure f = {.path = path, .title = title, .subtitle = sub, .row_axis = "layer", .col_axis = "knocked out",
                      .values = span ? sw.delta_span : sw.delta, .rows = L, .cols = H + 1, .row_labels = rl,
                      .col_labels = cl, .bar_label = "loss change (nats)", .look = &o->look};
    if ((st = sweep_cli_figure(&f))) rc = ts_cli_error("ablate", "%s", ts_last_error());
    else printf("wrote %s\n", path);
out:
    ts_ablate_sweep_free(&sw);
    ts_model_free(&m);
    ts_lmtok_free(&tok);
    ts_bpe_ids_free(&ids);
    return rc;
}

int ts_cmd_ablate(int argc, char **argv) {
    ablate_opts o = {0};
    const ts_flag flags[] = {
        {"--load", TS_FLAG_STRING, &o.load, "W.safetensors", "a language model's checkpoint (tscope train --task lm)",
         NULL, NULL, NULL},
        {"--text", TS_FLAG_STRING, &o.text, "T", "the text whose loss each knock-out changes", NULL, NULL, NULL},
        {"--positions", TS_FLAG_STRING, &o.positions, "A-B",
         "also the loss on tokens A to B only (e.g. a repeated half), which the figure then shows", NULL, NULL, NULL},
        {"--mean", TS_FLAG_BOOL, &o.mean, NULL, "replace each by its mean over the positions instead of zero", NULL,
         NULL, NULL},
        {"--output", TS_FLAG_STRING, &o.output, "FILE",
         "the heatmap, also -o: .png, .svg or .pdf (ablate.png, unless --trace is given)", NULL, NULL, NULL},
        {"--trace", TS_FLAG_STRING, &o.trace, "FILE",
         "also the changes as a trace: ablate.loss_change (layers, heads + 1), the FFN last", NULL, NULL, NULL},
        {"--npz", TS_FLAG_STRING, &o.npz, "FILE",
         "also the numbers at full precision: loss_change, loss_change_span (layers, heads + 1), base, base_span, "
         "span", NULL, NULL, NULL},
        {"--json", TS_FLAG_STRING, &o.json, "FILE", "the same as JSON", NULL, NULL, NULL},
        SWEEP_LOOK_FLAGS(o.look),
    };
    o.argc = argc, o.argv = argv;
    const ts_cli_spec spec = {
        .command = "ablate",
        .synopsis = "--load W.safetensors --text T [--positions A-B] [--mean] [-o FIG.png|svg|pdf] [--trace FILE]\n"
                    "       [--npz FILE] [--json FILE] [--title T] [--caption C] [--projector]",
        .description = "Knock out every attention head (its slice of values), then every FFN (its out), one at a\n"
                       "time, and print how much each raises the loss on the text: the heads that matter are\n"
                       "the ones whose loss goes up. Also drawn as a layers x heads heatmap (docs/experiments.md).",
        .flags = flags,
        .n_flags = (int)(sizeof flags / sizeof flags[0]),
    };
    int rc = sweep_cli_parse(&spec, argc, argv);
    if (rc >= 0) return rc;
    return run(&o);
}
