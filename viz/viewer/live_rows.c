/* live_rows: one step's values at every position of the live text, kept
 * from pass to pass (live_rows.h). */
#include "live_rows.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool live_rows_spliceable(ts_op op, ts_tag tag, int rank, int *pos_axis, int *key_axis, float *fill) {
    *key_axis = -1;
    *fill = 0.0f;
    *pos_axis = -1;
    switch (tag) {
    case TS_TAG_PARAM: return true; /* the same in every pass: taken whole */
    case TS_TAG_ATTN_WEIGHTS: /* (B, H, Sq, Sk): a later key's weight is 0 */
        *pos_axis = 2, *key_axis = 3;
        return rank == 4;
    case TS_TAG_ATTN_SCORES: /* only the masked scores know what a later key holds (-inf) */
        *pos_axis = 2, *key_axis = 3, *fill = -INFINITY;
        return rank == 4 && op == TS_OP_MASK;
    case TS_TAG_HEADS: *pos_axis = 2; return rank == 4; /* (B, H, S, hd) */
    case TS_TAG_POSENC: *pos_axis = 0; return rank == 2; /* (S, D): the positions' rows */
    case TS_TAG_PLAIN:
    case TS_TAG_NORM_IN:
    case TS_TAG_NORM_OUT:
    case TS_TAG_NORM_STAT:
    case TS_TAG_LOGITS: *pos_axis = 1; return rank >= 2; /* (B, S, ...) */
    default: return false;
    }
}

void live_rows_begin(live_rows *r, int keep, int total) {
    r->keep = keep < r->positions ? keep : r->positions;
    r->total = total;
    r->pending = true;
}

/* cnt elements (a box of that shape) from src (strided) into dst (row-major
 * of shape dshape) at origin: the innermost run copied at once. */
static void copy_box(float *dst, const int64_t *dshape, const int64_t *origin, const float *src,
                     const int64_t *sstride, const int64_t *cnt, int rank) {
    int64_t dstride[TS_MAX_RANK], idx[TS_MAX_RANK] = {0}, outer = 1;
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        dstride[d] = s;
        s *= dshape[d];
    }
    for (int d = 0; d < rank; d++) {
        if (cnt[d] <= 0) return;
        if (d < rank - 1) outer *= cnt[d];
    }
    int last = rank - 1;
    for (int64_t o = 0; o < outer; o++) {
        int64_t so = 0, dof = 0;
        for (int d = 0; d < last; d++) {
            so += idx[d] * sstride[d];
            dof += (origin[d] + idx[d]) * dstride[d];
        }
        float *out = dst + dof + origin[last];
        const float *in = src + so;
        if (sstride[last] == 1) memcpy(out, in, sizeof(float) * (size_t)cnt[last]);
        else
            for (int64_t j = 0; j < cnt[last]; j++) out[j] = in[j * sstride[last]];
        for (int d = last - 1; d >= 0; d--) { /* the next outer index */
            if (++idx[d] < cnt[d]) break;
            idx[d] = 0;
        }
    }
}

static int64_t numel_of(const int64_t *shape, int rank) {
    int64_t n = 1;
    for (int d = 0; d < rank; d++) n *= shape[d];
    return n;
}

/* The whole tensor, for a step without positions. */
static ts_status take_whole(live_rows *r, const ts_tensor *t) {
    int64_t n = numel_of(t->shape, t->rank);
    float *data = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (!data) return ts_fail(TS_ERR_NOMEM, "live: out of memory for %s", r->name);
    int64_t zero[TS_MAX_RANK] = {0};
    if (t->rank > 0) copy_box(data, t->shape, zero, t->data, t->stride, t->shape, t->rank);
    else data[0] = t->data[0];
    free(r->data);
    r->data = data;
    r->rank = t->rank;
    memcpy(r->shape, t->shape, sizeof r->shape);
    r->pos_axis = r->key_axis = -1;
    r->positions = r->total;
    r->keep = r->total;
    r->pending = false;
    return TS_OK;
}

