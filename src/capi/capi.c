/* capi: the entry points of libtscope.so for python/tscope (include/tscope/capi.h).
 * Nothing here computes: it loads, sizes and runs the model through the same
 * calls the commands make, and hands steps to a foreign callback through the
 * hook (core.h), its edit callback for the edits. */
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/capi.h"
#include "tscope/experiment.h"
#include "tscope/io.h"
#include "tscope/kernels.h"
#include "tscope/render.h"
#include "tscope/tokenizer.h"
#include "tscope/trace.h"

struct ts_capi_model {
    ts_model m;        /* the weights, and the activations of the last pass's (B, S) */
    ts_model_config base; /* as loaded: the batch and lengths a pass changes */
    ts_lmtok tok;      /* count 0: ids only */
    char *config;      /* base as JSON */
    int built_batch, built_seq; /* what m's activations were planned for */
};

const char *ts_capi_error(void) { return ts_last_error(); }

void ts_capi_free(void *p) { free(p); }

static ts_status finish_open(ts_capi_model *c, ts_capi_model **out) {
    c->base = c->m.cfg;
    c->built_batch = c->m.cfg.batch;
    c->built_seq = c->m.cfg.seq;
    c->config = ts_model_config_to_json(&c->base);
    if (!c->config) {
        ts_capi_close(c);
        return ts_fail(TS_ERR_NOMEM, "out of memory");
    }
    *out = c;
    return TS_OK;
}

ts_status ts_capi_open(const char *path, const char *layout, ts_capi_model **out) {
    *out = NULL;
    TS_TRY(ts_kernels_init());
    if (!ts_lm_checkpoint_is(path))
        return ts_fail(TS_ERR_ARG, "%s: not a language model's checkpoint (tscope train --task lm, GPT-2's or "
                                   "nanoGPT's) nor a preset (%s)", path, ts_model_preset_names());
    ts_capi_model *c = calloc(1, sizeof *c);
    if (!c) return ts_fail(TS_ERR_NOMEM, "out of memory");
    ts_load_options lo = {.layout = layout};
    ts_status st = ts_lm_checkpoint_open(path, &lo, 1, 0, &c->m, &c->tok);
    if (st) {
        free(c);
        return st;
    }
    return finish_open(c, out);
}

/* "key=value" of a setting the weights leave open into given (set[s] marks it). */
static ts_status read_setting(const char *kv, ts_model_config *given, bool set[TS_SETTING_COUNT]) {
    const char *eq = strchr(kv, '=');
    size_t k = eq ? (size_t)(eq - kv) : strlen(kv);
    for (int s = 0; s < TS_SETTING_COUNT; s++) {
        const char *key = ts_model_setting_key((ts_model_setting)s), *want;
        if (!eq || strlen(key) != k || strncmp(kv, key, k) != 0) continue;
        if (!ts_model_setting_parse((ts_model_setting)s, eq + 1, given, &want))
            return ts_fail(TS_ERR_ARG, "%s: give %s", kv, want);
        set[s] = true;
        return TS_OK;
    }
    return ts_fail(TS_ERR_ARG, "%.*s: not a setting these weights leave open (the tensors decide the sizes; give heads, "
                               "norm, activation, pe, eps or pe_variant)", (int)k, kv);
}

/* A state_dict whose file leaves settings open: run --load W's config, with
 * the caller's settings in place of run's flags (model_settings.c decides). */
