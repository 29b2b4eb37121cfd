/* model_config: the presets and the checks that explain a config that cannot work.
 *
 * Choices made here (documented in README's presets table too):
 * - tiny: seed 001's "My name is Goro" through a 2+2-layer encoder-decoder of
 *   width 16, small enough to print every value. The decoder reads the text
 *   shifted right (<bos> my name is), as a trained copy model would.
 * - seed000: seed 000's encoder exactly: embedded random input N(0,1)
 *   (B30 S200 d512), no positional encoding, post-LN, 5 layers, ReLU.
 * - seed001: seed 001's MultiHeadAttention alone: input width 1024 projected to
 *   3 x 512, 8 heads, B30 S10.
 * - seed004: seed 004's bert-base-sized TransformerForSequenceClassification:
 *   768 wide, 12 heads, FFN 3072 (ReLU, as its FeedForward), 12 layers, BERT's
 *   30522-word vocabulary and 512 learned positions (token + position, then a
 *   LayerNorm with eps 1e-12), pre-LN blocks written correctly (the seed's
 *   block adds dropout(x) instead of the attention output), no final norm,
 *   3 labels from the first token. The fox sentence, no special tokens: S = 9.
 * - copy: seed 004's copy task: vocab 100, d512, FFN 2048, 6+6 layers, batch
 *   64 of 10 random ids starting with 1; the decoder reads source[:-1] (T = 9)
 *   as the seed's dataset does. Learned positions and pre-LN like seed 004,
 *   with a LayerNorm after each stack as nn.Transformer(norm_first=True) has:
 *   without it the output projection reads the raw residual stream, whose
 *   scale grows with depth, and the seed's Adam at 1e-3 with no warm-up
 *   blows the loss up (5 to 26 in 9 steps; with the norms it stays near 4.7).
 * - base: the paper's base model: d512, 8 heads, FFN 2048, 6+6 post-LN layers,
 *   sinusoidal positions, embeddings scaled by sqrt(d_model) and shared between
 *   source, target and the pre-softmax projection. The paper's WMT En-De
 *   vocabulary had about 37000 BPE tokens: vocab 37000. Two sentences of 256
 *   tokens (the paper batched ~25000 tokens; two keep a CPU forward near a second).
 * - lm: the shipped character-level language model of the King James Bible
 *   (assets/kjv-char.safetensors): a GPT (decoder-only), 4 pre-LN layers of
 *   width 128, 4 heads, GELU, learned positions, a final norm and a head tied
 *   to the token table; 73 characters, a context of 128, batches of 32.
 * - gpt2: GPT-2 small: 12 layers of width 768, 12 heads, FFN 3072, GELU's tanh
 *   form, a context of 1024, GPT-2's 50257 BPE tokens, tied head without bias:
 *   124,439,808 parameters. One sequence of 1024 tokens.
 * Token embeddings are scaled by sqrt(d_model) with sinusoidal positions (the
 * paper, section 3.4) and not with learned ones (seed 004 and BERT do not).
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/model.h"

#define FOX "The quick brown fox jumps over the lazy dog"
#define GORO "My name is Goro"

typedef struct preset {
    const char *name;
    ts_model_config cfg;
} preset;

static const preset presets[] = {
    {"tiny",
     {.arch = TS_ARCH_ENCODER_DECODER, .d_model = 16, .heads = 2, .ffn = 32, .layers = 2, .dec_layers = 2,
      .vocab = 0, .seq = 4, .tgt_seq = 4, .batch = 1, .dropout = 0.1f, .eps = 1e-5f, .embed_eps = 1e-5f,
      .norm = TS_NORM_POST, .pe = TS_PE_SINUSOIDAL, .activation = TS_ACT_RELU, .head = TS_HEAD_LM,
      .input = TS_INPUT_TOKENS, .scale_embed = true, .seed = 0, .text = GORO}},
    {"seed000",
     {.arch = TS_ARCH_ENCODER, .d_model = 512, .heads = 8, .ffn = 2048, .layers = 5, .seq = 200,
      .batch = 30, .dropout = 0.1f, .eps = 1e-5f, .embed_eps = 1e-5f, .norm = TS_NORM_POST,
      .pe = TS_PE_NONE, .activation = TS_ACT_RELU, .head = TS_HEAD_NONE, .input = TS_INPUT_EMBEDDED,
      .seed = 0}},
    {"seed001",
     {.arch = TS_ARCH_ATTENTION, .d_model = 512, .heads = 8, .ffn = 2048, .layers = 0, .seq = 10,
      .batch = 30, .in_dim = 1024, .dropout = 0.1f, .eps = 1e-5f, .embed_eps = 1e-5f,
      .norm = TS_NORM_POST, .pe = TS_PE_NONE, .activation = TS_ACT_RELU, .head = TS_HEAD_NONE,
      .input = TS_INPUT_EMBEDDED, .seed = 0}},
    {"seed004",
     {.arch = TS_ARCH_ENCODER, .d_model = 768, .heads = 12, .ffn = 3072, .layers = 12, .vocab = 30522,
      .seq = 9, .batch = 1, .max_pos = 512, .n_labels = 3, .dropout = 0.1f, .eps = 1e-5f,
      .embed_eps = 1e-12f, .norm = TS_NORM_PRE, .pe = TS_PE_LEARNED, .activation = TS_ACT_RELU,
      .head = TS_HEAD_CLS, .input = TS_INPUT_TOKENS, .seed = 0, .text = FOX}},
    {"copy",
     {.arch = TS_ARCH_ENCODER_DECODER, .d_model = 512, .heads = 8, .ffn = 2048, .layers = 6,
      .dec_layers = 6, .vocab = 100, .seq = 10, .tgt_seq = 9, .batch = 64, .max_pos = 512,
      .dropout = 0.1f, .eps = 1e-5f, .embed_eps = 1e-5f, .norm = TS_NORM_PRE, .pe = TS_PE_LEARNED,
      .final_norm = true, .activation = TS_ACT_RELU, .head = TS_HEAD_LM, .input = TS_INPUT_TOKENS, .seed = 0}},
    {"base",
     {.arch = TS_ARCH_ENCODER_DECODER, .d_model = 512, .heads = 8, .ffn = 2048, .layers = 6,
      .dec_layers = 6, .vocab = 37000, .seq = 256, .tgt_seq = 256, .batch = 2, .dropout = 0.1f,
      .eps = 1e-5f, .embed_eps = 1e-5f, .norm = TS_NORM_POST, .pe = TS_PE_SINUSOIDAL,
      .activation = TS_ACT_RELU, .head = TS_HEAD_LM, .input = TS_INPUT_TOKENS, .scale_embed = true,
      .tie_embed = true, .seed = 0}},
    {"lm",
     {.arch = TS_ARCH_DECODER, .d_model = 128, .heads = 4, .ffn = 512, .layers = 4, .vocab = 73, .seq = 128,
      .batch = 32, .max_pos = 128, .dropout = 0.0f, .eps = 1e-5f, .embed_eps = 1e-5f, .norm = TS_NORM_PRE,
      .pe = TS_PE_LEARNED, .final_norm = true, .activation = TS_ACT_GELU, .head = TS_HEAD_LM,
      .input = TS_INPUT_TOKENS, .causal = true, .tie_embed = true, .seed = 0}},
    {"gpt2",
     {.arch = TS_ARCH_DECODER, .d_model = 768, .heads = 12, .ffn = 3072, .layers = 12, .vocab = 50257, .seq = 1024,
      .batch = 1, .max_pos = 1024, .dropout = 0.0f, .eps = 1e-5f, .embed_eps = 1e-5f, .norm = TS_NORM_PRE,
      .pe = TS_PE_LEARNED, .final_norm = true, .activation = TS_ACT_GELU_TANH, .head = TS_HEAD_LM,
      .input = TS_INPUT_TOKENS, .causal = true, .tie_embed = true, .seed = 0}},
    /* Llama 3.2 1B's shape with random weights (its files' rope_scaling left out): RMSNorm, RoPE with
     * theta 500000, 32 query heads over 8 key/value heads, SwiGLU, no biases, tied; 128 positions */
    {"llama-1b",
     {.arch = TS_ARCH_DECODER, .d_model = 2048, .heads = 32, .ffn = 8192, .layers = 16, .vocab = 128256, .seq = 128,
      .batch = 1, .max_pos = 0, .dropout = 0.0f, .eps = 1e-5f, .embed_eps = 1e-5f, .norm = TS_NORM_PRE,
      .pe = TS_PE_ROPE, .final_norm = true, .activation = TS_ACT_SILU, .head = TS_HEAD_LM,
      .input = TS_INPUT_TOKENS, .causal = true, .tie_embed = true, .seed = 0, .norm_kind = TS_NORMK_RMS,
      .kv_heads = 8, .split_qkv = true, .no_qkv_bias = true, .no_out_bias = true, .no_ffn_bias = true,
      .gated_ffn = true, .rope_theta = 500000.0f}},
};
#define N_PRESETS ((int)(sizeof presets / sizeof presets[0]))

