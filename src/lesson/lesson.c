/* lesson: the parser. md4c walks the Markdown; `tscope` blocks are read
 * straight from the source lines so every key keeps its line number (md4c
 * reports no positions, but its text pointers point into our buffer, which is
 * how narration and fences are placed on lines). */
#include "tscope/lesson.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <md4c.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/core.h"

/* Lessons are a few kilobytes; anything near this is not a lesson. */
#define MAX_LESSON_BYTES (16u << 20)
#define MAX_LIST_DEPTH 16

/* ---------------------------------------------------------------- strings */

static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

/* Grow the array *arr_ptr (of *n items of `size` bytes) by one zeroed item
 * and return it; NULL when out of memory. The pointer is moved with memcpy so
 * one helper serves arrays of every type without aliasing tricks. */
static void *grow(void *arr_ptr, int *n, size_t size) {
    void *arr;
    memcpy(&arr, arr_ptr, sizeof arr);
    if (*n >= INT32_MAX / 2) return NULL;
    /* Capacity is the next power of two, so growing one at a time stays linear. */
    void *p = arr;
    if (*n == 0 || (*n & (*n - 1)) == 0) {
        p = realloc(arr, (size_t)(*n ? 2 * *n : 1) * size);
        if (!p) return NULL;
        memcpy(arr_ptr, &p, sizeof p);
    }
    void *item = (char *)p + (size_t)*n * size;
    memset(item, 0, size);
    (*n)++;
    return item;
}

/* --------------------------------------------------------------- the state */

/* A top-level tscope block: its lines, and which narration the text after it
 * belongs to (-1: the introduction, k: step k). */
typedef struct span {
    int first, last;
    int narration_after;
} span;

typedef struct parser {
    ts_lesson *lesson;
    const char *text;
    size_t len;
    size_t *line_start; /* (n_lines + 1): offsets where lines begin, then len */
    int n_lines;
    ts_status st;       /* the first failure */
    int depth;          /* blocks open, the document included */
    int n_top;          /* top-level blocks seen */
    int title_state;    /* 0 before the title, 1 inside it, 2 after */
    ts_text_buf title;
    int title_last;     /* last line of the title heading */
    int skip_depth;     /* > 0: inside a tscope block, whose text md4c also reports */
    int cur;            /* narration receiving blocks: -1 intro, k step k */
    int open;           /* block receiving text in the current narration, or -1 */
    bool item_fresh;    /* the open ITEM still waits for its first paragraph */
    struct {
        bool ordered;
        unsigned next;
    } lists[MAX_LIST_DEPTH];
    int n_lists;        /* may exceed MAX_LIST_DEPTH; markers stop at the limit */
    int quote;
    int em, strong, code, math, display, link;
    /* the narration code block being read */
    bool in_code;
    char fence_char;
    bool code_top;
    long info_off;      /* offset of its info string in the text, or -1 */
    long first_off;     /* offset of its first line of text, or -1 */
    size_t code_cursor; /* the cursor when it began */
    size_t cursor;      /* end of the last text seen that lies in the document */
    span *spans;
    int n_spans;
} parser;

static ts_lesson_narration *narration(parser *p, int which) {
    return which < 0 ? &p->lesson->intro : &p->lesson->steps[which].narration;
}

