/* model_variants: the seeds' mistakes, on purpose, so a lesson can put them
 * beside the correct model. Each is off unless a config asks for it
 * (ts_model_config.variants, .pe_variant, .mask); model_forward.c calls the
 * computations here at the one step each changes, and every step keeps its
 * usual trace name.
 *
 * - no-scale: the softmax reads q k^T itself; `scaled` equals `scores`.
 * - seed000-reshape: seeds 000 and 003 reshape the values (B, H, S, hd)
 *   straight to (B, S, D). Memory still runs head by head, so row r of a
 *   batch element holds numbers r*D .. r*D + D-1 of the values' (H, S, hd)
 *   order: at seed 000's sizes (S 200, 8 heads of 64) rows 0-24 are head 0,
 *   8 positions each. `values_perm` is not traced (the seed has no permute);
 *   `concat` holds the scrambled rows and the output projection reads them.
 * - seed001-layernorm: seed 001 permutes to (S, B, D) and normalizes over
 *   `inputs.size()[-2:]`, (B, D): one mean and std per position, over every
 *   sentence of the batch. In tscope's (B, S, D) order the statistics are
 *   traced (1, S, 1), which broadcasts over (B, S, D) as the seed's (S, 1, 1)
 *   does over (S, B, D); gamma and beta, (B, D) in the seed, are traced as the
 *   (D) parameters broadcast to (B, D).
 * - seed004-residual: seed 004's TransformerEncoderBlock: h = norm1(x);
 *   attention(h) is computed and dropped; x = x + dropout(x); x = norm2(x);
 *   x = x + ffn(x); x = dropout(x). Pre-LN encoders only.
 * - seed003-mask: every mask (padding, causal, a hidden pad row) adds -1e9
 *   to the scores, as seed 003's mask tensor does, instead of writing -inf.
 *   In float32 a score of a few units plus -1e9 is -1e9 exactly (the spacing
 *   there is 64), so a partly masked row comes out as with -inf, and a row
 *   masked end to end is -1e9 everywhere: uniform weights, not 0.
 * - seed001-softmax: seed 001's numpy softmax, exp(x) / sum(exp(x)) with no
 *   max subtracted, in every attention. The same weights while the scores
 *   stay below ~88.7; above, exp overflows float32, the row's sum is inf and
 *   its weights NaN and 0: the values it mixes are NaN.
 * - no-residual: no seed's mistake, a teaching one: each sublayer's output
 *   replaces the stream instead of being added to it (post-LN y =
 *   norm(drop(f(x))), pre-LN y = drop(f(norm(x)))), in the layers of an
 *   encoder or a GPT's one stack. The backward pass follows it, so a lesson
 *   can show what the skips do for the gradient of a deep stack.
 * - pe-variant: seed 001's first table (sin in odd dims too) and its class
 *   (cos in odd dims), both with exponent (2i+1)/D in the odd dims.
 * - mask (the encoder's self-attention): padding (default) masks pad keys;
 *   none masks nothing (cross-attention still hides the source's pads);
 *   padding-both also gives the pad queries' rows -inf, so their weights are
 *   0 (ts_softmax_rows' rule for a row with nothing to see); causal is
 *   ts_model_config.causal on top of padding.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model_impl.h"

/* ---- names ----------------------------------------------------------------- */

static const char *const variant_names[] = {"no-scale",         "seed000-reshape", "seed001-layernorm",
                                            "seed004-residual", "seed003-mask",    "seed001-softmax",
                                            "no-residual"};
#define N_VARIANTS ((int)(sizeof variant_names / sizeof variant_names[0]))
_Static_assert(TS_VARIANT_ALL == (1u << N_VARIANTS) - 1, "one name per variant bit");

static const char *const pe_names[] = {"paper", "seed001-sin-only", "seed001-odd-exponent"};
static const char *const mask_names[] = {"padding", "none", "padding-both"};

