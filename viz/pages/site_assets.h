/* site_assets: the files every site page shares (site_assets.c). */
#ifndef TSCOPE_VIZ_PAGES_SITE_ASSETS_H
#define TSCOPE_VIZ_PAGES_SITE_ASSETS_H

extern const char ts_site_css[]; /* style.css */
extern const char ts_site_js[];  /* site.js: arrow keys, Home, End */
extern const char ts_explorer_js[]; /* explorer.js: tscope html's step tree, search, choices, slider */

#endif
