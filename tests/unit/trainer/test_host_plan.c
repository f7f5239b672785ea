/* The host-memory plan (host_plan.h): its workspace bytes against what
 * model_workspace_init really allocates (glibc's malloc statistics), for an MLP and
 * a CNN with every kind of layer; its share of the host and the refusal's sentence. */
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "host_plan.h"
#include "model.h"

static size_t heap_in_use(void) {
    struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
}

/* model_workspace_init's allocations, measured, against the plan's count. */
static void check_workspace(const char *what, const model_shape *s, int rows) {
    model_workspace w;
    size_t before = heap_in_use();
    REQUIRE(model_workspace_init(&w, s, rows) == 0, "%s: workspace", what);
    size_t measured = heap_in_use() - before, plan = host_plan_workspace_bytes(s, rows);
    model_workspace_free(&w);
    /* each buffer costs a chunk header, a large one a page rounding: 64 of them at most */
    size_t slack = plan / 50 + 64 * 4096;
    printf("%s: plan %zu bytes, measured %zu\n", what, plan, measured);
    CHECK(measured + slack >= plan && measured <= plan + slack, "%s: plan %zu bytes within %zu of the measured %zu",
          what, plan, slack, measured);
}

int main(void) {
    char err[256];
    run_config c;
    memset(&c, 0, sizeof c);
    c.model.type = MODEL_MLP;
    c.model.activation = ACT_GELU;
    c.model.hidden[0] = 512, c.model.hidden[1] = 256, c.model.n_hidden = 2;
    model_shape s;
    REQUIRE(model_shape_init(&s, &c, 1, 28, 28, 10, err, sizeof err) == 0, "mlp: %s", err);
    check_workspace("mlp gelu 512-256, 256 rows", &s, 256);

    memset(&c, 0, sizeof c);
    c.model.type = MODEL_CNN;
    c.model.activation = ACT_GELU;
    c.model.cnn.conv[0] = (conv_block_config){.channels = 16, .kernel = 5, .stride = 1, .padding = 2, .pool = 2,
                                              .batch_norm = true, .dropout = 0.1};
    c.model.cnn.conv[1] = (conv_block_config){.channels = 32, .kernel = 3, .stride = 1, .padding = 1, .pool = 2};
    c.model.cnn.n_conv = 2;
    c.model.cnn.fc[0] = 128, c.model.cnn.n_fc = 1;
    c.model.cnn.dropout = 0.25;
    REQUIRE(model_shape_init(&s, &c, 1, 28, 28, 10, err, sizeof err) == 0, "cnn: %s", err);
    check_workspace("cnn bn/pool/dropout/gelu, 128 rows", &s, 128);

    /* a max-pool that does not fit is refused, naming the layer */
    c.model.cnn.conv[1].kernel = 9, c.model.cnn.conv[1].padding = 0, c.model.cnn.conv[1].pool = 8;
    CHECK(model_shape_init(&s, &c, 1, 28, 28, 10, err, sizeof err) != 0 &&
              strncmp(err, "/model/cnn/conv/1: a 8x8 max-pool does not fit", 46) == 0,
          "the 8x8 max-pool on 6x6 (a 9x9 kernel on 14x14) is refused at /model/cnn/conv/1: %s", err);

    /* the share and the refusal */
    CHECK(host_plan_share(1, 4, 8ull << 30) == 2ull << 30, "1 of 4 slots of 8 GiB is 2 GiB");
    CHECK(host_plan_share(4, 2, 8ull << 30) == 8ull << 30, "more ranks than slots: the whole host");
    host_plan p = {.total_bytes = 3ull << 30};
    char why[512];
    CHECK(host_plan_check(&p, 1, 4, 8ull << 30, 0, why, sizeof why) != 0 &&
              strstr(why, "needs 3.0 GiB of host memory, its share is 2.0 GiB (1 of 4 CPU slots of 8.0 GiB)"),
          "refused with both numbers: %s", why);
    CHECK(host_plan_check(&p, 2, 4, 8ull << 30, 0, why, sizeof why) == 0, "2 of 4 slots: 4 GiB, it fits");
    CHECK(host_plan_check(&p, 2, 4, 8ull << 30, 1ull << 30, why, sizeof why) != 0 && strstr(why, "available now"),
          "but not in the 1 GiB available now: %s", why);
    return test_done("host_plan");
}
