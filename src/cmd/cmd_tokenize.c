/* tscope tokenize: a tokenizer (GPT-2's byte-level BPE by default, or what
 * --tokenizer DIR holds: tokenizer.json, tokenizer.model, vocab.txt or GPT-2's
 * files) on a file, one output line per input line: the ids, space-separated (so they can be checked against any
 * other implementation), or with --decode the text of id lines, or with
 * --show each token's readable label. Lines are cut at '\n' only; a '\r' of
 * a CRLF file stays in its line, so decoding gives the file back byte for byte. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "tscope/core.h"
#include "tscope/tokenizer.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A whole file (or stdin for NULL or "-") into memory. */
static ts_status read_input(const char *path, char **data, size_t *len) {
    bool std_in = !path || strcmp(path, "-") == 0;
    const char *name = std_in ? "stdin" : path;
    FILE *f = std_in ? stdin : fopen(path, "rb");
    if (!f) return ts_fail(TS_ERR_IO, "%s: cannot open: %s", name, strerror(errno));
    ts_text_buf b = {0};
    char chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) ts_text_buf_add(&b, chunk, got);
    bool failed = ferror(f);
    int err = errno;
    if (!std_in) fclose(f);
    if (failed) {
        free(b.s);
        return ts_fail(TS_ERR_IO, "%s: cannot read: %s", name, strerror(err));
    }
    if (b.oom) {
        free(b.s);
        return ts_fail(TS_ERR_NOMEM, "%s: out of memory reading it", name);
    }
    *len = b.len;
    *data = b.s ? b.s : calloc(1, 1);
    return *data ? TS_OK : ts_fail(TS_ERR_NOMEM, "out of memory");
}

/* Parse one line of ids ("464 2068 7586") into ids; line is 1-based. */
static ts_status parse_ids(const char *s, size_t n, size_t line, int32_t vocab, ts_bpe_ids *ids) {
    ids->count = 0;
    for (size_t i = 0; i < n;) {
        if (s[i] == ' ' || s[i] == '\t' || s[i] == '\r') {
            i++;
            continue;
        }
        size_t j = i;
        long long v = 0;
        for (; j < n && s[j] >= '0' && s[j] <= '9'; j++)
            if (v <= INT32_MAX) v = v * 10 + (s[j] - '0'); /* past that, too large is all that matters */
        bool end = j == n || s[j] == ' ' || s[j] == '\t' || s[j] == '\r';
        if (j == i || !end) {
            size_t k = i;
            while (k < n && s[k] != ' ' && s[k] != '\t' && s[k] != '\r') k++;
            return ts_fail(TS_ERR_ARG, "line %zu: '%.*s' is not a token id (ids are 0..%d, space-separated)", line,
                           (int)(k - i > 40 ? 40 : k - i), s + i, vocab - 1);
        }
        if (v >= vocab)
            return ts_fail(TS_ERR_ARG, "line %zu: id %.*s is outside the vocabulary (0..%d)", line,
                           (int)(j - i > 40 ? 40 : j - i), s + i, vocab - 1);
        if (ids->count == ids->cap) {
            size_t c = ids->cap ? 2 * ids->cap : 64;
            int32_t *p = realloc(ids->ids, c * sizeof *p);
            if (!p) return ts_fail(TS_ERR_NOMEM, "out of memory");
            ids->ids = p;
            ids->cap = c;
        }
        ids->ids[ids->count++] = (int32_t)v;
        i = j;
    }
    return TS_OK;
}

/* Append the labels of ids, space-separated. */
static void add_labels(ts_text_buf *out, const ts_hftok *tok, const ts_bpe_ids *ids) {
    char label[512];
    for (size_t k = 0; k < ids->count; k++) {
        if (k) ts_text_buf_add(out, " ", 1);
        size_t need = ts_hftok_token_label(tok, ids->ids[k], label, sizeof label);
        ts_text_buf_str(out, label);
        if (need >= sizeof label) ts_text_buf_str(out, "...");
    }
}

/* One input line into out (without its '\n'). */
static ts_status do_line(ts_hftok *tok, const char *s, size_t n, size_t line, bool decode, bool show, bool special,
                         ts_bpe_ids *ids, ts_text_buf *out, double *encode_secs) {
    ts_status st;
    if (decode) {
        st = parse_ids(s, n, line, ts_hftok_vocab_size(tok), ids);
    } else {
        ids->count = 0;
        double t = now();
        st = ts_hftok_encode(tok, s, n, special, ids);
        *encode_secs += now() - t;
    }
    if (st != TS_OK) return st;
    if (show) {
        add_labels(out, tok, ids);
    } else if (decode) {
        char *text;
        size_t len;
        st = ts_hftok_decode(tok, ids->ids, ids->count, &text, &len);
        if (st != TS_OK) return st;
        ts_text_buf_add(out, text, len);
        free(text);
    } else {
        for (size_t k = 0; k < ids->count; k++) ts_text_buf_printf(out, k ? " %d" : "%d", (int)ids->ids[k]);
    }
    return TS_OK;
}

