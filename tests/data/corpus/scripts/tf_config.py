"""Stand-in for a TensorFlow worker: reads TF_CONFIG (or builds it, as the Volcano examples do in shell, from
the svc plugin's VC_<TASK>_HOSTS and the env plugin's VK_TASK_INDEX: --volcano TASK,TASK --task TASK), checks it
is the JSON TensorFlow's cluster resolver takes, and reports its shape:
`CORPUS {"type": t, "index": i, "sizes": {...}, "environment": e, "hosts": {...}}`.

As TensorFlow's own processes do, a server task (`--serve`: a ps, or a worker under a chief) then listens on
its own address until it is stopped, and a driving task (`--wait-for ps,worker`) reaches every server's
address before it reports: a job ended by its chief or by a worker (Volcano's TaskCompleted → CompleteJob)
stops its servers only after they have started and reported, as it would on the cluster."""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time

REACH_TIMEOUT = 120.0
"""Seconds a driving task tries to reach the servers (all processes start on a loaded 2-core machine)."""


def from_volcano(tasks: list[str], task: str, port: int) -> str:
    cluster = {}
    for name in tasks:
        hosts = os.environ[f"VC_{name.upper().replace('-', '_')}_HOSTS"].split(",")
        cluster[name] = [f"{host}:{port}" for host in hosts]
    return json.dumps({"cluster": cluster, "task": {"type": task, "index": int(os.environ["VK_TASK_INDEX"])}})


def reach(address: str) -> None:
    """Connect to a server task's address until it accepts, as a TensorFlow client does (bounded)."""
    host, _, port = address.rpartition(":")
    deadline = time.monotonic() + REACH_TIMEOUT
    while True:
        try:
            socket.create_connection((host, int(port)), timeout=5).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                sys.exit(f"cannot reach {address}")
            time.sleep(0.1)


def serve(address: str) -> None:
    """Listen on this task's own address until stopped, as a TensorFlow server's join() does."""
    host, _, port = address.rpartition(":")
    with socket.create_server((host, int(port))) as server:
        while True:
            server.accept()[0].close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--volcano", default=None, help="build TF_CONFIG from these tasks' Volcano variables")
    parser.add_argument("--task", default=None)
    parser.add_argument("--port", type=int, default=2222)
    parser.add_argument("--serve", action="store_true", help="listen on the own address after reporting")
    parser.add_argument("--wait-for", default="", help="reach these tasks' addresses before reporting")
    args = parser.parse_args()
    text = from_volcano(args.volcano.split(","), args.task, args.port) if args.volcano else os.environ["TF_CONFIG"]
    config = json.loads(text)
    cluster, task = config["cluster"], config["task"]
    for addresses in cluster.values():
        for address in addresses:
            host, _, port = address.rpartition(":")
            assert host and port.isdigit(), address
    report = {
        "type": task["type"],
        "index": task["index"],
        "sizes": {name: len(addresses) for name, addresses in cluster.items()},
        "environment": config.get("environment"),
        "own": cluster[task["type"]][task["index"]] if task["type"] in cluster else None,
    }
    for name in filter(None, args.wait_for.split(",")):
        for address in cluster[name]:
            reach(address)
    sys.stdout.write("CORPUS " + json.dumps(report, sort_keys=True) + "\n")  # one write: ranks may share the pipe
    sys.stdout.flush()
    if args.serve:
        serve(report["own"])


if __name__ == "__main__":
    main()
