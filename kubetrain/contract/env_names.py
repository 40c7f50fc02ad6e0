"""Names of the variables kubetrain reads or gives, so a name is written once.

The replica contract (`JOB` … `HOSTFILE`) is what every replica gets on every backend; the resolver
reads it inside replicas. The rest configure kubetrain itself.
"""

from __future__ import annotations

# -- what every replica gets (the env contract) ------------------------------------------------------
JOB = "KUBETRAIN_JOB"
FRAMEWORK = "KUBETRAIN_FRAMEWORK"
ROLE = "KUBETRAIN_ROLE"
REPLICA_INDEX = "KUBETRAIN_REPLICA_INDEX"
NUM_REPLICAS = "KUBETRAIN_NUM_REPLICAS"
CLUSTER = "KUBETRAIN_CLUSTER"
"""The job's cluster as JSON, so the resolver needs no API call where the env suffices."""
HOSTFILE = "KUBETRAIN_HOSTFILE"
"""DeepSpeed and MPI: where the job's hostfile is."""
LOCAL_RANK = "KUBETRAIN_LOCAL_RANK"
"""generic jobs with procsPerReplica > 1: the process's number in its replica, 0 … procsPerReplica-1."""
PROCS_PER_REPLICA = "KUBETRAIN_PROCS_PER_REPLICA"
"""generic jobs: processes in each replica of the role."""
RANK0_HOST = "KUBETRAIN_RANK0_HOST"
"""generic jobs: the host of the first replica of the first role, where a coordinator usually listens (the
other frameworks name it their own way: MASTER_ADDR, TF_CONFIG's chief, JAX_COORDINATOR_ADDRESS); what a
TorchX AppDef's ${rank0_env} names."""
FILES_ROOT = "KUBETRAIN_FILES_ROOT"
"""Locally, a job run under a controller's contract (`spec.controller`): the folder that stands for `/` for the
files that controller places in a pod (`$KUBETRAIN_FILES_ROOT/etc/volcano/worker.host`). Unset on
Kubernetes, where they are at their own paths."""

# -- what a replica may have on Kubernetes -----------------------------------------------------------
NAMESPACE = "KUBETRAIN_NAMESPACE"
POD_NAME = "KUBETRAIN_POD_NAME"
DEBUG_DIR = "KUBETRAIN_DEBUG_DIR"
"""runMode Debug: where the held program's start script is written."""

# -- what configures kubetrain -----------------------------------------------------------------------
HOME = "KUBETRAIN_HOME"
"""The local backend's state directory (job store, logs); default under XDG_STATE_HOME."""
TEMPLATES = "KUBETRAIN_TEMPLATES"
"""Folders searched for base templates (`spec.template`)."""
PYTHON = "KUBETRAIN_PYTHON"
"""The interpreter of a detached local job's supervisor (default: the one running kubetrain)."""
LOCAL_TAG = "KUBETRAIN_LOCAL_TAG"
"""Marks every process of a local job, so sweeps find its descendants."""
LOG_MAX_SIZE = "KUBETRAIN_LOG_MAX_SIZE"
"""The local backend: a replica's log is rotated past this size (bytes, or with Ki/Mi/Gi or K/M/G, as the
kubelet's containerLogMaxSize; 0 turns rotation off). Read by the supervisor that writes the logs."""
LOG_MAX_FILES = "KUBETRAIN_LOG_MAX_FILES"
"""The local backend: log files kept per replica, the one being written included (containerLogMaxFiles)."""
KEPT_LOGS_MAX_SIZE = "KUBETRAIN_KEPT_LOGS_MAX_SIZE"
"""Kubernetes: the most disk the logs kept of one job take on this machine (`256Mi`; 0: keep none)."""

# -- where `kubetrain.metrics.log` writes ------------------------------------------------------------
METRICS_FILE = "KUBETRAIN_METRICS_FILE"
"""A file the process appends its metrics to, a JSON line per call (the local backend sets one per process;
a user may set it for a script run by hand)."""
METRICS = "KUBETRAIN_METRICS"
"""`stdout`: metric lines in the process's output (the default under kubetrain without a metrics file, as
on Kubernetes); `off`: no metrics at all."""

# -- the web view ---------------------------------------------------------------------------------------
UI_TOKEN = "KUBETRAIN_UI_TOKEN"
"""`kubetrain ui`: the key to the page, kept across restarts (default: a fresh one per start)."""

__all__ = [
    "CLUSTER",
    "DEBUG_DIR",
    "FILES_ROOT",
    "FRAMEWORK",
    "HOME",
    "HOSTFILE",
    "JOB",
    "KEPT_LOGS_MAX_SIZE",
    "LOCAL_RANK",
    "LOCAL_TAG",
    "LOG_MAX_FILES",
    "LOG_MAX_SIZE",
    "METRICS",
    "METRICS_FILE",
    "NAMESPACE",
    "NUM_REPLICAS",
    "POD_NAME",
    "PROCS_PER_REPLICA",
    "PYTHON",
    "RANK0_HOST",
    "REPLICA_INDEX",
    "ROLE",
    "TEMPLATES",
    "UI_TOKEN",
]

# -- for kubetrain's own tests -------------------------------------------------------------------------
PAUSE_AT = "KUBETRAIN_TEST_PAUSE_AT"
"""A test hook: comma-separated names of start-up points (`contract.pause.pause_point`) where a command stops,
says so on stderr, and waits for a SIGINT or SIGTERM, which then takes effect right there. Lets a test send a
signal at a chosen moment of start-up instead of sleeping and hoping."""
