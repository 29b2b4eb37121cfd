/* site_assets: the files every site page shares (site_assets.c). */
#ifndef TSCOPE_VIZ_PAGES_SITE_ASSETS_H
#define TSCOPE_VIZ_PAGES_SITE_ASSETS_H

#include <stdbool.h>
#include <stddef.h>

#include "tscope/core.h"

extern const char ts_site_css[]; /* style.css */
extern const char ts_site_js[];  /* site.js: arrow keys, Home, End */
extern const char ts_explorer_js[]; /* explorer.js: tscope html's step tree, search, choices, slider */

/* The whole file at path, malloc'd (*len bytes), in site.c. */
ts_status ts_pages__read_file(const char *path, char **out, size_t *len);

/* len bytes to path, under a temporary name renamed into place. */
ts_status ts_pages__write_file(const char *path, const char *data, size_t len);

/* site_live.c: live.html and what it loads, written into dir: the page, the
 * WebAssembly build, the shipped models; or, without the build, a page that
 * says how to make it. */
ts_status ts_site_write_live(const char *dir);

#endif
