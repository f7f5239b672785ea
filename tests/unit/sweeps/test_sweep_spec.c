/* A sweep's spec (server/sweep/sweep_spec.h) on hand-made bodies: the grid's order and
 * size, a seeded random search's trials (the same twice, within their ranges, each
 * trial's a function of its number alone), the rungs, a trial's config (a JSON path,
 * an environment variable, a placeholder), and refusals naming the parameter; the body
 * checked by schema/sweep.schema.json: every violation with its pointer, unknown
 * fields, at most 1000 values a parameter and 64 parameters, "<hidden>" allowed by
 * the schema (a masked answer) but refused in a submission, the defaults filled into
 * what GET /sweeps/{id} shows, a stored spec parsed again the same. */
#include "check.h"
#include "sweep_schema.h"
#include "sweep_spec.h"

#include <jansson.h>
#include <math.h>
#include <string.h>

static const char *BASE = "{\"train\": {\"epochs\": 9}, \"distributed\": {\"world_size\": 1}}";

static json_t *body(const char *params, const char *extra) {
    char text[4096];
    snprintf(text, sizeof text, "{\"base\": %s, \"parameters\": %s, \"metric\": {\"key\": \"test_loss\"}%s%s}", BASE,
             params, extra ? ", " : "", extra ? extra : "");
    json_error_t je;
    json_t *b = json_loads(text, 0, &je);
    REQUIRE(b, "the body parses: %s", je.text);
    return b;
}

static sweep_spec *parse(const char *params, const char *extra, schema_errors *errs) {
    json_t *b = body(params, extra);
    sweep_spec *s = sweep_spec_parse(b, errs);
    json_decref(b);
    return s;
}

static void grid(void) {
    schema_errors e = {0};
    sweep_spec *s = parse("{\"train.optimizer.lr\": {\"values\": [0.1, 0.2]}, \"model.hidden.0\": {\"min\": 8, \"max\": 10}}",
                          NULL, &e);
    REQUIRE(s, "a grid of values and an int range: %s", e.count ? e.items[0].message : "");
    CHECK(s->n_trials == 6 && s->max_trials == 6, "2 x 3 trials: %d", s->n_trials);
    const double lr[6] = {0.1, 0.1, 0.1, 0.2, 0.2, 0.2};
    const int width[6] = {8, 9, 10, 8, 9, 10};
    for (int t = 0; t < 6; t++) {
        json_t *p = sweep_trial_params(s, t);
        CHECK(json_real_value(json_object_get(p, "train.optimizer.lr")) == lr[t] &&
                  json_integer_value(json_object_get(p, "model.hidden.0")) == width[t],
              "trial %d: the last parameter varies fastest", t);
        json_t *cfg = sweep_trial_config(s, p, "g-t0");
        CHECK(json_integer_value(json_array_get(json_object_get(json_object_get(cfg, "model"), "hidden"), 0)) == width[t],
              "trial %d's config has its width (a default filled to take it)", t);
        CHECK(!strcmp(json_string_value(json_object_get(cfg, "name")), "g-t0"), "and its name");
        json_decref(cfg);
        json_decref(p);
    }
    CHECK(sweep_rules_rung_epochs(&s->rules, 0) == 0, "no early stopping: no rungs");
    sweep_spec_free(s);
    s = parse("{\"train.optimizer.lr\": {\"values\": [0.1]}}",
              "\"early_stopping\": {\"type\": \"asha\", \"min_resource\": 1, \"reduction_factor\": 3}", &e);
    REQUIRE(s, "an ASHA sweep");
    int r0 = sweep_rules_rung_epochs(&s->rules, 0), r1 = sweep_rules_rung_epochs(&s->rules, 1),
        r2 = sweep_rules_rung_epochs(&s->rules, 2);
    CHECK(r0 == 1 && r1 == 3 && r2 == 0, "rungs at 1 and 3 epochs of 9: %d %d %d", r0, r1, r2);
    sweep_spec_free(s);
    schema_errors_free(&e);
}

