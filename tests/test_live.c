/* tscope live's session without a window (viz/viewer/live.c): a small
 * character GPT answers as text is typed. The panel's distribution is the
 * softmax of the full forward pass's last row; Tab appends its argmax;
 * characters the vocabulary lacks are left out and said; invalid UTF-8 is
 * refused; a text longer than the context slides the model's window; the
 * step on screen stays across edits; a model resized by ts_model_set_length
 * gives the logits of a model built at that length; scripts are checked. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tscope/experiment.h"
#include "tscope/kernels.h"
#include "tscope/render.h"
#include "../viz/viewer/live_internal.h"
#include "tscope/viewer.h"

#define CTX 16
static const char VOCAB_TEXT[] = "abcdefgh ijklmnop.";

static ts_model_config gpt(int seq) {
    ts_model_config c = {.arch = TS_ARCH_DECODER, .d_model = 16, .heads = 2, .ffn = 32, .layers = 2, .vocab = 18,
                         .seq = seq, .batch = 1, .max_pos = CTX, .eps = 1e-5f, .embed_eps = 1e-5f,
                         .norm = TS_NORM_PRE, .pe = TS_PE_LEARNED, .final_norm = true,
                         .activation = TS_ACT_GELU_TANH, .head = TS_HEAD_LM, .input = TS_INPUT_TOKENS,
                         .causal = true, .tie_embed = true, .seed = 5};
    return c;
}

typedef struct fixture {
    ts_model m;
    ts_lmtok tok;
    ts_live *l;
} fixture;

/* A session on a model of config c (the fixture's characters as its vocabulary). */
static void open_fixture_as(fixture *f, ts_model_config c, const char *text) {
    assert_ok(ts_model_init(&f->m, &c));
    assert_ok(ts_lmtok_build(&f->tok, TS_LMTOK_CHAR, VOCAB_TEXT, strlen(VOCAB_TEXT), 0));
    assert_int_equal(f->tok.count, c.vocab);
    ts_live_options o = {.width = 1100, .height = 700, .text = text};
    assert_ok(ts_live_new(&f->l, &f->m, &f->tok, &o));
}

static void open_fixture(fixture *f, const char *text) { open_fixture_as(f, gpt(CTX), text); }

static void close_fixture(fixture *f) {
    ts_live_free(f->l);
    ts_model_free(&f->m);
    ts_lmtok_free(&f->tok);
}

/* probs (V) = softmax(row), computed in double. */
static void softmax_of(const float *row, int V, float *probs) {
    double z = 0, best = row[0];
    for (int v = 0; v < V; v++) best = row[v] > best ? row[v] : best;
    for (int v = 0; v < V; v++) z += exp(row[v] - best);
    for (int v = 0; v < V; v++) probs[v] = (float)(exp(row[v] - best) / z);
}

/* The last row's softmax of a model built at exactly this length, on the same weights. */
static void reference_last_row(const fixture *f, const char *text, float *probs) {
    int n = (int)strlen(text);
    ts_model_config c = gpt(n);
    ts_model ref;
    assert_ok(ts_model_init(&ref, &c));
    memcpy(ref.block, f->m.block, sizeof(float) * (size_t)f->m.n_floats);
    int32_t ids[CTX];
    ts_lmtok tok = f->tok;
    ts_bpe_ids out = {0};
    assert_ok(ts_lmtok_encode(&tok, text, (size_t)n, &out));
    memcpy(ids, out.ids, sizeof(int32_t) * (size_t)n);
    ts_bpe_ids_free(&out);
    ts_model_input in = {.src_ids = ids};
    ts_tensor logits;
    assert_ok(ts_model_forward(&ref, &in, NULL, &logits));
    const float *row = logits.data + (int64_t)(n - 1) * c.vocab;
    softmax_of(row, c.vocab, probs);
    ts_model_free(&ref);
}

static void the_panel_is_the_last_rows_softmax(void **state) {
    (void)state;
    fixture f;
    open_fixture(&f, "abc");
    float want[18];
    reference_last_row(&f, "abc", want);
    char label[64];
    float p, prev = 2;
    for (int r = 0; r < 10; r++) {
        int id = ts_live_top(f.l, r, &p, label, sizeof label);
        assert_true(id >= 0);
        assert_true(fabsf(p - want[id]) < 1e-5f);
        assert_true(p <= prev); /* largest first */
        prev = p;
    }
    /* Tab appends the top token, the argmax */
    int top = ts_live_top(f.l, 0, NULL, NULL, 0);
    assert_ok(ts_live_append_token(f.l, 0));
    assert_int_equal(strlen(ts_live_text(f.l)), 4);
    assert_string_equal(ts_live_text(f.l) + 3, f.tok.piece[top]);
    assert_int_equal(ts_live_tokens(f.l), 4);
    close_fixture(&f);
}

