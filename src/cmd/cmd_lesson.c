/* tscope lesson: list the lessons, check one, print one as text, export its
 * pages as PNG, or open it in the viewer's lesson mode. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>
#include <unistd.h>

#include "commands.h"
#include "core/platform.h"
#include "tscope/lesson.h"
#include "tscope/pages.h"
#include "tscope/viewer.h"

static const char *step_where(const ts_lesson_step *st, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = '\0';
    const struct {
        const char *label;
        int v;
    } nums[] = {{"layer", st->layer}, {"head", st->head}, {"batch", st->batch}};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0] && n < cap; i++)
        if (nums[i].v >= 0) n += (size_t)snprintf(buf + n, cap - n, " %s %d", nums[i].label, nums[i].v);
    if (n < cap && st->train_step != TS_LESSON_UNSET) n += (size_t)snprintf(buf + n, cap - n, " record %d", st->train_step);
    if (n < cap && strcmp(st->run, "main") != 0) n += (size_t)snprintf(buf + n, cap - n, " (run %s)", st->run);
    if (n < cap && (st->compare_with || st->compare_run || st->compare_step != TS_LESSON_UNSET))
        n += (size_t)snprintf(buf + n, cap - n, ", beside %s%s%s", st->compare_with ? st->compare_with : st->tensor,
                              st->compare_run ? " of run " : "", st->compare_run ? st->compare_run : "");
    if (n < cap && st->compare_step != TS_LESSON_UNSET) snprintf(buf + n, cap - n, " at record %d", st->compare_step);
    return buf;
}

/* Blocks from `first` on, as indented plain text. */
static void print_narration(const ts_lesson_narration *nar, int first) {
    for (int b = first; b < nar->n_blocks; b++) {
        const ts_lesson_block *blk = &nar->blocks[b];
        char *text = NULL;
        if (ts_lesson_block_text(blk, &text) != TS_OK) return;
        int indent = 2 + 2 * blk->depth + 2 * blk->quote;
        switch (blk->kind) {
        case TS_LESSON_ITEM: printf("%*s%s %s\n", indent + 2 * (blk->depth ? -1 : 0), "", blk->marker, text); break;
        case TS_LESSON_RULE: printf("%*s----\n", indent, ""); break;
        case TS_LESSON_CODE_BLOCK: {
            for (char *line = text, *nl; line; line = nl ? nl + 1 : NULL) {
                nl = strchr(line, '\n');
                printf("%*s    %.*s\n", indent, "", nl ? (int)(nl - line) : (int)strlen(line), line);
            }
            break;
        }
        case TS_LESSON_FORMULA: printf("%*s    %s\n", indent, "", text); break;
        default: printf("%*s%s\n", indent, "", text); break;
        }
        free(text);
    }
}

static bool find_title_key(const ts_lesson_step *st) {
    for (int i = 0; i < st->n_keys; i++)
        if (strcmp(st->keys[i].key, "title") == 0) return true;
    return false;
}

static void print_outline(const ts_lesson *l) {
    printf("%s\n(%s)\n\n", l->title, l->path);
    for (int r = 0; r < l->n_setups; r++) {
        const ts_lesson_setup *s = &l->setups[r];
        printf("run %s:", s->name);
        for (int i = 0; i < s->n_keys; i++) printf(" %s=%s", s->keys[i].key, s->keys[i].value);
        printf("%s\n", r ? " (the rest as main)" : "");
    }
    printf("\n");
    print_narration(&l->intro, 0);
    for (int i = 0; i < l->n_steps; i++) {
        const ts_lesson_step *st = &l->steps[i];
        char where[256];
        printf("\nstep %d/%d%s%s: %s %s%s\n", i + 1, l->n_steps, st->title[0] ? " " : "", st->title,
               ts_lesson_view_name(st->view), st->tensor, step_where(st, where, sizeof where));
        /* A heading that opens the narration is already the step's title. */
        const ts_lesson_narration *nar = &st->narration;
        bool titled = nar->n_blocks && nar->blocks[0].kind == TS_LESSON_HEADING && !find_title_key(st);
        print_narration(nar, titled ? 1 : 0);
    }
}

