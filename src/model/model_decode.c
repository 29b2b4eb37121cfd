/* model_decode: new tokens through a causal stack, with a cache of every
 * layer's keys and values (model.h, "decoding with a cache").
 *
 * Generation appends a token and asks for the next one. A full forward pass
 * would recompute every earlier position each time, O(n^2) work for n tokens;
 * with the keys and values of the earlier positions kept, a step computes the
 * new positions only: their q, k and v, attention over the cached keys, the
 * feed-forward, the head. Those steps are the forward pass's own
 * (ts_model_forward_cached in model_forward.c, with batch 1 and the new
 * positions as the sequence); this file owns the cache and its buffers.
 * tests/test_decode.c checks every position against a full pass. */
#include <stdlib.h>
#include <string.h>

#include "model_impl.h"

bool ts_model_can_cache(const ts_model_config *c, const char **why) {
    const char *no = NULL;
    bool one_stack = c->arch == TS_ARCH_DECODER || (c->arch == TS_ARCH_ENCODER && c->causal);
    if (!one_stack) no = "only a causal stack (a GPT) decodes one token at a time";
    else if (c->input != TS_INPUT_TOKENS || c->head != TS_HEAD_LM) no = "the model reads no tokens or has no vocabulary head";
    else if (c->pe == TS_PE_SINUSOIDAL) no = "sinusoidal positions are not cached yet";
    else if (c->variants) no = "a seed's variant changes the layer";
    if (why) *why = no;
    return no == NULL;
}

/* New positions one call takes at most: enough to read a prompt in a few
 * calls, small enough that the scores of a long context stay a few MB. */
#define DECODE_ROWS 64

ts_status ts_kv_cache_init(ts_kv_cache *kv, const ts_model *m) {
    memset(kv, 0, sizeof *kv);
    const ts_model_config *c = &m->cfg;
    const char *why;
    if (!ts_model_can_cache(c, &why)) return ts_fail(TS_ERR_ARG, "decoding with a cache: %s", why);
    if (!m->block) return ts_fail(TS_ERR_ARG, "decoding with a cache: a shapes-only model has no weights");
    kv->capacity = c->pe == TS_PE_LEARNED || c->pe == TS_PE_ROPE ? (c->max_pos ? c->max_pos : c->seq) : c->seq;
    kv->rows = kv->capacity < DECODE_ROWS ? kv->capacity : DECODE_ROWS;
    /* a row of the cache: the key/value heads' (D, or fewer with shared heads) */
    size_t per_layer = (size_t)kv->capacity * (size_t)ts_model_kv_heads(c) * (size_t)ts_model_head_dim(c);
    kv->k = malloc(sizeof(float) * per_layer * (size_t)c->layers);
    kv->v = malloc(sizeof(float) * per_layer * (size_t)c->layers);
    ts_model_acts *a = malloc(sizeof *a);
    size_t bytes = ts_model_plan_decode_acts(c, kv->rows, kv->capacity, a ? a : &(ts_model_acts){0}, NULL);
    kv->acts = a;
    kv->block = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!kv->k || !kv->v || !a || !kv->block) {
        ts_kv_cache_free(kv);
        return ts_fail(TS_ERR_NOMEM, "decoding with a cache: out of memory for %d positions", kv->capacity);
    }
    ts_model_plan_decode_acts(c, kv->rows, kv->capacity, a, kv->block);
    return TS_OK;
}

void ts_kv_cache_free(ts_kv_cache *kv) {
    free(kv->k);
    free(kv->v);
    free(kv->acts);
    free(kv->block);
    memset(kv, 0, sizeof *kv);
}

ts_status ts_model_decode(ts_model *m, ts_kv_cache *kv, const int32_t *ids, int n, const ts_hook *hook,
                          const float **logits) {
    if (!kv->acts) return ts_fail(TS_ERR_ARG, "decoding with a cache: the cache is not initialised");
    if (n < 1 || n > kv->rows)
        return ts_fail(TS_ERR_ARG, "decoding with a cache: %d new positions; one call takes 1 to %d", n, kv->rows);
    if (kv->len + n > kv->capacity)
        return ts_fail(TS_ERR_ARG, "decoding with a cache: the model has positions 0 to %d only", kv->capacity - 1);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->cfg.vocab)
            return ts_fail(TS_ERR_ARG, "decoding: token id %d is outside the vocabulary of %d", ids[i], m->cfg.vocab);
    ts_tensor out;
    TS_TRY(ts_model_forward_cached(m, kv, kv->acts, ids, n, hook, &out));
    kv->len += n;
    *logits = out.data;
    return TS_OK;
}

ts_status ts_model_decode_step(ts_model *m, ts_kv_cache *kv, int32_t id, const float **logits) {
    return ts_model_decode(m, kv, &id, 1, NULL, logits);
}
