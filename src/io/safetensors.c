/* safetensors: checkpoints in Hugging Face's format, read (mapped) and written. */
#include "tscope/io.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tscope/core.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian and read in place: tscope needs a little-endian host"
#endif

/* JSON numbers are doubles: integers above 2^53 cannot be exact. */
#define MAX_EXACT_INT 9007199254740992.0

typedef struct dtype_info {
    const char *name;
    ts_st_dtype dtype;
    int size;
} dtype_info;

static const dtype_info dtypes[] = {
    {"F32", TS_ST_F32, 4},   {"F16", TS_ST_F16, 2},   {"BF16", TS_ST_BF16, 2},
    {"F64", TS_ST_F64, 8},   {"I64", TS_ST_I64, 8},   {"I32", TS_ST_I32, 4},
    {"I16", TS_ST_I16, 2},   {"I8", TS_ST_I8, 1},     {"U8", TS_ST_U8, 1},
    {"BOOL", TS_ST_BOOL, 1}, {"U16", TS_ST_OTHER, 2}, {"U32", TS_ST_OTHER, 4},
    {"U64", TS_ST_OTHER, 8}, {"F8_E4M3", TS_ST_OTHER, 1}, {"F8_E5M2", TS_ST_OTHER, 1},
};

static const dtype_info *find_dtype(const char *name) {
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (strcmp(dtypes[i].name, name) == 0) return &dtypes[i];
    return NULL;
}

static int entry_elem_size(const ts_st_entry *e) {
    const dtype_info *info = find_dtype(e->dtype_name);
    return info ? info->size : 1;
}

/* ---- reading: the header ------------------------------------------------ */

