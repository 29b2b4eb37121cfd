/* status: how every library call reports failure.
 *
 * A call returns a ts_status; on failure it also leaves a sentence for a human
 * in a thread-local buffer (ts_last_error). Only the CLI turns that into an exit.
 */
#ifndef TSCOPE_STATUS_H
#define TSCOPE_STATUS_H

typedef enum ts_status {
    TS_OK = 0,
    TS_ERR_ARG,         /* a bad argument or flag value */
    TS_ERR_SHAPE,       /* shapes that cannot work together */
    TS_ERR_IO,          /* a file could not be opened, read or written */
    TS_ERR_FORMAT,      /* a file is not what it claims to be */
    TS_ERR_NOMEM,       /* an allocation or an arena ran out */
    TS_ERR_UNSUPPORTED, /* valid, but not something tscope does */
    TS_STATUS_COUNT
} ts_status;

/* Set the message for the current thread and return s, so a caller can write
 * `return ts_fail(TS_ERR_SHAPE, "cannot reshape %s", ...)`. */
ts_status ts_fail(ts_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The message of the last failure on this thread ("" when there was none). */
const char *ts_last_error(void);

/* Forget the last message. */
void ts_clear_error(void);

/* A short name for a status: "shape error", "i/o error", ... */
const char *ts_status_str(ts_status s);

#endif
