/* trace_edits: what the metadata's "edits" say about a step (trace.h). An
 * edited run (tscope run --ablate / --patch, include/tscope/experiment.h)
 * lists its edits there; a view that draws an edited step says so. */
#include <cjson/cJSON.h>
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

#include "tscope/trace.h"

static void append(char *buf, size_t size, size_t *used, const char *fmt, const char *a, const char *b) {
    if (*used >= size) return;
    int n = snprintf(buf + *used, size - *used, fmt, a, b);
    if (n > 0) *used += (size_t)n;
    if (*used >= size) *used = size;
}

static int edits_of(const char *metadata, const char *step, char *buf, size_t size) {
    if (size) buf[0] = '\0';
    cJSON *root = cJSON_Parse(metadata ? metadata : "");
    const cJSON *edits = cJSON_GetObjectItemCaseSensitive(root, "edits"), *e;
    int n = 0;
    size_t used = 0;
    cJSON_ArrayForEach(e, edits) {
        const char *steps = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "steps"));
        const char *kind = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "kind"));
        const char *heads = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "heads"));
        const cJSON *pos = cJSON_GetObjectItemCaseSensitive(e, "pos");
        if (!steps || !kind || (step && fnmatch(steps, step, 0) != 0)) continue;
        const char *verb = strcmp(kind, "zero") == 0 ? "zeroed" : strcmp(kind, "mean") == 0 ? "mean-ablated"
                           : strcmp(kind, "add") == 0  ? "added to"
                                                       : "patched";
        char where[64] = "";
        if (cJSON_IsNumber(pos) && step) snprintf(where, sizeof where, " at position %d", pos->valueint);
        /* all edits: each as its spec says (its '=mean' as the verb); one step's: the heads it touched */
        char what[256] = "";
        const char *spec = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "spec"));
        if (!step) snprintf(what, sizeof what, "%.*s", (int)strcspn(spec ? spec : steps, "="), spec ? spec : steps);
        else if (heads) snprintf(what, sizeof what, "%s", heads);
        append(buf, size, &used, n ? "; %s%s" : "%s%s", what, what[0] ? " " : "");
        append(buf, size, &used, "%s%s", verb, where);
        n++;
    }
    cJSON_Delete(root);
    return n;
}

int ts_trace_step_edits(const ts_trace *t, const char *step, char *buf, size_t size) {
    return edits_of(ts_trace_metadata(t), step, buf, size);
}
