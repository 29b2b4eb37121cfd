/* tscope live: type a sentence and watch the model answer (viz/viewer/live.c
 * does the work; this file loads the model and parses the flags). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "commands.h"
#include "model_weights.h"
#include "tscope/io.h"
#include "tscope/viewer.h"

/* The lengths an encoder-decoder was trained at: its config's seq and tgt_seq. */
static ts_status trained_lengths(const ts_safetensors *f, const char *path, int *S, int *T) {
    const char *config = ts_safetensors_meta(f, "config");
    if (!config)
        return ts_fail(TS_ERR_ARG, "%s has no config in its metadata: live opens the checkpoints `tscope train --save` "
                                   "writes (or a language model's)", path);
    cJSON *o = NULL;
    TS_TRY(ts_json_parse(config, strlen(config), "config", &o));
    int64_t s = 0, t = 0;
    ts_status st = ts_json_int(o, "seq", "config", true, 1, 1 << 16, &s);
    if (!st) st = ts_json_int(o, "tgt_seq", "config", true, 1, 1 << 16, &t);
    cJSON_Delete(o);
    *S = (int)s, *T = (int)t;
    return st;
}

/* An encoder-decoder over tokens (tscope train --task copy|reverse --save),
 * built as `tscope run --load` builds it, at the lengths it was trained at,
 * batch 1, no dropout. */
static ts_status open_seq2seq(const char *path, ts_model *m) {
    ts_safetensors f;
    TS_TRY(ts_safetensors_open(&f, path));
    ts_weights_info info;
    model_flags none;
    memset(&none, 0, sizeof none);
    ts_model_config cfg;
    int S = 0, T = 0;
    ts_status st = ts_weights_infer(&f, NULL, &info);
    if (!st) st = model_weights_config(&none, &info, path, &cfg);
    if (!st && !(cfg.arch == TS_ARCH_ENCODER_DECODER && cfg.head == TS_HEAD_LM && cfg.input == TS_INPUT_TOKENS))
        st = ts_fail(TS_ERR_ARG, "%s is not a language model's checkpoint nor an encoder-decoder over tokens (copy, "
                                 "reverse): it holds %s", path, ts_model_arch_name(cfg.arch));
    if (!st) st = trained_lengths(&f, path, &S, &T);
    ts_safetensors_close(&f);
    if (st) return st;
    cfg.seq = S, cfg.tgt_seq = T;
    cfg.batch = 1;
    cfg.dropout = 0;
    cfg.text = NULL;
    st = ts_model_config_check(&cfg);
    if (!st) st = ts_model_init(m, &cfg);
    if (!st) st = ts_model_load_safetensors(m, path, NULL);
    if (st) ts_model_free(m);
    return st;
}

/* A language model and its tokenizer: a tscope checkpoint (its config and
 * tokenizer inside), or a preset with its initial weights (GPT-2's sizes and
 * tokenizer: what `bench live` times). Built for the longest context. An
 * encoder-decoder's checkpoint leaves tok empty (tok->count 0). */
int live_open_model(const char *who, const char *load, const char *preset, ts_model *m, ts_lmtok *tok) {
    memset(m, 0, sizeof *m);
    memset(tok, 0, sizeof *tok);
    if (load && preset) return ts_cli_error(who, "give --load or --preset, not both");
    if (!load && !preset) return ts_cli_error(who, "give a language model: --load CHECKPOINT (e.g. assets/kjv-char.safetensors) or --preset gpt2");
    ts_status st;
    if (load) {
        st = ts_lm_checkpoint_is(load) ? ts_lm_checkpoint_open(load, NULL, 1, 0, m, tok) : open_seq2seq(load, m);
        if (!st && ts_model_is_masked_lm(&m->cfg)) { /* live shows each next token's chances */
            ts_model_free(m);
            ts_lmtok_free(tok);
            st = ts_fail(TS_ERR_ARG, "%s is a masked language model (BERT), whose logits score the token at each "
                         "position, not the next one; live reads next-token models: use tscope run --load %s", load, load);
        }
        return st ? ts_cli_error(who, "%s", ts_last_error()) : -1;
    }
    ts_model_config cfg;
    st = ts_model_config_preset(&cfg, preset);
    if (!st && !(ts_model_is_lm(&cfg) && cfg.vocab == 50257))
        st = ts_fail(TS_ERR_ARG, "--preset %s has no tokenizer to type with; only gpt2 does (or --load a trained language model)", preset);
    char dir[1024];
    if (!st) st = ts_bpe_default_dir(dir, sizeof dir);
    if (!st) st = ts_lmtok_build_bpe(tok, dir);
    if (!st) {
        cfg.batch = 1;
        cfg.dropout = 0;
        st = ts_model_init(m, &cfg);
    }
    if (st) {
        ts_lmtok_free(tok);
        return ts_cli_error(who, "%s", ts_last_error());
    }
    return -1;
}

