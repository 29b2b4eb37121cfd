/* model_infer: the model a checkpoint holds, read from its tensor names and
 * shapes (io.h explains the layouts).
 *
 * Three steps. A layout is chosen: the one whose rules turn the most of the
 * file's names (after the prefix) into names tscope knows. The sizes are read
 * from the tensors under tscope's names (d_model from an out_proj, ffn from a
 * linear1, the stacks' depth from the largest layer index, the vocabulary from
 * a token table or a generator, ...), each with the file's own tensor as the
 * evidence messages quote. Then the __metadata__ gives what shapes cannot
 * (model_meta.c), and what it does not give is either a documented default
 * (eps 1e-5, no positions for vectors) or a flag the user must pass.
 *
 * To read another family of checkpoints, add a row to `layouts`: its name,
 * a piece of a name that marks it (or NULL), and prefix rules from its names
 * to tscope's. The loader (model_load.c) uses the same rules, both ways.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/io.h"

typedef struct name_rule {
    const char *file;  /* a prefix of the file's names, or the whole name when exact */
    const char *model; /* what it becomes in tscope's name */
    bool exact;
} name_rule;

#define MAX_RULES 10

typedef struct layout {
    const char *name;        /* as messages call it */
    const char *needs;       /* a piece some name must contain for the layout to apply, or NULL */
    const char *unsupported; /* why tscope cannot run such a file, or NULL */
    name_rule rules[MAX_RULES];
} layout;

#define DEC_LAYER_NO_MEMORY                                                                                            \
    "a decoder without its encoder reads a memory that tscope run cannot be given; save the nn.Transformer "        \
    "that holds it"

static const layout layouts[] = {
    /* tscope's own names are nn.Transformer's, plus its embeddings and heads;
     * tscope train writes the token tables as embed.src / embed.tgt. */
    {"nn.Transformer",
     NULL,
     NULL,
     {{"encoder.", "encoder.", false},
      {"decoder.", "decoder.", false},
      {"embed.src.weight", "embed.tokens.weight", true},
      {"embed.tgt.weight", "decoder.embed.tokens.weight", true},
      {"embed.", "embed.", false},
      {"generator.", "generator.", false},
      {"classifier.", "classifier.", false},
      {"self_attn.", "self_attn.", false}}},
    {"nn.TransformerDecoder",
     "multihead_attn.",
     DEC_LAYER_NO_MEMORY,
     {{"layers.", "decoder.layers.", false}, {"norm.", "decoder.norm.", false}}},
    {"nn.TransformerEncoder",
     NULL,
     NULL,
     {{"layers.", "encoder.layers.", false}, {"norm.", "encoder.norm.", false}}},
    {"nn.TransformerDecoderLayer",
     "multihead_attn.",
     DEC_LAYER_NO_MEMORY,
     {{"self_attn.", "decoder.layers.0.self_attn.", false},
      {"multihead_attn.", "decoder.layers.0.multihead_attn.", false},
      {"linear1.", "decoder.layers.0.linear1.", false},
      {"linear2.", "decoder.layers.0.linear2.", false},
      {"norm1.", "decoder.layers.0.norm1.", false},
      {"norm2.", "decoder.layers.0.norm2.", false},
      {"norm3.", "decoder.layers.0.norm3.", false}}},
    {"nn.TransformerEncoderLayer",
     NULL,
     NULL,
     {{"self_attn.", "encoder.layers.0.self_attn.", false},
      {"linear1.", "encoder.layers.0.linear1.", false},
      {"linear2.", "encoder.layers.0.linear2.", false},
      {"norm1.", "encoder.layers.0.norm1.", false},
      {"norm2.", "encoder.layers.0.norm2.", false}}},
    {"nn.MultiheadAttention",
     NULL,
     NULL,
     {{"in_proj_weight", "self_attn.in_proj_weight", true},
      {"in_proj_bias", "self_attn.in_proj_bias", true},
      {"out_proj.", "self_attn.out_proj.", false}}},
};
#define N_LAYOUTS ((int)(sizeof layouts / sizeof layouts[0]))

/* ---- tscope's names ------------------------------------------------------------ */

static bool in_list(const char *s, const char *const *list) {
    for (; *list; list++)
        if (strcmp(s, *list) == 0) return true;
    return false;
}

static const char *const attn_leaves[] = {"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias",
                                          NULL};
static const char *const wb[] = {"weight", "bias", NULL};

/* A leaf of a layer: self_attn.*, multihead_attn.* (decoder), linear1/2.*, norm1..3.* */
static bool layer_leaf(const char *leaf, bool decoder) {
    if (strncmp(leaf, "self_attn.", 10) == 0) return in_list(leaf + 10, attn_leaves);
    if (decoder && strncmp(leaf, "multihead_attn.", 15) == 0) return in_list(leaf + 15, attn_leaves);
    static const char *const mods[] = {"linear1.", "linear2.", "norm1.", "norm2.", "norm3.", NULL};
    for (int i = 0; mods[i]; i++) {
        size_t n = strlen(mods[i]);
        if (strncmp(leaf, mods[i], n) != 0) continue;
        if (i == 4 && !decoder) return false;
        return in_list(leaf + n, wb);
    }
    return false;
}

