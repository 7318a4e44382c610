"""Typed failures that the CLI turns into one-line messages and exit code 2, and every exit code a command ends with
(one home: the command line, the run's record and the CronJob's alerts read the same numbers)."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1  # a run that failed, or did not do what it planned
EXIT_BAD_INPUT = 2  # bad input or options: one line naming what is wrong
EXIT_INTERRUPTED = 130  # 128 + SIGINT: an operator's Ctrl-C
EXIT_STOPPED = 143  # 128 + SIGTERM, as a shell reports a process that a TERM stopped (at a safe point)


class CompactorError(Exception):
    """Base class for errors that are reported to the user without a traceback."""


class InputError(CompactorError):
    """Bad input: names the file, the object and the field at fault."""

    def __init__(self, message: str, *, source: str = "", obj: str = "", field: str = "") -> None:
        self.message = message
        self.source = source
        self.obj = obj
        self.field = field
        super().__init__(self.describe())

    def describe(self) -> str:
        parts = [p for p in (self.source, self.obj, self.field) if p]
        where = ": ".join(parts)
        text = f"{where}: {self.message}" if where else self.message
        # One line, always: names and messages from the input may carry line breaks.
        return text.replace("\r", "\\r").replace("\n", "\\n")

    def located(self, *, source: str = "", obj: str = "") -> InputError:
        """The same error with the file/object filled in where still missing."""
        return InputError(
            self.message,
            source=self.source or source,
            obj=self.obj or obj,
            field=self.field,
        )


class ConfigError(CompactorError):
    """Invalid or contradictory configuration."""


class ClusterError(CompactorError):
    """The live cluster could not be read or written: unreachable, unauthorised, forbidden, or a bad reply.

    ``status`` is the HTTP status of the API reply (0 when no reply arrived); ``retry_after`` the seconds the API server
    asked the client to wait before trying again (429, some 5xx), when it said.
    """

    # True when retrying cannot help, whatever the status says (a write this process may no longer make): the retries
    # of ``actions/cluster/retry.py`` give up at once
    final = False

    def __init__(self, message: str, *, status: int = 0, retry_after: float | None = None) -> None:
        self.message = message
        self.status = status
        self.retry_after = retry_after
        super().__init__(message)
