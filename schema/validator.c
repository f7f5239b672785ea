/* validator.c - a generic interpreter for the subset of JSON Schema 2020-12 that ddpd's
 * contracts use, so that the schema file stays the single source of truth: nothing
 * here knows about run configs.
 *
 * What it understands:
 *   type (a name or a list; "integer" also accepts a real with an integral value and
 *   rewrites it in place to an integer), enum, const, minimum, maximum,
 *   exclusiveMinimum, exclusiveMaximum, multipleOf, minLength, maxLength (counted in
 *   code points), pattern, properties, patternProperties, additionalProperties,
 *   required, minProperties, maxProperties, prefixItems, items, minItems, maxItems,
 *   uniqueItems, $ref (local only: "#" or "#/..."), allOf, anyOf, oneOf, not,
 *   if/then/else, boolean schemas, and default (filled into an object when a property
 *   is absent, deep-copied, and then validated like any other value, so that defaults
 *   nested inside a default object fill too).
 *
 * Differences from the standard, on purpose:
 *   - "pattern" is a POSIX extended regular expression (regex.h), not ECMA-262. Write
 *     patterns in the common subset (anchors, bracket expressions, +, *, ?, {m,n},
 *     alternation); \d, \w and lookarounds do not work.
 *   - A value of the wrong type gets one error (its type) and nothing else is checked
 *     at that point, so that a person sees the message that matters.
 *   - An integral real outside the 64-bit integer range (1e20) is an integer, as the
 *     standard says, but one no reader can hold: it is refused, by the schema's bound
 *     when one rejects it ("must be at most ..."), else as out of the 64-bit range.
 *   - A string containing U+0000 (a document parsed with JSON_ALLOW_NUL) is refused.
 *   - $ref fragments are JSON pointers without percent-decoding; remote refs are not
 *     fetched.
 * Annotation keywords (title, description, $schema, $id, examples, ...) and unknown
 * keywords are ignored.
 *
 * Every violation is reported, each at the JSON pointer (RFC 6901) of the value at
 * fault with a sentence a person can act on; beyond the first SCHEMA_ERRORS_KEPT they
 * are only counted. The schema is only read, never changed,
 * so one parsed schema can serve many threads at once. */
#include "validator.h"

#include <math.h>
#include <regex.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Deeper than any sane document; stops $ref cycles in a broken schema. */
#define MAX_DEPTH 200
/* Values quoted in messages are cut to about this many bytes. */
#define QUOTE_MAX 60

/* ---------------------------------------------------------------------------------
 * A growable string, for messages and for the pointer of the value being checked. */

typedef struct {
    char *s;
    size_t len, cap;
} text;

static void out_of_memory(void) {
    fputs("ddpd: out of memory while validating\n", stderr);
    abort();
}

static void text_append_bytes(text *t, const char *bytes, size_t n) {
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 64;
        while (cap < t->len + n + 1) cap *= 2;
        char *s = realloc(t->s, cap);
        if (!s) out_of_memory();
        t->s = s;
        t->cap = cap;
    }
    memcpy(t->s + t->len, bytes, n);
    t->len += n;
    t->s[t->len] = '\0';
}

static void text_append(text *t, const char *s) { text_append_bytes(t, s, strlen(s)); }

static void text_appendf(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void text_appendf(text *t, const char *fmt, ...) {
    char *s;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0) out_of_memory();
    text_append_bytes(t, s, (size_t)n);
    free(s);
}

static void text_truncate(text *t, size_t len) {
    t->len = len;
    if (t->s) t->s[len] = '\0';
}

/* Returns the string (never NULL) and leaves `t` empty; the caller frees it. */
static char *text_take(text *t) {
    if (!t->s) text_append(t, "");
    char *s = t->s;
    *t = (text){0};
    return s;
}

/* ---------------------------------------------------------------------------------
 * The error list. */

void schema_errors_add(schema_errors *errs, const char *pointer, const char *fmt, ...) {
    if (errs->count >= SCHEMA_ERRORS_KEPT) {
        errs->dropped++;
        return;
    }
    if (errs->count == errs->cap) {
        size_t cap = errs->cap ? errs->cap * 2 : 8;
        schema_error *items = realloc(errs->items, cap * sizeof *items);
        if (!items) out_of_memory();
        errs->items = items;
        errs->cap = cap;
    }
    char *message;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&message, fmt, ap);
    va_end(ap);
    char *pointer_copy = strdup(pointer ? pointer : "");
    if (n < 0 || !pointer_copy) out_of_memory();
    errs->items[errs->count++] = (schema_error){.pointer = pointer_copy, .message = message};
}

