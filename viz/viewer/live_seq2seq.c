/* live_seq2seq: an encoder-decoder in `tscope live` (live_internal.h).
 *
 * A copy or reverse model reads a source sentence and writes its answer one
 * token at a time, each written token read back as the decoder's next input
 * (greedy decoding, lesson 17). Live shows that loop by hand: the source
 * field is the encoder's input, the target field what the decoder has read
 * after <bos>, and the panel the next token the decoder writes. Tab appends
 * the most likely one to the target: one greedy step.
 *
 * The models have no tokenizer of their own: like `tscope run --text`, the
 * words of the text are numbered from 4 in the order they first appear (the
 * source's first, then the target's new ones), after <pad>, <bos>, <eos> and
 * <unk>. The model is built at its training lengths (S source positions, T
 * target ones); a field's tokens past what fits are greyed, and the
 * positions after the last token are padding, masked.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "live_internal.h"
#include "tscope/io.h"

ts_status live_s2s_init(ts_live *l) {
    live_s2s *s = &l->s2s;
    int S = l->m->cfg.seq, T = l->m->T;
    s->src = calloc((size_t)S, sizeof *s->src);
    s->tgt = calloc((size_t)T, sizeof *s->tgt);
    s->src_pad = calloc((size_t)S, 1);
    s->tgt_pad = calloc((size_t)T, 1);
    if (!s->src || !s->tgt || !s->src_pad || !s->tgt_pad) return ts_fail(TS_ERR_NOMEM, "live: out of memory");
    return ts_tokenizer_init(&s->words);
}

void live_s2s_free(ts_live *l) {
    live_s2s *s = &l->s2s;
    free(s->src), free(s->tgt), free(s->src_pad), free(s->tgt_pad);
    if (s->words.words) ts_tokenizer_free(&s->words);
    memset(s, 0, sizeof *s);
}

/* Why a field's token was left out: the first reason wins the status line. */
static void say(ts_live *l, const char *fmt, const char *what, int n) {
    if (l->note[0]) return;
    snprintf(l->note, sizeof l->note, fmt, what, n);
}

/* One field's words into ids (<bos> first, at most `most`), numbering new
 * words in the vocabulary while it has room; marks what is left out. */
static ts_status field_ids(ts_live *l, live_field *f, const char *side, int32_t *ids, uint8_t *pad, int most, int *n) {
    ts_tokenizer *words = &l->s2s.words;
    int vocab = l->m->cfg.vocab;
    free(f->bad);
    f->bad = calloc(f->len + 1, 1);
    if (!f->bad) return ts_fail(TS_ERR_NOMEM, "live: out of memory");
    f->read_from = 0;
    f->read_to = f->len;
    ids[0] = TS_TOK_BOS;
    *n = 1;
    size_t at = 0, start;
    char word[TS_TOKEN_MAX];
    while (f->text && ts_tokenizer_next(f->text, &at, word, &start)) {
        if (*n == most) { /* the model's positions are full: the rest is not read */
            f->read_to = start;
            say(l, "the %s has %d positions: <bos> and the words before the orange mark", side, most);
            break;
        }
        int32_t id = ts_tokenizer_id(words, word);
        if (id == TS_TOK_UNK && words->count < vocab) {
            TS_TRY(ts_tokenizer_add_text(words, word));
            id = ts_tokenizer_id(words, word);
        }
        if (id == TS_TOK_UNK) { /* no id left for a new word */
            memset(f->bad + start, 1, at - start);
            say(l, "the model has ids for %2$d words only: '%1$s' and the other red ones are left out", word,
                vocab - TS_TOK_N_SPECIAL);
            continue;
        }
        ids[(*n)++] = id;
    }
    for (int i = 0; i < most; i++) pad[i] = i >= *n;
    for (int i = *n; i < most; i++) ids[i] = TS_TOK_PAD;
    return TS_OK;
}