/* Whether some model tscope builds has a parameter of this name. */
static bool known_name(const char *name) {
    static const char *const top[] = {
        "embed.tokens.weight",         "embed.positions.weight",         "embed.norm.weight",
        "embed.norm.bias",             "decoder.embed.tokens.weight",    "decoder.embed.positions.weight",
        "decoder.embed.norm.weight",   "decoder.embed.norm.bias",        "encoder.norm.weight",
        "encoder.norm.bias",           "decoder.norm.weight",            "decoder.norm.bias",
        "generator.weight",            "generator.bias",                 "classifier.weight",
        "classifier.bias",             NULL};
    if (in_list(name, top)) return true;
    if (strncmp(name, "self_attn.", 10) == 0) return in_list(name + 10, attn_leaves);
    bool dec = strncmp(name, "decoder.layers.", 15) == 0;
    if (!dec && strncmp(name, "encoder.layers.", 15) != 0) return false;
    size_t at = ts_name_layer_prefix(name);
    if (!at || ts_name_layer(name) < 0 || name[at] != '.') return false;
    return layer_leaf(name + at + 1, dec);
}

/* ---- mapping ------------------------------------------------------------------- */

static bool map_to_model(const layout *l, const char *name, char *out, size_t size) {
    for (int r = 0; r < MAX_RULES && l->rules[r].file; r++) {
        const name_rule *u = &l->rules[r];
        size_t n = strlen(u->file);
        if (u->exact ? strcmp(name, u->file) != 0 : strncmp(name, u->file, n) != 0) continue;
        int w = snprintf(out, size, "%s%s", u->model, u->exact ? "" : name + n);
        return w >= 0 && (size_t)w < size;
    }
    return false;
}

static bool map_to_file(const layout *l, const char *name, char *out, size_t size) {
    for (int r = 0; r < MAX_RULES && l->rules[r].file; r++) {
        const name_rule *u = &l->rules[r];
        size_t n = strlen(u->model);
        if (u->exact ? strcmp(name, u->model) != 0 : strncmp(name, u->model, n) != 0) continue;
        int w = snprintf(out, size, "%s%s", u->file, u->exact ? "" : name + n);
        return w >= 0 && (size_t)w < size;
    }
    return false;
}

static const char *strip(const char *name, const char *prefix) {
    size_t n = prefix ? strlen(prefix) : 0;
    return n && strncmp(name, prefix, n) == 0 ? name + n : n ? NULL : name;
}

bool ts_weights_model_name(const ts_weights_info *info, const char *file_name, char *out, size_t size) {
    if (info->layout < 0 || info->layout >= N_LAYOUTS) return false;
    const char *rest = strip(file_name, info->prefix);
    char model[TS_MODEL_NAME_MAX + 64];
    if (!rest || !map_to_model(&layouts[info->layout], rest, model, sizeof model) || !known_name(model)) return false;
    int w = snprintf(out, size, "%s", model);
    return w >= 0 && (size_t)w < size;
}

bool ts_weights_file_name(const ts_weights_info *info, const char *model_name, char *out, size_t size) {
    if (info->layout < 0 || info->layout >= N_LAYOUTS) return false;
    char rest[TS_MODEL_NAME_MAX + 64];
    if (!map_to_file(&layouts[info->layout], model_name, rest, sizeof rest)) return false;
    int w = snprintf(out, size, "%s%s", info->prefix, rest);
    return w >= 0 && (size_t)w < size;
}

/* Names of f (after prefix) that layout l turns into names tscope knows. */
static int explained(const ts_safetensors *f, const char *prefix, const layout *l) {
    if (l->needs) {
        bool any = false;
        for (int e = 0; e < f->count && !any; e++) {
            const char *rest = strip(f->entries[e].name, prefix);
            any = rest && strstr(rest, l->needs);
        }
        if (!any) return 0;
    }
    int n = 0;
    bool attention = false; /* a Transformer has one; a lone classifier.weight does not make a model */
    char model[TS_MODEL_NAME_MAX + 64];
    for (int e = 0; e < f->count; e++) {
        const char *rest = strip(f->entries[e].name, prefix);
        if (!rest || !map_to_model(l, rest, model, sizeof model) || !known_name(model)) continue;
        n++;
        attention |= strstr(model, "in_proj_weight") != NULL;
    }
    return attention ? n : 0;
}

static int best_layout(const ts_safetensors *f, const char *prefix, int *count) {
    int best = -1;
    *count = 0;
    for (int i = 0; i < N_LAYOUTS; i++) {
        int n = explained(f, prefix, &layouts[i]);
        if (n > *count) *count = n, best = i;
    }
    return best;
}

/* "nn.Transformer, nn.TransformerEncoder, ..." */
static void layout_names(char *buf, size_t size) {
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < N_LAYOUTS && at < size; i++) {
        if (layouts[i].unsupported) continue;
        at += (size_t)snprintf(buf + at, size - at, "%s%s", at ? ", " : "", layouts[i].name);
    }
}

#define MAX_CANDIDATES 64

/* Whether the dotted component ending at `dot` is a number (a layer index:
 * a wrapper's prefix never ends inside a stack). */
static bool number_before(const char *name, const char *dot) {
    const char *p = dot;
    while (p > name && p[-1] >= '0' && p[-1] <= '9') p--;
    return p < dot && (p == name || p[-1] == '.');
}

