/* A small generic JSON Schema (2020-12 subset) validator over Jansson. It interprets
 * the schema at run time, fills `default`s into the instance, and reports every
 * violation with its JSON pointer and a sentence a person can act on. */
#ifndef DDPD_VALIDATOR_H
#define DDPD_VALIDATOR_H

#include <jansson.h>
#include <stddef.h>

typedef struct {
    char *pointer; /* JSON pointer to the offending value ("" = the document) */
    char *message; /* a sentence: "must be at least 1 (got 0)" */
} schema_error;

typedef struct {
    schema_error *items;
    size_t count, cap;
} schema_errors;

/* Validates `instance` against `schema`, filling defaults into `instance` in place.
 * Appends violations to `errs`; returns how many it appended. */
int schema_validate(const json_t *schema, json_t *instance, schema_errors *errs);

void schema_errors_add(schema_errors *errs, const char *pointer, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void schema_errors_free(schema_errors *errs);
/* "pointer: message" lines, one per error, into a malloc'd string. */
char *schema_errors_format(const schema_errors *errs);
/* [{"pointer": ..., "message": ...}, ...] */
json_t *schema_errors_to_json(const schema_errors *errs);

#endif
