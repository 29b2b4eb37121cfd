/* names: the "layers.N" component of step and parameter names. */
#include <stdio.h>
#include <string.h>

#include "tscope/core.h"

/* Where the layer's number starts and ends in name: the first "layers."
 * that is a whole component, followed by digits or "*" and then the end or
 * a dot. False when there is none. */
static bool find_layer(const char *name, const char **digits, const char **end) {
    for (const char *p = strstr(name, "layers."); p; p = strstr(p + 1, "layers.")) {
        if (p != name && p[-1] != '.') continue;
        const char *d = p + 7, *e = d;
        if (*e == '*')
            e++;
        else
            while (*e >= '0' && *e <= '9') e++;
        if (e == d || (*e != '\0' && *e != '.')) continue;
        *digits = d;
        *end = e;
        return true;
    }
    return false;
}

int ts_name_layer(const char *name) {
    const char *d, *e;
    if (!find_layer(name, &d, &e) || *d == '*') return -1;
    int layer = 0;
    for (; d < e; d++) {
        if (layer > 100000000) return -1; /* no model has that many layers */
        layer = layer * 10 + (*d - '0');
    }
    return layer;
}

size_t ts_name_layer_prefix(const char *name) {
    const char *d, *e;
    return find_layer(name, &d, &e) ? (size_t)(e - name) : 0;
}

bool ts_name_with_layer(char *buf, size_t size, const char *name, int layer) {
    const char *d, *e;
    if (!find_layer(name, &d, &e) || layer < 0) return false;
    int n = snprintf(buf, size, "%.*s%d%s", (int)(d - name), name, layer, e);
    return n >= 0 && (size_t)n < size;
}

int ts_name_stack_layer(const char *name, const char *stack, const char **rest) {
    size_t n = strlen(stack);
    if (strncmp(name, stack, n) != 0 || name[n] != '.') return -1;
    const char *d, *e;
    /* the stack's own "layers." stands first in what follows it */
    if (!find_layer(name + n + 1, &d, &e) || d != name + n + 1 + 7 || *d == '*') return -1;
    int layer = ts_name_layer(name + n + 1);
    if (layer >= 0 && rest) *rest = e;
    return layer;
}
