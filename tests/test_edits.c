/* Every edit an experiment accepts changes what the model computes, or is
 * refused before anything runs (issue 39; docs/architecture.md, "the rule of
 * the forward": every step is computed, handed to the hook, and only then
 * read by what follows).
 *
 * The bug this is a net for: a step handed to the hook after what reads it
 * was already computed (attention `weights`, emitted once the weighted
 * values are made; a LayerNorm's `mean`, `std` and `y`, emitted once its
 * `out` is made) takes an edit, the trace even marks it `[edited: ...]`,
 * and nothing downstream changes. No list of "editable steps" is kept here
 * on purpose: the steps come from the model's own dry run, so a step added
 * tomorrow is swept too.
 *
 * For each kind of model (the encoder-decoder preset, a small seeded GPT,
 * the two shipped language models, two encoders: BERT-like with a [CLS]
 * head and seed 000's post-LN stack on vectors; Hugging Face folders of
 * llama, gemma, gpt_neox and bert, the last with token types):
 *   - every step the dry run names is zero-ablated in turn (what `run
 *     --ablate STEP` does); the final output must differ from the unedited
 *     run's at tolerance 0, or the edit must be refused (status and one
 *     sentence naming the step) by ts_experiment_add_ablate/check;
 *   - parameters and inputs (TS_OP_PARAM, TS_OP_INPUT) must be refused;
 *   - after each edited run an unedited run must equal the first unedited
 *     run bit for bit: no edit may write into the weights or the tables
 *     (a learned `embed.pe` is a view of the position table);
 *   - a few steps per layer (attention weights, each norm's mean/std/y, the
 *     FFN's hidden layer, the layer's output) are patched from a trace of a
 *     run on another input (`--patch TRACE:STEP`) and must change the output;
 *   - models that decode with a key/value cache (the GPTs) decode with each
 *     edit on: the decoded logits must change too.
 * Each case prints "N steps, R refused, S silent" and fails naming every
 * silent step. The unedited reference runs with an experiment attached that
 * edits nothing, so both runs take the same (staged) path and tolerance 0 is
 * fair. PyTorch's numbers for edited attention patterns are
 * tests/edits_test.sh's; live's cached pass is tests/test_edits_live.c's. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tscope/experiment.h"
#include "tscope/io.h"
#include "tscope/kernels.h"
#include "tscope/model.h"
#include "tscope/tokenizer.h"
#include "tscope/trace.h"

/* ---- what a sweep found, as text for the failure message ---- */

typedef struct notes {
    char *text;
    size_t len, cap;
    int count;
} notes;

static void note_add(notes *n, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    size_t need = n->len + (size_t)w + 8;
    if (need > n->cap) {
        n->cap = need * 2;
        n->text = realloc(n->text, n->cap);
        assert_non_null(n->text);
    }
    n->len += (size_t)sprintf(n->text + n->len, "    %s\n", line);
    n->count++;
}

static void notes_free(notes *n) {
    free(n->text);
    memset(n, 0, sizeof *n);
}

typedef struct findings {
    int steps, refused, accepted;
    notes silent;         /* accepted zero-ablations whose output equals the unedited one */
    notes refused_why;    /* each refusal and its sentence, for the log */
    notes bad_refusal;    /* refused without a sentence naming the step */
    notes not_refused;    /* parameters and inputs an edit was accepted for */
    notes leaked;         /* an unedited run after the edit differs from the first */
    notes patch_silent;   /* accepted patches that change nothing */
    int patches, patch_refused;
    notes decode_silent;  /* accepted edits that leave the cached decoding's logits alone */
    int decoded;
} findings;

static void findings_free(findings *f) {
    notes_free(&f->silent);
    notes_free(&f->refused_why);
    notes_free(&f->bad_refusal);
    notes_free(&f->not_refused);
    notes_free(&f->leaked);
    notes_free(&f->patch_silent);
    notes_free(&f->decode_silent);
}

