/* The sweep's schema, embedded at build time and parsed once: see sweep_schema.h. */
#include "sweep_schema.h"

#include <pthread.h>

/* Generated from sweep.schema.json by cmake/embed.cmake. */
extern const char sweep_schema_json[];
extern const unsigned long sweep_schema_json_len;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static json_t *document;

static void parse_embedded(void) { document = json_loadb(sweep_schema_json, sweep_schema_json_len, JSON_REJECT_DUPLICATES, NULL); }

const json_t *sweep_schema(void) {
    pthread_once(&once, parse_embedded);
    return document;
}

const char *sweep_schema_text(void) { return sweep_schema_json; }
