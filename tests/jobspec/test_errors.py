"""Bad job specs: every one is refused with a SpecError naming the exact field, its file:line, and a hint.

Each case is a complete YAML document loaded from a file. The line the error must point at carries the
marker comment `#!`; the expected field path is written out in full (e.g. `spec.roles.worker.replicas`).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from kubetrain.jobspec import FieldError, SpecError, format_path, from_dict, load_file

HEADER = "apiVersion: kubetrain.dev/v1alpha1\nkind: TrainJob\n"
RUN = 'run: {python: [train.py, --steps, "20"]}'
MARK = "#!"


def job(spec: str, metadata: str = "{name: demo}", header: str = HEADER) -> str:
    """A document with `spec` (dedented YAML lines) under `spec:`."""
    body = textwrap.indent(textwrap.dedent(spec).strip("\n"), "  ")
    return f"{header}metadata: {metadata}\nspec:\n{body}\n"


def pytorch(extra: str, *, replicas: bool = True) -> str:
    """A valid 2-replica pytorch job plus `extra` spec lines."""
    lines = ["framework: pytorch", RUN] + (["replicas: 2"] if replicas else [])
    return job("\n".join(lines) + "\n" + textwrap.dedent(extra).strip("\n"))


@dataclass(frozen=True)
class Bad:
    id: str
    text: str
    path: str
    message: str
    """A fragment the error's message must contain."""
    hint: str | None = None
    """A fragment the error's hint must contain."""


