"""``FakeClock``: the executor's ``Clock`` in the fake cluster's simulated time."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from tests.fakecluster.objects import EPOCH

if TYPE_CHECKING:
    from tests.fakecluster.cluster import FakeCluster


class FakeClock:
    """``Clock`` in the cluster's simulated time: ``sleep`` moves the world forward."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster

    def now(self) -> datetime:
        return EPOCH + timedelta(seconds=self.cluster.time)

    def monotonic(self) -> float:
        return self.cluster.time

    def sleep(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("sleep length must be non-negative")
        self.cluster.advance(seconds)

    def checkpoint(self) -> None:
        return None