const char *ts_model_preset_names(void) { return "tiny, seed000, seed001, seed004, copy, base, lm, gpt2, llama-1b"; }

ts_status ts_model_config_preset(ts_model_config *cfg, const char *name) {
    for (int i = 0; i < N_PRESETS; i++) {
        if (strcmp(presets[i].name, name) != 0) continue;
        *cfg = presets[i].cfg;
        snprintf(cfg->preset, sizeof cfg->preset, "%s", name);
        return TS_OK;
    }
    return ts_fail(TS_ERR_ARG, "unknown preset '%s'; the presets are %s", name, ts_model_preset_names());
}

static ts_status too_small(const char *flag, int value, int least, const char *why) {
    return ts_fail(TS_ERR_ARG, "%s %d is too small: %s needs at least %d", flag, value, why, least);
}

/* The divisor of d nearest to h (the larger one on a tie). */
static int nearest_divisor(int d, int h) {
    int best = 1;
    for (int k = 1; k <= d; k++)
        if (d % k == 0 && (abs(k - h) < abs(best - h) || (abs(k - h) == abs(best - h) && k > best))) best = k;
    return best;
}

/* The one message most learners meet first: heads that do not divide the width. */
static ts_status heads_do_not_divide(const ts_model_config *c) {
    int S = c->seq, B = c->batch, D = c->d_model, H = c->heads;
    return ts_fail(TS_ERR_SHAPE,
                   "--heads %d does not divide --d-model %d (%d / %d = %.2f): every head needs a whole "
                   "number of dims, so the reshape of qkv [%d, %d, %d] to [%d, %d, %d, %d] fails "
                   "(%d is not %d x %d); try --heads %d or --d-model %d",
                   H, D, D, H, (double)D / H, B, S, 3 * D, B, S, H, 3 * D / H, 3 * D, H, 3 * D / H,
                   nearest_divisor(D, H), (D / H + 1) * H);
}

