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
#if defined(_OPENMP)
#include <omp.h>
#endif
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>


#include "tscope/core.h"
#include "tscope/kernels.h"
#include "trace_format.h"

#if !defined(O_DIRECT)
#define O_DIRECT 0 /* not on this system: always buffered */
#endif

#define SLOT_BYTES ((size_t)4 << 20)
#define DIRECT_ALIGN 4096
/* Traces expected to pass this size use O_DIRECT from the start; others
 * switch to it once they have written this much. */
#define DIRECT_AFTER ((uint64_t)32 << 20)
#define DEFAULT_BUFFER_BYTES ((size_t)256 << 20)
#define FLUSH_SECONDS 1.0
/* Elements below which one thread does a pass alone. */
#define PARALLEL_MIN ((int64_t)1 << 17)
#define MAX_THREADS 64
/* A pass is cut in at most MAX_CHUNKS chunks of at least CHUNK_MIN elements. */
#define MAX_CHUNKS 512
#define CHUNK_MIN ((int64_t)1 << 16)
#define MAX_ELEMENTS ((int64_t)1 << 40)
#define RECENT_MAX 8 /* a LayerNorm's out is like its y, three steps back */

typedef enum pass_kind { PASS_COPY, PASS_COPY_STATS, PASS_STATS, PASS_HIST, PASS_GROUP_STATS, PASS_GROUP_HIST } pass_kind;

/* Steps of a group whose statistics one sweep over the first one's memory
 * computes: the first step, and it through ReLU. */
#define GROUP_MEMBERS_MAX 2

typedef struct view view;
typedef struct piece piece;
typedef struct member member;

/* One pass over elements [a, b) of a step, cut in n_chunks chunks; for a
 * group, of every member of it. */
typedef struct pass_spec {
    pass_kind kind;
    const view *v;
    int64_t a, b, chunk, n_chunks;
    const piece *pieces;
    int n_pieces;
    const trf_hist_plan *plan; /* one per member for a group */
    const member *members;
    int n_members;
} pass_spec;

/* One chunk's share before merging. */
typedef struct chunk_result {
    trf_acc acc;
    uint32_t crc;
} chunk_result;

/* Statistics the writer holds for a step, to give again to a step with the
 * same elements; the histogram may have been left to the reader. */
typedef struct known_stats {
    ts_trace_stats stats;
    bool hist; /* stats.hist is filled */
} known_stats;

typedef struct job {
    int slot;
    uint64_t offset;
} job;

struct ts_trace_writer {
    char *path, *tmp_path;
    int fd;
    ts_trace_options opt;
    char *only[TS_TRACE_ONLY_MAX]; /* owned copies of opt.only */
    const trf_stats_ops *ops;
    int threads;

    /* The stream as the hook fills it. */
    unsigned char **slots;
    int n_slots, max_slots;
    int cur;             /* slot being filled, -1 before the first */
    size_t fill;         /* bytes of it in use */
    uint64_t cur_offset; /* file offset of its first byte */
    double last_flush;

    /* Shared with the writer thread, under mu. */
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv_job, cv_free;
    job *queue;
    int q_head, q_len;
    bool *slot_free;
    bool stop;
    _Atomic bool direct; /* O_DIRECT is on; either side may turn it off */
    ts_status io_status;
    char io_error[512];

    /* Records so far, and a copy of each one's prefix and suffix for the
     * index, so that a reader opens the file without visiting every record. */
    unsigned char *copies;
    size_t copies_len, copies_cap;
    uint64_t *offsets;
    int64_t n_steps, cap_steps;
    int64_t steps_with_values;
    uint64_t values_bytes;
    /* The step views may point into: the last step whose values were stored
     * from contiguous memory, with only view steps after it. */
    struct {
        int64_t index; /* -1: none */
        const float *data;
        int64_t count; /* what was stored: [data, data + count) */
    } base;
    /* The last steps, newest at recent[(n_recent - 1) % RECENT_MAX]: for one
     * the model says is like one of them (ts_hook_like_fn), and for a view
     * of exactly the elements one of them computed, which has the same
     * statistics (seed 000 puts the weights between the values and their
     * permuted view). */
    struct recent_step {
        ts_tensor t;   /* as handed over */
        bool computed; /* it wrote t's memory (not a view, not recorded ahead) ... */
        bool intact;   /* ... and no later step has written over it */
        bool values;   /* its record keeps values ... */
        int batch;     /* ... of this batch element, -1 all ... */
        int64_t base;  /* ... which are base's stored values */
        int64_t offset;                /* from this element */
        int64_t strides[TS_MAX_RANK];  /* walked with these strides (row-major of the kept shape for its own) */
        int scale;                     /* times 2^scale */
        bool relu;                     /* then through ReLU */
        bool has_stats;
        known_stats known;
    } recent[RECENT_MAX];
    int64_t n_recent;
    bool reduced;            /* level auto chose the reduced set */
    int64_t reduced_from;    /* from this step (running budget), -1 from the start */
    char reduced_name[128];  /* the step that passed the budget */
    double wait_seconds, hook_seconds;
    chunk_result chunks[MAX_CHUNKS];                    /* the hook's passes' scratch */
    uint64_t thread_hist[MAX_THREADS][TS_TRACE_HIST_BINS];
    trf_acc group_acc[GROUP_MEMBERS_MAX][MAX_CHUNKS];  /* a group's, by member */
    uint64_t group_hist[GROUP_MEMBERS_MAX][MAX_THREADS][TS_TRACE_HIST_BINS];

