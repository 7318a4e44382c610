"""What every settings group shares (no operator question of its own): an unknown key is an error, so a typo never
silently falls back to a default, and a group is frozen once read, so one default instance may be shared. A bundle
gathers the groups one component reads (bundles.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from pydantic import BaseModel, ConfigDict


class Group(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy; refuses a key the group does not have (pydantic would set it unvalidated and unread)."""
        self._refuse_unknown(update or {})
        return super().model_copy(update=update, deep=deep)

    def amended(self, **changes: Any) -> Self:
        """A copy with ``changes``, validated as the YAML is (``model_copy`` validates nothing)."""
        self._refuse_unknown(changes)
        return type(self).model_validate({**self.model_dump(), **changes})

    def _refuse_unknown(self, changes: Mapping[str, Any]) -> None:
        unknown = sorted(set(changes) - set(type(self).model_fields))
        if unknown:
            raise TypeError(f"{type(self).__name__} has no setting {unknown[0]!r}")


class Bundle(Group):
    """The groups one component reads. Each field is a group; no two groups of a bundle share a field name, so a change
    can be named by the field alone (``amended(max_moves=3)``)."""

    def amended(self, **changes: Any) -> Self:
        """A copy with ``changes`` (field names of its groups, or whole groups by name), validated as the YAML is."""
        groups = type(self).model_fields
        data: dict[str, Any] = {name: getattr(self, name).model_dump() for name in groups}
        for name, value in changes.items():
            if name in groups:
                data[name] = value
                continue
            owners = [group for group in groups if name in type(getattr(self, group)).model_fields]
            if not owners:
                raise TypeError(f"{type(self).__name__} has no setting {name!r}")
            data[owners[0]][name] = value
        return type(self).model_validate(data)

    def groups(self) -> dict[str, Group]:
        """Its groups by name, as the settings document holds them."""
        return {name: getattr(self, name) for name in type(self).model_fields}

    @classmethod
    def of(cls, **changes: Any) -> Self:
        """The defaults with ``changes`` (as ``amended``)."""
        return cls().amended(**changes)
