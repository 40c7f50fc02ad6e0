#!/usr/bin/env bash
# First command of the README: install kubetrain with what the examples need, then run the main job,
# a 2-replica PyTorch DDP training on local processes.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[examples]'
exec .venv/bin/kubetrain run examples/pytorch-ddp/job.yaml "$@"
