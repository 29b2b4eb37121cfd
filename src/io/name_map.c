/* name_map: a checkpoint's tensor names made names tscope reads (io.h,
 * "name maps").
 *
 * A map is a list of rules `PATTERN -> NAME`: a POSIX extended regular
 * expression that must match a whole name, and what that name becomes, with
 * \1 .. \9 standing for the pattern's groups. NAME may end in #q, #k or #v:
 * three tensors stacked by rows, q then k then v, into one (nn.MultiheadAttention's
 * in_proj, GPT-2's c_attn), for codebases that keep three projections; or be
 * "-": a buffer the code recomputes (a causal mask, a sinusoid table), dropped.
 * The first rule that matches a name renames it; names no rule matches keep
 * their own.
 *
 * Two codebases are recognised by their names and read through maps of their
 * own, written in the same rules: minGPT's older model.py (tok_emb, pos_emb,
 * blocks.N.attn.key/query/value, mlp.0) becomes GPT-2's names, and the
 * Annotated Transformer (src_embed.0.lut, self_attn.linears.K, sublayer.K.norm.a_2,
 * generator.proj) becomes nn.Transformer's. A map given with --names is applied
 * before them (ts_name_map_use), so its NAMEs may be those codebases' names too:
 * every file ts_safetensors_open reads goes through both, and each reader sees
 * the names it knows.
 */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/io.h"

#define RULE_LINE_MAX 1024
#define NAME_OUT_MAX 512

typedef struct ts_name_rule {
    regex_t re;
    char *pattern; /* as written, for messages */
    char *target;  /* NAME with \N, or "-" */
    int line;
} ts_name_rule;

/* ---- reading rules -------------------------------------------------------------- */

static char *trimmed(char *s) {
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n')) s[--n] = '\0';
    return s;
}

/* NAME's \N must name a group of the pattern; the rest are a tensor name's characters. */
static ts_status check_target(const char *what, int line, const char *target, size_t groups) {
    if (strcmp(target, "-") == 0) return TS_OK;
    if (!target[0]) return ts_fail(TS_ERR_FORMAT, "%s line %d: nothing after '->'", what, line);
    for (const char *p = target; *p; p++) {
        if (*p == '\\') {
            if (p[1] < '1' || p[1] > '9')
                return ts_fail(TS_ERR_FORMAT, "%s line %d: '\\%c' in %s: a group is \\1 .. \\9", what, line,
                               p[1] ? p[1] : ' ', target);
            if ((size_t)(p[1] - '0') > groups)
                return ts_fail(TS_ERR_FORMAT, "%s line %d: %s uses \\%c but the pattern has %zu group%s", what, line,
                               target, p[1], groups, groups == 1 ? "" : "s");
            p++;
        } else if (*p == ' ' || *p == '\t' || (unsigned char)*p < 0x20) {
            return ts_fail(TS_ERR_FORMAT, "%s line %d: the name %s has a space or a control character", what,
                           line, target);
        }
    }
    const char *hash = strchr(target, '#');
    if (hash && strcmp(hash, "#q") != 0 && strcmp(hash, "#k") != 0 && strcmp(hash, "#v") != 0)
        return ts_fail(TS_ERR_FORMAT, "%s line %d: %s: '#' ends a name only as #q, #k or #v (three tensors "
                       "stacked into one)", what, line, target);
    return TS_OK;
}