int ts_cmd_tokenize(int argc, char **argv) {
    /* defaults: ids of text lines, with the shipped GPT-2 files */
    const char *dir_flag = NULL;
    bool decode = false, show = false, timed = false, special = false;
    const ts_flag flags[] = {
        {"--tokenizer", TS_FLAG_STRING, &dir_flag, "DIR",
         "tokenizer.json, else tokenizer.model, else vocab.txt, else encoder.json/vocab.json and "
         "vocab.bpe/merges.txt (default: the shipped GPT-2 files, assets/gpt2)", NULL, NULL, NULL},
        {"--decode", TS_FLAG_BOOL, &decode, NULL, "read lines of ids and print their text", NULL, NULL, NULL},
        {"--show", TS_FLAG_BOOL, &show, NULL, "print each token's label (\"␣the\") instead of its id or text", NULL,
         NULL, NULL},
        {"--time", TS_FLAG_BOOL, &timed, NULL, "print the loading and encoding times to stderr", NULL, NULL, NULL},
        {"--special", TS_FLAG_BOOL, &special, NULL,
         "add the tokens the tokenizer puts around a text (BOS; BERT's [CLS] and [SEP]) to each line", NULL, NULL,
         NULL},
    };
    const ts_cli_spec spec = {
        .command = "tokenize",
        .synopsis = "[--tokenizer DIR] [--decode] [--show] [--special] [--time] [FILE]",
        .description = "A tokenizer on each line of FILE (stdin when none, or '-'): one output line per input\n"
                       "line, the ids space-separated. GPT-2's byte-level BPE unless --tokenizer DIR holds\n"
                       "another (Hugging Face's tokenizer.json, SentencePiece's tokenizer.model, BERT's\n"
                       "vocab.txt). --decode turns such id lines back into text; --show prints readable\n"
                       "token labels (a space is ␣, a newline ↵).",
        .flags = flags,
        .n_flags = 5,
        .min_positional = 0,
        .max_positional = 1,
        .positional_meta = "FILE",
    };
    const char *path = NULL;
    int n_pos = 0;
    int rc = ts_cli_parse(&spec, argc, argv, &path, &n_pos);
    if (rc >= 0) return rc;

    char dir[4096];
    if (dir_flag) snprintf(dir, sizeof dir, "%s", dir_flag);
    else if (ts_bpe_default_dir(dir, sizeof dir) != TS_OK) return ts_cli_error("tokenize", "%s", ts_last_error());
    ts_hftok *tok;
    double t0 = now();
    if (ts_hftok_open(&tok, dir) != TS_OK) return ts_cli_error("tokenize", "%s", ts_last_error());
    double load_secs = now() - t0, encode_secs = 0;
    char *data;
    size_t len;
    if (read_input(n_pos ? path : NULL, &data, &len) != TS_OK) {
        ts_hftok_close(tok);
        return ts_cli_error("tokenize", "%s", ts_last_error());
    }

    /* All output is kept until every line worked, so a bad line leaves no
     * half-written output behind. */
    ts_text_buf out = {0};
    ts_bpe_ids ids = {0};
    ts_status st = TS_OK;
    size_t line = 1;
    for (size_t i = 0; i < len && st == TS_OK; line++) {
        const char *nl = memchr(data + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - data) : len;
        st = do_line(tok, data + i, end - i, line, decode, show, special, &ids, &out, &encode_secs);
        ts_text_buf_add(&out, "\n", 1);
        i = end + 1;
    }
    if (timed && st == TS_OK) {
        fprintf(stderr, "tokenize: load %.3f s", load_secs);
        if (!decode)
            fprintf(stderr, "; encode %.2f MB in %.3f s (%.1f MB/s), %zu lines", (double)len / 1e6, encode_secs,
                    encode_secs > 0 ? (double)len / 1e6 / encode_secs : 0.0, line - 1);
        fprintf(stderr, "\n");
    }
    ts_bpe_ids_free(&ids);
    free(data);
    ts_hftok_close(tok);
    if (st == TS_OK && out.oom) st = ts_fail(TS_ERR_NOMEM, "out of memory");
    if (st != TS_OK) {
        free(out.s);
        return ts_cli_error("tokenize", "%s: %s", n_pos && strcmp(path, "-") != 0 ? path : "stdin", ts_last_error());
    }
    if (out.len && fwrite(out.s, 1, out.len, stdout) != out.len) st = TS_ERR_IO;
    free(out.s);
    if (fflush(stdout) != 0 || st != TS_OK) {
        fprintf(stderr, "tscope tokenize: cannot write the output: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}
