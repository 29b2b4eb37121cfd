/* capi: tscope as a shared library for other languages (libtscope.so, `make
 * python`), the entry points python/tscope/ calls through ctypes.
 *
 * Plain C types only (ints, floats, strings, pointers and one callback), so a
 * foreign-function interface needs no struct layouts. A loaded model
 * (ts_capi_model) keeps its weights and runs again and again without being
 * read again: a pass of another batch or length re-plans the activations
 * (the weights copied, never re-read). Every call returns 0 or a ts_status;
 * ts_capi_error gives the sentence (ts_last_error).
 *
 * Steps reach the caller through one callback (ts_capi_step_fn): the model's
 * hook (include/tscope/core.h) calls it with a step's memory, as strided
 * floats, for the steps whose names match the caller's globs: first to edit
 * them (the hook's edit callback: before anything reads the step, so an edit
 * reaches every later step), then to watch them (after the edits). The model
 * makes the edited steps one by one and runs fused elsewhere.
 */
#ifndef TSCOPE_CAPI_H
#define TSCOPE_CAPI_H

#include <stdint.h>

#include "tscope/core.h"

typedef struct ts_capi_model ts_capi_model;

/* One step handed to the caller. editing: 1 when the callback may write the
 * values (before the step is read), 0 when it watches. pos0: the position of
 * the step's first row (cached decoding hands over the new positions only;
 * 0 in a full pass). A non-zero return stops the pass (the caller keeps its
 * own reason; the message says which step). */
typedef int (*ts_capi_step_fn)(void *ctx, const char *name, int op, int tag, int rank, const int64_t *shape,
                               const int64_t *stride, float *data, int editing, int pos0);

/* What a pass is asked for: the globs (fnmatch) of the steps to edit and of
 * the steps to watch, the callback, and a trace to write (NULL: none) at a
 * level ("values", "stats", "auto", "shapes"; NULL: values). */
typedef struct ts_capi_pass {
    const char *const *edit_globs;
    int n_edit;
    const char *const *watch_globs;
    int n_watch;
    ts_capi_step_fn fn;
    void *ctx;
    const char *trace_path;
    const char *trace_level;
    const char *const *specs; /* the command line's edits: "ablate=SPEC", "patch=SPEC", "add=SPEC", "mean-from=TRACE" */
    int n_specs;
} ts_capi_pass;

/* The last error's sentence on this thread. */
const char *ts_capi_error(void);

/* A model: a checkpoint (`tscope train --task lm`'s, GPT-2's, nanoGPT's: what
 * `run --load` reads without flags), or a preset's config changed by
 * config_json (the whole config as ts_model_config_to_json writes it; NULL:
 * the preset's), its weights initialised from its seed. layout: a GPT-2-named
 * file's ("hf", "nanogpt", NULL: as the file says). */
ts_status ts_capi_open(const char *path, const char *layout, ts_capi_model **out);
ts_status ts_capi_open_config(const char *config_json, ts_capi_model **out);
/* Any weights `run --load` reads: a checkpoint as ts_capi_open (no
 * settings), or a bare state_dict (nn.Transformer's and its parts') with the
 * settings its file leaves open as "key=value" (heads=4, norm=pre,
 * activation=gelu, pe=..., eps=..., pe_variant=...): one that contradicts the
 * file, or a missing one, is refused with run's sentence. */
ts_status ts_capi_open_weights(const char *path, const char *layout, const char *const *settings, int n,
                               ts_capi_model **out);
void ts_capi_close(ts_capi_model *m); /* NULL is fine */

/* A preset's config as JSON (malloc'd, free with ts_capi_free). */
ts_status ts_capi_preset_json(const char *preset, char **out);
void ts_capi_free(void *p);

/* The model's config as JSON (owned by m). */
const char *ts_capi_config(const ts_capi_model *m);
/* Whether m has a tokenizer of its vocabulary. */
int ts_capi_has_tokenizer(const ts_capi_model *m);

/* text into ids: at most cap written, the count in *n (which may exceed cap:
 * call again with room). */
ts_status ts_capi_tokenize(ts_capi_model *m, const char *text, int32_t *ids, int64_t cap, int64_t *n);
/* ids into text (malloc'd, NUL-terminated; free with ts_capi_free). */
ts_status ts_capi_decode(const ts_capi_model *m, const int32_t *ids, int64_t n, char **text);
/* A token's readable label ("␣God") into buf. */
ts_status ts_capi_token_label(const ts_capi_model *m, int32_t id, char *buf, int64_t cap);