/* ---- the steps a model names (its dry run), each once ---- */

#define NAME_LEN 192

typedef struct step_list {
    char (*name)[NAME_LEN];
    ts_op *op;
    int n, cap;
} step_list;

static ts_status collect_step(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag) {
    (void)t, (void)tag;
    step_list *l = ctx;
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->name[i], name) == 0) return TS_OK;
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->name = realloc(l->name, sizeof *l->name * (size_t)l->cap);
        l->op = realloc(l->op, sizeof *l->op * (size_t)l->cap);
        assert_true(l->name && l->op);
    }
    snprintf(l->name[l->n], NAME_LEN, "%s", name);
    l->op[l->n++] = op;
    return TS_OK;
}

static void list_steps(const ts_model_config *cfg, step_list *l) {
    memset(l, 0, sizeof *l);
    ts_hook hook = {.fn = collect_step, .ctx = l};
    assert_ok(ts_model_dry_run(cfg, &hook, NULL));
    assert_true(l->n > 20);
}

static void step_list_free(step_list *l) {
    free(l->name);
    free(l->op);
    memset(l, 0, sizeof *l);
}

/* ---- one model and two inputs ---- */

typedef struct model_case {
    const char *kind;
    ts_model m;
    float *weights;       /* the block as first built or loaded: restored after a leak */
    int32_t *src[2], *tgt[2], *types[2];
    float *vecs[2];
    ts_model_input in[2]; /* in[0] the run under test, in[1] the other input patches come from */
    float *base;          /* the unedited output of in[0] */
    int64_t n_out;
    char trace_path[64];  /* the other input's run, every value kept */
} model_case;

static int32_t *random_ids(int64_t n, int vocab, uint64_t seed) {
    int32_t *ids = malloc(sizeof *ids * (size_t)n);
    assert_non_null(ids);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((s >> 33) % (uint64_t)vocab);
    }
    return ids;
}

/* Inputs for both runs, as the model reads them: ids, or vectors. */
static void make_inputs(model_case *mc) {
    const ts_model_config *c = &mc->m.cfg;
    int64_t B = c->batch, S = mc->m.S, T = mc->m.T;
    for (int k = 0; k < 2; k++) {
        if (c->input == TS_INPUT_TOKENS) {
            mc->src[k] = random_ids(B * S, c->vocab, 11 + (uint64_t)k);
            mc->in[k].src_ids = mc->src[k];
            if (c->type_vocab) { /* BERT: segments of both kinds, so the type table's rows all count */
                mc->types[k] = random_ids(B * S, c->type_vocab, 41 + (uint64_t)k);
                mc->in[k].src_types = mc->types[k];
            }
        } else {
            int din = c->in_dim ? c->in_dim : c->d_model;
            mc->vecs[k] = malloc(sizeof(float) * (size_t)(B * S * din));
            assert_non_null(mc->vecs[k]);
            ts_model_randn(mc->vecs[k], B * S * din, 21 + (uint64_t)k);
            mc->in[k].src_embedded = mc->vecs[k];
        }
        if (c->arch == TS_ARCH_ENCODER_DECODER) {
            mc->tgt[k] = random_ids(B * T, c->vocab, 31 + (uint64_t)k);
            mc->in[k].tgt_ids = mc->tgt[k];
        }
    }
}

/* A forward of input k with ex attached (an empty experiment when ex is
 * NULL: the same staged path, editing nothing) and, with w, a trace writer
 * watching; the output copied into out (n_out floats). */
