/* Lessons: every lesson in lessons/ parses with 4-10 steps, the example in
 * lessons/README.md parses, narration comes out as the blocks a renderer
 * needs, and every kind of mistake is reported as FILE:LINE: message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "tscope/lesson.h"

/* ---- helpers ---- */

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    fclose(f);
    if (s) s[n] = '\0';
    if (len) *len = (size_t)n;
    return s;
}

static ts_status parse(ts_lesson *l, const char *text) { return ts_lesson_parse(l, "bad.md", text, strlen(text)); }

/* The markup of block b of a narration (valid until the next call). */
static const char *markup(const ts_lesson_narration *n, int b) {
    static char copy[4096];
    char *m = NULL;
    assert_true(b < n->n_blocks);
    assert_ok(ts_lesson_block_markup(&n->blocks[b], &m));
    snprintf(copy, sizeof copy, "%s", m);
    free(m);
    return copy;
}

#define HEAD "# T\n\n```tscope setup\npreset: tiny\n```\n\n"
#define STEP "```tscope step\ntensor: input\n```\n"

/* ---- the shipped lessons ---- */

static void readme_example_parses(void **state) {
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s/README.md", ts_lesson_dir());
    char *readme = read_all(path, NULL);
    assert_non_null(readme);
    const char *open = strstr(readme, "````markdown\n");
    assert_non_null(open);
    open += strlen("````markdown\n");
    const char *close = strstr(open, "\n````\n");
    assert_non_null(close);
    ts_lesson l;
    assert_ok(ts_lesson_parse(&l, "README.md example", open, (size_t)(close - open) + 1));
    assert_string_equal(l.title, "Attention weights of the tiny model");
    assert_int_equal(l.n_setups, 2);
    assert_string_equal(ts_lesson_setup_get(&l, 1, "variant"), "no-scale");
    assert_string_equal(ts_lesson_setup_get(&l, 1, "preset"), "tiny"); /* from main */
    assert_int_equal(l.n_steps, 2);
    const ts_lesson_step *s0 = &l.steps[0], *s1 = &l.steps[1];
    assert_string_equal(s0->tensor, "encoder.layers.0.self_attn.weights");
    assert_int_equal(s0->view, TS_LESSON_VIEW_HEATMAP);
    assert_int_equal(s0->head, 0);
    assert_int_equal(s0->layer, -1);
    assert_int_equal(s0->n_marks, 1);
    assert_int_equal(s0->marks[0].kind, TS_LESSON_MARK_ROW);
    assert_int_equal(s0->marks[0].a, 3);
    assert_string_equal(s0->title, "Who looks at whom");
    assert_string_equal(s0->run, "main");
    assert_non_null(strstr(markup(&s0->narration, 1), "<i>goro</i>"));
    assert_non_null(strstr(markup(&s0->narration, 1), "<tt>softmax</tt>"));
    assert_string_equal(s1->title, "With and without the scaling");
    assert_string_equal(s1->compare_run, "unscaled");
    assert_null(s1->compare_with);
    assert_int_equal(s1->view, TS_LESSON_VIEW_AUTO);
    assert_non_null(strstr(markup(&s1->narration, 0), "√d<sub>k</sub>"));
    assert_non_null(strstr(l.intro.source, "\"My name is Goro\""));
    assert_null(strstr(l.intro.source, "tscope setup"));
    ts_lesson_free(&l);
    free(readme);
}

static void every_lesson_parses(void **state) {
    (void)state;
    ts_lesson_entry *e;
    int n;
    assert_ok(ts_lesson_list(ts_lesson_dir(), &e, &n));
    assert_true(n >= 11);
    for (int i = 0; i < n; i++) {
        assert_int_equal(e[i].number, i + 1);
        ts_lesson l;
        ts_status st = ts_lesson_load(&l, e[i].path);
        if (st != TS_OK) fail_msg("%s", ts_last_error());
        if (l.n_steps < 4 || l.n_steps > 12) fail_msg("%s has %d steps, not 4-12", e[i].path, l.n_steps);
        assert_true(strlen(l.title) > 0);
        assert_true(l.intro.n_blocks > 0);
        if (!l.summary || strlen(l.summary) < 40)
            fail_msg("%s has no 'summary:' of a sentence in its front matter (the site's index prints it)", e[i].path);
        for (int s = 0; s < l.n_steps; s++) {
            const ts_lesson_step *st_ = &l.steps[s];
            if (st_->narration.n_blocks == 0 || st_->title[0] == '\0')
                fail_msg("%s step %d (line %d) needs a title and narration", e[i].path, s + 1, st_->line);
            for (int b = 0; b < st_->narration.n_blocks; b++) {
                char *m;
                assert_ok(ts_lesson_block_markup(&st_->narration.blocks[b], &m));
                free(m);
            }
        }
        ts_lesson_free(&l);
    }
    ts_lesson_list_free(e, n);
}

