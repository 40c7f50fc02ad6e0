"""An MPI job's ssh key pair on the API emulator: made when the job is submitted, in a Secret that exists before
the root (whose controller starts the pods) and is owned by it, so deleting the job deletes it; never in what
`render` or a client dry run prints; valid for OpenSSH."""

# ruff: noqa: F811 - pytest fixtures are imported from tests.support.cluster and named as parameters

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest

from kubetrain.backends.kubernetes.client.errors import ApiError
from kubetrain.backends.kubernetes.flavors import FlavorUnavailable
from kubetrain.backends.kubernetes.render import render_manifests, to_yaml
from kubetrain.backends.kubernetes.ssh_keys import KNOWN_HOSTS, PRIVATE_KEY, PUBLIC_KEY, key_pair, public_key
from kubetrain.backends.kubernetes.submit import SubmitError
from kubetrain.jobspec import from_dict
from tests.support.cluster import Cluster, emulated, job_doc  # noqa: F401
from tests.support.manifest_schemas import TEST_CRD_DIR


def mpi_doc(name: str) -> dict[str, object]:
    return job_doc(name, framework="mpi")


@pytest.mark.parametrize("flavor", ["job", "jobset", "volcano"])
def test_the_secret_exists_before_the_root_and_is_owned_by_it(emulated: Cluster, flavor: str) -> None:
    emu = emulated.emu
    assert emu is not None
    sub = emulated.backend().submit(from_dict(mpi_doc("ring")), flavor=flavor)
    posts = [r.body["kind"] for r in emu.requests if r.method == "POST"]
    root_kind = sub.root["kind"]
    # What the pods mount comes first: no pod ever waits for a missing volume.
    assert posts.index("Secret") < posts.index(root_kind) and posts.index("ConfigMap") < posts.index(root_kind)
    secret = emu.get("secrets", "ring-ssh")
    root = sub.root["metadata"]
    assert secret["metadata"]["ownerReferences"] == [
        {"apiVersion": sub.root["apiVersion"], "kind": root_kind, "name": root["name"], "uid": root["uid"]}]
    assert secret["type"] == "kubernetes.io/ssh-auth"
    assert set(secret["data"]) == {PRIVATE_KEY, PUBLIC_KEY, KNOWN_HOSTS}
    # Deleting the job deletes its keys (the garbage collector follows the owner reference).
    resource = {"job": "jobs", "jobset": "jobsets", "volcano": "jobs.batch.volcano.sh"}[flavor]
    emu.delete(resource, root["name"], propagation="Background")
    assert [s["metadata"]["name"] for s in emu.objects("secrets")] == []


def test_every_job_gets_a_key_pair_of_its_own_that_openssh_reads(emulated: Cluster, tmp_path: Path) -> None:
    emu = emulated.emu
    assert emu is not None
    b = emulated.backend()
    b.submit(from_dict(mpi_doc("one")), flavor="job")
    b.submit(from_dict(mpi_doc("two")), flavor="job")
    data = [emu.get("secrets", f"{name}-ssh")["data"] for name in ("one", "two")]
    plain = [{key: base64.b64decode(value).decode() for key, value in d.items()} for d in data]
    assert plain[0][PUBLIC_KEY] != plain[1][PUBLIC_KEY]
    for keys in plain:
        key = tmp_path / "key"
        key.write_text(keys[PRIVATE_KEY])
        key.chmod(0o600)
        derived = subprocess.run(["ssh-keygen", "-y", "-f", str(key)], capture_output=True, text=True, check=True)
        assert derived.stdout.split()[:2] == keys[PUBLIC_KEY].split()[:2]
        assert keys[KNOWN_HOSTS] == "* " + keys[PUBLIC_KEY]


def test_no_private_key_in_what_render_or_a_client_dry_run_prints(emulated: Cluster) -> None:
    job = from_dict(mpi_doc("quiet"))
    rendered = render_manifests(job, "job")
    [secret] = [o for o in rendered.objects if o["kind"] == "Secret"]
    assert "data" not in secret and "stringData" not in secret
    assert "PRIVATE KEY" not in to_yaml(rendered.objects)
    assert any("Secret quiet-ssh: kubetrain makes the job's ssh key pair when it submits" in w
               for w in rendered.warnings)
    result = emulated.backend(flavor="job").run(job, dry_run="client")
    assert result.plan is not None
    printed = [o for o in result.plan["items"] if o["kind"] == "Secret"]
    assert "PRIVATE KEY" not in to_yaml(result.plan["items"]) and printed and "data" not in printed[0]


