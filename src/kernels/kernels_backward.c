/* kernels_backward: the backward of every op in kernels.h ("backward"), and
 * the forward of the two ops only training runs: dropout and the loss.
 *
 * The heavy parts are GEMMs (ts_gemm with its transposes and beta = 1 to
 * accumulate); the rest are loops split over rows (or, where gradients of a
 * parameter sum over rows, over columns, so no two threads write the same
 * float and the sums come out the same on any thread count).
 */
#include "kernels_impl.h"

#include <math.h>
#include <string.h>


#if defined(_OPENMP)
#include <omp.h>
#endif

/* Below this many floats a loop runs on one thread: a parallel region costs
 * more than it saves. */
#define PAR_MIN 32768

static int threads_for(int64_t n) {
    int t = ts_kernels_threads();
    return n >= PAR_MIN && t > 1 ? t : 1;
}

/* This thread's share [*lo, *hi) of n items. */
static void share(int64_t n, int64_t *lo, int64_t *hi) {
#if defined(_OPENMP)
    int t = omp_get_thread_num(), nt = omp_get_num_threads();
#else
    int t = 0, nt = 1;
#endif
    *lo = n * t / nt;
    *hi = n * (t + 1) / nt;
}

/* ---- linear ------------------------------------------------------------------------ */

/* Row i of src (N, C) times scale added into row ids[i] of dst (row 0 for
 * every i when ids is NULL: column sums). Rows may repeat, so each thread owns
 * a range of columns of every row: no two threads write one float. */
static void add_rows(float *dst, const int32_t *ids, const float *src, int64_t N, int C, float scale) {
    /* scale 1 (biases, LayerNorm's beta, unscaled embeddings): the vector add, the same floats */
    void (*add)(float *, const float *, const float *, int64_t) = scale == 1.0f ? ts_kern_ops_current()->add : NULL;
    int nt = threads_for(N * C);
    (void)nt;
    TS_OMP(parallel num_threads(nt) if(nt > 1))
    {
        int64_t lo, hi;
        share(C, &lo, &hi);
        for (int64_t i = 0; i < N && hi > lo; i++) {
            float *row = dst + (ids ? (int64_t)ids[i] * C : 0);
            if (add)
                add(row + lo, row + lo, src + i * C + lo, hi - lo);
            else
                for (int64_t j = lo; j < hi; j++) row[j] += src[i * C + j] * scale;
        }
    }
}

void ts_bwd_linear_backward(float *din, float *dw, float *db, const float *dout, const float *in, const float *w,
                            int64_t N, int I, int O) {
    if (N <= 0) return;
    if (din) ts_gemm(false, false, (int)N, I, O, 1.0f, dout, O, w, I, 1.0f, din, I, TS_EPI_NONE, NULL);
    if (dw) ts_gemm(true, false, O, I, (int)N, 1.0f, dout, O, in, I, 1.0f, dw, I, TS_EPI_NONE, NULL);
    if (db) add_rows(db, NULL, dout, N, O, 1.0f);
}

/* ---- LayerNorm ------------------------------------------------------------------------ */

/* With n = (x - mean) * rstd and g = dout * gamma:
 * dx = rstd * (g - mean(g) - n * mean(g * n)), dgamma = sum dout * n, dbeta = sum dout. */
void ts_bwd_layernorm_backward(float *din, float *dgamma, float *dbeta, const float *dout, const float *in,
                               const float *gamma, const float *mean, const float *rstd, int64_t N, int C) {
    const ts_kern_ops *ops = ts_kern_ops_current();
    int nt = threads_for(N * C);
    (void)nt;
    if (din) {
        TS_OMP(parallel for num_threads(nt) if(nt > 1) schedule(static))
        for (int64_t r = 0; r < N; r++) ops->layernorm_grad_row(din + r * C, dout + r * C, in + r * C, gamma, mean[r], rstd[r], C);
    }
    if (!dgamma && !dbeta) return;
    TS_OMP(parallel num_threads(nt) if(nt > 1))
    {
        int64_t lo, hi;
        share(C, &lo, &hi);
        for (int64_t r = 0; r < N && hi > lo; r++)
            ops->layernorm_grad_params(dgamma ? dgamma + lo : NULL, dbeta ? dbeta + lo : NULL, dout + r * C + lo,
                                       in + r * C + lo, mean[r], rstd[r], hi - lo);
    }
}

