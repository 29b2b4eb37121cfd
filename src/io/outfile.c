/* outfile: files written under a temporary name and renamed into place. */
#include "tscope/io.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tscope writes float32 files by copying memory: it needs a little-endian host"
#endif

/* Record the first failure and replay it on every later call. */
static ts_status replay(ts_outfile *o) {
    if (o->err.status) return ts_sticky_replay(&o->err);
    if (!o->fp) return ts_fail(TS_ERR_ARG, "%s: the file is already closed", o->path ? o->path : "?");
    return TS_OK;
}

static void release(ts_outfile *o) {
    free(o->path);
    free(o->tmp_path);
    o->path = o->tmp_path = NULL;
    o->fp = NULL;
}

ts_status ts_outfile_open(ts_outfile *o, const char *path) {
    memset(o, 0, sizeof *o);
    size_t len = strlen(path);
    if (len == 0) return ts_fail(TS_ERR_ARG, "an output file name is empty");
    o->path = strdup(path);
    o->tmp_path = malloc(len + 8);
    if (!o->path || !o->tmp_path) {
        release(o);
        return ts_fail(TS_ERR_NOMEM, "%s: out of memory", path);
    }
    memcpy(o->tmp_path, path, len);
    memcpy(o->tmp_path + len, ".XXXXXX", 8);
    int fd = mkstemp(o->tmp_path);
    if (fd < 0) {
        ts_status st = ts_fail(TS_ERR_IO, "cannot create %s: %s", path, strerror(errno));
        release(o);
        return st;
    }
    /* mkstemp makes 0600; give the file the mode a plain fopen would. */
    mode_t mask = umask(0);
    umask(mask);
    (void)fchmod(fd, 0666 & ~mask);
    o->fp = fdopen(fd, "wb");
    if (!o->fp) {
        ts_status st = ts_fail(TS_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        close(fd);
        unlink(o->tmp_path);
        release(o);
        return st;
    }
    return TS_OK;
}

ts_status ts_outfile_write(ts_outfile *o, const void *buf, size_t n) {
    ts_status st = replay(o);
    if (st) return st;
    if (n && fwrite(buf, 1, n, o->fp) != n)
        return ts_sticky_fail(&o->err, TS_ERR_IO, "cannot write %s: %s", o->path, strerror(errno));
    o->offset += n;
    return TS_OK;
}

static ts_status write_run(void *ctx, const float *run, int64_t n) {
    return ts_outfile_write(ctx, run, (size_t)n * sizeof(float));
}

ts_status ts_outfile_write_tensor(ts_outfile *o, const ts_tensor *t) {
    if (ts_tensor_numel(t) == 0) return replay(o);
    return ts_tensor_each_run(t, write_run, o);
}

ts_status ts_outfile_commit(ts_outfile *o) {
    ts_status st = replay(o);
    if (st == TS_OK && (fflush(o->fp) != 0 || fsync(fileno(o->fp)) != 0))
        st = ts_sticky_fail(&o->err, TS_ERR_IO, "cannot write %s: %s", o->path, strerror(errno));
    if (o->fp && fclose(o->fp) != 0 && st == TS_OK)
        st = ts_sticky_fail(&o->err, TS_ERR_IO, "cannot write %s: %s", o->path, strerror(errno));
    o->fp = NULL;
    if (st == TS_OK && rename(o->tmp_path, o->path) != 0)
        st = ts_sticky_fail(&o->err, TS_ERR_IO, "cannot rename %s to %s: %s", o->tmp_path, o->path,
                         strerror(errno));
    if (st && o->tmp_path) unlink(o->tmp_path);
    release(o);
    return st;
}

void ts_outfile_abort(ts_outfile *o) {
    if (o->fp) {
        fclose(o->fp);
        if (o->tmp_path) unlink(o->tmp_path);
    }
    release(o);
}

ts_status ts_mkdir_p(const char *dir) {
    char buf[4096];
    if (!dir[0]) return ts_fail(TS_ERR_ARG, "an empty folder name");
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) return ts_fail(TS_ERR_ARG, "path too long: %s", dir);
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char c = *p;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) return ts_fail(TS_ERR_IO, "cannot create %s: %s", buf, strerror(errno));
        *p = c;
        if (c == '\0') break;
    }
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) return ts_fail(TS_ERR_IO, "%s is not a directory", dir);
    return TS_OK;
}
