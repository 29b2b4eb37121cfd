/* trace_read: open a trace by mapping it and reading its index.
 *
 * Nothing in the file is trusted: every offset and size is checked against
 * the bytes that are really there before anything is read through it, every
 * record's headers against their CRC at open, and every step's values against
 * theirs the first time they are asked for (so that opening gigabytes reads
 * a few pages, not all of them). A file with no valid trailer is read by
 * scanning its records from the front, keeping each complete one up to the
 * first that fails.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trace_format.h"

#define MAX_ELEMENTS ((uint64_t)1 << 40)
#define MIN_HEADERS (TRF_ALIGN * 2 + TRF_SUFFIX_SIZE) /* smallest prefix + suffix */
#define MIN_RECORD MIN_HEADERS

enum { VALUES_UNCHECKED, VALUES_GOOD, VALUES_BAD };

typedef struct step_extra {
    uint64_t values_offset;
    uint32_t values_crc;
    _Atomic unsigned char checked;
    int64_t view_offset;               /* views: first element in the base's values */
    int64_t view_strides[TS_MAX_RANK]; /* views: in elements of the base's values */
    int view_scale;                    /* views: the values are the base's times 2^view_scale */
    float *gathered;                   /* views not in place: gathered on first use (under lock) */
    bool hist_done;                    /* hist_from_values: hist holds it (under lock) */
    uint64_t hist[TS_TRACE_HIST_BINS];
} step_extra;

struct ts_trace {
    const unsigned char *data;
    uint64_t size;
    void *map; /* munmap on close, or NULL */
    unsigned char *owned;
    char *meta;
    char **tokens[2];
    int n_tokens[2];
    char **batch_tokens[2]; /* per side: (n_batch_lists * batch_len) tokens, element after element */
    int n_batch_lists[2], batch_len[2];
    ts_trace_step *steps;
    step_extra *extra;
    int64_t n;
    int64_t *table; /* name hash -> first step with that name, -1 empty */
    uint64_t table_mask;
    int64_t *next_same;
    bool complete;
    char warning[640];
    pthread_mutex_t lock; /* guards gathering views */
    /* ts_trace_verify's verdict, once reached: every picture asks, and only
     * the first question reads the whole file */
    _Atomic bool verified;
    int64_t n_damaged;
    ts_sticky damage;
};

/* ---- small checks ---- */

/* [off, off + len) lies inside [0, limit). */
static bool fits(uint64_t off, uint64_t len, uint64_t limit) { return off <= limit && len <= limit - off; }

/* A name for messages: printable ASCII, at most 60 bytes. */
static void safe_name(char *out, size_t size, const unsigned char *p, uint64_t len) {
    size_t k = 0;
    for (uint64_t i = 0; i < len && k + 4 < size && i < 60; i++)
        out[k++] = (p[i] >= 32 && p[i] < 127) ? (char)p[i] : '?';
    if (len > 60 && k + 4 < size) {
        memcpy(out + k, "...", 3);
        k += 3;
    }
    out[k] = '\0';
}

/* ---- one record ---- */

/* A view's base, offset and strides: the base is an earlier step that keeps
 * its own values, and every element the view reaches lies inside them. The
 * step's values_shape must be filled. */
static bool parse_view(const ts_trace *t, const unsigned char *p, int64_t i, unsigned rank, ts_trace_step *step,
                       uint64_t count, step_extra *extra) {
    uint64_t base = trf_get64(p + TRF_P_VIEW_BASE), offset = trf_get64(p + TRF_P_VIEW_OFFSET);
    if (base >= (uint64_t)i) return false;
    const ts_trace_step *b = &t->steps[base];
    if (!b->has_values || b->view_of >= 0) return false;
    memset(extra->view_strides, 0, sizeof extra->view_strides);
    uint64_t bcount = (uint64_t)b->values_count;
    if (offset > bcount || (count > 0 && offset == bcount)) return false;
    uint64_t room = count > 0 ? bcount - 1 - offset : 0; /* how far the view may still reach */
    for (unsigned d = 0; d < TS_MAX_RANK; d++) {
        uint64_t stride = trf_get64(p + TRF_P_VIEW_STRIDES + 8 * d);
        if (d >= rank) {
            if (stride != 0) return false;
            continue;
        }
        if (stride > MAX_ELEMENTS) return false;
        uint64_t steps = step->values_shape[d] > 0 ? (uint64_t)step->values_shape[d] - 1 : 0;
        if (count > 0 && steps > 0) {
            if (stride > 0 && steps > room / stride) return false;
            room -= steps * stride;
        }
        extra->view_strides[d] = (int64_t)stride;
    }
    int scale = (int8_t)p[TRF_P_VIEW_SCALE];
    if (scale < -TRF_VIEW_SCALE_MAX || scale > TRF_VIEW_SCALE_MAX) return false;
    extra->view_scale = scale;
    step->view_factor = ldexpf(1.0f, scale);
    extra->view_offset = (int64_t)offset;
    step->view_of = (int64_t)base;
    return true;
}


typedef enum record_result { RECORD_OK, RECORD_TRUNCATED, RECORD_BAD } record_result;

