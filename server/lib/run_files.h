/* One way into a run's directory. A run's directory belongs to its run's Unix
 * account, which may put anything there while the server, root or holding
 * CAP_DAC_OVERRIDE, works in it: a link to the database or to another member's
 * files, a FIFO that blocks whoever opens it, a hard link to a root file, a
 * subdirectory swapped for a link in the middle of a walk, a sparse file of
 * gigabytes. Everything the server reads, writes, hands over or deletes in such a
 * directory goes through here, and nowhere else (tests/layout/test_run_paths.py):
 *
 *  - the directory is opened once, O_DIRECTORY | O_NOFOLLOW (its parents are the
 *    server's own: the state directory is realpath'd, runs/ is the server's);
 *  - every file beneath it is reached relative to that descriptor without following
 *    a link anywhere on the way (openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS
 *    where the kernel has it, else openat with O_NOFOLLOW at each step), opened
 *    O_NONBLOCK (a FIFO never blocks the opener), and taken only when fstat says it
 *    is what was asked for (a regular file, or a directory) of an expected owner (the
 *    directory's own, or the server with one link: never a hard link to someone
 *    else's file) and at most the caller's size;
 *  - a file is written under a fresh name (O_CREAT | O_EXCL), made the directory
 *    owner's with fchown on its descriptor, and renamed over its name (renameat: a
 *    link left in its place is replaced, never followed);
 *  - ownership is handed over with fchown on descriptors this module opened, never
 *    by name;
 *  - deletion walks by descriptors (unlinkat on each directory's own descriptor), so
 *    a subdirectory renamed away and replaced by a link mid-walk leads nowhere.
 *
 * Why descriptors and not a child that switches to the run's account: the checks
 * (type, owner, size) are needed either way (a FIFO blocks that child as well, and
 * the server waits on it), the calls come from every thread of a threaded server
 * (fork then only async-signal-safe calls), and a run that runs as the server's own
 * user has no account to switch to. Nothing here blocks on what a run put there: a
 * regular file of a local filesystem is read with bounded reads.
 *
 * Every refusal sets errno and says in err what was found, naming the file:
 *   ELOOP  a link on the way or in its place;
 *   ENXIO  not a regular file (a FIFO, a socket, a device) or not a directory;
 *   EXDEV  owned by another account, or a hard link of the server's (a file the run
 *          did not make and the server did not put there alone);
 *   EFBIG  larger than the caller's bound.
 * run_file_planted(errno) is true for those four: the run left something in its
 * directory that is not its own file, which an answer may say as the run's doing. */
#ifndef DDPD_SERVER_LIB_RUN_FILES_H
#define DDPD_SERVER_LIB_RUN_FILES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

typedef struct {
    int fd;      /* the directory (O_RDONLY | O_DIRECTORY); -1 when not open */
    uid_t owner; /* its owner when opened: its files are expected to be this account's */
    char *path;  /* for messages only, never opened again */
} run_dir;

/* A config, a job script, a part's description: read whole, so bounded. */
#define RUN_FILE_SMALL_MAX (4u << 20)
/* No bound on the size: a file read in bounded pieces (a log, the journal). */
#define RUN_FILE_ANY_SIZE INT64_MAX

/* Opens the directory `path` (absolute; its last component is never a link). 0, or
 * -1 with errno and err (ENOENT: there is none). */
int run_dir_open(run_dir *d, const char *path, char *err, size_t errlen);
/* Its subdirectory `rel` ("checkpoints", "ranks"), reached as files are. */
int run_dir_open_sub(const run_dir *d, const char *rel, run_dir *sub, char *err, size_t errlen);
void run_dir_close(run_dir *d);

bool run_file_planted(int err);

/* Opens `rel` (a relative path, no ".." nor "." component) for reading: a
 * descriptor (O_CLOEXEC, blocking) with *st its fstat, or -1 with errno and err. */
int run_file_open(const run_dir *d, const char *rel, int64_t max_bytes, struct stat *st, char *err, size_t errlen);
/* The same from a directory's path: opens it, then `rel` beneath it. */
int run_file_open_in(const char *dir, const char *rel, int64_t max_bytes, struct stat *st, char *err, size_t errlen);

