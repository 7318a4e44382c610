"""The DRA devices a pod's claims got, read from the claims its status names, against those the plan expected.

A replacement (or a pending pod the plan placed) whose GPUs come through dynamic resource allocation has its claims
read once it is bound: the devices it got (``driver/pool/device``) go into the run's report (``draDevices``) and log.
Where the plan named the devices first fit would give (partitionable devices, ``Move.devices``/``Placement.devices``)
and the allocator gave others, the run says so: the room the plan counted on that node may not be where it thought.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from compactor.actions.cluster.live_pods import pod_key
from compactor.actions.port.client import Obj
from compactor.actions.port.objects import ObjectView, PodView
from compactor.actions.run.context import Run
from compactor.errors import ClusterError

log = logging.getLogger("compactor.executor")


def claimed_devices(run: Run, pod: Obj) -> list[str]:
    view = PodView(pod)
    status = view.status
    names = [str(s.get("resourceClaimName") or "") for s in status.get("resourceClaimStatuses") or ()]
    names.append(str((status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName") or ""))
    namespace = view.namespace
    got: list[str] = []
    for name in filter(None, names):
        try:
            claim = run.client.get_resource_claim(namespace, name)
        except ClusterError as exc:
            got.append(f"{name}: not read ({exc})")
            continue
        allocation = ObjectView(claim).status.get("allocation") if claim is not None else None
        results = ((allocation or {}).get("devices") or {}).get("results")
        got += [f"{r.get('driver')}/{r.get('pool')}/{r.get('device')}" for r in results or ()]
    return got


def note_devices(run: Run, planned: str, pod: Obj, expected: Sequence[str] = ()) -> None:
    """Record what ``pod`` (the replacement of, or the pending pod, ``planned``) got; say where it is not ``expected``."""
    got = claimed_devices(run, pod)
    if not got:
        return
    run.log.devices[planned] = got
    node = PodView(pod).node_name
    log.info(
        run.said("replacement's devices", "replacement's devices (dry run)"),
        extra={"pod": pod_key(pod), "node": node, "devices": got},
    )
    given = sorted(g.rsplit("/", 1)[-1] for g in got if ": not read" not in g)
    if expected and given != sorted(expected):
        text = (
            f"{planned}: the allocator's first fit gave {', '.join(given) or 'no device'} on {node}, where the plan "
            f"expected {', '.join(expected)}"
        )
        run.note(text)
        log.warning(run.said("device differs from the plan", "device would differ (dry run)"), extra={"detail": text})
