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
#include "tscope/kernels.h"
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

/* mkdir -p: dir and its parents (an export folder, a cache); an error names
 * the part that could not be made, or says dir is not a directory. */
ts_status ts_mkdir_p(const char *dir);

/* npy: NumPy's .npy arrays, read and written.
 *
 * A file is the magic "\x93NUMPY", a version (1.0, 2.0 or 3.0), a header
 * length (2 bytes in 1.0, 4 after), a Python dict literal
 * {'descr': '<f4', 'fortran_order': False, 'shape': (2, 5, 16), } and the
 * data. tscope reads little-endian float32, float64, int32, int64, int8,
 * uint8 and bool arrays in C order and hands them out as float32
 * (ts_npy_read) or as int64 ids (ts_npy_read_labels); anything else (big-endian, Fortran order, object
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
    bool made;                  /* converted holds the only values (q, k, v stacked by a name map) */
} ts_st_entry;

/* Codebases recognised by their names (name_map.c), or named by --layout. */
typedef enum ts_codebase {
    TS_CODEBASE_NONE,
    TS_CODEBASE_NANOGPT,    /* --layout nanogpt: exact GELU, eps 1e-5 */
    TS_CODEBASE_MINGPT,     /* --layout mingpt: minGPT today, tanh GELU (NewGELU), eps 1e-5 */
    TS_CODEBASE_MINGPT_OLD, /* tok_emb, pos_emb, blocks.N.attn.key: exact GELU (nn.GELU), eps 1e-5 */
    TS_CODEBASE_ANNOTATED,  /* src_embed.0.lut, sublayer.K.norm.a_2: its LayerNorm, eps 1e-6, pre-norm */
} ts_codebase;

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
    unsigned char *owned;       /* a torch.save file's tensors, copied (map is NULL then) */
    bool torch_pt;              /* read from a torch.save file (ts_torch_pt_open) */
    ts_codebase codebase;       /* recognised by its names and renamed (name_map.c) */
    int renamed;                /* names a --names map changed */
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

/* Free tensor `name`'s float32 copy, if ts_safetensors_get made one: a loader
 * that has placed the values keeps a large file's peak memory to one copy. A
 * later get converts again. */
void ts_safetensors_release(ts_safetensors *f, const char *name);

/* Tensor `name` (F32 or BF16, n elements) as float32 straight into dst (n):
 * the one pass a big checkpoint's load makes over its values, with no
 * float32 copy between the file and dst, widened on the kernel threads.
 * Returns false (dst untouched) for another dtype, a count that is not the
 * tensor's or a tensor made by a name map: ts_safetensors_get's way then. */
bool ts_safetensors_read_f32(ts_safetensors *f, const char *name, float *dst, int64_t n);

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

/* name maps: a checkpoint's names made names tscope reads (src/io/name_map.c).
 *
 * A map is lines `PATTERN -> NAME`: a POSIX extended regular expression that
 * must match a whole tensor name, and the name it becomes, \1 .. \9 standing
 * for the pattern's groups; NAME#q, NAME#k, NAME#v stack three tensors by rows
 * into NAME (q, k, v: nn.MultiheadAttention's in_proj, GPT-2's c_attn); "-"
 * drops a buffer the code recomputes. Blank lines and lines starting with #
 * are skipped. minGPT's older names and the Annotated Transformer's are
 * recognised and mapped by maps of the same kind; ts_safetensors_open applies
 * them, then the map ts_name_map_use gave (--names), to every file it opens,
 * and says which codebase it recognised in f->codebase.
 */
#define TS_NAME_MAP_MAX 256

typedef struct ts_name_map {
    struct ts_name_rule *rules;
    int count;
    char *path; /* for messages (owned) */
} ts_name_map;

/* Read and check every rule of a --names file (the regular expressions
 * compile, each \N names a group); nothing is held on failure. */
