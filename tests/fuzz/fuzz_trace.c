/* libFuzzer target for the trace reader: any bytes must open with a message
 * or give steps whose every field and value can be touched, never a crash or
 * a read out of bounds. Random bytes rarely get past the CRCs, so for odd
 * lengths, or with reserved header bit 0 set, the CRCs are recomputed first (as far as the
 * sizes can be followed) and the checks behind them are fuzzed too.
 *   make fuzz   (or: clang -fsanitize=fuzzer,address ...; ./fuzz_trace CORPUS)
 * Seeds: tests/fuzz/corpus/trace/ (small real traces). Finds go to
 * tests/fuzz/regressions/trace-* and test_trace replays them. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trace/trace_format.h"
#include "tscope/trace.h"

static bool fits(uint64_t off, uint64_t len, uint64_t size) { return off <= size && len <= size - off; }

/* Fix the CRCs of records from off on (prefix, then suffix at the end of the
 * record, or right after the prefix in index copies); returns where it stopped. */
static uint64_t fix_records(unsigned char *d, uint64_t off, uint64_t end, bool copies, int max) {
    for (int k = 0; k < max && fits(off, TRF_P_NAME, end); k++) {
        uint64_t prefix = trf_get32(d + off + TRF_P_PREFIX_SIZE);
        uint64_t record = trf_get64(d + off + TRF_P_RECORD_SIZE);
        uint64_t span = copies ? prefix + TRF_SUFFIX_SIZE : record;
        if (prefix < TRF_P_NAME || record < prefix + TRF_SUFFIX_SIZE || !fits(off, span, end)) break;
        unsigned char *s = d + off + span - TRF_SUFFIX_SIZE;
        uint64_t count = trf_get64(d + off + TRF_P_VALUES_COUNT);
        if (!copies && count <= (record - prefix - TRF_SUFFIX_SIZE) / 4)
            trf_put32(s + TRF_S_VALUES_CRC, trf_crc32(0, d + off + prefix, (size_t)count * 4));
        uint32_t crc = trf_crc32(0, d + off, (size_t)prefix);
        trf_put32(s + TRF_S_RECORD_CRC, trf_crc32(crc, s, TRF_S_RECORD_CRC));
        off += span;
    }
    return off;
}

static void fix_crcs(unsigned char *d, uint64_t size) {
    if (size < TRF_HEADER_SIZE) return;
    uint64_t meta = trf_get64(d + TRF_H_META_SIZE), records = trf_get64(d + TRF_H_RECORDS_OFFSET);
    if (fits(TRF_HEADER_SIZE, meta, size))
        trf_put32(d + TRF_H_META_CRC, trf_crc32(0, d + TRF_HEADER_SIZE, (size_t)meta));
    trf_put32(d + TRF_H_CRC, trf_crc32(0, d, TRF_H_CRC));
    uint64_t end = size;
    if (size >= TRF_TRAILER_SIZE) {
        unsigned char *t = d + size - TRF_TRAILER_SIZE;
        uint64_t ix = trf_get64(t + TRF_T_INDEX_OFFSET), ix_size = trf_get64(t + TRF_T_INDEX_SIZE);
        uint64_t count = trf_get64(t + TRF_T_STEP_COUNT);
        if (fits(ix, ix_size, size - TRF_TRAILER_SIZE) && ix_size >= TRF_INDEX_HEAD && count < (1u << 20) &&
            8 * count <= ix_size - TRF_INDEX_HEAD) {
            fix_records(d + ix, TRF_INDEX_HEAD + 8 * count, ix_size, true, (int)count);
            trf_put32(t + TRF_T_INDEX_CRC, trf_crc32(0, d + ix, (size_t)ix_size));
            end = ix;
        }
        trf_put32(t + TRF_T_CRC, trf_crc32(0, t, TRF_T_CRC));
    }
    if (records < end) fix_records(d, records, end, false, 1 << 16);
}

static void touch(ts_trace *t) {
    volatile double sink = 0;
    (void)ts_trace_metadata(t);
    (void)ts_trace_warning(t);
    int64_t n_bad = -1;
    if ((ts_trace_verify(t, &n_bad) == TS_OK) != (n_bad == 0)) abort(); /* its count agrees with its verdict */
    for (int side = 0; side < 2; side++)
        for (int i = 0; i < ts_trace_token_count(t, (ts_trace_side)side); i++)
            sink += (double)strlen(ts_trace_token(t, (ts_trace_side)side, i));
    for (int64_t i = 0; i < ts_trace_count(t); i++) {
        const ts_trace_step *s = ts_trace_step_at(t, i);
        sink += (double)strlen(s->name) + s->stats.mean;
        if (ts_trace_find(t, s->name) > i) abort(); /* the first step of a name comes first */
        (void)ts_trace_find_next(t, i);
        const float *v;
        if (s->has_values && ts_trace_values(t, i, &v) == TS_OK && s->values_count > 0)
            sink += v[0] + v[s->values_count - 1];
        ts_tensor view;
        if (s->has_values && ts_trace_tensor(t, i, &view) == TS_OK) sink += (double)ts_tensor_numel(&view);
        uint64_t hist[TS_TRACE_HIST_BINS];
        if (s->has_stats && ts_trace_histogram(t, i, hist) == TS_OK) sink += (double)hist[0];
    }
    (void)ts_trace_find_glob(t, "*.weights", 0);
    (void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    /* An odd length (most cuts and insertions) or a reserved header bit picks the mode. */
    bool fix = (size & 1) || (size > TRF_H_FLAGS && (data[TRF_H_FLAGS] & 1));
    unsigned char *copy = malloc(size);
    if (!copy) return 0;
    memcpy(copy, data, size);
    if (fix) fix_crcs(copy, size);
    ts_trace *t;
    if (ts_trace_open_memory(copy, size, &t) == TS_OK) {
        touch(t);
        ts_trace_close(t);
    }
    free(copy);
    return 0;
}
