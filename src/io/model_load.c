/* model_load: a model's weights from a safetensors file, its inputs and
 * padding masks from .npy files, with messages that name the file's tensors
 * (under the file's own names, not tscope's) and the flag that would help. */
#include "tscope/io.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FULL_NAME_MAX (TS_MODEL_NAME_MAX + TS_LAYOUT_PREFIX_MAX + 64)

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

/* The model's parameter for a tensor of the file (-1: none), and tscope's name for it. */
static int param_of(const ts_model *m, const ts_load_options *o, const char *file, char *model, size_t size) {
    if (o->info) {
        if (!ts_weights_model_name(o->info, file, model, size)) return -1;
    } else {
        snprintf(model, size, "%s%s", o->into ? o->into : "", file);
    }
    return ts_model_find_param(m, model);
}

/* What the file should have called parameter `model`. */
static void file_name_of(const ts_load_options *o, const char *model, char *out, size_t size) {
    if (o->info && ts_weights_file_name(o->info, model, out, size)) return;
    size_t n = o->into ? strlen(o->into) : 0;
    if (n && strncmp(model, o->into, n) == 0) model += n;
    snprintf(out, size, "%s", model);
}

/* Append a name to "a, b, ... (N more)" within TS_LOAD_LIST_MAX. */
static void list_add(char *list, int index, int total, const char *name) {
    size_t len = strlen(list);
    if (len && strstr(list, " more)")) return;
    char more[48];
    snprintf(more, sizeof more, ", ... (%d more)", total - index);
    if (len + strlen(name) + 2 + sizeof more >= TS_LOAD_LIST_MAX) {
        snprintf(list + len, TS_LOAD_LIST_MAX - len, "%s", more + (len ? 0 : 2));
        return;
    }
    snprintf(list + len, TS_LOAD_LIST_MAX - len, "%s%s", len ? ", " : "", name);
}

/* Tensors of the file the model has no place for: an error listing them
 * (the first one's flag hint when there is one), or the report's list. */
static ts_status extras(ts_model *m, ts_safetensors *f, const ts_load_options *o, ts_load_report *r) {
    char model[FULL_NAME_MAX], list[TS_LOAD_LIST_MAX] = "";
    int n = 0, first = -1;
    for (int e = 0; e < f->count; e++)
        if (param_of(m, o, f->entries[e].name, model, sizeof model) < 0) n++;
    if (n == 0) return TS_OK;
    int k = 0;
    for (int e = 0; e < f->count; e++) {
        if (param_of(m, o, f->entries[e].name, model, sizeof model) >= 0) continue;
        if (first < 0) first = e;
        list_add(list, k++, n, f->entries[e].name);
    }
    if (o->ignore_extra) {
        r->skipped = n;
        snprintf(r->skipped_names, sizeof r->skipped_names, "%s", list);
        return TS_OK;
    }
    const char *name = f->entries[first].name;
    char as[160] = "";
    if (o->info) snprintf(as, sizeof as, " (read as %s's state_dict)", o->info->layout_name);
    param_of(m, o, name, model, sizeof model);
    const char *hint = flag_hint(m, model);
    if (n == 1)
        return ts_fail(TS_ERR_ARG, "%s: tensor %s has no place in this model%s%s", f->path, name,
                       hint[0] ? hint : as, hint[0] ? "" : "; --ignore-extra skips it");
    return ts_fail(TS_ERR_ARG, "%s: %d tensors have no place in this model%s%s: %s; --ignore-extra skips them",
                   f->path, n, hint[0] ? hint : as, "", list);
}

static ts_status load_one(ts_model *m, ts_safetensors *f, const ts_load_options *o, int e, int *loaded_from) {
    const char *name = f->entries[e].name;
    char model[FULL_NAME_MAX];
    int i = param_of(m, o, name, model, sizeof model);
    if (i < 0) return TS_OK; /* an extra, dealt with before */
    if (loaded_from[i] >= 0)
        return ts_fail(TS_ERR_FORMAT, "%s: tensors %s and %s both give parameter %s", f->path,
                       f->entries[loaded_from[i]].name, name, m->params[i].name);
    const ts_model_param_info *p = &m->params[i];
    ts_tensor view;
    ts_status st = ts_safetensors_expect(f, name, p->rank, p->shape, &view);
    if (!st) st = ts_model_load_param(m, m->params[i].name, &view);
    if (!st) loaded_from[i] = e;
    return st;
}

