/* config_json: a model config as JSON and back (io.h, "config_json"), so a
 * checkpoint says everything needed to build its model again; and the same
 * JSON with a run's settings for model_meta's ts_model_config_json, written
 * by one function. */
#include <float.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tscope/io.h"

/* The config as JSON: every field ts_model_config_from_json reads, and with
 * `run` also what a run or a trace records beside them (the target mask,
 * training mode, the text), each key where ts_model_config_json has always
 * put it. */
/* Today's block choices, only in the configs that make them (a 2017 or
 * GPT-2 model's JSON is as it always was; a reader takes them as absent). */
static void add_modern(cJSON *o, const ts_model_config *c) {
    cJSON_AddStringToObject(o, "norm_kind", ts_model_norm_kind_name(c->norm_kind));
    cJSON_AddNumberToObject(o, "kv_heads", c->kv_heads);
    cJSON_AddNumberToObject(o, "head_dim", c->head_dim);
    cJSON_AddBoolToObject(o, "split_qkv", c->split_qkv);
    cJSON_AddBoolToObject(o, "no_qkv_bias", c->no_qkv_bias);
    cJSON_AddBoolToObject(o, "no_out_bias", c->no_out_bias);
    cJSON_AddBoolToObject(o, "no_ffn_bias", c->no_ffn_bias);
    cJSON_AddBoolToObject(o, "gated_ffn", c->gated_ffn);
    cJSON_AddBoolToObject(o, "parallel_residual", c->parallel_residual);
    cJSON_AddStringToObject(o, "rope_style", ts_model_rope_style_name(c->rope_style));
    cJSON_AddNumberToObject(o, "rotary_pct", c->rotary_pct);
    cJSON_AddNumberToObject(o, "rope_theta", c->rope_theta);
}

static char *config_json(const ts_model_config *c, bool run) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "preset", c->preset);
    cJSON_AddStringToObject(o, "arch", ts_model_arch_name(c->arch));
    const struct {
        const char *key;
        int value;
    } ints[] = {{"d_model", c->d_model}, {"heads", c->heads},     {"ffn", c->ffn},         {"layers", c->layers},
                {"dec_layers", c->dec_layers}, {"vocab", c->vocab}, {"seq", c->seq},       {"tgt_seq", c->tgt_seq},
                {"batch", c->batch},     {"in_dim", c->in_dim},   {"max_pos", c->max_pos}, {"n_labels", c->n_labels}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) cJSON_AddNumberToObject(o, ints[i].key, ints[i].value);
    cJSON_AddNumberToObject(o, "dropout", c->dropout);
    cJSON_AddNumberToObject(o, "eps", c->eps);
    cJSON_AddNumberToObject(o, "embed_eps", c->embed_eps);
    cJSON_AddStringToObject(o, "norm", ts_model_norm_name(c->norm));
    cJSON_AddStringToObject(o, "pe", ts_model_pe_name(c->pe));
    cJSON_AddStringToObject(o, "activation", ts_model_activation_name(c->activation));
    cJSON_AddStringToObject(o, "head", ts_model_head_name(c->head));
    cJSON_AddStringToObject(o, "input", ts_model_input_name(c->input));
    cJSON_AddBoolToObject(o, "final_norm", c->final_norm);
    cJSON_AddBoolToObject(o, "causal", c->causal);
    if (run) cJSON_AddStringToObject(o, "tgt_mask", c->tgt_not_causal ? "none" : "causal");
    cJSON_AddBoolToObject(o, "scale_embed", c->scale_embed);
    cJSON_AddBoolToObject(o, "tie_embed", c->tie_embed);
    char variants[128];
    ts_model_variant_names(c->variants, variants, sizeof variants);
    cJSON_AddStringToObject(o, "variant", variants);
    cJSON_AddStringToObject(o, "pe_variant", ts_model_pe_variant_name(c->pe_variant));
    cJSON_AddStringToObject(o, "mask", ts_model_mask_name(c->mask));
    if (run) cJSON_AddBoolToObject(o, "train_mode", c->train_mode);
    cJSON_AddNumberToObject(o, "seed", (double)c->seed);
    if (run && c->text) cJSON_AddStringToObject(o, "text", c->text);
    if (ts_model_is_modern(c)) add_modern(o, c);
    if (ts_model_is_bert(c)) { /* BERT's parts, only in the configs that have them */
        cJSON_AddNumberToObject(o, "type_vocab", c->type_vocab);
        cJSON_AddBoolToObject(o, "mlm_head", c->mlm_head);
    }
    if (c->ln_std_eps) cJSON_AddStringToObject(o, "norm_formula", "std+eps"); /* only where it is not the standard */
    if (c->mask_fill != 0.0f) cJSON_AddNumberToObject(o, "mask_fill", c->mask_fill); /* only where it is not -inf */
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}

