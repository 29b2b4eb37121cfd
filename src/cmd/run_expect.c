/* run_expect: the final output against a reference array (run_expect.h). */
#include "run_expect.h"

#include <math.h>
#include <stdio.h>

#include "cli.h"
#include "tscope/io.h"

/* "[1, 4, 17]": element k of a tensor of this shape. */
static void index_text(char *buf, size_t size, const ts_tensor *t, int64_t k) {
    int64_t idx[TS_MAX_RANK];
    for (int d = t->rank - 1; d >= 0; d--) idx[d] = k % t->shape[d], k /= t->shape[d];
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < t->rank && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", d ? ", " : "", (long long)idx[d]);
    if (used < size) snprintf(buf + used, size - used, "]");
}

int run_expect(const char *path, float tol, const ts_tensor *out) {
    ts_npy want;
    if (ts_npy_read(&want, path)) return ts_cli_error("run", "--expect %s", ts_last_error());
    bool same = want.rank == out->rank;
    for (int d = 0; same && d < out->rank; d++) same = want.shape[d] == out->shape[d];
    if (!same) {
        char a[TS_SHAPE_TEXT_MAX], b[TS_SHAPE_TEXT_MAX];
        ts_npy_free(&want);
        return ts_cli_error("run", "--expect %s has shape %s; the output is %s", path,
                            ts_shape_format(a, sizeof a, want.rank, want.shape, TS_SHAPE_PLAIN),
                            ts_tensor_shape_str(b, sizeof b, out, TS_SHAPE_PLAIN));
    }
    /* out may be a strided view: walk it in row-major order of its shape */
    double worst_abs = 0, worst_rel = 0, worst_score = 0;
    int64_t at_abs = 0, at_rel = 0, at_score = 0, n = want.numel;
    int64_t idx[TS_MAX_RANK] = {0};
    for (int64_t k = 0; k < n; k++) {
        int64_t off = 0;
        for (int d = 0; d < out->rank; d++) off += idx[d] * out->stride[d];
        double got = out->data[off], w = want.f32[k], diff = fabs(got - w);
        if (isnan(got) != isnan(w) || (isnan(diff) && !(isnan(got) && isnan(w)))) diff = INFINITY;
        if (isnan(diff)) diff = 0; /* both NaN */
        double rel = diff / fmax(fabs(w), 1e-30), score = diff / fmax(1.0, fabs(w));
        if (diff > worst_abs) worst_abs = diff, at_abs = k;
        if (rel > worst_rel) worst_rel = rel, at_rel = k;
        if (score > worst_score) worst_score = score, at_score = k;
        for (int d = out->rank - 1; d >= 0; d--) {
            if (++idx[d] < out->shape[d]) break;
            idx[d] = 0;
        }
    }
    char ia[64], ir[64], is[64];
    index_text(ia, sizeof ia, out, at_abs);
    index_text(ir, sizeof ir, out, at_rel);
    index_text(is, sizeof is, out, at_score);
    printf("expect %s: largest |diff| %.3g at %s, largest relative diff %.3g at %s (%lld values)\n", path, worst_abs,
           ia, worst_rel, ir, (long long)n);
    ts_npy_free(&want);
    if (worst_score <= tol) {
        printf("expect: the output agrees within tol %g (|diff| <= tol * max(1, |want|))\n", (double)tol);
        return 0;
    }
    fprintf(stderr, "tscope run: the output differs from %s beyond tol %g: |diff| / max(1, |want|) %.3g at %s\n",
            path, (double)tol, worst_score, is);
    return 1;
}
