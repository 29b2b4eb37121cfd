/* trace: every step of a run on disk, written fast, opened instantly, safe
 * when cut short. The byte layout is in docs/trace-format.md.
 *
 * Writing: ts_trace_writer_open gives a writer whose hook the model calls
 * after every step. The hook copies what it keeps (the model overwrites its
 * buffers as soon as the hook returns) into a buffer that a writer thread puts
 * on disk, so the model waits on memory, not on the disk. The file is written
 * as PATH.tmp and renamed to PATH by ts_trace_writer_close; a run that is
 * killed leaves PATH.tmp, which ts_trace_open reads up to its last complete
 * step.
 *
 * Reading: ts_trace_open maps the file and reads the index at its end (no
 * scan of the data), so a trace of gigabytes opens at once. Values are used
 * in place in the map; each step's values are checked against their CRC the
 * first time they are asked for.
 */
#ifndef TSCOPE_TRACE_H
#define TSCOPE_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tscope/core.h"

#define TS_TRACE_HIST_BINS 64
/* The default policy keeps every value when the values add up to this. */
#define TS_TRACE_AUTO_BUDGET ((uint64_t)256 << 20)
#define TS_TRACE_ONLY_MAX 16

/* What a step keeps, from least to most. */
typedef enum ts_trace_level {
    TS_TRACE_SHAPES, /* name, op, tag, shape */
    TS_TRACE_STATS,  /* ... and statistics with a histogram */
    TS_TRACE_VALUES, /* ... and the values */
    TS_TRACE_AUTO,   /* values when they fit the budget, else a reduced set (see below) */
} ts_trace_level;

const char *ts_trace_level_name(ts_trace_level level); /* "shapes", ..., "auto" */
/* "shapes" | "stats" | "values" | "auto" -> level; TS_ERR_ARG otherwise. */
ts_status ts_trace_level_parse(const char *text, ts_trace_level *out);

/* Statistics of one step over all its elements (whatever values are kept).
 * min, max, mean, std (population, as numpy's default) and mean_abs are over
 * the finite elements; NaN and +-Inf are only counted. The histogram splits
 * [min, max] into 64 equal bins (the last one closed; a constant tensor puts
 * everything in bin 0) and counts finite elements. */
typedef struct ts_trace_stats {
    double min, max, mean, std, mean_abs;
    uint64_t finite, nan, inf, zeros;
    uint64_t hist[TS_TRACE_HIST_BINS];
} ts_trace_stats;

/* Statistics of n contiguous floats (the same code the writer runs; public
 * for tests and tools). */
void ts_trace_stats_compute(ts_trace_stats *out, const float *x, int64_t n);

/* What to keep. ts_trace_options_default fills: auto level, no globs, every
 * batch element, expected size unknown, budget TS_TRACE_AUTO_BUDGET. */
typedef struct ts_trace_options {
    ts_trace_level level;
    /* With level values or auto: keep values only for names matching one of
     * these fnmatch(3) globs ('*' matches dots too); the others keep stats. */
    const char *only[TS_TRACE_ONLY_MAX];
    int n_only;
    /* >= 0: keep the values of element keep_batch of dim 0 only (statistics
     * still cover the whole tensor). Steps that have no batch dim (tags
     * for which ts_tag_batched is false, or dim 0 of size 1) keep all their values. */
    int keep_batch;
    /* Level auto: the bytes of values the whole run will hand to the hook if
     * everything were kept (the model's dry-run estimate), 0 when unknown.
     * Known: values for every step if it is <= budget, else the reduced set
     * from the first step. Unknown: values for every step while the running
     * total stays <= budget; from the step that would pass it, the reduced set.
     * The reduced set: statistics for every step, values for attention
     * weights, positional encodings and LayerNorm mean/std, of batch element
     * keep_batch (0 when not set). */
    uint64_t expected_bytes;
    uint64_t budget;
    /* Most memory the writer may hold for the disk (default 256 MB, taken as
     * needed: enough for the largest steps of a full-size run to wait for a
     * disk slower than the model). */
    size_t buffer_bytes;
    /* OpenMP threads for the hook's passes over a step (the hook's own
     * included); 0: as many as the kernels use. */
    int threads;
} ts_trace_options;

void ts_trace_options_default(ts_trace_options *opt);

/* ---- writing ---- */

typedef struct ts_trace_writer ts_trace_writer;

/* What a finished (or failed) writer did, for the run to report. */
typedef struct ts_trace_summary {
    int64_t steps;             /* records written */
    int64_t steps_with_values; /* of which keep values */
    uint64_t values_bytes;     /* bytes of values kept */
    int64_t steps_not_finite;  /* steps whose statistics count a NaN or an Inf */
    char first_not_finite[160]; /* the first of them: "NAME (NaN n, Inf m)" */
    uint64_t file_bytes;       /* size of the file */
    double hook_seconds;       /* time spent in the hook, all of it */
    double wait_seconds;       /* of which waiting for the disk */
    double close_seconds;      /* time close took (the last writes) */
    char policy[512];          /* what was kept and why, one sentence */
} ts_trace_summary;

