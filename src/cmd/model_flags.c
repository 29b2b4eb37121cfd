/* model_flags: one table of model flags for every command that builds a model. */
#include "model_flags.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/train.h"

int model_flags_table(ts_flag *t, int n, model_flags *mf) {
    memset(mf, 0, sizeof *mf);
    bool *s = mf->seen;
    const ts_flag rows[] = {
        {"--preset", TS_FLAG_STRING, &mf->preset, "P",
         "tiny|seed000|seed001|seed004|copy|base|lm|gpt2|llama-1b (default tiny)", NULL, NULL, &s[F_PRESET]},
        {"--d-model", TS_FLAG_INT, &mf->d_model, "N", "model width D (tiny: 16)", NULL, NULL, &s[F_D_MODEL]},
        {"--heads", TS_FLAG_INT, &mf->heads, "N", "attention heads H, must divide D (tiny: 2)", NULL, NULL,
         &s[F_HEADS]},
        {"--ffn", TS_FLAG_LIST, &mf->ffn, "N|KIND",
         "feed-forward hidden width (tiny: 32), or its kind: mlp (two layers, --activation between), swiglu "
         "(Llama's gated SiLU), geglu (gated GELU); give both as two --ffn", NULL, NULL, &s[F_FFN]},
        {"--layers", TS_FLAG_INT, &mf->layers, "N", "encoder layers (tiny: 2)", NULL, NULL, &s[F_LAYERS]},
        {"--dec-layers", TS_FLAG_INT, &mf->dec_layers, "N", "decoder layers, 0 = encoder only (tiny: 2)", NULL,
         NULL, &s[F_DEC_LAYERS]},
        {"--vocab", TS_FLAG_INT, &mf->vocab, "N", "vocabulary size (tiny: as the text needs)", NULL, NULL,
         &s[F_VOCAB]},
        {"--seq", TS_FLAG_INT, &mf->seq, "N", "source length; longer than the text pads it (tiny: the text's)",
         NULL, NULL, &s[F_SEQ]},
        {"--batch", TS_FLAG_INT, &mf->batch, "N", "sequences per batch (tiny: 1)", NULL, NULL, &s[F_BATCH]},
        {"--dropout", TS_FLAG_FLOAT, &mf->dropout, "P", "dropout probability, used only when training (0.1)",
         NULL, NULL, &s[F_DROPOUT]},
        {"--norm", TS_FLAG_CHOICE, &mf->norm, NULL,
         "where the norm sits: after (post, the paper) or before (pre) each block; or which norm: layernorm, rms "
         "(RMSNorm, Llama's: no mean taken, no bias) or rms-gemma (scaled by 1 + w)",
         "post|pre|layernorm|rms|rms-gemma", NULL, &s[F_NORM]},
        {"--pe", TS_FLAG_CHOICE, &mf->pe, NULL,
         "positions: the paper's sines, learned, none, or rope (q and k turned by their position's angles)",
         "sinusoidal|learned|none|rope", NULL, &s[F_PE]},
        {"--activation", TS_FLAG_CHOICE, &mf->activation, NULL,
         "FFN activation (relu); gelu is exact, gelu-tanh GPT-2's approximation, silu x * sigmoid(x)",
         "relu|gelu|gelu-tanh|silu", NULL, &s[F_ACTIVATION]},
        {"--eps", TS_FLAG_FLOAT, &mf->eps, "X", "LayerNorm eps (1e-5)", NULL, NULL, &s[F_EPS]},
        {"--final-norm", TS_FLAG_BOOL, &mf->final_norm, NULL, "a LayerNorm after each stack (off)", NULL, NULL,
         &s[F_FINAL_NORM]},
        {"--seed", TS_FLAG_INT, &mf->seed, "N", "seed of parameters, random input and dropout (0)", NULL, NULL,
         &s[F_SEED]},
        {"--text", TS_FLAG_LIST, &mf->text, "S",
         "input sentence; repeat for a padded batch (tiny: \"My name is Goro\")", NULL, NULL, &s[F_TEXT]},
        /* The lessons' comparisons (model_variants.c); each changes one step and keeps its name. */
        {"--variant", TS_FLAG_LIST, &mf->variant, "WORDS",
         "a seed's mistake on purpose: no-scale, seed000-reshape, seed001-layernorm, seed004-residual, seed003-mask, seed001-softmax; "
         "or no-residual, the layers without their skips (several: spaces, commas or repeats; default none)",
         NULL, NULL, &s[F_VARIANT]},
        {"--pe-variant", TS_FLAG_CHOICE, &mf->pe_variant, NULL,
         "sinusoidal formula: the paper's, or seed 001's two tries (paper)",
         "paper|seed001-sin-only|seed001-odd-exponent", NULL, &s[F_PE_VARIANT]},
        {"--mask", TS_FLAG_CHOICE, &mf->mask, NULL,
         "encoder self-attention mask: none (every key seen), causal (earlier keys only, and padded keys "
         "hidden), padding (padded keys hidden), padding-both (padded keys and padded rows)",
         "none|causal|padding|padding-both", NULL, &s[F_MASK]},
        {"--train-mode", TS_FLAG_BOOL, &mf->train_mode, NULL, "forward as in training: dropout on, seeded (off)",
         NULL, NULL, &s[F_TRAIN_MODE]},
        {"--head", TS_FLAG_CHOICE, &mf->head, NULL,
         "output head: none (the last stack's output) or lm (logits over --vocab); default: the preset's, none "
         "for --input vectors", "none|lm", NULL, &s[F_HEAD]},
        {"--arch", TS_FLAG_CHOICE, &mf->arch, NULL,
         "encoder (one stack), encoder-decoder, or decoder: a GPT (causal self-attention, pre-LN, learned "
         "positions, GELU, final norm, head tied to the token table, named decoder.*), or llama: a decoder with "
         "RMSNorm, RoPE, SwiGLU, q, k and v projected apart and no biases; default: the preset's",
         "encoder|encoder-decoder|decoder|llama", NULL, &s[F_ARCH]},
        {"--norm-formula", TS_FLAG_CHOICE, &mf->norm_formula, NULL,
         "LayerNorm's formula: standard (x - mean) / sqrt(var + eps), nn.LayerNorm's; or std+eps, (x - mean) / "
         "(unbiased std + eps), the Annotated Transformer's (default: standard)", "standard|std+eps", NULL,
         &s[F_NORM_FORMULA]},
        {"--pos", TS_FLAG_CHOICE, &mf->pos, NULL, "positions, as --pe: learned (a GPT's), rope (Llama's), sinusoidal or none",
         "learned|rope|sinusoidal|none", NULL, &s[F_POS]},
        {"--kv-heads", TS_FLAG_INT, &mf->kv_heads, "N",
         "key/value heads, each shared by --heads / N query heads (grouped-query attention; q, k and v are then "
         "projected apart); default --heads", NULL, NULL, &s[F_KV_HEADS]},
        {"--mask-fill", TS_FLAG_STRING, &mf->mask_fill, "-inf|-1e9|X",
         "what a hidden score is written as before the softmax: -inf, or a negative number as masked_fill(mask, "
         "-1e9) writes (the Annotated Transformer's), which weighs a row with every key hidden evenly (default: "
         "-inf)", NULL, NULL, &s[F_MASK_FILL]},
    };
    _Static_assert(sizeof rows / sizeof rows[0] == MODEL_FLAGS_COUNT, "one row per model_flag_id");
    int count = (int)(sizeof rows / sizeof rows[0]);
    for (int i = 0; i < count; i++) t[n + i] = rows[i];
    return n + count;
}

