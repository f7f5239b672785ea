/* Tests of the generic JSON Schema validator (schema/validator.c) against small inline
 * schemas: each keyword with good and bad instances, the exact pointer and sentence
 * of each error, every error reported at once, defaults filled (nested ones too),
 * integral reals rewritten to integers, and JSON pointer escaping.
 *
 * JSON in this file is written with ' for " so that it reads; `json` swaps them. */
#include <stdbool.h>
#include <string.h>

#include "check.h"
#include "validator.h"

/* Parses test JSON written with single quotes. */
static json_t *json(const char *text) {
    char *swapped = strdup(text);
    for (char *c = swapped; *c; c++)
        if (*c == '\'') *c = '"';
    json_error_t error;
    json_t *value = json_loads(swapped, JSON_DECODE_ANY, &error);
    REQUIRE(value, "test JSON does not parse: %s: %s", swapped, error.text);
    free(swapped);
    return value;
}

typedef struct {
    const char *pointer, *message;
} expected_error;

static bool has_error(const schema_errors *errs, const char *pointer, const char *message) {
    for (size_t i = 0; i < errs->count; i++)
        if (!strcmp(errs->items[i].pointer, pointer) && !strcmp(errs->items[i].message, message)) return true;
    return false;
}

static void print_errors(const schema_errors *errs) {
    char *text = schema_errors_format(errs);
    fprintf(stderr, "  errors were:\n%s\n", text);
    free(text);
}

/* Validates `instance_text` against `schema_text` and checks that exactly the expected
 * errors come out (in any order). Returns the instance, defaults filled; caller frees. */
static json_t *expect_errors_at(int line, const char *schema_text, const char *instance_text,
                                const expected_error *expected) {
    json_t *schema = json(schema_text), *instance = json(instance_text);
    schema_errors errs = {0};
    int returned = schema_validate(schema, instance, &errs);
    size_t n_expected = 0;
    while (expected[n_expected].pointer) n_expected++;
    bool ok = returned == (int)errs.count && errs.count == n_expected;
    CHECK(ok, "line %d: %s against %s: %zu errors (returned %d), expected %zu", line, instance_text, schema_text,
          errs.count, returned, n_expected);
    for (size_t i = 0; i < n_expected; i++) {
        bool found = has_error(&errs, expected[i].pointer, expected[i].message);
        CHECK(found, "line %d: expected error \"%s: %s\"", line, expected[i].pointer, expected[i].message);
        ok = ok && found;
    }
    if (!ok) print_errors(&errs);
    schema_errors_free(&errs);
    json_decref(schema);
    return instance;
}

#define EXPECT_ERRORS(schema, instance, ...) \
    json_decref(expect_errors_at(__LINE__, schema, instance, (const expected_error[]){__VA_ARGS__, {NULL, NULL}}))
#define EXPECT_VALID(schema, instance) \
    json_decref(expect_errors_at(__LINE__, schema, instance, (const expected_error[]){{NULL, NULL}}))
#define VALIDATED(schema, instance) expect_errors_at(__LINE__, schema, instance, (const expected_error[]){{NULL, NULL}})

/* --- type --------------------------------------------------------------------------- */

static void test_type_messages(void) {
    EXPECT_ERRORS("{'properties': {'n': {'type': 'integer'}}}", "{'n': 'x'}", {"/n", "must be an integer (got string \"x\")"});
    EXPECT_ERRORS("{'properties': {'n': {'type': 'number'}}}", "{'n': true}", {"/n", "must be a number (got boolean true)"});
    EXPECT_ERRORS("{'properties': {'n': {'type': 'string'}}}", "{'n': 5}", {"/n", "must be a string (got number 5)"});
    EXPECT_ERRORS("{'properties': {'n': {'type': 'boolean'}}}", "{'n': null}", {"/n", "must be a boolean (got null)"});
    EXPECT_ERRORS("{'properties': {'n': {'type': 'object'}}}", "{'n': [1]}", {"/n", "must be an object (got an array)"});
    EXPECT_ERRORS("{'properties': {'n': {'type': 'array'}}}", "{'n': {}}", {"/n", "must be an array (got an object)"});
    EXPECT_ERRORS("{'properties': {'n': {'type': 'null'}}}", "{'n': 0}", {"/n", "must be null (got number 0)"});
    EXPECT_ERRORS("{'type': 'object'}", "[]", {"", "must be an object (got an array)"});
    EXPECT_ERRORS("{'type': ['string', 'null']}", "5", {"", "must be a string or null (got number 5)"});
    EXPECT_ERRORS("{'type': ['string', 'integer', 'null']}", "false",
                  {"", "must be a string, an integer or null (got boolean false)"});
    EXPECT_VALID("{'type': ['string', 'null']}", "null");
    EXPECT_VALID("{'type': 'number'}", "3");
    EXPECT_VALID("{'type': 'number'}", "3.5");
    EXPECT_ERRORS("{'type': 'integer'}", "3.5", {"", "must be an integer (got number 3.5)"});
    EXPECT_ERRORS("{'type': 'integer'}", "1e300",
                  {"", "must be an integer from -9223372036854775808 to 9223372036854775807 (got 1e+300)"});
    /* A value of the wrong type gets its type error and nothing else. */
    EXPECT_ERRORS("{'type': 'integer', 'minimum': 5, 'enum': [7], 'maxLength': 0}", "'xy'",
                  {"", "must be an integer (got string \"xy\")"});
}

