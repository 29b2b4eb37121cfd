/* model_sample: the next token from a row of logits (model.h, "sampling"). */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/kernels.h"
#include "tscope/model.h"

/* The k-th largest of x (V), by counting: V is a vocabulary, k small or V. */
static float kth_largest(const float *x, int V, int k) {
    float lo = x[0], hi = x[0];
    for (int v = 1; v < V; v++) lo = x[v] < lo ? x[v] : lo, hi = x[v] > hi ? x[v] : hi;
    /* the largest threshold t with at least k values >= t is one of the values */
    float best = lo;
    for (int v = 0; v < V; v++) {
        if (x[v] <= best) continue;
        int n = 0;
        for (int w = 0; w < V && n < k; w++) n += x[w] >= x[v];
        if (n >= k) best = x[v];
    }
    (void)hi;
    return best;
}

/* The first index of the largest logit, NaN skipped (a NaN at 0: 0, which
 * nothing compares greater than). In two sweeps, the largest value in 8
 * independent lanes (no chain of dependent compares: a vocabulary row of
 * GPT-2 is 50257 of them) and then its first index, rather than one sweep
 * whose every compare waits on the one before. */
#define ARGMAX_LANES 8
int32_t ts_model_argmax(const float *logits, int V) {
    if (V <= 1 || logits[0] != logits[0]) return 0;
    float lane[ARGMAX_LANES];
    for (int l = 0; l < ARGMAX_LANES; l++) lane[l] = logits[0];
    int v = 1;
    for (; v + ARGMAX_LANES <= V; v += ARGMAX_LANES)
        for (int l = 0; l < ARGMAX_LANES; l++) lane[l] = logits[v + l] > lane[l] ? logits[v + l] : lane[l];
    float top = lane[0];
    for (int l = 1; l < ARGMAX_LANES; l++) top = lane[l] > top ? lane[l] : top;
    for (; v < V; v++) top = logits[v] > top ? logits[v] : top;
    /* top is one of the values (never NaN): the first equal to it is the
     * first that compared greater than everything before (-0 == +0 as in > ) */
    for (v = 0; logits[v] != top; v++) {
    }
    return v;
}

/* NaN or +inf anywhere: no distribution to draw from (-inf is a token never drawn) */
static bool row_drawable(const float *logits, int V) {
    for (int v = 0; v < V; v++)
        if (logits[v] != logits[v] || logits[v] == INFINITY) return false;
    return true;
}

int32_t ts_model_sample(const float *logits, int V, float temperature, int top_k, double u, float *probs) {
    if (!row_drawable(logits, V)) {
        if (probs)
            for (int v = 0; v < V; v++) probs[v] = NAN;
        return -1;
    }
    int32_t arg = ts_model_argmax(logits, V);
    if (!(temperature > 0)) {
        if (probs) {
            memset(probs, 0, sizeof(float) * (size_t)V);
            probs[arg] = 1.0f;
        }
        return arg;
    }
    float floor_ = top_k > 0 && top_k < V ? kth_largest(logits, V, top_k) : -INFINITY;
    double log_z = ts_softmax_vocab(NULL, logits, V, temperature, floor_), acc = 0;
    int32_t pick = -1, last = arg;
    for (int v = 0; v < V; v++) {
        double p = !(logits[v] < floor_) ? exp((double)logits[v] / temperature - log_z) : 0.0; /* NaN kept: NaN */
        if (probs) probs[v] = (float)p;
        acc += p;
        if (p > 0) last = v;
        if (pick < 0 && p > 0 && u < acc) pick = v;
    }
    return pick >= 0 ? pick : last; /* u so close to 1 that rounding left it past the sum */
}
