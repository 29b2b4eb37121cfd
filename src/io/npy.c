/* npy: NumPy .npy arrays read (float32, float64, int32, int64, bool) and written. */
#include "tscope/io.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>


#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tscope reads little-endian .npy data by copying memory: it needs a little-endian host"
#endif

static const unsigned char magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* Headers are a few hundred bytes; anything near this is not a real array. */
#define MAX_HEADER_LEN (1u << 20)

/* ---- the header dict -------------------------------------------------- */

typedef struct dict_parser {
    const char *p, *end;
    const char *what; /* file name for messages */
} dict_parser;

typedef struct npy_header {
    char descr[16];
    int fortran; /* -1 until seen */
    int rank;    /* -1 until seen */
    int64_t shape[TS_MAX_RANK];
} npy_header;

static void skip_ws(dict_parser *d) {
    while (d->p < d->end && (*d->p == ' ' || *d->p == '\t' || *d->p == '\n' || *d->p == '\r')) d->p++;
}

static bool eat(dict_parser *d, char c) {
    skip_ws(d);
    if (d->p < d->end && *d->p == c) {
        d->p++;
        return true;
    }
    return false;
}

static ts_status bad_header(const dict_parser *d, const char *expected) {
    return ts_fail(TS_ERR_FORMAT, "%s: malformed .npy header: expected %s at \"%.20s\"", d->what, expected,
                   d->p < d->end ? d->p : "(end)");
}

/* A quoted Python string, copied into out (truncated to size - 1). */
static ts_status parse_string(dict_parser *d, char *out, size_t size) {
    skip_ws(d);
    if (d->p >= d->end || (*d->p != '\'' && *d->p != '"')) return bad_header(d, "a quoted string");
    char quote = *d->p++;
    size_t n = 0;
    while (d->p < d->end && *d->p != quote) {
        if (n + 1 < size) out[n++] = *d->p;
        d->p++;
    }
    if (d->p >= d->end) return bad_header(d, "a closing quote");
    d->p++;
    out[n] = '\0';
    return TS_OK;
}

static ts_status parse_bool(dict_parser *d, int *out) {
    skip_ws(d);
    size_t left = (size_t)(d->end - d->p);
    if (left >= 4 && memcmp(d->p, "True", 4) == 0) {
        d->p += 4;
        *out = 1;
    } else if (left >= 5 && memcmp(d->p, "False", 5) == 0) {
        d->p += 5;
        *out = 0;
    } else {
        return bad_header(d, "True or False");
    }
    return TS_OK;
}

/* (), (n,), (a, b, ...): non-negative integers, an optional Python 2 'L'. */
static ts_status parse_shape(dict_parser *d, npy_header *h) {
    if (!eat(d, '(')) return bad_header(d, "a shape tuple");
    h->rank = 0;
    for (;;) {
        if (eat(d, ')')) return TS_OK;
        skip_ws(d);
        if (d->p >= d->end || *d->p < '0' || *d->p > '9') return bad_header(d, "a dimension");
        int64_t v = 0;
        while (d->p < d->end && *d->p >= '0' && *d->p <= '9') {
            if (v > (INT64_MAX - 9) / 10)
                return ts_fail(TS_ERR_FORMAT, "%s: a dimension in the .npy header is too large", d->what);
            v = v * 10 + (*d->p++ - '0');
        }
        if (d->p < d->end && *d->p == 'L') d->p++;
        if (h->rank == TS_MAX_RANK)
            return ts_fail(TS_ERR_UNSUPPORTED, "%s: the array has more than %d dims", d->what, TS_MAX_RANK);
        h->shape[h->rank++] = v;
        if (eat(d, ')')) return TS_OK;
        if (!eat(d, ',')) return bad_header(d, "',' or ')' in the shape");
    }
}

