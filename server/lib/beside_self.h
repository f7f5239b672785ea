/* Where the programs that ship with ddpd are by default: beside the running ddpd
 * (ddp-trainer, ddp-run), as `serve` and `agent` both start them. */
#ifndef DDPD_SERVER_LIB_BESIDE_SELF_H
#define DDPD_SERVER_LIB_BESIDE_SELF_H

/* `program` in the directory of this process's executable (malloc'd); `program`
 * itself (left to PATH) when that cannot be read. */
char *beside_self(const char *program);

#endif
