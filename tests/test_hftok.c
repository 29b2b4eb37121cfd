/* hftok: the tokenizers of tokenizer.json, tokenizer.model and vocab.txt
 * against their references (tests/ref/tokenizers/, README.md there):
 *   gpt2, neox, prefix, llama3, bert-json  @huggingface/tokenizers 0.2.0
 *                                          (Hugging Face's JavaScript)
 *   bert-txt                               the same ids as bert-json: vocab.txt
 *                                          read as BertTokenizer's defaults
 *   spm, spm-strip                         python3-sentencepiece 0.1.97 (ids,
 *                                          and the text it decodes them to)
 * Every line of text.txt gives the reference's ids, without special tokens
 * and (where the tokenizer adds some) with; byte-level BPE and SentencePiece
 * lines decode back to themselves. Then NFC/NFD and lower case on their own,
 * labels, bad ids, the merge order, and any bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/tokenizer/tok_impl.h"
#include "check.h"
#include "tscope/core.h"
#include "tscope/tokenizer.h"

static const char *ref_dir(void) {
    const char *d = getenv("TSCOPE_REF_DIR");
    return d && d[0] ? d : "tests/ref";
}

static char *slurp(const char *name, size_t *len) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tokenizers/%s", ref_dir(), name);
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("%s: missing (tests/ref/tokenizers/README.md says how to make it)", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    buf[n] = '\0';
    *len = (size_t)n;
    return buf;
}

static ts_hftok *open_tok(const char *name) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tokenizers/%s", ref_dir(), name);
    ts_hftok *t = NULL;
    if (ts_hftok_open(&t, dir) != TS_OK) fail_msg("%s: %s", dir, ts_last_error());
    return t;
}

/* Every line of text.txt encodes to the line of ids_file; returns the lines checked. */
static int check_ids(const char *name, const char *ids_file, bool special, bool decode_back) {
    ts_hftok *t = open_tok(name);
    size_t tlen, ilen;
    char *text = slurp("text.txt", &tlen), *ids = slurp(ids_file, &ilen);
    char *tl = text, *il = ids;
    int lines = 0, back = 0;
    long total = 0;
    ts_bpe_ids got = {0};
    char want[1 << 16];
    while (*tl) {
        char *tn = strchr(tl, '\n'), *in = strchr(il, '\n');
        assert_non_null(tn);
        assert_non_null(in);
        got.count = 0;
        if (ts_hftok_encode(t, tl, (size_t)(tn - tl), special, &got) != TS_OK) fail_msg("%s: %s", name, ts_last_error());
        ts_text_buf b = {0};
        for (size_t k = 0; k < got.count; k++) ts_text_buf_printf(&b, k ? " %d" : "%d", (int)got.ids[k]);
        snprintf(want, sizeof want, "%.*s", (int)(in - il), il);
        const char *g = b.s ? b.s : "";
        if (strcmp(g, want) != 0)
            fail_msg("%s line %d (%.60s...):\n  got  %.300s\n  want %.300s", name, lines + 1, tl, g, want);
        free(b.s);
        char *dec;
        size_t dlen;
        assert_int_equal(ts_hftok_decode(t, got.ids, got.count, &dec, &dlen), TS_OK);
        if (dlen == (size_t)(tn - tl) && memcmp(dec, tl, dlen) == 0) back++;
        else if (decode_back) fail_msg("%s line %d does not decode back: %.200s", name, lines + 1, dec);
        free(dec);
        total += (long)got.count;
        lines++;
        tl = tn + 1;
        il = in + 1;
    }
    assert_int_equal(*il, '\0');
    printf("  %-10s %-16s %d lines, %ld ids match; %d decode back\n", name, ids_file, lines, total, back);
    ts_bpe_ids_free(&got);
    free(text);
    free(ids);
    ts_hftok_close(t);
    return lines;
}

static void gpt2_json_matches(void **s) {
    (void)s;
    assert_true(check_ids("gpt2", "gpt2/ids.txt", false, true) >= 300);
    assert_true(check_ids("prefix", "prefix/ids.txt", false, false) >= 300);
}

static void neox_json_matches(void **s) {
    (void)s;
    assert_true(check_ids("neox", "neox/ids.txt", false, false) >= 300);
}

static void llama3_json_matches(void **s) {
    (void)s;
    assert_true(check_ids("llama3", "llama3/ids.txt", false, true) >= 300);
    assert_true(check_ids("llama3", "llama3/ids_special.txt", true, false) >= 300);
}

