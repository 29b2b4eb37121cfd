/* bpe_split: GPT-2's pre-tokenizer, written out by hand instead of a regex.
 *
 * The pattern (OpenAI's encoder.py, as the gpt-3-encoder package runs it with
 * JavaScript's /u flag):
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * At each position the first alternative that matches wins, and each is
 * greedy, so the match is decided by the class of one or two code points:
 *   - an apostrophe followed by s t m d, or re ve ll (lower case only): that;
 *   - an optional U+0020 and then a run of letters, of numbers, or of "other";
 *   - a run of spaces: all of it at the end of the text, else all but its last
 *     code point (that one goes with the word after it), or the single space
 *     when the run is one code point long.
 * JavaScript's \s is WhiteSpace + LineTerminator of ECMAScript: TAB VT FF SP
 * NBSP U+FEFF, every Zs, and LF CR U+2028 U+2029. Not U+0085 nor U+180E
 * (Python's `regex`, which the original GPT-2 used, differs there).
 */
#include "bpe_impl.h"

ts_bpe_class ts_bpe_char_class(uint32_t cp) {
    if (cp < 0x80) {
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return TS_BPE_LETTER;
        if (cp >= '0' && cp <= '9') return TS_BPE_NUMBER;
        if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return TS_BPE_SPACE;
        return TS_BPE_OTHER;
    }
    /* ECMAScript's additions to the Zs spaces of the table */
    if (cp == 0xFEFF || cp == 0x2028 || cp == 0x2029) return TS_BPE_SPACE;
    int lo = 0, hi = ts_bpe_n_ranges - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < ts_bpe_ranges[mid].lo) hi = mid - 1;
        else if (cp > ts_bpe_ranges[mid].hi) lo = mid + 1;
        else return (ts_bpe_class)ts_bpe_ranges[mid].cls;
    }
    return TS_BPE_OTHER;
}

/* ---- UTF-8 ---- */

/* Bounds of the second byte per lead byte, as in Unicode's table 3-7. */
size_t ts_bpe_utf8_len(const uint8_t *s, size_t n) {
    uint8_t b = s[0];
    if (b < 0x80) return 1;
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) len = 2;
    else if (b >= 0xE0 && b <= 0xEF) {
        len = 3;
        if (b == 0xE0) lo = 0xA0; /* no overlong forms */
        if (b == 0xED) hi = 0x9F; /* no surrogates */
    } else if (b >= 0xF0 && b <= 0xF4) {
        len = 4;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F; /* nothing past U+10FFFF */
    } else
        return 0;
    if (n < 2 || s[1] < lo || s[1] > hi) return 0;
    for (size_t k = 2; k < len; k++)
        if (k >= n || (s[k] & 0xC0) != 0x80) return 0;
    return len;
}

/* How many bytes of an ill-formed sequence at s[0..n) make one maximal
 * subpart (replaced by one U+FFFD): the lead byte and the continuation bytes
 * that were still acceptable when the sequence broke off. */
static size_t utf8_bad_len(const uint8_t *s, size_t n) {
    uint8_t b = s[0];
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) len = 2;
    else if (b >= 0xE0 && b <= 0xEF) {
        len = 3;
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        len = 4;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;
    } else
        return 1; /* 0x80..0xC1, 0xF5..0xFF: never a lead byte */
    size_t k = 1;
    if (k < n && s[1] >= lo && s[1] <= hi) {
        k = 2;
        while (k < len && k < n && (s[k] & 0xC0) == 0x80) k++;
    }
    return k;
}

bool ts_bpe_utf8_valid(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t len = ts_bpe_utf8_len(s + i, n - i);
        if (len == 0) return false;
        i += len;
    }
    return true;
}

size_t ts_bpe_utf8_replace(const uint8_t *s, size_t n, uint8_t *out) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t len = ts_bpe_utf8_len(s + i, n - i);
        if (len) {
            for (size_t k = 0; k < len; k++) out[o++] = s[i + k];
            i += len;
        } else {
            out[o++] = 0xEF; /* U+FFFD */
            out[o++] = 0xBF;
            out[o++] = 0xBD;
            i += utf8_bad_len(s + i, n - i);
        }
    }
    return o;
}

/* The code point at s[i] of well-formed UTF-8, and its length in *len. */
static uint32_t decode_at(const uint8_t *s, size_t i, size_t *len) {
    uint8_t b = s[i];
    if (b < 0x80) {
        *len = 1;
        return b;
    }
    if (b < 0xE0) {
        *len = 2;
        return (uint32_t)(b & 0x1F) << 6 | (s[i + 1] & 0x3F);
    }
    if (b < 0xF0) {
        *len = 3;
        return (uint32_t)(b & 0x0F) << 12 | (uint32_t)(s[i + 1] & 0x3F) << 6 | (s[i + 2] & 0x3F);
    }
    *len = 4;
    return (uint32_t)(b & 0x07) << 18 | (uint32_t)(s[i + 1] & 0x3F) << 12 | (uint32_t)(s[i + 2] & 0x3F) << 6 |
           (s[i + 3] & 0x3F);
}

/* The class of the code point at s[i] (i < n) and its length. */
static ts_bpe_class class_at(const uint8_t *s, size_t i, size_t *len) {
    return ts_bpe_char_class(decode_at(s, i, len));
}

/* The end of the run of code points of class c that starts at i. */
static size_t run_end(const uint8_t *s, size_t n, size_t i, ts_bpe_class c) {
    while (i < n) {
        size_t len;
        if (class_at(s, i, &len) != c) break;
        i += len;
    }
    return i;
}

/* 's 't 'm 'd 're 've 'll at s[i] (an apostrophe): its length, or 0. */
static size_t contraction(const uint8_t *s, size_t n, size_t i) {
    if (i + 1 >= n) return 0;
    uint8_t a = s[i + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (i + 2 >= n) return 0;
    uint8_t b = s[i + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

size_t ts_bpe_split_next(const uint8_t *s, size_t n, size_t i) {
    if (s[i] == '\'') {
        size_t k = contraction(s, n, i);
        if (k) return i + k;
    }
    size_t len;
    ts_bpe_class c = class_at(s, i, &len);
    size_t start = i; /* where the run of one class begins */
    if (s[i] == ' ' && i + 1 < n) {
        size_t len2;
        ts_bpe_class c2 = class_at(s, i + 1, &len2);
        if (c2 != TS_BPE_SPACE) { /* " ?" takes the space, the run follows */
            c = c2;
            start = i + 1;
        }
    }
    if (c != TS_BPE_SPACE) return run_end(s, n, start, c);
    /* \s+(?!\S) then \s+ */
    size_t last = i, j = i; /* last: where the run's final code point starts */
    while (j < n) {
        size_t l;
        if (class_at(s, j, &l) != TS_BPE_SPACE) break;
        last = j;
        j += l;
    }
    if (j == n || last == i) return j; /* at the end, or a single space */
    return last;
}
