/* lessonrun: a lesson's setups run by the tscope binary, traces cached.
 *
 * Why a child process and not a library call: the flags of `tscope run` and
 * `tscope train` are parsed by the commands themselves (src/cmd/), so running
 * the command is the one way a setup accepts exactly what the command line
 * does, with no second parser to drift. A run that fails or crashes takes
 * down only itself; its error line comes back with the line of the key. */
#include "tscope/lesson.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lesson_parser.h"
#include "tscope/core.h"
#include "tscope/io.h"

/* ---- command lines ----------------------------------------------------------- */

/* Keys that are switches: "true" gives the bare flag, "false" leaves it out
 * (so a named setup can turn off what the main one turns on). */
static bool is_switch(const char *key) {
    return strcmp(key, "final-norm") == 0 || strcmp(key, "backward") == 0 || strcmp(key, "train-mode") == 0 ||
           strcmp(key, "greedy") == 0 || strcmp(key, "lens") == 0;
}

/* Keys whose value is a file, looked up next to the lesson, then in the tree. */
static bool is_path(const char *key) {
    return strcmp(key, "load") == 0 || strcmp(key, "input") == 0 || strcmp(key, "target") == 0 ||
           strcmp(key, "labels") == 0 || strcmp(key, "trace") == 0;
}

typedef struct strv {
    char **v;
    int n, cap;
    bool oom;
} strv;

static void strv_push(strv *s, const char *text) {
    if (s->oom) return;
    if (s->n + 2 > s->cap) {
        int cap = s->cap ? s->cap * 2 : 32;
        char **v = realloc(s->v, sizeof *v * (size_t)cap);
        if (!v) {
            s->oom = true;
            return;
        }
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n] = strdup(text);
    if (!s->v[s->n]) {
        s->oom = true;
        return;
    }
    s->v[++s->n] = NULL;
}

void ts_lessonrun_argv_free(char **argv) {
    if (!argv) return;
    for (char **a = argv; *a; a++) free(*a);
    free(argv);
}

static ts_status add_key(strv *s, const ts_lesson *l, const char *key, const char *value) {
    char flag[80];
    snprintf(flag, sizeof flag, "--%s", key);
    if (is_switch(key)) {
        if (strcmp(value, "true") == 0) strv_push(s, flag);
        return TS_OK;
    }
    if (strcmp(key, "only") == 0 || strcmp(key, "ablate") == 0) { /* separated by spaces: one flag each */
        char *copy = strdup(value);
        if (!copy) return ts_fail(TS_ERR_NOMEM, "lesson: out of memory");
        for (char *save = NULL, *g = strtok_r(copy, " \t", &save); g; g = strtok_r(NULL, " \t", &save)) {
            strv_push(s, flag);
            strv_push(s, g);
        }
        free(copy);
        return TS_OK;
    }
    if (is_path(key)) {
        char path[4096];
        ts_status st = ts_lesson_resolve(l, value, path, sizeof path);
        if (st) { /* name the flag, so the message points at the key's line */
            char why[1024];
            snprintf(why, sizeof why, "%s", ts_last_error());
            return ts_fail(st, "%s %s", flag, why);
        }
        strv_push(s, flag);
        strv_push(s, path);
        return TS_OK;
    }
    strv_push(s, flag);
    strv_push(s, value);
    return TS_OK;
}

static bool has_key(const ts_lesson_setup *s, const char *key) {
    for (int i = 0; i < s->n_keys; i++)
        if (strcmp(s->keys[i].key, key) == 0) return true;
    return false;
}

/* Whether keys[i] is the first of its key in the setup. */
static bool first_of_its_key(const ts_lesson_setup *s, int i) {
    for (int k = 0; k < i; k++)
        if (strcmp(s->keys[k].key, s->keys[i].key) == 0) return false;
    return true;
}

/* Every value of a key that repeats (text: one sentence of the batch each),
 * from the setup whose values the run takes: its own when it gives the key,
 * else the main one's. */
static ts_status add_every(strv *s, const ts_lesson *l, int setup, const char *key) {
    const ts_lesson_setup *from = has_key(&l->setups[setup], key) ? &l->setups[setup] : &l->setups[0];
    ts_status st = TS_OK;
    for (int i = 0; i < from->n_keys && !st; i++)
        if (strcmp(from->keys[i].key, key) == 0) st = add_key(s, l, key, from->keys[i].value);
    return st;
}

