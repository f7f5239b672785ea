/* `ddpd check`: for a person setting up a box. It takes serve's options (and
 * DDPD_* variables), changes nothing, and says in one line each whether the config,
 * the state directory, the database, the data roots, the GPUs and the trainer are
 * ready, and what to do when one is not:
 *
 *   ok    config      listen 127.0.0.1:8080 (loopback: no token needed); 2 CPU slots; log to stderr at info
 *   ok    state dir   /var/lib/ddpd (writable; no ddpd is serving it)
 *   ok    database    /var/lib/ddpd/ddpd.db: schema version 1 of 1, 12 runs, quick_check ok
 *   ok    data roots  /usr/share/datasets (fashion-mnist: the 4 Fashion-MNIST files)
 *   warn  GPUs        none found (no NVIDIA driver: libcuda.so.1 is not there): CPU runs only
 *   ok    trainer     /opt/ddpd/bin/ddp-trainer: ddp-trainer 0.1.0 (cuda: yes)
 *   ok    commands    off (no --allow-commands): command runs are refused
 *
 * With --allow-commands, "commands" says so and two lines follow: "work roots" (each
 * --work-root readable, or none: a working_dir is refused) and "runner" (ddp-run
 * answers --version).
 *
 * Exit status 0 when nothing failed (warnings are fine), 1 otherwise. */
#ifndef DDPD_SERVER_CMD_CHECK_CMD_H
#define DDPD_SERVER_CMD_CHECK_CMD_H

#include <stddef.h>

#include "settings.h"

/* The settings as serve would read them (settings.h): a setting serve would refuse
 * (s->problem) fails the config part. */
int ddpd_check(const settings *s);

/* "ddpd 0.1.0 (cuda: yes; libmicrohttpd 0.9.75, SQLite 3.40.1, Jansson 2.14)" */
void ddpd_version_line(char *out, size_t outlen);

#endif
