"""Whether the state guard (``manifests/guard/state.yaml``) protects this installation's state, asked when a run that acts
begins (issue 43).

The guard names the namespace it watches and the one user it lets write the compactor's ConfigMaps in its two
matchConditions, as literals: an installation moved to another namespace or run under another service account leaves
it watching nothing here, or refusing every state write this run would make. Neither shows until something goes wrong,
so each acting run reads the policy and asks the API server who it is (a SelfSubjectReview), and says what it finds:

* not installed: a warning, once per process (the compactor's own checks, ``trust.py``, still refuse a state record
  they cannot vouch for; the guard keeps one from being written at all);
* watching another namespace: a warning each run (it guards nothing of this installation);
* admitting another user's writes in this namespace: the run fails before it changes anything (``GuardMismatch``): its
  every state write would be refused, so it could not record what it does;
* conditions it cannot read (edited by hand): a warning.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from compactor.actions.port.client import ClusterClient, Obj
from compactor.errors import ClusterError, CompactorError

log = logging.getLogger("compactor.guards")

STATE_GUARD = "gpu-compactor-state-guard"
_NAMESPACE = re.compile(r"request\.namespace\s*==\s*'([^']*)'")
_WRITER = re.compile(r"request\.userInfo\.username\s*!=\s*'([^']*)'")
_warned_absent = False


class GuardMismatch(CompactorError):
    """The state guard of this namespace admits another user's writes only: every state write of this run would be
    refused."""


@dataclass(frozen=True)
class StateGuard:
    """What the installed guard says: the namespace it watches and the user it lets write ("" when it cannot be read)."""

    namespace: str
    writer: str


def read_guard(policy: Obj) -> StateGuard:
    """The namespace and writer named by the policy's matchConditions."""
    expressions = " ".join(
        str(c.get("expression") or "") for c in (policy.get("spec") or {}).get("matchConditions") or []
    )
    namespace, writer = _NAMESPACE.search(expressions), _WRITER.search(expressions)
    return StateGuard(namespace.group(1) if namespace else "", writer.group(1) if writer else "")


def judge(guard: StateGuard | None, *, namespace: str, username: str | None) -> tuple[int, str]:
    """What to say about ``guard`` for an installation keeping its state in ``namespace`` and acting as ``username``
    (None: unknown): a logging level and a message; ``logging.ERROR`` means the run must not go on."""
    if guard is None:
        return logging.WARNING, (
            f"the state guard ({STATE_GUARD}, manifests/guard) is not installed: anyone who may create ConfigMaps in "
            f"{namespace} may plant a run state or history; install it (kubectl apply -k manifests/guard)"
        )
    if not guard.namespace or not guard.writer:
        return logging.WARNING, (
            f"the state guard {STATE_GUARD} names no namespace or service account this run can read in its "
            "matchConditions: whether it guards this installation is not checked"
        )
    if guard.namespace != namespace:
        return logging.WARNING, (
            f"the state guard {STATE_GUARD} watches namespace {guard.namespace}, this installation keeps its state in "
            f"{namespace}: it guards nothing here (edit both matchConditions of manifests/guard/state.yaml)"
        )
    if username is not None and username != guard.writer:
        return logging.ERROR, (
            f"the state guard {STATE_GUARD} lets only {guard.writer} write the state in {namespace}, and this run is "
            f"{username}: every state write would be refused (403). Run as the service account (in the cluster, or "
            "with a token of `kubectl create token`) or edit the guard's matchConditions"
        )
    return logging.DEBUG, f"the state guard {STATE_GUARD} guards namespace {namespace} for {guard.writer}"


def check_state_guard(client: ClusterClient, namespace: str) -> None:
    """Read the guard and who this client is, say what ``judge`` finds; raise ``GuardMismatch`` on an error."""
    global _warned_absent
    try:
        policy = client.get_admission("ValidatingAdmissionPolicy", STATE_GUARD)
        guard = read_guard(policy) if policy is not None else None
        username = client.who_am_i() if guard is not None and guard.namespace == namespace else None
    except ClusterError as exc:  # an RBAC of an older install: the run goes on unchecked, and says so
        log.warning(f"the state guard {STATE_GUARD} could not be read, so it is not checked: {exc}")
        return
    level, message = judge(guard, namespace=namespace, username=username)
    if level >= logging.ERROR:
        raise GuardMismatch(message)
    if guard is None:
        if _warned_absent:
            return
        _warned_absent = True
    log.log(level, message)
