"""`kubetrain resolve`: inside a replica, print its cluster (JSON, TF_CONFIG, torch/JAX env, hostfile).

It runs inside replicas, maybe in an image without pydantic: only the resolver's standard-library code.
"""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=["json", "tf-config", "torch-env", "jax-env", "hostfile"], default="json")
    p.add_argument(
        "--source",
        choices=["env", "kubernetes"],
        default="env",
        help="env: kubetrain's env contract, no API call (default); kubernetes: list the job's pods",
    )
    p.add_argument("-n", "--namespace", help="with --source kubernetes: the pods' namespace")


def run(args: argparse.Namespace) -> int:
    from ...resolver.env import run as resolve

    return resolve(args)