static void forward_into(model_case *mc, int k, ts_experiment *ex, ts_trace_writer *w, float *out) {
    ts_experiment none;
    ts_experiment_init(&none);
    ts_hook hook = w ? ts_trace_writer_hook(w) : (ts_hook){0};
    ts_experiment_attach(ex ? ex : &none, &hook);
    ts_tensor t;
    ts_status st = ts_model_forward(&mc->m, &mc->in[k], &hook, &t);
    ts_experiment_free(&none);
    assert_ok(st);
    assert_int_equal(ts_tensor_numel(&t), mc->n_out);
    int64_t idx[TS_MAX_RANK] = {0};
    for (int64_t i = 0; i < mc->n_out; i++) {
        int64_t off = 0;
        for (int d = 0; d < t.rank; d++) off += idx[d] * t.stride[d];
        out[i] = t.data[off];
        for (int d = t.rank - 1; d >= 0; d--) {
            if (++idx[d] < t.shape[d]) break;
            idx[d] = 0;
        }
    }
}

/* The trace of input 1's run, every value kept, with the model's config in
 * its metadata, as `tscope run --trace T --level values` writes it: what
 * `--patch T:STEP` reads. */
static void trace_other_run(model_case *mc, float *scratch) {
    snprintf(mc->trace_path, sizeof mc->trace_path, "/tmp/tscope-edits-XXXXXX");
    int fd = mkstemp(mc->trace_path);
    assert_true(fd >= 0);
    close(fd);
    char *config = ts_model_config_to_json(&mc->m.cfg);
    assert_non_null(config);
    size_t len = strlen(config) + 32;
    char *meta = malloc(len);
    assert_non_null(meta);
    snprintf(meta, len, "{\"config\": %s}", config);
    ts_trace_options opt;
    ts_trace_options_default(&opt);
    opt.level = TS_TRACE_VALUES;
    ts_trace_writer *w;
    assert_ok(ts_trace_writer_open(mc->trace_path, meta, &opt, &w));
    forward_into(mc, 1, NULL, w, scratch);
    assert_ok(ts_trace_writer_close(w, NULL));
    free(meta);
    free(config);
}

/* The case's model is built (and loaded) by the caller; this takes its
 * weights' copy, makes the inputs, the unedited output and the other run's trace. */
static void case_ready(model_case *mc) {
    mc->weights = malloc(sizeof(float) * (size_t)mc->m.n_floats);
    assert_non_null(mc->weights);
    memcpy(mc->weights, mc->m.block, sizeof(float) * (size_t)mc->m.n_floats);
    make_inputs(mc);
    ts_tensor t;
    assert_ok(ts_model_forward(&mc->m, &mc->in[0], NULL, &t));
    mc->n_out = ts_tensor_numel(&t);
    mc->base = malloc(sizeof(float) * (size_t)mc->n_out);
    assert_non_null(mc->base);
    forward_into(mc, 0, NULL, NULL, mc->base);
    float *other = malloc(sizeof(float) * (size_t)mc->n_out);
    assert_non_null(other);
    trace_other_run(mc, other);
    /* the other input must lead somewhere else, or a patch from it proves nothing */
    assert_true(memcmp(other, mc->base, sizeof(float) * (size_t)mc->n_out) != 0);
    free(other);
}

static void case_free(model_case *mc) {
    unlink(mc->trace_path);
    for (int k = 0; k < 2; k++) {
        free(mc->src[k]);
        free(mc->tgt[k]);
        free(mc->types[k]);
        free(mc->vecs[k]);
    }
    free(mc->base);
    free(mc->weights);
    ts_model_free(&mc->m);
}

static bool same_output(const model_case *mc, const float *out) {
    return memcmp(out, mc->base, sizeof(float) * (size_t)mc->n_out) == 0;
}

/* The model built again from its config and first weights: a leaked edit
 * may have written into the block or into a table the model made (the
 * sinusoidal positions). */
static void rebuild(model_case *mc) {
    ts_model_config c = mc->m.cfg;
    int S = mc->m.S;
    ts_model_free(&mc->m);
    assert_ok(ts_model_init(&mc->m, &c));
    if (mc->m.S != S) assert_ok(ts_model_set_length(&mc->m, S));
    memcpy(mc->m.block, mc->weights, sizeof(float) * (size_t)mc->m.n_floats);
}

