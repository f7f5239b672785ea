/* A rendezvous in a directory (kv_store.h), for tests and benchmarks whose "hosts"
 * share one filesystem: key K is the file K (its '/' written as '~', which no key
 * holds), written whole under a temporary name and renamed, so a reader sees all
 * of it or nothing; a reader polls every 5 ms. */
#include "kv_store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define POLL_MS 5

typedef struct {
    kv_store pub;
    char *dir;
} dir_kv;

static void path_of(const dir_kv *k, const char *key, char *out, size_t n) {
    int used = snprintf(out, n, "%s/", k->dir);
    for (size_t i = 0; key[i] && (size_t)used + i + 1 < n; i++) {
        out[used + (int)i] = key[i] == '/' ? '~' : key[i];
        out[used + (int)i + 1] = '\0';
    }
}

static int dir_put(kv_store *s, const char *key, const void *data, size_t len, char *err, size_t errlen) {
    dir_kv *k = (dir_kv *)s;
    char path[4096], tmp[4200];
    path_of(k, key, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    int ok = f && fwrite(data, 1, len, f) == len;
    if (f && fclose(f) != 0) ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        snprintf(err, errlen, "cannot write rendezvous key %s in %s: %s", key, k->dir, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

static int dir_get(kv_store *s, const char *key, int timeout_ms, void **data, size_t *len, char *err, size_t errlen) {
    dir_kv *k = (dir_kv *)s;
    char path[4096];
    path_of(k, key, path, sizeof path);
    for (int waited = 0;; waited += POLL_MS) {
        FILE *f = fopen(path, "rb");
        if (f) {
            struct stat st;
            unsigned char *buf = fstat(fileno(f), &st) == 0 ? malloc((size_t)st.st_size + 1) : NULL;
            size_t got = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
            fclose(f);
            if (!buf || got != (size_t)st.st_size) {
                free(buf);
                snprintf(err, errlen, "cannot read rendezvous key %s in %s", key, k->dir);
                return -1;
            }
            *data = buf;
            *len = got;
            return 0;
        }
        if (waited >= timeout_ms) {
            snprintf(err, errlen, "rendezvous key %s was not in %s after %.1f s", key, k->dir, timeout_ms / 1000.0);
            return -1;
        }
        struct timespec ts = {0, POLL_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static void dir_close(kv_store *s) {
    dir_kv *k = (dir_kv *)s;
    if (!k) return;
    free(k->dir);
    free(k);
}

kv_store *kv_dir_open(const char *dir, char *err, size_t errlen) {
    struct stat st;
    if (!dir || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "the rendezvous directory %s is not a directory", dir ? dir : "(none)");
        return NULL;
    }
    dir_kv *k = calloc(1, sizeof *k);
    if (!k || !(k->dir = strdup(dir))) {
        free(k);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    k->pub.put = dir_put;
    k->pub.get = dir_get;
    k->pub.close = dir_close;
    return &k->pub;
}
