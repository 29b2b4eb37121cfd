/* model_flags: the model flags shared by run, shapes, bench and train, and
 * what they resolve to: a config, a vocabulary, and the batch to feed.
 *
 * Resolution order: the preset (tiny when none is given), then each model flag
 * given, then the text. Text decides the source length and the vocabulary;
 * the decoder reads the source shifted right (<bos> first, the last token
 * dropped; a source that starts with <bos>, like the copy task's random ids,
 * is only cut by one). Several --text give a batch padded to the longest.
 */
#ifndef TSCOPE_CMD_MODEL_FLAGS_H
#define TSCOPE_CMD_MODEL_FLAGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cli.h"
#include "tscope/core.h"
#include "tscope/io.h"
#include "tscope/model.h"
#include "tscope/tokenizer.h"

/* The rows model_flags_table adds to a command's flag table, in order: the
 * index of each row's `seen` slot. */
enum model_flag_id {
    F_PRESET, F_D_MODEL, F_HEADS, F_FFN, F_LAYERS, F_DEC_LAYERS, F_VOCAB, F_SEQ, F_BATCH, F_DROPOUT,
    F_NORM, F_PE, F_ACTIVATION, F_EPS, F_FINAL_NORM, F_SEED, F_TEXT, F_VARIANT, F_PE_VARIANT, F_MASK,
    F_TRAIN_MODE, F_HEAD, F_ARCH, F_NORM_FORMULA, F_POS, F_KV_HEADS, F_MASK_FILL,
    MODEL_FLAGS_COUNT
};

typedef struct model_flags {
    const char *preset;
    int d_model, heads, layers, dec_layers, vocab, seq, batch, seed, kv_heads;
    ts_cli_list ffn;                   /* --ffn: a width N, a kind (mlp|swiglu|geglu), or one of each */
    float dropout, eps;
    const char *norm, *pe, *pos, *activation;
    bool final_norm;
    ts_cli_list text;
    ts_cli_list variant;               /* words, repeatable: no-scale seed000-reshape ... */
    const char *pe_variant, *mask;
    bool train_mode;
    const char *head;                  /* --head none|lm */
    const char *arch;                  /* --arch encoder|encoder-decoder|decoder|llama */
    const char *norm_formula;          /* --norm-formula standard|std+eps */
    const char *mask_fill;             /* --mask-fill -inf|-1e9|VALUE */
    bool seen[MODEL_FLAGS_COUNT]; /* which flags were given, in table order */
} model_flags;

/* --mask-fill's word to the config's mask_fill: "-inf" is 0 (the default),
 * a number must be negative and a float; anything else is refused. */
ts_status model_flags_mask_fill(const char *v, float *fill);

/* Append the model flags' rows to table (room for MODEL_FLAGS_COUNT more)
 * starting at n; returns the new count. mf must outlive the parse. */
int model_flags_table(ts_flag *table, int n, model_flags *mf);

/* What a model run reads, built from the flags. */
typedef struct model_batch {
    ts_tokenizer tok;       /* vocabulary (empty for embedded input) */
    bool have_tok;
    int32_t *src_ids;       // (B, S) or NULL
    int32_t *tgt_ids;       // (B, T) or NULL
    uint8_t *src_pad;       // (B, S) or NULL when nothing is padded
    uint8_t *tgt_pad;       // (B, T) or NULL
    float *src_vecs;        // (B, S, in_dim) random input, or NULL
    float *tgt_vecs;        // (B, T, D) or NULL
    int n_texts;
} model_batch;

/* Preset + flags + text -> config (checked). With batch NULL nothing is
 * allocated (tscope shapes); otherwise the inputs are built too. On failure a
 * message is set; the caller prints it and exits 2. */
ts_status model_flags_resolve(const model_flags *mf, ts_model_config *cfg, model_batch *batch);

/* What `tscope run` knows before the flags are resolved. */
typedef struct model_given {
    const ts_model_config *base; /* the config from --load with the flags already checked against it
                                  * (model_weights.c), or NULL: preset + flags */
    const char *weights_path;    /* --load, for messages */
    const ts_npy *input;         /* --input vectors (B, S, W), or NULL */
    const ts_npy *target;        /* --target vectors (B, T, D), or NULL */
    const ts_npy *ids;           /* --ids token ids (B, S), as labels (i64), or NULL */
    const char *input_path, *target_path, *ids_path;
    bool src_pad_given;          /* --src-key-padding-mask */
    bool trains;                 /* tscope train: dropout always acts */
} model_given;

/* model_flags_resolve from what run was given: the weights' config instead of
 * the preset, the input files' batch and lengths instead of the text's (flags
 * that disagree with either are errors naming both values). */
ts_status model_flags_resolve_given(const model_flags *mf, const model_given *given, ts_model_config *cfg,
                                    model_batch *batch);

/* Apply the model flags given to cfg (no checks); for model_weights.c. */
ts_status model_flags_apply(const model_flags *mf, ts_model_config *cfg);
void model_batch_free(model_batch *b);

/* The ts_model_input that feeds b. */
ts_model_input model_batch_input(const model_batch *b);

/* A hook that prints each step as the seeds do: a header line when the module
 * changes ("------- encoder.layers.0.self_attn -------"), then
 * "qkv.size(): [30, 200, 1536]" or "qkv.size(): torch.Size([30, 200, 1536])".
 * Steps come in the order of the data (an attention's weights, then the
 * values made from them); the torch style prints values before weights, as
 * seed 000 does on one line, so its printout can be compared line by line. */
typedef struct shape_printer {
    FILE *out;
    ts_shape_style style;
    char group[TS_MODEL_NAME_MAX];
    char held[TS_MODEL_NAME_MAX + TS_SHAPE_TEXT_MAX]; /* torch style: a weights line waiting for its values */
} shape_printer;

void shape_printer_init(shape_printer *p, FILE *out, ts_shape_style style);
ts_hook shape_printer_hook(shape_printer *p);


#endif
