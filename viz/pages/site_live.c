/* site_live: the site's live page, live.html: the page and its controls
 * (viz/pages/live/), tscope's WebAssembly build (`make wasm`: the model,
 * the knock-outs and the views' layout, one JS file with the wasm inside)
 * and the two shipped language models as scripts, since a page opened from
 * disk may load scripts but not fetch files. Without the wasm build the page
 * says how to make it, so the lessons' links to it never lead nowhere. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "site_assets.h"
#include "tscope/pages.h"

#ifndef TSCOPE_SOURCE_DIR
#define TSCOPE_SOURCE_DIR "."
#endif

/* The models the page offers: its name in the address, the file in assets/. */
static const struct {
    const char *name, *file;
} live_models[] = {{"kjv", "kjv-char.safetensors"}, {"induction", "induction-2l.safetensors"}};

/* Copy the file at from to dir/name. */
static ts_status copy_to(const char *from, const char *dir, const char *name) {
    char *data;
    size_t len;
    TS_TRY(ts_pages__read_file(from, &data, &len));
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ts_status st = ts_pages__write_file(path, data, len);
    free(data);
    return st;
}

/* dir/live-NAME.js: the checkpoint's bytes in base64 under tscopeLiveModels[NAME]. */
static ts_status write_model(const char *dir, const char *assets, int i) {
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char from[4200];
    snprintf(from, sizeof from, "%s/%s", assets, live_models[i].file);
    char *data;
    size_t len;
    TS_TRY(ts_pages__read_file(from, &data, &len));
    ts_text_buf b = {0};
    ts_text_buf_printf(&b, "// %s, as tscope site copied it for live.html\n"
                           "(window.tscopeLiveModels = window.tscopeLiveModels || {})[\"%s\"] = \"",
                       live_models[i].file, live_models[i].name);
    const unsigned char *p = (const unsigned char *)data;
    for (size_t at = 0; at < len; at += 3) {
        uint32_t v = (uint32_t)p[at] << 16 | (at + 1 < len ? (uint32_t)p[at + 1] << 8 : 0) | (at + 2 < len ? p[at + 2] : 0);
        char quad[4] = {digits[v >> 18 & 63], digits[v >> 12 & 63], at + 1 < len ? digits[v >> 6 & 63] : '=',
                        at + 2 < len ? digits[v & 63] : '='};
        ts_text_buf_add(&b, quad, 4);
    }
    ts_text_buf_str(&b, "\";\n");
    free(data);
    if (b.oom) {
        free(b.s);
        return ts_fail(TS_ERR_NOMEM, "site: out of memory");
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/live-%s.js", dir, live_models[i].name);
    ts_status st = ts_pages__write_file(path, b.s, b.len);
    free(b.s);
    return st;
}

const char *ts_site_live_wasm(void) {
    const char *env = getenv("TSCOPE_WASM");
    return env && *env ? env : TSCOPE_SOURCE_DIR "/build/wasm/tscope-wasm.js";
}

bool ts_site_live_available(void) {
    FILE *f = fopen(ts_site_live_wasm(), "rb");
    if (f) fclose(f);
    return f != NULL;
}

/* live.html without the wasm build: what to do instead. */
static ts_status write_placeholder(const char *dir) {
    static const char page[] =
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>tscope live: not built</title>\n"
        "<link rel=\"stylesheet\" href=\"style.css\">\n</head>\n<body>\n<main>\n<h1>tscope live</h1>\n"
        "<p>This site was made without tscope's WebAssembly build, so it has no live page. Run "
        "<code>make wasm</code> (it needs <code>scripts/deps.sh web</code>), then <code>tscope site</code> again, "
        "or type into <code>tscope live</code>.</p>\n<p><a href=\"index.html\">The lessons</a></p>\n</main>\n</body>\n</html>\n";
    char path[4200];
    snprintf(path, sizeof path, "%s/live.html", dir);
    return ts_pages__write_file(path, page, sizeof page - 1);
}

ts_status ts_site_write_live(const char *dir) {
    if (!ts_site_live_available()) return write_placeholder(dir);
    const char *env = getenv("TSCOPE_ASSETS");
    const char *assets = env && *env ? env : TSCOPE_SOURCE_DIR "/assets";
    TS_TRY(copy_to(ts_site_live_wasm(), dir, "tscope-wasm.js"));
    TS_TRY(copy_to(TSCOPE_SOURCE_DIR "/viz/pages/live/live.js", dir, "live.js"));
    for (size_t i = 0; i < sizeof live_models / sizeof live_models[0]; i++) TS_TRY(write_model(dir, assets, (int)i));
    return copy_to(TSCOPE_SOURCE_DIR "/viz/pages/live/live.html", dir, "live.html");
}
