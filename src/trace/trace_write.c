/* trace_write: the hook that puts every step of a run into a trace file.
 *
 * The hook runs on the model's thread and does the work that needs the
 * model's memory: it gathers the step's values (any strided view, row-major)
 * straight into a 4 MB slot of the output stream while summing statistics and
 * the CRC, then bins the histogram from the model's buffer, which is still
 * intact because the hook has not returned (a step that keeps every value
 * leaves its histogram to the reader instead). Both passes are cut in chunks
 * that the model's OpenMP threads claim. Full slots go to a writer thread
 * that puts them on disk; the hook waits only when every slot is in flight.
 *
 * What the writer already holds it does not read again: a view of a step's
 * elements takes that step's statistics, and a step the model declares like
 * an earlier one (ts_hook_like_fn) takes that step's statistics scaled and
 * is stored as a view of its values (scaled, or through ReLU). A hidden
 * layer handed over with its ReLU (ts_hook_group_fn) is read once for the
 * statistics of both, and any step in the order its elements lie in memory.
 *
 * Large traces are written with O_DIRECT: gigabytes through the page cache
 * cost more than the disk itself (every cache page must be found and filled
 * first), and a trace is read back later, not now. Small traces stay in the
 * cache, where the viewer finds them at once.
 */
#define _GNU_SOURCE /* O_DIRECT */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tscope/kernels.h"
#include "trace_writer.h"

const char *ts_trace_level_name(ts_trace_level level) {
    switch (level) {
    case TS_TRACE_SHAPES: return "shapes";
    case TS_TRACE_STATS: return "stats";
    case TS_TRACE_VALUES: return "values";
    case TS_TRACE_AUTO: return "auto";
    }
    return "?";
}

ts_status ts_trace_level_parse(const char *text, ts_trace_level *out) {
    static const ts_trace_level all[] = {TS_TRACE_SHAPES, TS_TRACE_STATS, TS_TRACE_VALUES, TS_TRACE_AUTO};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (text && strcmp(text, ts_trace_level_name(all[i])) == 0) {
            *out = all[i];
            return TS_OK;
        }
    return ts_fail(TS_ERR_ARG, "trace level '%s' is not one of shapes, stats, values, auto", text ? text : "");
}

void ts_trace_options_default(ts_trace_options *opt) {
    memset(opt, 0, sizeof *opt);
    opt->level = TS_TRACE_AUTO;
    opt->keep_batch = -1;
    opt->budget = TS_TRACE_AUTO_BUDGET;
    opt->buffer_bytes = DEFAULT_BUFFER_BYTES;
}

/* ---- one step ---- */

typedef struct decision {
    bool stats, values;
    int batch; /* -1 all; else element of dim 0 kept */
} decision;

static bool matches_only(const ts_trace_writer *w, const char *name) {
    if (w->opt.n_only == 0) return true;
    for (int i = 0; i < w->opt.n_only; i++)
        if (fnmatch(w->only[i], name, 0) == 0) return true;
    return false;
}

static bool has_batch_dim(const ts_tensor *t, ts_tag tag) {
    if (!ts_tag_batched(tag)) return false;
    return t->rank >= 1 && t->shape[0] > 1;
}

static bool reduced_keeps(ts_tag tag) {
    return tag == TS_TAG_ATTN_WEIGHTS || tag == TS_TAG_POSENC || tag == TS_TAG_NORM_STAT;
}

static int64_t kept_elements(const ts_tensor *t, int64_t numel, int batch, ts_tag tag) {
    if (batch < 0 || !has_batch_dim(t, tag)) return numel;
    return batch < t->shape[0] ? numel / t->shape[0] : 0;
}

static decision decide(ts_trace_writer *w, const char *name, const ts_tensor *t, int64_t numel, ts_tag tag,
                       bool view_op) {
    decision d = {false, false, -1};
    ts_trace_level level = w->opt.level;
    if (level == TS_TRACE_SHAPES || !t->data) return d;
    d.stats = true;
    if (level == TS_TRACE_STATS) return d;
    bool wanted = matches_only(w, name);
    d.batch = w->opt.keep_batch;
    if (level == TS_TRACE_AUTO && !w->reduced && wanted && !view_op) { /* views cost no bytes */
        uint64_t bytes = (uint64_t)kept_elements(t, numel, d.batch, tag) * sizeof(float);
        if (w->values_bytes + bytes > w->opt.budget) {
            w->reduced = true;
            w->reduced_from = w->n_steps;
            snprintf(w->reduced_name, sizeof w->reduced_name, "%s", name);
        }
    }
    if (level == TS_TRACE_AUTO && w->reduced) {
        wanted = wanted && reduced_keeps(tag);
        if (d.batch < 0) d.batch = 0;
    }
    d.values = wanted;
    if (d.values && d.batch >= 0 && has_batch_dim(t, tag) && d.batch >= t->shape[0]) d.values = false;
    if (d.values && !has_batch_dim(t, tag)) d.batch = -1;
    return d;
}

static ts_status check_step(ts_trace_writer *w, const char *name, const ts_tensor *t, int64_t *numel) {
    size_t len = name ? strlen(name) : 0;
    if (len == 0) return trw_writer_fail(w, TS_ERR_ARG, "trace: a step has no name");
    if (len > TRF_NAME_MAX)
        return trw_writer_fail(w, TS_ERR_ARG, "trace: step name '%.40s...' is %zu bytes, more than %d", name, len,
                           TRF_NAME_MAX);
    if (!t) return trw_writer_fail(w, TS_ERR_ARG, "trace: step '%s' has no tensor", name);
    if (t->rank < 0 || t->rank > TS_MAX_RANK)
        return trw_writer_fail(w, TS_ERR_ARG, "trace: step '%s' has rank %d (0..%d)", name, t->rank, TS_MAX_RANK);
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++) {
        if (t->shape[d] < 0 || (t->shape[d] > 0 && n > MAX_ELEMENTS / t->shape[d]))
            return trw_writer_fail(w, TS_ERR_ARG, "trace: step '%s' has a bad shape", name);
        n *= t->shape[d];
    }
    *numel = n;
    return TS_OK;
}


/* t with its dims ordered by stride, largest first: the same elements,
 * walked as they lie in memory. A tensor that walks some dim backwards stays
 * as it is. */
static void in_memory_order(const ts_tensor *t, ts_tensor *out) {
    *out = *t;
    for (int d = 0; d < t->rank; d++)
        if (t->shape[d] > 1 && t->stride[d] < 0) return;
    for (int d = 1; d < out->rank; d++) {
        int64_t shape = out->shape[d], stride = out->stride[d];
        int k = d;
        for (; k > 0 && out->stride[k - 1] < stride; k--) {
            out->shape[k] = out->shape[k - 1];
            out->stride[k] = out->stride[k - 1];
        }
        out->shape[k] = shape;
        out->stride[k] = stride;
    }
}