static void bert_matches(void **s) {
    (void)s;
    assert_true(check_ids("bert-json", "bert-json/ids.txt", false, false) >= 300);
    assert_true(check_ids("bert-json", "bert-json/ids_special.txt", true, false) >= 300);
    assert_true(check_ids("bert-txt", "bert-json/ids.txt", false, false) >= 300);
    assert_true(check_ids("bert-txt", "bert-json/ids_special.txt", true, false) >= 300);
}

/* SentencePiece's decode of each line's ids, as spm DIR/decoded.txt has it. */
static void check_decoded(const char *name) {
    char path[256];
    snprintf(path, sizeof path, "%s/ids.txt", name);
    size_t ilen, dlen;
    char *ids = slurp(path, &ilen);
    snprintf(path, sizeof path, "%s/decoded.txt", name);
    char *want = slurp(path, &dlen);
    ts_hftok *t = open_tok(name);
    char *il = ids, *wl = want;
    int32_t *v = malloc(ilen * sizeof *v);
    assert_non_null(v);
    int line = 1;
    for (; *il; line++) {
        char *in = strchr(il, '\n'), *wn = strchr(wl, '\n');
        assert_non_null(in);
        assert_non_null(wn);
        size_t n = 0;
        for (char *p = il; p < in;) {
            char *e;
            v[n++] = (int32_t)strtol(p, &e, 10);
            p = e;
            while (*p == ' ') p++;
        }
        char *dec;
        size_t len;
        assert_int_equal(ts_hftok_decode(t, v, n, &dec, &len), TS_OK);
        if (len != (size_t)(wn - wl) || memcmp(dec, wl, len) != 0)
            fail_msg("%s line %d decodes to '%.100s', sentencepiece to '%.100s'", name, line, dec, wl);
        free(dec);
        il = in + 1;
        wl = wn + 1;
    }
    printf("  %-10s decoded.txt      %d lines decode as sentencepiece decodes them\n", name, line - 1);
    free(v);
    free(ids);
    free(want);
    ts_hftok_close(t);
}

static void sentencepiece_matches(void **s) {
    (void)s;
    assert_true(check_ids("spm", "spm/ids.txt", false, true) >= 300);
    assert_true(check_ids("spm", "spm/ids_special.txt", true, false) >= 300);
    assert_true(check_ids("spm-strip", "spm-strip/ids.txt", false, false) >= 300);
    assert_true(check_ids("spm-strip", "spm-strip/ids_special.txt", true, false) >= 300);
    check_decoded("spm");
    check_decoded("spm-strip");
}

/* NFC and NFD of a few strings Python's unicodedata gave. */
static void normal_forms(void **s) {
    (void)s;
    struct {
        const char *in, *nfd, *nfc;
    } cases[] = {
        {"e\xcc\x81", "e\xcc\x81", "\xc3\xa9"},                             /* e + acute */
        {"\xc3\xa9", "e\xcc\x81", "\xc3\xa9"},                              /* é */
        {"\xe2\x84\xab", "A\xcc\x8a", "\xc3\x85"},                          /* Angstrom sign -> Å */
        {"\xed\x95\x9c", "\xe1\x84\x92\xe1\x85\xa1\xe1\x86\xab", "\xed\x95\x9c"}, /* 한 */
        {"a\xcc\xa3\xcc\x87", "a\xcc\xa3\xcc\x87", "\xe1\xba\xa1\xcc\x87"}, /* ordering and blocking */
        {"\xe1\xba\x9b\xcc\xa3", "\xc5\xbf\xcc\xa3\xcc\x87", "\xe1\xba\x9b\xcc\xa3"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int form = 0; form < 2; form++) {
            tok_cps c = {0};
            assert_true(tok_utf8_decode((const uint8_t *)cases[i].in, strlen(cases[i].in), &c));
            assert_true(form ? tok_nfc(&c) : tok_nfd(&c));
            size_t len;
            char *out = tok_utf8_encode(c.cp, c.n, &len);
            assert_string_equal(out, form ? cases[i].nfc : cases[i].nfd);
            free(out);
            tok_cps_free(&c);
        }
    }
}

