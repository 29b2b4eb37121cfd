/* gpt2_load: GPT-2's own checkpoint layout, read as the files come (io.h,
 * "GPT-2 checkpoints").
 *
 * GPT-2's names are wte, wpe, h.{i}.ln_1, h.{i}.attn.c_attn, h.{i}.attn.c_proj,
 * h.{i}.ln_2, h.{i}.mlp.c_fc, h.{i}.mlp.c_proj, ln_f (Hugging Face's
 * GPT2LMHeadModel puts "transformer." before them and adds lm_head.weight).
 * Its linear layers are Conv1D modules, whose weight is stored (in, out), the
 * transpose of nn.Linear's; c_attn's output is q, then k, then v, the order of
 * nn.MultiheadAttention's in_proj. The buffers attn.bias (the causal mask) and
 * attn.masked_bias are not parameters and are skipped. What shapes cannot
 * tell (heads, LayerNorm eps, the activation) comes from config.json beside
 * the weights, as Hugging Face saves it.
 *
 * nanoGPT (Karpathy) uses the same names with nn.Linear layers, whose weights
 * are (out, in), and saves ckpt.pt: the state_dict under "model" beside its
 * model_args (n_layer, n_head, n_embd, block_size, bias, vocab_size), which
 * give what config.json gives for Hugging Face's files; with bias=False its
 * LayerNorms and linears have no bias (zeros here). torch.compile's wrapper
 * puts "_orig_mod." before every name. Which layout a file is in comes from
 * --layout, else from model_args (nanoGPT) or config.json (Hugging Face); it
 * is never guessed from shapes, which cannot tell a square weight's layout,
 * but the shapes that can must agree with it.
 */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tscope/io.h"

#define NAME_MAX_LEN 256
#define CONFIG_MAX (1 << 20)

/* ---- finding the files ------------------------------------------------------------ */

static bool is_dir(const char *path) {
    struct stat s;
    return stat(path, &s) == 0 && S_ISDIR(s.st_mode);
}

static bool exists(const char *path) {
    struct stat s;
    return stat(path, &s) == 0 && S_ISREG(s.st_mode);
}

/* The weights file: path itself, or the first of DIR/model.safetensors,
 * DIR/pytorch_model.bin, DIR/ckpt.pt (nanoGPT's out_dir) that exists. */
static void weights_path(const char *path, char *out, size_t size) {
    static const char *const names[] = {"model.safetensors", "pytorch_model.bin", "ckpt.pt", NULL};
    if (!is_dir(path)) {
        snprintf(out, size, "%s", path);
        return;
    }
    for (int i = 0; names[i]; i++) {
        snprintf(out, size, "%s/%s", path, names[i]);
        if (exists(out)) return;
    }
    snprintf(out, size, "%s/model.safetensors", path);
}

/* ---- the layout ------------------------------------------------------------------- */

typedef enum gpt2_layout { LAYOUT_UNSET, LAYOUT_HF, LAYOUT_NANOGPT, LAYOUT_MINGPT } gpt2_layout;

/* The layout the load options ask for (--layout), or LAYOUT_UNSET. */
static ts_status requested_layout(const ts_load_options *o, gpt2_layout *out) {
    const char *name = o ? o->layout : NULL;
    if (!name) *out = LAYOUT_UNSET;
    else if (strcmp(name, "hf") == 0) *out = LAYOUT_HF;
    else if (strcmp(name, "nanogpt") == 0) *out = LAYOUT_NANOGPT;
    else if (strcmp(name, "mingpt") == 0) *out = LAYOUT_MINGPT;
    else return ts_fail(TS_ERR_ARG, "--layout %s: hf (Conv1D weights, (in, out)), nanogpt or mingpt (nn.Linear, "
                        "(out, in))", name);
    return TS_OK;
}

/* An open GPT-2-named file: where its names start, and its layout. */
typedef struct gpt2_file {
    ts_safetensors f;
    char prefix[48];  /* before h.0...: "", "transformer.", "_orig_mod.transformer." */
    char outer[48];   /* before lm_head.weight: the prefix without "transformer." */
    bool linear;      /* nn.Linear's (out, in); false: Conv1D's (in, out) */
    const char *layout_why; /* "--layout", "model_args", "config.json" */
    ts_codebase code; /* whose code the weights run in: its GELU and eps when no config says them */
} gpt2_file;

