/* Unit tests of what ddpd tells sbatch (server/host/slurm_cli.c): a run's job as sbatch's
 * command line, and the runs' sharing settings in Slurm's terms: the owner's own
 * account over the server's, a priority as the job's nice (lowered always, raised only
 * where the site allows it), the QOS of preemptible runs, the site's own options after
 * ddpd's; serve --slurm-user-account's USER=ACCOUNT checked and looked up. The real
 * cluster's view of the same (Account=, Nice=) is tests/integration/slurm/test_slurm.py's
 * sharing case; a QOS only here (Slurm without slurmdbd keeps no QOS: scontrol shows
 * QOS=(null)). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "check.h"
#include "slurm_cli.h"

/* sbatch's argv for `j`, joined with spaces. */
static char *sbatch_line(const slurm_job_spec *j) {
    char **argv = slurm_sbatch_argv(j);
    buf_t b = {0};
    for (int i = 0; argv[i]; i++) buf_printf(&b, "%s%s", i ? " " : "", argv[i]);
    slurm_argv_free(argv);
    return b.data;
}

static void check_line(const char *what, const slurm_job_spec *j, const char *want) {
    char *got = sbatch_line(j);
    CHECK(strcmp(got, want) == 0, "%s:\n  %s\nwanted\n  %s", what, got, want);
    free(got);
}

#define TAIL "--output=/dev/null --chdir=/ /s/job.sh"

static void test_sbatch_argv(void) {
    slurm_job_spec plain = {.run = 7, .nodes = 2, .ranks_per_node = 2, .cpus_per_rank = 3, .script = "/s/job.sh"};
    check_line("a run of nobody in particular, Slurm's defaults", &plain,
               "sbatch --parsable --job-name=ddpd-7 --nodes=2 --ntasks-per-node=2 --cpus-per-task=3 " TAIL);

    slurm_job_spec site = plain;
    site.gpus = true;
    site.partition = "gpu";
    site.account = "ml";
    const char *extra[] = {"--time=2:00:00", "--account=site"};
    site.extra = extra;
    site.n_extra = 2;
    check_line("the server's partition and account, GPUs, the site's own options last (theirs win)", &site,
               "sbatch --parsable --job-name=ddpd-7 --nodes=2 --ntasks-per-node=2 --cpus-per-task=3 "
               "--gpus-per-node=2 --partition=gpu --account=ml --time=2:00:00 --account=site " TAIL);

    slurm_job_spec owned = plain;
    owned.account = "ml";
    owned.owner_account = "physics";
    check_line("the owner's own account wins over the server's", &owned,
               "sbatch --parsable --job-name=ddpd-7 --nodes=2 --ntasks-per-node=2 --cpus-per-task=3 "
               "--account=physics " TAIL);
    owned.owner_account = "";
    check_line("an empty owner's account is none: the server's", &owned,
               "sbatch --parsable --job-name=ddpd-7 --nodes=2 --ntasks-per-node=2 --cpus-per-task=3 --account=ml " TAIL);

    slurm_job_spec low = plain;
    low.priority = -3;
    check_line("a negative priority lowers the job: nice 100 per step", &low,
               "sbatch --parsable --job-name=ddpd-7 --nodes=2 --ntasks-per-node=2 --cpus-per-task=3 --nice=300 " TAIL);
    low.site_allows_priority = true;
    low.priority = -100;
    check_line("the lowest priority, the site allowing raises or not", &low,
               "sbatch --parsable --job-name=ddpd-7 --nodes=2 --ntasks-per-node=2 --cpus-per-task=3 --nice=10000 " TAIL);

    slurm_job_spec high = plain;
    high.priority = 5;
    check_line("a positive priority where the site does not let ddpd raise jobs: nothing", &high,
               "sbatch --parsable --job-name=ddpd-7 --nodes=2 --ntasks-per-node=2 --cpus-per-task=3 " TAIL);
    high.site_allows_priority = true;
    check_line("a positive priority where the site allows it: a negative nice (a raise; never sbatch's absolute "
               "--priority, which sets it below every default)",
               &high,
               "sbatch --parsable --job-name=ddpd-7 --nodes=2 --ntasks-per-node=2 --cpus-per-task=3 --nice=-500 " TAIL);
    high.priority = 0;
    check_line("priority 0: Slurm's default", &high,
               "sbatch --parsable --job-name=ddpd-7 --nodes=2 --ntasks-per-node=2 --cpus-per-task=3 " TAIL);

    slurm_job_spec away = site;
    const char *failed[] = {"n1", "gpu-07"};
    away.exclude = failed;
    away.n_exclude = 2;
    check_line("a retry_elsewhere restart: the nodes it failed on excluded, before the site's options", &away,
               "sbatch --parsable --job-name=ddpd-7 --nodes=2 --ntasks-per-node=2 --cpus-per-task=3 "
               "--gpus-per-node=2 --partition=gpu --account=ml --exclude=n1,gpu-07 --time=2:00:00 --account=site " TAIL);
    away.n_exclude = 0;
    check_line("nothing to exclude: no --exclude", &away,
               "sbatch --parsable --job-name=ddpd-7 --nodes=2 --ntasks-per-node=2 --cpus-per-task=3 "
               "--gpus-per-node=2 --partition=gpu --account=ml --time=2:00:00 --account=site " TAIL);

    slurm_job_spec pre = plain;
    pre.preemptible_qos = "scavenger";
    pre.owner_account = "physics";
    pre.priority = -1;
    check_line("a preemptible run under the site's QOS, with its owner's account and its nice", &pre,
               "sbatch --parsable --job-name=ddpd-7 --nodes=2 --ntasks-per-node=2 --cpus-per-task=3 "
               "--account=physics --nice=100 --qos=scavenger " TAIL);
    pre.preemptible_qos = "";
    check_line("an empty QOS is none", &pre,
               "sbatch --parsable --job-name=ddpd-7 --nodes=2 --ntasks-per-node=2 --cpus-per-task=3 "
               "--account=physics --nice=100 " TAIL);
}

