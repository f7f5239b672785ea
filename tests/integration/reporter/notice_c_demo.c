/* A C command run that answers a preemption's notice through reporter/c/ddpd_report.h,
 * for test_command_preemption.py's notice_c_header case: a step every 0.1 s (loss =
 * the step); at the first step after ddpd_report_preempt_requested() turns 1, its
 * step is written to CKPT (a file, then a rename), ddpd_report_checkpoint says so,
 * and it waits to be stopped. A restart (TORCHELASTIC_RESTART_COUNT > 0) goes on from
 * the step after CKPT's for 5 steps and ends. Usage: notice_c_demo CKPT */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ddpd_report.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: notice_c_demo CKPT\n");
        return 2;
    }
    const char *ckpt = argv[1], *count = getenv("TORCHELASTIC_RESTART_COUNT");
    int k = count ? atoi(count) : 0;
    long start = 1;
    FILE *f = k > 0 ? fopen(ckpt, "r") : NULL;
    if (f) {
        if (fscanf(f, "%ld", &start) == 1) start++;
        fclose(f);
    }
    printf("attempt %d from step %ld\n", k, start);
    fflush(stdout);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", ckpt);
    for (long step = start; step < start + (k == 0 ? 100000 : 5); step++) {
        ddpd_metric m[] = {{"loss", (double)step}};
        ddpd_report_step(step, m, 1);
        if (ddpd_report_preempt_requested()) {
            printf("notice heard after step %ld\n", step);
            f = fopen(tmp, "w");
            if (!f || fprintf(f, "%ld", step) < 0 || fclose(f) != 0 || rename(tmp, ckpt) != 0) {
                perror("notice_c_demo: the checkpoint");
                return 1;
            }
            printf("checkpoint saved at step %ld\n", step);
            fflush(stdout);
            ddpd_report_checkpoint(step, ckpt);
            for (;;) pause(); /* ddpd stops it now that it has the checkpoint */
        }
        ddpd_report_flush();
        usleep(100000);
    }
    ddpd_report_close();
    return 0;
}