void schema_errors_free(schema_errors *errs) {
    for (size_t i = 0; i < errs->count; i++) {
        free(errs->items[i].pointer);
        free(errs->items[i].message);
    }
    free(errs->items);
    *errs = (schema_errors){0};
}

size_t schema_errors_total(const schema_errors *errs) { return errs->count + errs->dropped; }

/* One error per line, "pointer: message" (just the message when the pointer is the
 * whole document, ""); lines are joined with '\n', with none after the last. */
char *schema_errors_format(const schema_errors *errs) {
    text t = {0};
    for (size_t i = 0; i < errs->count; i++) {
        if (i) text_append(&t, "\n");
        if (errs->items[i].pointer[0]) text_appendf(&t, "%s: ", errs->items[i].pointer);
        text_append(&t, errs->items[i].message);
    }
    if (errs->dropped)
        text_appendf(&t, "\n(and %zu more: %zu violations in all, the first %zu listed)", errs->dropped,
                     schema_errors_total(errs), errs->count);
    return text_take(&t);
}

/* A JSON string even from bytes that are not UTF-8 (a file name can be anything):
 * those bytes become '?'. */
static json_t *json_text(const char *s) {
    json_t *value = json_string(s);
    if (value) return value;
    char *ascii = strdup(s);
    if (!ascii) out_of_memory();
    for (char *c = ascii; *c; c++)
        if ((unsigned char)*c >= 0x80) *c = '?';
    value = json_string(ascii);
    free(ascii);
    return value;
}

json_t *schema_errors_to_json(const schema_errors *errs) {
    json_t *list = json_array();
    for (size_t i = 0; i < errs->count; i++) {
        json_t *error = json_object();
        json_object_set_new(error, "pointer", json_text(errs->items[i].pointer));
        json_object_set_new(error, "message", json_text(errs->items[i].message));
        json_array_append_new(list, error);
    }
    return list;
}

/* ---------------------------------------------------------------------------------
 * Numbers and values, as a person reads them in a message. */

static void format_double(double d, char *buf, size_t size) {
    snprintf(buf, size, "%.15g", d);
    if (strtod(buf, NULL) != d) snprintf(buf, size, "%.17g", d);
}

static void format_number(const json_t *number, char *buf, size_t size) {
    if (json_is_integer(number))
        snprintf(buf, size, "%" JSON_INTEGER_FORMAT, json_integer_value(number));
    else
        format_double(json_real_value(number), buf, size);
}

static void append_quoted(text *t, const char *s, size_t len) {
    text_append(t, "\"");
    size_t shown = len > QUOTE_MAX ? QUOTE_MAX : len;
    while (shown < len && ((unsigned char)s[shown] & 0xC0) == 0x80) shown--; /* whole code points */
    for (size_t i = 0; i < shown; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') text_appendf(t, "\\%c", c);
        else if (c == '\n') text_append(t, "\\n");
        else if (c == '\t') text_append(t, "\\t");
        else if (c < 0x20) text_appendf(t, "\\u%04x", c);
        else text_append_bytes(t, (const char *)&c, 1);
    }
    text_append(t, shown < len ? "...\"" : "\"");
}

/* Compact JSON, strings quoted, containers cut short when long. */
static void append_value(text *t, const json_t *value) {
    char num[40];
    size_t start = t->len, i;
    const char *key;
    json_t *member;
    switch (json_typeof(value)) {
    case JSON_STRING: append_quoted(t, json_string_value(value), json_string_length(value)); return;
    case JSON_INTEGER:
    case JSON_REAL: format_number(value, num, sizeof num); text_append(t, num); return;
    case JSON_TRUE: text_append(t, "true"); return;
    case JSON_FALSE: text_append(t, "false"); return;
    case JSON_NULL: text_append(t, "null"); return;
    case JSON_ARRAY:
        text_append(t, "[");
        json_array_foreach((json_t *)value, i, member) {
            if (t->len - start > QUOTE_MAX) { text_append(t, ", ..."); break; }
            if (i) text_append(t, ", ");
            append_value(t, member);
        }
        text_append(t, "]");
        return;
    case JSON_OBJECT:
        text_append(t, "{");
        i = 0;
        json_object_foreach((json_t *)value, key, member) {
            if (t->len - start > QUOTE_MAX) { text_append(t, ", ..."); break; }
            if (i++) text_append(t, ", ");
            append_quoted(t, key, strlen(key));
            text_append(t, ": ");
            append_value(t, member);
        }
        text_append(t, "}");
        return;
    }
}

