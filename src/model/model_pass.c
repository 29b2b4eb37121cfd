/* model_pass: the plumbing of one forward pass (model_pass.h): its context,
 * handing steps to the hook, and where each value of a block goes. The
 * arithmetic is model_forward.c's; nothing here computes a step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_pass.h"
#include "tscope/kernels.h"

void fwd_setup(fwd *f, ts_model *m, ts_model_acts *a, const ts_hook *hook) {
    memset(f, 0, sizeof *f);
    f->m = m;
    f->c = &m->cfg;
    f->a = a;
    f->hook = hook;
    f->dry = m->dry;
    f->watch = m->dry || (hook && hook->fn); /* an edit alone: made one by one where it acts (fwd_watches) */
    f->train = m->training;
    f->p = m->training ? m->cfg.dropout : 0.0f;
    f->B = m->cfg.batch;
    f->S = m->S;
    f->T = m->T;
    f->D = m->cfg.d_model;
    f->H = m->cfg.heads;
    f->hd = ts_model_head_dim(&m->cfg);
    f->KV = ts_model_kv_heads(&m->cfg);
    f->Q = f->H * f->hd;
    f->threads = ts_kernels_threads();
    /* A parallel region costs microseconds (much more on a busy machine);
     * below ~64K elements a step is cheaper on one thread. */
    f->par = f->threads > 1 && (int64_t)f->B * m->L * f->D >= (1 << 16);
}

bool fwd_watches(const fwd *f, const char *prefix, const char *const *leaves) {
    if (f->watch) return true;
    if (!ts_hook_edits(f->hook)) return false;
    char name[2 * TS_MODEL_NAME_MAX];
    for (int i = 0; leaves[i]; i++) {
        snprintf(name, sizeof name, "%s.%s", prefix, leaves[i]);
        if (ts_hook_edit_touches(f->hook, name)) return true;
    }
    return false;
}

/* ---- handing steps to the hook ---------------------------------------------------- */

/* "prefix.leaf", or leaf alone at the top. */
static void step_name(char *name, size_t size, const char *prefix, const char *leaf) {
    if (prefix && prefix[0])
        snprintf(name, size, "%s.%s", prefix, leaf);
    else
        snprintf(name, size, "%s", leaf);
}

ts_status fwd_emit_like(fwd *f, const char *prefix, const char *leaf, ts_op op, const ts_tensor *t, ts_tag tag,
                        bool alias, const ts_tensor *of, float factor) {
    if (f->sum) {
        /* What keeping every value costs: views and like steps a trace
         * stores as views of values it keeps anyway cost nothing; nor do
         * parameters (a norm's gamma and beta: D floats each). */
        bool costs_nothing = alias || ts_op_is_view(op) || op == TS_OP_PARAM ||
                    (factor != 0.0f && ts_hook_exact_factor(factor));
        f->sum->steps++;
        if (!costs_nothing) f->sum->kept_bytes += sizeof(float) * (size_t)ts_tensor_numel(t);
    }
    if (!f->hook || (!f->hook->fn && !f->hook->edit)) return TS_OK;
    char name[2 * TS_MODEL_NAME_MAX];
    step_name(name, sizeof name, prefix, leaf);
    if (f->hook->edit && !f->dry) { /* an experiment may change the step before anything reads it */
        bool edited;
        TS_TRY(ts_hook_edit_step(f->hook, name, op, t, tag, &edited));
        if (edited) {
            f->edits++;
            return ts_hook_call(f->hook, name, op, t, tag); /* no longer like any earlier step */
        }
    }
    if (factor != 0.0f) return ts_hook_call_like(f->hook, name, op, t, tag, of, factor);
    return ts_hook_call(f->hook, name, op, t, tag);
}

ts_status fwd_emit(fwd *f, const char *prefix, const char *leaf, ts_op op, const ts_tensor *t, ts_tag tag,
                   bool alias) {
    return fwd_emit_like(f, prefix, leaf, op, t, tag, alias, NULL, alias ? 1.0f : 0.0f);
}

/* Offer the hook a step that will be the previous one times factor before
 * making it: *done when the hook recorded it from what it holds, and the
 * model may leave it unmade (ts_hook_derive_fn). Never in a dry run, which
 * counts every step. */
ts_status fwd_offer_ahead(fwd *f, const char *prefix, const char *leaf, ts_op op, const ts_tensor *t, ts_tag tag,
                          float factor, bool *done) {
    *done = false;
    if (f->dry || !f->hook || !f->hook->derive_next || ts_hook_edits(f->hook)) return TS_OK;
    char name[2 * TS_MODEL_NAME_MAX];
    step_name(name, sizeof name, prefix, leaf);
    return ts_hook_try_derive(f->hook, name, op, t, tag, factor, done);
}

/* Offer the hook steps (names: leaves under prefix) as one group:
 * *done when it recorded them (ts_hook_group_fn). Never in a dry run, which
 * counts every step. */
