/* Viewer logic without a window: the step tree and its folding, finding a
 * step by name, and how keys and the mouse change the state (the steps of a
 * two-layer encoder, named as the model traces them); then whole frames of a
 * real trace (written with the trace writer, three snapshots) drawn into an
 * image surface: drawing leaves the state untouched, and the centre, the
 * status bar and the slider show what the state says. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tscope/render.h"
#include "tscope/viewer.h"

#define MAX_STEPS 512

static const char *const layer_leaves[] = {
    "self_attn.qkv", "self_attn.q",      "self_attn.k",      "self_attn.v",   "self_attn.scores",
    "self_attn.scaled", "self_attn.weights", "self_attn.values", "self_attn.concat", "self_attn.out",
    "norm1.in",      "norm1.mean",       "norm1.std",        "norm1.out",     "ffn.hidden",
    "ffn.act",       "ffn.out",          "norm2.in",         "norm2.mean",    "norm2.std",
    "norm2.out",     "out",
};
#define N_LEAVES ((int)(sizeof layer_leaves / sizeof layer_leaves[0]))

static char names[MAX_STEPS][64];
static ts_view_entry entries[MAX_STEPS];
static int n_entries;

static void add(const char *name, ts_tag tag, int rank, const int64_t *shape) {
    ts_view_entry *e = &entries[n_entries];
    memset(e, 0, sizeof *e);
    snprintf(names[n_entries], sizeof names[0], "%s", name);
    e->name = names[n_entries];
    e->tag = tag;
    e->rank = rank;
    memcpy(e->shape, shape, (size_t)rank * sizeof *shape);
    e->has_values = true;
    e->batch_index = -1;
    n_entries++;
}

/* One forward pass of a 2-layer encoder with batch B and 2 heads. */
static void add_pass(int64_t batch) {
    add("input", TS_TAG_PLAIN, 2, (int64_t[]){batch, 4});
    add("embed.tokens", TS_TAG_PLAIN, 3, (int64_t[]){batch, 4, 16});
    add("embed.pe", TS_TAG_POSENC, 2, (int64_t[]){4, 16});
    add("embed.out", TS_TAG_PLAIN, 3, (int64_t[]){batch, 4, 16});
    for (int l = 0; l < 2; l++)
        for (int k = 0; k < N_LEAVES; k++) {
            char name[64];
            snprintf(name, sizeof name, "encoder.layers.%d.%s", l, layer_leaves[k]);
            bool attn = strstr(name, "weights") || strstr(name, "scores") || strstr(name, "scaled");
            if (attn)
                add(name, strstr(name, "weights") ? TS_TAG_ATTN_WEIGHTS : TS_TAG_ATTN_SCORES, 4,
                    (int64_t[]){batch, 2, 4, 4});
            else
                add(name, TS_TAG_PLAIN, 3, (int64_t[]){batch, 4, 16});
        }
    add("encoder.out", TS_TAG_PLAIN, 3, (int64_t[]){batch, 4, 16});
}

#define PASS_STEPS (4 + 2 * N_LEAVES + 1)

typedef struct fixture {
    ts_view_steps steps;
    ts_view_state st;
} fixture;

static int setup_passes(void **state, int passes, double h) {
    n_entries = 0;
    for (int i = 0; i < passes; i++) add_pass(3);
    fixture *f = calloc(1, sizeof *f);
    if (!f) return -1;
    if (ts_view_steps_init(&f->steps, entries, n_entries) != TS_OK) return -1;
    if (ts_view_state_init(&f->st, &f->steps, 1280, h) != TS_OK) return -1;
    *state = f;
    return 0;
}

static int setup_one(void **state) { return setup_passes(state, 1, 800); }
static int setup_training(void **state) { return setup_passes(state, 3, 800); }
static int setup_short_window(void **state) { return setup_passes(state, 1, 300); }

static int teardown(void **state) {
    fixture *f = *state;
    ts_view_state_free(&f->st);
    ts_view_steps_free(&f->steps);
    free(f);
    return 0;
}

static bool send_key(fixture *f, ts_view_key k) {
    ts_view_event ev = {.kind = TS_VIEW_EV_KEY, .key = k};
    return ts_view_update(&f->st, &f->steps, NULL, &ev);
}

static bool send_char(fixture *f, char ch) {
    ts_view_event ev = {.kind = TS_VIEW_EV_KEY, .key = TS_VIEW_KEY_CHAR, .ch = ch};
    return ts_view_update(&f->st, &f->steps, NULL, &ev);
}

static bool send_script(fixture *f, const ts_view_frame *frame, const char *script) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", script);
    bool any = false;
    for (char *w = strtok(buf, " "); w; w = strtok(NULL, " ")) {
        ts_view_event ev;
        const char *shot;
        assert_ok(ts_view_script_word(w, &ev, &shot));
        any |= ts_view_update(&f->st, &f->steps, frame, &ev);
    }
    return any;
}

static const char *current_name(const fixture *f) { return f->steps.entry[f->st.current].name; }

static void go(fixture *f, const char *name) {
    ts_view_event ev = {.kind = TS_VIEW_EV_FIND, .text = name};
    ts_view_update(&f->st, &f->steps, NULL, &ev);
    assert_string_equal(current_name(f), name);
}

