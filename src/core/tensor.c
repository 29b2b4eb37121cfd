/* tensor: views with a shape and strides; reshape, permute, chunk and their
 * checks, the way PyTorch sees them (core.h, "tensor"). */
#include "tscope/core.h"

#include <stdio.h>
#include <string.h>

/* Python-style dim: -1 is the last. Returns -1 when out of range. */
static int normalize_dim(int dim, int rank) {
    if (dim < 0) dim += rank;
    return (dim >= 0 && dim < rank) ? dim : -1;
}

static ts_status check_rank(int rank) {
    if (rank < 0 || rank > TS_MAX_RANK)
        return ts_fail(TS_ERR_SHAPE, "rank %d is not supported (tscope tensors have at most %d dims)",
                       rank, TS_MAX_RANK);
    return TS_OK;
}

static ts_status bad_dim(const ts_tensor *t, int dim, const char *what) {
    char s[TS_SHAPE_TEXT_MAX];
    return ts_fail(TS_ERR_SHAPE, "%s: dim %d is out of range for %s (valid: %d..%d)", what, dim,
                   ts_tensor_shape_str(s, sizeof s, t, TS_SHAPE_PLAIN), -t->rank, t->rank - 1);
}

static int64_t shape_numel(int rank, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= shape[i];
    return n;
}

void ts_tensor_row_major(ts_tensor *t) {
    int64_t s = 1;
    for (int i = t->rank - 1; i >= 0; i--) {
        t->stride[i] = s;
        s *= t->shape[i];
    }
}

ts_status ts_tensor_view(ts_tensor *out, float *data, int rank, const int64_t *shape) {
    ts_status st = check_rank(rank);
    if (st) return st;
    memset(out, 0, sizeof *out);
    for (int i = 0; i < rank; i++)
        if (shape[i] < 0) return ts_fail(TS_ERR_SHAPE, "negative size %lld in dim %d", (long long)shape[i], i);
    out->data = data;
    out->rank = rank;
    if (rank > 0) memcpy(out->shape, shape, (size_t)rank * sizeof *shape); /* a scalar may pass NULL */
    ts_tensor_row_major(out);
    return TS_OK;
}

ts_status ts_tensor_alloc(ts_tensor *out, ts_arena *arena, int rank, const int64_t *shape) {
    ts_status st = ts_tensor_view(out, NULL, rank, shape);
    if (st) return st;
    out->data = ts_arena_alloc(arena, (size_t)ts_tensor_numel(out) * sizeof(float));
    if (!out->data && ts_tensor_numel(out) > 0) return TS_ERR_NOMEM;
    return TS_OK;
}

int64_t ts_tensor_numel(const ts_tensor *t) { return shape_numel(t->rank, t->shape); }

bool ts_tensor_is_contiguous(const ts_tensor *t) {
    int64_t s = 1;
    for (int i = t->rank - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != s) return false;
        s *= t->shape[i];
    }
    return true;
}

