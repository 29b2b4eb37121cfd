/* lesson: the lessons, one Markdown file each in lessons/. Parsing a lesson
 * file into setups and steps, finding lessons, and running a lesson's setups
 * into traces. Drawing the steps is viz's job (tscope/pages.h).
 */
#ifndef TSCOPE_LESSON_H
#define TSCOPE_LESSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "tscope/core.h"
#include "tscope/trace.h"

/* lesson: guided walkthroughs written in Markdown (lessons/NN-name.md).
 *
 * A lesson file is CommonMark with fenced `tscope` blocks: one `tscope setup`
 * block that says what to run, optional named `tscope setup NAME` blocks for
 * runs to compare against, and one `tscope step` block per step naming what to
 * show. The Markdown after a step block, up to the next one, is that step's
 * narration. lessons/README.md is the format's reference.
 *
 * Parsing checks syntax only (known keys, values of the right kind, blocks in
 * the right order). Whether a step's tensor exists is known once the run has
 * produced a trace: ts_lesson_check_names() does that, and every error, now or
 * later, reads `FILE:LINE: message`.
 */

/* ---- narration: Markdown kept as written and as a flat list of blocks ---- */

/* Style bits of a run of text; a run can carry several. */
enum {
    TS_LESSON_EM = 1 << 0,      /* *emphasis* */
    TS_LESSON_STRONG = 1 << 1,  /* **strong** */
    TS_LESSON_CODE = 1 << 2,    /* `inline code` */
    TS_LESSON_MATH = 1 << 3,    /* $formula$: _x and ^x mark sub/superscripts */
    TS_LESSON_DISPLAY = 1 << 4, /* $$formula$$ (always with TS_LESSON_MATH) */
    TS_LESSON_LINK = 1 << 5,    /* [text](url): the text only is kept */
};

typedef struct ts_lesson_run {
    unsigned style; /* TS_LESSON_* bits */
    char *text;     /* UTF-8, entities decoded; soft line breaks are spaces, hard ones '\n' */
    size_t len;     /* strlen(text) */
} ts_lesson_run;

typedef enum ts_lesson_block_kind {
    TS_LESSON_PARA,    /* a paragraph */
    TS_LESSON_HEADING, /* level 1-6 */
    TS_LESSON_ITEM,    /* a list item's first paragraph; marker "•" or "3." */
    TS_LESSON_CODE_BLOCK, /* one run, style TS_LESSON_CODE, lines joined with '\n' */
    TS_LESSON_FORMULA, /* a paragraph that is one $$display formula$$ */
    TS_LESSON_RULE,    /* a thematic break (---) */
} ts_lesson_block_kind;

typedef struct ts_lesson_block {
    ts_lesson_block_kind kind;
    int level;       /* heading level; 0 for others */
    int depth;       /* list nesting: 0 outside lists, 1 in a list, 2 in a nested list... */
    int quote;       /* block quote nesting (> text) */
    char marker[16]; /* TS_LESSON_ITEM: "•" or "3." */
    ts_lesson_run *runs;
    int n_runs;
    int line;        /* where the block starts in the file (0 when unknown) */
} ts_lesson_block;

typedef struct ts_lesson_narration {
    char *source; /* the Markdown as written, blank lines trimmed at both ends ("" when none) */
    ts_lesson_block *blocks;
    int n_blocks;
} ts_lesson_narration;

/* ---- setup blocks: what to run ---- */

/* One `key: value` line as written, with its line for later messages. */
typedef struct ts_lesson_kv {
    char *key;
    char *value;
    int line;
} ts_lesson_kv;

typedef struct ts_lesson_setup {
    char *name;        /* "main" for the `tscope setup` block, else its NAME */
    int line;          /* the opening fence */
    ts_lesson_kv *keys; /* in file order; a named setup lists only what it changes */
    int n_keys;
} ts_lesson_setup;

/* ---- steps: what to show ---- */

typedef enum ts_lesson_view {
    TS_LESSON_VIEW_AUTO, /* chosen by the step's tag */
    TS_LESSON_VIEW_HEATMAP,
    TS_LESSON_VIEW_GRID,
    TS_LESSON_VIEW_OVERVIEW,
    TS_LESSON_VIEW_CURVES,
    TS_LESSON_VIEW_STATS,
    TS_LESSON_VIEW_SHAPES,
    TS_LESSON_VIEW_LENS, /* the logit lens of a run with --lens */
    TS_LESSON_VIEW_DIST, /* one position's next-token distribution */
    TS_LESSON_VIEW_ROPE, /* RoPE's turning and the score against distance */
    TS_LESSON_VIEW_COUNT
} ts_lesson_view;

