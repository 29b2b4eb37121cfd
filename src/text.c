#include "tscope/text.h"

#include <stdio.h>
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

char *ts_text_bytes(char *buf, size_t size, uint64_t n) {
    if (n >= (uint64_t)1 << 30)
        snprintf(buf, size, "%.2f GB", (double)n / (1 << 30));
    else if (n >= (uint64_t)1 << 20)
        snprintf(buf, size, "%.1f MB", (double)n / (1 << 20));
    else
        snprintf(buf, size, "%.1f KB", (double)n / 1024);
    return buf;
}