static ts_status open_state_dict(const char *path, const char *const *settings, int n, ts_capi_model *c) {
    ts_safetensors f;
    TS_TRY(ts_safetensors_open(&f, path));
    ts_weights_info w;
    ts_status st = ts_weights_infer(&f, NULL, &w);
    ts_model_config cfg = w.cfg, given = w.cfg, tiny;
    bool known[TS_SETTING_COUNT], set[TS_SETTING_COUNT] = {false};
    for (int s = 0; s < TS_SETTING_COUNT; s++) known[s] = w.source[s] != TS_SOURCE_NONE;
    bool mask_set = false; /* mask=causal|none: whether an encoder's self-attention is causal, as run's --mask */
    for (int i = 0; !st && i < n; i++) {
        if (strncmp(settings[i], "mask=", 5) != 0) {
            st = read_setting(settings[i], &given, set);
            continue;
        }
        const char *v = settings[i] + 5;
        if (strcmp(v, "causal") != 0 && strcmp(v, "none") != 0)
            st = ts_fail(TS_ERR_ARG, "%s: give mask=causal or mask=none", settings[i]);
        cfg.causal = strcmp(v, "causal") == 0;
        mask_set = true;
    }
    for (int s = 0; !st && s < TS_SETTING_COUNT; s++) {
        if (!set[s]) continue;
        st = ts_weights_check_setting(&w, path, &given, (ts_model_setting)s);
        ts_model_setting_copy(&cfg, &given, (ts_model_setting)s);
        known[s] = true;
    }
    if (!st) st = ts_weights_settings_complete(&w, path, known, &cfg, set[TS_SETTING_HEADS],
                                                    cfg.arch == TS_ARCH_ENCODER && !mask_set);
    if (!st) st = ts_model_config_preset(&tiny, "tiny"); /* the input's sizes, as run has them; a pass re-plans */
    if (!st) {
        cfg.batch = 1, cfg.seq = tiny.seq, cfg.tgt_seq = tiny.tgt_seq, cfg.seed = tiny.seed, cfg.text = NULL;
        cfg.preset[0] = '\0';
        if (!w.scale_known) cfg.scale_embed = cfg.input == TS_INPUT_TOKENS && cfg.pe == TS_PE_SINUSOIDAL;
        st = ts_model_init(&c->m, &cfg);
    }
    ts_load_options lo = {.info = &w};
    if (!st && (st = ts_model_load_weights(&c->m, &f, &lo, NULL))) ts_model_free(&c->m);
    ts_safetensors_close(&f);
    return st;
}

ts_status ts_capi_open_weights(const char *path, const char *layout, const char *const *settings, int n,
                               ts_capi_model **out) {
    *out = NULL;
    if (ts_lm_checkpoint_is(path)) {
        if (n > 0)
            return ts_fail(TS_ERR_ARG, "%s: a language model's checkpoint brings its own config; %s cannot change it",
                           path, settings[0]);
        return ts_capi_open(path, layout, out);
    }
    if (layout) return ts_fail(TS_ERR_ARG, "layout %s: for GPT-2-named files; %s is not one", layout, path);
    TS_TRY(ts_kernels_init());
    ts_capi_model *c = calloc(1, sizeof *c);
    if (!c) return ts_fail(TS_ERR_NOMEM, "out of memory");
    ts_status st = open_state_dict(path, settings, n, c);
    if (st) {
        free(c);
        return st;
    }
    return finish_open(c, out);
}

ts_status ts_capi_preset_json(const char *preset, char **out) {
    ts_model_config cfg;
    TS_TRY(ts_model_config_preset(&cfg, preset));
    if (cfg.vocab == 0) cfg.vocab = 32; /* a preset that sizes its vocabulary from its text */
    *out = ts_model_config_to_json(&cfg);
    return *out ? TS_OK : ts_fail(TS_ERR_NOMEM, "out of memory");
}

ts_status ts_capi_open_config(const char *config_json, ts_capi_model **out) {
    *out = NULL;
    TS_TRY(ts_kernels_init());
    ts_model_config cfg;
    TS_TRY(ts_model_config_from_json(config_json, &cfg));
    ts_capi_model *c = calloc(1, sizeof *c);
    if (!c) return ts_fail(TS_ERR_NOMEM, "out of memory");
    ts_status st = ts_model_init(&c->m, &cfg);
    if (st) {
        free(c);
        return st;
    }
    return finish_open(c, out);
}

void ts_capi_close(ts_capi_model *c) {
    if (!c) return;
    ts_model_free(&c->m);
    ts_lmtok_free(&c->tok);
    free(c->config);
    free(c);
}

const char *ts_capi_config(const ts_capi_model *c) { return c->config; }

int ts_capi_has_tokenizer(const ts_capi_model *c) { return c->tok.count > 0; }

ts_status ts_capi_tokenize(ts_capi_model *c, const char *text, int32_t *ids, int64_t cap, int64_t *n) {
    if (!c->tok.count) return ts_fail(TS_ERR_ARG, "this model has no tokenizer: give token ids");
    ts_bpe_ids out = {0};
    TS_TRY(ts_lmtok_encode(&c->tok, text, strlen(text), &out));
    *n = (int64_t)out.count;
    for (int64_t i = 0; i < *n && i < cap; i++) ids[i] = out.ids[i];
    ts_bpe_ids_free(&out);
    return TS_OK;
}

ts_status ts_capi_decode(const ts_capi_model *c, const int32_t *ids, int64_t n, char **text) {
    if (!c->tok.count) return ts_fail(TS_ERR_ARG, "this model has no tokenizer to write ids as text");
    size_t len;
    return ts_lmtok_decode(&c->tok, ids, (size_t)n, text, &len);
}