ts_status ts_name_map_read(ts_name_map *m, const char *path);
void ts_name_map_free(ts_name_map *m);
/* The map every later ts_safetensors_open applies (NULL: none); m must outlive them. */
void ts_name_map_use(const ts_name_map *m);
/* What ts_safetensors_open does with a file it opened: codebases, then --names. */
ts_status ts_name_map_apply_all(ts_safetensors *f);
/* "minGPT's older code", "the Annotated Transformer's code", ... */
const char *ts_codebase_name(ts_codebase c);

/* pickle: the subset of Python's pickle torch.save writes (src/io/pickle.c).
 *
 * Read into a tree of values, never executed: dicts (OrderedDict too),
 * lists, tuples, strings, bytes, numbers, None, and torch.save's tensors
 * (_rebuild_tensor_v2 over a storage, with offset, sizes and strides). A call
 * to any other global is kept as an opaque object named "module.name"; an
 * opcode outside the subset is a format error naming it and its offset.
 */

typedef enum ts_pk_kind {
    TS_PK_NONE, TS_PK_BOOL, TS_PK_INT, TS_PK_FLOAT, TS_PK_STR, TS_PK_BYTES, TS_PK_TUPLE, TS_PK_LIST, TS_PK_DICT,
    TS_PK_GLOBAL,  /* a global named but not called: s = "module.name" */
    TS_PK_OBJECT,  /* what calling a global other than torch.save's would build: s = its name */
    TS_PK_STORAGE, /* a storage: s = its key (member data/<key>), i = elements */
    TS_PK_TENSOR,
} ts_pk_kind;

typedef struct ts_pk {
    ts_pk_kind kind;
    int64_t i;               /* INT, BOOL; STORAGE: elements */
    double f;                /* FLOAT */
    char *s;                 /* STR, BYTES (NUL-terminated too), GLOBAL, OBJECT, STORAGE */
    size_t len;
    struct ts_pk **items;    /* TUPLE, LIST; DICT: key, value, key, value, ... */
    int64_t n, cap;
    ts_st_dtype dtype;       /* STORAGE */
    int elem_size;
    const char *dtype_name;  /* "F32", "BF16", ... */
    unsigned char *bytes;    /* STORAGE: its data once read (owned) */
    uint64_t n_bytes;
    const struct ts_pk *storage; /* TENSOR: element [i, j] is storage[offset + i*stride[0] + j*stride[1]] */
    int64_t offset;
    int rank;
    int64_t shape[TS_MAX_RANK], stride[TS_MAX_RANK];
    struct ts_pk *next;      /* every value, for freeing */
} ts_pk;

typedef struct ts_pickle {
    ts_pk *root;  /* what STOP returned */
    ts_pk *all;
} ts_pickle;

/* Parse size bytes; `what` names them in messages. On failure nothing is held. */
ts_status ts_pickle_parse(ts_pickle *p, const void *bytes, size_t size, const char *what);
void ts_pickle_free(ts_pickle *p);

/* The value of a dict's string key, or NULL. */
const ts_pk *ts_pk_get(const ts_pk *dict, const char *key);

/* A value's kind as words: "dict", "int", an object's "module.name". */
const char *ts_pk_kind_name(const ts_pk *v);

/* torch_pt: torch.save files (.pt, .pth, pytorch_model.bin) read through the
 * safetensors interface (src/io/torch_pt.c).
 *
 * A torch.save file is a zip archive (read with libzip): ARCHIVE/data.pkl, a
 * pickle of the object saved, and ARCHIVE/data/KEY, each storage's raw
 * little-endian bytes. ts_safetensors_open hands a file that starts as a zip
 * to ts_torch_pt_open, which finds the state_dict (the object itself, or a
 * dict holding it under "model", "state_dict" or "model_state_dict", the rest
 * of a training checkpoint left alone), and copies each tensor, whatever its
 * offset and strides, into one contiguous buffer in its stored dtype, so every
 * reader of ts_safetensors sees it as it sees a safetensors file. Scalar
 * entries of a "model_args" dict beside the state_dict (nanoGPT's) become
 * metadata "model_args.KEY"; "torch.state_dict" says where the state_dict was
 * ("model", or "" for the top level). Anything else, a pickled module, a
 * storage shorter than its tensors, a compressed or missing member, is one
 * message naming the file and the problem.
 */
