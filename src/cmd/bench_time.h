/* bench_time: the clock and the median every `tscope bench` case reports. */
#ifndef TSCOPE_CMD_BENCH_TIME_H
#define TSCOPE_CMD_BENCH_TIME_H

/* Seconds on a monotonic clock, for differences only. */
double bench_now(void);

/* The median of v[0..n) (n >= 1); sorts v in place. */
double bench_median(double *v, int n);

#endif
