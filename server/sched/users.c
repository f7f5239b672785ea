/* The users of a shared server: see users.h. */
#include "users.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "base.h"
#include "disk_use.h"
#include "secret.h"
#include "sha256.h"

typedef struct {
    user_info info;
    char token_sha256[SHA256_HEX_LEN + 1]; /* "" once removed */
} user_row;

static struct {
    pthread_mutex_t mu;
    sqlite3 *db;
    sqlite3_stmt *version_stmt; /* PRAGMA data_version, prepared once: asked on every identify */
    int64_t data_version;       /* of the database when the rows were read */
    user_row *rows;
    int n;
    char *server_token;
    atomic_bool any; /* U.n > 0 as last read: what a read asks, with no query */
    bool loaded;     /* read once: a change read after is the audit log's (user.seen) */
} U = {.mu = PTHREAD_MUTEX_INITIALIZER};

#define USERS_SELECT \
    "SELECT name, admin, max_devices, max_priority, removed_at IS NOT NULL, created_at, removed_at, token_sha256," \
    " unix_user, max_memory_gb, max_disk_gb, max_duration_s FROM users ORDER BY name"

static void read_row(sqlite3_stmt *st, user_info *u, char *hash, size_t hash_len) {
    memset(u, 0, sizeof *u);
    const char *name = (const char *)sqlite3_column_text(st, 0);
    snprintf(u->name, sizeof u->name, "%s", name ? name : "");
    u->admin = sqlite3_column_int(st, 1) != 0;
    u->max_devices = sqlite3_column_type(st, 2) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 2);
    u->max_priority = sqlite3_column_int(st, 3);
    u->removed = sqlite3_column_int(st, 4) != 0;
    u->created_at = sqlite3_column_int64(st, 5);
    u->removed_at = sqlite3_column_type(st, 6) == SQLITE_NULL ? 0 : sqlite3_column_int64(st, 6);
    const char *h = (const char *)sqlite3_column_text(st, 7);
    if (hash) snprintf(hash, hash_len, "%s", h ? h : "");
    const char *account = (const char *)sqlite3_column_text(st, 8);
    snprintf(u->unix_user, sizeof u->unix_user, "%s", account ? account : "");
    u->max_memory_gb = sqlite3_column_type(st, 9) == SQLITE_NULL ? -1 : sqlite3_column_double(st, 9);
    u->max_disk_gb = sqlite3_column_type(st, 10) == SQLITE_NULL ? -1 : sqlite3_column_double(st, 10);
    u->max_duration_s = sqlite3_column_type(st, 11) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 11);
}

long long users_gb_bytes(double gb) { return gb < 0 ? -1 : (long long)(gb * (double)(1LL << 30)); }

/* The database's data_version (it moves when another connection commits); -1 when
 * it cannot be read. Under U.mu. */
static int64_t data_version_locked(void) {
    if (!U.version_stmt && sqlite3_prepare_v2(U.db, "PRAGMA data_version", -1, &U.version_stmt, NULL) != SQLITE_OK)
        return -1;
    int64_t v = sqlite3_step(U.version_stmt) == SQLITE_ROW ? sqlite3_column_int64(U.version_stmt, 0) : -1;
    sqlite3_reset(U.version_stmt);
    return v;
}

/* A limit in the audit log: null when none. */
static json_t *limit_json(double v) { return v < 0 ? json_null() : json_real(v); }

/* The audit log's entry of what the running server now sees of a user, changed since it
 * last read the table (`ddpd user` on the database file): each field {from, to}. */
