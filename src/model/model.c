/* model: the parameter size table, the one block it carves, initialisation,
 * and the exchange of values with PyTorch's state_dict.
 *
 * The fused qkv projection, and why its rows are stored per head.
 * Seed 000 computes qkv = qkv_layer(x) (B, S, 3D), views it as (B, S, H, 3hd),
 * permutes to (B, H, S, 3hd) and chunks the last dim into q, k, v: so in the
 * seed, head h's q, k and v come from the 3hd consecutive columns h*3hd...
 * PyTorch's nn.MultiheadAttention keeps in_proj_weight as [Wq; Wk; Wv]
 * (3D, D): head h's q is rows h*hd.. of Wq. Both compute the same function of
 * their own weights; they differ in which rows feed which head.
 * tscope traces the seed's steps exactly (qkv, the (B,S,H,3hd) view, the
 * permute, the chunk: all views of one buffer, no copies) and stores
 * in_proj_weight in the seed's row order, TS_LAYOUT_QKV_HEADS: internal row
 * h*3hd + p*hd + j holds PyTorch's row p*D + h*hd + j (p = 0 q, 1 k, 2 v).
 * ts_model_load_param and ts_model_export_param reorder on the way in and out,
 * so a PyTorch checkpoint gives PyTorch's numbers, and one GEMM of width 3D
 * still makes all of qkv. Cross-attention takes q from the decoder and k, v
 * from the memory, so its rows are [Wq; per head k_h, v_h]
 * (TS_LAYOUT_Q_KV_HEADS): two GEMMs, each output viewed per head.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_impl.h"

/* Walks the size table: building it (block NULL, appending rows) or pointing
 * a weights struct into a block (rows already there, checked by name). */
typedef struct table_walk {
    ts_model *m;
    bool build;
    int next;     // row to visit when pointing
    int capacity; // rows allocated when building
    float *block;
    ts_status status;
} table_walk;

static float *param(table_walk *t, ts_param_layout layout, ts_param_init init, float scale, int rank,
                    int64_t d0, int64_t d1, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 8, 9)))
#endif
    ;