/* Where a record's headers are read: from the record itself in the file, or
 * from the copy the index keeps (prefix and suffix back to back, so that
 * opening a big trace reads one region, not a page per step). */
typedef struct header_src {
    const unsigned char *p; /* the prefix */
    uint64_t avail;         /* bytes readable from p */
    bool copy;              /* the suffix follows the prefix */
} header_src;

/* Check the record of step i at file offset off (which must end by limit),
 * reading its headers from src, and fill step/extra. On failure `why` says
 * what is wrong, naming the step when its name could be read. */
static record_result parse_record(const ts_trace *t, header_src src, uint64_t off, uint64_t limit, int64_t i,
                                  bool check_values, ts_trace_step *step, step_extra *extra, char *why,
                                  size_t why_size) {
    const unsigned char *d = t->data;
    const unsigned char *p = src.p;
    if (off % TRF_ALIGN != 0) {
        snprintf(why, why_size, "step %lld starts at a misaligned offset %llu", (long long)i, (unsigned long long)off);
        return RECORD_BAD;
    }
    if (src.avail < 4) {
        snprintf(why, why_size, "step %lld is missing", (long long)i);
        return RECORD_TRUNCATED;
    }
    if (memcmp(p, TRF_PREFIX_MAGIC, 4) != 0) {
        snprintf(why, why_size, "no record where step %lld should start (offset %llu)", (long long)i,
                 (unsigned long long)off);
        return RECORD_BAD;
    }
    if (src.avail < TRF_P_NAME) {
        snprintf(why, why_size, "step %lld is incomplete", (long long)i);
        return RECORD_TRUNCATED;
    }
    uint64_t prefix_size = trf_get32(p + TRF_P_PREFIX_SIZE);
    uint64_t record_size = trf_get64(p + TRF_P_RECORD_SIZE);
    uint64_t name_len = trf_get32(p + TRF_P_NAME_LEN);
    char name[80] = "?";
    if (name_len >= 1 && name_len <= TRF_NAME_MAX && fits(TRF_P_NAME, name_len, src.avail))
        safe_name(name, sizeof name, p + TRF_P_NAME, name_len);
    if (prefix_size % TRF_ALIGN || prefix_size < TRF_P_NAME + 2 ||
        prefix_size > trf_align(TRF_P_NAME + TRF_NAME_MAX + 1) ||
        record_size % TRF_ALIGN || record_size < prefix_size + TRF_SUFFIX_SIZE) {
        snprintf(why, why_size, "step %lld '%s' has impossible sizes", (long long)i, name);
        return RECORD_BAD;
    }
    uint64_t header_bytes = src.copy ? prefix_size + TRF_SUFFIX_SIZE : record_size;
    if (!fits(off, record_size, limit) || header_bytes > src.avail) {
        snprintf(why, why_size, "step %lld '%s' is incomplete", (long long)i, name);
        return RECORD_TRUNCATED;
    }
    const unsigned char *s = src.copy ? p + prefix_size : p + record_size - TRF_SUFFIX_SIZE;
    uint32_t crc = trf_crc32(0, p, (size_t)prefix_size);
    crc = trf_crc32(crc, s, TRF_S_RECORD_CRC);
    if (memcmp(s, TRF_SUFFIX_MAGIC, 4) != 0 || crc != trf_get32(s + TRF_S_RECORD_CRC)) {
        snprintf(why, why_size, "step %lld '%s' fails its CRC (the file is damaged there)", (long long)i, name);
        return RECORD_BAD;
    }

    /* The CRC matched: what follows only guards against a file made to look
     * valid, so one message does. */
    snprintf(why, why_size, "step %lld '%s' is inconsistent", (long long)i, name);
    unsigned content = p[TRF_P_CONTENT];
    unsigned rank = p[TRF_P_RANK];
    bool has_values = content & TRF_CONTENT_VALUES;
    if (trf_get64(p + TRF_P_INDEX) != (uint64_t)i || trf_get64(s + TRF_S_INDEX) != (uint64_t)i ||
        trf_get32(s + TRF_S_SUFFIX_SIZE) != TRF_SUFFIX_SIZE || content > 31 || rank > TS_MAX_RANK ||
        p[TRF_P_DTYPE] != (has_values ? TRF_DTYPE_F32 : TRF_DTYPE_NONE) || name_len < 1 ||
        name_len > TRF_NAME_MAX || TRF_P_NAME + name_len + 1 > prefix_size || p[TRF_P_NAME + name_len] != 0 ||
        memchr(p + TRF_P_NAME, 0, (size_t)name_len) != NULL)
        return RECORD_BAD;
    memset(step, 0, sizeof *step);
    uint64_t numel = 1;
    for (unsigned k = 0; k < TS_MAX_RANK; k++) {
        uint64_t dim = trf_get64(p + TRF_P_SHAPE + 8 * k);
        if (k >= rank) {
            if (dim != 0) return RECORD_BAD;
            continue;
        }
        if (dim > MAX_ELEMENTS || (dim > 0 && numel > MAX_ELEMENTS / dim)) return RECORD_BAD;
        numel *= dim;
        step->shape[k] = (int64_t)dim;
    }
    int32_t batch = (int32_t)trf_get32(p + TRF_P_BATCH);
    uint64_t count = trf_get64(p + TRF_P_VALUES_COUNT);
    bool is_view = content & TRF_CONTENT_VIEW;
    if (is_view ? !has_values : p[TRF_P_VIEW_SCALE] != 0 || (content & TRF_CONTENT_VIEW_RELU)) return RECORD_BAD;
    uint64_t want = 0;
    if (has_values) {
        if (batch == -1) {
            want = numel;
        } else {
            if (batch < 0 || rank < 1 || (uint64_t)batch >= (uint64_t)step->shape[0]) return RECORD_BAD;
            want = numel / (uint64_t)step->shape[0];
        }
    } else if (batch != -1) {
        return RECORD_BAD;
    }
    if (count != want || record_size != prefix_size + (is_view ? 0 : trf_align(count * 4)) + TRF_SUFFIX_SIZE)
        return RECORD_BAD;
    memcpy(step->values_shape, step->shape, sizeof step->shape);
    if (has_values && batch >= 0) step->values_shape[0] = 1;
    step->view_of = -1;
    step->view_factor = 1.0f;
    step->view_relu = content & TRF_CONTENT_VIEW_RELU;
    if (is_view && !parse_view(t, p, i, rank, step, count, extra)) return RECORD_BAD;

    step->index = i;
    step->name = (const char *)p + TRF_P_NAME;
    step->op = (ts_op)trf_get16(p + TRF_P_OP);
    step->tag = (ts_tag)trf_get16(p + TRF_P_TAG);
    step->rank = (int)rank;
    step->numel = (int64_t)numel;
    step->has_values = has_values;
    step->batch_index = has_values ? batch : -1;
    step->values_count = (int64_t)count;
    step->file_offset = off;
    step->record_bytes = record_size;
    step->has_stats = content & TRF_CONTENT_STATS;
    step->hist_from_values = content & TRF_CONTENT_HIST_FROM_VALUES;
    if (step->hist_from_values && !(step->has_stats && has_values && batch == -1)) return RECORD_BAD;
    if (step->has_stats) {
        ts_trace_stats *st = &step->stats;
        st->min = trf_getf64(s + TRF_S_MIN);
        st->max = trf_getf64(s + TRF_S_MAX);
        st->mean = trf_getf64(s + TRF_S_MEAN);
        st->std = trf_getf64(s + TRF_S_STD);
        st->mean_abs = trf_getf64(s + TRF_S_MEAN_ABS);
        st->finite = trf_get64(s + TRF_S_FINITE);
        st->nan = trf_get64(s + TRF_S_NAN);
        st->inf = trf_get64(s + TRF_S_INF);
        st->zeros = trf_get64(s + TRF_S_ZEROS);
        if (st->finite > numel || st->nan > numel - st->finite || st->inf != numel - st->finite - st->nan ||
            st->zeros > st->finite)
            return RECORD_BAD;
        uint64_t total = 0;
        for (int b = 0; b < TS_TRACE_HIST_BINS; b++) {
            st->hist[b] = trf_get64(s + TRF_S_HIST + 8 * b);
            if (st->hist[b] > st->finite - total) return RECORD_BAD;
            total += st->hist[b];
        }
        if (total != (step->hist_from_values ? 0 : st->finite)) return RECORD_BAD;
        double m[] = {st->min, st->max, st->mean, st->std, st->mean_abs};
        for (int k = 0; k < 5; k++)
            if (!isfinite(m[k])) return RECORD_BAD;
        if (st->finite > 0 && (st->min > st->max || st->std < 0 || st->mean_abs < 0)) return RECORD_BAD;
    }
    extra->gathered = NULL;
    extra->hist_done = false;
    extra->values_offset = off + prefix_size;
    extra->values_crc = trf_get32(s + TRF_S_VALUES_CRC);
    atomic_init(&extra->checked, VALUES_UNCHECKED);
    if (check_values && has_values && !is_view) {
        if (trf_crc32(0, d + extra->values_offset, (size_t)count * 4) != extra->values_crc) {
            snprintf(why, why_size, "step %lld '%s': its values fail their CRC (the file is damaged there)",
                     (long long)i, name);
            return RECORD_BAD;
        }
        atomic_init(&extra->checked, VALUES_GOOD);
    }
    why[0] = '\0';
    return RECORD_OK;
}

