/* lesson_narration: the narration of a lesson, built from md4c's callbacks:
 * paragraphs, headings, lists, quotes, code and math, each placed on its
 * source line through md4c's text pointers into our buffer. See
 * lesson_parser.h. */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lesson_parser.h"

/* ------------------------------------------------------------- narration */

static ts_lesson_block *new_block(parser *p, ts_lesson_block_kind kind) {
    ts_lesson_narration *nar = lp_narration(p, p->cur);
    ts_lesson_block *b = lp_grow(&nar->blocks, &nar->n_blocks, sizeof *b);
    if (!b) {
        lp_oom(p);
        return NULL;
    }
    b->kind = kind;
    b->depth = p->n_lists;
    b->quote = p->quote;
    p->open = nar->n_blocks - 1;
    p->item_fresh = false;
    return b;
}

static ts_lesson_block *open_block(parser *p) {
    if (p->open < 0) return NULL;
    return &lp_narration(p, p->cur)->blocks[p->open];
}

static unsigned current_style(const parser *p) {
    unsigned s = 0;
    if (p->em) s |= TS_LESSON_EM;
    if (p->strong) s |= TS_LESSON_STRONG;
    if (p->code || p->in_code) s |= TS_LESSON_CODE;
    if (p->math) s |= TS_LESSON_MATH;
    if (p->display) s |= TS_LESSON_MATH | TS_LESSON_DISPLAY;
    if (p->link) s |= TS_LESSON_LINK;
    return s;
}

static ts_status append_text(parser *p, const char *s, size_t n) {
    if (n == 0) return TS_OK;
    ts_lesson_block *b = open_block(p);
    if (!b && !(b = new_block(p, TS_LESSON_PARA))) return p->st;
    unsigned style = current_style(p);
    ts_lesson_run *r = b->n_runs ? &b->runs[b->n_runs - 1] : NULL;
    if (!r || r->style != style) {
        if (!(r = lp_grow(&b->runs, &b->n_runs, sizeof *r))) return lp_oom(p);
        r->style = style;
    }
    /* The text's capacity is the next power of two above its length, so a
     * paragraph that arrives in thousands of pieces grows in linear time. */
    size_t cap = 16;
    while (r->text && cap < r->len + 1) cap *= 2;
    if (!r->text || r->len + n + 1 > cap) {
        while (cap < r->len + n + 1) cap *= 2;
        char *t = realloc(r->text, cap);
        if (!t) return lp_oom(p);
        r->text = t;
    }
    memcpy(r->text + r->len, s, n);
    r->len += n;
    r->text[r->len] = '\0';
    return TS_OK;
}

