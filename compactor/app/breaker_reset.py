"""``compactor breaker reset``: the circuit breaker closed by hand, under the Lease, with an Event (``memory.reset_breaker``).

The breaker pauses every run once too many moves failed (``disruption.breaker_*``); it closes by itself after
``breaker_pause_minutes``. An operator who fixed the cause need not wait, nor delete the history (which would drop the
cooldowns with it): the reset lifts the pause and forgets the failed moves, keeping the moves made.
"""

from __future__ import annotations

from compactor.actions.services.memory import reset_breaker
from compactor.app.invocation import Invocation
from compactor.app.wiring import acting


def reset(inv: Invocation) -> str:
    """Reset the breaker of the invocation's live cluster; what was done, in words."""
    with acting(inv) as (client, clock):
        return reset_breaker(client, inv.settings, clock.now())