static void test_integral_real_becomes_integer(void) {
    json_t *doc = VALIDATED("{'properties': {'n': {'type': 'integer', 'maximum': 3}, 'r': {'type': 'number'}}}",
                            "{'n': 3.0, 'r': 2.0}");
    CHECK(json_is_integer(json_object_get(doc, "n")) && json_integer_value(json_object_get(doc, "n")) == 3,
          "3.0 where an integer is wanted becomes the integer 3");
    CHECK(json_is_real(json_object_get(doc, "r")), "2.0 where a number is wanted stays a real");
    json_decref(doc);

    doc = VALIDATED("{'items': {'type': 'integer'}}", "[1.0, 2, -4.0]");
    CHECK(json_is_integer(json_array_get(doc, 0)) && json_is_integer(json_array_get(doc, 2)) &&
              json_integer_value(json_array_get(doc, 2)) == -4,
          "integral reals in an array become integers");
    json_decref(doc);

    doc = VALIDATED("{'type': 'integer'}", "7.0");
    CHECK(json_is_real(doc), "the top-level value cannot be replaced, and is still accepted");
    json_decref(doc);

    doc = VALIDATED("{'properties': {'n': {'type': ['integer', 'number']}}}", "{'n': 2.0}");
    CHECK(json_is_real(json_object_get(doc, "n")), "a real stays a real where a number is allowed too");
    json_decref(doc);
}

/* Integers beyond 64 bits: JSON Schema counts 1e20 as an integer; none that a reader
 * can hold, so the bound that rejects it speaks, or else the 64-bit range. */
static void test_huge_integral_reals(void) {
    EXPECT_ERRORS("{'properties': {'n': {'type': 'integer', 'minimum': 0, 'maximum': 100}}}", "{'n': 1e20}",
                  {"/n", "must be at most 100 (got 1e+20)"});
    EXPECT_ERRORS("{'properties': {'n': {'type': 'integer', 'minimum': 0, 'maximum': 100}}}", "{'n': -1e20}",
                  {"/n", "must be at least 0 (got -1e+20)"});
    EXPECT_ERRORS("{'properties': {'n': {'type': 'integer', 'exclusiveMaximum': 100}}}", "{'n': 1e19}",
                  {"/n", "must be less than 100 (got 1e+19)"});
    EXPECT_ERRORS("{'properties': {'n': {'type': 'integer', 'minimum': 0}}}", "{'n': 1e20}",
                  {"/n", "must be an integer from -9223372036854775808 to 9223372036854775807 (got 1e+20)"});
    EXPECT_ERRORS("{'properties': {'n': {'type': 'integer'}}}", "{'n': 18446744073709551616.0}",
                  {"/n", "must be an integer from -9223372036854775808 to 9223372036854775807 (got 1.8446744073709552e+19)"});
    EXPECT_ERRORS("{'properties': {'n': {'type': 'integer', 'maximum': 100}}}", "{'n': 1.5e20}",
                  {"/n", "must be at most 100 (got 1.5e+20)"});
    EXPECT_ERRORS("{'properties': {'n': {'type': 'integer', 'maximum': 100}}}", "{'n': 1.5}",
                  {"/n", "must be an integer (got number 1.5)"});
    /* A number (not integer) field keeps its reals, however big. */
    EXPECT_ERRORS("{'properties': {'x': {'type': 'number', 'maximum': 10}}}", "{'x': 1e300}",
                  {"/x", "must be at most 10 (got 1e+300)"});
    json_t *doc = VALIDATED("{'properties': {'n': {'type': 'integer', 'maximum': 9007199254740991}}}",
                            "{'n': 9007199254740991.0}");
    CHECK(json_integer_value(json_object_get(doc, "n")) == 9007199254740991LL, "the largest bound is read exactly");
    json_decref(doc);
}

