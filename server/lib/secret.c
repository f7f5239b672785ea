/* Random secrets and their constant-time comparison: see secret.h. */
#include "secret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define SECRET_FILE_MAX 4096

int random_hex(char *out, size_t nbytes) {
    unsigned char raw[64];
    if (nbytes > sizeof raw) return -1;
    size_t got = 0;
    while (got < nbytes) {
        ssize_t n = getrandom(raw + got, nbytes - got, 0);
        if (n < 0) return -1;
        got += (size_t)n;
    }
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < nbytes; i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 15];
    }
    out[2 * nbytes] = '\0';
    return 0;
}

bool secret_equal(const char *given, const char *held) {
    if (!given || !held) return false;
    size_t lg = strlen(given), lh = strlen(held);
    volatile unsigned char diff = lg != lh;
    for (size_t i = 0; i < lh; i++) {
        unsigned char g = i < lg ? (unsigned char)given[i] : 0;
        diff |= (unsigned char)(g ^ (unsigned char)held[i]);
    }
    return diff == 0 && lh > 0;
}

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
        snprintf(why, sizeof why,
                 "has mode %04o: group or others may read or write it; make it its owner's only (chmod 600 it)",
                 (unsigned)(st.st_mode & 07777));
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
