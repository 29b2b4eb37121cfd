/* tscope run: build a model from a preset and flags, run one forward pass,
 * optionally printing every step's shape as it is computed. */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "experiment_cli.h"
#include "lm_cli.h"
#include "model_flags.h"
#include "model_weights.h"
#include "run_backward.h"
#include "run_expect.h"
#include "trace_cli.h"
#include "tscope/kernels.h"
#include "tscope/io.h"
#include "tscope/train.h"

typedef struct run_opts {
    const char *print_shapes; /* NULL, "plain" or "torch" */
    const char *load, *input, *target, *ids; /* --ids IDS.npy: token ids (B, S) */
    const char *token_types;  /* --token-types T.npy: BERT's token_type_ids (B, S) (run_lm.c) */
    const char *load_prefix;  /* --load-prefix P: stripped from the file's names */
    bool ignore_extra;        /* --ignore-extra: skip tensors with no place, and list them */
    const char *src_kpm, *tgt_kpm, *mem_kpm; /* --{src,tgt,memory}-key-padding-mask M.npy */
    const char *tgt_mask;     /* --tgt-mask causal|none */
    bool backward;      /* --backward: one backward pass too, gradients traced (run_backward.c) */
    bool scores;        /* --scores: a language model's per-head scores (run_lm.c) */
    bool greedy;        /* --greedy: the decoder reads what it wrote (decode_greedy) */
    const char *labels; /* --labels L.npy for the backward's loss */
    ts_load_options lm; /* how a language model's checkpoint is read: lm.layout is --layout hf|nanogpt|mingpt,
                         * how a GPT-2-named file stores its linear weights and whose code it runs in */
    const char *names;  /* --names MAP.txt: PATTERN -> NAME renames of the weights' tensors */
    const char *dtype;  /* --dtype f32|bf16: how the weight matrices are read (NULL: f32) */
    const char *expect; /* --expect OUT.npy: the final output against a reference */
    float tol;          /* --tol T for --expect */
    bool tol_seen;
    bool temperature_seen; /* --temperature T: the probs step's (run_temperature) */
    trace_cli trace; /* --trace FILE and its flags */
    experiment_cli xc; /* --ablate, --patch, --lens */
    int argc;        /* the command line, for the trace's metadata */
    char **argv;
} run_opts;

float run_temperature = 1;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The report's loops share the kernels' threads: a language model's
 * output is (B, S, vocab), 206 MB for GPT-2 at 1024 positions, which one
 * thread reads in a tenth of a second. */
#if defined(_OPENMP)
#define RUN_PRAGMA_(x) _Pragma(#x)
#define RUN_OMP(x) RUN_PRAGMA_(omp x)
#else
#define RUN_OMP(x)
#endif

/* Elements of x summed together before their sums join the rest. */
#define REPORT_BLOCK ((int64_t)1 << 16)
#define REPORT_LANES 8

/* sum[0] += the sum of x[0, n), sum[1] += of its squares, in double, in 8
 * lanes so that the additions do not wait on each other. */
static void block_sums(const float *x, int64_t n, double sum[2]) {
    double s[REPORT_LANES] = {0}, q[REPORT_LANES] = {0};
    int64_t i = 0;
    for (; i + REPORT_LANES <= n; i += REPORT_LANES)
        for (int l = 0; l < REPORT_LANES; l++) {
            double v = x[i + l];
            s[l] += v;
            q[l] += v * v;
        }
    for (; i < n; i++) s[0] += x[i], q[0] += (double)x[i] * x[i];
    for (int l = 0; l < REPORT_LANES; l++) sum[0] += s[l], sum[1] += q[l];
}

/* Mean and std of x (n) over every element (a NaN or an infinity shows as
 * one). Blocks are summed on the threads, then added in order: the same
 * figures for any number of threads. */
