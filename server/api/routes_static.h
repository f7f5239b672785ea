/* The dashboard's files, served by ddpd itself (no build step, no other server):
 *
 *   GET /                                 web/index.html
 *   GET /ui/{file}                        web/{file}: the dashboard's modules and styles
 *   GET /vendor/uplot/{file}              uPlot's dist/ (npm's uplot, installed by
 *                                         scripts/install-deps.sh), the charting library
 *   GET /schema/run-config.schema.json    the run-config schema the server validates
 *                                         with (embedded in the binary): the submit
 *                                         form's defaults come from it
 *   GET /schema/sweep.schema.json         the sweep schema a body of POST /sweeps is
 *                                         checked against (embedded too)
 * and both schemas beside /openapi.json (/run-config.schema.json, /sweep.schema.json),
 * where its relative references to them resolve.
 *
 * Where web/ is: --web-dir (DDPD_WEB_DIR), else <bin>/../share/ddpd/web (installed),
 * else the source tree ddpd was built from (so that a build directory's ddpd, the
 * tests', finds it). uPlot: <web>/vendor/uplot, <web>/../node_modules/uplot/dist,
 * <bin>/../share/ddpd/vendor/uplot, or the source tree's node_modules. */
#ifndef DDPD_SERVER_API_ROUTES_STATIC_H
#define DDPD_SERVER_API_ROUTES_STATIC_H

#include <stddef.h>

#include "http.h"

/* `web_dir`: the flag's value, or NULL. Logs where it found what (or a warning). */
void routes_static_init(const char *web_dir);

extern const route static_routes[];
extern const size_t static_routes_count;

#endif
