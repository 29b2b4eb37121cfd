/* lesson_keys: `tscope` blocks. Their keys (the schema of setups and steps),
 * the check of each value with the line it is on, and the setups and steps
 * they become. See lesson_parser.h. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lesson_parser.h"

/* ------------------------------------------------------- key: value blocks */

typedef enum vkind { V_STRING, V_INT, V_FLOAT, V_CHOICE, V_BOOL, V_WORDS, V_NAME, V_RUN, V_MARKS, V_INTS, V_KEYS } vkind;

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
    {"command", V_CHOICE, "run|train|generate|ablate", 0, 0, false, false},
    {"preset", V_CHOICE, "tiny|seed000|seed001|seed004|copy|base|lm|gpt2", 0, 0, false, false},
    {"arch", V_CHOICE, "encoder|encoder-decoder|decoder", 0, 0, false, false},
    {"head", V_CHOICE, "none|lm", 0, 0, false, false},
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
    {"activation", V_CHOICE, "relu|gelu|gelu-tanh", 0, 0, false, false},
    {"eps", V_FLOAT, NULL, 0, 1, true, false},
    {"final-norm", V_BOOL, NULL, 0, 0, false, false},
    {"seed", V_INT, NULL, 0, BIG, false, false},
    {"text", V_STRING, NULL, 0, 0, false, false}, /* may repeat: one sentence of a padded batch each */
    {"input", V_STRING, NULL, 0, 0, false, false},
    {"target", V_STRING, NULL, 0, 0, false, false},
    {"load", V_STRING, NULL, 0, 0, false, false},
    {"labels", V_STRING, NULL, 0, 0, false, false},
    {"level", V_CHOICE, "shapes|stats|values|auto", 0, 0, false, false},
    {"only", V_STRING, NULL, 0, 0, false, false},
    {"keep-batch", V_INT, NULL, 0, BIG, false, false},
    {"backward", V_BOOL, NULL, 0, 0, false, false},
    {"train-mode", V_BOOL, NULL, 0, 0, false, false},
    {"greedy", V_BOOL, NULL, 0, 0, false, false},
    /* experiments (docs/experiments.md): run --ablate SPEC (one each, separated by spaces), --lens */
    {"ablate", V_STRING, NULL, 0, 0, false, false},
    {"lens", V_BOOL, NULL, 0, 0, false, false},
    /* command: ablate (tscope ablate's --positions A-B) */
    {"positions", V_STRING, NULL, 0, 0, false, false},
    {"variant", V_WORDS, "no-scale|seed000-reshape|seed001-layernorm|seed004-residual|seed003-mask|seed001-softmax|no-residual", 0, 0, false, false},
    {"pe-variant", V_CHOICE, "paper|seed001-sin-only|seed001-odd-exponent", 0, 0, false, false},
    {"mask", V_CHOICE, "none|causal|padding|padding-both", 0, 0, false, false},
    {"label-smoothing", V_FLOAT, NULL, 0, 0.999, false, true},
    {"task", V_CHOICE, "copy|reverse|sort|lm", 0, 0, false, true},
    {"steps", V_INT, NULL, 1, BIG, false, true},
    {"every", V_INT, NULL, 1, BIG, false, true},
    {"lr", V_FLOAT, NULL, 0, 10, true, true},
    {"clip", V_FLOAT, NULL, 0, BIG, false, true}, /* 0: no clipping */
    {"weight-decay", V_FLOAT, NULL, 0, 10, false, true},
    /* tscope generate (a language model's checkpoint in `load`) */
    {"prompt", V_STRING, NULL, 0, 0, false, false},
    {"tokens", V_INT, NULL, 0, 1 << 20, false, false},
    {"temperature", V_FLOAT, NULL, 0, 100, false, false},
    {"top-k", V_INT, NULL, 0, 1 << 24, false, false},
    /* a trace recorded beforehand (a shipped training trace), shown as it is */
    {"trace", V_STRING, NULL, 0, 0, false, false},
    /* a named setup: keys of the main setup it leaves out (another model) */
    {"without", V_KEYS, NULL, 0, 0, false, false},
};