/* ---- errors: exact FILE:LINE: message ---- */

typedef struct bad_case {
    const char *text;
    const char *message;
} bad_case;

static const bad_case bad_cases[] = {
    {"", "bad.md:1: empty lesson: it needs a '# Title', a ```tscope setup block and ```tscope step blocks"},
    {"\n\nSome text\n", "bad.md:3: a lesson begins with its title as a '# Title' heading"},
    {"## Not a title\n", "bad.md:1: a lesson begins with its title as a '# Title' heading"},
    {"# T\n\n```tscope setup\npreset: tiny\nheadss: 3\n```\n" STEP,
     "bad.md:5: unknown key 'headss' in a setup block (did you mean 'heads'?)"},
    {"# T\n\n```tscope setup\nwhatever: 3\n```\n" STEP, "bad.md:4: unknown key 'whatever' in a setup block"},
    {HEAD "```tscope step\ntensor: input\nlayers: 2\n```\n",
     "bad.md:9: unknown key 'layers' in a step block (did you mean 'layer'?)"},
    {"# T\n\n```tscope setup\nd-model: big\n```\n" STEP, "bad.md:4: 'd-model' expects a whole number, not 'big'"},
    {"# T\n\n```tscope setup\nheads: 0\n```\n" STEP, "bad.md:4: 'heads' is 0, outside 1..1024"},
    {"# T\n\n```tscope setup\ndropout: 1.5\n```\n" STEP, "bad.md:4: 'dropout' is 1.5, outside [0..0.999]"},
    {"# T\n\n```tscope setup\npreset: huge\n```\n" STEP,
     "bad.md:4: unknown preset 'huge' (one of tiny|seed000|seed001|seed004|copy|base|lm|gpt2)"},
    {"# T\n\n```tscope setup\nvariant: no-scale seed000-bug\n```\n" STEP,
     "bad.md:4: unknown variant 'seed000-bug' (any of no-scale|seed000-reshape|seed001-layernorm|"
     "seed004-residual|seed003-mask|seed001-softmax|no-residual, separated by spaces)"},
    {HEAD "```tscope step\ntensor: input\nview: heatmapp\n```\n",
     "bad.md:9: unknown view 'heatmapp' (one of heatmap|grid|overview|curves|stats|shapes|lens|dist|rope|auto)"},
    {HEAD "```tscope step\ntensor: input\nhead: -1\n```\n", "bad.md:9: 'head' is -1, outside 0..4096"},
    {HEAD "```tscope step\ntensor: input\nstep: -2\n```\n", "bad.md:9: 'step' is -2, outside -1..1000000000"},
    {HEAD "```tscope step\ntensor: input\naxes: 1 2 3\n```\n", "bad.md:9: 'axes' lists at most 2 numbers"},
    {HEAD "```tscope step\ntensor: input\naxes: 1\n```\n", "bad.md:9: 'axes' is two dims, as 'axes: 1, 2'"},
    {HEAD "```tscope step\ntensor: encoder..out\n```\n",
     "bad.md:8: 'encoder..out' is not a trace name (like encoder.layers.0.self_attn.weights)"},
    {HEAD "```tscope step\nview: grid\n```\n", "bad.md:7: a step needs 'tensor: NAME' (the trace name to show)"},
    {HEAD "```tscope step\ntensor: input\ntensor: logits\n```\n", "bad.md:9: 'tensor' is given twice (first on line 8)"},
    {HEAD "```tscope step\ntensor input\n```\n", "bad.md:8: expected 'key: value', not 'tensor input'"},
    {HEAD "```tscope step\ntensor:\n```\n", "bad.md:8: 'tensor' needs a value"},
    {HEAD "```tscope step\ntensor: input\nhighlight: row\n```\n", "bad.md:9: highlight 'row' takes 1 number"},
    {HEAD "```tscope step\ntensor: input\nhighlight: circle 3\n```\n",
     "bad.md:9: unknown highlight 'circle' (row N, col N, cell R C, token N, dim N, diagonal, masked, argmax)"},
    {HEAD "```tscope step\ntensor: input\nrun: other\n```\n",
     "bad.md:9: no setup named 'other' (add a ```tscope setup other block)"},
    {HEAD "```tscope step\ntensor: input\n", "bad.md:7: unclosed ``` block (no closing fence before the end of the file)"},
    {HEAD STEP "\nText.\n\n~~~~python\nprint(1)\n~~~\n",
     "bad.md:13: unclosed ~~~ block (no closing fence before the end of the file)"},
    {HEAD STEP "\n```\n", "bad.md:11: unclosed ``` block (no closing fence before the end of the file)"},
    {"# T\n\n" STEP "\n```tscope setup\npreset: tiny\n```\n",
     "bad.md:3: a step block before the setup block (```tscope setup comes first)"},
    {HEAD "```tscope setup\nheads: 4\n```\n" STEP,
     "bad.md:7: a second setup block (the first is on line 3; name extra runs: ```tscope setup NAME)"},
    {"# T\n\n```tscope setup other\n```\n" STEP, "bad.md:3: the named setup 'other' comes before the main ```tscope setup block"},
    {HEAD "```tscope setup Main\n```\n" STEP,
     "bad.md:7: 'Main' cannot name a setup (lowercase letters, digits, '-', '_'; not 'main')"},
    {HEAD "```tscope show\ntensor: input\n```\n", "bad.md:7: a tscope block is ```tscope setup or ```tscope step, not ```tscope show"},
    {HEAD "- a list item\n\n  ```tscope step\n  tensor: input\n  ```\n",
     "bad.md:9: a tscope block must start at the left margin, not inside a list or quote"},
    {"# T\n\n```tscope setup\nsteps: 100\n```\n" STEP, "bad.md:4: 'steps' is a training key: the setup needs 'command: train'"},
    {"# T\n\n```tscope setup\ncommand: train\n```\n" STEP, "bad.md:4: a training setup needs 'task:'"},
    {"# T\n\n```tscope setup\ntext: hi\ninput: x.npy\n```\n" STEP, "bad.md:5: give 'text' or 'input', not both"},
    {HEAD STEP "\nThe scale is $1/\\sqrt{d_k}$.\n", "bad.md:11: a formula is plain text with Unicode symbols (write √ and ·, not \\sqrt or \\cdot)"},
    {HEAD "Only an introduction.\n", "bad.md:7: no step blocks: a lesson needs at least one ```tscope step"},
    {"# T\n\nNo setup.\n", "bad.md:1: no setup block: a lesson needs ```tscope setup\n"
                         "bad.md:3: no step blocks: a lesson needs at least one ```tscope step"},
    {"#\n\n```tscope setup\n```\n" STEP, "bad.md:1: the title heading is empty"},
    {"# T\r\n\r\n```tscope setup\r\npreset: tiny\r\n```\r\n```tscope step\r\ntensor: input\r\nlayer: x\r\n```\r\n",
     "bad.md:8: 'layer' expects a whole number, not 'x'"},
    {"# T\n\n```tscope setup\ntext: \"unterminated\n```\n" STEP, "bad.md:4: a quoted value must end with '\"'"},
    /* the front matter: one key, summary */
    {"---\nsummary: One sentence.\n" HEAD STEP,
     "bad.md:1: the front matter opened by '---' on line 1 is not closed: end it with a '---' line before the '# Title'"},
    {"---\nsumary: One sentence.\n---\n" HEAD STEP,
     "bad.md:2: unknown key 'sumary' in a front-matter block (did you mean 'summary'?)"},
    {"---\nsummary: One.\nsummary: Two.\n---\n" HEAD STEP, "bad.md:3: 'summary' is given twice (first on line 2)"},
    {"---\nsummary:\n---\n" HEAD STEP, "bad.md:2: 'summary' needs a value"},
    {"---\nsummary: A.\n---\n\nText before the title.\n" HEAD STEP,
     "bad.md:5: a lesson begins with its title as a '# Title' heading"},
};