bool ts_torch_pt_is(const char *path); /* the file starts as a zip archive */
ts_status ts_torch_pt_open(ts_safetensors *f, const char *path);

/* model_meta: a model's configuration as JSON, and what a checkpoint's
 * __metadata__ says (src/io/model_meta.c).
 *
 * tscope writes "format": "tscope" and "config": ts_model_config_json into
 * every checkpoint it saves (ts_train_save) and into every trace. Reading
 * back, the settings tensor shapes cannot tell come from that config, or from
 * flat keys anyone can add when saving from PyTorch: heads, norm (post|pre)
 * or norm_first (True|False), activation, pe, eps or layer_norm_eps, pe_variant.
 */

/* The config as a JSON object (malloc'd text, NULL when out of memory):
 * ts_model_config_to_json's keys and a run's "tgt_mask", "train_mode" and
 * "text" (written by the same function, src/io/config_json.c). */
char *ts_model_config_json(const ts_model_config *cfg);

/* What tensor shapes cannot tell, each with its flag. */
typedef enum ts_model_setting {
    TS_SETTING_HEADS,
    TS_SETTING_NORM,
    TS_SETTING_ACTIVATION,
    TS_SETTING_PE,
    TS_SETTING_EPS,
    TS_SETTING_PE_VARIANT,
    TS_SETTING_COUNT
} ts_model_setting;

const char *ts_model_setting_flag(ts_model_setting s); /* "--heads", ... */
const char *ts_model_setting_key(ts_model_setting s);  /* "heads", ... as __metadata__ spells it */

/* Read the settings f's __metadata__ gives into cfg; from_meta[s] tells which.
 * *scale_known: tscope's config also said whether token embeddings are scaled
 * by sqrt(d_model) (cfg->scale_embed). A value that does not parse is
 * TS_ERR_FORMAT naming the file and the key. */
ts_status ts_model_meta_settings(const ts_safetensors *f, ts_model_config *cfg, bool from_meta[TS_SETTING_COUNT],
                                 bool *scale_known);

/* model_infer: the model a checkpoint holds, from its tensor names and shapes
 * (src/io/model_infer.c).
 *
 * A checkpoint names its tensors after the module that saved it. A layout is
 * a table of name rules from a family of checkpoints to tscope's names
 * (which are nn.Transformer's state_dict names, plus embed.*, generator.*,
 * classifier.*): nn.Transformer (and tscope's own files), nn.TransformerEncoder,
 * nn.TransformerEncoderLayer, nn.MultiheadAttention; a lone decoder stack is
 * recognised and refused with the reason. The layout that explains the most
 * names wins; a wrapper's prefix ("model.", "backbone.") is stripped first
 * when given, and suggested when it would make the names readable.
 */

/* Sizes the tensors decide, each with how the file shows it. */
typedef enum ts_weights_fact {
    TS_FACT_ARCH,
    TS_FACT_D_MODEL,
    TS_FACT_FFN,
    TS_FACT_LAYERS,
    TS_FACT_DEC_LAYERS,
    TS_FACT_FINAL_NORM,
    TS_FACT_INPUT,      /* a token table, or vectors */
    TS_FACT_VOCAB,
    TS_FACT_HEAD,       /* generator.* (vocabulary logits), classifier.*, or none */
    TS_FACT_POSITIONS,  /* a learned position table and its rows */
    TS_FACT_IN_DIM,     /* the lone attention's input width */
    TS_FACT_COUNT
} ts_weights_fact;

/* Where a setting of ts_weights_info comes from. */
typedef enum ts_setting_source {
    TS_SOURCE_NONE,     /* nowhere: the user must give the flag */
    TS_SOURCE_DEFAULT,  /* PyTorch's default or the layout's convention; a flag may change it */
    TS_SOURCE_META,     /* the file's __metadata__: a flag that disagrees is an error */
    TS_SOURCE_SHAPES,   /* the tensors (a learned position table): likewise */
    TS_SOURCE_UNUSED,   /* the model has no use for it (--norm of a lone attention) */
    TS_SOURCE_CODE,     /* the code of a codebase recognised by its names; a flag may change it */
} ts_setting_source;

