/* lesson: narration blocks as Pango markup or plain text. Pango markup is
 * XML-like, so every piece of text is escaped; formulas ($d_k$) turn _x and ^x
 * into <sub>/<sup>, which is all the typesetting a narration needs. */
#include <stdlib.h>
#include <string.h>

#include "tscope/lesson.h"
#include "tscope/core.h"

static void put_escaped(ts_text_buf *o, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        switch (s[i]) {
        case '&': ts_text_buf_str(o, "&amp;"); break;
        case '<': ts_text_buf_str(o, "&lt;"); break;
        case '>': ts_text_buf_str(o, "&gt;"); break;
        case '"': ts_text_buf_str(o, "&quot;"); break;
        case '\'': ts_text_buf_str(o, "&apos;"); break;
        default: ts_text_buf_add(o, s + i, 1); break;
        }
    }
}

/* Bytes in the UTF-8 character starting at s (1 for stray bytes). */
static size_t char_len(const char *s, size_t n) {
    unsigned char c = (unsigned char)s[0];
    size_t k = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (k > n) return 1;
    for (size_t i = 1; i < k; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) return 1;
    return k;
}

/* d_k -> d<sub>k</sub>, x^{2i} -> x<sup>2i</sup>. Braces group; a lone _ or ^
 * at the end stays as written. */
static void put_math(ts_text_buf *o, const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        char c = s[i];
        if ((c == '_' || c == '^') && i + 1 < n) {
            const char *tag = c == '_' ? "sub" : "sup";
            size_t beg = i + 1, end;
            if (s[beg] == '{') {
                beg++;
                const char *close = memchr(s + beg, '}', n - beg);
                end = close ? (size_t)(close - s) : n;
                i = close ? end + 1 : n;
            } else {
                end = beg + char_len(s + beg, n - beg);
                i = end;
            }
            ts_text_buf_str(o, "<");
            ts_text_buf_str(o, tag);
            ts_text_buf_str(o, ">");
            put_escaped(o, s + beg, end - beg);
            ts_text_buf_str(o, "</");
            ts_text_buf_str(o, tag);
            ts_text_buf_str(o, ">");
            continue;
        }
        size_t k = char_len(s + i, n - i);
        put_escaped(o, s + i, k);
        i += k;
    }
}

static const struct {
    unsigned bit;
    const char *open, *close;
} styles[] = {
    {TS_LESSON_STRONG, "<b>", "</b>"},
    {TS_LESSON_EM, "<i>", "</i>"},
    {TS_LESSON_CODE, "<tt>", "</tt>"},
    {TS_LESSON_MATH, "<span font_family=\"serif\" style=\"italic\">", "</span>"},
    {TS_LESSON_LINK, "<u>", "</u>"},
};
#define N_STYLES (int)(sizeof styles / sizeof styles[0])

static ts_status finish(ts_text_buf *o, char **result) {
    *result = ts_text_buf_take(o);
    return *result ? TS_OK : ts_fail(TS_ERR_NOMEM, "lesson: out of memory");
}

ts_status ts_lesson_block_markup(const ts_lesson_block *b, char **result) {
    ts_text_buf o = {0};
    for (int r = 0; r < b->n_runs; r++) {
        const ts_lesson_run *run = &b->runs[r];
        for (int k = 0; k < N_STYLES; k++)
            if (run->style & styles[k].bit) ts_text_buf_str(&o, styles[k].open);
        if (run->style & TS_LESSON_MATH) put_math(&o, run->text, run->len);
        else put_escaped(&o, run->text, run->len);
        for (int k = N_STYLES - 1; k >= 0; k--)
            if (run->style & styles[k].bit) ts_text_buf_str(&o, styles[k].close);
    }
    return finish(&o, result);
}

ts_status ts_lesson_block_text(const ts_lesson_block *b, char **result) {
    ts_text_buf o = {0};
    for (int r = 0; r < b->n_runs; r++) ts_text_buf_add(&o, b->runs[r].text, b->runs[r].len);
    return finish(&o, result);
}
