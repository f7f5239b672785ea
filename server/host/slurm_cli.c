/* Slurm's commands as text: see slurm_cli.h. */
#include "slurm_cli.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

#define SBATCH_ARGS_MAX 24 /* ours, besides the site's own */

char **slurm_sbatch_argv(const slurm_job_spec *j) {
    char **a = xmalloc((size_t)(SBATCH_ARGS_MAX + j->n_extra + 1) * sizeof *a);
    int n = 0;
    a[n++] = xstrdup("sbatch");
    a[n++] = xstrdup("--parsable");
    a[n++] = xasprintf("--job-name=ddpd-%lld", (long long)j->run);
    a[n++] = xasprintf("--nodes=%d", j->nodes);
    a[n++] = xasprintf("--ntasks-per-node=%d", j->ranks_per_node);
    a[n++] = xasprintf("--cpus-per-task=%d", j->cpus_per_rank > 0 ? j->cpus_per_rank : 1);
    if (j->gpus) a[n++] = xasprintf("--gpus-per-node=%d", j->ranks_per_node);
    if (j->partition && *j->partition) a[n++] = xasprintf("--partition=%s", j->partition);
    const char *account = j->owner_account && *j->owner_account ? j->owner_account : j->account;
    if (account && *account) a[n++] = xasprintf("--account=%s", account);
    if (j->priority < 0 || (j->priority > 0 && j->site_allows_priority))
        a[n++] = xasprintf("--nice=%d", -j->priority * 100);
    if (j->preemptible_qos && *j->preemptible_qos) a[n++] = xasprintf("--qos=%s", j->preemptible_qos);
    if (j->n_exclude > 0) {
        char *list = slurm_node_list(j->exclude, j->n_exclude);
        a[n++] = xasprintf("--exclude=%s", list);
        free(list);
    }
    /* the site's own options after ours: where they name the same, theirs win (sbatch takes the last) */
    for (int i = 0; i < j->n_extra; i++) a[n++] = xstrdup(j->extra[i]);
    /* the script sends its output to the run's directory on the nodes, once it exists */
    a[n++] = xstrdup("--output=/dev/null");
    a[n++] = xstrdup("--chdir=/");
    a[n++] = xstrdup(j->script);
    a[n] = NULL;
    return a;
}

char *slurm_node_list(const char *const *exclude, int n) {
    buf_t b = {0};
    for (int i = 0; i < n; i++) buf_printf(&b, "%s%s", i ? "," : "", exclude[i]);
    return b.data ? b.data : xstrdup("");
}

int slurm_nodes_outside(const char *sinfo, const char *partition, const char *const *exclude, int n, char *part,
                        size_t part_len) {
    char want[128] = "";
    if (partition && *partition) snprintf(want, sizeof want, "%s", partition);
    /* the default partition, when none is named: the one whose name ends in '*' */
    for (const char *p = sinfo; !want[0] && p && *p;) {
        size_t len = strcspn(p, "\n");
        const char *bar = memchr(p, '|', len);
        if (bar && len > (size_t)(bar - p) + 1 && p[len - 1] == '*')
            snprintf(want, sizeof want, "%.*s", (int)(p + len - 1 - bar - 1), bar + 1);
        p += len + (p[len] == '\n');
    }
    if (part && part_len) snprintf(part, part_len, "%s", want);
    if (!want[0]) return -1;
    int found = 0, outside = 0;
    char seen[4096] = ","; /* the nodes counted, ",n1,n2," (sinfo lists a node once a partition) */
    for (const char *p = sinfo; p && *p;) {
        size_t len = strcspn(p, "\n");
        const char *bar = memchr(p, '|', len);
        if (bar) {
            char node[128], pn[128];
            snprintf(node, sizeof node, "%.*s", (int)(bar - p), p);
            snprintf(pn, sizeof pn, "%.*s", (int)(p + len - bar - 1), bar + 1);
            size_t pl = strlen(pn);
            if (pl && pn[pl - 1] == '*') pn[pl - 1] = '\0';
            char key[132];
            snprintf(key, sizeof key, ",%s,", node);
            if (node[0] && strcmp(pn, want) == 0 && !strstr(seen, key)) {
                found = 1;
                bool excluded = false;
                for (int i = 0; i < n && !excluded; i++) excluded = strcmp(exclude[i], node) == 0;
                outside += !excluded;
                if (strlen(seen) + strlen(node) + 2 < sizeof seen) strcat(strcat(seen, node), ",");
            }
        }
        p += len + (p[len] == '\n');
    }
    return found ? outside : -1;
}

