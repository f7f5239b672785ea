/* Unit tests of server/sched/placement.c (where a run across nodes goes) and of the
 * launcher's end read from a journal (server/host/journal_end.c): equal parts on the
 * first nodes that fit, the fewest nodes when none are asked for, nothing when it
 * cannot fit, capacity against what is free; the last `end` of rank -1, a torn last
 * line and a rank's events skipped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "journal_end.h"
#include "placement.h"

static void test_placement(void) {
    place_candidate c[] = {{.id = 0, .free = 2, .capacity = 2}, {.id = 4, .free = 1, .capacity = 2},
                           {.id = 7, .free = 2, .capacity = 4}, {.id = 9, .free = 2, .capacity = 2}};
    int out[8];
    CHECK(placement_choose(c, 4, 2, 0, false, out) == 1 && out[0] == 0, "fits one node: the first that has room");
    CHECK(placement_choose(c, 4, 4, 0, false, out) == 2 && out[0] == 0 && out[1] == 7,
          "4 ranks: 2 nodes of 2, skipping the one with 1 free: %d %d", out[0], out[1]);
    CHECK(placement_choose(c, 4, 6, 0, false, out) == 3 && out[0] == 0 && out[1] == 7 && out[2] == 9,
          "6 ranks: 3 nodes of 2");
    CHECK(placement_choose(c, 4, 4, 4, false, out) == 4 && out[1] == 4, "4 nodes asked: 1 rank on each, node 4 too");
    CHECK(placement_choose(c, 4, 3, 2, false, out) == 0, "nodes must divide the world size");
    CHECK(placement_choose(c, 4, 8, 0, false, out) == 0, "8 ranks need 4 nodes of 2 free: node 4 has 1");
    CHECK(placement_choose(c, 4, 8, 0, true, out) == 4 && out[2] == 7,
          "by capacity: 2 nodes of 4 do not exist (only node 7), 4 nodes of 2 do");
    CHECK(placement_choose(c, 4, 10, 0, false, out) == 0, "10 ranks do not fit 4 nodes of 2 free");
    CHECK(placement_choose(c, 4, 4, 1, true, out) == 1 && out[0] == 7, "by capacity: node 7 can hold 4 alone");
    CHECK(placement_choose(c, 4, 4, 1, false, out) == 0, "but not now: 2 free");
    CHECK(placement_choose(c, 0, 1, 0, false, out) == 0, "no nodes, no placement");
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    REQUIRE(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

static void test_journal_end(void) {
    char dir[] = "/tmp/ddpd-journal-end-XXXXXX";
    REQUIRE(mkdtemp(dir), "mkdtemp");
    char path[64];
    snprintf(path, sizeof path, "%s/events.jsonl", dir);
    write_file(path, "");
    journal_end e;
    CHECK(!journal_end_read(dir, &e), "an empty journal has no end");
    write_file(path, "{\"type\":\"hello\",\"rank\":-1,\"t\":1}\n"
                     "{\"type\":\"end\",\"rank\":-1,\"t\":5,\"status\":\"failed\",\"reason\":\"rank 3 exited\"}\n"
                     "{\"type\":\"step\",\"rank\":2,\"t\":6}\n"
                     "{\"type\":\"end\",\"rank\":2,\"t\":7,\"status\":\"succeeded\"}\n"
                     "{\"type\":\"end\",\"rank\":-1,\"t\":9,\"sta");
    CHECK(journal_end_read(dir, &e) && strcmp(e.status, "failed") == 0 && strcmp(e.reason, "rank 3 exited") == 0 &&
              e.t == 5,
          "the launcher's end, past a rank's events and a torn last line: %s %s %lld", e.status, e.reason,
          (long long)e.t);
    write_file(path, "{\"type\":\"end\",\"rank\":-1,\"t\":3,\"status\":\"succeeded\"}\n");
    CHECK(journal_end_read(dir, &e) && strcmp(e.status, "succeeded") == 0 && e.reason[0] == '\0',
          "an end without a reason");
    unlink(path);
    CHECK(!journal_end_read(dir, &e), "no journal, no end");
    rmdir(dir);
}

int main(void) {
    test_placement();
    test_journal_end();
    return test_done("test_placement");
}