/* Names tscope reads, N for a layer's index: what an unplaced name is set beside. */
static const char *const READ_NAMES[] = {
    "embed.tokens.weight", "embed.positions.weight", "encoder.layers.N.self_attn.in_proj_weight",
    "encoder.layers.N.self_attn.in_proj_bias", "encoder.layers.N.self_attn.out_proj.weight",
    "encoder.layers.N.self_attn.out_proj.bias", "encoder.layers.N.linear1.weight", "encoder.layers.N.linear1.bias",
    "encoder.layers.N.linear2.weight", "encoder.layers.N.linear2.bias", "encoder.layers.N.norm1.weight",
    "encoder.layers.N.norm1.bias", "encoder.layers.N.norm2.weight", "encoder.layers.N.norm2.bias",
    "encoder.norm.weight", "decoder.layers.N.multihead_attn.in_proj_weight", "decoder.layers.N.norm3.weight",
    "decoder.norm.weight", "generator.weight", "generator.bias", "classifier.weight", "wte.weight", "wpe.weight",
    "h.N.ln_1.weight", "h.N.ln_1.bias", "h.N.attn.c_attn.weight", "h.N.attn.c_attn.bias", "h.N.attn.c_proj.weight",
    "h.N.attn.c_proj.bias", "h.N.ln_2.weight", "h.N.mlp.c_fc.weight", "h.N.mlp.c_fc.bias", "h.N.mlp.c_proj.weight",
    "h.N.mlp.c_proj.bias", "ln_f.weight", "ln_f.bias", "lm_head.weight", NULL};

/* Edit distance of a and b (insertions, deletions, substitutions), capped at 99. */
static int distance(const char *a, const char *b) {
    size_t n = strlen(a), m = strlen(b);
    if (n > 120 || m > 120) return 99;
    int row[121];
    for (size_t j = 0; j <= m; j++) row[j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= m; j++) {
            int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[m] > 99 ? 99 : row[m];
}

/* What a tensor is for, read from the words of its name: the part of the
 * model (a norm, q/k/v, the attention's output, the FFN's two linears, the
 * tables, the head), which norm of a layer (1, 2, 3), its layer, and whether
 * it is a weight or a bias. An unplaced name is set beside the names tscope
 * reads that have its role, so `ln1.weight` meets `norm1.weight`, not the
 * `linear1.weight` its spelling is nearer to. */
typedef enum name_part {
    PART_OTHER, PART_TOKENS, PART_POSITIONS, PART_NORM, PART_QKV, PART_Q, PART_K, PART_V, PART_ATTN_OUT,
    PART_FFN_IN, PART_FFN_OUT, PART_HEAD
} name_part;

typedef struct name_role {
    name_part part;
    int ordinal; /* a layer's norm 1, 2 or 3; 0: not said (or the final norm) */
    bool layered; /* inside a numbered layer */
    bool cross;   /* in a cross-attention */
    int kind;     /* 0 weight, 1 bias, 2 not said */
} name_role;

static bool word_is(const char *w, const char *const *list) {
    for (; *list; list++)
        if (strcmp(w, *list) == 0) return true;
    return false;
}

/* One dotted component, lower case, as a word and the number its end carries ("ln_1": "ln", 1). */
static void split_word(const char *comp, size_t n, char *word, size_t size, int *suffix) {
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < size; i++)
        word[k++] = (char)(comp[i] >= 'A' && comp[i] <= 'Z' ? comp[i] - 'A' + 'a' : comp[i]);
    word[k] = '\0';
    size_t end = k;
    while (end > 0 && word[end - 1] >= '0' && word[end - 1] <= '9') end--;
    *suffix = end < k && end > 0 ? atoi(word + end) : 0;
    if (end > 0 && end < k) word[end] = '\0';
    while (end > 1 && word[end - 1] == '_') word[--end] = '\0';
}

