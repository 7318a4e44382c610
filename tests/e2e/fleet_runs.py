"""Compaction runs on a fragmented fleet of a real control plane, and the checks of where they end.

``STATES``: the seeded starting states (``fragmentation.StartingState``) the fleet tests build. ``compactor_config``:
the settings of a test's run (only its namespace moves; short polls and timeouts). ``run_once`` and ``apply`` carry
out a written plan (``compactor run --once``, ``compactor apply --plan``). ``plan_and_carry_out`` builds a state,
plans, carries the plan out under ``RunWatcher`` and checks every promise of the plan against the live cluster
(``Outcome``); each state prints one results line (``publish``). ``settle`` waits until every Deployment is whole
again; ``leftovers`` lists what a run left on the nodes and in the compactor's namespace.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Protocol

import yaml

from tests.e2e import fragmentation as frag
from tests.e2e.fragmentation import Fleet, StartingState
from tests.e2e.helpers import (
    COMPACTOR_ANNOTATION_PREFIX,
    STATE_CONFIGMAP,
    STATE_NAMESPACE,
    CompactorRun,
    Kube,
    Obj,
    compactor_marks,
    describe_pods,
    get_or_none,
    is_running_ready,
    kubeconfig_args,
    name_of,
    raw,
    run_compactor,
    wait_for,
)
from tests.e2e.steering import Tenant, TenantWaits
from tests.e2e.watchers import Observed, RunWatcher

PROFILE_ENV = "GPU_COMPACTOR_E2E_PROFILE"  # the scheduler profile of the cluster, for the results line only
RESULTS_ENV = "GPU_COMPACTOR_E2E_RESULTS"  # a file each state appends its results line to
PLAN_TIMEOUT = 180
RUN_TIMEOUT = 600
WHOLE_TIMEOUT = 60

STATES = [
    StartingState(seed=7, keep_busy_nodes=True),
    StartingState(seed=19),
    StartingState(seed=42),
    # every GPU taken first, so no node stays whole-free under any profile
    StartingState(seed=5, fill=1.0, pending_gpus=8),
    # moves the scheduler would refuse, were they planned (issue [7])
    StartingState(seed=11, host_port=9000, guard=True),
]


def compactor_config(namespace: str) -> dict[str, Any]:
    """Only the test's pods may move; short polls and timeouts, so a run that goes wrong ends within the test's budget."""
    return {
        "movable": {"namespaces": [namespace]},
        # Deterministic search: `plan` and the plan `run --once` makes afresh from the same cluster are the same plan,
        # so the promise checked is the one printed (on the wall clock two runs may find different, equally valid plans).
        "solver": {"time_limit_seconds": 20, "workers": 2, "deterministic": True},
        "executor": {
            "after_drain": "uncordon",
            "poll_seconds": 0.5,
            "replacement_timeout_seconds": 120,
            "backoff_seconds": 1,
            "backoff_max_seconds": 5,
        },
    }


def run_once(config: Path, _: Path) -> CompactorRun:
    return run_compactor(
        "run", "--once", *kubeconfig_args(), "--config", str(config), "--output", "json", timeout=RUN_TIMEOUT
    )


def apply(config: Path, plan: Path) -> CompactorRun:
    return run_compactor(
        "apply",
        "--plan",
        str(plan),
        *kubeconfig_args(),
        "--config",
        str(config),
        "--output",
        "json",
        timeout=RUN_TIMEOUT,
    )


def plan_and_carry_out(
    state: StartingState,
    kube: Kube,
    gpu_fleet: Fleet,
    fleet_namespace: str,
    tmp_path: Path,
    carry_out: Callable[[Path, Path], CompactorRun],
    *,
    steering: str,
    tenant_namespace: str | None = None,
    overrides: dict[str, dict[str, Any]] | None = None,
    steering_why: str = "",
) -> None:
    """Build ``state``, `compactor plan --write`, ``carry_out(config, plan file)`` under the watch, and check every promise.

    ``steering`` is the mechanism the plan and the run must report; ``overrides`` are settings by group (``{"caps":
    {"max_concurrent_evictions": 4}}``), laid over ``compactor_config``'s."""
    clock = Stopwatch()
    frag.build(kube, fleet_namespace, gpu_fleet, state)
    waiting = pending_pods(kube, fleet_namespace)
    assert len(waiting) == (1 if state.pending_gpus else 0), f"pending pods before planning: {waiting}"
    config, written = tmp_path / "compactor.yaml", tmp_path / "plan.json"
    settings = compactor_config(fleet_namespace)
    for group, values in (overrides or {}).items():
        settings.setdefault(group, {}).update(values)
    if state.guard:
        # The guard needs a planned move onto a node that runs no pod of the mover's workload. Under host ports every
        # replica sits on a node of its own, and the capacity-weighted price (aims.move_cost.capacity_share) may
        # prefer plans whose every move goes where a replica of the same workload leaves (seen once in CI under
        # MostAllocated): this state plans with every move priced alike, the price it was built for.
        settings.setdefault("aims", {})["move_cost"] = {"capacity_share": 0.0}
    config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    guarded = guard_a_planned_target(kube, fleet_namespace, gpu_fleet, config) if state.guard else None
    clock.lap("setup")

    planned = run_compactor(
        "plan",
        *kubeconfig_args(),
        "--config",
        str(config),
        "--output",
        "json",
        "--write",
        str(written),
        timeout=PLAN_TIMEOUT,
    )
    assert planned.returncode == 0, planned.describe()
    plan = planned.json()
    assert plan.get("moves"), (
        f"the starting state {state.label} gave the planner nothing to do, so it tests nothing:\n{planned.describe()}"
    )
    if guarded is not None:
        refused = [
            m
            for m in plan["moves"]
            if (app_by_pod(kube, fleet_namespace).get(m["pod"].split("/")[1]), m["to"]) == guarded
        ]
        assert not refused, (
            f"the plan sends {guarded[0]} to {guarded[1]}, where the guard's anti-affinity keeps it out: {refused}"
        )
    if state.host_port:
        assert_no_port_clash(kube, fleet_namespace, plan)
    clock.lap("plan")

    assert plan["steering"]["mechanism"] == steering and steering_why in plan["steering"]["why"], (
        f"compactor plan names the steering in force: {plan['steering']}"
    )
    before = frag.whole_free_gpus(kube, gpu_fleet)
    tenant = Tenant(kube, tenant_namespace, gpu_fleet.selector) if tenant_namespace else nullcontext()
    with RunWatcher(kube, fleet_namespace) as watcher:
        with tenant:
            ran = carry_out(config, written)
        clock.lap("run")
        whole = settle(kube, fleet_namespace)
    observed = watcher.observed
    after = frag.whole_free_gpus(kube, gpu_fleet)
    clock.lap("settle")

    outcome = Outcome(
        state,
        plan,
        ran,
        observed,
        before,
        after,
        placed_now(kube, fleet_namespace, waiting),
        clock,
        steering=steering,
        steering_why=steering_why,
        tenant=tenant.result if isinstance(tenant, Tenant) else None,
    )
    publish(outcome.results_line())
    failures = [f"- {what}: {detail}" for what, ok, detail in outcome.checks(kube, gpu_fleet, whole) if not ok]
    assert not failures, (
        f"{state.label}: the cluster did not end where the plan said:\n"
        + "\n".join(failures)
        + f"\n\n{ran.describe()}\n\npods now:\n{describe_pods(frag.pods(kube, fleet_namespace))}"
    )