/* One line `PATTERN -> NAME` into m's next rule. */
static ts_status add_rule(ts_name_map *m, const char *what, int line, char *text) {
    char *arrow = strstr(text, "->");
    if (!arrow)
        return ts_fail(TS_ERR_FORMAT, "%s line %d: no '->': a rule is PATTERN -> NAME (\"%.60s\")", what, line, text);
    *arrow = '\0';
    char *pattern = trimmed(text), *target = trimmed(arrow + 2);
    if (!pattern[0]) return ts_fail(TS_ERR_FORMAT, "%s line %d: nothing before '->'", what, line);
    if (strstr(target, "->")) return ts_fail(TS_ERR_FORMAT, "%s line %d: two '->' in one rule", what, line);
    if (m->count == TS_NAME_MAP_MAX)
        return ts_fail(TS_ERR_FORMAT, "%s: more than %d rules", what, TS_NAME_MAP_MAX);
    ts_name_rule *r = &m->rules[m->count];
    memset(r, 0, sizeof *r);
    int rc = regcomp(&r->re, pattern, REG_EXTENDED);
    if (rc) {
        char why[160];
        regerror(rc, &r->re, why, sizeof why);
        return ts_fail(TS_ERR_FORMAT, "%s line %d: %.200s is not a regular expression: %s", what, line, pattern, why);
    }
    ts_status st = check_target(what, line, target, r->re.re_nsub);
    r->pattern = st ? NULL : strdup(pattern);
    r->target = st ? NULL : strdup(target);
    if (!st && (!r->pattern || !r->target)) st = ts_fail(TS_ERR_NOMEM, "out of memory");
    if (st) {
        regfree(&r->re);
        free(r->pattern);
        free(r->target);
        return st;
    }
    r->line = line;
    m->count++;
    return TS_OK;
}

/* Rules from text (lines; blank ones and those starting with # skipped). */
static ts_status parse_rules(ts_name_map *m, const char *what, const char *text, size_t size) {
    int line = 0;
    size_t at = 0;
    while (at < size) {
        size_t end = at;
        while (end < size && text[end] != '\n') end++;
        line++;
        if (end - at >= RULE_LINE_MAX)
            return ts_fail(TS_ERR_FORMAT, "%s line %d is longer than %d characters", what, line, RULE_LINE_MAX - 1);
        char buf[RULE_LINE_MAX];
        memcpy(buf, text + at, end - at);
        buf[end - at] = '\0';
        if (memchr(text + at, '\0', end - at))
            return ts_fail(TS_ERR_FORMAT, "%s line %d has a NUL byte: not a text file of rules", what, line);
        char *s = trimmed(buf);
        if (s[0] && s[0] != '#') TS_TRY(add_rule(m, what, line, s));
        at = end + 1;
    }
    return TS_OK;
}

void ts_name_map_free(ts_name_map *m) {
    for (int i = 0; m->rules && i < m->count; i++) {
        regfree(&m->rules[i].re);
        free(m->rules[i].pattern);
        free(m->rules[i].target);
    }
    free(m->rules);
    free(m->path);
    memset(m, 0, sizeof *m);
}

static ts_status map_from_text(ts_name_map *m, const char *what, const char *text, size_t size) {
    memset(m, 0, sizeof *m);
    m->rules = calloc(TS_NAME_MAP_MAX, sizeof *m->rules);
    m->path = strdup(what);
    if (!m->rules || !m->path) {
        ts_name_map_free(m);
        return ts_fail(TS_ERR_NOMEM, "out of memory");
    }
    ts_status st = parse_rules(m, what, text, size);
    if (!st && m->count == 0) st = ts_fail(TS_ERR_FORMAT, "%s has no rule (a line PATTERN -> NAME)", what);
    if (st) ts_name_map_free(m);
    return st;
}

ts_status ts_name_map_read(ts_name_map *m, const char *path) {
    memset(m, 0, sizeof *m);
    FILE *fp = fopen(path, "rb");
    if (!fp) return ts_fail(TS_ERR_IO, "--names %s: cannot open it", path);
    char *text = malloc(TS_NAME_MAP_MAX * RULE_LINE_MAX + 1);
    size_t n = text ? fread(text, 1, TS_NAME_MAP_MAX * RULE_LINE_MAX + 1, fp) : 0;
    bool failed = ferror(fp);
    fclose(fp);
    if (!text) return ts_fail(TS_ERR_NOMEM, "out of memory");
    ts_status st = TS_OK;
    if (failed) st = ts_fail(TS_ERR_IO, "--names %s: cannot read it (a folder?)", path);
    else if (n > TS_NAME_MAP_MAX * RULE_LINE_MAX)
        st = ts_fail(TS_ERR_FORMAT, "--names %s is larger than %d rules of %d characters", path, TS_NAME_MAP_MAX,
                     RULE_LINE_MAX);
    if (!st) st = map_from_text(m, path, text, n);
    free(text);
    return st;
}

