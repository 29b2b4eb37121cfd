/* experiment: ablations, patches and the logit lens, through the hook's
 * edit callback (include/tscope/experiment.h). */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/experiment.h"
#include "tscope/io.h"
#include "tscope/kernels.h"
#include "tscope/trace.h"

void ts_experiment_init(ts_experiment *ex) { memset(ex, 0, sizeof *ex); }

void ts_experiment_free(ts_experiment *ex) {
    for (int i = 0; i < ex->n_edits; i++) {
        free(ex->edits[i].values);
        free(ex->edits[i].trace_config);
    }
    free(ex->edits);
    free(ex->lens_x);
    free(ex->lens_p);
    ts_trace_close(ex->mean_ref);
    memset(ex, 0, sizeof *ex);
}

static ts_status new_edit(ts_experiment *ex, const char *spec, ts_edit **out) {
    if (!spec || !spec[0]) return ts_fail(TS_ERR_ARG, "an edit needs a step name");
    if (strlen(spec) >= TS_EDIT_SPEC_MAX) return ts_fail(TS_ERR_ARG, "edit '%.40s...' is too long", spec);
    if (ex->n_edits == ex->cap) {
        int cap = ex->cap ? 2 * ex->cap : 8;
        ts_edit *grown = realloc(ex->edits, sizeof *grown * (size_t)cap);
        if (!grown) return ts_fail(TS_ERR_NOMEM, "out of memory for the edits");
        ex->edits = grown;
        ex->cap = cap;
    }
    ts_edit *e = &ex->edits[ex->n_edits++];
    memset(e, 0, sizeof *e);
    snprintf(e->spec, sizeof e->spec, "%s", spec);
    e->pos = -1;
    *out = e;
    return TS_OK;
}

/* "head3", "head*", "head[01]": a glob over head names. */
static bool is_head_leaf(const char *leaf) {
    if (strncmp(leaf, "head", 4) != 0 || !leaf[4]) return false;
    for (const char *c = leaf + 4; *c; c++)
        if (!isdigit((unsigned char)*c) && !strchr("*?[]-!", *c)) return false;
    return true;
}

/* The steps and heads an edit of name reaches, name cut at its last dot:
 * ATTN.headK is query head K's slice of ATTN.values (B, H, S, hd), its output
 * before the projection; ATTN.kvheadK is key/value head K's slice of ATTN.v
 * (B, KV, S, hd), the values every query head of its group reads. Any other
 * name is the step (or glob) itself. */
static void edit_target(ts_edit *e, char *name) {
    char *dot = strrchr(name, '.');
    bool kv = dot && strncmp(dot + 1, "kv", 2) == 0 && is_head_leaf(dot + 3);
    if (dot && (kv || is_head_leaf(dot + 1))) {
        snprintf(e->heads, sizeof e->heads, "%.31s", dot + (kv ? 3 : 1));
        e->kv_heads = kv;
        *dot = '\0';
        snprintf(e->glob, sizeof e->glob, "%.*s.%s", (int)sizeof e->glob - 8, name, kv ? "v" : "values");
    } else {
        snprintf(e->glob, sizeof e->glob, "%s", name);
    }
}

ts_status ts_experiment_add_ablate(ts_experiment *ex, const char *spec) {
    ts_edit *e;
    TS_TRY(new_edit(ex, spec, &e));
    char name[TS_EDIT_SPEC_MAX];
    snprintf(name, sizeof name, "%s", spec);
    e->kind = TS_EDIT_ZERO;
    char *eq = strchr(name, '=');
    if (eq) {
        *eq = '\0';
        if (strcmp(eq + 1, "mean") == 0) e->kind = TS_EDIT_MEAN;
        else if (strcmp(eq + 1, "zero") != 0) {
            ex->n_edits--;
            return ts_fail(TS_ERR_ARG, "--ablate %s: after '=' comes zero or mean, not '%s'", spec, eq + 1);
        }
    }
    if (!name[0]) {
        ex->n_edits--;
        return ts_fail(TS_ERR_ARG, "--ablate %s: no step named before '='", spec);
    }
    edit_target(e, name);
    return TS_OK;
}

/* STEP@POS: the position after the last '@' into *pos (left as it is
 * without one), and step cut before it. flag and spec for the message. */
static ts_status split_position(const char *flag, const char *spec, char *step, int *pos) {
    char *at = strrchr(step, '@');
    if (!at) return TS_OK;
    int64_t p;
    if (!ts_text_int(at + 1, 0, 1 << 30, &p))
        return ts_fail(TS_ERR_ARG, "%s %s: the position after '@' is not a number >= 0", flag, spec);
    *pos = (int)p;
    *at = '\0';
    return TS_OK;
}

