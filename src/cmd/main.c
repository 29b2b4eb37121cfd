/* tscope: the command-line entry point. Finds the subcommand in the table and
 * runs it; --help, help CMD and --version are answered here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "text_log.h"
#include "tscope/core.h"
#include "tscope/kernels.h"

/* A subcommand is listed here once it works. */
const ts_command ts_commands[] = {
    {"run", ts_cmd_run, "run the Transformer once; --print-shapes shows every step's shape"},
    {"shapes", ts_cmd_shapes, "every step's shape, parameters, FLOPs and memory, with nothing computed"},
    {"train", ts_cmd_train, "train on a toy task (copy, reverse, sort) or a text (lm); checkpoint, trace"},
    {"generate", ts_cmd_generate, "continue a prompt with a trained language model: temperature, top-k, seed"},
    {"ablate", ts_cmd_ablate, "knock out every head and FFN of a language model in turn: the loss each costs, a heatmap"},
    {"patch", ts_cmd_patch, "activation patching: each layer and position from a clean run, the answer restored"},
    {"attribute", ts_cmd_attribute, "direct logit attribution: each head's and FFN's share of one logit, a bar chart"},
    {"info", ts_cmd_info, "one line a step of a trace: name, op, shape, min/max/mean/std, NaN/Inf"},
    {"export", ts_cmd_export, "a trace's values as a NumPy .npz archive (np.load), named by step"},
    {"diff", ts_cmd_diff, "two traces step by step: largest differences, the first that diverges"},
    {"png", ts_cmd_png, "draw one step of a trace (attention, PE, LayerNorm, any tensor, shapes) as PNG"},
    {"live", ts_cmd_live, "type a sentence and watch every step of a language model answer (window)"},
    {"view", ts_cmd_view, "step through a trace in a window (keys, mouse, --script, --screenshot)"},
    {"lesson", ts_cmd_lesson, "a guided walkthrough in the viewer, or its pages as PNG (--export DIR); --list"},
    {"html", ts_cmd_html, "a trace as a web page in DIR: step tree, search, figures, snapshots on a slider"},
    {"site", ts_cmd_site, "every lesson as a static web site in DIR: opens from disk or any static host"},
    {"tokenize", ts_cmd_tokenize, "GPT-2's byte-level BPE: each line's token ids (--decode, --show labels)"},
    {"bench", ts_cmd_bench, "time kernels (against OpenBLAS), the forward pass and a training step"},
    {NULL, NULL, NULL}, /* sentinel: keeps the array non-empty */
};
const int ts_n_commands = (int)(sizeof ts_commands / sizeof ts_commands[0]) - 1;

static void print_usage(FILE *out) {
    fprintf(out,
            "tscope %s: a Transformer under a microscope\n\n"
            "usage: tscope COMMAND [flags]\n\ncommands:\n",
            TSCOPE_VERSION);
    for (int i = 0; i < ts_n_commands; i++)
        fprintf(out, "  %-8s %s\n", ts_commands[i].name, ts_commands[i].summary);
    fprintf(out,
            "\n'tscope help COMMAND' or 'tscope COMMAND --help' shows a command's flags.\n"
            "'tscope --version' prints the version.\n");
}

static const ts_command *find_command(const char *name) {
    for (int i = 0; i < ts_n_commands; i++)
        if (strcmp(ts_commands[i].name, name) == 0) return &ts_commands[i];
    return NULL;
}

static int unknown_command(const char *name) {
    fprintf(stderr, "tscope: unknown command '%s'\n", name);
    print_usage(stderr);
    return 2;
}

/* The kernel threads' wait (kernels.h): OpenMP has read its environment
 * already, so the program starts again with it set; the second start finds
 * it set and goes on. Where /proc/self/exe cannot be run, the runtime's
 * default stays. */
static void set_thread_wait(char **argv) {
    const char *name, *value;
    if (!ts_kernels_wait_env(&name, &value)) return;
    if (setenv(name, value, 1) != 0) return;
    execv("/proc/self/exe", argv);
}

int main(int argc, char **argv) {
    set_thread_wait(argv);
    if (argc < 2) {
        print_usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        print_usage(stdout);
        return 0;
    }
    if (strcmp(name, "--version") == 0) {
        printf("tscope %s\n", TSCOPE_VERSION);
        return 0;
    }
    if (strcmp(name, "help") == 0) {
        if (argc < 3) {
            print_usage(stdout);
            return 0;
        }
        const ts_command *cmd = find_command(argv[2]);
        if (!cmd) return unknown_command(argv[2]);
        char *help_argv[] = {argv[2], "--help", NULL};
        return cmd->fn(2, help_argv);
    }
    if (name[0] == '-') {
        fprintf(stderr, "tscope: unknown flag '%s' (flags go after the command)\n", name);
        print_usage(stderr);
        return 2;
    }
    const ts_command *cmd = find_command(name);
    if (!cmd) return unknown_command(name);
    ts_text_log_begin();
    int rc = cmd->fn(argc - 1, argv + 1);
    ts_text_log_end();
    return rc;
}