#define TS_LAYOUT_PREFIX_MAX 128
#define TS_WEIGHTS_WHY_MAX 192

typedef struct ts_weights_info {
    int layout;                           /* which layout (for the mapping functions below) */
    const char *layout_name;              /* "nn.TransformerEncoder" */
    char prefix[TS_LAYOUT_PREFIX_MAX];    /* stripped from every name ("" for none) */
    ts_model_config cfg;                  /* sizes from the tensors, settings from __metadata__ or defaults */
    char why[TS_FACT_COUNT][TS_WEIGHTS_WHY_MAX]; /* "layers.0.linear1.weight is [32, 16]" */
    ts_setting_source source[TS_SETTING_COUNT];
    bool scale_known;                     /* tscope's config said whether token embeddings are scaled */
    int n_tensors;                        /* in the file */
    int n_mapped;                         /* names the layout reads (the others are extra) */
    bool has_metadata;                    /* the file has a __metadata__ (a torch.save file has none) */
    bool torch_pt;                        /* the file is a torch.save archive */
    ts_codebase codebase;                 /* recognised by its names: its code gives the settings marked CODE */
} ts_weights_info;

/* Read f's names and shapes (and __metadata__) into info. prefix: stripped
 * from every name, or NULL. Errors name the file: no layout explains the
 * names (with a --load-prefix suggestion when one would), a layout tscope
 * cannot run, stacks that disagree (a final norm on one only). Sizes are
 * checked tensor by tensor when the weights load. */
ts_status ts_weights_infer(const ts_safetensors *f, const char *prefix, ts_weights_info *info);

/* model_settings: the settings a state_dict leaves open, given by the
 * caller (run's flags, Python's keywords), decided in one place so both
 * say the same sentence (src/io/model_settings.c). */

/* A setting's value as words ("8", "pre", "gelu", "1e-05"), whether two
 * configs agree on it, and a copy of it from one to the other. */
const char *ts_model_setting_text(char *buf, size_t n, const ts_model_config *c, ts_model_setting s);
bool ts_model_setting_same(const ts_model_config *a, const ts_model_config *b, ts_model_setting s);
void ts_model_setting_copy(ts_model_config *to, const ts_model_config *from, ts_model_setting s);
/* value (as __metadata__ or a keyword spells it) into cfg; false, with what
 * was expected in *want ("post or pre"), when it does not parse. */
bool ts_model_setting_parse(ts_model_setting s, const char *value, ts_model_config *cfg, const char **want);

/* Why w fixes setting s: "W's __metadata__ says heads 2", "W has a learned position table (...)". */
void ts_weights_fixed_by(char *buf, size_t n, const ts_weights_info *w, ts_model_setting s, const char *path);

/* given's value of s may be given for w: not when w fixes it otherwise (its
 * __metadata__, a learned position table), nor when the model has no use
 * for it (a lone attention's norm), nor --pe learned without a table. */
ts_status ts_weights_check_setting(const ts_weights_info *w, const char *path, const ts_model_config *given,
                                   ts_model_setting s);

/* Once every source has spoken (known[s]: the file, a preset or the caller
 * gave s): a setting nobody gave is an error naming the flags to give, and
 * heads that do not divide d_model an error naming the heads that do. */
ts_status ts_weights_settings_complete(const ts_weights_info *w, const char *path, const bool known[TS_SETTING_COUNT],
                                       const ts_model_config *cfg, bool heads_given, bool ask_mask);

/* Name translation under a layout: a file's name (prefix included) to
 * tscope's parameter name, and back. False when the layout has no rule. */
