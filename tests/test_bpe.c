/* bpe: GPT-2's byte-level BPE against the JavaScript reference (gpt-3-encoder
 * 1.1.4; tests/ref/bpe/make_fixtures.js): every line of tests/ref/bpe/text.txt
 * gives the reference's ids and decodes back to itself, the byte cases of
 * bytes.txt (ill-formed UTF-8, NUL) give its ids too, and every code point is
 * classed as the reference's regexes class it. Then the pieces one by one:
 * pre-tokens, labels, bad files, bad ids, long words, random bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../src/tokenizer/bpe_impl.h"
#include "check.h"
#include "tscope/core.h"
#include "tscope/tokenizer.h"

static const char *ref_dir(void) {
    const char *d = getenv("TSCOPE_REF_DIR");
    return d && d[0] ? d : "tests/ref";
}

/* A whole fixture file, NUL-terminated; fails the test when missing. */
static char *slurp(const char *name, size_t *len) {
    char path[1024];
    snprintf(path, sizeof path, "%s/bpe/%s", ref_dir(), name);
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("%s: missing (tests/ref/bpe/README.md says how to make it)", path);
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

/* The next '\n'-terminated line of buf at *at (NUL-terminated in place). */
static char *next_line(char *buf, size_t len, size_t *at, size_t *line_len) {
    if (*at >= len) return NULL;
    char *s = buf + *at;
    char *nl = memchr(s, '\n', len - *at);
    size_t n = nl ? (size_t)(nl - s) : len - *at;
    s[n] = '\0';
    *at += n + 1;
    *line_len = n;
    return s;
}

/* Space-separated ids into a growing array. */
static size_t parse_ids(const char *s, int32_t **ids, size_t *cap) {
    size_t n = 0;
    while (*s) {
        while (*s == ' ') s++;
        if (!*s) break;
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s) fail_msg("fixture: bad id list at '%.20s'", s);
        if (n == *cap) {
            *cap = *cap ? 2 * *cap : 256;
            *ids = realloc(*ids, *cap * sizeof **ids);
            assert_non_null(*ids);
        }
        (*ids)[n++] = (int32_t)v;
        s = end;
    }
    return n;
}

static ts_bpe *load_gpt2(void) {
    char dir[4096];
    assert_ok(ts_bpe_default_dir(dir, sizeof dir));
    ts_bpe *bpe;
    assert_ok(ts_bpe_load(&bpe, dir));
    return bpe;
}

/* Print ids with their labels around the first difference. */
static void print_ids(const ts_bpe *bpe, const char *what, const int32_t *ids, size_t n, size_t from) {
    printf("  %s (%zu ids):", what, n);
    for (size_t k = from; k < n && k < from + 12; k++) {
        char label[128];
        ts_bpe_token_label(bpe, ids[k], label, sizeof label);
        printf(" %d:%s", ids[k], label);
    }
    printf("%s\n", n > from + 12 ? " ..." : "");
}

/* The first index where two id lists differ, or SIZE_MAX. */
static size_t first_diff(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    for (size_t k = 0; k < na || k < nb; k++)
        if (k >= na || k >= nb || a[k] != b[k]) return k;
    return SIZE_MAX;
}

static void text_matches_the_reference(void **state) {
    (void)state;
    ts_bpe *bpe = load_gpt2();
    assert_int_equal(ts_bpe_vocab_size(bpe), 50257);
    size_t tlen, ilen, tat = 0, iat = 0, tn, in;
    char *text = slurp("text.txt", &tlen), *idtext = slurp("ids.txt", &ilen);
    int32_t *want = NULL;
    size_t cap = 0, lines = 0, ids = 0, bad_lines = 0, round_trips = 0;
    ts_bpe_ids got = {0};
    char *line, *idline;
    while ((line = next_line(text, tlen, &tat, &tn)) != NULL) {
        idline = next_line(idtext, ilen, &iat, &in);
        if (!idline) fail_msg("ids.txt has fewer lines than text.txt (%zu)", lines);
        size_t nw = parse_ids(idline, &want, &cap);
        got.count = 0;
        assert_ok(ts_bpe_encode(bpe, line, tn, &got));
        lines++;
        size_t d = first_diff(got.ids, got.count, want, nw);
        if (d == SIZE_MAX) {
            ids += nw;
        } else if (bad_lines++ == 0) {
            printf("text.txt line %zu differs from the reference at id %zu:\n  text: \"%.200s\"\n", lines, d, line);
            print_ids(bpe, "want", want, nw, d > 3 ? d - 3 : 0);
            print_ids(bpe, "got ", got.ids, got.count, d > 3 ? d - 3 : 0);
        }
        char *back;
        size_t blen;
        assert_ok(ts_bpe_decode(bpe, got.ids, got.count, &back, &blen));
        if (blen == tn && memcmp(back, line, tn) == 0) round_trips++;
        else if (lines - round_trips == 1) /* the first failure only */
            printf("text.txt line %zu does not decode back to itself: \"%.200s\"\n", lines, back);
        free(back);
    }
    assert_null(next_line(idtext, ilen, &iat, &in));
    printf("text.txt: %zu of %zu lines match the reference (%zu ids); %zu of %zu round-trip\n", lines - bad_lines,
           lines, ids, round_trips, lines);
    free(want);
    ts_bpe_ids_free(&got);
    free(text);
    free(idtext);
    ts_bpe_free(bpe);
    assert_true(lines > 5000);
    assert_int_equal(bad_lines, 0);
    assert_int_equal(round_trips, lines);
}

