/* gemm: the sgemm driver shared by every instruction set.
 *
 * Blocking as in BLIS / GotoBLAS: a (KC, NC) block of op(B) is packed into
 * NR-wide panels and an (MC, KC) block of op(A) into MR-tall panels, so the
 * micro-kernel reads both with unit stride from cache.
 *
 * Threads claim strips of C (rows, or columns when C is wide and short) from
 * an atomic counter, about STRIPS_PER_THREAD each, so that a thread slowed by
 * other work on the machine takes fewer strips instead of holding the others
 * back (a fixed share each made 2 threads slower than 1 beside a busy
 * process). The operand every strip reads whole (B for row strips, A for
 * column strips) is packed once, into blocks shared by the team: the first
 * thread to need a block packs it there; one that finds it being packed packs
 * its own copy rather than wait. Packing is a copy, so every strip computes
 * each entry of C with the same terms in the same order: the result does not
 * depend on the thread count or on who packed what. The other operand is
 * packed per strip into each thread's own buffer, allocated on its first call
 * and reused after: no barriers, nothing allocated per call. The threads are
 * ts_kern_parallel's: OpenMP's, or a POSIX team without it.
 *
 * When all the rows of C fit one block of A (128 tokens against a weight
 * matrix), each panel of B serves a single pass of the micro-kernel down
 * them: it is packed right before that pass, into the same few kilobytes,
 * instead of a whole block of B packed out to L3 and read back.
 *
 * A product of a few rows against B stored (N, K), as a linear on the one new
 * token of a decoding step, skips all that: packing B would cost more than
 * the product. The table's small_m streams B once, the threads claiming
 * strips of its rows as above.
 *
 * B may be bfloat16 weights stored (N, K) (ts_gemm_bf16): the packing widens
 * them to float32 as it writes the panels, so everything after the packing
 * (micro-kernels, sums, epilogues) is the float32 product's, and a weight
 * matrix costs half the bytes to read and keep. Such products always go the
 * blocked way (small_m reads float rows).
 *
 * The tanh GELU and SiLU epilogues are not in the micro-kernels: the driver
 * runs the table's own element kernel on each tile just stored (in L1), so
 * the fused product equals the product then ts_gelu_tanh / ts_silu.
 */
#include <assert.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "kernels_impl.h"

/* Below this many flops a second thread costs more than it saves. */
#define GEMM_MIN_FLOPS_PER_THREAD 4e6
/* The few-rows path reads B once and does little else: below this many bytes
 * of B a second thread costs more than it saves. */
#define SMALL_M_MIN_BYTES_PER_THREAD (128 << 10)
/* Products of a batch a thread takes at a time. */
#define BATCH_RUN 8
/* Strips of one product per thread: enough that a thread on a core shared
 * with other work leaves the rest to the others; few enough that each strip
 * still fills the micro-kernel's loops. */
#define STRIPS_PER_THREAD 8
/* A strip is at least this many micro-tiles wide. */
#define STRIP_MIN_TILES 4
/* The shared operand's packed blocks, at most (floats): past this each strip
 * packs its own (products that large have wide strips anyway). */
#define SHARED_PACK_MAX_FLOATS ((int64_t)16 << 20)

typedef struct gemm_job {
    bool ta, tb;
    int M, N, K;
    float alpha, beta;
    const float *A, *B; // op(A) (M,K), op(B) (K,N)
    const ts_bf16 *Bh;  // non-NULL: B is these bf16 weights stored (N,K) (tb), B is NULL
    int lda, ldb, ldc;
    float *C;           // (M,N)
    ts_epilogue epi;
    const float *bias;  // (N) or NULL
    int k_whole;        // > K: the first K terms of a K-long sum of k_whole terms, blocked as that one (else 0)
    const struct shared_pack *shared; // non-NULL: op(B) (row strips) or op(A) (column strips) packed once for the team
    bool blocked;       // a strip of a product that goes the blocked way: so does the strip, however few its rows
} gemm_job;

/* One operand packed once for a team, in blocks of (along, kc): block
 * (x0 / along, p0 / kc) at its index times block_floats, each with its own
 * slack so that one block's packer never writes into another's. */
