"""When a run concludes the steering policy is not in effect: evidence kept on the parameter ConfigMap, weighed, expiring.

A replacement that arrives without the pin although the policy should have pinned it (its owner's entry was written, its
owner a ReplicaSet or StatefulSet in the binding's namespaces) is one piece of evidence: that move fails, and the owner is
recorded in the annotation ``compactor.io/policy-not-in-effect`` (JSON: first and last seen, the owners, what was seen).
One workload can be alone in defeating the pin (a webhook of its own that rewrites its pods' affinity, say), so runs
conclude the policy is not in effect, and steer with holds instead, only once replacements of ``EVIDENCE_NEEDED``
different workloads arrived unpinned; and only for ``EVIDENCE_LASTS`` after the last of them, after which the policy is
tried again. An admin who fixed the cause removes the annotation to try it at once. While concluded, every run says so
(its steering ``why``, the metric ``gpu_compactor_steering_policy_not_in_effect``, the alert
``GpuCompactorSteeringPolicyNotInEffect``): never a silent switch of mechanism.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

NOT_IN_EFFECT = "compactor.io/policy-not-in-effect"
EVIDENCE_NEEDED = 2  # different workloads whose replacement arrived unpinned
EVIDENCE_LASTS = timedelta(hours=24)
MAX_OWNERS = 10  # owners kept: enough to weigh, small enough for an annotation
MAX_WHAT = 1024  # characters of the last message kept


@dataclass(frozen=True)
class Evidence:
    first: datetime
    last: datetime
    owners: tuple[str, ...]  # owner uids whose replacement arrived unpinned, oldest first
    what: str  # the last thing seen, for people

    def concluded(self, now: datetime) -> bool:
        """Enough workloads, recently enough, to steer with holds instead of the policy."""
        return len(self.owners) >= EVIDENCE_NEEDED and now < self.expires

    @property
    def expires(self) -> datetime:
        return self.last + EVIDENCE_LASTS

    def to_annotation(self) -> str:
        return json.dumps(
            {"first": _iso(self.first), "last": _iso(self.last), "owners": list(self.owners), "what": self.what},
            separators=(",", ":"),
        )


def read_evidence(annotation: str | None) -> Evidence | None:
    """The evidence an annotation holds; one made by an older gpu-compactor ("<time> <message>") counts as one owner."""
    if not annotation:
        return None
    try:
        raw = json.loads(annotation)
        return Evidence(
            first=_parse(raw["first"]),
            last=_parse(raw["last"]),
            owners=tuple(str(o) for o in raw["owners"]),
            what=str(raw.get("what", "")),
        )
    except (ValueError, KeyError, TypeError):
        stamp, _, what = annotation.partition(" ")
        try:
            seen = _parse(stamp)
        except ValueError:
            seen = datetime.min.replace(tzinfo=UTC)  # unreadable: as old as can be, so it has expired
        return Evidence(first=seen, last=seen, owners=("unknown",), what=what or annotation)


def add_evidence(current: str | None, owner: str, what: str, now: datetime) -> Evidence:
    """``current`` (the annotation as it is) with one more replacement of ``owner`` seen unpinned ``now``; evidence that
    has expired starts over."""
    before = read_evidence(current)
    if before is None or now >= before.expires:
        return Evidence(first=now, last=now, owners=(owner,), what=what[:MAX_WHAT])
    owners = (*(o for o in before.owners if o != owner), owner)
    return Evidence(first=before.first, last=now, owners=owners[-MAX_OWNERS:], what=what[:MAX_WHAT])


def describe(evidence: Evidence, now: datetime) -> str:
    """The evidence in words, for a run's steering ``why``."""
    workloads = f"{len(evidence.owners)} workload(s)"
    if evidence.concluded(now):
        return (
            f"replacements of {workloads} arrived unpinned (last {_iso(evidence.last)}: {evidence.what}); the policy is "
            f"tried again after {_iso(evidence.expires)}"
        )
    return f"a replacement of {workloads} arrived unpinned (last {_iso(evidence.last)}), fewer than {EVIDENCE_NEEDED}"


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _parse(text: str) -> datetime:
    moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