/* "string \"x\"", "number 1.5", "boolean true", "null", "an array", "an object" */
static void append_kind_and_value(text *t, const json_t *value) {
    if (json_is_array(value)) text_append(t, "an array");
    else if (json_is_object(value)) text_append(t, "an object");
    else if (json_is_null(value)) text_append(t, "null");
    else {
        text_append(t, json_is_string(value) ? "string " : json_is_boolean(value) ? "boolean " : "number ");
        append_value(t, value);
    }
}

/* ---------------------------------------------------------------------------------
 * Equality as JSON Schema defines it: numbers by value (1 equals 1.0), objects
 * regardless of member order. */

static int compare_numbers(const json_t *a, const json_t *b) {
    if (json_is_integer(a) && json_is_integer(b)) {
        json_int_t x = json_integer_value(a), y = json_integer_value(b);
        return (x > y) - (x < y);
    }
    double x = json_number_value(a), y = json_number_value(b);
    return (x > y) - (x < y);
}

static bool values_equal(const json_t *a, const json_t *b) {
    if (json_is_number(a) && json_is_number(b)) return compare_numbers(a, b) == 0;
    if (json_typeof(a) != json_typeof(b)) return false;
    size_t i;
    const char *key;
    json_t *member;
    switch (json_typeof(a)) {
    case JSON_STRING:
        return json_string_length(a) == json_string_length(b) &&
               memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) == 0;
    case JSON_ARRAY:
        if (json_array_size(a) != json_array_size(b)) return false;
        json_array_foreach((json_t *)a, i, member)
            if (!values_equal(member, json_array_get(b, i))) return false;
        return true;
    case JSON_OBJECT:
        if (json_object_size(a) != json_object_size(b)) return false;
        json_object_foreach((json_t *)a, key, member) {
            const json_t *other = json_object_get(b, key);
            if (!other || !values_equal(member, other)) return false;
        }
        return true;
    default:
        return true; /* true, false, null: same type is same value */
    }
}

/* ---------------------------------------------------------------------------------
 * The walk. A `validation` is one pass over one instance; `where` is the JSON pointer
 * of the value being checked. A `slot` says where that value lives, so that an
 * integral real can be replaced by an integer in its parent. */

typedef struct {
    const json_t *root; /* the schema document, for $ref */
    schema_errors *errs;
    text where;
    int depth;
} validation;

typedef struct {
    json_t *value;
    json_t *parent;  /* object or array holding `value`; NULL at the top */
    const char *key; /* its name, when the parent is an object */
    size_t index;    /* its index, when the parent is an array */
} slot;

static void validate(validation *v, const json_t *schema, slot *at);

static void report(validation *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(validation *v, const char *fmt, ...) {
    if (v->errs->count >= SCHEMA_ERRORS_KEPT) { /* only counted: no message to format */
        v->errs->dropped++;
        return;
    }
    char *message;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&message, fmt, ap);
    va_end(ap);
    if (n < 0) out_of_memory();
    schema_errors_add(v->errs, v->where.s ? v->where.s : "", "%s", message);
    free(message);
}

/* RFC 6901: '~' is written "~0" and '/' is written "~1". Returns the length to go
 * back to. */
static size_t enter_key(validation *v, const char *key) {
    size_t back = v->where.len;
    text_append(&v->where, "/");
    for (const char *c = key; *c; c++) {
        if (*c == '~') text_append(&v->where, "~0");
        else if (*c == '/') text_append(&v->where, "~1");
        else text_append_bytes(&v->where, c, 1);
    }
    return back;
}

static size_t enter_index(validation *v, size_t index) {
    size_t back = v->where.len;
    text_appendf(&v->where, "/%zu", index);
    return back;
}

static void leave(validation *v, size_t back) { text_truncate(&v->where, back); }

static void validate_member(validation *v, const json_t *schema, json_t *object, const char *key) {
    size_t back = enter_key(v, key);
    slot member = {.value = json_object_get(object, key), .parent = object, .key = key};
    validate(v, schema, &member);
    leave(v, back);
}

static void validate_item(validation *v, const json_t *schema, json_t *array, size_t index) {
    size_t back = enter_index(v, index);
    slot item = {.value = json_array_get(array, index), .parent = array, .index = index};
    validate(v, schema, &item);
    leave(v, back);
}

/* Puts `replacement` (a new reference, stolen) where the slot's value was. Only a value
 * with a parent can be replaced; the caller's top-level value cannot. */
static void replace_in_slot(slot *at, json_t *replacement) {
    if (json_is_object(at->parent)) json_object_set_new(at->parent, at->key, replacement);
    else json_array_set_new(at->parent, at->index, replacement);
    at->value = replacement;
}

/* Validates a deep copy of `value`, so that nothing is filled in or reported; for the
 * combinators, which must try a branch before choosing it. Returns how many errors
 * the branch has; the first one, formatted, goes to *first_error when asked. */