/* The directory that holds the weights (config.json and vocabulary files). */
static void dir_of(const char *path, char *out, size_t size) {
    if (is_dir(path)) {
        snprintf(out, size, "%s", path);
        return;
    }
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(out, size, ".");
    else
        snprintf(out, size, "%.*s", (int)(slash - path), path);
}

/* "", "transformer." or torch.compile's "_orig_mod." before either: what
 * stands before h.0.attn.c_attn.weight. */
static bool prefix_of(const ts_safetensors *f, char *prefix, size_t size) {
    static const char *const prefixes[] = {"", "transformer.", "_orig_mod.transformer.", "_orig_mod.", NULL};
    for (int i = 0; prefixes[i]; i++) {
        char name[NAME_MAX_LEN];
        snprintf(name, sizeof name, "%sh.0.attn.c_attn.weight", prefixes[i]);
        if (ts_safetensors_find(f, name)) {
            snprintf(prefix, size, "%s", prefixes[i]);
            return true;
        }
    }
    return false;
}

bool ts_gpt2_is(const char *path) {
    /* a folder is read only as GPT-2's (model.safetensors, pytorch_model.bin,
     * ckpt.pt, config.json): its loader then says what is wrong with the
     * files, rather than the folder being taken for a file that is not one */
    if (is_dir(path)) return true;
    char file[4096 + 32], prefix[48];
    weights_path(path, file, sizeof file);
    ts_safetensors f;
    if (!exists(file) || ts_safetensors_open(&f, file)) return false;
    bool gpt2 = prefix_of(&f, prefix, sizeof prefix);
    ts_safetensors_close(&f);
    return gpt2;
}

bool ts_gpt2_vocab_dir(const char *path, char *dir, size_t size) {
    dir_of(path, dir, size);
    static const char *const vocab[] = {"encoder.json", "vocab.json", NULL};
    for (int i = 0; vocab[i]; i++) {
        char file[4096 + 32];
        snprintf(file, sizeof file, "%s/%s", dir, vocab[i]);
        if (exists(file)) return true;
    }
    return false;
}

/* config.json there but a folder (or a device) is said as such, not taken for missing. */
static ts_status config_is_a_file(const char *path) {
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return ts_fail(TS_ERR_FORMAT, "%s is %s, not a file", path, S_ISDIR(sb.st_mode) ? "a folder" : "not a regular file");
    return TS_OK;
}

/* c_attn's weight (D, 3D) in Conv1D's layout or (3D, D) in nn.Linear's: the
 * one weight whose shape always tells. */
static ts_status check_layout(gpt2_file *g, const char *dir, gpt2_layout requested) {
    ts_safetensors *f = &g->f;
    char name[NAME_MAX_LEN + 64];
    snprintf(name, sizeof name, "%sh.0.attn.c_attn.weight", g->prefix);
    const ts_st_entry *w = ts_safetensors_find(f, name);
    bool conv1d_shape = w->rank == 2 && w->shape[1] == 3 * w->shape[0];
    bool linear_shape = w->rank == 2 && w->shape[0] == 3 * w->shape[1];
    char cfg_json[4096 + 16];
    snprintf(cfg_json, sizeof cfg_json, "%s/config.json", dir);
    TS_TRY(config_is_a_file(cfg_json));
    if (requested != LAYOUT_UNSET) {
        g->linear = requested != LAYOUT_HF;
        g->layout_why = "--layout";
        g->code = requested == LAYOUT_NANOGPT ? TS_CODEBASE_NANOGPT
                  : requested == LAYOUT_MINGPT ? TS_CODEBASE_MINGPT
                                               : TS_CODEBASE_NONE;
        if (f->codebase == TS_CODEBASE_MINGPT_OLD && requested != LAYOUT_HF) g->code = f->codebase;
    } else if (f->codebase == TS_CODEBASE_MINGPT_OLD) {
        g->linear = true;
        g->layout_why = "its names (minGPT's older code)";
        g->code = f->codebase;
    } else if (ts_safetensors_meta(f, "torch.model_args")) {
        g->linear = true;
        g->layout_why = "its model_args (nanoGPT's ckpt.pt)";
        g->code = TS_CODEBASE_NANOGPT;
    } else if (exists(cfg_json)) {
        g->linear = false;
        g->layout_why = "config.json beside it (Hugging Face's GPT-2)";
    } else {
        return ts_fail(TS_ERR_ARG, "%s: GPT-2's names, but no config.json beside it and no model_args in it: nothing "
                       "says the heads, nor whether its weights are Conv1D's (in, out) as Hugging Face saves GPT-2 "
                       "or nn.Linear's (out, in) as nanoGPT and minGPT do (square ones cannot show it); add Hugging "
                       "Face's config.json, or give --layout hf|nanogpt|mingpt and --heads N", f->path);
    }
    if (g->linear ? !linear_shape : !conv1d_shape)
        return ts_fail(TS_ERR_SHAPE, "%s: %s is [%lld, %lld], %s, but %s says %s; if every weight is stored that way, "
                       "give --layout %s", f->path, name, (long long)w->shape[0], (long long)w->shape[1],
                       conv1d_shape ? "Conv1D's (in, out)" : linear_shape ? "nn.Linear's (out, in)" : "neither layout's",
                       g->layout_why, g->linear ? "nn.Linear's (out, in)" : "Conv1D's (in, out)",
                       g->linear ? "hf" : "nanogpt");
    return TS_OK;
}

