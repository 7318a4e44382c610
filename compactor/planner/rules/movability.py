"""Which bound pods a plan may move, and why not (one documented reason per rule).

The contract (issue [2/7]): a pod is never in a plan when any rule below holds.
Config may narrow it (namespaces, label selector, priority ceiling) but not loosen
rules 1-4. Which pending pods a plan may place is ``placeable.py``'s.

Imports: ``compactor.model``, ``compactor.settings``, history.
"""

from __future__ import annotations

import enum
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import msgspec

from compactor.model.scheduling import label_selector_matches, untolerated_taint
from compactor.model.types import Node, Pdb, Pod, Taint, Toleration
from compactor.model.volumes import VolumeIndex
from compactor.planner.rules.history import Restraints, workload_key
from compactor.settings.bundles import PlannerSettings
from compactor.settings.movable import SYSTEM_CRITICAL_PRIORITY

EVICT_ANNOTATION = "compactor.io/evict"
SAFE_TO_EVICT_ANNOTATION = "cluster-autoscaler.kubernetes.io/safe-to-evict"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
EXCLUDE_LABEL = "compactor.io/exclude"
# Other tools' "do not disrupt" marks, honoured as ours (value "true"): Karpenter's on pods and nodes, the descheduler's
# opt-out on pods (its descheduler.alpha.kubernetes.io/evict is an opt-in and says nothing here), and the cluster
# autoscaler's scale-down opt-out on nodes.
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
DESCHEDULER_OPT_OUT = "descheduler.alpha.kubernetes.io/prefer-no-eviction"
SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
POD_OPT_OUTS = (DO_NOT_DISRUPT, DESCHEDULER_OPT_OUT)
NODE_OPT_OUTS = (DO_NOT_DISRUPT, SCALE_DOWN_DISABLED)
CRITICAL_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})


class Unmovable(enum.StrEnum):
    """Why a pod stays where it is."""

    NOT_RUNNING = "not Running"
    TERMINATING = "being deleted"
    DAEMONSET = "owned by a DaemonSet"
    MIRROR = "static (mirror) pod"
    BARE = "no owner: evicting it would lose it"
    NO_CONTROLLER = "no controller owner: nothing would recreate it"
    NOT_RECREATED = "its controller does not recreate evicted pods (annotate compactor.io/evict=true to allow)"
    MULTIPLE_PDBS = "covered by more than one PodDisruptionBudget: the Eviction API refuses such pods"
    SYSTEM_CRITICAL = "system-critical priority"
    LOCAL_STORAGE = "uses emptyDir/hostPath storage (annotate compactor.io/evict=true to allow)"
    OPTED_OUT = "opted out (compactor.io/evict or safe-to-evict = false)"
    PDB_BLOCKS = "a PodDisruptionBudget allows no disruption"
    FEW_REPLICAS = "fewer ready replicas than movable.min_replicas and no PodDisruptionBudget: moving it is downtime"
    NODE_EXCLUDED = "its node is labelled compactor.io/exclude=true"
    DO_NOT_DISRUPT = (
        "annotated karpenter.sh/do-not-disrupt or descheduler.alpha.kubernetes.io/prefer-no-eviction = true"
    )
    NODE_DO_NOT_DISRUPT = (
        "its node is annotated karpenter.sh/do-not-disrupt or cluster-autoscaler.kubernetes.io/"
        "scale-down-disabled = true"
    )
    POD_AFFINITY = "required inter-pod (anti-)affinity, which the planner does not model"
    TOPOLOGY_SPREAD = "DoNotSchedule topology spread constraint, which the planner does not model"
    VOLUMES = "where its persistent volumes may attach is unknown (claim or volume not in the snapshot, unbound, or ephemeral)"
    SCHEDULER = "its schedulerName is not in movable.scheduler_names: where its replacement lands is not predicted"
    RESOURCE_CLAIMS = (
        "uses dynamic resource allocation (resourceClaims) of devices the planner does not map (another driver's "
        "or a kind dra.drivers does not describe, a claim not made or not read yet, admin access)"
    )
    SHARED_CLAIM = (
        "uses a named ResourceClaim (resourceClaimName), which other pods may share: its replacement would get the "
        "same devices on the same node"
    )
    PARTITIONED = (
        "holds a partitionable DRA device (shared counters): moved only to open room on its GPU for a pending pod "
        "(the partition step), where the allocator's first fit is predicted"
    )
    NAMESPACE = "namespace not selected by config"
    SELECTOR = "labels do not match movable.pod_selector"
    PRIORITY = "priority above movable.max_priority"
    TOO_YOUNG = "created or Ready too recently (movable.min_pod_age_seconds, movable.min_ready_seconds)"
    COOLDOWN = "its workload moved within disruption.workload_cooldown_minutes"
    NODE_COOLDOWN = "its node was drained or filled within disruption.node_cooldown_minutes"
    TOLERATES_FENCES = (
        "tolerates the compactor's fence taint: fences cannot keep its replacement off other nodes, and only the "
        "steering policy (manifests/steering) places it exactly"
    )
    NOT_PINNED_OWNER = (
        "its controller is not a ReplicaSet or StatefulSet, whose pods alone the steering policy pins (its creators): "
        "its replacement would land where kube-scheduler likes (steering.mechanism: holds can move it)"
    )
    OUTSIDE_POLICY = (
        "its namespace is outside the steering policy's binding (matchResources.namespaceSelector): its replacement "
        "would not be pinned"
    )


