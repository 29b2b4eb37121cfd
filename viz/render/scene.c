/* scene: from a trace step to a picture, for `tscope png` and the viewer.
 * Each build_* gathers one view's data (pointers into the trace's map, or
 * small blocks the scene owns); ts_scene_draw hands them to the renderers. */
#include "tscope/render.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/core.h"
#include "tscope/model.h"
#include "tscope/tokenizer.h"
#include "render_internal.h" /* ts_render__svg_tips */

#define MAX_SERIES 16
#define MAX_SHAPE_STEPS 160

typedef enum pic_kind {
    PIC_HEATMAP,  /* one matrix: an attention head, a PE table */
    PIC_GRID,     /* heads of a layer, or layers x heads */
    PIC_POSENC,   /* PE curves above the PE heatmap */
    PIC_PE_CURVES,
    PIC_PLOT,     /* lines: scalars over records, columns over rows */
    PIC_TRAINING, /* loss above gradient norms */
    PIC_NORM,     /* LayerNorm statistics */
    PIC_TENSOR,   /* any tensor: slice, statistics, histogram */
    PIC_SHAPES,   /* the steps of a module */
    PIC_IDS,      /* token ids: categories, not quantities */
    PIC_LENS,     /* the logit lens: layers x positions of predicted tokens */
    PIC_DIST,     /* one position's next-token distribution as bars */
} pic_kind;

struct ts_scene {
    ts_trace *t;
    ts_scene_request rq;
    const ts_trace_step *step; /* NULL for a module */
    pic_kind kind;
    ts_render_view view; /* what it is called; AUTO for the combined PE view */
    int width, height;   /* a good size in points */
    char title[320], subtitle[600];
    char ref_label[80]; /* popts.ref_label: a level line's name */
    double clip;        /* PIC_TRAINING: the run's clip threshold, 0 for none */
    ts_render_matrix m[TS_RENDER_MAX_PANELS];
    int n;
    ts_render_heatmap_opts hopts;
    ts_render_grid_opts gopts;
    const char *panel_titles[TS_RENDER_MAX_PANELS];
    const char *row_headers[TS_RENDER_MAX_PANELS], *col_headers[TS_RENDER_MAX_PANELS];
    char names[TS_RENDER_MAX_PANELS][24];
    char headers[TS_RENDER_MAX_PANELS][24];
    const float *pe;
    int positions, d_model;
    ts_render_series series[MAX_SERIES];
    int n_series;
    ts_render_plot_opts popts;
    char series_labels[MAX_SERIES][96];
    ts_render_norm norm;
    ts_render_tensor_view tensor;
    ts_render_ids_view ids; /* PIC_IDS */
    ts_render_lens_view lens; /* PIC_LENS */
    ts_render_dist_view dist; /* PIC_DIST */
    ts_trace_stats stats;
    ts_render_hist hist;
    ts_render_step *steps;
    int n_steps;
    void *owned[4 * TS_RENDER_MAX_PANELS + 8];
    int n_owned;
    unsigned used; /* ts_scene_used: the request's batch, head, axes that the picture shows */
    cJSON *meta;   /* the trace's metadata, parsed once while the scene is built (metadata()) */
    bool meta_read;
};

/* A zeroed block the scene frees with itself. */
static void *own(ts_scene *job, size_t bytes) {
    if (job->n_owned >= (int)(sizeof job->owned / sizeof job->owned[0])) return NULL;
    void *m = calloc(1, bytes ? bytes : 1);
    if (m) job->owned[job->n_owned++] = m;
    return m;
}

/* The trace's metadata (JSON), parsed on first use and kept while the scene
 * is built; NULL when it does not parse. */
static const cJSON *metadata(ts_scene *job) {
    if (!job->meta_read) {
        job->meta = cJSON_Parse(ts_trace_metadata(job->t));
        job->meta_read = true;
    }
    return job->meta;
}

/* Item `key` of the metadata's object `object` ("config": the traced
 * model's; "training": a training run's settings), or NULL. */
static const cJSON *metadata_item(ts_scene *job, const char *object, const char *key) {
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(metadata(job), object), key);
}

static const cJSON *config_item(ts_scene *job, const char *key) { return metadata_item(job, "config", key); }

static const char *trace_name(const ts_scene *s) { return s->rq.trace_path ? s->rq.trace_path : "the trace"; }

/* ---- names --------------------------------------------------------------- */

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The three step names closest to `name`, comma separated. */
static void nearest_names(ts_trace *t, const char *name, char *buf, size_t size) {
    const char *best[3] = {NULL, NULL, NULL};
    int dist[3] = {1 << 30, 1 << 30, 1 << 30};
    int64_t n = ts_trace_count(t);
    for (int64_t i = 0; i < n; i++) {
        const ts_trace_step *s = ts_trace_step_at(t, i);
        if (!s || ts_trace_find(t, s->name) != i) continue; /* each name once */
        int d = ts_text_edit_distance(name, s->name);
        for (int k = 0; k < 3; k++)
            if (d < dist[k]) {
                for (int j = 2; j > k; j--) dist[j] = dist[j - 1], best[j] = best[j - 1];
                dist[k] = d;
                best[k] = s->name;
                break;
            }
    }
    size_t at = 0;
    buf[0] = '\0';
    for (int k = 0; k < 3 && best[k] && at < size; k++)
        at += (size_t)snprintf(buf + at, size - at, "%s%s", k ? ", " : "", best[k]);
}

/* Whether some step's name starts with "prefix." */
static bool is_module(ts_trace *t, const char *prefix) {
    char glob[300];
    snprintf(glob, sizeof glob, "%s.*", prefix);
    return ts_trace_find_glob(t, glob, 0) >= 0;
}

/* The k-th step named `name` (k = -1: the last). */
static int64_t find_occurrence(ts_trace *t, const char *name, int k) {
    int64_t i = ts_trace_find(t, name);
    if (k < 0) {
        for (int64_t next = i; next >= 0; next = ts_trace_find_next(t, next)) i = next;
        return i;
    }
    for (int j = 0; j < k && i >= 0; j++) i = ts_trace_find_next(t, i);
    return i;
}

static ts_status unknown_name(ts_scene *job, const char *name) {
    char near[800];
    nearest_names(job->t, name, near, sizeof near);
    if (!near[0]) return ts_fail(TS_ERR_ARG, "%s has no steps (an empty trace?)", trace_name(job));
    return ts_fail(TS_ERR_ARG, "no step named '%s' in %s; nearest: %s", name, trace_name(job), near);
}

/* ---- values ---------------------------------------------------------------- */

static const char *command_line(ts_scene *job, char *buf, size_t size) {
    buf[0] = '\0';
    const cJSON *cl = cJSON_GetObjectItemCaseSensitive(metadata(job), "command_line");
    if (cJSON_IsString(cl) && cl->valuestring[0]) snprintf(buf, size, "%s", cl->valuestring);
    return buf;
}

/* The formula the run used (its config's pe_variant), for the PE subtitle. */
static const char *pe_formula(ts_scene *job) {
    const cJSON *v = config_item(job, "pe_variant");
    ts_pe_variant variant = TS_PE_PAPER;
    if (cJSON_IsString(v) && ts_model_pe_variant_parse(v->valuestring, &variant) != TS_OK) variant = TS_PE_PAPER;
    switch (variant) {
    case TS_PE_SEED001_ODD_EXPONENT: return "seed 001's class: PE(pos, 2i+1) = cos(pos / 10000^((2i+1)/d)), odd exponent";
    case TS_PE_SEED001_SIN_ONLY: return "seed 001's first try: PE(pos, j) = sin(pos / 10000^(j/d)) for every column j";
    case TS_PE_PAPER: break;
    }
    return "PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(\xe2\x80\xa6)";
}

/* The error for a step that kept no values, naming what to re-run with. */
static ts_status no_values(ts_scene *job, const ts_trace_step *s, const char *glob) {
    char cl[600];
    command_line(job, cl, sizeof cl);
    const char *kept = s->has_stats ? "statistics" : "shapes";
    if (job->rq.lesson_keys) /* a lesson's own words; its run's command line is a cache's temporary file */
        return ts_fail(TS_ERR_ARG, "%s kept %s but no values: give the setup 'level: values' (and 'only: %s' to keep "
                                   "just this step's values)", s->name, kept, glob);
    if (cl[0])
        return ts_fail(TS_ERR_ARG, "%s kept %s but no values in %s; re-run with --level values --only '%s' (the run was: %s%s)",
                    s->name, kept, trace_name(job), glob, strncmp(cl, "tscope ", 7) == 0 ? "" : "tscope ", cl);
    return ts_fail(TS_ERR_ARG, "%s kept %s but no values in %s; re-run `tscope run` with --level values --only '%s'", s->name, kept,
                trace_name(job), glob);
}

/* Tags whose tensors have no batch dim (see trace.h). */
static bool has_batch_dim(const ts_trace_step *s) {
    return s->rank >= 2 && ts_tag_batched(s->tag);
}

