/* live_internal: the state of a `tscope live` session, shared by live.c (the
 * session: life cycle, edits, knock-outs), live_pass.c (the passes, with a
 * cache), live_draw.c (the frame, from the state alone) and live_seq2seq.c
 * (an encoder-decoder's source and target fields, decoded one greedy step at
 * a time). Nothing outside viz/viewer includes it: tscope/viewer.h is the
 * public face. */
#ifndef TSCOPE_LIVE_INTERNAL_H
#define TSCOPE_LIVE_INTERNAL_H

#include "live_rows.h"
#include "tscope/experiment.h"
#include "tscope/tokenizer.h"
#include "tscope/viewer.h"

#define TOP_N 10 /* bars in the panel */
#define NAME_MAX_LEN 256
#define TS_LIVE_KNOCK_MAX 64
#define PANEL_W 330.0     /* the next-token panel on the right */
#define BOX_H 34.0        /* a field's box: one line (an encoder-decoder's two fields) */
#define BOX_H_TEXT 74.0   /* a language model's one field: three lines, wrapped */

/* The top of field i's box: clicks and drawing agree on it. */
static inline double box_y(int i) { return 8 + 40 * i; }

enum { LIVE_SOURCE = 0, LIVE_TARGET = 1 }; /* the fields; a language model has the first only */

/* A text field: UTF-8, a cursor, and which of its bytes the model reads. */
typedef struct live_field {
    char *text;
    size_t len, cap, cursor;   /* cursor: a byte offset at a character boundary */
    unsigned char *bad;        /* (len + 1) 1 where a byte belongs to a token the model cannot read */
    size_t read_from, read_to; /* the bytes the model reads: the rest is grey, marked at the edge */
} live_field;

/* An encoder-decoder's pass: the words of both fields as ids of one
 * vocabulary, the source's words first (as `tscope run --text` numbers them). */
typedef struct live_s2s {
    ts_tokenizer words;
    int32_t *src, *tgt;         /* (S), (T): <bos>, then the words, then <pad> */
    uint8_t *src_pad, *tgt_pad; /* (S), (T): 1 = padding */
    int n_src, n_tgt;           /* ids read, <bos> included */
} live_s2s;

struct ts_live {
    ts_model *m;
    ts_lmtok *tok;     /* a language model's tokenizer; NULL for an encoder-decoder */
    bool seq2seq;      /* an encoder-decoder: a source and a target field */
    live_s2s s2s;
    int capacity;      /* positions the model was built for */
    float temperature; /* of the panel's distribution */
    int top_k;         /* 0: every token */
    live_field field[2];
    int focus;         /* the field that takes the keys */
    double field_h;    /* the height of the fields across the top */
    /* the last pass of a language model */
    int32_t *ids;      /* (n_all) every token of the text */
    size_t *start;     /* (n_all + 1) byte where each token starts; start[n_all] = len */
    int n_all, first;  /* the model reads ids[first .. n_all) */
    int n_bad;
    char note[256];    /* one line for the status: what was left out, and why */
    int fd;            /* the anonymous file every pass is written into */
    ts_trace *trace;   /* NULL before the first pass or when the text is empty */
    ts_view_steps steps;
    ts_view_state st;
    ts_view_frame frame;
    bool have_state;
    char valued[NAME_MAX_LEN]; /* the step whose values the pass kept */
    /* the next token after the last position */
    float *probs;      /* (vocab) */
    float *before;     /* (vocab) the same with no head knocked out, while some are */
    /* heads knocked out by a click: their specs (experiment.h), and the experiment they make */
    char knocked[TS_LIVE_KNOCK_MAX][128];
    int n_knocked;
    ts_experiment ex;
    int32_t top[TOP_N];
    int n_top;
    int knock_gen; /* changes with every knock-out or restore */
    /* the logit lens: every layer's stream through the final norm and the head */
    bool lens;
    char before_lens[NAME_MAX_LEN]; /* the step on screen when the lens came on */
    /* Reusing the earlier positions (a causal model with a cache): the keys
     * and values of every layer, with the knock-outs and without (the
     * panel's "before"), the step on screen's rows and the logits' rows, all
     * for the tokens `cached` (the window of the last pass that used them). */
    bool can_cache, cache_ok;
    ts_kv_cache kv, kv_plain;
    int32_t *cached;
    int n_cached, cached_knock_gen;
    live_rows view_rows, logit_rows;
    int decode_end;                 /* the position the chunk being decoded ends at */
    char no_rows_for[NAME_MAX_LEN]; /* a step a cache cannot rebuild: full passes for it */
    int reused;                     /* positions the last pass did not recompute */
    /* the live views (render.h's, the web page's very layout) over a live
     * session (experiment.h) that follows this one's text and knock-outs */
    bool views;
    ts_live_session *sess;
    ts_canvas canvas; /* the views' last layout: its hit regions are the heads */
    int views_focus;  /* the head drawn large, layer * heads + head; -1: the last layer's first */
    double w, h;
    double model_ms, draw_ms; /* the last pass, the last frame */
    bool quit;
    cairo_surface_t *offscreen; /* ts_live_draw_offscreen's frame, made on first use */
};

