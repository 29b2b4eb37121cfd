/* model_describe: a config in one line of words, as every command prints it
 * above its output (model.h). */
#include <stdio.h>
#include <string.h>

#include "tscope/model.h"

const char *ts_model_mask_fill_text(char *buf, size_t size, const ts_model_config *c) {
    if (c->mask_fill == 0.0f) {
        snprintf(buf, size, "-inf");
        return buf;
    }
    char g[48], *e;
    snprintf(g, sizeof g, "%g", (double)c->mask_fill);
    if ((e = strchr(g, 'e')) != NULL) { /* "-1e+09" as it is written in code: "-1e9" */
        char *digits = e + 1 + (e[1] == '+' || e[1] == '-');
        char sign = e[1] == '-' ? '-' : '\0';
        while (*digits == '0' && digits[1]) digits++;
        snprintf(buf, size, "%.*se%s%s", (int)(e - g), g, sign ? "-" : "", digits);
    } else {
        snprintf(buf, size, "%s", g);
    }
    return buf;
}

/* "; variant no-scale; mask padding-both; train mode" for what differs from the correct model. */
static void describe_variants(const ts_model_config *c, char *buf, size_t size) {
    size_t len = strlen(buf);
    char words[128];
    ts_model_variant_names(c->variants, words, sizeof words);
    if (words[0]) len += (size_t)snprintf(buf + len, len < size ? size - len : 0, "; variant %s", words);
    if (c->pe_variant != TS_PE_PAPER && len < size)
        len += (size_t)snprintf(buf + len, size - len, "; pe-variant %s", ts_model_pe_variant_name(c->pe_variant));
    if (c->mask != TS_MASK_PADDING && len < size)
        len += (size_t)snprintf(buf + len, size - len, "; mask %s", ts_model_mask_name(c->mask));
    if (c->causal && c->arch == TS_ARCH_ENCODER && len < size)
        len += (size_t)snprintf(buf + len, size - len, "; causal encoder");
    if (c->train_mode && len < size) snprintf(buf + len, size - len, "; train mode (dropout %g)", (double)c->dropout);
}

/* "; rms norm, rope (half, 64 of 64 dims, theta 500000), 8 kv heads, swiglu" for today's block choices. */
static void describe_modern(const ts_model_config *c, char *buf, size_t size) {
    if (!ts_model_is_modern(c)) return;
    size_t len = strlen(buf);
#define ADD(...) (len < size ? (len += (size_t)snprintf(buf + len, size - len, __VA_ARGS__)) : len)
    ADD("; %s norm (eps %g)", ts_model_norm_kind_name(c->norm_kind), (double)c->eps);
    if (c->pe == TS_PE_ROPE)
        ADD(", rope pairs %s (%d of %d dims, theta %g)", ts_model_rope_style_name(c->rope_style), ts_model_rotary_dims(c),
            ts_model_head_dim(c), ts_model_rope_theta(c));
    if (ts_model_kv_heads(c) != c->heads)
        ADD(", %d key/value head%s", ts_model_kv_heads(c), ts_model_kv_heads(c) == 1 ? "" : "s");
    if (c->head_dim) ADD(", head dim %d", c->head_dim);
    if (c->gated_ffn) ADD(", gated ffn (%s)", c->activation == TS_ACT_SILU ? "swiglu" : "geglu");
    if (c->parallel_residual) ADD(", parallel residual");
    if (c->split_qkv) ADD(", q/k/v apart");
    if (c->no_qkv_bias || c->no_out_bias || c->no_ffn_bias)
        ADD(", no bias in%s%s%s", c->no_qkv_bias ? " q/k/v" : "", c->no_out_bias ? " out" : "",
            c->no_ffn_bias ? " ffn" : "");
    if (c->scale_embed) ADD(", embeddings scaled by sqrt(d_model)");
#undef ADD
}

/* "; 2 token types, masked-LM head (dense, gelu, LayerNorm), LayerNorm eps 1e-12, embeddings' 1e-12" for BERT's parts. */
static void describe_bert(const ts_model_config *c, char *buf, size_t size) {
    if (!ts_model_is_bert(c)) return;
    size_t len = strlen(buf);
#define ADD(...) (len < size ? (len += (size_t)snprintf(buf + len, size - len, __VA_ARGS__)) : len)
    ADD("; ");
    if (c->type_vocab) ADD("%d token types, ", c->type_vocab);
    if (c->mlm_head)
        ADD("masked-LM head (dense, %s, LayerNorm), ", ts_model_activation_name(c->activation));
    ADD("LayerNorm eps %g, embeddings' %g", (double)c->eps, (double)c->embed_eps);
#undef ADD
}

void ts_model_config_describe(const ts_model_config *c, char *buf, size_t size) {
    static const char *const arch[] = {[TS_ARCH_ENCODER] = "encoder",
                                       [TS_ARCH_ENCODER_DECODER] = "encoder-decoder",
                                       [TS_ARCH_ATTENTION] = "multi-head attention alone",
                                       [TS_ARCH_DECODER] = "decoder-only (GPT)"};
    static const char *const pe[] = {[TS_PE_SINUSOIDAL] = "sinusoidal positions",
                                     [TS_PE_LEARNED] = "learned positions", [TS_PE_NONE] = "no positions",
                                     [TS_PE_ROPE] = "rotary positions"};
    static const char *const head[] = {[TS_HEAD_NONE] = "", [TS_HEAD_LM] = ", vocabulary logits",
                                       [TS_HEAD_CLS] = ", classifier"};
    char layers[48] = "";
    if (c->arch == TS_ARCH_ENCODER_DECODER)
        snprintf(layers, sizeof layers, " %d+%d layers,", c->layers, c->dec_layers);
    else if (c->arch == TS_ARCH_ENCODER || c->arch == TS_ARCH_DECODER)
        snprintf(layers, sizeof layers, " %d layers,", c->layers);
    if (c->arch == TS_ARCH_ATTENTION) {
        snprintf(buf, size, "%s%s%s: B%d S%d, input width %d, d_model %d, %d heads%s", c->preset,
                 c->preset[0] ? " " : "", arch[c->arch], c->batch, c->seq, c->in_dim ? c->in_dim : c->d_model,
                 c->d_model, c->heads, c->causal ? ", causal" : "");
        describe_variants(c, buf, size);
        return;
    }
    char dims[96];
    if (c->arch == TS_ARCH_ENCODER_DECODER)
        snprintf(dims, sizeof dims, "B%d S%d T%d", c->batch, c->seq, c->tgt_seq);
    else
        snprintf(dims, sizeof dims, "B%d S%d", c->batch, c->seq);
    snprintf(buf, size, "%s%s%s: %s, d_model %d, %d heads, ffn %d,%s %s-LN, %s, %s%s%s%s", c->preset,
             c->preset[0] ? " " : "", arch[c->arch], dims, c->d_model, c->heads, c->ffn, layers,
             c->norm == TS_NORM_PRE ? "pre" : "post", ts_model_activation_name(c->activation),
             c->input == TS_INPUT_TOKENS ? "" : "vector input, ", pe[c->pe], c->final_norm ? ", final norms" : "",
             c->tie_embed && c->head == TS_HEAD_LM ? ", vocabulary logits (tied)" : head[c->head]);
    describe_variants(c, buf, size);
    describe_modern(c, buf, size);
    describe_bert(c, buf, size);
}
