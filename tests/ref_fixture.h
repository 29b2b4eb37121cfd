/* ref_fixture: reading a PyTorch fixture case from tests/ref/<case>/ (or
 * $TSCOPE_REF_DIR): its weights.safetensors, the model configuration in that
 * file's __metadata__, and the input .npy files. Shared by test_parity.c and
 * test_grad_parity.c so the two read the fixtures the same way. Every reader
 * fails the current cmocka test on a missing or bad file. */
#ifndef TSCOPE_TESTS_REF_FIXTURE_H
#define TSCOPE_TESTS_REF_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "tscope/model.h"
#include "tscope/io.h"

/* The model fixtures in tests/ref/ (make_fixtures.py), one test each in
 * test_parity.c and test_grad_parity.c: X("case") separated by commas. */
#define REF_MODEL_CASES(X) \
    X("mha"), \
    X("mha_kpm"), \
    X("mha_causal"), \
    X("mha_kpm_causal"), \
    X("enc_post_relu_norm"), \
    X("enc_post_relu_nonorm"), \
    X("enc_post_gelu_norm"), \
    X("enc_post_gelu_nonorm"), \
    X("enc_pre_relu_norm"), \
    X("enc_pre_relu_nonorm"), \
    X("enc_pre_gelu_norm"), \
    X("enc_pre_gelu_nonorm"), \
    X("enc_post_relu_norm_kpm"), \
    X("enc_pre_gelu_norm_kpm"), \
    X("enc_post_relu_nores"), \
    X("enc_pre_gelu_nores"), \
    X("dec_layer_post_relu"), \
    X("dec_layer_pre_gelu_kpm"), \
    X("transformer_post_relu"), \
    X("transformer_pre_gelu_kpm")

/* The path of a fixture file; valid until four more calls. */
const char *ref_fixture(const char *dir, const char *file);
bool ref_fixture_exists(const char *dir, const char *file);
void ref_read_npy(ts_npy *out, const char *dir, const char *file);

/* A __metadata__ value; fails the test when the key is missing. */
const char *ref_meta(const ts_safetensors *f, const char *key);
/* True when the key is there and says "True" (Python's spelling). */
bool ref_meta_flag(const ts_safetensors *f, const char *key);

typedef struct ref_setup {
    ts_model_config cfg;
    const char *prefix;  /* what the state_dict's names sit under in our model */
    const char *src;     /* source input file: x.npy, src.npy or memory.npy */
    bool decoder_alone;  /* nn.TransformerDecoderLayer: the input is memory */
} ref_setup;

/* The model configuration a fixture's module was built with (batch and seq
 * come from the inputs, see ref_inputs_read). */
void ref_setup_from_fixture(ref_setup *s, const char *dir);

/* (B, S) float 0/1 padding mask -> uint8 pads (owned), or NULL when the
 * fixture has none. */
uint8_t *ref_read_pads(const char *dir, const char *file);

typedef struct ref_inputs {
    ts_npy src;      /* (B, S, D) x.npy or src.npy; empty when decoder_alone */
    ts_npy memory;   /* (B, S, D) memory.npy when decoder_alone, else empty */
    ts_npy tgt;      /* (B, T, D) tgt.npy for encoder-decoder arches, else empty */
    uint8_t *src_pad; /* (B, S) or NULL */
    uint8_t *tgt_pad; /* (B, T) or NULL */
    ts_model_input in; /* points into the above */
} ref_inputs;

/* Read a case's inputs and padding masks, and set s->cfg's batch, seq and
 * tgt_seq from their shapes. */
void ref_inputs_read(ref_inputs *io, ref_setup *s, const char *dir);
void ref_inputs_free(ref_inputs *io);

#endif
