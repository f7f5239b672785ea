/* A small generic JSON Schema (2020-12 subset) validator over Jansson. It interprets
 * the schema at run time, fills `default`s into the instance, and reports every
 * violation with its JSON pointer and a sentence a person can act on. */
#ifndef DDPD_SCHEMA_VALIDATOR_H
#define DDPD_SCHEMA_VALIDATOR_H

#include <jansson.h>
#include <stddef.h>

typedef struct {
    char *pointer; /* JSON pointer to the offending value ("" = the document) */
    char *message; /* a sentence: "must be at least 1 (got 0)" */
} schema_error;

/* At most this many violations are kept with their pointer and message; the rest are
 * only counted, so that a document with a million bad items costs a counter, not a
 * million messages (and a reply of megabytes). */
#define SCHEMA_ERRORS_KEPT 100

typedef struct {
    schema_error *items;
    size_t count, cap; /* count: those kept in items, at most SCHEMA_ERRORS_KEPT */
    size_t dropped;    /* violations beyond those, counted only */
} schema_errors;

/* Validates `instance` against `schema`, filling defaults into `instance` in place.
 * Appends violations to `errs`; returns how many it found (kept or only counted). */
int schema_validate(const json_t *schema, json_t *instance, schema_errors *errs);

void schema_errors_add(schema_errors *errs, const char *pointer, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void schema_errors_free(schema_errors *errs);
/* Every violation reported: those kept plus those only counted. */
size_t schema_errors_total(const schema_errors *errs);
/* "pointer: message" lines, one per error kept, and a last line saying how many more
 * there were when some were only counted, into a malloc'd string. */
char *schema_errors_format(const schema_errors *errs);
/* [{"pointer": ..., "message": ...}, ...]: the errors kept */
json_t *schema_errors_to_json(const schema_errors *errs);

#endif
