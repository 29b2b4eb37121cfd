/* tscope diff: two traces step by step. Steps pair up by name (the k-th step
 * of a name in A with the k-th in B); each pair gets its largest absolute and
 * relative difference, over the values when both keep them, over the
 * statistics otherwise. A pair differs when some |a - b| > tol * max(1, |b|):
 * absolute near zero, relative above one. Exit 1 when any pair differs or a
 * step is missing on one side; with --common (two different programs' traces,
 * such as the PyTorch bridge's and tscope's), only the steps both have count,
 * and the others are listed once at the end. Before any value, the settings
 * both traces record (metadata "settings": heads, norm, activation, masks,
 * layout, batch, seq; today's blocks' norm kind, rope, kv heads, ffn, ...;
 * BERT's token types and head) are compared, and a mismatch is named ("heads 4 vs 2"):
 * two set-ups that differ there give different numbers for a reason no step
 * shows. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "tscope/model.h"
#include "tscope/trace.h"

#define DEFAULT_TOL 1e-4f
#define MASK_FILL_MAX -1e8f /* a masked score at or below this hides its key (softmax gives it 0) */

typedef struct result {
    double max_abs, max_rel;
    bool differs;
    const char *what; /* "values", "stats", "shape", ... */
} result;

static void add_pair(result *r, double a, double b, double tol) {
    double d;
    if (isnan(a) || isnan(b))
        d = (isnan(a) && isnan(b)) ? 0 : INFINITY;
    else if (a == b)
        d = 0; /* also equal infinities */
    else
        d = fabs(a - b);
    double m = fmax(fabs(a), fabs(b));
    double rel = d == 0 ? 0 : (m > 0 && isfinite(m) ? d / m : INFINITY);
    if (d > r->max_abs || isnan(r->max_abs)) r->max_abs = d;
    if (rel > r->max_rel) r->max_rel = rel;
    if (!(d <= tol * fmax(1.0, isfinite(b) ? fabs(b) : 1.0))) r->differs = true;
}

static bool same_shape(const ts_trace_step *a, const ts_trace_step *b) {
    return a->rank == b->rank && memcmp(a->shape, b->shape, sizeof a->shape) == 0;
}

/* The same values in another shape: equal once leading 1s are dropped, as
 * minGPT's position table [1, S, D] and tscope's [S, D]. */
static bool same_squeezed(const ts_trace_step *a, const ts_trace_step *b) {
    int ia = 0, ib = 0;
    while (ia < a->rank - 1 && a->shape[ia] == 1) ia++;
    while (ib < b->rank - 1 && b->shape[ib] == 1) ib++;
    if (a->rank - ia != b->rank - ib) return false;
    for (int k = 0; k < a->rank - ia; k++)
        if (a->shape[ia + k] != b->shape[ib + k]) return false;
    return true;
}

/* One side [B, 1, V] where the other has [B, S, V]: nanoGPT at inference
 * returns only the last position's logits. 1: A is the short one, 2: B, 0: neither. */
static int last_position_of(const ts_trace_step *a, const ts_trace_step *b) {
    if (a->rank != 3 || b->rank != 3 || a->shape[0] != b->shape[0] || a->shape[2] != b->shape[2]) return 0;
    if (a->shape[1] == 1 && b->shape[1] > 1) return 1;
    if (b->shape[1] == 1 && a->shape[1] > 1) return 2;
    return 0;
}

/* The short side's rows against the long side's last position, values kept whole on both. */
static result compare_last(ts_trace *ta, int64_t i, ts_trace *tb, int64_t j, int short_side, double tol) {
    const ts_trace_step *a = ts_trace_step_at(ta, i), *b = ts_trace_step_at(tb, j);
    result r = {0, 0, false, "last position"};
    const ts_trace_step *lng = short_side == 1 ? b : a;
    int64_t B = a->shape[0], V = a->shape[2], S = lng->shape[1];
    const float *va, *vb;
    bool whole = a->has_values && b->has_values && a->batch_index == b->batch_index &&
                 a->values_count == B * V * (short_side == 1 ? 1 : S) && b->values_count == B * V * (short_side == 2 ? 1 : S);
    if (!whole || ts_trace_values(ta, i, &va) || ts_trace_values(tb, j, &vb)) {
        r.differs = true;
        r.what = "shape";
        r.max_abs = r.max_rel = INFINITY;
        return r;
    }
    for (int64_t n = 0; n < B; n++)
        for (int64_t v = 0; v < V; v++) {
            int64_t s_at = n * V + v, l_at = (n * S + S - 1) * V + v;
            add_pair(&r, short_side == 1 ? va[s_at] : va[l_at], short_side == 1 ? vb[l_at] : vb[s_at], tol);
        }
    ts_trace_release_values(ta, i);
    ts_trace_release_values(tb, j);
    return r;
}

