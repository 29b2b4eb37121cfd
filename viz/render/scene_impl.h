/* scene_impl: what the scene's files share and nobody else uses: the scene
 * itself (the job a build fills and a draw reads), its owned blocks, the
 * trace's metadata, a step's values and labels, and each view family's
 * builder. scene.c holds the job and the choice of a view; scene_attention.c,
 * scene_posenc.c, scene_rope.c, scene_norm.c, scene_tensor.c, scene_dist.c,
 * scene_curves.c and scene_shapes.c build one family of views each. Names
 * carry scene_:
 * private to viz/render (tscope/render.h is the public face). */
#ifndef TSCOPE_VIZ_SCENE_IMPL_H
#define TSCOPE_VIZ_SCENE_IMPL_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tscope/core.h"
#include "tscope/kernels.h"
#include "tscope/model.h"
#include "tscope/render.h"
#include "tscope/tokenizer.h"

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
    PIC_ROPE,     /* RoPE's turning and the score against distance */
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
    char names[TS_RENDER_MAX_PANELS][64];
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
    ts_render_rope_view rope; /* PIC_ROPE */
    char rope_check[200];     /* its line on the trace's own rotation */
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

/* ---- the job (scene.c) ---- */

/* A zeroed block the scene frees with itself. */
void *scene_own(ts_scene *job, size_t bytes);
/* Item `key` of the metadata's object `object` ("config": the traced
 * model's; "training": a training run's settings), or NULL. */
const cJSON *scene_metadata_item(ts_scene *job, const char *object, const char *key);
const cJSON *scene_config_item(ts_scene *job, const char *key);
/* Whether the traced model ran a seed's mistake (its config's "variant" names it). */
bool scene_has_variant(ts_scene *job, const char *variant);
/* The traced model's heads, widths, norm and RoPE choices from its config
 * (the rest zero); false when it names no heads or width. */
bool scene_model_config(ts_scene *job, ts_model_config *c);
/* Query heads per key/value head, for a step of `heads` query heads (1: none shared). */
int scene_kv_group(ts_scene *job, int64_t heads);

/* ---- names, values, labels (scene.c) ---- */

bool scene_ends_with(const char *s, const char *suffix);
bool scene_is_module(ts_trace *t, const char *prefix);              /* a step's name starts with "prefix." */
int64_t scene_find_occurrence(ts_trace *t, const char *name, int k); /* the k-th step named name (-1: the last) */
bool scene_has_batch_dim(const ts_trace_step *s);
/* The values of step i, the batch element asked for chosen (dim 0 then has
 * size 1); glob names the steps a re-run should keep. */
ts_status scene_step_tensor(ts_scene *job, int64_t i, const char *glob, ts_tensor *out);
/* The 2-D matrix of t along dims (r, c), the other dims at index[]. */
ts_render_matrix scene_matrix_of(const ts_tensor *t, int r, int c, const int64_t *index);
ts_trace_side scene_query_side(const char *name); /* whose tokens a step's positions are */
ts_trace_side scene_key_side(const char *name);   /* and its keys' */
/* Token strings for n positions, or NULL when the trace has none that fit. */
const char *const *scene_tokens_for(ts_scene *job, ts_trace_side side, int64_t n);
void scene_shape_text(char *buf, size_t size, const ts_trace_step *s);
/* Rows of a (positions x anything) picture whose position is padding, as a
 * cell mask; NULL when no row is padding. */
unsigned char *scene_padded_position_rows(ts_scene *job, ts_trace_side side, int64_t rows, int64_t cols);
/* A softmax over a vocabulary (`probs`) is drawn on 0 to 1. */
extern const ts_render_scale scene_probability_scale;
bool scene_is_probability(const ts_trace_step *s);
const char *scene_colour_means(const ts_trace_step *s); /* for the colour bar: "attention weight", or NULL */
/* Labels of a vocabulary axis of n entries: the tokenizer in the metadata,
 * or the words of a word-tokenized text's ids; NULL when there are none. */
const char *const *scene_vocab_labels(ts_scene *job, int64_t n);
const char *const *scene_words_of_ids(ts_scene *job, int64_t n);

/* ---- the views, one family a file ---- */

/* scene_attention.c */
bool scene_is_attention(ts_scene *job, const ts_trace_step *s); /* (B, H, Sq, Sk) scores or weights, or their gradients */
ts_status scene_build_attention_head(ts_scene *job, int64_t i);
ts_status scene_build_attention_grid(ts_scene *job, int64_t i);
ts_status scene_build_overview(ts_scene *job, int64_t i);
/* scene_posenc.c: kind PIC_HEATMAP, PIC_PE_CURVES or PIC_POSENC (both) */
ts_status scene_build_posenc(ts_scene *job, int64_t i, pic_kind kind);
/* scene_rope.c */
bool scene_is_rope(const ts_trace_step *s); /* q_rot, k_rot */
ts_status scene_build_rope(ts_scene *job, int64_t i);
/* scene_norm.c */
ts_status scene_build_norm(ts_scene *job, const char *name);
/* scene_tensor.c */
ts_status scene_build_tensor(ts_scene *job, int64_t i);
bool scene_is_token_ids(ts_trace *t, int64_t i);
ts_status scene_build_ids(ts_scene *job, int64_t i);
/* scene_dist.c */
ts_status scene_build_dist(ts_scene *job, int64_t i);
bool scene_is_lens(const char *name);
ts_status scene_build_lens(ts_scene *job);
/* scene_curves.c */
ts_status scene_build_scalar_curves(ts_scene *job, const ts_trace_step *s);
ts_status scene_build_head_scores(ts_scene *job, const ts_trace_step *s);
ts_status scene_build_position_curves(ts_scene *job, const ts_trace_step *s);
ts_status scene_build_column_curves(ts_scene *job, int64_t i);
/* scene_shapes.c */
ts_status scene_build_shapes(ts_scene *job, const char *name);

#endif