/* Create PATH.tmp and write the header and metadata. metadata_json is a JSON
 * object (or NULL) built by the caller, e.g. with ts_trace_metadata_build; the
 * writer adds "tscope_version", "format_version" and "policy". opt may be
 * NULL for the defaults. The writer copies what it needs from both. */
ts_status ts_trace_writer_open(const char *path, const char *metadata_json,
                               const ts_trace_options *opt, ts_trace_writer **out);

/* The same into an open, seekable descriptor the caller owns (emptied
 * first; the writer works on a dup of it): no file name, no rename. label
 * names the trace in messages. `tscope live` writes every pass into one
 * anonymous file and reads it back (ts_trace_open_memory). */
ts_status ts_trace_writer_open_fd(int fd, const char *label, const char *metadata_json,
                                  const ts_trace_options *opt, ts_trace_writer **out);

/* The hook the model calls; valid until the writer is closed. Its
 * like_previous takes the model's word that a step is the step before times
 * a factor (ts_hook_like_fn): when t is laid out as that step was and the
 * factor is a power of two, the statistics are derived from that step's and
 * the values are stored as a (scaled) view of it; otherwise the step is
 * written as any other. */
ts_hook ts_trace_writer_hook(ts_trace_writer *w);

/* One step, as the hook does it. t may be any strided view; its elements are
 * stored in row-major order of its shape. Returns the first error the writer
 * met (disk full, ...), sticky: later calls return it again. One thread only. */
ts_status ts_trace_writer_step(ts_trace_writer *w, const char *name, ts_op op,
                               const ts_tensor *t, ts_tag tag);

/* Wait until every step handed over so far is in the file (PATH.tmp), so a
 * process killed after this loses none of them. The writer also does this on
 * its own at most a second after a step when the run is slow. */
ts_status ts_trace_writer_flush(ts_trace_writer *w);

/* Write the index and trailer, close, rename PATH.tmp to PATH, free w.
 * summary may be NULL. On failure PATH.tmp is removed and nothing appears at
 * PATH; w is freed either way. */
ts_status ts_trace_writer_close(ts_trace_writer *w, ts_trace_summary *summary);

/* Stop, remove PATH.tmp, free w. NULL is fine. */
void ts_trace_writer_abort(ts_trace_writer *w);

/* A metadata object with "config" (config_json parsed, or null), the token
 * strings ("source_tokens", "target_tokens": arrays, empty when n is 0) and
 * "command_line" (argv joined by spaces). *out is malloc'd JSON text. */
ts_status ts_trace_metadata_build(char **out, const char *config_json,
                                  const char *const *source_tokens, int n_source,
                                  const char *const *target_tokens, int n_target,
                                  int argc, char **argv);

/* The two token sequences a trace names: the source (the encoder's, or a
 * decoder-only model's) and the target (the decoder's input). */
typedef enum ts_trace_side { TS_TRACE_SOURCE, TS_TRACE_TARGET } ts_trace_side;

/* Add "source_tokens_batch" (or "target_tokens_batch"): the tokens of each of
 * B batch elements (tokens: B * n strings, element after element), for a
 * trace whose batch holds different texts (a training trace's probes, a run
 * of several sentences). *json is replaced. */
ts_status ts_trace_metadata_add_batch_tokens(char **json, ts_trace_side side, const char *const *tokens, int B,
                                             int n);

struct ts_model_config;
struct ts_lmtok;

/* A language model's metadata: its config, the label of each of the B x S
 * tokens in ids, the tokenizer (it names the logits' vocabulary axis) and
 * the command line ("tscope" then argv). *out is malloc'd JSON text. */
ts_status ts_trace_metadata_lm(char **out, const struct ts_model_config *cfg, const struct ts_lmtok *tok,
                               const int32_t *ids, int B, int S, int argc, char **argv);

/* Add (or replace) item `key` of the metadata: value_json, a JSON text (the
 * tokenizer of a language model, a training run's settings). *json is
 * replaced. */
ts_status ts_trace_metadata_add_json(char **json, const char *key, const char *value_json);

/* ---- reading ---- */

typedef struct ts_trace ts_trace;

/* One step as recorded. Strings point into the trace; valid until close. */
typedef struct ts_trace_step {
    int64_t index;
    const char *name;
    ts_op op;   /* may be >= TS_OP_COUNT in a file from a newer tscope */
    ts_tag tag; /* likewise */
    int rank;
    int64_t shape[TS_MAX_RANK]; /* shape of the traced tensor */
    int64_t numel;
    bool has_stats;
    ts_trace_stats stats; /* zeros when !has_stats */
    /* The histogram was left to the reader (the step keeps every value):
     * stats.hist is zeros; ts_trace_histogram bins the values. */
    bool hist_from_values;
    bool has_values;
    int batch_index;                   /* -1: all of dim 0 kept; else the element kept */
    int64_t values_shape[TS_MAX_RANK]; /* shape of what is kept (rank as above) */
    int64_t values_count;              /* elements kept, 0 without values */
    int64_t view_of;                   /* -1, or the step whose values these index (reshape, permute, chunk) */
    float view_factor;                 /* views: the values are the base's times this (a power of two; 1 mostly) */
    bool view_relu;                    /* views: ... then through ReLU (an activation recorded from its input) */
    uint64_t file_offset, record_bytes; /* where the record lies in the file */
} ts_trace_step;