/* The "config" object of a trace's metadata, as JSON text (malloc'd), or NULL. */
static char *trace_config(const ts_trace *t) {
    cJSON *root = cJSON_Parse(ts_trace_metadata(t));
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(root, "config");
    char *text = cJSON_IsObject(c) ? cJSON_PrintUnformatted(c) : NULL;
    cJSON_Delete(root);
    return text;
}

ts_status ts_experiment_add_patch(ts_experiment *ex, const char *spec) {
    ts_edit *e;
    TS_TRY(new_edit(ex, spec, &e));
    e->kind = TS_EDIT_PATCH;
    char path[TS_EDIT_SPEC_MAX];
    snprintf(path, sizeof path, "%s", spec);
    char *colon = strrchr(path, ':');
    ts_status st = TS_OK;
    if (!colon || !colon[1])
        st = ts_fail(TS_ERR_ARG, "--patch %s: give TRACE:STEP[@POS], e.g. clean.tstrace:decoder.layers.0.out@27", spec);
    char *step = colon ? colon + 1 : NULL;
    if (!st) {
        *colon = '\0';
        st = split_position("--patch", spec, step, &e->pos);
        edit_target(e, step);
        if (!st && (strpbrk(e->glob, "*?[") || !step[0]))
            st = ts_fail(TS_ERR_ARG, "--patch %s: name one step, not a glob", spec);
    }
    ts_trace *t = NULL;
    if (!st && ts_trace_open(path, &t))
        st = ts_fail(TS_ERR_ARG, "--patch %s: %s", spec, ts_last_error());
    int64_t i = st ? -1 : ts_trace_find(t, e->glob);
    if (!st && i < 0 && !ts_trace_complete(t)) /* cut short: the step may be in the part lost */
        st = ts_fail(TS_ERR_FORMAT, "--patch %s: %s is incomplete (%s) and holds no step %s", spec, path,
                     ts_trace_warning(t), e->glob);
    if (!st && i < 0) st = ts_fail(TS_ERR_ARG, "--patch %s: %s has no step %s", spec, path, e->glob);
    const ts_trace_step *s = st ? NULL : ts_trace_step_at(t, i);
    if (!st && (!s->has_values || s->batch_index >= 0))
        st = ts_fail(TS_ERR_ARG, "--patch %s: %s keeps no values of %s for its whole batch (record it with --level "
                                 "values)", spec, path, e->glob);
    const float *v = NULL;
    if (!st && ts_trace_values(t, i, &v)) st = ts_fail(TS_ERR_ARG, "--patch %s: %s", spec, ts_last_error());
    if (!st && !(e->trace_config = trace_config(t)))
        st = ts_fail(TS_ERR_ARG, "--patch %s: %s does not say which model made it (no config in its metadata)", spec,
                     path);
    if (!st && !(e->values = malloc(sizeof(float) * (size_t)(s->numel ? s->numel : 1))))
        st = ts_fail(TS_ERR_NOMEM, "out of memory for --patch %s", spec);
    if (!st) {
        memcpy(e->values, v, sizeof(float) * (size_t)s->numel);
        e->rank = s->rank;
        memcpy(e->shape, s->shape, sizeof e->shape);
    }
    ts_trace_close(t);
    if (st) {
        free(e->values);
        free(e->trace_config);
        ex->n_edits--;
    }
    return st;
}

ts_status ts_experiment_add_add(ts_experiment *ex, const char *spec) {
    ts_edit *e;
    TS_TRY(new_edit(ex, spec, &e));
    e->kind = TS_EDIT_ADD;
    char step[TS_EDIT_SPEC_MAX];
    snprintf(step, sizeof step, "%s", spec);
    char *eq = strchr(step, '=');
    ts_status st = TS_OK;
    if (!eq || !eq[1] || eq == step)
        st = ts_fail(TS_ERR_ARG, "--add %s: give STEP[@POS]=VEC.npy, e.g. decoder.layers.0.out@27=steer.npy", spec);
    if (!st) {
        *eq = '\0';
        st = split_position("--add", spec, step, &e->pos);
        snprintf(e->glob, sizeof e->glob, "%s", step);
    }
    ts_npy v = {0};
    if (!st && ts_npy_read(&v, eq + 1)) st = ts_fail(TS_ERR_ARG, "--add %s: %s", spec, ts_last_error());
    if (!st) {
        e->values = v.f32, v.f32 = NULL;
        e->rank = v.rank;
        memcpy(e->shape, v.shape, sizeof e->shape);
        if (v.numel == 0) st = ts_fail(TS_ERR_ARG, "--add %s: %s is empty", spec, eq + 1);
    }
    ts_npy_free(&v);
    if (st) {
        free(e->values);
        ex->n_edits--;
    }
    return st;
}

