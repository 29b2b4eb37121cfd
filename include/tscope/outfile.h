/* outfile: write a file under a temporary name, then rename it into place.
 *
 * A reader never sees half a checkpoint or half an archive: bytes go to
 * "PATH.XXXXXX" in the same directory, and only ts_outfile_commit (flush,
 * fsync, rename) makes them appear as PATH. Errors are sticky: after the first
 * failed write every later call returns the same status, so a writer can check
 * once at the end. Every message names PATH, not the temporary name.
 */
#ifndef TSCOPE_OUTFILE_H
#define TSCOPE_OUTFILE_H

#include <stdint.h>
#include <stdio.h>

#include "tscope/status.h"
#include "tscope/tensor.h"

typedef struct ts_outfile {
    FILE *fp;        /* the temporary file; NULL once committed or aborted */
    char *path;      /* final name (owned) */
    char *tmp_path;  /* temporary name (owned) */
    uint64_t offset; /* bytes written so far = where the next write lands */
    ts_status status; /* first failure, TS_OK while all is well */
    char error[512];  /* its message, replayed by later calls */
} ts_outfile;

/* Create the temporary file next to path. */
ts_status ts_outfile_open(ts_outfile *o, const char *path);

/* Append n bytes. */
ts_status ts_outfile_write(ts_outfile *o, const void *buf, size_t n);

/* Append t's elements as little-endian float32 in row-major order of its
 * shape (t may be a strided view). */
ts_status ts_outfile_write_tensor(ts_outfile *o, const ts_tensor *t);

/* Flush, fsync, close and rename to the final name. On any failure (now or
 * earlier) the temporary file is removed and the error returned. Frees o. */
ts_status ts_outfile_commit(ts_outfile *o);

/* Close and remove the temporary file; nothing appears at path. Frees o.
 * Safe on a zeroed, committed or already aborted outfile. */
void ts_outfile_abort(ts_outfile *o);

#endif
