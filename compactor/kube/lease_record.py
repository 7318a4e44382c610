"""The Lease as data: ``LeaseRecord`` (its leader-election fields, read from the API's JSON), MicroTimes, our identity.

Apart from ``lease.py`` because none of it talks to the API server or takes a lock: it is what the election
there decides from and what a one-shot command's refusal (``acquire_once``) names, plain data whatever the
election's locking and timing. ``lease.py`` re-exports ``identity`` and ``parse_time``, the names its importers use.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


def identity() -> str:
    """The leader-election identity: the pod's name (``POD_NAME``), else host name plus a random suffix."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def format_micro_time(when: datetime) -> str:
    """A metav1.MicroTime: ``2026-01-01T00:00:00.000000Z``."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: object) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@dataclass(frozen=True)
class LeaseRecord:
    """The leader-election fields of a Lease as last read or written."""

    holder: str
    lease_seconds: int
    acquire_time: datetime | None
    renew_time: datetime | None
    transitions: int
    resource_version: str

    @classmethod
    def from_object(cls, obj: dict[str, Any], default_seconds: int) -> LeaseRecord:
        spec = obj.get("spec") or {}
        seconds = spec.get("leaseDurationSeconds")
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            lease_seconds=seconds if isinstance(seconds, int) and seconds > 0 else default_seconds,
            acquire_time=parse_time(spec.get("acquireTime")),
            renew_time=parse_time(spec.get("renewTime")),
            transitions=int(spec.get("leaseTransitions") or 0),
            resource_version=str((obj.get("metadata") or {}).get("resourceVersion") or ""),
        )

    @property
    def key(self) -> tuple[str, int, str, str, int]:
        """What client-go compares to notice a change: the record, not the clock of whoever wrote it."""
        return self.holder, self.lease_seconds, str(self.acquire_time), str(self.renew_time), self.transitions
