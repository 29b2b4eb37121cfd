/* npy: NumPy's .npy arrays, read and written.
 *
 * A file is the magic "\x93NUMPY", a version (1.0, 2.0 or 3.0), a header
 * length (2 bytes in 1.0, 4 after), a Python dict literal
 * {'descr': '<f4', 'fortran_order': False, 'shape': (2, 5, 16), } and the
 * data. tscope reads little-endian float32, float64, int32 and int64 arrays
 * in C order and hands them out as float32 (ts_npy_read) or as int64 ids
 * (ts_npy_read_labels); anything else (big-endian, Fortran order, object
 * arrays, a header that does not parse, data shorter or longer than the shape
 * says) is refused with a message naming the file and the problem.
 * Writing always produces float32 in C order, atomically.
 */
#ifndef TSCOPE_NPY_H
#define TSCOPE_NPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tscope/status.h"
#include "tscope/tensor.h"

typedef struct ts_npy {
    int rank;
    int64_t shape[TS_MAX_RANK];
    int64_t numel;
    char descr[16];  /* the dtype as stored: "<f4", "<f8", "<i4", "<i8" */
    float *f32;      /* (numel) values as float32 (owned), from ts_npy_read */
    int64_t *i64;    /* (numel) values as int64 (owned), from ts_npy_read_labels */
} ts_npy;

/* Read an array as float32 (float64 and integers are converted; a value that
 * float32 cannot hold is an error, not a silent inf). */
ts_status ts_npy_read(ts_npy *out, const char *path);

/* Read integer ids (token ids, labels): int32/int64 as they are, floats only
 * when every value is a whole number. */
ts_status ts_npy_read_labels(ts_npy *out, const char *path);

/* The same from bytes already in memory; `what` names them in messages. */
ts_status ts_npy_parse(ts_npy *out, const void *bytes, size_t size, const char *what, bool as_labels);

void ts_npy_free(ts_npy *npy);

/* A contiguous view of the float32 values. */
ts_status ts_npy_tensor(const ts_npy *npy, ts_tensor *view);

/* Bytes of the header (magic through padding) ts_npy_write_header produces
 * for this shape: the data starts 64-byte aligned, as NumPy writes it. */
size_t ts_npy_header_size(int rank, const int64_t *shape);

/* Write the header for a float32 C-order array of this shape into buf
 * (ts_npy_header_size bytes). Returns the bytes written, 0 when buf is small. */
size_t ts_npy_write_header(unsigned char *buf, size_t size, int rank, const int64_t *shape);

/* Write t (any strides) as float32, atomically. */
ts_status ts_npy_write(const char *path, const ts_tensor *t);

#endif