static void random_search(void) {
    const char *params = "{\"train.optimizer.lr\": {\"min\": 0.0001, \"max\": 0.1, \"log\": true},"
                         " \"model.hidden.0\": {\"min\": 16, \"max\": 128}, \"train.optimizer.type\": {\"values\": [\"adam\", \"sgd\"]}}";
    schema_errors e = {0};
    sweep_spec *a = parse(params, "\"method\": \"random\", \"seed\": 7, \"max_trials\": 50", &e);
    sweep_spec *b = parse(params, "\"method\": \"random\", \"seed\": 7, \"max_trials\": 50", &e);
    sweep_spec *c = parse(params, "\"method\": \"random\", \"seed\": 8, \"max_trials\": 50", &e);
    REQUIRE(a && b && c, "three random searches: %s", e.count ? e.items[0].message : "");
    int differ = 0, sgd = 0;
    for (int t = 49; t >= 0; t--) { /* in another order than they are made */
        json_t *pa = sweep_trial_params(a, t), *pb = sweep_trial_params(b, t), *pc = sweep_trial_params(c, t);
        CHECK(json_equal(pa, pb), "seed 7 twice: trial %d the same", t);
        differ += !json_equal(pa, pc);
        double lr = json_real_value(json_object_get(pa, "train.optimizer.lr"));
        json_int_t w = json_integer_value(json_object_get(pa, "model.hidden.0"));
        CHECK(lr >= 0.0001 && lr <= 0.1 && json_is_integer(json_object_get(pa, "model.hidden.0")) && w >= 16 && w <= 128,
              "trial %d within its ranges: %g %lld", t, lr, (long long)w);
        sgd += !strcmp(json_string_value(json_object_get(pa, "train.optimizer.type")), "sgd");
        json_decref(pa);
        json_decref(pb);
        json_decref(pc);
    }
    CHECK(differ == 50, "seed 8 draws other trials (%d of 50 differ)", differ);
    CHECK(sgd > 5 && sgd < 45, "both values are drawn (%d sgd of 50)", sgd);
    sweep_spec_free(a);
    sweep_spec_free(b);
    sweep_spec_free(c);
    schema_errors_free(&e);
}

static void command_trials(void) {
    json_error_t je;
    json_t *b = json_loads("{\"base\": {\"command\": [\"python3\", \"t.py\", \"--w={w}\", \"{w}{w}\"]},"
                           " \"parameters\": {\"env.LR\": {\"values\": [0.1]}, \"{w}\": {\"values\": [64]}},"
                           " \"metric\": {\"key\": \"acc\"}}", 0, &je);
    schema_errors e = {0};
    sweep_spec *s = sweep_spec_parse(b, &e);
    REQUIRE(s, "a command-run sweep: %s", e.count ? e.items[0].message : "");
    json_t *p = sweep_trial_params(s, 0), *cfg = sweep_trial_config(s, p, "c-t0");
    json_t *cmd = json_object_get(cfg, "command");
    CHECK(!strcmp(json_string_value(json_object_get(json_object_get(cfg, "env"), "LR")), "0.1"), "LR=0.1 in env");
    CHECK(!strcmp(json_string_value(json_array_get(cmd, 2)), "--w=64") &&
              !strcmp(json_string_value(json_array_get(cmd, 3)), "6464"),
          "every {w} replaced: %s %s", json_string_value(json_array_get(cmd, 2)), json_string_value(json_array_get(cmd, 3)));
    json_decref(p);
    json_decref(cfg);
    sweep_spec_free(s);
    json_decref(b);
    schema_errors_free(&e);
}

/* The body is refused, its first error at `pointer` with `needle` in the message. */
static void refused(const char *params, const char *extra, const char *pointer, const char *needle) {
    schema_errors e = {0};
    sweep_spec *s = parse(params, extra, &e);
    CHECK(!s && e.count && !strcmp(e.items[0].pointer, pointer) && strstr(e.items[0].message, needle),
          "refused at %s naming \"%s\": %s %s", pointer, needle, e.count ? e.items[0].pointer : "(none)",
          e.count ? e.items[0].message : "");
    sweep_spec_free(s);
    schema_errors_free(&e);
}

