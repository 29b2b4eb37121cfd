/* model_head: the closing norm and the head for any rows of the residual
 * stream (model.h, "the closing norm and the head"), with the forward's
 * weights and kernels, for the readers of a layer's stream (the lens, direct
 * logit attribution). */
#include <math.h>
#include <string.h>

#include "tscope/kernels.h"
#include "tscope/model.h"

const ts_norm_weights *ts_model_final_norm_weights(const ts_model *m) {
    if (!m->cfg.final_norm) return NULL;
    /* a single stack (a GPT's "decoder" too) ends on norm; an encoder-decoder's decoder on cross_norm */
    return m->cfg.arch == TS_ARCH_ENCODER_DECODER ? &m->w.cross_norm : &m->w.norm;
}

void ts_model_final_norm_rows(const ts_model *m, float *out, float *mean, float *rstd, const float *x,
                              int64_t rows) {
    const ts_norm_weights *nw = ts_model_final_norm_weights(m);
    int64_t D = m->cfg.d_model;
    if (nw && m->cfg.norm_kind != TS_NORMK_LAYER) { /* RMSNorm: x / rms * w (Gemma: * (1 + w)), as the forward's */
        bool one_plus = m->cfg.norm_kind == TS_NORMK_RMS_GEMMA;
        for (int64_t r = 0; r < rows; r++) {
            double sq = 0;
            for (int64_t j = 0; j < D; j++) sq += (double)x[r * D + j] * x[r * D + j];
            float rms = (float)sqrt(sq / (double)D + (double)m->cfg.eps);
            for (int64_t j = 0; j < D; j++)
                out[r * D + j] = x[r * D + j] / rms * (one_plus ? 1.0f + nw->gamma[j] : nw->gamma[j]);
            if (mean) mean[r] = 0.0f;
            if (rstd) rstd[r] = 1.0f / rms;
        }
        return;
    }
    if (nw) {
        ts_layernorm(out, mean, rstd, x, nw->gamma, nw->beta, rows, (int)D, m->cfg.eps);
        return;
    }
    memcpy(out, x, sizeof(float) * (size_t)(rows * D));
    for (int64_t r = 0; r < rows; r++) {
        if (mean) mean[r] = 0.0f;
        if (rstd) rstd[r] = 1.0f;
    }
}

void ts_model_head_rows(const ts_model *m, float *logits, const float *x, int64_t rows) {
    const ts_model_config *c = &m->cfg;
    if (c->head == TS_HEAD_NONE) return;
    int D = c->d_model, V = c->head == TS_HEAD_LM ? c->vocab : c->n_labels;
    const float *b = m->w.head_b;
    ts_gemm(false, true, (int)rows, V, D, 1.0f, x, D, m->w.head_w, D, 0.0f, logits, V, b ? TS_EPI_BIAS : TS_EPI_NONE,
            b);
}

void ts_model_mlm_rows(const ts_model *m, float *out, float *scratch, const float *x, int64_t rows) {
    const ts_model_config *c = &m->cfg;
    const ts_model_weights *w = &m->w;
    int D = c->d_model;
    if (!c->mlm_head) {
        memcpy(out, x, sizeof(float) * (size_t)(rows * D));
        return;
    }
    ts_gemm(false, true, (int)rows, D, D, 1.0f, x, D, w->mlm_w, D, 0.0f, scratch, D, TS_EPI_BIAS, w->mlm_b);
    int64_t n = rows * D;
    switch (c->activation) {
    case TS_ACT_GELU: ts_gelu(scratch, scratch, n); break;
    case TS_ACT_GELU_TANH: ts_gelu_tanh(scratch, scratch, n); break;
    case TS_ACT_SILU: ts_silu(scratch, scratch, n); break;
    case TS_ACT_RELU: ts_relu(scratch, scratch, n); break;
    }
    ts_layernorm(out, NULL, NULL, scratch, w->mlm_norm.gamma, w->mlm_norm.beta, rows, D, c->eps);
}
