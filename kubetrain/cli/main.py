"""`kubetrain` entry point. Builds the parser only; each verb's module is imported when it runs, so
`kubetrain --help` does not pay for pydantic, the Kubernetes client or any framework."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

EPILOG = """\
examples:
  kubetrain run examples/pytorch-ddp/job.yaml          run a job here, output attached
  kubetrain run --framework pytorch --replicas 2 -- python train.py --steps 20
  kubetrain list                                      jobs of this machine
  kubetrain logs demo-x7k2q -f --role worker          follow one role's output
  kubetrain validate job.yaml                         check a spec, with file:line errors
  kubetrain explain spec.resources                    what a field means
  kubetrain render job.yaml --flavor jobset           Kubernetes manifests (dry run)
"""


def _add_output(p: argparse.ArgumentParser, choices: Sequence[str], default: str | None = None) -> None:
    p.add_argument("-o", "--output", choices=choices, default=default, help=f"output format: {'|'.join(choices)}")


def _add_backend(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--backend",
        default="local",
        choices=["local", "kubernetes", "k8s"],
        help="where the job runs: local processes (default) or a Kubernetes cluster",
    )
    p.add_argument("-n", "--namespace", help="Kubernetes namespace (default: the kubeconfig context's)")
    p.add_argument("--context", help="kubeconfig context (Kubernetes)")
    p.add_argument("--kubeconfig", help="kubeconfig file (Kubernetes; default: $KUBECONFIG, ~/.kube/config)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubetrain",
        description="Define, launch, watch and manage distributed training jobs: local processes or Kubernetes.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def verb(name: str, handler: str, help_text: str, **kw: object) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text, **kw)  # type: ignore[arg-type]
        p.set_defaults(handler=handler)
        return p

    # -- running ------------------------------------------------------------------------------------
    p = verb(
        "run",
        "run_cmd:run",
        "Run a job (from a file, or from a command after --); attached by default.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="""\
examples:
  kubetrain run job.yaml
  kubetrain run job.yaml --set spec.replicas=4 --set spec.runPolicy.backoffLimit=2
  kubetrain run --framework pytorch --replicas 2 --procs-per-replica 2 -- python train.py --steps 20
  kubetrain run job.yaml --detach && kubetrain logs -f <ID>

