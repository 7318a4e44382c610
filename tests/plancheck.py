"""An independent checker for compaction plans, written apart from the planner.

``check_plan(snapshot, plan, settings)`` returns every way ``plan`` breaks the
contract of the issue, as readable strings (empty list = the plan is valid). It
re-derives every rule from the snapshot types on its own: the movability contract
(volumes whose placement is unknown, other schedulers, DRA included), target
eligibility (readiness, cordon, exclusion, taints, NoExecute taints tolerated only for
a while, nodeSelector, required node affinity, existing pods' required anti-affinity,
PersistentVolume node affinity, pools), which pending pods a plan may place at all,
capacity after the whole plan (host ports once per node), the freed/filled bookkeeping
(a freed node counts only Ready, schedulable and its allocatable GPUs), the
"no move serves nothing" rule and the move limits. Nothing from
``compactor.planner`` is imported except the plan document types, so a bug in the
planner cannot hide behind the same bug here.

The helpers (``movable_reason``, ``target_reason``, ``capacity_of``, ...) are also
what the brute-force property test enumerates with.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence

from compactor.model.types import (
    LabelSelector,
    Node,
    NodeSelectorTerm,
    Pdb,
    Pod,
    PodAffinityTerm,
    SelectorRequirement,
    Snapshot,
    Taint,
    Toleration,
)
from compactor.planner.plan import CompactionPlan
from compactor.settings.bundles import PlannerSettings
from compactor.settings.shape_syntax import parse_shape

CRITICAL_PRIORITY = 2_000_000_000
CRITICAL_CLASSES = ("system-cluster-critical", "system-node-critical")
EVICT = "compactor.io/evict"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
MIRROR = "kubernetes.io/config.mirror"
EXCLUDE = "compactor.io/exclude"

Load = dict[str, int]


# --------------------------------------------------------------------------- GPU resources


def is_gpu_resource(name: str) -> bool:
    return name in ("nvidia.com/gpu", "nvidia.com/gpu.shared") or name.startswith("nvidia.com/mig-")


def is_gpu_pod(pod: Pod) -> bool:
    return any(is_gpu_resource(r) and v > 0 for r, v in pod.requests.items())


def node_gpus(node: Node) -> int:
    """What freeing a node counts: nothing unless Ready and schedulable, then the physical GPUs its allocatable
    offers (as the parser derived them), never more than GFD's gpu.count label says."""
    if not node.ready or node.unschedulable:
        return 0
    return min(node.gpu.physical_gpus, node.gpu.allocatable_gpus)


def uses_capacity(pod: Pod) -> bool:
    """A pod counts against its node while bound and not terminated."""
    return bool(pod.node_name) and pod.phase not in ("Succeeded", "Failed")


def is_pending(pod: Pod) -> bool:
    return not pod.node_name and pod.phase == "Pending" and not pod.scheduling_gates


# --------------------------------------------------------------------------- movability (issue rules 1-9 + config)


def _selector_requirement(req: SelectorRequirement, labels: Mapping[str, str]) -> bool:
    if req.operator == "In":
        return req.key in labels and labels[req.key] in req.values
    if req.operator == "NotIn":
        return req.key not in labels or labels[req.key] not in req.values
    if req.operator == "Exists":
        return req.key in labels
    if req.operator == "DoesNotExist":
        return req.key not in labels
    if req.operator in ("Gt", "Lt"):
        try:
            have, want = int(labels[req.key]), int(req.values[0])
        except (KeyError, IndexError, ValueError):
            return False
        return have > want if req.operator == "Gt" else have < want
    return False


def pdb_selects(pdb: Pdb, pod: Pod) -> bool:
    selector: LabelSelector | None = pdb.selector
    if selector is None or pdb.namespace != pod.namespace:
        return False
    return all(pod.labels.get(k) == v for k, v in selector.match_labels) and all(
        _selector_requirement(r, pod.labels) for r in selector.match_expressions
    )


