/* trace_cli: from the run's flags and model to a trace writer, and back. */
#include "trace_cli.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/core.h"
#include "tscope/io.h"

int trace_cli_table(ts_flag *t, int n, trace_cli *tc) {
    memset(tc, 0, sizeof *tc);
    tc->keep_batch = -1;
    const ts_flag rows[] = {
        {"--trace", TS_FLAG_STRING, &tc->path, "FILE",
         "write every step to a trace file (written as FILE.tmp, renamed when done)", NULL, NULL, NULL},
        {"--level", TS_FLAG_CHOICE, &tc->level, NULL,
         "what each step keeps (auto: all values when they fit 256 MB, else stats + attention, PE, norm stats)",
         "shapes|stats|values|auto", NULL, NULL},
        {"--only", TS_FLAG_LIST, &tc->only, "GLOB",
         "keep values only for names matching GLOB, e.g. '*.weights' (repeatable)", NULL, NULL, NULL},
        {"--keep-batch", TS_FLAG_INT, &tc->keep_batch, "I", "keep values of batch element I only (default: all)", NULL,
         NULL, &tc->keep_batch_seen},
    };
    int count = (int)(sizeof rows / sizeof rows[0]);
    for (int i = 0; i < count; i++) t[n + i] = rows[i];
    return n + count;
}

int trace_cli_check(const trace_cli *tc, const char *command, int batch) {
    bool any = tc->level || tc->only.count || tc->keep_batch_seen;
    if (!tc->path && any) return ts_cli_error(command, "--level, --only and --keep-batch need --trace FILE");
    if (tc->keep_batch_seen && (tc->keep_batch < 0 || tc->keep_batch >= batch))
        return ts_cli_error(command, "--keep-batch %d is not a batch element (the batch has %d: 0..%d)", tc->keep_batch,
                            batch, batch - 1);
    if (tc->only.count && tc->level && (strcmp(tc->level, "shapes") == 0 || strcmp(tc->level, "stats") == 0))
        return ts_cli_error(command, "--only chooses which steps keep values; --level %s keeps none", tc->level);
    if (tc->only.count > TS_TRACE_ONLY_MAX) return ts_cli_error(command, "at most %d --only globs", TS_TRACE_ONLY_MAX);
    return -1;
}

/* The model's config (ts_model_config_json, as checkpoints hold it) and what
 * only a trace's steps need: the columns of a fused qkv (kv) step are q, k
 * and v of head 0, then of head 1... (PyTorch's in_proj gives all q, then all
 * k, then all v). A checkpoint's in_proj_weight is in PyTorch's order, so the
 * key is not in ts_model_config_json. */
char *trace_cli_config_json(const ts_model_config *c) {
    char *base = ts_model_config_json(c);
    cJSON *o = base ? cJSON_Parse(base) : NULL;
    free(base);
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "qkv_layout", "per-head");
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}

/* Today's block choices, in the line and the JSON alike: what a diff of two
 * runs compares before any value. */
static void add_modern_settings(cJSON *o, const ts_model_config *c, char *line, size_t size) {
    size_t len = strlen(line);
    char rope[96] = "none";
    if (c->pe == TS_PE_ROPE)
        snprintf(rope, sizeof rope, "pairs %s, %d of %d dims, theta %g", ts_model_rope_style_name(c->rope_style),
                 ts_model_rotary_dims(c), ts_model_head_dim(c), ts_model_rope_theta(c));
    const char *ffn = !c->gated_ffn ? "plain" : c->activation == TS_ACT_SILU ? "swiglu" : "geglu";
    if (len < size)
        snprintf(line + len, size - len, ", norm kind %s (eps %g), rope %s, kv heads %d, head dim %d, ffn %s, residual %s",
                 ts_model_norm_kind_name(c->norm_kind), (double)c->eps, rope, ts_model_kv_heads(c),
                 ts_model_head_dim(c), ffn, c->parallel_residual ? "parallel" : "sequential");
    cJSON_AddStringToObject(o, "norm_kind", ts_model_norm_kind_name(c->norm_kind));
    cJSON_AddNumberToObject(o, "eps", c->eps);
    cJSON_AddStringToObject(o, "rope", rope);
    cJSON_AddNumberToObject(o, "kv_heads", ts_model_kv_heads(c));
    cJSON_AddNumberToObject(o, "head_dim", ts_model_head_dim(c));
    cJSON_AddStringToObject(o, "ffn", ffn);
    cJSON_AddStringToObject(o, "residual", c->parallel_residual ? "parallel" : "sequential");
    if (c->scale_embed) {
        len = strlen(line);
        if (len < size) snprintf(line + len, size - len, ", embeddings x sqrt(d_model)");
        cJSON_AddBoolToObject(o, "scale_embed", true);
    }
}

