"""The eviction subresource (``POST .../pods/{name}/eviction``) with the policy/v1 semantics of the real API server:
the PodDisruptionBudget check (429), the decrement of ``disruptionsAllowed``, ``dryRun=All`` and the tests'
``on_evict`` hook."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING

from tests.fakeapi.messages import JSON, ApiError, RecordedRequest, Reply, json_body, status_body
from tests.fakeapi.resources import resource_type
from tests.fakeapi.selectors import selector_matches
from tests.fakeapi.store import ObjectStore, utc_now
from tests.fakeapi.writes import check_preconditions

if TYPE_CHECKING:
    from tests.fakeapi.server import FakeApiServer

PODS = resource_type("pods")


class Eviction(ObjectStore):
    """Evictions of pods. ``FakeApiServer.__init__`` sets every attribute declared here."""

    on_evict: Callable[[FakeApiServer, JSON], None] | None  # default: delete the pod

    def _evict(self, ns: str, name: str, request: RecordedRequest) -> Reply:
        body = json_body(request)
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a policy/v1 Eviction")
        if body.get("kind") not in (None, "Eviction"):
            raise ApiError(400, f"expected kind Eviction, got {body.get('kind')!r}")
        meta = body.get("metadata") or {}
        if meta.get("name") and meta["name"] != name:
            raise ApiError(400, "name in URL does not match name in Eviction object")
        if meta.get("namespace") not in (None, "", ns):
            raise ApiError(400, "the namespace of the provided object does not match the namespace sent on the request")
        pod = self._existing(PODS, ns, name)
        options = body.get("deleteOptions") or {}
        dry_run = request.param("dryRun") == "All" or "All" in (options.get("dryRun") or [])
        check_preconditions(PODS, name, pod, options.get("preconditions") or {})
        phase = (pod.get("status") or {}).get("phase")
        ignore_pdb = phase in ("Succeeded", "Failed", "Pending") or bool(pod["metadata"].get("deletionTimestamp"))
        if not ignore_pdb:
            self._spend_disruption_budget(ns, name, pod, dry_run=dry_run)
        if not dry_run:
            if self.on_evict is not None:
                self.on_evict(self, copy.deepcopy(pod))  # type: ignore[arg-type]  # self is the FakeApiServer
            else:
                del self._store[PODS.key][(ns, name)]
                self._next_rv()
        return Reply(201, status_body(201))

    def _spend_disruption_budget(self, ns: str, name: str, pod: JSON, *, dry_run: bool) -> None:
        """429 when the pod's PodDisruptionBudget allows no disruption; else one disruption spent (unless dry run)."""
        labels = pod["metadata"].get("labels") or {}
        budgets = [
            pdb
            for (pdb_ns, _), pdb in sorted(self._store["policy/poddisruptionbudgets"].items())
            if pdb_ns == ns and selector_matches((pdb.get("spec") or {}).get("selector"), labels)
        ]
        if len(budgets) > 1:
            raise ApiError(
                500,
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            )
        if not budgets:
            return
        budget = budgets[0]
        status = budget.setdefault("status", {})
        if int(status.get("disruptionsAllowed", 0)) <= 0:
            budget_name = budget["metadata"]["name"]
            raise ApiError(
                429,
                "Cannot evict pod as it would violate the pod's disruption budget.",
                details={
                    "causes": [
                        {
                            "reason": "DisruptionBudget",
                            "message": f"The disruption budget {budget_name} needs {status.get('desiredHealthy', 0)} healthy pods "
                            f"and has {status.get('currentHealthy', 0)} currently",
                        }
                    ]
                },
            )
        if not dry_run:
            status["disruptionsAllowed"] = int(status["disruptionsAllowed"]) - 1
            status.setdefault("disruptedPods", {})[name] = utc_now()
            budget["metadata"]["resourceVersion"] = self._next_rv()