/* Whether t's elements fill [t->data, t->data + numel) exactly, in some order. */
static bool dense(const ts_tensor *t) {
    for (int d = 0; d < t->rank; d++)
        if (t->shape[d] == 0 || (t->shape[d] > 1 && t->stride[d] <= 0)) return false;
    ts_tensor in_memory;
    in_memory_order(t, &in_memory);
    int64_t expect = 1;
    for (int d = in_memory.rank - 1; d >= 0; d--) {
        if (in_memory.shape[d] == 1) continue;
        if (in_memory.stride[d] != expect) return false;
        expect *= in_memory.shape[d];
    }
    return true;
}

/* Whether every element of kept lies in what the base stored; then its
 * offset there. Strides must be >= 0 (the model's views are). */
static bool fits_base(const ts_trace_writer *w, const ts_tensor *kept, int64_t count, int64_t *offset) {
    if (w->base.index < 0 || count <= 0 || kept->data < w->base.data) return false;
    int64_t first = kept->data - w->base.data, last = first;
    for (int d = 0; d < kept->rank; d++) {
        if (kept->stride[d] < 0) return false;
        last += (kept->shape[d] - 1) * kept->stride[d];
    }
    if (last >= w->base.count) return false;
    *offset = first;
    return true;
}

static void put_suffix(unsigned char *s, int64_t index, const ts_trace_stats *st, uint32_t values_crc) {
    memset(s, 0, TRF_SUFFIX_SIZE);
    memcpy(s, TRF_SUFFIX_MAGIC, 4);
    trf_put32(s + TRF_S_SUFFIX_SIZE, TRF_SUFFIX_SIZE);
    trf_put64(s + TRF_S_INDEX, (uint64_t)index);
    trf_putf64(s + TRF_S_MIN, st->min);
    trf_putf64(s + TRF_S_MAX, st->max);
    trf_putf64(s + TRF_S_MEAN, st->mean);
    trf_putf64(s + TRF_S_STD, st->std);
    trf_putf64(s + TRF_S_MEAN_ABS, st->mean_abs);
    trf_put64(s + TRF_S_FINITE, st->finite);
    trf_put64(s + TRF_S_NAN, st->nan);
    trf_put64(s + TRF_S_INF, st->inf);
    trf_put64(s + TRF_S_ZEROS, st->zeros);
    for (int b = 0; b < TS_TRACE_HIST_BINS; b++) trf_put64(s + TRF_S_HIST + 8 * b, st->hist[b]);
    trf_put32(s + TRF_S_VALUES_CRC, values_crc);
}

static ts_status keep_copy(ts_trace_writer *w, const unsigned char *prefix, size_t prefix_size,
                           const unsigned char *suffix) {
    size_t need = w->copies_len + prefix_size + TRF_SUFFIX_SIZE;
    if (need > w->copies_cap) {
        size_t cap = w->copies_cap ? 2 * w->copies_cap : (size_t)1 << 16;
        while (cap < need) cap *= 2;
        unsigned char *grown = realloc(w->copies, cap);
        if (!grown) return trw_writer_fail(w, TS_ERR_NOMEM, "trace: no memory for the index");
        w->copies = grown;
        w->copies_cap = cap;
    }
    memcpy(w->copies + w->copies_len, prefix, prefix_size);
    memcpy(w->copies + w->copies_len + prefix_size, suffix, TRF_SUFFIX_SIZE);
    w->copies_len = need;
    return TS_OK;
}

/* The lowest and one past the highest element t touches. */
static void extent(const ts_tensor *t, int64_t numel, const float **lo, const float **hi) {
    const float *a = t->data, *b = t->data;
    for (int d = 0; d < t->rank && numel > 0; d++) {
        int64_t span = (t->shape[d] - 1) * t->stride[d];
        if (span < 0) a += span;
        else b += span;
    }
    *lo = a;
    *hi = numel > 0 ? b + 1 : b;
}

static int64_t oldest_recent(const ts_trace_writer *w) {
    return w->n_recent > RECENT_MAX ? w->n_recent - RECENT_MAX : 0;
}

/* Statistics a recent step computed for exactly t's elements, still in
 * their memory, or NULL. */
static const known_stats *same_elements(const ts_trace_writer *w, const ts_tensor *t, int64_t numel) {
    if (numel == 0 || !dense(t)) return NULL;
    for (int64_t k = w->n_recent - 1; k >= oldest_recent(w); k--) {
        const struct recent_step *r = &w->recent[k % RECENT_MAX];
        if (r->computed && r->intact && r->has_stats && r->t.data == t->data &&
            ts_tensor_numel(&r->t) == numel && dense(&r->t))
            return &r->known;
    }
    return NULL;
}

/* A step wrote t's memory: what recent steps computed there is gone. */
static void forget_overwritten(ts_trace_writer *w, const ts_tensor *t, int64_t numel) {
    const float *lo, *hi;
    extent(t, numel, &lo, &hi);
    for (int64_t k = oldest_recent(w); k < w->n_recent; k++) {
        struct recent_step *r = &w->recent[k % RECENT_MAX];
        const float *a, *b;
        extent(&r->t, ts_tensor_numel(&r->t), &a, &b);
        if (a < hi && lo < b) r->intact = false;
    }
}

