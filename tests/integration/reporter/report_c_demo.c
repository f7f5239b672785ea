/* A C training loop's stand-in that reports through reporter/c/ddpd_report.h, for
 * test_reporter.py's c_header case: STEPS steps (loss 1/step, lr, a NaN), one
 * epoch, a status, then exit. Usage: report_c_demo STEPS */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ddpd_report.h"

int main(int argc, char **argv) {
    long steps = argc > 1 ? strtol(argv[1], NULL, 10) : 100;
    for (long i = 1; i <= steps; i++) {
        ddpd_metric m[] = {{"loss", 1.0 / (double)i}, {"lr", 1e-3}, {"grad \"norm\"", NAN}};
        ddpd_report_step(i, m, 3);
    }
    ddpd_metric e[] = {{"lr", 1e-3}, {"train_loss", 0.5}, {"test_loss", 0.4}, {"test_acc", 0.875}, {"top5", 0.99}};
    ddpd_report_epoch(0, e, 5);
    ddpd_report_status("done", "finished");
    ddpd_report_flush();
    printf("%d %lu\n", ddpd_report_enabled(), ddpd_report_dropped());
    return 0;
}