/* --check lists every problem of a lesson in one run, in the order of the
 * file; past a dozen, the rest are counted. */
static void every_problem_in_one_parse(void **state) {
    (void)state;
    ts_lesson l;
    ts_status st = parse(&l, "# T\n\n```tscope setup\npreset: tiny\nlevle: values\n```\n\n"
                             "```tscope step\ntensor: input\nview: heatmapp\n```\n\nText.\n\n"
                             "```tscope step\ntensor: input\nhead: many\n```\n");
    assert_int_equal(st, TS_ERR_FORMAT);
    assert_string_equal(ts_last_error(), "bad.md:5: unknown key 'levle' in a setup block (did you mean 'level'?)\n"
                                         "bad.md:10: unknown view 'heatmapp' (one of heatmap|grid|overview|curves|stats|shapes|lens|dist|rope|auto)\n"
                                         "bad.md:17: 'head' expects a whole number, not 'many'");
    assert_null(l.steps);
    char text[4096] = "# T\n\n```tscope setup\n";
    for (int i = 0; i < 40; i++) strcat(text, "bogus-key: 1\n");
    strcat(text, "```\n" STEP);
    st = parse(&l, text);
    assert_int_equal(st, TS_ERR_FORMAT);
    assert_non_null(strstr(ts_last_error(), "bad.md:4: unknown key 'bogus-key'"));
    assert_non_null(strstr(ts_last_error(), "(and 28 more)"));
    assert_null(l.steps);
}

