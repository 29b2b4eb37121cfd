/* trace_passes: the trace writer's passes over a step's memory, on the
 * model's threads: values copied into the stream (any strided view, in
 * row-major order) with their statistics and CRC, statistics alone, and
 * histograms; for a group, one sweep for every member. See trace_writer.h. */
#include <math.h>
#if defined(_OPENMP)
#include <omp.h>
#endif
#include <stdatomic.h>
#include <string.h>

#include "trace_writer.h"

/* ---- walking a strided view in row-major order ---- */

/* Drop size-1 dims and merge dims laid out one after the other, so the last
 * dim is the longest run the walk can take in one go. */
void trw_view_init(view *v, const ts_tensor *t) {
    memset(v, 0, sizeof *v);
    v->data = t->data;
    v->numel = 1;
    for (int d = 0; d < t->rank; d++) {
        v->numel *= t->shape[d];
        if (t->shape[d] == 1) continue;
        if (v->rank > 0 && v->stride[v->rank - 1] == t->stride[d] * t->shape[d]) {
            v->shape[v->rank - 1] *= t->shape[d];
            v->stride[v->rank - 1] = t->stride[d];
        } else {
            v->shape[v->rank] = t->shape[d];
            v->stride[v->rank] = t->stride[d];
            v->rank++;
        }
    }
    if (v->rank == 0) {
        v->rank = 1;
        v->shape[0] = 1;
        v->stride[0] = 1;
    }
    v->contiguous = v->rank == 1 && v->stride[0] == 1;
}

typedef struct cursor {
    const view *v;
    int64_t idx[TS_MAX_RANK];
    const float *row; /* the element at idx */
} cursor;

static void cursor_seek(cursor *c, const view *v, int64_t e) {
    c->v = v;
    c->row = v->data;
    for (int d = v->rank - 1; d >= 0; d--) {
        c->idx[d] = e % v->shape[d];
        e /= v->shape[d];
        c->row += c->idx[d] * v->stride[d];
    }
}

/* Copy the next n elements into out (row-major) and advance. Views of heads
 * are many short runs (64 floats for q, k, v), so the walk keeps a pointer
 * and moves it by strides rather than recomputing it from the indices. */
static void cursor_gather(cursor *c, float *out, int64_t n) {
    const view *v = c->v;
    int last = v->rank - 1;
    int64_t s = v->stride[last];
    while (n > 0) {
        int64_t k = v->shape[last] - c->idx[last];
        if (k > n) k = n;
        if (s == 1) {
            memcpy(out, c->row, (size_t)k * sizeof *out);
        } else {
            for (int64_t j = 0; j < k; j++) out[j] = c->row[j * s];
        }
        out += k;
        n -= k;
        c->idx[last] += k;
        c->row += k * s;
        for (int d = last; d > 0 && c->idx[d] == v->shape[d]; d--) {
            c->row += v->stride[d - 1] - v->shape[d] * v->stride[d];
            c->idx[d] = 0;
            c->idx[d - 1]++;
        }
    }
}

/* ---- the passes over a step, each split across threads ---- */

static int threads_for(const ts_trace_writer *w, int64_t n) {
    if (n < PARALLEL_MIN) return 1;
    int t = w->threads;
    int64_t most = n / (PARALLEL_MIN / 2);
    return most < t ? (int)most : t;
}

/* Copy elements [a, b) of v to their pieces, adding statistics (when asked)
 * and the CRC of the bytes in order. */