static name_role role_of(const char *name, int rank) {
    static const char *const norms[] = {"ln", "norm", "layernorm", "layer_norm", "rmsnorm", "rms_norm", "lnf",
                                        "ln_f", "norm_f", "final_norm", "final_layer_norm", "input_layernorm",
                                        "post_attention_layernorm", "ln_final", NULL};
    static const char *const qkv[] = {"qkv", "c_attn", "in_proj", "query_key_value", "wqkv", "to_qkv", NULL};
    static const char *const qs[] = {"q", "query", "q_proj", "wq", "to_q", NULL};
    static const char *const ks[] = {"k", "key", "k_proj", "wk", "to_k", NULL};
    static const char *const vs[] = {"v", "value", "v_proj", "wv", "to_v", NULL};
    static const char *const outs[] = {"out_proj", "o_proj", "wo", "to_out", NULL};
    static const char *const ffn_in[] = {"fc", "c_fc", "fc1", "w1", "up_proj", "up", "gate_proj", "intermediate",
                                         "lin1", "dense_h_to_4h", NULL};
    static const char *const ffn_out[] = {"fc2", "w2", "down_proj", "down", "lin2", "dense_4h_to_h", NULL};
    static const char *const tokens[] = {"wte", "tok", "tok_emb", "tokens", "token", "embed_tokens", "word_embeddings",
                                         "lut", "tok_embeddings", "token_embedding", "src", NULL};
    static const char *const positions[] = {"wpe", "pos", "pos_emb", "positions", "position", "position_embeddings",
                                            "pe", "pos_embedding", "position_embedding", NULL};
    static const char *const heads[] = {"lm_head", "head", "generator", "classifier", "output_layer", NULL};
    static const char *const attns[] = {"attn", "attention", "self_attn", "self_attention", "sa", NULL};
    static const char *const crosses[] = {"multihead_attn", "cross_attn", "src_attn", "encdec_attn",
                                          "cross_attention", NULL};
    static const char *const mlps[] = {"mlp", "ffn", "ff", "feed_forward", "feedforward", "fcn", NULL};
    name_role r = {PART_OTHER, 0, false, false, 2};
    bool in_attn = false, in_mlp = false;
    int numbers = 0;
    for (const char *c = name; *c;) {
        size_t n = strcspn(c, ".");
        char w[64], full[64]; /* "ln_1" as "ln" and 1; "fc2" whole too, where a list has it so */
        int sfx;
        split_word(c, n, w, sizeof w, &sfx);
        size_t k = 0;
        for (; k < n && k + 1 < sizeof full; k++) full[k] = (char)(c[k] >= 'A' && c[k] <= 'Z' ? c[k] - 'A' + 'a' : c[k]);
        full[k] = '\0';
        bool number = n > 0 && strspn(c, "0123456789") == n;
        if (number && numbers++ == 0) r.layered = true; /* the first number is the layer */
        else if (number && r.part == PART_NORM) r.ordinal = atoi(c) + 1; /* the Annotated Transformer's sublayer.K */
        else if (number && in_mlp) r.part = atoi(c) == 0 ? PART_FFN_IN : PART_FFN_OUT; /* nn.Sequential's 0 and 2 */
        else if (number && r.part == PART_OTHER && numbers == 2) r.ordinal = atoi(c) + 1; /* sublayer.K.norm */
        else if (strcmp(w, "weight") == 0 || strcmp(w, "gamma") == 0 || strcmp(w, "a_2") == 0 || strcmp(w, "g") == 0 ||
                 strcmp(w, "scale") == 0)
            r.kind = 0;
        else if (strcmp(w, "bias") == 0 || strcmp(w, "beta") == 0 || strcmp(w, "b_2") == 0 || strcmp(w, "b") == 0) r.kind = 1;
        else if (strcmp(w, "in_proj_weight") == 0 || strcmp(w, "in_proj_bias") == 0) {
            r.part = PART_QKV;
            r.kind = w[8] == 'w' ? 0 : 1;
        } else if (word_is(w, crosses)) in_attn = r.cross = true;
        else if (word_is(w, norms) || strstr(w, "norm")) {
            r.part = PART_NORM;
            if (sfx) r.ordinal = sfx;
            else if (strstr(w, "post_attention")) r.ordinal = 2;
            else if (strstr(w, "input")) r.ordinal = 1;
        } else if (word_is(w, qkv)) r.part = PART_QKV;
        else if (word_is(w, qs)) r.part = PART_Q;
        else if (word_is(w, ks)) r.part = PART_K;
        else if (word_is(w, vs)) r.part = PART_V;
        else if (word_is(w, outs)) r.part = PART_ATTN_OUT;
        else if (word_is(full, ffn_out)) r.part = PART_FFN_OUT;
        else if (word_is(full, ffn_in)) r.part = PART_FFN_IN;
        else if ((strcmp(w, "linear") == 0 || strcmp(w, "fc") == 0 || strcmp(w, "lin") == 0) && sfx)
            r.part = sfx == 1 ? PART_FFN_IN : PART_FFN_OUT;
        else if (strcmp(w, "c_proj") == 0 || strcmp(w, "proj") == 0 || strcmp(w, "dense") == 0 || strcmp(w, "out") == 0)
            r.part = in_mlp ? PART_FFN_OUT : in_attn ? PART_ATTN_OUT : r.part;
        else if (word_is(w, attns)) in_attn = true, in_mlp = false;
        else if (word_is(w, mlps)) in_mlp = true, in_attn = false;
        else if (word_is(w, tokens)) r.part = PART_TOKENS;
        else if (word_is(w, positions)) r.part = PART_POSITIONS;
        else if (word_is(w, heads)) r.part = PART_HEAD;
        c += n;
        if (*c == '.') c++;
    }
    if (r.part == PART_OTHER && rank == 1 && r.kind != 1) r.part = PART_NORM; /* a vector of gains: a norm's */
    if (r.part == PART_NORM && r.ordinal) r.layered = true; /* ln1, norm2: a layer's norms, never the final one */
    return r;
}

/* How far a name tscope reads is from the role of an unplaced one: a part
 * that differs outweighs everything, then the norm's place, weight or bias,
 * a layer's or the model's; spelling only decides between equals. */
static int role_penalty(const name_role *a, const name_role *b) {
    int p = 0;
    bool one_of_qkv = (a->part == PART_QKV && b->part >= PART_Q && b->part <= PART_V) ||
                      (b->part == PART_QKV && a->part >= PART_Q && a->part <= PART_V);
    if (a->part != b->part) p += one_of_qkv ? 2 : a->part == PART_OTHER || b->part == PART_OTHER ? 6 : 10;
    if (a->part == PART_NORM && b->part == PART_NORM && a->ordinal && b->ordinal && a->ordinal != b->ordinal) p += 3;
    if (a->layered != b->layered) p += 3;
    if (a->kind != 2 && b->kind != 2 && a->kind != b->kind) p += 4;
    if (a->cross != b->cross) p += 4;
    return p;
}

/* The names tscope reads nearest to `name` (rank: its tensor's), by role,
 * then spelling: the best of nn.Transformer's names and of GPT-2's, "x or y"
 * when both have its role; its layer index for N. */
static void nearest_read_name(const char *name, int rank, char *out, size_t size) {
    name_role mine = role_of(name, rank);
    int layer = 0;
    for (const char *c = name; *c; c += strcspn(c, "."), c += *c == '.') {
        size_t n = strcspn(c, ".");
        if (n > 0 && strspn(c, "0123456789") == n) {
            layer = atoi(c);
            break;
        }
    }
    int best[2] = {1 << 30, 1 << 30};
    char pick[2][160] = {"", ""};
    for (int k = 0; READ_NAMES[k]; k++) {
        char cand[160];
        const char *n_at = strstr(READ_NAMES[k], ".N.");
        if (n_at)
            snprintf(cand, sizeof cand, "%.*s.%d.%s", (int)(n_at - READ_NAMES[k]), READ_NAMES[k], layer, n_at + 3);
        else
            snprintf(cand, sizeof cand, "%s", READ_NAMES[k]);
        name_role theirs = role_of(cand, strstr(cand, "norm") || strstr(cand, "ln_") || strstr(cand, "bias") ? 1 : 2);
        int family = strncmp(cand, "wte", 3) == 0 || strncmp(cand, "wpe", 3) == 0 || strncmp(cand, "h.", 2) == 0 ||
                     strncmp(cand, "ln_f", 4) == 0 || strncmp(cand, "lm_head", 7) == 0;
        int score = role_penalty(&mine, &theirs) * 100 + distance(name, cand);
        if (score < best[family]) best[family] = score, snprintf(pick[family], sizeof pick[family], "%s", cand);
    }
    int first = best[1] < best[0];
    bool both = pick[!first][0] && best[!first] / 100 == best[first] / 100;
    snprintf(out, size, "%s%s%s", pick[first], both ? " or " : "", both ? pick[!first] : "");
}