# What the run's steering cannot keep in place (``Steerability``): said with the mechanism, which another would not be.
STEERING_REASONS = frozenset({Unmovable.TOLERATES_FENCES, Unmovable.NOT_PINNED_OWNER, Unmovable.OUTSIDE_POLICY})


def is_system_critical(pod: Pod) -> bool:
    return pod.priority >= SYSTEM_CRITICAL_PRIORITY or pod.priority_class_name in CRITICAL_CLASSES


def _ownership_reason(pod: Pod, recreating: Sequence[str]) -> Unmovable | None:
    """Only a controller that recreates the pod makes an eviction a move; anything else would lose work."""
    controller = next((o for o in pod.owners if o.controller), None)
    if controller is None:
        return Unmovable.NO_CONTROLLER
    if controller.kind not in recreating and pod.annotations.get(EVICT_ANNOTATION) != "true":
        return Unmovable.NOT_RECREATED
    return None


def _contract_reason(
    pod: Pod, node: Node | None, pdbs: Sequence[Pdb], recreating: Sequence[str], *, pdb_now: bool = True
) -> Unmovable | None:
    """Rules 1-9 of the contract, in order. ``pdb_now``: also a PDB allowing no disruption now (the executor, which waits
    for the PodDisruptionBudget instead, asks without)."""
    if pod.deletion_timestamp:
        return Unmovable.TERMINATING
    if pod.phase != "Running":
        return Unmovable.NOT_RUNNING
    if any(o.kind == "DaemonSet" for o in pod.owners):
        return Unmovable.DAEMONSET
    if MIRROR_ANNOTATION in pod.annotations:
        return Unmovable.MIRROR
    if not pod.owners:
        return Unmovable.BARE
    if (ownership := _ownership_reason(pod, recreating)) is not None:
        return ownership
    if is_system_critical(pod):
        return Unmovable.SYSTEM_CRITICAL
    opt = pod.annotations.get(EVICT_ANNOTATION)
    if opt == "false" or pod.annotations.get(SAFE_TO_EVICT_ANNOTATION) == "false":
        return Unmovable.OPTED_OUT
    if any(pod.annotations.get(key) == "true" for key in POD_OPT_OUTS):
        return Unmovable.DO_NOT_DISRUPT
    if pod.local_storage and opt != "true":
        return Unmovable.LOCAL_STORAGE
    if len(pdbs) > 1:
        return Unmovable.MULTIPLE_PDBS
    if pdb_now and any(pdb.disruptions_allowed == 0 for pdb in pdbs):
        return Unmovable.PDB_BLOCKS
    if node is not None and node.labels.get(EXCLUDE_LABEL) == "true":
        return Unmovable.NODE_EXCLUDED
    if node is not None and any(node.annotations.get(key) == "true" for key in NODE_OPT_OUTS):
        return Unmovable.NODE_DO_NOT_DISRUPT
    return unmodelled_reason(pod)


def unmodelled_reason(pod: Pod) -> Unmovable | None:
    """A constraint of the pod's own that the planner does not model (asked of pending pods too: ``placeable.py``)."""
    if pod.affinity.has_required_pod_affinity or pod.affinity.has_required_pod_anti_affinity:
        return Unmovable.POD_AFFINITY
    if pod.has_hard_topology_spread:
        return Unmovable.TOPOLOGY_SPREAD
    if any(shared for _, _, shared in pod.resource_claims):
        return Unmovable.SHARED_CLAIM
    if pod.resource_claims and not pod.dra_gpus:
        return Unmovable.RESOURCE_CLAIMS
    return None


