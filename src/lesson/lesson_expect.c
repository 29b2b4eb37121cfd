/* lesson_expect: the figures a step's narration quotes, checked against the
 * run (lesson.h, "expect"). A step may say
 *
 *     expect: max 0.71; at 0,0,1,1 0.71; mean -0.05
 *
 * and opening the lesson's run fails, naming the file and line, when the
 * trace disagrees: a changed model or setup cannot leave a page that quotes a
 * number its picture no longer shows. min, max, mean and std are the whole
 * step's, as `tscope info` prints them, nan its count of NaN values; `at I,J,...` is one element (every
 * index given). An item that starts with `right` reads the comparison drawn
 * on the right (compare-with, compare-run, compare-step) instead. A figure agrees when it is the run's value rounded to the
 * digits written: 0.19 stands for [0.185, 0.195].
 *
 * Sentences about a chart are items too (lessons/README.md has the table):
 * `curve C ...` reads one element of the step's tensor over the records of a
 * training trace (its value at a step, its max or min and where, the first
 * step it crosses a level, whether it stays above or below a level or another
 * curve over a range of steps), and `rows ...` counts or averages over the
 * rows of the step's matrix (rows whose largest cell is on the diagonal). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/lesson.h"

#define MAX_ITEM 128

/* The record of `name`: the first, or the `which`-th of a name a training
 * trace repeats (-1: the last; TS_LESSON_UNSET: the first). */
static int64_t record_of(ts_trace *t, const char *name, int which) {
    int64_t i = ts_trace_find(t, name);
    if (i < 0 || which == TS_LESSON_UNSET) return i;
    int64_t last = i;
    for (int n = 0; i >= 0; n++, i = ts_trace_find_next(t, i)) {
        if (n == which) return i;
        last = i;
    }
    return which == -1 ? last : -1;
}

/* One panel of a step: the run, tensor and record it draws. */
typedef struct panel {
    const char *run, *tensor;
    int which;
    char layered[256]; /* a `layers.*` name at the step's layer */
} panel;

/* The left panel is the step's own tensor; "right" is its comparison. A
 * `layers.*` name is read at the step's `layer` (0 when none), the layer a
 * page of one step draws and the first point of a per-layer plot. */
static void panel_of(panel *p, const ts_lesson_step *st, bool right) {
    *p = (panel){.run = st->run, .tensor = st->tensor, .which = st->train_step};
    if (right) {
        if (st->compare_run) p->run = st->compare_run;
        if (st->compare_with) p->tensor = st->compare_with;
        if (st->compare_step != TS_LESSON_UNSET) p->which = st->compare_step;
    }
    if (strstr(p->tensor, "layers.*") &&
        ts_name_with_layer(p->layered, sizeof p->layered, p->tensor, st->layer >= 0 ? st->layer : 0))
        p->tensor = p->layered;
}

/* Half a unit of the last digit written: "0.19" -> 0.005, "3" -> 0.5. */
static double tolerance_of(const char *number) {
    const char *dot = strchr(number, '.');
    int decimals = 0;
    if (dot)
        for (const char *c = dot + 1; *c >= '0' && *c <= '9'; c++) decimals++;
    return 0.5 * pow(10.0, -decimals) + 1e-9;
}

/* The run's value for one item ("max 0.19", "at 0,1,2 0.41"); *figure gets the
 * number written. Returns a message (static) when the item cannot be read. */
