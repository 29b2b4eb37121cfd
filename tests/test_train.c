/* The trainer on token models, where tests/ref has no fixture: token
 * embeddings (scaled or not, tied or not), sinusoidal and learned positions
 * with their LayerNorm, dropout, the LM and classification heads, and the
 * cross-entropy with padding and label smoothing on top.
 *
 * - The training forward in eval mode gives the logits ts_model_forward gives
 *   (inference and training compute the same function), with each mask too:
 *   --mask choices, --tgt-mask none, a memory padding mask of its own.
 * - Whole-model finite differences: for each parameter tensor, the 6
 *   coordinates with the largest analytic gradient (plus 2 random ones) are
 *   perturbed by +-h in float and the loss re-evaluated with the same dropout
 *   masks (the trainer's stream counter is reset). Float forwards limit this
 *   check: h = 1e-2 and the normalized error
 *   max |analytic - numeric| / max |numeric| over a tensor's coordinates must
 *   be below 5e-3 (the per-op checks in test_backward.c are 1e-4 in double).
 * - Training a tiny copy model for a few dozen steps lowers the loss.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tscope/kernels.h"
#include "tscope/model.h"
#include "tscope/train.h"

#define FD_H 1e-2f
#define FD_TOL 5e-3

typedef struct batch {
    int32_t src[64], tgt[64], labels[64];
    uint8_t src_pad[64], tgt_pad[64], mem_pad[64];
} batch;

/* Give cross-attention a memory padding mask of its own (nn.Transformer's
 * memory_key_padding_mask), not the source's. */
static bool own_memory_mask;

static ts_model_config small_config(void) {
    ts_model_config c = {.arch = TS_ARCH_ENCODER_DECODER, .d_model = 8, .heads = 2, .ffn = 16, .layers = 1,
                         .dec_layers = 1, .vocab = 11, .seq = 5, .tgt_seq = 4, .batch = 2, .dropout = 0.2f,
                         .eps = 1e-5f, .embed_eps = 1e-5f, .norm = TS_NORM_PRE, .pe = TS_PE_LEARNED,
                         .activation = TS_ACT_GELU, .head = TS_HEAD_LM, .input = TS_INPUT_TOKENS, .seed = 7};
    return c;
}

static void fill_batch(batch *b, const ts_model_config *c) {
    memset(b, 0, sizeof *b);
    int S = c->seq, T = c->tgt_seq;
    for (int i = 0; i < c->batch * S; i++) b->src[i] = 1 + (i * 7 + 3) % (c->vocab - 1);
    for (int i = 0; i < c->batch * T; i++) {
        b->tgt[i] = 1 + (i * 5 + 1) % (c->vocab - 1);
        b->labels[i] = 1 + (i * 3 + 2) % (c->vocab - 1);
    }
    /* one stack with a vocabulary head (a GPT): each position's label is some id, none ignored */
    if (c->arch != TS_ARCH_ENCODER_DECODER && c->head == TS_HEAD_LM)
        for (int i = 0; i < c->batch * S; i++) b->labels[i] = 1 + (i * 3 + 2) % (c->vocab - 1);
    /* sequence 1: its last source position and last target position are padding */
    b->src[1 * S + S - 1] = 0;
    b->src_pad[1 * S + S - 1] = 1;
    if (c->arch == TS_ARCH_ENCODER_DECODER) {
        b->tgt[1 * T + T - 1] = 0;
        b->tgt_pad[1 * T + T - 1] = 1;
        b->labels[1 * T + T - 1] = 0; /* ignored by the loss */
        /* the memory's own mask: sequence 0 hides its last two keys, sequence 1 none */
        b->mem_pad[S - 1] = b->mem_pad[S - 2] = 1;
    }
}

static ts_model_input input_of(const batch *b, const ts_model_config *c) {
    ts_model_input in = {0};
    in.src_ids = b->src;
    in.src_pad = b->src_pad;
    if (c->arch == TS_ARCH_ENCODER_DECODER) {
        in.tgt_ids = b->tgt;
        in.tgt_pad = b->tgt_pad;
        in.mem_pad = own_memory_mask ? b->mem_pad : NULL;
        in.mem_pad_set = own_memory_mask;
    }
    return in;
}

/* The loss with the dropout masks of forward number `fwd`. */
static double loss_at(ts_train *tr, const ts_model_input *in, const batch *b, uint64_t fwd) {
    const ts_model_config *c = &tr->m->cfg;
    tr->forwards = fwd;
    ts_tensor out;
    assert_ok(ts_train_forward(tr, in, &out));
    if (c->head == TS_HEAD_CLS)
        return ts_bwd_cross_entropy_forward(out.data, b->labels, c->batch, c->n_labels, -1, 0.0f, NULL);
    int64_t rows = ts_tensor_numel(&out) / c->vocab;
    return ts_bwd_cross_entropy_forward(out.data, b->labels, rows, c->vocab, 0, 0.1f, NULL);
}

