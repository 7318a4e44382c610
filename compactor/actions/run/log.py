"""What one process saw of a run: not persisted, so a run resumed after a crash starts a new log (its persisted
half is ``RunState``, in the state ConfigMap; its given half the services ``Run`` is built with)."""

from __future__ import annotations

from dataclasses import dataclass, field

from compactor.actions.port.client import Obj


@dataclass
class RunLog:
    # which limit (max_evictions_per_cycle, max_run_seconds, max_holds_per_move) left moves for a later run
    capped: str = ""
    cap_detail: str = ""  # what reached it, when the limit alone does not say (the move that would hold too many nodes)
    # the limit cut the plan before the run began (a budget, max_evictions_per_cycle): what the run took it can do whole
    cut_before: bool = False
    notes: list[str] = field(default_factory=list)  # what did not go as planned without stopping the run
    recuts: dict[str, str] = field(default_factory=dict)  # node -> success | failed | timeout
    # moved pod -> the DRA devices its replacement's claims got ("driver/pool/device"), read once it was Ready
    devices: dict[str, list[str]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # planned pods found gone or elsewhere
    # pods whose eviction was sent (accepted, or refused for good), or whose make-before-break surge began; with a resumed
    # run, the moves in flight when it stopped: what the circuit breaker may count (``RunReport.failed_pods``)
    attempted: list[str] = field(default_factory=list)
    finishing: bool = False  # the run reached its end steps (re-cuts, pending pods placed): only then did it place any
    started: float = 0.0  # monotonic time this process began the run (max_run_seconds counts from here)
    held_since: float = 0.0
    held_seconds: float = 0.0  # node-seconds of holds so far
    holds: int = 0  # node holds made so far
    dra_nodes: frozenset[str] = frozenset()  # nodes whose GPUs are in ResourceSlices, read as the run began
    # node -> (node, its pods) read as the run began
    first_reads: dict[str, tuple[Obj, list[Obj]]] = field(default_factory=dict)
