/* wasm_live: the calls the live page makes (include/tscope/wasm.h), each the
 * live session's own (experiment.h, src/experiment/live_session.c): the page
 * runs the very code `tscope live`'s views run. */
#include <stdlib.h>

#include "wasm_impl.h"

const char *tsw_error(void) { return ts_last_error(); }

tsw_session *tsw_open(const char *path) {
    tsw_session *s = calloc(1, sizeof *s);
    if (!s) {
        ts_fail(TS_ERR_NOMEM, "live page: out of memory");
        return NULL;
    }
    if (!(s->ls = ts_live_session_open(path))) {
        free(s);
        return NULL;
    }
    return s;
}

void tsw_close(tsw_session *s) {
    if (!s) return;
    ts_live_session_close(s->ls);
    ts_dl_free(&s->dl);
    ts_canvas_free(&s->canvas);
    free(s);
}

int tsw_layers(const tsw_session *s) { return ts_live_session_layers(s->ls); }
int tsw_heads(const tsw_session *s) { return ts_live_session_heads(s->ls); }
int tsw_vocab(const tsw_session *s) { return ts_live_session_vocab(s->ls); }
int tsw_capacity(const tsw_session *s) { return ts_live_session_capacity(s->ls); }
int tsw_set_text(tsw_session *s, const char *text) { return ts_live_session_set_text(s->ls, text); }
int tsw_tokens(const tsw_session *s) { return ts_live_session_tokens(s->ls); }
int tsw_skipped(const tsw_session *s) { return ts_live_session_skipped(s->ls); }
const char *tsw_token_label(tsw_session *s, int i) { return ts_live_session_token_label(s->ls, i); }
const char *tsw_vocab_label(tsw_session *s, int32_t id) { return ts_live_session_vocab_label(s->ls, id); }
const char *tsw_piece(tsw_session *s, int32_t id) { return ts_live_session_piece(s->ls, id); }
int tsw_knock(tsw_session *s, int layer, int head) { return ts_live_session_knock(s->ls, layer, head); }
int tsw_knocked(const tsw_session *s, int layer, int head) { return ts_live_session_knocked(s->ls, layer, head); }
int tsw_n_knocked(const tsw_session *s) { return ts_live_session_n_knocked(s->ls); }
const float *tsw_next_probs(tsw_session *s, float t, int before) { return ts_live_session_next_probs(s->ls, t, before); }
int tsw_top(tsw_session *s, float t, int k, int32_t *ids) { return ts_live_session_top(s->ls, t, k, ids); }
int32_t tsw_sample(tsw_session *s, float t, double u) { return ts_live_session_sample(s->ls, t, u); }
const float *tsw_attention(const tsw_session *s, int layer, int head) { return ts_live_session_attention(s->ls, layer, head); }
const int32_t *tsw_lens_ids(const tsw_session *s) { return ts_live_session_lens_ids(s->ls); }
const float *tsw_lens_probs(const tsw_session *s) { return ts_live_session_lens_probs(s->ls); }
const float *tsw_loss(const tsw_session *s) { return ts_live_session_loss(s->ls); }
const float *tsw_loss_before(const tsw_session *s) { return ts_live_session_loss_before(s->ls); }