int ts_cmd_live(int argc, char **argv) {
    const char *load = NULL, *preset = NULL, *text = NULL, *target = NULL, *script = NULL, *screenshot = NULL;
    int width = 1280, height = 800, top_k = 0;
    float temperature = 1.0f;
    bool verbose = false;
    const ts_flag flags[] = {
        {"--load", TS_FLAG_STRING, &load, "CKPT", "a trained language model (tscope train --task lm --save), or an encoder-decoder (--task copy|reverse)", NULL, NULL, NULL},
        {"--preset", TS_FLAG_STRING, &preset, "NAME", "a preset with its initial weights (gpt2)", NULL, NULL, NULL},
        {"--text", TS_FLAG_STRING, &text, "TEXT", "the text to start with (an encoder-decoder's source; default: empty)", NULL, NULL, NULL},
        {"--target", TS_FLAG_STRING, &target, "TEXT", "an encoder-decoder's target to start with: what the decoder has read after <bos>", NULL, NULL, NULL},
        {"--temperature", TS_FLAG_FLOAT, &temperature, "T", "of the next-token panel (default 1)", NULL, NULL, NULL},
        {"--top-k", TS_FLAG_INT, &top_k, "K", "keep the K most likely tokens in the panel (default 0: all)", NULL, NULL, NULL},
        {"--script", TS_FLAG_STRING, &script, "WORDS",
         "actions to replay first: type:TEXT tab backspace left right up down pgup pgdn home end esc head:N|all "
         "pick:N knock:HEAD lens views enter focus:source|target find:NAME hover:X,Y click:X,Y shot:FILE", NULL, NULL, NULL},
        {"--screenshot", TS_FLAG_STRING, &screenshot, "FILE", "write the last frame to FILE (PNG) and exit", NULL, NULL, NULL},
        {"--width", TS_FLAG_INT, &width, "W", "window width in points (default 1280)", NULL, NULL, NULL},
        {"--height", TS_FLAG_INT, &height, "H", "window height in points (default 800)", NULL, NULL, NULL},
        {"--verbose", TS_FLAG_BOOL, &verbose, NULL, "log each pass's and frame's time on stderr", NULL, NULL, NULL},
    };
    const ts_cli_spec spec = {
        .command = "live",
        .synopsis = "--load CKPT | --preset gpt2 [--text TEXT] [--target TEXT] [--script WORDS] [--screenshot FILE]",
        .description = "A window with a text field: every edit reruns the model and redraws the step you are\n"
                       "looking at (attention heads, norms, logits, any step), with the next token's\n"
                       "distribution beside it. Tab appends the most likely token; a click on a bar appends\n"
                       "that one. An encoder-decoder (a copy or reverse model) has a source and a target\n"
                       "field: Tab is one step of greedy decoding. Needs a display; `tscope run` and\n"
                       "`tscope png` work without one.",
        .flags = flags,
        .n_flags = (int)(sizeof flags / sizeof flags[0]),
    };
    int n_pos = 0;
    int rc = ts_cli_parse(&spec, argc, argv, NULL, &n_pos);
    if (rc >= 0) return rc;
    if (width < 900 || width > 16384 || height < 500 || height > 16384)
        return ts_cli_error("live", "--width and --height must be 900..16384 and 500..16384 (got %d x %d)", width, height);
    if (!(temperature > 0) || temperature > 100) return ts_cli_error("live", "--temperature must be above 0 and at most 100 (got %g)", temperature);
    if (top_k < 0) return ts_cli_error("live", "--top-k must be 0 (all) or more (got %d)", top_k);
    const char *given[2][2] = {{"--text", text}, {"--target", target}};
    for (int k = 0; k < 2; k++) {
        size_t bad;
        if (given[k][1] && !ts_text_utf8_valid(given[k][1], strlen(given[k][1]), &bad))
            return ts_cli_error("live", "%s is not UTF-8 (byte 0x%02X at offset %zu): the text field holds characters",
                                given[k][0], (unsigned char)given[k][1][bad], bad);
    }
    ts_status st = ts_live_script_check(script);
    if (st) return ts_cli_error("live", "%s", ts_last_error());
    ts_model m;
    ts_lmtok tok;
    if (!load && !preset) return live_open_model("live", load, preset, &m, &tok);
    if (!ts_window_have_display())
        return ts_cli_error("live", "no display to open a window on (DISPLAY is not set); without one, `tscope run "
                                    "--load MODEL --text TEXT --trace FILE` records a pass and `tscope png FILE "
                                    "--tensor NAME` draws it");
    rc = live_open_model("live", load, preset, &m, &tok);
    if (rc >= 0) return rc;
    ts_live_options o = {.width = width, .height = height, .text = text, .target = target, .temperature = temperature,
                         .top_k = top_k, .script = script, .screenshot = screenshot, .verbose = verbose};
    if (!o.top_k || o.top_k > m.cfg.vocab) o.top_k = top_k > m.cfg.vocab ? m.cfg.vocab : top_k;
    ts_live *l = NULL;
    st = ts_live_new(&l, &m, tok.count ? &tok : NULL, &o);
    if (!st) st = ts_live_run(l, &o);
    ts_live_free(l);
    ts_model_free(&m);
    ts_lmtok_free(&tok);
    if (!st) return 0;
    fprintf(stderr, "tscope live: %s\n", ts_last_error());
    return st == TS_ERR_NOMEM ? 1 : 2;
}
