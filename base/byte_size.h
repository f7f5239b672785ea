/* Sizes in bytes as people write and read them: "100M", "1GiB", "4096" parsed (the
 * log's --log-max-bytes, a run's log cap), and a count of bytes said back ("1.5 GiB",
 * "312 MiB"), for every program's messages. */
#ifndef DDPD_BASE_BYTE_SIZE_H
#define DDPD_BASE_BYTE_SIZE_H

#include <stddef.h>
#include <stdint.h>

/* A whole number of bytes, with an optional K, M or G suffix (powers of 1024; "Ki",
 * "KiB", "KB" alike). 0, or -1 when it is none (negative, empty, another suffix, too
 * large). */
int byte_size_parse(const char *s, uint64_t *out);

/* "12 bytes", "4 KiB", "312 MiB", "1.5 GiB" (three significant digits at most) into
 * out; returns out. */
char *byte_size_format(uint64_t bytes, char *out, size_t outlen);

#endif