static void refusals(void) {
    refused("{\"train.nope\": {\"values\": [1]}}", NULL, "/parameters/train.nope", "not a path in the base config");
    refused("{\"model.hidden.7\": {\"values\": [1]}}", NULL, "/parameters/model.hidden.7", "not a path");
    refused("{\"train.epochs\": {\"values\": []}}", NULL, "/parameters/train.epochs/values", "at least 1 item");
    refused("{\"train.epochs\": {\"min\": 5, \"max\": 2}}", NULL, "/parameters/train.epochs", "range is empty");
    refused("{\"train.optimizer.lr\": {\"min\": 0, \"max\": 1, \"log\": true}}", "\"method\": \"random\", \"max_trials\": 2",
            "/parameters/train.optimizer.lr", "min > 0");
    refused("{\"train.epochs\": {\"values\": [3, 0]}}", NULL, "/parameters", "/train/epochs");
    refused("{\"train.epochs\": {\"values\": [1, 2, 3]}}", "\"max_trials\": 2", "/max_trials", "grid has 3 trials");
    refused("{\"train.optimizer.lr\": {\"min\": 0.1, \"max\": 0.2}}", NULL, "/parameters/train.optimizer.lr", "float range");
    refused("{\"env.X\": {\"values\": [1]}}", NULL, "/parameters/env.X", "command run");
    refused("{\"train.epochs\": {\"values\": [1]}}", "\"method\": \"random\"", "/max_trials", "needs max_trials");
    refused("{\"train.epochs\": {\"values\": [1]}}", "\"early_stopping\": {\"type\": \"asha\", \"min_resource\": 9}",
            "/early_stopping/min_resource", "below train.epochs");
}

/* A body's text (with `base` and a metric unless it has its own) is refused: its
 * violations, in order, at pointers[] with needles[] in their messages. */
static void refused_whole(const char *text, int n, const char *const *pointers, const char *const *needles) {
    json_error_t je;
    json_t *b = json_loads(text, 0, &je);
    REQUIRE(b, "the body parses: %s (%s)", je.text, text);
    schema_errors e = {0};
    sweep_spec *s = sweep_spec_parse(b, &e);
    bool all = !s && (int)e.count == n;
    for (int i = 0; all && i < n; i++)
        all = !strcmp(e.items[i].pointer, pointers[i]) && strstr(e.items[i].message, needles[i]);
    char *got = schema_errors_format(&e);
    CHECK(all, "%s: refused with %d violations (%s: %s first): got %zu:\n%s", text, n, pointers[0], needles[0], e.count,
          got);
    free(got);
    sweep_spec_free(s);
    schema_errors_free(&e);
    json_decref(b);
}

