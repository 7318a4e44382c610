"""The steering admission policy on the cluster under test, and a tenant that keeps creating pods while a run goes on.

``install_policy`` applies the repository's own ``manifests/steering/policy.yaml`` (policy and
binding) and the parameter ConfigMap of ``manifests/base/steering.yaml``, exactly as a cluster
admin would, through the API (raw JSON, no generated model classes), and leaves them installed.
``Tenant`` plays another team's workload: it creates a small CPU-only pod
every ``interval`` seconds on the fleet's nodes and watches how long each waits for a node.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException

from tests.builders import fill_first_policy, steering_policy
from tests.e2e.helpers import PAUSE_IMAGE, STATE_NAMESPACE, Kube, Obj, api_request, get_or_none, name_of, with_retries

ADMISSION_PATHS = {
    "MutatingAdmissionPolicy": "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies",
    "MutatingAdmissionPolicyBinding": "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings",
}


def install_policy(kube: Kube, *, only: str = "") -> None:
    """The policy and its binding as shipped (created, or replaced in place when present), and the empty parameter ConfigMap
    in the compactor's namespace. ``only``: that kind alone.

    Never deleted and made again: on kube-apiserver v1.36.2 (../shared/realk8s) a policy deleted and created again, with or
    without its binding, can stay inert until the API server restarts (every pod CREATE admitted unchanged, the parameters
    never read; reproduced three times, not every time). A replace in place keeps it working.
    """
    for obj in steering_policy():
        kind, name = obj["kind"], obj["metadata"]["name"]
        if only and kind != only:
            continue
        if kind == "ConfigMap":
            body = {**obj, "metadata": {**obj["metadata"], "namespace": STATE_NAMESPACE}}
            if get_or_none(kube.core.read_namespaced_config_map, name, STATE_NAMESPACE) is None:
                with_retries(
                    lambda body=body: kube.core.create_namespaced_config_map(STATE_NAMESPACE, body),
                    what=f"creating configmap {name}",
                )
            continue
        put_admission(kube, obj)
    time.sleep(2)  # the API server's admission plugin picks policies, bindings and parameters up from its informers


def install_fill_first_policy(kube: Kube, namespace: str) -> None:
    """The fill-first policy of ``manifests/prevention`` as shipped, its binding narrowed to ``namespace`` (as its comment
    invites an admin to): created, or replaced in place, never deleted (see ``install_policy``). Left installed it
    touches the pods of that namespace only, which goes with its test."""
    for obj in fill_first_policy():
        if obj["kind"] == "MutatingAdmissionPolicyBinding":
            only = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
            obj = {**obj, "spec": {**obj["spec"], "matchResources": {"namespaceSelector": only}}}
        put_admission(kube, obj)
    time.sleep(2)


def put_admission(kube: Kube, obj: Obj) -> None:
    """One admission policy or binding created, or replaced in place when present."""
    kind, name = obj["kind"], obj["metadata"]["name"]
    status, found = api_request(kube, "GET", f"{ADMISSION_PATHS[kind]}/{name}")
    if status == 200:
        replaced = {**obj, "metadata": {**obj["metadata"], "resourceVersion": found["metadata"]["resourceVersion"]}}
        status, _ = api_request(kube, "PUT", f"{ADMISSION_PATHS[kind]}/{name}", replaced)
    else:
        status, _ = api_request(kube, "POST", ADMISSION_PATHS[kind], obj)
    assert status in (200, 201), (
        f"installing {kind} {name}: HTTP {status} (Kubernetes v1.36+ serves admissionregistration.k8s.io/v1)"
    )


@dataclass
class TenantWaits:
    created: int = 0
    # pod -> seconds from just before its create call to the event showing it bound
    waits: dict[str, float] = field(default_factory=dict)
    unbound: list[str] = field(default_factory=list)  # pods still unbound when the tenant stopped
    errors: list[str] = field(default_factory=list)  # pods the API server refused
    watch_reopens: list[str] = field(default_factory=list)  # dropped watches (a wait is only ever overstated by one)

    @property
    def longest(self) -> float:
        return max(self.waits.values(), default=0.0)


class Tenant:
    """Another team's workload during the run: a CPU-only pod every ``interval`` s on the fleet (its nodeSelector), each
    deleted once a dozen newer ones exist. A pod's wait runs from just before its create call to the first watch event
    showing it bound, so a dropped and reopened watch can only make a wait look longer, never shorter."""

    def __init__(self, kube: Kube, namespace: str, selector: dict[str, str], *, interval: float = 0.5) -> None:
        self.kube, self.namespace, self.selector, self.interval = kube, namespace, selector, interval
        self.result = TenantWaits()
        self._stop = threading.Event()
        self._creating = threading.Event()  # set: stop creating pods
        self._added: dict[str, float] = {}
        self._threads = [
            threading.Thread(target=self._create, daemon=True),
            threading.Thread(target=self._watch, daemon=True),
        ]

    def __enter__(self) -> Tenant:
        for thread in self._threads:
            thread.start()
        time.sleep(0.5)  # the watch is open before the first pod
        return self

    def __exit__(self, *exc: object) -> None:
        self._creating.set()  # no new pod; the watch goes on until the last ones are seen bound (or 5 s)
        self._threads[0].join(timeout=40)
        deadline = time.monotonic() + 5
        while set(self._added) - set(self.result.waits) and time.monotonic() < deadline:
            time.sleep(0.1)
        self._stop.set()
        self._threads[1].join(timeout=40)
        self.result.unbound = sorted(set(self._added) - set(self.result.waits))

    def _create(self) -> None:
        names: list[str] = []
        for i in itertools.count():
            if self._creating.wait(self.interval):
                return
            name = f"tenant-{i}"
            body: Obj = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "labels": {"app": "tenant"}},
                "spec": {
                    "nodeSelector": self.selector,
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "c", "image": PAUSE_IMAGE, "resources": {"requests": {"cpu": "10m"}}}],
                },
            }
            self._added[name] = time.monotonic()
            try:
                self.kube.core.create_namespaced_pod(self.namespace, body)
            except ApiException as exc:
                del self._added[name]
                self.result.errors.append(f"{name}: HTTP {exc.status}")
                continue
            self.result.created += 1
            names.append(name)
            if len(names) > 12:
                with contextlib.suppress(
                    ApiException
                ):  # keeps the namespace small; one not deleted goes with the namespace
                    self.kube.core.delete_namespaced_pod(names.pop(0), self.namespace, grace_period_seconds=0)

    def _watch(self) -> None:
        while not self._stop.is_set():
            stream = k8s_watch.Watch()  # type: ignore[no-untyped-call]
            try:  # a fresh watch each time: it starts with an ADDED event for every pod, so none is missed
                for event in stream.stream(self.kube.core.list_namespaced_pod, self.namespace, timeout_seconds=5):  # type: ignore[no-untyped-call]
                    self._on(event["raw_object"])
                    if self._stop.is_set():
                        return
            except Exception as exc:  # a dropped stream (410 Gone, connection reset): reopen
                self.result.watch_reopens.append(f"{type(exc).__name__}: {exc}"[:200])

    def _on(self, pod: dict[str, Any]) -> None:
        name, now = name_of(pod), time.monotonic()
        if (pod.get("spec") or {}).get("nodeName") and name in self._added and name not in self.result.waits:
            self.result.waits[name] = round(now - self._added[name], 2)
