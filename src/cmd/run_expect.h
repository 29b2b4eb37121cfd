/* run_expect: `tscope run --expect OUT.npy [--tol T]`, the run's final output
 * checked against a reference array (PyTorch's), as the tests check it. */
#ifndef TSCOPE_CMD_RUN_EXPECT_H
#define TSCOPE_CMD_RUN_EXPECT_H

#include "tscope/core.h"

/* Tolerance when --tol is not given: float32 rounding over a few layers. */
#define RUN_EXPECT_TOL 1e-4f

/* Compare out with the array in path: the shapes must be equal (an error,
 * exit 2), then print the largest absolute and relative difference and where.
 * Returns 0 when every |got - want| <= tol * max(1, |want|), 1 beyond it
 * (naming the element), 2 for a file or shape that cannot be compared. */
int run_expect(const char *path, float tol, const ts_tensor *out);

#endif