/* --- numbers ------------------------------------------------------------------------- */

static void test_number_bounds(void) {
    EXPECT_ERRORS("{'minimum': 1}", "0", {"", "must be at least 1 (got 0)"});
    EXPECT_VALID("{'minimum': 1}", "1");
    EXPECT_ERRORS("{'maximum': 64}", "65", {"", "must be at most 64 (got 65)"});
    EXPECT_VALID("{'maximum': 64}", "64");
    EXPECT_ERRORS("{'exclusiveMinimum': 0}", "0", {"", "must be greater than 0 (got 0)"});
    EXPECT_VALID("{'exclusiveMinimum': 0}", "1e-9");
    EXPECT_ERRORS("{'exclusiveMaximum': 1}", "1", {"", "must be less than 1 (got 1)"});
    EXPECT_ERRORS("{'exclusiveMaximum': 1}", "1.5", {"", "must be less than 1 (got 1.5)"});
    EXPECT_VALID("{'exclusiveMaximum': 1}", "0.999");
    EXPECT_ERRORS("{'maximum': 0.5}", "0.75", {"", "must be at most 0.5 (got 0.75)"});
    EXPECT_ERRORS("{'minimum': 1}", "0.5", {"", "must be at least 1 (got 0.5)"});
    EXPECT_ERRORS("{'minimum': 0.001}", "0.0001", {"", "must be at least 0.001 (got 0.0001)"});
    EXPECT_ERRORS("{'minimum': 0, 'maximum': 10}", "-3", {"", "must be at least 0 (got -3)"});
    /* Shown with as many digits as it takes to tell the value from the bound. */
    EXPECT_ERRORS("{'maximum': 0.3}", "0.30000000000000004", {"", "must be at most 0.3 (got 0.30000000000000004)"});
    /* Bounds apply to numbers only. */
    EXPECT_VALID("{'minimum': 5}", "'abc'");
}

static void test_multiple_of(void) {
    EXPECT_ERRORS("{'multipleOf': 8}", "12", {"", "must be a multiple of 8 (got 12)"});
    EXPECT_VALID("{'multipleOf': 8}", "-16");
    EXPECT_VALID("{'multipleOf': 0.1}", "0.3");
    EXPECT_ERRORS("{'multipleOf': 0.1}", "0.35", {"", "must be a multiple of 0.1 (got 0.35)"});
    EXPECT_VALID("{'multipleOf': 0.5}", "2");
}

/* --- strings ------------------------------------------------------------------------- */

static void test_string_length_in_code_points(void) {
    EXPECT_ERRORS("{'minLength': 1}", "''", {"", "must be at least 1 character long (got 0)"});
    EXPECT_ERRORS("{'minLength': 3}", "'ab'", {"", "must be at least 3 characters long (got 2)"});
    EXPECT_ERRORS("{'maxLength': 3}", "'h\u00e9llo'", {"", "must be at most 3 characters long (got 5)"});
    EXPECT_VALID("{'maxLength': 2}", "'h\u00e9'");           /* 3 bytes, 2 characters */
    EXPECT_VALID("{'maxLength': 1}", "'\\ud83d\\ude00'");   /* one emoji, 4 bytes */
    EXPECT_VALID("{'minLength': 5}", "12");                  /* strings only */
}

/* "\u0000" (parsed with JSON_ALLOW_NUL) is refused where it is, with its position. */
static void test_nul_in_strings(void) {
    json_t *schema = json("{'properties': {'name': {'type': 'string', 'pattern': '^[a-z]*$'}, 'free': {}}}");
    json_error_t error;
    json_t *doc = json_loads("{\"name\": \"ab\\u0000cd\", \"free\": \"\\u0000\"}", JSON_ALLOW_NUL, &error);
    REQUIRE(doc, "parses with JSON_ALLOW_NUL: %s", error.text);
    schema_errors errs = {0};
    schema_validate(schema, doc, &errs);
    bool ok = errs.count == 2 && has_error(&errs, "/name", "must not contain the character \\u0000 (NUL; at character 3)") &&
              has_error(&errs, "/free", "must not contain the character \\u0000 (NUL; at character 1)");
    CHECK(ok, "each string with a NUL is named, and the pattern is not judged on a cut string");
    if (!ok) print_errors(&errs);
    for (size_t i = 0; i < errs.count; i++)
        CHECK(!strstr(errs.items[i].message, "JSON_ALLOW_NUL"), "no message names Jansson's flag");
    schema_errors_free(&errs);
    json_decref(doc);
    json_decref(schema);
}