static int list_lessons(void) {
    ts_lesson_entry *e;
    int n;
    const char *dir = ts_lesson_user_dir();
    if (ts_lesson_list(dir, &e, &n) != TS_OK) {
        fprintf(stderr, "tscope lesson: %s\n", ts_last_error());
        return 2;
    }
    if (n == 0) {
        fprintf(stderr, "tscope lesson: no lessons (NN-name.md) in %s\n", dir);
        ts_lesson_list_free(e, n);
        return 2;
    }
    int width = 4;
    for (int i = 0; i < n; i++)
        if ((int)strlen(e[i].name) > width) width = (int)strlen(e[i].name);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        ts_lesson l;
        if (ts_lesson_load(&l, e[i].path) != TS_OK) {
            printf("%3d  %-*s  (does not parse: see below)\n", e[i].number, width, e[i].name);
            fprintf(stderr, "%s\n", ts_last_error());
            bad++;
            continue;
        }
        printf("%3d  %-*s  %2d steps  %s\n", e[i].number, width, e[i].name, l.n_steps, l.title);
        ts_lesson_free(&l);
    }
    ts_lesson_list_free(e, n);
    return bad ? 1 : 0;
}


typedef struct lesson_opts {
    const char *export_dir, *script, *screenshot, *cache, *format, *handout;
    float scale;
    int step, width, height;
    bool rerun, quiet;
} lesson_opts;

/* Every word of a --script is one the viewer knows: checked before the
 * setups run, so a typo costs nothing. */
static bool script_ok(const char *script) {
    char *copy = strdup(script);
    if (!copy) return ts_fail(TS_ERR_NOMEM, "out of memory") == TS_OK;
    bool good = true;
    for (char *save = NULL, *w = strtok_r(copy, " \t\n", &save); w && good; w = strtok_r(NULL, " \t\n", &save)) {
        ts_view_event ev;
        const char *shot;
        good = ts_view_script_word(w, &ev, &shot) == TS_OK;
    }
    free(copy);
    return good;
}

static void print_problem(void *ctx, const char *message) {
    (void)ctx;
    fprintf(stderr, "%s\n", message);
}

/* --check: every problem of a parsed lesson, each as FILE:LINE: message, in
 * one pass: the form of its expect: items, then (unless --no-run) its
 * setups' runs (cached), every step name against their traces and every
 * expect: figure and zoom: range against their values. */
static int check_lesson(const ts_lesson *l, const lesson_opts *o, bool no_run) {
    ts_lesson_sink sink = {print_problem, NULL, 0};
    ts_status st = ts_lesson_check_expect_forms(l, &sink);
    if (!st && !no_run) {
        char exe[4096];
        if (!ts_platform_self_exe(exe, sizeof exe)) return ts_cli_error("lesson", "cannot find the tscope binary's path");
        ts_lessonrun_options ro = ts_lessonrun_options_default(exe);
        ro.cache_dir = o->cache;
        ro.rerun = o->rerun;
        ro.log = o->quiet ? NULL : stderr;
        ro.defer_checks = true;
        ts_lessonrun run;
        ts_status opened = ts_lessonrun_open(&run, l, &ro);
        if (opened == TS_ERR_NOMEM) st = opened;
        else if (opened) st = ts_lesson_sink_take(&sink, opened); /* a setup that cannot run */
        else {
            st = ts_lessonrun_check_names(&run, &sink);
            bool names_ok = !st && sink.n == 0;
            if (!st) st = ts_lessonrun_check_expects(&run, &sink);
            /* every figure the narration quotes drawn on its page: pages are built from the
             * named steps, so only once every name was found */
            for (int i = 0; !st && names_ok && i < l->n_steps; i++)
                st = ts_lesson_page_check_quotes(&run, i, &sink);
        }
        ts_lessonrun_close(&run);
    }
    if (st) {
        fprintf(stderr, "%s\n", ts_last_error());
        return 1;
    }
    if (sink.n) {
        fprintf(stderr, "%s: %d problem%s\n", l->path, sink.n, sink.n == 1 ? "" : "s");
        return 1;
    }
    printf("%s: ok, %d steps, %d run%s (%s)%s\n", l->path, l->n_steps, l->n_setups, l->n_setups == 1 ? "" : "s",
           l->title, no_run ? "; --no-run: names and expect: figures not checked against a run" : "");
    return 0;
}

