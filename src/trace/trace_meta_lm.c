/* trace_meta_lm: the metadata of a language model's trace: its config, each
 * token's label (axes and hovers name the characters), the tokenizer (it
 * names the logits' vocabulary axis) and the command line. `tscope run` and
 * `tscope live` write the same, so the views read both alike. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "tscope/io.h"
#include "tscope/model.h"
#include "tscope/tokenizer.h"
#include "tscope/trace.h"

#define LABEL_BYTES 64

/* A token's label; its id when there is no tokenizer (--ids alone), and a
 * padded vocabulary's extra ids (nanoGPT's 50304) say so. */
static void label(const ts_lmtok *tok, int32_t id, char *buf, size_t cap) {
    if (tok->count == 0) snprintf(buf, cap, "%d", (int)id);
    else if (id >= tok->count) snprintf(buf, cap, "<pad %d>", (int)id);
    else ts_lmtok_label(tok, id, buf, cap);
}

ts_status ts_trace_metadata_lm(char **out, const ts_model_config *cfg, const ts_lmtok *tok, const int32_t *ids, int B,
                               int S, int argc, char **argv) {
    *out = NULL;
    char *labels = malloc((size_t)B * (size_t)S * LABEL_BYTES);
    const char **lab = malloc(sizeof *lab * (size_t)B * (size_t)S);
    char *config = ts_model_config_to_json(cfg), *tokjson = tok->count ? ts_lmtok_to_json(tok) : NULL;
    char **line = calloc((size_t)argc + 1, sizeof *line);
    char *meta = NULL;
    ts_status st = labels && lab && config && (tokjson || !tok->count) && line ? TS_OK : ts_fail(TS_ERR_NOMEM, "trace: no memory");
    for (int i = 0; !st && i < B * S; i++) {
        label(tok, ids[i], labels + (size_t)i * LABEL_BYTES, LABEL_BYTES);
        lab[i] = labels + (size_t)i * LABEL_BYTES;
    }
    if (!st) {
        line[0] = "tscope";
        for (int i = 0; i < argc; i++) line[i + 1] = argv[i];
        st = ts_trace_metadata_build(&meta, config, lab, S, NULL, 0, argc + 1, line);
    }
    if (!st && B > 1) st = ts_trace_metadata_add_batch_tokens(&meta, TS_TRACE_SOURCE, lab, B, S);
    if (!st && tokjson) st = ts_trace_metadata_add_json(&meta, "tokenizer", tokjson);
    free(line), free(config), free(tokjson), free(lab), free(labels);
    if (st) {
        free(meta);
        return st;
    }
    *out = meta;
    return TS_OK;
}
