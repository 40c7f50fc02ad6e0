"""Helpers shared by the render tests: find pod templates in any flavor's objects, and run a container
the way the kubelet would (its env list with `$(VAR)` expansion, then its command and args expanded
against that env, then the command in a real POSIX shell).

tests/kubernetes/render/test_kubelet_standin.py checks the helpers themselves, so the tests built on
them can be trusted.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

Manifest = dict[str, Any]

SHELLS = [s for s in ("dash", "bash", "busybox") if shutil.which(s)]
"""POSIX shells on this machine; the script must behave the same in each."""

_KUBE_REF = re.compile(r"\$\$|\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)")

# Prints what the program would see: its argv and environment.
DUMP = "import json, os, sys; print(json.dumps({'argv': sys.argv[1:], 'env': dict(os.environ)}))"


IMAGE = "registry.example.com/train:1"
"""The image a rendered job names (never pulled: the pods run in a real shell here, see `run_container`)."""


def pod_templates(objects: list[Manifest]) -> dict[str, Manifest]:
    """Role → pod template, whatever the flavor (by kubetrain's role label: a converted job rendered for its own
    controller keeps the source's task and replica type names, a Volcano `mpiworker`, a TFJob `Master`)."""
    out: dict[str, Manifest] = {}

    def add(name: str, template: Manifest) -> None:
        labels = (template.get("metadata") or {}).get("labels") or {}
        out[labels.get("kubetrain.dev/role", name)] = template

    for obj in objects:
        kind, spec = obj["kind"], obj.get("spec", {})
        if obj["apiVersion"] == "batch/v1" and kind == "Job":
            out[obj["metadata"]["labels"]["kubetrain.dev/role"]] = spec["template"]
        elif kind == "JobSet":
            for rjob in spec["replicatedJobs"]:
                add(rjob["name"], rjob["template"]["spec"]["template"])
        elif obj["apiVersion"].startswith("batch.volcano.sh/"):
            for task in spec["tasks"]:
                add(task["name"], task["template"])
        elif obj["apiVersion"].startswith("kubeflow.org/"):
            key = next(k for k in spec if k.endswith("ReplicaSpecs"))
            for rtype, rspec in spec[key].items():
                add(rtype.lower(), rspec["template"])
    return out


def pod_specs(objects: list[Manifest]) -> list[Manifest]:
    return [t["spec"] for t in pod_templates(objects).values()]


def containers_of(obj: Any) -> list[Manifest]:
    """Every container of every pod template in `obj` (an object or a list of them), wherever it is nested:
    unlike `pod_templates`, also in kinds kubetrain does not render itself."""
    found: list[Manifest] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("containers"), list):
                found.extend(node["containers"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(obj)
    return found


def main_container(template: Manifest) -> Manifest:
    containers: list[Manifest] = template["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def expand(raw: str, env: Mapping[str, str]) -> str:
    """The kubelet's expansion of an env value: `$$` → `$`, `$(NAME)` → a variable defined before it,
    anything else as written."""
    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return _KUBE_REF.sub(sub, raw)


def kubelet_env(container: Manifest, pod_fields: Mapping[str, str], engine: Mapping[str, str],
                appended: Mapping[str, str] | None = None,
                secrets: Mapping[tuple[str, str], str] | None = None) -> dict[str, str]:
    """The environment the kubelet gives `container`: what the engine injects (JOB_COMPLETION_INDEX,
    VK_TASK_INDEX, ...), then the env list in order, each value expanded against the ones before, then
    what an operator appends to the list (the training operator's MASTER_ADDR, RANK, ...: last wins).
    `secrets`: (Secret name, key) → value, for `secretKeyRef`s."""
    env = dict(engine)
    for item in container.get("env", []):
        source = item.get("valueFrom", {})
        if "value" in item:
            env[item["name"]] = expand(item["value"], env)
        elif "fieldRef" in source:
            env[item["name"]] = pod_fields[source["fieldRef"]["fieldPath"]]
        elif "secretKeyRef" in source and secrets is not None:
            ref = source["secretKeyRef"]
            env[item["name"]] = secrets[(ref["name"], ref["key"])]
        else:
            raise AssertionError(f"test helper cannot resolve {item}")
    env.update(appended or {})
    return env


def mounted_volumes(objects: list[Manifest], template: Manifest, into: Path) -> dict[str, Path]:
    """The main container's volumeMounts → folders under `into` holding what the kubelet would put there: a
    ConfigMap's or Secret's keys (or its items) as files with their modes, nothing for an emptyDir or for an
    object of the cluster's own (not rendered). A Secret
    the render left for the submitter gets keys as `kubetrain run` fills it (ssh_keys.fill_ssh_secrets)."""
    import base64

    from kubetrain.backends.kubernetes.ssh_keys import fill_ssh_secrets

    by_name = {(o["kind"], o["metadata"]["name"]): o for o in fill_ssh_secrets(objects)}
    volumes = {v["name"]: v for v in template["spec"].get("volumes", [])}
    out: dict[str, Path] = {}
    for i, mount in enumerate(main_container(template).get("volumeMounts", [])):
        volume = volumes[mount["name"]]
        folder = into / f"volume-{i}-{mount['name']}"
        folder.mkdir(parents=True, exist_ok=True)
        for kind, key in (("ConfigMap", "configMap"), ("Secret", "secret")):
            if key not in volume:
                continue
            source = volume[key]
            obj = by_name.get((kind, source.get("name") or source.get("secretName")))
            if obj is None:
                continue  # the cluster's own (a user's ConfigMap): nothing the start-up script reads
            data = obj.get("data") or {}
            if kind == "Secret":
                data = {k: base64.b64decode(v).decode() for k, v in data.items()}
            items = source.get("items") or [{"key": k, "path": k} for k in data]
            for item in items:
                path = folder / item["path"]
                path.write_text(data[item["key"]], encoding="utf-8")
                path.chmod(item.get("mode", source.get("defaultMode", 0o644)))
        out[mount["mountPath"]] = folder
    return out


def at_mounts(text: str, mounts: Mapping[str, Path]) -> str:
    """`text` with each mount path (a whole path, not a prefix of a longer name) replaced by its folder: the
    stand-in for the container's view of its volumes."""
    for path in sorted(mounts, key=len, reverse=True):
        text = re.sub(re.escape(path) + r"(?=[/\s'\"]|$)", lambda _m, p=path: str(mounts[p]), text)
    return text


def run_container(
    container: Manifest,
    env: Mapping[str, str],
    *,
    shell: str = "dash",
    path_dir: Path | None = None,
    program: list[str] | None = None,
    cwd: Path | None = None,
    mounts: Mapping[str, Path] | None = None,
) -> tuple[int, dict[str, Any] | None, str]:
    """Run the container's command + args with `env`, its program replaced by one that prints its argv
    and env. Returns (exit code, what the program saw or None, stderr).

    As the kubelet does, `$(VAR)` in command and args is expanded against the container's env (every
    variable of it, not only earlier ones) before the shell sees them. `mounts` (`mounted_volumes`): the
    start-up script reads its volumes' files there."""
    command = [expand(word, env) for word in container["command"]]
    assert command[:2] == ["/bin/sh", "-c"]
    if mounts:
        command[2] = at_mounts(command[2], mounts)
    args = [expand(word, env) for word in container.get("args", [])]
    argv = [shutil.which(shell) or shell, *command[1:], *(program or [sys.executable, "-c", DUMP]), *args]
    run_env = dict(env)
    path = os.environ.get("PATH", "")
    run_env["PATH"] = f"{path_dir}:{path}" if path_dir else path
    proc = subprocess.run(argv, env=run_env, capture_output=True, text=True, timeout=60, cwd=cwd)
    seen = json.loads(proc.stdout) if proc.returncode == 0 and proc.stdout.startswith("{") else None
    return proc.returncode, seen, proc.stderr


SHELL_NOISE = {"PATH", "PWD", "OLDPWD", "SHLVL", "_", "LC_CTYPE"}  # shells and Python add these