ts_status fwd_offer_group(fwd *f, const char *prefix, const ts_hook_step *leaves, int n, bool *done) {
    *done = false;
    if (f->dry || f->sum || !f->hook || !f->hook->group || n > TS_HOOK_GROUP_MAX || ts_hook_edits(f->hook))
        return TS_OK;
    char names[TS_HOOK_GROUP_MAX][2 * TS_MODEL_NAME_MAX];
    ts_hook_step steps[TS_HOOK_GROUP_MAX];
    for (int i = 0; i < n; i++) {
        step_name(names[i], sizeof names[i], prefix, leaves[i].name);
        steps[i] = leaves[i];
        steps[i].name = names[i];
    }
    return ts_hook_try_group(f->hook, steps, n, done);
}

static int64_t count_params(const ts_model *m, const char *prefix) {
    int64_t n = 0;
    size_t len = strlen(prefix);
    for (int i = 0; i < m->n_params; i++)
        if (strncmp(m->params[i].name, prefix, len) == 0) n += m->params[i].numel;
    return n;
}

ts_status fwd_module_done(fwd *f, const char *name, const char *param_prefix, const ts_tensor *out, double flops0) {
    ts_model_summary *s = f->sum;
    if (!s) return TS_OK;
    ts_model_module *grown = realloc(s->modules, sizeof *grown * (size_t)(s->count + 1));
    if (!grown) return ts_fail(TS_ERR_NOMEM, "model: out of memory for the module table");
    s->modules = grown;
    ts_model_module *mod = &s->modules[s->count++];
    memset(mod, 0, sizeof *mod);
    snprintf(mod->name, sizeof mod->name, "%s", name);
    mod->rank = out->rank;
    for (int d = 0; d < out->rank; d++) mod->shape[d] = out->shape[d];
    mod->params = param_prefix ? count_params(f->m, param_prefix) : 0;
    mod->flops = f->flops - flops0;
    return TS_OK;
}

/* ---- where a block's values go ------------------------------------------------------ */

ts_kept_attn fwd_scratch_attn(const fwd *f, bool cross, int Sq, int Sk) {
    int64_t B = f->B, D = f->D;
    ts_kept_attn b = {f->a->big, NULL, NULL, f->a->ctx, NULL};
    if (cross) {
        b.kv = at(b.q, B * Sq * D);
        b.att = at(b.kv, B * Sk * 2 * D);
    } else { /* q, k, v | RoPE's rotated q and k | the scores */
        b.rot = at(b.q, B * Sq * ts_model_qkv_floats(f->c));
        b.att = at(b.rot, B * Sq * ts_model_rot_floats(f->c));
    }
    return b;
}

const float *fwd_enc_key_mask(const fwd *f) { return f->c->mask == TS_MASK_NONE ? NULL : f->a->src_mask; }

void ts_layer_names_of(ts_layer_names *nm, const char *stack, int i) {
    snprintf(nm->p, sizeof nm->p, "%s.layers.%d", stack, i);
    snprintf(nm->self, sizeof nm->self, "%s.layers.%d.self_attn", stack, i);
    snprintf(nm->self_p, sizeof nm->self_p, "%s.layers.%d.self_attn.", stack, i);
    snprintf(nm->cross, sizeof nm->cross, "%s.layers.%d.cross_attn", stack, i);
    snprintf(nm->cross_p, sizeof nm->cross_p, "%s.layers.%d.multihead_attn.", stack, i);
    snprintf(nm->ffn, sizeof nm->ffn, "%s.layers.%d.ffn", stack, i);
    snprintf(nm->lin, sizeof nm->lin, "%s.layers.%d.linear", stack, i);
    for (int k = 0; k < 3; k++) {
        snprintf(nm->norm[k], sizeof nm->norm[k], "%s.layers.%d.norm%d", stack, i, k + 1);
        snprintf(nm->norm_p[k], sizeof nm->norm_p[k], "%s.layers.%d.norm%d.", stack, i, k + 1);
    }
}

/* Residual sublayer k of b, out the layer's output buffer:
 *   kept (training): every value in the layer's own buffers;
 *   post-LN: the sublayer's output and the sum in tmp, the norm writes out;
 *   pre-LN: the norm writes tmp, which the sublayer reads before it writes
 *   its output there; the sum goes to out (the stream, in place). */
static void residual_at(fwd *f, block *b, int k, const ts_norm_weights *w, float *out) {
    bool pre = f->c->norm == TS_NORM_PRE;
    ts_kept_sub *kept = b->kept ? &b->kept->sub[k] : NULL;
    ts_model_acts *a = f->a;
    residual_step *r = &b->res[k];
    memset(r, 0, sizeof *r);
    r->kept = kept;
    r->sub = kept ? f->keep->fout : a->tmp;
    r->sum = kept ? kept->res : pre ? out : a->tmp;
    /* pre-LN's first norm reads the layer's input, traced already */
    ts_op skip = f->c->variants & TS_VARIANT_NO_RESIDUAL ? TS_OP_DROPOUT : TS_OP_ADD;
    r->norm = (norm_step){b->nm.norm[k], b->nm.norm_p[k], w, f->c->eps, pre && k == 0 ? TS_OP_INPUT : skip,
                          pre && k == 0, kept ? kept->norm.out : pre ? a->tmp : out,
                          kept ? kept->norm.mean : a->mean, kept ? kept->norm.rstd : a->rstd};
}