static bool same_shape(const ts_tensor *a, const ts_tensor *b) {
    if (a->rank != b->rank) return false;
    for (int d = 0; d < a->rank; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return true;
}

static bool same_layout(const ts_tensor *a, const ts_tensor *b) {
    if (a->data != b->data || a->rank != b->rank) return false;
    for (int d = 0; d < a->rank; d++)
        if (a->shape[d] != b->shape[d] || (a->shape[d] > 1 && a->stride[d] != b->stride[d])) return false;
    return true;
}

/* The recent step whose tensor was `of` (NULL: the step just before). */
static const struct recent_step *recent_step_of(const ts_trace_writer *w, const ts_tensor *of) {
    if (w->n_recent == 0) return NULL;
    if (!of) return &w->recent[(w->n_recent - 1) % RECENT_MAX];
    for (int64_t k = w->n_recent - 1; k >= oldest_recent(w); k--)
        if (same_layout(of, &w->recent[k % RECENT_MAX].t)) return &w->recent[k % RECENT_MAX];
    return NULL;
}

/* A factor whose products are exact: a positive power of two. Then the scaled
 * values keep their order and their histogram bins (bin edges scale with
 * them, and every float operation of the binning scales exactly), and each
 * statistic scales; only values that underflow to subnormals would round. */
static bool exact_factor(float factor, int *exponent) {
    int e = 0;
    if (!ts_hook_exact_factor(factor)) return false;
    frexpf(factor, &e);
    *exponent = e - 1; /* factor = 0.5 * 2^e */
    return *exponent >= -TRF_VIEW_SCALE_MAX && *exponent <= TRF_VIEW_SCALE_MAX;
}

static void scale_stats(ts_trace_stats *out, const ts_trace_stats *in, float factor) {
    *out = *in;
    out->min = in->min * factor;
    out->max = in->max * factor;
    out->mean = in->mean * factor;
    out->std = in->std * factor;
    out->mean_abs = in->mean_abs * factor;
}

/* A step as the model hands it over. factor != 0: the model says its values
 * are those of the step whose tensor was `of` (NULL: the step just before)
 * times factor (ts_hook_like_fn). With `ahead` the model has not made the
 * step yet (ts_hook_derive_fn): t's memory holds the previous step's values,
 * so the step is written only if nothing has to be read from it. `pre`: its
 * statistics, already computed with its group's (ts_hook_group_fn). */
typedef struct step_in {
    const char *name;
    ts_op op;
    const ts_tensor *t;
    ts_tag tag;
    const ts_tensor *of;
    float factor;
    bool ahead;
    const ts_trace_stats *pre;
} step_in;

/* What a step's record holds and where each part comes from, decided before
 * a byte is written. */
typedef struct step_plan {
    int64_t numel;
    decision d;
    /* Like an earlier step (src): its statistics, scaled, and its values
     * index for index, scaled by 2^exponent, so a view of them. */
    const struct recent_step *src;
    bool like;
    int exponent;
    bool relu;      /* like its input through ReLU: the statistics must still be read */
    bool unchanged; /* the step's memory is as the step before left it */
    ts_tensor kept; /* (the kept shape) all of t, or element d.batch of dim 0 */
    view vt;        /* t in memory order, for statistics, which need no order */
    view vk;        /* kept, row-major, for the values */
    int64_t values_count;
    /* A view's values: in record view_base from element view_offset, walked
     * with view_of's strides. */
    bool as_view;
    int64_t view_base, view_offset;
    ts_tensor view_of;
    bool view_relu;          /* the view goes through ReLU */
    bool stored;             /* the values are in this record */
    bool whole;              /* every value stored, so their pass sums the statistics too */
    bool derived;            /* statistics scaled from src's */
    const known_stats *same; /* statistics of a step with the same elements */
    bool hist_known;         /* the histogram comes with derived or same */
    bool hist_later;         /* the reader bins the histogram from the values */
    unsigned content;        /* TRF_CONTENT_* bits */
    bool reads_memory;       /* anything must be read from t's memory */
} step_plan;

static void plan_step(ts_trace_writer *w, const step_in *in, int64_t numel, step_plan *p) {
    const ts_tensor *t = in->t;
    memset(p, 0, sizeof *p);
    p->numel = numel;
    /* The step just before must be the same memory; one named by `of` the
     * same shape. Only factor 1 in the same memory leaves the memory as it
     * was for later views. */
    p->src = in->factor != 0.0f ? recent_step_of(w, in->ahead ? NULL : in->of) : NULL;
    p->like = p->src && p->src->has_stats && !p->src->edited_over && exact_factor(in->factor, &p->exponent) &&
              (in->of && !in->ahead ? same_shape(t, &p->src->t) : same_layout(t, &p->src->t));
    p->relu = p->like && in->op == TS_OP_RELU && p->exponent == 0 && !in->ahead;
    bool view_op = ts_op_is_view(in->op) || p->like;
    p->unchanged = ts_op_is_view(in->op) || (p->like && !p->relu && p->exponent == 0 && same_layout(t, &p->src->t));
    p->d = decide(w, in->name, t, numel, in->tag, view_op);
    if (numel > 0 && !t->data) p->d.stats = p->d.values = false;
    const decision *d = &p->d;

    p->kept = *t;
    if (d->values && d->batch >= 0) {
        p->kept.data = t->data + d->batch * t->stride[0];
        p->kept.shape[0] = 1;
    }
    ts_tensor in_memory;
    in_memory_order(t, &in_memory);
    trw_view_init(&p->vt, &in_memory);
    trw_view_init(&p->vk, &p->kept);
    p->values_count = d->values ? p->vk.numel : 0;
    p->view_base = w->base.index;
    p->view_of = p->kept;
    if (p->like) {
        /* Where the earlier step's values live (its own record, or the one
         * it views), index for index, when it kept the same batch element. */
        const struct recent_step *src = p->src;
        p->as_view = d->values && src->values && src->batch == d->batch &&
                     abs(src->scale + p->exponent) <= TRF_VIEW_SCALE_MAX && (!src->relu || p->exponent == 0);
        p->view_base = src->base;
        p->view_offset = src->offset;
        memcpy(p->view_of.stride, src->strides, sizeof p->view_of.stride);
        p->exponent += src->scale;
    } else {
        p->as_view = d->values && view_op && fits_base(w, &p->kept, p->values_count, &p->view_offset);
    }
    /* Statistics from the step before (like it) or from a step with the same
     * elements (a view of them), else computed here. A step that keeps every
     * value leaves its histogram to the reader, which has the values: one
     * pass less over the model's memory. */
    p->derived = d->stats && p->like && !p->relu;
    p->same = d->stats && !p->like && ts_op_is_view(in->op) ? same_elements(w, t, numel) : NULL;
    p->hist_known = p->derived ? p->src->known.hist : p->same ? p->same->hist : false;
    p->hist_later = d->stats && !p->hist_known && d->values && d->batch < 0;
    p->view_relu = p->as_view && p->like && (p->relu || p->src->relu);
    p->stored = d->values && !p->as_view;
    p->whole = p->stored && d->batch < 0 && !p->derived && !p->same;
    p->content = (d->stats ? TRF_CONTENT_STATS : 0u) | (d->values ? TRF_CONTENT_VALUES : 0u) |
                 (p->as_view ? TRF_CONTENT_VIEW : 0u) | (p->hist_later ? TRF_CONTENT_HIST_FROM_VALUES : 0u) |
                 (p->view_relu ? TRF_CONTENT_VIEW_RELU : 0u);
    p->reads_memory = (d->stats && !p->derived && !p->same) || (d->stats && !p->hist_known && !p->hist_later) ||
                      (d->values && !p->as_view);
}

/* The step's statistics, from where the plan says; values already streamed
 * (acc holds their moments when the plan stored them whole). */
static void step_stats(ts_trace_writer *w, const step_in *in, const step_plan *p, trf_acc *acc,
                       ts_trace_stats *st) {
    memset(st, 0, sizeof *st);
    bool hist_known = p->hist_known;
    if (p->derived) {
        scale_stats(st, &p->src->known.stats, in->factor);
    } else if (p->same) {
        *st = p->same->stats; /* the same elements in another order: the same statistics */
    } else if (p->d.stats && in->pre && !p->hist_later) {
        *st = *in->pre; /* computed with its group's */
        hist_known = true;
    } else if (p->d.stats) {
        if (!p->whole) trw_stats_of(w, &p->vt, acc);
        trf_acc_finish(acc, st);
    }
    if (p->d.stats && !hist_known && !p->hist_later) trw_hist_of(w, &p->vt, st);
    if (p->hist_later) memset(st->hist, 0, sizeof st->hist);
}

/* A record's prefix (trace_format.h): the step as the hook handed it over
 * (in) and what the plan keeps of it (p). */
static void put_prefix(unsigned char *out, size_t prefix_size, uint64_t record_size, int64_t index,
                       const step_in *in, const step_plan *p) {
    const ts_tensor *t = in->t;
    size_t len = strlen(in->name);
    memset(out, 0, prefix_size);
    memcpy(out, TRF_PREFIX_MAGIC, 4);
    trf_put32(out + TRF_P_PREFIX_SIZE, (uint32_t)prefix_size);
    trf_put64(out + TRF_P_RECORD_SIZE, record_size);
    trf_put64(out + TRF_P_INDEX, (uint64_t)index);
    trf_put16(out + TRF_P_OP, (uint16_t)in->op);
    trf_put16(out + TRF_P_TAG, (uint16_t)in->tag);
    out[TRF_P_DTYPE] = (p->content & TRF_CONTENT_VALUES) ? TRF_DTYPE_F32 : TRF_DTYPE_NONE;
    out[TRF_P_RANK] = (unsigned char)t->rank;
    out[TRF_P_CONTENT] = (unsigned char)p->content;
    trf_put32(out + TRF_P_BATCH, (uint32_t)(int32_t)(p->d.values ? p->d.batch : -1));
    trf_put32(out + TRF_P_NAME_LEN, (uint32_t)len);
    trf_put64(out + TRF_P_VALUES_COUNT, (uint64_t)p->values_count);
    for (int d = 0; d < t->rank; d++) trf_put64(out + TRF_P_SHAPE + 8 * d, (uint64_t)t->shape[d]);
    if (p->content & TRF_CONTENT_VIEW) {
        trf_put64(out + TRF_P_VIEW_BASE, (uint64_t)p->view_base);
        trf_put64(out + TRF_P_VIEW_OFFSET, (uint64_t)p->view_offset);
        out[TRF_P_VIEW_SCALE] = (unsigned char)(int8_t)(p->like ? p->exponent : 0);
        for (int d = 0; d < p->view_of.rank; d++)
            trf_put64(out + TRF_P_VIEW_STRIDES + 8 * d, (uint64_t)p->view_of.stride[d]);
    }
    memcpy(out + TRF_P_NAME, in->name, len);
}

/* The record: prefix, values (or none for a view), suffix; a copy of its
 * headers for the index. */
static ts_status emit_record(ts_trace_writer *w, const step_in *in, const step_plan *p, ts_trace_stats *st) {
    size_t prefix_size = (size_t)trf_align(TRF_P_NAME + strlen(in->name) + 1);
    uint64_t values_area = p->as_view ? 0 : trf_align((uint64_t)p->values_count * sizeof(float));
    uint64_t record_size = prefix_size + values_area + TRF_SUFFIX_SIZE;
    unsigned char prefix[TRF_P_NAME + TRF_NAME_MAX + TRF_ALIGN];
    put_prefix(prefix, prefix_size, record_size, w->n_steps, in, p);

    /* Every record starts on a 64-byte boundary, so values do too. */
    uint64_t offset = trw_stream_pos(w);
    ts_status s = trw_stream_put(w, prefix, prefix_size);
    if (s) return s;

    uint32_t values_crc = 0;
    trf_acc acc;
    trf_acc_init(&acc);
    if (p->stored && (s = trw_put_values(w, &p->vk, p->whole, &acc, &values_crc))) return s;
    uint64_t values_bytes = (uint64_t)p->values_count * sizeof(float);
    if (values_area > values_bytes && (s = trw_stream_put(w, NULL, (size_t)(values_area - values_bytes)))) return s;
    step_stats(w, in, p, &acc, st);

    unsigned char suffix[TRF_SUFFIX_SIZE];
    put_suffix(suffix, w->n_steps, st, values_crc);
    uint32_t crc = trf_crc32(0, prefix, prefix_size);
    crc = trf_crc32(crc, suffix, TRF_S_RECORD_CRC);
    trf_put32(suffix + TRF_S_RECORD_CRC, crc);
    if ((s = trw_stream_put(w, suffix, sizeof suffix))) return s;
    if ((s = keep_copy(w, prefix, prefix_size, suffix))) return s;
    w->offsets[w->n_steps] = offset;
    return TS_OK;
}

/* What later steps may take from this one: the base views point into, and
 * its entry among the recent steps. */
static void remember_step(ts_trace_writer *w, const step_in *in, const step_plan *p, const ts_trace_stats *st) {
    /* Views may point into this step from now on, or (after a step that
     * computed something) into nothing until the next stored one. */
    if (!p->unchanged) {
        w->base.index = -1;
        forget_overwritten(w, in->t, p->numel);
    }
    if (p->stored && p->vk.contiguous) {
        w->base.index = w->n_steps;
        w->base.data = p->kept.data;
        w->base.count = p->values_count;
    }
    struct recent_step *r = &w->recent[w->n_recent++ % RECENT_MAX];
    /* A step recorded ahead was never made: its memory holds the step
     * before, so nothing may take statistics from it. */
    *r = (struct recent_step){.t = *in->t, .computed = !p->unchanged && !in->ahead, .intact = true,
                              .values = p->d.values, .batch = p->d.values ? p->d.batch : -1,
                              .has_stats = p->d.stats, .known = {*st, p->d.stats && !p->hist_later}};
    if (p->as_view) { /* where this view's values live */
        r->base = p->view_base;
        r->offset = p->view_offset;
        memcpy(r->strides, p->view_of.stride, sizeof r->strides);
        r->scale = p->like ? p->exponent : 0;
        r->relu = p->view_relu;
    } else if (p->stored) {
        ts_tensor own = p->kept;
        ts_tensor_row_major(&own);
        r->base = w->n_steps;
        memcpy(r->strides, own.stride, sizeof r->strides);
    }
}

static ts_status grow_index(ts_trace_writer *w) {
    if (w->n_steps < w->cap_steps) return TS_OK;
    int64_t cap = w->cap_steps ? 2 * w->cap_steps : 256;
    uint64_t *grown = realloc(w->offsets, (size_t)cap * sizeof *grown);
    if (!grown) return trw_writer_fail(w, TS_ERR_NOMEM, "trace: no memory for the index");
    w->offsets = grown;
    w->cap_steps = cap;
    return TS_OK;
}

/* Now and then, what the stream holds goes to the file, so a killed run
 * loses little; only behind the slots already written, so the file never
 * has a hole that would hide complete steps from a scan. */
static ts_status maybe_flush(ts_trace_writer *w) {
    if (trw_now_seconds() - w->last_flush <= FLUSH_SECONDS) return TS_OK;
    pthread_mutex_lock(&w->mu);
    bool idle = w->q_len == 0;
    pthread_mutex_unlock(&w->mu);
    return idle ? trw_flush_partial(w) : TS_OK;
}

/* A step holding NaN or Inf: counted, and the first named with its counts,
 * so the run says so instead of leaving it to be found in the trace. */
static void note_not_finite(ts_trace_writer *w, const char *name, const ts_trace_stats *st) {
    if (w->steps_not_finite++ == 0)
        snprintf(w->first_not_finite, sizeof w->first_not_finite, "%.100s (NaN %llu, Inf %llu)", name,
                 (unsigned long long)st->nan, (unsigned long long)st->inf);
}

/* Plan the step, write its record, remember it. *done is false when the
 * step was offered ahead and needs its memory made first. */
static ts_status write_step(ts_trace_writer *w, const step_in *in, bool *done) {
    *done = false;
    ts_status s = trw_check_io(w);
    int64_t numel = 0;
    if (s || (s = check_step(w, in->name, in->t, &numel)) || (s = grow_index(w))) return s;
    step_plan p;
    plan_step(w, in, numel, &p);
    if (in->ahead && (!p.like || p.reads_memory)) return TS_OK; /* the model makes the step and calls again */
    *done = true;
    ts_trace_stats st;
    if ((s = emit_record(w, in, &p, &st))) return s;
    remember_step(w, in, &p, &st);
    if (st.nan || st.inf) note_not_finite(w, in->name, &st);
    w->n_steps++;
    if (p.d.values) {
        w->steps_with_values++;
        if (p.stored) w->values_bytes += (uint64_t)p.values_count * sizeof(float);
    }
    return maybe_flush(w);
}

ts_status ts_trace_writer_step(ts_trace_writer *w, const char *name, ts_op op, const ts_tensor *t, ts_tag tag) {
    bool done;
    return write_step(w, &(step_in){name, op, t, tag, NULL, 0.0f, false, NULL}, &done);
}

static ts_status hook_like(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag,
                           const ts_tensor *of, float factor) {
    ts_trace_writer *w = ctx;
    double t0 = trw_now_seconds();
    bool done;
    ts_status s = write_step(w, &(step_in){name, op, t, tag, of, factor, false, NULL}, &done);
    w->hook_seconds += trw_now_seconds() - t0;
    return s;
}

static ts_status hook_derive(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag, float factor,
                             bool *done) {
    ts_trace_writer *w = ctx;
    double t0 = trw_now_seconds();
    ts_status s = write_step(w, &(step_in){name, op, t, tag, NULL, factor, true, NULL}, done);
    w->hook_seconds += trw_now_seconds() - t0;
    return s;
}

static ts_status hook_fn(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag) {
    return hook_like(ctx, name, op, t, tag, NULL, 0.0f);
}

/* The statistics of a group's steps, into pre[i] with have[i]: the first
 * step and each ReLU of it, from one sweep over the first step's memory for
 * the moments and one for the histograms. Other steps (views) are left to
 * write_step. False when the ReLU, whose memory does not hold it yet, is of
 * something else. */
static bool group_stats(ts_trace_writer *w, const ts_hook_step *steps, int n, ts_trace_stats *pre, bool *have) {
    const ts_tensor *first = steps[0].t;
    if (steps[0].relu || !first->data) return false;
    member members[GROUP_MEMBERS_MAX] = {{.step = 0}};
    int n_members = 1;
    for (int i = 1; i < n; i++) {
        if (!steps[i].relu) continue;
        if (i != 1 || n_members == GROUP_MEMBERS_MAX || !same_layout(steps[i].t, first)) return false;
        members[n_members++] = (member){.relu = true, .step = i};
    }
    ts_tensor in_memory;
    in_memory_order(first, &in_memory);
    view v;
    trw_view_init(&v, &in_memory);
    trf_acc accs[GROUP_MEMBERS_MAX];
    trf_hist_plan plans[GROUP_MEMBERS_MAX];
    uint64_t hists[GROUP_MEMBERS_MAX][TS_TRACE_HIST_BINS];
    trw_run_group_pass(w, PASS_GROUP_STATS, &v, members, n_members, NULL, accs, NULL);
    for (int m = 0; m < n_members; m++) {
        ts_trace_stats *st = &pre[members[m].step];
        trf_acc_finish(&accs[m], st);
        members[m].hist = st->finite > 0;
        if (members[m].hist) trf_hist_plan_init(&plans[m], st);
    }
    trw_run_group_pass(w, PASS_GROUP_HIST, &v, members, n_members, plans, NULL, hists);
    for (int m = 0; m < n_members; m++) {
        memcpy(pre[members[m].step].hist, hists[m], sizeof hists[m]);
        have[members[m].step] = true;
    }
    return true;
}

/* A group at shapes or stats level: statistics from one sweep (group_stats),
 * then each step's record in order. A level that keeps values records them
 * one by one, as the model hands them over. */
static ts_status hook_group(void *ctx, const ts_hook_step *steps, int n, bool *done) {
    ts_trace_writer *w = ctx;
    *done = false;
    ts_trace_level level = w->opt.level;
    if (n < 1 || n > TS_HOOK_GROUP_MAX || (level != TS_TRACE_SHAPES && level != TS_TRACE_STATS)) return TS_OK;
    double t0 = trw_now_seconds();
    ts_status s = trw_check_io(w);
    for (int i = 0; i < n && !s; i++) {
        int64_t numel;
        s = check_step(w, steps[i].name, steps[i].t, &numel);
    }
    if (s) return s;
    ts_trace_stats pre[TS_HOOK_GROUP_MAX];
    bool have[TS_HOOK_GROUP_MAX] = {false};
    if (level == TS_TRACE_STATS && !group_stats(w, steps, n, pre, have)) return TS_OK;
    *done = true;
    for (int i = 0; i < n && !s; i++) {
        bool ignored;
        step_in in = {steps[i].name, steps[i].op, steps[i].t, steps[i].tag, NULL, steps[i].relu ? 1.0f : 0.0f,
                      false, have[i] ? &pre[i] : NULL};
        s = write_step(w, &in, &ignored);
    }
    w->hook_seconds += trw_now_seconds() - t0;
    return s;
}

/* An edit changed t's memory (ts_hook_overwritten_fn): nothing recorded
 * before may lend its statistics or its stored values to a later step
 * there, since those describe the memory as it was. The edited step then
 * comes as a plain step and is read afresh. */
static void hook_overwritten(void *ctx, const ts_tensor *t) {
    ts_trace_writer *w = ctx;
    int64_t numel = ts_tensor_numel(t);
    const float *lo, *hi;
    extent(t, numel, &lo, &hi);
    w->base.index = -1;
    for (int64_t k = oldest_recent(w); k < w->n_recent; k++) {
        struct recent_step *r = &w->recent[k % RECENT_MAX];
        const float *a, *b;
        extent(&r->t, ts_tensor_numel(&r->t), &a, &b);
        if (a < hi && lo < b) r->intact = false, r->edited_over = true;
    }
}

ts_hook ts_trace_writer_hook(ts_trace_writer *w) {
    return (ts_hook){.fn = hook_fn,
                     .ctx = w,
                     .like_previous = hook_like,
                     .derive_next = hook_derive,
                     .group = hook_group,
                     .overwritten = hook_overwritten};
}

ts_status ts_trace_writer_flush(ts_trace_writer *w) {
    ts_status s = trw_check_io(w);
    if (s) return s;
    trw_drain(w);
    if ((s = trw_check_io(w))) return s;
    return trw_flush_partial(w);
}

/* ---- open and close ---- */

/* Threads for the hook's passes: as many as the kernels use. */
static int hook_threads(void) {
    int n = ts_kernels_threads();
    if (n > MAX_THREADS) n = MAX_THREADS;
    return n < 1 ? 1 : n;
}

static char *metadata_text(const char *metadata_json, const ts_trace_options *opt) {
    cJSON *root = metadata_json ? cJSON_Parse(metadata_json) : cJSON_CreateObject();
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        ts_fail(TS_ERR_ARG, "trace: the metadata is not a JSON object");
        return NULL;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(root, "tscope_version");
    cJSON_DeleteItemFromObjectCaseSensitive(root, "format_version");
    cJSON_DeleteItemFromObjectCaseSensitive(root, "policy");
    cJSON_AddStringToObject(root, "tscope_version", TSCOPE_VERSION);
    cJSON_AddNumberToObject(root, "format_version", TRF_VERSION);
    cJSON *policy = cJSON_AddObjectToObject(root, "policy");
    if (policy) {
        cJSON_AddStringToObject(policy, "level", ts_trace_level_name(opt->level));
        cJSON *only = cJSON_AddArrayToObject(policy, "only");
        for (int i = 0; only && i < opt->n_only; i++) cJSON_AddItemToArray(only, cJSON_CreateString(opt->only[i]));
        cJSON_AddNumberToObject(policy, "keep_batch", opt->keep_batch);
        cJSON_AddNumberToObject(policy, "budget_bytes", (double)opt->budget);
        cJSON_AddNumberToObject(policy, "expected_bytes", (double)opt->expected_bytes);
    }
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!text) ts_fail(TS_ERR_NOMEM, "trace: no memory for the metadata");
    return text;
}

