"""The dry run's world: a copy of the cluster's objects, read as the cluster is, changed as its controllers would change it.

Apart from the recording client (``dryrun.py``) because what the cluster does in answer to a write is a model of other
programs (the ReplicaSet and Deployment controllers, kube-scheduler, the node lifecycle controller, mig-manager, the
steering policy), while the recording only says what the executor asked. ``RecordingClient`` is this world with its
writes recorded: it reads from here and, for each write it records, lets the world answer as the cluster would.

Those answers keep the executor on the path it walks for real: an eviction makes the planned replacement appear,
Ready, on the plan's target node; a pending pod the plan places binds once its node lets it; a re-cut succeeds.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from typing import Any

from compactor.actions.cluster import migmanager
from compactor.actions.cluster.live_pods import pod_key
from compactor.actions.cluster.owners import DELETION_COST, FIRST_TO_GO, controller_ref, selector_text_matches
from compactor.actions.port.client import ClusterClient, EvictionOutcome, EvictionResult, Obj, T
from compactor.actions.port.objects import PodView, is_waiting
from compactor.actions.steering.pin import creator_of, pin_for, pinned
from compactor.model.load import DEFAULT_POOL_LABEL
from compactor.model.parse import parse_node, parse_pod
from compactor.model.scheduling import untolerated_taint
from compactor.planner.plan import CompactionPlan

CORDON_TAINT = "node.kubernetes.io/unschedulable"  # the node lifecycle controller writes it after a cordon


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """RFC 7386 JSON merge patch."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
    return target


def _consumers(claim: Obj) -> set[tuple[str, str]]:
    namespace = (claim.get("metadata") or {}).get("namespace", "default")
    return {(namespace, str(c.get("name"))) for c in (claim.get("status") or {}).get("reservedFor") or ()}


def _running_ready() -> Obj:
    return {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
    }


