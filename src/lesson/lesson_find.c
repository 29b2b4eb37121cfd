/* lesson: where lessons live and how a user names one (3, attention,
 * 03-attention, lessons/03-attention.md). */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tscope/lesson.h"

/* The Makefile compiles in the source tree's lessons/ so that `tscope lesson 1`
 * works from any directory. */
#ifndef TSCOPE_LESSON_DIR
#define TSCOPE_LESSON_DIR "lessons"
#endif

const char *ts_lesson_dir(void) {
    const char *env = getenv("TSCOPE_LESSONS");
    return env && *env ? env : TSCOPE_LESSON_DIR;
}

/* "03-attention.md" -> number 3, name "attention"; false for other files. */
static bool lesson_file_name(const char *file, int *number, const char **name, size_t *name_len) {
    size_t n = strlen(file), digits = 0;
    while (isdigit((unsigned char)file[digits])) digits++;
    if (digits == 0 || digits > 4 || file[digits] != '-' || n < digits + 5) return false;
    if (strcmp(file + n - 3, ".md") != 0) return false;
    *name = file + digits + 1;
    *name_len = n - digits - 1 - 3;
    for (size_t i = 0; i < *name_len; i++) {
        char c = (*name)[i];
        if (!(islower((unsigned char)c) || isdigit((unsigned char)c) || c == '-' || c == '_')) return false;
    }
    *number = ts_lesson_number(file);
    return true;
}

int ts_lesson_number(const char *path) {
    const char *slash = strrchr(path, '/');
    const char *file = slash ? slash + 1 : path;
    int64_t n;
    const char *end = isdigit((unsigned char)file[0]) ? ts_text_int_prefix(file, 0, INT32_MAX, &n) : NULL;
    return end && *end == '-' ? (int)n : 0;
}

static int by_number(const void *a, const void *b) {
    const ts_lesson_entry *x = a, *y = b;
    if (x->number != y->number) return x->number < y->number ? -1 : 1;
    return strcmp(x->name, y->name);
}

void ts_lesson_list_free(ts_lesson_entry *entries, int n) {
    for (int i = 0; i < n; i++) {
        free(entries[i].name);
        free(entries[i].path);
    }
    free(entries);
}

static ts_status add_entry(ts_lesson_entry **entries, int *n, int *cap, const char *dir, const char *file,
                           int number, const char *name, size_t name_len) {
    if (*n == *cap) {
        int c = *cap ? *cap * 2 : 16;
        ts_lesson_entry *e = realloc(*entries, (size_t)c * sizeof *e);
        if (!e) return ts_fail(TS_ERR_NOMEM, "lesson: out of memory");
        *entries = e;
        *cap = c;
    }
    ts_lesson_entry *e = &(*entries)[*n];
    size_t plen = strlen(dir) + strlen(file) + 2;
    e->number = number;
    e->name = malloc(name_len + 1);
    e->path = malloc(plen);
    if (!e->name || !e->path) {
        free(e->name);
        free(e->path);
        return ts_fail(TS_ERR_NOMEM, "lesson: out of memory");
    }
    memcpy(e->name, name, name_len);
    e->name[name_len] = '\0';
    snprintf(e->path, plen, "%s/%s", dir, file);
    (*n)++;
    return TS_OK;
}

ts_status ts_lesson_list(const char *dir, ts_lesson_entry **entries, int *n) {
    *entries = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return ts_fail(TS_ERR_IO, "%s: cannot open the lessons directory: %s", dir, strerror(errno));
    int cap = 0;
    ts_status st = TS_OK;
    for (struct dirent *de; st == TS_OK && (de = readdir(d)) != NULL;) {
        int number;
        const char *name;
        size_t name_len;
        if (lesson_file_name(de->d_name, &number, &name, &name_len))
            st = add_entry(entries, n, &cap, dir, de->d_name, number, name, name_len);
    }
    closedir(d);
    if (st != TS_OK) {
        ts_lesson_list_free(*entries, *n);
        *entries = NULL;
        *n = 0;
        return st;
    }
    if (*n) qsort(*entries, (size_t)*n, sizeof **entries, by_number);
    return TS_OK;
}

static bool all_digits(const char *s) {
    if (!*s) return false;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s)) return false;
    return true;
}

static ts_status copy_path(char *path, size_t cap, const char *src) {
    if (strlen(src) >= cap) return ts_fail(TS_ERR_ARG, "lesson path too long: %s", src);
    strcpy(path, src);
    return TS_OK;
}

