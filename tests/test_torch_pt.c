/* torch.save files (tests/ref/pt, written by its make_fixtures.py): a state_dict
 * reads as its safetensors twin does, whatever the tensors' offsets, strides
 * and dtypes; a training checkpoint's state_dict is found beside an optimizer's
 * state; nanoGPT's model_args become metadata; meta.pkl parses; and every file
 * of tests/ref/pt/hostile is refused with one line naming it, never a crash
 * (this test also runs on the sanitized build). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ref_fixture.h"
#include "tscope/io.h"

/* Every tensor of a equals b's (names, shapes, float32 values). */
static void same_tensors(ts_safetensors *a, ts_safetensors *b) {
    assert_int_equal(a->count, b->count);
    for (int i = 0; i < b->count; i++) {
        const char *name = b->entries[i].name;
        ts_tensor x, y;
        assert_ok(ts_safetensors_get(a, name, &x));
        assert_ok(ts_safetensors_get(b, name, &y));
        assert_int_equal(x.rank, y.rank);
        for (int d = 0; d < x.rank; d++) assert_int_equal(x.shape[d], y.shape[d]);
        assert_floats_close(x.data, y.data, ts_tensor_numel(&y), 0);
    }
}

static void state_dict_as_safetensors(void **state) {
    (void)state;
    static const char *const files[] = {"encoder.pt", "encoder_views.pt", "checkpoint.pt"};
    ts_safetensors want;
    assert_ok(ts_safetensors_open(&want, ref_fixture("load_encoder", "weights.safetensors")));
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        ts_safetensors f;
        assert_ok(ts_safetensors_open(&f, ref_fixture("pt", files[k])));
        assert_true(f.torch_pt);
        same_tensors(&f, &want);
        const char *where = ts_safetensors_meta(&f, "torch.state_dict");
        assert_non_null(where);
        assert_string_equal(where, k == 2 ? "model_state_dict" : "");
        ts_safetensors_close(&f);
    }
    ts_safetensors_close(&want);
}

/* bf16 and f16 storages keep their dtype and convert as safetensors' do. */
static void half_dtypes(void **state) {
    (void)state;
    static const char *const pairs[][2] = {{"encoder_bf16.pt", "weights_bf16.safetensors"},
                                           {"encoder_f16.pt", "weights_f16.safetensors"}};
    for (int k = 0; k < 2; k++) {
        ts_safetensors f, want;
        assert_ok(ts_safetensors_open(&f, ref_fixture("pt", pairs[k][0])));
        assert_ok(ts_safetensors_open(&want, ref_fixture("load_encoder", pairs[k][1])));
        assert_string_equal(f.entries[0].dtype_name, k == 0 ? "BF16" : "F16");
        same_tensors(&f, &want);
        ts_safetensors_close(&want);
        ts_safetensors_close(&f);
    }
}

static void tiny_file(void **state) {
    (void)state;
    ts_safetensors f;
    assert_ok(ts_safetensors_open(&f, ref_fixture("pt", "tiny.pt")));
    ts_tensor w;
    assert_ok(ts_safetensors_get(&f, "w", &w));
    assert_shape(&w, 2, 3);
    const float want[] = {1, 2, 3, 4, 5, 6};
    assert_floats_close(w.data, want, 6, 0);
    ts_safetensors_close(&f);
}

static void nanogpt_checkpoint(void **state) {
    (void)state;
    ts_safetensors f;
    assert_ok(ts_safetensors_open(&f, ref_fixture("pt/nanogpt", "ckpt.pt")));
    assert_string_equal(ts_safetensors_meta(&f, "torch.state_dict"), "model");
    assert_string_equal(ts_safetensors_meta(&f, "model_args.n_head"), "4");
    assert_string_equal(ts_safetensors_meta(&f, "model_args.bias"), "True");
    assert_string_equal(ts_safetensors_meta(&f, "model_args.vocab_size"), "65");
    /* the tied head: two names, one storage, both read */
    ts_tensor a, b;
    assert_ok(ts_safetensors_get(&f, "transformer.wte.weight", &a));
    assert_ok(ts_safetensors_get(&f, "lm_head.weight", &b));
    assert_shape(&a, 65, 16);
    assert_floats_close(a.data, b.data, 65 * 16, 0);
    ts_safetensors_close(&f);
}

/* nanoGPT's meta.pkl into buf; its size. */
static size_t read_meta_pkl(unsigned char *buf, size_t size) {
    FILE *fp = fopen(ref_fixture("pt/nanogpt", "meta.pkl"), "rb");
    assert_non_null(fp);
    size_t n = fread(buf, 1, size, fp);
    fclose(fp);
    return n;
}