/* BERT's parts, in the line and the JSON alike: whether token types were
 * given (without them every position is type 0), the masked-LM head, the eps. */
static void add_bert_settings(cJSON *o, const ts_model_config *c, const ts_model_input *in, char *line, size_t size) {
    size_t len = strlen(line);
    bool given = in && in->src_types;
    char types[64] = "none";
    if (c->type_vocab) snprintf(types, sizeof types, "%s (%d kinds)", given ? "given" : "all 0, none given", c->type_vocab);
    if (len < size)
        snprintf(line + len, size - len, ", token types %s, head %s, eps %g, embeddings' eps %g", types,
                 c->mlm_head ? "masked-LM (dense, activation, LayerNorm, decoder)" : "decoder", (double)c->eps,
                 (double)c->embed_eps);
    cJSON_AddStringToObject(o, "token_types", types);
    cJSON_AddStringToObject(o, "lm_head", c->mlm_head ? "masked-LM" : "decoder");
    cJSON_AddNumberToObject(o, "eps", c->eps);
    cJSON_AddNumberToObject(o, "embed_eps", c->embed_eps);
}

/* A LayerNorm's arithmetic, declared: eps, and which formula (nn.LayerNorm's,
 * or the Annotated Transformer's eps added to the unbiased std); and the
 * embeddings' scale. What a diff compares before any value. */
static void add_layernorm_settings(cJSON *o, const ts_model_config *c, char *line, size_t size) {
    size_t len = strlen(line);
    const char *formula = c->ln_std_eps ? "std+eps" : "standard";
    if (len < size)
        snprintf(line + len, size - len, ", eps %g, norm formula %s%s", (double)c->eps, formula,
                 c->scale_embed ? ", embeddings x sqrt(d_model)" : "");
    cJSON_AddNumberToObject(o, "eps", c->eps);
    cJSON_AddStringToObject(o, "norm_formula", formula);
    if (c->scale_embed) cJSON_AddBoolToObject(o, "scale_embed", true);
}

