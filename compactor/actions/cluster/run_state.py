"""The run-state record: what a run has done and is about to do, written to a ConfigMap before each change.

One schema, read and written here only, by the executor as it goes and by recovery after a
crash. On the API server it is the ConfigMap ``gpu-compactor-state`` (namespace
``executor.state_namespace``), one key per field, each value JSON text (the plan gzipped past
32 KiB), so ``kubectl get configmap -o yaml`` stays readable and a state written by an earlier
version, which lacked the newer keys, still reads. ``RunState.from_data`` refuses anything that
does not fit the schema (``StateUnreadable``): recovery then discards the state and releases nodes
by their marks instead of resuming a run it cannot understand.
"""

from __future__ import annotations

import base64
import binascii
import enum
import gzip
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from compactor.actions.port.annotations import STATE_CONFIGMAP
from compactor.planner.plan import CompactionPlan

__all__ = [
    "PHASES",
    "STATE_CONFIGMAP",
    "InFlight",
    "Phase",
    "Resume",
    "RunState",
    "StateUnreadable",
    "Surge",
    "decode_plan",
    "encode_plan",
]
# The plan as recovery needs it: moves, nodes, placements. The figures before/after grow with the cluster
# (per node) and would push the state ConfigMap past the API server's 1 MiB limit at a few hundred nodes.
_FIGURES_DROPPED: dict[str, Any] = {"before": {}, "after": {}, "explanations": {}}
_PLAIN_PLAN_LIMIT = 32 * 1024
_GZIP_PREFIX = "gzip+base64:"


class StateUnreadable(ValueError):
    """The state ConfigMap holds something this version cannot resume; the message says what."""


class Phase(enum.StrEnum):
    CORDONING = "cordoning"  # fencing the nodes the plan frees (and those drained for a pending pod)
    EVICTING = "evicting"  # moves under way
    FINISHING = "finishing"  # every move done: re-cuts, pending pods, releases
    ROLLING_BACK = "rollingBack"  # aborted: undoing this run's fences, never resumed
    DONE = "done"


class Resume(enum.Enum):
    """How a run carries on from the phase its state records (a new run starts in ``CORDONING``)."""

    FROM_THE_START = "validated again, fenced where it is not yet, each move not done carried out, finished"
    FENCES_PLACED = "as from the start, but every fence was placed: one found lifted stays lifted, its moves refused"
    FINISH = "every move is done: straight to the re-cuts, the pending pods and the releases"
    ROLL_BACK = "never resumed: recovery finishes the rollback the run had begun"


# The phases in the order a run goes through them (any of them may turn into ROLLING_BACK), each with how a run found in
# it carries on: the executor reads where to pick up, recovery whether to resume at all.
PHASES: dict[Phase, Resume] = {
    Phase.CORDONING: Resume.FROM_THE_START,
    Phase.EVICTING: Resume.FENCES_PLACED,
    Phase.FINISHING: Resume.FINISH,
    Phase.ROLLING_BACK: Resume.ROLL_BACK,
    # never saved (the state is deleted as a run reaches it): a state that says so anyway is taken from the start
    Phase.DONE: Resume.FROM_THE_START,
}


class Surge(BaseModel):
    """A make-before-break move under way (``actions/services/surge.py``): what a restarted process needs to finish or undo it."""

    model_config = ConfigDict(extra="ignore")

    deployment: str  # its name, in the pod's namespace
    replicas: int  # spec.replicas before the surge (restored after it)
    pod_uid: str  # the old pod's uid
    deletion_cost: str | None = None  # the old pod's own pod-deletion-cost annotation, restored when a surge is undone


class InFlight(BaseModel):
    """An eviction (or a make-before-break surge) sent, or about to be, whose replacement is not confirmed yet."""

    model_config = ConfigDict(extra="ignore")

    owner: str  # the controller's uid
    # uids of the owner's pods before the eviction: a new uid is the replacement
    siblings: list[str] = Field(default_factory=list)
    # the evicted pod's terminationGracePeriodSeconds: a StatefulSet replaces it only once it is gone
    grace: float = 0.0
    # label selector of the owner's pods (its spec.selector): the narrow read that finds the replacement
    selector: str = ""
    target: str = ""  # the node the plan sends the replacement to
    surge: Surge | None = None  # make-before-break: the owner's Deployment scaled up instead of an eviction