/* Open path's weights, find their prefix and layout (o's, when it asks for
 * one; o may be NULL); nothing is left open on failure. */
static ts_status open_gpt2(const char *path, const ts_load_options *o, gpt2_file *g) {
    char file[4096 + 32], dir[4096];
    memset(g, 0, sizeof *g);
    gpt2_layout requested = LAYOUT_UNSET;
    TS_TRY(requested_layout(o, &requested));
    weights_path(path, file, sizeof file);
    dir_of(path, dir, sizeof dir);
    TS_TRY(ts_safetensors_open(&g->f, file));
    if (!prefix_of(&g->f, g->prefix, sizeof g->prefix)) {
        ts_safetensors_close(&g->f);
        return ts_fail(TS_ERR_FORMAT, "%s: not GPT-2's layout (no h.0.attn.c_attn.weight)", file);
    }
    snprintf(g->outer, sizeof g->outer, "%s", g->prefix);
    char *t = strstr(g->outer, "transformer.");
    if (t) *t = '\0';
    ts_status st = check_layout(g, dir, requested);
    if (st) ts_safetensors_close(&g->f);
    return st;
}

/* ---- the config ------------------------------------------------------------------- */

static const ts_st_entry *tensor(const ts_safetensors *f, const char *prefix, const char *name) {
    char full[NAME_MAX_LEN + 64];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    return ts_safetensors_find(f, full);
}

static ts_status missing(const ts_safetensors *f, const char *prefix, const char *name) {
    return ts_fail(TS_ERR_FORMAT, "%s: GPT-2 layout without tensor %s%s", f->path, prefix, name);
}

/* n_head, layer_norm_epsilon, activation_function from config.json; the sizes it
 * also gives must agree with the tensors'. */
