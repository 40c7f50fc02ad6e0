#!/usr/bin/env bash
# Second command of the README: install what the tests need (OpenMPI from Debian, Python packages into
# .venv), then run ruff, the import layers (lint-imports), mypy and pytest. Extra arguments go to pytest
# (e.g. -k mpi, -x).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v mpirun >/dev/null 2>&1; then
  echo "== installing OpenMPI (Debian package openmpi-bin) for the MPI tests"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends openmpi-bin >/dev/null
fi

echo "== installing Python packages into .venv"
python3 -m venv .venv
# kube-emulator (testing/kube-emulator): the Kubernetes API emulator the tests and benchmarks import.
.venv/bin/pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[examples,test]' \
  -e testing/kube-emulator

echo "== ruff"
.venv/bin/ruff check kubetrain tests benchmarks testing
echo "== import layers (import-linter)"
.venv/bin/lint-imports
echo "== mypy"
.venv/bin/mypy
echo "== pytest"
exec .venv/bin/pytest -n 2 -q "$@"