static ts_status check_sizes(const ts_model_config *c) {
    if (c->batch < 1) return too_small("--batch", c->batch, 1, "a batch");
    if (c->seq < 1) return too_small("--seq", c->seq, 1, "a sequence");
    if (c->d_model < 1) return too_small("--d-model", c->d_model, 1, "the model width");
    if (c->heads < 1) return too_small("--heads", c->heads, 1, "attention");
    if (c->heads > c->d_model && !c->head_dim)
        return ts_fail(TS_ERR_ARG, "--heads %d is more than --d-model %d: each head needs at least one dim",
                       c->heads, c->d_model);
    if (c->d_model % c->heads != 0 && !c->head_dim) return heads_do_not_divide(c);
    if (c->arch != TS_ARCH_ATTENTION && c->ffn < 1) return too_small("--ffn", c->ffn, 1, "the feed-forward layer");
    if (c->arch == TS_ARCH_ENCODER && c->layers < 1) return too_small("--layers", c->layers, 1, "an encoder");
    if (c->arch == TS_ARCH_DECODER && c->layers < 1) return too_small("--layers", c->layers, 1, "a decoder-only model");
    if (c->arch == TS_ARCH_ENCODER_DECODER) {
        /* 0 encoder layers is allowed: a decoder fed a memory directly, as
         * nn.TransformerDecoderLayer is tested, or an encoder that only embeds. */
        if (c->layers < 0) return too_small("--layers", c->layers, 0, "an encoder-decoder's encoder");
        if (c->dec_layers < 1) return too_small("--dec-layers", c->dec_layers, 1, "a decoder");
        if (c->tgt_seq < 1) return too_small("target length", c->tgt_seq, 1, "a decoder");
    } else if (c->dec_layers != 0) {
        return ts_fail(TS_ERR_ARG, "--dec-layers %d: this model has no decoder", c->dec_layers);
    }
    /* Generous limits that keep every product below int64 and every gemm
     * dimension below INT_MAX; the memory check below is the real bound. */
    const struct { const char *flag; int v, most; } lim[] = {
        {"--d-model", c->d_model, 1 << 16}, {"--heads", c->heads, 1 << 12}, {"--ffn", c->ffn, 1 << 20},
        {"--layers", c->layers, 1000},      {"--dec-layers", c->dec_layers, 1000},
        {"--seq", c->seq, 1 << 20},         {"target length", c->tgt_seq, 1 << 20},
        {"--batch", c->batch, 1 << 20},     {"--vocab", c->vocab, 1 << 24},
        {"input width", c->in_dim, 1 << 20}, {"positions", c->max_pos, 1 << 20},
    };
    for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++)
        if (lim[i].v > lim[i].most)
            return ts_fail(TS_ERR_ARG, "%s %d is larger than tscope allows (%d)", lim[i].flag, lim[i].v,
                           lim[i].most);
    double L = c->seq > c->tgt_seq ? c->seq : c->tgt_seq;
    if ((double)c->batch * L > INT_MAX / 4)
        return ts_fail(TS_ERR_ARG, "--batch %d x --seq %d tokens is more than tscope handles in one pass",
                       c->batch, (int)L);
    double att = (double)c->batch * c->heads * L * L * 4.0;
    if (att > 256.0 * (1u << 30))
        return ts_fail(TS_ERR_ARG,
                       "the attention weights alone would take %.0f GB ([%d, %d, %d, %d] floats); "
                       "use a smaller --batch or --seq",
                       att / (1u << 30), c->batch, c->heads, (int)L, (int)L);
    return TS_OK;
}

