/* Reading ddpctl's token from a file: see token_file.h. */
#include "token_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

char *token_file_read(const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot read the token file %s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && (sb.st_mode & 077)) {
        snprintf(err, errlen, "the token file %s may be read by others (mode %03o): chmod 600 %s", path,
                 (unsigned)(sb.st_mode & 0777), path);
        fclose(f);
        return NULL;
    }
    char line[1024];
    char *got = fgets(line, sizeof line, f);
    fclose(f);
    size_t n = got ? strcspn(line, "\r\n") : 0;
    while (n && (line[n - 1] == ' ' || line[n - 1] == '\t')) n--;
    if (!n) {
        snprintf(err, errlen, "the token file %s is empty: put the token on its first line", path);
        return NULL;
    }
    line[n] = '\0';
    return strdup(line);
}