static size_t unhex(const char *s, size_t n, uint8_t *out) {
    size_t k = 0;
    for (size_t i = 0; i + 1 < n; i += 2) {
        unsigned v;
        if (sscanf(s + i, "%2x", &v) != 1) fail_msg("bytes.txt: bad hex '%.8s'", s + i);
        out[k++] = (uint8_t)v;
    }
    return k;
}

static void bytes_match_the_reference(void **state) {
    (void)state;
    ts_bpe *bpe = load_gpt2();
    size_t len, at = 0, n, cases = 0, bad = 0;
    char *all = slurp("bytes.txt", &len), *line;
    int32_t *want = NULL;
    size_t cap = 0;
    ts_bpe_ids got = {0};
    while ((line = next_line(all, len, &at, &n)) != NULL) {
        size_t t1 = strcspn(line, "\t"), t2 = t1 + 1 + strcspn(line + t1 + 1, "\t");
        if (t1 >= n || t2 >= n) fail_msg("bytes.txt line %zu: want three tab-separated fields", cases + 1);
        uint8_t in[1024], decoded[3072];
        size_t nin = unhex(line, t1, in);
        size_t ndec = unhex(line + t2 + 1, n - t2 - 1, decoded);
        line[t2] = '\0';
        char *tab1 = line + t1;
        size_t nw = parse_ids(tab1 + 1, &want, &cap);
        got.count = 0;
        assert_ok(ts_bpe_encode(bpe, (const char *)in, nin, &got));
        char *back;
        size_t blen;
        assert_ok(ts_bpe_decode(bpe, got.ids, got.count, &back, &blen));
        cases++;
        bool same = first_diff(got.ids, got.count, want, nw) == SIZE_MAX && blen == ndec &&
                    memcmp(back, decoded, ndec) == 0;
        if (!same && bad++ == 0) {
            printf("bytes.txt case %zu (%s) differs from the reference\n", cases, line);
            print_ids(bpe, "want", want, nw, 0);
            print_ids(bpe, "got ", got.ids, got.count, 0);
        }
        free(back);
    }
    printf("bytes.txt: %zu of %zu cases match the reference, ids and decoded bytes\n", cases - bad, cases);
    free(want);
    ts_bpe_ids_free(&got);
    free(all);
    ts_bpe_free(bpe);
    assert_true(cases > 400);
    assert_int_equal(bad, 0);
}

static void classes_match_the_reference(void **state) {
    (void)state;
    size_t len, at = 0, n, checked = 0, newer = 0, bad = 0;
    char *all = slurp("classes.txt", &len), *line;
    static const char names[] = "OLNS"; /* by ts_bpe_class */
    while ((line = next_line(all, len, &at, &n)) != NULL) {
        if (line[0] == '#') continue;
        unsigned lo, hi;
        char cls;
        char flag[8] = "";
        if (sscanf(line, "%x %x %c %7s", &lo, &hi, &cls, flag) < 3) fail_msg("classes.txt: bad line '%s'", line);
        bool is_new = strcmp(flag, "new") == 0;
        /* newer than tscope's table: tscope sees an unassigned code point */
        char want = is_new ? 'O' : cls;
        for (uint32_t cp = lo; cp <= hi; cp++) {
            char got = names[ts_bpe_char_class(cp)];
            checked++;
            newer += is_new;
            if (got != want && bad++ == 0)
                printf("U+%04X: the reference's class is %c%s, tscope's %c\n", cp, cls, is_new ? " (new)" : "", got);
        }
    }
    printf("classes: %zu code points, %zu as the reference; %zu letters/numbers assigned after Unicode %s "
           "are other to tscope\n",
           checked, checked - bad - newer, newer, ts_bpe_unicode_version);
    free(all);
    assert_int_equal(checked, 0x110000 - 0x800); /* every code point but the surrogates */
    assert_int_equal(bad, 0);
}

