"""Real tools some tests drive (promtool, Chromium): skipped on a laptop without them, required in CI."""

from __future__ import annotations

import os

import pytest


def required(path: str | None, *, name: str, require_env: str, install: str) -> str:
    """``path`` when the tool is installed. Without it the test skips, unless ``require_env`` is set (CI sets it after
    installing the tool), where it fails instead of leaving what it checks unchecked."""
    if path is None:
        if os.environ.get(require_env):
            pytest.fail(f"{name} not installed but {require_env} is set ({install})")
        pytest.skip(f"{name} not installed ({install})")
    return path
