"""Which steering mechanism a run uses, and why: ``steering.mechanism`` and what the cluster serves.

``auto`` (the default) uses the admission policy when the policy, its binding and the parameter
ConfigMap are installed and fit together, else holds, and says which check failed. ``policy``
insists on the policy: a run without it fails before any change. ``holds`` and ``off`` are taken
as said. The checks read three objects (three GETs) at the start of each run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from compactor.actions.port.annotations import fence_key
from compactor.actions.port.client import ClusterClient, Obj
from compactor.actions.port.objects import ObjectView
from compactor.actions.run.context import Run
from compactor.actions.run.steerer import Mechanism, Steerer
from compactor.actions.steering.evidence import NOT_IN_EFFECT, describe, read_evidence
from compactor.actions.steering.holds import HoldSteerer, at_most
from compactor.actions.steering.off import NoSteering
from compactor.actions.steering.pin import POLICY_VERSION, POLICY_VERSION_ANNOTATION
from compactor.actions.steering.policy import PolicySteerer
from compactor.actions.steering.scope import scope_of
from compactor.errors import ClusterError, CompactorError
from compactor.model.types import Taint
from compactor.planner.rules.movability import EVERY_NAMESPACE, NamespaceScope, Steerability
from compactor.settings.bundles import RunSettings
from compactor.settings.steering import SteeringSettings

POLICY = "MutatingAdmissionPolicy"
BINDING = "MutatingAdmissionPolicyBinding"
INSTALL_HINT = "install it with `kubectl apply -k manifests/steering` (Kubernetes v1.36+)"


@dataclass(frozen=True)
class Choice:
    mechanism: Mechanism
    why: str
    scope: NamespaceScope = EVERY_NAMESPACE  # with the policy: the namespaces its binding pins pods in
    not_in_effect: bool = False  # the policy is installed, but runs concluded it is not in effect (evidence.py)


@dataclass(frozen=True)
class Found:
    """What the cluster serves of the steering policy: ``problem`` "" when it is usable, then in ``scope``."""

    problem: str
    scope: NamespaceScope = EVERY_NAMESPACE
    not_in_effect: bool = False
    note: str = ""  # evidence against it, not yet enough to conclude


def choose(client: ClusterClient, settings: RunSettings, now: datetime | None = None) -> Choice:
    """The mechanism for this run; ``CompactorError`` when ``steering.mechanism: policy`` and the policy is not usable."""
    wanted = settings.steering.mechanism
    if wanted == "off":
        return Choice(Mechanism.OFF, "steering.mechanism: off")
    if wanted == "holds":
        return Choice(
            Mechanism.HOLDS,
            f"steering.mechanism: holds ({at_most(settings.caps)})",
        )
    found = find_policy(client, settings, now or datetime.now(UTC))
    if not found.problem:
        note = f"; {found.note}" if found.note else ""
        return Choice(
            Mechanism.POLICY,
            f"{POLICY} {settings.steering.policy_name} installed; entries in configmap "
            f"{settings.executor.state_namespace}/{settings.steering.policy_name}{note}",
            scope=found.scope,
        )
    if wanted == "policy":
        raise CompactorError(
            f"steering.mechanism: policy, but {found.problem}; {INSTALL_HINT}, or set steering.mechanism: auto"
        )
    hint = "" if _a_snapshot(client) else f"; {INSTALL_HINT}"
    return Choice(
        Mechanism.HOLDS,
        f"auto: {found.problem}; holding nodes instead ({at_most(settings.caps)}{hint})",
        not_in_effect=found.not_in_effect,
    )


def policy_problem(client: ClusterClient, settings: RunSettings, now: datetime | None = None) -> str:
    """What keeps the steering policy from working in this cluster, "" when nothing does."""
    return find_policy(client, settings, now or datetime.now(UTC)).problem


def find_policy(client: ClusterClient, settings: RunSettings, now: datetime) -> Found:
    """The steering policy as the cluster serves it: policy, binding and parameter ConfigMap (three GETs)."""
    name, namespace = settings.steering.policy_name, settings.executor.state_namespace
    try:
        policy = client.get_admission(POLICY, name)
        binding = client.get_admission(BINDING, name) if policy is not None else None
        parameters = client.get_config_map(name) if binding is not None else None
    except ClusterError as exc:
        return Found(f"cannot read the steering policy ({exc})")
    if policy is None and _a_snapshot(client):  # issue 45: "not installed" of a cluster the snapshot did not ask about
        return Found(
            f"this snapshot carries no {POLICY} {name}: add mutatingadmissionpolicies,mutatingadmissionpolicybindings "
            f"to its kubectl get, and `kubectl -n {namespace} get configmap {name} -o json` beside it, to simulate a "
            "cluster that steers by the policy"
        )
    if policy is None:
        return Found(
            f"{POLICY} {name} is not installed (or admissionregistration.k8s.io/v1 mutatingadmissionpolicies is not served: "
            "Kubernetes before v1.36)"
        )
    version = _annotations(policy).get(POLICY_VERSION_ANNOTATION, "")
    if version != POLICY_VERSION:
        return Found(
            f"{POLICY} {name} is version {version or 'unknown'} ({POLICY_VERSION_ANNOTATION}); this gpu-compactor needs {POLICY_VERSION}"
        )
    if _spec(policy).get("paramKind") != {"apiVersion": "v1", "kind": "ConfigMap"}:
        return Found(f"{POLICY} {name} does not take a ConfigMap as its parameters (spec.paramKind)")
    if binding is None:
        return Found(f"{BINDING} {name} is not installed: the policy is never applied")
    ref = _spec(binding).get("paramRef") or {}
    if _spec(binding).get("policyName") != name or ref.get("name") != name or ref.get("namespace") != namespace:
        return Found(
            f"{BINDING} {name} does not bind policy {name} to configmap {namespace}/{name} "
            f"(policyName {_spec(binding).get('policyName')!r}, paramRef {ref.get('namespace')}/{ref.get('name')})"
        )
    if parameters is None:
        return Found(
            f"the parameter configmap {namespace}/{name} does not exist (kubectl apply -k manifests/base creates it)"
        )
    scope = scope_of(policy, binding)
    if isinstance(scope, str):
        return Found(scope)
    evidence = read_evidence(_annotations(parameters).get(NOT_IN_EFFECT))
    if evidence is not None and evidence.concluded(now):
        return Found(
            f"runs found the policy not in effect: {describe(evidence, now)}; once the cause is fixed, "
            f"kubectl -n {namespace} annotate configmap {name} {NOT_IN_EFFECT}-",
            not_in_effect=True,
        )
    note = describe(evidence, now) if evidence is not None and now < evidence.expires else ""
    return Found("", scope, note=note)


def _spec(obj: Obj) -> dict[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def _annotations(obj: Obj) -> dict[str, str]:
    return ObjectView(obj).annotations


def steerer_for(choice: Choice, identity: str) -> Steerer[Run]:
    """The ``Steerer`` that carries out ``choice`` (for the installation ``identity``)."""
    kinds: dict[Mechanism, type[PolicySteerer] | type[HoldSteerer] | type[NoSteering]] = {
        Mechanism.POLICY: PolicySteerer,
        Mechanism.HOLDS: HoldSteerer,
        Mechanism.OFF: NoSteering,
    }
    return kinds[choice.mechanism](choice.why, steerability_of(choice, identity))


def steerability(mechanism: Mechanism | str, identity: str, scope: NamespaceScope = EVERY_NAMESPACE) -> Steerability:
    """What the planner must know of the steering: with holds or none, fences (this installation's taint, whatever plan
    id its value) are what keep a replacement where the plan puts it, so a pod tolerating them cannot be moved; the
    steering policy pins the replacements of ReplicaSets and StatefulSets by node name, in ``scope``."""
    if mechanism == Mechanism.POLICY:
        return Steerability(policy=scope)
    return Steerability(fence=Taint(key=fence_key(identity), value="any-plan", effect="NoSchedule"))


def steerability_of(choice: Choice, identity: str) -> Steerability:
    return steerability(choice.mechanism, identity, choice.scope)


def offline_mechanism(settings: SteeringSettings) -> Mechanism:
    """The mechanism a plan made without a cluster assumes: what ``steering.mechanism`` says, and for ``auto`` (decided
    when the run starts) the one that moves fewer pods, holds, so a run never meets a move it must refuse."""
    return (
        Mechanism.POLICY
        if settings.mechanism == "policy"
        else Mechanism.OFF
        if settings.mechanism == "off"
        else Mechanism.HOLDS
    )


def _a_snapshot(client: ClusterClient) -> bool:
    """A dry run over a snapshot file (no live cluster behind it): what it lacks was not read, not found absent."""
    return bool(getattr(client, "reads_a_snapshot", False))
