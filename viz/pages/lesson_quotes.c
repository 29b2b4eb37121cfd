/* lesson_quotes: a number the narration quotes is one the learner can find
 * on the page (pages.h, ts_lesson_page_check_quotes).
 *
 * A page that says "0.36 on the previous character" beside a picture that
 * prints no 0.36 asks the reader to trust it. So every decimal number of a
 * step's narration (a figure: "0.36", "4.47"; whole numbers are counts,
 * steps and positions, and are left alone) must be one of
 *   - drawn by the view: some number its text shows rounds to it (a cell
 *     value 0.357 shows 0.36; a tick label 0.35 shows 0.35),
 *   - a figure or level in the step's `expect:` items, checked against the run,
 *   - listed in the step's `unchecked:` key, the explicit exceptions
 *     (arithmetic such as 1/41 = 0.024), each of which must be quoted.
 * Signs are ignored (a cell drawn as −0.05 shows 0.05). Inline code is not
 * narration about the picture and is skipped. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/pages.h"

/* The next decimal number at or after *p in text ("0.36" of "was 0.36."): its
 * start and length; false when there is none. A number glued to a letter or
 * a dot on its left, or running on into another dot or an exponent
 * ("v1.2.3", "1.5e-9"), is not a figure. */
static bool next_decimal(const char *text, const char **p, const char **start, size_t *len) {
    const char *s = *p;
    while (*s) {
        if (!isdigit((unsigned char)*s)) {
            s++;
            continue;
        }
        const char *a = s;
        while (isdigit((unsigned char)*s)) s++;
        if (*s == '.' && isdigit((unsigned char)s[1])) {
            s++;
            while (isdigit((unsigned char)*s)) s++;
            bool glued = a > text && (a[-1] == '.' || a[-1] == '_' || isalpha((unsigned char)a[-1]));
            bool more = (*s == '.' && isdigit((unsigned char)s[1])) || *s == 'e' || *s == 'E';
            if (!glued && !more) {
                *p = s;
                *start = a;
                *len = (size_t)(s - a);
                return true;
            }
        }
        while (isdigit((unsigned char)*s) || (*s == '.' && isdigit((unsigned char)s[1]))) s++;
    }
    *p = s;
    return false;
}

static int decimals_of(const char *n, size_t len) {
    const char *dot = memchr(n, '.', len);
    return dot ? (int)(len - (size_t)(dot + 1 - n)) : 0;
}

/* Whether the view's text shows the figure q (len chars): a number in it with
 * at least as many decimals that rounds to q. */
static bool drawn(const char *text, const char *q, size_t len) {
    char buf[64];
    snprintf(buf, sizeof buf, "%.*s", (int)len, q);
    double want = strtod(buf, NULL), tol = 0.5 * pow(10, -decimals_of(q, len)) + 1e-9;
    int dq = decimals_of(q, len);
    const char *p = text, *a;
    size_t n;
    while (next_decimal(text, &p, &a, &n)) {
        snprintf(buf, sizeof buf, "%.*s", (int)n, a);
        if (decimals_of(a, n) >= dq && fabs(strtod(buf, NULL) - want) <= tol) return true;
    }
    return false;
}

/* Whether `list` (an expect: or unchecked: value) has the figure q as a word
 * of its own (signs aside). */
static bool listed(const char *list, const char *q, size_t len) {
    const char *p = list, *a;
    size_t n;
    while (next_decimal(list, &p, &a, &n))
        if (n == len && memcmp(a, q, len) == 0) return true;
    return false;
}

typedef struct quotes {
    const ts_lesson *l;
    const ts_lesson_step *st;
    int step;
    const char *view;      /* the view's text */
    const char *unchecked; /* the step's unchecked: value, or "" */
} quotes;

static ts_status check_text(const quotes *q, const char *text, int line) {
    const char *p = text, *a;
    size_t n;
    while (next_decimal(text, &p, &a, &n)) {
        bool ok = drawn(q->view, a, n) || listed(q->unchecked, a, n);
        for (int k = 0; k < q->st->n_keys && !ok; k++)
            if (strcmp(q->st->keys[k].key, "expect") == 0) ok = listed(q->st->keys[k].value, a, n);
        if (!ok)
            return ts_lesson_fail_at(q->l, line,
                                     "step %d quotes %.*s, which its page does not draw and no expect: item checks "
                                     "(show it, check it with expect:, or list it in unchecked:)",
                                     q->step + 1, (int)n, a);
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
        ts_status st = check_text(q, text, blk->line > 0 ? blk->line : q->st->line);
        ts_text_buf_str(all, text);
        ts_text_buf_str(all, "\n");
        free(text);
        if (st) return st;
    }
    return TS_OK;
}

ts_status ts_lesson_page_check_quotes(const ts_lessonrun *r, int step, double scale) {
    const ts_lesson *l = r->lesson;
    if (step < 0 || step >= l->n_steps) return ts_fail(TS_ERR_ARG, "lesson: no step %d", step + 1);
    const ts_lesson_step *st = &l->steps[step];
    ts_lesson_page *p;
    TS_TRY(ts_lesson_page_build(&p, r, step));
    char *view = NULL;
    ts_status s = ts_lesson_page_view_text(p, scale, &view);
    ts_lesson_page_free(p);
    if (s) return s;
    quotes q = {.l = l, .st = st, .step = step, .view = view, .unchecked = ""};
    int unchecked_line = st->line;
    for (int k = 0; k < st->n_keys; k++)
        if (strcmp(st->keys[k].key, "unchecked") == 0) q.unchecked = st->keys[k].value, unchecked_line = st->keys[k].line;
    ts_text_buf all = {0};
    if (step == 0) s = check_narration(&q, &l->intro, &all);
    if (!s) s = check_narration(&q, &st->narration, &all);
    char *said = ts_text_buf_take(&all);
    if (!s && !said) s = ts_fail(TS_ERR_NOMEM, "lesson: out of memory");
    /* an exception that no longer matches the narration is stale: say so */
    const char *u = q.unchecked, *a;
    size_t n;
    while (!s && next_decimal(q.unchecked, &u, &a, &n))
        if (!listed(said, a, n))
            s = ts_lesson_fail_at(l, unchecked_line, "unchecked: %.*s is not quoted by the step's narration", (int)n, a);
    free(said);
    free(view);
    return s;
}
