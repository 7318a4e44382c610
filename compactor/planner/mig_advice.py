"""Which MIG layout would serve the demand best, per pool: advice, nothing acted on.

For each pool of MIG-capable nodes (one GPU model), every named mig-parted config that
configures them is scored against the demand: the pending MIG pods first (how many one
re-cut node would host, and how many re-cut nodes would host them all), then the running
MIG pods' profile mix (the share of the layout's slices in profiles the pool's pods use).

Imports: ``compactor.model`` only.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from compactor.model.catalog import model_for_product, profile_from_resource
from compactor.model.gpu import MIG_CONFIG_LABEL
from compactor.model.migparted import Layouts, is_mig_capable
from compactor.model.resources import is_mig_resource
from compactor.model.types import Node, Pod, Snapshot


@dataclass(frozen=True)
class LayoutOption:
    config: str
    per_node: dict[str, int]  # MIG (and whole-GPU) resources one node gets
    hosts_pending: int  # pending MIG pods of this pool one re-cut node would host
    nodes_for_pending: int | None  # re-cut nodes that would host them all (None: some profile is not in the layout)
    matches_running: (
        float  # overlap of the layout's and the running pods' profile mixes, in GPU shares (1 = the same mix)
    )


@dataclass
class PoolAdvice:
    pool: str
    model: str
    nodes: int
    whole_free: list[str]
    layouts_now: dict[str, int]  # config name -> nodes labelled with it
    pending: dict[str, int]  # MIG resource -> pending pods asking for it
    running: dict[str, int]  # MIG resource -> bound pods using it
    options: list[LayoutOption] = field(default_factory=list)  # best first

    def to_dict(self) -> dict[str, object]:
        return {
            "pool": self.pool,
            "model": self.model,
            "nodes": self.nodes,
            "wholeFree": self.whole_free,
            "layoutsNow": self.layouts_now,
            "pendingMig": self.pending,
            "runningMig": self.running,
            "advice": self.summary(),
            "layouts": [
                {
                    "config": o.config,
                    "perNode": o.per_node,
                    "hostsPending": o.hosts_pending,
                    "nodesForPending": o.nodes_for_pending,
                    "matchesRunning": round(o.matches_running, 3),
                }
                for o in self.options
            ],
        }

    def summary(self) -> str:
        if not self.options:
            return "no named layout configures these GPUs"
        best = self.options[0]
        now = max(self.layouts_now, key=lambda k: self.layouts_now[k]) if self.layouts_now else "?"
        if not self.pending:
            return f"no MIG pod is pending; {best.config} matches the running pods' profile mix best ({best.matches_running:.0%} overlap)"
        if best.hosts_pending == 0:
            return "no named layout hosts the pending MIG pods"
        need = (
            f"{best.nodes_for_pending} re-cut node(s) host all {sum(self.pending.values())}"
            if best.nodes_for_pending
            else f"one re-cut node hosts {best.hosts_pending}"
        )
        return f"re-cut to {best.config} (most nodes are {now} now): {need}; {len(self.whole_free)} node(s) whole-free to re-cut today"


def _mig_resources(pod: Pod) -> dict[str, int]:
    return {r: v for r, v in pod.requests.items() if is_mig_resource(r)}


def advise(snapshot: Snapshot, parted: Layouts) -> list[PoolAdvice]:
    """Per pool of MIG-capable nodes, the named layouts ranked for the current demand."""
    pools: dict[str, list[Node]] = {}
    for node in snapshot.nodes:
        if node.is_gpu_node and is_mig_capable(node) and model_for_product(node.gpu.product) is not None:
            pools.setdefault(node.pool, []).append(node)
    gpu_busy = {p.node_name for p in snapshot.pods if p.is_bound and p.uses_gpu}
    pending = [p for p in snapshot.pending_pods() if _mig_resources(p)]
    advice = []
    for pool, nodes in sorted(pools.items()):
        sample = nodes[0]
        names = parted.applicable(sample)
        options = [LayoutOption(name, parted.capacity(name, sample) or {}, 0, None, 0.0) for name in names]
        offered = {r for o in options for r in o.per_node}
        demand: Counter[str] = Counter()
        for pod in pending:
            wanted = _mig_resources(pod)
            if set(wanted) <= offered:
                demand.update(wanted)
        names_on = {n.name for n in nodes}
        running: Counter[str] = Counter()
        for pod in snapshot.pods:
            if pod.is_bound and pod.node_name in names_on:
                running.update(_mig_resources(pod))
        model = model_for_product(sample.gpu.product)
        scored = [_score(o, demand, running, sample) for o in options]
        scored.sort(
            key=lambda o: (
                -o.hosts_pending,
                o.nodes_for_pending if o.nodes_for_pending is not None else math.inf,
                -o.matches_running,
                o.config,
            )
        )
        advice.append(
            PoolAdvice(
                pool,
                model.name if model else "?",
                len(nodes),
                sorted(n.name for n in nodes if n.name not in gpu_busy),
                dict(Counter(n.labels.get(MIG_CONFIG_LABEL, "") for n in nodes)),
                dict(demand),
                dict(running),
                scored,
            )
        )
    return advice


def _score(option: LayoutOption, demand: Counter[str], running: Counter[str], node: Node) -> LayoutOption:
    cap = option.per_node
    hosts = sum(min(count, cap.get(r, 0)) for r, count in demand.items())
    servable = bool(demand) and all(cap.get(r, 0) for r in demand)
    nodes = max(math.ceil(count / cap[r]) for r, count in demand.items()) if servable else None
    return LayoutOption(option.config, cap, hosts, nodes, overlap(profile_mix(cap, node), profile_mix(running, node)))


def profile_mix(counts: dict[str, int] | Counter[str], node: Node) -> dict[str, float]:
    """MIG resource -> its share of the GPUs the counts occupy."""
    gpus = {r: v * _fraction(r, node) for r, v in counts.items() if is_mig_resource(r)}
    total = sum(gpus.values())
    return {r: g / total for r, g in gpus.items()} if total else {}


def _fraction(resource: str, node: Node) -> float:
    model = model_for_product(node.gpu.product)
    profile = model.profile(profile_from_resource(resource)) if model else None
    return model.fraction(profile) if model and profile else 0.0


def overlap(a: dict[str, float], b: dict[str, float]) -> float:
    return sum(min(share, b.get(r, 0.0)) for r, share in a.items())