    /* The pass the hook's threads are working on. */
    pass_spec pass;
    _Atomic int64_t next_chunk;
    ts_status status; /* first failure of the hook, replayed */
    char error[512];
};

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

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

/* ---- errors ---- */

static ts_status writer_fail(ts_trace_writer *w, ts_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static ts_status writer_fail(ts_trace_writer *w, ts_status s, const char *fmt, ...) {
    if (w->status == TS_OK) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->error, sizeof w->error, fmt, ap);
        va_end(ap);
        w->status = s;
    }
    return ts_fail(w->status, "%s", w->error);
}

/* The writer thread's failure, if any, becomes the hook's. */
static ts_status check_io(ts_trace_writer *w) {
    if (w->status) return ts_fail(w->status, "%s", w->error);
    pthread_mutex_lock(&w->mu);
    ts_status s = w->io_status;
    if (s) {
        w->status = s;
        memcpy(w->error, w->io_error, sizeof w->error);
    }
    pthread_mutex_unlock(&w->mu);
    return s ? ts_fail(s, "%s", w->error) : TS_OK;
}

/* ---- the disk side ---- */

/* Write all of buf at offset; with O_DIRECT refused by the file system, go on
 * buffered. Called by the writer thread, or by the hook when the thread is
 * idle for this region. Returns 0 or an errno. */
static int write_at(ts_trace_writer *w, const unsigned char *buf, size_t n, uint64_t offset) {
    while (n > 0) {
        ssize_t got = pwrite(w->fd, buf, n, (off_t)offset);
        if (got < 0) {
            if (errno == EINTR) continue;
            if (errno == EINVAL && w->direct) {
                int flags = fcntl(w->fd, F_GETFL);
                if (flags >= 0 && fcntl(w->fd, F_SETFL, flags & ~O_DIRECT) == 0) {
                    w->direct = false;
                    continue;
                }
            }
            return errno;
        }
        if (got == 0) return EIO;
        buf += got;
        n -= (size_t)got;
        offset += (uint64_t)got;
    }
    return 0;
}

static void maybe_go_direct(ts_trace_writer *w, uint64_t offset) {
    if (w->direct || offset < DIRECT_AFTER) return;
    int flags = fcntl(w->fd, F_GETFL);
    if (flags >= 0 && fcntl(w->fd, F_SETFL, flags | O_DIRECT) == 0) w->direct = true;
}

/* A new slot, 2 MB aligned and backed by huge pages where the kernel allows:
 * fewer page faults to fill it, fewer pages to pin for O_DIRECT. With
 * `touch`, its pages are faulted in now (the kernel zeroes each one). */
static unsigned char *new_slot(bool touch) {
    void *mem = NULL;
    if (posix_memalign(&mem, (size_t)2 << 20, SLOT_BYTES) != 0) return NULL;
    unsigned char *buf = mem;
#if defined(MADV_HUGEPAGE)
    madvise(buf, SLOT_BYTES, MADV_HUGEPAGE);
#endif
    for (size_t at = 0; touch && at < SLOT_BYTES; at += 4096) ((volatile unsigned char *)buf)[at] = 0;
    return buf;
}

/* A free slot: one that came back from the disk, or a new one while under
 * the memory limit; -1 when every slot is in flight. Called under mu. */
static int take_free_slot(ts_trace_writer *w) {
    for (int i = 0; i < w->n_slots; i++)
        if (w->slot_free[i]) {
            w->slot_free[i] = false;
            return i;
        }
    if (w->n_slots < w->max_slots) {
        unsigned char *buf = new_slot(false);
        if (!buf) return -1;
        w->slots[w->n_slots] = buf;
        w->slot_free[w->n_slots] = false;
        return w->n_slots++;
    }
    return -1;
}

static bool any_slot_free(const ts_trace_writer *w) {
    for (int i = 0; i < w->n_slots; i++)
        if (w->slot_free[i]) return true;
    return false;
}

