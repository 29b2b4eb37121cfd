/* bench_train: a training step of a preset, timed phase by phase.
 *
 * The yardstick of an encoder-decoder is seed 004's copy-task training in
 * PyTorch (the peer script in the project's notes, seed004_train.py): Adam on
 * a 6+6-layer d512 model, batch 64 of 10 ids, dropout 0.1. The yardstick of
 * preset lm (a language model: one causal stack) is torch_lm.py, a GPT of
 * the same sizes trained with AdamW and clipping on random ids; the last line
 * gives its flags for this config. Run the peer in the same session and
 * compare the seconds per step printed here with its "s/step". */
#include "bench_train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_time.h"
#include "tscope/kernels.h"
#include "tscope/model.h"
#include "tscope/train.h"

enum { PH_FORWARD, PH_BACKWARD, PH_UPDATE, PH_STEP, N_PHASES };

/* One step with each phase timed into t[N_PHASES]. */
static ts_status one_step(ts_train *tr, ts_optim *opt, const ts_model_input *in, const int32_t *labels, double *t,
                          double *loss, bool lm) {
    const ts_model_config *c = &tr->m->cfg;
    double t0 = bench_now();
    ts_tensor out;
    ts_status st = ts_train_forward(tr, in, &out);
    if (st) return st;
    double t1 = bench_now();
    int64_t rows = ts_tensor_numel(&out) / c->vocab;
    int ignore = lm ? -1 : 0; /* a language model's every id is a token; the copy task's 0 is padding */
    *loss = ts_bwd_cross_entropy_forward(out.data, labels, rows, c->vocab, ignore, 0.0f, NULL);
    ts_train_zero_grad(tr);
    ts_bwd_cross_entropy_backward(ts_train_output_grad(tr), 1.0f, out.data, labels, rows, c->vocab, ignore, 0.0f);
    if ((st = ts_train_backward(tr, NULL, NULL))) return st;
    double t2 = bench_now();
    ts_optim_clip(tr->grads, tr->m->n_floats, lm ? 1.0f : 0.0f); /* the peer clips; else the norm only */
    ts_optim_step(opt, tr->m->block, tr->grads, 1e-3f);
    double t3 = bench_now();
    t[PH_FORWARD] = t1 - t0, t[PH_BACKWARD] = t2 - t1, t[PH_UPDATE] = t3 - t2, t[PH_STEP] = t3 - t0;
    return TS_OK;
}