static ts_status check_options(const ts_trace_options *opt) {
    if ((unsigned)opt->level > TS_TRACE_AUTO) return ts_fail(TS_ERR_ARG, "trace: unknown level %d", (int)opt->level);
    if (opt->n_only < 0 || opt->n_only > TS_TRACE_ONLY_MAX)
        return ts_fail(TS_ERR_ARG, "trace: %d --only globs (at most %d)", opt->n_only, TS_TRACE_ONLY_MAX);
    for (int i = 0; i < opt->n_only; i++)
        if (!opt->only[i] || !opt->only[i][0]) return ts_fail(TS_ERR_ARG, "trace: an --only glob is empty");
    if (opt->keep_batch < -1) return ts_fail(TS_ERR_ARG, "trace: --keep-batch %d is negative", opt->keep_batch);
    if (opt->threads < 0) return ts_fail(TS_ERR_ARG, "trace: %d threads", opt->threads);
    return TS_OK;
}

static void free_writer(ts_trace_writer *w) {
    if (w->thread_started) {
        pthread_mutex_lock(&w->mu);
        w->stop = true;
        pthread_cond_signal(&w->cv_job);
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->thread, NULL);
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv_job);
        pthread_cond_destroy(&w->cv_free);
    }
    if (w->fd >= 0) close(w->fd);
    for (int i = 0; i < w->n_slots; i++) free(w->slots[i]);
    for (int i = 0; i < TS_TRACE_ONLY_MAX; i++) free(w->only[i]);
    free(w->slots);
    free(w->slot_free);
    free(w->queue);
    free(w->offsets);
    free(w->copies);
    free(w->path);
    free(w->tmp_path);
    free(w);
}

