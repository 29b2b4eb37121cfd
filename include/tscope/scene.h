/* scene: one step of a trace, made ready to draw.
 *
 * The glue between the trace reader and the renderers, shared by `tscope png`
 * and the viewer so both show the same picture of the same step: a scene
 * picks the view (by the step's tag, or the one asked for), gathers what it
 * needs from the trace (the batch element, a head, the causal mask from the
 * `masked` step beside attention weights, token labels from the metadata,
 * LayerNorm input/output/gamma/beta, a module's steps for the shape flow) and
 * draws it with ts_render_* into any cairo_t. Values are used in place in
 * the trace's map: the trace must stay open while the scene lives.
 *
 *     ts_scene_request rq = ts_scene_request_default("encoder.layers.0.self_attn.weights");
 *     ts_scene *sc;
 *     if (ts_scene_build(&sc, trace, &rq)) -> ts_last_error() says what is wrong, for a person
 *     ts_scene_size(sc, &w, &h);                   // a good size in points
 *     ts_scene_draw(sc, cr, area, state, &layout);  // any number of times
 *     ts_scene_free(sc);
 */
#ifndef TSCOPE_SCENE_H
#define TSCOPE_SCENE_H

#include <cairo.h>

#include "tscope/render.h"
#include "tscope/status.h"
#include "tscope/trace.h"

typedef struct ts_scene ts_scene;

typedef struct ts_scene_request {
    const char *name;       /* a step's name, or a module prefix ("encoder.layers.0.self_attn") */
    ts_render_view view;    /* TS_RENDER_VIEW_AUTO: chosen by the step's tag */
    int batch;              /* batch element (0) */
    int head;               /* one attention head; -1: all (auto then draws the grid) */
    int occurrence;         /* which record of the name, for traces that repeat names (0; -1: last) */
    const char *axes;       /* "I,J": the two dims a tensor heatmap shows; NULL: the last two */
    const char *trace_path; /* only for messages; may be NULL */
    const int *dims;        /* PE curves: the dims to draw (NULL: a choice of the renderer) */
    int n_dims;             /* up to 16 */
} ts_scene_request;

ts_scene_request ts_scene_request_default(const char *name);

/* Gather the data of one view of one step. Bad requests are TS_ERR_ARG with a
 * sentence that says what to do: an unknown name lists the nearest names; a
 * step whose values were not kept says which --level/--only to re-run with. */
ts_status ts_scene_build(ts_scene **out, ts_trace *t, const ts_scene_request *rq);

void ts_scene_free(ts_scene *s); /* NULL is fine */

/* A size in points (user units at scale 1) that suits the scene's data. */
void ts_scene_size(const ts_scene *s, int *width, int *height);

/* The view it ended up as, and a short name for files and messages
 * ("grid", "heatmap", ...; "posenc" for PE curves above the PE heatmap). */
ts_render_view ts_scene_view(const ts_scene *s);
const char *ts_scene_view_name(const ts_scene *s);

/* Draw into area of cr. st (may be NULL) and layout (may be NULL) as in
 * render.h: views without cells leave layout->n_panels at 0. */
ts_status ts_scene_draw(ts_scene *s, cairo_t *cr, ts_render_rect area, const ts_render_state *st,
                        ts_render_layout *layout);

/* The step drawn (NULL for a module's shape flow). */
const ts_trace_step *ts_scene_step(const ts_scene *s);

/* The matrix panel `panel` of the layout shows (values, strides, token
 * labels), so a viewer can name the cell under the mouse and its exact
 * value; NULL for views whose panels are not matrices of the scene. */
const ts_render_matrix *ts_scene_matrix(const ts_scene *s, int panel);

#endif