/* Step keys are `tscope png`'s flags, plus what only a lesson needs. */
static const keydef step_keys[] = {
    {"tensor", V_NAME, NULL, 0, 0, false, false},
    {"view", V_CHOICE, "heatmap|grid|overview|curves|stats|shapes|lens|dist|rope|auto", 0, 0, false, false},
    {"position", V_INT, NULL, -4096, 1 << 20, false, false}, /* the dist view's position (-1: the last) */
    {"top", V_INT, NULL, 1, 40, false, false},                /* the dist view's number of tokens */
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
    {"expect", V_STRING, NULL, 0, 0, false, false}, /* figures the narration quotes (lesson_expect.c) */
    {"colour-scale", V_CHOICE, "own|shared", 0, 0, false, false}, /* a comparison's two panels */
    {"overlay", V_BOOL, NULL, 0, 0, false, false}, /* a comparison's curves in one plot */
    {"live", V_BOOL, NULL, 0, 0, false, false},    /* the window lets the text be edited (tscope live) */
    {"zoom", V_STRING, NULL, 0, 0, false, false},  /* rows A-B cols C-D: the cells a heatmap frames */
    {"unchecked", V_STRING, NULL, 0, 0, false, false}, /* figures the narration quotes and the page need not draw */
    {"caption", V_STRING, NULL, 0, 0, false, false},   /* a line drawn under the view: figures expect: checks */
};

/* The front matter's keys (a `---` block before the title): what a lesson
 * says of itself to a list of lessons, such as the site's index. */
static const keydef front_keys[] = {
    {"summary", V_STRING, NULL, 0, 0, false, false}, /* one sentence for the index */
};

#define N_SETUP_KEYS (int)(sizeof setup_keys / sizeof setup_keys[0])
#define N_STEP_KEYS (int)(sizeof step_keys / sizeof step_keys[0])

static const keydef *find_key(const keydef *defs, int n, const char *key) {
    for (int i = 0; i < n; i++)
        if (strcmp(defs[i].key, key) == 0) return &defs[i];
    return NULL;
}

bool lp_setup_key_train_only(const char *key) {
    const keydef *d = find_key(setup_keys, N_SETUP_KEYS, key);
    return d && d->train_only;
}

bool lp_setup_key_repeats(const char *key) {
    return strcmp(key, "text") == 0; /* --text, once per sentence of the batch */
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

static bool parse_long(const char *v, long *out) {
    int64_t x;
    if (!ts_text_int(v, LONG_MIN, LONG_MAX, &x)) return false;
    *out = (long)x;
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
    if (strlen(value) >= sizeof buf) return lp_problem(p, line, "'highlight' is too long");
    strcpy(buf, value);
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *w[4];
        int n = split_words(item, w, 3);
        if (n == 0) return lp_problem(p, line, "'highlight' has an empty item (items are separated by ',')");
        int kind = -1;
        for (int k = 0; k < TS_LESSON_MARK_COUNT; k++)
            if (strcmp(w[0], mark_names[k]) == 0) kind = k;
        if (kind < 0)
            return lp_problem(p, line,
                             "unknown highlight '%s' (row N, col N, cell R C, token N, dim N, diagonal, "
                             "masked, argmax)",
                             w[0]);
        if (n - 1 != mark_args[kind])
            return lp_problem(p, line, "highlight '%s' takes %d number%s", w[0], mark_args[kind],
                             mark_args[kind] == 1 ? "" : "s");
        if (step->n_marks == TS_LESSON_MAX_MARKS)
            return lp_problem(p, line, "at most %d highlights in a step", TS_LESSON_MAX_MARKS);
        ts_lesson_mark *m = &step->marks[step->n_marks++];
        m->kind = (ts_lesson_mark_kind)kind;
        m->a = m->b = -1;
        for (int i = 1; i < n; i++) {
            long x;
            if (!parse_long(w[i], &x) || x < 0 || x > 1 << 24)
                return lp_problem(p, line, "highlight '%s' expects a whole number >= 0, not '%s'", w[0], w[i]);
            if (i == 1) m->a = (int)x;
            else m->b = (int)x;
        }
    }
    if (step->n_marks == 0) return lp_problem(p, line, "'highlight' is empty");
    return TS_OK;
}