class RunState(BaseModel):
    """Everything a restarted process needs to resume or roll back the run; nothing it could read from the cluster."""

    model_config = ConfigDict(extra="forbid")

    plan_id: str
    phase: Phase = Phase.CORDONING
    # nodes this run fenced (and only those), written before each fence; the key keeps its name (state older runs wrote)
    cordoned: list[str] = Field(default_factory=list)
    done: list[str] = Field(default_factory=list)  # pods whose move is over (replaced, or found gone)
    # pod -> why it was not evicted (a rule failed at its eviction)
    refused: dict[str, str] = Field(default_factory=dict)
    inflight: dict[str, InFlight] = Field(default_factory=dict)  # pod -> its eviction in flight
    held: list[str] = Field(default_factory=list)  # nodes fenced for a moment so that a pod binds on its planned node
    pins: dict[str, str] = Field(default_factory=dict)  # owner uid -> node: steering entries written (policy mechanism)
    # node -> pending pod it is reserved for (taint + toleration)
    reserved: dict[str, str] = Field(default_factory=dict)
    free_before: dict[str, int] = Field(default_factory=dict)  # whole-free GPU nodes when the run began
    evictions: int = 0
    reason: str = ""  # why a rollback started
    updated_at: str = ""

    @property
    def resume(self) -> Resume:
        """How this run carries on from its phase (``PHASES``)."""
        return PHASES[self.phase]

    def to_data(self, plan_record: str) -> dict[str, str]:
        """The ConfigMap's data: one key per field (JSON text), the plan as ``encode_plan`` made it."""
        return {
            "planId": self.plan_id,
            "phase": self.phase.value,
            "updatedAt": self.updated_at,
            "cordoned": json.dumps(self.cordoned),
            "done": json.dumps(self.done),
            "refused": json.dumps(self.refused),
            "inflight": json.dumps({pod: flight.model_dump() for pod, flight in self.inflight.items()}),
            "held": json.dumps(self.held),
            "pins": json.dumps(self.pins),
            "reserved": json.dumps(self.reserved),
            "freeBefore": json.dumps(self.free_before),
            "evictions": str(self.evictions),
            "reason": self.reason,
            "plan": plan_record,
        }

    @classmethod
    def from_data(cls, data: dict[str, str]) -> tuple[RunState, CompactionPlan]:
        """The state and its plan, or ``StateUnreadable`` naming the field that does not fit."""
        try:
            plan = decode_plan(data.get("plan") or "")
            fields = {
                "plan_id": data.get("planId") or plan.metadata.id,
                "phase": data.get("phase") or Phase.CORDONING.value,
                "cordoned": _json(data, "cordoned", "[]"),
                "done": _json(data, "done", "[]"),
                "refused": _json(data, "refused", "{}"),
                "inflight": _json(data, "inflight", "{}"),
                "held": _json(data, "held", "[]"),
                "pins": _json(data, "pins", "{}"),
                "reserved": _json(data, "reserved", "{}"),
                "free_before": _json(data, "freeBefore", "{}"),
                "evictions": int(data.get("evictions") or 0),
                "reason": data.get("reason") or "",
                "updated_at": data.get("updatedAt") or "",
            }
            return cls.model_validate(fields), plan
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(p) for p in error["loc"])
            raise StateUnreadable(
                f"state ConfigMap {STATE_CONFIGMAP} is unreadable ({where}: {error['msg']})"
            ) from None
        except ValueError as exc:
            raise StateUnreadable(
                f"state ConfigMap {STATE_CONFIGMAP} is unreadable ({type(exc).__name__}: "
                f"{str(exc).splitlines()[0][:200]})"
            ) from None


def _json(data: dict[str, str], key: str, empty: str) -> Any:
    return json.loads(data.get(key) or empty)


def encode_plan(plan: CompactionPlan) -> str:
    """The plan as recovery needs it: no figures, no move explanations or request vectors (they grow with the cluster),
    compact JSON, gzipped and base64-encoded past 32 KiB, so a 2,000-move plan still fits well inside a ConfigMap."""
    moves = [m.model_copy(update={"reason": "", "requests": {}}) for m in plan.moves]
    slim = plan.model_copy(update={**_FIGURES_DROPPED, "moves": moves})
    text = json.dumps(slim.model_dump(by_alias=True, mode="json"), separators=(",", ":"))
    if len(text) <= _PLAIN_PLAN_LIMIT:
        return text
    return _GZIP_PREFIX + base64.b64encode(gzip.compress(text.encode(), mtime=0)).decode()


def decode_plan(text: str) -> CompactionPlan:
    """The plan of a state record (plain or gzipped JSON); ``ValueError``/``ValidationError`` when it is not one."""
    if text.startswith(_GZIP_PREFIX):
        try:
            text = gzip.decompress(base64.b64decode(text[len(_GZIP_PREFIX) :], validate=True)).decode()
        except (OSError, EOFError, binascii.Error) as exc:
            raise ValueError(f"the gzipped plan is damaged: {exc}") from None
    return CompactionPlan.model_validate_json(text)
