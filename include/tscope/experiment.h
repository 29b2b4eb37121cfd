/* experiment: change one step of the model and see what every later step
 * does about it.
 *
 * An experiment is a list of edits, each naming steps the way a trace names
 * them: ablations (a step, or one head's slice of an attention's `values`,
 * set to zero or to its mean over the batch and the positions) and patches
 * (a step's values, or one position's, taken from another run's trace). It
 * acts through the hook's edit callback (ts_hook_edit_fn), so every path
 * that runs the forward gets it and the model knows nothing about it. It
 * can also watch: the logit lens keeps the residual stream after each layer
 * and reads it through the final norm and the output head.
 *
 * Specs, checked against the model's steps before anything runs:
 *   decoder.layers.1.self_attn.head0        head 0's slice of values, zeroed
 *   decoder.layers.1.self_attn.head0=mean   ... replaced by its mean
 *   decoder.layers.*.ffn.out                globs (fnmatch) over step names
 *   TRACE:decoder.layers.0.out@27           (patch) position 27 from TRACE
 *   TRACE:decoder.layers.1.self_attn.head1  (patch) head 1's slice of values from TRACE
 *   decoder.layers.0.out@27=steer.npy       (add) a vector added at position 27
 */
#ifndef TSCOPE_EXPERIMENT_H
#define TSCOPE_EXPERIMENT_H

#include "tscope/model.h"
#include "tscope/tokenizer.h"

typedef enum ts_edit_kind { TS_EDIT_ZERO, TS_EDIT_MEAN, TS_EDIT_PATCH, TS_EDIT_ADD } ts_edit_kind;

#define TS_EDIT_SPEC_MAX 512

typedef struct ts_edit {
    char spec[TS_EDIT_SPEC_MAX]; /* as given, for messages and the trace's metadata */
    ts_edit_kind kind;
    char glob[TS_EDIT_SPEC_MAX]; /* the steps it edits (fnmatch) */
    char heads[32];              /* "" the whole step; else a glob over "head0".."head{H-1}" */
    bool kv_heads;               /* heads are key/value heads (ATTN.kvheadK: slices of ATTN.v) */
    int pos;                     /* a patch or an addition at one position; -1 all */
    float *values;               /* a patch's values (row-major, shape), or the vector added; owned */
    char *trace_config;          /* a patch: the config its trace was made with (JSON), owned */
    int rank;
    int64_t shape[TS_MAX_RANK];
    int64_t applied;             /* steps it changed in the last forward */
    int skipped;                 /* steps its glob matched that no edit reaches (parameters, inputs), left alone */
    char skipped_example[2 * TS_MODEL_NAME_MAX]; /* the first of them, for the report */
} ts_edit;

typedef struct ts_experiment {
    ts_edit *edits;
    int n_edits, cap;
    /* The logit lens: the stream after each layer of `stack`, kept (layers,
     * B*S*D) during the forward, then read through the final norm and the
     * head into probabilities (layers, B, S, V). */
    bool lens;
    /* --mean-from: the trace whose values mean ablations average (over its
     * batch and positions) instead of this run's, owned; NULL: this run's. */
    struct ts_trace *mean_ref;
    char mean_ref_path[TS_EDIT_SPEC_MAX];
    /* The position of the first row of the steps the forward hands over:
     * 0 in a full pass; in cached decoding (ts_model_decode) the first new
     * position, set by the caller before each call, so an @POS edit acts on
     * the token at POS. */
    int pos0;
    char stack[16];
    int lens_layers;
    int64_t lens_rows; /* B * S */
    float *lens_x;
    float *lens_p;
} ts_experiment;

void ts_experiment_init(ts_experiment *ex);
void ts_experiment_free(ts_experiment *ex);

/* --ablate SPEC: a step glob or ATTN.headK (a head glob), optionally =zero
 * or =mean. Only the form is checked here; ts_experiment_check matches it. */
ts_status ts_experiment_add_ablate(ts_experiment *ex, const char *spec);

/* --patch TRACE:STEP[@POS]: STEP's values (or position POS's) from TRACE,
 * which must keep that step's values for all of its batch. */
ts_status ts_experiment_add_patch(ts_experiment *ex, const char *spec);

/* --add STEP[@POS]=VEC.npy: VEC added to STEP's values (a steering
 * vector): VEC of STEP's last dim is added at every position (or at POS), or
 * VEC of STEP's whole shape is added as it is (with @POS, only POS's rows). */
ts_status ts_experiment_add_add(ts_experiment *ex, const char *spec);

/* --mean-from TRACE: mean ablations (=mean) replace a step by its mean over
 * TRACE's batch and positions (a reference set), not this run's. TRACE must
 * keep the values of every step a mean ablation names, for its whole batch,
 * and be the same model's. */