ts_status ts_capi_token_label(const ts_capi_model *c, int32_t id, char *buf, int64_t cap) {
    if (cap < 1) return ts_fail(TS_ERR_ARG, "no room for a label");
    if (!c->tok.count || id < 0 || id >= c->tok.count) snprintf(buf, (size_t)cap, "%d", (int)id);
    else ts_lmtok_label(&c->tok, id, buf, (size_t)cap);
    return TS_OK;
}

/* ---- sizing: a pass of (B, S) in the activations it needs ---- */

static ts_status check_ids(const ts_capi_model *c, const int32_t *ids, int64_t n, const char *what) {
    int V = c->base.vocab;
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return ts_fail(TS_ERR_ARG, "%s: id %d at %lld is outside the vocabulary (0 to %d)", what, (int)ids[i],
                           (long long)i, V - 1);
    return TS_OK;
}

/* The positions the model can take: its learned table, else no limit but memory. */
static int max_positions(const ts_model_config *cfg) {
    if (cfg->pe == TS_PE_LEARNED) return cfg->max_pos > 0 ? cfg->max_pos : cfg->seq;
    return 1 << 20;
}

static ts_status ensure(ts_capi_model *c, int B, int S, int T) {
    const ts_model_config *b = &c->base;
    if (B < 1 || S < 1) return ts_fail(TS_ERR_ARG, "a pass needs at least one sequence of one token (got %d x %d)", B, S);
    int most = max_positions(b);
    if (S > most || T > most)
        return ts_fail(TS_ERR_ARG, "%d positions: this model has %d (its learned position table)", S > T ? S : T, most);
    bool two = b->arch == TS_ARCH_ENCODER_DECODER;
    if (!two && B == c->built_batch && S <= c->built_seq) {
        if (c->m.S != S) TS_TRY(ts_model_set_length(&c->m, S));
        return TS_OK;
    }
    if (two && B == c->m.cfg.batch && S == c->m.cfg.seq && T == c->m.cfg.tgt_seq) return TS_OK;
    ts_model_config cfg = *b;
    cfg.batch = B;
    cfg.seq = S;
    if (two) cfg.tgt_seq = T;
    if (b->pe == TS_PE_LEARNED && cfg.max_pos == 0) cfg.max_pos = most;
    ts_model next;
    TS_TRY(ts_model_init(&next, &cfg));
    if (next.n_floats != c->m.n_floats) {
        ts_model_free(&next);
        return ts_fail(TS_ERR_ARG, "internal: the parameters changed size with the batch");
    }
    memcpy(next.block, c->m.block, sizeof(float) * (size_t)next.n_floats);
    ts_model_set_training(&next, false);
    ts_model_free(&c->m);
    c->m = next;
    c->built_batch = B;
    c->built_seq = S;
    return TS_OK;
}

/* ---- steps ---- */

static ts_status list_step(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag) {
    ts_text_buf *b = ctx;
    char shape[TS_SHAPE_TEXT_MAX];
    ts_tensor_shape_str(shape, sizeof shape, t, TS_SHAPE_PLAIN);
    ts_text_buf_printf(b, "%s\t%s\t%s\t%s\n", name, ts_op_name(op), ts_tag_name(tag), shape);
    return TS_OK;
}

ts_status ts_capi_steps(ts_capi_model *c, int B, int S, char **out) {
    ts_model_config cfg = c->base;
    cfg.batch = B > 0 ? B : 1;
    if (S > 0) cfg.seq = S;
    if (S > 0 && cfg.arch == TS_ARCH_ENCODER_DECODER) cfg.tgt_seq = S;
    ts_text_buf b = {0};
    ts_hook hook = {.fn = list_step, .ctx = &b};
    ts_status st = ts_model_dry_run(&cfg, &hook, NULL);
    *out = ts_text_buf_take(&b);
    if (!st && !*out) st = ts_fail(TS_ERR_NOMEM, "out of memory");
    if (st) free(*out), *out = NULL;
    return st;
}

/* ---- a pass: the caller's edits and watches on the hook ---- */

typedef struct pass_ctx {
    const ts_capi_pass *p;
    ts_hook inner;      /* a trace writer's hook, or nothing */
    ts_hook exp;        /* the command line's edits (ts_experiment_attach), or none */
    int pos0;
    bool failed;
    char failed_at[160];
} pass_ctx;

static bool matches(const char *const *globs, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (fnmatch(globs[i], name, 0) == 0) return true;
    return false;
}

