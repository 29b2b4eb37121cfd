/* safetensors: checkpoints in Hugging Face's format, read and written.
 *
 * A file is an 8-byte little-endian header length N, N bytes of JSON
 * ({"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]},
 * "__metadata__": {"key": "value"}}), then the tensors' bytes. Reading maps the
 * file and checks everything before any tensor is touched: the header length
 * against the file size, the JSON, each dtype, that each shape's size matches
 * its byte range, that the ranges stay inside the file, do not overlap and
 * leave no hole, that no name appears twice. F32 tensors are views into the
 * mapping (no copy; a copy only when the file puts one off 4-byte alignment);
 * F16, BF16 and F64 ones are converted to float32 on first use. Every
 * message names the file and, where it applies, the tensor.
 */
#ifndef TSCOPE_SAFETENSORS_H
#define TSCOPE_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tscope/status.h"
#include "tscope/tensor.h"

/* Largest JSON header accepted (the reference implementation's limit). */
#define TS_SAFETENSORS_MAX_HEADER 100000000u

typedef enum ts_st_dtype {
    TS_ST_F32, TS_ST_F16, TS_ST_BF16, TS_ST_F64,
    TS_ST_I64, TS_ST_I32, TS_ST_I16, TS_ST_I8, TS_ST_U8, TS_ST_BOOL, TS_ST_OTHER,
} ts_st_dtype;

typedef struct ts_st_entry {
    char *name;                 /* as in the header (owned) */
    ts_st_dtype dtype;
    char dtype_name[16];        /* as in the header: "F32", "I64", ... */
    int rank;
    int64_t shape[TS_MAX_RANK];
    uint64_t begin, end;        /* byte range inside the data section */
    float *converted;           /* float32 copy (owned), made on first use when needed */
} ts_st_entry;

typedef struct ts_safetensors {
    char *path;                 /* for messages (owned) */
    unsigned char *map;         /* the whole file, mapped read-only */
    size_t map_size;
    const unsigned char *data;  /* start of the data section */
    uint64_t data_size;
    ts_st_entry *entries;       /* in header order */
    int count;
    ts_st_entry **by_name;      /* the entries sorted by name, for lookup */
    char **meta;                /* __metadata__ as key, value, key, value, ... (owned) */
    int meta_count;             /* pairs */
} ts_safetensors;

/* Map and validate a file. On failure nothing is left open. */
ts_status ts_safetensors_open(ts_safetensors *f, const char *path);
void ts_safetensors_close(ts_safetensors *f);

/* The entry named `name`, or NULL (no message set). */
const ts_st_entry *ts_safetensors_find(const ts_safetensors *f, const char *name);

/* A float32 view of tensor `name`. A missing name is TS_ERR_ARG with a message
 * that lists what the file holds (and a near match when one looks likely);
 * a dtype tscope cannot convert is TS_ERR_UNSUPPORTED. */
ts_status ts_safetensors_get(ts_safetensors *f, const char *name, ts_tensor *view);

/* ts_safetensors_get, then check the shape: a mismatch is TS_ERR_SHAPE,
 * "tensor layers.0.norm1.weight has shape [16] in FILE, the model needs [32]". */
ts_status ts_safetensors_expect(ts_safetensors *f, const char *name, int rank, const int64_t *shape,
                                ts_tensor *view);

/* Write "a, b, c" (all names, header order) into buf, cut with ", ... (N more)"
 * when it does not fit. Returns buf. */
char *ts_safetensors_list(const ts_safetensors *f, char *buf, size_t size);

/* The value of a __metadata__ key, or NULL. */
const char *ts_safetensors_meta(const ts_safetensors *f, const char *key);

/* Write n float32 tensors (views may be strided) named names[i], with
 * n_meta metadata pairs meta[2*i] = key, meta[2*i+1] = value, atomically:
 * a temporary file renamed into place. Names must be unique and non-empty. */
ts_status ts_safetensors_write(const char *path, int n, const char *const *names,
                               const ts_tensor *tensors, int n_meta, const char *const *meta);

#endif
