/* scene_curves: lines: a scalar over records (a training run's loss above
 * its gradient norms), per-head scores and per-position values over
 * snapshots, a few columns of a slice over its rows; two runs' curves on one
 * pair of axes (ts_scene_overlay). Part of the scene (scene_impl.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scene_impl.h"

/* ---- lines ---------------------------------------------------------------- */


/* The gradient-norm threshold the training run clipped at; 0: none, or the
 * trace does not say. */
static double training_clip(ts_scene *job) {
    const cJSON *v = scene_metadata_item(job, "training", "clip");
    return cJSON_IsNumber(v) && v->valuedouble > 0 ? v->valuedouble : 0;
}

static double scalar_value(ts_trace *t, int64_t i) {
    const ts_trace_step *s = ts_trace_step_at(t, i);
    const float *v;
    if (s->has_values && s->values_count > 0 && ts_trace_values(t, i, &v) == TS_OK) return v[0];
    return s->has_stats ? s->stats.mean : NAN;
}

/* Every record of `name` as one series (x = record number). */
static ts_status series_of(ts_scene *job, const char *name, ts_render_series *out, char *label, size_t label_size) {
    int n = 0;
    for (int64_t i = ts_trace_find(job->t, name); i >= 0; i = ts_trace_find_next(job->t, i)) n++;
    float *y = scene_own(job, sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (!y) return ts_fail(TS_ERR_NOMEM, "no memory for %d values", n);
    int k = 0;
    for (int64_t i = ts_trace_find(job->t, name); i >= 0; i = ts_trace_find_next(job->t, i))
        y[k++] = (float)scalar_value(job->t, i);
    snprintf(label, label_size, "%s", name);
    *out = (ts_render_series){.label = label, .y = y, .n = n, .color = -1};
    return TS_OK;
}

static const float *snapshot_steps(ts_scene *job, int n);

/* A curve's y axis: a loss (cross-entropy with the natural log) says its unit. */
static const char *y_label_of(const char *name) {
    if (strcmp(name, "loss.next") == 0) return "loss of the next token (nats)";
    return scene_ends_with(name, "loss") ? "loss (nats)" : name;
}

/* Curves over a name's records mark the record asked for (the viewer's
 * current snapshot), on every curve. */
static void mark_occurrence(ts_scene *job) {
    if (!job->rq.mark_occurrence) return;
    for (int k = 0; k < job->n_series; k++) {
        job->series[k].mark = true;
        job->series[k].mark_at = job->rq.occurrence >= 0 ? job->rq.occurrence : job->series[k].n - 1;
    }
}

ts_status scene_build_scalar_curves(ts_scene *job, const ts_trace_step *s) {
    ts_status rc = series_of(job, s->name, &job->series[0], job->series_labels[0], sizeof job->series_labels[0]);
    if (rc) return rc;
    job->n_series = 1;
    snprintf(job->title, sizeof job->title, "%s", s->name);
    /* A training trace: loss above the gradient norms recorded beside it. */
    if (scene_ends_with(s->name, "loss")) {
        int n = 0;
        for (int64_t i = ts_trace_find_glob(job->t, "*grad_norm*", 0); i >= 0 && n < MAX_SERIES - 1;
             i = ts_trace_find_glob(job->t, "*grad_norm*", i + 1)) {
            const ts_trace_step *g = ts_trace_step_at(job->t, i);
            if (ts_trace_find(job->t, g->name) != i) continue;
            if ((rc = series_of(job, g->name, &job->series[1 + n], job->series_labels[1 + n],
                                sizeof job->series_labels[1 + n])))
                return rc;
            job->series[1 + n].color = n;
            n++;
        }
        if (n > 0) {
            /* tscope train records each snapshot's step as train.step: the x axis */
            ts_render_series steps;
            char steps_label[16];
            if (ts_trace_find(job->t, "train.step") >= 0 &&
                series_of(job, "train.step", &steps, steps_label, sizeof steps_label) == TS_OK)
                for (int k = 0; k <= n; k++)
                    if (job->series[k].n == steps.n) job->series[k].x = steps.y;
            job->kind = PIC_TRAINING;
            job->view = TS_RENDER_VIEW_CURVES;
            job->clip = training_clip(job);
            job->n_series = 1 + n;
            mark_occurrence(job);
            snprintf(job->subtitle, sizeof job->subtitle, "%d records of %s and %d gradient norms", job->series[0].n, s->name, n);
            job->width = 1100;
            job->height = 800;
            return TS_OK;
        }
    }
    job->kind = PIC_PLOT;
    job->view = TS_RENDER_VIEW_CURVES;
    snprintf(job->subtitle, sizeof job->subtitle, "%d records of %s in this trace", job->series[0].n, s->name);
    /* a training trace's scalars are drawn over its steps, as the loss is */
    const float *steps = scene_ends_with(s->name, ".step") ? NULL : snapshot_steps(job, job->series[0].n);
    job->series[0].x = steps;
    mark_occurrence(job);
    job->popts = (ts_render_plot_opts){.title = job->title, .subtitle = job->subtitle, .x_label = steps ? "training step" : "record",
                                     .y_label = y_label_of(s->name),
                                     .markers = job->series[0].n <= 30, .no_legend = true};
    /* the norm the run clipped at: above the line, an update was shortened */
    double clip = strcmp(s->name, "train.grad_norm") == 0 ? training_clip(job) : 0;
    if (clip > 0) {
        snprintf(job->ref_label, sizeof job->ref_label, "clipped above %g", clip);
        job->popts.ref_label = job->ref_label, job->popts.ref_y = clip;
    }
    job->width = 1000;
    job->height = 560;
    return TS_OK;
}

/* ---- a language model's training: scores per head, curves per position ------ */

/* The train.step of each of n snapshots, when the trace records one per snapshot. */
static const float *snapshot_steps(ts_scene *job, int n) {
    ts_render_series steps;
    char label[16];
    if (ts_trace_find(job->t, "train.step") < 0 || series_of(job, "train.step", &steps, label, sizeof label)) return NULL;
    return steps.n == n ? steps.y : NULL;
}

/* Every record of name (n of them, each `each` floats) into one block. */
static ts_status records_of(ts_scene *job, const char *name, int64_t each, float **out, int *n) {
    *n = 0;
    for (int64_t i = ts_trace_find(job->t, name); i >= 0; i = ts_trace_find_next(job->t, i)) (*n)++;
    float *v = scene_own(job, sizeof(float) * (size_t)(*n > 0 ? *n : 1) * (size_t)each);
    if (!v) return ts_fail(TS_ERR_NOMEM, "no memory for %d records", *n);
    int k = 0;
    for (int64_t i = ts_trace_find(job->t, name); i >= 0; i = ts_trace_find_next(job->t, i), k++) {
        const ts_trace_step *s = ts_trace_step_at(job->t, i);
        const float *x;
        if (!s->has_values || s->numel != each || ts_trace_values(job->t, i, &x) != TS_OK)
            return ts_fail(TS_ERR_ARG, "%s: record %d keeps no values of %lld numbers", name, k, (long long)each);
        memcpy(v + (size_t)k * (size_t)each, x, sizeof(float) * (size_t)each);
    }
    *out = v;
    return TS_OK;
}

/* (L, H) scores recorded at every snapshot: one line per head over training
 * (the heads that reach highest when there are more than the legend holds),
 * and the dashed line uniform attention would score when the trace has it
 * (lm.chance.<score>). */
ts_status scene_build_head_scores(ts_scene *job, const ts_trace_step *s) {
    if (s->rank != 2) return ts_fail(TS_ERR_ARG, "%s: per-head scores are (layers, heads), not rank %d", s->name, s->rank);
    int L = (int)s->shape[0], H = (int)s->shape[1], LH = L * H, n = 0;
    float *v;
    ts_status rc = records_of(job, s->name, LH, &v, &n);
    if (rc) return rc;
    const float *x = snapshot_steps(job, n);
    /* the heads to draw: all, or those whose best is highest */
    int pick[MAX_SERIES], n_pick = 0, room = MAX_SERIES - 1;
    float *best = scene_own(job, sizeof(float) * (size_t)LH);
    if (!best) return ts_fail(TS_ERR_NOMEM, "no memory");
    for (int h = 0; h < LH; h++) {
        best[h] = -INFINITY;
        for (int k = 0; k < n; k++) best[h] = fmaxf(best[h], v[(size_t)k * LH + h]);
    }
    while (n_pick < room && n_pick < LH) {
        int arg = -1;
        for (int h = 0; h < LH; h++) {
            bool taken = false;
            for (int j = 0; j < n_pick; j++) taken |= pick[j] == h;
            if (!taken && (arg < 0 || best[h] > best[arg])) arg = h;
        }
        pick[n_pick++] = arg;
    }
    for (int j = 0; j < n_pick; j++) /* back in layer, head order */
        for (int k = j + 1; k < n_pick; k++)
            if (pick[k] < pick[j]) {
                int t = pick[j];
                pick[j] = pick[k], pick[k] = t;
            }
    for (int j = 0; j < n_pick; j++) {
        snprintf(job->series_labels[j], sizeof job->series_labels[j], "layer %d head %d", pick[j] / H, pick[j] % H);
        job->series[j] = (ts_render_series){.label = job->series_labels[j], .x = x, .y = v + pick[j], .y_stride = LH,
                                          .n = n, .color = j};
    }
    job->n_series = n_pick;
    const char *dot = strrchr(s->name, '.');
    char chance[160];
    snprintf(chance, sizeof chance, "lm.chance.%s", dot ? dot + 1 : s->name);
    float *c;
    int nc = 0;
    if (ts_trace_find(job->t, chance) >= 0 && records_of(job, chance, 1, &c, &nc) == TS_OK && nc == n) {
        snprintf(job->series_labels[n_pick], sizeof job->series_labels[n_pick], "uniform attention");
        job->series[n_pick] = (ts_render_series){.label = job->series_labels[n_pick], .x = x, .y = c, .n = n,
                                               .color = n_pick, .dashed = true};
        job->n_series++;
    }
    snprintf(job->title, sizeof job->title, "%s", s->name);
    snprintf(job->subtitle, sizeof job->subtitle, "%d of %d heads (%d layers \xc3\x97 %d) at %d snapshots%s", n_pick, LH, L,
             H, n, n_pick < LH ? ", those that score highest" : "");
    job->kind = PIC_PLOT;
    job->view = TS_RENDER_VIEW_CURVES;
    job->popts = (ts_render_plot_opts){.title = job->title, .subtitle = job->subtitle,
                                     .x_label = x ? "training step" : "record", .y_label = "score",
                                     .markers = n <= 30, .y_from_zero = true};
    job->width = 1100;
    job->height = 600;
    return TS_OK;
}

/* A value per position recorded at every snapshot: the curve of up to five
 * snapshots spread over training (the first and the last among them). */
ts_status scene_build_position_curves(ts_scene *job, const ts_trace_step *s) {
    int64_t S = s->numel;
    int n = 0;
    float *v;
    ts_status rc = records_of(job, s->name, S, &v, &n);
    if (rc) return rc;
    const float *steps = snapshot_steps(job, n);
    int shown = n < 5 ? n : 5;
    for (int j = 0; j < shown; j++) {
        int k = shown > 1 ? (int)((int64_t)j * (n - 1) / (shown - 1)) : 0;
        if (steps)
            snprintf(job->series_labels[j], sizeof job->series_labels[j], "step %.0f", (double)steps[k]);
        else
            snprintf(job->series_labels[j], sizeof job->series_labels[j], "record %d", k);
        job->series[j] = (ts_render_series){.label = job->series_labels[j], .y = v + (size_t)k * (size_t)S, .n = (int)S,
                                          .color = j};
    }
    job->n_series = shown;
    snprintf(job->title, sizeof job->title, "%s", s->name);
    snprintf(job->subtitle, sizeof job->subtitle, "one value per position, at %d of %d snapshots", shown, n);
    job->kind = PIC_PLOT;
    job->view = TS_RENDER_VIEW_CURVES;
    /* a loss is in nats (cross-entropy with the natural log): say so on the axis */
    job->popts = (ts_render_plot_opts){.title = job->title, .subtitle = job->subtitle, .x_label = "position",
                                     .y_label = y_label_of(s->name),
                                     .markers = S <= 30, .y_from_zero = true};
    job->width = 1100;
    job->height = 560;
    return TS_OK;
}

/* The last part of a step's name: "mean" of "encoder.layers.0.norm1.mean". */
static const char *s_leaf(const char *name) {
    const char *dot = strrchr(name, '.');
    return dot ? dot + 1 : name;
}

/* Curves of a few columns of a 2-D slice over its rows. */
ts_status scene_build_column_curves(ts_scene *job, int64_t i) {
    ts_status rc = scene_build_tensor(job, i);
    if (rc) return rc;
    ts_render_matrix m = job->m[0];
    int n = m.cols < 6 ? m.cols : 6;
    for (int k = 0; k < n; k++) {
        int col = n < m.cols ? k * (m.cols - 1) / (n - 1 > 0 ? n - 1 : 1) : k;
        snprintf(job->series_labels[k], sizeof job->series_labels[k], "%s %d", job->tensor.col_axis, col);
        job->series[k] = (ts_render_series){.label = job->series_labels[k],
                                          .y = m.values + col * (m.col_stride ? m.col_stride : 1),
                                          .y_stride = m.row_stride ? m.row_stride : m.cols, .n = m.rows, .color = k};
    }
    job->n_series = n;
    job->kind = PIC_PLOT;
    job->view = TS_RENDER_VIEW_CURVES;
    /* One column (a norm's mean or std, (B, S, 1)): one curve, named by the
     * y axis rather than by a legend that says "feature 0". */
    job->popts = (ts_render_plot_opts){.title = job->title, .subtitle = job->subtitle,
                                     .x_label = job->tensor.row_axis ? job->tensor.row_axis : "row",
                                     .y_label = n == 1 ? s_leaf(job->title) : NULL, .no_legend = n == 1,
                                     .markers = m.rows <= 30, .x_tick_labels = m.row_labels,
                                     .n_x_tick_labels = m.row_labels ? m.rows : 0};
    job->width = 1000;
    job->height = 560;
    return TS_OK;
}

/* Curves one scene draws: a plot's lines, or a training picture's first
 * (the loss, over the training steps). */
static int curve_count(const ts_scene *s) {
    return s->kind == PIC_PLOT ? s->n_series : s->kind == PIC_TRAINING ? 1 : 0;
}

ts_status ts_scene_overlay(ts_scene *a, const ts_scene *b, const char *label_a, const char *label_b) {
    int na = curve_count(a), nb = curve_count(b);
    if (na == 0 || nb == 0) return ts_fail(TS_ERR_ARG, "overlay: both sides must be drawn as curves");
    if (na + nb > MAX_SERIES) return ts_fail(TS_ERR_ARG, "overlay: %d curves are too many for one plot", na + nb);
    if (a->kind == PIC_TRAINING) { /* the loss alone, over training steps */
        a->kind = PIC_PLOT;
        a->n_series = 1;
        a->popts = (ts_render_plot_opts){.title = a->title, .subtitle = a->subtitle,
                                         .x_label = a->series[0].x ? "training step" : "record",
                                         .y_label = y_label_of(a->title)};
    }
    /* One curve a side is named by its run; several keep their own names after it. */
    for (int k = 0; k < na; k++) {
        char *label = a->series_labels[k];
        char own_name[96];
        snprintf(own_name, sizeof own_name, "%s", a->series[k].label ? a->series[k].label : "");
        if (na == 1) snprintf(label, sizeof a->series_labels[k], "%s", label_a);
        else snprintf(label, sizeof a->series_labels[k], "%.60s: %.30s", label_a, own_name);
        a->series[k].label = label;
        a->series[k].color = k;
        a->series[k].dashed = false;
    }
    for (int k = 0; k < nb; k++) {
        char *label = a->series_labels[na + k];
        if (nb == 1) snprintf(label, sizeof a->series_labels[na + k], "%s", label_b);
        else
            snprintf(label, sizeof a->series_labels[na + k], "%.60s: %.30s", label_b,
                     b->series[k].label ? b->series[k].label : "");
        a->series[na + k] = b->series[k]; /* b's values: b must outlive a's drawing */
        a->series[na + k].label = label;
        a->series[na + k].color = na + k;
        a->series[na + k].dashed = false;
    }
    a->n_series = na + nb;
    snprintf(a->subtitle, sizeof a->subtitle, "two runs on one pair of axes: %d and %d records", a->series[0].n,
             a->series[na].n);
    a->popts.subtitle = a->subtitle;
    a->popts.no_legend = false;
    a->popts.y_from_zero = a->popts.y_from_zero && b->popts.y_from_zero;
    /* a level line belongs to one run: say whose, unless both have it */
    const ts_scene *with_line = a->popts.ref_label ? a : b->popts.ref_label ? b : NULL;
    bool both = a->popts.ref_label && b->popts.ref_label && a->popts.ref_y == b->popts.ref_y;
    if (with_line && !both) {
        char own[40];
        snprintf(own, sizeof own, "%.39s", with_line->ref_label);
        snprintf(a->ref_label, sizeof a->ref_label, "%.30s: %s", with_line == a ? label_a : label_b, own);
        a->popts.ref_label = a->ref_label, a->popts.ref_y = with_line->popts.ref_y;
    }
    return TS_OK;
}