static uint64_t read_u64_le(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* A JSON number that must be a non-negative integer below 2^53. */
static bool json_uint(const cJSON *item, uint64_t *out) {
    if (!cJSON_IsNumber(item)) return false;
    double d = item->valuedouble;
    if (!(d >= 0 && d <= MAX_EXACT_INT) || d != floor(d)) return false;
    *out = (uint64_t)d;
    return true;
}

static ts_status parse_shape(const ts_safetensors *f, const char *name, const cJSON *shape,
                             ts_st_entry *e) {
    if (!cJSON_IsArray(shape))
        return ts_fail(TS_ERR_FORMAT, "%s: tensor %s: \"shape\" is missing or not a list", f->path, name);
    int rank = cJSON_GetArraySize(shape);
    if (rank > TS_MAX_RANK)
        return ts_fail(TS_ERR_UNSUPPORTED, "%s: tensor %s has %d dims; tscope handles at most %d", f->path,
                       name, rank, TS_MAX_RANK);
    e->rank = rank;
    int i = 0;
    const cJSON *dim;
    cJSON_ArrayForEach(dim, shape) {
        uint64_t v;
        if (!json_uint(dim, &v))
            return ts_fail(TS_ERR_FORMAT, "%s: tensor %s: shape entry %d is not a non-negative integer",
                           f->path, name, i);
        e->shape[i++] = (int64_t)v;
    }
    return TS_OK;
}

/* Bytes the shape needs at this dtype, or false when it overflows. */
static bool shape_bytes(const ts_st_entry *e, int elem_size, uint64_t *bytes) {
    double limit = MAX_EXACT_INT;
    uint64_t n = (uint64_t)elem_size;
    for (int i = 0; i < e->rank; i++) {
        uint64_t d = (uint64_t)e->shape[i];
        if (d != 0 && (double)n * (double)d > limit) return false;
        n *= d;
    }
    *bytes = n;
    return true;
}

static ts_status parse_entry(const ts_safetensors *f, const cJSON *item, ts_st_entry *e) {
    const char *name = item->string;
    if (!cJSON_IsObject(item))
        return ts_fail(TS_ERR_FORMAT, "%s: tensor %s: its header entry is not an object", f->path, name);
    if (name[0] == '\0') return ts_fail(TS_ERR_FORMAT, "%s: a tensor has an empty name", f->path);
    e->name = strdup(name);
    if (!e->name) return ts_fail(TS_ERR_NOMEM, "%s: out of memory", f->path);

    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    if (!cJSON_IsString(dtype))
        return ts_fail(TS_ERR_FORMAT, "%s: tensor %s: \"dtype\" is missing or not a string", f->path, name);
    const dtype_info *info = find_dtype(dtype->valuestring);
    if (!info)
        return ts_fail(TS_ERR_FORMAT, "%s: tensor %s has unknown dtype \"%.20s\"", f->path, name,
                       dtype->valuestring);
    e->dtype = info->dtype;
    snprintf(e->dtype_name, sizeof e->dtype_name, "%s", info->name);

    ts_status st = parse_shape(f, name, cJSON_GetObjectItemCaseSensitive(item, "shape"), e);
    if (st) return st;

    const cJSON *offsets = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2 ||
        !json_uint(cJSON_GetArrayItem(offsets, 0), &e->begin) ||
        !json_uint(cJSON_GetArrayItem(offsets, 1), &e->end))
        return ts_fail(TS_ERR_FORMAT, "%s: tensor %s: \"data_offsets\" must be [begin, end], two "
                       "non-negative integers", f->path, name);
    if (e->end < e->begin)
        return ts_fail(TS_ERR_FORMAT, "%s: tensor %s: data_offsets [%llu, %llu] end before they begin",
                       f->path, name, (unsigned long long)e->begin, (unsigned long long)e->end);
    if (e->end > f->data_size)
        return ts_fail(TS_ERR_FORMAT, "%s: tensor %s: data_offsets [%llu, %llu] run past the end of "
                       "the data (%llu bytes): the file is truncated or its header is wrong",
                       f->path, name, (unsigned long long)e->begin, (unsigned long long)e->end,
                       (unsigned long long)f->data_size);
    uint64_t want;
    char s[TS_SHAPE_TEXT_MAX];
    if (!shape_bytes(e, info->size, &want))
        return ts_fail(TS_ERR_FORMAT, "%s: tensor %s: shape %s is too large", f->path, name,
                       ts_shape_format(s, sizeof s, e->rank, e->shape, TS_SHAPE_PLAIN));
    if (want != e->end - e->begin)
        return ts_fail(TS_ERR_FORMAT, "%s: tensor %s: shape %s of %s needs %llu bytes but data_offsets "
                       "[%llu, %llu] hold %llu", f->path, name,
                       ts_shape_format(s, sizeof s, e->rank, e->shape, TS_SHAPE_PLAIN), info->name,
                       (unsigned long long)want, (unsigned long long)e->begin,
                       (unsigned long long)e->end, (unsigned long long)(e->end - e->begin));
    return TS_OK;
}

static ts_status parse_metadata(ts_safetensors *f, const cJSON *meta) {
    if (!cJSON_IsObject(meta))
        return ts_fail(TS_ERR_FORMAT, "%s: __metadata__ must be an object of strings", f->path);
    int n = cJSON_GetArraySize(meta);
    f->meta = calloc((size_t)n * 2 + 1, sizeof *f->meta);
    if (!f->meta) return ts_fail(TS_ERR_NOMEM, "%s: out of memory", f->path);
    const cJSON *item;
    cJSON_ArrayForEach(item, meta) {
        if (!cJSON_IsString(item))
            return ts_fail(TS_ERR_FORMAT, "%s: __metadata__ value of \"%.60s\" is not a string", f->path,
                           item->string);
        char **kv = &f->meta[2 * f->meta_count];
        kv[0] = strdup(item->string);
        kv[1] = strdup(item->valuestring);
        f->meta_count++;
        if (!kv[0] || !kv[1]) return ts_fail(TS_ERR_NOMEM, "%s: out of memory", f->path);
    }
    return TS_OK;
}

static int cmp_by_name(const void *a, const void *b) {
    return strcmp((*(ts_st_entry *const *)a)->name, (*(ts_st_entry *const *)b)->name);
}