static ts_status fail_line(parser *p, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static ts_status fail_line(parser *p, int line, const char *fmt, ...) {
    if (p->st != TS_OK) return p->st;
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->st = ts_fail(TS_ERR_FORMAT, "%s:%d: %s", p->lesson->path, line, msg);
    return p->st;
}

static ts_status oom(parser *p) {
    if (p->st == TS_OK) p->st = ts_fail(TS_ERR_NOMEM, "%s: out of memory while parsing", p->lesson->path);
    return p->st;
}

/* ------------------------------------------------------------------ lines */

static bool is_eol(char c) { return c == '\n' || c == '\r'; }

static ts_status index_lines(parser *p) {
    size_t n = 1;
    for (size_t i = 0; i < p->len; i++)
        if (p->text[i] == '\n' || (p->text[i] == '\r' && (i + 1 == p->len || p->text[i + 1] != '\n'))) n++;
    p->line_start = malloc((n + 1) * sizeof *p->line_start);
    if (!p->line_start) return oom(p);
    size_t k = 0;
    p->line_start[k++] = 0;
    for (size_t i = 0; i < p->len; i++)
        if (p->text[i] == '\n' || (p->text[i] == '\r' && (i + 1 == p->len || p->text[i + 1] != '\n')))
            p->line_start[k++] = i + 1;
    p->n_lines = (int)k;
    /* A final line break does not start a line of its own. */
    if (k > 1 && p->line_start[k - 1] == p->len) p->n_lines--;
    p->line_start[p->n_lines] = p->len;
    return TS_OK;
}

/* 1-based line holding byte `off`. */
static int line_of(const parser *p, size_t off) {
    int lo = 0, hi = p->n_lines - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (p->line_start[mid] <= off)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo + 1;
}

/* Line `line` (1-based) without its line break. */
static void line_text(const parser *p, int line, const char **s, size_t *n) {
    size_t beg = p->line_start[line - 1], end = p->line_start[line];
    while (end > beg && is_eol(p->text[end - 1])) end--;
    *s = p->text + beg;
    *n = end - beg;
}

/* Offset just past line `line`'s text (before its line break). */
static size_t line_end(const parser *p, int line) {
    const char *s;
    size_t n;
    line_text(p, line, &s, &n);
    return (size_t)(s - p->text) + n;
}

static void move_cursor_past(parser *p, int line) {
    size_t end = line_end(p, line);
    if (end > p->cursor) p->cursor = end;
}

static long doc_offset(const parser *p, const char *s) {
    if (s < p->text || s >= p->text + p->len) return -1;
    return (long)(s - p->text);
}

static bool blank_line(const parser *p, int line) {
    const char *s;
    size_t n;
    line_text(p, line, &s, &n);
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t') return false;
    return true;
}

/* Length of the fence run of `c` opening this line (up to 3 spaces first), 0 if none. */
static size_t fence_run(const parser *p, int line, char c, size_t *after) {
    const char *s;
    size_t n, i = 0;
    line_text(p, line, &s, &n);
    while (i < n && i < 3 && s[i] == ' ') i++;
    size_t start = i;
    while (i < n && s[i] == c) i++;
    if (after) *after = i;
    return i - start >= 3 ? i - start : 0;
}

static bool is_opening_fence(const parser *p, int line, char c) { return fence_run(p, line, c, NULL) > 0; }

/* The line closing a fence opened on `open` (CommonMark: same character, at
 * least as long, nothing after but spaces), or 0 when it runs to the end. */
static int closing_fence(const parser *p, int open, char c) {
    size_t want = fence_run(p, open, c, NULL);
    for (int line = open + 1; line <= p->n_lines; line++) {
        size_t after, run = fence_run(p, line, c, &after);
        if (run < want || run == 0) continue;
        const char *s;
        size_t n;
        line_text(p, line, &s, &n);
        while (after < n && (s[after] == ' ' || s[after] == '\t')) after++;
        if (after == n) return line;
    }
    return 0;
}

/* ------------------------------------------------------- key: value blocks */

typedef enum vkind { V_STRING, V_INT, V_FLOAT, V_CHOICE, V_BOOL, V_WORDS, V_NAME, V_RUN, V_MARKS, V_INTS } vkind;

typedef struct keydef {
    const char *key;
    vkind kind;
    const char *choices; /* V_CHOICE, V_WORDS: "a|b|c" */
    double min, max;     /* V_INT, V_FLOAT: inclusive range; V_FLOAT below min_open is exclusive */
    bool min_open;       /* min itself is not allowed */
    bool train_only;     /* only with `command: train` */
} keydef;

#define BIG 1e9

/* Setup keys are the flags of `tscope run` / `tscope train` without their
 * dashes, so a setup turns into a command line one key at a time. */
static const keydef setup_keys[] = {
    {"command", V_CHOICE, "run|train", 0, 0, false, false},
    {"preset", V_CHOICE, "tiny|seed000|seed001|seed004|copy|base", 0, 0, false, false},
    {"d-model", V_INT, NULL, 1, 65536, false, false},
    {"heads", V_INT, NULL, 1, 1024, false, false},
    {"ffn", V_INT, NULL, 1, 1 << 20, false, false},
    {"layers", V_INT, NULL, 0, 256, false, false},
    {"dec-layers", V_INT, NULL, 0, 256, false, false},
    {"vocab", V_INT, NULL, 2, 1 << 24, false, false},
    {"seq", V_INT, NULL, 1, 1 << 20, false, false},
    {"batch", V_INT, NULL, 1, 1 << 20, false, false},
    {"dropout", V_FLOAT, NULL, 0, 0.999, false, false},
    {"norm", V_CHOICE, "post|pre", 0, 0, false, false},
    {"pe", V_CHOICE, "sinusoidal|learned|none", 0, 0, false, false},
    {"activation", V_CHOICE, "relu|gelu", 0, 0, false, false},
    {"eps", V_FLOAT, NULL, 0, 1, true, false},
    {"final-norm", V_BOOL, NULL, 0, 0, false, false},
    {"seed", V_INT, NULL, 0, BIG, false, false},
    {"text", V_STRING, NULL, 0, 0, false, false},
    {"input", V_STRING, NULL, 0, 0, false, false},
    {"target", V_STRING, NULL, 0, 0, false, false},
    {"load", V_STRING, NULL, 0, 0, false, false},
    {"labels", V_STRING, NULL, 0, 0, false, false},
    {"level", V_CHOICE, "shapes|stats|values|auto", 0, 0, false, false},
    {"only", V_STRING, NULL, 0, 0, false, false},
    {"keep-batch", V_INT, NULL, 0, BIG, false, false},
    {"backward", V_BOOL, NULL, 0, 0, false, false},
    {"train-mode", V_BOOL, NULL, 0, 0, false, false},
    {"variant", V_WORDS, "no-scale|seed000-reshape|seed001-layernorm|seed004-residual", 0, 0, false, false},
    {"pe-variant", V_CHOICE, "paper|seed001-sin-only|seed001-odd-exponent", 0, 0, false, false},
    {"mask", V_CHOICE, "none|causal|padding|padding-both", 0, 0, false, false},
    {"label-smoothing", V_FLOAT, NULL, 0, 0.999, false, true},
    {"task", V_CHOICE, "copy|reverse|sort", 0, 0, false, true},
    {"steps", V_INT, NULL, 1, BIG, false, true},
    {"every", V_INT, NULL, 1, BIG, false, true},
    {"lr", V_FLOAT, NULL, 0, 10, true, true},
    {"clip", V_FLOAT, NULL, 0, BIG, false, true}, /* 0: no clipping */
    {"weight-decay", V_FLOAT, NULL, 0, 10, false, true},
};

/* Step keys are `tscope png`'s flags, plus what only a lesson needs. */
static const keydef step_keys[] = {
    {"tensor", V_NAME, NULL, 0, 0, false, false},
    {"view", V_CHOICE, "heatmap|grid|overview|curves|stats|shapes|auto", 0, 0, false, false},
    {"layer", V_INT, NULL, 0, 4096, false, false},
    {"head", V_INT, NULL, 0, 4096, false, false},
    {"batch", V_INT, NULL, 0, BIG, false, false},
    {"step", V_INT, NULL, -1, BIG, false, false},
    {"run", V_RUN, NULL, 0, 0, false, false},
    {"compare-with", V_NAME, NULL, 0, 0, false, false},
    {"compare-run", V_RUN, NULL, 0, 0, false, false},
    {"compare-step", V_INT, NULL, -1, BIG, false, false},
    {"axes", V_INTS, NULL, 0, 64, false, false},
    {"highlight", V_MARKS, NULL, 0, 0, false, false},
    {"dims", V_INTS, NULL, 0, 1 << 20, false, false},
    {"title", V_STRING, NULL, 0, 0, false, false},
};

#define N_SETUP_KEYS (int)(sizeof setup_keys / sizeof setup_keys[0])
#define N_STEP_KEYS (int)(sizeof step_keys / sizeof step_keys[0])

static const keydef *find_key(const keydef *defs, int n, const char *key) {
    for (int i = 0; i < n; i++)
        if (strcmp(defs[i].key, key) == 0) return &defs[i];
    return NULL;
}

static const char *nearest_key(const keydef *defs, int n, const char *key) {
    const char *best = NULL;
    int best_d = 3;
    for (int i = 0; i < n; i++) {
        int d = ts_text_edit_distance(defs[i].key, key);
        if (d < best_d) {
            best_d = d;
            best = defs[i].key;
        }
    }
    return best;
}

static bool in_choices(const char *choices, const char *v, size_t len) {
    for (const char *c = choices; *c;) {
        const char *bar = strchr(c, '|');
        size_t n = bar ? (size_t)(bar - c) : strlen(c);
        if (n == len && strncmp(c, v, n) == 0) return true;
        if (!bar) break;
        c = bar + 1;
    }
    return false;
}

static bool parse_long(const char *v, long *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end) return false;
    *out = x;
    return true;
}

/* A trace name: dot-separated parts of letters, digits and '_', where a part
 * may also be '*' (a glob, for views of a whole module) or '{i}'. */
static bool valid_tensor_name(const char *v) {
    size_t n = strlen(v), part = 0;
    if (n == 0 || n > 200) return false;
    for (size_t i = 0; i <= n; i++) {
        char c = v[i];
        if (c == '.' || c == '\0') {
            if (part == 0) return false;
            part = 0;
        } else if (isalnum((unsigned char)c) || c == '_' || c == '*' || c == '{' || c == '}') {
            part++;
        } else {
            return false;
        }
    }
    return true;
}

static bool valid_run_name(const char *v) {
    size_t n = strlen(v);
    if (n == 0 || n > 32 || !(islower((unsigned char)v[0]) || isdigit((unsigned char)v[0]))) return false;
    for (size_t i = 0; i < n; i++)
        if (!(islower((unsigned char)v[i]) || isdigit((unsigned char)v[i]) || v[i] == '-' || v[i] == '_'))
            return false;
    return true;
}