static size_t try_branch(validation *v, const json_t *schema, const json_t *value, char **first_error) {
    schema_errors errs = {0};
    validation trial = {.root = v->root, .errs = &errs, .depth = v->depth};
    text_append(&trial.where, v->where.s ? v->where.s : "");
    json_t *copy = json_deep_copy(value);
    slot top = {.value = copy};
    validate(&trial, schema, &top);
    size_t count = schema_errors_total(&errs);
    if (first_error && count) {
        text t = {0};
        const schema_error *e = &errs.items[0];
        if (strcmp(e->pointer, trial.where.s) != 0) text_appendf(&t, "%s: ", e->pointer);
        text_append(&t, e->message);
        *first_error = text_take(&t);
    }
    json_decref(copy);
    free(trial.where.s);
    schema_errors_free(&errs);
    return count;
}

/* --- type ----------------------------------------------------------------------- */

static const char *type_phrase(const char *name) {
    if (!strcmp(name, "integer")) return "an integer";
    if (!strcmp(name, "number")) return "a number";
    if (!strcmp(name, "string")) return "a string";
    if (!strcmp(name, "boolean")) return "a boolean";
    if (!strcmp(name, "object")) return "an object";
    if (!strcmp(name, "array")) return "an array";
    if (!strcmp(name, "null")) return "null";
    return name;
}

/* Finite with no fractional part: an integer, as JSON Schema counts them (1e20 is one). */
static bool real_is_integral(double d) { return isfinite(d) && d == floor(d); }

/* Within json_int_t, so that it can be rewritten as one. */
static bool real_fits_integer(double d) { return d >= -9223372036854775808.0 && d < 9223372036854775808.0; }

static bool has_type(const json_t *value, const char *name) {
    if (!strcmp(name, "integer"))
        return json_is_integer(value) || (json_is_real(value) && real_is_integral(json_real_value(value)));
    if (!strcmp(name, "number")) return json_is_number(value);
    if (!strcmp(name, "string")) return json_is_string(value);
    if (!strcmp(name, "boolean")) return json_is_boolean(value);
    if (!strcmp(name, "object")) return json_is_object(value);
    if (!strcmp(name, "array")) return json_is_array(value);
    if (!strcmp(name, "null")) return json_is_null(value);
    return false;
}

static bool type_listed(const json_t *type, const char *name) {
    if (json_is_string(type)) return !strcmp(json_string_value(type), name);
    size_t i;
    json_t *each;
    json_array_foreach((json_t *)type, i, each)
        if (json_is_string(each) && !strcmp(json_string_value(each), name)) return true;
    return false;
}

static void report_wrong_type(validation *v, const json_t *type, const json_t *value) {
    text t = {0};
    text_append(&t, "must be ");
    if (json_is_string(type)) {
        text_append(&t, type_phrase(json_string_value(type)));
    } else {
        size_t i, n = json_array_size(type);
        json_t *each;
        json_array_foreach((json_t *)type, i, each) {
            if (i) text_append(&t, i + 1 == n ? " or " : ", ");
            text_append(&t, type_phrase(json_is_string(each) ? json_string_value(each) : "?"));
        }
    }
    text_append(&t, " (got ");
    append_kind_and_value(&t, value);
    text_append(&t, ")");
    report(v, "%s", t.s);
    free(t.s);
}

/* Whether one of the schema's numeric bounds rejects `d`. */
static bool bound_rejects(const json_t *schema, double d) {
    const json_t *b;
    if (json_is_number(b = json_object_get(schema, "maximum")) && d > json_number_value(b)) return true;
    if (json_is_number(b = json_object_get(schema, "exclusiveMaximum")) && d >= json_number_value(b)) return true;
    if (json_is_number(b = json_object_get(schema, "minimum")) && d < json_number_value(b)) return true;
    if (json_is_number(b = json_object_get(schema, "exclusiveMinimum")) && d <= json_number_value(b)) return true;
    return false;
}