static void test_pattern(void) {
    EXPECT_VALID("{'pattern': '^[a-z]+$'}", "'abc'");
    EXPECT_ERRORS("{'pattern': '^[a-z]+$'}", "'ab1'", {"", "must match the pattern ^[a-z]+$ (got \"ab1\")"});
    EXPECT_VALID("{'pattern': 'b'}", "'abc'"); /* unanchored, as in JSON Schema */
    EXPECT_VALID("{'pattern': '^(relu|gelu)$'}", "'gelu'");
    json_t *doc = json("{'pattern': '('}"), *value = json("'x'");
    schema_errors errs = {0};
    schema_validate(doc, value, &errs);
    CHECK(errs.count == 1 && strstr(errs.items[0].message, "not a valid POSIX extended regular expression"),
          "a broken pattern in the schema is reported, not ignored");
    schema_errors_free(&errs);
    json_decref(doc);
    json_decref(value);
}

static void test_long_values_are_cut_short_in_messages(void) {
    char instance[300];
    snprintf(instance, sizeof instance, "'%0200d'", 7);
    json_t *schema = json("{'enum': ['a']}"), *value = json(instance);
    schema_errors errs = {0};
    schema_validate(schema, value, &errs);
    REQUIRE(errs.count == 1, "one error");
    CHECK(strlen(errs.items[0].message) < 120 && strstr(errs.items[0].message, "...\")"),
          "a 200-character value is shown cut short: %s", errs.items[0].message);
    schema_errors_free(&errs);
    json_decref(schema);
    json_decref(value);
    EXPECT_ERRORS("{'enum': ['a']}", "'say \\'hi\\'\\n'", {"", "must be one of: a (got \"say \\\"hi\\\"\\n\")"});
}

/* --- enum and const ------------------------------------------------------------------- */

static void test_enum_and_const(void) {
    const char *activation = "{'properties': {'activation': {'enum': ['relu', 'gelu', 'tanh']}}}";
    EXPECT_VALID(activation, "{'activation': 'gelu'}");
    EXPECT_ERRORS(activation, "{'activation': 'sigmoid'}",
                  {"/activation", "must be one of: relu, gelu, tanh (got \"sigmoid\")"});
    EXPECT_ERRORS(activation, "{'activation': 3}", {"/activation", "must be one of: relu, gelu, tanh (got 3)"});
    EXPECT_VALID("{'enum': [1, 2, 'x', null]}", "1.0"); /* 1.0 equals 1 */
    EXPECT_ERRORS("{'enum': [1, 2, 'x', null]}", "3", {"", "must be one of: 1, 2, x, null (got 3)"});
    EXPECT_ERRORS("{'const': 'mlp'}", "'cnn'", {"", "must be \"mlp\" (got \"cnn\")"});
    EXPECT_VALID("{'const': {'a': [1, 2], 'b': null}}", "{'b': null, 'a': [1.0, 2]}");
    EXPECT_ERRORS("{'const': [1, 2]}", "[2, 1]", {"", "must be [1, 2] (got [2, 1])"});
    EXPECT_ERRORS("{'const': false}", "0", {"", "must be false (got 0)"});
}

/* --- objects --------------------------------------------------------------------------- */

static void test_required(void) {
    EXPECT_ERRORS("{'required': ['a', 'b'], 'properties': {'a': {}}}", "{}", {"/a", "is required"},
                  {"/b", "is required"});
    EXPECT_VALID("{'required': ['a']}", "{'a': null}");
    /* A default makes a property present. */
    EXPECT_VALID("{'required': ['a'], 'properties': {'a': {'default': 1}}}", "{}");
}

static void test_unknown_fields(void) {
    const char *train = "{'properties': {'epochs': {}, 'batch_size': {}}, 'additionalProperties': false}";
    EXPECT_VALID(train, "{'epochs': 1}");
    EXPECT_ERRORS(train, "{'epochs': 1, 'batchsize': 2, 'lr': 3}",
                  {"/batchsize", "unknown field (allowed here: epochs, batch_size)"},
                  {"/lr", "unknown field (allowed here: epochs, batch_size)"});
    EXPECT_ERRORS("{'additionalProperties': false}", "{'x': 1}", {"/x", "unknown field (no fields are allowed here)"});
    EXPECT_ERRORS("{'additionalProperties': {'type': 'integer'}}", "{'x': 1, 'y': 'a'}",
                  {"/y", "must be an integer (got string \"a\")"});
    const char *deep = "{'additionalProperties': false, 'properties': {'a': {'additionalProperties': false, "
                       "'properties': {'b': {'additionalProperties': false, 'properties': {'c': {}}}}}}}";
    EXPECT_ERRORS(deep, "{'a': {'b': {'c': 1, 'd': 2}}, 'z': 0}", {"/a/b/d", "unknown field (allowed here: c)"},
                  {"/z", "unknown field (allowed here: a)"});
    const char *patterned = "{'properties': {'id': {}}, 'patternProperties': {'^x-': {'type': 'integer'}}, "
                            "'additionalProperties': false}";
    EXPECT_ERRORS(patterned, "{'id': 0, 'x-a': 1, 'x-b': 'no', 'y': 2}",
                  {"/x-b", "must be an integer (got string \"no\")"},
                  {"/y", "unknown field (allowed here: id, names matching ^x-)"});
}