static ts_status read_config_json(const char *dir, const char *weights, ts_model_config *c) {
    char path[4096 + 16];
    snprintf(path, sizeof path, "%s/config.json", dir);
    TS_TRY(config_is_a_file(path));
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return ts_fail(TS_ERR_ARG, "%s: GPT-2 weights need config.json beside them for what shapes cannot tell "
                                   "(n_head; GPT-2 small has 12): %s not found",
                       weights, path);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    if (n > CONFIG_MAX) {
        fclose(fp);
        return ts_fail(TS_ERR_FORMAT, "%s is %ld bytes; a config.json is a few hundred", path, n);
    }
    char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;
    size_t got = text ? fread(text, 1, (size_t)n, fp) : 0;
    fclose(fp);
    if (!text || got != (size_t)n || n < 0) {
        free(text);
        return ts_fail(TS_ERR_IO, "%s: cannot read it", path);
    }
    cJSON *o = NULL;
    ts_status st = ts_json_parse(text, (size_t)n, path, &o);
    free(text);
    if (st) return st;
    /* each value by its type: a fractional n_head or a quoted epsilon is the
     * file's mistake, not something to round or skip */
    int64_t heads = 0;
    double eps = c->eps;
    const char *act = NULL;
    st = ts_json_int(o, "n_head", path, true, 1, 1 << 20, &heads);
    if (!st && c->d_model % heads != 0) /* in the file's words, not --heads: no flag gave it */
        st = ts_fail(TS_ERR_FORMAT, "%s: \"n_head\": %lld does not divide the width %d of %s's tensors: each head "
                                    "needs a whole number of dimensions", path, (long long)heads, c->d_model, weights);
    if (!st) c->heads = (int)heads;
    if (!st) st = ts_json_number(o, "layer_norm_epsilon", path, false, &eps);
    if (!st && !(eps > 0 && eps < 1)) st = ts_fail(TS_ERR_FORMAT, "%s: \"layer_norm_epsilon\" is %g, not in (0, 1)", path, eps);
    if (!st) c->eps = c->embed_eps = (float)eps;
    if (!st) st = ts_json_string(o, "activation_function", path, false, &act);
    if (!st && act) {
        if (strcmp(act, "gelu_new") == 0 || strcmp(act, "gelu_pytorch_tanh") == 0 || strcmp(act, "gelu_fast") == 0)
            c->activation = TS_ACT_GELU_TANH;
        else if (strcmp(act, "gelu") == 0)
            c->activation = TS_ACT_GELU;
        else if (strcmp(act, "relu") == 0)
            c->activation = TS_ACT_RELU;
        else
            st = ts_fail(TS_ERR_UNSUPPORTED, "%s: \"activation_function\" is \"%.60s\", not one tscope has (gelu_new, "
                                             "gelu, relu)", path, act);
    }
    /* sizes config.json repeats: a disagreement means the files do not belong together */
    static const struct { const char *key; size_t at; } sizes[] = {
        {"n_embd", offsetof(ts_model_config, d_model)},
        {"n_layer", offsetof(ts_model_config, layers)},
        {"vocab_size", offsetof(ts_model_config, vocab)},
        {"n_positions", offsetof(ts_model_config, max_pos)},
    };
    for (size_t i = 0; !st && i < sizeof sizes / sizeof sizes[0]; i++) {
        int64_t v = -1;
        int mine = *(const int *)((const char *)c + sizes[i].at);
        st = ts_json_int(o, sizes[i].key, path, false, 0, INT32_MAX, &v);
        if (!st && v >= 0 && v != mine)
            st = ts_fail(TS_ERR_FORMAT, "%s says \"%s\": %lld but %s's tensors have %d", path, sizes[i].key,
                         (long long)v, weights, mine);
    }
    /* n_inner: null means 4 * n_embd, which the tensors already say */
    const cJSON *inner = cJSON_GetObjectItemCaseSensitive(o, "n_inner");
    int64_t ffn = -1;
    if (!st && inner && !cJSON_IsNull(inner)) st = ts_json_int(o, "n_inner", path, false, 1, INT32_MAX, &ffn);
    if (!st && ffn >= 0 && ffn != c->ffn)
        st = ts_fail(TS_ERR_FORMAT, "%s says \"n_inner\": %lld but %s's tensors have %d", path, (long long)ffn,
                     weights, c->ffn);
    cJSON_Delete(o);
    return st;
}

/* Sizes from the tensors: wte (V, D), wpe (P, D), the layers h.{i}, c_fc (D, F)
 * in Conv1D's layout or (F, D) in nn.Linear's. */
