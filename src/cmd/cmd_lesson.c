/* tscope lesson: list the lessons, check one, or print one as text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "tscope/lesson.h"

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
    const char *dir = ts_lesson_dir();
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

int ts_cmd_lesson(int argc, char **argv) {
    bool list = false, check = false;
    const ts_flag flags[] = {
        {"--list", TS_FLAG_BOOL, &list, NULL, "list every lesson: number, name, title, steps", NULL, NULL, NULL},
        {"--check", TS_FLAG_BOOL, &check, NULL, "parse and check the lesson; print one line and exit 0 when it is good",
         NULL, NULL, NULL},
    };
    const ts_cli_spec spec = {
        .command = "lesson",
        .synopsis = "--list | N|NAME|FILE [--check]",
        .description = "Lessons are Markdown files (lessons/NN-name.md, format in lessons/README.md).\n"
                       "With a lesson and no flag, prints it as text: each step's view and narration.\n"
                       "Lessons are read from $TSCOPE_LESSONS, else the source tree's lessons/.\n"
                       "Exit status: 0 good, 1 the lesson has an error (FILE:LINE: message), 2 bad usage.",
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
    if (list) {
        if (n_pos || check) return ts_cli_error("lesson", "--list takes no lesson and no --check");
        return list_lessons();
    }
    if (n_pos == 0) return ts_cli_error("lesson", "name a lesson (a number, a name or a file) or give --list");
    char path[4096];
    if (ts_lesson_find(ts_lesson_dir(), pos[0], path, sizeof path) != TS_OK)
        return ts_cli_error("lesson", "%s", ts_last_error());
    ts_lesson l;
    if (ts_lesson_load(&l, path) != TS_OK) {
        fprintf(stderr, "%s\n", ts_last_error());
        return 1;
    }
    if (check) printf("%s: ok, %d steps, %d run%s (%s)\n", path, l.n_steps, l.n_setups, l.n_setups == 1 ? "" : "s", l.title);
    else print_outline(&l);
    ts_lesson_free(&l);
    return 0;
}
