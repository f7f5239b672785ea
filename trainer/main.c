/* ddp-trainer: the command line. Trains (or evaluates) one run, data-parallel over
 * world_size rank processes; see launcher.h. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_select.h"
#include "ddpd_build_config.h"
#include "launcher.h"

/* One line: the version and where GPU runs go. ddpd check reads it ("nccl backend: no"
 * means this trainer cannot run on GPUs). */
static void print_version(void) {
#if DDPD_NCCL_BACKEND
    printf("ddp-trainer-nccl %s (nccl backend: built in)\n", DDPD_VERSION);
#else
    char nccl[4096];
    if (backend_nccl_executable(nccl, sizeof nccl))
        printf("ddp-trainer %s (nccl backend: %s)\n", DDPD_VERSION, nccl);
    else
        printf("ddp-trainer %s (nccl backend: no; GPU runs need ddp-trainer-nccl beside it)\n", DDPD_VERSION);
#endif
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: ddp-trainer --config RUN.json --run-dir DIR [--events PATH|-] [--resume] [--data-root DIR]...\n"
            "                   [--nodes N --node-rank K --node-addr ADDR --rendezvous URL]\n"
            "                   [--restart-count K [--restarts-from F]] [--ranks N]\n"
            "\n"
            "  --config FILE   the run config (JSON; see schema/run-config.schema.json)\n"
            "  --run-dir DIR   where the log, the event journal and checkpoints go (created)\n"
            "  --events PATH   also send events to a Unix socket, a file, or - (stdout)\n"
            "  --resume        continue from the newest checkpoint in DIR\n"
            "  --data-root DIR open data files only beneath DIR (repeatable; ddpd passes its roots)\n"
            "  --nodes N, --node-rank K\n"
            "                  run node K's share (world_size/N ranks) of a run across N nodes\n"
            "  --node-addr ADDR  the address this node's ranks listen on for the other nodes\n"
            "                  (GLOO_SOCKET_IFNAME, an interface's name, wins when set)\n"
            "  --rendezvous URL  where the nodes meet: the coordinator's /runs/ID/rendezvous\n"
            "                  (with the run's secret, DDPD_RUN_SECRET; ddpd passes all of these)\n"
            "  --ranks N       train the run's world_size batch shards on N processes\n"
            "                  (distributed.min_world_size <= N <= world_size; the same\n"
            "                  weights, bit for bit, as on world_size)\n"
            "  --restart-count K\n"
            "                  the first attempt's number (default 0): a run that goes on after K\n"
            "                  attempts; distributed.max_restarts more may follow it\n"
            "  --restarts-from F\n"
            "                  the restarts distributed.max_restarts allows count from attempt F\n"
            "                  (default K): ddpd starts a run again within one launch's restarts\n"
            "  --version       print the version\n"
            "\n"
            "exit status: 0 succeeded, 1 failed, 2 bad config or usage, 128+N canceled by signal N\n");
}

int main(int argc, char **argv) {
    static const struct option opts[] = {
        {"config", required_argument, 0, 'c'}, {"run-dir", required_argument, 0, 'd'},
        {"events", required_argument, 0, 'e'}, {"resume", no_argument, 0, 'r'},
        {"data-root", required_argument, 0, 'D'},
        {"nodes", required_argument, 0, 'N'},  {"node-rank", required_argument, 0, 'K'},
        {"node-addr", required_argument, 0, 'A'}, {"rendezvous", required_argument, 0, 'R'},
        {"restart-count", required_argument, 0, 'C'}, {"ranks", required_argument, 0, 'P'}, {"restarts-from", required_argument, 0, 'F'},
        {"help", no_argument, 0, 'h'},         {"version", no_argument, 0, 'V'},
        {0, 0, 0, 0},
    };
    launcher_options o = {.argv = argv, .restarts_from = -1};
    char err[128];
    int c;
    while ((c = getopt_long(argc, argv, "c:d:e:rD:N:K:A:R:C:F:P:hV", opts, NULL)) != -1) {
        switch (c) {
        case 'c': o.config_path = optarg; break;
        case 'd': o.run_dir = optarg; break;
        case 'e': o.events_target = optarg; break;
        case 'r': o.resume = 1; break;
        case 'D':
            if (data_roots_add(&o.data_roots, optarg, err, sizeof err) != 0) {
                fprintf(stderr, "ddp-trainer: --data-root %s: %s\n", optarg, err);
                return EXIT_BAD_INPUT;
            }
            break;
        case 'P': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (end == optarg || *end || v < 1 || v > 4096) {
                fprintf(stderr, "ddp-trainer: --ranks %s is not a number from 1 to 4096\n", optarg);
                return EXIT_BAD_INPUT;
            }
            o.ranks = (int)v;
            break;
        }
        case 'N':
        case 'K':
        case 'C':
        case 'F': {
            const char *name = c == 'N' ? "nodes" : c == 'K' ? "node-rank" : c == 'C' ? "restart-count" : "restarts-from";
            long most = c == 'C' || c == 'F' ? 1000000 : 4096;
            char *end;
            long v = strtol(optarg, &end, 10);
            if (end == optarg || *end || v < 0 || v > most) {
                fprintf(stderr, "ddp-trainer: --%s %s is not a number from 0 to %ld\n", name, optarg, most);
                return EXIT_BAD_INPUT;
            }
            if (c == 'N') o.nodes = (int)v;
            else if (c == 'K') o.node_rank = (int)v;
            else if (c == 'C') o.restart_count = (int)v;
            else o.restarts_from = (int)v;
            break;
        }
        case 'A': o.node_addr = optarg; break;
        case 'R': o.rendezvous = optarg; break;
        case 'h': usage(stdout); return 0;
        case 'V': print_version(); return 0;
        default: usage(stderr); return EXIT_BAD_INPUT;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "ddp-trainer: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return EXIT_BAD_INPUT;
    }
    if (!o.config_path || !o.run_dir) {
        fprintf(stderr, "ddp-trainer: %s is required\n", !o.config_path ? "--config" : "--run-dir");
        usage(stderr);
        return EXIT_BAD_INPUT;
    }
    if (o.restarts_from > o.restart_count) {
        fprintf(stderr, "ddp-trainer: --restarts-from %d is after --restart-count %d: the restarts count from an "
                "attempt made already, or this one\n", o.restarts_from, o.restart_count);
        return EXIT_BAD_INPUT;
    }
    return launcher_run(&o);
}
