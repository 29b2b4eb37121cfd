/* lesson_quotes: a number the narration quotes is one the learner can find
 * on the page (pages.h, ts_lesson_page_check_quotes; lessons/README.md,
 * "Quoted numbers").
 *
 * A page that says "0.36 on the previous character" beside a picture that
 * prints no 0.36 asks the reader to trust it. So every figure of a step's
 * narration must be drawn on its page, or excused by the step's
 * `unchecked:` key with a reason. A figure is any number the narration
 * writes, with three exceptions:
 *   - a name's number: the number after a word that names a part or a
 *     place (layer 1, head 3, lesson 13, page 2, seed 001; "heads 2 and 1"
 *     and "layers 0 to 3" name both), not a quantity;
 *   - a row or column index (row 40, columns 8 and 9): checked apart, the
 *     page must label it (check_names);
 *   - a whole number inside a formula ($1/(t + 1)$): a constant of the
 *     formula, not a measurement (a decimal there is still a figure);
 * digits glued to a name (layers.0, d_k, 2i) and inline code are no
 * numbers at all. So counts, sizes, steps, positions, percentages and
 * decimals are quotes: "2 layers", "every 100 steps", "at step 1100",
 * "position 24", "52 of the 63 rows", 0.36, 52%.
 *
 * Drawn means some number among the texts the view draws (its cells,
 * labels, ticks, zoom table, legend, statistics, the step's caption: every
 * text the renderer hands to the text probe) rounds to the quote: a drawn
 * number with at least the quote's decimals within half a unit of its last
 * digit (0.95 matches a drawn 0.953 or 0.95, not 0.96 nor 0.9); a whole
 * number is matched by the same whole number only (1100 is not read off a
 * tick 1000). Signs are ignored (a cell drawn as -0.05 shows 0.05). The
 * page is read as drawn at one pixel a point, whatever the export's scale:
 * the size the viewer and a PDF draw it, so --scale cannot change the
 * verdict.
 *
 * A count "N of M" is checked against the step's expect: items too: when
 * one counts N rows (an argmax or max item), its range must hold M rows.
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
    NUM_WHOLE,   /* a count, a size, a step, a position: 64, 1100 */
    NUM_DECIMAL, /* 0.36 */
    NUM_PERCENT, /* 52% */
    NUM_COUNT,   /* the 52 of "52 of 63" */
    NUM_TOTAL,   /* the 63 of "52 of 63" */
    NUM_NAME,    /* layer 1, head 3, lesson 13: a name, not a quote */
    NUM_INDEX,   /* row 40, column 9: must be labelled (check_names), not a quote */
    NUM_FORMULA, /* a whole number in a formula: its constant, not a quote */
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
static bool next_number(const char *text, const char **p, const char **start, size_t *len, num_kind *kind,
                        bool thousands) {
    const char *s = *p;
    while (*s) {
        if (!isdigit((unsigned char)*s)) {
            s++;
            continue;
        }
        const char *a = s;
        bool decimal = false;
        while (isdigit((unsigned char)*s)) s++;
        /* thousands in prose: "3,152,384" is one number (not in an expect: item's "at 0,40,290") */
        while (thousands && s[0] == ',' && isdigit((unsigned char)s[1]) && isdigit((unsigned char)s[2]) &&
               isdigit((unsigned char)s[3]) && !isdigit((unsigned char)s[4]))
            s += 4;
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
    size_t k = 0;
    for (size_t i = 0; i < len && k + 1 < sizeof buf; i++)
        if (n[i] != ',') buf[k++] = n[i]; /* "3,152,384": thousands */
    buf[k] = '\0';
    return strtod(buf, NULL);
}

/* Whether the view's text shows the figure q (len chars): a number in it
 * with at least as many decimals that rounds to q; when `exact` (a whole
 * count or size), the same number. */
static bool drawn(const char *text, const char *q, size_t len, bool exact) {
    int dq = decimals_of(q, len);
    double want = value_of(q, len), tol = exact ? 1e-9 : 0.5 * pow(10, -dq) + 1e-9;
    const char *p = text, *a;
    size_t n;
    num_kind k;
    while (next_number(text, &p, &a, &n, &k, false))
        if (decimals_of(a, n) >= dq && fabs(value_of(a, n) - want) <= tol) return true;
    return false;
}

/* Whether `list` (an expect: value, or all the narration) has the figure q,
 * as written, as a number of its own (signs aside). */
static bool listed(const char *list, const char *q, size_t len, bool thousands) {
    const char *p = list, *a;
    size_t n;
    num_kind k;
    while (next_number(list, &p, &a, &n, &k, thousands))
        if (n == len && memcmp(a, q, len) == 0) return true;
    return false;
}

/* Whether the setup the step's view runs sets the whole number q (a
 * caption's "positions 33 to 63" of `positions: 33-63`): the run did what
 * its setup says, so a caption may show it. Only `positions`, `steps`,
 * `every`, `top`, `tokens`, the settings a figure's reader needs and no
 * expect: item can read. */
static bool set_by_setup(const ts_lesson *l, const ts_lesson_step *st, const char *q, size_t len) {
    static const char *const keys[] = {"positions", "steps", "every", "top", "tokens"};
    const char *run = st->run ? st->run : "main";
    for (int i = 0; i < l->n_setups; i++) {
        if (strcmp(l->setups[i].name, run) != 0) continue;
        for (int k = 0; k < l->setups[i].n_keys; k++)
            for (size_t w = 0; w < sizeof keys / sizeof keys[0]; w++)
                if (strcmp(l->setups[i].keys[k].key, keys[w]) == 0 && listed(l->setups[i].keys[k].value, q, len, false))
                    return true;
    }
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
        if (strcmp(st->keys[k].key, "expect") == 0 && listed(st->keys[k].value, q, len, false)) return true;
    return false;
}

typedef struct quotes {
    const ts_lessonrun *r;
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

static const char *const quote_kind[] = {"", "", " (a percentage)", " (a count)", " (a count's total)"};

/* Words whose number names a thing ("layer 1", "lesson 13") rather than
 * measures it, and words whose number is a row or column index. */
static const char *const name_words[] = {"lesson", "lessons", "page",  "pages",   "layer",  "layers",
                                         "head",   "heads",   "seed",  "seeds",   "figure", "figures",
                                         "chapter", "chapters", "verse", "verses", "part",  "parts"};
static const char *const index_words[] = {"row", "rows", "column", "columns", "col", "cols"};

/* Whether the word that ends just before `end` (in text) is one of words. */
static bool word_before(const char *text, const char *end, const char *const *words, size_t n_words) {
    const char *b = end;
    while (b > text && isalpha((unsigned char)b[-1])) b--;
    size_t len = (size_t)(end - b);
    for (size_t i = 0; len > 0 && i < n_words; i++)
        if (strlen(words[i]) == len && strncasecmp(b, words[i], len) == 0) return true;
    return false;
}

/* Whether the text between two numbers joins them into one list or range
 * ("2 and 1", "0, 1", "30 to 42", "30-42"), so the second is named as the first. */
static bool joins(const char *from, const char *to) {
    static const char *const glue[] = {" and ", ", ", ", and ", " or ", " to ", "-", "\xe2\x80\x93"};
    size_t n = (size_t)(to - from);
    for (size_t i = 0; i < sizeof glue / sizeof glue[0]; i++)
        if (strlen(glue[i]) == n && strncmp(from, glue[i], n) == 0) return true;
    return false;
}

/* What the number at a (len chars, next_number's kind k) is in text: a
 * quote, or a name, an index, a formula's constant. `math` (or NULL) has
 * a byte for each of text's, 1 where it is inside a formula; prev and prev_end are the number before and
 * where it ended (prev NUM_WHOLE with prev_end NULL: none). */
static num_kind classify(const char *text, const char *math, const char *a, num_kind k, num_kind prev,
                         const char *prev_end) {
    if (k == NUM_DECIMAL || k == NUM_PERCENT) return k;
    if (math && math[a - text] == 1) return NUM_FORMULA;
    if (prev_end && prev == NUM_COUNT && strncmp(prev_end, " of ", 4) == 0) return NUM_TOTAL;
    if (prev_end && (prev == NUM_NAME || prev == NUM_INDEX) && joins(prev_end, a)) return prev;
    const char *w = a;
    if (w > text && w[-1] == ' ') w--;
    if (word_before(text, w, name_words, sizeof name_words / sizeof name_words[0])) return NUM_NAME;
    if (word_before(text, w, index_words, sizeof index_words / sizeof index_words[0])) return NUM_INDEX;
    return k;
}

/* The rows of the matrix a panel of the step draws (its tensor's last but
 * one dimension), or -1 when the run has no such step. */
static long panel_rows(const ts_lessonrun *r, const ts_lesson_step *st, bool right) {
    const char *run = right && st->compare_run ? st->compare_run : st->run;
    const char *name = right && st->compare_with ? st->compare_with : st->tensor;
    ts_trace *t = r ? ts_lessonrun_trace(r, run) : NULL;
    int64_t i = t ? ts_trace_find(t, name) : -1;
    if (i < 0) return -1;
    const ts_trace_step *s = ts_trace_step_at(t, i);
    return s->rank >= 2 ? (long)s->shape[s->rank - 2] : -1;
}

/* The rows an expect: count item covers ("rows 0-31 argmax offset 0 25":
 * 32; an item with no range: every row of the panel it reads), or -2 when
 * it is no count of rows (-1: not known). *count gets its count. */
static long rows_counted(const ts_lessonrun *r, const ts_lesson_step *st, const char *item, long *count) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", item);
    char *w[12];
    int n = 0;
    for (char *save = NULL, *t = strtok_r(buf, " ", &save); t && n < 12; t = strtok_r(NULL, " ", &save)) w[n++] = t;
    bool right = n > 0 && strcmp(w[0], "right") == 0;
    int i = right ? 1 : 0;
    if (n - i < 5 || strcmp(w[i], "rows") != 0) return -2;
    i++;
    if (strcmp(w[i], "head") == 0) i += 2;
    long a = -1, b = -1;
    if (i < n && sscanf(w[i], "%ld-%ld", &a, &b) == 2) i++;
    if (i >= n || (strcmp(w[i], "argmax") != 0 && strcmp(w[i], "max") != 0)) return -2;
    *count = strtol(w[n - 1], NULL, 10);
    return a >= 0 && b >= a ? b - a + 1 : panel_rows(r, st, right);
}

/* Whether an expect: count item of the step covers a range of M rows. */
static bool counted_over(const ts_lessonrun *r, const ts_lesson_step *st, long M) {
    for (int k = 0; k < st->n_keys; k++) {
        if (strcmp(st->keys[k].key, "expect") != 0) continue;
        char items[1024];
        snprintf(items, sizeof items, "%s", st->keys[k].value);
        for (char *save = NULL, *it = strtok_r(items, ";", &save); it; it = strtok_r(NULL, ";", &save)) {
            while (*it == ' ') it++;
            long count;
            if (rows_counted(r, st, it, &count) == M) return true;
        }
    }
    return false;
}

/* A count "N of M": when an expect: item of the step counts N rows over a
 * range, the range holds M rows. */
static ts_status check_count(const quotes *q, const char *a, size_t n, int line) {
    const char *m = a + n + 4; /* past " of " */
    while (!isdigit((unsigned char)*m)) m++;
    long N = (long)value_of(a, n), M = strtol(m, NULL, 10);
    char wrong[1024] = ""; /* the first item that counts N over another total */
    long wrong_rows = 0;
    for (int k = 0; k < q->st->n_keys; k++) {
        if (strcmp(q->st->keys[k].key, "expect") != 0) continue;
        char items[1024];
        snprintf(items, sizeof items, "%s", q->st->keys[k].value);
        for (char *save = NULL, *it = strtok_r(items, ";", &save); it; it = strtok_r(NULL, ";", &save)) {
            while (*it == ' ') it++;
            long count, rows = rows_counted(q->r, q->st, it, &count);
            if (rows == -2 || count != N) continue;
            if (rows == -1 || rows == M) return TS_OK;
            if (!wrong[0]) snprintf(wrong, sizeof wrong, "%s", it), wrong_rows = rows;
        }
    }
    if (wrong[0])
        QUOTE_PROBLEM(q, line, "step %d says %ld of %ld, but its expect: item '%s' counts %ld of %ld rows", q->step + 1,
                      N, M, wrong, N, wrong_rows);
    return TS_OK;
}

static ts_status check_text(const quotes *q, const char *text, const char *math, int line) {
    const char *p = text, *a, *prev_end = NULL;
    size_t n;
    num_kind k, prev = NUM_WHOLE;
    while (next_number(text, &p, &a, &n, &k, true)) {
        k = classify(text, math, a, k, prev, prev_end);
        prev = k, prev_end = a + n;
        if (k == NUM_COUNT) TS_TRY(check_count(q, a, n, line));
        if (k == NUM_NAME || k == NUM_INDEX || k == NUM_FORMULA) continue;
        if (drawn(q->view, a, n, k == NUM_WHOLE || k == NUM_COUNT || k == NUM_TOTAL) || excused(q->unchecked, a, n))
            continue;
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
    while (next_number(view, &p, &a, &n, &k, false))
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
        /* the block's text, and beside it a byte for each of its bytes: 1 inside a formula, 2 outside */
        ts_text_buf t = {0}, m = {0};
        for (int r = 0; r < blk->n_runs; r++) {
            /* inline code is a name from code, not a figure; a space keeps runs apart */
            const char *run = blk->runs[r].style & TS_LESSON_CODE ? " " : blk->runs[r].text;
            ts_text_buf_str(&t, run);
            for (const char *c = run; *c; c++) ts_text_buf_add(&m, blk->runs[r].style & TS_LESSON_MATH ? "\1" : "\2", 1);
        }
        char *text = ts_text_buf_take(&t), *math = ts_text_buf_take(&m);
        if (!text || (!math && text[0])) {
            free(text);
            free(math);
            return ts_fail(TS_ERR_NOMEM, "lesson: out of memory");
        }
        int line = blk->line > 0 ? blk->line : q->st->line;
        ts_status st = check_text(q, text, math, line);
        if (!st) st = check_names(q, text, line);
        ts_text_buf_str(all, text);
        ts_text_buf_str(all, "\n");
        free(text);
        free(math);
        if (st) return st;
    }
    return TS_OK;
}

/* A caption's figures are the run's: each one an expect: figure. */
static ts_status check_caption(const quotes *q) {
    const char *cap = ts_lesson_step_value(q->st, "caption");
    if (!cap) return TS_OK;
    const char *p = cap, *a, *prev_end = NULL;
    size_t n;
    num_kind k, prev = NUM_WHOLE;
    while (next_number(cap, &p, &a, &n, &k, false)) {
        k = classify(cap, NULL, a, k, prev, prev_end);
        prev = k, prev_end = a + n;
        if (k == NUM_COUNT) TS_TRY(check_count(q, a, n, ts_lesson_step_line(q->st, "caption")));
        if (k == NUM_TOTAL && counted_over(q->r, q->st, (long)value_of(a, n))) continue; /* the range of a count item */
        if (k == NUM_WHOLE && set_by_setup(q->l, q->st, a, n)) continue;
        if (k != NUM_NAME && k != NUM_INDEX && !expected(q->st, a, n))
            QUOTE_PROBLEM(q, ts_lesson_step_line(q->st, "caption"),
                          "caption: %.*s is none of the step's expect: figures (a caption shows the run's "
                          "numbers: add an expect: item that checks it)",
                          (int)n, a);
    }
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
        if (!listed(said, f, len, true))
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
    quotes q = {.r = r, .l = l, .st = st, .step = step, .view = view, .unchecked = unchecked ? unchecked : "", .sink = sink};
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