CASES: list[Bad] = [
    # -- unknown fields, at several depths, each with a did-you-mean --------------------------------
    Bad("unknown-spec-field", pytorch("replicaz: 3  #!"), "spec.replicaz", "unknown field", "did you mean 'replicas'?"),
    Bad("unknown-top-field", HEADER + "metadata: {name: demo}\nspecs: {}  #!\n", "specs", "unknown field",
        "did you mean 'spec'?"),
    Bad("unknown-metadata-field", job(f"framework: pytorch\n{RUN}", metadata="{name: demo, label: {}}  #!"),
        "metadata.label", "unknown field", "did you mean 'labels'?"),
    Bad("unknown-resources-field", pytorch("resources: {cpus: 2}  #!"), "spec.resources.cpus", "unknown field",
        "did you mean 'cpu'?"),
    Bad("unknown-role-field", job(f"""
        framework: pytorch
        {RUN}
        roles:
          worker: {{replicas: 2, imagePolicy: Always}}  #!
        """), "spec.roles.worker.imagePolicy", "unknown field", "did you mean 'imagePullPolicy'?"),
    Bad("unknown-role-resources-field", job(f"""
        framework: pytorch
        {RUN}
        roles:
          worker:
            resources: {{gpus: 1}}  #!
        """), "spec.roles.worker.resources.gpus", "unknown field", "did you mean 'gpu'?"),
    Bad("unknown-mount-field", pytorch("""
        mounts:
          - {type: bind, src: /data, dst: /data, readOnly: true}  #!
        """), "spec.mounts[0].readOnly", "unknown field", "did you mean 'readonly'?"),
    Bad("unknown-env-var-field", pytorch("""
        env:
          - {name: A, valu: b}  #!
        """), "spec.env[0].valu", "unknown field for V1EnvVar", "did you mean 'value'?"),
    Bad("unknown-env-field-deep", pytorch("""
        env:
          - name: POD_IP
            valueFrom:
              fieldRef: {fieldpath: status.podIP}  #!
        """), "spec.env[0].valueFrom.fieldRef.fieldpath", "unknown field", "did you mean 'fieldPath'?"),
    Bad("unknown-toleration-field", pytorch("""
        tolerations:
          - {key: nvidia.com/gpu, operater: Exists}  #!
        """), "spec.tolerations[0].operater", "unknown field for V1Toleration", "did you mean 'operator'?"),
    Bad("unknown-affinity-field", pytorch("affinity: {nodeAffinty: {}}  #!"), "spec.affinity.nodeAffinty",
        "unknown field for V1Affinity", "did you mean 'nodeAffinity'?"),
    Bad("unknown-envfrom-field", pytorch("envFrom: [{configMap: {name: x}}]  #!"), "spec.envFrom[0].configMap",
        "unknown field", "did you mean 'configMapRef'?"),
    Bad("unknown-scheduling-field", pytorch("scheduling: {queu: research}  #!"), "spec.scheduling.queu",
        "unknown field", "did you mean 'queue'?"),
    Bad("unknown-security-field", pytorch("security: {runAsRoot: false}  #!"), "spec.security.runAsRoot",
        "unknown field", "did you mean 'runAsNonRoot'?"),
    Bad("unknown-runpolicy-field", pytorch("runPolicy: {backofLimit: 2}  #!"), "spec.runPolicy.backofLimit",
        "unknown field", "did you mean 'backoffLimit'?"),
    Bad("unknown-elastic-field", pytorch("elastic: {minReplicas: 1, maxReplicas: 2, maxRestart: 1}  #!"),
        "spec.elastic.maxRestart", "unknown field", "did you mean 'maxRestarts'?"),
    # -- enums ----------------------------------------------------------------------------------------
    Bad("bad-framework", job(f"framework: pytorh  #!\n{RUN}"), "spec.framework", "'pytorch'"),
    Bad("bad-restart-policy", pytorch("restartPolicy: Sometimes  #!"), "spec.restartPolicy", "'ExitCode'"),
    Bad("bad-run-mode", pytorch("runMode: Later  #!"), "spec.runMode", "'Pause'"),
    Bad("bad-gpu-sharing", pytorch("resources: {gpu: 0.5, gpuSharing: nvidia}  #!"), "spec.resources.gpuSharing",
        "'hami'"),
    Bad("bad-clean-pod-policy", pytorch("runPolicy: {cleanPodPolicy: Some}  #!"), "spec.runPolicy.cleanPodPolicy",
        "'Running'"),
    Bad("bad-image-pull-policy", pytorch("imagePullPolicy: always  #!"), "spec.imagePullPolicy", "'IfNotPresent'"),
    Bad("bad-service-type", pytorch("ports: [{container: 80, serviceType: Ingress}]  #!"),
        "spec.ports[0].serviceType", "'NodePort'"),
    # -- counts ---------------------------------------------------------------------------------------
    Bad("zero-replicas", job(f"framework: pytorch\n{RUN}\nreplicas: 0  #!"), "spec.replicas",
        "greater than or equal to 1"),
    Bad("negative-replicas", job(f"framework: pytorch\n{RUN}\nreplicas: -2  #!"), "spec.replicas",
        "greater than or equal to 1"),
    Bad("text-replicas", job(f"framework: pytorch\n{RUN}\nreplicas: two  #!"), "spec.replicas", "integer",
        "a whole number"),
    Bad("zero-role-replicas", job(f"""
        framework: pytorch
        {RUN}
        roles:
          worker: {{replicas: 0}}  #!
        """), "spec.roles.worker.replicas", "greater than or equal to 1"),
    Bad("zero-procs-per-replica", pytorch("procsPerReplica: 0  #!"), "spec.procsPerReplica", "≥ 1 or auto"),
    Bad("negative-backoff-limit", pytorch("runPolicy: {backoffLimit: -1}  #!"), "spec.runPolicy.backoffLimit",
        "greater than or equal to 0"),
    Bad("zero-elastic-min", pytorch("elastic: {minReplicas: 0, maxReplicas: 2}  #!"), "spec.elastic.minReplicas",
        "greater than or equal to 1"),
    # -- quantities and resources ---------------------------------------------------------------------
    Bad("bad-quantity", pytorch("resources: {memory: lots}  #!"), "spec.resources.memory",
        "not a Kubernetes quantity"),
    Bad("negative-quantity", pytorch('resources: {cpu: "-1"}  #!'), "spec.resources.cpu", "must not be negative"),
    Bad("bad-raw-request", pytorch("requests: {cpu: abc}  #!"), "spec.requests.cpu", "not a Kubernetes quantity"),
    Bad("bad-extended-resource", pytorch("resources: {extendedResources: {example.com/fpga: many}}  #!"),
        'spec.resources.extendedResources."example.com/fpga"', "not a Kubernetes quantity"),
    Bad("cpu-limit-below-request", pytorch("resources: {cpu: 2, cpuLimit: 500m}  #!"), "spec.resources.cpuLimit",
        "below the request"),
    Bad("memory-limit-below-request", pytorch("resources: {memory: 2Gi, memoryLimit: 1Gi}  #!"),
        "spec.resources.memoryLimit", "below the request"),
    Bad("gpu-limit-below-gpu", pytorch("resources: {gpu: 2, gpuLimit: 1}  #!"), "spec.resources.gpuLimit",
        "below gpu"),
    Bad("fractional-gpu-without-sharing", pytorch("resources: {gpu: 0.5}  #!"), "spec.resources.gpuSharing",
        "fractional gpu"),
    Bad("gpu-memory-without-sharing", pytorch("resources: {gpuMemory: 4Gi}  #!"), "spec.resources.gpuSharing",
        "gpuMemory needs a GPU-sharing scheduler"),
    Bad("gpu-one-and-a-half", pytorch("resources: {gpu: 1.5}  #!"), "spec.resources.gpu", "whole number"),
    Bad("bad-mig-profile", pytorch("resources: {migProfile: 2g}  #!"), "spec.resources.migProfile",
        "not a MIG profile"),
    Bad("mig-with-fraction", pytorch("resources: {gpu: 0.5, gpuSharing: hami, migProfile: 1g.5gb}  #!"),
        "spec.resources.migProfile", "cannot be combined"),
    # Extended resources (a domain outside kubernetes.io) are whole numbers wherever they are written; a share
    # of a GPU is resources.gpu below 1 with gpuSharing, which the hint names.
    Bad("fractional-gpu-limit", pytorch("""
        limits:
          nvidia.com/gpu: 0.5  #!
        """), 'spec.limits."nvidia.com/gpu"', "must be a whole number", "resources.gpuSharing"),
    Bad("fractional-mig-request-in-role", job(f"""
        framework: pytorch
        {RUN}
        roles:
          worker:
            replicas: 2
            requests: {{nvidia.com/mig-1g.5gb: "1.5"}}  #!
        """), 'spec.roles.worker.requests."nvidia.com/mig-1g.5gb"', "is an extended resource",
        "resources.gpu below 1"),
    Bad("fractional-extended-resource", pytorch("resources: {extendedResources: {example.com/fpga: 500m}}  #!"),
        'spec.resources.extendedResources."example.com/fpga"', "must be a whole number", "whole units"),
    Bad("hugepages-not-whole-pages", pytorch("limits: {hugepages-2Mi: 3Mi, memory: 1Gi}  #!"),
        "spec.limits.hugepages-2Mi", "whole number of 2Mi pages", "multiple of 2Mi"),
    Bad("hugepages-bad-size", pytorch("requests: {hugepages-2MB: 4Mi}  #!"), "spec.requests.hugepages-2MB",
        "is not a huge page size", "hugepages-2Mi"),
    # -- roles ----------------------------------------------------------------------------------------
    Bad("role-not-in-framework", job(f"""
        framework: pytorch
        {RUN}
        roles:
          worker: {{replicas: 2}}
          ps: {{replicas: 1}}  #!
        """), "spec.roles.ps", "is not a pytorch role", "valid roles: master, worker"),
    Bad("tf-chief-twice", job(f"""
        framework: tensorflow
        {RUN}
        roles:
          chief: {{replicas: 2}}  #!
          worker: {{replicas: 2}}
        """), "spec.roles.chief.replicas", "exactly 1 replica"),
    Bad("mpi-launcher-twice", job(f"""
        framework: mpi
        {RUN}
        roles:
          launcher: {{replicas: 2}}  #!
          worker: {{replicas: 2}}
        """), "spec.roles.launcher.replicas", "exactly 1 replica"),
    Bad("pytorch-master-twice", job(f"""
        framework: pytorch
        {RUN}
        roles:
          master: {{replicas: 2}}  #!
        """), "spec.roles.master.replicas", "exactly 1 replica"),
    Bad("replicas-and-roles", job(f"""
        framework: pytorch
        {RUN}
        replicas: 2  #!
        roles:
          worker: {{replicas: 2}}
        """), "spec.replicas", "not both"),
    Bad("role-name-not-dns", job(f"""
        framework: generic
        {RUN}
        roles:
          Server: {{replicas: 1}}  #!
        """), "spec.roles.Server", "lowercase DNS labels"),
    Bad("tf-ps-alone", job(f"""
        framework: tensorflow
        {RUN}
        roles:
          ps: {{replicas: 1}}  #!
        """), "spec.roles.ps", "need a worker or chief"),
    Bad("mpi-without-worker", job(f"""
        framework: mpi
        {RUN}
        roles: {{launcher: {{replicas: 1}}}}  #!
        """), "spec.roles", "needs a worker role", "roles: {worker:"),
    Bad("no-roles", job(f"framework: pytorch\n{RUN}\nroles: {{}}  #!"), "spec.roles", "at least one role"),
    # -- run --------------------------------------------------------------------------------------------
    Bad("no-run", job("framework: pytorch  #!\nreplicas: 2"), "spec.run", "nothing to run", "run: {python:"),
    Bad("role-without-run", job("""
        framework: pytorch
        roles:
          worker: {replicas: 2}  #!
        """), "spec.roles.worker.run", "nothing to run"),
    Bad("two-run-kinds", job("framework: pytorch\nrun: {python: [a.py], module: [b]}  #!\nreplicas: 2"), "spec.run",
        "exactly one of python, module, exec, customCommand, entrypoint (got python, module)"),
    Bad("empty-run-list", job("framework: pytorch\nrun: {python: []}  #!\nreplicas: 2"), "spec.run.python",
        "at least the program"),
    Bad("empty-custom-command", job("framework: pytorch\nrun: {customCommand: ''}  #!\nreplicas: 2"),
        "spec.run.customCommand", "must not be empty"),
    Bad("boolean-argument", job("framework: pytorch\nrun: {python: [train.py, --flag, true]}  #!\nreplicas: 2"),
        "spec.run.python[2]", "must be a string or a number"),
    Bad("run-as-string", job("framework: pytorch\nrun: {python: train.py}  #!\nreplicas: 2"), "spec.run.python",
        "list"),
    # -- names and labels -----------------------------------------------------------------------------
    Bad("uppercase-name", job(f"framework: pytorch\n{RUN}", metadata="{name: Demo}  #!"), "metadata.name",
        "DNS-1123 label", "lowercase letters"),
    Bad("long-name", job(f"framework: pytorch\n{RUN}", metadata="{name: " + "a" * 64 + "}  #!"), "metadata.name",
        "DNS-1123 label", "≤ 63"),
    Bad("no-name", job(f"framework: pytorch\n{RUN}", metadata="{namespace: ml}  #!"), "metadata.name",
        "exactly one of name and namePrefix"),
    Bad("bad-namespace", job(f"framework: pytorch\n{RUN}", metadata="{name: demo, namespace: ML_Team}  #!"),
        "metadata.namespace", "DNS-1123 label"),
    Bad("bad-label-key", job(f"framework: pytorch\n{RUN}", metadata="{name: demo, labels: {Example.com/x: a}}  #!"),
        'metadata.labels."Example.com/x"', "not a valid label key", "[prefix/]name"),
    Bad("bad-label-value", job(f"framework: pytorch\n{RUN}", metadata="{name: demo, labels: {team: a b}}  #!"),
        "metadata.labels.team", "not a valid label value", "≤ 63"),
    Bad("long-pod-label-value", pytorch("labels: {tier: " + "x" * 64 + "}  #!"), "spec.labels.tier",
        "not a valid label value"),
    Bad("bad-annotation-key", job(f"framework: pytorch\n{RUN}", metadata="{name: demo, annotations: {a b: c}}  #!"),
        'metadata.annotations."a b"', "not a valid annotation key"),
    Bad("label-value-not-text", job(f"framework: pytorch\n{RUN}", metadata="{name: demo, labels: {tier: 1}}  #!"),
        "metadata.labels.tier", "string"),
    Bad("node-selector-not-text", pytorch("nodeSelector: {zone: 3}  #!"), "spec.nodeSelector.zone", "string"),
    # -- ports and security ---------------------------------------------------------------------------
    Bad("port-out-of-range", pytorch("ports: [{container: 70000}]  #!"), "spec.ports[0].container",
        "less than or equal to 65535"),
    Bad("port-name", pytorch("ports: [{container: 80, name: Web_Port}]  #!"), "spec.ports[0].name", "≤ 15"),
    Bad("capability-with-cap-prefix", pytorch("security: {capabilities: [CAP_NET_ADMIN]}  #!"),
        "spec.security.capabilities", "write 'NET_ADMIN' rather than 'CAP_NET_ADMIN'"),
    Bad("capability-lowercase", pytorch("security: {capabilities: [net_admin]}  #!"), "spec.security.capabilities",
        "not a capability name"),
    Bad("seccomp-localhost-without-profile", pytorch("security: {seccompProfileType: Localhost}  #!"),
        "spec.security.seccompLocalhostProfile", "required with seccompProfileType Localhost"),
    Bad("run-as-user-and-uid", pytorch("security: {runAsUser: true, runAsUid: 1000}  #!"),
        "spec.security.runAsUid", "conflicts with runAsUser"),
    # -- elastic ----------------------------------------------------------------------------------------
    Bad("elastic-max-below-min", pytorch("elastic: {minReplicas: 3, maxReplicas: 2}  #!"),
        "spec.elastic.maxReplicas", "≥ minReplicas (3)"),
    Bad("elastic-expected-outside", pytorch("elastic: {minReplicas: 1, maxReplicas: 2, expectedReplicas: 5}  #!"),
        "spec.elastic.expectedReplicas", "[1, 2]"),
    Bad("replicas-outside-elastic", job(f"""
        framework: pytorch
        {RUN}
        replicas: 2  #!
        elastic: {{minReplicas: 3, maxReplicas: 4}}
        """), "spec.replicas", "must lie in elastic [3, 4]"),
    Bad("role-replicas-outside-elastic", job(f"""
        framework: pytorch
        {RUN}
        roles:
          worker: {{replicas: 8}}  #!
        elastic: {{minReplicas: 2, maxReplicas: 4}}
        """), "spec.roles.worker.replicas", "must lie in elastic [2, 4]"),
    Bad("elastic-tensorflow", job(f"""
        framework: tensorflow
        {RUN}
        replicas: 2
        elastic: {{minReplicas: 1, maxReplicas: 2}}  #!
        """), "spec.elastic", "tensorflow jobs cannot be elastic", "pytorch, deepspeed"),
    Bad("elastic-expected-not-the-replicas", job(f"""
        framework: pytorch
        {RUN}
        replicas: 3
        elastic: {{minReplicas: 2, maxReplicas: 4, expectedReplicas: 2}}  #!
        """), "spec.elastic.expectedReplicas", "differs from the worker role's 3 replicas", "set them equal"),
    Bad("elastic-without-bounds", pytorch("elastic: {maxReplicas: 4}  #!"), "spec.elastic.minReplicas",
        "is required for elastic training", "enabled: false"),
    # -- policies ---------------------------------------------------------------------------------------
    Bad("exit-codes-without-policy", pytorch("exitCodes: {retryable: [3]}  #!"), "spec.exitCodes",
        "only applies with restartPolicy: ExitCode"),
    Bad("never-with-backoff-limit", pytorch("""
        restartPolicy: Never  #!
        runPolicy: {backoffLimit: 2}
        """), "spec.restartPolicy", "Never restarts nothing, yet runPolicy.backoffLimit allows 2 restarts",
        "a backoffLimit alone means OnFailure"),
    Bad("bad-role-restart-policy", job(f"""
        framework: deepspeed
        {RUN}
        roles:
          worker: {{replicas: 2, restartPolicy: Sometimes}}  #!
        """), "spec.roles.worker.restartPolicy", "'ExitCode'"),
    Bad("overlapping-exit-codes", pytorch("""
        restartPolicy: ExitCode
        exitCodes: {retryable: [3, 4], permanent: [4]}  #!
        """), "spec.exitCodes.permanent", "[4] are also listed as retryable"),
    Bad("exit-code-out-of-range", pytorch("""
        restartPolicy: ExitCode
        exitCodes: {retryable: [300]}  #!
        """), "spec.exitCodes.retryable[0]", "1–255"),
    Bad("min-available-above-replicas", pytorch("scheduling: {minAvailable: 5}  #!"),
        "spec.scheduling.minAvailable", "exceeds the job's 2 replicas"),
    Bad("suspend-in-debug", pytorch("runMode: Debug\nrunPolicy: {suspend: true}  #!"), "spec.runPolicy.suspend",
        "conflicts with runMode: Debug"),
    Bad("node-pool-twice", pytorch("scheduling: {nodePools: [a, a]}  #!"), "spec.scheduling.nodePools", "twice"),
    # -- header -------------------------------------------------------------------------------------------
    Bad("wrong-api-version", job(f"framework: pytorch\n{RUN}", header="apiVersion: kubeflow.org/v1  #!\n"),
        "apiVersion", "must be kubetrain.dev/v1alpha1"),
    Bad("wrong-kind", job(f"framework: pytorch\n{RUN}",
                          header="apiVersion: kubetrain.dev/v1alpha1\nkind: PyTorchJob  #!\n"),
        "kind", "must be TrainJob"),
    Bad("spec-not-a-mapping", HEADER + "metadata: {name: demo}\nspec: [pytorch]  #!\n", "spec", "dictionary"),
    Bad("no-metadata", "apiVersion: kubetrain.dev/v1alpha1  #!\nkind: TrainJob\nspec: {run: {python: [a.py]}}\n",
        "metadata", "is required"),
    # -- mounts -------------------------------------------------------------------------------------------
    Bad("mount-string-without-type", pytorch("mounts: [src=/data,dst=/data]  #!"), "spec.mounts[0]", "has no type",
        "type="),
    Bad("mount-string-unknown-type", pytorch("mounts: ['type=tmpfs,dst=/scratch']  #!"), "spec.mounts[0].type",
        "unknown mount type 'tmpfs'", "bind, volume, device"),
    Bad("mount-string-relative-dst", pytorch("mounts: ['type=bind,src=/data,dst=data']  #!"), "spec.mounts[0].dst",
        "absolute path"),
    Bad("mount-string-device-outside-dev", pytorch("mounts: ['type=device,src=/tmp/fuse']  #!"),
        "spec.mounts[0].src", "under /dev"),
    Bad("mount-string-key-without-value", pytorch("mounts: ['type=bind,src,dst=/data']  #!"), "spec.mounts[0]",
        "'src' needs a value", "src=..."),
    Bad("mount-object-missing-field", pytorch("mounts: [{type: nfs, path: /export, dst: /shared}]  #!"),
        "spec.mounts[0].server", "is required"),
    Bad("mount-object-relative-dst", pytorch("mounts: [{type: emptyDir, dst: scratch}]  #!"), "spec.mounts[0].dst",
        "absolute path"),
    Bad("mount-object-bad-perm", pytorch("mounts: [{type: device, src: /dev/fuse, perm: rwx}]  #!"),
        "spec.mounts[0].perm", "r, w, m"),
    # -- env ----------------------------------------------------------------------------------------------
    Bad("env-map-bad-name", pytorch("env: {1BAD: x}  #!"), "spec.env[0].name",
        "not a valid environment variable name", "not starting with a digit"),
    Bad("env-list-bad-name", pytorch("""
        env:
          - {name: OK, value: x}
          - {name: NOT OK, value: y}  #!
        """), "spec.env[1].name", "not a valid environment variable name"),
    Bad("env-value-not-text", pytorch("""
        env:
          - {name: A, value: [1, 2]}  #!
        """), "spec.env[0].value", "must be of type string"),
    Bad("toleration-seconds-not-int", pytorch("tolerations: [{key: a, tolerationSeconds: soon}]  #!"),
        "spec.tolerations[0].tolerationSeconds", "must be of type integer"),
    Bad("tolerations-not-a-list", pytorch("tolerations: {key: a}  #!"), "spec.tolerations", "must be a list"),
    # -- YAML itself ----------------------------------------------------------------------------------------
    Bad("duplicate-key", job(f"framework: pytorch\n{RUN}\nreplicas: 2\nreplicas: 3  #!"), "spec.replicas",
        "is given twice"),
    Bad("yaml-syntax-error", job(f"framework: pytorch\n{RUN}\nimage: a: b  #!"), "<root>",
        "not valid YAML: mapping values are not allowed here"),
    Bad("yaml-tab-indent", job(f"framework: pytorch\n{RUN}") + "\treplicas: 2  #!\n", "<root>",
        "not valid YAML: found character '\\t'"),
    Bad("yaml-unknown-tag", pytorch("image: !python/object:os.system ls  #!"), "spec.image", "cannot read value"),
    Bad("yaml-octal-as-text", pytorch("mounts: [{type: secret, name: s, dst: /s, defaultMode: 0o999}]  #!"),
        "spec.mounts[0].defaultMode", "integer"),
    # -- reported by the spec layer (currently escaping or misplaced; see each message) ---------------------
    Bad("env-null-item", pytorch("env: [null]  #!"), "spec.env[0]", "V1EnvVar"),
    Bad("env-missing-name", pytorch("env: [{value: x}]  #!"), "spec.env[0].name", "is required"),
    Bad("env-field-ref-without-path", pytorch("env: [{name: IP, valueFrom: {fieldRef: {}}}]  #!"),
        "spec.env[0].valueFrom.fieldRef.fieldPath", "is required"),
    Bad("toleration-null-item", pytorch("tolerations: [null]  #!"), "spec.tolerations[0]", "V1Toleration"),
    Bad("env-from-null-item", pytorch("envFrom: [~]  #!"), "spec.envFrom[0]", "V1EnvFromSource"),
    Bad("affinity-missing-required", pytorch("""
        affinity:
          nodeAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              nodeSelectorTerms:
                - matchExpressions: [{operator: In, values: [a]}]  #!
        """),
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
        ".matchExpressions[0].key", "is required"),
    Bad("mount-string-missing-field", pytorch("mounts: ['type=bind,dst=/data']  #!"), "spec.mounts[0].src",
        "is required"),
    Bad("mount-object-unknown-type", pytorch("mounts: [{type: hostPath, src: /a, dst: /b}]  #!"),
        "spec.mounts[0].type", "hostPath"),
    Bad("infinite-gpu", pytorch("resources: {gpu: .inf}  #!"), "spec.resources.gpu", "gpu"),
    Bad("nan-cpu", pytorch("resources: {cpu: .nan}  #!"), "spec.resources.cpu", "quantity"),
    Bad("infinite-cpu", pytorch("resources: {cpu: .inf}  #!"), "spec.resources.cpu", "quantity"),
    Bad("infinite-memory-text", pytorch("resources: {memory: inf}  #!"), "spec.resources.memory", "quantity"),
]


