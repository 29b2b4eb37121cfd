/* lm_cli: a language model's checkpoint (tscope train --task lm) used from
 * the command line without model flags: `tscope run --load W --text S`
 * (run_lm.c) and `tscope generate --load W` (cmd_generate.c). The config
 * and the tokenizer come from the checkpoint's metadata. */
#ifndef TSCOPE_CMD_LM_CLI_H
#define TSCOPE_CMD_LM_CLI_H

#include "experiment_cli.h"
#include "trace_cli.h"
#include "tscope/io.h"
#include "tscope/tokenizer.h"

/* Open a trace of an LM run: the config, the tokenizer and each batch
 * element's token labels (ids: B * S) in the metadata. */
ts_status lm_cli_trace_open(const trace_cli *tc, const ts_model_config *cfg, const ts_lmtok *tok, const int32_t *ids,
                            int B, int S, int argc, char **argv, const char *edits_json, ts_trace_writer **out);

/* tscope run with an LM checkpoint: --text (one), or --ids (B, S) with any
 * vocabulary (no tokenizer needed), through the model; what it predicts next
 * at each position of each sequence (a masked LM, BERT: the token it
 * predicts at each position; types_path, --token-types, its token types,
 * all 0 when NULL). --scores instead (or too): the table of
 * every head's scores (ts_lm_measure). --expect: the logits (B, S, V) against
 * a reference within tol (run_expect). flags (n rows) tell which model flags
 * were given: none may be. lo: the options the checkpoint is read with (a
 * GPT-2-named file's --layout). Returns the exit code. */
int run_lm(const char *load, const ts_load_options *lo, const ts_cli_list *text, const char *ids_path,
           const char *types_path, ts_flag *flags, int n, const trace_cli *tc, const char *print_shapes, bool backward,
           bool scores, const char *expect, float tol, const experiment_cli *xc, int argc, char **argv);

/* run's --temperature, read by run_lm (1 unless given). */
extern float run_temperature;

#endif