# --------------------------------------------------------------------------- measuring


class Stopwatch:
    def __init__(self) -> None:
        self.started = self.last = time.monotonic()
        self.laps: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.laps[name] = round(now - self.last, 1)
        self.last = now

    @property
    def total(self) -> float:
        return round(time.monotonic() - self.started, 1)


def app_by_pod(kube: Kube, namespace: str) -> dict[str, str]:
    return {name_of(p): frag.app_of(p) for p in frag.pods(kube, namespace)}


def guard_a_planned_target(kube: Kube, namespace: str, fleet: Fleet, config: Path) -> tuple[str, str]:
    """Plan, pick a move whose target runs no pod of the mover's workload, and guard that node against the workload.

    Returns (workload, node): the next plan must not send that workload there (the real scheduler would refuse it).
    """
    planned = run_compactor(
        "plan", *kubeconfig_args(), "--config", str(config), "--output", "json", timeout=PLAN_TIMEOUT
    )
    assert planned.returncode == 0, planned.describe()
    apps = app_by_pod(kube, namespace)
    where = {(frag.app_of(p), frag.node_of(p)) for p in frag.pods(kube, namespace)}
    for move in planned.json().get("moves") or []:
        app = apps.get(move["pod"].split("/")[1], "")
        if app and (app, move["to"]) not in where:
            frag.add_guard(kube, namespace, fleet, app, move["to"])
            return app, move["to"]
    raise AssertionError(
        f"no planned move targets a node free of the mover's workload, so no guard can test it:\n{planned.describe()}"
    )


