/* trace_stream: the trace writer's output stream. The hook fills 4 MB slots
 * in order; a writer thread puts full ones on disk (O_DIRECT for large
 * traces) while the model runs on. See trace_writer.h for how the writer's
 * three files share the work. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "core/platform.h"
#include "trace_writer.h"

double trw_now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- errors ---- */

/* The writer thread's failure, if any, becomes the hook's. */
ts_status trw_check_io(ts_trace_writer *w) {
    if (w->err.status) return ts_sticky_replay(&w->err);
    pthread_mutex_lock(&w->mu);
    if (w->io.status) w->err = w->io;
    pthread_mutex_unlock(&w->mu);
    return ts_sticky_replay(&w->err);
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
            if (errno == EINVAL && w->direct && ts_platform_uncached_writes(w->fd, false)) {
                w->direct = false;
                continue;
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

void trw_maybe_go_direct(ts_trace_writer *w, uint64_t offset) {
    if (w->direct || offset < DIRECT_AFTER) return;
    if (ts_platform_uncached_writes(w->fd, true)) w->direct = true;
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

void *trw_writer_main(void *arg) {
    ts_trace_writer *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (w->q_len == 0 && !w->stop) pthread_cond_wait(&w->cv_job, &w->mu);
        if (w->q_len == 0) break; /* stop, and nothing left */
        job j = w->queue[w->q_head];
        bool failed = w->io.status != TS_OK;
        pthread_mutex_unlock(&w->mu);
        int err = 0;
        if (!failed) {
            trw_maybe_go_direct(w, j.offset);
            err = write_at(w, w->slots[j.slot], SLOT_BYTES, j.offset);
        }
        pthread_mutex_lock(&w->mu);
        if (err) {
            ts_sticky_fail(&w->io, TS_ERR_IO, "trace: writing %s: %s", w->tmp_path, strerror(err));
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
void trw_drain(ts_trace_writer *w) {
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
            return trw_writer_fail(w, TS_ERR_NOMEM, "trace: no memory for a %zu MB write buffer", SLOT_BYTES >> 20);
        }
        double t0 = trw_now_seconds();
        pthread_cond_wait(&w->cv_free, &w->mu);
        w->wait_seconds += trw_now_seconds() - t0;
    }
    pthread_mutex_unlock(&w->mu);
    w->cur = slot;
    return TS_OK;
}

/* A slot if one is free now, else -1 (never waits). */
int trw_try_slot(ts_trace_writer *w) {
    pthread_mutex_lock(&w->mu);
    int slot = take_free_slot(w);
    pthread_mutex_unlock(&w->mu);
    return slot;
}

/* Hand the full current slot to the writer thread. */
void trw_submit_current(ts_trace_writer *w) {
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
    if (w->cur >= 0) trw_submit_current(w);
    ts_status s = trw_check_io(w);
    if (s) return s;
    return acquire_slot(w);
}

/* Room in the current slot, taking a new one when it is full. */
ts_status trw_ensure_room(ts_trace_writer *w) {
    if (w->cur >= 0 && w->fill < SLOT_BYTES) return TS_OK;
    return submit_and_next(w);
}

ts_status trw_stream_put(ts_trace_writer *w, const void *data, size_t n) {
    const unsigned char *p = data;
    while (n > 0) {
        ts_status s = trw_ensure_room(w);
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

uint64_t trw_stream_pos(const ts_trace_writer *w) { return w->cur_offset + (w->cur >= 0 ? w->fill : 0); }

/* Put the part of the current slot filled so far into the file, so that a
 * killed process loses nothing handed over before. The slot stays current;
 * its tail is rewritten when it is full. Zeros pad the write to the O_DIRECT
 * block size; a reader sees them as the end of the records. */
ts_status trw_flush_partial(ts_trace_writer *w) {
    if (w->cur < 0 || w->fill == 0) return TS_OK;
    size_t n = (w->fill + DIRECT_ALIGN - 1) & ~(size_t)(DIRECT_ALIGN - 1);
    memset(w->slots[w->cur] + w->fill, 0, n - w->fill);
    int err = write_at(w, w->slots[w->cur], n, w->cur_offset);
    w->last_flush = trw_now_seconds();
    if (err) return trw_writer_fail(w, TS_ERR_IO, "trace: writing %s: %s", w->tmp_path, strerror(err));
    return TS_OK;
}
