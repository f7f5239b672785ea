/* A fresh temporary directory for one C test of the server (mkdtemp), its removal
 * with everything in it when the test is done, and reading a file of it whole. */
#ifndef DDPD_TESTS_SUPPORT_SCRATCH_DIR_H
#define DDPD_TESTS_SUPPORT_SCRATCH_DIR_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* "/tmp/ddpd-<what>-XXXXXX" made real; malloc'd, NULL when it cannot be made. */
static inline char *scratch_dir_make(const char *what) {
    const char *tmp = getenv("TMPDIR");
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/ddpd-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", what);
    if (!mkdtemp(tmpl)) return NULL;
    return strdup(tmpl);
}

static inline void scratch_dir_remove(const char *path) {
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            size_t len = strlen(path) + strlen(e->d_name) + 2;
            char *child = malloc(len);
            if (!child) break;
            snprintf(child, len, "%s/%s", path, e->d_name);
            struct stat st;
            if (lstat(child, &st) == 0 && S_ISDIR(st.st_mode)) scratch_dir_remove(child);
            else unlink(child);
            free(child);
        }
        closedir(d);
    }
    rmdir(path);
}

/* The whole file as a NUL-terminated string (malloc'd), or NULL when it cannot be read. */
static inline char *scratch_read_file(const char *path) {
    FILE *f = fopen(path, "re");
    if (!f) return NULL;
    size_t len = 0, cap = 4096;
    char *data = malloc(cap);
    size_t n;
    while (data && (n = fread(data + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len - 1 == 0) data = realloc(data, cap *= 2);
    }
    fclose(f);
    if (data) data[len] = '\0';
    return data;
}

#endif