/* Every step of a pass over (B, S) tokens, "name\top\ttag\tshape" a line
 * (malloc'd; free with ts_capi_free). */
ts_status ts_capi_steps(ts_capi_model *m, int B, int S, char **out);

/* One forward over ids (B, S) (and tgt (B, T) for an encoder-decoder, else
 * NULL; types (B, S): BERT's token types, NULL for all 0), with the pass's edits, watches and trace; logits (B, S or T, V)
 * copied into out (numel floats; NULL: not copied), *out_numel its size. */
ts_status ts_capi_forward(ts_capi_model *m, const int32_t *ids, const int32_t *types, int B, int S, const int32_t *tgt,
                          int T, const ts_capi_pass *pass, float *out, int64_t out_cap, int64_t *out_numel);

/* The same for a model over vectors (no token table): x (B, S, W) with W
 * its input width, and tgt (B, T, d_model) for an encoder-decoder (else NULL). */
ts_status ts_capi_forward_vectors(ts_capi_model *m, const float *x, int B, int S, int W, const float *tgt, int T,
                                  const ts_capi_pass *pass, float *out, int64_t out_cap, int64_t *out_numel);

/* n new tokens after the prompt ids (S), drawn at temperature (0: argmax)
 * among the top_k (0: all) with seed, through the cache of keys and values
 * (each token one position, the pass's edits and watches at every one); a
 * model that cannot cache re-reads the window. out (S + n) gets the prompt
 * and the new tokens; probs (n, V; may be NULL) the distributions drawn from. */
ts_status ts_capi_generate(ts_capi_model *m, const int32_t *ids, int S, int n, float temperature, int top_k,
                           uint64_t seed, const ts_capi_pass *pass, int32_t *out, float *probs);

/* Direct logit attribution at every position of ids (S), from one forward
 * pass (ts_experiment_dla): answer (S) the token whose logit is split at
 * each position, -1 for the model's top guess there; wrong (S, or NULL) the
 * token subtracted, -1 for none. share (S, parts) with parts = 2 + layers *
 * (heads + 2) (share_cap floats of room), logit (S) what each row adds up
 * to, answer_out and wrong_out (S) the tokens used; part_names: the parts'
 * names, one a line (malloc'd; free with ts_capi_free). */
ts_status ts_capi_attribute(ts_capi_model *m, const int32_t *ids, int S, const int32_t *answer, const int32_t *wrong,
                            float *share, int64_t share_cap, float *logit, int32_t *answer_out, int32_t *wrong_out,
                            char **part_names);

/* ---- traces ---- */

typedef struct ts_trace ts_trace;
ts_status ts_capi_trace_open(const char *path, ts_trace **out);
void ts_capi_trace_close(ts_trace *t);
int64_t ts_capi_trace_count(const ts_trace *t);
/* Step i: its name, op, tag, shape of what is kept (rank 0 and *kept 0 when
 * no values), the full shape, and the batch element kept (-1 all). */
ts_status ts_capi_trace_step(const ts_trace *t, int64_t i, const char **name, int *op, int *tag, int *rank,
                             int64_t *shape, int64_t *values_shape, int *batch_index, int *kept);
/* Step i's values, in place in the map (read-only). */
ts_status ts_capi_trace_values(ts_trace *t, int64_t i, const float **values);
const char *ts_capi_trace_metadata(const ts_trace *t);

/* The metadata a trace of m over ids (B, S) carries (its config, the tokens'
 * labels, the tokenizer), malloc'd JSON. */
ts_status ts_capi_metadata(const ts_capi_model *m, const int32_t *ids, int B, int S, char **out);

/* A trace written step by step from the caller's arrays (contiguous floats):
 * what a figure of a cache is drawn from. close: keep 1, or 0 to abort. */
typedef struct ts_trace_writer ts_trace_writer;
ts_status ts_capi_writer_open(const char *path, const char *metadata_json, ts_trace_writer **out);
ts_status ts_capi_writer_step(ts_trace_writer *w, const char *name, int op, int tag, int rank, const int64_t *shape,
                              const float *data);
ts_status ts_capi_writer_close(ts_trace_writer *w, int keep);

/* ---- figures ---- */

/* A figure of one step of the trace at trace_path, as `tscope png` draws it
 * (the scene for the step's tag: attention weights as a heatmap, ...):
 * written to out_path (.png, .svg or .pdf). head, batch, layer: -1 for the
 * defaults. highlight: "R,C" or "R0-R1,C0-C1" frames separated by ';'. */
ts_status ts_capi_figure(const char *trace_path, const char *step, int head, int batch, const char *title,
                         const char *highlight, const char *out_path);

#endif