bool ts_model_is_lm(const ts_model_config *c) {
    bool causal_stack = c->arch == TS_ARCH_DECODER || (c->arch == TS_ARCH_ENCODER && c->causal);
    return causal_stack && c->head == TS_HEAD_LM && c->input == TS_INPUT_TOKENS;
}

bool ts_model_embed_norm(const ts_model_config *c) {
    return c->pe == TS_PE_LEARNED && c->arch != TS_ARCH_DECODER;
}

const char *ts_model_stack_name(const ts_model_config *c) {
    return c->arch == TS_ARCH_DECODER ? "decoder" : "encoder";
}

float ts_model_mask_fill(const ts_model_config *c) { return c->mask_fill != 0.0f ? c->mask_fill : -INFINITY; }

int ts_model_head_dim(const ts_model_config *c) { return c->head_dim ? c->head_dim : c->heads ? c->d_model / c->heads : 0; }
int ts_model_kv_heads(const ts_model_config *c) { return c->kv_heads ? c->kv_heads : c->heads; }
double ts_model_rope_theta(const ts_model_config *c) { return c->rope_theta > 0 ? c->rope_theta : 10000.0; }

int ts_model_rotary_dims(const ts_model_config *c) {
    if (c->pe != TS_PE_ROPE) return 0;
    int hd = ts_model_head_dim(c);
    if (!(c->rotary_pct > 0.0f) || c->rotary_pct >= 1.0f) return hd;
    return (int)((double)hd * c->rotary_pct); /* GPT-NeoX: int(head_size * rotary_pct) */
}

bool ts_model_is_modern(const ts_model_config *c) {
    return c->norm_kind != TS_NORMK_LAYER || c->kv_heads || c->head_dim || c->split_qkv || c->no_qkv_bias ||
           c->no_out_bias || c->no_ffn_bias || c->gated_ffn || c->parallel_residual || c->pe == TS_PE_ROPE ||
           c->activation == TS_ACT_SILU;
}