/* ---- the whole file ---- */

static ts_status grow_steps(ts_trace *t, int64_t want) {
    ts_trace_step *steps = realloc(t->steps, (size_t)want * sizeof *steps);
    if (!steps) return ts_fail(TS_ERR_NOMEM, "trace: no memory for %lld steps", (long long)want);
    t->steps = steps;
    step_extra *extra = realloc(t->extra, (size_t)want * sizeof *extra);
    if (!extra) return ts_fail(TS_ERR_NOMEM, "trace: no memory for %lld steps", (long long)want);
    t->extra = extra;
    return TS_OK;
}

/* Records one after another from the first; stop at the first that is not
 * whole and sound. */
static ts_status scan_records(ts_trace *t, uint64_t records, const char *reason) {
    int64_t cap = 0;
    t->n = 0;
    uint64_t off = records;
    char why[256] = "";
    while (off < t->size) {
        if (t->n == cap) {
            cap = cap ? 2 * cap : 64;
            ts_status s = grow_steps(t, cap);
            if (s) return s;
        }
        if (fits(off, 4, t->size) && memcmp(t->data + off, TRF_INDEX_MAGIC, 4) == 0) break;
        header_src src = {t->data + off, t->size - off, false};
        record_result r =
            parse_record(t, src, off, t->size, t->n, true, &t->steps[t->n], &t->extra[t->n], why, sizeof why);
        if (r != RECORD_OK) {
            bool zeros = true;
            for (uint64_t k = off; k < t->size && k < off + 64 && zeros; k++) zeros = t->data[k] == 0;
            if (r == RECORD_BAD && zeros)
                snprintf(why, sizeof why, "the records end at offset %llu", (unsigned long long)off);
            break;
        }
        off += t->steps[t->n].record_bytes;
        t->n++;
        why[0] = '\0';
    }
    snprintf(t->warning, sizeof t->warning, "%s: read by scanning, kept %lld complete step%s%s%s", reason,
             (long long)t->n, t->n == 1 ? "" : "s", why[0] ? "; " : "", why);
    return TS_OK;
}

