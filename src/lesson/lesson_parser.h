/* lesson_parser: what the lesson parser's files share (private to src/lesson/).
 *
 * Parsing a lesson is one job split for size across three files that need
 * each other: lesson.c holds the parser's state, the source lines, the
 * checks made once the whole file is read, and the API; lesson_keys.c the
 * `tscope` blocks, their keys and the checks of each value;
 * lesson_narration.c the narration, from md4c's callbacks.
 */
#ifndef TSCOPE_LESSON_PARSER_H
#define TSCOPE_LESSON_PARSER_H

#include <md4c.h>
#include <stdbool.h>
#include <stddef.h>

#include "tscope/core.h"
#include "tscope/lesson.h"

#define MAX_LIST_DEPTH 16

/* A top-level tscope block: its lines, and which narration the text after it
 * belongs to (-1: the introduction, k: step k). */
typedef struct span {
    int first, last;
    int narration_after;
} span;

typedef struct parser {
    ts_lesson *lesson;
    const char *text;
    size_t len;
    size_t *line_start; /* (n_lines + 1): offsets where lines begin, then len */
    int n_lines;
    ts_status st;       /* the first failure */
    int depth;          /* blocks open, the document included */
    int n_top;          /* top-level blocks seen */
    int body;           /* the first line after the front matter (1 when there is none) */
    int title_state;    /* 0 before the title, 1 inside it, 2 after */
    ts_text_buf title;
    int title_last;     /* last line of the title heading */
    int skip_depth;     /* > 0: inside a tscope block, whose text md4c also reports */
    int cur;            /* narration receiving blocks: -1 intro, k step k */
    int open;           /* block receiving text in the current narration, or -1 */
    bool item_fresh;    /* the open ITEM still waits for its first paragraph */
    struct {
        bool ordered;
        unsigned next;
    } lists[MAX_LIST_DEPTH];
    int n_lists;        /* may exceed MAX_LIST_DEPTH; markers stop at the limit */
    int quote;
    int em, strong, code, math, display, link;
    /* the narration code block being read */
    bool in_code;
    char fence_char;
    bool code_top;
    long info_off;      /* offset of its info string in the text, or -1 */
    long first_off;     /* offset of its first line of text, or -1 */
    size_t code_cursor; /* the cursor when it began */
    size_t cursor;      /* end of the last text seen that lies in the document */
    span *spans;
    int n_spans;
    ts_text_buf problems; /* every problem found, "PATH:LINE: message" a line */
    int n_problems;
    int block_problems;   /* n_problems when the current block began */
} parser;

/* ---- lesson.c: state and lines ---- */

ts_lesson_narration *lp_narration(parser *p, int which); /* -1: the introduction, k: step k */
/* "PATH:LINE: message" as the parser's failure (the first one sticks). */
ts_status lp_fail_line(parser *p, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* A problem that does not stop the parse: recorded with the others, so that
 * `tscope lesson --check` lists every one in one run; returns TS_ERR_FORMAT
 * (p->st stays as it was). */
ts_status lp_problem(parser *p, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
ts_status lp_oom(parser *p);
/* Grow the array *arr_ptr (of *n items of `size` bytes) by one zeroed item. */
void *lp_grow(void *arr_ptr, int *n, size_t size);
int lp_line_of(const parser *p, size_t off);                         /* 1-based line of an offset */
void lp_line_text(const parser *p, int line, const char **s, size_t *n);
void lp_move_cursor_past(parser *p, int line);
long lp_doc_offset(const parser *p, const char *s);                  /* -1: not in the document */
bool lp_blank_line(const parser *p, int line);
bool lp_is_opening_fence(const parser *p, int line, char c);
int lp_closing_fence(const parser *p, int open, char c);

/* ---- lesson_keys.c: tscope blocks ---- */

bool lp_setup_key_train_only(const char *key); /* a key only `command: train` takes */
bool lp_setup_key_repeats(const char *key);    /* a key that may be given more than once (text) */
const ts_lesson_kv *lp_find_kv(const ts_lesson_kv *kvs, int n, const char *key);
/* The front matter's lines [first, last] (between the `---` lines before the title). */
ts_status lp_front_matter(parser *p, int first, int last);
/* A `tscope` block (a setup or a step) at the top level, or nested (an error). */
ts_status lp_tscope_block(parser *p, const MD_BLOCK_CODE_DETAIL *d, bool top);

/* ---- lesson_narration.c: the narration, md4c's callbacks ---- */

void lp_end_title(parser *p);
int lp_on_enter_block(MD_BLOCKTYPE type, void *detail, void *user);
int lp_on_leave_block(MD_BLOCKTYPE type, void *detail, void *user);
int lp_on_enter_span(MD_SPANTYPE type, void *detail, void *user);
int lp_on_leave_span(MD_SPANTYPE type, void *detail, void *user);
int lp_on_text(MD_TEXTTYPE type, const MD_CHAR *s, MD_SIZE n, void *user);

#endif