/* The entry whose number, name or file stem is `what`. */
static const ts_lesson_entry *match(const ts_lesson_entry *e, int n, const char *what) {
    bool number = all_digits(what);
    for (int i = 0; i < n; i++) {
        if (number) {
            int64_t k;
            if (ts_text_int(what, 0, INT32_MAX, &k) && e[i].number == k) return &e[i];
            continue;
        }
        if (strcmp(e[i].name, what) == 0) return &e[i];
        const char *slash = strrchr(e[i].path, '/');
        const char *file = slash ? slash + 1 : e[i].path;
        size_t len = strlen(file) - 3; /* without ".md" */
        if (strlen(what) == len && strncmp(file, what, len) == 0) return &e[i];
    }
    return NULL;
}

ts_status ts_lesson_find(const char *dir, const char *what, char *path, size_t cap) {
    size_t n = strlen(what);
    if (strchr(what, '/') || (n > 3 && strcmp(what + n - 3, ".md") == 0)) {
        struct stat sb;
        if (stat(what, &sb) != 0 || !S_ISREG(sb.st_mode))
            return ts_fail(TS_ERR_IO, "%s: no such lesson file", what);
        return copy_path(path, cap, what);
    }
    ts_lesson_entry *entries;
    int count;
    ts_status st = ts_lesson_list(dir, &entries, &count);
    if (st != TS_OK) return st;
    const ts_lesson_entry *e = match(entries, count, what);
    if (e) st = copy_path(path, cap, e->path);
    else st = ts_fail(TS_ERR_ARG, "no lesson '%s' in %s ('tscope lesson --list' shows them)", what, dir);
    ts_lesson_list_free(entries, count);
    return st;
}

/* Whether path names an existing file. */
static bool exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* The directory part of path ("." when there is none), into dir. */
static void dir_of(const char *path, char *dir, size_t cap) {
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(dir, cap, ".");
        return;
    }
    size_t n = (size_t)(slash - path);
    if (n == 0) n = 1; /* "/x.md" lives in "/" */
    snprintf(dir, cap, "%.*s", (int)n, path);
}

/* dir + "/" + rel into out; false when it does not fit. */
static bool join(char *out, size_t cap, const char *dir, const char *rel) {
    int n = snprintf(out, cap, "%s/%s", dir, rel);
    return n >= 0 && (size_t)n < cap;
}

ts_status ts_lesson_resolve(const ts_lesson *lesson, const char *rel, char *path, size_t cap) {
    if (rel[0] == '/') return copy_path(path, cap, rel);
    char dir[4096], places[4][4096];
    int n = 0;
    snprintf(places[n++], sizeof places[0], "%s", rel); /* the working directory */
    dir_of(lesson->path ? lesson->path : ".", dir, sizeof dir);
    if (!join(places[n++], sizeof places[0], dir, rel)) return ts_fail(TS_ERR_ARG, "path too long: %s", rel);
    char above[4096];
    if (!join(above, sizeof above, dir, "..") || !join(places[n++], sizeof places[0], above, rel))
        return ts_fail(TS_ERR_ARG, "path too long: %s", rel);
    dir_of(TSCOPE_LESSON_DIR, dir, sizeof dir);
    if (!join(places[n++], sizeof places[0], dir, rel)) return ts_fail(TS_ERR_ARG, "path too long: %s", rel);
    for (int i = 0; i < n; i++)
        if (exists(places[i])) return copy_path(path, cap, places[i]);
    return ts_fail(TS_ERR_IO, "%s: not found (looked in the working directory, then for %s, %s and %s)", rel, places[1],
                   places[2], places[3]);
}

/* Whether dir holds at least one lesson file (NN-name.md). */
static bool has_lessons(const char *dir) {
    ts_lesson_entry *e;
    int n;
    if (ts_lesson_list(dir, &e, &n) != TS_OK) return false;
    ts_lesson_list_free(e, n);
    return n > 0;
}

const char *ts_lesson_user_dir(void) {
    const char *env = getenv("TSCOPE_LESSONS");
    if (env && *env) return env;
    return has_lessons("lessons") ? "lessons" : TSCOPE_LESSON_DIR;
}

ts_status ts_lesson_find_here(const char *what, char *path, size_t cap) {
    const char *env = getenv("TSCOPE_LESSONS");
    size_t n = strlen(what);
    if ((env && *env) || strchr(what, '/') || (n > 3 && strcmp(what + n - 3, ".md") == 0))
        return ts_lesson_find(ts_lesson_dir(), what, path, cap);
    const char *dirs[] = {".", "lessons", TSCOPE_LESSON_DIR};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        if (!has_lessons(dirs[i])) continue;
        if (ts_lesson_find(dirs[i], what, path, cap) == TS_OK) return TS_OK;
    }
    return ts_fail(TS_ERR_ARG, "no lesson '%s' here, in ./lessons or in %s ('tscope lesson --list' shows them)", what,
                   TSCOPE_LESSON_DIR);
}
