/* One server per state directory: the lock (DIR/ddpd.lock, flock) and the pid of the
 * server that holds it, written in it. */
#ifndef DDPD_SERVER_STORE_STATE_LOCK_H
#define DDPD_SERVER_STORE_STATE_LOCK_H

/* Takes the lock at `lock_path` and writes this process's pid in it; returns its
 * descriptor (close-on-exec), held for the life of the server. Dies, naming `state_dir`
 * and what to do, when another ddpd serves it. A lock held though the ddpd that wrote
 * its pid is gone is one it was starting a run with (a child between fork and exec
 * keeps it): waited for, up to `wait_ms`, then refused naming that. */
int state_lock_take(const char *lock_path, const char *state_dir, int wait_ms);

#endif