/* The whole file (at most max_bytes), NUL-terminated, into *data (malloc'd). 0, or
 * -1 with errno and err. */
int run_file_read(const run_dir *d, const char *rel, size_t max_bytes, char **data, size_t *len, char *err,
                  size_t errlen);
/* A JSON document of at most max_bytes; NULL with errno (EINVAL: not JSON) and err. */
json_t *run_file_load_json(const run_dir *d, const char *rel, size_t max_bytes, char *err, size_t errlen);
json_t *run_file_load_json_in(const char *dir, const char *rel, size_t max_bytes, char *err, size_t errlen);

/* Writes `rel` whole, atomically: a fresh file beside it (O_CREAT | O_EXCL, `mode`),
 * the directory owner's when this process is not, flushed, then renamed over `rel`.
 * 0, or -1 with errno and err (the fresh file is removed). */
int run_file_write(const run_dir *d, const char *rel, const void *data, size_t len, mode_t mode, char *err,
                   size_t errlen);
int run_file_write_json(const run_dir *d, const char *rel, const json_t *doc, char *err, size_t errlen);
/* The same without the flush: renamed over `rel` whole (a reader never sees half of
 * it, and a crash of this process loses nothing: the kernel holds it), but a power
 * cut may leave it missing or empty. For a file whose durable copy is elsewhere (a
 * run's config.json: the database row, sched/runs.h runs_config_mend). */
int run_file_write_json_unflushed(const run_dir *d, const char *rel, const json_t *doc, char *err, size_t errlen);

/* Opens `rel` for appending, creating it (mode 0600, the directory owner's) when it
 * is missing: a run's log that a launcher is given as its output. A descriptor
 * (O_WRONLY | O_APPEND | O_CLOEXEC, blocking), or -1 with errno and err. */
int run_file_open_append(const run_dir *d, const char *rel, char *err, size_t errlen);

/* A path beneath `root`, a directory of run directories (root/ID/rel, as a resolved
 * checkpoint.load is), split into its run directory (*dir, malloc'd) and the rest
 * (*rel, within path). 0, or -1 (EINVAL) when it does not lie so. */
int run_path_split(const char *root, const char *path, char **dir, const char **rel);

/* The names in the directory (not "." nor ".."), in *names (malloc'd, each too; free
 * with run_dir_names_free); their count, or -1 with errno. Nothing is opened or
 * followed: the caller reaches each through this module. */
int run_dir_names(const run_dir *d, char ***names);
void run_dir_names_free(char **names, int n);
/* fstatat of a name in the directory, never following it. 0, or -1 with errno. */
int run_dir_stat(const run_dir *d, const char *name, struct stat *st);

/* Hands the directory to an account: the directory itself (fchown uid:gid, fchmod
 * `mode`), then each regular file and directory directly in it that is this process's
 * (with one link), by its own descriptor. What is not this process's is left as it
 * is. 0, or -1 with errno and err (the directory itself could not be handed over). */
int run_dir_hand_over(run_dir *d, uid_t uid, gid_t gid, mode_t mode, char *err, size_t errlen);

/* Makes the subdirectory `name` of d (0700, the directory owner's) where there is
 * none. 0 also when something is there already (a link or a file in its place is
 * left as it is: what is opened beneath it is refused then), or -1 with errno and err. */
int run_dir_make_sub(const run_dir *d, const char *name, char *err, size_t errlen);

/* Makes the run directory `path` (0700, this process's); one already there (left by
 * a database that was reset) is kept, renamed aside to path.stale-MS. 0, or -1 with
 * errno and err. */
int run_dir_make(const char *path, char *err, size_t errlen);

/* Removes the directory `path` and everything beneath it, by descriptors: a link is
 * removed, never followed; a subdirectory on another filesystem (a mount) or deeper
 * than RUN_DIR_MAX_DEPTH is left, and said. 0 when it is gone, or -1 with errno and
 * err (what was left and why). A missing directory is 0. */
#define RUN_DIR_MAX_DEPTH 64
int run_dir_remove(const char *path, char *err, size_t errlen);

#endif
