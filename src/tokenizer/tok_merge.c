/* tok_merge: a vocabulary (bytes -> id) and BPE's merge loop, shared by
 * tokenizer.json's BPE (a merge's rank is its line) and SentencePiece's (a
 * piece's rank is the order of its score, best first). */
#include <stdlib.h>
#include <string.h>

#include "tok_impl.h"

bool tok_vocab_init(tok_vocab *v, int32_t n) {
    *v = (tok_vocab){0};
    v->n = n;
    v->tok = calloc((size_t)n + 1, sizeof *v->tok);
    v->len = calloc((size_t)n + 1, sizeof *v->len);
    v->mask = tok_table_size((size_t)n) - 1;
    v->slots = malloc(((size_t)v->mask + 1) * sizeof *v->slots);
    if (!v->tok || !v->len || !v->slots) return false;
    memset(v->slots, 0xff, ((size_t)v->mask + 1) * sizeof *v->slots);
    return true;
}

bool tok_vocab_set(tok_vocab *v, int32_t id, const char *s, size_t len) {
    if (v->tok[id]) return false;
    char *c = malloc(len + 1);
    if (!c) return false;
    memcpy(c, s, len);
    c[len] = '\0';
    v->tok[id] = c;
    v->len[id] = (uint32_t)len;
    return true;
}

int32_t tok_vocab_find(const tok_vocab *v, const char *s, size_t len) {
    for (uint32_t i = tok_hash_bytes(s, len) & v->mask;; i = (i + 1) & v->mask) {
        int32_t id = v->slots[i];
        if (id < 0) return -1;
        if (v->len[id] == len && memcmp(v->tok[id], s, len) == 0) return id;
    }
}

bool tok_vocab_index(tok_vocab *v, int32_t *dup) {
    for (int32_t id = 0; id < v->n; id++) {
        if (!v->tok[id]) continue;
        if (tok_vocab_find(v, v->tok[id], v->len[id]) >= 0) {
            *dup = id;
            return false;
        }
        uint32_t i = tok_hash_bytes(v->tok[id], v->len[id]) & v->mask;
        while (v->slots[i] >= 0) i = (i + 1) & v->mask;
        v->slots[i] = id;
    }
    return true;
}

void tok_vocab_free(tok_vocab *v) {
    if (v->tok)
        for (int32_t i = 0; i < v->n; i++) free(v->tok[i]);
    free(v->tok);
    free(v->len);
    free(v->slots);
    *v = (tok_vocab){0};
}

bool tok_merges_init(tok_merges *m, size_t expected) {
    m->count = 0;
    m->mask = tok_table_size(expected + 1) - 1;
    m->slots = calloc((size_t)m->mask + 1, sizeof *m->slots);
    return m->slots != NULL;
}

void tok_merges_add(tok_merges *m, int32_t left, int32_t right, int32_t rank, int32_t merged) {
    uint64_t key = ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) + 1;
    uint32_t i = tok_hash_u64(key) & m->mask;
    while (m->slots[i].key && m->slots[i].key != key) i = (i + 1) & m->mask;
    if (m->slots[i].key) return; /* the first one stays */
    m->slots[i] = (tok_merge_slot){key, rank, merged};
    m->count++;
}

const tok_merge_slot *tok_merges_find(const tok_merges *m, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return NULL;
    uint64_t key = ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) + 1;
    for (uint32_t i = tok_hash_u64(key) & m->mask;; i = (i + 1) & m->mask) {
        if (m->slots[i].key == key) return &m->slots[i];
        if (!m->slots[i].key) return NULL;
    }
}

void tok_merges_free(tok_merges *m) {
    free(m->slots);
    *m = (tok_merges){0};
}

/* A candidate: merge node pos with the node after it, at rank. */
typedef struct cand {
    int32_t rank;
    uint32_t pos;
} cand;

static bool before(cand a, cand b) { return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos); }

static void heap_push(cand *h, size_t *n, cand c) {
    size_t i = (*n)++;
    while (i > 0 && before(c, h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = c;
}

static cand heap_pop(cand *h, size_t *n) {
    cand top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && before(h[c + 1], h[c])) c++;
        if (!before(h[c], last)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = last;
    return top;
}

bool tok_merge_run(const tok_merges *m, int32_t *sym, size_t *n_io) {
    size_t n = *n_io;
    if (n < 2) return true;
    int32_t *next = malloc(n * sizeof *next), *prev = malloc(n * sizeof *prev);
    cand *heap = malloc(3 * n * sizeof *heap); /* n - 1 at first, then at most 2 per merge */
    if (!next || !prev || !heap) {
        free(next), free(prev), free(heap);
        return false;
    }
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) {
        next[i] = i + 1 < n ? (int32_t)(i + 1) : -1;
        prev[i] = (int32_t)i - 1;
        const tok_merge_slot *s = i + 1 < n ? tok_merges_find(m, sym[i], sym[i + 1]) : NULL;
        if (s) heap_push(heap, &hn, (cand){s->rank, (uint32_t)i});
    }
    while (hn) {
        cand c = heap_pop(heap, &hn);
        int32_t p = (int32_t)c.pos, q = next[p];
        if (sym[p] == INT32_MIN || q < 0) continue; /* a node merged away */
        const tok_merge_slot *s = tok_merges_find(m, sym[p], sym[q]);
        if (!s || s->rank != c.rank) continue; /* the pair changed since */
        sym[p] = s->merged;
        sym[q] = INT32_MIN;
        next[p] = next[q];
        if (next[q] >= 0) prev[next[q]] = p;
        if (prev[p] >= 0 && (s = tok_merges_find(m, sym[prev[p]], sym[p])))
            heap_push(heap, &hn, (cand){s->rank, (uint32_t)prev[p]});
        if (next[p] >= 0 && (s = tok_merges_find(m, sym[p], sym[next[p]])))
            heap_push(heap, &hn, (cand){s->rank, (uint32_t)p});
    }
    size_t o = 0;
    for (int32_t i = 0; i >= 0; i = next[i]) sym[o++] = sym[i];
    *n_io = o;
    free(next), free(prev), free(heap);
    return true;
}