bool ts_tensor_same_shape(const ts_tensor *a, const ts_tensor *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

float ts_tensor_get(const ts_tensor *t, const int64_t *index) {
    int64_t off = 0;
    for (int i = 0; i < t->rank; i++) off += index[i] * t->stride[i];
    return t->data[off];
}

/* Resolve one -1 entry of a requested shape against a known element count. */
static ts_status infer_shape(int64_t *shape, int rank, int64_t numel, const ts_tensor *in,
                             const int64_t *requested) {
    int infer_at = -1;
    int64_t known = 1;
    for (int i = 0; i < rank; i++) {
        if (shape[i] == -1) {
            if (infer_at >= 0) return ts_fail(TS_ERR_SHAPE, "only one dim of a reshape can be -1");
            infer_at = i;
        } else if (shape[i] < 0) {
            return ts_fail(TS_ERR_SHAPE, "invalid size %lld in a reshape", (long long)shape[i]);
        } else {
            known *= shape[i];
        }
    }
    if (infer_at < 0) return TS_OK;
    if (known == 0 || numel % known != 0) {
        char a[TS_SHAPE_TEXT_MAX], b[TS_SHAPE_TEXT_MAX];
        return ts_fail(TS_ERR_SHAPE, "cannot reshape %s to %s: %lld elements do not divide by %lld",
                       ts_tensor_shape_str(a, sizeof a, in, TS_SHAPE_PLAIN),
                       ts_shape_format(b, sizeof b, rank, requested, TS_SHAPE_PLAIN), (long long)numel,
                       (long long)known);
    }
    shape[infer_at] = numel / known;
    return TS_OK;
}

/* Strides that let `shape` view the memory of `in` without a copy, following
 * the rule PyTorch's view() uses: walk the old dims from the innermost, group
 * those that are contiguous with each other, and fill each group with new dims
 * of the same element count. Returns false when a group cannot be matched. */
static bool view_strides(const ts_tensor *in, int rank, const int64_t *shape, int64_t *stride) {
    if (in->rank == 0) { /* a scalar: every new dim has size 1 */
        for (int i = 0; i < rank; i++) stride[i] = 1;
        return true;
    }
    int view_d = rank - 1;
    int64_t chunk_base_stride = in->stride[in->rank - 1];
    int64_t tensor_numel = 1, view_numel = 1;
    for (int d = in->rank - 1; d >= 0; d--) {
        tensor_numel *= in->shape[d];
        bool chunk_ends = d == 0 || (in->shape[d - 1] != 1 &&
                                     in->stride[d - 1] != tensor_numel * chunk_base_stride);
        if (!chunk_ends) continue;
        while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
            stride[view_d] = view_numel * chunk_base_stride;
            view_numel *= shape[view_d];
            view_d--;
        }
        if (view_numel != tensor_numel) return false;
        if (d > 0) {
            chunk_base_stride = in->stride[d - 1];
            tensor_numel = 1;
            view_numel = 1;
        }
    }
    return view_d == -1;
}

ts_status ts_tensor_reshape(ts_tensor *out, const ts_tensor *in, int rank, const int64_t *shape) {
    ts_status st = check_rank(rank);
    if (st) return st;
    int64_t resolved[TS_MAX_RANK];
    if (rank > 0) memcpy(resolved, shape, (size_t)rank * sizeof *shape);
    int64_t numel = ts_tensor_numel(in);
    if ((st = infer_shape(resolved, rank, numel, in, shape))) return st;

    char a[TS_SHAPE_TEXT_MAX], b[TS_SHAPE_TEXT_MAX];
    int64_t want = shape_numel(rank, resolved);
    if (want != numel)
        return ts_fail(TS_ERR_SHAPE, "cannot reshape %s to %s: %lld elements vs %lld",
                       ts_tensor_shape_str(a, sizeof a, in, TS_SHAPE_PLAIN),
                       ts_shape_format(b, sizeof b, rank, resolved, TS_SHAPE_PLAIN), (long long)numel,
                       (long long)want);

    ts_tensor v = {.data = in->data, .rank = rank};
    if (rank > 0) memcpy(v.shape, resolved, (size_t)rank * sizeof *resolved);
    if (numel == 0) {
        ts_tensor_row_major(&v);
    } else if (!view_strides(in, rank, resolved, v.stride)) {
        return ts_fail(TS_ERR_SHAPE,
                       "cannot view %s as %s without a copy: the dims it merges are not next to each "
                       "other in memory (after a permute or transpose); make it contiguous first",
                       ts_tensor_shape_str(a, sizeof a, in, TS_SHAPE_PLAIN),
                       ts_shape_format(b, sizeof b, rank, resolved, TS_SHAPE_PLAIN));
    }
    *out = v;
    return TS_OK;
}