/* Write code point cp as UTF-8 into out (4 bytes); returns the length. */
static size_t utf8(unsigned long cp, char *out) {
    if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* "&amp;", "&#955;", "&#x3bb;": the few named entities a lesson would use,
 * and every numeric one, decoded into out (4 bytes); 0 for others, which stay
 * as written. */
static size_t decode_entity(const char *s, size_t n, char *out) {
    static const struct {
        const char *name;
        unsigned long cp;
    } named[] = {{"&amp;", '&'},      {"&lt;", '<'},        {"&gt;", '>'},       {"&quot;", '"'},
                 {"&apos;", '\''},    {"&nbsp;", 0xA0},     {"&times;", 0xD7},   {"&middot;", 0xB7},
                 {"&radic;", 0x221A}, {"&sum;", 0x2211},    {"&minus;", 0x2212}, {"&infin;", 0x221E},
                 {"&asymp;", 0x2248}, {"&rarr;", 0x2192},   {"&larr;", 0x2190},  {"&hellip;", 0x2026},
                 {"&mdash;", 0x2014}, {"&ndash;", 0x2013},  {"&le;", 0x2264},    {"&ge;", 0x2265}};
    if (n >= 4 && s[1] == '#') {
        bool hex = s[2] == 'x' || s[2] == 'X';
        unsigned long cp = 0;
        for (size_t i = hex ? 3 : 2; i + 1 < n; i++) {
            int c = (unsigned char)s[i];
            int digit = isdigit(c) ? c - '0' : hex && isxdigit(c) ? (tolower(c) - 'a' + 10) : -1;
            if (digit < 0) break;
            cp = cp * (hex ? 16 : 10) + (unsigned long)digit;
            if (cp > 0x10FFFF) cp = 0x110000;
        }
        return utf8(cp, out);
    }
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (strlen(named[i].name) == n && memcmp(named[i].name, s, n) == 0) return utf8(named[i].cp, out);
    return 0;
}

static ts_status append_entity(parser *p, const char *s, size_t n) {
    char buf[4];
    size_t k = decode_entity(s, n, buf);
    return k ? append_text(p, buf, k) : append_text(p, s, n);
}

static void note_position(parser *p, const char *s, size_t n) {
    long off = lp_doc_offset(p, s);
    if (off < 0) return;
    if ((size_t)off + n > p->cursor) p->cursor = (size_t)off + n;
    if (p->in_code && p->first_off < 0) p->first_off = off;
    ts_lesson_block *b = open_block(p);
    if (b && b->line == 0) b->line = lp_line_of(p, (size_t)off);
}

/* A formula is plain text with Unicode symbols; LaTeX commands would show up
 * as backslashes in the picture, so they are refused here. */
static ts_status check_math(parser *p, const char *s, size_t n) {
    const char *bs = memchr(s, '\\', n);
    if (!bs) return TS_OK;
    long off = lp_doc_offset(p, bs);
    int line = off >= 0 ? lp_line_of(p, (size_t)off) : lp_line_of(p, p->cursor);
    return lp_fail_line(p, line, "a formula is plain text with Unicode symbols (write √ and ·, not \\sqrt or \\cdot)");
}

int lp_on_text(MD_TEXTTYPE type, const MD_CHAR *s, MD_SIZE n, void *user) {
    parser *p = user;
    if (p->skip_depth) return 0;
    note_position(p, s, n);
    if (p->title_state == 1) {
        if (type == MD_TEXT_SOFTBR || type == MD_TEXT_BR) ts_text_buf_add(&p->title, " ", 1);
        else if (type == MD_TEXT_NULLCHAR) ts_text_buf_str(&p->title, "\xEF\xBF\xBD");
        else if (type == MD_TEXT_ENTITY) {
            char buf[4];
            size_t k = decode_entity(s, n, buf);
            if (k) ts_text_buf_add(&p->title, buf, k);
            else ts_text_buf_add(&p->title, s, n);
        } else ts_text_buf_add(&p->title, s, n);
        return p->title.oom ? (lp_oom(p), 1) : 0;
    }
    switch (type) {
    case MD_TEXT_SOFTBR: append_text(p, " ", 1); break;
    case MD_TEXT_BR: append_text(p, "\n", 1); break;
    case MD_TEXT_NULLCHAR: append_text(p, "\xEF\xBF\xBD", 3); break;
    case MD_TEXT_ENTITY: append_entity(p, s, n); break;
    case MD_TEXT_LATEXMATH:
        if (check_math(p, s, n) == TS_OK) append_text(p, s, n);
        break;
    default: append_text(p, s, n); break;
    }
    return p->st != TS_OK;
}

static void start_list_item(parser *p) {
    ts_lesson_block *b = new_block(p, TS_LESSON_ITEM);
    if (!b) return;
    int level = p->n_lists - 1;
    if (level >= 0 && level < MAX_LIST_DEPTH && p->lists[level].ordered)
        snprintf(b->marker, sizeof b->marker, "%u.", p->lists[level].next++);
    else
        snprintf(b->marker, sizeof b->marker, "\xE2\x80\xA2");
    p->item_fresh = true;
}

static void start_code(parser *p, const MD_BLOCK_CODE_DETAIL *d, bool top) {
    if (!new_block(p, TS_LESSON_CODE_BLOCK)) return;
    p->in_code = true;
    p->fence_char = d->fence_char;
    p->code_top = top;
    p->info_off = d->info.text ? lp_doc_offset(p, d->info.text) : -1;
    p->first_off = -1;
    p->code_cursor = p->cursor;
}

int lp_on_enter_block(MD_BLOCKTYPE type, void *detail, void *user) {
    parser *p = user;
    bool top = p->depth == 1;
    p->depth++;
    if (type == MD_BLOCK_DOC || p->skip_depth) return 0;
    if (top && ++p->n_top == 1) {
        if (type != MD_BLOCK_H || ((MD_BLOCK_H_DETAIL *)detail)->level != 1) {
            int line = p->body;
            while (line < p->n_lines && lp_blank_line(p, line)) line++;
            lp_fail_line(p, line, "a lesson begins with its title as a '# Title' heading");
            return 1;
        }
        p->title_state = 1;
        return 0;
    }
    switch (type) {
    case MD_BLOCK_CODE: {
        MD_BLOCK_CODE_DETAIL *d = detail;
        if (d->fence_char && d->lang.size == 6 && d->lang.text && memcmp(d->lang.text, "tscope", 6) == 0) {
            p->skip_depth = p->depth;
            lp_tscope_block(p, d, top);
        } else {
            start_code(p, d, top);
        }
        break;
    }
    case MD_BLOCK_P:
        if (p->item_fresh && open_block(p)) p->item_fresh = false;
        else new_block(p, TS_LESSON_PARA);
        break;
    case MD_BLOCK_H: {
        ts_lesson_block *b = new_block(p, TS_LESSON_HEADING);
        if (b) b->level = (int)((MD_BLOCK_H_DETAIL *)detail)->level;
        break;
    }
    case MD_BLOCK_UL:
    case MD_BLOCK_OL:
        if (p->n_lists < MAX_LIST_DEPTH) {
            p->lists[p->n_lists].ordered = type == MD_BLOCK_OL;
            p->lists[p->n_lists].next = type == MD_BLOCK_OL ? ((MD_BLOCK_OL_DETAIL *)detail)->start : 0;
        }
        p->n_lists++;
        p->open = -1;
        break;
    case MD_BLOCK_LI: start_list_item(p); break;
    case MD_BLOCK_QUOTE:
        p->quote++;
        p->open = -1;
        break;
    case MD_BLOCK_HR:
        new_block(p, TS_LESSON_RULE);
        p->open = -1;
        break;
    default: break;
    }
    return p->st != TS_OK;
}

/* Where a narration code block's opening fence is: its info string, else the
 * fence line above its first line of text, else the next fence after what came
 * before it (an empty block). */
static int code_fence_line(parser *p) {
    if (p->info_off >= 0) return lp_line_of(p, (size_t)p->info_off);
    int floor_line = lp_line_of(p, p->code_cursor);
    if (p->first_off >= 0) {
        for (int line = lp_line_of(p, (size_t)p->first_off) - 1; line >= floor_line && line >= 1; line--)
            if (lp_is_opening_fence(p, line, p->fence_char)) return line;
    }
    /* the cursor is the end of what came before: the fence is on a later line */
    for (int line = p->code_cursor ? floor_line + 1 : 1; line <= p->n_lines; line++)
        if (lp_is_opening_fence(p, line, p->fence_char)) return line;
    return 0;
}

static void end_code(parser *p) {
    p->in_code = false;
    ts_lesson_block *b = open_block(p);
    if (b && b->n_runs) {
        ts_lesson_run *r = &b->runs[b->n_runs - 1];
        if (r->len && r->text[r->len - 1] == '\n') r->text[--r->len] = '\0';
    }
    if (!p->code_top || !p->fence_char) return;
    int first = code_fence_line(p);
    if (first == 0) return;
    int last = lp_closing_fence(p, first, p->fence_char);
    if (last == 0) {
        lp_fail_line(p, first, "unclosed %c%c%c block (no closing fence before the end of the file)", p->fence_char,
                  p->fence_char, p->fence_char);
        return;
    }
    lp_move_cursor_past(p, last);
}

/* A paragraph holding only a $$display formula$$ is a formula block. */
static void end_paragraph(parser *p) {
    ts_lesson_block *b = open_block(p);
    if (!b || b->kind != TS_LESSON_PARA) return;
    int display = 0, other = 0;
    for (int i = 0; i < b->n_runs; i++) {
        if (b->runs[i].style & TS_LESSON_DISPLAY) display++;
        else if (strspn(b->runs[i].text, " \n") != strlen(b->runs[i].text)) other++;
    }
    if (display == 1 && other == 0) {
        b->kind = TS_LESSON_FORMULA;
        int keep = 0;
        for (int i = 0; i < b->n_runs; i++) {
            if (b->runs[i].style & TS_LESSON_DISPLAY) b->runs[keep++] = b->runs[i];
            else free(b->runs[i].text);
        }
        b->n_runs = keep;
    }
}

void lp_end_title(parser *p) {
    p->title_state = 2;
    p->title_last = lp_line_of(p, p->cursor ? p->cursor - 1 : 0);
    /* A setext title (Title / =====) ends on its underline. */
    if (p->title_last < p->n_lines) {
        const char *s;
        size_t n;
        lp_line_text(p, p->title_last + 1, &s, &n);
        size_t i = 0;
        while (i < n && s[i] == ' ') i++;
        if (i < n && s[i] == '=') p->title_last++;
    }
}

int lp_on_leave_block(MD_BLOCKTYPE type, void *detail, void *user) {
    parser *p = user;
    (void)detail;
    p->depth--;
    if (p->skip_depth) {
        if (p->depth < p->skip_depth) p->skip_depth = 0;
        return p->st != TS_OK;
    }
    switch (type) {
    case MD_BLOCK_H:
        if (p->title_state == 1) lp_end_title(p);
        p->open = -1;
        break;
    case MD_BLOCK_CODE:
        end_code(p);
        p->open = -1;
        break;
    case MD_BLOCK_P:
        end_paragraph(p);
        p->open = -1;
        break;
    case MD_BLOCK_LI:
        p->open = -1;
        p->item_fresh = false;
        break;
    case MD_BLOCK_UL:
    case MD_BLOCK_OL:
        p->n_lists--;
        p->open = -1;
        break;
    case MD_BLOCK_QUOTE:
        p->quote--;
        p->open = -1;
        break;
    default: break;
    }
    return p->st != TS_OK;
}

int lp_on_enter_span(MD_SPANTYPE type, void *detail, void *user) {
    parser *p = user;
    (void)detail;
    switch (type) {
    case MD_SPAN_EM: p->em++; break;
    case MD_SPAN_STRONG: p->strong++; break;
    case MD_SPAN_CODE: p->code++; break;
    case MD_SPAN_LATEXMATH: p->math++; break;
    case MD_SPAN_LATEXMATH_DISPLAY: p->display++; break;
    case MD_SPAN_A:
    case MD_SPAN_IMG: p->link++; break;
    default: break;
    }
    return 0;
}

int lp_on_leave_span(MD_SPANTYPE type, void *detail, void *user) {
    parser *p = user;
    (void)detail;
    switch (type) {
    case MD_SPAN_EM: p->em--; break;
    case MD_SPAN_STRONG: p->strong--; break;
    case MD_SPAN_CODE: p->code--; break;
    case MD_SPAN_LATEXMATH: p->math--; break;
    case MD_SPAN_LATEXMATH_DISPLAY: p->display--; break;
    case MD_SPAN_A:
    case MD_SPAN_IMG: p->link--; break;
    default: break;
    }
    return 0;
}