static void output_moments(const float *x, int64_t n, double *mean, double *sd) {
    *mean = *sd = 0;
    if (n <= 0) return;
    int64_t blocks = (n + REPORT_BLOCK - 1) / REPORT_BLOCK;
    double *part = calloc((size_t)blocks * 2, sizeof *part);
    double sum = 0, sq = 0;
    if (part) {
        int threads = ts_kernels_threads();
        (void)threads;
        RUN_OMP(parallel for num_threads(threads) schedule(static))
        for (int64_t k = 0; k < blocks; k++) {
            int64_t lo = k * REPORT_BLOCK, len = n - lo < REPORT_BLOCK ? n - lo : REPORT_BLOCK;
            block_sums(x + lo, len, part + 2 * k);
        }
        for (int64_t k = 0; k < blocks; k++) sum += part[2 * k], sq += part[2 * k + 1];
        free(part);
    } else { /* no memory for the partial sums: one block after another */
        double s[2] = {0, 0};
        for (int64_t lo = 0; lo < n; lo += REPORT_BLOCK)
            block_sums(x + lo, n - lo < REPORT_BLOCK ? n - lo : REPORT_BLOCK, s);
        sum = s[0], sq = s[1];
    }
    *mean = sum / n;
    *sd = sqrt(fmax(sq / n - *mean * *mean, 0));
}

/* The argmax of each of rows (rows, V) on the threads, printed in order as
 * the word of that id. */
static void print_argmax_words(const model_batch *b, const float *rows, int64_t n_rows, int64_t V) {
    int32_t *best = malloc((size_t)(n_rows > 0 ? n_rows : 1) * sizeof *best);
    if (best) {
        int threads = n_rows * V >= ((int64_t)1 << 16) ? ts_kernels_threads() : 1;
        (void)threads;
        RUN_OMP(parallel for num_threads(threads) schedule(static))
        for (int64_t t = 0; t < n_rows; t++) best[t] = ts_model_argmax(rows + t * V, (int)V);
    }
    for (int64_t t = 0; t < n_rows; t++)
        printf(" %s", ts_tokenizer_word(&b->tok, best ? best[t] : ts_model_argmax(rows + t * V, (int)V)));
    free(best);
}

/* What the forward produced, in words a learner can check. */
static void report(const ts_model *m, const model_batch *b, const ts_tensor *out, double seconds, bool loaded,
                   bool greedy) {
    const ts_model_config *c = &m->cfg;
    char shape[TS_SHAPE_TEXT_MAX];
    ts_tensor_shape_str(shape, sizeof shape, out, TS_SHAPE_PLAIN);
    double mean, sd;
    output_moments(out->data, ts_tensor_numel(out), &mean, &sd);
    printf("\noutput %s: mean %.4f, std %.4f; forward %.1f ms\n", shape, mean, sd, seconds * 1e3);
    if (m->empty_rows)
        printf("%lld rows of attention weights had every key masked: weights 0 there (PyTorch's softmax: NaN)\n",
               (long long)m->empty_rows);
    if (c->head == TS_HEAD_LM && b->have_tok && out->rank == 3 && !greedy) { /* greedy: report_greedy */
        /* The model's guess at each position of the first sequence. */
        printf("predicted (%s, argmax of the logits):", loaded ? "loaded weights" : "untrained");
        print_argmax_words(b, out->data, out->shape[1], out->shape[2]);
        printf("\n");
    } else if (c->head == TS_HEAD_CLS) {
        printf("class logits of sequence 0:");
        for (int64_t k = 0; k < out->shape[1]; k++) printf(" %.4f", out->data[k]);
        printf("\n");
    }
}

static void print_tokens(const model_batch *b, const ts_model_config *c) {
    if (!b->have_tok || !b->src_ids) return;
    printf("tokens:");
    for (int s = 0; s < c->seq; s++) printf(" %s", ts_tokenizer_word(&b->tok, b->src_ids[s]));
    if (b->tgt_ids) {
        printf("\ndecoder reads:");
        for (int t = 0; t < c->tgt_seq; t++) printf(" %s", ts_tokenizer_word(&b->tok, b->tgt_ids[t]));
    }
    printf("\n");
}

/* Greedy decoding (ts_task_greedy): b->tgt_ids become what the decoder wrote
 * and read back, b->tgt_pad the positions after its <eos>. The traced pass
 * that follows, over these ids, is the decoding itself. */