/* nanoGPT's meta.pkl: a protocol-4 pickle of {vocab_size, itos, stoi}. */
static void meta_pkl(void **state) {
    (void)state;
    unsigned char buf[4096];
    size_t n = read_meta_pkl(buf, sizeof buf);
    ts_pickle p;
    assert_ok(ts_pickle_parse(&p, buf, n, "meta.pkl"));
    const ts_pk *size = ts_pk_get(p.root, "vocab_size"), *itos = ts_pk_get(p.root, "itos");
    assert_non_null(size);
    assert_int_equal(size->i, 65);
    assert_non_null(itos);
    assert_int_equal(itos->kind, TS_PK_DICT);
    assert_int_equal(itos->n, 2 * 65);
    assert_int_equal(itos->items[0]->i, 0);
    assert_string_equal(itos->items[1]->s, "\n");
    ts_pickle_free(&p);
}

static void hostile_files(void **state) {
    (void)state;
    const char *dir = ref_fixture("pt/hostile", "");
    char path[4096];
    snprintf(path, sizeof path, "%s", dir);
    size_t pl = strlen(path);
    if (pl && path[pl - 1] == '/') path[pl - 1] = '\0';
    DIR *d = opendir(path);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 3, ".pt") != 0) continue;
        char file[4600];
        snprintf(file, sizeof file, "%s/%s", path, e->d_name);
        ts_safetensors f;
        ts_status st = ts_safetensors_open(&f, file);
        if (st == TS_OK) {
            ts_safetensors_close(&f);
            closedir(d);
            fail_msg("%s was read, not refused", e->d_name);
        }
        const char *msg = ts_last_error();
        if (strchr(msg, '\n') || !strstr(msg, e->d_name)) {
            closedir(d);
            fail_msg("%s: the message is not one line naming the file: %s", e->d_name, msg);
        }
        assert_true(st == TS_ERR_FORMAT || st == TS_ERR_UNSUPPORTED);
        print_message("%-28s %s\n", e->d_name, msg);
        n++;
    }
    closedir(d);
    assert_true(n >= 20);
}

/* A pickle cut at every length is refused, never read past its end. */
static void every_prefix(void **state) {
    (void)state;
    unsigned char buf[4096];
    size_t n = read_meta_pkl(buf, sizeof buf);
    for (size_t k = 0; k < n; k++) {
        unsigned char *copy = malloc(k ? k : 1); /* exactly k bytes, so ASan sees a read past them */
        assert_non_null(copy);
        memcpy(copy, buf, k);
        ts_pickle p;
        ts_status st = ts_pickle_parse(&p, copy, k, "meta.pkl");
        free(copy);
        if (st == TS_OK) ts_pickle_free(&p);
        assert_int_not_equal(st, TS_OK);
    }
}

/* A string or bytes value whose length runs exactly one byte past the end
 * is refused as such by the plain build too (not only as an overread that
 * ASan alone would see); one that ends exactly at the end is read. Each
 * length-prefixed opcode: BINUNICODE, SHORT_BINUNICODE, BINUNICODE8,
 * SHORT_BINSTRING, BINSTRING, BINBYTES, SHORT_BINBYTES, BINBYTES8. */
static void a_string_one_byte_past_the_end(void **state) {
    (void)state;
    static const struct {
        unsigned char op;
        int len_bytes;
    } ops[] = {{'X', 4}, {0x8c, 1}, {0x8d, 8}, {'U', 1}, {'T', 4}, {'B', 4}, {'C', 1}, {0x8e, 8}};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
        for (int over = 0; over < 2; over++) {
            unsigned char buf[32];
            size_t n = 0;
            buf[n++] = 0x80, buf[n++] = 4; /* PROTO 4 */
            buf[n++] = ops[k].op;
            size_t have = 5, len = have + (size_t)over;
            for (int b = 0; b < ops[k].len_bytes; b++) buf[n++] = (unsigned char)(len >> (8 * b));
            memcpy(buf + n, "abcde", have);
            n += have;
            if (!over) buf[n++] = '.'; /* STOP */
            unsigned char *exact = malloc(n); /* exactly n bytes, so ASan sees a read past them too */
            assert_non_null(exact);
            memcpy(exact, buf, n);
            ts_pickle p;
            ts_status st = ts_pickle_parse(&p, exact, n, "t.pkl");
            free(exact);
            if (!over) {
                if (st) fail_msg("opcode 0x%02x: a string that ends at the end was refused: %s", ops[k].op, ts_last_error());
                assert_int_equal(p.root->len, have);
                ts_pickle_free(&p);
                continue;
            }
            if (st == TS_OK) {
                ts_pickle_free(&p);
                fail_msg("opcode 0x%02x: a string one byte past the end was read", ops[k].op);
            }
            if (!strstr(ts_last_error(), "a string runs past the end of the pickle"))
                fail_msg("opcode 0x%02x: a string one byte past the end: %s", ops[k].op, ts_last_error());
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(state_dict_as_safetensors), cmocka_unit_test(half_dtypes),
        cmocka_unit_test(tiny_file),                 cmocka_unit_test(nanogpt_checkpoint),
        cmocka_unit_test(meta_pkl),                  cmocka_unit_test(hostile_files),
        cmocka_unit_test(every_prefix),
        cmocka_unit_test(a_string_one_byte_past_the_end),
    };
    return cmocka_run_group_tests_name("torch.save files", tests, NULL, NULL);
}
