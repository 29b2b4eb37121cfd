/* cli: flag tables parsed, checked and printed for every command (cli.h). */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/core.h"

void ts_cli_verror(const char *command, const char *fmt, va_list ap) {
    /* a message may quote a file's text (a step's name, a token): inert on the terminal, one line */
    char msg[8192], shown[8192 + 64];
    vsnprintf(msg, sizeof msg, fmt, ap);
    fprintf(stderr, "tscope %s: %s\n", command, ts_text_inert(shown, sizeof shown, msg));
}

int ts_cli_error(const char *command, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ts_cli_verror(command, fmt, ap);
    va_end(ap);
    return 2;
}

static const char *kind_meta(const ts_flag *f) {
    if (f->meta) return f->meta;
    switch (f->kind) {
    case TS_FLAG_INT: return "N";
    case TS_FLAG_FLOAT: return "X";
    case TS_FLAG_CHOICE: return f->choices;
    default: return "S";
    }
}

void ts_cli_usage(FILE *out, const ts_cli_spec *spec) {
    fprintf(out, "usage: tscope %s %s\n", spec->command, spec->synopsis ? spec->synopsis : "");
    if (spec->description) fprintf(out, "\n%s\n", spec->description);
    if (spec->n_flags == 0) return;
    fprintf(out, "\nflags:\n");
    for (int i = 0; i < spec->n_flags; i++) {
        const ts_flag *f = &spec->flags[i];
        char left[96];
        if (f->kind == TS_FLAG_BOOL)
            snprintf(left, sizeof left, "%s", f->name);
        else if (f->kind == TS_FLAG_OPTIONAL)
            snprintf(left, sizeof left, "%s[=%s]", f->name, kind_meta(f));
        else
            snprintf(left, sizeof left, "%s %s", f->name, kind_meta(f));
        fprintf(out, "  %-28s %s\n", left, f->help ? f->help : "");
    }
    fprintf(out, "  %-28s %s\n", "-h, --help", "show this help");
}

/* A bad value is one line that points at --help: the flag was right, so the
 * whole usage would only bury the message. */
static int value_error(const ts_cli_spec *spec, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static int value_error(const ts_cli_spec *spec, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tscope %s: ", spec->command);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see 'tscope %s --help')\n", spec->command);
    va_end(ap);
    return 2;
}

/* An unknown flag: one line naming it, the nearest flag when one is close,
 * and where the list is; the whole usage would only bury the line. */
static int unknown_flag(const ts_cli_spec *spec, const char *arg, size_t len) {
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), arg);
    const char *near = NULL;
    int best = 3; /* a typo or two, not a different word */
    for (int i = 0; i < spec->n_flags; i++) {
        int d = ts_text_edit_distance(name, spec->flags[i].name);
        if (d < best && 3 * d <= (int)strlen(name)) best = d, near = spec->flags[i].name;
    }
    fprintf(stderr, "tscope %s: unknown flag %s", spec->command, name);
    if (near) fprintf(stderr, " (did you mean %s?)", near);
    fprintf(stderr, "; 'tscope %s --help' lists the flags\n", spec->command);
    return 2;
}

static const ts_flag *find_flag(const ts_cli_spec *spec, const char *name, size_t len) {
    for (int i = 0; i < spec->n_flags; i++) {
        const char *n = spec->flags[i].name;
        if (strlen(n) == len && strncmp(n, name, len) == 0) return &spec->flags[i];
    }
    return NULL;
}