static attn_step attn_at(const char *name, const char *params, const ts_attn_weights *w, const float *key_mask,
                         bool causal, int din, const float *mem, int Sk, ts_kept_attn buf) {
    attn_step s;
    memset(&s, 0, sizeof s);
    s.name = name, s.params = params, s.w = w, s.key_mask = key_mask, s.causal = causal, s.din = din;
    s.mem = mem, s.Sk = Sk, s.buf = buf;
    return s;
}

static void ffn_at(fwd *f, block *b, int k, const ts_ffn_weights *w) {
    b->ffn = (ffn_step){b->nm.ffn, b->nm.lin, w, b->kept ? b->kept->ffn : (ts_kept_ffn){f->a->big, f->a->big},
                        &b->res[k].key_inner};
}

void fwd_self_attn_block(fwd *f, block *b, int i, const ts_self_attn_layer_weights *w, const float *in, float *out) {
    memset(b, 0, sizeof *b);
    ts_layer_names_of(&b->nm, ts_model_stack_name(f->c), i);
    b->S = f->S;
    b->kept = f->keep ? &f->keep->enc[i] : NULL;
    if (b->kept) b->kept->in = in;
    int Sk = f->cache ? f->pos0 + f->S : f->S;
    b->attn[0] = attn_at(b->nm.self, b->nm.self_p, &w->self_attn, fwd_enc_key_mask(f), f->c->causal, f->D, NULL, 0,
                         b->kept ? b->kept->attn[0] : fwd_scratch_attn(f, false, f->S, Sk));
    if (f->cache) {
        size_t at_layer = (size_t)i * (size_t)f->cache->capacity * (size_t)(f->KV * f->hd);
        b->attn[0].cache_k = f->cache->k + at_layer;
        b->attn[0].cache_v = f->cache->v + at_layer;
    }
    residual_at(f, b, 0, &w->norm1, out);
    residual_at(f, b, 1, &w->norm2, out);
    if (f->c->parallel_residual) { /* norm2 reads the layer's input too; the attention's output stays in tmp */
        b->res[1].norm.in_op = TS_OP_INPUT, b->res[1].norm.in_traced = true;
        b->res[1].norm.out = b->res[1].sub = f->a->ctx;
    }
    ffn_at(f, b, 1, &w->ffn);
}

void fwd_cross_attn_block(fwd *f, block *b, int i, const ts_cross_attn_layer_weights *w, const float *mem, const float *in,
                          float *out) {
    memset(b, 0, sizeof *b);
    ts_layer_names_of(&b->nm, "decoder", i);
    int T = f->T, S = f->S;
    b->S = T;
    b->kept = f->keep ? &f->keep->dec[i] : NULL;
    if (b->kept) b->kept->in = in;
    b->attn[0] = attn_at(b->nm.self, b->nm.self_p, &w->self_attn, f->a->tgt_mask, !f->c->tgt_not_causal, f->D,
                         NULL, 0, b->kept ? b->kept->attn[0] : fwd_scratch_attn(f, false, T, T));
    b->attn[1] = attn_at(b->nm.cross, b->nm.cross_p, &w->cross_attn, f->mem_mask, false, f->D, mem, S,
                         b->kept ? b->kept->attn[1] : fwd_scratch_attn(f, true, T, S));
    residual_at(f, b, 0, &w->norm1, out);
    residual_at(f, b, 1, &w->norm2, out);
    residual_at(f, b, 2, &w->norm3, out);
    ffn_at(f, b, 2, &w->ffn);
}

void fwd_cache_append(fwd *f, const attn_step *s, int S, heads_at *ck, heads_at *cv) {
    int hd = f->hd, D = f->KV * hd; /* a cache row: every key/value head side by side */
    const heads_at *k = &s->k, *v = &s->v;
    for (int r = 0; r < S; r++)
        for (int h = 0; h < f->KV; h++) {
            memcpy(s->cache_k + (int64_t)(f->pos0 + r) * D + h * hd, k->base + h * k->hstride + (int64_t)r * k->ld,
                   sizeof(float) * (size_t)hd);
            memcpy(s->cache_v + (int64_t)(f->pos0 + r) * D + h * hd, v->base + h * v->hstride + (int64_t)r * v->ld,
                   sizeof(float) * (size_t)hd);
        }
    *ck = (heads_at){s->cache_k, 0, hd, D};
    *cv = (heads_at){s->cache_v, 0, hd, D};
}
