/* kernels_ref: the scalar reference of every kernel, always compiled.
 *
 * ts_gemm_ref accumulates in double so tests can use it as the truth for
 * every faster path. The row and element kernels here are also the scalar
 * dispatch path (TSCOPE_KERNELS=scalar) and the tails of the SIMD paths.
 */
#include <math.h>
#include <string.h>

#include "kernels_impl.h"

/* Columns of C accumulated at once: enough to stream B rows, small enough for the stack. */
#define REF_CHUNK 64

float ts_kern_gelu1(float x) {
    /* x * Phi(x) with Phi from erfc: exact for large |x|, where 1 + erf(x/sqrt2) would cancel. */
    double xd = x;
    return (float)(0.5 * xd * erfc(-xd * M_SQRT1_2));
}

static double epilogue1(double v, ts_epilogue epi, double bias) {
    switch (epi) {
    case TS_EPI_NONE: return v;
    case TS_EPI_BIAS: return v + bias;
    case TS_EPI_BIAS_RELU: v += bias; return v < 0 ? 0 : v; /* NaN stays NaN, as in torch */
    case TS_EPI_BIAS_GELU: v += bias; return 0.5 * v * erfc(-v * M_SQRT1_2);
    case TS_EPI_BIAS_GELU_TANH: v += bias; return 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    case TS_EPI_BIAS_SILU: v += bias; return v / (1 + exp(-v));
    case TS_EPI_COUNT: break;
    }
    return v;
}

void ts_kern_epilogue_row(float *c, int n, ts_epilogue epi, const float *bias) {
    if (epi == TS_EPI_NONE) return;
    for (int j = 0; j < n; j++) c[j] = (float)epilogue1(c[j], epi, bias ? bias[j] : 0.0);
}

void ts_gemm_ref(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc, ts_epilogue epi,
                 const float *bias) {
    for (int i = 0; i < M; i++) {
        for (int j0 = 0; j0 < N; j0 += REF_CHUNK) {
            int nj = N - j0 < REF_CHUNK ? N - j0 : REF_CHUNK;
            double acc[REF_CHUNK] = {0};
            for (int p = 0; p < K; p++) {
                double a = trans_a ? A[(int64_t)p * lda + i] : A[(int64_t)i * lda + p];
                if (trans_b) {
                    for (int j = 0; j < nj; j++) acc[j] += a * B[(int64_t)(j0 + j) * ldb + p];
                } else {
                    const float *brow = B + (int64_t)p * ldb + j0;
                    for (int j = 0; j < nj; j++) acc[j] += a * brow[j];
                }
            }
            float *crow = C + (int64_t)i * ldc + j0;
            for (int j = 0; j < nj; j++) {
                double v = alpha * acc[j];
                if (beta != 0) v += (double)beta * crow[j]; /* beta == 0: C may hold NaN */
                crow[j] = (float)epilogue1(v, epi, bias ? bias[j0 + j] : 0);
            }
        }
    }
}

ts_bf16 ts_f32_to_bf16(float x) {
    union { float f; uint32_t u; } v = {.f = x};
    if (x != x) return (ts_bf16)((v.u >> 16) | 0x40); /* a NaN stays one (quiet) */
    v.u += 0x7fff + ((v.u >> 16) & 1);                /* to nearest, ties to even */
    return (ts_bf16)(v.u >> 16);
}

void ts_gemm_bf16_ref(int M, int N, int K, float alpha, const float *A, int lda, const ts_bf16 *W, int ldw,
                      float beta, float *C, int ldc, ts_epilogue epi, const float *bias) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double acc = 0;
            for (int p = 0; p < K; p++)
                acc += (double)A[(int64_t)i * lda + p] * ts_bf16_to_f32(W[(int64_t)j * ldw + p]);
            float *cij = C + (int64_t)i * ldc + j;
            double v = alpha * acc;
            if (beta != 0) v += (double)beta * *cij; /* beta == 0: C may hold NaN */
            *cij = (float)epilogue1(v, epi, bias ? bias[j] : 0);
        }
}

/* Partial sums a dot product keeps: independent chains, so the adds do not
 * wait on each other (the compiler may also put them in one vector). */
#define DOT_LANES 8

static float dot_lanes(const float *a, const float *b, int k) {
    float s[DOT_LANES] = {0};
    int p = 0;
    for (; p + DOT_LANES <= k; p += DOT_LANES)
        for (int q = 0; q < DOT_LANES; q++) s[q] += a[p + q] * b[p + q];
    for (int q = 0; p < k; p++, q++) s[q] += a[p] * b[p];
    for (int w = DOT_LANES / 2; w > 0; w /= 2)
        for (int q = 0; q < w; q++) s[q] += s[q + w];
    return s[0];
}