static void test_property_counts(void) {
    EXPECT_ERRORS("{'minProperties': 1}", "{}", {"", "must have at least 1 field (got 0)"});
    EXPECT_ERRORS("{'maxProperties': 1}", "{'a': 1, 'b': 2}", {"", "must have at most 1 field (got 2)"});
}

/* --- arrays ------------------------------------------------------------------------------ */

static void test_arrays(void) {
    EXPECT_ERRORS("{'items': {'type': 'integer'}}", "[1, 'a', 3, 'b']", {"/1", "must be an integer (got string \"a\")"},
                  {"/3", "must be an integer (got string \"b\")"});
    EXPECT_ERRORS("{'minItems': 1}", "[]", {"", "must have at least 1 item (got 0)"});
    EXPECT_ERRORS("{'maxItems': 2}", "[1, 2, 3]", {"", "must have at most 2 items (got 3)"});
    EXPECT_VALID("{'minItems': 1, 'maxItems': 2}", "[1, 2]");
    EXPECT_ERRORS("{'uniqueItems': true}", "[1, 2, 1.0]", {"", "must not repeat items (item 2 repeats item 0)"});
    EXPECT_ERRORS("{'uniqueItems': true}", "[{'a': [1]}, {'a': [1]}]", {"", "must not repeat items (item 1 repeats item 0)"});
    EXPECT_VALID("{'uniqueItems': true}", "[1, '1', true, [1]]");
    EXPECT_ERRORS("{'prefixItems': [{'type': 'string'}], 'items': {'type': 'integer'}}", "['a', 1, 'b']",
                  {"/2", "must be an integer (got string \"b\")"});
    EXPECT_ERRORS("{'prefixItems': [{}], 'items': false}", "[1, 2]", {"/1", "is not allowed here"});
    EXPECT_VALID("{'minItems': 3}", "'ab'"); /* arrays only */
}

/* --- $ref ---------------------------------------------------------------------------------- */

static void test_refs(void) {
    const char *positive = "{'$defs': {'positive': {'type': 'integer', 'minimum': 1}}, "
                           "'properties': {'n': {'$ref': '#/$defs/positive'}}}";
    EXPECT_VALID(positive, "{'n': 3}");
    EXPECT_ERRORS(positive, "{'n': 0}", {"/n", "must be at least 1 (got 0)"});
    EXPECT_ERRORS("{'$defs': {'a/b~c': {'type': 'string'}}, '$ref': '#/$defs/a~1b~0c'}", "1",
                  {"", "must be a string (got number 1)"});
    const char *tree = "{'type': 'object', 'additionalProperties': false, "
                       "'properties': {'value': {'type': 'integer'}, 'child': {'$ref': '#'}}}";
    EXPECT_ERRORS(tree, "{'child': {'child': {'value': 'x'}, 'value': 1}}",
                  {"/child/child/value", "must be an integer (got string \"x\")"});
    EXPECT_ERRORS("{'$ref': '#/$defs/missing'}", "1",
                  {"", "cannot be checked: the schema refers to #/$defs/missing, which it does not define"});
    EXPECT_ERRORS("{'$ref': 'https://example.com/other.json'}", "1",
                  {"", "cannot be checked: the schema refers to https://example.com/other.json, which it does not define"});
    /* A cycle in a broken schema ends with an error, not a crash. */
    json_t *schema = json("{'$defs': {'loop': {'$ref': '#/$defs/loop'}}, '$ref': '#/$defs/loop'}"), *value = json("1");
    schema_errors errs = {0};
    CHECK(schema_validate(schema, value, &errs) == 1 && !strcmp(errs.items[0].message, "is nested too deeply to be checked"),
          "a $ref cycle is reported");
    schema_errors_free(&errs);
    json_decref(schema);
    json_decref(value);
}

/* --- combinators ---------------------------------------------------------------------------- */

