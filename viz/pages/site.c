/* site: the lessons as a static web site (`tscope site DIR`).
 *
 * One folder per lesson with one HTML page per step: the narration (the
 * step's Markdown through md4c's HTML renderer, its $math$ as MathML) beside
 * the step's figure, an SVG drawn by the code that draws the lesson's pages
 * (ts_lesson_page_draw_figure), inlined so its text can be selected and
 * found and its cells' tooltips show. An index lists the lessons with a line
 * each and a thumbnail (the first figure as PNG). Links are relative and
 * nothing is loaded from elsewhere: the folder opens from file:// or from any
 * static host. The pages share one style sheet (with a print style: one step
 * a page) and one small script (arrow keys, Home, End). */
#include <ctype.h>
#include <dirent.h>
#include <unistd.h>
#include <errno.h>
#include <math.h>
#include <md4c-html.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pages/site_assets.h"
#include "tscope/pages.h"

/* The figure of a step, in points: CSS pixels, since the page never shows it
 * smaller than that (style.css). 760 fits beside the narration in a 1280-pixel
 * window; its text is at least FIG_MIN_TEXT points, so at least that many
 * pixels on screen (the web test measures it). */
#define FIG_W 760.0
#define FIG_H 570.0
#define FIG_MIN_TEXT 12.5

typedef struct site_lesson {
    char slug[256];
    char *title, *summary;
    int number, n_steps;
    double thumb_h; /* the thumbnail's height: its first figure's */
} site_lesson;

struct ts_site {
    char dir[2048];
    site_lesson *lessons;
    int n;
    bool made_dir;     /* the folder was not there: an abort takes it away */
    char (*made)[2400]; /* the lesson folders this site made, for an abort */
    int n_made;
    char *title, *footer; /* the site's own words (ts_site_set_words), or NULL: tscope's */
};

/* ---- files ---------------------------------------------------------------------------------- */

static ts_status write_buf(const char *path, ts_text_buf *b) {
    if (b->oom) return ts_fail(TS_ERR_NOMEM, "site: out of memory writing %s", path);
    ts_status st = ts_pages__write_file(path, b->s ? b->s : "", b->len);
    free(b->s);
    memset(b, 0, sizeof *b);
    return st;
}

ts_status ts_pages__read_file(const char *path, char **out, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return ts_fail(TS_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    ts_text_buf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) ts_text_buf_add(&b, chunk, n);
    bool err = ferror(f);
    fclose(f);
    if (err || b.oom) {
        free(b.s);
        return ts_fail(err ? TS_ERR_IO : TS_ERR_NOMEM, "cannot read %s", path);
    }
    *len = b.len;
    *out = b.s ? b.s : calloc(1, 1);
    return *out ? TS_OK : ts_fail(TS_ERR_NOMEM, "site: out of memory");
}

static void esc(ts_text_buf *b, const char *s) { ts_render_svg_escape(b, s, (size_t)-1); }

/* ---- math: the lessons' $formula$ notation as MathML ------------------------------------------
 * Letters make identifiers, digits numbers, anything else an operator;
 * x_k and x^{2i/d} sub- and superscripts (one item, or a {group}); √ takes
 * the item after it, or a (group) whose parentheses the radical replaces. */