/* ---- the tree ---- */

static void modules_and_layers_come_from_names(void **state) {
    fixture *f = *state;
    const ts_view_steps *s = &f->steps;
    assert_int_equal(s->n, PASS_STEPS);
    assert_int_equal(s->n_layers, 2);
    assert_string_equal(s->layer_name[0], "encoder.layers.0");
    assert_string_equal(s->layer_name[1], "encoder.layers.1");
    assert_int_equal(s->entry[0].layer, -1);
    assert_string_equal(s->module_name[s->entry[0].module], "");
    assert_string_equal(s->module_name[s->entry[1].module], "embed");
    int64_t w = ts_view_find(s, "encoder.layers.1.self_attn.weights", 0);
    assert_true(w > 0);
    assert_int_equal(s->entry[w].layer, 1);
    assert_string_equal(s->module_name[s->entry[w].module], "encoder.layers.1.self_attn");
    int64_t out = ts_view_find(s, "encoder.layers.0.out", 0);
    assert_string_equal(s->module_name[s->entry[out].module], "encoder.layers.0");
    assert_int_equal(s->n_snapshots, 1);
    assert_int_equal(ts_view_heads(&s->entry[w]), 2);
    assert_int_equal(ts_view_heads(&s->entry[0]), 0);
    assert_int_equal(ts_view_batches(&s->entry[w]), 3);
    assert_int_equal(ts_view_batches(&s->entry[2]), 0); /* embed.pe has no batch */
}

static void layer_names_need_a_number(void **state) {
    (void)state;
    ts_view_entry e[3] = {{.name = "xlayers.1.a"}, {.name = "decoder.layers.12.cross_attn.q"},
                          {.name = "grad.encoder.layers.3"}};
    ts_view_steps s;
    assert_ok(ts_view_steps_init(&s, e, 3));
    assert_int_equal(s.entry[0].layer, -1);
    assert_string_equal(s.layer_name[s.entry[1].layer], "decoder.layers.12");
    assert_string_equal(s.layer_name[s.entry[2].layer], "grad.encoder.layers.3");
    /* A layer with one step gets no header: the step is a row of its own. */
    ts_view_row rows[8];
    int n = ts_view_rows(&s, 0, rows);
    assert_int_equal(n, 3);
    for (int i = 0; i < n; i++) assert_int_equal(rows[i].kind, TS_VIEW_ROW_STEP);
    ts_view_steps_free(&s);
}

static void other_layers_are_folded(void **state) {
    fixture *f = *state;
    ts_view_row rows[2 * MAX_STEPS + 8];
    /* At the input: 4 embedding rows, two folded layers, encoder.out. */
    int n = ts_view_rows(&f->steps, 0, rows);
    assert_int_equal(n, 7);
    assert_int_equal(rows[4].kind, TS_VIEW_ROW_LAYER);
    assert_false(rows[4].open);
    assert_int_equal(rows[4].count, N_LEAVES);
    assert_int_equal(rows[5].layer, 1);
    assert_int_equal(rows[6].kind, TS_VIEW_ROW_STEP);
    /* Inside layer 1: its header is open and its steps follow. */
    int64_t w = ts_view_find(&f->steps, "encoder.layers.1.ffn.out", 0);
    n = ts_view_rows(&f->steps, w, rows);
    assert_int_equal(n, 7 + N_LEAVES + 4); /* self_attn, norm1, ffn, norm2 headers */
    assert_false(rows[4].open);
    assert_true(rows[5].open);
    /* Its modules have headers: self_attn holds 10 steps. */
    assert_int_equal(rows[6].kind, TS_VIEW_ROW_MODULE);
    assert_int_equal(rows[6].step, rows[5].step);
    assert_int_equal(rows[6].count, 10);
    assert_string_equal(f->steps.module_name[rows[6].module], "encoder.layers.1.self_attn");
    assert_int_equal(rows[7].kind, TS_VIEW_ROW_STEP);
    assert_int_equal(rows[7].module, rows[6].module);
    /* encoder.layers.1.out belongs to the layer itself: no header. */
    assert_int_equal(rows[n - 2].kind, TS_VIEW_ROW_STEP);
    assert_int_equal(rows[n - 2].module, -1);
    assert_string_equal(f->steps.entry[rows[n - 2].step].name, "encoder.layers.1.out");
    bool found = false;
    for (int i = 0; i < n; i++) found |= rows[i].kind == TS_VIEW_ROW_STEP && rows[i].step == w;
    assert_true(found);
}

static void the_state_keeps_rows_for_the_current_step(void **state) {
    fixture *f = *state;
    assert_int_equal(f->st.n_rows, 7);
    go(f, "encoder.layers.0.norm1.mean");
    assert_int_equal(f->st.n_rows, 7 + N_LEAVES + 4);
    assert_true(f->st.rows[4].open);
}

/* ---- finding ---- */

