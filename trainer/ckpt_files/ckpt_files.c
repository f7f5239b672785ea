/* A run's checkpoint files: see ckpt_files.h. */
#include "ckpt_files.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paths.h"

bool ckpt_is_file_name(const char *name) {
    size_t n = strlen(name), p = strlen(CKPT_PREFIX), s = strlen(CKPT_SUFFIX);
    return n > p + s && strncmp(name, CKPT_PREFIX, p) == 0 && strcmp(name + n - s, CKPT_SUFFIX) == 0;
}

int ckpt_newest_in(const char *dir, char *path, size_t len) {
    struct dirent **list;
    int n = scandir(dir, &list, NULL, alphasort);
    if (n < 0) return -1;
    int rc = 1;
    for (int i = n - 1; i >= 0; i--) { /* newest first */
        if (rc == 1 && ckpt_is_file_name(list[i]->d_name)) {
            rc = path_join(path, len, dir, list[i]->d_name);
            if (rc < 0) errno = ENAMETOOLONG;
        }
        free(list[i]);
    }
    free(list);
    return rc;
}