/* After an edited run, an unedited one must give the first unedited output
 * to the bit; when it does not, the edit leaked, and the model is rebuilt
 * so the next steps are judged on the model they should be. */
static void check_no_leak(model_case *mc, findings *f, const char *what, float *scratch) {
    forward_into(mc, 0, NULL, NULL, scratch);
    if (same_output(mc, scratch)) return;
    bool weights_changed = memcmp(mc->m.block, mc->weights, sizeof(float) * (size_t)mc->m.n_floats) != 0;
    note_add(&f->leaked, "%s (%s)", what,
             weights_changed ? "wrote into the weights" : "wrote into a table the model keeps, not the weights");
    rebuild(mc);
    forward_into(mc, 0, NULL, NULL, scratch);
    assert_true(same_output(mc, scratch));
}

/* An edit accepted by ts_experiment_add_* and ts_experiment_check; else
 * the refusal is noted, and must be one sentence naming the step. */
static bool accepted(findings *f, ts_experiment *ex, ts_status st, const ts_model_config *cfg, const char *name) {
    if (!st) st = ts_experiment_check(ex, cfg);
    if (!st) return true;
    const char *why = ts_last_error();
    note_add(&f->refused_why, "%s: %s", name, why);
    /* the step is in the dry run's list (and `tscope shapes`'s): a refusal
     * that says no step is named so sends the learner looking for a typo */
    if (strlen(why) < 10 || !strstr(why, name) || strchr(why, '\n') || strstr(why, "names no step"))
        note_add(&f->bad_refusal, "%s: '%s'", name, why);
    return false;
}

/* ---- the sweeps ---- */

/* Every step zero-ablated in turn. */
static void sweep_zero(model_case *mc, const step_list *l, findings *f) {
    float *out = malloc(sizeof(float) * (size_t)mc->n_out);
    assert_non_null(out);
    for (int i = 0; i < l->n; i++) {
        const char *name = l->name[i];
        f->steps++;
        ts_experiment ex;
        ts_experiment_init(&ex);
        bool ok = accepted(f, &ex, ts_experiment_add_ablate(&ex, name), &mc->m.cfg, name);
        bool must_refuse = l->op[i] == TS_OP_PARAM || l->op[i] == TS_OP_INPUT;
        if (!ok) {
            f->refused++;
            ts_experiment_free(&ex);
            continue;
        }
        f->accepted++;
        if (must_refuse) note_add(&f->not_refused, "%s (op %s)", name, ts_op_name(l->op[i]));
        forward_into(mc, 0, &ex, NULL, out);
        if (same_output(mc, out))
            note_add(&f->silent, "%s (op %s, applied %lld time%s, output unchanged)", name, ts_op_name(l->op[i]),
                     (long long)ex.edits[0].applied, ex.edits[0].applied == 1 ? "" : "s");
        ts_experiment_free(&ex);
        check_no_leak(mc, f, name, out);
    }
    free(out);
}

/* The steps patched from the other run: those a learner patches (the
 * attention pattern, the residual stream) and those the forward emitted
 * after their readers (weights; a norm's mean, std and y), so each layer
 * has a few. */
static bool worth_patching(const char *name) {
    static const char *const leaves[] = {".self_attn.weights", ".cross_attn.weights", ".mean", ".std", ".y",
                                         ".ffn.hidden", "embed.out"};
    size_t n = strlen(name);
    for (size_t k = 0; k < sizeof leaves / sizeof leaves[0]; k++) {
        size_t m = strlen(leaves[k]);
        if (n >= m && strcmp(name + n - m, leaves[k]) == 0) return true;
    }
    /* a layer's output: "<stack>.layers.N.out" */
    const char *at = strstr(name, ".layers.");
    if (!at) return false;
    const char *dot = strchr(at + 8, '.');
    return dot && strcmp(dot, ".out") == 0;
}