static void audit_seen(const user_row *was, const user_row *now) {
    json_t *d = json_object();
#define SEEN(key, differs, from, to) \
    if (differs) json_object_set_new(d, key, json_pack("{s:o,s:o}", "from", from, "to", to))
    const user_info *a = was ? &was->info : NULL, *b = &now->info;
    SEEN("user", !a, json_null(), json_string("added"));
    if (a) {
        SEEN("admin", a->admin != b->admin, json_boolean(a->admin), json_boolean(b->admin));
        SEEN("max_devices", a->max_devices != b->max_devices,
             a->max_devices < 0 ? json_null() : json_integer(a->max_devices),
             b->max_devices < 0 ? json_null() : json_integer(b->max_devices));
        SEEN("max_priority", a->max_priority != b->max_priority, json_integer(a->max_priority), json_integer(b->max_priority));
        SEEN("max_memory_gb", a->max_memory_gb != b->max_memory_gb, limit_json(a->max_memory_gb), limit_json(b->max_memory_gb));
        SEEN("max_disk_gb", a->max_disk_gb != b->max_disk_gb, limit_json(a->max_disk_gb), limit_json(b->max_disk_gb));
        SEEN("unix_user", strcmp(a->unix_user, b->unix_user) != 0, json_string(a->unix_user), json_string(b->unix_user));
        SEEN("removed", a->removed != b->removed, json_boolean(a->removed), json_boolean(b->removed));
        SEEN("token", strcmp(was->token_sha256, now->token_sha256) != 0 && !b->removed, json_string("old"),
             json_string("replaced"));
    }
#undef SEEN
    if (!json_object_size(d)) {
        json_decref(d);
        return;
    }
    char target[96];
    snprintf(target, sizeof target, "user/%s", b->name);
    audit_queue(AUDIT_SERVER, "user.seen", 0, target, b->name, d);
}

/* Reads the table; true when what it holds changed. Under U.mu. */
static bool reload_locked(void) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(U.db, USERS_SELECT, -1, &st, NULL) != SQLITE_OK) {
        log_error("cannot read the users: %s", sqlite3_errmsg(U.db));
        return false;
    }
    user_row *rows = NULL;
    int n = 0, cap = 0, rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (n == cap) rows = xrealloc(rows, (size_t)(cap = cap ? cap * 2 : 8) * sizeof *rows);
        memset(&rows[n], 0, sizeof rows[n]); /* every byte, padding too: the rows are compared whole */
        read_row(st, &rows[n].info, rows[n].token_sha256, sizeof rows[n].token_sha256);
        n++;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        log_error("cannot read the users: %s", sqlite3_errmsg(U.db));
        free(rows);
        return false;
    }
    bool changed = n != U.n || (n && memcmp(rows, U.rows, (size_t)n * sizeof *rows) != 0);
    for (int i = 0; changed && U.loaded && i < n; i++) { /* what a running server now goes by */
        const user_row *was = NULL;
        for (int j = 0; j < U.n && !was; j++)
            if (strcmp(U.rows[j].info.name, rows[i].info.name) == 0) was = &U.rows[j];
        audit_seen(was, &rows[i]);
    }
    U.loaded = true;
    free(U.rows);
    U.rows = rows;
    U.n = n;
    atomic_store(&U.any, n > 0);
    return changed;
}

int users_open(const char *db_path, const char *server_token, char *err, size_t errlen) {
    if (sqlite3_open_v2(db_path, &U.db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "cannot open %s to read its users: %s", db_path,
                 U.db ? sqlite3_errmsg(U.db) : "out of memory");
        sqlite3_close(U.db);
        U.db = NULL;
        return -1;
    }
    sqlite3_busy_timeout(U.db, 5000);
    U.server_token = server_token ? xstrdup(server_token) : NULL;
    pthread_mutex_lock(&U.mu);
    U.data_version = data_version_locked();
    reload_locked();
    pthread_mutex_unlock(&U.mu);
    return 0;
}

void users_close(void) {
    pthread_mutex_lock(&U.mu);
    sqlite3_finalize(U.version_stmt);
    U.version_stmt = NULL;
    sqlite3_close(U.db);
    U.db = NULL;
    free(U.rows);
    U.rows = NULL;
    U.n = 0;
    U.loaded = false;
    free(U.server_token);
    U.server_token = NULL;
    pthread_mutex_unlock(&U.mu);
}

/* Under U.mu. */
static bool refresh_locked(void) {
    if (!U.db) return false;
    int64_t v = data_version_locked();
    if (v == U.data_version) return false;
    U.data_version = v;
    return reload_locked();
}

bool users_refresh(void) {
    pthread_mutex_lock(&U.mu);
    bool changed = refresh_locked();
    pthread_mutex_unlock(&U.mu);
    return changed;
}

bool users_exist(void) {
    pthread_mutex_lock(&U.mu);
    refresh_locked();
    bool any = U.n > 0;
    pthread_mutex_unlock(&U.mu);
    return any;
}

static const user_row *row_named(const char *name) {
    for (int i = 0; name && i < U.n; i++)
        if (strcmp(U.rows[i].info.name, name) == 0) return &U.rows[i];
    return NULL;
}

bool users_known(void) { return atomic_load(&U.any); }

