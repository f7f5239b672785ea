/* Serving the dashboard's files and the schema. See routes_static.h. */
#include "routes_static.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run_config.h"
#include "sweep_schema.h"
#include "base.h"

#ifndef DDPD_SOURCE_DIR
#define DDPD_SOURCE_DIR ""
#endif
#define MAX_FILE (8u << 20)

static char *web_dir, *uplot_dir;

static bool has_file(const char *dir, const char *name) {
    char path[PATH_MAX];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static char *exe_dir(void) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return NULL;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    return xstrdup(exe);
}

/* The first of `candidates` (NULL-terminated; NULL entries skipped) holding `marker`. */
static char *first_with(char **candidates, size_t n, const char *marker) {
    for (size_t i = 0; i < n; i++) {
        if (!candidates[i] || !candidates[i][0] || !has_file(candidates[i], marker)) continue;
        char real[PATH_MAX];
        return xstrdup(realpath(candidates[i], real) ? real : candidates[i]);
    }
    return NULL;
}

void routes_static_init(const char *flag) {
    char *bin = exe_dir();
    const char *env = getenv("DDPD_WEB_DIR");
    const char *given = flag && *flag ? flag : env && *env ? env : NULL;
    char *web_candidates[3] = {
        given ? xstrdup(given) : NULL,
        given || !bin ? NULL : xasprintf("%s/../share/ddpd/web", bin),
        given || !DDPD_SOURCE_DIR[0] ? NULL : xasprintf("%s/web", DDPD_SOURCE_DIR),
    };
    web_dir = first_with(web_candidates, 3, "index.html");
    if (!web_dir)
        log_warn("the dashboard's files (index.html) are not in %s: GET / will answer 404 (--web-dir)",
                 given ? given : "<bin>/../share/ddpd/web or the source tree");
    char *uplot_candidates[4] = {
        web_dir ? xasprintf("%s/vendor/uplot", web_dir) : NULL,
        web_dir ? xasprintf("%s/../node_modules/uplot/dist", web_dir) : NULL,
        bin ? xasprintf("%s/../share/ddpd/vendor/uplot", bin) : NULL,
        DDPD_SOURCE_DIR[0] ? xasprintf("%s/node_modules/uplot/dist", DDPD_SOURCE_DIR) : NULL,
    };
    uplot_dir = first_with(uplot_candidates, 4, "uPlot.esm.js");
    if (web_dir && !uplot_dir)
        log_warn("uPlot (the dashboard's charts) is not installed: run scripts/install-deps.sh (npm ci)");
    if (web_dir) log_info("dashboard: %s%s%s", web_dir, uplot_dir ? "; uPlot: " : "", uplot_dir ? uplot_dir : "");
    for (size_t i = 0; i < 3; i++) free(web_candidates[i]);
    for (size_t i = 0; i < 4; i++) free(uplot_candidates[i]);
    free(bin);
}

static const char *content_type(const char *name) {
    static const char *const types[][2] = {
        {".html", "text/html; charset=utf-8"}, {".js", "text/javascript; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},   {".json", "application/json"},
        {".svg", "image/svg+xml"},             {".png", "image/png"},
        {".ico", "image/x-icon"},              {".map", "application/json"},
        {".ts", "text/plain; charset=utf-8"},
    };
    const char *dot = strrchr(name, '.');
    for (size_t i = 0; dot && i < sizeof types / sizeof *types; i++)
        if (strcmp(dot, types[i][0]) == 0) return types[i][1];
    return "application/octet-stream";
}

/* Plain names only: letters, digits, '.', '-', '_', not starting with a dot. */
static bool safe_name(const char *name) {
    if (!name[0] || name[0] == '.') return false;
    for (const char *p = name; *p; p++)
        if (!(*p >= 'a' && *p <= 'z') && !(*p >= 'A' && *p <= 'Z') && !(*p >= '0' && *p <= '9') && !strchr(".-_", *p))
            return false;
    return true;
}

static void serve_file(response *rs, const char *dir, const char *name, const char *missing) {
    if (!dir) {
        reply_problem(rs, 404, NULL, "%s", missing);
        return;
    }
    if (!safe_name(name)) {
        reply_problem(rs, 404, NULL, "there is no file \"%.60s\" here", name);
        return;
    }
    char *path = xasprintf("%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    struct stat sb;
    if (!f || fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size > MAX_FILE) {
        if (f) fclose(f);
        reply_problem(rs, 404, NULL, "there is no file \"%.60s\" here", name);
        free(path);
        return;
    }
    size_t len = (size_t)sb.st_size;
    char *data = xmalloc(len ? len : 1);
    size_t got = fread(data, 1, len, f);
    fclose(f);
    free(path);
    if (got != len) {
        free(data);
        reply_problem(rs, 500, NULL, "%s could not be read", name);
        return;
    }
    reply_text(rs, 200, data, len, content_type(name));
}

static const char NO_WEB[] =
    "the dashboard's files were not found: start ddpd with --web-dir pointing at the repository's web/ directory";

static void get_index(request *rq, response *rs) {
    (void)rq;
    serve_file(rs, web_dir, "index.html", NO_WEB);
}

static void get_ui(request *rq, response *rs) { serve_file(rs, web_dir, rq->id_text, NO_WEB); }

static void get_uplot(request *rq, response *rs) {
    serve_file(rs, uplot_dir, rq->id_text, "uPlot is not installed: run scripts/install-deps.sh (it runs npm ci)");
}

static void reply_schema(response *rs, const char *text) {
    reply_text(rs, 200, xstrdup(text), strlen(text), "application/schema+json");
}

static void get_schema(request *rq, response *rs) {
    (void)rq;
    reply_schema(rs, run_config_schema_text());
}

static void get_sweep_schema(request *rq, response *rs) {
    (void)rq;
    reply_schema(rs, sweep_schema_text());
}

/* Open to all, on a server whose reads need a token too: the dashboard's code (its
 * login page must load before it has a token) and the schemas hold no run's data. */
const route static_routes[] = {
    {.method = "GET", .pattern = "/", .handler = get_index, .open = true},
    {.method = "GET", .pattern = "/ui/{id}", .handler = get_ui, .open = true},
    {.method = "GET", .pattern = "/vendor/uplot/{id}", .handler = get_uplot, .open = true},
    {.method = "GET", .pattern = "/schema/run-config.schema.json", .handler = get_schema, .open = true},
    {.method = "GET", .pattern = "/schema/sweep.schema.json", .handler = get_sweep_schema, .open = true},
    /* where /openapi.json's relative references to them resolve */
    {.method = "GET", .pattern = "/run-config.schema.json", .handler = get_schema, .open = true},
    {.method = "GET", .pattern = "/sweep.schema.json", .handler = get_sweep_schema, .open = true},
};
const size_t static_routes_count = sizeof static_routes / sizeof *static_routes;