bool ts_model_is_bert(const ts_model_config *c) { return c->type_vocab != 0 || c->mlm_head; }

bool ts_model_is_masked_lm(const ts_model_config *c) {
    return c->arch == TS_ARCH_ENCODER && !c->causal && c->head == TS_HEAD_LM && c->input == TS_INPUT_TOKENS;
}

/* BERT's parts: on an encoder over tokens, the MLM head on a vocabulary head. */
static ts_status check_bert(const ts_model_config *c) {
    if (!ts_model_is_bert(c)) return TS_OK;
    if (c->type_vocab < 0 || c->type_vocab > 1 << 16)
        return ts_fail(TS_ERR_ARG, "token types %d: a model has 0 (none) to %d kinds of token", c->type_vocab, 1 << 16);
    if (c->arch != TS_ARCH_ENCODER || c->input != TS_INPUT_TOKENS)
        return ts_fail(TS_ERR_ARG, "token types and the masked-LM head are BERT's, built for an encoder over tokens; "
                                   "this model is %s over %s", ts_model_arch_name(c->arch), ts_model_input_name(c->input));
    if (c->mlm_head && c->head != TS_HEAD_LM)
        return ts_fail(TS_ERR_ARG, "the masked-LM head's transform sits before a vocabulary head; this model's head is "
                                   "%s", ts_model_head_name(c->head));
    return TS_OK;
}

/* Today's blocks: a GPT's, whole and consistent. */
static ts_status check_modern(const ts_model_config *c) {
    if (!ts_model_is_modern(c)) return TS_OK;
    if (c->arch != TS_ARCH_DECODER)
        return ts_fail(TS_ERR_ARG, "RMSNorm, RoPE, gated FFNs, shared key/value heads, SiLU and parallel residuals "
                                   "are built for a decoder-only model (--arch decoder); this one is %s",
                       ts_model_arch_name(c->arch));
    if (c->variants) return ts_fail(TS_ERR_ARG, "a seed's variant changes the 2017 block; today's blocks take none");
    if (c->head_dim < 0 || c->kv_heads < 0)
        return ts_fail(TS_ERR_ARG, "--head-dim %d and --kv-heads %d cannot be negative", c->head_dim, c->kv_heads);
    int kv = ts_model_kv_heads(c), hd = ts_model_head_dim(c);
    if (kv > c->heads || c->heads % kv != 0)
        return ts_fail(TS_ERR_ARG, "--kv-heads %d must divide --heads %d: each key/value head serves the same number "
                                   "of query heads", kv, c->heads);
    if (hd < 1) return ts_fail(TS_ERR_ARG, "a head %d wide holds nothing", hd);
    if ((kv != c->heads || hd * c->heads != c->d_model) && !c->split_qkv)
        return ts_fail(TS_ERR_ARG, "shared key/value heads or a head width other than d_model / heads need q, k and v "
                                   "projected apart (split q/k/v)");
    if (c->pe == TS_PE_ROPE) {
        int r = ts_model_rotary_dims(c);
        if (r < 2 || r % 2)
            return ts_fail(TS_ERR_ARG, "RoPE rotates dimension pairs: %d of each head's %d dims (rotary pct %g) is not "
                                       "an even number of at least 2", r, hd, (double)c->rotary_pct);
        if (!(c->rope_theta >= 0.0f) || !isfinite(c->rope_theta))
            return ts_fail(TS_ERR_ARG, "rope theta %g must be a positive number", (double)c->rope_theta);
    }
    if (c->rotary_pct != 0.0f && !(c->rotary_pct > 0.0f && c->rotary_pct <= 1.0f))
        return ts_fail(TS_ERR_ARG, "rotary pct %g must be above 0 and at most 1", (double)c->rotary_pct);
    if (c->gated_ffn && c->activation == TS_ACT_RELU)
        return ts_fail(TS_ERR_ARG, "a gated FFN here gates with silu (SwiGLU) or gelu (GeGLU), not relu");
    return TS_OK;
}

