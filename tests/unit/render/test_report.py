"""Report renderers: text and markdown carry every section; JSON round-trips and carries the figures."""

from __future__ import annotations

import json

import pytest

from compactor.metrics.figures_json import figures_to_dict
from compactor.metrics.fragmentation import compute_figures
from compactor.model.numbers import fmt_gpus, fmt_pct
from compactor.model.types import Snapshot
from compactor.render.report import API_VERSION, KIND, render_report
from compactor.render.report_sections import fmt_mig
from tests.builders import A100_40, A100_80, cluster, node, pod

SECTIONS = (
    "Warnings",  # first: they qualify every figure
    "Headline",  # the figures compaction moves
    "Cluster",
    "Reference shapes and headroom",
    "Pools",
    "Most fragmented nodes (top 10)",
    "Pending GPU pods blocked by fragmentation",
    "Pending GPU pods larger than the free capacity",
)


def busy_cluster() -> Snapshot:
    """Whole GPUs, MIG, a CPU node, a blocked pod, an unplaceable pod and a loader warning."""
    return cluster(
        node("gpu-a", gpus=4, product=A100_80),
        node("gpu-b", gpus=4, product=A100_80),
        node("mig-c", mig={"3g.20gb": 2}, product=A100_40, unschedulable=True),
        node("cpu-d"),
        pod("train-0", on="gpu-a", gpus=2, cpu="8", memory="64Gi"),
        pod("train-1", on="gpu-b", gpus=2, cpu="8", memory="64Gi"),
        pod("infer-0", on="mig-c", mig="3g.20gb", cpu="4", memory="16Gi"),
        pod("web-0", on="cpu-d"),
        pod("wide", gpus=4, priority=1000),
        pod("huge", gpus=16),
        {"kind": "Service", "metadata": {"name": "ignored"}},
    )


def render(fmt: str) -> str:
    snapshot = busy_cluster()
    return render_report(compute_figures(snapshot), snapshot, fmt, width=400)  # wide: every row on one line


def test_the_text_report_has_every_section_in_order() -> None:
    text = render("text")
    positions = [text.index(f"\n{title}\n") for title in SECTIONS]
    assert positions == sorted(positions)
    assert text.startswith("GPU fragmentation report: test\n")


def test_the_text_report_summarises_the_cluster_figures() -> None:
    text = render("text")
    assert "Whole-free GPU nodes" in text
    assert "Free on busy GPU nodes              4.5 GPU-equivalents (free on nodes that run GPU pods)" in text
    headline = text.split("\nHeadline\n")[1].split("\nCluster\n")[0]
    assert "Blocked demand   1 pending GPU pod(s) asking 4 GPU-equivalents" in headline
    assert "Whole-free GPUs  0 (physical) on 0 node(s)" in headline
    assert "Stranded share   0.0% of the free GPU capacity (0 of 4.5 GPU-equivalents)" in headline
    assert "MIG idle                            3g.20gb 1/2 (idle rate 50.0%)" in text
    assert "Fragmentation rate" in text and "FGD fragmentation rate" in text


def test_the_text_report_fits_the_width_without_losing_a_word() -> None:
    snapshot = busy_cluster()
    figures = compute_figures(snapshot)
    wide, narrow = (render_report(figures, snapshot, "text", width=w) for w in (400, 100))
    assert max(map(len, narrow.splitlines())) <= 100 < max(map(len, wide.splitlines()))

    def characters(text: str) -> list[str]:  # what the text says, whatever its line breaks and column rules
        return sorted("".join(line for line in text.split() if set(line) != {"-"}))

    assert characters(narrow) == characters(wide)  # wrapped, never cut
    assert all(line == line.rstrip() for line in narrow.splitlines())


def test_a_narrow_terminal_wraps_between_words_never_inside_a_resource_or_node_name() -> None:
    """Issue 45, item 8: at a narrow width the report broke tokens ("n / vidia.com/mig-"). Every word of the wide report
    is now a word of the narrow one; a table whose words cannot fit stays a table, a little wider."""
    snapshot = busy_cluster()
    figures = compute_figures(snapshot)
    wide, narrow = (render_report(figures, snapshot, "text", width=w) for w in (400, 60))

    def names(text: str) -> list[str]:  # resource, node and pod names: the words a reader copies
        return sorted(word for word in text.split() if "/" in word or "=" in word or word.startswith(("gpu-", "mig-")))

    assert names(narrow) == names(wide)
    assert "nvidia.com/mig-3g.20gb=1" in narrow.split()
    over = [line for line in narrow.splitlines() if len(line) > 60]
    # only a table row (or a cell's next line under its column): its columns hold whole words; prose wraps at 60
    assert all("  " in line.strip() or line.startswith(" " * 8) for line in over), over


