"""Services the executor's steps share: the make-before-break surge, devices, where a replacement is planned, refusals,
a failed re-cut, the measurements before and after and what a run really did (``outcome.py``), the run's report, the
Lease-fenced client, and the history the restraints read (``memory.py``)."""
