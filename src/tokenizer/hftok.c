/* hftok: the tokenizers of today's models behind one API (ts_hftok_*): a
 * directory's tokenizer.json (hf_json.c), tokenizer.model (spm.c), vocab.txt
 * (hf_json.c) or GPT-2's encoder.json and vocab.bpe (bpe.c). Here: finding
 * the file, the encoding pipeline of tokenizer.json and vocab.txt (added
 * tokens, normalizer, pre-tokenizer, model, post-processor), decoding and
 * labels. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe_impl.h"
#include "tok_impl.h"

bool tok_ids_push(ts_bpe_ids *ids, int32_t id) {
    if (ids->count == ids->cap) {
        size_t c = ids->cap ? 2 * ids->cap : 64;
        int32_t *p = realloc(ids->ids, c * sizeof *p);
        if (!p) return false;
        ids->ids = p;
        ids->cap = c;
    }
    ids->ids[ids->count++] = id;
    return true;
}

/* The ids of byte-level pieces seen, keyed by their bytes: a text repeats its
 * words, and each one's merges need run once. Emptied when full. */
#define CACHE_SLOTS (1u << 16)
#define CACHE_MAX_PIECE 64
typedef struct tok_cache {
    uint32_t hash[CACHE_SLOTS], key_off[CACHE_SLOTS], ids_off[CACHE_SLOTS];
    uint8_t key_len[CACHE_SLOTS], n_ids[CACHE_SLOTS]; /* key_len 0: empty */
    char *keys;
    int32_t *ids;
    size_t keys_len, ids_len, count;
} tok_cache;

static uint32_t cache_hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

/* The slot of s: where it is, or the empty slot where it would go. */
static uint32_t cache_slot(const tok_cache *c, const char *s, size_t n, uint32_t h) {
    uint32_t i = h & (CACHE_SLOTS - 1);
    while (c->key_len[i] && !(c->hash[i] == h && c->key_len[i] == n && memcmp(c->keys + c->key_off[i], s, n) == 0))
        i = (i + 1) & (CACHE_SLOTS - 1);
    return i;
}