static void sweep_patch(model_case *mc, const step_list *l, findings *f) {
    float *out = malloc(sizeof(float) * (size_t)mc->n_out);
    assert_non_null(out);
    for (int i = 0; i < l->n; i++) {
        const char *name = l->name[i];
        if (!worth_patching(name)) continue;
        f->patches++;
        char spec[512];
        snprintf(spec, sizeof spec, "%s:%s", mc->trace_path, name);
        ts_experiment ex;
        ts_experiment_init(&ex);
        if (!accepted(f, &ex, ts_experiment_add_patch(&ex, spec), &mc->m.cfg, name)) {
            f->patch_refused++;
            ts_experiment_free(&ex);
            continue;
        }
        forward_into(mc, 0, &ex, NULL, out);
        if (same_output(mc, out))
            note_add(&f->patch_silent, "%s patched from another input (applied %lld, output unchanged)", name,
                     (long long)ex.edits[0].applied);
        ts_experiment_free(&ex);
        check_no_leak(mc, f, spec, out);
    }
    free(out);
}

/* Input 0's ids decoded with a cache, in two calls (all but the last 3
 * positions, then those: the second reads the first's keys and values),
 * ex's edits on through both; the logits of every position into out. */
static void decode_into(model_case *mc, ts_kv_cache *kv, ts_experiment *ex, float *out) {
    ts_experiment none;
    ts_experiment_init(&none);
    ts_hook hook = {0};
    ts_experiment_attach(ex ? ex : &none, &hook);
    int S = mc->m.S, V = mc->m.cfg.vocab, first = S - 3;
    kv->len = 0;
    const float *logits;
    assert_ok(ts_model_decode(&mc->m, kv, mc->src[0], first, &hook, &logits));
    memcpy(out, logits, sizeof(float) * (size_t)first * V);
    assert_ok(ts_model_decode(&mc->m, kv, mc->src[0] + first, S - first, &hook, &logits));
    memcpy(out + (size_t)first * V, logits, sizeof(float) * (size_t)(S - first) * V);
    ts_experiment_free(&none);
}

static void sweep_decode(model_case *mc, const step_list *l, findings *f) {
    if (!ts_model_can_cache(&mc->m.cfg, NULL)) return;
    assert_int_equal(mc->m.cfg.batch, 1);
    ts_kv_cache kv;
    assert_ok(ts_kv_cache_init(&kv, &mc->m));
    int64_t n = (int64_t)mc->m.S * mc->m.cfg.vocab;
    float *base = malloc(sizeof(float) * (size_t)n), *out = malloc(sizeof(float) * (size_t)n);
    float *full = malloc(sizeof(float) * (size_t)mc->n_out);
    assert_true(base && out && full);
    decode_into(mc, &kv, NULL, base);
    for (int i = 0; i < l->n; i++) {
        const char *name = l->name[i];
        ts_experiment ex;
        ts_experiment_init(&ex);
        ts_status st = ts_experiment_add_ablate(&ex, name);
        if (!st) st = ts_experiment_check(&ex, &mc->m.cfg);
        if (st) { /* refused: sweep_zero has judged the refusal */
            ts_experiment_free(&ex);
            continue;
        }
        f->decoded++;
        decode_into(mc, &kv, &ex, out);
        if (memcmp(out, base, sizeof(float) * (size_t)n) == 0)
            note_add(&f->decode_silent, "%s (applied %lld, decoded logits unchanged)", name,
                     (long long)ex.edits[0].applied);
        ts_experiment_free(&ex);
        char what[NAME_LEN + 32];
        snprintf(what, sizeof what, "%s, while decoding", name);
        check_no_leak(mc, f, what, full);
    }
    ts_kv_cache_free(&kv);
    free(base);
    free(out);
    free(full);
}

