/* spm: SentencePiece's tokenizer.model (Llama 2, Gemma): a small protobuf
 * reader, the model's pieces and settings, and BPE encoding with byte
 * fallback as sentencepiece's bpe_model.cc does it: the text's spaces become
 * U+2581 (after a dummy one in front), each character is a symbol (one the
 * vocabulary lacks stays alone), the adjacent pair whose joined piece scores
 * highest merges first (of equal scores the leftmost), and what is left
 * unknown becomes its UTF-8 bytes as <0xXX> pieces. Unigram models, and
 * normalizers other than identity (a precompiled character map), are refused.
 *
 * Protobuf, only as much as ModelProto needs: a message is fields, each a
 * varint key (number << 3 | wire type) then a varint (type 0), 8 bytes (1), a
 * varint length and that many bytes (2), or 4 bytes (5). Every length is
 * checked against what is left; groups (3, 4) and anything else are refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe_impl.h"
#include "tok_impl.h"

enum { PIECE_NORMAL = 1, PIECE_UNKNOWN = 2, PIECE_CONTROL = 3, PIECE_USER = 4, PIECE_UNUSED = 5, PIECE_BYTE = 6 };

typedef struct pb {
    const uint8_t *p, *end;
} pb;

typedef struct pb_field {
    uint32_t number, wire;
    uint64_t value;      /* types 0, 1, 5 */
    const uint8_t *data; /* type 2 */
    size_t len;
} pb_field;

static bool pb_varint(pb *b, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (b->p >= b->end) return false;
        uint8_t c = *b->p++;
        if (shift == 63 && c > 1) return false;
        *v |= (uint64_t)(c & 0x7F) << shift;
        if (!(c & 0x80)) return true;
    }
    return false;
}

/* The next field; 1 got one, 0 at the end, -1 malformed. */
static int pb_next(pb *b, pb_field *f) {
    if (b->p == b->end) return 0;
    uint64_t key;
    if (!pb_varint(b, &key) || key >> 3 == 0 || key >> 3 > 536870911u) return -1;
    f->number = (uint32_t)(key >> 3);
    f->wire = (uint32_t)(key & 7);
    if (f->wire == 0) return pb_varint(b, &f->value) ? 1 : -1;
    if (f->wire == 1 || f->wire == 5) {
        size_t n = f->wire == 1 ? 8 : 4;
        if ((size_t)(b->end - b->p) < n) return -1;
        f->value = 0;
        for (size_t i = 0; i < n; i++) f->value |= (uint64_t)b->p[i] << (8 * i);
        b->p += n;
        return 1;
    }
    if (f->wire == 2) {
        uint64_t len;
        if (!pb_varint(b, &len) || len > (uint64_t)(b->end - b->p)) return -1;
        f->data = b->p;
        f->len = (size_t)len;
        b->p += len;
        return 1;
    }
    return -1;
}

typedef struct spm_piece {
    const uint8_t *s;
    size_t len;
    float score;
    int type;
} spm_piece;

static ts_status bad(const char *path, const char *what) {
    return ts_fail(TS_ERR_FORMAT, "%s: %s; not a SentencePiece model (or a damaged one)", path, what);
}

static ts_status read_piece(const pb_field *f, spm_piece *out, const char *path) {
    pb b = {f->data, f->data + f->len};
    pb_field g;
    int r;
    *out = (spm_piece){.type = PIECE_NORMAL};
    bool has_piece = false;
    while ((r = pb_next(&b, &g)) == 1) {
        if (g.number == 1 && g.wire == 2) out->s = g.data, out->len = g.len, has_piece = true;
        else if (g.number == 2 && g.wire == 5) {
            uint32_t bits = (uint32_t)g.value;
            memcpy(&out->score, &bits, 4);
        } else if (g.number == 3 && g.wire == 0) out->type = (int)g.value;
    }
    if (r < 0) return bad(path, "a piece is malformed protobuf");
    if (!has_piece || out->len == 0) return bad(path, "a piece has no text");
    if (out->type < PIECE_NORMAL || out->type > PIECE_BYTE) return bad(path, "a piece has an unknown type");
    if (!ts_bpe_utf8_valid(out->s, out->len) || memchr(out->s, 0, out->len)) return bad(path, "a piece is not UTF-8 text");
    return TS_OK;
}