/* The row whose token hashes to `hash`. Under U.mu. */
static const user_row *row_with_hash(const char *hash) {
    for (int i = 0; i < U.n; i++) /* a hash of a random token: no timing to learn from */
        if (U.rows[i].token_sha256[0] && strcmp(U.rows[i].token_sha256, hash) == 0) return &U.rows[i];
    return NULL;
}

/* Who `token` (NULL: none; `hash`: its SHA-256) is, by the rows as they are. Under U.mu. */
static auth_verdict identify_locked(const char *token, const char *hash, caller *who) {
    memset(who, 0, sizeof *who);
    who->max_devices = -1;
    who->max_memory_bytes = who->max_disk_bytes = -1;
    auth_verdict v = AUTH_OK;
    bool server_token = U.server_token && secret_equal(token, U.server_token);
    const user_row *found = token && !server_token ? row_with_hash(hash) : NULL;
    if (server_token) {
        who->kind = CALLER_ADMIN_TOKEN;
    } else if (found) {
        who->kind = CALLER_USER;
        snprintf(who->name, sizeof who->name, "%s", found->info.name);
        who->admin = found->info.admin;
        who->max_priority = found->info.max_priority;
        who->max_devices = found->info.max_devices;
        who->max_memory_bytes = users_gb_bytes(found->info.max_memory_gb);
        who->max_disk_bytes = users_gb_bytes(found->info.max_disk_gb);
    } else if (!U.server_token && U.n == 0) {
        who->kind = CALLER_ANONYMOUS; /* a box without users and without a token: as before users */
    } else {
        v = token ? AUTH_UNKNOWN : AUTH_MISSING;
    }
    if (who->kind != CALLER_USER && v == AUTH_OK) who->admin = true;
    if (who->admin) who->max_priority = 100, who->max_memory_bytes = -1; /* an admin may give any */
    return v;
}

auth_verdict users_identify(const char *authorization, caller *who) {
    const char *token = auth_bearer_value(authorization);
    char hash[SHA256_HEX_LEN + 1] = "";
    if (token) sha256_hex(token, hash);
    pthread_mutex_lock(&U.mu);
    refresh_locked();
    auth_verdict v = identify_locked(token, hash, who);
    pthread_mutex_unlock(&U.mu);
    return v;
}

/* The SHA-256 of the token this thread hashed last: a client's next read, on the same
 * keep-alive connection, brings the same token (compared in constant time: the one
 * kept may be another user's). */
static void read_token_hash(const char *token, char hash[SHA256_HEX_LEN + 1]) {
    static __thread char last_token[128], last_hash[SHA256_HEX_LEN + 1];
    if (last_hash[0] && secret_equal(token, last_token)) {
        memcpy(hash, last_hash, sizeof last_hash);
        return;
    }
    sha256_hex(token, hash);
    if (strlen(token) < sizeof last_token) {
        memcpy(last_token, token, strlen(token) + 1);
        memcpy(last_hash, hash, sizeof last_hash);
    }
}

auth_verdict users_identify_read(const char *authorization, caller *who) {
    const char *token = auth_bearer_value(authorization);
    char hash[SHA256_HEX_LEN + 1] = "";
    if (token) read_token_hash(token, hash);
    pthread_mutex_lock(&U.mu);
    auth_verdict v = identify_locked(token, hash, who);
    if (v == AUTH_UNKNOWN && refresh_locked()) v = identify_locked(token, hash, who); /* a user added just now */
    pthread_mutex_unlock(&U.mu);
    return v;
}

const char *users_refusal(auth_verdict v) {
    bool token;
    pthread_mutex_lock(&U.mu);
    token = U.server_token != NULL;
    bool users = U.n > 0;
    pthread_mutex_unlock(&U.mu);
    if (v == AUTH_UNKNOWN)
        return users ? "the token sent is not one this server knows: a user's token stops working once `ddpd user "
                       "token NAME` gives a new one or `ddpd user remove NAME` removes the user; ask an admin for yours"
                     : "this server needs its token to change anything: the token sent is not it (the token ddpd was "
                       "started with: --token-file, DDPD_TOKEN or --token)";
    if (!users)
        return "this server needs its token to change anything: send \"Authorization: Bearer <token>\" (the token ddpd "
               "was started with: --token-file, DDPD_TOKEN or --token)";
    return token ? "this server has users: send \"Authorization: Bearer <token>\" with your user's token (`ddpd user add "
                   "NAME` prints it once; `ddpd user token NAME` makes a new one) or the server's own token"
                 : "this server has users: send \"Authorization: Bearer <token>\" with your user's token (`ddpd user add "
                   "NAME` prints it once; `ddpd user token NAME` makes a new one)";
}

