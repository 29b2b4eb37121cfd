/* lm_tok: a language model's tokenizer, characters, words or GPT-2's BPE
 * (tokenizer.h, "a language model's tokenizer"). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "tscope/tokenizer.h"

#define UNK "<unk>"

static const char *const kind_names[TS_LMTOK_COUNT] = {"char", "word", "bpe", "hf"};

const char *ts_lmtok_kind_name(ts_lmtok_kind k) { return (unsigned)k < TS_LMTOK_COUNT ? kind_names[k] : "?"; }

ts_status ts_lmtok_kind_parse(const char *word, ts_lmtok_kind *out) {
    for (int i = 0; i < TS_LMTOK_HF; i++) /* a folder's own tokenizer is opened, never named */
        if (strcmp(word, kind_names[i]) == 0) {
            *out = (ts_lmtok_kind)i;
            return TS_OK;
        }
    return ts_fail(TS_ERR_ARG, "unknown tokenizer '%s'; the tokenizers are char, word, bpe", word);
}

/* ---- UTF-8 ------------------------------------------------------------------ */

/* Length of the well-formed UTF-8 character at s (1..4), 0 when the bytes
 * there are not one (overlong forms, surrogates and values past U+10FFFF
 * included). */
static int utf8_len(const unsigned char *s, size_t left) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    int n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    if (n == 0 || c > 0xF4 || (size_t)n > left) return 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (c == 0xE0 && s[1] < 0xA0) return 0; /* overlong */
    if (c == 0xED && s[1] >= 0xA0) return 0; /* surrogate */
    if (c == 0xF0 && s[1] < 0x90) return 0; /* overlong */
    if (c == 0xF4 && s[1] >= 0x90) return 0; /* past U+10FFFF */
    return n;
}

static ts_status check_utf8(const char *text, size_t len) {
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        int n = utf8_len(s + i, len - i);
        if (!n) return ts_fail(TS_ERR_FORMAT, "the text is not UTF-8: byte 0x%02X at offset %zu", s[i], i);
        i += (size_t)n;
    }
    return TS_OK;
}

/* ---- the piece table -------------------------------------------------------- */

static uint32_t hash_bytes(const char *s, size_t n) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static int32_t find(const ts_lmtok *t, const char *s, size_t n) {
    if (!t->slots) return -1;
    for (uint32_t i = hash_bytes(s, n) & t->mask;; i = (i + 1) & t->mask) {
        int32_t id = t->slots[i];
        if (id < 0) return -1;
        if (strlen(t->piece[id]) == n && memcmp(t->piece[id], s, n) == 0) return id;
    }
}

/* Index the pieces; a piece spelled twice is a format error. */
static ts_status index_pieces(ts_lmtok *t) {
    uint32_t size = 16;
    while (size < 2u * (uint32_t)t->count) size <<= 1;
    t->slots = malloc(sizeof(int32_t) * size);
    if (!t->slots) return ts_fail(TS_ERR_NOMEM, "tokenizer: out of memory");
    memset(t->slots, 0xFF, sizeof(int32_t) * size);
    t->mask = size - 1;
    for (int32_t id = 0; id < t->count; id++) {
        size_t n = strlen(t->piece[id]);
        if (find(t, t->piece[id], n) >= 0)
            return ts_fail(TS_ERR_FORMAT, "tokenizer: the token '%s' appears twice in the vocabulary", t->piece[id]);
        uint32_t i = hash_bytes(t->piece[id], n) & t->mask;
        while (t->slots[i] >= 0) i = (i + 1) & t->mask;
        t->slots[i] = id;
    }
    return TS_OK;
}

void ts_lmtok_free(ts_lmtok *t) {
    for (int32_t i = 0; t->piece && i < t->count; i++) free(t->piece[i]);
    free(t->piece);
    free(t->slots);
    if (t->bpe) ts_bpe_free(t->bpe);
    if (t->hf) ts_hftok_close(t->hf);
    memset(t, 0, sizeof *t);
}