def host_ports(pod: Obj) -> list[int]:
    return [
        int(c["hostPort"])
        for k in (pod.get("spec") or {}).get("containers") or []
        for c in k.get("ports") or []
        if c.get("hostPort")
    ]


def assert_no_port_clash(kube: Kube, namespace: str, plan: Obj) -> None:
    """No node ends with two pods binding one host port (kube-scheduler's NodePorts filter would refuse the second), and
    some planned move carries a port, so the rule is exercised."""
    now = {name_of(p): p for p in frag.pods(kube, namespace)}
    final = {name: frag.node_of(p) for name, p in now.items()}
    final.update({m["pod"].split("/")[1]: m["to"] for m in plan["moves"]})
    holders = Counter((port, final[name]) for name, p in now.items() for port in host_ports(p) if final[name])
    clashes = sorted(key for key, count in holders.items() if count > 1)
    assert not clashes, (
        f"the plan puts two pods binding one host port on a node (port, node): {clashes}; moves {plan['moves']}"
    )
    assert any(host_ports(now[m["pod"].split("/")[1]]) for m in plan["moves"]), (
        f"no planned move carries a host port: {plan['moves']}"
    )


def pending_pods(kube: Kube, namespace: str) -> list[str]:
    return sorted(name_of(p) for p in frag.pods(kube, namespace) if not frag.node_of(p))


def placed_now(kube: Kube, namespace: str, waiting: list[str]) -> dict[str, str]:
    """Pod that was pending before the run -> the node it runs on now, Ready ("" when still unbound or not Ready)."""
    now = {name_of(p): p for p in frag.pods(kube, namespace)}
    return {name: frag.node_of(now[name]) if name in now and is_running_ready(now[name]) else "" for name in waiting}


def settle(kube: Kube, namespace: str) -> tuple[bool, str]:
    """Wait until every Deployment is whole and Ready again, with no terminating pod; (done, what was seen last)."""
    try:
        return True, wait_for(
            frag.whole_again(kube, namespace), timeout=WHOLE_TIMEOUT, interval=1, what="every Deployment whole"
        )
    except AssertionError as exc:
        return False, str(exc)


def leftovers(kube: Kube, fleet: Fleet, observed: Observed) -> list[str]:
    """Nodes still cordoned (seen by the watch, or a fleet node now), tainted or annotated ``compactor.io/*``."""
    found = [f"{node} still cordoned" for node in observed.still_cordoned]
    for node in raw(kube.core.list_node).get("items") or []:
        name = name_of(node)
        spec = node.get("spec") or {}
        taints = [t for t in spec.get("taints") or [] if str(t.get("key", "")).startswith(COMPACTOR_ANNOTATION_PREFIX)]
        if spec.get("unschedulable") and name in fleet.names and name not in observed.still_cordoned:
            found.append(f"{name} cordoned")
        if taints:
            found.append(f"{name} tainted {taints}")
        if compactor_marks(node):
            found.append(f"{name} annotated {compactor_marks(node)}")
    parameters = get_or_none(kube.core.read_namespaced_config_map, "gpu-compactor-steering", STATE_NAMESPACE)
    if parameters is not None and parameters.get("data"):
        found.append(f"steering entries left in {STATE_NAMESPACE}/gpu-compactor-steering: {parameters['data']}")
    state = get_or_none(kube.core.read_namespaced_config_map, STATE_CONFIGMAP, STATE_NAMESPACE)
    if state is not None:
        found.append(
            f"executor state {STATE_NAMESPACE}/{STATE_CONFIGMAP} still there (plan {(state.get('data') or {}).get('planId')})"
        )
    return found


class Described(Protocol):
    """What a results line says of the starting state: its label and its seed (None: a state with no random choice)."""

    @property
    def label(self) -> str: ...

    @property
    def seed(self) -> int | None: ...


