/* lesson_quotes: a number the narration quotes is one the learner can find
 * on the page (pages.h, ts_lesson_page_check_quotes; lessons/README.md,
 * "Quoted numbers").
 *
 * A page that says "0.36 on the previous character" beside a picture that
 * prints no 0.36 asks the reader to trust it. So every figure of a step's
 * narration must be drawn on its page, or excused by the step's
 * `unchecked:` key with a reason. A figure is
 *   - a number written with a decimal point: 0.36, 4.47, -0.076,
 *   - a percentage: 52%,
 *   - a count written "N of M": the N of "52 of 63 rows", "25 of the 32".
 * Every other whole number is a name or a setting (layer 1, head 3, row 40,
 * step 500, lesson 13, 64 characters) and is not a quote; rows and columns
 * named by their index are checked apart: the page must label them.
 *
 * Drawn means some number among the texts the view draws (its cells,
 * labels, ticks, zoom table, legend, statistics, the step's caption: every
 * text the renderer hands to the text probe) rounds to the quote: a drawn
 * number with at least the quote's decimals within half a unit of its last
 * digit (0.95 matches a drawn 0.953 or 0.95, not 0.96 nor 0.9). Signs are
 * ignored (a cell drawn as -0.05 shows 0.05). Inline code and code blocks
 * are not narration about the picture and are skipped. The page is read as
 * drawn at one pixel a point, whatever the export's scale: the size the
 * viewer and a PDF draw it, so --scale cannot change the verdict.
 *
 * A caption (`caption:`) is the lesson's own text drawn in the figure, so
 * each figure in it must be one of the step's `expect:` figures: the run
 * checks what the caption shows. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tscope/pages.h"

typedef enum num_kind {
    NUM_WHOLE,   /* a name or a setting: not a quote */
    NUM_DECIMAL, /* 0.36 */
    NUM_PERCENT, /* 52% */
    NUM_COUNT,   /* the 52 of "52 of 63" */
} num_kind;

/* Whether s (just after a whole number) reads " of M", " of the M": the
 * number before it counts some of M things. */
static bool counts_of(const char *s) {
    static const char *const fillers[] = {"", "the ", "these ", "those ", "its ", "all "};
    if (strncmp(s, " of ", 4) != 0) return false;
    s += 4;
    for (size_t i = 0; i < sizeof fillers / sizeof fillers[0]; i++) {
        size_t n = strlen(fillers[i]);
        if (strncmp(s, fillers[i], n) == 0 && isdigit((unsigned char)s[n])) return true;
    }
    return false;
}

/* The next number at or after *p in text ("0.36" of "was 0.36."), sign
 * aside: its start, length and kind; false when there is none. A number
 * glued to a letter, '_' or a dot on its left, or running on into another
 * dot, an exponent or a letter ("v1.2.3", "1.5e-9", "d_16", "2l"), is part
 * of a name, not a number. */
static bool next_number(const char *text, const char **p, const char **start, size_t *len, num_kind *kind) {
    const char *s = *p;
    while (*s) {
        if (!isdigit((unsigned char)*s)) {
            s++;
            continue;
        }
        const char *a = s;
        bool decimal = false;
        while (isdigit((unsigned char)*s)) s++;
        if (*s == '.' && isdigit((unsigned char)s[1])) {
            decimal = true;
            s++;
            while (isdigit((unsigned char)*s)) s++;
        }
        bool glued = a > text && (a[-1] == '.' || a[-1] == '_' || isalpha((unsigned char)a[-1]));
        bool more = (*s == '.' && isdigit((unsigned char)s[1])) || isalpha((unsigned char)*s) || *s == '_';
        if (!glued && !more) {
            *p = s;
            *start = a;
            *len = (size_t)(s - a);
            const char *after = s;
            while (*after == ' ') after++;
            *kind = decimal ? NUM_DECIMAL : *after == '%' ? NUM_PERCENT : counts_of(s) ? NUM_COUNT : NUM_WHOLE;
            return true;
        }
        while (isalnum((unsigned char)*s) || *s == '_' || (*s == '.' && isdigit((unsigned char)s[1]))) s++;
    }
    *p = s;
    return false;
}

static int decimals_of(const char *n, size_t len) {
    const char *dot = memchr(n, '.', len);
    return dot ? (int)(len - (size_t)(dot + 1 - n)) : 0;
}

static double value_of(const char *n, size_t len) {
    char buf[64];
    snprintf(buf, sizeof buf, "%.*s", (int)len, n);
    return strtod(buf, NULL);
}

/* Whether the view's text shows the figure q (len chars): a number in it
 * with at least as many decimals that rounds to q. */