static const char *const mark_names[TS_LESSON_MARK_COUNT] = {
    [TS_LESSON_MARK_ROW] = "row",       [TS_LESSON_MARK_COL] = "col",
    [TS_LESSON_MARK_CELL] = "cell",     [TS_LESSON_MARK_TOKEN] = "token",
    [TS_LESSON_MARK_DIM] = "dim",       [TS_LESSON_MARK_DIAGONAL] = "diagonal",
    [TS_LESSON_MARK_MASKED] = "masked", [TS_LESSON_MARK_ARGMAX] = "argmax",
};
static const int mark_args[TS_LESSON_MARK_COUNT] = {
    [TS_LESSON_MARK_ROW] = 1, [TS_LESSON_MARK_COL] = 1, [TS_LESSON_MARK_CELL] = 2,
    [TS_LESSON_MARK_TOKEN] = 1, [TS_LESSON_MARK_DIM] = 1,
};

/* Split v on spaces into at most `cap` words (in place); cap + 1 means more. */
static int split_words(char *v, char **words, int cap) {
    int n = 0;
    char *save = NULL;
    for (char *s = strtok_r(v, " \t", &save); s; s = strtok_r(NULL, " \t", &save)) {
        if (n == cap) return cap + 1;
        words[n++] = s;
    }
    return n;
}

/* "row 3, cell 2 5, diagonal" */
static ts_status parse_marks(parser *p, int line, const char *value, ts_lesson_step *step) {
    char buf[256];
    if (strlen(value) >= sizeof buf) return fail_line(p, line, "'highlight' is too long");
    strcpy(buf, value);
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *w[4];
        int n = split_words(item, w, 3);
        if (n == 0) return fail_line(p, line, "'highlight' has an empty item (items are separated by ',')");
        int kind = -1;
        for (int k = 0; k < TS_LESSON_MARK_COUNT; k++)
            if (strcmp(w[0], mark_names[k]) == 0) kind = k;
        if (kind < 0)
            return fail_line(p, line,
                             "unknown highlight '%s' (row N, col N, cell R C, token N, dim N, diagonal, "
                             "masked, argmax)",
                             w[0]);
        if (n - 1 != mark_args[kind])
            return fail_line(p, line, "highlight '%s' takes %d number%s", w[0], mark_args[kind],
                             mark_args[kind] == 1 ? "" : "s");
        if (step->n_marks == TS_LESSON_MAX_MARKS)
            return fail_line(p, line, "at most %d highlights in a step", TS_LESSON_MAX_MARKS);
        ts_lesson_mark *m = &step->marks[step->n_marks++];
        m->kind = (ts_lesson_mark_kind)kind;
        m->a = m->b = -1;
        for (int i = 1; i < n; i++) {
            long x;
            if (!parse_long(w[i], &x) || x < 0 || x > 1 << 24)
                return fail_line(p, line, "highlight '%s' expects a whole number >= 0, not '%s'", w[0], w[i]);
            if (i == 1) m->a = (int)x;
            else m->b = (int)x;
        }
    }
    if (step->n_marks == 0) return fail_line(p, line, "'highlight' is empty");
    return TS_OK;
}

/* "0 1, 6": whole numbers >= 0 separated by spaces or commas, at most `cap`. */
static ts_status parse_ints(parser *p, int line, const char *key, const char *value, int *out, int *n_out, int cap) {
    char buf[256];
    if (strlen(value) >= sizeof buf) return fail_line(p, line, "'%s' is too long", key);
    strcpy(buf, value);
    for (char *s = buf; *s; s++)
        if (*s == ',') *s = ' ';
    char *w[TS_LESSON_MAX_DIMS + 1];
    int n = split_words(buf, w, cap);
    if (n > cap) return fail_line(p, line, "'%s' lists at most %d numbers", key, cap);
    for (int i = 0; i < n; i++) {
        long x;
        if (!parse_long(w[i], &x) || x < 0 || x > 1 << 20)
            return fail_line(p, line, "'%s' expects whole numbers >= 0, not '%s'", key, w[i]);
        out[(*n_out)++] = (int)x;
    }
    return TS_OK;
}

/* Check one value against its definition. */
static ts_status check_value(parser *p, const keydef *d, int line, const char *v) {
    switch (d->kind) {
    case V_INT: {
        long x;
        if (!parse_long(v, &x)) return fail_line(p, line, "'%s' expects a whole number, not '%s'", d->key, v);
        if (x < d->min || x > d->max)
            return fail_line(p, line, "'%s' is %ld, outside %.0f..%.0f", d->key, x, d->min, d->max);
        return TS_OK;
    }
    case V_FLOAT: {
        char *end;
        errno = 0;
        double x = strtod(v, &end);
        if (errno || end == v || *end || !isfinite(x))
            return fail_line(p, line, "'%s' expects a number, not '%s'", d->key, v);
        if (x < d->min || (d->min_open && x == d->min) || x > d->max)
            return fail_line(p, line, "'%s' is %s, outside %s%g..%g]", d->key, v, d->min_open ? "(" : "[",
                             d->min, d->max);
        return TS_OK;
    }
    case V_CHOICE:
        if (!in_choices(d->choices, v, strlen(v)))
            return fail_line(p, line, "unknown %s '%s' (one of %s)", d->key, v, d->choices);
        return TS_OK;
    case V_WORDS: {
        size_t n = strlen(v);
        for (size_t i = 0; i < n;) {
            while (i < n && v[i] == ' ') i++;
            size_t j = i;
            while (j < n && v[j] != ' ') j++;
            if (j > i && !in_choices(d->choices, v + i, j - i))
                return fail_line(p, line, "unknown %s '%.*s' (any of %s, separated by spaces)", d->key,
                                 (int)(j - i), v + i, d->choices);
            i = j;
        }
        return TS_OK;
    }
    case V_BOOL:
        if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0)
            return fail_line(p, line, "'%s' is true or false, not '%s'", d->key, v);
        return TS_OK;
    case V_NAME:
        if (!valid_tensor_name(v))
            return fail_line(p, line, "'%s' is not a trace name (like encoder.layers.0.self_attn.weights)", v);
        return TS_OK;
    case V_RUN:
        if (!valid_run_name(v))
            return fail_line(p, line, "'%s' is not a setup name (lowercase letters, digits, '-', '_')", v);
        return TS_OK;
    case V_STRING:
    case V_MARKS:
    case V_INTS:
        return TS_OK;
    }
    return TS_OK;
}

/* Undo "..." quoting (\" and \\ inside); `v` is trimmed and non-empty. */
static char *unquote(parser *p, int line, const char *v, size_t n) {
    if (n < 2 || v[0] != '"') return dup_n(v, n);
    if (v[n - 1] != '"') {
        fail_line(p, line, "a quoted value must end with '\"'");
        return NULL;
    }
    char *out = malloc(n);
    if (!out) {
        oom(p);
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 1; i + 1 < n; i++) {
        if (v[i] == '\\' && i + 2 < n && (v[i + 1] == '"' || v[i + 1] == '\\')) i++;
        else if (v[i] == '"') {
            free(out);
            fail_line(p, line, "a '\"' inside a quoted value is written \\\"");
            return NULL;
        }
        out[k++] = v[i];
    }
    out[k] = '\0';
    return out;
}

static bool key_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; }

/* Read the lines of a block [first, last] into key/value pairs, checking each
 * key against `defs`. `what` names the block in messages. */
