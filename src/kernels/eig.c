/* eig: the eigenvalues of a small real matrix (kernels.h, "eig"), for the
 * copying score of an attention head's OV circuit.
 *
 * The classic two steps (EISPACK's elmhes and hqr, as Numerical Recipes
 * prints them): reduce to upper Hessenberg form by Gaussian elimination with
 * pivoting, then Francis double-shift QR iterations until every 1x1 or 2x2
 * block on the diagonal has split off. In double; written 1-based through
 * the macro A(i, j) so it reads like the published algorithm.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/kernels.h"

#define A(i, j) a[((i) - 1) * n + ((j) - 1)]

static double sign_of(double a, double b) { return b >= 0 ? fabs(a) : -fabs(a); }

/* Upper Hessenberg form, in place; the elimination multipliers below the
 * subdiagonal are cleared (hqr must not read them). */
static void hessenberg(double *a, int n) {
    for (int m = 2; m < n; m++) {
        double x = 0;
        int i = m;
        for (int j = m; j <= n; j++)
            if (fabs(A(j, m - 1)) > fabs(x)) x = A(j, m - 1), i = j;
        if (i != m) {
            for (int j = m - 1; j <= n; j++) {
                double t = A(i, j);
                A(i, j) = A(m, j), A(m, j) = t;
            }
            for (int j = 1; j <= n; j++) {
                double t = A(j, i);
                A(j, i) = A(j, m), A(j, m) = t;
            }
        }
        if (x != 0)
            for (i = m + 1; i <= n; i++) {
                double y = A(i, m - 1);
                if (y == 0) continue;
                y /= x;
                A(i, m - 1) = y;
                for (int j = m; j <= n; j++) A(i, j) -= y * A(m, j);
                for (int j = 1; j <= n; j++) A(j, m) += y * A(j, i);
            }
    }
    for (int i = 3; i <= n; i++)
        for (int j = 1; j < i - 1; j++) A(i, j) = 0;
}