/* ---- words ---------------------------------------------------------------------- */

static bool is_letter(unsigned char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
static bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* Length of the word piece at s (well-formed UTF-8): a space before a word,
 * number or mark joins it; letters (any non-ASCII character counts as one,
 * ' between two letters too), digits, or one character. */
static size_t word_piece(const unsigned char *s, size_t left) {
    size_t i = 0;
    if (s[0] == ' ' && left > 1 && s[1] != ' ' && s[1] != '\n') i = 1;
    unsigned char c = s[i];
    if (is_letter(c) || c >= 0x80) {
        while (i < left) {
            if (is_letter(s[i])) {
                i++;
            } else if (s[i] >= 0x80) {
                i += (size_t)utf8_len(s + i, left - i);
            } else if (s[i] == '\'' && i + 1 < left && is_letter(s[i + 1]) && i > 0 && is_letter(s[i - 1])) {
                i++;
            } else {
                break;
            }
        }
        return i;
    }
    if (is_digit(c)) {
        while (i < left && is_digit(s[i])) i++;
        return i;
    }
    return i + 1;
}

typedef struct counted {
    const char *s;
    uint32_t len;
    int64_t count, first;
} counted;

static int by_count(const void *a, const void *b) {
    const counted *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return x->first < y->first ? -1 : x->first > y->first;
}

/* The table twice as big, entries placed again; NULL (table freed) when out of memory. */
static counted *grow_table(counted *tab, uint32_t *size) {
    uint32_t big = *size * 2;
    counted *bigger = calloc(big, sizeof *bigger);
    for (uint32_t j = 0; bigger && j < *size; j++) {
        if (!tab[j].s) continue;
        uint32_t g = hash_bytes(tab[j].s, tab[j].len) & (big - 1);
        while (bigger[g].s) g = (g + 1) & (big - 1);
        bigger[g] = tab[j];
    }
    free(tab);
    *size = big;
    return bigger;
}

static ts_status build_words(ts_lmtok *t, const char *text, size_t len, int max_vocab) {
    if (max_vocab < 2) return ts_fail(TS_ERR_ARG, "--vocab %d: a word vocabulary needs <unk> and a word", max_vocab);
    /* count the pieces in a table of our own: (text offset, length) -> count */
    uint32_t size = 1u << 16, n = 0;
    counted *tab = calloc(size, sizeof *tab);
    ts_status st = tab ? TS_OK : ts_fail(TS_ERR_NOMEM, "tokenizer: out of memory");
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < len && !st;) {
        size_t k = word_piece(s + i, len - i);
        if ((n + 1) * 2 > size && !(tab = grow_table(tab, &size))) {
            st = ts_fail(TS_ERR_NOMEM, "tokenizer: out of memory");
            break;
        }
        uint32_t h = hash_bytes(text + i, k) & (size - 1);
        while (tab[h].s && !(tab[h].len == k && memcmp(tab[h].s, text + i, k) == 0)) h = (h + 1) & (size - 1);
        if (!tab[h].s) tab[h] = (counted){text + i, (uint32_t)k, 0, (int64_t)i}, n++;
        tab[h].count++;
        i += k;
    }
    if (!st) {
        uint32_t m = 0;
        for (uint32_t j = 0; j < size; j++)
            if (tab[j].s) tab[m++] = tab[j];
        qsort(tab, m, sizeof *tab, by_count);
        t->count = 1 + (int32_t)(m < (uint32_t)max_vocab - 1 ? m : (uint32_t)max_vocab - 1);
        t->piece = calloc((size_t)t->count, sizeof *t->piece);
        if (!t->piece) st = ts_fail(TS_ERR_NOMEM, "tokenizer: out of memory");
        if (!st && !(t->piece[0] = strdup(UNK))) st = ts_fail(TS_ERR_NOMEM, "tokenizer: out of memory");
        for (int32_t id = 1; !st && id < t->count; id++)
            if (!(t->piece[id] = strndup(tab[id - 1].s, tab[id - 1].len)))
                st = ts_fail(TS_ERR_NOMEM, "tokenizer: out of memory");
    }
    free(tab);
    return st;
}

/* ---- characters ------------------------------------------------------------------- */

static uint32_t code_point(const unsigned char *s, int n) {
    if (n == 1) return s[0];
    uint32_t c = s[0] & (0x7F >> n);
    for (int i = 1; i < n; i++) c = c << 6 | (s[i] & 0x3F);
    return c;
}

static int by_code_point(const void *a, const void *b) {
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    uint32_t p = code_point((const unsigned char *)x, (int)strlen(x)), q = code_point((const unsigned char *)y, (int)strlen(y));
    return p < q ? -1 : p > q;
}

static ts_status build_chars(ts_lmtok *t, const char *text, size_t len) {
    /* ASCII in a table, the rest found as they come (a corpus has few) */
    bool ascii[128] = {false};
    char **other = NULL;
    int n_other = 0, cap = 0;
    const unsigned char *s = (const unsigned char *)text;
    ts_status st = TS_OK;
    for (size_t i = 0; i < len && !st;) {
        int n = utf8_len(s + i, len - i);
        if (n == 1) {
            ascii[s[i]] = true;
        } else {
            bool known = false;
            for (int k = 0; k < n_other && !known; k++) known = strlen(other[k]) == (size_t)n && memcmp(other[k], s + i, (size_t)n) == 0;
            if (!known) {
                if (n_other == cap) {
                    cap = cap ? 2 * cap : 64;
                    char **bigger = realloc(other, sizeof *other * (size_t)cap);
                    if (!bigger) {
                        st = ts_fail(TS_ERR_NOMEM, "tokenizer: out of memory");
                        break;
                    }
                    other = bigger;
                }
                if (!(other[n_other++] = strndup(text + i, (size_t)n))) st = ts_fail(TS_ERR_NOMEM, "tokenizer: out of memory");
            }
        }
        i += (size_t)n;
    }
    int n_ascii = 0;
    for (int c = 0; c < 128; c++) n_ascii += ascii[c];
    if (!st) {
        t->count = n_ascii + n_other;
        t->piece = calloc((size_t)t->count + 1, sizeof *t->piece);
        if (!t->piece) st = ts_fail(TS_ERR_NOMEM, "tokenizer: out of memory");
    }
    int32_t id = 0;
    for (int c = 0; c < 128 && !st; c++) {
        if (!ascii[c]) continue;
        char one[2] = {(char)c, 0};
        if (!(t->piece[id++] = strdup(one))) st = ts_fail(TS_ERR_NOMEM, "tokenizer: out of memory");
    }
    if (!st) {
        if (n_other) qsort(other, (size_t)n_other, sizeof *other, by_code_point); /* NULL when ASCII only */
        for (int k = 0; k < n_other; k++) t->piece[id++] = other[k], other[k] = NULL;
    }
    for (int k = 0; k < n_other; k++) free(other[k]);
    free(other);
    return st;
}

ts_status ts_lmtok_build_bpe(ts_lmtok *t, const char *dir) {
    memset(t, 0, sizeof *t);
    t->kind = TS_LMTOK_BPE;
    ts_status st = ts_bpe_load(&t->bpe, dir);
    if (!st) t->count = ts_bpe_vocab_size(t->bpe);
    return st;
}

ts_status ts_lmtok_open_hf(ts_lmtok *t, const char *dir) {
    memset(t, 0, sizeof *t);
    t->kind = TS_LMTOK_HF;
    ts_status st = ts_hftok_open(&t->hf, dir);
    if (!st) t->count = ts_hftok_vocab_size(t->hf);
    return st;
}

ts_status ts_lmtok_build(ts_lmtok *t, ts_lmtok_kind kind, const char *text, size_t len, int max_vocab) {
    memset(t, 0, sizeof *t);
    t->kind = kind;
    ts_status st = TS_OK;
    if (kind == TS_LMTOK_HF) return ts_fail(TS_ERR_ARG, "a Hugging Face tokenizer is read from its folder, not built");
    if (kind == TS_LMTOK_BPE) {
        char dir[4096];
        st = ts_bpe_default_dir(dir, sizeof dir);
        return st ? st : ts_lmtok_build_bpe(t, dir);
    }
    if ((st = check_utf8(text, len))) return st;
    if (len == 0) return ts_fail(TS_ERR_ARG, "the text is empty: there is nothing to build a vocabulary from");
    const char *nul = memchr(text, '\0', len);
    if (nul) /* a piece is a C string: a NUL would be a token that can never be spelled */
        return ts_fail(TS_ERR_FORMAT, "the text has a NUL byte at offset %zu: it is binary, not text", (size_t)(nul - text));
    st = kind == TS_LMTOK_CHAR ? build_chars(t, text, len) : build_words(t, text, len, max_vocab);
    if (!st) st = index_pieces(t);
    if (st) ts_lmtok_free(t);
    return st;
}

/* ---- encode, decode ----------------------------------------------------------------- */

static bool push(ts_bpe_ids *out, int32_t id) {
    if (out->count == out->cap) {
        size_t cap = out->cap ? 2 * out->cap : 1024;
        int32_t *p = realloc(out->ids, sizeof(int32_t) * cap);
        if (!p) return false;
        out->ids = p, out->cap = cap;
    }
    out->ids[out->count++] = id;
    return true;
}

ts_status ts_lmtok_encode(ts_lmtok *t, const char *text, size_t len, ts_bpe_ids *out) {
    if (t->kind == TS_LMTOK_BPE) return ts_bpe_encode(t->bpe, text, len, out);
    if (t->kind == TS_LMTOK_HF) return ts_hftok_encode(t->hf, text, len, false, out);
    ts_status st = check_utf8(text, len);
    if (st) return st;
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        size_t n = t->kind == TS_LMTOK_CHAR ? (size_t)utf8_len(s + i, len - i) : word_piece(s + i, len - i);
        int32_t id = find(t, text + i, n);
        if (id < 0 && t->kind == TS_LMTOK_CHAR) {
            char label[64];
            ts_bpe_label(text + i, n, label, sizeof label);
            return ts_fail(TS_ERR_ARG, "the character '%s' at offset %zu is not in the model's vocabulary of %d "
                                       "characters",
                           label, i, (int)t->count);
        }
        if (!push(out, id < 0 ? 0 : id)) return ts_fail(TS_ERR_NOMEM, "tokenizer: out of memory");
        i += n;
    }
    return TS_OK;
}