static ts_status read_pairs(parser *p, int first, int last, const keydef *defs, int n_defs, const char *what,
                            ts_lesson_kv **kvs, int *n_kvs) {
    for (int line = first; line <= last && p->st == TS_OK; line++) {
        const char *s;
        size_t n;
        line_text(p, line, &s, &n);
        while (n && (*s == ' ' || *s == '\t')) s++, n--;
        while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
        if (n == 0 || s[0] == '#') continue;
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)s[i] < 0x20 && s[i] != '\t')
                return fail_line(p, line, "a control character in a %s block", what);
        const char *colon = memchr(s, ':', n);
        if (!colon) return fail_line(p, line, "expected 'key: value', not '%.*s'", (int)(n > 40 ? 40 : n), s);
        size_t klen = (size_t)(colon - s);
        while (klen && (s[klen - 1] == ' ' || s[klen - 1] == '\t')) klen--;
        char key[40];
        if (klen == 0 || klen >= sizeof key) return fail_line(p, line, "expected 'key: value', not '%.*s'", (int)(n > 40 ? 40 : n), s);
        for (size_t i = 0; i < klen; i++)
            if (!key_char(s[i])) return fail_line(p, line, "'%.*s' is not a key (keys are lowercase words joined by '-')", (int)klen, s);
        memcpy(key, s, klen);
        key[klen] = '\0';
        const keydef *d = find_key(defs, n_defs, key);
        if (!d) {
            const char *near = nearest_key(defs, n_defs, key);
            if (near) return fail_line(p, line, "unknown key '%s' in a %s block (did you mean '%s'?)", key, what, near);
            return fail_line(p, line, "unknown key '%s' in a %s block", key, what);
        }
        for (int i = 0; i < *n_kvs; i++)
            if (strcmp((*kvs)[i].key, key) == 0)
                return fail_line(p, line, "'%s' is given twice (first on line %d)", key, (*kvs)[i].line);
        const char *v = colon + 1;
        size_t vn = (size_t)(s + n - v);
        while (vn && (*v == ' ' || *v == '\t')) v++, vn--;
        if (vn == 0) return fail_line(p, line, "'%s' needs a value", key);
        char *value = unquote(p, line, v, vn);
        if (!value) return p->st != TS_OK ? p->st : oom(p);
        ts_lesson_kv *kv = grow(kvs, n_kvs, sizeof **kvs);
        char *kcopy = kv ? dup_n(key, klen) : NULL;
        if (!kv || !kcopy) {
            free(value);
            free(kcopy);
            if (kv) (*n_kvs)--;
            return oom(p);
        }
        kv->key = kcopy;
        kv->value = value;
        kv->line = line;
        if (check_value(p, d, line, value) != TS_OK) return p->st;
    }
    return p->st;
}

static const ts_lesson_kv *find_kv(const ts_lesson_kv *kvs, int n, const char *key) {
    for (int i = 0; i < n; i++)
        if (strcmp(kvs[i].key, key) == 0) return &kvs[i];
    return NULL;
}

/* ----------------------------------------------------------- tscope blocks */

static ts_status add_setup(parser *p, const char *name, int first, int last) {
    ts_lesson *l = p->lesson;
    bool main_setup = name == NULL;
    if (main_setup && l->n_setups > 0)
        return fail_line(p, first, "a second setup block (the first is on line %d; name extra runs: ```tscope setup NAME)",
                         l->setups[0].line);
    if (!main_setup) {
        if (l->n_setups == 0)
            return fail_line(p, first, "the named setup '%s' comes before the main ```tscope setup block", name);
        if (!valid_run_name(name) || strcmp(name, "main") == 0)
            return fail_line(p, first, "'%s' cannot name a setup (lowercase letters, digits, '-', '_'; not 'main')", name);
        for (int i = 0; i < l->n_setups; i++)
            if (strcmp(l->setups[i].name, name) == 0)
                return fail_line(p, first, "a second setup named '%s' (the first is on line %d)", name,
                                 l->setups[i].line);
    }
    ts_lesson_setup *s = grow(&l->setups, &l->n_setups, sizeof *s);
    if (!s) return oom(p);
    s->line = first;
    s->name = dup_n(main_setup ? "main" : name, strlen(main_setup ? "main" : name));
    if (!s->name) return oom(p);
    return read_pairs(p, first + 1, last - 1, setup_keys, N_SETUP_KEYS, "setup", &s->keys, &s->n_keys);
}

static ts_status fill_step(parser *p, ts_lesson_step *st) {
    st->layer = st->head = st->batch = -1;
    st->train_step = st->compare_step = TS_LESSON_UNSET;
    for (int i = 0; i < st->n_keys && p->st == TS_OK; i++) {
        const ts_lesson_kv *kv = &st->keys[i];
        const char *k = kv->key, *v = kv->value;
        char **slot = NULL;
        if (strcmp(k, "tensor") == 0) slot = &st->tensor;
        else if (strcmp(k, "run") == 0) slot = &st->run;
        else if (strcmp(k, "compare-with") == 0) slot = &st->compare_with;
        else if (strcmp(k, "compare-run") == 0) slot = &st->compare_run;
        else if (strcmp(k, "title") == 0) slot = &st->title;
        else if (strcmp(k, "view") == 0) {
            for (int w = 0; w < TS_LESSON_VIEW_COUNT; w++)
                if (strcmp(v, ts_lesson_view_name((ts_lesson_view)w)) == 0) st->view = (ts_lesson_view)w;
        } else if (strcmp(k, "highlight") == 0) parse_marks(p, kv->line, v, st);
        else if (strcmp(k, "dims") == 0) parse_ints(p, kv->line, k, v, st->dims, &st->n_dims, TS_LESSON_MAX_DIMS);
        else if (strcmp(k, "axes") == 0) {
            if (parse_ints(p, kv->line, k, v, st->axes, &st->n_axes, 2) == TS_OK && st->n_axes != 2)
                fail_line(p, kv->line, "'axes' is two dims, as 'axes: 1, 2'");
        }
        else {
            int x = atoi(v);
            if (strcmp(k, "layer") == 0) st->layer = x;
            else if (strcmp(k, "head") == 0) st->head = x;
            else if (strcmp(k, "batch") == 0) st->batch = x;
            else if (strcmp(k, "step") == 0) st->train_step = x;
            else if (strcmp(k, "compare-step") == 0) st->compare_step = x;
        }
        if (slot) {
            *slot = dup_n(v, strlen(v));
            if (!*slot) return oom(p);
        }
    }
    if (p->st != TS_OK) return p->st;
    if (!st->tensor) return fail_line(p, st->line, "a step needs 'tensor: NAME' (the trace name to show)");
    if (!st->run && !(st->run = dup_n("main", 4))) return oom(p);
    return TS_OK;
}

static ts_status add_step(parser *p, int first, int last) {
    ts_lesson *l = p->lesson;
    if (l->n_setups == 0) return fail_line(p, first, "a step block before the setup block (```tscope setup comes first)");
    ts_lesson_step *st = grow(&l->steps, &l->n_steps, sizeof *st);
    if (!st) return oom(p);
    st->line = first;
    if (read_pairs(p, first + 1, last - 1, step_keys, N_STEP_KEYS, "step", &st->keys, &st->n_keys) != TS_OK)
        return p->st;
    if (fill_step(p, st) != TS_OK) return p->st;
    p->cur = l->n_steps - 1;
    p->open = -1;
    return TS_OK;
}

