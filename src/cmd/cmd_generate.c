/* tscope generate: continue a prompt with a language model's checkpoint
 * (tscope train --task lm), one sampled token at a time: temperature, top-k,
 * a seed. With --trace, the whole text's forward pass is recorded as `tscope
 * run` records one (the causal mask makes position i's logits the ones token
 * i+1 was drawn from: one pass shows every draw), followed by
 * generate.probs (1, T, V): at each position of the text the distribution of
 * the next token after temperature and top-k (the generated tokens' rows are
 * the ones they were drawn from), and generate.tokens (N), the new ids.
 *
 * The prompt goes through the model one token at a time with a cache of every
 * layer's keys and values (ts_model_decode_step), and so does each new token:
 * generation costs one position a token, not the whole window. Past the
 * positions the model has (its learned table), and for a model the cache
 * cannot run, each token re-reads the last S tokens instead: the text sits at
 * positions 0.., the rest of the window is filler that the causal mask keeps
 * from mattering, and the logits at the text's last position give the next
 * token. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "lm_cli.h"
#include "tscope/kernels.h"

typedef struct gen_opts {
    const char *load, *prompt;
    ts_load_options lm; /* how the checkpoint is read: lm.layout is --layout hf|nanogpt, for a GPT-2-named file
                         * that does not say */
    int n, top_k, seed;
    float temperature;
    bool seed_seen, quiet, prompt_seen;
    trace_cli trace;
    experiment_cli xc; /* --ablate, --add, --mean-from: at every new token */
} gen_opts;

static ts_status grow(ts_bpe_ids *ids, size_t need) {
    if (need <= ids->cap) return TS_OK;
    size_t cap = ids->cap ? ids->cap : 64;
    while (cap < need) cap *= 2;
    int32_t *p = realloc(ids->ids, sizeof(int32_t) * cap);
    if (!p) return ts_fail(TS_ERR_NOMEM, "out of memory");
    ids->ids = p, ids->cap = cap;
    return TS_OK;
}

/* The traced pass over the whole text, then the draws: generate.probs
 * (1, T, V) holds at row i the distribution token i + 1 comes from, after
 * temperature and top-k (the prompt's rows and the last from the traced
 * pass, the drawn tokens' rows exactly as they were drawn from), so its rows
 * line up with the text's positions and take their labels. */
static ts_status trace_text(const gen_opts *o, const ts_bpe_ids *ids, size_t prompt_len, const float *drawn, int V,
                            int argc, char **argv) {
    ts_model m;
    ts_lmtok tok;
    ts_trace_writer *w = NULL;
    int T = (int)ids->count, n = (int)(ids->count - prompt_len);
    ts_status st = ts_lm_checkpoint_open(o->load, &o->lm, 1, T, &m, &tok);
    if (st) return st;
    ts_experiment ex;
    ts_experiment_init(&ex);
    if (experiment_cli_given(&o->xc)) st = experiment_cli_build(&o->xc, &m.cfg, &ex);
    char *edits = !st && ex.n_edits ? ts_experiment_to_json(&ex) : NULL;
    if (!st) st = lm_cli_trace_open(&o->trace, &m.cfg, &tok, ids->ids, 1, T, argc, argv, edits, &w);
    free(edits);
    ts_hook hook = w ? ts_trace_writer_hook(w) : (ts_hook){0};
    if (ex.n_edits) ts_experiment_attach(&ex, &hook);
    ts_model_input in = {.src_ids = ids->ids};
    ts_tensor logits;
    if (!st) st = ts_model_forward(&m, &in, &hook, &logits);
    float *probs = malloc(sizeof(float) * (size_t)T * V), *tokens = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (!st && (!probs || !tokens)) st = ts_fail(TS_ERR_NOMEM, "out of memory");
    for (int i = 0; !st && i < T; i++) {
        int k = i - (int)prompt_len + 1; /* the draw this row made, when it made one */
        if (k >= 0 && k < n)
            memcpy(probs + (size_t)i * V, drawn + (size_t)k * V, sizeof(float) * (size_t)V);
        else
            ts_model_sample(logits.data + (size_t)i * V, V, o->temperature, o->top_k, 0.5, probs + (size_t)i * V);
    }
    ts_tensor t;
    if (!st) {
        ts_tensor_view(&t, probs, 3, (int64_t[]){1, T, V});
        st = ts_hook_call(&hook, "generate.probs", TS_OP_SOFTMAX, &t, TS_TAG_PLAIN);
    }
    if (!st && n > 0) {
        for (int i = 0; i < n; i++) tokens[i] = (float)ids->ids[prompt_len + (size_t)i];
        ts_tensor_view(&t, tokens, 1, (int64_t[]){n});
        st = ts_hook_call(&hook, "generate.tokens", TS_OP_METRIC, &t, TS_TAG_PLAIN);
    }
    free(probs);
    free(tokens);
    if (st) {
        ts_trace_writer_abort(w);
    } else if (trace_cli_close(&o->trace, w, "generate")) {
        st = ts_fail(TS_ERR_IO, "the trace %s was not written", o->trace.path);
    }
    ts_experiment_free(&ex);
    ts_model_free(&m);
    ts_lmtok_free(&tok);
    return st;
}