static void test_all_any_one_of(void) {
    EXPECT_ERRORS("{'allOf': [{'minimum': 1}, {'maximum': 3}]}", "5", {"", "must be at most 3 (got 5)"});
    EXPECT_ERRORS("{'allOf': [{'type': 'integer'}, {'minimum': 1}, {'multipleOf': 2}]}", "-1",
                  {"", "must be at least 1 (got -1)"}, {"", "must be a multiple of 2 (got -1)"});

    const char *any = "{'anyOf': [{'type': 'string'}, {'type': 'integer', 'minimum': 10}]}";
    EXPECT_VALID(any, "'x'");
    EXPECT_VALID(any, "12");
    EXPECT_ERRORS(any, "5",
                  {"", "does not match any of the allowed forms: must be a string (got number 5); or must be at least 10 (got 5)"});
    EXPECT_ERRORS("{'anyOf': [{'properties': {'a': {'type': 'string'}}}, {'type': 'string'}]}", "{'a': 1}",
                  {"", "does not match any of the allowed forms: /a: must be a string (got number 1); or must be a string (got an object)"});

    const char *one = "{'oneOf': [{'type': 'integer'}, {'type': 'number'}]}";
    EXPECT_VALID(one, "1.5");
    EXPECT_ERRORS(one, "2", {"", "matches more than one of the allowed forms (forms 1 and 2); it must match exactly one"});
    EXPECT_ERRORS(one, "'x'",
                  {"", "does not match any of the allowed forms: must be an integer (got string \"x\"); or must be a number (got string \"x\")"});
}

static void test_combinators_fill_defaults_of_the_chosen_branch(void) {
    const char *schema = "{'oneOf': ["
                         "{'required': ['kind'], 'properties': {'kind': {'const': 'a'}, 'x': {'default': 1}}},"
                         "{'required': ['kind'], 'properties': {'kind': {'const': 'b'}, 'y': {'default': 2}}}]}";
    json_t *doc = VALIDATED(schema, "{'kind': 'b'}");
    CHECK(json_integer_value(json_object_get(doc, "y")) == 2 && !json_object_get(doc, "x"),
          "the matching branch's default fills, the other's does not");
    json_decref(doc);
    doc = VALIDATED("{'properties': {'n': {'anyOf': [{'type': 'string'}, {'type': 'integer'}]}}}", "{'n': 4.0}");
    CHECK(json_is_integer(json_object_get(doc, "n")), "the chosen branch rewrites an integral real");
    json_decref(doc);
}

static void test_not_if_then_else_and_boolean_schemas(void) {
    EXPECT_ERRORS("{'not': {'const': 0}}", "0", {"", "must not match the excluded form"});
    EXPECT_VALID("{'not': {'const': 0}}", "1");
    const char *conditional = "{'if': {'properties': {'t': {'const': 'sgd'}}}, "
                              "'then': {'required': ['m']}, 'else': {'properties': {'m': false}}}";
    EXPECT_ERRORS(conditional, "{'t': 'sgd'}", {"/m", "is required"});
    EXPECT_ERRORS(conditional, "{'t': 'adam', 'm': 1}", {"/m", "is not allowed here"});
    EXPECT_VALID(conditional, "{'t': 'sgd', 'm': 0.9}");
    EXPECT_ERRORS("false", "{}", {"", "is not allowed here"});
    EXPECT_VALID("true", "[1, {}]");
}

/* --- defaults -------------------------------------------------------------------------------- */

static void test_defaults_fill_absent_members(void) {
    json_t *doc = VALIDATED("{'properties': {'a': {'default': 'x'}, 'b': {'default': 2}}}", "{'b': 5}");
    const char *filled = json_string_value(json_object_get(doc, "a"));
    CHECK(filled && !strcmp(filled, "x"), "absent member filled");
    CHECK(json_integer_value(json_object_get(doc, "b")) == 5, "present member kept");
    json_decref(doc);
    EXPECT_VALID("{'properties': {'a': {'default': 1}}}", "[]"); /* not an object: nothing to fill */
}

static void test_defaults_are_deep_copies(void) {
    json_t *schema = json("{'properties': {'hidden': {'default': [512, 256]}}}");
    json_t *first = json("{}"), *second = json("{}");
    schema_errors errs = {0};
    schema_validate(schema, first, &errs);
    schema_validate(schema, second, &errs);
    CHECK(errs.count == 0, "no errors");
    json_array_append_new(json_object_get(first, "hidden"), json_integer(7));
    CHECK(json_array_size(json_object_get(second, "hidden")) == 2, "the second copy is its own");
    CHECK(json_array_size(json_object_get(json_object_get(json_object_get(schema, "properties"), "hidden"), "default")) == 2,
          "the schema's default is untouched");
    schema_errors_free(&errs);
    json_decref(schema);
    json_decref(first);
    json_decref(second);
}

