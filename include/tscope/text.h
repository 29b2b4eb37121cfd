/* text: small string helpers that several modules print with.
 *
 * Kept here once so every "did you mean" and every file size reads the same
 * wherever it appears (trace writer, info, png, lessons).
 */
#ifndef TSCOPE_TEXT_H
#define TSCOPE_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Levenshtein distance between a and b; a large number when either is longer
 * than 255 bytes (names that long are never a typo of each other). */
int ts_text_edit_distance(const char *a, const char *b);

/* "1.50 GB", "12.3 MB", "4.0 KB" into buf; returns buf. */
char *ts_text_bytes(char *buf, size_t size, uint64_t n);

/* A string that grows as text is added (start from {0}). s is
 * NUL-terminated once anything was added. Out of memory, it stops growing
 * and says so in oom; ts_text_buf_take then gives NULL. */
typedef struct ts_text_buf {
    char *s;
    size_t len, cap;
    bool oom;
} ts_text_buf;

void ts_text_buf_add(ts_text_buf *b, const char *s, size_t n);
void ts_text_buf_str(ts_text_buf *b, const char *s);
void ts_text_buf_printf(ts_text_buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* The string ("" when nothing was added, NULL when out of memory), the
 * caller's to free; b is empty again. */
char *ts_text_buf_take(ts_text_buf *b);

#endif