/* A section of the failure, a line at a time (cmocka cuts long messages). */
static void print_section(const char *title, const notes *n) {
    if (!n->count) return;
    print_error("  %s (%d):\n", title, n->count);
    for (const char *line = n->text; *line;) {
        const char *end = strchr(line, '\n');
        print_error("%.*s\n", (int)(end - line), line);
        line = end + 1;
    }
}

/* Every sweep over one model; one line of counts, then the failure naming
 * every step that broke the rule. */
static void check_case(model_case *mc) {
    case_ready(mc);
    step_list l;
    list_steps(&mc->m.cfg, &l);
    findings f;
    memset(&f, 0, sizeof f);
    sweep_zero(mc, &l, &f);
    sweep_patch(mc, &l, &f);
    sweep_decode(mc, &l, &f);
    print_message("%s: %d steps tried, %d refused, %d silent; %d patches (%d refused, %d silent); %d decoded with an "
                  "edit (%d silent); %d leaked\n",
                  mc->kind, f.steps, f.refused, f.silent.count, f.patches, f.patch_refused, f.patch_silent.count,
                  f.decoded, f.decode_silent.count, f.leaked.count);
    if (getenv("TSCOPE_EDITS_VERBOSE")) print_section("refused (TSCOPE_EDITS_VERBOSE)", &f.refused_why);
    int bad = f.silent.count + f.bad_refusal.count + f.not_refused.count + f.leaked.count + f.patch_silent.count +
              f.decode_silent.count;
    if (bad) {
        print_error("%s: %d edits broke the rule (an edit changes the output, or is refused before the run with one "
                    "clear sentence):\n", mc->kind, bad);
        print_section("silent zero-ablations", &f.silent);
        print_section("silent patches", &f.patch_silent);
        print_section("silent while decoding with a cache", &f.decode_silent);
        print_section("leaked into a later unedited run", &f.leaked);
        print_section("parameters or inputs accepted, not refused", &f.not_refused);
        print_section("refused without one clear sentence (naming the step, not denying it exists)", &f.bad_refusal);
    }
    findings_free(&f);
    step_list_free(&l);
    case_free(mc);
    if (bad) fail_msg("%s: %d edits broke the rule (listed above)", mc->kind, bad);
}

/* ---- the models ---- */

/* The encoder-decoder preset (post-LN, sinusoidal positions shared by both
 * stacks, scaled embeddings), source and target of different lengths. */
static void encoder_decoder_preset(void **state) {
    (void)state;
    model_case mc = {.kind = "encoder-decoder (preset tiny)"};
    ts_model_config c;
    assert_ok(ts_model_config_preset(&c, "tiny"));
    c.vocab = 13;
    c.seq = 5;
    assert_ok(ts_model_init(&mc.m, &c));
    check_case(&mc);
}

/* What a hook saw of one step, copied. */
typedef struct seen_step {
    const char *name;
    float values[4096];
    int64_t n;
} seen_step;

static ts_status see_step(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag) {
    (void)op, (void)tag;
    seen_step *s = ctx;
    if (strcmp(name, s->name) != 0) return TS_OK;
    s->n = ts_tensor_numel(t);
    assert_true(s->n <= 4096);
    int64_t idx[TS_MAX_RANK] = {0};
    for (int64_t i = 0; i < s->n; i++) {
        int64_t off = 0;
        for (int d = 0; d < t->rank; d++) off += idx[d] * t->stride[d];
        s->values[i] = t->data[off];
        for (int d = t->rank - 1; d >= 0; d--) {
            if (++idx[d] < t->shape[d]) break;
            idx[d] = 0;
        }
    }
    return TS_OK;
}

/* The encoder-decoder's two stacks read one sinusoidal table: an edit of the
 * encoder's `embed.pe` must not reach the decoder's `decoder.embed.pe` in the
 * same run (nor, as the sweep checks, the next run). */