/* The scalar path's few-rows product: row j of b is read from memory once,
 * then stays in cache for the other rows of a. */
void ts_kern_small_m_ref(int m, int n, int k, float alpha, const float *a, int64_t lda, const float *b,
                         int64_t ldb, float beta, float *c, int64_t ldc, ts_epilogue epi, const float *bias) {
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float d = dot_lanes(a + (int64_t)i * lda, b + (int64_t)j * ldb, k), *cij = c + (int64_t)i * ldc + j;
            *cij = beta != 0 ? alpha * d + beta * *cij : alpha * d; /* beta == 0: C may hold NaN */
        }
    for (int i = 0; i < m; i++) ts_kern_epilogue_row(c + (int64_t)i * ldc, n, epi, bias);
}

int ts_kern_softmax_row_ref(float *out, const float *in, int cols, int valid, const float *mask) {
    float mx = -INFINITY;
    for (int c = 0; c < valid; c++) {
        float v = in[c] + (mask ? mask[c] : 0.0f);
        if (v > mx || v != v) mx = v; /* a NaN wins, so the row shows it */
        if (mx != mx) break;
    }
    if (mx == -INFINITY) {
        memset(out, 0, sizeof(float) * (size_t)cols);
        return 1;
    }
    double sum = 0;
    for (int c = 0; c < valid; c++) {
        float e = expf(in[c] + (mask ? mask[c] : 0.0f) - mx);
        out[c] = e;
        sum += e;
    }
    float inv = (float)(1.0 / sum);
    for (int c = 0; c < valid; c++) out[c] *= inv;
    for (int c = valid; c < cols; c++) out[c] = 0.0f;
    return 0;
}

void ts_kern_layernorm_row_ref(float *out, float *mean, float *rstd, const float *in,
                               const float *gamma, const float *beta, int cols, float eps) {
    double s = 0;
    for (int c = 0; c < cols; c++) s += in[c];
    double mu = s / cols, ss = 0;
    for (int c = 0; c < cols; c++) ss += (in[c] - mu) * (in[c] - mu);
    double r = 1.0 / sqrt(ss / cols + eps); /* biased variance, as torch */
    for (int c = 0; c < cols; c++) {
        double y = (in[c] - mu) * r;
        if (gamma) y *= gamma[c];
        if (beta) y += beta[c];
        out[c] = (float)y;
    }
    if (mean) *mean = (float)mu;
    if (rstd) *rstd = (float)r;
}

void ts_kern_add_ref(float *out, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void ts_kern_scale_ref(float *out, const float *in, float s, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = s * in[i];
}

void ts_kern_relu_ref(float *out, const float *in, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = in[i] < 0 ? 0.0f : in[i];
}

void ts_kern_gelu_ref(float *out, const float *in, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = ts_kern_gelu1(in[i]);
}

void ts_kern_mul_ref(float *out, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = a[i] * b[i];
}

#define SQRT_2_OVER_PI 0.7978845608028654f
#define GELU_TANH_C 0.044715f

void ts_kern_gelu_tanh_ref(float *out, const float *in, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float x = in[i];
        out[i] = 0.5f * x * (1.0f + tanhf(SQRT_2_OVER_PI * (x + GELU_TANH_C * x * x * x)));
    }
}

/* x / (1 + e^-x), PyTorch's silu. */
void ts_kern_silu_ref(float *out, const float *in, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = in[i] / (1.0f + expf(-in[i]));
}

void ts_kern_softmax_grad_row_ref(float *ds, const float *dw, const float *w, int valid, int cols) {
    float dot = 0.0f;
    for (int j = 0; j < valid; j++) dot += dw[j] * w[j];
    for (int j = 0; j < valid; j++) ds[j] = w[j] * (dw[j] - dot);
    for (int j = valid; j < cols; j++) ds[j] = 0.0f;
}

void ts_kern_layernorm_grad_row_ref(float *dx, const float *dy, const float *x, const float *gamma, float mu, float rs,
                                    int C) {
    float s1 = 0.0f, s2 = 0.0f;
    for (int j = 0; j < C; j++) {
        float g = dy[j] * (gamma ? gamma[j] : 1.0f);
        s1 += g;
        s2 += g * (x[j] - mu) * rs;
    }
    s1 /= (float)C;
    s2 /= (float)C;
    for (int j = 0; j < C; j++) {
        float n = (x[j] - mu) * rs, g = dy[j] * (gamma ? gamma[j] : 1.0f);
        dx[j] += rs * (g - s1 - n * s2);
    }
}

