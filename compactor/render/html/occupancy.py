"""The occupancy picture of the HTML page: every GPU node as a block of cells, one per GPU or MIG slice, grouped by pool;
for a plan, the marks of what it moves, places, frees and fills, before and after.

Apart from the page's skeleton and the plan's sections because it is the page's one large picture (some 30,000 cells for
1,000 nodes) with rules of its own: which unit is used, moving, placed, stranded or free.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from compactor.metrics.figure_types import AggregateFigures, Figures, NodeFigures
from compactor.model.numbers import fmt_pct
from compactor.model.resources import is_gpu_resource
from compactor.model.types import Snapshot
from compactor.planner.plan import CompactionPlan
from compactor.render.html.page import esc

# Cell classes: one letter each, since a 1,000-node picture has some 30,000 cells (the legend says what they are;
# page.py's stylesheet colours them).
USED, MOVING, PLACED, STRANDED, FREE, FREED = "u", "m", "p", "s", "f", "w"


@dataclass(frozen=True)
class Marks:
    """What a plan changes on the picture: GPU units of pods that move (off a node before, onto it after) or of pending pods
    placed, per node and resource; nodes it frees or fills. Empty for a report."""

    moving: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    placed: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    freed: frozenset[str] = frozenset()
    filled: frozenset[str] = frozenset()
    after: bool = False  # the picture after the plan: free units of freed nodes are drawn as freed

    @property
    def moving_word(self) -> str:
        return "moved here" if self.after else "moving off"


NO_MARKS = Marks()

_LEGEND = (
    (USED, "used"),
    (MOVING, "used by a pod the plan moves {moving}"),
    (PLACED, "used by a pending pod the plan places"),
    (STRANDED, "stranded: free, but no request shape in use can take it"),
    (FREE, "free"),
    (FREED, "free on a node the plan frees"),
)


def _legend(classes: Iterable[str], marks: Marks) -> str:
    """The colours this picture shows, and what the borders mean."""
    shown = set(classes)
    moving = "here" if marks.after else "away"
    keys = "".join(
        f'<span><b class="{c}"></b>{esc(text.format(moving=moving))}</span>' for c, text in _LEGEND if c in shown
    )
    borders = [
        "dashed border: NotReady or cordoned",
        *(["green border: a node the plan frees"] if marks.freed else []),
        *(["purple border: a whole-free node the plan fills"] if marks.filled else []),
    ]
    return (
        f'<div class="legend">{keys}<span>{esc("; ".join(borders))}. Each node is captioned with its name; hover it for '
        f"its figures.</span></div>{TERMS}"
    )


# What the page's figures are counted in (issue 45: the page never said), once, under the legend.
TERMS = (
    '<dl class="terms"><dt>GPU-equivalents</dt><dd>GPU capacity counted in whole GPUs: a MIG slice counts as its share '
    "of its GPU (a 1g.5gb of an A100-40GB: 1/7), a time-sliced replica as 1/replicas; one cell is one unit the device "
    "plugin advertises (a GPU, a slice or a replica).</dd><dt>stranded</dt><dd>free capacity that no request shape in "
    "use can take (a free 1g slice where every pod asks 2g or more): free on paper, of no use to the pods that "
    "wait.</dd><dt>whole-free</dt><dd>a GPU node that runs no GPU pod: what an 8-GPU pod or a MIG re-cut needs."
    "</dd></dl>"
)


def _gpu_resources(node: NodeFigures) -> list[str]:
    return sorted(r for r, amount in node.allocatable.items() if is_gpu_resource(r) and amount > 0)


def _cells(node: NodeFigures, resource: str, marks: Marks) -> list[str]:
    """The cell classes of one GPU resource of a node, one per unit: used, moving, placed, then stranded and free."""
    total = node.allocatable.get(resource, 0)
    used = min(total, max(0, node.allocated.get(resource, 0)))
    moving = min(used, marks.moving.get(node.name, {}).get(resource, 0))
    placed = min(used - moving, marks.placed.get(node.name, {}).get(resource, 0))
    free = total - used
    if marks.after and node.name in marks.freed:
        return [USED] * (used - moving - placed) + [MOVING] * moving + [PLACED] * placed + [FREED] * free
    stranded = min(free, node.stranded_units.get(resource, 0))
    return (
        [USED] * (used - moving - placed)
        + [MOVING] * moving
        + [PLACED] * placed
        + [STRANDED] * stranded
        + [FREE] * (free - stranded)
    )


def _node_title(node: NodeFigures, cells: Mapping[str, list[str]], marks: Marks) -> str:
    parts = []
    for resource, classes in cells.items():
        text = (
            f"{resource.removeprefix('nvidia.com/')} {len(classes) - classes.count(FREE) - classes.count(STRANDED) - classes.count(FREED)}"
            f"/{len(classes)} used"
        )
        extras = ((MOVING, marks.moving_word), (PLACED, "placed"), (STRANDED, "stranded"))
        text += "".join(f", {classes.count(c)} {word}" for c, word in extras if classes.count(c))
        parts.append(text)
    state = [
        s
        for s, on in (
            ("NotReady", not node.ready),
            ("cordoned", not node.schedulable),
            ("freed by the plan", node.name in marks.freed),
            ("filled by the plan", node.name in marks.filled),
        )
        if on
    ]
    return f"{node.name} ({node.pool}): " + "; ".join(parts) + "".join(f"; {s}" for s in state)


def _node_block(node: NodeFigures, marks: Marks) -> tuple[str, list[str]]:
    """A node's block and its cell classes."""
    cells = {r: _cells(node, r, marks) for r in _gpu_resources(node)}
    kind = (
        "node"
        + (" freed" if node.name in marks.freed else "")
        + (" filled" if node.name in marks.filled else "")
        + (" off" if not (node.ready and node.schedulable) else "")
    )
    rows = "".join(
        '<div class="res">' + "".join(f'<i class="{c}"></i>' for c in classes) + "</div>" for classes in cells.values()
    )
    caption = f'<span class="n">{esc(node.name)}</span>'
    return f'<div class="{kind}" title="{esc(_node_title(node, cells, marks))}">{caption}{rows}</div>', [
        c for cs in cells.values() for c in cs
    ]


