/* trace_stats: min, max, mean, std, mean |x|, NaN/Inf/zero counts and a
 * 64-bin histogram for every traced step, fast enough to run on every step of
 * a full-size run.
 *
 * Blocks of up to TRF_BLOCK elements are summed around a shift (the block's
 * first element) in float lanes, which vectorises and stays accurate, then
 * merged in double with Chan's formula. A block whose sums are not finite
 * (a NaN or an infinity: the causal mask's -inf) is done again by the vector
 * kernel that leaves such lanes out, and only a block whose finite values
 * overflow float by the careful scalar path, so the fast path never tests
 * elements one by one. The histogram is a second pass, once min and max are
 * known; where some elements are NaN or infinite, a variant of the kernel
 * turns them into -inf, which lands in no bin, so the finite ones are binned
 * exactly as the plain kernel bins them, in the same one sweep.
 */
#include <math.h>
#include <string.h>

#include "tscope/kernels.h"
#include "trace_format.h"

void trf_acc_init(trf_acc *a) {
    memset(a, 0, sizeof *a);
    a->min = INFINITY;
    a->max = -INFINITY;
}

/* Chan, Golub, LeVeque: pairwise update of mean and M2. */
static void merge_moments(trf_acc *into, double n, double mean, double m2) {
    if (n == 0) return;
    if (into->n == 0) {
        into->n = n;
        into->mean = mean;
        into->m2 = m2;
        return;
    }
    double total = into->n + n;
    double delta = mean - into->mean;
    into->mean += delta * (n / total);
    into->m2 += m2 + delta * delta * (into->n * n / total);
    into->n = total;
}

void trf_acc_merge(trf_acc *into, const trf_acc *from) {
    merge_moments(into, from->n, from->mean, from->m2);
    into->sum_abs += from->sum_abs;
    if (from->min < into->min) into->min = from->min;
    if (from->max > into->max) into->max = from->max;
    into->nan += from->nan;
    into->inf += from->inf;
    into->zeros += from->zeros;
}

void trf_acc_add_careful(trf_acc *acc, const float *x, int64_t n) {
    double shift = 0, s1 = 0, s2 = 0, sabs = 0;
    double count = 0;
    bool have_shift = false;
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        if (isnan(v)) {
            acc->nan++;
            continue;
        }
        if (isinf(v)) {
            acc->inf++;
            continue;
        }
        if (!have_shift) {
            shift = v;
            have_shift = true;
        }
        double d = (double)v - shift;
        s1 += d;
        s2 += d * d;
        sabs += fabs((double)v);
        count++;
        if (v == 0.0f) acc->zeros++;
        if (v < acc->min) acc->min = v;
        if (v > acc->max) acc->max = v;
    }
    if (count == 0) return;
    double m2 = s2 - s1 * s1 / count;
    merge_moments(acc, count, shift + s1 / count, m2 > 0 ? m2 : 0);
    acc->sum_abs += sabs;
}

void trf_acc_add_block(trf_acc *acc, const float *x, int64_t n, double s1, double s2, double sabs,
                       float mn, float mx, uint64_t zeros, float shift) {
    if (n <= 0) return;
    if (!isfinite(s1) || !isfinite(s2) || !isfinite(sabs)) {
        trf_acc_add_careful(acc, x, n);
        return;
    }
    double count = (double)n;
    double m2 = s2 - s1 * s1 / count;
    merge_moments(acc, count, (double)shift + s1 / count, m2 > 0 ? m2 : 0);
    acc->sum_abs += sabs;
    if (mn < acc->min) acc->min = mn;
    if (mx > acc->max) acc->max = mx;
    acc->zeros += zeros;
}

void trf_acc_add_counted(trf_acc *acc, const float *x, int64_t n, uint64_t nan, uint64_t inf, double s1,
                         double s2, double sabs, float mn, float mx, uint64_t zeros, float shift) {
    int64_t finite = n - (int64_t)(nan + inf);
    if (!isfinite(s1) || !isfinite(s2) || !isfinite(sabs)) {
        trf_acc_add_careful(acc, x, n);
        return;
    }
    acc->nan += nan;
    acc->inf += inf;
    if (finite > 0) trf_acc_add_block(acc, x, finite, s1, s2, sabs, mn, mx, zeros, shift);
}

void trf_acc_finish(const trf_acc *a, ts_trace_stats *out) {
    memset(out, 0, sizeof *out);
    out->finite = (uint64_t)a->n;
    out->nan = a->nan;
    out->inf = a->inf;
    out->zeros = a->zeros;
    if (a->n > 0) {
        out->min = a->min;
        out->max = a->max;
        out->mean = a->mean;
        out->std = sqrt(a->m2 / a->n);
        out->mean_abs = a->sum_abs / a->n;
    }
}

/* ---- the scalar kernels (the reference, and the fallback) ---- */

#define LANES 8