static const char *value_of(ts_trace *t, int64_t rec, const char *item, double *run, const char **figure) {
    char what[MAX_ITEM];
    const char *space = strrchr(item, ' ');
    if (!space || space == item) return "an item is 'min|max|mean|std|nan VALUE' or 'at I,J,... VALUE'";
    *figure = space + 1;
    char *end;
    strtod(*figure, &end);
    if (end == *figure || *end) return "the last word of an item is the figure quoted, a number";
    snprintf(what, sizeof what, "%.*s", (int)(space - item), item);
    const ts_trace_step *s = ts_trace_step_at(t, rec);
    static const char *const stats[] = {"min", "max", "mean", "std", "nan"};
    for (int k = 0; k < 5; k++)
        if (strcmp(what, stats[k]) == 0) {
            if (!s->has_stats) return "the trace keeps no statistics of this step";
            const double v[] = {s->stats.min, s->stats.max, s->stats.mean, s->stats.std, (double)s->stats.nan};
            *run = v[k];
            return NULL;
        }
    if (strncmp(what, "mean ", 5) == 0) { /* a stretch of a vector: "mean 32-62" */
        int64_t a, b;
        if (!ts_text_range(what + 5, INT64_MAX, false, &a, &b))
            return "'mean A-B' takes two whole numbers 0 <= A <= B, nothing else";
        if (s->rank != 1) return "'mean A-B' averages a stretch of a step of one dimension";
        if (b >= s->shape[0]) return "'mean A-B': A <= B, both inside the step";
        const float *v;
        if (!s->has_values || ts_trace_values(t, rec, &v)) return "the trace keeps no values of this step (level: values)";
        double sum = 0;
        for (int64_t i = a; i <= b; i++) sum += v[i];
        *run = sum / (double)(b - a + 1);
        return NULL;
    }
    if (strncmp(what, "at ", 3) != 0) return "an item is 'min|max|mean|std|nan VALUE' or 'at I,J,... VALUE'";
    int64_t index[TS_MAX_RANK];
    int n = 0;
    for (const char *p = what + 3; *p;) {
        const char *after = n < TS_MAX_RANK ? ts_text_int_prefix(p, INT64_MIN, INT64_MAX, &index[n]) : NULL;
        if (!after) return "'at' takes whole numbers separated by commas, one per dimension";
        n++;
        p = after + strspn(after, ", ");
    }
    if (n != s->rank) return "'at' gives one index per dimension of the step";
    if (!s->has_values || s->batch_index >= 0) return "the trace keeps no values of this step (level: values)";
    int64_t flat = 0;
    for (int d = 0; d < n; d++) {
        if (index[d] < 0 || index[d] >= s->shape[d]) return "an 'at' index is outside the step's shape";
        flat = flat * s->shape[d] + index[d];
    }
    const float *values;
    if (ts_trace_values(t, rec, &values)) return "the step's values cannot be read";
    *run = values[flat];
    return NULL;
}

/* ---- curves: one element of a name over the records a training trace repeats ---- */

/* A series: the value of one element (or of a scalar name) at each record,
 * over x, the training step of each record (train.step) when the trace
 * records one per snapshot, else the record's number. */
typedef struct series {
    double *x, *y;
    int n;
} series;

static void series_free(series *s) {
    free(s->x);
    free(s->y);
    *s = (series){0};
}

/* The n records of `name` from its first: how many there are. */
static int count_records(ts_trace *t, const char *name) {
    int n = 0;
    for (int64_t i = ts_trace_find(t, name); i >= 0; i = ts_trace_find_next(t, i)) n++;
    return n;
}

/* The flat offset of `index` (rank numbers) in a step, or -1 outside it. */
static int64_t flat_of(const ts_trace_step *s, const int64_t *index, int rank) {
    if (rank != s->rank) return -1;
    int64_t flat = 0;
    for (int d = 0; d < rank; d++) {
        if (index[d] < 0 || index[d] >= s->shape[d]) return -1;
        flat = flat * s->shape[d] + index[d];
    }
    return flat;
}

static const char *series_read(ts_trace *t, const char *name, const int64_t *index, int rank, series *out);

/* Element `index` of every record of `name`. Returns a message on failure,
 * with *out left empty. */
static const char *series_of(ts_trace *t, const char *name, const int64_t *index, int rank, series *out) {
    const char *bad = series_read(t, name, index, rank, out);
    if (bad) series_free(out);
    return bad;
}

