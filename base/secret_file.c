/* Reading a secret given in a file: see secret_file.h. */
#include "secret_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SECRET_FILE_MAX 4096

int secret_read_file(const char *path, char **out, char *err, size_t errlen) {
    *out = NULL;
    /* O_NOFOLLOW is not used: a symlink to a good file is fine, and what is checked is
     * the file it names, through the descriptor that is read. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        snprintf(err, errlen, "token file %s cannot be opened: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "token file %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    const char *wrong = NULL;
    char why[160];
    if (!S_ISREG(st.st_mode)) wrong = "is not a regular file";
    else if (st.st_mode & 077) {
        snprintf(why, sizeof why, "has mode %04o: it may be %s by others (mode %03o): chmod 600 it, its owner's only",
                 (unsigned)(st.st_mode & 07777), st.st_mode & 044 ? "read" : "changed", (unsigned)(st.st_mode & 0777));
        wrong = why;
    } else if (st.st_uid != geteuid() && st.st_uid != 0) {
        snprintf(why, sizeof why, "belongs to uid %u, not to this user (uid %u) or root: chown it",
                 (unsigned)st.st_uid, (unsigned)geteuid());
        wrong = why;
    } else if (st.st_size > SECRET_FILE_MAX) {
        snprintf(why, sizeof why, "is %lld bytes: a token is one line of at most %d", (long long)st.st_size,
                 SECRET_FILE_MAX);
        wrong = why;
    }
    if (wrong) {
        snprintf(err, errlen, "token file %s %s", path, wrong);
        close(fd);
        return -1;
    }
    char *text = malloc(SECRET_FILE_MAX + 2);
    size_t len = 0;
    while (text && len <= SECRET_FILE_MAX) {
        ssize_t n = read(fd, text + len, SECRET_FILE_MAX + 1 - len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            snprintf(err, errlen, "token file %s cannot be read: %s", path, strerror(errno));
            free(text);
            close(fd);
            return -1;
        }
        if (n == 0) break;
        len += (size_t)n;
    }
    close(fd);
    if (!text) {
        snprintf(err, errlen, "token file %s: out of memory", path);
        return -1;
    }
    if (len > SECRET_FILE_MAX) {
        snprintf(err, errlen, "token file %s is over %d bytes: a token is one line", path, SECRET_FILE_MAX);
        free(text);
        return -1;
    }
    while (len && strchr(" \t\r\n", text[len - 1])) len--;
    text[len] = '\0';
    if (!len) {
        snprintf(err, errlen, "token file %s is empty: put the token in it (e.g. openssl rand -hex 16 > %s)", path, path);
        free(text);
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c <= 0x20 || c == 0x7f) {
            snprintf(err, errlen,
                     "token file %s has a space or control character inside the token (byte %zu): a token is one word",
                     path, i + 1);
            free(text);
            return -1;
        }
    }
    *out = text;
    return 0;
}