static void errors_name_file_and_line(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        ts_lesson l;
        ts_status st = parse(&l, bad_cases[i].text);
        if (st == TS_OK) fail_msg("case %zu parsed; want: %s", i, bad_cases[i].message);
        if (strcmp(ts_last_error(), bad_cases[i].message) != 0)
            fail_msg("case %zu:\n  got  %s\n  want %s", i, ts_last_error(), bad_cases[i].message);
        assert_int_equal(st, TS_ERR_FORMAT);
        assert_null(l.steps); /* a failed parse leaves nothing to free */
        ts_lesson_free(&l);
    }
}

/* The front matter's summary is the lesson's; the title and lines after it are as without it. */
static void front_matter_summary(void **state) {
    (void)state;
    ts_lesson l;
    assert_ok(parse(&l, "---\nsummary: \"  Read one head, then knock it out.\"\n---\n" HEAD STEP));
    assert_string_equal(l.summary, "  Read one head, then knock it out.");
    assert_string_equal(l.title, "T");
    assert_int_equal(l.steps[0].line, 10); /* the step block's fence: three lines later than in HEAD STEP */
    ts_lesson_free(&l);
    assert_ok(parse(&l, HEAD STEP));
    assert_null(l.summary);
    assert_int_equal(l.steps[0].line, 7);
    ts_lesson_free(&l);
    char long_one[400] = "---\nsummary: ";
    memset(long_one + strlen(long_one), 'a', 301);
    strcat(long_one, "\n---\n" HEAD STEP);
    assert_int_equal(parse(&l, long_one), TS_ERR_FORMAT);
    assert_string_equal(ts_last_error(), "bad.md:2: 'summary' is 301 bytes long, more than the 300 a summary can be");
}