ts_status ts_model_load_weights(ts_model *m, ts_safetensors *f, const ts_load_options *o, ts_load_report *report) {
    ts_load_report unused;
    ts_load_report *r = report ? report : &unused;
    memset(r, 0, sizeof *r);
    if (!m->block) return ts_fail(TS_ERR_ARG, "%s: a shapes-only model cannot load weights", f->path);
    ts_status st = extras(m, f, o, r);
    if (st) return st;
    int *loaded_from = malloc(sizeof(int) * (size_t)(m->n_params + 1));
    if (!loaded_from) return ts_fail(TS_ERR_NOMEM, "%s: out of memory", f->path);
    for (int i = 0; i < m->n_params; i++) loaded_from[i] = -1;
    for (int e = 0; e < f->count && !st; e++) st = load_one(m, f, o, e, loaded_from);
    for (int i = 0; i < m->n_params && !st; i++) {
        if (loaded_from[i] >= 0) {
            r->loaded++;
            continue;
        }
        /* Let the file's reader explain under the file's name: it lists what the file holds. */
        char name[FULL_NAME_MAX];
        file_name_of(o, m->params[i].name, name, sizeof name);
        ts_tensor view;
        st = ts_safetensors_get(f, name, &view);
        if (!st) st = ts_fail(TS_ERR_FORMAT, "%s: parameter %s was not loaded", f->path, m->params[i].name);
    }
    free(loaded_from);
    return st;
}

ts_status ts_model_load_safetensors(ts_model *m, const char *path, const char *prefix) {
    ts_safetensors f;
    ts_status st = ts_safetensors_open(&f, path);
    if (st) return st;
    ts_load_options o = {.info = NULL, .into = prefix, .ignore_extra = false};
    st = ts_model_load_weights(m, &f, &o, NULL);
    ts_safetensors_close(&f);
    return st;
}

/* ---- inputs ------------------------------------------------------------------ */

/* The reader's message after the flag that named the file (ts_fail formats
 * aside, so the last message may be one of its arguments). */
static ts_status flag_named(ts_status st, const char *flag) { return ts_fail(st, "%s: %s", flag, ts_last_error()); }

ts_status ts_model_read_vectors(const char *path, const char *flag, ts_npy *out) {
    ts_status st = ts_npy_read(out, path);
    if (st) return flag_named(st, flag);
    char s[TS_SHAPE_TEXT_MAX];
    if (out->rank != 3 || out->shape[0] < 1 || out->shape[1] < 1 || out->shape[2] < 1) {
        st = ts_fail(TS_ERR_SHAPE, "%s %s has shape %s; it must be (B, S, D) vectors, one row of width D per "
                     "position", flag, path, ts_shape_format(s, sizeof s, out->rank, out->shape, TS_SHAPE_PLAIN));
    } else if (out->shape[0] > (1 << 20) || out->shape[1] > (1 << 20) || out->shape[2] > (1 << 20)) {
        st = ts_fail(TS_ERR_SHAPE, "%s %s: shape %s is too large", flag, path,
                     ts_shape_format(s, sizeof s, out->rank, out->shape, TS_SHAPE_PLAIN));
    }
    /* a NaN or an infinity would run through every step and show as a result */
    for (int64_t i = 0; !st && i < out->numel; i++)
        if (!isfinite(out->f32[i]))
            st = ts_fail(TS_ERR_ARG, "%s %s: element %lld (position %lld, feature %lld) is %g; vectors are finite "
                         "numbers", flag, path, (long long)i, (long long)(i / out->shape[2] % out->shape[1]),
                         (long long)(i % out->shape[2]), (double)out->f32[i]);
    if (st) ts_npy_free(out);
    return st;
}

