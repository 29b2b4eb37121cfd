/* tok_impl: what the readers of tokenizer.json (hf_json.c), tokenizer.model
 * (spm.c) and vocab.txt share: the Unicode tables and operations
 * (tok_unicode.c over tok_unicode_data.c), a vocabulary (bytes -> id) and the
 * merge engine (tok_merge.c), the pre-tokenizers written by hand
 * (hf_split.c), and the tokenizer itself (struct ts_hftok, hftok.c). Not
 * public. */
#ifndef TSCOPE_TOK_IMPL_H
#define TSCOPE_TOK_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tscope/tokenizer.h"

/* ---- open-addressing tables (bpe.c's and tok_merge.c's) ---- */
static inline uint32_t tok_hash_bytes(const void *bytes, size_t n) {
    const uint8_t *s = bytes;
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 16777619u;
    return h;
}

static inline uint32_t tok_hash_u64(uint64_t k) { /* a pair of ids -> a slot */
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (uint32_t)k;
}

/* The smallest power of two >= 2n (a table at most half full). */
static inline uint32_t tok_table_size(size_t n) {
    uint32_t s = 16;
    while (s < 2 * n) s *= 2;
    return s;
}

/* ---- tok_unicode_data.c (scripts/gen-tok-unicode.py) ---- */
typedef struct tok_decomp {
    uint32_t cp, a, b; /* cp -> a b (b 0: one code point) */
} tok_decomp;
typedef struct tok_range {
    uint32_t lo, hi, value; /* inclusive */
} tok_range;
extern const tok_decomp tok_decomps[]; /* canonical, one level, by cp */
extern const int tok_n_decomps;
extern const tok_decomp tok_comps[]; /* primary composites: {composite, first, second}, by (first, second) */
extern const int tok_n_comps;
extern const tok_range tok_cccs[]; /* canonical combining class, nonzero ones */
extern const int tok_n_cccs;
extern const tok_range tok_flags[]; /* TOK_F_* */
extern const int tok_n_flags;
extern const tok_decomp tok_lowers[]; /* lower case: cp -> a [b] */
extern const int tok_n_lowers;
extern const char tok_unicode_version[];

enum {
    TOK_F_ZS = 1,        /* space separator */
    TOK_F_CONTROL = 2,   /* Cc Cf Co Cs */
    TOK_F_PUNCT = 4,     /* P* */
    TOK_F_MN = 8,        /* non-spacing mark */
    TOK_F_CASED = 16,    /* for the final sigma */
    TOK_F_CASE_IGN = 32, /* case-ignorable, for the final sigma */
};

/* ---- tok_unicode.c ---- */
/* Code points, grown as needed (start from {0}). */
typedef struct tok_cps {
    uint32_t *cp;
    size_t n, cap;
} tok_cps;
bool tok_cps_push(tok_cps *c, uint32_t cp);
void tok_cps_free(tok_cps *c);
/* Well-formed UTF-8 into code points (appended). */
bool tok_utf8_decode(const uint8_t *s, size_t n, tok_cps *out);
/* Code points into UTF-8 (a new NUL-terminated buffer, *len bytes). */
char *tok_utf8_encode(const uint32_t *cp, size_t n, size_t *len);
size_t tok_utf8_put(uint32_t cp, uint8_t *out); /* 1..4 bytes */
unsigned tok_flags_of(uint32_t cp);
bool tok_is_white_space(uint32_t cp); /* Unicode White_Space (Oniguruma's \s) */
bool tok_is_js_space(uint32_t cp);    /* JavaScript's \s */
/* In place: NFD, NFC, JavaScript's toLowerCase (final sigma included),
 * removing non-spacing marks; false out of memory. */
bool tok_nfd(tok_cps *c);
bool tok_nfc(tok_cps *c);
bool tok_lower(tok_cps *c);
void tok_strip_mn(tok_cps *c);

/* ---- tok_merge.c: a vocabulary and a merge table ---- */
typedef struct tok_vocab {
    int32_t n;           /* ids 0..n-1 */
    char **tok;          /* (n) the key bytes of each id (NUL-terminated; NULL: none) */
    uint32_t *len;       /* (n) */
    int32_t *slots;      /* open addressing; -1 empty */
    uint32_t mask;
} tok_vocab;
/* An empty vocabulary of n ids (each set with tok_vocab_set). */
bool tok_vocab_init(tok_vocab *v, int32_t n);
/* Give id its bytes; false when the id has some already (*dup), or out of memory. */
bool tok_vocab_set(tok_vocab *v, int32_t id, const char *s, size_t len);
/* Index every id's bytes; false when two ids share them (*dup gets the second). */
bool tok_vocab_index(tok_vocab *v, int32_t *dup);
int32_t tok_vocab_find(const tok_vocab *v, const char *s, size_t len);
void tok_vocab_free(tok_vocab *v);

