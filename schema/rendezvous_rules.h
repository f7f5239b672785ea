/* What a run's rendezvous holds (the contract of POST/GET /runs/{id}/rendezvous):
 * which keys and values there may be. The coordinator refuses anything else, and
 * the trainer's stores (trainer/nodes/kv_store.h) hold their keys to the same rule. */
#ifndef DDPD_SCHEMA_RENDEZVOUS_RULES_H
#define DDPD_SCHEMA_RENDEZVOUS_RULES_H

#include <stdbool.h>
#include <stddef.h>

#define RENDEZVOUS_KEY_MAX 200      /* characters of a key */
#define RENDEZVOUS_VALUE_MAX 131072 /* hex digits of a value: 64 KiB of bytes */

/* A key: 1 to RENDEZVOUS_KEY_MAX characters from A-Z a-z 0-9 . _ : / - */
bool rendezvous_key_ok(const char *key, size_t len);
/* A value: lowercase hex digits, an even number of them (whole bytes), at most
 * RENDEZVOUS_VALUE_MAX. */
bool rendezvous_value_ok(const char *value, size_t len);

#endif
