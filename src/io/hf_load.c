/* hf_load: a Hugging Face model folder as it comes (io.h, "Hugging Face
 * folders"): config.json beside the weights, for the model types whose
 * blocks tscope computes today besides GPT-2 (gpt2_load.c):
 *   llama, mistral, qwen2  RMSNorm, RoPE (rotate-half), q/k/v apart with
 *                          shared key/value heads, SwiGLU, no biases but
 *                          Qwen2's q/k/v
 *   gemma                  the same with Gemma's (1 + w) RMSNorm, GeGLU,
 *                          embeddings times sqrt(hidden), head_dim of its own
 *   gpt_neox               LayerNorm, partial RoPE, q/k/v packed per head,
 *                          GELU, a parallel residual (Pythia)
 *   bert                   an encoder (no causal mask): word + token type +
 *                          learned position embeddings through a LayerNorm,
 *                          post-LN layers, the masked-LM head (dense, GELU,
 *                          LayerNorm, decoder tied to the word embeddings,
 *                          bias); the pre-training pooler and next-sentence
 *                          head the files may carry are skipped by name
 * The weights are model.safetensors, shards named by
 * model.safetensors.index.json, or pytorch_model.bin; F32, F16 and BF16 are
 * converted to float32 as each tensor is read. Every tensor of the files is
 * placed or is a buffer the model does not need (named in skip_buffer);
 * anything else is refused with its name. So is a config key that changes
 * the arithmetic in a way tscope does not compute (rope_scaling, a sliding
 * window that is in effect): never computed the standard way in silence.
 * The arithmetic follows Hugging Face's modeling_*.py files; tests/ref/hf/
 * holds float64 references of each type (tests/hf_test.sh). */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tscope/io.h"

#define CONFIG_MAX (1 << 20)
#define SHARDS_MAX 256

typedef enum hf_type { HF_LLAMA, HF_MISTRAL, HF_QWEN2, HF_GEMMA, HF_GPT_NEOX, HF_BERT, HF_TYPES } hf_type;
static const char *const type_names[HF_TYPES] = {"llama", "mistral", "qwen2", "gemma", "gpt_neox", "bert"};

/* ---- the folder ------------------------------------------------------------------- */

static bool is_dir(const char *path) {
    struct stat s;
    return stat(path, &s) == 0 && S_ISDIR(s.st_mode);
}

static bool is_file(const char *path) {
    struct stat s;
    return stat(path, &s) == 0 && S_ISREG(s.st_mode);
}

/* The whole of a small text file (config.json, the shard index), NUL-ended. */
static ts_status read_text(const char *path, char **text, size_t *len) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return ts_fail(TS_ERR_IO, "cannot open %s", path);
    char *buf = NULL;
    size_t n = 0, cap = 0;
    ts_status st = TS_OK;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            char *grown = cap > CONFIG_MAX * 64ull ? NULL : realloc(buf, cap);
            if (!grown) {
                st = ts_fail(TS_ERR_FORMAT, "%s is larger than a config file is", path);
                break;
            }
            buf = grown;
        }
        size_t got = fread(buf + n, 1, 4096, fp);
        n += got;
        if (got < 4096) break;
    }
    if (!st && ferror(fp)) st = ts_fail(TS_ERR_IO, "%s: cannot read it", path);
    fclose(fp);
    if (st) {
        free(buf);
        return st;
    }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return TS_OK;
}

static ts_status read_json(const char *path, cJSON **o) {
    char *text = NULL;
    size_t len = 0;
    TS_TRY(read_text(path, &text, &len));
    ts_status st = ts_json_parse(text, len, path, o);
    free(text);
    return st;
}

/* config.json's model_type, when path is a folder holding one: NULL otherwise. */
static char *model_type_of(const char *path) {
    char cfg[4096 + 16];
    if (!is_dir(path)) return NULL;
    snprintf(cfg, sizeof cfg, "%s/config.json", path);
    if (!is_file(cfg)) return NULL;
    cJSON *o = NULL;
    if (read_json(cfg, &o)) {
        ts_clear_error();
        return NULL;
    }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "model_type");
    char *type = cJSON_IsString(t) ? strdup(t->valuestring) : NULL;
    cJSON_Delete(o);
    return type;
}

bool ts_hf_is(const char *path) {
    char *type = model_type_of(path);
    bool hf = type && strcmp(type, "gpt2") != 0; /* GPT-2's folders: gpt2_load.c */
    free(type);
    return hf;
}

/* ---- config.json ------------------------------------------------------------------ */

