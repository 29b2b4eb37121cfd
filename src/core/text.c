/* text: edit distance, sizes in words, choice lists and a growing string. */
#include "tscope/core.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EDIT_MAX 255

int ts_text_edit_distance(const char *a, const char *b) {
    size_t n = strlen(a), m = strlen(b);
    if (n > EDIT_MAX || m > EDIT_MAX) return 1 << 20;
    int row[EDIT_MAX + 1]; /* one row of the DP table: distances to b's prefixes */
    for (size_t j = 0; j <= m; j++) row[j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= m; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[m];
}

int ts_text_columns(const char *s) {
    int n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80; /* count lead bytes, not continuations */
    return n;
}

char *ts_text_bytes(char *buf, size_t size, uint64_t n) {
    if (n >= (uint64_t)1 << 30)
        snprintf(buf, size, "%.2f GB", (double)n / (1 << 30));
    else if (n >= (uint64_t)1 << 20)
        snprintf(buf, size, "%.1f MB", (double)n / (1 << 20));
    else
        snprintf(buf, size, "%.1f KB", (double)n / 1024);
    return buf;
}

void ts_text_buf_add(ts_text_buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void ts_text_buf_str(ts_text_buf *b, const char *s) { ts_text_buf_add(b, s, strlen(s)); }

void ts_text_buf_printf(ts_text_buf *b, const char *fmt, ...) {
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n <= 0) return;
    if ((size_t)n < sizeof tmp) {
        ts_text_buf_add(b, tmp, (size_t)n);
        return;
    }
    /* longer than tmp: format again into a buffer of the right size, never cut */
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    ts_text_buf_add(b, big, (size_t)n);
    free(big);
}

char *ts_text_buf_take(ts_text_buf *b) {
    if (b->oom) {
        free(b->s);
        memset(b, 0, sizeof *b);
        return NULL;
    }
    char *s = b->s ? b->s : calloc(1, 1);
    memset(b, 0, sizeof *b);
    return s;
}

bool ts_text_in_choices(const char *choices, const char *word, size_t len) {
    for (const char *c = choices; *c;) {
        const char *bar = strchr(c, '|');
        size_t n = bar ? (size_t)(bar - c) : strlen(c);
        if (n == len && strncmp(c, word, n) == 0) return true;
        if (!bar) break;
        c = bar + 1;
    }
    return false;
}

const char *ts_text_int_prefix(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    if (!s) return NULL;
    const char *p = s;
    bool neg = *p == '-';
    if (neg) p++;
    if (*p < '0' || *p > '9') return NULL;
    uint64_t v = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (limit - d) / 10) return NULL; /* past int64: never wrapped round */
        v = v * 10 + d;
    }
    int64_t x = neg ? (v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v) : (int64_t)v;
    if (x < lo || x > hi) return NULL;
    *out = x;
    return p;
}

bool ts_text_int(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    if (s && *s == '+' && s[1] != '-') s++;
    int64_t x;
    const char *end = ts_text_int_prefix(s, lo, hi, &x);
    if (!end || *end) return false;
    *out = x;
    return true;
}

bool ts_text_range(const char *s, int64_t hi, bool single, int64_t *a, int64_t *b) {
    int64_t x, y;
    const char *end = ts_text_int_prefix(s, 0, hi, &x);
    if (!end) return false;
    if (*end == '\0' && single) y = x;
    else if (*end != '-' || !(end = ts_text_int_prefix(end + 1, 0, hi, &y)) || *end || y < x) return false;
    *a = x, *b = y;
    return true;
}

/* The length of the UTF-8 character at s (n bytes left), or 0 when it is not one. */
static size_t utf8_char(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (!len || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (c == 0xE0 && s[1] < 0xA0) return 0; /* overlong */
    if (c == 0xED && s[1] >= 0xA0) return 0; /* a surrogate */
    if (c == 0xF0 && s[1] < 0x90) return 0; /* overlong */
    if (c == 0xF4 && s[1] >= 0x90) return 0; /* past U+10FFFF */
    return len;
}

bool ts_text_utf8_valid(const char *s, size_t n, size_t *bad) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t len = utf8_char(u + i, n - i);
        if (!len) {
            if (bad) *bad = i;
            return false;
        }
        i += len;
    }
    return true;
}

char *ts_text_inert(char *buf, size_t size, const char *s) {
    if (!size) return buf;
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s), at = 0;
    for (size_t i = 0; i < n;) {
        char piece[8];
        size_t len = utf8_char(u + i, n - i), w;
        bool c1 = len == 2 && u[i] == 0xC2 && u[i + 1] < 0xA0; /* U+0080..U+009F */
        if (len == 1 && u[i] >= 0x20 && u[i] != 0x7F && u[i] != '\\') memcpy(piece, u + i, 1), w = 1;
        else if (len == 1 && u[i] == '\\') memcpy(piece, "\\\\", 2), w = 2;
        else if (len > 1 && !c1) memcpy(piece, u + i, len), w = len;
        else len = len ? len : 1, w = (size_t)snprintf(piece, sizeof piece, "\\x%02X", u[i]), len = c1 ? 1 : len;
        if (at + w + 4 > size) {
            snprintf(buf + (at + 4 <= size ? at : size > 4 ? size - 4 : 0), size > 4 ? 4 : size, "...");
            return buf;
        }
        memcpy(buf + at, piece, w);
        at += w;
        i += len;
    }
    buf[at] = '\0';
    return buf;
}