static void block_scalar(trf_acc *acc, const float *x, float *dst, int64_t n) {
    if (n <= 0) return;
    float shift = isfinite(x[0]) ? x[0] : 0.0f;
    float s1[LANES] = {0}, s2[LANES] = {0}, sa[LANES] = {0};
    float mn = INFINITY, mx = -INFINITY;
    uint64_t zeros = 0;
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        for (int l = 0; l < LANES; l++) {
            float v = x[i + l];
            float d = v - shift;
            s1[l] += d;
            s2[l] += d * d;
            sa[l] += fabsf(v);
            mn = v < mn ? v : mn;
            mx = v > mx ? v : mx;
            zeros += v == 0.0f;
        }
    }
    for (; i < n; i++) {
        float v = x[i];
        float d = v - shift;
        s1[0] += d;
        s2[0] += d * d;
        sa[0] += fabsf(v);
        mn = v < mn ? v : mn;
        mx = v > mx ? v : mx;
        zeros += v == 0.0f;
    }
    if (dst) memcpy(dst, x, (size_t)n * sizeof *x);
    double t1 = 0, t2 = 0, ta = 0;
    for (int l = 0; l < LANES; l++) {
        t1 += s1[l];
        t2 += s2[l];
        ta += sa[l];
    }
    trf_acc_add_block(acc, x, n, t1, t2, ta, mn, mx, zeros, shift);
}

/* The bin of x, or with finite and x not one hist_finite bins the one past
 * the last, which nobody reads. */
static inline int bin_or_skip(float x, float lo, float scale, bool finite) {
    return finite && !trf_binned_finite(x, lo, scale) ? TS_TRACE_HIST_BINS : trf_bin(x, lo, scale);
}

static void hist_scalar_of(uint64_t *hist, const float *x, int64_t n, float lo, float scale, bool finite) {
    /* Four tables so that runs of equal bins do not wait on each other. */
    uint32_t h[4][TS_TRACE_HIST_BINS + 1];
    while (n > 0) {
        int64_t m = n < (1 << 24) ? n : (1 << 24);
        memset(h, 0, sizeof h);
        int64_t i = 0;
        for (; i + 4 <= m; i += 4)
            for (int k = 0; k < 4; k++) h[k][bin_or_skip(x[i + k], lo, scale, finite)]++;
        for (; i < m; i++) h[0][bin_or_skip(x[i], lo, scale, finite)]++;
        for (int b = 0; b < TS_TRACE_HIST_BINS; b++) hist[b] += (uint64_t)h[0][b] + h[1][b] + h[2][b] + h[3][b];
        x += m;
        n -= m;
    }
}

static void hist_scalar(uint64_t *hist, const float *x, int64_t n, float lo, float scale) {
    hist_scalar_of(hist, x, n, lo, scale, false);
}

static void hist_scalar_finite(uint64_t *hist, const float *x, int64_t n, float lo, float scale) {
    hist_scalar_of(hist, x, n, lo, scale, true);
}

static void relu_scalar(float *dst, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = x[i] < 0 ? 0.0f : x[i];
}

const trf_stats_ops trf_stats_scalar = {block_scalar, hist_scalar, hist_scalar_finite, relu_scalar};

const trf_stats_ops *trf_stats_current(void) {
#if defined(TRF_HAVE_X86)
    const trf_stats_ops *ops = NULL;
    switch (ts_kernels_isa()) {
    case TS_ISA_AVX512: ops = &trf_stats_avx512; break;
    case TS_ISA_AVX2: ops = &trf_stats_avx2; break;
    default: break;
    }
    if (ops && ops->block) return ops;
#endif
#if defined(TRF_HAVE_NEON)
    if (ts_kernels_isa() == TS_ISA_NEON) return &trf_stats_neon;
#endif
    return &trf_stats_scalar;
}

void trf_hist_plan_init(trf_hist_plan *plan, const ts_trace_stats *s) {
    plan->lo = (float)s->min;
    plan->hi = (float)s->max;
    plan->scale = (float)TS_TRACE_HIST_BINS / (plan->hi - plan->lo);
    plan->fast = plan->hi > plan->lo && isfinite(plan->hi - plan->lo) && isfinite(plan->scale);
    plan->nonfinite = s->nan != 0 || s->inf != 0;
}

void trf_hist_add(uint64_t *hist, const float *x, int64_t n, const trf_hist_plan *plan,
                  const trf_stats_ops *ops) {
    if (plan->fast) {
        /* With NaN or infinities among them, the kernel that bins each
         * finite element as the other does and leaves the rest out, in the
         * same single sweep (a causal mask's -inf are half of `masked`). */
        (plan->nonfinite ? ops->hist_finite : ops->hist)(hist, x, n, plan->lo, plan->scale);
        return;
    }
    /* Non-finite elements to skip, a constant tensor, or a range float cannot scale. */
    double lo = plan->lo, width = (double)plan->hi - lo;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) continue;
        int b = 0;
        if (width > 0) {
            double f = ((double)x[i] - lo) / width * TS_TRACE_HIST_BINS;
            b = f >= TS_TRACE_HIST_BINS - 1 ? TS_TRACE_HIST_BINS - 1 : f > 0 ? (int)f : 0;
        }
        hist[b]++;
    }
}

void ts_trace_stats_compute(ts_trace_stats *out, const float *x, int64_t n) {
    const trf_stats_ops *ops = trf_stats_current();
    trf_acc acc;
    trf_acc_init(&acc);
    for (int64_t i = 0; i < n; i += TRF_BLOCK) ops->block(&acc, x + i, NULL, n - i < TRF_BLOCK ? n - i : TRF_BLOCK);
    trf_acc_finish(&acc, out);
    if (out->finite == 0) return;
    trf_hist_plan plan;
    trf_hist_plan_init(&plan, out);
    trf_hist_add(out->hist, x, n, &plan, ops);
}
