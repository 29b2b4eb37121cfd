/* tensor: float32 views with a shape and strides, the way PyTorch sees them.
 *
 * A ts_tensor never owns its data: it is a view (pointer, shape, strides) over
 * memory that an arena, a checkpoint or a caller owns. Reshape, permute,
 * transpose, slice and chunk make new views without copying, exactly when
 * PyTorch's .view() would; ts_tensor_contiguous copies when a view cannot do.
 * Dims may be given negative, counted from the end as in Python (-1 = last).
 */
#ifndef TSCOPE_TENSOR_H
#define TSCOPE_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tscope/arena.h"
#include "tscope/status.h"

#define TS_MAX_RANK 6

typedef struct ts_tensor {
    float *data;                 /* first element of the view */
    int rank;                    /* 0..TS_MAX_RANK */
    int64_t shape[TS_MAX_RANK];  /* sizes, outermost first */
    int64_t stride[TS_MAX_RANK]; /* in elements, not bytes */
} ts_tensor;

/* How shapes are printed: [30, 200, 512] or torch.Size([30, 200, 512]). */
typedef enum ts_shape_style { TS_SHAPE_PLAIN, TS_SHAPE_TORCH } ts_shape_style;

/* Longest text ts_shape_format can produce, with its terminator. */
#define TS_SHAPE_TEXT_MAX 160

/* Give t the row-major (contiguous) strides of its shape. */
void ts_tensor_row_major(ts_tensor *t);

/* A contiguous (row-major) view of `data` with the given shape. */
ts_status ts_tensor_view(ts_tensor *out, float *data, int rank, const int64_t *shape);

/* Allocate a contiguous tensor of this shape from an arena (64-byte aligned). */
ts_status ts_tensor_alloc(ts_tensor *out, ts_arena *arena, int rank, const int64_t *shape);

int64_t ts_tensor_numel(const ts_tensor *t);
bool ts_tensor_is_contiguous(const ts_tensor *t);
bool ts_tensor_same_shape(const ts_tensor *a, const ts_tensor *b);

/* Element at a multi-index (rank entries); for tests and tools, not hot loops. */
float ts_tensor_get(const ts_tensor *t, const int64_t *index);

/* A view with a new shape. One entry may be -1 (inferred). Works whenever
 * PyTorch's .view() would: always for contiguous tensors, and for strided ones
 * when the dims being merged or split are laid out contiguously together. */
ts_status ts_tensor_reshape(ts_tensor *out, const ts_tensor *in, int rank, const int64_t *shape);

/* out.shape[i] = in.shape[perm[i]]: a view, no copy. */
ts_status ts_tensor_permute(ts_tensor *out, const ts_tensor *in, const int *perm);

/* Swap two dims: a view, no copy. */
ts_status ts_tensor_transpose(ts_tensor *out, const ts_tensor *in, int dim0, int dim1);

/* Elements [start, start + length) along dim: a view, no copy. */
ts_status ts_tensor_slice(ts_tensor *out, const ts_tensor *in, int dim, int64_t start, int64_t length);

/* Split dim into n_chunks pieces as torch.chunk does: each ceil(size / n) long,
 * the last one shorter. Writes *n_out views into out[] (at most n_chunks). */
ts_status ts_tensor_chunk(ts_tensor *out, int *n_out, const ts_tensor *in, int n_chunks, int dim);

/* Copy src's elements, in row-major order of src's shape, into dst (which must
 * have the same shape; dst may be strided too). */
ts_status ts_tensor_copy(ts_tensor *dst, const ts_tensor *src);

/* A contiguous tensor with in's values: in itself when already contiguous,
 * otherwise a copy allocated from the arena. */
ts_status ts_tensor_contiguous(ts_tensor *out, const ts_tensor *in, ts_arena *arena);

/* Write "[30, 200, 512]" or "torch.Size([30, 200, 512])" into buf; returns buf. */
char *ts_shape_format(char *buf, size_t size, int rank, const int64_t *shape, ts_shape_style style);

/* Same for a tensor's shape. */
char *ts_tensor_shape_str(char *buf, size_t size, const ts_tensor *t, ts_shape_style style);

#endif