/* ---- the pieces ---- */

/* Pre-tokens of text, joined by '|'. */
static void split(const char *text, char *out, size_t cap) {
    size_t n = strlen(text), o = 0;
    for (size_t i = 0; i < n;) {
        size_t j = ts_bpe_split_next((const uint8_t *)text, n, i);
        assert_true(j > i && j <= n);
        o += (size_t)snprintf(out + o, cap - o, "%s%.*s", i ? "|" : "", (int)(j - i), text + i);
        i = j;
    }
    out[o] = '\0';
}

static void pre_tokens_follow_the_pattern(void **state) {
    (void)state;
    static const char *cases[][2] = {
        {"Hello world", "Hello| world"},
        {"Hello  world", "Hello| | world"},        /* a space run leaves its last space to the word */
        {"a   ", "a|   "},                         /* at the end, the whole run */
        {"a\t\tb", "a|\t|\t|b"},                  /* \s+(?!\S), then \s+: only U+0020 joins a word */
        {"it's we're 'S", "it|'s| we|'re| '|S"},  /* lower-case contractions only */
        {"''s", "''|s"},                          /* a punctuation run takes the apostrophe */
        {"x  's", "x| | '|s"},                    /* the space takes the apostrophe, not 's */
        {"abc123!!?", "abc|123|!!?"},
        {" 42 ...", " 42| ..."},
        {"caf\xc3\xa9 e\xcc\x81", "caf\xc3\xa9| e|\xcc\x81"},     /* a combining mark is not a letter */
        {"a\xc2\xa0" "b", "a|\xc2\xa0|b"},                        /* NBSP is \s, and not " ?" */
        {"a\xc2\x85" "b", "a|\xc2\x85|b"},                        /* U+0085 is not \s in JavaScript */
        {"\xef\xbb\xbf" "a", "\xef\xbb\xbf|a"},                   /* U+FEFF is */
        {"\xf0\x9d\x90\x80\xf0\x9d\x90\x81!", "\xf0\x9d\x90\x80\xf0\x9d\x90\x81|!"}, /* astral letters */
    };
    char out[256];
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        split(cases[k][0], out, sizeof out);
        if (strcmp(out, cases[k][1]) != 0) fail_msg("split \"%s\": got \"%s\", want \"%s\"", cases[k][0], out, cases[k][1]);
    }
}