static void edits_at_the_cursor(void **state) {
    (void)state;
    fixture f;
    open_fixture(&f, "abcd");
    assert_true(ts_live_cursor(f.l, -1));
    assert_true(ts_live_cursor(f.l, -1));
    assert_ok(ts_live_insert(f.l, "x"));
    assert_string_equal(ts_live_text(f.l), "abxcd");
    assert_ok(ts_live_backspace(f.l));
    assert_ok(ts_live_backspace(f.l));
    assert_string_equal(ts_live_text(f.l), "acd");
    assert_true(ts_live_cursor(f.l, -2));
    assert_false(ts_live_cursor(f.l, -1)); /* already at the start */
    assert_ok(ts_live_backspace(f.l));     /* nothing before the cursor */
    assert_string_equal(ts_live_text(f.l), "acd");
    float want[18], p;
    reference_last_row(&f, "acd", want);
    int id = ts_live_top(f.l, 0, &p, NULL, 0);
    assert_true(fabsf(p - want[id]) < 1e-5f);
    close_fixture(&f);
}

static void unknown_characters_are_left_out_and_said(void **state) {
    (void)state;
    fixture f;
    open_fixture(&f, "ab\xe2\x82\xac" "cZ");
    assert_int_equal(ts_live_tokens(f.l), 3);
    assert_non_null(strstr(ts_live_note(f.l), "2 characters"));
    assert_non_null(strstr(ts_live_note(f.l), "\xe2\x82\xac"));
    /* the rest still runs: the panel is the pass over "abc" */
    float want[18], p;
    reference_last_row(&f, "abc", want);
    int id = ts_live_top(f.l, 0, &p, NULL, 0);
    assert_true(fabsf(p - want[id]) < 1e-5f);
    /* invalid UTF-8 is refused with a note; the text stays */
    assert_ok(ts_live_insert(f.l, "\xc3("));
    assert_non_null(strstr(ts_live_note(f.l), "not valid UTF-8"));
    assert_int_equal(ts_live_tokens(f.l), 3);
    close_fixture(&f);
}

static void a_long_text_slides_the_window(void **state) {
    (void)state;
    fixture f;
    open_fixture(&f, "abcdefgh ijklmnop.abcdef");
    assert_int_equal(ts_live_tokens(f.l), 24);
    assert_non_null(strstr(ts_live_note(f.l), "last 16"));
    float want[18], p;
    reference_last_row(&f, " ijklmnop.abcdef", want); /* the last 16 characters */
    int id = ts_live_top(f.l, 0, &p, NULL, 0);
    assert_true(fabsf(p - want[id]) < 1e-5f);
    close_fixture(&f);
}

static void the_step_on_screen_stays(void **state) {
    (void)state;
    fixture f;
    open_fixture(&f, "abc");
    assert_string_equal(ts_live_step(f.l), "decoder.layers.0.self_attn.weights");
    bool redraw;
    ts_view_event ev = {.kind = TS_VIEW_EV_FIND, .text = "decoder.layers.1.ffn.act"};
    assert_ok(ts_live_view_event(f.l, &ev, &redraw));
    assert_true(redraw);
    assert_string_equal(ts_live_step(f.l), "decoder.layers.1.ffn.act");
    assert_ok(ts_live_insert(f.l, "d"));
    assert_string_equal(ts_live_step(f.l), "decoder.layers.1.ffn.act");
    /* emptied and typed again: still there */
    for (int i = 0; i < 4; i++) assert_ok(ts_live_backspace(f.l));
    assert_int_equal(ts_live_tokens(f.l), 0);
    assert_ok(ts_live_insert(f.l, "e"));
    assert_string_equal(ts_live_step(f.l), "decoder.layers.1.ffn.act");
    close_fixture(&f);
}

static void scripts_are_checked_and_replayed(void **state) {
    (void)state;
    assert_ok(ts_live_script_check("type:And God sa tab tab head:1 head:all up down pick:3 shot:x.png"));
    assert_int_equal(ts_live_script_check("type:abc tabb"), TS_OK); /* a non-word after type: is more text */
    assert_int_equal(ts_live_script_check("tab frobnicate"), TS_ERR_ARG);
    assert_int_equal(ts_live_script_check("head:12"), TS_ERR_ARG);
    assert_int_equal(ts_live_script_check("click:3"), TS_ERR_ARG);
    assert_int_equal(ts_live_script_check("shot:"), TS_ERR_ARG);
    fixture f;
    open_fixture(&f, NULL);
    char png[] = "/tmp/tscope-live-XXXXXX";
    int fd = mkstemp(png);
    assert_true(fd >= 0);
    close(fd);
    char script[128];
    snprintf(script, sizeof script, "type:ab cd tab backspace shot:%s", png);
    assert_ok(ts_live_replay(f.l, script, NULL, NULL, 1100, 700));
    assert_string_equal(ts_live_text(f.l), "ab cd");
    FILE *in = fopen(png, "rb");
    assert_non_null(in);
    unsigned char magic[8] = {0};
    assert_int_equal(fread(magic, 1, 8, in), 8);
    fclose(in);
    assert_memory_equal(magic, "\x89PNG\r\n\x1a\n", 8);
    unlink(png);
    close_fixture(&f);
}

