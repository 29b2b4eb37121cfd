/* lessonrun: a lesson's setup blocks turned into traces, and its steps drawn.
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
#ifndef TSCOPE_LESSONRUN_H
#define TSCOPE_LESSONRUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "tscope/lesson.h"
#include "tscope/status.h"
#include "tscope/trace.h"

/* ---- running the setups -------------------------------------------------- */

typedef struct ts_lessonrun_options {
    const char *exe;       /* the tscope binary that runs the setups */
    const char *cache_dir; /* NULL: ts_lessonrun_cache_dir() */
    bool rerun;            /* run again even when the cache holds the trace */
    FILE *log;             /* one line per run started ("lesson: running ..."); NULL: quiet */
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
void ts_lessonrun_close(ts_lessonrun *r);

/* The trace of the setup named `name` ("main" when NULL), or NULL. */
ts_trace *ts_lessonrun_trace(const ts_lessonrun *r, const char *name);

#endif