static const char *series_read(ts_trace *t, const char *name, const int64_t *index, int rank, series *out) {
    *out = (series){0};
    int n = count_records(t, name);
    if (n == 0) return "the trace has no record of that name";
    out->x = calloc((size_t)n, sizeof *out->x);
    out->y = calloc((size_t)n, sizeof *out->y);
    if (!out->x || !out->y) return "out of memory";
    int steps = count_records(t, "train.step");
    int64_t xs = steps == n ? ts_trace_find(t, "train.step") : -1;
    int k = 0;
    for (int64_t i = ts_trace_find(t, name); i >= 0; i = ts_trace_find_next(t, i), k++) {
        const ts_trace_step *s = ts_trace_step_at(t, i);
        const float *v;
        int64_t flat = rank == 0 ? (s->numel == 1 ? 0 : -1) : flat_of(s, index, rank);
        if (flat < 0) return rank == 0 ? "a series named by a trace name is one number per record"
                                       : "a curve's index is outside the step's shape (one index per dimension)";
        if (!s->has_values || s->batch_index >= 0 || ts_trace_values(t, i, &v))
            return "the trace keeps no values of this step (level: values)";
        out->y[k] = v[flat];
        out->x[k] = k;
        if (xs >= 0) {
            const float *sv;
            if (ts_trace_values(t, xs, &sv) == TS_OK) out->x[k] = sv[0];
            xs = ts_trace_find_next(t, xs);
        }
    }
    out->n = n;
    return NULL;
}

#define MAX_WORDS 16

/* Split an item into words at spaces (in place). */
static int split_words(char *s, char **w) {
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(s, " ", &save); tok && n < MAX_WORDS; tok = strtok_r(NULL, " ", &save))
        w[n++] = tok;
    return n;
}

/* A finite number (a level, a step, a figure): "nan" and "inf" are not one. */
static bool is_number(const char *s, double *v) {
    char *end;
    *v = strtod(s, &end);
    return end != s && !*end && isfinite(*v);
}

/* A whole number that fits an int either way (a row, a head, an offset, a
 * count): no larger number has a meaning in a matrix a page can draw. */
static bool is_whole(const char *s, long *v) {
    int64_t x;
    if (!ts_text_int(s, -INT32_MAX, INT32_MAX, &x)) return false;
    *v = (long)x;
    return true;
}

/* "0,2" -> {0, 2}; "1,*" -> {1, -1} with *star the place of the star (-1: none). */
static bool parse_index(const char *s, int64_t *index, int *rank, int *star) {
    *rank = 0;
    *star = -1;
    for (const char *p = s; *p && *rank < TS_MAX_RANK;) {
        if (*p == '*') {
            if (*star >= 0) return false;
            *star = *rank;
            index[(*rank)++] = 0;
            p++;
        } else {
            const char *end = ts_text_int_prefix(p, INT64_MIN, INT64_MAX, &index[*rank]);
            if (!end) return false;
            (*rank)++;
            p = end;
        }
        if (*p == ',') p++;
        else if (*p) return false;
    }
    return *rank > 0;
}

/* The series a `curve SPEC` names: SPEC is an index into the step's tensor
 * ("0,2"; a `*` in it runs over that dimension: each series is one value of
 * it) or a trace name of one number per record (`lm.chance.prev_token`). */
typedef struct curve_spec {
    const char *name;
    int64_t index[TS_MAX_RANK];
    int rank, star;
    int64_t star_n; /* the size of the starred dimension */
} curve_spec;

static const char *spec_of(ts_trace *t, const char *tensor, const char *word, curve_spec *c) {
    *c = (curve_spec){.name = tensor, .star = -1, .star_n = 1};
    if (isalpha((unsigned char)word[0])) {
        c->name = word;
        if (ts_trace_find(t, word) < 0) return "a curve names a step the trace does not have";
        return NULL;
    }
    if (!parse_index(word, c->index, &c->rank, &c->star)) return "a curve is 'curve I,J,...' (an index, '*' for every value of a dimension) or 'curve NAME'";
    int64_t i = ts_trace_find(t, tensor);
    const ts_trace_step *s = i >= 0 ? ts_trace_step_at(t, i) : NULL;
    if (!s || s->rank != c->rank) return "a curve's index gives one number per dimension of the step";
    if (c->star >= 0) c->star_n = s->shape[c->star];
    return NULL;
}

/* Series k of a spec (k < star_n). */
static const char *spec_series(ts_trace *t, curve_spec *c, int64_t k, series *out) {
    if (c->star >= 0) c->index[c->star] = k;
    return series_of(t, c->name, c->index, c->rank, out);
}

/* The record of a series at x (a training step), or -1. */
static int at_x(const series *s, double x) {
    for (int k = 0; k < s->n; k++)
        if (fabs(s->x[k] - x) < 0.5) return k;
    return -1;
}