/* A head knocked out by a click gives the distribution of the same ablation
 * run through the experiment module alone; a second knock brings it back. */
static void knocking_a_head_out(void **state) {
    (void)state;
    fixture f;
    open_fixture(&f, "abcab");
    float plain[18], p;
    reference_last_row(&f, "abcab", plain);
    assert_int_equal(ts_live_change(f.l, NULL, NULL, NULL, 0), -1); /* nothing out yet */
    assert_ok(ts_live_knock(f.l, "decoder.layers.1.self_attn.head0"));
    assert_int_equal(ts_live_knocked(f.l), 1);
    /* the same ablation, by hand */
    ts_experiment ex;
    ts_experiment_init(&ex);
    assert_ok(ts_experiment_add_ablate(&ex, "decoder.layers.1.self_attn.head0"));
    assert_ok(ts_experiment_check(&ex, &f.m.cfg));
    ts_hook hook = {0};
    ts_experiment_attach(&ex, &hook);
    int32_t ids[5] = {0};
    ts_bpe_ids out = {0};
    assert_ok(ts_lmtok_encode(&f.tok, "abcab", 5, &out));
    memcpy(ids, out.ids, sizeof ids);
    ts_bpe_ids_free(&out);
    ts_model_input in = {.src_ids = ids};
    ts_tensor logits;
    assert_ok(ts_model_set_length(&f.m, 5));
    assert_ok(ts_model_forward(&f.m, &in, &hook, &logits));
    float knocked[18];
    softmax_of(logits.data + 4 * 18, 18, knocked);
    for (int r = 0; r < 10; r++) {
        int id = ts_live_top(f.l, r, &p, NULL, 0);
        assert_true(fabsf(p - knocked[id]) < 1e-5f);
    }
    ts_experiment_free(&ex);
    float before, after;
    int moved = ts_live_change(f.l, &before, &after, NULL, 0);
    assert_true(moved >= 0);
    assert_true(fabsf(before - plain[moved]) < 1e-5f);
    /* a spec the model has no step for is refused, and the knock-out stays */
    assert_int_equal(ts_live_knock(f.l, "decoder.layers.7.self_attn.head0"), TS_ERR_ARG);
    assert_int_equal(ts_live_knocked(f.l), 1);
    assert_ok(ts_live_knock(f.l, "decoder.layers.1.self_attn.head0"));
    assert_int_equal(ts_live_knocked(f.l), 0);
    int id = ts_live_top(f.l, 0, &p, NULL, 0);
    assert_true(fabsf(p - plain[id]) < 1e-5f);
    close_fixture(&f);
}

/* ---- the cache: appending computes the new positions only ---- */

typedef struct capture {
    const char *name;
    float *values; /* contiguous */
    int64_t count;
} capture;

static ts_status capture_step(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag) {
    (void)op, (void)tag;
    capture *c = ctx;
    if (strcmp(name, c->name) != 0) return TS_OK;
    c->count = ts_tensor_numel(t);
    c->values = realloc(c->values, sizeof(float) * (size_t)c->count);
    int64_t idx[TS_MAX_RANK] = {0};
    for (int64_t i = 0; i < c->count; i++) {
        int64_t off = 0;
        for (int d = 0; d < t->rank; d++) off += idx[d] * t->stride[d];
        c->values[i] = t->data[off];
        for (int d = t->rank - 1; d >= 0; d--) {
            if (++idx[d] < t->shape[d]) break;
            idx[d] = 0;
        }
    }
    return TS_OK;
}

/* The step on screen in the live trace equals the step of one full forward
 * over the same window (with the same knock-out, if any). */
static void assert_step_is_a_full_passes(fixture *f, const char *name, const char *knock) {
    const ts_trace *t = ts_live_trace(f->l);
    assert_non_null(t);
    int64_t i = ts_trace_find((ts_trace *)t, name);
    assert_true(i >= 0);
    const float *got;
    assert_ok(ts_trace_values((ts_trace *)t, i, &got));
    const ts_trace_step *s = ts_trace_step_at((ts_trace *)t, i);
    int n = ts_live_tokens(f->l) < CTX ? ts_live_tokens(f->l) : CTX;
    const char *text = ts_live_text(f->l);
    text += strlen(text) - (size_t)n; /* the window: one byte a character here */
    int32_t ids[CTX];
    ts_bpe_ids out = {0};
    assert_ok(ts_lmtok_encode(&f->tok, text, (size_t)n, &out));
    memcpy(ids, out.ids, sizeof(int32_t) * (size_t)n);
    ts_bpe_ids_free(&out);
    ts_model_config c = f->m.cfg; /* the session's model, built at the window's length */
    c.seq = n;
    ts_model ref;
    assert_ok(ts_model_init(&ref, &c));
    memcpy(ref.block, f->m.block, sizeof(float) * (size_t)f->m.n_floats);
    capture cap = {.name = name};
    ts_hook hook = {.fn = capture_step, .ctx = &cap};
    ts_experiment ex;
    ts_experiment_init(&ex);
    if (knock) {
        assert_ok(ts_experiment_add_ablate(&ex, knock));
        assert_ok(ts_experiment_check(&ex, &c));
        ts_experiment_attach(&ex, &hook);
    }
    ts_model_input in = {.src_ids = ids};
    assert_ok(ts_model_forward(&ref, &in, &hook, NULL));
    assert_int_equal(cap.count, s->values_count);
    for (int64_t k = 0; k < cap.count; k++) {
        float want = cap.values[k];
        if (isinf(want)) {
            if (got[k] != want) fail_msg("%s [%lld]: %g, a full pass %g", name, (long long)k, got[k], want);
        } else if (!(fabsf(got[k] - want) <= 1e-5f * (1 + fabsf(want)))) {
            fail_msg("%s [%lld] at %d tokens: %g, a full pass %g", name, (long long)k, n, got[k], want);
        }
    }
    free(cap.values);
    ts_experiment_free(&ex);
    ts_model_free(&ref);
}