static void copy_part(const trf_stats_ops *ops, const view *v, int64_t a, int64_t b, const piece *pieces,
                      int n_pieces, chunk_result *p, bool stats) {
    trf_acc_init(&p->acc);
    p->crc = 0;
    cursor c;
    if (!v->contiguous) cursor_seek(&c, v, a);
    int k = 0;
    for (int64_t e = a; e < b;) {
        while (k + 1 < n_pieces && e >= pieces[k].start + pieces[k].count) k++;
        int64_t n = pieces[k].start + pieces[k].count - e;
        if (n > b - e) n = b - e;
        if (n > TRF_BLOCK) n = TRF_BLOCK;
        float *out = pieces[k].dst + (e - pieces[k].start);
        if (v->contiguous) {
            if (stats)
                ops->block(&p->acc, v->data + e, out, n);
            else
                memcpy(out, v->data + e, (size_t)n * sizeof *out);
        } else {
            cursor_gather(&c, out, n);
            if (stats) ops->block(&p->acc, out, NULL, n);
        }
        /* The same bytes; the source is the one still in cache. */
        const float *bytes = v->contiguous ? v->data + e : out;
        p->crc = trf_crc32(p->crc, bytes, (size_t)n * sizeof *out);
        e += n;
    }
}

/* Where the next n <= TRF_BLOCK elements at the cursor can be read: in
 * place when v is contiguous, else gathered into scratch; with relu, through
 * the model's ReLU into scratch. */
static const float *next_elements(const trf_stats_ops *ops, cursor *c, int64_t e, int64_t n, bool relu,
                                  float *scratch) {
    const view *v = c->v;
    const float *x = v->data + e;
    if (!v->contiguous) {
        cursor_gather(c, scratch, n);
        x = scratch;
    }
    if (!relu) return x;
    ops->relu(scratch, x, n);
    return scratch;
}

/* Statistics of elements [a, b) of v (through ReLU with relu) without
 * keeping them. */
static void stats_part(const trf_stats_ops *ops, const view *v, int64_t a, int64_t b, bool relu, trf_acc *acc) {
    trf_acc_init(acc);
    float scratch[TRF_BLOCK];
    cursor c = {.v = v};
    if (!v->contiguous) cursor_seek(&c, v, a);
    for (int64_t e = a; e < b; e += TRF_BLOCK) {
        int64_t n = b - e < TRF_BLOCK ? b - e : TRF_BLOCK;
        ops->block(acc, next_elements(ops, &c, e, n, relu, scratch), NULL, n);
    }
}

/* Add the histogram of elements [a, b) of v (through ReLU with relu) to
 * hist. */
static void hist_part(const trf_stats_ops *ops, const view *v, int64_t a, int64_t b, bool relu,
                      const trf_hist_plan *plan, uint64_t *hist) {
    if (v->contiguous && !relu) {
        trf_hist_add(hist, v->data + a, b - a, plan, ops);
        return;
    }
    float scratch[TRF_BLOCK];
    cursor c = {.v = v};
    if (!v->contiguous) cursor_seek(&c, v, a);
    for (int64_t e = a; e < b; e += TRF_BLOCK) {
        int64_t n = b - e < TRF_BLOCK ? b - e : TRF_BLOCK;
        trf_hist_add(hist, next_elements(ops, &c, e, n, relu, scratch), n, plan, ops);
    }
}

/* Elements [a, b) for every member: the first reads them from memory, the
 * others find them in the cache. */
static void group_part(ts_trace_writer *w, const pass_spec *p, int64_t chunk, int64_t a, int64_t b, int tid) {
    for (int m = 0; m < p->n_members; m++) {
        const member *mb = &p->members[m];
        if (p->kind == PASS_GROUP_STATS)
            stats_part(w->ops, p->v, a, b, mb->relu, &w->group_acc[m][chunk]);
        else if (mb->hist)
            hist_part(w->ops, p->v, a, b, mb->relu, &p->plan[m], w->group_hist[m][tid]);
    }
}


/* Claim chunks of the open pass until none is left; tid picks the histogram.
 * The first pass over a step walks it from the end, where the kernel that
 * made it wrote last, so that part comes from the cache; the histogram pass
 * then starts where the first pass ended. Results go by chunk, so the order
 * changes nothing in them. */