static void find_prefers_an_exact_name(void **state) {
    fixture *f = *state;
    const ts_view_steps *s = &f->steps;
    int64_t out = ts_view_find(s, "encoder.out", 0);
    assert_string_equal(s->entry[out].name, "encoder.out");
    int64_t w = ts_view_find(s, "weights", 0);
    assert_string_equal(s->entry[w].name, "encoder.layers.0.self_attn.weights");
    /* Searching again from there finds the next one, then wraps around. */
    int64_t w1 = ts_view_find(s, "weights", w);
    assert_string_equal(s->entry[w1].name, "encoder.layers.1.self_attn.weights");
    assert_int_equal(ts_view_find(s, "weights", w1), w);
    int64_t g = ts_view_find(s, "*.layers.1.norm?.mean", 0);
    assert_string_equal(s->entry[g].name, "encoder.layers.1.norm1.mean");
    assert_int_equal(ts_view_find(s, "decoder", 0), -1);
    assert_int_equal(ts_view_find(s, "", 0), -1);
    /* what `/` shows while typing: how many steps the text matches */
    assert_int_equal(ts_view_find_count(s, "self_attn.weights", 0), 2);
    assert_int_equal(ts_view_find_count(s, "*.layers.1.norm?.mean", 0), 2);
    assert_int_equal(ts_view_find_count(s, "decoder", 0), 0);
    assert_int_equal(ts_view_find_count(s, "", 0), 0);
}

static void slash_types_a_name_and_enter_jumps(void **state) {
    fixture *f = *state;
    assert_true(send_char(f, '/'));
    assert_int_equal(f->st.mode, TS_VIEW_MODE_FIND);
    const char *typed = "norm2.stdx";
    for (const char *p = typed; *p; p++) send_char(f, *p);
    send_key(f, TS_VIEW_KEY_BACKSPACE);
    assert_string_equal(f->st.find, "norm2.std");
    /* While typing, keys are text: 'q' does not quit. */
    assert_false(f->st.quit);
    send_key(f, TS_VIEW_KEY_ENTER);
    assert_int_equal(f->st.mode, TS_VIEW_MODE_BROWSE);
    assert_string_equal(current_name(f), "encoder.layers.0.norm2.std");
    /* A name that is nowhere says so and stays put. */
    send_script(f, NULL, "/ n o p e enter");
    assert_string_equal(current_name(f), "encoder.layers.0.norm2.std");
    assert_non_null(strstr(f->st.message, "no step matches 'nope'"));
    /* Esc leaves find mode without moving or quitting. */
    send_script(f, NULL, "/ o u t esc");
    assert_int_equal(f->st.mode, TS_VIEW_MODE_BROWSE);
    assert_false(f->st.quit);
    assert_string_equal(current_name(f), "encoder.layers.0.norm2.std");
}

/* ---- keys ---- */

static void arrows_step_and_stop_at_the_ends(void **state) {
    fixture *f = *state;
    assert_false(send_key(f, TS_VIEW_KEY_LEFT));
    assert_int_equal(f->st.current, 0);
    assert_true(send_key(f, TS_VIEW_KEY_RIGHT));
    assert_true(send_key(f, TS_VIEW_KEY_RIGHT));
    assert_int_equal(f->st.current, 2);
    assert_true(send_key(f, TS_VIEW_KEY_END));
    assert_int_equal(f->st.current, PASS_STEPS - 1);
    assert_false(send_key(f, TS_VIEW_KEY_RIGHT));
    assert_true(send_key(f, TS_VIEW_KEY_HOME));
    assert_int_equal(f->st.current, 0);
}

static void pages_move_by_module(void **state) {
    fixture *f = *state;
    send_key(f, TS_VIEW_KEY_PGDN);
    assert_string_equal(current_name(f), "embed.tokens");
    send_key(f, TS_VIEW_KEY_PGDN);
    assert_string_equal(current_name(f), "encoder.layers.0.self_attn.qkv");
    send_key(f, TS_VIEW_KEY_PGDN);
    assert_string_equal(current_name(f), "encoder.layers.0.norm1.in");
    /* Page up from inside a module goes to its start, then to the module before. */
    send_key(f, TS_VIEW_KEY_RIGHT);
    send_key(f, TS_VIEW_KEY_PGUP);
    assert_string_equal(current_name(f), "encoder.layers.0.norm1.in");
    send_key(f, TS_VIEW_KEY_PGUP);
    assert_string_equal(current_name(f), "encoder.layers.0.self_attn.qkv");
    go(f, "encoder.out");
    assert_false(send_key(f, TS_VIEW_KEY_PGDN));
}

static void up_and_down_keep_the_role_across_layers(void **state) {
    fixture *f = *state;
    go(f, "encoder.layers.0.self_attn.weights");
    assert_true(send_key(f, TS_VIEW_KEY_DOWN));
    assert_string_equal(current_name(f), "encoder.layers.1.self_attn.weights");
    assert_false(send_key(f, TS_VIEW_KEY_DOWN));
    assert_true(send_key(f, TS_VIEW_KEY_UP));
    assert_string_equal(current_name(f), "encoder.layers.0.self_attn.weights");
    assert_false(send_key(f, TS_VIEW_KEY_UP));
    /* Outside any layer: the nearest layer's first step. */
    go(f, "embed.out");
    send_key(f, TS_VIEW_KEY_DOWN);
    assert_string_equal(current_name(f), "encoder.layers.0.self_attn.qkv");
    go(f, "encoder.out");
    send_key(f, TS_VIEW_KEY_UP);
    assert_string_equal(current_name(f), "encoder.layers.1.self_attn.qkv");
}