static void lower_case(void **s) {
    (void)s;
    const char *in = "\xce\x9f\xce\x94\xce\x9f\xce\xa3 \xce\xa3 \xc4\xb0 ABC"; /* ΟΔΟΣ Σ İ ABC */
    tok_cps c = {0};
    assert_true(tok_utf8_decode((const uint8_t *)in, strlen(in), &c));
    assert_true(tok_lower(&c));
    size_t len;
    char *out = tok_utf8_encode(c.cp, c.n, &len);
    assert_string_equal(out, "\xce\xbf\xce\xb4\xce\xbf\xcf\x82 \xcf\x83 i\xcc\x87 abc"); /* οδος σ i̇ abc */
    free(out);
    tok_cps_free(&c);
}

static void labels_and_bad_ids(void **s) {
    (void)s;
    const char *names[] = {"llama3", "spm", "bert-txt"};
    const char *text = "And God said";
    const char *want[] = {"<|begin_of_text|> And ␣God ␣said", "<s> ␣And ␣God ␣said", "[CLS] and god said [SEP]"};
    for (int k = 0; k < 3; k++) {
        ts_hftok *t = open_tok(names[k]);
        ts_bpe_ids ids = {0};
        assert_int_equal(ts_hftok_encode(t, text, strlen(text), true, &ids), TS_OK);
        ts_text_buf b = {0};
        char label[256];
        for (size_t i = 0; i < ids.count; i++) {
            ts_hftok_token_label(t, ids.ids[i], label, sizeof label);
            ts_text_buf_printf(&b, i ? " %s" : "%s", label);
        }
        assert_string_equal(b.s, want[k]);
        free(b.s);
        int32_t bad[2] = {0, ts_hftok_vocab_size(t)};
        char *dec;
        size_t len;
        assert_int_equal(ts_hftok_decode(t, bad, 2, &dec, &len), TS_ERR_ARG);
        assert_non_null(strstr(ts_last_error(), "outside the vocabulary"));
        ts_hftok_token_label(t, -1, label, sizeof label);
        assert_string_equal(label, "<bad id -1>");
        ts_bpe_ids_free(&ids);
        ts_hftok_close(t);
    }
}

/* The merge loop: lowest rank first, of equal ranks the leftmost, a merged
 * pair's neighbours considered again, negative symbols never merged. */
static void merge_order(void **s) {
    (void)s;
    tok_merges m;
    assert_true(tok_merges_init(&m, 8));
    tok_merges_add(&m, 1, 1, 0, 10); /* a a -> aa */
    tok_merges_add(&m, 10, 2, 1, 11); /* aa b -> aab */
    tok_merges_add(&m, 1, 2, 2, 12);  /* a b -> ab */
    int32_t sym[] = {1, 1, 1, 2, -5, 1, 1};
    size_t n = 7;
    assert_true(tok_merge_run(&m, sym, &n));
    int32_t want[] = {10, 12, -5, 10}; /* "aa" first (left), then a b: aab needs aa b adjacent */
    assert_int_equal(n, 4);
    for (size_t i = 0; i < n; i++) assert_int_equal(sym[i], want[i]);
    tok_merges_free(&m);
}

/* Any bytes encode (ill-formed ones as U+FFFD), long words included. */
static void any_bytes(void **s) {
    (void)s;
    const char *names[] = {"gpt2", "neox", "llama3", "bert-txt", "spm"};
    uint64_t x = 88172645463325252ull;
    char buf[4096];
    for (int k = 0; k < 5; k++) {
        ts_hftok *t = open_tok(names[k]);
        for (int r = 0; r < 200; r++) {
            size_t n = (size_t)(r * 19 % 4096);
            for (size_t i = 0; i < n; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                buf[i] = (char)(r % 3 == 0 ? 'a' + x % 3 : x);
            }
            ts_bpe_ids ids = {0};
            assert_int_equal(ts_hftok_encode(t, buf, n, r & 1, &ids), TS_OK);
            for (size_t i = 0; i < ids.count; i++) assert_true(ids.ids[i] >= 0 && ids.ids[i] < ts_hftok_vocab_size(t));
            char *dec;
            size_t len;
            assert_int_equal(ts_hftok_decode(t, ids.ids, ids.count, &dec, &len), TS_OK);
            free(dec);
            ts_bpe_ids_free(&ids);
        }
        ts_hftok_close(t);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gpt2_json_matches),   cmocka_unit_test(neox_json_matches),
        cmocka_unit_test(llama3_json_matches), cmocka_unit_test(bert_matches),
        cmocka_unit_test(sentencepiece_matches), cmocka_unit_test(normal_forms),
        cmocka_unit_test(lower_case),          cmocka_unit_test(labels_and_bad_ids),
        cmocka_unit_test(merge_order),         cmocka_unit_test(any_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