enum { BLOCK_FREE, BLOCK_PACKING, BLOCK_READY };
typedef struct shared_pack {
    bool is_a;          // the blocks are op(A)'s (mc, kc), else op(B)'s (kc, nc)
    int along, kc, nk;  // block extent along M (A) or N (B), depth, blocks along K
    int64_t block_floats;
    float *buf;         // (blocks, block_floats)
    atomic_int *state;  // (blocks): BLOCK_FREE, BLOCK_PACKING or BLOCK_READY
} shared_pack;

static _Thread_local float *tl_pack;
static _Thread_local size_t tl_pack_floats;

/* Room a panel writer may use past its panel (see ts_pack_t_fn). */
#define PACK_SLACK 64

/* This thread's packing buffer with room for `floats`; NULL if out of memory. */
static float *pack_buffer(size_t floats) {
    if (tl_pack_floats >= floats) return tl_pack;
    free(tl_pack);
    size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
    tl_pack = aligned_alloc(64, bytes);
    tl_pack_floats = tl_pack ? floats : 0;
    return tl_pack;
}

static int imin(int a, int b) { return a < b ? a : b; }
static int round_up(int x, int to) { return (x + to - 1) / to * to; }

/* op(A)[i0:i0+mc, p0:p0+kc] into MR-tall panels: panel q holds rows q*MR..,
 * element (i, p) at q*MR*kc + p*MR + i; rows past mc are zero. */
static void pack_a(const ts_kern_ops *ops, float *dst, const gemm_job *g, int i0, int mc, int p0, int kc) {
    const int mr = ops->mr;
    for (int q = 0; q < mc; q += mr, dst += (int64_t)mr * kc) {
        int m = imin(mr, mc - q);
        if (g->ta) // A stored (K, M): a row of the panel is contiguous
            ops->pack_n(dst, mr, g->A + (int64_t)p0 * g->lda + i0 + q, g->lda, m, kc);
        else
            ops->pack_t(dst, mr, g->A + (int64_t)(i0 + q) * g->lda + p0, g->lda, m, kc);
    }
}

/* op(B)[p0:p0+kc, j0:j0+nc] into NR-wide panels: element (p, j) of panel q at
 * q*NR*kc + p*NR + j; columns past nc are zero. */
static void pack_b(const ts_kern_ops *ops, float *dst, const gemm_job *g, int p0, int kc, int j0, int nc) {
    const int nr = ops->nr;
    for (int q = 0; q < nc; q += nr, dst += (int64_t)nr * kc) {
        int n = imin(nr, nc - q);
        if (g->Bh) // bf16 weights stored (N, K), widened as packed
            ops->pack_t_bf16(dst, nr, g->Bh + (int64_t)(j0 + q) * g->ldb + p0, g->ldb, n, kc);
        else if (g->tb) // B stored (N, K), as nn.Linear weights (out, in)
            ops->pack_t(dst, nr, g->B + (int64_t)(j0 + q) * g->ldb + p0, g->ldb, n, kc);
        else
            ops->pack_n(dst, nr, g->B + (int64_t)p0 * g->ldb + j0 + q, g->ldb, n, kc);
    }
}

typedef void (*act_fn)(float *out, const float *in, int64_t n);

/* The epilogue a micro-kernel (or small_m) applies for `epi`: the tanh GELU
 * and SiLU ones leave it the bias alone (or nothing without one)... */
static ts_epilogue kernel_epi(ts_epilogue epi, const float *bias) {
    if (epi == TS_EPI_BIAS_GELU_TANH || epi == TS_EPI_BIAS_SILU) return bias ? TS_EPI_BIAS : TS_EPI_NONE;
    return epi;
}

/* ...and the activation the driver runs after it on what it stored (NULL: none). */
static act_fn tile_act(const ts_kern_ops *ops, ts_epilogue epi) {
    return epi == TS_EPI_BIAS_GELU_TANH ? ops->gelu_tanh : epi == TS_EPI_BIAS_SILU ? ops->silu : NULL;
}

/* `act` on the (m, n) corner of C at c, row by row, in place. */
static void act_rows(act_fn act, float *c, int64_t ldc, int m, int n) {
    for (int i = 0; i < m; i++) act(c + i * ldc, c + i * ldc, n);
}

