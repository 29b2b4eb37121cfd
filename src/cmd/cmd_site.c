/* tscope site: every lesson as a static web site in DIR (viz/pages/site.c):
 * runs each lesson's setups (or reuses their cached traces) and writes its
 * pages, then the index. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "tscope/lesson.h"
#include "tscope/pages.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int ts_cmd_site(int argc, char **argv) {
    const char *cache = NULL, *only = NULL, *title = NULL, *footer = NULL;
    bool quiet = false, rerun = false;
    const ts_flag flags[] = {
        {"--lessons", TS_FLAG_STRING, &only, "LIST",
         "only these lessons, by number or name, comma-separated (\"3,4,masks\"); default every lesson", NULL, NULL,
         NULL},
        {"--cache", TS_FLAG_STRING, &cache, "DIR",
         "where the runs' traces are kept ($TSCOPE_CACHE, else $XDG_CACHE_HOME/tscope/lessons)", NULL, NULL, NULL},
        {"--rerun", TS_FLAG_BOOL, &rerun, NULL, "run the setups again even when their traces are cached", NULL, NULL,
         NULL},
        {"--title", TS_FLAG_STRING, &title, "TEXT", "the site's title: the index's heading and every page's link home",
         NULL, NULL, NULL},
        {"--footer", TS_FLAG_STRING, &footer, "TEXT", "the text at the foot of every page (plain text)", NULL, NULL, NULL},
        {"--quiet", TS_FLAG_BOOL, &quiet, NULL, "no line for each setup that runs, nor the summary", NULL, NULL, NULL},
    };
    const ts_cli_spec spec = {
        .command = "site",
        .synopsis = "DIR [--lessons LIST] [--cache DIR] [--rerun] [--title TEXT] [--footer TEXT] [--quiet]",
        .description = "Write every lesson as a static web site in DIR: DIR/index.html lists the lessons,\n"
                       "DIR/NN-name/stepKK.html is one step (narration beside its figure, an SVG with its text as\n"
                       "text). Links are relative and nothing comes from elsewhere: open DIR/index.html from disk,\n"
                       "or copy DIR to any static host. Arrow keys move through a lesson, Home and End jump.\n"
                       "DIR/live.html types into the shipped language models in the browser (tscope's C in\n"
                       "WebAssembly: `make wasm` first; $TSCOPE_WASM names another build).\n"
                       "Exit status: 0 written, 1 a lesson has an error (FILE:LINE: message), 2 bad usage.",
        .flags = flags,
        .n_flags = (int)(sizeof flags / sizeof flags[0]),
        .min_positional = 1,
        .max_positional = 1,
        .positional_meta = "DIR",
    };
    const char *pos[1];
    int n_pos = 0;
    int rc = ts_cli_parse(&spec, argc, argv, pos, &n_pos);
    if (rc >= 0) return rc;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return ts_cli_error("site", "cannot find the tscope binary (/proc/self/exe)");
    exe[n] = '\0';

    /* the lessons: every one in the lessons folder, or the ones asked for, found
     * as `tscope lesson` finds them ($TSCOPE_LESSONS, the working directory, its
     * lessons/, the installed ones) */
    const char *dir = ts_lesson_user_dir();
    char **paths = NULL;
    int n_paths = 0;
    ts_lesson_entry *e = NULL;
    int n_e = 0;
    if (only) {
        char *copy = strdup(only);
        if (!copy) return ts_cli_error("site", "out of memory");
        for (char *save = NULL, *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
            char path[4096];
            if (ts_lesson_find_here(w, path, sizeof path) != TS_OK) {
                free(copy);
                for (int i = 0; i < n_paths; i++) free(paths[i]);
                free(paths);
                return ts_cli_error("site", "--lessons: %s", ts_last_error());
            }
            char **grown = realloc(paths, (size_t)(n_paths + 1) * sizeof *grown);
            if (!grown || !(grown[n_paths] = strdup(path))) {
                free(copy);
                return ts_cli_error("site", "out of memory");
            }
            paths = grown;
            n_paths++;
        }
        free(copy);
        if (n_paths == 0) return ts_cli_error("site", "--lessons names no lesson");
    } else {
        if (ts_lesson_list(dir, &e, &n_e) != TS_OK) return ts_cli_error("site", "%s", ts_last_error());
        if (n_e == 0) {
            ts_lesson_list_free(e, n_e);
            return ts_cli_error("site", "no lessons in %s", dir);
        }
        paths = calloc((size_t)n_e, sizeof *paths);
        if (!paths) return ts_cli_error("site", "out of memory");
        for (int i = 0; i < n_e; i++) paths[n_paths++] = strdup(e[i].path);
        ts_lesson_list_free(e, n_e);
    }

    double t0 = now_s();
    ts_site *site = NULL;
    rc = 0;
    if (ts_site_open(&site, pos[0]) != TS_OK || ts_site_set_words(site, title, footer) != TS_OK) {
        fprintf(stderr, "tscope site: %s\n", ts_last_error());
        rc = 2;
    }
    int steps = 0;
    for (int i = 0; rc == 0 && i < n_paths; i++) {
        ts_lesson l;
        if (!paths[i] || ts_lesson_load(&l, paths[i]) != TS_OK) {
            fprintf(stderr, "%s\n", paths[i] ? ts_last_error() : "out of memory");
            rc = 1;
            break;
        }
        ts_lessonrun_options ro = ts_lessonrun_options_default(exe);
        ro.cache_dir = cache;
        ro.rerun = rerun;
        ro.log = quiet ? NULL : stderr;
        ts_lessonrun run;
        if (ts_lessonrun_open(&run, &l, &ro) != TS_OK || ts_site_add_lesson(site, &run) != TS_OK) {
            fprintf(stderr, "%s\n", ts_last_error());
            rc = strstr(ts_last_error(), ".md:") ? 1 : 2;
        } else {
            steps += l.n_steps;
        }
        ts_lessonrun_close(&run);
        ts_lesson_free(&l);
    }
    if (rc == 0 && ts_site_close(site) != TS_OK) {
        fprintf(stderr, "tscope site: %s\n", ts_last_error());
        rc = 2;
    } else if (rc != 0) {
        ts_site_abort(site);
    }
    if (rc == 0 && !ts_site_live_available())
        fprintf(stderr, "tscope site: no live page: %s is missing (make wasm); live.html says how to make it\n",
                ts_site_live_wasm());
    if (rc == 0 && !quiet)
        printf("tscope site: %d lessons, %d pages in %s/ (index.html) in %.1f s\n", n_paths, steps, pos[0],
               now_s() - t0);
    for (int i = 0; i < n_paths; i++) free(paths[i]);
    free(paths);
    ts_render_release_fonts(); /* a clean exit for leak checkers */
    return rc;
}