/* A ```tscope KIND [NAME] block at the top level: read it from the source. */
static ts_status tscope_block(parser *p, const MD_BLOCK_CODE_DETAIL *d, bool top) {
    long off = d->info.text ? doc_offset(p, d->info.text) : -1;
    int first = off >= 0 ? line_of(p, (size_t)off) : line_of(p, p->cursor);
    if (off < 0) return fail_line(p, first, "write a tscope block's info string plainly (```tscope step)");
    if (!top) return fail_line(p, first, "a tscope block must start at the left margin, not inside a list or quote");
    char info[128];
    if (d->info.size >= sizeof info) return fail_line(p, first, "a tscope block's info string is too long");
    memcpy(info, d->info.text, d->info.size);
    info[d->info.size] = '\0';
    char shown[sizeof info];
    memcpy(shown, info, sizeof info);
    char *w[4];
    int n = split_words(info, w, 3);
    int last = closing_fence(p, first, d->fence_char);
    if (last == 0) return fail_line(p, first, "unclosed %c%c%c block (no closing fence before the end of the file)",
                                    d->fence_char, d->fence_char, d->fence_char);
    span *sp = grow(&p->spans, &p->n_spans, sizeof *sp);
    if (!sp) return oom(p);
    sp->first = first;
    sp->last = last;
    move_cursor_past(p, last);
    if (n >= 2 && strcmp(w[1], "setup") == 0) {
        if (n > 3) return fail_line(p, first, "a setup block is ```tscope setup [NAME]");
        add_setup(p, n == 3 ? w[2] : NULL, first, last);
    } else if (n >= 2 && strcmp(w[1], "step") == 0) {
        if (n > 2) return fail_line(p, first, "a step block is ```tscope step (the name goes in 'tensor:')");
        add_step(p, first, last);
    } else {
        return fail_line(p, first, "a tscope block is ```tscope setup or ```tscope step, not ```%s", shown);
    }
    p->spans[p->n_spans - 1].narration_after = p->cur;
    return p->st;
}

/* ------------------------------------------------------------- narration */

static ts_lesson_block *new_block(parser *p, ts_lesson_block_kind kind) {
    ts_lesson_narration *nar = narration(p, p->cur);
    ts_lesson_block *b = grow(&nar->blocks, &nar->n_blocks, sizeof *b);
    if (!b) {
        oom(p);
        return NULL;
    }
    b->kind = kind;
    b->depth = p->n_lists;
    b->quote = p->quote;
    p->open = nar->n_blocks - 1;
    p->item_fresh = false;
    return b;
}

static ts_lesson_block *open_block(parser *p) {
    if (p->open < 0) return NULL;
    return &narration(p, p->cur)->blocks[p->open];
}

static unsigned current_style(const parser *p) {
    unsigned s = 0;
    if (p->em) s |= TS_LESSON_EM;
    if (p->strong) s |= TS_LESSON_STRONG;
    if (p->code || p->in_code) s |= TS_LESSON_CODE;
    if (p->math) s |= TS_LESSON_MATH;
    if (p->display) s |= TS_LESSON_MATH | TS_LESSON_DISPLAY;
    if (p->link) s |= TS_LESSON_LINK;
    return s;
}

static ts_status append_text(parser *p, const char *s, size_t n) {
    if (n == 0) return TS_OK;
    ts_lesson_block *b = open_block(p);
    if (!b && !(b = new_block(p, TS_LESSON_PARA))) return p->st;
    unsigned style = current_style(p);
    ts_lesson_run *r = b->n_runs ? &b->runs[b->n_runs - 1] : NULL;
    if (!r || r->style != style) {
        if (!(r = grow(&b->runs, &b->n_runs, sizeof *r))) return oom(p);
        r->style = style;
    }
    /* The text's capacity is the next power of two above its length, so a
     * paragraph that arrives in thousands of pieces grows in linear time. */
    size_t cap = 16;
    while (r->text && cap < r->len + 1) cap *= 2;
    if (!r->text || r->len + n + 1 > cap) {
        while (cap < r->len + n + 1) cap *= 2;
        char *t = realloc(r->text, cap);
        if (!t) return oom(p);
        r->text = t;
    }
    memcpy(r->text + r->len, s, n);
    r->len += n;
    r->text[r->len] = '\0';
    return TS_OK;
}

