"""Reading the HTML pages the compactor renders (``compactor report --html``, ``plan --html``), and the plan they draw.

``Page(text)`` parses a page into its start tags, each with its attributes and the ``<section>`` around it (``cells``:
GPU cells by colour class, ``nodes``/``node``: the node boxes of a section); ``plan_of(snapshot)`` is the real
planner's plan (``SETTINGS``: single replicas movable, 5 s) at ``NOW``.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from html.parser import HTMLParser

from compactor.app.plan_document import build_plan
from compactor.model.types import Snapshot
from compactor.planner.plan import CompactionPlan
from compactor.planner.request import PlanRequest
from compactor.settings.bundles import PlannerSettings

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SETTINGS = PlannerSettings.of(min_replicas=1, time_limit_seconds=5)


class Page(HTMLParser):
    """Every start tag of a page with its attributes and the id of the <section> around it."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.section = ""
        self.tags: list[tuple[str, str, dict[str, str]]] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {key: value or "" for key, value in attrs}
        if tag == "section":
            self.section = found.get("id", "")
        self.tags.append((self.section, tag, found))

    def handle_endtag(self, tag: str) -> None:
        if tag == "section":
            self.section = ""

    def cells(self, section: str) -> Counter[str]:
        """GPU cells by colour class."""
        return Counter(a["class"] for s, tag, a in self.tags if s == section and tag == "i")

    def nodes(self, section: str) -> list[dict[str, str]]:
        return [a for s, tag, a in self.tags if s == section and tag == "div" and "node" in a.get("class", "").split()]

    def node(self, section: str, name: str) -> dict[str, str]:
        (found,) = [a for a in self.nodes(section) if a["title"].startswith(f"{name} (")]
        return found


def plan_of(snapshot: Snapshot) -> CompactionPlan:
    return build_plan(PlanRequest.of(snapshot, SETTINGS, source="test", now=NOW))
