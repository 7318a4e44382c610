"""Prevention: after a real run, the fill-first labels brought in line with the cluster as it is now
(``steering.fill_first``; the tiers: ``metrics/fill_first.py``; docs/prevention.md).

One merge patch per node whose label changes (its tier moved, it became whole-free or full, or the setting is off and
the label is still there), through the run's client: the Lease fences every write as it fences an eviction, and the
node guard admits this one label. A failed patch is a warning: labels are a hint to the scheduler, never a promise, and
the next run tries again.
"""

from __future__ import annotations

import logging

from compactor.actions.port.client import ClusterClient
from compactor.errors import ClusterError
from compactor.metrics.fill_first import FILL_FIRST_LABEL, fill_first_tiers
from compactor.metrics.fragmentation import compute_figures
from compactor.model.types import Snapshot
from compactor.settings.origins import Settings

log = logging.getLogger("compactor.prevention")


def label_fill_first(client: ClusterClient, snapshot: Snapshot, settings: Settings) -> dict[str, str | None]:
    """The label changes made (node -> its new tier, None: removed), from ``snapshot`` (read after the run)."""
    wanted = fill_first_tiers(compute_figures(snapshot).nodes) if settings.steering.fill_first else {}
    changes = {
        node.name: wanted.get(node.name)
        for node in snapshot.nodes
        if node.labels.get(FILL_FIRST_LABEL) != wanted.get(node.name)
    }
    made: dict[str, str | None] = {}
    for name, tier in sorted(changes.items()):
        try:
            client.patch_node(name, {"metadata": {"labels": {FILL_FIRST_LABEL: tier}}})
        except ClusterError as exc:
            log.warning(f"could not label node {name} {FILL_FIRST_LABEL}={tier}: {exc} (the next run tries again)")
            continue
        made[name] = tier
    if made:
        log.info(
            f"fill-first labels: {sum(t is not None for t in made.values())} set, {sum(t is None for t in made.values())} removed",
            extra={"nodes": made},
        )
    return made
