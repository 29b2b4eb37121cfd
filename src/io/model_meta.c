/* model_meta: the settings read back from a checkpoint's
 * __metadata__ (what tensor shapes cannot tell: heads, norm placement,
 * activation, positions, eps, and the arithmetic's quirks: variants, the
 * LayerNorm's formula, the fill of a hidden score).
 *
 * Two spellings are read. tscope's own: "format": "tscope" and "config": the
 * JSON object ts_model_config_json (config_json.c) writes into every
 * checkpoint and trace tscope makes. And flat keys anyone can add when
 * saving from PyTorch, safetensors.torch.save_file(sd, path, metadata=
 * {"heads": "8", "norm": "pre", "activation": "gelu"}): heads, norm (post|pre)
 * or norm_first (True|False), activation (relu|gelu), pe
 * (sinusoidal|learned|none), eps or layer_norm_eps. A value that does not
 * parse is an error naming the file and the key, never a guess.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/io.h"

/* ---- reading the settings back --------------------------------------------- */

static const char *const setting_keys[TS_SETTING_COUNT] = {"heads", "norm", "activation", "pe", "eps", "pe_variant"};
static const char *const setting_flags[TS_SETTING_COUNT] = {"--heads", "--norm", "--activation", "--pe", "--eps",
                                                             "--pe-variant"};

const char *ts_model_setting_flag(ts_model_setting s) {
    return (unsigned)s < TS_SETTING_COUNT ? setting_flags[s] : "?";
}

const char *ts_model_setting_key(ts_model_setting s) {
    return (unsigned)s < TS_SETTING_COUNT ? setting_keys[s] : "?";
}

/* A string value of the config object or the flat metadata; NULL when absent.
 * Numbers and booleans of the JSON are printed into buf. */
typedef struct meta_src {
    const ts_safetensors *f;
    const cJSON *config; /* tscope's "config", or NULL */
} meta_src;

static const char *meta_get(const meta_src *m, const char *key, char *buf, size_t size) {
    if (m->config) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(m->config, key);
        if (cJSON_IsString(v)) return v->valuestring;
        if (cJSON_IsNumber(v)) {
            snprintf(buf, size, "%.9g", v->valuedouble);
            return buf;
        }
        if (cJSON_IsBool(v)) return cJSON_IsTrue(v) ? "True" : "False";
        return NULL;
    }
    return ts_safetensors_meta(m->f, key);
}

static ts_status bad_meta(const meta_src *m, const char *key, const char *value, const char *want) {
    return ts_fail(TS_ERR_FORMAT, "%s: __metadata__ %s%s is '%s', not %s", m->f->path, m->config ? "config." : "",
                   key, value, want);
}

static ts_status read_setting(const meta_src *m, ts_model_setting s, ts_model_config *cfg, bool *found) {
    char buf[64];
    const char *key = setting_keys[s];
    const char *v = meta_get(m, key, buf, sizeof buf);
    if (!v && !m->config && s == TS_SETTING_EPS) v = meta_get(m, key = "layer_norm_eps", buf, sizeof buf);
    bool flip = false; /* norm_first True = pre */
    if (!v && !m->config && s == TS_SETTING_NORM && (v = meta_get(m, "norm_first", buf, sizeof buf))) {
        key = "norm_first";
        flip = true;
    }
    *found = v != NULL;
    if (!v) return TS_OK;
    if (m->config) { /* the JSON says its type: a number quoted, or a word as a number, is refused */
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(m->config, key);
        bool number = s == TS_SETTING_HEADS || s == TS_SETTING_EPS;
        if (number && !cJSON_IsNumber(item)) return bad_meta(m, key, v, "a JSON number");
        if (!number && !cJSON_IsString(item)) return bad_meta(m, key, v, "a JSON string");
    }
    if (flip) {
        if (strcmp(v, "True") != 0 && strcmp(v, "False") != 0 && strcmp(v, "true") != 0 && strcmp(v, "false") != 0)
            return bad_meta(m, key, v, "True or False");
        cfg->norm = v[0] == 'T' || v[0] == 't' ? TS_NORM_PRE : TS_NORM_POST;
        return TS_OK;
    }
    const char *want;
    if (!ts_model_setting_parse(s, v, cfg, &want)) return bad_meta(m, key, v, want);
    return TS_OK;
}

ts_status ts_model_meta_settings(const ts_safetensors *f, ts_model_config *cfg, bool from_meta[TS_SETTING_COUNT],
                                 bool *scale_known) {
    meta_src m = {f, NULL};
    *scale_known = false;
    cJSON *root = NULL;
    const char *format = ts_safetensors_meta(f, "format"), *config = ts_safetensors_meta(f, "config");
    if (format && strcmp(format, "tscope") == 0 && config) {
        char what[4096 + 32];
        snprintf(what, sizeof what, "%s: __metadata__ config", f->path);
        TS_TRY(ts_json_parse(config, strlen(config), what, &root));
        m.config = root;
    }
    ts_status st = TS_OK;
    for (int s = 0; s < TS_SETTING_COUNT && !st; s++) st = read_setting(&m, (ts_model_setting)s, cfg, &from_meta[s]);
    if (!st && root) { /* what tscope also records: the embedding's scale and its LayerNorm's eps */
        char what[4096 + 32];
        snprintf(what, sizeof what, "%s: __metadata__ config", f->path);
        double eps = cfg->embed_eps;
        *scale_known = ts_json_has(root, "scale_embed");
        st = ts_json_bool(root, "scale_embed", what, false, &cfg->scale_embed);
        if (!st) st = ts_json_number(root, "embed_eps", what, false, &eps);
        if (!st && ts_json_has(root, "embed_eps") && !(eps > 0)) st = ts_fail(TS_ERR_FORMAT, "%s: \"embed_eps\" is %g, not a positive number", what, eps);
        if (!st) cfg->embed_eps = (float)eps;
        if (!st) st = ts_model_config_read_quirks(root, what, cfg);
    }
    cJSON_Delete(root);
    return st;
}
