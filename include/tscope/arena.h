/* arena: one block of memory carved into 64-byte aligned pieces.
 *
 * Activations for a whole forward pass come from one arena sized up front, so
 * nothing is malloc'd inside forward or backward. ts_arena_mark/ts_arena_reset
 * give stack-like scratch space; the peak tells how large the block must be.
 */
#ifndef TSCOPE_ARENA_H
#define TSCOPE_ARENA_H

#include <stddef.h>

#include "tscope/status.h"

#define TS_ARENA_ALIGN 64

typedef struct ts_arena {
    unsigned char *base; /* the block (owned) */
    size_t capacity;     /* bytes in the block */
    size_t used;         /* bytes handed out so far */
    size_t peak;         /* largest `used` seen */
} ts_arena;

ts_status ts_arena_init(ts_arena *arena, size_t capacity);
void ts_arena_free(ts_arena *arena);

/* `bytes` of memory aligned to TS_ARENA_ALIGN, or NULL with an error message
 * that says how much was asked for and how much was left. */
void *ts_arena_alloc(ts_arena *arena, size_t bytes);

/* Bytes an allocation of `bytes` takes once rounded up to the alignment:
 * sum this over a size table to size an arena exactly. */
size_t ts_arena_round(size_t bytes);

size_t ts_arena_mark(const ts_arena *arena);
void ts_arena_reset(ts_arena *arena, size_t mark);

#endif