ts_status ts_lessonrun_argv(const ts_lesson *l, int setup, char ***argv, int *argc) {
    *argv = NULL;
    if (argc) *argc = 0;
    if (setup < 0 || setup >= l->n_setups) return ts_fail(TS_ERR_ARG, "lesson: no setup %d", setup);
    const char *cmd = ts_lesson_setup_get(l, setup, "command");
    strv s = {0};
    strv_push(&s, cmd ? cmd : "run");
    /* The main setup's keys in its order (with this setup's values), then the
     * keys only this setup has. */
    const ts_lesson_setup *main_s = &l->setups[0], *own = &l->setups[setup];
    ts_status st = TS_OK;
    for (int pass = 0; pass < 2 && !st; pass++) {
        const ts_lesson_setup *from = pass == 0 ? main_s : own;
        if (pass == 1 && setup == 0) break;
        for (int i = 0; i < from->n_keys && !st; i++) {
            const char *key = from->keys[i].key;
            if (strcmp(key, "command") == 0 || strcmp(key, "without") == 0 || (pass == 1 && has_key(main_s, key)))
                continue;
            const char *value = ts_lesson_setup_get(l, setup, key);
            if (!value) continue; /* a setup of another command */
            if (!lp_setup_key_repeats(key)) st = add_key(&s, l, key, value);
            else if (first_of_its_key(from, i)) st = add_every(&s, l, setup, key);
        }
    }
    if (!st && s.oom) st = ts_fail(TS_ERR_NOMEM, "lesson: out of memory");
    if (st) {
        ts_lessonrun_argv_free(s.v);
        return st;
    }
    *argv = s.v;
    if (argc) *argc = s.n;
    return TS_OK;
}

/* Where "--KEY" first appears in msg as a whole flag (not the start of a
 * longer one), or -1. */
static long flag_position(const char *msg, const char *key) {
    char flag[80];
    snprintf(flag, sizeof flag, "--%s", key);
    size_t n = strlen(flag);
    for (const char *p = strstr(msg, flag); p; p = strstr(p + 1, flag)) {
        char after = p[n];
        if (!(isalnum((unsigned char)after) || after == '-' || after == '_')) return (long)(p - msg);
    }
    return -1;
}

int ts_lessonrun_error_line(const ts_lesson *l, int setup, const char *message) {
    if (setup < 0 || setup >= l->n_setups) return 0;
    /* The flag named first is the one the message is about ("--heads 3 does
     * not divide --d-model 16"); the setup's own keys before the main's. */
    const ts_lesson_setup *order[2] = {&l->setups[setup], &l->setups[0]};
    long best = -1;
    int line = l->setups[setup].line;
    for (int k = 0; k < (setup ? 2 : 1); k++)
        for (int i = 0; i < order[k]->n_keys; i++) {
            long at = flag_position(message, order[k]->keys[i].key);
            if (at >= 0 && (best < 0 || at < best)) best = at, line = order[k]->keys[i].line;
        }
    return line;
}

/* ---- the cache ------------------------------------------------------------------- */

void ts_lessonrun_cache_dir(char *buf, size_t cap) {
    const char *env = getenv("TSCOPE_CACHE"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (env && *env) snprintf(buf, cap, "%s", env);
    else if (xdg && *xdg) snprintf(buf, cap, "%s/tscope/lessons", xdg);
    else if (home && *home) snprintf(buf, cap, "%s/.cache/tscope/lessons", home);
    else snprintf(buf, cap, "/tmp/tscope-lessons-%ld", (long)getuid());
}

/* mkdir -p, its failure said as the cache's */
static ts_status make_dirs(const char *path) {
    ts_status st = ts_mkdir_p(path);
    return st ? ts_fail(st, "lesson: the cache directory: %s", ts_last_error()) : TS_OK;
}

/* 64-bit FNV-1a. */
static uint64_t fnv(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* A file's identity for the hash: size and modification time (a rebuilt
 * binary or a retrained checkpoint makes new traces). */
static uint64_t fnv_file(uint64_t h, const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0) return fnv(h, "missing", 7);
    long long id[3] = {(long long)sb.st_size, (long long)sb.st_mtim.tv_sec, (long long)sb.st_mtim.tv_nsec};
    return fnv(h, id, sizeof id);
}

static uint64_t argv_hash(const char *exe, char **argv) {
    uint64_t h = 14695981039346656037ull;
    h = fnv(h, TSCOPE_VERSION, sizeof TSCOPE_VERSION);
    h = fnv_file(h, exe);
    for (int i = 0; argv[i]; i++) {
        h = fnv(h, argv[i], strlen(argv[i]) + 1);
        /* The value after a path flag is a file whose content matters. */
        if (i > 0 && argv[i - 1][0] == '-' && is_path(argv[i - 1] + 2)) h = fnv_file(h, argv[i]);
    }
    return h;
}