ts_status ts_model_variant_parse(const char *words, unsigned *bits) {
    const char *p = words;
    while (*p) {
        while (*p == ' ' || *p == ',') p++;
        size_t n = strcspn(p, " ,");
        if (n == 0) break;
        int k = 0;
        while (k < N_VARIANTS && !(strlen(variant_names[k]) == n && strncmp(variant_names[k], p, n) == 0)) k++;
        if (k == N_VARIANTS)
            return ts_fail(TS_ERR_ARG,
                           "unknown --variant '%.*s' (any of no-scale, seed000-reshape, seed001-layernorm, "
                           "seed004-residual, seed003-mask, seed001-softmax, no-residual, separated by spaces or "
                           "commas)",
                           (int)n, p);
        *bits |= 1u << k;
        p += n;
    }
    return TS_OK;
}

ts_status ts_model_pe_variant_parse(const char *name, ts_pe_variant *out) {
    for (int k = 0; k < 3; k++)
        if (strcmp(name, pe_names[k]) == 0) {
            *out = (ts_pe_variant)k;
            return TS_OK;
        }
    return ts_fail(TS_ERR_ARG, "unknown --pe-variant '%s' (one of paper, seed001-sin-only, seed001-odd-exponent)",
                   name);
}

ts_status ts_model_mask_parse(const char *name, ts_mask_kind *out, bool *causal) {
    *causal = strcmp(name, "causal") == 0;
    if (*causal) { /* pads stay masked as keys; the causal rule hides the rest */
        *out = TS_MASK_PADDING;
        return TS_OK;
    }
    for (int k = 0; k < 3; k++)
        if (strcmp(name, mask_names[k]) == 0) {
            *out = (ts_mask_kind)k;
            return TS_OK;
        }
    return ts_fail(TS_ERR_ARG, "unknown --mask '%s' (one of none, causal, padding, padding-both)", name);
}

void ts_model_variant_names(unsigned bits, char *buf, size_t size) {
    if (size == 0) return;
    buf[0] = '\0';
    size_t len = 0;
    for (int k = 0; k < N_VARIANTS; k++) {
        if (!(bits & (1u << k))) continue;
        int n = snprintf(buf + len, size - len, "%s%s", len ? " " : "", variant_names[k]);
        if (n < 0 || (size_t)n >= size - len) return;
        len += (size_t)n;
    }
}

const char *ts_model_pe_variant_name(ts_pe_variant v) { return (unsigned)v < 3 ? pe_names[v] : "?"; }

const char *ts_model_mask_name(ts_mask_kind m) { return (unsigned)m < 3 ? mask_names[m] : "?"; }

ts_status ts_model_variants_check(const ts_model_config *c) {
    if (c->variants & ~TS_VARIANT_ALL) return ts_fail(TS_ERR_ARG, "model: unknown variant bits 0x%x", c->variants);
    if ((unsigned)c->pe_variant > TS_PE_SEED001_ODD_EXPONENT || (unsigned)c->mask > TS_MASK_PADDING_BOTH)
        return ts_fail(TS_ERR_ARG, "model: unknown positional-encoding variant or mask");
    if (c->pe_variant != TS_PE_PAPER && c->pe != TS_PE_SINUSOIDAL)
        return ts_fail(TS_ERR_ARG,
                       "--pe-variant %s changes the sinusoidal table, but this model has %s positions: "
                       "add --pe sinusoidal",
                       pe_names[c->pe_variant], c->pe == TS_PE_LEARNED ? "learned" : "no");
    bool norms = c->arch != TS_ARCH_ATTENTION;
    if ((c->variants & TS_VARIANT_SEED001_LAYERNORM) && !norms)
        return ts_fail(TS_ERR_ARG, "--variant seed001-layernorm changes LayerNorm; the attention-alone model has none");
    if ((c->variants & TS_VARIANT_SEED004_RESIDUAL) && (!norms || c->layers < 1 || c->norm != TS_NORM_PRE))
        return ts_fail(TS_ERR_ARG, "--variant seed004-residual changes seed 004's pre-LN encoder block: it needs "
                                   "encoder layers and --norm pre (preset seed004 or copy)");
    if ((c->variants & TS_VARIANT_NO_RESIDUAL) && (!norms || c->layers < 1 || c->dec_layers > 0))
        return ts_fail(TS_ERR_ARG, "--variant no-residual takes the skips out of an encoder's (or a GPT's) layers: "
                                   "it needs --dec-layers 0 or --arch decoder");
    if ((c->variants & TS_VARIANT_NO_RESIDUAL) && (c->variants & TS_VARIANT_SEED004_RESIDUAL))
        return ts_fail(TS_ERR_ARG, "--variant no-residual and seed004-residual rewire the same block: give one");
    return TS_OK;
}

