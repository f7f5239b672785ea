/* The Unix account a run's processes run as (issue 37's wall between accounts): an
 * account of this host looked up by name (its uid, gid, supplementary groups as
 * initgroups would set them, and home), whether this server may switch to another
 * account at all (root, or CAP_SETUID and CAP_SETGID), and, in a forked child before
 * exec, becoming that account with nothing of the server's rights left.
 *
 * run_account_become makes only async-signal-safe calls (setgroups, setgid, setuid,
 * capset, prctl, umask): the parent has threads. Everything it needs was looked up
 * by run_account_lookup in the parent. */
#ifndef DDPD_SERVER_PROC_RUN_ACCOUNT_H
#define DDPD_SERVER_PROC_RUN_ACCOUNT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define RUN_ACCOUNT_MAX_GROUPS 64

typedef struct {
    char name[33];
    uid_t uid;
    gid_t gid;
    int n_groups;
    gid_t groups[RUN_ACCOUNT_MAX_GROUPS];
    char home[256];
} run_account;

/* The account named so. 0; or -1 and why: this host has no such account, it is root
 * (uid 0: a run never runs as root this way), it has too many groups. */
int run_account_lookup(const char *name, run_account *out, char *err, size_t errlen);

/* Whether this process may start others as another account: true when it is root or
 * holds CAP_SETUID and CAP_SETGID in its effective set. `how` says which, or what is
 * missing. The other capabilities a server without root needs to end, own and serve
 * the files of runs across accounts (CAP_KILL, CAP_CHOWN, CAP_FOWNER,
 * CAP_DAC_OVERRIDE) are named in *missing ("" when it has them all). */
bool run_account_can_switch(char *how, size_t howlen, char *missing, size_t missing_len);

/* A server given its capabilities as the file's permitted ones (setcap ...+p, as the
 * Docker image does) makes them effective: 0, or -1 when they cannot be read or set. */
int run_account_take_permitted(void);

/* In a forked child: the account's groups, gid and uid, no capability left (none
 * effective, permitted, inheritable or ambient), umask 077. 0, or -1 with errno. */
int run_account_become(const run_account *a);

/* A child's variables to set (child_env's `set`): `set`'s, then the account's HOME,
 * USER and LOGNAME over its parent's. A NULL-terminated array of malloc'd strings:
 * free it with run_account_env_free. */
char **run_account_env(const run_account *a, char *const *set);
void run_account_env_free(char **env);

/* A run directory handed to the account (a Slurm run's directory holding its batch
 * script, an agent's part directory): the directory itself and what this process put
 * in it (config.json, the log) become the account's, the directory's group this
 * process's (it keeps its way in), mode 0770: no other account may enter. By
 * descriptors, never following a link the run may have put there (run_files.h's
 * run_dir_hand_over). 0, or -1 and err. */
int run_account_take_dir(const run_account *a, const char *dir, char *err, size_t errlen);

#endif
