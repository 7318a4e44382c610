"""What a command loads: OR-Tools (and the pandas it pulls in) take most of a second to import, so only commands that
plan pay for them (``compactor.planner.cpsat`` imports it on first use)."""

from __future__ import annotations

import subprocess
import sys

LOADED = """
import contextlib, io, sys
from compactor.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    main(sys.argv[1:])
print(" ".join(m for m in ("ortools", "pandas") if m in sys.modules))
"""


def _loaded_by(*argv: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", LOADED, *argv], capture_output=True, text=True, check=True, timeout=120
    )
    return set(done.stdout.split())


def test_a_report_never_loads_the_solver() -> None:
    assert _loaded_by("report", "--example") == set()


def test_a_plan_loads_it_when_it_solves() -> None:
    assert "ortools" in _loaded_by("plan", "--example", "--time-limit", "1")