static void ill_formed_utf8_becomes_replacement_characters(void **state) {
    (void)state;
    static const struct {
        const char *in;
        size_t n;
        int replacements;
    } cases[] = {
        {"\x80", 1, 1},             {"\xc0\xaf", 2, 2},         {"\xe2\x82", 2, 1}, /* one maximal subpart */
        {"\xed\xa0\x80", 3, 3},     {"\xf4\x90\x80\x80", 4, 4}, {"\xf0\x9f\x98" "a", 4, 1},
        {"\xe2\x82\xac", 3, 0},     {"\xf0\x9f\x98\x80", 4, 0}, {"a\xffz", 3, 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        uint8_t out[64];
        size_t n = ts_bpe_utf8_replace((const uint8_t *)cases[k].in, cases[k].n, out);
        int r = 0;
        for (size_t i = 0; i + 2 < n; i++)
            if (out[i] == 0xef && out[i + 1] == 0xbf && out[i + 2] == 0xbd) r++;
        assert_int_equal(r, cases[k].replacements);
        assert_int_equal(ts_bpe_utf8_valid((const uint8_t *)cases[k].in, cases[k].n), cases[k].replacements == 0);
        assert_true(ts_bpe_utf8_valid(out, n));
    }
}

static void labels_are_readable(void **state) {
    (void)state;
    ts_bpe *bpe = load_gpt2();
    char buf[64];
    ts_bpe_ids ids = {0};
    assert_ok(ts_bpe_encode(bpe, " the\n\t\xf0\x9f\x98\x80", 10, &ids));
    assert_int_equal(ids.count, 5); /* " the" "\n" "\t" and the emoji in two tokens */
    ts_bpe_token_label(bpe, ids.ids[0], buf, sizeof buf);
    assert_string_equal(buf, "\xe2\x90\xa3the"); /* ␣the */
    assert_string_equal(ts_bpe_token_string(bpe, ids.ids[0]), "\xc4\xa0the"); /* Ġthe */
    ts_bpe_token_label(bpe, ids.ids[1], buf, sizeof buf);
    assert_string_equal(buf, "\xe2\x86\xb5"); /* ↵ */
    ts_bpe_token_label(bpe, ids.ids[2], buf, sizeof buf);
    assert_string_equal(buf, "\xe2\x87\xa5"); /* ⇥ */
    ts_bpe_token_label(bpe, ids.ids[3], buf, sizeof buf);
    assert_string_equal(buf, "\\xF0\\x9F\\x98"); /* part of a character: its bytes */
    assert_int_equal(ts_bpe_label("\r\x01\x7f" "caf\xc3\xa9", 8, buf, sizeof buf), 9 + 5);
    assert_string_equal(buf, "\xe2\x90\x8d\xe2\x90\x81\xe2\x90\xa1" "caf\xc3\xa9"); /* ␍␁␡café */
    /* too small: cut between pieces, never inside one; the length still told */
    assert_int_equal(ts_bpe_label("  ab", 4, buf, 5), 8);
    assert_string_equal(buf, "\xe2\x90\xa3");
    assert_int_equal(ts_bpe_label("ab", 2, buf, 0), 2);
    ts_bpe_token_label(bpe, 50257, buf, sizeof buf);
    assert_string_equal(buf, "<bad id 50257>");
    assert_null(ts_bpe_token_string(bpe, -1));
    ts_bpe_ids_free(&ids);
    ts_bpe_free(bpe);
}

static void decode_refuses_ids_outside_the_vocabulary(void **state) {
    (void)state;
    ts_bpe *bpe = load_gpt2();
    char *text;
    size_t len;
    int32_t ids[] = {15496, 50257};
    assert_int_equal(ts_bpe_decode(bpe, ids, 2, &text, &len), TS_ERR_ARG);
    assert_non_null(strstr(ts_last_error(), "50257"));
    assert_null(text);
    ids[1] = -1;
    assert_int_equal(ts_bpe_decode(bpe, ids, 2, &text, &len), TS_ERR_ARG);
    assert_ok(ts_bpe_decode(bpe, ids, 1, &text, &len));
    assert_string_equal(text, "Hello");
    free(text);
    assert_ok(ts_bpe_decode(bpe, ids, 0, &text, &len));
    assert_int_equal(len, 0);
    free(text);
    ts_bpe_free(bpe);
}

/* Write a tokenizer directory with the given files (NULL: leave it out). */
static void write_dir(const char *dir, const char *vocab, const char *merges) {
    char path[512];
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/encoder.json", dir);
    unlink(path);
    if (vocab) {
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(vocab, f);
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/vocab.bpe", dir);
    unlink(path);
    if (merges) {
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(merges, f);
        fclose(f);
    }
}

/* A 258-token vocabulary as JSON: byte b is id b (spelled as in
 * bytes_to_unicode), then "ab" 256 and "Ġa" 257, then `extra` entries. */
static char *small_vocab(const char *extra) {
    ts_text_buf b = {0};
    ts_text_buf_str(&b, "{");
    int next = 256;
    for (int c = 0; c < 256; c++) { /* bytes_to_unicode, as in encoder.py */
        bool printable = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
        int cp = printable ? c : next++;
        char u[8];
        if (cp < 0x80) snprintf(u, sizeof u, "%c", cp);
        else snprintf(u, sizeof u, "%c%c", 0xC0 | (cp >> 6), 0x80 | (cp & 0x3F));
        if (cp == '"' || cp == '\\') ts_text_buf_printf(&b, "\"\\%s\": %d, ", u, c);
        else ts_text_buf_printf(&b, "\"%s\": %d, ", u, c);
    }
    ts_text_buf_printf(&b, "\"ab\": 256, \"\xc4\xa0" "a\": 257%s}", extra);
    return ts_text_buf_take(&b);
}

/* s with its first `from` made `to`, in a new string. */
static char *replace_once(const char *s, const char *from, const char *to) {
    const char *at = strstr(s, from);
    assert_non_null(at);
    ts_text_buf b = {0};
    ts_text_buf_add(&b, s, (size_t)(at - s));
    ts_text_buf_str(&b, to);
    ts_text_buf_str(&b, at + strlen(from));
    return ts_text_buf_take(&b);
}

static void load_refuses_bad_files(void **state) {
    (void)state;
    char dir[] = "/tmp/tscope-bpe-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *vocab = small_vocab("");
    ts_bpe *bpe = NULL;
    /* a good small pair first, so each failure below is the one change */
    write_dir(dir, vocab, "#version: 0.2\na b\n\xc4\xa0 a\n");
    assert_ok(ts_bpe_load(&bpe, dir));
    ts_bpe_ids ids = {0};
    assert_ok(ts_bpe_encode(bpe, "ab a", 4, &ids));
    assert_int_equal(ids.count, 2);
    assert_int_equal(ids.ids[0], 256);
    assert_int_equal(ids.ids[1], 257);
    ts_bpe_ids_free(&ids);
    ts_bpe_free(bpe);

    char *dup = small_vocab(", \"xz\": 5");
    char *gap = small_vocab(", \"xy\": 300");
    char *alien = small_vocab(", \"\xe2\x96\x81x\": 258"); /* ▁ stands for no byte (SentencePiece) */
    char *strid = small_vocab(", \"xy\": \"258\"");
    char *twice = replace_once(vocab, "\"A\": 65", "\"Q\": 65");  /* "Q" twice */
    char *nobyte = replace_once(vocab, "\"A\": 65", "\"AA\": 65"); /* no token for the byte 'A' */
    static const struct {
        const char *vocab, *merges, *message;
    } cases[] = {
        {NULL, "#version: 0.2\na b\n", "no encoder.json or vocab.json"},
        {"{}", NULL, "no vocab.bpe or merges.txt"},
        {"{\"a\": 0,", "a b\n", "not valid JSON"},
        {"[1, 2]", "a b\n", "a JSON object {...} was expected"},
        {"{\"a\": 0}", "a b\n", "256 to"},
        {NULL, "a b\n", "id 5 is given twice"},
        {NULL, "a b\n", "has id 300, not a whole number from 0 to 258"},
        {NULL, "a b\n", "stands for no byte"},
        {NULL, "a b\n", "has id \"258\", not a whole number"},
        {NULL, "#version: 0.2\na b c\n", "line 2 has 3 fields"},
        {NULL, "#version: 0.2\nab\n", "line 2 has 1 fields"},
        {NULL, "#version: 0.2\na b\nb c\n", "line 3 merges \"b\" and \"c\", but \"bc\" is not in the vocabulary"},
        {NULL, "#version: 0.2\n\n", "holds no merges"},
        {NULL, "a b\n", "the key \"Q\" appears twice"}, /* before its bytes are compared */
        {NULL, "a b\n", "no token for the byte 0x41"},
    };
    const char *vocabs[] = {vocab, vocab, NULL, NULL, NULL, dup, gap, alien, strid, vocab, vocab, vocab, vocab, twice, nobyte};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *v = cases[k].vocab ? cases[k].vocab : vocabs[k];
        write_dir(dir, k == 0 ? NULL : v, cases[k].merges);
        ts_status st = ts_bpe_load(&bpe, dir);
        if (st == TS_OK || !strstr(ts_last_error(), cases[k].message))
            fail_msg("case %zu: want an error with \"%s\", got %s: %s", k, cases[k].message, ts_status_str(st),
                     ts_last_error());
        assert_null(bpe);
    }
    assert_int_equal(ts_bpe_load(&bpe, "/nonexistent/tokenizer"), TS_ERR_IO);
    write_dir(dir, NULL, NULL);
    rmdir(dir);
    free(vocab);
    free(dup);
    free(gap);
    free(alien);
    free(strid);
    free(twice);
    free(nobyte);
}

/* The reference joins every occurrence of the best pair, left to right,
 * before it looks for the next best: with merges "aa a" (rank 0) and "a a"
 * (rank 1), "aaaa" is "aa" "aa", though "aa" "a" is the best pair once the
 * first "aa" is made. Long words take the same path, in O(n log n). */
static void merges_go_rank_by_rank_left_to_right(void **state) {
    (void)state;
    char dir[] = "/tmp/tscope-bpe-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *vocab = small_vocab(", \"aa\": 258, \"aaa\": 259");
    write_dir(dir, vocab, "#version: 0.2\naa a\na a\n");
    ts_bpe *bpe;
    assert_ok(ts_bpe_load(&bpe, dir));
    ts_bpe_ids ids = {0};
    assert_ok(ts_bpe_encode(bpe, "aaaa aaa", 8, &ids));
    int32_t want[] = {258, 258, ' ', 259}; /* aa aa, then Ġ aaa (small_vocab: byte b is id b) */
    assert_int_equal(ids.count, 4);
    assert_memory_equal(ids.ids, want, sizeof want);
    ts_bpe_free(bpe);
    write_dir(dir, NULL, NULL);
    rmdir(dir);
    free(vocab);

    bpe = load_gpt2();
    size_t n = 200000;
    char *s = malloc(n);
    assert_non_null(s);
    memset(s, 'a', n);
    ids.count = 0;
    assert_ok(ts_bpe_encode(bpe, s, n, &ids));
    char *back;
    size_t blen;
    assert_ok(ts_bpe_decode(bpe, ids.ids, ids.count, &back, &blen));
    assert_int_equal(blen, n);
    assert_memory_equal(back, s, n);
    free(back);
    /* GPT-2 has "aaaa" but no merge to "aaaaaaaa": 50000 x "aaaa" */
    assert_int_equal(ids.count, 50000);
    for (size_t k = 0; k < ids.count; k++) assert_int_equal(ids.ids[k], 24794);
    assert_string_equal(ts_bpe_token_string(bpe, 24794), "aaaa");
    ts_bpe_ids_free(&ids);
    free(s);
    ts_bpe_free(bpe);
}