static ts_status call_back(pass_ctx *x, const char *name, ts_op op, ts_tag tag, const ts_tensor *t, int editing) {
    if (x->p->fn(x->p->ctx, name, (int)op, (int)tag, t->rank, t->shape, t->stride, t->data, editing, x->pos0) == 0)
        return TS_OK;
    x->failed = true;
    snprintf(x->failed_at, sizeof x->failed_at, "%s", name);
    return ts_fail(TS_ERR_ARG, "a hook on %s raised an error", name);
}

static ts_status pass_edit(void *ctx, const char *name, ts_op op, ts_tensor *t, ts_tag tag, bool *edited) {
    pass_ctx *x = ctx;
    if (x->exp.edit) TS_TRY(x->exp.edit(x->exp.edit_ctx, name, op, t, tag, edited));
    if (x->p && x->p->fn && matches(x->p->edit_globs, x->p->n_edit, name)) {
        TS_TRY(call_back(x, name, op, tag, t, 1));
        *edited = true; /* the caller may have written: later steps and the trace see its values */
    }
    return TS_OK;
}

static bool pass_touches(void *ctx, const char *name) {
    pass_ctx *x = ctx;
    if (x->exp.edit && ts_hook_edit_touches(&x->exp, name)) return true;
    return x->p && matches(x->p->edit_globs, x->p->n_edit, name);
}

static ts_status pass_watch(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag) {
    pass_ctx *x = ctx;
    if (x->inner.fn) TS_TRY(x->inner.fn(x->inner.ctx, name, op, t, tag));
    if (x->p && x->p->fn && t->data && matches(x->p->watch_globs, x->p->n_watch, name))
        TS_TRY(call_back(x, name, op, tag, t, 0));
    return TS_OK;
}

static void pass_overwritten(void *ctx, const ts_tensor *t) {
    pass_ctx *x = ctx;
    if (x->inner.overwritten) x->inner.overwritten(x->inner.ctx, t);
}

/* The hook of a pass: watches (and the trace) on fn, edits on edit. */
static ts_hook pass_hook(pass_ctx *x) {
    const ts_capi_pass *p = x->p;
    bool watch = x->inner.fn || (p && p->fn && p->n_watch > 0);
    bool edit = x->exp.edit || (p && p->fn && p->n_edit > 0);
    ts_hook h = {0};
    if (watch) h.fn = pass_watch, h.ctx = x, h.overwritten = pass_overwritten;
    if (edit) h.edit = pass_edit, h.touches = pass_touches, h.edit_ctx = x;
    return h;
}

/* The command line's edits of the pass, checked against the model. */
static ts_status build_experiment(const ts_capi_pass *p, const ts_model_config *cfg, ts_experiment *ex) {
    ts_experiment_init(ex);
    for (int i = 0; p && i < p->n_specs; i++) {
        const char *s = p->specs[i], *eq = strchr(s, '=');
        if (!eq) return ts_fail(TS_ERR_ARG, "edit '%s': give KIND=SPEC", s);
        size_t k = (size_t)(eq - s);
        const char *v = eq + 1;
        if (k == 6 && strncmp(s, "ablate", k) == 0) TS_TRY(ts_experiment_add_ablate(ex, v));
        else if (k == 5 && strncmp(s, "patch", k) == 0) TS_TRY(ts_experiment_add_patch(ex, v));
        else if (k == 3 && strncmp(s, "add", k) == 0) TS_TRY(ts_experiment_add_add(ex, v));
        else if (k == 9 && strncmp(s, "mean-from", k) == 0) TS_TRY(ts_experiment_mean_from(ex, v));
        else return ts_fail(TS_ERR_ARG, "edit '%s': the kinds are ablate, patch, add and mean-from", s);
    }
    return ex->n_edits ? ts_experiment_check(ex, cfg) : TS_OK;
}

/* Open the trace of a pass: the language model's metadata (its config, the
 * tokens' labels, the tokenizer), the edits, the level asked for. */