static void look_at(fixture *f, const char *name) {
    bool redraw;
    ts_view_event ev = {.kind = TS_VIEW_EV_FIND, .text = name};
    assert_ok(ts_live_view_event(f->l, &ev, &redraw));
    assert_string_equal(ts_live_step(f->l), name);
}

static void appending_computes_the_new_positions_only(void **state) {
    (void)state;
    /* every kind of step a view can show; the raw scores of earlier rows hold
     * products with later keys, which only a full pass computes, and a
     * norm's view reads all of the norm's steps */
    static const struct {
        const char *name;
        bool cached;
    } steps[] = {
        {"decoder.layers.0.self_attn.weights", true}, {"decoder.layers.1.self_attn.masked", true},
        {"decoder.layers.0.self_attn.values", true},  {"decoder.layers.1.self_attn.k", true},
        {"decoder.layers.0.norm1.mean", false},        {"decoder.layers.1.ffn.act", true},
        {"embed.pe", true},                           {"logits", true},
        {"decoder.layers.1.norm2.gamma", true},       {"decoder.layers.0.self_attn.scores", false},
    };
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
        fixture f;
        open_fixture(&f, "a");
        look_at(&f, steps[k].name);
        const char *typed = "bc de";
        for (int i = 0; typed[i]; i++) {
            char one[2] = {typed[i], 0};
            assert_ok(ts_live_insert(f.l, one));
            assert_int_equal(ts_live_reused(f.l), steps[k].cached ? i + 1 : 0);
            assert_step_is_a_full_passes(&f, steps[k].name, NULL);
        }
        close_fixture(&f);
    }
}

static void an_edit_recomputes_from_where_it_is(void **state) {
    (void)state;
    fixture f;
    open_fixture(&f, "abcdef");
    assert_true(ts_live_cursor(f.l, -1));
    assert_true(ts_live_cursor(f.l, -1));
    assert_ok(ts_live_insert(f.l, "k")); /* abcdkef: positions 0..3 stay */
    assert_int_equal(ts_live_reused(f.l), 4);
    assert_step_is_a_full_passes(&f, "decoder.layers.0.self_attn.weights", NULL);
    assert_ok(ts_live_backspace(f.l));
    assert_int_equal(ts_live_reused(f.l), 4);
    assert_true(ts_live_cursor(f.l, -2));
    assert_ok(ts_live_insert(f.l, "h")); /* at the start: nothing stays */
    assert_int_equal(ts_live_reused(f.l), 0);
    assert_step_is_a_full_passes(&f, "decoder.layers.0.self_attn.weights", NULL);
    /* a knock-out changes every position once, then appending is cached again */
    const char *knock = "decoder.layers.0.self_attn.head1";
    assert_ok(ts_live_knock(f.l, knock));
    assert_int_equal(ts_live_reused(f.l), 0);
    assert_true(ts_live_cursor(f.l, 2));
    assert_ok(ts_live_insert(f.l, "g"));
    assert_int_equal(ts_live_reused(f.l), 7);
    assert_step_is_a_full_passes(&f, "decoder.layers.0.self_attn.weights", knock);
    look_at(&f, "logits");
    assert_step_is_a_full_passes(&f, "logits", knock);
    /* a head replaced by its mean over the positions changes with every token: full passes */
    const char *mean = "decoder.layers.1.self_attn.head0=mean";
    assert_ok(ts_live_knock(f.l, knock));
    assert_ok(ts_live_knock(f.l, mean));
    assert_ok(ts_live_insert(f.l, "c"));
    assert_int_equal(ts_live_reused(f.l), 0);
    assert_step_is_a_full_passes(&f, "logits", mean);
    assert_ok(ts_live_knock(f.l, mean));
    assert_ok(ts_live_knock(f.l, knock));
    assert_ok(ts_live_backspace(f.l));
    /* past the context the window slides: every position moves */
    assert_ok(ts_live_insert(f.l, "abcdefgh"));
    assert_int_equal(ts_live_tokens(f.l), 16);
    assert_ok(ts_live_insert(f.l, "i"));
    assert_int_equal(ts_live_reused(f.l), 0);
    assert_step_is_a_full_passes(&f, "logits", knock);
    close_fixture(&f);
}