/* sinfo -h -N -o '%N|%P': the nodes a job that excludes some may still get. */
static void test_nodes_outside(void) {
    const char *sinfo = "n1|debug*\nn2|debug*\nn2|big\nn3|big\nn4|big\n";
    const char *one[] = {"n1"}, *both[] = {"n1", "n2"}, *other[] = {"n3", "x"};
    char part[64];
    int got = slurm_nodes_outside(sinfo, NULL, one, 1, part, sizeof part);
    CHECK(got == 1 && strcmp(part, "debug") == 0, "the default partition less n1: 1 node of debug: %d of %s", got, part);
    got = slurm_nodes_outside(sinfo, "", both, 2, part, sizeof part);
    CHECK(got == 0, "the default partition less both its nodes: none: %d", got);
    got = slurm_nodes_outside(sinfo, "big", both, 2, part, sizeof part);
    CHECK(got == 2 && strcmp(part, "big") == 0, "partition big less n2 (n1 is not in it): n3, n4: %d %s", got, part);
    got = slurm_nodes_outside(sinfo, "big", other, 2, NULL, 0);
    CHECK(got == 2, "partition big less n3 and a node Slurm does not know: 2: %d", got);
    got = slurm_nodes_outside("n1|debug*\nn1|debug*\n", NULL, NULL, 0, NULL, 0);
    CHECK(got == 1, "a node listed twice counts once: %d", got);
    got = slurm_nodes_outside(sinfo, "gpu", one, 1, part, sizeof part);
    CHECK(got == -1, "a partition sinfo does not list: -1: %d", got);
    got = slurm_nodes_outside("n1|debug\n", NULL, one, 1, part, sizeof part);
    CHECK(got == -1 && part[0] == 0, "no default partition and none named: -1: %d %s", got, part);
    got = slurm_nodes_outside("", NULL, one, 1, NULL, 0);
    CHECK(got == -1, "sinfo said nothing: -1: %d", got);
    char *list = slurm_node_list(both, 2);
    CHECK(strcmp(list, "n1,n2") == 0, "the list --exclude takes: %s", list);
    free(list);
    list = slurm_node_list(NULL, 0);
    CHECK(strcmp(list, "") == 0, "an empty list: '%s'", list);
    free(list);
}

static void test_user_accounts(void) {
    char err[256];
    CHECK(slurm_user_account_ok("alice=physics", err, sizeof err), "alice=physics is one");
    struct {
        const char *spec, *words;
    } bad[] = {
        {"alice", "USER=ACCOUNT is needed"},
        {"=physics", "the ddpd user before '=' is empty"},
        {"alice=", "the Slurm account after '=' is empty"},
        {"alice=a=b", "one '=' only"},
        {"al ice=physics", "no spaces"},
        {"", "USER=ACCOUNT is needed"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = '\0';
        bool ok = slurm_user_account_ok(bad[i].spec, err, sizeof err);
        CHECK(!ok && strstr(err, bad[i].words) && strstr(err, bad[i].spec), "\"%s\" refused saying \"%s\": %s",
              bad[i].spec, bad[i].words, ok ? "accepted" : err);
    }
    const char *pairs[] = {"alice=physics", "al=chem", "bob=bio"};
    const char *a = slurm_user_account(pairs, 3, "alice"), *al = slurm_user_account(pairs, 3, "al");
    CHECK(a && strcmp(a, "physics") == 0, "alice's runs go under physics: %s", a ? a : "(none)");
    CHECK(al && strcmp(al, "chem") == 0, "al's under chem, not alice's: %s", al ? al : "(none)");
    CHECK(!slurm_user_account(pairs, 3, "ali"), "a user named by no pair (a prefix of one) has none");
    CHECK(!slurm_user_account(pairs, 3, NULL), "nobody in particular has none");
    CHECK(!slurm_user_account(pairs, 3, ""), "an empty name has none");
    CHECK(!slurm_user_account(NULL, 0, "alice"), "no pairs: none");
}

/* The job's script: a command run's node 0 takes MASTER_PORT from the server's range
 * (DDPD_PORT_RANGE, exported before srun, which passes it on), a built-in run has none. */
static void test_batch_script(void) {
    slurm_script_spec spec = {.run = 9, .ddpd = "/usr/bin/ddpd", .server_url = "http://h:8080", .work_dir = "/w",
                              .cpus_per_node = 4, .port_lo = 29600, .port_hi = 29999};
    char *script = slurm_batch_script(&spec);
    const char *export = strstr(script, "export DDPD_PORT_RANGE=29600-29999\n"), *srun = strstr(script, "exec srun");
    CHECK(export && srun && export < srun, "a command run's script exports its port range before srun: %s", script);
    CHECK(strstr(script, "'/usr/bin/ddpd' part --server 'http://h:8080' --run 9 --work-dir '/w'"),
          "and runs the part: %s", script);
    free(script);
    spec.port_lo = spec.port_hi = 0;
    script = slurm_batch_script(&spec);
    CHECK(!strstr(script, "DDPD_PORT_RANGE"), "a built-in run's has none: %s", script);
    free(script);
}

int main(void) {
    test_sbatch_argv();
    test_user_accounts();
    test_nodes_outside();
    test_batch_script();
    return test_done("test_slurm_cli");
}