#define UNPLACED_SHOWN 20

/* "a (nearest: x), b (nearest: y), ... and N more": every name, up to 20. */
static void unplaced_list(const ts_safetensors *f, const char *prefix, char *buf, size_t size) {
    size_t at = 0;
    int shown = 0;
    buf[0] = '\0';
    for (int e = 0; e < f->count && at < size; e++) {
        const char *name = strip(f->entries[e].name, prefix);
        if (!name) name = f->entries[e].name;
        if (shown == UNPLACED_SHOWN) {
            snprintf(buf + at, size - at, ", and %d more", f->count - e);
            return;
        }
        char near[330];
        nearest_read_name(name, f->entries[e].rank, near, sizeof near);
        bool same = strcmp(near, name) == 0 || (strncmp(near, name, strlen(name)) == 0 && near[strlen(name)] == ' ');
        /* read by itself: the file lacks what makes it a model */
        at += (size_t)snprintf(buf + at, size - at, "%s%.100s (%s%s)", shown ? ", " : "", f->entries[e].name,
                               same ? "a name tscope reads" : "nearest: ", same ? "" : near);
        shown++;
    }
}

/* No layout reads the names: is there a prefix that would make them readable?
 * The dotted prefixes of the names (each once, none ending in a layer index)
 * are the candidates; the one after which the most names read wins. */
static ts_status unreadable(const ts_safetensors *f, const char *prefix) {
    char best[TS_LAYOUT_PREFIX_MAX] = "", cand[TS_LAYOUT_PREFIX_MAX];
    char tried[MAX_CANDIDATES][TS_LAYOUT_PREFIX_MAX];
    int best_n = 0, best_layout_i = -1, n_tried = 0;
    for (int e = 0; e < f->count && n_tried < MAX_CANDIDATES; e++) {
        const char *name = strip(f->entries[e].name, prefix);
        if (!name) continue;
        for (const char *dot = strchr(name, '.'); dot && n_tried < MAX_CANDIDATES; dot = strchr(dot + 1, '.')) {
            size_t n = (size_t)(dot - name) + 1;
            if (n + (prefix ? strlen(prefix) : 0) >= sizeof cand) break;
            if (number_before(name, dot)) break;
            snprintf(cand, sizeof cand, "%s%.*s", prefix ? prefix : "", (int)n, name);
            bool seen = false;
            for (int k = 0; k < n_tried && !seen; k++) seen = strcmp(tried[k], cand) == 0;
            if (seen) continue;
            snprintf(tried[n_tried++], sizeof tried[0], "%s", cand);
            int count = 0, which = best_layout(f, cand, &count);
            if (count > best_n) {
                best_n = count, best_layout_i = which;
                snprintf(best, sizeof best, "%s", cand);
            }
        }
    }
    char names[256];
    layout_names(names, sizeof names);
    if (best_n > 0) {
        int extra = f->count - best_n;
        return ts_fail(TS_ERR_ARG,
                       "%s: no tensor name reads as a layout tscope knows (%s), but %d of %d do as %s's "
                       "once '%s' is taken off: add --load-prefix %s%s",
                       f->path, names, best_n, f->count, layouts[best_layout_i].name, best, best,
                       extra > 0 ? " (and --ignore-extra for the others)" : "");
    }
    char list[3000];
    unplaced_list(f, prefix, list, sizeof list);
    return ts_fail(TS_ERR_ARG,
                   "%s: no tensor name reads as a layout tscope knows (%s; GPT-2's, nanoGPT's and minGPT's "
                   "h.N.attn.c_attn with --layout; minGPT's older tok_emb/blocks.N and the Annotated Transformer's "
                   "src_embed/sublayer names, recognised; Hugging Face folders). Unplaced, with the nearest name "
                   "tscope reads: %s. Rename them with --names MAP.txt (lines PATTERN -> NAME; docs/own-model.md)",
                   f->path, names, list);
}

/* ---- facts ---------------------------------------------------------------------- */

typedef struct reader {
    const ts_safetensors *f;
    ts_weights_info *info;
} reader;

/* The entry holding tscope's parameter `model`, or NULL: under the layout's
 * name for it, or under tscope's own when the layout reads that too (the
 * names tscope shapes --params prints: embed.tokens.weight beside tscope
 * train's embed.src.weight). */
static const ts_st_entry *entry_of(const reader *r, const char *model) {
    char file[TS_MODEL_NAME_MAX + TS_LAYOUT_PREFIX_MAX + 64], back[TS_MODEL_NAME_MAX + 64];
    const ts_st_entry *e = NULL;
    if (ts_weights_file_name(r->info, model, file, sizeof file)) e = ts_safetensors_find(r->f, file);
    if (e) return e;
    snprintf(file, sizeof file, "%s%s", r->info->prefix, model);
    if (!ts_weights_model_name(r->info, file, back, sizeof back) || strcmp(back, model) != 0) return NULL;
    return ts_safetensors_find(r->f, file);
}