static ts_status parse_dict(dict_parser *d, npy_header *h) {
    h->descr[0] = '\0';
    h->fortran = h->rank = -1;
    if (!eat(d, '{')) return bad_header(d, "'{'");
    for (;;) {
        if (eat(d, '}')) break;
        char key[32];
        ts_status st = parse_string(d, key, sizeof key);
        if (st) return st;
        if (!eat(d, ':')) return bad_header(d, "':'");
        if (strcmp(key, "descr") == 0) {
            skip_ws(d);
            if (d->p < d->end && *d->p == '[')
                return ts_fail(TS_ERR_UNSUPPORTED, "%s: structured (record) arrays are not supported",
                               d->what);
            st = parse_string(d, h->descr, sizeof h->descr);
        } else if (strcmp(key, "fortran_order") == 0) {
            st = parse_bool(d, &h->fortran);
        } else if (strcmp(key, "shape") == 0) {
            st = parse_shape(d, h);
        } else {
            return ts_fail(TS_ERR_FORMAT, "%s: unexpected key '%s' in the .npy header", d->what, key);
        }
        if (st) return st;
        if (eat(d, '}')) break;
        if (!eat(d, ',')) return bad_header(d, "',' or '}'");
    }
    skip_ws(d);
    if (d->p != d->end) return bad_header(d, "only padding after the header dict");
    if (!h->descr[0] || h->fortran < 0 || h->rank < 0)
        return ts_fail(TS_ERR_FORMAT, "%s: the .npy header lacks one of 'descr', 'fortran_order', 'shape'",
                       d->what);
    return TS_OK;
}

/* ---- the data ------------------------------------------------------------ */

typedef enum npy_kind { NPY_F4, NPY_F8, NPY_I4, NPY_I8, NPY_I1, NPY_U1 } npy_kind;