static int cmp_by_begin(const void *a, const void *b) {
    const ts_st_entry *x = *(ts_st_entry *const *)a, *y = *(ts_st_entry *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* Names unique; byte ranges disjoint and covering the data section exactly,
 * as the reference implementation requires. */
static ts_status check_layout(ts_safetensors *f) {
    f->by_name = malloc(((size_t)f->count + 1) * sizeof *f->by_name);
    ts_st_entry **by_begin = malloc(((size_t)f->count + 1) * sizeof *by_begin);
    if (!f->by_name || !by_begin) {
        free(by_begin);
        return ts_fail(TS_ERR_NOMEM, "%s: out of memory", f->path);
    }
    for (int i = 0; i < f->count; i++) f->by_name[i] = by_begin[i] = &f->entries[i];
    qsort(f->by_name, (size_t)f->count, sizeof *f->by_name, cmp_by_name);
    qsort(by_begin, (size_t)f->count, sizeof *by_begin, cmp_by_begin);

    ts_status st = TS_OK;
    for (int i = 1; i < f->count && !st; i++)
        if (strcmp(f->by_name[i - 1]->name, f->by_name[i]->name) == 0)
            st = ts_fail(TS_ERR_FORMAT, "%s: tensor %s appears twice in the header", f->path,
                         f->by_name[i]->name);
    uint64_t covered = 0;
    for (int i = 0; i < f->count && !st; i++) {
        const ts_st_entry *e = by_begin[i];
        if (e->begin < covered)
            st = ts_fail(TS_ERR_FORMAT, "%s: tensor %s (bytes %llu..%llu) overlaps tensor %s", f->path,
                         e->name, (unsigned long long)e->begin, (unsigned long long)e->end,
                         by_begin[i - 1]->name);
        else if (e->begin > covered)
            st = ts_fail(TS_ERR_FORMAT, "%s: data bytes %llu..%llu (before tensor %s) belong to no tensor",
                         f->path, (unsigned long long)covered, (unsigned long long)e->begin, e->name);
        covered = e->end;
    }
    if (!st && covered != f->data_size)
        st = ts_fail(TS_ERR_FORMAT, "%s: the last %llu bytes of the file belong to no tensor", f->path,
                     (unsigned long long)(f->data_size - covered));
    free(by_begin);
    return st;
}

static ts_status parse_header(ts_safetensors *f, const char *json, size_t len) {
    if (len < 2 || json[0] != '{')
        return ts_fail(TS_ERR_FORMAT, "%s: the header does not start with '{': not a safetensors file",
                       f->path);
    /* a NUL would end a name early, unseen: only the padding after the JSON may hold one */
    const char *nul = memchr(json, '\0', len);
    size_t body = nul ? (size_t)(nul - json) : len;
    for (size_t i = body; i < len; i++)
        if (json[i] != '\0' && json[i] != ' ')
            return ts_fail(TS_ERR_FORMAT, "%s: the JSON header has a NUL byte at byte %zu of %zu", f->path, body, len);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, body, &end, false);
    if (!root) {
        size_t at = end && end >= json && end <= json + len ? (size_t)(end - json) : 0;
        return ts_fail(TS_ERR_FORMAT, "%s: the JSON header is malformed near byte %zu of %zu", f->path,
                       at, len);
    }
    ts_status st = TS_OK;
    for (const char *p = end; p && p < json + body && !st; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r' && *p != '\0')
            st = ts_fail(TS_ERR_FORMAT, "%s: unexpected bytes after the JSON header (at byte %zu)",
                         f->path, (size_t)(p - json));
    if (!st && !cJSON_IsObject(root))
        st = ts_fail(TS_ERR_FORMAT, "%s: the JSON header is not an object", f->path);
    if (!st) { /* a key twice, in a tensor's entry or the metadata: Python's json keeps the last */
        char what[4096 + 16];
        snprintf(what, sizeof what, "%s: the JSON header", f->path);
        st = ts_json_check_unique(root, what);
    }
    int n = st ? 0 : cJSON_GetArraySize(root);
    if (!st && !(f->entries = calloc((size_t)n + 1, sizeof *f->entries)))
        st = ts_fail(TS_ERR_NOMEM, "%s: out of memory", f->path);
    const cJSON *item;
    if (!st) cJSON_ArrayForEach(item, root) {
        if (strcmp(item->string, "__metadata__") == 0) {
            if (f->meta) st = ts_fail(TS_ERR_FORMAT, "%s: __metadata__ appears twice", f->path);
            else st = parse_metadata(f, item);
        } else {
            st = parse_entry(f, item, &f->entries[f->count++]);
        }
        if (st) break;
    }
    cJSON_Delete(root);
    return st ? st : check_layout(f);
}

static ts_status open_file(ts_safetensors *f, const char *path) {
    /* a torch.save file is a zip archive: its own reader fills the same struct */
    if (ts_torch_pt_is(path)) return ts_torch_pt_open(f, path);
    memset(f, 0, sizeof *f);
    f->path = strdup(path);
    if (!f->path) return ts_fail(TS_ERR_NOMEM, "out of memory");
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        ts_status st = ts_fail(TS_ERR_IO, "cannot open %s: %s", path, strerror(errno));
        ts_safetensors_close(f);
        return st;
    }
    struct stat sb;
    ts_status st = TS_OK;
    if (fstat(fd, &sb) != 0) st = ts_fail(TS_ERR_IO, "cannot stat %s: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode)) st = ts_fail(TS_ERR_IO, "%s is not a regular file", path);
    else if (sb.st_size < 8)
        st = ts_fail(TS_ERR_FORMAT, "%s is %lld bytes, too short for a safetensors file (it starts with "
                     "an 8-byte header length)", path, (long long)sb.st_size);
    if (!st) {
        f->map_size = (size_t)sb.st_size;
        void *m = mmap(NULL, f->map_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) st = ts_fail(TS_ERR_IO, "cannot map %s: %s", path, strerror(errno));
        else f->map = m;
    }
    close(fd);
    if (!st) {
        uint64_t header_len = read_u64_le(f->map);
        uint64_t room = (uint64_t)f->map_size - 8;
        if (header_len > room && f->map[0] == 0x80 && f->map[1] <= 5)
            st = ts_fail(TS_ERR_UNSUPPORTED, "%s is a bare pickle (torch.save's format before PyTorch 1.6, or "
                         "pickle.dump), not a zip archive: save it again with torch.save in PyTorch 1.6 or later",
                         path);
        else if (header_len > room)
            st = ts_fail(TS_ERR_FORMAT, "%s: header length %llu is larger than the rest of the file (%llu "
                         "bytes): truncated, or not a safetensors file", path,
                         (unsigned long long)header_len, (unsigned long long)room);
        else if (header_len > TS_SAFETENSORS_MAX_HEADER)
            st = ts_fail(TS_ERR_FORMAT, "%s: header length %llu is over the %u-byte limit", path,
                         (unsigned long long)header_len, TS_SAFETENSORS_MAX_HEADER);
        if (!st) {
            f->data = f->map + 8 + header_len;
            f->data_size = room - header_len;
            st = parse_header(f, (const char *)f->map + 8, (size_t)header_len);
        }
    }
    if (st) ts_safetensors_close(f);
    return st;
}

ts_status ts_safetensors_open(ts_safetensors *f, const char *path) {
    TS_TRY(open_file(f, path));
    /* a codebase's names, or --names, made the names tscope reads */
    ts_status st = ts_name_map_apply_all(f);
    if (st) ts_safetensors_close(f);
    return st;
}

void ts_safetensors_close(ts_safetensors *f) {
    for (int i = 0; i < f->count; i++) {
        free(f->entries[i].name);
        free(f->entries[i].converted);
    }
    free(f->entries);
    free(f->by_name);
    for (int i = 0; f->meta && f->meta[i]; i++) free(f->meta[i]);
    free(f->meta);
    if (f->map) munmap(f->map, f->map_size);
    free(f->owned);
    free(f->path);
    memset(f, 0, sizeof *f);
}

/* ---- reading: tensors ---------------------------------------------------- */

static ts_st_entry *find_entry(const ts_safetensors *f, const char *name) {
    int lo = 0, hi = f->count - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(f->by_name[mid]->name, name);
        if (c == 0) return f->by_name[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

const ts_st_entry *ts_safetensors_find(const ts_safetensors *f, const char *name) { return find_entry(f, name); }

char *ts_safetensors_list(const ts_safetensors *f, char *buf, size_t size) {
    if (size == 0) return buf;
    buf[0] = '\0';
    size_t used = 0;
    for (int i = 0; i < f->count; i++) {
        const char *name = f->entries[i].name;
        size_t need = strlen(name) + (i ? 2 : 0);
        char tail[48];
        int left = f->count - i;
        snprintf(tail, sizeof tail, "%s... (%d more)", i ? ", " : "", left);
        /* Keep room for the tail unless this is the last name. */
        size_t reserve = i + 1 < f->count ? strlen(tail) : 0;
        if (used + need + reserve + 1 > size) {
            if (used + strlen(tail) + 1 <= size) memcpy(buf + used, tail, strlen(tail) + 1);
            return buf;
        }
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "", name);
    }
    return buf;
}

/* A name that differs from `name` only by a leading "prefix." on either side:
 * a checkpoint of nn.TransformerEncoder read where nn.Transformer was meant. */
static const char *near_match(const ts_safetensors *f, const char *name) {
    size_t n = strlen(name);
    for (int i = 0; i < f->count; i++) {
        const char *have = f->entries[i].name;
        size_t h = strlen(have);
        if (h < n && name[n - h - 1] == '.' && strcmp(name + n - h, have) == 0) return have;
        if (n < h && have[h - n - 1] == '.' && strcmp(have + h - n, name) == 0) return have;
    }
    return NULL;
}

static ts_status missing(const ts_safetensors *f, const char *name) {
    char list[640];
    const char *near = near_match(f, name);
    char hint[200] = "";
    if (near) snprintf(hint, sizeof hint, " (did you mean %.150s?)", near);
    return ts_fail(TS_ERR_ARG, "%s has no tensor %s%s; it has %d: %s", f->path, name, hint, f->count,
                   ts_safetensors_list(f, list, sizeof list));
}

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else { /* subnormal: normalize */
            int e = -1;
            do {
                mant <<= 1;
                e++;
            } while (!(mant & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ff) << 13);
        }
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float out;
    memcpy(&out, &bits, sizeof out);
    return out;
}

/* Fill e->converted with float32 values (F32 off alignment, F16, BF16, F64). */
static ts_status convert(ts_safetensors *f, ts_st_entry *e) {
    int size = entry_elem_size(e);
    uint64_t n = (e->end - e->begin) / (uint64_t)size;
    e->converted = malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!e->converted)
        return ts_fail(TS_ERR_NOMEM, "%s: out of memory converting tensor %s to float32", f->path, e->name);
    const unsigned char *src = f->data + e->begin;
    for (uint64_t i = 0; i < n; i++) {
        const unsigned char *p = src + i * (uint64_t)size;
        if (e->dtype == TS_ST_F32) {
            memcpy(&e->converted[i], p, 4);
        } else if (e->dtype == TS_ST_F16) {
            e->converted[i] = half_to_float((uint16_t)(p[0] | p[1] << 8));
        } else if (e->dtype == TS_ST_BF16) {
            uint32_t bits = (uint32_t)(p[0] | p[1] << 8) << 16;
            memcpy(&e->converted[i], &bits, 4);
        } else {
            double d;
            memcpy(&d, p, 8);
            if (isfinite(d) && fabs(d) > FLT_MAX) {
                free(e->converted);
                e->converted = NULL;
                return ts_fail(TS_ERR_FORMAT, "%s: tensor %s: element %llu (%g) does not fit in float32",
                               f->path, e->name, (unsigned long long)i, d);
            }
            e->converted[i] = (float)d;
        }
    }
    return TS_OK;
}

ts_status ts_safetensors_get(ts_safetensors *f, const char *name, ts_tensor *view) {
    ts_st_entry *e = find_entry(f, name);
    if (!e) return missing(f, name);
    bool floating = e->dtype == TS_ST_F32 || e->dtype == TS_ST_F16 || e->dtype == TS_ST_BF16 ||
                    e->dtype == TS_ST_F64;
    if (!floating)
        return ts_fail(TS_ERR_UNSUPPORTED, "%s: tensor %s has dtype %s; tscope reads float tensors only "
                       "(F32, F16, BF16, F64)", f->path, name, e->dtype_name);
    if (e->made) return ts_tensor_view(view, e->converted, e->rank, e->shape);
    const unsigned char *src = f->data + e->begin;
    bool in_place = e->dtype == TS_ST_F32 && ((uintptr_t)src % sizeof(float)) == 0;
    if (!in_place && !e->converted) {
        ts_status st = convert(f, e);
        if (st) return st;
    }
    return ts_tensor_view(view, in_place ? (float *)src : e->converted, e->rank, e->shape);
}

bool ts_safetensors_read_f32(ts_safetensors *f, const char *name, float *dst, int64_t n) {
    ts_st_entry *e = find_entry(f, name);
    if (!e || e->made || e->converted || (e->dtype != TS_ST_F32 && e->dtype != TS_ST_BF16)) return false;
    int size = entry_elem_size(e);
    if ((e->end - e->begin) / (uint64_t)size != (uint64_t)n) return false;
    const unsigned char *src = f->data + e->begin;
    if ((uintptr_t)src % (uintptr_t)size) return false; /* off alignment: the element-wise way */
    if (e->dtype == TS_ST_F32)
        memcpy(dst, src, sizeof(float) * (size_t)n);
    else
        ts_bf16_to_f32_n(dst, (const ts_bf16 *)(const void *)src, n);
    return true;
}

void ts_safetensors_release(ts_safetensors *f, const char *name) {
    ts_st_entry *e = find_entry(f, name);
    if (!e || e->made) return; /* stacked values have no other copy */
    free(e->converted);
    e->converted = NULL;
}

ts_status ts_safetensors_expect(ts_safetensors *f, const char *name, int rank, const int64_t *shape,
                                ts_tensor *view) {
    ts_tensor t;
    ts_status st = ts_safetensors_get(f, name, &t);
    if (st) return st;
    bool same = t.rank == rank;
    for (int i = 0; same && i < rank; i++) same = t.shape[i] == shape[i];
    if (!same) {
        char have[TS_SHAPE_TEXT_MAX], want[TS_SHAPE_TEXT_MAX];
        return ts_fail(TS_ERR_SHAPE, "tensor %s has shape %s in %s, the model needs %s", name,
                       ts_tensor_shape_str(have, sizeof have, &t, TS_SHAPE_PLAIN), f->path,
                       ts_shape_format(want, sizeof want, rank, shape, TS_SHAPE_PLAIN));
    }
    if (view) *view = t;
    return TS_OK;
}

const char *ts_safetensors_meta(const ts_safetensors *f, const char *key) {
    for (int i = 0; i < f->meta_count; i++)
        if (strcmp(f->meta[2 * i], key) == 0) return f->meta[2 * i + 1];
    return NULL;
}

/* ---- writing ---------------------------------------------------------------- */

/* A growing string for the JSON header. */
static void sb_json_string(ts_text_buf *b, const char *s) {
    ts_text_buf_str(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            char esc[2] = {'\\', (char)*p};
            ts_text_buf_add(b, esc, 2);
        } else if (*p < 0x20) {
            ts_text_buf_printf(b, "\\u%04x", *p);
        } else {
            ts_text_buf_add(b, (const char *)p, 1);
        }
    }
    ts_text_buf_str(b, "\"");
}