def _pool_heading(name: str, nodes: int, pool: AggregateFigures | None) -> str:
    if pool is None:
        return f'<h3>{esc(name)} <span class="meta">{nodes} GPU node(s)</span></h3>'
    return (
        f'<h3>{esc(name)} <span class="meta">{nodes} GPU node(s), {pool.gpus} GPUs (physical); whole-free GPUs '
        f"{pool.whole_free_physical_gpus}; stranded share {esc(fmt_pct(pool.stranded_share))}</span></h3>"
    )


def occupancy(figures: Figures, marks: Marks, *, section_id: str, title: str) -> str:
    """Every GPU node as a block of cells (per GPU or MIG slice), grouped by pool, nodes by name; CPU-only nodes are counted."""
    by_pool: dict[str, list[NodeFigures]] = defaultdict(list)
    for node in figures.nodes:
        if _gpu_resources(node):
            by_pool[node.pool].append(node)
    pools = {p.name: p for p in figures.pools}
    drawn: list[str] = []
    out = [f'<section id="{esc(section_id)}"><h2>{esc(title)}</h2>']
    for name in sorted(by_pool):
        nodes = sorted(by_pool[name], key=lambda n: n.name)
        blocks = [_node_block(n, marks) for n in nodes]
        drawn += [c for _, cells in blocks for c in cells]
        out += [
            _pool_heading(name, len(nodes), pools.get(name)),
            '<div class="nodes">' + "".join(b for b, _ in blocks) + "</div>",
        ]
    without = len(figures.nodes) - sum(len(v) for v in by_pool.values())
    if without:
        out.append(f'<p class="meta">{without} node(s) without GPUs are not drawn.</p>')
    if not by_pool:
        out.append("<p>No GPU node.</p>")
    out.insert(1, _legend(drawn, marks))  # under the title: says only what this picture shows
    return "\n".join([*out, "</section>"])


def _units_by_node(pairs: Iterable[tuple[str, Mapping[str, int]]]) -> dict[str, dict[str, int]]:
    """node -> GPU resource -> units, summed over (node, requests) pairs."""
    out: dict[str, dict[str, int]] = defaultdict(dict)
    for node, requests in pairs:
        for resource, amount in requests.items():
            if is_gpu_resource(resource) and amount > 0:
                out[node][resource] = out[node].get(resource, 0) + amount
    return dict(out)


def plan_marks(plan: CompactionPlan, snapshot: Snapshot) -> tuple[Marks, Marks]:
    """The marks of the picture before the plan and after it."""
    requests = {p.key: p.requests for p in snapshot.pods}
    freed, filled = frozenset(plan.freed_nodes), frozenset(plan.filled_nodes)
    before = Marks(moving=_units_by_node((m.from_node, m.requests) for m in plan.moves), freed=freed, filled=filled)
    after = Marks(
        moving=_units_by_node((m.to_node, m.requests) for m in plan.moves),
        placed=_units_by_node((p.to_node, requests.get(p.pod, {})) for p in plan.placed_pending),
        freed=freed,
        filled=filled,
        after=True,
    )
    return before, after
