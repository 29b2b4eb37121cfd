/* File formats: safetensors, .npy and .npz written and read back; every
 * malformed input refused with a message naming the file (never a read out of
 * bounds: run under ASan too); an .npz checked by a small zip reader here
 * (CRC-32 of every member) and, when /usr/bin/python3 has NumPy, by np.load. */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "tscope/io.h"

static char tmpdir[256];

/* Fixtures live in tests/ref, relative to the repository root the tests run from. */
static const char *ref_dir(void) {
    const char *d = getenv("TSCOPE_REF_DIR");
    return d && d[0] ? d : "tests/ref";
}

static const char *tmp(const char *name) {
    static char buf[4][512];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

static void write_bytes(const char *path, const void *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (n) assert_int_equal(fwrite(bytes, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static unsigned char *read_bytes(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)size + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    *n = (size_t)size;
    return b;
}

static bool file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* How many entries of the temp dir start with prefix (leftover temp files). */
static int count_prefixed(const char *prefix) {
    DIR *d = opendir(tmpdir);
    assert_non_null(d);
    int c = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) c++;
    closedir(d);
    return c;
}

static void assert_error_has(const char *needle) {
    if (strstr(ts_last_error(), needle)) return;
    print_error("error \"%s\" does not contain \"%s\"\n", ts_last_error(), needle);
    fail();
}

/* ---- safetensors ------------------------------------------------------ */

/* A file from a JSON header and a data section, as a broken writer might make. */
static void make_st(const char *path, const char *json, const void *data, size_t data_len) {
    size_t n = strlen(json);
    unsigned char *b = malloc(8 + n + data_len + 1);
    assert_non_null(b);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(b + 8, json, n);
    if (data_len) memcpy(b + 8 + n, data, data_len);
    write_bytes(path, b, 8 + n + data_len);
    free(b);
}

static void st_roundtrip(void **state) {
    (void)state;
    float a[24], s = 2.5f;
    for (int i = 0; i < 24; i++) a[i] = (float)i * 0.25f - 3;
    ts_tensor ta, tt, ts0, te;
    assert_ok(ts_tensor_view(&ta, a, 3, (int64_t[]){2, 3, 4}));
    assert_ok(ts_tensor_transpose(&tt, &ta, 0, 2)); /* (4, 3, 2), strided */
    assert_ok(ts_tensor_view(&ts0, &s, 0, (int64_t[]){1}));
    assert_ok(ts_tensor_view(&te, NULL, 2, (int64_t[]){0, 5}));
    const char *names[] = {"layers.0.a", "b \"quoted\"\\", "scalar", "empty"};
    ts_tensor ts[] = {ta, tt, ts0, te};
    const char *meta[] = {"format", "pt", "note", "tab\there"};
    const char *path = tmp("rt.safetensors");
    assert_ok(ts_safetensors_write(path, 4, names, ts, 2, meta));
    assert_int_equal(count_prefixed("rt.safetensors."), 0);

    ts_safetensors f;
    assert_ok(ts_safetensors_open(&f, path));
    assert_int_equal(f.count, 4);
    for (int i = 0; i < 4; i++) assert_string_equal(f.entries[i].name, names[i]);
    assert_int_equal((uintptr_t)f.data % 8, 0); /* padded header */
    assert_string_equal(ts_safetensors_meta(&f, "format"), "pt");
    assert_string_equal(ts_safetensors_meta(&f, "note"), "tab\there");
    assert_null(ts_safetensors_meta(&f, "nope"));
    ts_tensor v;
    assert_ok(ts_safetensors_get(&f, "layers.0.a", &v));
    assert_shape(&v, 2, 3, 4);
    assert_floats_close(v.data, a, 24, 0);
    assert_ok(ts_safetensors_get(&f, names[1], &v));
    assert_shape(&v, 4, 3, 2);
    for (int64_t i = 0; i < 4; i++)
        for (int64_t j = 0; j < 3; j++)
            for (int64_t k = 0; k < 2; k++)
                assert_float_equal(ts_tensor_get(&v, (int64_t[]){i, j, k}),
                                   ts_tensor_get(&tt, (int64_t[]){i, j, k}), 0);
    assert_ok(ts_safetensors_get(&f, "scalar", &v));
    assert_int_equal(v.rank, 0);
    assert_float_equal(v.data[0], 2.5f, 0);
    assert_ok(ts_safetensors_expect(&f, "empty", 2, (int64_t[]){0, 5}, &v));
    char list[64];
    ts_safetensors_list(&f, list, sizeof list);
    assert_string_equal(list, "layers.0.a, b \"quoted\"\\, scalar, empty");
    ts_safetensors_list(&f, list, 32); /* too short: cut with a count */
    assert_string_equal(list, "layers.0.a, ... (3 more)");
    ts_safetensors_close(&f);
}

static void st_reads_pytorch_fixture(void **state) {
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/enc_post_relu_norm/weights.safetensors", ref_dir());
    ts_safetensors f;
    assert_ok(ts_safetensors_open(&f, path));
    assert_string_equal(ts_safetensors_meta(&f, "module"), "nn.TransformerEncoder");
    assert_string_equal(f.entries[0].name, "layers.0.self_attn.in_proj_weight");
    ts_tensor v;
    assert_ok(ts_safetensors_expect(&f, "layers.0.self_attn.in_proj_weight", 2, (int64_t[]){48, 16}, &v));
    assert_ok(ts_safetensors_expect(&f, "norm.weight", 1, (int64_t[]){16}, &v));
    for (int i = 0; i < 16; i++) assert_true(isfinite(v.data[i]) && v.data[i] != 0);

    /* A missing tensor lists what the file has and spots the prefix. */
    assert_int_equal(ts_safetensors_get(&f, "encoder.layers.0.norm1.weight", &v), TS_ERR_ARG);
    assert_error_has(path);
    assert_error_has("has no tensor encoder.layers.0.norm1.weight");
    assert_error_has("did you mean layers.0.norm1.weight?");
    assert_error_has("it has 26: layers.0.self_attn.in_proj_weight, ");

    /* A wrong shape names the tensor, the file and both shapes. */
    char want[700];
    snprintf(want, sizeof want, "tensor layers.0.norm1.weight has shape [16] in %s, the model needs [32]",
             path);
    assert_int_equal(ts_safetensors_expect(&f, "layers.0.norm1.weight", 1, (int64_t[]){32}, &v),
                     TS_ERR_SHAPE);
    assert_string_equal(ts_last_error(), want);
    assert_int_equal(ts_safetensors_expect(&f, "layers.0.norm1.weight", 2, (int64_t[]){16, 1}, &v),
                     TS_ERR_SHAPE);
    ts_safetensors_close(&f);
}

typedef struct bad_st {
    const char *json;
    size_t data_len;
    ts_status status;
    const char *says;
} bad_st;

static void st_malformed_headers(void **state) {
    (void)state;
    static const unsigned char zeros[64];
    const bad_st cases[] = {
        {"[1, 2]", 0, TS_ERR_FORMAT, "does not start with '{'"},
        {"{\"a\":", 0, TS_ERR_FORMAT, "JSON header is malformed"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}} xx", 4, TS_ERR_FORMAT,
         "unexpected bytes after"},
        {"{\"a\": 3}", 0, TS_ERR_FORMAT, "tensor a: its header entry is not an object"},
        {"{\"a\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", 4, TS_ERR_FORMAT, "\"dtype\" is missing"},
        {"{\"a\": {\"dtype\": \"F33\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4, TS_ERR_FORMAT,
         "unknown dtype \"F33\""},
        {"{\"a\": {\"dtype\": \"F32\", \"data_offsets\": [0, 4]}}", 4, TS_ERR_FORMAT, "\"shape\" is missing"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [-1], \"data_offsets\": [0, 4]}}", 4, TS_ERR_FORMAT,
         "shape entry 0 is not a non-negative integer"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1.5], \"data_offsets\": [0, 4]}}", 4, TS_ERR_FORMAT,
         "shape entry 0"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,1,1,1], \"data_offsets\": [0, 4]}}", 4,
         TS_ERR_UNSUPPORTED, "has 7 dims"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0]}}", 4, TS_ERR_FORMAT,
         "must be [begin, end]"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 1e30]}}", 4, TS_ERR_FORMAT,
         "must be [begin, end]"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, \"4\"]}}", 4, TS_ERR_FORMAT,
         "must be [begin, end]"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 4]}}", 8, TS_ERR_FORMAT,
         "end before they begin"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}}", 8, TS_ERR_FORMAT,
         "run past the end of the data (8 bytes)"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 8]}}", 8, TS_ERR_FORMAT,
         "shape [3] of F32 needs 12 bytes but data_offsets [0, 8] hold 8"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [4000000000, 4000000000, 4000000000], "
         "\"data_offsets\": [0, 8]}}", 8, TS_ERR_FORMAT, "is too large"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
         "\"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}", 12, TS_ERR_FORMAT,
         "overlaps tensor a"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, "
         "\"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 12]}}", 12, TS_ERR_FORMAT,
         "data bytes 4..8 (before tensor b) belong to no tensor"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 12, TS_ERR_FORMAT,
         "the last 8 bytes of the file belong to no tensor"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, "
         "\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", 8, TS_ERR_FORMAT,
         "the key \"a\" appears twice"},
        {"{\"__metadata__\": {\"k\": 1}}", 0, TS_ERR_FORMAT, "value of \"k\" is not a string"},
        {"{\"__metadata__\": [\"k\"]}", 0, TS_ERR_FORMAT, "__metadata__ must be an object"},
        {"{\"__metadata__\": {}, \"__metadata__\": {}}", 0, TS_ERR_FORMAT, "the key \"__metadata__\" appears twice"},
        {"{\"\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4, TS_ERR_FORMAT,
         "empty name"},
    };
    const char *path = tmp("bad.safetensors");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        make_st(path, cases[i].json, zeros, cases[i].data_len);
        ts_safetensors f;
        ts_status st = ts_safetensors_open(&f, path);
        if (st != cases[i].status || !strstr(ts_last_error(), cases[i].says) ||
            !strstr(ts_last_error(), path)) {
            print_error("case %zu (%s): got %s \"%s\", want %s containing \"%s\"\n", i, cases[i].json,
                        ts_status_str(st), ts_last_error(), ts_status_str(cases[i].status), cases[i].says);
            fail();
        }
        assert_null(f.map); /* nothing left open */
    }
}

