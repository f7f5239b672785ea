/* A tqdm-like progress bar on stderr for a person watching a run from a terminal:
 * epoch, step/total, loss, lr, samples/s and ETA, redrawn at most ten times a
 * second. Silent when stderr is not a terminal. */
#ifndef DDPD_TRAINER_PROGRESS_H
#define DDPD_TRAINER_PROGRESS_H

typedef struct {
    int enabled;
    int epochs;
    long steps_per_epoch;
    double last_draw;
    double epoch_start;
} progress_bar;

void progress_init(progress_bar *p, int epochs, long steps_per_epoch);
void progress_epoch_start(progress_bar *p);
void progress_update(progress_bar *p, int epoch, long step, double loss, double lr, double samples_per_s);
/* Ends the epoch's bar with a summary line. */
void progress_epoch_end(progress_bar *p, int epoch, double train_loss, double test_loss, double test_acc,
                        double seconds);

/* Monotonic seconds. */
double now_seconds(void);

#endif
