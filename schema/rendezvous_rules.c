/* The rendezvous' keys and values: see rendezvous_rules.h. */
#include "rendezvous_rules.h"

#include <string.h>

bool rendezvous_key_ok(const char *key, size_t len) {
    if (!key || len < 1 || len > RENDEZVOUS_KEY_MAX) return false;
    for (size_t i = 0; i < len; i++) {
        char c = key[i];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  (c != '\0' && strchr("._:/-", c) != NULL);
        if (!ok) return false;
    }
    return true;
}

bool rendezvous_value_ok(const char *value, size_t len) {
    if (!value || len % 2 != 0 || len > RENDEZVOUS_VALUE_MAX) return false;
    for (size_t i = 0; i < len; i++)
        if (!((value[i] >= '0' && value[i] <= '9') || (value[i] >= 'a' && value[i] <= 'f'))) return false;
    return true;
}
