/* experiment_cli: run's experiment flags (experiment_cli.h). */
#include <stdio.h>
#include <string.h>

#include "experiment_cli.h"

int experiment_cli_table(ts_flag *flags, int n, experiment_cli *xc) {
    n = experiment_cli_edit_table(flags, n, xc);
    flags[n++] = (ts_flag){"--lens", TS_FLAG_BOOL, &xc->lens, NULL,
                           "the logit lens: each layer's stream through the final norm and the head, as "
                           "probabilities lens.layers.N in the trace and a table", NULL, NULL, NULL};
    return n;
}

int experiment_cli_edit_table(ts_flag *flags, int n, experiment_cli *xc) {
    flags[n++] = (ts_flag){"--ablate", TS_FLAG_LIST, &xc->ablate, "SPEC",
                           "knock out a step before later steps read it: a step name or glob, or ATTN.headK (that "
                           "head's slice of values); =mean for its mean over batch and positions instead of zero "
                           "(repeatable; docs/experiments.md)", NULL, NULL, NULL};
    flags[n++] = (ts_flag){"--patch", TS_FLAG_LIST, &xc->patch, "TRACE:STEP[@POS]",
                           "take STEP's values (or position POS's) from another run's trace of the same model; "
                           "STEP ATTN.headK takes that head's slice of values (repeatable)", NULL, NULL, NULL};
    flags[n++] = (ts_flag){"--add", TS_FLAG_LIST, &xc->add, "STEP[@POS]=VEC.npy",
                           "add a vector to STEP at every position (or POS): VEC of the step's last dim, or of its "
                           "whole shape (a steering vector; repeatable)", NULL, NULL, NULL};
    flags[n++] = (ts_flag){"--mean-from", TS_FLAG_STRING, &xc->mean_from, "TRACE",
                           "=mean ablations take the mean over TRACE's batch and positions (a reference set, "
                           "recorded with --level values) instead of this run's", NULL, NULL, NULL};
    return n;
}

bool experiment_cli_given(const experiment_cli *xc) {
    return xc->ablate.count || xc->patch.count || xc->add.count || xc->mean_from || xc->lens;
}

ts_status experiment_cli_build(const experiment_cli *xc, const ts_model_config *cfg, ts_experiment *ex) {
    ts_experiment_init(ex);
    ex->lens = xc->lens;
    ts_status st = TS_OK;
    for (int i = 0; !st && i < xc->ablate.count; i++) st = ts_experiment_add_ablate(ex, xc->ablate.items[i]);
    for (int i = 0; !st && i < xc->patch.count; i++) st = ts_experiment_add_patch(ex, xc->patch.items[i]);
    for (int i = 0; !st && i < xc->add.count; i++) st = ts_experiment_add_add(ex, xc->add.items[i]);
    if (!st && xc->mean_from) st = ts_experiment_mean_from(ex, xc->mean_from);
    if (!st) st = ts_experiment_check(ex, cfg);
    if (st) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ts_last_error());
        ts_experiment_free(ex);
        return ts_fail(TS_ERR_ARG, "%s", msg);
    }
    return TS_OK;
}

void experiment_cli_report(const ts_experiment *ex) {
    static const char *const verbs[] = {"zeroed", "replaced by its mean", "patched", "added to"};
    for (int i = 0; i < ex->n_edits; i++) {
        const ts_edit *e = &ex->edits[i];
        printf("# edit %s: %s, %lld step%s", e->spec, verbs[e->kind], (long long)e->applied,
               e->applied == 1 ? "" : "s");
        if (e->skipped)
            printf("; %d more matched and were left alone: parameters or inputs, which no edit reaches (e.g. %s)",
                   e->skipped, e->skipped_example);
        printf("\n");
    }
}

void experiment_cli_print_lens(const ts_experiment *ex, const ts_lmtok *tok, int S, int V, bool masked) {
    if (masked)
        printf("logit lens (each layer's stream through the masked-LM head): most likely token at each position, and "
               "its probability\n");
    else
        printf("logit lens (each layer's stream through the final norm and the head): most likely next token, and its "
               "probability\n");
    for (int l = 0; l < ex->lens_layers; l++) {
        const float *p = ts_experiment_lens_at(ex, l, V);
        if (!p) return;
        printf("layer %d:", l);
        for (int s = 0; s < S; s++) {
            const float *row = p + (int64_t)s * V;
            int best = ts_model_argmax(row, V);
            char label[64];
            if (tok) ts_lmtok_label(tok, best, label, sizeof label);
            else snprintf(label, sizeof label, "%d", best);
            printf(" %s(%.2f)", label, row[best]);
        }
        printf("\n");
    }
}
