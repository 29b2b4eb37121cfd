/* pickle: the subset of Python's pickle that torch.save writes for a
 * state_dict, read into a tree of values without running anything (io.h,
 * "pickle").
 *
 * A pickle is a program for a small stack machine: opcodes push values
 * (numbers, strings, empty containers, "the global named module.name"),
 * fill containers, and call a global on a tuple (REDUCE). Python's
 * unpickler imports the global and calls it, which is how a pickle runs
 * arbitrary code. This reader never imports or calls: a call to one of the
 * few functions torch.save relies on (OrderedDict, _rebuild_tensor_v2,
 * _rebuild_parameter) builds the value that function would have built; a
 * call to anything else becomes an opaque object that remembers the
 * callee's name, so a caller can refuse it by name. Every value is one
 * malloc on a list freed at once, so a pickle whose containers refer to
 * themselves is freed without recursion, and nothing here recurses.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tscope/io.h"

typedef struct reader {
    ts_pickle *p;
    const unsigned char *b;
    size_t n, at;         /* bytes, their count, the next opcode's offset */
    const char *what;     /* "ckpt.pt (data.pkl)", for messages */
    ts_pk **stack;        /* the machine's stack */
    int64_t depth, stack_cap;
    int64_t *marks;       /* stack depths at each MARK */
    int64_t n_marks, marks_cap;
    ts_pk **memo;         /* memo[i]: the value put at i, or NULL */
    int64_t memo_cap, memo_next;
} reader;

/* ---- values -------------------------------------------------------------------- */

static ts_pk *new_value(reader *r, ts_pk_kind kind) {
    ts_pk *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    v->kind = kind;
    v->next = r->p->all;
    r->p->all = v;
    return v;
}

static ts_status nomem(const reader *r) { return ts_fail(TS_ERR_NOMEM, "%s: out of memory", r->what); }

static ts_status bad(const reader *r, const char *why) {
    return ts_fail(TS_ERR_FORMAT, "%s: byte %zu: %s", r->what, r->at, why);
}

static ts_status add_item(reader *r, ts_pk *c, ts_pk *item) {
    if (c->n == c->cap) {
        int64_t cap = c->cap ? 2 * c->cap : 8;
        ts_pk **items = realloc(c->items, sizeof *items * (size_t)cap);
        if (!items) return nomem(r);
        c->items = items, c->cap = cap;
    }
    c->items[c->n++] = item;
    return TS_OK;
}

const char *ts_pk_kind_name(const ts_pk *v) {
    static const char *const names[] = {"None", "bool", "int", "float", "str", "bytes", "tuple", "list", "dict",
                                        "global", "object", "storage", "tensor"};
    if (!v) return "nothing";
    if ((v->kind == TS_PK_OBJECT || v->kind == TS_PK_GLOBAL) && v->s) return v->s;
    return names[v->kind];
}

const ts_pk *ts_pk_get(const ts_pk *dict, const char *key) {
    if (!dict || dict->kind != TS_PK_DICT) return NULL;
    for (int64_t i = 0; i + 1 < dict->n; i += 2) {
        const ts_pk *k = dict->items[i];
        if (k->kind == TS_PK_STR && strlen(key) == k->len && memcmp(k->s, key, k->len) == 0) return dict->items[i + 1];
    }
    return NULL;
}

/* ---- the stack ------------------------------------------------------------------ */

static ts_status push(reader *r, ts_pk *v) {
    if (!v) return nomem(r);
    if (r->depth == r->stack_cap) {
        int64_t cap = r->stack_cap ? 2 * r->stack_cap : 64;
        ts_pk **s = realloc(r->stack, sizeof *s * (size_t)cap);
        if (!s) return nomem(r);
        r->stack = s, r->stack_cap = cap;
    }
    r->stack[r->depth++] = v;
    return TS_OK;
}

/* The top value, above the last mark. */
static ts_status pop(reader *r, ts_pk **out) {
    int64_t floor = r->n_marks ? r->marks[r->n_marks - 1] : 0;
    if (r->depth <= floor) return bad(r, "an opcode takes a value from an empty stack");
    *out = r->stack[--r->depth];
    return TS_OK;
}