/* ---- the recognised codebases ----------------------------------------------------- */

/* minGPT's model.py before its 2022 rewrite: GPT-2's names, nn.Linear layout. */
static const char MINGPT_OLD_RULES[] =
    "tok_emb\\.weight -> wte.weight\n"
    "pos_emb -> wpe.weight\n"
    "blocks\\.([0-9]+)\\.ln1\\.(weight|bias) -> h.\\1.ln_1.\\2\n"
    "blocks\\.([0-9]+)\\.ln2\\.(weight|bias) -> h.\\1.ln_2.\\2\n"
    "blocks\\.([0-9]+)\\.attn\\.query\\.(weight|bias) -> h.\\1.attn.c_attn.\\2#q\n"
    "blocks\\.([0-9]+)\\.attn\\.key\\.(weight|bias) -> h.\\1.attn.c_attn.\\2#k\n"
    "blocks\\.([0-9]+)\\.attn\\.value\\.(weight|bias) -> h.\\1.attn.c_attn.\\2#v\n"
    "blocks\\.([0-9]+)\\.attn\\.proj\\.(weight|bias) -> h.\\1.attn.c_proj.\\2\n"
    "blocks\\.([0-9]+)\\.attn\\.mask -> -\n"
    "blocks\\.([0-9]+)\\.mlp\\.0\\.(weight|bias) -> h.\\1.mlp.c_fc.\\2\n"
    "blocks\\.([0-9]+)\\.mlp\\.2\\.(weight|bias) -> h.\\1.mlp.c_proj.\\2\n"
    "head\\.weight -> lm_head.weight\n";

