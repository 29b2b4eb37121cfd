/* scene: from a trace step to a picture, for `tscope png` and the viewer.
 * Each build_* gathers one view's data (pointers into the trace's map, or
 * small blocks the scene owns); ts_scene_draw hands them to the renderers.
 * This file holds the job (the scene, the metadata, a step's values and
 * labels), the choice of a view and the drawing; the views' builders live in
 * scene_*.c, one file per family, behind scene_impl.h. */
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
#include "scene_impl.h"

/* A zeroed block the scene frees with itself. */
void *scene_own(ts_scene *job, size_t bytes) {
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
const cJSON *scene_metadata_item(ts_scene *job, const char *object, const char *key) {
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(metadata(job), object), key);
}

const cJSON *scene_config_item(ts_scene *job, const char *key) { return scene_metadata_item(job, "config", key); }

static const char *trace_name(const ts_scene *s) { return s->rq.trace_path ? s->rq.trace_path : "the trace"; }

/* ---- names --------------------------------------------------------------- */

bool scene_ends_with(const char *s, const char *suffix) {
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
bool scene_is_module(ts_trace *t, const char *prefix) {
    char glob[300];
    snprintf(glob, sizeof glob, "%s.*", prefix);
    return ts_trace_find_glob(t, glob, 0) >= 0;
}

/* The k-th step named `name` (k = -1: the last). */
int64_t scene_find_occurrence(ts_trace *t, const char *name, int k) {
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
bool scene_has_batch_dim(const ts_trace_step *s) {
    return s->rank >= 2 && ts_tag_batched(s->tag);
}

/* The values of step i as a tensor, with the batch element asked for chosen
 * (dim 0 then has size 1). */
ts_status scene_step_tensor(ts_scene *job, int64_t i, const char *glob, ts_tensor *out) {
    const ts_trace_step *s = ts_trace_step_at(job->t, i);
    if (!s->has_values) return no_values(job, s, glob);
    if (ts_trace_tensor(job->t, i, out) != TS_OK) return ts_fail(TS_ERR_FORMAT, "%s: %s", s->name, ts_last_error());
    if (!scene_has_batch_dim(s)) return TS_OK;
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
ts_render_matrix scene_matrix_of(const ts_tensor *t, int r, int c, const int64_t *index) {
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

/* ---- labels ---------------------------------------------------------------- */

/* Whose tokens a step's positions are: the decoder's (and the logits the
 * decoder feeds) are the target's, the rest the source's. */
ts_trace_side scene_query_side(const char *name) {
    return strncmp(name, "decoder.", 8) == 0 || strcmp(name, "logits") == 0 || strcmp(name, "probs") == 0
               ? TS_TRACE_TARGET : TS_TRACE_SOURCE;
}

ts_trace_side scene_key_side(const char *name) {
    return strstr(name, ".cross_attn.") ? TS_TRACE_SOURCE : scene_query_side(name);
}

/* Token strings for n positions, or NULL when the trace has none that fit. */
const char *const *scene_tokens_for(ts_scene *job, ts_trace_side side, int64_t n) {
    /* one stack (a decoder-only model): its logits are the source's positions */
    if (side == TS_TRACE_TARGET && ts_trace_token_count(job->t, TS_TRACE_TARGET) == 0) side = TS_TRACE_SOURCE;
    /* a batch of different texts (a training trace's probes, several sentences) labels each element
     * with its own; the plain lists are element 0's, so another element without its own gets none */
    bool per_batch = ts_trace_batch_token_count(job->t, side, 0) > 0;
    if (!per_batch && job->rq.batch > 0) return NULL;
    int64_t have = per_batch ? ts_trace_batch_token_count(job->t, side, job->rq.batch) : ts_trace_token_count(job->t, side);
    if (have != n || n <= 0) return NULL;
    const char **labels = scene_own(job, sizeof *labels * (size_t)n);
    if (!labels) return NULL;
    for (int64_t i = 0; i < n; i++)
        labels[i] = per_batch ? ts_trace_batch_token(job->t, side, job->rq.batch, (int)i)
                              : ts_trace_token(job->t, side, (int)i);
    return labels;
}

void scene_shape_text(char *buf, size_t size, const ts_trace_step *s) {
    ts_shape_format(buf, size, s->rank, s->shape, TS_SHAPE_PLAIN);
}

/* ---- padding ------------------------------------------------------------------ */

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
    if (!s->has_values || scene_step_tensor(job, i, pads, &pt) != TS_OK) return NULL;
    if (pt.rank != 2 || pt.shape[1] != rows || !ts_tensor_is_contiguous(&pt)) return NULL;
    return pt.data;
}

/* Rows of a (positions x anything) picture whose position is padding, as a
 * cell mask: a padded position's numbers are computed but stand for no token
 * (padded queries, a greedy decoder's rows after <eos>, a short sentence's
 * tail). NULL when no row is padding. */
unsigned char *scene_padded_position_rows(ts_scene *job, ts_trace_side side, int64_t rows, int64_t cols) {
    const float *pad = padded_rows(job, side, rows);
    bool any = false;
    for (int64_t r = 0; pad && r < rows; r++) any |= pad[r] != 0.0f;
    if (!any) return NULL;
    unsigned char *mask = scene_own(job, (size_t)(rows * cols));
    if (!mask) return NULL;
    for (int64_t r = 0; r < rows; r++) memset(mask + r * cols, pad[r] != 0.0f, (size_t)cols);
    return mask;
}

/* ---- probabilities --------------------------------------------------------------- */

/* A next-token distribution (the softmax of the logits, `probs`) runs from
 * 0 to 1: its colour bar does too, so 1.0 has its tick and equal colours in
 * two pictures are equal chances. Attention weights keep a scale of their
 * own: a head spread over 200 keys (weights near 0.005) would be one dark
 * square on 0 to 1. */
const ts_render_scale scene_probability_scale = {TS_CMAP_VIRIDIS, 0, 1};

/* What a heatmap's colour means, for its colour bar (NULL: "value"). */
const char *scene_colour_means(const ts_trace_step *s) {
    if (scene_is_probability(s)) return "probability";
    if (s->tag == TS_TAG_ATTN_WEIGHTS) return "attention weight";
    if (s->tag == TS_TAG_ATTN_SCORES) return "score";
    if (s->tag == TS_TAG_GRAD) return "gradient";
    return NULL;
}

bool scene_is_probability(const ts_trace_step *s) {
    return s->op == TS_OP_SOFTMAX && s->tag == TS_TAG_LOGITS && s->has_stats && s->stats.min >= 0 &&
           s->stats.max <= 1;
}

/* ---- vocabularies ---------------------------------------------------------------- */

/* Labels for a vocabulary axis of n entries: the tokenizer a language
 * model's trace keeps in its metadata, when it has n tokens; else NULL. */
const char *const *scene_vocab_labels(ts_scene *job, int64_t n) {
    const cJSON *tj = cJSON_GetObjectItemCaseSensitive(metadata(job), "tokenizer");
    char *text = tj ? cJSON_PrintUnformatted(tj) : NULL;
    ts_lmtok tok;
    bool ok = text && ts_lmtok_from_json(&tok, text) == TS_OK;
    free(text);
    if (!ok) return NULL;
    const char **labels = NULL;
    char *buf = NULL;
    if (tok.count == n && n > 0 && n <= 4096) {
        labels = scene_own(job, sizeof *labels * (size_t)n);
        buf = scene_own(job, (size_t)n * 32);
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
const char *const *scene_words_of_ids(ts_scene *job, int64_t n) {
    int64_t i = ts_trace_find(job->t, "input");
    if (i < 0 || n <= 0 || n > 4096) return NULL;
    const ts_trace_step *s = ts_trace_step_at(job->t, i);
    int64_t S = s->rank == 2 ? s->shape[1] : 0;
    const float *v;
    if (S < 1 || !s->has_values || s->batch_index >= 0 || ts_trace_token_count(job->t, TS_TRACE_SOURCE) != S ||
        ts_trace_values(job->t, i, &v) != TS_OK)
        return NULL;
    const char **labels = scene_own(job, sizeof *labels * (size_t)n);
    enum { NUMBER = 24 };
    char *numbers = scene_own(job, (size_t)n * NUMBER);
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

/* ---- the traced model's config --------------------------------------------------- */

/* Whether the traced model ran a seed's mistake (its config's "variant"
 * names it): seed000-reshape's concat does not hold one head after another;
 * seed004-residual's block reads its attention nowhere. */
bool scene_has_variant(ts_scene *job, const char *variant) {
    const cJSON *v = scene_config_item(job, "variant");
    return cJSON_IsString(v) && strstr(v->valuestring, variant) != NULL;
}

/* The traced model's shape choices from its config (what the views of
 * today's blocks need: heads, widths, the norm, RoPE's numbers), so the
 * model's own helpers (ts_model_head_dim, ts_model_kv_heads,
 * ts_model_rotary_dims, ts_model_rope_theta) give the view the forward's
 * numbers. false when the trace names no heads or width. */
bool scene_model_config(ts_scene *job, ts_model_config *c) {
    memset(c, 0, sizeof *c);
    const cJSON *v;
    const struct {
        const char *key;
        int *to;
    } ints[] = {{"heads", &c->heads}, {"d_model", &c->d_model}, {"kv_heads", &c->kv_heads}, {"head_dim", &c->head_dim}};
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++)
        if (cJSON_IsNumber(v = scene_config_item(job, ints[k].key)) && v->valuedouble >= 0 && v->valuedouble < 1e6)
            *ints[k].to = v->valueint;
    if (cJSON_IsNumber(v = scene_config_item(job, "rotary_pct"))) c->rotary_pct = (float)v->valuedouble;
    if (cJSON_IsNumber(v = scene_config_item(job, "rope_theta"))) c->rope_theta = (float)v->valuedouble;
    if (cJSON_IsString(v = scene_config_item(job, "pe")) && ts_model_pe_parse(v->valuestring, "pe", &c->pe) != TS_OK)
        c->pe = TS_PE_SINUSOIDAL;
    if (cJSON_IsString(v = scene_config_item(job, "rope_style")) &&
        ts_model_rope_style_parse(v->valuestring, "rope_style", &c->rope_style) != TS_OK)
        c->rope_style = TS_ROPE_HALF;
    if (cJSON_IsString(v = scene_config_item(job, "norm_kind")) &&
        ts_model_norm_kind_parse(v->valuestring, "norm_kind", &c->norm_kind) != TS_OK)
        c->norm_kind = TS_NORMK_LAYER;
    if (c->kv_heads < 0 || (c->kv_heads > 0 && (c->heads % c->kv_heads) != 0)) c->kv_heads = 0;
    return c->heads > 0 && c->d_model > 0;
}

/* Query heads per key/value head of the traced model (1: each head its own,
 * plain multi-head attention), when a step's dim 1 has `heads` of them. */
int scene_kv_group(ts_scene *job, int64_t heads) {
    ts_model_config c;
    if (!scene_model_config(job, &c)) return 1;
    int kv = ts_model_kv_heads(&c);
    if (kv < 1 || kv >= c.heads || heads != c.heads) return 1;
    return c.heads / kv;
}

/* ---- choosing ------------------------------------------------------------------ */

static ts_status build(ts_scene *job, ts_render_view view) {
    const char *name = job->rq.name;
    int64_t i = scene_find_occurrence(job->t, name, job->rq.occurrence);
    /* The overview draws every layer, so a glob over the layers names it as
     * well as one layer's step does ('encoder.layers.*.self_attn.weights'). */
    if (i < 0 && view == TS_RENDER_VIEW_OVERVIEW && strpbrk(name, "*?[")) {
        int64_t g = ts_trace_find_glob(job->t, name, 0);
        if (g >= 0) i = scene_find_occurrence(job->t, ts_trace_step_at(job->t, g)->name, job->rq.occurrence);
    }
    bool module = i < 0 && scene_is_module(job->t, name);
    if (i < 0 && ts_trace_find(job->t, name) >= 0)
        return ts_fail(TS_ERR_ARG, "%s has no record number %d in %s (records of one name count from 0)", name, job->rq.occurrence,
                    trace_name(job));
    if (i < 0 && !module) return unknown_name(job, name);
    if (module) {
        if (view == TS_RENDER_VIEW_SHAPES || view == TS_RENDER_VIEW_AUTO) return scene_build_shapes(job, name);
        char out[320];
        snprintf(out, sizeof out, "%s.out", name);
        if (view == TS_RENDER_VIEW_STATS && ts_trace_find(job->t, out) >= 0) return scene_build_norm(job, name);
        return ts_fail(TS_ERR_ARG, "%s is a module, not a step: use --view shapes, or name one of its steps", name);
    }
    const ts_trace_step *s = ts_trace_step_at(job->t, i);
    job->step = s;
    bool attention = scene_is_attention(job, s);
    bool norm = s->tag == TS_TAG_NORM_IN || s->tag == TS_TAG_NORM_OUT || s->tag == TS_TAG_NORM_STAT;
    /* the sines and cosines; a learned position table is a weight like any other, drawn as one */
    bool sinusoid = s->tag == TS_TAG_POSENC && s->op == TS_OP_POSENC;
    /* token ids are categories in every view that would draw them as numbers on a scale */
    if ((view == TS_RENDER_VIEW_AUTO || view == TS_RENDER_VIEW_LENS) && scene_is_lens(s->name)) return scene_build_lens(job);
    if (view == TS_RENDER_VIEW_LENS)
        return ts_fail(TS_ERR_ARG, "--view lens draws the logit lens, steps lens.layers.N (tscope run --lens); %s is not "
                                   "one", s->name);
    if ((view == TS_RENDER_VIEW_AUTO || view == TS_RENDER_VIEW_HEATMAP || view == TS_RENDER_VIEW_STATS) &&
        scene_is_token_ids(job->t, i))
        return scene_build_ids(job, i);
    if (view == TS_RENDER_VIEW_DIST) return scene_build_dist(job, i);
    if (view == TS_RENDER_VIEW_AUTO) {
        if (strcmp(s->name, "probs") == 0 && s->rank == 3) return scene_build_dist(job, i);
        if (attention) return (job->rq.head >= 0) ? scene_build_attention_head(job, i) : scene_build_attention_grid(job, i);
        if (sinusoid) return scene_build_posenc(job, i, PIC_POSENC);
        if (norm) return scene_build_norm(job, s->name);
        if (s->tag == TS_TAG_SCALAR || s->numel == 1) return scene_build_scalar_curves(job, s);
        if (s->tag == TS_TAG_HEAD_SCORES && strncmp(s->name, "ablate.", 7) == 0) return scene_build_tensor(job, i);
        if (s->tag == TS_TAG_HEAD_SCORES) return scene_build_head_scores(job, s);
        if (s->tag == TS_TAG_PER_POSITION) return scene_build_position_curves(job, s);
        if (scene_is_rope(s)) return scene_build_rope(job, i);
        return scene_build_tensor(job, i);
    }
    switch (view) {
    case TS_RENDER_VIEW_HEATMAP:
        if (attention) return scene_build_attention_head(job, i);
        if (sinusoid) return scene_build_posenc(job, i, PIC_HEATMAP);
        return scene_build_tensor(job, i);
    case TS_RENDER_VIEW_GRID:
        if (s->rank != 4)
            return ts_fail(TS_ERR_ARG, "--view grid shows the heads of a (B, H, S, S) step; %s has rank %d", s->name, s->rank);
        return scene_build_attention_grid(job, i);
    case TS_RENDER_VIEW_OVERVIEW:
        if (s->rank != 4)
            return ts_fail(TS_ERR_ARG, "--view overview shows layers x heads of a (B, H, S, S) step; %s has rank %d", s->name, s->rank);
        return scene_build_overview(job, i);
    case TS_RENDER_VIEW_CURVES:
        if (sinusoid) return scene_build_posenc(job, i, PIC_PE_CURVES);
        if (s->tag == TS_TAG_SCALAR || s->numel == 1) return scene_build_scalar_curves(job, s);
        if (s->tag == TS_TAG_HEAD_SCORES) return scene_build_head_scores(job, s);
        if (s->tag == TS_TAG_PER_POSITION) return scene_build_position_curves(job, s);
        return scene_build_column_curves(job, i);
    case TS_RENDER_VIEW_STATS:
        if (norm) return scene_build_norm(job, s->name);
        return scene_build_tensor(job, i);
    case TS_RENDER_VIEW_SHAPES: return scene_build_shapes(job, s->name);
    case TS_RENDER_VIEW_ROPE: return scene_build_rope(job, i);
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
    case PIC_ROPE: return ts_render_rope(cr, area, &job->rope);
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
    /* a picture reads helper steps (a mask, logits, a gamma) it would otherwise draw without: never around damage */
    ts_status damaged = ts_trace_verify(t, NULL);
    if (damaged) return damaged;
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