static void editing_one_stack_leaves_the_other_alone(void **state) {
    (void)state;
    ts_model_config c;
    assert_ok(ts_model_config_preset(&c, "tiny"));
    c.vocab = 13;
    ts_model m;
    assert_ok(ts_model_init(&m, &c));
    int32_t *src = random_ids(c.seq, c.vocab, 1), *tgt = random_ids(c.tgt_seq, c.vocab, 2);
    ts_model_input in = {.src_ids = src, .tgt_ids = tgt};
    seen_step plain = {.name = "decoder.embed.pe"}, edited = {.name = "decoder.embed.pe"};
    ts_hook hook = {.fn = see_step, .ctx = &plain};
    assert_ok(ts_model_forward(&m, &in, &hook, NULL));
    ts_experiment ex;
    ts_experiment_init(&ex);
    ts_status st = ts_experiment_add_ablate(&ex, "embed.pe");
    if (!st) st = ts_experiment_check(&ex, &c);
    bool reached = false;
    if (!st) { /* refused is fine; accepted, it edits the encoder's positions alone */
        hook = (ts_hook){.fn = see_step, .ctx = &edited};
        ts_experiment_attach(&ex, &hook);
        assert_ok(ts_model_forward(&m, &in, &hook, NULL));
        assert_int_equal(edited.n, plain.n);
        reached = memcmp(edited.values, plain.values, sizeof(float) * (size_t)plain.n) != 0;
    }
    ts_experiment_free(&ex);
    free(src);
    free(tgt);
    ts_model_free(&m);
    if (reached) fail_msg("--ablate embed.pe changed decoder.embed.pe in the same run (the stacks share one table)");
}

/* A GPT (preset lm's layout: pre-LN, learned positions, final norm, tied
 * head) at toy sizes, seeded. */
static void gpt_preset(void **state) {
    (void)state;
    model_case mc = {.kind = "GPT (preset lm, small, seed 7)"};
    ts_model_config c;
    assert_ok(ts_model_config_preset(&c, "lm"));
    c.d_model = 16, c.heads = 2, c.ffn = 32, c.layers = 2, c.vocab = 19, c.seq = 8, c.max_pos = 8, c.batch = 1;
    c.seed = 7;
    assert_ok(ts_model_init(&mc.m, &c));
    check_case(&mc);
}

/* A shipped language model, as `run --load` builds it, on S positions. */
static void shipped_lm(const char *file, const char *kind, int S) {
    const char *dir = getenv("TSCOPE_ASSETS") ? getenv("TSCOPE_ASSETS") : "assets";
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    model_case mc = {.kind = kind};
    ts_lmtok tok;
    assert_ok(ts_lm_checkpoint_open(path, NULL, 1, S, &mc.m, &tok));
    ts_lmtok_free(&tok);
    check_case(&mc);
}

static void induction_model(void **state) {
    (void)state;
    shipped_lm("induction-2l.safetensors", "loaded LM (assets/induction-2l.safetensors)", 12);
}

static void kjv_model(void **state) {
    (void)state;
    shipped_lm("kjv-char.safetensors", "loaded LM (assets/kjv-char.safetensors)", 10);
}

/* A Hugging Face folder of today's blocks (tests/ref/hf/), as `run --load DIR` builds it. */
static void hf_folder(const char *name, int S) {
    char path[256], kind[128];
    snprintf(path, sizeof path, "tests/ref/hf/%s", name);
    snprintf(kind, sizeof kind, "Hugging Face %s (tests/ref/hf/%s)", name, name);
    model_case mc = {.kind = kind};
    ts_lmtok tok;
    assert_ok(ts_lm_checkpoint_open(path, NULL, 1, S, &mc.m, &tok));
    ts_lmtok_free(&tok);
    check_case(&mc);
}

/* RMSNorm, RoPE, shared key/value heads, SwiGLU */
static void hf_llama(void **state) {
    (void)state;
    hf_folder("llama", 8);
}

/* Gemma's (1 + w) RMSNorm, one key/value head, GeGLU, a head_dim of its own */
static void hf_gemma(void **state) {
    (void)state;
    hf_folder("gemma", 8);
}

