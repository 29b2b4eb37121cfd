/* kernels_attn: causal attention of one head on the calling thread
 * (ts_attn_causal). Its keys and values are packed once into this thread's
 * panels; then each block of queries has its scores, softmax and values made
 * while they sit in cache, by the table's attn_scores and attn_values, which
 * sum as the gemm micro-kernels do. The gemm path packs the keys again for
 * every block, and the weights and values too: for a head 64 wide that
 * packing costs about as much as the products. */
#include <stdlib.h>

#include "kernels_impl.h"

static _Thread_local float *tl_panels;
static _Thread_local size_t tl_panel_floats;

/* This thread's panels with room for `floats`, allocated once and grown; NULL if out of memory. */
static float *panels(size_t floats) {
    if (tl_panel_floats >= floats) return tl_panels;
    free(tl_panels);
    tl_panels = aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64);
    tl_panel_floats = tl_panels ? floats : 0;
    return tl_panels;
}

/* The K block gemm.c cuts a sum of k_whole terms into (blocks_for): balanced
 * blocks of at most kc_max. The values' sums must be cut where the gemm path
 * cuts them, or the numbers differ in the last bit. */
static int gemm_kc(const ts_kern_ops *ops, int k_whole) {
    int nk = (k_whole + ops->kc_max - 1) / ops->kc_max;
    return (k_whole + nk - 1) / nk;
}

/* Floats a panel writer may use past its panel (ts_pack_t_fn, ts_pack_n_fn). */
#define PACK_ROOM 64

static int round_up(int x, int to) { return (x + to - 1) / to * to; }

/* keys (n, hd) into panels of pw keys: panel p, element (d, j) at
 * kt[(p*hd + d)*pw + j], keys past n 0: the gemm's transposing pack of B
 * stored (N, K), one panel at a time. */
static void pack_keys(const ts_kern_ops *ops, float *kt, int pw, const float *k, int64_t ldk, int n, int hd) {
    for (int p0 = 0; p0 < n; p0 += pw)
        ops->pack_t(kt + (int64_t)p0 * hd, pw, k + p0 * ldk, ldk, n - p0 < pw ? n - p0 : pw, hd);
}

/* values (n, hd) into panels of pw columns: panel q, element (c, j) at
 * vp[(q*n + c)*pw + j], columns past hd 0: the gemm's plain pack of B. */
static void pack_values(const ts_kern_ops *ops, float *vp, int pw, const float *v, int64_t ldv, int n, int hd) {
    for (int q0 = 0; q0 < hd; q0 += pw)
        ops->pack_n(vp + (int64_t)q0 * n, pw, v + q0, ldv, hd - q0 < pw ? hd - q0 : pw, n);
}

int64_t ts_attn_causal(const ts_attn_head *h, int r0, const int *ends, int nb) {
    const ts_kern_ops *ops = ts_kern_ops_current();
    if (!ops->attn_scores || nb <= 0 || h->hd > ops->kc_max) return -1;
    for (int b = 0, a = r0; b < nb; a = ends[b++])
        if (ends[b] - a <= TS_KERN_SMALL_M) return -1; /* the gemm streams those in another order */
    int past = h->Sk - h->Sq, pw = ops->attn_pw, hd = h->hd;
    int n_all = past + ends[nb - 1] < h->Sk ? past + ends[nb - 1] : h->Sk; /* keys the last row sees */
    /* each with the room a packer may write past its panel */
    size_t kt_floats = (size_t)round_up(n_all, pw) * (size_t)hd + PACK_ROOM;
    size_t vp_floats = (size_t)round_up(hd, pw) * (size_t)n_all + PACK_ROOM;
    int most_rows = 0; /* the longest block's, for the weights' scratch */
    for (int b = 0, a = r0; b < nb; a = ends[b++]) most_rows = ends[b] - a > most_rows ? ends[b] - a : most_rows;
    size_t s_floats = h->att ? 0 : (size_t)most_rows * (size_t)n_all;
    float *kt = panels(kt_floats + vp_floats + s_floats);
    if (!kt) return -1;
    float *vp = kt + kt_floats, *scratch = vp + vp_floats;
    pack_keys(ops, kt, pw, h->k, h->ldk, n_all, hd);
    pack_values(ops, vp, pw, h->v, h->ldv, n_all, hd);
    int kc = gemm_kc(ops, h->Sk);
    int64_t empty = 0;
    for (int b = 0, a = r0; b < nb; a = ends[b++]) {
        int e = ends[b], n = past + e < h->Sk ? past + e : h->Sk;
        /* weights kept: rows of att, zero past each row's keys; else the
         * block's own rows in scratch (in L2), zero only up to its n keys,
         * which is as far as the values read */
        float *s = h->att ? h->att + a * h->ldatt : scratch;
        int64_t lds = h->att ? h->ldatt : n_all;
        int cols = h->att ? h->Sk : n;
        ops->attn_scores(e - a, n, hd, past + a + 1, h->alpha, h->q + a * h->ldq, h->ldq, kt, s, lds);
        for (int r = a; r < e; r++) { /* ts_softmax_rows' rule: row r sees past + r + 1 keys */
            int valid = past + r + 1 < h->Sk ? past + r + 1 : h->Sk;
            float *row = s + (r - a) * lds;
            empty += ops->softmax_row(row, row, cols, valid < 0 ? 0 : valid, h->key_mask);
        }
        ops->attn_values(e - a, n, kc, hd, s, lds, vp, n_all, h->ctx + a * h->ldctx, h->ldctx);
    }
    return empty;
}