typedef struct hf_config {
    const char *path; /* config.json, for messages */
    const cJSON *o;
    ts_status st;
} hf_config;

static int64_t int_key(hf_config *h, const char *key, bool required, int64_t fallback, int64_t lo, int64_t hi) {
    int64_t v = fallback;
    if (!h->st) h->st = ts_json_int(h->o, key, h->path, required, lo, hi, &v);
    return v;
}

static double number_key(hf_config *h, const char *key, double fallback) {
    double v = fallback;
    if (!h->st && ts_json_has(h->o, key) && !cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(h->o, key)))
        h->st = ts_json_number(h->o, key, h->path, false, &v);
    return v;
}

static bool bool_key(hf_config *h, const char *key, bool fallback) {
    bool v = fallback;
    if (!h->st) h->st = ts_json_bool(h->o, key, h->path, false, &v);
    return v;
}

/* A string key, or NULL when absent or null. */
static const char *string_key(hf_config *h, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(h->o, key);
    if (h->st || !v || cJSON_IsNull(v)) return NULL;
    const char *s = NULL;
    h->st = ts_json_string(h->o, key, h->path, false, &s);
    return s;
}

/* A key whose non-null value changes the arithmetic in a way tscope does not compute. */
static void refuse_key(hf_config *h, const char *key, const char *what) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(h->o, key);
    if (h->st || !v || cJSON_IsNull(v) || cJSON_IsFalse(v)) return;
    h->st = ts_fail(TS_ERR_UNSUPPORTED, "%s: \"%s\" is set: %s, which tscope does not compute (it would be the "
                                        "standard arithmetic, silently wrong)", h->path, key, what);
}

/* hidden_act and its kin, in Hugging Face's words. */
static void activation_key(hf_config *h, const char *key, const char *fallback, ts_activation *out) {
    const char *a = string_key(h, key);
    if (h->st) return;
    if (!a) a = fallback;
    if (strcmp(a, "silu") == 0 || strcmp(a, "swish") == 0) *out = TS_ACT_SILU;
    else if (strcmp(a, "gelu") == 0) *out = TS_ACT_GELU;
    else if (strcmp(a, "gelu_new") == 0 || strcmp(a, "gelu_pytorch_tanh") == 0) *out = TS_ACT_GELU_TANH;
    else if (strcmp(a, "relu") == 0) *out = TS_ACT_RELU;
    else
        h->st = ts_fail(TS_ERR_UNSUPPORTED, "%s: \"%s\" is \"%.40s\"; tscope computes silu, gelu, gelu_new, "
                                            "gelu_pytorch_tanh and relu", h->path, key, a);
}

/* A sliding window that is in effect: Mistral's sliding_window, Qwen2's only with use_sliding_window. */
static void refuse_window(hf_config *h, hf_type type) {
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(h->o, "sliding_window");
    if (h->st || !w || cJSON_IsNull(w)) return;
    if (type == HF_QWEN2 && !bool_key(h, "use_sliding_window", false)) return;
    if (type != HF_MISTRAL && type != HF_QWEN2) return;
    int64_t window = int_key(h, "sliding_window", true, 0, 0, INT32_MAX);
    int64_t positions = int_key(h, "max_position_embeddings", false, 0, 0, INT32_MAX);
    if (!h->st && (positions == 0 || window < positions))
        h->st = ts_fail(TS_ERR_UNSUPPORTED, "%s: \"sliding_window\" is %lld: each position would see only the %lld "
                                            "before it, which tscope does not compute (it attends to all)",
                        h->path, (long long)window, (long long)window);
}

/* BERT (modeling_bert.py, BertForMaskedLM): an encoder that sees both ways,
 * post-LN, learned positions and token types through the embeddings'
 * LayerNorm, every LayerNorm with layer_norm_eps, the masked-LM head. */
static void bert_config(hf_config *h, ts_model_config *c) {
    c->arch = TS_ARCH_ENCODER;
    c->causal = false;
    c->norm = TS_NORM_POST;
    c->final_norm = false;
    c->pe = TS_PE_LEARNED;
    c->mlm_head = true;
    c->type_vocab = (int)int_key(h, "type_vocab_size", false, 2, 1, 1 << 16);
    c->eps = c->embed_eps = (float)number_key(h, "layer_norm_eps", 1e-12);
    c->tie_embed = bool_key(h, "tie_word_embeddings", true);
    activation_key(h, "hidden_act", "gelu", &c->activation);
    const char *positions = string_key(h, "position_embedding_type");
    if (!h->st && positions && strcmp(positions, "absolute") != 0)
        h->st = ts_fail(TS_ERR_UNSUPPORTED, "%s: \"position_embedding_type\" is \"%.40s\": relative positions in the "
                                            "attention scores, which tscope does not compute (it adds absolute ones)",
                        h->path, positions);
    refuse_key(h, "is_decoder", "a causal mask (BERT as a decoder)");
    refuse_key(h, "add_cross_attention", "cross-attention layers");
}