ts_status ts_experiment_mean_from(ts_experiment *ex, const char *trace_path);

/* Whether the edits can act while decoding with a cache, one new position a
 * call (generate): not a patch (a trace's run had all its positions at
 * once), nor a mean over this run's positions (there is one; --mean-from's
 * reference set is fine). */
ts_status ts_experiment_check_decode(const ts_experiment *ex);

/* Check every edit against the model of cfg (a dry run lists its steps): a
 * spec that names no step, a head that does not exist, a patch whose trace
 * is another model's or whose step has another shape, the lens on a model
 * without a vocabulary head: each one sentence. */
ts_status ts_experiment_check(ts_experiment *ex, const ts_model_config *cfg);

/* Whether the experiment changes anything (edits) or watches (lens). */
static inline bool ts_experiment_active(const ts_experiment *ex) { return ex && (ex->n_edits > 0 || ex->lens); }

/* Put the experiment on hook (its edit callback); hook's fn stays as it is. */
void ts_experiment_attach(ts_experiment *ex, ts_hook *hook);

/* The edits as JSON for the trace's metadata: [{"spec", "kind", "steps"
 * (glob), "heads", "pos"}, ...]; malloc'd, NULL when out of memory. */
char *ts_experiment_to_json(const ts_experiment *ex);

/* After a forward with the lens on: the probabilities of every layer's
 * stream through the final norm and the head, each handed to hook as
 * `lens.layers.N` (B, S, V). */
ts_status ts_experiment_lens_finish(ts_experiment *ex, const ts_model *m, const ts_hook *hook);

/* Layer l's lens probabilities (B*S rows of V), after ts_experiment_lens_finish. */
const float *ts_experiment_lens_at(const ts_experiment *ex, int l, int vocab);

/* ---- sweeps: one edit at a time, every head or every position ---- */

/* The loss of each token given the ones before, batch element 0:
 * loss[j] = -log softmax(logits[j - 1])[ids[j]] for j in 1..S-1; loss[0] NaN. */
void ts_experiment_token_loss(const float *logits, const int32_t *ids, int S, int V, double *loss);

/* Every head, then every FFN, knocked out one at a time (zeroed, or with
 * kind TS_EDIT_MEAN replaced by its mean) on ids (1, S): the change in the
 * mean loss over all tokens and over tokens first..last (the span). */
typedef struct ts_ablate_sweep {
    int layers, heads;           /* heads + 1 columns: head 0 .. H-1, then the layer's FFN */
    double base, base_span;      /* the unedited mean loss, all tokens and the span's */
    float *delta, *delta_span;   /* (layers, heads + 1) loss with it knocked out, minus base */
} ts_ablate_sweep;

ts_status ts_experiment_ablate_sweep(ts_model *m, const int32_t *ids, int first, int last, ts_edit_kind kind,
                                     ts_ablate_sweep *out);
void ts_ablate_sweep_free(ts_ablate_sweep *s);

/* Activation patching: the residual stream (embed.out, then each layer's
 * out) at one position taken from the clean run into the corrupted run,
 * for every layer and position. restored = (d - d_corrupt) / (d_clean -
 * d_corrupt), d the logit of `answer` minus that of `wrong` at the last
 * position: 1 when the patch brings the clean answer back in full. */
typedef struct ts_patch_sweep {
    int rows, positions;
    char (*names)[64];           /* (rows) the patched step ("ATTN.headK" for a head) */
    double clean_diff, corrupt_diff;
    float *restored;             /* (rows, positions) */
} ts_patch_sweep;

ts_status ts_experiment_patch_sweep(ts_model *m, const int32_t *clean, const int32_t *corrupt, int answer, int wrong,
                                    ts_patch_sweep *out);

/* Where a patch sweep patches: the residual stream (embed.out, then each
 * layer's out: layers + 1 rows), each attention's output (self_attn.out) or
 * each FFN's (ffn.out) (a row per layer), or each head's slice of values
 * (a row per layer and head, "ATTN.headK"). */
typedef enum ts_patch_site { TS_PATCH_RESID, TS_PATCH_ATTN, TS_PATCH_FFN, TS_PATCH_HEADS } ts_patch_site;
const char *ts_patch_site_name(ts_patch_site s); /* "resid", "attn", "ffn", "heads" */
ts_status ts_patch_site_parse(const char *word, ts_patch_site *out);
ts_status ts_experiment_patch_sweep_at(ts_model *m, const int32_t *clean, const int32_t *corrupt, int answer, int wrong,
                                       ts_patch_site site, ts_patch_sweep *out);
void ts_patch_sweep_free(ts_patch_sweep *s);

