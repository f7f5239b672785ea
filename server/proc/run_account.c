/* A run's Unix account: see run_account.h. */
#include "run_account.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <stdlib.h>
#include <unistd.h>

#include "base.h"
#include "run_files.h"

int run_account_lookup(const char *name, run_account *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    char buf[16384];
    struct passwd pw, *found = NULL;
    int rc = getpwnam_r(name, &pw, buf, sizeof buf, &found);
    if (rc != 0 || !found) {
        snprintf(err, errlen, "this host has no account \"%.32s\"%s%s (make it with useradd, or map the user to "
                 "another: ddpd user set NAME --unix-user ACCOUNT)", name, rc ? ": " : "", rc ? strerror(rc) : "");
        return -1;
    }
    if (pw.pw_uid == 0) {
        snprintf(err, errlen, "the account \"%.32s\" is root (uid 0): runs never run as root; name an unprivileged "
                 "account", name);
        return -1;
    }
    snprintf(out->name, sizeof out->name, "%s", pw.pw_name);
    snprintf(out->home, sizeof out->home, "%s", pw.pw_dir && *pw.pw_dir ? pw.pw_dir : "/");
    out->uid = pw.pw_uid;
    out->gid = pw.pw_gid;
    int n = RUN_ACCOUNT_MAX_GROUPS;
    if (getgrouplist(pw.pw_name, pw.pw_gid, out->groups, &n) < 0) {
        snprintf(err, errlen, "the account \"%.32s\" is in more than %d groups", name, RUN_ACCOUNT_MAX_GROUPS);
        return -1;
    }
    out->n_groups = n;
    return 0;
}

static bool has_cap(const struct __user_cap_data_struct d[2], int cap) {
    return (d[cap / 32].effective >> (cap % 32)) & 1u;
}

bool run_account_can_switch(char *how, size_t howlen, char *missing, size_t missing_len) {
    if (missing_len) missing[0] = '\0';
    if (geteuid() == 0) {
        snprintf(how, howlen, "it runs as root");
        return true;
    }
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof d);
    if (syscall(SYS_capget, &h, d) != 0) {
        snprintf(how, howlen, "its capabilities cannot be read: %s", strerror(errno));
        return false;
    }
    static const struct {
        int cap;
        const char *name;
    } others[] = {{CAP_KILL, "CAP_KILL"}, {CAP_CHOWN, "CAP_CHOWN"}, {CAP_FOWNER, "CAP_FOWNER"},
                  {CAP_DAC_OVERRIDE, "CAP_DAC_OVERRIDE"}};
    size_t at = 0;
    for (size_t i = 0; i < sizeof others / sizeof *others; i++)
        if (!has_cap(d, others[i].cap) && at < missing_len)
            at += (size_t)snprintf(missing + at, missing_len - at, "%s%s", at ? ", " : "", others[i].name);
    bool setuid_ok = has_cap(d, CAP_SETUID), setgid_ok = has_cap(d, CAP_SETGID);
    if (setuid_ok && setgid_ok) snprintf(how, howlen, "it holds CAP_SETUID and CAP_SETGID");
    else snprintf(how, howlen, "it is not root and lacks %s", !setuid_ok && !setgid_ok ? "CAP_SETUID and CAP_SETGID"
                                                            : !setuid_ok ? "CAP_SETUID" : "CAP_SETGID");
    return setuid_ok && setgid_ok;
}

int run_account_take_permitted(void) {
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof d);
    if (syscall(SYS_capget, &h, d) != 0) return -1;
    if (d[0].effective == d[0].permitted && d[1].effective == d[1].permitted) return 0;
    d[0].effective = d[0].permitted;
    d[1].effective = d[1].permitted;
    return syscall(SYS_capset, &h, d) == 0 ? 0 : -1;
}

int run_account_become(const run_account *a) {
    if (setgroups((size_t)a->n_groups, a->groups) != 0) return -1;
    if (setgid(a->gid) != 0) return -1;
    if (setuid(a->uid) != 0) return -1;
    /* a server that is not root keeps its capabilities across setuid (they were not
     * root's): none is left to the run, and none is passed through exec */
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) return -1;
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof d);
    if (syscall(SYS_capset, &h, d) != 0) return -1;
    if (getuid() != a->uid || geteuid() != a->uid || getgid() != a->gid) {
        errno = EPERM;
        return -1;
    }
    umask(077);
    return 0;
}

int run_account_take_dir(const run_account *a, const char *dir, char *err, size_t errlen) {
    run_dir d;
    char why[768];
    int rc = run_dir_open(&d, dir, why, sizeof why) == 0 ? run_dir_hand_over(&d, a->uid, getegid(), 0770, why, sizeof why)
                                                         : -1;
    if (rc != 0) snprintf(err, errlen, "cannot hand the run directory to the account %s: %s", a->name, why);
    run_dir_close(&d);
    return rc;
}

char **run_account_env(const run_account *a, char *const *set) {
    size_t n = 0;
    while (set && set[n]) n++;
    char **v = xmalloc((n + 4) * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = xstrdup(set[i]);
    v[n] = xasprintf("HOME=%s", a->home);
    v[n + 1] = xasprintf("USER=%s", a->name);
    v[n + 2] = xasprintf("LOGNAME=%s", a->name);
    v[n + 3] = NULL;
    return v;
}

void run_account_env_free(char **env) {
    for (size_t i = 0; env && env[i]; i++) free(env[i]);
    free(env);
}