ts_status ts_lmtok_decode(const ts_lmtok *t, const int32_t *ids, size_t n, char **text, size_t *len) {
    if (t->kind == TS_LMTOK_BPE) return ts_bpe_decode(t->bpe, ids, n, text, len);
    if (t->kind == TS_LMTOK_HF) return ts_hftok_decode(t->hf, ids, n, text, len);
    ts_text_buf b = {0};
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->count) {
            free(ts_text_buf_take(&b));
            return ts_fail(TS_ERR_ARG, "token id %d is outside the vocabulary [0, %d)", (int)ids[i], (int)t->count);
        }
        ts_text_buf_str(&b, t->piece[ids[i]]);
    }
    *len = b.len;
    *text = ts_text_buf_take(&b);
    if (!*text) return ts_fail(TS_ERR_NOMEM, "tokenizer: out of memory");
    return TS_OK;
}

int64_t ts_lmtok_chars(const ts_lmtok *t, const int32_t *ids, size_t n) {
    if (t->kind == TS_LMTOK_CHAR) return (int64_t)n;
    char *text = NULL;
    size_t len = 0;
    if (ts_lmtok_decode(t, ids, n, &text, &len)) return 0;
    int64_t chars = 0;
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < len; chars++) {
        int k = utf8_len(s + i, len - i);
        i += k ? (size_t)k : 1;
    }
    free(text);
    return chars;
}

