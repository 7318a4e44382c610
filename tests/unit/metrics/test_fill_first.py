"""Prevention's tiers (``compactor/metrics/fill_first.py``) and the fill-first admission policy that reads them
(``manifests/prevention``): which nodes new GPU pods should fill first, and how a pod is told to prefer them."""

from __future__ import annotations

from compactor.metrics.fill_first import FILL_FIRST_LABEL, TIERS, fill_first_tiers
from compactor.metrics.fragmentation import compute_figures
from tests.builders import cluster, node, pod
from tests.manifests import PREVENTION, one_object

POLICY = "gpu-compactor-fill-first"


def test_nodes_in_use_with_gpus_free_get_a_tier_by_how_full_they_are_and_no_other_node_does() -> None:
    snapshot = cluster(
        node("one-of-8", gpus=8),
        node("four-of-8", gpus=8),
        node("seven-of-8", gpus=8),
        node("full", gpus=8),
        node("whole-free", gpus=8),
        node("cordoned", gpus=8, unschedulable=True),
        node("cpu-only", cpu="64"),
        pod("a", on="one-of-8", gpus=1, owner="ReplicaSet/a"),
        pod("b", on="four-of-8", gpus=4, owner="ReplicaSet/b"),
        pod("c", on="seven-of-8", gpus=7, owner="ReplicaSet/c"),
        pod("d", on="full", gpus=8, owner="ReplicaSet/d"),
        pod("e", on="cordoned", gpus=1, owner="ReplicaSet/e"),
        pod("web", on="cpu-only", cpu="4", owner="ReplicaSet/web"),
    )
    tiers = fill_first_tiers(compute_figures(snapshot).nodes)
    assert tiers == {"one-of-8": "1", "four-of-8": "2", "seven-of-8": "3"}


def test_the_policy_adds_one_preferred_term_per_tier_the_fullest_weighing_most_and_requires_nothing() -> None:
    policy = one_object(PREVENTION, "MutatingAdmissionPolicy", POLICY)
    spec = policy["spec"]
    assert spec["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
    ]
    assert spec["failurePolicy"] == "Ignore" and spec["reinvocationPolicy"] == "Never"
    terms = next(v["expression"] for v in spec["variables"] if v["name"] == "terms")
    assert "[100, 67, 33]" in terms and '"3" : w == 67 ? "2" : "1"' in terms and FILL_FIRST_LABEL in terms
    assert TIERS == 3
    patch = spec["mutations"][0]["jsonPatch"]["expression"]
    assert "preferredDuringSchedulingIgnoredDuringExecution" in patch and "required" not in patch
    binding = one_object(PREVENTION, "MutatingAdmissionPolicyBinding", POLICY)
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    excluded = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"][0]["values"]
    assert set(excluded) == {"kube-system", "gpu-compactor"}
