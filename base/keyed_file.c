/* A number read from a flat-keyed file (keyed_file.h). */
#include "keyed_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long keyed_file_value(const char *path, const char *key) {
    FILE *f = fopen(path, "re");
    if (!f) return -1;
    char line[256];
    long v = -1;
    size_t k = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, k) == 0 && line[k] == ' ') {
            v = strtol(line + k + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}
