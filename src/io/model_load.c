/* model_load: a model's weights from a safetensors file, its inputs from .npy
 * files, with messages that name the tensor and the flag that would help. */
#include "tscope/io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* Put "path: " before the message the last call left. */
static ts_status in_file(ts_status st, const char *path) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ts_last_error());
    return ts_fail(st, "%s: %s", path, msg);
}

/* The model flag that would make room for a tensor the model lacks, or "". */
static const char *flag_hint(const ts_model *m, const char *name) {
    int i = ts_name_layer(name);
    if (i >= 0) {
        bool dec = strncmp(name, "decoder.", 8) == 0;
        if (i >= (dec ? m->cfg.dec_layers : m->cfg.layers))
            return dec ? " (the file has more decoder layers than --dec-layers)"
                       : " (the file has more encoder layers than --layers)";
    }
    const char *norm = strstr(name, "norm.");
    if (norm && (norm == name || norm[-1] == '.') && !m->cfg.final_norm)
        return " (the file has a final LayerNorm: add --final-norm)";
    return "";
}

static ts_status load_one(ts_model *m, ts_safetensors *f, const char *name, const char *prefix, int *loaded_from,
                          int entry) {
    char full[TS_MODEL_NAME_MAX + 64];
    snprintf(full, sizeof full, "%s%s", prefix ? prefix : "", name);
    int i = ts_model_find_param(m, full);
    if (i < 0) {
        const char *hint = flag_hint(m, full);
        if (hint[0])
            return ts_fail(TS_ERR_ARG, "%s: tensor %s has no place in this model%s", f->path, name, hint);
        ts_tensor unused;
        return in_file(ts_model_param(m, full, &unused), f->path);
    }
    if (loaded_from[i] >= 0)
        return ts_fail(TS_ERR_FORMAT, "%s: tensors %s and %s both give parameter %s", f->path,
                       f->entries[loaded_from[i]].name, name, m->params[i].name);
    const ts_model_param_info *p = &m->params[i];
    ts_tensor view;
    ts_status st = ts_safetensors_expect(f, name, p->rank, p->shape, &view);
    if (!st) st = ts_model_load_param(m, full, &view);
    if (!st) loaded_from[i] = entry;
    return st;
}

ts_status ts_model_load_safetensors(ts_model *m, const char *path, const char *prefix) {
    if (!m->block) return ts_fail(TS_ERR_ARG, "%s: a shapes-only model cannot load weights", path);
    ts_safetensors f;
    ts_status st = ts_safetensors_open(&f, path);
    if (st) return st;
    int *loaded_from = malloc(sizeof(int) * (size_t)(m->n_params + 1));
    if (!loaded_from) {
        ts_safetensors_close(&f);
        return ts_fail(TS_ERR_NOMEM, "%s: out of memory", path);
    }
    for (int i = 0; i < m->n_params; i++) loaded_from[i] = -1;
    for (int e = 0; e < f.count && !st; e++) st = load_one(m, &f, f.entries[e].name, prefix, loaded_from, e);
    for (int i = 0; i < m->n_params && !st; i++) {
        if (loaded_from[i] >= 0) continue;
        /* Let the file's reader explain: it lists what the file holds. */
        ts_tensor unused;
        const char *name = m->params[i].name;
        size_t n = prefix ? strlen(prefix) : 0;
        if (n && strncmp(name, prefix, n) == 0) name += n;
        st = ts_safetensors_get(&f, name, &unused);
        if (!st) st = ts_fail(TS_ERR_FORMAT, "%s: parameter %s was not loaded", path, m->params[i].name);
    }
    free(loaded_from);
    ts_safetensors_close(&f);
    return st;
}

/* An (B, L, W) array from a .npy, checked against the width the model takes. */
static ts_status read_vectors(const char *path, const char *flag, int width, const char *width_flag, ts_npy *out) {
    ts_status st = ts_npy_read(out, path);
    if (st) return st;
    char s[TS_SHAPE_TEXT_MAX];
    if (out->rank != 3 || out->shape[2] != width || out->shape[0] < 1 || out->shape[1] < 1) {
        st = ts_fail(TS_ERR_SHAPE, "%s has shape %s; %s must be (B, S, %d) float32 vectors for %s %d", path,
                     ts_shape_format(s, sizeof s, out->rank, out->shape, TS_SHAPE_PLAIN), flag, width, width_flag,
                     width);
    } else if (out->shape[0] > (1 << 30) || out->shape[1] > (1 << 30)) {
        st = ts_fail(TS_ERR_SHAPE, "%s: shape %s is too large", path,
                     ts_shape_format(s, sizeof s, out->rank, out->shape, TS_SHAPE_PLAIN));
    }
    if (st) ts_npy_free(out);
    return st;
}

ts_status ts_model_read_embedded(ts_model_config *cfg, const char *input_path, const char *target_path,
                                 ts_npy *x, ts_npy *y) {
    memset(x, 0, sizeof *x);
    if (y) memset(y, 0, sizeof *y);
    if (target_path && cfg->arch != TS_ARCH_ENCODER_DECODER)
        return ts_fail(TS_ERR_ARG, "--target %s needs an encoder-decoder model (--dec-layers > 0)", target_path);
    if (target_path && !y) return ts_fail(TS_ERR_ARG, "ts_model_read_embedded: no place for the target");
    int width = cfg->in_dim ? cfg->in_dim : cfg->d_model;
    ts_status st = read_vectors(input_path, "--input", width, cfg->in_dim ? "--in-dim" : "--d-model", x);
    if (st) return st;
    if (target_path) {
        st = read_vectors(target_path, "--target", cfg->d_model, "--d-model", y);
        if (!st && y->shape[0] != x->shape[0])
            st = ts_fail(TS_ERR_SHAPE, "--input %s has batch %lld but --target %s has batch %lld", input_path,
                         (long long)x->shape[0], target_path, (long long)y->shape[0]);
        if (st) {
            ts_npy_free(x);
            ts_npy_free(y);
            return st;
        }
        cfg->tgt_seq = (int)y->shape[1];
    }
    cfg->batch = (int)x->shape[0];
    cfg->seq = (int)x->shape[1];
    cfg->input = TS_INPUT_EMBEDDED;
    return TS_OK;
}