def config_reason(pod: Pod, settings: PlannerSettings, now: datetime | None = None) -> Unmovable | None:
    """Why the configured selection (schedulers, namespaces, pod_selector, max_priority) keeps ``pod`` in place, if it does."""
    if pod.scheduler_name not in settings.movable.scheduler_names:
        return Unmovable.SCHEDULER
    if settings.movable.namespaces and pod.namespace not in settings.movable.namespaces:
        return Unmovable.NAMESPACE
    if pod.namespace in settings.movable.exclude_namespaces:
        return Unmovable.NAMESPACE
    if any(pod.labels.get(k) != v for k, v in settings.movable.pod_selector.items()):
        return Unmovable.SELECTOR
    if settings.movable.max_priority is not None and pod.priority > settings.movable.max_priority:
        return Unmovable.PRIORITY
    if now is not None and _too_young(pod, settings, now):
        return Unmovable.TOO_YOUNG
    return None


def _too_young(pod: Pod, settings: PlannerSettings, now: datetime) -> bool:
    """Created, or Ready, less than the configured time before ``now`` (a time the object does not say passes)."""

    def within(since: datetime | None, seconds: float) -> bool:
        return seconds > 0 and since is not None and (now - since).total_seconds() < seconds

    return within(pod.created, settings.movable.min_pod_age_seconds) or within(
        pod.ready_since, settings.movable.min_ready_seconds
    )


def _replicas_reason(pdbs: Sequence[Pdb], ready_replicas: int | None, settings: PlannerSettings) -> Unmovable | None:
    """A PDB says how much disruption the owner accepts; without one, too few ready replicas means an outage."""
    if pdbs or ready_replicas is None or ready_replicas >= settings.movable.min_replicas:
        return None
    return Unmovable.FEW_REPLICAS


def tolerates_fence(tolerations: tuple[Toleration, ...], fence: Taint) -> bool:
    """True when no fence of the compactor's keeps this pod (and so its replacement) off a node: ``operator: Exists`` with
    no key, or a toleration of the fence's key."""
    return untolerated_taint(tolerations, (fence,)) is None


# The controllers whose pods the steering policy pins: kube-controller-manager's ReplicaSet and StatefulSet controllers
# are its creators (manifests/steering/policy.yaml); a Job's, a DaemonSet's or an operator's pods come unpinned.
PINNED_OWNER_KINDS = frozenset({"ReplicaSet", "StatefulSet"})


@dataclass(frozen=True)
class NamespaceScope:
    """The namespaces an admission binding covers, as its namespace selector says them by name."""

    only: frozenset[str] | None = None  # None: every namespace not in ``never``
    never: frozenset[str] = frozenset()

    def covers(self, namespace: str) -> bool:
        return namespace not in self.never and (self.only is None or namespace in self.only)


EVERY_NAMESPACE = NamespaceScope()


@dataclass(frozen=True)
class Steerability:
    """What a run's steering can keep where a plan puts a replacement; a pod it cannot is not moved.

    ``fence`` (holds, off): the taint the run fences nodes with; a pod tolerating it escapes every fence. ``policy``
    (the steering admission policy): the namespaces its binding covers; within them it pins only the pods of
    ``PINNED_OWNER_KINDS``."""

    fence: Taint | None = None
    policy: NamespaceScope | None = None

    def reason(self, pod: Pod) -> Unmovable | None:
        if self.fence is not None and tolerates_fence(pod.tolerations, self.fence):
            return Unmovable.TOLERATES_FENCES
        if self.policy is None:
            return None
        controller = next((o for o in pod.owners if o.controller), None)
        if controller is None or controller.kind not in PINNED_OWNER_KINDS:
            return Unmovable.NOT_PINNED_OWNER
        return None if self.policy.covers(pod.namespace) else Unmovable.OUTSIDE_POLICY


def _steering_reason(pod: Pod, steering: Steerability | None) -> Unmovable | None:
    """``steering``: what the run's steering can keep in place (None: nothing asked of it)."""
    return steering.reason(pod) if steering is not None else None


def why_unmovable(  # noqa: PLR0913
    pod: Pod,
    node: Node | None,
    pdbs: Sequence[Pdb],
    settings: PlannerSettings,
    volumes: VolumeIndex | None = None,
    *,
    ready_replicas: int | None = None,
    steering: Steerability | None = None,
    now: datetime | None = None,
    restraints: Restraints | None = None,
) -> Unmovable | None:
    """The first rule that keeps ``pod`` in place, or None when a plan may move it. ``ready_replicas``: of its controller
    (None: not counted); ``steering``: see ``_steering_reason``."""
    reason = (
        _contract_reason(pod, node, pdbs, settings.movable.recreating_controllers)
        or config_reason(pod, settings, now)
        or _replicas_reason(pdbs, ready_replicas, settings)
        or _steering_reason(pod, steering)
        or _restraint_reason(pod, restraints)
    )
    if reason is None and (pod.claims or pod.ephemeral_volumes) and (volumes is None or volumes.placement(pod).unknown):
        return Unmovable.VOLUMES
    return reason


