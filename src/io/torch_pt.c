/* torch_pt: torch.save files read as a safetensors file is (io.h, "torch_pt").
 *
 * torch.save (PyTorch 1.6 and later) writes a zip archive whose members are
 * stored, not compressed: ARCHIVE/data.pkl (the pickled object),
 * ARCHIVE/data/KEY (one storage's bytes each), ARCHIVE/byteorder ("little"),
 * ARCHIVE/version. A tensor in the pickle names its storage by KEY and views
 * it with an element offset, sizes and strides; several tensors may share a
 * storage (views, tied weights). Here each tensor the state_dict holds is
 * copied into one buffer, contiguous, in its stored dtype, and described as a
 * safetensors entry; the float conversions are safetensors.c's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zip.h>

#include "tscope/io.h"

#define MEMBER_MAX 512

typedef struct pt_file {
    const char *path;
    uint64_t file_size;       /* no stored member can be larger */
    zip_t *zip;
    char archive[MEMBER_MAX]; /* "ARCHIVE/" before every member's name */
} pt_file;

bool ts_torch_pt_is(const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return false;
    unsigned char magic[4] = {0};
    size_t got = fread(magic, 1, 4, fp);
    fclose(fp);
    return got == 4 && memcmp(magic, "PK\3\4", 4) == 0;
}

/* ---- the archive ------------------------------------------------------------------ */