/* The model_type's blocks, then the sizes, each from its Hugging Face key. */
static void config_of(hf_config *h, hf_type type, ts_model_config *c) {
    memset(c, 0, sizeof *c);
    bool neox = type == HF_GPT_NEOX, gemma = type == HF_GEMMA;
    c->arch = TS_ARCH_DECODER;
    c->causal = true;
    c->head = TS_HEAD_LM;
    c->input = TS_INPUT_TOKENS;
    c->norm = TS_NORM_PRE;
    c->final_norm = true;
    c->pe = TS_PE_ROPE;
    c->rope_style = TS_ROPE_HALF;
    c->batch = 1;
    c->d_model = (int)int_key(h, "hidden_size", true, 0, 1, 1 << 16);
    c->layers = (int)int_key(h, "num_hidden_layers", true, 0, 1, 1 << 12);
    c->heads = (int)int_key(h, "num_attention_heads", true, 0, 1, 1 << 12);
    c->ffn = (int)int_key(h, "intermediate_size", true, 0, 1, 1 << 20);
    c->vocab = (int)int_key(h, "vocab_size", true, 0, 1, 1 << 24);
    int64_t positions = int_key(h, "max_position_embeddings", false, 2048, 1, 1 << 24);
    c->seq = (int)(positions < 4096 ? positions : 4096);
    c->max_pos = (int)positions;
    refuse_key(h, "rope_scaling", "RoPE's angles rescaled (linear, dynamic, yarn or llama3 scaling)");
    refuse_window(h, type);
    if (type == HF_BERT) {
        bert_config(h, c);
        return;
    }
    if (neox) {
        c->norm_kind = TS_NORMK_LAYER;
        c->eps = c->embed_eps = (float)number_key(h, "layer_norm_eps", 1e-5);
        c->rotary_pct = (float)number_key(h, "partial_rotary_factor", number_key(h, "rotary_pct", 0.25));
        c->rope_theta = (float)number_key(h, "rope_theta", number_key(h, "rotary_emb_base", 10000));
        c->parallel_residual = bool_key(h, "use_parallel_residual", true);
        c->tie_embed = bool_key(h, "tie_word_embeddings", false);
        bool bias = bool_key(h, "attention_bias", true);
        c->no_qkv_bias = c->no_out_bias = !bias;
        activation_key(h, "hidden_act", "gelu", &c->activation);
        return;
    }
    c->split_qkv = true;
    c->gated_ffn = true;
    c->kv_heads = (int)int_key(h, "num_key_value_heads", false, c->heads, 1, 1 << 12);
    if (c->kv_heads == c->heads) c->kv_heads = 0;
    c->head_dim = (int)int_key(h, "head_dim", false, 0, 0, 1 << 14);
    if (c->heads && c->head_dim * c->heads == c->d_model) c->head_dim = 0;
    c->norm_kind = gemma ? TS_NORMK_RMS_GEMMA : TS_NORMK_RMS;
    c->eps = c->embed_eps = (float)number_key(h, "rms_norm_eps", 1e-6);
    c->rope_theta = (float)number_key(h, "rope_theta", 10000);
    c->no_ffn_bias = !bool_key(h, "mlp_bias", false);
    bool attention_bias = bool_key(h, "attention_bias", false);
    c->no_qkv_bias = type == HF_QWEN2 ? false : !attention_bias; /* Qwen2: biases on q, k, v only */
    c->no_out_bias = !attention_bias || type == HF_QWEN2;
    c->tie_embed = bool_key(h, "tie_word_embeddings", gemma);
    c->scale_embed = gemma;
    if (gemma) activation_key(h, "hidden_activation", "gelu_pytorch_tanh", &c->activation); /* not hidden_act */
    else activation_key(h, "hidden_act", "silu", &c->activation);
}

