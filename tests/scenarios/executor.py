"""The executor's scenarios on the fake cluster, and the tools tests run and inspect them with.

Worlds (raw objects, for ``FakeCluster`` and the planner alike): ``two_freed_nodes``, ``one_freed_node``, built
from ``rs`` (a ReplicaSet pod) and ``agents`` (DaemonSet pods). Plans: ``make_plan`` (the real planner, ``PLANNER``),
``hand_plan`` (moves written by hand), ``setup`` (a fake cluster and its plan), ``synthetic_moves`` (moves of pods
that do not exist, for size tests). Running: ``run`` (``Executor`` with ``SETTINGS``), ``on_progress`` and
``intercept_evictions`` (hooks into a running executor). Inspecting: ``marks``, ``events``, ``involved``, ``writes``,
``evict_calls``, ``adds_fence``, ``in_flight``, ``owner_of``, and ``assert_clean`` (the invariants after any run).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from compactor.actions.executor import Executor, Progress
from compactor.actions.port import annotations as ann
from compactor.actions.port.client import EvictionResult, ObjectRef
from compactor.actions.services.memory import HISTORY_CONFIGMAP
from compactor.actions.services.report import RunReport
from compactor.app.plan_document import build_plan
from compactor.planner.plan import CompactionPlan, Move
from compactor.planner.request import PlanRequest
from compactor.planner.rules.movability import Steerability
from compactor.settings.bundles import PlannerSettings, RunSettings
from tests.builders import cluster, node, pdb, pod
from tests.fakecluster import EPOCH, FakeCluster

Obj = dict[str, Any]

PLAN_ID = "plan-test-1"
SETTINGS = RunSettings.of(
    poll_seconds=1, replacement_timeout_seconds=60, backoff_seconds=1, backoff_max_seconds=8, eviction_retry_limit=3
)
PLANNER = PlannerSettings.of(time_limit_seconds=5, workers=1)


# --------------------------------------------------------------------------- scenarios and helpers


def rs(
    name: str, on: str, app: str, *, gpus: int = 1, kind: str = "ReplicaSet", labels: dict[str, str] | None = None
) -> Obj:
    """A GPU pod of controller ``kind/app`` labelled ``app=<app>`` (plus ``labels``)."""
    return pod(name, on=on, gpus=gpus, owner=f"{kind}/{app}", labels={"app": app, **(labels or {})})


def agents(*nodes: str) -> list[Obj]:
    """A CPU-only DaemonSet pod per node: never moved, never a reason to abort."""
    return [pod(f"agent-{n}", on=n, owner="DaemonSet/agent", labels={"app": "agent"}) for n in nodes]


def two_freed_nodes(*, shared_pdb: bool = False) -> list[Obj]:
    """3 GPU nodes; the plan frees gpu-2 and gpu-3 with 4 moves (2 per ReplicaSet) onto gpu-1.

    ``pinned`` is a bare pod (never movable), so gpu-1 is the only target. By default each
    ReplicaSet has its own PDB; with ``shared_pdb`` one PDB (maxUnavailable 2) selects both.
    """
    team = {"team": "ml"} if shared_pdb else {}
    budgets = (
        [pdb("ml", match={"team": "ml"}, max_unavailable=2, allowed=2)]
        if shared_pdb
        else [
            pdb("train", match={"app": "train"}, max_unavailable=1),
            pdb("serve", match={"app": "serve"}, min_available=1),
        ]
    )
    return [
        node("gpu-1", gpus=8),
        node("gpu-2", gpus=8),
        node("gpu-3", gpus=8),
        pod("pinned", on="gpu-1", gpus=4, owner=None),
        rs("train-a", "gpu-2", "train", labels=team),
        rs("serve-a", "gpu-2", "serve", labels=team),
        rs("train-b", "gpu-3", "train", labels=team),
        rs("serve-b", "gpu-3", "serve", labels=team),
        *agents("gpu-1", "gpu-2", "gpu-3"),
        *budgets,
    ]


def one_freed_node() -> list[Obj]:
    """3 GPU nodes; the plan frees gpu-3 with 3 moves, two of them of one ReplicaSet under a PDB."""
    return [
        node("gpu-1", gpus=8),
        node("gpu-2", gpus=8),
        node("gpu-3", gpus=8),
        pod("pin-1", on="gpu-1", gpus=4, owner=None),
        pod("pin-2", on="gpu-2", gpus=4, owner=None),
        rs("train-a", "gpu-3", "train"),
        rs("train-b", "gpu-3", "train"),
        rs("serve-a", "gpu-3", "serve"),
        rs("train-c", "gpu-1", "train"),
        rs("serve-b", "gpu-2", "serve"),
        *agents("gpu-1", "gpu-2", "gpu-3"),
        pdb("train", match={"app": "train"}, max_unavailable=1),
        pdb("serve", match={"app": "serve"}, min_available=1),
    ]


def make_plan(objects: list[Obj], plan_id: str = PLAN_ID, *, steering: Steerability | None = None) -> CompactionPlan:
    return build_plan(
        PlanRequest.of(cluster(*objects), PLANNER, source="test", now=EPOCH, plan_id=plan_id, steering=steering)
    )


def setup(objects: list[Obj] | None = None, **fake: Any) -> tuple[FakeCluster, CompactionPlan]:
    """A fake cluster and the planner's plan, both from the same objects (so the planned pod uids match)."""
    objects = objects if objects is not None else two_freed_nodes()
    return FakeCluster(objects, **fake), make_plan(objects)