static ts_status decode_greedy(ts_model *m, model_batch *b, ts_model_input *in) {
    uint8_t *pad = calloc((size_t)m->cfg.batch * m->T, 1);
    if (!pad) return ts_fail(TS_ERR_NOMEM, "out of memory for greedy decoding");
    bool padded;
    ts_status st = ts_task_greedy(m, in, b->tgt_ids, NULL, pad, &padded);
    free(b->tgt_pad);
    b->tgt_pad = padded ? pad : NULL;
    if (!padded) free(pad);
    in->tgt_pad = b->tgt_pad;
    return st;
}

/* A decoded token: its word, or its id when the input came as ids (--ids). */
static const char *token_text(const model_batch *b, int32_t id, char *buf, size_t size) {
    if (b->have_tok) return ts_tokenizer_word(&b->tok, id);
    snprintf(buf, size, "%d", (int)id);
    return buf;
}

/* What greedy decoding wrote for sequence 0: the decoder's input after <bos>,
 * then what its last position wrote (<eos>, or the word it would add). */
static void report_greedy(const model_batch *b, const ts_tensor *out) {
    int64_t T = out->shape[1], V = out->shape[2], t = 1;
    char buf[16];
    printf("decoded greedily (each %s fed back as the next input):", b->have_tok ? "word" : "id");
    for (; t < T && !(b->tgt_pad && b->tgt_pad[t]); t++) printf(" %s", token_text(b, b->tgt_ids[t], buf, sizeof buf));
    const char *last = token_text(b, ts_model_argmax(out->data + (t - 1) * V, (int)V), buf, sizeof buf); /* the last read */
    if (t < T)
        printf(" %s\n(stopped at <eos>: positions %lld to %lld are padding)\n", last, (long long)t, (long long)T - 1);
    else
        printf("\n(no <eos> within the decoder's %lld positions; the last would write %s next)\n", (long long)T, last);
}

/* Pairs of run's own flags that cannot work, before any file is read. */
static int flag_pairs(const run_opts *o) {
    if (o->target && !o->input) return ts_cli_error("run", "--target feeds the decoder; give --input X.npy too");
    if ((o->load_prefix || o->ignore_extra) && !o->load)
        return ts_cli_error("run", "%s is about the weights file: add --load W.safetensors",
                            o->load_prefix ? "--load-prefix" : "--ignore-extra");
    const char *masks[3] = {o->src_kpm, o->tgt_kpm, o->mem_kpm};
    const char *names[3] = {"--src-key-padding-mask", "--tgt-key-padding-mask", "--memory-key-padding-mask"};
    for (int i = 0; i < 3; i++)
        if (masks[i] && !o->input)
            return ts_cli_error("run", "%s marks padded positions of --input vectors; give --input X.npy (--text "
                                       "pads and masks by itself)", names[i]);
    if (o->tol_seen && !o->expect) return ts_cli_error("run", "--tol is --expect's tolerance; add --expect OUT.npy");
    if (o->lm.layout) return ts_cli_error("run", "--layout is for GPT-2-named checkpoints (h.0.attn.c_attn.weight); %s",
                                       o->load ? "this file's names are not GPT-2's" : "add --load");
    if (o->greedy && (o->input || o->backward))
        return ts_cli_error("run", "--greedy decodes token ids at inference; %s",
                            o->input ? "--input vectors have no words to write back" :
                                       "--backward trains against given labels: run them apart");
    if (o->greedy && o->tgt_mask && strcmp(o->tgt_mask, "none") == 0)
        return ts_cli_error("run", "--greedy needs the causal decoder: with --tgt-mask none every position would see "
                                   "words not yet written");
    if ((o->tgt_kpm || o->mem_kpm) && !o->target)
        return ts_cli_error("run", "%s is for the decoder; give --target Y.npy too",
                            o->tgt_kpm ? names[1] : names[2]);
    return -1;
}

