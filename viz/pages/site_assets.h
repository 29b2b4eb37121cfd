/* site_assets: the files every site page shares (site_assets.c). */
#ifndef TSCOPE_VIZ_PAGES_SITE_ASSETS_H
#define TSCOPE_VIZ_PAGES_SITE_ASSETS_H

#include <stddef.h>

#include "tscope/core.h"

extern const char ts_site_css[]; /* style.css */
extern const char ts_site_js[];  /* site.js: arrow keys, Home, End */
extern const char ts_explorer_js[]; /* explorer.js: tscope html's step tree, search, choices, slider */

/* len bytes to path, under a temporary name renamed into place. */
ts_status ts_pages__write_file(const char *path, const char *data, size_t len);

#endif