/* Write code point cp as UTF-8 into out (4 bytes); returns the length. */
static size_t utf8(unsigned long cp, char *out) {
    if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* "&amp;", "&#955;", "&#x3bb;": the few named entities a lesson would use,
 * and every numeric one, decoded into out (4 bytes); 0 for others, which stay
 * as written. */
static size_t decode_entity(const char *s, size_t n, char *out) {
    static const struct {
        const char *name;
        unsigned long cp;
    } named[] = {{"&amp;", '&'},      {"&lt;", '<'},        {"&gt;", '>'},       {"&quot;", '"'},
                 {"&apos;", '\''},    {"&nbsp;", 0xA0},     {"&times;", 0xD7},   {"&middot;", 0xB7},
                 {"&radic;", 0x221A}, {"&sum;", 0x2211},    {"&minus;", 0x2212}, {"&infin;", 0x221E},
                 {"&asymp;", 0x2248}, {"&rarr;", 0x2192},   {"&larr;", 0x2190},  {"&hellip;", 0x2026},
                 {"&mdash;", 0x2014}, {"&ndash;", 0x2013},  {"&le;", 0x2264},    {"&ge;", 0x2265}};
    if (n >= 4 && s[1] == '#') {
        bool hex = s[2] == 'x' || s[2] == 'X';
        unsigned long cp = 0;
        for (size_t i = hex ? 3 : 2; i + 1 < n; i++) {
            int c = (unsigned char)s[i];
            int digit = isdigit(c) ? c - '0' : hex && isxdigit(c) ? (tolower(c) - 'a' + 10) : -1;
            if (digit < 0) break;
            cp = cp * (hex ? 16 : 10) + (unsigned long)digit;
            if (cp > 0x10FFFF) cp = 0x110000;
        }
        return utf8(cp, out);
    }
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (strlen(named[i].name) == n && memcmp(named[i].name, s, n) == 0) return utf8(named[i].cp, out);
    return 0;
}

static ts_status append_entity(parser *p, const char *s, size_t n) {
    char buf[4];
    size_t k = decode_entity(s, n, buf);
    return k ? append_text(p, buf, k) : append_text(p, s, n);
}

static void note_position(parser *p, const char *s, size_t n) {
    long off = doc_offset(p, s);
    if (off < 0) return;
    if ((size_t)off + n > p->cursor) p->cursor = (size_t)off + n;
    if (p->in_code && p->first_off < 0) p->first_off = off;
    ts_lesson_block *b = open_block(p);
    if (b && b->line == 0) b->line = line_of(p, (size_t)off);
}

/* A formula is plain text with Unicode symbols; LaTeX commands would show up
 * as backslashes in the picture, so they are refused here. */
static ts_status check_math(parser *p, const char *s, size_t n) {
    const char *bs = memchr(s, '\\', n);
    if (!bs) return TS_OK;
    long off = doc_offset(p, bs);
    int line = off >= 0 ? line_of(p, (size_t)off) : line_of(p, p->cursor);
    return fail_line(p, line, "a formula is plain text with Unicode symbols (write √ and ·, not \\sqrt or \\cdot)");
}

static int on_text(MD_TEXTTYPE type, const MD_CHAR *s, MD_SIZE n, void *user) {
    parser *p = user;
    if (p->skip_depth) return 0;
    note_position(p, s, n);
    if (p->title_state == 1) {
        if (type == MD_TEXT_SOFTBR || type == MD_TEXT_BR) ts_text_buf_add(&p->title, " ", 1);
        else if (type == MD_TEXT_NULLCHAR) ts_text_buf_str(&p->title, "\xEF\xBF\xBD");
        else if (type == MD_TEXT_ENTITY) {
            char buf[4];
            size_t k = decode_entity(s, n, buf);
            if (k) ts_text_buf_add(&p->title, buf, k);
            else ts_text_buf_add(&p->title, s, n);
        } else ts_text_buf_add(&p->title, s, n);
        return p->title.oom ? (oom(p), 1) : 0;
    }
    switch (type) {
    case MD_TEXT_SOFTBR: append_text(p, " ", 1); break;
    case MD_TEXT_BR: append_text(p, "\n", 1); break;
    case MD_TEXT_NULLCHAR: append_text(p, "\xEF\xBF\xBD", 3); break;
    case MD_TEXT_ENTITY: append_entity(p, s, n); break;
    case MD_TEXT_LATEXMATH:
        if (check_math(p, s, n) == TS_OK) append_text(p, s, n);
        break;
    default: append_text(p, s, n); break;
    }
    return p->st != TS_OK;
}

static void start_list_item(parser *p) {
    ts_lesson_block *b = new_block(p, TS_LESSON_ITEM);
    if (!b) return;
    int level = p->n_lists - 1;
    if (level >= 0 && level < MAX_LIST_DEPTH && p->lists[level].ordered)
        snprintf(b->marker, sizeof b->marker, "%u.", p->lists[level].next++);
    else
        snprintf(b->marker, sizeof b->marker, "\xE2\x80\xA2");
    p->item_fresh = true;
}

static void start_code(parser *p, const MD_BLOCK_CODE_DETAIL *d, bool top) {
    if (!new_block(p, TS_LESSON_CODE_BLOCK)) return;
    p->in_code = true;
    p->fence_char = d->fence_char;
    p->code_top = top;
    p->info_off = d->info.text ? doc_offset(p, d->info.text) : -1;
    p->first_off = -1;
    p->code_cursor = p->cursor;
}

static int on_enter_block(MD_BLOCKTYPE type, void *detail, void *user) {
    parser *p = user;
    bool top = p->depth == 1;
    p->depth++;
    if (type == MD_BLOCK_DOC || p->skip_depth) return 0;
    if (top && ++p->n_top == 1) {
        if (type != MD_BLOCK_H || ((MD_BLOCK_H_DETAIL *)detail)->level != 1) {
            int line = 1;
            while (line < p->n_lines && blank_line(p, line)) line++;
            fail_line(p, line, "a lesson begins with its title as a '# Title' heading");
            return 1;
        }
        p->title_state = 1;
        return 0;
    }
    switch (type) {
    case MD_BLOCK_CODE: {
        MD_BLOCK_CODE_DETAIL *d = detail;
        if (d->fence_char && d->lang.size == 6 && d->lang.text && memcmp(d->lang.text, "tscope", 6) == 0) {
            p->skip_depth = p->depth;
            tscope_block(p, d, top);
        } else {
            start_code(p, d, top);
        }
        break;
    }
    case MD_BLOCK_P:
        if (p->item_fresh && open_block(p)) p->item_fresh = false;
        else new_block(p, TS_LESSON_PARA);
        break;
    case MD_BLOCK_H: {
        ts_lesson_block *b = new_block(p, TS_LESSON_HEADING);
        if (b) b->level = (int)((MD_BLOCK_H_DETAIL *)detail)->level;
        break;
    }
    case MD_BLOCK_UL:
    case MD_BLOCK_OL:
        if (p->n_lists < MAX_LIST_DEPTH) {
            p->lists[p->n_lists].ordered = type == MD_BLOCK_OL;
            p->lists[p->n_lists].next = type == MD_BLOCK_OL ? ((MD_BLOCK_OL_DETAIL *)detail)->start : 0;
        }
        p->n_lists++;
        p->open = -1;
        break;
    case MD_BLOCK_LI: start_list_item(p); break;
    case MD_BLOCK_QUOTE:
        p->quote++;
        p->open = -1;
        break;
    case MD_BLOCK_HR:
        new_block(p, TS_LESSON_RULE);
        p->open = -1;
        break;
    default: break;
    }
    return p->st != TS_OK;
}

/* Where a narration code block's opening fence is: its info string, else the
 * fence line above its first line of text, else the next fence after what came
 * before it (an empty block). */
static int code_fence_line(parser *p) {
    if (p->info_off >= 0) return line_of(p, (size_t)p->info_off);
    int floor_line = line_of(p, p->code_cursor);
    if (p->first_off >= 0) {
        for (int line = line_of(p, (size_t)p->first_off) - 1; line >= floor_line && line >= 1; line--)
            if (is_opening_fence(p, line, p->fence_char)) return line;
    }
    /* the cursor is the end of what came before: the fence is on a later line */
    for (int line = p->code_cursor ? floor_line + 1 : 1; line <= p->n_lines; line++)
        if (is_opening_fence(p, line, p->fence_char)) return line;
    return 0;
}

static void end_code(parser *p) {
    p->in_code = false;
    ts_lesson_block *b = open_block(p);
    if (b && b->n_runs) {
        ts_lesson_run *r = &b->runs[b->n_runs - 1];
        if (r->len && r->text[r->len - 1] == '\n') r->text[--r->len] = '\0';
    }
    if (!p->code_top || !p->fence_char) return;
    int first = code_fence_line(p);
    if (first == 0) return;
    int last = closing_fence(p, first, p->fence_char);
    if (last == 0) {
        fail_line(p, first, "unclosed %c%c%c block (no closing fence before the end of the file)", p->fence_char,
                  p->fence_char, p->fence_char);
        return;
    }
    move_cursor_past(p, last);
}

/* A paragraph holding only a $$display formula$$ is a formula block. */
static void end_paragraph(parser *p) {
    ts_lesson_block *b = open_block(p);
    if (!b || b->kind != TS_LESSON_PARA) return;
    int display = 0, other = 0;
    for (int i = 0; i < b->n_runs; i++) {
        if (b->runs[i].style & TS_LESSON_DISPLAY) display++;
        else if (strspn(b->runs[i].text, " \n") != strlen(b->runs[i].text)) other++;
    }
    if (display == 1 && other == 0) {
        b->kind = TS_LESSON_FORMULA;
        int keep = 0;
        for (int i = 0; i < b->n_runs; i++) {
            if (b->runs[i].style & TS_LESSON_DISPLAY) b->runs[keep++] = b->runs[i];
            else free(b->runs[i].text);
        }
        b->n_runs = keep;
    }
}

static void end_title(parser *p) {
    p->title_state = 2;
    p->title_last = line_of(p, p->cursor ? p->cursor - 1 : 0);
    /* A setext title (Title / =====) ends on its underline. */
    if (p->title_last < p->n_lines) {
        const char *s;
        size_t n;
        line_text(p, p->title_last + 1, &s, &n);
        size_t i = 0;
        while (i < n && s[i] == ' ') i++;
        if (i < n && s[i] == '=') p->title_last++;
    }
}

static int on_leave_block(MD_BLOCKTYPE type, void *detail, void *user) {
    parser *p = user;
    (void)detail;
    p->depth--;
    if (p->skip_depth) {
        if (p->depth < p->skip_depth) p->skip_depth = 0;
        return p->st != TS_OK;
    }
    switch (type) {
    case MD_BLOCK_H:
        if (p->title_state == 1) end_title(p);
        p->open = -1;
        break;
    case MD_BLOCK_CODE:
        end_code(p);
        p->open = -1;
        break;
    case MD_BLOCK_P:
        end_paragraph(p);
        p->open = -1;
        break;
    case MD_BLOCK_LI:
        p->open = -1;
        p->item_fresh = false;
        break;
    case MD_BLOCK_UL:
    case MD_BLOCK_OL:
        p->n_lists--;
        p->open = -1;
        break;
    case MD_BLOCK_QUOTE:
        p->quote--;
        p->open = -1;
        break;
    default: break;
    }
    return p->st != TS_OK;
}

static int on_enter_span(MD_SPANTYPE type, void *detail, void *user) {
    parser *p = user;
    (void)detail;
    switch (type) {
    case MD_SPAN_EM: p->em++; break;
    case MD_SPAN_STRONG: p->strong++; break;
    case MD_SPAN_CODE: p->code++; break;
    case MD_SPAN_LATEXMATH: p->math++; break;
    case MD_SPAN_LATEXMATH_DISPLAY: p->display++; break;
    case MD_SPAN_A:
    case MD_SPAN_IMG: p->link++; break;
    default: break;
    }
    return 0;
}

static int on_leave_span(MD_SPANTYPE type, void *detail, void *user) {
    parser *p = user;
    (void)detail;
    switch (type) {
    case MD_SPAN_EM: p->em--; break;
    case MD_SPAN_STRONG: p->strong--; break;
    case MD_SPAN_CODE: p->code--; break;
    case MD_SPAN_LATEXMATH: p->math--; break;
    case MD_SPAN_LATEXMATH_DISPLAY: p->display--; break;
    case MD_SPAN_A:
    case MD_SPAN_IMG: p->link--; break;
    default: break;
    }
    return 0;
}

/* ------------------------------------------------------------- afterwards */

/* Add source lines [first, last] to a narration's Markdown, blank lines at the
 * ends left out; pieces are joined by a blank line. */
static ts_status add_source(parser *p, ts_text_buf *b, int first, int last) {
    while (first <= last && blank_line(p, first)) first++;
    while (last >= first && blank_line(p, last)) last--;
    if (first > last) return TS_OK;
    if (b->len) ts_text_buf_str(b, "\n\n");
    size_t beg = p->line_start[first - 1], end = p->line_start[last];
    while (end > beg && is_eol(p->text[end - 1])) end--;
    ts_text_buf_add(b, p->text + beg, end - beg);
    return b->oom ? oom(p) : TS_OK;
}

static ts_status collect_sources(parser *p) {
    ts_lesson *l = p->lesson;
    int n_nar = l->n_steps + 1;
    ts_text_buf *bufs = calloc((size_t)n_nar, sizeof *bufs);
    if (!bufs) return oom(p);
    int from = p->title_last + 1, target = -1;
    for (int i = 0; i <= p->n_spans && p->st == TS_OK; i++) {
        int to = i < p->n_spans ? p->spans[i].first - 1 : p->n_lines;
        add_source(p, &bufs[target + 1], from, to);
        if (i < p->n_spans) {
            from = p->spans[i].last + 1;
            target = p->spans[i].narration_after;
        }
    }
    for (int k = 0; k < n_nar; k++) {
        char *s = ts_text_buf_take(&bufs[k]);
        if (!s) oom(p);
        narration(p, k - 1)->source = s;
    }
    free(bufs);
    return p->st;
}

static ts_status step_titles(parser *p) {
    ts_lesson *l = p->lesson;
    for (int i = 0; i < l->n_steps; i++) {
        ts_lesson_step *st = &l->steps[i];
        if (st->title) continue;
        const ts_lesson_narration *nar = &st->narration;
        if (nar->n_blocks && nar->blocks[0].kind == TS_LESSON_HEADING) {
            if (ts_lesson_block_text(&nar->blocks[0], &st->title) != TS_OK) return oom(p);
        } else if (!(st->title = dup_n("", 0))) {
            return oom(p);
        }
    }
    return TS_OK;
}

static int kv_line(const ts_lesson_kv *kvs, int n, const char *key, int fallback) {
    const ts_lesson_kv *kv = find_kv(kvs, n, key);
    return kv ? kv->line : fallback;
}

/* Rules that need the whole file: named runs exist, training keys go with
 * `command: train`, one input. */
static ts_status check_cross(parser *p) {
    ts_lesson *l = p->lesson;
    if (l->n_setups == 0) return fail_line(p, p->title_last, "no setup block: a lesson needs ```tscope setup");
    if (l->n_steps == 0) return fail_line(p, p->n_lines, "no step blocks: a lesson needs at least one ```tscope step");
    for (int r = 0; r < l->n_setups; r++) {
        const ts_lesson_setup *s = &l->setups[r];
        const char *cmd = ts_lesson_setup_get(l, r, "command");
        bool train = cmd && strcmp(cmd, "train") == 0;
        for (int i = 0; i < s->n_keys; i++) {
            const keydef *d = find_key(setup_keys, N_SETUP_KEYS, s->keys[i].key);
            if (d && d->train_only && !train)
                return fail_line(p, s->keys[i].line, "'%s' is a training key: the setup needs 'command: train'",
                                 s->keys[i].key);
        }
        if (train && !ts_lesson_setup_get(l, r, "task"))
            return fail_line(p, kv_line(s->keys, s->n_keys, "command", s->line), "a training setup needs 'task:'");
        if (ts_lesson_setup_get(l, r, "text") && ts_lesson_setup_get(l, r, "input")) {
            const ts_lesson_kv *kv = find_kv(s->keys, s->n_keys, "input");
            if (!kv) kv = find_kv(s->keys, s->n_keys, "text");
            return fail_line(p, kv ? kv->line : s->line, "give 'text' or 'input', not both");
        }
    }
    for (int i = 0; i < l->n_steps; i++) {
        const ts_lesson_step *st = &l->steps[i];
        if (ts_lesson_find_setup(l, st->run) < 0)
            return fail_line(p, kv_line(st->keys, st->n_keys, "run", st->line),
                             "no setup named '%s' (add a ```tscope setup %s block)", st->run, st->run);
        if (st->compare_run && ts_lesson_find_setup(l, st->compare_run) < 0)
            return fail_line(p, kv_line(st->keys, st->n_keys, "compare-run", st->line),
                             "no setup named '%s' (add a ```tscope setup %s block)", st->compare_run,
                             st->compare_run);
    }
    return TS_OK;
}

/* ------------------------------------------------------------------ API */

static void free_narration(ts_lesson_narration *n) {
    for (int b = 0; b < n->n_blocks; b++) {
        for (int r = 0; r < n->blocks[b].n_runs; r++) free(n->blocks[b].runs[r].text);
        free(n->blocks[b].runs);
    }
    free(n->blocks);
    free(n->source);
}

static void free_kvs(ts_lesson_kv *kvs, int n) {
    for (int i = 0; i < n; i++) {
        free(kvs[i].key);
        free(kvs[i].value);
    }
    free(kvs);
}

void ts_lesson_free(ts_lesson *l) {
    if (!l) return;
    free(l->path);
    free(l->title);
    free_narration(&l->intro);
    for (int i = 0; i < l->n_setups; i++) {
        free(l->setups[i].name);
        free_kvs(l->setups[i].keys, l->setups[i].n_keys);
    }
    free(l->setups);
    for (int i = 0; i < l->n_steps; i++) {
        ts_lesson_step *s = &l->steps[i];
        free(s->title);
        free(s->tensor);
        free(s->run);
        free(s->compare_with);
        free(s->compare_run);
        free_kvs(s->keys, s->n_keys);
        free_narration(&s->narration);
    }
    free(l->steps);
    memset(l, 0, sizeof *l);
}

static ts_status parse_document(parser *p) {
    ts_lesson *l = p->lesson;
    if (index_lines(p) != TS_OK) return p->st;
    int first = 1;
    while (first <= p->n_lines && blank_line(p, first)) first++;
    if (first > p->n_lines)
        return fail_line(p, 1, "empty lesson: it needs a '# Title', a ```tscope setup block and ```tscope step blocks");
    MD_PARSER md = {0};
    md.flags = MD_FLAG_LATEXMATHSPANS | MD_FLAG_NOHTML;
    md.enter_block = on_enter_block;
    md.leave_block = on_leave_block;
    md.enter_span = on_enter_span;
    md.leave_span = on_leave_span;
    md.text = on_text;
    int rc = md_parse(p->text, (MD_SIZE)p->len, &md, p);
    if (p->st != TS_OK) return p->st;
    if (rc != 0) return oom(p);
    if (p->title_state == 1) end_title(p);
    l->title = ts_text_buf_take(&p->title);
    if (!l->title) return oom(p);
    size_t n = strlen(l->title);
    while (n && l->title[n - 1] == ' ') l->title[--n] = '\0';
    if (n == 0) return fail_line(p, first, "the title heading is empty");
    if (check_cross(p) != TS_OK) return p->st;
    if (collect_sources(p) != TS_OK) return p->st;
    return step_titles(p);
}

ts_status ts_lesson_parse(ts_lesson *l, const char *path, const char *text, size_t len) {
    memset(l, 0, sizeof *l);
    if (!path) path = "<lesson>";
    l->path = dup_n(path, strlen(path));
    if (!l->path) return ts_fail(TS_ERR_NOMEM, "out of memory");
    if (len > MAX_LESSON_BYTES) {
        ts_status st = ts_fail(TS_ERR_FORMAT, "%s:1: %zu bytes is too large for a lesson", path, len);
        ts_lesson_free(l);
        return st;
    }
    parser p = {0};
    p.lesson = l;
    p.text = text ? text : "";
    p.len = text ? len : 0;
    /* Some editors start UTF-8 files with a byte-order mark; it is not text. */
    if (p.len >= 3 && memcmp(p.text, "\xEF\xBB\xBF", 3) == 0) {
        p.text += 3;
        p.len -= 3;
    }
    p.cur = -1;
    p.open = -1;
    ts_status st = parse_document(&p);
    free(p.line_start);
    free(p.spans);
    free(p.title.s);
    if (st != TS_OK) ts_lesson_free(l);
    return st;
}

ts_status ts_lesson_load(ts_lesson *l, const char *path) {
    memset(l, 0, sizeof *l);
    FILE *f = fopen(path, "rb");
    if (!f) return ts_fail(TS_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    ts_text_buf b = {0};
    char chunk[8192];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0 && b.len <= MAX_LESSON_BYTES) ts_text_buf_add(&b, chunk, n);
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        free(b.s);
        return ts_fail(TS_ERR_IO, "%s: read error", path);
    }
    size_t len = b.len;
    char *text = ts_text_buf_take(&b);
    if (!text) return ts_fail(TS_ERR_NOMEM, "%s: out of memory", path);
    ts_status st = ts_lesson_parse(l, path, text, len);
    free(text);
    return st;
}