static ts_status top(reader *r, ts_pk **out) {
    int64_t floor = r->n_marks ? r->marks[r->n_marks - 1] : 0;
    if (r->depth <= floor) return bad(r, "an opcode needs a value on an empty stack");
    *out = r->stack[r->depth - 1];
    return TS_OK;
}

static ts_status mark(reader *r) {
    if (r->n_marks == r->marks_cap) {
        int64_t cap = r->marks_cap ? 2 * r->marks_cap : 16;
        int64_t *m = realloc(r->marks, sizeof *m * (size_t)cap);
        if (!m) return nomem(r);
        r->marks = m, r->marks_cap = cap;
    }
    r->marks[r->n_marks++] = r->depth;
    return TS_OK;
}

/* The values since the last mark (first..depth), and the mark removed. */
static ts_status pop_mark(reader *r, int64_t *first) {
    if (r->n_marks == 0) return bad(r, "an opcode looks for a MARK that was never set");
    *first = r->marks[--r->n_marks];
    return TS_OK;
}

/* ---- the memo ------------------------------------------------------------------- */

static ts_status memo_put(reader *r, uint64_t i) {
    ts_pk *v;
    TS_TRY(top(r, &v));
    /* pickle numbers its memo 0, 1, 2, ...: an index past one per byte is not a pickle's */
    if (i > (uint64_t)r->n + 16) return bad(r, "a memo index larger than the pickle could have made");
    if ((int64_t)i >= r->memo_cap) {
        int64_t cap = r->memo_cap ? r->memo_cap : 64;
        while (cap <= (int64_t)i) cap *= 2;
        ts_pk **m = realloc(r->memo, sizeof *m * (size_t)cap);
        if (!m) return nomem(r);
        memset(m + r->memo_cap, 0, sizeof *m * (size_t)(cap - r->memo_cap));
        r->memo = m, r->memo_cap = cap;
    }
    r->memo[i] = v;
    if ((int64_t)i >= r->memo_next) r->memo_next = (int64_t)i + 1;
    return TS_OK;
}

static ts_status memo_get(reader *r, uint64_t i) {
    if ((int64_t)i >= r->memo_cap || i > (uint64_t)INT64_MAX || !r->memo[i])
        return bad(r, "a memo lookup of an index never put");
    return push(r, r->memo[i]);
}

/* ---- reading bytes -------------------------------------------------------------- */

static ts_status need(const reader *r, size_t k) {
    if (r->n - r->at < k) return bad(r, "the pickle ends inside an opcode's argument");
    return TS_OK;
}

