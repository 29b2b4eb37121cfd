/* trace_cli: the trace flags of `tscope run` (and later `train`) and the
 * glue from a model run to a trace writer: metadata (config, tokens, command
 * line), the expected size from a dry run, and the closing report.
 *
 *     trace_cli tc;
 *     n = trace_cli_table(flags, n, &tc);          // --trace --level --only --keep-batch
 *     ... parse ...
 *     if ((rc = trace_cli_check(&tc, "run", cfg.batch)) >= 0) return rc;
 *     ts_trace_writer *w = NULL;
 *     if (tc.path && trace_cli_open(&tc, &cfg, &batch, argc, argv, NULL, &w)) -> error
 *     hook = ts_trace_writer_hook(w); forward ...
 *     rc = trace_cli_close(&tc, w, "run");          // prints what it wrote
 */
#ifndef TSCOPE_CMD_TRACE_CLI_H
#define TSCOPE_CMD_TRACE_CLI_H

#include "model_flags.h"
#include "tscope/trace.h"

#define TRACE_CLI_FLAGS 4

typedef struct trace_cli {
    const char *path;  /* --trace FILE, NULL: no trace */
    const char *level; /* --level, NULL: auto */
    ts_cli_list only;  /* --only GLOB, repeatable */
    int keep_batch;    /* --keep-batch I */
    bool keep_batch_seen;
    const char *settings; /* the run's settings as JSON (trace_cli_settings), put in the metadata; or NULL */
} trace_cli;

/* Append the trace flags' rows to table (room for TRACE_CLI_FLAGS more) at n;
 * returns the new count. tc must outlive the parse. */
int trace_cli_table(ts_flag *table, int n, trace_cli *tc);

/* After parsing: -1 when the flags make sense for a batch of `batch`, else
 * the exit code after one line on stderr. */
int trace_cli_check(const trace_cli *tc, const char *command, int batch);

/* Open the writer for tc->path: metadata from cfg, the tokens of batch (may
 * be NULL), argv and the run's edits (ts_experiment_to_json, or NULL), the
 * size of a full trace from a dry run of cfg. */
ts_status trace_cli_open(const trace_cli *tc, const ts_model_config *cfg, const model_batch *batch, int argc,
                         char **argv, const char *edits_json, ts_trace_writer **out);

/* Close w and print "trace: FILE: N steps, X MB; <policy>". Returns 0, or 1
 * after printing the error (the run itself went well). w NULL is fine. */
int trace_cli_close(const trace_cli *tc, ts_trace_writer *w, const char *command);

/* One hook that calls a, then b (either may be empty), e.g. the shape
 * printer and the trace writer. tee must outlive the hook. */
typedef struct trace_tee {
    ts_hook a, b;
} trace_tee;
ts_hook trace_cli_tee(trace_tee *tee, ts_hook a, ts_hook b);

/* The config as a JSON object (malloc'd text). */
char *trace_cli_config_json(const ts_model_config *cfg);

/* What tensor shapes cannot tell about a run, which a wrong set-up changes
 * without an error: heads, norm placement, activation, the masks in force
 * ("causal", "src padding", ... or "no mask"), the weights' layout (NULL when
 * the file has no choice), batch and sequence. Printed by run as
 * "# settings: heads 4, norm pre, ..." (into line) and kept in the trace's
 * metadata as "settings" (the JSON returned, malloc'd), which diff compares
 * before any value. in: the input as the forward gets it (its padding masks). */
char *trace_cli_settings(const ts_model_config *c, const ts_model_input *in, const char *layout, char *line,
                         size_t size);

#endif