/* "lessons/03-attention.md" -> "03-attention" */
static void lesson_stem(const char *path, char *buf, size_t cap) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    if (n > 3 && strcmp(base + n - 3, ".md") == 0) n -= 3;
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < cap; i++) {
        char c = base[i];
        buf[k++] = isalnum((unsigned char)c) || c == '-' || c == '_' ? c : '_';
    }
    buf[k] = '\0';
}

/* Remove traces of the same lesson and setup made by other command lines
 * (an edited setup, a rebuilt binary): the cache keeps one per setup. */
static void prune(const char *dir, const char *prefix, const char *keep) {
    DIR *d = opendir(dir);
    if (!d) return;
    size_t np = strlen(prefix);
    for (struct dirent *e; (e = readdir(d));) {
        const char *n = e->d_name;
        size_t len = strlen(n);
        if (strncmp(n, prefix, np) != 0 || strcmp(n, keep) == 0) continue;
        /* exactly PREFIX + 16 hex digits + ".tstrace" */
        if (len != np + 16 + 8 || strcmp(n + np + 16, ".tstrace") != 0) continue;
        bool hex = true;
        for (size_t i = np; i < np + 16; i++) hex &= isxdigit((unsigned char)n[i]) != 0;
        if (!hex) continue;
        char path[4096];
        if (snprintf(path, sizeof path, "%s/%s", dir, n) < (int)sizeof path) unlink(path);
    }
    closedir(d);
}

/* Another lesson's setup with the same command line made the same trace
 * (lessons 3 and 5 run seed 000 alike): link it under this setup's name
 * instead of running again. `tail` is "HASH.tstrace". */
static void share(const char *dir, const char *tail, const char *path) {
    DIR *d = opendir(dir);
    if (!d) return;
    size_t nt = strlen(tail);
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n <= nt + 1 || strcmp(e->d_name + n - nt, tail) != 0 || e->d_name[n - nt - 1] != '-') continue;
        char other[4096];
        if (snprintf(other, sizeof other, "%s/%s", dir, e->d_name) < (int)sizeof other && link(other, path) == 0) break;
    }
    closedir(d);
}

/* ---- running ------------------------------------------------------------------- */

/* The error line a failed command left in its log: the last line starting
 * "tscope " (the commands' one-line errors), else the last line. */
static void error_from_log(const char *log, char *buf, size_t cap) {
    buf[0] = '\0';
    FILE *f = fopen(log, "r");
    if (!f) return;
    char line[2048], last[2048] = "";
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (!line[0]) continue;
        if (strncmp(line, "tscope ", 7) == 0) snprintf(buf, cap, "%s", line);
        snprintf(last, sizeof last, "%s", line);
    }
    fclose(f);
    if (!buf[0]) snprintf(buf, cap, "%s", last);
}

/* Run exe with argv (argv[0] is the subcommand), output to log. Returns the
 * exit status, or -signal when it was killed, or -1000 when it could not
 * start. */
static int spawn(const char *exe, char **argv, const char *log) {
    int n = 0;
    while (argv[n]) n++;
    char **full = calloc((size_t)n + 2, sizeof *full);
    if (!full) return -1000;
    full[0] = (char *)exe;
    for (int i = 0; i < n; i++) full[i + 1] = argv[i];
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        free(full);
        return -1000;
    }
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int in = open("/dev/null", O_RDONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        if (in >= 0) dup2(in, 0);
        execv(exe, full);
        _exit(127);
    }
    free(full);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return -1000;
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return WIFSIGNALED(status) ? -WTERMSIG(status) : -1000;
}

/* One line of the command for messages: "tscope run --preset tiny ...". */
static void command_text(char **argv, char *buf, size_t cap) {
    size_t at = (size_t)snprintf(buf, cap, "tscope");
    for (int i = 0; argv[i] && at < cap; i++) {
        bool quote = strchr(argv[i], ' ') || !argv[i][0];
        at += (size_t)snprintf(buf + at, cap - at, quote ? " \"%s\"" : " %s", argv[i]);
    }
}

/* The message for a setup whose command failed (rc as spawn returns it),
 * at the line of the key its error names. */
