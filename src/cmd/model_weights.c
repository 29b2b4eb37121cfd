/* model_weights: a config from the weights, the preset and the flags (model_weights.h). */
#include "model_weights.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The sizes a file decides and a flag or preset may also give. */
typedef struct size_row {
    int flag;             /* model_flag_id */
    const char *name;     /* "--d-model" */
    ts_weights_fact fact; /* its evidence in the file */
    const char *what;     /* "d_model %d" */
    bool blocks;          /* only a model with layers has it */
} size_row;

static const size_row sizes[] = {
    {F_D_MODEL, "--d-model", TS_FACT_D_MODEL, "d_model %d", false},
    {F_FFN, "--ffn", TS_FACT_FFN, "ffn %d", true},
    {F_LAYERS, "--layers", TS_FACT_LAYERS, "%d encoder layers", true},
    {F_DEC_LAYERS, "--dec-layers", TS_FACT_DEC_LAYERS, "%d decoder layers", true},
    {F_VOCAB, "--vocab", TS_FACT_VOCAB, "a vocabulary of %d", false},
    {F_FINAL_NORM, "--final-norm", TS_FACT_FINAL_NORM, "final LayerNorm", true},
    {F_HEAD, "--head", TS_FACT_HEAD, "output head", false},
};
#define N_SIZES (sizeof sizes / sizeof sizes[0])

static int size_value(const ts_model_config *c, int flag) {
    switch (flag) {
    case F_D_MODEL: return c->d_model;
    case F_FFN: return c->ffn;
    case F_LAYERS: return c->layers;
    case F_DEC_LAYERS: return c->arch == TS_ARCH_ENCODER_DECODER ? c->dec_layers : 0;
    case F_VOCAB: return c->input == TS_INPUT_TOKENS || c->head == TS_HEAD_LM ? c->vocab : 0;
    case F_FINAL_NORM: return c->final_norm;
    case F_HEAD: return (int)c->head;
    }
    return 0;
}

/* A size as words: "d_model 16", "a final LayerNorm", "no output head". */
static const char *size_text(char *buf, size_t n, int flag, int v, const char *what) {
    if (flag == F_FINAL_NORM) return v ? "a final LayerNorm" : "no final LayerNorm";
    if (flag == F_HEAD)
        return v == TS_HEAD_LM ? "a vocabulary head (lm)" : v == TS_HEAD_CLS ? "a classifier head" : "no output head";
    snprintf(buf, n, what, v);
    return buf;
}

/* "--d-model 32 disagrees with W: it has d_model 16 (why)", "preset copy has d_model 512, but W has d_model 16 (why)" */
static ts_status size_clash(const char *preset, const model_flags *mf, const size_row *r, int mine, int theirs,
                            const ts_weights_info *w, const char *path) {
    char a[64], b[64], flag[96];
    const char *why = w->why[r->fact][0] ? w->why[r->fact] : "its tensors say so";
    const char *file = size_text(b, sizeof b, r->flag, theirs, r->what);
    if (preset)
        return ts_fail(TS_ERR_ARG, "preset %s has %s, but %s has %s (%s)", preset,
                       size_text(a, sizeof a, r->flag, mine, r->what), path, file, why);
    if (r->flag == F_FINAL_NORM) snprintf(flag, sizeof flag, "%s", r->name);
    else if (r->flag == F_HEAD) snprintf(flag, sizeof flag, "%s %s", r->name, mf->head);
    else snprintf(flag, sizeof flag, "%s %d", r->name, mine);
    return ts_fail(TS_ERR_ARG, "%s disagrees with %s: it has %s (%s)", flag, path, file, why);
}

static const int setting_flag_ids[TS_SETTING_COUNT] = {F_HEADS, F_NORM, F_ACTIVATION, F_PE, F_EPS, F_PE_VARIANT};

/* A preset given with --load: its architecture must be the file's; it
 * supplies the settings the file does not fix, and the input. */