char *ts_model_config_to_json(const ts_model_config *c) { return config_json(c, false); }

char *ts_model_config_json(const ts_model_config *c) { return config_json(c, true); }

/* ---- reading ------------------------------------------------------------------- */

typedef struct reader {
    const cJSON *o;
    ts_status st;
} reader;

static const char *const WHAT = "config";

static int int_of(reader *r, const char *key) {
    int64_t v = 0;
    if (!r->st) r->st = ts_json_int(r->o, key, WHAT, true, 0, INT32_MAX, &v);
    return (int)v;
}

static float float_of(reader *r, const char *key) {
    double v = 0;
    if (!r->st) r->st = ts_json_number(r->o, key, WHAT, true, &v);
    return (float)v;
}

static bool bool_of(reader *r, const char *key) {
    bool v = false;
    if (!r->st) r->st = ts_json_bool(r->o, key, WHAT, true, &v);
    return v;
}

/* The value whose name(value) is the string at key; the names run from 0
 * until a name is "?" (each setting's words are spelled once, in the model). */
static int word_of(reader *r, const char *key, const char *(*name)(int)) {
    const char *v = NULL;
    if (!r->st) r->st = ts_json_string(r->o, key, WHAT, true, &v);
    if (r->st) return 0;
    for (int i = 0; i < 64 && strcmp(name(i), "?") != 0; i++)
        if (strcmp(name(i), v) == 0) return i;
    r->st = ts_fail(TS_ERR_FORMAT, "config: \"%s\" is \"%.60s\", which this tscope does not know", key, v);
    return 0;
}

static const char *arch_name(int i) { return ts_model_arch_name((ts_arch)i); }
static const char *norm_name(int i) { return ts_model_norm_name((ts_norm_place)i); }
static const char *pe_name(int i) { return ts_model_pe_name((ts_pe_kind)i); }
static const char *act_name(int i) { return ts_model_activation_name((ts_activation)i); }
static const char *head_name(int i) { return ts_model_head_name((ts_head_kind)i); }
static const char *input_name(int i) { return ts_model_input_name((ts_input_kind)i); }
static const char *pe_variant_name(int i) { return ts_model_pe_variant_name((ts_pe_variant)i); }
static const char *mask_name(int i) { return ts_model_mask_name((ts_mask_kind)i); }

static const char *norm_kind_name(int i) { return ts_model_norm_kind_name((ts_norm_kind)i); }
static const char *rope_style_name(int i) { return ts_model_rope_style_name((ts_rope_style)i); }

/* Today's block choices: all present (add_modern wrote them) or all absent. */
static void read_modern(reader *r, ts_model_config *c) {
    if (r->st || !ts_json_has(r->o, "norm_kind")) return;
    c->norm_kind = (ts_norm_kind)word_of(r, "norm_kind", norm_kind_name);
    c->kv_heads = int_of(r, "kv_heads");
    c->head_dim = int_of(r, "head_dim");
    c->split_qkv = bool_of(r, "split_qkv");
    c->no_qkv_bias = bool_of(r, "no_qkv_bias");
    c->no_out_bias = bool_of(r, "no_out_bias");
    c->no_ffn_bias = bool_of(r, "no_ffn_bias");
    c->gated_ffn = bool_of(r, "gated_ffn");
    c->parallel_residual = bool_of(r, "parallel_residual");
    c->rope_style = (ts_rope_style)word_of(r, "rope_style", rope_style_name);
    c->rotary_pct = float_of(r, "rotary_pct");
    c->rope_theta = float_of(r, "rope_theta");
}

/* The arithmetic a config declares beside its sizes and settings: the
 * variants, the LayerNorm's formula and the fill of a hidden score. Each key
 * is optional (absent: the standard arithmetic); a present one is applied or
 * refused, never passed over: model_meta.c reads the same keys from a
 * checkpoint's __metadata__ config. */