ts_status model_flags_mask_fill(const char *v, float *fill) {
    if (strcmp(v, "-inf") == 0) {
        *fill = 0.0f; /* the config's word for -inf */
        return TS_OK;
    }
    char *end = NULL;
    double x = strtod(v, &end);
    if (end == v || *end || !isfinite(x) || !(x < 0) || x < -FLT_MAX || (float)x == 0.0f)
        return ts_fail(TS_ERR_ARG, "--mask-fill '%.40s': give -inf or a negative number (-1e9, as masked_fill(mask, "
                                   "-1e9) writes)", v);
    *fill = (float)x;
    return TS_OK;
}

/* --arch: the stack layout, and for a GPT the settings that make one, each
 * overridable by its own flag (--norm post makes a post-LN GPT). */
static ts_status apply_arch(const model_flags *mf, ts_model_config *c) {
    const bool *s = mf->seen;
    if (c->arch == TS_ARCH_ATTENTION)
        return ts_fail(TS_ERR_ARG, "--arch %s: preset %s is one attention module alone; start from another preset",
                       mf->arch, c->preset);
    if (strcmp(mf->arch, "encoder-decoder") == 0) {
        if (s[F_DEC_LAYERS] && mf->dec_layers < 1)
            return ts_fail(TS_ERR_ARG, "--arch encoder-decoder with --dec-layers %d: the decoder needs a layer", mf->dec_layers);
        if (c->arch != TS_ARCH_ENCODER_DECODER && c->dec_layers < 1) c->dec_layers = c->layers;
        c->arch = TS_ARCH_ENCODER_DECODER;
        return TS_OK;
    }
    if (s[F_DEC_LAYERS] && mf->dec_layers > 0)
        return ts_fail(TS_ERR_ARG, "--dec-layers %d with --arch %s: only an encoder-decoder has a second stack%s",
                       mf->dec_layers, mf->arch, strcmp(mf->arch, "decoder") == 0 ? " (a GPT's depth is --layers)" : "");
    c->dec_layers = 0;
    c->tgt_seq = 0;
    if (strcmp(mf->arch, "encoder") == 0) {
        c->arch = TS_ARCH_ENCODER;
        c->causal = false;
        c->tie_embed = false;
        return TS_OK;
    }
    bool was_decoder = c->arch == TS_ARCH_DECODER, llama = strcmp(mf->arch, "llama") == 0;
    c->arch = TS_ARCH_DECODER;
    c->causal = true;
    if (was_decoder && !llama) return TS_OK; /* a GPT preset keeps its own settings */
    c->norm = TS_NORM_PRE;
    c->final_norm = true;
    c->pe = TS_PE_LEARNED;
    c->scale_embed = false;
    c->activation = TS_ACT_GELU;
    if (c->input == TS_INPUT_TOKENS) {
        c->head = TS_HEAD_LM;
        c->tie_embed = true;
    }
    if (llama) { /* Llama's parts, each its own flag too (--norm, --pos, --ffn, --kv-heads) */
        c->norm_kind = TS_NORMK_RMS;
        c->pe = TS_PE_ROPE;
        c->max_pos = 0;
        c->gated_ffn = true;
        c->activation = TS_ACT_SILU;
        c->split_qkv = true;
        c->no_qkv_bias = c->no_out_bias = c->no_ffn_bias = true;
    }
    return TS_OK;
}