static void st_bad_lengths(void **state) {
    (void)state;
    const char *path = tmp("short.safetensors");
    ts_safetensors f;
    write_bytes(path, "", 0);
    assert_int_equal(ts_safetensors_open(&f, path), TS_ERR_FORMAT);
    assert_error_has("is 0 bytes, too short");
    write_bytes(path, "\x02\0\0\0\0", 5);
    assert_int_equal(ts_safetensors_open(&f, path), TS_ERR_FORMAT);
    assert_error_has("is 5 bytes");
    /* header length larger than the file */
    write_bytes(path, "\x40\0\0\0\0\0\0\0{}", 10);
    assert_int_equal(ts_safetensors_open(&f, path), TS_ERR_FORMAT);
    assert_error_has("header length 64 is larger than the rest of the file (2 bytes)");
    write_bytes(path, "\xff\xff\xff\xff\xff\xff\xff\xff{}", 10);
    assert_int_equal(ts_safetensors_open(&f, path), TS_ERR_FORMAT);
    assert_error_has("larger than the rest of the file");
    assert_int_equal(ts_safetensors_open(&f, tmp("does-not-exist")), TS_ERR_IO);
    assert_error_has("does-not-exist");
    assert_int_equal(ts_safetensors_open(&f, tmpdir), TS_ERR_IO);
    assert_error_has("not a regular file");
    /* An empty header object is a valid file with no tensors. */
    write_bytes(path, "\x02\0\0\0\0\0\0\0{}", 10);
    assert_ok(ts_safetensors_open(&f, path));
    assert_int_equal(f.count, 0);
    ts_tensor v;
    assert_int_equal(ts_safetensors_get(&f, "x", &v), TS_ERR_ARG);
    assert_error_has("it has 0");
    ts_safetensors_close(&f);
}

