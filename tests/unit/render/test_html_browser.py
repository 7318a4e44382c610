"""The ``-o html`` page in a real browser: headless Chromium renders it without a console error, the DOM it builds has every
node block and GPU cell the page was written with, and the screenshot shows the picture's colours.

Chromium comes with Debian's ``chromium`` package (or set CHROMIUM to a Chromium or Chrome binary); without it these tests
skip, except in CI, which sets GPU_COMPACTOR_REQUIRE_CHROMIUM and so fails them instead. Locally:
``apt-get install chromium && python -m pytest tests/unit/render/test_html_browser.py``.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from pathlib import Path

import pytest

from compactor.model.types import Snapshot
from compactor.render.html import render_plan_html
from tests.builders import A100_40, H100_80, cluster, node, pdb, pod
from tests.html_pages import Page, plan_of
from tests.tools import required

CHROMIUM = (
    os.environ.get("CHROMIUM")
    or shutil.which("chromium")
    or shutil.which("chromium-browser")
    or shutil.which("google-chrome")
)
WINDOW = (1100, 1300)
# The cell colours of compactor/render/html.py's stylesheet, as the screenshot must show them.
USED, MOVING, FREED = (0x4A, 0x6F, 0xA5), (0xE0, 0xA5, 0x26), (0x2E, 0xA4, 0x4F)
INNER_PIXELS = 4 * 4  # of a 6 x 6 px cell, whatever sub-pixel offset its edges blend at


@pytest.fixture
def chromium() -> str:
    """On a laptop without Chromium these tests skip; CI installs it and sets GPU_COMPACTOR_REQUIRE_CHROMIUM, so there a
    missing browser fails them instead of leaving the page unchecked."""
    return required(
        CHROMIUM,
        name="chromium",
        require_env="GPU_COMPACTOR_REQUIRE_CHROMIUM",
        install="Debian: apt-get install chromium, or set CHROMIUM",
    )


def _browse(chromium: str, page: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Chromium headless on ``page``, its console on stderr (a fresh profile: nothing cached, no other instance to join)."""
    command = [
        chromium,
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--no-first-run",
        f"--user-data-dir={page.parent / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        *args,
        page.as_uri(),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def _console(stderr: str) -> list[str]:
    """What the page wrote to the console (errors, CSP refusals, uncaught exceptions), from Chromium's log lines."""
    return re.findall(r":CONSOLE[^\]]*\] (.*)", stderr)


def _pixels(png: bytes) -> Counter[tuple[int, int, int]]:
    """Pixel colours of an 8-bit RGB or RGBA PNG (what Chromium writes), decoded with the standard library."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    position, data = 8, b""
    while position < len(png):
        (length,), kind = struct.unpack(">I", png[position : position + 4]), png[position + 4 : position + 8]
        chunk = png[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8 and colour in (2, 6), (depth, colour)
        elif kind == b"IDAT":
            data += chunk
        position += 12 + length
    size = 3 if colour == 2 else 4
    stride, raw, previous = width * size, zlib.decompress(data), bytearray(width * size)
    counts: Counter[tuple[int, int, int]] = Counter()
    for y in range(height):
        line = _unfilter(
            raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)]), previous, size
        )
        counts.update(zip(line[0::size], line[1::size], line[2::size], strict=True))
        previous = line
    return counts


def _unfilter(kind: int, line: bytearray, above: bytearray, size: int) -> bytearray:
    """Undo one scanline's PNG filter (RFC 2083, 6.2-6.6)."""
    if kind == 2:
        return bytearray((a + b) & 255 for a, b in zip(line, above, strict=True))
    for i in range(len(line)):
        left = line[i - size] if i >= size else 0
        corner = above[i - size] if i >= size else 0
        if kind == 1:
            line[i] = (line[i] + left) & 255
        elif kind == 3:
            line[i] = (line[i] + (left + above[i]) // 2) & 255
        elif kind == 4:
            estimate = left + above[i] - corner
            a, b, c = abs(estimate - left), abs(estimate - above[i]), abs(estimate - corner)
            line[i] = (line[i] + (left if a <= b and a <= c else above[i] if b <= c else corner)) & 255
    return line


def small_cluster() -> Snapshot:
    """Two pools, a MIG node, a cordoned node; the plan moves gpu-2's pods onto gpu-1 and frees gpu-2."""
    return cluster(
        node("gpu-1", gpus=8),
        node("gpu-2", gpus=8),
        node("gpu-3", gpus=8, unschedulable=True),
        node("mig-1", mig={"1g.5gb": 7}, product=A100_40),
        node("h100-1", gpus=8, product=H100_80),
        node("cpu-1"),
        pod("a-0", on="gpu-1", gpus=4, owner=None),
        pod("c-0", on="gpu-3", gpus=2, owner=None),
        pod("b-0", on="gpu-2", gpus=1, labels={"app": "b"}),
        pod("b-1", on="gpu-2", gpus=1, labels={"app": "b"}),
        pod("s-0", on="mig-1", mig="1g.5gb", owner=None),
        pod("h-0", on="h100-1", gpus=2, owner=None),
        pdb("b-budget", match={"app": "b"}, allowed=1),
    )


@pytest.fixture
def plan_page(tmp_path: Path) -> tuple[Path, str]:
    snapshot = small_cluster()
    plan = plan_of(snapshot)
    assert plan.freed_nodes == ["gpu-2"]
    text = render_plan_html(plan, snapshot)
    page = tmp_path / "plan.html"
    page.write_text(text, encoding="utf-8")
    return page, text


def test_the_browser_reports_no_console_error_on_a_page_that_has_one(chromium: str, tmp_path: Path) -> None:
    """The console check below can fail: a page with a script error is caught by it."""
    page = tmp_path / "broken.html"
    page.write_text(
        '<!DOCTYPE html><html><body><script>throw new Error("boom")</script></body></html>', encoding="utf-8"
    )
    assert any("Uncaught Error: boom" in line for line in _console(_browse(chromium, page, "--dump-dom").stderr))


def test_the_dom_chromium_builds_has_every_node_and_cell_and_no_console_error(
    chromium: str, plan_page: tuple[Path, str]
) -> None:
    page, text = plan_page
    rendered = _browse(chromium, page, "--dump-dom")
    assert _console(rendered.stderr) == []
    dom, source = Page(rendered.stdout), Page(text)
    for section in ("before", "after"):
        assert len(dom.nodes(section)) == 5  # the GPU nodes; cpu-1 is not drawn
        assert dom.cells(section) == source.cells(section)
    assert dom.cells("after")["w"] == 8 and dom.cells("before")["m"] == 2
    assert sum(1 for _, tag, a in dom.tags if tag == "circle" and a["class"] == "pt chosen") == 1


def test_the_screenshot_shows_the_pictures_colours(chromium: str, plan_page: tuple[Path, str]) -> None:
    page, _ = plan_page
    shot = page.parent / "plan.png"
    _browse(chromium, page, f"--screenshot={shot}")
    pixels = _pixels(shot.read_bytes())
    assert sum(pixels.values()) == WINDOW[0] * WINDOW[1]
    white = pixels[(255, 255, 255)]
    assert len(pixels) > 50 and white < 0.97 * sum(pixels.values())  # not blank: text, cells, the curve
    used_cells = 4 + 1 + 2  # gpu-1, mig-1 and h100-1 in each picture (cordoned gpu-3 is drawn faded, in other colours)
    assert pixels[USED] >= 2 * used_cells * INNER_PIXELS
    assert pixels[MOVING] >= 2 * 2 * INNER_PIXELS  # b-0 and b-1, leaving gpu-2 and arrived on gpu-1
    assert pixels[FREED] >= 8 * INNER_PIXELS  # gpu-2 after the plan
