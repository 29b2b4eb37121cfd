/* model_settings: the settings a state_dict leaves open (heads, norm
 * placement, activation, positions, eps), given by the caller: `tscope run
 * --load W`'s flags or Python's keywords (tscope.load(W, heads=4)). One
 * place decides what a given setting may change and what is still missing,
 * so both say the same sentence. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/io.h"

const char *ts_model_setting_text(char *buf, size_t n, const ts_model_config *c, ts_model_setting s) {
    switch (s) {
    case TS_SETTING_HEADS: snprintf(buf, n, "%d", c->heads); return buf;
    case TS_SETTING_NORM: return ts_model_norm_name(c->norm);
    case TS_SETTING_ACTIVATION: return ts_model_activation_name(c->activation);
    case TS_SETTING_PE: return ts_model_pe_name(c->pe);
    case TS_SETTING_EPS: snprintf(buf, n, "%g", (double)c->eps); return buf;
    case TS_SETTING_PE_VARIANT: return ts_model_pe_variant_name(c->pe_variant);
    case TS_SETTING_COUNT: break;
    }
    return "?";
}

bool ts_model_setting_same(const ts_model_config *a, const ts_model_config *b, ts_model_setting s) {
    switch (s) {
    case TS_SETTING_HEADS: return a->heads == b->heads;
    case TS_SETTING_NORM: return a->norm == b->norm;
    case TS_SETTING_ACTIVATION: return a->activation == b->activation;
    case TS_SETTING_PE: return a->pe == b->pe;
    case TS_SETTING_EPS: return fabsf(a->eps - b->eps) <= 1e-6f * fabsf(b->eps);
    case TS_SETTING_PE_VARIANT: return a->pe_variant == b->pe_variant;
    case TS_SETTING_COUNT: break;
    }
    return true;
}

void ts_model_setting_copy(ts_model_config *to, const ts_model_config *from, ts_model_setting s) {
    switch (s) {
    case TS_SETTING_HEADS: to->heads = from->heads; break;
    case TS_SETTING_NORM: to->norm = from->norm; break;
    case TS_SETTING_ACTIVATION: to->activation = from->activation; break;
    case TS_SETTING_PE: to->pe = from->pe; break;
    case TS_SETTING_EPS: to->eps = from->eps, to->embed_eps = from->embed_eps; break;
    case TS_SETTING_PE_VARIANT: to->pe_variant = from->pe_variant; break;
    case TS_SETTING_COUNT: break;
    }
}

void ts_weights_fixed_by(char *buf, size_t n, const ts_weights_info *w, ts_model_setting s, const char *path) {
    char v[32];
    if (w->source[s] == TS_SOURCE_SHAPES)
        snprintf(buf, n, "%s has a learned position table (%s)", path, w->why[TS_FACT_POSITIONS]);
    else
        snprintf(buf, n, "%s's __metadata__ says %s %s", path, ts_model_setting_key(s),
                 ts_model_setting_text(v, sizeof v, &w->cfg, s));
}

ts_status ts_weights_check_setting(const ts_weights_info *w, const char *path, const ts_model_config *given,
                                   ts_model_setting s) {
    ts_setting_source src = w->source[s];
    char a[32], why[400];
    if (src == TS_SOURCE_UNUSED)
        return ts_fail(TS_ERR_ARG, "%s: %s holds a lone attention (%s), with no LayerNorm, feed-forward layer or "
                                   "positions for it to change", ts_model_setting_flag(s), path, w->why[TS_FACT_ARCH]);
    if ((src == TS_SOURCE_META || src == TS_SOURCE_SHAPES) && !ts_model_setting_same(given, &w->cfg, s)) {
        ts_weights_fixed_by(why, sizeof why, w, s, path);
        return ts_fail(TS_ERR_ARG, "%s %s disagrees with the weights: %s", ts_model_setting_flag(s),
                       ts_model_setting_text(a, sizeof a, given, s), why);
    }
    if (s == TS_SETTING_PE && given->pe == TS_PE_LEARNED && !w->cfg.max_pos)
        return ts_fail(TS_ERR_ARG, "--pe learned: %s has no learned position table (no embed.positions.weight)", path);
    return TS_OK;
}

ts_status ts_weights_settings_complete(const ts_weights_info *w, const char *path, const bool known[TS_SETTING_COUNT],
                                       const ts_model_config *cfg, bool heads_given, bool ask_mask) {
    char need[256] = "", what[160] = "";
    int missing = 0;
    static const char *const words[TS_SETTING_COUNT] = {"heads", "norm placement", "activation", "positions",
                                                        "eps", "positions' formula"};
    static const char *const how[TS_SETTING_COUNT] = {"--heads N", "--norm post|pre", "--activation relu|gelu|gelu-tanh",
                                                      "--pe sinusoidal|none", "--eps X", "--pe-variant V"};
    for (int s = 0; s < TS_SETTING_COUNT; s++) {
        if (known[s]) continue;
        size_t len = strlen(need), wlen = strlen(what);
        snprintf(need + len, sizeof need - len, "%s%s", missing ? " " : "", how[s]);
        snprintf(what + wlen, sizeof what - wlen, "%s%s", missing ? ", " : "", words[s]);
        missing++;
    }
    if (missing && ask_mask) {
        size_t len = strlen(need), wlen = strlen(what);
        snprintf(need + len, sizeof need - len, " --mask causal|none");
        snprintf(what + wlen, sizeof what - wlen, ", masks");
    }
    if (missing)
        return ts_fail(TS_ERR_ARG, "%s does not say the model's %s (tensor shapes cannot, and %s): give %s "
                                   "(docs/own-model.md: where to find them in PyTorch)",
                       path, what, w->has_metadata ? "its __metadata__ does not"
                                   : w->torch_pt ? "a torch.save state_dict carries no settings"
                                                 : "it has no __metadata__", need);
    if (cfg->heads < 1 || cfg->d_model % cfg->heads != 0) {
        char divisors[160] = "";
        for (int d = 1, at = 0; d <= cfg->d_model && at < (int)sizeof divisors - 16; d++)
            if (cfg->d_model % d == 0) at += snprintf(divisors + at, sizeof divisors - (size_t)at, "%s%d", at ? ", " : "", d);
        return ts_fail(TS_ERR_SHAPE, "%s %d does not divide d_model %d of %s (%s): each head needs a whole number "
                                     "of dims; the heads the weights allow are %s",
                       heads_given ? "--heads" : "heads", cfg->heads, cfg->d_model, path, w->why[TS_FACT_D_MODEL],
                       divisors);
    }
    return TS_OK;
}

bool ts_model_setting_parse(ts_model_setting s, const char *v, ts_model_config *cfg, const char **want) {
    static const char *const wants[TS_SETTING_COUNT] = {
        "a number of heads", "post or pre", "relu, gelu or gelu-tanh", "sinusoidal, learned or none",
        "a positive number", "paper, seed001-sin-only or seed001-odd-exponent"};
    *want = (unsigned)s < TS_SETTING_COUNT ? wants[s] : "?";
    char *end = NULL;
    switch (s) {
    case TS_SETTING_HEADS: {
        int64_t h;
        if (!ts_text_int(v, 1, 1 << 12, &h)) return false;
        cfg->heads = (int)h;
        return true;
    }
    case TS_SETTING_NORM: return ts_model_norm_parse(v, "norm", &cfg->norm) == TS_OK;
    case TS_SETTING_ACTIVATION: return ts_model_activation_parse(v, "activation", &cfg->activation) == TS_OK;
    case TS_SETTING_PE: return ts_model_pe_parse(v, "pe", &cfg->pe) == TS_OK;
    case TS_SETTING_EPS: {
        double e = strtod(v, &end);
        if (end == v || *end || !(e > 0) || !isfinite(e)) return false;
        cfg->eps = (float)e;
        return true;
    }
    case TS_SETTING_PE_VARIANT: return ts_model_pe_variant_parse(v, &cfg->pe_variant) == TS_OK;
    case TS_SETTING_COUNT: break;
    }
    return false;
}
