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