/* The Annotated Transformer's make_model: nn.Transformer's names. */
static const char ANNOTATED_RULES[] =
    "src_embed\\.0\\.lut\\.weight -> embed.src.weight\n"
    "tgt_embed\\.0\\.lut\\.weight -> embed.tgt.weight\n"
    "(src|tgt)_embed\\.1\\.pe -> -\n"
    "(encoder|decoder)\\.layers\\.([0-9]+)\\.self_attn\\.linears\\.0\\.(weight|bias) -> \\1.layers.\\2.self_attn.in_proj_\\3#q\n"
    "(encoder|decoder)\\.layers\\.([0-9]+)\\.self_attn\\.linears\\.1\\.(weight|bias) -> \\1.layers.\\2.self_attn.in_proj_\\3#k\n"
    "(encoder|decoder)\\.layers\\.([0-9]+)\\.self_attn\\.linears\\.2\\.(weight|bias) -> \\1.layers.\\2.self_attn.in_proj_\\3#v\n"
    "(encoder|decoder)\\.layers\\.([0-9]+)\\.self_attn\\.linears\\.3\\.(weight|bias) -> \\1.layers.\\2.self_attn.out_proj.\\3\n"
    "decoder\\.layers\\.([0-9]+)\\.src_attn\\.linears\\.0\\.(weight|bias) -> decoder.layers.\\1.multihead_attn.in_proj_\\2#q\n"
    "decoder\\.layers\\.([0-9]+)\\.src_attn\\.linears\\.1\\.(weight|bias) -> decoder.layers.\\1.multihead_attn.in_proj_\\2#k\n"
    "decoder\\.layers\\.([0-9]+)\\.src_attn\\.linears\\.2\\.(weight|bias) -> decoder.layers.\\1.multihead_attn.in_proj_\\2#v\n"
    "decoder\\.layers\\.([0-9]+)\\.src_attn\\.linears\\.3\\.(weight|bias) -> decoder.layers.\\1.multihead_attn.out_proj.\\2\n"
    "(encoder|decoder)\\.layers\\.([0-9]+)\\.feed_forward\\.w_1\\.(weight|bias) -> \\1.layers.\\2.linear1.\\3\n"
    "(encoder|decoder)\\.layers\\.([0-9]+)\\.feed_forward\\.w_2\\.(weight|bias) -> \\1.layers.\\2.linear2.\\3\n"
    "(encoder|decoder)\\.layers\\.([0-9]+)\\.sublayer\\.0\\.norm\\.a_2 -> \\1.layers.\\2.norm1.weight\n"
    "(encoder|decoder)\\.layers\\.([0-9]+)\\.sublayer\\.0\\.norm\\.b_2 -> \\1.layers.\\2.norm1.bias\n"
    "(encoder|decoder)\\.layers\\.([0-9]+)\\.sublayer\\.1\\.norm\\.a_2 -> \\1.layers.\\2.norm2.weight\n"
    "(encoder|decoder)\\.layers\\.([0-9]+)\\.sublayer\\.1\\.norm\\.b_2 -> \\1.layers.\\2.norm2.bias\n"
    "decoder\\.layers\\.([0-9]+)\\.sublayer\\.2\\.norm\\.a_2 -> decoder.layers.\\1.norm3.weight\n"
    "decoder\\.layers\\.([0-9]+)\\.sublayer\\.2\\.norm\\.b_2 -> decoder.layers.\\1.norm3.bias\n"
    "(encoder|decoder)\\.norm\\.a_2 -> \\1.norm.weight\n"
    "(encoder|decoder)\\.norm\\.b_2 -> \\1.norm.bias\n"
    "generator\\.proj\\.(weight|bias) -> generator.\\1\n";

typedef struct codebase {
    ts_codebase id;
    const char *name;         /* as the settings line says it */
    const char *marks[3];     /* names every such file has */
    const char *rules;
} codebase;

static const codebase codebases[] = {
    {TS_CODEBASE_MINGPT_OLD, "minGPT's older code", {"tok_emb.weight", "pos_emb", "blocks.0.attn.key.weight"},
     MINGPT_OLD_RULES},
    {TS_CODEBASE_ANNOTATED, "the Annotated Transformer's code",
     {"src_embed.0.lut.weight", "encoder.layers.0.self_attn.linears.0.weight", "encoder.layers.0.sublayer.0.norm.a_2"},
     ANNOTATED_RULES},
};
#define N_CODEBASES ((int)(sizeof codebases / sizeof codebases[0]))

const char *ts_codebase_name(ts_codebase c) {
    switch (c) {
    case TS_CODEBASE_NANOGPT: return "nanoGPT's code";
    case TS_CODEBASE_MINGPT: return "minGPT's code";
    case TS_CODEBASE_NONE: return "no codebase";
    default: break;
    }
    for (int i = 0; i < N_CODEBASES; i++)
        if (codebases[i].id == c) return codebases[i].name;
    return "no codebase";
}

/* ---- applying a map ------------------------------------------------------------- */

/* rule r's NAME for a name its pattern matched (groups in g). */
static bool expand(const ts_name_rule *r, const char *name, const regmatch_t *g, char *out, size_t size) {
    size_t at = 0;
    for (const char *p = r->target; *p; p++) {
        const char *piece = p;
        size_t n = 1;
        if (*p == '\\') {
            const regmatch_t *m = &g[p[1] - '0'];
            p++;
            piece = m->rm_so >= 0 ? name + m->rm_so : "";
            n = m->rm_so >= 0 ? (size_t)(m->rm_eo - m->rm_so) : 0;
        }
        if (at + n >= size) return false;
        memcpy(out + at, piece, n);
        at += n;
    }
    out[at] = '\0';
    return true;
}