void ts_trace_writer_abort(ts_trace_writer *w) {
    if (!w) return;
    char *tmp = w->tmp_path;
    w->tmp_path = NULL;
    bool own_file = w->given_fd < 0;
    free_writer(w);
    if (tmp && own_file) unlink(tmp);
    free(tmp);
}

static ts_status write_header(ts_trace_writer *w, const char *meta) {
    size_t meta_size = strlen(meta);
    uint64_t records = trf_align(TRF_HEADER_SIZE + meta_size);
    unsigned char h[TRF_HEADER_SIZE] = {0};
    memcpy(h, TRF_MAGIC, 8);
    trf_put32(h + TRF_H_VERSION, TRF_VERSION);
    trf_put32(h + TRF_H_HEADER_SIZE, TRF_HEADER_SIZE);
    trf_put64(h + TRF_H_META_OFFSET, TRF_HEADER_SIZE);
    trf_put64(h + TRF_H_META_SIZE, meta_size);
    trf_put64(h + TRF_H_RECORDS_OFFSET, records);
    trf_put32(h + TRF_H_META_CRC, trf_crc32(0, meta, meta_size));
    trf_put32(h + TRF_H_CRC, trf_crc32(0, h, TRF_H_CRC));
    ts_status s = trw_stream_put(w, h, sizeof h);
    if (!s) s = trw_stream_put(w, meta, meta_size);
    if (!s) s = trw_stream_put(w, NULL, (size_t)(records - TRF_HEADER_SIZE - meta_size));
    return s;
}