/* The height of the fields' boxes: clicks and drawing agree on it. */
static inline double box_h(const ts_live *l) { return l->seq2seq ? BOX_H : BOX_H_TEXT; }

/* Insert n bytes at the field's cursor, which moves past them. */
ts_status live_field_insert(live_field *f, const char *s, size_t n);

/* ---- the session (live.c) ---- */

double live_now_ms(void);                       /* a monotonic clock, for the timings */
size_t live_char_len(const char *p, size_t left); /* bytes of the UTF-8 character at p */
/* A token's label in the panel and the readouts. */
void live_token_label(const ts_live *l, int32_t id, char *buf, size_t cap);
/* The model's most likely next token now (with any knock-outs), -1 before any pass. */
int32_t live_best_token(const ts_live *l);
int live_knocked_index(const ts_live *l, const char *spec); /* -1: that head is in place */
/* The attention module of the step on screen ("decoder.layers.1.self_attn"),
 * when it is drawn as a grid of all its heads; NULL otherwise. */
const char *live_head_grid_module(const ts_live *l, char *buf, size_t cap);

/* The live session given this pass's tokens and knock-outs, while the views are on. */
ts_status live_views_follow(ts_live *l);

/* ---- the passes (live_pass.c); ts_live_pass is public ---- */

void live_clear_pass(ts_live *l); /* the last pass and the viewer's state on it, gone */

/* ---- the frame (live_draw.c); ts_live_draw is public ---- */

/* Where the panel's row i (its label and bar) is: clicks and drawing agree on it. */
ts_render_rect live_bar_rect(const ts_live *l, int i);

/* ---- an encoder-decoder (live_seq2seq.c) ---- */

ts_status live_s2s_init(ts_live *l); /* the buffers, for the model's S and T */
void live_s2s_free(ts_live *l);
/* Both fields into ids (l->s2s), marking what the model cannot read and saying why in l->note. */
ts_status live_s2s_tokenize(ts_live *l);
/* The trace's metadata: the config, and the words of both sides for the axes. */
ts_status live_s2s_metadata(const ts_live *l, char **meta);
/* The model's input for the ids of the last tokenize. */
ts_model_input live_s2s_input(const ts_live *l);
/* A token's label in the panel: its word, or its special name. */
void live_s2s_label(const ts_live *l, int32_t id, char *buf, size_t cap);
/* One greedy step: the word of id appended to the target field (then a pass).
 * <eos>, a special id or a full decoder is said in l->note instead. */
ts_status live_s2s_append(ts_live *l, int32_t id);
/* The default step: the last decoder layer's cross-attention. */
void live_s2s_default_step(const ts_live *l, char *buf, size_t n);

#endif
