"""What every settings group shares (no operator question of its own): an unknown key is an error, so a typo never
silently falls back to a default, and a group is frozen once read, so one default instance may be shared."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Group(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