static void test_nested_defaults_fill(void) {
    const char *schema = "{'properties': {'train': {'type': 'object', 'default': {}, 'properties': {"
                         "'epochs': {'type': 'integer', 'default': 10},"
                         "'optimizer': {'type': 'object', 'default': {}, 'properties': {"
                         "'lr': {'type': 'number', 'default': 0.1}}}}}}}";
    json_t *doc = VALIDATED(schema, "{}");
    json_t *train = json_object_get(doc, "train");
    CHECK(json_integer_value(json_object_get(train, "epochs")) == 10, "train.epochs filled");
    CHECK(json_real_value(json_object_get(json_object_get(train, "optimizer"), "lr")) == 0.1, "train.optimizer.lr filled");
    json_decref(doc);
    doc = VALIDATED(schema, "{'train': {'optimizer': {'lr': 0.5}}}");
    train = json_object_get(doc, "train");
    CHECK(json_integer_value(json_object_get(train, "epochs")) == 10, "sibling of a given member filled");
    CHECK(json_real_value(json_object_get(json_object_get(train, "optimizer"), "lr")) == 0.5, "given lr kept");
    json_decref(doc);
    /* Through a $ref too. */
    doc = VALIDATED("{'$defs': {'five': {'type': 'integer', 'default': 5}}, 'properties': {'n': {'$ref': '#/$defs/five'}}}", "{}");
    CHECK(json_integer_value(json_object_get(doc, "n")) == 5, "a default behind a $ref fills");
    json_decref(doc);
}

static void test_filled_defaults_are_validated(void) {
    EXPECT_ERRORS("{'properties': {'n': {'type': 'integer', 'default': 'x'}}}", "{}",
                  {"/n", "must be an integer (got string \"x\")"});
    json_t *doc = VALIDATED("{'properties': {'n': {'type': 'integer', 'default': 3.0}}}", "{}");
    CHECK(json_is_integer(json_object_get(doc, "n")), "an integral real default becomes an integer");
    json_decref(doc);
}

/* --- all errors at once, pointers ------------------------------------------------------------ */

static void test_every_error_is_reported(void) {
    const char *schema = "{'type': 'object', 'additionalProperties': false, 'required': ['name'], 'properties': {"
                         "'name': {'type': 'string'}, 'epochs': {'type': 'integer', 'minimum': 1},"
                         "'hidden': {'type': 'array', 'items': {'type': 'integer', 'maximum': 100}},"
                         "'act': {'enum': ['relu', 'tanh']}}}";
    EXPECT_ERRORS(schema, "{'epochs': 0, 'hidden': [1, 200, 'x'], 'act': 'elu', 'extra': true}",
                  {"/name", "is required"}, {"/epochs", "must be at least 1 (got 0)"},
                  {"/hidden/1", "must be at most 100 (got 200)"}, {"/hidden/2", "must be an integer (got string \"x\")"},
                  {"/act", "must be one of: relu, tanh (got \"elu\")"},
                  {"/extra", "unknown field (allowed here: name, epochs, hidden, act)"});
}

static void test_pointer_escaping(void) {
    const char *schema = "{'additionalProperties': {'type': 'integer'}}";
    EXPECT_ERRORS(schema, "{'a/b': 'x', 'm~n': 'y', '~/': 'z', '': 'w'}", {"/a~1b", "must be an integer (got string \"x\")"},
                  {"/m~0n", "must be an integer (got string \"y\")"}, {"/~0~1", "must be an integer (got string \"z\")"},
                  {"/", "must be an integer (got string \"w\")"});
    EXPECT_ERRORS("{'additionalProperties': false}", "{'a/b': 1}", {"/a~1b", "unknown field (no fields are allowed here)"});
    EXPECT_ERRORS("{'properties': {'list': {'items': {'additionalProperties': false}}}}", "{'list': [{}, {}, {'k~': 1}]}",
                  {"/list/2/k~0", "unknown field (no fields are allowed here)"});
}

/* --- the error list ------------------------------------------------------------------------- */

