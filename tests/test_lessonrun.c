/* Lesson runs and pages: a setup becomes the command line `tscope run` or
 * `tscope train` would get, an error from the command points at the line of
 * the key it names, and a step drawn as a page shows its view with the
 * highlights framed (or says what it could not draw). Running the binary
 * itself is tests/lesson_export_test.sh's job. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tscope/pages.h"
#include "tscope/render.h"

static ts_status parse(ts_lesson *l, const char *path, const char *text) {
    return ts_lesson_parse(l, path, text, strlen(text));
}

/* argv joined by spaces, into a static buffer. */
static const char *joined(char **argv) {
    static char buf[2048];
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; argv[i]; i++) at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%s", i ? " " : "", argv[i]);
    return buf;
}

static const char *const SETUPS =
    "# T\n"
    "\n"
    "```tscope setup\n"            /* 3 */
    "preset: tiny\n"               /* 4 */
    "d-model: 32\n"                /* 5 */
    "only: embed.* encoder.layers.0.*\n"
    "final-norm: true\n"           /* 7 */
    "variant: no-scale seed000-reshape\n"
    "level: values\n"              /* 9 */
    "```\n"
    "\n"
    "```tscope setup other\n"      /* 12 */
    "final-norm: false\n"
    "heads: 4\n"                   /* 14 */
    "```\n"
    "\n"
    "```tscope setup training\n"   /* 17 */
    "command: train\n"
    "task: copy\n"
    "steps: 5\n"                   /* 20 */
    "```\n"
    "\n"
    "```tscope setup lean\n"
    "without: d-model only variant\n"
    "heads: 2\n"
    "```\n"
    "\n"
    "```tscope step\n"
    "tensor: input\n"
    "```\n";

static void setups_become_command_lines(void **state) {
    (void)state;
    ts_lesson l;
    assert_ok(parse(&l, "x.md", SETUPS));
    char **argv;
    int argc;
    assert_ok(ts_lessonrun_argv(&l, 0, &argv, &argc));
    assert_string_equal(joined(argv), "run --preset tiny --d-model 32 --only embed.* --only encoder.layers.0.* "
                                      "--final-norm --variant no-scale seed000-reshape --level values");
    assert_int_equal(argc, 14);
    ts_lessonrun_argv_free(argv);
    /* a named setup: the main keys, its own values; a false switch is left out */
    assert_ok(ts_lessonrun_argv(&l, 1, &argv, NULL));
    assert_string_equal(joined(argv), "run --preset tiny --d-model 32 --only embed.* --only encoder.layers.0.* "
                                      "--variant no-scale seed000-reshape --level values --heads 4");
    ts_lessonrun_argv_free(argv);
    /* a setup of another command takes nothing from the main one */
    assert_ok(ts_lessonrun_argv(&l, 2, &argv, NULL));
    assert_string_equal(joined(argv), "train --task copy --steps 5");
    ts_lessonrun_argv_free(argv);
    /* `without:` leaves keys of the main setup out */
    assert_ok(ts_lessonrun_argv(&l, 3, &argv, NULL));
    assert_string_equal(joined(argv), "run --preset tiny --final-norm --level values --heads 2");
    assert_null(ts_lesson_setup_get(&l, 3, "d-model"));
    assert_string_equal(ts_lesson_setup_get(&l, 3, "preset"), "tiny");
    ts_lessonrun_argv_free(argv);
    assert_int_equal(ts_lessonrun_argv(&l, 4, &argv, NULL), TS_ERR_ARG);
    ts_lesson_free(&l);
}

/* `text` may repeat: one --text per sentence of a padded batch, in order; a
 * named setup inherits them all, or replaces them all with its own. */