ts_status ts_experiment_mean_from(ts_experiment *ex, const char *trace_path) {
    if (ex->mean_ref) return ts_fail(TS_ERR_ARG, "--mean-from is given once");
    if (ts_trace_open(trace_path, &ex->mean_ref))
        return ts_fail(TS_ERR_ARG, "--mean-from %s: %s", trace_path, ts_last_error());
    snprintf(ex->mean_ref_path, sizeof ex->mean_ref_path, "%s", trace_path);
    return TS_OK;
}

ts_status ts_experiment_check_decode(const ts_experiment *ex) {
    for (int i = 0; i < ex->n_edits; i++) {
        const ts_edit *e = &ex->edits[i];
        if (e->kind == TS_EDIT_PATCH)
            return ts_fail(TS_ERR_ARG, "--patch %s: generating decodes one new position at a time; a patch takes a "
                                       "whole run's positions (use run --patch)", e->spec);
        if (e->kind == TS_EDIT_MEAN && !ex->mean_ref)
            return ts_fail(TS_ERR_ARG, "--ablate %s: generating decodes one position at a time, so this run's mean "
                                       "over positions is the value itself; give the mean's reference set with "
                                       "--mean-from TRACE", e->spec);
    }
    return TS_OK;
}

/* ---- checking against the model's steps ---- */

typedef struct step_info {
    char name[2 * TS_MODEL_NAME_MAX];
    ts_op op;
    ts_tag tag;
    int rank;
    int64_t shape[TS_MAX_RANK];
} step_info;

typedef struct step_list {
    step_info *steps;
    int n, cap;
} step_list;

static ts_status collect(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag) {
    step_list *l = ctx;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 256;
        step_info *grown = realloc(l->steps, sizeof *grown * (size_t)cap);
        if (!grown) return ts_fail(TS_ERR_NOMEM, "out of memory listing the model's steps");
        l->steps = grown;
        l->cap = cap;
    }
    step_info *s = &l->steps[l->n++];
    snprintf(s->name, sizeof s->name, "%s", name);
    s->op = op;
    s->tag = tag;
    s->rank = t->rank;
    memcpy(s->shape, t->shape, sizeof s->shape);
    return TS_OK;
}

static bool editable(const step_info *s) { return ts_hook_step_editable(s->op, s->tag); }

/* Why s cannot be edited, and which step to edit instead (before: the step
 * handed over just before s, whose values a norm's `in` of op input are). */
static ts_status refuse_uneditable(const ts_edit *e, const step_info *s, const step_info *before) {
    const char *what = e->kind == TS_EDIT_PATCH ? "--patch" : "--ablate";
    char instead[2 * TS_MODEL_NAME_MAX];
    snprintf(instead, sizeof instead, "%s", s->name);
    char *leaf = strrchr(instead, '.');
    if (s->op == TS_OP_PARAM) {
        if (leaf) snprintf(leaf, sizeof instead - (size_t)(leaf - instead), ".out");
        return ts_fail(TS_ERR_ARG, "%s %s: %s is a parameter of the model, not a step it computes; edit %s "
                                   "(what the parameter makes) instead", what, e->spec, s->name, instead);
    }
    size_t len = strlen(s->name);
    bool norm_in = len > 3 && strcmp(s->name + len - 3, ".in") == 0; /* a norm's input: the step before it */
    if (s->op == TS_OP_INPUT && before && norm_in)
        return ts_fail(TS_ERR_ARG, "%s %s: %s is %s under another name (the norm reads the stream as it is); edit "
                                   "%s instead", what, e->spec, s->name, before->name, before->name);
    if (s->op == TS_OP_INPUT) {
        bool dec = strncmp(s->name, "decoder.", 8) == 0;
        bool types = strcmp(s->name, "token_type_ids") == 0; /* BERT's: their rows are embed.token_types */
        return ts_fail(TS_ERR_ARG, "%s %s: %s is what the model reads, not a step it computes; edit %s instead", what,
                       e->spec, s->name, types ? "embed.token_types" : dec ? "decoder.embed.out" : "embed.out");
    }
    return ts_fail(TS_ERR_ARG, "%s %s: %s is the input's padding, shown for reading; the attention masks are made "
                               "from the padding itself (edit a step's masked scores, e.g. *.self_attn.masked, "
                               "instead)", what, e->spec, s->name);
}

