/* commands: the subcommands of the tscope binary, one file each (cmd_*.c).
 * Each takes argv with argv[0] = its own name and returns the exit code:
 * 0 done, 1 ran but found a difference or failure, 2 bad input. */
#ifndef TSCOPE_COMMANDS_H
#define TSCOPE_COMMANDS_H

#include "cli.h"

/* The table main() dispatches on, in the order --help lists them. */
extern const ts_command ts_commands[];
extern const int ts_n_commands;

int ts_cmd_ablate(int argc, char **argv);
int ts_cmd_attribute(int argc, char **argv);
int ts_cmd_bench(int argc, char **argv);
int ts_cmd_diff(int argc, char **argv);
int ts_cmd_export(int argc, char **argv);
int ts_cmd_generate(int argc, char **argv);
int ts_cmd_html(int argc, char **argv);
int ts_cmd_info(int argc, char **argv);
int ts_cmd_lesson(int argc, char **argv);
int ts_cmd_patch(int argc, char **argv);
int ts_cmd_png(int argc, char **argv);
int ts_cmd_run(int argc, char **argv);
int ts_cmd_shapes(int argc, char **argv);
int ts_cmd_site(int argc, char **argv);
int ts_cmd_tokenize(int argc, char **argv);
int ts_cmd_train(int argc, char **argv);
int ts_cmd_view(int argc, char **argv);
int ts_cmd_live(int argc, char **argv);
/* `tscope bench live` (bench_live.c): the exit code. */
int bench_live(int threads);
/* live's model: a checkpoint (load) or a preset; -1 when opened, else the exit code (message printed). */
struct ts_model;
struct ts_lmtok;
int live_open_model(const char *who, const char *load, const char *preset, struct ts_model *m, struct ts_lmtok *tok);

#endif