ts_status live_s2s_tokenize(ts_live *l) {
    live_s2s *s = &l->s2s;
    ts_tokenizer_free(&s->words);
    TS_TRY(ts_tokenizer_init(&s->words));
    l->note[0] = '\0';
    TS_TRY(field_ids(l, &l->field[LIVE_SOURCE], "encoder", s->src, s->src_pad, l->m->cfg.seq, &s->n_src));
    TS_TRY(field_ids(l, &l->field[LIVE_TARGET], "decoder", s->tgt, s->tgt_pad, l->m->T, &s->n_tgt));
    if (s->n_src <= 1 && !l->note[0]) snprintf(l->note, sizeof l->note, "type a source sentence");
    return TS_OK;
}

ts_model_input live_s2s_input(const ts_live *l) {
    const live_s2s *s = &l->s2s;
    /* nothing padded, nothing masked: the mask then costs nothing */
    bool src_full = s->n_src == l->m->cfg.seq, tgt_full = s->n_tgt == l->m->T;
    return (ts_model_input){.src_ids = s->src, .tgt_ids = s->tgt, .src_pad = src_full ? NULL : s->src_pad,
                            .tgt_pad = tgt_full ? NULL : s->tgt_pad};
}

void live_s2s_label(const ts_live *l, int32_t id, char *buf, size_t cap) {
    const char *special = ts_tokenizer_special_name(id);
    if (special) snprintf(buf, cap, "%s", special);
    else if (id < l->s2s.words.count) snprintf(buf, cap, "%s", ts_tokenizer_word(&l->s2s.words, id));
    else snprintf(buf, cap, "id %d", (int)id); /* an id no word of the fields has */
}

ts_status live_s2s_metadata(const ts_live *l, char **meta) {
    const live_s2s *s = &l->s2s;
    int S = l->m->cfg.seq, T = l->m->T;
    char (*labels)[TS_TOKEN_MAX] = malloc(sizeof *labels * (size_t)(S + T));
    const char **src = malloc(sizeof *src * (size_t)(S + T));
    char *config = ts_model_config_to_json(&l->m->cfg);
    ts_status st = labels && src && config ? TS_OK : ts_fail(TS_ERR_NOMEM, "live: out of memory");
    for (int i = 0; !st && i < S + T; i++) {
        live_s2s_label(l, i < S ? s->src[i] : s->tgt[i - S], labels[i], sizeof labels[i]);
        src[i] = labels[i];
    }
    char *line[] = {"tscope", "live"};
    if (!st) st = ts_trace_metadata_build(meta, config, src, S, src + S, T, 2, line);
    free(config), free(src), free(labels);
    return st;
}

ts_status live_s2s_append(ts_live *l, int32_t id) {
    char word[TS_TOKEN_MAX];
    live_s2s_label(l, id, word, sizeof word);
    if (id == TS_TOK_EOS) {
        snprintf(l->note, sizeof l->note, "the decoder wrote <eos>: its answer is complete");
        return TS_OK;
    }
    if (id < TS_TOK_N_SPECIAL || id >= l->s2s.words.count) {
        snprintf(l->note, sizeof l->note, "the decoder wrote %s, which no word stands for: nothing appended", word);
        return TS_OK;
    }
    if (l->s2s.n_tgt >= l->m->T) {
        snprintf(l->note, sizeof l->note, "the decoder's %d positions are all read: '%s' is its last word", l->m->T, word);
        return TS_OK;
    }
    live_field *f = &l->field[LIVE_TARGET];
    l->focus = LIVE_TARGET;
    f->cursor = f->len;
    if (f->len && f->text[f->len - 1] != ' ') TS_TRY(live_field_insert(f, " ", 1));
    return ts_live_insert(l, word);
}

void live_s2s_default_step(const ts_live *l, char *buf, size_t n) {
    snprintf(buf, n, "decoder.layers.%d.cross_attn.weights", l->m->cfg.dec_layers - 1);
}
