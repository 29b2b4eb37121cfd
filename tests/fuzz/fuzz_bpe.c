/* libFuzzer target for GPT-2's BPE: any bytes must encode, with every id in
 * the vocabulary, and decode back to themselves, or for ill-formed UTF-8 to
 * their U+FFFD form; every token's label must fit the length it reports.
 * Reads the shipped assets/gpt2 (or $TSCOPE_ASSETS) once.
 *   clang -fsanitize=fuzzer,address ... ; ./fuzz_bpe -max_total_time=60 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/tokenizer/bpe_impl.h"
#include "tscope/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static ts_bpe *bpe;
    if (!bpe) {
        char dir[4096];
        if (ts_bpe_default_dir(dir, sizeof dir) != TS_OK || ts_bpe_load(&bpe, dir) != TS_OK) {
            fprintf(stderr, "fuzz_bpe: %s\n", ts_last_error());
            abort();
        }
    }
    /* An exact-size copy, so reading one byte past the input is caught. */
    char *text = malloc(size ? size : 1);
    uint8_t *fixed = malloc(3 * size + 1);
    if (!text || !fixed) abort();
    if (size) memcpy(text, data, size);
    size_t nf = ts_bpe_utf8_replace((const uint8_t *)text, size, fixed);
    ts_bpe_ids ids = {0};
    if (ts_bpe_encode(bpe, text, size, &ids) != TS_OK) abort();
    char *back;
    size_t blen;
    if (ts_bpe_decode(bpe, ids.ids, ids.count, &back, &blen) != TS_OK) abort();
    if (blen != nf || memcmp(back, fixed, nf) != 0) abort();
    for (size_t k = 0; k < ids.count; k++) {
        char label[16];
        size_t need = ts_bpe_token_label(bpe, ids.ids[k], label, sizeof label);
        if (strlen(label) > need || strlen(label) >= sizeof label) abort();
    }
    free(back);
    ts_bpe_ids_free(&ids);
    free(fixed);
    free(text);
    return 0;
}
