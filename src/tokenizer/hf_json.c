/* hf_json: a Hugging Face tokenizer.json read into a ts_hftok, and BERT's
 * vocab.txt read into the same pipeline. What is supported is what GPT-2,
 * GPT-NeoX (Pythia), Llama 3 and BERT's files use (docs/tokenizers.md); any
 * other model type, normalizer, pre-tokenizer, post-processor, decoder or
 * Split pattern is refused with one line naming it, never tokenized some
 * other way. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "tok_impl.h"

#define MAX_FILE_BYTES ((size_t)1 << 30)
#define MAX_VOCAB (1 << 24)

/* The two Split patterns recognised, as tokenizer.json spells them. */
static const char LLAMA3_PATTERN[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char GPT2_PATTERN[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

ts_status tok_read_file(const char *path, char **data, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return ts_fail(TS_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    ts_text_buf b = {0};
    char chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0 && b.len <= MAX_FILE_BYTES) ts_text_buf_add(&b, chunk, got);
    bool failed = ferror(f);
    int err = errno;
    fclose(f);
    if (failed || b.oom || b.len > MAX_FILE_BYTES) {
        free(b.s);
        if (failed) return ts_fail(TS_ERR_IO, "%s: cannot read: %s", path, strerror(err));
        if (b.oom) return ts_fail(TS_ERR_NOMEM, "%s: out of memory reading it", path);
        return ts_fail(TS_ERR_FORMAT, "%s: larger than %zu MB, not a tokenizer file", path, MAX_FILE_BYTES >> 20);
    }
    *data = b.s ? b.s : calloc(1, 1);
    *len = b.len;
    return *data ? TS_OK : ts_fail(TS_ERR_NOMEM, "out of memory");
}

/* ---- small typed getters (null counts as absent: tokenizer.json writes null for unset) ---- */

static const cJSON *get(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

static ts_status get_bool(const cJSON *o, const char *key, const char *what, bool dflt, bool *out) {
    const cJSON *v = get(o, key);
    if (!v) {
        *out = dflt;
        return TS_OK;
    }
    char q[80];
    if (!cJSON_IsBool(v))
        return ts_fail(TS_ERR_FORMAT, "%s: \"%s\" is %s, not true or false", what, key, ts_json_quote(v, q, sizeof q));
    *out = cJSON_IsTrue(v);
    return TS_OK;
}

static ts_status get_string(const cJSON *o, const char *key, const char *what, const char **out) {
    const cJSON *v = get(o, key);
    *out = NULL;
    if (!v) return TS_OK;
    char q[80];
    if (!cJSON_IsString(v))
        return ts_fail(TS_ERR_FORMAT, "%s: \"%s\" is %s, not a string", what, key, ts_json_quote(v, q, sizeof q));
    *out = v->valuestring;
    return TS_OK;
}

static ts_status get_type(const cJSON *o, const char *what, const char **type) {
    char q[80];
    if (!cJSON_IsObject(o)) return ts_fail(TS_ERR_FORMAT, "%s is %s, not an object", what, ts_json_quote(o, q, sizeof q));
    TS_TRY(get_string(o, "type", what, type));
    if (!*type) return ts_fail(TS_ERR_FORMAT, "%s has no \"type\"", what);
    return TS_OK;
}

static bool whole(const cJSON *v, double lo, double hi) {
    return cJSON_IsNumber(v) && v->valuedouble >= lo && v->valuedouble <= hi && v->valuedouble == (double)(int64_t)v->valuedouble;
}

/* ---- byte-level spelling: GPT-2's bytes_to_unicode ---- */

static void byte_chars(int16_t lookup[512]) {
    for (int i = 0; i < 512; i++) lookup[i] = -1;
    int next = 256;
    for (int c = 0; c < 256; c++) {
        bool printable = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
        lookup[printable ? c : next++] = (int16_t)c;
    }
}

/* A token string of byte characters into bytes (out: strlen(s) room); -1 when a character stands for no byte. */
static long spelled_bytes(const char *s, uint8_t *out, const int16_t *lookup) {
    const uint8_t *p = (const uint8_t *)s;
    long n = 0;
    while (*p) {
        uint32_t cp;
        if (p[0] < 0x80) cp = *p++;
        else if ((p[0] & 0xE0) == 0xC0 && (p[1] & 0xC0) == 0x80) {
            cp = (uint32_t)(p[0] & 0x1F) << 6 | (p[1] & 0x3F);
            p += 2;
        } else
            return -1;
        if (cp >= 512 || lookup[cp] < 0) return -1;
        out[n++] = (uint8_t)lookup[cp];
    }
    return n;
}

/* ---- components ---- */

static ts_status add_step(tok_step *steps, int *n, tok_step s, const char *what) {
    if (*n == TOK_MAX_STEPS) return ts_fail(TS_ERR_UNSUPPORTED, "%s: more than %d steps", what, TOK_MAX_STEPS);
    steps[(*n)++] = s;
    return TS_OK;
}

static ts_status read_normalizer(ts_hftok *t, const cJSON *o, const char *path, int depth) {
    if (!o) return TS_OK;
    const char *type;
    char what[600];
    snprintf(what, sizeof what, "%s: the normalizer", path);
    TS_TRY(get_type(o, what, &type));
    tok_step s = {0};
    if (strcmp(type, "Sequence") == 0 && depth < 4) {
        const cJSON *list = get(o, "normalizers");
        if (!cJSON_IsArray(list)) return ts_fail(TS_ERR_FORMAT, "%s Sequence has no \"normalizers\" list", what);
        for (const cJSON *e = list->child; e; e = e->next) TS_TRY(read_normalizer(t, e, path, depth + 1));
        return TS_OK;
    }
    if (strcmp(type, "NFC") == 0) s.op = NORM_NFC;
    else if (strcmp(type, "NFD") == 0) s.op = NORM_NFD;
    else if (strcmp(type, "Lowercase") == 0) s.op = NORM_LOWER;
    else if (strcmp(type, "StripAccents") == 0) s.op = NORM_STRIP_MN;
    else if (strcmp(type, "BertNormalizer") == 0) {
        s.op = NORM_BERT;
        bool strip;
        TS_TRY(get_bool(o, "clean_text", what, true, &s.clean));
        TS_TRY(get_bool(o, "handle_chinese_chars", what, true, &s.chinese));
        TS_TRY(get_bool(o, "lowercase", what, true, &s.lower));
        TS_TRY(get_bool(o, "strip_accents", what, s.lower, &strip));
        s.strip = strip;
    } else
        return ts_fail(TS_ERR_UNSUPPORTED, "%s: normalizer \"%.60s\" is not supported (NFC, NFD, Lowercase, "
                                           "StripAccents, BertNormalizer and Sequence are)", path, type);
    return add_step(t->norm, &t->n_norm, s, what);
}

static ts_status read_pre(ts_hftok *t, const cJSON *o, const char *path, int depth) {
    if (!o) return TS_OK;
    const char *type;
    char what[600];
    snprintf(what, sizeof what, "%s: the pre-tokenizer", path);
    TS_TRY(get_type(o, what, &type));
    tok_step s = {0};
    if (strcmp(type, "Sequence") == 0 && depth < 4) {
        const cJSON *list = get(o, "pretokenizers");
        if (!cJSON_IsArray(list)) return ts_fail(TS_ERR_FORMAT, "%s Sequence has no \"pretokenizers\" list", what);
        for (const cJSON *e = list->child; e; e = e->next) TS_TRY(read_pre(t, e, path, depth + 1));
        return TS_OK;
    }
    if (strcmp(type, "ByteLevel") == 0) {
        s.op = PRE_BYTELEVEL;
        TS_TRY(get_bool(o, "add_prefix_space", what, false, &s.prefix_space));
        TS_TRY(get_bool(o, "use_regex", what, true, &s.use_regex));
        t->byte_level = true;
    } else if (strcmp(type, "Split") == 0) {
        const cJSON *pat = get(o, "pattern");
        const char *regex = NULL, *behavior = NULL;
        bool invert;
        if (pat) TS_TRY(get_string(pat, "Regex", what, &regex));
        TS_TRY(get_string(o, "behavior", what, &behavior));
        TS_TRY(get_bool(o, "invert", what, false, &invert));
        if (!regex) return ts_fail(TS_ERR_UNSUPPORTED, "%s: a Split without a \"Regex\" pattern is not supported", path);
        if (strcmp(regex, LLAMA3_PATTERN) == 0) s.op = PRE_SPLIT_LLAMA3;
        else if (strcmp(regex, GPT2_PATTERN) == 0) s.op = PRE_SPLIT_GPT2;
        else
            return ts_fail(TS_ERR_UNSUPPORTED, "%s: the Split pattern \"%.80s%s\" is not one tscope knows (Llama 3's "
                                               "and GPT-2's are)", path, regex, strlen(regex) > 80 ? "..." : "");
        if (invert) return ts_fail(TS_ERR_UNSUPPORTED, "%s: a Split with \"invert\": true is not supported", path);
        if (!behavior || (strcmp(behavior, "Isolated") != 0 && strcmp(behavior, "Removed") != 0))
            return ts_fail(TS_ERR_UNSUPPORTED, "%s: Split behavior \"%.40s\" is not supported (Isolated and "
                                               "Removed are)", path, behavior ? behavior : "(none)");
        s.removed = strcmp(behavior, "Removed") == 0;
    } else if (strcmp(type, "BertPreTokenizer") == 0) {
        s.op = PRE_BERT;
    } else
        return ts_fail(TS_ERR_UNSUPPORTED, "%s: pre-tokenizer \"%.60s\" is not supported (ByteLevel, Split, "
                                           "BertPreTokenizer and Sequence are)", path, type);
    return add_step(t->pre, &t->n_pre, s, what);
}

/* The id of an added or model token spelled as the file spells it. */
static int32_t named_id(const ts_hftok *t, const char *name) {
    for (int i = 0; i < t->n_added; i++)
        if (strcmp(t->added[i].s, name) == 0) return t->added[i].id;
    return tok_vocab_find(&t->vocab, name, strlen(name)); /* byte-level: printable ASCII spells itself */
}

static ts_status push_special(int32_t *list, int *n, int32_t id, const char *name, const char *path) {
    if (id < 0) return ts_fail(TS_ERR_FORMAT, "%s: the post-processor's special token \"%.60s\" is not in the vocabulary", path, name);
    if (*n == TOK_MAX_SPECIAL) return ts_fail(TS_ERR_UNSUPPORTED, "%s: the post-processor adds more than %d tokens", path, TOK_MAX_SPECIAL);
    list[(*n)++] = id;
    return TS_OK;
}

static ts_status read_post(ts_hftok *t, const cJSON *o, const char *path, int depth) {
    if (!o) return TS_OK;
    const char *type;
    char what[600];
    snprintf(what, sizeof what, "%s: the post-processor", path);
    TS_TRY(get_type(o, what, &type));
    if (strcmp(type, "Sequence") == 0 && depth < 4) {
        const cJSON *list = get(o, "processors");
        if (!cJSON_IsArray(list)) return ts_fail(TS_ERR_FORMAT, "%s Sequence has no \"processors\" list", what);
        for (const cJSON *e = list->child; e; e = e->next) TS_TRY(read_post(t, e, path, depth + 1));
        return TS_OK;
    }
    if (strcmp(type, "ByteLevel") == 0) return TS_OK; /* offsets only */
    if (strcmp(type, "BertProcessing") == 0 || strcmp(type, "RobertaProcessing") == 0) {
        const cJSON *cls = get(o, "cls"), *sep = get(o, "sep");
        if (!cJSON_IsArray(cls) || !cJSON_IsArray(sep) || !cJSON_IsString(cls->child) || !cJSON_IsString(sep->child))
            return ts_fail(TS_ERR_FORMAT, "%s %s needs \"cls\" and \"sep\" as [token, id]", what, type);
        TS_TRY(push_special(t->head, &t->n_head, named_id(t, cls->child->valuestring), cls->child->valuestring, path));
        return push_special(t->tail, &t->n_tail, named_id(t, sep->child->valuestring), sep->child->valuestring, path);
    }
    if (strcmp(type, "TemplateProcessing") == 0) {
        const cJSON *single = get(o, "single"), *specials = get(o, "special_tokens");
        if (!cJSON_IsArray(single)) return ts_fail(TS_ERR_FORMAT, "%s TemplateProcessing has no \"single\" list", what);
        bool seen_a = false;
        for (const cJSON *e = single->child; e; e = e->next) {
            const cJSON *sp = get(e, "SpecialToken"), *seq = get(e, "Sequence");
            if (seq) {
                const char *id;
                TS_TRY(get_string(seq, "id", what, &id));
                if (!id || strcmp(id, "A") != 0 || seen_a)
                    return ts_fail(TS_ERR_UNSUPPORTED, "%s: a single-sequence template with a sequence other than "
                                                       "one A is not supported", path);
                seen_a = true;
                continue;
            }
            const char *name;
            if (!sp || get_string(sp, "id", what, &name) != TS_OK || !name)
                return ts_fail(TS_ERR_FORMAT, "%s: a template item that is neither SpecialToken nor Sequence", path);
            const cJSON *entry = get(specials, name), *ids = entry ? get(entry, "ids") : NULL;
            if (!cJSON_IsArray(ids))
                return ts_fail(TS_ERR_FORMAT, "%s: the template's special token \"%.60s\" has no \"ids\" in "
                                              "\"special_tokens\"", path, name);
            for (const cJSON *i = ids->child; i; i = i->next) {
                if (!whole(i, 0, t->n_vocab - 1))
                    return ts_fail(TS_ERR_FORMAT, "%s: the template's token \"%.60s\" has an id outside the "
                                                  "vocabulary", path, name);
                TS_TRY(push_special(seen_a ? t->tail : t->head, seen_a ? &t->n_tail : &t->n_head,
                                    (int32_t)i->valuedouble, name, path));
            }
        }
        return TS_OK;
    }
    return ts_fail(TS_ERR_UNSUPPORTED, "%s: post-processor \"%.60s\" is not supported (ByteLevel, "
                                       "TemplateProcessing, BertProcessing, RobertaProcessing and Sequence are)",
                   path, type);
}

static ts_status read_decoder(ts_hftok *t, const cJSON *o, const char *path, int depth) {
    if (!o) return TS_OK;
    const char *type;
    char what[600];
    snprintf(what, sizeof what, "%s: the decoder", path);
    TS_TRY(get_type(o, what, &type));
    if (strcmp(type, "Sequence") == 0 && depth < 4) {
        const cJSON *list = get(o, "decoders");
        if (!cJSON_IsArray(list)) return ts_fail(TS_ERR_FORMAT, "%s Sequence has no \"decoders\" list", what);
        for (const cJSON *e = list->child; e; e = e->next) TS_TRY(read_decoder(t, e, path, depth + 1));
        return TS_OK;
    }
    if (strcmp(type, "ByteLevel") == 0 && t->kind == TOK_BPE_JSON) return TS_OK;
    if (strcmp(type, "WordPiece") == 0 && t->kind == TOK_WORDPIECE_JSON) {
        const char *prefix;
        TS_TRY(get_string(o, "prefix", what, &prefix));
        if (prefix && strcmp(prefix, t->prefix) != 0)
            return ts_fail(TS_ERR_UNSUPPORTED, "%s: the decoder's prefix \"%.20s\" differs from the model's", path, prefix);
        return get_bool(o, "cleanup", what, true, &t->cleanup);
    }
    return ts_fail(TS_ERR_UNSUPPORTED, "%s: decoder \"%.60s\" is not supported with this model (ByteLevel with "
                                       "BPE, WordPiece with WordPiece)", path, type);
}

/* ---- the vocabulary and merges ---- */

ts_status tok_vocab_alloc(ts_hftok *t, int32_t n, const char *path) {
    t->n_vocab = n;
    t->dec = calloc((size_t)n, sizeof *t->dec);
    t->dec_len = calloc((size_t)n, sizeof *t->dec_len);
    t->special = calloc((size_t)n, 1);
    if (!t->dec || !t->dec_len || !t->special || !tok_vocab_init(&t->vocab, n))
        return ts_fail(TS_ERR_NOMEM, "%s: out of memory", path);
    return TS_OK;
}

static ts_status set_dec(ts_hftok *t, int32_t id, const char *s, size_t len, const char *path) {
    free(t->dec[id]);
    t->dec[id] = malloc(len + 1);
    if (!t->dec[id]) return ts_fail(TS_ERR_NOMEM, "%s: out of memory", path);
    memcpy(t->dec[id], s, len);
    t->dec[id][len] = '\0';
    t->dec_len[id] = (uint32_t)len;
    return TS_OK;
}

/* The largest id of the model's vocab and the added tokens, checked. */
static ts_status vocab_size(const cJSON *vocab, const cJSON *added, const char *path, int32_t *n) {
    char q[80];
    double top = -1;
    for (const cJSON *e = vocab->child; e; e = e->next) {
        if (!whole(e, 0, MAX_VOCAB - 1))
            return ts_fail(TS_ERR_FORMAT, "%s: token \"%.40s\" has id %s, not a whole number from 0 to %d", path,
                           e->string, ts_json_quote(e, q, sizeof q), MAX_VOCAB - 1);
        if (e->valuedouble > top) top = e->valuedouble;
    }
    for (const cJSON *e = added ? added->child : NULL; e; e = e->next) {
        const cJSON *id = get(e, "id"), *content = get(e, "content");
        if (!whole(id, 0, MAX_VOCAB - 1) || !cJSON_IsString(content))
            return ts_fail(TS_ERR_FORMAT, "%s: an added token without a string \"content\" and an \"id\" from 0 to %d: %s",
                           path, MAX_VOCAB - 1, ts_json_quote(e, q, sizeof q));
        if (id->valuedouble > top) top = id->valuedouble;
    }
    *n = (int32_t)top + 1;
    if (*n == 0) return ts_fail(TS_ERR_FORMAT, "%s: the vocabulary is empty", path);
    int have = cJSON_GetArraySize(vocab) + (added ? cJSON_GetArraySize(added) : 0);
    if (*n > have) /* before allocating for ids no token can fill */
        return ts_fail(TS_ERR_FORMAT, "%s: ids go up to %d, but only %d tokens are given (ids must run 0..n-1)", path,
                       *n - 1, have);
    return TS_OK;
}

static ts_status read_added(ts_hftok *t, const cJSON *added, const char *path) {
    int n = added ? cJSON_GetArraySize(added) : 0;
    if (!n) return TS_OK;
    t->added = calloc((size_t)n, sizeof *t->added);
    if (!t->added) return ts_fail(TS_ERR_NOMEM, "%s: out of memory", path);
    for (const cJSON *e = added->child; e; e = e->next) {
        char what[600];
        snprintf(what, sizeof what, "%s: added token %d", path, t->n_added + 1);
        tok_added *a = &t->added[t->n_added];
        const char *content = get(e, "content")->valuestring;
        bool special, single_word;
        a->id = (int32_t)get(e, "id")->valuedouble;
        a->len = strlen(content);
        if (!a->len) return ts_fail(TS_ERR_FORMAT, "%s is empty", what);
        TS_TRY(get_bool(e, "special", what, false, &special));
        TS_TRY(get_bool(e, "normalized", what, !special, &a->normalized));
        TS_TRY(get_bool(e, "lstrip", what, false, &a->lstrip));
        TS_TRY(get_bool(e, "rstrip", what, false, &a->rstrip));
        TS_TRY(get_bool(e, "single_word", what, false, &single_word));
        if (single_word)
            return ts_fail(TS_ERR_UNSUPPORTED, "%s (\"%.40s\"): \"single_word\": true is not supported", what, content);
        a->s = strdup(content);
        if (!a->s) return ts_fail(TS_ERR_NOMEM, "%s: out of memory", path);
        t->n_added++;
        TS_TRY(set_dec(t, a->id, content, a->len, path));
        t->special[a->id] = special;
    }
    return TS_OK;
}

static ts_status read_bpe(ts_hftok *t, const cJSON *model, const cJSON *vocab, const char *path) {
    const char *s;
    char q[80];
    bool b;
    TS_TRY(get_string(model, "continuing_subword_prefix", path, &s));
    if (s && *s) return ts_fail(TS_ERR_UNSUPPORTED, "%s: a BPE with a \"continuing_subword_prefix\" is not supported", path);
    TS_TRY(get_string(model, "end_of_word_suffix", path, &s));
    if (s && *s) return ts_fail(TS_ERR_UNSUPPORTED, "%s: a BPE with an \"end_of_word_suffix\" is not supported", path);
    const cJSON *dropout = get(model, "dropout");
    if (dropout && !(cJSON_IsNumber(dropout) && dropout->valuedouble == 0))
        return ts_fail(TS_ERR_UNSUPPORTED, "%s: BPE dropout %s is not supported (it samples)", path, ts_json_quote(dropout, q, sizeof q));
    TS_TRY(get_bool(model, "ignore_merges", path, false, &t->ignore_merges));
    TS_TRY(get_bool(model, "byte_fallback", path, false, &b));
    if (!t->byte_level)
        return ts_fail(TS_ERR_UNSUPPORTED, "%s: a BPE without a ByteLevel pre-tokenizer (SentencePiece-style, as "
                                           "Llama 2's tokenizer.json) is not supported; tokenizer.model is", path);
    int16_t lookup[512];
    byte_chars(lookup);
    for (const cJSON *e = vocab->child; e; e = e->next) {
        int32_t id = (int32_t)e->valuedouble;
        size_t sl = strlen(e->string);
        uint8_t *bytes = malloc(sl + 1);
        if (!bytes) return ts_fail(TS_ERR_NOMEM, "%s: out of memory", path);
        long n = spelled_bytes(e->string, bytes, lookup);
        ts_status st = TS_OK;
        if (n <= 0)
            st = ts_fail(TS_ERR_FORMAT, "%s: token \"%.40s\" (id %d) %s", path, e->string, id,
                         n == 0 ? "is empty" : "has a character that stands for no byte; not a byte-level vocabulary");
        else if (!tok_vocab_set(&t->vocab, id, (const char *)bytes, (size_t)n))
            st = ts_fail(TS_ERR_FORMAT, "%s: id %d is given to two tokens (\"%.40s\" and another)", path, id, e->string);
        else if (!t->dec[id])
            st = set_dec(t, id, (const char *)bytes, (size_t)n, path);
        free(bytes);
        TS_TRY(st);
    }
    int32_t dup;
    if (!tok_vocab_index(&t->vocab, &dup))
        return ts_fail(TS_ERR_FORMAT, "%s: token id %d spells the same bytes as another token", path, dup);
    for (int c = 0; c < 256; c++) {
        char byte = (char)c;
        t->byte_id[c] = tok_vocab_find(&t->vocab, &byte, 1);
        if (t->byte_id[c] < 0)
            return ts_fail(TS_ERR_FORMAT, "%s: no token for the byte 0x%02X, so some text could not be encoded", path, c);
    }
    const cJSON *merges = get(model, "merges");
    if (!cJSON_IsArray(merges)) return ts_fail(TS_ERR_FORMAT, "%s: the BPE model has no \"merges\" list", path);
    if (!tok_merges_init(&t->merges, (size_t)cJSON_GetArraySize(merges)))
        return ts_fail(TS_ERR_NOMEM, "%s: out of memory", path);
    int32_t rank = 0;
    for (const cJSON *e = merges->child; e; e = e->next, rank++) {
        const char *a = NULL, *bstr = NULL;
        char *line = NULL;
        if (cJSON_IsString(e)) {
            line = strdup(e->valuestring);
            if (!line) return ts_fail(TS_ERR_NOMEM, "%s: out of memory", path);
            char *sp = strchr(line, ' ');
            if (sp && sp != line && !strchr(sp + 1, ' ') && sp[1]) {
                *sp = '\0';
                a = line;
                bstr = sp + 1;
            }
        } else if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 && cJSON_IsString(e->child) &&
                   cJSON_IsString(e->child->next)) {
            a = e->child->valuestring;
            bstr = e->child->next->valuestring;
        }
        if (!a) {
            free(line);
            return ts_fail(TS_ERR_FORMAT, "%s: merge %d is %s, not \"a b\" nor [\"a\", \"b\"]", path, rank + 1,
                           ts_json_quote(e, q, sizeof q));
        }
        size_t la = strlen(a), lb = strlen(bstr);
        uint8_t *buf = malloc(la + lb + 2);
        if (!buf) {
            free(line);
            return ts_fail(TS_ERR_NOMEM, "%s: out of memory", path);
        }
        long na = spelled_bytes(a, buf, lookup);
        long nb = na < 0 ? -1 : spelled_bytes(bstr, buf + na, lookup);
        int32_t left = na > 0 ? tok_vocab_find(&t->vocab, (char *)buf, (size_t)na) : -1;
        int32_t right = nb > 0 ? tok_vocab_find(&t->vocab, (char *)buf + na, (size_t)nb) : -1;
        int32_t merged = left >= 0 && right >= 0 ? tok_vocab_find(&t->vocab, (char *)buf, (size_t)(na + nb)) : -1;
        free(buf);
        if (merged < 0) {
            ts_status st = ts_fail(TS_ERR_FORMAT, "%s: merge %d joins \"%.40s\" and \"%.40s\", but %s is not in the "
                                                  "vocabulary", path, rank + 1, a, bstr,
                                   left < 0 ? "the first" : right < 0 ? "the second" : "what they make");
            free(line);
            return st;
        }
        free(line);
        tok_merges_add(&t->merges, left, right, rank, merged);
    }
    return TS_OK;
}

static ts_status read_wordpiece_model(ts_hftok *t, const cJSON *model, const cJSON *vocab, const char *path) {
    const char *unk, *prefix;
    TS_TRY(get_string(model, "unk_token", path, &unk));
    TS_TRY(get_string(model, "continuing_subword_prefix", path, &prefix));
    const cJSON *max = get(model, "max_input_chars_per_word");
    if (max && !whole(max, 1, 1 << 20))
        return ts_fail(TS_ERR_FORMAT, "%s: \"max_input_chars_per_word\" is not a whole number from 1", path);
    t->max_chars = max ? (int)max->valuedouble : 100;
    snprintf(t->prefix, sizeof t->prefix, "%s", prefix ? prefix : "##");
    for (const cJSON *e = vocab->child; e; e = e->next) {
        int32_t id = (int32_t)e->valuedouble;
        size_t len = strlen(e->string);
        if (!tok_vocab_set(&t->vocab, id, e->string, len))
            return ts_fail(TS_ERR_FORMAT, "%s: id %d is given to two tokens (\"%.40s\" and another)", path, id, e->string);
        if (!t->dec[id]) TS_TRY(set_dec(t, id, e->string, len, path));
    }
    int32_t dup;
    if (!tok_vocab_index(&t->vocab, &dup))
        return ts_fail(TS_ERR_FORMAT, "%s: token \"%.40s\" is given twice", path, t->vocab.tok[dup]);
    t->unk_id = unk ? tok_vocab_find(&t->vocab, unk, strlen(unk)) : -1;
    if (t->unk_id < 0)
        return ts_fail(TS_ERR_FORMAT, "%s: the WordPiece unknown token \"%.40s\" is not in the vocabulary", path,
                       unk ? unk : "(none)");
    return TS_OK;
}

static ts_status load_json(ts_hftok *t, const cJSON *root, const char *path) {
    const cJSON *model = get(root, "model");
    const char *type;
    char what[600];
    snprintf(what, sizeof what, "%s: the model", path);
    if (!model) return ts_fail(TS_ERR_FORMAT, "%s has no \"model\"", path);
    if (cJSON_IsObject(model) && !get(model, "type") && get(model, "merges")) type = "BPE"; /* older files */
    else TS_TRY(get_type(model, what, &type));
    if (strcmp(type, "BPE") == 0) t->kind = TOK_BPE_JSON;
    else if (strcmp(type, "WordPiece") == 0) t->kind = TOK_WORDPIECE_JSON;
    else
        return ts_fail(TS_ERR_UNSUPPORTED, "%s: model type \"%.40s\" is not supported (BPE and WordPiece are; "
                                           "a SentencePiece Unigram needs its tokenizer.model, also unsupported)",
                       path, type);
    const cJSON *vocab = get(model, "vocab"), *added = get(root, "added_tokens");
    if (!cJSON_IsObject(vocab)) return ts_fail(TS_ERR_FORMAT, "%s: the model has no \"vocab\" object", path);
    if (added && !cJSON_IsArray(added)) return ts_fail(TS_ERR_FORMAT, "%s: \"added_tokens\" is not a list", path);
    int32_t n = 0;
    TS_TRY(vocab_size(vocab, added, path, &n));
    TS_TRY(tok_vocab_alloc(t, n, path));
    TS_TRY(read_added(t, added, path));
    TS_TRY(read_normalizer(t, get(root, "normalizer"), path, 0));
    TS_TRY(read_pre(t, get(root, "pre_tokenizer"), path, 0));
    if (t->kind == TOK_BPE_JSON) TS_TRY(read_bpe(t, model, vocab, path));
    else TS_TRY(read_wordpiece_model(t, model, vocab, path));
    for (int32_t id = 0; id < n; id++)
        if (!t->dec[id]) return ts_fail(TS_ERR_FORMAT, "%s: no token has id %d (ids must run 0..%d)", path, id, n - 1);
    TS_TRY(read_post(t, get(root, "post_processor"), path, 0));
    TS_TRY(read_decoder(t, get(root, "decoder"), path, 0));
    snprintf(t->kind_name, sizeof t->kind_name, "tokenizer.json (%s%s)", type,
             t->kind == TOK_BPE_JSON ? ", byte-level" : "");
    return TS_OK;
}

ts_status tok_load_json(ts_hftok *t, const char *path) {
    char *text;
    size_t len;
    TS_TRY(tok_read_file(path, &text, &len));
    cJSON *root = NULL;
    ts_status st = ts_json_parse(text, len, path, &root);
    free(text);
    if (st == TS_OK) st = load_json(t, root, path);
    cJSON_Delete(root);
    return st;
}

/* ---- BERT's vocab.txt ---- */

ts_status tok_load_vocab_txt(ts_hftok *t, const char *path, const char *dir) {
    char *text;
    size_t len;
    TS_TRY(tok_read_file(path, &text, &len));
    if (memchr(text, '\0', len)) {
        free(text);
        return ts_fail(TS_ERR_FORMAT, "%s: holds a NUL byte; not a vocabulary", path);
    }
    int32_t n = 0;
    for (size_t i = 0; i < len; i++) n += text[i] == '\n';
    if (len && text[len - 1] != '\n') n++;
    ts_status st = n ? tok_vocab_alloc(t, n, path) : ts_fail(TS_ERR_FORMAT, "%s: empty; a vocabulary has a token a line", path);
    char *line = text;
    for (int32_t id = 0; id < n && st == TS_OK; id++) {
        char *end = strchr(line, '\n');
        if (end) *end = '\0';
        size_t l = strlen(line);
        while (l && (line[l - 1] == '\r' || line[l - 1] == ' ')) line[--l] = '\0';
        if (!l) st = ts_fail(TS_ERR_FORMAT, "%s: line %d is empty; a vocabulary has a token a line", path, id + 1);
        else if (!tok_vocab_set(&t->vocab, id, line, l) || set_dec(t, id, line, l, path) != TS_OK)
            st = ts_fail(TS_ERR_NOMEM, "%s: out of memory", path);
        line = end ? end + 1 : line + l;
    }
    free(text);
    TS_TRY(st);
    int32_t dup;
    if (!tok_vocab_index(&t->vocab, &dup))
        return ts_fail(TS_ERR_FORMAT, "%s: line %d: \"%.40s\" is there twice (a token has one id)", path, dup + 1,
                       t->vocab.tok[dup]);
    t->kind = TOK_WORDPIECE_TXT;
    t->unk_id = tok_vocab_find(&t->vocab, "[UNK]", 5);
    if (t->unk_id < 0) return ts_fail(TS_ERR_FORMAT, "%s: no [UNK] line; WordPiece needs it for unknown words", path);
    snprintf(t->prefix, sizeof t->prefix, "##");
    t->max_chars = 100;
    t->cleanup = true;
    /* BertTokenizer's defaults, or tokenizer_config.json's do_lower_case / strip_accents */
    tok_step norm = {.op = NORM_BERT, .clean = true, .chinese = true, .lower = true};
    char cfg[4200];
    snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", dir);
    FILE *f = fopen(cfg, "rb");
    if (f) {
        fclose(f);
        cJSON *root = NULL;
        TS_TRY(tok_read_file(cfg, &text, &len));
        st = ts_json_parse(text, len, cfg, &root);
        free(text);
        if (st == TS_OK) st = get_bool(root, "do_lower_case", cfg, true, &norm.lower);
        if (st == TS_OK) st = get_bool(root, "strip_accents", cfg, norm.lower, &norm.strip);
        if (st == TS_OK) st = get_bool(root, "tokenize_chinese_chars", cfg, true, &norm.chinese);
        cJSON_Delete(root);
        TS_TRY(st);
    } else {
        norm.strip = norm.lower;
    }
    t->norm[t->n_norm++] = norm;
    t->pre[t->n_pre++] = (tok_step){.op = PRE_BERT};
    int32_t cls = tok_vocab_find(&t->vocab, "[CLS]", 5), sep = tok_vocab_find(&t->vocab, "[SEP]", 5);
    if (cls >= 0 && sep >= 0) {
        t->head[t->n_head++] = cls;
        t->tail[t->n_tail++] = sep;
    }
    static const char *const specials[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    for (int i = 0; i < 5; i++) {
        int32_t id = tok_vocab_find(&t->vocab, specials[i], strlen(specials[i]));
        if (id < 0) continue;
        tok_added *a = realloc(t->added, (size_t)(t->n_added + 1) * sizeof *a);
        if (!a) return ts_fail(TS_ERR_NOMEM, "%s: out of memory", path);
        t->added = a;
        a[t->n_added] = (tok_added){.s = strdup(specials[i]), .len = strlen(specials[i]), .id = id};
        if (!a[t->n_added].s) return ts_fail(TS_ERR_NOMEM, "%s: out of memory", path);
        t->n_added++;
        t->special[id] = 1;
    }
    snprintf(t->kind_name, sizeof t->kind_name, "vocab.txt (WordPiece%s)", norm.lower ? ", uncased" : ", cased");
    return TS_OK;
}
