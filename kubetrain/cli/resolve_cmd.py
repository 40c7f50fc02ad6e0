"""`kubetrain rbac` (`kubetrain resolve` is dispatched straight to kubetrain.resolver.env, see main)."""

from __future__ import annotations

import argparse
import sys


def rbac(args: argparse.Namespace) -> int:
    from ..backends.kubernetes.render import dump, render_manifests
    from ..jobspec import load_file

    job = load_file(args.file, overrides=args.overrides)
    rendered = render_manifests(job, "job", args.namespace, api_access=True)
    kinds = {"ServiceAccount", "Role", "RoleBinding"}
    sys.stdout.write(dump([o for o in rendered.objects if o["kind"] in kinds], args.output))
    return 0