/* Every prefix of a valid file is refused; no read strays past the mapping. */
static void st_every_truncation_fails(void **state) {
    (void)state;
    float a[6] = {1, 2, 3, 4, 5, 6};
    ts_tensor t[2];
    assert_ok(ts_tensor_view(&t[0], a, 2, (int64_t[]){2, 2}));
    assert_ok(ts_tensor_view(&t[1], a + 4, 1, (int64_t[]){2}));
    const char *path = tmp("full.safetensors"), *cut = tmp("cut.safetensors");
    assert_ok(ts_safetensors_write(path, 2, (const char *[]){"w", "b"}, t, 0, NULL));
    size_t n;
    unsigned char *b = read_bytes(path, &n);
    for (size_t len = 0; len < n; len++) {
        write_bytes(cut, b, len);
        ts_safetensors f;
        if (ts_safetensors_open(&f, cut) == TS_OK) {
            print_error("a file cut to %zu of %zu bytes opened\n", len, n);
            fail();
        }
        assert_non_null(strstr(ts_last_error(), cut));
    }
    /* Single-byte corruptions of the header: refused or read consistently. */
    for (size_t i = 8; i < n - 24; i++) {
        unsigned char saved = b[i];
        for (int v = 0; v < 256; v += 37) {
            b[i] = (unsigned char)v;
            write_bytes(cut, b, n);
            ts_safetensors f;
            if (ts_safetensors_open(&f, cut) != TS_OK) continue;
            for (int k = 0; k < f.count; k++) {
                ts_tensor view;
                if (ts_safetensors_get(&f, f.entries[k].name, &view) == TS_OK && ts_tensor_numel(&view))
                    (void)view.data[ts_tensor_numel(&view) - 1];
            }
            ts_safetensors_close(&f);
        }
        b[i] = saved;
    }
    free(b);
}

static uint16_t to_half(float f) {
    /* exact for the small values used here */
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, exp = (x >> 23) & 0xff, mant = x & 0x7fffff;
    if (exp == 0) return (uint16_t)sign;
    return (uint16_t)(sign | ((exp - 127 + 15) << 10) | (mant >> 13));
}

static void st_dtypes(void **state) {
    (void)state;
    /* U8 [2] at 0..2 puts the F32 tensor off 4-byte alignment at 2..10;
     * then F16 [2], BF16 [2], F64 [2], I64 [1]. */
    unsigned char data[2 + 8 + 4 + 4 + 16 + 8];
    unsigned char *p = data;
    p[0] = 7, p[1] = 9, p += 2;
    float f[2] = {1.5f, -2.25f};
    memcpy(p, f, 8), p += 8;
    uint16_t h[2] = {to_half(0.5f), to_half(-3.0f)};
    memcpy(p, h, 4), p += 4;
    float bf_src[2] = {2.0f, -0.125f};
    for (int i = 0; i < 2; i++) {
        uint32_t bits;
        memcpy(&bits, &bf_src[i], 4);
        uint16_t top = (uint16_t)(bits >> 16);
        memcpy(p, &top, 2), p += 2;
    }
    double d[2] = {1e-3, 123456.0};
    memcpy(p, d, 16), p += 16;
    int64_t id = 42;
    memcpy(p, &id, 8), p += 8;
    const char *json =
        "{\"u\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
        "\"f\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[2,10]},"
        "\"h\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[10,14]},"
        "\"bf\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[14,18]},"
        "\"d\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[18,34]},"
        "\"i\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[34,42]}}";
    const char *path = tmp("dtypes.safetensors");
    make_st(path, json, data, sizeof data);
    ts_safetensors sf;
    assert_ok(ts_safetensors_open(&sf, path));
    ts_tensor v;
    assert_ok(ts_safetensors_get(&sf, "f", &v));
    assert_int_equal((uintptr_t)v.data % 4, 0);
    assert_floats_close(v.data, f, 2, 0);
    assert_ok(ts_safetensors_get(&sf, "h", &v));
    assert_floats_close(v.data, ((float[]){0.5f, -3.0f}), 2, 0);
    assert_ok(ts_safetensors_get(&sf, "bf", &v));
    assert_floats_close(v.data, bf_src, 2, 0);
    assert_ok(ts_safetensors_get(&sf, "d", &v));
    assert_floats_close(v.data, ((float[]){1e-3f, 123456.0f}), 2, 0);
    assert_int_equal(ts_safetensors_get(&sf, "i", &v), TS_ERR_UNSUPPORTED);
    assert_error_has("tensor i has dtype I64");
    assert_error_has(path);
    assert_int_equal(ts_safetensors_get(&sf, "u", &v), TS_ERR_UNSUPPORTED);
    ts_safetensors_close(&sf);

    /* F64 beyond float32's range is an error, not a silent inf. */
    double huge = 1e300;
    make_st(path, "{\"d\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", &huge, 8);
    assert_ok(ts_safetensors_open(&sf, path));
    assert_int_equal(ts_safetensors_get(&sf, "d", &v), TS_ERR_FORMAT);
    assert_error_has("does not fit in float32");
    ts_safetensors_close(&sf);
}

static void st_write_errors(void **state) {
    (void)state;
    float a = 1;
    ts_tensor t[2];
    assert_ok(ts_tensor_view(&t[0], &a, 0, (int64_t[]){1}));
    t[1] = t[0];
    const char *path = tmp("dup.safetensors");
    assert_int_equal(ts_safetensors_write(path, 2, (const char *[]){"x", "x"}, t, 0, NULL), TS_ERR_ARG);
    assert_error_has("tensor x is given twice");
    assert_int_equal(ts_safetensors_write(path, 1, (const char *[]){""}, t, 0, NULL), TS_ERR_ARG);
    assert_false(file_exists(path));
    assert_int_equal(ts_safetensors_write(tmp("no/such/dir.safetensors"), 1, (const char *[]){"x"}, t, 0,
                                          NULL), TS_ERR_IO);
    assert_error_has("no/such/dir.safetensors");
}

