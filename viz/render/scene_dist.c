/* scene_dist: a language model's next tokens: one position's distribution as
 * bars, and the logit lens (layers x positions of predicted tokens). Part of
 * the scene (scene_impl.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scene_impl.h"

/* ---- a next-token distribution ------------------------------------------------ */

/* A step of scores or chances over a vocabulary: (B, S, V) logits or their
 * softmax (run's `probs`, generate's `generate.probs`). */
static bool is_vocab_step(const ts_trace_step *s) {
    return s->tag == TS_TAG_LOGITS || strcmp(s->name, "logits") == 0 || scene_ends_with(s->name, "probs");
}

/* The top tokens at one position (rq.position, -1 the last): from the
 * softmax when the step is one, else the softmax of the logits at
 * temperature 1; the logits beside them when the trace kept them. */
ts_status scene_build_dist(ts_scene *job, int64_t i) {
    const ts_trace_step *s = ts_trace_step_at(job->t, i);
    if (!is_vocab_step(s) || s->rank != 3 || !scene_has_batch_dim(s))
        return ts_fail(TS_ERR_ARG, "--view dist draws a next-token distribution from (B, S, V) logits or their softmax "
                                   "(run's probs step); %s is not one", s->name);
    ts_tensor t;
    ts_status rc = scene_step_tensor(job, i, s->name, &t);
    if (rc) return rc;
    int64_t S = t.shape[1], V = t.shape[2];
    int64_t pos = job->rq.position < 0 ? S + job->rq.position : job->rq.position;
    job->used |= TS_SCENE_USED_POSITION;
    if (pos < 0 || pos >= S)
        return ts_fail(TS_ERR_ARG, "--position %d: %s has %lld positions (0..%lld, or -1 for the last)", job->rq.position,
                       s->name, (long long)S, (long long)S - 1);
    if (job->rq.top_k < 0 || job->rq.top_k > TS_RENDER_DIST_MAX)
        return ts_fail(TS_ERR_ARG, "--top %d: draw 1 to %d tokens", job->rq.top_k, TS_RENDER_DIST_MAX);
    float *probs = scene_own(job, sizeof(float) * (size_t)V), *logits = NULL;
    if (!probs) return ts_fail(TS_ERR_NOMEM, "no memory for the distribution");
    const float *row = t.data + pos * t.stride[1];
    bool softmax = s->op == TS_OP_SOFTMAX;
    for (int64_t v = 0; v < V; v++) probs[v] = row[v * t.stride[2]];
    if (!softmax) { /* logits: their chances at temperature 1 */
        logits = scene_own(job, sizeof(float) * (size_t)V);
        if (!logits) return ts_fail(TS_ERR_NOMEM, "no memory for the distribution");
        memcpy(logits, probs, sizeof(float) * (size_t)V);
        ts_softmax_vocab(probs, logits, V, 1.0, -INFINITY);
    } else { /* the logits of the same pass, when kept with values and of the same shape */
        int64_t li = ts_trace_find(job->t, "logits");
        ts_tensor lt;
        const ts_trace_step *ls = li >= 0 ? ts_trace_step_at(job->t, li) : NULL;
        if (strcmp(s->name, "probs") == 0 && ls && ls->has_values && ls->rank == 3 && ls->shape[1] == S &&
            ls->shape[2] == V && scene_step_tensor(job, li, ls->name, &lt) == TS_OK) {
            logits = scene_own(job, sizeof(float) * (size_t)V);
            if (!logits) return ts_fail(TS_ERR_NOMEM, "no memory for the distribution");
            for (int64_t v = 0; v < V; v++) logits[v] = lt.data[pos * lt.stride[1] + v * lt.stride[2]];
        }
    }
    const char *const *vocab = scene_vocab_labels(job, V);
    if (!vocab) vocab = scene_words_of_ids(job, V);
    const char *const *tokens = scene_tokens_for(job, scene_query_side(s->name), S);
    /* the token the text has next, when the trace's tokens are the vocabulary's */
    int actual = -1;
    if (tokens && vocab && pos + 1 < S)
        for (int64_t v = 0; v < V && actual < 0; v++)
            if (vocab[v] && tokens[pos + 1] && strcmp(vocab[v], tokens[pos + 1]) == 0) actual = (int)v;
    job->kind = PIC_DIST;
    job->view = TS_RENDER_VIEW_DIST;
    snprintf(job->title, sizeof job->title, "%s", s->name);
    char after[160] = "";
    if (tokens) {
        /* the text up to this position, its end: what the model has read */
        char text[120] = "";
        int64_t from = pos;
        for (size_t len = strlen(tokens[pos] ? tokens[pos] : ""); from > 0; from--) {
            size_t l = strlen(tokens[from - 1] ? tokens[from - 1] : "");
            if (len + l > 40) break;
            len += l;
        }
        size_t at = 0;
        for (int64_t k = from; k <= pos && at + 1 < sizeof text; k++) {
            const char *w = tokens[k] ? tokens[k] : "";
            /* a space reads as one in running text: the label's visible blank goes */
            at += (size_t)snprintf(text + at, sizeof text - at, "%s", strcmp(w, "\xe2\x90\xa3") == 0 ? " " : w);
        }
        snprintf(after, sizeof after, " after \xe2\x80\x9c%s%s\xe2\x80\x9d", from > 0 ? "\xe2\x80\xa6" : "", text);
    }
    snprintf(job->subtitle, sizeof job->subtitle, "the next token at position %lld of %lld%s \xc2\xb7 %s", (long long)pos,
             (long long)S, after, softmax ? "probabilities as traced" : "softmax of the logits at temperature 1");
    int k = job->rq.top_k > 0 ? job->rq.top_k : 10;
    if (k > V) k = (int)V;
    job->dist = (ts_render_dist_view){.probs = probs, .logits = logits, .labels = vocab, .n = (int)V, .top_k = k,
                                    .actual = actual, .title = job->title, .subtitle = job->subtitle};
    job->width = 900;
    job->height = ts_render_dist_height(k);
    return TS_OK;
}

