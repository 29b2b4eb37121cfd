/* npz: NumPy's .npz archives (a zip of .npy files), written as a stream.
 *
 *     ts_npz z;
 *     ts_npz_open(&z, "trace.npz");
 *     ts_npz_add(&z, "encoder.layers.0.self_attn.weights", &t);  // -> member "....npy"
 *     ts_npz_close(&z);        // central directory, then rename into place
 *
 * Members are stored (no compression) with their CRC-32, so np.load reads them
 * directly. Archives past the classic zip limits (4 GiB, 65535 members) get
 * zip64 records. Nothing appears at the path until ts_npz_close succeeds; on
 * any error the temporary file is removed.
 */
#ifndef TSCOPE_NPZ_H
#define TSCOPE_NPZ_H

#include <stdbool.h>
#include <stdint.h>

#include "tscope/outfile.h"
#include "tscope/status.h"
#include "tscope/tensor.h"

typedef struct ts_npz_member {
    char *name;      /* member name, "<array name>.npy" (owned) */
    uint64_t offset; /* of its local header */
    uint64_t size;   /* bytes of .npy data */
    uint32_t crc;
} ts_npz_member;

typedef struct ts_npz {
    ts_outfile out;
    ts_npz_member *members;
    int64_t count, cap;
    int64_t *slots;      /* open-addressing set of member indices + 1, to refuse duplicates */
    int64_t n_slots;
    uint16_t dos_time, dos_date;
    bool force_zip64;    /* write zip64 records even when small (for tests) */
} ts_npz;

ts_status ts_npz_open(ts_npz *z, const char *path);

/* Append t (any strides) as float32 member `name` + ".npy". Names must be
 * unique and non-empty. */
ts_status ts_npz_add(ts_npz *z, const char *name, const ts_tensor *t);

/* Write the central directory and rename into place. Frees z, also on error. */
ts_status ts_npz_close(ts_npz *z);

/* Give up: remove the temporary file. Frees z. */
void ts_npz_abort(ts_npz *z);

#endif