/* Direct logit attribution: a pre-LN model's final stream is the sum of
 * what each part wrote into it (the embedding, each head through its
 * columns of the output projection, each attention's bias, each FFN), so
 * the logit of a token at a position splits into one share per part, each
 * through the final norm's scale at that position:
 * gamma * (part - mean(part)) / std . u, plus the norm's beta . u and the
 * head's bias (`rest`), with u = W_U[answer], or W_U[answer] - W_U[wrong]
 * for a logit difference. The shares and rest add up to the logit (or the
 * difference). Every position of ids comes from one forward pass: the parts
 * are kept, the final norm's std read, and each share is a dot product (u
 * through a layer's output projection once per target, not per head).
 *
 * answer (S): the token at each position, or -1 for the model's top guess
 * there; wrong (S, may be NULL): the token subtracted, or -1 for none. The
 * parts, in order (ts_dla_part_name): the embedding; per layer each head,
 * the attention's bias, the FFN; then the rest. */
typedef struct ts_dla {
    int layers, heads, positions, parts; /* parts = 2 + layers * (heads + 2) */
    float *share;        /* (positions, parts), computed in double */
    float *logit;        /* (positions) the model's logit (or difference): what each row adds up to */
    int32_t *answer;     /* (positions) the token whose logit is split */
    int32_t *wrong;      /* (positions) the token subtracted, -1 when none */
} ts_dla;

ts_status ts_experiment_dla(ts_model *m, const int32_t *ids, const int32_t *answer, const int32_t *wrong,
                            ts_dla *out);
/* Part k's name: "embedding", "layer 0 head 1", "layer 0 attn bias", "layer 0 FFN", "norm beta, head bias". */
void ts_dla_part_name(const ts_dla *d, int k, char *buf, size_t size);
void ts_dla_free(ts_dla *d);

/* ---- in-context measures of a language model (lm_scores.c) ------------------------
 *
 * On R sequences of n random tokens written twice (S = 2n positions, tokens
 * uniform over the vocabulary; ts_lm_repeat_ids), with a[i][j] a head's
 * attention from query i to key j, averaged over the R sequences
 * (docs/training.md has the reasons and the literature):
 *   prev_token  mean over i in [1, S) of a[i][i-1]: a head that looks one back
 *   induction   mean over i in [n, S) of a[i][i-n+1]: from a token in the
 *               second half to the token after its first occurrence (the
 *               prefix-matching score of Olsson et al., 2022)
 *   copying     sum(l) / sum(|l|) over the eigenvalues l of the head's OV
 *               circuit W_U g_f W_O^h W_V^h g_1 W_E^T (V x V; LayerNorms folded
 *               as their gains g): +1 when whatever the head attends to raises
 *               the logit of that same token (Elhage et al., 2021)
 *   pos_loss    the cross-entropy at each position i in [0, S-1) of predicting
 *               token i+1, averaged over the R sequences: near ln V in the first
 *               half, near 0 in the second for a model that copies.
 * Chance for the attention scores is what uniform causal attention gives:
 * prev_token mean of 1/(i+1) over [1, S), induction mean of 1/(i+1) over [n, S). */
typedef struct ts_lm_measures {
    int L, H, S;        /* layers, heads, positions */
    float *prev_token;  /* (L, H) */
    float *induction;   /* (L, H) */
    float *copying;     /* (L, H) */
    float *pos_loss;    /* (S - 1) */
    double loss_first, loss_second; /* mean pos_loss over positions [0, n-1) and [n, S-1) */
    double chance_prev, chance_induction;
} ts_lm_measures;

/* R sequences (R, S) of S/2 random tokens from [0, vocab), each written twice. */
void ts_lm_repeat_ids(int32_t *ids, int R, int S, int vocab, uint64_t seed);

/* Every measure of model m on ids (m->cfg.batch sequences of m->S tokens,
 * each a half written twice), with the inference forward. m must be a
 * causal stack with a vocabulary head. out is allocated; free with
 * ts_lm_measures_free. */
ts_status ts_lm_measure(ts_model *m, const int32_t *ids, ts_lm_measures *out);
/* The same with edits' edit callback (ts_hook_edit_fn) on the forward: the
 * measures of a model with some steps changed (an ablated head, say). */
ts_status ts_lm_measure_edited(ts_model *m, const int32_t *ids, const ts_hook *edits, ts_lm_measures *out);
void ts_lm_measures_free(ts_lm_measures *out);

/* The copying score of every head (L, H) from the weights alone. */
ts_status ts_lm_copying(const ts_model *m, float *out);

/* The measures above recorded at each snapshot of a language model's
 * training, as ts_lm_data_opts.measure (measure_ctx: a ts_lm_snapshot_scores,
 * zeroed but for the run's seed): lm.repeat.loss (S-1) per position,
 * lm.score.prev_token, lm.score.induction, lm.score.copying (L, H),
 * lm.chance.prev_token, lm.chance.induction (1). The scorer (a copy of the
 * model at 8 repeated sequences) is made on first use; free it with
 * ts_lm_snapshot_scores_free. */