/* The lens comes on screen and goes; its last layer read through the final
 * norm and the head is the model's own output, so its last row is the panel. */
static void the_lens_comes_and_goes(void **state) {
    (void)state;
    fixture f;
    open_fixture(&f, "abcab");
    look_at(&f, "decoder.layers.1.ffn.act");
    assert_ok(ts_live_lens(f.l, true));
    assert_true(ts_live_lens_on(f.l));
    assert_string_equal(ts_live_step(f.l), "lens.layers.0");
    assert_ok(ts_live_insert(f.l, "c"));
    assert_int_equal(ts_live_reused(f.l), 0); /* full passes while the lens is on */
    const ts_trace *t = ts_live_trace(f.l);
    int64_t i = ts_trace_find((ts_trace *)t, "lens.layers.1");
    assert_true(i >= 0);
    const float *lens;
    assert_ok(ts_trace_values((ts_trace *)t, i, &lens));
    const float *last = lens + 5 * 18; /* (1, 6, 18): the sixth row */
    for (int r = 0; r < 10; r++) {
        float p;
        int id = ts_live_top(f.l, r, &p, NULL, 0);
        assert_true(fabsf(p - last[id]) < 1e-5f);
    }
    assert_ok(ts_live_lens(f.l, false));
    assert_false(ts_live_lens_on(f.l));
    assert_string_equal(ts_live_step(f.l), "decoder.layers.1.ffn.act");
    assert_int_equal(ts_trace_find((ts_trace *)ts_live_trace(f.l), "lens.layers.0"), -1);
    assert_ok(ts_live_insert(f.l, "d"));
    assert_int_equal(ts_live_reused(f.l), 6);
    assert_step_is_a_full_passes(&f, "decoder.layers.1.ffn.act", NULL);
    close_fixture(&f);
}

/* ---- an encoder-decoder: a source, a target, one greedy step at a time ---- */

static ts_model_config seq2seq(void) {
    ts_model_config c;
    assert_ok(ts_model_config_preset(&c, "tiny"));
    c.vocab = 16, c.seq = 10, c.tgt_seq = 9, c.batch = 1, c.dropout = 0, c.text = NULL, c.seed = 3;
    c.mask = TS_MASK_PADDING;
    return c;
}

/* The panel: the softmax of the decoder's row that read the target's last
 * token, for the fields' words numbered as `tscope run --text` does. */
static void a_source_and_a_target(void **state) {
    (void)state;
    ts_model_config c = seq2seq();
    ts_model m;
    assert_ok(ts_model_init(&m, &c));
    ts_live_options o = {.width = 1100, .height = 700, .text = "the cat sat on the mat", .target = "mat the"};
    ts_live *l;
    assert_ok(ts_live_new(&l, &m, NULL, &o));
    assert_int_equal(ts_live_fields(l), 2);
    assert_string_equal(ts_live_step(l), "decoder.layers.1.cross_attn.weights");
    /* the, cat, sat, on, mat: ids 4..8; <bos> first, <pad> after */
    int32_t src[10] = {1, 4, 5, 6, 7, 4, 8, 0, 0, 0}, tgt[9] = {1, 8, 4, 0, 0, 0, 0, 0, 0};
    uint8_t src_pad[10] = {0, 0, 0, 0, 0, 0, 0, 1, 1, 1}, tgt_pad[9] = {0, 0, 0, 1, 1, 1, 1, 1, 1};
    ts_model_input in = {.src_ids = src, .tgt_ids = tgt, .src_pad = src_pad, .tgt_pad = tgt_pad};
    ts_tensor logits;
    assert_ok(ts_model_forward(&m, &in, NULL, &logits));
    float want_p[16];
    softmax_of(logits.data + 2 * 16, 16, want_p); /* the position that read "the" */
    char label[64];
    for (int r = 0; r < 10; r++) {
        float p;
        int id = ts_live_top(l, r, &p, label, sizeof label);
        assert_true(fabsf(p - want_p[id]) < 1e-5f);
        if (id == 7) assert_string_equal(label, "on");
        if (id == 2) assert_string_equal(label, "<eos>");
    }
    /* a bar that is a word grows the target by that word; a special id is said, not typed */
    int word = -1, special = -1;
    for (int r = 0; r < 10; r++) {
        int id = ts_live_top(l, r, NULL, label, sizeof label);
        if (id >= 4 && id <= 8 && word < 0) word = r;
        if (id < 4 && special < 0) special = r;
    }
    assert_true(word >= 0 && special >= 0);
    ts_live_top(l, word, NULL, label, sizeof label);
    char want[80];
    snprintf(want, sizeof want, "mat the %s", label);
    assert_ok(ts_live_append_token(l, word));
    assert_string_equal(ts_live_target(l), want);
    assert_ok(ts_live_append_token(l, special));
    assert_string_equal(ts_live_target(l), want);
    assert_true(strstr(ts_live_note(l), "the decoder wrote <") != NULL);
    /* typing goes to the field that has the keys */
    assert_true(ts_live_focus(l, 0));
    assert_ok(ts_live_insert(l, " a"));
    assert_string_equal(ts_live_text(l), "the cat sat on the mat a");
    assert_string_equal(ts_live_target(l), want);
    ts_live_free(l);
    ts_model_free(&m);
}

