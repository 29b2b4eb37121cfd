/* npz: NumPy .npz archives written as a stream of stored zip members. */
#include "tscope/io.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>


/* Zip record signatures and sizes (APPNOTE.TXT, sections 4.3.7 - 4.3.16). */
#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_END 0x06054b50u
#define SIG_END64 0x06064b50u
#define SIG_LOCATOR64 0x07064b50u
#define LOCAL_SIZE 30
#define CENTRAL_SIZE 46
#define END_SIZE 22
#define END64_SIZE 56
#define LOCATOR64_SIZE 20
#define MAX32 0xffffffffu
#define MAX16 0xffffu
#define VERSION_ZIP64 45 /* "4.5: uses ZIP64 format extensions" */
#define VERSION_PLAIN 20
#define FLAG_UTF8 0x0800u
#define MAX_NAME 60000

/* ---- little-endian packing ---------------------------------------------- */

typedef struct packer {
    unsigned char *p;
} packer;

static void put(packer *k, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) *k->p++ = (unsigned char)(v >> (8 * i));
}

/* ---- members and names --------------------------------------------------- */

static uint64_t hash_name(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Index+1 of the member with this name, or the free slot to put it in (as -slot-1). */
static int64_t lookup(const ts_npz *z, const char *name) {
    uint64_t mask = (uint64_t)z->n_slots - 1;
    for (uint64_t i = hash_name(name) & mask;; i = (i + 1) & mask) {
        int64_t v = z->slots[i];
        if (v == 0) return -(int64_t)i - 1;
        if (strcmp(z->members[v - 1].name, name) == 0) return v;
    }
}

static ts_status grow(ts_npz *z) {
    if (z->count + 1 <= z->cap && (z->count + 1) * 2 <= z->n_slots) return TS_OK;
    if (z->count + 1 > z->cap) {
        int64_t cap = z->cap ? z->cap * 2 : 64;
        ts_npz_member *m = realloc(z->members, (size_t)cap * sizeof *m);
        if (!m) return ts_fail(TS_ERR_NOMEM, "%s: out of memory", z->out.path);
        z->members = m;
        z->cap = cap;
    }
    if ((z->count + 1) * 2 > z->n_slots) {
        int64_t n = z->n_slots ? z->n_slots * 2 : 128;
        int64_t *slots = calloc((size_t)n, sizeof *slots);
        if (!slots) return ts_fail(TS_ERR_NOMEM, "%s: out of memory", z->out.path);
        free(z->slots);
        z->slots = slots;
        z->n_slots = n;
        for (int64_t i = 0; i < z->count; i++) z->slots[-lookup(z, z->members[i].name) - 1] = i + 1;
    }
    return TS_OK;
}

static void dos_now(ts_npz *z) {
    time_t now = time(NULL);
    struct tm tm;
    if (!localtime_r(&now, &tm) || tm.tm_year < 80) {
        z->dos_date = (1 << 5) | 1; /* 1980-01-01, the earliest zip can say */
        z->dos_time = 0;
        return;
    }
    z->dos_time = (uint16_t)(tm.tm_hour << 11 | tm.tm_min << 5 | tm.tm_sec / 2);
    z->dos_date = (uint16_t)((tm.tm_year - 80) << 9 | (tm.tm_mon + 1) << 5 | tm.tm_mday);
}

ts_status ts_npz_open(ts_npz *z, const char *path) {
    memset(z, 0, sizeof *z);
    dos_now(z);
    return ts_outfile_open(&z->out, path);
}

static void free_members(ts_npz *z) {
    for (int64_t i = 0; i < z->count; i++) free(z->members[i].name);
    free(z->members);
    free(z->slots);
}

void ts_npz_abort(ts_npz *z) {
    ts_outfile_abort(&z->out);
    free_members(z);
    memset(z, 0, sizeof *z);
}

/* ---- writing a member ------------------------------------------------------ */

static ts_status crc_run(void *ctx, const float *run, int64_t n) {
    uint32_t *crc = ctx;
    *crc = (uint32_t)crc32_z(*crc, (const Bytef *)run, (size_t)n * sizeof(float));
    return TS_OK;
}

/* CRC-32 of t's float32 bytes in row-major order (t may be strided). */
static uint32_t tensor_crc(uint32_t crc, const ts_tensor *t) {
    ts_tensor_each_run(t, crc_run, &crc);
    return crc;
}

static bool member_zip64(const ts_npz *z, const ts_npz_member *m) {
    return z->force_zip64 || m->size >= MAX32;
}

static bool name_is_utf8(const char *name) {
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        if (*p >= 0x80) return true;
    return false;
}

static ts_status check_name(const ts_npz *z, const char *name) {
    if (!name || !name[0]) return ts_fail(TS_ERR_ARG, "%s: an array has an empty name", z->out.path);
    if (strlen(name) > MAX_NAME)
        return ts_fail(TS_ERR_ARG, "%s: array name %.40s... is too long for a zip member", z->out.path, name);
    return TS_OK;
}

ts_status ts_npz_add(ts_npz *z, const char *name, const ts_tensor *t) {
    if (z->out.err.status) return ts_outfile_write(&z->out, NULL, 0); /* replay the first error */
    ts_status st = check_name(z, name);
    if (st) return st;
    if (t->rank < 0 || t->rank > TS_MAX_RANK || (!t->data && ts_tensor_numel(t) > 0))
        return ts_fail(TS_ERR_ARG, "%s: array %s is not a valid tensor", z->out.path, name);
    if ((st = grow(z))) return st;

    size_t name_len = strlen(name) + 4;
    ts_npz_member m = {.name = malloc(name_len + 1), .offset = z->out.offset};
    if (!m.name) return ts_fail(TS_ERR_NOMEM, "%s: out of memory", z->out.path);
    memcpy(m.name, name, name_len - 4);
    memcpy(m.name + name_len - 4, ".npy", 5);
    int64_t at = lookup(z, m.name);
    if (at > 0) {
        free(m.name);
        return ts_fail(TS_ERR_ARG, "%s: array %s is added twice", z->out.path, name);
    }

    unsigned char npy[512];
    size_t npy_len = ts_npy_write_header(npy, sizeof npy, t->rank, t->shape);
    m.size = npy_len + (uint64_t)ts_tensor_numel(t) * sizeof(float);
    m.crc = tensor_crc((uint32_t)crc32_z(0, npy, npy_len), t);

    bool z64 = member_zip64(z, &m);
    unsigned char local[LOCAL_SIZE + 20];
    packer k = {local};
    put(&k, SIG_LOCAL, 4);
    put(&k, z64 ? VERSION_ZIP64 : VERSION_PLAIN, 2);
    put(&k, name_is_utf8(name) ? FLAG_UTF8 : 0, 2);
    put(&k, 0, 2); /* stored */
    put(&k, z->dos_time, 2);
    put(&k, z->dos_date, 2);
    put(&k, m.crc, 4);
    put(&k, z64 ? MAX32 : m.size, 4); /* compressed */
    put(&k, z64 ? MAX32 : m.size, 4); /* uncompressed */
    put(&k, name_len, 2);
    put(&k, z64 ? 20 : 0, 2);
    ts_outfile_write(&z->out, local, LOCAL_SIZE);
    ts_outfile_write(&z->out, m.name, name_len);
    if (z64) {
        k.p = local;
        put(&k, 0x0001, 2); /* zip64 extended information */
        put(&k, 16, 2);
        put(&k, m.size, 8);
        put(&k, m.size, 8);
        ts_outfile_write(&z->out, local, 20);
    }
    ts_outfile_write(&z->out, npy, npy_len);
    st = ts_outfile_write_tensor(&z->out, t);
    if (st) {
        free(m.name);
        return st;
    }
    z->slots[-at - 1] = z->count + 1;
    z->members[z->count++] = m;
    return TS_OK;
}

/* ---- the central directory ------------------------------------------------ */

static void write_central(ts_npz *z, const ts_npz_member *m) {
    bool big_size = member_zip64(z, m), big_offset = z->force_zip64 || m->offset >= MAX32;
    int extra = (big_size ? 16 : 0) + (big_offset ? 8 : 0);
    size_t name_len = strlen(m->name);
    unsigned char rec[CENTRAL_SIZE + 4 + 24];
    packer k = {rec};
    put(&k, SIG_CENTRAL, 4);
    put(&k, 3u << 8 | VERSION_ZIP64, 2); /* made by: Unix */
    put(&k, extra ? VERSION_ZIP64 : VERSION_PLAIN, 2);
    put(&k, name_is_utf8(m->name) ? FLAG_UTF8 : 0, 2);
    put(&k, 0, 2);
    put(&k, z->dos_time, 2);
    put(&k, z->dos_date, 2);
    put(&k, m->crc, 4);
    put(&k, big_size ? MAX32 : m->size, 4);
    put(&k, big_size ? MAX32 : m->size, 4);
    put(&k, name_len, 2);
    put(&k, extra ? extra + 4 : 0, 2);
    put(&k, 0, 2);               /* comment */
    put(&k, 0, 2);               /* disk */
    put(&k, 0, 2);               /* internal attributes */
    put(&k, 0100644u << 16, 4);  /* external: a regular file, rw-r--r-- */
    put(&k, big_offset ? MAX32 : m->offset, 4);
    ts_outfile_write(&z->out, rec, CENTRAL_SIZE);
    ts_outfile_write(&z->out, m->name, name_len);
    if (!extra) return;
    k.p = rec;
    put(&k, 0x0001, 2);
    put(&k, (uint64_t)extra, 2);
    /* Only the fields whose 32-bit slot says 0xffffffff, in this order. */
    if (big_size) {
        put(&k, m->size, 8);
        put(&k, m->size, 8);
    }
    if (big_offset) put(&k, m->offset, 8);
    ts_outfile_write(&z->out, rec, (size_t)(k.p - rec));
}

static void write_end(ts_npz *z, uint64_t cd_offset, uint64_t cd_size) {
    uint64_t n = (uint64_t)z->count;
    bool z64 = z->force_zip64 || n >= MAX16 || cd_offset >= MAX32 || cd_size >= MAX32;
    unsigned char rec[END64_SIZE + LOCATOR64_SIZE + END_SIZE];
    packer k = {rec};
    if (z64) {
        uint64_t end64_offset = z->out.offset;
        put(&k, SIG_END64, 4);
        put(&k, END64_SIZE - 12, 8); /* size of the rest of this record */
        put(&k, 3u << 8 | VERSION_ZIP64, 2);
        put(&k, VERSION_ZIP64, 2);
        put(&k, 0, 4);
        put(&k, 0, 4);
        put(&k, n, 8);
        put(&k, n, 8);
        put(&k, cd_size, 8);
        put(&k, cd_offset, 8);
        put(&k, SIG_LOCATOR64, 4);
        put(&k, 0, 4);
        put(&k, end64_offset, 8);
        put(&k, 1, 4);
    }
    put(&k, SIG_END, 4);
    put(&k, 0, 2);
    put(&k, 0, 2);
    /* With zip64 records, a field that does not fit says so with all ones
     * (and a forced archive says so everywhere, to test readers' zip64 path). */
    bool all = z->force_zip64;
    put(&k, all || n >= MAX16 ? MAX16 : n, 2);
    put(&k, all || n >= MAX16 ? MAX16 : n, 2);
    put(&k, all || cd_size >= MAX32 ? MAX32 : cd_size, 4);
    put(&k, all || cd_offset >= MAX32 ? MAX32 : cd_offset, 4);
    put(&k, 0, 2); /* comment */
    ts_outfile_write(&z->out, rec, (size_t)(k.p - rec));
}

ts_status ts_npz_close(ts_npz *z) {
    if (!z->out.fp && !z->out.err.status) {
        ts_npz_abort(z);
        return ts_fail(TS_ERR_ARG, "ts_npz_close: the archive is not open");
    }
    uint64_t cd_offset = z->out.offset;
    for (int64_t i = 0; i < z->count; i++) write_central(z, &z->members[i]);
    write_end(z, cd_offset, z->out.offset - cd_offset);
    ts_status st = ts_outfile_commit(&z->out);
    free_members(z);
    memset(z, 0, sizeof *z);
    return st;
}
