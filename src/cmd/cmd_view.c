/* tscope view: step through a trace in a window (viz/viewer/ does the work). */
#include <stdio.h>
#include <stdlib.h>

#include "commands.h"
#include "tscope/viewer.h"

int ts_cmd_view(int argc, char **argv) {
    ts_view_options opt = {0};
    int width = 1280, height = 800; /* fits a 1366 x 768 laptop screen less its panels */
    bool verbose = false;
    const ts_flag flags[] = {
        {"--script", TS_FLAG_STRING, &opt.script, "KEYS",
         "replay keys first, e.g. \"right right 3 e\" (left right up down pgup pgdn home end enter esc, "
         "one character, find:NAME, shot:FILE, hover:X,Y click:X,Y press:X,Y release wheel:X,Y,DY resize:W,H)",
         NULL, NULL, NULL},
        {"--screenshot", TS_FLAG_STRING, &opt.screenshot, "FILE",
         "write the last frame to FILE (PNG) and exit, instead of waiting for the user", NULL, NULL, NULL},
        {"--width", TS_FLAG_INT, &width, "W", "window width in points (default 1280)", NULL, NULL, NULL},
        {"--height", TS_FLAG_INT, &height, "H", "window height in points (default 800)", NULL, NULL, NULL},
        {"--export-dir", TS_FLAG_STRING, &opt.export_dir, "DIR", "where 'e' writes PNG files (default .)", NULL,
         NULL, NULL},
        {"--verbose", TS_FLAG_BOOL, &verbose, NULL, "log the draw time of every frame on stderr", NULL, NULL, NULL},
    };
    const ts_cli_spec spec = {
        .command = "view",
        .synopsis = "TRACE [--script KEYS] [--screenshot FILE] [--width W --height H]",
        .description = "Open a window that walks through a trace step by step: the steps on the left, the\n"
                       "current one drawn in the centre (attention heads, PE curves, LayerNorm statistics,\n"
                       "any tensor), its statistics in the status bar. Press ? in the window for the keys.\n"
                       "Needs a display; `tscope png` draws the same pictures without one.",
        .flags = flags,
        .n_flags = (int)(sizeof flags / sizeof flags[0]),
        .min_positional = 1,
        .max_positional = 1,
        .positional_meta = "TRACE",
    };
    const char *pos[1];
    int n_pos = 0;
    int rc = ts_cli_parse(&spec, argc, argv, pos, &n_pos);
    if (rc >= 0) return rc;
    if (width < 640 || width > 16384 || height < 400 || height > 16384)
        return ts_cli_error("view", "--width and --height must be 640..16384 and 400..16384 (got %d x %d)", width,
                            height);
    opt.width = width;
    opt.height = height;
    opt.verbose = verbose || getenv("TSCOPE_VIEW_VERBOSE");
    ts_status s = ts_view_run(pos[0], &opt);
    if (s == TS_OK) return 0;
    fprintf(stderr, "tscope view: %s\n", ts_last_error());
    /* No display, a missing or damaged trace, a bad script: all bad input. */
    return s == TS_ERR_NOMEM ? 1 : 2;
}