/* K == 0: the product is empty, C = epilogue(beta * C). */
static void gemm_empty_k(const ts_kern_ops *ops, const gemm_job *g) {
    ts_epilogue kepi = kernel_epi(g->epi, g->bias);
    act_fn act = tile_act(ops, g->epi);
    for (int i = 0; i < g->M; i++) {
        float *crow = g->C + (int64_t)i * g->ldc;
        for (int j = 0; j < g->N; j++) crow[j] = g->beta != 0 ? g->beta * crow[j] : 0.0f;
        ts_kern_epilogue_row(crow, g->N, kepi, g->bias);
        if (act) act(crow, crow, g->N);
    }
}

/* Block sizes for one product: K in balanced blocks of at most kc_max, then
 * as many rows and columns as the A and B budgets hold at that depth. */
typedef struct gemm_blocks {
    int mc, kc, nc;
} gemm_blocks;

static gemm_blocks blocks_for(const ts_kern_ops *ops, const gemm_job *g) {
    gemm_blocks b;
    int K = g->k_whole > g->K ? g->k_whole : g->K;
    int nk = (K + ops->kc_max - 1) / ops->kc_max;
    b.kc = (K + nk - 1) / nk;
    b.mc = imin(round_up(g->M, ops->mr), ops->a_floats / b.kc / ops->mr * ops->mr);
    /* Up to twice the budget when that takes all the rows in one block (128
     * tokens against a weight matrix): each panel of B is then used once,
     * right after it is packed (gemm_blocked), not packed and read twice. */
    if (round_up(g->M, ops->mr) <= 2 * b.mc) b.mc = round_up(g->M, ops->mr);
    b.nc = imin(round_up(g->N, ops->nr), ops->b_floats / b.kc / ops->nr * ops->nr);
    if (b.mc < ops->mr) b.mc = ops->mr;
    if (b.nc < ops->nr) b.nc = ops->nr;
    return b;
}

/* The next product's inputs, one cache line at a time, spread over this
 * product's micro-kernel calls: a batch of small products would otherwise
 * wait for memory every time it packs. A micro-kernel with ukernel_pf issues
 * its share among its FMAs; others get it in a burst after each call, which
 * stalls once the cache's miss buffers are full (measured: the driver's
 * prefetch loop took 11-20% of the batched products' time that way). */
typedef struct prefetch_plan {
    const char *base[3];   /* A, B and C of the next product */
    int rows[3], lines[3]; /* rows, and cache lines per row */
    int64_t ld_bytes[3];
    int mat, row, line;    /* where the next prefetch goes */
    int per_call;          /* lines per micro-kernel call */
} prefetch_plan;

static void prefetch_matrix_plan(prefetch_plan *pp, int i, const float *p, int rows, int cols, int ld) {
    /* Start on the line holding the first element so the last one is covered too. */
    uintptr_t first = (uintptr_t)p & ~(uintptr_t)63;
    int64_t row_bytes = (int64_t)cols * 4 + (int64_t)((uintptr_t)p - first);
    if ((int64_t)(ld - cols) * 4 < 64) { /* rows (nearly) touch: one run of lines, no row walk */
        row_bytes += (int64_t)(rows - 1) * ld * 4;
        rows = 1;
    }
    pp->base[i] = (const char *)first;
    pp->rows[i] = rows;
    pp->lines[i] = (int)((row_bytes + 63) / 64);
    pp->ld_bytes[i] = (int64_t)ld * 4;
}

/* per_call more lines of the plan, in runs along a row: a tight loop, so the
 * prefetches cost little next to the micro-kernel call they follow. */
static void prefetch_some(prefetch_plan *pp) {
    int mat = pp->mat, row = pp->row, line = pp->line, left = pp->per_call; /* in registers, not through pp */
    while (left > 0 && mat < 3) {
        const char *p = pp->base[mat] + row * pp->ld_bytes[mat] + (int64_t)line * 64;
        int n = imin(left, pp->lines[mat] - line);
        for (int k = 0; k < n; k++) __builtin_prefetch(p + (int64_t)k * 64, 0, 2);
        left -= n, line += n;
        if (line < pp->lines[mat]) break;
        line = 0;
        if (++row < pp->rows[mat]) continue;
        row = 0;
        mat++;
    }
    pp->mat = mat, pp->row = row, pp->line = line;
}

/* Up to `most` lines of the plan in one run along a row, for the micro-kernel
 * to prefetch among its FMAs: their start, and their count in *n. */