/* Francis QR on a Hessenberg matrix: eigenvalues into wr, wi (1-based). */
static ts_status hqr(double *a, int n, double *wr, double *wi) {
    double anorm = 0, p = 0, q = 0, r = 0, s, t = 0, u, v, w, x, y, z;
    for (int i = 1; i <= n; i++)
        for (int j = i > 1 ? i - 1 : 1; j <= n; j++) anorm += fabs(A(i, j));
    int nn = n;
    while (nn >= 1) {
        int its = 0, l;
        do {
            for (l = nn; l >= 2; l--) {
                s = fabs(A(l - 1, l - 1)) + fabs(A(l, l));
                if (s == 0) s = anorm;
                if (fabs(A(l, l - 1)) + s == s) {
                    A(l, l - 1) = 0;
                    break;
                }
            }
            x = A(nn, nn);
            if (l == nn) { /* one root */
                wr[nn] = x + t;
                wi[nn--] = 0;
            } else {
                y = A(nn - 1, nn - 1);
                w = A(nn, nn - 1) * A(nn - 1, nn);
                if (l == nn - 1) { /* two roots */
                    p = 0.5 * (y - x);
                    q = p * p + w;
                    z = sqrt(fabs(q));
                    x += t;
                    if (q >= 0) {
                        z = p + sign_of(z, p);
                        wr[nn - 1] = wr[nn] = x + z;
                        if (z != 0) wr[nn] = x - w / z;
                        wi[nn - 1] = wi[nn] = 0;
                    } else {
                        wr[nn - 1] = wr[nn] = x + p;
                        wi[nn - 1] = -(wi[nn] = z);
                    }
                    nn -= 2;
                } else { /* no roots yet: a QR step */
                    if (its == 60) return ts_fail(TS_ERR_ARG, "eig: no convergence after 60 QR iterations");
                    if (its == 10 || its == 20 || its == 40) { /* exceptional shift */
                        t += x;
                        for (int i = 1; i <= nn; i++) A(i, i) -= x;
                        s = fabs(A(nn, nn - 1)) + fabs(A(nn - 1, nn - 2));
                        y = x = 0.75 * s;
                        w = -0.4375 * s * s;
                    }
                    ++its;
                    int m;
                    for (m = nn - 2; m >= l; m--) {
                        z = A(m, m);
                        r = x - z;
                        s = y - z;
                        p = (r * s - w) / A(m + 1, m) + A(m, m + 1);
                        q = A(m + 1, m + 1) - z - r - s;
                        r = A(m + 2, m + 1);
                        s = fabs(p) + fabs(q) + fabs(r);
                        p /= s;
                        q /= s;
                        r /= s;
                        if (m == l) break;
                        u = fabs(A(m, m - 1)) * (fabs(q) + fabs(r));
                        v = fabs(p) * (fabs(A(m - 1, m - 1)) + fabs(z) + fabs(A(m + 1, m + 1)));
                        if (u + v == v) break;
                    }
                    for (int i = m + 2; i <= nn; i++) {
                        A(i, i - 2) = 0;
                        if (i != m + 2) A(i, i - 3) = 0;
                    }
                    for (int k = m; k <= nn - 1; k++) {
                        if (k != m) {
                            p = A(k, k - 1);
                            q = A(k + 1, k - 1);
                            r = 0;
                            if (k != nn - 1) r = A(k + 2, k - 1);
                            if ((x = fabs(p) + fabs(q) + fabs(r)) != 0) {
                                p /= x;
                                q /= x;
                                r /= x;
                            }
                        }
                        if ((s = sign_of(sqrt(p * p + q * q + r * r), p)) != 0) {
                            if (k == m) {
                                if (l != m) A(k, k - 1) = -A(k, k - 1);
                            } else {
                                A(k, k - 1) = -s * x;
                            }
                            p += s;
                            x = p / s;
                            y = q / s;
                            z = r / s;
                            q /= p;
                            r /= p;
                            for (int j = k; j <= nn; j++) {
                                p = A(k, j) + q * A(k + 1, j);
                                if (k != nn - 1) {
                                    p += r * A(k + 2, j);
                                    A(k + 2, j) -= p * z;
                                }
                                A(k + 1, j) -= p * y;
                                A(k, j) -= p * x;
                            }
                            int mmin = nn < k + 3 ? nn : k + 3;
                            for (int i = l; i <= mmin; i++) {
                                p = x * A(i, k) + y * A(i, k + 1);
                                if (k != nn - 1) {
                                    p += z * A(i, k + 2);
                                    A(i, k + 2) -= p * r;
                                }
                                A(i, k + 1) -= p * q;
                                A(i, k) -= p;
                            }
                        }
                    }
                }
            }
        } while (l < nn - 1);
    }
    return TS_OK;
}

ts_status ts_eigvals(const double *m, int n, double *re, double *im) {
    if (n < 1) return ts_fail(TS_ERR_ARG, "eig: a matrix of size %d", n);
    for (int64_t i = 0; i < (int64_t)n * n; i++)
        if (!isfinite(m[i])) return ts_fail(TS_ERR_ARG, "eig: the matrix holds %g", m[i]);
    double *a = malloc(sizeof(double) * (size_t)n * n), *wr = malloc(sizeof(double) * (size_t)(n + 1)),
           *wi = malloc(sizeof(double) * (size_t)(n + 1));
    ts_status st = a && wr && wi ? TS_OK : ts_fail(TS_ERR_NOMEM, "eig: out of memory");
    if (!st) {
        memcpy(a, m, sizeof(double) * (size_t)n * n);
        hessenberg(a, n);
        st = hqr(a, n, wr, wi);
    }
    if (!st)
        for (int i = 0; i < n; i++) re[i] = wr[i + 1], im[i] = wi[i + 1];
    free(a), free(wr), free(wi);
    return st;
}