def run(c: FakeCluster, plan: CompactionPlan, settings: RunSettings = SETTINGS, **options: Any) -> RunReport:
    return Executor(c, settings, c.clock, **options).execute(plan)


def hand_plan(
    moves: list[tuple[str, str, str, str]],
    *,
    freed: list[str],
    c: FakeCluster,
    plan_id: str = PLAN_ID,
    pending: Sequence[tuple[str, str]] = (),
) -> CompactionPlan:
    """A plan written by hand: (pod key, from, to, owner) moves, uids read from the fake cluster."""
    return CompactionPlan.model_validate(
        {
            "metadata": {"id": plan_id, "createdAt": "2026-01-01T00:00:00Z", "source": "test"},
            "moves": [
                {
                    "pod": key,
                    "from": src,
                    "to": dst,
                    "owner": owner,
                    "reason": "test",
                    "gpu": True,
                    "uid": c.pod(*key.split("/"))["metadata"]["uid"],
                }
                for key, src, dst, owner in moves
            ],
            "placedPending": [{"pod": key, "to": dst} for key, dst in pending],
            "freedNodes": freed,
            "freedGpus": sum(int(c.nodes[n]["status"]["allocatable"].get("nvidia.com/gpu", 0)) for n in freed),
            "solver": {"status": "OPTIMAL", "wallSeconds": 0.0},
        }
    )


def marks(c: FakeCluster, name: str) -> dict[str, str]:
    """Our annotations on the node (empty when it carries none)."""
    return {k: v for k, v in ann.node_annotations(c.nodes[name]).items() if k in ann.OUR_ANNOTATIONS}


def events(c: FakeCluster, reason: str | None = None) -> list[dict[str, Any]]:
    return [e for e in c.events if reason is None or e["reason"] == reason]


def involved(event: dict[str, Any]) -> str:
    ref: ObjectRef = event["involved"]
    return f"{ref.kind}/{ref.namespace + '/' if ref.namespace else ''}{ref.name}"


def writes(c: FakeCluster, method: str) -> list[Any]:
    return [call for call in c.history if call.method == method]


def evict_calls(c: FakeCluster, key: str | None = None) -> list[Any]:
    return [
        call for call in writes(c, "evict") if key is None or f"{call.args['namespace']}/{call.args['name']}" == key
    ]


def adds_fence(patch: dict[str, Any]) -> bool:
    """A node patch that puts this installation's fence taint on."""
    return any(t.get("key") == ann.fence_key(ann.IDENTITY) for t in (patch.get("spec") or {}).get("taints") or [])


