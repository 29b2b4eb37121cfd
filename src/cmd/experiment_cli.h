/* experiment_cli: run's experiment flags (--ablate, --patch, --add,
 * --mean-from, --lens), shared by a language model's run (run_lm.c), every
 * other model's (cmd_run.c) and generate (cmd_generate.c, without --lens),
 * and the lens's table. */
#ifndef TSCOPE_CMD_EXPERIMENT_CLI_H
#define TSCOPE_CMD_EXPERIMENT_CLI_H

#include "cli.h"
#include "tscope/experiment.h"
#include "tscope/tokenizer.h"

typedef struct experiment_cli {
    ts_cli_list ablate, patch, add;
    const char *mean_from;
    bool lens;
} experiment_cli;

#define EXPERIMENT_CLI_FLAGS 5

/* The flags into flags[n..] (the edits', then --lens when lens); returns the new count. */
int experiment_cli_table(ts_flag *flags, int n, experiment_cli *xc);
int experiment_cli_edit_table(ts_flag *flags, int n, experiment_cli *xc);

/* Whether any experiment flag was given. */
bool experiment_cli_given(const experiment_cli *xc);

/* The experiment the flags ask for, checked against the model of cfg. */
ts_status experiment_cli_build(const experiment_cli *xc, const ts_model_config *cfg, ts_experiment *ex);

/* What the run's edits did, one line each (stdout), after the forward. */
void experiment_cli_report(const ts_experiment *ex);

/* The lens of batch element 0 as a table: a row per layer, each position's
 * most likely next token (tok's labels, or ids without tok). */
void experiment_cli_print_lens(const ts_experiment *ex, const ts_lmtok *tok, int S, int V, bool masked);

#endif
