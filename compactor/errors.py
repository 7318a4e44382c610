"""Typed failures that the CLI turns into one-line messages and exit code 2."""

from __future__ import annotations


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
        return f"{where}: {self.message}" if where else self.message

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