static const char *prefetch_take(prefetch_plan *pp, int most, int *n) {
    *n = 0;
    if (pp->mat >= 3) return NULL;
    const char *p = pp->base[pp->mat] + pp->row * pp->ld_bytes[pp->mat] + (int64_t)pp->line * 64;
    *n = imin(imin(most, pp->per_call), pp->lines[pp->mat] - pp->line);
    pp->line += *n;
    if (pp->line == pp->lines[pp->mat]) {
        pp->line = 0;
        if (++pp->row == pp->rows[pp->mat]) pp->row = 0, pp->mat++;
    }
    return p;
}

/* The packed block of the team's shared operand at (x0, p0), ext along M
 * (A) or N (B) by kc deep: the team's copy when it is ready, or when this
 * thread is first and packs it there; else (another thread is packing it
 * now) a copy this thread packs into `mine`, rather than wait for one that
 * may have lost its core. */
static const float *shared_block(const ts_kern_ops *ops, const gemm_job *g, float *mine, int x0, int ext, int p0,
                                 int kc) {
    const shared_pack *sh = g->shared;
    int64_t b = (int64_t)(x0 / sh->along) * sh->nk + p0 / sh->kc;
    float *team_copy = sh->buf + b * sh->block_floats;
    int state = atomic_load_explicit(&sh->state[b], memory_order_acquire);
    if (state == BLOCK_READY) return team_copy;
    bool first = state == BLOCK_FREE &&
                 atomic_compare_exchange_strong_explicit(&sh->state[b], &state, BLOCK_PACKING, memory_order_acquire,
                                                         memory_order_relaxed);
    float *dst = first ? team_copy : mine;
    if (sh->is_a)
        pack_a(ops, dst, g, x0, ext, p0, kc);
    else
        pack_b(ops, dst, g, p0, kc, x0, ext);
    if (first) atomic_store_explicit(&sh->state[b], BLOCK_READY, memory_order_release);
    return dst;
}

static void gemm_blocked(const ts_kern_ops *ops, const gemm_job *g, gemm_blocks bs, float *pa, float *pb,
                         prefetch_plan *pp) {
    const int MR = ops->mr, NR = ops->nr;
    for (int jc = 0; jc < g->N; jc += bs.nc) {
        int nc = imin(bs.nc, g->N - jc);
        for (int pc = 0; pc < g->K; pc += bs.kc) {
            int kc = imin(bs.kc, g->K - pc);
            // Later K blocks add to what the first one wrote; the epilogue waits for the last.
            float beta = pc == 0 ? g->beta : 1.0f;
            bool last = pc + kc >= g->K;
            ts_epilogue epi = last ? kernel_epi(g->epi, g->bias) : TS_EPI_NONE;
            act_fn act = last ? tile_act(ops, g->epi) : NULL;
            /* All the rows in one block: each panel of B serves one pass of
             * the micro-kernel down them, so it is packed just before, into
             * the same few kilobytes, and read back from L1 rather than from
             * a whole packed block in L3. */
            bool by_panel = g->M <= bs.mc && !(g->shared && !g->shared->is_a) && !pp;
            const float *b_pk = pb;
            if (by_panel)
                ; /* in the jr loop */
            else if (g->shared && !g->shared->is_a)
                b_pk = shared_block(ops, g, pb, jc, nc, pc, kc);
            else
                pack_b(ops, pb, g, pc, kc, jc, nc);
            for (int ic = 0; ic < g->M; ic += bs.mc) {
                int mc = imin(bs.mc, g->M - ic);
                const float *a_pk = pa;
                if (g->shared && g->shared->is_a)
                    a_pk = shared_block(ops, g, pa, ic, mc, pc, kc);
                else
                    pack_a(ops, pa, g, ic, mc, pc, kc);
                for (int jr = 0; jr < nc; jr += NR) {
                    const float *bp = b_pk + (int64_t)jr * kc;
                    if (by_panel) pack_b(ops, pb, g, pc, kc, jc + jr, imin(NR, nc - jr)), bp = pb;
                    const float *bias = epi != TS_EPI_NONE ? g->bias + jc + jr : NULL;
                    for (int ir = 0; ir < mc; ir += MR) {
                        float *c = g->C + (int64_t)(ic + ir) * g->ldc + jc + jr;
                        int m = imin(MR, mc - ir), n = imin(NR, nc - jr);
                        if (pp && ops->ukernel_pf) {
                            int pf_lines;
                            const char *pf = prefetch_take(pp, kc, &pf_lines);
                            ops->ukernel_pf(kc, a_pk + (int64_t)ir * kc, bp, c, g->ldc, m, n, g->alpha, beta, epi,
                                            bias, pf, pf_lines);
                        } else {
                            ops->ukernel(kc, a_pk + (int64_t)ir * kc, bp, c, g->ldc, m, n, g->alpha, beta, epi,
                                         bias);
                            if (pp) prefetch_some(pp);
                        }
                        if (act) act_rows(act, c, g->ldc, m, n);
                    }
                }
            }
        }
    }
}