static ts_status sizes_from_tensors(gpt2_file *g, ts_model_config *c, bool *tied) {
    const ts_safetensors *f = &g->f;
    const char *prefix = g->prefix;
    const ts_st_entry *wte = tensor(f, prefix, "wte.weight"), *wpe = tensor(f, prefix, "wpe.weight");
    const ts_st_entry *fc = tensor(f, prefix, "h.0.mlp.c_fc.weight");
    if (!wte) return missing(f, prefix, "wte.weight");
    if (!wpe) return missing(f, prefix, "wpe.weight");
    if (!fc) return missing(f, prefix, "h.0.mlp.c_fc.weight");
    int in = g->linear ? 1 : 0; /* c_fc's input axis */
    if (wte->rank != 2 || wpe->rank != 2 || fc->rank != 2 || wpe->shape[1] != wte->shape[1] ||
        fc->shape[in] != wte->shape[1])
        return ts_fail(TS_ERR_SHAPE, "%s: wte, wpe and h.0.mlp.c_fc do not share a width (read as %s weights, as %s "
                                     "says)", f->path, g->linear ? "nn.Linear's (out, in)" : "Conv1D's (in, out)",
                       g->layout_why);
    c->vocab = (int)wte->shape[0];
    c->d_model = (int)wte->shape[1];
    c->max_pos = (int)wpe->shape[0];
    c->ffn = (int)fc->shape[1 - in];
    int layers = 0;
    for (;; layers++) {
        char name[NAME_MAX_LEN];
        snprintf(name, sizeof name, "h.%d.attn.c_attn.weight", layers);
        if (!tensor(f, prefix, name)) break;
    }
    c->layers = layers;
    const ts_st_entry *head = tensor(f, g->outer, "lm_head.weight");
    *tied = true;
    if (head) {
        if (head->rank != 2 || head->shape[0] != wte->shape[0] || head->shape[1] != wte->shape[1])
            return ts_fail(TS_ERR_SHAPE, "%s: lm_head.weight is not the shape of wte.weight [%lld, %lld]", f->path,
                           (long long)wte->shape[0], (long long)wte->shape[1]);
        /* Hugging Face and nanoGPT save the tied head as a second copy: tied when equal */
        ts_safetensors *mf = (ts_safetensors *)f;
        ts_tensor a, b;
        char wname[NAME_MAX_LEN], hname[NAME_MAX_LEN];
        snprintf(wname, sizeof wname, "%swte.weight", prefix);
        snprintf(hname, sizeof hname, "%slm_head.weight", g->outer);
        TS_TRY(ts_safetensors_get(mf, wname, &a));
        TS_TRY(ts_safetensors_get(mf, hname, &b));
        int64_t n = wte->shape[0] * wte->shape[1];
        *tied = memcmp(a.data, b.data, sizeof(float) * (size_t)n) == 0;
    }
    return TS_OK;
}

/* nanoGPT's model_args (as metadata "model_args.KEY", ts_torch_pt_open): n_head,
 * and the sizes, which must agree with the tensors'. Its LayerNorm eps is
 * 1e-5 and its activation nn.GELU's exact form. */
static ts_status read_model_args(const ts_safetensors *f, ts_model_config *c, bool *bias) {
    const char *heads = ts_safetensors_meta(f, "model_args.n_head");
    int64_t h;
    if (!heads) return ts_fail(TS_ERR_FORMAT, "%s: model_args has no n_head (the number of attention heads)", f->path);
    if (!ts_text_int(heads, 1, 1 << 16, &h))
        return ts_fail(TS_ERR_FORMAT, "%s: model_args n_head is %.40s, not a whole number from 1 to %d", f->path, heads,
                       1 << 16);
    c->heads = (int)h;
    c->eps = c->embed_eps = 1e-5f;
    c->activation = TS_ACT_GELU;
    const char *b = ts_safetensors_meta(f, "model_args.bias");
    if (b && strcmp(b, "False") != 0 && strcmp(b, "True") != 0)
        return ts_fail(TS_ERR_FORMAT, "%s: model_args bias is %.40s, not True or False", f->path, b);
    *bias = !b || strcmp(b, "False") != 0;
    static const struct { const char *key; size_t at; } sizes[] = {
        {"model_args.n_embd", offsetof(ts_model_config, d_model)},
        {"model_args.n_layer", offsetof(ts_model_config, layers)},
        {"model_args.vocab_size", offsetof(ts_model_config, vocab)},
        {"model_args.block_size", offsetof(ts_model_config, max_pos)},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const char *v = ts_safetensors_meta(f, sizes[i].key);
        int mine = *(const int *)((const char *)c + sizes[i].at);
        int64_t x;
        if (!v) continue;
        if (!ts_text_int(v, 1, INT32_MAX, &x))
            return ts_fail(TS_ERR_FORMAT, "%s: model_args %s is %.40s, not a whole number from 1 to %d", f->path,
                           sizes[i].key + 11, v, INT32_MAX);
        if (x != mine)
            return ts_fail(TS_ERR_FORMAT, "%s: model_args %s is %lld but the tensors have %d", f->path, sizes[i].key + 11,
                           (long long)x, mine);
    }
    return TS_OK;
}