/* The pass's first rows: lay the step out for total positions, with rows
 * [0, keep) of what was held. */
static ts_status lay_out(live_rows *r, const ts_tensor *t, int pos, int key, float fill) {
    int64_t shape[TS_MAX_RANK];
    memcpy(shape, t->shape, sizeof shape);
    shape[pos] = r->total;
    if (key >= 0) shape[key] = r->total;
    bool same = r->data && r->rank == t->rank && r->pos_axis == pos && r->key_axis == key;
    for (int d = 0; same && d < t->rank; d++) same = d == pos || d == key || r->shape[d] == shape[d];
    if (r->keep > 0 && !same)
        return ts_fail(TS_ERR_ARG, "live: %s changed its shape between passes", r->name);
    int64_t n = numel_of(shape, t->rank);
    float *data = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (!data) return ts_fail(TS_ERR_NOMEM, "live: out of memory for %s", r->name);
    for (int64_t i = 0; i < n; i++) data[i] = fill;
    if (r->keep > 0) {
        int64_t cnt[TS_MAX_RANK], stride[TS_MAX_RANK], zero[TS_MAX_RANK] = {0}, s = 1;
        memcpy(cnt, r->shape, sizeof cnt);
        cnt[pos] = r->keep;
        if (key >= 0 && cnt[key] > r->total) cnt[key] = r->total;
        for (int d = t->rank - 1; d >= 0; d--) {
            stride[d] = s;
            s *= r->shape[d];
        }
        copy_box(data, shape, zero, r->data, stride, cnt, t->rank);
    }
    free(r->data);
    r->data = data;
    r->rank = t->rank;
    memcpy(r->shape, shape, sizeof r->shape);
    r->pos_axis = pos, r->key_axis = key, r->fill = fill;
    r->positions = r->keep; /* rows filled so far */
    r->pending = false;
    return TS_OK;
}

ts_status live_rows_take(live_rows *r, ts_op op, ts_tag tag, const ts_tensor *t, int end) {
    int pos, key;
    float fill;
    if (!live_rows_spliceable(op, tag, t->rank, &pos, &key, &fill))
        return ts_fail(TS_ERR_UNSUPPORTED, "live: %s cannot be rebuilt from new rows", r->name);
    if (pos < 0) return take_whole(r, t);
    int64_t rows = t->shape[pos], first = end - rows;
    if (first < 0 || end > r->total || (key >= 0 && t->shape[key] > r->total))
        return ts_fail(TS_ERR_ARG, "live: %s's rows %lld..%d do not fit %d positions", r->name, (long long)first,
                       end, r->total);
    if (r->pending) TS_TRY(lay_out(r, t, pos, key, fill));
    if (first > r->positions) return ts_fail(TS_ERR_ARG, "live: %s's rows before %lld are missing", r->name, (long long)first);
    for (int d = 0; d < t->rank; d++)
        if (d != pos && d != key && t->shape[d] != r->shape[d])
            return ts_fail(TS_ERR_ARG, "live: %s changed its shape within a pass", r->name);
    int64_t origin[TS_MAX_RANK] = {0};
    origin[pos] = first;
    copy_box(r->data, r->shape, origin, t->data, t->stride, t->shape, t->rank);
    if (end > r->positions) r->positions = end;
    return TS_OK;
}

bool live_rows_complete(const live_rows *r) { return r->data && !r->pending && r->positions == r->total; }

ts_tensor live_rows_tensor(const live_rows *r) {
    ts_tensor t;
    memset(&t, 0, sizeof t);
    if (!r->data) return t;
    t.data = r->data;
    t.rank = r->rank;
    int64_t s = 1;
    for (int d = r->rank - 1; d >= 0; d--) {
        t.shape[d] = r->shape[d];
        t.stride[d] = s;
        s *= r->shape[d];
    }
    return t;
}

void live_rows_reset(live_rows *r, const char *name) {
    free(r->data);
    char keep_name[sizeof r->name];
    snprintf(keep_name, sizeof keep_name, "%s", name ? name : "");
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", keep_name);
}
