"""``-o html``: one self-contained page per report or plan, its occupancy picture cell by cell, the curve, the moves.

The pages are read back with the standard library's HTML parser: each test counts the elements a reader sees (node
blocks, GPU cells by colour class, curve dots) in the section that shows them.
"""

from __future__ import annotations

import json
import re
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from compactor.app.plan_document import build_plan
from compactor.cli import main
from compactor.metrics.figures_json import figures_to_dict
from compactor.metrics.fragmentation import compute_figures
from compactor.model.load import build_snapshot
from compactor.model.resources import is_gpu_resource
from compactor.model.types import Snapshot
from compactor.planner.plan import CompactionPlan, Metadata, Move, PendingNote, SolverReport, apply_plan
from compactor.planner.request import PlanRequest
from compactor.render.html import render_plan_html, render_report_html
from compactor.settings.bundles import PlannerSettings
from tests.builders import A100_40, cluster, node, pdb, pod
from tests.html_pages import Page, plan_of

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from generate_cluster import generate  # benchmarks/ is not a package

TWO_MEGABYTES = 2 * 1024 * 1024


def two_pods_off_a_node() -> Snapshot:
    """gpu-2's two 1-GPU pods move to gpu-1 (whose bare pod stays), freeing gpu-2; a PDB guards them; a CPU node."""
    return cluster(
        node("gpu-1", gpus=8),
        node("gpu-2", gpus=8),
        node("cpu-1"),
        pod("a-0", on="gpu-1", gpus=4, owner=None),
        pod("b-0", on="gpu-2", gpus=1, labels={"app": "b"}),
        pod("b-1", on="gpu-2", gpus=1, labels={"app": "b"}),
        pdb("b-budget", match={"app": "b"}, allowed=1),
    )


def test_the_report_draws_a_cell_per_gpu_coloured_used_free_or_stranded() -> None:
    # docs/metrics.md's worked example: the only shape asks 2 GPUs and 4 CPUs; odd keeps 1 stranded GPU, cpu-bound 2.
    snapshot = cluster(
        node("odd", gpus=3),
        node("cpu-bound", gpus=8, cpu="12"),
        node("roomy", gpus=8),
        node("idle", gpus=8),
        node("cpu-only"),
        pod("a", on="odd", gpus=2, cpu="4"),
        *(pod(f"b{i}", on="cpu-bound", gpus=2, cpu="4") for i in range(3)),
        pod("c", on="roomy", gpus=2, cpu="4"),
    )
    text = render_report_html(compute_figures(snapshot), snapshot)
    page = Page(text)
    assert len(page.nodes("occupancy")) == 4  # the CPU-only node is counted, not drawn
    assert "1 node(s) without GPUs are not drawn" in text
    assert page.cells("occupancy") == {"u": 2 + 6 + 2, "s": 1 + 2, "f": 6 + 8}
    assert page.node("occupancy", "odd")["title"] == "odd (NVIDIA-A100-SXM4-40GB): gpu 2/3 used, 1 stranded"
    assert "<b>" not in text.split('id="occupancy"')[0]  # the legend sits inside the picture's section
    assert '<b class="s"></b>stranded: free, but no request shape in use can take it' in text
    # issue 45: each node captioned by name, not only on hover; the units and words the page counts in, defined
    assert '<span class="n">odd</span>' in text and '<span class="n">idle</span>' in text
    terms = text.split('<dl class="terms">')[1].split("</dl>")[0]
    assert all(f"<dt>{t}</dt>" in terms for t in ("GPU-equivalents", "stranded", "whole-free")), terms


def test_a_mig_node_has_a_cell_per_slice_one_row_per_profile() -> None:
    # 1g.5gb is in use, 3g.20gb is not: the idle 3g.20gb slice is stranded (docs/metrics.md).
    snapshot = cluster(node("m", mig={"1g.5gb": 4, "3g.20gb": 1}, product=A100_40), pod("s", on="m", mig="1g.5gb"))
    page = Page(render_report_html(compute_figures(snapshot), snapshot))
    assert page.cells("occupancy") == {"u": 1, "f": 3, "s": 1}
    assert sum(1 for s, tag, a in page.tags if s == "occupancy" and a.get("class") == "res") == 2
    assert (
        page.node("occupancy", "m")["title"]
        == "m (NVIDIA-A100-SXM4-40GB): mig-1g.5gb 1/4 used; mig-3g.20gb 0/1 used, 1 stranded"
    )


def test_the_report_carries_every_section_of_the_text_report_as_tables() -> None:
    snapshot = cluster(
        node("gpu-a", gpus=4),
        node("gpu-b", gpus=4),
        pod("t0", on="gpu-a", gpus=2),
        pod("t1", on="gpu-b", gpus=2),
        pod("wide", gpus=4),
    )
    text = render_report_html(compute_figures(snapshot), snapshot)
    for title in (
        "Headline",
        "Cluster",
        "Reference shapes and headroom",
        "Pools",
        "Most fragmented nodes (top 10)",
        "Pending GPU pods blocked by fragmentation",
    ):
        assert f"<h2>{title}</h2>" in text
    assert "<td>default/wide</td>" in text  # the blocked pending pod
    assert '<div class="v">4</div>' in text  # blocked demand, a headline card