static void text_repeats_into_a_batch(void **state) {
    (void)state;
    static const char md[] = "# T\n\n"
                             "```tscope setup\npreset: tiny\ntext: My name is Goro\ntext: I am\nseq: 4\n```\n\n"
                             "```tscope setup same\nheads: 4\n```\n\n"
                             "```tscope setup one\ntext: Hello\n```\n\n"
                             "```tscope step\ntensor: input\n```\n";
    ts_lesson l;
    assert_ok(parse(&l, "x.md", md));
    char **argv;
    assert_ok(ts_lessonrun_argv(&l, 0, &argv, NULL));
    assert_string_equal(joined(argv), "run --preset tiny --text My name is Goro --text I am --seq 4");
    ts_lessonrun_argv_free(argv);
    assert_ok(ts_lessonrun_argv(&l, 1, &argv, NULL));
    assert_string_equal(joined(argv), "run --preset tiny --text My name is Goro --text I am --seq 4 --heads 4");
    ts_lessonrun_argv_free(argv);
    assert_ok(ts_lessonrun_argv(&l, 2, &argv, NULL));
    assert_string_equal(joined(argv), "run --preset tiny --text Hello --seq 4");
    ts_lessonrun_argv_free(argv);
    ts_lesson_free(&l);
}

static void errors_point_at_the_key_they_name(void **state) {
    (void)state;
    ts_lesson l;
    assert_ok(parse(&l, "x.md", SETUPS));
    /* the flag named first wins; the named setup's own key before the main's */
    assert_int_equal(ts_lessonrun_error_line(&l, 0, "tscope run: --d-model 32 is too wide for --level"), 5);
    assert_int_equal(ts_lessonrun_error_line(&l, 1, "tscope run: --heads 4 does not divide --d-model 30"), 14);
    assert_int_equal(ts_lessonrun_error_line(&l, 0, "tscope run: --level values: no room"), 9);
    /* --final-norm is not --final: whole flags only */
    assert_int_equal(ts_lessonrun_error_line(&l, 2, "tscope train: unknown flag --step"), 17);
    assert_int_equal(ts_lessonrun_error_line(&l, 2, "tscope train: --steps 5 is too few"), 20);
    /* a message naming no key: the setup's fence */
    assert_int_equal(ts_lessonrun_error_line(&l, 1, "tscope run: out of memory"), 12);
    ts_lesson_free(&l);
}

static void paths_are_found_next_to_the_lesson(void **state) {
    (void)state;
    char dir[] = "/tmp/tscope-lessonrun-XXXXXX", md[96], w[96];
    assert_non_null(mkdtemp(dir));
    snprintf(md, sizeof md, "%s/01-x.md", dir);
    snprintf(w, sizeof w, "%s/w.safetensors", dir);
    FILE *f = fopen(w, "w");
    assert_non_null(f);
    fclose(f);
    ts_lesson l;
    assert_ok(parse(&l, md, "# T\n\n```tscope setup\nload: w.safetensors\n```\n\n```tscope setup gone\n"
                            "load: gone.safetensors\n```\n\n```tscope step\ntensor: input\n```\n"));
    char **argv;
    assert_ok(ts_lessonrun_argv(&l, 0, &argv, NULL));
    char want[160];
    snprintf(want, sizeof want, "run --load %s", w);
    assert_string_equal(joined(argv), want);
    ts_lessonrun_argv_free(argv);
    assert_int_equal(ts_lessonrun_argv(&l, 1, &argv, NULL), TS_ERR_IO);
    assert_non_null(strstr(ts_last_error(), "--load gone.safetensors: not found"));
    assert_int_equal(ts_lessonrun_error_line(&l, 1, ts_last_error()), 8);
    ts_lesson_free(&l);
    unlink(w);
    rmdir(dir);
}

/* ---- pages ---------------------------------------------------------------- */

