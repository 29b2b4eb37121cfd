/* tok_unicode: NFD, NFC, lower case and character classes over the tables of
 * tok_unicode_data.c, for the normalizers of tokenizer.json and BERT. */
#include <stdlib.h>
#include <string.h>

#include "bpe_impl.h"
#include "tok_impl.h"

enum { SBASE = 0xAC00, LBASE = 0x1100, VBASE = 0x1161, TBASE = 0x11A7, LCOUNT = 19, VCOUNT = 21, TCOUNT = 28 };
enum { NCOUNT = VCOUNT * TCOUNT, SCOUNT = LCOUNT * NCOUNT };

bool tok_cps_push(tok_cps *c, uint32_t cp) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        uint32_t *p = realloc(c->cp, cap * sizeof *p);
        if (!p) return false;
        c->cp = p;
        c->cap = cap;
    }
    c->cp[c->n++] = cp;
    return true;
}

void tok_cps_free(tok_cps *c) {
    free(c->cp);
    *c = (tok_cps){0};
}

bool tok_utf8_decode(const uint8_t *s, size_t n, tok_cps *out) {
    for (size_t i = 0; i < n;) {
        uint8_t b = s[i];
        uint32_t cp;
        size_t len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
        if (i + len > n) len = n - i; /* never for well-formed input */
        if (len == 1) cp = b;
        else if (len == 2) cp = (uint32_t)(b & 0x1F) << 6 | (s[i + 1] & 0x3F);
        else if (len == 3) cp = (uint32_t)(b & 0x0F) << 12 | (uint32_t)(s[i + 1] & 0x3F) << 6 | (s[i + 2] & 0x3F);
        else cp = (uint32_t)(b & 0x07) << 18 | (uint32_t)(s[i + 1] & 0x3F) << 12 | (uint32_t)(s[i + 2] & 0x3F) << 6 | (s[i + 3] & 0x3F);
        if (!tok_cps_push(out, cp)) return false;
        i += len;
    }
    return true;
}

size_t tok_utf8_put(uint32_t cp, uint8_t *o) {
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (uint8_t)(0xC0 | cp >> 6);
        o[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | cp >> 12);
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | cp >> 18);
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

char *tok_utf8_encode(const uint32_t *cp, size_t n, size_t *len) {
    uint8_t *buf = malloc(4 * n + 1);
    if (!buf) return NULL;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) at += tok_utf8_put(cp[i], buf + at);
    buf[at] = '\0';
    *len = at;
    return (char *)buf;
}

static uint32_t range_value(const tok_range *r, int count, uint32_t cp) {
    int lo = 0, hi = count - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < r[mid].lo) hi = mid - 1;
        else if (cp > r[mid].hi) lo = mid + 1;
        else return r[mid].value;
    }
    return 0;
}

unsigned tok_flags_of(uint32_t cp) { return range_value(tok_flags, tok_n_flags, cp); }
static unsigned ccc_of(uint32_t cp) { return cp < 0x300 ? 0 : range_value(tok_cccs, tok_n_cccs, cp); }

bool tok_is_white_space(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

bool tok_is_js_space(uint32_t cp) { return ts_bpe_char_class(cp) == TS_BPE_SPACE; }

/* The entry of cp in a table sorted by cp, or NULL. */
static const tok_decomp *find_cp(const tok_decomp *t, int count, uint32_t cp) {
    int lo = 0, hi = count - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < t[mid].cp) hi = mid - 1;
        else if (cp > t[mid].cp) lo = mid + 1;
        else return &t[mid];
    }
    return NULL;
}

static bool decompose(uint32_t cp, tok_cps *out) {
    if (cp >= SBASE && cp < SBASE + SCOUNT) {
        uint32_t s = cp - SBASE;
        if (!tok_cps_push(out, LBASE + s / NCOUNT) || !tok_cps_push(out, VBASE + (s % NCOUNT) / TCOUNT)) return false;
        return s % TCOUNT == 0 || tok_cps_push(out, TBASE + s % TCOUNT);
    }
    const tok_decomp *d = cp < 0xC0 ? NULL : find_cp(tok_decomps, tok_n_decomps, cp);
    if (!d) return tok_cps_push(out, cp);
    if (!decompose(d->a, out)) return false;
    return d->b == 0 || decompose(d->b, out);
}