/* Whether two configs are the same model, whatever the batch and lengths. */
static bool same_model(const ts_model_config *a, const char *trace_json) {
    ts_model_config b;
    if (ts_model_config_from_json(trace_json, &b)) return false;
    ts_model_config x = *a;
    b.batch = x.batch, b.seq = x.seq, b.tgt_seq = x.tgt_seq, b.max_pos = x.max_pos, b.seed = x.seed;
    char *ja = ts_model_config_to_json(&x), *jb = ts_model_config_to_json(&b);
    bool same = ja && jb && strcmp(ja, jb) == 0;
    free(ja), free(jb);
    return same;
}

static void shape_text(char *buf, size_t size, int rank, const int64_t *shape) {
    ts_tensor t = {0};
    t.rank = rank;
    memcpy(t.shape, shape, sizeof t.shape);
    ts_tensor_shape_str(buf, size, &t, TS_SHAPE_PLAIN);
}

/* Which dim of a step counts positions: the third of per-head tensors and
 * attention matrices (B, H, S, .), the second of (B, S, .); none in (B, D)
 * (a classifier's [CLS] row), whose mean is over the batch alone. */
static int pos_dim(int rank, ts_tag tag) {
    if (rank >= 4 && (tag == TS_TAG_HEADS || tag == TS_TAG_ATTN_SCORES || tag == TS_TAG_ATTN_WEIGHTS)) return 2;
    return rank >= 3 ? 1 : -1;
}

static ts_status check_edit(ts_edit *e, const step_list *l, const ts_model_config *cfg) {
    int matched = 0, heads_matched = 0, skipped = 0;
    const step_info *hit = NULL, *uneditable = NULL, *before_uneditable = NULL;
    for (int i = 0; i < l->n; i++) {
        const step_info *s = &l->steps[i];
        if (fnmatch(e->glob, s->name, 0) != 0) continue;
        if (!editable(s)) {
            if (!uneditable) uneditable = s, before_uneditable = i > 0 ? &l->steps[i - 1] : NULL;
            skipped++;
            continue;
        }
        matched++;
        hit = s;
        if (e->heads[0]) {
            if (s->rank != 4 || s->tag != TS_TAG_HEADS)
                return ts_fail(TS_ERR_ARG, "%s: %s is not a per-head tensor", e->spec, s->name);
            for (int h = 0; h < s->shape[1]; h++) {
                char hn[32];
                snprintf(hn, sizeof hn, "head%d", h);
                if (fnmatch(e->heads, hn, 0) == 0) heads_matched++;
            }
        }
    }
    if (matched == 0 && uneditable) return refuse_uneditable(e, uneditable, before_uneditable);
    if (matched == 0) {
        const char *what = e->kind == TS_EDIT_PATCH ? "--patch" : "--ablate";
        if (e->heads[0])
            return ts_fail(TS_ERR_ARG, "%s %s: no attention of this model is named so (%s names no step; heads are "
                                       "ATTN.%sheadK with ATTN like %s.layers.0.self_attn, layers 0 to %d)", what,
                           e->spec, e->glob, e->kv_heads ? "kv" : "", cfg->arch == TS_ARCH_ENCODER ? "encoder" : "decoder",
                           (cfg->arch == TS_ARCH_ENCODER_DECODER ? cfg->dec_layers : cfg->layers) - 1);
        return ts_fail(TS_ERR_ARG, "%s %s: names no step of this model (tscope info lists them from a trace of it, "
                                   "--trace T.tstrace --level shapes; m.step_names() in Python; e.g. %s)", what,
                       e->spec, l->n > 20 ? l->steps[20].name : "embed.out");
    }
    e->skipped = skipped; /* a glob over steps and parameters edits the steps; the report says what it left */
    snprintf(e->skipped_example, sizeof e->skipped_example, "%s", uneditable ? uneditable->name : "");
    if (e->heads[0] && heads_matched == 0 && e->kv_heads)
        return ts_fail(TS_ERR_ARG, "%s %s: this model's attentions have key/value heads kvhead0 to kvhead%d",
                       e->kind == TS_EDIT_PATCH ? "--patch" : "--ablate", e->spec, (int)hit->shape[1] - 1);
    if (e->heads[0] && heads_matched == 0)
        return ts_fail(TS_ERR_ARG, "%s %s: this model's attentions have heads head0 to head%d",
                       e->kind == TS_EDIT_PATCH ? "--patch" : "--ablate", e->spec, cfg->heads - 1);
    if (e->kind == TS_EDIT_ADD) {
        int pd = pos_dim(hit->rank, hit->tag);
        bool vec = e->rank == 1 && e->shape[0] == hit->shape[hit->rank - 1];
        bool whole = e->rank == hit->rank;
        for (int d = 0; whole && d < e->rank; d++) whole = hit->shape[d] == e->shape[d];
        if (!vec && !whole) {
            char a[TS_SHAPE_TEXT_MAX], b[TS_SHAPE_TEXT_MAX];
            shape_text(a, sizeof a, hit->rank, hit->shape);
            shape_text(b, sizeof b, e->rank, e->shape);
            return ts_fail(TS_ERR_SHAPE, "--add %s: %s is %s; the vector is %s (give [%lld], added at every position, "
                                         "or the step's whole shape)", e->spec, hit->name, a, b,
                           (long long)hit->shape[hit->rank - 1]);
        }
        if (e->pos >= 0 && (pd < 0 || e->pos >= hit->shape[pd]))
            return ts_fail(TS_ERR_ARG, "--add %s: %s has positions 0 to %lld", e->spec, hit->name,
                           pd < 0 ? -1LL : (long long)hit->shape[pd] - 1);
    }
    if (e->kind == TS_EDIT_PATCH) {
        if (!same_model(cfg, e->trace_config))
            return ts_fail(TS_ERR_ARG, "--patch %s: that trace was made by another model (its config differs from this "
                                       "one's)", e->spec);
        bool same = hit->rank == e->rank;
        for (int d = 0; same && d < e->rank; d++) same = hit->shape[d] == e->shape[d];
        if (!same) {
            char a[TS_SHAPE_TEXT_MAX], b[TS_SHAPE_TEXT_MAX];
            shape_text(a, sizeof a, hit->rank, hit->shape);
            shape_text(b, sizeof b, e->rank, e->shape);
            return ts_fail(TS_ERR_SHAPE, "--patch %s: %s is %s in this run but %s in that trace", e->spec, hit->name,
                           a, b);
        }
        int pd = pos_dim(hit->rank, hit->tag);
        if (e->pos >= 0 && (pd < 0 || e->pos >= hit->shape[pd]))
            return ts_fail(TS_ERR_ARG, "--patch %s: %s has positions 0 to %lld", e->spec, hit->name,
                           pd < 0 ? -1LL : (long long)hit->shape[pd] - 1);
    }
    return TS_OK;
}