static bool exists(const char *dir, const char *name, char *path, size_t cap) {
    snprintf(path, cap, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

ts_hftok *tok_new(void) {
    ts_hftok *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    memset(t->byte_id, 0xff, sizeof t->byte_id);
    t->unk_id = -1;
    return t;
}

ts_status ts_hftok_open(ts_hftok **out, const char *dir) {
    *out = NULL;
    char path[4200];
    if (strlen(dir) > 4000) return ts_fail(TS_ERR_ARG, "%.60s...: path too long", dir);
    ts_hftok *t = tok_new();
    if (!t) return ts_fail(TS_ERR_NOMEM, "out of memory");
    ts_status st;
    if (exists(dir, "tokenizer.json", path, sizeof path)) st = tok_load_json(t, path);
    else if (exists(dir, "tokenizer.model", path, sizeof path)) st = tok_load_spm(t, path);
    else if (exists(dir, "vocab.txt", path, sizeof path)) st = tok_load_vocab_txt(t, path, dir);
    else if (exists(dir, "encoder.json", path, sizeof path) || exists(dir, "vocab.json", path, sizeof path)) {
        t->kind = TOK_GPT2;
        st = ts_bpe_load(&t->gpt2, dir);
        snprintf(t->kind_name, sizeof t->kind_name, "GPT-2 (encoder.json, vocab.bpe)");
        if (st == TS_OK) t->n_vocab = ts_bpe_vocab_size(t->gpt2);
    } else {
        int e = errno;
        FILE *d = fopen(dir, "rb");
        if (d) fclose(d);
        st = ts_fail(TS_ERR_IO, "%s: %s", dir,
                     !d && e == ENOENT ? "no such directory"
                                       : "no tokenizer there (tokenizer.json, tokenizer.model, vocab.txt, or "
                                         "encoder.json and vocab.bpe)");
    }
    if (st != TS_OK) {
        ts_hftok_close(t);
        return st;
    }
    *out = t;
    return TS_OK;
}

void ts_hftok_close(ts_hftok *t) {
    if (!t) return;
    if (t->dec)
        for (int32_t i = 0; i < t->n_vocab; i++) free(t->dec[i]);
    free(t->dec);
    free(t->dec_len);
    free(t->special);
    tok_vocab_free(&t->vocab);
    tok_merges_free(&t->merges);
    for (int i = 0; i < t->n_added; i++) free(t->added[i].s);
    free(t->added);
    ts_bpe_free(t->gpt2);
    if (t->cache) {
        free(t->cache->keys);
        free(t->cache->ids);
        free(t->cache);
    }
    free(t);
}

const char *ts_hftok_kind(const ts_hftok *t) { return t->kind_name; }
int32_t ts_hftok_vocab_size(const ts_hftok *t) { return t->n_vocab; }

/* ---- pieces: strings a pre-tokenizer cuts text into ---- */

typedef struct pieces {
    ts_text_buf text;
    size_t *off; /* (n + 1) */
    size_t n, cap;
} pieces;

static bool pieces_add(pieces *p, const char *s, size_t len) {
    if (p->n + 2 > p->cap) {
        size_t c = p->cap ? 2 * p->cap : 16;
        size_t *o = realloc(p->off, c * sizeof *o);
        if (!o) return false;
        p->off = o;
        p->cap = c;
    }
    if (p->n == 0) p->off[0] = p->text.len;
    if (len) ts_text_buf_add(&p->text, s, len);
    p->off[++p->n] = p->text.len;
    return !p->text.oom;
}

static void pieces_free(pieces *p) {
    free(p->text.s);
    free(p->off);
    *p = (pieces){0};
}

/* One pre-tokenizer step on one piece, its results added to out. */
static bool pre_step(const tok_step *s, const char *str, size_t len, pieces *out) {
    if (s->op == PRE_BYTELEVEL) {
        char *withspace = NULL;
        if (s->prefix_space && (len == 0 || str[0] != ' ')) {
            withspace = malloc(len + 1);
            if (!withspace) return false;
            withspace[0] = ' ';
            memcpy(withspace + 1, str, len);
            str = withspace;
            len++;
        }
        bool ok = true;
        if (!s->use_regex) ok = pieces_add(out, str, len);
        for (size_t i = 0; s->use_regex && i < len && ok;) {
            size_t j = ts_bpe_split_next((const uint8_t *)str, len, i);
            ok = pieces_add(out, str + i, j - i);
            i = j;
        }
        free(withspace);
        return ok;
    }
    tok_cps cps = {0};
    if (!tok_utf8_decode((const uint8_t *)str, len, &cps)) return false;
    /* byte offsets of each code point, to cut str itself */
    size_t *at = malloc((cps.n + 1) * sizeof *at);
    bool ok = at != NULL;
    if (ok) {
        size_t b = 0;
        for (size_t k = 0; k < cps.n; k++) {
            at[k] = b;
            b += cps.cp[k] < 0x80 ? 1 : cps.cp[k] < 0x800 ? 2 : cps.cp[k] < 0x10000 ? 3 : 4;
        }
        at[cps.n] = b;
    }
    if (ok && s->op == PRE_BERT) {
        size_t i = 0, a, e;
        while (ok && tok_split_bert(cps.cp, cps.n, &i, &a, &e)) ok = pieces_add(out, str + at[a], at[e] - at[a]);
    } else if (ok) {
        for (size_t i = 0; i < cps.n && ok;) {
            size_t j = s->op == PRE_SPLIT_LLAMA3 ? tok_split_llama3(cps.cp, cps.n, i) : tok_split_gpt2(cps.cp, cps.n, i);
            if (!s->removed) ok = pieces_add(out, str + at[i], at[j] - at[i]);
            i = j;
        }
    }
    free(at);
    tok_cps_free(&cps);
    return ok;
}

/* ---- the models ---- */

static ts_status bpe_merge_piece(ts_hftok *t, const char *s, size_t len, ts_bpe_ids *out);

static ts_status bpe_piece(ts_hftok *t, const char *s, size_t len, ts_bpe_ids *out) {
    if (len == 0) return TS_OK;
    if (len > CACHE_MAX_PIECE) return bpe_merge_piece(t, s, len, out);
    if (!t->cache) {
        t->cache = calloc(1, sizeof *t->cache);
        if (t->cache) {
            t->cache->keys = malloc(CACHE_SLOTS / 2 * CACHE_MAX_PIECE);
            t->cache->ids = malloc(CACHE_SLOTS / 2 * CACHE_MAX_PIECE * sizeof(int32_t));
        }
        if (!t->cache || !t->cache->keys || !t->cache->ids) return ts_fail(TS_ERR_NOMEM, "out of memory");
    }
    tok_cache *c = t->cache;
    uint32_t h = cache_hash(s, len), i = cache_slot(c, s, len, h);
    if (c->key_len[i]) {
        for (uint32_t k = 0; k < c->n_ids[i]; k++)
            if (!tok_ids_push(out, c->ids[c->ids_off[i] + k])) return ts_fail(TS_ERR_NOMEM, "out of memory");
        return TS_OK;
    }
    size_t from = out->count;
    TS_TRY(bpe_merge_piece(t, s, len, out));
    if (c->count >= CACHE_SLOTS / 2) { /* full: start again */
        memset(c->key_len, 0, sizeof c->key_len);
        c->count = c->keys_len = c->ids_len = 0;
        i = cache_slot(c, s, len, h);
    }
    size_t n_ids = out->count - from; /* at most len <= CACHE_MAX_PIECE */
    c->hash[i] = h;
    c->key_off[i] = (uint32_t)c->keys_len;
    c->ids_off[i] = (uint32_t)c->ids_len;
    c->key_len[i] = (uint8_t)len;
    c->n_ids[i] = (uint8_t)n_ids;
    memcpy(c->keys + c->keys_len, s, len);
    memcpy(c->ids + c->ids_len, out->ids + from, n_ids * sizeof(int32_t));
    c->keys_len += len;
    c->ids_len += n_ids;
    c->count++;
    return TS_OK;
}

static ts_status bpe_merge_piece(ts_hftok *t, const char *s, size_t len, ts_bpe_ids *out) {
    if (t->ignore_merges) {
        int32_t id = tok_vocab_find(&t->vocab, s, len);
        if (id >= 0) return tok_ids_push(out, id) ? TS_OK : ts_fail(TS_ERR_NOMEM, "out of memory");
    }
    int32_t *sym = malloc(len * sizeof *sym);
    if (!sym) return ts_fail(TS_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < len; i++) sym[i] = t->byte_id[(uint8_t)s[i]];
    size_t n = len;
    bool ok = tok_merge_run(&t->merges, sym, &n);
    for (size_t i = 0; i < n && ok; i++) ok = tok_ids_push(out, sym[i]);
    free(sym);
    return ok ? TS_OK : ts_fail(TS_ERR_NOMEM, "out of memory");
}

static ts_status wordpiece_piece(ts_hftok *t, const char *s, size_t len, ts_bpe_ids *out) {
    tok_cps cps = {0};
    if (!tok_utf8_decode((const uint8_t *)s, len, &cps)) return ts_fail(TS_ERR_NOMEM, "out of memory");
    size_t mark = out->count, plen = strlen(t->prefix);
    char *key = malloc(plen + len + 1);
    bool ok = key != NULL, unknown = cps.n > (size_t)t->max_chars;
    size_t *at = ok ? malloc((cps.n + 1) * sizeof *at) : NULL;
    ok = ok && at;
    if (ok) {
        size_t b = 0;
        for (size_t k = 0; k <= cps.n; k++) {
            at[k] = b;
            if (k < cps.n) b += cps.cp[k] < 0x80 ? 1 : cps.cp[k] < 0x800 ? 2 : cps.cp[k] < 0x10000 ? 3 : 4;
        }
    }
    for (size_t start = 0; ok && !unknown && start < cps.n;) {
        size_t end = cps.n;
        while (end > start + 1 && at[end] - at[start] > t->longest) end--; /* no token is longer */
        int32_t found = -1;
        for (; end > start; end--) {
            size_t k = 0;
            if (start > 0) memcpy(key, t->prefix, k = plen);
            memcpy(key + k, s + at[start], at[end] - at[start]);
            found = tok_vocab_find(&t->vocab, key, k + at[end] - at[start]);
            if (found >= 0) break;
        }
        if (found < 0) unknown = true;
        else ok = tok_ids_push(out, found);
        start = end;
    }
    if (ok && unknown) {
        out->count = mark;
        ok = tok_ids_push(out, t->unk_id);
    }
    free(key);
    free(at);
    tok_cps_free(&cps);
    return ok ? TS_OK : ts_fail(TS_ERR_NOMEM, "out of memory");
}

/* Pre-tokenize one stretch of normalized text and run the model on each piece. */
static ts_status model_stretch(ts_hftok *t, const char *s, size_t len, ts_bpe_ids *out) {
    if (t->kind == TOK_SPM) return tok_spm_encode(t, (const uint8_t *)s, len, out);
    pieces cur = {0};
    if (!pieces_add(&cur, s, len)) return ts_fail(TS_ERR_NOMEM, "out of memory");
    for (int k = 0; k < t->n_pre; k++) {
        pieces next = {0};
        bool ok = true;
        for (size_t i = 0; i < cur.n && ok; i++)
            ok = pre_step(&t->pre[k], cur.text.s + cur.off[i], cur.off[i + 1] - cur.off[i], &next);
        pieces_free(&cur);
        cur = next;
        if (!ok) {
            pieces_free(&cur);
            return ts_fail(TS_ERR_NOMEM, "out of memory");
        }
    }
    ts_status st = TS_OK;
    for (size_t i = 0; i < cur.n && st == TS_OK; i++) {
        const char *p = cur.text.s + cur.off[i];
        size_t n = cur.off[i + 1] - cur.off[i];
        if (!n) continue;
        st = t->kind == TOK_BPE_JSON ? bpe_piece(t, p, n, out) : wordpiece_piece(t, p, n, out);
    }
    pieces_free(&cur);
    return st;
}

static bool is_chinese(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
           (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

static bool bert_normalize(const tok_step *s, tok_cps *c) {
    tok_cps out = {0};
    bool ok = true;
    for (size_t i = 0; i < c->n && ok; i++) {
        uint32_t x = c->cp[i];
        if (s->clean) {
            if (x == 0 || x == 0xFFFD || (x != '\t' && x != '\n' && x != '\r' && (tok_flags_of(x) & TOK_F_CONTROL)))
                continue;
            if (tok_is_js_space(x)) x = ' ';
        }
        if (s->chinese && is_chinese(x)) ok = tok_cps_push(&out, ' ') && tok_cps_push(&out, x) && tok_cps_push(&out, ' ');
        else ok = tok_cps_push(&out, x);
    }
    tok_cps_free(c);
    *c = out;
    if (ok && s->lower) ok = tok_lower(c);
    if (ok && s->strip) {
        ok = tok_nfd(c);
        tok_strip_mn(c);
    }
    return ok;
}

/* The normalizer over s[0..n) into a new string (*len bytes). */
static char *normalize(const ts_hftok *t, const char *s, size_t n, size_t *len) {
    tok_cps c = {0};
    bool ok = tok_utf8_decode((const uint8_t *)s, n, &c);
    for (int k = 0; k < t->n_norm && ok; k++) {
        const tok_step *st = &t->norm[k];
        if (st->op == NORM_NFC) ok = tok_nfc(&c);
        else if (st->op == NORM_NFD) ok = tok_nfd(&c);
        else if (st->op == NORM_LOWER) ok = tok_lower(&c);
        else if (st->op == NORM_STRIP_MN) tok_strip_mn(&c);
        else ok = bert_normalize(st, &c);
    }
    char *r = ok ? tok_utf8_encode(c.cp, c.n, len) : NULL;
    tok_cps_free(&c);
    return r;
}

/* The added token (of the normalized ones or the others) that starts at s[i], longest first, or NULL. */
static const tok_added *added_at(const ts_hftok *t, const char *s, size_t n, size_t i, bool normalized) {
    const tok_added *best = NULL;
    if (!t->added_first[normalized][(uint8_t)s[i]]) return NULL;
    for (int k = 0; k < t->n_added; k++) {
        const tok_added *a = &t->added[k];
        if (a->normalized != normalized || a->len > n - i || (best && a->len <= best->len)) continue;
        if (memcmp(s + i, a->s, a->len) == 0) best = a;
    }
    return best;
}

/* JavaScript's trim of one end: white space (JS \s) of a UTF-8 stretch. */
static void trim(const char *s, size_t *a, size_t *b, bool left) {
    tok_cps c = {0};
    if (!tok_utf8_decode((const uint8_t *)s + *a, *b - *a, &c)) return;
    size_t lo = 0, hi = c.n;
    if (left) while (lo < hi && tok_is_js_space(c.cp[lo])) *a += c.cp[lo] < 0x80 ? 1 : c.cp[lo] < 0x800 ? 2 : c.cp[lo] < 0x10000 ? 3 : 4, lo++;
    else while (hi > lo && tok_is_js_space(c.cp[hi - 1])) *b -= c.cp[hi - 1] < 0x80 ? 1 : c.cp[hi - 1] < 0x800 ? 2 : c.cp[hi - 1] < 0x10000 ? 3 : 4, hi--;
    tok_cps_free(&c);
}

/* Cut s at the added tokens (of one kind); stretches between go to plain(). */
static ts_status split_added(ts_hftok *t, const char *s, size_t n, bool normalized, ts_bpe_ids *out,
                             ts_status (*plain)(ts_hftok *, const char *, size_t, ts_bpe_ids *)) {
    size_t start = 0;
    bool strip_next = false;
    for (size_t i = 0; i <= n;) {
        const tok_added *a = i < n ? added_at(t, s, n, i, normalized) : NULL;
        if (!a && i < n) {
            i++;
            continue;
        }
        size_t lo = start, hi = i;
        if (strip_next) trim(s, &lo, &hi, true);
        if (a && a->lstrip) trim(s, &lo, &hi, false);
        if (hi > lo) TS_TRY(plain(t, s + lo, hi - lo, out));
        if (!a) break;
        if (!tok_ids_push(out, a->id)) return ts_fail(TS_ERR_NOMEM, "out of memory");
        strip_next = a->rstrip;
        i += a->len;
        start = i;
    }
    return TS_OK;
}

static ts_status normalized_stretch(ts_hftok *t, const char *s, size_t n, ts_bpe_ids *out) {
    if (!t->n_norm) return split_added(t, s, n, true, out, model_stretch);
    size_t len;
    char *norm = normalize(t, s, n, &len);
    if (!norm) return ts_fail(TS_ERR_NOMEM, "out of memory");
    ts_status st = split_added(t, norm, len, true, out, model_stretch);
    free(norm);
    return st;
}

ts_status ts_hftok_encode(ts_hftok *t, const char *text, size_t len, bool add_special, ts_bpe_ids *out) {
    if (t->kind == TOK_GPT2) return ts_bpe_encode(t->gpt2, text, len, out);
    if (!t->added_indexed) {
        for (int k = 0; k < t->n_added; k++) t->added_first[t->added[k].normalized][(uint8_t)t->added[k].s[0]] = 1;
        for (int32_t id = 0; id < t->vocab.n; id++)
            if (t->vocab.len[id] > t->longest) t->longest = t->vocab.len[id];
        t->added_indexed = true;
    }
    const uint8_t *s = (const uint8_t *)text;
    uint8_t *fixed = NULL;
    if (!ts_bpe_utf8_valid(s, len)) { /* each ill-formed part as U+FFFD, as a JavaScript string holds it */
        if (len > SIZE_MAX / 3) return ts_fail(TS_ERR_ARG, "text too long");
        fixed = malloc(3 * len);
        if (!fixed) return ts_fail(TS_ERR_NOMEM, "out of memory");
        len = ts_bpe_utf8_replace(s, len, fixed);
        s = fixed;
    }
    ts_status st = TS_OK;
    for (int i = 0; add_special && i < t->n_head && st == TS_OK; i++)
        if (!tok_ids_push(out, t->head[i])) st = ts_fail(TS_ERR_NOMEM, "out of memory");
    if (st == TS_OK && t->kind == TOK_SPM) {
        size_t nl;
        char *norm = tok_spm_normalize(t, s, len, &nl);
        st = norm ? split_added(t, norm, nl, true, out, model_stretch) : ts_fail(TS_ERR_NOMEM, "out of memory");
        free(norm);
    } else if (st == TS_OK) {
        st = split_added(t, (const char *)s, len, false, out, normalized_stretch);
    }
    for (int i = 0; add_special && i < t->n_tail && st == TS_OK; i++)
        if (!tok_ids_push(out, t->tail[i])) st = ts_fail(TS_ERR_NOMEM, "out of memory");
    free(fixed);
    return st;
}

/* ---- decoding and labels ---- */

static bool wordpiece_kind(const ts_hftok *t) { return t->kind == TOK_WORDPIECE_JSON || t->kind == TOK_WORDPIECE_TXT; }

/* clean_up_tokenization of Hugging Face's decoders: " ." -> "." and the like */
static size_t cleanup(char *s, size_t n) {
    static const char *const from[] = {" .", " ?", " !", " ,", " ' ", " n't", " 'm", " 's", " 've", " 're"};
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        int hit = -1;
        for (int k = 0; k < 10 && hit < 0; k++) {
            size_t l = strlen(from[k]);
            if (l <= n - i && memcmp(s + i, from[k], l) == 0) hit = k;
        }
        if (hit < 0) {
            s[o++] = s[i++];
            continue;
        }
        size_t l = strlen(from[hit]);
        if (hit == 4) { /* " ' " -> "'" */
            s[o++] = '\'';
        } else {
            memmove(s + o, s + i + 1, l - 1);
            o += l - 1;
        }
        i += l;
    }
    s[o] = '\0';
    return o;
}

ts_status ts_hftok_decode(const ts_hftok *t, const int32_t *ids, size_t n, char **text, size_t *len) {
    if (t->kind == TOK_GPT2) return ts_bpe_decode(t->gpt2, ids, n, text, len);
    *text = NULL;
    *len = 0;
    ts_text_buf b = {0};
    size_t plen = strlen(t->prefix);
    bool first = true; /* SentencePiece: the first piece that is text */
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab) {
            free(b.s);
            return ts_fail(TS_ERR_ARG, "id %ld (number %zu) is outside the vocabulary (0..%d)", (long)ids[i], i + 1,
                           t->n_vocab - 1);
        }
        const char *d = t->dec[ids[i]];
        size_t l = t->dec_len[ids[i]];
        if (wordpiece_kind(t)) {
            if (i > 0 && !t->special[ids[i]] && l >= plen && memcmp(d, t->prefix, plen) == 0) d += plen, l -= plen;
            else if (i > 0) ts_text_buf_add(&b, " ", 1);
        } else if (t->kind == TOK_SPM && first && !t->special[ids[i]]) {
            if (t->add_dummy_prefix && l && d[0] == ' ') d++, l--; /* the dummy prefix */
            first = false;
        }
        ts_text_buf_add(&b, d, l);
    }
    if (b.oom) {
        free(b.s);
        return ts_fail(TS_ERR_NOMEM, "out of memory decoding %zu ids", n);
    }
    if (!b.s) {
        b.s = calloc(1, 1);
        if (!b.s) return ts_fail(TS_ERR_NOMEM, "out of memory");
    }
    if (wordpiece_kind(t) && t->cleanup) b.len = cleanup(b.s, b.len);
    *text = b.s;
    *len = b.len;
    return TS_OK;
}

const char *ts_hftok_token_bytes(const ts_hftok *t, int32_t id, size_t *len) {
    if (t->kind == TOK_GPT2) return ts_bpe_token_bytes(t->gpt2, id, len);
    if (id < 0 || id >= t->n_vocab) return NULL;
    *len = t->dec_len[id];
    return t->dec[id];
}

size_t ts_hftok_token_label(const ts_hftok *t, int32_t id, char *buf, size_t cap) {
    if (t->kind == TOK_GPT2) return ts_bpe_token_label(t->gpt2, id, buf, cap);
    if (id < 0 || id >= t->n_vocab) {
        int n = snprintf(buf, cap, "<bad id %ld>", (long)id);
        return n < 0 ? 0 : (size_t)n;
    }
    if (t->special[id] && t->kind == TOK_SPM && t->vocab.tok[id]) /* a control piece decodes to nothing */
        return ts_bpe_label(t->vocab.tok[id], t->vocab.len[id], buf, cap);
    return ts_bpe_label(t->dec[id], t->dec_len[id], buf, cap);
}
