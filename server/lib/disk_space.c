/* Room left on a file system: see disk_space.h. */
#include "disk_space.h"

#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

bool disk_space_low(const char *path, unsigned long long *avail) {
    struct statvfs vfs;
    if (statvfs(path, &vfs) != 0) return false;
    unsigned long long blocks = geteuid() == 0 ? vfs.f_bfree : vfs.f_bavail;
    unsigned long long left = blocks * (unsigned long long)(vfs.f_frsize ? vfs.f_frsize : vfs.f_bsize);
    if (avail) *avail = left;
    return left < DISK_SPACE_LOW_BYTES;
}

bool disk_space_explain(const char *file, char *out, size_t len) {
    char dir[4096];
    const char *slash = strrchr(file, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == file) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - file), file);
    unsigned long long avail = 0;
    if (!disk_space_low(dir, &avail)) return false;
    snprintf(out, len, "no space left on %s (%llu bytes free)", dir, avail);
    return true;
}
