/* scene_attention: attention as pictures: one head (heatmap), every head of a
 * layer (grid), layers x heads (overview); the -inf cells of the mask and the
 * padded queries drawn as such. Part of the scene (scene_impl.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scene_impl.h"

/* ---- attention -------------------------------------------------------------- */

/* What a step's values are, as the trace says: its tag; a gradient's (tag
 * grad, named grad.X) is the tag of X, the step it is the gradient of. */
static ts_tag kind_tag(ts_scene *job, const ts_trace_step *s) {
    if (s->tag != TS_TAG_GRAD || strncmp(s->name, "grad.", 5) != 0) return s->tag;
    int64_t i = ts_trace_find(job->t, s->name + 5);
    return i >= 0 ? ts_trace_step_at(job->t, i)->tag : s->tag;
}

/* Scores or weights of attention (B, H, Sq, Sk), or their gradients. */
bool scene_is_attention(ts_scene *job, const ts_trace_step *s) {
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
    if (scene_step_tensor(job, i, sibling, &mt) != TS_OK) return NULL;
    if (mt.rank != 4 || mt.shape[1] != heads->shape[1] || mt.shape[2] != heads->shape[2] ||
        mt.shape[3] != heads->shape[3])
        return NULL;
    int64_t rows = mt.shape[2], cols = mt.shape[3];
    unsigned char *mask = scene_own(job, (size_t)(rows * cols));
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

/* The -inf cells of the `masked` sibling and the padded query rows, as one mask. */
static const unsigned char *attention_mask(ts_scene *job, const char *name, const ts_tensor *t, int h) {
    const unsigned char *cells = mask_for(job, name, t, h);
    int64_t rows = t->shape[2], cols = t->shape[3];
    unsigned char *mask = scene_padded_position_rows(job, scene_query_side(name), rows, cols);
    if (!mask) return cells;
    for (int64_t i = 0; cells && i < rows * cols; i++) mask[i] |= cells[i];
    return mask;
}

static ts_status head_matrix(ts_scene *job, const ts_trace_step *s, const ts_tensor *t, int h, ts_render_matrix *m) {
    int64_t index[4] = {0, h, 0, 0};
    *m = scene_matrix_of(t, 2, 3, index);
    m->row_labels = scene_tokens_for(job, scene_query_side(s->name), t->shape[2]);
    m->col_labels = scene_tokens_for(job, scene_key_side(s->name), t->shape[3]);
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

/* Side of a square picture of n x n cells, in user units. */
static int cells_side(int64_t n, double per_cell, int lo, int hi) {
    double side = (double)n * per_cell;
    return (int)fmin(hi, fmax(lo, side));
}

ts_status scene_build_attention_head(ts_scene *job, int64_t i) {
    const ts_trace_step *s = ts_trace_step_at(job->t, i);
    ts_tensor t;
    ts_status rc = scene_step_tensor(job, i, s->name, &t);
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
    scene_shape_text(shape, sizeof shape, s);
    snprintf(job->title, sizeof job->title, "%s", s->name);
    int layer = ts_name_layer(s->name);
    char lay[32] = "";
    if (layer >= 0) snprintf(lay, sizeof lay, "layer %d \xc2\xb7 ", layer);
    int group = scene_kv_group(job, heads);
    char kv[48] = "";
    if (group > 1) snprintf(kv, sizeof kv, " (reads kv head %d)", head / group);
    snprintf(job->subtitle, sizeof job->subtitle, "%shead %d of %d%s \xc2\xb7 batch %d \xc2\xb7 %s %s (B, H, Sq, Sk)", lay,
             head, heads, kv, job->rq.batch, ts_op_name(s->op), shape);
    job->hopts.title = job->title;
    job->hopts.subtitle = job->subtitle;
    if (scene_is_probability(s)) job->hopts.fixed_scale = true, job->hopts.scale = scene_probability_scale;
    job->hopts.bar_label = scene_colour_means(s);
    attention_axes(&job->hopts, s->name, job->m[0].row_labels != NULL);
    int side = cells_side(t.shape[3] > t.shape[2] ? t.shape[3] : t.shape[2], 56, 300, 820);
    job->width = side + 330;
    job->height = side + 230;
    return TS_OK;
}

/* "kv 1 · heads 2, 3": key/value head g and the `group` query heads that read it. */
static void kv_group_name(char *buf, size_t size, int g, int group) {
    if (group == 2) snprintf(buf, size, "kv %d \xc2\xb7 heads %d, %d", g, g * group, g * group + 1);
    else snprintf(buf, size, "kv %d \xc2\xb7 heads %d\xe2\x80\x93%d", g, g * group, g * group + group - 1);
}

ts_status scene_build_attention_grid(ts_scene *job, int64_t i) {
    const ts_trace_step *s = ts_trace_step_at(job->t, i);
    ts_tensor t;
    ts_status rc = scene_step_tensor(job, i, s->name, &t);
    if (rc) return rc;
    int heads = (int)t.shape[1];
    if (heads > TS_RENDER_MAX_PANELS) return ts_fail(TS_ERR_ARG, "%s has %d heads; a grid shows at most %d", s->name, heads, TS_RENDER_MAX_PANELS);
    job->kind = PIC_GRID;
    job->view = TS_RENDER_VIEW_GRID;
    job->n = heads;
    /* A step of the shared key/value heads (k, v in a grouped model): each
     * panel names the query heads that read it. */
    ts_model_config c;
    int readers = scene_model_config(job, &c) && heads < c.heads && heads == ts_model_kv_heads(&c) ? c.heads / heads : 0;
    for (int h = 0; h < heads; h++) {
        head_matrix(job, s, &t, h, &job->m[h]);
        if (readers > 1)
            kv_group_name(job->names[h], sizeof job->names[h], h, readers);
        else if (readers == 1)
            snprintf(job->names[h], sizeof job->names[h], "kv head %d", h);
        else
            snprintf(job->names[h], sizeof job->names[h], "head %d", h);
        job->panel_titles[h] = job->names[h];
    }
    char shape[TS_SHAPE_TEXT_MAX];
    scene_shape_text(shape, sizeof shape, s);
    snprintf(job->title, sizeof job->title, "%s", s->name);
    int layer = ts_name_layer(s->name);
    char lay[32] = "";
    if (layer >= 0) snprintf(lay, sizeof lay, " of layer %d", layer);
    snprintf(job->subtitle, sizeof job->subtitle, "all %d %sheads%s \xc2\xb7 batch %d \xc2\xb7 %s %s \xc2\xb7 one colour scale",
             heads, readers ? "key/value " : "", lay, job->rq.batch, ts_op_name(s->op), shape);
    job->gopts.title = job->title;
    job->gopts.subtitle = job->subtitle;
    job->gopts.panel_titles = job->panel_titles;
    if (scene_is_probability(s)) job->gopts.fixed_scale = true, job->gopts.scale = scene_probability_scale;
    job->gopts.bar_label = scene_colour_means(s);
    /* Shared key/value heads: the query heads reading one are a group, named by it. */
    int group = scene_kv_group(job, heads), per_row = heads < 4 ? heads : 4;
    enum { NAME = 64 };
    char *names = group > 1 ? scene_own(job, (size_t)(heads / group) * NAME) : NULL;
    if (names) {
        for (int g = 0; g < heads / group; g++) {
            char *name = names + g * NAME;
            kv_group_name(name, NAME, g, group);
            job->row_headers[g] = name;
        }
        job->gopts.group = group;
        job->gopts.group_labels = job->row_headers;
        if (group < 4 && 4 % group != 0) per_row = group;
        size_t n = strlen(job->subtitle);
        snprintf(job->subtitle + n, sizeof job->subtitle - n, " \xc2\xb7 %d key/value head%s, each read by %d query heads",
                 heads / group, heads / group == 1 ? "" : "s", group);
    }
    /* Panels in rows of up to four. */
    int rows = (heads + per_row - 1) / per_row;
    int side = cells_side(t.shape[3], 40, 220, 330);
    job->width = per_row * (side + 18) + 260;
    job->height = rows * (side + 34 + (group > 1 ? 24 : 0)) + 170;
    return TS_OK;
}

ts_status scene_build_overview(ts_scene *job, int64_t i) {
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
        int64_t k = scene_find_occurrence(job->t, name, job->rq.occurrence); /* a training trace: the record asked for */
        if (k < 0) break;
        ts_tensor t;
        ts_status rc = scene_step_tensor(job, k, all_layers, &t);
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
                                     .col_headers = job->col_headers, .bar_label = scene_colour_means(s)};
    int side = cells_side(job->m[0].rows, 12, 110, 170);
    job->width = heads * (side + 16) + 260;
    job->height = layers * (side + 16) + 150;
    return TS_OK;
}
