/* io: files in and out. Output files written atomically, NumPy .npy and
 * .npz arrays, safetensors checkpoints, and loading a model's weights from
 * one. The model itself knows nothing of files; this is where it meets them.
 */
#ifndef TSCOPE_IO_H
#define TSCOPE_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tscope/core.h"
#include "tscope/model.h"
#include "tscope/tokenizer.h"

/* outfile: write a file under a temporary name, then rename it into place.
 *
 * A reader never sees half a checkpoint or half an archive: bytes go to
 * "PATH.XXXXXX" in the same directory, and only ts_outfile_commit (flush,
 * fsync, rename) makes them appear as PATH. Errors are sticky: after the first
 * failed write every later call returns the same status, so a writer can check
 * once at the end. Every message names PATH, not the temporary name.
 */

typedef struct ts_outfile {
    FILE *fp;        /* the temporary file; NULL once committed or aborted */
    char *path;      /* final name (owned) */
    char *tmp_path;  /* temporary name (owned) */
    uint64_t offset; /* bytes written so far = where the next write lands */
    ts_sticky err;    /* the first failure, replayed by later calls */
} ts_outfile;

/* Create the temporary file next to path. */
ts_status ts_outfile_open(ts_outfile *o, const char *path);

/* Append n bytes. */
ts_status ts_outfile_write(ts_outfile *o, const void *buf, size_t n);

/* Append t's elements as little-endian float32 in row-major order of its
 * shape (t may be a strided view). */
ts_status ts_outfile_write_tensor(ts_outfile *o, const ts_tensor *t);

/* Flush, fsync, close and rename to the final name. On any failure (now or
 * earlier) the temporary file is removed and the error returned. Frees o. */
ts_status ts_outfile_commit(ts_outfile *o);

/* Close and remove the temporary file; nothing appears at path. Frees o.
 * Safe on a zeroed, committed or already aborted outfile. */
void ts_outfile_abort(ts_outfile *o);

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

/* npz: NumPy's .npz archives (a zip of .npy files), written as a stream.
 *
 *     ts_npz z;
 *     ts_npz_open(&z, "trace.npz");
 *     ts_npz_add(&z, "encoder.layers.0.self_attn.weights", &t);  // -> member "....npy"
 *     ts_npz_close(&z);        // central directory, then rename into place
 *
 * Members are stored (no compression) with their CRC-32, so np.load reads them
 * directly. Archives past the classic zip limits (4 GiB, 65535 members) get
 * zip64 records. Nothing appears at the path until ts_npz_close succeeds; on
 * any error the temporary file is removed.
 */

typedef struct ts_npz_member {
    char *name;      /* member name, "<array name>.npy" (owned) */
    uint64_t offset; /* of its local header */
    uint64_t size;   /* bytes of .npy data */
    uint32_t crc;
} ts_npz_member;

typedef struct ts_npz {
    ts_outfile out;
    ts_npz_member *members;
    int64_t count, cap;
    int64_t *slots;      /* open-addressing set of member indices + 1, to refuse duplicates */
    int64_t n_slots;
    uint16_t dos_time, dos_date;
    bool force_zip64;    /* write zip64 records even when small (for tests) */
} ts_npz;

ts_status ts_npz_open(ts_npz *z, const char *path);

/* Append t (any strides) as float32 member `name` + ".npy". Names must be
 * unique and non-empty. */
ts_status ts_npz_add(ts_npz *z, const char *name, const ts_tensor *t);

/* Write the central directory and rename into place. Frees z, also on error. */
ts_status ts_npz_close(ts_npz *z);

/* Give up: remove the temporary file. Frees z. */
void ts_npz_abort(ts_npz *z);

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

/* model_load: a model's weights and inputs from files (--load, --input, --target).
 *
 * The model never knows about files (docs/architecture.md); this module sits between:
 * it reads checkpoints (safetensors) and arrays (npy) and hands the
 * model tensors in PyTorch's layout, with messages that name the file.
 */

/* Copy every tensor of a safetensors file into the model's parameters, by
 * PyTorch state_dict name (nn.Transformer's, nn.TransformerEncoder's or a lone
 * nn.MultiheadAttention's; see ts_model_find_param). `prefix`, when not NULL,
 * goes before each name in the file, as when loading a submodule's state_dict
 * ("decoder.layers.0." for an nn.TransformerDecoderLayer). As PyTorch's strict
 * load_state_dict: every parameter must come from the file and every tensor
 * of the file must be a parameter. A missing tensor lists what the file has;
 * a wrong shape names the tensor, the file and both shapes. */
ts_status ts_model_load_safetensors(ts_model *m, const char *path, const char *prefix);

/* Read --input X.npy (B, S, W) and, when target_path is not NULL, --target
 * Y.npy (B, T, D) as already-embedded vectors, and make cfg fit them: batch,
 * seq and tgt_seq come from the files, input becomes TS_INPUT_EMBEDDED. W must
 * be cfg's in_dim (or d_model when in_dim is 0); a target needs an
 * encoder-decoder. x and y (y may be NULL without a target) are freed with
 * ts_npy_free. */
ts_status ts_model_read_embedded(ts_model_config *cfg, const char *input_path, const char *target_path,
                                 ts_npy *x, ts_npy *y);

/* config_json: a model config as a JSON object and back, every field by
 * name ("arch": "encoder", "d_model": 128, ...), each setting spelled with
 * the model's own words. Checkpoints keep it in their metadata ("config") so
 * a model is built again without flags. Reading checks every field and then
 * the config (ts_model_config_check); a name this tscope does not know is a
 * format error naming the field. */
char *ts_model_config_to_json(const ts_model_config *cfg); /* malloc'd; NULL when out of memory */
ts_status ts_model_config_from_json(const char *json, ts_model_config *cfg);

/* checkpoint: a language model as `tscope train --task lm` saves it: the
 * weights, and in __metadata__ everything needed to use it without flags:
 * "config" (ts_model_config_to_json), "tokenizer" (ts_lmtok_to_json), and
 * "task": "lm", "steps", "heldout_loss", "heldout_bits_per_char", "corpus".
 * Read back: the config and the tokenizer (either pointer may be NULL). A
 * file without them is refused, saying what it lacks. */
ts_status ts_lm_checkpoint_read(const char *path, ts_model_config *cfg, ts_lmtok *tok);

/* Whether path is a safetensors file whose metadata says "task": "lm" (no
 * message when not). */
bool ts_lm_checkpoint_is(const char *path);

#endif