bool ts_weights_model_name(const ts_weights_info *info, const char *file_name, char *out, size_t size);
bool ts_weights_file_name(const ts_weights_info *info, const char *model_name, char *out, size_t size);

/* model_load: a model's weights and inputs from files (--load, --input, --target,
 * the padding masks).
 *
 * The model never knows about files (docs/architecture.md); this module sits between:
 * it reads checkpoints (safetensors) and arrays (npy) and hands the
 * model tensors in PyTorch's layout, with messages that name the file.
 */

typedef struct ts_load_options {
    const ts_weights_info *info; /* the file's layout and prefix (ts_weights_infer), or NULL: names as they are */
    const char *into;            /* with info NULL: put before each name, to load a submodule's state_dict
                                  * into the model ("decoder.layers.0." for an nn.TransformerDecoderLayer) */
    bool ignore_extra;           /* skip tensors with no place in the model (listed in the report) */
    const char *layout;          /* GPT-2-named files (ts_gpt2_*, ts_lm_checkpoint_*): "hf" (Conv1D, (in, out)),
                                  * "nanogpt" or "mingpt" (nn.Linear, (out, in)), as --layout asks; NULL: as the
                                  * file says */
    int heads;                   /* --heads for a GPT-2-named state_dict that does not say them (0: not given) */
    const char *activation;      /* --activation for one (NULL: its code's, its config's) */
    ts_dtype dtype;              /* ts_lm_checkpoint_open: how the model reads its weight matrices (--dtype) */
} ts_load_options;

#define TS_LOAD_LIST_MAX 1024

typedef struct ts_load_report {
    int loaded;                       /* tensors copied into parameters */
    int skipped;                      /* tensors with no place, skipped (ignore_extra) */
    char skipped_names[TS_LOAD_LIST_MAX]; /* the file's names, "a, b, ... (N more)" */
} ts_load_report;

/* Copy f's tensors into m's parameters, as PyTorch's strict load_state_dict:
 * every parameter must come from the file, and every tensor of the file must
 * be a parameter unless ignore_extra. F16, BF16 and F64 tensors are converted.
 * Messages use the file's names: a tensor with no place ("... has no place in
 * this model", with the flag that would make room, or --ignore-extra), a
 * missing one (under the name the file should have), a wrong shape (both
 * shapes). report may be NULL. */
ts_status ts_model_load_weights(ts_model *m, ts_safetensors *f, const ts_load_options *o, ts_load_report *report);

/* Open path and ts_model_load_weights with names as they are (after
 * ts_model_find_param's aliases: nn.TransformerEncoder's "layers.0.…", a lone
 * nn.MultiheadAttention's "in_proj_weight"); `prefix`, when not NULL, goes
 * before each name as ts_load_options.into. */
ts_status ts_model_load_safetensors(ts_model *m, const char *path, const char *prefix);

/* Read --input X.npy or --target Y.npy: a (B, S, W) float array (float64 and
 * integers are converted). The width is the caller's to check. Freed with
 * ts_npy_free. */
ts_status ts_model_read_vectors(const char *path, const char *flag, ts_npy *out);

/* Read a padding mask given as `flag` (--src-key-padding-mask ...): a (B, S)
 * array of bools or 0/1 (True = padding, PyTorch's key_padding_mask), or (B)
 * lengths (positions from the length on are padding). *pads (B*S, owned, 1 =
 * pad) is freed with free(). A wrong shape or a value other than 0/1 is an
 * error naming the file and the sizes the model reads. */
ts_status ts_model_read_pad_mask(const char *path, const char *flag, int B, int S, uint8_t **pads);

/* Read --ids for a language model: a batch (B, S) of ids, or one sequence
 * (S), every one in [0, vocab). ids (B * S) is freed with ts_bpe_ids_free. */
ts_status ts_lm_read_ids(const char *path, int vocab, ts_bpe_ids *ids, int *B);

/* Read --token-types for the ids (B, S) of a model with type_vocab token
 * types (BERT's token_type_ids): the same shape ((S) for one sequence),
 * every value in [0, type_vocab). *types (B * S) is freed with free(). */
