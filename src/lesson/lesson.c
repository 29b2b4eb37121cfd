/* lesson: the parser. md4c walks the Markdown; `tscope` blocks are read
 * straight from the source lines so every key keeps its line number (md4c
 * reports no positions, but its text pointers point into our buffer, which is
 * how narration and fences are placed on lines). */
#include "tscope/lesson.h"

#include <errno.h>
#include <md4c.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/core.h"
#include "lesson_parser.h"

/* Lessons are a few kilobytes; anything near this is not a lesson. */
#define MAX_LESSON_BYTES (16u << 20)

/* ---------------------------------------------------------------- strings */

/* Grow the array *arr_ptr (of *n items of `size` bytes) by one zeroed item
 * and return it; NULL when out of memory. The pointer is moved with memcpy so
 * one helper serves arrays of every type without aliasing tricks. */
void *lp_grow(void *arr_ptr, int *n, size_t size) {
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

ts_lesson_narration *lp_narration(parser *p, int which) {
    return which < 0 ? &p->lesson->intro : &p->lesson->steps[which].narration;
}

#define MAX_PROBLEMS 12 /* listed; more are counted */

static void add_problem(parser *p, int line, const char *msg) {
    if (p->n_problems++ >= MAX_PROBLEMS) return;
    if (p->problems.len) ts_text_buf_str(&p->problems, "\n");
    char head[64];
    snprintf(head, sizeof head, ":%d: ", line);
    ts_text_buf_str(&p->problems, p->lesson->path);
    ts_text_buf_str(&p->problems, head);
    ts_text_buf_str(&p->problems, msg);
}

ts_status lp_fail_line(parser *p, int line, const char *fmt, ...) {
    if (p->st != TS_OK) return p->st;
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    add_problem(p, line, msg);
    p->st = ts_fail(TS_ERR_FORMAT, "%s:%d: %s", p->lesson->path, line, msg);
    return p->st;
}

ts_status lp_problem(parser *p, int line, const char *fmt, ...) {
    if (p->st != TS_OK) return TS_ERR_FORMAT;
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    add_problem(p, line, msg);
    return TS_ERR_FORMAT;
}

/* The parse's answer: every problem found, one a line, when there are any. */
static ts_status problems_status(parser *p, ts_status st) {
    if (st == TS_ERR_NOMEM || p->n_problems == 0 || p->problems.oom) return st;
    if (p->n_problems > MAX_PROBLEMS) {
        char more[64];
        snprintf(more, sizeof more, "\n(and %d more)", p->n_problems - MAX_PROBLEMS);
        ts_text_buf_str(&p->problems, more);
    }
    return ts_fail(TS_ERR_FORMAT, "%s", p->problems.s ? p->problems.s : "");
}

ts_status lp_oom(parser *p) {
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
    if (!p->line_start) return lp_oom(p);
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
int lp_line_of(const parser *p, size_t off) {
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
void lp_line_text(const parser *p, int line, const char **s, size_t *n) {
    size_t beg = p->line_start[line - 1], end = p->line_start[line];
    while (end > beg && is_eol(p->text[end - 1])) end--;
    *s = p->text + beg;
    *n = end - beg;
}

/* Offset just past line `line`'s text (before its line break). */
static size_t line_end(const parser *p, int line) {
    const char *s;
    size_t n;
    lp_line_text(p, line, &s, &n);
    return (size_t)(s - p->text) + n;
}

void lp_move_cursor_past(parser *p, int line) {
    size_t end = line_end(p, line);
    if (end > p->cursor) p->cursor = end;
}

long lp_doc_offset(const parser *p, const char *s) {
    if (s < p->text || s >= p->text + p->len) return -1;
    return (long)(s - p->text);
}

bool lp_blank_line(const parser *p, int line) {
    const char *s;
    size_t n;
    lp_line_text(p, line, &s, &n);
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t') return false;
    return true;
}

/* Length of the fence run of `c` opening this line (up to 3 spaces first), 0 if none. */
static size_t fence_run(const parser *p, int line, char c, size_t *after) {
    const char *s;
    size_t n, i = 0;
    lp_line_text(p, line, &s, &n);
    while (i < n && i < 3 && s[i] == ' ') i++;
    size_t start = i;
    while (i < n && s[i] == c) i++;
    if (after) *after = i;
    return i - start >= 3 ? i - start : 0;
}

bool lp_is_opening_fence(const parser *p, int line, char c) { return fence_run(p, line, c, NULL) > 0; }

/* The line closing a fence opened on `open` (CommonMark: same character, at
 * least as long, nothing after but spaces), or 0 when it runs to the end. */
int lp_closing_fence(const parser *p, int open, char c) {
    size_t want = fence_run(p, open, c, NULL);
    for (int line = open + 1; line <= p->n_lines; line++) {
        size_t after, run = fence_run(p, line, c, &after);
        if (run < want || run == 0) continue;
        const char *s;
        size_t n;
        lp_line_text(p, line, &s, &n);
        while (after < n && (s[after] == ' ' || s[after] == '\t')) after++;
        if (after == n) return line;
    }
    return 0;
}

/* ------------------------------------------------------------- afterwards */

/* Add source lines [first, last] to a narration's Markdown, blank lines at the
 * ends left out; pieces are joined by a blank line. */
static ts_status add_source(parser *p, ts_text_buf *b, int first, int last) {
    while (first <= last && lp_blank_line(p, first)) first++;
    while (last >= first && lp_blank_line(p, last)) last--;
    if (first > last) return TS_OK;
    if (b->len) ts_text_buf_str(b, "\n\n");
    size_t beg = p->line_start[first - 1], end = p->line_start[last];
    while (end > beg && is_eol(p->text[end - 1])) end--;
    ts_text_buf_add(b, p->text + beg, end - beg);
    return b->oom ? lp_oom(p) : TS_OK;
}

static ts_status collect_sources(parser *p) {
    ts_lesson *l = p->lesson;
    int n_nar = l->n_steps + 1;
    ts_text_buf *bufs = calloc((size_t)n_nar, sizeof *bufs);
    if (!bufs) return lp_oom(p);
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
        if (!s) lp_oom(p);
        lp_narration(p, k - 1)->source = s;
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
            if (ts_lesson_block_text(&nar->blocks[0], &st->title) != TS_OK) return lp_oom(p);
        } else if (!(st->title = strndup("", 0))) {
            return lp_oom(p);
        }
    }
    return TS_OK;
}

static int kv_line(const ts_lesson_kv *kvs, int n, const char *key, int fallback) {
    const ts_lesson_kv *kv = lp_find_kv(kvs, n, key);
    return kv ? kv->line : fallback;
}

/* Whether the setup's `without:` lists key. */
static bool leaves_out(const ts_lesson_setup *s, const char *key) {
    const ts_lesson_kv *w = lp_find_kv(s->keys, s->n_keys, "without");
    if (!w) return false;
    size_t n = strlen(key);
    for (const char *p = w->value; (p = strstr(p, key)) != NULL; p += n)
        if ((p == w->value || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' ')) return true;
    return false;
}

/* Rules that need the whole file: named runs exist, training keys go with
 * `command: train`, one input. */
static ts_status check_cross(parser *p) {
    ts_lesson *l = p->lesson;
    if (l->n_setups == 0) lp_problem(p, p->title_last, "no setup block: a lesson needs ```tscope setup");
    if (l->n_steps == 0) lp_problem(p, p->n_lines, "no step blocks: a lesson needs at least one ```tscope step");
    if (l->n_setups == 0 || l->n_steps == 0) return TS_OK;
    for (int r = 0; r < l->n_setups; r++) {
        const ts_lesson_setup *s = &l->setups[r];
        const char *cmd = ts_lesson_setup_get(l, r, "command");
        bool train = cmd && strcmp(cmd, "train") == 0;
        for (int i = 0; i < s->n_keys; i++) {
            if (lp_setup_key_train_only(s->keys[i].key) && !train)
                lp_problem(p, s->keys[i].line, "'%s' is a training key: the setup needs 'command: train'",
                                 s->keys[i].key);
        }
        const ts_lesson_kv *without = lp_find_kv(s->keys, s->n_keys, "without");
        if (without && r == 0)
            lp_problem(p, without->line, "'without:' goes in a named setup: it leaves out keys of the main one");
        for (int i = 0; without && i < s->n_keys; i++)
            if (leaves_out(s, s->keys[i].key))
                lp_problem(p, s->keys[i].line, "'%s' is both given and left out ('without:' on line %d)",
                                    s->keys[i].key, without->line);
        const ts_lesson_kv *trace = lp_find_kv(s->keys, s->n_keys, "trace");
        if (trace && s->n_keys > 1)
            lp_problem(p, trace->line, "a setup with 'trace:' shows that recorded trace: it takes no other key");
        if (trace && r == 0 && l->n_setups > 1)
            lp_problem(p, trace->line, "'trace:' goes in a named setup: the others would take its keys");
        if (train && !ts_lesson_setup_get(l, r, "task"))
            lp_problem(p, kv_line(s->keys, s->n_keys, "command", s->line), "a training setup needs 'task:'");
        if (ts_lesson_setup_get(l, r, "text") && ts_lesson_setup_get(l, r, "input")) {
            const ts_lesson_kv *kv = lp_find_kv(s->keys, s->n_keys, "input");
            if (!kv) kv = lp_find_kv(s->keys, s->n_keys, "text");
            lp_problem(p, kv ? kv->line : s->line, "give 'text' or 'input', not both");
        }
    }
    for (int i = 0; i < l->n_steps; i++) {
        const ts_lesson_step *st = &l->steps[i];
        if (ts_lesson_find_setup(l, st->run) < 0)
            lp_problem(p, kv_line(st->keys, st->n_keys, "run", st->line),
                             "no setup named '%s' (add a ```tscope setup %s block)", st->run, st->run);
        if (st->compare_run && ts_lesson_find_setup(l, st->compare_run) < 0)
            lp_problem(p, kv_line(st->keys, st->n_keys, "compare-run", st->line),
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
    free(l->summary);
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

/* Whether line is "---" (spaces after it allowed): a front matter's fence. */
static bool front_fence(const parser *p, int line) {
    const char *s;
    size_t n;
    lp_line_text(p, line, &s, &n);
    while (n > 3 && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
    return n == 3 && memcmp(s, "---", 3) == 0;
}

/* An optional front matter: a "---" first line, `key: value` lines, a
 * closing "---". Sets p->body to the line after it. */
static ts_status front_matter(parser *p) {
    p->body = 1;
    if (p->n_lines < 1 || p->len == 0 || !front_fence(p, 1)) return TS_OK;
    int close = 2;
    while (close <= p->n_lines && !front_fence(p, close)) close++;
    if (close > p->n_lines)
        return lp_fail_line(p, 1, "the front matter opened by '---' on line 1 is not closed: end it with a '---' line "
                                  "before the '# Title'");
    p->body = close + 1;
    return lp_front_matter(p, 2, close - 1);
}

static ts_status parse_document(parser *p) {
    ts_lesson *l = p->lesson;
    if (index_lines(p) != TS_OK) return p->st;
    if (front_matter(p) != TS_OK) return p->st;
    int first = p->body;
    while (first <= p->n_lines && lp_blank_line(p, first)) first++;
    if (first > p->n_lines)
        return lp_fail_line(p, 1, "empty lesson: it needs a '# Title', a ```tscope setup block and ```tscope step blocks");
    MD_PARSER md = {0};
    md.flags = MD_FLAG_LATEXMATHSPANS | MD_FLAG_NOHTML;
    md.enter_block = lp_on_enter_block;
    md.leave_block = lp_on_leave_block;
    md.enter_span = lp_on_enter_span;
    md.leave_span = lp_on_leave_span;
    md.text = lp_on_text;
    /* md4c reads what follows the front matter; its pointers still point into p->text */
    size_t body = p->body <= p->n_lines ? p->line_start[p->body - 1] : p->len;
    int rc = md_parse(p->text + body, (MD_SIZE)(p->len - body), &md, p);
    if (p->st != TS_OK) return p->st;
    if (rc != 0) return lp_oom(p);
    if (p->title_state == 1) lp_end_title(p);
    l->title = ts_text_buf_take(&p->title);
    if (!l->title) return lp_oom(p);
    size_t n = strlen(l->title);
    while (n && l->title[n - 1] == ' ') l->title[--n] = '\0';
    if (n == 0) return lp_fail_line(p, first, "the title heading is empty");
    if (check_cross(p) != TS_OK) return p->st;
    if (collect_sources(p) != TS_OK) return p->st;
    return step_titles(p);
}

ts_status ts_lesson_parse(ts_lesson *l, const char *path, const char *text, size_t len) {
    memset(l, 0, sizeof *l);
    if (!path) path = "<lesson>";
    l->path = strndup(path, strlen(path));
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
    ts_status st = problems_status(&p, parse_document(&p));
    free(p.line_start);
    free(p.spans);
    free(p.title.s);
    free(p.problems.s);
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
    const ts_lesson_kv *kv = lp_find_kv(s->keys, s->n_keys, "command");
    return kv ? kv->value : "run";
}

const char *ts_lesson_setup_get(const ts_lesson *l, int run, const char *key) {
    if (run < 0 || run >= l->n_setups) return NULL;
    const ts_lesson_setup *own = &l->setups[run];
    const ts_lesson_kv *kv = lp_find_kv(own->keys, own->n_keys, key);
    /* A setup of another command (a training run beside a forward run) is a
     * run of its own: it takes nothing from the main setup. */
    /* a named setup without `command:` runs the main one's */
    const char *command = lp_find_kv(own->keys, own->n_keys, "command") ? own_command(own) : own_command(&l->setups[0]);
    if (!kv && run != 0 && strcmp(command, own_command(&l->setups[0])) == 0 && !leaves_out(own, key))
        kv = lp_find_kv(l->setups[0].keys, l->setups[0].n_keys, key);
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

const char *ts_lesson_step_value(const ts_lesson_step *st, const char *key) {
    for (int i = 0; i < st->n_keys; i++)
        if (strcmp(st->keys[i].key, key) == 0) return st->keys[i].value;
    return NULL;
}

bool ts_lesson_unchecked_next(const char **p, const char **fig, size_t *fig_len, const char **why, size_t *why_len) {
    const char *s = *p;
    for (;;) {
        while (*s == ' ' || *s == '\t') s++;
        if (!*s) {
            *p = s;
            return false;
        }
        if (*s != ';') break;
        s++; /* an empty item: skipped */
    }
    const char *end = s + strcspn(s, ";");
    *fig = s;
    while (s < end && *s != ' ' && *s != '\t') s++;
    *fig_len = (size_t)(s - *fig);
    while (s < end && (*s == ' ' || *s == '\t')) s++;
    const char *w = end;
    while (w > s && (w[-1] == ' ' || w[-1] == '\t')) w--;
    *why = s;
    *why_len = (size_t)(w - s);
    *p = *end ? end + 1 : end;
    return true;
}

static ts_status check_one_name(const ts_lesson *l, const ts_lesson_step *st, const char *key, const char *run,
                                const char *name, ts_lesson_name_fn known, void *ctx) {
    char hint[256] = "";
    if (known(ctx, run, name, hint, sizeof hint)) return TS_OK;
    hint[sizeof hint - 1] = '\0';
    return ts_lesson_fail_at(l, kv_line(st->keys, st->n_keys, key, st->line), "unknown step name '%s' in run '%s'%s%s",
                             name, run, hint[0] ? ": " : "", hint);
}

ts_status ts_lesson_sink_take(ts_lesson_sink *sink, ts_status s) {
    if (s == TS_OK || !sink) return s;
    if (sink->fn) sink->fn(sink->ctx, ts_last_error());
    sink->n++;
    return TS_OK;
}

ts_status ts_lesson_check_names(const ts_lesson *l, ts_lesson_name_fn known, void *ctx, ts_lesson_sink *sink) {
    for (int i = 0; i < l->n_steps; i++) {
        const ts_lesson_step *st = &l->steps[i];
        TS_TRY(ts_lesson_sink_take(sink, check_one_name(l, st, "tensor", st->run, st->tensor, known, ctx)));
        if (!st->compare_with && !st->compare_run) continue;
        const char *run = st->compare_run ? st->compare_run : st->run;
        const char *name = st->compare_with ? st->compare_with : st->tensor;
        TS_TRY(ts_lesson_sink_take(
            sink, check_one_name(l, st, st->compare_with ? "compare-with" : "compare-run", run, name, known, ctx)));
    }
    return TS_OK;
}

static const char *const view_names[TS_LESSON_VIEW_COUNT] = {
    [TS_LESSON_VIEW_AUTO] = "auto",         [TS_LESSON_VIEW_HEATMAP] = "heatmap",
    [TS_LESSON_VIEW_GRID] = "grid",         [TS_LESSON_VIEW_OVERVIEW] = "overview",
    [TS_LESSON_VIEW_CURVES] = "curves",     [TS_LESSON_VIEW_STATS] = "stats",
    [TS_LESSON_VIEW_SHAPES] = "shapes",     [TS_LESSON_VIEW_LENS] = "lens",
    [TS_LESSON_VIEW_DIST] = "dist",         [TS_LESSON_VIEW_ROPE] = "rope",
};

const char *ts_lesson_view_name(ts_lesson_view v) {
    if ((unsigned)v >= TS_LESSON_VIEW_COUNT) return "?";
    return view_names[v];
}