static void good_variants_parse(void **state) {
    (void)state;
    const char *good[] = {
        /* setext title, tildes, comments, quoted values, a training setup */
        "Title\n=====\n\n~~~tscope setup\n# a comment\ncommand: train\ntask: copy\nsteps: 10\n"
        "text: \"  two  spaces \\\"q\\\" \"\n~~~\n\n````tscope step\ntensor: loss\nview: curves\nstep: -1\n"
        "compare-step: 3\naxes: 1, 2\n````\n",
        /* a fence inside narration that uses backticks, closed by a longer fence */
        HEAD STEP "\n````\n```\nnot a fence\n`````\n",
        /* an indented code block is narration */
        HEAD STEP "\n    indented code\n",
        /* a byte-order mark before the title */
        "\xEF\xBB\xBF" HEAD STEP,
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        ts_lesson l;
        if (parse(&l, good[i]) != TS_OK) fail_msg("case %zu: %s", i, ts_last_error());
        ts_lesson_free(&l);
    }
    ts_lesson l;
    assert_ok(parse(&l, good[0]));
    assert_string_equal(l.title, "Title");
    assert_string_equal(ts_lesson_setup_get(&l, 0, "text"), "  two  spaces \"q\" ");
    assert_string_equal(l.steps[0].tensor, "loss");
    assert_int_equal(l.steps[0].view, TS_LESSON_VIEW_CURVES);
    assert_int_equal(l.steps[0].train_step, -1);
    assert_int_equal(l.steps[0].compare_step, 3);
    assert_int_equal(l.steps[0].n_axes, 2);
    assert_int_equal(l.steps[0].axes[1], 2);
    ts_lesson_free(&l);
}

/* ---- narration ---- */

static const char *narration_doc =
    "# Shapes &amp; sizes\n"                       /* 1 */
    "\n"                                           /* 2 */
    "Intro with <b>not html</b> & more.\n"         /* 3 */
    "\n"                                           /* 4 */
    "```tscope setup\n"                            /* 5 */
    "preset: seed000\n"                            /* 6 */
    "```\n"                                        /* 7 */
    "\n"                                           /* 8 */
    "More intro.\n"                                /* 9 */
    "\n"                                           /* 10 */
    "```tscope setup pre\n"                        /* 11 */
    "norm: pre\n"                                  /* 12 */
    "```\n"                                        /* 13 */
    "```tscope step\n"                             /* 14 */
    "tensor: encoder.layers.0.self_attn.qkv\n"     /* 15 */
    "view: stats\n"                                /* 16 */
    "batch: 2\n"                                   /* 17 */
    "highlight: cell 1 2, diagonal, token 4\n"     /* 18 */
    "dims: 0 1, 6\n"                               /* 19 */
    "compare-with: encoder.layers.0.self_attn.q\n" /* 20 */
    "compare-run: pre\n"                           /* 21 */
    "```\n"                                        /* 22 */
    "\n"                                           /* 23 */
    "## The fused projection\n"                    /* 24 */
    "\n"                                           /* 25 */
    "One **linear** makes *q*, *k* and `v`:\n"     /* 26 */
    "1536 = 3 × 512, so $x_i W^T$ per token.\n"    /* 27 */
    "\n"                                           /* 28 */
    "- first\n"                                    /* 29 */
    "  - nested `code`\n"                          /* 30 */
    "- second\n"                                   /* 31 */
    "\n"                                           /* 32 */
    "3. three\n"                                   /* 33 */
    "4. four\n"                                    /* 34 */
    "\n"                                           /* 35 */
    "$$softmax(QK^T / √d_k)$$\n"                   /* 36 */
    "\n"                                           /* 37 */
    "```python\n"                                  /* 38 */
    "q, k, v = qkv.chunk(3, dim=-1)\n"             /* 39 */
    "x = 1\n"                                      /* 40 */
    "```\n"                                        /* 41 */
    "> a quote\n"                                  /* 42 */
    "\n"                                           /* 43 */
    "---\n"                                        /* 44 */
    "[a link](http://x) &#955;\n"                  /* 45 */
    "\n"                                           /* 46 */
    "```tscope step\n"                             /* 47 */
    "tensor: encoder.out\n"                        /* 48 */
    "run: pre\n"                                   /* 49 */
    "title: Last\n"                                /* 50 */
    "```\n";                                       /* 51 */