static ts_status open_trace(const ts_capi_model *c, const ts_capi_pass *p, const int32_t *ids, int B, int S,
                            const ts_experiment *ex, ts_trace_writer **w) {
    ts_trace_options opt;
    ts_trace_options_default(&opt);
    opt.level = TS_TRACE_VALUES;
    if (p->trace_level) TS_TRY(ts_trace_level_parse(p->trace_level, &opt.level));
    char *meta = NULL;
    char *argv[] = {"python"};
    ts_status st;
    if (c->m.cfg.arch == TS_ARCH_ENCODER_DECODER || c->m.cfg.input != TS_INPUT_TOKENS) {
        char *config = ts_model_config_to_json(&c->m.cfg);
        st = config ? ts_trace_metadata_build(&meta, config, NULL, 0, NULL, 0, 1, argv)
                    : ts_fail(TS_ERR_NOMEM, "out of memory");
        free(config);
    } else {
        st = ts_trace_metadata_lm(&meta, &c->m.cfg, &c->tok, ids, B, S, 1, argv);
    }
    char *edits = !st && ex->n_edits ? ts_experiment_to_json(ex) : NULL;
    if (!st && edits) st = ts_trace_metadata_add_json(&meta, "edits", edits);
    if (!st && p->n_edit) {
        ts_text_buf b = {0};
        ts_text_buf_str(&b, "[");
        for (int i = 0; i < p->n_edit; i++) {
            ts_text_buf_printf(&b, "%s\"", i ? "," : "");
            for (const char *s = p->edit_globs[i]; *s; s++) {
                if (*s == '"' || *s == '\\') ts_text_buf_add(&b, "\\", 1);
                ts_text_buf_add(&b, s, 1);
            }
            ts_text_buf_str(&b, "\"");
        }
        ts_text_buf_str(&b, "]");
        char *json = ts_text_buf_take(&b);
        st = json ? ts_trace_metadata_add_json(&meta, "python_hooks", json) : ts_fail(TS_ERR_NOMEM, "out of memory");
        free(json);
    }
    free(edits);
    if (!st) st = ts_trace_writer_open(p->trace_path, meta, &opt, w);
    free(meta);
    return st;
}

/* One pass of in (B, S; T for the decoder): the edits, watches and trace
 * of p; the output copied into out. ids: the token ids, for a trace's labels (NULL for vectors). */
static ts_status forward_pass(ts_capi_model *c, const ts_model_input *in, const int32_t *ids, int B, int S, int T,
                              const ts_capi_pass *p, float *out, int64_t out_cap, int64_t *out_numel) {
    TS_TRY(ensure(c, B, S, T));
    ts_experiment ex;
    ts_status st = build_experiment(p, &c->m.cfg, &ex);
    ts_trace_writer *w = NULL;
    if (!st && p && p->trace_path) st = open_trace(c, p, ids, B, S, &ex, &w);
    pass_ctx x = {.p = p};
    if (w) x.inner = ts_trace_writer_hook(w);
    if (ex.n_edits) ts_experiment_attach(&ex, &x.exp);
    ts_hook hook = pass_hook(&x);
    ts_tensor logits;
    if (!st) st = ts_model_forward(&c->m, in, &hook, &logits);
    if (!st && w && c->m.cfg.head == TS_HEAD_LM) st = ts_model_probs_step(&hook, &logits, 1.0f);
    if (!st) {
        *out_numel = ts_tensor_numel(&logits);
        if (out && *out_numel > out_cap) st = ts_fail(TS_ERR_ARG, "internal: no room for the logits");
        else if (out) {
            ts_tensor dst;
            ts_tensor_view(&dst, out, logits.rank, logits.shape);
            st = ts_tensor_copy(&dst, &logits);
        }
    }
    if (w && st) ts_trace_writer_abort(w);
    else if (w) st = ts_trace_writer_close(w, NULL);
    ts_experiment_free(&ex);
    return st;
}

ts_status ts_capi_forward(ts_capi_model *c, const int32_t *ids, const int32_t *types, int B, int S, const int32_t *tgt,
                          int T, const ts_capi_pass *p, float *out, int64_t out_cap, int64_t *out_numel) {
    bool two = c->base.arch == TS_ARCH_ENCODER_DECODER;
    if (two && !tgt) return ts_fail(TS_ERR_ARG, "an encoder-decoder reads a target too: give tgt ids");
    if (!two && tgt) return ts_fail(TS_ERR_ARG, "this model has one stack: it reads no target");
    if (c->base.input != TS_INPUT_TOKENS)
        return ts_fail(TS_ERR_ARG, "this model reads vectors (it has no token table): give a float array (B, S, %d)",
                       c->base.in_dim ? c->base.in_dim : c->base.d_model);
    TS_TRY(check_ids(c, ids, (int64_t)B * S, "ids"));
    if (tgt) TS_TRY(check_ids(c, tgt, (int64_t)B * T, "tgt"));
    /* BERT's segments, in run --token-types' words */
    int K = c->base.type_vocab;
    if (types && K < 1)
        return ts_fail(TS_ERR_ARG, "token_types: this model has no token type embeddings (BERT's segments)");
    for (int64_t i = 0; types && i < (int64_t)B * S; i++)
        if (types[i] < 0 || types[i] >= K)
            return ts_fail(TS_ERR_ARG, "token_types: type %d at position %lld is not one of the model's %d (0 to %d)",
                           (int)types[i], (long long)i, K, K - 1);
    ts_model_input in = {.src_ids = ids, .src_types = types, .tgt_ids = tgt};
    return forward_pass(c, &in, ids, B, S, T, p, out, out_cap, out_numel);
}