/* ---- the logit lens --------------------------------------------------------- */

bool scene_is_lens(const char *name) { return strncmp(name, "lens.layers.", 12) == 0; }

/* Every lens.layers.N of the trace (tscope run --lens) for the batch element
 * asked for: each position's most likely next token and its probability. */
ts_status scene_build_lens(ts_scene *job) {
    int layers = 0;
    char name[48];
    for (;; layers++) {
        snprintf(name, sizeof name, "lens.layers.%d", layers);
        if (ts_trace_find(job->t, name) < 0) break;
    }
    int64_t i0 = ts_trace_find(job->t, "lens.layers.0");
    const ts_trace_step *s0 = ts_trace_step_at(job->t, i0);
    if (s0->rank != 3) return ts_fail(TS_ERR_ARG, "lens.layers.0 is not (B, S, V)");
    int B = (int)s0->shape[0], S = (int)s0->shape[1], V = (int)s0->shape[2];
    if (job->rq.batch >= B) return ts_fail(TS_ERR_ARG, "--batch %d: the lens has %d sequences", job->rq.batch, B);
    int *top = scene_own(job, sizeof(int) * (size_t)layers * S);
    float *prob = scene_own(job, sizeof(float) * (size_t)layers * S);
    int *next = scene_own(job, sizeof(int) * (size_t)S);
    if (!top || !prob || !next) return ts_fail(TS_ERR_NOMEM, "no memory for the lens");
    for (int l = 0; l < layers; l++) {
        snprintf(name, sizeof name, "lens.layers.%d", l);
        int64_t i = ts_trace_find(job->t, name);
        const ts_trace_step *s = ts_trace_step_at(job->t, i);
        if (s->rank != 3 || s->shape[1] != S || s->shape[2] != V || s->shape[0] != B)
            return ts_fail(TS_ERR_ARG, "%s has another shape than lens.layers.0", name);
        const float *v;
        TS_TRY(ts_trace_values(job->t, i, &v));
        if (s->batch_index >= 0 && s->batch_index != job->rq.batch)
            return ts_fail(TS_ERR_ARG, "%s keeps batch element %d only", name, s->batch_index);
        const float *rows = v + (s->batch_index >= 0 ? 0 : (int64_t)job->rq.batch * S * V);
        for (int q = 0; q < S; q++) {
            const float *row = rows + (int64_t)q * V;
            int best = 0;
            for (int k = 1; k < V; k++) best = row[k] > row[best] ? k : best;
            top[l * S + q] = best;
            prob[l * S + q] = row[best];
        }
        ts_trace_release_values(job->t, i);
    }
    /* a masked LM (BERT) reads each position's own token through its masked-LM head:
     * an encoder with an LM head over tokens and no causal mask (ts_model_is_masked_lm) */
    const cJSON *arch = scene_config_item(job, "arch"), *head = scene_config_item(job, "head");
    const cJSON *input = scene_config_item(job, "input");
    bool masked = cJSON_IsTrue(scene_config_item(job, "mlm_head")) ||
                  (cJSON_IsString(arch) && strcmp(arch->valuestring, "encoder") == 0 && cJSON_IsString(head) &&
                   strcmp(head->valuestring, "lm") == 0 && cJSON_IsFalse(scene_config_item(job, "causal")) &&
                   (!cJSON_IsString(input) || strcmp(input->valuestring, "tokens") == 0));
    /* the token the lens should find, from the input's ids: the next one (a masked LM: the one there) */
    int64_t in = ts_trace_find(job->t, "input");
    const ts_trace_step *si = in >= 0 ? ts_trace_step_at(job->t, in) : NULL;
    const float *ids = NULL;
    if (si && si->rank == 2 && si->shape[1] == S && si->batch_index < 0 && ts_trace_values(job->t, in, &ids) != TS_OK)
        ids = NULL;
    for (int q = 0; q < S; q++)
        next[q] = ids && q + !masked < S ? (int)ids[(int64_t)job->rq.batch * S + q + !masked] : -1;
    snprintf(job->title, sizeof job->title, "logit lens: lens.layers.0 to %d", layers - 1);
    snprintf(job->subtitle, sizeof job->subtitle, "%d layers \xc3\x97 %d positions \xc2\xb7 batch %d \xc2\xb7 vocabulary of %d",
             layers, S, job->rq.batch, V);
    char edits[200];
    if (ts_trace_step_edits(job->t, NULL, edits, sizeof edits)) { /* the lens of an edited model says so */
        size_t n = strlen(job->subtitle);
        snprintf(job->subtitle + n, sizeof job->subtitle - n, " \xc2\xb7 EDITED RUN: %s", edits);
    }
    job->lens = (ts_render_lens_view){.layers = layers, .positions = S, .top = top, .prob = prob,
                                    .vocab = scene_vocab_labels(job, V), .tokens = scene_tokens_for(job, TS_TRACE_SOURCE, S),
                                    .next = next, .masked = masked, .title = job->title, .subtitle = job->subtitle};
    job->kind = PIC_LENS;
    job->view = TS_RENDER_VIEW_LENS;
    ts_render_lens_size(layers, S, &job->width, &job->height);
    return TS_OK;
}