/* Returns false, having reported it, when the value is of none of the listed types. */
static bool check_type(validation *v, const json_t *schema, slot *at) {
    const json_t *type = json_object_get(schema, "type");
    if (!json_is_string(type) && !json_is_array(type)) return true;
    bool ok = false;
    if (json_is_string(type)) {
        ok = has_type(at->value, json_string_value(type));
    } else {
        size_t i;
        json_t *each;
        json_array_foreach((json_t *)type, i, each)
            if (json_is_string(each) && has_type(at->value, json_string_value(each))) ok = true;
    }
    if (!ok) {
        report_wrong_type(v, type, at->value);
        return false;
    }
    if (json_is_real(at->value) && type_listed(type, "integer") && !type_listed(type, "number")) {
        double d = json_real_value(at->value);
        if (!real_fits_integer(d)) {
            /* 1e20 is an integer to JSON Schema but none that a reader can hold: the
             * schema's bound says so when it has one, else the 64-bit range does. */
            if (bound_rejects(schema, d)) return true;
            char got[40];
            format_double(d, got, sizeof got);
            report(v, "must be an integer from -9223372036854775808 to 9223372036854775807 (got %s)", got);
            return false;
        }
        /* 2.0 where an integer is wanted becomes 2, so that readers can take it as one. */
        if (at->parent) replace_in_slot(at, json_integer((json_int_t)d));
    }
    return true;
}

/* --- enum and const ---------------------------------------------------------------- */

static void check_enum(validation *v, const json_t *schema, const json_t *value) {
    const json_t *choices = json_object_get(schema, "enum");
    if (!json_is_array(choices)) return;
    size_t i;
    json_t *choice;
    json_array_foreach((json_t *)choices, i, choice)
        if (values_equal(choice, value)) return;
    text t = {0};
    text_append(&t, "must be one of: ");
    json_array_foreach((json_t *)choices, i, choice) {
        if (i) text_append(&t, ", ");
        if (json_is_string(choice)) text_append(&t, json_string_value(choice));
        else append_value(&t, choice);
    }
    text_append(&t, " (got ");
    append_value(&t, value);
    text_append(&t, ")");
    report(v, "%s", t.s);
    free(t.s);
}

static void check_const(validation *v, const json_t *schema, const json_t *value) {
    const json_t *expected = json_object_get(schema, "const");
    if (!expected || values_equal(expected, value)) return;
    text t = {0};
    text_append(&t, "must be ");
    append_value(&t, expected);
    text_append(&t, " (got ");
    append_value(&t, value);
    text_append(&t, ")");
    report(v, "%s", t.s);
    free(t.s);
}

/* --- numbers ------------------------------------------------------------------------ */

static bool is_multiple_of(const json_t *value, const json_t *divisor) {
    if (json_is_integer(value) && json_is_integer(divisor))
        return json_integer_value(value) % json_integer_value(divisor) == 0;
    double quotient = json_number_value(value) / json_number_value(divisor);
    if (!isfinite(quotient)) return false;
    /* 0.3 is a multiple of 0.1 although 0.3 / 0.1 is 2.9999999999999996 in binary. */
    return fabs(quotient - nearbyint(quotient)) <= 1e-9 * fmax(1.0, fabs(quotient));
}

static void check_bound(validation *v, const json_t *schema, const json_t *value, const char *keyword,
                        int failing_sign, bool fails_when_equal, const char *phrase) {
    const json_t *bound = json_object_get(schema, keyword);
    if (!json_is_number(bound)) return;
    int order = compare_numbers(value, bound);
    if (order == failing_sign || (fails_when_equal && order == 0)) {
        char b[40], got[40];
        format_number(bound, b, sizeof b);
        format_number(value, got, sizeof got);
        report(v, "must be %s %s (got %s)", phrase, b, got);
    }
}

static void check_number(validation *v, const json_t *schema, const json_t *value) {
    if (!json_is_number(value)) return;
    check_bound(v, schema, value, "minimum", -1, false, "at least");
    check_bound(v, schema, value, "maximum", +1, false, "at most");
    check_bound(v, schema, value, "exclusiveMinimum", -1, true, "greater than");
    check_bound(v, schema, value, "exclusiveMaximum", +1, true, "less than");
    const json_t *divisor = json_object_get(schema, "multipleOf");
    if (json_is_number(divisor) && json_number_value(divisor) > 0 && !is_multiple_of(value, divisor)) {
        char d[40], got[40];
        format_number(divisor, d, sizeof d);
        format_number(value, got, sizeof got);
        report(v, "must be a multiple of %s (got %s)", d, got);
    }
}

/* --- strings ------------------------------------------------------------------------ */

static size_t utf8_length(const char *s, size_t bytes) {
    size_t points = 0;
    for (size_t i = 0; i < bytes; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) points++;
    return points;
}

static void check_length(validation *v, const json_t *schema, const char *keyword, bool is_min, size_t length) {
    const json_t *limit = json_object_get(schema, keyword);
    if (!json_is_integer(limit)) return;
    json_int_t n = json_integer_value(limit);
    if (is_min ? (json_int_t)length >= n : (json_int_t)length <= n) return;
    report(v, "must be at %s %" JSON_INTEGER_FORMAT " character%s long (got %zu)", is_min ? "least" : "most", n,
           n == 1 ? "" : "s", length);
}