/* --norm: where (post, pre) or which (layernorm, rms, rms-gemma). An RMSNorm
 * has no bias to learn. */
static ts_status norm_flag(const char *word, ts_model_config *c) {
    if (strcmp(word, "post") == 0 || strcmp(word, "pre") == 0) return ts_model_norm_parse(word, "--norm", &c->norm);
    return ts_model_norm_kind_parse(word, "--norm", &c->norm_kind);
}

/* --ffn: a width (digits) and a kind (mlp, swiglu, geglu), at most one of each.
 * swiglu gates with SiLU, geglu with GELU (exact unless --activation gelu-tanh). */
static ts_status ffn_flag(const ts_cli_list *l, bool activation_given, ts_model_config *c) {
    bool width = false, kind = false;
    for (int i = 0; i < l->count; i++) {
        const char *v = l->items[i];
        if (v[0] >= '0' && v[0] <= '9') {
            char *end;
            long n = strtol(v, &end, 10);
            if (*end || n < 1 || n > 1 << 24) return ts_fail(TS_ERR_ARG, "--ffn %s is not a width (a positive number)", v);
            if (width) return ts_fail(TS_ERR_ARG, "--ffn %s: a width was given already", v);
            c->ffn = (int)n, width = true;
            continue;
        }
        if (kind) return ts_fail(TS_ERR_ARG, "--ffn %s: a kind was given already", v);
        kind = true;
        if (strcmp(v, "mlp") == 0) {
            c->gated_ffn = false;
        } else if (strcmp(v, "swiglu") == 0 || strcmp(v, "geglu") == 0) {
            c->gated_ffn = true;
            if (!activation_given) c->activation = v[0] == 's' ? TS_ACT_SILU : TS_ACT_GELU;
        } else {
            return ts_fail(TS_ERR_ARG, "--ffn %s: a width N or one of mlp, swiglu, geglu", v);
        }
    }
    return TS_OK;
}

/* --ffn's kind and --activation agree: swiglu gates with silu, geglu with gelu. */
static ts_status check_gate(const ts_cli_list *l, const ts_model_config *c) {
    for (int i = 0; i < l->count; i++) {
        if (strcmp(l->items[i], "swiglu") == 0 && c->activation != TS_ACT_SILU)
            return ts_fail(TS_ERR_ARG, "--ffn swiglu gates with silu, not --activation %s (--ffn geglu gates with gelu)",
                           ts_model_activation_name(c->activation));
        if (strcmp(l->items[i], "geglu") == 0 && c->activation != TS_ACT_GELU && c->activation != TS_ACT_GELU_TANH)
            return ts_fail(TS_ERR_ARG, "--ffn geglu gates with gelu or gelu-tanh, not --activation %s",
                           ts_model_activation_name(c->activation));
    }
    return TS_OK;
}

/* --kv-heads: shared key/value heads need their own k and v projections. */
static void kv_heads_flag(int kv, ts_model_config *c) {
    c->kv_heads = kv;
    c->split_qkv = true;
}

