/* arena: one block of memory, carved into 64-byte aligned pieces (core.h, "arena"). */
#include "tscope/core.h"

#include <stdlib.h>
#include <string.h>

ts_status ts_arena_init(ts_arena *arena, size_t capacity) {
    memset(arena, 0, sizeof *arena);
    capacity = ts_arena_round(capacity);
    if (capacity == 0) return TS_OK;
    arena->base = aligned_alloc(TS_ARENA_ALIGN, capacity);
    if (!arena->base)
        return ts_fail(TS_ERR_NOMEM, "cannot allocate an arena of %zu MB", capacity >> 20);
    arena->capacity = capacity;
    return TS_OK;
}

void ts_arena_free(ts_arena *arena) {
    free(arena->base);
    memset(arena, 0, sizeof *arena);
}

size_t ts_arena_round(size_t bytes) {
    return (bytes + TS_ARENA_ALIGN - 1) & ~(size_t)(TS_ARENA_ALIGN - 1);
}

void *ts_arena_alloc(ts_arena *arena, size_t bytes) {
    size_t need = ts_arena_round(bytes);
    if (need > arena->capacity - arena->used) {
        ts_fail(TS_ERR_NOMEM, "arena exhausted: asked for %zu bytes, %zu of %zu left", bytes,
                arena->capacity - arena->used, arena->capacity);
        return NULL;
    }
    void *p = arena->base + arena->used;
    arena->used += need;
    if (arena->used > arena->peak) arena->peak = arena->used;
    return p;
}

size_t ts_arena_mark(const ts_arena *arena) { return arena->used; }

void ts_arena_reset(ts_arena *arena, size_t mark) {
    if (mark <= arena->used) arena->used = mark;
}