static float *param(table_walk *t, ts_param_layout layout, ts_param_init init, float scale, int rank,
                    int64_t d0, int64_t d1, const char *fmt, ...) {
    if (t->status) return NULL;
    char name[TS_MODEL_NAME_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    ts_model *m = t->m;
    if (!t->build) {
        const ts_model_param_info *p = &m->params[t->next++];
        return t->block ? t->block + p->offset : NULL;
    }
    if (m->n_params == t->capacity) {
        int cap = t->capacity ? t->capacity * 2 : 64;
        ts_model_param_info *grown = realloc(m->params, sizeof *grown * (size_t)cap);
        if (!grown) {
            t->status = ts_fail(TS_ERR_NOMEM, "model: out of memory for the parameter table");
            return NULL;
        }
        m->params = grown;
        t->capacity = cap;
    }
    ts_model_param_info *p = &m->params[m->n_params++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->rank = rank;
    p->shape[0] = d0;
    p->shape[1] = rank == 2 ? d1 : 0;
    p->numel = rank == 2 ? d0 * d1 : d0;
    p->offset = (size_t)m->n_floats;
    p->layout = layout;
    p->init = init;
    p->init_scale = scale;
    m->n_floats += (p->numel + 15) / 16 * 16; // each row of the table starts 64-byte aligned
    return NULL;
}

static float uniform_bound(int64_t fan_in) { return (float)(1.0 / sqrt((double)fan_in)); }

static void walk_attn(table_walk *t, ts_attn_weights *w, const char *prefix, int D, int din,
                      ts_param_layout layout) {
    const ts_model_config *c = &t->m->cfg;
    float xavier = (float)sqrt(6.0 / (double)(din + 3 * D));
    memset(w, 0, sizeof *w);
    w->in_w = param(t, layout, TS_INIT_UNIFORM, xavier, 2, 3 * D, din, "%s.in_proj_weight", prefix);
    w->in_b = c->no_qkv_bias ? NULL : param(t, layout, TS_INIT_ZEROS, 0, 1, 3 * D, 0, "%s.in_proj_bias", prefix);
    w->out_w = param(t, TS_LAYOUT_TORCH, TS_INIT_UNIFORM, uniform_bound(D), 2, D, D, "%s.out_proj.weight", prefix);
    w->out_b = c->no_out_bias ? NULL
                              : param(t, TS_LAYOUT_TORCH, TS_INIT_ZEROS, 0, 1, D, 0, "%s.out_proj.bias", prefix);
}

/* A linear layer's weight (out, in) and, unless bias is false, its bias. */
static void walk_linear(table_walk *t, float **w, float **b, bool bias, int out, int in, const char *prefix,
                        const char *name) {
    *w = param(t, TS_LAYOUT_TORCH, TS_INIT_UNIFORM, uniform_bound(in), 2, out, in, "%s.%s.weight", prefix, name);
    *b = bias ? param(t, TS_LAYOUT_TORCH, TS_INIT_UNIFORM, uniform_bound(in), 1, out, 0, "%s.%s.bias", prefix, name)
              : NULL;
}

/* Today's attention: q, k and v projected apart, kv_heads key/value heads of head_dim each. */
static void walk_split_attn(table_walk *t, ts_attn_weights *w, const char *prefix) {
    const ts_model_config *c = &t->m->cfg;
    int D = c->d_model, hd = ts_model_head_dim(c), Q = c->heads * hd, KV = ts_model_kv_heads(c) * hd;
    bool qkv_bias = !c->no_qkv_bias;
    memset(w, 0, sizeof *w);
    walk_linear(t, &w->q_w, &w->q_b, qkv_bias, Q, D, prefix, "q_proj");
    walk_linear(t, &w->k_w, &w->k_b, qkv_bias, KV, D, prefix, "k_proj");
    walk_linear(t, &w->v_w, &w->v_b, qkv_bias, KV, D, prefix, "v_proj");
    walk_linear(t, &w->out_w, &w->out_b, !c->no_out_bias, D, Q, prefix, "out_proj");
}

static void walk_ffn(table_walk *t, ts_ffn_weights *w, const char *prefix, int D, int F) {
    const ts_model_config *c = &t->m->cfg;
    bool bias = !c->no_ffn_bias;
    memset(w, 0, sizeof *w);
    if (c->gated_ffn) walk_linear(t, &w->wg, &w->bg, bias, F, D, prefix, "linear_gate");
    walk_linear(t, &w->w1, &w->b1, bias, F, D, prefix, "linear1");
    walk_linear(t, &w->w2, &w->b2, bias, D, F, prefix, "linear2");
}

static void walk_norm(table_walk *t, ts_norm_weights *w, const char *prefix, int D) {
    /* an RMSNorm has a scale only; Gemma's scales by (1 + w), so w starts at 0 */
    ts_norm_kind kind = t->m->cfg.norm_kind;
    w->gamma = param(t, TS_LAYOUT_TORCH, kind == TS_NORMK_RMS_GEMMA ? TS_INIT_ZEROS : TS_INIT_ONES, 0, 1, D, 0,
                     "%s.weight", prefix);
    if (kind != TS_NORMK_LAYER) {
        w->beta = NULL;
        return;
    }
    w->beta = param(t, TS_LAYOUT_TORCH, TS_INIT_ZEROS, 0, 1, D, 0, "%s.bias", prefix);
}

/* Token table, learned positions and their LayerNorm, under `prefix`. */
static void walk_embed(table_walk *t, ts_embed_weights *w, const char *prefix, bool own_tokens) {
    const ts_model_config *c = &t->m->cfg;
    int D = c->d_model, P = c->max_pos ? c->max_pos : t->m->L;
    memset(w, 0, sizeof *w);
    if (c->input == TS_INPUT_TOKENS && own_tokens) {
        /* Scaled by sqrt(D) later, so start at N(0, 1/D) and the sum with the
         * positions begins near unit size; unscaled tables start at N(0, 1)
         * as nn.Embedding does. */
        float sd = c->scale_embed ? (float)(1.0 / sqrt((double)D)) : 1.0f;
        /* A GPT's table is its output head too: GPT-2's N(0, 0.02) keeps the
         * first logits near 0 (N(0, 1) would start the loss near 17 nats). */
        if (c->arch == TS_ARCH_DECODER) sd = 0.02f;
        w->tokens = param(t, TS_LAYOUT_TORCH, TS_INIT_NORMAL, sd, 2, c->vocab, D, "%s.tokens.weight", prefix);
    }
    /* BERT's token types: nn.Embedding(type_vocab_size, hidden), one row per segment */
    if (c->type_vocab && own_tokens)
        w->types = param(t, TS_LAYOUT_TORCH, TS_INIT_NORMAL, 1.0f, 2, c->type_vocab, D, "%s.token_types.weight", prefix);
    if (c->pe == TS_PE_LEARNED) {
        float psd = c->arch == TS_ARCH_DECODER ? 0.02f : 1.0f; /* GPT-2's, beside its small token table */
        w->positions = param(t, TS_LAYOUT_TORCH, TS_INIT_NORMAL, psd, 2, P, D, "%s.positions.weight", prefix);
    }
    if (ts_model_embed_norm(c)) {
        char norm[TS_MODEL_NAME_MAX];
        snprintf(norm, sizeof norm, "%s.norm", prefix);
        walk_norm(t, &w->norm, norm, D);
    }
}

/* Every parameter, in the order of PyTorch's state_dict where one exists. */
static void walk_all(table_walk *t, ts_model_weights *w) {
    const ts_model_config *c = &t->m->cfg;
    int D = c->d_model, F = c->ffn;
    char p[TS_MODEL_NAME_MAX];
    if (c->arch == TS_ARCH_ATTENTION) {
        walk_attn(t, &w->attn, "self_attn", D, c->in_dim ? c->in_dim : D, TS_LAYOUT_QKV_HEADS);
        return;
    }
    walk_embed(t, &w->embed, "embed", true);
    const char *stack = ts_model_stack_name(c); /* "encoder", or "decoder" for a GPT */
    for (int i = 0; i < c->layers; i++) {
        ts_self_attn_layer_weights *e = &w->layers[i];
        snprintf(p, sizeof p, "%s.layers.%d.self_attn", stack, i);
        if (c->split_qkv) walk_split_attn(t, &e->self_attn, p);
        else walk_attn(t, &e->self_attn, p, D, D, TS_LAYOUT_QKV_HEADS);
        snprintf(p, sizeof p, "%s.layers.%d", stack, i);
        walk_ffn(t, &e->ffn, p, D, F);
        snprintf(p, sizeof p, "%s.layers.%d.norm1", stack, i);
        walk_norm(t, &e->norm1, p, D);
        snprintf(p, sizeof p, "%s.layers.%d.norm2", stack, i);
        walk_norm(t, &e->norm2, p, D);
    }
    snprintf(p, sizeof p, "%s.norm", stack);
    if (c->final_norm) walk_norm(t, &w->norm, p, D);
    if (c->arch == TS_ARCH_ENCODER_DECODER) {
        walk_embed(t, &w->dec_embed, "decoder.embed", !c->tie_embed);
        if (c->tie_embed) w->dec_embed.tokens = w->embed.tokens;
        for (int i = 0; i < c->dec_layers; i++) {
            ts_cross_attn_layer_weights *d = &w->cross_layers[i];
            snprintf(p, sizeof p, "decoder.layers.%d.self_attn", i);
            walk_attn(t, &d->self_attn, p, D, D, TS_LAYOUT_QKV_HEADS);
            snprintf(p, sizeof p, "decoder.layers.%d.multihead_attn", i);
            walk_attn(t, &d->cross_attn, p, D, D, TS_LAYOUT_Q_KV_HEADS);
            snprintf(p, sizeof p, "decoder.layers.%d", i);
            walk_ffn(t, &d->ffn, p, D, F);
            for (int k = 1; k <= 3; k++) {
                snprintf(p, sizeof p, "decoder.layers.%d.norm%d", i, k);
                walk_norm(t, k == 1 ? &d->norm1 : k == 2 ? &d->norm2 : &d->norm3, p, D);
            }
        }
        if (c->final_norm) walk_norm(t, &w->cross_norm, "decoder.norm", D);
    }
    if (c->head == TS_HEAD_LM && c->mlm_head) { /* BERT's masked-LM transform before the decoder */
        walk_linear(t, &w->mlm_w, &w->mlm_b, true, D, D, "mlm", "dense");
        walk_norm(t, &w->mlm_norm, "mlm.norm", D);
    }
    if (c->head == TS_HEAD_LM) {
        if (c->tie_embed)
            w->head_w = w->embed.tokens;
        else
            w->head_w = param(t, TS_LAYOUT_TORCH, TS_INIT_UNIFORM, uniform_bound(D), 2, c->vocab, D,
                              "generator.weight");
        /* a GPT's head has no bias (GPT-2's lm_head, nanoGPT's) */
        if (c->arch != TS_ARCH_DECODER)
            w->head_b = param(t, TS_LAYOUT_TORCH, TS_INIT_UNIFORM, uniform_bound(D), 1, c->vocab, 0, "generator.bias");
    } else if (c->head == TS_HEAD_CLS) {
        w->head_w = param(t, TS_LAYOUT_TORCH, TS_INIT_UNIFORM, uniform_bound(D), 2, c->n_labels, D,
                          "classifier.weight");
        w->head_b = param(t, TS_LAYOUT_TORCH, TS_INIT_UNIFORM, uniform_bound(D), 1, c->n_labels, 0,
                          "classifier.bias");
    }
}

static ts_status alloc_layers(const ts_model *m, ts_model_weights *w) {
    memset(w, 0, sizeof *w);
    const ts_model_config *c = &m->cfg;
    if (c->arch != TS_ARCH_ATTENTION && c->layers > 0) {
        w->layers = calloc((size_t)c->layers, sizeof *w->layers);
        if (!w->layers) return ts_fail(TS_ERR_NOMEM, "model: out of memory for %d layers", c->layers);
    }
    if (c->arch == TS_ARCH_ENCODER_DECODER && c->dec_layers > 0) {
        w->cross_layers = calloc((size_t)c->dec_layers, sizeof *w->cross_layers);
        if (!w->cross_layers) {
            free(w->layers);
            w->layers = NULL;
            return ts_fail(TS_ERR_NOMEM, "model: out of memory for %d layers", c->dec_layers);
        }
    }
    return TS_OK;
}

void ts_model_weights_free(ts_model_weights *w) {
    free(w->layers);
    free(w->cross_layers);
    memset(w, 0, sizeof *w);
}

ts_status ts_model_point(const ts_model *m, float *block, ts_model_weights *w) {
    ts_status st = alloc_layers(m, w);
    if (st) return st;
    table_walk t = {.m = (ts_model *)m, .build = false, .block = block};
    walk_all(&t, w);
    return TS_OK;
}

void ts_model_randn(float *out, int64_t n, uint64_t seed) {
    uint64_t key = ts_mix64(seed);
    TS_MODEL_OMP(parallel for schedule(static))
    for (int64_t i = 0; i < n; i++) {
        /* Box-Muller on two counter-based uniforms: thread count does not matter. */
        double u1 = 1.0 - ts_u01(key, 2 * (uint64_t)i), u2 = ts_u01(key, 2 * (uint64_t)i + 1);
        out[i] = (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
    }
}

void ts_model_random_ids(int32_t *out, int64_t n, int32_t lo, int32_t hi, uint64_t seed) {
    uint64_t key = ts_mix64(seed ^ 0x1D5ull);
    for (int64_t i = 0; i < n; i++)
        out[i] = lo + (int32_t)(ts_u01(key, (uint64_t)i) * (double)(hi - lo));
}

/* Each parameter draws from its own stream, keyed by the seed and its name, so
 * adding a module elsewhere does not change the values of this one. */
static uint64_t name_key(uint64_t seed, const char *name) {
    uint64_t h = 1469598103934665603ull; // FNV-1a
    for (const unsigned char *s = (const unsigned char *)name; *s; s++) h = (h ^ *s) * 1099511628211ull;
    return ts_mix64(seed ^ h);
}

static void init_param(float *x, const ts_model_param_info *p, uint64_t seed) {
    switch (p->init) {
    case TS_INIT_ZEROS: memset(x, 0, sizeof(float) * (size_t)p->numel); break;
    case TS_INIT_ONES:
        for (int64_t i = 0; i < p->numel; i++) x[i] = 1.0f;
        break;
    case TS_INIT_UNIFORM: {
        uint64_t key = name_key(seed, p->name);
        double s = p->init_scale;
        TS_MODEL_OMP(parallel for schedule(static))
        for (int64_t i = 0; i < p->numel; i++) x[i] = (float)((2.0 * ts_u01(key, (uint64_t)i) - 1.0) * s);
        break;
    }
    case TS_INIT_NORMAL:
        ts_model_randn(x, p->numel, name_key(seed, p->name));
        if (p->init_scale != 1.0f)
            for (int64_t i = 0; i < p->numel; i++) x[i] *= p->init_scale;
        break;
    }
}

static ts_status build(ts_model *m, const ts_model_config *cfg, bool dry) {
    memset(m, 0, sizeof *m);
    ts_status st = ts_model_config_check(cfg);
    if (st) return st;
    m->cfg = *cfg;
    m->dry = dry;
    m->training = cfg->train_mode;
    m->S = cfg->seq;
    m->T = cfg->arch == TS_ARCH_ENCODER_DECODER ? cfg->tgt_seq : 0;
    m->L = m->S > m->T ? m->S : m->T;
    st = alloc_layers(m, &m->w);
    if (st) return st;
    table_walk t = {.m = m, .build = true};
    walk_all(&t, &m->w);
    if (t.status) {
        ts_model_free(m);
        return t.status;
    }
    ts_model_acts a;
    m->arena_bytes = ts_model_plan_acts(m, &a, NULL);
    return TS_OK;
}

ts_status ts_model_init_dry(ts_model *m, const ts_model_config *cfg) { return build(m, cfg, true); }

/* The model's memory; its parameters drawn from the seed unless a loader
 * will place every one of them (random draws for 1.2 billion floats cost
 * seconds that a load would throw away). */
static ts_status init(ts_model *m, const ts_model_config *cfg, bool draw) {
    ts_status st = build(m, cfg, false);
    if (st) return st;
    size_t bytes = sizeof(float) * (size_t)m->n_floats;
    m->block = bytes ? aligned_alloc(64, (bytes + 63) / 64 * 64) : NULL;
    if (bytes && !m->block) {
        ts_model_free(m);
        return ts_fail(TS_ERR_NOMEM, "model: cannot allocate %.1f MB of parameters", bytes / 1048576.0);
    }
    ts_model_weights_free(&m->w);
    st = ts_model_point(m, m->block, &m->w);
    if (!st) st = ts_arena_init(&m->arena, m->arena_bytes);
    m->acts = st ? NULL : malloc(sizeof(ts_model_acts));
    if (!st && !m->acts) st = ts_fail(TS_ERR_NOMEM, "model: out of memory");
    if (st) {
        ts_model_free(m);
        return st;
    }
    for (int i = 0; draw && i < m->n_params; i++) init_param(m->block + m->params[i].offset, &m->params[i], cfg->seed);
    ts_model_acts *a = m->acts;
    ts_model_plan_acts(m, a, m->arena.base);
    m->arena.used = m->arena_bytes;
    if (a->pe) ts_model_pe_table(a->pe, m->L, cfg->d_model, cfg->pe_variant);
    return TS_OK;
}

ts_status ts_model_init(ts_model *m, const ts_model_config *cfg) { return init(m, cfg, true); }

ts_status ts_model_init_unset(ts_model *m, const ts_model_config *cfg) { return init(m, cfg, false); }

ts_status ts_model_set_length(ts_model *m, int S) {
    if (m->dry || !m->acts) return ts_fail(TS_ERR_ARG, "model: a shapes-only model has no activations to resize");
    if (m->cfg.arch == TS_ARCH_ENCODER_DECODER)
        return ts_fail(TS_ERR_ARG, "model: only a single stack changes its length between passes");
    ts_model shorter = *m;
    shorter.cfg.seq = S;
    shorter.S = shorter.L = S;
    ts_model_acts plan;
    if (S < 1 || ts_model_plan_acts(&shorter, &plan, NULL) > m->arena_bytes)
        return ts_fail(TS_ERR_ARG, "model: %d positions do not fit the %d it was built for", S, m->S);
    m->cfg.seq = S;
    m->S = m->L = S;
    ts_model_acts *a = m->acts;
    ts_model_plan_acts(m, a, m->arena.base);
    /* The buffers moved: a sinusoidal table is laid out again (its rows do not depend on the length). */
    if (a->pe) ts_model_pe_table(a->pe, m->L, m->cfg.d_model, m->cfg.pe_variant);
    return TS_OK;
}

ts_status ts_model_set_dtype(ts_model *m, ts_dtype dtype) {
    m->cfg.dtype = dtype;
    if (dtype == TS_DTYPE_F32 || !m->block) {
        free(m->bf16);
        m->bf16 = NULL;
        return TS_OK;
    }
    if (!m->bf16) {
        /* untouched pages of the vectors' places cost no memory */
        m->bf16 = malloc(sizeof(ts_bf16) * (size_t)(m->n_floats > 0 ? m->n_floats : 1));
        if (!m->bf16) return ts_fail(TS_ERR_NOMEM, "--dtype bf16: out of memory for the weights' bf16 copy");
    }
    for (int i = 0; i < m->n_params; i++)
        if (m->params[i].rank == 2)
            ts_bf16_from_f32(m->bf16 + m->params[i].offset, m->block + m->params[i].offset, m->params[i].numel, true);
    return TS_OK;
}

const ts_bf16 *ts_model_bf16_of(const ts_model *m, const float *w) {
    if (!m->bf16 || !w || w < m->block || w >= m->block + m->n_floats) return NULL;
    return m->bf16 + (w - m->block);
}

void ts_model_free(ts_model *m) {
    ts_model_weights_free(&m->w);
    free(m->params);
    free(m->block);
    free(m->bf16);
    free(m->acts);
    ts_arena_free(&m->arena);
    memset(m, 0, sizeof *m);
}

void ts_model_set_training(ts_model *m, bool training) { m->training = training; }

/* ---- finding and exchanging parameters ----------------------------------- */

static int find_exact(const ts_model *m, const char *name) {
    for (int i = 0; i < m->n_params; i++)
        if (strcmp(m->params[i].name, name) == 0) return i;
    return -1;
}

int ts_model_find_param(const ts_model *m, const char *name) {
    int i = find_exact(m, name);
    if (i >= 0) return i;
    /* tscope train's checkpoints name the token tables as issue 6 does. */
    if (strcmp(name, "embed.src.weight") == 0) return find_exact(m, "embed.tokens.weight");
    if (strcmp(name, "embed.tgt.weight") == 0) return find_exact(m, "decoder.embed.tokens.weight");
    /* nn.TransformerEncoder's keys lack our "encoder." prefix; a lone
     * nn.MultiheadAttention's keys lack "self_attn.". */
    static const char *const prefixes[] = {"encoder.", "self_attn."};
    char full[TS_MODEL_NAME_MAX + 16];
    for (size_t k = 0; k < sizeof prefixes / sizeof prefixes[0]; k++) {
        snprintf(full, sizeof full, "%s%s", prefixes[k], name);
        if ((i = find_exact(m, full)) >= 0) return i;
    }
    return -1;
}

static ts_status unknown_param(const ts_model *m, const char *name) {
    char list[1024];
    size_t n = 0;
    list[0] = '\0';
    for (int i = 0; i < m->n_params; i++) {
        int w = snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", m->params[i].name);
        if (w < 0 || (size_t)w >= sizeof list - n) {
            snprintf(list + n, sizeof list - n, ", ... (%d in all)", m->n_params);
            break;
        }
        n += (size_t)w;
    }
    return ts_fail(TS_ERR_ARG, "the model has no parameter named %s; it has %s", name, list);
}

static ts_tensor param_view(const ts_model *m, const ts_model_param_info *p) {
    ts_tensor t;
    ts_tensor_view(&t, m->block ? m->block + p->offset : NULL, p->rank, p->shape);
    return t;
}

ts_status ts_model_param(ts_model *m, const char *name, ts_tensor *view) {
    int i = ts_model_find_param(m, name);
    if (i < 0) return unknown_param(m, name);
    *view = param_view(m, &m->params[i]);
    return TS_OK;
}

/* The stored rows of a per-head parameter, viewed in PyTorch's row order as
 * (parts, H, hd[, cols]): torch row p*D + h*hd + j sits at stored row
 * first + h*parts*hd + p*hd + j. */
static ts_tensor heads_view(float *data, int parts, int H, int hd, int64_t cols) {
    ts_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.rank = cols ? 4 : 3;
    int64_t row = cols ? cols : 1;
    int64_t shape[4] = {parts, H, hd, cols}, stride[4] = {hd * row, (int64_t)parts * hd * row, row, 1};
    for (int d = 0; d < t.rank; d++) t.shape[d] = shape[d], t.stride[d] = stride[d];
    return t;
}

/* Copy between PyTorch's layout (`torch`, contiguous-compatible) and the stored
 * one, in the direction `to_model`. */
static ts_status exchange(const ts_model *m, const ts_model_param_info *p, float *torch_data, bool to_model) {
    float *stored = m->block + p->offset;
    int D = m->cfg.d_model, H = m->cfg.heads, hd = D / H;
    int64_t cols = p->rank == 2 ? p->shape[1] : 0, row = cols ? cols : 1;
    ts_tensor s[2], t[2];
    int n = 0;
    if (p->layout == TS_LAYOUT_TORCH) {
        s[0] = param_view(m, p);
        ts_tensor_view(&t[0], torch_data, p->rank, p->shape);
        n = 1;
    } else {
        int parts = p->layout == TS_LAYOUT_QKV_HEADS ? 3 : 2;
        int64_t first = p->layout == TS_LAYOUT_QKV_HEADS ? 0 : (int64_t)D * row;
        if (first) { // Wq rows as they are
            int64_t shape[2] = {D, cols};
            ts_tensor_view(&s[n], stored, cols ? 2 : 1, shape);
            ts_tensor_view(&t[n], torch_data, cols ? 2 : 1, shape);
            n++;
        }
        s[n] = heads_view(stored + first, parts, H, hd, cols);
        t[n] = heads_view(torch_data + first, parts, H, hd, cols);
        /* the torch side is plain row-major: restride it as (parts, H, hd, cols) */
        int64_t tshape[4] = {parts, H, hd, cols};
        ts_tensor_view(&t[n], torch_data + first, t[n].rank, tshape);
        n++;
    }
    for (int k = 0; k < n; k++) {
        ts_status st = to_model ? ts_tensor_copy(&s[k], &t[k]) : ts_tensor_copy(&t[k], &s[k]);
        if (st) return st;
    }
    return TS_OK;
}

ts_status ts_model_load_param(ts_model *m, const char *name, const ts_tensor *src) {
    int i = ts_model_find_param(m, name);
    if (i < 0) return unknown_param(m, name);
    const ts_model_param_info *p = &m->params[i];
    if (src->rank != p->rank || src->shape[0] != p->shape[0] || (p->rank == 2 && src->shape[1] != p->shape[1])) {
        char got[TS_SHAPE_TEXT_MAX], want[TS_SHAPE_TEXT_MAX];
        ts_tensor_shape_str(got, sizeof got, src, TS_SHAPE_PLAIN);
        ts_shape_format(want, sizeof want, p->rank, p->shape, TS_SHAPE_PLAIN);
        return ts_fail(TS_ERR_SHAPE, "tensor %s has shape %s, the model needs %s", name, got, want);
    }
    if (!m->block) return ts_fail(TS_ERR_ARG, "model: a shapes-only model holds no parameters");
    if (ts_tensor_is_contiguous(src)) return exchange(m, p, src->data, true);
    /* A strided source: make it row-major in the parameter's own slot first. */
    ts_tensor dst = param_view(m, p);
    ts_status st = ts_tensor_copy(&dst, src);
    if (st || p->layout == TS_LAYOUT_TORCH) return st;
    float *tmp = malloc(sizeof(float) * (size_t)p->numel);
    if (!tmp) return ts_fail(TS_ERR_NOMEM, "model: out of memory loading %s", name);
    memcpy(tmp, dst.data, sizeof(float) * (size_t)p->numel);
    st = exchange(m, p, tmp, true);
    free(tmp);
    return st;
}

void ts_model_export_param(const ts_model *m, int i, float *dst) {
    if (i < 0 || i >= m->n_params || !m->block) return;
    exchange(m, &m->params[i], dst, false);
}