static void what_an_encoder_decoder_cannot_read(void **state) {
    (void)state;
    ts_model_config c = seq2seq();
    ts_model m;
    assert_ok(ts_model_init(&m, &c));
    /* ten words: the encoder reads <bos> and nine */
    ts_live_options o = {.width = 1100, .height = 700, .text = "a b c d e f g h i j"};
    ts_live *l;
    assert_ok(ts_live_new(&l, &m, NULL, &o));
    assert_non_null(strstr(ts_live_note(l), "the encoder has 10 positions"));
    /* twelve ids for words: the target's new words past them are left out, in red */
    assert_ok(ts_live_backspace(l));
    assert_ok(ts_live_backspace(l));
    assert_string_equal(ts_live_note(l), "");
    assert_true(ts_live_focus(l, 1));
    assert_ok(ts_live_insert(l, "k l m n"));
    assert_non_null(strstr(ts_live_note(l), "'n'"));
    assert_non_null(strstr(ts_live_note(l), "12 words only"));
    /* a language model's flag is refused for it, and --target for a language model */
    ts_live_free(l);
    fixture f;
    ts_model_config g = gpt(CTX);
    assert_ok(ts_model_init(&f.m, &g));
    assert_ok(ts_lmtok_build(&f.tok, TS_LMTOK_CHAR, VOCAB_TEXT, strlen(VOCAB_TEXT), 0));
    ts_live_options t = {.width = 1100, .height = 700, .target = "abc"};
    assert_int_equal(ts_live_new(&f.l, &f.m, &f.tok, &t), TS_ERR_ARG);
    assert_non_null(strstr(ts_last_error(), "--target"));
    ts_model_free(&f.m);
    ts_lmtok_free(&f.tok);
    ts_model_free(&m);
}

/* A LayerNorm's view draws its in and out side by side: a pass keeps every
 * step of the norm, and is a full one. */
static void a_norms_view_has_its_norm(void **state) {
    (void)state;
    fixture f;
    open_fixture(&f, "abc");
    look_at(&f, "decoder.layers.1.norm2.std");
    assert_ok(ts_live_insert(f.l, "d"));
    assert_int_equal(ts_live_reused(f.l), 0);
    ts_trace *t = (ts_trace *)ts_live_trace(f.l);
    static const char *const kept[] = {"in", "mean", "std", "out", "gamma", "beta"};
    for (size_t k = 0; k < sizeof kept / sizeof kept[0]; k++) {
        char name[64];
        snprintf(name, sizeof name, "decoder.layers.1.norm2.%s", kept[k]);
        int64_t i = ts_trace_find(t, name);
        assert_true(i >= 0);
        assert_true(ts_trace_step_at(t, i)->has_values);
    }
    assert_step_is_a_full_passes(&f, "decoder.layers.1.norm2.out", NULL);
    assert_false(ts_trace_step_at(t, ts_trace_find(t, "decoder.layers.1.ffn.act"))->has_values);
    close_fixture(&f);
}

/* A model without positions: its cache is as long as the model was built,
 * however short the full passes before made it. */
static void a_model_without_positions_keeps_its_cache(void **state) {
    (void)state;
    fixture f;
    ts_model_config c = gpt(CTX);
    c.pe = TS_PE_NONE;
    c.max_pos = 0;
    open_fixture_as(&f, c, "ab");
    look_at(&f, "decoder.layers.0.self_attn.scores"); /* full passes: the model is made 2 long */
    look_at(&f, "decoder.layers.0.self_attn.weights");
    assert_ok(ts_live_knock(f.l, "decoder.layers.0.self_attn.head0"));
    assert_ok(ts_live_insert(f.l, "cdefgh"));
    assert_ok(ts_live_insert(f.l, "i"));
    assert_int_equal(ts_live_reused(f.l), 8);
    assert_step_is_a_full_passes(&f, "decoder.layers.0.self_attn.weights", "decoder.layers.0.self_attn.head0");
    close_fixture(&f);
}

static void set_length_matches_a_model_built_at_that_length(void **state) {
    (void)state;
    ts_model_config c = gpt(CTX), c5 = gpt(5);
    ts_model m, m5;
    assert_ok(ts_model_init(&m, &c));
    assert_ok(ts_model_init(&m5, &c5));
    memcpy(m5.block, m.block, sizeof(float) * (size_t)m.n_floats);
    int32_t ids[5] = {1, 4, 9, 2, 7};
    ts_model_input in = {.src_ids = ids};
    ts_tensor a, b;
    assert_ok(ts_model_set_length(&m, 5));
    assert_ok(ts_model_forward(&m, &in, NULL, &a));
    assert_ok(ts_model_forward(&m5, &in, NULL, &b));
    assert_shape(&a, 1, 5, 18);
    assert_floats_close(a.data, b.data, 5 * 18, 0);
    assert_int_equal(ts_model_set_length(&m, CTX + 1), TS_ERR_ARG);
    assert_ok(ts_model_set_length(&m, CTX)); /* back to the length it was built for */
    ts_model_free(&m);
    ts_model_free(&m5);
}

