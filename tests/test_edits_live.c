/* tscope live's passes honour every edit they accept (issue 39; the library
 * side is tests/test_edits.c). A live session computes a pass with a
 * key/value cache: after an edit of the text, only the new positions go
 * through the forward (viz/viewer/live.c, cached_pass). A knock-out is an
 * ablation spec like `run --ablate`'s, so every step the model names is
 * knocked out in turn; each must either be refused by ts_live_knock or move
 * the next-token distribution, both in the pass it starts (every position
 * decoded with the edit on) and in the incremental pass after a character
 * is typed (the new position alone). Knocked back in, the distribution must
 * be the unedited one to the bit: the edit left nothing behind.
 *
 * Bit-for-bit comparisons are fair because the unedited distributions come
 * through the same path in the same chunks: a knock and a second knock of
 * the same step rebuild the cache from position 0, as a knock does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tscope/experiment.h"
#include "tscope/kernels.h"
#include "tscope/viewer.h"

#define CTX 16
#define V 18
static const char VOCAB_TEXT[] = "abcdefgh ijklmnop.";
#define TEXT "abcab"
#define TYPED "c"

static ts_model_config gpt(void) {
    ts_model_config c = {.arch = TS_ARCH_DECODER, .d_model = 16, .heads = 2, .ffn = 32, .layers = 2, .vocab = V,
                         .seq = CTX, .batch = 1, .max_pos = CTX, .eps = 1e-5f, .embed_eps = 1e-5f,
                         .norm = TS_NORM_PRE, .pe = TS_PE_LEARNED, .final_norm = true,
                         .activation = TS_ACT_GELU_TANH, .head = TS_HEAD_LM, .input = TS_INPUT_TOKENS,
                         .causal = true, .tie_embed = true, .seed = 5};
    return c;
}

typedef struct session {
    ts_model m;
    ts_lmtok tok;
    ts_live *l;
} session;

static void look_at(session *s, const char *name) {
    bool redraw;
    ts_view_event ev = {.kind = TS_VIEW_EV_FIND, .text = name};
    assert_ok(ts_live_view_event(s->l, &ev, &redraw));
    assert_string_equal(ts_live_step(s->l), name);
}

/* A session on TEXT looking at the logits (a step its cached pass can
 * rebuild from rows, so typing takes the incremental path). */
static void session_open(session *s) {
    ts_model_config c = gpt();
    assert_ok(ts_model_init(&s->m, &c));
    assert_ok(ts_lmtok_build(&s->tok, TS_LMTOK_CHAR, VOCAB_TEXT, strlen(VOCAB_TEXT), 0));
    assert_int_equal(s->tok.count, V);
    ts_live_options o = {.width = 1100, .height = 700, .text = TEXT};
    assert_ok(ts_live_new(&s->l, &s->m, &s->tok, &o));
    look_at(s, "logits");
}

static void session_close(session *s) {
    ts_live_free(s->l);
    ts_model_free(&s->m);
    ts_lmtok_free(&s->tok);
}

/* The panel's bars (its most likely next tokens), by token id; 0 for a
 * token it does not show. */
static void panel(const session *s, float *probs) {
    memset(probs, 0, sizeof(float) * V);
    int r = 0;
    for (float p; r < V; r++) {
        int id = ts_live_top(s->l, r, &p, NULL, 0);
        if (id < 0) break;
        assert_true(id < V);
        probs[id] = p;
    }
    assert_true(r >= 5);
}

static bool same(const float *a, const float *b) { return memcmp(a, b, sizeof(float) * V) == 0; }

typedef struct found {
    char text[16384];
    size_t len;
    int count;
} found;

static void add(found *f, const char *name, const char *what) {
    f->len += (size_t)snprintf(f->text + f->len, sizeof f->text - f->len, "    %s (%s)\n", name, what);
    if (f->len >= sizeof f->text) f->len = sizeof f->text - 1;
    f->count++;
}

typedef struct step_names {
    char name[256][160];
    int n;
} step_names;

static ts_status collect(void *ctx, const char *name, ts_op op, const ts_tensor *t, ts_tag tag) {
    (void)op, (void)t, (void)tag;
    step_names *l = ctx;
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->name[i], name) == 0) return TS_OK;
    assert_true(l->n < 256);
    snprintf(l->name[l->n++], sizeof l->name[0], "%s", name);
    return TS_OK;
}

static void every_knock_out_moves_the_cached_pass(void **state) {
    (void)state;
    session s;
    session_open(&s);
    step_names *steps = calloc(1, sizeof *steps);
    found *silent = calloc(1, sizeof *silent), *leaked = calloc(1, sizeof *leaked);
    assert_true(steps && silent && leaked);
    ts_hook hook = {.fn = collect, .ctx = steps};
    assert_ok(ts_model_dry_run(&s.m.cfg, &hook, NULL));
    /* the unedited distributions, through the path the knocked ones take:
     * a knock and its undo rebuild the cache from position 0 */
    float plain[V], plain_typed[V], got[V];
    assert_ok(ts_live_knock(s.l, "logits"));
    assert_ok(ts_live_knock(s.l, "logits"));
    panel(&s, plain);
    assert_ok(ts_live_insert(s.l, TYPED));
    assert_int_equal(ts_live_reused(s.l), (int)strlen(TEXT));
    panel(&s, plain_typed);
    assert_ok(ts_live_backspace(s.l));
    int refused = 0, tried = 0;
    for (int i = 0; i < steps->n; i++) {
        const char *name = steps->name[i];
        tried++;
        if (ts_live_knock(s.l, name) != TS_OK) {
            refused++;
            assert_true(strlen(ts_last_error()) > 10);
            assert_int_equal(ts_live_knocked(s.l), 0);
            continue;
        }
        panel(&s, got);
        bool moved = !same(got, plain);
        /* the incremental pass: the typed character's position alone, the edit on */
        assert_ok(ts_live_insert(s.l, TYPED));
        assert_int_equal(ts_live_reused(s.l), (int)strlen(TEXT));
        panel(&s, got);
        bool moved_typed = !same(got, plain_typed);
        if (!moved || !moved_typed)
            add(silent, name, !moved && !moved_typed ? "neither pass moved" : !moved ? "the full cached pass did not move"
                                                                                      : "the incremental pass did not move");
        assert_ok(ts_live_backspace(s.l));
        assert_ok(ts_live_knock(s.l, name)); /* back in */
        assert_int_equal(ts_live_knocked(s.l), 0);
        panel(&s, got);
        if (!same(got, plain)) {
            add(leaked, name, "knocked back in, the distribution is not the unedited one");
            session_close(&s);
            session_open(&s);
            assert_ok(ts_live_knock(s.l, "logits"));
            assert_ok(ts_live_knock(s.l, "logits"));
            panel(&s, got);
            assert_true(same(got, plain));
        }
    }
    print_message("live (GPT, cached passes): %d steps tried, %d refused, %d silent, %d leaked\n", tried, refused,
                  silent->count, leaked->count);
    int bad = silent->count + leaked->count;
    if (bad)
        print_error("live: knock-outs accepted and not honoured:\n  silent (%d):\n%s  leaked (%d):\n%s", silent->count,
                    silent->text, leaked->count, leaked->text);
    free(steps);
    free(silent);
    free(leaked);
    session_close(&s);
    if (bad) fail_msg("live: %d knock-outs accepted and not honoured (listed above)", bad);
}

int main(void) {
    assert_ok(ts_kernels_init());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_knock_out_moves_the_cached_pass),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