/* ---- npy ------------------------------------------------------------------ */

/* A .npy file from a version, a header dict (padded here) and raw data. */
static void make_npy(const char *path, int major, const char *dict, const void *data, size_t data_len) {
    size_t prefix = major == 1 ? 10 : 12, n = strlen(dict);
    size_t len = (prefix + n + 1 + 63) / 64 * 64 - prefix;
    unsigned char *b = calloc(prefix + len + data_len + 1, 1);
    assert_non_null(b);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    for (size_t i = 0; i < prefix - 8; i++) b[8 + i] = (unsigned char)(len >> (8 * i));
    memcpy(b + prefix, dict, n);
    memset(b + prefix + n, ' ', len - n - 1);
    b[prefix + len - 1] = '\n';
    if (data_len) memcpy(b + prefix + len, data, data_len);
    write_bytes(path, b, prefix + len + data_len);
    free(b);
}

static void npy_roundtrip(void **state) {
    (void)state;
    float a[24];
    for (int i = 0; i < 24; i++) a[i] = (float)i - 0.5f;
    ts_tensor t, p;
    assert_ok(ts_tensor_view(&t, a, 3, (int64_t[]){2, 3, 4}));
    assert_ok(ts_tensor_permute(&p, &t, (int[]){2, 0, 1})); /* (4, 2, 3), strided */
    const char *path = tmp("p.npy");
    assert_ok(ts_npy_write(path, &p));
    assert_int_equal(count_prefixed("p.npy."), 0);
    size_t n;
    unsigned char *b = read_bytes(path, &n);
    assert_int_equal(n, 128 + 24 * 4); /* 64-byte aligned header, as NumPy */
    assert_memory_equal(b + 10, "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 2, 3), }", 61);
    assert_int_equal(b[127], '\n');
    free(b);
    ts_npy r;
    assert_ok(ts_npy_read(&r, path));
    ts_tensor v;
    assert_ok(ts_npy_tensor(&r, &v));
    assert_shape(&v, 4, 2, 3);
    assert_string_equal(r.descr, "<f4");
    for (int64_t i = 0; i < 4; i++)
        for (int64_t j = 0; j < 2; j++)
            for (int64_t k = 0; k < 3; k++)
                assert_float_equal(ts_tensor_get(&v, (int64_t[]){i, j, k}),
                                   ts_tensor_get(&p, (int64_t[]){i, j, k}), 0);
    ts_npy_free(&r);

    /* rank 0 and rank 1 headers */
    ts_tensor s, one;
    assert_ok(ts_tensor_view(&s, a, 0, (int64_t[]){1}));
    assert_ok(ts_tensor_view(&one, a, 1, (int64_t[]){5}));
    assert_ok(ts_npy_write(path, &s));
    b = read_bytes(path, &n);
    assert_non_null(strstr((char *)b + 10, "'shape': (), }"));
    free(b);
    assert_ok(ts_npy_read(&r, path));
    assert_int_equal(r.rank, 0);
    assert_float_equal(r.f32[0], a[0], 0);
    ts_npy_free(&r);
    assert_ok(ts_npy_write(path, &one));
    b = read_bytes(path, &n);
    assert_non_null(strstr((char *)b + 10, "'shape': (5,), }"));
    free(b);
    assert_ok(ts_npy_read(&r, path));
    assert_int_equal(r.rank, 1);
    assert_int_equal(r.shape[0], 5);
    ts_npy_free(&r);
}

static void npy_reads_numpy_files(void **state) {
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/transformer_post_relu/src.npy", ref_dir());
    ts_npy r;
    assert_ok(ts_npy_read(&r, path));
    ts_tensor v;
    assert_ok(ts_npy_tensor(&r, &v));
    assert_shape(&v, 2, 7, 16);
    ts_npy_free(&r);

    snprintf(path, sizeof path, "%s/cross_entropy/labels.npy", ref_dir());
    assert_ok(ts_npy_read_labels(&r, path));
    assert_string_equal(r.descr, "<i8");
    assert_int_equal(r.numel, 10);
    assert_int_equal(r.i64[8], 0); /* padding at [1, 3:] */
    assert_int_equal(r.i64[9], 0);
    for (int i = 0; i < 8; i++) assert_true(r.i64[i] >= 1 && r.i64[i] < 11);
    int64_t first = r.i64[0];
    ts_npy_free(&r);
    assert_ok(ts_npy_read(&r, path)); /* the same ids as float32 */
    assert_float_equal(r.f32[0], (float)first, 0);
    assert_int_equal(ts_npy_tensor(&r, &v), TS_OK);
    ts_npy_free(&r);

    /* key padding masks are float32 0/1 */
    snprintf(path, sizeof path, "%s/mha_kpm/key_padding_mask.npy", ref_dir());
    assert_ok(ts_npy_read_labels(&r, path));
    int64_t want[] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1};
    assert_memory_equal(r.i64, want, sizeof want);
    ts_npy_free(&r);
}

