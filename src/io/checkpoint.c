/* checkpoint: a language model's checkpoint read back without flags (io.h,
 * "checkpoint"). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tscope/io.h"

/* The last message again, with the file's name before it. */
static ts_status named(ts_status st, const char *path) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ts_last_error());
    return ts_fail(st, "%s: %s", path, msg);
}

const char *ts_lm_tokenizer_files(const char *path) {
    return ts_hf_is(path) ? "tokenizer.json, tokenizer.model or vocab.txt" : "meta.pkl, encoder.json or vocab.json";
}

bool ts_lm_checkpoint_is(const char *path) {
    if (ts_hf_is(path) || ts_gpt2_is(path)) return true;
    ts_safetensors f;
    if (ts_safetensors_open(&f, path)) return false;
    const char *task = ts_safetensors_meta(&f, "task");
    bool lm = task && strcmp(task, "lm") == 0;
    ts_safetensors_close(&f);
    return lm;
}

/* The whole of a small file (at most `most` bytes), malloc'd. */
static ts_status slurp(const char *path, size_t most, unsigned char **out, size_t *size) {
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return ts_fail(TS_ERR_IO, "%s is %s, not a file", path, S_ISDIR(sb.st_mode) ? "a folder" : "not a regular file");
    FILE *fp = fopen(path, "rb");
    if (!fp) return ts_fail(TS_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    unsigned char *buf = malloc(most);
    size_t n = buf ? fread(buf, 1, most, fp) : 0;
    bool more = buf && fgetc(fp) != EOF, failed = ferror(fp) != 0;
    fclose(fp);
    if (!buf) return ts_fail(TS_ERR_NOMEM, "%s: out of memory", path);
    if (failed) {
        free(buf);
        return ts_fail(TS_ERR_IO, "cannot read %s", path);
    }
    if (more) {
        free(buf);
        return ts_fail(TS_ERR_FORMAT, "%s is larger than %zu bytes", path, most);
    }
    *out = buf, *size = n;
    return TS_OK;
}

/* nanoGPT's character vocabulary: meta.pkl, a pickle of {"vocab_size": V,
 * "itos": {id: character}, "stoi": {...}}, as its data folders write it. */
static ts_status meta_pkl_tok(const char *file, int vocab, ts_lmtok *tok) {
    unsigned char *bytes = NULL;
    size_t n = 0;
    TS_TRY(slurp(file, 64u << 20, &bytes, &n));
    ts_pickle p;
    ts_status st = ts_pickle_parse(&p, bytes, n, file);
    free(bytes);
    if (st) return st;
    const ts_pk *itos = ts_pk_get(p.root, "itos");
    const ts_pk **piece = NULL;
    if (!itos || itos->kind != TS_PK_DICT)
        st = ts_fail(TS_ERR_FORMAT, "%s has no itos dict (id to character)", file);
    else if (itos->n / 2 != vocab)
        st = ts_fail(TS_ERR_FORMAT, "%s has %lld characters, the model %d tokens", file, (long long)(itos->n / 2),
                     vocab);
    else if (!(piece = calloc((size_t)vocab, sizeof *piece)))
        st = ts_fail(TS_ERR_NOMEM, "%s: out of memory", file);
    for (int64_t i = 0; !st && i + 1 < itos->n; i += 2) {
        const ts_pk *k = itos->items[i], *v = itos->items[i + 1];
        if (k->kind != TS_PK_INT || k->i < 0 || k->i >= vocab || piece[k->i] || v->kind != TS_PK_STR)
            st = ts_fail(TS_ERR_FORMAT, "%s: itos is not one string for each id 0..%d", file, vocab - 1);
        else
            piece[k->i] = v;
    }
    cJSON *o = st ? NULL : cJSON_CreateObject();
    cJSON *a = o ? cJSON_AddArrayToObject(o, "tokens") : NULL;
    if (o) cJSON_AddStringToObject(o, "kind", "char");
    for (int i = 0; a && i < vocab; i++) cJSON_AddItemToArray(a, cJSON_CreateString(piece[i]->s));
    char *json = o ? cJSON_PrintUnformatted(o) : NULL;
    if (!st && !json) st = ts_fail(TS_ERR_NOMEM, "%s: out of memory", file);
    if (!st && (st = ts_lmtok_from_json(tok, json))) st = named(st, file);
    free(json);
    cJSON_Delete(o);
    free(piece);
    ts_pickle_free(&p);
    return st;
}

/* GPT-2's files: the config from the shapes and config.json (or nanoGPT's
 * model_args). The tokenizer: nanoGPT's meta.pkl beside the weights, else the
 * BPE vocabulary beside them, else the shipped GPT-2 BPE when the sizes agree
 * (or the model's vocabulary is GPT-2's padded, tok->count < cfg->vocab);
 * else none (tok->count 0: the model reads ids only). */
static ts_status gpt2_read(const char *path, const ts_load_options *o, ts_model_config *cfg, ts_lmtok *tok) {
    ts_model_config mine;
    ts_status st = ts_gpt2_config(path, o, cfg ? cfg : &mine);
    if (st || !tok) return st;
    memset(tok, 0, sizeof *tok);
    int vocab = (cfg ? cfg : &mine)->vocab;
    char dir[4096], meta[4096 + 16];
    bool beside = ts_gpt2_vocab_dir(path, dir, sizeof dir);
    snprintf(meta, sizeof meta, "%s/meta.pkl", dir);
    FILE *fp = fopen(meta, "rb");
    if (fp) {
        fclose(fp);
        return meta_pkl_tok(meta, vocab, tok);
    }
    /* GPT-2's own BPE, also under a vocabulary padded past its 50257 tokens (nanoGPT rounds it up to
     * 50304): the BPE never writes the padding ids */
    bool padded = !beside && vocab > 50257 && vocab < 50257 + 128;
    if (!beside) {
        if ((vocab != 50257 && !padded) || ts_bpe_default_dir(dir, sizeof dir)) return TS_OK; /* ids only */
    }
    st = ts_lmtok_build_bpe(tok, dir);
    if (!st && tok->count != vocab && !(padded && tok->count == 50257)) {
        st = ts_fail(TS_ERR_FORMAT, "%s: the model has %d tokens, the BPE of %s %d", path, vocab, dir, (int)tok->count);
        ts_lmtok_free(tok);
    }
    return st;
}

ts_status ts_lm_checkpoint_load(ts_model *m, const char *path, const ts_load_options *o) {
    if (ts_hf_is(path)) return ts_hf_load(m, path);
    return ts_gpt2_is(path) ? ts_gpt2_load(m, path, o) : ts_model_load_safetensors(m, path, NULL);
}

/* A Hugging Face folder: its config.json, and its tokenizer when it has one
 * (tokenizer.json, tokenizer.model, vocab.txt); without one, ids only. */
static ts_status hf_read(const char *path, ts_model_config *cfg, ts_lmtok *tok) {
    ts_model_config mine, *c = cfg ? cfg : &mine;
    TS_TRY(ts_hf_config(path, c));
    if (!tok) return TS_OK;
    memset(tok, 0, sizeof *tok);
    static const char *const files[] = {"tokenizer.json", "tokenizer.model", "vocab.txt"};
    bool has = false;
    for (size_t i = 0; i < sizeof files / sizeof files[0] && !has; i++) {
        char file[4096 + 32];
        snprintf(file, sizeof file, "%s/%s", path, files[i]);
        has = access(file, F_OK) == 0;
    }
    if (!has) return TS_OK;
    ts_status st = ts_lmtok_open_hf(tok, path);
    if (st) return named(st, path);
    if (tok->count > c->vocab) { /* a model's table may be padded past its tokenizer, never short of it */
        st = ts_fail(TS_ERR_FORMAT, "%s: the tokenizer has %d tokens, the model's table %d", path, (int)tok->count,
                     c->vocab);
        ts_lmtok_free(tok);
    }
    return st;
}

ts_status ts_lm_checkpoint_read(const char *path, const ts_load_options *o, ts_model_config *cfg, ts_lmtok *tok) {
    if (ts_hf_is(path) && o && o->layout)
        return ts_fail(TS_ERR_ARG, "--layout %s: %s is a Hugging Face folder whose config.json says how its weights "
                                   "are laid out; --layout is for GPT-2's and nanoGPT's files", o->layout, path);
    if (ts_hf_is(path)) return hf_read(path, cfg, tok);
    if (ts_gpt2_is(path)) return gpt2_read(path, o, cfg, tok);
    ts_safetensors f;
    ts_status st = ts_safetensors_open(&f, path);
    if (st) return st;
    const char *config = ts_safetensors_meta(&f, "config"), *tokenizer = ts_safetensors_meta(&f, "tokenizer");
    if (!config || !tokenizer) {
        st = ts_fail(TS_ERR_FORMAT, "%s has no \"%s\" in its metadata: it is not a language model saved by tscope "
                                    "train --task lm",
                     path, config ? "tokenizer" : "config");
    }
    if (!st && cfg && (st = ts_model_config_from_json(config, cfg))) st = named(st, path);
    if (!st && tok && (st = ts_lmtok_from_json(tok, tokenizer))) st = named(st, path);
    if (!st && cfg && tok && cfg->vocab != tok->count) {
        st = ts_fail(TS_ERR_FORMAT, "%s: the model has %d tokens, its tokenizer %d", path, cfg->vocab, (int)tok->count);
        ts_lmtok_free(tok);
    }
    ts_safetensors_close(&f);
    return st;
}

/* ---- a run's training state ---------------------------------------------------------- */

ts_status ts_optim_state_save(const char *path, const ts_optim *opt, int n_meta, const char *const *meta) {
    const char **all = calloc((size_t)(2 * n_meta + 2), sizeof *all);
    if (!all) return ts_fail(TS_ERR_NOMEM, "out of memory saving %s", path);
    char steps[32];
    snprintf(steps, sizeof steps, "%lld", (long long)opt->steps);
    all[0] = "optim_steps", all[1] = steps;
    for (int i = 0; i < 2 * n_meta; i++) all[2 + i] = meta[i];
    ts_tensor t[2];
    int64_t n = opt->n;
    ts_status st = ts_tensor_view(&t[0], opt->m, 1, &n);
    if (!st) st = ts_tensor_view(&t[1], opt->v, 1, &n);
    const char *names[2] = {"optim.m", "optim.v"};
    if (!st) st = ts_safetensors_write(path, 2, names, t, n_meta + 1, all);
    free(all);
    return st;
}

ts_status ts_optim_state_load(ts_safetensors *f, ts_optim *opt) {
    const char *steps = ts_safetensors_meta(f, "optim_steps");
    int64_t k = -1;
    if (!ts_text_int(steps, 0, INT64_MAX / 2, &k))
        return ts_fail(TS_ERR_FORMAT, "%s: \"optim_steps\" is %s%.40s%s, not a step count: not a training state "
                                      "written by tscope train",
                       f->path, steps ? "\"" : "", steps ? steps : "missing", steps ? "\"" : "");
    const char *names[2] = {"optim.m", "optim.v"};
    float *into[2] = {opt->m, opt->v};
    for (int i = 0; i < 2; i++) {
        ts_tensor t;
        TS_TRY(ts_safetensors_get(f, names[i], &t));
        if (t.rank != 1 || t.shape[0] != opt->n)
            return ts_fail(TS_ERR_SHAPE, "%s: %s has %lld values; the model has %lld parameters", f->path, names[i],
                           (long long)ts_tensor_numel(&t), (long long)opt->n);
        for (int64_t j = 0; j < opt->n; j++) /* Adam's moments: finite, the second never negative */
            if (!isfinite(t.data[j]) || (i == 1 && t.data[j] < 0))
                return ts_fail(TS_ERR_FORMAT, "%s: %s[%lld] is %g, not a moment Adam can have (finite%s): the state is "
                                              "damaged", f->path, names[i], (long long)j, (double)t.data[j],
                               i == 1 ? ", 0 or more" : "");
        memcpy(into[i], t.data, sizeof(float) * (size_t)opt->n);
    }
    opt->steps = k;
    return TS_OK;
}

ts_status ts_lm_checkpoint_open(const char *path, const ts_load_options *o, int B, int S, ts_model *m,
                                 ts_lmtok *tok) {
    ts_model_config cfg;
    memset(m, 0, sizeof *m);
    ts_status st = ts_lm_checkpoint_read(path, o, &cfg, tok);
    if (st) return st;
    bool learned = cfg.pe == TS_PE_LEARNED;
    int most = learned ? (cfg.max_pos ? cfg.max_pos : cfg.seq) : 1 << 20;
    if (S <= 0) S = learned ? most : cfg.seq;
    if (S > most) {
        ts_lmtok_free(tok);
        return ts_fail(TS_ERR_ARG, "%d tokens: %s learnt positions 0 to %d only", S, path, most - 1);
    }
    cfg.batch = B;
    cfg.seq = S;
    cfg.max_pos = learned ? most : 0;
    cfg.dropout = 0;
    st = ts_model_config_check(&cfg);
    /* a Hugging Face folder places every parameter or refuses: nothing to draw first */
    if (!st) st = ts_hf_is(path) ? ts_model_init_unset(m, &cfg) : ts_model_init(m, &cfg);
    if (!st) st = ts_lm_checkpoint_load(m, path, o);
    if (!st && o) st = ts_model_set_dtype(m, o->dtype);
    if (st) {
        ts_model_free(m);
        ts_lmtok_free(tok);
    }
    return st;
}
