/* scene_posenc: the sinusoidal positional encoding: its table as a heatmap,
 * its curves, or both, under the formula the run used. Part of the scene
 * (scene_impl.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scene_impl.h"

/* ---- positional encoding ----------------------------------------------------- */


/* The formula the run used (its config's pe_variant), for the PE subtitle. */
static const char *pe_formula(ts_scene *job) {
    const cJSON *v = scene_config_item(job, "pe_variant");
    ts_pe_variant variant = TS_PE_PAPER;
    if (cJSON_IsString(v) && ts_model_pe_variant_parse(v->valuestring, &variant) != TS_OK) variant = TS_PE_PAPER;
    switch (variant) {
    case TS_PE_SEED001_ODD_EXPONENT: return "seed 001's class: PE(pos, 2i+1) = cos(pos / 10000^((2i+1)/d)), odd exponent";
    case TS_PE_SEED001_SIN_ONLY: return "seed 001's first try: PE(pos, j) = sin(pos / 10000^(j/d)) for every column j";
    case TS_PE_PAPER: break;
    }
    return "PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(\xe2\x80\xa6)";
}

ts_status scene_build_posenc(ts_scene *job, int64_t i, pic_kind kind) {
    const ts_trace_step *s = ts_trace_step_at(job->t, i);
    ts_tensor t;
    ts_status rc = scene_step_tensor(job, i, s->name, &t);
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
    for (int k = 0; k < job->rq.n_dims; k++) /* the curves of dims the step has, or an error */
        if (job->rq.dims[k] < 0 || job->rq.dims[k] >= job->d_model)
            return ts_fail(TS_ERR_ARG, "dim %d: %s has dims 0 to %d", job->rq.dims[k], s->name, job->d_model - 1);
    if (job->rq.n_dims > 0) job->used |= TS_SCENE_USED_DIMS;
    job->kind = kind;
    job->view = kind == PIC_POSENC ? TS_RENDER_VIEW_AUTO : TS_RENDER_VIEW_CURVES;
    job->width = 1000;
    job->height = kind == PIC_POSENC ? 500 + (int)fmin(500, fmax(180, job->positions * 12)) : 560;
    return TS_OK;
}