/* ---- activations ------------------------------------------------------------------------- */

/* The chosen instruction set's kernel (kernels_simd.h; the scalar ones are
 * the reference, kernels_ref.c), one contiguous chunk per thread. */
static void grad_split(ts_grad_fn fn, float *din, const float *dout, const float *in, int64_t n) {
    TS_KERN_SPLIT(n, fn(din + i0, dout + i0, in + i0, len));
}

void ts_bwd_relu_backward(float *din, const float *dout, const float *in, int64_t n) {
    grad_split(ts_kern_ops_current()->relu_grad, din, dout, in, n);
}

void ts_bwd_gelu_tanh_backward(float *din, const float *dout, const float *in, int64_t n) {
    grad_split(ts_kern_ops_current()->gelu_tanh_grad, din, dout, in, n);
}

void ts_bwd_gelu_backward(float *din, const float *dout, const float *in, int64_t n) {
    grad_split(ts_kern_ops_current()->gelu_grad, din, dout, in, n);
}

/* ---- dropout ----------------------------------------------------------------------------- */

/* ts_u01(key, i) < p as integers: the hash's top 53 bits below ceil(p 2^53)
 * (exact: both sides are whole numbers of 2^-53), which vectors can test. */
static uint64_t drop_threshold(float p) { return (uint64_t)ceil((double)p * 0x1p53); }

void ts_dropout(float *out, const float *in, float p, uint64_t key, int64_t n) {
    if (p <= 0.0f) {
        if (out != in) memcpy(out, in, sizeof(float) * (size_t)n);
        return;
    }
    float keep = (float)(1.0 / (1.0 - (double)p));
    uint64_t threshold = drop_threshold(p);
    ts_dropout_fn fn = ts_kern_ops_current()->dropout;
    TS_KERN_SPLIT(n, fn(out + i0, in + i0, len, i0, key, threshold, keep));
}

void ts_bwd_dropout_backward(float *din, const float *dout, float p, uint64_t key, int64_t n) {
    if (p <= 0.0f) {
        ts_bwd_residual_backward(din, NULL, dout, n);
        return;
    }
    float keep = (float)(1.0 / (1.0 - (double)p));
    uint64_t threshold = drop_threshold(p);
    ts_dropout_fn fn = ts_kern_ops_current()->dropout_grad;
    TS_KERN_SPLIT(n, fn(din + i0, dout + i0, len, i0, key, threshold, keep));
}

/* ---- residual ------------------------------------------------------------------------------ */

void ts_bwd_residual_backward(float *da, float *db, const float *dout, int64_t n) {
    int nt = threads_for(n);
    (void)nt;
    TS_OMP(parallel for num_threads(nt) if(nt > 1) schedule(static))
    for (int64_t i = 0; i < n; i++) {
        if (da) da[i] += dout[i];
        if (db) db[i] += dout[i];
    }
}

/* ---- embeddings ----------------------------------------------------------------------------- */

void ts_bwd_embedding_backward(float *dtable, const float *dout, const int32_t *ids, int64_t N, int D, float scale) {
    add_rows(dtable, ids, dout, N, D, scale);
}

void ts_bwd_posenc_backward(float *din, float *dpos, const float *dout, int B, int S, int D) {
    int64_t n = (int64_t)S * D;
    if (din) ts_bwd_residual_backward(din, NULL, dout, (int64_t)B * n);
    if (dpos)
        for (int b = 0; b < B; b++)
            for (int64_t i = 0; i < n; i++) dpos[i] += dout[b * n + i];
}

/* ---- attention ------------------------------------------------------------------------------ */

static float *head_at(const ts_bwd_heads *x, int64_t b, int64_t h) { return x->data + b * x->bstride + h * x->hstride; }

/* Heads are independent: one (batch, head) pair per iteration; the GEMMs
 * inside run on the calling thread (a nested region stays inactive). */
static int attn_threads(int B, int H, int Sq, int Sk, int hd) {
    return threads_for((int64_t)B * H * Sq * (Sk + hd) * 4);
}