static uint64_t le(const unsigned char *p, int k) {
    uint64_t v = 0;
    for (int i = k - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static ts_status arg(reader *r, int k, uint64_t *v) {
    TS_TRY(need(r, (size_t)k));
    *v = le(r->b + r->at, k);
    r->at += (size_t)k;
    return TS_OK;
}

/* A string or bytes value of len bytes from the input. */
static ts_status text(reader *r, ts_pk_kind kind, uint64_t len) {
    if (len > r->n - r->at) return bad(r, "a string runs past the end of the pickle");
    ts_pk *v = new_value(r, kind);
    if (!v || !(v->s = malloc((size_t)len + 1))) return nomem(r);
    memcpy(v->s, r->b + r->at, (size_t)len);
    v->s[len] = '\0';
    v->len = (size_t)len;
    r->at += (size_t)len;
    return push(r, v);
}

static ts_status integer(reader *r, int64_t i) {
    ts_pk *v = new_value(r, TS_PK_INT);
    if (v) v->i = i;
    return push(r, v);
}

/* GLOBAL's argument: "module\nname\n". */
static ts_status line(reader *r, const char **s, size_t *len) {
    const unsigned char *nl = memchr(r->b + r->at, '\n', r->n - r->at < 256 ? r->n - r->at : 256);
    if (!nl) return bad(r, "GLOBAL's module or name is not a line of at most 255 bytes");
    *s = (const char *)r->b + r->at;
    *len = (size_t)(nl - (r->b + r->at));
    r->at += *len + 1;
    return TS_OK;
}

static ts_status global(reader *r, const char *mod, size_t m, const char *name, size_t k) {
    ts_pk *v = new_value(r, TS_PK_GLOBAL);
    if (!v || !(v->s = malloc(m + k + 2))) return nomem(r);
    memcpy(v->s, mod, m);
    v->s[m] = '.';
    memcpy(v->s + m + 1, name, k);
    v->s[m + k + 1] = '\0';
    v->len = m + k + 1;
    for (size_t i = 0; i < v->len; i++)
        if ((unsigned char)v->s[i] < 0x20) return bad(r, "a global's name has control characters");
    return push(r, v);
}

/* ---- what torch.save calls -------------------------------------------------------- */

static const struct {
    const char *name;
    ts_st_dtype dtype;
    int size;
    const char *dtype_name;
} storages[] = {
    {"torch.FloatStorage", TS_ST_F32, 4, "F32"},  {"torch.HalfStorage", TS_ST_F16, 2, "F16"},
    {"torch.BFloat16Storage", TS_ST_BF16, 2, "BF16"}, {"torch.DoubleStorage", TS_ST_F64, 8, "F64"},
    {"torch.LongStorage", TS_ST_I64, 8, "I64"},   {"torch.IntStorage", TS_ST_I32, 4, "I32"},
    {"torch.ShortStorage", TS_ST_I16, 2, "I16"},  {"torch.CharStorage", TS_ST_I8, 1, "I8"},
    {"torch.ByteStorage", TS_ST_U8, 1, "U8"},     {"torch.BoolStorage", TS_ST_BOOL, 1, "BOOL"},
};

static bool is(const ts_pk *v, ts_pk_kind kind) { return v && v->kind == kind; }

/* BINPERSID: torch.save's reference to a storage, ('storage', torch.FloatStorage,
 * key, location, numel); the bytes are the archive's member data/<key>. */
static ts_status persistent(reader *r, ts_pk *pid) {
    if (!is(pid, TS_PK_TUPLE) || pid->n != 5 || !is(pid->items[0], TS_PK_STR) ||
        strcmp(pid->items[0]->s, "storage") != 0)
        return bad(r, "a persistent id that is not torch.save's ('storage', type, key, location, numel)");
    const ts_pk *type = pid->items[1], *key = pid->items[2], *numel = pid->items[4];
    if (!is(type, TS_PK_GLOBAL) || !is(key, TS_PK_STR) || !is(numel, TS_PK_INT) || numel->i < 0)
        return bad(r, "a storage reference whose type, key or size is not a name, a string and a count");
    if (key->len == 0 || key->len > 64 || strspn(key->s, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_") != key->len)
        return bad(r, "a storage key that is not a short name of letters and digits");
    ts_pk *v = new_value(r, TS_PK_STORAGE);
    if (!v) return nomem(r);
    for (size_t i = 0; i < sizeof storages / sizeof storages[0]; i++)
        if (strcmp(type->s, storages[i].name) == 0) {
            v->dtype = storages[i].dtype;
            v->elem_size = storages[i].size;
            v->dtype_name = storages[i].dtype_name;
        }
    if (!v->elem_size) {
        char why[320];
        snprintf(why, sizeof why, "storage type %.120s is not one tscope reads (float32, float16, bfloat16, "
                 "float64, integers, bool)", type->s);
        return bad(r, why);
    }
    v->s = key->s; /* owned by the key's value, which lives as long */
    v->len = key->len;
    v->i = numel->i;
    return push(r, v);
}

/* A tuple of non-negative ints into dims; false when it is not one. */
static bool dims(const ts_pk *t, int64_t *out, int *rank) {
    if (!is(t, TS_PK_TUPLE) || t->n > TS_MAX_RANK) return false;
    for (int64_t i = 0; i < t->n; i++) {
        if (!is(t->items[i], TS_PK_INT) || t->items[i]->i < 0) return false;
        out[i] = t->items[i]->i;
    }
    *rank = (int)t->n;
    return true;
}

/* _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, metadata]). */
static ts_status rebuild_tensor(reader *r, const ts_pk *args) {
    ts_pk *v = new_value(r, TS_PK_TENSOR);
    if (!v) return nomem(r);
    int rank_stride = -1;
    if (!is(args, TS_PK_TUPLE) || args->n < 4 || !is(args->items[0], TS_PK_STORAGE) ||
        !is(args->items[1], TS_PK_INT) || args->items[1]->i < 0 || !dims(args->items[2], v->shape, &v->rank) ||
        !dims(args->items[3], v->stride, &rank_stride) || rank_stride != v->rank)
        return bad(r, "_rebuild_tensor_v2's arguments are not (storage, offset, size, stride) with at most 6 "
                      "non-negative sizes and as many strides");
    v->storage = args->items[0];
    v->offset = args->items[1]->i;
    return push(r, v);
}

/* REDUCE: callee(*args), for the few callees torch.save uses; anything else
 * an opaque object carrying the callee's name. */
static ts_status reduce(reader *r, const ts_pk *callee, const ts_pk *args) {
    if (!is(callee, TS_PK_GLOBAL)) return bad(r, "REDUCE calls something that is not a global");
    const char *f = callee->s;
    if (strcmp(f, "collections.OrderedDict") == 0) {
        if (!is(args, TS_PK_TUPLE) || args->n != 0) return bad(r, "OrderedDict built from arguments");
        return push(r, new_value(r, TS_PK_DICT));
    }
    if (strcmp(f, "torch._utils._rebuild_tensor_v2") == 0 || strcmp(f, "torch._utils._rebuild_tensor") == 0)
        return rebuild_tensor(r, args);
    if (strcmp(f, "torch._utils._rebuild_parameter") == 0) {
        if (!is(args, TS_PK_TUPLE) || args->n < 1 || !is(args->items[0], TS_PK_TENSOR))
            return bad(r, "_rebuild_parameter's first argument is not a tensor");
        return push(r, args->items[0]);
    }
    ts_pk *v = new_value(r, TS_PK_OBJECT);
    if (!v) return nomem(r);
    v->s = callee->s; /* the callee's value lives as long */
    v->len = callee->len;
    return push(r, v);
}

/* SETITEM(S) and APPEND(S) fill a dict or list; into an opaque object they
 * are dropped (its state is never used). */
static ts_status fill(reader *r, ts_pk *c, int64_t first, bool pairs) {
    int64_t k = r->depth - first;
    ts_status st = TS_OK;
    if (pairs && k % 2) return bad(r, "SETITEMS with a key and no value");
    if (c->kind == TS_PK_OBJECT) {
        r->depth = first;
        return TS_OK;
    }
    if (c->kind != (pairs ? TS_PK_DICT : TS_PK_LIST))
        return bad(r, pairs ? "SETITEM(S) into something that is not a dict" : "APPEND(S) to something that is not a list");
    for (int64_t i = first; i < r->depth && !st; i++) st = add_item(r, c, r->stack[i]);
    r->depth = first;
    return st;
}

/* ---- the machine ----------------------------------------------------------------- */

/* The values from the last mark on, as a tuple/list/dict; the mark removed. */
static ts_status collect(reader *r, ts_pk_kind kind) {
    int64_t first = 0;
    TS_TRY(pop_mark(r, &first));
    if (kind == TS_PK_DICT && (r->depth - first) % 2) return bad(r, "DICT with a key and no value");
    ts_pk *v = new_value(r, kind);
    if (!v) return nomem(r);
    ts_status st = TS_OK;
    for (int64_t i = first; i < r->depth && !st; i++) st = add_item(r, v, r->stack[i]);
    r->depth = first;
    return st ? st : push(r, v);
}

static ts_status tuple_of(reader *r, int k) {
    int64_t floor = r->n_marks ? r->marks[r->n_marks - 1] : 0;
    if (r->depth - floor < k) return bad(r, "TUPLE1/2/3 on a stack with fewer values");
    ts_pk *v = new_value(r, TS_PK_TUPLE);
    if (!v) return nomem(r);
    ts_status st = TS_OK;
    for (int64_t i = r->depth - k; i < r->depth && !st; i++) st = add_item(r, v, r->stack[i]);
    r->depth -= k;
    return st ? st : push(r, v);
}

static ts_status step(reader *r, int op, bool *stop) {
    ts_pk *a, *b, *c;
    uint64_t u;
    int64_t first = 0;
    const char *s1, *s2;
    size_t l1, l2;
    switch (op) {
    case 0x80: /* PROTO */
        TS_TRY(arg(r, 1, &u));
        if (u > 5) return bad(r, "a pickle protocol above 5");
        return TS_OK;
    case 0x95: return arg(r, 8, &u); /* FRAME: a size hint */
    case '.': /* STOP */
        TS_TRY(pop(r, &a));
        r->p->root = a;
        *stop = true;
        return TS_OK;
    case '}': return push(r, new_value(r, TS_PK_DICT));
    case ']': return push(r, new_value(r, TS_PK_LIST));
    case ')': return push(r, new_value(r, TS_PK_TUPLE));
    case 'N': return push(r, new_value(r, TS_PK_NONE));
    case 0x88: case 0x89: /* NEWTRUE, NEWFALSE */
        a = new_value(r, TS_PK_BOOL);
        if (a) a->i = op == 0x88;
        return push(r, a);
    case '(': return mark(r);
    case 't': return collect(r, TS_PK_TUPLE);
    case 'l': return collect(r, TS_PK_LIST);
    case 'd': return collect(r, TS_PK_DICT);
    case 0x85: case 0x86: case 0x87: return tuple_of(r, op - 0x84);
    case 's': /* SETITEM */
        TS_TRY(pop(r, &b));
        TS_TRY(pop(r, &a));
        TS_TRY(top(r, &c));
        TS_TRY(push(r, a));
        TS_TRY(push(r, b));
        return fill(r, c, r->depth - 2, true);
    case 'a': /* APPEND */
        TS_TRY(pop(r, &a));
        TS_TRY(top(r, &c));
        TS_TRY(push(r, a));
        return fill(r, c, r->depth - 1, false);
    case 'u': case 'e': /* SETITEMS, APPENDS: the container is below the mark */
        TS_TRY(pop_mark(r, &first));
        if (first < 1 || (r->n_marks && first <= r->marks[r->n_marks - 1]))
            return bad(r, "SETITEMS/APPENDS with no container below the mark");
        return fill(r, r->stack[first - 1], first, op == 'u');
    case 'q': TS_TRY(arg(r, 1, &u)); return memo_put(r, u); /* BINPUT */
    case 'r': TS_TRY(arg(r, 4, &u)); return memo_put(r, u); /* LONG_BINPUT */
    case 0x94: return memo_put(r, (uint64_t)r->memo_next); /* MEMOIZE */
    case 'h': TS_TRY(arg(r, 1, &u)); return memo_get(r, u); /* BINGET */
    case 'j': TS_TRY(arg(r, 4, &u)); return memo_get(r, u); /* LONG_BINGET */
    case 'K': TS_TRY(arg(r, 1, &u)); return integer(r, (int64_t)u);
    case 'M': TS_TRY(arg(r, 2, &u)); return integer(r, (int64_t)u);
    case 'J': TS_TRY(arg(r, 4, &u)); return integer(r, (int32_t)(uint32_t)u);
    case 0x8a: { /* LONG1: a little-endian two's complement of n bytes */
        TS_TRY(arg(r, 1, &u));
        int k = (int)u;
        if (k > 8) return bad(r, "an integer wider than 64 bits");
        uint64_t v = 0;
        TS_TRY(k ? arg(r, k, &v) : TS_OK);
        if (k && k < 8 && (v >> (8 * k - 1)) & 1) v |= ~0ull << (8 * k); /* sign-extend */
        return integer(r, (int64_t)v);
    }
    case 'G': { /* BINFLOAT: big-endian double */
        TS_TRY(need(r, 8));
        uint64_t bits = 0;
        for (int i = 0; i < 8; i++) bits = bits << 8 | r->b[r->at + (size_t)i];
        r->at += 8;
        a = new_value(r, TS_PK_FLOAT);
        if (a) memcpy(&a->f, &bits, sizeof a->f);
        return push(r, a);
    }
    case 'X': TS_TRY(arg(r, 4, &u)); return text(r, TS_PK_STR, u);      /* BINUNICODE */
    case 0x8c: TS_TRY(arg(r, 1, &u)); return text(r, TS_PK_STR, u);     /* SHORT_BINUNICODE */
    case 0x8d: TS_TRY(arg(r, 8, &u)); return text(r, TS_PK_STR, u);     /* BINUNICODE8 */
    case 'U': TS_TRY(arg(r, 1, &u)); return text(r, TS_PK_STR, u);      /* SHORT_BINSTRING */
    case 'T': TS_TRY(arg(r, 4, &u)); return text(r, TS_PK_STR, u);      /* BINSTRING */
    case 'C': TS_TRY(arg(r, 1, &u)); return text(r, TS_PK_BYTES, u);    /* SHORT_BINBYTES */
    case 'B': TS_TRY(arg(r, 4, &u)); return text(r, TS_PK_BYTES, u);    /* BINBYTES */
    case 0x8e: TS_TRY(arg(r, 8, &u)); return text(r, TS_PK_BYTES, u);   /* BINBYTES8 */
    case 'c': /* GLOBAL */
        TS_TRY(line(r, &s1, &l1));
        TS_TRY(line(r, &s2, &l2));
        return global(r, s1, l1, s2, l2);
    case 0x93: /* STACK_GLOBAL */
        TS_TRY(pop(r, &b));
        TS_TRY(pop(r, &a));
        if (!is(a, TS_PK_STR) || !is(b, TS_PK_STR) || a->len > 255 || b->len > 255)
            return bad(r, "STACK_GLOBAL's module and name are not short strings");
        return global(r, a->s, a->len, b->s, b->len);
    case 'R': /* REDUCE */
        TS_TRY(pop(r, &b));
        TS_TRY(pop(r, &a));
        return reduce(r, a, b);
    case 0x81: /* NEWOBJ: cls.__new__(cls, *args), opaque */
        TS_TRY(pop(r, &b));
        TS_TRY(pop(r, &a));
        if (!is(a, TS_PK_GLOBAL)) return bad(r, "NEWOBJ of something that is not a class");
        c = new_value(r, TS_PK_OBJECT);
        if (c) c->s = a->s, c->len = a->len;
        return push(r, c);
    case 'b': /* BUILD: obj.__setstate__(state); the state is not used */
        TS_TRY(pop(r, &b));
        TS_TRY(top(r, &a));
        if (a->kind != TS_PK_OBJECT && a->kind != TS_PK_DICT && a->kind != TS_PK_TENSOR)
            return bad(r, "BUILD on a value that has no state");
        return TS_OK;
    case 'Q': /* BINPERSID */
        TS_TRY(pop(r, &a));
        return persistent(r, a);
    case '0': return pop(r, &a); /* POP */
    case '1': /* POP_MARK */
        TS_TRY(pop_mark(r, &first));
        r->depth = first;
        return TS_OK;
    case '2': TS_TRY(top(r, &a)); return push(r, a); /* DUP */
    }
    char why[160];
    snprintf(why, sizeof why, "opcode 0x%02x%s%c%s is outside the pickle subset tscope reads (it never runs a "
             "pickle's code)", op, op >= 0x21 && op < 0x7f ? " ('" : "", op >= 0x21 && op < 0x7f ? op : ' ',
             op >= 0x21 && op < 0x7f ? "')" : "");
    return bad(r, why);
}

ts_status ts_pickle_parse(ts_pickle *p, const void *bytes, size_t size, const char *what) {
    memset(p, 0, sizeof *p);
    reader r = {.p = p, .b = bytes, .n = size, .what = what};
    ts_status st = TS_OK;
    bool stop = false;
    while (!st && !stop) {
        if (r.at >= r.n) {
            st = bad(&r, "the pickle ends before its STOP opcode");
            break;
        }
        int op = r.b[r.at++];
        st = step(&r, op, &stop);
        if (st == TS_OK && !stop && r.at > r.n) st = bad(&r, "an opcode reads past the end");
    }
    free(r.stack);
    free(r.marks);
    free(r.memo);
    if (st) ts_pickle_free(p);
    return st;
}

void ts_pickle_free(ts_pickle *p) {
    for (ts_pk *v = p->all, *next; v; v = next) {
        next = v->next;
        free(v->items);
        if (v->kind != TS_PK_OBJECT && v->kind != TS_PK_STORAGE) free(v->s);
        free(v->bytes);
        free(v);
    }
    memset(p, 0, sizeof *p);
}
