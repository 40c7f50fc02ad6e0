"""The CLI's verbs: name → module and one-line summary, and nothing imported until a verb runs.

`kubetrain --help` lists the summaries from here alone; `kubetrain VERB ...` imports only
`kubetrain.cli.commands.<module>`, which declares its own arguments beside its handler (pip's lazy
command registry). Adding a verb is one module in `commands/` and one line here.
"""

from __future__ import annotations

from typing import NamedTuple


class Command(NamedTuple):
    # A NamedTuple, not a dataclass: `dataclasses` costs `kubetrain --help` ~8 ms of imports.
    module: str
    """`kubetrain.cli.commands.<module>`: defines `add_arguments(parser)` and `run(args) -> int`."""
    summary: str
    brief: bool = False
    """Answers once and ends (`status`, `describe`, `list`): its objects are all alive until it ends, so the cyclic
    garbage collector is paused while it runs (`cli.main.collector_paused`)."""


COMMANDS: dict[str, Command] = {
    # running
    "run": Command("run", "Run a job (from a file, or from a command after --); attached by default."),
    # job management, on every backend
    "list": Command("list_jobs", "List jobs (newest first).", brief=True),
    "status": Command("status", "Show a job's phase and replicas (a one-glance failure reason).", brief=True),
    "describe": Command("describe", "Show everything about a job: replicas, counts, conditions, failure.", brief=True),
    "logs": Command("logs", "Print a job's output, merged across replicas with their prefixes."),
    "cancel": Command("cancel", "Cancel jobs: stop their replicas (SIGTERM, grace period, SIGKILL)."),
    "delete": Command("delete", "Delete jobs and their logs (cancels them first if running)."),
    "suspend": Command("suspend", "Suspend jobs: stop their replicas, keep the job to resume later."),
    "resume": Command("resume", "Resume suspended or paused jobs (runMode Pause)."),
    "wait": Command(
        "wait", "Wait until jobs meet a condition (--for=condition=Succeeded, phase=Running, delete), as kubectl wait."
    ),
    "scale": Command("scale", "Change the number of workers of a running elastic job (within its min and max)."),
    "attach": Command(
        "attach", "Open a shell in a replica's environment (runMode Debug: run the held program by hand)."
    ),
    # specs
    "validate": Command(
        "validate",
        "Check job files (TrainJobs and the foreign kinds kubetrain converts); every problem with its field path "
        "and line.",
    ),
    "explain": Command("explain", "Describe a field of the TrainJob spec (like kubectl explain)."),
    "schema": Command("schema", "Print the TrainJob JSON Schema (for editor completion and checks)."),
    "completion": Command("completion", "Print the shell completion script for bash, zsh or fish."),
    "version": Command("version", "Print the kubetrain version."),
    "render": Command("render", "Render a job as Kubernetes manifests (no cluster needed)."),
    "convert": Command(
        "convert", "Print the TrainJob of a DeepSpeedJob, TrainingWorkload, Kubeflow job, JobSet or Volcano Job."
    ),
    # seeing training
    "metrics": Command("metrics", "Print a job's metrics: latest values and a sparkline each (--watch to follow)."),
    "ui": Command("ui", "Serve the web view: jobs, replicas, live logs and metrics (pip install 'kubetrain[ui]')."),
    # inside replicas and for cluster admins
    "resolve": Command(
        "resolve",
        "Print this replica's cluster: JSON, TF_CONFIG, torch/JAX env, hostfile (for shell scripts inside replicas).",
    ),
    "rbac": Command(
        "rbac", "Print the ServiceAccount, Role and RoleBinding the in-cluster resolver needs (get/list pods)."
    ),
}

__all__ = ["COMMANDS", "Command"]
