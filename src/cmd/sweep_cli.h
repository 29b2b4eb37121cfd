/* sweep_cli: what `tscope ablate` and `tscope patch` share: a language
 * model's checkpoint read with a text, and the sweep's heatmap written as
 * PNG, SVG or PDF. */
#ifndef TSCOPE_CMD_SWEEP_CLI_H
#define TSCOPE_CMD_SWEEP_CLI_H

#include "tscope/experiment.h"
#include "tscope/tokenizer.h"

/* The model of checkpoint `load` for `text`'s tokens (ids owned by the caller). */
ts_status sweep_cli_open(const char *load, const char *text, const char *what, ts_model *m, ts_lmtok *tok,
                         ts_bpe_ids *ids);

/* A heatmap of values (rows, cols) with its labels, a colour scale
 * symmetric about zero (or 0..1 when unit), the value in every cell, into
 * path (its extension picks the format). */
typedef struct sweep_figure {
    const char *path, *title, *subtitle, *row_axis, *col_axis;
    const float *values;
    int rows, cols;
    const char *const *row_labels, *const *col_labels;
    bool unit; /* a fraction restored: -1..1 fixed */
} sweep_figure;

ts_status sweep_cli_figure(const sweep_figure *f);

/* The one token `text` is for tok, or an error naming flag. */
ts_status sweep_cli_one_token(ts_lmtok *tok, const char *flag, const char *text, int *out);

/* argv with -o read as --output, into args (argc + 1 entries). */
void sweep_cli_short_o(int argc, char **argv, char **args);

/* A path ending in .png, .svg or .pdf; else the error. */
ts_status sweep_cli_check_output(const char *path);

#endif
