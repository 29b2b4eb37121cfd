/* json: JSON read by type, for every file tscope reads (core.h, "json").
 * cJSON parses; this file decides what a value may be. cJSON's own getters
 * coerce (valueint of 8.5 is 8, of "8" is 0) and take the first of two equal
 * keys where Python takes the last: both would make tscope read a file
 * differently from the program that wrote it, so neither is let through. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tscope/core.h"

char *ts_json_quote(const cJSON *v, char *buf, size_t size) {
    if (!size) return buf;
    if (v && cJSON_IsNumber(v) && !isfinite(v->valuedouble)) { /* cJSON prints null for 1e400 */
        snprintf(buf, size, "a number too large for a double (%s1e308 or past)", v->valuedouble < 0 ? "-" : "");
        return buf;
    }
    char *text = v ? cJSON_PrintUnformatted(v) : NULL;
    if (!text) {
        snprintf(buf, size, "%s", v ? "(a value)" : "(nothing)");
        return buf;
    }
    size_t n = strlen(text);
    if (n < size && n <= 60)
        snprintf(buf, size, "%s", text);
    else
        snprintf(buf, size, "%.*s...", (int)(size < 64 ? size - 4 : 60), text);
    cJSON_free(text);
    return buf;
}

static int by_key(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static ts_status twice(const char *what, const char *key) {
    return ts_fail(TS_ERR_FORMAT, "%s: the key \"%.60s\" appears twice (which one is meant?)", what, key);
}

ts_status ts_json_check_unique(const cJSON *o, const char *what) {
    if (!o) return TS_OK;
    int n = cJSON_IsObject(o) ? cJSON_GetArraySize(o) : 0;
    if (n > 16) { /* a BPE vocabulary has 50257 keys: sorted, not pairwise */
        const char **keys = malloc(sizeof *keys * (size_t)n);
        if (!keys) return ts_fail(TS_ERR_NOMEM, "%s: out of memory", what);
        int k = 0;
        for (const cJSON *c = o->child; c && k < n; c = c->next) keys[k++] = c->string ? c->string : "";
        qsort(keys, (size_t)k, sizeof *keys, by_key);
        ts_status st = TS_OK;
        for (int i = 1; i < k && !st; i++)
            if (strcmp(keys[i - 1], keys[i]) == 0) st = twice(what, keys[i]);
        free(keys);
        TS_TRY(st);
    } else if (n > 1) {
        for (const cJSON *a = o->child; a; a = a->next)
            for (const cJSON *b = a->next; b; b = b->next)
                if (a->string && b->string && strcmp(a->string, b->string) == 0) return twice(what, a->string);
    }
    for (const cJSON *c = o->child; c; c = c->next)
        if (cJSON_IsObject(c) || cJSON_IsArray(c)) TS_TRY(ts_json_check_unique(c, what));
    return TS_OK;
}

ts_status ts_json_parse(const char *text, size_t len, const char *what, cJSON **out) {
    *out = NULL;
    /* cJSON stops a string at a NUL and reads on: a key or value would be cut short unseen */
    const char *nul = memchr(text, '\0', len);
    if (nul) return ts_fail(TS_ERR_FORMAT, "%s: a NUL byte at byte %zu of %zu: not JSON text", what, (size_t)(nul - text), len);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (!root) {
        size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
        return ts_fail(TS_ERR_FORMAT, "%s: not valid JSON (near byte %zu of %zu)", what, at, len);
    }
    for (const char *p = end; p && p < text + len; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            cJSON_Delete(root);
            return ts_fail(TS_ERR_FORMAT, "%s: more after the JSON value ends (byte %zu of %zu)", what,
                           (size_t)(p - text), len);
        }
    if (!cJSON_IsObject(root)) {
        char q[80];
        ts_json_quote(root, q, sizeof q);
        cJSON_Delete(root);
        return ts_fail(TS_ERR_FORMAT, "%s: a JSON object {...} was expected, not %s", what, q);
    }
    ts_status st = ts_json_check_unique(root, what);
    if (st) {
        cJSON_Delete(root);
        return st;
    }
    *out = root;
    return TS_OK;
}

bool ts_json_has(const cJSON *o, const char *key) { return cJSON_GetObjectItemCaseSensitive(o, key) != NULL; }

/* The value at key, or NULL; an absent required key is the error. */
static ts_status get(const cJSON *o, const char *key, const char *what, bool required, const cJSON **v) {
    *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!*v && required) return ts_fail(TS_ERR_FORMAT, "%s: no \"%s\"", what, key);
    return TS_OK;
}

static ts_status wrong(const cJSON *v, const char *key, const char *what, const char *want) {
    char q[80];
    return ts_fail(TS_ERR_FORMAT, "%s: \"%s\" is %s, not %s", what, key, ts_json_quote(v, q, sizeof q), want);
}

ts_status ts_json_int(const cJSON *o, const char *key, const char *what, bool required, int64_t lo, int64_t hi,
                      int64_t *out) {
    const cJSON *v;
    TS_TRY(get(o, key, what, required, &v));
    if (!v) return TS_OK;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble))
        return wrong(v, key, what, "a whole number");
    double d = v->valuedouble;
    if (d < (double)lo || d > (double)hi || d >= 0x1p63 || d < -0x1p63) { /* (double)hi may round up */
        char q[80];
        return ts_fail(TS_ERR_FORMAT, "%s: \"%s\" is %s, outside [%lld, %lld]", what, key,
                       ts_json_quote(v, q, sizeof q), (long long)lo, (long long)hi);
    }
    *out = (int64_t)d;
    return TS_OK;
}

ts_status ts_json_number(const cJSON *o, const char *key, const char *what, bool required, double *out) {
    const cJSON *v;
    TS_TRY(get(o, key, what, required, &v));
    if (!v) return TS_OK;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) return wrong(v, key, what, "a number");
    *out = v->valuedouble;
    return TS_OK;
}

ts_status ts_json_string(const cJSON *o, const char *key, const char *what, bool required, const char **out) {
    const cJSON *v;
    TS_TRY(get(o, key, what, required, &v));
    if (!v) return TS_OK;
    if (!cJSON_IsString(v)) return wrong(v, key, what, "a string");
    *out = v->valuestring;
    return TS_OK;
}

ts_status ts_json_bool(const cJSON *o, const char *key, const char *what, bool required, bool *out) {
    const cJSON *v;
    TS_TRY(get(o, key, what, required, &v));
    if (!v) return TS_OK;
    if (!cJSON_IsBool(v)) return wrong(v, key, what, "true or false");
    *out = cJSON_IsTrue(v);
    return TS_OK;
}