static void digits_choose_a_head(void **state) {
    fixture *f = *state;
    assert_int_equal(f->st.head, -1);
    go(f, "encoder.layers.0.self_attn.weights");
    send_char(f, '2');
    assert_int_equal(f->st.head, 1);
    /* Two heads only: 3 is refused with a message. */
    send_char(f, '3');
    assert_int_equal(f->st.head, 1);
    assert_non_null(strstr(f->st.message, "2 heads"));
    /* The head stays chosen while stepping through the layers. */
    send_key(f, TS_VIEW_KEY_DOWN);
    assert_int_equal(f->st.head, 1);
    send_char(f, '0');
    assert_int_equal(f->st.head, -1);
}

static void b_walks_the_batch_and_wraps(void **state) {
    fixture *f = *state;
    go(f, "embed.out");
    send_char(f, 'b');
    send_char(f, 'b');
    assert_int_equal(f->st.batch, 2);
    send_char(f, 'b');
    assert_int_equal(f->st.batch, 0);
    send_char(f, 'B');
    assert_int_equal(f->st.batch, 2);
    /* A step that kept one element only: the batch does not move. */
    f->steps.entry[f->st.current].batch_index = 0;
    send_char(f, 'b');
    assert_int_equal(f->st.batch, 2);
    assert_non_null(strstr(f->st.message, "--keep-batch"));
}

static void help_escape_quit_and_export(void **state) {
    fixture *f = *state;
    send_char(f, '?');
    assert_true(f->st.help);
    /* Esc closes the overlay first; only a second Esc quits. */
    send_key(f, TS_VIEW_KEY_ESCAPE);
    assert_false(f->st.help);
    assert_false(f->st.quit);
    send_char(f, 'e');
    assert_true(f->st.export_wanted);
    ts_view_exported(&f->st, "/tmp/x.png", TS_OK);
    assert_false(f->st.export_wanted);
    assert_non_null(strstr(f->st.message, "/tmp/x.png"));
    send_char(f, 'q');
    assert_true(f->st.quit);
}

static void script_words(void **state) {
    (void)state;
    ts_view_event ev;
    const char *shot;
    assert_ok(ts_view_script_word("pgdn", &ev, &shot));
    assert_int_equal(ev.key, TS_VIEW_KEY_PGDN);
    assert_ok(ts_view_script_word("B", &ev, &shot));
    assert_int_equal(ev.key, TS_VIEW_KEY_CHAR);
    assert_int_equal(ev.ch, 'B');
    assert_ok(ts_view_script_word("find:embed.pe", &ev, &shot));
    assert_int_equal(ev.kind, TS_VIEW_EV_FIND);
    assert_string_equal(ev.text, "embed.pe");
    assert_ok(ts_view_script_word("shot:/tmp/a.png", &ev, &shot));
    assert_string_equal(shot, "/tmp/a.png");
    assert_int_equal(ts_view_script_word("rightt", &ev, &shot), TS_ERR_ARG);
    assert_non_null(strstr(ts_last_error(), "rightt"));
    assert_ok(ts_view_script_word("hover:600,250.5", &ev, &shot));
    assert_int_equal(ev.kind, TS_VIEW_EV_MOTION);
    assert_float_equal(ev.x, 600, 0);
    assert_float_equal(ev.y, 250.5, 0);
    assert_ok(ts_view_script_word("click:10,20", &ev, &shot));
    assert_int_equal(ev.kind, TS_VIEW_EV_PRESS);
    assert_ok(ts_view_script_word("release", &ev, &shot));
    assert_int_equal(ev.kind, TS_VIEW_EV_RELEASE);
    assert_ok(ts_view_script_word("wheel:10,20,-2", &ev, &shot));
    assert_int_equal(ev.kind, TS_VIEW_EV_WHEEL);
    assert_float_equal(ev.dy, -2, 0);
    assert_int_equal(ts_view_script_word("hover:1,2,3", &ev, &shot), TS_ERR_ARG);
    assert_int_equal(ts_view_script_word("wheel:1,2", &ev, &shot), TS_ERR_ARG);
    assert_int_equal(ts_view_script_word("click:1,x", &ev, &shot), TS_ERR_ARG);
}

/* ---- snapshots ---- */

static void brackets_move_between_snapshots(void **state) {
    fixture *f = *state;
    const ts_view_steps *s = &f->steps;
    assert_int_equal(s->n_snapshots, 3);
    assert_int_equal(s->snapshot_start[1], PASS_STEPS);
    /* The list shows one snapshot only. */
    assert_int_equal(f->st.n_rows, 7);
    go(f, "encoder.layers.1.self_attn.weights");
    int64_t first = f->st.current;
    send_char(f, '2');
    assert_true(send_char(f, ']'));
    assert_int_equal(f->st.current, first + PASS_STEPS);
    assert_string_equal(current_name(f), "encoder.layers.1.self_attn.weights");
    assert_int_equal(f->st.head, 1);
    send_char(f, ']');
    assert_false(send_char(f, ']'));
    assert_int_equal(s->entry[f->st.current].snapshot, 2);
    /* Arrows stay inside the snapshot. */
    send_key(f, TS_VIEW_KEY_END);
    assert_int_equal(f->st.current, s->n - 1);
    send_key(f, TS_VIEW_KEY_HOME);
    assert_int_equal(f->st.current, 2 * PASS_STEPS);
    assert_false(send_key(f, TS_VIEW_KEY_LEFT));
    send_char(f, '[');
    assert_int_equal(f->st.current, PASS_STEPS);
}