/* The padding masks of --input runs, read once the batch and lengths are known. */
static ts_status read_masks(const run_opts *o, const ts_model_config *c, ts_model_input *in, uint8_t *owned[3]) {
    ts_status st = TS_OK;
    if (o->src_kpm) st = ts_model_read_pad_mask(o->src_kpm, "--src-key-padding-mask", c->batch, c->seq, &owned[0]);
    if (!st && o->tgt_kpm)
        st = ts_model_read_pad_mask(o->tgt_kpm, "--tgt-key-padding-mask", c->batch, c->tgt_seq, &owned[1]);
    if (!st && o->mem_kpm)
        st = ts_model_read_pad_mask(o->mem_kpm, "--memory-key-padding-mask", c->batch, c->seq, &owned[2]);
    in->src_pad = owned[0];
    in->tgt_pad = owned[1];
    /* nn.Transformer.forward: memory_key_padding_mask is its own argument, None unless given */
    in->mem_pad = owned[2];
    in->mem_pad_set = c->arch == TS_ARCH_ENCODER_DECODER;
    return st;
}

static int run(const model_flags *mf, const run_opts *o) {
    ts_model_config cfg, wcfg;
    model_batch batch;
    memset(&batch, 0, sizeof batch);
    ts_npy x = {0}, y = {0}, ids = {0};
    ts_safetensors wf;
    ts_weights_info winfo;
    uint8_t *pads[3] = {NULL, NULL, NULL};
    bool have_wf = false;
    char *settings = NULL;
    ts_experiment ex;
    ts_experiment_init(&ex);
    char *edits_json = NULL;
    ts_status st = TS_OK;
    int rc = flag_pairs(o);
    if (rc >= 0) return rc;
    rc = 0;
    model_given g = {.weights_path = o->load, .input_path = o->input, .target_path = o->target, .ids_path = o->ids,
                     .src_pad_given = o->src_kpm != NULL};
    if (o->load) {
        st = ts_safetensors_open(&wf, o->load);
        have_wf = !st;
        if (!st) st = ts_weights_infer(&wf, o->load_prefix, &winfo);
        if (!st) st = model_weights_config(mf, &winfo, o->load, &wcfg);
        if (!st) g.base = &wcfg;
    }
    if (!st && o->input && !(st = ts_model_read_vectors(o->input, "--input", &x))) g.input = &x;
    if (!st && o->target && !(st = ts_model_read_vectors(o->target, "--target", &y))) g.target = &y;
    if (!st && o->ids && (st = ts_npy_read_labels(&ids, o->ids))) st = ts_fail(st, "--ids: %s", ts_last_error());
    if (!st && o->ids) g.ids = &ids;
    if (!st) st = model_flags_resolve_given(mf, &g, &cfg, &batch);
    if (!st && o->backward && (cfg.variants & ~(unsigned)TS_VARIANT_NO_RESIDUAL)) {
        char names[128];
        ts_model_variant_names(cfg.variants & ~(unsigned)TS_VARIANT_NO_RESIDUAL, names, sizeof names);
        st = ts_fail(TS_ERR_ARG, "--backward runs through the correct model (or --variant no-residual) only; "
                                 "--variant %s is for forward passes that show a seed's mistake", names);
    }
    if (!st && o->backward && cfg.ln_std_eps)
        st = ts_fail(TS_ERR_ARG, "--backward: the LayerNorm with eps added to the unbiased std (--norm-formula "
                                 "std+eps, the Annotated Transformer's) has no backward pass yet");
    if (!st && o->tgt_mask) {
        if (cfg.arch != TS_ARCH_ENCODER_DECODER)
            st = ts_fail(TS_ERR_ARG, "--tgt-mask %s is the decoder's self-attention mask; this model has no decoder",
                         o->tgt_mask);
        cfg.tgt_not_causal = strcmp(o->tgt_mask, "none") == 0;
    }
    ts_model m;
    memset(&m, 0, sizeof m);
    ts_model_input in = model_batch_input(&batch);
    if (!st && o->input) {
        memset(&in, 0, sizeof in);
        in.src_embedded = x.f32;
        in.tgt_embedded = y.f32;
        st = read_masks(o, &cfg, &in, pads);
    }
    if (st) {
        rc = ts_cli_error("run", "%s", ts_last_error());
        goto out;
    }
    ts_load_report loaded;
    st = ts_kernels_init();
    if (!st) st = ts_model_init(&m, &cfg);
    if (!st && o->load) {
        ts_load_options lo = {.info = &winfo, .into = NULL, .ignore_extra = o->ignore_extra};
        st = ts_model_load_weights(&m, &wf, &lo, &loaded);
    }
    if (!st) { /* once the weights are final: --dtype bf16 rounds the matrices */
        cfg.dtype = o->lm.dtype;
        st = ts_model_set_dtype(&m, cfg.dtype);
    }
    if (!st) st = experiment_cli_build(&o->xc, &cfg, &ex);
    if (!st && ex.n_edits && !(edits_json = ts_experiment_to_json(&ex))) st = ts_fail(TS_ERR_NOMEM, "out of memory");
    if (!st && ts_experiment_active(&ex) && (o->greedy || o->backward))
        st = ts_fail(TS_ERR_ARG, "%s runs passes of its own: the experiment flags are for one forward pass",
                     o->greedy ? "--greedy" : "--backward");
    if (st) {
        rc = ts_cli_error("run", "%s", ts_last_error());
        goto out;
    }
    if (o->load) {
        char wdesc[768];
        model_weights_describe(&winfo, o->load, wdesc, sizeof wdesc);
        printf("# %s\n", wdesc);
        if (loaded.skipped)
            printf("# skipped %d tensor%s with no place in the model (--ignore-extra): %s\n", loaded.skipped,
                   loaded.skipped == 1 ? "" : "s", loaded.skipped_names);
    }
    if (o->greedy) {
        if (cfg.arch != TS_ARCH_ENCODER_DECODER || cfg.head != TS_HEAD_LM || !batch.tgt_ids)
            st = ts_fail(TS_ERR_ARG, "--greedy decodes with an encoder-decoder that writes words (a vocabulary "
                                     "head); this model is %s", cfg.arch == TS_ARCH_ENCODER_DECODER ?
                                     "an encoder-decoder with no vocabulary head" : "not an encoder-decoder");
        else if (cfg.train_mode)
            st = ts_fail(TS_ERR_ARG, "--greedy decodes at inference; --train-mode's dropout would change every pass");
        if (!st) st = decode_greedy(&m, &batch, &in);
        if (st) {
            rc = ts_cli_error("run", "%s", ts_last_error());
            goto out;
        }
    }
    char desc[TS_MODEL_DESCRIBE_MAX];
    ts_model_config_describe(&cfg, desc, sizeof desc);
    printf("# %s\n", desc);
    /* what shapes cannot tell, printed and kept in the trace: a wrong one changes the numbers, not the shapes */
    char settings_line[512], sources[768] = "";
    settings = trace_cli_settings(&cfg, &in, NULL, settings_line, sizeof settings_line);
    if (o->load) model_weights_sources(&winfo, mf, &cfg, sources, sizeof sources);
    printf("# settings: %s%s%s\n", settings_line, sources[0] ? "; " : "", sources);
    if (o->input && cfg.batch > cfg.seq)
        fprintf(stderr, "tscope run: warning: --input %s has batch %d > sequence %d: if it is seq-first (S, B, D), as "
                "PyTorch's batch_first=False modules take it, give it transposed to (B, S, D)\n", o->input,
                cfg.batch, cfg.seq);
    print_tokens(&batch, &cfg);
    shape_printer printer;
    ts_hook hook = {.fn = NULL, .ctx = NULL};
    if (o->print_shapes) {
        shape_printer_init(&printer, stdout, strcmp(o->print_shapes, "torch") == 0 ? TS_SHAPE_TORCH : TS_SHAPE_PLAIN);
        hook = shape_printer_hook(&printer);
    }
    ts_trace_writer *tracer = NULL;
    trace_tee tee;
    if ((rc = trace_cli_check(&o->trace, "run", cfg.batch)) >= 0) goto out;
    rc = 0;
    if (o->trace.path) {
        trace_cli tcs = o->trace;
        tcs.settings = settings;
        st = trace_cli_open(&tcs, &cfg, o->input ? NULL : &batch, o->argc, o->argv, edits_json, &tracer);
        if (st) {
            rc = ts_cli_error("run", "%s", ts_last_error());
            goto out;
        }
        hook = trace_cli_tee(&tee, hook, ts_trace_writer_hook(tracer));
    }
    if (ts_experiment_active(&ex)) ts_experiment_attach(&ex, &hook);
    ts_tensor out;
    double t0 = now();
    st = ts_model_forward(&m, &in, &hook, &out);
    double t1 = now();
    if (!st) st = ts_experiment_lens_finish(&ex, &m, &hook);
    if (st) {
        rc = ts_cli_error("run", "%s", ts_last_error());
        trace_cli_close(&o->trace, tracer, "run"); /* the steps before the failure stay readable */
        goto out;
    }
    experiment_cli_report(&ex);
    report(&m, &batch, &out, t1 - t0, o->load != NULL, o->greedy);
    if (ex.lens) experiment_cli_print_lens(&ex, NULL, m.S, cfg.vocab, ts_model_is_masked_lm(&cfg));
    if (o->greedy) report_greedy(&batch, &out);
    /* The logits are read again only by --expect and --backward: otherwise
     * the probs take their place. */
    bool logits_read_later = o->expect || o->backward;
    if (cfg.head == TS_HEAD_LM && tracer &&
        (st = logits_read_later ? ts_model_probs_step(&hook, &out, run_temperature)
                                : ts_model_probs_step_in_place(&hook, &out, run_temperature))) {
        rc = ts_cli_error("run", "%s", ts_last_error());
        trace_cli_close(&o->trace, tracer, "run");
        goto out;
    }
    if (o->expect && (rc = run_expect(o->expect, o->tol, &out))) {
        trace_cli_close(&o->trace, tracer, "run");
        goto out;
    }
    if (o->backward && (rc = run_backward(&m, &in, o->labels, &hook))) {
        trace_cli_close(&o->trace, tracer, "run");
        goto out;
    }
    rc = trace_cli_close(&o->trace, tracer, "run");
out:
    ts_experiment_free(&ex);
    free(edits_json);
    ts_model_free(&m);
    model_batch_free(&batch);
    ts_npy_free(&x);
    ts_npy_free(&y);
    ts_npy_free(&ids);
    for (int i = 0; i < 3; i++) free(pads[i]);
    if (have_wf) ts_safetensors_close(&wf);
    free(settings);
    return rc;
}