/* The prompt a checkpoint of tscope train --task lm was sampled with ("" if none). */
static void saved_prompt(const char *path, char *out, size_t size) {
    ts_safetensors f;
    if (ts_gpt2_is(path) || ts_safetensors_open(&f, path)) return;
    const char *p = ts_safetensors_meta(&f, "prompt");
    if (p) snprintf(out, size, "%s", p);
    ts_safetensors_close(&f);
}

/* Where a long generation is: a bar on a terminal, else a line each tenth. */
static void progress(const gen_opts *o, int k, bool tty, double *last) {
    if (o->quiet || o->n < 1000) return;
    if (tty) {
        double t = (double)clock() / CLOCKS_PER_SEC;
        if (t - *last < 0.2 && k != o->n) return;
        *last = t;
        fprintf(stderr, "\r# %d/%d tokens%s", k, o->n, k == o->n ? "\n" : "");
    } else if (k % (o->n / 10) == 0 || k == o->n) {
        fprintf(stderr, "# %d/%d tokens\n", k, o->n);
    }
}

static int generate(const gen_opts *o, int argc, char **argv) {
    ts_lmtok tok;
    ts_model m;
    memset(&tok, 0, sizeof tok);
    memset(&m, 0, sizeof m);
    ts_bpe_ids ids = {0};
    float *probs = NULL;
    int32_t *window = NULL;
    int rc = 0;
    ts_model_config cfg;
    ts_status st = ts_kernels_init();
    if (!st) st = ts_lm_checkpoint_read(o->load, &o->lm, &cfg, &tok);
    if (!st && ts_model_is_masked_lm(&cfg))
        st = ts_fail(TS_ERR_ARG, "%s is a masked language model (BERT): it scores the token at each position, not the "
                     "next one, so it does not write text; tscope run --load %s %s shows what it predicts",
                     o->load, o->load, tok.count ? "--text" : "--ids IDS.npy (it has no tokenizer)");
    if (!st && tok.count == 0)
        st = ts_fail(TS_ERR_ARG, "%s has no tokenizer (no %s beside it) to read --prompt with", o->load,
                     ts_lm_tokenizer_files(o->load));
    if (!st && tok.count != cfg.vocab)
        st = ts_fail(TS_ERR_ARG, "%s: the model's %d ids include %d its %d-token tokenizer lacks (a padded vocabulary): "
                     "a draw could pick one; use tscope run --text to read a text with it", o->load, cfg.vocab,
                     cfg.vocab - (int)tok.count, (int)tok.count);
    /* the prompt: --prompt, else the one the model was trained with (its
     * corpus's first line), else the Bible's; a failure says which it was */
    char saved[256] = "";
    if (!st && !o->prompt_seen) saved_prompt(o->load, saved, sizeof saved);
    const char *prompt = o->prompt_seen ? o->prompt : saved[0] ? saved : o->prompt;
    bool tok_ok = !st;
    if (!st) st = ts_lmtok_encode(&tok, prompt, strlen(prompt), &ids);
    if (!st && ids.count == 0) st = ts_fail(TS_ERR_ARG, "it has no tokens: give some text to continue");
    if (st && tok_ok)
        st = ts_fail(st, "%s \"%.200s\": %s%s", o->prompt_seen ? "--prompt" : "the default prompt", prompt,
                     ts_last_error(), o->prompt_seen ? "" : " (give --prompt TEXT)");
    ts_lmtok_free(&tok);
    int S = cfg.seq;
    /* a trace shows the whole text in one pass: it must fit the positions the model learnt */
    if (!st && o->trace.path && ids.count + (size_t)o->n > (size_t)S)
        st = ts_fail(TS_ERR_ARG, "--trace shows the text in one pass of at most %d tokens: the prompt (%zu) and -n %d "
                                 "do not fit",
                     S, ids.count, o->n);
    if (!st) st = ts_lm_checkpoint_open(o->load, &o->lm, 1, S, &m, &tok);
    /* the edits, at every position the cache decodes (and in each re-read window past it) */
    ts_experiment ex;
    ts_experiment_init(&ex);
    if (!st && experiment_cli_given(&o->xc)) st = experiment_cli_build(&o->xc, &m.cfg, &ex);
    if (!st) st = ts_experiment_check_decode(&ex);
    ts_hook edits = {0};
    if (ex.n_edits) ts_experiment_attach(&ex, &edits);
    if (!st) st = grow(&ids, ids.count + (size_t)o->n);
    int V = m.cfg.vocab;
    if (!st && !(probs = malloc(sizeof(float) * (size_t)V * (size_t)(o->n > 0 ? o->n : 1))))
        st = ts_fail(TS_ERR_NOMEM, "out of memory");
    if (!st && !(window = calloc((size_t)S, sizeof *window))) st = ts_fail(TS_ERR_NOMEM, "out of memory");
    size_t prompt_len = ids.count;
    uint64_t key = ts_mix64((uint64_t)(uint32_t)o->seed ^ 0x6E4Eull);
    /* the cache, primed with the prompt; without it (or past its positions) the window is re-read */
    ts_kv_cache kv = {0};
    bool cached = !st && ts_model_can_cache(&m.cfg, NULL) && ids.count <= (size_t)S;
    const float *row = NULL;
    if (cached) st = ts_kv_cache_init(&kv, &m);
    for (size_t i = 0; cached && !st && i < ids.count; i++) {
        ex.pos0 = (int)i;
        st = ts_model_decode(&m, &kv, &ids.ids[i], 1, &edits, &row);
    }
    bool tty = isatty(fileno(stderr));
    double last = 0;
    for (int k = 0; k < o->n && !st; k++) {
        size_t n = ids.count;
        if (cached && k > 0) {
            ex.pos0 = (int)n - 1;
            if (kv.len < kv.capacity)
                st = ts_model_decode(&m, &kv, &ids.ids[n - 1], 1, &edits, &row);
            else
                cached = false; /* the positions are used up: slide the window from here */
        }
        if (st) break;
        if (!cached) {
            size_t from = n > (size_t)S ? n - (size_t)S : 0;
            memset(window, 0, sizeof(int32_t) * (size_t)S);
            memcpy(window, ids.ids + from, sizeof(int32_t) * (n - from));
            ts_model_input in = {.src_ids = window};
            ts_tensor logits;
            ex.pos0 = 0;
            if ((st = ts_model_forward(&m, &in, &edits, &logits))) break;
            row = logits.data + (int64_t)(n - from - 1) * V;
        }
        int32_t next = ts_model_sample(row, V, o->temperature, o->top_k, ts_u01(key, (uint64_t)k), probs + (size_t)k * V);
        if (next < 0) {
            st = ts_fail(TS_ERR_ARG, "the logits for new token %d hold NaN or +Inf, so no token can be drawn "
                                         "(tscope run --trace on the text names the first step that holds them)", k + 1);
            break;
        }
        ids.ids[ids.count++] = next;
        progress(o, k + 1, tty, &last);
    }
    ts_kv_cache_free(&kv);
    char *text = NULL;
    size_t len = 0;
    if (!st) st = ts_lmtok_decode(&tok, ids.ids, ids.count, &text, &len);
    if (!st) {
        fwrite(text, 1, len, stdout);
        printf("\n");
        fflush(stdout);
        if (!o->quiet)
            fprintf(stderr, "# %d tokens after a prompt of %zu (%s), temperature %g, top-k %d, seed %d\n", o->n,
                    prompt_len, ts_lmtok_kind_name(tok.kind), (double)o->temperature, o->top_k, o->seed);
    }
    if (!st && o->trace.path) st = trace_text(o, &ids, prompt_len, probs, V, argc, argv);
    if (st) rc = ts_cli_error("generate", "%s", ts_last_error());
    free(text);
    free(probs);
    free(window);
    ts_bpe_ids_free(&ids);
    ts_experiment_free(&ex);
    ts_model_free(&m);
    ts_lmtok_free(&tok);
    return rc;
}