/* ---- mouse ---- */

/* A frame as a grid of two 4 x 4 heads (or one 200 x 200 heatmap) would leave it. */
static void fake_frame(ts_view_frame *fr, int panels, int n, double x0) {
    memset(fr, 0, sizeof *fr);
    fr->drawn = true;
    fr->layout.n_panels = panels;
    for (int p = 0; p < panels; p++) {
        ts_render_cells *c = &fr->layout.panel[p];
        c->grid = (ts_render_rect){x0 + p * 420, 100, 400, 400};
        c->rows = c->cols = c->total_rows = c->total_cols = n;
        c->cell_w = c->cell_h = 400.0 / n;
        fr->panel_head[p] = p;
    }
}

static void hover_click_and_wheel(void **state) {
    fixture *f = *state;
    go(f, "encoder.layers.0.self_attn.weights");
    ts_view_frame fr;
    fake_frame(&fr, 2, 4, 500);
    ts_view_event ev = {.kind = TS_VIEW_EV_MOTION, .x = 500 + 420 + 150, .y = 100 + 350};
    assert_true(ts_view_update(&f->st, &f->steps, &fr, &ev));
    assert_true(f->st.hover);
    assert_int_equal(f->st.cells.hl_panel, 1);
    assert_int_equal(f->st.cells.hl_row, 3);
    assert_int_equal(f->st.cells.hl_col, 1);
    /* The same cell again is no change; outside the cells clears the hover. */
    assert_false(ts_view_update(&f->st, &f->steps, &fr, &ev));
    ev.x = 450;
    assert_true(ts_view_update(&f->st, &f->steps, &fr, &ev));
    assert_false(f->st.hover);
    /* A click on the second thumbnail opens head 1. */
    ev = (ts_view_event){.kind = TS_VIEW_EV_PRESS, .x = 500 + 420 + 10, .y = 110};
    assert_true(ts_view_update(&f->st, &f->steps, &fr, &ev));
    assert_int_equal(f->st.head, 1);

    /* One big heatmap: the wheel zooms in about the cell under the mouse. */
    fake_frame(&fr, 1, 200, 500);
    ev = (ts_view_event){.kind = TS_VIEW_EV_WHEEL, .x = 500 + 300, .y = 100 + 300, .dy = 3};
    assert_true(ts_view_update(&f->st, &f->steps, &fr, &ev));
    int vis = f->st.cells.rows;
    assert_true(vis > 0 && vis < 200);
    /* Cell 150 stays under the mouse (to within a cell). */
    double frac = (150 - f->st.cells.row0 + 0.5) / vis;
    assert_true(frac > 0.7 && frac < 0.8);
    /* Drag to pan: moving the mouse right shows cells further left. */
    fr.layout.panel[0].rows = fr.layout.panel[0].cols = vis;
    fr.layout.panel[0].row0 = f->st.cells.row0;
    fr.layout.panel[0].col0 = f->st.cells.col0;
    fr.layout.panel[0].cell_w = fr.layout.panel[0].cell_h = 400.0 / vis;
    int col0 = f->st.cells.col0;
    ev = (ts_view_event){.kind = TS_VIEW_EV_PRESS, .x = 600, .y = 200};
    ts_view_update(&f->st, &f->steps, &fr, &ev);
    assert_true(f->st.dragging);
    ev = (ts_view_event){.kind = TS_VIEW_EV_MOTION, .x = 600 + 10 * 400.0 / vis, .y = 200};
    assert_true(ts_view_update(&f->st, &f->steps, &fr, &ev));
    assert_int_equal(f->st.cells.col0, col0 - 10 < 0 ? 0 : col0 - 10);
    ev = (ts_view_event){.kind = TS_VIEW_EV_RELEASE};
    ts_view_update(&f->st, &f->steps, &fr, &ev);
    assert_false(f->st.dragging);
    /* Zooming all the way out shows everything again. */
    for (int i = 0; i < 20; i++) {
        fr.layout.panel[0].rows = f->st.cells.rows ? f->st.cells.rows : 200;
        fr.layout.panel[0].cols = f->st.cells.cols ? f->st.cells.cols : 200;
        fr.layout.panel[0].row0 = f->st.cells.row0;
        fr.layout.panel[0].col0 = f->st.cells.col0;
        send_char(f, '-');
        ev = (ts_view_event){.kind = TS_VIEW_EV_KEY, .key = TS_VIEW_KEY_CHAR, .ch = '-'};
        ts_view_update(&f->st, &f->steps, &fr, &ev);
    }
    assert_int_equal(f->st.cells.rows, 0);
    assert_int_equal(f->st.cells.row0, 0);
}

/* A wide slice shows the columns that fit; a drag reaches the others
 * without zooming first. */