def marked_line(text: str) -> int:
    lines = [i for i, line in enumerate(text.splitlines(), start=1) if MARK in line]
    assert len(lines) == 1, f"a case marks exactly one line, not {lines}"
    return lines[0]


def load_bad(text: str, tmp_path: Path) -> tuple[SpecError, Path]:
    path = tmp_path / "job.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_file(path)
    return info.value, path


def error_at(exc: SpecError, path: str) -> FieldError:
    found = [e for e in exc.errors if format_path(e.path) == path]
    assert found, f"no error at {path}; got: {exc.paths}\n{exc}"
    return found[0]


def test_at_least_forty_distinct_cases() -> None:
    assert len(CASES) >= 40
    assert len({c.id for c in CASES}) == len(CASES)
    assert len({c.text for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Bad, tmp_path: Path) -> None:
    exc, file = load_bad(case.text, tmp_path)
    line = marked_line(case.text)
    error = error_at(exc, case.path)

    assert case.path in exc.paths
    assert case.message in error.message, str(error)
    if case.hint is not None:
        assert error.hint is not None and case.hint in error.hint, str(error)
    assert error.file == str(file)
    assert error.line == line, f"expected line {line}: {error}"
    # What the user reads: "file:line: field.path: message", and nothing of Python's internals.
    shown = str(exc)
    assert f"{file}:{line}: {case.path}: " in shown
    assert "Traceback" not in shown
    assert "pydantic" not in shown and "errors.pydantic.dev" not in shown
    assert "validation error for" not in shown
    assert all(e.message for e in exc.errors)


def test_unknown_field_lists_known_fields_when_nothing_is_close(tmp_path: Path) -> None:
    exc, _ = load_bad(pytorch("resources: {zzzzzz: 1}  #!"), tmp_path)
    error = error_at(exc, "spec.resources.zzzzzz")
    assert error.hint is not None and error.hint.startswith("known fields: ")
    assert "cpu" in error.hint and "migProfile" in error.hint


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    text = job(f"""
        framework: pytorch
        {RUN}
        replicas: 2
        image: 5
        resources: {{cpu: lots, memory: 1Gi, memoryLimit: 1Gi}}
        restartPolicy: Sometimes
        """, metadata="{name: Demo}")
    exc, _ = load_bad(text, tmp_path)
    assert set(exc.paths) >= {"spec.image", "spec.resources.cpu", "spec.restartPolicy", "metadata.name"}
    assert str(exc).startswith(f"{len(exc.errors)} problems:")
    assert [e.line for e in exc.errors] == sorted(e.line or 0 for e in exc.errors)


def test_error_on_a_block_mapping_points_at_its_key(tmp_path: Path) -> None:
    """An error about a whole mapping (here `run`) is located at the line of its key, not at the first
    line inside it."""
    text = job("""
        framework: pytorch
        replicas: 2
        run:  #!
          python: [a.py]
          module: [b]
        """)
    exc, _ = load_bad(text, tmp_path)
    assert error_at(exc, "spec.run").line == marked_line(text)


def test_error_message_shows_the_value_once_and_as_written(tmp_path: Path) -> None:
    """`(got …)` appears once per problem and shows what the file says (`True`, not `1`)."""
    exc, _ = load_bad(pytorch("resources: {cpu: true}  #!"), tmp_path)
    shown = str(error_at(exc, "spec.resources.cpu"))
    assert shown.count("(got") == 1, shown
    assert "True" in shown and "(got 1)" not in shown


# -- --set overrides and templates: bad inputs outside the document ------------------------------------


MINIMAL = job(f"framework: pytorch\n{RUN}\nreplicas: 2")


@pytest.mark.parametrize(
    ("override", "path", "message", "in_file"),
    [
        ("spec.replicas", "<root>", "needs the form path=value", False),
        ("spec..replicas=3", "<root>", "cannot read the path 'spec..replicas'", False),
        ('spec."unclosed=3', "<root>", "cannot read the path", False),
        ("=3", "<root>", "empty path", False),
        ("spec.framework.name=x", "spec.framework", "is not a mapping", False),
        ("spec.run.python[7]=x", "spec.run.python[7]", "no such list item", False),
        ("metadata[0]=x", "metadata[0]", "no such list item", False),
        ("spec.replicaz=3", "spec.replicaz", "unknown field", False),
        ("spec.replicas=-3", "spec.replicas", "greater than or equal to 1", False),
        # The override is fine; the document it makes is not: the error points at the file.
        ("spec.roles.worker.replicas=3", "spec.replicas", "not both", True),
    ],
)
def test_bad_override(override: str, path: str, message: str, in_file: bool, tmp_path: Path) -> None:
    file = tmp_path / "job.yaml"
    file.write_text(MINIMAL, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_file(file, overrides=[override])
    error = error_at(info.value, path)
    assert message in error.message
    assert error.file == (str(file) if in_file else f"--set {override}")
    assert "Traceback" not in str(info.value)


def test_override_error_names_the_override(tmp_path: Path) -> None:
    file = tmp_path / "job.yaml"
    file.write_text(MINIMAL, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_file(file, overrides=["spec.replicas=2", "spec.resources.cpu=lots"])
    assert str(info.value).startswith("--set spec.resources.cpu=lots: spec.resources.cpu: ")


def test_base_template_not_found(tmp_path: Path) -> None:
    text = job(f"base: team-defaults  #!\nframework: pytorch\n{RUN}\nreplicas: 2")
    exc, file = load_bad(text, tmp_path)
    error = error_at(exc, "spec.base")
    assert error.message == "template 'team-defaults' not found"
    assert error.hint is not None and "KUBETRAIN_TEMPLATES" in error.hint and "templates" in error.hint
    assert (error.file, error.line) == (str(file), marked_line(text))


def test_base_template_file_not_found(tmp_path: Path) -> None:
    exc, _ = load_bad(job(f"base: missing/base.yaml  #!\nframework: pytorch\n{RUN}\nreplicas: 2"), tmp_path)
    assert error_at(exc, "spec.base").message == "template 'missing/base.yaml' not found"


@pytest.mark.parametrize("value", ["''", "5", "[a, b]"])
def test_base_must_be_a_name(value: str, tmp_path: Path) -> None:
    exc, _ = load_bad(job(f"base: {value}  #!\nframework: pytorch\n{RUN}\nreplicas: 2"), tmp_path)
    assert "must name a template" in error_at(exc, "spec.base").message


def test_template_loop(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("spec: {base: b.yaml}\n", encoding="utf-8")
    (tmp_path / "b.yaml").write_text("spec: {base: a.yaml}\n", encoding="utf-8")
    text = job(f"base: a.yaml\nframework: pytorch\n{RUN}\nreplicas: 2  #!")
    exc, _ = load_bad(text, tmp_path)
    error = error_at(exc, "spec.base")
    assert "templates inherit in a loop" in error.message
    assert "a.yaml" in error.message and "b.yaml" in error.message


def test_template_including_itself(tmp_path: Path) -> None:
    (tmp_path / "self.yaml").write_text("spec: {base: self.yaml}\n", encoding="utf-8")
    exc, _ = load_bad(job(f"base: self.yaml  #!\nframework: pytorch\n{RUN}\nreplicas: 2"), tmp_path)
    assert "loop" in error_at(exc, "spec.base").message


def test_template_that_is_not_a_mapping(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text("- a\n- b\n", encoding="utf-8")
    exc, _ = load_bad(job(f"base: base.yaml  #!\nframework: pytorch\n{RUN}\nreplicas: 2"), tmp_path)
    assert "a template must be one mapping document" in str(exc)
    assert exc.errors[0].file == str(tmp_path / "base.yaml")


def test_error_in_template_points_into_the_template(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text("spec:\n  restartPolicy: Sometimes\n", encoding="utf-8")
    exc, _ = load_bad(job(f"base: base.yaml  #!\nframework: pytorch\n{RUN}\nreplicas: 2"), tmp_path)
    error = error_at(exc, "spec.restartPolicy")
    assert (error.file, error.line) == (str(tmp_path / "base.yaml"), 2)


def test_yaml_error_in_template(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text("spec:\n  image: a: b\n", encoding="utf-8")
    exc, _ = load_bad(job(f"base: base.yaml  #!\nframework: pytorch\n{RUN}\nreplicas: 2"), tmp_path)
    assert exc.errors[0].file == str(tmp_path / "base.yaml")
    assert exc.errors[0].line == 2


def test_template_that_is_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_bytes(b"spec:\n  image: caf\xe9\n")
    exc, _ = load_bad(job(f"base: base.yaml  #!\nframework: pytorch\n{RUN}\nreplicas: 2"), tmp_path)
    assert exc.errors[0].file == str(tmp_path / "base.yaml")
    assert "UTF-8" in str(exc) or "utf-8" in str(exc)


def test_base_name_too_long_for_the_file_system(tmp_path: Path) -> None:
    exc, _ = load_bad(job(f"base: {'t' * 300}  #!\nframework: pytorch\n{RUN}\nreplicas: 2"), tmp_path)
    assert "not found" in error_at(exc, "spec.base").message


def test_error_in_a_dict_is_not_blamed_on_its_template(tmp_path: Path) -> None:
    """from_dict data has no file: an error in it must not point into the template it inherits."""
    (tmp_path / "base.yaml").write_text("spec:\n  framework: pytorch\n  image: base:1\n", encoding="utf-8")
    data = {"metadata": {"name": "demo"}, "spec": {"base": "base.yaml", "run": {"python": ["a.py"]}, "replicas": 0}}
    with pytest.raises(SpecError) as info:
        from_dict(data, base_dir=tmp_path)
    error = error_at(info.value, "spec.replicas")
    assert error.file is None and error.line is None


# -- whole files ---------------------------------------------------------------------------------------------


def test_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_bytes(MINIMAL.replace("demo", "d\xe9mo").encode("latin-1"))
    with pytest.raises(SpecError) as info:
        load_file(path)
    assert info.value.errors[0].file == str(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        load_file(tmp_path / "nope.yaml")
    assert "cannot read file" in str(info.value)
    assert info.value.errors[0].file == str(tmp_path / "nope.yaml")


@pytest.mark.parametrize(
    ("text", "message"),
    [("", "file holds no document"), ("# only a comment\n", "file holds no document"),
     ("just text\n", "must be a mapping"), ("- a\n- b\n", "must be a mapping")],
)
def test_file_that_is_not_a_job(text: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_file(path)
    assert message in str(info.value)


def test_from_dict_reports_paths_without_file() -> None:
    with pytest.raises(SpecError) as info:
        from_dict({"metadata": {"name": "demo"}, "spec": {"run": {"python": ["a.py"]}, "replicas": 0}})
    error = info.value.errors[0]
    assert info.value.paths == ["spec.replicas"]
    assert error.file is None and error.line is None
    assert str(info.value) == "spec.replicas: must be greater than or equal to 1 (got 0)"