ts_status ts_hf_config(const char *path, ts_model_config *c) {
    char cfg_path[4096 + 16];
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", path);
    cJSON *o = NULL;
    TS_TRY(read_json(cfg_path, &o));
    hf_config h = {cfg_path, o, TS_OK};
    const char *type = string_key(&h, "model_type");
    int t = 0;
    while (!h.st && type && t < HF_TYPES && strcmp(type, type_names[t]) != 0) t++;
    if (!h.st && (!type || t == HF_TYPES))
        h.st = ts_fail(TS_ERR_UNSUPPORTED, "%s: model_type \"%.40s\" is not one tscope reads (gpt2, llama, mistral, "
                                           "qwen2, gemma, gpt_neox, bert)", cfg_path, type ? type : "(none)");
    if (!h.st) config_of(&h, (hf_type)t, c);
    cJSON_Delete(o);
    if (!h.st) snprintf(c->preset, sizeof c->preset, "%.15s", type_names[t]);
    if (!h.st) h.st = ts_model_config_check(c);
    if (h.st == TS_ERR_ARG && !strstr(ts_last_error(), cfg_path)) /* the config check's words, about this file */
        return ts_fail(TS_ERR_FORMAT, "%s: %s", cfg_path, ts_last_error());
    return h.st;
}

/* ---- the weights: one file, shards, or a torch.save file --------------------------- */

typedef struct hf_weights {
    ts_safetensors files[SHARDS_MAX];
    int n;
    cJSON *index;          /* model.safetensors.index.json's weight_map, or NULL */
    bool *used[SHARDS_MAX];/* per file, per entry: placed or skipped */
} hf_weights;

static void weights_close(hf_weights *w) {
    for (int i = 0; i < w->n; i++) {
        ts_safetensors_close(&w->files[i]);
        free(w->used[i]);
    }
    cJSON_Delete(w->index);
    memset(w, 0, sizeof *w);
}

static ts_status open_file(hf_weights *w, const char *path) {
    if (w->n == SHARDS_MAX) return ts_fail(TS_ERR_FORMAT, "%s: more than %d shards", path, SHARDS_MAX);
    TS_TRY(ts_safetensors_open(&w->files[w->n], path));
    w->used[w->n] = calloc((size_t)w->files[w->n].count + 1, sizeof(bool));
    if (!w->used[w->n]) {
        ts_safetensors_close(&w->files[w->n]);
        return ts_fail(TS_ERR_NOMEM, "out of memory");
    }
    w->n++;
    return TS_OK;
}

/* The shards the index names, each opened once; a name outside the folder is refused. */
static ts_status open_shards(hf_weights *w, const char *dir, const char *index_path) {
    cJSON *o = NULL;
    TS_TRY(read_json(index_path, &o));
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(o, "weight_map");
    if (!cJSON_IsObject(map)) {
        cJSON_Delete(o);
        return ts_fail(TS_ERR_FORMAT, "%s has no \"weight_map\" object", index_path);
    }
    w->index = o;
    const cJSON *e;
    cJSON_ArrayForEach(e, map) {
        if (!cJSON_IsString(e)) return ts_fail(TS_ERR_FORMAT, "%s: \"%.80s\" maps to no file name", index_path, e->string);
        const char *file = e->valuestring;
        if (strchr(file, '/') || strcmp(file, "..") == 0 || !file[0])
            return ts_fail(TS_ERR_FORMAT, "%s: \"%.80s\" is not a file of the folder", index_path, file);
        bool seen = false;
        for (int i = 0; i < w->n && !seen; i++) {
            const char *base = strrchr(w->files[i].path, '/');
            seen = base && strcmp(base + 1, file) == 0;
        }
        if (seen) continue;
        char path[4096 + 256];
        snprintf(path, sizeof path, "%s/%s", dir, file);
        if (!is_file(path))
            return ts_fail(TS_ERR_ARG, "%s names %s for %.80s, and %s is not there (a shard is missing)", index_path,
                           file, e->string, path);
        TS_TRY(open_file(w, path));
    }
    return TS_OK;
}

static ts_status weights_open(hf_weights *w, const char *dir) {
    memset(w, 0, sizeof *w);
    char path[4096 + 64];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (is_file(path)) return open_file(w, path);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (is_file(path)) return open_shards(w, dir, path);
    snprintf(path, sizeof path, "%s/pytorch_model.bin", dir);
    if (is_file(path)) return open_file(w, path);
    return ts_fail(TS_ERR_ARG, "%s has config.json but no weights: model.safetensors, model.safetensors.index.json "
                               "with its shards, or pytorch_model.bin", dir);
}

/* ---- names ------------------------------------------------------------------------- */

/* Buffers real files carry that no model needs: causal masks, RoPE's
 * frequencies, BERT-style position ids. Matched by the whole last parts of
 * the name, never by a ".bias" suffix alone (attention.dense.bias is real). */
