/* Run ids: see ids.h. */
#include "ids.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

bool parse_run_id(const char *text, int64_t *out) {
    /* one spelling per id: "01" is not run 1 */
    if (!text || !isdigit((unsigned char)text[0]) || text[0] == '0') return false;
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (*end || errno || v <= 0) return false;
    *out = v;
    return true;
}
