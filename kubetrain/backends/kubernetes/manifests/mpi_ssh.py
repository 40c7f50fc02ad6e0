"""MPI over ssh: how an MPI job's launcher reaches its worker pods, and what each pod gets for it.

Open MPI's mpirun starts a daemon on every host of its hostfile over ssh; on Kubernetes the hosts are the
worker pods (their stable DNS names). Who provides what, by flavor:

| flavor | key pair (made by) | workers without a run of their own run | workers with one (`sshd -De`) |
|---|---|---|---|
| job, jobset, volcano | kubetrain, at submit (`ssh_keys.py`) | kubetrain's sshd | it; keys at sshAuthMountPath |
| volcano, own sshd | Volcano's `ssh` plugin | — | it; keys at sshAuthMountPath |
| kubeflow v2beta1 | the MPI Operator | `/usr/sbin/sshd -De` (its default) | it |
| kubeflow v1 | none: `kubectl exec` | a wait | it |

kubetrain's sshd (workers without a run of their own) needs only OpenSSH in the image: it reads a config of
kubetrain's (`/etc/kubetrain/sshd_config`, from the files ConfigMap) that listens on 2222, takes the job's
key as its host key and as the one authorized key, and works as root (with the capabilities SETUID,
SETGID and SYS_CHROOT that its privilege separation needs, added with a warning) or as any user the image
knows (with every capability dropped). The launcher's ssh reads `/etc/kubetrain/ssh_config`: the job's key,
port 2222, and the job's public key as every worker's known host key (checked, not trusted blindly). The
private key is copied from the Secret's volume to an in-memory emptyDir with mode 0600 before use, since
OpenSSH refuses a key others could read and the Secret's files are root's.

Workers running their own sshd are what an MPIJob or a Volcano MPI job describes: the keys are where their
image's sshd and ssh look (the MPI Operator's layout: `id_rsa`, `id_rsa.pub`, `authorized_keys` in the
user's ~/.ssh) and the launcher's ssh is the image's.

Every launcher first waits until each worker answers over ssh (as mpirun will reach it), so workers that
start later than the launcher (an image pull, a full node) are waited for, and a worker that never answers
is named.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ....contract.frameworks import Framework, record_of
from ....contract.labels import SSH_KEYS_ANNOTATION
from ....contract.naming import child_name
from ....frameworks.mpi import SSHD, SSHD_CONFIG, sshd_argv
from ....jobspec import Security
from .context import FILES_DIR, Ctx, Keys, RoleView, Transport
from .entrypoint import quote

PORT = record_of(Framework.MPI).default_port
"""The port of kubetrain's sshd (the mpi framework's port, in KUBETRAIN_CLUSTER's addresses)."""
KEYS_DIR = "/etc/kubetrain-ssh"
"""The job's Secret: ssh-privatekey, ssh-publickey, known_hosts."""
RUN_DIR = "/var/run/kubetrain-ssh"
"""An in-memory emptyDir: the private key with mode 0600, sshd's pid file."""
KEY_COPY = f"{RUN_DIR}/id"
SSH_CONFIG = "ssh_config"
DEFAULT_AUTH_PATH = "/root/.ssh"
"""The MPI Operator's (and Volcano's ssh plugin's) default place for the keys."""
ROOT_CAPABILITIES = ("SETUID", "SETGID", "SYS_CHROOT")
"""What sshd running as root needs for its privilege separation (it chroots, then changes user)."""
WAIT_ENV = "KUBETRAIN_SSH_WAIT"
"""Seconds (about) the launcher waits for each worker to answer over ssh; default `WAIT_SECONDS`."""
WAIT_SECONDS = 900
KEYS_VOLUME, RUN_VOLUME, AUTH_VOLUME = "kubetrain-ssh-keys", "kubetrain-ssh-run", "kubetrain-ssh-auth"

