/* For the fuzz harnesses whose code under test reads files: the input bytes written
 * to a file of this process in /dev/shm (memory), its path returned. */
#ifndef DDPD_FUZZ_FUZZ_INPUT_FILE_H
#define DDPD_FUZZ_FUZZ_INPUT_FILE_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline const char *fuzz_input_file(const char *tag, const uint8_t *data, size_t n) {
    static char paths[4][128];
    static int next;
    char *path = paths[next++ % 4];
    snprintf(path, sizeof paths[0], "/dev/shm/ddpd-fuzz-%d-%s", (int)getpid(), tag);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) abort();
    while (n > 0) {
        ssize_t w = write(fd, data, n);
        if (w <= 0) abort();
        data += w;
        n -= (size_t)w;
    }
    close(fd);
    return path;
}

#endif
