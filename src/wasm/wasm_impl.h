/* wasm_impl: the live page's session, shared by wasm_live.c (the passes)
 * and wasm_views.c (the views laid out as a display list). */
#ifndef TSCOPE_WASM_IMPL_H
#define TSCOPE_WASM_IMPL_H

#include <stdbool.h>

#include "tscope/experiment.h"
#include "tscope/model.h"
#include "tscope/tokenizer.h"
#include "tscope/wasm.h"

/* One model's state over the text: the model with the heads knocked out
 * (run[0], watched) or the plain one (run[1], for "before"). */
typedef struct tsw_run {
    ts_kv_cache kv;
    int32_t *ids;     /* (cap) the tokens the cache holds */
    int n;            /* how many */
    bool valid;       /* false: the cache holds nothing reusable */
    float *logits;    /* (cap, V) */
    float *attn;      /* (L, H, cap, cap) every head's attention rows (run[0] only) */
    int32_t *lens_id; /* (L, cap) the lens's most likely next token (run[0] only) */
    float *lens_p;    /* (L, cap) its probability */
} tsw_run;

/* A rectangle of the last layout: where a click lands on a head. */
typedef struct tsw_box {
    double x, y, w, h;
} tsw_box;

struct tsw_session {
    ts_model m;
    ts_lmtok tok;
    bool open;           /* m and tok hold something to free */
    int L, H, V, D, cap;
    int32_t *ids;        /* (cap) the tokens read now */
    int n, skipped;
    tsw_run run[2];
    char *knocked;       /* (L * H) 1: the head is out */
    int n_knocked;
    ts_experiment ex;    /* the knock-outs as ablations */
    int pos0;            /* the first position of the rows being decoded */
    float *stream, *normed; /* (kv rows, D) the lens's scratch */
    float *lens_logits;  /* (kv rows, V) */
    float *loss;         /* (cap) */
    double *loss_d;      /* (cap) */
    float *probs, *before; /* (V) */
    char label[256];
    tsw_box *heads;      /* (L * H) the grid's heads in the last layout */
};

#endif
