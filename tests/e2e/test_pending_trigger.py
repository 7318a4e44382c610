"""End to end: the controller's pending trigger on the real control plane. A controller cycling once an hour has run its
first cycle (nothing pending, nothing to do); then an 8-GPU pod arrives that kube-scheduler finds no node for, on
nodes fragmented by the real scheduler. Within seconds of ``--pending-after`` the controller starts a cycle of its own
and the pod runs on the node the plan drained for it: the pending-driven path issue 21's replay compares.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import yaml

from tests.e2e import fragmentation as frag
from tests.e2e.fleet_runs import STATES, compactor_config, pending_pods
from tests.e2e.fragmentation import Fleet
from tests.e2e.helpers import (
    NEEDS_CLUSTER,
    Kube,
    compactor_marks,
    free_port,
    gauge,
    is_closed,
    kubeconfig_args,
    name_of,
    raw,
    scrape,
    start_compactor,
    wait_for,
)

pytestmark = [NEEDS_CLUSTER, pytest.mark.e2e, pytest.mark.timeout(900)]
PENDING_AFTER = 10  # seconds a GPU pod waits before the controller starts a cycle for it
STATE = STATES[3]  # every GPU taken first, then one pod per node kept: no node can take an 8-GPU pod


def test_a_gpu_pod_left_pending_starts_the_controllers_cycle_that_places_it(
    kube: Kube, gpu_fleet: Fleet, fleet_namespace: str, steering_policy: str, tmp_path: Path
) -> None:
    frag.build(kube, fleet_namespace, gpu_fleet, STATE, pending_later=True)
    config = tmp_path / "compactor.yaml"
    settings = compactor_config(fleet_namespace)
    settings["aims"] = {"objective": "pending-only"}  # a cycle frees nothing for its own sake: only the trigger matters
    config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    port, log = free_port(), tmp_path / "controller.log"
    controller = start_compactor(
        "controller",
        *kubeconfig_args(),
        "--config",
        str(config),
        "--interval",
        "3600",
        "--pending-after",
        str(PENDING_AFTER),
        "--pending-gap",
        "10",  # the floor: measured from the end of the first cycle
        "--no-leader-election",
        "--listen",
        f"127.0.0.1:{port}",
        log=log,
    )
    try:

        def cycles() -> tuple[bool, str]:
            status, body = scrape(port)
            done = gauge(body, "gpu_compactor_runs_total") if status == 200 else None
            return done is not None and "cycle done" in log.read_text(), f"/metrics {status}; {log.read_text()[-800:]}"

        wait_for(cycles, timeout=120, interval=1, what="the controller's first cycle")
        assert "pending trigger" not in log.read_text()
        frag.add_pending(kube, fleet_namespace, gpu_fleet, STATE.pending_gpus)  # returns once it is Unschedulable
        (waiting,) = pending_pods(kube, fleet_namespace)

        def placed() -> tuple[bool, str]:
            left, text = pending_pods(kube, fleet_namespace), log.read_text()
            assert "status=failed" not in text and "status=partial" not in text, f"the run fell short:\n{text[-3000:]}"
            return not left, f"still pending: {left}; controller log:\n{text[-3000:]}"

        wait_for(placed, timeout=300, interval=2, what=f"the controller to place {waiting} (its interval is an hour)")
        text = log.read_text()
        assert f"pending trigger: {fleet_namespace}/{waiting} has waited" in text, text[-3000:]
        _, body = scrape(port)
        assert gauge(body, "gpu_compactor_pending_triggered_cycles_total") == 1.0
        assert 'gpu_compactor_runs_total{status="succeeded"} 1.0' in body, body

        def released() -> tuple[bool, str]:
            nodes = [raw(kube.core.read_node, name) for name in gpu_fleet.names]
            left = {name_of(n): compactor_marks(n) for n in nodes if compactor_marks(n) or is_closed(n)}
            return not left, f"fenced or marked: {left}"

        wait_for(released, timeout=60, interval=1, what="the run's fences and marks to be gone")
    finally:
        controller.send_signal(signal.SIGTERM)
        controller.wait(timeout=120)
    assert controller.returncode in (0, 143), log.read_text()[-3000:]