static bool drawn(const char *text, const char *q, size_t len) {
    int dq = decimals_of(q, len);
    double want = value_of(q, len), tol = 0.5 * pow(10, -dq) + 1e-9;
    const char *p = text, *a;
    size_t n;
    num_kind k;
    while (next_number(text, &p, &a, &n, &k))
        if (decimals_of(a, n) >= dq && fabs(value_of(a, n) - want) <= tol) return true;
    return false;
}

/* Whether `list` (an expect: value, or all the narration) has the figure q,
 * as written, as a number of its own (signs aside). */
static bool listed(const char *list, const char *q, size_t len) {
    const char *p = list, *a;
    size_t n;
    num_kind k;
    while (next_number(list, &p, &a, &n, &k))
        if (n == len && memcmp(a, q, len) == 0) return true;
    return false;
}

/* Whether the step's unchecked: key excuses the figure q. */
static bool excused(const char *unchecked, const char *q, size_t len) {
    const char *u = unchecked, *fig, *why;
    size_t fn, wn;
    while (ts_lesson_unchecked_next(&u, &fig, &fn, &why, &wn)) {
        if (fn > 0 && fig[0] == '-') fig++, fn--;
        if (fn == len && memcmp(fig, q, len) == 0) return true;
    }
    return false;
}

/* Whether any of the step's expect: items gives the figure q. */
static bool expected(const ts_lesson_step *st, const char *q, size_t len) {
    for (int k = 0; k < st->n_keys; k++)
        if (strcmp(st->keys[k].key, "expect") == 0 && listed(st->keys[k].value, q, len)) return true;
    return false;
}

typedef struct quotes {
    const ts_lesson *l;
    const ts_lesson_step *st;
    int step;
    const char *view;      /* the texts the view draws, a line each */
    const char *unchecked; /* the step's unchecked: value, or "" */
    ts_lesson_sink *sink;  /* NULL: stop at the first problem */
} quotes;

/* A problem at line: handed to the sink (and go on), or returned. */
#define QUOTE_PROBLEM(q, line, ...)                                                                                    \
    do {                                                                                                               \
        ts_status qs_ = ts_lesson_sink_take((q)->sink, ts_lesson_fail_at((q)->l, (line), __VA_ARGS__));                \
        if (qs_) return qs_;                                                                                           \
    } while (0)

static const char *const quote_kind[] = {"", "", " (a percentage)", " (a count)"};

static ts_status check_text(const quotes *q, const char *text, int line) {
    const char *p = text, *a;
    size_t n;
    num_kind k;
    while (next_number(text, &p, &a, &n, &k)) {
        if (k == NUM_WHOLE || drawn(q->view, a, n) || excused(q->unchecked, a, n)) continue;
        QUOTE_PROBLEM(q, line,
                      "step %d quotes %.*s%s, which its page does not draw (show it: a zoom:, a highlight:, a "
                      "caption: with an expect: item; or list it in unchecked: with the reason)",
                      q->step + 1, (int)n, a, quote_kind[k]);
    }
    return TS_OK;
}

/* Rows and columns named by index ("row 40", "rows 30 to 42", "column 9")
 * must carry that index on the page: a label "40" or "40 s". */
static bool word_at(const char *s, const char *w) {
    size_t n = strlen(w);
    return strncasecmp(s, w, n) == 0 && s[n] == ' ' && isdigit((unsigned char)s[n + 1]);
}

/* Whether s starts a whole number that ends there ("40" of "40 s", not
 * "2i" nor "26.5"). */
static bool whole_at(const char *s) {
    if (!isdigit((unsigned char)*s)) return false;
    while (isdigit((unsigned char)*s)) s++;
    return !isalnum((unsigned char)*s) && *s != '_' && !(*s == '.' && isdigit((unsigned char)s[1]));
}

/* Whether the whole number at s goes on a list: ", " or " and " follows
 * ("32, 34 and 36"), where "10, 112 for column 20" has no list. */
static bool listed_on(const char *s) {
    while (isdigit((unsigned char)*s)) s++;
    return (strncmp(s, ", ", 2) == 0 && whole_at(s + 2)) || (strncmp(s, " and ", 5) == 0 && whole_at(s + 5));
}

static bool labels_index(const char *view, long i) {
    const char *p = view, *a;
    size_t n;
    num_kind k;
    while (next_number(view, &p, &a, &n, &k))
        if (decimals_of(a, n) == 0 && value_of(a, n) == (double)i) return true;
    return false;
}

