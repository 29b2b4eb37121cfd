/* task: copy, reverse and sort data, greedy decoding and scores (train.h, "task"). */
#include "tscope/train.h"
#include "tscope/tokenizer.h"

#include <stdlib.h>
#include <string.h>


static const char *const names[TS_TASK_COUNT] = {"copy", "reverse", "sort"};

const char *ts_task_name(ts_task_kind kind) { return (unsigned)kind < TS_TASK_COUNT ? names[kind] : "?"; }

ts_status ts_task_parse(const char *name, ts_task_kind *out) {
    for (int i = 0; i < TS_TASK_COUNT; i++)
        if (strcmp(name, names[i]) == 0) {
            *out = (ts_task_kind)i;
            return TS_OK;
        }
    return ts_fail(TS_ERR_ARG, "unknown task '%s'; the tasks are copy, reverse, sort", name);
}

void ts_task_answer(ts_task_kind kind, const int32_t *src, int S, int32_t *y) {
    y[0] = 1;
    for (int i = 1; i < S; i++) y[i] = kind == TS_TASK_REVERSE ? src[S - i] : src[i];
    if (kind == TS_TASK_SORT) /* insertion sort: S is small */
        for (int i = 2; i < S; i++)
            for (int j = i; j > 1 && y[j - 1] > y[j]; j--) {
                int32_t t = y[j];
                y[j] = y[j - 1];
                y[j - 1] = t;
            }
}

void ts_task_decoder_input(const int32_t *answer, int T, bool start_in_answer, int32_t *tgt) {
    if (T > 0) tgt[0] = 1; /* the start id, TS_TOK_BOS */
    for (int t = 1; t < T; t++) tgt[t] = answer[start_in_answer ? t : t - 1];
}

void ts_task_batch(ts_task_kind kind, int vocab, int B, int S, uint64_t seed, uint64_t index, int32_t *src,
                   int32_t *tgt, int32_t *labels) {
    uint64_t key = ts_mix64(seed ^ ts_mix64(0x7A5Cull + index));
    int32_t y[TS_TASK_MAX_SEQ];
    int T = S - 1;
    for (int b = 0; b < B; b++) {
        int32_t *s = src + (int64_t)b * S;
        s[0] = 1;
        for (int i = 1; i < S; i++)
            s[i] = 1 + (int32_t)(ts_u01(key, (uint64_t)b * S + i) * (double)(vocab - 1));
        ts_task_answer(kind, s, S, y);
        ts_task_decoder_input(y, T, true, tgt + (int64_t)b * T);
        for (int t = 0; t < T; t++) labels[(int64_t)b * T + t] = y[t + 1];
    }
}

ts_status ts_task_greedy(ts_model *m, ts_model_input *in, int32_t *tgt, int32_t *out, uint8_t *eos_pad, bool *padded) {
    const ts_model_config *c = &m->cfg;
    if (padded) *padded = false;
    if (c->arch != TS_ARCH_ENCODER_DECODER || c->head != TS_HEAD_LM || c->input != TS_INPUT_TOKENS)
        return ts_fail(TS_ERR_ARG, "greedy decoding needs an encoder-decoder over token ids with a vocabulary head");
    int B = c->batch, T = m->T, V = c->vocab;
    int *stop = calloc((size_t)B, sizeof *stop); /* 0, or 1 + the position that wrote <eos>: the first not read */
    if (!stop) return ts_fail(TS_ERR_NOMEM, "task: out of memory");
    memset(tgt, 0, sizeof *tgt * (size_t)B * T);
    for (int b = 0; b < B; b++) tgt[(int64_t)b * T] = TS_TOK_BOS;
    in->tgt_ids = tgt;
    in->tgt_pad = NULL;
    ts_status st = TS_OK;
    /* Position t only sees positions <= t (the causal mask), so the ids not
     * yet predicted (0 for now) change nothing. */
    for (int t = 0, stopped = 0; t < T && stopped < B && !st; t++) {
        ts_tensor logits;
        st = ts_model_forward(m, in, NULL, &logits);
        for (int b = 0; !st && b < B; b++) {
            if (stop[b]) continue;
            int32_t best = ts_model_argmax(logits.data + ((int64_t)b * T + t) * V, V);
            if (out) out[(int64_t)b * T + t] = best;
            if (t + 1 < T) tgt[(int64_t)b * T + t + 1] = best;
            if (eos_pad && best == TS_TOK_EOS) stop[b] = t + 1, stopped++;
        }
    }
    for (int b = 0; eos_pad && b < B; b++) /* <eos> is written, never read: padding from there on */
        for (int t = 0; t < T; t++) {
            bool after = stop[b] && t >= stop[b];
            eos_pad[(int64_t)b * T + t] = after;
            if (after) tgt[(int64_t)b * T + t] = TS_TOK_PAD;
            if (after && padded) *padded = true;
        }
    free(stop);
    return st;
}

void ts_task_score_add(ts_task_score *s, const int32_t *pred, const int32_t *labels, int B, int T) {
    for (int b = 0; b < B; b++) {
        int right = 0;
        for (int t = 0; t < T; t++) right += pred[(int64_t)b * T + t] == labels[(int64_t)b * T + t];
        s->seqs++;
        s->seqs_right += right == T;
        s->tokens += T;
        s->tokens_right += right;
    }
}