static void narration_blocks(void **state) {
    (void)state;
    ts_lesson l;
    assert_ok(ts_lesson_parse(&l, "n.md", narration_doc, strlen(narration_doc)));
    assert_string_equal(l.title, "Shapes & sizes");
    assert_string_equal(l.intro.source, "Intro with <b>not html</b> & more.\n\nMore intro.");
    assert_int_equal(l.intro.n_blocks, 2);
    assert_string_equal(markup(&l.intro, 0), "Intro with &lt;b&gt;not html&lt;/b&gt; &amp; more.");
    assert_int_equal(l.n_setups, 2);
    assert_string_equal(l.setups[1].name, "pre");
    assert_int_equal(l.setups[1].line, 11);
    assert_string_equal(ts_lesson_setup_get(&l, 1, "preset"), "seed000");
    assert_string_equal(ts_lesson_setup_get(&l, 1, "norm"), "pre");
    assert_null(ts_lesson_setup_get(&l, 0, "norm"));
    assert_int_equal(ts_lesson_find_setup(&l, "pre"), 1);
    assert_int_equal(ts_lesson_find_setup(&l, "nope"), -1);

    assert_int_equal(l.n_steps, 2);
    const ts_lesson_step *s = &l.steps[0];
    assert_int_equal(s->line, 14);
    assert_int_equal(s->view, TS_LESSON_VIEW_STATS);
    assert_int_equal(s->batch, 2);
    assert_int_equal(s->n_marks, 3);
    assert_int_equal(s->marks[0].kind, TS_LESSON_MARK_CELL);
    assert_int_equal(s->marks[0].a, 1);
    assert_int_equal(s->marks[0].b, 2);
    assert_int_equal(s->marks[1].kind, TS_LESSON_MARK_DIAGONAL);
    assert_int_equal(s->marks[2].kind, TS_LESSON_MARK_TOKEN);
    assert_int_equal(s->n_dims, 3);
    assert_int_equal(s->dims[2], 6);
    assert_string_equal(s->compare_with, "encoder.layers.0.self_attn.q");
    assert_string_equal(s->compare_run, "pre");
    assert_string_equal(s->title, "The fused projection");

    const ts_lesson_narration *n = &s->narration;
    assert_true(strncmp(n->source, "## The fused projection\n\nOne **linear**", 39) == 0);
    assert_non_null(strstr(n->source, "[a link](http://x) &#955;"));
    assert_null(strstr(n->source, "tscope"));
    const struct {
        ts_lesson_block_kind kind;
        int depth;
        const char *marker, *markup;
    } want[] = {
        {TS_LESSON_HEADING, 0, "", "The fused projection"},
        {TS_LESSON_PARA, 0, "",
         "One <b>linear</b> makes <i>q</i>, <i>k</i> and <tt>v</tt>: 1536 = 3 × 512, so "
         "<span font_family=\"serif\" style=\"italic\">x<sub>i</sub> W<sup>T</sup></span> per token."},
        {TS_LESSON_ITEM, 1, "\xE2\x80\xA2", "first"},
        {TS_LESSON_ITEM, 2, "\xE2\x80\xA2", "nested <tt>code</tt>"},
        {TS_LESSON_ITEM, 1, "\xE2\x80\xA2", "second"},
        {TS_LESSON_ITEM, 1, "3.", "three"},
        {TS_LESSON_ITEM, 1, "4.", "four"},
        {TS_LESSON_FORMULA, 0, "",
         "<span font_family=\"serif\" style=\"italic\">softmax(QK<sup>T</sup> / √d<sub>k</sub>)</span>"},
        {TS_LESSON_CODE_BLOCK, 0, "", "<tt>q, k, v = qkv.chunk(3, dim=-1)\nx = 1</tt>"},
        {TS_LESSON_PARA, 0, "", "a quote"},
        {TS_LESSON_RULE, 0, "", ""},
        {TS_LESSON_PARA, 0, "", "<u>a link</u> λ"},
    };
    int n_want = (int)(sizeof want / sizeof want[0]);
    assert_int_equal(n->n_blocks, n_want);
    for (int i = 0; i < n_want; i++) {
        const ts_lesson_block *b = &n->blocks[i];
        if (b->kind != want[i].kind || b->depth != want[i].depth || strcmp(b->marker, want[i].marker) != 0)
            fail_msg("block %d: kind %d depth %d marker '%s'", i, b->kind, b->depth, b->marker);
        assert_string_equal(markup(n, i), want[i].markup);
    }
    assert_int_equal(n->blocks[0].level, 2);
    assert_int_equal(n->blocks[9].quote, 1);
    assert_int_equal(n->blocks[1].line, 26);
    assert_int_equal(n->blocks[8].line, 39);

    assert_int_equal(s->train_step, TS_LESSON_UNSET);
    assert_int_equal(s->compare_step, TS_LESSON_UNSET);
    assert_int_equal(s->n_axes, 0);
    assert_string_equal(l.steps[1].title, "Last");
    assert_string_equal(l.steps[1].run, "pre");
    assert_string_equal(l.steps[1].narration.source, "");
    assert_int_equal(l.steps[1].narration.n_blocks, 0);
    ts_lesson_free(&l);
}