static ts_status check_names(const quotes *q, const char *text, int line) {
    static const char *const words[] = {"rows", "row", "columns", "column", "cols", "col"};
    for (const char *s = text; *s; s++) {
        if (s > text && isalpha((unsigned char)s[-1])) continue;
        for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
            if (!word_at(s, words[w])) continue;
            const char *t = s + strlen(words[w]) + 1;
            if (!whole_at(t)) break; /* "column 2i", "row 0.5": not an index */
            /* the index, then an end of a range: "30 to 42", "30-42", "32, 34 and 36" */
            for (;;) {
                char *end;
                long i = strtol(t, &end, 10);
                if (!labels_index(q->view, i))
                    QUOTE_PROBLEM(q, line,
                                  "step %d names %s %ld, which its page does not label with its index (frame it "
                                  "with highlight:, or zoom: on it)",
                                  q->step + 1, words[w][0] == 'r' ? "row" : "column", i);
                t = end;
                if (strncmp(t, " to ", 4) == 0 && whole_at(t + 4)) t += 4;
                else if (strncmp(t, " and ", 5) == 0 && whole_at(t + 5)) t += 5;
                else if (strncmp(t, ", ", 2) == 0 && whole_at(t + 2) && listed_on(t + 2)) t += 2;
                else if (t[0] == '-' && whole_at(t + 1)) t += 1;
                else break;
            }
            s = t - 1;
            break;
        }
    }
    return TS_OK;
}

static ts_status check_narration(const quotes *q, const ts_lesson_narration *nar, ts_text_buf *all) {
    for (int b = 0; b < nar->n_blocks; b++) {
        const ts_lesson_block *blk = &nar->blocks[b];
        if (blk->kind == TS_LESSON_CODE_BLOCK) continue;
        ts_text_buf t = {0};
        for (int r = 0; r < blk->n_runs; r++) {
            /* inline code is a name from code, not a figure; a space keeps runs apart */
            ts_text_buf_str(&t, blk->runs[r].style & TS_LESSON_CODE ? " " : blk->runs[r].text);
        }
        char *text = ts_text_buf_take(&t);
        if (!text) return ts_fail(TS_ERR_NOMEM, "lesson: out of memory");
        int line = blk->line > 0 ? blk->line : q->st->line;
        ts_status st = check_text(q, text, line);
        if (!st) st = check_names(q, text, line);
        ts_text_buf_str(all, text);
        ts_text_buf_str(all, "\n");
        free(text);
        if (st) return st;
    }
    return TS_OK;
}

/* A caption's figures are the run's: each one an expect: figure. */
static ts_status check_caption(const quotes *q) {
    const char *cap = ts_lesson_step_value(q->st, "caption");
    if (!cap) return TS_OK;
    const char *p = cap, *a;
    size_t n;
    num_kind k;
    while (next_number(cap, &p, &a, &n, &k))
        if (k != NUM_WHOLE && !expected(q->st, a, n))
            QUOTE_PROBLEM(q, ts_lesson_step_line(q->st, "caption"),
                          "caption: %.*s is none of the step's expect: figures (a caption shows the run's "
                          "numbers: add an expect: item that checks it)",
                          (int)n, a);
    return TS_OK;
}

/* An exception that no longer matches the narration is stale. */
static ts_status check_stale(const quotes *q, const char *said) {
    const char *u = q->unchecked, *fig, *why;
    size_t fn, wn;
    int line = ts_lesson_step_line(q->st, "unchecked");
    while (ts_lesson_unchecked_next(&u, &fig, &fn, &why, &wn)) {
        const char *f = fig;
        size_t len = fn;
        if (len > 0 && f[0] == '-') f++, len--;
        if (!listed(said, f, len))
            QUOTE_PROBLEM(q, line, "unchecked: %.*s is not quoted by the step's narration", (int)fn, fig);
    }
    return TS_OK;
}

ts_status ts_lesson_page_check_quotes(const ts_lessonrun *r, int step, ts_lesson_sink *sink) {
    const ts_lesson *l = r->lesson;
    if (step < 0 || step >= l->n_steps) return ts_fail(TS_ERR_ARG, "lesson: no step %d", step + 1);
    const ts_lesson_step *st = &l->steps[step];
    ts_lesson_page *p;
    ts_status s = ts_lesson_page_build(&p, r, step);
    if (s) return ts_lesson_sink_take(sink, s);
    char *view = NULL;
    /* at one pixel a point, the page's own size (the viewer's, a PDF's): a
     * cell's number too small to print there is not drawn, whatever an
     * export's --scale would print */
    s = ts_lesson_page_view_text(p, 1.0, &view);
    ts_lesson_page_free(p);
    if (s) return ts_lesson_sink_take(sink, s);
    const char *unchecked = ts_lesson_step_value(st, "unchecked");
    quotes q = {.l = l, .st = st, .step = step, .view = view, .unchecked = unchecked ? unchecked : "", .sink = sink};
    ts_text_buf all = {0};
    if (step == 0) s = check_narration(&q, &l->intro, &all);
    if (!s) s = check_narration(&q, &st->narration, &all);
    if (!s) s = check_caption(&q);
    char *said = ts_text_buf_take(&all);
    if (!s && !said) s = ts_fail(TS_ERR_NOMEM, "lesson: out of memory");
    if (!s) s = check_stale(&q, said);
    free(said);
    free(view);
    return s;
}
