/* bpe: GPT-2's byte-level BPE: loading encoder.json and vocab.bpe, encoding,
 * decoding, labels. The pre-tokenizer is in bpe_split.c.
 *
 * Symbols are token ids from the start: a word's bytes become the ids of the
 * 256 one-byte tokens, and a merge (left id, right id) -> (rank, merged id)
 * joins two. The reference works on the token strings instead; the two agree
 * because token strings and ids are one to one. (The reference keys its
 * merges by `a + "," + b`, so 11 of GPT-2's merges also answer for another
 * pair; no text we tried takes a different path through them. Here the key is
 * the pair itself, as in OpenAI's Python.)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "bpe_impl.h"
#include "tok_impl.h"
#include "tscope/tokenizer.h"

/* The Makefile compiles in the source tree's assets/, like lessons/. */
#ifndef TSCOPE_ASSET_DIR
#define TSCOPE_ASSET_DIR "assets"
#endif

#define MAX_FILE_BYTES ((size_t)1 << 28) /* 256 MB: far above GPT-2's 1 MB of json */
#define MAX_VOCAB (1 << 24)
#define CACHE_MAX_WORD 64           /* longer words are rare: not cached */
#define CACHE_MAX_ENTRIES (1 << 16) /* then the cache starts again */

/* One merge: (left, right) -> merged, applied in order of rank. */
typedef struct merge_slot {
    uint64_t key; /* (left << 32 | right) + 1; 0 marks an empty slot */
    int32_t rank, merged;
} merge_slot;

/* A cached word: its bytes in cache_bytes, its ids in cache_ids. */
typedef struct cache_slot {
    uint32_t hash, key_off, ids_off;
    uint16_t key_len, n_ids; /* key_len 0: empty slot */
} cache_slot;

/* A candidate merge of node pos with the node after it. A rank names one
 * pair, so the entry is still good when that pair is still there. */
typedef struct heap_entry {
    int32_t rank, pos;
} heap_entry;

struct ts_bpe {
    int32_t n_vocab;
    uint8_t *bytes;       /* every token's bytes back to back */
    uint32_t *offset;     /* (n_vocab + 1): token i is bytes[offset[i] .. offset[i+1]) */
    char *strings;        /* the vocabulary file's token strings, NUL-terminated */
    uint32_t *str_offset; /* (n_vocab) */
    int32_t byte_id[256]; /* the one-byte tokens */
    int32_t *vocab_slots; /* bytes -> id, open addressing; -1 empty */
    uint32_t vocab_mask;
    merge_slot *merges;
    uint32_t merge_mask;
    int32_t n_merges;
    /* the word cache */
    cache_slot *cache;
    uint32_t cache_mask, cache_count;
    uint8_t *cache_bytes;
    int32_t *cache_ids;
    size_t cache_bytes_len, cache_bytes_cap, cache_ids_len, cache_ids_cap;
    /* scratch of one word's merges, grown as needed */
    int32_t *node_id, *node_prev, *node_next; /* (word length) */
    heap_entry *heap, *batch; /* (3 * word length) */
    size_t scratch_cap, heap_len;
};

/* ---- small helpers ---- */

/* Grow *p to hold at least need elements of size elem; false out of memory. */
static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