static void drag_pans_a_clipped_view(void **state) {
    fixture *f = *state;
    go(f, "encoder.layers.0.ffn.act");
    ts_view_frame fr;
    fake_frame(&fr, 1, 200, 500);
    fr.layout.panel[0].total_cols = 2048;
    fr.layout.panel[0].cell_w = fr.layout.panel[0].cell_h = 2;
    ts_view_event ev = {.kind = TS_VIEW_EV_PRESS, .x = 800, .y = 200};
    ts_view_update(&f->st, &f->steps, &fr, &ev);
    ev = (ts_view_event){.kind = TS_VIEW_EV_MOTION, .x = 800 - 100, .y = 200};
    assert_true(ts_view_update(&f->st, &f->steps, &fr, &ev));
    assert_int_equal(f->st.cells.col0, 50);
    assert_int_equal(f->st.cells.row0, 0);
    assert_int_equal(f->st.cells.cols, 200);
    /* Not past the last column. */
    ev.x = 800 - 100000;
    ts_view_update(&f->st, &f->steps, &fr, &ev);
    assert_int_equal(f->st.cells.col0, 2048 - 200);
    /* A view that shows everything does not pan. */
    fake_frame(&fr, 1, 200, 500);
    memset(&f->st.cells, 0, sizeof f->st.cells);
    ev = (ts_view_event){.kind = TS_VIEW_EV_RELEASE};
    ts_view_update(&f->st, &f->steps, &fr, &ev);
    ev = (ts_view_event){.kind = TS_VIEW_EV_PRESS, .x = 800, .y = 200};
    ts_view_update(&f->st, &f->steps, &fr, &ev);
    ev = (ts_view_event){.kind = TS_VIEW_EV_MOTION, .x = 700, .y = 200};
    assert_false(ts_view_update(&f->st, &f->steps, &fr, &ev));
}

static void clicking_a_list_row_selects_it(void **state) {
    fixture *f = *state;
    ts_view_geometry g;
    ts_view_geometry_of(&g, f->st.width, f->st.height, false);
    /* Row 4 is layer 0, folded: clicking it opens its first step. */
    double y = g.list.y + 30 + 4.5 * g.row_h;
    ts_view_event ev = {.kind = TS_VIEW_EV_PRESS, .x = 20, .y = y};
    assert_true(ts_view_update(&f->st, &f->steps, NULL, &ev));
    assert_string_equal(current_name(f), "encoder.layers.0.self_attn.qkv");
    assert_true(f->st.rows[4].open);
}

static void the_list_scrolls_to_keep_the_current_row(void **state) {
    fixture *f = *state;
    ts_view_geometry g;
    ts_view_geometry_of(&g, f->st.width, f->st.height, false);
    assert_true(g.list_rows < 12);
    for (int i = 0; i < 20; i++) {
        send_key(f, TS_VIEW_KEY_RIGHT);
        int at = -1;
        for (int r = 0; r < f->st.n_rows; r++)
            if (f->st.rows[r].kind == TS_VIEW_ROW_STEP && f->st.rows[r].step == f->st.current) at = r;
        assert_true(at >= f->st.list_top && at < f->st.list_top + g.list_rows);
    }
    assert_true(f->st.list_top > 0);
}


/* ---- frames of a real trace ---- */

typedef struct drawn {
    char dir[64], path[96];
    ts_trace *trace;
    ts_view_steps steps;
    ts_view_state st;
    ts_view_frame frame;
    cairo_surface_t *surf;
} drawn;

#define FW 1000
#define FH 700

/* Three snapshots of input -> attention weights -> out, the weights
 * sharpening from one snapshot to the next as if a model were learning. */
static ts_status write_trace(const char *path) {
    const char *tokens[4] = {"my", "name", "is", "goro"};
    char *meta = NULL;
    ts_status s = ts_trace_metadata_build(&meta, NULL, tokens, 4, NULL, 0, 0, NULL);
    if (s) return s;
    ts_trace_options opt;
    ts_trace_options_default(&opt);
    opt.level = TS_TRACE_VALUES;
    ts_trace_writer *w;
    s = ts_trace_writer_open(path, meta, &opt, &w);
    free(meta);
    if (s) return s;
    static float input[2 * 4], weights[2 * 2 * 4 * 4], out[2 * 4 * 8];
    for (int k = 0; k < 3 && s == TS_OK; k++) {
        for (int i = 0; i < 8; i++) input[i] = (float)(i % 4);
        for (int i = 0; i < 64; i++) out[i] = sinf((float)(i + k));
        for (int b = 0; b < 2; b++)
            for (int h = 0; h < 2; h++)
                for (int q = 0; q < 4; q++) {
                    float *row = &weights[((b * 2 + h) * 4 + q) * 4], sum = 0;
                    for (int c = 0; c < 4; c++) sum += row[c] = expf((float)(k + 1) * (c == (q + h) % 4));
                    for (int c = 0; c < 4; c++) row[c] /= sum;
                }
        ts_tensor t;
        ts_tensor_view(&t, input, 2, (int64_t[]){2, 4});
        s = ts_trace_writer_step(w, "input", TS_OP_INPUT, &t, TS_TAG_PLAIN);
        ts_tensor_view(&t, weights, 4, (int64_t[]){2, 2, 4, 4});
        if (!s) s = ts_trace_writer_step(w, "encoder.layers.0.self_attn.weights", TS_OP_SOFTMAX, &t, TS_TAG_ATTN_WEIGHTS);
        ts_tensor_view(&t, out, 3, (int64_t[]){2, 4, 8});
        if (!s) s = ts_trace_writer_step(w, "encoder.layers.0.out", TS_OP_ADD, &t, TS_TAG_PLAIN);
    }
    if (s) {
        ts_trace_writer_abort(w);
        return s;
    }
    return ts_trace_writer_close(w, NULL);
}