void ts_bwd_attention_backward_values(ts_bwd_heads dv, float *dweights, ts_bwd_heads dout, const float *weights,
                                      ts_bwd_heads v, int B, int H, int Sq, int Sk, int hd) {
    int64_t BH = (int64_t)B * H;
    int nt = attn_threads(B, H, Sq, Sk, hd);
    (void)nt;
    TS_OMP(parallel for num_threads(nt) if(nt > 1) schedule(static))
    for (int64_t bh = 0; bh < BH; bh++) {
        int64_t b = bh / H, h = bh % H;
        const float *w = weights + bh * Sq * Sk, *dO = head_at(&dout, b, h);
        ts_gemm(false, true, Sq, Sk, hd, 1.0f, dO, dout.ld, head_at(&v, b, h), v.ld, 0.0f, dweights + bh * Sq * Sk,
                Sk, TS_EPI_NONE, NULL);
        if (dv.data)
            ts_gemm(true, false, Sk, hd, Sq, 1.0f, w, Sk, dO, dout.ld, 1.0f, head_at(&dv, b, h), dv.ld, TS_EPI_NONE,
                    NULL);
    }
}

void ts_bwd_softmax_backward(float *dscores, const float *dweights, const float *weights, int64_t rows, int cols) {
    ts_softmax_grad_row_fn row = ts_kern_ops_current()->softmax_grad_row;
    int nt = threads_for(rows * cols);
    (void)nt;
    TS_OMP(parallel for num_threads(nt) if(nt > 1) schedule(static))
    for (int64_t r = 0; r < rows; r++) row(dscores + r * cols, dweights + r * cols, weights + r * cols, cols, cols);
}

void ts_bwd_attention_backward_scores(ts_bwd_heads dq, ts_bwd_heads dk, const float *dscores, ts_bwd_heads q,
                                      ts_bwd_heads k, int B, int H, int Sq, int Sk, int hd) {
    float scale = 1.0f / sqrtf((float)hd);
    int64_t BH = (int64_t)B * H;
    int nt = attn_threads(B, H, Sq, Sk, hd);
    (void)nt;
    TS_OMP(parallel for num_threads(nt) if(nt > 1) schedule(static))
    for (int64_t bh = 0; bh < BH; bh++) {
        int64_t b = bh / H, h = bh % H;
        const float *ds = dscores + bh * Sq * Sk;
        if (dq.data)
            ts_gemm(false, false, Sq, hd, Sk, scale, ds, Sk, head_at(&k, b, h), k.ld, 1.0f, head_at(&dq, b, h), dq.ld,
                    TS_EPI_NONE, NULL);
        if (dk.data)
            ts_gemm(true, false, Sk, hd, Sq, scale, ds, Sk, head_at(&q, b, h), q.ld, 1.0f, head_at(&dk, b, h), dk.ld,
                    TS_EPI_NONE, NULL);
    }
}

/* ---- attention, head by head ---------------------------------------------------------------- */

/* Query rows a causal head's backward takes at a time (the forward's block,
 * model_forward.c): each block's products cover the keys its last row sees. */
#define CAUSAL_BLOCK 64

/* Blocks of rows of a head: one without the causal rule (the products whole);
 * else of CAUSAL_BLOCK rows, a last block of at most 4 rows joining the one
 * before (the GEMM's few-rows path would sum it in another order). */
static int head_blocks(int rows, bool causal) {
    if (!causal) return 1;
    int n = (rows + CAUSAL_BLOCK - 1) / CAUSAL_BLOCK;
    return n > 1 && rows - (n - 1) * CAUSAL_BLOCK <= 4 ? n - 1 : n;
}

/* Rows [*r0, *r1) of block blk of nb over `rows`. */
static void head_block(int blk, int nb, int rows, int *r0, int *r1) {
    *r0 = nb == 1 ? 0 : blk * CAUSAL_BLOCK;
    *r1 = blk == nb - 1 ? rows : *r0 + CAUSAL_BLOCK;
}

/* The keys query rows below r1 see: Sk, or under the causal rule (query i
 * sees keys j <= Sk - Sq + i) those of row r1 - 1. */