def movable_reason(pod: Pod, node: Node | None, pdbs: Iterable[Pdb], settings: PlannerSettings) -> str | None:
    """Why the contract keeps ``pod`` where it is, or None when a plan may move it."""
    if pod.phase != "Running":
        return "1: not Running"
    if pod.deletion_timestamp:
        return "1: has a deletionTimestamp"
    if any(o.kind == "DaemonSet" for o in pod.owners):
        return "2: DaemonSet pod"
    if MIRROR in pod.annotations:
        return "2: mirror/static pod"
    if not pod.owners:
        return "3: no ownerReferences"
    controllers = [o for o in pod.owners if o.controller]
    if not controllers:
        return "3: no controller owner"
    if controllers[0].kind not in settings.movable.recreating_controllers and pod.annotations.get(EVICT) != "true":
        return "3: its controller does not recreate it"
    if pod.priority >= CRITICAL_PRIORITY or pod.priority_class_name in CRITICAL_CLASSES:
        return "4: system-critical"
    if pod.local_storage and pod.annotations.get(EVICT) != "true":
        return "5: local storage"
    if pod.annotations.get(EVICT) == "false" or pod.annotations.get(SAFE_TO_EVICT) == "false":
        return "6: opted out"
    covering = [pdb for pdb in pdbs if pdb_selects(pdb, pod)]
    if len(covering) > 1:
        return "7: more than one PDB (the Eviction API refuses it)"
    if any(pdb.disruptions_allowed == 0 for pdb in covering):
        return "7: PDB allows no disruption"
    if node is not None and node.labels.get(EXCLUDE) == "true":
        return "8: node excluded"
    unmodelled = _unmodelled(pod)
    if unmodelled:
        return f"9: {unmodelled}"
    if pod.scheduler_name not in settings.movable.scheduler_names:
        return "config: another scheduler"
    if settings.movable.namespaces and pod.namespace not in settings.movable.namespaces:
        return "config: namespace not selected"
    if pod.namespace in settings.movable.exclude_namespaces:
        return "config: namespace excluded"
    if any(pod.labels.get(k) != v for k, v in settings.movable.pod_selector.items()):
        return "config: pod_selector"
    if settings.movable.max_priority is not None and pod.priority > settings.movable.max_priority:
        return "config: max_priority"
    return None


def _unmodelled(pod: Pod) -> str | None:
    """A constraint of the pod's own that the planner does not model (such pods neither move nor get placed)."""
    if pod.affinity.has_required_pod_affinity or pod.affinity.has_required_pod_anti_affinity:
        return "required inter-pod (anti-)affinity"
    if pod.has_hard_topology_spread:
        return "DoNotSchedule topology spread"
    if any(shared for _, _, shared in pod.resource_claims):
        return "a shared DRA ResourceClaim"
    if pod.resource_claims and not pod.dra_gpus:
        return "DRA resource claims"
    return None


def volume_terms(pod: Pod, snapshot: Snapshot) -> list[tuple[NodeSelectorTerm, ...]] | None:
    """The node terms of every PersistentVolume the pod's claims are bound to; None when any is unknown."""
    if pod.ephemeral_volumes:
        return None
    claims = {(c.namespace, c.name): c for c in snapshot.claims}
    volumes = {v.name: v for v in snapshot.volumes}
    found = []
    for name in pod.claims:
        claim = claims.get((pod.namespace, name))
        volume = volumes.get(claim.volume_name) if claim is not None else None
        if volume is None:
            return None
        if volume.node_terms is not None:
            found.append(volume.node_terms)
    return found


def movable_pods(snapshot: Snapshot, settings: PlannerSettings) -> dict[str, str | None]:
    """Bound pod key -> None (movable) or the reason it is not."""
    nodes = {n.name: n for n in snapshot.nodes}
    reasons = {
        p.key: movable_reason(p, nodes.get(p.node_name), snapshot.pdbs, settings)
        for p in snapshot.pods
        if uses_capacity(p)
    }
    for p in snapshot.pods:
        if uses_capacity(p) and reasons[p.key] is None and volume_terms(p, snapshot) is None:
            reasons[p.key] = "volumes: placement unknown"
    return reasons