/* Whether the run's value v is the figure written (rounded to its digits). */
static bool agrees(double v, const char *figure) { return fabs(v - strtod(figure, NULL)) <= tolerance_of(figure); }

#define MSG 300
/* One `curve ...` item; msg gets what is wrong (a usage or what the run gives). */
static const char *check_curve(ts_trace *t, const char *tensor, char **w, int n, char *msg) {
    static const char *const usage =
        "a curve item is 'curve C at step X FIG', 'curve C max|min FIG at step X', 'curve C crosses L at step X' or "
        "'curve C above|below L|curve C2 from X to Y'";
    if (n < 2) return usage;
    curve_spec c, r;
    const char *bad = spec_of(t, tensor, w[1], &c);
    if (bad) return bad;
    double d, x, y;
    series s = {0}, ref = {0};
    const char *err = NULL;
    if (n == 6 && strcmp(w[2], "at") == 0 && strcmp(w[3], "step") == 0 && is_number(w[4], &x) && is_number(w[5], &d)) {
        if (c.star >= 0) return "'*' goes with above and below only";
        if ((err = spec_series(t, &c, 0, &s))) return err;
        int k = at_x(&s, x);
        if (k < 0) err = "the curve has no record at that step";
        else if (!agrees(s.y[k], w[5]))
            snprintf(msg, MSG, "the run gives %.6g at step %g", s.y[k], x), err = msg;
    } else if (n == 7 && (strcmp(w[2], "max") == 0 || strcmp(w[2], "min") == 0) && is_number(w[3], &d) &&
               strcmp(w[4], "at") == 0 && strcmp(w[5], "step") == 0 && is_number(w[6], &x)) {
        if (c.star >= 0) return "'*' goes with above and below only";
        if ((err = spec_series(t, &c, 0, &s))) return err;
        bool max = w[2][1] == 'a';
        int best = 0;
        for (int k = 1; k < s.n; k++)
            if (max ? s.y[k] > s.y[best] : s.y[k] < s.y[best]) best = k;
        if (!agrees(s.y[best], w[3]) || fabs(s.x[best] - x) >= 0.5)
            snprintf(msg, MSG, "the run's %s is %.6g at step %g", w[2], s.y[best], s.x[best]), err = msg;
    } else if (n == 7 && strcmp(w[2], "crosses") == 0 && is_number(w[3], &d) && strcmp(w[4], "at") == 0 &&
               strcmp(w[5], "step") == 0 && is_number(w[6], &x)) {
        if (c.star >= 0) return "'*' goes with above and below only";
        if ((err = spec_series(t, &c, 0, &s))) return err;
        int k = 1;
        bool below = s.n > 0 && s.y[0] < d;
        while (k < s.n && (s.y[k] < d) == below) k++;
        if (k >= s.n) snprintf(msg, MSG, "the run never crosses %g", d), err = msg;
        else if (fabs(s.x[k] - x) >= 0.5)
            snprintf(msg, MSG, "the run first crosses %g at step %g (%.6g)", d, s.x[k], s.y[k]), err = msg;
    } else if ((n == 8 || n == 9) && (strcmp(w[2], "above") == 0 || strcmp(w[2], "below") == 0) &&
               strcmp(w[n - 4], "from") == 0 && is_number(w[n - 3], &x) && strcmp(w[n - 2], "to") == 0 &&
               is_number(w[n - 1], &y)) {
        bool above = w[2][0] == 'a', constant = n == 8 && is_number(w[3], &d);
        if (n == 8 && !constant) return usage;
        if (n == 9 && (strcmp(w[3], "curve") != 0 || (err = spec_of(t, tensor, w[4], &r)))) return err ? err : usage;
        if (n == 9 && r.star >= 0) return "'*' goes with the first curve only";
        if (n == 9 && (err = spec_series(t, &r, 0, &ref))) return err;
        for (int64_t j = 0; j < c.star_n && !err; j++) {
            series_free(&s);
            if ((err = spec_series(t, &c, j, &s))) break;
            int seen = 0;
            for (int k = 0; k < s.n && !err; k++) {
                if (s.x[k] < x - 0.5 || s.x[k] > y + 0.5) continue;
                seen++;
                double level = constant ? d : (k < ref.n ? ref.y[k] : NAN);
                if (!(above ? s.y[k] > level : s.y[k] < level)) {
                    char who[96] = "";
                    if (c.star >= 0) { /* name the series that breaks the claim: "curve 1,0" */
                        size_t at = (size_t)snprintf(who, sizeof who, " (curve ");
                        for (int q = 0; q < c.rank && at < sizeof who; q++)
                            at += (size_t)snprintf(who + at, sizeof who - at, "%s%lld", q ? "," : "", (long long)c.index[q]);
                        if (at < sizeof who) snprintf(who + at, sizeof who - at, ")");
                    }
                    snprintf(msg, MSG, "at step %g the run gives %.6g%s, not %s %.6g", s.x[k], s.y[k], who, w[2], level);
                    err = msg;
                }
            }
            if (!err && seen == 0) err = "the curve has no record in that range of steps";
        }
    } else {
        err = usage;
    }
    series_free(&s);
    series_free(&ref);
    return err;
}