static result compare(ts_trace *ta, int64_t i, ts_trace *tb, int64_t j, double tol) {
    const ts_trace_step *a = ts_trace_step_at(ta, i), *b = ts_trace_step_at(tb, j);
    result r = {0, 0, false, "values"};
    int short_side = last_position_of(a, b);
    if (short_side) return compare_last(ta, i, tb, j, short_side, tol);
    if (!same_shape(a, b) && !same_squeezed(a, b)) {
        r.differs = true;
        r.what = "shape";
        r.max_abs = r.max_rel = INFINITY;
        return r;
    }
    const float *va, *vb;
    if (a->has_values && b->has_values && a->batch_index == b->batch_index && a->values_count == b->values_count) {
        if (ts_trace_values(ta, i, &va) || ts_trace_values(tb, j, &vb)) {
            fprintf(stderr, "tscope diff: %s\n", ts_last_error());
            r.differs = true;
            r.what = "damaged";
            r.max_abs = r.max_rel = INFINITY;
            return r;
        }
        /* Bit for bit the same (the usual case when nothing changed): nothing to add up. */
        bool masked = a->op == TS_OP_MASK && b->op == TS_OP_MASK;
        bool fills = false;
        if (memcmp(va, vb, (size_t)a->values_count * sizeof *va) != 0)
            for (int64_t k = 0; k < a->values_count; k++) {
                /* a hidden score: -inf, -1e9 (the Annotated Transformer) and -1e10 (older minGPT)
                 * hide a key alike wherever a row keeps one */
                if (masked && va[k] <= MASK_FILL_MAX && vb[k] <= MASK_FILL_MAX) {
                    fills |= va[k] != vb[k];
                    continue;
                }
                add_pair(&r, va[k], vb[k], tol);
            }
        if (fills) r.what = "fill values differ, hide alike";
        ts_trace_release_values(ta, i); /* views gathered for this step only */
        ts_trace_release_values(tb, j);
        return r;
    }
    if (a->has_stats && b->has_stats) {
        r.what = "stats";
        const ts_trace_stats *sa = &a->stats, *sb = &b->stats;
        add_pair(&r, sa->min, sb->min, tol);
        add_pair(&r, sa->max, sb->max, tol);
        add_pair(&r, sa->mean, sb->mean, tol);
        add_pair(&r, sa->std, sb->std, tol);
        add_pair(&r, (double)sa->nan, (double)sb->nan, 0);
        add_pair(&r, (double)sa->inf, (double)sb->inf, 0);
        return r;
    }
    r.what = "shape";
    return r;
}

/* Step of tb that is the k-th with this name, or -1. */
static int64_t kth(const ts_trace *tb, const char *name, int k) {
    int64_t j = ts_trace_find(tb, name);
    while (j >= 0 && k-- > 0) j = ts_trace_find_next(tb, j);
    return j;
}

/* Up to a few names of the steps only one side has, for the summary line. */
static void name_some(char *buf, size_t cap, const char *name, int64_t count) {
    size_t len = strlen(buf);
    if (count <= 4) snprintf(buf + len, cap - len, "%s%s", len ? ", " : "", name);
    else if (count == 5) snprintf(buf + len, cap - len, ", ...");
}

/* A setting's value as text: "4", "pre". */
static void setting_text(const cJSON *v, char *buf, size_t size) {
    if (cJSON_IsNumber(v)) snprintf(buf, size, "%g", v->valuedouble);
    else if (cJSON_IsString(v)) snprintf(buf, size, "%s", v->valuestring);
    else if (cJSON_IsBool(v)) snprintf(buf, size, "%s", cJSON_IsTrue(v) ? "true" : "false");
    else snprintf(buf, size, "?");
}

/* Whether two mask fills ("-inf", "-1e9") agree in effect: each at or below
 * TS_MASK_FILL_HIDES gives a hidden key weight exp(fill - max) = 0 in float32
 * in any row that keeps a key (its max above fill + 104), as -inf does. They
 * still differ on a row with every key hidden (weights 1/n under a finite
 * fill, 0 under -inf): the weights step compared value by value shows it. */
static bool fills_hide_alike(const char *a, const char *b) {
    if (strcmp(a, b) == 0) return false; /* the same words: said as the same */
    char *ea = NULL, *eb = NULL;
    double fa = strtod(a, &ea), fb = strtod(b, &eb);
    return ea != a && !*ea && eb != b && !*eb && fa <= TS_MASK_FILL_HIDES && fb <= TS_MASK_FILL_HIDES;
}