/* What a state_dict with neither model_args nor config.json runs with: its
 * code's GELU and eps (nanoGPT's and minGPT's older nn.GELU is the exact form,
 * today's minGPT's NewGELU the tanh one), and the heads from --heads. */
static ts_status settings_from_code(const gpt2_file *g, const ts_load_options *o, ts_model_config *c) {
    c->eps = c->embed_eps = 1e-5f;
    c->activation = g->code == TS_CODEBASE_MINGPT ? TS_ACT_GELU_TANH : TS_ACT_GELU;
    if (!o || o->heads <= 0)
        return ts_fail(TS_ERR_ARG, "%s: a bare state_dict (%s) does not say the heads (no model_args, no "
                       "config.json beside it): give --heads N", g->f.path, ts_codebase_name(g->code));
    c->heads = o->heads;
    return TS_OK;
}

/* --heads and --activation over what the file and its code say: a flag that
 * disagrees with the file's own config is an error; the activation a code
 * implies may be changed (to see what the other form would give). */
static ts_status apply_flags(const gpt2_file *g, const ts_load_options *o, const char *said_by, ts_model_config *c) {
    if (!o) return TS_OK;
    if (o->heads > 0 && said_by && o->heads != c->heads)
        return ts_fail(TS_ERR_ARG, "--heads %d disagrees with %s: it says %d heads", o->heads, said_by, c->heads);
    if (o->heads > 0 && c->d_model % o->heads != 0)
        return ts_fail(TS_ERR_ARG, "--heads %d does not divide the width %d of %s's tensors", o->heads, c->d_model,
                       g->f.path);
    if (o->activation) {
        ts_activation a;
        TS_TRY(ts_model_activation_parse(o->activation, "--activation", &a));
        if (said_by && strcmp(said_by, "config.json") == 0 && a != c->activation) /* model_args has none */
            return ts_fail(TS_ERR_ARG, "--activation %s disagrees with %s: it says %s", o->activation, said_by,
                           ts_model_activation_name(c->activation));
        c->activation = a;
    }
    return TS_OK;
}

ts_status ts_gpt2_config(const char *path, const ts_load_options *o, ts_model_config *c) {
    char dir[4096], cfg_json[4096 + 16];
    dir_of(path, dir, sizeof dir);
    snprintf(cfg_json, sizeof cfg_json, "%s/config.json", dir);
    gpt2_file g;
    TS_TRY(open_gpt2(path, o, &g));
    ts_status st = ts_model_config_preset(c, "gpt2");
    bool tied = true, bias = true;
    const char *said_by = NULL;
    if (!st) st = sizes_from_tensors(&g, c, &tied);
    if (!st && ts_safetensors_meta(&g.f, "torch.model_args")) {
        st = read_model_args(&g.f, c, &bias);
        said_by = "its model_args";
        if (g.code == TS_CODEBASE_MINGPT) c->activation = TS_ACT_GELU_TANH; /* --layout mingpt: NewGELU */
    } else if (!st && exists(cfg_json)) {
        st = read_config_json(dir, g.f.path, c);
        said_by = "config.json";
    } else if (!st && g.code == TS_CODEBASE_NONE) {
        st = read_config_json(dir, g.f.path, c); /* --layout hf: GPT-2's settings are in config.json */
    } else if (!st) {
        st = settings_from_code(&g, o, c);
    }
    if (!st) st = apply_flags(&g, o, said_by, c);
    ts_safetensors_close(&g.f);
    if (st) return st;
    snprintf(c->preset, sizeof c->preset, "%s", "");
    c->tie_embed = tied;
    c->seq = c->max_pos;
    c->batch = 1;
    return ts_model_config_check(c);
}

/* ---- the weights ------------------------------------------------------------------ */

/* One parameter: the file's tensor, transposed when it is a Conv1D weight; a
 * bias the file lacks is zeros when the model was saved without biases. */