static ts_status apply_flags(const model_flags *mf, ts_model_config *c) {
    const bool *s = mf->seen;
    if (s[F_ARCH]) TS_TRY(apply_arch(mf, c));
    if (s[F_D_MODEL]) c->d_model = mf->d_model;
    if (s[F_HEADS]) c->heads = mf->heads;
    if (s[F_FFN]) TS_TRY(ffn_flag(&mf->ffn, s[F_ACTIVATION], c));
    if (s[F_LAYERS]) c->layers = mf->layers;
    if (s[F_VOCAB]) c->vocab = mf->vocab;
    if (s[F_SEQ]) c->seq = mf->seq;
    if (s[F_BATCH]) c->batch = mf->batch;
    if (s[F_DROPOUT]) c->dropout = mf->dropout;
    if (s[F_EPS]) c->eps = c->embed_eps = mf->eps;
    if (s[F_FINAL_NORM]) c->final_norm = true;
    if (s[F_SEED]) c->seed = (uint64_t)(uint32_t)mf->seed;
    ts_status st = TS_OK;
    if (!st && s[F_NORM]) st = norm_flag(mf->norm, c);
    if (!st && s[F_PE] && s[F_POS]) st = ts_fail(TS_ERR_ARG, "--pe %s and --pos %s say the same thing: give one", mf->pe, mf->pos);
    if (!st && (s[F_PE] || s[F_POS])) st = ts_model_pe_parse(s[F_PE] ? mf->pe : mf->pos, s[F_PE] ? "--pe" : "--pos", &c->pe);
    if (!st && s[F_ACTIVATION]) st = ts_model_activation_parse(mf->activation, "--activation", &c->activation);
    if (s[F_NORM_FORMULA]) c->ln_std_eps = strcmp(mf->norm_formula, "std+eps") == 0;
    if (!st && s[F_MASK_FILL]) st = model_flags_mask_fill(mf->mask_fill, &c->mask_fill);
    if (!st && s[F_FFN]) st = check_gate(&mf->ffn, c);
    if (!st && s[F_KV_HEADS]) kv_heads_flag(mf->kv_heads, c);
    if ((s[F_PE] || s[F_POS]) && c->pe != TS_PE_SINUSOIDAL) c->scale_embed = false;
    if ((s[F_PE] || s[F_POS]) && c->pe == TS_PE_ROPE) c->max_pos = 0; /* no table of positions */
    if (s[F_HEAD]) {
        c->head = strcmp(mf->head, "lm") == 0 ? TS_HEAD_LM : TS_HEAD_NONE;
        if (c->head != TS_HEAD_LM) c->tie_embed = false;
    }
    if (s[F_DEC_LAYERS] && !s[F_ARCH]) {
        if (c->arch == TS_ARCH_DECODER && mf->dec_layers > 0)
            return ts_fail(TS_ERR_ARG, "--dec-layers %d: preset %s is decoder-only (a GPT), whose depth is --layers; "
                           "--arch encoder-decoder for two stacks", mf->dec_layers, c->preset);
        c->dec_layers = mf->dec_layers;
        if (c->arch != TS_ARCH_ATTENTION && c->arch != TS_ARCH_DECODER)
            c->arch = mf->dec_layers > 0 ? TS_ARCH_ENCODER_DECODER : TS_ARCH_ENCODER;
        if (c->arch == TS_ARCH_ENCODER) c->tie_embed = false;
    }
    return st;
}

static ts_status apply_variant_flags(const model_flags *mf, ts_model_config *c) {
    ts_status st = TS_OK;
    for (int i = 0; !st && i < mf->variant.count; i++) st = ts_model_variant_parse(mf->variant.items[i], &c->variants);
    if (!st && mf->seen[F_PE_VARIANT]) st = ts_model_pe_variant_parse(mf->pe_variant, &c->pe_variant);
    if (!st && mf->seen[F_MASK]) st = ts_model_mask_parse(mf->mask, &c->mask, &c->causal);
    if (mf->seen[F_TRAIN_MODE]) c->train_mode = true;
    return st;
}

/* The decoder's length for a source of S tokens (see model_flags.h). */
static int target_length(int S, bool starts_with_bos) { return starts_with_bos && S > 1 ? S - 1 : S; }

/* Tokenize every text; S = the longest (or --seq), B = the number of texts. */
static ts_status tokenize(const model_flags *mf, ts_model_config *c, const char *const *texts, int n_texts,
                          model_batch *b, const char *weights, bool *padded) {
    ts_tokenizer tok;
    ts_status st = ts_tokenizer_init(&tok);
    for (int i = 0; !st && i < n_texts; i++) st = ts_tokenizer_add_text(&tok, texts[i]);
    int longest = 0;
    for (int i = 0; !st && i < n_texts; i++) {
        int n = 0;
        st = ts_tokenizer_encode(&tok, texts[i], NULL, 0, &n);
        if (n == 0 && !st) st = ts_fail(TS_ERR_ARG, "--text \"%s\" has no words", texts[i]);
        if (n > longest) longest = n;
    }
    if (st) {
        ts_tokenizer_free(&tok);
        return st;
    }
    if (mf->seen[F_SEQ] && c->seq < longest) {
        ts_tokenizer_free(&tok);
        return ts_fail(TS_ERR_ARG, "the text has %d tokens, more than --seq %d", longest, c->seq);
    }
    if (!mf->seen[F_SEQ]) c->seq = longest;
    *padded = false;
    for (int i = 0; i < n_texts; i++) {
        int n = 0;
        ts_tokenizer_encode(&tok, texts[i], NULL, 0, &n);
        if (n < c->seq) *padded = true;
    }
    if (n_texts > 1) {
        if (mf->seen[F_BATCH] && c->batch != n_texts) {
            ts_tokenizer_free(&tok);
            return ts_fail(TS_ERR_ARG, "--batch %d but %d texts were given: one text per sequence", c->batch,
                           n_texts);
        }
        c->batch = n_texts;
    }
    if (!mf->seen[F_VOCAB] && !weights && c->vocab < tok.count) c->vocab = tok.count;
    if (c->vocab < tok.count) {
        int words = tok.count - TS_TOK_N_SPECIAL;
        ts_tokenizer_free(&tok);
        char who[300];
        if (weights) snprintf(who, sizeof who, "%s's vocabulary of %d ids", weights, c->vocab);
        else snprintf(who, sizeof who, "--vocab %d", c->vocab);
        return ts_fail(TS_ERR_ARG,
                       "%s is too small for the text: it has %d distinct word%s and %d special tokens "
                       "(%d ids)",
                       who, words, words == 1 ? "" : "s", TS_TOK_N_SPECIAL, words + TS_TOK_N_SPECIAL);
    }
    if (b) {
        b->tok = tok;
        b->have_tok = true;
    } else {
        ts_tokenizer_free(&tok);
    }
    return TS_OK;
}