ts_status ts_model_config_read_quirks(const cJSON *o, const char *what, ts_model_config *c) {
    const char *variants = NULL, *formula = NULL;
    TS_TRY(ts_json_string(o, "variant", what, false, &variants));
    if (variants && ts_model_variant_parse(variants, &c->variants))
        return ts_fail(TS_ERR_FORMAT, "%s: \"variant\" is \"%.60s\", not a list of variants", what, variants);
    TS_TRY(ts_json_string(o, "norm_formula", what, false, &formula));
    if (formula && strcmp(formula, "std+eps") != 0 && strcmp(formula, "standard") != 0)
        return ts_fail(TS_ERR_FORMAT, "%s: \"norm_formula\" is \"%.60s\", not standard or std+eps", what, formula);
    if (formula) c->ln_std_eps = strcmp(formula, "std+eps") == 0;
    double fill = 0.0; /* absent: -inf */
    TS_TRY(ts_json_number(o, "mask_fill", what, false, &fill));
    if (ts_json_has(o, "mask_fill") && !(fill < 0 && fill >= -FLT_MAX && (float)fill != 0.0f))
        return ts_fail(TS_ERR_FORMAT, "%s: \"mask_fill\" is %g, not a negative number", what, fill);
    if (ts_json_has(o, "mask_fill")) c->mask_fill = (float)fill;
    return TS_OK;
}

ts_status ts_model_config_from_json(const char *json, ts_model_config *c) {
    memset(c, 0, sizeof *c);
    cJSON *o = NULL;
    TS_TRY(ts_json_parse(json, strlen(json), WHAT, &o));
    reader r = {o, TS_OK};
    const char *preset = "";
    r.st = ts_json_string(o, "preset", WHAT, true, &preset);
    snprintf(c->preset, sizeof c->preset, "%s", preset);
    c->arch = (ts_arch)word_of(&r, "arch", arch_name);
    c->d_model = int_of(&r, "d_model");
    c->heads = int_of(&r, "heads");
    c->ffn = int_of(&r, "ffn");
    c->layers = int_of(&r, "layers");
    c->dec_layers = int_of(&r, "dec_layers");
    c->vocab = int_of(&r, "vocab");
    c->seq = int_of(&r, "seq");
    c->tgt_seq = int_of(&r, "tgt_seq");
    c->batch = int_of(&r, "batch");
    c->in_dim = int_of(&r, "in_dim");
    c->max_pos = int_of(&r, "max_pos");
    c->n_labels = int_of(&r, "n_labels");
    c->dropout = float_of(&r, "dropout");
    c->eps = float_of(&r, "eps");
    c->embed_eps = float_of(&r, "embed_eps");
    c->norm = (ts_norm_place)word_of(&r, "norm", norm_name);
    c->pe = (ts_pe_kind)word_of(&r, "pe", pe_name);
    c->activation = (ts_activation)word_of(&r, "activation", act_name);
    c->head = (ts_head_kind)word_of(&r, "head", head_name);
    c->input = (ts_input_kind)word_of(&r, "input", input_name);
    c->final_norm = bool_of(&r, "final_norm");
    c->causal = bool_of(&r, "causal");
    c->scale_embed = bool_of(&r, "scale_embed");
    c->tie_embed = bool_of(&r, "tie_embed");
    const char *variants = NULL; /* required here; read with the other quirks below */
    if (!r.st) r.st = ts_json_string(o, "variant", WHAT, true, &variants);
    c->pe_variant = (ts_pe_variant)word_of(&r, "pe_variant", pe_variant_name);
    c->mask = (ts_mask_kind)word_of(&r, "mask", mask_name);
    int64_t seed = 0;
    if (!r.st) r.st = ts_json_int(o, "seed", WHAT, true, 0, INT64_MAX, &seed);
    c->seed = (uint64_t)seed;
    read_modern(&r, c);
    if (!r.st && ts_json_has(o, "type_vocab")) { /* BERT's parts: both present, or both absent */
        c->type_vocab = int_of(&r, "type_vocab");
        c->mlm_head = bool_of(&r, "mlm_head");
    }
    if (!r.st) r.st = ts_model_config_read_quirks(o, WHAT, c);
    cJSON_Delete(o);
    if (!r.st) r.st = ts_model_config_check(c);
    return r.st;
}