/* Both opens: path names the file (PATH.tmp renamed at close), or, with
 * given_fd >= 0, only the messages (the trace goes into that descriptor). */
static ts_status writer_open(const char *path, int given_fd, const char *metadata_json,
                             const ts_trace_options *opt_in, ts_trace_writer **out);

ts_status ts_trace_writer_open(const char *path, const char *metadata_json, const ts_trace_options *opt_in,
                               ts_trace_writer **out) {
    return writer_open(path, -1, metadata_json, opt_in, out);
}

ts_status ts_trace_writer_open_fd(int fd, const char *label, const char *metadata_json,
                                  const ts_trace_options *opt, ts_trace_writer **out) {
    *out = NULL;
    if (fd < 0) return ts_fail(TS_ERR_ARG, "trace: no descriptor to write %s into", label ? label : "the trace");
    if (ftruncate(fd, 0) != 0)
        return ts_fail(TS_ERR_IO, "trace: cannot empty %s: %s", label ? label : "the trace", strerror(errno));
    return writer_open(label ? label : "trace", fd, metadata_json, opt, out);
}

static ts_status writer_open(const char *path, int given_fd, const char *metadata_json,
                             const ts_trace_options *opt_in, ts_trace_writer **out) {
    *out = NULL;
    ts_trace_options opt;
    if (opt_in)
        opt = *opt_in;
    else
        ts_trace_options_default(&opt);
    if (opt.budget == 0) opt.budget = TS_TRACE_AUTO_BUDGET;
    if (opt.buffer_bytes == 0) opt.buffer_bytes = DEFAULT_BUFFER_BYTES;
    ts_status s = check_options(&opt);
    if (s) return s;
    if (!path || !path[0]) return ts_fail(TS_ERR_ARG, "trace: the output file name is empty");
    char *meta = metadata_text(metadata_json, &opt);
    if (!meta) return TS_ERR_ARG; /* the message is set */

    ts_trace_writer *w = calloc(1, sizeof *w);
    if (!w) {
        free(meta);
        return ts_fail(TS_ERR_NOMEM, "trace: no memory for a writer");
    }
    w->fd = -1;
    w->given_fd = given_fd;
    w->cur = -1;
    w->base.index = -1;
    w->reduced_from = -1;
    w->opt = opt;
    for (int i = 0; i < opt.n_only; i++) {
        w->only[i] = strdup(opt.only[i]);
        w->opt.only[i] = w->only[i];
        if (!w->only[i]) goto nomem;
    }
    w->max_slots = (int)(opt.buffer_bytes / SLOT_BYTES);
    if (w->max_slots < 2) w->max_slots = 2;
    w->slots = calloc((size_t)w->max_slots, sizeof *w->slots);
    w->slot_free = calloc((size_t)w->max_slots, sizeof *w->slot_free);
    w->queue = calloc((size_t)w->max_slots, sizeof *w->queue);
    w->path = strdup(path);
    w->tmp_path = malloc(strlen(path) + 5);
    if (!w->slots || !w->slot_free || !w->queue || !w->path || !w->tmp_path) goto nomem;
    sprintf(w->tmp_path, "%s.tmp", path);
    w->ops = trf_stats_current();
    w->threads = opt.threads > 0 ? (opt.threads < MAX_THREADS ? opt.threads : MAX_THREADS) : hook_threads();

    /* Auto with a known size decides once, for the whole run. */
    if (opt.level == TS_TRACE_AUTO && opt.expected_bytes > opt.budget) w->reduced = true;

    if (given_fd >= 0) sprintf(w->tmp_path, "%s", path);
    w->fd = given_fd >= 0 ? dup(given_fd) : open(w->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        s = ts_fail(TS_ERR_IO, "trace: cannot create %s: %s", w->tmp_path, strerror(errno));
        free_writer(w);
        free(meta);
        return s;
    }
    if (given_fd < 0 && opt.expected_bytes >= DIRECT_AFTER && !w->reduced && opt.level != TS_TRACE_SHAPES &&
        opt.level != TS_TRACE_STATS)
        trw_maybe_go_direct(w, DIRECT_AFTER);

    if (pthread_mutex_init(&w->mu, NULL) || pthread_cond_init(&w->cv_job, NULL) ||
        pthread_cond_init(&w->cv_free, NULL) || pthread_create(&w->thread, NULL, trw_writer_main, w)) {
        ts_trace_writer_abort(w);
        free(meta);
        return ts_fail(TS_ERR_NOMEM, "trace: cannot start the writer thread");
    }
    w->thread_started = true;
    w->last_flush = trw_now_seconds();

    s = write_header(w, meta);
    free(meta);
    if (s) {
        char message[sizeof w->err.message];
        snprintf(message, sizeof message, "%s", ts_last_error());
        ts_trace_writer_abort(w);
        return ts_fail(s, "%s", message);
    }
    *out = w;
    return TS_OK;
nomem:
    free_writer(w);
    free(meta);
    return ts_fail(TS_ERR_NOMEM, "trace: no memory for a writer");
}

