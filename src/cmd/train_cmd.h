/* train_cmd: what `tscope train`'s two halves share: the parsed flags.
 * cmd_train.c parses them and trains the toy tasks; train_lm.c trains a
 * language model (--task lm). */
#ifndef TSCOPE_CMD_TRAIN_CMD_H
#define TSCOPE_CMD_TRAIN_CMD_H

#include "model_flags.h"
#include "trace_cli.h"

typedef struct train_opts {
    const char *task, *optimizer, *save;
    int steps, warmup, every, eval_every, patience, heldout;
    float lr, smoothing, weight_decay, clip;
    bool steps_seen, warmup_seen, lr_seen, wd_seen, every_seen, eval_every_seen, quiet;
    /* --task lm only */
    const char *corpus, *tokenizer, *schedule, *prompt, *resume;
    float min_lr, repeat_frac;
    int save_every, sample;
    bool no_text_probe;
    ts_cli_list probe;
    bool corpus_seen, tokenizer_seen, schedule_seen, prompt_seen, min_lr_seen, repeat_frac_seen, save_every_seen,
        sample_seen, probe_seen, resume_seen, patience_seen, heldout_seen, clip_seen, smoothing_seen, optimizer_seen;
    trace_cli trace;
    int argc;
    char **argv;
} train_opts;

/* tscope train --task lm: the flags parsed and the model flags (their seen[]
 * says which were given). Returns the exit code. */
int train_lm(const train_opts *o, const model_flags *mf);

/* Add the run's "training" settings a reader draws (the clip threshold on
 * the gradient-norm curve) to a trace's metadata; *meta is replaced. */
ts_status train_trace_settings(char **meta, const train_opts *o);

/* Seconds left as m:ss or h:mm:ss, for both progress lines (cmd_train.c). */
void format_eta(char *buf, size_t size, double s);

#endif