int ts_lesson_find_setup(const ts_lesson *l, const char *name) {
    for (int i = 0; i < l->n_setups; i++)
        if (strcmp(l->setups[i].name, name) == 0) return i;
    return -1;
}

/* The command a setup's own keys name ("run" when none). */
static const char *own_command(const ts_lesson_setup *s) {
    const ts_lesson_kv *kv = find_kv(s->keys, s->n_keys, "command");
    return kv ? kv->value : "run";
}

const char *ts_lesson_setup_get(const ts_lesson *l, int run, const char *key) {
    if (run < 0 || run >= l->n_setups) return NULL;
    const ts_lesson_kv *kv = find_kv(l->setups[run].keys, l->setups[run].n_keys, key);
    /* A setup of another command (a training run beside a forward run) is a
     * run of its own: it takes nothing from the main setup. */
    if (!kv && run != 0 && strcmp(own_command(&l->setups[run]), own_command(&l->setups[0])) == 0)
        kv = find_kv(l->setups[0].keys, l->setups[0].n_keys, key);
    return kv ? kv->value : NULL;
}

ts_status ts_lesson_fail_at(const ts_lesson *l, int line, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ts_fail(TS_ERR_FORMAT, "%s:%d: %s", l->path ? l->path : "<lesson>", line, msg);
}