static ts_status check_write_args(const char *path, int n, const char *const *names, const ts_tensor *tensors,
                                  int n_meta, const char *const *meta) {
    if (n < 0 || n_meta < 0) return ts_fail(TS_ERR_ARG, "%s: negative tensor or metadata count", path);
    for (int i = 0; i < n; i++) {
        if (!names[i] || !names[i][0]) return ts_fail(TS_ERR_ARG, "%s: tensor %d has no name", path, i);
        if (strcmp(names[i], "__metadata__") == 0)
            return ts_fail(TS_ERR_ARG, "%s: a tensor cannot be named __metadata__", path);
        if (tensors[i].rank < 0 || tensors[i].rank > TS_MAX_RANK)
            return ts_fail(TS_ERR_ARG, "%s: tensor %s has rank %d", path, names[i], tensors[i].rank);
        if (!tensors[i].data && ts_tensor_numel(&tensors[i]) > 0)
            return ts_fail(TS_ERR_ARG, "%s: tensor %s has no data", path, names[i]);
        for (int j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0)
                return ts_fail(TS_ERR_ARG, "%s: tensor %s is given twice", path, names[i]);
    }
    for (int i = 0; i < 2 * n_meta; i++)
        if (!meta[i]) return ts_fail(TS_ERR_ARG, "%s: metadata entry %d is NULL", path, i / 2);
    return TS_OK;
}

