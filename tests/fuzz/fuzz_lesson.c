/* libFuzzer target for the lesson parser: any bytes must parse or fail with a
 * message, never crash, leak or read out of bounds. Everything a renderer
 * would touch afterwards (markup, plain text, setup lookups, name checks) is
 * exercised too.
 *   clang -fsanitize=fuzzer,address ... ; ./fuzz_lesson -max_total_time=60 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/lesson.h"

static bool any_name(void *ctx, const char *run, const char *name, char *hint, size_t cap) {
    (void)ctx;
    (void)run;
    if (cap) hint[0] = '\0';
    return strlen(name) % 2 == 0;
}

static void touch(const ts_lesson_narration *n) {
    for (int b = 0; b < n->n_blocks; b++) {
        char *s = NULL;
        if (ts_lesson_block_markup(&n->blocks[b], &s) == TS_OK) free(s);
        if (ts_lesson_block_text(&n->blocks[b], &s) == TS_OK) free(s);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* An exact-size copy, so reading one byte past the input is caught. */
    char *text = malloc(size ? size : 1);
    if (!text) return 0;
    if (size) memcpy(text, data, size);
    ts_lesson l;
    if (ts_lesson_parse(&l, "fuzz.md", text, size) == TS_OK) {
        touch(&l.intro);
        for (int i = 0; i < l.n_steps; i++) touch(&l.steps[i].narration);
        for (int r = 0; r < l.n_setups; r++) (void)ts_lesson_setup_get(&l, r, "preset");
        (void)ts_lesson_check_names(&l, any_name, NULL, NULL);
    }
    ts_lesson_free(&l);
    free(text);
    return 0;
}