ts_status ts_model_config_check(const ts_model_config *c) {
    ts_status st = check_sizes(c);
    if (st) return st;
    if (!(c->dropout >= 0.0f && c->dropout < 1.0f))
        return ts_fail(TS_ERR_ARG, "--dropout %g must be at least 0 and below 1 (it is a probability)",
                       (double)c->dropout);
    if (!(c->eps > 0.0f)) return ts_fail(TS_ERR_ARG, "--eps %g must be positive: it keeps LayerNorm from dividing by 0", (double)c->eps);
    if (!(c->embed_eps > 0.0f)) return ts_fail(TS_ERR_ARG, "the embeddings' LayerNorm eps must be positive");
    if (c->ln_std_eps && (c->norm_kind != TS_NORMK_LAYER || (c->variants & TS_VARIANT_SEED001_LAYERNORM)))
        return ts_fail(TS_ERR_ARG, "--norm-formula std+eps is a LayerNorm's formula; this model's norm is %s",
                       c->norm_kind != TS_NORMK_LAYER ? ts_model_norm_kind_name(c->norm_kind) : "seed 001's");
    if (!(c->mask_fill <= 0.0f) || isnan(c->mask_fill))
        return ts_fail(TS_ERR_ARG, "--mask-fill %g: a hidden score must be written as -inf or a negative number",
                       (double)c->mask_fill);
    if (c->mask_fill != 0.0f && (c->variants & TS_VARIANT_SEED003_MASK))
        return ts_fail(TS_ERR_ARG, "--mask-fill %g and --variant seed003-mask both say what a hidden score becomes "
                                   "(seed 003 adds -1e9 to it): give one", (double)c->mask_fill);
    if (c->in_dim < 0) return ts_fail(TS_ERR_ARG, "input width %d must be positive", c->in_dim);
    if (c->in_dim && c->in_dim != c->d_model && c->arch != TS_ARCH_ATTENTION)
        return ts_fail(TS_ERR_ARG,
                       "input width %d differs from --d-model %d: only the attention-alone model "
                       "(preset seed001) projects its input; give vectors of width %d",
                       c->in_dim, c->d_model, c->d_model);
    bool tokens = c->input == TS_INPUT_TOKENS;
    if (c->arch == TS_ARCH_DECODER && !c->causal)
        return ts_fail(TS_ERR_ARG, "a decoder-only model (a GPT) is causal: each position sees only those before it; "
                                   "--mask causal, or --arch encoder for a stack that sees both ways");
    if (c->arch == TS_ARCH_DECODER && c->dec_layers)
        return ts_fail(TS_ERR_ARG, "a decoder-only model has one stack: --layers, not --dec-layers");
    if (c->arch == TS_ARCH_ATTENTION && tokens)
        return ts_fail(TS_ERR_ARG, "the attention-alone model (seed001) takes vectors, not text");
    if (c->arch == TS_ARCH_ATTENTION && c->pe != TS_PE_NONE)
        return ts_fail(TS_ERR_ARG, "the attention-alone model (seed001) adds no positions: use --pe none");
    if (tokens && c->vocab < TS_MODEL_MIN_VOCAB)
        return ts_fail(TS_ERR_ARG,
                       "--vocab %d is too small: the vocabulary holds 4 special tokens and at least one word",
                       c->vocab);
    if (c->head == TS_HEAD_LM && c->vocab < 1)
        return too_small("--vocab", c->vocab, 1, "a vocabulary head");
    if (c->pe == TS_PE_LEARNED) {
        int L = c->seq > c->tgt_seq ? c->seq : c->tgt_seq;
        if (c->max_pos && c->max_pos < L)
            return ts_fail(TS_ERR_ARG,
                           "the learned position table has %d rows but the sequence has %d tokens: "
                           "positions past %d have no embedding",
                           c->max_pos, L, c->max_pos - 1);
    }
    if (c->head == TS_HEAD_CLS) {
        if (c->arch != TS_ARCH_ENCODER)
            return ts_fail(TS_ERR_ARG, "a classification head sits on an encoder; this model has a decoder");
        if (c->n_labels < 1) return too_small("labels", c->n_labels, 1, "a classifier");
    }
    if (c->head == TS_HEAD_LM && c->arch == TS_ARCH_ATTENTION)
        return ts_fail(TS_ERR_ARG, "the attention-alone model has no vocabulary head");
    if (c->tie_embed && !(tokens && c->head == TS_HEAD_LM))
        return ts_fail(TS_ERR_ARG, "shared embeddings need token input and a vocabulary head");
    st = check_modern(c);
    if (!st) st = check_bert(c);
    if (st) return st;
    return ts_model_variants_check(c);
}

