/* dataflow: which steps a step reads, from the names tscope's model gives
 * its steps (docs/model.md, "Trace names"), so the shape flow can draw the
 * real edges: q, k and v branching from one tensor and meeting at `scores`
 * and `values`, the norm's mean and std feeding `y`, a residual add reading
 * both the sublayer and the stream it skipped. A name no rule knows reads the
 * step before it on the data path, as the seeds' line-by-line prints do. */
#include <stdio.h>
#include <string.h>

#include "render_internal.h"

bool ts_render__is_param(const ts_render_step *s) { return s->op && strcmp(s->op, "parameter") == 0; }

/* The last part of a name ("qkv_perm"), and the length of what comes before it. */
static const char *leaf(const char *name, size_t *module_len) {
    const char *dot = strrchr(name, '.');
    *module_len = dot ? (size_t)(dot - name) : 0;
    return dot ? dot + 1 : name;
}

/* The step named MODULE.LEAF among steps[0, before), the latest one; -1 if none. */
static int sibling(const ts_render_step *steps, int before, const char *module, size_t module_len, const char *name) {
    for (int i = before - 1; i >= 0; i--) {
        size_t len;
        const char *l = leaf(steps[i].name, &len);
        if (len == module_len && strncmp(steps[i].name, module, len) == 0 && strcmp(l, name) == 0) return i;
    }
    return -1;
}

int ts_render__step_before(const ts_render_step *steps, int i) {
    for (int k = i - 1; k >= 0; k--)
        if (!ts_render__is_param(&steps[k])) return k;
    return TS_RENDER_OUTSIDE;
}

/* What the module that step i belongs to reads: the data-path step before
 * the module's first step, or TS_RENDER_OUTSIDE when the module is where the
 * list begins. */
static int module_input(const ts_render_step *steps, int i) {
    size_t len;
    leaf(steps[i].name, &len);
    int first = i;
    while (first > 0 && strncmp(steps[first - 1].name, steps[i].name, len) == 0 &&
           steps[first - 1].name[len] == '.')
        first--;
    return ts_render__step_before(steps, first);
}

static void add(ts_render_step *s, int input) {
    if (s->n_inputs < TS_RENDER_MAX_INPUTS) s->inputs[s->n_inputs++] = input;
}

/* Add the siblings named (NULL-terminated) as inputs; false when one is missing. */
static bool add_siblings(ts_render_step *steps, int i, const char *const *names) {
    size_t len;
    leaf(steps[i].name, &len);
    int found[TS_RENDER_MAX_INPUTS], n = 0;
    for (; names[n]; n++) {
        found[n] = sibling(steps, i, steps[i].name, len, names[n]);
        if (found[n] < 0) return false;
    }
    for (int k = 0; k < n; k++) add(&steps[i], found[k]);
    return true;
}

/* One sibling, the first of the names that exists. */
static bool add_first_of(ts_render_step *steps, int i, const char *a, const char *b) {
    const char *one[] = {a, NULL}, *other[] = {b, NULL};
    return add_siblings(steps, i, one) || (b && add_siblings(steps, i, other));
}

/* The residual add `normK.in` (or a pre-LN layer's `out`): the sublayer just
 * before it, and the stream that sublayer skipped. Post-LN, the stream is what
 * the sublayer read (the last norm's out); pre-LN, the sublayer read a norm of
 * the stream, so the stream is that norm's `in`. Seed 004's block adds the
 * stream to itself after attention (the attention is read by nothing), and
 * its FFN's skip starts at the norm's out. */
static void link_residual(ts_render_step *steps, int i, const ts_render_wiring *w) {
    int sub = ts_render__step_before(steps, i);
    if (sub < 0) {
        add(&steps[i], TS_RENDER_OUTSIDE);
        return;
    }
    size_t len;
    bool second_sum = strcmp(leaf(steps[i].name, &len), "out") == 0;
    if (!(w->seed004_residual && !second_sum)) add(&steps[i], sub);
    int stream = module_input(steps, sub);
    if (w->pre_norm && stream >= 0 && !(w->seed004_residual && second_sum)) {
        const char *l = leaf(steps[stream].name, &len);
        int in = strcmp(l, "out") == 0 ? sibling(steps, stream, steps[stream].name, len, "in") : -1;
        if (in >= 0) stream = in;
    }
    add(&steps[i], stream);
}