static int u8len(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

static unsigned u8code(const char *s) {
    unsigned char c = (unsigned char)s[0];
    if (c < 0x80) return c;
    if (c < 0xE0) return (unsigned)(c & 0x1F) << 6 | (s[1] & 0x3F);
    if (c < 0xF0) return (unsigned)(c & 0x0F) << 12 | (unsigned)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
    return (unsigned)(c & 0x07) << 18 | (unsigned)(s[1] & 0x3F) << 12 | (unsigned)(s[2] & 0x3F) << 6 | (s[3] & 0x3F);
}

static bool is_letter(unsigned c) { return isalpha((int)(c < 128 ? c : 0)) || (c >= 0x370 && c <= 0x3FF && c != 0x3A3); }

static void math_seq(ts_text_buf *b, const char **p, const char *end, char stop, int depth);

/* One item at *p (with its sub- and superscripts) into b. */
static void math_item(ts_text_buf *b, const char **p, const char *end, int depth) {
    while (*p < end && **p == ' ') (*p)++;
    if (*p >= end) return;
    ts_text_buf base = {0};
    const char *s = *p;
    unsigned c = u8code(s);
    if (c == '{' && depth < 16) {
        (*p)++;
        ts_text_buf_str(&base, "<mrow>");
        math_seq(&base, p, end, '}', depth + 1);
        ts_text_buf_str(&base, "</mrow>");
    } else if (isdigit((int)(c < 128 ? c : 0))) {
        while (*p < end && (isdigit((unsigned char)**p) || (**p == '.' && *p + 1 < end && isdigit((unsigned char)(*p)[1])))) (*p)++;
        ts_text_buf_str(&base, "<mn>");
        ts_render_svg_escape(&base, s, (size_t)(*p - s));
        ts_text_buf_str(&base, "</mn>");
    } else if (is_letter(c)) {
        while (*p < end && is_letter(u8code(*p))) *p += u8len((unsigned char)**p);
        ts_text_buf_str(&base, "<mi>");
        ts_render_svg_escape(&base, s, (size_t)(*p - s));
        ts_text_buf_str(&base, "</mi>");
    } else if (c == 0x221A && depth < 16) { /* √ */
        *p += 3;
        ts_text_buf_str(&base, "<msqrt>");
        while (*p < end && **p == ' ') (*p)++;
        if (*p < end && **p == '(') {
            (*p)++;
            math_seq(&base, p, end, ')', depth + 1);
        } else {
            math_item(&base, p, end, depth + 1);
        }
        ts_text_buf_str(&base, "</msqrt>");
    } else {
        *p += u8len((unsigned char)*s);
        if (*p > end) *p = end;
        ts_text_buf_str(&base, "<mo>");
        ts_render_svg_escape(&base, s, (size_t)(*p - s));
        ts_text_buf_str(&base, "</mo>");
    }
    /* sub- and superscripts wrap what came before them */
    while (*p < end && (**p == '_' || **p == '^') && depth < 16) {
        bool sub = **p == '_';
        (*p)++;
        ts_text_buf script = {0};
        math_item(&script, p, end, depth + 1);
        ts_text_buf w = {0};
        ts_text_buf_str(&w, sub ? "<msub>" : "<msup>");
        if (base.s) ts_text_buf_str(&w, base.s);
        if (script.s) ts_text_buf_str(&w, script.s);
        else ts_text_buf_str(&w, "<mrow></mrow>");
        ts_text_buf_str(&w, sub ? "</msub>" : "</msup>");
        free(base.s);
        free(script.s);
        base = w;
    }
    if (base.s) ts_text_buf_str(b, base.s);
    if (base.oom) b->oom = true;
    free(base.s);
}

static void math_seq(ts_text_buf *b, const char **p, const char *end, char stop, int depth) {
    while (*p < end) {
        while (*p < end && **p == ' ') (*p)++;
        if (*p >= end) break;
        if (stop && **p == stop) {
            (*p)++;
            return;
        }
        math_item(b, p, end, depth);
    }
}

/* An HTML-escaped formula (as md4c writes it) as MathML. */
static void mathml(ts_text_buf *b, const char *html, size_t len, bool display) {
    char *plain = malloc(len + 1);
    if (!plain) {
        b->oom = true;
        return;
    }
    size_t n = 0;
    static const struct { const char *ent; char c; } ents[] = {{"&lt;", '<'}, {"&gt;", '>'}, {"&amp;", '&'}, {"&quot;", '"'}};
    for (size_t i = 0; i < len;) {
        bool done = false;
        for (size_t e = 0; e < sizeof ents / sizeof ents[0] && !done; e++) {
            size_t el = strlen(ents[e].ent);
            if (i + el <= len && memcmp(html + i, ents[e].ent, el) == 0) {
                plain[n++] = ents[e].c;
                i += el;
                done = true;
            }
        }
        if (!done) plain[n++] = html[i++];
    }
    plain[n] = '\0';
    ts_text_buf_str(b, display ? "<math display=\"block\"><mrow>" : "<math><mrow>");
    const char *p = plain;
    math_seq(b, &p, plain + n, 0, 0);
    ts_text_buf_str(b, "</mrow></math>");
    free(plain);
}

/* ---- Markdown ------------------------------------------------------------------------------ */

static void md_out(const MD_CHAR *text, MD_SIZE size, void *ctx) { ts_text_buf_add(ctx, text, size); }

/* md (Markdown) as HTML into b: md4c's renderer, then its <x-equation>
 * spans as MathML. Raw HTML in a lesson is shown as text, never passed on. */
static ts_status markdown(ts_text_buf *b, const char *md) {
    ts_text_buf raw = {0};
    unsigned flags = MD_FLAG_LATEXMATHSPANS | MD_FLAG_TABLES | MD_FLAG_STRIKETHROUGH | MD_FLAG_NOHTML;
    if (md_html(md, (MD_SIZE)strlen(md), md_out, &raw, flags, 0) != 0 || raw.oom) {
        free(raw.s);
        return ts_fail(TS_ERR_FORMAT, "site: md4c could not render a narration");
    }
    const char *s = raw.s ? raw.s : "";
    for (;;) {
        const char *open = strstr(s, "<x-equation");
        if (!open) break;
        const char *gt = strchr(open, '>');
        const char *close = gt ? strstr(gt, "</x-equation>") : NULL;
        if (!close) break;
        ts_text_buf_add(b, s, (size_t)(open - s));
        bool display = strstr(open, "type=\"display\"") && strstr(open, "type=\"display\"") < gt;
        mathml(b, gt + 1, (size_t)(close - gt - 1), display);
        s = close + strlen("</x-equation>");
    }
    ts_text_buf_str(b, s);
    free(raw.s);
    return TS_OK;
}

/* ---- pages ------------------------------------------------------------------------------------- */

static void page_head(ts_text_buf *b, const char *title, const char *root) {
    ts_text_buf_str(b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                       "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>");
    esc(b, title);
    ts_text_buf_printf(b, "</title>\n<link rel=\"stylesheet\" href=\"%sstyle.css\">\n</head>\n", root);
}

/* The index's line on a lesson: its front matter's summary, written for the
 * index; a lesson without one, its introduction's first sentence. */
static char *summary_of(const ts_lesson *l) {
    if (l->summary) return strdup(l->summary);
    for (int i = 0; i < l->intro.n_blocks; i++) {
        if (l->intro.blocks[i].kind != TS_LESSON_PARA) continue;
        char *t = NULL;
        if (ts_lesson_block_text(&l->intro.blocks[i], &t)) return NULL;
        char *stop = strstr(t, ". ");
        if (stop) stop[1] = '\0';
        for (char *c = t; *c; c++)
            if (*c == '\n') *c = ' ';
        return t;
    }
    return strdup("");
}

static bool titled_by_heading(const ts_lesson_step *st) {
    for (int i = 0; i < st->n_keys; i++)
        if (strcmp(st->keys[i].key, "title") == 0) return false;
    return st->narration.n_blocks > 0 && st->narration.blocks[0].kind == TS_LESSON_HEADING;
}

static void step_file(char *buf, size_t cap, int step) { snprintf(buf, cap, "step%02d.html", step + 1); }

/* The figure's SVG as written, from its <svg> on (the XML prolog left out),
 * with a role and label for screen readers. */
static void inline_svg(ts_text_buf *b, const char *svg, const char *id) {
    const char *s = strstr(svg, "<svg");
    if (!s) return;
    ts_text_buf_printf(b, "<svg role=\"img\" aria-labelledby=\"%s\"", id);
    ts_text_buf_str(b, s + 4);
}

typedef struct fig_ctx {
    ts_lesson_page *page;
} fig_ctx;

static ts_status draw_fig(void *ctx, cairo_t *cr, double w, double h) {
    double floor_was = ts_render_min_text();
    ts_render_set_min_text(FIG_MIN_TEXT);
    ts_status st = ts_lesson_page_draw_figure(((fig_ctx *)ctx)->page, cr, w, h);
    ts_render_set_min_text(floor_was);
    return st;
}

/* The figure's height: FIG_H, or taller when a text would not be drawn whole
 * at FIG_H (a dataflow graph of many levels wants more rows per band, so
 * fewer bands side by side), in quarter steps up to three times. The text
 * floor stays; only the figure grows. Tried on an image surface with the
 * clips recorded (ts_figure_write records them again when it writes). */
static double fig_height(fig_ctx *fc, double w, double h0) {
    for (int k = 0; k <= 8; k++) {
        double h = round(h0 * (1 + k / 4.0));
        cairo_surface_t *surf = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, (int)w, (int)h);
        cairo_t *cr = cairo_create(surf);
        ts_render_clips_begin();
        ts_status st = draw_fig(fc, cr, w, h);
        int n = ts_render_clips_end(NULL, 0);
        cairo_destroy(cr);
        cairo_surface_destroy(surf);
        if (st || n == 0) return st ? h0 : h;
    }
    return h0;
}