typedef struct spm_spec {
    int64_t model_type, bos_id;
    bool byte_fallback, suffix;
    const uint8_t *norm_name;
    size_t norm_name_len, charsmap_len;
} spm_spec;

static ts_status read_trainer(const pb_field *f, spm_spec *s, const char *path) {
    pb b = {f->data, f->data + f->len};
    pb_field g;
    int r;
    while ((r = pb_next(&b, &g)) == 1) {
        if (g.wire != 0) continue;
        if (g.number == 3) s->model_type = (int64_t)g.value;
        else if (g.number == 35) s->byte_fallback = g.value != 0;
        else if (g.number == 24) s->suffix = g.value != 0;
        else if (g.number == 41) s->bos_id = (int32_t)(uint32_t)g.value;
    }
    return r < 0 ? bad(path, "the trainer spec is malformed protobuf") : TS_OK;
}

static ts_status read_normalizer(const pb_field *f, ts_hftok *t, spm_spec *s, const char *path) {
    pb b = {f->data, f->data + f->len};
    pb_field g;
    int r;
    while ((r = pb_next(&b, &g)) == 1) {
        if (g.number == 1 && g.wire == 2) s->norm_name = g.data, s->norm_name_len = g.len;
        else if (g.number == 2 && g.wire == 2) s->charsmap_len = g.len;
        else if (g.number == 3 && g.wire == 0) t->add_dummy_prefix = g.value != 0;
        else if (g.number == 4 && g.wire == 0) t->remove_extra_ws = g.value != 0;
        else if (g.number == 5 && g.wire == 0) t->escape_ws = g.value != 0;
    }
    return r < 0 ? bad(path, "the normalizer spec is malformed protobuf") : TS_OK;
}

/* Best score first; a NaN score counts as the worst, so the order is total. */
static int by_score(const void *a, const void *b) {
    float x = ((const spm_piece *const *)a)[0]->score, y = ((const spm_piece *const *)b)[0]->score;
    if (x != x || y != y) return (x != x) - (y != y);
    return (x < y) - (x > y);
}