/* "layers.0.linear1.weight is [32, 16]" into the fact's evidence. */
static void cite(reader *r, ts_weights_fact k, const ts_st_entry *e) {
    char s[TS_SHAPE_TEXT_MAX];
    snprintf(r->info->why[k], TS_WEIGHTS_WHY_MAX, "%s is %s", e->name,
             ts_shape_format(s, sizeof s, e->rank, e->shape, TS_SHAPE_PLAIN));
}

static void cite_absent(reader *r, ts_weights_fact k, const char *model, const char *what) {
    char file[TS_MODEL_NAME_MAX + TS_LAYOUT_PREFIX_MAX + 64];
    if (!ts_weights_file_name(r->info, model, file, sizeof file)) snprintf(file, sizeof file, "%s", model);
    snprintf(r->info->why[k], TS_WEIGHTS_WHY_MAX, "it has no %.120s%.60s", file, what);
}

/* The first of the names that is in the file, its dim `dim`; -1 when none
 * (a dim of 0 is there: it is no size, said as such by size_from). */
static int64_t dim_of(reader *r, ts_weights_fact k, const char *const *models, int dim) {
    for (int i = 0; models[i]; i++) {
        const ts_st_entry *e = entry_of(r, models[i]);
        if (!e || e->rank <= dim) continue;
        cite(r, k, e);
        return e->shape[dim];
    }
    return -1;
}

/* A size read from a tensor's dim (what the fact k cites) into an int: 1 to
 * INT32_MAX, never 0 taken for a tensor that is not there, never wrapped. */
static ts_status size_from(const reader *r, ts_weights_fact k, const char *what, int64_t v, int *out) {
    if (v < 1 || v > INT32_MAX)
        return ts_fail(TS_ERR_FORMAT, "%s: read as %s, %s: %lld is not a %s", r->f->path, r->info->layout_name,
                       r->info->why[k], (long long)v, what);
    *out = (int)v;
    return TS_OK;
}

/* How many layers a stack has: 1 + the largest index under `stack` ("encoder.layers."). */
static int depth(reader *r, ts_weights_fact k, const char *stack) {
    int most = -1;
    char model[TS_MODEL_NAME_MAX + 64];
    const char *last = NULL;
    for (int e = 0; e < r->f->count; e++) {
        const char *name = r->f->entries[e].name;
        if (!ts_weights_model_name(r->info, name, model, sizeof model)) continue;
        if (strncmp(model, stack, strlen(stack)) != 0) continue;
        int i = ts_name_layer(model);
        if (i > most) most = i, last = name;
    }
    if (last) {
        size_t at = ts_name_layer_prefix(last);
        snprintf(r->info->why[k], TS_WEIGHTS_WHY_MAX, "its last layer is %.*s", (int)at, last);
    }
    return most + 1;
}

static bool has(reader *r, const char *model) { return entry_of(r, model) != NULL; }