/* ---- positional encoding ----------------------------------------------------- */

void ts_model_pe_table(float *pe, int rows, int D, ts_pe_variant v) {
    if (v == TS_PE_PAPER) {
        ts_model_sinusoid(pe, rows, D);
        return;
    }
    /* Seed 001 takes the odd dims' denominators from torch.arange(1, D, 2):
     * column 2i+1 turns at 10000^((2i+1)/D), not at its sin partner's 10000^(2i/D). */
    for (int pos = 0; pos < rows; pos++)
        for (int col = 0; col < D; col++) {
            double angle = pos / pow(10000.0, (double)col / D);
            bool odd = col % 2 == 1;
            pe[(int64_t)pos * D + col] = (float)(odd && v == TS_PE_SEED001_ODD_EXPONENT ? cos(angle) : sin(angle));
        }
}

/* ---- attention ------------------------------------------------------------------- */

float ts_model_attn_scale(const ts_model_config *c, int hd) {
    return (c->variants & TS_VARIANT_NO_SCALE) ? 1.0f : 1.0f / sqrtf((float)hd);
}

void ts_model_unpermuted_concat(float *ctx, float *scratch, int B, int S, int H, int hd) {
    int64_t D = (int64_t)H * hd, per = (int64_t)S * D;
    for (int64_t b = 0; b < B; b++) {
        const float *src = ctx + b * per; // (S, H, hd)
        float *dst = scratch + b * per;   // (H, S, hd): the values' own order, read as (S, D)
        for (int64_t h = 0; h < H; h++)
            for (int64_t s = 0; s < S; s++)
                memcpy(dst + (h * S + s) * hd, src + s * D + h * hd, sizeof(float) * (size_t)hd);
    }
    memcpy(ctx, scratch, sizeof(float) * (size_t)(B * per));
}

/* ---- LayerNorm over two dims --------------------------------------------------------- */

void ts_model_layernorm_two_dims(float *out, float *y, float *mean, float *stdv, const float *in,
                                 const float *gamma, const float *beta, int B, int S, int D, float eps) {
    int64_t n = (int64_t)B * D;
    TS_MODEL_OMP(parallel for schedule(static) if((int64_t)B * S * D >= (1 << 16)))
    for (int s = 0; s < S; s++) {
        double sum = 0, sq = 0;
        for (int64_t b = 0; b < B; b++) {
            const float *row = in + (b * S + s) * D;
            for (int64_t d = 0; d < D; d++) sum += row[d];
        }
        double mu = sum / (double)n;
        for (int64_t b = 0; b < B; b++) {
            const float *row = in + (b * S + s) * D;
            for (int64_t d = 0; d < D; d++) sq += (row[d] - mu) * (row[d] - mu);
        }
        mean[s] = (float)mu;
        stdv[s] = (float)sqrt(sq / (double)n + eps);
    }
    int64_t rows = (int64_t)B * S;
    TS_MODEL_OMP(parallel for schedule(static) if(rows * D >= (1 << 16)))
    for (int64_t r = 0; r < rows; r++) {
        int64_t s = r % S;
        float mu = mean[s], rstd = 1.0f / stdv[s];
        const float *x = in + r * D;
        float *o = out + r * D;
        for (int64_t d = 0; d < D; d++) {
            float v = (x[d] - mu) * rstd;
            if (y) y[r * D + d] = v;
            o[d] = gamma[d] * v + beta[d];
        }
    }
}

/* ---- seed 001's softmax -------------------------------------------------------- */

void ts_model_softmax_unshifted(float *x, int64_t rows, int n) {
    for (int64_t r = 0; r < rows; r++) {
        float *row = x + r * n, sum = 0.0f;
        for (int c = 0; c < n; c++) sum += row[c] = expf(row[c]);
        for (int c = 0; c < n; c++) row[c] /= sum;
    }
}
