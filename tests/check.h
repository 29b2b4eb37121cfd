/* check: what every unit test includes. cmocka runs the tests; these helpers
 * compare floats and shapes with messages that say which element differs. */
#ifndef TSCOPE_TESTS_CHECK_H
#define TSCOPE_TESTS_CHECK_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tscope/core.h"

/* Largest |a-b| / max(1, |b|) over n elements; its index goes to *where. */
double check_max_rel_diff(const float *a, const float *b, int64_t n, int64_t *where);

/* Fail the current test, naming the worst element, if any element of `got`
 * differs from `want` by more than tol relative (absolute below 1). */
#define assert_floats_close(got, want, n, tol) \
    check_assert_floats_close((got), (want), (n), (tol), #got, __FILE__, __LINE__)
void check_assert_floats_close(const float *got, const float *want, int64_t n, double tol,
                               const char *what, const char *file, int line);

/* Fail unless the tensor's shape is exactly the given list. */
#define assert_shape(t, ...)                                                   \
    do {                                                                       \
        const int64_t want_[] = {__VA_ARGS__};                                 \
        check_assert_shape((t), want_, (int)(sizeof want_ / sizeof want_[0]),  \
                           __FILE__, __LINE__);                                \
    } while (0)
void check_assert_shape(const ts_tensor *t, const int64_t *want, int rank, const char *file, int line);

/* Fail with the library's last error message when a status is not TS_OK. */
#define assert_ok(expr) check_assert_ok((expr), #expr, __FILE__, __LINE__)
void check_assert_ok(ts_status st, const char *expr, const char *file, int line);

#endif