ts_status ts_tensor_permute(ts_tensor *out, const ts_tensor *in, const int *perm) {
    bool seen[TS_MAX_RANK] = {false};
    ts_tensor v = *in;
    for (int i = 0; i < in->rank; i++) {
        int d = normalize_dim(perm[i], in->rank);
        if (d < 0) return bad_dim(in, perm[i], "permute");
        if (seen[d]) return ts_fail(TS_ERR_SHAPE, "permute: dim %d appears twice", d);
        seen[d] = true;
        v.shape[i] = in->shape[d];
        v.stride[i] = in->stride[d];
    }
    *out = v;
    return TS_OK;
}

ts_status ts_tensor_transpose(ts_tensor *out, const ts_tensor *in, int dim0, int dim1) {
    int a = normalize_dim(dim0, in->rank), b = normalize_dim(dim1, in->rank);
    if (a < 0) return bad_dim(in, dim0, "transpose");
    if (b < 0) return bad_dim(in, dim1, "transpose");
    int perm[TS_MAX_RANK];
    for (int i = 0; i < in->rank; i++) perm[i] = i;
    perm[a] = b;
    perm[b] = a;
    return ts_tensor_permute(out, in, perm);
}

ts_status ts_tensor_slice(ts_tensor *out, const ts_tensor *in, int dim, int64_t start, int64_t length) {
    int d = normalize_dim(dim, in->rank);
    if (d < 0) return bad_dim(in, dim, "slice");
    if (start < 0 || length < 0 || start + length > in->shape[d]) {
        char s[TS_SHAPE_TEXT_MAX];
        return ts_fail(TS_ERR_SHAPE, "slice [%lld, %lld) of dim %d is outside %s", (long long)start,
                       (long long)(start + length), d, ts_tensor_shape_str(s, sizeof s, in, TS_SHAPE_PLAIN));
    }
    ts_tensor v = *in;
    v.data = in->data + start * in->stride[d];
    v.shape[d] = length;
    *out = v;
    return TS_OK;
}

ts_status ts_tensor_chunk(ts_tensor *out, int *n_out, const ts_tensor *in, int n_chunks, int dim) {
    int d = normalize_dim(dim, in->rank);
    if (d < 0) return bad_dim(in, dim, "chunk");
    if (n_chunks <= 0) return ts_fail(TS_ERR_ARG, "chunk: the number of chunks must be positive, not %d", n_chunks);
    int64_t size = in->shape[d];
    if (size == 0) { /* torch.chunk of an empty dim gives one empty piece */
        *n_out = 1;
        return ts_tensor_slice(&out[0], in, d, 0, 0);
    }
    int64_t step = (size + n_chunks - 1) / n_chunks;
    int n = 0;
    for (int64_t start = 0; start < size; start += step, n++) {
        int64_t len = start + step <= size ? step : size - start;
        ts_status st = ts_tensor_slice(&out[n], in, d, start, len);
        if (st) return st;
    }
    *n_out = n;
    return TS_OK;
}

/* Visit every element of `t` in row-major order of its shape. */
typedef struct elem_cursor {
    int64_t index[TS_MAX_RANK];
    int64_t offset;
} elem_cursor;

static void cursor_next(elem_cursor *c, const ts_tensor *t) {
    for (int i = t->rank - 1; i >= 0; i--) {
        c->index[i]++;
        c->offset += t->stride[i];
        if (c->index[i] < t->shape[i]) return;
        c->offset -= c->index[i] * t->stride[i];
        c->index[i] = 0;
    }
}

