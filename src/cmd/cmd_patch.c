/* tscope patch: activation patching over every layer and position. Run a
 * clean text and a corrupted one of the same length; then, for each layer's
 * residual stream and each position, run the corrupted text with that one
 * vector taken from the clean run, and measure how much of the clean logit
 * difference (answer minus wrong, at the last position) comes back: a table
 * and a heatmap (docs/experiments.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "sweep_cli.h"
#include "tscope/io.h"

typedef struct patch_opts {
    const char *load, *clean, *corrupt, *answer, *wrong, *output, *site, *npz, *json;
    sweep_look look; /* --title, --caption, --projector */
} patch_opts;

/* "decoder.layers.1.self_attn.head3" -> "L1 head 3", ".self_attn.out" ->
 * "L1 attn", ".ffn.out" -> "L1 FFN", ".out" -> "L1 out": a figure's row
 * labels short enough to be read whole. Other names stay as they are. */
static void short_step_name(const char *name, char *out, size_t size) {
    const char *rest;
    int layer = ts_name_stack_layer(name, "decoder", &rest);
    if (layer < 0 || *rest != '.') {
        snprintf(out, size, "%s", name);
        return;
    }
    rest++;
    int64_t head;
    if (strncmp(rest, "self_attn.head", 14) == 0 && ts_text_int(rest + 14, 0, 1 << 16, &head))
        snprintf(out, size, "L%d head %lld", layer, (long long)head);
    else if (strcmp(rest, "self_attn.out") == 0) snprintf(out, size, "L%d attn", layer);
    else if (strcmp(rest, "ffn.out") == 0) snprintf(out, size, "L%d FFN", layer);
    else snprintf(out, size, "L%d %s", layer, rest);
}

static int run(const patch_opts *o) {
    ts_status st = o->output ? sweep_cli_check_output(o->output) : TS_OK;
    if (!st) st = sweep_cli_look_check(&o->look, o->output || !(o->npz || o->json));
    if (!st && (!o->clean || !o->corrupt || !o->answer))
        st = ts_fail(TS_ERR_ARG, "give --clean T1, --corrupt T2 and --answer X (the token T1 should be followed by)");
    if (st) return ts_cli_error("patch", "%s", ts_last_error());
    ts_model m;
    ts_lmtok tok;
    ts_bpe_ids clean, corrupt = {0};
    if ((st = sweep_cli_open(o->load, o->clean, "--clean", &m, &tok, &clean)))
        return ts_cli_error("patch", "%s", ts_last_error());
    ts_patch_sweep sw = {0};
    int rc = 0, answer = -1, wrong = -1, S = (int)clean.count, V = m.cfg.vocab;
    st = ts_lmtok_encode(&tok, o->corrupt, strlen(o->corrupt), &corrupt);
    if (!st && corrupt.count != clean.count)
        st = ts_fail(TS_ERR_ARG, "--corrupt has %d tokens and --clean %d: patching takes positions one for one",
                     (int)corrupt.count, S);
    if (!st) st = sweep_cli_one_token(&tok, "--answer", o->answer, &answer);
    if (!st && o->wrong) st = sweep_cli_one_token(&tok, "--wrong", o->wrong, &wrong);
    if (!st && !o->wrong) { /* the corrupted text's own guess is the wrong answer */
        ts_tensor logits;
        ts_hook none = {0};
        ts_model_input in = {.src_ids = corrupt.ids};
        st = ts_model_forward(&m, &in, &none, &logits);
        if (!st) wrong = ts_model_argmax(logits.data + (int64_t)(S - 1) * V, V);
        if (!st && wrong == answer)
            st = ts_fail(TS_ERR_ARG, "the corrupted text predicts '%s' too: give --wrong Y to compare it with",
                         o->answer);
    }
    ts_patch_site site = TS_PATCH_RESID;
    if (!st && o->site) st = ts_patch_site_parse(o->site, &site);
    if (!st) st = ts_experiment_patch_sweep_at(&m, clean.ids, corrupt.ids, answer, wrong, site, &sw);
    if (st) {
        rc = ts_cli_error("patch", "%s", ts_last_error());
        goto out;
    }
    char a_label[64], w_label[64];
    ts_lmtok_label(&tok, answer, a_label, sizeof a_label);
    ts_lmtok_label(&tok, wrong, w_label, sizeof w_label);
    printf("# %s: %d tokens; logit(%s) - logit(%s) at the last position\n", o->load, S, a_label, w_label);
    printf("clean %.3f, corrupted %.3f; each cell: the share of that difference a patch from the clean run restores\n",
           sw.clean_diff, sw.corrupt_diff);
    char (*labels)[24] = calloc((size_t)S, sizeof *labels);
    const char **cl = calloc((size_t)S, sizeof *cl), **rl = calloc((size_t)sw.rows, sizeof *rl);
    if (!labels || !cl || !rl) {
        free(labels), free(cl), free(rl);
        rc = ts_cli_error("patch", "out of memory");
        goto out;
    }
    printf("%-32s", "patched step \\ position");
    for (int p = 0; p < S; p++) {
        char t[16];
        ts_lmtok_label(&tok, corrupt.ids[p], t, sizeof t);
        snprintf(labels[p], sizeof labels[p], "%s%s", t, clean.ids[p] != corrupt.ids[p] ? "*" : "");
        cl[p] = labels[p];
        printf(" %6s", labels[p]);
    }
    printf("\n");
    for (int r = 0; r < sw.rows; r++) {
        rl[r] = sw.names[r];
        printf("%-32s", sw.names[r]);
        for (int p = 0; p < S; p++) printf(" %6.2f", sw.restored[r * S + p]);
        printf("\n");
    }
    if (o->npz || o->json) {
        const char **names = rl;
        sweep_array arr[] = {
            {"restored", sw.restored, NULL, NULL, 2, {sw.rows, S}},
            {"clean_diff", NULL, &sw.clean_diff, NULL, 0, {0}},
            {"corrupt_diff", NULL, &sw.corrupt_diff, NULL, 0, {0}},
            {"steps", NULL, NULL, names, 1, {sw.rows}},
            {"positions", NULL, NULL, cl, 1, {S}},
        };
        int n = (int)(sizeof arr / sizeof arr[0]);
        if (o->npz && (st = sweep_cli_write_npz(o->npz, arr, n))) rc = ts_cli_error("patch", "%s", ts_last_error());
        if (!rc && o->json && (st = sweep_cli_write_json(o->json, arr, n)))
            rc = ts_cli_error("patch", "%s", ts_last_error());
        if (rc || !o->output) {
            free(labels), free(cl), free(rl);
            goto out;
        }
    }
    /* the figure's rows by short names (the table and the files keep the full ones) */
    char (*short_rows)[32] = calloc((size_t)sw.rows, sizeof *short_rows);
    const char **sl = calloc((size_t)sw.rows, sizeof *sl);
    if (!short_rows || !sl) {
        free(short_rows), free(sl), free(labels), free(cl), free(rl);
        rc = ts_cli_error("patch", "out of memory");
        goto out;
    }
    for (int r = 0; r < sw.rows; r++) short_step_name(sw.names[r], short_rows[r], sizeof short_rows[r]), sl[r] = short_rows[r];
    const char *path = o->output ? o->output : "patch.png";
    char title[200], sub[300];
    snprintf(title, sizeof title, "activation patching: logit(%s) \xe2\x88\x92 logit(%s) restored", a_label, w_label);
    snprintf(sub, sizeof sub, "one step at one position from the clean run; 1: all of it (clean %.2f, "
                              "corrupted %.2f) \xc2\xb7 * where the texts differ", sw.clean_diff, sw.corrupt_diff);
    sweep_figure f = {.path = path, .title = title, .subtitle = sub, .row_axis = "patched step",
                      .col_axis = "position (corrupted text)", .values = sw.restored, .rows = sw.rows, .cols = S,
                      .row_labels = sl, .col_labels = cl, .unit = true, .bar_label = "fraction restored",
                      .look = &o->look};
    if ((st = sweep_cli_figure(&f))) rc = ts_cli_error("patch", "%s", ts_last_error());
    else printf("wrote %s\n", path);
    free(short_rows), free(sl);
    free(labels), free(cl), free(rl);
out:
    ts_patch_sweep_free(&sw);
    ts_model_free(&m);
    ts_lmtok_free(&tok);
    ts_bpe_ids_free(&clean);
    ts_bpe_ids_free(&corrupt);
    return rc;
}

