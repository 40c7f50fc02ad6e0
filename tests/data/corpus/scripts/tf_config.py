"""Stand-in for a TensorFlow worker: reads TF_CONFIG (or builds it, as the Volcano examples do in shell, from
the svc plugin's VC_<TASK>_HOSTS and the env plugin's VK_TASK_INDEX: --volcano TASK,TASK --task TASK), checks it
is the JSON TensorFlow's cluster resolver takes, and reports its shape:
`CORPUS {"type": t, "index": i, "sizes": {...}, "environment": e, "hosts": {...}}`."""

from __future__ import annotations

import argparse
import json
import os


def from_volcano(tasks: list[str], task: str, port: int) -> str:
    cluster = {}
    for name in tasks:
        hosts = os.environ[f"VC_{name.upper().replace('-', '_')}_HOSTS"].split(",")
        cluster[name] = [f"{host}:{port}" for host in hosts]
    return json.dumps({"cluster": cluster, "task": {"type": task, "index": int(os.environ["VK_TASK_INDEX"])}})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--volcano", default=None, help="build TF_CONFIG from these tasks' Volcano variables")
    parser.add_argument("--task", default=None)
    parser.add_argument("--port", type=int, default=2222)
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
    print("CORPUS " + json.dumps(report, sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