static ts_status with_preset(const model_flags *mf, const ts_weights_info *w, const char *path, ts_model_config *c,
                             bool known[TS_SETTING_COUNT]) {
    ts_model_config p;
    ts_status st = ts_model_config_preset(&p, mf->preset);
    if (st) return st;
    if (p.arch != c->arch)
        return ts_fail(TS_ERR_ARG, "preset %s is %s; %s holds %s (%s)", mf->preset, ts_model_arch_name(p.arch), path,
                       ts_model_arch_name(c->arch), w->why[TS_FACT_ARCH]);
    for (size_t i = 0; i < N_SIZES; i++) {
        const size_row *r = &sizes[i];
        if (r->blocks && c->arch == TS_ARCH_ATTENTION) continue;
        if (r->flag == F_VOCAB && p.vocab == 0) continue; /* tiny: as many as the text needs */
        int mine = size_value(&p, r->flag), theirs = size_value(c, r->flag);
        if (mine != theirs) return size_clash(mf->preset, mf, r, mine, theirs, w, path);
    }
    if (p.input != c->input)
        return ts_fail(TS_ERR_ARG, "preset %s reads %s; %s reads %s (%s)", mf->preset,
                       p.input == TS_INPUT_TOKENS ? "token ids" : "vectors", path,
                       c->input == TS_INPUT_TOKENS ? "token ids" : "vectors", w->why[TS_FACT_INPUT]);
    for (int s = 0; s < TS_SETTING_COUNT; s++) {
        ts_setting_source src = w->source[s];
        if (src == TS_SOURCE_UNUSED) continue;
        if (src == TS_SOURCE_META || src == TS_SOURCE_SHAPES) {
            if (!ts_model_setting_same(&p, c, (ts_model_setting)s)) {
                char a[32], why[400];
                ts_weights_fixed_by(why, sizeof why, w, (ts_model_setting)s, path);
                return ts_fail(TS_ERR_ARG, "preset %s has %s %s, but %s", mf->preset, ts_model_setting_key(s),
                               ts_model_setting_text(a, sizeof a, &p, (ts_model_setting)s), why);
            }
        } else {
            ts_model_setting_copy(c, &p, (ts_model_setting)s);
            known[s] = true;
        }
    }
    if (!w->scale_known) c->scale_embed = p.scale_embed;
    if (w->source[TS_SETTING_EPS] != TS_SOURCE_META) c->embed_eps = p.embed_eps;
    c->max_pos = c->max_pos ? c->max_pos : p.max_pos;
    snprintf(c->preset, sizeof c->preset, "%s", mf->preset);
    c->batch = p.batch, c->seq = p.seq, c->tgt_seq = p.tgt_seq, c->text = p.text, c->seed = p.seed;
    c->dropout = p.dropout;
    return TS_OK;
}

/* The flags over the base: a size or a fixed setting that disagrees is an
 * error; the others take the flag's value. */
static ts_status with_flags(const model_flags *mf, const ts_weights_info *w, const char *path, ts_model_config *c,
                            bool known[TS_SETTING_COUNT]) {
    ts_model_config f = *c;
    ts_status st = model_flags_apply(mf, &f);
    if (st) return st;
    for (size_t i = 0; i < N_SIZES; i++) {
        const size_row *r = &sizes[i];
        if (!mf->seen[r->flag] || (r->blocks && c->arch == TS_ARCH_ATTENTION)) continue;
        if (r->flag == F_VOCAB && c->input != TS_INPUT_TOKENS && c->head != TS_HEAD_LM) continue; /* unused: said later */
        int mine = size_value(&f, r->flag), theirs = size_value(c, r->flag);
        if (mine != theirs) return size_clash(NULL, mf, r, mine, theirs, w, path);
    }
    for (int s = 0; s < TS_SETTING_COUNT; s++) {
        if (!mf->seen[setting_flag_ids[s]]) continue;
        TS_TRY(ts_weights_check_setting(w, path, &f, (ts_model_setting)s));
        known[s] = true;
    }
    /* everything else the flags say: seed, dropout, masks, variants, input sizes */
    ts_model_config keep = *c;
    *c = f;
    c->arch = keep.arch, c->layers = keep.layers, c->dec_layers = keep.dec_layers, c->head = keep.head;
    c->tie_embed = keep.tie_embed, c->final_norm = keep.final_norm, c->d_model = keep.d_model, c->ffn = keep.ffn;
    if (c->input == TS_INPUT_TOKENS || c->head == TS_HEAD_LM) c->vocab = keep.vocab;
    if (!w->scale_known && !mf->seen[F_PRESET]) c->scale_embed = c->input == TS_INPUT_TOKENS && c->pe == TS_PE_SINUSOIDAL;
    return TS_OK;
}

ts_status model_weights_config(const model_flags *mf, const ts_weights_info *w, const char *path,
                               ts_model_config *cfg) {
    /* the stacks are the file's: --arch may only say what they are */
    if (mf->seen[F_ARCH] && strcmp(mf->arch, ts_model_arch_name(w->cfg.arch)) != 0)
        return ts_fail(TS_ERR_ARG, "--arch %s disagrees with %s: its tensors are %s's (%s)", mf->arch, path,
                       ts_model_arch_name(w->cfg.arch), w->why[TS_FACT_ARCH]);
    ts_model_config tiny;
    ts_status st = ts_model_config_preset(&tiny, "tiny");
    if (st) return st;
    *cfg = w->cfg;
    /* the input, as tscope run does with no preset: tiny's sentence (token
     * models) or tiny's sizes of random vectors */
    cfg->batch = tiny.batch, cfg->seq = tiny.seq, cfg->tgt_seq = tiny.tgt_seq, cfg->seed = tiny.seed;
    cfg->text = cfg->input == TS_INPUT_TOKENS ? tiny.text : NULL;
    cfg->preset[0] = '\0';
    bool known[TS_SETTING_COUNT];
    for (int s = 0; s < TS_SETTING_COUNT; s++) known[s] = w->source[s] != TS_SOURCE_NONE;
    if (mf->seen[F_PRESET] && (st = with_preset(mf, w, path, cfg, known))) return st;
    if ((st = with_flags(mf, w, path, cfg, known))) return st;
    /* nor whether an encoder's self-attention is causal (a language model's is):
     * asked with the rest, so that no flag is found missing one at a time */
    bool ask_mask = cfg->arch == TS_ARCH_ENCODER && !mf->seen[F_MASK];
    return ts_weights_settings_complete(w, path, known, cfg, mf->seen[F_HEADS], ask_mask);
}

