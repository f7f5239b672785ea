/* Unit tests of a part's description on the wire (server/host/part_wire.c): what the
 * coordinator writes is what an agent or `ddpd part` reads, member by member, through
 * a JSON text as the heartbeat's answer carries it; the reader refuses a description
 * that lacks what a launcher needs, naming it; a coordinator that gives no graces or
 * port range leaves ddp-run's own; the account a part runs as is carried when the run
 * has one, and absent (the node's own user) when not. */
#include <jansson.h>
#include <string.h>

#include "check.h"
#include "part_wire.h"

/* w written, dumped to text, parsed and read back into *out (j keeps the strings). */
static bool round_trip(const part_wire *w, part_wire *out, json_t **j, char *why, size_t n) {
    json_t *written = part_wire_write(w);
    REQUIRE(written, "a whole description is written");
    char *text = json_dumps(written, JSON_COMPACT);
    json_decref(written);
    *j = json_loads(text, 0, NULL);
    free(text);
    REQUIRE(*j, "the written text parses");
    return part_wire_read(*j, out, why, n);
}

static void every_member(void) {
    json_t *config = json_pack("{s:i, s:s}", "epochs", 3, "model", "mlp");
    json_t *devices = json_pack("[s,s]", "GPU-a", "GPU-b");
    part_wire w = {.run = 42, .node_rank = 1, .nodes = 2, .world_size = 4, .command = true, .resume = true,
                   .gpu = true, .secret = "s3cret", .master_addr = "10.0.0.1", .master_port = 29500,
                   .rendezvous = "/runs/42/rendezvous", .restart_count = 3, .restarts_from = 2, .graces = true,
                   .stop_grace_s = 7, .preempt_grace_s = 11, .port_lo = 29000, .port_hi = 29999,
                   .config = config, .devices = devices, .account = "alice"};
    part_wire r;
    json_t *j;
    char why[160] = "";
    CHECK(round_trip(&w, &r, &j, why, sizeof why), "a whole description is read back (%s)", why);
    CHECK(r.run == 42 && r.node_rank == 1 && r.nodes == 2 && r.world_size == 4, "run, node rank, nodes, world size");
    CHECK(r.command && r.resume && r.gpu, "command, resume, the GPU pool");
    CHECK(strcmp(r.secret, "s3cret") == 0 && strcmp(r.master_addr, "10.0.0.1") == 0 && r.master_port == 29500,
          "secret, rank 0's node and port");
    CHECK(strcmp(r.rendezvous, "/runs/42/rendezvous") == 0, "the rendezvous");
    CHECK(r.restart_count == 3 && r.restarts_from == 2, "the attempt and where restarts count from");
    CHECK(r.graces && r.stop_grace_s == 7 && r.preempt_grace_s == 11, "the graces");
    CHECK(r.port_lo == 29000 && r.port_hi == 29999, "the port range");
    CHECK(json_equal((json_t *)r.config, config), "the config, whole");
    CHECK(json_equal((json_t *)r.devices, devices), "the devices, in order");
    CHECK(r.account && strcmp(r.account, "alice") == 0, "the account its processes run as");
    json_decref(j);
    json_decref(config);
    json_decref(devices);
}

static void what_a_coordinator_leaves_out(void) {
    json_t *config = json_object();
    part_wire w = {.run = 7, .world_size = 2, .secret = "x", .rendezvous = "/runs/7/rendezvous", .config = config};
    part_wire r;
    json_t *j;
    char why[160] = "";
    CHECK(round_trip(&w, &r, &j, why, sizeof why), "a run of one node, no graces, no range (%s)", why);
    CHECK(!r.command && !r.gpu && !r.graces && r.port_lo == 0 && r.port_hi == 0,
          "no graces (ddp-run's own) and no port range");
    CHECK(strcmp(r.master_addr, "") == 0 && r.nodes == 0, "no rank 0's node yet, a run of this one part");
    CHECK(json_array_size(r.devices) == 0, "no devices listed");
    CHECK(r.account == NULL && !json_object_get(j, "account"), "no account: none written, none read (the node's own "
          "user)");
    json_decref(j);
    json_decref(config);
}

static void refused(const char *what, const char *text, const char *named) {
    json_t *j = json_loads(text, 0, NULL);
    REQUIRE(j, "%s: the test's JSON parses", what);
    part_wire r;
    char why[160] = "";
    CHECK(!part_wire_read(j, &r, why, sizeof why), "%s: refused", what);
    CHECK(strstr(why, named), "%s: the reason names %s (%s)", what, named, why);
    json_decref(j);
}

static void incomplete_descriptions(void) {
    const char *whole = "\"world_size\":2,\"secret\":\"x\",\"master_addr\":\"\",\"rendezvous\":\"/r\",\"config\":{}";
    char text[512];
    snprintf(text, sizeof text, "{%s}", whole);
    refused("no run", text, "run id");
    snprintf(text, sizeof text, "{\"run\":3,%s}", whole);
    json_t *ok = json_loads(text, 0, NULL);
    part_wire r;
    char why[160] = "";
    CHECK(part_wire_read(ok, &r, why, sizeof why), "the same with its run is whole (%s)", why);
    json_decref(ok);
    refused("no secret", "{\"run\":3,\"world_size\":2,\"master_addr\":\"\",\"rendezvous\":\"/r\",\"config\":{}}", "secret");
    refused("no config", "{\"run\":3,\"world_size\":2,\"secret\":\"x\",\"master_addr\":\"\",\"rendezvous\":\"/r\","
                         "\"config\":null}", "config");
    refused("a node rank outside its nodes", "{\"run\":3,\"world_size\":2,\"nodes\":2,\"node_rank\":2,\"secret\":\"x\","
            "\"master_addr\":\"\",\"rendezvous\":\"/r\",\"config\":{}}", "node rank");
    refused("not an object", "[1]", "object");
    refused("an account that is no name", "{\"run\":3,\"world_size\":2,\"secret\":\"x\",\"master_addr\":\"\","
            "\"rendezvous\":\"/r\",\"config\":{},\"account\":7}", "account");
    refused("an empty account", "{\"run\":3,\"world_size\":2,\"secret\":\"x\",\"master_addr\":\"\","
            "\"rendezvous\":\"/r\",\"config\":{},\"account\":\"\"}", "account");
}

int main(void) {
    every_member();
    what_a_coordinator_leaves_out();
    incomplete_descriptions();
    return test_done("part_wire");
}