def _restraint_reason(pod: Pod, restraints: Restraints | None) -> Unmovable | None:
    """What earlier runs forbid now (compactor/planner/rules/history.py): a workload or a node in its cooldown."""
    if restraints is None:
        return None
    if pod.node_name in restraints.nodes:
        return Unmovable.NODE_COOLDOWN
    if workload_key(pod.namespace, pod.owners) in restraints.workloads:
        return Unmovable.COOLDOWN
    return None


def why_not_evictable(
    pod: Pod,
    node: Node | None,
    pdbs: Sequence[Pdb],
    settings: PlannerSettings,
    *,
    ready_replicas: int | None,
    steering: Steerability | None = None,
    now: datetime | None = None,
) -> Unmovable | None:
    """The same rules, asked again of a planned pod just before its eviction (read fresh), minus what the plan settled:
    its PDBs' budget now (the executor waits for it), where its volumes attach (the snapshot said) and what its DRA
    claims hold (the snapshot's ResourceClaims said; a pod read alone shows only their names)."""
    if pod.resource_claims and not pod.dra_gpus:
        pod = msgspec.structs.replace(pod, dra_gpus=True)
    return (
        _contract_reason(pod, node, pdbs, settings.movable.recreating_controllers, pdb_now=False)
        or config_reason(pod, settings, now)
        or _replicas_reason(pdbs, ready_replicas, settings)
        or _steering_reason(pod, steering)
    )


def controller_uid(pod: Pod) -> str:
    return next((o.uid for o in pod.owners if o.controller), "")


def ready_replicas(pods: Iterable[Pod]) -> dict[str, int]:
    """Controller uid -> its Ready pods that are not being deleted."""
    counts: dict[str, int] = defaultdict(int)
    for pod in pods:
        uid = controller_uid(pod)
        if uid and pod.ready and not pod.deletion_timestamp:
            counts[uid] += 1
    return counts


def pdbs_by_pod(pods: Iterable[Pod], pdbs: Sequence[Pdb]) -> dict[str, tuple[Pdb, ...]]:
    """Pod key -> the PDBs in its namespace whose selector matches it (in ``pdbs`` order)."""
    # A selector of matchLabels only matches a pod that has its first label: such PDBs are looked up by that label
    # (thousands of PDBs, tens of thousands of pods); any other selector is asked of every pod of its namespace.
    by_label: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    others: dict[str, list[int]] = defaultdict(list)
    for position, pdb in enumerate(pdbs):
        selector = pdb.selector
        if selector is not None and selector.match_labels and not selector.match_expressions:
            first, value = selector.match_labels[0]
            by_label[pdb.namespace, first, value].append(position)
        else:
            others[pdb.namespace].append(position)
    result: dict[str, tuple[Pdb, ...]] = {}
    seen: dict[tuple[str, frozenset[tuple[str, str]]], tuple[Pdb, ...]] = {}  # replicas share their labels
    for pod in pods:
        key = (pod.namespace, frozenset(pod.labels.items()))
        matching = seen.get(key)
        if matching is None:
            candidates = [*others.get(pod.namespace, ())]
            for label, value in pod.labels.items():
                candidates += by_label.get((pod.namespace, label, value), ())
            matching = tuple(
                pdbs[i] for i in sorted(candidates) if label_selector_matches(pdbs[i].selector, pod.labels)
            )
            seen[key] = matching
        if matching:
            result[pod.key] = matching
    return result


def movability(
    pods: Iterable[Pod],
    nodes: Mapping[str, Node],
    pdbs: Sequence[Pdb],
    settings: PlannerSettings,
    volumes: VolumeIndex | None = None,
    *,
    steering: Steerability | None = None,
    now: datetime | None = None,
    restraints: Restraints | None = None,
) -> dict[str, Unmovable | None]:
    """Pod key -> None (movable) or the reason it is not, for every bound pod (``steering``: see ``_steering_reason``)."""
    bound = [p for p in pods if p.is_bound]
    covering = pdbs_by_pod(bound, pdbs)
    replicas = ready_replicas(bound)
    return {
        p.key: why_unmovable(
            p,
            nodes.get(p.node_name),
            covering.get(p.key, ()),
            settings,
            volumes,
            ready_replicas=replicas.get(controller_uid(p), 0),
            steering=steering,
            now=now,
            restraints=restraints,
        )
        or (Unmovable.PARTITIONED if p.partitioned else None)
        for p in bound
    }