/* ---- the live views: laid out once, painted by cairo or into a display list ---- */

/* The display list's TEXT ops: how many hold `needle`. */
static int dl_texts_with(const ts_dl *d, const char *needle) {
    int n = 0;
    for (int i = 0; i < ts_dl_count(d); i++) {
        const float *op = d->ops + (size_t)i * TS_DL_FLOATS;
        if (op[0] == TS_DL_TEXT && strstr(d->text + (size_t)op[9], needle)) n++;
    }
    return n;
}

/* A live session knocks a head out and keeps the loss of the whole text
 * before and after; the views it lays out carry both means, each head is a
 * hit region, and cairo paints the same cells the display list holds. */
static void the_views_show_the_loss_before_and_after(void **state) {
    (void)state;
    fixture f;
    open_fixture(&f, "");
    ts_live_session *s = ts_live_session_new(&f.m, &f.tok);
    assert_non_null(s);
    assert_int_equal(ts_live_session_set_text(s, "abc defgh ijk."), 0);
    int n = ts_live_session_tokens(s);
    assert_int_equal(n, 14);
    float plain[CTX];
    memcpy(plain, ts_live_session_loss(s), sizeof(float) * (size_t)n);
    assert_true(isnan(plain[0]) && !isnan(plain[1]));
    assert_int_equal(ts_live_session_knock(s, 1, 0), 1);
    const float *before = ts_live_session_loss_before(s), *after = ts_live_session_loss(s);
    double changed = 0;
    for (int i = 1; i < n; i++) {
        assert_float_equal(before[i], plain[i], 1e-6); /* "before" is the plain model's */
        changed = fmax(changed, fabs(after[i] - plain[i]));
    }
    assert_true(changed > 1e-4); /* the knock-out reaches the loss */

    ts_live_views v = ts_live_views_of(s, 1, 0);
    assert_non_null(v.loss_before);
    ts_dl d = {0};
    ts_canvas cv = {0};
    ts_dl_canvas(&d, &cv);
    double h = ts_live_views_draw(&cv, &v, 900, 0);
    assert_true(h > 200 && ts_dl_count(&d) > 0);
    char title[64];
    snprintf(title, sizeof title, "%.3f before, %.3f after", ts_live_views_mean_loss(before, n), ts_live_views_mean_loss(after, n));
    assert_int_equal(dl_texts_with(&d, title), 1);
    assert_int_equal(dl_texts_with(&d, "1.0 out"), 1);
    for (int i = 0; i < cv.n_hits; i++) /* every head, and each where it was laid out */
        assert_int_equal(ts_canvas_hit_at(&cv, cv.hits[i].x + cv.hits[i].w / 2, cv.hits[i].y + cv.hits[i].h / 2), cv.hits[i].id);
    assert_int_equal(cv.n_hits, 2 * 2);
    assert_int_equal(ts_canvas_hit_at(&cv, -5, -5), -1);

    /* cairo paints the first image's cells as the list holds them */
    const float *img = NULL;
    for (int i = 0; i < ts_dl_count(&d) && !img; i++)
        if (d.ops[(size_t)i * TS_DL_FLOATS] == TS_DL_IMAGE) img = d.ops + (size_t)i * TS_DL_FLOATS;
    assert_non_null(img);
    cairo_surface_t *sf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 900, (int)h);
    cairo_t *cr = cairo_create(sf);
    ts_canvas cc = {0};
    ts_canvas_cairo(&cc, cr);
    ts_live_views_draw(&cc, &v, 900, 0);
    cairo_surface_flush(sf);
    int cols = (int)img[5];
    double cell = img[3] / cols;
    for (int r = 0; r < cols; r += 5) { /* the diagonal's cells */
        const unsigned char *want = d.pixels + (size_t)img[9] + ((size_t)r * cols + r) * 4;
        int px = (int)(img[1] + (r + 0.5) * cell), py = (int)(img[2] + (r + 0.5) * cell);
        uint32_t got = *(uint32_t *)(cairo_image_surface_get_data(sf) + (size_t)py * cairo_image_surface_get_stride(sf) + (size_t)px * 4);
        assert_int_equal((got >> 16) & 0xff, want[0]);
        assert_int_equal((got >> 8) & 0xff, want[1]);
        assert_int_equal(got & 0xff, want[2]);
    }
    assert_int_equal(cc.n_hits, cv.n_hits);
    cairo_destroy(cr);
    cairo_surface_destroy(sf);
    ts_canvas_free(&cc);
    ts_canvas_free(&cv);
    ts_dl_free(&d);
    ts_live_session_close(s);
    close_fixture(&f);
}

static const char *letter(void *u, int i) {
    static char buf[4];
    (void)u;
    buf[0] = (char)('a' + i % 26), buf[1] = 0;
    return buf;
}