/* The first rule matching all of name, or -1; its NAME in out. */
static int rename_one(const ts_name_map *m, const char *name, char *out, size_t size) {
    regmatch_t g[10];
    size_t len = strlen(name);
    for (int i = 0; i < m->count; i++) {
        const ts_name_rule *r = &m->rules[i];
        if (regexec(&r->re, name, 10, g, 0) != 0 || g[0].rm_so != 0 || (size_t)g[0].rm_eo != len) continue;
        return expand(r, name, g, out, size) ? i : -2;
    }
    return -1;
}

static int cmp_entry_name(const void *a, const void *b) {
    return strcmp((*(ts_st_entry *const *)a)->name, (*(ts_st_entry *const *)b)->name);
}

/* by_name again after names changed; a name given twice is the map's mistake. */
static ts_status resort(ts_safetensors *f, const char *what) {
    for (int i = 0; i < f->count; i++) f->by_name[i] = &f->entries[i];
    qsort(f->by_name, (size_t)f->count, sizeof *f->by_name, cmp_entry_name);
    for (int i = 1; i < f->count; i++)
        if (strcmp(f->by_name[i - 1]->name, f->by_name[i]->name) == 0)
            return ts_fail(TS_ERR_FORMAT, "%s: %s gives two tensors of %s the name %s", f->path, what, f->path,
                           f->by_name[i]->name);
    return TS_OK;
}

/* Drop entry e (its name and copy freed), keeping the others' order. */
static void drop_entry(ts_safetensors *f, int e) {
    free(f->entries[e].name);
    free(f->entries[e].converted);
    memmove(&f->entries[e], &f->entries[e + 1], sizeof *f->entries * (size_t)(f->count - e - 1));
    f->count--;
}

/* Entries named X#q, X#k, X#v become one X: q, k, v stacked by rows. */
static ts_status stack_qkv(ts_safetensors *f, const char *what) {
    for (int e = 0; e < f->count; e++) {
        char *hash = strstr(f->entries[e].name, "#q");
        if (!hash || hash[2]) continue;
        size_t base = (size_t)(hash - f->entries[e].name);
        int part[3] = {e, -1, -1};
        for (int k = 1; k < 3; k++) {
            for (int j = 0; j < f->count && part[k] < 0; j++)
                if (strncmp(f->entries[j].name, f->entries[e].name, base) == 0 &&
                    strcmp(f->entries[j].name + base, k == 1 ? "#k" : "#v") == 0)
                    part[k] = j;
            if (part[k] < 0)
                return ts_fail(TS_ERR_FORMAT, "%s: %s gives %.*s#q but no %.*s#%c: q, k and v come three together",
                               f->path, what, (int)base, f->entries[e].name, (int)base, f->entries[e].name,
                               k == 1 ? 'k' : 'v');
        }
        ts_tensor t[3];
        for (int k = 0; k < 3; k++) TS_TRY(ts_safetensors_get(f, f->entries[part[k]].name, &t[k]));
        bool same = t[0].rank == t[1].rank && t[0].rank == t[2].rank && t[0].rank >= 1 && t[0].rank <= 2;
        for (int k = 1; same && k < 3; k++)
            for (int d = 0; d < t[0].rank; d++) same &= t[k].shape[d] == t[0].shape[d];
        if (!same)
            return ts_fail(TS_ERR_SHAPE, "%s: %.*s#q, #k and #v are not three tensors of one shape (a matrix or a "
                           "vector each)", f->path, (int)base, f->entries[e].name);
        int64_t n = t[0].shape[0] * (t[0].rank == 2 ? t[0].shape[1] : 1);
        float *all = malloc(sizeof(float) * (size_t)(3 * n));
        if (!all) return ts_fail(TS_ERR_NOMEM, "out of memory");
        for (int k = 0; k < 3; k++) {
            ts_tensor dst;
            ts_tensor_view(&dst, all + k * n, t[k].rank, t[k].shape);
            ts_tensor_copy(&dst, &t[k]);
        }
        /* q's entry becomes the stacked tensor; k's and v's go */
        ts_st_entry *q = &f->entries[e];
        free(q->converted);
        q->converted = all;
        q->made = true;
        q->dtype = TS_ST_F32;
        snprintf(q->dtype_name, sizeof q->dtype_name, "F32");
        q->shape[0] *= 3;
        *hash = '\0';
        int hi = part[1] > part[2] ? part[1] : part[2], lo = part[1] + part[2] - hi;
        drop_entry(f, hi);
        drop_entry(f, lo);
        if (lo < e) e--;
        if (hi < e) e--;
        TS_TRY(resort(f, what)); /* entries moved: the lookup table again */
    }
    for (int e = 0; e < f->count; e++)
        if (strchr(f->entries[e].name, '#'))
            return ts_fail(TS_ERR_FORMAT, "%s: %s gives %s but no #q of the same name: q, k and v come three "
                           "together", f->path, what, f->entries[e].name);
    return TS_OK;
}

