#!/usr/bin/env bash
# Second command of the README: install what the tests need (OpenMPI from Debian, Python packages into
# .venv), then run ruff, the import layers (lint-imports), mypy and pytest. Extra arguments go to pytest
# (e.g. -k mpi, -x).
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages: OpenMPI for the MPI tests, OpenSSH's server and Debian's mpi4py for MPI over ssh as the
# rendered pods run it (tests/kubernetes/test_mpi_ssh.py), chromium and its driver for the web view's browser tests,
# openssl for the emulator's HTTPS.
missing=()
command -v mpirun >/dev/null 2>&1 || missing+=(openmpi-bin)
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
/usr/bin/python3 -c 'import mpi4py' >/dev/null 2>&1 || missing+=(python3-mpi4py)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
# The openssl command makes the API emulator's CA and certificates (tests/kubernetes/test_light_client.py).
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

echo "== installing Python packages into .venv"
python3 -m venv .venv
# kube-emulator (testing/kube-emulator): the Kubernetes API emulator the tests and benchmarks import.
.venv/bin/pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[examples,test]' \
  -e testing/kube-emulator
# TorchX for the from_torchx tests, without its urllib3 < 1.27 pin (see the test extra in pyproject.toml).
.venv/bin/pip install --quiet --disable-pip-version-check --no-deps torchx==0.7.0

# axe-core, the accessibility engine the web view's browser tests load into its pages (tests/ui/test_layout.py),
# from the npm registry at a pinned version, into .cache/ (never part of the package).
AXE_VERSION=4.14.1
if ! grep -qs "\"version\": \"$AXE_VERSION\"" .cache/axe/node_modules/axe-core/package.json; then
  echo "== installing axe-core $AXE_VERSION (npm) into .cache/axe"
  command -v npm >/dev/null 2>&1 || { echo "error: the web view's tests need npm (Node.js) for axe-core" >&2; exit 1; }
  npm install --silent --no-save --no-package-lock --no-audit --no-fund --prefix .cache/axe "axe-core@$AXE_VERSION"
fi

echo "== ruff"
.venv/bin/ruff check kubetrain tests benchmarks testing
echo "== import layers (import-linter)"
.venv/bin/lint-imports
echo "== mypy"
.venv/bin/mypy
echo "== pytest"
exec .venv/bin/pytest -n 2 -q "$@"