ts_status ts_tensor_copy(ts_tensor *dst, const ts_tensor *src) {
    if (!ts_tensor_same_shape(dst, src)) {
        char a[TS_SHAPE_TEXT_MAX], b[TS_SHAPE_TEXT_MAX];
        return ts_fail(TS_ERR_SHAPE, "cannot copy %s into %s",
                       ts_tensor_shape_str(a, sizeof a, src, TS_SHAPE_PLAIN),
                       ts_tensor_shape_str(b, sizeof b, dst, TS_SHAPE_PLAIN));
    }
    int64_t n = ts_tensor_numel(src);
    if (ts_tensor_is_contiguous(src) && ts_tensor_is_contiguous(dst)) {
        memmove(dst->data, src->data, (size_t)n * sizeof(float));
        return TS_OK;
    }
    /* Copy whole innermost rows at a time: the inner loop is a strided run. */
    int last = src->rank - 1;
    int64_t row = src->rank ? src->shape[last] : 1;
    int64_t s_step = src->rank ? src->stride[last] : 1, d_step = dst->rank ? dst->stride[last] : 1;
    elem_cursor cs = {{0}, 0}, cd = {{0}, 0};
    ts_tensor src_outer = *src, dst_outer = *dst;
    if (src->rank) {
        src_outer.shape[last] = 1;
        dst_outer.shape[last] = 1;
    }
    for (int64_t done = 0; done < n; done += row) {
        const float *s = src->data + cs.offset;
        float *d = dst->data + cd.offset;
        for (int64_t j = 0; j < row; j++) d[j * d_step] = s[j * s_step];
        cursor_next(&cs, &src_outer);
        cursor_next(&cd, &dst_outer);
    }
    return TS_OK;
}

ts_status ts_tensor_contiguous(ts_tensor *out, const ts_tensor *in, ts_arena *arena) {
    if (ts_tensor_is_contiguous(in)) {
        ts_tensor v = *in;
        ts_tensor_row_major(&v);
        *out = v;
        return TS_OK;
    }
    ts_tensor c;
    ts_status st = ts_tensor_alloc(&c, arena, in->rank, in->shape);
    if (st) return st;
    if ((st = ts_tensor_copy(&c, in))) return st;
    *out = c;
    return TS_OK;
}

char *ts_shape_format(char *buf, size_t size, int rank, const int64_t *shape, ts_shape_style style) {
    size_t used = 0;
    const char *open = style == TS_SHAPE_TORCH ? "torch.Size([" : "[";
    const char *close = style == TS_SHAPE_TORCH ? "])" : "]";
    if (size == 0) return buf;
    buf[0] = '\0';
#define APPEND(...)                                                          \
    do {                                                                     \
        int w = snprintf(buf + used, size - used, __VA_ARGS__);              \
        if (w < 0 || (size_t)w >= size - used) return buf;                   \
        used += (size_t)w;                                                   \
    } while (0)
    APPEND("%s", open);
    for (int i = 0; i < rank; i++) APPEND(i ? ", %lld" : "%lld", (long long)shape[i]);
    APPEND("%s", close);
#undef APPEND
    return buf;
}

char *ts_tensor_shape_str(char *buf, size_t size, const ts_tensor *t, ts_shape_style style) {
    return ts_shape_format(buf, size, t->rank, t->shape, style);
}

ts_status ts_tensor_each_run(const ts_tensor *t, ts_tensor_run_fn fn, void *ctx) {
    int64_t n = ts_tensor_numel(t);
    if (n == 0) return TS_OK;
    if (ts_tensor_is_contiguous(t)) return fn(ctx, t->data, n);
    enum { CHUNK = 4096 };
    float buf[CHUNK];
    int last = t->rank - 1;
    int64_t row = t->shape[last], inner = t->stride[last];
    int64_t index[TS_MAX_RANK] = {0};
    for (int64_t done = 0; done < n; done += row) {
        int64_t base = 0;
        for (int i = 0; i < last; i++) base += index[i] * t->stride[i];
        for (int64_t j = 0; j < row; j += CHUNK) {
            int64_t m = row - j < CHUNK ? row - j : CHUNK;
            for (int64_t k = 0; k < m; k++) buf[k] = t->data[base + (j + k) * inner];
            ts_status st = fn(ctx, buf, m);
            if (st) return st;
        }
        for (int i = last - 1; i >= 0; i--) {
            if (++index[i] < t->shape[i]) break;
            index[i] = 0;
        }
    }
    return TS_OK;
}