/* partial RoPE, q/k/v packed per head, the parallel residual */
static void hf_gpt_neox(void **state) {
    (void)state;
    hf_folder("gpt_neox", 8);
}

/* BERT as Hugging Face writes it: token types, post-LN, no causal mask, the
 * masked-LM head (dense, GELU, LayerNorm, tied decoder, bias) */
static void hf_bert(void **state) {
    (void)state;
    hf_folder("bert", 8);
}

/* An encoder preset: seed 004's BERT layout (pre-LN, learned positions
 * through the embedding LayerNorm, a [CLS] classifier) at toy sizes. */
static void bert_encoder_preset(void **state) {
    (void)state;
    model_case mc = {.kind = "encoder (preset seed004, small)"};
    ts_model_config c;
    assert_ok(ts_model_config_preset(&c, "seed004"));
    c.d_model = 16, c.heads = 2, c.ffn = 32, c.layers = 2, c.vocab = 29, c.seq = 6, c.max_pos = 8, c.batch = 2;
    assert_ok(ts_model_init(&mc.m, &c));
    check_case(&mc);
}

/* Seed 000's encoder: post-LN over given vectors, no head. */
static void seed000_encoder_preset(void **state) {
    (void)state;
    model_case mc = {.kind = "encoder (preset seed000, small)"};
    ts_model_config c;
    assert_ok(ts_model_config_preset(&c, "seed000"));
    c.d_model = 16, c.heads = 2, c.ffn = 32, c.layers = 2, c.seq = 6, c.batch = 2;
    assert_ok(ts_model_init(&mc.m, &c));
    check_case(&mc);
}

/* The Annotated Transformer's arrangement: pre-LN sublayers, final norms,
 * its LayerNorm (eps 1e-6 added to the unbiased std), every step edited. */
static void annotated_layernorm(void **state) {
    (void)state;
    model_case mc = {.kind = "encoder-decoder (pre-LN, norm formula std+eps)"};
    ts_model_config c;
    assert_ok(ts_model_config_preset(&c, "tiny"));
    c.vocab = 13, c.seq = 5, c.heads = 4, c.norm = TS_NORM_PRE, c.final_norm = true;
    c.ln_std_eps = true, c.eps = c.embed_eps = 1e-6f;
    assert_ok(ts_model_init(&mc.m, &c));
    check_case(&mc);
}

/* Its masked_fill(mask == 0, -1e9) as well (--mask-fill -1e9): attention
 * step by step, the masked scores edited before the softmax reads them. */
static void annotated_mask_fill(void **state) {
    (void)state;
    model_case mc = {.kind = "encoder-decoder (pre-LN, std+eps, mask fill -1e9)"};
    ts_model_config c;
    assert_ok(ts_model_config_preset(&c, "tiny"));
    c.vocab = 13, c.seq = 5, c.heads = 4, c.norm = TS_NORM_PRE, c.final_norm = true;
    c.ln_std_eps = true, c.eps = c.embed_eps = 1e-6f, c.mask_fill = -1e9f;
    assert_ok(ts_model_init(&mc.m, &c));
    check_case(&mc);
}

int main(void) {
    assert_ok(ts_kernels_init());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(encoder_decoder_preset), cmocka_unit_test(editing_one_stack_leaves_the_other_alone),
        cmocka_unit_test(gpt_preset),
        cmocka_unit_test(induction_model),        cmocka_unit_test(kjv_model),
        cmocka_unit_test(bert_encoder_preset),    cmocka_unit_test(seed000_encoder_preset),
        cmocka_unit_test(hf_llama),               cmocka_unit_test(hf_gemma),
        cmocka_unit_test(hf_gpt_neox),            cmocka_unit_test(hf_bert),
        cmocka_unit_test(annotated_layernorm),    cmocka_unit_test(annotated_mask_fill),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