static bool skip_buffer(const char *name) {
    static const char *const ends[] = {".attention.bias", ".attention.masked_bias", ".attn.bias", ".attn.masked_bias",
                                       ".rotary_emb.inv_freq", "position_ids"};
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
        size_t k = strlen(ends[i]);
        if (n >= k && strcmp(name + n - k, ends[i]) == 0) return true;
    }
    return false;
}

/* GPT-NeoX's query_key_value rows come per head (q_h, k_h, v_h); tscope's
 * in_proj takes q, then k, then v for every head: the rows regrouped. */
static ts_status neox_qkv(ts_model *m, const char *param, const ts_tensor *src, int H, int hd) {
    int64_t cols = src->rank == 2 ? src->shape[1] : 1, D = (int64_t)H * hd;
    if (src->shape[0] != 3 * D) return ts_model_load_param(m, param, src); /* its shape message */
    float *out = malloc(sizeof(float) * (size_t)(3 * D * cols));
    if (!out) return ts_fail(TS_ERR_NOMEM, "out of memory");
    for (int h = 0; h < H; h++)
        for (int part = 0; part < 3; part++)
            for (int j = 0; j < hd; j++)
                for (int64_t c = 0; c < cols; c++)
                    out[((int64_t)part * D + (int64_t)h * hd + j) * cols + c] =
                        src->data[(((int64_t)h * 3 + part) * hd + j) * src->stride[0] + c * (src->rank == 2 ? src->stride[1] : 0)];
    ts_tensor t;
    ts_status st = ts_tensor_view(&t, out, src->rank, src->shape);
    if (!st) st = ts_model_load_param(m, param, &t);
    free(out);
    return st;
}

/* BERT's names (with or without the "bert." prefix BertForMaskedLM adds;
 * very old files call LayerNorm's weight and bias gamma and beta) -> tscope's.
 * query, key and value are parts 0, 1, 2 of one packed in_proj (*part); every
 * other name is a whole parameter (*part -1). */
static bool bert_name(const char *name, char *out, size_t size, int *part) {
    static const char *const whole[][2] = {
        {"embeddings.word_embeddings.weight", "embed.tokens.weight"},
        {"embeddings.position_embeddings.weight", "embed.positions.weight"},
        {"embeddings.token_type_embeddings.weight", "embed.token_types.weight"},
        {"embeddings.LayerNorm.weight", "embed.norm.weight"}, {"embeddings.LayerNorm.bias", "embed.norm.bias"},
        {"embeddings.LayerNorm.gamma", "embed.norm.weight"}, {"embeddings.LayerNorm.beta", "embed.norm.bias"},
        {"cls.predictions.transform.dense.weight", "mlm.dense.weight"},
        {"cls.predictions.transform.dense.bias", "mlm.dense.bias"},
        {"cls.predictions.transform.LayerNorm.weight", "mlm.norm.weight"},
        {"cls.predictions.transform.LayerNorm.bias", "mlm.norm.bias"},
        {"cls.predictions.transform.LayerNorm.gamma", "mlm.norm.weight"},
        {"cls.predictions.transform.LayerNorm.beta", "mlm.norm.bias"},
        {"cls.predictions.decoder.weight", "generator.weight"}, /* tied: the word embeddings */
        {"cls.predictions.decoder.bias", "generator.bias"},     /* tied to cls.predictions.bias */
        {"cls.predictions.bias", "generator.bias"}};
    static const char *const layer[][2] = {
        {"attention.self.query.weight", "self_attn.in_proj_weight"}, {"attention.self.query.bias", "self_attn.in_proj_bias"},
        {"attention.self.key.weight", "self_attn.in_proj_weight"},   {"attention.self.key.bias", "self_attn.in_proj_bias"},
        {"attention.self.value.weight", "self_attn.in_proj_weight"}, {"attention.self.value.bias", "self_attn.in_proj_bias"},
        {"attention.output.dense.weight", "self_attn.out_proj.weight"},
        {"attention.output.dense.bias", "self_attn.out_proj.bias"},
        {"attention.output.LayerNorm.weight", "norm1.weight"}, {"attention.output.LayerNorm.bias", "norm1.bias"},
        {"attention.output.LayerNorm.gamma", "norm1.weight"},  {"attention.output.LayerNorm.beta", "norm1.bias"},
        {"intermediate.dense.weight", "linear1.weight"},       {"intermediate.dense.bias", "linear1.bias"},
        {"output.dense.weight", "linear2.weight"},             {"output.dense.bias", "linear2.bias"},
        {"output.LayerNorm.weight", "norm2.weight"},           {"output.LayerNorm.bias", "norm2.bias"},
        {"output.LayerNorm.gamma", "norm2.weight"},            {"output.LayerNorm.beta", "norm2.bias"}};
    *part = -1;
    if (strncmp(name, "bert.", 5) == 0) name += 5;
    for (size_t k = 0; k < sizeof whole / sizeof whole[0]; k++)
        if (strcmp(name, whole[k][0]) == 0) return snprintf(out, size, "%s", whole[k][1]) > 0;
    static const char layers[] = "encoder.layer."; /* then N (read as a number, never wrapped) and "." */
    if (strncmp(name, layers, sizeof layers - 1) != 0) return false;
    const char *digits = name + sizeof layers - 1;
    char *end = NULL;
    long i = isdigit((unsigned char)*digits) ? strtol(digits, &end, 10) : -1;
    if (i < 0 || i > 1 << 16 || *end != '.') return false;
    const char *rest = end + 1;
    for (size_t k = 0; k < sizeof layer / sizeof layer[0]; k++)
        if (strcmp(rest, layer[k][0]) == 0) {
            *part = k < 6 ? (int)k / 2 : -1;
            return snprintf(out, size, "encoder.layers.%ld.%s", i, layer[k][1]) > 0;
        }
    return false;
}