def placeable_reason(pod: Pod, snapshot: Snapshot, settings: PlannerSettings) -> str | None:
    """Why a pending GPU pod may not be placed by a plan: a constraint the planner does not model, or out of scope."""
    if pod.scheduler_name not in settings.movable.scheduler_names:
        return "another scheduler"
    if pod.namespace in settings.movable.exclude_namespaces or (
        settings.movable.namespaces and pod.namespace not in settings.movable.namespaces
    ):
        return "namespace out of scope"
    if pod.nominated_node:
        return "nominated (preemption under way)"
    unmodelled = _unmodelled(pod)
    if unmodelled:
        return unmodelled
    if volume_terms(pod, snapshot) is None:
        return "volumes unknown"
    return None


# --------------------------------------------------------------------------- where a pod may go


def _tolerates(tol: Toleration, taint: Taint) -> bool:
    if tol.effect and tol.effect != taint.effect:
        return False
    if not tol.key:
        return tol.operator == "Exists"
    if tol.key != taint.key:
        return False
    return tol.operator == "Exists" or tol.value == taint.value


def _term(term: NodeSelectorTerm, node: Node) -> bool:
    if not term.match_expressions and not term.match_fields:
        return False
    return all(_selector_requirement(r, node.labels) for r in term.match_expressions) and all(
        _selector_requirement(r, {"metadata.name": node.name}) for r in term.match_fields
    )


def _first_toleration(pod: Pod, taint: Taint) -> Toleration | None:
    return next((t for t in pod.tolerations if _tolerates(t, taint)), None)


def _term_selects(term: PodAffinityTerm, holder: Pod, pod: Pod) -> bool:
    """Does a holder's anti-affinity term select ``pod`` (namespace and labels)?"""
    if term.namespace_selector is None and pod.namespace not in (term.namespaces or (holder.namespace,)):
        return False
    if term.selector is None:
        return False
    requirements = list(term.selector.match_expressions)
    requirements += [
        SelectorRequirement(k, "In", (holder.labels[k],)) for k in term.match_label_keys if k in holder.labels
    ]
    requirements += [
        SelectorRequirement(k, "NotIn", (holder.labels[k],)) for k in term.mismatch_label_keys if k in holder.labels
    ]
    return all(pod.labels.get(k) == v for k, v in term.selector.match_labels) and all(
        _selector_requirement(r, pod.labels) for r in requirements
    )


def anti_affinity_reason(pod: Pod, node: Node, snapshot: Snapshot) -> str | None:
    """An existing pod's required anti-affinity term that selects ``pod`` and covers ``node``'s topology domain."""
    nodes = {n.name: n for n in snapshot.nodes}
    for holder in snapshot.pods:
        if not uses_capacity(holder) or holder.node_name not in nodes:
            continue
        for term in holder.affinity.anti_affinity_terms:
            where = nodes[holder.node_name].labels
            if (
                term.topology_key in where
                and node.labels.get(term.topology_key) == where[term.topology_key]
                and _term_selects(term, holder, pod)
            ):
                return f"target in the {term.topology_key} domain {holder.key}'s anti-affinity closes"
    return None


def target_reason(
    pod: Pod, node: Node, snapshot: Snapshot | None = None, settings: PlannerSettings | None = None
) -> str | None:
    """Why ``node`` may not receive ``pod`` (capacity and host ports aside), or None.

    With ``snapshot`` and ``settings``, also the rules of issue [7]: anti-affinity of existing pods, PersistentVolume
    node affinity, NoExecute taints tolerated only for a while, and pools.
    """
    why = _node_side_reason(pod, node)
    if why or snapshot is None or settings is None:
        return why
    for taint in node.taints:
        first = _first_toleration(pod, taint) if taint.effect == "NoExecute" else None
        if first is not None and first.seconds is not None:
            return f"target taint {taint.key}:NoExecute tolerated only {first.seconds}s"
    if pod.node_name and is_gpu_pod(pod) and not settings.movable.cross_pool_moves:
        source = next((n for n in snapshot.nodes if n.name == pod.node_name), None)
        if source is not None and source.pool != node.pool:
            return f"target pool {node.pool} is not the pod's pool {source.pool}"
    terms = volume_terms(pod, snapshot)
    if terms is None or not all(any(_term(t, node) for t in ts) for ts in terms):
        return "target outside its PersistentVolume's node affinity"
    return anti_affinity_reason(pod, node, snapshot)


