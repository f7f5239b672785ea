"""Processes of this machine, as tests look for what a run left behind."""
import os


def live_with_env(name, value):
    """Live (not zombie) processes whose environment has NAME=VALUE (one pid namespace:
    every network namespace's processes are seen)."""
    want = f"{name}={value}".encode()
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if want not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
        except OSError:
            continue
        found.append(int(pid))
    return found