typedef enum ts_lesson_mark_kind {
    TS_LESSON_MARK_ROW,      /* row a: one query token's row */
    TS_LESSON_MARK_COL,      /* col a: one key token's column */
    TS_LESSON_MARK_CELL,     /* cell a b: row a, column b */
    TS_LESSON_MARK_TOKEN,    /* token a: row a and column a */
    TS_LESSON_MARK_DIM,      /* dim a: one feature dimension */
    TS_LESSON_MARK_DIAGONAL, /* the diagonal */
    TS_LESSON_MARK_MASKED,   /* every masked cell */
    TS_LESSON_MARK_ARGMAX,   /* each row's largest cell */
    TS_LESSON_MARK_COUNT
} ts_lesson_mark_kind;

typedef struct ts_lesson_mark {
    ts_lesson_mark_kind kind;
    int a, b; /* -1 when the kind takes no number */
} ts_lesson_mark;

#define TS_LESSON_MAX_MARKS 8
#define TS_LESSON_UNSET (-2) /* a record index that was not given (-1 means the last) */
#define TS_LESSON_MAX_DIMS 16

typedef struct ts_lesson_step {
    int line;            /* the opening fence */
    char *title;         /* the `title` key, else the narration's first heading, else "" */
    char *tensor;        /* trace name, e.g. "encoder.layers.0.self_attn.weights" */
    ts_lesson_view view; /* TS_LESSON_VIEW_AUTO when not given */
    int layer, head, batch; /* -1 when not given */
    int train_step;      /* `step`: which record of a name a training trace repeats, as `tscope
                          * png --step` (0 the first, -1 the last); TS_LESSON_UNSET when not given */
    char *run;           /* the setup the tensor comes from: "main" unless `run` says */
    char *compare_with;  /* another tensor shown beside this one, or NULL */
    char *compare_run;   /* the setup the comparison comes from, or NULL (same run) */
    int compare_step;    /* the record the comparison comes from, or TS_LESSON_UNSET (same one) */
    bool shared_scale;   /* `colour-scale: shared`: both panels of a comparison on one colour scale */
    bool overlay;        /* `overlay: true`: the comparison's curves drawn into the step's own plot */
    bool live;           /* `live: true`: in the window, the setup's text can be edited and the step recomputes */
    ts_lesson_mark marks[TS_LESSON_MAX_MARKS]; /* `highlight` */
    int n_marks;
    int dims[TS_LESSON_MAX_DIMS]; /* `dims`: feature dimensions a curves view draws */
    int n_dims;
    bool zoomed;         /* `zoom`: a heatmap draws only these cells, large, with their values */
    int zoom[4];         /* first row, last row, first column, last column (last -1: to the end) */
    int axes[2];         /* `axes`: the two dims a heatmap of any tensor shows (n_axes 0 or 2) */
    int n_axes;
    int position;        /* `position`: the dist view's position (-1: the last, the default) */
    int top;             /* `top`: the dist view's number of tokens (0: its default) */
    ts_lesson_kv *keys;  /* every key as written, for messages that need a line */
    int n_keys;
    ts_lesson_narration narration;
} ts_lesson_step;

typedef struct ts_lesson {
    char *path;   /* the name used in messages: the file as given */
    char *title;  /* from the `# Title` heading */
    char *summary; /* the front matter's `summary:`, one sentence for an index; NULL when none */
    ts_lesson_narration intro; /* Markdown before the first step (setup blocks left out) */
    ts_lesson_setup *setups;   /* [0] is "main" */
    int n_setups;
    ts_lesson_step *steps;
    int n_steps;
} ts_lesson;

/* Parse `len` bytes of Markdown. `path` names the file in messages. On failure
 * the lesson is left empty (safe to free) and the message reads
 * "PATH:LINE: what is wrong". */
ts_status ts_lesson_parse(ts_lesson *lesson, const char *path, const char *text, size_t len);

/* Read and parse a lesson file. */
ts_status ts_lesson_load(ts_lesson *lesson, const char *path);

void ts_lesson_free(ts_lesson *lesson);

/* The value a setup gives `key`, falling back to the main setup's value for a
 * named one of the same command (a `command: train` setup beside a main `run`
 * takes nothing from it, and `without: KEY ...` leaves those keys out); NULL
 * when neither sets it. `run` indexes setups. */
const char *ts_lesson_setup_get(const ts_lesson *lesson, int run, const char *key);

/* Index of the setup named `name` ("main" is 0), or -1. */
int ts_lesson_find_setup(const ts_lesson *lesson, const char *name);

/* Fail with "PATH:LINE: message": for checks made after parsing, such as a
 * step name the trace does not hold. Returns TS_ERR_FORMAT. */