static void check_pattern(validation *v, const json_t *schema, const json_t *value) {
    const json_t *pattern = json_object_get(schema, "pattern");
    if (!json_is_string(pattern)) return;
    regex_t re;
    if (regcomp(&re, json_string_value(pattern), REG_EXTENDED | REG_NOSUB) != 0) {
        report(v, "cannot be checked: the schema's pattern %s is not a valid POSIX extended regular expression",
               json_string_value(pattern));
        return;
    }
    if (regexec(&re, json_string_value(value), 0, NULL, 0) != 0) {
        text t = {0};
        append_value(&t, value);
        report(v, "must match the pattern %s (got %s)", json_string_value(pattern), t.s);
        free(t.s);
    }
    regfree(&re);
}

static void check_string(validation *v, const json_t *schema, const json_t *value) {
    if (!json_is_string(value)) return;
    /* A document parsed with JSON_ALLOW_NUL may carry "\u0000": no file name, name or
     * enum value can hold one, and C readers would cut the string there. */
    const char *nul = memchr(json_string_value(value), '\0', json_string_length(value));
    if (nul) {
        char message[96];
        snprintf(message, sizeof message, "must not contain the character \\u0000 (NUL; at character %zu)",
                 utf8_length(json_string_value(value), (size_t)(nul - json_string_value(value))) + 1);
        /* once, although a $ref or allOf may bring the value here more than once */
        for (size_t i = 0; i < v->errs->count; i++)
            if (!strcmp(v->errs->items[i].pointer, v->where.s) && !strcmp(v->errs->items[i].message, message)) return;
        report(v, "%s", message);
        return;
    }
    size_t length = utf8_length(json_string_value(value), json_string_length(value));
    check_length(v, schema, "minLength", true, length);
    check_length(v, schema, "maxLength", false, length);
    check_pattern(v, schema, value);
}

/* --- arrays ------------------------------------------------------------------------- */

static void check_item_count(validation *v, const json_t *schema, const char *keyword, bool is_min, size_t count) {
    const json_t *limit = json_object_get(schema, keyword);
    if (!json_is_integer(limit)) return;
    json_int_t n = json_integer_value(limit);
    if (is_min ? (json_int_t)count >= n : (json_int_t)count <= n) return;
    report(v, "must have at %s %" JSON_INTEGER_FORMAT " item%s (got %zu)", is_min ? "least" : "most", n,
           n == 1 ? "" : "s", count);
}

static void check_unique_items(validation *v, const json_t *schema, const json_t *array) {
    if (!json_is_true(json_object_get(schema, "uniqueItems"))) return;
    size_t n = json_array_size(array);
    for (size_t j = 1; j < n; j++)
        for (size_t i = 0; i < j; i++)
            if (values_equal(json_array_get(array, i), json_array_get(array, j))) {
                report(v, "must not repeat items (item %zu repeats item %zu)", j, i);
                break;
            }
}

static void check_array(validation *v, const json_t *schema, json_t *array) {
    if (!json_is_array(array)) return;
    size_t count = json_array_size(array);
    check_item_count(v, schema, "minItems", true, count);
    check_item_count(v, schema, "maxItems", false, count);
    check_unique_items(v, schema, array);
    const json_t *prefix = json_object_get(schema, "prefixItems");
    size_t n_prefix = json_is_array(prefix) ? json_array_size(prefix) : 0;
    for (size_t i = 0; i < count && i < n_prefix; i++) validate_item(v, json_array_get(prefix, i), array, i);
    const json_t *items = json_object_get(schema, "items");
    if (items)
        for (size_t i = n_prefix; i < count; i++) validate_item(v, items, array, i);
}

/* --- objects ------------------------------------------------------------------------ */

static const json_t *resolve_ref(const json_t *root, const char *ref);

/* A property's default, looking through a $ref when the property has none itself. */
static const json_t *default_of(const validation *v, const json_t *schema) {
    for (int hops = 0; json_is_object(schema) && hops < MAX_DEPTH; hops++) {
        const json_t *value = json_object_get(schema, "default");
        if (value) return value;
        const json_t *ref = json_object_get(schema, "$ref");
        if (!json_is_string(ref)) return NULL;
        schema = resolve_ref(v->root, json_string_value(ref));
    }
    return NULL;
}

static void check_properties(validation *v, const json_t *schema, json_t *object) {
    const json_t *properties = json_object_get(schema, "properties");
    if (!json_is_object(properties)) return;
    const char *key;
    json_t *property;
    json_object_foreach((json_t *)properties, key, property) {
        if (!json_object_get(object, key)) {
            const json_t *fill = default_of(v, property);
            if (!fill) continue;
            json_object_set_new(object, key, json_deep_copy(fill));
        }
        validate_member(v, property, object, key);
    }
}