static int setup_drawn(void **state) {
    drawn *d = calloc(1, sizeof *d);
    if (!d) return -1;
    snprintf(d->dir, sizeof d->dir, "/tmp/tscope-view-XXXXXX");
    if (!mkdtemp(d->dir)) return -1;
    snprintf(d->path, sizeof d->path, "%s/t.tstrace", d->dir);
    if (write_trace(d->path) || ts_trace_open(d->path, &d->trace) || ts_view_steps_from_trace(&d->steps, d->trace) ||
        ts_view_state_init(&d->st, &d->steps, FW, FH))
        return -1;
    d->surf = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, FW, FH);
    *state = d;
    return 0;
}

static int teardown_drawn(void **state) {
    drawn *d = *state;
    cairo_surface_destroy(d->surf);
    ts_view_state_free(&d->st);
    ts_view_steps_free(&d->steps);
    ts_trace_close(d->trace);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d->dir);
    if (system(cmd) != 0) return -1;
    free(d);
    return 0;
}

static void draw_frame(drawn *d) {
    cairo_t *cr = cairo_create(d->surf);
    assert_ok(ts_view_draw(cr, &d->st, &d->steps, d->trace, &d->frame));
    cairo_destroy(cr);
    cairo_surface_flush(d->surf);
}

static bool send(drawn *d, ts_view_event ev) { return ts_view_update(&d->st, &d->steps, &d->frame, &ev); }

/* A copy of the pixels of r. */
static uint32_t *pixels(drawn *d, ts_render_rect r) {
    int x0 = (int)r.x, y0 = (int)r.y, w = (int)r.w, h = (int)r.h;
    uint32_t *out = malloc((size_t)w * (size_t)h * sizeof *out);
    assert_non_null(out);
    const unsigned char *data = cairo_image_surface_get_data(d->surf);
    int stride = cairo_image_surface_get_stride(d->surf);
    for (int y = 0; y < h; y++)
        memcpy(out + (size_t)y * (size_t)w, data + (size_t)(y0 + y) * (size_t)stride + (size_t)x0 * 4,
               (size_t)w * 4);
    return out;
}

static int count_colours(const uint32_t *p, size_t n) {
    /* Enough to tell a picture from a flat fill. */
    uint32_t seen[64];
    int k = 0;
    for (size_t i = 0; i < n && k < 64; i++) {
        bool found = false;
        for (int j = 0; j < k && !found; j++) found = seen[j] == p[i];
        if (!found) seen[k++] = p[i];
    }
    return k;
}

static void drawing_leaves_the_state_alone(void **state) {
    drawn *d = *state;
    assert_int_equal(d->steps.n, 9);
    assert_int_equal(d->steps.n_snapshots, 3);
    assert_int_equal(d->steps.entry[4].occurrence, 1);
    ts_view_event find = {.kind = TS_VIEW_EV_FIND, .text = "weights"};
    send(d, find);
    draw_frame(d);
    /* Hover a cell of the second head, then draw again with a copy to compare. */
    const ts_render_cells *c = &d->frame.layout.panel[1];
    assert_int_equal(d->frame.layout.n_panels, 2);
    assert_int_equal(d->frame.panel_head[1], 1);
    assert_true(send(d, (ts_view_event){.kind = TS_VIEW_EV_MOTION, .x = c->grid.x + 2.5 * c->cell_w,
                                        .y = c->grid.y + 1.5 * c->cell_h}));
    assert_int_equal(d->st.cells.hl_row, 1);
    assert_int_equal(d->st.cells.hl_col, 2);
    ts_view_state before = d->st;
    ts_view_row *rows = malloc((size_t)d->st.n_rows * sizeof *rows);
    assert_non_null(rows);
    memcpy(rows, d->st.rows, (size_t)d->st.n_rows * sizeof *rows);
    draw_frame(d);
    assert_memory_equal(&before, &d->st, sizeof before);
    assert_memory_equal(rows, d->st.rows, (size_t)d->st.n_rows * sizeof *rows);
    free(rows);
}