/* Store `text` as the flag's value; returns -1 on success or an exit code. */
static int store_value(const ts_cli_spec *spec, const ts_flag *f, const char *text) {
    char *end = NULL;
    errno = 0;
    switch (f->kind) {
    case TS_FLAG_INT: {
        int64_t v;
        if (!ts_text_int(text, INT_MIN, INT_MAX, &v))
            return value_error(spec, "%s expects a whole number, not '%s'", f->name, text);
        *(int *)f->value = (int)v;
        break;
    }
    case TS_FLAG_FLOAT: {
        float v = strtof(text, &end);
        if (errno || end == text || *end || !isfinite(v))
            return value_error(spec, "%s expects a number, not '%s'", f->name, text);
        *(float *)f->value = v;
        break;
    }
    case TS_FLAG_CHOICE:
        if (!ts_text_in_choices(f->choices, text, strlen(text)))
            return value_error(spec, "%s expects one of %s, not '%s'", f->name, f->choices, text);
        *(const char **)f->value = text;
        break;
    case TS_FLAG_LIST: {
        ts_cli_list *list = f->value;
        if (list->count == TS_CLI_LIST_MAX)
            return value_error(spec, "%s can be given at most %d times", f->name, TS_CLI_LIST_MAX);
        list->items[list->count++] = text;
        break;
    }
    case TS_FLAG_STRING:
    case TS_FLAG_OPTIONAL:
        *(const char **)f->value = text;
        break;
    case TS_FLAG_BOOL:
        break;
    }
    if (f->seen) *f->seen = true;
    return -1;
}

/* Parse one "--name[=value]" at argv[*i]; may consume argv[*i + 1]. */
static int parse_flag(const ts_cli_spec *spec, int argc, char **argv, int *i) {
    const char *arg = argv[*i];
    const char *eq = strchr(arg, '=');
    size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
    const ts_flag *f = find_flag(spec, arg, name_len);
    if (!f) return unknown_flag(spec, arg, name_len);
    if (f->kind == TS_FLAG_BOOL) {
        if (eq) return value_error(spec, "%s takes no value", f->name);
        *(bool *)f->value = true;
        if (f->seen) *f->seen = true;
        return -1;
    }
    if (f->kind == TS_FLAG_OPTIONAL && !eq) return store_value(spec, f, f->implicit ? f->implicit : "");
    if (eq) return store_value(spec, f, eq + 1);
    if (*i + 1 >= argc) return value_error(spec, "%s needs a value (%s)", f->name, kind_meta(f));
    *i += 1;
    return store_value(spec, f, argv[*i]);
}

static bool is_help(const char *arg) { return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0; }

int ts_cli_parse(const ts_cli_spec *spec, int argc, char **argv, const char **positional,
                 int *n_positional) {
    int n_pos = 0;
    bool only_positional = false;
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (is_help(argv[i])) {
            ts_cli_usage(stdout, spec);
            return 0;
        }
        /* a flag's value is not a flag: `--text -h` runs on the text "-h" */
        const ts_flag *f = argv[i][0] == '-' && !strchr(argv[i], '=') ? find_flag(spec, argv[i], strlen(argv[i])) : NULL;
        if (f && f->kind != TS_FLAG_BOOL && f->kind != TS_FLAG_OPTIONAL) i++;
    }
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!only_positional && strcmp(arg, "--") == 0) {
            only_positional = true;
        } else if (!only_positional && arg[0] == '-' && arg[1] == '-') {
            int rc = parse_flag(spec, argc, argv, &i);
            if (rc >= 0) return rc;
        } else if (!only_positional && arg[0] == '-' && arg[1] != '\0' && find_flag(spec, arg, strlen(arg))) {
            int rc = parse_flag(spec, argc, argv, &i); /* a short flag a command declares (generate's -n) */
            if (rc >= 0) return rc;
        } else if (!only_positional && arg[0] == '-' && arg[1] != '\0') {
            return value_error(spec, "unknown flag %s (flags are spelled --name)", arg);
        } else {
            if (n_pos >= spec->max_positional)
                return value_error(spec, "unexpected argument '%s'", arg);
            positional[n_pos++] = arg;
        }
    }
    if (n_pos < spec->min_positional)
        return value_error(spec, "missing %s", spec->positional_meta ? spec->positional_meta : "argument");
    if (n_positional) *n_positional = n_pos;
    return -1;
}
