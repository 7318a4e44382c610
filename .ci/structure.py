"""The structure gates of issue [20], run by .ci/run beside the linters (seconds, no cluster):

* no module of ``compactor/`` over MAX_LINES lines, and at most LARGE_ALLOWED over LARGE_LINES (the list only shrinks:
  lower LARGE_ALLOWED when a module leaves it);
* the top of the package holds only ``TOP_LEVEL`` files (and packages);
* no function in ``compactor/app/`` or ``compactor/commands/`` over USE_CASE_LINES lines (a use case reads top to
  bottom; what is longer is a stage of its own);
* issue [26]'s floor plan: at most WING_MODULES modules directly inside ``planner/`` and ``actions/`` (the rest in
  their wings), no file-name prefix shared by PREFIX_FAMILY modules of one folder unless the folder has that name (a
  family gets a folder), at most REPEATED_NAMES file names repeated across packages, and at most ROOM_ARROWS import
  arrows between the rooms of ``planner/`` and of ``actions/`` (a room: a module directly inside, or a wing taken
  whole; an arrow: one room importing another, counted once).

The complexity gates (ruff C901, PLR0913) and the paths ARCHITECTURE.md names (tests/unit/project/test_architecture_paths.py)
are checked by their own tools; .ci/run runs them as steps of their own.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "compactor"
MAX_LINES = 600
LARGE_LINES = 400
LARGE_ALLOWED = 6  # issue [20]: at most 6 modules over LARGE_LINES
# statuses.py: how a run ends, the vocabulary every layer and the exporter read, as errors.py is for failures;
# clock.py: time as the executor and the controller's loop keep it (a stop interrupts either at its next wait)
TOP_LEVEL = {"__init__.py", "cli.py", "clock.py", "errors.py", "logs.py", "py.typed", "statuses.py"}
USE_CASE_LINES = 50
WING_MODULES = 16
PREFIX_FAMILY = 3
REPEATED_NAMES = 10
ROOM_ARROWS = {"planner": 70, "actions": 40}


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def problems() -> list[str]:
    found = []
    modules = sorted(PACKAGE.rglob("*.py"))
    sizes = {path.relative_to(ROOT).as_posix(): lines(path) for path in modules}
    found += [f"{name}: {n} lines (at most {MAX_LINES})" for name, n in sizes.items() if n > MAX_LINES]
    large = sorted(name for name, n in sizes.items() if n > LARGE_LINES)
    if len(large) > LARGE_ALLOWED:
        found.append(f"{len(large)} modules over {LARGE_LINES} lines (at most {LARGE_ALLOWED}): {', '.join(large)}")
    stray = sorted(p.name for p in PACKAGE.iterdir() if p.is_file() and p.name not in TOP_LEVEL)
    found += [f"compactor/{name}: only {', '.join(sorted(TOP_LEVEL))} sit at the package's top" for name in stray]
    for folder in ("app", "commands"):
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    length = (node.end_lineno or node.lineno) - node.lineno + 1
                    if length > USE_CASE_LINES:
                        where = path.relative_to(ROOT).as_posix()
                        found.append(f"{where}:{node.lineno}: {node.name} is {length} lines (at most {USE_CASE_LINES})")
    return found + floor_plan(modules)


def floor_plan(modules: list[Path]) -> list[str]:
    found = []
    for wing in ("planner", "actions"):
        inside = [p for p in (PACKAGE / wing).glob("*.py") if p.name != "__init__.py"]
        if len(inside) > WING_MODULES:
            found.append(f"compactor/{wing}/: {len(inside)} modules directly inside (at most {WING_MODULES})")
    for folder in sorted({p.parent for p in modules}):
        prefixes = Counter(p.stem.split("_")[0] for p in folder.glob("*_*.py"))
        found += [
            f"{folder.relative_to(ROOT).as_posix()}/: {n} modules named {prefix}_* (a family gets a folder of its name)"
            for prefix, n in sorted(prefixes.items())
            if n >= PREFIX_FAMILY and prefix != folder.name
        ]
    names = Counter(p.name for p in modules if p.name != "__init__.py")
    repeated = sorted(name for name, n in names.items() if n > 1)
    if len(repeated) > REPEATED_NAMES:
        found.append(
            f"{len(repeated)} file names repeated across packages (at most {REPEATED_NAMES}): {', '.join(repeated)}"
        )
    for wing, most in ROOM_ARROWS.items():
        arrows = room_arrows(wing)
        if len(arrows) > most:
            found.append(f"compactor/{wing}/: {len(arrows)} import arrows between its rooms (at most {most})")
    return found


def room_arrows(wing: str) -> set[tuple[str, str]]:
    """(room, room) for every import between two different rooms of ``compactor/<wing>/``."""
    base = f"compactor.{wing}"
    arrows = set()
    for path in sorted((PACKAGE / wing).rglob("*.py")):
        parts = path.relative_to(PACKAGE / wing).with_suffix("").parts
        source = parts[0] if parts[0] != "__init__" else "__init__"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                targets = (
                    [f"{node.module}.{alias.name}" for alias in node.names] if node.module == base else [node.module]
                )
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                continue
            for target in targets:
                if target.startswith(base + "."):
                    room = target[len(base) + 1 :].split(".")[0]
                    if room != source:
                        arrows.add((source, room))
    return arrows


def main() -> int:
    found = problems()
    for problem in found:
        print(problem, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