/* At any length the views' token axes keep labels: thinned, each with its
 * position, the last always, none overlapping its neighbour. */
static void the_views_keep_numbered_labels_at_any_length(void **state) {
    (void)state;
    enum { N = 300 };
    float *attn = calloc((size_t)N * N, sizeof(float)), loss[N], lens_p[N];
    int32_t lens_id[N];
    char knocked[1] = {0};
    assert_non_null(attn);
    for (int i = 0; i < N; i++) attn[(size_t)i * N + i] = 1, loss[i] = (float)(i % 7), lens_p[i] = 0.5f, lens_id[i] = 0;
    ts_live_views v = {.L = 1, .H = 1, .n = N, .cap = N, .attn = attn, .knocked = knocked, .lens_id = lens_id,
                       .lens_p = lens_p, .loss = loss, .token = letter, .vocab = letter, .u = NULL};
    ts_dl d = {0};
    ts_canvas cv = {0};
    ts_dl_canvas(&d, &cv);
    ts_live_views_draw(&cv, &v, 1000, 0);
    char last[16];
    snprintf(last, sizeof last, "%d %s", N - 1, letter(NULL, N - 1));
    assert_true(dl_texts_with(&d, last) >= 2); /* the large head's axes and the strips' */
    /* the loss strip's axis: the last TEXT ops of one y, numbered, apart by more than a label */
    double prev_x = -1e9, y = -1;
    int labels = 0;
    for (int i = ts_dl_count(&d) - 1; i >= 0; i--) {
        const float *op = d.ops + (size_t)i * TS_DL_FLOATS;
        if (op[0] != TS_DL_TEXT) continue;
        const char *t = d.text + (size_t)op[9];
        if (t[0] < '0' || t[0] > '9') {
            if (labels) break;
            continue;
        }
        if (y < 0) y = op[2];
        if (op[2] != y) break;
        assert_non_null(strchr(t, ' ')); /* "40 o": the position, then the token */
        if (labels) assert_true(prev_x - op[1] >= 0.62 * op[3] * (double)strlen(t));
        prev_x = op[1];
        labels++;
    }
    assert_true(labels >= 5);
    ts_canvas_free(&cv);
    ts_dl_free(&d);
    free(attn);
}

/* `tscope live` shows the same views (Ctrl+G): a click on a head of their
 * grid names that head, and knocking it out shows in the views. */
static void live_shows_the_views(void **state) {
    (void)state;
    fixture f;
    open_fixture(&f, "abc defgh");
    assert_ok(ts_live_show_views(f.l, true));
    assert_true(ts_live_show_views_on(f.l));
    assert_ok(ts_live_draw_offscreen(f.l));
    const ts_canvas *cv = &f.l->canvas;
    assert_int_equal(cv->n_hits, 4);
    char spec[300];
    const ts_canvas_hit *b = &cv->hits[3]; /* layer 1, head 1 */
    assert_true(ts_live_head_at(f.l, b->x + b->w / 2, b->y + b->h / 2 + f.l->field_h, spec, sizeof spec));
    assert_string_equal(spec, "decoder.layers.1.self_attn.head1");
    assert_ok(ts_live_knock(f.l, spec));
    assert_int_equal(ts_live_session_n_knocked(f.l->sess), 1);
    assert_int_equal(ts_live_session_knocked(f.l->sess, 1, 1), 1);
    assert_ok(ts_live_insert(f.l, "i"));
    assert_int_equal(ts_live_session_tokens(f.l->sess), 10);
    assert_ok(ts_live_knock(f.l, "1.1")); /* back */
    assert_int_equal(ts_live_session_n_knocked(f.l->sess), 0);
    assert_ok(ts_live_show_views(f.l, false));
    close_fixture(&f);
}

int main(void) {
    assert_ok(ts_kernels_init());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_panel_is_the_last_rows_softmax),
        cmocka_unit_test(edits_at_the_cursor),
        cmocka_unit_test(unknown_characters_are_left_out_and_said),
        cmocka_unit_test(a_long_text_slides_the_window),
        cmocka_unit_test(the_step_on_screen_stays),
        cmocka_unit_test(scripts_are_checked_and_replayed),
        cmocka_unit_test(knocking_a_head_out),
        cmocka_unit_test(set_length_matches_a_model_built_at_that_length),
        cmocka_unit_test(appending_computes_the_new_positions_only),
        cmocka_unit_test(an_edit_recomputes_from_where_it_is),
        cmocka_unit_test(the_lens_comes_and_goes),
        cmocka_unit_test(a_norms_view_has_its_norm),
        cmocka_unit_test(a_model_without_positions_keeps_its_cache),
        cmocka_unit_test(a_source_and_a_target),
        cmocka_unit_test(what_an_encoder_decoder_cannot_read),
        cmocka_unit_test(the_views_show_the_loss_before_and_after),
        cmocka_unit_test(the_views_keep_numbered_labels_at_any_length),
        cmocka_unit_test(live_shows_the_views),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
