"""A fake DRA driver for the e2e tests: DeviceClasses and ResourceSlices published through the API server as NVIDIA's
driver would, so that the real kube-scheduler allocates claims from them (no kubelet plugin is needed for that)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from tests.e2e.helpers import Kube, Obj, api_request

RESOURCE = "/apis/resource.k8s.io/v1"


@contextlib.contextmanager
def fake_driver(kube: Kube, *, classes: list[Obj], slices: list[Obj]) -> Iterator[None]:
    """The DeviceClasses (each made only when missing: another test may share it) and the ResourceSlices; what it made
    is deleted afterwards."""
    made: list[str] = []
    try:
        for device_class in classes:
            name = device_class["metadata"]["name"]
            if api_request(kube, "GET", f"{RESOURCE}/deviceclasses/{name}")[0] == 404:
                status, body = api_request(kube, "POST", f"{RESOURCE}/deviceclasses", device_class)
                assert status == 201, body
                made.append(f"deviceclasses/{name}")
        for resource_slice in slices:
            status, body = api_request(kube, "POST", f"{RESOURCE}/resourceslices", resource_slice)
            assert status == 201, body
            made.append(f"resourceslices/{resource_slice['metadata']['name']}")
        yield
    finally:
        for path in reversed(made):
            api_request(kube, "DELETE", f"{RESOURCE}/{path}")
