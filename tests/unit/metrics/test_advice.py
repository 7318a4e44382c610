"""Normalisation advice (``report --advise``) on small clusters computed by hand.

Covers: the ranking (stranded capacity shared by the GPU capacity each shape holds on a node, the unattributed rest),
the candidate roundings (never smaller, never a resource or amount no node offers, MIG within one GPU model), the
rounded cluster (pods that keep their node, displaced pods judged as pending), stranded and blocked demand before and
after, the benefit that does not count pods growing out of the free capacity, configured shapes, the JSON form, the
report section, the CLI flags, and the worked example of docs/metrics.md.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import msgspec
import pytest

from compactor.metrics.advice import Advice, Rounding, advise
from compactor.metrics.fragmentation import compute_figures, reference_shapes
from compactor.model.resources import Resources
from compactor.model.types import Snapshot
from compactor.render.advice import advice_to_dict
from compactor.render.report import render_report
from tests.builders import A100_40, A100_80, cluster, node, pod
from tests.command_line import assert_one_line_error, compactor

GPU = "nvidia.com/gpu"
MIG_1G = "nvidia.com/mig-1g.5gb"
MIG_2G = "nvidia.com/mig-2g.10gb"
DOCS = Path(__file__).resolve().parents[3] / "docs" / "metrics.md"


def advice_of(snapshot: Snapshot, **options: int) -> Advice:
    return advise(snapshot, compute_figures(snapshot), **options)


def rounding(advice: Advice, shape: str, to: str) -> Rounding:
    return next(r for r in advice.roundings if (r.shape, r.rounded_to) == (shape, to))


# ---------------------------------------------------------------------------
# The worked example of docs/metrics.md, "Normalisation advice"


def docs_example_cluster() -> Snapshot:
    return cluster(
        node("mig-a", mig={"1g.5gb": 3, "2g.10gb": 2}, product=A100_40),
        node("mig-b", mig={"2g.10gb": 3}, product=A100_40),
        node("gpu-c", gpus=8),
        *(pod(f"infer-{i}", on="mig-a", mig="1g.5gb") for i in range(3)),
        pod("infer-3", mig="1g.5gb"),
        pod("infer-4", mig="1g.5gb"),
        pod("prep-0", on="gpu-c", gpus=1, cpu="40"),
        pod("train-0", on="gpu-c", gpus=2, cpu="8"),
    )


def test_the_docs_worked_example_gives_the_documented_numbers() -> None:
    advice = advice_of(docs_example_cluster())

    # Stranded: mig-a's two idle 2g.10gb (0.5) to the 1g.5gb pods there; gpu-c's odd GPU (1) shared 2:1 by the gpu=2
    # and gpu=1 pods; mig-b runs no GPU pod, its 0.75 is unattributed.
    assert advice.stranded_gpus == 2.25
    assert advice.unattributed_stranded_gpus == 0.75
    assert [(s.label, s.bound_pods, s.pending_pods, s.held_gpus) for s in advice.shapes] == [
        ("nvidia.com/gpu=2", 1, 0, 2.0),
        ("nvidia.com/mig-1g.5gb=1", 3, 2, 0.375),
        ("nvidia.com/gpu=1", 1, 0, 1.0),
    ]
    assert [s.stranded_gpus for s in advice.shapes] == pytest.approx([2 / 3, 0.5, 1 / 3])
    assert sum(s.stranded_gpus for s in advice.shapes) + advice.unattributed_stranded_gpus == pytest.approx(2.25)
    assert [s.blocked_demand_gpus for s in advice.shapes] == [0, 0, 0]

    # gpu=2 has no larger whole-GPU request in use: only the two others are measured, the MIG one first (1.125 > 1).
    assert advice.evaluated_shapes == ("nvidia.com/mig-1g.5gb=1", "nvidia.com/gpu=1")
    assert [(r.shape, r.rounded_to) for r in advice.roundings] == [
        ("nvidia.com/mig-1g.5gb=1", "nvidia.com/mig-2g.10gb=1"),
        ("nvidia.com/gpu=1", "nvidia.com/gpu=2"),
    ]
    mig, whole = advice.roundings

    before = mig.before
    assert (before.stranded_gpus, before.free_gpus, before.stranded_share) == (2.25, 6.25, 0.36)
    assert (before.whole_free_physical_gpus, before.blocked_demand_gpus, before.pending_fit, before.pending) == (
        1,
        0,
        0,
        2,
    )
    assert before.unplaceable_pending == 2  # infer-3 and infer-4: no 1g.5gb free anywhere
    assert whole.before == before

    # 1g.5gb -> 2g.10gb: mig-a has room for two (infer-0, infer-1 stay), infer-2 is displaced; mig-a's three 1g.5gb are
    # then idle and asked by nobody (3/8 stranded), mig-b's 2g.10gb serve the shape, gpu-c keeps its odd GPU.
    assert (mig.pods, mig.extra_gpus, mig.in_place, mig.displaced, mig.displaced_fit) == (5, 0.625, 2, 1, 1)
    assert (mig.after.stranded_gpus, mig.after.free_gpus) == (1.375, 6.125)
    assert mig.after.stranded_share == pytest.approx(1.375 / 6.125)
    assert (mig.after.whole_free_physical_gpus, mig.after.blocked_demand_gpus, mig.after.pending_fit) == (1, 0, 2)
    assert (mig.recovered_gpus, mig.placed_gpus, mig.stopped_gpus, mig.benefit_gpus) == (0.875, 0.25, 0, 1.125)

    # gpu=1 -> gpu=2: prep-0 takes a second GPU on gpu-c (room 8 - 3 + 1 = 6), 4 GPUs left for two gpu=2 cpu=8 copies.
    assert (whole.pods, whole.extra_gpus, whole.in_place, whole.displaced) == (1, 1, 1, 0)
    assert (whole.after.stranded_gpus, whole.after.free_gpus) == (1.25, 5.25)
    assert whole.after.stranded_share == pytest.approx(1.25 / 5.25)
    assert (whole.after.pending_fit, whole.benefit_gpus) == (0, 1)

    # The sentences, and the docs print them as they are (and every number of the tables above).
    assert mig.sentence == (
        "5 pods ask for nvidia.com/mig-1g.5gb=1; as nvidia.com/mig-2g.10gb=1 they would take 0.625 more GPU-equivalents and "
        "strand 0.875 fewer (stranded share 36.0% -> 22.4%), blocked demand 0 -> 0, pending GPU pods that fit 0 -> 2 of 2; "
        "1 would no longer fit where it runs (it would fit another node)"
    )
    assert whole.sentence == (
        "1 pod asks for nvidia.com/gpu=1; as nvidia.com/gpu=2 it would take 1 more GPU-equivalent and strand 1 fewer "
        "(stranded share 36.0% -> 23.8%), blocked demand 0 -> 0, pending GPU pods that fit 0 -> 0 of 2"
    )
    docs = DOCS.read_text(encoding="utf-8")
    section = docs[docs.index("## Normalisation advice") : docs.index("## References")]
    # the docs print multiplication and minus signs
    flat = re.sub(r"\s+", " ", section).replace("\u00d7", "x").replace("\u2212", "-")
    for line in (mig.sentence, whole.sentence):
        assert line in flat
    for figure in (
        "Stranded 2.25 of 6.25 free = 36.0%",
        "1 x 2/3 = **0.6667**",
        "**0.5** (all of `mig-a`'s)",
        "1 x 1/3 = **0.3333**",
        "`unattributedStrandedGpuEquivalents = 0.75`",
        "5 x 1/8 = 0.625",
        "0.375 + 0 + 1 = 1.375",
        "1.375 / 6.125 = 22.4%",
        "0.875 + 2 x 0.125 - 0 = **1.125**",
        "0.5 + 0.75 + 0 = 1.25",
        "1.25 / 5.25 = 23.8%",
        "1 + 0 - 0 = **1**",
    ):
        assert figure in flat, figure


# ---------------------------------------------------------------------------
# Ranking and roundings on hand-built clusters


def test_small_mig_requests_rounded_up_use_the_idle_larger_slices_no_pod_asks_for() -> None:
    # m: two 1g.5gb (both busy) and two idle 2g.10gb that no pod asks for: 2 x 2/8 = 0.5 stranded, all of it on the
    # 1g.5gb pods' node. As 2g.10gb both pods fit m's idle 2g.10gb; their two 1g.5gb are then idle and asked by
    # nobody: 2 x 1/8 = 0.25 stranded. 3g.20gb is not offered: no candidate.
    snapshot = cluster(
        node("m", mig={"1g.5gb": 2, "2g.10gb": 2}, product=A100_40),
        pod("a", on="m", mig="1g.5gb"),
        pod("b", on="m", mig="1g.5gb"),
    )
    advice = advice_of(snapshot)
    (shape,) = advice.shapes
    assert (shape.label, shape.stranded_gpus, advice.unattributed_stranded_gpus) == ("nvidia.com/mig-1g.5gb=1", 0.5, 0)
    (r,) = advice.roundings
    assert (r.rounded_to, r.in_place, r.displaced, r.extra_gpus) == ("nvidia.com/mig-2g.10gb=1", 2, 0, 0.25)
    assert (r.before.stranded_gpus, r.after.stranded_gpus, r.recovered_gpus, r.benefit_gpus) == (0.5, 0.25, 0.25, 0.25)
    assert (r.before.stranded_share, r.after.stranded_share) == (1.0, 1.0)  # free shrinks with it: 0.5 -> 0.25


def test_one_gpu_pods_leave_an_odd_gpu_that_the_configured_two_gpu_shape_strands_and_rounding_them_takes_it() -> None:
    # g: 10 GPUs, three gpu=1 pods and one gpu=2 pod: 5 free; the configured shape gpu=2 takes 4, 1 stranded (20%).
    # As gpu=2 the three pods need 6 + 2 = 8 <= 10: all stay, 2 GPUs free, one gpu=2 copy takes them: 0 stranded.
    snapshot = cluster(
        node("g", gpus=10), *(pod(f"one-{i}", on="g", gpus=1) for i in range(3)), pod("two", on="g", gpus=2)
    )
    shapes = reference_shapes(snapshot, configured=[{GPU: 2}])
    advice = advise(snapshot, compute_figures(snapshot, shapes))
    assert [s.label for s in advice.shapes] == ["nvidia.com/gpu=1", "nvidia.com/gpu=2"]
    assert [s.stranded_gpus for s in advice.shapes] == pytest.approx([0.6, 0.4])  # held 3 : 2
    (r,) = advice.roundings  # gpu=2 has no larger request in use
    assert (r.shape, r.rounded_to, r.pods, r.in_place, r.extra_gpus) == (
        "nvidia.com/gpu=1",
        "nvidia.com/gpu=2",
        3,
        3,
        3,
    )
    assert (r.before.stranded_gpus, r.before.stranded_share, r.after.stranded_gpus, r.after.stranded_share) == (
        1,
        0.2,
        0,
        0,
    )
    assert r.sentence.startswith(
        "3 pods ask for nvidia.com/gpu=1; as nvidia.com/gpu=2 they would take 3 more GPU-equivalents "
        "and strand 1 fewer (stranded share 20.0% -> 0.0%)"
    )


def test_configured_shapes_asking_the_rounded_request_are_rounded_with_the_pods() -> None:
    # g: 9 GPUs; three gpu=1 pods and a gpu=2 pod: 4 free, all taken by the configured shape gpu=1 cpu=2: 0 stranded.
    # As gpu=2 the three pods stay (room 9 - 5 + 3 = 7, three copies of 2) and leave 1 GPU free. The configured shape
    # now asks gpu=2 cpu=2 (its CPU as configured) and cannot take it: 1 stranded (were it left at gpu=1, 0).
    snapshot = cluster(
        node("g", gpus=9), *(pod(f"one-{i}", on="g", gpus=1) for i in range(3)), pod("two", on="g", gpus=2)
    )
    shapes = reference_shapes(snapshot, configured=[{GPU: 1, "cpu": 2000}])
    advice = advise(snapshot, compute_figures(snapshot, shapes))
    (r,) = advice.roundings
    assert (r.in_place, r.displaced) == (3, 0)
    assert (r.before.stranded_gpus, r.after.free_gpus, r.after.stranded_gpus) == (0, 1, 1)
    assert (r.recovered_gpus, r.benefit_gpus) == (-1, -1)
    assert "strand 1 more (stranded share 0.0% -> 100.0%)" in r.sentence


def test_cpu_bound_one_gpu_pods_rounded_to_two_gpus_leave_no_odd_gpu() -> None:
    # g: 8 GPUs, 64 CPU; a gpu=1 cpu=32 pod and a gpu=2 cpu=4 pod: 5 GPUs and 28 CPU free. gpu=1 cpu=32 fits no copy
    # (28 < 32), gpu=2 cpu=4 two (4 GPUs): 1 stranded, shared 1:2 by the pods' GPUs. As gpu=2 cpu=32 the first pod
    # stays (room 8 - 3 + 1 = 6): 4 GPUs free, two gpu=2 cpu=4 copies: 0 stranded.
    snapshot = cluster(node("g", gpus=8), pod("big", on="g", gpus=1, cpu="32"), pod("two", on="g", gpus=2, cpu="4"))
    advice = advice_of(snapshot)
    assert [s.label for s in advice.shapes] == ["nvidia.com/gpu=2", "nvidia.com/gpu=1"]
    assert [s.stranded_gpus for s in advice.shapes] == pytest.approx([2 / 3, 1 / 3])
    (r,) = advice.roundings
    assert (r.rounded_to, r.in_place, r.before.stranded_gpus, r.after.stranded_gpus, r.benefit_gpus) == (
        "nvidia.com/gpu=2",
        1,
        1,
        0,
        1,
    )


def test_rounding_lets_a_pending_pod_blocked_by_a_taint_take_a_larger_slice_and_blocked_demand_falls() -> None:
    # t (tainted): one idle 1g.5gb. m: one 1g.5gb (busy: a) and two idle 2g.10gb nobody asks for (0.5 stranded).
    # Pending p asks 1g.5gb: the free total has it (t), no eligible node does: blocked, 1/8 of blocked demand.
    # As 2g.10gb: a moves to one of m's 2g.10gb (room 2), p fits the other one. m's 1g.5gb and t's are idle and asked by
    # nobody (2 x 1/8 stranded); the 2g.10gb left free is taken by the shape.
    taint = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    snapshot = cluster(
        node("t", mig={"1g.5gb": 1}, product=A100_40, taints=taint),
        node("m", mig={"1g.5gb": 1, "2g.10gb": 2}, product=A100_40),
        pod("a", on="m", mig="1g.5gb"),
        pod("p", mig="1g.5gb"),
    )
    advice = advice_of(snapshot)
    (shape,) = advice.shapes
    assert (shape.bound_pods, shape.pending_pods, shape.stranded_gpus, shape.blocked_demand_gpus) == (1, 1, 0.5, 0.125)
    (r,) = advice.roundings
    assert (r.before.blocked_demand_gpus, r.before.blocked_pending, r.before.pending_fit) == (0.125, 1, 0)
    assert (r.after.blocked_demand_gpus, r.after.blocked_pending, r.after.pending_fit) == (0, 0, 1)
    assert (r.before.stranded_gpus, r.before.free_gpus, r.after.stranded_gpus, r.after.free_gpus) == (
        0.5,
        0.625,
        0.25,
        0.5,
    )
    assert (r.recovered_gpus, r.placed_gpus, r.stopped_gpus, r.benefit_gpus, r.extra_gpus) == (
        0.25,
        0.125,
        0,
        0.375,
        0.25,
    )
    assert "blocked demand 0.125 -> 0, pending GPU pods that fit 0 -> 1 of 1" in r.sentence


def test_blocked_demand_that_falls_because_pods_no_longer_fit_anywhere_is_no_benefit() -> None:
    # a, b: 8 GPUs, seven gpu=1 pods each; the pending gpu=2 pod is blocked (1 + 1 free, no node has 2).
    # As gpu=2: room 8 - 7 + 7 = 8 per node, four stay, three are displaced on each; nothing is left free, so the
    # pending pod and the six displaced ones are all larger than the free capacity: blocked demand 2 -> 0, yet the
    # six displaced pods' work (6 GPUs) stops and nothing gets a place: benefit -6.
    snapshot = cluster(
        node("a", gpus=8),
        node("b", gpus=8),
        *(pod(f"a{i}", on="a", gpus=1) for i in range(7)),
        *(pod(f"b{i}", on="b", gpus=1) for i in range(7)),
        pod("wide", gpus=2),
    )
    advice = advice_of(snapshot)
    r = rounding(advice, "nvidia.com/gpu=1", "nvidia.com/gpu=2")
    assert (r.in_place, r.displaced, r.displaced_fit) == (8, 6, 0)
    assert (r.before.blocked_demand_gpus, r.after.blocked_demand_gpus, r.before.pending_fit, r.after.pending_fit) == (
        2,
        0,
        0,
        0,
    )
    assert (r.after.unplaceable_pending, r.after.free_gpus) == (7, 0)
    assert (r.recovered_gpus, r.placed_gpus, r.stopped_gpus, r.benefit_gpus) == (0, 0, 6, -6)
    assert r.sentence.endswith(
        "; 6 would no longer fit where they run (0 of them would fit another node, each on its own)"
    )
    # issue 45: "blocked demand 2 -> 0" said with why, not read as a gain
    assert (
        "blocked demand 2 -> 0 (only because 7 pending pod(s) would then ask more than the free capacity: no longer "
        "counted as blocked, still waiting)"
    ) in r.sentence
    assert "no rounding measured lowers stranded capacity or gets more pending GPU pods a place" in advice.notes
    # The rule rebuilt by hand gives the same figures; the pods that stay are the first in name order, a0..a3 and b0..b3.
    rebuilt, displaced = _rounded_by_hand(snapshot, r)
    assert displaced == {"default/a4", "default/a5", "default/a6", "default/b4", "default/b5", "default/b6"}
    after = compute_figures(rebuilt)
    assert (
        after.cluster.stranded_gpus,
        after.cluster.free_gpus,
        after.blocked_demand_gpus,
        len(after.unplaceable_pending),
    ) == (r.after.stranded_gpus, r.after.free_gpus, r.after.blocked_demand_gpus, r.after.unplaceable_pending)


def _rounded_by_hand(snapshot: Snapshot, r: Rounding) -> tuple[Snapshot, set[str]]:
    """The rounded cluster from the documented rule, pod by pod in name order: a pod of the shape keeps its node while the
    node has room for its rounded request; the others are unbound and pending."""
    ((resource, _),) = r.request.items()
    ((new_resource, new_amount),) = r.rounded.items()
    allocatable = {n.name: n.allocatable.get(new_resource) for n in snapshot.nodes}
    used: dict[str, int] = {}
    for p in snapshot.pods:
        if p.is_bound and p.requests.gpu_part() != r.request:
            used[p.node_name] = used.get(p.node_name, 0) + p.requests.get(new_resource)
    pods, displaced = [], set()
    for p in sorted(snapshot.pods, key=lambda p: p.key):
        if p.requests.gpu_part() != r.request:
            pods.append(p)
            continue
        requests = Resources({**{k: v for k, v in p.requests.items() if k != resource}, new_resource: new_amount})
        if p.is_bound and used.get(p.node_name, 0) + new_amount <= allocatable[p.node_name]:
            used[p.node_name] = used.get(p.node_name, 0) + new_amount
            pods.append(msgspec.structs.replace(p, requests=requests))
        else:
            pods.append(msgspec.structs.replace(p, requests=requests, node_name="", phase="Pending"))
            displaced |= {p.key} if p.is_bound else set()
    return dataclasses.replace(snapshot, pods=tuple(pods)), displaced


def test_candidates_are_never_smaller_and_never_a_request_no_node_offers() -> None:
    # Whole GPUs in use: 1, 2, 4 and a pending 16 that no node offers (8 at most). MIG: an A100-40GB node offering
    # 1g.5gb, 2g.10gb, 3g.20gb and 4g.20gb; an A100-80GB node offering 1g.10gb and 3g.40gb (another model).
    snapshot = cluster(
        node("g", gpus=8),
        node("m40", mig={"1g.5gb": 1, "2g.10gb": 1, "3g.20gb": 1}, product=A100_40),
        node("m40b", mig={"4g.20gb": 1}, product=A100_40),
        node("m80", mig={"1g.10gb": 2, "3g.40gb": 1}, product=A100_80),
        pod("one", on="g", gpus=1),
        pod("two", on="g", gpus=2),
        pod("four", on="g", gpus=4),
        pod("huge", gpus=16),
        pod("small", on="m40", mig="2g.10gb"),
        pod("third", on="m40", mig="3g.20gb"),
        pod("tiny", on="m80", mig="1g.10gb"),
        pod("both", on="m40", mig="1g.5gb", extra_requests={"nvidia.com/mig-1g.10gb": "1"}),
    )
    advice = advice_of(snapshot, top=20, per_shape=5)
    targets: dict[str, list[str]] = {}
    for r in advice.roundings:
        targets.setdefault(r.shape, []).append(r.rounded_to)
    assert {shape: sorted(to) for shape, to in targets.items()} == {
        "nvidia.com/gpu=1": ["nvidia.com/gpu=2", "nvidia.com/gpu=4"],  # never 16
        "nvidia.com/gpu=2": ["nvidia.com/gpu=4"],  # never 1
        # never 1g.5gb, never A100-80GB's
        "nvidia.com/mig-2g.10gb=1": [
            "nvidia.com/mig-3g.20gb=1",
            "nvidia.com/mig-4g.20gb=1",
        ],
        # 4 compute slices to 3: larger, at no extra GPU-equivalent
        "nvidia.com/mig-3g.20gb=1": ["nvidia.com/mig-4g.20gb=1"],
        "nvidia.com/mig-1g.10gb=1": ["nvidia.com/mig-3g.40gb=1"],  # the A100-80GB's own larger profile
    }
    assert "nvidia.com/gpu=4" not in targets and "nvidia.com/gpu=16" not in targets
    offered = {r: max(n.allocatable.get(r) for n in snapshot.nodes) for n in snapshot.nodes for r in n.allocatable}
    for r in advice.roundings:
        ((resource, amount),) = r.rounded.items()
        assert offered[resource] >= amount
        assert r.rounded != r.request and r.extra_gpus >= 0
    assert rounding(advice, "nvidia.com/mig-3g.20gb=1", "nvidia.com/mig-4g.20gb=1").extra_gpus == 0
    # One per shape: the nearest (fewest extra GPU-equivalents).
    nearest = {r.shape: r.rounded_to for r in advice_of(snapshot, top=20, per_shape=1).roundings}
    assert (nearest["nvidia.com/gpu=1"], nearest["nvidia.com/mig-2g.10gb=1"]) == (
        "nvidia.com/gpu=2",
        "nvidia.com/mig-3g.20gb=1",
    )
    # The pod asking two GPU resources is ranked but never rounded.
    assert "nvidia.com/mig-1g.10gb=1 nvidia.com/mig-1g.5gb=1" in [s.label for s in advice.shapes]


def test_only_the_first_top_shapes_that_can_be_rounded_are_measured() -> None:
    snapshot = docs_example_cluster()
    advice = advice_of(snapshot, top=1, per_shape=1)
    assert advice.evaluated_shapes == ("nvidia.com/mig-1g.5gb=1",)  # gpu=2 (first) has no rounding
    assert [(r.shape, r.rounded_to) for r in advice.roundings] == [
        ("nvidia.com/mig-1g.5gb=1", "nvidia.com/mig-2g.10gb=1")
    ]
    with pytest.raises(ValueError):
        advice_of(snapshot, top=0)


def test_the_advice_does_not_depend_on_the_order_of_pods_or_nodes() -> None:
    snapshot = docs_example_cluster()
    shuffled = dataclasses.replace(snapshot, pods=tuple(reversed(snapshot.pods)), nodes=tuple(reversed(snapshot.nodes)))
    assert advice_to_dict(advice_of(shuffled)) == advice_to_dict(advice_of(snapshot))


def test_without_gpu_pods_there_is_nothing_to_advise() -> None:
    advice = advice_of(cluster(node("g", gpus=8), node("c"), pod("web", on="c")))
    assert (advice.shapes, advice.roundings) == ((), ())
    assert advice.notes == ("no GPU pod: no request shape to advise on",)


# ---------------------------------------------------------------------------
# JSON form and the report section


def test_the_json_form_names_units_and_rounds_like_the_figures() -> None:
    doc = advice_to_dict(advice_of(docs_example_cluster()))
    assert (doc["strandedGpuEquivalents"], doc["unattributedStrandedGpuEquivalents"]) == (2.25, 0.75)
    assert doc["shapes"][0] == {
        "request": {GPU: 2},
        "label": "nvidia.com/gpu=2",
        "boundPods": 1,
        "pendingPods": 0,
        "heldGpuEquivalents": 2.0,
        "strandedGpuEquivalents": 0.6667,
        "blockedDemandGpuEquivalents": 0.0,
    }
    first = doc["roundings"][0]
    assert (first["request"], first["rounded"], first["extraGpuEquivalents"], first["benefitGpuEquivalents"]) == (
        {MIG_1G: 1},
        {MIG_2G: 1},
        0.625,
        1.125,
    )
    assert first["after"] == {
        "strandedGpuEquivalents": 1.375,
        "freeGpuEquivalents": 6.125,
        "strandedShare": 0.2245,
        "wholeFreePhysicalGpus": 1,
        "blockedDemandGpuEquivalents": 0.0,
        "blockedPendingPods": 0,
        "unplaceablePendingPods": 0,
        "pendingPodsThatFit": 2,
        "pendingPods": 2,
    }
    assert (first["inPlace"], first["displaced"], first["displacedFit"]) == (2, 1, 1)
    assert json.loads(json.dumps(doc)) == doc


def test_the_report_carries_the_advice_only_when_asked() -> None:
    snapshot = docs_example_cluster()
    figures = compute_figures(snapshot)
    advice = advise(snapshot, figures)
    document = json.loads(render_report(figures, snapshot, "json", advice=advice))
    assert document["advice"] == advice_to_dict(advice)
    assert "advice" not in json.loads(render_report(figures, snapshot, "json"))
    text = render_report(figures, snapshot, "text", advice=advice, width=400)
    assert "\nNormalisation advice\n--------------------\n" in text
    assert "nvidia.com/mig-1g.5gb=1 -> nvidia.com/mig-2g.10gb=1" in text
    assert f"- {advice.roundings[0].sentence}" in text
    assert "Normalisation advice" not in render_report(figures, snapshot, "text")
    markdown = render_report(figures, snapshot, "markdown", advice=advice)
    assert "## Normalisation advice" in markdown
    assert "| nvidia.com/gpu=2 | 1 | 0 | 2 | 0.67 | 0 |" in markdown


# ---------------------------------------------------------------------------
# The command line


def test_report_advise_on_the_example_prints_the_section_and_the_json_key() -> None:
    text = compactor("report", "--example", "--advise")
    assert text.returncode == 0, text.stderr
    assert "Normalisation advice" in text.stdout and "pods ask for" in text.stdout
    result = compactor("report", "--example", "--advise", "--advise-top", "1", "--output", "json")
    assert result.returncode == 0, result.stderr
    advice = json.loads(result.stdout)["advice"]
    assert len(advice["evaluatedShapes"]) == 1
    assert {"shapes", "roundings", "notes", "strandedGpuEquivalents"} <= advice.keys()
    assert "advice" not in json.loads(compactor("report", "--example", "--output", "json").stdout)


def test_bad_advise_options_are_one_line_errors() -> None:
    assert_one_line_error(
        compactor("report", "--example", "--advise", "--advise-top", "0"), "--advise-top must be >= 1, got 0"
    )
    assert_one_line_error(compactor("report", "--example", "--advise-top", "2"), "--advise-top goes with --advise")