static ts_status load_param(ts_model *m, gpt2_file *g, const char *prefix, const char *file_name,
                            const char *model_name, bool conv1d, bool zeros_if_missing) {
    ts_safetensors *f = &g->f;
    char full[NAME_MAX_LEN + 64];
    snprintf(full, sizeof full, "%s%s", prefix, file_name);
    if (!ts_safetensors_find(f, full)) {
        if (!zeros_if_missing) return missing(f, prefix, file_name);
        int i = ts_model_find_param(m, model_name);
        if (i < 0) return ts_fail(TS_ERR_ARG, "the model has no parameter %s", model_name);
        int64_t n = 1;
        for (int d = 0; d < m->params[i].rank; d++) n *= m->params[i].shape[d];
        float *zero = calloc((size_t)n, sizeof *zero);
        if (!zero) return ts_fail(TS_ERR_NOMEM, "out of memory");
        ts_tensor t;
        ts_status st = ts_tensor_view(&t, zero, m->params[i].rank, m->params[i].shape);
        if (!st) st = ts_model_load_param(m, model_name, &t);
        free(zero);
        return st;
    }
    ts_tensor src;
    TS_TRY(ts_safetensors_get(f, full, &src));
    if (!conv1d || g->linear) return ts_model_load_param(m, model_name, &src);
    if (src.rank != 2) return ts_fail(TS_ERR_SHAPE, "%s: %s is not a matrix", f->path, full);
    /* Conv1D (in, out) is nn.Linear's (out, in) read with swapped strides: a view, no copy */
    ts_tensor t = src;
    t.shape[0] = src.shape[1];
    t.shape[1] = src.shape[0];
    t.stride[0] = src.stride[1];
    t.stride[1] = src.stride[0];
    return ts_model_load_param(m, model_name, &t);
}

/* What GPT-2 names a parameter of layer i, for each of tscope's. */
static ts_status load_layer(ts_model *m, gpt2_file *g, int i, bool bias) {
    static const struct { const char *file, *model; bool conv1d, is_bias; } map[] = {
        {"ln_1.weight", "norm1.weight", false, false},
        {"ln_1.bias", "norm1.bias", false, true},
        {"attn.c_attn.weight", "self_attn.in_proj_weight", true, false},
        {"attn.c_attn.bias", "self_attn.in_proj_bias", false, true},
        {"attn.c_proj.weight", "self_attn.out_proj.weight", true, false},
        {"attn.c_proj.bias", "self_attn.out_proj.bias", false, true},
        {"ln_2.weight", "norm2.weight", false, false},
        {"ln_2.bias", "norm2.bias", false, true},
        {"mlp.c_fc.weight", "linear1.weight", true, false},
        {"mlp.c_fc.bias", "linear1.bias", false, true},
        {"mlp.c_proj.weight", "linear2.weight", true, false},
        {"mlp.c_proj.bias", "linear2.bias", false, true},
    };
    for (size_t k = 0; k < sizeof map / sizeof map[0]; k++) {
        char file_name[NAME_MAX_LEN], model_name[NAME_MAX_LEN + 32];
        snprintf(file_name, sizeof file_name, "h.%d.%s", i, map[k].file);
        snprintf(model_name, sizeof model_name, "decoder.layers.%d.%s", i, map[k].model);
        TS_TRY(load_param(m, g, g->prefix, file_name, model_name, map[k].conv1d, map[k].is_bias && !bias));
    }
    return TS_OK;
}

/* A tensor of the file that no parameter takes: the mask buffers are
 * expected; anything else means the file is not the model we built. */