/* The values of step i as a tensor, with the batch element asked for chosen
 * (dim 0 then has size 1). */
static ts_status step_tensor(ts_scene *job, int64_t i, const char *glob, ts_tensor *out) {
    const ts_trace_step *s = ts_trace_step_at(job->t, i);
    if (!s->has_values) return no_values(job, s, glob);
    if (ts_trace_tensor(job->t, i, out) != TS_OK) return ts_fail(TS_ERR_FORMAT, "%s: %s", s->name, ts_last_error());
    if (!has_batch_dim(s)) return TS_OK;
    job->used |= TS_SCENE_USED_BATCH;
    int64_t b = job->rq.batch;
    if (s->batch_index >= 0) {
        if (b != s->batch_index)
            return ts_fail(TS_ERR_ARG, "%s kept batch element %d only (--keep-batch); use --batch %d", s->name, s->batch_index,
                        s->batch_index);
        b = 0;
    } else if (b < 0 || b >= out->shape[0]) {
        return ts_fail(TS_ERR_ARG, "--batch %d is not a batch element of %s (dim 0 has %lld: 0..%lld)", job->rq.batch, s->name,
                    (long long)out->shape[0], (long long)out->shape[0] - 1);
    }
    ts_tensor sl;
    if (ts_tensor_slice(&sl, out, 0, b, 1) != TS_OK) return ts_fail(TS_ERR_ARG, "%s", ts_last_error());
    *out = sl;
    return TS_OK;
}

/* The 2-D matrix of t along dims (r, c), the other dims at index[]. */
static ts_render_matrix matrix_of(const ts_tensor *t, int r, int c, const int64_t *index) {
    const float *p = t->data;
    for (int d = 0; d < t->rank; d++)
        if (d != r && d != c) p += index[d] * t->stride[d];
    ts_render_matrix m = {.values = p,
                          .rows = r >= 0 ? (int)t->shape[r] : 1,
                          .cols = (int)t->shape[c],
                          .row_stride = r >= 0 ? t->stride[r] : t->shape[c] * t->stride[c],
                          .col_stride = t->stride[c]};
    if (m.row_stride == 0) m.row_stride = 1; /* a size-1 dim: never stepped over */
    return m;
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

/* ---- labels ---------------------------------------------------------------- */

/* Whose tokens a step's positions are: the decoder's (and the logits the
 * decoder feeds) are the target's, the rest the source's. */
static ts_trace_side query_side(const char *name) {
    return strncmp(name, "decoder.", 8) == 0 || strcmp(name, "logits") == 0 || strcmp(name, "probs") == 0
               ? TS_TRACE_TARGET : TS_TRACE_SOURCE;
}

static ts_trace_side key_side(const char *name) {
    return strstr(name, ".cross_attn.") ? TS_TRACE_SOURCE : query_side(name);
}

/* Token strings for n positions, or NULL when the trace has none that fit. */
static const char *const *tokens_for(ts_scene *job, ts_trace_side side, int64_t n) {
    /* one stack (a decoder-only model): its logits are the source's positions */
    if (side == TS_TRACE_TARGET && ts_trace_token_count(job->t, TS_TRACE_TARGET) == 0) side = TS_TRACE_SOURCE;
    /* a batch of different texts (a training trace's probes, several sentences) labels each element
     * with its own; the plain lists are element 0's, so another element without its own gets none */
    bool per_batch = ts_trace_batch_token_count(job->t, side, 0) > 0;
    if (!per_batch && job->rq.batch > 0) return NULL;
    int64_t have = per_batch ? ts_trace_batch_token_count(job->t, side, job->rq.batch) : ts_trace_token_count(job->t, side);
    if (have != n || n <= 0) return NULL;
    const char **labels = own(job, sizeof *labels * (size_t)n);
    if (!labels) return NULL;
    for (int64_t i = 0; i < n; i++)
        labels[i] = per_batch ? ts_trace_batch_token(job->t, side, job->rq.batch, (int)i)
                              : ts_trace_token(job->t, side, (int)i);
    return labels;
}

static void shape_text(char *buf, size_t size, const ts_trace_step *s) {
    ts_shape_format(buf, size, s->rank, s->shape, TS_SHAPE_PLAIN);
}

/* ---- attention -------------------------------------------------------------- */

/* What a step's values are, as the trace says: its tag; a gradient's (tag
 * grad, named grad.X) is the tag of X, the step it is the gradient of. */
static ts_tag kind_tag(ts_scene *job, const ts_trace_step *s) {
    if (s->tag != TS_TAG_GRAD || strncmp(s->name, "grad.", 5) != 0) return s->tag;
    int64_t i = ts_trace_find(job->t, s->name + 5);
    return i >= 0 ? ts_trace_step_at(job->t, i)->tag : s->tag;
}

/* Scores or weights of attention (B, H, Sq, Sk), or their gradients. */
static bool is_attention(ts_scene *job, const ts_trace_step *s) {
    ts_tag tag = kind_tag(job, s);
    return s->rank == 4 && (tag == TS_TAG_ATTN_SCORES || tag == TS_TAG_ATTN_WEIGHTS);
}

/* For attention weights, the mask is where the step of op mask beside them
 * (same module: `masked`) is -inf. */
static const unsigned char *mask_for(ts_scene *job, const char *name, const ts_tensor *heads, int h) {
    int64_t at = ts_trace_find(job->t, name);
    const char *dot = strrchr(name, '.');
    if (at < 0 || !dot || ts_trace_step_at(job->t, at)->tag != TS_TAG_ATTN_WEIGHTS) return NULL;
    char sibling[300];
    snprintf(sibling, sizeof sibling, "%.*s.masked", (int)(dot - name), name);
    int64_t i = ts_trace_find(job->t, sibling);
    if (i < 0) return NULL;
    const ts_trace_step *s = ts_trace_step_at(job->t, i);
    if (s->op != TS_OP_MASK || !s->has_values) return NULL;
    ts_tensor mt;
    if (step_tensor(job, i, sibling, &mt) != TS_OK) return NULL;
    if (mt.rank != 4 || mt.shape[1] != heads->shape[1] || mt.shape[2] != heads->shape[2] ||
        mt.shape[3] != heads->shape[3])
        return NULL;
    int64_t rows = mt.shape[2], cols = mt.shape[3];
    unsigned char *mask = own(job, (size_t)(rows * cols));
    if (!mask) return NULL;
    bool any = false;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            float v = mt.data[h * mt.stride[1] + r * mt.stride[2] + c * mt.stride[3]];
            mask[r * cols + c] = isinf(v) && v < 0;
            any |= mask[r * cols + c];
        }
    return any ? mask : NULL;
}

/* The padding of the queries' side for the batch element shown: rows of
 * padded queries, which PyTorch computes but leaves unspecified, are padding
 * and drawn as such (the run traced src_/tgt_key_padding_mask, 1 = pad).
 * NULL when the run had none. */
static const float *padded_rows(ts_scene *job, ts_trace_side side, int64_t rows) {
    const char *pads = side == TS_TRACE_TARGET ? "tgt_key_padding_mask" : "src_key_padding_mask";
    int64_t i = ts_trace_find(job->t, pads);
    if (i < 0) return NULL;
    const ts_trace_step *s = ts_trace_step_at(job->t, i);
    ts_tensor pt;
    if (!s->has_values || step_tensor(job, i, pads, &pt) != TS_OK) return NULL;
    if (pt.rank != 2 || pt.shape[1] != rows || !ts_tensor_is_contiguous(&pt)) return NULL;
    return pt.data;
}

/* Rows of a (positions x anything) picture whose position is padding, as a
 * cell mask: a padded position's numbers are computed but stand for no token
 * (padded queries, a greedy decoder's rows after <eos>, a short sentence's
 * tail). NULL when no row is padding. */
static unsigned char *padded_position_rows(ts_scene *job, ts_trace_side side, int64_t rows, int64_t cols) {
    const float *pad = padded_rows(job, side, rows);
    bool any = false;
    for (int64_t r = 0; pad && r < rows; r++) any |= pad[r] != 0.0f;
    if (!any) return NULL;
    unsigned char *mask = own(job, (size_t)(rows * cols));
    if (!mask) return NULL;
    for (int64_t r = 0; r < rows; r++) memset(mask + r * cols, pad[r] != 0.0f, (size_t)cols);
    return mask;
}

/* The -inf cells of the `masked` sibling and the padded query rows, as one mask. */
static const unsigned char *attention_mask(ts_scene *job, const char *name, const ts_tensor *t, int h) {
    const unsigned char *cells = mask_for(job, name, t, h);
    int64_t rows = t->shape[2], cols = t->shape[3];
    unsigned char *mask = padded_position_rows(job, query_side(name), rows, cols);
    if (!mask) return cells;
    for (int64_t i = 0; cells && i < rows * cols; i++) mask[i] |= cells[i];
    return mask;
}