/* "0 1, 6": whole numbers >= 0 separated by spaces or commas, at most `cap`. */
static ts_status parse_ints(parser *p, int line, const char *key, const char *value, int *out, int *n_out, int cap) {
    char buf[256];
    if (strlen(value) >= sizeof buf) return lp_problem(p, line, "'%s' is too long", key);
    strcpy(buf, value);
    for (char *s = buf; *s; s++)
        if (*s == ',') *s = ' ';
    char *w[TS_LESSON_MAX_DIMS + 1];
    int n = split_words(buf, w, cap);
    if (n > cap) return lp_problem(p, line, "'%s' lists at most %d numbers", key, cap);
    for (int i = 0; i < n; i++) {
        long x;
        if (!parse_long(w[i], &x) || x < 0 || x > 1 << 20)
            return lp_problem(p, line, "'%s' expects whole numbers >= 0, not '%s'", key, w[i]);
        out[(*n_out)++] = (int)x;
    }
    return TS_OK;
}

/* Check one value against its definition. */
#define MAX_VALUE 65536 /* bytes: a setup's value becomes one argument of the tscope it runs */
#define MAX_TITLE 200   /* bytes: a title is one line above the figure */
#define MAX_SUMMARY 300 /* bytes: a summary is one sentence on the index's card */