ts_status ts_capi_forward_vectors(ts_capi_model *c, const float *x, int B, int S, int W, const float *tgt, int T,
                                  const ts_capi_pass *p, float *out, int64_t out_cap, int64_t *out_numel) {
    const ts_model_config *b = &c->base;
    bool two = b->arch == TS_ARCH_ENCODER_DECODER;
    int width = b->in_dim ? b->in_dim : b->d_model;
    if (b->input != TS_INPUT_EMBEDDED) return ts_fail(TS_ERR_ARG, "this model reads token ids: give integer ids");
    if (W != width) return ts_fail(TS_ERR_SHAPE, "x is (%d, %d, %d): this model reads vectors of %d", B, S, W, width);
    if (two && !tgt) return ts_fail(TS_ERR_ARG, "an encoder-decoder reads a target too: give tgt (B, T, %d)", b->d_model);
    if (!two && tgt) return ts_fail(TS_ERR_ARG, "this model has one stack: it reads no target");
    ts_model_input in = {.src_embedded = x, .tgt_embedded = tgt, .mem_pad_set = two};
    return forward_pass(c, &in, NULL, B, S, T, p, out, out_cap, out_numel);
}

/* ---- generation ---- */

static bool cached_ok(const ts_capi_model *c, int S, int n, const ts_capi_pass *p) {
    return ts_model_can_cache(&c->base, NULL) && S + n <= max_positions(&c->base) && !(p && p->trace_path);
}

ts_status ts_capi_generate(ts_capi_model *c, const int32_t *ids, int S, int n, float temperature, int top_k,
                           uint64_t seed, const ts_capi_pass *p, int32_t *out, float *probs) {
    if (ts_model_is_masked_lm(&c->base))
        return ts_fail(TS_ERR_ARG, "generate: a masked language model (BERT): it scores the token at each position, not "
                       "the next one, so it does not write text; m(ids) shows what it predicts");
    if (!ts_model_is_lm(&c->base)) return ts_fail(TS_ERR_ARG, "generate: this model is not a language model");
    if (S < 1) return ts_fail(TS_ERR_ARG, "generate: give a prompt of at least one token");
    if (n < 0) return ts_fail(TS_ERR_ARG, "generate: %d new tokens", n);
    if (!(temperature >= 0)) return ts_fail(TS_ERR_ARG, "generate: temperature %g; use 0 (argmax) or more",
                                             (double)temperature);
    TS_TRY(check_ids(c, ids, S, "ids"));
    int V = c->base.vocab, most = max_positions(&c->base);
    int window = c->base.seq < most ? (c->base.pe == TS_PE_LEARNED ? most : c->base.seq) : most;
    if (window > 4096) window = 4096;
    memcpy(out, ids, sizeof(int32_t) * (size_t)S);
    ts_experiment ex;
    ts_status st = build_experiment(p, &c->base, &ex);
    if (!st && cached_ok(c, S, n, p)) st = ts_experiment_check_decode(&ex);
    pass_ctx x = {.p = p};
    if (ex.n_edits) ts_experiment_attach(&ex, &x.exp);
    ts_hook hook = pass_hook(&x);
    uint64_t key = ts_mix64(seed ^ 0x6E4Eull);
    ts_kv_cache kv = {0};
    bool cached = !st && cached_ok(c, S, n, p);
    /* a batch of one at the longest window: the cache's model */
    if (!st) st = ensure(c, 1, cached ? (S + n < c->built_seq ? c->built_seq : S + n) : (S + n < window ? S + n : window), 0);
    if (!st && cached) st = ts_kv_cache_init(&kv, &c->m);
    const float *row = NULL;
    for (int i = 0; cached && !st && i < S; i += kv.rows) {
        int k = S - i < kv.rows ? S - i : kv.rows;
        x.pos0 = ex.pos0 = i;
        const float *rows;
        st = ts_model_decode(&c->m, &kv, ids + i, k, &hook, &rows);
        if (!st) row = rows + (int64_t)(k - 1) * V;
    }
    int32_t *win = cached || st ? NULL : calloc((size_t)window, sizeof *win);
    if (!cached && !st && !win) st = ts_fail(TS_ERR_NOMEM, "out of memory");
    for (int k = 0; k < n && !st; k++) {
        int len = S + k;
        if (cached && k > 0) {
            x.pos0 = ex.pos0 = len - 1;
            st = ts_model_decode(&c->m, &kv, out + len - 1, 1, &hook, &row);
        } else if (!cached) {
            int from = len > window ? len - window : 0, m = len - from;
            memcpy(win, out + from, sizeof(int32_t) * (size_t)m);
            x.pos0 = from;
            ex.pos0 = 0;
            st = ensure(c, 1, m, 0);
            ts_model_input in = {.src_ids = win};
            ts_tensor logits;
            if (!st) st = ts_model_forward(&c->m, &in, &hook, &logits);
            if (!st) row = logits.data + (int64_t)(m - 1) * V;
        }
        if (st) break;
        out[len] = ts_model_sample(row, V, temperature, top_k, ts_u01(key, (uint64_t)k),
                                   probs ? probs + (size_t)k * V : NULL);
        if (out[len] < 0)
            st = ts_fail(TS_ERR_ARG, "the logits for new token %d hold NaN or +Inf, so no token can be drawn", k + 1);
    }
    free(win);
    ts_kv_cache_free(&kv);
    ts_experiment_free(&ex);
    return st;
}