/* ---- rows: a count or an average over the rows of the step's matrix ---------- */

/* The (rows, cols) matrix a step's heatmap shows: its last two dimensions, at
 * the step's batch and head for the ones before (0 when not given). */
static const char *matrix_of(ts_trace *t, int64_t rec, const ts_lesson_step *st, int head, const float **m, int64_t *R,
                             int64_t *C) {
    const ts_trace_step *s = ts_trace_step_at(t, rec);
    if (s->rank < 2) return "'rows' reads a matrix: the step has fewer than two dimensions";
    if (!s->has_values || ts_trace_values(t, rec, m)) return "the trace keeps no values of this step (level: values)";
    int64_t lead[TS_MAX_RANK] = {0};
    int nl = s->rank - 2, from = 0;
    if (nl >= 1) lead[0] = nl >= 2 ? (st->batch > 0 ? st->batch : 0) : head;
    if (nl >= 2) lead[1] = head;
    if (s->batch_index >= 0) { /* keep-batch: the values are one batch element's, dim 0 left out */
        if (nl < 2 || lead[0] != s->batch_index) return "the trace keeps the values of another batch element (keep-batch)";
        from = 1;
    }
    int64_t off = 0;
    for (int d = from; d < nl; d++) {
        if (lead[d] < 0 || lead[d] >= s->shape[d]) return "the step's head or batch is outside the step's shape";
        off = off * s->shape[d] + lead[d];
    }
    *R = s->shape[s->rank - 2];
    *C = s->shape[s->rank - 1];
    *m += off * *R * *C;
    return NULL;
}

/* `rows [head H] [A-B] argmax offset K N`: how many rows (A to B, default all) have
 * their largest cell at column row + K (K = 0: the diagonal); `rows [A-B] mean
 * offset K FIG`: the average of the cells at column row + K over those rows
 * (rows whose column row + K is outside the matrix are left out). */