char *trace_cli_settings(const ts_model_config *c, const ts_model_input *in, const char *layout, char *line,
                         size_t size) {
    /* the masks in force, in one order for every program that writes them */
    bool decoder = c->arch == TS_ARCH_ENCODER_DECODER;
    char masks[96] = "";
    const struct { bool on; const char *word; } kinds[] = {
        {decoder ? !c->tgt_not_causal : c->causal, decoder ? "tgt causal" : "causal"},
        {in && in->src_pad, "src padding"},
        {in && in->tgt_pad, "tgt padding"},
        {in && in->mem_pad, "memory padding"},
    };
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        if (kinds[k].on)
            snprintf(masks + strlen(masks), sizeof masks - strlen(masks), "%s%s", masks[0] ? ", " : "", kinds[k].word);
    if (!masks[0]) snprintf(masks, sizeof masks, "no mask");
    bool blocks = c->arch != TS_ARCH_ATTENTION;
    /* what a hidden score is written as: said where something is hidden or the fill is not -inf */
    char fill[48];
    ts_model_mask_fill_text(fill, sizeof fill, c);
    snprintf(line, size, "heads %d%s%s%s%s, masks: %s%s%s, batch %d, seq %d", c->heads, blocks ? ", norm " : "",
             blocks ? ts_model_norm_name(c->norm) : "", blocks ? ", activation " : "",
             blocks ? ts_model_activation_name(c->activation) : "", masks, layout ? ", layout " : "",
             layout ? layout : "", c->batch, c->seq);
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "heads", c->heads);
    if (blocks) {
        cJSON_AddStringToObject(o, "norm", ts_model_norm_name(c->norm));
        cJSON_AddStringToObject(o, "activation", ts_model_activation_name(c->activation));
    }
    if (ts_model_is_modern(c)) add_modern_settings(o, c, line, size);
    if (ts_model_is_bert(c)) add_bert_settings(o, c, in, line, size);
    else if (!ts_model_is_modern(c) && blocks) add_layernorm_settings(o, c, line, size);
    size_t len = strlen(line);
    if (len < size && (strcmp(masks, "no mask") != 0 || c->mask_fill != 0.0f))
        snprintf(line + len, size - len, ", mask fill %s", fill);
    cJSON_AddStringToObject(o, "masks", masks);
    cJSON_AddStringToObject(o, "mask_fill", fill);
    if (layout) cJSON_AddStringToObject(o, "layout", layout);
    cJSON_AddNumberToObject(o, "batch", c->batch);
    cJSON_AddNumberToObject(o, "seq", c->seq);
    if (decoder) cJSON_AddNumberToObject(o, "tgt_seq", c->tgt_seq);
    /* how the weight matrices were read: said on the line only when not float32 */
    cJSON_AddStringToObject(o, "weights", ts_model_dtype_name(c->dtype));
    len = strlen(line);
    if (c->dtype == TS_DTYPE_BF16 && len < size)
        snprintf(line + len, size - len, ", weights bf16 (matrices rounded to nearest even, float32 sums)");
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}

static const char **words(const model_batch *b, const int32_t *ids, int n) {
    if (!b || !b->have_tok || !ids || n <= 0) return NULL;
    const char **w = calloc((size_t)n, sizeof *w);
    for (int i = 0; w && i < n; i++) w[i] = ts_tokenizer_word(&b->tok, ids[i]);
    return w;
}

/* The words of every batch element's ids (B, n) into the metadata. */
static ts_status add_batch_tokens(char **meta, const model_batch *b, ts_trace_side side, const int32_t *ids, int B,
                                  int n) {
    if (!ids || !b->have_tok) return TS_OK;
    const char **w = words(b, ids, B * n);
    if (!w) return ts_fail(TS_ERR_NOMEM, "trace: no memory for the metadata");
    ts_status s = ts_trace_metadata_add_batch_tokens(meta, side, w, B, n);
    free(w);
    return s;
}

