/* libFuzzer target for torch.save files: input starting with "PK" is written
 * to a file and opened as a checkpoint (the zip through libzip, then the
 * pickle, the state_dict, every tensor's extent); any other input is parsed as
 * a pickle. Either may fail, with a message, but never read or write out of
 * bounds, leak, or crash.
 *   clang -fsanitize=fuzzer,address ... ; ./fuzz_torch_pt -max_total_time=60 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tscope/io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size >= 2 && data[0] == 'P' && data[1] == 'K') {
        char path[] = "/tmp/fuzz_torch_pt_XXXXXX";
        int fd = mkstemp(path);
        if (fd < 0) abort();
        if (write(fd, data, size) != (ssize_t)size) abort();
        close(fd);
        ts_safetensors f;
        if (ts_safetensors_open(&f, path) == TS_OK) {
            for (int i = 0; i < f.count; i++) {
                ts_tensor t;
                (void)ts_safetensors_get(&f, f.entries[i].name, &t);
            }
            ts_safetensors_close(&f);
        }
        unlink(path);
        return 0;
    }
    /* An exact-size copy, so reading one byte past the input is caught. */
    unsigned char *copy = malloc(size ? size : 1);
    if (!copy) abort();
    if (size) memcpy(copy, data, size);
    ts_pickle p;
    if (ts_pickle_parse(&p, copy, size, "fuzz") == TS_OK) {
        (void)ts_pk_get(p.root, "model");
        (void)ts_pk_kind_name(p.root);
        ts_pickle_free(&p);
    }
    free(copy);
    return 0;
}