/* Whether weights were trained on a copy/reverse/sort task (their metadata's
 * "task"): such a model read sources whose first token is the start id, so a
 * sentence's first word stands there (ts_task_decoder_input). */
static bool trained_on_task(const char *weights) {
    ts_safetensors f;
    if (!weights || ts_safetensors_open(&f, weights)) return false;
    const char *task = ts_safetensors_meta(&f, "task");
    ts_task_kind kind;
    bool yes = task && ts_task_parse(task, &kind) == TS_OK && strcmp(task, "lm") != 0;
    ts_safetensors_close(&f);
    return yes;
}

/* task_model: the weights were trained on a task (trained_on_task). */
static ts_status build_ids(const ts_model_config *c, const char *const *texts, int n_texts, const ts_npy *ids,
                           model_batch *b, int S, int T, bool task_model) {
    int B = c->batch;
    b->src_ids = calloc((size_t)B * S, sizeof *b->src_ids);
    b->src_pad = calloc((size_t)B * S, 1);
    if (!b->src_ids || !b->src_pad) return ts_fail(TS_ERR_NOMEM, "out of memory for the input ids");
    bool padded = false;
    if (ids) {
        for (int64_t i = 0; i < (int64_t)B * S; i++) b->src_ids[i] = (int32_t)ids->i64[i];
    } else if (n_texts) {
        for (int i = 0; i < B; i++) {
            const char *text = texts[n_texts > 1 ? i : 0];
            int n = 0;
            ts_tokenizer_encode(&b->tok, text, b->src_ids + (size_t)i * S, S, &n);
            for (int s = n; s < S; s++) {
                b->src_ids[(size_t)i * S + s] = TS_TOK_PAD;
                b->src_pad[(size_t)i * S + s] = 1;
                padded = true;
            }
        }
    } else { /* random ids as seed 004's copy task: 1 first, then uniform in [1, V) */
        ts_model_random_ids(b->src_ids, (int64_t)B * S, 1, c->vocab, c->seed + 1);
        for (int i = 0; i < B; i++) b->src_ids[(size_t)i * S] = TS_TOK_BOS;
    }
    if (!padded) {
        free(b->src_pad);
        b->src_pad = NULL;
    }
    if (c->arch != TS_ARCH_ENCODER_DECODER) return TS_OK;
    b->tgt_ids = calloc((size_t)B * T, sizeof *b->tgt_ids);
    b->tgt_pad = padded ? calloc((size_t)B * T, 1) : NULL;
    if (!b->tgt_ids || (padded && !b->tgt_pad)) return ts_fail(TS_ERR_NOMEM, "out of memory for the target ids");
    /* training's convention (ts_task_decoder_input): the source is the answer */
    for (int i = 0; i < B; i++) {
        const int32_t *src = b->src_ids + (size_t)i * S;
        bool start_in_src = src[0] == TS_TOK_BOS || task_model;
        ts_task_decoder_input(src, T, start_in_src, b->tgt_ids + (size_t)i * T);
        for (int t = 1; t < T && b->tgt_pad; t++)
            b->tgt_pad[(size_t)i * T + t] = b->src_pad[(size_t)i * S + (start_in_src ? t : t - 1)];
    }
    return TS_OK;
}

ts_status model_flags_apply(const model_flags *mf, ts_model_config *cfg) {
    ts_status st = apply_flags(mf, cfg);
    return st ? st : apply_variant_flags(mf, cfg);
}

/* A size a flag and a file both give: they must agree. */
static ts_status agree(const model_flags *mf, int flag, const char *name, int value, const char *file,
                       const char *what, int64_t from_file) {
    if (!mf->seen[flag] || value == from_file) return TS_OK;
    return ts_fail(TS_ERR_ARG, "%s %d disagrees with %s: it holds %s %lld", name, value, file, what,
                   (long long)from_file);
}

/* --ids (B, S) decide batch and length (flags that also would must agree);
 * every id must be in the vocabulary of a model that reads tokens. */
