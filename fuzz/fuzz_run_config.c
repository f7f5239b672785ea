/* libFuzzer harness: any bytes as a submitted run config, through what POST /runs
 * and ddp-trainer do with one (JSON parse, schema validation with defaults, the
 * cross-field rules, the typed config). Must never crash, leak or misbehave. */
#include <jansson.h>
#include <stdint.h>

#include "run_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    json_error_t jerr;
    json_t *doc = json_loadb((const char *)data, n, JSON_REJECT_DUPLICATES, &jerr);
    if (!doc) return 0;
    run_config cfg;
    schema_errors errs = {0};
    run_config_from_json(doc, &cfg, &errs);
    char *text = schema_errors_format(&errs);
    free(text);
    json_decref(schema_errors_to_json(&errs));
    schema_errors_free(&errs);
    json_decref(doc);
    return 0;
}