static const char *check_rows(ts_trace *t, int64_t rec, const ts_lesson_step *st, char **w, int n, char *msg) {
    static const char *const usage =
        "a rows item is 'rows [head H] [A-B] argmax offset K COUNT', 'rows [head H] [A-B] mean offset K FIG' or "
        "'rows [head H] [A-B] max above|below L COUNT'";
    long head = st->head > 0 ? st->head : 0;
    if (n >= 3 && strcmp(w[1], "head") == 0) { /* another head than the step's (a grid of heads) */
        if (!is_whole(w[2], &head) || head < 0)
            return "rows head H: H is a head's number, a whole number from 0 (of the step's heads)";
        w += 2;
        n -= 2;
    }
    int i = 1;
    long a = 0, b = -1, k = 0;
    if (n == 6) {
        char *dash = strchr(w[1] + 1, '-');
        if (!dash) return usage;
        *dash = '\0';
        if (!is_whole(w[1], &a) || !is_whole(dash + 1, &b) || a < 0 || b < a) return "rows A-B: whole numbers, A <= B";
        i = 2;
    } else if (n != 5) {
        return usage;
    }
    if (n - i != 4) return usage;
    /* the kind: max above|below L N, argmax offset K N, mean offset K FIG */
    bool maxed = strcmp(w[i], "max") == 0, above = maxed && strcmp(w[i + 1], "above") == 0;
    bool count = strcmp(w[i], "argmax") == 0;
    double level = 0, fig;
    long want = 0;
    if (maxed) {
        if (!above && strcmp(w[i + 1], "below") != 0) return usage;
        if (!is_number(w[i + 2], &level)) return "rows max above|below L: the level L is a finite number";
        if (!is_whole(w[i + 3], &want)) return "a count of rows is a whole number";
    } else {
        if ((!count && strcmp(w[i], "mean") != 0) || strcmp(w[i + 1], "offset") != 0) return usage;
        if (!is_whole(w[i + 2], &k)) return "rows ... offset K: K is a whole number of columns (an int)";
        if (count ? !is_whole(w[i + 3], &want) : !is_number(w[i + 3], &fig))
            return count ? "an argmax count is a whole number" : "the last word of an item is the figure quoted, a number";
    }
    const float *m;
    int64_t R, C;
    const char *bad = matrix_of(t, rec, st, (int)head, &m, &R, &C);
    if (bad) return bad;
    if (b < 0) b = (long)R - 1;
    if (b >= R) return "rows A-B: B is past the matrix's last row";
    if (maxed) { /* rows whose largest cell is above (below) a level */
        long hits = 0;
        for (long r = a; r <= b; r++) {
            float best = m[r * C];
            for (long c = 1; c < C; c++) best = fmaxf(best, m[r * C + c]);
            hits += above ? best > level : best < level;
        }
        if (hits == want) return NULL;
        snprintf(msg, MSG, "the run has %ld such rows of %ld", hits, b - a + 1);
        return msg;
    }
    long hits = 0, used = 0;
    double sum = 0;
    for (long r = a; r <= b; r++) {
        long col = r + k;
        if (count) {
            long arg = 0;
            for (long c = 1; c < C; c++)
                if (m[r * C + c] > m[r * C + arg]) arg = c;
            hits += arg == col;
        } else if (col >= 0 && col < C) {
            sum += m[r * C + col];
            used++;
        }
    }
    if (count && hits != want) snprintf(msg, MSG, "the run has %ld such rows of %ld", hits, b - a + 1);
    else if (!count && used == 0) return "no row of that range has a column at that offset";
    else if (!count && !agrees(sum / (double)used, w[i + 3]))
        snprintf(msg, MSG, "the run gives %.6g (over %ld rows)", sum / (double)used, used);
    else return NULL;
    return msg;
}

static ts_status check_item(const ts_lessonrun *r, const ts_lesson_step *st, const ts_lesson_kv *kv, char *item) {
    const ts_lesson *l = r->lesson;
    if (strlen(item) >= MAX_ITEM)
        return ts_lesson_fail_at(l, kv->line, "expect '%.40s...': an item of %zu bytes; an item is shorter than %d",
                                 item, strlen(item), MAX_ITEM);
    bool right = strncmp(item, "right ", 6) == 0;
    if (right) {
        if (!st->compare_with && !st->compare_run && st->compare_step == TS_LESSON_UNSET)
            return ts_lesson_fail_at(l, kv->line, "expect '%s': 'right' is the comparison, and the step has none", item);
        item += 6 + strspn(item + 6, " ");
    }
    panel pn;
    panel_of(&pn, st, right);
    if (strncmp(item, "of ", 3) == 0) { /* another step of the same run, that the view also draws */
        const char *name = item + 3, *end = strchr(name, ' ');
        if (!end || end == name || (size_t)(end - name) >= sizeof pn.layered)
            return ts_lesson_fail_at(l, kv->line, "expect '%s': 'of NAME' names a step, then the item", item);
        snprintf(pn.layered, sizeof pn.layered, "%.*s", (int)(end - name), name);
        pn.tensor = pn.layered;
        item = (char *)end + strspn(end, " ");
    }
    int k = ts_lesson_find_setup(l, pn.run);
    ts_trace *t = k >= 0 ? r->traces[k] : NULL;
    int64_t rec = t ? record_of(t, pn.tensor, pn.which) : -1;
    if (rec < 0) return ts_lesson_fail_at(l, kv->line, "expect: no record of %s in run '%s'", pn.tensor, pn.run);
    if (strncmp(item, "curve ", 6) == 0 || strncmp(item, "rows ", 5) == 0) {
        char words[MAX_ITEM * 2], msg[MSG], *w[MAX_WORDS] = {0};
        snprintf(words, sizeof words, "%s", item);
        int n = split_words(words, w);
        const char *why = n < 1 ? "an empty item" : w[0][0] == 'c' ? check_curve(t, pn.tensor, w, n, msg) : check_rows(t, rec, st, w, n, msg);
        if (!why) return TS_OK;
        return ts_lesson_fail_at(l, kv->line, "expect '%s': %s (%s in run '%s')%s", item, why, pn.tensor, pn.run,
                                 why == msg ? "; the narration says what the page does not show" : "");
    }
    double run = 0;
    const char *figure = NULL, *bad = value_of(t, rec, item, &run, &figure);
    if (bad) return ts_lesson_fail_at(l, kv->line, "expect '%s': %s", item, bad);
    double want = strtod(figure, NULL);
    if (!(fabs(run - want) <= tolerance_of(figure)))
        return ts_lesson_fail_at(l, kv->line,
                                 "expect '%s': the run gives %.6g (%s in run '%s'); the narration quotes a figure the "
                                 "page does not show",
                                 item, run, pn.tensor, pn.run);
    return TS_OK;
}

