/* scene_tensor: any tensor as a slice with its statistics and histogram
 * (axes named, positions as tokens, q/k/v column groups), and token ids as
 * categories. Part of the scene (scene_impl.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scene_impl.h"

/* ---- any tensor ---------------------------------------------------------------- */

/* Which two dims to show: --axes I,J, else the last two. */
static ts_status choose_axes(ts_scene *job, const ts_tensor *t, int *r, int *c) {
    if (t->rank == 1) {
        *r = -1;
        *c = 0;
        return TS_OK;
    }
    *r = t->rank - 2;
    *c = t->rank - 1;
    if (!job->rq.axes) return TS_OK;
    job->used |= TS_SCENE_USED_AXES;
    int64_t a, b;
    const char *comma = ts_text_int_prefix(job->rq.axes, -TS_MAX_RANK, TS_MAX_RANK, &a);
    if (!comma || *comma != ',' || !ts_text_int(comma + 1, -TS_MAX_RANK, TS_MAX_RANK, &b))
        return ts_fail(TS_ERR_ARG, "--axes expects two dims like 1,2, not '%s'", job->rq.axes);
    if (a < 0) a += t->rank;
    if (b < 0) b += t->rank;
    if (a < 0 || b < 0 || a >= t->rank || b >= t->rank || a == b)
        return ts_fail(TS_ERR_ARG, "--axes %s: pick two different dims of a rank-%d tensor", job->rq.axes, t->rank);
    *r = (int)a;
    *c = (int)b;
    return TS_OK;
}

static ts_status step_stats(ts_trace *t, int64_t i, ts_trace_stats *st, ts_render_hist *h) {
    const ts_trace_step *s = ts_trace_step_at(t, i);
    const ts_trace_stats *ts = &s->stats;
    *st = *ts;
    memset(h, 0, sizeof *h);
    h->n_bins = TS_TRACE_HIST_BINS;
    h->lo = ts->min;
    h->hi = ts->max > ts->min ? ts->max : ts->min + 1;
    if (!s->has_stats) return TS_OK;
    uint64_t counts[TS_TRACE_HIST_BINS];
    ts_status rc = ts_trace_histogram(t, i, counts); /* stored, or binned from the values */
    if (rc) return rc;
    for (int b = 0; b < TS_TRACE_HIST_BINS && b < TS_RENDER_HIST_BINS; b++) h->counts[b] = (int64_t)counts[b];
    return TS_OK;
}

/* What a dim of a traced tensor means, from its place and rank: (B, S, D)
 * and (B, H, S, hd) are the shapes a learner meets. */
static const char *axis_name(ts_scene *job, const ts_trace_step *s, const ts_tensor *t, int d, bool tokens) {
    if (d < 0) return NULL;
    bool batched = scene_has_batch_dim(s);
    if (batched && t->rank == 3 && s->tag == TS_TAG_LOGITS) return d == 1 ? (tokens ? "token" : "position") : "vocabulary id";
    if (batched && t->rank == 3) return d == 1 ? (tokens ? "token" : "position") : "feature";
    if (batched && t->rank == 4 && s->tag == TS_TAG_HEADS) return d == 1 ? "head" : d == 2 ? "position" : "head dim";
    if (batched && t->rank == 4 && scene_is_attention(job, s)) return d == 1 ? "head" : d == 2 ? "query" : "key";
    if (s->tag == TS_TAG_POSENC && t->rank == 2) return d == 0 ? "position" : "feature"; /* (S, D) */
    if (s->tag == TS_TAG_HEAD_SCORES && t->rank == 2) /* a sweep's (layers, heads + 1): the FFN last */
        return d == 0 ? "layer" : strncmp(s->name, "ablate.", 7) == 0 ? "head (the last column: the FFN)" : "head";
    return d == t->rank - 1 ? "last dim" : "dim";
}

/* An ablation sweep's (layers, heads + 1) columns by name, "head 0" ...
 * "FFN", so no column is read by its index alone. False when the step is
 * not one (or memory ran out: the indices stay). */