/* ---- attribution ---- */

ts_status ts_capi_attribute(ts_capi_model *c, const int32_t *ids, int S, const int32_t *answer, const int32_t *wrong,
                            float *share, int64_t share_cap, float *logit, int32_t *answer_out, int32_t *wrong_out,
                            char **part_names) {
    *part_names = NULL;
    if (ts_model_is_masked_lm(&c->base))
        return ts_fail(TS_ERR_ARG, "attribute: this is a masked language model (BERT), whose logits score the token "
                       "at each position, not the next one: use m.run(ids, ablate=, patch=), hooks, or tscope run "
                       "--lens");
    if (c->base.input != TS_INPUT_TOKENS || !ts_model_is_lm(&c->base))
        return ts_fail(TS_ERR_ARG, "attribute: this model is not a language model");
    TS_TRY(check_ids(c, ids, S, "ids"));
    TS_TRY(ensure(c, 1, S, 0));
    ts_dla d;
    TS_TRY(ts_experiment_dla(&c->m, ids, answer, wrong, &d));
    ts_status st = (int64_t)S * d.parts > share_cap ? ts_fail(TS_ERR_ARG, "internal: no room for the shares") : TS_OK;
    ts_text_buf b = {0};
    for (int k = 0; !st && k < d.parts; k++) {
        char name[48];
        ts_dla_part_name(&d, k, name, sizeof name);
        ts_text_buf_printf(&b, "%s\n", name);
    }
    if (!st) {
        memcpy(share, d.share, sizeof(float) * (size_t)S * (size_t)d.parts);
        memcpy(logit, d.logit, sizeof(float) * (size_t)S);
        memcpy(answer_out, d.answer, sizeof(int32_t) * (size_t)S);
        memcpy(wrong_out, d.wrong, sizeof(int32_t) * (size_t)S);
        *part_names = ts_text_buf_take(&b);
        if (!*part_names) st = ts_fail(TS_ERR_NOMEM, "out of memory");
    } else {
        free(ts_text_buf_take(&b));
    }
    ts_dla_free(&d);
    return st;
}

/* ---- traces ---- */

ts_status ts_capi_trace_open(const char *path, ts_trace **out) { return ts_trace_open(path, out); }
void ts_capi_trace_close(ts_trace *t) { ts_trace_close(t); }
int64_t ts_capi_trace_count(const ts_trace *t) { return ts_trace_count(t); }
const char *ts_capi_trace_metadata(const ts_trace *t) { return ts_trace_metadata(t); }

ts_status ts_capi_trace_step(const ts_trace *t, int64_t i, const char **name, int *op, int *tag, int *rank,
                             int64_t *shape, int64_t *values_shape, int *batch_index, int *kept) {
    const ts_trace_step *s = ts_trace_step_at(t, i);
    if (!s) return ts_fail(TS_ERR_ARG, "trace: no step %lld", (long long)i);
    *name = s->name;
    *op = (int)s->op;
    *tag = (int)s->tag;
    *rank = s->rank;
    memcpy(shape, s->shape, sizeof s->shape);
    memcpy(values_shape, s->values_shape, sizeof s->values_shape);
    *batch_index = s->batch_index;
    *kept = s->has_values;
    return TS_OK;
}

ts_status ts_capi_trace_values(ts_trace *t, int64_t i, const float **values) { return ts_trace_values(t, i, values); }