static ts_status head_matrix(ts_scene *job, const ts_trace_step *s, const ts_tensor *t, int h, ts_render_matrix *m) {
    int64_t index[4] = {0, h, 0, 0};
    *m = matrix_of(t, 2, 3, index);
    m->row_labels = tokens_for(job, query_side(s->name), t->shape[2]);
    m->col_labels = tokens_for(job, key_side(s->name), t->shape[3]);
    m->mask = attention_mask(job, s->name, t, h);
    return TS_OK;
}

static void attention_axes(ts_render_heatmap_opts *o, const char *name, bool tokens) {
    bool cross = strstr(name, ".cross_attn.") != NULL;
    if (tokens) {
        o->row_axis = cross ? "query (decoder)" : "query";
        o->col_axis = cross ? "key (encoder)" : "key";
    } else {
        o->row_axis = cross ? "query position (decoder)" : "query position";
        o->col_axis = cross ? "key position (encoder)" : "key position";
    }
}

/* A next-token distribution (the softmax of the logits, `probs`) runs from
 * 0 to 1: its colour bar does too, so 1.0 has its tick and equal colours in
 * two pictures are equal chances. Attention weights keep a scale of their
 * own: a head spread over 200 keys (weights near 0.005) would be one dark
 * square on 0 to 1. */
static const ts_render_scale probability_scale = {TS_CMAP_VIRIDIS, 0, 1};

static bool is_probability(const ts_trace_step *s) {
    return s->op == TS_OP_SOFTMAX && s->tag == TS_TAG_LOGITS && s->has_stats && s->stats.min >= 0 &&
           s->stats.max <= 1;
}

/* Side of a square picture of n x n cells, in user units. */
static int cells_side(int64_t n, double per_cell, int lo, int hi) {
    double side = (double)n * per_cell;
    return (int)fmin(hi, fmax(lo, side));
}

static ts_status build_attention_head(ts_scene *job, int64_t i) {
    const ts_trace_step *s = ts_trace_step_at(job->t, i);
    ts_tensor t;
    ts_status rc = step_tensor(job, i, s->name, &t);
    if (rc) return rc;
    int heads = (int)t.shape[1], head = job->rq.head < 0 ? 0 : job->rq.head;
    job->used |= TS_SCENE_USED_HEAD;
    if (head >= heads)
        return ts_fail(TS_ERR_ARG, "--head %d: %s has %d heads (0..%d)", head, s->name, heads, heads - 1);
    job->kind = PIC_HEATMAP;
    job->view = TS_RENDER_VIEW_HEATMAP;
    job->n = 1;
    head_matrix(job, s, &t, head, &job->m[0]);
    char shape[TS_SHAPE_TEXT_MAX];
    shape_text(shape, sizeof shape, s);
    snprintf(job->title, sizeof job->title, "%s", s->name);
    int layer = ts_name_layer(s->name);
    char lay[32] = "";
    if (layer >= 0) snprintf(lay, sizeof lay, "layer %d \xc2\xb7 ", layer);
    snprintf(job->subtitle, sizeof job->subtitle, "%shead %d of %d \xc2\xb7 batch %d \xc2\xb7 %s %s (B, H, Sq, Sk)", lay,
             head, heads, job->rq.batch, ts_op_name(s->op), shape);
    job->hopts.title = job->title;
    job->hopts.subtitle = job->subtitle;
    if (is_probability(s)) job->hopts.fixed_scale = true, job->hopts.scale = probability_scale;
    attention_axes(&job->hopts, s->name, job->m[0].row_labels != NULL);
    int side = cells_side(t.shape[3] > t.shape[2] ? t.shape[3] : t.shape[2], 56, 300, 820);
    job->width = side + 330;
    job->height = side + 230;
    return TS_OK;
}

static ts_status build_attention_grid(ts_scene *job, int64_t i) {
    const ts_trace_step *s = ts_trace_step_at(job->t, i);
    ts_tensor t;
    ts_status rc = step_tensor(job, i, s->name, &t);
    if (rc) return rc;
    int heads = (int)t.shape[1];
    if (heads > TS_RENDER_MAX_PANELS) return ts_fail(TS_ERR_ARG, "%s has %d heads; a grid shows at most %d", s->name, heads, TS_RENDER_MAX_PANELS);
    job->kind = PIC_GRID;
    job->view = TS_RENDER_VIEW_GRID;
    job->n = heads;
    for (int h = 0; h < heads; h++) {
        head_matrix(job, s, &t, h, &job->m[h]);
        snprintf(job->names[h], sizeof job->names[h], "head %d", h);
        job->panel_titles[h] = job->names[h];
    }
    char shape[TS_SHAPE_TEXT_MAX];
    shape_text(shape, sizeof shape, s);
    snprintf(job->title, sizeof job->title, "%s", s->name);
    int layer = ts_name_layer(s->name);
    char lay[32] = "";
    if (layer >= 0) snprintf(lay, sizeof lay, " of layer %d", layer);
    snprintf(job->subtitle, sizeof job->subtitle, "all %d heads%s \xc2\xb7 batch %d \xc2\xb7 %s %s \xc2\xb7 one colour scale",
             heads, lay, job->rq.batch, ts_op_name(s->op), shape);
    job->gopts.title = job->title;
    job->gopts.subtitle = job->subtitle;
    job->gopts.panel_titles = job->panel_titles;
    if (is_probability(s)) job->gopts.fixed_scale = true, job->gopts.scale = probability_scale;
    /* Panels in rows of up to four. */
    int per_row = heads < 4 ? heads : 4, rows = (heads + per_row - 1) / per_row;
    int side = cells_side(t.shape[3], 40, 220, 330);
    job->width = per_row * (side + 18) + 260;
    job->height = rows * (side + 34) + 170;
    return TS_OK;
}

static ts_status build_overview(ts_scene *job, int64_t i) {
    const ts_trace_step *s = ts_trace_step_at(job->t, i);
    if (ts_name_layer(s->name) < 0) return ts_fail(TS_ERR_ARG, "--view overview needs a step inside a layer ('…layers.N.…'), not %s", s->name);
    char glob[300];
    ts_name_with_layer(glob, sizeof glob, s->name, 0);
    /* The glob for the re-run hint: every layer of this step. */
    char all_layers[300];
    size_t end = ts_name_layer_prefix(s->name), start = end;
    while (start > 0 && s->name[start - 1] >= '0' && s->name[start - 1] <= '9') start--;
    snprintf(all_layers, sizeof all_layers, "%.*s*%s", (int)start, s->name, s->name + end);
    int heads = 0, layers = 0;
    for (int l = 0;; l++) {
        char name[300];
        ts_name_with_layer(name, sizeof name, s->name, l);
        int64_t k = find_occurrence(job->t, name, job->rq.occurrence); /* a training trace: the record asked for */
        if (k < 0) break;
        ts_tensor t;
        ts_status rc = step_tensor(job, k, all_layers, &t);
        if (rc) return rc;
        const ts_trace_step *ls = ts_trace_step_at(job->t, k);
        if (l == 0) heads = (int)t.shape[1];
        if (t.shape[1] != heads) return ts_fail(TS_ERR_ARG, "%s has %lld heads, layer 0 has %d", name, (long long)t.shape[1], heads);
        if ((l + 1) * heads > TS_RENDER_MAX_PANELS)
            return ts_fail(TS_ERR_ARG, "%d layers x %d heads is more than the %d panels an overview holds", l + 1, heads,
                        TS_RENDER_MAX_PANELS);
        for (int h = 0; h < heads; h++) head_matrix(job, ls, &t, h, &job->m[l * heads + h]);
        snprintf(job->headers[l], sizeof job->headers[l], "layer %d", l);
        job->row_headers[l] = job->headers[l];
        layers++;
    }
    if (layers == 0) return ts_fail(TS_ERR_ARG, "no layer 0 for %s", s->name);
    for (int h = 0; h < heads; h++) {
        snprintf(job->names[h], sizeof job->names[h], "head %d", h);
        job->col_headers[h] = job->names[h];
    }
    job->kind = PIC_GRID;
    job->view = TS_RENDER_VIEW_OVERVIEW;
    job->n = layers * heads;
    snprintf(job->title, sizeof job->title, "%s", all_layers);
    snprintf(job->subtitle, sizeof job->subtitle, "%d layers \xc3\x97 %d heads \xc2\xb7 batch %d \xc2\xb7 one colour scale", layers,
             heads, job->rq.batch);
    job->gopts = (ts_render_grid_opts){.title = job->title, .subtitle = job->subtitle, .grid_rows = layers,
                                     .grid_cols = heads, .row_headers = job->row_headers,
                                     .col_headers = job->col_headers};
    int side = cells_side(job->m[0].rows, 12, 110, 170);
    job->width = heads * (side + 16) + 260;
    job->height = layers * (side + 16) + 150;
    return TS_OK;
}

/* ---- positional encoding ----------------------------------------------------- */