/* BERT's parts of pre-training that the masked-LM logits never read:
 * BertForPreTraining's pooler ([CLS] through a dense tanh) and its
 * next-sentence head. bert-base-uncased's files carry them; skipped by name. */
static bool bert_unused(const char *name) {
    if (strncmp(name, "bert.", 5) == 0) name += 5;
    return strncmp(name, "pooler.dense.", 13) == 0 || strncmp(name, "cls.seq_relationship.", 21) == 0;
}

/* One Hugging Face tensor name -> tscope's parameter name (into out), for
 * the layers of each family; false when the name is none of them. *part:
 * which of q, k, v it gives of a packed in_proj (BERT), else -1. */
static bool map_name(hf_type type, const char *name, char *out, size_t size, int *part) {
    int i;
    const char *rest; /* what follows "<stack>.layers.N." (N read as a number, never wrapped) */
    *part = -1;
    if (type == HF_BERT) return bert_name(name, out, size, part);
    if (type == HF_GPT_NEOX) {
        static const char *const pairs[][2] = {
            {"input_layernorm.weight", "norm1.weight"}, {"input_layernorm.bias", "norm1.bias"},
            {"post_attention_layernorm.weight", "norm2.weight"}, {"post_attention_layernorm.bias", "norm2.bias"},
            {"attention.query_key_value.weight", "self_attn.in_proj_weight"},
            {"attention.query_key_value.bias", "self_attn.in_proj_bias"},
            {"attention.dense.weight", "self_attn.out_proj.weight"}, {"attention.dense.bias", "self_attn.out_proj.bias"},
            {"mlp.dense_h_to_4h.weight", "linear1.weight"}, {"mlp.dense_h_to_4h.bias", "linear1.bias"},
            {"mlp.dense_4h_to_h.weight", "linear2.weight"}, {"mlp.dense_4h_to_h.bias", "linear2.bias"}};
        if (strcmp(name, "gpt_neox.embed_in.weight") == 0) return snprintf(out, size, "embed.tokens.weight") > 0;
        if (strcmp(name, "gpt_neox.final_layer_norm.weight") == 0) return snprintf(out, size, "decoder.norm.weight") > 0;
        if (strcmp(name, "gpt_neox.final_layer_norm.bias") == 0) return snprintf(out, size, "decoder.norm.bias") > 0;
        if (strcmp(name, "embed_out.weight") == 0) return snprintf(out, size, "generator.weight") > 0;
        if ((i = ts_name_stack_layer(name, "gpt_neox", &rest)) < 0 || *rest++ != '.') return false;
        for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++)
            if (strcmp(rest, pairs[k][0]) == 0) return snprintf(out, size, "decoder.layers.%d.%s", i, pairs[k][1]) > 0;
        return false;
    }
    static const char *const pairs[][2] = {
        {"input_layernorm.weight", "norm1.weight"}, {"post_attention_layernorm.weight", "norm2.weight"},
        {"self_attn.q_proj.weight", "self_attn.q_proj.weight"}, {"self_attn.q_proj.bias", "self_attn.q_proj.bias"},
        {"self_attn.k_proj.weight", "self_attn.k_proj.weight"}, {"self_attn.k_proj.bias", "self_attn.k_proj.bias"},
        {"self_attn.v_proj.weight", "self_attn.v_proj.weight"}, {"self_attn.v_proj.bias", "self_attn.v_proj.bias"},
        {"self_attn.o_proj.weight", "self_attn.out_proj.weight"}, {"self_attn.o_proj.bias", "self_attn.out_proj.bias"},
        {"mlp.gate_proj.weight", "linear_gate.weight"}, {"mlp.gate_proj.bias", "linear_gate.bias"},
        {"mlp.up_proj.weight", "linear1.weight"}, {"mlp.up_proj.bias", "linear1.bias"},
        {"mlp.down_proj.weight", "linear2.weight"}, {"mlp.down_proj.bias", "linear2.bias"}};
    if (strcmp(name, "model.embed_tokens.weight") == 0) return snprintf(out, size, "embed.tokens.weight") > 0;
    if (strcmp(name, "model.norm.weight") == 0) return snprintf(out, size, "decoder.norm.weight") > 0;
    if (strcmp(name, "lm_head.weight") == 0) return snprintf(out, size, "generator.weight") > 0;
    if ((i = ts_name_stack_layer(name, "model", &rest)) < 0 || *rest++ != '.') return false;
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++)
        if (strcmp(rest, pairs[k][0]) == 0) return snprintf(out, size, "decoder.layers.%d.%s", i, pairs[k][1]) > 0;
    return false;
}

