"""What the cluster serves: which flavors can run there, and which one to pick when none is named.

One request (``/apis``, the APIGroupList) tells which API groups and versions are served; a flavor needs
its group at the version kubetrain renders (``jobset.x-k8s.io/v1alpha2``, ``batch.volcano.sh/v1alpha1``,
``kubeflow.org/v1``). For ``kubeflow`` the kind matters too (a cluster may serve PyTorchJob but not
JAXJob), which takes one more request (``/apis/kubeflow.org/v1``), made only for that flavor.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .client import KUEUE_GROUP, Kube, KubernetesError

#: flavor → (API group, version rendered, what to install)
FLAVOR_APIS: dict[str, tuple[str, str, str]] = {
    "jobset": ("jobset.x-k8s.io", "v1alpha2", "the JobSet controller (https://jobset.sigs.k8s.io)"),
    "volcano": ("batch.volcano.sh", "v1alpha1", "Volcano (https://volcano.sh)"),
    "kubeflow": ("kubeflow.org", "v1", "the Kubeflow training operator v1 (https://github.com/kubeflow/trainer)"),
}

#: Preference when no flavor is named: gang restart and one object per job where the cluster has it.
AUTO_ORDER = ("jobset", "job")


class FlavorUnavailable(KubernetesError):
    """The chosen flavor's custom resources are not served by this cluster."""

    exit_code = 2


@dataclass
class Capabilities:
    """API groups → served versions (and each group's preferred version)."""

    groups: dict[str, list[str]] = field(default_factory=dict)
    preferred: dict[str, str] = field(default_factory=dict)

    def serves(self, group: str, version: str | None = None) -> bool:
        versions = self.groups.get(group)
        if versions is None:
            return False
        return version is None or version in versions

    @property
    def jobset(self) -> bool:
        return self.serves(*FLAVOR_APIS["jobset"][:2])

    @property
    def volcano(self) -> bool:
        return self.serves(*FLAVOR_APIS["volcano"][:2])

    @property
    def kubeflow(self) -> bool:
        return self.serves(*FLAVOR_APIS["kubeflow"][:2])

    @property
    def kueue(self) -> bool:
        return KUEUE_GROUP in self.groups

    @property
    def kueue_version(self) -> str | None:
        return self.preferred.get(KUEUE_GROUP)

    def flavors(self) -> list[str]:
        """Flavors whose API group this cluster serves (``job`` always)."""
        out = ["job"]
        out += [f for f, (g, v, _) in FLAVOR_APIS.items() if self.serves(g, v)]
        return out

    def missing(self, flavor: str) -> str | None:
        """Why ``flavor`` cannot run here, or None."""
        if flavor == "job":
            return None
        group, version, what = FLAVOR_APIS[flavor]
        if self.serves(group, version):
            return None
        served = self.groups.get(group)
        if served:
            return (f"the {flavor} flavor needs {group}/{version}, but this cluster serves only "
                    f"{', '.join(group + '/' + v for v in served)}: upgrade {what}")
        return f"the {flavor} flavor needs {what}: this cluster does not serve the {group} API group"

    def pick(self, preferred: tuple[str, ...] = AUTO_ORDER) -> str:
        for flavor in preferred:
            if self.missing(flavor) is None:
                return flavor
        return "job"

    def summary(self) -> dict[str, object]:
        return {"flavors": self.flavors(), "kueue": self.kueue_version}


def detect(kube: Kube) -> Capabilities:
    """One request: ``/apis``."""
    data = kube.api_groups()
    caps = Capabilities()
    for group in data.get("groups") or []:
        name = group.get("name")
        if not name:
            continue
        caps.groups[name] = [v.get("version") for v in group.get("versions") or [] if v.get("version")]
        pref = (group.get("preferredVersion") or {}).get("version")
        if pref:
            caps.preferred[name] = pref
    return caps


def check_kind(kube: Kube, flavor: str, api_version: str, kind: str) -> None:
    """For flavors whose group serves several kinds (kubeflow): is ``kind`` among them?"""
    names = {r.get("kind") for r in kube.group_resources(api_version)}
    if kind not in names:
        what = FLAVOR_APIS.get(flavor, ("", "", "its operator"))[2]
        served = ", ".join(sorted(n for n in names if n)) or "nothing"
        raise FlavorUnavailable(f"the {flavor} flavor renders this job as a {kind} ({api_version}), which this "
                                f"cluster does not serve (it serves {served}): install {what}")


__all__ = ["AUTO_ORDER", "FLAVOR_APIS", "Capabilities", "FlavorUnavailable", "check_kind", "detect"]