static ts_status use_ids(const model_flags *mf, const model_given *g, ts_model_config *c) {
    const ts_npy *x = g->ids;
    if (x->rank != 2)
        return ts_fail(TS_ERR_SHAPE, "--ids %s has %d dimensions; token ids are (batch, length)", g->ids_path, x->rank);
    if (c->arch == TS_ARCH_ATTENTION || (g->base && c->input != TS_INPUT_TOKENS))
        return ts_fail(TS_ERR_ARG, "--ids: %s has no token table, so ids mean nothing to it; give --input X.npy",
                       g->base ? g->weights_path : c->preset);
    ts_status st = agree(mf, F_BATCH, "--batch", c->batch, g->ids_path, "batch", x->shape[0]);
    if (!st) st = agree(mf, F_SEQ, "--seq", c->seq, g->ids_path, "sequences of length", x->shape[1]);
    if (st) return st;
    int64_t top = 0;
    for (int64_t i = 0; i < x->numel; i++) {
        if (x->i64[i] < 0) return ts_fail(TS_ERR_ARG, "--ids %s: id %lld is negative", g->ids_path, (long long)x->i64[i]);
        if (x->i64[i] > top) top = x->i64[i];
    }
    if (!g->base && !mf->seen[F_VOCAB] && c->vocab <= top) c->vocab = (int)top + 1;
    if (top >= c->vocab)
        return ts_fail(TS_ERR_ARG, "--ids %s holds id %lld; the vocabulary has ids 0 to %d%s", g->ids_path,
                       (long long)top, c->vocab - 1, g->base ? "" : " (--vocab)");
    c->batch = (int)x->shape[0];
    c->seq = (int)x->shape[1];
    c->input = TS_INPUT_TOKENS;
    return TS_OK;
}

/* --input (and --target) vectors decide batch and lengths; the flags that
 * also would must agree. */
static ts_status use_vectors(const model_flags *mf, const model_given *g, ts_model_config *c) {
    const ts_npy *x = g->input, *y = g->target;
    bool encdec = c->arch == TS_ARCH_ENCODER_DECODER;
    if (c->input == TS_INPUT_TOKENS && g->base)
        return ts_fail(TS_ERR_ARG, "%s reads token ids (it has a token table), not vectors: give --text instead of "
                                   "--input", g->weights_path);
    if (y && !encdec)
        return ts_fail(TS_ERR_ARG, "--target %s feeds a decoder; this model has none%s", g->target_path,
                       g->base ? "" : " (--dec-layers N adds one)");
    if (encdec && !y)
        return ts_fail(TS_ERR_ARG, "--input feeds the encoder; this encoder-decoder also needs --target Y.npy "
                                   "(B, T, %d) for its decoder%s", c->d_model, g->base ? "" : ", or --dec-layers 0");
    ts_status st = agree(mf, F_BATCH, "--batch", c->batch, g->input_path, "batch", x->shape[0]);
    if (!st) st = agree(mf, F_SEQ, "--seq", c->seq, g->input_path, "sequences of length", x->shape[1]);
    if (st) return st;
    int width = c->in_dim ? c->in_dim : c->d_model;
    char src[300]; /* where the width comes from, for the messages */
    if (g->base) snprintf(src, sizeof src, "d_model %d (%s)", c->d_model, g->weights_path);
    else if (c->in_dim) snprintf(src, sizeof src, "input width %d (preset %s)", c->in_dim, c->preset);
    else if (mf->seen[F_D_MODEL]) snprintf(src, sizeof src, "--d-model %d", c->d_model);
    else snprintf(src, sizeof src, "--d-model %d (preset %s)", c->d_model, c->preset);
    if (x->shape[2] != width)
        return ts_fail(TS_ERR_SHAPE, "--input %s holds vectors of width %lld; the model reads width %d: %s",
                       g->input_path, (long long)x->shape[2], width, src);
    if (y) {
        if (y->shape[0] != x->shape[0])
            return ts_fail(TS_ERR_SHAPE, "--input %s has batch %lld but --target %s has batch %lld", g->input_path,
                           (long long)x->shape[0], g->target_path, (long long)y->shape[0]);
        if (y->shape[2] != c->d_model)
            return ts_fail(TS_ERR_SHAPE, "--target %s holds vectors of width %lld; the decoder reads width %d: %s",
                           g->target_path, (long long)y->shape[2], c->d_model, src);
        c->tgt_seq = (int)y->shape[1];
    }
    c->batch = (int)x->shape[0];
    c->seq = (int)x->shape[1];
    c->input = TS_INPUT_EMBEDDED;
    /* vectors have no vocabulary: the preset's vocabulary head goes unless asked for */
    if (!g->base && c->head == TS_HEAD_LM && !mf->seen[F_HEAD]) c->head = TS_HEAD_NONE;
    if (c->head != TS_HEAD_LM) c->tie_embed = false;
    return TS_OK;
}

/* Flags the attention-alone model has nothing for: before the config's own
 * checks, whose messages would be about something else. */
static ts_status unused_by_attention(const model_flags *mf, const ts_model_config *c) {
    const bool *s = mf->seen;
    if (c->arch == TS_ARCH_ATTENTION) {
        static const struct { int flag; const char *name; } none[] = {
            {F_FFN, "--ffn"}, {F_LAYERS, "--layers"}, {F_NORM, "--norm"}, {F_ACTIVATION, "--activation"},
            {F_EPS, "--eps"}, {F_FINAL_NORM, "--final-norm"}, {F_HEAD, "--head"}, {F_NORM_FORMULA, "--norm-formula"}};
        for (size_t i = 0; i < sizeof none / sizeof none[0]; i++)
            if (s[none[i].flag])
                return ts_fail(TS_ERR_ARG, "%s: the attention-alone model (seed001) has no feed-forward layer, "
                                           "LayerNorm or head for it to change", none[i].name);
    }
    return TS_OK;
}