static int hex_digit(uint8_t c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static ts_status load(ts_hftok *t, const uint8_t *data, size_t size, const char *path) {
    t->kind = TOK_SPM;
    t->add_dummy_prefix = t->remove_extra_ws = t->escape_ws = true; /* the proto's defaults */
    spm_spec spec = {.model_type = 1, .bos_id = 1};
    pb b = {data, data + size};
    pb_field f;
    int r;
    size_t n = 0;
    while ((r = pb_next(&b, &f)) == 1) {
        if (f.number == 1 && f.wire == 2) n++;
        else if (f.number == 2 && f.wire == 2) TS_TRY(read_trainer(&f, &spec, path));
        else if (f.number == 3 && f.wire == 2) TS_TRY(read_normalizer(&f, t, &spec, path));
    }
    if (r < 0) return bad(path, "malformed protobuf");
    if (n == 0) return bad(path, "no pieces");
    if (n > (1u << 24)) return bad(path, "more than 16M pieces");
    if (spec.model_type != 2) {
        const char *names[] = {"?", "Unigram", "BPE", "Word", "Char"};
        return ts_fail(TS_ERR_UNSUPPORTED, "%s: a SentencePiece %s model is not supported (BPE is)", path,
                       spec.model_type >= 1 && spec.model_type <= 4 ? names[spec.model_type] : "unknown-type");
    }
    if (spec.suffix) return ts_fail(TS_ERR_UNSUPPORTED, "%s: treat_whitespace_as_suffix is not supported", path);
    if (spec.charsmap_len)
        return ts_fail(TS_ERR_UNSUPPORTED, "%s: normalizer \"%.*s\" (a precompiled character map) is not supported; "
                                           "only identity (as Llama 2 and Gemma use)", path,
                       (int)(spec.norm_name_len > 40 ? 40 : spec.norm_name_len),
                       spec.norm_name ? (const char *)spec.norm_name : "?");
    spm_piece *pieces = calloc(n, sizeof *pieces);
    spm_piece **order = calloc(n, sizeof *order);
    ts_status st = pieces && order ? TS_OK : ts_fail(TS_ERR_NOMEM, "%s: out of memory", path);
    size_t k = 0;
    b = (pb){data, data + size};
    while (st == TS_OK && pb_next(&b, &f) == 1)
        if (f.number == 1 && f.wire == 2) st = read_piece(&f, &pieces[k++], path);
    if (st == TS_OK) st = tok_vocab_alloc(t, (int32_t)n, path);
    for (size_t i = 0; i < n && st == TS_OK; i++) {
        spm_piece *p = &pieces[i];
        if (!tok_vocab_set(&t->vocab, (int32_t)i, (const char *)p->s, p->len)) {
            st = ts_fail(TS_ERR_NOMEM, "%s: out of memory", path);
            break;
        }
        /* what it decodes to */
        ts_text_buf d = {0};
        if (p->type == PIECE_BYTE) {
            int h = p->len == 6 ? hex_digit(p->s[3]) : -1, l = p->len == 6 ? hex_digit(p->s[4]) : -1;
            if (h < 0 || l < 0 || memcmp(p->s, "<0x", 3) != 0 || p->s[5] != '>') {
                st = ts_fail(TS_ERR_FORMAT, "%s: byte piece %zu is \"%.*s\", not <0xXX>", path, i, (int)(p->len > 20 ? 20 : p->len), p->s);
                break;
            }
            uint8_t byte = (uint8_t)(h << 4 | l);
            t->byte_id[byte] = (int32_t)i;
            ts_text_buf_add(&d, (const char *)&byte, 1);
        } else if (p->type == PIECE_UNKNOWN) {
            ts_text_buf_str(&d, " \xe2\x81\x87 ");
            if (t->unk_id < 0) t->unk_id = (int32_t)i;
            t->special[i] = 1;
        } else if (p->type == PIECE_CONTROL) {
            t->special[i] = 1;
        } else {
            for (size_t j = 0; j < p->len; j++) {
                if (j + 3 <= p->len && memcmp(p->s + j, "\xe2\x96\x81", 3) == 0) {
                    ts_text_buf_add(&d, " ", 1);
                    j += 2;
                } else
                    ts_text_buf_add(&d, (const char *)p->s + j, 1);
            }
        }
        if (d.oom) st = ts_fail(TS_ERR_NOMEM, "%s: out of memory", path);
        t->dec[i] = d.s ? d.s : calloc(1, 1);
        t->dec_len[i] = (uint32_t)d.len;
        if (!t->dec[i]) st = ts_fail(TS_ERR_NOMEM, "%s: out of memory", path);
        if (p->type == PIECE_USER && st == TS_OK) {
            tok_added *a = realloc(t->added, (size_t)(t->n_added + 1) * sizeof *a);
            if (!a) {
                st = ts_fail(TS_ERR_NOMEM, "%s: out of memory", path);
                break;
            }
            t->added = a;
            a[t->n_added] = (tok_added){.s = strndup((const char *)p->s, p->len), .len = p->len, .id = (int32_t)i, .normalized = true};
            if (!a[t->n_added].s) st = ts_fail(TS_ERR_NOMEM, "%s: out of memory", path);
            t->n_added++;
        }
    }
    int32_t dup;
    if (st == TS_OK && !tok_vocab_index(&t->vocab, &dup))
        st = ts_fail(TS_ERR_FORMAT, "%s: piece %d \"%.40s\" is there twice", path, dup, t->vocab.tok[dup]);
    if (st == TS_OK && t->unk_id < 0) st = bad(path, "no unknown piece (<unk>)");
    t->byte_fallback = spec.byte_fallback;
    for (int c = 0; c < 256 && st == TS_OK && t->byte_fallback; c++)
        if (t->byte_id[c] < 0) st = ts_fail(TS_ERR_FORMAT, "%s: byte_fallback is on but there is no piece <0x%02X>", path, c);
    /* merges: every split of a piece into two pieces, ranked by its score, best first */
    size_t m = 0;
    for (size_t i = 0; i < n && st == TS_OK; i++)
        if (pieces[i].type == PIECE_NORMAL || pieces[i].type == PIECE_USER) order[m++] = &pieces[i], k += pieces[i].len;
    if (st == TS_OK && !tok_merges_init(&t->merges, k)) st = ts_fail(TS_ERR_NOMEM, "%s: out of memory", path);
    if (st == TS_OK) qsort(order, m, sizeof *order, by_score);
    int32_t rank = 0;
    for (size_t i = 0; i < m && st == TS_OK; i++) {
        if (i > 0 && order[i]->score != order[i - 1]->score) rank = (int32_t)i;
        const spm_piece *p = order[i];
        int32_t id = (int32_t)(p - pieces);
        for (size_t cut = 1; cut < p->len; cut++) {
            if ((p->s[cut] & 0xC0) == 0x80) continue; /* inside a character */
            int32_t l = tok_vocab_find(&t->vocab, (const char *)p->s, cut);
            int32_t rr = tok_vocab_find(&t->vocab, (const char *)p->s + cut, p->len - cut);
            bool ok = l >= 0 && rr >= 0 && (pieces[l].type == PIECE_NORMAL || pieces[l].type == PIECE_USER) &&
                      (pieces[rr].type == PIECE_NORMAL || pieces[rr].type == PIECE_USER);
            if (ok) tok_merges_add(&t->merges, l, rr, rank, id);
        }
    }
    if (st == TS_OK && spec.bos_id >= 0 && spec.bos_id < (int64_t)n && pieces[spec.bos_id].type == PIECE_CONTROL)
        t->head[t->n_head++] = (int32_t)spec.bos_id;
    free(pieces);
    free(order);
    if (st == TS_OK)
        snprintf(t->kind_name, sizeof t->kind_name, "tokenizer.model (SentencePiece BPE%s)",
                 t->byte_fallback ? ", byte fallback" : "");
    return st;
}

ts_status tok_load_spm_bytes(ts_hftok *t, const uint8_t *data, size_t size, const char *path) {
    return load(t, data, size, path);
}

ts_status tok_load_spm(ts_hftok *t, const char *path) {
    char *data;
    size_t len;
    TS_TRY(tok_read_file(path, &data, &len));
    ts_status st = load(t, (const uint8_t *)data, len, path);
    free(data);
    return st;
}

ts_status tok_spm_encode(ts_hftok *t, const uint8_t *s, size_t n, ts_bpe_ids *out) {
    tok_cps c = {0};
    if (!tok_utf8_decode(s, n, &c)) return ts_fail(TS_ERR_NOMEM, "out of memory");
    int32_t *sym = malloc((c.n + 1) * sizeof *sym);
    bool ok = sym != NULL;
    for (size_t i = 0, at = 0; ok && i < c.n; i++) {
        size_t len = c.cp[i] < 0x80 ? 1 : c.cp[i] < 0x800 ? 2 : c.cp[i] < 0x10000 ? 3 : 4;
        int32_t id = tok_vocab_find(&t->vocab, (const char *)s + at, len);
        sym[i] = id >= 0 && !t->special[id] ? id : -2 - (int32_t)c.cp[i];
        at += len;
    }
    size_t m = c.n;
    ok = ok && tok_merge_run(&t->merges, sym, &m);
    for (size_t i = 0; ok && i < m; i++) {
        if (sym[i] >= 0) {
            ok = tok_ids_push(out, sym[i]);
        } else if (t->byte_fallback) {
            uint8_t u[4];
            size_t l = tok_utf8_put((uint32_t)(-2 - sym[i]), u);
            for (size_t j = 0; j < l && ok; j++) ok = tok_ids_push(out, t->byte_id[u[j]]);
        } else {
            ok = tok_ids_push(out, t->unk_id);
        }
    }
    free(sym);
    tok_cps_free(&c);
    return ok ? TS_OK : ts_fail(TS_ERR_NOMEM, "out of memory");
}

char *tok_spm_normalize(const ts_hftok *t, const uint8_t *s, size_t n, size_t *len) {
    ts_text_buf b = {0};
    size_t i = 0, end = n;
    if (t->remove_extra_ws) { /* no spaces at either end, one between words */
        while (i < end && s[i] == ' ') i++;
        while (end > i && s[end - 1] == ' ') end--;
    }
    if (i < end && t->add_dummy_prefix) ts_text_buf_str(&b, t->escape_ws ? "\xe2\x96\x81" : " ");
    for (; i < end; i++) {
        if (s[i] == ' ' && t->remove_extra_ws && s[i - 1] == ' ') continue;
        if (s[i] == ' ' && t->escape_ws) ts_text_buf_str(&b, "\xe2\x96\x81");
        else ts_text_buf_add(&b, (const char *)s + i, 1);
    }
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    *len = b.len;
    return b.s ? b.s : calloc(1, 1);
}