ts_status ts_model_read_pad_mask(const char *path, const char *flag, int B, int S, uint8_t **pads) {
    *pads = NULL;
    ts_npy a;
    ts_status st = ts_npy_read(&a, path);
    if (st) return flag_named(st, flag);
    char s[TS_SHAPE_TEXT_MAX];
    bool lengths = a.rank == 1 && a.shape[0] == B;
    if (!lengths && !(a.rank == 2 && a.shape[0] == B && a.shape[1] == S))
        st = ts_fail(TS_ERR_SHAPE, "%s %s has shape %s; the model reads (B, S) = (%d, %d) (True = padding), or (%d) "
                     "lengths", flag, path, ts_shape_format(s, sizeof s, a.rank, a.shape, TS_SHAPE_PLAIN), B, S, B);
    uint8_t *p = st ? NULL : malloc((size_t)B * (size_t)S);
    if (!st && !p) st = ts_fail(TS_ERR_NOMEM, "%s: out of memory", path);
    for (int64_t i = 0; !st && i < (lengths ? B : (int64_t)B * S); i++) {
        float v = a.f32[i];
        if (lengths) {
            if (!(v >= 0 && v <= S) || v != (float)(int)v)
                st = ts_fail(TS_ERR_ARG, "%s %s: length %g of sequence %lld is not a whole number in 0..%d", flag,
                             path, (double)v, (long long)i, S);
            for (int j = 0; !st && j < S; j++) p[i * S + j] = j >= (int)v;
        } else if (v != 0.0f && v != 1.0f) {
            st = ts_fail(TS_ERR_ARG, "%s %s: element [%lld, %lld] is %g; a padding mask holds True/1 (padding) or "
                         "False/0 (for PyTorch's additive float mask, save mask == -inf as bool)", flag, path,
                         (long long)(i / S), (long long)(i % S), (double)v);
        } else {
            p[i] = v == 1.0f;
        }
    }
    ts_npy_free(&a);
    if (st) {
        free(p);
        return st;
    }
    *pads = p;
    return TS_OK;
}

ts_status ts_lm_read_ids(const char *path, int vocab, ts_bpe_ids *ids, int *B) {
    ts_npy x = {0};
    ts_status st = ts_npy_read_labels(&x, path);
    if (st) st = ts_fail(st, "--ids: %s", ts_last_error()); /* the flag, before the reader's message */
    if (!st && x.rank != 2 && x.rank != 1)
        st = ts_fail(TS_ERR_SHAPE, "--ids %s: a language model reads (B, S) ids, or one sequence (S)", path);
    if (!st && x.numel == 0) st = ts_fail(TS_ERR_ARG, "--ids %s holds no ids", path);
    if (!st && x.rank == 2 && x.shape[0] > 4096) st = ts_fail(TS_ERR_ARG, "--ids %s: a batch of %lld is too large", path, (long long)x.shape[0]);
    if (!st && !(ids->ids = malloc(sizeof(int32_t) * (size_t)x.numel))) st = ts_fail(TS_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; !st && i < x.numel; i++) {
        if (x.i64[i] < 0 || x.i64[i] >= vocab)
            st = ts_fail(TS_ERR_ARG, "--ids %s: id %lld at position %lld is outside the vocabulary of %d", path,
                         (long long)x.i64[i], (long long)i, vocab);
        else
            ids->ids[i] = (int32_t)x.i64[i];
    }
    if (!st) ids->count = ids->cap = (size_t)x.numel, *B = x.rank == 2 ? (int)x.shape[0] : 1;
    ts_npy_free(&x);
    return st;
}

ts_status ts_lm_read_token_types(const char *path, int type_vocab, int B, int S, int32_t **types) {
    *types = NULL;
    if (type_vocab < 1)
        return ts_fail(TS_ERR_ARG, "--token-types %s: this model has no token type embeddings (BERT's segments)", path);
    ts_npy x = {0};
    ts_status st = ts_npy_read_labels(&x, path);
    if (st) return ts_fail(st, "--token-types: %s", ts_last_error());
    bool fits = (x.rank == 2 && x.shape[0] == B && x.shape[1] == S) || (x.rank == 1 && B == 1 && x.shape[0] == S);
    if (!fits) {
        char got[TS_SHAPE_TEXT_MAX];
        ts_shape_format(got, sizeof got, x.rank, x.shape, TS_SHAPE_PLAIN);
        st = ts_fail(TS_ERR_SHAPE, "--token-types %s is %s; the ids are (%d, %d): one type for each id", path, got, B, S);
    }
    if (!st && !(*types = malloc(sizeof(int32_t) * (size_t)x.numel))) st = ts_fail(TS_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; !st && i < x.numel; i++) {
        if (x.i64[i] < 0 || x.i64[i] >= type_vocab)
            st = ts_fail(TS_ERR_ARG, "--token-types %s: type %lld at position %lld is not one of the model's %d (0 to %d)",
                         path, (long long)x.i64[i], (long long)i, type_vocab, type_vocab - 1);
        else
            (*types)[i] = (int32_t)x.i64[i];
    }
    if (st) {
        free(*types);
        *types = NULL;
    }
    ts_npy_free(&x);
    return st;
}
