/* tokenizer: words to ids and back, simple enough to read in one sitting.
 * The word-level tokenizer of the toy tasks (ts_tokenizer_*, here first),
 * GPT-2's byte-level BPE (ts_bpe_*), a language model's tokenizer
 * (ts_lmtok_*), and the tokenizers of today's models read from their files
 * (ts_hftok_*: tokenizer.json, tokenizer.model, vocab.txt; at the end).
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

#include <stdbool.h>
#include <stddef.h>
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

/* The token of text at or after byte *at (the rule of encode: words, and
 * each punctuation mark alone), lower-cased into word; *start gets the byte
 * it starts at and *at moves past it. False when only spaces are left. */
bool ts_tokenizer_next(const char *text, size_t *at, char word[TS_TOKEN_MAX], size_t *start);

/* Id of a word (already lower-case), or TS_TOK_UNK. */
int32_t ts_tokenizer_id(const ts_tokenizer *tok, const char *word);

/* The string of an id, "<unk>" when out of range. */
const char *ts_tokenizer_word(const ts_tokenizer *tok, int32_t id);
/* The name of a special id ("<pad>", "<bos>", "<eos>", "<unk>"), NULL for
 * any other: what a picture calls the ids no word of a text stands for. */
const char *ts_tokenizer_special_name(int32_t id);

/* ---- GPT-2's byte-level BPE (src/tokenizer/bpe.c) ----
 *
 * The tokenizer of GPT-2 (and GPT-3's r50k), read from the two files OpenAI
 * published: encoder.json (token string -> id; Hugging Face calls it
 * vocab.json) and vocab.bpe (the merges in order, one "a b" a line after a
 * "#version" line; Hugging Face's merges.txt). Encoding:
 *   1. pre-tokenize: GPT-2's pattern cuts the text into words, each with its
 *      leading space ("Hello world" -> "Hello", " world");
 *   2. each word's UTF-8 bytes become one symbol each, and the merges join
 *      adjacent symbols, lowest rank first, until none applies;
 *   3. each symbol is a token: its id from encoder.json.
 * Token strings spell bytes as printable characters (bytes_to_unicode in
 * OpenAI's encoder.py): a space is "Ġ" (U+0120), a newline "Ċ" (U+010A).
 * Ids match the gpt-3-encoder npm package (tests/ref/bpe/, docs/tokenizers.md),
 * ill-formed UTF-8 included: it is read as Node's UTF-8 decoder reads it, each
 * bad part becoming U+FFFD, so only valid UTF-8 decodes back to the same bytes.
 * "<|endoftext|>" in a text is plain text, as in the reference.
 */
typedef struct ts_bpe ts_bpe;

/* Token ids that grow as they are added (start from {0}). */
typedef struct ts_bpe_ids {
    int32_t *ids; /* (count) */
    size_t count, cap;
} ts_bpe_ids;

void ts_bpe_ids_free(ts_bpe_ids *ids);

/* Read encoder.json (or vocab.json) and vocab.bpe (or merges.txt) from dir.
 * Every token must spell bytes, ids must run 0..n-1, and each merge must join
 * two tokens into a third; anything else is a format error naming the file. */
ts_status ts_bpe_load(ts_bpe **bpe, const char *dir);
void ts_bpe_free(ts_bpe *bpe);

/* The shipped GPT-2 files: $TSCOPE_ASSETS/gpt2 when that is set, else the
 * source tree's assets/gpt2 (compiled in, so it works from any directory). */
ts_status ts_bpe_default_dir(char *dir, size_t cap);

/* How many tokens there are (50257 for GPT-2). */
int32_t ts_bpe_vocab_size(const ts_bpe *bpe);

/* Append the ids of text[0..len) to out. Any bytes are accepted. Keeps a
 * cache of words seen, so a ts_bpe must not encode on two threads at once. */
ts_status ts_bpe_encode(ts_bpe *bpe, const char *text, size_t len, ts_bpe_ids *out);

/* The bytes of ids[0..n), back to back, into a new NUL-terminated string
 * (*text, the caller's to free; *len bytes, which may hold NULs or be
 * ill-formed UTF-8 when the ids cut a character). An id outside the
 * vocabulary is an argument error. */
