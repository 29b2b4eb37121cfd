/* scene_norm: what a LayerNorm or an RMSNorm does (its input and output,
 * per token, with gamma and beta, or an RMSNorm's rms, y and scale, when the
 * trace kept them). Part of the scene (scene_impl.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scene_impl.h"

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

ts_status scene_build_norm(ts_scene *job, const char *name) {
    char prefix[300], in_name[320], out_name[320], glob[320];
    norm_prefix(job, name, prefix, sizeof prefix);
    snprintf(in_name, sizeof in_name, "%s.in", prefix);
    snprintf(out_name, sizeof out_name, "%s.out", prefix);
    snprintf(glob, sizeof glob, "%s.*", prefix);
    int64_t ii = ts_trace_find(job->t, in_name), io = ts_trace_find(job->t, out_name);
    if (ii < 0 || io < 0)
        return ts_fail(TS_ERR_ARG, "--view stats shows a norm: %s needs the steps %s and %s", name, in_name, out_name);
    ts_tensor tin, tout;
    ts_status rc = scene_step_tensor(job, ii, glob, &tin);
    if (rc) return rc;
    if ((rc = scene_step_tensor(job, io, glob, &tout))) return rc;
    if (!ts_tensor_is_contiguous(&tin) || !ts_tensor_is_contiguous(&tout) || !ts_tensor_same_shape(&tin, &tout) ||
        tin.rank < 2)
        return ts_fail(TS_ERR_ARG, "%s and %s do not have the same (B, S, D) shape", in_name, out_name);
    int64_t dim = tin.shape[tin.rank - 1], seq = ts_tensor_numel(&tin) / dim;
    job->norm = (ts_render_norm){.in = tin.data, .out = tout.data, .seq = (int)seq, .dim = (int)dim};
    job->norm.tokens = scene_tokens_for(job, scene_query_side(prefix), seq);
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
    /* An RMSNorm hands over rms (B, S, 1) and y where a LayerNorm has mean and std. */
    char rms_name[320], y_name[320];
    snprintf(rms_name, sizeof rms_name, "%s.rms", prefix);
    snprintf(y_name, sizeof y_name, "%s.y", prefix);
    int64_t ir = ts_trace_find(job->t, rms_name);
    const char *kind = "LayerNorm";
    if (ir >= 0) {
        ts_tensor tr, ty;
        if ((rc = scene_step_tensor(job, ir, glob, &tr))) return rc;
        if (ts_tensor_numel(&tr) != seq || !ts_tensor_is_contiguous(&tr))
            return ts_fail(TS_ERR_ARG, "%s is not one number a token of %s", rms_name, in_name);
        job->norm.rms = tr.data;
        int64_t iy = ts_trace_find(job->t, y_name);
        if (iy >= 0 && ts_trace_step_at(job->t, iy)->has_values && scene_step_tensor(job, iy, glob, &ty) == TS_OK &&
            ts_tensor_same_shape(&ty, &tin) && ts_tensor_is_contiguous(&ty))
            job->norm.y = ty.data;
        job->norm.gamma = pv[0];
        job->norm.beta = NULL;
        ts_model_config c;
        job->norm.one_plus = scene_model_config(job, &c) && c.norm_kind == TS_NORMK_RMS_GEMMA;
        kind = job->norm.one_plus ? "RMSNorm (Gemma's: scale 1 + w)" : "RMSNorm";
    }
    job->kind = PIC_NORM;
    job->view = TS_RENDER_VIEW_STATS;
    snprintf(job->title, sizeof job->title, "%s", prefix);
    snprintf(job->subtitle, sizeof job->subtitle, "%s over d_model = %lld \xc2\xb7 batch %d \xc2\xb7 %lld tokens", kind,
             (long long)dim, job->rq.batch, (long long)seq);
    job->width = 1200;
    job->height = 760;
    return TS_OK;
}