bool slurm_user_account_ok(const char *spec, char *err, size_t n) {
    const char *eq = strchr(spec, '=');
    if (!eq) snprintf(err, n, "\"%s\": USER=ACCOUNT is needed (a ddpd user, '=', a Slurm account)", spec);
    else if (eq == spec) snprintf(err, n, "\"%s\": the ddpd user before '=' is empty", spec);
    else if (!eq[1]) snprintf(err, n, "\"%s\": the Slurm account after '=' is empty", spec);
    else if (strchr(eq + 1, '=')) snprintf(err, n, "\"%s\": one '=' only, between the user and the account", spec);
    else if (strpbrk(spec, " \t\n")) snprintf(err, n, "\"%s\": no spaces in a user's name or an account", spec);
    else return true;
    return false;
}

const char *slurm_user_account(const char *const *pairs, int n_pairs, const char *user) {
    size_t len = user ? strlen(user) : 0;
    for (int i = 0; len && i < n_pairs; i++)
        if (strncmp(pairs[i], user, len) == 0 && pairs[i][len] == '=') return pairs[i] + len + 1;
    return NULL;
}

void slurm_argv_free(char **argv) {
    for (size_t i = 0; argv && argv[i]; i++) free(argv[i]);
    free(argv);
}

char *slurm_sh_quote(const char *s) {
    buf_t b = {0};
    buf_append(&b, "'", 1);
    for (const char *p = s; *p; p++) {
        if (*p == '\'') buf_printf(&b, "'\\''");
        else buf_append(&b, p, 1);
    }
    buf_append(&b, "'", 1);
    buf_append(&b, "", 1);
    return b.data;
}

char *slurm_batch_script(const slurm_script_spec *s) {
    buf_t b = {0};
    char *dir_path = xasprintf("%s/%lld", s->work_dir, (long long)s->run);
    char *dir = slurm_sh_quote(dir_path), *ddpd = slurm_sh_quote(s->ddpd), *url = slurm_sh_quote(s->server_url);
    char *work = slurm_sh_quote(s->work_dir);
    /* node 0's part takes MASTER_PORT from the server's range, not among the kernel's
     * ephemeral ports, which any connection of the node may take before rank 0 listens */
    char range[96] = "";
    if (s->port_lo > 0 && s->port_hi >= s->port_lo)
        snprintf(range, sizeof range, "export DDPD_PORT_RANGE=%d-%d\n", s->port_lo, s->port_hi);
    buf_printf(&b,
               "#!/bin/sh\n"
               "# ddpd run %lld as a Slurm job (ddpd serve --executor slurm): one `ddpd part` per node runs the\n"
               "# node's ranks and reports to the server; this script's own output goes to the run's directory.\n"
               "dir=%s\n"
               "mkdir -p \"$dir\" && exec >>\"$dir/slurm-$SLURM_JOB_ID.out\" 2>&1\n"
               "%s"
               "exec srun --kill-on-bad-exit=1 --nodes=\"$SLURM_JOB_NUM_NODES\" --ntasks=\"$SLURM_JOB_NUM_NODES\" "
               "--ntasks-per-node=1 --cpus-per-task=%d \\\n"
               "    %s part --server %s --run %lld --work-dir %s",
               (long long)s->run, dir, range, s->cpus_per_node > 0 ? s->cpus_per_node : 1, ddpd, url,
               (long long)s->run, work);
    for (int i = 0; i < s->n_data_roots; i++) {
        char *root = slurm_sh_quote(s->data_roots[i]);
        buf_printf(&b, " --data-root %s", root);
        free(root);
    }
    buf_printf(&b, "\n");
    free(dir_path);
    free(dir);
    free(ddpd);
    free(url);
    free(work);
    return b.data;
}