static void the_picture_follows_the_state(void **state) {
    drawn *d = *state;
    ts_view_geometry g;
    ts_view_geometry_of(&g, FW, FH, true);
    assert_true(g.slider.h > 0);
    send(d, (ts_view_event){.kind = TS_VIEW_EV_FIND, .text = "weights"});
    draw_frame(d);
    ts_render_rect centre = g.centre;
    size_t n_centre = (size_t)(int)centre.w * (size_t)(int)centre.h;
    uint32_t *grid = pixels(d, centre);
    assert_true(count_colours(grid, n_centre) > 20);
    uint32_t *slider0 = pixels(d, g.slider);
    assert_true(count_colours(slider0, (size_t)(int)g.slider.w * (size_t)(int)g.slider.h) > 3);

    /* The last snapshot: sharper weights, the knob at the other end. */
    send(d, (ts_view_event){.kind = TS_VIEW_EV_KEY, .key = TS_VIEW_KEY_CHAR, .ch = ']'});
    send(d, (ts_view_event){.kind = TS_VIEW_EV_KEY, .key = TS_VIEW_KEY_CHAR, .ch = ']'});
    assert_int_equal(d->st.current, 7);
    draw_frame(d);
    uint32_t *grid2 = pixels(d, centre), *slider2 = pixels(d, g.slider);
    assert_memory_not_equal(grid, grid2, n_centre * 4);
    assert_memory_not_equal(slider0, slider2, (size_t)(int)g.slider.w * (size_t)(int)g.slider.h * 4);

    /* A click on the slider's left end goes back to the first snapshot. */
    ts_render_rect track = g.slider;
    send(d, (ts_view_event){.kind = TS_VIEW_EV_PRESS, .x = track.x + 150, .y = track.y + track.h / 2});
    send(d, (ts_view_event){.kind = TS_VIEW_EV_RELEASE});
    assert_int_equal(d->st.current, 1);

    /* One head: a different picture from the grid. */
    send(d, (ts_view_event){.kind = TS_VIEW_EV_KEY, .key = TS_VIEW_KEY_CHAR, .ch = '2'});
    draw_frame(d);
    assert_int_equal(d->frame.layout.n_panels, 1);
    uint32_t *head = pixels(d, centre);
    assert_memory_not_equal(grid, head, n_centre * 4);

    /* Hovering a cell writes its value into the status bar. */
    uint32_t *status0 = pixels(d, g.status);
    const ts_render_cells *c = &d->frame.layout.panel[0];
    send(d, (ts_view_event){.kind = TS_VIEW_EV_MOTION, .x = c->grid.x + 1, .y = c->grid.y + 1});
    draw_frame(d);
    uint32_t *status1 = pixels(d, g.status);
    assert_memory_not_equal(status0, status1, (size_t)(int)g.status.w * (size_t)(int)g.status.h * 4);
    free(grid);
    free(grid2);
    free(slider0);
    free(slider2);
    free(head);
    free(status0);
    free(status1);
}

static void export_writes_the_centre_view(void **state) {
    drawn *d = *state;
    send(d, (ts_view_event){.kind = TS_VIEW_EV_FIND, .text = "weights"});
    char png[128];
    snprintf(png, sizeof png, "%s/view.png", d->dir);
    assert_ok(ts_view_export_png(&d->st, &d->steps, d->trace, 500, 300, 2, png));
    cairo_surface_t *img;
    assert_ok(ts_png_read(png, &img));
    assert_int_equal(cairo_image_surface_get_width(img), 1000);
    assert_int_equal(cairo_image_surface_get_height(img), 600);
    cairo_surface_destroy(img);
    /* A directory that is not there fails with a message, and no file. */
    assert_int_not_equal(ts_view_export_png(&d->st, &d->steps, d->trace, 500, 300, 1, "/nonexistent/dir/v.png"),
                         TS_OK);
    assert_true(strlen(ts_last_error()) > 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(modules_and_layers_come_from_names, setup_one, teardown),
        cmocka_unit_test(layer_names_need_a_number),
        cmocka_unit_test_setup_teardown(other_layers_are_folded, setup_one, teardown),
        cmocka_unit_test_setup_teardown(the_state_keeps_rows_for_the_current_step, setup_one, teardown),
        cmocka_unit_test_setup_teardown(find_prefers_an_exact_name, setup_one, teardown),
        cmocka_unit_test_setup_teardown(slash_types_a_name_and_enter_jumps, setup_one, teardown),
        cmocka_unit_test_setup_teardown(arrows_step_and_stop_at_the_ends, setup_one, teardown),
        cmocka_unit_test_setup_teardown(pages_move_by_module, setup_one, teardown),
        cmocka_unit_test_setup_teardown(up_and_down_keep_the_role_across_layers, setup_one, teardown),
        cmocka_unit_test_setup_teardown(digits_choose_a_head, setup_one, teardown),
        cmocka_unit_test_setup_teardown(b_walks_the_batch_and_wraps, setup_one, teardown),
        cmocka_unit_test_setup_teardown(help_escape_quit_and_export, setup_one, teardown),
        cmocka_unit_test(script_words),
        cmocka_unit_test_setup_teardown(brackets_move_between_snapshots, setup_training, teardown),
        cmocka_unit_test_setup_teardown(hover_click_and_wheel, setup_one, teardown),
        cmocka_unit_test_setup_teardown(clicking_a_list_row_selects_it, setup_one, teardown),
        cmocka_unit_test_setup_teardown(drag_pans_a_clipped_view, setup_one, teardown),
        cmocka_unit_test_setup_teardown(the_list_scrolls_to_keep_the_current_row, setup_short_window, teardown),
        cmocka_unit_test_setup_teardown(drawing_leaves_the_state_alone, setup_drawn, teardown_drawn),
        cmocka_unit_test_setup_teardown(the_picture_follows_the_state, setup_drawn, teardown_drawn),
        cmocka_unit_test_setup_teardown(export_writes_the_centre_view, setup_drawn, teardown_drawn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
