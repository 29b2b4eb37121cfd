/* viewer_steps: the viewer's list of steps and the tree it folds them into.
 *
 * Everything here is worked out from the step names once, when a trace is
 * opened: a step's module is its name without the last component, its layer
 * the name up to "layers.N", its snapshot the number of times the trace's
 * first name has come round again. Nothing here knows about windows.
 */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/viewer.h"

/* ---- interning module and layer names ----------------------------------- */

/* An open-addressing table from a name to its index in a growing list. */
typedef struct intern {
    char ***names; /* the list being built (points at the ts_view_steps field) */
    int *count;
    int cap_names;
    int *slot;     /* (cap) index + 1, 0 for empty */
    size_t cap;
} intern;

static uint64_t hash_n(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static ts_status intern_init(intern *in, char ***names, int *count) {
    in->names = names;
    in->count = count;
    in->cap_names = 0;
    in->cap = 256;
    in->slot = calloc(in->cap, sizeof *in->slot);
    *names = NULL;
    *count = 0;
    return in->slot ? TS_OK : ts_fail(TS_ERR_NOMEM, "view: out of memory for the step tree");
}

static ts_status intern_grow(intern *in) {
    size_t cap = in->cap * 2;
    int *slot = calloc(cap, sizeof *slot);
    if (!slot) return ts_fail(TS_ERR_NOMEM, "view: out of memory for the step tree");
    for (int i = 0; i < *in->count; i++) {
        const char *s = (*in->names)[i];
        size_t j = hash_n(s, strlen(s)) & (cap - 1);
        while (slot[j]) j = (j + 1) & (cap - 1);
        slot[j] = i + 1;
    }
    free(in->slot);
    in->slot = slot;
    in->cap = cap;
    return TS_OK;
}

/* The index of the first n bytes of s as a name, added when new. */
static ts_status intern_get(intern *in, const char *s, size_t n, int *out) {
    size_t j = hash_n(s, n) & (in->cap - 1);
    for (; in->slot[j]; j = (j + 1) & (in->cap - 1)) {
        const char *have = (*in->names)[in->slot[j] - 1];
        if (strncmp(have, s, n) == 0 && have[n] == '\0') {
            *out = in->slot[j] - 1;
            return TS_OK;
        }
    }
    if (*in->count == in->cap_names) {
        int cap = in->cap_names ? in->cap_names * 2 : 32;
        char **grown = realloc(*in->names, (size_t)cap * sizeof *grown);
        if (!grown) return ts_fail(TS_ERR_NOMEM, "view: out of memory for the step tree");
        *in->names = grown;
        in->cap_names = cap;
    }
    char *copy = malloc(n + 1);
    if (!copy) return ts_fail(TS_ERR_NOMEM, "view: out of memory for the step tree");
    memcpy(copy, s, n);
    copy[n] = '\0';
    int id = (*in->count)++;
    (*in->names)[id] = copy;
    in->slot[j] = id + 1;
    *out = id;
    /* Keep the table at most half full so probes stay short. */
    if ((size_t)*in->count * 2 > in->cap) return intern_grow(in);
    return TS_OK;
}

static void intern_free(intern *in) { free(in->slot); }

/* ---- names ------------------------------------------------------------------ */

/* Length of the module prefix: the name without its last component. */
static size_t module_prefix(const char *name) {
    const char *dot = strrchr(name, '.');
    return dot ? (size_t)(dot - name) : 0;
}

/* ---- building ------------------------------------------------------------------ */

static ts_status assign_tree(ts_view_steps *s) {
    intern mods, layers;
    ts_status st = intern_init(&mods, &s->module_name, &s->n_modules);
    if (st != TS_OK) return st;
    st = intern_init(&layers, &s->layer_name, &s->n_layers);
    if (st != TS_OK) {
        intern_free(&mods);
        return st;
    }
    for (int64_t i = 0; i < s->n && st == TS_OK; i++) {
        ts_view_entry *e = &s->entry[i];
        if (!e->name) e->name = "";
        st = intern_get(&mods, e->name, module_prefix(e->name), &e->module);
        size_t lp = ts_name_layer_prefix(e->name);
        e->layer = -1;
        if (st == TS_OK && lp) st = intern_get(&layers, e->name, lp, &e->layer);
    }
    intern_free(&mods);
    intern_free(&layers);
    return st;
}

/* Which record of its name each step is: the scene looks steps up by name
 * and record, as `tscope png --step K` does. */
static ts_status assign_occurrences(ts_view_steps *s) {
    char **names = NULL;
    int n_names = 0;
    intern in;
    ts_status st = intern_init(&in, &names, &n_names);
    int *seen = calloc((size_t)(s->n ? s->n : 1), sizeof *seen); /* per distinct name */
    if (!seen && st == TS_OK) st = ts_fail(TS_ERR_NOMEM, "view: out of memory for the step tree");
    for (int64_t i = 0; i < s->n && st == TS_OK; i++) {
        int id;
        st = intern_get(&in, s->entry[i].name, strlen(s->entry[i].name), &id);
        if (st == TS_OK) s->entry[i].occurrence = seen[id]++;
    }
    for (int i = 0; i < n_names; i++) free(names[i]);
    free(names);
    free(seen);
    if (in.slot) intern_free(&in);
    return st;
}

/* A snapshot starts at step 0 and at every later step named like step 0. */
static ts_status assign_snapshots(ts_view_steps *s) {
    int count = 0;
    for (int64_t i = 0; i < s->n; i++)
        if (i == 0 || strcmp(s->entry[i].name, s->entry[0].name) == 0) count++;
    s->n_snapshots = count ? count : 1;
    s->snapshot_start = malloc((size_t)(s->n_snapshots + 1) * sizeof *s->snapshot_start);
    if (!s->snapshot_start) return ts_fail(TS_ERR_NOMEM, "view: out of memory for the step tree");
    s->snapshot_start[0] = 0;
    int k = -1;
    for (int64_t i = 0; i < s->n; i++) {
        if (i == 0 || strcmp(s->entry[i].name, s->entry[0].name) == 0) s->snapshot_start[++k] = i;
        s->entry[i].snapshot = k;
    }
    s->snapshot_start[s->n_snapshots] = s->n;
    return TS_OK;
}

ts_status ts_view_steps_init(ts_view_steps *s, const ts_view_entry *entries, int64_t n) {
    memset(s, 0, sizeof *s);
    if (n < 0) return ts_fail(TS_ERR_ARG, "view: negative step count");
    s->entry = malloc((size_t)(n ? n : 1) * sizeof *s->entry);
    if (!s->entry) return ts_fail(TS_ERR_NOMEM, "view: out of memory for %lld steps", (long long)n);
    if (n) memcpy(s->entry, entries, (size_t)n * sizeof *s->entry);
    s->n = n;
    ts_status st = assign_tree(s);
    if (st == TS_OK) st = assign_snapshots(s);
    if (st == TS_OK) st = assign_occurrences(s);
    if (st != TS_OK) ts_view_steps_free(s);
    return st;
}

void ts_view_steps_free(ts_view_steps *s) {
    for (int i = 0; i < s->n_modules; i++) free(s->module_name[i]);
    for (int i = 0; i < s->n_layers; i++) free(s->layer_name[i]);
    free(s->module_name);
    free(s->layer_name);
    free(s->snapshot_start);
    free(s->entry);
    memset(s, 0, sizeof *s);
}

/* ---- questions about steps ---------------------------------------------------- */

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

int ts_view_heads(const ts_view_entry *e) {
    /* By tag, and by name for the attention steps (as the scene decides). */
    bool per_head = e->tag == TS_TAG_ATTN_SCORES || e->tag == TS_TAG_ATTN_WEIGHTS || e->tag == TS_TAG_HEADS ||
                    ends_with(e->name, ".scores") || ends_with(e->name, ".scaled") ||
                    ends_with(e->name, ".masked") || ends_with(e->name, ".weights");
    return per_head && e->rank == 4 && e->shape[1] <= 1 << 20 ? (int)e->shape[1] : 0;
}

int ts_view_batches(const ts_view_entry *e) {
    if (!ts_tag_batched(e->tag)) return 0;
    if (e->rank < 2 || e->shape[0] > 1 << 20) return 0;
    return (int)e->shape[0];
}

static bool has_glob(const char *text) { return strpbrk(text, "*?[") != NULL; }

int64_t ts_view_find(const ts_view_steps *s, const char *text, int64_t from) {
    if (!text || !*text || s->n == 0) return -1;
    if (from < 0 || from >= s->n) from = 0;
    int k = s->entry[from].snapshot;
    int64_t a = s->snapshot_start[k], b = s->snapshot_start[k + 1], len = b - a;
    bool glob = has_glob(text);
    /* Two passes: an exact name first, so "encoder.out" is not taken for
     * "encoder.layers.0.out"; then any name containing the text. */
    for (int pass = 0; pass < 2; pass++)
        for (int64_t j = 1; j <= len; j++) {
            int64_t i = a + (from - a + j) % len;
            const char *name = s->entry[i].name;
            bool hit = pass == 0 ? strcmp(name, text) == 0
                       : glob    ? fnmatch(text, name, 0) == 0
                                 : strstr(name, text) != NULL;
            if (hit) return i;
        }
    return -1;
}

int ts_view_find_count(const ts_view_steps *s, const char *text, int64_t from) {
    if (!text || !*text || s->n == 0) return 0;
    if (from < 0 || from >= s->n) from = 0;
    int k = s->entry[from].snapshot, n = 0;
    bool glob = has_glob(text);
    for (int64_t i = s->snapshot_start[k]; i < s->snapshot_start[k + 1]; i++) {
        const char *name = s->entry[i].name;
        if (glob ? fnmatch(text, name, 0) == 0 : strstr(name, text) != NULL) n++;
    }
    return n;
}

/* The steps [a, b) of an open layer: a header for each run of steps of one
 * module below the layer, then those steps; steps of the layer itself
 * (encoder.layers.0.out) stand alone. */
static int module_rows(const ts_view_steps *s, int layer, int64_t a, int64_t b, ts_view_row *rows) {
    int n = 0;
    size_t lp = strlen(s->layer_name[layer]);
    for (int64_t i = a; i < b;) {
        int m = s->entry[i].module;
        int64_t j = i;
        while (j < b && s->entry[j].module == m) j++;
        bool below = strlen(s->module_name[m]) > lp;
        if (below) rows[n++] = (ts_view_row){TS_VIEW_ROW_MODULE, i, layer, m, (int)(j - i), true};
        for (int64_t k = i; k < j; k++)
            rows[n++] = (ts_view_row){TS_VIEW_ROW_STEP, k, layer, below ? m : -1, 1, false};
        i = j;
    }
    return n;
}

int ts_view_rows(const ts_view_steps *s, int64_t current, ts_view_row *rows) {
    if (s->n == 0) return 0;
    if (current < 0 || current >= s->n) current = 0;
    int k = s->entry[current].snapshot;
    int64_t a = s->snapshot_start[k], b = s->snapshot_start[k + 1];
    int open_layer = s->entry[current].layer;
    int n = 0;
    for (int64_t i = a; i < b;) {
        int layer = s->entry[i].layer;
        if (layer < 0) {
            rows[n++] = (ts_view_row){TS_VIEW_ROW_STEP, i, -1, -1, 1, false};
            i++;
            continue;
        }
        int64_t j = i;
        while (j < b && s->entry[j].layer == layer) j++;
        if (j - i == 1) {
            /* A header for one step (train.grad_norm.encoder.layers.0)
             * would only hide it. */
            rows[n++] = (ts_view_row){TS_VIEW_ROW_STEP, i, -1, -1, 1, false};
            i = j;
            continue;
        }
        bool open = layer == open_layer && current >= i && current < j;
        rows[n++] = (ts_view_row){TS_VIEW_ROW_LAYER, i, layer, -1, (int)(j - i), open};
        if (open) n += module_rows(s, layer, i, j, rows + n);
        i = j;
    }
    return n;
}

ts_status ts_view_steps_from_trace(ts_view_steps *s, const ts_trace *t) {
    int64_t n = ts_trace_count(t);
    ts_view_entry *e = calloc((size_t)(n ? n : 1), sizeof *e);
    if (!e) return ts_fail(TS_ERR_NOMEM, "view: out of memory for %lld steps", (long long)n);
    for (int64_t i = 0; i < n; i++) {
        const ts_trace_step *ts = ts_trace_step_at(t, i);
        e[i].name = ts->name;
        e[i].op = ts->op;
        e[i].tag = ts->tag;
        e[i].rank = ts->rank;
        memcpy(e[i].shape, ts->shape, sizeof e[i].shape);
        e[i].has_values = ts->has_values;
        e[i].batch_index = ts->batch_index;
    }
    ts_status st = ts_view_steps_init(s, e, n);
    free(e);
    return st;
}