bool slurm_parse_sbatch(const char *out, char *job, size_t n) {
    while (out && isspace((unsigned char)*out)) out++;
    size_t len = out ? strspn(out, "0123456789_") : 0; /* 123, or an array's 123_4 */
    if (!len || len >= n || (out[len] && !isspace((unsigned char)out[len]) && out[len] != ';')) return false;
    snprintf(job, n, "%.*s", (int)len, out);
    return true;
}

/* The next '|'-separated field of *p into out; the last field takes the rest of the line. */
static void field(const char **p, char *out, size_t n, bool last) {
    size_t len = last ? strcspn(*p, "\n") : strcspn(*p, "|\n");
    snprintf(out, n, "%.*s", (int)len, *p);
    *p += len;
    if (**p == '|') (*p)++;
}

int slurm_parse_squeue(const char *text, slurm_queue_line *out, int max) {
    int n = 0;
    for (const char *p = text; p && *p && n < max;) {
        slurm_queue_line l;
        memset(&l, 0, sizeof l);
        const char *line = p;
        field(&p, l.job, sizeof l.job, false);
        field(&p, l.state, sizeof l.state, false);
        /* the reason may hold anything but a newline; the nodes never a '|' */
        const char *end = line + strcspn(line, "\n");
        const char *bar = end;
        while (bar > p && bar[-1] != '|') bar--;
        if (bar > p) {
            snprintf(l.reason, sizeof l.reason, "%.*s", (int)(bar - 1 - p), p);
            snprintf(l.nodes, sizeof l.nodes, "%.*s", (int)(end - bar), bar);
        }
        p = *end ? end + 1 : end;
        if (l.job[0] && isdigit((unsigned char)l.job[0]) && l.state[0] && bar > line) out[n++] = l;
    }
    return n;
}

/* The value of KEY= among scontrol's space-separated KEY=VALUE words ("" when absent). */
static void show_value(const char *line, const char *key, char *out, size_t n) {
    size_t klen = strlen(key);
    out[0] = '\0';
    for (const char *p = line; p && *p;) {
        while (*p == ' ') p++;
        if (strncmp(p, key, klen) == 0 && p[klen] == '=') {
            const char *v = p + klen + 1;
            snprintf(out, n, "%.*s", (int)strcspn(v, " \n"), v);
            return;
        }
        p += strcspn(p, " \n");
        if (*p == '\n') p++;
    }
}

bool slurm_parse_show_job(const char *line, slurm_job_info *out) {
    memset(out, 0, sizeof *out);
    char id[32], exit_code[32], restarts[16];
    show_value(line, "JobId", id, sizeof id);
    if (!id[0]) return false;
    show_value(line, "JobState", out->state, sizeof out->state);
    show_value(line, "Reason", out->reason, sizeof out->reason);
    show_value(line, "NodeList", out->nodes, sizeof out->nodes);
    show_value(line, "BatchHost", out->batch_host, sizeof out->batch_host);
    show_value(line, "ExitCode", exit_code, sizeof exit_code);
    show_value(line, "Restarts", restarts, sizeof restarts);
    out->exit_code = out->exit_signal = -1;
    if (sscanf(exit_code, "%d:%d", &out->exit_code, &out->exit_signal) != 2) out->exit_code = out->exit_signal = -1;
    out->restarts = atoi(restarts);
    return out->state[0] != '\0';
}