class Outcome:
    """What the plan promised beside what the cluster and the watch streams show."""

    def __init__(
        self,
        state: Described,
        plan: Obj,
        ran: CompactorRun,
        observed: Observed,
        before: dict[str, int],
        after: dict[str, int],
        placed: dict[str, str],
        clock: Stopwatch,
        *,
        steering: str,
        steering_why: str,
        tenant: TenantWaits | None,
    ) -> None:
        self.state, self.plan, self.ran, self.observed = state, plan, ran, observed
        self.before, self.after, self.placed, self.clock = before, after, placed, clock
        self.steering, self.steering_why, self.tenant = steering, steering_why, tenant
        try:
            self.report: Obj = ran.json()
        except AssertionError:
            self.report = {"status": f"no JSON report (exit code {ran.returncode})"}

    @property
    def moves(self) -> list[Obj]:
        return list(self.plan.get("moves") or [])

    @property
    def placements(self) -> list[Obj]:
        return list(self.plan.get("placedPending") or [])

    @property
    def executed(self) -> Obj:
        """The plan the run carried out (it plans afresh; seen in the executor's state), else ``compactor plan``'s."""
        return self.observed.run_plan or self.plan

    @property
    def gain(self) -> int:
        return sum(self.after.values()) - sum(self.before.values())

    def run_plan(self) -> str:
        """The run's own plan, summarised."""
        if not self.observed.run_plan:
            return "the run's plan was not seen in the executor's state"
        run_plan = self.observed.run_plan
        return (
            f"the run carried out plan {(run_plan.get('metadata') or {}).get('id')}: freedGpus {run_plan.get('freedGpus')}, "
            f"{len(run_plan.get('moves') or [])} moves, frees {sorted(run_plan.get('freedNodes') or [])}, "
            f"places {[(p.get('pod'), p.get('to')) for p in run_plan.get('placedPending') or []]}"
        )

    def replacements_on_plan(self) -> tuple[int, int]:
        """(moves of the executed plan whose owner got a new pod on the planned node, its moves): where the scheduler put them."""
        moves = self.executed.get("moves") or []
        wanted = Counter((str(m.get("owner", "")).split("/")[-1], str(m.get("to", ""))) for m in moves)
        landed = Counter((self.observed.owners.get(pod, ""), node) for pod, node in self.observed.created.items())
        return sum((wanted & landed).values()), len(moves)

    def results_line(self) -> dict[str, Any]:
        on_plan, planned = self.replacements_on_plan()
        return {
            "profile": os.environ.get(PROFILE_ENV, "default"),
            "state": self.state.label,
            "command": "apply" if "apply" in self.ran.args else "run --once",
            "seed": self.state.seed,
            "planFreedGpus": self.plan.get("freedGpus"),
            "planMoves": len(self.moves),
            "planFreedNodes": len(self.plan.get("freedNodes") or []),
            "planPlacedPending": len(self.placements),
            "runPlanFreedGpus": self.observed.run_plan.get("freedGpus"),
            "runPlanMoves": len(self.observed.run_plan.get("moves") or []),
            "measuredGain": self.gain,
            "wholeFreeBefore": sum(self.before.values()),
            "wholeFreeAfter": sum(self.after.values()),
            "placedPending": sum(1 for node in self.placed.values() if node),
            "evictions": len(self.observed.evicted),
            "replacementsOnPlannedNode": f"{on_plan}/{planned}",  # against the moves of the plan the run carried out
            "cordonSeconds": self.observed.total_cordon_seconds,
            "cordonedNodes": len(self.observed.cordon_seconds),
            "pdbViolations": len(self.observed.pdb_violations),
            "steering": (self.report.get("steering") or {}).get("mechanism"),
            "tenantLongestWaitSeconds": self.tenant.longest if self.tenant else None,
            "runStatus": self.report.get("status"),
            "runReason": self.report.get("reason", ""),
            "seconds": dict(self.clock.laps),
            "wallSeconds": self.clock.total,
        }

    def checks(self, kube: Kube, fleet: Fleet, whole: tuple[bool, str]) -> list[tuple[str, bool, str]]:
        """(what, held, detail) for every promise; all are evaluated, whatever fails first."""
        expected_free = (set(self.before) - set(self.executed.get("filledNodes") or [])) | set(
            self.executed.get("freedNodes") or []
        )
        planned_nodes = {
            str(p.get("pod", "")).split("/")[-1]: str(p.get("to", "")) for p in self.executed.get("placedPending") or []
        }
        placed = {pod: node for pod, node in self.placed.items() if node}
        watch_trouble = self.observed.errors + self.observed.gaps
        left = leftovers(kube, fleet, self.observed)
        printed, carried_out = _moves_of(self.plan), _moves_of(self.executed)
        return [
            (
                "the run reports succeeded",
                self.report.get("status") == "succeeded",
                f"report {self.report}; {self.run_plan()}",
            ),
            (
                "the run carried out the moves `compactor plan` printed (deterministic search, same cluster)",
                printed == carried_out,
                f"printed {printed}; carried out {carried_out}",
            ),
            (
                "net whole-free GPUs gained == plan freedGpus",
                self.gain == self.plan.get("freedGpus"),
                f"gained {self.gain} ({sum(self.before.values())} -> {sum(self.after.values())}), plan says {self.plan.get('freedGpus')}; "
                f"whole-free in the executed plan's picture but busy now: {sorted(expected_free - set(self.after))}; whole-free now but "
                f"not in that picture: {sorted(set(self.after) - expected_free)}; {self.run_plan()}",
            ),
            (
                "pending pods placed == plan placedPending",
                len(placed) == len(self.placements),
                f"placed {placed} of the pending {sorted(self.placed)}; `compactor plan` places {len(self.placements)}; {self.run_plan()}",
            ),
            (
                "each placed pending pod runs on the node the executed plan says",
                all(placed.get(pod) == node for pod, node in planned_nodes.items()),
                f"planned {planned_nodes}, running on {placed}; {self.run_plan()}",
            ),
            (
                "evictions == planned moves",
                len(self.observed.evicted) == len(self.moves),
                f"{len(self.observed.evicted)} pods evicted {sorted(self.observed.evicted.items())}; {len(self.moves)} planned moves; "
                f"{self.run_plan()}",
            ),
            (
                "no PDB below its desired healthy count (watched)",
                not self.observed.pdb_violations and not watch_trouble and self.observed.pdb_events > 0,
                f"violations {self.observed.pdb_violations[:10]}; watch errors/gaps {watch_trouble[:10]}; {self.observed.pdb_events} PDB events",
            ),
            (
                "no node left cordoned, tainted or annotated compactor.io/*, no steering entry left",
                not left,
                "; ".join(left),
            ),
            ("every Deployment whole and Ready again", whole[0], whole[1][-3000:]),
            (
                f"the run steered with {self.steering} and said why",
                (self.report.get("steering") or {}).get("mechanism") == self.steering
                and self.steering_why in str((self.report.get("steering") or {}).get("why")),
                f"report steering {self.report.get('steering')}",
            ),
            *self._steering_checks(),
        ]

    def _steering_checks(self) -> list[tuple[str, bool, str]]:
        checks = []
        if self.steering == "policy":
            fenced = set(self.executed.get("freedNodes") or []) | {
                str(p.get("to")) for p in self.executed.get("placedPending") or []
            }
            others = sorted(set(self.observed.cordon_seconds) - fenced)
            checks.append(
                (
                    "no node but those the plan frees or drains for a pending pod was ever cordoned (watched)",
                    not others,
                    f"also cordoned: {others}; fenced by the plan: {sorted(fenced)}",
                )
            )
        if self.tenant is not None:
            t = self.tenant
            checks.append(
                (
                    "another team's pods created during the run each got a node within 5 s",
                    t.created >= 3 and not t.unbound and t.longest <= 5.0 and not t.errors,
                    f"{t.created} created, longest wait {t.longest}s, unbound {t.unbound}, refused {t.errors[:5]}, "
                    f"watch reopened {len(t.watch_reopens)}x {t.watch_reopens[:2]}",
                )
            )
        return checks


def _moves_of(plan: Obj) -> list[tuple[str, str, str]]:
    return sorted((str(m.get("pod")), str(m.get("from")), str(m.get("to"))) for m in plan.get("moves") or [])


def publish(line: dict[str, Any]) -> None:
    text = json.dumps(line, sort_keys=False)
    print(f"\nE2E-RESULT {text}")
    target = os.environ.get(RESULTS_ENV)
    if target:
        with Path(target).open("a", encoding="utf-8") as fh:
            fh.write(text + "\n")