/* A GPT's tables start at N(0, 0.02): a step of FD_H is half their size, and
 * the LayerNorm of such small sums bends within it, so finite differences
 * would measure the curve. Tables of N(0, 1)'s size keep the check linear. */
static void widen_tables(ts_model *m) {
    static const char *const tables[] = {"embed.tokens.weight", "embed.positions.weight"};
    for (int t = 0; t < 2; t++) {
        int i = ts_model_find_param(m, tables[t]);
        assert_true(i >= 0);
        const ts_model_param_info *p = &m->params[i];
        float *v = malloc(sizeof(float) * (size_t)p->numel);
        ts_model_export_param(m, i, v);
        for (int64_t k = 0; k < p->numel; k++) v[k] *= 50.0f;
        assert_int_equal(p->rank, 2);
        ts_tensor view = {.data = v, .rank = 2, .shape = {p->shape[0], p->shape[1]}, .stride = {p->shape[1], 1}};
        assert_ok(ts_model_load_param(m, tables[t], &view));
        free(v);
    }
}

static void fd_check(const ts_model_config *cfg, const char *what) {
    ts_model m;
    assert_ok(ts_model_init(&m, cfg));
    if (cfg->arch == TS_ARCH_DECODER) widen_tables(&m);
    ts_model_set_training(&m, cfg->dropout > 0);
    ts_train tr;
    assert_ok(ts_train_init(&tr, &m));
    batch b;
    fill_batch(&b, cfg);
    if (cfg->head == TS_HEAD_CLS) b.labels[0] = 1, b.labels[1] = 2;
    ts_model_input in = input_of(&b, cfg);
    const uint64_t fwd = 5;
    double base = loss_at(&tr, &in, &b, fwd);
    assert_true(isfinite(base));
    /* the logits again, with the same masks, for the backward */
    tr.forwards = fwd;
    ts_tensor out;
    assert_ok(ts_train_forward(&tr, &in, &out));
    ts_train_zero_grad(&tr);
    float *d = ts_train_output_grad(&tr);
    const ts_model_config *c = &m.cfg;
    if (c->head == TS_HEAD_CLS)
        ts_bwd_cross_entropy_backward(d, 1.0f, out.data, b.labels, c->batch, c->n_labels, -1, 0.0f);
    else
        ts_bwd_cross_entropy_backward(d, 1.0f, out.data, b.labels, ts_tensor_numel(&out) / c->vocab, c->vocab, 0,
                                      0.1f);
    assert_ok(ts_train_backward(&tr, NULL, NULL));
    double worst_all = 0;
    const char *worst_name = "";
    uint64_t rng = 99;
    for (int i = 0; i < m.n_params; i++) {
        const ts_model_param_info *p = &m.params[i];
        float *x = m.block + p->offset, *g = tr.grads + p->offset;
        /* the coordinates with the largest gradients, and two random ones */
        int64_t pick[8];
        int n_pick = 0;
        for (int k = 0; k < 6 && k < p->numel; k++) {
            int64_t best = -1;
            for (int64_t j = 0; j < p->numel; j++) {
                bool taken = false;
                for (int q = 0; q < n_pick; q++) taken |= pick[q] == j;
                if (!taken && (best < 0 || fabsf(g[j]) > fabsf(g[best]))) best = j;
            }
            pick[n_pick++] = best;
        }
        for (int k = 0; k < 2; k++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            pick[n_pick++] = (int64_t)((rng >> 33) % (uint64_t)p->numel);
        }
        double worst = 0, scale = 0;
        for (int k = 0; k < n_pick; k++) {
            float keep = x[pick[k]];
            x[pick[k]] = keep + FD_H;
            double up = loss_at(&tr, &in, &b, fwd);
            x[pick[k]] = keep - FD_H;
            double down = loss_at(&tr, &in, &b, fwd);
            x[pick[k]] = keep;
            double num = (up - down) / (2.0 * FD_H);
            scale = fmax(scale, fabs(num));
            worst = fmax(worst, fabs(num - g[pick[k]]));
        }
        double err = scale > 1e-6 ? worst / scale : worst;
        if (err > FD_TOL) {
            print_error("%s: %s: normalized error %.3g > %.0e (largest numeric gradient %.3g)\n", what, p->name, err,
                        FD_TOL, scale);
            fail();
        }
        if (err >= worst_all) worst_all = err, worst_name = p->name;
    }
    print_message("%-40s %d parameters, largest normalized error %.2e (%s)\n", what, m.n_params, worst_all,
                  worst_name);
    ts_train_free(&tr);
    ts_model_free(&m);
}

