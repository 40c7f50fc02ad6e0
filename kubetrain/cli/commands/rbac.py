"""`kubetrain rbac`: the ServiceAccount, Role and RoleBinding the in-cluster resolver needs (get/list pods)."""

from __future__ import annotations

import argparse
import sys

from ...contract.choices import DEFAULT_FLAVOR
from ..options import add_output, add_overrides


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE")
    p.add_argument("-n", "--namespace", help="namespace of the objects (default: the job's, else default)")
    add_overrides(p)
    add_output(p, ["yaml", "json"], "yaml")


def run(args: argparse.Namespace) -> int:
    from ...backends.kubernetes.render import dump, render_manifests
    from ...jobspec import load_file

    job = load_file(args.file, overrides=args.overrides)
    rendered = render_manifests(job, DEFAULT_FLAVOR, args.namespace, api_access=True)
    kinds = {"ServiceAccount", "Role", "RoleBinding"}
    sys.stdout.write(dump([o for o in rendered.objects if o["kind"] in kinds], args.output))
    return 0