static ts_status write_step(ts_site *site, const ts_lessonrun *r, site_lesson *sl, const char *ldir, int i) {
    const ts_lesson *l = r->lesson;
    const ts_lesson_step *st = &l->steps[i];
    ts_lesson_page *pg;
    ts_status s = ts_lesson_page_build(&pg, r, i);
    if (s) return s;
    char caption[2048];
    ts_lesson_page_caption(pg, caption, sizeof caption);
    char svg_path[4096], png_path[4096], page_title[1024];
    /* drawn to a file first (ts_figure_write), then inlined into the page */
    snprintf(svg_path, sizeof svg_path, "%s/.step%02d.svg", ldir, i + 1);
    snprintf(page_title, sizeof page_title, "%s, step %d of %d", l->title, i + 1, l->n_steps);
    fig_ctx fc = {pg};
    /* a zoom beside another view: the two go one above the other (ts_lesson_page_draw_figure), a square figure */
    bool two_zoomed = st->zoomed && (st->compare_with || st->compare_run);
    double fig_h = fig_height(&fc, FIG_W, two_zoomed ? FIG_W : FIG_H);
    ts_figure_spec spec = {.format = TS_FIGURE_SVG, .width = FIG_W, .height = fig_h, .scale = 1,
                           .title = page_title,
                           .desc = caption, .svg_pixelated = true};
    s = ts_figure_write(svg_path, &spec, draw_fig, &fc);
    if (!s && i == 0) {
        /* the index's thumbnail: the same figure as PNG, one pixel a point */
        snprintf(png_path, sizeof png_path, "%s/thumb.png", ldir);
        spec.format = TS_FIGURE_PNG;
        sl->thumb_h = fig_h;
        spec.svg_pixelated = false;
        s = ts_figure_write(png_path, &spec, draw_fig, &fc);
    }
    ts_lesson_page_free(pg);
    if (s) return s;
    char *svg = NULL;
    size_t svg_len = 0;
    s = ts_pages__read_file(svg_path, &svg, &svg_len);
    remove(svg_path);
    if (s) return s;

    ts_text_buf b = {0};
    char head[1200], prev[32], next[32], first[32], last[32];
    snprintf(head, sizeof head, "%s%d \xc2\xb7 %s \xc2\xb7 step %d of %d", sl->number ? "Lesson " : "", sl->number,
             l->title, i + 1, l->n_steps);
    if (!sl->number) snprintf(head, sizeof head, "%s \xc2\xb7 step %d of %d", l->title, i + 1, l->n_steps);
    page_head(&b, head, "../");
    step_file(first, sizeof first, 0);
    step_file(last, sizeof last, l->n_steps - 1);
    if (i > 0) step_file(prev, sizeof prev, i - 1);
    else snprintf(prev, sizeof prev, "../index.html");
    if (i + 1 < l->n_steps) step_file(next, sizeof next, i + 1);
    else snprintf(next, sizeof next, "../index.html");
    ts_text_buf_printf(&b, "<body data-prev=\"%s\" data-next=\"%s\" data-first=\"%s\" data-last=\"%s\">\n", prev, next,
                       first, last);
    ts_text_buf_str(&b, "<header>\n<a class=\"home\" href=\"../index.html\">");
    esc(&b, site->title ? site->title : "tscope lessons");
    ts_text_buf_str(&b, "</a>\n<h1>");
    if (sl->number) ts_text_buf_printf(&b, "<span class=\"num\">Lesson %d</span> ", sl->number);
    esc(&b, l->title);
    ts_text_buf_printf(&b, "</h1>\n<span class=\"count\">step %d / %d</span>\n</header>\n<main class=\"step\">\n"
                           "<article class=\"narration\">\n",
                       i + 1, l->n_steps);
    if (i == 0 && l->intro.source && l->intro.source[0]) {
        ts_text_buf_str(&b, "<div class=\"intro\">\n");
        s = markdown(&b, l->intro.source);
        ts_text_buf_str(&b, "</div>\n");
    }
    if (!s && st->title[0] && !titled_by_heading(st)) {
        ts_text_buf_str(&b, "<h2>");
        esc(&b, st->title);
        ts_text_buf_str(&b, "</h2>\n");
    }
    if (!s && st->narration.source) s = markdown(&b, st->narration.source);
    char fig_id[32];
    snprintf(fig_id, sizeof fig_id, "fig%d", i + 1);
    /* a figure taller than the window scrolls with the page rather than stick at its top */
    ts_text_buf_printf(&b, "</article>\n<figure%s>\n", fig_h > FIG_W ? " class=\"tall\"" : "");
    inline_svg(&b, svg, fig_id);
    ts_text_buf_printf(&b, "<figcaption id=\"%s\">", fig_id);
    esc(&b, caption);
    ts_text_buf_str(&b, "</figcaption>\n</figure>\n</main>\n");
    ts_text_buf_printf(&b, "<nav class=\"pager\">\n<a rel=\"prev\" href=\"%s\">\xe2\x86\x90 %s</a>\n"
                           "<span class=\"keys\">\xe2\x86\x90 \xe2\x86\x92 to move, Home and End for the first and last step</span>\n"
                           "<a rel=\"next\" href=\"%s\">%s \xe2\x86\x92</a>\n</nav>\n",
                       prev, i > 0 ? "previous" : "all lessons", next, i + 1 < l->n_steps ? "next" : "all lessons");
    if (site->footer) {
        ts_text_buf_str(&b, "<footer>");
        esc(&b, site->footer);
        ts_text_buf_str(&b, "</footer>\n");
    }
    ts_text_buf_str(&b, "<script src=\"../site.js\"></script>\n</body>\n</html>\n");
    free(svg);
    if (s) {
        free(b.s);
        return s;
    }
    char path[4096], file[32];
    step_file(file, sizeof file, i);
    snprintf(path, sizeof path, "%s/%s", ldir, file);
    return write_buf(path, &b);
}