static void check_required(validation *v, const json_t *schema, const json_t *object) {
    const json_t *required = json_object_get(schema, "required");
    size_t i;
    json_t *name;
    json_array_foreach((json_t *)required, i, name) {
        if (!json_is_string(name) || json_object_get(object, json_string_value(name))) continue;
        size_t back = enter_key(v, json_string_value(name));
        report(v, "is required");
        leave(v, back);
    }
}

static bool matches_regex(const char *pattern, const char *s) {
    regex_t re;
    if (regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB) != 0) return false;
    bool match = regexec(&re, s, 0, NULL, 0) == 0;
    regfree(&re);
    return match;
}

/* The schemas from patternProperties whose pattern matches `key` are applied to the
 * member; returns whether there was one. */
static bool apply_pattern_properties(validation *v, const json_t *schema, json_t *object, const char *key) {
    const json_t *patterns = json_object_get(schema, "patternProperties");
    bool matched = false;
    const char *pattern;
    json_t *property;
    json_object_foreach((json_t *)patterns, pattern, property) {
        if (!matches_regex(pattern, key)) continue;
        matched = true;
        validate_member(v, property, object, key);
    }
    return matched;
}

static void report_unknown_field(validation *v, const json_t *schema) {
    const json_t *properties = json_object_get(schema, "properties");
    const json_t *patterns = json_object_get(schema, "patternProperties");
    text t = {0};
    const char *name;
    json_t *ignored;
    json_object_foreach((json_t *)properties, name, ignored) {
        text_append(&t, t.len ? ", " : "");
        text_append(&t, name);
    }
    json_object_foreach((json_t *)patterns, name, ignored) {
        text_append(&t, t.len ? ", " : "");
        text_appendf(&t, "names matching %s", name);
    }
    if (t.len) report(v, "unknown field (allowed here: %s)", t.s);
    else report(v, "unknown field (no fields are allowed here)");
    free(t.s);
}

static void check_additional_properties(validation *v, const json_t *schema, json_t *object) {
    const json_t *additional = json_object_get(schema, "additionalProperties");
    const json_t *properties = json_object_get(schema, "properties");
    const char *key;
    json_t *member;
    json_object_foreach(object, key, member) {
        if (json_object_get(properties, key)) continue;
        if (apply_pattern_properties(v, schema, object, key)) continue;
        if (json_is_false(additional)) {
            size_t back = enter_key(v, key);
            report_unknown_field(v, schema);
            leave(v, back);
        } else if (additional) {
            validate_member(v, additional, object, key);
        }
    }
}

static void check_member_count(validation *v, const json_t *schema, const char *keyword, bool is_min, size_t count) {
    const json_t *limit = json_object_get(schema, keyword);
    if (!json_is_integer(limit)) return;
    json_int_t n = json_integer_value(limit);
    if (is_min ? (json_int_t)count >= n : (json_int_t)count <= n) return;
    report(v, "must have at %s %" JSON_INTEGER_FORMAT " field%s (got %zu)", is_min ? "least" : "most", n,
           n == 1 ? "" : "s", count);
}

static void check_object(validation *v, const json_t *schema, json_t *object) {
    if (!json_is_object(object)) return;
    check_properties(v, schema, object); /* first: defaults count as present */
    check_required(v, schema, object);
    check_additional_properties(v, schema, object);
    check_member_count(v, schema, "minProperties", true, json_object_size(object));
    check_member_count(v, schema, "maxProperties", false, json_object_size(object));
}

/* --- $ref ----------------------------------------------------------------------------- */

/* "#" is the whole schema; "#/a/b~1c" is a JSON pointer into it. NULL if not found. */
static const json_t *resolve_ref(const json_t *root, const char *ref) {
    if (ref[0] != '#') return NULL;
    if (ref[1] == '\0') return root;
    if (ref[1] != '/') return NULL;
    const json_t *node = root;
    const char *token = ref + 2;
    for (;;) {
        size_t len = strcspn(token, "/");
        text name = {0};
        for (size_t i = 0; i < len; i++) {
            if (token[i] == '~' && token[i + 1] == '1') text_append(&name, "/"), i++;
            else if (token[i] == '~' && token[i + 1] == '0') text_append(&name, "~"), i++;
            else text_append_bytes(&name, token + i, 1);
        }
        char *key = text_take(&name);
        if (json_is_object(node)) {
            node = json_object_get(node, key);
        } else if (json_is_array(node)) {
            char *end;
            unsigned long index = strtoul(key, &end, 10);
            node = (*key && !*end) ? json_array_get(node, index) : NULL;
        } else {
            node = NULL;
        }
        free(key);
        if (!node || token[len] == '\0') return node;
        token += len + 1;
    }
}

