/* The ddpd(1) manual page: see man_page.h. */
#include "man_page.h"

#include "agent.h"
#include "ddpd_build_config.h"
#include "part.h"
#include "roff.h"
#include "settings.h"
#include "user_cmd.h"

static const char SYNOPSIS[] =
    "usage: ddpd serve [options]\n"
    "       ddpd check [options]\n"
    "       ddpd user add|set|list|token|remove ...\n"
    "       ddpd agent --coordinator URL [options]\n"
    "       ddpd part --server URL --run ID --work-dir DIR [options]\n"
    "       ddpd version\n"
    "       ddpd man\n";

void man_page_write(FILE *out) {
    roff_header(out, "ddpd", "ddpd " DDPD_VERSION, "ddpd manual");
    roff_section(out, "NAME");
    fputs("ddpd \\- a REST-controlled data-parallel training service\n", out);
    roff_section(out, "SYNOPSIS");
    roff_usage(out, SYNOPSIS, NULL);
    roff_section(out, "DESCRIPTION");
    roff_paragraph(out, "ddpd serve takes a run config as JSON (POST /runs), stores the run in SQLite, gives it "
                        "devices (GPUs, or CPU slots on a host without them) and starts a trainer process group: "
                        "one process per device, gradients averaged with NCCL on GPUs or with shared-memory "
                        "collectives on the CPU. Ranks report their loss, learning rate and status over a local "
                        "socket, and ddpd serves it all as JSON and to a browser dashboard. ddpctl(1) is its "
                        "command-line client.");
    roff_paragraph(out, "ddpd check, with the options and variables serve would be given, changes nothing and says "
                        "in one line each whether the config, the state directory, the database, the data roots, "
                        "the GPUs, the trainer, the accounts runs run as and command runs are ready; it exits 1 "
                        "when one is not. ddpd version prints the version and what it was built with; ddpd man "
                        "prints this page.");
    roff_section(out, "SERVE AND CHECK OPTIONS");
    opt_roff(&SETTINGS_TABLE, out);
    roff_section(out, "USERS");
    roff_usage(out, USER_USAGE, NULL); /* its own synopsis: the verbs' flags */
    roff_section(out, "AGENT NODES");
    opt_roff(&AGENT_OPTIONS, out);
    roff_section(out, "SLURM NODES");
    opt_roff(&PART_OPTIONS, out);
    roff_section(out, "FILES");
    roff_entry(out, "STATE-DIR/ddpd.db", "the database (SQLite, its WAL beside it), 0600");
    roff_entry(out, "STATE-DIR/ddpd.lock", "one server per state directory");
    roff_entry(out, "STATE-DIR/events.sock", "the socket runs report their events to");
    roff_entry(out, "STATE-DIR/runs/ID/", "a run's directory, its account's: config.json, trainer.log, "
                                        "events.jsonl (its journal), checkpoints/, and a command run's ranks/");
    roff_section(out, "EXIT STATUS");
    roff_paragraph(out, "serve: 0 after a clean stop (SIGTERM or SIGINT), 2 when it cannot start (a line on stderr says "
                        "why). check: 0 when every part is ready, 1 when one failed. user: 0 done, 1 refused, 2 a "
                        "mistake on the command line.");
    roff_section(out, "SEE ALSO");
    roff_paragraph(out, "ddpctl(1); the documentation in the repository: README.md (a first run and a map of the "
                        "rest), docs/using.md, docs/sweeps.md and docs/training.md (using ddpd), docs/operating.md "
                        "(operating it), docs/security.md (its security model), CONTRIBUTING.md and "
                        "docs/architecture.md (developing it).");
}
