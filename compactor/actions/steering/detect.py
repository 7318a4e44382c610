"""Which steering mechanism a run uses, and why: ``executor.steering`` and what the cluster serves.

``auto`` (the default) uses the admission policy when the policy, its binding and the parameter
ConfigMap are installed and fit together, else holds, and says which check failed. ``policy``
insists on the policy: a run without it fails before any change. ``holds`` and ``off`` are taken
as said. The checks read three objects (three GETs) at the start of each run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from compactor.actions.annotations import fence_key
from compactor.actions.client import ClusterClient, Obj
from compactor.actions.steering import Mechanism, Steerer
from compactor.actions.steering.holds import HoldSteerer
from compactor.actions.steering.off import NoSteering
from compactor.actions.steering.pin import NOT_IN_EFFECT, POLICY_VERSION, POLICY_VERSION_ANNOTATION
from compactor.actions.steering.policy import PolicySteerer
from compactor.errors import ClusterError, CompactorError
from compactor.model.types import Taint
from compactor.settings import ExecutorSettings

POLICY = "MutatingAdmissionPolicy"
BINDING = "MutatingAdmissionPolicyBinding"
INSTALL_HINT = "install it with `kubectl apply -k manifests/steering` (Kubernetes v1.36+)"


@dataclass(frozen=True)
class Choice:
    mechanism: Mechanism
    why: str


def choose(client: ClusterClient, settings: ExecutorSettings) -> Choice:
    """The mechanism for this run; ``CompactorError`` when ``executor.steering: policy`` and the policy is not usable."""
    wanted = settings.steering
    if wanted == "off":
        return Choice(Mechanism.OFF, "executor.steering: off")
    if wanted == "holds":
        return Choice(
            Mechanism.HOLDS, f"executor.steering: holds (at most {settings.max_holds_per_move} node(s) per move)"
        )
    problem = policy_problem(client, settings)
    if not problem:
        return Choice(
            Mechanism.POLICY,
            f"{POLICY} {settings.steering_name} installed; entries in configmap "
            f"{settings.state_namespace}/{settings.steering_name}",
        )
    if wanted == "policy":
        raise CompactorError(
            f"executor.steering: policy, but {problem}; {INSTALL_HINT}, or set executor.steering: auto"
        )
    return Choice(
        Mechanism.HOLDS,
        f"auto: {problem}; holding nodes instead (at most {settings.max_holds_per_move} per move; {INSTALL_HINT})",
    )


def policy_problem(client: ClusterClient, settings: ExecutorSettings) -> str:
    """What keeps the steering policy from working in this cluster, "" when nothing does."""
    name, namespace = settings.steering_name, settings.state_namespace
    try:
        policy = client.get_admission(POLICY, name)
        binding = client.get_admission(BINDING, name) if policy is not None else None
        parameters = client.get_config_map(name) if binding is not None else None
    except ClusterError as exc:
        return f"cannot read the steering policy ({exc})"
    if policy is None:
        return (
            f"{POLICY} {name} is not installed (or admissionregistration.k8s.io/v1 mutatingadmissionpolicies is not served: "
            "Kubernetes before v1.36)"
        )
    version = _annotations(policy).get(POLICY_VERSION_ANNOTATION, "")
    if version != POLICY_VERSION:
        return f"{POLICY} {name} is version {version or 'unknown'} ({POLICY_VERSION_ANNOTATION}); this gpu-compactor needs {POLICY_VERSION}"
    if _spec(policy).get("paramKind") != {"apiVersion": "v1", "kind": "ConfigMap"}:
        return f"{POLICY} {name} does not take a ConfigMap as its parameters (spec.paramKind)"
    if binding is None:
        return f"{BINDING} {name} is not installed: the policy is never applied"
    ref = _spec(binding).get("paramRef") or {}
    if _spec(binding).get("policyName") != name or ref.get("name") != name or ref.get("namespace") != namespace:
        return (
            f"{BINDING} {name} does not bind policy {name} to configmap {namespace}/{name} "
            f"(policyName {_spec(binding).get('policyName')!r}, paramRef {ref.get('namespace')}/{ref.get('name')})"
        )
    if parameters is None:
        return f"the parameter configmap {namespace}/{name} does not exist (kubectl apply -k manifests/base creates it)"
    seen = _annotations(parameters).get(NOT_IN_EFFECT, "")
    if seen:
        return (
            f"a run found the policy not in effect ({seen.split(' ', 1)[0]}: a replacement arrived unpinned); once fixed, "
            f"kubectl -n {namespace} annotate configmap {name} {NOT_IN_EFFECT}-"
        )
    return ""


def _spec(obj: Obj) -> dict[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def _annotations(obj: Obj) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def steerer_for(choice: Choice) -> Steerer:
    """The ``Steerer`` that carries out ``choice``."""
    kinds: dict[Mechanism, type[PolicySteerer] | type[HoldSteerer] | type[NoSteering]] = {
        Mechanism.POLICY: PolicySteerer,
        Mechanism.HOLDS: HoldSteerer,
        Mechanism.OFF: NoSteering,
    }
    return kinds[choice.mechanism](choice.why)


def planning_fence(mechanism: Mechanism | str, identity: str) -> Taint | None:
    """What the planner must know of the steering: with holds or none, fences (this installation's taint, whatever plan
    id its value) are what keep a replacement where the plan puts it, so a pod tolerating them cannot be moved; the
    steering policy pins replacements by node name, so there it is None."""
    if mechanism == Mechanism.POLICY:
        return None
    return Taint(key=fence_key(identity), value="any-plan", effect="NoSchedule")


def offline_mechanism(settings: ExecutorSettings) -> Mechanism:
    """The mechanism a plan made without a cluster assumes: what ``executor.steering`` says, and for ``auto`` (decided
    when the run starts) the one that moves fewer pods, holds, so a run never meets a move it must refuse."""
    return (
        Mechanism.POLICY
        if settings.steering == "policy"
        else Mechanism.OFF
        if settings.steering == "off"
        else Mechanism.HOLDS
    )