/* A whole file into a new NUL-terminated buffer. */
static ts_status read_all(const char *path, char **data, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return ts_fail(TS_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char *buf = NULL;
    size_t n = 0, cap = 0;
    ts_status st = TS_OK;
    for (;;) {
        if (!grow((void **)&buf, &cap, n + 65536 + 1, 1)) {
            st = ts_fail(TS_ERR_NOMEM, "%s: out of memory reading it", path);
            break;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (n > MAX_FILE_BYTES) {
            st = ts_fail(TS_ERR_FORMAT, "%s: larger than %zu MB, not a tokenizer file", path, MAX_FILE_BYTES >> 20);
            break;
        }
        if (got == 0) break;
    }
    if (st == TS_OK && ferror(f)) st = ts_fail(TS_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    fclose(f);
    if (st != TS_OK) {
        free(buf);
        return st;
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return TS_OK;
}

/* The first of two names that exists in dir, into path. */
static ts_status find_file(char *path, size_t cap, const char *dir, const char *name, const char *alt) {
    const char *names[2] = {name, alt};
    for (int i = 0; i < 2; i++) {
        int n = snprintf(path, cap, "%s/%s", dir, names[i]);
        if (n < 0 || (size_t)n >= cap) return ts_fail(TS_ERR_ARG, "%s: path too long", dir);
        FILE *f = fopen(path, "rb");
        if (f) {
            fclose(f);
            return TS_OK;
        }
        if (errno != ENOENT) return ts_fail(TS_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    return ts_fail(TS_ERR_IO, "%s: no %s or %s there (a GPT-2 tokenizer directory holds both files)", dir, name,
                   alt);
}

/* ---- bytes <-> printable characters (bytes_to_unicode in encoder.py) ---- */

/* The character each byte is spelled with: bytes that are printable Latin-1
 * stand for themselves; the other 68 (controls, space, DEL, NBSP, soft
 * hyphen) become U+0100, U+0101, ... in byte order. */
static void byte_chars(uint32_t table[256]) {
    uint32_t next = 256;
    for (int c = 0; c < 256; c++) {
        bool printable = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
        table[c] = printable ? (uint32_t)c : next++;
    }
}

/* Decode a token string (UTF-8 of byte characters) into bytes; out needs
 * room for strlen(s) bytes. Returns the length, or -1 when a character is
 * not one of the 256. */
static long token_to_bytes(const char *s, uint8_t *out, const int16_t *lookup) {
    const uint8_t *p = (const uint8_t *)s;
    long n = 0;
    while (*p) {
        uint32_t cp;
        if (p[0] < 0x80) {
            cp = *p++;
        } else if ((p[0] & 0xE0) == 0xC0 && (p[1] & 0xC0) == 0x80) {
            cp = (uint32_t)(p[0] & 0x1F) << 6 | (p[1] & 0x3F);
            p += 2;
        } else {
            return -1; /* three bytes and more are all past U+0143 */
        }
        if (cp >= 512 || lookup[cp] < 0) return -1;
        out[n++] = (uint8_t)lookup[cp];
    }
    return n;
}

/* ---- the vocabulary: bytes -> id ---- */

static int32_t vocab_find(const ts_bpe *bpe, const uint8_t *s, size_t n) {
    uint32_t i = tok_hash_bytes(s, n) & bpe->vocab_mask;
    for (;; i = (i + 1) & bpe->vocab_mask) {
        int32_t id = bpe->vocab_slots[i];
        if (id < 0) return -1;
        size_t len = bpe->offset[id + 1] - bpe->offset[id];
        if (len == n && memcmp(bpe->bytes + bpe->offset[id], s, n) == 0) return id;
    }
}

/* Insert every token; false when two spell the same bytes (*dup gets one). */
static bool vocab_build(ts_bpe *bpe, int32_t *dup) {
    for (int32_t id = 0; id < bpe->n_vocab; id++) {
        const uint8_t *s = bpe->bytes + bpe->offset[id];
        size_t n = bpe->offset[id + 1] - bpe->offset[id];
        if (vocab_find(bpe, s, n) >= 0) {
            *dup = id;
            return false;
        }
        uint32_t i = tok_hash_bytes(s, n) & bpe->vocab_mask;
        while (bpe->vocab_slots[i] >= 0) i = (i + 1) & bpe->vocab_mask;
        bpe->vocab_slots[i] = id;
    }
    return true;
}

static ts_status load_vocab(ts_bpe *bpe, const char *path, const int16_t *lookup) {
    char *text;
    size_t len;
    ts_status st = read_all(path, &text, &len);
    if (st != TS_OK) return st;
    cJSON *root = NULL;
    st = ts_json_parse(text, len, path, &root); /* an object, each token once */
    free(text);
    if (st != TS_OK) return st;
    int n = cJSON_GetArraySize(root);
    if (n < 256 || n > MAX_VOCAB) {
        cJSON_Delete(root);
        return ts_fail(TS_ERR_FORMAT, "%s: %d tokens; a byte-level BPE has 256 to %d", path, n, MAX_VOCAB);
    }
    bpe->n_vocab = n;
    size_t str_total = 0;
    for (cJSON *e = root->child; e; e = e->next) str_total += strlen(e->string) + 1;
    const char **key_of = calloc((size_t)n, sizeof *key_of); /* id -> its string in the json tree */
    bpe->offset = calloc((size_t)n + 1, sizeof *bpe->offset);
    bpe->str_offset = calloc((size_t)n, sizeof *bpe->str_offset);
    bpe->bytes = malloc(str_total);
    bpe->strings = malloc(str_total);
    if (!key_of || !bpe->offset || !bpe->str_offset || !bpe->bytes || !bpe->strings) {
        free(key_of);
        cJSON_Delete(root);
        return ts_fail(TS_ERR_NOMEM, "%s: out of memory", path);
    }
    for (cJSON *e = root->child; e && st == TS_OK; e = e->next) {
        double v = e->valuedouble;
        if (!cJSON_IsNumber(e) || v < 0 || v >= n || v != (double)(int32_t)v)
        {
            char q[80];
            st = ts_fail(TS_ERR_FORMAT, "%s: token \"%.40s\" has id %s, not a whole number from 0 to %d", path,
                         e->string, ts_json_quote(e, q, sizeof q), n - 1);
        }
        else if (key_of[(int32_t)v])
            st = ts_fail(TS_ERR_FORMAT, "%s: id %d is given twice (\"%.40s\" and \"%.40s\")", path, (int)v,
                         key_of[(int32_t)v], e->string);
        else
            key_of[(int32_t)v] = e->string;
    }
    /* every id has a token, since n keys took n distinct ids in [0, n) */
    size_t at = 0, str_at = 0;
    for (int32_t id = 0; id < n && st == TS_OK; id++) {
        bpe->offset[id] = (uint32_t)at;
        long got = token_to_bytes(key_of[id], bpe->bytes + at, lookup);
        if (got == 0) {
            st = ts_fail(TS_ERR_FORMAT, "%s: token \"\" (id %d) is empty", path, id);
            break;
        }
        if (got < 0) {
            st = ts_fail(TS_ERR_FORMAT, "%s: token \"%.40s\" (id %d) has a character that stands for no byte; "
                                        "not a byte-level BPE vocabulary",
                         path, key_of[id], id);
            break;
        }
        at += (size_t)got;
        size_t sl = strlen(key_of[id]) + 1;
        memcpy(bpe->strings + str_at, key_of[id], sl);
        bpe->str_offset[id] = (uint32_t)str_at;
        str_at += sl;
    }
    bpe->offset[n] = (uint32_t)at;
    free(key_of);
    cJSON_Delete(root);
    if (st != TS_OK) return st;

    bpe->vocab_mask = tok_table_size((size_t)n) - 1;
    bpe->vocab_slots = malloc(((size_t)bpe->vocab_mask + 1) * sizeof *bpe->vocab_slots);
    if (!bpe->vocab_slots) return ts_fail(TS_ERR_NOMEM, "%s: out of memory", path);
    memset(bpe->vocab_slots, 0xff, ((size_t)bpe->vocab_mask + 1) * sizeof *bpe->vocab_slots);
    int32_t dup;
    if (!vocab_build(bpe, &dup))
        return ts_fail(TS_ERR_FORMAT, "%s: token \"%.40s\" (id %d) spells the same bytes as another token", path,
                       ts_bpe_token_string(bpe, dup), dup);
    for (int b = 0; b < 256; b++) {
        uint8_t byte = (uint8_t)b;
        bpe->byte_id[b] = vocab_find(bpe, &byte, 1);
        if (bpe->byte_id[b] < 0)
            return ts_fail(TS_ERR_FORMAT, "%s: no token for the byte 0x%02X, so some text could not be encoded",
                           path, b);
    }
    return TS_OK;
}

/* ---- the merges: (left, right) -> (rank, merged) ---- */

static merge_slot *merge_slot_of(ts_bpe *bpe, int32_t left, int32_t right) {
    uint64_t key = ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) + 1;
    uint32_t i = tok_hash_u64(key) & bpe->merge_mask;
    while (bpe->merges[i].key && bpe->merges[i].key != key) i = (i + 1) & bpe->merge_mask;
    bpe->merges[i].key = key; /* the caller fills in the rest */
    return &bpe->merges[i];
}

/* The merge of a pair, or NULL. */
static const merge_slot *merge_find(const ts_bpe *bpe, int32_t left, int32_t right) {
    uint64_t key = ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) + 1;
    uint32_t i = tok_hash_u64(key) & bpe->merge_mask;
    for (;; i = (i + 1) & bpe->merge_mask) {
        if (bpe->merges[i].key == key) return &bpe->merges[i];
        if (!bpe->merges[i].key) return NULL;
    }
}

/* The id of a token string of the merges file, or -1. */
static int32_t token_id(const ts_bpe *bpe, const char *s, const int16_t *lookup, uint8_t *scratch) {
    long n = token_to_bytes(s, scratch, lookup);
    return n < 0 ? -1 : vocab_find(bpe, scratch, (size_t)n);
}

/* Split a line into its whitespace-separated fields (at most 3 kept). */
static int fields(char *line, char **f) {
    int n = 0;
    for (char *p = line; *p;) {
        while (*p == ' ' || *p == '\t' || *p == '\r') *p++ = '\0';
        if (!*p) break;
        if (n < 3) f[n] = p;
        n++;
        while (*p && *p != ' ' && *p != '\t' && *p != '\r') p++;
    }
    return n;
}

static ts_status load_merges(ts_bpe *bpe, const char *path, const int16_t *lookup) {
    char *text;
    size_t len;
    ts_status st = read_all(path, &text, &len);
    if (st != TS_OK) return st;
    if (memchr(text, '\0', len)) {
        free(text);
        return ts_fail(TS_ERR_FORMAT, "%s: holds a NUL byte; not a merges file", path);
    }
    size_t lines = 1;
    for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
    bpe->merge_mask = tok_table_size(lines) - 1;
    bpe->merges = calloc((size_t)bpe->merge_mask + 1, sizeof *bpe->merges);
    uint8_t *scratch = malloc(len + 1);
    char *joined = malloc(len + 1);
    if (!bpe->merges || !scratch || !joined) {
        free(text);
        free(scratch);
        free(joined);
        return ts_fail(TS_ERR_NOMEM, "%s: out of memory", path);
    }
    char *line = text;
    for (size_t number = 1; line && st == TS_OK; number++) {
        char *end = strchr(line, '\n');
        if (end) *end = '\0';
        char *f[3];
        int nf = (number == 1 && strncmp(line, "#version", 8) == 0) ? 0 : fields(line, f);
        if (nf == 0) { /* the version line, a blank line */
        } else if (nf != 2) {
            st = ts_fail(TS_ERR_FORMAT, "%s: line %zu has %d fields; a merge is two tokens, \"a b\"", path, number,
                         nf);
        } else {
            int32_t left = token_id(bpe, f[0], lookup, scratch);
            int32_t right = token_id(bpe, f[1], lookup, scratch);
            snprintf(joined, len + 1, "%s%s", f[0], f[1]);
            int32_t merged = token_id(bpe, joined, lookup, scratch);
            if (left < 0 || right < 0 || merged < 0) {
                const char *missing = left < 0 ? f[0] : right < 0 ? f[1] : joined;
                st = ts_fail(TS_ERR_FORMAT, "%s: line %zu merges \"%.40s\" and \"%.40s\", but \"%.40s\" is not in "
                                            "the vocabulary",
                             path, number, f[0], f[1], missing);
            } else {
                merge_slot *m = merge_slot_of(bpe, left, right);
                m->rank = bpe->n_merges++; /* a pair given twice keeps its last rank, as a Python dict does */
                m->merged = merged;
            }
        }
        line = end ? end + 1 : NULL;
    }
    free(text);
    free(scratch);
    free(joined);
    if (st == TS_OK && bpe->n_merges == 0) st = ts_fail(TS_ERR_FORMAT, "%s: holds no merges", path);
    return st;
}

ts_status ts_bpe_load(ts_bpe **out, const char *dir) {
    *out = NULL;
    char vocab_path[4096], merges_path[4096];
    ts_status st = find_file(vocab_path, sizeof vocab_path, dir, "encoder.json", "vocab.json");
    if (st == TS_OK) st = find_file(merges_path, sizeof merges_path, dir, "vocab.bpe", "merges.txt");
    if (st != TS_OK) return st;
    ts_bpe *bpe = calloc(1, sizeof *bpe);
    if (!bpe) return ts_fail(TS_ERR_NOMEM, "bpe: out of memory");
    uint32_t chars[256];
    int16_t lookup[512]; /* character -> byte, -1 for characters that spell none */
    byte_chars(chars);
    for (int c = 0; c < 512; c++) lookup[c] = -1;
    for (int b = 0; b < 256; b++) lookup[chars[b]] = (int16_t)b;
    st = load_vocab(bpe, vocab_path, lookup);
    if (st == TS_OK) st = load_merges(bpe, merges_path, lookup);
    if (st != TS_OK) {
        ts_bpe_free(bpe);
        return st;
    }
    *out = bpe;
    return TS_OK;
}

void ts_bpe_free(ts_bpe *bpe) {
    if (!bpe) return;
    free(bpe->bytes);
    free(bpe->offset);
    free(bpe->strings);
    free(bpe->str_offset);
    free(bpe->vocab_slots);
    free(bpe->merges);
    free(bpe->cache);
    free(bpe->cache_bytes);
    free(bpe->cache_ids);
    free(bpe->node_id);
    free(bpe->node_prev);
    free(bpe->node_next);
    free(bpe->heap);
    free(bpe->batch);
    free(bpe);
}

ts_status ts_bpe_default_dir(char *dir, size_t cap) {
    const char *env = getenv("TSCOPE_ASSETS");
    const char *assets = env && *env ? env : TSCOPE_ASSET_DIR;
    int n = snprintf(dir, cap, "%s/gpt2", assets);
    if (n < 0 || (size_t)n >= cap) return ts_fail(TS_ERR_ARG, "%s: path too long", assets);
    return TS_OK;
}

int32_t ts_bpe_vocab_size(const ts_bpe *bpe) { return bpe->n_vocab; }

/* ---- encoding ---- */

static bool ids_push(ts_bpe_ids *out, int32_t id) {
    if (out->count == out->cap && !grow((void **)&out->ids, &out->cap, out->count + 1, sizeof *out->ids))
        return false;
    out->ids[out->count++] = id;
    return true;
}

void ts_bpe_ids_free(ts_bpe_ids *ids) {
    free(ids->ids);
    *ids = (ts_bpe_ids){0};
}

/* A min-heap of candidate merges, by rank then position (left to right). */
static bool heap_less(const heap_entry *a, const heap_entry *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(ts_bpe *bpe, heap_entry e) {
    heap_entry *h = bpe->heap;
    size_t i = bpe->heap_len++;
    while (i > 0 && heap_less(&e, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = e;
}

static heap_entry heap_pop(ts_bpe *bpe) {
    heap_entry *h = bpe->heap;
    heap_entry top = h[0], last = h[--bpe->heap_len];
    size_t n = bpe->heap_len, i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap_less(&h[c + 1], &h[c])) c++;
        if (!heap_less(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (n) h[i] = last;
    return top;
}

/* Queue the merge of node pos with the node after it, if there is one. */
static void consider(ts_bpe *bpe, int32_t pos) {
    if (pos < 0) return;
    int32_t next = bpe->node_next[pos];
    if (next < 0) return;
    const merge_slot *m = merge_find(bpe, bpe->node_id[pos], bpe->node_id[next]);
    if (m) heap_push(bpe, (heap_entry){m->rank, pos});
}

static bool scratch_grow(ts_bpe *bpe, size_t n) {
    if (n <= bpe->scratch_cap) return true;
    size_t c = bpe->scratch_cap ? bpe->scratch_cap : 64;
    while (c < n) c *= 2;
    int32_t *a = realloc(bpe->node_id, c * sizeof *a);
    if (a) bpe->node_id = a;
    int32_t *b = realloc(bpe->node_prev, c * sizeof *b);
    if (b) bpe->node_prev = b;
    int32_t *d = realloc(bpe->node_next, c * sizeof *d);
    if (d) bpe->node_next = d;
    /* each merge queues at most two pairs: 3n entries bound the heap */
    heap_entry *h = realloc(bpe->heap, 3 * c * sizeof *h);
    if (h) bpe->heap = h;
    heap_entry *t = realloc(bpe->batch, 3 * c * sizeof *t);
    if (t) bpe->batch = t;
    if (!a || !b || !d || !h || !t) return false;
    bpe->scratch_cap = c;
    return true;
}

/* Apply the merges to one word's bytes, appending its ids. Like the reference:
 * take the lowest rank any adjacent pair has, join every occurrence of that
 * pair left to right, and repeat. A heap keeps it O(n log n) for long words. */
static ts_status bpe_word(ts_bpe *bpe, const uint8_t *s, size_t n, ts_bpe_ids *out) {
    if (n == 1) return ids_push(out, bpe->byte_id[s[0]]) ? TS_OK : ts_fail(TS_ERR_NOMEM, "bpe: out of memory");
    if (n > INT32_MAX / 4) return ts_fail(TS_ERR_ARG, "bpe: a word of %zu bytes is too long", n);
    if (!scratch_grow(bpe, n)) return ts_fail(TS_ERR_NOMEM, "bpe: out of memory for a word of %zu bytes", n);
    for (size_t i = 0; i < n; i++) {
        bpe->node_id[i] = bpe->byte_id[s[i]];
        bpe->node_prev[i] = (int32_t)i - 1;
        bpe->node_next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    bpe->heap_len = 0;
    for (size_t i = 0; i + 1 < n; i++) consider(bpe, (int32_t)i);
    while (bpe->heap_len) {
        /* every queued pair of the lowest rank, left to right */
        size_t nb = 0;
        int32_t rank = bpe->heap[0].rank;
        while (bpe->heap_len && bpe->heap[0].rank == rank) bpe->batch[nb++] = heap_pop(bpe);
        for (size_t k = 0; k < nb; k++) {
            heap_entry e = bpe->batch[k];
            int32_t next = bpe->node_next[e.pos];
            /* stale when a node was merged away or into something else since */
            if (bpe->node_id[e.pos] < 0 || next < 0) continue;
            const merge_slot *m = merge_find(bpe, bpe->node_id[e.pos], bpe->node_id[next]);
            if (!m || m->rank != e.rank) continue;
            bpe->node_id[e.pos] = m->merged;
            bpe->node_id[next] = -1; /* gone */
            int32_t after = bpe->node_next[next];
            bpe->node_next[e.pos] = after;
            if (after >= 0) bpe->node_prev[after] = e.pos;
            consider(bpe, bpe->node_prev[e.pos]);
            consider(bpe, e.pos);
        }
    }
    for (int32_t i = 0; i >= 0; i = bpe->node_next[i])
        if (!ids_push(out, bpe->node_id[i])) return ts_fail(TS_ERR_NOMEM, "bpe: out of memory");
    return TS_OK;
}

static void cache_clear(ts_bpe *bpe) {
    if (bpe->cache) memset(bpe->cache, 0, ((size_t)bpe->cache_mask + 1) * sizeof *bpe->cache);
    bpe->cache_count = 0;
    bpe->cache_bytes_len = 0;
    bpe->cache_ids_len = 0;
}

/* The cache slot of a word: its entry, or the empty slot it would take. */
static cache_slot *cache_slot_of(ts_bpe *bpe, const uint8_t *s, size_t n, uint32_t h) {
    for (uint32_t i = h & bpe->cache_mask;; i = (i + 1) & bpe->cache_mask) {
        cache_slot *c = &bpe->cache[i];
        if (c->key_len == 0) return c;
        if (c->hash == h && c->key_len == n && memcmp(bpe->cache_bytes + c->key_off, s, n) == 0) return c;
    }
}

/* Remember a word's ids (those at out->ids[from..]); a full cache starts over.
 * Out of memory only means not remembering. */
static void cache_put(ts_bpe *bpe, const uint8_t *s, size_t n, uint32_t h, const ts_bpe_ids *out, size_t from) {
    size_t n_ids = out->count - from;
    if (!bpe->cache) {
        bpe->cache_mask = tok_table_size(CACHE_MAX_ENTRIES) - 1;
        bpe->cache = calloc((size_t)bpe->cache_mask + 1, sizeof *bpe->cache);
        if (!bpe->cache) return;
    }
    if (bpe->cache_count >= CACHE_MAX_ENTRIES) cache_clear(bpe);
    if (!grow((void **)&bpe->cache_bytes, &bpe->cache_bytes_cap, bpe->cache_bytes_len + n, 1) ||
        !grow((void **)&bpe->cache_ids, &bpe->cache_ids_cap, bpe->cache_ids_len + n_ids, sizeof(int32_t)))
        return;
    cache_slot *c = cache_slot_of(bpe, s, n, h);
    *c = (cache_slot){h, (uint32_t)bpe->cache_bytes_len, (uint32_t)bpe->cache_ids_len, (uint16_t)n, (uint16_t)n_ids};
    memcpy(bpe->cache_bytes + bpe->cache_bytes_len, s, n);
    memcpy(bpe->cache_ids + bpe->cache_ids_len, out->ids + from, n_ids * sizeof(int32_t));
    bpe->cache_bytes_len += n;
    bpe->cache_ids_len += n_ids;
    bpe->cache_count++;
}

static ts_status encode_word(ts_bpe *bpe, const uint8_t *s, size_t n, ts_bpe_ids *out) {
    if (n > CACHE_MAX_WORD) return bpe_word(bpe, s, n, out);
    uint32_t h = tok_hash_bytes(s, n);
    if (bpe->cache) {
        const cache_slot *c = cache_slot_of(bpe, s, n, h);
        if (c->key_len) {
            if (!grow((void **)&out->ids, &out->cap, out->count + c->n_ids, sizeof *out->ids))
                return ts_fail(TS_ERR_NOMEM, "bpe: out of memory");
            memcpy(out->ids + out->count, bpe->cache_ids + c->ids_off, c->n_ids * sizeof(int32_t));
            out->count += c->n_ids;
            return TS_OK;
        }
    }
    size_t from = out->count;
    ts_status st = bpe_word(bpe, s, n, out);
    if (st == TS_OK) cache_put(bpe, s, n, h, out, from);
    return st;
}

ts_status ts_bpe_encode(ts_bpe *bpe, const char *text, size_t len, ts_bpe_ids *out) {
    const uint8_t *s = (const uint8_t *)text;
    uint8_t *fixed = NULL;
    if (!ts_bpe_utf8_valid(s, len)) { /* read as the reference's TextDecoder would */
        if (len > SIZE_MAX / 3) return ts_fail(TS_ERR_ARG, "bpe: text too long");
        fixed = malloc(3 * len);
        if (!fixed) return ts_fail(TS_ERR_NOMEM, "bpe: out of memory");
        len = ts_bpe_utf8_replace(s, len, fixed);
        s = fixed;
    }
    ts_status st = TS_OK;
    for (size_t i = 0; i < len && st == TS_OK;) {
        size_t j = ts_bpe_split_next(s, len, i);
        st = encode_word(bpe, s + i, j - i, out);
        i = j;
    }
    free(fixed);
    return st;
}

/* ---- decoding and labels ---- */

const char *ts_bpe_token_bytes(const ts_bpe *bpe, int32_t id, size_t *len) {
    if (id < 0 || id >= bpe->n_vocab) return NULL;
    *len = bpe->offset[id + 1] - bpe->offset[id];
    return (const char *)bpe->bytes + bpe->offset[id];
}

const char *ts_bpe_token_string(const ts_bpe *bpe, int32_t id) {
    if (id < 0 || id >= bpe->n_vocab) return NULL;
    return bpe->strings + bpe->str_offset[id];
}

ts_status ts_bpe_decode(const ts_bpe *bpe, const int32_t *ids, size_t n, char **text, size_t *len) {
    *text = NULL;
    *len = 0;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= bpe->n_vocab)
            return ts_fail(TS_ERR_ARG, "id %ld (number %zu) is outside the vocabulary (0..%d)", (long)ids[i], i + 1,
                           bpe->n_vocab - 1);
        total += bpe->offset[ids[i] + 1] - bpe->offset[ids[i]];
    }
    char *buf = malloc(total + 1);
    if (!buf) return ts_fail(TS_ERR_NOMEM, "bpe: out of memory decoding %zu ids", n);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        size_t l = bpe->offset[ids[i] + 1] - bpe->offset[ids[i]];
        memcpy(buf + at, bpe->bytes + bpe->offset[ids[i]], l);
        at += l;
    }
    buf[at] = '\0';
    *text = buf;
    *len = at;
    return TS_OK;
}

/* U+2400 + c: the picture of a control character, as UTF-8. */
static void control_picture(uint32_t c, char out[3]) {
    uint32_t cp = 0x2400 + c;
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
}

size_t ts_bpe_label(const char *bytes, size_t len, char *buf, size_t cap) {
    const uint8_t *s = (const uint8_t *)bytes;
    size_t need = 0, used = 0; /* the whole label's length; what buf holds */
    bool full = false;
    for (size_t i = 0; i < len;) {
        uint8_t b = s[i];
        char pic[8];
        const char *piece = (const char *)s + i;
        size_t n = 1, step = 1;
        if (b == ' ') piece = "\xe2\x90\xa3", n = 3;       /* ␣ */
        else if (b == '\n') piece = "\xe2\x86\xb5", n = 3; /* ↵ */
        else if (b == '\t') piece = "\xe2\x87\xa5", n = 3; /* ⇥ */
        else if (b < 0x20 || b == 0x7F) {                  /* ␀ .. ␟ (␍ for CR), ␡ */
            control_picture(b == 0x7F ? 0x21 : b, pic);
            piece = pic, n = 3;
        } else if (b >= 0x80) {
            size_t k = ts_bpe_utf8_len(s + i, len - i);
            if (k) n = step = k; /* a whole character */
            else {               /* a byte of a character cut between tokens */
                snprintf(pic, sizeof pic, "\\x%02X", b);
                piece = pic, n = 4;
            }
        }
        if (!full && used + n < cap) {
            memcpy(buf + used, piece, n);
            used += n;
        } else {
            full = true; /* stop at a whole piece, never inside a character */
        }
        need += n;
        i += step;
    }
    if (cap) buf[used] = '\0';
    return need;
}

size_t ts_bpe_token_label(const ts_bpe *bpe, int32_t id, char *buf, size_t cap) {
    size_t len;
    const char *b = ts_bpe_token_bytes(bpe, id, &len);
    if (!b) {
        int n = snprintf(buf, cap, "<bad id %ld>", (long)id);
        return n < 0 ? 0 : (size_t)n;
    }
    return ts_bpe_label(b, len, buf, cap);
}