/* What to do with one item of an expect: list. */
typedef ts_status (*item_fn)(const ts_lessonrun *r, const ts_lesson *l, const ts_lesson_step *st,
                             const ts_lesson_kv *kv, char *item);

/* fn on every item of kv (a step's expect:), each problem to sink (NULL: the
 * first is returned). */
static ts_status each_item(const ts_lessonrun *r, const ts_lesson *l, const ts_lesson_step *st,
                           const ts_lesson_kv *kv, item_fn fn, ts_lesson_sink *sink) {
    char *list = strdup(kv->value); /* whole: an item past any fixed size is still checked */
    if (!list) return ts_fail(TS_ERR_NOMEM, "lesson: out of memory");
    ts_status s = TS_OK;
    int items = 0;
    for (char *p = list, *item; !s && p; items++) {
        item = p;
        p = strchr(p, ';');
        if (p) *p++ = '\0';
        item += strspn(item, " ");
        for (size_t n = strlen(item); n && item[n - 1] == ' '; n--) item[n - 1] = '\0';
        if (!*item)
            s = ts_lesson_fail_at(l, kv->line, "expect: item %d is empty: items are separated by one ';' "
                                  "each, as 'max 0.72; mean 0.25'", items + 1);
        else
            s = fn(r, l, st, kv, item);
        s = ts_lesson_sink_take(sink, s);
    }
    free(list);
    return s;
}

static ts_status check_form(const ts_lessonrun *r, const ts_lesson *l, const ts_lesson_step *st,
                            const ts_lesson_kv *kv, char *item);

static ts_status check_run_item(const ts_lessonrun *r, const ts_lesson *l, const ts_lesson_step *st,
                                const ts_lesson_kv *kv, char *item) {
    if (check_form(r, l, st, kv, item) != TS_OK) return TS_OK; /* its form is reported by ts_lesson_check_expect_forms */
    return check_item(r, st, kv, item);
}

