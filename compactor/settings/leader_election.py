"""How replicas of the controller take turns: the Lease timings that keep a late write out of the next leader's time
(the ``leader_election`` group; docs/executor.md, "One actor at a time")."""

from __future__ import annotations

from pydantic import Field, model_validator

from compactor.settings.base import Group

DEFAULT_LEASE_SECONDS = 30
DEFAULT_RENEW_DEADLINE_SECONDS = 20.0
DEFAULT_WRITE_TIMEOUT_SECONDS = 4.0


def lease_timing_problem(lease_seconds: float, renew_deadline: float, write_timeout: float) -> str | None:
    """Why these Lease timings cannot keep a late write out of the next leader's time, or None when they can.

    A leader acts while its last successful renewal *began* less than ``renew_deadline`` ago; another replica
    takes the Lease over only after seeing its record unchanged for ``lease_seconds``. Between the two lies
    ``lease_seconds - renew_deadline``. A write checked at the last moment gives up (client side) after
    ``write_timeout`` at most, and a renewal round is two requests (GET, PUT) of ``write_timeout`` each, so:

    * ``2 * write_timeout <= lease_seconds - renew_deadline``: the client side of a fenced write, or a whole
      renewal round, ends at least half the margin before anyone may take over (the other half is left for
      clocks that run at slightly different rates, a pause, a reply in transit);
    * ``lease_seconds / 3 + 2 * write_timeout < renew_deadline``: a round started every third of the lease
      ends before the previous one's renew deadline, so a slow but working API never stops the leader.
    """
    if renew_deadline >= lease_seconds:
        return (
            f"leader_election.renew_deadline_seconds ({renew_deadline:g}) must be shorter than leader_election.lease_seconds "
            f"({lease_seconds:g}): a leader must stop acting before another replica may take the Lease over"
        )
    margin = lease_seconds - renew_deadline
    if 2 * write_timeout > margin:
        return (
            f"leader_election.write_timeout_seconds ({write_timeout:g}) must be at most half of lease_seconds - "
            f"renew_deadline_seconds ({margin:g} s), i.e. {margin / 2:g}: a write checked just before the renew deadline "
            "must have given up well before another replica may take the Lease over"
        )
    if lease_seconds / 3 + 2 * write_timeout >= renew_deadline:
        return (
            f"leader_election.renew_deadline_seconds ({renew_deadline:g}) must exceed a third of lease_seconds plus a "
            f"renewal round of two requests ({lease_seconds / 3:g} + 2 x {write_timeout:g} s): otherwise a slow but working "
            "API server stops the leader between two renewals"
        )
    return None


class LeaderElectionSettings(Group):
    lease_seconds: int = Field(
        DEFAULT_LEASE_SECONDS,
        ge=3,
        description="leaseDurationSeconds of the Lease gpu-compactor-leader: "
        "another replica takes the Lease over once its record "
        "stayed unchanged this long (local monotonic time)",
    )
    renew_deadline_seconds: float = Field(
        DEFAULT_RENEW_DEADLINE_SECONDS,
        gt=0,
        description="the holder acts (every write is fenced on it) only while its last "
        "successful renewal began less than this long ago (client-go's RenewDeadline)",
    )
    write_timeout_seconds: float = Field(
        DEFAULT_WRITE_TIMEOUT_SECONDS,
        gt=0,
        description="timeout of each write (node patches, evictions, events, the state "
        "ConfigMap) and of each request on the Lease; at most half of "
        "lease_seconds - renew_deadline_seconds (reads keep a longer timeout)",
    )

    @model_validator(mode="after")
    def _timing(self) -> LeaderElectionSettings:
        problem = lease_timing_problem(self.lease_seconds, self.renew_deadline_seconds, self.write_timeout_seconds)
        if problem:
            raise ValueError(problem)
        return self