static ts_status read_sizes(reader *r) {
    ts_weights_info *info = r->info;
    ts_model_config *c = &info->cfg;
    int enc = depth(r, TS_FACT_LAYERS, "encoder.layers.");
    int dec = depth(r, TS_FACT_DEC_LAYERS, "decoder.layers.");
    bool lone = enc == 0 && dec == 0 && has(r, "self_attn.in_proj_weight");
    if (enc == 0 && dec == 0 && !lone)
        return ts_fail(TS_ERR_ARG, "%s: read as %s, it has no attention layer (no in_proj_weight of an encoder or "
                                   "decoder layer)", r->f->path, info->layout_name);
    /* decoder layers with no encoder and no cross-attention: a GPT, as tscope shapes --params names it */
    bool gpt = enc == 0 && dec > 0 && !has(r, "decoder.layers.0.multihead_attn.in_proj_weight");
    c->arch = lone ? TS_ARCH_ATTENTION : gpt ? TS_ARCH_DECODER : dec > 0 ? TS_ARCH_ENCODER_DECODER : TS_ARCH_ENCODER;
    c->layers = gpt ? dec : enc;
    c->dec_layers = gpt ? 0 : dec;
    c->causal = gpt;
    if (gpt) snprintf(info->why[TS_FACT_LAYERS], TS_WEIGHTS_WHY_MAX, "%s", info->why[TS_FACT_DEC_LAYERS]);
    snprintf(info->why[TS_FACT_ARCH], TS_WEIGHTS_WHY_MAX, "%s",
             lone  ? "it has one attention and no layers"
             : gpt ? "its decoder layers have no cross-attention (multihead_attn) and there is no encoder: a "
                     "decoder-only model, a GPT"
             : dec ? "it has decoder layers"
                   : "it has encoder layers and no decoder");
    if (!dec)
        snprintf(info->why[TS_FACT_DEC_LAYERS], TS_WEIGHTS_WHY_MAX, "read as %s's, it has no decoder layer",
                 info->layout_name);
    static const char *const widths[] = {"encoder.layers.0.self_attn.out_proj.weight",
                                         "decoder.layers.0.self_attn.out_proj.weight", "self_attn.out_proj.weight",
                                         "embed.tokens.weight", NULL};
    int64_t width = dim_of(r, TS_FACT_D_MODEL, widths, 0);
    if (width < 0) width = dim_of(r, TS_FACT_D_MODEL, widths + 3, 1);
    if (width < 0)
        return ts_fail(TS_ERR_ARG, "%s: read as %s, it has no out_proj.weight to tell the model's width",
                       r->f->path, info->layout_name);
    TS_TRY(size_from(r, TS_FACT_D_MODEL, "model width", width, &c->d_model));
    if (lone) {
        static const char *const in[] = {"self_attn.in_proj_weight", NULL};
        int din = 0;
        TS_TRY(size_from(r, TS_FACT_IN_DIM, "width of the input", dim_of(r, TS_FACT_IN_DIM, in, 1), &din));
        c->in_dim = din != c->d_model ? din : 0;
        c->ffn = 4 * c->d_model; /* unused: no feed-forward */
    } else {
        static const char *const ffn[] = {"encoder.layers.0.linear1.weight", "decoder.layers.0.linear1.weight", NULL};
        int64_t hidden = dim_of(r, TS_FACT_FFN, ffn, 0);
        if (hidden < 0)
            return ts_fail(TS_ERR_ARG, "%s: read as %s, its first layer has no linear1.weight to tell the "
                                       "feed-forward width", r->f->path, info->layout_name);
        TS_TRY(size_from(r, TS_FACT_FFN, "feed-forward width", hidden, &c->ffn));
    }
    /* final norms: nn.Transformer puts one after each stack; tscope has one switch for both */
    bool enc_norm = has(r, "encoder.norm.weight"), dec_norm = has(r, "decoder.norm.weight");
    if (dec && enc && enc_norm != dec_norm) {
        char a[200], b[200];
        ts_weights_file_name(info, "encoder.norm.weight", a, sizeof a);
        ts_weights_file_name(info, "decoder.norm.weight", b, sizeof b);
        return ts_fail(TS_ERR_UNSUPPORTED, "%s: it has %s but not %s: tscope puts a final LayerNorm after both "
                                           "stacks or after neither", r->f->path, enc_norm ? a : b, enc_norm ? b : a);
    }
    c->final_norm = enc ? enc_norm : dec_norm;
    if (c->final_norm) {
        const ts_st_entry *e = entry_of(r, enc ? "encoder.norm.weight" : "decoder.norm.weight");
        cite(r, TS_FACT_FINAL_NORM, e);
    } else if (!lone) {
        cite_absent(r, TS_FACT_FINAL_NORM, enc ? "encoder.norm.weight" : "decoder.norm.weight", "");
    }
    /* tokens or vectors, and the head */
    const ts_st_entry *tok = entry_of(r, "embed.tokens.weight");
    c->input = tok ? TS_INPUT_TOKENS : TS_INPUT_EMBEDDED;
    if (tok) {
        cite(r, TS_FACT_INPUT, tok);
        cite(r, TS_FACT_VOCAB, tok);
        TS_TRY(size_from(r, TS_FACT_VOCAB, "vocabulary size", tok->shape[0], &c->vocab));
    } else {
        cite_absent(r, TS_FACT_INPUT, "embed.tokens.weight", " (a token table): it reads vectors");
    }
    const ts_st_entry *gw = entry_of(r, "generator.weight"), *gb = entry_of(r, "generator.bias"),
                      *cw = entry_of(r, "classifier.weight");
    if (gw || gb) {
        const ts_st_entry *g = gw ? gw : gb;
        c->head = TS_HEAD_LM;
        cite(r, TS_FACT_HEAD, g);
        if (!tok) {
            cite(r, TS_FACT_VOCAB, g);
            TS_TRY(size_from(r, TS_FACT_VOCAB, "vocabulary size", g->shape[0], &c->vocab));
        }
        /* tscope shares the token table with the logits' weight (base preset) */
        c->tie_embed = tok && !gw;
    } else if (c->arch == TS_ARCH_DECODER && tok && !cw) {
        /* a GPT's logits read its token table (tscope's --arch decoder ties them): no tensor of their own */
        c->head = TS_HEAD_LM;
        c->tie_embed = true;
        snprintf(info->why[TS_FACT_HEAD], TS_WEIGHTS_WHY_MAX, "a decoder-only model with a token table and no "
                                                              "generator.weight: its logits read the token table");
    } else if (cw) {
        c->head = TS_HEAD_CLS;
        cite(r, TS_FACT_HEAD, cw);
        TS_TRY(size_from(r, TS_FACT_HEAD, "number of labels", cw->shape[0], &c->n_labels));
    } else {
        c->head = TS_HEAD_NONE;
        snprintf(info->why[TS_FACT_HEAD], TS_WEIGHTS_WHY_MAX, "read as %s's, it has no generator.weight or "
                                                              "classifier.weight", info->layout_name);
    }
    const ts_st_entry *pos = entry_of(r, "embed.positions.weight");
    if (pos) {
        c->pe = TS_PE_LEARNED;
        cite(r, TS_FACT_POSITIONS, pos);
        TS_TRY(size_from(r, TS_FACT_POSITIONS, "number of positions", pos->shape[0], &c->max_pos));
    }
    return TS_OK;
}

