/* scene_rope: RoPE's view of a q_rot or k_rot step: the turning drawn from
 * the traced model's config (head_dim, rotated dims, theta, pair style, by
 * the model's own helpers), and checked against the trace: the layer's q
 * turned by the same formula must give its q_rot. Part of the scene
 * (scene_impl.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scene_impl.h"

#define ROPE_MIN_POSITIONS 48 /* enough for the slow pairs to move */
#define ROPE_MAX_POSITIONS 1024

bool scene_is_rope(const ts_trace_step *s) {
    return s->op == TS_OP_ROPE && (scene_ends_with(s->name, ".q_rot") || scene_ends_with(s->name, ".k_rot"));
}

/* The largest |q_rot - turn(q)| over the step's elements (batch element
 * shown), q turned at positions 0.. as the forward's rope_table does; and
 * the largest |q|. false when the trace lacks either step's values. */
static bool rotation_diff(ts_scene *job, const char *prefix, const ts_render_rope_view *v, double *diff, double *size) {
    char qn[320], rn[320];
    snprintf(qn, sizeof qn, "%s.q", prefix);
    snprintf(rn, sizeof rn, "%s.q_rot", prefix);
    int64_t iq = ts_trace_find(job->t, qn), ir = ts_trace_find(job->t, rn);
    if (iq < 0 || ir < 0 || !ts_trace_step_at(job->t, iq)->has_values || !ts_trace_step_at(job->t, ir)->has_values)
        return false;
    ts_tensor q, r;
    if (scene_step_tensor(job, iq, qn, &q) != TS_OK || scene_step_tensor(job, ir, rn, &r) != TS_OK) return false;
    if (q.rank != 4 || !ts_tensor_same_shape(&q, &r) || q.shape[3] != v->head_dim) return false;
    int half = v->rotary / 2;
    *diff = *size = 0;
    for (int64_t h = 0; h < q.shape[1]; h++)
        for (int64_t p = 0; p < q.shape[2]; p++) {
            const float *a = q.data + h * q.stride[1] + p * q.stride[2];
            const float *b = r.data + h * r.stride[1] + p * r.stride[2];
            for (int64_t d = 0; d < q.shape[3]; d++) {
                double want = a[d * q.stride[3]];
                if (d < v->rotary) {
                    int i = (int)(v->interleaved ? d / 2 : d % half);
                    int lo = v->interleaved ? 2 * i : i, hi = v->interleaved ? 2 * i + 1 : i + half;
                    double ang = (double)p * pow(v->theta, -2.0 * i / v->rotary), c = cos(ang), s = sin(ang);
                    double xl = a[lo * q.stride[3]], xh = a[hi * q.stride[3]];
                    want = d == lo ? xl * c - xh * s : xh * c + xl * s;
                }
                *diff = fmax(*diff, fabs(want - b[d * r.stride[3]]));
                *size = fmax(*size, fabs(want));
            }
        }
    return true;
}

ts_status scene_build_rope(ts_scene *job, int64_t i) {
    const ts_trace_step *s = ts_trace_step_at(job->t, i);
    ts_model_config c;
    if (!scene_model_config(job, &c) || c.pe != TS_PE_ROPE)
        return ts_fail(TS_ERR_ARG, "--view rope draws the turning of RoPE from the traced model's config; %s's model "
                                   "%s", s->name, c.heads > 0 ? "does not use RoPE (its pe is not rope)" : "is not in the trace's metadata");
    const char *leaf = strrchr(s->name, '.');
    bool keys = leaf && strcmp(leaf, ".k_rot") == 0;
    char prefix[300];
    snprintf(prefix, sizeof prefix, "%.*s", leaf ? (int)(leaf - s->name) : (int)strlen(s->name), s->name);
    int seq = s->rank == 4 ? (int)s->shape[2] : 0;
    int positions = seq > ROPE_MIN_POSITIONS ? seq : ROPE_MIN_POSITIONS;
    if (positions > ROPE_MAX_POSITIONS) positions = ROPE_MAX_POSITIONS;
    job->rope = (ts_render_rope_view){.head_dim = ts_model_head_dim(&c), .rotary = ts_model_rotary_dims(&c),
                                      .theta = ts_model_rope_theta(&c), .interleaved = c.rope_style == TS_ROPE_INTERLEAVED,
                                      .positions = positions, .seq = seq, .title = job->title, .subtitle = job->subtitle};
    if (job->rope.rotary < 2 || job->rope.rotary % 2 || job->rope.rotary > job->rope.head_dim)
        return ts_fail(TS_ERR_ARG, "%s: the config's RoPE turns %d of %d dims, not a whole number of pairs", s->name,
                       job->rope.rotary, job->rope.head_dim);
    double diff, size;
    if (rotation_diff(job, prefix, &job->rope, &diff, &size)) {
        if (diff <= 1e-4 * fmax(1, size))
            snprintf(job->rope_check, sizeof job->rope_check,
                     "Checked on this trace:\nthe layer's q_rot is its q turned so\n(largest difference %.1e)", diff);
        else
            snprintf(job->rope_check, sizeof job->rope_check,
                     "Not this trace's turning:\nthe layer's q_rot differs from its q\nturned so, by up to %.3g", diff);
        job->rope.check = job->rope_check;
    }
    char shape[TS_SHAPE_TEXT_MAX];
    scene_shape_text(shape, sizeof shape, s);
    int layer = ts_name_layer(s->name);
    char what[TS_SHAPE_TEXT_MAX + 80] = "the traced model's queries and keys"; /* --view rope on another step */
    if (scene_is_rope(s) && layer >= 0)
        snprintf(what, sizeof what, "layer %d's %s %s", layer, keys ? "keys" : "queries", shape);
    else if (scene_is_rope(s))
        snprintf(what, sizeof what, "the %s %s", keys ? "keys" : "queries", shape);
    snprintf(job->title, sizeof job->title, "%s", s->name);
    snprintf(job->subtitle, sizeof job->subtitle,
             "RoPE turns %s \xc2\xb7 head_dim %d, \xce\xb8 = %g, %s \xc2\xb7 drawn from the model's config", what,
             job->rope.head_dim, job->rope.theta, job->rope.interleaved ? "interleaved pairs" : "rotate-half pairs");
    job->kind = PIC_ROPE;
    job->view = TS_RENDER_VIEW_ROPE;
    job->width = 1200;
    job->height = 860;
    return TS_OK;
}
