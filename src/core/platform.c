/* platform: the operating system's own calls (see platform.h). */
#if defined(__linux__)
#define _GNU_SOURCE /* O_DIRECT */
#endif
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#if defined(__APPLE__)
#include <mach-o/dyld.h>
#endif

#include "core/platform.h"

bool ts_platform_self_exe(char *buf, size_t cap) {
    if (cap < 2) return false;
#if defined(__linux__)
    ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
    if (n <= 0 || (size_t)n >= cap - 1) return false;
    buf[n] = '\0';
    return true;
#elif defined(__APPLE__)
    uint32_t size = cap > UINT32_MAX ? UINT32_MAX : (uint32_t)cap;
    return _NSGetExecutablePath(buf, &size) == 0;
#else
    (void)buf;
    return false;
#endif
}

bool ts_platform_uncached_writes(int fd, bool on) {
#if defined(__linux__) && defined(O_DIRECT)
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0) return false;
    return fcntl(fd, F_SETFL, on ? flags | O_DIRECT : flags & ~O_DIRECT) == 0;
#elif defined(__APPLE__)
    return fcntl(fd, F_NOCACHE, on ? 1 : 0) != -1;
#else
    (void)fd, (void)on;
    return false;
#endif
}

int ts_platform_cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 4096 ? 4096 : (int)n;
}