/* The settings both traces record, compared: one line, and the number that differ. */
static int compare_settings(ts_trace *ta, ts_trace *tb, char *first, size_t size) {
    /* the 2017 block's (with the LayerNorm's formula), today's blocks' (trace_cli.c, add_modern_settings) and
     * BERT's (add_bert_settings) */
    static const char *const keys[] = {"heads",     "norm",      "activation", "masks",       "eps",      "norm_formula",
                                       "layout",    "batch",     "seq",        "tgt_seq",     "norm_kind", "rope",
                                       "kv_heads",  "head_dim",  "ffn",        "residual",    "scale_embed",
                                       "token_types", "lm_head", "embed_eps",  "mask_fill",
                                       "weights",   NULL};
    cJSON *ma = cJSON_Parse(ts_trace_metadata(ta)), *mb = cJSON_Parse(ts_trace_metadata(tb));
    const cJSON *sa = cJSON_GetObjectItemCaseSensitive(ma, "settings");
    const cJSON *sb = cJSON_GetObjectItemCaseSensitive(mb, "settings");
    int differ = 0, same = 0;
    char line[1024] = "", ok[1024] = "";
    first[0] = '\0';
    for (int k = 0; keys[k] && cJSON_IsObject(sa) && cJSON_IsObject(sb); k++) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(sa, keys[k]);
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(sb, keys[k]);
        if (!a || !b) continue;
        char ta_[128], tb_[128];
        setting_text(a, ta_, sizeof ta_);
        setting_text(b, tb_, sizeof tb_);
        if (strcmp(keys[k], "mask_fill") == 0 && fills_hide_alike(ta_, tb_)) {
            size_t len = strlen(ok);
            snprintf(ok + len, sizeof ok - len, "%smask_fill %s ~ %s (hide alike)", same ? ", " : "", ta_, tb_);
            same++;
        } else if (strcmp(ta_, tb_) != 0) {
            size_t len = strlen(line);
            snprintf(line + len, sizeof line - len, "%s%s %s vs %s", differ ? "; " : "", keys[k], ta_, tb_);
            if (!differ) snprintf(first, size, "%s %s vs %s", keys[k], ta_, tb_);
            differ++;
        } else {
            size_t len = strlen(ok);
            snprintf(ok + len, sizeof ok - len, "%s%s %s", same ? ", " : "", keys[k], ta_);
            same++;
        }
    }
    if (differ)
        printf("settings DIFFER: %s (A vs B)\n", line);
    else if (same)
        printf("settings: the same (%s)\n", ok);
    else if (cJSON_IsObject(sa) != cJSON_IsObject(sb))
        printf("settings: only %s records them\n", cJSON_IsObject(sa) ? "A" : "B");
    cJSON_Delete(ma);
    cJSON_Delete(mb);
    return differ;
}

static int diff(ts_trace *ta, ts_trace *tb, double tol, bool common) {
    int64_t na = ts_trace_count(ta), nb = ts_trace_count(tb);
    bool *paired = calloc((size_t)nb + 1, sizeof *paired);
    int *occ = calloc((size_t)na + 1, sizeof *occ);
    if (!paired || !occ) {
        free(paired);
        free(occ);
        return ts_cli_error("diff", "out of memory");
    }
    for (int64_t i = 0; i < na; i++) {
        int64_t p = ts_trace_find(ta, ts_trace_step_at(ta, i)->name);
        int k = 0;
        while (p >= 0 && p < i) {
            k++;
            p = ts_trace_find_next(ta, p);
        }
        occ[i] = k;
    }
    char setting[300];
    int settings_differ = compare_settings(ta, tb, setting, sizeof setting);
    int name_w = 4;
    for (int64_t i = 0; i < na; i++) {
        int len = (int)strlen(ts_trace_step_at(ta, i)->name);
        if (len > name_w) name_w = len > 56 ? 56 : len;
    }
    printf("%5s  %-*s  %11s %11s  %s\n", "#", name_w, "name", "max abs", "max rel", "result");
    int64_t first = -1, differing = 0, compared = 0, only_a = 0, only_b = 0;
    char only_a_names[256] = "", only_b_names[256] = "";
    result first_r = {0};
    for (int64_t i = 0; i < na; i++) {
        const ts_trace_step *a = ts_trace_step_at(ta, i);
        int64_t j = kth(tb, a->name, occ[i]);
        if (j < 0 && common) {
            name_some(only_a_names, sizeof only_a_names, a->name, ++only_a);
            continue;
        }
        if (j < 0) {
            printf("%5lld  %-*.*s  %11s %11s  only in A\n", (long long)i, name_w, name_w, a->name, "-", "-");
            differing++;
            if (first < 0) first = i, first_r = (result){INFINITY, INFINITY, true, "missing in B"};
            continue;
        }
        paired[j] = true;
        result r = compare(ta, i, tb, j, tol);
        compared++;
        char verdict[48];
        bool by_values = strcmp(r.what, "values") == 0;
        snprintf(verdict, sizeof verdict, "%s%s%s%s", r.differs ? "DIFFERS" : "ok", by_values ? "" : " (",
                 by_values ? "" : r.what, by_values ? "" : ")");
        printf("%5lld  %-*.*s  %11.3g %11.3g  %s\n", (long long)i, name_w, name_w, a->name, r.max_abs, r.max_rel,
               verdict);
        if (r.differs) {
            differing++;
            if (first < 0) first = i, first_r = r;
        }
    }
    for (int64_t j = 0; j < nb; j++)
        if (!paired[j] && common) {
            name_some(only_b_names, sizeof only_b_names, ts_trace_step_at(tb, j)->name, ++only_b);
        } else if (!paired[j]) {
            printf("%5s  %-*.*s  %11s %11s  only in B (its step %lld)\n", "-", name_w, name_w,
                   ts_trace_step_at(tb, j)->name, "-", "-", (long long)j);
            differing++;
        }
    if (common) {
        printf("only in A: %lld step%s%s%s%s\n", (long long)only_a, only_a == 1 ? "" : "s", only_a ? " (" : "",
               only_a_names, only_a ? ")" : "");
        printf("only in B: %lld step%s%s%s%s\n", (long long)only_b, only_b == 1 ? "" : "s", only_b ? " (" : "",
               only_b_names, only_b ? ")" : "");
    }
    if (common && compared == 0) {
        printf("no step in common: the traces name their steps differently\n");
        differing = 1;
    } else if (differing == 0) {
        printf("no step differs beyond tol %g (%lld steps compared)\n", tol, (long long)compared);
    } else if (first >= 0) {
        printf("first divergence: step %lld '%s' (%s): max abs %.3g, max rel %.3g, tol %g; %lld steps differ\n",
               (long long)first, ts_trace_step_at(ta, first)->name, first_r.what, first_r.max_abs, first_r.max_rel,
               tol, (long long)differing);
    } else {
        printf("%lld steps of B are missing in A\n", (long long)differing);
    }
    if (settings_differ)
        printf("the traces come from different settings (%s%s): their values differ for that reason first\n", setting,
               settings_differ > 1 ? ", ..." : "");
    free(paired);
    free(occ);
    return differing || settings_differ ? 1 : 0;
}