void ts_kern_layernorm_grad_params_ref(float *dgamma, float *dbeta, const float *dy, const float *x, float mu, float rs,
                                       int64_t n) {
    for (int64_t j = 0; j < n; j++) {
        if (dgamma) dgamma[j] += dy[j] * (x[j] - mu) * rs;
        if (dbeta) dbeta[j] += dy[j];
    }
}

void ts_kern_relu_grad_ref(float *din, const float *dout, const float *in, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (in[i] > 0.0f) din[i] += dout[i];
}

void ts_kern_gelu_grad_ref(float *din, const float *dout, const float *in, int64_t n) {
    const float inv_sqrt2 = 0.70710678118654752f, inv_sqrt2pi = 0.39894228040143268f;
    for (int64_t i = 0; i < n; i++) {
        float x = in[i];
        float cdf = 0.5f * (1.0f + erff(x * inv_sqrt2)), pdf = inv_sqrt2pi * expf(-0.5f * x * x);
        din[i] += dout[i] * (cdf + x * pdf);
    }
}

void ts_kern_gelu_tanh_grad_ref(float *din, const float *dout, const float *in, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float x = in[i], u = SQRT_2_OVER_PI * (x + GELU_TANH_C * x * x * x), t = tanhf(u);
        float du = SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_TANH_C * x * x);
        din[i] += dout[i] * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);
    }
}

void ts_kern_adam_ref(float *params, const float *grads, float *m, float *v, int64_t n, const ts_kern_adam *a) {
    for (int64_t i = 0; i < n; i++) {
        float g = grads[i], p = params[i];
        if (a->wd != 0.0f) {
            if (a->adamw)
                p *= a->decay;
            else
                g += a->wd * p;
        }
        m[i] = m[i] * a->b1 + g * (1.0f - a->b1);
        v[i] = v[i] * a->b2 + g * g * (1.0f - a->b2);
        float denom = sqrtf(v[i]) / a->bc2_sqrt + a->eps;
        params[i] = p - a->step_size * (m[i] / denom);
    }
}

static bool dropped(uint64_t key, int64_t i, uint64_t threshold) {
    return ts_mix64(key ^ ((uint64_t)i * 0xD1B54A32D192ED03ull)) >> 11 < threshold;
}

void ts_kern_dropout_ref(float *out, const float *in, int64_t n, int64_t i0, uint64_t key, uint64_t threshold,
                         float keep) {
    for (int64_t i = 0; i < n; i++) out[i] = dropped(key, i0 + i, threshold) ? 0.0f : in[i] * keep;
}

void ts_kern_dropout_grad_ref(float *din, const float *dout, int64_t n, int64_t i0, uint64_t key,
                              uint64_t threshold, float keep) {
    for (int64_t i = 0; i < n; i++)
        if (!dropped(key, i0 + i, threshold)) din[i] += dout[i] * keep;
}

/* In double, one entry at a time: what the loss's gradient was before it had vectors. */
void ts_kern_xent_grad_ref(float *d, const float *x, int64_t n, double lse, double scale, double off) {
    for (int64_t v = 0; v < n; v++) d[v] += (float)(scale * (exp((double)x[v] - lse) - off));
}

double ts_kern_sum_squares_ref(const float *x, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return s;
}

float ts_kern_max_finite_ref(const float *x, int64_t n) {
    float top = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) return NAN;
        top = x[i] > top ? x[i] : top;
    }
    return top;
}

double ts_kern_exp_sum_ref(float *probs, const float *x, int64_t n, float top, float t) {
    double z = 0;
    for (int64_t i = 0; i < n; i++) {
        float e = expf((x[i] - top) / t);
        if (probs) probs[i] = e;
        z += e;
    }
    return z;
}

/* A logit the distribution keeps: at least the floor, or NaN, which is never
 * dropped (it makes every probability NaN, as PyTorch's softmax does, so the
 * trace shows it instead of zeros). */
static bool kept_logit(float x, float floor) { return !(x < floor); }