/* --mean-from: the reference trace is this model's and keeps, for its whole
 * batch, every step a mean ablation names, in a shape whose dims but the
 * batch and the positions are this run's. */
static ts_status check_mean_ref(const ts_experiment *ex, const step_list *l, const ts_model_config *cfg) {
    const char *path = ex->mean_ref_path;
    char *config = trace_config(ex->mean_ref);
    bool same = config && same_model(cfg, config);
    free(config);
    if (!same)
        return ts_fail(TS_ERR_ARG, "--mean-from %s: that trace was made by another model (its config differs from this "
                                   "one's, or it has none)", path);
    int means = 0;
    for (int k = 0; k < ex->n_edits; k++) {
        const ts_edit *e = &ex->edits[k];
        if (e->kind != TS_EDIT_MEAN) continue;
        means++;
        for (int i = 0; i < l->n; i++) {
            const step_info *s = &l->steps[i];
            if (!editable(s) || fnmatch(e->glob, s->name, 0) != 0) continue;
            int64_t j = ts_trace_find(ex->mean_ref, s->name);
            const ts_trace_step *r = j < 0 ? NULL : ts_trace_step_at(ex->mean_ref, j);
            if (!r || !r->has_values || r->batch_index >= 0)
                return ts_fail(TS_ERR_ARG, "--mean-from %s: it keeps no values of %s for its whole batch (record it "
                                           "with --level values)", path, s->name);
            int pd = pos_dim(s->rank, s->tag);
            bool fits = r->rank == s->rank;
            for (int d = 1; fits && d < s->rank; d++) fits = d == pd || r->shape[d] == s->shape[d];
            if (!fits) {
                char a[TS_SHAPE_TEXT_MAX], b[TS_SHAPE_TEXT_MAX];
                shape_text(a, sizeof a, s->rank, s->shape);
                shape_text(b, sizeof b, r->rank, r->shape);
                return ts_fail(TS_ERR_SHAPE, "--mean-from %s: %s is %s in this run but %s there", path, s->name, a, b);
            }
        }
    }
    if (!means)
        return ts_fail(TS_ERR_ARG, "--mean-from %s: no mean ablation to take means for (add --ablate STEP=mean)", path);
    return TS_OK;
}

/* The stack the head reads: an encoder-decoder's decoder, else the one stack. */
static const char *lens_stack(const ts_model_config *cfg) {
    return cfg->arch == TS_ARCH_ENCODER_DECODER ? "decoder" : ts_model_stack_name(cfg);
}