def test_the_plan_draws_moving_pods_before_and_the_freed_node_after() -> None:
    snapshot = two_pods_off_a_node()
    plan = plan_of(snapshot)
    assert plan.freed_nodes == ["gpu-2"] and len(plan.moves) == 2
    page = Page(render_plan_html(plan, snapshot))
    assert page.cells("before") == {"u": 4, "m": 2, "f": 4 + 6}
    assert page.cells("after") == {"u": 4, "m": 2, "f": 2, "w": 8}
    for section in ("before", "after"):
        assert len(page.nodes(section)) == 2
        assert [a["title"].split(" ")[0] for a in page.nodes(section) if "freed" in a["class"].split()] == ["gpu-2"]
    assert page.node("before", "gpu-2")["title"].endswith("gpu 2/8 used, 2 moving off; freed by the plan")
    assert page.node("after", "gpu-1")["title"].endswith("gpu 6/8 used, 2 moved here")


def test_a_pending_pod_the_plan_places_has_cells_of_its_own() -> None:
    snapshot = cluster(
        node("gpu-1", gpus=8),
        node("gpu-2", gpus=8),
        pod("a-0", on="gpu-1", gpus=4, owner=None),
        pod("b-0", on="gpu-2", gpus=4),
        pod("wide", gpus=8),
    )
    plan = plan_of(snapshot)
    assert [(p.pod, p.to_node) for p in plan.placed_pending] == [("default/wide", "gpu-2")]
    text = render_plan_html(plan, snapshot)
    page = Page(text)
    assert page.cells("after") == {"u": 4, "m": 4, "p": 8}
    assert page.node("after", "gpu-2")["title"].endswith("gpu 8/8 used, 8 placed")
    assert "<td>default/wide</td><td>gpu-2</td>" in text


def test_the_curve_has_a_dot_per_point_and_marks_the_chosen_one_where_it_lies() -> None:
    plan = plan_of(two_pods_off_a_node())
    page = Page(render_plan_html(plan, two_pods_off_a_node()))
    dots = [a for _, tag, a in page.tags if tag == "circle"]
    assert len(dots) == len(plan.frontier) == 2
    (chosen,) = [a for a in dots if a["class"] == "pt chosen"]
    point = next(p for p in plan.frontier if p.chosen)
    most = max(p.moves for p in plan.frontier)
    # x: moves, inside the margins
    assert float(chosen["cx"]) == pytest.approx(60 + (640 - 60 - 24) * point.moves / most, abs=0.1)
    assert float(chosen["cy"]) == pytest.approx(20, abs=0.1)  # the most GPUs freed: the top of the chart


def test_moves_are_listed_in_order_under_their_reason_with_their_pdb() -> None:
    snapshot = two_pods_off_a_node()
    text = render_plan_html(plan_of(snapshot), snapshot)
    moves = text.split("<h2>Moves, in execution order</h2>")[1].split("</table>")[0]
    assert moves.count('<tr class="why">') == 1  # both moves free gpu-2: one reason line
    assert moves.index("default/b-0") < moves.index("default/b-1")
    assert moves.count("<td>default/b-budget (1 disruption(s) allowed)</td>") == 2
    assert '<td>no owner: evicting it would lose it</td><td class="r">1</td>' in text  # what may not move, and why


def test_pod_names_and_reasons_are_escaped() -> None:
    snapshot = two_pods_off_a_node()
    plan = plan_of(snapshot)
    hostile = '"><script>alert(1)</script><img src=x onerror=alert(2)>'
    plan = plan.model_copy(
        update={
            "moves": [
                m.model_copy(update={"pod": f"default/{hostile}", "reason": f"why {hostile}"}) for m in plan.moves
            ],
            "pending_not_placed": [PendingNote(pod=f"ns/{hostile}", reason=hostile)],
            "warnings": [hostile],
        }
    )
    text = render_plan_html(plan, snapshot)
    assert "<script" not in text and "<img" not in text
    # two moves, their reason, the pending pod and its reason, the warning
    assert text.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 5


def test_a_hostile_node_name_stays_inside_its_title_attribute() -> None:
    snapshot = cluster(node('gpu-"1"><b>x</b>', gpus=2))
    page = Page(render_report_html(compute_figures(snapshot), snapshot))
    (block,) = page.nodes("occupancy")
    assert block["title"].startswith('gpu-"1"><b>x</b> (')  # the parser reads back exactly the name: nothing leaked out
    assert page.cells("occupancy") == {"f": 2}


def test_the_same_input_renders_the_same_page() -> None:
    first, second = two_pods_off_a_node(), two_pods_off_a_node()  # built twice: other uids, same cluster
    assert render_report_html(compute_figures(first), first) == render_report_html(compute_figures(second), second)
    plan = plan_of(first)
    assert render_plan_html(plan, first) == render_plan_html(plan, second)