/* Run the setups (or reuse their traces), then export or open the window. */
static int run_lesson(const ts_lesson *l, const char *what, const lesson_opts *o) {
    char exe[4096];
    /* The binary that runs a lesson's setups: this one. */
    if (!ts_platform_self_exe(exe, sizeof exe)) return ts_cli_error("lesson", "cannot find the tscope binary's path");
    if (!o->export_dir && !ts_lesson_view_have_display())
        return ts_cli_error("lesson", "no display to open a window on; write the pages as PNG instead: "
                                      "tscope lesson %s --export DIR", what);
    if (o->step > l->n_steps) return ts_cli_error("lesson", "--step %d: the lesson has %d steps", o->step, l->n_steps);
    if (o->script && !script_ok(o->script)) return ts_cli_error("lesson", "%s", ts_last_error());
    ts_lessonrun_options ro = ts_lessonrun_options_default(exe);
    ro.cache_dir = o->cache;
    ro.rerun = o->rerun;
    ro.log = o->quiet ? NULL : stderr;
    ts_lessonrun run;
    if (ts_lessonrun_open(&run, l, &ro) != TS_OK) {
        fprintf(stderr, "%s\n", ts_last_error());
        ts_lessonrun_close(&run);
        return 1;
    }
    int rc = 0;
    if (o->handout) {
        /* one PDF: --export FILE.pdf, or DIR/NAME-handout.pdf */
        char path[4096];
        size_t len = strlen(o->export_dir);
        const char *base = strrchr(l->path, '/');
        base = base ? base + 1 : l->path;
        if (len > 4 && strcmp(o->export_dir + len - 4, ".pdf") == 0)
            snprintf(path, sizeof path, "%s", o->export_dir);
        else
            snprintf(path, sizeof path, "%s/%.*s-handout.pdf", o->export_dir, (int)(strlen(base) - 3), base);
        ts_lesson_handout paper = TS_LESSON_HANDOUT_A4;
        ts_lesson_handout_from_name(o->handout, &paper);
        if (!(len > 4 && strcmp(o->export_dir + len - 4, ".pdf") == 0)) {
            struct stat sb;
            if (stat(o->export_dir, &sb) != 0 && mkdir(o->export_dir, 0777) != 0) {
                ts_lessonrun_close(&run);
                return ts_cli_error("lesson", "cannot create %s", o->export_dir);
            }
        }
        int pages = 0;
        if (ts_lesson_handout_write(&run, path, paper, &pages) != TS_OK) {
            fprintf(stderr, "%s\n", ts_last_error());
            rc = strstr(ts_last_error(), ".md:") ? 1 : 2;
        } else {
            printf("tscope lesson: %s: hand-out (%s, %d pages) in %s\n", l->title, o->handout, pages, path);
        }
    } else if (o->export_dir) {
        int n = 0;
        ts_figure_format format = TS_FIGURE_PNG;
        ts_figure_format_from_name(o->format, &format);
        if (ts_lesson_export(&run, o->export_dir, format, o->scale, &n) != TS_OK) {
            fprintf(stderr, "%s\n", ts_last_error());
            rc = strstr(ts_last_error(), ".md:") ? 1 : 2;
        } else {
            printf("tscope lesson: %s: %d pages in %s/ (step01.%s .. step%02d.%s)\n", l->title, n, o->export_dir,
                   ts_figure_format_name(format), n, ts_figure_format_name(format));
        }
    } else {
        ts_lesson_view_options vo = {.width = o->width, .height = o->height, .script = o->script,
                                     .screenshot = o->screenshot, .first_step = o->step > 0 ? o->step - 1 : 0};
        ts_status s = ts_lesson_view_run(&run, &vo);
        if (s != TS_OK) {
            fprintf(stderr, "tscope lesson: %s\n", ts_last_error());
            rc = s == TS_ERR_NOMEM ? 1 : 2;
        }
    }
    ts_lessonrun_close(&run);
    return rc;
}