static bool sweep_columns(ts_scene *job, const ts_trace_step *s, const ts_tensor *t, ts_render_matrix *m) {
    if (s->tag != TS_TAG_HEAD_SCORES || t->rank != 2 || strncmp(s->name, "ablate.", 7) != 0) return false;
    int n = (int)t->shape[1];
    if (n < 2 || n > 4096) return false;
    const char **labels = scene_own(job, sizeof *labels * (size_t)n);
    enum { LABEL = 24 }; /* "head " and any int */
    char *text = scene_own(job, (size_t)n * LABEL);
    if (!labels || !text) return false;
    for (int j = 0; j < n; j++) {
        char *at = text + (size_t)j * LABEL;
        if (j == n - 1) snprintf(at, LABEL, "FFN");
        else snprintf(at, LABEL, "head %d", j);
        labels[j] = at;
    }
    m->col_labels = labels;
    return true;
}

/* A whole number of the traced model's config ("heads", "d_model"); 0 when
 * the trace does not say. */
static int config_int(ts_scene *job, const char *key) {
    const cJSON *v = scene_config_item(job, key);
    return cJSON_IsNumber(v) ? v->valueint : 0;
}

/* Columns that come in groups: q, k and v of each head in `qkv`, k and v in
 * a cross-attention's `kv`, one head after another in `concat`. Drawn as
 * separators with the groups' names, so a learner sees where q ends. */
static void column_groups(ts_scene *job, const ts_trace_step *s, ts_render_matrix *m) {
    int heads = config_int(job, "heads"), d = config_int(job, "d_model");
    if (heads < 1 || d < heads || d % heads) return;
    int hd = d / heads;
    static const char *const qkv[] = {"q", "k", "v"}, *const kv[] = {"k", "v"};
    /* The attention steps whose columns come in groups, by the leaf of their
     * name and the op that made them (model_forward.c's self_attention,
     * cross_attention and sdpa); per_head: the groups repeat for every head
     * along the columns; parts NULL: one group a head. */
    static const struct {
        const char *leaf;
        ts_op op;
        const char *const *parts;
        int n_parts;
        bool per_head;
    } grouped[] = {{"qkv", TS_OP_LINEAR, qkv, 3, true},        {"qkv_heads", TS_OP_RESHAPE, qkv, 3, false},
                   {"qkv_perm", TS_OP_PERMUTE, qkv, 3, false}, {"kv", TS_OP_LINEAR, kv, 2, true},
                   {"kv_heads", TS_OP_RESHAPE, kv, 2, false},  {"kv_perm", TS_OP_PERMUTE, kv, 2, false},
                   {"concat", TS_OP_RESHAPE, NULL, 0, false}};
    const char *dot = strrchr(s->name, '.');
    const char *leaf = dot ? dot + 1 : s->name;
    int g = -1;
    for (int k = 0; k < (int)(sizeof grouped / sizeof grouped[0]) && g < 0; k++)
        if (strcmp(leaf, grouped[k].leaf) == 0 && s->op == grouped[k].op) g = k;
    if (g < 0) return;
    const char *const *parts = grouped[g].parts;
    int n_parts = grouped[g].n_parts;
    bool per_head = grouped[g].per_head;
    if (!parts && scene_has_variant(job, "seed000-reshape")) return; /* the bug scrambles the heads */
    int groups = parts ? n_parts * (per_head ? heads : 1) : heads;
    if (m->cols != groups * hd) return;
    const char **labels = scene_own(job, sizeof *labels * (size_t)groups);
    enum { LABEL = 32 };
    char *text = scene_own(job, (size_t)groups * LABEL);
    if (!labels || !text) return;
    for (int k = 0; k < groups; k++) {
        char *t = text + k * LABEL;
        if (!parts) snprintf(t, LABEL, "head %d", k);
        else if (per_head) snprintf(t, LABEL, "h%d %.4s", k / n_parts, parts[k % n_parts]);
        else snprintf(t, LABEL, "%.4s", parts[k]);
        labels[k] = t;
    }
    m->col_group = hd;
    m->col_group_labels = labels;
}

/* Query heads per key/value head when s is a self-attention's keys or
 * values (k, v, k_rot, k_proj's heads) with fewer heads than the queries;
 * 1 otherwise. */
