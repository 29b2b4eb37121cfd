/* Your own model from the command line: the tscope binary, given a bare
 * PyTorch state_dict (tests/ref/load_*, written by make_fixtures.py with no
 * __metadata__) and nothing but the flags shapes cannot tell, gives
 * PyTorch's output for every mask of nn.Transformer.forward, for a file under
 * a wrapper's prefix, with extra tensors, and in F16, BF16 and F64. Each case
 * runs `tscope run ... --trace`, reads the output step back from the trace
 * and compares it with PyTorch's, printing the largest difference.
 * The binary is $TSCOPE, else ./tscope (run from the repository root). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "ref_fixture.h"
#include "tscope/trace.h"

#define TOL 1e-4
#define MAX_ARGS 40

static const char *binary(void) {
    const char *b = getenv("TSCOPE");
    return b && b[0] ? b : "./tscope";
}

/* Run tscope with args (NULL-terminated); stderr's first line into err. */
static int run_tscope(const char *const *args, char *err, size_t size) {
    char errpath[] = "/tmp/tscope_load_cli_XXXXXX";
    int fd = mkstemp(errpath);
    assert_true(fd >= 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(fd, 2);
        const char *argv[MAX_ARGS + 2];
        int n = 0;
        argv[n++] = binary();
        for (int i = 0; args[i] && n < MAX_ARGS; i++) argv[n++] = args[i];
        argv[n] = NULL;
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    err[0] = '\0';
    FILE *f = fdopen(fd, "r");
    rewind(f);
    if (!fgets(err, (int)size, f)) err[0] = '\0';
    fclose(f);
    unlink(errpath);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

typedef struct cli_case {
    const char *name;
    const char *dir;       /* under tests/ref */
    const char *args;      /* after `run`, space-separated; {D} is the fixture directory */
    const char *step;      /* the trace step to compare */
    const char *want;      /* the .npy in dir with PyTorch's values */
} cli_case;

#define ENC_FLAGS "--heads 4 --norm pre --activation gelu"
#define TRF_FLAGS "--heads 2 --norm post --activation relu"
#define TRF_IN "--load {D}/weights.safetensors --input {D}/src.npy --target {D}/tgt.npy " TRF_FLAGS

static const cli_case cases[] = {
    {"bare nn.TransformerEncoder", "load_encoder", "--load {D}/weights.safetensors --input {D}/x.npy " ENC_FLAGS,
     "encoder.out", "out.npy"},
    {"encoder, src_key_padding_mask (bool)", "load_encoder",
     "--load {D}/weights.safetensors --input {D}/x.npy " ENC_FLAGS " --src-key-padding-mask {D}/src_key_padding_mask.npy",
     "encoder.out", "out_src_kpm.npy"},
    {"encoder, src_key_padding_mask as lengths", "load_encoder",
     "--load {D}/weights.safetensors --input {D}/x.npy " ENC_FLAGS " --src-key-padding-mask {D}/src_lengths.npy",
     "encoder.out", "out_src_kpm.npy"},
    {"encoder under 'backbone.' with a classifier", "load_encoder",
     "--load {D}/prefixed.safetensors --load-prefix backbone. --ignore-extra --input {D}/x.npy " ENC_FLAGS,
     "encoder.out", "out.npy"},
    {"encoder with an extra buffer", "load_encoder",
     "--load {D}/extra.safetensors --ignore-extra --input {D}/x.npy " ENC_FLAGS, "encoder.out", "out.npy"},
    {"encoder in F16", "load_encoder",
     "--load {D}/weights_f16.safetensors --input {D}/x.npy " ENC_FLAGS " --src-key-padding-mask "
     "{D}/src_key_padding_mask.npy", "encoder.out", "out_f16.npy"},
    {"encoder in BF16", "load_encoder",
     "--load {D}/weights_bf16.safetensors --input {D}/x.npy " ENC_FLAGS " --src-key-padding-mask "
     "{D}/src_key_padding_mask.npy", "encoder.out", "out_bf16.npy"},
    {"encoder in F64", "load_encoder",
     "--load {D}/weights_f64.safetensors --input {D}/x.npy " ENC_FLAGS " --src-key-padding-mask "
     "{D}/src_key_padding_mask.npy", "encoder.out", "out_src_kpm.npy"},
    {"bare nn.Transformer (causal tgt_mask)", "load_transformer", TRF_IN, "decoder.out", "out.npy"},
    {"--tgt-mask causal said", "load_transformer", TRF_IN " --tgt-mask causal", "decoder.out", "out.npy"},
    {"--tgt-mask none", "load_transformer", TRF_IN " --tgt-mask none", "decoder.out", "out_no_tgt_mask.npy"},
    {"--src-key-padding-mask: the encoder", "load_transformer",
     TRF_IN " --src-key-padding-mask {D}/src_key_padding_mask.npy", "encoder.out", "memory_src_kpm.npy"},
    {"--src-key-padding-mask (memory not masked)", "load_transformer",
     TRF_IN " --src-key-padding-mask {D}/src_key_padding_mask.npy", "decoder.out", "out_src_kpm.npy"},
    {"--tgt-key-padding-mask", "load_transformer", TRF_IN " --tgt-key-padding-mask {D}/tgt_key_padding_mask.npy",
     "decoder.out", "out_tgt_kpm.npy"},
    {"--memory-key-padding-mask", "load_transformer",
     TRF_IN " --memory-key-padding-mask {D}/memory_key_padding_mask.npy", "decoder.out", "out_mem_kpm.npy"},
    {"all three padding masks", "load_transformer",
     TRF_IN " --src-key-padding-mask {D}/src_key_padding_mask.npy --tgt-key-padding-mask "
     "{D}/tgt_key_padding_mask.npy --memory-key-padding-mask {D}/memory_key_padding_mask.npy",
     "decoder.out", "out_all.npy"},
    /* torch.save files (tests/ref/pt): the same weights, the same answers */
    {"torch.save state_dict", "pt", "--load {D}/encoder.pt --input {D}/../load_encoder/x.npy " ENC_FLAGS,
     "encoder.out", "../load_encoder/out.npy"},
    {"torch.save views (offset, strides, shared)", "pt",
     "--load {D}/encoder_views.pt --input {D}/../load_encoder/x.npy " ENC_FLAGS, "encoder.out",
     "../load_encoder/out.npy"},
    {"torch.save checkpoint with an optimizer", "pt",
     "--load {D}/checkpoint.pt --input {D}/../load_encoder/x.npy " ENC_FLAGS, "encoder.out",
     "../load_encoder/out.npy"},
    {"torch.save in bfloat16", "pt",
     "--load {D}/encoder_bf16.pt --input {D}/../load_encoder/x.npy " ENC_FLAGS " --src-key-padding-mask "
     "{D}/../load_encoder/src_key_padding_mask.npy", "encoder.out", "../load_encoder/out_bf16.npy"},
    {"torch.save in float16", "pt",
     "--load {D}/encoder_f16.pt --input {D}/../load_encoder/x.npy " ENC_FLAGS " --src-key-padding-mask "
     "{D}/../load_encoder/src_key_padding_mask.npy", "encoder.out", "../load_encoder/out_f16.npy"},
    /* fixtures with the settings in their __metadata__: no flag at all */
    {"encoder with __metadata__, float 0/1 mask", "enc_post_relu_norm_kpm",
     "--load {D}/weights.safetensors --input {D}/x.npy --src-key-padding-mask {D}/key_padding_mask.npy",
     "encoder.out", "out.npy"},
    {"nn.Transformer with __metadata__", "transformer_pre_gelu_kpm",
     "--load {D}/weights.safetensors --input {D}/src.npy --target {D}/tgt.npy --src-key-padding-mask "
     "{D}/src_key_padding_mask.npy --tgt-key-padding-mask {D}/tgt_key_padding_mask.npy "
     "--memory-key-padding-mask {D}/src_key_padding_mask.npy", "decoder.out", "out.npy"},
};

/* Split args on spaces into argv (pointing into buf), {D} -> dir's path. */
static int split(const char *args, const char *dir, char *buf, size_t size, const char **argv, int max) {
    char d[1024];
    snprintf(d, sizeof d, "%s", ref_fixture(dir, ""));
    size_t dl = strlen(d);
    if (dl && d[dl - 1] == '/') d[--dl] = '\0';
    size_t at = 0;
    for (const char *p = args; *p && at + 1 < size; p++) {
        if (strncmp(p, "{D}", 3) == 0 && at + dl + 1 < size) {
            memcpy(buf + at, d, dl);
            at += dl;
            p += 2;
        } else {
            buf[at++] = *p;
        }
    }
    buf[at] = '\0';
    int n = 0;
    for (char *tok = strtok(buf, " "); tok && n < max; tok = strtok(NULL, " ")) argv[n++] = tok;
    return n;
}

static void matches_pytorch(void **state) {
    const cli_case *c = *state;
    char buf[4096], trace[] = "/tmp/tscope_load_cli_trace_XXXXXX";
    int fd = mkstemp(trace);
    assert_true(fd >= 0);
    close(fd);
    const char *argv[MAX_ARGS];
    int n = 0;
    argv[n++] = "run";
    n += split(c->args, c->dir, buf, sizeof buf, argv + n, MAX_ARGS - 6);
    argv[n++] = "--trace";
    argv[n++] = trace;
    argv[n++] = "--level";
    argv[n++] = "values";
    argv[n] = NULL;
    char err[1024];
    int rc = run_tscope(argv, err, sizeof err);
    if (rc != 0) {
        unlink(trace);
        fail_msg("%s: tscope run exited %d: %s", c->name, rc, err);
    }
    ts_trace *t;
    assert_ok(ts_trace_open(trace, &t));
    int64_t i = ts_trace_find(t, c->step);
    if (i < 0) fail_msg("%s: no step %s in the trace", c->name, c->step);
    const ts_trace_step *s = ts_trace_step_at(t, i);
    ts_npy want;
    ref_read_npy(&want, c->dir, c->want);
    assert_int_equal(s->values_count, want.numel);
    const float *got;
    assert_ok(ts_trace_values(t, i, &got));
    int64_t at;
    double worst = check_max_rel_diff(got, want.f32, want.numel, &at);
    double abs_worst = 0;
    for (int64_t k = 0; k < want.numel; k++) {
        double d = got[k] > want.f32[k] ? got[k] - want.f32[k] : want.f32[k] - got[k];
        if (d > abs_worst) abs_worst = d;
    }
    print_message("%-44s %s vs %s/%s: max |diff| %.3g, max rel diff %.3g\n", c->name, c->step, c->dir, c->want,
                  abs_worst, worst);
    if (worst > TOL)
        fail_msg("%s: %s differs from PyTorch's %s by %.3g (> %g) at element %lld: %.9g vs %.9g", c->name, c->step,
                 c->want, worst, TOL, (long long)at, (double)got[at], (double)want.f32[at]);
    ts_npy_free(&want);
    ts_trace_close(t);
    unlink(trace);
}

int main(void) {
    if (access(binary(), X_OK) != 0) {
        fprintf(stderr, "test_load_cli: %s is not an executable: build it first (make), or set TSCOPE\n", binary());
        return 1;
    }
    struct CMUnitTest tests[sizeof cases / sizeof cases[0]];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        tests[i] = (struct CMUnitTest){cases[i].name, matches_pytorch, NULL, NULL, (void *)&cases[i]};
    return cmocka_run_group_tests_name("load from the command line", tests, NULL, NULL);
}