/* Few rows of A against B stored (N, K): the table's small_m. */
static bool use_small_m(const ts_kern_ops *ops, const gemm_job *g) {
    return ops->small_m && !g->ta && g->tb && !g->Bh && g->M <= TS_KERN_SMALL_M && !g->blocked;
}

/* The whole product on the calling thread; prefetch `next` (may be NULL)'s inputs meanwhile. */
static void gemm_serial(const ts_kern_ops *ops, const gemm_job *g, const gemm_job *next) {
    if (g->M <= 0 || g->N <= 0) return;
    if (g->K <= 0) {
        gemm_empty_k(ops, g);
        return;
    }
    if (use_small_m(ops, g)) {
        ops->small_m(g->M, g->N, g->K, g->alpha, g->A, g->lda, g->B, g->ldb, g->beta, g->C, g->ldc,
                     kernel_epi(g->epi, g->bias), g->bias);
        act_fn act = tile_act(ops, g->epi);
        if (act) act_rows(act, g->C, g->ldc, g->M, g->N);
        return;
    }
    gemm_blocks bs = blocks_for(ops, g);
    size_t a_room = (size_t)round_up(bs.mc * bs.kc + PACK_SLACK, 16), b_room = (size_t)bs.nc * bs.kc + PACK_SLACK;
    /* Ask for the most any product needs, so each thread allocates once. */
    size_t most = (size_t)ops->a_floats + (size_t)ops->b_floats + (size_t)(ops->mr + ops->nr) * ops->kc_max +
                  2 * PACK_SLACK + 16;
    float *buf = pack_buffer(most > a_room + b_room ? most : a_room + b_room);
    if (!buf) { // no memory for panels: still give the right answer
        if (g->Bh)
            ts_gemm_bf16_ref(g->M, g->N, g->K, g->alpha, g->A, g->lda, g->Bh, g->ldb, g->beta, g->C, g->ldc,
                             g->epi, g->bias);
        else
            ts_gemm_ref(g->ta, g->tb, g->M, g->N, g->K, g->alpha, g->A, g->lda, g->B, g->ldb, g->beta,
                        g->C, g->ldc, g->epi, g->bias);
        return;
    }
    /* The shared blocks were laid out with the whole product's blocking. */
    assert(!g->shared || (g->shared->is_a ? bs.mc : bs.nc) == g->shared->along);
    prefetch_plan plan = {0}, *pp = NULL;
    if (next) {
        prefetch_matrix_plan(&plan, 0, next->A, next->ta ? next->K : next->M, next->ta ? next->M : next->K, next->lda);
        prefetch_matrix_plan(&plan, 1, next->B, next->tb ? next->N : next->K, next->tb ? next->K : next->N, next->ldb);
        /* C too: its lines are then in cache when the micro-kernel stores there. */
        prefetch_matrix_plan(&plan, 2, next->C, next->M, next->N, next->ldc);
        int64_t lines = (int64_t)plan.rows[0] * plan.lines[0] + (int64_t)plan.rows[1] * plan.lines[1] +
                        (int64_t)plan.rows[2] * plan.lines[2];
        int64_t calls = (int64_t)((g->M + ops->mr - 1) / ops->mr) * ((g->N + ops->nr - 1) / ops->nr) *
                        ((g->K + bs.kc - 1) / bs.kc);
        plan.per_call = (int)((lines + calls - 1) / calls);
        pp = &plan;
    }
    gemm_blocked(ops, g, bs, buf, buf + a_room, pp);
}

static bool split_rows(const ts_kern_ops *ops, const gemm_job *g) {
    return !use_small_m(ops, g) && g->M / ops->mr >= g->N / ops->nr;
}

/* A product cut into strips of C: rows [s * per, s * per + per) of it, or
 * columns when C is wide and short; `per` is whole micro-tiles. */