int ts_cmd_patch(int argc, char **argv) {
    patch_opts o = {0};
    const ts_flag flags[] = {
        {"--load", TS_FLAG_STRING, &o.load, "W.safetensors", "a language model's checkpoint (tscope train --task lm)",
         NULL, NULL, NULL},
        {"--clean", TS_FLAG_STRING, &o.clean, "T1", "the text whose answer is right", NULL, NULL, NULL},
        {"--corrupt", TS_FLAG_STRING, &o.corrupt, "T2", "the same number of tokens, changed where it matters", NULL,
         NULL, NULL},
        {"--answer", TS_FLAG_STRING, &o.answer, "X", "the token the clean text should be followed by", NULL, NULL,
         NULL},
        {"--wrong", TS_FLAG_STRING, &o.wrong, "Y", "the token to compare it with (the corrupted text's own guess)",
         NULL, NULL, NULL},
        {"--site", TS_FLAG_CHOICE, &o.site, "WHERE",
         "what is patched: resid (embed.out and each layer's out), attn (each attention's out), ffn (each FFN's "
         "out), heads (each head's slice of values) (resid)", "resid|attn|ffn|heads", NULL, NULL},
        {"--output", TS_FLAG_STRING, &o.output, "FILE",
         "the heatmap, also -o: .png, .svg or .pdf (patch.png, unless --npz or --json is given)", NULL, NULL, NULL},
        {"--npz", TS_FLAG_STRING, &o.npz, "FILE",
         "also the numbers at full precision: restored (rows, positions), clean_diff, corrupt_diff", NULL, NULL,
         NULL},
        {"--json", TS_FLAG_STRING, &o.json, "FILE", "the same as JSON, with the rows' steps and positions' tokens",
         NULL, NULL, NULL},
        SWEEP_LOOK_FLAGS(o.look),
    };
    const ts_cli_spec spec = {
        .command = "patch",
        .synopsis = "--load W.safetensors --clean T1 --corrupt T2 --answer X [--wrong Y] [--site resid|attn|ffn|heads]\n"
                    "       [-o FIG.png|svg|pdf] [--npz FILE] [--json FILE] [--title T] [--caption C] [--projector]",
        .description = "Activation patching: for every layer's residual stream (embed.out, then each layer's out)\n"
                       "and every position, run the corrupted text with that one vector from the clean run, and\n"
                       "print how much of the clean logit difference (answer minus wrong, at the last position)\n"
                       "comes back. Drawn as a layers x positions heatmap (docs/experiments.md).",
        .flags = flags,
        .n_flags = (int)(sizeof flags / sizeof flags[0]),
    };
    int rc = sweep_cli_parse(&spec, argc, argv);
    if (rc >= 0) return rc;
    return run(&o);
}
