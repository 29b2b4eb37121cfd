/* status: the last error's sentence, per thread, and errors kept to replay. */
#include "tscope/core.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_message[4096]; /* room for a lesson's list of problems */

static const char *const status_names[] = {
    [TS_OK] = "ok",
    [TS_ERR_ARG] = "bad argument",
    [TS_ERR_SHAPE] = "shape error",
    [TS_ERR_IO] = "i/o error",
    [TS_ERR_FORMAT] = "format error",
    [TS_ERR_NOMEM] = "out of memory",
    [TS_ERR_UNSUPPORTED] = "unsupported",
};
_Static_assert(sizeof status_names / sizeof status_names[0] == TS_STATUS_COUNT,
               "every status needs a name");

ts_status ts_fail(ts_status s, const char *fmt, ...) {
    /* formatted aside first: a caller may pass ts_last_error() itself, to put
     * a prefix before the message (writing in place would garble it) */
    char msg[sizeof last_message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(last_message, msg, sizeof msg);
    return s;
}

const char *ts_last_error(void) { return last_message; }

void ts_clear_error(void) { last_message[0] = '\0'; }

const char *ts_status_str(ts_status s) {
    if ((unsigned)s >= TS_STATUS_COUNT) return "unknown status";
    return status_names[s];
}

ts_status ts_sticky_fail(ts_sticky *e, ts_status s, const char *fmt, ...) {
    if (e->status == TS_OK) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->message, sizeof e->message, fmt, ap);
        va_end(ap);
        e->status = s;
    }
    return ts_sticky_replay(e);
}

ts_status ts_sticky_replay(const ts_sticky *e) {
    return e->status ? ts_fail(e->status, "%s", e->message) : TS_OK;
}