typedef struct strip_team {
    const ts_kern_ops *ops;
    gemm_job g; // the whole product
    bool rows;
    int per, strips;
    atomic_int next; // the next strip to claim
} strip_team;

static gemm_job strip_job(const strip_team *k, int s) {
    const gemm_job *g = &k->g;
    gemm_job j = *g;
    if (k->rows) {
        int m0 = s * k->per, m1 = imin(g->M, m0 + k->per);
        j.M = m1 - m0;
        j.A = g->ta ? g->A + m0 : g->A + (int64_t)m0 * g->lda;
        j.C = g->C + (int64_t)m0 * g->ldc;
    } else {
        int n0 = s * k->per, n1 = imin(g->N, n0 + k->per);
        j.N = n1 - n0;
        if (g->Bh)
            j.Bh = g->Bh + (int64_t)n0 * g->ldb;
        else if (g->B)
            j.B = g->tb ? g->B + (int64_t)n0 * g->ldb : g->B + n0;
        j.C = g->C + n0;
        if (g->bias) j.bias = g->bias + n0;
    }
    return j;
}

/* Strips claimed one at a time until none is left (ts_kern_parallel's task). */
static void strip_task(void *ctx, int t, int n) {
    (void)t, (void)n;
    strip_team *k = ctx;
    for (int s = atomic_fetch_add(&k->next, 1); s < k->strips; s = atomic_fetch_add(&k->next, 1)) {
        gemm_job j = strip_job(k, s);
        gemm_serial(k->ops, &j, NULL);
    }
}

/* The calling thread's room for a team's shared blocks and their states:
 * grown when a product needs more, kept for the next. */
static _Thread_local float *tl_shared;
static _Thread_local int64_t tl_shared_floats;
static _Thread_local atomic_int *tl_state;
static _Thread_local int64_t tl_state_n;

/* Lays out op(B) (row strips) or op(A) (column strips) of g in shared blocks,
 * all free; false when they would be too big or memory is short (each strip
 * then packs its own). */
static bool shared_setup(const ts_kern_ops *ops, const gemm_job *g, bool rows, shared_pack *sh) {
    gemm_blocks bs = blocks_for(ops, g);
    sh->is_a = !rows;
    sh->along = rows ? bs.nc : bs.mc;
    sh->kc = bs.kc;
    sh->nk = (g->K + bs.kc - 1) / bs.kc;
    int extent = rows ? g->N : g->M;
    int64_t blocks = (int64_t)((extent + sh->along - 1) / sh->along) * sh->nk;
    sh->block_floats = round_up(sh->along * bs.kc + PACK_SLACK, 16);
    if (blocks * sh->block_floats > SHARED_PACK_MAX_FLOATS) return false;
    if (tl_shared_floats < blocks * sh->block_floats) {
        free(tl_shared);
        tl_shared = aligned_alloc(64, (size_t)(blocks * sh->block_floats) * sizeof(float));
        tl_shared_floats = tl_shared ? blocks * sh->block_floats : 0;
        if (!tl_shared) return false;
    }
    if (tl_state_n < blocks) {
        free(tl_state);
        tl_state = malloc((size_t)blocks * sizeof *tl_state);
        tl_state_n = tl_state ? blocks : 0;
        if (!tl_state) return false;
    }
    for (int64_t b = 0; b < blocks; b++) atomic_init(&tl_state[b], BLOCK_FREE);
    sh->buf = tl_shared;
    sh->state = tl_state;
    return true;
}

static int gemm_threads(const ts_kern_ops *ops, const gemm_job *g) {
    int nth = ts_kern_threads_here();
    if (use_small_m(ops, g)) { /* memory-bound: what counts is the bytes of B */
        double bytes = 4.0 * g->N * g->K;
        while (nth > 1 && bytes / nth < SMALL_M_MIN_BYTES_PER_THREAD) nth--;
    } else {
        double flops = 2.0 * g->M * g->N * g->K;
        while (nth > 1 && flops / nth < GEMM_MIN_FLOPS_PER_THREAD) nth--;
    }
    int tiles = split_rows(ops, g) ? (g->M + ops->mr - 1) / ops->mr : (g->N + ops->nr - 1) / ops->nr;
    return imin(nth, tiles);
}

/* A batch: runs of BATCH_RUN products handed out from next_run. */
typedef struct batch_team {
    const ts_kern_ops *ops;
    gemm_job first;
    int64_t stride_a, stride_b, stride_c;
    int batch, runs;
    atomic_int next_run;
} batch_team;