static ts_status check_descr(const char *what, const char *descr, npy_kind *kind, int *size) {
    static const struct { const char *descr; npy_kind kind; int size; } ok[] = {
        {"<f4", NPY_F4, 4}, {"<f8", NPY_F8, 8}, {"<i4", NPY_I4, 4}, {"<i8", NPY_I8, 8},
        {"|b1", NPY_U1, 1}, {"|u1", NPY_U1, 1}, {"|i1", NPY_I1, 1}, /* masks: bool, uint8, int8 */
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (strcmp(descr, ok[i].descr) == 0) {
            *kind = ok[i].kind;
            *size = ok[i].size;
            return TS_OK;
        }
    if (descr[0] == '>')
        return ts_fail(TS_ERR_UNSUPPORTED, "%s: dtype '%s' is big-endian; save it as little-endian "
                       "(arr.astype('<f4'))", what, descr);
    if (strcmp(descr, "|O") == 0)
        return ts_fail(TS_ERR_UNSUPPORTED, "%s: object arrays (pickled Python objects) are not supported",
                       what);
    return ts_fail(TS_ERR_UNSUPPORTED, "%s: dtype '%s' is not supported (tscope reads <f4, <f8, <i4, <i8, |b1, |u1, |i1)",
                   what, descr);
}

static int64_t read_i64_at(const unsigned char *p, npy_kind kind) {
    if (kind == NPY_U1) return p[0];
    if (kind == NPY_I1) return (int8_t)p[0];
    if (kind == NPY_I4) {
        int32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    int64_t v;
    memcpy(&v, p, 8);
    return v;
}

static double read_f64_at(const unsigned char *p, npy_kind kind) {
    if (kind == NPY_F4) {
        float v;
        memcpy(&v, p, 4);
        return v;
    }
    double v;
    memcpy(&v, p, 8);
    return v;
}

static ts_status to_f32(ts_npy *out, const unsigned char *src, npy_kind kind, int size, const char *what) {
    out->f32 = malloc((size_t)(out->numel ? out->numel : 1) * sizeof(float));
    if (!out->f32) return ts_fail(TS_ERR_NOMEM, "%s: out of memory for %lld values", what, (long long)out->numel);
    if (kind == NPY_F4) {
        memcpy(out->f32, src, (size_t)out->numel * sizeof(float));
        return TS_OK;
    }
    for (int64_t i = 0; i < out->numel; i++) {
        const unsigned char *p = src + i * size;
        if (kind == NPY_F8) {
            double v = read_f64_at(p, kind);
            if (isfinite(v) && fabs(v) > FLT_MAX)
                return ts_fail(TS_ERR_FORMAT, "%s: element %lld (%g) does not fit in float32", what,
                               (long long)i, v);
            out->f32[i] = (float)v;
        } else {
            int64_t v = read_i64_at(p, kind);
            if (v > (1 << 24) || v < -(1 << 24))
                return ts_fail(TS_ERR_FORMAT, "%s: element %lld (%lld) has no exact float32 value", what,
                               (long long)i, (long long)v);
            out->f32[i] = (float)v;
        }
    }
    return TS_OK;
}

static ts_status to_i64(ts_npy *out, const unsigned char *src, npy_kind kind, int size, const char *what) {
    out->i64 = malloc((size_t)(out->numel ? out->numel : 1) * sizeof(int64_t));
    if (!out->i64) return ts_fail(TS_ERR_NOMEM, "%s: out of memory for %lld values", what, (long long)out->numel);
    for (int64_t i = 0; i < out->numel; i++) {
        const unsigned char *p = src + i * size;
        if (kind != NPY_F4 && kind != NPY_F8) {
            out->i64[i] = read_i64_at(p, kind);
            continue;
        }
        double v = read_f64_at(p, kind);
        if (!(fabs(v) <= 9007199254740992.0) || v != floor(v))
            return ts_fail(TS_ERR_FORMAT, "%s: element %lld is %g, not a whole number: labels must be "
                           "integer ids", what, (long long)i, v);
        out->i64[i] = (int64_t)v;
    }
    return TS_OK;
}

/* ---- reading ---------------------------------------------------------------- */

static uint32_t read_le(const unsigned char *p, int bytes) {
    uint32_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static ts_status parse_prefix(const unsigned char *b, size_t size, const char *what, size_t *dict_at,
                              size_t *dict_len) {
    if (size < 10 || memcmp(b, magic, sizeof magic) != 0) {
        if (size >= 6 && memcmp(b, magic, sizeof magic) == 0)
            return ts_fail(TS_ERR_FORMAT, "%s: truncated: %zu bytes, too short for a .npy header", what, size);
        return ts_fail(TS_ERR_FORMAT, "%s is not a .npy file (it does not start with \\x93NUMPY)", what);
    }
    int major = b[6], minor = b[7];
    if (major < 1 || major > 3)
        return ts_fail(TS_ERR_UNSUPPORTED, "%s: .npy version %d.%d is not supported (1.0 to 3.0 are)", what,
                       major, minor);
    int len_bytes = major == 1 ? 2 : 4;
    size_t at = 8 + (size_t)len_bytes;
    if (size < at) return ts_fail(TS_ERR_FORMAT, "%s: truncated inside the .npy header length", what);
    uint32_t len = read_le(b + 8, len_bytes);
    if (len > MAX_HEADER_LEN)
        return ts_fail(TS_ERR_FORMAT, "%s: .npy header length %u is implausibly large", what, len);
    if (len > size - at)
        return ts_fail(TS_ERR_FORMAT, "%s: .npy header length %u runs past the end of the file (%zu bytes)",
                       what, len, size);
    *dict_at = at;
    *dict_len = len;
    return TS_OK;
}

ts_status ts_npy_parse(ts_npy *out, const void *bytes, size_t size, const char *what, bool as_labels) {
    memset(out, 0, sizeof *out);
    const unsigned char *b = bytes;
    size_t dict_at = 0, dict_len = 0;
    ts_status st = parse_prefix(b, size, what, &dict_at, &dict_len);
    if (st) return st;
    dict_parser d = {(const char *)b + dict_at, (const char *)b + dict_at + dict_len, what};
    npy_header h;
    if ((st = parse_dict(&d, &h))) return st;
    npy_kind kind = NPY_F4;
    int elem = 4;
    if ((st = check_descr(what, h.descr, &kind, &elem))) return st;
    if (h.fortran)
        return ts_fail(TS_ERR_UNSUPPORTED, "%s: the array is in Fortran order; save a C-order copy "
                       "(np.ascontiguousarray)", what);

    int64_t numel = 1;
    for (int i = 0; i < h.rank; i++) {
        if (h.shape[i] != 0 && numel > (INT64_MAX / 16) / h.shape[i])
            return ts_fail(TS_ERR_FORMAT, "%s: the shape in the .npy header is too large", what);
        numel *= h.shape[i];
    }
    size_t data_at = dict_at + dict_len;
    uint64_t need = (uint64_t)numel * (uint64_t)elem, have = size - data_at;
    char s[TS_SHAPE_TEXT_MAX];
    if (need != have)
        return ts_fail(TS_ERR_FORMAT, "%s: %s: shape %s of %s needs %llu bytes of data, the file has %llu",
                       what, need > have ? "truncated" : "trailing bytes",
                       ts_shape_format(s, sizeof s, h.rank, h.shape, TS_SHAPE_PLAIN), h.descr,
                       (unsigned long long)need, (unsigned long long)have);

    out->rank = h.rank;
    memcpy(out->shape, h.shape, sizeof h.shape);
    out->numel = numel;
    snprintf(out->descr, sizeof out->descr, "%s", h.descr);
    st = as_labels ? to_i64(out, b + data_at, kind, elem, what) : to_f32(out, b + data_at, kind, elem, what);
    if (st) ts_npy_free(out);
    return st;
}

static ts_status read_file(ts_npy *out, const char *path, bool as_labels) {
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return ts_fail(TS_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    ts_status st = TS_OK;
    if (fstat(fd, &sb) != 0) st = ts_fail(TS_ERR_IO, "cannot stat %s: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode)) st = ts_fail(TS_ERR_IO, "%s is not a regular file", path);
    else if (sb.st_size == 0) st = ts_fail(TS_ERR_FORMAT, "%s is empty, not a .npy file", path);
    if (st) {
        close(fd);
        return st;
    }
    size_t size = (size_t)sb.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return ts_fail(TS_ERR_IO, "cannot map %s: %s", path, strerror(errno));
    st = ts_npy_parse(out, map, size, path, as_labels);
    munmap(map, size);
    return st;
}

ts_status ts_npy_read(ts_npy *out, const char *path) { return read_file(out, path, false); }

ts_status ts_npy_read_labels(ts_npy *out, const char *path) { return read_file(out, path, true); }

void ts_npy_free(ts_npy *npy) {
    free(npy->f32);
    free(npy->i64);
    memset(npy, 0, sizeof *npy);
}

ts_status ts_npy_tensor(const ts_npy *npy, ts_tensor *view) {
    if (!npy->f32) return ts_fail(TS_ERR_ARG, "this array was read as labels, not as float32");
    return ts_tensor_view(view, npy->f32, npy->rank, npy->shape);
}

/* ---- writing ------------------------------------------------------------------ */

/* The dict NumPy writes, without padding. */
static int format_dict(char *buf, size_t size, int rank, const int64_t *shape) {
    int n = snprintf(buf, size, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
    for (int i = 0; i < rank; i++)
        n += snprintf(buf + n, size > (size_t)n ? size - (size_t)n : 0, "%s%lld", i ? ", " : "",
                      (long long)shape[i]);
    n += snprintf(buf + n, size > (size_t)n ? size - (size_t)n : 0, "%s), }", rank == 1 ? "," : "");
    return n;
}

/* The dict is under 256 bytes for any rank tscope has, so version 1.0 (a
 * 2-byte length) always suffices. */
size_t ts_npy_header_size(int rank, const int64_t *shape) {
    if (rank < 0 || rank > TS_MAX_RANK) return 0;
    char dict[256];
    size_t n = (size_t)format_dict(dict, sizeof dict, rank, shape) + 1; /* + '\n' */
    return (10 + n + 63) / 64 * 64;
}

size_t ts_npy_write_header(unsigned char *buf, size_t size, int rank, const int64_t *shape) {
    if (rank < 0 || rank > TS_MAX_RANK) return 0;
    size_t total = ts_npy_header_size(rank, shape);
    if (size < total) return 0;
    char dict[256];
    size_t n = (size_t)format_dict(dict, sizeof dict, rank, shape);
    size_t len = total - 10;
    memcpy(buf, magic, sizeof magic);
    buf[6] = 1;
    buf[7] = 0;
    buf[8] = (unsigned char)(len & 0xff);
    buf[9] = (unsigned char)(len >> 8);
    memcpy(buf + 10, dict, n);
    memset(buf + 10 + n, ' ', len - n - 1);
    buf[total - 1] = '\n';
    return total;
}

ts_status ts_npy_write(const char *path, const ts_tensor *t) {
    if (t->rank < 0 || t->rank > TS_MAX_RANK) return ts_fail(TS_ERR_ARG, "%s: rank %d", path, t->rank);
    unsigned char header[512];
    size_t n = ts_npy_write_header(header, sizeof header, t->rank, t->shape);
    if (n == 0) return ts_fail(TS_ERR_ARG, "%s: the .npy header does not fit", path);
    ts_outfile out;
    ts_status st = ts_outfile_open(&out, path);
    if (st) return st;
    ts_outfile_write(&out, header, n);
    ts_outfile_write_tensor(&out, t);
    return ts_outfile_commit(&out);
}