/* The index path: trailer -> index -> each record's headers. Returns false
 * (with the reason) when anything is off, and the caller scans instead. */
static bool read_index(ts_trace *t, uint64_t records, char *why, size_t why_size) {
    const unsigned char *d = t->data;
    if (t->size < records + TRF_TRAILER_SIZE) {
        snprintf(why, why_size, "no trailer (the writer did not finish)");
        return false;
    }
    const unsigned char *tr = d + t->size - TRF_TRAILER_SIZE;
    if (memcmp(tr, TRF_TRAILER_MAGIC, 8) != 0) {
        snprintf(why, why_size, "no trailer (the writer did not finish)");
        return false;
    }
    if (trf_crc32(0, tr, TRF_T_CRC) != trf_get32(tr + TRF_T_CRC)) {
        snprintf(why, why_size, "the trailer fails its CRC");
        return false;
    }
    uint64_t index_offset = trf_get64(tr + TRF_T_INDEX_OFFSET), index_size = trf_get64(tr + TRF_T_INDEX_SIZE);
    uint64_t count = trf_get64(tr + TRF_T_STEP_COUNT);
    uint64_t trailer_at = t->size - TRF_TRAILER_SIZE;
    if (index_offset < records || index_offset % TRF_ALIGN || !fits(index_offset, index_size, trailer_at) ||
        trf_align(index_offset + index_size) != trailer_at || count > (index_offset - records) / MIN_RECORD ||
        index_size < TRF_INDEX_HEAD || count > (index_size - TRF_INDEX_HEAD) / (8 + MIN_HEADERS)) {
        snprintf(why, why_size, "the trailer points outside the file");
        return false;
    }
    const unsigned char *ix = d + index_offset;
    if (memcmp(ix, TRF_INDEX_MAGIC, 4) != 0 || trf_get64(ix + 8) != count ||
        trf_crc32(0, ix, (size_t)index_size) != trf_get32(tr + TRF_T_INDEX_CRC)) {
        snprintf(why, why_size, "the index is damaged");
        return false;
    }
    if (count > 0 && grow_steps(t, (int64_t)count)) {
        snprintf(why, why_size, "%s", ts_last_error());
        return false;
    }
    uint64_t expect = records;
    uint64_t copy = TRF_INDEX_HEAD + 8 * count; /* the headers' copies, in ix */
    for (uint64_t i = 0; i < count; i++) {
        uint64_t off = trf_get64(ix + TRF_INDEX_HEAD + 8 * i);
        if (off != expect) {
            snprintf(why, why_size, "the index entry of step %llu is wrong", (unsigned long long)i);
            return false;
        }
        char reason[200];
        header_src src = {ix + copy, index_size - copy, true};
        if (parse_record(t, src, off, index_offset, (int64_t)i, false, &t->steps[i], &t->extra[i], reason,
                         sizeof reason) != RECORD_OK) {
            snprintf(why, why_size, "in the index: %s", reason);
            return false;
        }
        expect = off + t->steps[i].record_bytes;
        copy += t->extra[i].values_offset - off + TRF_SUFFIX_SIZE; /* prefix + suffix */
    }
    if (expect != index_offset || copy != index_size) {
        snprintf(why, why_size, "the index does not cover the records");
        return false;
    }
    t->n = (int64_t)count;
    return true;
}

static char **token_list(const cJSON *root, const char *key, int *n) {
    *n = 0;
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, key);
    int count = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : 0;
    if (count <= 0) return NULL;
    char **list = calloc((size_t)count, sizeof *list);
    if (!list) return NULL;
    int k = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, a) {
        const char *text = cJSON_IsString(item) ? item->valuestring : "";
        list[k] = strdup(text ? text : "");
        if (!list[k]) break;
        k++;
    }
    *n = k;
    return list;
}