static int keys_seen(int r1, int Sq, int Sk, bool causal) {
    int n = Sk - Sq + r1;
    return causal && n < Sk ? (n > 0 ? n : 0) : Sk;
}

/* The whole backward of head bh, start to finish while its (Sq, Sk) scratch
 * ds sits in cache. By blocks of query rows [r0, r1), over the n keys they see:
 *   ds[r0:r1, :n] = dout[r0:r1] v[:n]^T, then the softmax's backward (0 past n);
 *   dq[r0:r1] += ds[r0:r1, :n] k[:n] / sqrt(hd)   (summed as the whole product: k prefix)
 * then by blocks of keys [j0, j1), over the queries that see them (from r):
 *   dv[j0:j1] += w[r:, j0:j1]^T dout[r:], dk[j0:j1] += ds[r:, j0:j1]^T q[r:] / sqrt(hd).
 * The terms left out are those of weight 0; with finite values (and at most 512
 * rows, one block of the GEMM's sum) the sums are the whole products' bit for bit. */
static void head_bwd(ts_bwd_heads dq, ts_bwd_heads dk, ts_bwd_heads dv, float *ds, ts_bwd_heads dout,
                     const float *w, ts_bwd_heads q, ts_bwd_heads k, ts_bwd_heads v, int64_t b, int64_t h, int Sq,
                     int Sk, int hd, bool causal) {
    float scale = 1.0f / sqrtf((float)hd);
    const float *dO = head_at(&dout, b, h), *qh = head_at(&q, b, h), *kh = head_at(&k, b, h);
    ts_softmax_grad_row_fn softmax_grad_row = ts_kern_ops_current()->softmax_grad_row;
    int nb = head_blocks(Sq, causal), past = Sk - Sq;
    for (int blk = 0; blk < nb; blk++) {
        int r0, r1;
        head_block(blk, nb, Sq, &r0, &r1);
        int n = keys_seen(r1, Sq, Sk, causal);
        float *dsr = ds + (int64_t)r0 * Sk;
        if (n > 0)
            ts_gemm(false, true, r1 - r0, n, hd, 1.0f, dO + (int64_t)r0 * dout.ld, dout.ld, head_at(&v, b, h), v.ld,
                    0.0f, dsr, Sk, TS_EPI_NONE, NULL);
        for (int r = r0; r < r1; r++)
            softmax_grad_row(ds + (int64_t)r * Sk, ds + (int64_t)r * Sk, w + (int64_t)r * Sk,
                            keys_seen(r + 1, Sq, Sk, causal), Sk);
        if (dq.data && n > 0)
            ts_gemm_k_prefix(false, false, r1 - r0, hd, n, Sk, scale, dsr, Sk, kh, k.ld, 1.0f,
                             head_at(&dq, b, h) + (int64_t)r0 * dq.ld, dq.ld);
    }
    int nk = head_blocks(Sk, causal);
    for (int blk = 0; blk < nk; blk++) {
        int j0, j1;
        head_block(blk, nk, Sk, &j0, &j1);
        int r = causal && j0 > past ? j0 - past : 0; /* the first query that sees key j0 */
        if (r >= Sq) continue;
        if (dv.data)
            ts_gemm(true, false, j1 - j0, hd, Sq - r, 1.0f, w + (int64_t)r * Sk + j0, Sk, dO + (int64_t)r * dout.ld,
                    dout.ld, 1.0f, head_at(&dv, b, h) + (int64_t)j0 * dv.ld, dv.ld, TS_EPI_NONE, NULL);
        if (dk.data)
            ts_gemm(true, false, j1 - j0, hd, Sq - r, scale, ds + (int64_t)r * Sk + j0, Sk, qh + (int64_t)r * q.ld,
                    q.ld, 1.0f, head_at(&dk, b, h) + (int64_t)j0 * dk.ld, dk.ld, TS_EPI_NONE, NULL);
    }
}