ts_status ts_capi_metadata(const ts_capi_model *c, const int32_t *ids, int B, int S, char **out) {
    char *argv[] = {"python"};
    if (c->m.cfg.input == TS_INPUT_TOKENS && c->m.cfg.arch != TS_ARCH_ENCODER_DECODER && ids)
        return ts_trace_metadata_lm(out, &c->m.cfg, &c->tok, ids, B, S, 1, argv);
    return ts_trace_metadata_build(out, c->config, NULL, 0, NULL, 0, 1, argv);
}

ts_status ts_capi_writer_open(const char *path, const char *metadata_json, ts_trace_writer **out) {
    ts_trace_options opt;
    ts_trace_options_default(&opt);
    opt.level = TS_TRACE_VALUES;
    return ts_trace_writer_open(path, metadata_json, &opt, out);
}

ts_status ts_capi_writer_step(ts_trace_writer *w, const char *name, int op, int tag, int rank, const int64_t *shape,
                              const float *data) {
    if (op < 0 || op >= TS_OP_COUNT || tag < 0 || tag >= TS_TAG_COUNT || rank < 0 || rank > TS_MAX_RANK)
        return ts_fail(TS_ERR_ARG, "trace: step %s has op %d, tag %d, rank %d", name, op, tag, rank);
    ts_tensor t;
    float *d;
    memcpy(&d, &data, sizeof d); /* the writer only reads */
    TS_TRY(ts_tensor_view(&t, d, rank, shape));
    return ts_trace_writer_step(w, name, (ts_op)op, &t, (ts_tag)tag);
}

ts_status ts_capi_writer_close(ts_trace_writer *w, int keep) {
    if (!keep) {
        ts_trace_writer_abort(w);
        return TS_OK;
    }
    return ts_trace_writer_close(w, NULL);
}

/* ---- figures: as `tscope png` draws them ---- */

typedef struct figure_job {
    ts_scene *sc;
    ts_render_layout *layout;
    int (*hl)[4];
    int n_hl;
} figure_job;

static ts_status draw_figure(void *ctx, cairo_t *cr, double w, double h) {
    figure_job *job = ctx;
    ts_status st = ts_scene_draw(job->sc, cr, (ts_render_rect){0, 0, w, h}, NULL, job->layout);
    for (int i = 0; !st && i < job->n_hl; i++)
        st = ts_render_frame_cells(cr, job->layout, job->hl[i][0], job->hl[i][1], job->hl[i][2], job->hl[i][3]);
    return st;
}

#define FIGURE_HL_MAX 16

ts_status ts_capi_figure(const char *trace_path, const char *step, int head, int batch, const char *title,
                         const char *highlight, const char *out_path) {
    ts_figure_format format;
    if (!ts_figure_format_from_path(out_path, &format))
        return ts_fail(TS_ERR_ARG, "%s: the extension picks the format: .png, .svg or .pdf", out_path);
    int hl[FIGURE_HL_MAX][4], n_hl = 0;
    for (const char *s = highlight; s && *s;) {
        const char *end = strchr(s, ';');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        const char *comma = memchr(s, ',', len);
        if (n_hl == FIGURE_HL_MAX || !comma || !ts_render_parse_range(s, (size_t)(comma - s), hl[n_hl]) ||
            !ts_render_parse_range(comma + 1, len - (size_t)(comma + 1 - s), hl[n_hl] + 2))
            return ts_fail(TS_ERR_ARG, "highlight %s: give ROW,COL or ranges like 3-5,0-2 (* for all), counting "
                                       "from 0, at most %d", highlight, FIGURE_HL_MAX);
        n_hl++;
        s = end ? end + 1 : s + len;
    }
    ts_trace *t;
    TS_TRY(ts_trace_open(trace_path, &t));
    ts_scene_request rq = ts_scene_request_default(step);
    rq.head = head;
    rq.batch = batch < 0 ? 0 : batch;
    rq.trace_path = trace_path;
    ts_scene *sc = NULL;
    ts_status st = ts_scene_build(&sc, t, &rq);
    ts_render_layout *layout = st ? NULL : calloc(1, sizeof *layout);
    if (!st && !layout) st = ts_fail(TS_ERR_NOMEM, "out of memory");
    if (!st) {
        ts_scene_set_title(sc, title);
        int w, h;
        ts_scene_size(sc, &w, &h);
        figure_job job = {sc, layout, hl, n_hl};
        ts_figure_spec spec = {.format = format, .width = w, .height = h, .scale = 1,
                               .title = ts_scene_step(sc) ? ts_scene_step(sc)->name : step};
        st = ts_figure_write(out_path, &spec, draw_figure, &job);
    }
    free(layout);
    ts_scene_free(sc);
    ts_trace_close(t);
    return st;
}
