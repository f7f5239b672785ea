/* `ddpd user`: see user_cmd.h. The database is opened as the server opens it (WAL,
 * migrated to this ddpd's schema) with a busy timeout, so a running server's writer
 * and this command take turns; a running server sees the change at its next request. */
#include "user_cmd.h"

#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit.h"
#include "base.h"
#include "byte_size.h"
#include "die.h"
#include "dirs.h"
#include "migrations.h"
#include "settings.h"
#include "users.h"

const char USER_USAGE[] =
    "usage: ddpd user add NAME [--admin] [--max-devices N] [--max-priority P] [--unix-user ACCOUNT]\n"
    "                     [--max-memory-gb N] [--max-disk-gb N] [--state-dir DIR]\n"
    "       ddpd user set NAME [--unix-user ACCOUNT|--no-unix-user] [--max-devices N|--no-max-devices]\n"
    "                     [--max-priority P] [--max-memory-gb N|none] [--max-disk-gb N|none]\n"
    "                     [--max-duration SECONDS|none] [--state-dir DIR]\n"
    "       ddpd user list [--state-dir DIR]\n"
    "       ddpd user token NAME [--state-dir DIR]\n"
    "       ddpd user remove NAME [--state-dir DIR]\n"
    "\n"
    "The users of a shared ddpd, in its state directory's database (the server may be running: a new\n"
    "or replaced token counts at its next request). A request with a user's token acts as that user:\n"
    "its runs are its own, and only it or an admin may cancel, delete or resume them.\n"
    "\n"
    "  add NAME             a new user; its token is printed once, alone on the last line (only its\n"
    "                       hash is kept). A removed user's name can be given back.\n"
    "  set NAME             changes the user's Unix account (its runs started from now on), or its limits\n"
    "                       (its submissions, sweep trials and resumes from now on)\n"
    "  list                 every user: admin or not, quota, highest priority, memory and disk limits, disk\n"
    "                       used (as the server last measured it), longest run (max-duration), Unix\n"
    "                       account, removed or not\n"
    "  token NAME           a new token for the user; the old one stops working at once\n"
    "  remove NAME          the user's token stops working; its runs stay, owned by its name\n"
    "  --admin              may cancel, delete and resume anyone's run, and give any priority\n"
    "  --max-devices N      its quota: the devices its runs may hold at once (default: none)\n"
    "  --max-priority P     the highest priority its runs may have, -100 to 100 (default 0)\n"
    "  --unix-user ACCOUNT  every process of its runs runs as this account of the host (its uid, gid\n"
    "                       and groups, HOME, umask 077), and its run directories are that account's.\n"
    "                       The server must be root or hold CAP_SETUID and CAP_SETGID (ddpd check says)\n"
    "  --no-unix-user       (set) none of its own: its runs go under ddpd serve --run-user ACCOUNT\n"
    "  --no-max-devices     (set) no quota\n"
    "  --max-memory-gb N    the largest memory limit (GiB) a run of its may have (resources.memory_gb; a\n"
    "                       larger one is refused, and a run that asks none gets at most this; an admin\n"
    "                       any); none: no maximum (default)\n"
    "  --max-disk-gb N      its quota of disk (GiB): what its runs' directories may hold together. Past\n"
    "                       it a new run is refused and a running one stops at its next checkpoint\n"
    "                       (resumable); none: no quota (default)\n"
    "  --max-duration S     (set) the longest a run of its may run in one start, in seconds: at it the run\n"
    "                       checkpoints where it can and ends `timeout` (resumable); its own\n"
    "                       max_duration_s counts where shorter; none: no limit (default)\n"
    "  --state-dir DIR      the server's state directory (DDPD_STATE_DIR; default as ddpd serve's)\n";

static int schema_version(sqlite3 *db) {
    sqlite3_stmt *st = NULL;
    int v = 0;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* The state directory's database, opened and migrated as `ddpd serve` does. */
static sqlite3 *open_db(const char *state_dir) {
    if (mkdir_p(state_dir, 0700) != 0) die("cannot create %s: %s", state_dir, strerror(errno));
    char *path = xasprintf("%s/ddpd.db", state_dir);
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK)
        die("cannot open %s: %s", path, db ? sqlite3_errmsg(db) : "out of memory");
    sqlite3_busy_timeout(db, 10000); /* a running server's writer holds its lock for a batch at a time */
    char err[512];
    if (sqlite3_exec(db, "PRAGMA journal_mode = WAL", NULL, NULL, NULL) != SQLITE_OK)
        die("%s: %s", path, sqlite3_errmsg(db));
    int was = schema_version(db);
    /* one line for the whole migration, not serve's line per step: this is a person's command */
    server_log_config quiet = {.level = LOG_WARN};
    server_log_setup(&quiet, err, sizeof err);
    int now = migrate_apply(db, ddpd_migrations, ddpd_migrations_count, err, sizeof err);
    if (now < 0) die("%s: %s", path, err);
    if (was == 0 && now > 0) fprintf(stderr, "ddpd user: created the database %s (schema version %d)\n", path, now);
    else if (now > was) fprintf(stderr, "ddpd user: migrated the database %s from schema version %d to %d\n", path, was, now);
    free(path);
    return db;
}

