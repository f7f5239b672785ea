/* The users of a shared server (Slurm's accounts, in one table): each a name, a token
 * of which only the SHA-256 is kept, whether it is an admin, a quota (the devices its
 * runs may hold at once), the highest priority it may give a run, the largest memory
 * limit its runs may ask for and its quota of disk (what its runs' directories may
 * hold together).
 *
 * `ddpd user` (cmd/user_cmd.c) changes them in the database with the functions at
 * the bottom, whether a server runs or not; a running server sees a change at its next
 * request that changes something (users_identify), at a read whose token it does not
 * know yet, or at its next tick (at most 100 ms): its copy of the table is read again
 * whenever the database changed (PRAGMA data_version), so a replaced token stops
 * changing anything at once, and reading within a tick.
 *
 * Who a request is (users_identify): the server's own token (--token-file) is an
 * admin of no name; a user's token is that user; no token at all is anybody, an admin,
 * only while the server has no token and has never had a user (today's single-user
 * box); otherwise a request that changes something needs one of the two, and so does
 * a read once there are users (unless ddpd serve --open-reads). */
#ifndef DDPD_SERVER_SCHED_INCLUDE_USERS_H
#define DDPD_SERVER_SCHED_INCLUDE_USERS_H

#include <jansson.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>

#include "auth.h"

#define USER_NAME_MAX 64
#define USER_UNIX_MAX 32

typedef struct {
    char name[USER_NAME_MAX + 1];
    bool admin;
    int max_devices;  /* -1: no quota */
    int max_priority; /* the highest priority its runs may have (an admin's: any) */
    bool removed;
    long long created_at, removed_at; /* unix ms; removed_at 0 while not removed */
    char unix_user[USER_UNIX_MAX + 1]; /* the host's account its runs run as; "": none of its own */
    double max_memory_gb; /* GiB: the largest memory limit a run of its may have; < 0: none */
    double max_disk_gb;   /* GiB: what its runs' directories may hold together; < 0: none */
    long long max_duration_s; /* the longest a run of its runs in one start (its max_duration_s at most); < 0: none */
} user_info;

/* GiB as bytes (a limit of `gb` GiB; < 0: none, -1). */
long long users_gb_bytes(double gb);

/* ---- the server's copy ---- */

/* Opens the server's own connection to the database (migrated already) and reads the
 * users; `server_token` (NULL: none) is the admin's. 0, or -1 and why. */
int users_open(const char *db_path, const char *server_token, char *err, size_t errlen);
void users_close(void);
/* Reads the table again when the database changed since: true when the users did. */
bool users_refresh(void);

/* Whether the table has a row (a removed user counts): requests then need a token. */
bool users_exist(void);
/* The same as the table was last read (at most a tick ago), with no query: what
 * every read asks. */
bool users_known(void);
/* Who a request with this Authorization header's value is (auth.h's verdicts), the
 * table read again first if the database changed: for requests that change something. */
auth_verdict users_identify(const char *authorization, caller *who);
/* The same by the table as last read (a token not in it reads the table again, so a
 * user added a moment ago is known): for reads, that cost no query. */
auth_verdict users_identify_read(const char *authorization, caller *who);
/* A 401's words for a verdict other than AUTH_OK. */
const char *users_refusal(auth_verdict v);

/* Who a run of `owner` acts as where no request carries it (a sweep's trial, a
 * resume's check): the user's limits as the table has them now, so that a limit
 * lowered with `ddpd user set` counts from the next trial or resume on. NULL: a run of
 * no owner, the server's own token (an admin of no name). False (and *out a caller
 * with no rights) when `owner` is not a user now: removed, or never one. */
bool users_caller(const char *owner, caller *out);
/* The user named so (removed ones too): false when there is none. */
bool users_find(const char *name, user_info *out);
/* Whether a user (not removed) is mapped to a Unix account. */
bool users_any_unix_user(void);
/* Its quota: the devices its runs may hold at once; -1 when none (or no such user). */
int users_max_devices(const char *name);
/* The longest a run of its may run in one start, in seconds; -1 when there is no limit
 * (or no such user). */
long long users_max_duration(const char *name);
/* GET /users: every user (no token, no hash), removed ones marked. */
json_t *users_json(void);

/* ---- `ddpd user`, on a connection of its own ---- */

/* A name a user may have: 1 to 64 of letters, digits, '.', '_' and '-', not
 * starting with '-'. NULL, or why not. */
const char *users_name_problem(const char *name);
/* Adds the user (or gives a removed one back its name) with a new token into
 * token[65]. 0, or -1 and why (it exists, the database cannot be written). */
int users_add(sqlite3 *db, const user_info *u, char token[65], char *err, size_t errlen);
/* A new token for the user (the old one stops working). 0, or -1 and why. */
int users_new_token(sqlite3 *db, const char *name, char token[65], char *err, size_t errlen);
/* A name a Unix account may have (letters, digits, '.', '_', '-'; 1 to 32, not
 * starting with '-'): NULL, or why not. Whether the host has it is asked at use. */
const char *users_unix_user_problem(const char *account);
/* Maps the user to a Unix account of this host ("" or NULL: none of its own). 0, or
 * -1 and why. */
int users_set_unix_user(sqlite3 *db, const char *name, const char *account, char *err, size_t errlen);
/* Changes the user's quota (-1: none) or the highest priority its runs may have. A
 * running server counts the new limit from the next submission, sweep trial or resume
 * on (runs already queued or running keep theirs). 0, or -1 and why. */
int users_set_max_devices(sqlite3 *db, const char *name, int max_devices, char *err, size_t errlen);
int users_set_max_priority(sqlite3 *db, const char *name, int max_priority, char *err, size_t errlen);
/* The longest a run of the user's may run in one start (seconds; < 0: no limit): its
 * running runs are held to it from the server's next tick. 0, or -1 and why. */
int users_set_max_duration(sqlite3 *db, const char *name, long long seconds, char *err, size_t errlen);
/* Sets the user's largest memory limit for a run (`which` "max_memory_gb") or its disk
 * quota ("max_disk_gb"), in GiB; < 0: none. 0, or -1 and why. */
int users_set_limit(sqlite3 *db, const char *name, const char *which, double gb, char *err, size_t errlen);
/* Removes the user: its token goes, its runs stay its own. 0, or -1 and why. */
int users_remove(sqlite3 *db, const char *name, char *err, size_t errlen);
/* Every user in name order (*out malloc'd): how many, or -1. */
int users_list(sqlite3 *db, user_info **out);

#endif