def _node_side_reason(pod: Pod, node: Node) -> str | None:
    if not node.ready:
        return "target not Ready"
    if node.unschedulable:
        return "target cordoned"
    if node.labels.get(EXCLUDE) == "true":
        return "target excluded"
    for taint in node.taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not any(_tolerates(t, taint) for t in pod.tolerations):
            return f"target taint {taint.key}={taint.value}:{taint.effect} not tolerated"
    if any(node.labels.get(k) != v for k, v in pod.node_selector):
        return "target does not match nodeSelector"
    terms = _own_terms(pod)
    if terms is not None and not any(_term(t, node) for t in terms):
        return "target does not match required node affinity"
    return None


def _own_terms(pod: Pod) -> tuple[NodeSelectorTerm, ...] | None:
    """The pod's required node terms as its owner's next pod gets them: a bound pod the steering policy pinned (annotated
    ``compactor.io/steered-to: X``) carries ``metadata.name In [X]`` its template never had; that one requirement goes."""
    terms = pod.affinity.required_node_terms
    pinned = pod.annotations.get("compactor.io/steered-to")
    if terms is None or not pinned or not pod.node_name:
        return terms
    pin = SelectorRequirement("metadata.name", "In", (pinned,))
    own = []
    for term in terms:
        fields = list(term.match_fields)
        if pin in fields:
            fields.reverse()
            fields.remove(pin)
            fields.reverse()
        if term.match_expressions or fields:
            own.append(NodeSelectorTerm(term.match_expressions, tuple(fields)))
    return tuple(own) or None


# --------------------------------------------------------------------------- loads and capacity


def add(load: Load, requests: Mapping[str, int], sign: int = 1) -> None:
    for r, v in requests.items():
        load[r] = load.get(r, 0) + sign * v


def demand(pod: Pod) -> Load:
    """What a pod takes from its node: its requests, and each host port it binds (one per node, NodePorts)."""
    load = dict(pod.requests)
    for protocol, port in pod.host_ports:
        load[f"port:{protocol}/{port}"] = 1
    return load


def loads_before(snapshot: Snapshot) -> dict[str, Load]:
    loads: dict[str, Load] = {n.name: {} for n in snapshot.nodes}
    for pod in snapshot.pods:
        if uses_capacity(pod) and pod.node_name in loads:
            add(loads[pod.node_name], demand(pod))
    return loads


def capacity_of(node: Node, before: Mapping[str, int], snapshot: Snapshot | None = None) -> Load:
    """What a node may hold after the plan: allocatable, or its snapshot load where that is higher; each host port once."""
    keys = set(node.allocatable) | set(before)
    cap = {r: max(node.allocatable.get(r, 0), before.get(r, 0)) for r in keys}
    for pod in snapshot.pods if snapshot is not None else ():
        for protocol, port in pod.host_ports:
            key = f"port:{protocol}/{port}"
            cap[key] = max(1, before.get(key, 0))
    return cap


def fits(load: Mapping[str, int], extra: Mapping[str, int], cap: Mapping[str, int]) -> bool:
    return all(load.get(r, 0) + v <= cap.get(r, 0) for r, v in extra.items() if v > 0)


def over(load: Mapping[str, int], cap: Mapping[str, int]) -> list[str]:
    return sorted(r for r, v in load.items() if v > cap.get(r, 0))