typedef struct tok_merge_slot {
    uint64_t key; /* (left << 32 | right) + 1; 0 empty */
    int32_t rank, merged;
} tok_merge_slot;
typedef struct tok_merges {
    tok_merge_slot *slots;
    uint32_t mask;
    int32_t count;
} tok_merges;
bool tok_merges_init(tok_merges *m, size_t expected);
/* Add (left, right) -> merged at rank; a pair given twice keeps its first. */
void tok_merges_add(tok_merges *m, int32_t left, int32_t right, int32_t rank, int32_t merged);
const tok_merge_slot *tok_merges_find(const tok_merges *m, int32_t left, int32_t right);
void tok_merges_free(tok_merges *m);
/* Merge the symbols sym[0..n) in place, the lowest rank first and of equal
 * ranks the leftmost; a negative symbol never merges. *n gets the count left. */
bool tok_merge_run(const tok_merges *m, int32_t *sym, size_t *n);

/* ---- hf_split.c: pre-tokenizers by hand ---- */
/* The end of the match of Llama 3's pattern at cp[i] (i < n):
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *    ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * with \s Unicode's White_Space. */
size_t tok_split_llama3(const uint32_t *cp, size_t n, size_t i);
/* GPT-2's pattern on code points with \s Unicode's White_Space (a Split). */
size_t tok_split_gpt2(const uint32_t *cp, size_t n, size_t i);
/* BertPreTokenizer: the next word at or after *i (a run of neither space
 * nor punctuation, or one punctuation mark); false when none is left. */
bool tok_split_bert(const uint32_t *cp, size_t n, size_t *i, size_t *start, size_t *end);
bool tok_is_bert_punct(uint32_t cp);

#endif

/* ---- the tokenizer (hftok.c, hf_json.c, spm.c) ---- */
enum { TOK_BPE_JSON, TOK_WORDPIECE_JSON, TOK_WORDPIECE_TXT, TOK_SPM, TOK_GPT2 };
enum { NORM_NFC, NORM_NFD, NORM_LOWER, NORM_STRIP_MN, NORM_BERT };
enum { PRE_BYTELEVEL, PRE_SPLIT_LLAMA3, PRE_SPLIT_GPT2, PRE_BERT };
#define TOK_MAX_STEPS 8
#define TOK_MAX_SPECIAL 4

typedef struct tok_step {
    int op;
    bool prefix_space, use_regex, removed;           /* ByteLevel, Split */
    bool clean, chinese, lower, strip;               /* BertNormalizer */
} tok_step;

typedef struct tok_added {
    char *s; /* content, UTF-8 */
    size_t len;
    int32_t id;
    bool normalized, lstrip, rstrip;
} tok_added;

struct ts_hftok {
    int kind;
    char kind_name[96];
    int32_t n_vocab;
    tok_vocab vocab;  /* the model's tokens: bytes (byte-level BPE), strings (WordPiece, SentencePiece) */
    char **dec;       /* (n_vocab) what each id decodes to */
    uint32_t *dec_len;
    uint8_t *special; /* (n_vocab) 1: an added special token or a control piece, labelled as itself */
    tok_merges merges;
    int32_t byte_id[256]; /* byte-level: the one-byte tokens; SentencePiece: <0xXX>, -1 none */
    bool ignore_merges, byte_level;
    tok_step norm[TOK_MAX_STEPS], pre[TOK_MAX_STEPS];
    int n_norm, n_pre;
    tok_added *added;
    int n_added;
    uint8_t added_first[2][256]; /* [normalized][byte]: an added token starts with it (set at first encode) */
    bool added_indexed;
    size_t longest; /* the longest token's bytes (set at first encode) */
    /* byte-level BPE: ids of pieces seen (hftok.c), so a word's merges run once */
    struct tok_cache *cache;
    int32_t head[TOK_MAX_SPECIAL], tail[TOK_MAX_SPECIAL]; /* added by encode's add_special */
    int n_head, n_tail;
    /* WordPiece */
    int32_t unk_id;
    char prefix[16];
    int max_chars;
    bool cleanup;
    /* SentencePiece */
    bool add_dummy_prefix, remove_extra_ws, escape_ws, byte_fallback;
    /* GPT-2's own files */
    ts_bpe *gpt2;
};

/* Fill t from dir's file (t->kind_name and the rest); t is zeroed first. */
ts_status tok_load_json(ts_hftok *t, const char *path);
ts_status tok_load_vocab_txt(ts_hftok *t, const char *path, const char *dir);
ts_status tok_load_spm(ts_hftok *t, const char *path);
/* A tokenizer.model from memory (the fuzz target's way in); path names it in messages. */
ts_status tok_load_spm_bytes(ts_hftok *t, const uint8_t *data, size_t size, const char *path);
/* An empty tokenizer (no ids, byte ids and unk -1), or NULL out of memory. */
ts_hftok *tok_new(void);
ts_status tok_read_file(const char *path, char **data, size_t *len);
/* The ids of one stretch of SentencePiece text (no added tokens in it). */
ts_status tok_spm_encode(ts_hftok *t, const uint8_t *s, size_t n, ts_bpe_ids *out);
bool tok_ids_push(ts_bpe_ids *ids, int32_t id);
/* SentencePiece's normalization (extra spaces, dummy prefix, U+2581), malloc'd. */
char *tok_spm_normalize(const ts_hftok *t, const uint8_t *s, size_t n, size_t *len);
/* n ids of vocabulary, decoded strings and flags, all empty. */
ts_status tok_vocab_alloc(ts_hftok *t, int32_t n, const char *path);
