/* hf_split: the pre-tokenizers of tokenizer.json files written by hand, as
 * bpe_split.c does GPT-2's: Llama 3's Split pattern, GPT-2's pattern as a
 * Split, and BERT's pre-tokenizer. They work on code points. In a Split
 * pattern \s is Unicode's White_Space, as Oniguruma (the Rust tokenizers) and
 * @huggingface/tokenizers read it: U+0085 is a space there, U+FEFF is not. */
#include "bpe_impl.h"
#include "tok_impl.h"

static ts_bpe_class cls(uint32_t cp) {
    if (tok_is_white_space(cp)) return TS_BPE_SPACE;
    ts_bpe_class c = ts_bpe_char_class(cp);
    return c == TS_BPE_SPACE ? TS_BPE_OTHER : c; /* U+FEFF */
}

static bool is_nl(uint32_t cp) { return cp == '\r' || cp == '\n'; }

static size_t run(const uint32_t *cp, size_t n, size_t i, ts_bpe_class c) {
    while (i < n && cls(cp[i]) == c) i++;
    return i;
}

/* 's 't 'm 'd 're 've 'll, either case, at cp[i] == '\'': its length or 0. */
static size_t contraction(const uint32_t *cp, size_t n, size_t i, bool any_case) {
    if (i + 1 >= n) return 0;
    uint32_t a = cp[i + 1], b = i + 2 < n ? cp[i + 2] : 0;
    if (any_case) {
        if (a < 0x80) a |= 0x20;
        if (b < 0x80) b |= 0x20;
    }
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

/* \s+(?!\S) then \s+ at a space */
static size_t space_run(const uint32_t *cp, size_t n, size_t i) {
    size_t j = run(cp, n, i, TS_BPE_SPACE);
    if (j == n || j - i == 1) return j;
    return j - 1;
}

size_t tok_split_llama3(const uint32_t *cp, size_t n, size_t i) {
    if (cp[i] == '\'') {
        size_t k = contraction(cp, n, i, true);
        if (k) return i + k;
    }
    ts_bpe_class c = cls(cp[i]);
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (c == TS_BPE_LETTER) return run(cp, n, i, TS_BPE_LETTER);
    if (c != TS_BPE_NUMBER && !is_nl(cp[i]) && i + 1 < n && cls(cp[i + 1]) == TS_BPE_LETTER)
        return run(cp, n, i + 1, TS_BPE_LETTER);
    /* \p{N}{1,3} */
    if (c == TS_BPE_NUMBER) {
        size_t j = i;
        while (j < n && j < i + 3 && cls(cp[j]) == TS_BPE_NUMBER) j++;
        return j;
    }
    /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
    size_t s = cp[i] == ' ' && i + 1 < n && cls(cp[i + 1]) == TS_BPE_OTHER ? i + 1 : i;
    if (cls(cp[s]) == TS_BPE_OTHER) {
        size_t j = run(cp, n, s, TS_BPE_OTHER);
        while (j < n && is_nl(cp[j])) j++;
        return j;
    }
    /* \s*[\r\n]+ : up to the last line break of the run of spaces */
    size_t j = run(cp, n, i, TS_BPE_SPACE), last = n;
    for (size_t k = i; k < j; k++)
        if (is_nl(cp[k])) last = k;
    if (last != n) return last + 1;
    return space_run(cp, n, i);
}

size_t tok_split_gpt2(const uint32_t *cp, size_t n, size_t i) {
    if (cp[i] == '\'') {
        size_t k = contraction(cp, n, i, false);
        if (k) return i + k;
    }
    ts_bpe_class c = cls(cp[i]);
    size_t start = i;
    if (cp[i] == ' ' && i + 1 < n && cls(cp[i + 1]) != TS_BPE_SPACE) {
        c = cls(cp[i + 1]);
        start = i + 1;
    }
    if (c != TS_BPE_SPACE) return run(cp, n, start, c);
    return space_run(cp, n, i);
}

bool tok_is_bert_punct(uint32_t cp) {
    if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126))
        return true;
    return cp >= 0x80 && (tok_flags_of(cp) & TOK_F_PUNCT);
}

bool tok_split_bert(const uint32_t *cp, size_t n, size_t *i, size_t *start, size_t *end) {
    size_t k = *i;
    while (k < n && tok_is_js_space(cp[k])) k++;
    if (k == n) return false;
    *start = k;
    if (tok_is_bert_punct(cp[k])) {
        *end = *i = k + 1;
        return true;
    }
    while (k < n && !tok_is_js_space(cp[k]) && !tok_is_bert_punct(cp[k])) k++;
    *end = *i = k;
    return true;
}