def assert_clean(c: FakeCluster, *, still_cordoned: tuple[str, ...] = ()) -> None:
    """The invariants after any run (and any recovery): settle the world, then nothing of ours is left behind."""
    c.settle()
    assert c.cordoned_nodes() == sorted(still_cordoned), "a node was left cordoned"
    assert {n: marks(c, n) for n in c.nodes if marks(c, n)} == {}, "a node still carries the executor's marks"
    # The run's state ConfigMap goes with the run; the history of moves (cooldowns, budgets, the breaker) is meant to stay.
    assert {name: data for name, data in c.state.items() if name != HISTORY_CONFIGMAP} == {}, (
        "the state ConfigMap outlived the run"
    )
    c.assert_no_pdb_violation()
    assert c.lost_pods() == []
    assert all(not call.args.get("dry_run") for call in writes(c, "evict"))


def on_progress(predicate: Callable[[Progress], bool], action: Callable[[], None]) -> Callable[[Progress], None]:
    """A progress callback that runs ``action`` once, the first time ``predicate`` holds: a hook into a running executor."""
    fired: list[Progress] = []

    def callback(progress: Progress) -> None:
        if not fired and predicate(progress):
            fired.append(progress)
            action()

    return callback


def intercept_evictions(c: FakeCluster, before: Callable[[str, str], None]) -> None:
    """Call ``before(namespace, name)`` as each eviction reaches the cluster (to observe or tamper with the world then)."""
    original = c.evict

    def evict(
        namespace: str, name: str, *, uid: str = "", resource_version: str = "", dry_run: bool = False
    ) -> EvictionResult:
        before(namespace, name)
        return original(namespace, name, uid=uid, resource_version=resource_version, dry_run=dry_run)

    c.evict = evict  # type: ignore[method-assign]


def in_flight(c: FakeCluster) -> set[str]:
    """Controllers not whole right now: a pod terminating, or fewer Ready pods than replicas."""
    broken = set()
    for (kind, namespace, name), ctl in c.controllers.items():
        mine = [
            p
            for p in c.pods.values()
            if any(
                r.get("controller") and r.get("name") == name and r.get("kind") == kind
                for r in p["metadata"].get("ownerReferences") or []
            )
            and (p["metadata"].get("namespace") or "default") == namespace
        ]
        ready = [
            p
            for p in mine
            if not p["metadata"].get("deletionTimestamp")
            and any(x["type"] == "Ready" and x["status"] == "True" for x in p["status"].get("conditions") or [])
        ]
        if len(ready) < ctl.replicas or len(mine) != len(ready):
            broken.add(f"{kind}/{name}")
    return broken


def owner_of(c: FakeCluster, namespace: str, name: str) -> str:
    ref = next(r for r in c.pod(namespace, name)["metadata"]["ownerReferences"] if r.get("controller"))
    return f"{ref['kind']}/{ref['name']}"


def synthetic_moves(count: int) -> list[Move]:
    """Moves of pods that are not in the cluster (the executor skips them as gone), with realistic name lengths."""
    return [
        Move.model_validate(
            {
                "pod": f"inference-team-{i % 40}/llm-server-7b-{i:05d}-6d9f8c7b5-x2k4q",
                "from": f"gpu-{i % 5000:05d}",
                "to": f"gpu-{(i * 7) % 5000:05d}",
                "uid": f"0c6f4a52-1b7e-4d2a-9a3f-{i:012d}",
                "owner": f"ReplicaSet/llm-server-7b-{i:05d}-6d9f8c7b5",
                "gpu": True,
                "reason": f"frees gpu-{i % 5000:05d} (8 GPUs); gpu-{(i * 7) % 5000:05d} already runs GPU pods, 2 GPUs free before",
                "requests": {"cpu": 8000, "memory": 68719476736, "nvidia.com/gpu": 2},
            }
        )
        for i in range(count)
    ]