size_t ts_lmtok_label(const ts_lmtok *t, int32_t id, char *buf, size_t cap) {
    if (t->kind == TS_LMTOK_BPE) return ts_bpe_token_label(t->bpe, id, buf, cap);
    if (t->kind == TS_LMTOK_HF) return ts_hftok_token_label(t->hf, id, buf, cap);
    if (t->count == 0) return (size_t)snprintf(buf, cap, "id %d", (int)id); /* no tokenizer: ids only */
    if (id < 0 || id >= t->count) return (size_t)snprintf(buf, cap, "<bad id %d>", (int)id);
    if (t->kind == TS_LMTOK_WORD && id == 0) return (size_t)snprintf(buf, cap, UNK);
    return ts_bpe_label(t->piece[id], strlen(t->piece[id]), buf, cap);
}

/* ---- JSON ------------------------------------------------------------------------------ */

char *ts_lmtok_to_json(const ts_lmtok *t) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "kind", ts_lmtok_kind_name(t->kind));
    if (t->kind == TS_LMTOK_BPE || t->kind == TS_LMTOK_HF) { /* hf: a record of it; it is read from its folder */
        cJSON_AddNumberToObject(o, "vocab", t->count);
    } else {
        cJSON *a = cJSON_AddArrayToObject(o, "tokens");
        for (int32_t i = 0; a && i < t->count; i++) cJSON_AddItemToArray(a, cJSON_CreateString(t->piece[i]));
    }
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}

