/* Whom a run's processes run as: see run_as.h. */
#include "run_as.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "users.h"

static struct {
    run_as_config c;
    bool can_switch;
    char switch_how[160];
} A;

int run_as_init(const run_as_config *c, char *err, size_t errlen) {
    A.c = *c;
    if (A.c.run_user && !*A.c.run_user) A.c.run_user = NULL;
    char missing[128];
    A.can_switch = run_account_can_switch(A.switch_how, sizeof A.switch_how, missing, sizeof missing);
    if (!A.c.run_user) return 0;
    run_account a;
    char why[512];
    if (run_account_lookup(A.c.run_user, &a, why, sizeof why) != 0) {
        snprintf(err, errlen, "--run-user %s: %s", A.c.run_user, why);
        return -1;
    }
    if (!A.can_switch && a.uid != geteuid()) {
        snprintf(err, errlen, "--run-user %s: this server cannot start processes as another account (%s): start it "
                 "as root, or give it CAP_SETUID, CAP_SETGID, CAP_KILL, CAP_CHOWN, CAP_FOWNER and CAP_DAC_OVERRIDE "
                 "(docs/security.md, \"The server's rights\")", A.c.run_user, A.switch_how);
        return -1;
    }
    return 0;
}

static const char OPERATOR_MUST[] =
    "map the user to an account of this host (ddpd user set NAME --unix-user ACCOUNT) or start the server with "
    "--run-user ACCOUNT (an unprivileged account of its own); either needs a server that is root or holds "
    "CAP_SETUID and CAP_SETGID";

run_as_verdict run_as_resolve(const char *owner, bool command, run_account *out, char *why, size_t whylen) {
    user_info u;
    const char *account = NULL, *source = NULL;
    if (owner && users_find(owner, &u) && u.unix_user[0]) account = u.unix_user, source = "its user's --unix-user";
    else if (A.c.run_user) account = A.c.run_user, source = "the server's --run-user";
    if (account) {
        char err[512];
        if (run_account_lookup(account, out, err, sizeof err) != 0) {
            snprintf(why, whylen, "the run would run as %s (%s), but %.400s", account, source, err);
            return RUN_AS_REFUSED;
        }
        if (out->uid == geteuid()) return RUN_AS_ACCOUNT; /* the server's own: nothing to switch, HOME and umask all the same */
        if (!A.can_switch) {
            snprintf(why, whylen, "the run would run as the account %s (%s), but this server cannot switch accounts "
                     "(%s): the operator starts it as root or with CAP_SETUID and CAP_SETGID (ddpd check says which)",
                     account, source, A.switch_how);
            return RUN_AS_REFUSED;
        }
        return RUN_AS_ACCOUNT;
    }
    if (command && !A.c.unsafe_as_server && geteuid() == 0) {
        snprintf(why, whylen, "this server runs as root and a command run would run as root: the operator must %s "
                 "(or, knowingly, pass --unsafe-commands-as-server)", OPERATOR_MUST);
        return RUN_AS_REFUSED;
    }
    if (command && !A.c.unsafe_as_server && users_exist()) {
        snprintf(why, whylen, "this server has users and a command run would run as the server's own user, which "
                 "can read and change the database and every other user's runs: the operator must %s (or, knowingly, "
                 "pass --unsafe-commands-as-server)", OPERATOR_MUST);
        return RUN_AS_REFUSED;
    }
    return RUN_AS_SERVER;
}

long run_as_uid(const char *owner, bool command) {
    run_account a;
    char why[1024];
    switch (run_as_resolve(owner, command, &a, why, sizeof why)) {
    case RUN_AS_ACCOUNT: return (long)a.uid;
    case RUN_AS_SERVER: return (long)geteuid();
    default: return -1;
    }
}

bool run_as_accounts_in_use(void) {
    if (A.c.run_user) return true;
    return users_any_unix_user();
}