int ts_lesson_step_line(const ts_lesson_step *st, const char *key) {
    return kv_line(st->keys, st->n_keys, key, st->line);
}

static ts_status check_one_name(const ts_lesson *l, const ts_lesson_step *st, const char *key, const char *run,
                                const char *name, ts_lesson_name_fn known, void *ctx) {
    char hint[256] = "";
    if (known(ctx, run, name, hint, sizeof hint)) return TS_OK;
    hint[sizeof hint - 1] = '\0';
    return ts_lesson_fail_at(l, kv_line(st->keys, st->n_keys, key, st->line), "unknown step name '%s' in run '%s'%s%s",
                             name, run, hint[0] ? ": " : "", hint);
}

ts_status ts_lesson_check_names(const ts_lesson *l, ts_lesson_name_fn known, void *ctx) {
    for (int i = 0; i < l->n_steps; i++) {
        const ts_lesson_step *st = &l->steps[i];
        ts_status s = check_one_name(l, st, "tensor", st->run, st->tensor, known, ctx);
        if (s != TS_OK) return s;
        if (!st->compare_with && !st->compare_run) continue;
        const char *run = st->compare_run ? st->compare_run : st->run;
        const char *name = st->compare_with ? st->compare_with : st->tensor;
        s = check_one_name(l, st, st->compare_with ? "compare-with" : "compare-run", run, name, known, ctx);
        if (s != TS_OK) return s;
    }
    return TS_OK;
}

static const char *const view_names[TS_LESSON_VIEW_COUNT] = {
    [TS_LESSON_VIEW_AUTO] = "auto",         [TS_LESSON_VIEW_HEATMAP] = "heatmap",
    [TS_LESSON_VIEW_GRID] = "grid",         [TS_LESSON_VIEW_OVERVIEW] = "overview",
    [TS_LESSON_VIEW_CURVES] = "curves",     [TS_LESSON_VIEW_STATS] = "stats",
    [TS_LESSON_VIEW_SHAPES] = "shapes",
};

const char *ts_lesson_view_name(ts_lesson_view v) {
    if ((unsigned)v >= TS_LESSON_VIEW_COUNT) return "?";
    return view_names[v];
}