static void block_text_is_plain(void **state) {
    (void)state;
    ts_lesson l;
    assert_ok(parse(&l, HEAD STEP "\nA *b* `c` <d> $e_f$\n"));
    char *t;
    assert_ok(ts_lesson_block_text(&l.steps[0].narration.blocks[0], &t));
    assert_string_equal(t, "A b c <d> e_f");
    free(t);
    ts_lesson_free(&l);
}

/* A long narration arrives in many small pieces; parsing stays linear. */
static void long_narration(void **state) {
    (void)state;
    const int lines = 200000;
    const char *head = HEAD STEP "\n";
    size_t n = strlen(head);
    char *doc = malloc(n + (size_t)lines * 4 + 64);
    assert_non_null(doc);
    memcpy(doc, head, n);
    for (int i = 0; i < lines / 2; i++) n += (size_t)sprintf(doc + n, "ab\n");
    n += (size_t)sprintf(doc + n, "\n");
    for (int i = 0; i < lines / 2; i++) n += (size_t)sprintf(doc + n, "- x\n");
    ts_lesson l;
    assert_ok(ts_lesson_parse(&l, "long.md", doc, n));
    const ts_lesson_narration *nar = &l.steps[0].narration;
    assert_int_equal(nar->n_blocks, 1 + lines / 2);
    assert_int_equal(nar->blocks[0].n_runs, 1);
    assert_int_equal(nar->blocks[0].runs[0].len, (size_t)lines / 2 * 3 - 1); /* "ab ab ... ab" */
    assert_int_equal(strlen(nar->blocks[0].runs[0].text), nar->blocks[0].runs[0].len);
    ts_lesson_free(&l);
    free(doc);
}

/* ---- checks made later, against a trace ---- */

static bool known_names(void *ctx, const char *run, const char *name, char *hint, size_t cap) {
    (void)ctx;
    if (strcmp(run, "main") == 0 && (strcmp(name, "input") == 0 || strcmp(name, "logits") == 0)) return true;
    if (strcmp(run, "other") == 0 && strcmp(name, "input") == 0) return true;
    snprintf(hint, cap, "did you mean 'input'?");
    return false;
}

static void names_checked_against_a_trace(void **state) {
    (void)state;
    ts_lesson l;
    const char *doc = HEAD "```tscope setup other\nheads: 4\n```\n" /* 7-9 */
                      "```tscope step\ntensor: input\ncompare-run: other\n```\n" /* 10-13 */
                      "```tscope step\ntensor: logits\ncompare-with: lgits\n```\n"; /* 14-17 */
    assert_ok(parse(&l, doc));
    assert_int_equal(ts_lesson_check_names(&l, known_names, NULL, NULL), TS_ERR_FORMAT);
    assert_string_equal(ts_last_error(), "bad.md:16: unknown step name 'lgits' in run 'main': did you mean 'input'?");
    ts_lesson_free(&l);

    assert_ok(parse(&l, HEAD "```tscope step\ntensor: logits\ncompare-run: main\n```\n" STEP
                             "```tscope step\n\ntensor: embed.pe\n```\n"));
    assert_int_equal(ts_lesson_check_names(&l, known_names, NULL, NULL), TS_ERR_FORMAT);
    assert_string_equal(ts_last_error(), "bad.md:16: unknown step name 'embed.pe' in run 'main': did you mean 'input'?");
    assert_int_equal(ts_lesson_step_line(&l.steps[0], "compare-run"), 9);
    assert_int_equal(ts_lesson_step_line(&l.steps[0], "head"), 7); /* not given: the fence */
    assert_int_equal(ts_lesson_fail_at(&l, 3, "the run has %d heads", 2), TS_ERR_FORMAT);
    assert_string_equal(ts_last_error(), "bad.md:3: the run has 2 heads");
    ts_lesson_free(&l);
}