/* "source_tokens_batch" (or the target's): lists of one length, else none are kept. */
static void batch_token_lists(ts_trace *t, ts_trace_side side, const cJSON *a) {
    int B = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : 0, n = B ? cJSON_GetArraySize(cJSON_GetArrayItem(a, 0)) : 0;
    if (B <= 0 || n <= 0) return;
    const cJSON *list;
    cJSON_ArrayForEach(list, a) if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) != n) return;
    char **tokens = calloc((size_t)B * n, sizeof *tokens);
    if (!tokens) return;
    int k = 0;
    cJSON_ArrayForEach(list, a) {
        const cJSON *item;
        cJSON_ArrayForEach(item, list) {
            const char *text = cJSON_IsString(item) ? item->valuestring : "";
            tokens[k++] = strdup(text ? text : "");
        }
    }
    t->batch_tokens[side] = tokens, t->n_batch_lists[side] = B, t->batch_len[side] = n;
}

static ts_status read_header(ts_trace *t, uint64_t *records) {
    const unsigned char *d = t->data;
    if (t->size < TRF_HEADER_SIZE || memcmp(d, TRF_MAGIC, 8) != 0)
        return ts_fail(TS_ERR_FORMAT, "trace: not a tscope trace (no trace header)");
    if (trf_crc32(0, d, TRF_H_CRC) != trf_get32(d + TRF_H_CRC))
        return ts_fail(TS_ERR_FORMAT, "trace: the file header fails its CRC (the file is damaged)");
    uint32_t version = trf_get32(d + TRF_H_VERSION);
    if (version < TRF_VERSION_OLDEST || version > TRF_VERSION)
        return ts_fail(TS_ERR_FORMAT, "trace: format version %u, this tscope reads versions %d to %d%s", version,
                       TRF_VERSION_OLDEST, TRF_VERSION, version > TRF_VERSION ? " (the file is newer: update tscope)" : "");
    uint64_t meta_offset = trf_get64(d + TRF_H_META_OFFSET), meta_size = trf_get64(d + TRF_H_META_SIZE);
    *records = trf_get64(d + TRF_H_RECORDS_OFFSET);
    if (trf_get32(d + TRF_H_HEADER_SIZE) != TRF_HEADER_SIZE || meta_offset != TRF_HEADER_SIZE ||
        meta_size > t->size || *records != trf_align(TRF_HEADER_SIZE + meta_size) || *records > t->size)
        return ts_fail(TS_ERR_FORMAT, "trace: the file header does not fit the file (truncated?)");
    if (trf_crc32(0, d + meta_offset, (size_t)meta_size) != trf_get32(d + TRF_H_META_CRC))
        return ts_fail(TS_ERR_FORMAT, "trace: the metadata fails its CRC (the file is damaged)");
    t->meta = malloc((size_t)meta_size + 1);
    if (!t->meta) return ts_fail(TS_ERR_NOMEM, "trace: no memory for the metadata");
    memcpy(t->meta, d + meta_offset, (size_t)meta_size);
    t->meta[meta_size] = '\0';
    size_t bad;
    if (!ts_text_utf8_valid(t->meta, (size_t)meta_size, &bad)) /* its tokens are drawn and printed */
        return ts_fail(TS_ERR_FORMAT, "trace: the metadata is not UTF-8 (byte 0x%02X at offset %zu): a damaged or "
                                      "hand-made trace", (unsigned char)t->meta[bad], bad);
    cJSON *root = NULL;
    TS_TRY(ts_json_parse(t->meta, strlen(t->meta), "trace: the metadata", &root));
    t->tokens[TS_TRACE_SOURCE] = token_list(root, "source_tokens", &t->n_tokens[TS_TRACE_SOURCE]);
    t->tokens[TS_TRACE_TARGET] = token_list(root, "target_tokens", &t->n_tokens[TS_TRACE_TARGET]);
    batch_token_lists(t, TS_TRACE_SOURCE, cJSON_GetObjectItemCaseSensitive(root, "source_tokens_batch"));
    batch_token_lists(t, TS_TRACE_TARGET, cJSON_GetObjectItemCaseSensitive(root, "target_tokens_batch"));
    cJSON_Delete(root);
    return TS_OK;
}