static void check_ref(validation *v, const json_t *schema, slot *at) {
    const json_t *ref = json_object_get(schema, "$ref");
    if (!json_is_string(ref)) return;
    const json_t *target = resolve_ref(v->root, json_string_value(ref));
    if (!target) {
        report(v, "cannot be checked: the schema refers to %s, which it does not define", json_string_value(ref));
        return;
    }
    validate(v, target, at);
}

/* --- combinators ------------------------------------------------------------------------ */

static void check_all_of(validation *v, const json_t *schema, slot *at) {
    const json_t *branches = json_object_get(schema, "allOf");
    size_t i;
    json_t *branch;
    json_array_foreach((json_t *)branches, i, branch) validate(v, branch, at);
}

/* anyOf and oneOf: try every branch on a copy; apply the chosen one for real, so that
 * its defaults fill and its integers are rewritten. */
static void check_one_or_any_of(validation *v, const json_t *schema, slot *at, const char *keyword) {
    const json_t *branches = json_object_get(schema, keyword);
    if (!json_is_array(branches) || json_array_size(branches) == 0) return;
    bool exactly_one = !strcmp(keyword, "oneOf");
    size_t n = json_array_size(branches), first_match = n, second_match = n;
    char **why = calloc(n, sizeof *why);
    if (!why) out_of_memory();
    for (size_t i = 0; i < n; i++) {
        if (try_branch(v, json_array_get(branches, i), at->value, &why[i]) != 0) continue;
        if (first_match == n) first_match = i;
        else if (second_match == n) second_match = i;
        if (!exactly_one) break;
    }
    if (first_match == n) {
        text t = {0};
        for (size_t i = 0; i < n; i++) {
            if (i) text_append(&t, "; or ");
            text_append(&t, why[i] ? why[i] : "?");
        }
        char *reasons = text_take(&t);
        report(v, "does not match any of the allowed forms: %s", reasons);
        free(reasons);
    } else if (second_match != n) {
        report(v, "matches more than one of the allowed forms (forms %zu and %zu); it must match exactly one",
               first_match + 1, second_match + 1);
    } else {
        validate(v, json_array_get(branches, first_match), at);
    }
    for (size_t i = 0; i < n; i++) free(why[i]);
    free(why);
}

static void check_not(validation *v, const json_t *schema, const json_t *value) {
    const json_t *excluded = json_object_get(schema, "not");
    if (excluded && try_branch(v, excluded, value, NULL) == 0) report(v, "must not match the excluded form");
}

static void check_if_then_else(validation *v, const json_t *schema, slot *at) {
    const json_t *condition = json_object_get(schema, "if");
    if (!condition) return;
    bool holds = try_branch(v, condition, at->value, NULL) == 0;
    const json_t *next = json_object_get(schema, holds ? "then" : "else");
    if (next) validate(v, next, at);
}

/* --- one schema against one value -------------------------------------------------------- */

static void validate(validation *v, const json_t *schema, slot *at) {
    if (json_is_true(schema)) return;
    if (json_is_false(schema)) {
        report(v, "is not allowed here");
        return;
    }
    if (!json_is_object(schema)) return;
    if (v->depth >= MAX_DEPTH) {
        report(v, "is nested too deeply to be checked");
        return;
    }
    v->depth++;
    if (check_type(v, schema, at)) {
        check_ref(v, schema, at);
        check_enum(v, schema, at->value);
        check_const(v, schema, at->value);
        check_number(v, schema, at->value);
        check_string(v, schema, at->value);
        check_array(v, schema, at->value);
        check_object(v, schema, at->value);
        check_all_of(v, schema, at);
        check_one_or_any_of(v, schema, at, "anyOf");
        check_one_or_any_of(v, schema, at, "oneOf");
        check_not(v, schema, at->value);
        check_if_then_else(v, schema, at);
    }
    v->depth--;
}

int schema_validate(const json_t *schema, json_t *instance, schema_errors *errs) {
    size_t before = schema_errors_total(errs);
    if (!schema) {
        schema_errors_add(errs, "", "cannot be checked: there is no schema");
        return 1;
    }
    if (!instance) {
        schema_errors_add(errs, "", "is missing: there is no document");
        return 1;
    }
    validation v = {.root = schema, .errs = errs};
    text_append(&v.where, "");
    slot top = {.value = instance};
    validate(&v, schema, &top);
    free(v.where.s);
    return (int)(schema_errors_total(errs) - before);
}
