"""The resource types the fake API server serves: their group, version, kind, scope and the field selectors allowed."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ResourceType:
    group: str  # "" = core
    version: str
    plural: str
    kind: str
    namespaced: bool
    # fieldSelector labels the real server accepts besides metadata.name/namespace; None = any
    field_labels: frozenset[str] | None = frozenset()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def prefix(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    @property
    def key(self) -> str:
        """Unique name: ``pods``, ``policy/poddisruptionbudgets``, ``events.k8s.io/events``."""
        return f"{self.group}/{self.plural}" if self.group else self.plural

    @property
    def group_resource(self) -> str:
        """As the API server's messages name it: ``pods``, ``poddisruptionbudgets.policy``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


_POD_FIELDS = frozenset(
    {
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.podIPs",
        "status.nominatedNodeName",
    }
)

RESOURCE_TYPES: tuple[ResourceType, ...] = (
    ResourceType("", "v1", "nodes", "Node", False, frozenset({"spec.unschedulable"})),
    ResourceType("", "v1", "pods", "Pod", True, _POD_FIELDS),
    ResourceType("", "v1", "configmaps", "ConfigMap", True),
    ResourceType("", "v1", "namespaces", "Namespace", False, frozenset({"status.phase"})),
    ResourceType("", "v1", "persistentvolumes", "PersistentVolume", False),
    ResourceType("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True),
    ResourceType("", "v1", "events", "Event", True, None),
    ResourceType("events.k8s.io", "v1", "events", "Event", True, None),
    ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True),
    ResourceType("apps", "v1", "deployments", "Deployment", True),
    ResourceType("apps", "v1", "replicasets", "ReplicaSet", True),
    ResourceType("apps", "v1", "statefulsets", "StatefulSet", True),
    ResourceType("apps", "v1", "daemonsets", "DaemonSet", True),
    ResourceType("batch", "v1", "jobs", "Job", True),
    ResourceType("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False),
    ResourceType("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False),
    ResourceType("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True),
    ResourceType("admissionregistration.k8s.io", "v1", "mutatingadmissionpolicies", "MutatingAdmissionPolicy", False),
    ResourceType(
        "admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy", False
    ),
    ResourceType(
        "admissionregistration.k8s.io", "v1", "mutatingadmissionpolicybindings", "MutatingAdmissionPolicyBinding", False
    ),
)
BY_PATH = {(rt.prefix, rt.plural): rt for rt in RESOURCE_TYPES}  # (API prefix, plural) -> its type


def resource_type(spec: str, api_version: str | None = None) -> ResourceType:
    """``"Pod"``, ``"pods"``, ``"pod"`` or ``"events.k8s.io/events"``; ``api_version`` disambiguates a kind."""
    lowered = spec.lower()
    matches = [
        rt
        for rt in RESOURCE_TYPES
        if lowered in (rt.kind.lower(), rt.plural, rt.key, rt.kind.lower() + "s")
        and (api_version is None or rt.api_version == api_version)
    ]
    if not matches and api_version is not None:
        matches = [rt for rt in RESOURCE_TYPES if lowered in (rt.kind.lower(), rt.plural)]
    if not matches:
        raise KeyError(f"the fake API server has no resource type {spec!r}")
    return matches[0]  # core first for Event