bool users_any_unix_user(void) {
    bool any = false;
    pthread_mutex_lock(&U.mu);
    for (int i = 0; i < U.n && !any; i++) any = U.rows[i].info.unix_user[0] && !U.rows[i].info.removed;
    pthread_mutex_unlock(&U.mu);
    return any;
}

bool users_find(const char *name, user_info *out) {
    pthread_mutex_lock(&U.mu);
    const user_row *r = row_named(name);
    if (r) *out = r->info;
    pthread_mutex_unlock(&U.mu);
    return r != NULL;
}

bool users_caller(const char *owner, caller *out) {
    memset(out, 0, sizeof *out);
    out->max_devices = -1;
    out->max_memory_bytes = out->max_disk_bytes = -1;
    if (!owner) {
        out->kind = CALLER_ADMIN_TOKEN;
        out->admin = true;
        out->max_priority = 100;
        return true;
    }
    out->kind = CALLER_USER;
    snprintf(out->name, sizeof out->name, "%s", owner);
    out->max_priority = -100;
    out->max_devices = 0;
    pthread_mutex_lock(&U.mu);
    refresh_locked(); /* a limit changed a moment ago counts */
    const user_row *r = row_named(owner);
    bool found = r && !r->info.removed;
    if (found) {
        out->admin = r->info.admin;
        out->max_priority = r->info.admin ? 100 : r->info.max_priority;
        out->max_devices = r->info.max_devices;
        out->max_memory_bytes = r->info.admin ? -1 : users_gb_bytes(r->info.max_memory_gb); /* an admin may give any */
        out->max_disk_bytes = users_gb_bytes(r->info.max_disk_gb);
    }
    pthread_mutex_unlock(&U.mu);
    return found;
}

int users_max_devices(const char *name) {
    user_info u;
    return users_find(name, &u) ? u.max_devices : -1;
}

long long users_max_duration(const char *name) {
    user_info u;
    return name && users_find(name, &u) && !u.removed ? u.max_duration_s : -1;
}

static json_t *gb_or_null(double gb) { return gb < 0 ? json_null() : json_real(gb); }

static json_t *user_json(const user_info *u) {
    char created[32], removed[32];
    format_iso8601(u->created_at, created);
    if (u->removed) format_iso8601(u->removed_at, removed);
    int64_t used = disk_use_of(u->name);
    return json_pack("{s:s, s:b, s:o, s:i, s:o, s:o, s:o, s:s, s:o}", "name", u->name, "admin", u->admin, "max_devices",
                     u->max_devices < 0 ? json_null() : json_integer(u->max_devices), "max_priority", u->max_priority,
                     "max_memory_gb", gb_or_null(u->admin ? -1 : u->max_memory_gb), "max_disk_gb", gb_or_null(u->max_disk_gb),
                     "disk_used_bytes", used < 0 ? json_null() : json_integer(used), "created_at", created,
                     "removed_at", u->removed ? json_string(removed) : json_null());
}

json_t *users_json(void) {
    json_t *a = json_array();
    pthread_mutex_lock(&U.mu);
    refresh_locked();
    for (int i = 0; i < U.n; i++) json_array_append_new(a, user_json(&U.rows[i].info));
    pthread_mutex_unlock(&U.mu);
    return a;
}

/* ---- `ddpd user` ---- */

/* What is wrong with a name of `what` (a user's, an account's) of at most `max`
 * characters, in `out`; NULL when nothing is. */
static const char *name_problem(const char *name, const char *what, size_t max, char *out, size_t outlen) {
    size_t n = name ? strlen(name) : 0;
    if (n == 0) snprintf(out, outlen, "%s name cannot be empty", what);
    else if (n > max) snprintf(out, outlen, "%s name is at most %zu characters", what, max);
    else if (name[0] == '-') snprintf(out, outlen, "%s name cannot start with '-'", what);
    else if (strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != n)
        snprintf(out, outlen, "%s name holds only letters, digits, '.', '_' and '-'", what);
    else return NULL;
    return out;
}

const char *users_name_problem(const char *name) {
    static _Thread_local char why[96];
    return name_problem(name, "a user's", USER_NAME_MAX, why, sizeof why);
}