ts_status ts_lmtok_from_json(ts_lmtok *t, const char *json) {
    memset(t, 0, sizeof *t);
    cJSON *o = NULL;
    const char *kind = NULL;
    ts_status st = ts_json_parse(json, strlen(json), "tokenizer", &o);
    if (!st) st = ts_json_string(o, "kind", "tokenizer", true, &kind);
    if (!st) st = ts_lmtok_kind_parse(kind, &t->kind);
    if (!st && t->kind == TS_LMTOK_BPE) {
        int64_t v = -1;
        st = ts_json_int(o, "vocab", "tokenizer", false, 1, INT32_MAX, &v);
        if (!st) st = ts_lmtok_build(t, TS_LMTOK_BPE, NULL, 0, 0);
        if (!st && v >= 0 && v != t->count) {
            st = ts_fail(TS_ERR_FORMAT, "tokenizer: the checkpoint was trained with a BPE of %lld tokens; the shipped "
                                        "one has %d",
                         (long long)v, (int)t->count);
            ts_lmtok_free(t);
        }
    } else if (!st) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "tokens");
        int n = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : 0;
        if (n < 1) st = ts_fail(TS_ERR_FORMAT, "tokenizer: the JSON has no \"tokens\" array");
        if (!st && !(t->piece = calloc((size_t)n, sizeof *t->piece))) st = ts_fail(TS_ERR_NOMEM, "out of memory");
        const cJSON *e;
        int i = 0;
        cJSON_ArrayForEach(e, a) {
            if (st) break;
            if (!cJSON_IsString(e) || !e->valuestring[0] || check_utf8(e->valuestring, strlen(e->valuestring))) {
                st = ts_fail(TS_ERR_FORMAT, "tokenizer: token %d is not a non-empty UTF-8 string", i);
                break;
            }
            if (t->kind == TS_LMTOK_CHAR &&
                utf8_len((const unsigned char *)e->valuestring, strlen(e->valuestring)) != (int)strlen(e->valuestring)) {
                st = ts_fail(TS_ERR_FORMAT, "tokenizer: token %d ('%s') of a char vocabulary is not one character", i,
                             e->valuestring);
                break;
            }
            if (!(t->piece[i] = strdup(e->valuestring))) st = ts_fail(TS_ERR_NOMEM, "out of memory");
            t->count = ++i;
        }
        if (!st) st = index_pieces(t);
        if (st) ts_lmtok_free(t);
    }
    cJSON_Delete(o);
    return st;
}
