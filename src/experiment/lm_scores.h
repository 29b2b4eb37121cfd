/* lm_scores: what a language model's training snapshot records beyond the
 * loss (through ts_lm_data_opts.measure: ts_lm_snapshot_measure), private to
 * src/experiment. Each snapshot adds:
 *   lm.heldout_loss       (1) the held-out loss, nats per token
 *   lm.repeat.loss        (S-1) the loss at each position of the repeated
 *                         random sequences (ts_lm_measure's pos_loss)
 *   lm.score.prev_token   (L, H) previous-token score of every head
 *   lm.score.induction    (L, H) induction (prefix-matching) score
 *   lm.score.copying      (L, H) copying score
 *   lm.chance.prev_token, lm.chance.induction (1) what uniform causal
 *                         attention would score (the same every snapshot)
 * The scores carry TS_TAG_HEAD_SCORES, the loss per position
 * TS_TAG_PER_POSITION, so a viewer draws them over training.
 */
#ifndef TSCOPE_LM_SCORES_H
#define TSCOPE_LM_SCORES_H

#include "tscope/experiment.h"
#include "tscope/kernels.h"

/* Repeated sequences a snapshot measures on. */
#define TR_LM_REPEATS 8

typedef struct tr_lm_scores tr_lm_scores;

/* A scorer for models shaped like m (TR_LM_REPEATS sequences of m->S). */
ts_status tr_lm_scores_new(const ts_model *m, tr_lm_scores **out, uint64_t seed);
void tr_lm_scores_free(tr_lm_scores *s); /* NULL is fine */

/* m's current weights measured, the records above handed to trace. */
ts_status tr_lm_scores_record(tr_lm_scores *s, const ts_model *m, const ts_hook *trace);

/* One scalar record (TS_TAG_SCALAR, op metric). */
ts_status tr_lm_record_scalar(const ts_hook *trace, const char *name, double v);

#endif