static ts_status run_failed(const ts_lesson *l, int k, int rc, const char *shown, const char *exe, const char *log) {
    const char *name = l->setups[k].name;
    int start_errno = errno;
    char err[2048];
    error_from_log(log, err, sizeof err);
    if (rc == -1000)
        return ts_lesson_fail_at(l, l->setups[k].line, "setup '%s': could not start %s: %s", name, exe,
                                 strerror(start_errno));
    if (rc < 0)
        return ts_lesson_fail_at(l, l->setups[k].line, "setup '%s': %s was killed by signal %d (%s)", name, shown, -rc,
                                 err[0] ? err : "no output");
    if (rc == 127 && !err[0]) return ts_lesson_fail_at(l, l->setups[k].line, "setup '%s': could not run %s", name, exe);
    return ts_lesson_fail_at(l, ts_lessonrun_error_line(l, k, err), "setup '%s': %s", name,
                             err[0] ? err : "the command failed with no message");
}

static ts_status run_setup(ts_lessonrun *r, int k, const ts_lessonrun_options *o, const char *dir) {
    const ts_lesson *l = r->lesson;
    const char *name = l->setups[k].name;
    const char *recorded = ts_lesson_setup_get(l, k, "trace"); /* only its own (lesson.c's checks) */
    if (recorded) { /* a trace made beforehand (assets/): nothing to run */
        char path[4096];
        ts_status st = ts_lesson_resolve(l, recorded, path, sizeof path);
        if (st) return ts_lesson_fail_at(l, l->setups[k].line, "setup '%s': trace %s", name, ts_last_error());
        r->paths[k] = strdup(path);
        return r->paths[k] ? TS_OK : ts_fail(TS_ERR_NOMEM, "lesson: out of memory");
    }
    char **argv = NULL;
    ts_status st = ts_lessonrun_argv(l, k, &argv, NULL);
    if (st) {
        char why[1024];
        snprintf(why, sizeof why, "%s", ts_last_error());
        return ts_lesson_fail_at(l, ts_lessonrun_error_line(l, k, why), "setup '%s': %s", name, why);
    }
    char stem[256], prefix[400], file[512], path[4096], part[4096], log[4096];
    lesson_stem(l->path, stem, sizeof stem);
    snprintf(prefix, sizeof prefix, "%s-%s-", stem, name);
    snprintf(file, sizeof file, "%s%016llx.tstrace", prefix, (unsigned long long)argv_hash(o->exe, argv));
    if (snprintf(path, sizeof path, "%s/%s", dir, file) >= (int)sizeof path) {
        ts_lessonrun_argv_free(argv);
        return ts_fail(TS_ERR_ARG, "lesson: the cache directory's path is too long: %s", dir);
    }
    r->paths[k] = strdup(path);
    if (!r->paths[k]) {
        ts_lessonrun_argv_free(argv);
        return ts_fail(TS_ERR_NOMEM, "lesson: out of memory");
    }
    struct stat sb;
    if (!o->rerun && stat(path, &sb) != 0) share(dir, file + strlen(prefix), path);
    if (!o->rerun && stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
        ts_lessonrun_argv_free(argv);
        r->reused++;
        return TS_OK;
    }
    /* Run into a private name, then rename: a trace at `path` is complete. */
    if (snprintf(part, sizeof part, "%s.%ld.part.tstrace", path, (long)getpid()) >= (int)sizeof part ||
        snprintf(log, sizeof log, "%s.%ld.log", path, (long)getpid()) >= (int)sizeof log) {
        ts_lessonrun_argv_free(argv);
        return ts_fail(TS_ERR_ARG, "lesson: the cache directory's path is too long: %s", dir);
    }
    const char *cmd = argv[0];
    strv full = {0};
    for (int i = 0; argv[i]; i++) strv_push(&full, argv[i]);
    strv_push(&full, "--trace");
    strv_push(&full, part);
    if (strcmp(cmd, "train") == 0) strv_push(&full, "--quiet");
    char shown[2048];
    command_text(argv, shown, sizeof shown);
    if (o->log) {
        fprintf(o->log, "lesson: running setup '%s': %s\n", name, shown);
        fflush(o->log);
    }
    int rc = full.oom ? -1000 : spawn(o->exe, full.v, log);
    ts_lessonrun_argv_free(full.v);
    if (rc == 0 && rename(part, path) != 0)
        st = ts_fail(TS_ERR_IO, "lesson: cannot rename %s to %s: %s", part, path, strerror(errno));
    if (rc == 0 && !st) {
        unlink(log);
        prune(dir, prefix, file);
        r->ran++;
        ts_lessonrun_argv_free(argv);
        return TS_OK;
    }
    if (!st) st = run_failed(l, k, rc, shown, o->exe, log);
    unlink(log);
    unlink(part);
    ts_lessonrun_argv_free(argv);
    return st;
}

