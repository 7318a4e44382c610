"""Every file, folder and module ARCHITECTURE.md names exists (issue [20]): a page that names what is gone misleads the
newcomer it is written for. Paths are read from its `code spans`: repository paths (``compactor/app/``, ``tests/...``),
paths inside the package (``planner/compose.py``, resolved under ``compactor/``), bare file names (``levels.py``, found
anywhere in the package or the tests) and dotted modules (``compactor.kube``)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TOP = ("compactor", "tests", "benchmarks", "manifests", "docs", "config", "examples", ".ci")


def named_paths() -> list[str]:
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    found = []
    for span in re.findall(r"`([^`\n]+)`", text):
        first = span.split()[0]
        if (
            first.endswith((".py", "/"))
            or first.startswith(tuple(f"{t}/" for t in TOP))
            or re.fullmatch(r"compactor(\.[a-z_]+)+", first)
        ):
            found.append(first)
    return sorted(set(found))


def exists(name: str) -> bool:
    if re.fullmatch(r"compactor(\.[a-z_]+)+", name):
        path = ROOT / name.replace(".", "/")
        return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()
    if name.startswith(tuple(f"{t}/" for t in TOP)) or name in (f"{t}/" for t in TOP):
        return (ROOT / name).exists()
    if "/" in name:
        return (ROOT / "compactor" / name).exists()
    return any(ROOT.glob(f"compactor/**/{name}")) or any(ROOT.glob(f"tests/**/{name}"))


def test_architecture_md_names_paths_at_all() -> None:
    names = named_paths()
    assert len(names) > 40 and "compactor/app/" in names and "planner/compose.py" in names, names


def test_every_path_architecture_md_names_exists() -> None:
    missing = [name for name in named_paths() if not exists(name)]
    assert missing == [], f"ARCHITECTURE.md names what does not exist: {missing}"
