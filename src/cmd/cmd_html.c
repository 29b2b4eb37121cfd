/* tscope html: a trace as a web page (viz/pages/trace_html.c): the step
 * tree, search, each step's figure and statistics, batch and head choices,
 * a training trace's snapshots on a slider; opens from disk. */
#include <stdio.h>

#include "commands.h"
#include "tscope/pages.h"
#include "tscope/trace.h"

int ts_cmd_html(int argc, char **argv) {
    const char *out = NULL;
    bool quiet = false;
    const ts_flag flags[] = {
        {"-o", TS_FLAG_STRING, &out, "DIR", "the folder to write (created when missing; required)", NULL, NULL, NULL},
        {"--quiet", TS_FLAG_BOOL, &quiet, NULL, "no summary line", NULL, NULL, NULL},
    };
    const ts_cli_spec spec = {
        .command = "html",
        .synopsis = "TRACE -o DIR [--quiet]",
        .description = "Write a trace as a web page: DIR/index.html shows the steps as a tree folded by layer and\n"
                       "module, a search box over their names, the chosen step's figure (SVG, text as text, a\n"
                       "tooltip on each cell of a small heatmap) and statistics, batch and head choices where the\n"
                       "view has them, and a training trace's snapshots on a slider. Each figure is its own file,\n"
                       "loaded when shown. Open DIR/index.html from disk; nothing comes from elsewhere.",
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
    if (!out || !out[0]) return ts_cli_error("html", "say where to write the page: -o DIR");
    ts_trace *t;
    if (ts_trace_open(pos[0], &t) != TS_OK) return ts_cli_error("html", "%s", ts_last_error());
    if (ts_trace_verify(t, NULL)) { /* never a page with a damaged step's figure left out */
        rc = ts_cli_error("html", "%s: %s", pos[0], ts_last_error());
        ts_trace_close(t);
        return rc;
    }
    if (ts_trace_warning(t)[0]) fprintf(stderr, "tscope html: warning: %s\n", ts_trace_warning(t));
    int figures = 0;
    ts_status st = ts_trace_html_write(t, pos[0], out, &figures);
    long steps = (long)ts_trace_count(t);
    ts_trace_close(t);
    ts_render_release_fonts(); /* a clean exit for leak checkers */
    if (st != TS_OK) {
        fprintf(stderr, "tscope html: %s\n", ts_last_error());
        return st == TS_ERR_NOMEM ? 1 : 2;
    }
    if (!quiet) printf("tscope html: %ld steps, %d figures in %s/ (index.html)\n", steps, figures, out);
    return 0;
}
