/* The progress bar: see progress.h. */
#include "progress.h"

#include <stdio.h>
#include <time.h>

#include "log.h"
#include "monotonic.h"

#define BAR_WIDTH 24

double now_seconds(void) { return mono_s(); }

void progress_init(progress_bar *p, int epochs, long steps_per_epoch) {
    p->enabled = log_stderr_is_tty();
    p->epochs = epochs;
    p->steps_per_epoch = steps_per_epoch;
    p->last_draw = 0;
    p->epoch_start = now_seconds();
}

void progress_epoch_start(progress_bar *p) { p->epoch_start = now_seconds(); }

static void format_eta(char *out, size_t n, double seconds) {
    if (seconds < 0 || seconds > 360000) {
        snprintf(out, n, "--:--");
        return;
    }
    long s = (long)(seconds + 0.5);
    if (s >= 3600) snprintf(out, n, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
    else snprintf(out, n, "%02ld:%02ld", s / 60, s % 60);
}

void progress_update(progress_bar *p, int epoch, long step, double loss, double lr, double samples_per_s) {
    if (!p->enabled) return;
    double now = now_seconds();
    long done = step + 1;
    if (now - p->last_draw < 0.1 && done < p->steps_per_epoch) return;
    p->last_draw = now;
    int filled = (int)(BAR_WIDTH * done / (p->steps_per_epoch ? p->steps_per_epoch : 1));
    char bar[BAR_WIDTH * 3 + 1];
    int k = 0;
    for (int i = 0; i < BAR_WIDTH; i++) {
        const char *cell = i < filled ? "\xe2\x96\x88" : " "; /* U+2588 full block */
        for (const char *c = cell; *c; c++) bar[k++] = *c;
    }
    bar[k] = '\0';
    double elapsed = now - p->epoch_start;
    double per_step = elapsed / (double)done;
    long remaining = p->steps_per_epoch - done + (long)(p->epochs - epoch - 1) * p->steps_per_epoch;
    char eta[32];
    format_eta(eta, sizeof eta, per_step * (double)remaining);
    /* epochs numbered from 0, as everywhere; the count after it */
    fprintf(stderr, "\r\033[Kepoch %d (%d of %d) |%s| %ld/%ld loss %.4f lr %.2e %.0f samples/s ETA %s", epoch,
            epoch + 1, p->epochs, bar, done, p->steps_per_epoch, loss, lr, samples_per_s, eta);
    fflush(stderr);
    log_set_bar_active(1);
}

void progress_epoch_end(progress_bar *p, int epoch, double train_loss, double test_loss, double test_acc,
                        double seconds) {
    if (!p->enabled) return;
    fprintf(stderr, "\r\033[Kepoch %d (%d of %d) done in %.1fs: train loss %.4f, test loss %.4f, test accuracy %.4f\n",
            epoch, epoch + 1, p->epochs, seconds, train_loss, test_loss, test_acc);
    fflush(stderr);
    log_set_bar_active(0);
}