static ts_status build_posenc(ts_scene *job, int64_t i, pic_kind kind) {
    const ts_trace_step *s = ts_trace_step_at(job->t, i);
    ts_tensor t;
    ts_status rc = step_tensor(job, i, s->name, &t);
    if (rc) return rc;
    /* (S, D), possibly with leading dims of size 1. */
    int64_t lead = 1;
    for (int d = 0; d + 2 < t.rank; d++) lead *= t.shape[d];
    if (t.rank < 2 || lead != 1 || !ts_tensor_is_contiguous(&t))
        return ts_fail(TS_ERR_ARG, "%s is %s: a positional encoding is (positions, d_model)", s->name,
                    ts_tensor_shape_str((char[TS_SHAPE_TEXT_MAX]){0}, TS_SHAPE_TEXT_MAX, &t, TS_SHAPE_PLAIN));
    job->pe = t.data;
    job->positions = (int)t.shape[t.rank - 2];
    job->d_model = (int)t.shape[t.rank - 1];
    snprintf(job->title, sizeof job->title, "%s", s->name);
    snprintf(job->subtitle, sizeof job->subtitle, "%d positions \xc3\x97 %d dims \xc2\xb7 %s", job->positions, job->d_model,
             pe_formula(job));
    if (kind == PIC_HEATMAP) {
        job->kind = PIC_HEATMAP;
        job->view = TS_RENDER_VIEW_HEATMAP;
        job->n = 1;
        job->m[0] = (ts_render_matrix){.values = job->pe, .rows = job->positions, .cols = job->d_model};
        job->hopts = (ts_render_heatmap_opts){.title = job->title, .subtitle = job->subtitle, .row_axis = "position",
                                            .col_axis = "dimension (even: sin, odd: cos)", .fixed_scale = true,
                                            .scale = {TS_CMAP_COOLWARM, -1, 1}, .stretch = true};
        job->width = (int)fmin(1400, fmax(700, job->d_model * 6 + 300));
        job->height = (int)fmin(1100, fmax(500, job->positions * 8 + 250));
        return TS_OK;
    }
    job->kind = kind;
    job->view = kind == PIC_POSENC ? TS_RENDER_VIEW_AUTO : TS_RENDER_VIEW_CURVES;
    job->width = 1000;
    job->height = kind == PIC_POSENC ? 500 + (int)fmin(500, fmax(180, job->positions * 12)) : 560;
    return TS_OK;
}

/* ---- LayerNorm -------------------------------------------------------------- */

/* "encoder.layers.0.norm1" from "encoder.layers.0.norm1.out" (or itself). */
static void norm_prefix(ts_scene *job, const char *name, char *buf, size_t size) {
    if (ts_trace_find(job->t, name) < 0) {
        snprintf(buf, size, "%s", name);
        return;
    }
    const char *dot = strrchr(name, '.');
    snprintf(buf, size, "%.*s", dot ? (int)(dot - name) : (int)strlen(name), name);
}

static ts_status build_norm(ts_scene *job, const char *name) {
    char prefix[300], in_name[320], out_name[320], glob[320];
    norm_prefix(job, name, prefix, sizeof prefix);
    snprintf(in_name, sizeof in_name, "%s.in", prefix);
    snprintf(out_name, sizeof out_name, "%s.out", prefix);
    snprintf(glob, sizeof glob, "%s.*", prefix);
    int64_t ii = ts_trace_find(job->t, in_name), io = ts_trace_find(job->t, out_name);
    if (ii < 0 || io < 0)
        return ts_fail(TS_ERR_ARG, "--view stats shows a LayerNorm: %s needs the steps %s and %s", name, in_name, out_name);
    ts_tensor tin, tout;
    ts_status rc = step_tensor(job, ii, glob, &tin);
    if (rc) return rc;
    if ((rc = step_tensor(job, io, glob, &tout))) return rc;
    if (!ts_tensor_is_contiguous(&tin) || !ts_tensor_is_contiguous(&tout) || !ts_tensor_same_shape(&tin, &tout) ||
        tin.rank < 2)
        return ts_fail(TS_ERR_ARG, "%s and %s do not have the same (B, S, D) shape", in_name, out_name);
    int64_t dim = tin.shape[tin.rank - 1], seq = ts_tensor_numel(&tin) / dim;
    job->norm = (ts_render_norm){.in = tin.data, .out = tout.data, .seq = (int)seq, .dim = (int)dim};
    job->norm.tokens = tokens_for(job, query_side(prefix), seq);
    const char *params[2] = {"gamma", "beta"};
    const float *pv[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        char pn[320];
        snprintf(pn, sizeof pn, "%s.%s", prefix, params[k]);
        int64_t ip = ts_trace_find(job->t, pn);
        ts_tensor tp;
        if (ip < 0 || !ts_trace_step_at(job->t, ip)->has_values) continue;
        if (ts_trace_tensor(job->t, ip, &tp) != TS_OK || ts_tensor_numel(&tp) != dim) continue;
        pv[k] = tp.data;
    }
    job->norm.gamma = pv[0];
    job->norm.beta = pv[0] && pv[1] ? pv[1] : NULL;
    if (!job->norm.beta) job->norm.gamma = NULL;
    job->kind = PIC_NORM;
    job->view = TS_RENDER_VIEW_STATS;
    snprintf(job->title, sizeof job->title, "%s", prefix);
    snprintf(job->subtitle, sizeof job->subtitle, "LayerNorm over d_model = %lld \xc2\xb7 batch %d \xc2\xb7 %lld tokens",
             (long long)dim, job->rq.batch, (long long)seq);
    job->width = 1200;
    job->height = 760;
    return TS_OK;
}

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
    int a, b;
    char extra;
    if (sscanf(job->rq.axes, "%d,%d%c", &a, &b, &extra) != 2)
        return ts_fail(TS_ERR_ARG, "--axes expects two dims like 1,2, not '%s'", job->rq.axes);
    if (a < 0) a += t->rank;
    if (b < 0) b += t->rank;
    if (a < 0 || b < 0 || a >= t->rank || b >= t->rank || a == b)
        return ts_fail(TS_ERR_ARG, "--axes %s: pick two different dims of a rank-%d tensor", job->rq.axes, t->rank);
    *r = a;
    *c = b;
    return TS_OK;
}

/* Labels for a vocabulary axis of n entries: the tokenizer a language
 * model's trace keeps in its metadata, when it has n tokens; else NULL. */
static const char *const *vocab_labels(ts_scene *job, int64_t n) {
    const cJSON *tj = cJSON_GetObjectItemCaseSensitive(metadata(job), "tokenizer");
    char *text = tj ? cJSON_PrintUnformatted(tj) : NULL;
    ts_lmtok tok;
    bool ok = text && ts_lmtok_from_json(&tok, text) == TS_OK;
    free(text);
    if (!ok) return NULL;
    const char **labels = NULL;
    char *buf = NULL;
    if (tok.count == n && n > 0 && n <= 4096) {
        labels = own(job, sizeof *labels * (size_t)n);
        buf = own(job, (size_t)n * 32);
    }
    for (int64_t v = 0; labels && buf && v < n; v++) {
        ts_lmtok_label(&tok, (int32_t)v, buf + v * 32, 32);
        labels[v] = buf + v * 32;
    }
    ts_lmtok_free(&tok);
    return labels && buf ? labels : NULL;
}

/* Labels for a vocabulary axis of n ids when the trace came from a text
 * read by tscope's word tokenizer: the word each id of the `input` step
 * stands for, the special ids by name, the others by number. NULL when the
 * trace has no such text. */
static const char *const *words_of_ids(ts_scene *job, int64_t n) {
    int64_t i = ts_trace_find(job->t, "input");
    if (i < 0 || n <= 0 || n > 4096) return NULL;
    const ts_trace_step *s = ts_trace_step_at(job->t, i);
    int64_t S = s->rank == 2 ? s->shape[1] : 0;
    const float *v;
    if (S < 1 || !s->has_values || s->batch_index >= 0 || ts_trace_token_count(job->t, TS_TRACE_SOURCE) != S ||
        ts_trace_values(job->t, i, &v) != TS_OK)
        return NULL;
    const char **labels = own(job, sizeof *labels * (size_t)n);
    enum { NUMBER = 24 };
    char *numbers = own(job, (size_t)n * NUMBER);
    if (!labels || !numbers) return NULL;
    int named = 0;
    for (int64_t k = 0; k < S; k++) { /* batch element 0's words */
        int64_t id = (int64_t)v[k];
        if (v[k] != floorf(v[k]) || id < 0 || id >= n) return NULL;
        if (!labels[id]) named++;
        labels[id] = ts_trace_token(job->t, TS_TRACE_SOURCE, (int)k);
    }
    if (named == 0) return NULL;
    for (int64_t id = 0; id < n; id++) {
        if (labels[id]) continue;
        const char *special = ts_tokenizer_special_name((int32_t)id);
        snprintf(numbers + id * NUMBER, NUMBER, "%lld", (long long)id);
        labels[id] = special ? special : numbers + id * NUMBER;
    }
    return labels;
}

/* What a dim of a traced tensor means, from its place and rank: (B, S, D)
 * and (B, H, S, hd) are the shapes a learner meets. */