int ts_cmd_lesson(int argc, char **argv) {
    bool list = false, check = false, print = false, no_run = false;
    bool scale_seen = false, step_seen = false, width_seen = false, height_seen = false, format_seen = false;
    lesson_opts o = {.scale = 1.25f, .width = 1280, .height = 720, .format = "png"};
    const ts_flag flags[] = {
        {"--list", TS_FLAG_BOOL, &list, NULL, "list every lesson: number, name, title, steps", NULL, NULL, NULL},
        {"--check", TS_FLAG_BOOL, &check, NULL,
         "every problem of the lesson at once, each as FILE:LINE: message: keys, expect: items, and against its "
         "runs (cached) step names, expect: figures and zoom: ranges; one ok line, exit 0 when it is good",
         NULL, NULL, NULL},
        {"--no-run", TS_FLAG_BOOL, &no_run, NULL,
         "with --check: only what needs no run (keys, the form of expect: items)", NULL, NULL, NULL},
        {"--print", TS_FLAG_BOOL, &print, NULL, "print the lesson as text: each step's view and narration", NULL, NULL,
         NULL},
        {"--export", TS_FLAG_STRING, &o.export_dir, "DIR",
         "run the lesson and write one PNG per step (narration beside the view) to DIR, no display needed", NULL,
         NULL, NULL},
        {"--format", TS_FLAG_CHOICE, &o.format, "F",
         "what --export writes: png, or svg and pdf (vector pages for slides, drawn by the same code) (png)",
         "png|svg|pdf", NULL, &format_seen},
        {"--scale", TS_FLAG_FLOAT, &o.scale, "X", "pixels per point of exported PNG pages (1.25)", NULL, NULL,
         &scale_seen},
        {"--handout", TS_FLAG_CHOICE, &o.handout, "PAPER",
         "with --export and --format pdf: ONE PDF of every step, narration and view on each page, to print: a4, "
         "letter (portrait) or slides (16:9); --export names the file (X.pdf) or its folder", "a4|letter|slides",
         NULL, NULL},
        {"--step", TS_FLAG_INT, &o.step, "N", "open the window at step N (1)", NULL, NULL, &step_seen},
        {"--script", TS_FLAG_STRING, &o.script, "KEYS",
         "replay keys in the window first, e.g. \"right right shot:a.png\" (as tscope view --script)", NULL, NULL,
         NULL},
        {"--screenshot", TS_FLAG_STRING, &o.screenshot, "FILE", "write the last frame to FILE (PNG) and exit", NULL,
         NULL, NULL},
        {"--width", TS_FLAG_INT, &o.width, "W", "window width in points (1280: fits a 1366 x 768 screen)", NULL, NULL, &width_seen},
        {"--height", TS_FLAG_INT, &o.height, "H", "window height in points (720)", NULL, NULL, &height_seen},
        {"--cache", TS_FLAG_STRING, &o.cache, "DIR",
         "where the runs' traces are kept ($TSCOPE_CACHE, else $XDG_CACHE_HOME/tscope/lessons)", NULL, NULL, NULL},
        {"--rerun", TS_FLAG_BOOL, &o.rerun, NULL, "run the setups again even when their traces are cached", NULL, NULL,
         NULL},
        {"--quiet", TS_FLAG_BOOL, &o.quiet, NULL, "no line for each setup that runs", NULL, NULL, NULL},
    };
    const ts_cli_spec spec = {
        .command = "lesson",
        .synopsis = "--list | N|NAME|FILE [--export DIR [--format png|svg|pdf] | --check [--no-run] | --print |\n"
                    "       --script KEYS --screenshot FILE]",
        .description = "Lessons are Markdown files (lessons/NN-name.md, format in lessons/README.md).\n"
                       "With a lesson, runs its setups (traces are cached) and opens the viewer on its steps:\n"
                       "narration beside the view, right/left to move. --export DIR writes the same pages as PNG\n"
                       "(or SVG or PDF with --format).\n"
                       "A lesson named by number or name is looked for in the working directory, then ./lessons,\n"
                       "then the installed lessons ($TSCOPE_LESSONS instead, when set); its load: paths in the\n"
                       "working directory, beside the lesson, the folder above it, then the installed tree.\n"
                       "--check lists every problem of a lesson, each as FILE:LINE: message.\n"
                       "Exit status: 0 good, 1 the lesson has an error (FILE:LINE: message), 2 bad usage or no display.",
        .flags = flags,
        .n_flags = (int)(sizeof flags / sizeof flags[0]),
        .min_positional = 0,
        .max_positional = 1,
        .positional_meta = "N|NAME|FILE",
    };
    const char *pos[1];
    int n_pos = 0;
    int rc = ts_cli_parse(&spec, argc, argv, pos, &n_pos);
    if (rc >= 0) return rc;
    /* Each mode uses some flags; any other is refused rather than ignored. */
    bool window_flags = o.script || o.screenshot || step_seen || width_seen || height_seen;
    bool run_flags = o.cache || o.rerun || o.quiet;
    if (list) {
        if (n_pos || check || print || no_run || o.export_dir || o.handout || window_flags || run_flags || scale_seen || format_seen)
            return ts_cli_error("lesson", "--list takes no lesson and no other flag");
        return list_lessons();
    }
    if (check && print) return ts_cli_error("lesson", "--check and --print are two answers: ask for one");
    if ((check || print) && (o.export_dir || window_flags || scale_seen || format_seen))
        return ts_cli_error("lesson", "--check and --print draw no page: drop --export, the window's flags "
                                      "(--script --screenshot --step --width --height), --scale and --format");
    if (print && run_flags)
        return ts_cli_error("lesson", "--print does not run the lesson: drop --cache, --rerun and --quiet");
    if (no_run && !check) return ts_cli_error("lesson", "--no-run goes with --check");
    if (no_run && run_flags)
        return ts_cli_error("lesson", "--check --no-run runs nothing: drop --cache, --rerun and --quiet");
    if (o.export_dir && window_flags)
        return ts_cli_error("lesson", "--export writes the pages without a window: drop --script, --screenshot, "
                                      "--step, --width and --height");
    if (!o.export_dir && scale_seen)
        return ts_cli_error("lesson", "--scale sets the exported pages' pixels per point: add --export DIR (the "
                                      "window follows the screen)");
    if (o.handout && (!o.export_dir || strcmp(o.format, "pdf") != 0))
        return ts_cli_error("lesson", "--handout writes one PDF: give --export FILE.pdf (or DIR) and --format pdf");
    if (!o.export_dir && format_seen)
        return ts_cli_error("lesson", "--format sets what --export writes: add --export DIR");
    if (scale_seen && strcmp(o.format, "png") != 0)
        return ts_cli_error("lesson", "--scale sets the pixels of PNG pages; %s pages are in points and scale without loss",
                            o.format);
    if (!(o.scale > 0 && o.scale <= 8)) return ts_cli_error("lesson", "--scale %g must be in (0, 8]", (double)o.scale);
    if (o.step < 0) return ts_cli_error("lesson", "--step %d: steps count from 1", o.step);
    if (o.width < 800 || o.width > 16384 || o.height < 500 || o.height > 16384)
        return ts_cli_error("lesson", "--width and --height must be 800..16384 and 500..16384 (got %d x %d)", o.width,
                            o.height);
    if (n_pos == 0) return ts_cli_error("lesson", "name a lesson (a number, a name or a file) or give --list");
    char path[4096];
    if (ts_lesson_find_here(pos[0], path, sizeof path) != TS_OK)
        return ts_cli_error("lesson", "%s", ts_last_error());
    ts_lesson l;
    if (ts_lesson_load(&l, path) != TS_OK) {
        fprintf(stderr, "%s\n", ts_last_error());
        return 1;
    }
    rc = 0;
    if (check) rc = check_lesson(&l, &o, no_run);
    else if (print) print_outline(&l);
    else rc = run_lesson(&l, pos[0], &o);
    ts_lesson_free(&l);
    return rc;
}