int ts_cmd_run(int argc, char **argv) {
    model_flags mf;
    run_opts o = {0};
    /* run's own rows: 21 today; the assert below says when they outgrow the room */
    ts_flag flags[MODEL_FLAGS_COUNT + 28 + TRACE_CLI_FLAGS + EXPERIMENT_CLI_FLAGS];
    int n = model_flags_table(flags, 0, &mf);
    n = trace_cli_table(flags, n, &o.trace);
    n = experiment_cli_table(flags, n, &o.xc);
    o.tol = RUN_EXPECT_TOL;
    o.argc = argc;
    o.argv = argv;
    flags[n++] = (ts_flag){"--print-shapes", TS_FLAG_OPTIONAL, &o.print_shapes, "torch",
                           "print each step's shape as it runs: [30, 200, 1536], or torch.Size([...]) with =torch",
                           "plain|torch", "plain", NULL};
    flags[n++] = (ts_flag){"--load", TS_FLAG_STRING, &o.load, "W.safetensors",
                           "weights by PyTorch state_dict name (nn.Transformer, nn.TransformerEncoder, ...); the "
                           "sizes come from them", NULL, NULL, NULL};
    flags[n++] = (ts_flag){"--load-prefix", TS_FLAG_STRING, &o.load_prefix, "P",
                           "take P off every name of the weights first, e.g. model. or backbone.", NULL, NULL, NULL};
    flags[n++] = (ts_flag){"--ignore-extra", TS_FLAG_BOOL, &o.ignore_extra, NULL,
                           "skip the weights' tensors the model has no place for (listed), instead of failing",
                           NULL, NULL, NULL};
    flags[n++] = (ts_flag){"--input", TS_FLAG_STRING, &o.input, "X.npy",
                           "(B, S, D) float32 vectors for the encoder, instead of text", NULL, NULL, NULL};
    flags[n++] = (ts_flag){"--target", TS_FLAG_STRING, &o.target, "Y.npy",
                           "(B, T, D) vectors for the decoder", NULL, NULL, NULL};
    flags[n++] = (ts_flag){"--ids", TS_FLAG_STRING, &o.ids, "IDS.npy",
                           "(B, S) token ids (int32 or int64) for a model with a token table, instead of text", NULL,
                           NULL, NULL};
    flags[n++] = (ts_flag){"--token-types", TS_FLAG_STRING, &o.token_types, "T.npy",
                           "(B, S) token types, one per id, for a BERT folder (--load): its segments A = 0 and B = 1 "
                           "(default: all 0)", NULL, NULL, NULL};
    flags[n++] = (ts_flag){"--src-key-padding-mask", TS_FLAG_STRING, &o.src_kpm, "M.npy",
                           "(B, S) bool or 0/1, True = padding: keys the encoder ignores (or (B) lengths)", NULL,
                           NULL, NULL};
    flags[n++] = (ts_flag){"--tgt-key-padding-mask", TS_FLAG_STRING, &o.tgt_kpm, "M.npy",
                           "(B, T) True = padding: keys the decoder's self-attention ignores", NULL, NULL, NULL};
    flags[n++] = (ts_flag){"--memory-key-padding-mask", TS_FLAG_STRING, &o.mem_kpm, "M.npy",
                           "(B, S) True = padding: memory keys cross-attention ignores (none unless given, as "
                           "nn.Transformer)", NULL, NULL, NULL};
    flags[n++] = (ts_flag){"--tgt-mask", TS_FLAG_CHOICE, &o.tgt_mask, NULL,
                           "the decoder's self-attention: causal (the default) or none", "causal|none", NULL, NULL};
    flags[n++] = (ts_flag){"--backward", TS_FLAG_BOOL, &o.backward, NULL,
                           "then one backward pass: loss, grad.<activation> and grad.<parameter> to the trace", NULL,
                           NULL, NULL};
    flags[n++] = (ts_flag){"--scores", TS_FLAG_BOOL, &o.scores, NULL,
                           "with a language model's --load: each head's previous-token, induction and copying "
                           "scores on random sequences written twice (docs/training.md)", NULL, NULL, NULL};
    flags[n++] = (ts_flag){"--greedy", TS_FLAG_BOOL, &o.greedy, NULL,
                           "an encoder-decoder writes its own answer: from <bos>, each argmax fed back as the next "
                           "input until <eos>; the trace is the pass over what it wrote", NULL, NULL, NULL};
    flags[n++] = (ts_flag){"--layout", TS_FLAG_CHOICE, &o.lm.layout, NULL,
                           "a GPT-2-named file's code: hf (Conv1D, (in, out)), nanogpt (nn.Linear, (out, in), exact "
                           "GELU) or mingpt (nn.Linear, tanh GELU), when neither model_args nor config.json says",
                           "hf|nanogpt|mingpt", NULL, NULL};
    flags[n++] = (ts_flag){"--names", TS_FLAG_STRING, &o.names, "MAP.txt",
                           "rename the weights' tensors: lines PATTERN -> NAME (a regular expression over the whole "
                           "name, \\1.. its groups; NAME in a layout tscope reads; docs/own-model.md)", NULL, NULL,
                           NULL};
    flags[n++] = (ts_flag){"--dtype", TS_FLAG_CHOICE, &o.dtype, NULL,
                           "how the weight matrices are read: f32 (the default; a bf16 file is widened) or bf16 (each "
                           "matrix rounded to bf16 and widened as the GEMMs pack it, float32 sums; --expect then "
                           "says how far that moves the output)", "f32|bf16", NULL, NULL};
    flags[n++] = (ts_flag){"--expect", TS_FLAG_STRING, &o.expect, "OUT.npy",
                           "compare the final output (a language model's logits (B, S, V)) with a reference "
                           "array: the largest differences; exit 1 beyond --tol", NULL, NULL, NULL};
    flags[n++] = (ts_flag){"--tol", TS_FLAG_FLOAT, &o.tol, "T",
                           "--expect's tolerance: every |diff| <= T * max(1, |want|) (default 1e-4)", NULL, NULL,
                           &o.tol_seen};
    flags[n++] = (ts_flag){"--labels", TS_FLAG_STRING, &o.labels, "L.npy",
                           "the backward's targets: ids (B, T) (default: the source, copied), class ids (B), or "
                           "d loss/d out", NULL, NULL, NULL};
    flags[n++] = (ts_flag){"--temperature", TS_FLAG_FLOAT, &run_temperature, "T",
                           "the trace's probs step, the softmax of the logits, at temperature T (1: the model's own "
                           "chances)", NULL, NULL, &o.temperature_seen};
    assert(n <= (int)(sizeof flags / sizeof flags[0]));
    const ts_cli_spec spec = {
        .command = "run",
        .synopsis = "[--preset P | model flags] [--text S | --input X.npy [--target Y.npy] [masks]]\n"
                    "       [--load W.safetensors [--load-prefix P] [--ignore-extra]] [--print-shapes[=torch]]\n"
                    "       [--trace FILE [--level L] [--only GLOB] [--keep-batch I]] [--backward [--labels L.npy]]",
        .description = "Run one forward pass of the Transformer. With --print-shapes every step prints its shape\n"
                       "the way the seed notebooks do (qkv.size(): [30, 200, 1536]), under a line naming its\n"
                       "module; =torch prints torch.Size([30, 200, 1536]) to diff against a notebook's output.\n"
                       "With --load the model comes from the weights: their tensors decide the sizes, their\n"
                       "__metadata__ or the flags the rest; a flag that disagrees with them is an error.",
        .flags = flags,
        .n_flags = n,
    };
    int rc = ts_cli_parse(&spec, argc, argv, NULL, NULL);
    if (rc >= 0) return rc;
    if (o.print_shapes && strcmp(o.print_shapes, "plain") != 0 && strcmp(o.print_shapes, "torch") != 0)
        return ts_cli_error("run", "--print-shapes takes =torch or nothing, not '=%s'", o.print_shapes);
    if (o.temperature_seen && !(run_temperature > 0 && run_temperature <= 100))
        return ts_cli_error("run", "--temperature %g: use a number in (0, 100]", (double)run_temperature);
    if (o.temperature_seen && !o.trace.path)
        return ts_cli_error("run", "--temperature sets the trace's probs step: add --trace FILE");
    if (o.labels && !o.backward) return ts_cli_error("run", "--labels is the backward pass's target; add --backward");
    /* a language model's checkpoint brings its config and tokenizer; run_lm refuses the flags it has no use for */
    if (o.tol_seen && !(o.tol >= 0)) return ts_cli_error("run", "--tol %g: a tolerance is 0 or more", (double)o.tol);
    if (o.dtype && ts_model_dtype_parse(o.dtype, "--dtype", &o.lm.dtype)) return ts_cli_error("run", "%s", ts_last_error());
    if (o.names && !o.load) return ts_cli_error("run", "--names renames the weights' tensors: add --load W");
    /* the map is checked whole before any weight is read, and every file opened from here on goes through it */
    ts_name_map names = {0};
    if (o.names && ts_name_map_read(&names, o.names)) return ts_cli_error("run", "%s", ts_last_error());
    if (o.names) ts_name_map_use(&names);
    if (o.load && ts_lm_checkpoint_is(o.load)) {
        /* what a GPT-2-named state_dict cannot say (a config does when there is one) */
        o.lm.heads = mf.seen[F_HEADS] ? mf.heads : 0;
        o.lm.activation = mf.seen[F_ACTIVATION] ? mf.activation : NULL;
        if (o.tol_seen && !o.expect) rc = ts_cli_error("run", "--tol is --expect's tolerance; add --expect OUT.npy");
        else rc = run_lm(o.load, &o.lm, &mf.text, o.ids, o.token_types, flags, n, &o.trace, o.print_shapes,
                         o.backward, o.scores, o.expect, o.tol, &o.xc, argc, argv);
    } else if (o.token_types) {
        rc = ts_cli_error("run", "--token-types %s: token types are read by a model that has them (a BERT folder, "
                                 "--load DIR)", o.token_types);
    } else if (o.scores) {
        rc = ts_cli_error("run", "--scores measures a language model's heads: --load one saved by tscope train --task lm");
    } else {
        rc = run(&mf, &o);
    }
    ts_name_map_use(NULL);
    ts_name_map_free(&names);
    return rc;
}