ts_status ts_experiment_check(ts_experiment *ex, const ts_model_config *cfg) {
    if (ex->lens && cfg->head != TS_HEAD_LM)
        return ts_fail(TS_ERR_ARG, "--lens reads the stream through the output head; this model has no vocabulary "
                                   "head");
    if (ex->lens && cfg->arch == TS_ARCH_ATTENTION)
        return ts_fail(TS_ERR_ARG, "--lens needs layers to look after; this model is one attention");
    step_list l = {0};
    ts_hook hook = {.fn = collect, .ctx = &l};
    ts_status st = ts_model_dry_run(cfg, &hook, NULL);
    for (int i = 0; !st && i < ex->n_edits; i++) st = check_edit(&ex->edits[i], &l, cfg);
    if (!st && ex->mean_ref) st = check_mean_ref(ex, &l, cfg);
    free(l.steps);
    if (st || !ex->lens) return st;
    snprintf(ex->stack, sizeof ex->stack, "%s", lens_stack(cfg));
    ex->lens_layers = cfg->arch == TS_ARCH_ENCODER_DECODER ? cfg->dec_layers : cfg->layers;
    return TS_OK;
}

/* ---- the edits, as the forward runs ---- */

/* t's elements are walked in row-major order of t's shape, at their offsets. */
static int64_t offset_of(const ts_tensor *t, const int64_t *idx) {
    int64_t off = 0;
    for (int d = 0; d < t->rank; d++) off += idx[d] * t->stride[d];
    return off;
}

static bool next_index(const ts_tensor *t, int64_t *idx) {
    for (int d = t->rank - 1; d >= 0; d--) {
        if (++idx[d] < t->shape[d]) return true;
        idx[d] = 0;
    }
    return false;
}

/* t restricted to index h of dim 1 (a head). */
static ts_tensor head_slice(const ts_tensor *t, int h) {
    ts_tensor s = *t;
    s.data = t->data + h * t->stride[1];
    s.shape[1] = 1;
    return s;
}

/* t's elements set to zero. */
static void zero_all(const ts_tensor *t) {
    if (ts_tensor_numel(t) == 0) return;
    int64_t idx[TS_MAX_RANK] = {0};
    do t->data[offset_of(t, idx)] = 0.0f;
    while (next_index(t, idx));
}

/* t's elements replaced by the mean of src's over dim 0 and dim pd (the
 * batch and the positions), every other index kept: src is t itself, or a
 * reference run's step (--mean-from) with its own batch and positions. */
static ts_status mean_all(const ts_tensor *t, int pd, const ts_tensor *src) {
    int64_t n = ts_tensor_numel(src);
    if (n == 0 || ts_tensor_numel(t) == 0) return TS_OK;
    /* the kept index space: t with dims 0 and pd of size 1 */
    ts_tensor k = *t;
    k.shape[0] = 1;
    if (pd > 0) k.shape[pd] = 1;
    int64_t nk = ts_tensor_numel(&k);
    double *sum = calloc((size_t)nk, sizeof *sum);
    if (!sum) return ts_fail(TS_ERR_NOMEM, "out of memory for a mean ablation");
    int64_t idx[TS_MAX_RANK] = {0};
    int64_t per = n / nk;
    /* the kept index of an element: its row-major number in k's shape */
    for (int pass = 0; pass < 2; pass++) {
        const ts_tensor *w = pass == 0 ? src : t;
        memset(idx, 0, sizeof idx);
        do {
            int64_t j = 0;
            for (int d = 0; d < t->rank; d++) j = j * k.shape[d] + (k.shape[d] == 1 ? 0 : idx[d]);
            float *x = &w->data[offset_of(w, idx)];
            if (pass == 0) sum[j] += *x;
            else *x = (float)(sum[j] / (double)per);
        } while (next_index(w, idx));
    }
    free(sum);
    return TS_OK;
}

/* The patch's values (row-major, t's shape) into t, all or position pos,
 * every head or those heads matches (a glob over "head0".."head{H-1}"). */
static void patch_into(const ts_tensor *t, const float *v, int pd, int pos, const char *heads) {
    int64_t idx[TS_MAX_RANK] = {0}, i = 0;
    if (ts_tensor_numel(t) == 0) return;
    bool pick[256];
    for (int h = 0; heads[0] && h < 256 && h < t->shape[1]; h++) {
        char hn[32];
        snprintf(hn, sizeof hn, "head%d", h);
        pick[h] = fnmatch(heads, hn, 0) == 0;
    }
    do {
        if ((pos < 0 || idx[pd] == pos) && (!heads[0] || (idx[1] < 256 && pick[idx[1]])))
            t->data[offset_of(t, idx)] = v[i];
        i++;
    } while (next_index(t, idx));
}

