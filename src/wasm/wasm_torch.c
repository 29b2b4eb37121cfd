/* wasm_torch: the browser build has no libzip, so src/io/torch_pt.c (torch.save
 * files are zip archives) is left out of it. These two take its place: a
 * torch.save file is still recognised by its zip header, and refused by
 * name, never read as a safetensors file it is not. */
#include <stdio.h>
#include <string.h>

#include "tscope/io.h"

bool ts_torch_pt_is(const char *path) {
    unsigned char magic[4] = {0};
    FILE *fp = fopen(path, "rb");
    size_t got = fp ? fread(magic, 1, sizeof magic, fp) : 0;
    if (fp) fclose(fp);
    return got == sizeof magic && memcmp(magic, "PK\3\4", sizeof magic) == 0;
}

ts_status ts_torch_pt_open(ts_safetensors *f, const char *path) {
    (void)f;
    return ts_fail(TS_ERR_ARG, "%s: a torch.save file; the live page reads safetensors checkpoints only", path);
}
