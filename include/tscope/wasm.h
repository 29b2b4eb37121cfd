/* wasm: what the live web page calls in tscope's WebAssembly build (`make
 * wasm`, src/wasm/). The page holds no arithmetic of its own: it hands the
 * text to a session, which runs the model's own forward through a cache of
 * keys and values exactly as `tscope live` does (only the positions after
 * the longest unchanged prefix are computed), knocks heads out with the
 * experiment module's ablations, reads the lens through the model's own
 * final norm and head, and lays the views out as a display list that the
 * page only paints.
 *
 * Each tsw_X below is experiment.h's ts_live_session_X, the session `tscope
 * live`'s views run too (src/experiment/live_session.c), and tsw_draw lays
 * out render.h's live views, the same as the window's.
 *
 * Plain C types only, so JavaScript calls them through Emscripten's ccall.
 * Calls that can fail return 0 or a ts_status (tsw_error gives the sentence);
 * pointers returned stay valid until the next call on the same session.
 */
#ifndef TSCOPE_WASM_H
#define TSCOPE_WASM_H

#include <stdint.h>

typedef struct tsw_session tsw_session;

/* The last failure's sentence. */
const char *tsw_error(void);

/* A language model's checkpoint (what `tscope run --load` reads without
 * flags) at path, in Emscripten's in-memory file system: the page writes the
 * bytes there first. NULL on failure (tsw_error). */
tsw_session *tsw_open(const char *path);
void tsw_close(tsw_session *s); /* NULL is fine */

int tsw_layers(const tsw_session *s);
int tsw_heads(const tsw_session *s);
int tsw_vocab(const tsw_session *s);
int tsw_capacity(const tsw_session *s); /* positions the model reads at most */

/* The text (UTF-8) the model reads now: tokenized (characters a character
 * model does not know are left out, tsw_skipped counts them), the last
 * tsw_capacity tokens kept, and only the positions after the longest prefix
 * the cache already holds run through the model. */
int tsw_set_text(tsw_session *s, const char *text);
int tsw_tokens(const tsw_session *s);  /* tokens read */
int tsw_skipped(const tsw_session *s); /* characters left out */
const char *tsw_token_label(tsw_session *s, int i); /* the i-th token read ("␣God") */
const char *tsw_vocab_label(tsw_session *s, int32_t id);
const char *tsw_piece(tsw_session *s, int32_t id); /* the text a token appends */

/* Head `head` of layer `layer` knocked out (its slice of values zeroed, as
 * `tscope run --ablate decoder.layers.L.self_attn.headH`) or put back, and
 * the text run again. Returns 1 when the head is now out, 0 when back, a
 * negative status on failure. */
int tsw_knock(tsw_session *s, int layer, int head);
int tsw_knocked(const tsw_session *s, int layer, int head);
int tsw_n_knocked(const tsw_session *s);

/* The next token after the last position at temperature t: probabilities
 * (vocab) with the heads knocked out, or (before = 1) with every head in place. */
const float *tsw_next_probs(tsw_session *s, float t, int before);
/* The k tokens to show, ordered by the larger of after and before (what a
 * knock-out took away stays on the list, as `tscope live` orders its panel). */
int tsw_top(tsw_session *s, float t, int k, int32_t *ids);
/* A token drawn at temperature t with u uniform in [0, 1) (ts_model_sample);
 * t = 0: the most likely one. -1 before any text. */
int32_t tsw_sample(tsw_session *s, float t, double u);

/* Head `head` of layer `layer`: its attention, (n, n) rows of tsw_capacity floats. */
const float *tsw_attention(const tsw_session *s, int layer, int head);
/* The logit lens: (layers, tsw_capacity) the most likely token after each
 * position read from each layer's stream, and its probability. */
const int32_t *tsw_lens_ids(const tsw_session *s);
const float *tsw_lens_probs(const tsw_session *s);
/* Each position's loss: -log p(token | the ones before); NaN at position 0;
 * with the heads knocked out, and with every head in place (the same while
 * none is out). */
const float *tsw_loss(const tsw_session *s);
const float *tsw_loss_before(const tsw_session *s);

/* ---- the views as a display list (wasm_views.c) ---- */

/* Lay out every head's attention (the knocked-out ones crossed), head
 * (focus_layer, focus_head) large with its tokens, the lens and the loss
 * strip (before and after while heads are out) in a canvas `width` pixels
 * wide, through the same views as `tscope live` (ts_live_views_draw, painted
 * into a display list); returns the height used, 0 when out of memory. */
int tsw_draw(tsw_session *s, int focus_layer, int focus_head, int width);
/* The display list of the last tsw_draw (render.h's ts_dl: TS_DL_FLOATS
 * floats an op, the kinds and their fields listed there). */
const float *tsw_dl_ops(const tsw_session *s);
int tsw_dl_count(const tsw_session *s);
const char *tsw_dl_text(const tsw_session *s);
const unsigned char *tsw_dl_pixels(const tsw_session *s);
/* The head under (x, y) of the last tsw_draw's grid: layer * heads + head, or -1. */
int tsw_hit(const tsw_session *s, double x, double y);

#endif
