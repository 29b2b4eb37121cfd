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
 * digits written: 0.19 stands for [0.185, 0.195]. */
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
    if (strncmp(what, "at ", 3) != 0) return "an item is 'min|max|mean|std|nan VALUE' or 'at I,J,... VALUE'";
    int64_t index[TS_MAX_RANK];
    int n = 0;
    for (char *p = what + 3; *p && n < TS_MAX_RANK;) {
        index[n++] = strtoll(p, &end, 10);
        if (end == p) return "'at' takes whole numbers separated by commas, one per dimension";
        p = end + strspn(end, ", ");
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

static ts_status check_item(const ts_lessonrun *r, const ts_lesson_step *st, const ts_lesson_kv *kv, char *item) {
    const ts_lesson *l = r->lesson;
    bool right = strncmp(item, "right ", 6) == 0;
    if (right) {
        if (!st->compare_with && !st->compare_run && st->compare_step == TS_LESSON_UNSET)
            return ts_lesson_fail_at(l, kv->line, "expect '%s': 'right' is the comparison, and the step has none", item);
        item += 6 + strspn(item + 6, " ");
    }
    panel pn;
    panel_of(&pn, st, right);
    int k = ts_lesson_find_setup(l, pn.run);
    ts_trace *t = k >= 0 ? r->traces[k] : NULL;
    int64_t rec = t ? record_of(t, pn.tensor, pn.which) : -1;
    if (rec < 0) return ts_lesson_fail_at(l, kv->line, "expect: no record of %s in run '%s'", pn.tensor, pn.run);
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

static ts_status check_step(const ts_lessonrun *r, const ts_lesson_step *st, const ts_lesson_kv *kv) {
    char list[1024];
    snprintf(list, sizeof list, "%s", kv->value);
    for (char *save = NULL, *item = strtok_r(list, ";", &save); item; item = strtok_r(NULL, ";", &save)) {
        item += strspn(item, " ");
        for (size_t n = strlen(item); n && item[n - 1] == ' '; n--) item[n - 1] = '\0';
        TS_TRY(check_item(r, st, kv, item));
    }
    return TS_OK;
}

ts_status ts_lessonrun_check_expects(const ts_lessonrun *r) {
    const ts_lesson *l = r->lesson;
    for (int i = 0; i < l->n_steps; i++) {
        const ts_lesson_step *st = &l->steps[i];
        for (int j = 0; j < st->n_keys; j++)
            if (strcmp(st->keys[j].key, "expect") == 0) TS_TRY(check_step(r, st, &st->keys[j]));
    }
    return TS_OK;
}