def test_the_page_fetches_nothing() -> None:
    snapshot = two_pods_off_a_node()
    for text in (
        render_plan_html(plan_of(snapshot), snapshot),
        render_report_html(compute_figures(snapshot), snapshot),
    ):
        assert text.startswith("<!DOCTYPE html>")
        assert not re.search(r"https?:|//[a-z]|\bsrc=|\bhref=|<script|<link|url\(|@import", text, re.IGNORECASE)
        assert "Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\"" in text


def _generated(nodes: int, pods: int) -> Snapshot:
    return build_snapshot(generate(nodes, pods, seed=1)["items"], source="generated")


def _moving_everything_off(snapshot: Snapshot, nodes: int) -> CompactionPlan:
    """A plan (not solved: built by hand) that moves every GPU pod off ``nodes`` GPU nodes onto the next node: as many moves
    and freed nodes as a page is likely to carry, for its size."""
    gpu_nodes = sorted(n.name for n in snapshot.nodes if any(is_gpu_resource(r) for r in n.allocatable))
    targets = dict(zip(gpu_nodes[:nodes], gpu_nodes[nodes:], strict=False))
    moves = [
        Move(
            pod=p.key,
            from_node=p.node_name,
            to_node=targets[p.node_name],
            reason=f"frees {p.node_name}; {targets[p.node_name]} ...",
            requests={k: v for k, v in p.requests.items() if k != "pods"},
            gpu=True,
        )
        for p in snapshot.bound_pods()
        if p.node_name in targets and any(is_gpu_resource(r) for r in p.requests)
    ]
    plan = CompactionPlan(
        metadata=Metadata(id="plan-size", created_at="2026-01-01T00:00:00Z", source="generated"),
        moves=moves,
        freed_nodes=sorted({m.from_node for m in moves}),
        solver=SolverReport(status="OPTIMAL", wall_seconds=0.0),
    )
    return plan.model_copy(
        update={
            "before": figures_to_dict(compute_figures(snapshot)),
            "after": figures_to_dict(compute_figures(apply_plan(snapshot, plan))),
        }
    )


def test_a_1000_node_cluster_fits_in_2_mb() -> None:
    started = time.monotonic()
    snapshot = _generated(1000, 10000)
    report = render_report_html(compute_figures(snapshot), snapshot)
    plan = _moving_everything_off(snapshot, 300)
    page = render_plan_html(plan, snapshot)
    gpu_nodes = sum(1 for n in snapshot.nodes if any(is_gpu_resource(r) for r in n.allocatable))
    assert len(Page(report).nodes("occupancy")) == gpu_nodes > 800
    assert len(plan.moves) > 1000
    sizes = len(report.encode()), len(page.encode())
    print(
        f"1,000 nodes: report {sizes[0]:,} bytes, plan of {len(plan.moves)} moves {sizes[1]:,} bytes, "
        f"in {time.monotonic() - started:.1f}s"
    )
    assert max(sizes) < TWO_MEGABYTES


def test_html_is_an_output_of_report_and_plan_and_write_still_saves_the_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", "--example", "-o", "html"]) == 0
    report = capsys.readouterr().out
    assert report.startswith("<!DOCTYPE html>") and "<h1>GPU fragmentation report: example cluster</h1>" in report
    written = tmp_path / "plan.json"
    assert main(["plan", "--example", "--output", "html", "--time-limit", "5", "--write", str(written)]) == 0
    page = capsys.readouterr().out
    plan = CompactionPlan.model_validate(json.loads(written.read_text(encoding="utf-8")))
    assert page.startswith("<!DOCTYPE html>") and f"<h1>Compaction plan {plan.metadata.id}</h1>" in page
    assert len(Page(page).nodes("after")) == len(Page(page).nodes("before")) > 0


def test_report_advise_puts_the_normalisation_advice_on_the_page(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--example", "--advise", "-o", "html"]) == 0
    with_advice = capsys.readouterr().out
    assert main(["report", "--example", "-o", "html"]) == 0
    without = capsys.readouterr().out
    assert "Normalisation advice" in with_advice and "Normalisation advice" not in without


def test_what_may_not_move_is_counted_by_reason_and_listed_in_an_expandable_list() -> None:
    snapshot = cluster(
        node("gpu-1", gpus=8),
        node("gpu-2", gpus=8),
        pod("bare-0", on="gpu-1", gpus=2, owner=None),
        pod("bare-1", on="gpu-2", gpus=1, owner=None),
        pod("app-0", on="gpu-2", gpus=1),
    )
    plan = build_plan(
        PlanRequest.of(
            snapshot,
            PlannerSettings.of(min_replicas=1, time_limit_seconds=5),
            source="test",
            now=datetime(2026, 1, 1, tzinfo=UTC),
        )
    )
    assert plan.explanations["unmovablePodsSample"] == {
        "no owner: evicting it would lose it": ["default/bare-0", "default/bare-1"]
    }
    page = render_plan_html(plan, snapshot)
    listed = page.split("<summary>no owner: evicting it would lose it (2)</summary>")[1].split("</details>")[0]
    assert re.findall(r"<li>([^<]+)</li>", listed) == ["default/bare-0", "default/bare-1"]
