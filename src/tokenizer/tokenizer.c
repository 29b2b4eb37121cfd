/* tokenizer: the word-level tokenizer of the toy sentences (tokenizer.h). */
#include "tscope/tokenizer.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const char *const special[TS_TOK_N_SPECIAL] = {"<pad>", "<bos>", "<eos>", "<unk>"};

static ts_status push_word(ts_tokenizer *tok, const char *word) {
    if (tok->count == tok->capacity) {
        int cap = tok->capacity ? tok->capacity * 2 : 32;
        char **grown = realloc(tok->words, sizeof *grown * (size_t)cap);
        if (!grown) return ts_fail(TS_ERR_NOMEM, "tokenizer: out of memory at %d words", tok->count);
        tok->words = grown;
        tok->capacity = cap;
    }
    char *copy = strdup(word);
    if (!copy) return ts_fail(TS_ERR_NOMEM, "tokenizer: out of memory at %d words", tok->count);
    tok->words[tok->count++] = copy;
    return TS_OK;
}

ts_status ts_tokenizer_init(ts_tokenizer *tok) {
    memset(tok, 0, sizeof *tok);
    for (int i = 0; i < TS_TOK_N_SPECIAL; i++) {
        ts_status st = push_word(tok, special[i]);
        if (st) {
            ts_tokenizer_free(tok);
            return st;
        }
    }
    return TS_OK;
}

void ts_tokenizer_free(ts_tokenizer *tok) {
    for (int i = 0; i < tok->count; i++) free(tok->words[i]);
    free(tok->words);
    memset(tok, 0, sizeof *tok);
}

static bool is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* Punctuation is every printable ASCII character that is not a letter or digit. */
static bool is_punct(unsigned char c) { return c < 0x80 && ispunct(c); }

/* Copy the next token of *text into word (lower-cased, cut at TS_TOKEN_MAX-1
 * bytes) and advance; false at the end of the text. */
static bool next_token(const char **text, char word[TS_TOKEN_MAX]) {
    const unsigned char *p = (const unsigned char *)*text;
    while (*p && is_space(*p)) p++;
    if (!*p) return false;
    int n = 0;
    if (is_punct(*p)) {
        word[n++] = (char)*p++;
    } else {
        for (; *p && !is_space(*p) && !is_punct(*p); p++)
            if (n < TS_TOKEN_MAX - 1) word[n++] = (char)(*p < 0x80 ? tolower(*p) : *p);
    }
    word[n] = '\0';
    *text = (const char *)p;
    return true;
}

bool ts_tokenizer_next(const char *text, size_t *at, char word[TS_TOKEN_MAX], size_t *start) {
    const char *p = text + *at;
    while (*p && is_space((unsigned char)*p)) p++;
    *start = (size_t)(p - text);
    if (!next_token(&p, word)) return false;
    *at = (size_t)(p - text);
    return true;
}

int32_t ts_tokenizer_id(const ts_tokenizer *tok, const char *word) {
    for (int i = 0; i < tok->count; i++)
        if (strcmp(tok->words[i], word) == 0) return i;
    return TS_TOK_UNK;
}

ts_status ts_tokenizer_add_text(ts_tokenizer *tok, const char *text) {
    char word[TS_TOKEN_MAX];
    while (next_token(&text, word)) {
        bool known = false;
        for (int i = TS_TOK_N_SPECIAL; i < tok->count && !known; i++) known = strcmp(tok->words[i], word) == 0;
        if (known) continue;
        ts_status st = push_word(tok, word);
        if (st) return st;
    }
    return TS_OK;
}

ts_status ts_tokenizer_encode(const ts_tokenizer *tok, const char *text, int32_t *ids, int max, int *n) {
    char word[TS_TOKEN_MAX];
    int count = 0;
    while (next_token(&text, word)) {
        if (count < max) {
            int32_t id = TS_TOK_UNK;
            /* Only words from the text map to ids; "<pad>" typed in a text is a word. */
            for (int i = TS_TOK_N_SPECIAL; i < tok->count; i++)
                if (strcmp(tok->words[i], word) == 0) {
                    id = i;
                    break;
                }
            ids[count] = id;
        }
        count++;
    }
    *n = count;
    return TS_OK;
}

const char *ts_tokenizer_special_name(int32_t id) {
    return id >= 0 && id < TS_TOK_N_SPECIAL ? special[id] : NULL;
}

const char *ts_tokenizer_word(const ts_tokenizer *tok, int32_t id) {
    if (id < 0 || id >= tok->count) return special[TS_TOK_UNK];
    return tok->words[id];
}