Output of every replica is merged with a [role-index] prefix. Ctrl-C cancels the job (a second
Ctrl-C skips the grace period). Exit status: 0 succeeded, 1 failed, 2 bad input, 130 cancelled.""",
    )
    p.add_argument("file", nargs="?", help="TrainJob YAML file")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="PATH=VALUE",
        help="override a field, e.g. spec.replicas=4 (repeatable)",
    )
    p.add_argument("-d", "--detach", action="store_true", help="return the job id at once; the job runs on")
    p.add_argument(
        "--dry-run",
        nargs="?",
        const="client",
        choices=["client", "server"],
        help="client (default): print the launch plan (argv, env per replica); server: send everything "
        "to the Kubernetes API server with dryRun=All and print its verdict; nothing runs",
    )
    p.add_argument(
        "--flavor",
        choices=["job", "jobset", "volcano", "kubeflow"],
        help="Kubernetes engine (default: jobset if the cluster serves it, else job)",
    )
    p.add_argument("--framework", help="quick form: pytorch|tensorflow|deepspeed|mpi|jax|generic")
    p.add_argument("--replicas", type=int, help="quick form: number of replicas")
    p.add_argument("--procs-per-replica", help="quick form: processes per replica (a number or auto)")
    p.add_argument("--name", help="quick form: job name (default: from the program)")
    p.add_argument(
        "--preload",
        metavar="MODULES",
        help="local: modules that Python replicas import once, in a process that then forks each replica "
        "(default: torch for pytorch jobs, none otherwise; 'none' turns it off); see README, Local backend",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no kubetrain messages, only the replicas' output")
    _add_output(p, ["yaml", "json"], None)
    _add_backend(p)

    # -- job management -------------------------------------------------------------------------------
    p = verb("list", "job_cmds:list_jobs", "List jobs (newest first).")
    _add_output(p, ["wide", "json", "yaml", "name"])
    p.add_argument("-A", "--all-namespaces", action="store_true", help="Kubernetes: jobs of every namespace")
    p.add_argument("--limit", type=int, help="at most this many jobs")
    _add_backend(p)
    for name, handler, text in (
        ("status", "job_cmds:status", "Show a job's phase and replicas (a one-glance failure reason)."),
        ("describe", "job_cmds:describe", "Show everything about a job: replicas, counts, conditions, failure."),
    ):
        p = verb(name, handler, text)
        p.add_argument("job", metavar="ID", help="job id or an unambiguous prefix")
        _add_output(p, ["json", "yaml"])
        _add_backend(p)
    p = verb("logs", "job_cmds:logs", "Print a job's output, merged across replicas with their prefixes.")
    p.add_argument("job", metavar="ID")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing until the job ends")
    p.add_argument("--role", help="only this role")
    p.add_argument("--index", type=int, help="only this replica index (with --role)")
    p.add_argument("--tail", type=int, metavar="N", help="last N lines of each replica")
    p.add_argument("--since", metavar="DURATION", help="only newer lines, e.g. 30s, 5m, 2h")
    p.add_argument("--grep", metavar="REGEX", help="only lines matching REGEX")
    p.add_argument("--timestamps", action="store_true", help="prefix each line with its time")
    p.add_argument("--no-prefix", action="store_true", help="omit the [role-index] prefix")
    p.add_argument("--previous", action="store_true", help="Kubernetes: the container before its last restart")
    _add_backend(p)
    for name, handler, text in (
        ("cancel", "job_cmds:cancel", "Cancel jobs: stop their replicas (SIGTERM, grace period, SIGKILL)."),
        ("delete", "job_cmds:delete", "Delete jobs and their logs (cancels them first if running)."),
        ("suspend", "job_cmds:suspend", "Suspend jobs: stop their replicas, keep the job to resume later."),
        ("resume", "job_cmds:resume", "Resume suspended or paused jobs (runMode Pause)."),
    ):
        p = verb(name, handler, text)
        p.add_argument("jobs", metavar="ID", nargs="+")
        _add_backend(p)
    p = verb(
        "attach",
        "job_cmds:attach",
        "Open a shell in a replica's environment (runMode Debug: run the held program by hand).",
    )
    p.add_argument("job", metavar="ID")
    p.add_argument("replica", nargs="?", help="replica key such as worker-0 (default: the first)")
    p.add_argument("--print", action="store_true", help="print the environment and command instead of a shell")

    # -- specs ----------------------------------------------------------------------------------------
    p = verb("validate", "spec_cmds:validate", "Check TrainJob files; every problem with its field path and line.")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="PATH=VALUE")
    p.add_argument("-q", "--quiet", action="store_true", help="no output on success")
    p = verb("explain", "spec_cmds:explain", "Describe a field of the TrainJob spec (like kubectl explain).")
    p.add_argument("field", nargs="?", default="", metavar="FIELD.PATH", help="e.g. spec.resources.gpu")
    p = verb("schema", "spec_cmds:schema", "Print the TrainJob JSON Schema (for editor completion and checks).")
    p = verb("version", "spec_cmds:version", "Print the kubetrain version.")
    p = verb("render", "render_cmd:render", "Render a job as Kubernetes manifests (no cluster needed).")
    p.add_argument("file", metavar="FILE")
    p.add_argument(
        "--flavor",
        default="job",
        choices=["job", "jobset", "volcano", "kubeflow"],
        help="Kubernetes engine to target (default: job = Indexed Jobs + headless Service)",
    )
    p.add_argument("-n", "--namespace", help="namespace of the objects")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="PATH=VALUE")
    _add_output(p, ["yaml", "json"], "yaml")
    p = verb(
        "resolve",
        "resolve_cmd:resolve",
        "Print this replica's cluster: JSON, TF_CONFIG, torch/JAX env, hostfile (for shell scripts inside replicas).",
    )
    p.add_argument("--format", choices=["json", "tf-config", "torch-env", "jax-env", "hostfile"], default="json")
    p.add_argument(
        "--source",
        choices=["env", "kubernetes"],
        default="env",
        help="env: kubetrain's env contract, no API call (default); kubernetes: list the job's pods",
    )
    p.add_argument("-n", "--namespace", help="with --source kubernetes: the pods' namespace")
    p = verb(
        "rbac",
        "resolve_cmd:rbac",
        "Print the ServiceAccount, Role and RoleBinding the in-cluster resolver needs (get/list pods).",
    )
    p.add_argument("file", metavar="FILE")
    p.add_argument("-n", "--namespace", help="namespace of the objects (default: the job's, else default)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="PATH=VALUE")
    _add_output(p, ["yaml", "json"], "yaml")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    # Everything after `--` is the program of `kubetrain run`'s quick form, taken verbatim.
    command: list[str] = []
    if "--" in args_list:
        cut = args_list.index("--")
        args_list, command = args_list[:cut], args_list[cut + 1 :]
    # A bare --dry-run means client (kubectl's default), so the job file after it stays the file.
    args_list = ["--dry-run=client" if a == "--dry-run" else a for a in args_list]
    parser = build_parser()
    args = parser.parse_args(args_list)
    if command and getattr(args, "handler", None) != "run_cmd:run":
        parser.error("a program after -- is only taken by `kubetrain run`")
    args.command = command
    if args.version:
        args.handler = "spec_cmds:version"
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    if args.handler == "resolve_cmd:resolve":
        # Runs inside replicas, maybe in an image without pydantic: only the resolver's stdlib code.
        from ..resolver.env import run as resolve

        return resolve(args)
    module_name, func_name = args.handler.split(":")
    module = importlib.import_module(f"kubetrain.cli.{module_name}")
    from .errors import run_handler

    return run_handler(getattr(module, func_name), args)


if __name__ == "__main__":
    sys.exit(main())