static const char *axis_name(ts_scene *job, const ts_trace_step *s, const ts_tensor *t, int d, bool tokens) {
    if (d < 0) return NULL;
    bool batched = has_batch_dim(s);
    if (batched && t->rank == 3 && s->tag == TS_TAG_LOGITS) return d == 1 ? (tokens ? "token" : "position") : "vocabulary id";
    if (batched && t->rank == 3) return d == 1 ? (tokens ? "token" : "position") : "feature";
    if (batched && t->rank == 4 && s->tag == TS_TAG_HEADS) return d == 1 ? "head" : d == 2 ? "position" : "head dim";
    if (batched && t->rank == 4 && is_attention(job, s)) return d == 1 ? "head" : d == 2 ? "query" : "key";
    if (s->tag == TS_TAG_POSENC && t->rank == 2) return d == 0 ? "position" : "feature"; /* (S, D) */
    if (s->tag == TS_TAG_HEAD_SCORES && t->rank == 2) /* a sweep's (layers, heads + 1): the FFN last */
        return d == 0 ? "layer" : strncmp(s->name, "ablate.", 7) == 0 ? "head (the last column: the FFN)" : "head";
    return d == t->rank - 1 ? "last dim" : "dim";
}

/* The gradient-norm threshold the training run clipped at; 0: none, or the
 * trace does not say. */
static double training_clip(ts_scene *job) {
    const cJSON *v = metadata_item(job, "training", "clip");
    return cJSON_IsNumber(v) && v->valuedouble > 0 ? v->valuedouble : 0;
}

/* A whole number of the traced model's config ("heads", "d_model"); 0 when
 * the trace does not say. */
static int config_int(ts_scene *job, const char *key) {
    const cJSON *v = config_item(job, key);
    return cJSON_IsNumber(v) ? v->valueint : 0;
}

/* Whether the traced model ran a seed's mistake (its config's "variant"
 * names it): seed000-reshape's concat does not hold one head after another;
 * seed004-residual's block reads its attention nowhere. */
