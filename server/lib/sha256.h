/* SHA-256 (FIPS 180-4), for what ddpd keeps of a user's token: its hash, never the
 * token (a database copied off the host gives nobody a working token). A token is 256
 * random bits, so one unsalted hash is enough: nothing can be guessed from it. */
#ifndef DDPD_SERVER_LIB_SHA256_H
#define DDPD_SERVER_LIB_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_HEX_LEN 64

/* The digest of data[0..len) into out[32]. */
void sha256(const void *data, size_t len, uint8_t out[32]);
/* Its 64 lowercase hex digits and a NUL into hex. */
void sha256_hex(const char *text, char hex[SHA256_HEX_LEN + 1]);

#endif