static ts_status check_no_extra(const gpt2_file *g, const ts_model_config *c) {
    const ts_safetensors *f = &g->f;
    const char *prefix = g->prefix;
    size_t pn = strlen(prefix);
    char head[NAME_MAX_LEN], list[2400] = "";
    int unplaced = 0;
    snprintf(head, sizeof head, "%slm_head.weight", g->outer);
    for (int e = 0; e < f->count; e++) {
        const char *name = f->entries[e].name;
        if (strcmp(name, head) == 0) continue;
        const char *rest = strncmp(name, prefix, pn) == 0 ? name + pn : NULL;
        int64_t layer; /* h.N.leaf: N a number of a layer the model has, never wrapped round */
        const char *leaf = rest && strncmp(rest, "h.", 2) == 0 && rest[2] >= '0' && rest[2] <= '9'
                               ? ts_text_int_prefix(rest + 2, 0, c->layers - 1, &layer)
                               : NULL;
        if (leaf && *leaf++ == '.') {
            static const char *const leaves[] = {
                "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
                "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
                "mlp.c_proj.weight", "mlp.c_proj.bias", "attn.bias", "attn.masked_bias", NULL};
            bool known = false;
            for (int k = 0; leaves[k] && !known; k++) known = strcmp(leaf, leaves[k]) == 0;
            if (known) continue;
        } else if (rest) {
            static const char *const top[] = {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias", NULL};
            bool known = false;
            for (int k = 0; top[k] && !known; k++) known = strcmp(rest, top[k]) == 0;
            if (known) continue;
        }
        size_t len = strlen(list);
        if (unplaced < 20) snprintf(list + len, sizeof list - len, "%s%.100s", unplaced ? ", " : "", name);
        unplaced++;
    }
    if (unplaced)
        return ts_fail(TS_ERR_FORMAT, "%s: %d tensor%s no place in GPT-2's layout (%d layers: wte, wpe, h.N.ln_1, "
                       "h.N.attn.c_attn, h.N.attn.c_proj, h.N.ln_2, h.N.mlp.c_fc, h.N.mlp.c_proj, ln_f, lm_head): %s%s; "
                       "rename them with --names MAP.txt", f->path, unplaced, unplaced == 1 ? " has" : "s have",
                       c->layers, list, unplaced > 20 ? ", ..." : "");
    return TS_OK;
}

ts_status ts_gpt2_load(ts_model *m, const char *path, const ts_load_options *o) {
    gpt2_file g;
    TS_TRY(open_gpt2(path, o, &g));
    const ts_model_config *c = &m->cfg;
    const char *b = ts_safetensors_meta(&g.f, "model_args.bias");
    bool bias = !b || strcmp(b, "False") != 0;
    ts_status st = check_no_extra(&g, c);
    if (!st) st = load_param(m, &g, g.prefix, "wte.weight", "embed.tokens.weight", false, false);
    if (!st) st = load_param(m, &g, g.prefix, "wpe.weight", "embed.positions.weight", false, false);
    for (int i = 0; !st && i < c->layers; i++) st = load_layer(m, &g, i, bias);
    if (!st) st = load_param(m, &g, g.prefix, "ln_f.weight", "decoder.norm.weight", false, false);
    if (!st) st = load_param(m, &g, g.prefix, "ln_f.bias", "decoder.norm.bias", false, !bias);
    if (!st && !c->tie_embed) st = load_param(m, &g, g.outer, "lm_head.weight", "generator.weight", false, false);
    ts_safetensors_close(&g.f);
    return st;
}

const char *ts_gpt2_layout_name(const char *path, const ts_load_options *o) {
    gpt2_file g;
    if (open_gpt2(path, o, &g)) return NULL;
    ts_safetensors_close(&g.f);
    if (g.code == TS_CODEBASE_MINGPT || g.code == TS_CODEBASE_MINGPT_OLD) return "mingpt";
    return g.linear ? "nanogpt" : "hf";
}

void ts_gpt2_sources(const char *path, const ts_load_options *o, char *buf, size_t size) {
    char dir[4096], cfg_json[4096 + 16];
    buf[0] = '\0';
    dir_of(path, dir, sizeof dir);
    snprintf(cfg_json, sizeof cfg_json, "%s/config.json", dir);
    gpt2_file g;
    if (open_gpt2(path, o, &g)) return;
    const char *config = ts_safetensors_meta(&g.f, "torch.model_args") ? "model_args"
                         : exists(cfg_json)                            ? "config.json"
                                                                       : NULL;
    bool recognised = g.f.codebase != TS_CODEBASE_NONE;
    ts_safetensors_close(&g.f);
    char code[64], from_config[48], heads[64], act[64], eps[64];
    snprintf(code, sizeof code, "from %s", ts_codebase_name(g.code));
    snprintf(from_config, sizeof from_config, "from its %s", config ? config : "");
    snprintf(heads, sizeof heads, "%s", config ? from_config : "from --heads");
    /* config.json says the GELU and eps; nanoGPT's model_args only the sizes, its code the rest */
    bool config_says = config && strcmp(config, "config.json") == 0;
    snprintf(act, sizeof act, "%s", o && o->activation ? "from --activation" : config_says ? from_config : code);
    snprintf(eps, sizeof eps, "%s", config_says ? from_config : code);
    snprintf(buf, size, "%s%s%sheads %s, activation %s, eps %s, layout %s", recognised ? "names " : "",
             recognised ? code : "", recognised ? ", " : "", heads, act, eps, g.layout_why);
}
