/* A number read from a flat-keyed file, one "key value" a line (a cgroup's
 * memory.events: "oom_kill 3"): the server's and ddp-run's reads of a run's OOM kills. */
#ifndef DDPD_BASE_KEYED_FILE_H
#define DDPD_BASE_KEYED_FILE_H

/* The number after `key ` in the file at `path`; -1 when the file or the key is absent. */
long keyed_file_value(const char *path, const char *key);

#endif