/* ---- names ------------------------------------------------------------------ */

static const char *const arch_words[] = {"encoder", "encoder-decoder", "attention", "decoder"};
static const char *const norm_words[] = {"post", "pre"};
static const char *const pe_words[] = {"sinusoidal", "learned", "none", "rope"};
static const char *const activation_words[] = {"relu", "gelu", "gelu-tanh", "silu"};
static const char *const norm_kind_words[] = {"layernorm", "rms", "rms-gemma"};
static const char *const rope_style_words[] = {"half", "interleaved"};
static const char *const head_words[] = {"none", "lm", "cls"};
static const char *const input_words[] = {"tokens", "embedded"};
static const char *const dtype_words[] = {"f32", "bf16"};
#define N_WORDS(a) (int)(sizeof a / sizeof a[0])

static const char *word_of(const char *const *words, int n, int v) { return v >= 0 && v < n ? words[v] : "?"; }

/* The index of word in words, or TS_ERR_ARG listing them. */
static ts_status index_of(const char *const *words, int n, const char *word, const char *what, int *out) {
    for (int i = 0; i < n; i++)
        if (strcmp(word, words[i]) == 0) {
            *out = i;
            return TS_OK;
        }
    char choices[128] = "";
    for (int i = 0; i < n; i++) {
        size_t len = strlen(choices);
        snprintf(choices + len, sizeof choices - len, "%s%s", i ? ", " : "", words[i]);
    }
    return ts_fail(TS_ERR_ARG, "unknown %s '%s' (one of %s)", what, word, choices);
}

const char *ts_model_arch_name(ts_arch a) { return word_of(arch_words, N_WORDS(arch_words), (int)a); }
const char *ts_model_norm_name(ts_norm_place n) { return word_of(norm_words, N_WORDS(norm_words), (int)n); }
const char *ts_model_pe_name(ts_pe_kind p) { return word_of(pe_words, N_WORDS(pe_words), (int)p); }
const char *ts_model_activation_name(ts_activation a) {
    return word_of(activation_words, N_WORDS(activation_words), (int)a);
}
const char *ts_model_head_name(ts_head_kind h) { return word_of(head_words, N_WORDS(head_words), (int)h); }
const char *ts_model_input_name(ts_input_kind i) { return word_of(input_words, N_WORDS(input_words), (int)i); }

const char *ts_model_norm_kind_name(ts_norm_kind k) { return word_of(norm_kind_words, N_WORDS(norm_kind_words), (int)k); }
const char *ts_model_rope_style_name(ts_rope_style r) {
    return word_of(rope_style_words, N_WORDS(rope_style_words), (int)r);
}

/* A word's parser: its index in the table, as the enum the table names. */
#define WORD_PARSER(fn, type, words)                                            \
    ts_status fn(const char *word, const char *what, type *out) {             \
        int i;                                                                 \
        ts_status st = index_of(words, N_WORDS(words), word, what, &i);        \
        if (!st) *out = (type)i;                                               \
        return st;                                                             \
    }

WORD_PARSER(ts_model_norm_kind_parse, ts_norm_kind, norm_kind_words)
WORD_PARSER(ts_model_rope_style_parse, ts_rope_style, rope_style_words)
WORD_PARSER(ts_model_norm_parse, ts_norm_place, norm_words)
WORD_PARSER(ts_model_pe_parse, ts_pe_kind, pe_words)

const char *ts_model_dtype_name(ts_dtype d) { return word_of(dtype_words, N_WORDS(dtype_words), (int)d); }

WORD_PARSER(ts_model_dtype_parse, ts_dtype, dtype_words)
WORD_PARSER(ts_model_activation_parse, ts_activation, activation_words)