static uint64_t hash_name(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static ts_status build_table(ts_trace *t) {
    uint64_t size = 16;
    while (size < 2 * (uint64_t)t->n) size *= 2;
    t->table = malloc(size * sizeof *t->table);
    t->next_same = malloc(((size_t)t->n + 1) * sizeof *t->next_same);
    if (!t->table || !t->next_same) return ts_fail(TS_ERR_NOMEM, "trace: no memory for the name table");
    memset(t->table, 0xff, size * sizeof *t->table);
    t->table_mask = size - 1;
    /* Backwards, so each slot ends up with the first step of its name and
     * each step links to the next one with the same name. */
    for (int64_t i = t->n - 1; i >= 0; i--) {
        uint64_t h = hash_name(t->steps[i].name) & t->table_mask;
        t->next_same[i] = -1;
        while (t->table[h] >= 0) {
            if (strcmp(t->steps[t->table[h]].name, t->steps[i].name) == 0) {
                t->next_same[i] = t->table[h];
                break;
            }
            h = (h + 1) & t->table_mask;
        }
        t->table[h] = i;
    }
    return TS_OK;
}

static ts_status parse_all(ts_trace *t) {
    uint64_t records = 0;
    ts_status s = read_header(t, &records);
    if (s) return s;
    char why[256];
    if (read_index(t, records, why, sizeof why)) {
        t->complete = true;
    } else if ((s = scan_records(t, records, why))) {
        return s;
    }
    for (int64_t i = 0; i < t->n; i++) {
        size_t bad;
        char shown[80];
        if (!ts_text_utf8_valid(t->steps[i].name, strlen(t->steps[i].name), &bad))
            return ts_fail(TS_ERR_FORMAT, "trace: step %lld's name ('%s') is not UTF-8 (byte %zu): a damaged or "
                                          "hand-made trace", (long long)i,
                           ts_text_inert(shown, sizeof shown, t->steps[i].name), bad);
    }
    return build_table(t);
}

static ts_trace *new_trace(void) {
    ts_trace *t = calloc(1, sizeof *t);
    if (!t) {
        ts_fail(TS_ERR_NOMEM, "trace: no memory");
        return NULL;
    }
    pthread_mutex_init(&t->lock, NULL);
    return t;
}

ts_status ts_trace_open_memory(const void *data, size_t size, ts_trace **out) {
    *out = NULL;
    if (!data && size) return ts_fail(TS_ERR_ARG, "trace: no data");
    ts_trace *t = new_trace();
    if (!t) return TS_ERR_NOMEM;
    /* A 64-byte aligned copy, so values are aligned as they would be in a map. */
    void *copy = NULL;
    if (posix_memalign(&copy, TRF_ALIGN, size ? size : 1) != 0) copy = NULL;
    t->owned = copy;
    if (!t->owned) {
        free(t);
        return ts_fail(TS_ERR_NOMEM, "trace: no memory for %zu bytes", size);
    }
    if (size) memcpy(t->owned, data, size);
    t->data = t->owned;
    t->size = size;
    ts_status s = parse_all(t);
    if (s) {
        ts_trace_close(t);
        return s;
    }
    *out = t;
    return TS_OK;
}

ts_status ts_trace_open(const char *path, ts_trace **out) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        char tmp[4096];
        struct stat st;
        if (err == ENOENT && snprintf(tmp, sizeof tmp, "%s.tmp", path) < (int)sizeof tmp && stat(tmp, &st) == 0)
            return ts_fail(TS_ERR_IO, "trace: %s does not exist, but %s does (a run that did not finish): open that",
                           path, tmp);
        return ts_fail(TS_ERR_IO, "trace: cannot open %s: %s", path, strerror(err));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return ts_fail(TS_ERR_IO, "trace: %s is not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return ts_fail(TS_ERR_FORMAT, "trace: %s is empty", path);
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return ts_fail(TS_ERR_IO, "trace: cannot map %s: %s", path, strerror(errno));
    ts_trace *t = new_trace();
    if (!t) {
        munmap(map, (size_t)st.st_size);
        return TS_ERR_NOMEM;
    }
    t->map = map;
    t->data = map;
    t->size = (uint64_t)st.st_size;
    ts_status s = parse_all(t);
    if (s) {
        char message[512];
        snprintf(message, sizeof message, "%s", ts_last_error());
        ts_trace_close(t);
        return ts_fail(s, "%s (%s)", message, path);
    }
    *out = t;
    return TS_OK;
}

void ts_trace_close(ts_trace *t) {
    if (!t) return;
    if (t->map) munmap(t->map, (size_t)t->size);
    free(t->owned);
    free(t->meta);
    for (int side = 0; side < 2; side++) {
        for (int i = 0; i < t->n_tokens[side]; i++) free(t->tokens[side][i]);
        free(t->tokens[side]);
    }
    for (int side = 0; side < 2; side++) {
        for (int i = 0; t->batch_tokens[side] && i < t->n_batch_lists[side] * t->batch_len[side]; i++)
            free(t->batch_tokens[side][i]);
        free(t->batch_tokens[side]);
    }
    for (int64_t i = 0; i < t->n; i++) free(t->extra[i].gathered);
    pthread_mutex_destroy(&t->lock);
    free(t->steps);
    free(t->extra);
    free(t->table);
    free(t->next_same);
    free(t);
}

/* ---- lookups ---- */

int64_t ts_trace_count(const ts_trace *t) { return t->n; }

const ts_trace_step *ts_trace_step_at(const ts_trace *t, int64_t i) {
    return i >= 0 && i < t->n ? &t->steps[i] : NULL;
}

int64_t ts_trace_find(const ts_trace *t, const char *name) {
    if (!name || !t->table) return -1;
    uint64_t h = hash_name(name) & t->table_mask;
    while (t->table[h] >= 0) {
        if (strcmp(t->steps[t->table[h]].name, name) == 0) return t->table[h];
        h = (h + 1) & t->table_mask;
    }
    return -1;
}

int64_t ts_trace_find_next(const ts_trace *t, int64_t i) {
    return i >= 0 && i < t->n ? t->next_same[i] : -1;
}

int64_t ts_trace_find_glob(const ts_trace *t, const char *glob, int64_t from) {
    if (!glob) return -1;
    for (int64_t i = from < 0 ? 0 : from; i < t->n; i++)
        if (fnmatch(glob, t->steps[i].name, 0) == 0) return i;
    return -1;
}

/* Check a stored step's values against their CRC, once. */
static ts_status stored_values(ts_trace *t, int64_t i, const float **values) {
    const ts_trace_step *step = &t->steps[i];
    step_extra *x = &t->extra[i];
    unsigned char state = atomic_load(&x->checked);
    if (state == VALUES_UNCHECKED) {
        bool good = trf_crc32(0, t->data + x->values_offset, (size_t)step->values_count * 4) == x->values_crc;
        state = good ? VALUES_GOOD : VALUES_BAD;
        atomic_store(&x->checked, state);
    }
    if (state == VALUES_BAD)
        return ts_fail(TS_ERR_FORMAT, "trace: step %lld '%s': its values fail their CRC (the file is damaged there)",
                       (long long)i, step->name);
    *values = (const float *)(const void *)(t->data + x->values_offset);
    return TS_OK;
}

ts_status ts_trace_verify(ts_trace *t, int64_t *n_bad) {
    if (atomic_load(&t->verified)) {
        if (n_bad) *n_bad = t->n_damaged;
        return ts_sticky_replay(&t->damage);
    }
    int64_t bad = 0;
    char list[400] = "";
    size_t at = 0;
    for (int64_t i = 0; i < t->n; i++) {
        const ts_trace_step *step = &t->steps[i];
        const float *v;
        /* the record's headers as the file holds them (the index keeps copies, which open reads) */
        const unsigned char *p = t->data + step->file_offset;
        uint64_t prefix = t->extra[i].values_offset - step->file_offset;
        const unsigned char *sfx = p + step->record_bytes - TRF_SUFFIX_SIZE;
        bool header = memcmp(p, TRF_PREFIX_MAGIC, 4) == 0 && memcmp(sfx, TRF_SUFFIX_MAGIC, 4) == 0 &&
                      trf_crc32(trf_crc32(0, p, (size_t)prefix), sfx, TRF_S_RECORD_CRC) == trf_get32(sfx + TRF_S_RECORD_CRC);
        if (header && (!step->has_values || step->view_of >= 0 || stored_values(t, i, &v) == TS_OK)) continue;
        if (bad++ < 3 && at < sizeof list) {
            char name[80];
            size_t n = strlen(step->name);
            safe_name(name, sizeof name, (const unsigned char *)step->name, n);
            at += (size_t)snprintf(list + at, sizeof list - at, "%sstep %lld '%s'", bad > 1 ? ", " : "",
                                   (long long)i, name);
        }
    }
    if (n_bad) *n_bad = bad;
    t->n_damaged = bad;
    if (bad)
        ts_sticky_fail(&t->damage, TS_ERR_FORMAT, "trace: %lld record%s damaged (its own CRC fails%s): %s%s",
                       (long long)bad, bad == 1 ? " is" : "s are", bad == 1 ? "" : ", each", list, bad > 3 ? ", ..." : "");
    atomic_store(&t->verified, true);
    return ts_sticky_replay(&t->damage);
}

/* Whether a view's strides walk its base's values in order, so the view is
 * a run of them and needs no copy. */
static bool view_in_place(const ts_trace_step *step, const step_extra *x) {
    if (x->view_scale != 0 || step->view_relu) return false;
    int64_t expect = 1;
    for (int d = step->rank - 1; d >= 0; d--) {
        if (step->values_shape[d] != 1 && x->view_strides[d] != expect) return false;
        expect *= step->values_shape[d];
    }
    return true;
}

/* The view's values in row-major order. A scaled view multiplies as the
 * model did (one float product by a power of two) and a ReLU view compares
 * as its kernels do, so the numbers are the model's to the bit. */
static void gather_view(float *out, const float *base, const ts_trace_step *step, const step_extra *x) {
    int64_t idx[TS_MAX_RANK] = {0};
    int rank = step->rank;
    float factor = step->view_factor;
    bool relu = step->view_relu;
    for (int64_t k = 0; k < step->values_count; k++) {
        int64_t at = x->view_offset;
        for (int d = 0; d < rank; d++) at += idx[d] * x->view_strides[d];
        float v = base[at] * factor;
        out[k] = relu && v < 0 ? 0.0f : v; /* the model's ReLU: -0 and NaN stay */
        for (int d = rank - 1; d >= 0; d--) {
            if (++idx[d] < step->values_shape[d]) break;
            idx[d] = 0;
        }
    }
}

ts_status ts_trace_values(ts_trace *t, int64_t i, const float **values) {
    *values = NULL;
    if (i < 0 || i >= t->n)
        return ts_fail(TS_ERR_ARG, "trace: no step %lld (%lld steps)", (long long)i, (long long)t->n);
    const ts_trace_step *step = &t->steps[i];
    if (!step->has_values)
        return ts_fail(TS_ERR_ARG, "trace: step %lld '%s' keeps no values (traced at level %s)", (long long)i,
                       step->name, step->has_stats ? "stats" : "shapes");
    if (step->view_of < 0) return stored_values(t, i, values);
    const float *base;
    ts_status s = stored_values(t, step->view_of, &base);
    if (s) return s;
    step_extra *x = &t->extra[i];
    if (view_in_place(step, x)) {
        *values = base + x->view_offset;
        return TS_OK;
    }
    pthread_mutex_lock(&t->lock);
    if (!x->gathered) {
        x->gathered = malloc((size_t)(step->values_count ? step->values_count : 1) * sizeof(float));
        if (x->gathered) gather_view(x->gathered, base, step, x);
    }
    *values = x->gathered;
    pthread_mutex_unlock(&t->lock);
    if (!*values)
        return ts_fail(TS_ERR_NOMEM, "trace: no memory to gather step %lld '%s' (%lld values)", (long long)i,
                       step->name, (long long)step->values_count);
    return TS_OK;
}

ts_status ts_trace_histogram(ts_trace *t, int64_t i, uint64_t hist[TS_TRACE_HIST_BINS]) {
    memset(hist, 0, TS_TRACE_HIST_BINS * sizeof *hist);
    if (i < 0 || i >= t->n)
        return ts_fail(TS_ERR_ARG, "trace: no step %lld (%lld steps)", (long long)i, (long long)t->n);
    const ts_trace_step *step = &t->steps[i];
    if (!step->has_stats)
        return ts_fail(TS_ERR_ARG, "trace: step %lld '%s' has no statistics (traced at level shapes)", (long long)i,
                       step->name);
    if (!step->hist_from_values) {
        memcpy(hist, step->stats.hist, TS_TRACE_HIST_BINS * sizeof *hist);
        return TS_OK;
    }
    step_extra *x = &t->extra[i];
    pthread_mutex_lock(&t->lock);
    bool done = x->hist_done;
    if (done) memcpy(hist, x->hist, TS_TRACE_HIST_BINS * sizeof *hist);
    pthread_mutex_unlock(&t->lock);
    if (done) return TS_OK;
    /* The writer's own binning, over the same numbers: the same counts. */
    const float *values;
    ts_status s = ts_trace_values(t, i, &values);
    if (s) return s;
    ts_trace_stats st = step->stats;
    if (st.finite > 0) {
        trf_hist_plan plan;
        trf_hist_plan_init(&plan, &st);
        trf_hist_add(hist, values, step->values_count, &plan, trf_stats_current());
    }
    pthread_mutex_lock(&t->lock);
    memcpy(x->hist, hist, TS_TRACE_HIST_BINS * sizeof *hist);
    x->hist_done = true;
    pthread_mutex_unlock(&t->lock);
    return TS_OK;
}

void ts_trace_release_values(ts_trace *t, int64_t i) {
    if (i < 0 || i >= t->n) return;
    pthread_mutex_lock(&t->lock);
    free(t->extra[i].gathered);
    t->extra[i].gathered = NULL;
    pthread_mutex_unlock(&t->lock);
}

ts_status ts_trace_tensor(ts_trace *t, int64_t i, ts_tensor *out) {
    const float *values;
    ts_status s = ts_trace_values(t, i, &values);
    if (s) return s;
    const ts_trace_step *step = &t->steps[i];
    /* The view API takes float*; the map is read-only, as the header says. */
    float *data;
    memcpy(&data, &values, sizeof data);
    return ts_tensor_view(out, data, step->rank, step->values_shape);
}

const char *ts_trace_metadata(const ts_trace *t) { return t->meta ? t->meta : "{}"; }

int ts_trace_token_count(const ts_trace *t, ts_trace_side side) {
    return (unsigned)side < 2 ? t->n_tokens[side] : 0;
}

const char *ts_trace_token(const ts_trace *t, ts_trace_side side, int i) {
    if ((unsigned)side >= 2 || i < 0 || i >= t->n_tokens[side]) return NULL;
    return t->tokens[side][i];
}

int ts_trace_batch_token_count(const ts_trace *t, ts_trace_side side, int b) {
    if ((unsigned)side >= 2) return 0;
    return b >= 0 && b < t->n_batch_lists[side] ? t->batch_len[side] : 0;
}

const char *ts_trace_batch_token(const ts_trace *t, ts_trace_side side, int b, int i) {
    if ((unsigned)side >= 2 || b < 0 || b >= t->n_batch_lists[side] || i < 0 || i >= t->batch_len[side]) return NULL;
    const char *s = t->batch_tokens[side][(size_t)b * t->batch_len[side] + i];
    return s ? s : "";
}

bool ts_trace_complete(const ts_trace *t) { return t->complete; }

const char *ts_trace_warning(const ts_trace *t) { return t->warning; }

uint64_t ts_trace_file_size(const ts_trace *t) { return t->size; }
