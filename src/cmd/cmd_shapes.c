/* tscope shapes: every step's shape, each module's parameters, the FLOPs and
 * the memory of a forward pass, with nothing allocated or computed. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "model_flags.h"

/* "1,234,567" */
static char *grouped(char *buf, size_t size, int64_t n) {
    char digits[32];
    int len = snprintf(digits, sizeof digits, "%lld", (long long)n);
    size_t o = 0;
    for (int i = 0; i < len && o + 2 < size; i++) {
        if (i > 0 && digits[i - 1] != '-' && (len - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
    return buf;
}

static char *human(char *buf, size_t size, double x, const char *unit) {
    const char *prefix[] = {"", "K", "M", "G", "T", "P"};
    int k = 0;
    while (x >= 1000.0 && k < 5) x /= 1000.0, k++;
    snprintf(buf, size, k ? "%.1f %s%s" : "%.0f %s%s", x, prefix[k], unit);
    return buf;
}

static char *bytes(char *buf, size_t size, double b) {
    if (b >= 1 << 30) snprintf(buf, size, "%.2f GB", b / (1 << 30));
    else if (b >= 1 << 20) snprintf(buf, size, "%.1f MB", b / (1 << 20));
    else snprintf(buf, size, "%.1f KB", b / 1024);
    return buf;
}

static void print_table(FILE *out, const ts_model_summary *s) {
    fprintf(out, "\n%-36s %-22s %14s %12s\n", "module", "output", "parameters", "FLOPs");
    for (int i = 0; i < s->count; i++) {
        const ts_model_module *m = &s->modules[i];
        char shape[TS_SHAPE_TEXT_MAX], params[32], flops[32];
        ts_shape_format(shape, sizeof shape, m->rank, m->shape, TS_SHAPE_PLAIN);
        fprintf(out, "%-36s %-22s %14s %12s\n", m->name, shape, grouped(params, sizeof params, m->params),
                m->flops > 0 ? human(flops, sizeof flops, m->flops, "") : "-");
    }
    char a[32], b[32], c[32], d[32];
    fprintf(out, "\nparameters: %s (%s of float32)\n", grouped(a, sizeof a, s->params),
            bytes(b, sizeof b, (double)s->params * 4));
    fprintf(out, "matmul FLOPs per forward: %s\n", human(c, sizeof c, s->flops, "FLOP"));
    fprintf(out, "activation memory: %s in tscope's reused buffers; %s in a trace of every step's values\n",
            bytes(a, sizeof a, (double)s->arena_bytes), bytes(d, sizeof d, (double)s->kept_bytes));
    fprintf(out, "steps traced: %d\n", s->steps);
}

/* Every parameter the config has, under the name a state_dict must give it. */
static int print_params(const ts_model_config *cfg) {
    ts_model m;
    if (ts_model_init_dry(&m, cfg)) return ts_cli_error("shapes", "%s", ts_last_error());
    printf("\n%-48s %-14s %12s\n", "parameter (state_dict name)", "shape", "numbers");
    int64_t total = 0;
    bool per_head = false;
    for (int i = 0; i < m.n_params; i++) {
        const ts_model_param_info *p = &m.params[i];
        char shape[TS_SHAPE_TEXT_MAX], count[32];
        ts_shape_format(shape, sizeof shape, p->rank, p->shape, TS_SHAPE_PLAIN);
        printf("%-48s %-14s %12s\n", p->name, shape, grouped(count, sizeof count, p->numel));
        total += p->numel;
        per_head |= p->layout != TS_LAYOUT_TORCH;
    }
    char t[32];
    printf("\n%d parameters, %s numbers\n", m.n_params, grouped(t, sizeof t, total));
    if (cfg->arch == TS_ARCH_ENCODER)
        printf("nn.TransformerEncoder's own state_dict names them without 'encoder.' (layers.0.…, norm.…); both "
               "are read.\n");
    if (per_head)
        printf("in_proj_weight and in_proj_bias are exchanged in PyTorch's order [Wq; Wk; Wv]; tscope stores "
               "their rows per head inside.\n");
    ts_model_free(&m);
    return 0;
}

int ts_cmd_shapes(int argc, char **argv) {
    model_flags mf;
    const char *style = "plain";
    bool params = false, style_seen = false;
    ts_flag flags[MODEL_FLAGS_COUNT + 2];
    int n = model_flags_table(flags, 0, &mf);
    flags[n++] = (ts_flag){"--style", TS_FLAG_CHOICE, &style, NULL,
                           "plain [30, 200, 1536] or torch torch.Size([30, 200, 1536]) (plain)", "plain|torch",
                           NULL, &style_seen};
    flags[n++] = (ts_flag){"--params", TS_FLAG_BOOL, &params, NULL,
                           "list every parameter's state_dict name and shape instead (what --load reads)", NULL,
                           NULL, NULL};
    const ts_cli_spec spec = {
        .command = "shapes",
        .synopsis = "[--preset P | model flags] [--style torch | --params]",
        .description = "Dry run: every step's shape in order, as the seed notebooks print them, then a table of\n"
                       "modules (output shape, parameters, FLOPs) and the totals. Nothing is allocated or\n"
                       "computed, so even the base model answers at once.",
        .flags = flags,
        .n_flags = n,
    };
    int rc = ts_cli_parse(&spec, argc, argv, NULL, NULL);
    if (rc >= 0) return rc;
    if (mf.seen[F_SEED] || mf.seen[F_EPS])
        return ts_cli_error("shapes", "%s changes values, and shapes computes none: drop it, or use tscope run",
                            mf.seen[F_SEED] ? "--seed" : "--eps");
    if (params && style_seen)
        return ts_cli_error("shapes", "--style prints the steps' shapes; --params lists the parameters instead");
    ts_model_config cfg;
    if (model_flags_resolve(&mf, &cfg, NULL)) return ts_cli_error("shapes", "%s", ts_last_error());
    char desc[TS_MODEL_DESCRIBE_MAX];
    ts_model_config_describe(&cfg, desc, sizeof desc);
    printf("# %s\n", desc);
    if (params) return print_params(&cfg);
    shape_printer printer;
    shape_printer_init(&printer, stdout, strcmp(style, "torch") == 0 ? TS_SHAPE_TORCH : TS_SHAPE_PLAIN);
    ts_hook hook = shape_printer_hook(&printer);
    ts_model_summary sum;
    if (ts_model_dry_run(&cfg, &hook, &sum)) return ts_cli_error("shapes", "%s", ts_last_error());
    print_table(stdout, &sum);
    ts_model_summary_free(&sum);
    return 0;
}
