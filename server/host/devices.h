/* The GPUs this host has, found without linking CUDA: libcuda is opened in a child
 * process (so the server itself never holds a CUDA context, and a broken driver
 * cannot take it down), which reports the device count. When the server itself was
 * started with CUDA_VISIBLE_DEVICES, those are the GPUs it manages. */
#ifndef DDPD_SERVER_HOST_DEVICES_H
#define DDPD_SERVER_HOST_DEVICES_H

/* Fills *ids with malloc'd GPU ids as CUDA_VISIBLE_DEVICES names them ("0", "1", or
 * UUIDs). Returns how many (0 on a host without GPUs). Call before any thread starts. */
int devices_detect_gpus(char ***ids);

/* Splits "0,1,3" into ids; "" and "none" give none. Returns how many. */
int devices_parse_list(const char *list, char ***ids);
/* Frees what either of the two returned. */
void devices_free_list(char **ids, int n);

#endif