static int kv_heads_of(ts_scene *job, const ts_trace_step *s, const ts_tensor *t) {
    if (t->rank != 4 || s->tag != TS_TAG_HEADS || strstr(s->name, ".cross_attn.")) return 1;
    if (!scene_ends_with(s->name, ".k") && !scene_ends_with(s->name, ".v") && !scene_ends_with(s->name, ".k_rot")) return 1;
    ts_model_config c;
    if (!scene_model_config(job, &c)) return 1;
    int kv = ts_model_kv_heads(&c);
    return kv >= 1 && kv < c.heads && t->shape[1] == kv ? c.heads / kv : 1;
}

ts_status scene_build_tensor(ts_scene *job, int64_t i) {
    const ts_trace_step *s = ts_trace_step_at(job->t, i);
    ts_tensor t;
    ts_status rc = scene_step_tensor(job, i, s->name, &t);
    if (rc) return rc;
    int r, c;
    if ((rc = choose_axes(job, &t, &r, &c))) return rc;
    /* (B, S) ids: the batch element is one row, shown as such; only --axes may not name dim 0 */
    if (scene_has_batch_dim(s) && job->rq.axes && (r == 0 || c == 0))
        return ts_fail(TS_ERR_ARG, "--axes cannot include dim 0 (the batch): --batch picks its element");
    /* The other dims: the batch element (already sliced), the head for dim 1
     * of a (B, H, ...) tensor, 0 elsewhere. */
    int64_t index[TS_MAX_RANK] = {0};
    char fixed[160] = "";
    size_t at = 0;
    for (int d = 0; d < t.rank; d++) {
        if (d == r || d == c) continue;
        if (d == 1 && (job->rq.head >= 0)) index[d] = job->rq.head, job->used |= TS_SCENE_USED_HEAD;
        if (index[d] >= t.shape[d]) return ts_fail(TS_ERR_ARG, "--head %d: dim 1 of %s has %lld", job->rq.head, s->name, (long long)t.shape[d]);
        if ((scene_has_batch_dim(s) && d == 0) || at >= sizeof fixed) continue;
        const char *what = axis_name(job, s, &t, d, false);
        int group = kv_heads_of(job, s, &t);
        if (strcmp(what, "head") == 0 && group > 1) /* a shared key/value head: who reads it */
            at += (size_t)snprintf(fixed + at, sizeof fixed - at, " \xc2\xb7 kv head %lld of %lld, read by query heads %lld%s%lld",
                                   (long long)index[d], (long long)t.shape[1], (long long)index[d] * group,
                                   group == 2 ? " and " : "\xe2\x80\x93", (long long)index[d] * group + group - 1);
        else if (strcmp(what, "head") == 0) /* "head 3", not "dim 1 = 3" */
            at += (size_t)snprintf(fixed + at, sizeof fixed - at, " \xc2\xb7 head %lld", (long long)index[d]);
        else
            at += (size_t)snprintf(fixed + at, sizeof fixed - at, " \xc2\xb7 dim %d = %lld", d, (long long)index[d]);
    }
    job->m[0] = scene_matrix_of(&t, r, c, index);
    /* positions of (B, S, D) and of (B, H, S, hd) are tokens when the trace names them */
    bool positions = r >= 0 && t.shape[r] == s->shape[r] &&
                     ((s->rank == 3 && r == (scene_has_batch_dim(s) ? 1 : 0)) ||
                      (s->rank == 4 && r == 2 && strcmp(axis_name(job, s, &t, r, false), "position") == 0));
    /* keys and values of a cross-attention are the source's positions */
    bool keyed = scene_ends_with(s->name, ".k") || scene_ends_with(s->name, ".v");
    if (positions) {
        ts_trace_side side = keyed ? scene_key_side(s->name) : scene_query_side(s->name);
        job->m[0].row_labels = scene_tokens_for(job, side, t.shape[r]);
        if (!job->m[0].mask) job->m[0].mask = scene_padded_position_rows(job, side, job->m[0].rows, job->m[0].cols);
    }
    /* a language model's logits (or draws): the last dim is the vocabulary */
    if (c >= 0 && c == t.rank - 1) job->m[0].col_labels = scene_vocab_labels(job, t.shape[c]);
    bool logits = s->tag == TS_TAG_LOGITS || strcmp(s->name, "logits") == 0 || strcmp(s->name, "grad.logits") == 0;
    if (logits && !job->m[0].col_labels && c == t.rank - 1) job->m[0].col_labels = scene_words_of_ids(job, t.shape[c]);
    if (c >= 0 && c == t.rank - 1) column_groups(job, s, &job->m[0]);
    bool sweep = c == 1 && sweep_columns(job, s, &t, &job->m[0]);
    if ((rc = step_stats(job->t, i, &job->stats, &job->hist))) return rc;
    char shape[TS_SHAPE_TEXT_MAX];
    scene_shape_text(shape, sizeof shape, s);
    snprintf(job->title, sizeof job->title, "%s", s->name);
    if (scene_has_batch_dim(s))
        snprintf(job->subtitle, sizeof job->subtitle, "%s %s \xc2\xb7 batch %d \xc2\xb7 rows: dim %d, columns: dim %d%s",
                 ts_op_name(s->op), shape, job->rq.batch, r, c, fixed);
    else
        snprintf(job->subtitle, sizeof job->subtitle, "%s %s \xc2\xb7 rows: dim %d, columns: dim %d%s", ts_op_name(s->op),
                 shape, r, c, fixed);
    job->kind = PIC_TENSOR;
    job->view = TS_RENDER_VIEW_HEATMAP;
    job->tensor = (ts_render_tensor_view){.slice = job->m[0], .title = job->title, .subtitle = job->subtitle,
                                        .row_axis = job->m[0].row_labels && s->rank == 4 ? "token" : axis_name(job, s, &t, r, job->m[0].row_labels != NULL),
                                        .col_axis = sweep ? "what is knocked out" : job->m[0].col_labels ? "next token (the vocabulary)" : axis_name(job, s, &t, c, false),
                                        .stats = s->has_stats ? &job->stats : NULL,
                                        .hist = s->has_stats ? &job->hist : NULL};
    if (scene_is_probability(s)) job->tensor.fixed_scale = true, job->tensor.scale = scene_probability_scale;
    job->tensor.bar_label = scene_colour_means(s);
    int cols = job->m[0].cols, rows = job->m[0].rows;
    job->width = (int)fmin(1600, fmax(900, cols * 3 + 560));
    job->height = (int)fmin(1100, fmax(460, rows * 4 + 260));
    if (cols <= 16 && rows <= 16) {
        job->width = (int)fmax(900, cols * 50 + 560);
        job->height = (int)fmax(420, rows * 50 + 230);
    }
    return TS_OK;
}