void model_weights_describe(const ts_weights_info *w, const char *path, char *buf, size_t size) {
    size_t at = (size_t)snprintf(buf, size, "%s: %s's state_dict%s%s%s, %d tensors", path, w->layout_name,
                                 w->prefix[0] ? " under '" : "", w->prefix, w->prefix[0] ? "'" : "", w->n_tensors);
    if (at < size && w->codebase != TS_CODEBASE_NONE)
        snprintf(buf + at, size - at, "; names recognised as %s", ts_codebase_name(w->codebase));
}

/* One source: ", eps default: 1e-05 (PyTorch's)" appended. */
static void add_source(char *buf, size_t size, const char *key, const char *fmt, const char *what) {
    size_t len = strlen(buf);
    if (len >= size) return;
    len += (size_t)snprintf(buf + len, size - len, "%s%s ", len ? ", " : "", key);
    if (len < size) snprintf(buf + len, size - len, fmt, what);
}

/* Where a choice outside TS_SETTING_* (the LayerNorm's formula, the mask fill)
 * came from: its flag, the recognised code, the file's __metadata__, or the default. */
static void add_choice(char *buf, size_t size, const char *key, bool flag, const char *flag_name, bool not_default,
                       const ts_weights_info *w, const char *value) {
    if (flag) add_source(buf, size, key, "from %s", flag_name);
    else if (not_default && w->codebase != TS_CODEBASE_NONE) add_source(buf, size, key, "from %s", ts_codebase_name(w->codebase));
    else if (not_default) add_source(buf, size, key, "from %s", "its __metadata__");
    else add_source(buf, size, key, "default: %s", value);
}

void model_weights_sources(const ts_weights_info *w, const model_flags *mf, const ts_model_config *cfg, char *buf,
                           size_t size) {
    buf[0] = '\0';
    char v[48], what[96];
    for (int s = 0; s < TS_SETTING_COUNT; s++) {
        ts_setting_source src = w->source[s];
        const char *key = ts_model_setting_key(s);
        bool flag = mf->seen[setting_flag_ids[s]];
        const char *value = ts_model_setting_text(v, sizeof v, cfg, (ts_model_setting)s);
        if (src == TS_SOURCE_UNUSED || (s == TS_SETTING_PE_VARIANT && src == TS_SOURCE_DEFAULT && !flag)) continue;
        if (src == TS_SOURCE_META) add_source(buf, size, key, "from %s", "its __metadata__");
        else if (src == TS_SOURCE_SHAPES) add_source(buf, size, key, "from %s", "its tensors (a learned position table)");
        else if (flag) add_source(buf, size, key, "from %s", ts_model_setting_flag(s));
        else if (mf->seen[F_PRESET]) {
            snprintf(what, sizeof what, "--preset %s", mf->preset);
            add_source(buf, size, key, "from %s", what);
        } else if (src == TS_SOURCE_CODE) add_source(buf, size, key, "from %s", ts_codebase_name(w->codebase));
        else if (src == TS_SOURCE_DEFAULT) {
            snprintf(what, sizeof what, "%s%s", value,
                     s == TS_SETTING_EPS  ? " (PyTorch's)"
                     : s == TS_SETTING_PE ? " (as nn.Transformer: the caller embeds)"
                                          : "");
            add_source(buf, size, key, "default: %s", what);
        }
    }
    if (cfg->arch == TS_ARCH_ATTENTION || ts_model_is_modern(cfg) || ts_model_is_bert(cfg)) return;
    add_choice(buf, size, "norm formula", mf->seen[F_NORM_FORMULA], "--norm-formula", w->cfg.ln_std_eps, w,
               "standard");
    ts_model_mask_fill_text(v, sizeof v, cfg);
    add_choice(buf, size, "mask fill", mf->seen[F_MASK_FILL], "--mask-fill", w->cfg.mask_fill != 0.0f, w, v);
    if (w->codebase == TS_CODEBASE_ANNOTATED && cfg->scale_embed && !mf->seen[F_PE])
        add_source(buf, size, "embeddings x sqrt(d_model)", "from %s", ts_codebase_name(w->codebase));
}
