"""Dynamic Resource Allocation in the fake cluster, as kube-scheduler's DynamicResources plugin and the resourceclaim
controller do it for whole devices (``resource.k8s.io/v1``, ``exactly`` requests of ``ExactCount``):

* a pod naming a ResourceClaimTemplate (``spec.resourceClaims[].resourceClaimTemplateName``) gets a claim made from the
  template when it is scheduled (the resourceclaim controller makes it when the pod is created; here, as the
  scheduler binds it, which is what the compactor reads), named ``<pod>-<entry>-<suffix>``, owned by the pod, recorded
  in ``status.resourceClaimStatuses``;
* a node fits only when its pools (the ResourceSlices whose ``nodeName`` is the node) have that many devices no claim
  holds; the claim is allocated the first free devices in slice order (the allocator tries devices in order and takes
  the first that satisfy the request) and reserved for the pod;
* a pod gone, its generated claims go with it (the resourceclaim controller deletes them), freeing the devices.

Named claims (``resourceClaimName``) are taken as given: already allocated, or waiting.
"""

from __future__ import annotations

import copy
from typing import Any

from compactor.actions.port.client import Obj

DRIVER = "gpu.nvidia.com"


class DeviceAllocator:
    dra: list[Obj]
    _suffixes: int

    def _template(self, namespace: str, name: str) -> Obj | None:
        return next(
            (
                o
                for o in self.dra
                if o["kind"] == "ResourceClaimTemplate"
                and (o["metadata"].get("namespace", "default"), o["metadata"]["name"]) == (namespace, name)
            ),
            None,
        )

    def devices_wanted(self, pod: Obj) -> list[tuple[str, Obj, int]]:
        """The template claims ``pod`` still needs made: (entry name, template, devices asked)."""
        made = {s["name"] for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
        namespace = pod["metadata"].get("namespace", "default")
        wanted = []
        for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
            template_name = entry.get("resourceClaimTemplateName")
            if not template_name or entry["name"] in made:
                continue
            template = self._template(namespace, template_name)
            if template is None:
                raise AssertionError(f"fake cluster: no ResourceClaimTemplate {namespace}/{template_name}")
            requests = template["spec"]["spec"]["devices"]["requests"]
            wanted.append((entry["name"], template, sum(int(r["exactly"].get("count", 1)) for r in requests)))
        return wanted

    def free_devices(self, node: str) -> list[tuple[str, str]]:
        """The (pool, device) pairs of ``node``'s slices that no claim holds, in slice order."""
        held = {
            (r["pool"], r["device"])
            for o in self.dra
            if o["kind"] == "ResourceClaim"
            for r in (((o.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
        }
        free = []
        for piece in self.dra:
            spec = piece.get("spec") or {}
            if piece["kind"] != "ResourceSlice" or spec.get("nodeName") != node:
                continue
            pool = spec["pool"]["name"]
            free += [(pool, d["name"]) for d in spec.get("devices") or [] if (pool, d["name"]) not in held]
        return free

    def devices_fit(self, pod: Obj, node: str) -> bool:
        return sum(count for _, _, count in self.devices_wanted(pod)) <= len(self.free_devices(node))

    def allocate(self, pod: Obj, node: str) -> None:
        """Make and allocate ``pod``'s template claims on ``node`` (``devices_fit`` said they fit)."""
        meta = pod["metadata"]
        for entry, template, count in self.devices_wanted(pod):
            free = self.free_devices(node)[:count]
            self._suffixes += 1
            name = f"{meta['name']}-{entry}-{self._suffixes:05d}"
            claim: dict[str, Any] = {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {
                    "name": name,
                    "namespace": meta.get("namespace", "default"),
                    "ownerReferences": [{"kind": "Pod", "name": meta["name"], "uid": meta["uid"], "controller": True}],
                },
                "spec": copy.deepcopy(template["spec"]["spec"]),
                "status": {
                    "allocation": {
                        "devices": {
                            "results": [
                                {"request": "gpus", "driver": DRIVER, "pool": pool, "device": device}
                                for pool, device in free
                            ]
                        }
                    },
                    "reservedFor": [{"resource": "pods", "name": meta["name"], "uid": meta["uid"]}],
                },
            }
            self.dra.append(claim)
            status = pod.setdefault("status", {})
            status.setdefault("resourceClaimStatuses", []).append({"name": entry, "resourceClaimName": name})

    def release_claims_of(self, uid: str) -> None:
        """The pod ``uid`` is gone: the claims made for it go too."""
        self.dra[:] = [
            o
            for o in self.dra
            if not (
                o["kind"] == "ResourceClaim"
                and any(ref.get("uid") == uid for ref in o["metadata"].get("ownerReferences") or [])
            )
        ]
