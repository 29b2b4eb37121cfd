/* text: small string helpers that several modules print with.
 *
 * Kept here once so every "did you mean" and every file size reads the same
 * wherever it appears (trace writer, info, png, lessons).
 */
#ifndef TSCOPE_TEXT_H
#define TSCOPE_TEXT_H

#include <stddef.h>
#include <stdint.h>

/* Levenshtein distance between a and b; a large number when either is longer
 * than 255 bytes (names that long are never a typo of each other). */
int ts_text_edit_distance(const char *a, const char *b);

/* "1.50 GB", "12.3 MB", "4.0 KB" into buf; returns buf. */
char *ts_text_bytes(char *buf, size_t size, uint64_t n);

#endif