/* Called by the writer thread under mu, which it drops meanwhile: when the
 * model fills slots faster than the disk empties them and none is free, the
 * hook is about to make one and fault in its pages while the model's
 * threads wait; the writer thread makes it first. */
static void grow_ahead(ts_trace_writer *w) {
    if (w->q_len == 0 || w->n_slots >= w->max_slots || any_slot_free(w)) return;
    int i = w->n_slots++;
    w->slots[i] = NULL; /* reserved: neither free nor the hook's yet */
    pthread_mutex_unlock(&w->mu);
    unsigned char *buf = new_slot(true);
    pthread_mutex_lock(&w->mu);
    w->slots[i] = buf;
    w->slot_free[i] = buf != NULL;
    pthread_cond_broadcast(&w->cv_free);
}

static void *writer_main(void *arg) {
    ts_trace_writer *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (w->q_len == 0 && !w->stop) pthread_cond_wait(&w->cv_job, &w->mu);
        if (w->q_len == 0) break; /* stop, and nothing left */
        job j = w->queue[w->q_head];
        bool failed = w->io_status != TS_OK;
        pthread_mutex_unlock(&w->mu);
        int err = 0;
        if (!failed) {
            maybe_go_direct(w, j.offset);
            err = write_at(w, w->slots[j.slot], SLOT_BYTES, j.offset);
        }
        pthread_mutex_lock(&w->mu);
        if (err && w->io_status == TS_OK) {
            w->io_status = TS_ERR_IO;
            snprintf(w->io_error, sizeof w->io_error, "trace: writing %s: %s", w->tmp_path, strerror(err));
        }
        w->q_head = (w->q_head + 1) % w->max_slots;
        w->q_len--;
        w->slot_free[j.slot] = true;
        pthread_cond_broadcast(&w->cv_free);
        grow_ahead(w);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Block until the writer thread has written every slot handed to it. */
static void drain(ts_trace_writer *w) {
    pthread_mutex_lock(&w->mu);
    while (w->q_len > 0) pthread_cond_wait(&w->cv_free, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

/* A slot for the hook, waiting for the disk when every slot is in flight. */
static ts_status acquire_slot(ts_trace_writer *w) {
    pthread_mutex_lock(&w->mu);
    int slot;
    while ((slot = take_free_slot(w)) < 0) {
        if (w->q_len == 0) { /* nothing in flight: no slot will come back */
            pthread_mutex_unlock(&w->mu);
            return writer_fail(w, TS_ERR_NOMEM, "trace: no memory for a %zu MB write buffer", SLOT_BYTES >> 20);
        }
        double t0 = now_seconds();
        pthread_cond_wait(&w->cv_free, &w->mu);
        w->wait_seconds += now_seconds() - t0;
    }
    pthread_mutex_unlock(&w->mu);
    w->cur = slot;
    return TS_OK;
}

/* A slot if one is free now, else -1 (never waits). */
static int try_slot(ts_trace_writer *w) {
    pthread_mutex_lock(&w->mu);
    int slot = take_free_slot(w);
    pthread_mutex_unlock(&w->mu);
    return slot;
}

/* Hand the full current slot to the writer thread. */
static void submit_current(ts_trace_writer *w) {
    pthread_mutex_lock(&w->mu);
    int tail = (w->q_head + w->q_len) % w->max_slots;
    w->queue[tail] = (job){w->cur, w->cur_offset};
    w->q_len++;
    pthread_cond_signal(&w->cv_job);
    pthread_mutex_unlock(&w->mu);
    w->cur_offset += SLOT_BYTES;
    w->cur = -1;
    w->fill = 0;
}

/* Hand the full current slot to the writer thread and take the next. */
static ts_status submit_and_next(ts_trace_writer *w) {
    if (w->cur >= 0) submit_current(w);
    ts_status s = check_io(w);
    if (s) return s;
    return acquire_slot(w);
}

/* Room in the current slot, taking a new one when it is full. */
static ts_status ensure_room(ts_trace_writer *w) {
    if (w->cur >= 0 && w->fill < SLOT_BYTES) return TS_OK;
    return submit_and_next(w);
}

static ts_status stream_put(ts_trace_writer *w, const void *data, size_t n) {
    const unsigned char *p = data;
    while (n > 0) {
        ts_status s = ensure_room(w);
        if (s) return s;
        size_t k = SLOT_BYTES - w->fill;
        if (k > n) k = n;
        unsigned char *dst = w->slots[w->cur] + w->fill;
        if (p) {
            memcpy(dst, p, k);
            p += k;
        } else {
            memset(dst, 0, k);
        }
        w->fill += k;
        n -= k;
    }
    return TS_OK;
}

static uint64_t stream_pos(const ts_trace_writer *w) { return w->cur_offset + (w->cur >= 0 ? w->fill : 0); }

/* Put the part of the current slot filled so far into the file, so that a
 * killed process loses nothing handed over before. The slot stays current;
 * its tail is rewritten when it is full. Zeros pad the write to the O_DIRECT
 * block size; a reader sees them as the end of the records. */
static ts_status flush_partial(ts_trace_writer *w) {
    if (w->cur < 0 || w->fill == 0) return TS_OK;
    size_t n = (w->fill + DIRECT_ALIGN - 1) & ~(size_t)(DIRECT_ALIGN - 1);
    memset(w->slots[w->cur] + w->fill, 0, n - w->fill);
    int err = write_at(w, w->slots[w->cur], n, w->cur_offset);
    w->last_flush = now_seconds();
    if (err) return writer_fail(w, TS_ERR_IO, "trace: writing %s: %s", w->tmp_path, strerror(err));
    return TS_OK;
}

/* ---- walking a strided view in row-major order ---- */

typedef struct view {
    const float *data;
    int rank; /* >= 1 after collapsing */
    int64_t shape[TS_MAX_RANK], stride[TS_MAX_RANK];
    int64_t numel;
    bool contiguous;
} view;

/* Drop size-1 dims and merge dims laid out one after the other, so the last
 * dim is the longest run the walk can take in one go. */
static void view_init(view *v, const ts_tensor *t) {
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

/* What a pass gives back: moments and CRC of its elements in order, and the
 * histogram. */
typedef struct pass_result {
    trf_acc acc;
    uint32_t crc;
    uint64_t hist[TS_TRACE_HIST_BINS];
} pass_result;

static int threads_for(const ts_trace_writer *w, int64_t n) {
    if (n < PARALLEL_MIN) return 1;
    int t = w->threads;
    int64_t most = n / (PARALLEL_MIN / 2);
    return most < t ? (int)most : t;
}

/* Where a run of a step's values goes: `count` elements from element
 * `start` of the step, to dst (one slot's worth at most). */
typedef struct piece {
    float *dst;
    int64_t start, count;
} piece;

#define MAX_PIECES 16

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

/* A member of a group: the elements of the pass's view, through ReLU or not. */
typedef struct member {
    bool relu;
    bool hist; /* bin it in the histogram pass (it has finite elements) */
    int step;  /* index in the group */
} member;

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
static void run_group_pass(ts_trace_writer *w, pass_kind kind, const view *v, const member *members,
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
    if (tag == TS_TAG_POSENC || tag == TS_TAG_PARAM || tag == TS_TAG_SCALAR) return false;
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
    if (len == 0) return writer_fail(w, TS_ERR_ARG, "trace: a step has no name");
    if (len > TRF_NAME_MAX)
        return writer_fail(w, TS_ERR_ARG, "trace: step name '%.40s...' is %zu bytes, more than %d", name, len,
                           TRF_NAME_MAX);
    if (!t) return writer_fail(w, TS_ERR_ARG, "trace: step '%s' has no tensor", name);
    if (t->rank < 0 || t->rank > TS_MAX_RANK)
        return writer_fail(w, TS_ERR_ARG, "trace: step '%s' has rank %d (0..%d)", name, t->rank, TS_MAX_RANK);
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++) {
        if (t->shape[d] < 0 || (t->shape[d] > 0 && n > MAX_ELEMENTS / t->shape[d]))
            return writer_fail(w, TS_ERR_ARG, "trace: step '%s' has a bad shape", name);
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

static void put_prefix(unsigned char *p, size_t prefix_size, uint64_t record_size, int64_t index, ts_op op,
                       ts_tag tag, const ts_tensor *t, unsigned content, int batch, const char *name,
                       int64_t values_count, int64_t view_base, int64_t view_offset, int view_scale,
                       const ts_tensor *kept) {
    size_t len = strlen(name);
    memset(p, 0, prefix_size);
    memcpy(p, TRF_PREFIX_MAGIC, 4);
    trf_put32(p + TRF_P_PREFIX_SIZE, (uint32_t)prefix_size);
    trf_put64(p + TRF_P_RECORD_SIZE, record_size);
    trf_put64(p + TRF_P_INDEX, (uint64_t)index);
    trf_put16(p + TRF_P_OP, (uint16_t)op);
    trf_put16(p + TRF_P_TAG, (uint16_t)tag);
    p[TRF_P_DTYPE] = (content & TRF_CONTENT_VALUES) ? TRF_DTYPE_F32 : TRF_DTYPE_NONE;
    p[TRF_P_RANK] = (unsigned char)t->rank;
    p[TRF_P_CONTENT] = (unsigned char)content;
    trf_put32(p + TRF_P_BATCH, (uint32_t)(int32_t)batch);
    trf_put32(p + TRF_P_NAME_LEN, (uint32_t)len);
    trf_put64(p + TRF_P_VALUES_COUNT, (uint64_t)values_count);
    for (int d = 0; d < t->rank; d++) trf_put64(p + TRF_P_SHAPE + 8 * d, (uint64_t)t->shape[d]);
    if (content & TRF_CONTENT_VIEW) {
        trf_put64(p + TRF_P_VIEW_BASE, (uint64_t)view_base);
        trf_put64(p + TRF_P_VIEW_OFFSET, (uint64_t)view_offset);
        p[TRF_P_VIEW_SCALE] = (unsigned char)(int8_t)view_scale;
        for (int d = 0; d < kept->rank; d++) trf_put64(p + TRF_P_VIEW_STRIDES + 8 * d, (uint64_t)kept->stride[d]);
    }
    memcpy(p + TRF_P_NAME, name, len);
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

/* Stream the kept values into the file: the room left in the current slot
 * and as many free slots as there are now (one parallel pass over them all,
 * gathering, summing and CRC-ing), then hand the full ones to the disk. */
static ts_status put_values(ts_trace_writer *w, const view *v, bool stats, trf_acc *acc, uint32_t *crc) {
    trf_acc_init(acc);
    *crc = 0;
    const int64_t slot_floats = (int64_t)(SLOT_BYTES / sizeof(float));
    for (int64_t done = 0; done < v->numel;) {
        ts_status s = ensure_room(w);
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
            int slot = try_slot(w);
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
            submit_current(w);
            w->cur = slots[i];
            w->fill = (size_t)pieces[i].count * sizeof(float);
        }
        done += covered;
    }
    return TS_OK;
}

static void stats_of(ts_trace_writer *w, const view *v, trf_acc *acc) {
    pass_result r;
    run_pass(w, PASS_STATS, v, 0, v->numel, NULL, 0, NULL, &r);
    *acc = r.acc;
}

static void hist_of(ts_trace_writer *w, const view *v, ts_trace_stats *st) {
    if (st->finite == 0) return;
    trf_hist_plan plan;
    trf_hist_plan_init(&plan, st);
    pass_result r;
    run_pass(w, PASS_HIST, v, 0, v->numel, NULL, 0, &plan, &r);
    memcpy(st->hist, r.hist, sizeof st->hist);
}

static ts_status keep_copy(ts_trace_writer *w, const unsigned char *prefix, size_t prefix_size,
                           const unsigned char *suffix) {
    size_t need = w->copies_len + prefix_size + TRF_SUFFIX_SIZE;
    if (need > w->copies_cap) {
        size_t cap = w->copies_cap ? 2 * w->copies_cap : (size_t)1 << 16;
        while (cap < need) cap *= 2;
        unsigned char *grown = realloc(w->copies, cap);
        if (!grown) return writer_fail(w, TS_ERR_NOMEM, "trace: no memory for the index");
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

/* One step; factor != 0: the model says its values are those of the step
 * whose tensor was `of` (NULL: the step just before) times factor
 * (ts_hook_like_fn). With `ahead` the model has not made the step yet
 * (ts_hook_derive_fn): t's memory holds the previous step's values, so the
 * step is written only if nothing has to be read from it (*done). */
static ts_status write_step(ts_trace_writer *w, const char *name, ts_op op, const ts_tensor *t, ts_tag tag,
                            const ts_tensor *of, float factor, bool ahead, const ts_trace_stats *pre,
                            bool *done) {
    *done = false;
    ts_status s = check_io(w);
    if (s) return s;
    int64_t numel = 0;
    if ((s = check_step(w, name, t, &numel))) return s;
    if (w->n_steps == w->cap_steps) {
        int64_t cap = w->cap_steps ? 2 * w->cap_steps : 256;
        uint64_t *grown = realloc(w->offsets, (size_t)cap * sizeof *grown);
        if (!grown) return writer_fail(w, TS_ERR_NOMEM, "trace: no memory for the index");
        w->offsets = grown;
        w->cap_steps = cap;
    }
    /* Like an earlier step: its statistics, scaled, and its values index for
     * index (scaled by 2^exponent), so a view of them. The step just before
     * must be the same memory; one named by `of` the same shape. Only factor
     * 1 in the same memory leaves the memory as it was for later views. */
    int exponent = 0;
    const struct recent_step *src = factor != 0.0f ? recent_step_of(w, ahead ? NULL : of) : NULL;
    bool like = src && src->has_stats && exact_factor(factor, &exponent) &&
                (of && !ahead ? same_shape(t, &src->t) : same_layout(t, &src->t));
    /* A ReLU like its input: the values are a view through ReLU, but the
     * statistics of what ReLU left must still be read. */
    bool relu = like && op == TS_OP_RELU && exponent == 0 && !ahead;
    bool view_op = ts_op_is_view(op) || like;
    bool unchanged = ts_op_is_view(op) || (like && !relu && exponent == 0 && same_layout(t, &src->t));
    decision d = decide(w, name, t, numel, tag, view_op);
    if (numel > 0 && !t->data) d.stats = d.values = false;

    /* What is kept: all of t, or element d.batch of dim 0. */
    ts_tensor kept = *t;
    if (d.values && d.batch >= 0) {
        kept.data = t->data + d.batch * t->stride[0];
        kept.shape[0] = 1;
    }
    /* Statistics need the elements in no order: walk them as they lie. */
    ts_tensor in_memory;
    in_memory_order(t, &in_memory);
    view vt, vk;
    view_init(&vt, &in_memory);
    view_init(&vk, &kept);
    int64_t values_count = d.values ? vk.numel : 0;
    int64_t view_offset = 0, view_base = w->base.index;
    ts_tensor view_of = kept;
    bool as_view;
    if (like) {
        /* Where the earlier step's values live (its own record, or the one
         * it views), index for index, when it kept the same batch element. */
        as_view = d.values && src->values && src->batch == d.batch &&
                  abs(src->scale + exponent) <= TRF_VIEW_SCALE_MAX && (!src->relu || exponent == 0);
        view_base = src->base;
        view_offset = src->offset;
        memcpy(view_of.stride, src->strides, sizeof view_of.stride);
        exponent += src->scale;
    } else {
        as_view = d.values && view_op && fits_base(w, &kept, values_count, &view_offset);
    }
    /* Statistics from the step before (like it) or from a step with the same
     * elements (a view of them), else computed here. A step that keeps every
     * value leaves its histogram to the reader, which has the values: one
     * pass less over the model's memory. */
    bool derived = d.stats && like && !relu;
    const known_stats *same = d.stats && !like && ts_op_is_view(op) ? same_elements(w, t, numel) : NULL;
    bool hist_known = derived ? src->known.hist : same ? same->hist : false;
    bool hist_later = d.stats && !hist_known && d.values && d.batch < 0;
    bool view_relu = as_view && like && (relu || src->relu);
    unsigned content = (d.stats ? TRF_CONTENT_STATS : 0u) | (d.values ? TRF_CONTENT_VALUES : 0u) |
                       (as_view ? TRF_CONTENT_VIEW : 0u) | (hist_later ? TRF_CONTENT_HIST_FROM_VALUES : 0u) |
                       (view_relu ? TRF_CONTENT_VIEW_RELU : 0u);
    bool reads_memory = (d.stats && !derived && !same) || (d.stats && !hist_known && !hist_later) ||
                        (d.values && !as_view);
    if (ahead && (!like || reads_memory)) return TS_OK; /* the model makes the step and calls again */
    *done = true;

    size_t prefix_size = (size_t)trf_align(TRF_P_NAME + strlen(name) + 1);
    uint64_t values_area = as_view ? 0 : trf_align((uint64_t)values_count * sizeof(float));
    uint64_t record_size = prefix_size + values_area + TRF_SUFFIX_SIZE;
    unsigned char prefix[TRF_P_NAME + TRF_NAME_MAX + TRF_ALIGN];
    put_prefix(prefix, prefix_size, record_size, w->n_steps, op, tag, t, content, d.values ? d.batch : -1, name,
               values_count, view_base, view_offset, like ? exponent : 0, &view_of);

    /* Every record starts on a 64-byte boundary, so values do too. */
    uint64_t offset = stream_pos(w);
    if ((s = stream_put(w, prefix, prefix_size))) return s;

    ts_trace_stats st;
    memset(&st, 0, sizeof st);
    uint32_t values_crc = 0;
    trf_acc acc;
    trf_acc_init(&acc);
    bool stored = d.values && !as_view;
    bool whole = stored && d.batch < 0 && !derived && !same;
    if (stored && (s = put_values(w, &vk, whole, &acc, &values_crc))) return s;
    if (values_area > (uint64_t)values_count * sizeof(float) &&
        (s = stream_put(w, NULL, (size_t)(values_area - (uint64_t)values_count * sizeof(float)))))
        return s;
    if (derived) {
        scale_stats(&st, &src->known.stats, factor);
    } else if (same) {
        st = same->stats; /* the same elements in another order: the same statistics */
    } else if (d.stats && pre && !hist_later) {
        st = *pre; /* computed with its group's */
        hist_known = true;
    } else if (d.stats) {
        if (!whole) stats_of(w, &vt, &acc);
        trf_acc_finish(&acc, &st);
    }
    if (d.stats && !hist_known && !hist_later) hist_of(w, &vt, &st);
    if (hist_later) memset(st.hist, 0, sizeof st.hist);
    known_stats now = {st, d.stats && !hist_later};

    /* Views may point into this step from now on, or (after a step that
     * computed something) into nothing until the next stored one. */
    if (!unchanged) {
        w->base.index = -1;
        forget_overwritten(w, t, numel);
    }
    if (stored && vk.contiguous) {
        w->base.index = w->n_steps;
        w->base.data = kept.data;
        w->base.count = values_count;
    }

    struct recent_step *r = &w->recent[w->n_recent++ % RECENT_MAX];
    /* A step recorded ahead was never made: its memory holds the step
     * before, so nothing may take statistics from it. */
    *r = (struct recent_step){.t = *t, .computed = !unchanged && !ahead, .intact = true, .values = d.values,
                              .batch = d.values ? d.batch : -1, .has_stats = d.stats, .known = now};
    if (as_view) { /* where this view's values live */
        r->base = view_base;
        r->offset = view_offset;
        memcpy(r->strides, view_of.stride, sizeof r->strides);
        r->scale = like ? exponent : 0;
        r->relu = view_relu;
    } else if (stored) {
        ts_tensor own = kept;
        ts_tensor_row_major(&own);
        r->base = w->n_steps;
        memcpy(r->strides, own.stride, sizeof r->strides);
    }

    unsigned char suffix[TRF_SUFFIX_SIZE];
    put_suffix(suffix, w->n_steps, &st, values_crc);
    uint32_t crc = trf_crc32(0, prefix, prefix_size);
    crc = trf_crc32(crc, suffix, TRF_S_RECORD_CRC);
    trf_put32(suffix + TRF_S_RECORD_CRC, crc);
    if ((s = stream_put(w, suffix, sizeof suffix))) return s;
    if ((s = keep_copy(w, prefix, prefix_size, suffix))) return s;

    w->offsets[w->n_steps++] = offset;
    if (d.values) {
        w->steps_with_values++;
        if (stored) w->values_bytes += (uint64_t)values_count * sizeof(float);
    }
    if (now_seconds() - w->last_flush > FLUSH_SECONDS) {
        /* Only behind the slots already written, so the file never has a
         * hole that would hide complete steps from a scan. */
        pthread_mutex_lock(&w->mu);
        bool idle = w->q_len == 0;
        pthread_mutex_unlock(&w->mu);
        if (idle) return flush_partial(w);
    }
    return TS_OK;
}

ts_status ts_trace_writer_step(ts_trace_writer *w, const char *name, ts_op op, const ts_tensor *t, ts_tag tag) {
    bool done;
    return write_step(w, name, op, t, tag, NULL, 0.0f, false, NULL, &done);
}

static ts_status hook_like(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag,
                           const ts_tensor *of, float factor) {
    ts_trace_writer *w = ctx;
    double t0 = now_seconds();
    bool done;
    ts_status s = write_step(w, name, op, t, tag, of, factor, false, NULL, &done);
    w->hook_seconds += now_seconds() - t0;
    return s;
}

static ts_status hook_derive(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag, float factor,
                             bool *done) {
    ts_trace_writer *w = ctx;
    double t0 = now_seconds();
    ts_status s = write_step(w, name, op, t, tag, NULL, factor, true, NULL, done);
    w->hook_seconds += now_seconds() - t0;
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
    view_init(&v, &in_memory);
    trf_acc accs[GROUP_MEMBERS_MAX];
    trf_hist_plan plans[GROUP_MEMBERS_MAX];
    uint64_t hists[GROUP_MEMBERS_MAX][TS_TRACE_HIST_BINS];
    run_group_pass(w, PASS_GROUP_STATS, &v, members, n_members, NULL, accs, NULL);
    for (int m = 0; m < n_members; m++) {
        ts_trace_stats *st = &pre[members[m].step];
        trf_acc_finish(&accs[m], st);
        members[m].hist = st->finite > 0;
        if (members[m].hist) trf_hist_plan_init(&plans[m], st);
    }
    run_group_pass(w, PASS_GROUP_HIST, &v, members, n_members, plans, NULL, hists);
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
    double t0 = now_seconds();
    ts_status s = check_io(w);
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
        s = write_step(w, steps[i].name, steps[i].op, steps[i].t, steps[i].tag, NULL, steps[i].relu ? 1.0f : 0.0f,
                       false, have[i] ? &pre[i] : NULL, &ignored);
    }
    w->hook_seconds += now_seconds() - t0;
    return s;
}

ts_hook ts_trace_writer_hook(ts_trace_writer *w) {
    return (ts_hook){
        .fn = hook_fn, .ctx = w, .like_previous = hook_like, .derive_next = hook_derive, .group = hook_group};
}

ts_status ts_trace_writer_flush(ts_trace_writer *w) {
    ts_status s = check_io(w);
    if (s) return s;
    drain(w);
    if ((s = check_io(w))) return s;
    return flush_partial(w);
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
    free_writer(w);
    if (tmp) unlink(tmp);
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
    ts_status s = stream_put(w, h, sizeof h);
    if (!s) s = stream_put(w, meta, meta_size);
    if (!s) s = stream_put(w, NULL, (size_t)(records - TRF_HEADER_SIZE - meta_size));
    return s;
}

ts_status ts_trace_writer_open(const char *path, const char *metadata_json, const ts_trace_options *opt_in,
                               ts_trace_writer **out) {
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

    w->fd = open(w->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        s = ts_fail(TS_ERR_IO, "trace: cannot create %s: %s", w->tmp_path, strerror(errno));
        free_writer(w);
        free(meta);
        return s;
    }
    if (opt.expected_bytes >= DIRECT_AFTER && !w->reduced && opt.level != TS_TRACE_SHAPES &&
        opt.level != TS_TRACE_STATS)
        maybe_go_direct(w, DIRECT_AFTER);

    if (pthread_mutex_init(&w->mu, NULL) || pthread_cond_init(&w->cv_job, NULL) ||
        pthread_cond_init(&w->cv_free, NULL) || pthread_create(&w->thread, NULL, writer_main, w)) {
        ts_trace_writer_abort(w);
        free(meta);
        return ts_fail(TS_ERR_NOMEM, "trace: cannot start the writer thread");
    }
    w->thread_started = true;
    w->last_flush = now_seconds();

    s = write_header(w, meta);
    free(meta);
    if (s) {
        char message[sizeof w->error];
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
    uint64_t index_offset = stream_pos(w);
    size_t index_size = TRF_INDEX_HEAD + (size_t)w->n_steps * 8 + w->copies_len;
    unsigned char *index = calloc(1, index_size);
    if (!index) return writer_fail(w, TS_ERR_NOMEM, "trace: no memory for the index");
    memcpy(index, TRF_INDEX_MAGIC, 4);
    trf_put64(index + 8, (uint64_t)w->n_steps);
    for (int64_t i = 0; i < w->n_steps; i++) trf_put64(index + TRF_INDEX_HEAD + 8 * i, w->offsets[i]);
    if (w->copies_len) memcpy(index + TRF_INDEX_HEAD + 8 * w->n_steps, w->copies, w->copies_len);
    uint32_t index_crc = trf_crc32(0, index, index_size);
    ts_status s = stream_put(w, index, index_size);
    free(index);
    if (s) return s;
    uint64_t end = index_offset + index_size;
    if (trf_align(end) > end && (s = stream_put(w, NULL, (size_t)(trf_align(end) - end)))) return s;

    unsigned char t[TRF_TRAILER_SIZE] = {0};
    memcpy(t, TRF_TRAILER_MAGIC, 8);
    trf_put64(t + TRF_T_INDEX_OFFSET, index_offset);
    trf_put64(t + TRF_T_INDEX_SIZE, index_size);
    trf_put64(t + TRF_T_STEP_COUNT, (uint64_t)w->n_steps);
    trf_put32(t + TRF_T_INDEX_CRC, index_crc);
    trf_put32(t + TRF_T_CRC, trf_crc32(0, t, TRF_T_CRC));
    if ((s = stream_put(w, t, sizeof t))) return s;

    uint64_t total = stream_pos(w);
    drain(w);
    if ((s = check_io(w))) return s;
    if ((s = flush_partial(w))) return s;
    if (ftruncate(w->fd, (off_t)total) != 0)
        return writer_fail(w, TS_ERR_IO, "trace: writing %s: %s", w->tmp_path, strerror(errno));
    int fd = w->fd;
    w->fd = -1;
    if (close(fd) != 0) return writer_fail(w, TS_ERR_IO, "trace: closing %s: %s", w->tmp_path, strerror(errno));
    if (rename(w->tmp_path, w->path) != 0)
        return writer_fail(w, TS_ERR_IO, "trace: renaming %s to %s: %s", w->tmp_path, w->path, strerror(errno));
    return TS_OK;
}

ts_status ts_trace_writer_close(ts_trace_writer *w, ts_trace_summary *summary) {
    if (!w) return ts_fail(TS_ERR_ARG, "trace: no writer to close");
    double t0 = now_seconds();
    ts_status s = check_io(w);
    if (!s) s = finish_file(w);
    if (summary) {
        memset(summary, 0, sizeof *summary);
        summary->steps = w->n_steps;
        summary->steps_with_values = w->steps_with_values;
        summary->values_bytes = w->values_bytes;
        summary->file_bytes = stream_pos(w);
        summary->wait_seconds = w->wait_seconds;
        summary->hook_seconds = w->hook_seconds;
        summary->close_seconds = now_seconds() - t0;
        describe_policy(w, summary->policy, sizeof summary->policy);
    }
    if (s) {
        char message[sizeof w->error];
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
