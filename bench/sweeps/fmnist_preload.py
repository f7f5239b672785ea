"""Loads the bench's data set at import (N_TRAIN, N_TEST from the environment), for
ddpd's warm start: named in warm_start.imports, it is imported once by the sweep's
zygote, and each trial forked from there finds fmnist_trial.load's answer ready, as
an Optuna worker loads its data once for all its trials (docs/sweeps.md)."""
import os

import fmnist_trial

fmnist_trial.load(int(os.environ["N_TRAIN"]), int(os.environ["N_TEST"]))