int ts_cmd_diff(int argc, char **argv) {
    float tol = DEFAULT_TOL;
    bool common = false;
    const ts_flag flags[] = {
        {"--tol", TS_FLAG_FLOAT, &tol, "X",
         "a step differs when some |a - b| > X * max(1, |b|): relative for |b| > 1, absolute below (default 1e-4)",
         NULL, NULL, NULL},
        {"--common", TS_FLAG_BOOL, &common, NULL,
         "compare only the steps both traces have; list the others once, as counts (for another program's trace)",
         NULL, NULL, NULL},
    };
    const ts_cli_spec spec = {
        .command = "diff",
        .synopsis = "A.tstrace B.tstrace [--tol X] [--common]",
        .description = "Compare two traces step by step (paired by name): the largest absolute and relative\n"
                       "difference of each step's values, or of its statistics when a side keeps no values,\n"
                       "and the first step that diverges. Exit 1 when any step differs or is missing; with\n"
                       "--common, when a step both have differs (or they have none in common).",
        .flags = flags,
        .n_flags = 2,
        .min_positional = 2,
        .max_positional = 2,
        .positional_meta = "A B",
    };
    const char *paths[2] = {NULL, NULL};
    int n_pos = 0;
    int rc = ts_cli_parse(&spec, argc, argv, paths, &n_pos);
    if (rc >= 0) return rc;
    if (!(tol >= 0) || !isfinite(tol)) return ts_cli_error("diff", "--tol %g must be a number >= 0", (double)tol);
    ts_trace *ta, *tb;
    if (ts_trace_open(paths[0], &ta)) return ts_cli_error("diff", "%s", ts_last_error());
    if (ts_trace_open(paths[1], &tb)) {
        rc = ts_cli_error("diff", "%s", ts_last_error());
        ts_trace_close(ta);
        return rc;
    }
    for (int k = 0; k < 2; k++)
        if (ts_trace_verify(k ? tb : ta, NULL)) {
            rc = ts_cli_error("diff", "%s: %s", paths[k], ts_last_error());
            ts_trace_close(ta);
            ts_trace_close(tb);
            return rc;
        }
    if (ts_trace_warning(ta)[0]) fprintf(stderr, "tscope diff: warning: %s: %s\n", paths[0], ts_trace_warning(ta));
    if (ts_trace_warning(tb)[0]) fprintf(stderr, "tscope diff: warning: %s: %s\n", paths[1], ts_trace_warning(tb));
    rc = diff(ta, tb, tol, common);
    ts_trace_close(ta);
    ts_trace_close(tb);
    return rc;
}