/* ---- the site --------------------------------------------------------------------------------- */

ts_status ts_site_open(ts_site **out, const char *dir) {
    *out = NULL;
    if (strlen(dir) >= sizeof ((ts_site *)0)->dir) return ts_fail(TS_ERR_ARG, "site: the folder's path is too long: %s", dir);
    struct stat sb;
    bool there = stat(dir, &sb) == 0;
    ts_status st = ts_mkdir_p(dir);
    if (st) return st;
    ts_site *s = calloc(1, sizeof *s);
    if (!s) return ts_fail(TS_ERR_NOMEM, "site: out of memory");
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    s->made_dir = !there;
    *out = s; /* the style sheet and scripts are written by ts_site_close, once every lesson is in */
    return TS_OK;
}

/* Every file in a folder this site made, then the folder. */
static void remove_made(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        remove(path);
    }
    closedir(d);
    rmdir(dir);
}

ts_status ts_site_add_lesson(ts_site *s, const ts_lessonrun *r) {
    const ts_lesson *l = r->lesson;
    const char *base = strrchr(l->path, '/');
    base = base ? base + 1 : l->path;
    site_lesson sl = {0};
    snprintf(sl.slug, sizeof sl.slug, "%s", base);
    char *dot = strrchr(sl.slug, '.');
    if (dot) *dot = '\0';
    for (char *c = sl.slug; *c; c++)
        if (!isalnum((unsigned char)*c) && *c != '-' && *c != '_') *c = '-';
    sl.number = ts_lesson_number(l->path);
    sl.n_steps = l->n_steps;
    if (l->n_steps == 0) return ts_fail(TS_ERR_ARG, "%s: a lesson without steps has no pages", l->path);
    char ldir[sizeof s->dir + sizeof sl.slug + 8]; /* files in it still fit a 4096-byte path */
    snprintf(ldir, sizeof ldir, "%s/%s", s->dir, sl.slug);
    struct stat sb;
    if (stat(ldir, &sb) != 0) { /* made here: an abort removes it */
        char (*grown_made)[2400] = realloc(s->made, (size_t)(s->n_made + 1) * sizeof *grown_made);
        if (!grown_made) return ts_fail(TS_ERR_NOMEM, "site: out of memory");
        s->made = grown_made;
        snprintf(s->made[s->n_made++], sizeof s->made[0], "%s", ldir);
    }
    ts_status st = ts_mkdir_p(ldir);
    for (int i = 0; !st && i < l->n_steps; i++) st = write_step(s, r, &sl, ldir, i);
    if (st) return st;
    site_lesson *grown = realloc(s->lessons, (size_t)(s->n + 1) * sizeof *grown);
    if (!grown) return ts_fail(TS_ERR_NOMEM, "site: out of memory");
    s->lessons = grown;
    sl.title = strdup(l->title);
    sl.summary = summary_of(l);
    if (!sl.title || !sl.summary) {
        free(sl.title);
        free(sl.summary);
        return ts_fail(TS_ERR_NOMEM, "site: out of memory");
    }
    s->lessons[s->n++] = sl;
    return TS_OK;
}

