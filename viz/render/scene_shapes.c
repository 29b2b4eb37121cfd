/* scene_shapes: a module's steps as a dataflow graph of shapes. Part of the
 * scene (scene_impl.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scene_impl.h"

/* ---- shapes ----------------------------------------------------------------- */

/* Whether the traced model normalizes before each sublayer ("norm": "pre"). */
static bool pre_norm(ts_scene *job) {
    const cJSON *norm = scene_config_item(job, "norm");
    return cJSON_IsString(norm) && strcmp(norm->valuestring, "pre") == 0;
}

ts_status scene_build_shapes(ts_scene *job, const char *name) {
    char prefix[300];
    if (ts_trace_find(job->t, name) >= 0 && !scene_is_module(job->t, name)) {
        const char *dot = strrchr(name, '.');
        snprintf(prefix, sizeof prefix, "%.*s", dot ? (int)(dot - name) : (int)strlen(name), name);
    } else {
        snprintf(prefix, sizeof prefix, "%s", name);
    }
    char glob[320];
    snprintf(glob, sizeof glob, "%s.*", prefix);
    job->steps = scene_own(job, sizeof *job->steps * MAX_SHAPE_STEPS);
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
    ts_render_wiring wiring = {pre_norm(job), scene_has_variant(job, "seed004-residual")};
    ts_render_steps_link(job->steps, n, &wiring);
    ts_render_shapes_size(job->steps, n, &job->width, &job->height);
    return TS_OK;
}
