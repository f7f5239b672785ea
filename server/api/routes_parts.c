/* A run's parts' reports: see routes_parts.h. What the part forwards is relayed as
 * an agent's is (node_relay.h), read by ingest and committed to the store before the
 * answer says it was taken: a part lets go of what it sent only once it is stored,
 * so a server killed after answering has lost nothing of it. */
#include "routes_parts.h"

#include <stdio.h>
#include <string.h>

#include "auth.h"
#include "base.h"
#include "executor_slurm.h"
#include "ingest.h"
#include "node_relay.h"
#include "params.h"
#include "scheduler.h"
#include "store.h"

#define REPORT_S 1

/* POST /runs/{id}/parts {"node_rank", "node", "address", "boot", "master_port", "stop_t",
 * "parts": [...], "streams": [...], "logs": [...]} -> {"parts", "stop", "streams", "logs"} */
static void post_part(request *rq, response *rs) {
    int64_t id;
    if (!param_run_id(rq, rs, &id)) return;
    const char *secret = auth_bearer_value(rq_header(rq, "Authorization"));
    if (!secret) {
        reply_problem(rs, 401, NULL, "this route needs the run's secret: send \"Authorization: Bearer <secret>\" with "
                      "the secret ddpd gave run %lld's job (DDPD_RUN_SECRET)", (long long)id);
        return;
    }
    json_error_t e;
    json_t *b = json_loadb(rq->body, rq->body_len, 0, &e);
    if (!json_is_object(b)) {
        reply_problem(rs, 400, NULL, "the body is not a JSON object: %s", b ? "it is another JSON value" : e.text);
        json_decref(b);
        return;
    }
    if (!scheduler_batch(NULL)) {
        reply_problem(rs, 404, NULL, "run %lld has no Slurm job: this server runs no Slurm jobs (ddpd serve "
                      "--executor slurm does)", (long long)id);
        json_decref(b);
        return;
    }
    int relay = 0;
    char node[64], err[512];
    int status = executor_slurm_checkin(id, secret, b, &relay, node, sizeof node, err, sizeof err);
    if (status) {
        reply_problem(rs, status, NULL, "run %lld's part is refused: %s", (long long)id, err);
        json_decref(b);
        return;
    }
    json_t *streams = relay_streams_json(relay, json_object_get(b, "streams"));
    json_t *logs = relay_logs_json(relay, node, json_object_get(b, "logs"));
    /* what was relayed is read, and stored, before the part hears it was taken (and
     * before its exit is heard: a run's last events count) */
    ingest_sync();
    store_sync();
    int rank = (int)json_integer_value(json_object_get(b, "node_rank"));
    bool stop = false;
    json_t *parts = executor_slurm_report(id, rank, json_object_get(b, "parts"), &stop);
    /* verbatim: the parts carry the commands, configs and paths the part starts */
    reply_json_verbatim(rs, 200, json_pack("{s:o, s:b, s:o, s:o, s:i}", "parts", parts, "stop", stop, "streams",
                                           streams, "logs", logs, "heartbeat_s", REPORT_S));
    json_decref(b);
}

const route part_routes[] = {
    {.method = "POST", .pattern = "/runs/{id}/parts", .handler = post_part, .json_body = true,
     .run_secret_auth = true},
};
const size_t part_routes_count = sizeof part_routes / sizeof *part_routes;