static void link_one(ts_render_step *steps, int i, const ts_render_wiring *w) {
    ts_render_step *s = &steps[i];
    size_t len;
    const char *l = leaf(s->name, &len);
    s->n_inputs = 0;
    if (ts_render__is_param(s)) return;
    bool ok = true;
    if (!strcmp(l, "kv")) { /* a cross-attention's keys and values come from the encoder */
        add(s, TS_RENDER_MEMORY);
    } else if (!strcmp(l, "qkv") || !strcmp(l, "q_proj") || !strcmp(l, "hidden")) {
        add(s, module_input(steps, i));
    } else if (!strcmp(l, "qkv_heads")) ok = add_first_of(steps, i, "qkv", NULL);
    else if (!strcmp(l, "qkv_perm")) ok = add_first_of(steps, i, "qkv_heads", NULL);
    else if (!strcmp(l, "q_heads")) ok = add_first_of(steps, i, "q_proj", NULL);
    else if (!strcmp(l, "kv_heads")) ok = add_first_of(steps, i, "kv", NULL);
    else if (!strcmp(l, "kv_perm")) ok = add_first_of(steps, i, "kv_heads", NULL);
    else if (!strcmp(l, "q")) ok = add_first_of(steps, i, "qkv_perm", "q_heads");
    else if (!strcmp(l, "k") || !strcmp(l, "v")) ok = add_first_of(steps, i, "qkv_perm", "kv_perm");
    else if (!strcmp(l, "scores")) ok = add_siblings(steps, i, (const char *const[]){"q", "k", NULL});
    else if (!strcmp(l, "scaled")) ok = add_first_of(steps, i, "scores", NULL);
    else if (!strcmp(l, "masked")) ok = add_first_of(steps, i, "scaled", "scores");
    else if (!strcmp(l, "weights")) ok = add_first_of(steps, i, "masked", "scaled");
    else if (!strcmp(l, "values")) {
        ok = add_first_of(steps, i, "dropout", "weights") && add_first_of(steps, i, "v", NULL);
    } else if (!strcmp(l, "values_perm")) ok = add_first_of(steps, i, "values", NULL);
    else if (!strcmp(l, "concat")) ok = add_first_of(steps, i, "values_perm", NULL);
    else if (!strcmp(l, "mean") || !strcmp(l, "std")) ok = add_first_of(steps, i, "in", NULL);
    else if (!strcmp(l, "y")) ok = add_siblings(steps, i, (const char *const[]){"in", "mean", "std", NULL});
    else if (!strcmp(l, "act")) ok = add_first_of(steps, i, "hidden", NULL);
    else if ((!strcmp(l, "in") || !strcmp(l, "out")) && s->op && !strcmp(s->op, "add"))
        link_residual(steps, i, w); /* pre-LN, a layer ends in its second residual add */
    else if (!strcmp(l, "in")) add(s, module_input(steps, i));
    else if (!strcmp(l, "out") && sibling(steps, i, s->name, len, "y") >= 0) { /* a LayerNorm's out */
        ok = add_first_of(steps, i, "y", NULL);
        add_first_of(steps, i, "gamma", NULL);
        add_first_of(steps, i, "beta", NULL);
    } else ok = false;
    if (!ok) { /* no rule, or a sibling it names is not in the list: the step before */
        s->n_inputs = 0;
        add(s, ts_render__step_before(steps, i));
    }
}

void ts_render_steps_link(ts_render_step *steps, int n, const ts_render_wiring *w) {
    ts_render_wiring plain = {0};
    for (int i = 0; i < n; i++) link_one(steps, i, w ? w : &plain);
}