typedef struct ts_lm_snapshot_scores {
    uint64_t seed; /* the run's: the repeated sequences follow from it */
    void *scores;  /* made on first use */
} ts_lm_snapshot_scores;

ts_status ts_lm_snapshot_measure(void *ctx, const ts_model *m, const ts_hook *trace);
void ts_lm_snapshot_scores_free(ts_lm_snapshot_scores *s);

/* The step loss.next (S - 1) of one text (ids (S), logits (1, S, V)): at each
 * position the loss of predicting the token that follows, handed to hook, so
 * a trace shows where a text is predictable (an edited run's beside the
 * unedited one's). Nothing for S < 2. */
ts_status ts_lm_next_loss_step(const ts_hook *hook, const int32_t *ids, const ts_tensor *logits);

/* ---- a live session (live_session.c): the model answering a text as it is
 * typed, for the live views of `tscope live` and the live web page.
 *
 * Only the positions after the longest prefix the cache of keys and values
 * already holds run through the model's own decoding; heads are knocked out
 * with this module's ablations (a plain cache beside, for "before"); the
 * hook keeps every head's attention and each layer's lens reading; each
 * position's loss is read before and after. A causal language model with a
 * tokenizer only. Pointers returned stay valid until the next call. */
typedef struct ts_live_session ts_live_session;

/* A checkpoint at path (what `tscope run --load` reads without flags), owned;
 * NULL on failure (ts_last_error). One thread: the browser has no others. */
ts_live_session *ts_live_session_open(const char *path);
/* A session on the caller's model and tokenizer (borrowed, outliving it). */
ts_live_session *ts_live_session_new(ts_model *m, ts_lmtok *tok);
void ts_live_session_close(ts_live_session *s); /* NULL is fine */

int ts_live_session_layers(const ts_live_session *s);
int ts_live_session_heads(const ts_live_session *s);
int ts_live_session_vocab(const ts_live_session *s);
int ts_live_session_capacity(const ts_live_session *s); /* positions it reads at most */

/* The text (UTF-8): tokenized as `tscope live` does (characters a character
 * model does not know are left out and counted), the last capacity tokens
 * kept, then run. set_ids: token ids the caller tokenized. */
int ts_live_session_set_text(ts_live_session *s, const char *text);
ts_status ts_live_session_set_ids(ts_live_session *s, const int32_t *ids, int n);
int ts_live_session_tokens(const ts_live_session *s);
int ts_live_session_skipped(const ts_live_session *s);
const char *ts_live_session_token_label(ts_live_session *s, int i); /* the i-th token read */
const char *ts_live_session_vocab_label(ts_live_session *s, int32_t id);
const char *ts_live_session_piece(ts_live_session *s, int32_t id); /* the text a token appends */

/* Toggle one head (1: now out, 0: back, negative status on failure), or set
 * every head at once ((L * H) 1: out); the text is run again. */
int ts_live_session_knock(ts_live_session *s, int layer, int head);
ts_status ts_live_session_set_knocked(ts_live_session *s, const char *knocked);
int ts_live_session_knocked(const ts_live_session *s, int layer, int head);
int ts_live_session_n_knocked(const ts_live_session *s);
const char *ts_live_session_knocked_all(const ts_live_session *s); /* (L * H) */

/* The next token after the last position at temperature t, with the heads
 * knocked out or (before = 1) with every head in place; NULL before any text. */
const float *ts_live_session_next_probs(ts_live_session *s, float t, int before);
/* The k tokens to show, by the larger of after and before. */
int ts_live_session_top(ts_live_session *s, float t, int k, int32_t *ids);
/* A token drawn at temperature t with u uniform in [0, 1); t = 0 the most likely; -1 before any text. */
int32_t ts_live_session_sample(ts_live_session *s, float t, double u);

/* (n, n) rows of capacity floats: one head's attention; all: (L, H, cap, cap). */
const float *ts_live_session_attention(const ts_live_session *s, int layer, int head);
const float *ts_live_session_attention_all(const ts_live_session *s);
/* The lens: (L, capacity) the most likely next token from each layer's stream, its probability. */
const int32_t *ts_live_session_lens_ids(const ts_live_session *s);
const float *ts_live_session_lens_probs(const ts_live_session *s);
/* Each position's loss, -log p(token | before), NaN at 0: with the knock-outs,
 * and with every head in place (the same while none is out). */
const float *ts_live_session_loss(const ts_live_session *s);
const float *ts_live_session_loss_before(const ts_live_session *s);

#endif