SSHD_CONFIG_TEXT = f"""\
# kubetrain's sshd for the MPI launcher's mpirun (docs/render.md, "MPI over ssh").
# As root it needs the capabilities SETUID, SETGID and SYS_CHROOT; as another user, none.
Port {PORT}
HostKey {KEY_COPY}
AuthorizedKeysFile {KEYS_DIR}/ssh-publickey
PidFile {RUN_DIR}/sshd.pid
# The keys are a Secret's files, owned by root whichever user runs sshd.
StrictModes no
PermitRootLogin prohibit-password
PasswordAuthentication no
UsePAM no
X11Forwarding no
PrintMotd no
"""

SSH_CONFIG_TEXT = f"""\
# The MPI launcher's ssh to kubetrain's sshd in the workers (docs/render.md, "MPI over ssh").
Host *
  Port {PORT}
  IdentityFile {KEY_COPY}
  IdentitiesOnly yes
  # Every worker's host key is the job's own key: checked, never learned.
  UserKnownHostsFile {KEYS_DIR}/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  BatchMode yes
  ConnectTimeout 10
  LogLevel ERROR
"""


@dataclass
class RoleSsh:
    """What one role's pods get for the ssh between launcher and workers."""

    volumes: list[dict[str, Any]] = field(default_factory=list)
    mounts: list[dict[str, Any]] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    """Static variables for the container's env list."""
    lines: list[str] = field(default_factory=list)
    """Start-up script lines, run before the program."""
    capabilities: tuple[str, ...] = ()
    readiness_probe: dict[str, Any] | None = None


def transport(ctx: Ctx, engine: Keys | None, over_ssh: bool) -> Transport | None:
    """The ssh between the job's pods on this flavor: an MPI launcher's to its workers, or keys the job asks for
    (`sshAuthMountPath`) for ssh of its own; None: none. The flavor says who makes the keys (`engine`: None,
    kubetrain) and whether its MPI launcher reaches the workers over ssh at all (`over_ssh`)."""
    path = ctx.spec.ssh_auth_mount_path
    if not record_of(ctx.spec.framework).ssh_launcher or not over_ssh:
        # Keys only, for the job's own ssh (the training operator's MPIJob v1 launcher uses kubectl exec).
        return Transport(engine or "kubetrain", False, path, None, launcher=False) if path else None
    if engine == "operator":
        return Transport(engine, False, path or DEFAULT_AUTH_PATH, (SSHD, "-De"))
    if not any(v.hosting and v.argv is not None for v in ctx.roles):
        return Transport("kubetrain", True, path, sshd_argv(FILES_DIR))
    return Transport(engine or "kubetrain", False, path or DEFAULT_AUTH_PATH, None)


def secret_name(ctx: Ctx) -> str:
    return child_name(ctx.layout.base, "ssh")


def apply(ctx: Ctx, engine: Keys | None, over_ssh: bool) -> None:
    """Decide the transport (`transport`); give workers without a program of their own the one that serves ssh,
    and the files kubetrain's sshd and ssh read."""
    ctx.ssh = transport(ctx, engine, over_ssh)
    if ctx.ssh is None:
        return
    program = ctx.ssh.worker_program
    if program is not None:
        ctx.roles = [replace(v, argv=program) if v.hosting and v.argv is None else v for v in ctx.roles]
    if ctx.ssh.kubetrain_sshd:
        ctx.files[SSHD_CONFIG] = SSHD_CONFIG_TEXT
        ctx.files[SSH_CONFIG] = SSH_CONFIG_TEXT
    if ctx.ssh.keys == "kubetrain":
        ctx.warn(f"Secret {secret_name(ctx)}: kubetrain makes the job's ssh key pair when it submits the job, so "
                 "the rendered Secret has no keys; to apply these manifests without kubetrain, fill it first "
                 "(ssh-keygen -t ed25519 -N '' -f key; kubectl create secret generic ... --type=kubernetes.io/ssh-auth "
                 "--from-file=ssh-privatekey=key --from-file=ssh-publickey=key.pub --from-file=known_hosts=<(echo "
                 "\"* $(cat key.pub)\"))")
    for view in ctx.roles:
        if runs_sshd(view.argv):
            ctx.warn(f"role {view.role}: its pods run sshd, which the other pods reach with the job's key pair: the "
                     f"image needs OpenSSH's server ({SSHD}) and client (ssh), and the user it runs as must exist "
                     "in the image (/etc/passwd)")
    envfrom = [v.role for v in ctx.roles if not v.hosting and v.settings.env_from]
    if envfrom and ctx.ssh.launcher:
        ctx.warn(f"role {envfrom[0]}: the variables of envFrom do not reach the ranks mpirun starts in the worker "
                 "pods (their names are not known before the pod runs): list them in env, or pass -x NAME in "
                 "run.otherArgs")


