"""Rendered pods run on this machine as a cluster would run them, for the MPI-over-ssh tests.

A pod here is its main container's command (kubetrain's start-up script) and args, with the env the kubelet
gives it (`kubelet.kubelet_env`), run as a container runs: in namespaces of its own (mount, network, host
name), its volumes at their mount paths (an overlay on /etc holding the ConfigMap's and Secret's files with
their modes, a tmpfs on /run for emptyDirs, a /tmp of its own), as the user and with the capabilities its
securityContext gives (setpriv: the bounding set is `capabilities.add`, no new privileges). Each pod's eth0 is
one end of a veth pair whose other end is on a bridge, as a CNI bridge plugin wires pods, and the pods'
/etc/hosts resolves their DNS names (the headless Service's records) to their addresses. Everything runs
under `unshare --net --pid`, so nothing outlives a test. It needs root (namespaces, mounts, links); the tests
say so when it is missing.

What stands in for a cluster: /etc/hosts for its DNS, a bridge for its pod network, this machine's files
for the image (Debian with OpenSSH and Open MPI).

`python -m tests.support.pods cluster PLAN.json` is the harness run inside the namespaces; the test process
writes the plan (`ClusterPlan`) and reads the outcome (JSON on stdout).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TEST_USER = ("kubetrain-test", 4242)
"""The non-root user a pod may run as (`security.runAsUid`), added to the pods' /etc/passwd."""


@dataclass
class PodPlan:
    """One pod, ready to run: its argv (command + args, expanded), env, user, capabilities, volumes."""

    name: str
    hostname: str
    address: str
    """The pod's IP (on the pods' bridge network)."""
    argv: list[str]
    env: dict[str, str]
    uid: int
    gid: int
    capabilities: list[str]
    etc: dict[str, str] = field(default_factory=dict)
    """Mount path under /etc → the folder with the volume's files."""
    empty_dirs: list[str] = field(default_factory=list)
    """emptyDir mount paths under /run (or /var/run)."""


@dataclass
class ClusterPlan:
    pods: list[PodPlan]
    hosts: dict[str, str]
    """DNS name → address (the headless Service's records)."""
    order: list[str]
    """Pod names in start order; `wait_for` holds a pod back until an earlier one printed a line."""
    main: str
    """The pod whose end ends the run (the launcher)."""
    work: str
    wait_for: dict[str, list[str]] = field(default_factory=dict)
    """pod → [earlier pod, text in its stderr]: start it only once that pod has said so."""
    timeout: float = 120.0


def pod_plan(objects: list[dict[str, Any]], template: dict[str, Any], *, name: str, hostname: str,
             address: str, engine: dict[str, str], into: Path, path: str) -> PodPlan:
    """What the kubelet would run for `template` (one replica, with the engine's variables `engine`)."""
    from tests.support.kubelet import expand, kubelet_env, main_container, mounted_volumes

    container = main_container(template)
    fields = {"metadata.name": name, "status.podIP": address, "status.hostIP": address}
    env = kubelet_env(container, fields, engine)
    argv = [expand(word, env) for word in [*container["command"], *container.get("args", [])]]
    pod_security = template["spec"].get("securityContext") or {}
    uid = int(pod_security.get("runAsUser", 0))
    gid = int(pod_security.get("runAsGroup", uid))
    home = "/root" if uid == 0 else "/tmp"
    env = {"PATH": path, "HOME": home, "HOSTNAME": hostname, **env}
    caps = ((container.get("securityContext") or {}).get("capabilities") or {}).get("add") or []
    volumes = {v["name"]: v for v in template["spec"].get("volumes", [])}
    etc: dict[str, str] = {}
    empty: list[str] = []
    for mount_path, folder in mounted_volumes(objects, template, into).items():
        volume = next(volumes[m["name"]] for m in container["volumeMounts"] if m["mountPath"] == mount_path)
        if "emptyDir" in volume:
            empty.append(mount_path)
        else:
            assert mount_path.startswith("/etc/"), f"test pods mount ConfigMaps and Secrets under /etc: {mount_path}"
            etc[mount_path] = str(folder)
    return PodPlan(name, hostname, address, argv, env, uid, gid, list(caps), etc, empty)


