/* cli: flag tables and the usage text made from them.
 *
 * Every subcommand declares its flags once, in a table whose rows hold the
 * flag, its type, where the value goes and a help line with the default. The
 * same table parses argv and prints `tscope CMD --help`, so the two never
 * disagree. Only the CLI exits; these functions return what to exit with.
 */
#ifndef TSCOPE_CLI_H
#define TSCOPE_CLI_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

typedef enum ts_flag_kind {
    TS_FLAG_BOOL,     /* bool*: present means true */
    TS_FLAG_INT,      /* int* */
    TS_FLAG_FLOAT,    /* float* */
    TS_FLAG_STRING,   /* const char**: points into argv */
    TS_FLAG_CHOICE,   /* const char**: one of `choices`, "a|b|c" */
    TS_FLAG_OPTIONAL, /* const char**: `--flag` alone sets `implicit`, `--flag=v` sets v */
    TS_FLAG_LIST,     /* ts_cli_list*: repeatable string */
} ts_flag_kind;

#define TS_CLI_LIST_MAX 16

/* Values of a repeatable flag, in order. */
typedef struct ts_cli_list {
    const char *items[TS_CLI_LIST_MAX];
    int count;
} ts_cli_list;

typedef struct ts_flag {
    const char *name;     /* "--steps" */
    ts_flag_kind kind;
    void *value;          /* where the parsed value goes (see kinds) */
    const char *meta;     /* "N", "FILE", ... for the usage line */
    const char *help;     /* one line, ending with the default where there is one */
    const char *choices;  /* TS_FLAG_CHOICE: "relu|gelu" */
    const char *implicit; /* TS_FLAG_OPTIONAL: the value of the bare flag */
    bool *seen;           /* optional: set to true when the flag is given */
} ts_flag;

typedef struct ts_cli_spec {
    const char *command;     /* "run" */
    const char *synopsis;    /* "[--preset P | model flags] [--trace FILE]" */
    const char *description; /* one or more lines, shown by --help */
    const ts_flag *flags;
    int n_flags;
    int min_positional, max_positional; /* how many bare arguments it takes */
    const char *positional_meta;        /* "TRACE" */
} ts_cli_spec;

/* A subcommand: argv[0] is the command's own name. Returns the exit code. */
typedef struct ts_command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} ts_command;

/* Parse argv[1..argc) against spec. Bare arguments go to positional[].
 * Returns -1 when the command should go on; otherwise the exit code to return
 * at once: 0 after printing --help to stdout, 2 after printing one line naming
 * the problem and the usage to stderr. */
int ts_cli_parse(const ts_cli_spec *spec, int argc, char **argv, const char **positional,
                 int *n_positional);

/* The usage text: synopsis, description and one line per flag. */
void ts_cli_usage(FILE *out, const ts_cli_spec *spec);

/* Report a bad value found after parsing ("--heads 7 does not divide 512"):
 * one line on stderr, prefixed "tscope CMD: ". Returns 2, the exit code. */
/* The same from a va_list. Control characters in the message (a file's
 * text it quotes) are escaped, so it stays one inert line. */
void ts_cli_verror(const char *command, const char *fmt, va_list ap);
int ts_cli_error(const char *command, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif
