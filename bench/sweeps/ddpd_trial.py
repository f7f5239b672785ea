"""A ddpd trial of bench_optuna.py: fmnist_trial's training, reported with ddpd.log_epoch;
the first step's time written to $BENCH_OUT for the overhead; paused by the sweep's
ASHA, it saves a snapshot and goes on from it when promoted."""
import json, os, time

T0 = time.time()
import ddpd  # noqa: E402
import fmnist_trial  # noqa: E402
import torch  # noqa: E402

lr, width = float(os.environ["LR"]), int(os.environ["WIDTH"])
epochs = int(os.environ["EPOCHS"])
data = fmnist_trial.load(int(os.environ["N_TRAIN"]), int(os.environ["N_TEST"]))


def report(e, acc):
    with open(os.path.join(os.environ["BENCH_OUT"], f"epochs-{os.environ['DDPD_RUN_ID']}.txt"), "a") as f:
        f.write(f"{time.time()} {acc!r}\n")  # every epoch trained, retrained ones too: when, and its accuracy
    ddpd.log_epoch(e, val_acc=acc)
    ddpd.flush()
    return False  # the sweep's ASHA stops it


def on_first(t):
    with open(os.path.join(os.environ["BENCH_OUT"], f"ddpd-{os.environ['DDPD_RUN_ID']}.json"), "w") as f:
        json.dump({"t0": T0, "first_step": t}, f)


class Snapshot:
    """A paused trial's state (reporter/README.md, "Pausing a sweep trial"): the run
    keeps its id when the sweep starts it again."""
    path = os.path.join(os.environ["BENCH_OUT"], f"snapshot-{os.environ['DDPD_RUN_ID']}.pt")

    def load(self):
        return torch.load(self.path) if os.path.exists(self.path) else None

    def pause_now(self):
        return ddpd.should_pause()

    def save(self, state):
        torch.save(state, self.path + ".tmp")
        os.replace(self.path + ".tmp", self.path)
        ddpd.checkpoint_saved(state["step"], self.path)  # durable: ddpd stops the trial now
        while True:
            time.sleep(1)


fmnist_trial.train(data, lr, width, epochs, report, on_first, Snapshot())