def run_cluster(plan: ClusterPlan) -> dict[str, Any]:
    """Run the pods in namespaces of their own (root only); their exit codes and output."""
    plan_file = Path(plan.work) / "plan.json"
    plan_file.write_text(json.dumps(asdict(plan)), encoding="utf-8")
    argv = ["unshare", "--net", "--pid", "--fork", "--kill-child", "--mount-proc",
            sys.executable, "-m", "tests.support.pods", "cluster", str(plan_file)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=plan.timeout + 30, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    if proc.returncode != 0 or not proc.stdout.strip():
        raise AssertionError(f"the pod harness failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


# -- inside the namespaces ---------------------------------------------------------------------------------


BRIDGE = "kt-pods"
PREFIX = 24


def _cluster(plan_file: str) -> None:
    data = json.loads(Path(plan_file).read_text(encoding="utf-8"))
    pods = {p["name"]: PodPlan(**p) for p in data["pods"]}
    plan = ClusterPlan(**{**data, "pods": list(pods.values())})
    work = Path(plan.work)
    gateway = _gateway(next(iter(pods.values())).address)
    for command in (["ip", "link", "set", "lo", "up"], ["ip", "link", "add", BRIDGE, "type", "bridge"],
                    ["ip", "addr", "add", f"{gateway}/{PREFIX}", "dev", BRIDGE], ["ip", "link", "set", BRIDGE, "up"]):
        subprocess.run(command, check=True)
    started: dict[str, tuple[subprocess.Popen[bytes], Path, Path]] = {}
    deadline = time.monotonic() + plan.timeout
    for n, name in enumerate(plan.order):
        if name in plan.wait_for:
            earlier, text = plan.wait_for[name]
            err = started[earlier][2]
            while text not in err.read_text(encoding="utf-8", errors="replace"):
                if time.monotonic() > deadline or started[earlier][0].poll() is not None:
                    break
                time.sleep(0.05)
        out, err = work / f"{name}.out", work / f"{name}.err"
        with out.open("wb") as o, err.open("wb") as e:
            proc = subprocess.Popen([sys.executable, "-m", "tests.support.pods", "pod", plan_file, name],
                                    stdout=o, stderr=e, stdin=subprocess.DEVNULL, cwd=REPO,
                                    env={"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "")})
        started[name] = (proc, out, err)
        _wire(pods[name], proc, work, n, deadline)
    main, _, _ = started[plan.main]
    try:
        code: int | None = main.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        code = None
    result = {name: {"code": proc.poll() if name != plan.main else code,
                     "stdout": out.read_text(encoding="utf-8", errors="replace"),
                     "stderr": err.read_text(encoding="utf-8", errors="replace")}
              for name, (proc, out, err) in started.items()}
    print(json.dumps(result))


def _gateway(address: str) -> str:
    return address.rsplit(".", 1)[0] + ".1"


def _wire(pod: PodPlan, proc: subprocess.Popen[bytes], work: Path, n: int, deadline: float) -> None:
    """Once the pod has its own network namespace, give it an eth0 on the bridge, then let it go on."""
    ready, go = work / f"{pod.name}.netns", work / f"{pod.name}.go"
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            return
        time.sleep(0.01)
    pid = proc.pid
    host_end = f"kt-veth{n}"
    subprocess.run(["ip", "link", "add", host_end, "type", "veth", "peer", "name", "eth0", "netns", str(pid)],
                   check=True)
    subprocess.run(["ip", "link", "set", host_end, "master", BRIDGE], check=True)
    subprocess.run(["ip", "link", "set", host_end, "up"], check=True)
    inside = ["nsenter", f"--net=/proc/{pid}/ns/net"]
    for command in (["ip", "addr", "add", f"{pod.address}/{PREFIX}", "dev", "eth0"],
                    ["ip", "link", "set", "eth0", "up"], ["ip", "link", "set", "lo", "up"],
                    ["ip", "route", "add", "default", "via", _gateway(pod.address)]):
        subprocess.run([*inside, *command], check=True)
    go.write_text("go", encoding="utf-8")


def _pod(plan_file: str, name: str) -> None:
    """One pod: its own mount namespace (this process unshares it), its volumes, then its container."""
    data = json.loads(Path(plan_file).read_text(encoding="utf-8"))
    pod = PodPlan(**next(p for p in data["pods"] if p["name"] == name))
    work = Path(data["work"])
    _unshare(_CLONE_NEWNS | _CLONE_NEWNET | _CLONE_NEWUTS)
    socket.sethostname(pod.hostname)
    (work / f"{name}.netns").write_text(str(os.getpid()), encoding="utf-8")
    while not (work / f"{name}.go").exists():  # the harness gives it an eth0 (it ends this process if it fails)
        time.sleep(0.01)
    subprocess.run(["mount", "--make-rprivate", "/"], check=True)
    root = work / f"pod-{name}"
    upper, scratch = root / "upper", root / "overlay-work"
    for folder in (upper, scratch):
        folder.mkdir(parents=True, exist_ok=True)
    # What the pod's image and the cluster put in /etc: its DNS records, the user it runs as.
    (upper / "hosts").write_text(Path("/etc/hosts").read_text(encoding="utf-8") + "".join(
        f"{address} {host}\n" for host, address in data["hosts"].items()), encoding="utf-8")
    user, uid = TEST_USER
    (upper / "passwd").write_text(Path("/etc/passwd").read_text(encoding="utf-8")
                                  + f"{user}:x:{uid}:{uid}::/tmp:/bin/sh\n", encoding="utf-8")
    (upper / "group").write_text(Path("/etc/group").read_text(encoding="utf-8") + f"{user}:x:{uid}:\n",
                                 encoding="utf-8")
    for mount_path, folder in pod.etc.items():
        shutil.copytree(folder, upper / Path(mount_path).relative_to("/etc"), dirs_exist_ok=True)
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir=/etc,upperdir={upper},workdir={scratch}", "/etc"], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", "/run"], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=1777", "tmpfs", "/tmp"], check=True)
    for mount_path in pod.empty_dirs:
        folder = Path("/run") / Path(mount_path).relative_to("/var/run" if mount_path.startswith("/var/") else "/run")
        folder.mkdir(parents=True)
        folder.chmod(0o777)  # an emptyDir: writable by whichever user the pod runs as
    caps = ",".join(f"+{cap.lower()}" for cap in pod.capabilities)
    setpriv = ["setpriv", "--inh-caps=-all", f"--bounding-set=-all{',' + caps if caps else ''}", "--no-new-privs"]
    if pod.uid != 0:
        setpriv[1:1] = [f"--reuid={pod.uid}", f"--regid={pod.gid}", "--clear-groups"]
    os.chdir("/")
    os.execvpe(setpriv[0], [*setpriv, "--", *pod.argv], pod.env)


_CLONE_NEWNS, _CLONE_NEWUTS, _CLONE_NEWNET = 0x00020000, 0x04000000, 0x40000000


def _unshare(flags: int) -> None:
    """Namespaces of the pod's own (os.unshare is Python 3.12's; this is the libc call)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(flags) != 0:
        raise OSError(ctypes.get_errno(), f"unshare({flags:#x})")


if __name__ == "__main__":
    if sys.argv[1] == "cluster":
        _cluster(sys.argv[2])
    else:
        _pod(sys.argv[2], sys.argv[3])