/* The vector v added to t: of t's last dim at every row, or of t's whole
 * shape (row-major); all positions or position pos. */
static void add_into(const ts_tensor *t, const float *v, bool whole, int pd, int pos, int pos0) {
    int64_t idx[TS_MAX_RANK] = {0}, i = 0;
    if (ts_tensor_numel(t) == 0) return;
    do {
        if (pos < 0 || (pd >= 0 && idx[pd] + pos0 == pos))
            t->data[offset_of(t, idx)] += whole ? v[i] : v[idx[t->rank - 1]];
        i++;
    } while (next_index(t, idx));
}

/* The reference run's step `name` (--mean-from), as a tensor. */
static ts_status mean_source(const ts_experiment *ex, const char *name, const ts_tensor *t, ts_tensor *src) {
    if (!ex->mean_ref) {
        *src = *t;
        return TS_OK;
    }
    int64_t j = ts_trace_find(ex->mean_ref, name);
    if (j < 0) return ts_fail(TS_ERR_ARG, "--mean-from %s: it has no step %s", ex->mean_ref_path, name);
    TS_TRY(ts_trace_tensor(ex->mean_ref, j, src));
    if (src->rank != t->rank) return ts_fail(TS_ERR_SHAPE, "--mean-from %s: %s has another rank there",
                                             ex->mean_ref_path, name);
    return TS_OK;
}

static ts_status apply(const ts_experiment *ex, ts_edit *e, const char *name, ts_tensor *t, ts_tag tag) {
    int pd = pos_dim(t->rank, tag);
    if (e->kind == TS_EDIT_PATCH) {
        bool same = t->rank == e->rank;
        for (int d = 0; same && d < t->rank; d++) same = t->shape[d] == e->shape[d];
        if (!same) return ts_fail(TS_ERR_SHAPE, "--patch %s: the step's shape in this run is not the trace's", e->spec);
        patch_into(t, e->values, pd, e->pos, e->heads);
        return TS_OK;
    }
    if (e->kind == TS_EDIT_ADD) {
        bool whole = e->rank == t->rank;
        for (int d = 0; whole && d < t->rank; d++) whole = t->shape[d] == e->shape[d];
        if (!whole && !(e->rank == 1 && e->shape[0] == t->shape[t->rank - 1]))
            return ts_fail(TS_ERR_SHAPE, "--add %s: the vector fits neither %s's last dim nor its shape", e->spec, name);
        add_into(t, e->values, whole, pd, e->pos, ex->pos0);
        return TS_OK;
    }
    ts_tensor src = *t;
    if (e->kind == TS_EDIT_MEAN) TS_TRY(mean_source(ex, name, t, &src));
    if (!e->heads[0]) return e->kind == TS_EDIT_ZERO ? (zero_all(t), TS_OK) : mean_all(t, pd, &src);
    for (int h = 0; h < t->shape[1]; h++) {
        char hn[32];
        snprintf(hn, sizeof hn, "head%d", h);
        if (fnmatch(e->heads, hn, 0) != 0) continue;
        ts_tensor s = head_slice(t, h);
        if (e->kind == TS_EDIT_ZERO) zero_all(&s);
        else {
            ts_tensor r = head_slice(&src, h);
            TS_TRY(mean_all(&s, pd, &r));
        }
    }
    return TS_OK;
}

/* The lens's copy of a layer's output, when name is `<stack>.layers.N.out`. */
static ts_status lens_keep(ts_experiment *ex, const char *name, const ts_tensor *t) {
    const char *rest;
    int l = ts_name_stack_layer(name, ex->stack, &rest);
    if (l < 0 || strcmp(rest, ".out") != 0 || l >= ex->lens_layers || t->rank != 3) return TS_OK;
    int64_t rows = t->shape[0] * t->shape[1], D = t->shape[2];
    if (!ex->lens_x || ex->lens_rows != rows) {
        free(ex->lens_x);
        ex->lens_rows = rows;
        ex->lens_x = calloc((size_t)(ex->lens_layers * rows * D), sizeof(float));
        if (!ex->lens_x) return ts_fail(TS_ERR_NOMEM, "out of memory for the lens");
    }
    float *dst = ex->lens_x + l * rows * D;
    int64_t idx[TS_MAX_RANK] = {0}, i = 0;
    do dst[i++] = t->data[offset_of(t, idx)];
    while (next_index(t, idx));
    return TS_OK;
}