ts_status trace_cli_open(const trace_cli *tc, const ts_model_config *cfg, const model_batch *batch, int argc,
                         char **argv, const char *edits_json, ts_trace_writer **out) {
    *out = NULL;
    ts_trace_options opt;
    ts_trace_options_default(&opt);
    ts_status s = tc->level ? ts_trace_level_parse(tc->level, &opt.level) : TS_OK;
    if (s) return s;
    for (int i = 0; i < tc->only.count; i++) opt.only[opt.n_only++] = tc->only.items[i];
    opt.keep_batch = tc->keep_batch_seen ? tc->keep_batch : -1;
    /* The dry run's count of what keeping every value takes (views and
     * like steps cost nothing) lets level auto decide once. */
    ts_model_summary sum;
    if ((s = ts_model_dry_run(cfg, NULL, &sum))) return s;
    opt.expected_bytes = sum.kept_bytes;
    ts_model_summary_free(&sum);
    if (opt.keep_batch >= 0 && cfg->batch > 0) opt.expected_bytes /= (uint64_t)cfg->batch;

    /* Sequence 0's tokens: what the viewer labels its axes with. */
    const char **src = words(batch, batch ? batch->src_ids : NULL, cfg->seq);
    const char **tgt = words(batch, batch ? batch->tgt_ids : NULL, cfg->tgt_seq);
    char *config = trace_cli_config_json(cfg);
    char **line = calloc((size_t)argc + 1, sizeof *line);
    char *meta = NULL;
    if (!config || !line) {
        s = ts_fail(TS_ERR_NOMEM, "trace: no memory for the metadata");
    } else {
        line[0] = "tscope";
        for (int i = 0; i < argc; i++) line[i + 1] = argv[i];
        s = ts_trace_metadata_build(&meta, config, src, src ? cfg->seq : 0, tgt, tgt ? cfg->tgt_seq : 0, argc + 1,
                                    line);
    }
    /* several sentences: each element's own tokens, so its axes are labelled with its words */
    if (!s && batch && batch->n_texts > 1 && cfg->batch > 1) {
        s = add_batch_tokens(&meta, batch, TS_TRACE_SOURCE, batch->src_ids, cfg->batch, cfg->seq);
        if (!s && batch->tgt_ids) s = add_batch_tokens(&meta, batch, TS_TRACE_TARGET, batch->tgt_ids, cfg->batch, cfg->tgt_seq);
    }
    if (!s && tc->settings) s = ts_trace_metadata_add_json(&meta, "settings", tc->settings);
    if (!s && edits_json) s = ts_trace_metadata_add_json(&meta, "edits", edits_json);
    if (!s) s = ts_trace_writer_open(tc->path, meta, &opt, out);
    free(meta);
    free(line);
    free(config);
    free(src);
    free(tgt);
    return s;
}

int trace_cli_close(const trace_cli *tc, ts_trace_writer *w, const char *command) {
    if (!w) return 0;
    ts_trace_summary sum;
    if (ts_trace_writer_close(w, &sum)) {
        fprintf(stderr, "tscope %s: %s\n", command, ts_last_error());
        return 1;
    }
    char size[32];
    ts_text_bytes(size, sizeof size, sum.file_bytes);
    printf("trace: %s: %lld steps, %s; %s\n", tc->path, (long long)sum.steps, size, sum.policy);
    if (sum.steps_not_finite) { /* never left to be found: a NaN spreads, and a softmax hides none of it */
        char first[sizeof sum.first_not_finite];
        printf("trace: %lld step%s NaN or Inf, the first %s (tscope info lists them)\n",
               (long long)sum.steps_not_finite, sum.steps_not_finite == 1 ? " holds" : "s hold",
               ts_text_inert(first, sizeof first, sum.first_not_finite));
    }
    /* What tracing cost the run: time in the hook, and how much of it was the disk's. */
    printf("trace: the hook took %.2f s (%.2f s of it waiting for the disk), closing %.2f s\n", sum.hook_seconds,
           sum.wait_seconds, sum.close_seconds);
    return 0;
}

static ts_status tee_step(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag) {
    trace_tee *tee = ctx;
    ts_status s = ts_hook_call(&tee->a, name, op, t, tag);
    return s ? s : ts_hook_call(&tee->b, name, op, t, tag);
}

static ts_status tee_like(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag,
                          const ts_tensor *of, float factor) {
    trace_tee *tee = ctx;
    ts_status s = ts_hook_call_like(&tee->a, name, op, t, tag, of, factor);
    return s ? s : ts_hook_call_like(&tee->b, name, op, t, tag, of, factor);
}

static void tee_overwritten(void *ctx, const ts_tensor *t) {
    trace_tee *tee = ctx;
    if (tee->a.overwritten) tee->a.overwritten(tee->a.ctx, t);
    if (tee->b.overwritten) tee->b.overwritten(tee->b.ctx, t);
}

ts_hook trace_cli_tee(trace_tee *tee, ts_hook a, ts_hook b) {
    if (!a.fn) return b;
    if (!b.fn) return a;
    tee->a = a;
    tee->b = b;
    return (ts_hook){.fn = tee_step, .ctx = tee, .like_previous = tee_like, .overwritten = tee_overwritten};
}