static ts_status check_value(parser *p, const keydef *d, int line, const char *v) {
    size_t len = strlen(v), most = strcmp(d->key, "title") == 0     ? MAX_TITLE
                                   : strcmp(d->key, "summary") == 0 ? MAX_SUMMARY
                                                                    : MAX_VALUE;
    if (len > most)
        return lp_problem(p, line, "'%s' is %zu bytes long, more than the %zu a%s can be", d->key, len, most,
                          most == MAX_TITLE ? " title" : most == MAX_SUMMARY ? " summary" : " lesson's value");
    switch (d->kind) {
    case V_INT: {
        long x;
        if (!parse_long(v, &x)) return lp_problem(p, line, "'%s' expects a whole number, not '%.60s'", d->key, v);
        if (x < d->min || x > d->max)
            return lp_problem(p, line, "'%s' is %ld, outside %.0f..%.0f", d->key, x, d->min, d->max);
        return TS_OK;
    }
    case V_FLOAT: {
        char *end;
        errno = 0;
        double x = strtod(v, &end);
        if (errno || end == v || *end || !isfinite(x))
            return lp_problem(p, line, "'%s' expects a number, not '%.60s'", d->key, v);
        if (x < d->min || (d->min_open && x == d->min) || x > d->max)
            return lp_problem(p, line, "'%s' is %s, outside %s%g..%g]", d->key, v, d->min_open ? "(" : "[",
                             d->min, d->max);
        return TS_OK;
    }
    case V_CHOICE:
        if (!ts_text_in_choices(d->choices, v, strlen(v)))
            return lp_problem(p, line, "unknown %s '%s' (one of %s)", d->key, v, d->choices);
        return TS_OK;
    case V_WORDS: {
        size_t n = strlen(v);
        for (size_t i = 0; i < n;) {
            while (i < n && v[i] == ' ') i++;
            size_t j = i;
            while (j < n && v[j] != ' ') j++;
            if (j > i && !ts_text_in_choices(d->choices, v + i, j - i))
                return lp_problem(p, line, "unknown %s '%.*s' (any of %s, separated by spaces)", d->key,
                                 (int)(j - i), v + i, d->choices);
            i = j;
        }
        return TS_OK;
    }
    case V_KEYS: {
        char buf[256];
        if (strlen(v) >= sizeof buf) return lp_problem(p, line, "'%s' is too long", d->key);
        strcpy(buf, v);
        for (char *w = strtok(buf, " "); w; w = strtok(NULL, " ")) {
            const keydef *k = find_key(setup_keys, N_SETUP_KEYS, w);
            if (!k || k->kind == V_KEYS || strcmp(w, "command") == 0)
                return lp_problem(p, line, "'%s' lists keys of the main setup to leave out; '%s' is not one", d->key,
                                    w);
        }
        return TS_OK;
    }
    case V_BOOL:
        if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0)
            return lp_problem(p, line, "'%s' is true or false, not '%s'", d->key, v);
        return TS_OK;
    case V_NAME:
        if (!valid_tensor_name(v))
            return lp_problem(p, line, "'%s' is not a trace name (like encoder.layers.0.self_attn.weights)", v);
        return TS_OK;
    case V_RUN:
        if (!valid_run_name(v))
            return lp_problem(p, line, "'%s' is not a setup name (lowercase letters, digits, '-', '_')", v);
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
    if (n < 2 || v[0] != '"') return strndup(v, n);
    if (v[n - 1] != '"') {
        lp_fail_line(p, line, "a quoted value must end with '\"'");
        return NULL;
    }
    char *out = malloc(n);
    if (!out) {
        lp_oom(p);
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 1; i + 1 < n; i++) {
        if (v[i] == '\\' && i + 2 < n && (v[i + 1] == '"' || v[i + 1] == '\\')) i++;
        else if (v[i] == '"') {
            free(out);
            lp_fail_line(p, line, "a '\"' inside a quoted value is written \\\"");
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
    bool blank = false; /* a blank line went before: prose after it is narration the block ran into */
    for (int line = first; line <= last && p->st == TS_OK; line++) {
        const char *s;
        size_t n;
        lp_line_text(p, line, &s, &n);
        while (n && (*s == ' ' || *s == '\t')) s++, n--;
        while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
        if (n == 0) blank = true;
        /* a fence with an info string (```tscope step) or a ## heading inside: this block was never closed */
        bool fence = n > 3 && (strncmp(s, "```", 3) == 0 || strncmp(s, "~~~", 3) == 0) && s[3] != s[0];
        if (fence || (blank && n > 2 && strncmp(s, "##", 2) == 0))
            return lp_fail_line(p, first - 1, "unclosed ```tscope %s block: %s on line %d is inside it ('%.*s'); close "
                                              "it with ``` before that line",
                                what, fence ? "a new fence" : "a heading", line, (int)(n > 40 ? 40 : n), s);
        if (n == 0 || s[0] == '#') continue;
        bool control = false;
        for (size_t i = 0; i < n; i++) control |= (unsigned char)s[i] < 0x20 && s[i] != '\t';
        if (control) {
            lp_problem(p, line, "a control character in a %s block", what);
            continue;
        }
        const char *colon = memchr(s, ':', n);
        size_t klen = colon ? (size_t)(colon - s) : 0;
        while (klen && (s[klen - 1] == ' ' || s[klen - 1] == '\t')) klen--;
        char key[40];
        if (!colon || klen == 0 || klen >= sizeof key || memchr(s, ' ', klen)) {
            if (blank) /* the block's closing fence is missing: the error is where it opened */
                return lp_fail_line(p, first - 1, "unclosed ```tscope %s block: it runs on into the narration at line %d "
                                                  "('%.*s'); close it with ``` before that line",
                                    what, line, (int)(n > 40 ? 40 : n), s);
            lp_problem(p, line, "expected 'key: value', not '%.*s'", (int)(n > 40 ? 40 : n), s);
            continue;
        }
        bool bad_key = false;
        for (size_t i = 0; i < klen; i++) bad_key |= !key_char(s[i]);
        if (bad_key) {
            lp_problem(p, line, "'%.*s' is not a key (keys are lowercase words joined by '-')", (int)klen, s);
            continue;
        }
        memcpy(key, s, klen);
        key[klen] = '\0';
        const keydef *d = find_key(defs, n_defs, key);
        if (!d) {
            const char *near = nearest_key(defs, n_defs, key);
            if (near) lp_problem(p, line, "unknown key '%s' in a %s block (did you mean '%s'?)", key, what, near);
            else lp_problem(p, line, "unknown key '%s' in a %s block", key, what);
            continue;
        }
        int twice = 0;
        for (int i = 0; i < *n_kvs && !(defs == setup_keys && lp_setup_key_repeats(key)); i++)
            if (strcmp((*kvs)[i].key, key) == 0) twice = (*kvs)[i].line;
        if (twice) {
            lp_problem(p, line, "'%s' is given twice (first on line %d)", key, twice);
            continue;
        }
        const char *v = colon + 1;
        size_t vn = (size_t)(s + n - v);
        while (vn && (*v == ' ' || *v == '\t')) v++, vn--;
        if (vn == 0) {
            lp_problem(p, line, "'%s' needs a value", key);
            continue;
        }
        char *value = unquote(p, line, v, vn);
        if (!value) return p->st != TS_OK ? p->st : lp_oom(p);
        ts_lesson_kv *kv = lp_grow(kvs, n_kvs, sizeof **kvs);
        char *kcopy = kv ? strndup(key, klen) : NULL;
        if (!kv || !kcopy) {
            free(value);
            free(kcopy);
            if (kv) (*n_kvs)--;
            return lp_oom(p);
        }
        kv->key = kcopy;
        kv->value = value;
        kv->line = line;
        check_value(p, d, line, value); /* a bad value is a problem listed; the others are still read */
    }
    return p->st;
}

const ts_lesson_kv *lp_find_kv(const ts_lesson_kv *kvs, int n, const char *key) {
    for (int i = 0; i < n; i++)
        if (strcmp(kvs[i].key, key) == 0) return &kvs[i];
    return NULL;
}

/* The front matter's lines [first, last]: its keys read and checked, the
 * summary kept in the lesson. */
ts_status lp_front_matter(parser *p, int first, int last) {
    ts_lesson_kv *kvs = NULL;
    int n = 0;
    ts_status st = read_pairs(p, first, last, front_keys, (int)(sizeof front_keys / sizeof front_keys[0]), "front-matter",
                              &kvs, &n);
    const ts_lesson_kv *summary = lp_find_kv(kvs, n, "summary");
    if (st == TS_OK && summary && !(p->lesson->summary = strdup(summary->value))) st = lp_oom(p);
    for (int i = 0; i < n; i++) {
        free(kvs[i].key);
        free(kvs[i].value);
    }
    free(kvs);
    return st;
}

/* ----------------------------------------------------------- tscope blocks */

static ts_status add_setup(parser *p, const char *name, int first, int last) {
    ts_lesson *l = p->lesson;
    bool main_setup = name == NULL;
    if (main_setup && l->n_setups > 0)
        return lp_fail_line(p, first, "a second setup block (the first is on line %d; name extra runs: ```tscope setup NAME)",
                         l->setups[0].line);
    if (!main_setup) {
        if (l->n_setups == 0)
            return lp_fail_line(p, first, "the named setup '%s' comes before the main ```tscope setup block", name);
        if (!valid_run_name(name) || strcmp(name, "main") == 0)
            return lp_fail_line(p, first, "'%s' cannot name a setup (lowercase letters, digits, '-', '_'; not 'main')", name);
        for (int i = 0; i < l->n_setups; i++)
            if (strcmp(l->setups[i].name, name) == 0)
                return lp_fail_line(p, first, "a second setup named '%s' (the first is on line %d)", name,
                                 l->setups[i].line);
    }
    ts_lesson_setup *s = lp_grow(&l->setups, &l->n_setups, sizeof *s);
    if (!s) return lp_oom(p);
    s->line = first;
    s->name = strndup(main_setup ? "main" : name, strlen(main_setup ? "main" : name));
    if (!s->name) return lp_oom(p);
    return read_pairs(p, first + 1, last - 1, setup_keys, N_SETUP_KEYS, "setup", &s->keys, &s->n_keys);
}

/* `unchecked: FIG REASON; FIG REASON`: each figure the narration quotes and
 * the page does not draw comes with the reason it need not (an exception
 * with no reason is one nobody can judge). */
static void check_unchecked(parser *p, int line, const char *v) {
    const char *u = v, *fig, *why;
    size_t fn, wn;
    int n = 0;
    while (ts_lesson_unchecked_next(&u, &fig, &fn, &why, &wn)) {
        n++;
        bool figure = isdigit((unsigned char)fig[0]) || (fn > 1 && fig[0] == '-' && isdigit((unsigned char)fig[1]));
        if (!figure)
            lp_problem(p, line, "'unchecked' item '%.*s' does not start with the figure it excuses "
                                "('unchecked: 0.024 1/41, even attention over 41 keys')", (int)fn, fig);
        else if (wn == 0)
            lp_problem(p, line, "'unchecked' %.*s gives no reason: write why the page need not draw it, after the "
                                "figure ('unchecked: 0.024 1/41, even attention over 41 keys')", (int)fn, fig);
    }
    if (n == 0) lp_problem(p, line, "'unchecked' lists no figure: drop the key, or write 'unchecked: 0.024 1/41, even attention over 41 keys'");
}

/* `zoom: rows A-B cols C-D` (either part may be left out): the block of
 * cells a heatmap draws, large enough for the values in them. */
static ts_status parse_zoom(parser *p, int line, const char *v, ts_lesson_step *st) {
    char copy[256];
    snprintf(copy, sizeof copy, "%s", v);
    char *w[8];
    int n = 0;
    for (char *save = NULL, *t = strtok_r(copy, " ,", &save); t && n < 8; t = strtok_r(NULL, " ,", &save)) w[n++] = t;
    st->zoom[0] = st->zoom[2] = 0;
    st->zoom[1] = st->zoom[3] = -1;
    if (n != 2 && n != 4) return lp_fail_line(p, line, "'zoom' is 'rows A-B cols C-D' (either part may be left out)");
    bool seen[3] = {false};
    for (int i = 0; i < n; i += 2) {
        int k = strcmp(w[i], "rows") == 0 ? 0 : strcmp(w[i], "cols") == 0 ? 2 : -1;
        int64_t a, b;
        if (k < 0) return lp_fail_line(p, line, "'zoom' is 'rows A-B cols C-D', not '%s'", w[i]);
        if (seen[k]) return lp_fail_line(p, line, "zoom: %s given twice", w[i]);
        seen[k] = true;
        if (!ts_text_range(w[i + 1], 1000000, false, &a, &b))
            return lp_fail_line(p, line, "zoom %s: a range A-B of whole numbers, A <= B, not '%s'", w[i], w[i + 1]);
        st->zoom[k] = (int)a;
        st->zoom[k + 1] = (int)b;
    }
    st->zoomed = true;
    return TS_OK;
}

static ts_status fill_step(parser *p, ts_lesson_step *st) {
    st->layer = st->head = st->batch = st->position = -1;
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
        else if (strcmp(k, "colour-scale") == 0) st->shared_scale = strcmp(v, "shared") == 0;
        else if (strcmp(k, "overlay") == 0) st->overlay = strcmp(v, "true") == 0;
        else if (strcmp(k, "live") == 0) st->live = strcmp(v, "true") == 0;
        else if (strcmp(k, "zoom") == 0) parse_zoom(p, kv->line, v, st);
        else if (strcmp(k, "dims") == 0) parse_ints(p, kv->line, k, v, st->dims, &st->n_dims, TS_LESSON_MAX_DIMS);
        else if (strcmp(k, "axes") == 0) {
            if (parse_ints(p, kv->line, k, v, st->axes, &st->n_axes, 2) == TS_OK && st->n_axes != 2)
                lp_problem(p, kv->line, "'axes' is two dims, as 'axes: 1, 2'");
        }
        else if (strcmp(k, "unchecked") == 0) check_unchecked(p, kv->line, v);
        else if (strcmp(k, "expect") == 0 || strcmp(k, "caption") == 0) {
            /* expect: items are read once the run is there; a caption's figures against them then */
        } else {
            int64_t x64 = 0; /* checked already against the key's range (read_pairs) */
            int x = ts_text_int(v, INT32_MIN, INT32_MAX, &x64) ? (int)x64 : 0;
            if (strcmp(k, "layer") == 0) st->layer = x;
            else if (strcmp(k, "head") == 0) st->head = x;
            else if (strcmp(k, "batch") == 0) st->batch = x;
            else if (strcmp(k, "step") == 0) st->train_step = x;
            else if (strcmp(k, "compare-step") == 0) st->compare_step = x;
            else if (strcmp(k, "position") == 0) st->position = x;
            else if (strcmp(k, "top") == 0) st->top = x;
        }
        if (slot) {
            *slot = strndup(v, strlen(v));
            if (!*slot) return lp_oom(p);
        }
    }
    if (p->st != TS_OK) return p->st;
    if (!st->run && !(st->run = strndup("main", 4))) return lp_oom(p);
    /* a line of the block already reported may be its tensor: one problem, not two */
    if (!st->tensor && p->n_problems == p->block_problems)
        lp_problem(p, st->line, "a step needs 'tensor: NAME' (the trace name to show)");
    bool compare = st->compare_with || st->compare_run || st->compare_step != TS_LESSON_UNSET;
    if (st->shared_scale && !compare)
        lp_problem(p, ts_lesson_step_line(st, "colour-scale"),
                            "'colour-scale: shared' is for two panels: add compare-with, compare-run or compare-step");
    if (st->overlay && !compare)
        lp_problem(p, ts_lesson_step_line(st, "overlay"),
                            "'overlay: true' draws a comparison's curves in one plot: add compare-with, compare-run or "
                            "compare-step");
    if (st->overlay && st->shared_scale)
        lp_problem(p, ts_lesson_step_line(st, "overlay"), "'overlay' draws curves, 'colour-scale' colours: not both");
    if (!st->run && !(st->run = strndup("main", 4))) return lp_oom(p);
    if (st->live) {
        int setup = ts_lesson_find_setup(p->lesson, st->run);
        const char *load = setup >= 0 ? ts_lesson_setup_get(p->lesson, setup, "load") : NULL;
        const char *text = setup >= 0 ? ts_lesson_setup_get(p->lesson, setup, "text") : NULL;
        if (!load || !text || compare)
            lp_problem(p, ts_lesson_step_line(st, "live"),
                       "'live: true' edits the text of a language model's run: the step's setup needs 'load:' and "
                       "'text:', and the step no comparison");
    }
    return TS_OK;
}

static ts_status add_step(parser *p, int first, int last) {
    ts_lesson *l = p->lesson;
    if (l->n_setups == 0) return lp_fail_line(p, first, "a step block before the setup block (```tscope setup comes first)");
    ts_lesson_step *st = lp_grow(&l->steps, &l->n_steps, sizeof *st);
    if (!st) return lp_oom(p);
    st->line = first;
    p->block_problems = p->n_problems;
    if (read_pairs(p, first + 1, last - 1, step_keys, N_STEP_KEYS, "step", &st->keys, &st->n_keys) != TS_OK)
        return p->st;
    if (fill_step(p, st) != TS_OK) return p->st;
    p->cur = l->n_steps - 1;
    p->open = -1;
    return TS_OK;
}

/* A ```tscope KIND [NAME] block at the top level: read it from the source. */
ts_status lp_tscope_block(parser *p, const MD_BLOCK_CODE_DETAIL *d, bool top) {
    long off = d->info.text ? lp_doc_offset(p, d->info.text) : -1;
    int first = off >= 0 ? lp_line_of(p, (size_t)off) : lp_line_of(p, p->cursor);
    if (off < 0) return lp_fail_line(p, first, "write a tscope block's info string plainly (```tscope step)");
    if (!top) return lp_fail_line(p, first, "a tscope block must start at the left margin, not inside a list or quote");
    char info[128];
    if (d->info.size >= sizeof info) return lp_fail_line(p, first, "a tscope block's info string is too long");
    memcpy(info, d->info.text, d->info.size);
    info[d->info.size] = '\0';
    char shown[sizeof info];
    memcpy(shown, info, sizeof info);
    char *w[4];
    int n = split_words(info, w, 3);
    int last = lp_closing_fence(p, first, d->fence_char);
    if (last == 0) return lp_fail_line(p, first, "unclosed %c%c%c block (no closing fence before the end of the file)",
                                    d->fence_char, d->fence_char, d->fence_char);
    span *sp = lp_grow(&p->spans, &p->n_spans, sizeof *sp);
    if (!sp) return lp_oom(p);
    sp->first = first;
    sp->last = last;
    lp_move_cursor_past(p, last);
    if (n >= 2 && strcmp(w[1], "setup") == 0) {
        if (n > 3) return lp_fail_line(p, first, "a setup block is ```tscope setup [NAME]");
        add_setup(p, n == 3 ? w[2] : NULL, first, last);
    } else if (n >= 2 && strcmp(w[1], "step") == 0) {
        if (n > 2) return lp_fail_line(p, first, "a step block is ```tscope step (the name goes in 'tensor:')");
        add_step(p, first, last);
    } else {
        return lp_fail_line(p, first, "a tscope block is ```tscope setup or ```tscope step, not ```%s", shown);
    }
    p->spans[p->n_spans - 1].narration_after = p->cur;
    return p->st;
}
