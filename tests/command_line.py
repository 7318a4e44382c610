"""The ``compactor`` command line run as a child process (``python -m compactor.cli``), and its one-line errors.

``compactor(*args, stdin=..., env=...)`` runs it without the caller's ``COMPACTOR_*`` variables (``env`` adds some
back) and returns the ``CompletedProcess``; ``one_line_error(result)`` checks exit code 2 and a single stderr line
without a traceback, and returns that line; ``assert_one_line_error(result, *fragments)`` also checks the line
holds each fragment.
"""

from __future__ import annotations

import os
import subprocess
import sys


def compactor(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("COMPACTOR_")} | (env or {})
    return subprocess.run(
        [sys.executable, "-m", "compactor.cli", *args],
        capture_output=True,
        text=True,
        input=stdin,
        env=environ,
        timeout=240,
    )


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def assert_one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    line = one_line_error(result)
    for fragment in fragments:
        assert fragment in line, line