int ts_cmd_generate(int argc, char **argv) {
    gen_opts o = {.prompt = "And God said", .n = 200, .temperature = 0.8f};
    ts_flag flags[11 + TRACE_CLI_FLAGS + EXPERIMENT_CLI_FLAGS];
    int n = trace_cli_table(flags, 0, &o.trace);
    n = experiment_cli_edit_table(flags, n, &o.xc);
    const ts_flag rows[] = {
        {"--load", TS_FLAG_STRING, &o.load, "W.safetensors",
         "a language model saved by tscope train --task lm (required)", NULL, NULL, NULL},
        {"--prompt", TS_FLAG_STRING, &o.prompt, "S",
         "the text to continue (the prompt the model was trained with: its corpus's first line; else \"And God said\")",
         NULL, NULL, &o.prompt_seen},
        {"-n", TS_FLAG_INT, &o.n, "N", "tokens to add (200)", NULL, NULL, NULL},
        {"--tokens", TS_FLAG_INT, &o.n, "N", "the same as -n", NULL, NULL, NULL},
        {"--temperature", TS_FLAG_FLOAT, &o.temperature, "T",
         "divide the logits by T before the softmax: below 1 surer, above 1 wilder; 0 = always the most likely (0.8)",
         NULL, NULL, NULL},
        {"--top-k", TS_FLAG_INT, &o.top_k, "K", "draw only from the K most likely tokens; 0 = all (0)", NULL, NULL,
         NULL},
        {"--seed", TS_FLAG_INT, &o.seed, "N", "the draws' seed: the same seed gives the same text (0)", NULL, NULL,
         &o.seed_seen},
        {"--quiet", TS_FLAG_BOOL, &o.quiet, NULL, "no summary line on stderr", NULL, NULL, NULL},
        {"--layout", TS_FLAG_CHOICE, &o.lm.layout, NULL,
         "a GPT-2-named file's linear weights: hf (Conv1D, (in, out)) or nanogpt (nn.Linear, (out, in)), when "
         "neither model_args nor config.json says", "hf|nanogpt", NULL, NULL},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) flags[n++] = rows[i];
    const ts_cli_spec spec = {
        .command = "generate",
        .synopsis = "--load W.safetensors [--prompt S] [-n N] [--temperature T] [--top-k K] [--seed N] [--trace FILE]\n"
                    "       [--ablate SPEC] [--add STEP[@POS]=VEC.npy] [--mean-from TRACE]",
        .description = "Continue a prompt with a language model trained by tscope train --task lm: each new token is\n"
                       "drawn from the softmax of the logits at the text's last position. The text (prompt and\n"
                       "continuation) goes to stdout. --trace records each token's forward pass, then\n"
                       "generate.probs (what the token was drawn from) and generate.token. --ablate and --add act\n"
                       "at every new token (each decoded position), as run's do on a whole text.",
        .flags = flags,
        .n_flags = n,
    };
    int rc = ts_cli_parse(&spec, argc, argv, NULL, NULL);
    if (rc >= 0) return rc;
    if (!o.load) return ts_cli_error("generate", "--load W.safetensors is required (a model from tscope train --task lm)");
    if (o.n < 0) return ts_cli_error("generate", "-n %d must not be negative", o.n);
    if (!(o.temperature >= 0)) return ts_cli_error("generate", "--temperature %g must be 0 or more", (double)o.temperature);
    if (o.top_k < 0) return ts_cli_error("generate", "--top-k %d must be 0 (all) or more", o.top_k);
    if (o.seed < 0) return ts_cli_error("generate", "--seed %d must not be negative", o.seed);
    if ((rc = trace_cli_check(&o.trace, "generate", 1)) >= 0) return rc;
    if (o.lm.layout && !ts_gpt2_is(o.load))
        return ts_cli_error("generate", "--layout is for GPT-2-named checkpoints; %s is not one", o.load);
    if (!ts_lm_checkpoint_is(o.load)) {
        ts_safetensors f; /* a file that does not open says why, not that it is some other model */
        if (ts_safetensors_open(&f, o.load)) return ts_cli_error("generate", "--load: %s", ts_last_error());
        ts_safetensors_close(&f);
        return ts_cli_error("generate", "%s is not a language model saved by tscope train --task lm (no \"task\": "
                                        "\"lm\" in its metadata)",
                            o.load);
    }
    return generate(&o, argc, argv);
}