/* Flags the resolved model has no use for: each is an error saying why,
 * never a setting silently dropped. `padded`: some position is padding. */
static ts_status unused_flags(const model_flags *mf, const ts_model_config *c, const model_given *g, bool padded,
                              bool random_input) {
    const bool *s = mf->seen;
    if (s[F_VOCAB] && c->input != TS_INPUT_TOKENS && c->head != TS_HEAD_LM)
        return ts_fail(TS_ERR_ARG, "--vocab %d sizes the token table and the vocabulary head; this model reads "
                                   "vectors and has no vocabulary head (--head lm adds one)", c->vocab);
    if (s[F_DROPOUT] && !c->train_mode && !(g && g->trains))
        return ts_fail(TS_ERR_ARG, "--dropout %g acts only in training: add --train-mode to run the forward pass "
                                   "with dropout", (double)c->dropout);
    if (s[F_SEED] && g && g->base && !random_input && !c->train_mode)
        return ts_fail(TS_ERR_ARG, "--seed %d picks random parameters, random input and dropout; here the "
                                   "parameters come from %s, the input is given and there is no --train-mode",
                       mf->seed, g->weights_path);
    /* A bare state_dict cannot say whether its encoder is causal, so its
     * missing-flags message asks; --mask none is then the answer "no mask". */
    bool answers_causal = c->mask == TS_MASK_NONE && g && g->base;
    if (s[F_MASK] && !c->causal && !padded && !answers_causal) {
        if (g && g->input)
            return ts_fail(TS_ERR_ARG, "--mask %s is about padded positions, and none are marked: give "
                                       "--src-key-padding-mask M.npy (True = padding)", mf->mask);
        return ts_fail(TS_ERR_ARG, "--mask %s is about padded positions and this input has none (texts of "
                                   "different lengths, or --seq longer than the text, pad)", mf->mask);
    }
    if (s[F_MASK_FILL] && !c->causal && c->arch != TS_ARCH_ENCODER_DECODER && !(padded && c->mask != TS_MASK_NONE))
        return ts_fail(TS_ERR_ARG, "--mask-fill %s writes hidden scores, and this model hides none: its attention is "
                                   "not causal (--mask causal) and no position is padding", mf->mask_fill);
    if (s[F_MASK] && c->mask == TS_MASK_NONE && g && g->src_pad_given)
        return ts_fail(TS_ERR_ARG, "--mask none attends to padded keys, but --src-key-padding-mask marks some: "
                                   "drop one of the two");
    return TS_OK;
}

