"""Progress on stderr: a log line every few seconds while a plan is solved, a line per step while a run goes."""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a name only: the executor reports it, the application layer passes it on
    from compactor.actions.executor import Progress

log = logging.getLogger("compactor.commands")


class SolveProgress:
    """A log line every few seconds while a plan takes longer than PROGRESS_AFTER seconds: the stage, the time spent and
    the best plan so far, so a large cluster's 10-30 s solve is not silence (one JSON record each with --log-format json)."""

    AFTER = 2.0  # seconds of planning before the first line
    EVERY = 5.0  # seconds between lines within one stage

    def __init__(self) -> None:
        self.began = time.monotonic()
        self.name, self.best, self.said = "", "", ""
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._tick, name="plan-progress", daemon=True)

    def __enter__(self) -> SolveProgress:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.done.set()
        self.thread.join(timeout=1.0)

    def stage(self, name: str, best: str) -> None:
        self.name, self.best = name, best or self.best

    def _tick(self) -> None:
        last = 0.0
        while not self.done.wait(0.5):
            elapsed = time.monotonic() - self.began
            if elapsed < self.AFTER or (self.said == self.name and elapsed - last < self.EVERY):
                continue
            best = f"; best so far: {self.best}" if self.best else ""
            log.info(f"planning: {self.name}, {elapsed:.0f} s{best}")
            self.said, last = self.name, elapsed


_LOGGED_STEPS = ("evicting ", "would evict ")  # each eviction has its own log record: shown once, not twice


class TerminalProgress:
    """Progress on stderr: one rewritten line on a terminal, plain lines otherwise (without the evictions, which are
    logged); with ``--log-format json`` a debug log record each, so stderr holds only JSON."""

    def __init__(self, log_format: str = "text") -> None:
        self.tty = sys.stderr.isatty() and log_format == "text"
        self.json = log_format == "json"
        self.last = ""

    def __call__(self, progress: Progress) -> None:
        wait = f" | waiting: {progress.waiting}" if progress.waiting else ""
        line = f"[{progress.done}/{progress.total}] {progress.current}{wait}"
        if line == self.last:
            return
        self.last = line
        if self.json:
            log.debug(
                "progress",
                extra={
                    "done": progress.done,
                    "total": progress.total,
                    "step": progress.current,
                    "waiting": progress.waiting,
                },
            )
            return
        if not self.tty and progress.current.startswith(_LOGGED_STEPS):
            return
        if self.tty:
            sys.stderr.write("\r\x1b[2K" + line[:200])
            if progress.current == "done":
                sys.stderr.write("\n")
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()