static void npy_versions_and_dtypes(void **state) {
    (void)state;
    const char *path = tmp("v.npy");
    ts_npy r;
    float f[3] = {1, 2, 3};
    for (int major = 1; major <= 3; major++) {
        make_npy(path, major, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", f, 12);
        assert_ok(ts_npy_read(&r, path));
        assert_floats_close(r.f32, f, 3, 0);
        ts_npy_free(&r);
    }
    /* double quotes, no trailing comma, other key order, Python 2's 3L */
    make_npy(path, 1, "{\"shape\": (1L, 3), \"fortran_order\": False, \"descr\": \"<f4\"}", f, 12);
    assert_ok(ts_npy_read(&r, path));
    assert_int_equal(r.rank, 2);
    ts_npy_free(&r);

    double d[3] = {0.5, -1e-3, 7};
    make_npy(path, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", d, 24);
    assert_ok(ts_npy_read(&r, path));
    assert_floats_close(r.f32, ((float[]){0.5f, -1e-3f, 7}), 3, 0);
    ts_npy_free(&r);
    assert_int_equal(ts_npy_read_labels(&r, path), TS_ERR_FORMAT);
    assert_error_has("element 0 is 0.5, not a whole number");

    int32_t i4[3] = {5, -2, 99};
    make_npy(path, 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", i4, 12);
    assert_ok(ts_npy_read_labels(&r, path));
    assert_int_equal(r.i64[2], 99);
    assert_int_equal(r.i64[1], -2);
    ts_npy_free(&r);
    assert_ok(ts_npy_read(&r, path));
    assert_float_equal(r.f32[2], 99.0f, 0);
    ts_npy_free(&r);

    int64_t big = (int64_t)1 << 40;
    make_npy(path, 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (), }", &big, 8);
    assert_ok(ts_npy_read_labels(&r, path));
    assert_true(r.i64[0] == big);
    ts_npy_free(&r);
    assert_int_equal(ts_npy_read(&r, path), TS_ERR_FORMAT);
    assert_error_has("has no exact float32 value");

    double huge = 1e300;
    make_npy(path, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", &huge, 8);
    assert_int_equal(ts_npy_read(&r, path), TS_ERR_FORMAT);
    assert_error_has("does not fit in float32");
}

typedef struct bad_npy {
    int major;
    const char *dict;
    size_t data_len;
    ts_status status;
    const char *says;
} bad_npy;

static void npy_malformed(void **state) {
    (void)state;
    static const unsigned char zeros[64];
    const bad_npy cases[] = {
        {1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8, TS_ERR_UNSUPPORTED, "big-endian"},
        {1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16, TS_ERR_UNSUPPORTED,
         "Fortran order"},
        {1, "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", 16, TS_ERR_UNSUPPORTED, "object arrays"},
        {1, "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 16, TS_ERR_UNSUPPORTED,
         "dtype '<c8' is not supported"},
        {1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8, TS_ERR_UNSUPPORTED,
         "structured"},
        {1, "{'descr': '<f4', 'shape': (2,), }", 8, TS_ERR_FORMAT, "lacks one of"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}", 8, TS_ERR_FORMAT,
         "unexpected key 'extra'"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", 8, TS_ERR_FORMAT,
         "expected a dimension"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,, }", 8, TS_ERR_FORMAT, "malformed"},
        {1, "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", 8, TS_ERR_FORMAT, "True or False"},
        {1, "{'descr': '<f4, 'fortran_order': False, 'shape': (2,), }", 8, TS_ERR_FORMAT, "malformed"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } junk", 8, TS_ERR_FORMAT,
         "only padding after"},
        {1, "['descr']", 8, TS_ERR_FORMAT, "expected '{'"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1), }", 4,
         TS_ERR_UNSUPPORTED, "more than 6 dims"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 4, TS_ERR_FORMAT,
         "too large"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4000000000, 4000000000, 4000000000), }", 4,
         TS_ERR_FORMAT, "too large"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 20, TS_ERR_FORMAT,
         "truncated: shape [2, 3] of <f4 needs 24 bytes of data, the file has 20"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 12, TS_ERR_FORMAT,
         "trailing bytes: shape [2] of <f4 needs 8 bytes of data, the file has 12"},
        {4, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8, TS_ERR_UNSUPPORTED,
         "version 4.0 is not supported"},
    };
    const char *path = tmp("bad.npy");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        make_npy(path, cases[i].major, cases[i].dict, zeros, cases[i].data_len);
        ts_npy r;
        ts_status st = ts_npy_read(&r, path);
        if (st != cases[i].status || !strstr(ts_last_error(), cases[i].says) ||
            !strstr(ts_last_error(), path)) {
            print_error("case %zu (%s): got %s \"%s\", want %s containing \"%s\"\n", i, cases[i].dict,
                        ts_status_str(st), ts_last_error(), ts_status_str(cases[i].status), cases[i].says);
            fail();
        }
        assert_null(r.f32);
    }
    /* Broken prefixes. */
    ts_npy r;
    write_bytes(path, "PK\3\4 not npy", 12);
    assert_int_equal(ts_npy_read(&r, path), TS_ERR_FORMAT);
    assert_error_has("is not a .npy file");
    write_bytes(path, "\x93NUMPY\1\0", 8);
    assert_int_equal(ts_npy_read(&r, path), TS_ERR_FORMAT);
    assert_error_has("truncated");
    write_bytes(path, "\x93NUMPY\1\0\xff\x00{}", 12);
    assert_int_equal(ts_npy_read(&r, path), TS_ERR_FORMAT);
    assert_error_has("header length 255 runs past the end of the file (12 bytes)");
    write_bytes(path, "\x93NUMPY\2\0\xff\xff\xff\x7f{}", 14);
    assert_int_equal(ts_npy_read(&r, path), TS_ERR_FORMAT);
    assert_error_has("implausibly large");
    write_bytes(path, "", 0);
    assert_int_equal(ts_npy_read(&r, path), TS_ERR_FORMAT);
    assert_error_has("is empty");
    assert_int_equal(ts_npy_read(&r, tmp("missing.npy")), TS_ERR_IO);
    assert_error_has("missing.npy");
}

