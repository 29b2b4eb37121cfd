/* live_rows: one step's values at every position of the live text, kept
 * from pass to pass (viz/viewer/live.c).
 *
 * Appending a token to a causal model's text cannot change any earlier
 * position, so live decodes only the new positions with a key/value cache
 * (ts_model_decode). The hook then sees each step's new rows only: here they
 * join the rows of the earlier passes, so the view still gets the step as a
 * full pass over the whole text would have made it.
 *
 * A step's rows lie along one axis, its position axis: (B, S, ...) steps
 * along 1, per-head steps (B, H, S, hd) along 2. The attention's weights and
 * masked scores (B, H, Sq, Sk) also grow along their keys: a row holds the
 * keys up to its own position and, past it, what the causal mask makes there
 * in a full pass (0 for weights, -inf for masked scores). The raw and scaled
 * scores hold real products q.k for later keys in a full pass, which a cached
 * pass never computes: those steps, and any other a cache cannot rebuild,
 * are not spliceable and live runs a full pass for them.
 */
#ifndef TSCOPE_LIVE_ROWS_H
#define TSCOPE_LIVE_ROWS_H

#include "tscope/core.h"

typedef struct live_rows {
    char name[256];
    int rank;
    int64_t shape[TS_MAX_RANK]; /* at `positions`; rank 0 before the first rows */
    int pos_axis, key_axis;     /* key_axis: -1 but for attention (B, H, Sq, Sk) */
    float fill;                 /* what a key past a row's own position holds */
    int positions;              /* rows held (shape[pos_axis]) */
    float *data;
    /* the pass under way */
    int keep, total; /* rows [0, keep) stay; the pass ends with total */
    bool pending;    /* no rows taken yet this pass */
} live_rows;

/* Whether a step of this op, tag and rank can be rebuilt from new rows, and
 * along which axes. */
bool live_rows_spliceable(ts_op op, ts_tag tag, int rank, int *pos_axis, int *key_axis, float *fill);

/* Start a pass that keeps rows [0, keep) of what is held and ends with total. */
void live_rows_begin(live_rows *r, int keep, int total);

/* A step's new rows from the hook: along the position axis they are the
 * positions ending at `end` (k and v, which read every cached key, start at
 * 0). Fails, changing nothing the view reads, when the step cannot be
 * spliced or its shape does not fit what is held. */
ts_status live_rows_take(live_rows *r, ts_op op, ts_tag tag, const ts_tensor *t, int end);

/* After the pass: whether every position of total is there. */
bool live_rows_complete(const live_rows *r);

/* The rows held as one contiguous tensor (rank 0 when none). */
ts_tensor live_rows_tensor(const live_rows *r);

/* Forget the values (and the name when name is NULL, else take it). */
void live_rows_reset(live_rows *r, const char *name);

#endif