ts_status ts_lm_read_token_types(const char *path, int type_vocab, int B, int S, int32_t **types);

/* config_json: a model config as a JSON object and back, every field by
 * name ("arch": "encoder", "d_model": 128, ...), each setting spelled with
 * the model's own words. Checkpoints keep it in their metadata ("config") so
 * a model is built again without flags. Reading checks every field and then
 * the config (ts_model_config_check); a name this tscope does not know is a
 * format error naming the field. */
char *ts_model_config_to_json(const ts_model_config *cfg); /* malloc'd; NULL when out of memory */
ts_status ts_model_config_from_json(const char *json, ts_model_config *cfg);
/* The optional keys of a config that change the arithmetic ("variant",
 * "norm_formula", "mask_fill"), read from the parsed object o into cfg; what
 * names the object in errors. */
ts_status ts_model_config_read_quirks(const struct cJSON *o, const char *what, ts_model_config *cfg);

/* checkpoint: a language model as `tscope train --task lm` saves it: the
 * weights, and in __metadata__ everything needed to use it without flags:
 * "config" (ts_model_config_to_json), "tokenizer" (ts_lmtok_to_json), and
 * "task": "lm", "steps", "heldout_loss", "heldout_bits_per_char", "corpus".
 * Read back: the config and the tokenizer (either pointer may be NULL). A
 * file without them is refused, saying what it lacks. GPT-2-named files
 * (ts_gpt2_is) may have no tokenizer (no meta.pkl or vocabulary beside them,
 * and not GPT-2's 50257 tokens): tok->count is then 0, and the model reads
 * ids only. o (may be NULL) gives such a file's layout (o->layout, --layout);
 * the functions below take it likewise. */
ts_status ts_lm_checkpoint_read(const char *path, const ts_load_options *o, ts_model_config *cfg, ts_lmtok *tok);

/* Whether path is a safetensors file whose metadata says "task": "lm", or
 * GPT-2's own checkpoint or nanoGPT's (ts_gpt2_is): a language model that
 * brings its config (no message when not). */
bool ts_lm_checkpoint_is(const char *path);

/* The language model's weights into m, built from ts_lm_checkpoint_read's
 * config: tscope's names, or GPT-2's layout (ts_gpt2_load). */
ts_status ts_lm_checkpoint_load(ts_model *m, const char *path, const ts_load_options *o);

/* Both at once: the model of the checkpoint at path built for batch B and
 * S positions (S <= 0: the longest context it learnt), no dropout, its
 * weights loaded, and its tokenizer in tok. More positions than a learned
 * table has are refused. On failure m and tok are left freed. */
ts_status ts_lm_checkpoint_open(const char *path, const ts_load_options *o, int B, int S, ts_model *m, ts_lmtok *tok);

/* A run's training state, in a file beside its checkpoint (PATH.state, a
 * safetensors file): the optimizer's moments "optim.m" and "optim.v", its
 * step count, and the caller's key/value pairs (the step reached, the
 * schedule, the data's fingerprint), so that `train --resume` goes on exactly
 * where the run stopped. Written to a temporary file, then renamed. */
ts_status ts_optim_state_save(const char *path, const ts_optim *opt, int n_meta, const char *const *meta);
/* Read the state file f (opened by the caller, who reads its own pairs with
 * ts_safetensors_meta) into opt, initialised with the same config and size. */
ts_status ts_optim_state_load(ts_safetensors *f, ts_optim *opt);