int bench_model_train(int reps, const char *preset) {
    ts_model_config cfg;
    if (ts_model_config_preset(&cfg, preset ? preset : "copy")) {
        fprintf(stderr, "tscope bench: %s\n", ts_last_error());
        return 2;
    }
    bool lm = ts_model_is_lm(&cfg);
    if ((cfg.arch != TS_ARCH_ENCODER_DECODER && !lm) || cfg.head != TS_HEAD_LM || cfg.input != TS_INPUT_TOKENS) {
        fprintf(stderr, "tscope bench: train times an encoder-decoder or a language model over token ids (presets "
                        "tiny, copy, base, lm), not %s\n", cfg.preset);
        return 2;
    }
    cfg.text = NULL;
    if (!lm) cfg.tgt_seq = cfg.seq - 1; /* seed 004's decoder reads the source shifted by one */
    ts_model m;
    ts_train tr;
    ts_optim opt;
    ts_optim_config oc;
    ts_optim_config_default(&oc, lm ? TS_OPTIM_ADAMW : TS_OPTIM_ADAM); /* the peer's: Adam() as the seed, AdamW() */
    memset(&tr, 0, sizeof tr), memset(&opt, 0, sizeof opt);
    ts_model_summary sum;
    ts_status st = ts_model_dry_run(&cfg, NULL, &sum);
    double flops = st ? 0 : 3.0 * sum.flops; /* backward ~ twice the forward's matmuls */
    if (!st) ts_model_summary_free(&sum);
    if (!st) st = ts_model_init(&m, &cfg);
    if (st) {
        fprintf(stderr, "tscope bench: %s\n", ts_last_error());
        return 1;
    }
    /* a language model: tgt holds B windows of S + 1 ids, src and labels the two views of them */
    int64_t B = cfg.batch, S = cfg.seq, T = lm ? cfg.seq + 1 : cfg.tgt_seq;
    int32_t *src = malloc(sizeof(int32_t) * (size_t)(B * S)), *tgt = malloc(sizeof(int32_t) * (size_t)(B * T));
    int32_t *labels = malloc(sizeof(int32_t) * (size_t)(B * T));
    double *t[N_PHASES] = {0};
    for (int k = 0; k < N_PHASES; k++) t[k] = calloc((size_t)reps, sizeof(double));
    st = src && tgt && labels && t[0] && t[1] && t[2] && t[3] ? TS_OK : ts_fail(TS_ERR_NOMEM, "out of memory");
    if (!st) st = ts_train_init(&tr, &m);
    if (!st) st = ts_optim_init(&opt, &oc, m.n_floats);
    ts_model_set_training(&m, true);
    int64_t params = 0;
    for (int i = 0; i < m.n_params; i++) params += m.params[i].numel;
    if (!st && lm)
        printf("# train step of preset %s: a causal stack (language model), %s, %d layers, d %d, %d heads, ffn %d, "
               "vocab %d, batch %lld x %lld, dropout %g, AdamW, clip 1; %lld parameters, %.0f MB of activations; %s, "
               "%d threads; median of %d steps after a warm-up\n",
               cfg.preset, cfg.norm == TS_NORM_PRE ? "pre-LN" : "post-LN", cfg.layers, cfg.d_model, cfg.heads, cfg.ffn,
               cfg.vocab, (long long)B, (long long)S, (double)cfg.dropout, (long long)params,
               (double)ts_train_bytes(&tr) / 1048576.0, ts_isa_name(ts_kernels_isa()), ts_kernels_threads(), reps);
    else if (!st)
        printf("# train step of preset %s: %s, %d+%d layers, d %d, ffn %d, vocab %d, batch %lld x %lld (decoder %lld), "
               "dropout %g, Adam; %lld parameters, %.0f MB of activations; %s, %d threads; median of %d steps after a "
               "warm-up\n",
               cfg.preset, cfg.norm == TS_NORM_PRE ? "pre-LN" : "post-LN", cfg.layers, cfg.dec_layers, cfg.d_model,
               cfg.ffn, cfg.vocab, (long long)B, (long long)S, (long long)T, (double)cfg.dropout, (long long)params,
               (double)ts_train_bytes(&tr) / 1048576.0, ts_isa_name(ts_kernels_isa()), ts_kernels_threads(), reps);
    double loss = 0, first = 0, scratch[N_PHASES];
    for (int r = -1; r < reps && !st; r++) {
        if (lm) { /* random ids, as the peer's: the input, and the same shifted by one as labels */
            ts_model_random_ids(tgt, B * T, 0, cfg.vocab, cfg.seed + (uint64_t)(r + 1));
            for (int64_t b = 0; b < B; b++)
                for (int64_t i = 0; i < S; i++) src[b * S + i] = tgt[b * T + i], labels[b * S + i] = tgt[b * T + i + 1];
        } else {
            ts_task_batch(TS_TASK_COPY, cfg.vocab, (int)B, (int)S, cfg.seed, (uint64_t)(r + 1), src, tgt, labels);
        }
        ts_model_input in = {.src_ids = src, .tgt_ids = lm ? NULL : tgt};
        st = one_step(&tr, &opt, &in, labels, scratch, &loss, lm);
        if (r < 0) first = loss;
        for (int k = 0; r >= 0 && k < N_PHASES; k++) t[k][r] = scratch[k];
    }
    int rc = 0;
    if (st) {
        fprintf(stderr, "tscope bench: %s\n", ts_last_error());
        rc = 1;
    } else {
        double step = bench_median(t[PH_STEP], reps);
        printf("train step     %8.3f s  (forward %.3f s, backward %.3f s, clip + Adam %.3f s)  %.1f GFLOP/s\n", step,
               bench_median(t[PH_FORWARD], reps), bench_median(t[PH_BACKWARD], reps), bench_median(t[PH_UPDATE], reps),
               flops / step * 1e-9);
        if (lm) {
            printf("# loss %.3f at the first step, %.3f at the last (AdamW, lr 1e-3, random ids)\n", first, loss);
            printf("# peer: torch_lm.py --threads %d --layers %d --d %d --heads %d --ffn %d --ctx %lld --batch %lld "
                   "--vocab %d --steps 10 (OpenBLAS; /usr/bin/python3); ratio = tscope / peer, same session\n",
                   ts_kernels_threads(), cfg.layers, cfg.d_model, cfg.heads, cfg.ffn, (long long)S, (long long)B,
                   cfg.vocab);
        } else {
            /* Adam at 1e-3 with no warm-up, as the seed: the loss may well rise; this times steps, not learning. */
            printf("# loss %.3f at the first step, %.3f at the last (Adam, lr 1e-3, no warm-up, as seed 004)\n", first,
                   loss);
            printf("# peer: seed 004's PyTorch loop (seed004_train.py, OpenBLAS, 2 threads) prints its s/step; "
                   "ratio = tscope / peer, measured in the same session\n");
        }
    }
    for (int k = 0; k < N_PHASES; k++) free(t[k]);
    free(src), free(tgt), free(labels);
    ts_optim_free(&opt);
    ts_train_free(&tr);
    ts_model_free(&m);
    return rc;
}
