/* tscope attribute: direct logit attribution. A pre-LN language model's
 * final stream is the sum of what each part wrote into it, so the logit of
 * one token at one position splits into a share per part: the embedding,
 * each head, each attention's bias, each FFN, through the final norm's scale
 * at that position. A table and a bar chart (docs/experiments.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "sweep_cli.h"
#include "tscope/render.h"

typedef struct attr_opts {
    const char *load, *text, *token, *output;
    int position;
    bool position_seen;
    sweep_look look; /* --title, --caption, --projector */
} attr_opts;

typedef struct bars_job {
    ts_render_bars_view v;
} bars_job;

static ts_status draw(void *ctx, cairo_t *cr, double w, double h) {
    return ts_render_bars(cr, (ts_render_rect){0, 0, w, h}, &((bars_job *)ctx)->v);
}

static int run(const attr_opts *o) {
    ts_status st = o->output ? sweep_cli_check_output(o->output) : TS_OK;
    if (!st) st = sweep_cli_look_check(&o->look, true);
    if (st) return ts_cli_error("attribute", "%s", ts_last_error());
    ts_model m;
    ts_lmtok tok;
    ts_bpe_ids ids;
    if ((st = sweep_cli_open(o->load, o->text, "--text", &m, &tok, &ids)))
        return ts_cli_error("attribute", "%s", ts_last_error());
    int S = (int)ids.count, V = m.cfg.vocab, pos = o->position_seen ? o->position : S - 1, token = -1, rc = 0;
    ts_dla d = {0};
    if (pos < 0 || pos >= S) st = ts_fail(TS_ERR_ARG, "--position %d: the text has positions 0 to %d", pos, S - 1);
    if (!st && o->token) st = sweep_cli_one_token(&tok, "--token", o->token, &token);
    if (!st && token < 0) { /* the model's own top guess there */
        ts_tensor logits;
        ts_hook none = {0};
        ts_model_input in = {.src_ids = ids.ids};
        st = ts_model_forward(&m, &in, &none, &logits);
        if (!st) token = ts_model_argmax(logits.data + (int64_t)pos * V, V);
    }
    if (!st) st = ts_experiment_dla(&m, ids.ids, pos, token, &d);
    if (st) {
        rc = ts_cli_error("attribute", "%s", ts_last_error());
        goto out;
    }
    char tl[64], at[64];
    ts_lmtok_label(&tok, token, tl, sizeof tl);
    ts_lmtok_label(&tok, ids.ids[pos], at, sizeof at);
    int L = d.layers, H = d.heads, n = 1 + L * (H + 2) + 1;
    char (*labels)[48] = calloc((size_t)n, sizeof *labels);
    const char **lp = calloc((size_t)n, sizeof *lp);
    double *vals = calloc((size_t)n, sizeof *vals);
    if (!labels || !lp || !vals) {
        free(labels), free(lp), free(vals);
        rc = ts_cli_error("attribute", "out of memory");
        goto out;
    }
    int k = 0;
    snprintf(labels[k], sizeof labels[k], "embedding"), vals[k++] = d.embed;
    for (int l = 0; l < L; l++) {
        for (int h = 0; h < H; h++) snprintf(labels[k], sizeof labels[k], "layer %d head %d", l, h), vals[k++] = d.head[l * H + h];
        snprintf(labels[k], sizeof labels[k], "layer %d attn bias", l), vals[k++] = d.attn_bias[l];
        snprintf(labels[k], sizeof labels[k], "layer %d FFN", l), vals[k++] = d.ffn[l];
    }
    snprintf(labels[k], sizeof labels[k], "norm beta, head bias"), vals[k++] = d.rest;
    double sum = 0;
    printf("# %s: the logit of '%s' at position %d ('%s'), part by part through the final norm\n", o->load, tl, pos, at);
    printf("%-22s  %9s\n", "part", "share");
    for (int i = 0; i < k; i++) {
        lp[i] = labels[i];
        sum += vals[i];
        printf("%-22s  %+9.3f\n", labels[i], vals[i]);
    }
    printf("sum %.4f; the model's logit %.4f\n", sum, d.logit);
    const char *path = o->output ? o->output : "attribute.png";
    char title[160], sub[300];
    snprintf(title, sizeof title, "direct logit attribution: logit('%s') at position %d", tl, pos);
    snprintf(sub, sizeof sub, "each part's share through the final norm's scale; they add up to %.2f \xc2\xb7 %s", d.logit,
             sweep_cli_file_name(o->load));
    bars_job job = {{.labels = lp, .values = vals, .n = k, .title = o->look.title ? o->look.title : title,
                     .subtitle = sub, .value_axis = "share of the logit"}};
    if ((st = sweep_cli_write_figure(path, title, &o->look, 760, ts_render_bars_height(k), draw, &job)))
        rc = ts_cli_error("attribute", "%s", ts_last_error());
    else printf("wrote %s\n", path);
    free(labels), free(lp), free(vals);
out:
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
        {"--token", TS_FLAG_STRING, &o.token, "X", "the token whose logit is split (the model's top guess there)",
         NULL, NULL, NULL},
        {"--position", TS_FLAG_INT, &o.position, "P", "the position whose next-token logit is split (the last)", NULL,
         NULL, &o.position_seen},
        {"--output", TS_FLAG_STRING, &o.output, "FILE", "the bar chart, also -o: .png, .svg or .pdf (attribute.png)",
         NULL, NULL, NULL},
        SWEEP_LOOK_FLAGS(o.look),
    };
    const ts_cli_spec spec = {
        .command = "attribute",
        .synopsis = "--load W.safetensors --text T [--token X] [--position P] [-o FIG.png|svg|pdf]\n"
                    "       [--title T] [--caption C] [--projector]",
        .description = "Direct logit attribution: split the logit of one token at one position into what each\n"
                       "head, each FFN and the embedding wrote into the stream, each through the final norm's\n"
                       "scale there. The shares add up to the logit. A table and a bar chart (docs/experiments.md).",
        .flags = flags,
        .n_flags = (int)(sizeof flags / sizeof flags[0]),
    };
    int rc = sweep_cli_parse(&spec, argc, argv);
    if (rc >= 0) return rc;
    return run(&o);
}
