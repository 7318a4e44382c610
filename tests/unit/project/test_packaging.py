"""The image pins its dependencies: constraints.txt pins the whole runtime closure within pyproject.toml's ranges, the
Dockerfile installs with it and CI tests what it pins (issue 14, item 4).

``python -m tests.unit.test_packaging`` prints the pins of the installed closure (how constraints.txt is regenerated)."""

from __future__ import annotations

import re
import sys
from importlib.metadata import distribution
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[3]


def _needed(requirement: str) -> Requirement | None:
    """A requirement this platform installs without extras; None for an extra's or another platform's."""
    parsed = Requirement(requirement)
    return None if parsed.marker and not parsed.marker.evaluate({"extra": ""}) else parsed


def runtime_closure() -> dict[str, str]:
    """Installed version of every package gpu-compactor needs at run time, transitively (no test or dev extras)."""
    found: dict[str, str] = {}
    waiting = [r for r in map(_needed, distribution("gpu-compactor").requires or []) if r]
    while waiting:
        requirement = waiting.pop()
        name = canonicalize_name(requirement.name)
        if name in found:
            continue
        installed = distribution(requirement.name)
        found[name] = installed.version
        waiting += [r for r in map(_needed, installed.requires or []) if r]
    return dict(sorted(found.items()))


def pins() -> dict[str, str]:
    lines = (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines()
    entries = [line.split("#")[0].strip() for line in lines]
    pairs = [entry.split("==") for entry in entries if entry]
    assert all(len(pair) == 2 for pair in pairs), "constraints.txt: every line pins one version with =="
    return {canonicalize_name(name): version for name, version in pairs}


def test_constraints_pin_the_whole_runtime_closure_as_installed() -> None:
    installed, pinned = runtime_closure(), pins()
    assert set(installed) <= set(pinned), f"constraints.txt lacks {sorted(set(installed) - set(pinned))}"
    assert set(pinned) <= set(installed), (
        f"constraints.txt pins packages nothing needs: {sorted(set(pinned) - set(installed))}"
    )
    differing = {name: (pinned[name], version) for name, version in installed.items() if pinned[name] != version}
    assert not differing, f"installed versions differ from the pins (pinned, installed): {differing}"


def test_every_pin_is_within_pyproject_ranges() -> None:
    pinned = pins()
    for requirement in filter(None, map(_needed, distribution("gpu-compactor").requires or [])):
        assert requirement.specifier.contains(pinned[canonicalize_name(requirement.name)], prereleases=True), (
            requirement
        )


def test_the_image_and_ci_install_with_the_constraints() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert re.search(r"^COPY [^\n]*constraints\.txt", dockerfile, re.M)
    assert re.search(r"pip install [^\n]*-c constraints\.txt[^\n]* \.$", dockerfile, re.M), (
        "the image installs unpinned"
    )
    assert re.search(r"pip install [^\n]*-c constraints\.txt", (ROOT / ".ci" / "run").read_text(encoding="utf-8")), (
        "CI tests unpinned"
    )


if __name__ == "__main__":
    sys.stdout.writelines(f"{name}=={version}\n" for name, version in runtime_closure().items())