/* ---- token ids ---------------------------------------------------------------- */

/* A model's token input, (B, S) whole numbers: drawn as categories. */
bool scene_is_token_ids(ts_trace *t, int64_t i) {
    const ts_trace_step *s = ts_trace_step_at(t, i);
    if (s->op != TS_OP_INPUT || s->rank != 2 || !s->has_values || s->batch_index >= 0) return false;
    const float *v;
    if (ts_trace_values(t, i, &v) != TS_OK) return false;
    for (int64_t k = 0; k < s->values_count; k++)
        if (v[k] != floorf(v[k]) || v[k] < 0) return false;
    return true;
}

ts_status scene_build_ids(ts_scene *job, int64_t i) {
    const ts_trace_step *s = ts_trace_step_at(job->t, i);
    if (job->rq.batch < 0 || job->rq.batch >= s->shape[0])
        return ts_fail(TS_ERR_ARG, "--batch %d: %s has %lld sequences", job->rq.batch, s->name, (long long)s->shape[0]);
    const float *v;
    TS_TRY(ts_trace_values(job->t, i, &v));
    int n = (int)s->shape[1];
    char shape[TS_SHAPE_TEXT_MAX];
    scene_shape_text(shape, sizeof shape, s);
    snprintf(job->title, sizeof job->title, "%s", s->name);
    snprintf(job->subtitle, sizeof job->subtitle, "token ids %s \xc2\xb7 batch %d", shape, job->rq.batch);
    job->ids = (ts_render_ids_view){.ids = v + (int64_t)job->rq.batch * n, .n = n, .title = job->title,
                                  .subtitle = job->subtitle, .tokens = scene_tokens_for(job, scene_query_side(s->name), n)};
    job->kind = PIC_IDS;
    job->view = TS_RENDER_VIEW_HEATMAP;
    job->width = 1000;
    job->height = ts_render_ids_height(n, job->width);
    return TS_OK;
}