/* A trace of one layer's attention (B=1, H=2, 4 x 4), values kept. */
static void write_trace(const char *path) {
    float scores[32], weights[32];
    for (int i = 0; i < 32; i++) scores[i] = (float)((i * 7) % 11) * 0.3f - 1.5f;
    for (int r = 0; r < 8; r++) {
        float sum = 0;
        for (int c = 0; c < 4; c++) sum += weights[r * 4 + c] = 1.0f + (float)((r + c) % 4);
        for (int c = 0; c < 4; c++) weights[r * 4 + c] /= sum;
    }
    ts_trace_options opt;
    ts_trace_options_default(&opt);
    opt.level = TS_TRACE_VALUES;
    const char *tok[4] = {"my", "name", "is", "goro"};
    char *meta = NULL;
    assert_ok(ts_trace_metadata_build(&meta, NULL, tok, 4, NULL, 0, 0, NULL));
    ts_trace_writer *wr;
    assert_ok(ts_trace_writer_open(path, meta, &opt, &wr));
    free(meta);
    ts_tensor t;
    assert_ok(ts_tensor_view(&t, scores, 4, (int64_t[]){1, 2, 4, 4}));
    assert_ok(ts_trace_writer_step(wr, "encoder.layers.0.self_attn.scaled", TS_OP_SCALE, &t, TS_TAG_ATTN_SCORES));
    assert_ok(ts_tensor_view(&t, weights, 4, (int64_t[]){1, 2, 4, 4}));
    assert_ok(ts_trace_writer_step(wr, "encoder.layers.0.self_attn.weights", TS_OP_SOFTMAX, &t, TS_TAG_ATTN_WEIGHTS));
    assert_ok(ts_trace_writer_close(wr, NULL));
}

typedef struct fixture {
    char dir[64], path[96];
    ts_lesson lesson;
    ts_trace *traces[1];
    char *paths[1];
    ts_lessonrun run;
} fixture;

static const char *const PAGES =
    "# Pages\n\nAn introduction with `code` and $d_k$.\n\n"
    "```tscope setup\npreset: tiny\n```\n\n"
    "```tscope step\ntensor: encoder.layers.0.self_attn.weights\nview: heatmap\nhead: 0\nhighlight: row 1\n```\n\n"
    "## One head\n\nRow 1 is framed.\n\n"
    "```tscope step\ntensor: encoder.layers.0.self_attn.*\nview: shapes\nhighlight: row 1\n```\n\n"
    "The flow; no cells to frame.\n\n"
    "```tscope step\ntensor: encoder.layers.0.self_attn.weights\nhead: 1\ncompare-with: "
    "encoder.layers.0.self_attn.scaled\n```\n\nTwo side by side.\n\n"
    "```tscope step\ntensor: encoder.layers.0.self_attn.weights\nstep: 3\n```\n\nNo record 3.\n";

static int setup_pages(void **state) {
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/tscope-pages-XXXXXX");
    if (!f || !mkdtemp(f->dir)) return -1;
    snprintf(f->path, sizeof f->path, "%s/t.tstrace", f->dir);
    write_trace(f->path);
    if (parse(&f->lesson, "pages.md", PAGES) != TS_OK) return -1;
    if (ts_trace_open(f->path, &f->traces[0]) != TS_OK) return -1;
    f->paths[0] = f->path;
    f->run = (ts_lessonrun){.lesson = &f->lesson, .n = 1, .paths = f->paths, .traces = f->traces};
    *state = f;
    return 0;
}

static int teardown_pages(void **state) {
    fixture *f = *state;
    ts_trace_close(f->traces[0]);
    ts_lesson_free(&f->lesson);
    unlink(f->path);
    rmdir(f->dir);
    free(f);
    return 0;
}

/* Pixels of the highlight colour (amber, 255 179 0) and how many differ
 * from white, in an ARGB32 surface. */
static void count_pixels(cairo_surface_t *s, int *amber, int *inked) {
    cairo_surface_flush(s);
    const unsigned char *d = cairo_image_surface_get_data(s);
    int w = cairo_image_surface_get_width(s), h = cairo_image_surface_get_height(s);
    int stride = cairo_image_surface_get_stride(s);
    *amber = *inked = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint32_t px = *(const uint32_t *)(d + (size_t)y * stride + (size_t)x * 4);
            int r = (px >> 16) & 255, g = (px >> 8) & 255, b = px & 255;
            if (r > 240 && g > 165 && g < 195 && b < 20) (*amber)++;
            if (r < 250 || g < 250 || b < 250) (*inked)++;
        }
}