/* BERT's query, key or value (part 0, 1, 2; rows (D, D) or a bias (D)) into
 * its rows of the packed in_proj, written straight into the stored layout
 * (model.c: torch row part*D + h*hd + j is stored row h*3hd + part*hd + j). */
static ts_status place_qkv_part(ts_model *m, const char *param, int part, const ts_tensor *src) {
    ts_tensor dst;
    TS_TRY(ts_model_param(m, param, &dst));
    int64_t D = m->cfg.d_model, hd = ts_model_head_dim(&m->cfg), cols = dst.rank == 2 ? dst.shape[1] : 1;
    if (src->rank != dst.rank || src->shape[0] != D || (dst.rank == 2 && src->shape[1] != cols)) {
        char got[TS_SHAPE_TEXT_MAX], want[TS_SHAPE_TEXT_MAX];
        int64_t need[2] = {D, cols};
        ts_tensor_shape_str(got, sizeof got, src, TS_SHAPE_PLAIN);
        ts_shape_format(want, sizeof want, dst.rank, need, TS_SHAPE_PLAIN);
        static const char *const parts[] = {"query", "key", "value"};
        return ts_fail(TS_ERR_SHAPE, "the %s rows of %s have shape %s, the model needs %s", parts[part], param, got, want);
    }
    for (int64_t r = 0; r < D; r++) {
        int64_t stored = (r / hd) * 3 * hd + part * hd + r % hd;
        for (int64_t c = 0; c < cols; c++)
            dst.data[stored * cols + c] = src->data[r * src->stride[0] + (src->rank == 2 ? c * src->stride[1] : 0)];
    }
    return TS_OK;
}

/* ---- loading ----------------------------------------------------------------------- */

/* A whole parameter kept as PyTorch keeps it, of the file's very shape: its
 * values converted straight into the model's block, one pass over them (a
 * 1B model's load was its float32 copies: each page touched twice). false
 * when the general way must place it (its shape message, a regrouping). */
static bool place_direct(ts_model *m, ts_safetensors *f, const char *name, const char *param) {
    int i = ts_model_find_param(m, param);
    const ts_st_entry *e = ts_safetensors_find(f, name);
    if (i < 0 || !e || !m->block || strstr(param, "in_proj")) return false;
    const ts_model_param_info *p = &m->params[i];
    if (p->layout != TS_LAYOUT_TORCH || e->rank != p->rank || strcmp(m->params[i].name, param) != 0) return false;
    for (int d = 0; d < p->rank; d++)
        if (e->shape[d] != p->shape[d]) return false;
    return ts_safetensors_read_f32(f, name, m->block + p->offset, p->numel);
}

