"""Whether a state record may be acted on: it names only pods, owners and nodes of its own plan, within the planner's
scope.

The state ConfigMap ``gpu-compactor-state`` is deleted after every run, so its name is free between runs: whoever may
create ConfigMaps in the compactor's namespace can plant one, and recovery acts on what it reads (rolls back surges by
scaling a Deployment down, re-pins owners, fences nodes). The shipped ValidatingAdmissionPolicy
(``manifests/guard``) refuses such a ConfigMap from anyone but the compactor's service account; this check holds where it
is not installed, and after it: a record is acted on only when every pod it names is a move of its plan, every move is
in a namespace the planner may move pods of (``movable.namespaces``, ``exclude_namespaces``: ``kube-system`` by
default), every surge is of the Deployment of its move's ReplicaSet, every pin sends its owner to a node the plan
sends a pod to. Anything else is refused, said, and the nodes are released by their own marks instead.

Imports: the state record, the plan model, the settings.
"""

from __future__ import annotations

from compactor.actions.cluster.run_state import RunState
from compactor.planner.plan import CompactionPlan
from compactor.settings.bundles import PlannerSettings

SHOWN = 3  # problems named in the refusal


def untrusted(state: RunState, plan: CompactionPlan, scope: PlannerSettings) -> str:
    """Why ``state`` may not be acted on, in one line ("" when it may)."""
    problems = [*_foreign_pods(state, plan), *_out_of_scope(plan, scope), *_odd_surges(state, plan)]
    problems += _foreign_pins(state, plan)
    if state.plan_id != plan.metadata.id:
        problems.insert(0, f"its plan id {state.plan_id} is not its plan's ({plan.metadata.id})")
    if not problems:
        return ""
    more = f" and {len(problems) - SHOWN} more" if len(problems) > SHOWN else ""
    return "; ".join(problems[:SHOWN]) + more


def _foreign_pods(state: RunState, plan: CompactionPlan) -> list[str]:
    moved = {m.pod for m in plan.moves}
    named = [*state.done, *state.refused, *state.inflight]
    return [f"pod {pod} is no move of its plan" for pod in dict.fromkeys(named) if pod not in moved]


def in_scope(namespace: str, scope: PlannerSettings) -> bool:
    """Whether the planner may move pods of ``namespace`` (``movable.namespaces``, ``exclude_namespaces``)."""
    allowed = scope.movable.namespaces
    return (not allowed or namespace in allowed) and namespace not in scope.movable.exclude_namespaces


def _out_of_scope(plan: CompactionPlan, scope: PlannerSettings) -> list[str]:
    found = []
    for move in plan.moves:
        namespace = move.pod.split("/", 1)[0]
        if not in_scope(namespace, scope):
            found.append(
                f"pod {move.pod} is in a namespace the planner may not move (movable.namespaces, exclude_namespaces)"
            )
    return found


def _odd_surges(state: RunState, plan: CompactionPlan) -> list[str]:
    """A surge must be of a move whose owner is a ReplicaSet, and undo at most what it did: one replica."""
    owners = {m.pod: m.owner for m in plan.moves}
    found = []
    for pod, flight in state.inflight.items():
        surge = flight.surge
        if surge is None:
            continue
        if not owners.get(pod, "").startswith("ReplicaSet/"):
            found.append(f"a surge of {pod}, whose owner is not a ReplicaSet")
        elif surge.replicas < 1:
            found.append(f"a surge of {pod} from {surge.replicas} replicas")
    return found


def _foreign_pins(state: RunState, plan: CompactionPlan) -> list[str]:
    targets = {m.to_node for m in plan.moves} | {p.to_node for p in plan.placed_pending}
    return [
        f"a pin to node {node}, which its plan sends no pod to" for node in state.pins.values() if node not in targets
    ]