static void work_chunks(ts_trace_writer *w, int tid) {
    const pass_spec *p = &w->pass;
    int64_t claimed;
    while ((claimed = atomic_fetch_add(&w->next_chunk, 1)) < p->n_chunks) {
        bool forward = p->kind == PASS_HIST || p->kind == PASS_GROUP_HIST;
        int64_t c = forward ? claimed : p->n_chunks - 1 - claimed;
        int64_t lo = p->a + c * p->chunk, hi = lo + p->chunk < p->b ? lo + p->chunk : p->b;
        switch (p->kind) {
        case PASS_COPY:
        case PASS_COPY_STATS:
            copy_part(w->ops, p->v, lo, hi, p->pieces, p->n_pieces, &w->chunks[c], p->kind == PASS_COPY_STATS);
            break;
        case PASS_STATS: stats_part(w->ops, p->v, lo, hi, false, &w->chunks[c].acc); break;
        case PASS_HIST: hist_part(w->ops, p->v, lo, hi, false, p->plan, w->thread_hist[tid]); break;
        case PASS_GROUP_STATS:
        case PASS_GROUP_HIST: group_part(w, p, c, lo, hi, tid); break;
        }
    }
}

/* Every chunk of the pass, on `threads` threads. The model's OpenMP team
 * does it: between the model's parallel regions its threads wait, spinning,
 * for work, so a pool of the writer's own would fight them for the cores. */
static void work_all_chunks(ts_trace_writer *w, int threads) {
#if defined(_OPENMP)
    if (threads > 1) {
#pragma omp parallel num_threads(threads)
        work_chunks(w, omp_get_thread_num());
        return;
    }
#endif
    (void)threads;
    work_chunks(w, 0);
}

/* Run one pass over elements [a, b) of v, shared by the threads when it is
 * large enough; the chunks' moments and CRCs are merged in order. */
static void run_pass(ts_trace_writer *w, pass_kind kind, const view *v, int64_t a, int64_t b, const piece *pieces,
                     int n_pieces, const trf_hist_plan *plan, pass_result *out) {
    int64_t n = b - a;
    int64_t chunk = (n + MAX_CHUNKS - 1) / MAX_CHUNKS;
    if (chunk < CHUNK_MIN) chunk = CHUNK_MIN;
    chunk = (chunk + TRF_BLOCK - 1) / TRF_BLOCK * TRF_BLOCK;
    int64_t n_chunks = (n + chunk - 1) / chunk;
    int rows = threads_for(w, n);
    memset(w->thread_hist, 0, (size_t)rows * sizeof w->thread_hist[0]);
    w->pass = (pass_spec){.kind = kind, .v = v, .a = a, .b = b, .chunk = chunk, .n_chunks = n_chunks,
                          .pieces = pieces, .n_pieces = n_pieces, .plan = plan};
    atomic_store(&w->next_chunk, 0);
    work_all_chunks(w, rows);
    trf_acc_init(&out->acc);
    out->crc = 0;
    memset(out->hist, 0, sizeof out->hist);
    if (kind == PASS_HIST) {
        for (int t = 0; t < rows; t++)
            for (int k = 0; k < TS_TRACE_HIST_BINS; k++) out->hist[k] += w->thread_hist[t][k];
        return;
    }
    for (int64_t c = 0; c < n_chunks; c++) {
        int64_t len = (c + 1) * chunk < n ? chunk : n - c * chunk;
        out->crc = trf_crc32_combine(out->crc, w->chunks[c].crc, (uint64_t)len * sizeof(float));
        trf_acc_merge(&out->acc, &w->chunks[c].acc);
    }
}

/* One pass of a group over the elements of v: the moments of each member
 * into accs, or its histogram into hists. Chunks fit in the cache (a
 * core's L2 holds 4 of the largest), where the second member finds them. */
