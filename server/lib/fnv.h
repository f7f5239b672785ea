/* FNV-1a: a fast hash of bytes for tags and in-memory tables, never for secrets (a
 * token's hash is sha256.h's). */
#ifndef DDPD_SERVER_LIB_FNV_H
#define DDPD_SERVER_LIB_FNV_H

#include <stddef.h>
#include <stdint.h>

/* Of data[0..len), 64 bits. */
uint64_t fnv1a64(const void *data, size_t len);
/* Of a text up to its NUL (NULL: of ""), 32 bits. */
uint32_t fnv1a32_text(const char *text);

#endif