static void pre_ln_learned_dropout(void **state) {
    (void)state;
    ts_model_config c = small_config();
    fd_check(&c, "pre-LN, learned positions, gelu, dropout");
}

static void post_ln_sinusoidal_tied(void **state) {
    (void)state;
    ts_model_config c = small_config();
    c.norm = TS_NORM_POST;
    c.pe = TS_PE_SINUSOIDAL;
    c.scale_embed = true;
    c.tie_embed = true;
    c.final_norm = true;
    c.dropout = 0.0f;
    fd_check(&c, "post-LN, sines, tied + scaled embeddings");
}

static void decoder_unmasked_own_memory_mask(void **state) {
    (void)state;
    ts_model_config c = small_config();
    c.tgt_not_causal = true;
    own_memory_mask = true;
    fd_check(&c, "--tgt-mask none, memory mask of its own");
    own_memory_mask = false;
}

static void encoder_classifier(void **state) {
    (void)state;
    ts_model_config c = small_config();
    c.arch = TS_ARCH_ENCODER;
    c.dec_layers = 0;
    c.tgt_seq = 0;
    c.layers = 2;
    c.head = TS_HEAD_CLS;
    c.n_labels = 3;
    c.max_pos = 8;
    fd_check(&c, "encoder + classifier (seed 004's shape)");
}

/* A GPT: one causal stack named decoder.*, learned positions without the
 * embedding norm, GELU's tanh form, a final norm, a tied head without bias. */
static void gpt_decoder_tied_gelu_tanh(void **state) {
    (void)state;
    ts_model_config c = small_config();
    c.arch = TS_ARCH_DECODER;
    c.dec_layers = 0;
    c.tgt_seq = 0;
    c.layers = 2;
    c.causal = true;
    c.final_norm = true;
    c.tie_embed = true;
    c.activation = TS_ACT_GELU_TANH;
    c.max_pos = 8;
    fd_check(&c, "GPT: causal decoder, gelu-tanh, tied head");
}

/* ts_train_forward in eval mode computes what ts_model_forward computes,
 * with each --mask choice too. */
static void training_forward_matches_inference(void **state) {
    (void)state;
    ts_model_config cfgs[6] = {small_config(), small_config(), small_config(),
                               small_config(), small_config(), small_config()};
    cfgs[1].norm = TS_NORM_POST;
    cfgs[1].pe = TS_PE_SINUSOIDAL;
    cfgs[1].scale_embed = true;
    cfgs[1].activation = TS_ACT_RELU;
    cfgs[2].mask = TS_MASK_NONE;            /* pads attended to like words */
    cfgs[3].mask = TS_MASK_PADDING_BOTH;    /* padded queries attend to nothing */
    cfgs[4].tgt_not_causal = true;          /* --tgt-mask none */
    /* k = 5: cross-attention with the memory's own mask */
    for (int k = 0; k < 6; k++) {
        own_memory_mask = k == 5;
        ts_model m;
        assert_ok(ts_model_init(&m, &cfgs[k]));
        ts_train tr;
        assert_ok(ts_train_init(&tr, &m));
        batch b;
        fill_batch(&b, &cfgs[k]);
        ts_model_input in = input_of(&b, &cfgs[k]);
        ts_tensor a, ref;
        assert_ok(ts_train_forward(&tr, &in, &a));
        int64_t n = ts_tensor_numel(&a);
        float *keep = malloc(sizeof(float) * (size_t)n);
        memcpy(keep, a.data, sizeof(float) * (size_t)n);
        assert_ok(ts_model_forward(&m, &in, NULL, &ref));
        assert_int_equal(ts_tensor_numel(&ref), n);
        /* one forward (model_forward.c) runs both: the same numbers to the bit */
        assert_memory_equal(keep, ref.data, sizeof(float) * (size_t)n);
        free(keep);
        ts_train_free(&tr);
        ts_model_free(&m);
    }
    own_memory_mask = false;
}