static void schema_checks(void) {
    REQUIRE(sweep_schema(), "the embedded sweep schema parses");
    const char *text = sweep_schema_text();
    CHECK(text && strstr(text, "\"urn:ddpd:schema:sweep\""), "its text is the file's");

    /* every violation the schema finds, each at its pointer */
    refused_whole("{\"base\": {}, \"parameters\": {\"train.epochs\": {\"values\": [1]}}, \"metric\": {\"key\": \"test_loss\"},"
                  " \"parallel\": 0, \"early_stoping\": {\"type\": \"asha\"}, \"method\": \"bayes\"}",
                  3, (const char *const[]){"/method", "/parallel", "/early_stoping"},
                  (const char *const[]){"must be one of: grid, random", "at least 1", "unknown field"});
    refused_whole("{\"parameters\": {\"train.epochs\": {\"values\": [1]}}}", 2, (const char *const[]){"/base", "/metric"},
                  (const char *const[]){"is required", "is required"});
    refused_whole("[1, 2]", 1, (const char *const[]){""}, (const char *const[]){"must be an object"});
    /* the base is a run config: its own violations under /base, beside the schema's */
    refused_whole("{\"base\": {\"train\": {\"epochs\": 0}}, \"parameters\": {}, \"metric\": {\"key\": \"test_loss\"}}", 2,
                  (const char *const[]){"/parameters", "/base/train/epochs"},
                  (const char *const[]){"at least 1 field", "at least 1"});

    /* a parameter: values, or a range, nothing else */
    refused("{\"train.epochs\": {\"values\": [1], \"min\": 1, \"max\": 2}}", NULL, "/parameters/train.epochs/values",
            "unknown field (allowed here: min, max, log, type, when)");
    refused("{\"train.epochs\": {\"valuse\": [1]}}", NULL, "/parameters/train.epochs/values", "is required");
    refused("{\"train.epochs\": {\"min\": 1}}", NULL, "/parameters/train.epochs/max", "is required");
    refused("{\"train.epochs\": [1, 2]}", NULL, "/parameters/train.epochs", "must be an object");
    refused("{\"train.epochs\": {\"min\": 1, \"max\": \"9\"}}", NULL, "/parameters/train.epochs/max",
            "does not match any of the allowed forms");
    refused("{\"train.epochs\": {\"min\": 1, \"max\": 3, \"type\": \"double\"}}", NULL,
            "/parameters/train.epochs/type", "must be one of: float, int");
    refused("{\"train.epochs\": {\"values\": [1]}}", "\"name\": \"my sweep\"", "/name", "must match the pattern");
    refused("{\"train.epochs\": {\"values\": [1]}}", "\"seed\": -1", "/seed", "at least 0");
    refused("{\"train.epochs\": {\"values\": [1]}}", "\"early_stopping\": {\"min_resource\": 1}",
            "/early_stopping/type", "is required");
    refused("{\"train.epochs\": {\"values\": [1]}}", "\"metric\": {\"key\": \"\"}", "/metric/key", "at least 1 character");

    /* bounds on the work a body asks for: 1000 values a parameter, 64 parameters */
    json_t *b = body("{\"train.epochs\": {\"values\": [1]}}", "\"method\": \"random\", \"max_trials\": 2");
    json_t *values = json_object_get(json_object_get(json_object_get(b, "parameters"), "train.epochs"), "values");
    for (int i = 2; i <= 1001; i++) json_array_append_new(values, json_integer(i));
    schema_errors e = {0};
    sweep_spec *s = sweep_spec_parse(b, &e);
    CHECK(!s && e.count == 1 && !strcmp(e.items[0].pointer, "/parameters/train.epochs/values") &&
              strstr(e.items[0].message, "at most 1000 items"),
          "1001 values: refused (%s %s)", e.count ? e.items[0].pointer : "", e.count ? e.items[0].message : "");
    schema_errors_free(&e);
    json_array_remove(values, 1000);
    s = sweep_spec_parse(b, &e);
    CHECK(s && s->n_trials == 2, "1000 values: taken (%s)", e.count ? e.items[0].message : "");
    sweep_spec_free(s);
    schema_errors_free(&e);
    json_t *params = json_object_get(b, "parameters");
    for (int i = 0; i < 64; i++) {
        char key[32];
        snprintf(key, sizeof key, "env.V%d", i);
        json_object_set_new(params, key, json_pack("{s:[i]}", "values", 1));
    }
    s = sweep_spec_parse(b, &e);
    CHECK(!s && e.count == 1 && !strcmp(e.items[0].pointer, "/parameters") && strstr(e.items[0].message, "at most 64 fields"),
          "65 parameters: refused (%s %s)", e.count ? e.items[0].pointer : "", e.count ? e.items[0].message : "");
    schema_errors_free(&e);
    json_decref(b);

    /* "<hidden>": an answer's (the schema allows it), never a submission's */
    json_error_t je;
    json_t *masked = json_loads("{\"base\": {\"command\": [\"python3\", \"--w={w}\"], \"env\": {\"K\": \"<hidden>\"}},"
                                " \"parameters\": {\"env.K\": {\"min\": \"<hidden>\", \"max\": \"<hidden>\"},"
                                " \"{w}\": {\"values\": [\"<hidden>\"]}}, \"metric\": {\"key\": \"acc\"}}", 0, &je);
    REQUIRE(masked, "a masked spec parses: %s", je.text);
    CHECK(schema_validate(sweep_schema(), masked, &e) == 0, "a masked answer's spec is a sweep by the schema: %s",
          e.count ? e.items[0].message : "");
    schema_errors_free(&e);
    s = sweep_spec_parse(masked, &e);
    CHECK(!s && e.count == 1 && !strcmp(e.items[0].pointer, "/parameters/env.K/min") &&
              strstr(e.items[0].message, "hidden from its reader: give the number itself"),
          "but refused as a submission, naming the field and what to give: %s %s", e.count ? e.items[0].pointer : "",
          e.count ? e.items[0].message : "");
    sweep_spec_free(s);
    schema_errors_free(&e);
    json_decref(masked);

    /* the defaults filled into what GET /sweeps/{id} shows; parsed again the same */
    s = parse("{\"train.epochs\": {\"values\": [2, 3]}}", "\"early_stopping\": {\"type\": \"median\"}", &e);
    REQUIRE(s, "a sweep with defaults: %s", e.count ? e.items[0].message : "");
    json_t *want = json_loads("{\"name\": \"sweep\", \"method\": \"grid\", \"seed\": 0, \"parallel\": 2,"
                              " \"preemptible\": false, \"max_trials\": 2, \"metric\": {\"key\": \"test_loss\","
                              " \"goal\": \"minimize\"}, \"early_stopping\": {\"type\": \"median\", \"min_resource\": 1,"
                              " \"reduction_factor\": 3, \"min_trials\": 3}}", 0, &je);
    const char *k;
    json_t *v;
    int same = 0;
    json_object_foreach(want, k, v) same += json_equal(json_object_get(s->spec, k), v);
    CHECK(same == (int)json_object_size(want), "the spec has every default (%d of %zu)", same, json_object_size(want));
    CHECK(s->stop == STOP_MEDIAN && s->rules.min_resource == 1 && s->rules.min_trials == 3 && !s->rules.maximize &&
              s->rules.epochs == 9,
          "the rules' numbers: %d %d %d", s->rules.min_resource, s->rules.min_trials, s->rules.epochs);
    char *stored = json_dumps(s->spec, JSON_COMPACT);
    sweep_spec *again = sweep_spec_load(stored);
    CHECK(again && json_equal(again->spec, s->spec) && again->n_trials == 2 && again->stop == STOP_MEDIAN,
          "the stored spec parses again to the same");
    free(stored);
    sweep_spec_free(again);
    sweep_spec_free(s);
    json_decref(want);
    schema_errors_free(&e);
}

