"""Effective pod requests, as ``k8s.io/component-helpers/resource.PodRequests`` computes them.

Covers: the sum over app containers; plain init containers (max); restartable init
containers (sidecars, KEP-753) added to the app sum and to the peak of the init
containers that start after them, with the worked cases from the upstream
``helpers_test.go``; pod overhead; API defaulting of requests from limits
(limits-only GPUs count, a given request wins); pod-level resources (KEP-2837) and
their defaulting; ``pods`` = 1; malformed containers as one-line input errors.
"""

from __future__ import annotations

from typing import Any

import pytest

from compactor.errors import InputError
from compactor.model.requests import effective_requests
from tests.builders import cluster, node, pod

GI = 1 << 30


def container(
    name: str = "c",
    *,
    requests: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    sidecar: bool = False,
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    out: dict[str, Any] = {"name": name, "image": "example", "resources": resources}
    if sidecar:
        out["restartPolicy"] = "Always"
    return out


def cpu(*cores: str, sidecar: tuple[int, ...] = ()) -> list[dict[str, Any]]:
    """Containers requesting the given CPU each; positions in ``sidecar`` are restartable."""
    return [container(f"c{i}", requests={"cpu": c}, sidecar=i in sidecar) for i, c in enumerate(cores)]


def requests_of(spec: dict[str, Any]) -> dict[str, int]:
    return effective_requests(spec, source="test", obj="Pod default/p").as_dict()


def test_app_container_requests_are_summed_per_resource() -> None:
    spec = {
        "containers": [
            container("a", requests={"cpu": "500m", "memory": "1Gi"}),
            container("b", requests={"cpu": "1500m", "memory": "512Mi", "nvidia.com/gpu": "1"}),
        ]
    }
    assert requests_of(spec) == {"cpu": 2000, "memory": GI + GI // 2, "nvidia.com/gpu": 1, "pods": 1}


def test_every_pod_requests_one_pod_slot_even_without_resources() -> None:
    assert requests_of({"containers": [container()]}) == {"pods": 1}


def test_plain_init_containers_count_by_their_maximum_not_their_sum() -> None:
    spec = {"initContainers": cpu("3", "2"), "containers": cpu("1")}
    assert requests_of(spec)["cpu"] == 3000


def test_app_containers_win_when_they_need_more_than_any_init_container() -> None:
    spec = {"initContainers": cpu("2"), "containers": cpu("2", "1")}
    assert requests_of(spec)["cpu"] == 3000


def test_init_and_app_maxima_are_taken_per_resource() -> None:
    spec = {
        "initContainers": [container("init", requests={"cpu": "4", "memory": "1Gi"})],
        "containers": [container("app", requests={"cpu": "1", "memory": "8Gi"})],
    }
    assert requests_of(spec) == {"cpu": 4000, "memory": 8 * GI, "pods": 1}


# The cases below are kubernetes/staging/src/k8s.io/component-helpers/resource/helpers_test.go
# TestPodResourceRequests, which implement KEP-753 "Resources calculation for scheduling and pod admission":
# Max(Max(InitContainerUse(i)), Sum(sidecars) + Sum(containers)), InitContainerUse(i) = Sum(sidecars before i) + init(i).
@pytest.mark.parametrize(
    ("init_containers", "containers", "expected_cpu"),
    [
        pytest.param(cpu("1", sidecar=(0,)), cpu("1"), 2000, id="restartable-init-plus-regular=2"),
        pytest.param(
            cpu("5", "1", "2", "3", sidecar=(1, 2, 3)), cpu("1"), 7000, id="multiple-restartable=max(5,3+2+1+1)=7"
        ),
        pytest.param(cpu("5", "1", "2", "5", "3", sidecar=(1, 2, 4)), cpu("1"), 8000, id="init-after-sidecars=5+1+2=8"),
        pytest.param(cpu("10", "200", sidecar=(0,)), cpu("100"), 210000, id="sidecar-then-big-init=210"),
    ],
)
def test_sidecars_follow_the_upstream_worked_examples(
    init_containers: list[dict[str, Any]], containers: list[dict[str, Any]], expected_cpu: int
) -> None:
    assert requests_of({"initContainers": init_containers, "containers": containers})["cpu"] == expected_cpu


def test_a_sidecar_is_added_to_the_app_containers_for_the_pods_whole_life() -> None:
    spec = {
        "initContainers": [container("proxy", requests={"cpu": "500m", "memory": "256Mi"}, sidecar=True)],
        "containers": [container("app", requests={"cpu": "2", "memory": "1Gi"})],
    }
    assert requests_of(spec) == {"cpu": 2500, "memory": GI + 256 * (1 << 20), "pods": 1}


def test_a_sidecar_started_after_an_init_container_does_not_add_to_that_init_container() -> None:
    # init(4) runs alone, then the sidecar(1) starts: peak is max(4, 1 + app 1) = 4, not 5.
    spec = {"initContainers": cpu("4", "1", sidecar=(1,)), "containers": cpu("1")}
    assert requests_of(spec)["cpu"] == 4000


def test_a_sidecar_started_before_an_init_container_adds_to_it() -> None:
    spec = {"initContainers": cpu("1", "4", sidecar=(0,)), "containers": cpu("1")}
    assert requests_of(spec)["cpu"] == 5000


def test_only_restart_policy_always_makes_an_init_container_a_sidecar() -> None:
    never = {**container("init", requests={"cpu": "1"}), "restartPolicy": "Never"}
    spec = {"initContainers": [never], "containers": cpu("1")}
    assert requests_of(spec)["cpu"] == 1000


def test_pod_overhead_is_added_after_the_container_aggregate() -> None:
    spec = {"containers": cpu("1"), "initContainers": cpu("3"), "overhead": {"cpu": "250m", "memory": "120Mi"}}
    assert requests_of(spec) == {"cpu": 3250, "memory": 120 * (1 << 20), "pods": 1}


def test_a_gpu_given_only_as_a_limit_counts_as_requested() -> None:
    spec = {"containers": [container(requests={"cpu": "1"}, limits={"nvidia.com/gpu": "2"})]}
    assert requests_of(spec) == {"cpu": 1000, "nvidia.com/gpu": 2, "pods": 1}


def test_cpu_and_memory_given_only_as_limits_default_the_requests() -> None:
    spec = {"containers": [container(limits={"cpu": "2", "memory": "4Gi"})]}
    assert requests_of(spec) == {"cpu": 2000, "memory": 4 * GI, "pods": 1}


def test_limits_default_the_requests_of_init_containers_too() -> None:
    spec = {"initContainers": [container("init", limits={"cpu": "6"})], "containers": cpu("1")}
    assert requests_of(spec)["cpu"] == 6000


def test_a_request_given_with_a_limit_wins_over_the_limit() -> None:
    spec = {"containers": [container(requests={"cpu": "500m", "memory": "1Gi"}, limits={"cpu": "4", "memory": "8Gi"})]}
    assert requests_of(spec) == {"cpu": 500, "memory": GI, "pods": 1}


def test_an_explicit_zero_request_is_not_replaced_by_the_limit() -> None:
    spec = {"containers": [container(requests={"cpu": "0"}, limits={"cpu": "4"})]}
    assert "cpu" not in requests_of(spec)


def test_pod_level_requests_replace_the_container_aggregate_for_cpu_and_memory() -> None:
    spec = {
        "resources": {"requests": {"cpu": "3", "memory": "2Gi"}},
        "containers": [
            container(requests={"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}),
            container("b", requests={"cpu": "1"}),
        ],
    }
    assert requests_of(spec) == {"cpu": 3000, "memory": 2 * GI, "nvidia.com/gpu": 1, "pods": 1}


def test_pod_level_requests_leave_unnamed_resources_to_the_containers() -> None:
    spec = {"resources": {"requests": {"cpu": "3"}}, "containers": [container(requests={"cpu": "1", "memory": "1Gi"})]}
    assert requests_of(spec) == {"cpu": 3000, "memory": GI, "pods": 1}


def test_pod_level_requests_ignore_resources_kubernetes_does_not_support_there() -> None:
    spec = {
        "resources": {"requests": {"cpu": "2", "nvidia.com/gpu": "4"}},
        "containers": [container(limits={"nvidia.com/gpu": "1"})],
    }
    assert requests_of(spec) == {"cpu": 2000, "nvidia.com/gpu": 1, "pods": 1}


def test_pod_level_hugepages_requests_replace_the_container_aggregate() -> None:
    spec = {
        "resources": {"requests": {"hugepages-2Mi": "8Mi"}},
        "containers": [container(requests={"hugepages-2Mi": "2Mi"})],
    }
    assert requests_of(spec)["hugepages-2Mi"] == 8 * (1 << 20)


def test_pod_level_limits_alone_default_the_pod_request_when_no_container_requests_it() -> None:
    spec = {"resources": {"limits": {"cpu": "4", "memory": "8Gi"}}, "containers": [container(), container("b")]}
    assert requests_of(spec) == {"cpu": 4000, "memory": 8 * GI, "pods": 1}


def test_pod_level_limits_leave_cpu_that_containers_request_to_the_containers() -> None:
    spec = {"resources": {"limits": {"cpu": "4", "memory": "8Gi"}}, "containers": [container(requests={"cpu": "1"})]}
    assert requests_of(spec) == {"cpu": 1000, "memory": 8 * GI, "pods": 1}


def test_overhead_is_added_on_top_of_pod_level_requests() -> None:
    spec = {
        "resources": {"requests": {"cpu": "2"}},
        "overhead": {"cpu": "100m"},
        "containers": [container(requests={"cpu": "1"})],
    }
    assert requests_of(spec)["cpu"] == 2100


def test_loaded_pods_carry_their_effective_requests() -> None:
    snap = cluster(node("gpu-1", gpus=8), pod("train", on="gpu-1", gpus=2, cpu="4", memory="16Gi"))
    (loaded,) = snap.pods
    assert loaded.requests == {"cpu": 4000, "memory": 16 * GI, "nvidia.com/gpu": 2, "pods": 1}
    assert loaded.uses_gpu


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        pytest.param({"containers": ["app"]}, "spec.containers[0]", id="container-not-an-object"),
        pytest.param(
            {"containers": [{"name": "a", "resources": ["cpu"]}]},
            "spec.containers[0].resources",
            id="resources-not-an-object",
        ),
        pytest.param(
            {"containers": [], "initContainers": {"a": 1}}, "spec.initContainers", id="init-containers-not-a-list"
        ),
        pytest.param(
            {"containers": [container(requests={"cpu": "1x"})]},
            "spec.containers[0].resources.requests.cpu",
            id="bad-request",
        ),
        pytest.param(
            {"containers": [container(limits={"nvidia.com/gpu": "-1"})]},
            "spec.containers[0].resources.limits.nvidia.com/gpu",
            id="negative-limit",
        ),
        pytest.param(
            {"containers": [], "initContainers": [container(requests={"memory": "NaN"})]},
            "spec.initContainers[0].resources.requests.memory",
            id="bad-init-request",
        ),
        pytest.param({"containers": [], "overhead": {"cpu": "abc"}}, "spec.overhead.cpu", id="bad-overhead"),
        pytest.param(
            {"containers": [], "resources": {"requests": {"cpu": "1_0"}}},
            "spec.resources.requests.cpu",
            id="bad-pod-level",
        ),
    ],
)
def test_malformed_containers_are_one_line_input_errors_naming_the_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as caught:
        effective_requests(spec, source="snap.yaml", obj="Pod ml/train-0")
    message = str(caught.value)
    assert caught.value.field == field
    assert message.startswith(f"snap.yaml: Pod ml/train-0: {field}: ")
    assert "\n" not in message
