/* The calls every rendezvous store goes through (kv_store.h): the key is held to the
 * rendezvous' rule here, once, before the store sees it. */
#include "kv_store.h"

#include <stdio.h>
#include <string.h>

#include "rendezvous_rules.h"

static int key_refused(const char *key, char *err, size_t errlen) {
    if (key && rendezvous_key_ok(key, strlen(key))) return 0;
    snprintf(err, errlen, "rendezvous key \"%.60s\" is not a valid key (1 to %d characters of A-Z a-z 0-9 . _ : / -)",
             key ? key : "", RENDEZVOUS_KEY_MAX);
    return 1;
}

int kv_put(kv_store *s, const char *key, const void *data, size_t len, char *err, size_t errlen) {
    return key_refused(key, err, errlen) ? -1 : s->put(s, key, data, len, err, errlen);
}

int kv_get(kv_store *s, const char *key, int timeout_ms, void **data, size_t *len, char *err, size_t errlen) {
    return key_refused(key, err, errlen) ? -1 : s->get(s, key, timeout_ms, data, len, err, errlen);
}