/* Conditional parameters ("when"): momentum only with sgd. */
#define OPT_TYPE "\"train.optimizer.type\": {\"values\": [\"sgd\", \"adam\"]}"
#define MOMENTUM(extra) "\"train.optimizer.momentum\": {\"values\": [0.5, 0.9]" extra "}"
#define SGD_ONLY ", \"when\": {\"train.optimizer.type\": [\"sgd\"]}"

static bool has(const json_t *p, const char *key) { return json_object_get(p, key) != NULL; }

static void conditional(void) {
    schema_errors e = {0};
    sweep_spec *s = parse("{" OPT_TYPE ", " MOMENTUM(SGD_ONLY) "}", NULL, &e);
    REQUIRE(s, "a grid with momentum only for sgd: %s %s", e.count ? e.items[0].pointer : "",
            e.count ? e.items[0].message : "");
    CHECK(s->n_trials == 3 && sweep_sequence_length(s) == 3, "sgd x {0.5, 0.9}, then adam once: %d", s->n_trials);
    const char *want[3] = {"{\"train.optimizer.type\": \"sgd\", \"train.optimizer.momentum\": 0.5}",
                           "{\"train.optimizer.type\": \"sgd\", \"train.optimizer.momentum\": 0.9}",
                           "{\"train.optimizer.type\": \"adam\"}"};
    for (int t = 0; t < 3; t++) {
        json_t *p = sweep_trial_params(s, t), *w = json_loads(want[t], 0, NULL);
        char *got = json_dumps(p, JSON_COMPACT);
        CHECK(json_equal(p, w), "grid point %d: %s, got %s", t, want[t], got);
        free(got);
        json_t *cfg = sweep_trial_config(s, p, NULL);
        json_t *opt = json_object_get(json_object_get(cfg, "train"), "optimizer");
        CHECK(t < 2 ? json_real_value(json_object_get(opt, "momentum")) == (t ? 0.9 : 0.5)
                    : json_number_value(json_object_get(opt, "momentum")) == 0,
              "point %d's config: momentum %s", t, t < 2 ? "set" : "the base's (absent or its default 0)");
        json_decref(cfg);
        json_decref(w);
        json_decref(p);
    }
    /* enqueued by hand: momentum only with sgd */
    json_t *g = json_loads("{\"train.optimizer.type\": \"adam\", \"train.optimizer.momentum\": 0.5}", 0, NULL);
    json_t *out = sweep_params_given(s, g, &e);
    CHECK(!out && e.count && !strcmp(e.items[0].pointer, "/params/train.optimizer.momentum") &&
              strstr(e.items[0].message, "does not apply") && strstr(e.items[0].message, "train.optimizer.type is one of"),
          "momentum given with adam: refused naming it: %s %s", e.count ? e.items[0].pointer : "",
          e.count ? e.items[0].message : "");
    json_decref(g);
    schema_errors_free(&e);
    e = (schema_errors){0};
    g = json_loads("{\"train.optimizer.type\": \"sgd\"}", 0, NULL);
    out = sweep_params_given(s, g, &e);
    CHECK(!out && e.count && !strcmp(e.items[0].pointer, "/params/train.optimizer.momentum") &&
              strstr(e.items[0].message, "missing"), "sgd without momentum: missing");
    json_decref(g);
    schema_errors_free(&e);
    e = (schema_errors){0};
    g = json_loads("{\"train.optimizer.type\": \"adam\"}", 0, NULL);
    out = sweep_params_given(s, g, &e);
    CHECK(out && json_object_size(out) == 1, "adam alone: taken");
    json_decref(out);
    json_decref(g);
    sweep_spec_free(s);

    /* a random search: momentum drawn only where the type is sgd; a chain (nesterov
     * only with momentum 0.9, itself only with sgd) */
    s = parse("{" OPT_TYPE ", " MOMENTUM(SGD_ONLY) ", \"train.optimizer.nesterov\": {\"values\": [true, false], "
              "\"when\": {\"train.optimizer.momentum\": [0.9]}}}",
              "\"method\": \"random\", \"max_trials\": 40, \"seed\": 5", &e);
    REQUIRE(s, "a random search with a chain of conditions: %s", e.count ? e.items[0].message : "");
    int sgd = 0, adam = 0, nesterov = 0;
    for (int t = 0; t < 40; t++) {
        json_t *p = sweep_trial_params(s, t);
        bool is_sgd = !strcmp(json_string_value(json_object_get(p, "train.optimizer.type")), "sgd");
        sgd += is_sgd;
        adam += !is_sgd;
        CHECK(has(p, "train.optimizer.momentum") == is_sgd, "trial %d: momentum only with sgd", t);
        bool m9 = is_sgd && json_real_value(json_object_get(p, "train.optimizer.momentum")) == 0.9;
        CHECK(has(p, "train.optimizer.nesterov") == m9, "trial %d: nesterov only with momentum 0.9 (and sgd)", t);
        nesterov += m9;
        json_t *again = sweep_trial_params(s, t);
        CHECK(json_equal(p, again), "trial %d the same twice", t);
        json_decref(again);
        json_decref(p);
    }
    CHECK(sgd > 5 && adam > 5 && nesterov > 0, "both types drawn (%d sgd, %d adam), nesterov %d times", sgd, adam,
          nesterov);
    sweep_spec_free(s);

    /* TPE: momentum modelled over the sgd trials alone; a suggestion with adam has none */
    s = parse("{" OPT_TYPE ", " MOMENTUM(SGD_ONLY) "}",
              "\"method\": \"tpe\", \"max_trials\": 40, \"tpe\": {\"n_startup_trials\": 4}", &e);
    REQUIRE(s, "a tpe sweep with a conditional parameter");
    /* sgd with momentum 0.9 is good, 0.5 bad; adam bad: TPE should pick sgd and 0.9 */
    const char *ps[8] = {"{\"train.optimizer.type\": \"sgd\", \"train.optimizer.momentum\": 0.9}",
                         "{\"train.optimizer.type\": \"sgd\", \"train.optimizer.momentum\": 0.5}",
                         "{\"train.optimizer.type\": \"adam\"}",
                         "{\"train.optimizer.type\": \"sgd\", \"train.optimizer.momentum\": 0.9}",
                         "{\"train.optimizer.type\": \"adam\"}",
                         "{\"train.optimizer.type\": \"sgd\", \"train.optimizer.momentum\": 0.5}",
                         "{\"train.optimizer.type\": \"adam\"}",
                         "{\"train.optimizer.type\": \"sgd\", \"train.optimizer.momentum\": 0.9}"};
    const double metric[8] = {0.1, 0.9, 0.8, 0.1, 0.85, 0.95, 0.9, 0.12};
    int picked_good = 0, with_adam_momentum = 0;
    for (int t = 0; t < 20; t++) {
        json_t *p = sweep_tpe_params(s, 8 + t, 0, ps, metric, 8);
        bool is_sgd = !strcmp(json_string_value(json_object_get(p, "train.optimizer.type")), "sgd");
        with_adam_momentum += !is_sgd && has(p, "train.optimizer.momentum");
        picked_good += is_sgd && json_real_value(json_object_get(p, "train.optimizer.momentum")) == 0.9;
        json_decref(p);
    }
    CHECK(with_adam_momentum == 0, "no suggestion has momentum with adam: %d", with_adam_momentum);
    CHECK(picked_good >= 14, "TPE suggests sgd with momentum 0.9 (its good trials) most of the time: %d of 20",
          picked_good);
    sweep_spec_free(s);
    schema_errors_free(&e);

    /* bad conditions: 400s naming the field */
    refused("{" OPT_TYPE ", \"train.optimizer.momentum\": {\"values\": [0.5], \"when\": {\"train.optimizer.kind\": "
            "[\"sgd\"]}}}", NULL, "/parameters/train.optimizer.momentum/when/train.optimizer.kind", "no parameter of the sweep");
    refused("{" OPT_TYPE ", \"train.optimizer.momentum\": {\"values\": [0.5], \"when\": {\"train.optimizer.type\": "
            "[\"rmsprop\"]}}}", NULL, "/parameters/train.optimizer.momentum/when/train.optimizer.type",
            "\"rmsprop\" is not one of train.optimizer.type's values");
    refused("{\"train.optimizer.lr\": {\"min\": 0.1, \"max\": 0.2}, \"train.optimizer.momentum\": {\"values\": [0.5], "
            "\"when\": {\"train.optimizer.lr\": [0.1]}}}", "\"method\": \"random\", \"max_trials\": 2",
            "/parameters/train.optimizer.momentum/when/train.optimizer.lr", "a range");
    refused("{\"train.optimizer.type\": {\"values\": [\"sgd\"], \"when\": {\"train.optimizer.type\": [\"sgd\"]}}}", NULL,
            "/parameters/train.optimizer.type/when/train.optimizer.type", "on itself");
    refused("{\"train.optimizer.type\": {\"values\": [\"sgd\", \"adam\"], \"when\": {\"train.optimizer.momentum\": [0.5]}}, "
            MOMENTUM(SGD_ONLY) "}", NULL, "/parameters/train.optimizer.type/when",
            "loop (train.optimizer.type -> train.optimizer.momentum -> train.optimizer.type)");
    refused("{" OPT_TYPE ", \"train.optimizer.momentum\": {\"values\": [0.5], \"when\": {}}}", NULL,
            "/parameters/train.optimizer.momentum/when", "");
    refused("{" OPT_TYPE ", \"train.optimizer.momentum\": {\"values\": [0.5], \"when\": {\"train.optimizer.type\": \"sgd\"}}}",
            NULL, "/parameters/train.optimizer.momentum/when/train.optimizer.type", "");
}

int main(void) {
    schema_checks();
    grid();
    random_search();
    command_trials();
    refusals();
    conditional();
    return test_done("test_sweep_spec");
}