static void test_error_list_format_and_json(void) {
    schema_errors errs = {0};
    char *empty = schema_errors_format(&errs);
    CHECK(!strcmp(empty, ""), "no errors format as an empty string");
    free(empty);
    schema_errors_add(&errs, "/train/batch_size", "must be at least %d (got %d)", 1, 0);
    schema_errors_add(&errs, "", "cannot read %s", "run.json");
    char *text = schema_errors_format(&errs);
    CHECK(!strcmp(text, "/train/batch_size: must be at least 1 (got 0)\ncannot read run.json"), "formatted: %s", text);
    free(text);
    json_t *list = schema_errors_to_json(&errs);
    json_t *expected = json("[{'pointer': '/train/batch_size', 'message': 'must be at least 1 (got 0)'},"
                            " {'pointer': '', 'message': 'cannot read run.json'}]");
    CHECK(json_equal(list, expected), "as JSON");
    json_decref(list);
    json_decref(expected);
    schema_errors odd = {0};
    schema_errors_add(&odd, "", "cannot read caf\xe9.json: No such file or directory");
    list = schema_errors_to_json(&odd);
    const char *message = json_string_value(json_object_get(json_array_get(list, 0), "message"));
    CHECK(message && !strcmp(message, "cannot read caf?.json: No such file or directory"),
          "bytes that are not UTF-8 do not lose the error");
    json_decref(list);
    schema_errors_free(&odd);

    /* schema_validate appends and returns only what it added. */
    json_t *schema = json("{'minimum': 1}"), *value = json("0");
    CHECK(schema_validate(schema, value, &errs) == 1 && errs.count == 3, "appends to the list and counts its own");
    CHECK(schema_validate(NULL, value, &errs) == 1, "no schema is an error, not a crash");
    CHECK(schema_validate(schema, NULL, &errs) == 1, "no instance is an error, not a crash");
    json_decref(schema);
    json_decref(value);
    schema_errors_free(&errs);
    CHECK(errs.count == 0 && errs.items == NULL, "freed list is empty and reusable");
}

/* Beyond SCHEMA_ERRORS_KEPT the violations are counted, not kept: a document with
 * thousands of bad items costs a counter. */
static void test_errors_are_capped(void) {
    json_t *schema = json("{'type': 'array', 'items': {'minimum': 1}, 'anyOf': [{'items': {'minimum': 1}}]}");
    json_t *value = json_array();
    for (int i = 0; i < 5000; i++) json_array_append_new(value, json_integer(0));
    schema_errors errs = {0};
    int found = schema_validate(schema, value, &errs);
    CHECK(found == 5001, "every violation is counted (5000 items and the anyOf), got %d", found);
    CHECK(errs.count == SCHEMA_ERRORS_KEPT && errs.dropped == 5001 - SCHEMA_ERRORS_KEPT,
          "the first %d are kept, the rest counted: kept %zu, dropped %zu", SCHEMA_ERRORS_KEPT, errs.count, errs.dropped);
    CHECK(schema_errors_total(&errs) == 5001, "the total is every one (%zu)", schema_errors_total(&errs));
    CHECK(!strcmp(errs.items[0].pointer, "/0") && !strcmp(errs.items[99].pointer, "/99"), "the first ones are kept, in order");
    json_t *list = schema_errors_to_json(&errs);
    CHECK(json_array_size(list) == SCHEMA_ERRORS_KEPT, "only those kept go to JSON (%zu)", json_array_size(list));
    json_decref(list);
    char *text = schema_errors_format(&errs);
    CHECK(strstr(text, "(and 4901 more: 5001 violations in all, the first 100 listed)") != NULL,
          "the text says how many more: ...%s", text + (strlen(text) > 120 ? strlen(text) - 120 : 0));
    free(text);
    CHECK(schema_validate(schema, value, &errs) == 5001, "a second pass over a full list still counts its own");
    schema_errors_free(&errs);
    CHECK(errs.count == 0 && errs.dropped == 0, "freed list is empty");
    json_decref(schema);
    json_decref(value);
}

int main(void) {
    test_type_messages();
    test_integral_real_becomes_integer();
    test_huge_integral_reals();
    test_number_bounds();
    test_multiple_of();
    test_string_length_in_code_points();
    test_nul_in_strings();
    test_pattern();
    test_long_values_are_cut_short_in_messages();
    test_enum_and_const();
    test_required();
    test_unknown_fields();
    test_property_counts();
    test_arrays();
    test_refs();
    test_all_any_one_of();
    test_combinators_fill_defaults_of_the_chosen_branch();
    test_not_if_then_else_and_boolean_schemas();
    test_errors_are_capped();
    test_defaults_fill_absent_members();
    test_defaults_are_deep_copies();
    test_nested_defaults_fill();
    test_filled_defaults_are_validated();
    test_every_error_is_reported();
    test_pointer_escaping();
    test_error_list_format_and_json();
    return test_done("test_validator");
}