static void build_header(ts_text_buf *b, int n, const char *const *names, const ts_tensor *tensors, int n_meta,
                         const char *const *meta) {
    ts_text_buf_str(b, "{");
    if (n_meta > 0) {
        ts_text_buf_str(b, "\"__metadata__\":{");
        for (int i = 0; i < n_meta; i++) {
            if (i) ts_text_buf_str(b, ",");
            sb_json_string(b, meta[2 * i]);
            ts_text_buf_str(b, ":");
            sb_json_string(b, meta[2 * i + 1]);
        }
        ts_text_buf_str(b, "}");
    }
    uint64_t offset = 0;
    for (int i = 0; i < n; i++) {
        if (i || n_meta > 0) ts_text_buf_str(b, ",");
        sb_json_string(b, names[i]);
        ts_text_buf_str(b, ":{\"dtype\":\"F32\",\"shape\":[");
        for (int d = 0; d < tensors[i].rank; d++)
            ts_text_buf_printf(b, "%s%lld", d ? "," : "", (long long)tensors[i].shape[d]);
        uint64_t bytes = (uint64_t)ts_tensor_numel(&tensors[i]) * sizeof(float);
        ts_text_buf_printf(b, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)offset,
                  (unsigned long long)(offset + bytes));
        offset += bytes;
    }
    ts_text_buf_str(b, "}");
    /* Pad with spaces so the data starts 8-byte aligned, as the reference writer does. */
    while ((8 + b->len) % 8) ts_text_buf_str(b, " ");
}

ts_status ts_safetensors_write(const char *path, int n, const char *const *names,
                               const ts_tensor *tensors, int n_meta, const char *const *meta) {
    ts_status st = check_write_args(path, n, names, tensors, n_meta, meta);
    if (st) return st;
    ts_text_buf header = {0};
    build_header(&header, n, names, tensors, n_meta, meta);
    if (header.oom) {
        free(header.s);
        return ts_fail(TS_ERR_NOMEM, "%s: out of memory building the header", path);
    }
    unsigned char len_le[8];
    for (int i = 0; i < 8; i++) len_le[i] = (unsigned char)((uint64_t)header.len >> (8 * i));

    ts_outfile out;
    st = ts_outfile_open(&out, path);
    if (st) {
        free(header.s);
        return st;
    }
    ts_outfile_write(&out, len_le, sizeof len_le);
    ts_outfile_write(&out, header.s, header.len);
    free(header.s);
    for (int i = 0; i < n; i++) ts_outfile_write_tensor(&out, &tensors[i]);
    return ts_outfile_commit(&out);
}
