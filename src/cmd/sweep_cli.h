/* sweep_cli: what `tscope ablate`, `tscope patch` and `tscope attribute`
 * share: a language model's checkpoint read with a text, -o for the figure,
 * and the sweep's heatmap written as PNG, SVG or PDF. */
#ifndef TSCOPE_CMD_SWEEP_CLI_H
#define TSCOPE_CMD_SWEEP_CLI_H

#include "cli.h"
#include "tscope/experiment.h"
#include "tscope/render.h"
#include "tscope/tokenizer.h"

/* What a teacher sets of a sweep's figure: its title in their words (the
 * command's own title goes), a caption under it, and a slide's size. */
typedef struct sweep_look {
    const char *title, *caption;
    bool projector; /* 1920 x 1080 at most, every text 1.75 times its size */
} sweep_look;

/* The three flags of a sweep_look, for a command's flag table. */
#define SWEEP_LOOK_FLAGS(look)                                                                                        \
    {"--title", TS_FLAG_STRING, &(look).title, "TEXT", "the figure's title, in your words (the command's own)", NULL, \
     NULL, NULL},                                                                                                    \
        {"--caption", TS_FLAG_STRING, &(look).caption, "TEXT", "a caption under the figure, wrapped to its width",     \
         NULL, NULL, NULL},                                                                                          \
        {"--projector", TS_FLAG_BOOL, &(look).projector, NULL,                                                       \
         "a slide: 1920 x 1080 at most, every text 1.75 times its size", NULL, NULL, NULL}

/* An empty --title or --caption is an error (it would draw nothing), and so
 * is any of the three when the command draws no figure. */
ts_status sweep_cli_look_check(const sweep_look *look, bool figure);

/* The file name of path, without its folders: what a figure's subtitle
 * names (a slide shows no one's home directory). */
const char *sweep_cli_file_name(const char *path);

/* The model of checkpoint `load` for `text`'s tokens (ids owned by the caller). */
ts_status sweep_cli_open(const char *load, const char *text, const char *what, ts_model *m, ts_lmtok *tok,
                         ts_bpe_ids *ids);
/* The same for text, or for the token ids in ids_path (--ids, one sequence),
 * which a checkpoint without a tokenizer needs; exactly one of them. */
ts_status sweep_cli_open_input(const char *load, const char *text, const char *ids_path, const char *what, ts_model *m,
                               ts_lmtok *tok, ts_bpe_ids *ids);

/* A heatmap of values (rows, cols) with its labels, a colour scale
 * symmetric about zero (or 0..1 when unit), the value in every cell, into
 * path (its extension picks the format). */
typedef struct sweep_figure {
    const char *path, *title, *subtitle, *row_axis, *col_axis;
    const float *values;
    int rows, cols;
    const char *const *row_labels, *const *col_labels;
    bool unit; /* a fraction restored: -1..1 fixed */
    const char *bar_label; /* what a colour means, along the colour bar */
    const sweep_look *look; /* may be NULL: the command's own title, no caption */
} sweep_figure;

ts_status sweep_cli_figure(const sweep_figure *f);

/* Write a figure that draw paints at w x h points (its title for a PDF's
 * metadata), with look's caption under it, look's title for the PDF, and for
 * a projector its text 1.75 times as large and the whole as large as fits
 * 1920 x 1080. look may be NULL. */
ts_status sweep_cli_write_figure(const char *path, const char *title, const sweep_look *look, double w, double h,
                                 ts_figure_draw_fn draw, void *ctx);

/* The one token `text` is for tok, or "id:N" the token of id N; else an
 * error naming flag. */
ts_status sweep_cli_one_token(ts_lmtok *tok, const char *flag, const char *text, int *out);

/* ts_cli_parse of spec with -o read as --output (the figure's path): < 0
 * when the command runs, else its exit code. */
int sweep_cli_parse(const ts_cli_spec *spec, int argc, char **argv);

/* A sweep's numbers for --npz and --json: an array of floats or doubles
 * (rank 0: one number; rank 1 or 2: shape), or of strings (labels, rank 1;
 * JSON only). */
typedef struct sweep_array {
    const char *name;
    const float *f;
    const double *d;
    const char *const *s;
    int rank;
    int64_t shape[2];
} sweep_array;

/* --npz PATH: each number array a member (float32, as the sweep computed
 * it: float32 values round-trip exactly). */
ts_status sweep_cli_write_npz(const char *path, const sweep_array *a, int n);

/* --json PATH: {"name": number or nested lists, ...}, floats with 9
 * significant digits and doubles with 17 (each reads back to the same value). */
ts_status sweep_cli_write_json(const char *path, const sweep_array *a, int n);

/* A path ending in .png, .svg or .pdf; else the error. */
ts_status sweep_cli_check_output(const char *path);

#endif