static void site_free(ts_site *s) {
    for (int i = 0; i < s->n; i++) {
        free(s->lessons[i].title);
        free(s->lessons[i].summary);
    }
    free(s->lessons);
    free(s->made);
    free(s->title);
    free(s->footer);
    free(s);
}

ts_status ts_site_set_words(ts_site *s, const char *title, const char *footer) {
    free(s->title);
    free(s->footer);
    s->title = title ? strdup(title) : NULL;
    s->footer = footer ? strdup(footer) : NULL;
    if ((title && !s->title) || (footer && !s->footer)) return ts_fail(TS_ERR_NOMEM, "site: out of memory");
    return TS_OK;
}

ts_status ts_site_close(ts_site *s) {
    if (!s) return TS_OK;
    ts_text_buf b = {0};
    page_head(&b, s->title ? s->title : "tscope: the lessons", "");
    ts_text_buf_str(&b, "<body class=\"index\" data-first=\"\" data-last=\"\">\n<header>\n<h1>");
    esc(&b, s->title ? s->title : "tscope: a Transformer under a microscope");
    ts_text_buf_str(&b, "</h1>\n</header>\n<main>\n<p class=\"lede\">Lessons that run a Transformer and step "
                        "through what it computes, narration beside each figure. Use \xe2\x86\x90 and \xe2\x86\x92 to "
                        "move through a lesson; hover a cell of a small heatmap to read its value.</p>\n"
                        "<p class=\"lede\"><a href=\"live.html\">Live: type into a language model and knock out its "
                        "heads</a> in your browser, with nothing to install.</p>\n<ol class=\"lessons\">\n");
    for (int i = 0; i < s->n; i++) {
        const site_lesson *l = &s->lessons[i];
        ts_text_buf_printf(&b, "<li class=\"card\"><a href=\"%s/step01.html\"><img src=\"%s/thumb.png\" alt=\"", l->slug,
                           l->slug);
        ts_text_buf_str(&b, "the first figure of ");
        esc(&b, l->title);
        ts_text_buf_printf(&b, "\" loading=\"lazy\" width=\"%.0f\" height=\"%.0f\">\n<h2>", FIG_W,
                           l->thumb_h > 0 ? l->thumb_h : FIG_H);
        if (l->number) ts_text_buf_printf(&b, "<span class=\"num\">%d</span> ", l->number);
        esc(&b, l->title);
        ts_text_buf_str(&b, "</h2></a>\n<p>");
        esc(&b, l->summary);
        ts_text_buf_printf(&b, "</p>\n<p class=\"steps\">%d steps</p></li>\n", l->n_steps);
    }
    ts_text_buf_str(&b, "</ol>\n</main>\n<footer>");
    if (s->footer) esc(&b, s->footer);
    else ts_text_buf_str(&b, "Made by <code>tscope site</code>: every figure is drawn by the code that draws tscope's "
                             "PNG, SVG and PDF figures.");
    ts_text_buf_str(&b, "</footer>\n</body>\n</html>\n");
    char path[4096];
    snprintf(path, sizeof path, "%s/style.css", s->dir);
    ts_status st = ts_pages__write_file(path, ts_site_css, strlen(ts_site_css));
    snprintf(path, sizeof path, "%s/site.js", s->dir);
    if (!st) st = ts_pages__write_file(path, ts_site_js, strlen(ts_site_js));
    if (!st) st = ts_site_write_live(s->dir);
    snprintf(path, sizeof path, "%s/index.html", s->dir);
    if (!st) st = write_buf(path, &b);
    else free(ts_text_buf_take(&b));
    site_free(s);
    return st;
}

void ts_site_abort(ts_site *s) {
    if (!s) return;
    for (int i = 0; i < s->n_made; i++) remove_made(s->made[i]); /* a failed site leaves nothing of its own */
    if (s->made_dir) rmdir(s->dir);
    site_free(s);
}
