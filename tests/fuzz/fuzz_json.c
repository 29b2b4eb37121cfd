/* libFuzzer target for the typed JSON reader every config, tokenizer and
 * metadata goes through (src/core/json.c): the input parsed as a JSON
 * object, a key given twice looked for, then every top-level value read by
 * each getter (whole numbers in ranges, numbers, strings, booleans) and
 * quoted for a message. Any of it may fail, with a message, but never read
 * out of bounds, leak, overflow or crash.
 *   clang -fsanitize=fuzzer,address ... ; ./fuzz_json -max_total_time=60 */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/core.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* an exact-size copy, not NUL-terminated: reading past the input is caught */
    char *copy = malloc(size ? size : 1);
    if (!copy) abort();
    if (size) memcpy(copy, data, size);
    cJSON *o = NULL;
    if (ts_json_parse(copy, size, "fuzz", &o) == TS_OK && o) {
        (void)ts_json_check_unique(o, "fuzz");
        const cJSON *v;
        cJSON_ArrayForEach(v, o) {
            if (!v->string) continue;
            int64_t i;
            double d;
            const char *s;
            bool b;
            char q[64];
            (void)ts_json_int(o, v->string, "fuzz", true, INT64_MIN, INT64_MAX, &i);
            (void)ts_json_int(o, v->string, "fuzz", false, -5, 1 << 20, &i);
            (void)ts_json_number(o, v->string, "fuzz", true, &d);
            (void)ts_json_string(o, v->string, "fuzz", true, &s);
            (void)ts_json_bool(o, v->string, "fuzz", true, &b);
            ts_json_quote(v, q, sizeof q);
            (void)ts_json_has(o, v->string);
        }
        cJSON_Delete(o);
    }
    /* the text helpers the readers check their strings with */
    int64_t x;
    size_t bad;
    char inert[128];
    char *z = malloc(size + 1);
    if (!z) abort();
    if (size) memcpy(z, copy, size);
    z[size] = '\0';
    (void)ts_text_int(z, INT64_MIN, INT64_MAX, &x);
    (void)ts_text_utf8_valid(copy, size, &bad);
    ts_text_inert(inert, sizeof inert, z);
    free(z);
    free(copy);
    return 0;
}
