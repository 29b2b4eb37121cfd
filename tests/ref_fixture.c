#include "ref_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

static const char *ref_dir(void) {
    const char *d = getenv("TSCOPE_REF_DIR");
    return d && d[0] ? d : "tests/ref";
}

/* A ring of buffers so a call can take two fixture paths at once. */
const char *ref_fixture(const char *dir, const char *file) {
    static char buf[4][512];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, 512, "%s/%s/%s", ref_dir(), dir, file);
    return p;
}

bool ref_fixture_exists(const char *dir, const char *file) { return access(ref_fixture(dir, file), R_OK) == 0; }

void ref_read_npy(ts_npy *out, const char *dir, const char *file) {
    assert_ok(ts_npy_read(out, ref_fixture(dir, file)));
}

const char *ref_meta(const ts_safetensors *f, const char *key) {
    const char *v = ts_safetensors_meta(f, key);
    if (!v) {
        print_error("%s: __metadata__ has no %s\n", f->path, key);
        fail();
    }
    return v;
}

bool ref_meta_flag(const ts_safetensors *f, const char *key) {
    const char *v = ts_safetensors_meta(f, key);
    return v && strcmp(v, "True") == 0;
}

void ref_setup_from_fixture(ref_setup *s, const char *dir) {
    ts_safetensors f;
    assert_ok(ts_safetensors_open(&f, ref_fixture(dir, "weights.safetensors")));
    memset(s, 0, sizeof *s);
    ts_model_config *c = &s->cfg;
    const char *module = ref_meta(&f, "module");
    c->d_model = atoi(ref_meta(&f, "d_model"));
    c->heads = atoi(ref_meta(&f, "heads"));
    c->eps = 1e-5f;
    c->embed_eps = 1e-12f; /* unused: no learned embeddings here */
    c->pe = TS_PE_NONE;
    c->head = TS_HEAD_NONE;
    c->input = TS_INPUT_EMBEDDED;
    c->seed = 1;
    s->src = "x.npy";
    if (strcmp(module, "nn.MultiheadAttention") == 0) {
        c->arch = TS_ARCH_ATTENTION;
        c->in_dim = c->d_model;
        c->ffn = 4 * c->d_model;
        c->causal = ref_meta_flag(&f, "causal");
    } else {
        c->ffn = atoi(ref_meta(&f, "ffn"));
        c->eps = (float)atof(ref_meta(&f, "eps"));
        c->norm = strcmp(ref_meta(&f, "norm"), "pre") == 0 ? TS_NORM_PRE : TS_NORM_POST;
        c->activation = strcmp(ref_meta(&f, "activation"), "gelu") == 0 ? TS_ACT_GELU : TS_ACT_RELU;
        if (strcmp(module, "nn.TransformerEncoder") == 0) {
            c->arch = TS_ARCH_ENCODER;
            c->layers = atoi(ref_meta(&f, "layers"));
            c->final_norm = ref_meta_flag(&f, "final_norm");
        } else if (strcmp(module, "nn.TransformerDecoderLayer") == 0) {
            c->arch = TS_ARCH_ENCODER_DECODER;
            c->layers = 0;
            c->dec_layers = 1;
            s->prefix = "decoder.layers.0.";
            s->src = "memory.npy";
            s->decoder_alone = true;
        } else if (strcmp(module, "nn.Transformer") == 0) {
            c->arch = TS_ARCH_ENCODER_DECODER;
            c->layers = atoi(ref_meta(&f, "layers"));
            c->dec_layers = atoi(ref_meta(&f, "dec_layers"));
            c->final_norm = true;
            s->src = "src.npy";
        } else {
            print_error("%s: unknown module %s\n", dir, module);
            fail();
        }
    }
    /* tscope's teaching variants the fixture script wrote in PyTorch (no-residual) */
    const char *variant = ts_safetensors_meta(&f, "variant");
    if (variant) assert_ok(ts_model_variant_parse(variant, &c->variants));
    ts_safetensors_close(&f);
}

uint8_t *ref_read_pads(const char *dir, const char *file) {
    if (!ref_fixture_exists(dir, file)) return NULL;
    ts_npy m;
    ref_read_npy(&m, dir, file);
    uint8_t *pads = malloc((size_t)m.numel);
    assert_non_null(pads);
    for (int64_t i = 0; i < m.numel; i++) pads[i] = m.f32[i] != 0;
    ts_npy_free(&m);
    return pads;
}

void ref_inputs_read(ref_inputs *io, ref_setup *s, const char *dir) {
    memset(io, 0, sizeof *io);
    ts_npy *first = s->decoder_alone ? &io->memory : &io->src;
    ref_read_npy(first, dir, s->src);
    s->cfg.batch = (int)first->shape[0];
    s->cfg.seq = (int)first->shape[1];
    if (s->cfg.arch == TS_ARCH_ENCODER_DECODER) {
        ref_read_npy(&io->tgt, dir, "tgt.npy");
        s->cfg.tgt_seq = (int)io->tgt.shape[1];
    }
    io->src_pad = ref_read_pads(dir, "key_padding_mask.npy");
    if (!io->src_pad) io->src_pad = ref_read_pads(dir, "src_key_padding_mask.npy");
    if (!io->src_pad) io->src_pad = ref_read_pads(dir, "memory_key_padding_mask.npy");
    io->tgt_pad = ref_read_pads(dir, "tgt_key_padding_mask.npy");
    io->in.src_embedded = io->src.f32;
    io->in.memory = io->memory.f32;
    io->in.tgt_embedded = io->tgt.f32;
    io->in.src_pad = io->src_pad;
    io->in.tgt_pad = io->tgt_pad;
}

void ref_inputs_free(ref_inputs *io) {
    ts_npy_free(&io->src);
    ts_npy_free(&io->memory);
    ts_npy_free(&io->tgt);
    free(io->src_pad);
    free(io->tgt_pad);
    memset(io, 0, sizeof *io);
}