def test_the_text_report_aligns_columns_and_has_no_trailing_spaces() -> None:
    lines = render("text").splitlines()
    assert all(line == line.rstrip() for line in lines)
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("Pool "))
    rows = lines[header + 2 : header + 5]
    nodes_column = lines[header].index("Nodes") + len("Nodes")
    assert all(row[nodes_column - 1].isdigit() for row in rows)  # right-aligned under the header


def test_the_text_report_lists_blocked_and_unplaceable_pods_and_the_worst_nodes() -> None:
    text = render("text")
    assert "default/wide" in text and "at most 2 nvidia.com/gpu free on one node, needs 4" in text
    assert "default/huge" in text and "needs 16 nvidia.com/gpu" in text
    worst = text.split("Most fragmented nodes (top 10)")[1].split("Pending GPU pods")[0]
    assert "gpu-a" in worst and "mig-c" in worst and "cordoned" in worst
    assert "cpu-d" not in worst


def test_the_text_report_ends_with_the_snapshot_warnings() -> None:
    text = render("text")
    warnings = text.split("\nWarnings\n")[1]
    assert "skipped 1 object(s)" in warnings


def test_the_markdown_report_carries_the_same_sections_as_tables() -> None:
    markdown = render("markdown")
    for title in SECTIONS:
        assert f"\n## {title}\n" in markdown
    assert "| Pool | Nodes | GPUs (physical) | Allocated (GPU-eq.) | Free (GPU-eq.) |" in markdown
    assert "| --- | ---: | ---: |" in markdown
    assert "| default/wide | 1000 |" in markdown


def test_the_json_report_round_trips_and_carries_the_figures() -> None:
    snapshot = busy_cluster()
    figures = compute_figures(snapshot)
    document = json.loads(render_report(figures, snapshot, "json"))
    assert (document["apiVersion"], document["kind"]) == (API_VERSION, KIND)
    assert document["metadata"]["source"] == "test"
    assert document["figures"] == figures_to_dict(figures)
    assert document["figures"]["blockedPending"][0]["pod"] == "default/wide"


def test_a_cluster_without_gpu_pods_reports_undefined_rates() -> None:
    snapshot = cluster(node("gpu", gpus=2), node("cpu"), pod("web", on="cpu"))
    text = render_report(compute_figures(snapshot), snapshot, "text")
    assert "No reference shapes" in text
    assert "Fragmentation rate                  n/a" in text
    assert "Not defined" in text


def test_an_unknown_format_is_rejected() -> None:
    snapshot = cluster(node("a", gpus=1))
    with pytest.raises(ValueError, match="unknown report format 'yaml'"):
        render_report(compute_figures(snapshot), snapshot, "yaml")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param(3.0, "3", id="whole"),
        pytest.param(3.5, "3.5", id="half"),
        pytest.param(1 / 3, "0.33", id="third"),
        pytest.param(-0.0001, "0", id="negative-zero"),
    ],
)
def test_gpu_counts_show_up_to_two_decimals(value: float, text: str) -> None:
    assert fmt_gpus(value) == text


def test_percentages_have_one_decimal_and_missing_rates_read_n_a() -> None:
    assert (fmt_pct(0.4762), fmt_pct(None), fmt_pct(1.0)) == ("47.6%", "n/a", "100.0%")


def test_mig_idle_reads_idle_over_total_per_profile() -> None:
    assert fmt_mig({"1g.5gb": 3, "3g.20gb": 0}, {"3g.20gb": 2, "1g.5gb": 7}) == "1g.5gb 3/7, 3g.20gb 0/2"
    assert fmt_mig({}, {}) == "-"


def test_an_empty_snapshot_still_renders_in_every_format() -> None:
    snapshot = cluster()
    for fmt in ("text", "markdown", "json"):
        assert render_report(compute_figures(snapshot), snapshot, fmt).endswith("\n")