static ts_status draw_page(fixture *f, int step, int *amber, int *inked, const char **note) {
    ts_lesson_page *p;
    ts_status st = ts_lesson_page_build(&p, &f->run, step);
    if (st) return st;
    cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, TS_LESSON_PAGE_W, TS_LESSON_PAGE_H);
    cairo_t *cr = cairo_create(s);
    st = ts_lesson_page_draw(p, cr, TS_LESSON_PAGE_W, TS_LESSON_PAGE_H);
    cairo_destroy(cr);
    count_pixels(s, amber, inked);
    static char copy[600];
    snprintf(copy, sizeof copy, "%s", ts_lesson_page_note(p));
    *note = copy;
    cairo_surface_destroy(s);
    ts_lesson_page_free(p);
    return st;
}

static void a_page_frames_its_highlight(void **state) {
    fixture *f = *state;
    int amber, inked;
    const char *note;
    assert_ok(draw_page(f, 0, &amber, &inked, &note));
    assert_true(amber > 100);          /* the frame around row 1 */
    assert_true(inked > TS_LESSON_PAGE_W * TS_LESSON_PAGE_H / 5); /* narration, header and view */
    assert_string_equal(note, "");
}

static void a_view_without_cells_says_so(void **state) {
    fixture *f = *state;
    int amber, inked;
    const char *note;
    assert_ok(draw_page(f, 1, &amber, &inked, &note));
    assert_int_equal(amber, 0);
    assert_non_null(strstr(note, "highlight is not drawn"));
}

static void a_comparison_draws_both(void **state) {
    fixture *f = *state;
    int amber, inked;
    const char *note;
    assert_ok(draw_page(f, 2, &amber, &inked, &note));
    assert_true(inked > TS_LESSON_PAGE_W * TS_LESSON_PAGE_H / 5);
    ts_lesson_page *p;
    assert_ok(ts_lesson_page_build(&p, &f->run, 2));
    ts_lesson_page_free(p);
}

static void a_step_that_cannot_be_drawn_names_its_line(void **state) {
    fixture *f = *state;
    ts_lesson_page *p;
    assert_int_equal(ts_lesson_page_build(&p, &f->run, 3), TS_ERR_FORMAT);
    /* the line of the step's tensor key */
    assert_string_equal(ts_last_error(), "pages.md:37: encoder.layers.0.self_attn.weights has no record number 3 "
                                         "in the trace (records of one name count from 0)");
    assert_int_equal(ts_lesson_page_build(&p, &f->run, 4), TS_ERR_ARG);
}

static void export_writes_one_png_per_step(void **state) {
    fixture *f = *state;
    /* a lesson of the first three steps only: the fourth cannot be drawn */
    ts_lesson three = f->lesson;
    three.n_steps = 3;
    ts_lessonrun run = f->run;
    run.lesson = &three;
    char out[128];
    snprintf(out, sizeof out, "%s/pages/deeper", f->dir);
    int n = 0;
    assert_ok(ts_lesson_export(&run, out, TS_FIGURE_PNG, 0.5, &n));
    assert_int_equal(n, 3);
    for (int i = 1; i <= 3; i++) {
        char png[160];
        snprintf(png, sizeof png, "%s/step%02d.png", out, i);
        cairo_surface_t *s;
        assert_ok(ts_png_read(png, &s));
        assert_int_equal(cairo_image_surface_get_width(s), TS_LESSON_PAGE_W / 2);
        cairo_surface_destroy(s);
        unlink(png);
    }
    rmdir(out);
    snprintf(out, sizeof out, "%s/pages", f->dir);
    rmdir(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(setups_become_command_lines),
        cmocka_unit_test(text_repeats_into_a_batch),
        cmocka_unit_test(errors_point_at_the_key_they_name),
        cmocka_unit_test(paths_are_found_next_to_the_lesson),
        cmocka_unit_test_setup_teardown(a_page_frames_its_highlight, setup_pages, teardown_pages),
        cmocka_unit_test_setup_teardown(a_view_without_cells_says_so, setup_pages, teardown_pages),
        cmocka_unit_test_setup_teardown(a_comparison_draws_both, setup_pages, teardown_pages),
        cmocka_unit_test_setup_teardown(a_step_that_cannot_be_drawn_names_its_line, setup_pages, teardown_pages),
        cmocka_unit_test_setup_teardown(export_writes_one_png_per_step, setup_pages, teardown_pages),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    ts_render_release_fonts();
    return failed;
}
