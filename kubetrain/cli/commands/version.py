"""`kubetrain version` (and `kubetrain --version`)."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    from importlib.metadata import version as pkg_version

    print(f"kubetrain {pkg_version('kubetrain')}")
    return 0