static void npy_every_truncation_fails(void **state) {
    (void)state;
    float a[6] = {1, 2, 3, 4, 5, 6};
    ts_tensor t;
    assert_ok(ts_tensor_view(&t, a, 2, (int64_t[]){2, 3}));
    const char *path = tmp("full.npy");
    assert_ok(ts_npy_write(path, &t));
    size_t n;
    unsigned char *b = read_bytes(path, &n);
    ts_npy r;
    for (size_t len = 0; len < n; len++) {
        if (ts_npy_parse(&r, b, len, "cut", false) == TS_OK) {
            print_error("a .npy cut to %zu of %zu bytes parsed\n", len, n);
            fail();
        }
    }
    /* Corrupt each header byte: refused, or parsed to a consistent array. */
    for (size_t i = 0; i < 128; i++) {
        unsigned char saved = b[i];
        for (int v = 0; v < 256; v += 29) {
            b[i] = (unsigned char)v;
            /* a heap copy of the exact size, so ASan sees any overread */
            unsigned char *copy = malloc(n);
            memcpy(copy, b, n);
            if (ts_npy_parse(&r, copy, n, "corrupt", false) == TS_OK) {
                assert_true(r.numel * 4 <= (int64_t)n);
                ts_npy_free(&r);
            }
            free(copy);
        }
        b[i] = saved;
    }
    free(b);
}

/* ---- npz: a small zip reader to check what we wrote ------------------------ */

typedef struct zip_member {
    char name[128];
    uint64_t size, offset;
    uint32_t crc;
} zip_member;

