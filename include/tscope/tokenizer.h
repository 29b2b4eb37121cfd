/* tokenizer: words to ids and back, simple enough to read in one sitting.
 *
 * Word level: the text is lower-cased (ASCII), split on white space, and every
 * punctuation character becomes a token of its own, so "My name is Goro." is
 * [my, name, is, goro, .]. Bytes >= 0x80 count as letters, so UTF-8 words stay
 * whole. The vocabulary is built from the texts themselves: the four special
 * tokens first, then each new word in order of first appearance.
 *
 *   id 0 <pad>  fills short sequences; keys there are masked out
 *   id 1 <bos>  starts the decoder's input (the text shifted right); seed 004's
 *               copy task uses 1 as its start token too
 *   id 2 <eos>  ends a sequence
 *   id 3 <unk>  a word the vocabulary does not hold
 *
 * Token strings are kept for the viewer's axis labels.
 */
#ifndef TSCOPE_TOKENIZER_H
#define TSCOPE_TOKENIZER_H

#include <stdint.h>

#include "tscope/core.h"

enum { TS_TOK_PAD = 0, TS_TOK_BOS = 1, TS_TOK_EOS = 2, TS_TOK_UNK = 3, TS_TOK_N_SPECIAL = 4 };

#define TS_TOKEN_MAX 64 /* longest token kept (longer words are cut) */

typedef struct ts_tokenizer {
    char **words; /* (count) id -> string, owned */
    int count;
    int capacity;
} ts_tokenizer;

/* An empty vocabulary holding the four special tokens. */
ts_status ts_tokenizer_init(ts_tokenizer *tok);
void ts_tokenizer_free(ts_tokenizer *tok);

/* Add every word of text that is not yet known. */
ts_status ts_tokenizer_add_text(ts_tokenizer *tok, const char *text);

/* Split text into ids (unknown words become <unk>). At most `max` ids are
 * written; *n gets how many tokens the text has (may exceed max). */
ts_status ts_tokenizer_encode(const ts_tokenizer *tok, const char *text, int32_t *ids, int max, int *n);

/* Id of a word (already lower-case), or TS_TOK_UNK. */
int32_t ts_tokenizer_id(const ts_tokenizer *tok, const char *word);

/* The string of an id, "<unk>" when out of range. */
const char *ts_tokenizer_word(const ts_tokenizer *tok, int32_t id);

#endif