/* ---- names ------------------------------------------------------------------------- */

/* A name a step can give: a step of the trace, a glob matching one, or a
 * module (some step is named NAME.something). */
static bool trace_knows(ts_trace *t, const char *name) {
    if (strchr(name, '*') || strchr(name, '?') || strchr(name, '[')) return ts_trace_find_glob(t, name, 0) >= 0;
    if (ts_trace_find(t, name) >= 0) return true;
    char glob[400];
    snprintf(glob, sizeof glob, "%s.*", name);
    return ts_trace_find_glob(t, glob, 0) >= 0;
}

static bool known_name(void *ctx, const char *run, const char *name, char *hint, size_t cap) {
    const ts_lessonrun *r = ctx;
    ts_trace *t = ts_lessonrun_trace(r, run);
    if (!t) return false;
    if (trace_knows(t, name)) return true;
    const char *best = NULL;
    int best_d = 1 << 30;
    for (int64_t i = 0, n = ts_trace_count(t); i < n; i++) {
        const ts_trace_step *s = ts_trace_step_at(t, i);
        int d = ts_text_edit_distance(name, s->name);
        if (d < best_d) best_d = d, best = s->name;
    }
    if (best) snprintf(hint, cap, "did you mean '%s'?", best);
    return false;
}

/* ---- open and close ------------------------------------------------------------------ */

ts_lessonrun_options ts_lessonrun_options_default(const char *exe) {
    return (ts_lessonrun_options){.exe = exe, .cache_dir = NULL, .rerun = false, .log = NULL};
}

ts_trace *ts_lessonrun_trace(const ts_lessonrun *r, const char *name) {
    int k = ts_lesson_find_setup(r->lesson, name ? name : "main");
    return k >= 0 && k < r->n ? r->traces[k] : NULL;
}

static void mark_used(const ts_lesson *l, bool *used) {
    for (int i = 0; i < l->n_steps; i++) {
        const ts_lesson_step *st = &l->steps[i];
        int k = ts_lesson_find_setup(l, st->run);
        if (k >= 0) used[k] = true;
        if (st->compare_run && (k = ts_lesson_find_setup(l, st->compare_run)) >= 0) used[k] = true;
    }
}

ts_status ts_lessonrun_open(ts_lessonrun *r, const ts_lesson *l, const ts_lessonrun_options *o) {
    memset(r, 0, sizeof *r);
    r->lesson = l;
    if (!o || !o->exe) return ts_fail(TS_ERR_ARG, "lesson: no tscope binary to run the setups with");
    r->n = l->n_setups;
    r->paths = calloc((size_t)r->n + 1, sizeof *r->paths);
    r->traces = calloc((size_t)r->n + 1, sizeof *r->traces);
    bool *used = calloc((size_t)r->n + 1, sizeof *used);
    ts_status st = !r->paths || !r->traces || !used ? ts_fail(TS_ERR_NOMEM, "lesson: out of memory") : TS_OK;
    char dir[4096];
    if (o->cache_dir) snprintf(dir, sizeof dir, "%s", o->cache_dir);
    else ts_lessonrun_cache_dir(dir, sizeof dir);
    if (!st) st = make_dirs(dir);
    if (!st) mark_used(l, used);
    for (int k = 0; k < r->n && !st; k++) {
        if (!used[k]) continue;
        st = run_setup(r, k, o, dir);
        if (!st && (ts_trace_open(r->paths[k], &r->traces[k]) != TS_OK || ts_trace_verify(r->traces[k], NULL)))
            st = ts_lesson_fail_at(l, l->setups[k].line, "setup '%s': %s", l->setups[k].name, ts_last_error());
    }
    free(used);
    if (!st && !o->defer_checks) st = ts_lesson_check_names(l, known_name, r, NULL);
    if (!st && !o->defer_checks) st = ts_lesson_check_expect_forms(l, NULL); /* a malformed item first */
    if (!st && !o->defer_checks) st = ts_lessonrun_check_expects(r, NULL);
    return st;
}

ts_status ts_lessonrun_check_names(const ts_lessonrun *r, ts_lesson_sink *sink) {
    return ts_lesson_check_names(r->lesson, known_name, (void *)r, sink);
}

void ts_lessonrun_close(ts_lessonrun *r) {
    if (!r) return;
    for (int k = 0; k < r->n; k++) {
        if (r->traces) ts_trace_close(r->traces[k]);
        if (r->paths) free(r->paths[k]);
    }
    free(r->traces);
    free(r->paths);
    memset(r, 0, sizeof *r);
}
