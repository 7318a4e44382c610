"""Steering by admission policy: one entry ``<owner uid>: <node>`` in the parameter ConfigMap per move in flight.

Per move: the target's room is read narrowly (the node and its pods), the entry is recorded in
the run state and then written (merge patch with the ConfigMap's resourceVersion), the eviction
follows; the owner's next pod is created pinned to the target by the policy
(``manifests/steering/policy.yaml``); once it is bound, the entry goes (state first, then the
ConfigMap). No node is fenced, so no other workload is held up.

What can go wrong, and what happens:

* the replacement arrives without the pin (policy or binding not in effect): the landing check
  stops the run, with a Warning Event ``CompactorSteeringFailed`` saying so;
* the pinned replacement cannot bind (its target lost the room) within ``steer_timeout_seconds``:
  the entry goes, the Pending replacement is evicted (a Pending pod is evicted without asking its
  PodDisruptionBudget), its owner recreates it unpinned, and the run stops and rolls back;
* the owner created another pod while the entry existed (a scale-up) and it cannot bind: once the
  move is over it is evicted the same way, so it is recreated unpinned.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from compactor.actions.cluster import events
from compactor.actions.cluster.live_pods import controller_uid, grace_seconds, is_terminating, pod_key
from compactor.actions.cluster.owners import owner_pods
from compactor.actions.cluster.patching import patch_config_map_fresh
from compactor.actions.port.client import ClusterClient, EvictionOutcome, Obj
from compactor.actions.port.objects import ObjectView, PodView
from compactor.actions.run.context import Abort, AbortReason, NoRoom, Run
from compactor.actions.run.steerer import Mechanism
from compactor.actions.steering.evidence import NOT_IN_EFFECT, add_evidence
from compactor.actions.steering.pin import steered_to
from compactor.actions.steering.room import room_for
from compactor.errors import ClusterError
from compactor.model.parse import parse_pod
from compactor.planner.plan import Move, Placement
from compactor.planner.rules.movability import Steerability

log = logging.getLogger("compactor.steering")


class PolicySteerer:
    mechanism = Mechanism.POLICY
    exact = True
    parallel = True
    # an entry removed at a stop would let the replacement of an eviction in flight arrive unpinned
    release_on_stop = False

    def __init__(self, why: str, steerability: Steerability) -> None:
        self.why = why
        self.steerability = steerability
        # the parameter ConfigMap as the last patch returned it (its resourceVersion)
        self.parameters: Obj | None = None
        self._pending_since: dict[str, float] = {}  # pod -> when this process first saw its pinned replacement Pending
        self._allowance: dict[
            str, float
        ] = {}  # pod -> grace left to pods still terminating on its target when it was pinned
        self._movers: dict[str, Obj] = {}  # pod -> as read before its eviction, while its move is in flight

    def prepare(self, run: Run, move: Move, pod: Obj) -> None:
        target = run.client.get_node(move.to_node)
        on_target = run.client.list_pods(node_name=move.to_node)
        arriving = on_target + self._arriving(run, move.to_node, on_target)
        room = room_for(target, arriving, pod, target=move.to_node, dra=run.log.dra_nodes)
        if not room.fits:
            lacking = ", ".join(f"{r} {v}" for r, v in sorted(room.short.items())) or "the node is gone"
            raise NoRoom(move.pod, move.to_node, lacking)
        self._allowance[move.pod] = max((grace_seconds(p) for p in on_target if is_terminating(p)), default=0.0)
        self._movers[move.pod] = pod
        # saved before engage writes it: recovery removes an entry not in a state
        run.state.pins[controller_uid(pod)] = move.to_node

    def _arriving(self, run: Run, target: str, on_target: list[Obj]) -> list[Obj]:
        """Moves in flight to ``target`` whose replacement is not bound there yet: their room is taken already (concurrent
        evictions), so each counts as a copy of the pod it replaces, bound to ``target``."""
        arriving = []
        for key, mover in self._movers.items():
            flight = run.state.inflight.get(key)
            if flight is None or flight.target != target or key in run.state.done:
                continue
            landed = any(controller_uid(p) == flight.owner and PodView(p).uid not in flight.siblings for p in on_target)
            if not landed:
                arriving.append(
                    {
                        **mover,
                        "spec": {**PodView(mover).spec, "nodeName": target},
                        "metadata": {**PodView(mover).metadata, "name": f"{key}-arriving"},
                    }
                )
        return arriving

    def engage(self, run: Run, move: Move) -> None:
        self._write(run, {run.state.inflight[move.pod].owner: move.to_node})

    def observe(self, run: Run, move: Move, fresh: list[Obj]) -> None:
        owner = run.state.inflight[move.pod].owner
        for pod in fresh:
            node = PodView(pod).node_name
            if node and not any(steered_to(p) for p in fresh):
                message = (
                    f"replacement {pod_key(pod)} for {move.pod} was created without the steering pin and bound to {node}: "
                    f"MutatingAdmissionPolicy {run.settings.steering.policy_name} is not in effect (its binding missing or not "
                    "matching, the pod's creator not among its creators, or the API server not reading its parameters)"
                )
                if self.should_pin(pod):
                    self._record_evidence(run, owner, message)
                self._failed(run, pod, message)
            if node:
                self._unpin(run, owner)
        waiting = [p for p in fresh if steered_to(p) == move.to_node and not PodView(p).node_name]
        if not waiting:
            self._pending_since.pop(move.pod, None)
            return
        since = self._pending_since.setdefault(move.pod, run.clock.monotonic())
        limit = run.settings.steering.steer_timeout_seconds + self._allowance.get(move.pod, 0.0)
        if run.clock.monotonic() - since >= limit:
            self._unpin(run, owner)
            outcomes = [evict_pending(run, pod, move.to_node) for pod in waiting]
            if EvictionOutcome.CONFLICT in outcomes:
                return  # changed since read (bound at the last moment, most likely): the next look sees where
            self._failed(
                run,
                waiting[0],
                f"replacement {pod_key(waiting[0])} for {move.pod} is pinned to {move.to_node} but did not "
                f"bind within {limit:g}s (steer_timeout_seconds): the node lost the room; unpinned and "
                "evicted while Pending, its owner recreates it unpinned",
            )

    def after_move(self, run: Run, move: Move, fresh: list[Obj]) -> None:
        self._movers.pop(move.pod, None)
        self._pending_since.pop(move.pod, None)
        self._allowance.pop(move.pod, None)
        self._unpin(run, run.state.inflight[move.pod].owner)
        for (
            pod
        ) in fresh:  # pinned pods the owner made besides the replacement (a scale-up meanwhile) and that wait for room
            if _waits_pinned(pod):
                evict_pending(run, pod, steered_to(pod))

    def before_placement(self, run: Run, placement: Placement, pod: Obj) -> None:
        return None  # the node drained for it is reserved for it (steps/steer.py); nothing else is held

    def after_placement(self, run: Run) -> None:
        return None

    def release(self, run: Run) -> None:
        """Every entry of the run goes; a replacement pinned and still Pending is evicted, so its owner recreates it unpinned."""
        if not run.state.pins:
            return
        owners = dict(run.state.pins)
        with run.write_ahead() as state:  # an entry not in the state is removed by recovery
            state.pins.clear()
        self._write(run, dict.fromkeys(owners))
        for pod_key_, flight in run.state.inflight.items():
            if flight.owner not in owners:
                continue
            namespace = pod_key_.split("/", 1)[0]
            for pod in owner_pods(run.client, namespace, flight.owner, flight.selector):
                if _waits_pinned(pod):
                    evict_pending(run, pod, steered_to(pod))

    def step_aside(self, run: Run) -> None:
        return None  # a pin touches only its owner's next pod: nothing else waits on it

    def step_in(self, run: Run, move: Move, pod: Obj) -> None:
        return None

    def preflight(self, run: Run, move: Move, *, fencing: Collection[str]) -> None:
        return None  # a pin touches only its owner's next pod: nothing limits the first move

    def _unpin(self, run: Run, owner: str) -> None:
        """The entry for ``owner`` goes from the ConfigMap, then from the state (saved with the move's end): a crash in between
        leaves the state naming an entry that is gone, which a resumed run removes again at no cost."""
        if owner not in run.state.pins:
            return
        self._write(run, {owner: None})
        del run.state.pins[owner]

    def _write(self, run: Run, entries: dict[str, str | None]) -> None:
        self.parameters = write_entries(run.client, run.settings.steering.policy_name, entries, current=self.parameters)
        if self.parameters is None:
            raise Abort(
                AbortReason.STEERING_FAILED,
                f"the steering parameter configmap {run.settings.executor.state_namespace}/{run.settings.steering.policy_name} is gone",
            )

    def should_pin(self, pod: Obj) -> bool:
        """Whether the policy was meant to pin ``pod``: only then is its arriving unpinned evidence against the policy."""
        return self.steerability.reason(parse_pod(pod, source="steering")) is None

    def _record_evidence(self, run: Run, owner: str, message: str) -> None:
        """One more workload's replacement seen unpinned, on the parameter ConfigMap (``evidence.py``): enough of them, and
        the next runs steer with holds (``detect.find_policy``) until it expires or an admin removes it."""

        def weighed(config_map: Obj) -> Obj:
            current = ObjectView(config_map).annotations.get(NOT_IN_EFFECT)
            evidence = add_evidence(current, owner, f"{run.stamp()} {message}", run.clock.now())
            return {"metadata": {"annotations": {NOT_IN_EFFECT: evidence.to_annotation()}}}

        try:
            self.parameters = patch_config_map_fresh(
                run.client, run.settings.steering.policy_name, weighed, current=self.parameters
            )
        except ClusterError as exc:
            log.warning("could not record the steering policy's evidence", extra={"error": str(exc)})

    @staticmethod
    def _failed(run: Run, pod: Obj, message: str) -> None:
        run.event(events.steering_failed(pod_key(pod), message))
        raise Abort(AbortReason.STEERING_FAILED, message)


def _waits_pinned(pod: Obj) -> bool:
    """Pinned by the policy, not bound, not on its way out: it waits for room on the node it is pinned to."""
    view = PodView(pod)
    return bool(steered_to(pod)) and not view.node_name and not view.terminating


def write_entries(
    client: ClusterClient, name: str, entries: dict[str, str | None], *, current: Obj | None = None
) -> Obj | None:
    """Merge ``entries`` into the parameter ConfigMap (None removes one) against its resourceVersion (``current``: the object
    as last seen, re-read on a conflict); the ConfigMap as patched, None when it does not exist."""
    return patch_config_map_fresh(client, name, lambda _cm: {"data": entries}, current=current)


def evict_pending(run: Run, pod: Obj, node: str) -> EvictionOutcome:
    """A pinned pod that cannot bind stays Pending for good (affinity is immutable): evicted while Pending (the API server
    asks no PodDisruptionBudget for a Pending pod), its owner recreates it, unpinned once the entry is gone.

    Only the pod as read, unbound: the eviction carries its resourceVersion, so one that bound since (still phase Pending
    while its containers start, which the API server would evict without asking its PodDisruptionBudget) answers 409
    and stays (``CONFLICT``). The eviction's outcome."""
    view = PodView(pod)
    result = run.client.evict(view.namespace, view.name, uid=view.uid, resource_version=view.resource_version or "")
    if result.outcome == EvictionOutcome.CONFLICT:
        log.info(
            "a pinned pod changed since it was read Pending (bound, most likely): not evicted",
            extra={"pod": pod_key(pod), "node": node},
        )
        return result.outcome
    if result.outcome in (EvictionOutcome.EVICTED, EvictionOutcome.GONE):
        run.event(events.unpinned_pending(pod_key(pod), node, run.plan_id))
        log.warning(
            run.said("evicted a pinned pod that could not bind", "would evict a pinned pod that cannot bind (dry run)"),
            extra={"pod": pod_key(pod), "node": node},
        )
    else:
        run.note(
            f"pod {pod_key(pod)} is pinned to {node} and cannot bind; evicting it failed ({result.status} {result.message})"
        )
    return result.outcome