def test_a_server_dry_run_sends_keys_the_server_accepts_and_stores_nothing(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    report = emulated.backend().dry_run(from_dict(mpi_doc("check")), flavor="job")
    assert report.ok, report.format()
    assert emu.objects("secrets") == []


def test_the_api_server_refuses_the_rendered_secret_as_it_is(emulated: Cluster) -> None:
    """Applied without kubetrain (kubectl apply of the render), the keyless Secret is refused at once, as a real
    API server refuses a kubernetes.io/ssh-auth Secret without ssh-privatekey: no job that would fail later."""
    emu = emulated.emu
    assert emu is not None
    [secret] = [o for o in render_manifests(from_dict(mpi_doc("bare")), "job").objects if o["kind"] == "Secret"]
    b = emulated.backend()
    with pytest.raises(ApiError, match=r"data\[ssh-privatekey\]: Required value"):
        b.kube.create(b.kube.resource_for("v1", "Secret"), secret, "default")


def test_a_refused_root_takes_the_secret_back(emulated: Cluster) -> None:
    emu = emulated.emu
    assert emu is not None
    emu.fail_next("POST", path_regex="/jobs$", status=422, message="refused for the test")
    with pytest.raises(SubmitError, match="the objects already created were deleted again"):
        emulated.backend().submit(from_dict(mpi_doc("gone")), flavor="job")
    assert emu.objects("secrets") == [] and [c for c in emu.objects("configmaps")
                                             if c["metadata"]["name"].startswith("gone")] == []


def test_the_key_derivation_is_rfc_8032s() -> None:
    """RFC 8032, section 7.1, tests 1 to 3: secret key → public key."""
    vectors = {
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60":
            "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb":
            "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
        "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7":
            "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
    }
    for secret, public in vectors.items():
        assert public_key(bytes.fromhex(secret)).hex() == public
    assert "private=<hidden>" in repr(key_pair("t"))


@pytest.mark.kube_crds()
def test_a_cluster_with_the_mpi_operator_alone_runs_v2beta1_mpijobs(emulated: Cluster) -> None:
    """Only the MPI Operator's MPIJob is served: the kubeflow flavor submits an MPI job rendered for it (the
    operator makes the keys: no Secret of kubetrain's), and says what to set for one rendered as v1."""
    emu = emulated.emu
    assert emu is not None
    emu.add_crd_dir(TEST_CRD_DIR)
    emu.install_crds(["mpijobs.kubeflow.org.v2beta1"])
    b = emulated.backend()
    assert b.capabilities().flavors() == ["job", "kubeflow"]
    v2 = from_dict(job_doc("ring", framework="mpi", mpi={"mpiJobVersion": "v2beta1"}))
    sub = b.submit(v2, flavor="kubeflow")
    assert (sub.root["apiVersion"], sub.root["kind"]) == ("kubeflow.org/v2beta1", "MPIJob")
    assert emu.objects("secrets") == []
    with pytest.raises(FlavorUnavailable, match=r"as a MPIJob \(kubeflow\.org/v1\).*set mpi\.mpiJobVersion"):
        b.submit(from_dict(job_doc("ring-v1", framework="mpi")), flavor="kubeflow")


def test_validate_says_what_the_image_needs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`kubetrain validate --backend kubernetes`: an MPI job's workers run sshd, so the image needs OpenSSH, and
    as root they get three capabilities: both said before anything runs."""
    from kubetrain.cli.main import main

    path = tmp_path / "job.yaml"
    path.write_text("apiVersion: kubetrain.dev/v1alpha1\nkind: TrainJob\nmetadata: {name: ring}\nspec:\n"
                    "  framework: mpi\n  image: registry.example.com/mpi:1\n  replicas: 2\n"
                    "  run: {python: [ring.py]}\n", encoding="utf-8")
    assert main(["validate", str(path), "--backend", "kubernetes", "--flavor", "job"]) == 0
    out = capsys.readouterr()
    text = out.out + out.err
    assert "its pods run sshd" in text and "the image needs OpenSSH's server (/usr/sbin/sshd)" in text
    assert "capabilities SETUID, SETGID, SYS_CHROOT added to its pods" in text