void trw_run_group_pass(ts_trace_writer *w, pass_kind kind, const view *v, const member *members,
                           int n_members, const trf_hist_plan *plans, trf_acc *accs,
                           uint64_t (*hists)[TS_TRACE_HIST_BINS]) {
    int64_t n = v->numel;
    int64_t chunk = (n + MAX_CHUNKS - 1) / MAX_CHUNKS;
    if (chunk < CHUNK_MIN) chunk = CHUNK_MIN;
    chunk = (chunk + TRF_BLOCK - 1) / TRF_BLOCK * TRF_BLOCK;
    int64_t n_chunks = (n + chunk - 1) / chunk;
    int threads = threads_for(w, n);
    for (int m = 0; m < n_members; m++) memset(w->group_hist[m], 0, (size_t)threads * sizeof w->group_hist[m][0]);
    w->pass = (pass_spec){.kind = kind, .v = v, .a = 0, .b = n, .chunk = chunk, .n_chunks = n_chunks,
                          .plan = plans, .members = members, .n_members = n_members};
    atomic_store(&w->next_chunk, 0);
    work_all_chunks(w, threads);
    for (int m = 0; m < n_members; m++) {
        if (kind == PASS_GROUP_STATS) {
            trf_acc_init(&accs[m]);
            for (int64_t c = 0; c < n_chunks; c++) trf_acc_merge(&accs[m], &w->group_acc[m][c]);
        } else {
            memset(hists[m], 0, sizeof hists[m]);
            for (int t = 0; t < threads; t++)
                for (int k = 0; k < TS_TRACE_HIST_BINS; k++) hists[m][k] += w->group_hist[m][t][k];
        }
    }
}

/* Stream the kept values into the file: the room left in the current slot
 * and as many free slots as there are now (one parallel pass over them all,
 * gathering, summing and CRC-ing), then hand the full ones to the disk. */
ts_status trw_put_values(ts_trace_writer *w, const view *v, bool stats, trf_acc *acc, uint32_t *crc) {
    trf_acc_init(acc);
    *crc = 0;
    const int64_t slot_floats = (int64_t)(SLOT_BYTES / sizeof(float));
    for (int64_t done = 0; done < v->numel;) {
        ts_status s = trw_ensure_room(w);
        if (s) return s;
        piece pieces[MAX_PIECES];
        int slots[MAX_PIECES];
        int64_t left = v->numel - done;
        int64_t room = (int64_t)((SLOT_BYTES - w->fill) / sizeof(float));
        pieces[0] = (piece){(float *)(void *)(w->slots[w->cur] + w->fill), done, left < room ? left : room};
        slots[0] = w->cur;
        int n_pieces = 1;
        int64_t covered = pieces[0].count;
        while (covered < left && n_pieces < MAX_PIECES) {
            int slot = trw_try_slot(w);
            if (slot < 0) break;
            int64_t k = left - covered < slot_floats ? left - covered : slot_floats;
            pieces[n_pieces] = (piece){(float *)(void *)w->slots[slot], done + covered, k};
            slots[n_pieces++] = slot;
            covered += k;
        }
        pass_result r;
        run_pass(w, stats ? PASS_COPY_STATS : PASS_COPY, v, done, done + covered, pieces, n_pieces, NULL, &r);
        *crc = trf_crc32_combine(*crc, r.crc, (uint64_t)covered * sizeof(float));
        trf_acc_merge(acc, &r.acc);
        /* The first piece filled the current slot; each further one is a slot
         * that becomes current once the one before goes to the disk. */
        w->fill += (size_t)pieces[0].count * sizeof(float);
        for (int i = 1; i < n_pieces; i++) {
            trw_submit_current(w);
            w->cur = slots[i];
            w->fill = (size_t)pieces[i].count * sizeof(float);
        }
        done += covered;
    }
    return TS_OK;
}

void trw_stats_of(ts_trace_writer *w, const view *v, trf_acc *acc) {
    pass_result r;
    run_pass(w, PASS_STATS, v, 0, v->numel, NULL, 0, NULL, &r);
    *acc = r.acc;
}

void trw_hist_of(ts_trace_writer *w, const view *v, ts_trace_stats *st) {
    if (st->finite == 0) return;
    trf_hist_plan plan;
    trf_hist_plan_init(&plan, st);
    pass_result r;
    run_pass(w, PASS_HIST, v, 0, v->numel, NULL, 0, &plan, &r);
    memcpy(st->hist, r.hist, sizeof st->hist);
}