/* A few dozen steps of the copy task on a tiny model lower the loss. */
static void training_lowers_the_loss(void **state) {
    (void)state;
    ts_model_config c = small_config();
    c.d_model = 16;
    c.ffn = 32;
    c.vocab = 8;
    c.seq = 6;
    c.tgt_seq = 5;
    c.batch = 16;
    c.dropout = 0.0f;
    ts_model m;
    assert_ok(ts_model_init(&m, &c));
    ts_model_set_training(&m, true);
    ts_train tr;
    assert_ok(ts_train_init(&tr, &m));
    ts_optim_config oc;
    ts_optim_config_default(&oc, TS_OPTIM_ADAM);
    ts_optim opt;
    assert_ok(ts_optim_init(&opt, &oc, m.n_floats));
    int64_t n = (int64_t)c.batch * c.seq;
    int32_t *src = malloc(sizeof(int32_t) * (size_t)n), *tgt = malloc(sizeof(int32_t) * (size_t)n);
    int32_t *labels = malloc(sizeof(int32_t) * (size_t)n);
    double first = 0, last = 0;
    for (int step = 0; step < 60; step++) {
        ts_task_batch(TS_TASK_COPY, c.vocab, c.batch, c.seq, 42, (uint64_t)step, src, tgt, labels);
        ts_model_input in = {.src_ids = src, .tgt_ids = tgt};
        ts_tensor out;
        assert_ok(ts_train_forward(&tr, &in, &out));
        int64_t rows = (int64_t)c.batch * c.tgt_seq;
        double loss = ts_bwd_cross_entropy_forward(out.data, labels, rows, c.vocab, 0, 0.0f, NULL);
        if (step < 5) first += loss / 5;
        if (step >= 55) last += loss / 5;
        ts_train_zero_grad(&tr);
        ts_bwd_cross_entropy_backward(ts_train_output_grad(&tr), 1.0f, out.data, labels, rows, c.vocab, 0, 0.0f);
        assert_ok(ts_train_backward(&tr, NULL, NULL));
        ts_optim_clip(tr.grads, m.n_floats, 1.0f);
        ts_optim_step(&opt, m.block, tr.grads, 3e-3f);
    }
    print_message("copy, 60 steps: loss %.3f -> %.3f\n", first, last);
    assert_true(last < 0.8 * first);
    free(src), free(tgt), free(labels);
    ts_optim_free(&opt);
    ts_train_free(&tr);
    ts_model_free(&m);
}

static int setup(void **state) {
    (void)state;
    return ts_kernels_init() == TS_OK ? 0 : -1;
}

/* Adam's first step moves every parameter by lr x sign(g), whatever |g|:
 * with bias correction m_hat = g and v_hat = g^2 after one step. Without it
 * the step is lr x 0.1 / sqrt(0.001) = 3.16 lr; with the corrections the
 * wrong way round, 0.32 lr. Both Adam and AdamW (weight decay 0 here, so the
 * two agree); a zero gradient moves nothing. */
static void adam_first_step_is_lr_times_sign(void **state) {
    (void)state;
    const float g[] = {1e-3f, -1e-3f, 0.5f, -0.5f, 30.0f, -300.0f, 7e2f, 0.0f};
    enum { N = sizeof g / sizeof g[0] };
    const float lr = 1e-2f;
    for (int kind = 0; kind < 2; kind++) {
        ts_optim_config oc;
        ts_optim_config_default(&oc, kind ? TS_OPTIM_ADAMW : TS_OPTIM_ADAM);
        oc.weight_decay = 0;
        ts_optim opt;
        assert_ok(ts_optim_init(&opt, &oc, N));
        float p[N];
        for (int i = 0; i < N; i++) p[i] = 1.0f + (float)i;
        ts_optim_step(&opt, p, g, lr);
        for (int i = 0; i < N; i++) {
            double moved = p[i] - (1.0 + i), want = g[i] > 0 ? -lr : g[i] < 0 ? lr : 0;
            /* eps 1e-8 against |g| >= 1e-3 changes the step by at most 1e-5 of it */
            if (fabs(moved - want) > 1e-4 * lr + 1e-6)
                fail_msg("%s: g %g moved the parameter by %.9g, want %.9g (lr x sign(g))", kind ? "AdamW" : "Adam",
                         (double)g[i], moved, want);
        }
        ts_optim_free(&opt);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(training_forward_matches_inference),
        cmocka_unit_test(pre_ln_learned_dropout),
        cmocka_unit_test(post_ln_sinusoidal_tied),
        cmocka_unit_test(decoder_unmasked_own_memory_mask),
        cmocka_unit_test(encoder_classifier),
        cmocka_unit_test(gpt_decoder_tied_gelu_tanh),
        cmocka_unit_test(training_lowers_the_loss),
        cmocka_unit_test(adam_first_step_is_lr_times_sign),
    };
    return cmocka_run_group_tests_name("train", tests, setup, NULL);
}
