#!/bin/sh
# The bench's own setup (not the tests'): Debian's Optuna (3.1.0 on bookworm) for the
# system python3, which has torch.
set -e
/usr/bin/python3 -c 'import optuna' 2>/dev/null || apt-get install -y python3-optuna