ts_status ts_bpe_decode(const ts_bpe *bpe, const int32_t *ids, size_t n, char **text, size_t *len);

/* One token's bytes (not NUL-terminated; *len of them), or NULL for an id
 * outside the vocabulary. */
const char *ts_bpe_token_bytes(const ts_bpe *bpe, int32_t id, size_t *len);

/* One token's string as the vocabulary file spells it ("Ġthe"), or NULL. */
const char *ts_bpe_token_string(const ts_bpe *bpe, int32_t id);

/* A readable label of some bytes, for axes and listings: the text itself,
 * with a space as "␣", newline "↵", tab "⇥", carriage return "␍", other
 * control characters as their Unicode pictures (␀ ␁ ... ␡), and each byte
 * that is not part of a whole UTF-8 character as "\xE2". Written to buf like
 * snprintf (never cutting a character); returns the length the whole label
 * needs. */
size_t ts_bpe_label(const char *bytes, size_t len, char *buf, size_t cap);

/* The label of one token ("␣the"; "<bad id 70000>" outside the vocabulary). */
size_t ts_bpe_token_label(const ts_bpe *bpe, int32_t id, char *buf, size_t cap);

/* ---- a language model's tokenizer (src/tokenizer/lm_tok.c) ----
 *
 * What `tscope train --task lm` cuts its text into, and what a checkpoint
 * keeps so the model reloads without flags (ts_lmtok_to_json):
 *   char  one token per Unicode character; the vocabulary is every character
 *         of the corpus, in code point order. A text with a character the
 *         vocabulary lacks is refused, naming it (there is no <unk>).
 *   word  GPT-2-like pieces: a run of letters (with ' inside), a run of
 *         digits or one other character, each taking the one space before
 *         it (" God", ",", "\n"); the vocabulary is <unk> (id 0) and the
 *         most frequent pieces, so a text decodes back to itself when every
 *         piece is known. Unknown pieces become <unk>.
 *   bpe   GPT-2's byte-level BPE (ts_bpe, the shipped files): any text.
 * Ids are dense, 0..count-1.
 */
/* hf: a Hugging Face folder's own tokenizer (ts_hftok: tokenizer.json,
 * tokenizer.model or vocab.txt), read from the folder, never trained. */
typedef enum ts_lmtok_kind { TS_LMTOK_CHAR, TS_LMTOK_WORD, TS_LMTOK_BPE, TS_LMTOK_HF, TS_LMTOK_COUNT } ts_lmtok_kind;

const char *ts_lmtok_kind_name(ts_lmtok_kind k); /* "char", "word", "bpe", "hf" (parse takes the first three) */
ts_status ts_lmtok_kind_parse(const char *word, ts_lmtok_kind *out);

typedef struct ts_hftok ts_hftok; /* below */

typedef struct ts_lmtok {
    ts_lmtok_kind kind;
    int32_t count;    /* vocabulary size */
    char **piece;     /* (count) char and word: each token's bytes, NUL-terminated (owned) */
    int32_t *slots;   /* piece -> id, open addressing; -1 empty */
    uint32_t mask;
    ts_bpe *bpe;      /* bpe only (owned) */
    ts_hftok *hf;     /* hf only (owned) */
} ts_lmtok;

/* A vocabulary from a corpus (char: every character; word: <unk> and the
 * max_vocab - 1 most frequent pieces, ties in order of first appearance;
 * bpe: GPT-2's, text ignored). A corpus that is not UTF-8 is refused with
 * the offset of the first bad byte (char and word). */
ts_status ts_lmtok_build(ts_lmtok *t, ts_lmtok_kind kind, const char *text, size_t len, int max_vocab);
void ts_lmtok_free(ts_lmtok *t);

/* GPT-2's BPE from the vocabulary files in dir (ts_bpe_load). */
ts_status ts_lmtok_build_bpe(ts_lmtok *t, const char *dir);

/* A Hugging Face folder's tokenizer (kind hf): encode adds no special tokens
 * (as `tscope tokenize` without --special). */
ts_status ts_lmtok_open_hf(ts_lmtok *t, const char *dir);

/* Append the ids of text[0..len) to out. */
ts_status ts_lmtok_encode(ts_lmtok *t, const char *text, size_t len, ts_bpe_ids *out);