static void heads_bwd(ts_bwd_heads dq, ts_bwd_heads dk, ts_bwd_heads dv, float *dscores, ts_bwd_heads dout,
                      const float *weights, ts_bwd_heads q, ts_bwd_heads k, ts_bwd_heads v, int B, int H, int Sq,
                      int Sk, int hd, bool causal) {
    int64_t BH = (int64_t)B * H, SS = (int64_t)Sq * Sk;
    int nt = attn_threads(B, H, Sq, Sk, hd);
    (void)nt;
    TS_OMP(parallel for num_threads(nt) if(nt > 1) schedule(dynamic, 1))
    for (int64_t bh = 0; bh < BH; bh++)
        head_bwd(dq, dk, dv, dscores + bh * SS, dout, weights + bh * SS, q, k, v, bh / H, bh % H, Sq, Sk, hd, causal);
}

void ts_bwd_attention_backward(ts_bwd_heads dq, ts_bwd_heads dk, ts_bwd_heads dv, float *dweights,
                               ts_bwd_heads dout, const float *weights, ts_bwd_heads q, ts_bwd_heads k,
                               ts_bwd_heads v, int B, int H, int Sq, int Sk, int hd) {
    heads_bwd(dq, dk, dv, dweights, dout, weights, q, k, v, B, H, Sq, Sk, hd, false);
}

void ts_bwd_attention_backward_causal(ts_bwd_heads dq, ts_bwd_heads dk, ts_bwd_heads dv, float *dscores,
                                      ts_bwd_heads dout, const float *weights, ts_bwd_heads q, ts_bwd_heads k,
                                      ts_bwd_heads v, int B, int H, int Sq, int Sk, int hd) {
    heads_bwd(dq, dk, dv, dscores, dout, weights, q, k, v, B, H, Sq, Sk, hd, true);
}

/* ---- cross-entropy ---------------------------------------------------------------------------- */

static bool counted(const int32_t *labels, int64_t i, int ignore_index) { return labels[i] != ignore_index; }

double ts_bwd_cross_entropy_forward(const float *logits, const int32_t *labels, int64_t N, int V, int ignore_index,
                                    float smoothing, int64_t *n_valid) {
    double total = 0.0;
    int64_t n = 0;
    for (int64_t i = 0; i < N; i++) {
        if (!counted(labels, i, ignore_index)) continue;
        const float *x = logits + i * V;
        double lse = ts_logsumexp(x, V), nll = lse - x[labels[i]], smooth = 0.0;
        if (smoothing > 0.0f) {
            for (int v = 0; v < V; v++) smooth += lse - x[v];
            smooth /= V;
        }
        total += (1.0 - smoothing) * nll + smoothing * smooth;
        n++;
    }
    if (n_valid) *n_valid = n;
    return n ? total / (double)n : 0.0;
}

/* d (V) += scale * (softmax(x) - q), q = off everywhere and off + 1 - smoothing
 * at the label: the table's kernel on every entry as if none were the label,
 * then the label's entry made again from the value before, in double as the
 * reference makes it. A row with an infinite or NaN logit (lse not finite)
 * goes the reference's way whole. */
static void xent_grad_row(const ts_kern_ops *ops, float *d, const float *x, int V, int32_t label, double scale,
                          float smoothing, double off) {
    double lse = ts_logsumexp(x, V);
    if (!isfinite(lse)) ops = &ts_kern_scalar_ops;
    bool has_label = label >= 0 && label < V;
    float before = has_label ? d[label] : 0.0f;
    ops->xent_grad(d, x, V, lse, scale, off);
    if (has_label)
        d[label] = before + (float)(scale * (exp((double)x[label] - lse) - (off + 1.0 - smoothing)));
}

void ts_bwd_cross_entropy_backward(float *dlogits, float dloss, const float *logits, const int32_t *labels,
                                   int64_t N, int V, int ignore_index, float smoothing) {
    int64_t n = 0;
    for (int64_t i = 0; i < N; i++) n += counted(labels, i, ignore_index);
    if (!n) return;
    double scale = (double)dloss / (double)n, off = (double)smoothing / V;
    const ts_kern_ops *ops = ts_kern_ops_current();
    int nt = threads_for(N * V);
    (void)nt;
    TS_OMP(parallel for num_threads(nt) if(nt > 1) schedule(static))
    for (int64_t i = 0; i < N; i++) {
        if (!counted(labels, i, ignore_index)) continue;
        xent_grad_row(ops, dlogits + i * V, logits + i * V, V, labels[i], scale, smoothing, off);
    }
}