/* ---- GPT-2 checkpoints (src/io/gpt2_load.c) ----------------------------------
 *
 * GPT-2's own files, loaded as they come: path is a .safetensors file or a
 * directory holding model.safetensors. Names wte, wpe, h.{i}.ln_1,
 * h.{i}.attn.c_attn, h.{i}.attn.c_proj, h.{i}.ln_2, h.{i}.mlp.c_fc,
 * h.{i}.mlp.c_proj, ln_f, optionally after "transformer.", and an optional
 * lm_head.weight (tied when it equals wte). Conv1D weights are stored (in,
 * out) and transposed on the way in; the attn.bias / attn.masked_bias
 * buffers are skipped; any other tensor is refused, named. Sizes come from
 * the shapes; heads, eps and the activation from config.json beside the
 * weights (n_head, layer_norm_epsilon, activation_function: gelu_new is
 * GELU's tanh form), whose sizes must agree with the tensors'; each value of
 * config.json is checked by type (ts_json_*). A directory may hold
 * pytorch_model.bin or ckpt.pt instead (torch.save files). ts_gpt2_is is
 * true for any directory, so that the loader, not a guess, says what is
 * wrong in it.
 *
 * nanoGPT's files use GPT-2's names with nn.Linear weights (out, in): its
 * ckpt.pt (path, or a directory holding it) brings model_args, which give
 * n_head, the sizes and bias (bias=False: zeros for every bias); its
 * activation is exact GELU, its eps 1e-5; "_orig_mod." (torch.compile) before
 * the names is taken off. The layout is the load options' (o->layout, from
 * --layout; o may be NULL), else nanoGPT's when the file has model_args, else
 * Hugging Face's when config.json is beside it; else an error asks for
 * --layout. The weights' shapes must agree with it where they can tell
 * (c_attn). Only o->layout is read from the options. */
bool ts_gpt2_is(const char *path);
/* arch decoder, seq = the context */
ts_status ts_gpt2_config(const char *path, const ts_load_options *o, ts_model_config *cfg);
ts_status ts_gpt2_load(ts_model *m, const char *path, const ts_load_options *o);
/* The layout path is read in under o: "hf" (Conv1D) or "nanogpt" (nn.Linear); NULL when it cannot be read. */
const char *ts_gpt2_layout_name(const char *path, const ts_load_options *o);
/* Where the settings shapes cannot tell came from, in words for the settings
 * line: "heads 4 from --heads, activation gelu from nanoGPT's code, eps 1e-05
 * from nanoGPT's code". */
void ts_gpt2_sources(const char *path, const ts_load_options *o, char *buf, size_t size);
/* The directory of path's vocabulary (encoder.json or vocab.json beside the
 * weights): true when there is one. */
bool ts_gpt2_vocab_dir(const char *path, char *dir, size_t size);

/* ---- Hugging Face folders (src/io/hf_load.c) -----------------------------------
 *
 * A folder as Hugging Face writes it, for model_type llama, mistral, qwen2,
 * gemma, gpt_neox and bert (gpt2's go through ts_gpt2_*): config.json, whose keys
 * give the blocks and sizes (hidden_size, num_hidden_layers,
 * num_attention_heads, num_key_value_heads, head_dim, intermediate_size,
 * rms_norm_eps / layer_norm_eps, rope_theta, rotary_pct, hidden_act,
 * tie_word_embeddings, attention_bias, use_parallel_residual, ...), and
 * model.safetensors, shards named by model.safetensors.index.json, or
 * pytorch_model.bin, in F32, F16 or BF16. Buffers the files carry and no
 * model needs (attention.bias, masked_bias, rotary_emb.inv_freq,
 * position_ids; BERT's pre-training pooler and next-sentence head) are
 * skipped by name; any other tensor the model does not
 * place is refused, named, and so is a missing one, a missing shard, and a
 * config key that changes the arithmetic in a way tscope does not compute
 * (rope_scaling, a sliding window in effect). */
bool ts_hf_is(const char *path);
/* The files a language model's tokenizer is read from beside path, in words for a message. */
const char *ts_lm_tokenizer_files(const char *path); /* a folder whose config.json names a model_type other than gpt2 */
ts_status ts_hf_config(const char *dir, ts_model_config *cfg);
ts_status ts_hf_load(ts_model *m, const char *dir);
/* What of a bert folder's files the model skips as unused (BERT's pre-training
 * pooler and next-sentence head), in words into `what`: false when nothing is. */
bool ts_hf_unused(const char *dir, char *what, size_t size);

#endif