/* A new token and its hash. 0 or -1. */
static int make_token(char token[65], char hash[SHA256_HEX_LEN + 1], char *err, size_t errlen) {
    if (random_hex(token, 32) != 0) {
        snprintf(err, errlen, "cannot make a token: getrandom failed");
        return -1;
    }
    sha256_hex(token, hash);
    return 0;
}

/* Runs one statement with its text bindings (NULL: SQL NULL); the rows it changed, or -1 and why. */
static int exec_bound(sqlite3 *db, const char *sql, const char *const *texts, int n_texts, const long long *ints,
                      int n_ints, char *err, size_t errlen) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "the database: %s", sqlite3_errmsg(db));
        return -1;
    }
    for (int i = 0; i < n_texts; i++)
        if (texts[i]) sqlite3_bind_text(st, i + 1, texts[i], -1, SQLITE_TRANSIENT);
    for (int i = 0; i < n_ints; i++)
        if (ints[i] != NO_INT) sqlite3_bind_int64(st, n_texts + i + 1, ints[i]);
    int rc = sqlite3_step(st);
    int changed = rc == SQLITE_DONE ? sqlite3_changes(db) : -1;
    if (rc != SQLITE_DONE) snprintf(err, errlen, "the database cannot be written: %s", sqlite3_errmsg(db));
    sqlite3_finalize(st);
    return changed;
}

/* 1: there is such a user (removed: *removed), 0: none, -1: error. */
static int existing(sqlite3 *db, const char *name, bool *removed, char *err, size_t errlen) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT removed_at IS NOT NULL FROM users WHERE name = ?1", -1, &st, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "the database: %s", sqlite3_errmsg(db));
        return -1;
    }
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st), found = rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
    if (found == 1) *removed = sqlite3_column_int(st, 0) != 0;
    if (found < 0) snprintf(err, errlen, "the database cannot be read: %s", sqlite3_errmsg(db));
    sqlite3_finalize(st);
    return found;
}

int users_add(sqlite3 *db, const user_info *u, char token[65], char *err, size_t errlen) {
    const char *bad = users_name_problem(u->name);
    if (bad) {
        snprintf(err, errlen, "\"%.80s\": %s", u->name, bad);
        return -1;
    }
    bool removed = false;
    int found = existing(db, u->name, &removed, err, errlen);
    if (found < 0) return -1;
    if (found && !removed) {
        snprintf(err, errlen, "there is a user %s already: `ddpd user token %s` gives it a new token", u->name, u->name);
        return -1;
    }
    char hash[SHA256_HEX_LEN + 1];
    if (make_token(token, hash, err, errlen) != 0) return -1;
    if (u->unix_user[0] && (bad = users_unix_user_problem(u->unix_user))) {
        snprintf(err, errlen, "--unix-user \"%.80s\": %s", u->unix_user, bad);
        return -1;
    }
    const char *texts[] = {u->name, hash, u->unix_user[0] ? u->unix_user : NULL};
    long long ints[] = {u->admin, u->max_devices < 0 ? NO_INT : u->max_devices, u->max_priority, now_ms()};
    /* a removed user's name given back: the same row, its runs its own again */
    const char *sql = found ? "UPDATE users SET token_sha256 = ?2, unix_user = ?3, admin = ?4, max_devices = ?5,"
                              " max_priority = ?6, removed_at = NULL WHERE name = ?1"
                            : "INSERT INTO users (name, token_sha256, unix_user, admin, max_devices, max_priority,"
                              " created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";
    if (exec_bound(db, sql, texts, 3, ints, found ? 3 : 4, err, errlen) != 1) return -1;
    /* its limits, as given (a name given back starts without the old ones) */
    if (users_set_limit(db, u->name, "max_memory_gb", u->max_memory_gb, err, errlen) != 0) return -1;
    return users_set_limit(db, u->name, "max_disk_gb", u->max_disk_gb, err, errlen);
}

int users_new_token(sqlite3 *db, const char *name, char token[65], char *err, size_t errlen) {
    char hash[SHA256_HEX_LEN + 1];
    if (make_token(token, hash, err, errlen) != 0) return -1;
    const char *texts[] = {name, hash};
    int n = exec_bound(db, "UPDATE users SET token_sha256 = ?2 WHERE name = ?1 AND removed_at IS NULL", texts, 2,
                       NULL, 0, err, errlen);
    if (n == 0) snprintf(err, errlen, "there is no user %s (ddpd user list shows them)", name);
    return n == 1 ? 0 : -1;
}