static void describe_policy(const ts_trace_writer *w, char *buf, size_t size) {
    const ts_trace_options *o = &w->opt;
    char batch[48] = "";
    if (o->keep_batch >= 0) snprintf(batch, sizeof batch, " of batch element %d", o->keep_batch);
    const char *which = o->n_only ? "steps matching --only" : "every step";
    switch (o->level) {
    case TS_TRACE_SHAPES: snprintf(buf, size, "shapes of every step"); return;
    case TS_TRACE_STATS: snprintf(buf, size, "statistics of every step, no values"); return;
    case TS_TRACE_VALUES:
        snprintf(buf, size, "values%s for %s%s", batch, which, o->n_only ? ", statistics for the rest" : "");
        return;
    case TS_TRACE_AUTO: break;
    }
    double mb = (double)o->budget / (1 << 20);
    char amount[32];
    int b = o->keep_batch >= 0 ? o->keep_batch : 0;
    if (!w->reduced)
        snprintf(buf, size, "auto: values%s for %s (%s of values, within the %.0f MB budget)", batch, which,
                 ts_text_bytes(amount, sizeof amount, w->values_bytes), mb);
    else if (w->reduced_from < 0)
        snprintf(buf, size,
                 "auto: all values would take %s, more than the %.0f MB budget: statistics for every step, "
                 "values for attention weights, positional encoding and LayerNorm mean/std of batch element %d",
                 ts_text_bytes(amount, sizeof amount, o->expected_bytes), mb, b);
    else
        snprintf(buf, size,
                 "auto: values for every step until step %lld '%.80s' passed the %.0f MB budget; from there, "
                 "statistics for every step, values for attention weights, positional encoding and LayerNorm "
                 "mean/std of batch element %d",
                 (long long)w->reduced_from, w->reduced_name, mb, b);
}