/* Steps whose op is reshape, permute or chunk and whose elements lie in the
 * values of the step they view are stored as views (base step, offset,
 * strides), not copied: the model computes nothing for a view, so the base's
 * memory still holds them. So are steps the model declares to be the step
 * before times a power of two (an eval-mode dropout: 1; the scaled scores:
 * 1/sqrt(hd)). ts_trace_values gives them like any other step. */

/* Map and index the file. A file with no valid trailer (a killed writer) or a
 * damaged index is read by scanning its records and keeps every complete one
 * up to the first whose CRC fails; ts_trace_warning then says what happened.
 * Malformed input is an error with a message; the file is never trusted. */
ts_status ts_trace_open(const char *path, ts_trace **out);

/* The same on a copy of size bytes of memory (tests, the fuzzer). */
ts_status ts_trace_open_memory(const void *data, size_t size, ts_trace **out);

void ts_trace_close(ts_trace *t); /* NULL is fine */

int64_t ts_trace_count(const ts_trace *t);
/* NULL when i is out of range. */
const ts_trace_step *ts_trace_step_at(const ts_trace *t, int64_t i);

/* The first step named `name`, or -1. Names can repeat (training traces):
 * ts_trace_find_next gives the next step with the same name after i, or -1. */
int64_t ts_trace_find(const ts_trace *t, const char *name);
int64_t ts_trace_find_next(const ts_trace *t, int64_t i);
/* The first step at index >= from whose name matches the fnmatch glob, or -1. */
int64_t ts_trace_find_glob(const ts_trace *t, const char *glob, int64_t from);

/* The kept values of step i, in place in the map (row-major, values_shape),
 * after checking their CRC (once; later calls are free). TS_ERR_ARG when the
 * step keeps no values, TS_ERR_FORMAT when the CRC fails. */
ts_status ts_trace_values(ts_trace *t, int64_t i, const float **values);
/* Every stored step's values checked against their CRC (each once, as
 * ts_trace_values does): TS_OK when all hold; else TS_ERR_FORMAT with a
 * message naming the damaged steps (the first few, and how many), *n_bad
 * (when not NULL) their number. Every command that reads a trace's values
 * calls it first, and so do ts_scene_build and ts_trace_html_write, so a
 * damaged step is named, never drawn around. The verdict is kept: later
 * calls cost nothing. */
ts_status ts_trace_verify(ts_trace *t, int64_t *n_bad);
/* The same as a tensor view. The memory is read-only: never write through it. */
ts_status ts_trace_tensor(ts_trace *t, int64_t i, ts_tensor *out);

/* The step's 64-bin histogram: the stored one, or for a step that left it
 * to the reader (hist_from_values), its values binned as the writer bins
 * them (the same counts), once; later calls are free. */
ts_status ts_trace_histogram(ts_trace *t, int64_t i, uint64_t hist[TS_TRACE_HIST_BINS]);

/* A view step (view_of >= 0) whose values are not laid out in place in its
 * base is gathered into memory the trace owns on first use; this gives that
 * memory back (tools that walk every step call it after each). */
void ts_trace_release_values(ts_trace *t, int64_t i);

/* The metadata object as JSON text (NUL-terminated). */
const char *ts_trace_metadata(const ts_trace *t);

/* Token strings from the metadata. */
int ts_trace_token_count(const ts_trace *t, ts_trace_side side);
const char *ts_trace_token(const ts_trace *t, ts_trace_side side, int i); /* NULL out of range */

/* The tokens of each batch element on one side, when the metadata has them
 * ("source_tokens_batch", "target_tokens_batch", see
 * ts_trace_metadata_add_batch_tokens): how many element b has (0 when the
 * trace has no such lists or no element b), and token i of element b (NULL
 * out of range). */
int ts_trace_batch_token_count(const ts_trace *t, ts_trace_side side, int b);
const char *ts_trace_batch_token(const ts_trace *t, ts_trace_side side, int b, int i);

/* An edited run's edits (metadata "edits", written by tscope run --ablate
 * and --patch) that touch step `name` (NULL: all of them), in words into
 * buf: "head0 zeroed; head1 zeroed", "mean-ablated", "patched at position
 * 27". Returns how many; 0 (and "") for a step nothing edited. */
int ts_trace_step_edits(const ts_trace *t, const char *name, char *buf, size_t size);

/* True when the file was closed properly (trailer and index intact). */
bool ts_trace_complete(const ts_trace *t);
/* Why the trace was read by scanning or stopped early; "" when all is well. */
const char *ts_trace_warning(const ts_trace *t);
/* Size of the file in bytes. */
uint64_t ts_trace_file_size(const ts_trace *t);

#endif