static bool among(const char *s, const char *const *list) {
    for (size_t i = 0; list[i]; i++)
        if (strcmp(s, list[i]) == 0) return true;
    return false;
}

slurm_phase slurm_state_phase(const char *state) {
    static const char *const waiting[] = {"PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESV_DEL_HOLD", NULL};
    static const char *const running[] = {"RUNNING", "CONFIGURING", "SUSPENDED", "RESIZING", "SIGNALING", "STOPPED",
                                          NULL};
    static const char *const ending[] = {"COMPLETING", "STAGE_OUT", NULL};
    static const char *const ended[] = {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                                        "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY", "SPECIAL_EXIT", "REVOKED", NULL};
    if (among(state, waiting)) return SLURM_WAITING;
    if (among(state, running)) return SLURM_RUNNING;
    if (among(state, ending)) return SLURM_ENDING;
    if (among(state, ended)) return SLURM_ENDED;
    return SLURM_UNKNOWN;
}

slurm_end_kind slurm_end_words(const char *job, const char *state, const char *reason, char *out, size_t n) {
    static const struct {
        const char *state, *words;
        slurm_end_kind kind;
    } ENDS[] = {
        {"CANCELLED", "canceled it (scancel, from outside ddpd)", SLURM_END_CANCELED},
        {"TIMEOUT", "ended it at its time limit", SLURM_END_LOST},
        {"NODE_FAIL", "ended it: a node it ran on failed", SLURM_END_LOST},
        {"PREEMPTED", "preempted it for another job", SLURM_END_LOST},
        {"BOOT_FAIL", "ended it: its nodes failed to boot", SLURM_END_LOST},
        {"DEADLINE", "ended it at its deadline", SLURM_END_LOST},
        {"OUT_OF_MEMORY", "ended it: it ran out of memory", SLURM_END_LOST},
        {"FAILED", "says it failed", SLURM_END_PLAIN},
        {"COMPLETED", "says it completed", SLURM_END_PLAIN},
    };
    for (size_t i = 0; i < sizeof ENDS / sizeof *ENDS; i++) {
        if (strcmp(state, ENDS[i].state) != 0) continue;
        bool said = reason && *reason && strcmp(reason, "None") != 0 && ENDS[i].kind == SLURM_END_LOST;
        snprintf(out, n, "Slurm %s (job %s %s%s%s)", ENDS[i].words, job, state, said ? ", " : "", said ? reason : "");
        return ENDS[i].kind;
    }
    snprintf(out, n, "Slurm ended it (job %s %s)", job, state);
    return SLURM_END_LOST;
}

void slurm_reason_words(const char *reason, char *out, size_t n) {
    static const struct {
        const char *prefix, *words;
    } WORDS[] = {
        {"Resources", "the nodes it asks for are busy"},
        {"Priority", "jobs of a higher priority go first"},
        {"Dependency", "it waits for another job"},
        {"BeginTime", "its start time has not come"},
        {"JobHeld", "it is held"},
        {"QOS", "a limit of its QOS"},
        {"AssocGrp", "a limit of its account"},
        {"AssocMax", "a limit of its account"},
        {"Partition", "a limit or the state of its partition"},
        {"ReqNodeNotAvail", "the nodes it needs are not available"},
        {"Reservation", "it waits for its reservation"},
        {"Licenses", "it waits for licenses"},
        {"NodeDown", "a node it needs is down"},
        {"BadConstraints", "no node can ever meet what it asks for"},
    };
    const char *r = reason && *reason ? reason : "None";
    for (size_t i = 0; i < sizeof WORDS / sizeof *WORDS; i++) {
        if (strncmp(r, WORDS[i].prefix, strlen(WORDS[i].prefix)) == 0) {
            snprintf(out, n, "%s (%s)", r, WORDS[i].words);
            return;
        }
    }
    snprintf(out, n, "%s", strcmp(r, "None") == 0 ? "its turn (no reason given yet)" : r);
}