static ts_status finish_file(ts_trace_writer *w) {
    uint64_t index_offset = trw_stream_pos(w);
    size_t index_size = TRF_INDEX_HEAD + (size_t)w->n_steps * 8 + w->copies_len;
    unsigned char *index = calloc(1, index_size);
    if (!index) return trw_writer_fail(w, TS_ERR_NOMEM, "trace: no memory for the index");
    memcpy(index, TRF_INDEX_MAGIC, 4);
    trf_put64(index + 8, (uint64_t)w->n_steps);
    for (int64_t i = 0; i < w->n_steps; i++) trf_put64(index + TRF_INDEX_HEAD + 8 * i, w->offsets[i]);
    if (w->copies_len) memcpy(index + TRF_INDEX_HEAD + 8 * w->n_steps, w->copies, w->copies_len);
    uint32_t index_crc = trf_crc32(0, index, index_size);
    ts_status s = trw_stream_put(w, index, index_size);
    free(index);
    if (s) return s;
    uint64_t end = index_offset + index_size;
    if (trf_align(end) > end && (s = trw_stream_put(w, NULL, (size_t)(trf_align(end) - end)))) return s;

    unsigned char t[TRF_TRAILER_SIZE] = {0};
    memcpy(t, TRF_TRAILER_MAGIC, 8);
    trf_put64(t + TRF_T_INDEX_OFFSET, index_offset);
    trf_put64(t + TRF_T_INDEX_SIZE, index_size);
    trf_put64(t + TRF_T_STEP_COUNT, (uint64_t)w->n_steps);
    trf_put32(t + TRF_T_INDEX_CRC, index_crc);
    trf_put32(t + TRF_T_CRC, trf_crc32(0, t, TRF_T_CRC));
    if ((s = trw_stream_put(w, t, sizeof t))) return s;

    uint64_t total = trw_stream_pos(w);
    trw_drain(w);
    if ((s = trw_check_io(w))) return s;
    if ((s = trw_flush_partial(w))) return s;
    if (ftruncate(w->fd, (off_t)total) != 0)
        return trw_writer_fail(w, TS_ERR_IO, "trace: writing %s: %s", w->tmp_path, strerror(errno));
    int fd = w->fd;
    w->fd = -1;
    if (close(fd) != 0) return trw_writer_fail(w, TS_ERR_IO, "trace: closing %s: %s", w->tmp_path, strerror(errno));
    if (w->given_fd >= 0) return TS_OK;
    if (rename(w->tmp_path, w->path) != 0)
        return trw_writer_fail(w, TS_ERR_IO, "trace: renaming %s to %s: %s", w->tmp_path, w->path, strerror(errno));
    return TS_OK;
}

ts_status ts_trace_writer_close(ts_trace_writer *w, ts_trace_summary *summary) {
    if (!w) return ts_fail(TS_ERR_ARG, "trace: no writer to close");
    double t0 = trw_now_seconds();
    ts_status s = trw_check_io(w);
    if (!s) s = finish_file(w);
    if (summary) {
        memset(summary, 0, sizeof *summary);
        summary->steps = w->n_steps;
        summary->steps_with_values = w->steps_with_values;
        summary->values_bytes = w->values_bytes;
        summary->steps_not_finite = w->steps_not_finite;
        snprintf(summary->first_not_finite, sizeof summary->first_not_finite, "%s", w->first_not_finite);
        summary->file_bytes = trw_stream_pos(w);
        summary->wait_seconds = w->wait_seconds;
        summary->hook_seconds = w->hook_seconds;
        summary->close_seconds = trw_now_seconds() - t0;
        describe_policy(w, summary->policy, sizeof summary->policy);
    }
    if (s) {
        char message[sizeof w->err.message];
        snprintf(message, sizeof message, "%s", ts_last_error());
        ts_trace_writer_abort(w);
        return ts_fail(s, "%s", message);
    }
    free(w->tmp_path);
    w->tmp_path = NULL;
    free_writer(w);
    return TS_OK;
}

/* ---- metadata ---- */

static cJSON *token_array(const char *const *tokens, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateString(tokens[i] ? tokens[i] : ""));
    return a;
}

ts_status ts_trace_metadata_build(char **out, const char *config_json, const char *const *source_tokens,
                                  int n_source, const char *const *target_tokens, int n_target, int argc,
                                  char **argv) {
    *out = NULL;
    cJSON *root = cJSON_CreateObject();
    if (!root) return ts_fail(TS_ERR_NOMEM, "trace: no memory for the metadata");
    cJSON *config = config_json ? cJSON_Parse(config_json) : cJSON_CreateNull();
    if (!config) {
        cJSON_Delete(root);
        return ts_fail(TS_ERR_ARG, "trace: the model config is not valid JSON");
    }
    cJSON_AddItemToObject(root, "config", config);
    cJSON_AddItemToObject(root, "source_tokens", token_array(source_tokens, n_source));
    cJSON_AddItemToObject(root, "target_tokens", token_array(target_tokens, n_target));
    size_t len = 1;
    for (int i = 0; i < argc; i++) len += strlen(argv[i]) + 1;
    char *line = malloc(len);
    if (line) {
        line[0] = '\0';
        for (int i = 0; i < argc; i++) {
            if (i) strcat(line, " ");
            strcat(line, argv[i]);
        }
        cJSON_AddStringToObject(root, "command_line", line);
        free(line);
    }
    *out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return *out ? TS_OK : ts_fail(TS_ERR_NOMEM, "trace: no memory for the metadata");
}

/* The metadata as a cJSON object to add to, or an error. */
static ts_status metadata_object(const char *json, cJSON **root) {
    *root = cJSON_Parse(json ? json : "{}");
    if (cJSON_IsObject(*root)) return TS_OK;
    cJSON_Delete(*root);
    *root = NULL;
    return ts_fail(TS_ERR_ARG, "trace: the metadata is not a JSON object");
}

/* Print root back into *json, replacing it; root is deleted. */
static ts_status metadata_replace(char **json, cJSON *root) {
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!text) return ts_fail(TS_ERR_NOMEM, "trace: no memory for the metadata");
    free(*json);
    *json = text;
    return TS_OK;
}

ts_status ts_trace_metadata_add_batch_tokens(char **json, ts_trace_side side, const char *const *tokens, int B,
                                             int n) {
    cJSON *root;
    TS_TRY(metadata_object(*json, &root));
    cJSON *all = cJSON_AddArrayToObject(root, side == TS_TRACE_TARGET ? "target_tokens_batch" : "source_tokens_batch");
    for (int b = 0; all && b < B; b++) cJSON_AddItemToArray(all, token_array(tokens + (size_t)b * n, n));
    return metadata_replace(json, root);
}

ts_status ts_trace_metadata_add_json(char **json, const char *key, const char *value_json) {
    cJSON *value = cJSON_Parse(value_json);
    if (!value) return ts_fail(TS_ERR_ARG, "trace: the metadata's \"%s\" is not JSON", key);
    cJSON *root;
    ts_status st = metadata_object(*json, &root);
    if (st) {
        cJSON_Delete(value);
        return st;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(root, key);
    cJSON_AddItemToObject(root, key, value);
    return metadata_replace(json, root);
}