static uint64_t le(const unsigned char *p, int bytes) {
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* Parse the end records and central directory; check every local header and
 * CRC; return the members (caller frees) and their count. */
static zip_member *read_zip(const unsigned char *b, size_t n, int64_t *count, bool *was_zip64) {
    assert_true(n >= 22);
    const unsigned char *end = b + n - 22; /* we write no comment */
    assert_int_equal(le(end, 4), 0x06054b50);
    uint64_t entries = le(end + 10, 2), cd_size = le(end + 12, 4), cd_offset = le(end + 16, 4);
    *was_zip64 = false;
    if (n >= 42 && le(end - 20, 4) == 0x07064b50) {
        uint64_t at = le(end - 20 + 8, 8);
        assert_true(at + 56 <= n);
        const unsigned char *e64 = b + at;
        assert_int_equal(le(e64, 4), 0x06064b50);
        entries = le(e64 + 32, 8);
        cd_size = le(e64 + 40, 8);
        cd_offset = le(e64 + 48, 8);
        *was_zip64 = true;
    }
    assert_true(cd_offset + cd_size <= n);
    zip_member *m = calloc(entries + 1, sizeof *m);
    assert_non_null(m);
    const unsigned char *p = b + cd_offset;
    for (uint64_t i = 0; i < entries; i++) {
        assert_true(p + 46 <= b + cd_offset + cd_size);
        assert_int_equal(le(p, 4), 0x02014b50);
        assert_int_equal(le(p + 10, 2), 0); /* stored */
        m[i].crc = (uint32_t)le(p + 16, 4);
        uint64_t csize = le(p + 20, 4), usize = le(p + 24, 4), off = le(p + 42, 4);
        size_t name_len = le(p + 28, 2), extra_len = le(p + 30, 2);
        assert_true(name_len < sizeof m[i].name);
        memcpy(m[i].name, p + 46, name_len);
        const unsigned char *x = p + 46 + name_len, *xend = x + extra_len;
        while (x + 4 <= xend) {
            uint64_t id = le(x, 2), len = le(x + 2, 2);
            const unsigned char *f = x + 4;
            if (id == 1) {
                if (usize == 0xffffffffu) usize = le(f, 8), f += 8;
                if (csize == 0xffffffffu) csize = le(f, 8), f += 8;
                if (off == 0xffffffffu) off = le(f, 8), f += 8;
                assert_true(f <= x + 4 + len);
            }
            x += 4 + len;
        }
        assert_true(csize == usize);
        m[i].size = usize;
        m[i].offset = off;
        /* the local header agrees and the data's CRC matches */
        const unsigned char *lh = b + off;
        assert_true(off + 30 <= n);
        assert_int_equal(le(lh, 4), 0x04034b50);
        assert_int_equal(le(lh + 14, 4), m[i].crc);
        assert_int_equal(le(lh + 26, 2), name_len);
        assert_memory_equal(lh + 30, m[i].name, name_len);
        uint64_t data_at = off + 30 + name_len + le(lh + 28, 2);
        assert_true(data_at + usize <= n);
        uint32_t crc = (uint32_t)crc32_z(0, b + data_at, (size_t)usize);
        assert_int_equal(crc, m[i].crc);
        m[i].offset = data_at;
        p += 46 + name_len + extra_len + le(p + 32, 2);
    }
    *count = (int64_t)entries;
    return m;
}

static bool have_numpy(void) {
    static int cached = -1;
    if (cached < 0) {
        cached = access("/usr/bin/python3", X_OK) == 0 &&
                 system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
        if (!cached) print_message("numpy check skipped: /usr/bin/python3 with numpy is not available\n");
    }
    return cached;
}

/* Run a Python snippet on a file; true when it exits 0. */
static bool python_ok(const char *code, const char *path) {
    char script[600], cmd[1400];
    snprintf(script, sizeof script, "%s/check.py", tmpdir);
    write_bytes(script, code, strlen(code));
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %s", script, path);
    int rc = system(cmd);
    return rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
}

static const char *numpy_check =
    "import sys, numpy as np\n"
    "z = np.load(sys.argv[1])\n"
    "assert sorted(z.files) == ['a', 'b.t', 'enc.layers.0.q', 'scalar', '\\u00e9t\\u00e9'], z.files\n"
    "a = (np.arange(24, dtype=np.float32) * 0.5 - 3).reshape(2, 3, 4)\n"
    "assert z['a'].dtype == np.float32 and np.array_equal(z['a'], a)\n"
    "assert np.array_equal(z['b.t'], a.transpose(2, 1, 0))\n"
    "assert z['scalar'].shape == () and z['scalar'] == 2.5\n"
    "assert z['enc.layers.0.q'].shape == (0, 3)\n"
    "assert np.array_equal(z['\\u00e9t\\u00e9'], a[1])\n";

static void write_sample_npz(const char *path, bool zip64) {
    static float a[24];
    static float s = 2.5f;
    for (int i = 0; i < 24; i++) a[i] = (float)i * 0.5f - 3;
    ts_tensor ta, tt, ts0, te, row;
    assert_ok(ts_tensor_view(&ta, a, 3, (int64_t[]){2, 3, 4}));
    assert_ok(ts_tensor_permute(&tt, &ta, (int[]){2, 1, 0}));
    assert_ok(ts_tensor_view(&ts0, &s, 0, (int64_t[]){1}));
    assert_ok(ts_tensor_view(&te, NULL, 2, (int64_t[]){0, 3}));
    assert_ok(ts_tensor_slice(&row, &ta, 0, 1, 1));
    assert_ok(ts_tensor_reshape(&row, &row, 2, (int64_t[]){3, 4}));
    ts_npz z;
    assert_ok(ts_npz_open(&z, path));
    z.force_zip64 = zip64;
    assert_ok(ts_npz_add(&z, "a", &ta));
    assert_ok(ts_npz_add(&z, "b.t", &tt));
    assert_ok(ts_npz_add(&z, "scalar", &ts0));
    assert_ok(ts_npz_add(&z, "enc.layers.0.q", &te));
    assert_ok(ts_npz_add(&z, "\xc3\xa9t\xc3\xa9", &row));
    assert_false(file_exists(path)); /* nothing until close */
    assert_ok(ts_npz_close(&z));
}

static void check_sample_npz(const char *path, bool zip64) {
    size_t n;
    unsigned char *b = read_bytes(path, &n);
    int64_t count;
    bool was64;
    zip_member *m = read_zip(b, n, &count, &was64);
    assert_int_equal(count, 5);
    assert_int_equal(was64, zip64);
    assert_string_equal(m[0].name, "a.npy");
    assert_string_equal(m[4].name, "\xc3\xa9t\xc3\xa9.npy");
    ts_npy r;
    assert_ok(ts_npy_parse(&r, b + m[1].offset, m[1].size, m[1].name, false));
    assert_int_equal(r.rank, 3);
    assert_int_equal(r.shape[0], 4);
    assert_float_equal(r.f32[1], 3.0f, 0); /* b.t[0, 0, 1] = a[1, 0, 0] = 12*0.5-3 */
    ts_npy_free(&r);
    assert_ok(ts_npy_parse(&r, b + m[3].offset, m[3].size, m[3].name, false));
    assert_int_equal(r.numel, 0);
    ts_npy_free(&r);
    free(m);
    free(b);
    if (have_numpy()) assert_true(python_ok(numpy_check, path));
}

static void npz_roundtrip(void **state) {
    (void)state;
    const char *path = tmp("sample.npz");
    write_sample_npz(path, false);
    assert_int_equal(count_prefixed("sample.npz."), 0);
    check_sample_npz(path, false);
}

static void npz_zip64_records(void **state) {
    (void)state;
    const char *path = tmp("sample64.npz");
    write_sample_npz(path, true);
    check_sample_npz(path, true);
}

/* More members than a classic zip can count: zip64 end records. */
static void npz_many_members(void **state) {
    (void)state;
    enum { N = 70000 };
    const char *path = tmp("many.npz");
    ts_npz z;
    assert_ok(ts_npz_open(&z, path));
    float v[2];
    ts_tensor t;
    assert_ok(ts_tensor_view(&t, v, 1, (int64_t[]){2}));
    char name[32];
    for (int i = 0; i < N; i++) {
        v[0] = (float)i, v[1] = -(float)i;
        snprintf(name, sizeof name, "e%d", i);
        assert_ok(ts_npz_add(&z, name, &t));
    }
    assert_int_equal(ts_npz_add(&z, "e123", &t), TS_ERR_ARG);
    assert_error_has("array e123 is added twice");
    assert_ok(ts_npz_close(&z));
    size_t n;
    unsigned char *b = read_bytes(path, &n);
    int64_t count;
    bool was64;
    zip_member *m = read_zip(b, n, &count, &was64);
    assert_int_equal(count, N);
    assert_true(was64);
    assert_int_equal(le(b + n - 22 + 10, 2), 0xffff);
    assert_string_equal(m[N - 1].name, "e69999.npy");
    ts_npy r;
    assert_ok(ts_npy_parse(&r, b + m[N - 1].offset, m[N - 1].size, "e69999", false));
    assert_float_equal(r.f32[1], -69999.0f, 0);
    ts_npy_free(&r);
    free(m);
    free(b);
    if (have_numpy())
        assert_true(python_ok("import sys, numpy as np\n"
                              "z = np.load(sys.argv[1])\n"
                              "assert len(z.files) == 70000\n"
                              "assert list(z['e69999']) == [69999.0, -69999.0]\n"
                              "assert list(z['e0']) == [0.0, 0.0]\n",
                              path));
}

static void npz_errors_leave_nothing(void **state) {
    (void)state;
    float v = 1;
    ts_tensor t;
    assert_ok(ts_tensor_view(&t, &v, 0, (int64_t[]){1}));
    const char *path = tmp("aborted.npz");
    ts_npz z;
    assert_ok(ts_npz_open(&z, path));
    assert_int_equal(ts_npz_add(&z, "", &t), TS_ERR_ARG);
    assert_error_has("empty name");
    assert_ok(ts_npz_add(&z, "x", &t));
    assert_int_equal(count_prefixed("aborted.npz."), 1);
    ts_npz_abort(&z);
    assert_false(file_exists(path));
    assert_int_equal(count_prefixed("aborted.npz"), 0);
    assert_int_equal(ts_npz_open(&z, tmp("no/dir/x.npz")), TS_ERR_IO);
    assert_error_has("no/dir/x.npz");
}

/* JSON by type (core.h, "json"): what Python's json reads one way, tscope
 * never reads another. */
static void json_reads_by_type(void **state) {
    (void)state;
    struct cJSON *o = NULL;
    const char *text = "{\"a\": 4.0, \"b\": 4.5, \"c\": \"4\", \"d\": true, \"e\": 1e300, \"f\": -2}";
    assert_ok(ts_json_parse(text, strlen(text), "t.json", &o));
    int64_t v = 0;
    assert_ok(ts_json_int(o, "a", "t.json", true, 0, 10, &v)); /* 4.0 is a whole number */
    assert_int_equal(v, 4);
    assert_int_equal(ts_json_int(o, "b", "t.json", true, 0, 10, &v), TS_ERR_FORMAT);
    assert_non_null(strstr(ts_last_error(), "t.json: \"b\" is 4.5, not a whole number"));
    assert_int_equal(ts_json_int(o, "c", "t.json", true, 0, 10, &v), TS_ERR_FORMAT); /* a string is not a number */
    assert_non_null(strstr(ts_last_error(), "\"c\" is \"4\""));
    assert_int_equal(ts_json_int(o, "e", "t.json", true, 0, INT64_MAX, &v), TS_ERR_FORMAT);
    assert_int_equal(ts_json_int(o, "f", "t.json", true, 0, 10, &v), TS_ERR_FORMAT);
    assert_non_null(strstr(ts_last_error(), "\"f\" is -2, outside [0, 10]"));
    assert_int_equal(v, 4); /* untouched by a refusal */
    assert_ok(ts_json_int(o, "none", "t.json", false, 0, 10, &v)); /* absent, not required: untouched */
    assert_int_equal(ts_json_int(o, "none", "t.json", true, 0, 10, &v), TS_ERR_FORMAT);
    const char *str = NULL;
    assert_int_equal(ts_json_string(o, "a", "t.json", true, &str), TS_ERR_FORMAT);
    assert_non_null(strstr(ts_last_error(), "\"a\" is 4, not a string"));
    assert_ok(ts_json_string(o, "c", "t.json", true, &str));
    assert_string_equal(str, "4");
    bool b = false;
    assert_ok(ts_json_bool(o, "d", "t.json", true, &b));
    assert_true(b);
    assert_int_equal(ts_json_bool(o, "a", "t.json", true, &b), TS_ERR_FORMAT);
    double d = 0;
    assert_int_equal(ts_json_number(o, "c", "t.json", true, &d), TS_ERR_FORMAT);
    cJSON_Delete(o);
    /* refused whole: a key twice (at any depth), a NUL, text after the value, not an object */
    const struct {
        const char *text;
        size_t len;
        const char *want;
    } bad[] = {
        {"{\"a\": 1, \"a\": 2}", 0, "the key \"a\" appears twice"},
        {"{\"x\": [{\"k\": 1, \"k\": 1}]}", 0, "the key \"k\" appears twice"},
        {"{\"a\": \"x\0y\"}", 11, "a NUL byte at byte 8"},
        {"{} {}", 0, "more after the JSON value"},
        {"[1]", 0, "a JSON object {...} was expected, not [1]"},
        {"{\"a\": ", 0, "not valid JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t len = bad[i].len ? bad[i].len : strlen(bad[i].text);
        assert_int_equal(ts_json_parse(bad[i].text, len, "t.json", &o), TS_ERR_FORMAT);
        assert_null(o);
        if (!strstr(ts_last_error(), bad[i].want)) fail_msg("case %zu: %s", i, ts_last_error());
    }
    /* a key twice among many (the sorted path a BPE vocabulary takes) */
    char many[4096];
    int n = snprintf(many, sizeof many, "{");
    for (int i = 0; i < 100; i++) n += snprintf(many + n, sizeof many - (size_t)n, "\"k%d\": %d, ", i, i);
    snprintf(many + n, sizeof many - (size_t)n, "\"k57\": 0}");
    assert_int_equal(ts_json_parse(many, strlen(many), "t.json", &o), TS_ERR_FORMAT);
    assert_non_null(strstr(ts_last_error(), "\"k57\" appears twice"));
}

static void outfile_is_atomic(void **state) {
    (void)state;
    const char *path = tmp("atomic.bin");
    write_bytes(path, "old", 3);
    ts_outfile o;
    assert_ok(ts_outfile_open(&o, path));
    assert_ok(ts_outfile_write(&o, "new!", 4));
    size_t n;
    unsigned char *b = read_bytes(path, &n); /* the old file is intact until commit */
    assert_int_equal(n, 3);
    free(b);
    assert_ok(ts_outfile_commit(&o));
    b = read_bytes(path, &n);
    assert_int_equal(n, 4);
    assert_memory_equal(b, "new!", 4);
    free(b);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_true(sb.st_mode & S_IRUSR);
    assert_int_equal(count_prefixed("atomic.bin."), 0);
    /* after commit the outfile is closed: writes fail cleanly */
    assert_int_equal(ts_outfile_write(&o, "x", 1), TS_ERR_ARG);
}

/* ---- setup --------------------------------------------------------------------- */

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static int make_tmpdir(void **state) {
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tscope-test-io-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_tmpdir(void **state) {
    (void)state;
    return nftw(tmpdir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(st_roundtrip),
        cmocka_unit_test(st_reads_pytorch_fixture),
        cmocka_unit_test(st_malformed_headers),
        cmocka_unit_test(st_bad_lengths),
        cmocka_unit_test(st_every_truncation_fails),
        cmocka_unit_test(st_dtypes),
        cmocka_unit_test(st_write_errors),
        cmocka_unit_test(npy_roundtrip),
        cmocka_unit_test(npy_reads_numpy_files),
        cmocka_unit_test(npy_versions_and_dtypes),
        cmocka_unit_test(npy_malformed),
        cmocka_unit_test(npy_every_truncation_fails),
        cmocka_unit_test(npz_roundtrip),
        cmocka_unit_test(npz_zip64_records),
        cmocka_unit_test(npz_many_members),
        cmocka_unit_test(npz_errors_leave_nothing),
        cmocka_unit_test(outfile_is_atomic),
        cmocka_unit_test(json_reads_by_type),
    };
    return cmocka_run_group_tests_name("io", tests, make_tmpdir, remove_tmpdir);
}