class DryRunWorld:
    """The port's reads over a copy of ``objects``, and the cluster's answers to writes (the ``_apply_*`` methods).

    ``plan``: where its moved pods' replacements and its placed pending pods land. ``namespace``: of the ConfigMaps
    read (the steering policy's). ``probe``: a live cluster, read for owners, autoscalers, admission policies and
    ConfigMaps, so a live dry run steers as a real run would.
    """

    def __init__(
        self, objects: list[Obj], plan: CompactionPlan | None, *, namespace: str, probe: ClusterClient | None
    ) -> None:
        self.nodes = {o["metadata"]["name"]: copy.deepcopy(o) for o in objects if o.get("kind") == "Node"}
        self.pods = {pod_key(o): copy.deepcopy(o) for o in objects if o.get("kind") == "Pod"}
        self.pdbs = [copy.deepcopy(o) for o in objects if o.get("kind") == "PodDisruptionBudget"]
        self.dra = [copy.deepcopy(o) for o in objects if o.get("kind") in ("ResourceSlice", "ResourceClaim")]
        self.owners = {
            (o["metadata"].get("namespace", "default"), o["kind"], o["metadata"]["name"]): copy.deepcopy(o)
            for o in objects
            if o.get("kind") in ("ReplicaSet", "StatefulSet", "Deployment", "Job")
        }
        self.autoscalers = [copy.deepcopy(o) for o in objects if o.get("kind") == "HorizontalPodAutoscaler"]
        self.admissions = {
            (o["kind"], o["metadata"]["name"]): copy.deepcopy(o)
            for o in objects
            if o.get("kind") in ("MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding")
        }
        self.config_maps = {
            o["metadata"]["name"]: copy.deepcopy(o)
            for o in objects
            if o.get("kind") == "ConfigMap" and (o.get("metadata") or {}).get("namespace") == namespace
        }
        # a live cluster's reads of the steering policy, so a live dry run steers as a real run would
        self.probe = probe
        self.targets = {m.pod: m.to_node for m in plan.moves} if plan else {}
        self.placements = {p.pod: p.to_node for p in plan.placed_pending} if plan else {}
        self.namespace = namespace  # of the state ConfigMap, as the real client would write it
        self._serial = itertools.count(1)

    # reads
    def list_nodes(self) -> list[Obj]:
        return copy.deepcopy(list(self.nodes.values()))

    def get_node(self, name: str) -> Obj | None:
        return copy.deepcopy(self.nodes.get(name))

    def list_pods(
        self, *, node_name: str | None = None, namespace: str | None = None, label_selector: str | None = None
    ) -> list[Obj]:
        return copy.deepcopy(
            [
                p
                for p in self.pods.values()
                if (node_name is None or (p.get("spec") or {}).get("nodeName") == node_name)
                and (namespace is None or (p.get("metadata") or {}).get("namespace", "default") == namespace)
                and selector_text_matches(label_selector or "", (p.get("metadata") or {}).get("labels") or {})
            ]
        )

    def list_pending_pods(self) -> list[Obj]:
        return copy.deepcopy([p for p in self.pods.values() if is_waiting(PodView(p))])

    def scan_nodes(self, keep: Callable[[Obj], T | None]) -> list[T]:
        return [k for node in self.nodes.values() if (k := keep(copy.deepcopy(node))) is not None]

    def scan_pods(self, keep: Callable[[Obj], T | None]) -> list[T]:
        return [k for pod in self.pods.values() if (k := keep(copy.deepcopy(pod))) is not None]

    def get_owner(self, namespace: str, kind: str, name: str) -> Obj | None:
        found = self.owners.get((namespace, kind, name))
        if found is None and self.probe is not None:  # a live dry run reads owners as a real run would
            found = self.probe.get_owner(namespace, kind, name)
            if found is not None:
                self.owners[(namespace, kind, name)] = found
        return copy.deepcopy(found)

    def list_autoscalers(self, namespace: str) -> list[Obj]:
        if self.probe is not None:
            return self.probe.list_autoscalers(namespace)
        return copy.deepcopy(
            [o for o in self.autoscalers if (o.get("metadata") or {}).get("namespace", "default") == namespace]
        )

    def get_admission(self, kind: str, name: str) -> Obj | None:
        if self.probe is not None:
            return self.probe.get_admission(kind, name)
        return copy.deepcopy(self.admissions.get((kind, name)))

    @property
    def reads_a_snapshot(self) -> bool:
        """No live cluster behind this world: what it lacks was not read, not found absent (``steering.detect``)."""
        return self.probe is None

    def who_am_i(self) -> str | None:
        return self.probe.who_am_i() if self.probe is not None else None

    def get_config_map(self, name: str) -> Obj | None:
        if name not in self.config_maps and self.probe is not None:
            found = self.probe.get_config_map(name)
            if found is not None:
                self.config_maps[name] = found
        return copy.deepcopy(self.config_maps.get(name))

    def get_pod(self, namespace: str, name: str) -> Obj | None:
        return copy.deepcopy(self.pods.get(f"{namespace}/{name}"))

    def list_dra(self, kind: str) -> list[Obj]:
        """The world's ResourceSlices or ResourceClaims; a claim whose pods were all evicted here is gone with them, as the
        resourceclaim controller deletes a template's claim with its pod (a replacement's own claim is not simulated:
        its node runs pods anyway)."""
        names = {(pod_key(p).split("/", 1)[0], str(p["metadata"]["name"])) for p in self.pods.values()}
        return copy.deepcopy(
            [
                o
                for o in self.dra
                if o.get("kind") == kind and (kind != "ResourceClaim" or not _consumers(o) or _consumers(o) & names)
            ]
        )

    def get_resource_claim(self, namespace: str, name: str) -> Obj | None:
        found = [
            o
            for o in self.dra
            if o.get("kind") == "ResourceClaim"
            and (o.get("metadata") or {}).get("namespace", "default") == namespace
            and (o.get("metadata") or {}).get("name") == name
        ]
        return copy.deepcopy(found[0]) if found else None

    def list_pdbs(self, *, namespace: str | None = None) -> list[Obj]:
        return copy.deepcopy(
            [
                p
                for p in self.pdbs
                if namespace is None or (p.get("metadata") or {}).get("namespace", "default") == namespace
            ]
        )

    def _owner_named(self, uid: str) -> str:
        """``ReplicaSet ns/name`` for a controller uid (from any of its pods), the uid itself when no pod names it."""
        for pod in self.pods.values():
            for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
                if ref.get("controller") and ref.get("uid") == uid:
                    return (
                        f"{ref.get('kind')} {(pod.get('metadata') or {}).get('namespace', 'default')}/{ref.get('name')}"
                    )
        return uid

    # the cluster's answers to writes
    def _apply_node_patch(self, name: str, patch: Obj) -> Obj:
        node = _merge(self.nodes[name], patch)
        if migmanager.CONFIG_LABEL in ((patch.get("metadata") or {}).get("labels") or {}):
            migmanager.simulate(node)  # mig-manager's part in a dry run: the re-cut succeeds
        spec = node.setdefault("spec", {})
        taints = [t for t in spec.get("taints") or [] if t.get("key") != CORDON_TAINT]
        if spec.get("unschedulable"):  # the node lifecycle controller's part: the cordon's taint follows it
            taints.append({"key": CORDON_TAINT, "effect": "NoSchedule"})
        spec["taints"] = taints or None
        if not taints:
            del spec["taints"]
        if not spec.get("unschedulable"):
            self._bind_pending(name)
        return copy.deepcopy(node)

    def _bind_pending(self, node: str) -> None:
        """The scheduler's part in a dry run: a pending pod the plan places here binds once the node is schedulable and the
        pod tolerates its taints (a fence lifted, a reservation it tolerates)."""
        taints = parse_node(self.nodes[node], source="dry run", pool_label=DEFAULT_POOL_LABEL, warnings=[]).taints
        for key, target in self.placements.items():
            pod = self.pods.get(key)
            if (
                target == node
                and pod is not None
                and not (pod.get("spec") or {}).get("nodeName")
                and untolerated_taint(parse_pod(pod, source="dry run").tolerations, taints) is None
            ):
                pod.setdefault("spec", {})["nodeName"] = node
                pod["status"] = _running_ready()

    def _apply_config_map_data(self, name: str, entries: dict[str, Any]) -> Obj:
        current = self.config_maps.setdefault(
            name, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": self.namespace}}
        )
        return copy.deepcopy(_merge(current, {"data": entries}))

    def _apply_pod_patch(self, namespace: str, name: str, patch: Obj) -> Obj:
        pod = self.pods[f"{namespace}/{name}"]
        meta = {k: v for k, v in (patch.get("metadata") or {}).items() if k in ("annotations", "labels") and v}
        _merge(pod, {k: v for k, v in patch.items() if k != "metadata"} | ({"metadata": meta} if meta else {}))
        target = self.placements.get(f"{namespace}/{name}")
        if (
            target is not None
            and target in self.nodes
            and not (self.nodes[target].get("spec") or {}).get("unschedulable")
        ):
            self._bind_pending(target)  # a toleration of the node's reservation: the scheduler binds it there now
        return copy.deepcopy(pod)

    def _apply_scale(self, namespace: str, name: str, *, expect: int, to: int) -> bool:
        """As the Deployment and ReplicaSet controllers would: one more replica lands on the planned node of the owner's
        moving pod, one fewer removes the pod marked first to go; False when the Deployment is not at ``expect``."""
        deployment = self.owners.get((namespace, "Deployment", name))
        if deployment is None or int((deployment.get("spec") or {}).get("replicas") or 0) != expect:
            return False
        self.owners[(namespace, "Deployment", name)] = _merge(deployment, {"spec": {"replicas": to}})
        if to > expect:
            self._surge(namespace, name)
        else:
            self._retire_first_to_go(namespace)
        return True

    def _surge(self, namespace: str, deployment: str) -> None:
        # the owner's first planned pod still here, in plan order (moved ones are gone): the one this surge moves
        moving = next(
            (
                key
                for key in self.targets
                if key in self.pods
                and key.startswith(f"{namespace}/")
                and self._deployment_of(self.pods[key]) == deployment
            ),
            None,
        )
        if moving is not None:
            self._replace(self.pods[moving], self.targets[moving])

    def _retire_first_to_go(self, namespace: str) -> None:
        first = next(
            (
                key
                for key, p in self.pods.items()
                if key.startswith(f"{namespace}/")
                and ((p.get("metadata") or {}).get("annotations") or {}).get(DELETION_COST) == FIRST_TO_GO
            ),
            None,
        )
        if first is not None:
            del self.pods[first]

    def _deployment_of(self, pod: Obj) -> str:
        ref = controller_ref(pod) or {}
        replica_set = self.get_owner(
            (pod.get("metadata") or {}).get("namespace", "default"), "ReplicaSet", str(ref.get("name", ""))
        )
        return str((controller_ref(replica_set or {}) or {}).get("name", ""))

    def _apply_eviction(self, namespace: str, name: str, uid: str, resource_version: str = "") -> EvictionResult:
        key = f"{namespace}/{name}"
        pod = self.pods.get(key)
        if pod is None:
            return EvictionResult(EvictionOutcome.GONE, 404, "not found")
        if uid and (pod.get("metadata") or {}).get("uid") != uid:
            return EvictionResult(EvictionOutcome.CONFLICT, 409, f"Precondition failed: UID in precondition: {uid}")
        if resource_version and (pod.get("metadata") or {}).get("resourceVersion") not in (None, resource_version):
            return EvictionResult(EvictionOutcome.CONFLICT, 409, "the object has been modified")
        del self.pods[key]
        self._replace(pod, self.targets.get(key))
        return EvictionResult(EvictionOutcome.EVICTED, 201)

    def _replace(self, pod: Obj, target: str | None) -> None:
        """The ReplicaSet controller's part: an owned pod gone comes back, Ready, on ``target`` (the plan's node)."""
        if not (pod.get("metadata") or {}).get("ownerReferences") or target is None:
            return
        clone = copy.deepcopy(pod)
        meta = clone["metadata"]
        meta["name"] = f"{meta['name']}-dryrun-{next(self._serial)}"
        meta["uid"] = f"dryrun-{next(self._serial)}"
        meta.pop("deletionTimestamp", None)
        clone["spec"]["nodeName"] = target
        clone["status"] = _running_ready()
        for parameters in self.config_maps.values():  # the steering policy's part: the owner's next pod comes pinned
            node = pin_for(clone, (parameters.get("data") or {}), creator_of(clone))
            if node is not None:
                clone = pinned(clone, node)
        self.pods[pod_key(clone)] = clone