double ts_kern_softmax_vocab_ref(float *probs, const float *logits, int64_t n, double temperature, float floor) {
    double top = -INFINITY;
    for (int64_t v = 0; v < n; v++)
        if (kept_logit(logits[v], floor) && logits[v] > top) top = logits[v];
    double z = 0;
    for (int64_t v = 0; v < n; v++)
        if (kept_logit(logits[v], floor)) z += exp(((double)logits[v] - top) / temperature);
    if (probs)
        for (int64_t v = 0; v < n; v++)
            probs[v] = kept_logit(logits[v], floor) ? (float)(exp(((double)logits[v] - top) / temperature) / z) : 0.0f;
    return log(z) + top / temperature;
}

/* Attention's products as the scalar micro-kernel sums (ts_kern_ukernel_scalar):
 * acc += a * b from 0 in the order of k, then alpha * acc, or added to what
 * the k blocks before left. One entry at a time: this is the reference. */
void ts_kern_attn_scores_ref(int m, int n, int hd, int first, float alpha, const float *q, int64_t ldq,
                             const float *kt, float *s, int64_t lds) {
    const int pw = TS_KERN_SCALAR_ATTN_PW;
    for (int i = 0; i < m; i++) {
        int need = first + i < n ? first + i : n; /* the keys row i sees */
        for (int j = 0; j < need; j++) {
            const float *col = kt + (int64_t)(j / pw) * hd * pw + j % pw;
            float acc = 0.0f;
            for (int d = 0; d < hd; d++) acc += q[i * ldq + d] * col[(int64_t)d * pw];
            s[i * lds + j] = alpha * acc;
        }
    }
}

void ts_kern_attn_values_ref(int m, int n, int kc, int hd, const float *p, int64_t ldp, const float *vp,
                             int64_t vrows, float *o, int64_t ldo) {
    const int pw = TS_KERN_SCALAR_ATTN_PW;
    for (int c0 = 0; c0 < n; c0 += kc) {
        int c1 = c0 + kc < n ? c0 + kc : n;
        for (int i = 0; i < m; i++)
            for (int j = 0; j < hd; j++) {
                const float *col = vp + (int64_t)(j / pw) * vrows * pw + j % pw;
                float acc = 0.0f;
                for (int c = c0; c < c1; c++) acc += p[i * ldp + c] * col[(int64_t)c * pw];
                float *out = &o[i * ldo + j];
                *out = c0 == 0 ? 1.0f * acc : 1.0f * acc + 1.0f * *out;
            }
    }
}

const ts_kern_ops ts_kern_scalar_ops = {
    .isa = TS_ISA_SCALAR,
    .mr = TS_KERN_SCALAR_MR, .nr = TS_KERN_SCALAR_NR,
    .kc_max = 256, .a_floats = 128 * 256, .b_floats = 256 * 2048,
    .ukernel = ts_kern_ukernel_scalar,
    .pack_t = ts_kern_pack_t_scalar,
    .pack_n = ts_kern_pack_n_scalar,
    .pack_t_bf16 = ts_kern_pack_t_bf16_scalar,
    .small_m = ts_kern_small_m_ref,
    .softmax_row = ts_kern_softmax_row_ref,
    .attn_scores = ts_kern_attn_scores_ref, .attn_values = ts_kern_attn_values_ref,
    .attn_pw = TS_KERN_SCALAR_ATTN_PW,
    .layernorm_row = ts_kern_layernorm_row_ref,
    .add = ts_kern_add_ref, .scale = ts_kern_scale_ref, .relu = ts_kern_relu_ref, .gelu = ts_kern_gelu_ref,
    .gelu_tanh = ts_kern_gelu_tanh_ref, .silu = ts_kern_silu_ref, .mul = ts_kern_mul_ref,
    .softmax_grad_row = ts_kern_softmax_grad_row_ref,
    .layernorm_grad_row = ts_kern_layernorm_grad_row_ref, .layernorm_grad_params = ts_kern_layernorm_grad_params_ref,
    .relu_grad = ts_kern_relu_grad_ref, .gelu_grad = ts_kern_gelu_grad_ref,
    .gelu_tanh_grad = ts_kern_gelu_tanh_grad_ref,
    .adam = ts_kern_adam_ref, .sum_squares = ts_kern_sum_squares_ref,
    .dropout = ts_kern_dropout_ref, .dropout_grad = ts_kern_dropout_grad_ref,
    .xent_grad = ts_kern_xent_grad_ref,
    .max_finite = ts_kern_max_finite_ref, .exp_sum = ts_kern_exp_sum_ref,
    .fma_loop = ts_kern_fma_loop_scalar,
};