ts_status model_flags_resolve_given(const model_flags *mf, const model_given *g, ts_model_config *cfg,
                                    model_batch *batch) {
    if (batch) memset(batch, 0, sizeof *batch);
    ts_status st = TS_OK;
    if (g && g->base) {
        *cfg = *g->base; /* flags already applied and checked against the weights */
    } else {
        st = ts_model_config_preset(cfg, mf->seen[F_PRESET] ? mf->preset : "tiny");
        if (!st) st = model_flags_apply(mf, cfg);
        if (st) return st;
    }
    const char *weights = g && g->base ? g->weights_path : NULL;
    bool vectors = g && g->input;
    const char *const *texts = mf->text.count ? mf->text.items : (cfg->text ? &cfg->text : NULL);
    int n_texts = mf->text.count ? mf->text.count : (cfg->text ? 1 : 0);
    if (mf->text.count) {
        if (vectors) return ts_fail(TS_ERR_ARG, "--text and --input both give the encoder's input: choose one");
        if (cfg->arch == TS_ARCH_ATTENTION)
            return ts_fail(TS_ERR_ARG, "%s%s (attention alone) takes %svectors, not --text (give --input X.npy)",
                           weights ? "" : "preset ", weights ? weights : cfg->preset, weights ? "" : "random ");
        if (weights && cfg->input != TS_INPUT_TOKENS)
            return ts_fail(TS_ERR_ARG, "%s has no token table, so no words to look up: it reads vectors; give "
                                       "--input X.npy (B, S, %d) instead of --text", weights, cfg->d_model);
        cfg->input = TS_INPUT_TOKENS;
    }
    if (vectors && (st = use_vectors(mf, g, cfg))) return st;
    bool given_ids = g && g->ids;
    if (given_ids) {
        if (mf->text.count) return ts_fail(TS_ERR_ARG, "--text and --ids both give the input: choose one");
        if (vectors) return ts_fail(TS_ERR_ARG, "--input and --ids both give the input: choose one");
        if ((st = use_ids(mf, g, cfg))) return st;
        n_texts = 0;
    }
    if (cfg->input != TS_INPUT_TOKENS) n_texts = 0;
    bool padded = g && g->src_pad_given;
    if (n_texts) {
        bool text_pads = false;
        st = tokenize(mf, cfg, texts, n_texts, batch, weights, &text_pads);
        if (st) return st;
        padded |= text_pads;
    }
    bool bos_first = cfg->input == TS_INPUT_TOKENS && n_texts == 0;
    for (int64_t i = 0; given_ids && bos_first && i < g->ids->shape[0]; i++)
        bos_first = g->ids->i64[i * g->ids->shape[1]] == TS_TOK_BOS; /* given ids start with <bos> or are shifted */
    if (cfg->arch == TS_ARCH_ENCODER_DECODER && !vectors) cfg->tgt_seq = target_length(cfg->seq, bos_first);
    st = unused_by_attention(mf, cfg);
    if (!st) st = ts_model_config_check(cfg);
    if (st || !batch) {
        if (!st && !batch) st = unused_flags(mf, cfg, g, padded, !vectors && !n_texts && !given_ids);
        if (batch) model_batch_free(batch);
        return st;
    }
    batch->n_texts = n_texts;
    int64_t B = cfg->batch, S = cfg->seq, T = cfg->tgt_seq, D = cfg->d_model;
    if (vectors) {
        /* the caller feeds its vectors */
    } else if (cfg->input == TS_INPUT_TOKENS) {
        st = build_ids(cfg, texts, n_texts, given_ids ? g->ids : NULL, batch, (int)S, (int)T, trained_on_task(weights));
    } else { /* seed 000's x = torch.randn(B, S, D): N(0, 1) from the seed */
        int64_t din = cfg->in_dim ? cfg->in_dim : D;
        batch->src_vecs = malloc(sizeof(float) * (size_t)(B * S * din));
        if (cfg->arch == TS_ARCH_ENCODER_DECODER) batch->tgt_vecs = malloc(sizeof(float) * (size_t)(B * T * D));
        if (!batch->src_vecs || (cfg->arch == TS_ARCH_ENCODER_DECODER && !batch->tgt_vecs))
            st = ts_fail(TS_ERR_NOMEM, "out of memory for the random input");
        if (!st) ts_model_randn(batch->src_vecs, B * S * din, cfg->seed + 1);
        if (!st && batch->tgt_vecs) ts_model_randn(batch->tgt_vecs, B * T * D, cfg->seed + 2);
    }
    if (!st) st = unused_flags(mf, cfg, g, padded, !vectors && !n_texts && !given_ids);
    if (st) model_batch_free(batch);
    return st;
}

ts_status model_flags_resolve(const model_flags *mf, ts_model_config *cfg, model_batch *batch) {
    return model_flags_resolve_given(mf, NULL, cfg, batch);
}

void model_batch_free(model_batch *b) {
    if (b->have_tok) ts_tokenizer_free(&b->tok);
    free(b->src_ids);
    free(b->tgt_ids);
    free(b->src_pad);
    free(b->tgt_pad);
    free(b->src_vecs);
    free(b->tgt_vecs);
    memset(b, 0, sizeof *b);
}

ts_model_input model_batch_input(const model_batch *b) {
    ts_model_input in;
    memset(&in, 0, sizeof in);
    in.src_ids = b->src_ids;
    in.tgt_ids = b->tgt_ids;
    in.src_pad = b->src_pad;
    in.tgt_pad = b->tgt_pad;
    in.src_embedded = b->src_vecs;
    in.tgt_embedded = b->tgt_vecs;
    return in;
}

/* ---- printing shapes ------------------------------------------------------------ */

static ts_status print_step(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag) {
    (void)op;
    shape_printer *p = ctx;
    /* The module is the name up to its last dot; a top-level step
     * (input, logits) is its own module. */
    const char *dot = strrchr(name, '.');
    size_t glen = dot ? (size_t)(dot - name) : strlen(name);
    if (glen >= sizeof p->group) glen = sizeof p->group - 1;
    if (strlen(p->group) != glen || strncmp(p->group, name, glen) != 0) {
        memcpy(p->group, name, glen);
        p->group[glen] = '\0';
        fprintf(p->out, "------- %s -------\n", p->group);
    }
    const char *leaf = dot ? dot + 1 : name;
    char shape[TS_SHAPE_TEXT_MAX];
    ts_tensor_shape_str(shape, sizeof shape, t, p->style);
    bool seed_order = p->style == TS_SHAPE_TORCH && tag == TS_TAG_ATTN_WEIGHTS;
    if (seed_order) {
        snprintf(p->held, sizeof p->held, "%s.size(): %s\n", leaf, shape);
        return TS_OK;
    }
    fprintf(p->out, "%s.size(): %s\n", leaf, shape);
    if (p->held[0]) { /* the values made from the held weights, or any step after them */
        fputs(p->held, p->out);
        p->held[0] = '\0';
    }
    return ferror(p->out) ? ts_fail(TS_ERR_IO, "cannot write the shapes") : TS_OK;
}

void shape_printer_init(shape_printer *p, FILE *out, ts_shape_style style) {
    memset(p, 0, sizeof *p);
    p->out = out;
    p->style = style;
}

ts_hook shape_printer_hook(shape_printer *p) { return (ts_hook){.fn = print_step, .ctx = p}; }
