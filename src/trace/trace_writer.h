/* trace_writer: what the trace writer's files share (private to src/trace/).
 *
 * The writer is one job split for size across three files that need each
 * other: trace_write.c decides what each step keeps and writes its record,
 * trace_passes.c walks a step's memory on the model's threads (copying
 * values into the stream, summing statistics, binning histograms), and
 * trace_stream.c owns the output stream, its 4 MB slots and the writer
 * thread that puts them on disk.
 */
#ifndef TSCOPE_TRACE_WRITER_H
#define TSCOPE_TRACE_WRITER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "tscope/core.h"
#include "tscope/trace.h"
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
#define MAX_PIECES 16

typedef struct view {
    const float *data;
    int rank; /* >= 1 after collapsing */
    int64_t shape[TS_MAX_RANK], stride[TS_MAX_RANK];
    int64_t numel;
    bool contiguous;
} view;


/* Where a run of a step's values goes: `count` elements from element
 * `start` of the step, to dst (one slot's worth at most). */
typedef struct piece {
    float *dst;
    int64_t start, count;
} piece;


/* A member of a group: the elements of the pass's view, through ReLU or not. */
typedef struct member {
    bool relu;
    bool hist; /* bin it in the histogram pass (it has finite elements) */
    int step;  /* index in the group */
} member;


/* What a pass gives back: moments and CRC of its elements in order, and the
 * histogram. */
typedef struct pass_result {
    trf_acc acc;
    uint32_t crc;
    uint64_t hist[TS_TRACE_HIST_BINS];
} pass_result;


typedef enum pass_kind { PASS_COPY, PASS_COPY_STATS, PASS_STATS, PASS_HIST, PASS_GROUP_STATS, PASS_GROUP_HIST } pass_kind;

/* Steps of a group whose statistics one sweep over the first one's memory
 * computes: the first step, and it through ReLU. */
#define GROUP_MEMBERS_MAX 2

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
    int given_fd; /* >= 0: writing into the caller's descriptor (open_fd): no rename, no unlink */
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
    ts_sticky io; /* the writer thread's first failure */

    /* Records so far, and a copy of each one's prefix and suffix for the
     * index, so that a reader opens the file without visiting every record. */
    unsigned char *copies;
    size_t copies_len, copies_cap;
    uint64_t *offsets;
    int64_t n_steps, cap_steps;
    int64_t steps_with_values;
    uint64_t values_bytes;
    int64_t steps_not_finite;      /* steps whose statistics count a NaN or an Inf */
    char first_not_finite[160];    /* the first of them, named for the run's report */
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
        bool edited_over; /* an edit changed its memory after it was recorded (ts_hook_overwritten_fn) */
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
    ts_sticky err; /* the hook's first failure, replayed */
};

/* ---- trace_stream.c: the output stream and the writer thread ---- */

double trw_now_seconds(void);
/* Record the writer's first failure (later ones replay it). */
#define trw_writer_fail(w, s, ...) ts_sticky_fail(&(w)->err, (s), __VA_ARGS__)
ts_status trw_check_io(ts_trace_writer *w);   /* the writer thread's failure becomes the hook's */
void *trw_writer_main(void *arg);             /* the writer thread */
void trw_maybe_go_direct(ts_trace_writer *w, uint64_t offset);
void trw_drain(ts_trace_writer *w);           /* wait until every handed slot is on disk */
ts_status trw_ensure_room(ts_trace_writer *w); /* room in the current slot */
int trw_try_slot(ts_trace_writer *w);          /* a free slot now, or -1 */
void trw_submit_current(ts_trace_writer *w);   /* the full current slot to the disk */
ts_status trw_stream_put(ts_trace_writer *w, const void *data, size_t n); /* data NULL: zeros */
uint64_t trw_stream_pos(const ts_trace_writer *w);
ts_status trw_flush_partial(ts_trace_writer *w); /* what is filled so far, to the file */

/* ---- trace_passes.c: walking a step's memory ---- */

/* Drop size-1 dims and merge dims laid out one after the other. */
void trw_view_init(view *v, const ts_tensor *t);
/* Stream v's elements into the file, with their statistics when asked. */
ts_status trw_put_values(ts_trace_writer *w, const view *v, bool stats, trf_acc *acc, uint32_t *crc);
void trw_stats_of(ts_trace_writer *w, const view *v, trf_acc *acc);
void trw_hist_of(ts_trace_writer *w, const view *v, ts_trace_stats *st);
void trw_run_group_pass(ts_trace_writer *w, pass_kind kind, const view *v, const member *members, int n_members,
                        const trf_hist_plan *plans, trf_acc *accs, uint64_t (*hists)[TS_TRACE_HIST_BINS]);

#endif
