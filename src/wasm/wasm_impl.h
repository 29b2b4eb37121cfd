/* wasm_impl: the live page's session, shared by wasm_live.c (the calls the
 * page makes of experiment.h's live session) and wasm_views.c (the views
 * painted into a display list). */
#ifndef TSCOPE_WASM_IMPL_H
#define TSCOPE_WASM_IMPL_H

#include "tscope/experiment.h"
#include "tscope/render.h"
#include "tscope/wasm.h"

struct tsw_session {
    ts_live_session *ls; /* the model over the text: the same session `tscope live`'s views run */
    ts_dl dl;            /* the views of the last tsw_draw */
    ts_canvas canvas;    /* painting into dl; its hit regions are the grid's heads */
};

#endif