/* Which settings the model uses, and where each comes from. */
static void settle(ts_weights_info *info, const bool from_meta[TS_SETTING_COUNT]) {
    ts_model_config *c = &info->cfg;
    bool blocks = c->arch != TS_ARCH_ATTENTION;
    for (int s = 0; s < TS_SETTING_COUNT; s++) info->source[s] = from_meta[s] ? TS_SOURCE_META : TS_SOURCE_NONE;
    if (!blocks) {
        info->source[TS_SETTING_NORM] = info->source[TS_SETTING_ACTIVATION] = TS_SOURCE_UNUSED;
        info->source[TS_SETTING_EPS] = info->source[TS_SETTING_PE] = TS_SOURCE_UNUSED;
        info->source[TS_SETTING_PE_VARIANT] = TS_SOURCE_UNUSED;
        c->pe = TS_PE_NONE;
    }
    if (info->source[TS_SETTING_EPS] == TS_SOURCE_NONE) info->source[TS_SETTING_EPS] = TS_SOURCE_DEFAULT;
    if (info->source[TS_SETTING_PE_VARIANT] == TS_SOURCE_NONE) info->source[TS_SETTING_PE_VARIANT] = TS_SOURCE_DEFAULT;
    if (blocks && c->max_pos) {
        /* a learned table: the tensors say so, whatever the metadata says (checked by the caller) */
        if (info->source[TS_SETTING_PE] != TS_SOURCE_META) info->source[TS_SETTING_PE] = TS_SOURCE_SHAPES;
    } else if (blocks && info->source[TS_SETTING_PE] == TS_SOURCE_NONE && c->input == TS_INPUT_EMBEDDED) {
        /* nn.Transformer adds no positions: its caller embeds */
        c->pe = TS_PE_NONE;
        info->source[TS_SETTING_PE] = TS_SOURCE_DEFAULT;
    }
}

/* What the Annotated Transformer's code computes and its state_dict cannot
 * say: pre-norm sublayers (x + sublayer(norm(x))), its LayerNorm (eps 1e-6
 * added to the unbiased std), ReLU, sinusoidal positions over embeddings
 * scaled by sqrt(d_model). A __metadata__ (a safetensors copy) still wins. */
static void annotated_settings(ts_weights_info *info, const bool from_meta[TS_SETTING_COUNT]) {
    ts_model_config *c = &info->cfg;
    info->codebase = TS_CODEBASE_ANNOTATED;
    c->ln_std_eps = true;
    c->mask_fill = -1e9f; /* scores.masked_fill(mask == 0, -1e9) */
    c->scale_embed = true;
    info->scale_known = true;
    if (!from_meta[TS_SETTING_NORM]) c->norm = TS_NORM_PRE;
    if (!from_meta[TS_SETTING_ACTIVATION]) c->activation = TS_ACT_RELU;
    if (!from_meta[TS_SETTING_EPS]) c->eps = c->embed_eps = 1e-6f;
    if (!from_meta[TS_SETTING_PE]) c->pe = TS_PE_SINUSOIDAL;
    static const ts_model_setting coded[] = {TS_SETTING_NORM, TS_SETTING_ACTIVATION, TS_SETTING_EPS, TS_SETTING_PE};
    for (size_t i = 0; i < sizeof coded / sizeof coded[0]; i++)
        if (!from_meta[coded[i]]) info->source[coded[i]] = TS_SOURCE_CODE;
}

ts_status ts_weights_infer(const ts_safetensors *f, const char *prefix, ts_weights_info *info) {
    memset(info, 0, sizeof *info);
    info->layout = -1;
    info->n_tensors = f->count;
    info->torch_pt = f->torch_pt;
    info->has_metadata = !f->torch_pt && f->meta_count > 0;
    if (prefix && strlen(prefix) >= sizeof info->prefix)
        return ts_fail(TS_ERR_ARG, "--load-prefix '%s' is too long", prefix);
    snprintf(info->prefix, sizeof info->prefix, "%s", prefix ? prefix : "");
    if (f->count == 0) return ts_fail(TS_ERR_ARG, "%s holds no tensors", f->path);
    if (prefix && prefix[0]) {
        int with = 0;
        for (int e = 0; e < f->count; e++) with += strncmp(f->entries[e].name, prefix, strlen(prefix)) == 0;
        if (!with)
            return ts_fail(TS_ERR_ARG, "--load-prefix '%s': no tensor name in %s starts with it (the first is %s)",
                           prefix, f->path, f->entries[0].name);
    }
    int count = 0, best = best_layout(f, prefix, &count);
    if (best < 0) return unreadable(f, prefix);
    const layout *l = &layouts[best];
    if (l->unsupported)
        return ts_fail(TS_ERR_UNSUPPORTED, "%s: its names are those of an %s's state_dict: %s", f->path, l->name,
                       l->unsupported);
    info->layout = best;
    info->layout_name = l->name;
    info->n_mapped = count;
    ts_model_config *c = &info->cfg;
    /* PyTorch's defaults for what the file may not say */
    c->eps = c->embed_eps = 1e-5f;
    c->norm = TS_NORM_POST;
    c->activation = TS_ACT_RELU;
    c->pe = TS_PE_SINUSOIDAL;
    c->heads = 0;
    c->dropout = 0.1f;
    c->mask = TS_MASK_PADDING;
    reader r = {f, info};
    ts_status st = read_sizes(&r);
    if (st) return st;
    ts_pe_kind shaped_pe = c->pe;
    bool from_meta[TS_SETTING_COUNT] = {false}, scale_known = false;
    if ((st = ts_model_meta_settings(f, c, from_meta, &scale_known))) return st;
    if (c->max_pos && from_meta[TS_SETTING_PE] && c->pe != TS_PE_LEARNED)
        return ts_fail(TS_ERR_FORMAT, "%s: __metadata__ says pe %s but %s: the positions are learned", f->path,
                       ts_model_pe_name(c->pe), info->why[TS_FACT_POSITIONS]);
    if (c->max_pos) c->pe = shaped_pe;
    settle(info, from_meta);
    /* the paper scales token embeddings by sqrt(d_model) with its sines; tscope does so there only */
    info->scale_known = scale_known;
    if (!scale_known) c->scale_embed = c->input == TS_INPUT_TOKENS && c->pe == TS_PE_SINUSOIDAL;
    if (f->codebase == TS_CODEBASE_ANNOTATED) annotated_settings(info, from_meta);
    return TS_OK;
}