static bool has_variant(ts_scene *job, const char *variant) {
    const cJSON *v = config_item(job, "variant");
    return cJSON_IsString(v) && strstr(v->valuestring, variant) != NULL;
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
    if (!parts && has_variant(job, "seed000-reshape")) return; /* the bug scrambles the heads */
    int groups = parts ? n_parts * (per_head ? heads : 1) : heads;
    if (m->cols != groups * hd) return;
    const char **labels = own(job, sizeof *labels * (size_t)groups);
    enum { LABEL = 32 };
    char *text = own(job, (size_t)groups * LABEL);
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

static ts_status build_tensor(ts_scene *job, int64_t i) {
    const ts_trace_step *s = ts_trace_step_at(job->t, i);
    ts_tensor t;
    ts_status rc = step_tensor(job, i, s->name, &t);
    if (rc) return rc;
    int r, c;
    if ((rc = choose_axes(job, &t, &r, &c))) return rc;
    /* (B, S) ids: the batch element is one row, shown as such; only --axes may not name dim 0 */
    if (has_batch_dim(s) && job->rq.axes && (r == 0 || c == 0))
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
        if ((has_batch_dim(s) && d == 0) || at >= sizeof fixed) continue;
        const char *what = axis_name(job, s, &t, d, false);
        if (strcmp(what, "head") == 0) /* "head 3", not "dim 1 = 3" */
            at += (size_t)snprintf(fixed + at, sizeof fixed - at, " \xc2\xb7 head %lld", (long long)index[d]);
        else
            at += (size_t)snprintf(fixed + at, sizeof fixed - at, " \xc2\xb7 dim %d = %lld", d, (long long)index[d]);
    }
    job->m[0] = matrix_of(&t, r, c, index);
    /* positions of (B, S, D) and of (B, H, S, hd) are tokens when the trace names them */
    bool positions = r >= 0 && t.shape[r] == s->shape[r] &&
                     ((s->rank == 3 && r == (has_batch_dim(s) ? 1 : 0)) ||
                      (s->rank == 4 && r == 2 && strcmp(axis_name(job, s, &t, r, false), "position") == 0));
    /* keys and values of a cross-attention are the source's positions */
    bool keyed = ends_with(s->name, ".k") || ends_with(s->name, ".v");
    if (positions) {
        ts_trace_side side = keyed ? key_side(s->name) : query_side(s->name);
        job->m[0].row_labels = tokens_for(job, side, t.shape[r]);
        if (!job->m[0].mask) job->m[0].mask = padded_position_rows(job, side, job->m[0].rows, job->m[0].cols);
    }
    /* a language model's logits (or draws): the last dim is the vocabulary */
    if (c >= 0 && c == t.rank - 1) job->m[0].col_labels = vocab_labels(job, t.shape[c]);
    bool logits = s->tag == TS_TAG_LOGITS || strcmp(s->name, "logits") == 0 || strcmp(s->name, "grad.logits") == 0;
    if (logits && !job->m[0].col_labels && c == t.rank - 1) job->m[0].col_labels = words_of_ids(job, t.shape[c]);
    if (c >= 0 && c == t.rank - 1) column_groups(job, s, &job->m[0]);
    if ((rc = step_stats(job->t, i, &job->stats, &job->hist))) return rc;
    char shape[TS_SHAPE_TEXT_MAX];
    shape_text(shape, sizeof shape, s);
    snprintf(job->title, sizeof job->title, "%s", s->name);
    if (has_batch_dim(s))
        snprintf(job->subtitle, sizeof job->subtitle, "%s %s \xc2\xb7 batch %d \xc2\xb7 rows: dim %d, columns: dim %d%s",
                 ts_op_name(s->op), shape, job->rq.batch, r, c, fixed);
    else
        snprintf(job->subtitle, sizeof job->subtitle, "%s %s \xc2\xb7 rows: dim %d, columns: dim %d%s", ts_op_name(s->op),
                 shape, r, c, fixed);
    job->kind = PIC_TENSOR;
    job->view = TS_RENDER_VIEW_HEATMAP;
    job->tensor = (ts_render_tensor_view){.slice = job->m[0], .title = job->title, .subtitle = job->subtitle,
                                        .row_axis = job->m[0].row_labels && s->rank == 4 ? "token" : axis_name(job, s, &t, r, job->m[0].row_labels != NULL),
                                        .col_axis = job->m[0].col_labels ? "next token (the vocabulary)" : axis_name(job, s, &t, c, false),
                                        .stats = s->has_stats ? &job->stats : NULL,
                                        .hist = s->has_stats ? &job->hist : NULL};
    if (is_probability(s)) job->tensor.fixed_scale = true, job->tensor.scale = probability_scale;
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
static bool is_token_ids(ts_trace *t, int64_t i) {
    const ts_trace_step *s = ts_trace_step_at(t, i);
    if (s->op != TS_OP_INPUT || s->rank != 2 || !s->has_values || s->batch_index >= 0) return false;
    const float *v;
    if (ts_trace_values(t, i, &v) != TS_OK) return false;
    for (int64_t k = 0; k < s->values_count; k++)
        if (v[k] != floorf(v[k]) || v[k] < 0) return false;
    return true;
}

static ts_status build_ids(ts_scene *job, int64_t i) {
    const ts_trace_step *s = ts_trace_step_at(job->t, i);
    if (job->rq.batch < 0 || job->rq.batch >= s->shape[0])
        return ts_fail(TS_ERR_ARG, "--batch %d: %s has %lld sequences", job->rq.batch, s->name, (long long)s->shape[0]);
    const float *v;
    TS_TRY(ts_trace_values(job->t, i, &v));
    int n = (int)s->shape[1];
    char shape[TS_SHAPE_TEXT_MAX];
    shape_text(shape, sizeof shape, s);
    snprintf(job->title, sizeof job->title, "%s", s->name);
    snprintf(job->subtitle, sizeof job->subtitle, "token ids %s \xc2\xb7 batch %d", shape, job->rq.batch);
    job->ids = (ts_render_ids_view){.ids = v + (int64_t)job->rq.batch * n, .n = n, .title = job->title,
                                  .subtitle = job->subtitle, .tokens = tokens_for(job, query_side(s->name), n)};
    job->kind = PIC_IDS;
    job->view = TS_RENDER_VIEW_HEATMAP;
    job->width = 1000;
    job->height = ts_render_ids_height(n, job->width);
    return TS_OK;
}

/* ---- the logit lens --------------------------------------------------------- */

static bool is_lens(const char *name) { return strncmp(name, "lens.layers.", 12) == 0; }

/* Every lens.layers.N of the trace (tscope run --lens) for the batch element
 * asked for: each position's most likely next token and its probability. */
static ts_status build_lens(ts_scene *job) {
    int layers = 0;
    char name[48];
    for (;; layers++) {
        snprintf(name, sizeof name, "lens.layers.%d", layers);
        if (ts_trace_find(job->t, name) < 0) break;
    }
    int64_t i0 = ts_trace_find(job->t, "lens.layers.0");
    const ts_trace_step *s0 = ts_trace_step_at(job->t, i0);
    if (s0->rank != 3) return ts_fail(TS_ERR_ARG, "lens.layers.0 is not (B, S, V)");
    int B = (int)s0->shape[0], S = (int)s0->shape[1], V = (int)s0->shape[2];
    if (job->rq.batch >= B) return ts_fail(TS_ERR_ARG, "--batch %d: the lens has %d sequences", job->rq.batch, B);
    int *top = own(job, sizeof(int) * (size_t)layers * S);
    float *prob = own(job, sizeof(float) * (size_t)layers * S);
    int *next = own(job, sizeof(int) * (size_t)S);
    if (!top || !prob || !next) return ts_fail(TS_ERR_NOMEM, "no memory for the lens");
    for (int l = 0; l < layers; l++) {
        snprintf(name, sizeof name, "lens.layers.%d", l);
        int64_t i = ts_trace_find(job->t, name);
        const ts_trace_step *s = ts_trace_step_at(job->t, i);
        if (s->rank != 3 || s->shape[1] != S || s->shape[2] != V || s->shape[0] != B)
            return ts_fail(TS_ERR_ARG, "%s has another shape than lens.layers.0", name);
        const float *v;
        TS_TRY(ts_trace_values(job->t, i, &v));
        if (s->batch_index >= 0 && s->batch_index != job->rq.batch)
            return ts_fail(TS_ERR_ARG, "%s keeps batch element %d only", name, s->batch_index);
        const float *rows = v + (s->batch_index >= 0 ? 0 : (int64_t)job->rq.batch * S * V);
        for (int q = 0; q < S; q++) {
            const float *row = rows + (int64_t)q * V;
            int best = 0;
            for (int k = 1; k < V; k++) best = row[k] > row[best] ? k : best;
            top[l * S + q] = best;
            prob[l * S + q] = row[best];
        }
        ts_trace_release_values(job->t, i);
    }
    /* the token that does come next, from the input's ids */
    int64_t in = ts_trace_find(job->t, "input");
    const ts_trace_step *si = in >= 0 ? ts_trace_step_at(job->t, in) : NULL;
    const float *ids = NULL;
    if (si && si->rank == 2 && si->shape[1] == S && si->batch_index < 0 && ts_trace_values(job->t, in, &ids) != TS_OK)
        ids = NULL;
    for (int q = 0; q < S; q++)
        next[q] = ids && q + 1 < S ? (int)ids[(int64_t)job->rq.batch * S + q + 1] : -1;
    snprintf(job->title, sizeof job->title, "logit lens: lens.layers.0 to %d", layers - 1);
    snprintf(job->subtitle, sizeof job->subtitle, "%d layers \xc3\x97 %d positions \xc2\xb7 batch %d \xc2\xb7 vocabulary of %d",
             layers, S, job->rq.batch, V);
    char edits[200];
    if (ts_trace_step_edits(job->t, NULL, edits, sizeof edits)) { /* the lens of an edited model says so */
        size_t n = strlen(job->subtitle);
        snprintf(job->subtitle + n, sizeof job->subtitle - n, " \xc2\xb7 EDITED RUN: %s", edits);
    }
    job->lens = (ts_render_lens_view){.layers = layers, .positions = S, .top = top, .prob = prob,
                                    .vocab = vocab_labels(job, V), .tokens = tokens_for(job, TS_TRACE_SOURCE, S),
                                    .next = next, .title = job->title, .subtitle = job->subtitle};
    job->kind = PIC_LENS;
    job->view = TS_RENDER_VIEW_LENS;
    ts_render_lens_size(layers, S, &job->width, &job->height);
    return TS_OK;
}

/* ---- lines ---------------------------------------------------------------- */

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
    float *y = own(job, sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (!y) return ts_fail(TS_ERR_NOMEM, "no memory for %d values", n);
    int k = 0;
    for (int64_t i = ts_trace_find(job->t, name); i >= 0; i = ts_trace_find_next(job->t, i))
        y[k++] = (float)scalar_value(job->t, i);
    snprintf(label, label_size, "%s", name);
    *out = (ts_render_series){.label = label, .y = y, .n = n, .color = -1};
    return TS_OK;
}

static const float *snapshot_steps(ts_scene *job, int n);

/* Curves over a name's records mark the record asked for (the viewer's
 * current snapshot), on every curve. */
static void mark_occurrence(ts_scene *job) {
    if (!job->rq.mark_occurrence) return;
    for (int k = 0; k < job->n_series; k++) {
        job->series[k].mark = true;
        job->series[k].mark_at = job->rq.occurrence >= 0 ? job->rq.occurrence : job->series[k].n - 1;
    }
}

static ts_status build_scalar_curves(ts_scene *job, const ts_trace_step *s) {
    ts_status rc = series_of(job, s->name, &job->series[0], job->series_labels[0], sizeof job->series_labels[0]);
    if (rc) return rc;
    job->n_series = 1;
    snprintf(job->title, sizeof job->title, "%s", s->name);
    /* A training trace: loss above the gradient norms recorded beside it. */
    if (ends_with(s->name, "loss")) {
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
    const float *steps = ends_with(s->name, ".step") ? NULL : snapshot_steps(job, job->series[0].n);
    job->series[0].x = steps;
    mark_occurrence(job);
    job->popts = (ts_render_plot_opts){.title = job->title, .subtitle = job->subtitle, .x_label = steps ? "training step" : "record",
                                     .y_label = ends_with(s->name, "loss") ? "loss (nats)" : s->name,
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
    float *v = own(job, sizeof(float) * (size_t)(*n > 0 ? *n : 1) * (size_t)each);
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
static ts_status build_head_scores(ts_scene *job, const ts_trace_step *s) {
    if (s->rank != 2) return ts_fail(TS_ERR_ARG, "%s: per-head scores are (layers, heads), not rank %d", s->name, s->rank);
    int L = (int)s->shape[0], H = (int)s->shape[1], LH = L * H, n = 0;
    float *v;
    ts_status rc = records_of(job, s->name, LH, &v, &n);
    if (rc) return rc;
    const float *x = snapshot_steps(job, n);
    /* the heads to draw: all, or those whose best is highest */
    int pick[MAX_SERIES], n_pick = 0, room = MAX_SERIES - 1;
    float *best = own(job, sizeof(float) * (size_t)LH);
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
static ts_status build_position_curves(ts_scene *job, const ts_trace_step *s) {
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
                                     .y_label = ends_with(s->name, "loss") ? "loss (nats)" : s->name,
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
static ts_status build_column_curves(ts_scene *job, int64_t i) {
    ts_status rc = build_tensor(job, i);
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

/* ---- a next-token distribution ------------------------------------------------ */

/* A step of scores or chances over a vocabulary: (B, S, V) logits or their
 * softmax (run's `probs`, generate's `generate.probs`). */
static bool is_vocab_step(const ts_trace_step *s) {
    return s->tag == TS_TAG_LOGITS || strcmp(s->name, "logits") == 0 || ends_with(s->name, "probs");
}

/* The top tokens at one position (rq.position, -1 the last): from the
 * softmax when the step is one, else the softmax of the logits at
 * temperature 1; the logits beside them when the trace kept them. */
static ts_status build_dist(ts_scene *job, int64_t i) {
    const ts_trace_step *s = ts_trace_step_at(job->t, i);
    if (!is_vocab_step(s) || s->rank != 3 || !has_batch_dim(s))
        return ts_fail(TS_ERR_ARG, "--view dist draws a next-token distribution from (B, S, V) logits or their softmax "
                                   "(run's probs step); %s is not one", s->name);
    ts_tensor t;
    ts_status rc = step_tensor(job, i, s->name, &t);
    if (rc) return rc;
    int64_t S = t.shape[1], V = t.shape[2];
    int64_t pos = job->rq.position < 0 ? S + job->rq.position : job->rq.position;
    job->used |= TS_SCENE_USED_POSITION;
    if (pos < 0 || pos >= S)
        return ts_fail(TS_ERR_ARG, "--position %d: %s has %lld positions (0..%lld, or -1 for the last)", job->rq.position,
                       s->name, (long long)S, (long long)S - 1);
    if (job->rq.top_k < 0 || job->rq.top_k > TS_RENDER_DIST_MAX)
        return ts_fail(TS_ERR_ARG, "--top %d: draw 1 to %d tokens", job->rq.top_k, TS_RENDER_DIST_MAX);
    float *probs = own(job, sizeof(float) * (size_t)V), *logits = NULL;
    if (!probs) return ts_fail(TS_ERR_NOMEM, "no memory for the distribution");
    const float *row = t.data + pos * t.stride[1];
    bool softmax = s->op == TS_OP_SOFTMAX;
    for (int64_t v = 0; v < V; v++) probs[v] = row[v * t.stride[2]];
    if (!softmax) { /* logits: their chances at temperature 1 */
        logits = own(job, sizeof(float) * (size_t)V);
        if (!logits) return ts_fail(TS_ERR_NOMEM, "no memory for the distribution");
        memcpy(logits, probs, sizeof(float) * (size_t)V);
        double mx = -INFINITY, z = 0;
        for (int64_t v = 0; v < V; v++) mx = fmax(mx, logits[v]);
        for (int64_t v = 0; v < V; v++) z += exp(logits[v] - mx);
        for (int64_t v = 0; v < V; v++) probs[v] = (float)(exp(logits[v] - mx) / z);
    } else { /* the logits of the same pass, when kept with values and of the same shape */
        int64_t li = ts_trace_find(job->t, "logits");
        ts_tensor lt;
        const ts_trace_step *ls = li >= 0 ? ts_trace_step_at(job->t, li) : NULL;
        if (strcmp(s->name, "probs") == 0 && ls && ls->has_values && ls->rank == 3 && ls->shape[1] == S &&
            ls->shape[2] == V && step_tensor(job, li, ls->name, &lt) == TS_OK) {
            logits = own(job, sizeof(float) * (size_t)V);
            if (!logits) return ts_fail(TS_ERR_NOMEM, "no memory for the distribution");
            for (int64_t v = 0; v < V; v++) logits[v] = lt.data[pos * lt.stride[1] + v * lt.stride[2]];
        }
    }
    const char *const *vocab = vocab_labels(job, V);
    if (!vocab) vocab = words_of_ids(job, V);
    const char *const *tokens = tokens_for(job, query_side(s->name), S);
    /* the token the text has next, when the trace's tokens are the vocabulary's */
    int actual = -1;
    if (tokens && vocab && pos + 1 < S)
        for (int64_t v = 0; v < V && actual < 0; v++)
            if (vocab[v] && tokens[pos + 1] && strcmp(vocab[v], tokens[pos + 1]) == 0) actual = (int)v;
    job->kind = PIC_DIST;
    job->view = TS_RENDER_VIEW_DIST;
    snprintf(job->title, sizeof job->title, "%s", s->name);
    char after[160] = "";
    if (tokens) {
        /* the text up to this position, its end: what the model has read */
        char text[120] = "";
        int64_t from = pos;
        for (size_t len = strlen(tokens[pos] ? tokens[pos] : ""); from > 0; from--) {
            size_t l = strlen(tokens[from - 1] ? tokens[from - 1] : "");
            if (len + l > 40) break;
            len += l;
        }
        size_t at = 0;
        for (int64_t k = from; k <= pos && at + 1 < sizeof text; k++) {
            const char *w = tokens[k] ? tokens[k] : "";
            /* a space reads as one in running text: the label's visible blank goes */
            at += (size_t)snprintf(text + at, sizeof text - at, "%s", strcmp(w, "\xe2\x90\xa3") == 0 ? " " : w);
        }
        snprintf(after, sizeof after, " after \xe2\x80\x9c%s%s\xe2\x80\x9d", from > 0 ? "\xe2\x80\xa6" : "", text);
    }
    snprintf(job->subtitle, sizeof job->subtitle, "the next token at position %lld of %lld%s \xc2\xb7 %s", (long long)pos,
             (long long)S, after, softmax ? "probabilities as traced" : "softmax of the logits at temperature 1");
    int k = job->rq.top_k > 0 ? job->rq.top_k : 10;
    if (k > V) k = (int)V;
    job->dist = (ts_render_dist_view){.probs = probs, .logits = logits, .labels = vocab, .n = (int)V, .top_k = k,
                                    .actual = actual, .title = job->title, .subtitle = job->subtitle};
    job->width = 900;
    job->height = ts_render_dist_height(k);
    return TS_OK;
}

/* ---- shapes ----------------------------------------------------------------- */

/* Whether the traced model normalizes before each sublayer ("norm": "pre"). */
static bool pre_norm(ts_scene *job) {
    const cJSON *norm = config_item(job, "norm");
    return cJSON_IsString(norm) && strcmp(norm->valuestring, "pre") == 0;
}

static ts_status build_shapes(ts_scene *job, const char *name) {
    char prefix[300];
    if (ts_trace_find(job->t, name) >= 0 && !is_module(job->t, name)) {
        const char *dot = strrchr(name, '.');
        snprintf(prefix, sizeof prefix, "%.*s", dot ? (int)(dot - name) : (int)strlen(name), name);
    } else {
        snprintf(prefix, sizeof prefix, "%s", name);
    }
    char glob[320];
    snprintf(glob, sizeof glob, "%s.*", prefix);
    job->steps = own(job, sizeof *job->steps * MAX_SHAPE_STEPS);
    if (!job->steps) return ts_fail(TS_ERR_NOMEM, "no memory for the steps");
    int n = 0;
    for (int64_t i = ts_trace_find_glob(job->t, glob, 0); i >= 0 && n < MAX_SHAPE_STEPS;
         i = ts_trace_find_glob(job->t, glob, i + 1)) {
        const ts_trace_step *s = ts_trace_step_at(job->t, i);
        if (ts_trace_find(job->t, s->name) != i) break; /* a second pass (training): the flow is the first */
        ts_render_step *st = &job->steps[n++];
        st->name = s->name;
        st->op = ts_op_name(s->op);
        st->rank = s->rank;
        memcpy(st->shape, s->shape, sizeof st->shape);
    }
    if (n == 0) return ts_fail(TS_ERR_ARG, "no steps under %s", prefix);
    job->n_steps = n;
    job->kind = PIC_SHAPES;
    job->view = TS_RENDER_VIEW_SHAPES;
    snprintf(job->title, sizeof job->title, "%s", prefix);
    ts_render_wiring wiring = {pre_norm(job), has_variant(job, "seed004-residual")};
    ts_render_steps_link(job->steps, n, &wiring);
    ts_render_shapes_size(job->steps, n, &job->width, &job->height);
    return TS_OK;
}

/* ---- choosing ------------------------------------------------------------------ */

static ts_status build(ts_scene *job, ts_render_view view) {
    const char *name = job->rq.name;
    int64_t i = find_occurrence(job->t, name, job->rq.occurrence);
    /* The overview draws every layer, so a glob over the layers names it as
     * well as one layer's step does ('encoder.layers.*.self_attn.weights'). */
    if (i < 0 && view == TS_RENDER_VIEW_OVERVIEW && strpbrk(name, "*?[")) {
        int64_t g = ts_trace_find_glob(job->t, name, 0);
        if (g >= 0) i = find_occurrence(job->t, ts_trace_step_at(job->t, g)->name, job->rq.occurrence);
    }
    bool module = i < 0 && is_module(job->t, name);
    if (i < 0 && ts_trace_find(job->t, name) >= 0)
        return ts_fail(TS_ERR_ARG, "%s has no record number %d in %s (records of one name count from 0)", name, job->rq.occurrence,
                    trace_name(job));
    if (i < 0 && !module) return unknown_name(job, name);
    if (module) {
        if (view == TS_RENDER_VIEW_SHAPES || view == TS_RENDER_VIEW_AUTO) return build_shapes(job, name);
        char out[320];
        snprintf(out, sizeof out, "%s.out", name);
        if (view == TS_RENDER_VIEW_STATS && ts_trace_find(job->t, out) >= 0) return build_norm(job, name);
        return ts_fail(TS_ERR_ARG, "%s is a module, not a step: use --view shapes, or name one of its steps", name);
    }
    const ts_trace_step *s = ts_trace_step_at(job->t, i);
    job->step = s;
    bool attention = is_attention(job, s);
    bool norm = s->tag == TS_TAG_NORM_IN || s->tag == TS_TAG_NORM_OUT || s->tag == TS_TAG_NORM_STAT;
    /* the sines and cosines; a learned position table is a weight like any other, drawn as one */
    bool sinusoid = s->tag == TS_TAG_POSENC && s->op == TS_OP_POSENC;
    /* token ids are categories in every view that would draw them as numbers on a scale */
    if ((view == TS_RENDER_VIEW_AUTO || view == TS_RENDER_VIEW_LENS) && is_lens(s->name)) return build_lens(job);
    if (view == TS_RENDER_VIEW_LENS)
        return ts_fail(TS_ERR_ARG, "--view lens draws the logit lens, steps lens.layers.N (tscope run --lens); %s is not "
                                   "one", s->name);
    if ((view == TS_RENDER_VIEW_AUTO || view == TS_RENDER_VIEW_HEATMAP || view == TS_RENDER_VIEW_STATS) &&
        is_token_ids(job->t, i))
        return build_ids(job, i);
    if (view == TS_RENDER_VIEW_DIST) return build_dist(job, i);
    if (view == TS_RENDER_VIEW_AUTO) {
        if (strcmp(s->name, "probs") == 0 && s->rank == 3) return build_dist(job, i);
        if (attention) return (job->rq.head >= 0) ? build_attention_head(job, i) : build_attention_grid(job, i);
        if (sinusoid) return build_posenc(job, i, PIC_POSENC);
        if (norm) return build_norm(job, s->name);
        if (s->tag == TS_TAG_SCALAR || s->numel == 1) return build_scalar_curves(job, s);
        if (s->tag == TS_TAG_HEAD_SCORES && strncmp(s->name, "ablate.", 7) == 0) return build_tensor(job, i);
        if (s->tag == TS_TAG_HEAD_SCORES) return build_head_scores(job, s);
        if (s->tag == TS_TAG_PER_POSITION) return build_position_curves(job, s);
        return build_tensor(job, i);
    }
    switch (view) {
    case TS_RENDER_VIEW_HEATMAP:
        if (attention) return build_attention_head(job, i);
        if (sinusoid) return build_posenc(job, i, PIC_HEATMAP);
        return build_tensor(job, i);
    case TS_RENDER_VIEW_GRID:
        if (s->rank != 4)
            return ts_fail(TS_ERR_ARG, "--view grid shows the heads of a (B, H, S, S) step; %s has rank %d", s->name, s->rank);
        return build_attention_grid(job, i);
    case TS_RENDER_VIEW_OVERVIEW:
        if (s->rank != 4)
            return ts_fail(TS_ERR_ARG, "--view overview shows layers x heads of a (B, H, S, S) step; %s has rank %d", s->name, s->rank);
        return build_overview(job, i);
    case TS_RENDER_VIEW_CURVES:
        if (sinusoid) return build_posenc(job, i, PIC_PE_CURVES);
        if (s->tag == TS_TAG_SCALAR || s->numel == 1) return build_scalar_curves(job, s);
        if (s->tag == TS_TAG_HEAD_SCORES) return build_head_scores(job, s);
        if (s->tag == TS_TAG_PER_POSITION) return build_position_curves(job, s);
        return build_column_curves(job, i);
    case TS_RENDER_VIEW_STATS:
        if (norm) return build_norm(job, s->name);
        return build_tensor(job, i);
    case TS_RENDER_VIEW_SHAPES: return build_shapes(job, s->name);
    default: return ts_fail(TS_ERR_ARG, "scene: unknown view %d", (int)view);
    }
}

static ts_status draw_kind(ts_scene *job, cairo_t *cr, ts_render_rect area, const ts_render_state *st,
                           ts_render_layout *layout) {
    switch (job->kind) {
    case PIC_HEATMAP: return ts_render_heatmap(cr, area, &job->m[0], &job->hopts, st, layout);
    case PIC_GRID: return ts_render_grid(cr, area, job->m, job->n, &job->gopts, st, layout);
    case PIC_POSENC:
        return ts_render_posenc(cr, area, job->pe, job->positions, job->d_model, job->rq.dims, job->rq.n_dims, job->title,
                                job->subtitle, layout);
    case PIC_PE_CURVES:
        return ts_render_pe_curves(cr, area, job->pe, job->positions, job->d_model, job->rq.dims, job->rq.n_dims, job->title,
                                   job->subtitle);
    case PIC_PLOT: return ts_render_plot(cr, area, job->series, job->n_series, &job->popts);
    case PIC_TRAINING:
        return ts_render_training(cr, area, &job->series[0], job->series + 1, job->n_series - 1, job->clip, job->title,
                                  job->subtitle);
    case PIC_NORM: return ts_render_layernorm(cr, area, &job->norm, job->title, job->subtitle);
    case PIC_TENSOR: return ts_render_tensor(cr, area, &job->tensor, st, layout);
    case PIC_SHAPES: return ts_render_shapes(cr, area, job->steps, job->n_steps, job->title, NULL);
    case PIC_IDS: return ts_render_ids(cr, area, &job->ids);
    case PIC_LENS: return ts_render_lens(cr, area, &job->lens);
    case PIC_DIST: return ts_render_dist(cr, area, &job->dist);
    }
    return ts_fail(TS_ERR_ARG, "scene: unknown picture");
}

/* An SVG's cell tooltips (svg_tips.c), with the grid's panel titles. */
static void svg_tips(const ts_scene *s, cairo_t *cr, const ts_render_layout *l) {
    const ts_render_matrix *m[TS_RENDER_MAX_PANELS];
    for (int i = 0; i < l->n_panels; i++) m[i] = ts_scene_matrix(s, i);
    ts_render__svg_tips(cr, l, m, s->kind == PIC_GRID ? s->gopts.panel_titles : NULL);
}

ts_status ts_scene_draw(ts_scene *s, cairo_t *cr, ts_render_rect area, const ts_render_state *st,
                        ts_render_layout *layout) {
    ts_render_layout *own = NULL;
    if (!layout && ts_render_svg_recording(cr)) layout = own = calloc(1, sizeof *own);
    if (layout) memset(layout, 0, sizeof *layout);
    ts_status r = draw_kind(s, cr, area, st, layout);
    if (r == TS_OK && layout && layout->n_panels > 0 && ts_render_svg_recording(cr)) svg_tips(s, cr, layout);
    free(own);
    return r;
}

ts_scene_request ts_scene_request_default(const char *name) {
    ts_scene_request rq = {.name = name, .view = TS_RENDER_VIEW_AUTO, .batch = 0, .head = -1, .occurrence = 0,
                           .position = -1, .top_k = 0};
    return rq;
}

/* A step an experiment edited (tscope run --ablate, --patch) says so in its
 * title: what it shows is not what the model computed there. */
static void mark_edited(ts_scene *s) {
    char edits[200];
    if (!s->step || !ts_trace_step_edits(s->t, s->step->name, edits, sizeof edits)) return;
    size_t n = strlen(s->title);
    snprintf(s->title + n, sizeof s->title - n, " \xc2\xb7 EDITED: %s", edits);
}

ts_status ts_scene_build(ts_scene **out, ts_trace *t, const ts_scene_request *rq) {
    *out = NULL;
    if (!t || !rq || !rq->name || !rq->name[0]) return ts_fail(TS_ERR_ARG, "scene: no step name to draw");
    if (rq->batch < 0) return ts_fail(TS_ERR_ARG, "--batch %d: batch elements count from 0", rq->batch);
    ts_scene *s = calloc(1, sizeof *s);
    if (!s) return ts_fail(TS_ERR_NOMEM, "scene: out of memory");
    s->t = t;
    s->rq = *rq;
    ts_status st = build(s, rq->view);
    cJSON_Delete(s->meta); /* what the picture needs of it is copied by now */
    s->meta = NULL;
    if (st) {
        ts_scene_free(s);
        return st;
    }
    mark_edited(s);
    *out = s;
    return TS_OK;
}

void ts_scene_free(ts_scene *s) {
    if (!s) return;
    for (int i = 0; i < s->n_owned; i++) free(s->owned[i]);
    free(s);
}

void ts_scene_size(const ts_scene *s, int *width, int *height) {
    if (width) *width = s->width;
    if (height) *height = s->height;
}

ts_render_view ts_scene_view(const ts_scene *s) { return s->view; }

const char *ts_scene_view_name(const ts_scene *s) {
    return s->view == TS_RENDER_VIEW_AUTO ? "posenc" : ts_render_view_name(s->view);
}

const ts_trace_step *ts_scene_step(const ts_scene *s) { return s->step; }

unsigned ts_scene_used(const ts_scene *s) { return s->used; }

const ts_render_matrix *ts_scene_matrix(const ts_scene *s, int panel) {
    switch (s->kind) {
    case PIC_HEATMAP:
    case PIC_GRID: return panel >= 0 && panel < s->n ? &s->m[panel] : NULL;
    case PIC_TENSOR: return panel == 0 ? &s->tensor.slice : NULL;
    default: return NULL;
    }
}

bool ts_scene_color_scale(const ts_scene *s, ts_render_scale *out) {
    switch (s->kind) {
    case PIC_HEATMAP:
        *out = s->hopts.fixed_scale ? s->hopts.scale : ts_render_scale_auto(s->m, 1);
        return true;
    case PIC_GRID:
        *out = s->gopts.fixed_scale ? s->gopts.scale : ts_render_scale_auto(s->m, s->n);
        return true;
    case PIC_TENSOR:
        *out = s->tensor.fixed_scale ? s->tensor.scale : ts_render_scale_auto(&s->tensor.slice, 1);
        return true;
    default: return false;
    }
}

void ts_scene_set_color_scale(ts_scene *s, ts_render_scale scale) {
    switch (s->kind) {
    case PIC_HEATMAP:
        s->hopts.fixed_scale = true;
        s->hopts.scale = scale;
        break;
    case PIC_GRID:
        s->gopts.fixed_scale = true;
        s->gopts.scale = scale;
        break;
    case PIC_TENSOR:
        s->tensor.fixed_scale = true;
        s->tensor.scale = scale;
        break;
    default: break;
    }
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
                                         .y_label = a->title};
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

void ts_scene_set_title(ts_scene *s, const char *title) {
    if (!title || !title[0]) return;
    /* the step's name moves to the front of the subtitle: a slide's title
     * in its own words, the figure still saying what it is drawn from */
    char sub[sizeof s->subtitle + sizeof s->title + 8];
    if (s->subtitle[0]) snprintf(sub, sizeof sub, "%s \xc2\xb7 %s", s->title, s->subtitle);
    else snprintf(sub, sizeof sub, "%s", s->title);
    snprintf(s->subtitle, sizeof s->subtitle, "%.599s", sub);
    snprintf(s->title, sizeof s->title, "%s", title);
}