/* ---- finding lessons ---- */

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void find_by_number_name_and_file(void **state) {
    (void)state;
    char dir[] = "/tmp/tscope-lessons-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char p1[256], p2[256], p3[256], other[256], found[4096];
    snprintf(p1, sizeof p1, "%s/02-masks.md", dir);
    snprintf(p2, sizeof p2, "%s/10-training.md", dir);
    snprintf(p3, sizeof p3, "%s/01-shapes.md", dir);
    snprintf(other, sizeof other, "%s/notes.md", dir);
    write_file(p1, HEAD STEP);
    write_file(p2, HEAD STEP);
    write_file(p3, HEAD STEP);
    write_file(other, "not a lesson");
    ts_lesson_entry *e;
    int n;
    assert_ok(ts_lesson_list(dir, &e, &n));
    assert_int_equal(n, 3);
    assert_int_equal(e[0].number, 1);
    assert_string_equal(e[1].name, "masks");
    assert_int_equal(e[2].number, 10);
    assert_string_equal(e[2].path, p2);
    ts_lesson_list_free(e, n);

    assert_ok(ts_lesson_find(dir, "10", found, sizeof found));
    assert_string_equal(found, p2);
    assert_ok(ts_lesson_find(dir, "masks", found, sizeof found));
    assert_string_equal(found, p1);
    assert_ok(ts_lesson_find(dir, "01-shapes", found, sizeof found));
    assert_string_equal(found, p3);
    assert_ok(ts_lesson_find(dir, p1, found, sizeof found));
    assert_string_equal(found, p1);
    assert_int_equal(ts_lesson_find(dir, "7", found, sizeof found), TS_ERR_ARG);
    assert_non_null(strstr(ts_last_error(), "no lesson '7'"));
    assert_int_equal(ts_lesson_find(dir, "nope.md", found, sizeof found), TS_ERR_IO);

    /* A setup's path: next to the lesson first. */
    char asset[256];
    snprintf(asset, sizeof asset, "%s/weights.safetensors", dir);
    write_file(asset, "x");
    ts_lesson l;
    assert_ok(ts_lesson_load(&l, p1));
    assert_ok(ts_lesson_resolve(&l, "weights.safetensors", found, sizeof found));
    assert_string_equal(found, asset);
    assert_ok(ts_lesson_resolve(&l, "/abs/path", found, sizeof found));
    assert_string_equal(found, "/abs/path");
    assert_int_equal(ts_lesson_resolve(&l, "missing.safetensors", found, sizeof found), TS_ERR_IO);
    ts_lesson_free(&l);

    /* $TSCOPE_LESSONS moves the directory. */
    const char *old = getenv("TSCOPE_LESSONS");
    char *saved = old ? strdup(old) : NULL;
    setenv("TSCOPE_LESSONS", dir, 1);
    assert_string_equal(ts_lesson_dir(), dir);
    if (saved) setenv("TSCOPE_LESSONS", saved, 1);
    else unsetenv("TSCOPE_LESSONS");
    free(saved);

    unlink(p1);
    unlink(p2);
    unlink(p3);
    unlink(other);
    unlink(asset);
    rmdir(dir);
}

int main(void) {
    unsetenv("TSCOPE_LESSONS"); /* test the lessons of this tree */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(readme_example_parses),
        cmocka_unit_test(every_lesson_parses),
        cmocka_unit_test(errors_name_file_and_line),
        cmocka_unit_test(every_problem_in_one_parse),
        cmocka_unit_test(front_matter_summary),
        cmocka_unit_test(good_variants_parse),
        cmocka_unit_test(narration_blocks),
        cmocka_unit_test(block_text_is_plain),
        cmocka_unit_test(long_narration),
        cmocka_unit_test(names_checked_against_a_trace),
        cmocka_unit_test(find_by_number_name_and_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