/* An item's form, without a run: its kind is known and its last word a number. */
static ts_status check_form(const ts_lessonrun *r, const ts_lesson *l, const ts_lesson_step *st,
                            const ts_lesson_kv *kv, char *item) {
    (void)r;
    static const char *const usage = "an item is 'min|max|mean|std|nan VALUE', 'mean A-B VALUE', 'at I,J,... VALUE', "
                                     "'curve ...' or 'rows ...' (lessons/README.md)";
    if (strlen(item) >= MAX_ITEM)
        return ts_lesson_fail_at(l, kv->line, "expect '%.40s...': an item of %zu bytes; an item is shorter than %d",
                                 item, strlen(item), MAX_ITEM);
    const char *it = item;
    if (strncmp(it, "right ", 6) == 0) {
        if (!st->compare_with && !st->compare_run && st->compare_step == TS_LESSON_UNSET)
            return ts_lesson_fail_at(l, kv->line, "expect '%s': 'right' is the comparison, and the step has none", item);
        it += 6 + strspn(it + 6, " ");
    }
    if (strncmp(it, "of ", 3) == 0) {
        const char *end = strchr(it + 3, ' ');
        if (!end || end == it + 3) return ts_lesson_fail_at(l, kv->line, "expect '%s': 'of NAME' names a step, then the item", item);
        it = end + strspn(end, " ");
    }
    if (strncmp(it, "curve ", 6) == 0 || strncmp(it, "rows ", 5) == 0) return TS_OK; /* their words need the run */
    const char *space = strrchr(it, ' ');
    char *end;
    if (!space || space == it) return ts_lesson_fail_at(l, kv->line, "expect '%s': %s", item, usage);
    strtod(space + 1, &end);
    if (end == space + 1 || *end)
        return ts_lesson_fail_at(l, kv->line, "expect '%s': the last word of an item is the figure quoted, a number", item);
    int head = (int)(space - it);
    static const char *const stats[] = {"min", "max", "mean", "std", "nan"};
    for (int k = 0; k < 5; k++)
        if ((int)strlen(stats[k]) == head && strncmp(it, stats[k], (size_t)head) == 0) return TS_OK;
    char what[MAX_ITEM];
    snprintf(what, sizeof what, "%.*s", head, it);
    if (strncmp(what, "mean ", 5) == 0) { /* a stretch, read as the run reads it: whole numbers, nothing else */
        int64_t a, b;
        if (ts_text_range(what + 5, INT64_MAX, false, &a, &b)) return TS_OK;
        return ts_lesson_fail_at(l, kv->line, "expect '%s': 'mean A-B' takes two whole numbers 0 <= A <= B, nothing else",
                                 item);
    }
    if (strncmp(what, "at ", 3) == 0 && what[3]) {
        for (const char *c = what + 3; *c; c++)
            if (!isdigit((unsigned char)*c) && *c != ',' && *c != ' ')
                return ts_lesson_fail_at(l, kv->line, "expect '%s': 'at' takes whole numbers separated by commas", item);
        return TS_OK;
    }
    return ts_lesson_fail_at(l, kv->line, "expect '%s': %s", item, usage);
}

ts_status ts_lesson_check_expect_forms(const ts_lesson *l, ts_lesson_sink *sink) {
    for (int i = 0; i < l->n_steps; i++) {
        const ts_lesson_step *st = &l->steps[i];
        for (int j = 0; j < st->n_keys; j++)
            if (strcmp(st->keys[j].key, "expect") == 0) TS_TRY(each_item(NULL, l, st, &st->keys[j], check_form, sink));
    }
    return TS_OK;
}

/* A step's zoom: inside the matrix its heatmap draws (the last two dimensions). */
static ts_status check_zoom(const ts_lessonrun *r, const ts_lesson_step *st) {
    const ts_lesson *l = r->lesson;
    panel pn;
    panel_of(&pn, st, false);
    int k = ts_lesson_find_setup(l, pn.run);
    ts_trace *t = k >= 0 ? r->traces[k] : NULL;
    int64_t rec = t ? record_of(t, pn.tensor, pn.which) : -1;
    if (rec < 0) return TS_OK; /* a step the trace lacks is reported by the names' check */
    const ts_trace_step *s = ts_trace_step_at(t, rec);
    if (s->rank < 2) return TS_OK;
    static const char *const what[2] = {"rows", "cols"};
    for (int d = 0; d < 2; d++) {
        int64_t n = s->shape[s->rank - 2 + d];
        if (st->zoom[2 * d] >= n || st->zoom[2 * d + 1] >= n)
            return ts_lesson_fail_at(l, ts_lesson_step_line(st, "zoom"), "zoom %s %d-%d: %s has %s 0-%lld only",
                                     what[d], st->zoom[2 * d], st->zoom[2 * d + 1], pn.tensor, what[d], (long long)n - 1);
    }
    return TS_OK;
}

ts_status ts_lessonrun_check_expects(const ts_lessonrun *r, ts_lesson_sink *sink) {
    const ts_lesson *l = r->lesson;
    for (int i = 0; i < l->n_steps; i++) {
        const ts_lesson_step *st = &l->steps[i];
        if (st->zoomed) TS_TRY(ts_lesson_sink_take(sink, check_zoom(r, st)));
        for (int j = 0; j < st->n_keys; j++)
            if (strcmp(st->keys[j].key, "expect") == 0) TS_TRY(each_item(r, l, st, &st->keys[j], check_run_item, sink));
    }
    return TS_OK;
}