static int by_key(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Sort n non-starters by combining class, keeping their order within a class. */
static bool sort_run(uint32_t *cp, size_t n) {
    bool sorted = true;
    for (size_t k = 1; k < n && sorted; k++) sorted = ccc_of(cp[k - 1]) <= ccc_of(cp[k]);
    if (sorted) return true;
    uint64_t *key = malloc(n * sizeof *key);
    if (!key) return false;
    for (size_t k = 0; k < n; k++) key[k] = (uint64_t)ccc_of(cp[k]) << 53 | (uint64_t)k << 21 | cp[k];
    qsort(key, n, sizeof *key, by_key);
    for (size_t k = 0; k < n; k++) cp[k] = (uint32_t)(key[k] & 0x1FFFFF);
    free(key);
    return true;
}

bool tok_nfd(tok_cps *c) {
    tok_cps out = {0};
    for (size_t i = 0; i < c->n; i++)
        if (!decompose(c->cp[i], &out)) {
            tok_cps_free(&out);
            return false;
        }
    /* canonical order: a stable sort of each run of non-starters by class
     * (by class and position, so a long hostile run costs n log n) */
    for (size_t i = 0; i < out.n;) {
        if (!ccc_of(out.cp[i])) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < out.n && ccc_of(out.cp[j])) j++;
        if (j - i > 1 && !sort_run(out.cp + i, j - i)) {
            tok_cps_free(&out);
            return false;
        }
        i = j;
    }
    tok_cps_free(c);
    *c = out;
    return true;
}

static uint32_t compose_pair(uint32_t a, uint32_t b) {
    if (a >= LBASE && a < LBASE + LCOUNT && b >= VBASE && b < VBASE + VCOUNT)
        return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
    if (a >= SBASE && a < SBASE + SCOUNT && (a - SBASE) % TCOUNT == 0 && b > TBASE && b < TBASE + TCOUNT)
        return a + (b - TBASE);
    int lo = 0, hi = tok_n_comps - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        const tok_decomp *e = &tok_comps[mid];
        if (a < e->a || (a == e->a && b < e->b)) hi = mid - 1;
        else if (a > e->a || b > e->b) lo = mid + 1;
        else return e->cp;
    }
    return 0;
}

bool tok_nfc(tok_cps *c) {
    if (!tok_nfd(c)) return false;
    if (c->n == 0) return true;
    size_t starter = 0, out = 1;
    bool have_starter = ccc_of(c->cp[0]) == 0;
    unsigned last_ccc = have_starter ? 0 : 256;
    for (size_t i = 1; i < c->n; i++) {
        uint32_t x = c->cp[i];
        unsigned k = ccc_of(x);
        uint32_t comp = have_starter && (last_ccc < k || (last_ccc == 0 && out == starter + 1))
                            ? compose_pair(c->cp[starter], x)
                            : 0;
        if (comp) {
            c->cp[starter] = comp;
            continue;
        }
        if (k == 0) {
            starter = out;
            have_starter = true;
        }
        last_ccc = k;
        c->cp[out++] = x;
    }
    c->n = out;
    return true;
}

/* Unicode's Final_Sigma: a cased letter before (case-ignorables skipped), none after. */
static bool final_sigma(const uint32_t *cp, size_t n, size_t i) {
    size_t j = i;
    bool before = false;
    while (j > 0) {
        unsigned f = tok_flags_of(cp[--j]);
        if (f & TOK_F_CASE_IGN) continue;
        before = (f & TOK_F_CASED) != 0;
        break;
    }
    if (!before) return false;
    for (j = i + 1; j < n; j++) {
        unsigned f = tok_flags_of(cp[j]);
        if (f & TOK_F_CASE_IGN) continue;
        return !(f & TOK_F_CASED);
    }
    return true;
}

bool tok_lower(tok_cps *c) {
    tok_cps out = {0};
    for (size_t i = 0; i < c->n; i++) {
        uint32_t x = c->cp[i];
        bool ok;
        if (x < 0x80) {
            ok = tok_cps_push(&out, x >= 'A' && x <= 'Z' ? x + 32 : x);
        } else if (x == 0x3A3) {
            ok = tok_cps_push(&out, final_sigma(c->cp, c->n, i) ? 0x3C2 : 0x3C3);
        } else {
            const tok_decomp *l = find_cp(tok_lowers, tok_n_lowers, x);
            ok = !l ? tok_cps_push(&out, x) : tok_cps_push(&out, l->a) && (!l->b || tok_cps_push(&out, l->b));
        }
        if (!ok) {
            tok_cps_free(&out);
            return false;
        }
    }
    tok_cps_free(c);
    *c = out;
    return true;
}

void tok_strip_mn(tok_cps *c) {
    size_t o = 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->cp[i] < 0x300 || !(tok_flags_of(c->cp[i]) & TOK_F_MN)) c->cp[o++] = c->cp[i];
    c->n = o;
}