static ts_status edit_step(void *ctx, const char *name, ts_op op, ts_tensor *t, ts_tag tag, bool *edited) {
    (void)op;
    ts_experiment *ex = ctx;
    for (int i = 0; i < ex->n_edits; i++) {
        ts_edit *e = &ex->edits[i];
        if (fnmatch(e->glob, name, 0) != 0) continue;
        TS_TRY(apply(ex, e, name, t, tag));
        e->applied++;
        *edited = true;
    }
    if (ex->lens) TS_TRY(lens_keep(ex, name, t));
    return TS_OK;
}

/* Whether an edit names the step: the model makes it one by one there. */
static bool edit_touches(void *ctx, const char *name) {
    const ts_experiment *ex = ctx;
    for (int i = 0; i < ex->n_edits; i++)
        if (fnmatch(ex->edits[i].glob, name, 0) == 0) return true;
    return false;
}

void ts_experiment_attach(ts_experiment *ex, ts_hook *hook) {
    for (int i = 0; i < ex->n_edits; i++) ex->edits[i].applied = 0;
    hook->edit = edit_step;
    hook->touches = edit_touches;
    hook->edit_ctx = ex;
}

char *ts_experiment_to_json(const ts_experiment *ex) {
    static const char *const kinds[] = {"zero", "mean", "patch", "add"};
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < ex->n_edits; i++) {
        const ts_edit *e = &ex->edits[i];
        cJSON *o = cJSON_CreateObject();
        if (!o) break;
        cJSON_AddStringToObject(o, "spec", e->spec);
        cJSON_AddStringToObject(o, "kind", kinds[e->kind]);
        cJSON_AddStringToObject(o, "steps", e->glob);
        if (e->heads[0]) { /* a label for the edited step's title: "head1", or "kvhead1" for a key/value head */
            char heads[40];
            snprintf(heads, sizeof heads, "%s%s", e->kv_heads ? "kv" : "", e->heads);
            cJSON_AddStringToObject(o, "heads", heads);
        }
        if (e->pos >= 0) cJSON_AddNumberToObject(o, "pos", e->pos);
        if (e->kind == TS_EDIT_MEAN && ex->mean_ref) cJSON_AddStringToObject(o, "mean_from", ex->mean_ref_path);
        cJSON_AddItemToArray(a, o);
    }
    char *text = a ? cJSON_PrintUnformatted(a) : NULL;
    cJSON_Delete(a);
    return text;
}

/* ---- the lens ---- */

ts_status ts_experiment_lens_finish(ts_experiment *ex, const ts_model *m, const ts_hook *hook) {
    if (!ex->lens) return TS_OK;
    const ts_model_config *c = &m->cfg;
    int64_t rows = ex->lens_rows, D = c->d_model, V = c->vocab;
    if (!ex->lens_x) return ts_fail(TS_ERR_ARG, "--lens: the forward handed over no %s layer", ex->stack);
    /* y: the stream through the final norm; with BERT's masked-LM head, z its transform (h as scratch) */
    float *y = malloc(sizeof(float) * (size_t)(rows * D) * (c->mlm_head ? 3 : 1));
    float *z = c->mlm_head && y ? y + rows * D : y, *h = c->mlm_head && y ? z + rows * D : NULL;
    free(ex->lens_p);
    ex->lens_p = malloc(sizeof(float) * (size_t)(ex->lens_layers * rows * V));
    if (!y || !ex->lens_p) {
        free(y);
        return ts_fail(TS_ERR_NOMEM, "out of memory for the lens");
    }
    ts_status st = TS_OK;
    for (int l = 0; l < ex->lens_layers && !st; l++) {
        const float *x = ex->lens_x + l * rows * D;
        ts_model_final_norm_rows(m, y, NULL, NULL, x, rows);
        if (c->mlm_head) ts_model_mlm_rows(m, z, h, y, rows);
        float *p = ex->lens_p + l * rows * V;
        ts_model_head_rows(m, p, z, rows);
        for (int64_t r = 0; r < rows; r++) ts_softmax_vocab(p + r * V, p + r * V, V, 1.0, -INFINITY);
        char name[64];
        snprintf(name, sizeof name, "lens.layers.%d", l);
        int64_t S = rows / c->batch;
        ts_tensor t = {.data = p, .rank = 3, .shape = {c->batch, S, V}, .stride = {S * V, V, 1}};
        st = ts_hook_call(hook, name, TS_OP_SOFTMAX, &t, TS_TAG_LOGITS);
    }
    free(y);
    return st;
}

const float *ts_experiment_lens_at(const ts_experiment *ex, int l, int vocab) {
    if (!ex->lens_p || l < 0 || l >= ex->lens_layers) return NULL;
    return ex->lens_p + (int64_t)l * ex->lens_rows * vocab;
}