static ts_status open_zip(pt_file *z, const char *path) {
    int err = 0;
    z->path = path;
    struct stat sb;
    if (stat(path, &sb) != 0) return ts_fail(TS_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    z->file_size = (uint64_t)sb.st_size;
    z->zip = zip_open(path, ZIP_RDONLY | ZIP_CHECKCONS, &err);
    if (!z->zip) {
        zip_error_t e;
        zip_error_init_with_code(&e, err);
        ts_status st = ts_fail(err == ZIP_ER_OPEN || err == ZIP_ER_READ ? TS_ERR_IO : TS_ERR_FORMAT,
                               "%s: not a readable torch.save archive (zip: %s)", path, zip_error_strerror(&e));
        zip_error_fini(&e);
        return st;
    }
    /* the pickle is ARCHIVE/data.pkl: the one data.pkl one folder down */
    zip_int64_t n = zip_get_num_entries(z->zip, 0);
    int found = 0;
    for (zip_int64_t i = 0; i < n; i++) {
        const char *name = zip_get_name(z->zip, (zip_uint64_t)i, 0);
        const char *slash = name ? strchr(name, '/') : NULL;
        if (!slash || strcmp(slash + 1, "data.pkl") != 0 || (size_t)(slash - name) + 2 > sizeof z->archive) continue;
        if (found++ == 0) snprintf(z->archive, sizeof z->archive, "%.*s/", (int)(slash - name), name);
    }
    if (found != 1) {
        zip_discard(z->zip);
        z->zip = NULL;
        return ts_fail(TS_ERR_FORMAT, "%s: a zip archive with %s ARCHIVE/data.pkl: not a torch.save file", path,
                       found ? "more than one" : "no");
    }
    return TS_OK;
}

/* Read member ARCHIVE/rest whole; it must be stored and, when want is not
 * UINT64_MAX, exactly want bytes long. */
static ts_status read_member(const pt_file *z, const char *rest, uint64_t want, unsigned char **out, uint64_t *size) {
    char name[MEMBER_MAX + 80];
    snprintf(name, sizeof name, "%s%s", z->archive, rest);
    *out = NULL;
    zip_stat_t s;
    zip_int64_t i = zip_name_locate(z->zip, name, 0);
    if (i < 0 || zip_stat_index(z->zip, (zip_uint64_t)i, 0, &s) != 0)
        return ts_fail(TS_ERR_FORMAT, "%s: the archive has no member %s", z->path, name);
    if (!(s.valid & ZIP_STAT_SIZE) || !(s.valid & ZIP_STAT_COMP_METHOD) || s.comp_method != ZIP_CM_STORE ||
        ((s.valid & ZIP_STAT_ENCRYPTION_METHOD) && s.encryption_method != ZIP_EM_NONE))
        return ts_fail(TS_ERR_FORMAT, "%s: member %s is compressed or encrypted; torch.save stores its members as "
                       "they are", z->path, name);
    /* a stored member's bytes are in the file: a size past it is a lie, not an allocation to make */
    if (s.size > z->file_size || ((s.valid & ZIP_STAT_COMP_SIZE) && s.comp_size != s.size))
        return ts_fail(TS_ERR_FORMAT, "%s: member %s claims %llu bytes, more than the file holds", z->path, name,
                       (unsigned long long)s.size);
    if (want != UINT64_MAX && s.size != want)
        return ts_fail(TS_ERR_FORMAT, "%s: member %s holds %llu bytes, the pickle says its storage has %llu bytes", z->path,
                       name, (unsigned long long)s.size, (unsigned long long)want);
    unsigned char *buf = malloc(s.size ? (size_t)s.size : 1);
    if (!buf) return ts_fail(TS_ERR_NOMEM, "%s: out of memory reading %s", z->path, name);
    zip_file_t *fp = zip_fopen_index(z->zip, (zip_uint64_t)i, 0);
    zip_int64_t got = fp ? zip_fread(fp, buf, s.size) : -1;
    /* reading to the end makes libzip check the member's CRC-32 */
    char extra;
    zip_int64_t more = fp && got == (zip_int64_t)s.size ? zip_fread(fp, &extra, 1) : -1;
    if (!fp || got != (zip_int64_t)s.size || more != 0) {
        const char *why = fp ? zip_file_strerror(fp) : zip_strerror(z->zip);
        ts_status st = ts_fail(TS_ERR_FORMAT, "%s: cannot read member %s (zip: %s)", z->path, name, why);
        if (fp) zip_fclose(fp);
        free(buf);
        return st;
    }
    zip_fclose(fp);
    *out = buf;
    *size = s.size;
    return TS_OK;
}

/* ---- the state_dict ----------------------------------------------------------------- */

static bool has_tensor(const ts_pk *d) {
    if (!d || d->kind != TS_PK_DICT) return false;
    for (int64_t i = 1; i < d->n; i += 2)
        if (d->items[i]->kind == TS_PK_TENSOR) return true;
    return false;
}

/* "a, b, c" of a dict's string keys, cut to fit. */
static void keys_text(const ts_pk *d, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = '\0';
    for (int64_t i = 0; i + 1 < d->n && used + 8 < size; i += 2) {
        const ts_pk *k = d->items[i];
        int w = snprintf(buf + used, size - used, "%s%.40s", i ? ", " : "", k->kind == TS_PK_STR ? k->s : "?");
        if (w < 0 || (size_t)w >= size - used) {
            snprintf(buf + (used < size - 5 ? used : size - 5), 5, "...");
            return;
        }
        used += (size_t)w;
    }
}

static const char *const sd_keys[] = {"model", "state_dict", "model_state_dict", NULL};

/* The dict of tensors, and where: "model", ... or "" for the object itself. */
static ts_status find_state_dict(const char *path, const ts_pk *root, const ts_pk **sd, const char **where) {
    if (root->kind == TS_PK_OBJECT)
        return ts_fail(TS_ERR_UNSUPPORTED, "%s holds a pickled %s object, not a state_dict (tscope never runs "
                       "pickled code): save model.state_dict() instead", path, root->s);
    if (root->kind != TS_PK_DICT)
        return ts_fail(TS_ERR_FORMAT, "%s holds a %s, not a state_dict (a dict of tensors)", path,
                       ts_pk_kind_name(root));
    for (int k = 0; sd_keys[k]; k++) {
        const ts_pk *v = ts_pk_get(root, sd_keys[k]);
        if (has_tensor(v)) {
            *sd = v, *where = sd_keys[k];
            return TS_OK;
        }
    }
    bool all = root->n > 0;
    int64_t odd = -1; /* the first entry that is not a tensor */
    for (int64_t i = 1; i < root->n && all; i += 2)
        if (!(all = root->items[i]->kind == TS_PK_TENSOR || root->items[i]->kind == TS_PK_NONE)) odd = i - 1;
    if (all && has_tensor(root)) {
        *sd = root, *where = "";
        return TS_OK;
    }
    if (has_tensor(root) && odd >= 0 && root->items[odd + 1]->kind != TS_PK_OBJECT)
        return ts_fail(TS_ERR_FORMAT, "%s: a state_dict of tensors but its entry %.200s is not a tensor (a pickled %s)", path,
                       root->items[odd]->kind == TS_PK_STR ? root->items[odd]->s : "(not a string)",
                       ts_pk_kind_name(root->items[odd + 1]));
    for (int64_t i = 0; i + 1 < root->n; i += 2)
        if (root->items[i + 1]->kind == TS_PK_OBJECT)
            return ts_fail(TS_ERR_UNSUPPORTED, "%s: entry %s is what calling %s would return; tscope never runs "
                           "pickled code, and reads tensors only", path,
                           root->items[i]->kind == TS_PK_STR ? root->items[i]->s : "?", root->items[i + 1]->s);
    char keys[400];
    keys_text(root, keys, sizeof keys);
    return ts_fail(TS_ERR_FORMAT, "%s holds no state_dict: a dict of %lld entries (%s) that is neither tensors nor "
                   "has a dict of them under model, state_dict or model_state_dict", path, (long long)(root->n / 2),
                   keys[0] ? keys : "none");
}

/* The elements a tensor reads, checked against its storage: its element count,
 * and the last element's index + 1 (0 for an empty tensor). */
static ts_status tensor_extent(const char *path, const char *name, const ts_pk *t, uint64_t *numel) {
    const uint64_t limit = 1ull << 40;
    uint64_t n = 1, last = (uint64_t)t->offset;
    bool empty = false;
    for (int d = 0; d < t->rank; d++) {
        uint64_t size = (uint64_t)t->shape[d], stride = (uint64_t)t->stride[d];
        if (size == 0) empty = true;
        if (size > limit || (n && size > limit / n)) goto too_big;
        n *= size;
        if (size > 1) {
            if (stride > limit || (size - 1) > limit / (stride ? stride : 1)) goto too_big;
            last += (size - 1) * stride;
            if (last > limit) goto too_big;
        }
    }
    *numel = empty ? 0 : n;
    if (!empty && last >= (uint64_t)t->storage->i)
        return ts_fail(TS_ERR_FORMAT, "%s: tensor %s reads element %llu of storage %s, which has %lld: the storage is "
                       "shorter than the tensor needs", path, name, (unsigned long long)last, t->storage->s,
                       (long long)t->storage->i);
    return TS_OK;
too_big:
    return ts_fail(TS_ERR_FORMAT, "%s: tensor %s has sizes or strides past 2^40 elements", path, name);
}

/* Copy t's elements, row-major in its shape, from its storage's bytes. */
static void gather(const ts_pk *t, unsigned char *dst) {
    const ts_pk *s = t->storage;
    int es = s->elem_size, rank = t->rank;
    int64_t idx[TS_MAX_RANK] = {0};
    uint64_t numel = 1;
    for (int d = 0; d < rank; d++) numel *= (uint64_t)t->shape[d];
    /* the usual case, a row-major tensor: one copy */
    bool contiguous = true;
    int64_t expect = 1;
    for (int d = rank - 1; d >= 0 && contiguous; d--) {
        contiguous = t->shape[d] == 1 || t->stride[d] == expect;
        expect *= t->shape[d];
    }
    if (contiguous) {
        if (numel) memcpy(dst, s->bytes + (uint64_t)t->offset * (uint64_t)es, (size_t)(numel * (uint64_t)es));
        return;
    }
    for (uint64_t k = 0; k < numel; k++) {
        int64_t at = t->offset;
        for (int d = 0; d < rank; d++) at += idx[d] * t->stride[d];
        memcpy(dst + k * (uint64_t)es, s->bytes + (uint64_t)at * (uint64_t)es, (size_t)es);
        for (int d = rank - 1; d >= 0; d--) {
            if (++idx[d] < t->shape[d]) break;
            idx[d] = 0;
        }
    }
}

/* Read every storage the state_dict's tensors use, once. */
static ts_status read_storages(const pt_file *z, const ts_pk *sd) {
    for (int64_t i = 1; i < sd->n; i += 2) {
        const ts_pk *t = sd->items[i];
        if (t->kind != TS_PK_TENSOR || t->storage->bytes) continue;
        ts_pk *s = (ts_pk *)t->storage;
        uint64_t want = (uint64_t)s->i * (uint64_t)s->elem_size;
        if ((uint64_t)s->i > (1ull << 40))
            return ts_fail(TS_ERR_FORMAT, "%s: storage %s claims %lld elements", z->path, s->s, (long long)s->i);
        char rest[96];
        snprintf(rest, sizeof rest, "data/%s", s->s);
        TS_TRY(read_member(z, rest, want, &s->bytes, &s->n_bytes));
    }
    return TS_OK;
}

/* Entries for the state_dict's tensors, their bytes in f->owned. Tensors may
 * share storages (tied weights, views), but a few bytes of pickle naming one
 * storage a million times must not become a million copies: the copies may
 * take at most 8 times the file (plus 1 MiB). */
static ts_status make_entries(ts_safetensors *f, const ts_pk *sd, uint64_t file_size) {
    int64_t n = 0;
    uint64_t total = 0;
    for (int64_t i = 0; i + 1 < sd->n; i += 2) {
        const ts_pk *k = sd->items[i], *t = sd->items[i + 1];
        if (t->kind == TS_PK_NONE) continue;
        if (k->kind != TS_PK_STR || k->len == 0 || strlen(k->s) != k->len || k->len > 4000)
            return ts_fail(TS_ERR_FORMAT, "%s: the state_dict has a key that is not a name (%s)", f->path,
                           ts_pk_kind_name(k));
        if (t->kind != TS_PK_TENSOR)
            return ts_fail(TS_ERR_UNSUPPORTED, "%s: state_dict entry %s is a %s, not a tensor", f->path, k->s,
                           ts_pk_kind_name(t));
        uint64_t numel = 0;
        TS_TRY(tensor_extent(f->path, k->s, t, &numel));
        uint64_t bytes = (numel * (uint64_t)t->storage->elem_size + 7) & ~7ull;
        if (total > 8 * file_size + (1u << 20) - bytes || bytes > 8 * file_size + (1u << 20))
            return ts_fail(TS_ERR_FORMAT, "%s: its tensors would take more than 8 times the file's %llu bytes: the "
                           "same storage named over and over", f->path, (unsigned long long)file_size);
        total += bytes;
        n++;
    }
    if (n > (1 << 24)) return ts_fail(TS_ERR_FORMAT, "%s: %lld tensors is too many", f->path, (long long)n);
    f->entries = calloc((size_t)n + 1, sizeof *f->entries);
    f->by_name = malloc(((size_t)n + 1) * sizeof *f->by_name);
    f->owned = malloc(total ? (size_t)total : 8);
    if (!f->entries || !f->by_name || !f->owned) return ts_fail(TS_ERR_NOMEM, "%s: out of memory", f->path);
    uint64_t at = 0;
    for (int64_t i = 0; i + 1 < sd->n; i += 2) {
        const ts_pk *t = sd->items[i + 1];
        if (t->kind != TS_PK_TENSOR) continue;
        ts_st_entry *e = &f->entries[f->count];
        if (!(e->name = strdup(sd->items[i]->s))) return ts_fail(TS_ERR_NOMEM, "%s: out of memory", f->path);
        f->by_name[f->count++] = e;
        e->dtype = t->storage->dtype;
        snprintf(e->dtype_name, sizeof e->dtype_name, "%s", t->storage->dtype_name);
        e->rank = t->rank;
        uint64_t numel = 1;
        for (int d = 0; d < t->rank; d++) e->shape[d] = t->shape[d], numel *= (uint64_t)t->shape[d];
        gather(t, f->owned + at);
        e->begin = at;
        e->end = at + numel * (uint64_t)t->storage->elem_size;
        at += (e->end - e->begin + 7) & ~7ull;
    }
    f->data = f->owned;
    f->data_size = total;
    return TS_OK;
}

static int cmp_by_name(const void *a, const void *b) {
    return strcmp((*(ts_st_entry *const *)a)->name, (*(ts_st_entry *const *)b)->name);
}

/* A pickled dict cannot repeat a key, but a hand-made pickle can. */
static ts_status sort_names(ts_safetensors *f) {
    qsort(f->by_name, (size_t)f->count, sizeof *f->by_name, cmp_by_name);
    for (int i = 1; i < f->count; i++)
        if (strcmp(f->by_name[i - 1]->name, f->by_name[i]->name) == 0)
            return ts_fail(TS_ERR_FORMAT, "%s: tensor %s appears twice in the state_dict", f->path, f->by_name[i]->name);
    return TS_OK;
}

/* ---- metadata ----------------------------------------------------------------------- */

static ts_status add_meta(ts_safetensors *f, const char *key, const char *value) {
    char **m = realloc(f->meta, sizeof *m * (size_t)(2 * f->meta_count + 3));
    if (!m) return ts_fail(TS_ERR_NOMEM, "%s: out of memory", f->path);
    f->meta = m;
    m[2 * f->meta_count] = strdup(key);
    m[2 * f->meta_count + 1] = strdup(value);
    m[2 * f->meta_count + 2] = NULL;
    if (!m[2 * f->meta_count] || !m[2 * f->meta_count + 1]) {
        free(m[2 * f->meta_count]);
        free(m[2 * f->meta_count + 1]);
        m[2 * f->meta_count] = NULL;
        return ts_fail(TS_ERR_NOMEM, "%s: out of memory", f->path);
    }
    f->meta_count++;
    return TS_OK;
}

/* model_args' scalars as "model_args.KEY": nanoGPT's sizes and its bias flag. */
static ts_status model_args_meta(ts_safetensors *f, const ts_pk *root, const char *where) {
    TS_TRY(add_meta(f, "torch.state_dict", where));
    const ts_pk *args = ts_pk_get(root, "model_args");
    if (!args || !where[0]) return TS_OK;
    if (args->kind != TS_PK_DICT)
        return ts_fail(TS_ERR_FORMAT, "%s: model_args is not a dict of the model's settings", f->path);
    TS_TRY(add_meta(f, "torch.model_args", "dict")); /* present: its n_head is then required */
    for (int64_t i = 0; i + 1 < args->n; i += 2) {
        const ts_pk *k = args->items[i], *v = args->items[i + 1];
        if (k->kind != TS_PK_STR || k->len > 64 || strlen(k->s) != k->len) continue;
        char key[96], value[64];
        snprintf(key, sizeof key, "model_args.%s", k->s);
        if (v->kind == TS_PK_INT) snprintf(value, sizeof value, "%lld", (long long)v->i);
        else if (v->kind == TS_PK_BOOL) snprintf(value, sizeof value, "%s", v->i ? "True" : "False");
        else if (v->kind == TS_PK_FLOAT) snprintf(value, sizeof value, "%.17g", v->f);
        else if (v->kind == TS_PK_NONE) snprintf(value, sizeof value, "None");
        else if (v->kind == TS_PK_STR && v->len < sizeof value - 2 && strlen(v->s) == v->len)
            snprintf(value, sizeof value, "'%s'", v->s); /* quoted as Python prints it: '4' is not 4 */
        else snprintf(value, sizeof value, "(not a number or a string)"); /* named, not skipped */
        TS_TRY(add_meta(f, key, value));
    }
    return TS_OK;
}

/* ---- open ------------------------------------------------------------------------------ */

/* The archive's byteorder member, when there is one, must say little. */
static ts_status check_byteorder(const pt_file *z) {
    char name[MEMBER_MAX + 16];
    snprintf(name, sizeof name, "%sbyteorder", z->archive);
    if (zip_name_locate(z->zip, name, 0) < 0) return TS_OK;
    unsigned char *b;
    uint64_t n;
    TS_TRY(read_member(z, "byteorder", UINT64_MAX, &b, &n));
    bool little = n == 6 && memcmp(b, "little", 6) == 0;
    free(b);
    if (!little) return ts_fail(TS_ERR_UNSUPPORTED, "%s: its storages are not little-endian (byteorder)", z->path);
    return TS_OK;
}

ts_status ts_torch_pt_open(ts_safetensors *f, const char *path) {
    memset(f, 0, sizeof *f);
    f->torch_pt = true;
    if (!(f->path = strdup(path))) return ts_fail(TS_ERR_NOMEM, "out of memory");
    pt_file z = {0};
    ts_pickle p = {0};
    unsigned char *pkl = NULL;
    uint64_t pkl_size = 0;
    const ts_pk *sd = NULL;
    const char *where = "";
    char what[4200];
    snprintf(what, sizeof what, "%s (its pickle)", path);
    ts_status st = open_zip(&z, path);
    if (!st) st = check_byteorder(&z);
    if (!st) st = read_member(&z, "data.pkl", UINT64_MAX, &pkl, &pkl_size);
    if (!st) st = ts_pickle_parse(&p, pkl, (size_t)pkl_size, what);
    if (!st) st = find_state_dict(path, p.root, &sd, &where);
    if (!st) st = read_storages(&z, sd);
    if (!st) st = make_entries(f, sd, z.file_size);
    if (!st) st = sort_names(f);
    if (!st) st = model_args_meta(f, p.root, where);
    ts_pickle_free(&p);
    free(pkl);
    if (z.zip) zip_discard(z.zip);
    if (st) ts_safetensors_close(f);
    return st;
}