def gpu_pod_counts(snapshot: Snapshot, where: Mapping[str, str]) -> Counter[str]:
    """GPU pods per node, with ``where`` (pod key -> node) overriding the snapshot's binding."""
    counts: Counter[str] = Counter()
    for pod in snapshot.pods:
        node = where.get(pod.key, pod.node_name if uses_capacity(pod) else "")
        if node and is_gpu_pod(pod):
            counts[node] += 1
    return counts


def freed_filled(snapshot: Snapshot, where: Mapping[str, str]) -> tuple[set[str], set[str], int]:
    """(freed nodes, filled nodes, net freed GPUs) when pods end where ``where`` says."""
    before = gpu_pod_counts(snapshot, {})
    after = gpu_pod_counts(snapshot, where)
    gpu_nodes = [n for n in snapshot.nodes if node_gpus(n) > 0]
    freed = {n.name for n in gpu_nodes if before[n.name] > 0 and after[n.name] == 0}
    filled = {n.name for n in gpu_nodes if before[n.name] == 0 and after[n.name] > 0}
    by_name = {n.name: n for n in snapshot.nodes}
    net = sum(node_gpus(by_name[n]) for n in freed) - sum(node_gpus(by_name[n]) for n in filled)
    return freed, filled, net


def shape_headroom(
    node: Node, load: Mapping[str, int], cap: Mapping[str, int], shapes: Sequence[Mapping[str, int]]
) -> int:
    """Copies of each shape that fit in the node's free room, summed (0 on nodes that cannot receive pods)."""
    if not node.ready or node.unschedulable or node.labels.get(EXCLUDE) == "true":
        return 0
    total = 0
    for shape in shapes:
        room = [(cap.get(r, 0) - load.get(r, 0)) // v for r, v in shape.items() if v > 0]
        total += max(0, min(room)) if room else 0
    return total


def total_headroom(
    snapshot: Snapshot, loads: Mapping[str, Load], caps: Mapping[str, Load], shapes: Sequence[Mapping[str, int]]
) -> int:
    return sum(shape_headroom(n, loads[n.name], caps[n.name], shapes) for n in snapshot.nodes)


# --------------------------------------------------------------------------- the checker


def check_plan(snapshot: Snapshot, plan: CompactionPlan, settings: PlannerSettings) -> list[str]:
    errors: list[str] = []
    pods = {p.key: p for p in snapshot.pods}
    nodes = {n.name: n for n in snapshot.nodes}
    before = loads_before(snapshot)
    caps = {name: capacity_of(nodes[name], before[name], snapshot) for name in nodes}
    movable = movable_pods(snapshot, settings)
    after = {name: dict(load) for name, load in before.items()}
    where: dict[str, str] = {}
    seen: Counter[str] = Counter()

    for i, move in enumerate(plan.moves):
        tag = f"move {i} {move.pod} {move.from_node}->{move.to_node}"
        seen[move.pod] += 1
        pod = pods.get(move.pod)
        if pod is None:
            errors.append(f"{tag}: no such pod")
            continue
        if seen[move.pod] > 1:
            errors.append(f"{tag}: pod moved more than once")
            continue
        if not uses_capacity(pod) or pod.node_name != move.from_node:
            errors.append(f"{tag}: pod is bound to {pod.node_name or 'no node'}, not {move.from_node}")
            continue
        if move.uid and move.uid != pod.uid:
            errors.append(f"{tag}: uid {move.uid} is not the pod's {pod.uid}")
        if move.gpu != is_gpu_pod(pod):
            errors.append(f"{tag}: gpu flag {move.gpu} is wrong")
        reason = movable[pod.key]
        if reason:
            errors.append(f"{tag}: pod may not move ({reason})")
        target = nodes.get(move.to_node)
        if target is None:
            errors.append(f"{tag}: no such target node")
            continue
        if move.to_node == move.from_node:
            errors.append(f"{tag}: moves onto its own node")
        why = target_reason(pod, target, snapshot, settings)
        if why:
            errors.append(f"{tag}: {why}")
        add(after[move.from_node], demand(pod), -1)
        add(after[move.to_node], demand(pod))
        where[pod.key] = move.to_node

    for i, placement in enumerate(plan.placed_pending):
        tag = f"placement {i} {placement.pod}->{placement.to_node}"
        seen[placement.pod] += 1
        pod = pods.get(placement.pod)
        if pod is None:
            errors.append(f"{tag}: no such pod")
            continue
        if seen[placement.pod] > 1:
            errors.append(f"{tag}: pod already moved or placed")
            continue
        if not is_pending(pod):
            errors.append(f"{tag}: pod is not pending (phase {pod.phase}, node {pod.node_name or '-'})")
            continue
        if not is_gpu_pod(pod):
            errors.append(f"{tag}: placed pod requests no GPU")
        unmodelled = placeable_reason(pod, snapshot, settings)
        if unmodelled:
            errors.append(f"{tag}: placed a pod the plan may not place ({unmodelled})")
        target = nodes.get(placement.to_node)
        if target is None:
            errors.append(f"{tag}: no such target node")
            continue
        why = target_reason(pod, target, snapshot, settings)
        if why:
            errors.append(f"{tag}: {why}")
        add(after[placement.to_node], demand(pod))
        where[pod.key] = placement.to_node

    recut = {r.node: r for r in plan.mig_repartition}
    errors.extend(_one_eviction_at_a_time(plan, pods, before, caps, set(recut)))
    for name, change in recut.items():
        if name not in nodes:
            errors.append(f"re-cut of {name}: no such node")
            continue
        if change.to_config == change.from_config:
            errors.append(f"re-cut of {name}: {change.to_config} is its layout already")
        kept = [
            p.key
            for p in snapshot.pods
            if uses_capacity(p) and is_gpu_pod(p) and p.node_name == name and p.key not in where
        ]
        if kept:
            errors.append(f"re-cut of {name} while GPU pod(s) {', '.join(kept)} stay on it")
        # Its GPU resources become the new layout's (mig-manager replaces them all).
        caps[name] = {r: v for r, v in caps[name].items() if not is_gpu_resource(r)} | dict(change.allocatable)
    for name in nodes:
        exceeded = over(after[name], caps[name])
        if exceeded:
            detail = ", ".join(f"{r} {after[name].get(r, 0)} > {caps[name].get(r, 0)}" for r in exceeded)
            errors.append(f"node {name} over capacity after the plan: {detail}")

    # Freed / filled / freedGpus, recomputed from scratch.
    freed, filled, net = freed_filled(snapshot, where)
    if len(set(plan.freed_nodes)) != len(plan.freed_nodes) or set(plan.freed_nodes) != freed:
        errors.append(f"freedNodes {sorted(plan.freed_nodes)} != recomputed {sorted(freed)}")
    if len(set(plan.filled_nodes)) != len(plan.filled_nodes) or set(plan.filled_nodes) != filled:
        errors.append(f"filledNodes {sorted(plan.filled_nodes)} != recomputed {sorted(filled)}")
    if plan.freed_gpus != net:
        errors.append(f"freedGpus {plan.freed_gpus} != recomputed {net}")
    # One plan, one story: the curve's mark is on the plan printed, a budget's cut included (a row of its own).
    chosen = [p for p in plan.frontier if p.chosen]
    if chosen and (chosen[0].freed_gpus, chosen[0].moves) != (plan.freed_gpus, len(plan.moves)):
        errors.append(
            f"the curve's chosen point frees {chosen[0].freed_gpus} GPUs in {chosen[0].moves} moves; the plan frees "
            f"{plan.freed_gpus} in {len(plan.moves)}"
        )
    if len(chosen) > 1:
        errors.append(f"{len(chosen)} points of the curve are marked chosen")

    # The objective: with nothing placed, moves must buy net freed GPUs (or shape headroom); never a trade.
    shapes = [parse_shape(s) for s in settings.aims.target_shapes] if settings.aims.goal == "shapes" else []
    if not plan.placed_pending and plan.moves:
        if shapes:
            gain = total_headroom(snapshot, after, caps, shapes) - total_headroom(snapshot, before, caps, shapes)
            if gain <= 0:
                errors.append(f"shape mode: {len(plan.moves)} move(s) gain no headroom ({gain})")
        elif net <= 0:
            errors.append(f"{len(plan.moves)} move(s) but net freed GPUs is {net}: the plan trades or frees nothing")

    # No move that serves nothing.
    for i, move in enumerate(plan.moves):
        pod = pods.get(move.pod)
        if pod is None or move.from_node not in nodes or move.to_node not in nodes or seen[move.pod] > 1:
            continue
        if is_gpu_pod(pod) and move.from_node in freed:
            continue
        if not fits(after[move.from_node], demand(pod), caps[move.from_node]):
            continue
        if shapes:
            src, dst = dict(after[move.from_node]), dict(after[move.to_node])
            now = shape_headroom(nodes[move.from_node], src, caps[move.from_node], shapes) + shape_headroom(
                nodes[move.to_node], dst, caps[move.to_node], shapes
            )
            add(src, demand(pod))
            add(dst, demand(pod), -1)
            undone = shape_headroom(nodes[move.from_node], src, caps[move.from_node], shapes) + shape_headroom(
                nodes[move.to_node], dst, caps[move.to_node], shapes
            )
            if undone < now:
                continue
        errors.append(f"move {i} {move.pod} {move.from_node}->{move.to_node}: serves nothing (the pod could stay)")

    # Limits.
    if settings.caps.max_moves is not None and len(plan.moves) > settings.caps.max_moves:
        errors.append(f"{len(plan.moves)} moves > maxMoves {settings.caps.max_moves}")
    if settings.caps.max_moves_per_node is not None:
        per_node = Counter(m.from_node for m in plan.moves)
        limit = settings.caps.max_moves_per_node
        errors.extend(f"{n}: {k} moves > maxMovesPerNode {limit}" for n, k in per_node.items() if k > limit)
    if settings.caps.max_moves_per_namespace is not None:
        per_ns: dict[str, int] = defaultdict(int)
        for m in plan.moves:
            per_ns[m.pod.split("/", 1)[0]] += 1
        errors.extend(
            f"namespace {ns}: {k} moves > maxMovesPerNamespace {settings.caps.max_moves_per_namespace}"
            for ns, k in per_ns.items()
            if k > settings.caps.max_moves_per_namespace
        )
    if (
        settings.aims.min_gain_per_move > 0
        and plan.moves
        and net < settings.aims.min_gain_per_move * len(plan.moves) - 1e-9
    ):
        errors.append(
            f"net freed {net} GPUs over {len(plan.moves)} moves < minGainPerMove {settings.aims.min_gain_per_move}"
        )
    return errors


def _one_eviction_at_a_time(
    plan: CompactionPlan, pods: Mapping[str, Pod], before: Mapping[str, Load], caps: Mapping[str, Load], recut: set[str]
) -> list[str]:
    """The executor evicts one pod at a time, in the plan's order, and its replacement must fit the target then:
    moves that fit only all together (two pods swapping full nodes) can never run."""
    now = {name: dict(load) for name, load in before.items()}
    errors = []
    for i, move in enumerate(plan.moves):
        pod = pods.get(move.pod)
        if pod is None or move.from_node not in now or move.to_node not in now:
            continue
        if move.to_node not in recut and not fits(now[move.to_node], demand(pod), caps[move.to_node]):
            errors.append(
                f"move {i} {move.pod} {move.from_node}->{move.to_node}: does not fit {move.to_node} when it runs "
                f"(after the moves before it, one eviction at a time)"
            )
        add(now[move.from_node], demand(pod), -1)
        add(now[move.to_node], demand(pod))
    return errors


def assert_valid(snapshot: Snapshot, plan: CompactionPlan, settings: PlannerSettings) -> None:
    errors = check_plan(snapshot, plan, settings)
    assert not errors, "plan violates the contract:\n  " + "\n  ".join(errors)
