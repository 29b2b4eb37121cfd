/* libFuzzer target for the tokenizers of today's models (ts_hftok). An input
 * that starts as a tokenizer.model does (0x0A: field 1, a piece) is one:
 *         read from memory, refused with a message, or read, and then it
 *         must encode a sample text and the input itself with every id in
 *         its vocabulary, decode them and label them;
 * any other is a text, through the fixture tokenizers of tests/ref/tokenizers
 *         (gpt2, neox, llama3, bert-txt, spm; read once, from the top of
 *         the tree as scripts/fuzz.sh runs it): every id in the vocabulary,
 *         decoding and labels within bounds.
 *   clang -fsanitize=fuzzer,address ... ; ./fuzz_hftok -max_total_time=60 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/tokenizer/tok_impl.h"
#include "tscope/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void exercise(ts_hftok *t, const char *text, size_t len) {
    ts_bpe_ids ids = {0};
    if (ts_hftok_encode(t, text, len, len & 1, &ids) != TS_OK) abort();
    for (size_t k = 0; k < ids.count; k++) {
        if (ids.ids[k] < 0 || ids.ids[k] >= ts_hftok_vocab_size(t)) abort();
        char label[16];
        size_t need = ts_hftok_token_label(t, ids.ids[k], label, sizeof label);
        if (strlen(label) > need || strlen(label) >= sizeof label) abort();
    }
    char *back;
    size_t blen;
    if (ts_hftok_decode(t, ids.ids, ids.count, &back, &blen) != TS_OK) abort();
    free(back);
    ts_bpe_ids_free(&ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const names[] = {"gpt2", "neox", "llama3", "bert-txt", "spm"};
    static ts_hftok *toks[5];
    if (size == 0) return 0;
    /* an exact-size copy, so reading one byte past it is caught */
    size_t n = size;
    char *rest = malloc(n);
    if (!rest) abort();
    memcpy(rest, data, n);
    if (data[0] == 0x0A) {
        ts_hftok *t = tok_new();
        if (!t) abort();
        if (tok_load_spm_bytes(t, (const uint8_t *)rest, n, "fuzz.model") == TS_OK) {
            exercise(t, "In the beginning God created the heaven and the earth. \xe2\x98\x83", 59);
            exercise(t, rest, n);
        } else if (!ts_last_error()[0]) {
            abort(); /* a refusal always says why */
        }
        ts_hftok_close(t);
    } else {
        for (int i = 0; i < 5; i++) {
            if (!toks[i]) {
                char dir[256];
                snprintf(dir, sizeof dir, "tests/ref/tokenizers/%s", names[i]);
                if (ts_hftok_open(&toks[i], dir) != TS_OK) {
                    fprintf(stderr, "fuzz_hftok: %s\n", ts_last_error());
                    abort();
                }
            }
            exercise(toks[i], rest, n);
        }
    }
    free(rest);
    return 0;
}
