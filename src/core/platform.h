/* platform: the calls that differ between operating systems, kept here so
 * that the rest of src/ is plain POSIX. Each has a Linux path, a macOS path
 * where macOS has its own, and a POSIX path that does without. Private to
 * src/ (no public header: nothing here is part of tscope's interface). */
#ifndef TSCOPE_CORE_PLATFORM_H
#define TSCOPE_CORE_PLATFORM_H

#include <stdbool.h>
#include <stddef.h>

/* The path of the running binary in buf (cap bytes); false where the system
 * cannot tell (plain POSIX has no call for it) or it does not fit. */
bool ts_platform_self_exe(char *buf, size_t cap);

/* Writes to fd bypass the page cache (on) or go through it again (off):
 * O_DIRECT on Linux (writes must then be aligned), F_NOCACHE on macOS; false
 * where the system or the file system has no such mode. */
bool ts_platform_uncached_writes(int fd, bool on);

/* Processors online, at least 1. */
int ts_platform_cpus(void);

#endif