/* Rename every entry m matches (the first rule that does), drop those it
 * maps to "-", stack #q/#k/#v, and drop a [1, T, D] table's leading 1. */
static ts_status apply(ts_safetensors *f, const ts_name_map *m, const char *what, int *renamed) {
    *renamed = 0;
    for (int e = 0; e < f->count; e++) {
        char out[NAME_OUT_MAX];
        int r = rename_one(m, f->entries[e].name, out, sizeof out);
        if (r == -1) continue;
        if (r == -2) return ts_fail(TS_ERR_FORMAT, "%s: %s renames %s to a name longer than %d", f->path, what,
                                    f->entries[e].name, NAME_OUT_MAX - 1);
        (*renamed)++;
        if (strcmp(out, "-") == 0) {
            drop_entry(f, e--);
            continue;
        }
        char *copy = strdup(out);
        if (!copy) return ts_fail(TS_ERR_NOMEM, "out of memory");
        free(f->entries[e].name);
        f->entries[e].name = copy;
        ts_st_entry *t = &f->entries[e];
        if (t->rank == 3 && t->shape[0] == 1) { /* minGPT's pos_emb (1, T, D): a (T, D) table */
            t->shape[0] = t->shape[1];
            t->shape[1] = t->shape[2];
            t->rank = 2;
        }
    }
    TS_TRY(resort(f, what));
    TS_TRY(stack_qkv(f, what));
    return resort(f, what);
}

static const ts_name_map *user_map;

void ts_name_map_use(const ts_name_map *m) { user_map = m; }

static bool has_all(const ts_safetensors *f, const char *const *marks) {
    for (int i = 0; i < 3 && marks[i]; i++)
        if (!ts_safetensors_find(f, marks[i])) return false;
    return true;
}

ts_status ts_name_map_apply_all(ts_safetensors *f) {
    f->codebase = TS_CODEBASE_NONE;
    /* --names first: its NAMEs may be a recognised codebase's own names, read on */
    if (user_map) {
        char what[600];
        snprintf(what, sizeof what, "--names %s", user_map->path);
        TS_TRY(apply(f, user_map, what, &f->renamed));
    }
    for (int i = 0; i < N_CODEBASES; i++) {
        if (!has_all(f, codebases[i].marks)) continue;
        ts_name_map m;
        TS_TRY(map_from_text(&m, codebases[i].name, codebases[i].rules, strlen(codebases[i].rules)));
        int n = 0;
        ts_status st = apply(f, &m, codebases[i].name, &n);
        ts_name_map_free(&m);
        TS_TRY(st);
        f->codebase = codebases[i].id;
        break;
    }
    return TS_OK;
}