/* Runs of BATCH_RUN products handed out as threads come free (one thread
 * slowed by other work on the machine does not hold the rest back). Each
 * product fetches the next one's inputs while it computes; a thread claims
 * its next run while on the last product of this one, so that run's first
 * product does not start cold either. */
static void batch_task(void *ctx, int t, int n) {
    (void)t, (void)n;
    batch_team *k = ctx;
    const int batch = k->batch, runs = k->runs;
    int r = atomic_fetch_add(&k->next_run, 1);
    while (r < runs) {
        int b1 = (r + 1) * BATCH_RUN < batch ? (r + 1) * BATCH_RUN : batch, r_next = runs;
        for (int b = r * BATCH_RUN; b < b1; b++) {
            int nb = b + 1;
            if (nb == b1) {
                r_next = atomic_fetch_add(&k->next_run, 1);
                nb = r_next < runs ? r_next * BATCH_RUN : batch;
            }
            gemm_job g = k->first, next = k->first;
            g.A += b * k->stride_a, g.B += b * k->stride_b, g.C += b * k->stride_c;
            if (nb < batch) next.A += nb * k->stride_a, next.B += nb * k->stride_b, next.C += nb * k->stride_c;
            gemm_serial(k->ops, &g, nb < batch ? &next : NULL);
        }
        r = r_next;
    }
}

/* One product, on as many threads as it is worth, in strips they claim. */
static void gemm_run(const ts_kern_ops *ops, const gemm_job *g) {
    if (g->M <= 0 || g->N <= 0) return;
    int nth = g->K > 0 ? gemm_threads(ops, g) : 1;
    if (nth <= 1) {
        gemm_serial(ops, g, NULL);
        return;
    }
    strip_team team = {.ops = ops, .g = *g, .rows = split_rows(ops, g)};
    team.g.blocked = !use_small_m(ops, g); /* a last strip of a row or two sums as the rest do */
    int unit = team.rows ? ops->mr : ops->nr, extent = team.rows ? g->M : g->N;
    int tiles = (extent + unit - 1) / unit;
    /* About STRIPS_PER_THREAD each, but not so narrow that a thread is left without one. */
    int per_tiles = (tiles + nth * STRIPS_PER_THREAD - 1) / (nth * STRIPS_PER_THREAD);
    int least = imin(STRIP_MIN_TILES, (tiles + nth - 1) / nth);
    team.per = (per_tiles > least ? per_tiles : least) * unit;
    team.strips = (extent + team.per - 1) / team.per;
    shared_pack sh;
    if (!use_small_m(ops, g) && shared_setup(ops, g, team.rows, &sh)) team.g.shared = &sh;
    atomic_init(&team.next, 0);
    ts_kern_parallel(nth, strip_task, &team);
}

void ts_kern_gemm(const ts_kern_ops *ops, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
                  ts_epilogue epi, const float *bias) {
    ts_kern_gemm_prefix(ops, trans_a, trans_b, M, N, K, 0, alpha, A, lda, B, ldb, beta, C, ldc, epi, bias);
}

void ts_kern_gemm_prefix(const ts_kern_ops *ops, bool trans_a, bool trans_b, int M, int N, int K, int k_whole,
                         float alpha, const float *A, int lda, const float *B, int ldb, float beta, float *C,
                         int ldc, ts_epilogue epi, const float *bias) {
    gemm_job g = {.ta = trans_a, .tb = trans_b, .M = M, .N = N, .K = K, .alpha = alpha, .beta = beta,
                  .A = A, .B = B, .lda = lda, .ldb = ldb, .ldc = ldc, .C = C, .epi = epi, .bias = bias,
                  .k_whole = k_whole};
    gemm_run(ops, &g);
}

void ts_kern_gemm_bf16(const ts_kern_ops *ops, int M, int N, int K, float alpha, const float *A, int lda,
                       const ts_bf16 *W, int ldw, float beta, float *C, int ldc, ts_epilogue epi,
                       const float *bias) {
    gemm_job g = {.ta = false, .tb = true, .M = M, .N = N, .K = K, .alpha = alpha, .beta = beta, .A = A,
                  .Bh = W, .lda = lda, .ldb = ldw, .ldc = ldc, .C = C, .epi = epi, .bias = bias};
    gemm_run(ops, &g);
}

