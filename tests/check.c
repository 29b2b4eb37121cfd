#include "check.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

double check_max_rel_diff(const float *a, const float *b, int64_t n, int64_t *where) {
    double worst = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]) / fmax(1.0, fabs((double)b[i]));
        if (isnan(d) || isnan((double)a[i]) != isnan((double)b[i])) d = INFINITY;
        if (isnan(a[i]) && isnan(b[i])) d = 0;
        if (d > worst) {
            worst = d;
            at = i;
        }
    }
    if (where) *where = at;
    return worst;
}

void check_assert_floats_close(const float *got, const float *want, int64_t n, double tol,
                               const char *what, const char *file, int line) {
    int64_t at;
    double worst = check_max_rel_diff(got, want, n, &at);
    if (worst <= tol) return;
    print_error("%s: element %lld is %.9g, want %.9g (rel diff %.3g > %.3g)\n", what, (long long)at,
                   (double)got[at], (double)want[at], worst, tol);
    _fail(file, line);
}

void check_assert_shape(const ts_tensor *t, const int64_t *want, int rank, const char *file, int line) {
    char got_s[TS_SHAPE_TEXT_MAX], want_s[TS_SHAPE_TEXT_MAX];
    ts_tensor_shape_str(got_s, sizeof got_s, t, TS_SHAPE_PLAIN);
    ts_shape_format(want_s, sizeof want_s, rank, want, TS_SHAPE_PLAIN);
    if (strcmp(got_s, want_s) == 0) return;
    print_error("shape is %s, want %s\n", got_s, want_s);
    _fail(file, line);
}

void check_assert_ok(ts_status st, const char *expr, const char *file, int line) {
    if (st == TS_OK) return;
    print_error("%s failed: %s: %s\n", expr, ts_status_str(st), ts_last_error());
    _fail(file, line);
}
