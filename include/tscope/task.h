/* task: toy sequence-to-sequence tasks with data from a seeded RNG, greedy
 * decoding, and accuracy.
 *
 * Every task follows seed 004's copy data: a source of S ids whose first is 1
 * (the start token) and whose other S-1 are drawn uniformly from [1, vocab)
 * (so 1 can appear inside too, as in the seed); 0 is padding and never drawn.
 * The answer y has S ids too, y[0] = 1, and the decoder reads y[:-1] and is
 * taught y[1:] (the target shifted by one):
 *   copy     y = the source                       (seed 004)
 *   reverse  y = 1, then the source's S-1 ids in reverse order
 *   sort     y = 1, then the source's S-1 ids in ascending order
 * Batch i of a stream is a pure function of (task, vocab, B, S, seed, i):
 * training and held-out data are two streams (different seeds).
 */
#ifndef TSCOPE_TASK_H
#define TSCOPE_TASK_H

#include <stdint.h>

#include "tscope/model.h"
#include "tscope/status.h"

/* Longest source the tasks make. */
#define TS_TASK_MAX_SEQ 1024

typedef enum ts_task_kind { TS_TASK_COPY, TS_TASK_REVERSE, TS_TASK_SORT, TS_TASK_COUNT } ts_task_kind;

const char *ts_task_name(ts_task_kind kind); /* "copy", "reverse", "sort" */
/* "copy" | "reverse" | "sort"; TS_ERR_ARG naming the tasks otherwise. */
ts_status ts_task_parse(const char *name, ts_task_kind *out);

/* Batch `index` (S <= TS_TASK_MAX_SEQ): src (B, S), tgt (B, S-1) the decoder's input, labels
 * (B, S-1) what it should predict. */
void ts_task_batch(ts_task_kind kind, int vocab, int B, int S, uint64_t seed, uint64_t index, int32_t *src,
                   int32_t *tgt, int32_t *labels);

/* The full answer y (S) for one source (S). */
void ts_task_answer(ts_task_kind kind, const int32_t *src, int S, int32_t *y);

/* Greedy decoding with the inference forward: the decoder starts from the
 * start token and feeds back its argmax, one position per forward.
 * m must be an encoder-decoder with an LM head whose batch and lengths match
 * src (B, S) and out (B, T = S-1); out gets the predicted y[1:]. */
ts_status ts_task_greedy(ts_model *m, const int32_t *src, int32_t *out);

typedef struct ts_task_score {
    int64_t seqs, seqs_right;     /* sequences, those predicted exactly */
    int64_t tokens, tokens_right; /* positions, those predicted right */
} ts_task_score;

/* Add a batch's predictions (B, T) against its labels (B, T). */
void ts_task_score_add(ts_task_score *s, const int32_t *pred, const int32_t *labels, int B, int T);

#endif