void ts_kern_gemm_batched(const ts_kern_ops *ops, bool trans_a, bool trans_b, int M, int N, int K,
                          float alpha, const float *A, int lda, int64_t stride_a, const float *B,
                          int ldb, int64_t stride_b, float beta, float *C, int ldc, int64_t stride_c,
                          int batch) {
    int nth = ts_kern_threads_here();
    if (batch <= 0) return;
    if (batch < nth) { // few products: thread inside each one
        for (int b = 0; b < batch; b++)
            ts_kern_gemm(ops, trans_a, trans_b, M, N, K, alpha, A + b * stride_a, lda, B + b * stride_b,
                         ldb, beta, C + b * stride_c, ldc, TS_EPI_NONE, NULL);
        return;
    }
    double flops = 2.0 * M * N * K * batch;
    while (nth > 1 && flops / nth < GEMM_MIN_FLOPS_PER_THREAD) nth--;
    batch_team team = {.ops = ops,
                       .first = {.ta = trans_a, .tb = trans_b, .M = M, .N = N, .K = K, .alpha = alpha,
                                 .beta = beta, .A = A, .B = B, .lda = lda, .ldb = ldb, .ldc = ldc, .C = C,
                                 .epi = TS_EPI_NONE},
                       .stride_a = stride_a, .stride_b = stride_b, .stride_c = stride_c,
                       .batch = batch, .runs = (batch + BATCH_RUN - 1) / BATCH_RUN};
    atomic_init(&team.next_run, 0);
    ts_kern_parallel(nth, batch_task, &team);
}

void ts_kern_ukernel_scalar(int kc, const float *pa, const float *pb, float *c, int64_t ldc, int m,
                            int n, float alpha, float beta, ts_epilogue epi, const float *bias) {
    enum { MR = TS_KERN_SCALAR_MR, NR = TS_KERN_SCALAR_NR };
    float acc[MR][NR] = {{0}};
    for (int p = 0; p < kc; p++, pa += MR, pb += NR)
        for (int i = 0; i < MR; i++)
            for (int j = 0; j < NR; j++) acc[i][j] += pa[i] * pb[j];
    for (int i = 0; i < m; i++) {
        float *crow = c + i * ldc;
        for (int j = 0; j < n; j++)
            crow[j] = beta != 0 ? alpha * acc[i][j] + beta * crow[j] : alpha * acc[i][j];
        ts_kern_epilogue_row(crow, n, epi, bias);
    }
}

void ts_kern_pack_n_scalar(float *dst, int w, const float *src, int64_t lds, int n, int kc) {
    for (int p = 0; p < kc; p++, dst += w, src += lds) {
        for (int j = 0; j < n; j++) dst[j] = src[j];
        for (int j = n; j < w; j++) dst[j] = 0.0f;
    }
}

void ts_kern_pack_t_bf16_scalar(float *dst, int w, const ts_bf16 *src, int64_t lds, int m, int kc) {
    for (int i = 0; i < m; i++, src += lds)
        for (int p = 0; p < kc; p++) dst[(int64_t)p * w + i] = ts_bf16_to_f32(src[p]);
    for (int i = m; i < w; i++)
        for (int p = 0; p < kc; p++) dst[(int64_t)p * w + i] = 0.0f;
}

void ts_kern_pack_t_scalar(float *dst, int w, const float *src, int64_t lds, int m, int kc) {
    /* Read along rows, write down the panel with stride w (the panel sits in L1). */
    for (int i = 0; i < m; i++, src += lds)
        for (int p = 0; p < kc; p++) dst[(int64_t)p * w + i] = src[p];
    for (int i = m; i < w; i++)
        for (int p = 0; p < kc; p++) dst[(int64_t)p * w + i] = 0.0f;
}

/* The scalar path's peak: 12 independent multiply-add chains in plain C. */
double ts_kern_fma_loop_scalar(int64_t iters, float *sink) {
    float a[12], b = 1.0000001f, c = 0.999999f;
    for (int i = 0; i < 12; i++) a[i] = (float)i;
    for (int64_t n = 0; n < iters; n++)
        for (int i = 0; i < 12; i++) a[i] = a[i] * b + c;
    float s = 0;
    for (int i = 0; i < 12; i++) s += a[i];
    *sink = s; /* so the loop is not optimised away */
    return (double)iters * 12 * 2;
}