static int parse_int(const char *flag, const char *v, int lo, int hi) {
    char *end;
    errno = 0;
    long n = v ? strtol(v, &end, 10) : 0;
    if (!v || !*v || *end || errno || n < lo || n > hi) die("%s must be an integer from %d to %d (got \"%s\")", flag, lo, hi, v ? v : "");
    return (int)n;
}

/* What `owner`'s runs hold on disk as the server last measured them (runs.disk_bytes);
 * -1 when none was measured. */
static long long disk_used(sqlite3 *db, const char *owner) {
    sqlite3_stmt *st = NULL;
    long long used = -1;
    if (sqlite3_prepare_v2(db, "SELECT sum(disk_bytes) FROM runs WHERE owner = ?1", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, owner, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) used = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    return used;
}

/* GiB as a column: "none", "4", "0.5". */
static void gb_text(double gb, char *out, size_t outlen) {
    if (gb < 0) snprintf(out, outlen, "none");
    else snprintf(out, outlen, "%g", gb);
}

static void print_list(sqlite3 *db) {
    user_info *u = NULL;
    int n = users_list(db, &u);
    if (n < 0) die("cannot read the users: %s", sqlite3_errmsg(db));
    if (!n) printf("no users: anybody may change anything this server lets change without a token\n");
    else printf("%-20s %-5s %-11s %-12s %-13s %-11s %-10s %-14s %-16s %-24s %s\n", "NAME", "ADMIN", "MAX-DEVICES",
                "MAX-PRIORITY", "MAX-MEMORY-GB", "MAX-DISK-GB", "DISK-USED", "MAX-DURATION-S", "UNIX-USER", "CREATED",
                "REMOVED");
    for (int i = 0; i < n; i++) {
        char created[32], removed[32] = "-", devices[16] = "none", priority[16] = "100 (admin)";
        char memory[24], disk[24], used[32] = "-", duration[24] = "none";
        if (u[i].max_duration_s >= 0) snprintf(duration, sizeof duration, "%lld", (long long)u[i].max_duration_s);
        format_iso8601(u[i].created_at, created);
        if (u[i].removed) format_iso8601(u[i].removed_at, removed);
        if (u[i].max_devices >= 0) snprintf(devices, sizeof devices, "%d", u[i].max_devices);
        /* an admin may give any priority, whatever its stored max-priority says */
        if (!u[i].admin) snprintf(priority, sizeof priority, "%d", u[i].max_priority);
        if (u[i].admin) snprintf(memory, sizeof memory, "any (admin)");
        else gb_text(u[i].max_memory_gb, memory, sizeof memory);
        gb_text(u[i].max_disk_gb, disk, sizeof disk);
        long long bytes = disk_used(db, u[i].name);
        if (bytes >= 0) byte_size_format((uint64_t)bytes, used, sizeof used);
        for (char *sp = strchr(used, ' '); sp; sp = strchr(sp, ' ')) *sp = '_'; /* one column: "1.5_GiB" */
        printf("%-20s %-5s %-11s %-12s %-13s %-11s %-10s %-14s %-16s %-24s %s\n", u[i].name, u[i].admin ? "yes" : "no",
               devices, priority, memory, disk, used, duration, u[i].unix_user[0] ? u[i].unix_user : "-", created,
               removed);
    }
    free(u);
}

/* A number of GiB from 0 (or "none": -1, where `none_ok`), else dies naming the flag. */
static double parse_gb(const char *flag, const char *v, bool none_ok) {
    if (none_ok && v && strcmp(v, "none") == 0) return -1;
    char *end;
    errno = 0;
    double gb = v && *v ? strtod(v, &end) : -1;
    if (!v || !*v || *end || errno || !(gb >= 0) || gb > 1e9)
        die("%s needs a number of GiB from 0 (e.g. 8 or 0.5)%s (got \"%s\")", flag, none_ok ? ", or none" : "", v ? v : "");
    return gb;
}

/* Who `ddpd user` acts as in the audit log: "(ddpd user: ACCOUNT)", this process's. */
static const char *cli_actor(void) {
    static char actor[80];
    struct passwd *pw = getpwuid(geteuid());
    if (pw) snprintf(actor, sizeof actor, "(ddpd user: %.40s)", pw->pw_name);
    else snprintf(actor, sizeof actor, "(ddpd user: uid %u)", (unsigned)geteuid());
    return actor;
}

/* A limit as the audit log says it: null when none. */
static json_t *limit_json(double v) { return v < 0 ? json_null() : json_real(v); }

/* The audit log's entry of `action` on user `name` (audit.h), inside the caller's
 * transaction. 0, or -1 and why. */
static int audit_user(sqlite3 *db, const char *action, const char *name, json_t *detail, char *err, size_t errlen) {
    char target[96];
    snprintf(target, sizeof target, "user/%s", name);
    return audit_insert_db(db, cli_actor(), action, target, name, detail, err, errlen);
}

/* What `ddpd user set` changes, each {"from": ..., "to": ...}. */
typedef struct {
    bool account, devices, priority, memory, disk, duration;
} set_given;

static json_t *set_detail(sqlite3 *db, const user_info *u, set_given g) {
    user_info *all = NULL, *was = NULL;
    int n = users_list(db, &all);
    for (int i = 0; i < n; i++)
        if (strcmp(all[i].name, u->name) == 0) was = &all[i];
    json_t *d = json_object();
#define CHANGE(flag, key, from, to) \
    if (g.flag) json_object_set_new(d, key, json_pack("{s:o,s:o}", "from", was ? (from) : json_null(), "to", (to)))
    CHANGE(account, "unix_user", json_string(was->unix_user), u->unix_user[0] ? json_string(u->unix_user) : json_null());
    CHANGE(devices, "max_devices", was->max_devices < 0 ? json_null() : json_integer(was->max_devices),
           u->max_devices < 0 ? json_null() : json_integer(u->max_devices));
    CHANGE(priority, "max_priority", json_integer(was->max_priority), json_integer(u->max_priority));
    CHANGE(memory, "max_memory_gb", limit_json(was->max_memory_gb), limit_json(u->max_memory_gb));
    CHANGE(disk, "max_disk_gb", limit_json(was->max_disk_gb), limit_json(u->max_disk_gb));
    CHANGE(duration, "max_duration_s", was->max_duration_s < 0 ? json_null() : json_integer(was->max_duration_s),
           u->max_duration_s < 0 ? json_null() : json_integer(u->max_duration_s));
#undef CHANGE
    if (n > 0) free(all);
    return d;
}

/* `ddpd user set`: each change given, in one transaction (all or none), each said in
 * a line. 0, or 1. */
static int set_user(sqlite3 *db, const user_info *u, set_given g) {
    char err[512], gb[32];
    sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    bool ok = audit_user(db, "user.set", u->name, set_detail(db, u, g), err, sizeof err) == 0 &&
              (!g.account || users_set_unix_user(db, u->name, u->unix_user, err, sizeof err) == 0) &&
              (!g.devices || users_set_max_devices(db, u->name, u->max_devices, err, sizeof err) == 0) &&
              (!g.priority || users_set_max_priority(db, u->name, u->max_priority, err, sizeof err) == 0) &&
              (!g.memory || users_set_limit(db, u->name, "max_memory_gb", u->max_memory_gb, err, sizeof err) == 0) &&
              (!g.disk || users_set_limit(db, u->name, "max_disk_gb", u->max_disk_gb, err, sizeof err) == 0) &&
              (!g.duration || users_set_max_duration(db, u->name, u->max_duration_s, err, sizeof err) == 0);
    if (!ok || sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        if (ok) snprintf(err, sizeof err, "the database cannot be written: %s", sqlite3_errmsg(db));
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        fprintf(stderr, "ddpd user: %s\n", err);
        return 1;
    }
    if (g.account && u->unix_user[0])
        printf("user %s: its runs started from now on run as the account %s\n", u->name, u->unix_user);
    else if (g.account)
        printf("user %s: no account of its own; its runs started from now on run as ddpd serve's --run-user\n",
               u->name);
    if (g.devices && u->max_devices >= 0)
        printf("user %s: max-devices %d (its runs may hold that many devices at once)\n", u->name, u->max_devices);
    else if (g.devices)
        printf("user %s: no quota\n", u->name);
    if (g.priority)
        printf("user %s: max-priority %d: its submissions, sweep trials and resumes from now on may not go above it\n",
               u->name, u->max_priority);
    gb_text(u->max_memory_gb, gb, sizeof gb);
    if (g.memory)
        printf("user %s: max-memory-gb %s: its runs may ask for %s%s%s (runs started from now on)\n", u->name, gb,
               u->max_memory_gb < 0 ? "any memory limit" : "a memory limit of at most ", u->max_memory_gb < 0 ? "" : gb,
               u->max_memory_gb < 0 ? "" : " GiB");
    if (g.duration && u->max_duration_s >= 0)
        printf("user %s: max-duration %lld s: a run of its ends `timeout` (resumable) after that long in one start\n",
               u->name, u->max_duration_s);
    else if (g.duration)
        printf("user %s: no limit on how long its runs run\n", u->name);
    gb_text(u->max_disk_gb, gb, sizeof gb);
    if (g.disk)
        printf("user %s: max-disk-gb %s: %s%s%s\n", u->name, gb, u->max_disk_gb < 0 ? "no quota on its runs' disk" :
               "its runs' directories may hold at most ", u->max_disk_gb < 0 ? "" : gb, u->max_disk_gb < 0 ? "" : " GiB");
    return 0;
}

/* The end of the transaction user_main began: committed when `ok` (the change and
 * its audit entry), else rolled back. Whether it was committed. */
static bool in_transaction(sqlite3 *db, bool ok, char *err, size_t errlen) {
    if (ok && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK) return true;
    if (ok) snprintf(err, errlen, "the database cannot be written: %s", sqlite3_errmsg(db));
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return false;
}

int user_main(int argc, char **argv) {
    die_set_program("ddpd user");
    if (argc < 3 || strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0 || strcmp(argv[2], "help") == 0) {
        fputs(USER_USAGE, argc < 3 ? stderr : stdout);
        return argc < 3 ? 2 : 0;
    }
    const char *verb = argv[2], *name = NULL, *state_flag = NULL;
    user_info u = {.max_devices = -1, .max_memory_gb = -1, .max_disk_gb = -1, .max_duration_s = -1};
    bool wants_name = strcmp(verb, "list") != 0;
    set_given given = {0};
    if (strcmp(verb, "add") && strcmp(verb, "set") && strcmp(verb, "list") && strcmp(verb, "token") &&
        strcmp(verb, "remove"))
        die("there is no `ddpd user %s`: add, set, list, token or remove (ddpd user --help)", verb);
    bool sets_fields = strcmp(verb, "add") == 0 || strcmp(verb, "set") == 0;
    for (int i = 3; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--state-dir") == 0) state_flag = v, i++;
        else if (strcmp(verb, "add") == 0 && strcmp(a, "--admin") == 0) u.admin = true;
        else if (sets_fields && strcmp(a, "--max-devices") == 0)
            u.max_devices = parse_int(a, v, 0, 100000), given.devices = true, i++;
        else if (strcmp(verb, "set") == 0 && strcmp(a, "--no-max-devices") == 0) u.max_devices = -1, given.devices = true;
        else if (sets_fields && strcmp(a, "--max-priority") == 0)
            u.max_priority = parse_int(a, v, -100, 100), given.priority = true, i++;
        else if (sets_fields && strcmp(a, "--unix-user") == 0) {
            if (!v || !*v) die("--unix-user needs the name of an account of this host");
            snprintf(u.unix_user, sizeof u.unix_user, "%s", v);
            const char *bad = strlen(v) > USER_UNIX_MAX ? "an account's name is at most 32 characters"
                                                        : users_unix_user_problem(v);
            if (bad) die("--unix-user \"%.80s\": %s", v, bad);
            given.account = true, i++;
        } else if (strcmp(verb, "set") == 0 && strcmp(a, "--no-unix-user") == 0) u.unix_user[0] = '\0', given.account = true;
        else if (sets_fields && strcmp(a, "--max-memory-gb") == 0)
            u.max_memory_gb = parse_gb(a, v, strcmp(verb, "set") == 0), given.memory = true, i++;
        else if (strcmp(verb, "set") == 0 && strcmp(a, "--max-duration") == 0) {
            u.max_duration_s = v && strcmp(v, "none") == 0 ? -1 : parse_int(a, v, 1, 365 * 24 * 3600);
            given.duration = true, i++;
        } else if (sets_fields && strcmp(a, "--max-disk-gb") == 0)
            u.max_disk_gb = parse_gb(a, v, strcmp(verb, "set") == 0), given.disk = true, i++;
        else if (a[0] == '-' && a[1] == '-') die("ddpd user %s takes no %s (ddpd user --help)", verb, a);
        else if (wants_name && !name) name = a;
        else die("unexpected argument \"%s\" (ddpd user --help)", a);
        if (strcmp(a, "--state-dir") == 0 && !v) die("--state-dir needs a value");
    }
    if (wants_name && !name) die("ddpd user %s needs the user's NAME (ddpd user --help)", verb);
    if (strcmp(verb, "set") == 0 && !given.account && !given.devices && !given.priority && !given.memory && !given.disk &&
        !given.duration)
        die("ddpd user set %s needs what to change: --unix-user ACCOUNT or --no-unix-user, --max-devices N or "
            "--no-max-devices, --max-priority P, --max-memory-gb N|none, --max-disk-gb N|none, --max-duration "
            "SECONDS|none (ddpd user --help)",
            name);
    if (given.account && u.unix_user[0] && !getpwnam(u.unix_user))
        fprintf(stderr, "ddpd user: warning: this host has no account %s (yet): runs of %s are refused until it "
                        "does (useradd %s)\n", u.unix_user, name, u.unix_user);
    if (name) {
        const char *bad = users_name_problem(name);
        if (bad) die("\"%.80s\": %s", name, bad);
        snprintf(u.name, sizeof u.name, "%s", name);
    }
    char *state_dir = settings_state_dir(state_flag);
    umask(077); /* the database is the server's user's only, as serve makes it */
    sqlite3 *db = open_db(state_dir);
    char token[65], err[512];
    bool writes = strcmp(verb, "list") != 0 && strcmp(verb, "set") != 0; /* set: a transaction of its own */
    if (writes) sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL); /* the change and its audit entry: one */
    int rc = 0;
    if (strcmp(verb, "list") == 0) {
        print_list(db);
    } else if (strcmp(verb, "add") == 0) {
        json_t *detail = json_pack("{s:b,s:o,s:i,s:o,s:o,s:o}", "admin", u.admin, "max_devices",
                                   u.max_devices < 0 ? json_null() : json_integer(u.max_devices), "max_priority",
                                   u.max_priority, "max_memory_gb", limit_json(u.max_memory_gb), "max_disk_gb",
                                   limit_json(u.max_disk_gb), "unix_user",
                                   u.unix_user[0] ? json_string(u.unix_user) : json_null());
        if (!in_transaction(db, audit_user(db, "user.add", u.name, detail, err, sizeof err) == 0 &&
                                    users_add(db, &u, token, err, sizeof err) == 0, err, sizeof err)) {
            fprintf(stderr, "ddpd user: %s\n", err);
            rc = 1;
        } else {
            char devices[32] = "no quota";
            if (u.max_devices >= 0) snprintf(devices, sizeof devices, "max-devices %d", u.max_devices);
            char priority[48] = "any priority, up to 100";
            if (!u.admin) snprintf(priority, sizeof priority, "max-priority %d", u.max_priority);
            char account[64] = "", limits[96] = "";
            if (u.unix_user[0]) snprintf(account, sizeof account, ", runs as %s", u.unix_user);
            int at = 0;
            if (u.max_memory_gb >= 0) at = snprintf(limits, sizeof limits, ", max-memory-gb %g", u.max_memory_gb);
            if (u.max_disk_gb >= 0) snprintf(limits + at, sizeof limits - (size_t)at, ", max-disk-gb %g", u.max_disk_gb);
            printf("user %s added (%s%s, %s%s%s); its token, shown this once (only its hash is kept):\n%s\n", u.name,
                   u.admin ? "admin, " : "", devices, priority, limits, account, token);
        }
    } else if (strcmp(verb, "set") == 0) {
        rc = set_user(db, &u, given);
    } else if (strcmp(verb, "token") == 0) {
        if (!in_transaction(db, audit_user(db, "user.token", u.name, NULL, err, sizeof err) == 0 &&
                                    users_new_token(db, u.name, token, err, sizeof err) == 0, err, sizeof err)) {
            fprintf(stderr, "ddpd user: %s\n", err);
            rc = 1;
        } else {
            printf("a new token for %s; the old one no longer works. Shown this once:\n%s\n", u.name, token);
        }
    } else if (!in_transaction(db, audit_user(db, "user.remove", u.name, NULL, err, sizeof err) == 0 &&
                                       users_remove(db, u.name, err, sizeof err) == 0, err, sizeof err)) {
        fprintf(stderr, "ddpd user: %s\n", err);
        rc = 1;
    } else {
        printf("user %s removed: its token no longer works; its runs stay, owned by %s\n", u.name, u.name);
    }
    sqlite3_close(db);
    free(state_dir);
    return rc;
}