_SSHD_WORD = re.compile(r"(^|[/\s;&|(])sshd($|[\s;&|)])")


def runs_sshd(argv: Sequence[str] | None) -> bool:
    """The program serves ssh: sshd itself, or a shell line that starts it (`mkdir -p /run/sshd; sshd -D`)."""
    return argv is not None and any(_SSHD_WORD.search(word) for word in argv)


def objects(ctx: Ctx) -> list[dict[str, Any]]:
    """The job's Secret, without its keys (the submitter fills it: `ssh_keys.fill_ssh_secrets`)."""
    if ctx.ssh is None or ctx.ssh.keys != "kubetrain":
        return []
    meta = ctx.metadata(secret_name(ctx))
    meta["annotations"] = {**meta.get("annotations", {}), SSH_KEYS_ANNOTATION: "generate when submitted"}
    return [{"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "kubernetes.io/ssh-auth"}]


def volcano_plugin(ctx: Ctx) -> list[str] | None:
    """Volcano's `ssh` plugin arguments, where it makes the keys (workers with an sshd of their own)."""
    if ctx.ssh is None or ctx.ssh.keys != "plugin":
        return None
    path = ctx.ssh.auth_path
    return [f"--ssh-key-file-path={path}"] if path and path != DEFAULT_AUTH_PATH else []


def for_role(ctx: Ctx, view: RoleView) -> RoleSsh:
    """What `view`'s pods get: keys, config, the launcher's wait, the capabilities sshd needs."""
    out = RoleSsh()
    ssh = ctx.ssh
    if ssh is None:
        return out
    if ssh.keys == "kubetrain":
        if ssh.kubetrain_sshd:
            out.volumes.append({"name": KEYS_VOLUME, "secret": {"secretName": secret_name(ctx), "defaultMode": 0o444}})
            out.mounts.append({"name": KEYS_VOLUME, "mountPath": KEYS_DIR, "readOnly": True})
            out.volumes.append({"name": RUN_VOLUME, "emptyDir": {"medium": "Memory"}})
            out.mounts.append({"name": RUN_VOLUME, "mountPath": RUN_DIR})
            # OpenSSH refuses a private key that others may read: a copy only this user can.
            out.lines.append(f"(umask 077 && cat {KEYS_DIR}/ssh-privatekey > {KEY_COPY})")
        if ssh.auth_path is not None:
            out.volumes.append(_auth_volume(ctx, ssh.auth_path))
            out.mounts.append({"name": AUTH_VOLUME, "mountPath": ssh.auth_path, "readOnly": True})
    if runs_sshd(view.argv):
        out.lines += _sshd_lines(view)
        out.capabilities = _root_capabilities(ctx, view)
    if view.hosting and ssh.kubetrain_sshd:
        out.readiness_probe = {"tcpSocket": {"port": PORT}, "periodSeconds": 2}
    if ssh.launcher and not view.hosting and view.argv is not None and view.argv[:1] == ("mpirun",):
        if ssh.kubetrain_sshd:
            out.env["OMPI_MCA_plm_rsh_args"] = f"-F {FILES_DIR}/{SSH_CONFIG}"
        elif ssh.keys != "operator":  # the operator sets its own
            out.env["OMPI_MCA_plm_rsh_args"] = "-o ConnectionAttempts=10"
        out.lines += _wait_lines()
    return out


def _auth_volume(ctx: Ctx, path: str) -> dict[str, Any]:
    """The job's keys in the MPI Operator's layout; readable only by their owner (root) in root's ~/.ssh, as
    the operator mounts them, else by everyone (files owned by root, which OpenSSH accepts from another user)."""
    items = [{"key": "ssh-privatekey", "path": "id_rsa"}, {"key": "ssh-publickey", "path": "id_rsa.pub"},
             {"key": "ssh-publickey", "path": "authorized_keys"}]
    mode = 0o600 if path == DEFAULT_AUTH_PATH else 0o644
    return {"name": AUTH_VOLUME, "secret": {"secretName": secret_name(ctx), "items": items, "defaultMode": mode}}


def _sshd_lines(view: RoleView) -> list[str]:
    lines = []
    if view.argv is not None and view.argv[0] == SSHD:
        missing = (f"kubetrain: role {view.role} runs sshd for the mpirun of the launcher, and this image has no "
                   f"{SSHD}: install the OpenSSH server (openssh-server) in it")
        lines.append(f"[ -x {SSHD} ] || {{ echo {quote(missing)} >&2; exit 127; }}")
    # Debian's sshd, as root, wants its privilege separation folder, which only exists once the service ran.
    lines.append('if [ "$(id -u)" = 0 ]; then mkdir -p /run/sshd; fi')
    return lines


def _wait_lines() -> list[str]:
    """Wait for each worker of the hostfile to answer over ssh, the way mpirun will reach it."""
    hostfile = f"{FILES_DIR}/hostfile"
    return [
        f'kt_tries=${{{WAIT_ENV}:-{WAIT_SECONDS}}}',
        "while read -r kt_host kt_slots; do",
        '  [ -n "$kt_host" ] || continue',
        "  kt_n=0",
        '  until ssh -n $OMPI_MCA_plm_rsh_args -o BatchMode=yes -o ConnectTimeout=5 "$kt_host" true 2>/dev/null; do',
        '    if [ "$kt_n" = 0 ]; then echo "kubetrain: waiting for $kt_host to answer over ssh" >&2; fi',
        "    kt_n=$((kt_n + 1))",
        '    if [ "$kt_n" -ge "$kt_tries" ]; then',
        '      echo "kubetrain: $kt_host does not answer over ssh after $kt_n tries:" >&2',
        '      ssh -n $OMPI_MCA_plm_rsh_args -o BatchMode=yes -o ConnectTimeout=5 "$kt_host" true || :',
        "      exit 1",
        "    fi",
        "    sleep 1",
        "  done",
        f"done < {quote(hostfile)}",
    ]


def _root_capabilities(ctx: Ctx, view: RoleView) -> tuple[str, ...]:
    """What sshd needs as root, unless the job says its pods run as another user."""
    sec = view.settings.security or Security()
    uid = sec.run_as_uid
    if sec.run_as_user:
        uid = ctx.options.uid if ctx.options.uid is not None else os.getuid()
    if sec.run_as_non_root or (uid is not None and uid != 0):
        return ()
    missing = [cap for cap in ROOT_CAPABILITIES if cap not in sec.capabilities]
    if missing:
        ctx.warn(f"role {view.role}: capabilities {', '.join(missing)} added to its pods: sshd running as root needs "
                 "them (privilege separation); run it as a user of the image (security.runAsUid, and "
                 "sshAuthMountPath for an sshd of the image's own) to keep every capability dropped")
    return tuple(missing)


__all__ = [
    "DEFAULT_AUTH_PATH",
    "KEYS_DIR",
    "PORT",
    "ROOT_CAPABILITIES",
    "RUN_DIR",
    "SSHD",
    "SSHD_CONFIG_TEXT",
    "SSH_CONFIG_TEXT",
    "WAIT_ENV",
    "RoleSsh",
    "Transport",
    "apply",
    "for_role",
    "objects",
    "runs_sshd",
    "secret_name",
    "transport",
    "volcano_plugin",
]