/* The text of ids[0..n) (malloc'd, NUL-terminated, *len bytes). An id
 * outside the vocabulary is an argument error. */
ts_status ts_lmtok_decode(const ts_lmtok *t, const int32_t *ids, size_t n, char **text, size_t *len);

/* Characters (UTF-8 sequences; each bad byte one) that ids[0..n) decode to:
 * the denominator of bits per character. */
int64_t ts_lmtok_chars(const ts_lmtok *t, const int32_t *ids, size_t n);

/* A readable label of one token for axes (ts_bpe_label's style: "␣God", "↵"). */
size_t ts_lmtok_label(const ts_lmtok *t, int32_t id, char *buf, size_t cap);

/* The tokenizer as JSON, {"kind": "char", "tokens": ["\n", " ", ...]} (bpe:
 * {"kind": "bpe", "vocab": 50257}), malloc'd; and back (bpe: the shipped
 * files, whose size must match). */
char *ts_lmtok_to_json(const ts_lmtok *t);
ts_status ts_lmtok_from_json(ts_lmtok *t, const char *json);

/* ---- the tokenizers of today's models (src/tokenizer/hftok.c and beside) ----
 *
 * One tokenizer read from whatever a model's directory holds, first found:
 *   tokenizer.json   Hugging Face's: a BPE over bytes (GPT-2, GPT-NeoX/Pythia,
 *                    Llama 3) or a WordPiece (BERT), with the normalizers,
 *                    pre-tokenizers, added tokens and post-processors those
 *                    files use (docs/tokenizers.md lists them); any other
 *                    model type or component is refused, naming it;
 *   tokenizer.model  SentencePiece's protobuf (Llama 2, Gemma): BPE with byte
 *                    fallback (Unigram is refused);
 *   vocab.txt        BERT's WordPiece vocabulary (lower-cased unless a
 *                    tokenizer_config.json beside it says "do_lower_case": false);
 *   encoder.json + vocab.bpe (or vocab.json + merges.txt): GPT-2's (ts_bpe).
 * Ids match Hugging Face's @huggingface/tokenizers and python3-sentencepiece
 * on the fixtures of tests/ref/tokenizers/. Text that is not UTF-8 is read
 * with each ill-formed part as U+FFFD.
 */

ts_status ts_hftok_open(ts_hftok **t, const char *dir);
void ts_hftok_close(ts_hftok *t);

/* What was read, in words: "tokenizer.json (BPE, byte-level)", ... */
const char *ts_hftok_kind(const ts_hftok *t);
int32_t ts_hftok_vocab_size(const ts_hftok *t);

/* Append the ids of text[0..len) to out. With add_special, the tokens the
 * tokenizer's post-processor adds around a text (Llama 3's
 * <|begin_of_text|>, BERT's [CLS] and [SEP], SentencePiece's <s>), as
 * Hugging Face's encode does by default; without, the text's ids alone (so
 * the ids of two texts are the ids of the texts joined, when no token
 * crosses the join). Added tokens in the text ("<|endoftext|>", "[SEP]")
 * are their ids either way. Not for two threads at once. */
ts_status ts_hftok_encode(ts_hftok *t, const char *text, size_t len, bool add_special, ts_bpe_ids *out);

/* The text of ids[0..n) (malloc'd, NUL-terminated, *len bytes): each token's
 * bytes back to back (byte-level BPE, SentencePiece: its U+2581 as spaces,
 * byte pieces as bytes, the dummy prefix's space dropped, control pieces as
 * nothing); WordPiece joins words with spaces, "##" pieces to the one
 * before, and tidies " ." to "." as Hugging Face's decoder does. An id
 * outside the vocabulary is an argument error. */
ts_status ts_hftok_decode(const ts_hftok *t, const int32_t *ids, size_t n, char **text, size_t *len);

/* What one id decodes to (not NUL-terminated, *len bytes), or NULL outside the vocabulary. */
const char *ts_hftok_token_bytes(const ts_hftok *t, int32_t id, size_t *len);

/* A readable label of one id (ts_bpe_label's style: "␣the", "##ing",
 * "<|begin_of_text|>", "<s>"); "<bad id N>" outside the vocabulary. */
size_t ts_hftok_token_label(const ts_hftok *t, int32_t id, char *buf, size_t cap);

#endif