const char *users_unix_user_problem(const char *account) {
    static _Thread_local char why[96];
    return name_problem(account, "an account's", USER_UNIX_MAX, why, sizeof why);
}

int users_set_unix_user(sqlite3 *db, const char *name, const char *account, char *err, size_t errlen) {
    const char *bad = account && *account ? users_unix_user_problem(account) : NULL;
    if (bad) {
        snprintf(err, errlen, "--unix-user \"%.80s\": %s", account, bad);
        return -1;
    }
    const char *texts[] = {name, account && *account ? account : NULL};
    int n = exec_bound(db, "UPDATE users SET unix_user = ?2 WHERE name = ?1 AND removed_at IS NULL", texts, 2, NULL, 0,
                       err, errlen);
    if (n == 0) snprintf(err, errlen, "there is no user %s (ddpd user list shows them)", name);
    return n == 1 ? 0 : -1;
}

/* `sql` sets ?2 of user ?1 (not removed). */
static int set_limit(sqlite3 *db, const char *sql, const char *name, long long value, char *err, size_t errlen) {
    const char *texts[] = {name};
    long long ints[] = {value};
    int n = exec_bound(db, sql, texts, 1, ints, 1, err, errlen);
    if (n == 0) snprintf(err, errlen, "there is no user %s (ddpd user list shows them)", name);
    return n == 1 ? 0 : -1;
}

int users_set_max_devices(sqlite3 *db, const char *name, int max_devices, char *err, size_t errlen) {
    return set_limit(db, "UPDATE users SET max_devices = ?2 WHERE name = ?1 AND removed_at IS NULL", name,
                     max_devices < 0 ? NO_INT : max_devices, err, errlen);
}

int users_set_max_priority(sqlite3 *db, const char *name, int max_priority, char *err, size_t errlen) {
    return set_limit(db, "UPDATE users SET max_priority = ?2 WHERE name = ?1 AND removed_at IS NULL", name,
                     max_priority, err, errlen);
}

int users_set_max_duration(sqlite3 *db, const char *name, long long seconds, char *err, size_t errlen) {
    return set_limit(db, "UPDATE users SET max_duration_s = ?2 WHERE name = ?1 AND removed_at IS NULL", name,
                     seconds < 0 ? NO_INT : seconds, err, errlen);
}

int users_set_limit(sqlite3 *db, const char *name, const char *which, double gb, char *err, size_t errlen) {
    const char *sql = strcmp(which, "max_memory_gb") == 0
                          ? "UPDATE users SET max_memory_gb = ?2 WHERE name = ?1 AND removed_at IS NULL"
                          : "UPDATE users SET max_disk_gb = ?2 WHERE name = ?1 AND removed_at IS NULL";
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "the database: %s", sqlite3_errmsg(db));
        return -1;
    }
    sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
    if (gb >= 0) sqlite3_bind_double(st, 2, gb);
    else sqlite3_bind_null(st, 2);
    int rc = sqlite3_step(st);
    int changed = rc == SQLITE_DONE ? sqlite3_changes(db) : -1;
    if (rc != SQLITE_DONE) snprintf(err, errlen, "the database cannot be written: %s", sqlite3_errmsg(db));
    else if (!changed) snprintf(err, errlen, "there is no user %s (ddpd user list shows them)", name);
    sqlite3_finalize(st);
    return changed == 1 ? 0 : -1;
}

int users_remove(sqlite3 *db, const char *name, char *err, size_t errlen) {
    const char *texts[] = {name};
    long long ints[] = {now_ms()};
    int n = exec_bound(db, "UPDATE users SET token_sha256 = NULL, removed_at = ?2 WHERE name = ?1 AND removed_at IS NULL",
                       texts, 1, ints, 1, err, errlen);
    if (n == 0) snprintf(err, errlen, "there is no user %s (ddpd user list shows them)", name);
    return n == 1 ? 0 : -1;
}

int users_list(sqlite3 *db, user_info **out) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, USERS_SELECT, -1, &st, NULL) != SQLITE_OK) return -1;
    int n = 0, cap = 8, rc;
    user_info *v = xmalloc((size_t)cap * sizeof *v);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (n == cap) v = xrealloc(v, (size_t)(cap *= 2) * sizeof *v);
        read_row(st, &v[n++], NULL, 0);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        free(v);
        return -1;
    }
    *out = v;
    return n;
}