ts_status ts_lesson_fail_at(const ts_lesson *lesson, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* The line of a step's `key:` (for messages about its value), or the step's
 * opening fence when the key is not given. */
int ts_lesson_step_line(const ts_lesson_step *step, const char *key);

/* The value of a step's `key:` as written, or NULL when the step does not
 * give it (`caption`, `unchecked`: keys read by the pages, not the parser). */
const char *ts_lesson_step_value(const ts_lesson_step *step, const char *key);

/* The next item of an `unchecked:` value, items separated by ';', each a
 * figure and the reason the page need not draw it:
 *     unchecked: 0.024 1/41, even attention over 41 keys; 4.3 ln 73, an even guess
 * *p moves past the item; fig is its first word, why the rest (trimmed,
 * why_len 0 when there is no reason). False when no item is left. */
bool ts_lesson_unchecked_next(const char **p, const char **fig, size_t *fig_len, const char **why, size_t *why_len);

/* Whether the run named `run` recorded a step named `name`. When it did not,
 * the function may write a hint ("did you mean ...?") into hint[0..cap). */
typedef bool (*ts_lesson_name_fn)(void *ctx, const char *run, const char *name, char *hint,
                                  size_t cap);

/* Where a check that goes on after a problem puts each one (`lesson
 * --check` lists them all): fn gets "FILE:LINE: message", n counts them.
 * Checks given a NULL sink stop at the first problem and return it. */
typedef struct ts_lesson_sink {
    void (*fn)(void *ctx, const char *message);
    void *ctx;
    int n;
} ts_lesson_sink;

/* s (a failure whose message is in ts_last_error()) handed to the sink, and
 * TS_OK; s itself when sink is NULL or s is TS_OK. */
ts_status ts_lesson_sink_take(ts_lesson_sink *sink, ts_status s);

/* Ask `known` about every step's tensor and comparison; an unknown one fails
 * with the line of its key (every one goes to `sink`, may be NULL). */
ts_status ts_lesson_check_names(const ts_lesson *lesson, ts_lesson_name_fn known, void *ctx, ts_lesson_sink *sink);

/* The form of every `expect:` item, without a run: a known kind (min, max,
 * mean, std, nan, mean A-B, at I,J,..., curve ..., rows ...), `right` only
 * on a step with a comparison, and a number last. Each bad item goes to
 * `sink` (may be NULL: the first fails). */
ts_status ts_lesson_check_expect_forms(const ts_lesson *lesson, ts_lesson_sink *sink);

/* Pango markup for one narration block's runs (text escaped, <i>, <b>, <tt>,
 * <sub>, <sup>, <u>); block layout (indent, marker, heading size) is left to
 * the renderer. *out is malloc'd; the caller frees it. */
ts_status ts_lesson_block_markup(const ts_lesson_block *block, char **out);

/* The block's text with no styling ("" for a rule); *out is malloc'd. */
ts_status ts_lesson_block_text(const ts_lesson_block *block, char **out);

const char *ts_lesson_view_name(ts_lesson_view view);

/* ---- finding lessons ---- */

/* The lessons directory: $TSCOPE_LESSONS when set, else the source tree's
 * lessons/ compiled in at build time. */
const char *ts_lesson_dir(void);

/* The number a lesson's file name starts with, before a '-': "03-attention.md"
 * (or a path ending in it) -> 3; 0 when it has none or one past INT32_MAX. */
int ts_lesson_number(const char *path);

typedef struct ts_lesson_entry {
    int number;  /* 3 for 03-attention.md */
    char *name;  /* "attention" */
    char *path;  /* dir + "/03-attention.md" */
} ts_lesson_entry;

/* Every NN-name.md in `dir`, sorted by number. */
ts_status ts_lesson_list(const char *dir, ts_lesson_entry **entries, int *n);
void ts_lesson_list_free(ts_lesson_entry *entries, int n);

/* A path a setup names (`load: assets/tiny-copy.safetensors`), looked for in
 * order: the working directory, the lesson file's folder, the folder above it
 * (a copy of the repository: lessons/ beside assets/), then the source tree
 * the binary was built from (the directory above the compiled-in lessons/).
 * TS_ERR_IO names every place when none has it. */
ts_status ts_lesson_resolve(const ts_lesson *lesson, const char *rel, char *path, size_t cap);

/* Resolve what a user typed: a number ("3"), a name ("attention" or
 * "03-attention") from `dir`, or a path to a .md file. */
ts_status ts_lesson_find(const char *dir, const char *what, char *path, size_t cap);

/* The lessons a user means, from where they stand: $TSCOPE_LESSONS when set;
 * else ./lessons when the working directory has lessons there (a copy of the
 * repository, a teacher's own folder), else ts_lesson_dir(). */
const char *ts_lesson_user_dir(void);

/* ts_lesson_find from where the user stands: a path as given; else a
 * number or name in the working directory, then in ./lessons, then in the
 * installed lessons (ts_lesson_dir), the first that has it. */
ts_status ts_lesson_find_here(const char *what, char *path, size_t cap);

/* lessonrun: a lesson's setup blocks turned into traces.
 *
 * Running: each setup a step uses becomes one command line of the tscope
 * binary (`tscope run` or `tscope train`, one flag per setup key), run as a
 * child process whose trace goes to a cache directory. The flags are parsed
 * by the command itself, so a lesson accepts exactly what the command line
 * does, and a flag the command refuses is reported at the line of its key:
 *
 *     lessons/10-training.md:21: setup 'main': tscope train: unknown flag --level
 *
 * A trace is cached under a name made of the lesson, the setup and a hash of
 * the command line (and of the binary and the files it reads), so a second
 * opening reuses it; it appears there only once its run has succeeded. Once
 * the traces are open, every step's names are checked against them
 * (ts_lesson_check_names), again as FILE:LINE: message.
 *
 *     ts_lessonrun run;
 *     ts_lessonrun_options o = ts_lessonrun_options_default(exe);
 *     if (ts_lessonrun_open(&run, &lesson, &o)) -> ts_last_error()
 *     ts_lessonrun_close(&run);
 *
 * Drawing the steps of a run is viz's job: tscope/pages.h.
 */

/* ---- running the setups -------------------------------------------------- */

typedef struct ts_lessonrun_options {
    const char *exe;       /* the tscope binary that runs the setups */
    const char *cache_dir; /* NULL: ts_lessonrun_cache_dir() */
    bool rerun;            /* run again even when the cache holds the trace */
    FILE *log;             /* one line per run started ("lesson: running ..."); NULL: quiet */
    bool defer_checks;     /* open the traces only: the names and expect: checks are the caller's
                            * (`lesson --check` runs them with a sink, to list every problem) */
} ts_lessonrun_options;

ts_lessonrun_options ts_lessonrun_options_default(const char *exe);

/* $TSCOPE_CACHE, else $XDG_CACHE_HOME/tscope/lessons, else
 * $HOME/.cache/tscope/lessons, else /tmp/tscope-lessons-UID. */
void ts_lessonrun_cache_dir(char *buf, size_t cap);

/* The command line of setup `setup` (an index into lesson->setups), without
 * the trace flag: argv[0] is "run" or "train", then one flag per key of the
 * setup (the main setup's keys with the named setup's changes). Paths are
 * resolved with ts_lesson_resolve. *argv is a NULL-terminated malloc'd array
 * of malloc'd strings; free with ts_lessonrun_argv_free. */
ts_status ts_lessonrun_argv(const ts_lesson *lesson, int setup, char ***argv, int *argc);
void ts_lessonrun_argv_free(char **argv);

/* The line of the setup key that a command's error message names (its flag,
 * "--key"), looked up in the named setup first, then the main one; the
 * setup's opening fence when the message names none of its keys. */
int ts_lessonrun_error_line(const ts_lesson *lesson, int setup, const char *message);

typedef struct ts_lessonrun {
    const ts_lesson *lesson; /* not owned: must outlive the run */
    int n;                   /* lesson->n_setups */
    char **paths;            /* (n) the cached trace of each setup; NULL for setups no step uses */
    ts_trace **traces;       /* (n) open traces, NULL likewise */
    int ran, reused;         /* how many setups ran now, how many came from the cache */
} ts_lessonrun;

/* Run (or find in the cache) every setup a step uses, open the traces and
 * check every step's names against them. On failure the message reads
 * "FILE:LINE: ..." and r is left safe to close. */
ts_status ts_lessonrun_open(ts_lessonrun *r, const ts_lesson *lesson, const ts_lessonrun_options *o);

/* Every step's `expect:` figures against its run (lesson_expect.c): min, max,
 * mean, std of the step or `at I,J,...` one element, each agreeing when the
 * run's value rounds to the digits written. ts_lessonrun_open calls it; a
 * figure the run does not give is "FILE:LINE: expect 'max 0.19': the run
 * gives 0.1703 ...". */
ts_status ts_lessonrun_check_expects(const ts_lessonrun *r, ts_lesson_sink *sink);
/* Every step's names against the run's traces (ts_lesson_check_names). */
ts_status ts_lessonrun_check_names(const ts_lessonrun *r, ts_lesson_sink *sink);
void ts_lessonrun_close(ts_lessonrun *r);

/* The trace of the setup named `name` ("main" when NULL), or NULL. */
ts_trace *ts_lessonrun_trace(const ts_lessonrun *r, const char *name);

#endif