/* Random bytes: never a crash; valid UTF-8 decodes back to itself, the rest
 * to its U+FFFD form. The cache fills and starts over on the way (encoding the
 * same words again must give the same ids). */
static void any_bytes_encode_and_decode(void **state) {
    (void)state;
    ts_bpe *bpe = load_gpt2();
    uint32_t seed = 12345;
    uint8_t buf[300], fixed[900];
    ts_bpe_ids ids = {0}, again = {0};
    for (int round = 0; round < 3000; round++) {
        size_t n = 0, len = (size_t)(seed % 300);
        for (; n < len; n++) {
            seed = seed * 1664525u + 1013904223u;
            uint8_t b = (uint8_t)(seed >> 24);
            buf[n] = round % 3 == 0 ? b : round % 3 == 1 ? (uint8_t)(' ' + b % 95) : (b & 0x80 ? b : 'a' + b % 3);
        }
        ids.count = 0;
        assert_ok(ts_bpe_encode(bpe, (const char *)buf, n, &ids));
        char *back;
        size_t blen;
        assert_ok(ts_bpe_decode(bpe, ids.ids, ids.count, &back, &blen));
        size_t nf = ts_bpe_utf8_replace(buf, n, fixed);
        assert_int_equal(blen, nf);
        assert_memory_equal(back, fixed, nf);
        free(back);
    }
    /* 70000 different words overflow the cache (65536 words) */
    char word[16];
    for (int pass = 0; pass < 2; pass++) {
        ts_bpe_ids *out = pass ? &again : &ids;
        out->count = 0;
        for (int w = 0; w < 70000; w++) {
            int len = snprintf(word, sizeof word, " %c%c%c%c", 'a' + w % 26, 'a' + w / 26 % 26, 'a' + w / 676 % 26,
                               'a' + w / 17576 % 26);
            assert_ok(ts_bpe_encode(bpe, word, (size_t)len, out));
        }
    }
    assert_int_equal(ids.count, again.count);
    assert_memory_equal(ids.ids, again.ids, ids.count * sizeof *ids.ids);
    ts_bpe_ids_free(&ids);
    ts_bpe_ids_free(&again);
    ts_bpe_free(bpe);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(text_matches_the_reference),
        cmocka_unit_test(bytes_match_the_reference),
        cmocka_unit_test(classes_match_the_reference),
        cmocka_unit_test(pre_tokens_follow_the_pattern),
        cmocka_unit_test(ill_formed_utf8_becomes_replacement_characters),
        cmocka_unit_test(labels_are_readable),
        cmocka_unit_test(decode_refuses_ids_outside_the_vocabulary),
        cmocka_unit_test(load_refuses_bad_files),
        cmocka_unit_test(merges_go_rank_by_rank_left_to_right),
        cmocka_unit_test(any_bytes_encode_and_decode),
    };
    return cmocka_run_group_tests_name("bpe", tests, NULL, NULL);
}
