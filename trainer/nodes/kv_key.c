/* What a rendezvous key may be (kv_store.h): the one rule every store and the
 * coordinator hold keys to. */
#include <string.h>

#include "kv_store.h"

int kv_key_ok(const char *key) {
    size_t n = key ? strlen(key) : 0;
    if (n < 1 || n > 200) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = key[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("._:/-", c)))
            return 0;
    }
    return 1;
}