/* Every tensor of the files, placed into the model's parameter it names. */
static ts_status place_all(ts_model *m, hf_weights *w, hf_type type, const char *dir) {
    char param[TS_MODEL_NAME_MAX];
    for (int fi = 0; fi < w->n; fi++) {
        ts_safetensors *f = &w->files[fi];
        for (int e = 0; e < f->count; e++) {
            const char *name = f->entries[e].name;
            if (skip_buffer(name) || (type == HF_BERT && bert_unused(name))) {
                w->used[fi][e] = true;
                continue;
            }
            int part;
            if (!map_name(type, name, param, sizeof param, &part))
                return ts_fail(TS_ERR_FORMAT, "%s: tensor %s is not a part of a %s model that tscope places (it "
                                              "would be left out of the computation)", f->path, name, type_names[type]);
            if (strcmp(param, "generator.weight") == 0 && m->cfg.tie_embed) { /* tied: the table itself */
                w->used[fi][e] = true;
                continue;
            }
            if (part < 0 && place_direct(m, f, name, param)) {
                w->used[fi][e] = true;
                continue;
            }
            ts_tensor t;
            TS_TRY(ts_safetensors_get(f, name, &t));
            ts_status st = part >= 0                                     ? place_qkv_part(m, param, part, &t)
                           : type == HF_GPT_NEOX && strstr(param, "in_proj") ? neox_qkv(m, param, &t, m->cfg.heads,
                                                                                        ts_model_head_dim(&m->cfg))
                                                                             : ts_model_load_param(m, param, &t);
            ts_safetensors_release(f, name); /* its float32 copy is in the model now */
            if (st) return ts_fail(st, "%s: %s (from %s)", dir, ts_last_error(), name);
            w->used[fi][e] = true;
        }
    }
    return TS_OK;
}

/* Every parameter the model has was in the files, each of q, k and v of a
 * packed in_proj that BERT's files give apart. */
static ts_status check_complete(const ts_model *m, const hf_weights *w, hf_type type, const char *dir) {
    char param[TS_MODEL_NAME_MAX];
    for (int i = 0; i < m->n_params; i++) {
        unsigned found = 0; /* bit k: part k of q, k, v; all three bits: the whole parameter */
        for (int fi = 0; fi < w->n && found != 7; fi++)
            for (int e = 0; e < w->files[fi].count && found != 7; e++) {
                int part;
                if (map_name(type, w->files[fi].entries[e].name, param, sizeof param, &part) &&
                    strcmp(param, m->params[i].name) == 0)
                    found |= part >= 0 ? 1u << part : 7u;
            }
        if (found && found != 7) {
            static const char *const parts[] = {"query", "key", "value"};
            char missing[32] = "";
            for (int k = 0; k < 3; k++)
                if (!(found & 1u << k))
                    snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%s", missing[0] ? " and " : "",
                             parts[k]);
            return ts_fail(TS_ERR_FORMAT, "%s: the files give part of %s, not its %s rows (BERT's query, key and value)",
                           dir, m->params[i].name, missing);
        }
        if (!found)
            return ts_fail(TS_ERR_FORMAT, "%s: no tensor of the files gives %s, which a %s model with this "
                                          "config.json has", dir, m->params[i].name, type_names[type]);
    }
    return TS_OK;
}

ts_status ts_hf_load(ts_model *m, const char *dir) {
    char *type_name = model_type_of(dir);
    int type = 0;
    while (type_name && type < HF_TYPES && strcmp(type_name, type_names[type]) != 0) type++;
    bool known = type_name && type < HF_TYPES;
    free(type_name);
    if (!known) return ts_fail(TS_ERR_ARG, "%s is not a Hugging Face folder tscope reads", dir);
    hf_weights *w = malloc(sizeof *w);
    if (!w) return ts_fail(TS_ERR_NOMEM, "out of memory");
    ts_status st = weights_open(w, dir);
    if (!st) st = place_all(m, w, (hf_type)type, dir);
    if (!st) st = check_complete(m, w, (hf_type)type, dir);
    weights_close(w);
    free(w);
    return st;
}

bool ts_hf_unused(const char *dir, char *what, size_t size) {
    char *type_name = model_type_of(dir);
    bool bert = type_name && strcmp(type_name, "bert") == 0;
    free(type_name);
    if (!bert || size == 0) return false;
    hf_weights *w = malloc(sizeof *w);
    if (!w) return false;
    bool pooler = false, nsp = false;
    if (weights_open(w, dir)) { /* the load itself says what is wrong with the files */
        ts_clear_error();
        weights_close(w);
        free(w);
        return false;
    }
    for (int fi = 0; fi < w->n; fi++)
        for (int e = 0; e < w->files[fi].count; e++) {
            const char *name = w->files[fi].entries[e].name;
            if (!bert_unused(name)) continue;
            if (strstr(name, "pooler.")) pooler = true;
            else nsp = true;
        }
    weights_close(w);
    free(w);
    if (!pooler && !nsp) return false;
    snprintf(what, size, "%s%s%s (BertForPreTraining's, which the masked-LM logits do not read)",
             pooler ? "the pooler (pooler.dense)" : "", pooler && nsp ? " and " : "",
             nsp ? "the next-sentence head (cls.seq_relationship)" : "");
    return true;
}
